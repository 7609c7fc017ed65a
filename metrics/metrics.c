/* metrics/metrics.c - the streaming-metric builder context (scopes, local
 * metric variables, recorded state assignments, reset) and the mean-based
 * and count metrics of tf.compat.v1.metrics. */
#include "metrics/metric_impl.h"

/* ---- context ---- */
static int prefix_used(loom_graph *g, const char *full) {
  size_t n = strlen(full);
  int nn = loom_graph_num_nodes(g);
  for (int i = 0; i < nn; i++) {
    const char *nm = loom_node_name(loom_graph_node_at(g, i));
    if (!strncmp(nm, full, n) && (nm[n] == '/' || nm[n] == 0)) return 1;
  }
  return 0;
}

static int scope_free(loom_graph *g, const char *cand) {
  char full[1024];
  const char *vs = loom_variable_scope_name(g);
  snprintf(full, sizeof full, "%s%s%s", vs, *vs ? "/" : "", cand);
  if (prefix_used(g, full)) return 0;
  const char *ns = loom_graph_scope(g);
  snprintf(full, sizeof full, "%s%s%s", ns, *ns ? "/" : "", cand);
  return !prefix_used(g, full);
}

void loom__metric_begin(lm_ctx *c, loom_graph *g, const char *name, const char *default_name) {
  memset(c, 0, sizeof *c);
  c->g = g;
  char cand[512];
  if (name && *name) {
    snprintf(cand, sizeof cand, "%s", name);
  } else {
    snprintf(cand, sizeof cand, "%s", default_name);
    for (int i = 1; !scope_free(g, cand); i++) snprintf(cand, sizeof cand, "%s_%d", default_name, i);
  }
  loom_variable_scope_push(g, cand, LOOM_REUSE_NONE);
  snprintf(c->where, sizeof c->where, "%s", bu_where(g, cand));
}

loom_variable *loom__metric_var(lm_ctx *c, const char *name, loom_dtype dt, int ndim, const int64_t *dims) {
  loom_initializer z = loom_init_zeros();
  loom_variable *v =
      loom_get_variable_ex(c->g, name, dt, ndim, dims, &z, 0, LOOM_COLL_LOCAL | LOOM_COLL_METRIC);
  if (c->nvars < LM_MAX_VARS && v) c->vars[c->nvars++] = v;
  return v;
}

static void record(lm_ctx *c, loom_output o) {
  if (c->nassign < LM_MAX_ASSIGNS && o.node) c->assigns[c->nassign++] = o.node;
}

loom_output loom__metric_assign_add(lm_ctx *c, loom_variable *v, loom_output delta) {
  loom_output o = loom_assign_add(c->g, loom_variable_output(v), delta, NULL);
  record(c, o);
  return o;
}

loom_output loom__metric_scatter_add(lm_ctx *c, loom_variable *v, loom_output idx, loom_output upd) {
  loom_output o = loom_var_scatter_add(c->g, loom_variable_output(v), idx, upd, NULL);
  record(c, o);
  return o;
}

void loom__metric_update_begin(lm_ctx *c) {
  if (c->update_deps || !c->nassign) return;
  loom_graph_push_control_deps(c->g, c->nassign, c->assigns);
  c->update_deps = 1;
}

void loom__metric_update_end(lm_ctx *c) {
  if (!c->update_deps) return;
  loom_graph_pop_control_deps(c->g);
  c->update_deps = 0;
}

loom_metric loom__metric_end(lm_ctx *c, loom_output value, loom_output update) {
  loom__metric_update_end(c);
  loom_metric m;
  m.value = value;
  m.update = update;
  m.reset = loom_variables_initializer(c->g, c->nvars, c->vars, "reset");
  loom_variable_scope_pop(c->g);
  return m;
}

loom_metric loom__metric_fail(lm_ctx *c, loom_output x) {
  loom__metric_update_end(c);
  loom_metric m = {x, x, NULL};
  loom_variable_scope_pop(c->g);
  return m;
}

void loom_metric_add_to_collections(loom_graph *g, const loom_metric *m, const char *metrics_collection,
                                    const char *updates_collection) {
  if (!g || !m) return;
  if (metrics_collection && *metrics_collection && m->value.node)
    loom_add_to_collection(g, metrics_collection, m->value);
  if (updates_collection && *updates_collection && m->update.node)
    loom_add_to_collection(g, updates_collection, m->update);
}

/* ---- preprocessing ---- */
int loom__metric_squeeze(lm_ctx *c, loom_output *predictions, loom_output *labels, loom_output *weights) {
  loom_graph *g = c->g;
  if (labels && bu_valid(*labels)) {
    bu_remove_squeezable(g, labels, predictions, 0);
    if (!bu_check_compatible(g, *predictions, *labels, "predictions vs labels", c->where)) return 0;
  }
  if (!weights || !bu_valid(*weights)) return 1;
  int wr = loom_output_ndim(*weights), pr = loom_output_ndim(*predictions);
  if (wr == 0) return 1;
  if (wr - pr == 1) {
    int64_t ax = -1;
    *weights = loom_squeeze(g, *weights, 1, &ax, NULL);
  } else if (pr - wr == 1) {
    *weights = loom_expand_dims(g, *weights, -1, NULL);
  }
  return 1;
}

void loom__metric_mean_core(lm_ctx *c, loom_output values, loom_output weights, loom_output *value,
                            loom_output *update) {
  loom_graph *g = c->g;
  values = bu_cast(g, values, LOOM_F32);
  loom_variable *total = loom__metric_var(c, "total", LOOM_F32, 0, NULL);
  loom_variable *count = loom__metric_var(c, "count", LOOM_F32, 0, NULL);
  loom_output num;
  if (!bu_valid(weights)) {
    num = bu_numel(g, values, LOOM_F32, NULL);
  } else {
    loom__metric_squeeze(c, &values, NULL, &weights);
    loom_output w = bu_broadcast_weights(g, bu_cast(g, weights, LOOM_F32), values, c->where);
    values = loom_mul(g, values, w, NULL);
    num = loom_reduce_sum(g, w, -1, NULL, 0, NULL);
  }
  loom_output ut = loom__metric_assign_add(c, total, loom_reduce_sum(g, values, -1, NULL, 0, NULL));
  loom_output uc = loom__metric_assign_add(c, count, num);
  loom_output zero = bu_scalar(g, LOOM_F32, 0.0, NULL);
  *value = bu_div_no_nan(g, loom_variable_output(total), loom_maximum(g, loom_variable_output(count), zero, NULL),
                         "value");
  loom__metric_update_begin(c);
  *update = bu_div_no_nan(g, ut, loom_maximum(g, uc, zero, NULL), "update_op");
  loom__metric_update_end(c);
}

/* ---- mean family ---- */
loom_metric loom_metrics_mean(loom_graph *g, loom_output values, loom_output weights, const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, "mean");
  loom_output v, u;
  loom__metric_mean_core(&c, values, weights, &v, &u);
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_mean_tensor(loom_graph *g, loom_output values, loom_output weights, const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, "mean");
  if (!bu_fully_known(values)) {
    char s[96];
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: mean_tensor needs a fully known shape, got %s", c.where,
                         bu_shape_str(s, sizeof s, values));
    return loom__metric_fail(&c, values);
  }
  values = bu_cast(g, values, LOOM_F32);
  int64_t d[LOOM_MAX_DIMS];
  int r = loom_output_dims(values, d);
  loom_variable *total = loom__metric_var(&c, "total_tensor", LOOM_F32, r, d);
  loom_variable *count = loom__metric_var(&c, "count_tensor", LOOM_F32, r, d);
  loom_output num = loom_ones_like(g, values, NULL);
  if (bu_valid(weights)) {
    loom__metric_squeeze(&c, &values, NULL, &weights);
    loom_output w = bu_broadcast_weights(g, bu_cast(g, weights, LOOM_F32), values, c.where);
    values = loom_mul(g, values, w, NULL);
    num = loom_mul(g, num, w, NULL);
  }
  loom_output ut = loom__metric_assign_add(&c, total, values);
  loom_output uc = loom__metric_assign_add(&c, count, num);
  loom_output zero = bu_scalar(g, LOOM_F32, 0.0, NULL);
  loom_output v = bu_div_no_nan(g, loom_variable_output(total),
                                loom_maximum(g, loom_variable_output(count), zero, NULL), "value");
  loom__metric_update_begin(&c);
  loom_output u = bu_div_no_nan(g, ut, loom_maximum(g, uc, zero, NULL), "update_op");
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_accuracy(loom_graph *g, loom_output labels, loom_output predictions, loom_output weights,
                                  const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, "accuracy");
  if (!loom__metric_squeeze(&c, &predictions, &labels, &weights)) return loom__metric_fail(&c, predictions);
  predictions = bu_cast(g, predictions, loom_output_dtype(labels));
  loom_output correct = loom_cast(g, loom_equal(g, predictions, labels, NULL), LOOM_F32, NULL);
  loom_output v, u;
  loom__metric_mean_core(&c, correct, weights, &v, &u);
  return loom__metric_end(&c, v, u);
}

/* Shared by the error metrics: f(labels, predictions) then mean. */
enum { ERR_SQUARED, ERR_ABSOLUTE };
static loom_metric error_metric(loom_graph *g, loom_output labels, loom_output predictions, loom_output weights,
                                const char *name, const char *def, int kind, int take_sqrt) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, def);
  if (!loom__metric_squeeze(&c, &predictions, &labels, &weights)) return loom__metric_fail(&c, predictions);
  loom_output d = loom_sub(g, bu_cast(g, labels, LOOM_F32), bu_cast(g, predictions, LOOM_F32), NULL);
  loom_output e = kind == ERR_SQUARED ? loom_square(g, d, NULL) : loom_abs(g, d, NULL);
  loom_output v, u;
  loom__metric_mean_core(&c, e, weights, &v, &u);
  if (take_sqrt) {
    v = loom_sqrt(g, v, NULL);
    loom__metric_update_begin(&c);
    u = loom_sqrt(g, u, NULL);
  }
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_mean_squared_error(loom_graph *g, loom_output labels, loom_output predictions,
                                            loom_output weights, const char *name) {
  return error_metric(g, labels, predictions, weights, name, "mean_squared_error", ERR_SQUARED, 0);
}

loom_metric loom_metrics_root_mean_squared_error(loom_graph *g, loom_output labels, loom_output predictions,
                                                 loom_output weights, const char *name) {
  return error_metric(g, labels, predictions, weights, name, "root_mean_squared_error", ERR_SQUARED, 1);
}

loom_metric loom_metrics_mean_absolute_error(loom_graph *g, loom_output labels, loom_output predictions,
                                             loom_output weights, const char *name) {
  return error_metric(g, labels, predictions, weights, name, "mean_absolute_error", ERR_ABSOLUTE, 0);
}

loom_metric loom_metrics_mean_relative_error(loom_graph *g, loom_output labels, loom_output predictions,
                                             loom_output normalizer, loom_output weights, const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, "mean_relative_error");
  if (!loom__metric_squeeze(&c, &predictions, &labels, &weights)) return loom__metric_fail(&c, predictions);
  bu_remove_squeezable(g, &predictions, &normalizer, 0);
  if (!bu_check_compatible(g, predictions, normalizer, "predictions vs normalizer", c.where))
    return loom__metric_fail(&c, predictions);
  loom_output l = bu_cast(g, labels, LOOM_F32), p = bu_cast(g, predictions, LOOM_F32);
  loom_output nz = bu_cast(g, normalizer, LOOM_F32);
  loom_output zero = bu_scalar(g, LOOM_F32, 0.0, NULL);
  loom_output rel = bu_div_no_nan(g, loom_abs(g, loom_sub(g, l, p, NULL), NULL), nz, NULL);
  /* where(normalizer == 0, zeros_like(labels), ...) with labels' shape */
  rel = loom_select(g, loom_equal(g, nz, zero, NULL), loom_zeros_like(g, l, NULL), rel, NULL);
  loom_output v, u;
  loom__metric_mean_core(&c, rel, weights, &v, &u);
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_mean_cosine_distance(loom_graph *g, loom_output labels, loom_output predictions, int dim,
                                              loom_output weights, const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, "mean_cosine_distance");
  if (!loom__metric_squeeze(&c, &predictions, &labels, &weights)) return loom__metric_fail(&c, predictions);
  int r = loom_output_ndim(predictions);
  if (dim < -r || dim >= r) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: dim %d is out of range for rank %d", c.where, dim, r);
    return loom__metric_fail(&c, predictions);
  }
  int64_t ax = dim;
  loom_output rad = loom_reduce_sum(
      g, loom_mul(g, bu_cast(g, predictions, LOOM_F32), bu_cast(g, labels, LOOM_F32), NULL), 1, &ax, 1, NULL);
  loom_output v, u;
  loom__metric_mean_core(&c, rad, weights, &v, &u);
  loom_output one = bu_scalar(g, LOOM_F32, 1.0, NULL);
  v = loom_sub(g, one, v, NULL);
  loom__metric_update_begin(&c);
  u = loom_sub(g, one, u, NULL);
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_percentage_below(loom_graph *g, loom_output values, double threshold, loom_output weights,
                                          const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, "percentage_below_threshold");
  loom_output x = bu_cast(g, values, LOOM_F32);
  loom_output below = loom_cast(g, loom_less(g, x, bu_scalar(g, LOOM_F32, threshold, NULL), NULL), LOOM_F32, NULL);
  loom_output v, u;
  loom__metric_mean_core(&c, below, weights, &v, &u);
  return loom__metric_end(&c, v, u);
}

/* ---- counts ---- */
/* _count_condition in a sub-scope (sub may be NULL: the current scope):
 * count += sum(cast(cond) * weights). */
static void count_condition(lm_ctx *c, const char *sub, loom_output cond, loom_output weights, loom_output *value,
                            loom_output *update) {
  loom_graph *g = c->g;
  if (sub) loom_variable_scope_push(g, sub, LOOM_REUSE_NONE);
  loom_variable *count = loom__metric_var(c, "count", LOOM_F32, 0, NULL);
  loom_output x = loom_cast(g, cond, LOOM_F32, NULL);
  if (bu_valid(weights)) {
    int wr = loom_output_ndim(weights), vr = loom_output_ndim(x);
    if (wr != 0 && wr != vr) {
      char s1[96], s2[96];
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: weights %s must be a scalar or have the values' rank %d (%s)",
                           c->where, bu_shape_str(s1, sizeof s1, weights), vr, bu_shape_str(s2, sizeof s2, x));
    }
    x = loom_mul(g, x, bu_cast(g, weights, LOOM_F32), NULL);
  }
  *value = loom_identity(g, loom_variable_output(count), "value");
  *update = loom__metric_assign_add(c, count, loom_reduce_sum(g, x, -1, NULL, 0, NULL));
  if (sub) loom_variable_scope_pop(g);
}

enum { C_TP, C_FP, C_TN, C_FN };
static const char *const COUNT_NAMES[] = {"true_positives", "false_positives", "true_negatives", "false_negatives"};

/* cond of kind k from bool labels/predictions. */
static loom_output count_cond(loom_graph *g, int k, loom_output l, loom_output p) {
  switch (k) {
  case C_TP: return loom_logical_and(g, l, p, NULL);
  case C_FP: return loom_logical_and(g, loom_logical_not(g, l, NULL), p, NULL);
  case C_TN: return loom_logical_and(g, loom_logical_not(g, l, NULL), loom_logical_not(g, p, NULL), NULL);
  default: return loom_logical_and(g, l, loom_logical_not(g, p, NULL), NULL);
  }
}

static loom_metric count_metric(loom_graph *g, int kind, loom_output labels, loom_output predictions,
                                loom_output weights, const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, COUNT_NAMES[kind]);
  predictions = bu_cast(g, predictions, LOOM_BOOL);
  labels = bu_cast(g, labels, LOOM_BOOL);
  if (!loom__metric_squeeze(&c, &predictions, &labels, &weights)) return loom__metric_fail(&c, predictions);
  loom_output v, u;
  count_condition(&c, NULL, count_cond(g, kind, labels, predictions), weights, &v, &u);
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_true_positives(loom_graph *g, loom_output labels, loom_output predictions,
                                        loom_output weights, const char *name) {
  return count_metric(g, C_TP, labels, predictions, weights, name);
}
loom_metric loom_metrics_false_positives(loom_graph *g, loom_output labels, loom_output predictions,
                                         loom_output weights, const char *name) {
  return count_metric(g, C_FP, labels, predictions, weights, name);
}
loom_metric loom_metrics_true_negatives(loom_graph *g, loom_output labels, loom_output predictions,
                                        loom_output weights, const char *name) {
  return count_metric(g, C_TN, labels, predictions, weights, name);
}
loom_metric loom_metrics_false_negatives(loom_graph *g, loom_output labels, loom_output predictions,
                                         loom_output weights, const char *name) {
  return count_metric(g, C_FN, labels, predictions, weights, name);
}

/* where(a + b > 0, a / (a + b), 0) */
static loom_output ratio(loom_graph *g, loom_output a, loom_output b, const char *name) {
  loom_output s = loom_add(g, a, b, NULL);
  return bu_div_no_nan(g, a, s, name);
}

static loom_metric pr_metric(loom_graph *g, int other, loom_output labels, loom_output predictions,
                             loom_output weights, const char *name, const char *def) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, def);
  predictions = bu_cast(g, predictions, LOOM_BOOL);
  labels = bu_cast(g, labels, LOOM_BOOL);
  if (!loom__metric_squeeze(&c, &predictions, &labels, &weights)) return loom__metric_fail(&c, predictions);
  loom_output tpv, tpu, ov, ou;
  count_condition(&c, COUNT_NAMES[C_TP], count_cond(g, C_TP, labels, predictions), weights, &tpv, &tpu);
  count_condition(&c, COUNT_NAMES[other], count_cond(g, other, labels, predictions), weights, &ov, &ou);
  loom_output v = ratio(g, tpv, ov, "value");
  loom__metric_update_begin(&c);
  loom_output u = ratio(g, tpu, ou, "update_op");
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_precision(loom_graph *g, loom_output labels, loom_output predictions, loom_output weights,
                                   const char *name) {
  return pr_metric(g, C_FP, labels, predictions, weights, name, "precision");
}

loom_metric loom_metrics_recall(loom_graph *g, loom_output labels, loom_output predictions, loom_output weights,
                                const char *name) {
  return pr_metric(g, C_FN, labels, predictions, weights, name, "recall");
}
