/* summary/summary.c - graph summaries (tf.summary.scalar / histogram).
 *
 * A summary is an Identity of its input, named after the tag under the
 * current scope (made unique like every node name); that node's full name
 * is the tag, as TF's summary_scope makes it. The graph keeps them in two
 * output collections (engine/variables.c), so nothing outside the graph
 * holds them:
 *   "summaries"            every summary, in creation order;
 *   "summaries_histogram"  the histogram ones.
 * loom_graph_summaries builds its tags/kinds arrays from those (see the
 * lifetime note there). */
#include <pthread.h>
#include <string.h>
#include "engine/engine_api.h"
#include "loom/loom_summary.h"
#include "loom/loom_train.h"

#define COLL_ALL "summaries"
#define COLL_HIST "summaries_histogram"

static int numeric(loom_dtype dt) {
  return dt == LOOM_F32 || dt == LOOM_F64 || dt == LOOM_I32 || dt == LOOM_I64 || dt == LOOM_U8 || dt == LOOM_BOOL;
}

static loom_output add_summary(loom_graph *g, const char *tag, loom_output x, loom_summary_kind kind) {
  const char *what = kind == LOOM_SUMMARY_SCALAR ? "scalar" : "histogram";
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
  loom_output y = loom_identity(g, x, tag);
  if (loom_graph_status(g, NULL) != LOOM_OK) return y;
  loom_add_to_collection(g, COLL_ALL, y);
  if (kind == LOOM_SUMMARY_HISTOGRAM) loom_add_to_collection(g, COLL_HIST, y);
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
  int n, nh; /* the collections' sizes they were built from */
  const char **tags;
  loom_summary_kind *kinds;
} sum_arrays;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* several threads may list one graph */

static void arrays_free(void *p) {
  sum_arrays *a = p;
  loom__free(a->tags);
  loom__free(a->kinds);
  loom__free(a);
}

int loom_graph_summaries(loom_graph *g, const char *const **tags, const loom_summary_kind **kinds,
                         const loom_output **outputs) {
  if (tags) *tags = NULL;
  if (kinds) *kinds = NULL;
  if (outputs) *outputs = NULL;
  if (!g) return 0;
  int n = 0, nh = 0;
  const loom_output *all = loom_get_collection(g, COLL_ALL, &n);
  const loom_output *hist = loom_get_collection(g, COLL_HIST, &nh);
  if (outputs) *outputs = all;
  if (!n || (!tags && !kinds)) return n;
  pthread_mutex_lock(&g_mu);
  sum_arrays *e = loom__graph_ext(g, LOOM__GRAPH_EXT_SUMMARIES);
  if (!e && (e = loom__calloc(1, sizeof *e))) loom__graph_set_ext(g, LOOM__GRAPH_EXT_SUMMARIES, e, arrays_free);
  if (e && (e->n != n || e->nh != nh)) {
    const char **t = loom__malloc((size_t)n * sizeof *t);
    loom_summary_kind *k = loom__malloc((size_t)n * sizeof *k);
    if (t && k) {
      for (int i = 0; i < n; i++) {
        t[i] = loom_node_name(all[i].node);
        k[i] = LOOM_SUMMARY_SCALAR;
        for (int j = 0; j < nh; j++)
          if (hist[j].node == all[i].node && hist[j].index == all[i].index) k[i] = LOOM_SUMMARY_HISTOGRAM;
      }
      loom__free(e->tags);
      loom__free(e->kinds);
      e->tags = t;
      e->kinds = k;
      e->n = n;
      e->nh = nh;
    } else {
      loom__free(t);
      loom__free(k);
    }
  }
  if (e && e->n == n && e->nh == nh) {
    if (tags) *tags = e->tags;
    if (kinds) *kinds = e->kinds;
  }
  pthread_mutex_unlock(&g_mu);
  return n;
}
