/* estimator/spec.c - EstimatorSpec: what a model_fn fills (loss, train_op,
 * predictions, eval metrics, export outputs, hooks), its validation for the
 * mode and its release. Calls nothing else in estimator/. */
#include "estimator/estimator_impl.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char **strv_push(char **v, int32_t n, const char *s, int *oom) {
  char **nv = loom__realloc(v, sizeof(char *) * (size_t)(n + 1));
  if (!nv) {
    *oom = 1;
    return v;
  }
  nv[n] = loom__strdup(s ? s : "");
  if (!nv[n]) *oom = 1;
  return nv;
}

/* ------------------------------------------------------------------- spec */
loom_mode loom_spec_mode(const loom_estimator_spec *s) { return s ? s->mode : LOOM_MODE_TRAIN; }

/* Records the first failure of a setter in the spec (sticky; spec_validate
 * reports it) and returns code. The message starts with the setter's name. */
static loom_code spec_fail(loom_estimator_spec *s, loom_code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static loom_code spec_fail(loom_estimator_spec *s, loom_code code, const char *fmt, ...) {
  if (!s || s->err != LOOM_OK) return code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->err_msg, sizeof s->err_msg, fmt, ap);
  va_end(ap);
  s->err = code;
  return code;
}

loom_code loom_spec_set_loss(loom_estimator_spec *s, loom_output loss) {
  if (!s) return LOOM_INVALID_ARGUMENT;
  if (!loss.node) return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_set_loss: loss is not a tensor (node NULL)");
  s->loss = loss;
  s->has_loss = 1;
  return LOOM_OK;
}

loom_code loom_spec_set_train_op(loom_estimator_spec *s, loom_node *train_op) {
  if (!s) return LOOM_INVALID_ARGUMENT;
  if (!train_op) return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_set_train_op: train_op is NULL");
  s->train_op = train_op;
  return LOOM_OK;
}

loom_code loom_spec_add_prediction(loom_estimator_spec *s, const char *key, loom_output value) {
  if (!s) return LOOM_INVALID_ARGUMENT;
  if (!key || !*key) return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_prediction: key is NULL or empty");
  if (!value.node)
    return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_prediction: prediction '%s' is not a tensor", key);
  for (int i = 0; i < s->npred; i++)
    if (!strcmp(s->pred_keys[i], key))
      return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_prediction: duplicate prediction key '%s'", key);
  loom_output *np = loom__realloc(s->preds, sizeof(loom_output) * (size_t)(s->npred + 1));
  if (!np) return spec_fail(s, LOOM_RESOURCE_EXHAUSTED, "loom_spec_add_prediction: out of memory adding '%s'", key);
  s->preds = np;
  int oom = 0;
  s->pred_keys = strv_push(s->pred_keys, s->npred, key, &oom);
  if (oom) return spec_fail(s, LOOM_RESOURCE_EXHAUSTED, "loom_spec_add_prediction: out of memory adding '%s'", key);
  s->preds[s->npred++] = value;
  return LOOM_OK;
}

loom_code loom_spec_add_eval_metric(loom_estimator_spec *s, const char *name, loom_metric metric) {
  if (!s) return LOOM_INVALID_ARGUMENT;
  if (!name || !*name) return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_eval_metric: name is NULL or empty");
  if (!strcmp(name, "loss") || !strcmp(name, "global_step"))
    return spec_fail(s, LOOM_INVALID_ARGUMENT,
                     "loom_spec_add_eval_metric: metric name '%s' is reserved (the estimator adds it)", name);
  if (!metric.value.node || !metric.update.node)
    return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_eval_metric: metric '%s' lacks a value or update op",
                     name);
  for (int i = 0; i < s->nmet; i++)
    if (!strcmp(s->met_names[i], name))
      return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_eval_metric: duplicate eval metric '%s'", name);
  loom_metric *nm = loom__realloc(s->mets, sizeof(loom_metric) * (size_t)(s->nmet + 1));
  if (!nm) return spec_fail(s, LOOM_RESOURCE_EXHAUSTED, "loom_spec_add_eval_metric: out of memory adding '%s'", name);
  s->mets = nm;
  int oom = 0;
  s->met_names = strv_push(s->met_names, s->nmet, name, &oom);
  if (oom) return spec_fail(s, LOOM_RESOURCE_EXHAUSTED, "loom_spec_add_eval_metric: out of memory adding '%s'", name);
  s->mets[s->nmet++] = metric;
  return LOOM_OK;
}

int loom_spec_prediction_count(const loom_estimator_spec *s) { return s ? s->npred : 0; }

const char *loom_spec_prediction_key(const loom_estimator_spec *s, int i) {
  return (s && i >= 0 && i < s->npred) ? s->pred_keys[i] : NULL;
}

loom_output loom_spec_prediction_value(const loom_estimator_spec *s, int i) {
  loom_output none = {NULL, 0};
  return (s && i >= 0 && i < s->npred) ? s->preds[i] : none;
}

loom_code loom_spec_put_eval_metric(loom_estimator_spec *s, const char *name, loom_metric metric) {
  if (!s) return LOOM_INVALID_ARGUMENT;
  if (name && metric.value.node && metric.update.node)
    for (int i = 0; i < s->nmet; i++)
      if (!strcmp(s->met_names[i], name)) {
        s->mets[i] = metric;
        return LOOM_OK;
      }
  return loom_spec_add_eval_metric(s, name, metric);
}

loom_code loom_spec_add_export_output(loom_estimator_spec *s, const char *name, loom_export_kind kind, int n,
                                      const char *const *keys, const loom_output *outputs) {
  if (!s) return LOOM_INVALID_ARGUMENT;
  const char *nm = name ? name : "serving_default";
  if (!*nm) return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_export_output: name is empty");
  if ((int)kind < LOOM_EXPORT_PREDICT || kind > LOOM_EXPORT_REGRESS)
    return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_export_output: '%s': unknown kind %d", nm, (int)kind);
  if (n < 1 || !outputs)
    return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_export_output: '%s': needs n >= 1 outputs (n = %d%s)",
                     nm, n, outputs ? "" : ", outputs NULL");
  for (int i = 0; i < n; i++) {
    if (!outputs[i].node)
      return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_export_output: '%s': output %d is not a tensor", nm,
                       i);
    if (keys && (!keys[i] || !*keys[i]))
      return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_export_output: '%s': key %d is NULL or empty", nm, i);
  }
  for (int i = 0; i < s->nexp; i++)
    if (!strcmp(s->exps[i].name, nm))
      return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_export_output: duplicate export output '%s'", nm);
  est_export_out *ne = loom__realloc(s->exps, sizeof(est_export_out) * (size_t)(s->nexp + 1));
  if (!ne) return spec_fail(s, LOOM_RESOURCE_EXHAUSTED, "loom_spec_add_export_output: out of memory adding '%s'", nm);
  s->exps = ne;
  est_export_out *x = &s->exps[s->nexp];
  memset(x, 0, sizeof *x);
  x->name = loom__strdup(nm);
  x->kind = kind;
  x->outputs = loom__calloc((size_t)n, sizeof(loom_output));
  int oom = !x->name || !x->outputs;
  for (int i = 0; i < n && !oom; i++) {
    x->keys = strv_push(x->keys, x->n, keys ? keys[i] : "output", &oom);
    if (!oom) x->outputs[x->n++] = outputs[i];
  }
  if (oom) {
    for (int k = 0; k < x->n; k++) loom__free(x->keys[k]);
    loom__free(x->keys);
    loom__free(x->outputs);
    loom__free(x->name);
    memset(x, 0, sizeof *x);
    return spec_fail(s, LOOM_RESOURCE_EXHAUSTED, "loom_spec_add_export_output: out of memory adding '%s'", nm);
  }
  s->nexp++;
  return LOOM_OK;
}

loom_code loom_spec_add_hook(loom_estimator_spec *s, loom_hook_slot slot, loom_hook *hook) {
  if (!s) {
    loom_hook_free(hook);
    return LOOM_INVALID_ARGUMENT;
  }
  if (!hook) return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_hook: hook is NULL");
  if ((int)slot < 0 || slot > LOOM_HOOKS_PREDICTION) {
    loom_hook_free(hook);
    return spec_fail(s, LOOM_INVALID_ARGUMENT, "loom_spec_add_hook: unknown hook slot %d", (int)slot);
  }
  loom_hook **nh = loom__realloc(s->hooks[slot], sizeof(loom_hook *) * (size_t)(s->nhooks[slot] + 1));
  if (!nh) {
    loom_hook_free(hook);
    return spec_fail(s, LOOM_RESOURCE_EXHAUSTED, "loom_spec_add_hook: out of memory");
  }
  s->hooks[slot] = nh;
  nh[s->nhooks[slot]++] = hook;
  return LOOM_OK;
}

void loom__spec_clear(loom_estimator_spec *s) {
  for (int i = 0; i < s->npred; i++) loom__free(s->pred_keys[i]);
  loom__free(s->pred_keys);
  loom__free(s->preds);
  for (int i = 0; i < s->nmet; i++) loom__free(s->met_names[i]);
  loom__free(s->met_names);
  loom__free(s->mets);
  for (int i = 0; i < s->nexp; i++) {
    for (int k = 0; k < s->exps[i].n; k++) loom__free(s->exps[i].keys[k]);
    loom__free(s->exps[i].keys);
    loom__free(s->exps[i].outputs);
    loom__free(s->exps[i].name);
  }
  loom__free(s->exps);
  for (int k = 0; k < 4; k++) {
    for (int i = 0; i < s->nhooks[k]; i++) loom_hook_free(s->hooks[k][i]);
    loom__free(s->hooks[k]);
  }
  memset(s, 0, sizeof *s);
}

static int is_float_scalar(loom_output o) {
  if (!loom_output_valid(o)) return 0;
  loom_dtype dt = loom_output_dtype(o);
  if (dt != LOOM_F32 && dt != LOOM_F64) return 0;
  int64_t d[LOOM_MAX_DIMS];
  int nd = loom_output_dims(o, d);
  return nd == 0 || (nd == 1 && d[0] == 1);
}

/* TF's EstimatorSpec validation for the mode. Duplicate keys and reserved
 * metric names never get here: the setters refuse them (and record it). */
loom_code loom__spec_validate(const loom_estimator_spec *s, loom_status *st) {
  const char *m = loom_mode_key(s->mode);
  if (s->err != LOOM_OK) return loom_status_set(st, s->err, "EstimatorSpec: %s", s->err_msg);
  if (s->mode != LOOM_MODE_PREDICT) {
    if (!s->has_loss)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EstimatorSpec: missing loss in mode %s", m);
    if (!is_float_scalar(s->loss))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "EstimatorSpec: loss must be a float scalar (or shape [1]), got %s rank %d (node %s)",
                             loom_dtype_name(loom_output_dtype(s->loss)), loom_output_ndim(s->loss),
                             loom_node_name(s->loss.node));
  }
  if (s->mode == LOOM_MODE_TRAIN && !s->train_op)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EstimatorSpec: missing train_op in mode train");
  if (s->mode == LOOM_MODE_PREDICT && s->npred == 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EstimatorSpec: missing predictions in mode infer");
  for (int i = 0; i < s->npred; i++) {
    if (!loom_output_valid(s->preds[i]))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EstimatorSpec: prediction '%s' is not a valid tensor",
                             s->pred_keys[i]);
  }
  for (int i = 0; i < s->nmet; i++) {
    if (!loom_output_valid(s->mets[i].value) || !loom_output_valid(s->mets[i].update))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EstimatorSpec: eval metric '%s' lacks a value or update op",
                             s->met_names[i]);
  }
  if (s->nexp > 1) {
    int has_default = 0;
    for (int i = 0; i < s->nexp; i++) has_default |= !strcmp(s->exps[i].name, "serving_default");
    if (!has_default)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "EstimatorSpec: several export_outputs but none is named 'serving_default'");
  }
  for (int i = 0; i < s->nexp; i++)
    for (int k = 0; k < s->exps[i].n; k++)
      if (!loom_output_valid(s->exps[i].outputs[k]))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EstimatorSpec: export output '%s' key '%s' is invalid",
                               s->exps[i].name, s->exps[i].keys[k]);
  return LOOM_OK;
}
