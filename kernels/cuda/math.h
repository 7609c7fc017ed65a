/* kernels/cuda/math.h - CUDA kernels of the math family (kernels/cuda/math.cu;
 * CPU: kernels/cpu/math.c): elementwise binary ops (NumPy broadcasting),
 * comparisons, logical ops, activation gradients, unary ops, Select, ClipByValue. */
#ifndef LOOM_CUDA_MATH_H
#define LOOM_CUDA_MATH_H
#include "kernels/cuda/kernel_list.h"

#define LOOM_CUDA_MATH_KERNELS(K) \
  LOOM_CU_NUM(K, Add, add) LOOM_CU_NUM(K, Sub, sub) LOOM_CU_NUM(K, Mul, mul) LOOM_CU_FLT(K, Div, div)       \
  LOOM_CU_FLT(K, Pow, pow) LOOM_CU_NUM(K, Maximum, maximum) LOOM_CU_NUM(K, Minimum, minimum)                \
  LOOM_CU_NUM(K, Equal, equal) LOOM_CU_NUM(K, NotEqual, not_equal) LOOM_CU_NUM(K, Less, less)               \
  LOOM_CU_NUM(K, LessEqual, less_equal) LOOM_CU_NUM(K, Greater, greater)                                    \
  LOOM_CU_NUM(K, GreaterEqual, greater_equal) K(LogicalAnd, logical_and, bool) K(LogicalOr, logical_or, bool) \
  LOOM_CU_FLT(K, ReluGrad, relu_grad) LOOM_CU_FLT(K, Relu6Grad, relu6_grad)                                 \
  LOOM_CU_FLT(K, SigmoidGrad, sigmoid_grad) LOOM_CU_FLT(K, TanhGrad, tanh_grad)                             \
  LOOM_CU_FLT(K, EluGrad, elu_grad) LOOM_CU_FLT(K, SeluGrad, selu_grad)                                     \
  LOOM_CU_FLT(K, LeakyReluGrad, leaky_relu_grad) LOOM_CU_FLT(K, SoftplusGrad, softplus_grad)                \
  LOOM_CU_FLT(K, GeluGrad, gelu_grad) LOOM_CU_FLT(K, RsqrtGrad, rsqrt_grad) LOOM_CU_FLT(K, SqrtGrad, sqrt_grad) \
  /* unary */                                                                                               \
  LOOM_CU_NUM(K, Neg, neg) LOOM_CU_NUM(K, Abs, abs) LOOM_CU_NUM(K, Square, square) LOOM_CU_FLT(K, Sign, sign) \
  LOOM_CU_FLT(K, Exp, exp) LOOM_CU_FLT(K, Log, log) LOOM_CU_FLT(K, Log1p, log1p) LOOM_CU_FLT(K, Sqrt, sqrt) \
  LOOM_CU_FLT(K, Rsqrt, rsqrt) LOOM_CU_FLT(K, Tanh, tanh) LOOM_CU_FLT(K, Sigmoid, sigmoid)                  \
  LOOM_CU_FLT(K, Relu, relu) LOOM_CU_FLT(K, Relu6, relu6) LOOM_CU_FLT(K, Elu, elu) LOOM_CU_FLT(K, Selu, selu) \
  LOOM_CU_FLT(K, LeakyRelu, leaky_relu) LOOM_CU_FLT(K, Softplus, softplus) LOOM_CU_FLT(K, Gelu, gelu)       \
  LOOM_CU_FLT(K, Floor, floor) LOOM_CU_FLT(K, Ceil, ceil) LOOM_CU_FLT(K, Round, round)                      \
  LOOM_CU_FLT(K, Reciprocal, reciprocal) K(LogicalNot, logical_not, bool)                                   \
  /* ternary (Select: mask, then either branch; any element type by size) */                                \
  K(Select, select, f32) K(Select, select, f64) K(Select, select, i32) K(Select, select, i64)                \
  K(Select, select, u8) K(Select, select, bool) LOOM_CU_NUM(K, ClipByValue, clip_by_value)

LOOM_CU_DECLARE_LIST(LOOM_CUDA_MATH_KERNELS)
#endif
