/* estimator/config.c - ModeKeys, params, RunConfig defaults and the
 * features map (loom_estimator.h). TF_CONFIG is parsed by
 * distributed/tf_config.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "loom/loom_estimator.h"
#include "engine/variable_api.h"
#include "estimator/estimator_impl.h"

/* ------------------------------------------------------------ ModeKeys */
const char *loom_mode_key(loom_mode mode) {
  switch (mode) {
  case LOOM_MODE_TRAIN: return "train";
  case LOOM_MODE_EVAL: return "eval";
  case LOOM_MODE_PREDICT: return "infer";
  }
  return NULL;
}

/* -------------------------------------------------------------- params */
struct loom_params {
  int32_t n, cap;
  char **keys;
  char **values;
};

loom_params *loom_params_new(void) { return loom__calloc(1, sizeof(loom_params)); }

void loom_params_free(loom_params *p) {
  if (!p) return;
  for (int32_t i = 0; i < p->n; i++) {
    loom__free(p->keys[i]);
    loom__free(p->values[i]);
  }
  loom__free(p->keys);
  loom__free(p->values);
  loom__free(p);
}

static int params_find(const loom_params *p, const char *key) {
  if (!p || !key) return -1;
  for (int32_t i = 0; i < p->n; i++)
    if (strcmp(p->keys[i], key) == 0) return i;
  return -1;
}

static loom_code params_set_owned_check(loom_params *p, const char *key, const char *value, loom_status *st) {
  if (!p) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "params: NULL params");
  if (!key || !*key) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "params: key must be a non-empty string");
  if (!value) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "params: value of '%s' is NULL", key);
  return LOOM_OK;
}

loom_code loom_params_set(loom_params *p, const char *key, const char *value, loom_status *st) {
  loom_code rc = params_set_owned_check(p, key, value, st);
  if (rc) return rc;
  char *v = loom__strdup(value);
  if (!v) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "params: out of memory setting '%s'", key);
  int i = params_find(p, key);
  if (i >= 0) {
    loom__free(p->values[i]);
    p->values[i] = v;
    return LOOM_OK;
  }
  if (p->n == p->cap) {
    int32_t nc = p->cap ? p->cap * 2 : 8;
    char **nk = loom__realloc(p->keys, (size_t)nc * sizeof(char *));
    if (nk) p->keys = nk;
    char **nv = nk ? loom__realloc(p->values, (size_t)nc * sizeof(char *)) : NULL;
    if (nv) p->values = nv;
    if (!nk || !nv) {
      loom__free(v);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "params: out of memory setting '%s'", key);
    }
    p->cap = nc;
  }
  char *k = loom__strdup(key);
  if (!k) {
    loom__free(v);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "params: out of memory setting '%s'", key);
  }
  p->keys[p->n] = k;
  p->values[p->n] = v;
  p->n++;
  return LOOM_OK;
}

loom_code loom_params_set_double(loom_params *p, const char *key, double value, loom_status *st) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.17g", value);
  return loom_params_set(p, key, buf, st);
}

loom_code loom_params_set_int(loom_params *p, const char *key, int64_t value, loom_status *st) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)value);
  return loom_params_set(p, key, buf, st);
}

loom_params *loom_params_copy(const loom_params *p) {
  loom_params *c = loom_params_new();
  if (!c || !p) return c;
  for (int32_t i = 0; i < p->n; i++)
    if (loom_params_set(c, p->keys[i], p->values[i], NULL)) {
      loom_params_free(c);
      return NULL;
    }
  return c;
}

const char *loom_params_get(const loom_params *p, const char *key) {
  int i = params_find(p, key);
  return i >= 0 ? p->values[i] : NULL;
}

double loom_params_get_double(const loom_params *p, const char *key, double dflt) {
  const char *s = loom_params_get(p, key);
  if (!s || !*s) return dflt;
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  /* overflow -> dflt; underflow (subnormals, 1e-400 -> 0) is kept */
  if (end == s || *end || (errno == ERANGE && isinf(v))) return dflt;
  return v;
}

int64_t loom_params_get_int(const loom_params *p, const char *key, int64_t dflt) {
  const char *s = loom_params_get(p, key);
  if (!s || !*s) return dflt;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || errno == ERANGE) return dflt;
  return (int64_t)v;
}

/* ----------------------------------------------------------- RunConfig */
loom_run_config loom_run_config_default(void) {
  loom_run_config c;
  memset(&c, 0, sizeof c);
  c.struct_size = (uint32_t)sizeof c;
  c.model_dir = NULL;
  c.has_random_seed = 0;
  c.tf_random_seed = 0;
  c.save_summary_steps = 100;
  c.save_checkpoints_steps = -1;
  c.save_checkpoints_secs = -1;
  c.keep_checkpoint_max = 5;
  c.keep_checkpoint_every_n_hours = 10000;
  c.log_step_count_steps = 100;
  c.num_threads = 0;
  c.device = LOOM_DEVICE_CPU;
  c.progress_bar = 1;
  c.prefetch = 0;
  return c;
}

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
