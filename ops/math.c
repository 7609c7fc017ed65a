/* Math ops: definitions, shape functions, builders.
 *
 * Attributes read (loom_attrs):
 *   LeakyRelu, LeakyReluGrad: alpha (slope for x <= 0).
 *   Gelu, GeluGrad: num (0 = exact erf form, 1 = tanh approximation).
 * Every other math op reads no attribute. Binary ops broadcast like NumPy;
 * Select broadcasts all three inputs; ClipByValue broadcasts min/max to t. */
#include "ops/op_common.h"
#include "kernels/cpu/math.h"

#define DT_NUM4 (LOOM_DT_FLOAT | LOOM_DT_INT)

/* "float32, float64 or int32" for messages. */
static const char *mask_str(uint32_t mask, char *buf, size_t cap) {
  int cnt = 0, total = 0;
  for (int d = 1; d < LOOM_DTYPE_COUNT; d++)
    if (mask & LOOM_DT(d)) total++;
  size_t len = 0;
  buf[0] = 0;
  for (int d = 1; d < LOOM_DTYPE_COUNT && len < cap; d++) {
    if (!(mask & LOOM_DT(d))) continue;
    cnt++;
    const char *sep = cnt == 1 ? "" : cnt == total ? " or " : ", ";
    int w = snprintf(buf + len, cap - len, "%s%s", sep, loom_dtype_name((loom_dtype)d));
    if (w < 0) break;
    len += (size_t)w;
  }
  return buf;
}

static loom_code check_dt(loom_shape_ctx *c, int i, uint32_t mask) {
  if (mask & LOOM_DT(c->in[i].dtype)) return LOOM_OK;
  char buf[96];
  return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "input %d has unsupported dtype %s (expected %s)", i,
                          loom_dtype_name(c->in[i].dtype), mask_str(mask, buf, sizeof buf));
}

/* ---- shape functions ---- */
static loom_code bin_shape(loom_shape_ctx *c, uint32_t mask, loom_dtype out) {
  loom_code rc = loom__shape_broadcast(c);
  if (rc) return rc;
  rc = check_dt(c, 0, mask);
  if (rc) return rc;
  if (out) c->out[0].dtype = out;
  return LOOM_OK;
}
static loom_code shape_bin_num(loom_shape_ctx *c) { return bin_shape(c, DT_NUM4, LOOM_DTYPE_INVALID); }
static loom_code shape_bin_float(loom_shape_ctx *c) { return bin_shape(c, LOOM_DT_FLOAT, LOOM_DTYPE_INVALID); }
static loom_code shape_cmp(loom_shape_ctx *c) { return bin_shape(c, DT_NUM4 | LOOM_DT(LOOM_U8), LOOM_BOOL); }
static loom_code shape_eq(loom_shape_ctx *c) {
  return bin_shape(c, DT_NUM4 | LOOM_DT(LOOM_U8) | LOOM_DT(LOOM_BOOL), LOOM_BOOL);
}
static loom_code shape_logic2(loom_shape_ctx *c) { return bin_shape(c, LOOM_DT(LOOM_BOOL), LOOM_BOOL); }

static loom_code un_shape(loom_shape_ctx *c, uint32_t mask) {
  loom_code rc = check_dt(c, 0, mask);
  if (rc) return rc;
  return loom__shape_same(c);
}
static loom_code shape_un_num(loom_shape_ctx *c) { return un_shape(c, DT_NUM4); }
static loom_code shape_un_float(loom_shape_ctx *c) { return un_shape(c, LOOM_DT_FLOAT); }
static loom_code shape_un_bool(loom_shape_ctx *c) { return un_shape(c, LOOM_DT(LOOM_BOOL)); }

/* SelectV2(cond, x, y): cond bool; x, y one dtype; output = broadcast of all three. */
static loom_code shape_select(loom_shape_ctx *c) {
  const loom_tdesc *m = &c->in[0], *x = &c->in[1], *y = &c->in[2];
  if (m->dtype != LOOM_BOOL)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "condition must be bool, got %s", loom_dtype_name(m->dtype));
  if (x->dtype != y->dtype)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "dtypes %s and %s of x and y do not match",
                            loom_dtype_name(x->dtype), loom_dtype_name(y->dtype));
  loom_code rc = check_dt(c, 1, DT_NUM4 | LOOM_DT(LOOM_U8) | LOOM_DT(LOOM_BOOL));
  if (rc) return rc;
  int n1, n2;
  int64_t d1[LOOM_MAX_DIMS];
  if (!loom__broadcast_shape(m->ndim, m->dims, x->ndim, x->dims, &n1, d1) ||
      !loom__broadcast_shape(n1, d1, y->ndim, y->dims, &n2, c->out[0].dims))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "shapes %s (condition), %s (x) and %s (y) are not broadcastable",
                            loom__tdesc_str(m), loom__tdesc_str(x), loom__tdesc_str(y));
  c->out[0].ndim = n2;
  c->out[0].dtype = x->dtype;
  return LOOM_OK;
}

/* ClipByValue(t, lo, hi): lo and hi have t's dtype and broadcast to t's shape. */
static loom_code shape_clip(loom_shape_ctx *c) {
  const loom_tdesc *t = &c->in[0];
  loom_code rc = check_dt(c, 0, DT_NUM4);
  if (rc) return rc;
  static const char *const what[3] = {"t", "clip_value_min", "clip_value_max"};
  for (int i = 1; i < 3; i++) {
    const loom_tdesc *v = &c->in[i];
    if (v->dtype != t->dtype)
      return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s has dtype %s, expected %s like t", what[i],
                              loom_dtype_name(v->dtype), loom_dtype_name(t->dtype));
    int n;
    int64_t r[LOOM_MAX_DIMS];
    int ok = loom__broadcast_shape(t->ndim, t->dims, v->ndim, v->dims, &n, r) && n == t->ndim;
    for (int d = 0; ok && d < n; d++)
      if (t->dims[d] >= 0 && r[d] != t->dims[d]) ok = 0;
    if (!ok)
      return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s of shape %s does not broadcast to t's shape %s", what[i],
                              loom__tdesc_str(v), loom__tdesc_str(t));
  }
  c->out[0] = *t;
  return LOOM_OK;
}

/* ---- registration ---- */
static void def(loom_op_def *t, int op, int nin, loom_shape_fn fn, uint32_t flags) {
  t[op].nin = nin;
  t[op].nout = 1;
  t[op].shape = fn;
  t[op].flags = flags;
}

void loom__register_math(loom_op_def *t) {
  const uint32_t ND = LOOM_OPF_NODIFF;
  /* elementwise: output element j reads element j of a same-shaped input 0, so the output may take
   * over input 0's buffer when nothing reads it later (engine/session.c, inplace_input) */
  const uint32_t IP = LOOM_OPF_INPLACE_OK;
  def(t, LOOM_OP_Add, 2, shape_bin_num, IP);
  def(t, LOOM_OP_Sub, 2, shape_bin_num, IP);
  def(t, LOOM_OP_Mul, 2, shape_bin_num, IP);
  def(t, LOOM_OP_Div, 2, shape_bin_num, IP);
  def(t, LOOM_OP_Pow, 2, shape_bin_float, IP);
  def(t, LOOM_OP_Maximum, 2, shape_bin_num, IP);
  def(t, LOOM_OP_Minimum, 2, shape_bin_num, IP);

  def(t, LOOM_OP_Neg, 1, shape_un_num, IP);
  def(t, LOOM_OP_Abs, 1, shape_un_num, IP);
  def(t, LOOM_OP_Square, 1, shape_un_num, IP);
  def(t, LOOM_OP_Sign, 1, shape_un_num, ND);
  static const int float_unary[] = {LOOM_OP_Exp,     LOOM_OP_Log,     LOOM_OP_Log1p,     LOOM_OP_Sqrt,
                                    LOOM_OP_Rsqrt,   LOOM_OP_Tanh,    LOOM_OP_Sigmoid,   LOOM_OP_Relu,
                                    LOOM_OP_Relu6,   LOOM_OP_Elu,     LOOM_OP_Selu,      LOOM_OP_LeakyRelu,
                                    LOOM_OP_Softplus, LOOM_OP_Gelu,   LOOM_OP_Reciprocal};
  for (size_t i = 0; i < sizeof float_unary / sizeof float_unary[0]; i++)
    def(t, float_unary[i], 1, shape_un_float, IP);
  def(t, LOOM_OP_Floor, 1, shape_un_float, ND);
  def(t, LOOM_OP_Ceil, 1, shape_un_float, ND);
  def(t, LOOM_OP_Round, 1, shape_un_float, ND);

  def(t, LOOM_OP_ClipByValue, 3, shape_clip, 0);
  def(t, LOOM_OP_Select, 3, shape_select, LOOM_OPF_KEY_OUTPUT);
  t[LOOM_OP_Select].nondiff_inputs = 1u; /* the condition */

  def(t, LOOM_OP_Equal, 2, shape_eq, ND);
  def(t, LOOM_OP_NotEqual, 2, shape_eq, ND);
  def(t, LOOM_OP_Less, 2, shape_cmp, ND);
  def(t, LOOM_OP_LessEqual, 2, shape_cmp, ND);
  def(t, LOOM_OP_Greater, 2, shape_cmp, ND);
  def(t, LOOM_OP_GreaterEqual, 2, shape_cmp, ND);
  def(t, LOOM_OP_LogicalAnd, 2, shape_logic2, ND);
  def(t, LOOM_OP_LogicalOr, 2, shape_logic2, ND);
  def(t, LOOM_OP_LogicalNot, 1, shape_un_bool, ND);

  static const int grads[] = {LOOM_OP_ReluGrad,      LOOM_OP_Relu6Grad,    LOOM_OP_SigmoidGrad, LOOM_OP_TanhGrad,
                              LOOM_OP_EluGrad,       LOOM_OP_SeluGrad,     LOOM_OP_LeakyReluGrad,
                              LOOM_OP_SoftplusGrad,  LOOM_OP_GeluGrad,     LOOM_OP_RsqrtGrad,   LOOM_OP_SqrtGrad};
  /* differentiable: their gradients (ops/grad_math.c) give second derivatives */
  for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++) def(t, grads[i], 2, shape_bin_float, IP);

#define LOOM_K_REGISTER(Op, k, dt) t[LOOM_OP_##Op].kernels[LOOM_DEVICE_CPU][LOOM_KDT_##dt] = loom__k_##k##_##dt;
  LOOM_MATH_KERNELS(LOOM_K_REGISTER)
#undef LOOM_K_REGISTER
}

/* ---- builders ---- */
#define BUILD_BINARY(fn, Op)                                                          \
  loom_output loom_##fn(loom_graph *g, loom_output a, loom_output b, const char *name) { \
    return loom__build2(g, LOOM_OP_##Op, name, a, b, NULL);                            \
  }
#define BUILD_UNARY(fn, Op)                                              \
  loom_output loom_##fn(loom_graph *g, loom_output x, const char *name) { \
    return loom__build1(g, LOOM_OP_##Op, name, x, NULL);                  \
  }

BUILD_BINARY(add, Add)
BUILD_BINARY(sub, Sub)
BUILD_BINARY(mul, Mul)
BUILD_BINARY(div, Div)
BUILD_BINARY(pow, Pow)
BUILD_BINARY(maximum, Maximum)
BUILD_BINARY(minimum, Minimum)

BUILD_UNARY(neg, Neg)
BUILD_UNARY(abs, Abs)
BUILD_UNARY(exp, Exp)
BUILD_UNARY(log, Log)
BUILD_UNARY(log1p, Log1p)
BUILD_UNARY(sqrt, Sqrt)
BUILD_UNARY(rsqrt, Rsqrt)
BUILD_UNARY(square, Square)
BUILD_UNARY(tanh, Tanh)
BUILD_UNARY(sigmoid, Sigmoid)
BUILD_UNARY(relu, Relu)
BUILD_UNARY(relu6, Relu6)
BUILD_UNARY(elu, Elu)
BUILD_UNARY(selu, Selu)
BUILD_UNARY(softplus, Softplus)
BUILD_UNARY(sign, Sign)
BUILD_UNARY(floor, Floor)
BUILD_UNARY(ceil, Ceil)
BUILD_UNARY(round, Round)
BUILD_UNARY(reciprocal, Reciprocal)

loom_output loom_leaky_relu(loom_graph *g, loom_output x, double alpha, const char *name) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.alpha = alpha;
  return loom__build1(g, LOOM_OP_LeakyRelu, name, x, &a);
}

loom_output loom_gelu(loom_graph *g, loom_output x, int approximate, const char *name) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.num = approximate ? 1 : 0;
  return loom__build1(g, LOOM_OP_Gelu, name, x, &a);
}

loom_output loom_clip_by_value(loom_graph *g, loom_output t, loom_output clip_min, loom_output clip_max,
                               const char *name) {
  loom_output in[3] = {t, clip_min, clip_max};
  return loom__buildn(g, LOOM_OP_ClipByValue, name, 3, in, NULL);
}

BUILD_BINARY(equal, Equal)
BUILD_BINARY(not_equal, NotEqual)
BUILD_BINARY(less, Less)
BUILD_BINARY(less_equal, LessEqual)
BUILD_BINARY(greater, Greater)
BUILD_BINARY(greater_equal, GreaterEqual)
BUILD_BINARY(logical_and, LogicalAnd)
BUILD_BINARY(logical_or, LogicalOr)
BUILD_UNARY(logical_not, LogicalNot)

loom_output loom_select(loom_graph *g, loom_output cond, loom_output x, loom_output y, const char *name) {
  loom_output in[3] = {cond, x, y};
  return loom__buildn(g, LOOM_OP_Select, name, 3, in, NULL);
}

BUILD_BINARY(relu_grad, ReluGrad)
BUILD_BINARY(relu6_grad, Relu6Grad)
BUILD_BINARY(sigmoid_grad, SigmoidGrad)
BUILD_BINARY(tanh_grad, TanhGrad)
BUILD_BINARY(elu_grad, EluGrad)
BUILD_BINARY(selu_grad, SeluGrad)
BUILD_BINARY(softplus_grad, SoftplusGrad)
BUILD_BINARY(rsqrt_grad, RsqrtGrad)
BUILD_BINARY(sqrt_grad, SqrtGrad)

loom_output loom_leaky_relu_grad(loom_graph *g, loom_output dy, loom_output x, double alpha, const char *name) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.alpha = alpha;
  return loom__build2(g, LOOM_OP_LeakyReluGrad, name, dy, x, &a);
}

loom_output loom_gelu_grad(loom_graph *g, loom_output dy, loom_output x, int approximate, const char *name) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.num = approximate ? 1 : 0;
  return loom__build2(g, LOOM_OP_GeluGrad, name, dy, x, &a);
}
