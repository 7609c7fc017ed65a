/* summary/summary.c - graph summaries (tf.summary.scalar / histogram / image).
 *
 * A summary is an Identity of its input, named after the tag under the
 * current scope (made unique like every node name); that node's full name
 * is the tag, as TF's summary_scope makes it. The graph keeps them in two
 * output collections (engine/variables.c), so nothing outside the graph
 * holds them:
 *   "summaries"            every summary, in creation order;
 *   "summaries_histogram"  the histogram ones;
 *   "summaries_image"      the image ones (their max_outputs kept in the
 *                          graph's summaries slot, loom__summary_image_max).
 * loom_graph_summaries builds its tags/kinds arrays from those (see the
 * lifetime note there). */
#include <pthread.h>
#include <string.h>
#include "engine/engine_api.h"
#include "loom/loom_summary.h"
#include "loom/loom_train.h"
#include "summary/summary_internal.h"

#define COLL_ALL "summaries"
#define COLL_HIST "summaries_histogram"
#define COLL_IMAGE "summaries_image"

static int numeric(loom_dtype dt) {
  return dt == LOOM_F32 || dt == LOOM_F64 || dt == LOOM_I32 || dt == LOOM_I64 || dt == LOOM_U8 || dt == LOOM_BOOL;
}

static loom_output add_summary(loom_graph *g, const char *tag, loom_output x, loom_summary_kind kind) {
  const char *what = kind == LOOM_SUMMARY_SCALAR ? "scalar" : kind == LOOM_SUMMARY_IMAGE ? "image" : "histogram";
  if (!g) return (loom_output){NULL, 0};
  if (loom_graph_status(g, NULL) != LOOM_OK) return loom__graph_dummy(g);
  if (!tag || !*tag) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "summary %s: the tag is empty", what);
    return loom__graph_dummy(g);
  }
  if (!loom_output_valid(x)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "summary %s %s: invalid input", what, tag);
    return loom__graph_dummy(g);
  }
  loom_dtype dt = loom_output_dtype(x);
  if (!numeric(dt)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "summary %s %s: input of dtype %s is not numeric", what, tag,
                         loom_dtype_name(dt));
    return loom__graph_dummy(g);
  }
  if (kind == LOOM_SUMMARY_SCALAR) {
    int64_t dims[LOOM_MAX_DIMS];
    int nd = loom_output_dims(x, dims), known = 1;
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) {
      if (dims[i] < 0) known = 0;
      else numel *= dims[i];
    }
    if (known && numel != 1) {
      char buf[128];
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "summary scalar %s: needs a scalar (one value), got shape %s",
                           tag, loom__dims_str(buf, sizeof buf, nd, dims));
      return loom__graph_dummy(g);
    }
  }
  if (kind == LOOM_SUMMARY_IMAGE) {
    int64_t dims[LOOM_MAX_DIMS];
    int nd = loom_output_dims(x, dims);
    char buf[128];
    if (dt != LOOM_F32 && dt != LOOM_F64 && dt != LOOM_U8) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "summary image %s: the tensor must be uint8, float32 or "
                           "float64, got %s", tag, loom_dtype_name(dt));
      return loom__graph_dummy(g);
    }
    if (nd != 4 || (dims[3] != 1 && dims[3] != 3 && dims[3] != 4)) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "summary image %s: the tensor must be 4-D [batch_size, height, "
                           "width, channels] with 1, 3 or 4 (known) channels, got shape %s", tag,
                           loom__dims_str(buf, sizeof buf, nd, dims));
      return loom__graph_dummy(g);
    }
  }
  loom_output y = loom_identity(g, x, tag);
  if (loom_graph_status(g, NULL) != LOOM_OK) return y;
  loom_add_to_collection(g, COLL_ALL, y);
  if (kind == LOOM_SUMMARY_HISTOGRAM) loom_add_to_collection(g, COLL_HIST, y);
  if (kind == LOOM_SUMMARY_IMAGE) loom_add_to_collection(g, COLL_IMAGE, y);
  return y;
}

loom_output loom_summary_scalar(loom_graph *g, const char *tag, loom_output x) {
  return add_summary(g, tag, x, LOOM_SUMMARY_SCALAR);
}
loom_output loom_summary_histogram(loom_graph *g, const char *tag, loom_output x) {
  return add_summary(g, tag, x, LOOM_SUMMARY_HISTOGRAM);
}

/* ---- tags/kinds arrays ----
 * Kept with the graph (its LOOM__GRAPH_EXT_SUMMARIES slot, freed with it)
 * and rebuilt when the summary collections have grown since the last call, so
 * the arrays a caller got stay valid until a summary is added or the graph is
 * freed. Collections only grow, so an unchanged count means unchanged
 * contents and nothing is written. */
typedef struct sum_arrays {
  int n, nh, ni; /* the collections' sizes they were built from */
  const char **tags;
  loom_summary_kind *kinds;
  int nimg, capimg; /* the image summaries' nodes and max_outputs */
  const loom_node **img_nodes;
  int *img_max;
} sum_arrays;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* several threads may list one graph */

static void arrays_free(void *p) {
  sum_arrays *a = p;
  loom__free(a->tags);
  loom__free(a->kinds);
  loom__free(a->img_nodes);
  loom__free(a->img_max);
  loom__free(a);
}

int loom_graph_summaries(loom_graph *g, const char *const **tags, const loom_summary_kind **kinds,
                         const loom_output **outputs) {
  if (tags) *tags = NULL;
  if (kinds) *kinds = NULL;
  if (outputs) *outputs = NULL;
  if (!g) return 0;
  int n = 0, nh = 0, ni = 0;
  const loom_output *all = loom_get_collection(g, COLL_ALL, &n);
  const loom_output *hist = loom_get_collection(g, COLL_HIST, &nh);
  const loom_output *img = loom_get_collection(g, COLL_IMAGE, &ni);
  if (outputs) *outputs = all;
  if (!n || (!tags && !kinds)) return n;
  pthread_mutex_lock(&g_mu);
  sum_arrays *e = loom__graph_ext(g, LOOM__GRAPH_EXT_SUMMARIES);
  if (!e && (e = loom__calloc(1, sizeof *e))) loom__graph_set_ext(g, LOOM__GRAPH_EXT_SUMMARIES, e, arrays_free);
  if (e && (e->n != n || e->nh != nh || e->ni != ni)) {
    const char **t = loom__malloc((size_t)n * sizeof *t);
    loom_summary_kind *k = loom__malloc((size_t)n * sizeof *k);
    if (t && k) {
      for (int i = 0; i < n; i++) {
        t[i] = loom_node_name(all[i].node);
        k[i] = LOOM_SUMMARY_SCALAR;
        for (int j = 0; j < nh; j++)
          if (hist[j].node == all[i].node && hist[j].index == all[i].index) k[i] = LOOM_SUMMARY_HISTOGRAM;
        for (int j = 0; j < ni; j++)
          if (img[j].node == all[i].node && img[j].index == all[i].index) k[i] = LOOM_SUMMARY_IMAGE;
      }
      loom__free(e->tags);
      loom__free(e->kinds);
      e->tags = t;
      e->kinds = k;
      e->n = n;
      e->nh = nh;
      e->ni = ni;
    } else {
      loom__free(t);
      loom__free(k);
    }
  }
  if (e && e->n == n && e->nh == nh && e->ni == ni) {
    if (tags) *tags = e->tags;
    if (kinds) *kinds = e->kinds;
  }
  pthread_mutex_unlock(&g_mu);
  return n;
}

/* ---- image summaries ---- */
loom_output loom_summary_image(loom_graph *g, const char *tag, loom_output x, int max_outputs) {
  if (g && loom_graph_status(g, NULL) == LOOM_OK && max_outputs < 1) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "summary image %s: max_outputs must be at least 1, got %d",
                         tag ? tag : "", max_outputs);
    return loom__graph_dummy(g);
  }
  loom_output y = add_summary(g, tag, x, LOOM_SUMMARY_IMAGE);
  if (!g || loom_graph_status(g, NULL) != LOOM_OK) return y;
  pthread_mutex_lock(&g_mu);
  sum_arrays *e = loom__graph_ext(g, LOOM__GRAPH_EXT_SUMMARIES);
  if (!e && (e = loom__calloc(1, sizeof *e))) loom__graph_set_ext(g, LOOM__GRAPH_EXT_SUMMARIES, e, arrays_free);
  int ok = e != NULL;
  if (ok && e->nimg == e->capimg) {
    int cap = e->capimg ? 2 * e->capimg : 4;
    const loom_node **nn = loom__realloc(e->img_nodes, (size_t)cap * sizeof *nn);
    if (nn) e->img_nodes = nn;
    int *nm = nn ? loom__realloc(e->img_max, (size_t)cap * sizeof *nm) : NULL;
    if (nm) e->img_max = nm;
    if (nn && nm) e->capimg = cap;
    else ok = 0;
  }
  if (ok) {
    e->img_nodes[e->nimg] = y.node;
    e->img_max[e->nimg++] = max_outputs;
  }
  pthread_mutex_unlock(&g_mu);
  if (!ok) loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "summary image %s: out of memory", tag);
  return y;
}

int loom__summary_image_max(loom_graph *g, const loom_node *n) {
  int m = 3;
  pthread_mutex_lock(&g_mu);
  sum_arrays *e = loom__graph_ext(g, LOOM__GRAPH_EXT_SUMMARIES);
  for (int i = 0; e && i < e->nimg; i++)
    if (e->img_nodes[i] == n) m = e->img_max[i];
  pthread_mutex_unlock(&g_mu);
  return m;
}
