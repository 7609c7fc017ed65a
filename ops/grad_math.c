/* Gradient functions of the math family (see loom_grad_fn in engine/engine_impl.h).
 *
 * Formulas follow TensorFlow's python/ops/math_grad.py and nn_grad.py. Binary
 * ops broadcast, so each input's gradient is summed back to its own shape with
 * loom__unbroadcast. Ops flagged LOOM_OPF_NODIFF (Sign, Floor, Ceil, Round,
 * comparisons, logic) have no gradient function. The gradient helpers
 * (ReluGrad ... SqrtGrad) have gradients too, so second derivatives work. */
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

/* ---- second order: gradients of the gradient helpers ----
 * Each helper is out = f(a, b) elementwise with broadcasting; g is the
 * gradient flowing into out. */
static void set2(loom_graph *g, loom_node *n, loom_gradient *dx, loom_output d0, loom_output d1) {
  dx[0].values = loom__unbroadcast(g, d0, n->in[0]);
  dx[1].values = loom__unbroadcast(g, d1, n->in[1]);
}

/* ReluGrad(dy, y) = dy * (y > 0): piecewise constant in y (TF gives zeros). */
static loom_code grad_relu_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output y = n->in[1];
  set2(g, n, dx, loom_relu_grad(g, dy[0], y, NULL), loom_zeros_like(g, y, NULL));
  return LOOM_OK;
}
static loom_code grad_relu6_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output y = n->in[1];
  set2(g, n, dx, loom_relu6_grad(g, dy[0], y, NULL), loom_zeros_like(g, y, NULL));
  return LOOM_OK;
}
static loom_code grad_leaky_relu_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[1];
  set2(g, n, dx, loom_leaky_relu_grad(g, dy[0], x, n->attrs.alpha, NULL), loom_zeros_like(g, x, NULL));
  return LOOM_OK;
}
/* SigmoidGrad(y, dy) = dy * y * (1 - y): d/dy = dy * (1 - 2y). */
static loom_code grad_sigmoid_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output y = n->in[0], d = n->in[1];
  loom_dtype dt = dtype_of(y);
  loom_output one_m_2y = loom_sub(g, scalar(g, dt, 1.0), loom_mul(g, y, scalar(g, dt, 2.0), NULL), NULL);
  set2(g, n, dx, loom_mul(g, loom_mul(g, dy[0], d, NULL), one_m_2y, NULL), loom_sigmoid_grad(g, y, dy[0], NULL));
  return LOOM_OK;
}
/* TanhGrad(y, dy) = dy * (1 - y^2): d/dy = -2 y dy. */
static loom_code grad_tanh_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output y = n->in[0], d = n->in[1];
  loom_output m2y = loom_mul(g, y, scalar(g, dtype_of(y), -2.0), NULL);
  set2(g, n, dx, loom_mul(g, loom_mul(g, dy[0], d, NULL), m2y, NULL), loom_tanh_grad(g, y, dy[0], NULL));
  return LOOM_OK;
}
/* EluGrad(dy, y) = y > 0 ? dy : dy * (y + 1); SeluGrad likewise with
 * dy * (y + scale * alpha): d/dy = y > 0 ? 0 : dy. */
static loom_code grad_elu_selu_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output d = n->in[0], y = n->in[1];
  loom_output zero = scalar(g, dtype_of(y), 0.0);
  loom_output dd = n->op == LOOM_OP_EluGrad ? loom_elu_grad(g, dy[0], y, NULL) : loom_selu_grad(g, dy[0], y, NULL);
  loom_output gy = loom_select(g, loom_greater(g, y, zero, NULL), zero, loom_mul(g, dy[0], d, NULL), NULL);
  set2(g, n, dx, dd, gy);
  return LOOM_OK;
}
/* SoftplusGrad(dy, x) = dy * sigmoid(x): d/dx = dy * sigmoid'(x). */
static loom_code grad_softplus_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output d = n->in[0], x = n->in[1];
  loom_output gx = loom_sigmoid_grad(g, loom_sigmoid(g, x, NULL), loom_mul(g, dy[0], d, NULL), NULL);
  set2(g, n, dx, loom_softplus_grad(g, dy[0], x, NULL), gx);
  return LOOM_OK;
}
/* GeluGrad(dy, x) = dy * gelu'(x): d/dx = dy * gelu''(x), with
 * exact: gelu'' = phi(x) (2 - x^2), phi the standard normal density;
 * tanh form: t = tanh(u), u = c (x + k x^3), u' = c (1 + 3k x^2), u'' = 6ckx,
 *            gelu'' = (1 - t^2) (u' - x t u'^2 + x u'' / 2). */
static loom_code grad_gelu_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output d = n->in[0], x = n->in[1];
  loom_dtype dt = dtype_of(x);
  loom_output x2 = loom_square(g, x, NULL), f2;
  if (!n->attrs.num) {
    loom_output phi = loom_mul(g, loom_exp(g, loom_mul(g, x2, scalar(g, dt, -0.5), NULL), NULL),
                               scalar(g, dt, 0.39894228040143267793994605993438), NULL);
    f2 = loom_mul(g, phi, loom_sub(g, scalar(g, dt, 2.0), x2, NULL), NULL);
  } else {
    const double c = 0.79788456080286535587989211986876, k = 0.044715;
    loom_output u = loom_mul(g, loom_add(g, x, loom_mul(g, loom_mul(g, x2, x, NULL), scalar(g, dt, k), NULL), NULL),
                             scalar(g, dt, c), NULL);
    loom_output t = loom_tanh(g, u, NULL);
    loom_output u1 = loom_add(g, scalar(g, dt, c), loom_mul(g, x2, scalar(g, dt, 3 * c * k), NULL), NULL);
    loom_output half_x_u2 = loom_mul(g, x2, scalar(g, dt, 3 * c * k), NULL); /* x u''/2 = 3ck x^2 */
    loom_output xtu1sq = loom_mul(g, loom_mul(g, x, t, NULL), loom_square(g, u1, NULL), NULL);
    loom_output inner = loom_add(g, loom_sub(g, u1, xtu1sq, NULL), half_x_u2, NULL);
    f2 = loom_tanh_grad(g, t, inner, NULL); /* (1 - t^2) * inner */
  }
  set2(g, n, dx, loom_gelu_grad(g, dy[0], x, (int)n->attrs.num, NULL),
       loom_mul(g, loom_mul(g, dy[0], d, NULL), f2, NULL));
  return LOOM_OK;
}
/* RsqrtGrad(y, dy) = -0.5 dy y^3: d/dy = -1.5 dy y^2. */
static loom_code grad_rsqrt_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output y = n->in[0], d = n->in[1];
  loom_output gy = loom_mul(g, loom_mul(g, dy[0], d, NULL),
                            loom_mul(g, loom_square(g, y, NULL), scalar(g, dtype_of(y), -1.5), NULL), NULL);
  set2(g, n, dx, gy, loom_rsqrt_grad(g, y, dy[0], NULL));
  return LOOM_OK;
}
/* SqrtGrad(y, dy) = 0.5 dy / y: d/dy = -0.5 dy / y^2 = -out / y. */
static loom_code grad_sqrt_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output y = n->in[0], out = {n, 0};
  loom_output gy = loom_neg(g, loom_div(g, loom_mul(g, dy[0], out, NULL), y, NULL), NULL);
  set2(g, n, dx, gy, loom_sqrt_grad(g, y, dy[0], NULL));
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
  t[LOOM_OP_ReluGrad].grad = grad_relu_grad;
  t[LOOM_OP_Relu6Grad].grad = grad_relu6_grad;
  t[LOOM_OP_LeakyReluGrad].grad = grad_leaky_relu_grad;
  t[LOOM_OP_SigmoidGrad].grad = grad_sigmoid_grad;
  t[LOOM_OP_TanhGrad].grad = grad_tanh_grad;
  t[LOOM_OP_EluGrad].grad = grad_elu_selu_grad;
  t[LOOM_OP_SeluGrad].grad = grad_elu_selu_grad;
  t[LOOM_OP_SoftplusGrad].grad = grad_softplus_grad;
  t[LOOM_OP_GeluGrad].grad = grad_gelu_grad;
  t[LOOM_OP_RsqrtGrad].grad = grad_rsqrt_grad;
  t[LOOM_OP_SqrtGrad].grad = grad_sqrt_grad;
}
