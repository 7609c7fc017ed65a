/* CPU kernels of the math family.
 *
 * LOOM_MATH_KERNELS(K) lists every kernel once as K(OpEnum, kname, dt): the
 * kernel is loom__k_<kname>_<dt> and serves op LOOM_OP_<OpEnum> for dtype
 * LOOM_KDT_<dt>. It declares the kernels here and registers them in
 * ops/math.c, so the two cannot drift apart. */
#ifndef LOOM_KERNELS_CPU_MATH_H
#define LOOM_KERNELS_CPU_MATH_H
#include "kernels/kernel.h"

#define LOOM_KDT_f32 LOOM_F32
#define LOOM_KDT_f64 LOOM_F64
#define LOOM_KDT_i32 LOOM_I32
#define LOOM_KDT_i64 LOOM_I64
#define LOOM_KDT_u8 LOOM_U8
#define LOOM_KDT_bool LOOM_BOOL

#define LOOM_K_FLT(K, Op, k) K(Op, k, f32) K(Op, k, f64)
#define LOOM_K_INT(K, Op, k) K(Op, k, i32) K(Op, k, i64)
#define LOOM_K_NUM(K, Op, k) LOOM_K_FLT(K, Op, k) LOOM_K_INT(K, Op, k)
#define LOOM_K_CMP(K, Op, k) LOOM_K_NUM(K, Op, k) K(Op, k, u8)

#define LOOM_MATH_KERNELS(K)                                                                         \
  /* binary arithmetic */                                                                            \
  LOOM_K_NUM(K, Add, add) LOOM_K_NUM(K, Sub, sub) LOOM_K_NUM(K, Mul, mul) LOOM_K_NUM(K, Div, div)    \
  LOOM_K_FLT(K, Pow, pow) LOOM_K_NUM(K, Maximum, maximum) LOOM_K_NUM(K, Minimum, minimum)            \
  /* unary */                                                                                        \
  LOOM_K_NUM(K, Neg, neg) LOOM_K_NUM(K, Abs, abs) LOOM_K_NUM(K, Square, square)                      \
  LOOM_K_NUM(K, Sign, sign) LOOM_K_FLT(K, Exp, exp) LOOM_K_FLT(K, Log, log)                          \
  LOOM_K_FLT(K, Log1p, log1p) LOOM_K_FLT(K, Sqrt, sqrt) LOOM_K_FLT(K, Rsqrt, rsqrt)                  \
  LOOM_K_FLT(K, Tanh, tanh) LOOM_K_FLT(K, Sigmoid, sigmoid) LOOM_K_FLT(K, Relu, relu)                \
  LOOM_K_FLT(K, Relu6, relu6) LOOM_K_FLT(K, Elu, elu) LOOM_K_FLT(K, Selu, selu)                      \
  LOOM_K_FLT(K, LeakyRelu, leaky_relu) LOOM_K_FLT(K, Softplus, softplus) LOOM_K_FLT(K, Gelu, gelu)   \
  LOOM_K_FLT(K, Floor, floor) LOOM_K_FLT(K, Ceil, ceil) LOOM_K_FLT(K, Round, round)                  \
  LOOM_K_FLT(K, Reciprocal, reciprocal)                                                              \
  /* clip, select */                                                                                 \
  LOOM_K_NUM(K, ClipByValue, clip_by_value)                                                          \
  LOOM_K_NUM(K, Select, select) K(Select, select, u8) K(Select, select, bool)                        \
  /* comparisons and logic */                                                                        \
  LOOM_K_CMP(K, Equal, equal) K(Equal, equal, bool) LOOM_K_CMP(K, NotEqual, not_equal)               \
  K(NotEqual, not_equal, bool) LOOM_K_CMP(K, Less, less) LOOM_K_CMP(K, LessEqual, less_equal)        \
  LOOM_K_CMP(K, Greater, greater) LOOM_K_CMP(K, GreaterEqual, greater_equal)                         \
  K(LogicalAnd, logical_and, bool) K(LogicalOr, logical_or, bool) K(LogicalNot, logical_not, bool)   \
  /* gradient helpers */                                                                             \
  LOOM_K_FLT(K, ReluGrad, relu_grad) LOOM_K_FLT(K, Relu6Grad, relu6_grad)                            \
  LOOM_K_FLT(K, SigmoidGrad, sigmoid_grad) LOOM_K_FLT(K, TanhGrad, tanh_grad)                        \
  LOOM_K_FLT(K, EluGrad, elu_grad) LOOM_K_FLT(K, SeluGrad, selu_grad)                                \
  LOOM_K_FLT(K, LeakyReluGrad, leaky_relu_grad) LOOM_K_FLT(K, SoftplusGrad, softplus_grad)           \
  LOOM_K_FLT(K, GeluGrad, gelu_grad) LOOM_K_FLT(K, RsqrtGrad, rsqrt_grad)                            \
  LOOM_K_FLT(K, SqrtGrad, sqrt_grad)

#define LOOM_K_DECLARE(Op, k, dt) loom_code loom__k_##k##_##dt(const loom_kctx *ctx);
LOOM_MATH_KERNELS(LOOM_K_DECLARE)
#undef LOOM_K_DECLARE

#endif
