/* Reduce family: reductions over axes, ArgMax/ArgMin, ReduceSumLike, MatMul,
 * BatchMatMulV2, BiasAdd, BiasAddGrad. Definitions, shape functions, builders.
 *
 * Attributes read:
 *   Sum/Mean/Max/Min/Prod/ReduceLogSumExp: naxes (-1 = all), axes, keepdims.
 *   ArgMax/ArgMin: axis, dtype (output: LOOM_I64 when 0, or LOOM_I32).
 *   MatMul, BatchMatMulV2: transpose_a, transpose_b (adj_x / adj_y).
 *   ReduceSumLike, BiasAdd, BiasAddGrad: none. */
#include "ops/op_common.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/linalg.h"

#define DT_RED (LOOM_DT_FLOAT | LOOM_DT_INT)

/* ---- reductions ---- */
static loom_code shape_reduce_mask(loom_shape_ctx *c, uint32_t dtmask) {
  loom_code rc = loom__shape_check_dtype(c, 0, dtmask);
  if (rc) return rc;
  const loom_tdesc *x = &c->in[0];
  uint32_t mask;
  int64_t bad = 0;
  int r = loom__reduce_mask(c->attrs, x->ndim, &mask, &bad);
  if (r == -1)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "reduction axis %lld is out of range for input shape %s",
                            (long long)bad, loom__tdesc_str(x));
  if (r == -2)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "reduction axis %lld is repeated (input shape %s)",
                            (long long)bad, loom__tdesc_str(x));
  if (r)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "invalid number of reduction axes %lld", (long long)bad);
  loom_tdesc *o = &c->out[0];
  o->dtype = x->dtype;
  o->ndim = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (mask & (1u << i)) {
      if (c->attrs->keepdims) o->dims[o->ndim++] = 1;
    } else {
      o->dims[o->ndim++] = x->dims[i];
    }
  }
  return LOOM_OK;
}
static loom_code shape_reduce_num(loom_shape_ctx *c) { return shape_reduce_mask(c, DT_RED); }
static loom_code shape_reduce_float(loom_shape_ctx *c) { return shape_reduce_mask(c, LOOM_DT_FLOAT); }

static size_t ws_reduce(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                        const loom_buf *const *out) {
  (void)nin;
  (void)nout;
  (void)out;
  uint32_t mask;
  if (loom__reduce_mask(a, in[0]->ndim, &mask, NULL)) return 0;
  return loom__reduce_ws_bytes(in[0]->ndim, in[0]->dims, mask, loom_dtype_size(in[0]->dtype));
}

static loom_code shape_arg(loom_shape_ctx *c) {
  loom_code rc = loom__shape_check_dtype(c, 0, DT_RED);
  if (rc) return rc;
  const loom_tdesc *x = &c->in[0];
  loom_dtype odt = c->attrs->dtype ? c->attrs->dtype : LOOM_I64;
  if (odt != LOOM_I32 && odt != LOOM_I64)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "output dtype must be int32 or int64, got %s",
                            loom_dtype_name(odt));
  int64_t ax = c->attrs->axis < 0 ? c->attrs->axis + x->ndim : c->attrs->axis;
  if (x->ndim < 1 || ax < 0 || ax >= x->ndim)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "axis %lld is out of range for input shape %s",
                            (long long)c->attrs->axis, loom__tdesc_str(x));
  loom_tdesc *o = &c->out[0];
  o->dtype = odt;
  o->ndim = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != ax) o->dims[o->ndim++] = x->dims[i];
  return LOOM_OK;
}

/* ReduceSumLike(dy, x): x's shape, dy's dtype. */
static loom_code shape_sum_like(loom_shape_ctx *c) {
  loom_code rc = loom__shape_check_dtype(c, 0, DT_RED);
  if (rc) return rc;
  const loom_tdesc *dy = &c->in[0], *x = &c->in[1];
  int ok = x->ndim <= dy->ndim;
  for (int i = 0; ok && i < x->ndim; i++) {
    int64_t xd = x->dims[i], d = dy->dims[dy->ndim - x->ndim + i];
    ok = xd < 0 || d < 0 || xd == d || xd == 1;
  }
  if (!ok)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "shape %s does not broadcast to the gradient shape %s",
                            loom__tdesc_str(x), loom__tdesc_str(dy));
  c->out[0] = *x;
  c->out[0].dtype = dy->dtype;
  return LOOM_OK;
}
static size_t ws_sum_like(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                          const loom_buf *const *out) {
  (void)a;
  (void)nin;
  (void)nout;
  (void)out;
  uint32_t mask;
  if (loom__sum_like_mask(in[0]->ndim, in[0]->dims, in[1]->ndim, in[1]->dims, &mask)) return 0;
  return loom__reduce_ws_bytes(in[0]->ndim, in[0]->dims, mask, loom_dtype_size(in[0]->dtype));
}

/* ---- matrix products ---- */
static loom_code mm_common(loom_shape_ctx *c, const char *op, int batched) {
  const loom_tdesc *a = &c->in[0], *b = &c->in[1];
  loom_code rc = loom__shape_check_dtype(c, 0, LOOM_DT_FLOAT);
  if (rc) return rc;
  if (a->dtype != b->dtype)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "dtypes %s and %s do not match for %s",
                            loom_dtype_name(a->dtype), loom_dtype_name(b->dtype), op);
  if (batched ? (a->ndim < 2 || b->ndim < 2) : (a->ndim != 2 || b->ndim != 2))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s needs inputs of rank %s, got shapes %s and %s", op,
                            batched ? ">= 2" : "2", loom__tdesc_str(a), loom__tdesc_str(b));
  int ta = c->attrs->transpose_a, tb = c->attrs->transpose_b;
  int64_t ar = a->dims[a->ndim - 2], ac = a->dims[a->ndim - 1];
  int64_t br = b->dims[b->ndim - 2], bc = b->dims[b->ndim - 1];
  int64_t ka = ta ? ar : ac, kb = tb ? bc : br;
  if (ka >= 0 && kb >= 0 && ka != kb)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                            "shapes %s and %s are incompatible for %s: inner dimensions %lld and %lld differ "
                            "(%s=%d, %s=%d)",
                            loom__tdesc_str(a), loom__tdesc_str(b), op, (long long)ka, (long long)kb,
                            batched ? "adj_x" : "transpose_a", ta, batched ? "adj_y" : "transpose_b", tb);
  loom_tdesc *o = &c->out[0];
  o->dtype = a->dtype;
  int nb = 0;
  if (batched &&
      !loom__broadcast_shape(a->ndim - 2, a->dims, b->ndim - 2, b->dims, &nb, o->dims))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                            "shapes %s and %s are incompatible for %s: batch dimensions do not broadcast",
                            loom__tdesc_str(a), loom__tdesc_str(b), op);
  o->dims[nb] = ta ? ac : ar;
  o->dims[nb + 1] = tb ? br : bc;
  o->ndim = nb + 2;
  return LOOM_OK;
}
static loom_code shape_matmul(loom_shape_ctx *c) { return mm_common(c, "MatMul", 0); }
static loom_code shape_batch_matmul(loom_shape_ctx *c) { return mm_common(c, "BatchMatMulV2", 1); }

/* ---- bias ---- */
static loom_code shape_bias_add(loom_shape_ctx *c) {
  const loom_tdesc *v = &c->in[0], *b = &c->in[1];
  loom_code rc = loom__shape_check_dtype(c, 0, DT_RED);
  if (rc) return rc;
  if (v->dtype != b->dtype)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "value dtype %s and bias dtype %s do not match",
                            loom_dtype_name(v->dtype), loom_dtype_name(b->dtype));
  if (v->ndim < 2)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "value must have rank >= 2, got shape %s",
                            loom__tdesc_str(v));
  int64_t C = v->dims[v->ndim - 1];
  if (b->ndim != 1 || (C >= 0 && b->dims[0] >= 0 && b->dims[0] != C))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                            "bias shape %s does not match the last dimension of value shape %s", loom__tdesc_str(b),
                            loom__tdesc_str(v));
  c->out[0] = *v;
  return LOOM_OK;
}
static loom_code shape_bias_add_grad(loom_shape_ctx *c) {
  const loom_tdesc *d = &c->in[0];
  loom_code rc = loom__shape_check_dtype(c, 0, DT_RED);
  if (rc) return rc;
  if (d->ndim < 2)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "gradient must have rank >= 2, got shape %s",
                            loom__tdesc_str(d));
  c->out[0].dtype = d->dtype;
  c->out[0].ndim = 1;
  c->out[0].dims[0] = d->dims[d->ndim - 1];
  return LOOM_OK;
}

/* ---- registration ---- */
#define SET4(def, op)                                               \
  do {                                                              \
    (def).kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_##op##_f32;  \
    (def).kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_##op##_f64;  \
    (def).kernels[LOOM_DEVICE_CPU][LOOM_I32] = loom__k_##op##_i32;  \
    (def).kernels[LOOM_DEVICE_CPU][LOOM_I64] = loom__k_##op##_i64;  \
  } while (0)
#define SET2(def, op)                                               \
  do {                                                              \
    (def).kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_##op##_f32;  \
    (def).kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_##op##_f64;  \
  } while (0)

static void def_op(loom_op_def *d, int nin, loom_shape_fn shape, loom_workspace_fn ws, uint32_t flags) {
  d->nin = nin;
  d->nout = 1;
  d->shape = shape;
  d->workspace = ws;
  d->flags = flags;
}

void loom__register_reduce(loom_op_def *t) {
  def_op(&t[LOOM_OP_Sum], 1, shape_reduce_num, ws_reduce, 0);
  SET4(t[LOOM_OP_Sum], sum);
  def_op(&t[LOOM_OP_Mean], 1, shape_reduce_float, ws_reduce, 0);
  SET2(t[LOOM_OP_Mean], mean);
  def_op(&t[LOOM_OP_Max], 1, shape_reduce_num, ws_reduce, 0);
  SET4(t[LOOM_OP_Max], max);
  def_op(&t[LOOM_OP_Min], 1, shape_reduce_num, ws_reduce, 0);
  SET4(t[LOOM_OP_Min], min);
  def_op(&t[LOOM_OP_Prod], 1, shape_reduce_num, ws_reduce, 0);
  SET4(t[LOOM_OP_Prod], prod);
  def_op(&t[LOOM_OP_LogSumExp], 1, shape_reduce_float, ws_reduce, 0);
  SET2(t[LOOM_OP_LogSumExp], logsumexp);
  def_op(&t[LOOM_OP_ArgMax], 1, shape_arg, NULL, LOOM_OPF_NODIFF);
  SET4(t[LOOM_OP_ArgMax], argmax);
  def_op(&t[LOOM_OP_ArgMin], 1, shape_arg, NULL, LOOM_OPF_NODIFF);
  SET4(t[LOOM_OP_ArgMin], argmin);
  def_op(&t[LOOM_OP_ReduceSumLike], 2, shape_sum_like, ws_sum_like, 0);
  t[LOOM_OP_ReduceSumLike].nondiff_inputs = 1u << 1;
  SET4(t[LOOM_OP_ReduceSumLike], reduce_sum_like);
  def_op(&t[LOOM_OP_MatMul], 2, shape_matmul, loom__ws_matmul, 0);
  SET2(t[LOOM_OP_MatMul], matmul);
  def_op(&t[LOOM_OP_BatchMatMul], 2, shape_batch_matmul, loom__ws_matmul, 0);
  SET2(t[LOOM_OP_BatchMatMul], batch_matmul);
  def_op(&t[LOOM_OP_BiasAdd], 2, shape_bias_add, NULL, LOOM_OPF_INPLACE_OK); /* y[r, c] = x[r, c] + b[c] */
  SET4(t[LOOM_OP_BiasAdd], bias_add);
  def_op(&t[LOOM_OP_BiasAddGrad], 1, shape_bias_add_grad, NULL, LOOM_OPF_EPI_COLSUM);
  SET4(t[LOOM_OP_BiasAddGrad], bias_add_grad);
}

/* ---- builders ---- */
static loom_output build_reduce(loom_graph *g, int op, loom_output x, int naxes, const int64_t *axes, int keepdims,
                                const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (naxes < -1 || naxes > LOOM_MAX_DIMS || (naxes > 0 && !axes)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid reduction axes (naxes %d%s)",
                         name ? name : loom__op_def(op)->name, naxes, naxes > 0 && !axes ? ", axes NULL" : "");
    return loom__graph_dummy(g);
  }
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.naxes = naxes;
  for (int i = 0; i < naxes; i++) a.axes[i] = axes[i];
  a.keepdims = keepdims ? 1 : 0;
  return loom__build1(g, op, name, x, &a);
}

loom_output loom_reduce_sum(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                            const char *name) {
  return build_reduce(g, LOOM_OP_Sum, x, naxes, axes, keepdims, name);
}
loom_output loom_reduce_mean(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                             const char *name) {
  return build_reduce(g, LOOM_OP_Mean, x, naxes, axes, keepdims, name);
}
loom_output loom_reduce_max(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                            const char *name) {
  return build_reduce(g, LOOM_OP_Max, x, naxes, axes, keepdims, name);
}
loom_output loom_reduce_min(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                            const char *name) {
  return build_reduce(g, LOOM_OP_Min, x, naxes, axes, keepdims, name);
}
loom_output loom_reduce_prod(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                             const char *name) {
  return build_reduce(g, LOOM_OP_Prod, x, naxes, axes, keepdims, name);
}
loom_output loom_reduce_logsumexp(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                                  const char *name) {
  return build_reduce(g, LOOM_OP_LogSumExp, x, naxes, axes, keepdims, name);
}

static loom_output build_arg(loom_graph *g, int op, loom_output x, int64_t axis, loom_dtype out, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.axis = axis;
  a.dtype = out ? out : LOOM_I64;
  return loom__build1(g, op, name, x, &a);
}
loom_output loom_argmax(loom_graph *g, loom_output x, int64_t axis, loom_dtype out, const char *name) {
  return build_arg(g, LOOM_OP_ArgMax, x, axis, out, name);
}
loom_output loom_argmin(loom_graph *g, loom_output x, int64_t axis, loom_dtype out, const char *name) {
  return build_arg(g, LOOM_OP_ArgMin, x, axis, out, name);
}

loom_output loom_reduce_sum_like(loom_graph *g, loom_output dy, loom_output x, const char *name) {
  return loom__build2(g, LOOM_OP_ReduceSumLike, name, dy, x, NULL);
}

static loom_output build_mm(loom_graph *g, int op, loom_output a, loom_output b, int ta, int tb, const char *name) {
  loom_attrs at;
  memset(&at, 0, sizeof at);
  at.transpose_a = ta ? 1 : 0;
  at.transpose_b = tb ? 1 : 0;
  return loom__build2(g, op, name, a, b, &at);
}
loom_output loom_matmul(loom_graph *g, loom_output a, loom_output b, int transpose_a, int transpose_b,
                        const char *name) {
  return build_mm(g, LOOM_OP_MatMul, a, b, transpose_a, transpose_b, name);
}
loom_output loom_batch_matmul(loom_graph *g, loom_output a, loom_output b, int adj_x, int adj_y, const char *name) {
  return build_mm(g, LOOM_OP_BatchMatMul, a, b, adj_x, adj_y, name);
}

loom_output loom_bias_add(loom_graph *g, loom_output value, loom_output bias, const char *name) {
  return loom__build2(g, LOOM_OP_BiasAdd, name, value, bias, NULL);
}
loom_output loom_bias_add_grad(loom_graph *g, loom_output dy, const char *name) {
  return loom__build1(g, LOOM_OP_BiasAddGrad, name, dy, NULL);
}
