/* train/schedules.c - learning-rate schedules (one LearningRateSchedule
 * node each, built by ops/train.c) and gradient clipping (built from math
 * and reduce ops, like TF's clip_ops). */
#include <stdio.h>
#include <string.h>
#include "base/base.h"
#include "engine/engine_api.h"
#include "ops/train_ops.h"
#include "loom/loom.h"

static loom_output schedule(loom_graph *g, int kind, loom_output step, int nextra, const loom_output *extra,
                            double lr, double decay_steps, double beta, double limit, int flag, const char *name,
                            const char *defname) {
  if (!g) return (loom_output){NULL, 0};
  if (kind != LOOM_LRS_PIECEWISE && !(decay_steps > 0)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: decay_steps must be positive, got %g", name ? name : defname,
                         decay_steps);
    return loom__graph_dummy(g);
  }
  return loom__lr_schedule(g, kind, step, nextra, extra, lr, decay_steps, beta, limit, flag, name, defname);
}

loom_output loom_exponential_decay(loom_graph *g, double learning_rate, loom_output global_step, double decay_steps,
                                   double decay_rate, int staircase, const char *name) {
  return schedule(g, LOOM_LRS_EXPONENTIAL, global_step, 0, NULL, learning_rate, decay_steps, decay_rate, 0,
                  staircase != 0, name, "ExponentialDecay");
}

loom_output loom_piecewise_constant(loom_graph *g, loom_output global_step, int n, const double *boundaries,
                                    const double *values, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (n < 0 || (n > 0 && !boundaries) || !values) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: needs n >= 0 boundaries and n + 1 values",
                         name ? name : "PiecewiseConstant");
    return loom__graph_dummy(g);
  }
  for (int i = 1; i < n; i++)
    if (!(boundaries[i] > boundaries[i - 1])) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: boundaries must be increasing (%g then %g)",
                           name ? name : "PiecewiseConstant", boundaries[i - 1], boundaries[i]);
      return loom__graph_dummy(g);
    }
  float *v = loom__malloc(sizeof(float) * (size_t)(n + 1));
  if (!v) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "piecewise_constant: out of memory");
    return loom__graph_dummy(g);
  }
  for (int i = 0; i <= n; i++) v[i] = (float)values[i];
  int64_t nb = n, nv = n + 1;
  double dummy = 0;
  loom_output ex[2];
  ex[0] = loom_const_data(g, LOOM_F64, 1, &nb, n ? boundaries : &dummy, "boundaries");
  ex[1] = loom_const_data(g, LOOM_F32, 1, &nv, v, "values");
  loom__free(v);
  return schedule(g, LOOM_LRS_PIECEWISE, global_step, 2, ex, 0, 1, 0, 0, 0, name, "PiecewiseConstant");
}

loom_output loom_polynomial_decay(loom_graph *g, double learning_rate, loom_output global_step, double decay_steps,
                                  double end_learning_rate, double power, int cycle, const char *name) {
  return schedule(g, LOOM_LRS_POLYNOMIAL, global_step, 0, NULL, learning_rate, decay_steps, end_learning_rate, power,
                  cycle != 0, name, "PolynomialDecay");
}

loom_output loom_cosine_decay(loom_graph *g, double learning_rate, loom_output global_step, double decay_steps,
                              double alpha, const char *name) {
  return schedule(g, LOOM_LRS_COSINE, global_step, 0, NULL, learning_rate, decay_steps, alpha, 0, 0, name,
                  "CosineDecay");
}

/* ---- clipping ---- */
static loom_output scalar_like(loom_graph *g, loom_output t, double v, const char *name) {
  return loom_output_dtype(t) == LOOM_F64 ? loom_const_data(g, LOOM_F64, 0, NULL, &v, name)
                                          : loom_const_f32(g, (float)v, name);
}

loom_output loom_clip_by_norm(loom_graph *g, loom_output t, double clip_norm, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  loom_graph_push_scope(g, name ? name : "clip_by_norm");
  /* TF: l2norm = where(l2sum > 0, sqrt(l2sum), l2sum) keeps the gradient finite at 0 */
  loom_output l2sum = loom_reduce_sum(g, loom_mul(g, t, t, NULL), -1, NULL, 1, NULL);
  loom_output zero = scalar_like(g, t, 0.0, "zero");
  loom_output pred = loom_greater(g, l2sum, zero, NULL);
  loom_output safe = loom_select(g, pred, l2sum, loom_ones_like(g, l2sum, NULL), NULL);
  loom_output l2norm = loom_select(g, pred, loom_sqrt(g, safe, NULL), l2sum, NULL);
  loom_output c = scalar_like(g, t, clip_norm, "clip_norm");
  loom_output inter = loom_mul(g, t, c, NULL);
  loom_graph_pop_scope(g);
  return loom_div(g, inter, loom_maximum(g, l2norm, c, NULL), name ? name : "clip_by_norm");
}

loom_output loom_global_norm(loom_graph *g, int n, const loom_output *t, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  loom_output acc = {NULL, 0};
  loom_graph_push_scope(g, name ? name : "global_norm");
  for (int i = 0; i < n; i++) {
    if (!t || !t[i].node) continue;
    loom_output s = loom_reduce_sum(g, loom_square(g, t[i], NULL), -1, NULL, 0, NULL);
    acc = acc.node ? loom_add(g, acc, s, NULL) : s;
  }
  if (!acc.node) acc = loom_const_f32(g, 0.0f, "zero");
  loom_graph_pop_scope(g);
  return loom_sqrt(g, acc, name ? name : "global_norm");
}

void loom_clip_by_global_norm(loom_graph *g, int n, const loom_output *t, double clip_norm, loom_output *out,
                              loom_output *global_norm, const char *name) {
  if (!g) return;
  if (n < 0 || (n > 0 && (!t || !out))) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "clip_by_global_norm: invalid lists");
    return;
  }
  loom_output first = {NULL, 0};
  for (int i = 0; i < n && !first.node; i++) first = t[i];
  loom_graph_push_scope(g, name ? name : "clip_by_global_norm");
  loom_output gn = loom_global_norm(g, n, t, "global_norm");
  /* scale = clip_norm * min(1 / norm, 1 / clip_norm); + (norm - norm) makes it NaN for inf/NaN norms */
  loom_output one = scalar_like(g, first, 1.0, "one");
  loom_output c = scalar_like(g, first, clip_norm, "clip_norm");
  loom_output inv = loom_div(g, one, gn, NULL);
  loom_output invc = loom_div(g, one, c, NULL);
  loom_output scale = loom_mul(g, c, loom_minimum(g, inv, invc, NULL), NULL);
  scale = loom_add(g, scale, loom_sub(g, gn, gn, NULL), "scale");
  for (int i = 0; i < n; i++) {
    if (!t[i].node) {
      out[i] = t[i];
      continue;
    }
    char nm[32];
    snprintf(nm, sizeof nm, "clipped_%d", i);
    out[i] = loom_mul(g, t[i], scale, nm);
  }
  loom_graph_pop_scope(g);
  if (global_norm) *global_norm = gn;
}

void loom_clip_gradients_by_global_norm(loom_graph *g, int n, const loom_gradient *grads, double clip_norm,
                                        loom_gradient *out, loom_output *global_norm) {
  if (!g) return;
  if (n < 0 || (n > 0 && (!grads || !out))) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "clip_gradients_by_global_norm: invalid lists");
    return;
  }
  loom_output *v = loom__calloc((size_t)(n > 0 ? n : 1), sizeof *v);
  loom_output *o = loom__calloc((size_t)(n > 0 ? n : 1), sizeof *o);
  if (!v || !o) {
    loom__free(v);
    loom__free(o);
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "clip_gradients_by_global_norm: out of memory");
    return;
  }
  for (int i = 0; i < n; i++) v[i] = grads[i].values;
  loom_clip_by_global_norm(g, n, v, clip_norm, o, global_norm, NULL);
  for (int i = 0; i < n; i++) {
    out[i].values = o[i];
    out[i].indices = grads[i].indices;
  }
  loom__free(v);
  loom__free(o);
}
