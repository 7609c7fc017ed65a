/* estimator/summary.c - graph summaries (tf.summary.scalar / histogram).
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
#include "engine/engine_impl.h"
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
  if (loom__graph_failed(g)) return loom__graph_dummy(g);
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
  if (loom__graph_failed(g)) return y;
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
 * The graph has no slot for this layer's data, so the arrays live in a
 * small table keyed by graph, rebuilt from the collections on every call
 * (a freed graph's entry is simply reused or dropped; nothing in it is
 * trusted across calls). At most MAX_ENTRIES graphs are kept, the least
 * recently listed one dropped first. */
#define MAX_ENTRIES 16
typedef struct sum_entry {
  const loom_graph *g;
  int cap;
  const char **tags;
  loom_summary_kind *kinds;
  struct sum_entry *next;
} sum_entry;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static sum_entry *g_head;

static void entry_free(sum_entry *e) {
  loom__free(e->tags);
  loom__free(e->kinds);
  loom__free(e);
}

/* The entry for g, moved to the front; NULL when out of memory. */
static sum_entry *entry_get(const loom_graph *g, int n) {
  sum_entry **pp = &g_head, *e = NULL;
  int count = 0;
  for (; *pp; pp = &(*pp)->next, count++)
    if ((*pp)->g == g) {
      e = *pp;
      *pp = e->next;
      break;
    }
  if (!e) {
    e = loom__calloc(1, sizeof *e);
    if (!e) return NULL;
    e->g = g;
    if (count >= MAX_ENTRIES) { /* drop the last (least recently used) */
      sum_entry **q = &g_head;
      while ((*q)->next) q = &(*q)->next;
      entry_free(*q);
      *q = NULL;
    }
  }
  e->next = g_head;
  g_head = e;
  if (n > e->cap) {
    const char **t = loom__realloc(e->tags, (size_t)n * sizeof *t);
    if (t) e->tags = t;
    loom_summary_kind *k = t ? loom__realloc(e->kinds, (size_t)n * sizeof *k) : NULL;
    if (k) e->kinds = k;
    if (!t || !k) return NULL;
    e->cap = n;
  }
  return e;
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
  sum_entry *e = entry_get(g, n);
  if (e) {
    for (int i = 0; i < n; i++) {
      e->tags[i] = all[i].node->name;
      e->kinds[i] = LOOM_SUMMARY_SCALAR;
      for (int j = 0; j < nh; j++)
        if (hist[j].node == all[i].node && hist[j].index == all[i].index) e->kinds[i] = LOOM_SUMMARY_HISTOGRAM;
    }
    if (tags) *tags = e->tags;
    if (kinds) *kinds = e->kinds;
  }
  pthread_mutex_unlock(&g_mu);
  return n;
}
