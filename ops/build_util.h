/* ops/build_util.h - composite graph-building helpers (prefix bu_) for the
 * builder layers above ops/ (losses/, metrics/, and any other that wants
 * them): small graph idioms (casts that skip no-ops, scalar constants of a
 * dtype, div_no_nan, element counts, add_n), TF's static shape-compatibility
 * and weight-broadcast checks and remove_squeezable_dimensions, with
 * messages that name the building scope. Everything here is static inline
 * and built only from public builders (include/loom/), so any layer at or
 * above ops/ may include it. Not installed. */
#ifndef LOOM_OPS_BUILD_UTIL_H
#define LOOM_OPS_BUILD_UTIL_H
#include <stdio.h>
#include <string.h>
#include "loom/loom.h"

/* "[2,?,3]" into buf. */
static inline const char *bu_shape_str(char *buf, size_t cap, loom_output o) {
  int64_t d[LOOM_MAX_DIMS];
  int r = loom_output_dims(o, d);
  size_t k = 0;
  k += (size_t)snprintf(buf + k, cap - k, "[");
  for (int i = 0; i < r && k < cap; i++) {
    if (d[i] < 0)
      k += (size_t)snprintf(buf + k, cap - k, "%s?", i ? "," : "");
    else
      k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)d[i]);
  }
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

/* The current name scope for messages ("" -> fallback). */
static inline const char *bu_where(loom_graph *g, const char *fallback) {
  const char *s = loom_graph_scope(g);
  return s && *s ? s : fallback;
}

static inline int bu_valid(loom_output o) { return o.node != NULL; }

/* x cast to dt (x itself when it already has dt). */
static inline loom_output bu_cast(loom_graph *g, loom_output x, loom_dtype dt) {
  if (loom_output_dtype(x) == dt) return x;
  return loom_cast(g, x, dt, NULL);
}

/* A rank-0 constant of dtype dt holding v (float, int or bool dtypes). */
static inline loom_output bu_scalar(loom_graph *g, loom_dtype dt, double v, const char *name) {
  switch (dt) {
  case LOOM_F64: {
    double x = v;
    return loom_const_data(g, dt, 0, NULL, &x, name);
  }
  case LOOM_I32: {
    int32_t x = (int32_t)v;
    return loom_const_data(g, dt, 0, NULL, &x, name);
  }
  case LOOM_I64: {
    int64_t x = (int64_t)v;
    return loom_const_data(g, dt, 0, NULL, &x, name);
  }
  case LOOM_U8:
  case LOOM_BOOL: {
    uint8_t x = (uint8_t)v;
    return loom_const_data(g, dt, 0, NULL, &x, name);
  }
  default: {
    float x = (float)v;
    return loom_const_data(g, LOOM_F32, 0, NULL, &x, name);
  }
  }
}

/* tf.math.divide_no_nan: a / b, or 0 where b == 0. */
static inline loom_output bu_div_no_nan(loom_graph *g, loom_output a, loom_output b, const char *name) {
  loom_dtype dt = loom_output_dtype(a);
  loom_output zero = bu_scalar(g, dt, 0.0, NULL);
  loom_output one = bu_scalar(g, dt, 1.0, NULL);
  loom_output is0 = loom_equal(g, b, zero, NULL);
  loom_output safe = loom_select(g, is0, one, b, NULL);
  loom_output q = loom_div(g, a, safe, NULL);
  return loom_select(g, is0, zero, q, name);
}

/* 1 when every dim of o is known. */
static inline int bu_fully_known(loom_output o) {
  int64_t d[LOOM_MAX_DIMS];
  int r = loom_output_dims(o, d);
  for (int i = 0; i < r; i++)
    if (d[i] < 0) return 0;
  return 1;
}

/* Number of elements of x as a scalar of dtype dt (a constant when x's shape
 * is known, else summed from ones at run time). */
static inline loom_output bu_numel(loom_graph *g, loom_output x, loom_dtype dt, const char *name) {
  int64_t d[LOOM_MAX_DIMS];
  int r = loom_output_dims(x, d);
  if (bu_fully_known(x)) {
    double n = 1;
    for (int i = 0; i < r; i++) n *= (double)d[i];
    return bu_scalar(g, dt, n, name);
  }
  loom_output ones = loom_ones_like(g, bu_cast(g, x, dt), NULL);
  return loom_reduce_sum(g, ones, -1, NULL, 0, name);
}

/* TF's TensorShape.assert_is_compatible_with: same rank, dims equal where
 * both are known. */
static inline int bu_compatible(loom_output a, loom_output b) {
  int64_t da[LOOM_MAX_DIMS], db[LOOM_MAX_DIMS];
  int ra = loom_output_dims(a, da), rb = loom_output_dims(b, db);
  if (ra != rb) return 0;
  for (int i = 0; i < ra; i++)
    if (da[i] >= 0 && db[i] >= 0 && da[i] != db[i]) return 0;
  return 1;
}

/* Sets the graph error "<where>: Shapes A and B are incompatible (what)"
 * unless compatible; returns 1 when compatible. */
static inline int bu_check_compatible(loom_graph *g, loom_output a, loom_output b, const char *what,
                                      const char *where) {
  if (bu_compatible(a, b)) return 1;
  char sa[96], sb[96];
  loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: Shapes %s and %s are incompatible (%s)", where,
                       bu_shape_str(sa, sizeof sa, a), bu_shape_str(sb, sizeof sb, b), what);
  return 0;
}

/* weights_broadcast_ops.assert_broadcastable, statically: weights is a
 * scalar, or has values' rank with each dim 1 or equal to values' dim
 * (unknown dims pass). Returns 1 when fine, else sets the graph error. */
static inline int bu_check_broadcastable(loom_graph *g, loom_output weights, loom_output values, const char *where) {
  int64_t dw[LOOM_MAX_DIMS], dv[LOOM_MAX_DIMS];
  int rw = loom_output_dims(weights, dw), rv = loom_output_dims(values, dv);
  int ok = rw == 0 || rw == rv;
  for (int i = 0; ok && rw && i < rw; i++) ok = dw[i] < 0 || dv[i] < 0 || dw[i] == 1 || dw[i] == dv[i];
  if (ok) return 1;
  char sw[96], sv[96];
  loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                       "%s: weights can not be broadcast to values. values.rank=%d. weights.rank=%d. "
                       "values.shape=%s. weights.shape=%s.",
                       where, rv, rw, bu_shape_str(sv, sizeof sv, values), bu_shape_str(sw, sizeof sw, weights));
  return 0;
}

/* 1 when a and b have the same fully known shape. */
static inline int bu_same_known_shape(loom_output a, loom_output b) {
  int64_t da[LOOM_MAX_DIMS], db[LOOM_MAX_DIMS];
  int ra = loom_output_dims(a, da), rb = loom_output_dims(b, db);
  if (ra != rb) return 0;
  for (int i = 0; i < ra; i++)
    if (da[i] < 0 || da[i] != db[i]) return 0;
  return 1;
}

/* weights_broadcast_ops.broadcast_weights: weights (checked broadcastable)
 * times ones shaped like values. */
static inline loom_output bu_broadcast_weights(loom_graph *g, loom_output weights, loom_output values,
                                               const char *where) {
  if (!bu_check_broadcastable(g, weights, values, where)) return weights;
  if (bu_same_known_shape(weights, values)) return weights;
  loom_output ones = loom_ones_like(g, bu_cast(g, values, loom_output_dtype(weights)), NULL);
  return loom_mul(g, weights, ones, NULL);
}

/* Last dim of o (-1 unknown, -2 for a scalar). */
static inline int64_t bu_last_dim(loom_output o) {
  int64_t d[LOOM_MAX_DIMS];
  int r = loom_output_dims(o, d);
  return r ? d[r - 1] : -2;
}

/* confusion_matrix.remove_squeezable_dimensions(labels, predictions,
 * expected_rank_diff): squeezes the last dim (size 1 or unknown) of the
 * predictions when rank(predictions) - rank(labels) == expected + 1, or of
 * the labels when it is expected - 1. */
static inline void bu_remove_squeezable(loom_graph *g, loom_output *labels, loom_output *predictions,
                                        int expected_rank_diff) {
  int rank_diff = loom_output_ndim(*predictions) - loom_output_ndim(*labels);
  int64_t ax = -1;
  if (rank_diff == expected_rank_diff + 1) {
    int64_t d = bu_last_dim(*predictions);
    if (d == 1 || d == -1) *predictions = loom_squeeze(g, *predictions, 1, &ax, NULL);
  } else if (rank_diff == expected_rank_diff - 1) {
    int64_t d = bu_last_dim(*labels);
    if (d == 1 || d == -1) *labels = loom_squeeze(g, *labels, 1, &ax, NULL);
  }
}

/* Chain of adds of n >= 1 outputs; the last node gets `name`. */
static inline loom_output bu_add_n(loom_graph *g, int n, const loom_output *xs, const char *name) {
  if (n == 1) return loom_identity(g, xs[0], name);
  loom_output acc = xs[0];
  for (int i = 1; i < n; i++) acc = loom_add(g, acc, xs[i], i == n - 1 ? name : NULL);
  return acc;
}

#endif
