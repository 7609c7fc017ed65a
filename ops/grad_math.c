/* Gradient functions of the math family (see loom_grad_fn in engine/engine_impl.h).
 *
 * Formulas follow TensorFlow's python/ops/math_grad.py and nn_grad.py. Binary
 * ops broadcast, so each input's gradient is summed back to its own shape with
 * loom__unbroadcast. Ops flagged LOOM_OPF_NODIFF (Sign, Floor, Ceil, Round,
 * comparisons, logic, the *Grad helpers) have no gradient function. */
#include "ops/op_common.h"

/* Sums a broadcast gradient back to the shape of input x (no-op when the
 * static shapes already agree and are fully known). */
loom_output loom__unbroadcast(loom_graph *g, loom_output dy, loom_output x);
loom_output loom__unbroadcast(loom_graph *g, loom_output dy, loom_output x) {
  const loom_tdesc *a = &dy.node->out[dy.index], *b = &x.node->out[x.index];
  int same = a->ndim == b->ndim;
  for (int i = 0; same && i < a->ndim; i++) same = a->dims[i] == b->dims[i] && a->dims[i] >= 0;
  return same ? dy : loom_reduce_sum_like(g, dy, x, NULL);
}

static loom_dtype dtype_of(loom_output o) { return o.node->out[o.index].dtype; }

/* A rank-0 constant of dtype dt holding v. */
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

/* ---- binary arithmetic ---- */
static loom_code grad_add(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = loom__unbroadcast(g, dy[0], n->in[0]);
  dx[1].values = loom__unbroadcast(g, dy[0], n->in[1]);
  return LOOM_OK;
}

static loom_code grad_sub(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = loom__unbroadcast(g, dy[0], n->in[0]);
  dx[1].values = loom__unbroadcast(g, loom_neg(g, dy[0], NULL), n->in[1]);
  return LOOM_OK;
}

static loom_code grad_mul(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0], y = n->in[1];
  dx[0].values = loom__unbroadcast(g, loom_mul(g, dy[0], y, NULL), x);
  dx[1].values = loom__unbroadcast(g, loom_mul(g, dy[0], x, NULL), y);
  return LOOM_OK;
}

/* z = x / y: dx = dy / y; dy_ = -dy * x / y^2 = -(dy / y) * z. */
static loom_code grad_div(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0], y = n->in[1], z = {n, 0};
  loom_output t = loom_div(g, dy[0], y, NULL);
  dx[0].values = loom__unbroadcast(g, t, x);
  dx[1].values = loom__unbroadcast(g, loom_neg(g, loom_mul(g, t, z, NULL), NULL), y);
  return LOOM_OK;
}

/* z = x ^ y: dx = dy * y * x^(y-1); dy_ = dy * z * log(x) where x > 0, else 0 (TF). */
static loom_code grad_pow(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0], y = n->in[1], z = {n, 0};
  loom_dtype dt = dtype_of(x);
  loom_output one = scalar(g, dt, 1.0), zero = scalar(g, dt, 0.0);
  loom_output xpow = loom_pow(g, x, loom_sub(g, y, one, NULL), NULL);
  dx[0].values = loom__unbroadcast(g, loom_mul(g, dy[0], loom_mul(g, y, xpow, NULL), NULL), x);
  /* log(safe_x) is 0 where x <= 0 because safe_x is 1 there */
  loom_output safe_x = loom_select(g, loom_greater(g, x, zero, NULL), x, one, NULL);
  loom_output logx = loom_log(g, safe_x, NULL);
  dx[1].values = loom__unbroadcast(g, loom_mul(g, dy[0], loom_mul(g, z, logx, NULL), NULL), y);
  return LOOM_OK;
}

/* The gradient goes to x where mask(x, y) holds (ties go to x, like TF), to y elsewhere. */
static loom_code grad_minmax(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx, int is_max) {
  loom_output x = n->in[0], y = n->in[1];
  loom_output mask = is_max ? loom_greater_equal(g, x, y, NULL) : loom_less_equal(g, x, y, NULL);
  loom_output zero = scalar(g, dtype_of(dy[0]), 0.0);
  dx[0].values = loom__unbroadcast(g, loom_select(g, mask, dy[0], zero, NULL), x);
  dx[1].values = loom__unbroadcast(g, loom_select(g, mask, zero, dy[0], NULL), y);
  return LOOM_OK;
}
static loom_code grad_maximum(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  return grad_minmax(g, n, dy, dx, 1);
}
static loom_code grad_minimum(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  return grad_minmax(g, n, dy, dx, 0);
}

/* ---- unary ---- */
#define UNARY_GRAD(name, expr)                                                                      \
  static loom_code name(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {    \
    loom_output x = n->in[0], y = {n, 0}, d = dy[0];                                                \
    (void)x;                                                                                        \
    (void)y;                                                                                        \
    dx[0].values = (expr);                                                                          \
    return LOOM_OK;                                                                                 \
  }

UNARY_GRAD(grad_neg, loom_neg(g, d, NULL))
UNARY_GRAD(grad_abs, loom_mul(g, d, loom_sign(g, x, NULL), NULL))
UNARY_GRAD(grad_exp, loom_mul(g, d, y, NULL))
UNARY_GRAD(grad_log, loom_div(g, d, x, NULL))
UNARY_GRAD(grad_log1p, loom_div(g, d, loom_add(g, x, scalar(g, dtype_of(x), 1.0), NULL), NULL))
UNARY_GRAD(grad_sqrt, loom_sqrt_grad(g, y, d, NULL))
UNARY_GRAD(grad_rsqrt, loom_rsqrt_grad(g, y, d, NULL))
UNARY_GRAD(grad_square, loom_mul(g, d, loom_mul(g, x, scalar(g, dtype_of(x), 2.0), NULL), NULL))
/* d(1/x) = -1/x^2 = -y^2 */
UNARY_GRAD(grad_reciprocal, loom_neg(g, loom_mul(g, d, loom_square(g, y, NULL), NULL), NULL))
UNARY_GRAD(grad_tanh, loom_tanh_grad(g, y, d, NULL))
UNARY_GRAD(grad_sigmoid, loom_sigmoid_grad(g, y, d, NULL))
UNARY_GRAD(grad_relu, loom_relu_grad(g, d, y, NULL))
UNARY_GRAD(grad_relu6, loom_relu6_grad(g, d, y, NULL))
UNARY_GRAD(grad_elu, loom_elu_grad(g, d, y, NULL))
UNARY_GRAD(grad_selu, loom_selu_grad(g, d, y, NULL))
UNARY_GRAD(grad_leaky_relu, loom_leaky_relu_grad(g, d, x, n->attrs.alpha, NULL))
UNARY_GRAD(grad_softplus, loom_softplus_grad(g, d, x, NULL))
UNARY_GRAD(grad_gelu, loom_gelu_grad(g, d, x, (int)n->attrs.num, NULL))

/* ClipByValue(t, lo, hi) (TF): t gets dy where lo <= t <= hi; lo gets dy where
 * t < lo; hi gets dy where t > hi; lo and hi are summed back to their shapes. */
static loom_code grad_clip(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output t = n->in[0], lo = n->in[1], hi = n->in[2];
  loom_output zero = scalar(g, dtype_of(dy[0]), 0.0);
  loom_output below = loom_less(g, t, lo, NULL), above = loom_greater(g, t, hi, NULL);
  loom_output out = loom_logical_or(g, below, above, NULL);
  dx[0].values = loom__unbroadcast(g, loom_select(g, out, zero, dy[0], NULL), t);
  dx[1].values = loom__unbroadcast(g, loom_select(g, below, dy[0], zero, NULL), lo);
  dx[2].values = loom__unbroadcast(g, loom_select(g, above, dy[0], zero, NULL), hi);
  return LOOM_OK;
}

/* SelectV2(cond, x, y): x gets dy where cond, y elsewhere; cond gets nothing. */
static loom_code grad_select(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output c = n->in[0], x = n->in[1], y = n->in[2];
  loom_output zero = scalar(g, dtype_of(dy[0]), 0.0);
  dx[1].values = loom__unbroadcast(g, loom_select(g, c, dy[0], zero, NULL), x);
  dx[2].values = loom__unbroadcast(g, loom_select(g, c, zero, dy[0], NULL), y);
  return LOOM_OK;
}

void loom__register_math_grads(loom_op_def *t);
void loom__register_math_grads(loom_op_def *t) {
  t[LOOM_OP_Add].grad = grad_add;
  t[LOOM_OP_Sub].grad = grad_sub;
  t[LOOM_OP_Mul].grad = grad_mul;
  t[LOOM_OP_Div].grad = grad_div;
  t[LOOM_OP_Pow].grad = grad_pow;
  t[LOOM_OP_Maximum].grad = grad_maximum;
  t[LOOM_OP_Minimum].grad = grad_minimum;
  t[LOOM_OP_Neg].grad = grad_neg;
  t[LOOM_OP_Abs].grad = grad_abs;
  t[LOOM_OP_Exp].grad = grad_exp;
  t[LOOM_OP_Log].grad = grad_log;
  t[LOOM_OP_Log1p].grad = grad_log1p;
  t[LOOM_OP_Sqrt].grad = grad_sqrt;
  t[LOOM_OP_Rsqrt].grad = grad_rsqrt;
  t[LOOM_OP_Square].grad = grad_square;
  t[LOOM_OP_Reciprocal].grad = grad_reciprocal;
  t[LOOM_OP_Tanh].grad = grad_tanh;
  t[LOOM_OP_Sigmoid].grad = grad_sigmoid;
  t[LOOM_OP_Relu].grad = grad_relu;
  t[LOOM_OP_Relu6].grad = grad_relu6;
  t[LOOM_OP_Elu].grad = grad_elu;
  t[LOOM_OP_Selu].grad = grad_selu;
  t[LOOM_OP_LeakyRelu].grad = grad_leaky_relu;
  t[LOOM_OP_Softplus].grad = grad_softplus;
  t[LOOM_OP_Gelu].grad = grad_gelu;
  t[LOOM_OP_ClipByValue].grad = grad_clip;
  t[LOOM_OP_Select].grad = grad_select;
}
