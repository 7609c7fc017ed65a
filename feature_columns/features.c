/* feature_columns/features.c - the features map of an input_fn / model_fn (loom_estimator.h:
 * loom_features_*): names to dense outputs or sparse (values, row_splits) pairs. It lives below
 * the estimator so that the feature-column layers read it without the estimator's internals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "engine/variable_api.h" /* loom__node_graph */
#include "feature_columns/features.h"
#include "loom/loom_estimator.h"

/* ------------------------------------------------------------ features */
struct loom_features {
  int32_t n, cap;
  char **names;
  loom_output *values;
  loom_output *splits; /* row_splits of a sparse entry; {NULL, 0} for a dense one */
  loom_graph *graph;   /* where a missing key is reported (set by the estimator; else the entries' graph) */
};

void loom__features_bind_graph(loom_features *f, loom_graph *g) {
  if (f) f->graph = g;
}

loom_features *loom_features_new(void) { return loom__calloc(1, sizeof(loom_features)); }

void loom_features_free(loom_features *f) {
  if (!f) return;
  for (int32_t i = 0; i < f->n; i++) loom__free(f->names[i]);
  loom__free(f->names);
  loom__free(f->values);
  loom__free(f->splits);
  loom__free(f);
}

static int features_find(const loom_features *f, const char *name) {
  if (!f || !name) return -1;
  for (int32_t i = 0; i < f->n; i++)
    if (strcmp(f->names[i], name) == 0) return i;
  return -1;
}

/* Appends an entry (name checked by the caller). */
static loom_code features_append(loom_features *f, const char *name, loom_output value, loom_output splits,
                                 loom_status *st) {
  if (f->n == f->cap) {
    int32_t nc = f->cap ? f->cap * 2 : 8;
    char **nn = loom__realloc(f->names, (size_t)nc * sizeof(char *));
    if (nn) f->names = nn;
    loom_output *nv = nn ? loom__realloc(f->values, (size_t)nc * sizeof(loom_output)) : NULL;
    if (nv) f->values = nv;
    loom_output *ns = nv ? loom__realloc(f->splits, (size_t)nc * sizeof(loom_output)) : NULL;
    if (ns) f->splits = ns;
    if (!nn || !nv || !ns)
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "features: out of memory adding '%s'", name);
    f->cap = nc;
  }
  char *k = loom__strdup(name);
  if (!k) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "features: out of memory adding '%s'", name);
  f->names[f->n] = k;
  f->values[f->n] = value;
  f->splits[f->n] = splits;
  f->n++;
  return LOOM_OK;
}

loom_code loom_features_add(loom_features *f, const char *name, loom_output value, loom_status *st) {
  if (!f) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "features: NULL features");
  if (!name || !*name) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "features: name must be a non-empty string");
  if (features_find(f, name) >= 0)
    return loom_status_set(st, LOOM_ALREADY_EXISTS, "features: feature '%s' already exists", name);
  loom_output none = {NULL, 0};
  return features_append(f, name, value, none, st);
}

loom_code loom_features_add_sparse(loom_features *f, const char *name, loom_sparse value, loom_status *st) {
  if (!f) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "features: NULL features");
  if (!name || !*name) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "features: name must be a non-empty string");
  if (features_find(f, name) >= 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "features: feature '%s' already exists", name);
  if (!value.values.node || !value.row_splits.node)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "features: sparse feature '%s' has no %s", name,
                           value.values.node ? "row_splits" : "values");
  loom_dtype sd = loom_output_dtype(value.row_splits);
  if (sd != LOOM_I64)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "features: sparse feature '%s': row_splits are %s, not int64",
                           name, loom_dtype_name(sd));
  return features_append(f, name, value.values, value.row_splits, st);
}

int loom_features_is_sparse(const loom_features *f, int i) {
  return f && i >= 0 && i < f->n && f->splits[i].node != NULL;
}

loom_sparse loom_features_get_sparse(const loom_features *f, const char *name) {
  loom_sparse none = {{NULL, 0}, {NULL, 0}};
  int i = features_find(f, name);
  if (i < 0 || !f->splits[i].node) return none;
  loom_sparse sp = {f->values[i], f->splits[i]};
  return sp;
}

int loom_features_count(const loom_features *f) { return f ? f->n : 0; }

const char *loom_features_name(const loom_features *f, int i) {
  return f && i >= 0 && i < f->n ? f->names[i] : NULL;
}

loom_output loom_features_at(const loom_features *f, int i) {
  loom_output none = {NULL, 0};
  return f && i >= 0 && i < f->n ? f->values[i] : none;
}

loom_output loom__features_lookup(const loom_features *f, const char *name) {
  loom_output none = {NULL, 0};
  int i = features_find(f, name);
  return i >= 0 ? f->values[i] : none;
}

/* A key the input does not provide: set the graph's sticky error here, where it is
 * asked, naming the key and the keys that exist (else the first layer that gets
 * the empty output reports only "invalid input"). */
static void features_missing(const loom_features *f, const char *name) {
  if (!f) return;
  loom_graph *g = f->graph;
  if (!g && f->n > 0 && f->values[0].node) g = loom__node_graph(f->values[0].node);
  if (!g) return;
  char keys[512];
  size_t len = 0;
  keys[0] = '\0';
  for (int32_t i = 0; i < f->n && len < sizeof keys; i++) {
    int w = snprintf(keys + len, sizeof keys - len, "%s'%s'", i ? ", " : "", f->names[i]);
    if (w < 0) break;
    len += (size_t)w;
  }
  if (len >= sizeof keys) memcpy(keys + sizeof keys - 4, "...", 4);
  loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "features: no feature '%s'; the input provides %s%s",
                       name ? name : "(null)", f->n ? "" : "none", keys);
}

loom_output loom_features_get(const loom_features *f, const char *name) {
  loom_output none = {NULL, 0};
  int i = features_find(f, name);
  if (i < 0) {
    features_missing(f, name);
    return none;
  }
  return f->values[i];
}
