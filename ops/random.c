/* Random ops: RandomUniform, RandomStandardNormal, TruncatedNormal, Dropout.
 *
 * Attributes read:
 *   RandomUniform / RandomStandardNormal / TruncatedNormal:
 *     dtype (F32/F64), nshape/shape (fully known), seed, seed2,
 *     alpha/beta = [lo, hi) for RandomUniform, mean/stddev for the normals;
 *     alpha == beta == 0 means the defaults [0, 1) and N(0, 1).
 *   Dropout: alpha = rate in [0, 1), seed, seed2. Two outputs: y and
 *     mask_scaled = mask / (1 - rate), so d(y)/d(x) = dy * mask_scaled.
 * All are STATEFUL (never merged or constant-folded: each run draws new
 * numbers through the per-node run counter); all but Dropout are NODIFF. */
#include <math.h>
#include <stdarg.h>
#include "ops/op_common.h"
#include "kernels/cpu/random.h"

static loom_code shape_random(loom_shape_ctx *c) {
  const loom_attrs *a = c->attrs;
  if (a->dtype != LOOM_F32 && a->dtype != LOOM_F64)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "random values must be float32 or float64, got %s",
                            loom_dtype_name(a->dtype));
  if (a->nshape < 0 || a->nshape > LOOM_MAX_DIMS)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "invalid rank %d", (int)a->nshape);
  char buf[128];
  for (int i = 0; i < a->nshape; i++) {
    if (a->shape[i] < 0)
      return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "shape %s must be fully known (dimension %d is %lld)",
                              loom__dims_str(buf, sizeof buf, a->nshape, a->shape), i, (long long)a->shape[i]);
  }
  if (loom__shape_check_attr_size(c, "shape", a->nshape, a->shape)) return LOOM_INVALID_ARGUMENT;
  c->out[0].dtype = a->dtype;
  c->out[0].ndim = a->nshape;
  memcpy(c->out[0].dims, a->shape, sizeof(int64_t) * (size_t)a->nshape);
  return LOOM_OK;
}

static loom_code shape_uniform(loom_shape_ctx *c) {
  const loom_attrs *a = c->attrs;
  if (!(a->alpha == 0 && a->beta == 0) && !(a->beta > a->alpha))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "range [%g, %g) is empty", a->alpha, a->beta);
  return shape_random(c);
}

static loom_code shape_normal(loom_shape_ctx *c) {
  const loom_attrs *a = c->attrs;
  if (!(a->beta >= 0) || !isfinite(a->alpha) || !isfinite(a->beta))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "mean %g / stddev %g are invalid (stddev must be >= 0)",
                            a->alpha, a->beta);
  return shape_random(c);
}

static loom_code shape_dropout(loom_shape_ctx *c) {
  loom_code rc = loom__shape_check_dtype(c, 0, LOOM_DT_FLOAT);
  if (rc) return rc;
  if (!(c->attrs->alpha >= 0.0 && c->attrs->alpha < 1.0))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "dropout rate %g is not in [0, 1)", c->attrs->alpha);
  c->out[0] = c->in[0];
  if (c->nout > 1) c->out[1] = c->in[0];
  return LOOM_OK;
}

void loom__register_random(loom_op_def *t) {
  loom_op_def *d;
  d = &t[LOOM_OP_RandomUniform];
  d->nin = 0;
  d->nout = 1;
  d->shape = shape_uniform;
  d->flags = LOOM_OPF_STATEFUL | LOOM_OPF_NODIFF | LOOM_OPF_KEY_OUTPUT;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_random_uniform_f32;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_random_uniform_f64;

  d = &t[LOOM_OP_RandomStandardNormal];
  d->nin = 0;
  d->nout = 1;
  d->shape = shape_normal;
  d->flags = LOOM_OPF_STATEFUL | LOOM_OPF_NODIFF | LOOM_OPF_KEY_OUTPUT;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_random_normal_f32;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_random_normal_f64;

  d = &t[LOOM_OP_TruncatedNormal];
  d->nin = 0;
  d->nout = 1;
  d->shape = shape_normal;
  d->flags = LOOM_OPF_STATEFUL | LOOM_OPF_NODIFF | LOOM_OPF_KEY_OUTPUT;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_truncated_normal_f32;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_truncated_normal_f64;

  d = &t[LOOM_OP_Dropout];
  d->nin = 1;
  d->nout = 2;
  d->shape = shape_dropout;
  d->flags = LOOM_OPF_STATEFUL | LOOM_OPF_INPLACE_OK;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_dropout_f32;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_dropout_f64;
}

/* ---- builders ---- */
static loom_output builder_fail(loom_graph *g, const char *name, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static loom_output builder_fail(loom_graph *g, const char *name, const char *op, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *full = loom__graph_unique_name(g, name && *name ? name : op);
  loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: %s", full ? full : op, msg);
  loom__free(full);
  return loom__graph_dummy(g);
}

static loom_output build_random(loom_graph *g, int op, int ndim, const int64_t *dims, loom_dtype dtype, double a,
                                double b, uint64_t seed, uint64_t seed2, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  const char *opn = loom__op_def(op)->name;
  if (ndim < 0 || ndim > LOOM_MAX_DIMS || (ndim && !dims))
    return builder_fail(g, name, opn, "invalid rank %d or NULL dims", ndim);
  loom_attrs at;
  memset(&at, 0, sizeof at);
  at.dtype = dtype;
  at.nshape = ndim;
  for (int i = 0; i < ndim; i++) at.shape[i] = dims[i];
  at.alpha = a;
  at.beta = b;
  at.seed = seed;
  at.seed2 = seed2;
  return loom__buildn(g, op, name, 0, NULL, &at);
}

loom_output loom_random_uniform(loom_graph *g, int ndim, const int64_t *dims, loom_dtype dtype, double lo, double hi,
                                uint64_t seed, uint64_t seed2, const char *name) {
  if (g && !(hi > lo && isfinite(lo) && isfinite(hi)))
    return builder_fail(g, name, "RandomUniform", "range [%g, %g) is empty or not finite", lo, hi);
  return build_random(g, LOOM_OP_RandomUniform, ndim, dims, dtype, lo, hi, seed, seed2, name);
}

loom_output loom_random_normal(loom_graph *g, int ndim, const int64_t *dims, loom_dtype dtype, double mean,
                               double stddev, uint64_t seed, uint64_t seed2, const char *name) {
  if (g && !(stddev > 0))
    return builder_fail(g, name, "RandomStandardNormal", "stddev must be > 0, got %g", stddev);
  return build_random(g, LOOM_OP_RandomStandardNormal, ndim, dims, dtype, mean, stddev, seed, seed2, name);
}

loom_output loom_truncated_normal(loom_graph *g, int ndim, const int64_t *dims, loom_dtype dtype, double mean,
                                  double stddev, uint64_t seed, uint64_t seed2, const char *name) {
  if (g && !(stddev > 0))
    return builder_fail(g, name, "TruncatedNormal", "stddev must be > 0, got %g", stddev);
  return build_random(g, LOOM_OP_TruncatedNormal, ndim, dims, dtype, mean, stddev, seed, seed2, name);
}

loom_output loom_dropout(loom_graph *g, loom_output x, double rate, uint64_t seed, uint64_t seed2,
                         loom_output *mask_scaled, const char *name) {
  if (mask_scaled) *mask_scaled = (loom_output){NULL, 0};
  if (!g) return (loom_output){NULL, 0};
  loom_attrs at;
  memset(&at, 0, sizeof at);
  at.alpha = rate;
  at.seed = seed;
  at.seed2 = seed2;
  loom_node *n = loom__graph_add(g, LOOM_OP_Dropout, name, NULL, 1, &x, &at, 2);
  if (!n) {
    loom_output d = loom__graph_dummy(g);
    if (mask_scaled) *mask_scaled = d;
    return d;
  }
  if (mask_scaled) *mask_scaled = (loom_output){n, 1};
  return (loom_output){n, 0};
}
