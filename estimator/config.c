/* estimator/config.c - ModeKeys, params and RunConfig defaults
 * (loom_estimator.h). The features map is feature_columns/features.c;
 * TF_CONFIG is parsed by distributed/tf_config.c. */
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
