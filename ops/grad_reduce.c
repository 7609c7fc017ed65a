/* Gradient functions of the reduce family (see loom_grad_fn in engine/engine_impl.h).
 *
 * Reductions reshape the incoming gradient to the keepdims shape (a static
 * reshape when every kept dim is known, else one ExpandDims view per reduced
 * axis, which works with unknown dims) and broadcast it back to x. Mean's
 * divisor is a constant when the reduced dims are known at build time, else
 * it is computed at run time from Shape(x). MatMul / BatchMatMulV2 use the
 * transpose flags of the product itself, never explicit transposes. */
#include "ops/op_common.h"

loom_output loom__unbroadcast(loom_graph *g, loom_output dy, loom_output x); /* ops/grad_math.c */

static const loom_tdesc *desc(loom_output o) { return &o.node->out[o.index]; }

static loom_output scalar(loom_graph *g, loom_dtype dt, double v) {
  switch (dt) {
    case LOOM_F32: {
      float f = (float)v;
      return loom_const_data(g, dt, 0, NULL, &f, NULL);
    }
    case LOOM_I32: {
      int32_t i = (int32_t)v;
      return loom_const_data(g, dt, 0, NULL, &i, NULL);
    }
    case LOOM_I64: {
      int64_t i = (int64_t)v;
      return loom_const_data(g, dt, 0, NULL, &i, NULL);
    }
    default:
      return loom_const_data(g, LOOM_F64, 0, NULL, &v, NULL);
  }
}

/* Bit i set: axis i of the reduction's input is reduced. */
static uint32_t reduced_mask(const loom_node *n) {
  int r = desc(n->in[0])->ndim;
  const loom_attrs *a = &n->attrs;
  if (a->naxes < 0) return r >= 32 ? 0xffffffffu : (1u << r) - 1u;
  uint32_t m = 0;
  for (int i = 0; i < a->naxes; i++) {
    int64_t ax = a->axes[i] < 0 ? a->axes[i] + r : a->axes[i];
    if (ax >= 0 && ax < r) m |= 1u << ax;
  }
  return m;
}

/* t (shaped like the reduction's output) reshaped to the keepdims shape. */
static loom_output keepdims_view(loom_graph *g, const loom_node *n, loom_output t) {
  if (n->attrs.keepdims) return t;
  const loom_tdesc *x = desc(n->in[0]);
  uint32_t m = reduced_mask(n);
  if (!m) return t;
  int64_t kd[LOOM_MAX_DIMS];
  int known = 1;
  for (int i = 0; i < x->ndim; i++) {
    kd[i] = (m >> i) & 1u ? 1 : x->dims[i];
    if (kd[i] < 0) known = 0;
  }
  if (known) return loom_reshape(g, t, x->ndim, kd, NULL);
  for (int i = 0; i < x->ndim; i++)
    if ((m >> i) & 1u) t = loom_expand_dims(g, t, i, NULL);
  return t;
}

/* Number of elements reduced into each output element, as a scalar of dtype dt. */
static loom_output reduced_count(loom_graph *g, const loom_node *n, loom_dtype dt) {
  const loom_tdesc *x = desc(n->in[0]);
  uint32_t m = reduced_mask(n);
  int64_t axes[LOOM_MAX_DIMS];
  int k = 0;
  double cnt = 1;
  int known = 1;
  for (int i = 0; i < x->ndim; i++) {
    if (!((m >> i) & 1u)) continue;
    axes[k++] = i;
    if (x->dims[i] < 0) known = 0;
    else cnt *= (double)x->dims[i];
  }
  if (known) return scalar(g, dt, cnt);
  int64_t kk = k;
  loom_output idx = loom_const_data(g, LOOM_I64, 1, &kk, axes, NULL);
  loom_output dims = loom_gather(g, loom_shape(g, n->in[0], LOOM_I64, NULL), idx, 0, NULL);
  return loom_cast(g, loom_reduce_prod(g, dims, -1, NULL, 0, NULL), dt, NULL);
}

static loom_code grad_sum(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  if (!reduced_mask(n)) { /* no axis: the identity */
    dx[0].values = dy[0];
    return LOOM_OK;
  }
  dx[0].values = loom_broadcast_like(g, keepdims_view(g, n, dy[0]), n->in[0], NULL);
  return LOOM_OK;
}

static loom_code grad_mean(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  if (!reduced_mask(n)) {
    dx[0].values = dy[0];
    return LOOM_OK;
  }
  loom_dtype dt = desc(dy[0])->dtype;
  loom_output cnt = reduced_count(g, n, dt);
  loom_output d = keepdims_view(g, n, loom_div(g, dy[0], cnt, NULL));
  dx[0].values = loom_broadcast_like(g, d, n->in[0], NULL);
  return LOOM_OK;
}

/* Max / Min (TF): the gradient is split equally among the elements equal to
 * the result. */
static loom_code grad_minmax(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0];
  loom_dtype dt = desc(dy[0])->dtype;
  loom_output yk = keepdims_view(g, n, (loom_output){n, 0});
  loom_output ind = loom_cast(g, loom_equal(g, x, yk, NULL), dt, NULL);
  loom_output num = loom_reduce_sum(g, ind, n->attrs.naxes, n->attrs.axes, 1, NULL);
  loom_output share = loom_div(g, keepdims_view(g, n, dy[0]), num, NULL);
  dx[0].values = loom_mul(g, ind, share, NULL);
  return LOOM_OK;
}

/* Prod: d prod / d x_i = product of the other elements. Computed without
 * dividing by zero: with z = number of zeros in the group and p = product of
 * its non-zero elements, the gradient is p / x_i when z == 0, p at the zero
 * when z == 1, and 0 otherwise; i.e. (p / safe_x) * [z == is_zero(x_i)]. */
static loom_code grad_prod(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0];
  loom_dtype dt = desc(x)->dtype;
  loom_output zero = scalar(g, dt, 0.0), one = scalar(g, dt, 1.0);
  loom_output isz = loom_equal(g, x, zero, NULL);
  loom_output safe_x = loom_select(g, isz, one, x, NULL);
  loom_output p = loom_reduce_prod(g, safe_x, n->attrs.naxes, n->attrs.axes, 1, NULL);
  loom_output iszf = loom_cast(g, isz, dt, NULL);
  loom_output z = loom_reduce_sum(g, iszf, n->attrs.naxes, n->attrs.axes, 1, NULL);
  loom_output keep = loom_cast(g, loom_equal(g, z, iszf, NULL), dt, NULL);
  loom_output others = loom_mul(g, loom_div(g, p, safe_x, NULL), keep, NULL);
  dx[0].values = loom_mul(g, others, keepdims_view(g, n, dy[0]), NULL);
  return LOOM_OK;
}

/* LogSumExp: dx = dy * exp(x - lse). */
static loom_code grad_logsumexp(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0];
  loom_output yk = keepdims_view(g, n, (loom_output){n, 0});
  loom_output sm = loom_exp(g, loom_sub(g, x, yk, NULL), NULL);
  dx[0].values = loom_mul(g, sm, keepdims_view(g, n, dy[0]), NULL);
  return LOOM_OK;
}

/* Products: C = op(A) op(B). The four cases of TF's _MatMulGrad. */
typedef loom_output (*mm_fn)(loom_graph *g, loom_output a, loom_output b, int ta, int tb, const char *name);
static void mm_grads(loom_graph *g, mm_fn mm, loom_output a, loom_output b, loom_output d, int ta, int tb,
                     loom_output *da, loom_output *db) {
  if (!ta && !tb) {
    *da = mm(g, d, b, 0, 1, NULL); /* dC B^T */
    *db = mm(g, a, d, 1, 0, NULL); /* A^T dC */
  } else if (!ta && tb) {
    *da = mm(g, d, b, 0, 0, NULL); /* dC B */
    *db = mm(g, d, a, 1, 0, NULL); /* dC^T A */
  } else if (ta && !tb) {
    *da = mm(g, b, d, 0, 1, NULL); /* B dC^T */
    *db = mm(g, a, d, 0, 0, NULL); /* A dC */
  } else {
    *da = mm(g, b, d, 1, 1, NULL); /* B^T dC^T */
    *db = mm(g, d, a, 1, 1, NULL); /* dC^T A^T */
  }
}

static loom_code grad_matmul(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  mm_grads(g, loom_matmul, n->in[0], n->in[1], dy[0], n->attrs.transpose_a, n->attrs.transpose_b, &dx[0].values,
           &dx[1].values);
  return LOOM_OK;
}

/* Batched: the per-batch products have the broadcast batch shape; they are
 * summed back over the batch dims each input was broadcast along. */
static loom_code grad_batch_matmul(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output da, db;
  mm_grads(g, loom_batch_matmul, n->in[0], n->in[1], dy[0], n->attrs.transpose_a, n->attrs.transpose_b, &da, &db);
  dx[0].values = loom__unbroadcast(g, da, n->in[0]);
  dx[1].values = loom__unbroadcast(g, db, n->in[1]);
  return LOOM_OK;
}

static loom_code grad_bias_add(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  (void)n;
  dx[0].values = dy[0];
  dx[1].values = loom_bias_add_grad(g, dy[0], NULL);
  return LOOM_OK;
}

/* BiasAddGrad sums over every axis but the last: its gradient broadcasts back. */
static loom_code grad_bias_add_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = loom_broadcast_like(g, dy[0], n->in[0], NULL);
  return LOOM_OK;
}

/* ReduceSumLike(dy, x) sums dy over broadcast dims: its gradient broadcasts
 * back to dy's shape (x only supplies a shape). */
static loom_code grad_sum_like(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = loom_broadcast_like(g, dy[0], n->in[0], NULL);
  return LOOM_OK;
}

void loom__register_reduce_grads(loom_op_def *t);
void loom__register_reduce_grads(loom_op_def *t) {
  t[LOOM_OP_Sum].grad = grad_sum;
  t[LOOM_OP_Mean].grad = grad_mean;
  t[LOOM_OP_Max].grad = grad_minmax;
  t[LOOM_OP_Min].grad = grad_minmax;
  t[LOOM_OP_Prod].grad = grad_prod;
  t[LOOM_OP_LogSumExp].grad = grad_logsumexp;
  t[LOOM_OP_MatMul].grad = grad_matmul;
  t[LOOM_OP_BatchMatMul].grad = grad_batch_matmul;
  t[LOOM_OP_BiasAdd].grad = grad_bias_add;
  t[LOOM_OP_BiasAddGrad].grad = grad_bias_add_grad;
  t[LOOM_OP_ReduceSumLike].grad = grad_sum_like;
}
