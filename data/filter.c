/* data/filter.c - transformations that drop elements: skip (the first
 * count), shard (every num_shards-th) and filter with a traced predicate (a
 * graph run per element). See loom_data.h (loom_dataset_skip,
 * loom_dataset_shard, loom_dataset_filter_graph). */
#include <stdio.h>
#include <string.h>
#include "data/data_impl.h"
#include "loom/loom_session.h"

/* ---- skip ---- */
typedef struct skip_ds {
  loom_dataset base;
  loom_dataset *in;
  int64_t count;
  int skipped; /* this pass skipped its count already */
} skip_ds;

static loom_code skip_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  skip_ds *s = (skip_ds *)ds;
  if (!s->skipped) {
    for (int64_t i = 0; s->count < 0 || i < s->count; i++) {
      loom_code rc = loom_dataset_next(s->in, values, st);
      if (rc) return rc; /* the end before count (or forever for count < 0) */
    }
    s->skipped = 1;
  }
  return loom_dataset_next(s->in, values, st);
}
static loom_code skip_reset(loom_dataset *ds, loom_status *st) {
  skip_ds *s = (skip_ds *)ds;
  s->skipped = 0;
  return loom_dataset_reset(s->in, st);
}
static void skip_destroy(loom_dataset *ds) { loom_dataset_free(((skip_ds *)ds)->in); }
static const loom_ds_vtable skip_vt = {"skip", skip_next, NULL, skip_reset, skip_destroy, NULL, NULL};

loom_dataset *loom_dataset_skip(loom_dataset *in, int64_t count, loom_status *st) {
  skip_ds *s = (skip_ds *)loom__ds_transform_new(in, sizeof(skip_ds), &skip_vt, st);
  if (!s) return NULL;
  s->in = in;
  s->count = count;
  return &s->base;
}

/* ---- shard ---- */
typedef struct shard_ds {
  loom_dataset base;
  loom_dataset *in;
  int64_t num_shards, index;
  int64_t pos; /* elements of the input read this pass */
} shard_ds;

static loom_code shard_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  shard_ds *s = (shard_ds *)ds;
  for (;;) {
    loom_code rc = loom_dataset_next(s->in, values, st);
    if (rc) return rc;
    if (s->pos++ % s->num_shards == s->index) return LOOM_OK;
  }
}
static loom_code shard_reset(loom_dataset *ds, loom_status *st) {
  shard_ds *s = (shard_ds *)ds;
  s->pos = 0;
  return loom_dataset_reset(s->in, st);
}
static void shard_destroy(loom_dataset *ds) { loom_dataset_free(((shard_ds *)ds)->in); }
static const loom_ds_vtable shard_vt = {"shard", shard_next, NULL, shard_reset, shard_destroy, NULL, NULL};

loom_dataset *loom_dataset_shard(loom_dataset *in, int64_t num_shards, int64_t index, loom_status *st) {
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    loom_dataset_free(in);
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "shard: num_shards must be >= 1 and index in [0, num_shards), got num_shards %lld, index %lld",
                    (long long)num_shards, (long long)index);
    return NULL;
  }
  shard_ds *s = (shard_ds *)loom__ds_transform_new(in, sizeof(shard_ds), &shard_vt, st);
  if (!s) return NULL;
  s->in = in;
  s->num_shards = num_shards;
  s->index = index;
  return &s->base;
}

/* ---- filter ---- */
typedef struct filter_ds {
  loom_dataset base;
  loom_dataset *in;
  loom_graph *g;
  loom_session *s;
  int nin;
  loom_output *inputs;
  loom_output pred;
  loom_tensor *keep;
} filter_ds;

static loom_code filter_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  filter_ds *f = (filter_ds *)ds;
  for (;;) {
    loom_code rc = loom_dataset_next(f->in, values, st);
    if (rc) return rc;
    rc = loom_session_run(f->s, f->inputs, values, f->nin, &f->pred, &f->keep, 1, NULL, 0, st);
    if (rc) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", loom_status_message(st));
      return loom_status_set(st, rc, "filter: the predicate failed: %s", msg);
    }
    if (loom_tensor_numel(f->keep) != 1)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "filter: the predicate must give a scalar bool, got %lld values",
                             (long long)loom_tensor_numel(f->keep));
    if (*(const uint8_t *)loom_tensor_data_const(f->keep)) return LOOM_OK;
  }
}
static loom_code filter_reset(loom_dataset *ds, loom_status *st) { return loom_dataset_reset(((filter_ds *)ds)->in, st); }
static void filter_destroy(loom_dataset *ds) {
  filter_ds *f = (filter_ds *)ds;
  loom_tensor_free(f->keep);
  loom__free(f->inputs);
  loom_session_free(f->s);
  loom_graph_free(f->g);
  loom_dataset_free(f->in);
}
static const loom_ds_vtable filter_vt = {"filter", filter_next, NULL, filter_reset, filter_destroy, NULL, NULL};

loom_dataset *loom_dataset_filter_graph(loom_dataset *in, loom_graph *g, int nin, const loom_output *inputs,
                                        loom_output predicate, loom_status *st) {
  const char *bad = NULL;
  if (!g)
    bad = "the graph is NULL";
  else if (in && nin != loom_dataset_num_components(in))
    bad = "nin must equal the input's number of components";
  else if (nin > 0 && !inputs)
    bad = "inputs is NULL";
  else if (!predicate.node || loom_output_dtype(predicate) != LOOM_BOOL || loom_output_ndim(predicate) != 0)
    bad = "the predicate must be a scalar bool output";
  for (int i = 0; !bad && in && i < nin; i++)
    if (loom_output_dtype(inputs[i]) != loom_dataset_component_dtype(in, i)) bad = "an input's dtype differs from its component's";
  if (bad) {
    if (in) loom_status_set(st, LOOM_INVALID_ARGUMENT, "filter_graph: %s", bad);
    loom_dataset_free(in);
    loom_graph_free(g);
    if (!in) loom_status_set(st, LOOM_INVALID_ARGUMENT, "filter_graph: the input dataset is NULL");
    return NULL;
  }
  filter_ds *f = (filter_ds *)loom__ds_transform_new(in, sizeof(filter_ds), &filter_vt, st);
  if (!f) {
    loom_graph_free(g);
    return NULL;
  }
  f->in = in;
  f->g = g;
  f->nin = nin;
  f->pred = predicate;
  f->inputs = loom__calloc((size_t)(nin > 0 ? nin : 1), sizeof *f->inputs);
  loom_session_options so = loom_session_options_default();
  so.num_threads = 1;
  if (!f->inputs) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "filter_graph: out of memory");
    loom_dataset_free(&f->base);
    return NULL;
  }
  if (nin) memcpy(f->inputs, inputs, (size_t)nin * sizeof *inputs);
  if (!(f->s = loom_session_new(g, &so, st))) {
    loom_dataset_free(&f->base);
    return NULL;
  }
  return &f->base;
}
