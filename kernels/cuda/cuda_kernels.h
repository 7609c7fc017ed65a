/* kernels/cuda/cuda_kernels.h - every CUDA kernel, listed once as
 * K(OpEnum, kname, dt): loom__cu_<kname>_<dt> serves LOOM_OP_<OpEnum> for
 * dtype LOOM_CU_DT_<dt> (any = slot 0, dtype-agnostic). Defined in
 * kernels/cuda/ (*.cu files), registered by engine/backend_cuda.c. Ops not listed run
 * on the CPU with copies (see engine/backend.h). */
#ifndef LOOM_CUDA_KERNELS_H
#define LOOM_CUDA_KERNELS_H
#include "kernels/kernel.h"

#define LOOM_CU_DT_any 0
#define LOOM_CU_DT_f32 LOOM_F32
#define LOOM_CU_DT_f64 LOOM_F64
#define LOOM_CU_DT_i32 LOOM_I32
#define LOOM_CU_DT_i64 LOOM_I64
#define LOOM_CU_DT_u8 LOOM_U8
#define LOOM_CU_DT_bool LOOM_BOOL

#define LOOM_CU_FLT(K, Op, k) K(Op, k, f32) K(Op, k, f64)
#define LOOM_CU_NUM(K, Op, k) K(Op, k, f32) K(Op, k, f64) K(Op, k, i32) K(Op, k, i64)

/* the layout family (kernels/cuda/array.cu) and the rest (kernels/cuda/extra.cu) */
#include "kernels/cuda/array_kernels.h"
#include "kernels/cuda/extra_kernels.h"

#define LOOM_CUDA_KERNELS(K)                                                                                \
  K(NoOp, noop, any)                                                                                        \
  /* elementwise binary (NumPy broadcasting) */                                                             \
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
  /* elementwise unary */                                                                                   \
  LOOM_CU_NUM(K, Neg, neg) LOOM_CU_NUM(K, Abs, abs) LOOM_CU_NUM(K, Square, square) LOOM_CU_FLT(K, Sign, sign) \
  LOOM_CU_FLT(K, Exp, exp) LOOM_CU_FLT(K, Log, log) LOOM_CU_FLT(K, Log1p, log1p) LOOM_CU_FLT(K, Sqrt, sqrt) \
  LOOM_CU_FLT(K, Rsqrt, rsqrt) LOOM_CU_FLT(K, Tanh, tanh) LOOM_CU_FLT(K, Sigmoid, sigmoid)                  \
  LOOM_CU_FLT(K, Relu, relu) LOOM_CU_FLT(K, Relu6, relu6) LOOM_CU_FLT(K, Elu, elu) LOOM_CU_FLT(K, Selu, selu) \
  LOOM_CU_FLT(K, LeakyRelu, leaky_relu) LOOM_CU_FLT(K, Softplus, softplus) LOOM_CU_FLT(K, Gelu, gelu)       \
  LOOM_CU_FLT(K, Floor, floor) LOOM_CU_FLT(K, Ceil, ceil) LOOM_CU_FLT(K, Round, round)                      \
  LOOM_CU_FLT(K, Reciprocal, reciprocal) K(LogicalNot, logical_not, bool)                                   \
  LOOM_CU_NUM(K, BiasAdd, bias_add) LOOM_CU_FLT(K, SigmoidCrossEntropyWithLogits, sigmoid_xent)             \
  K(ZerosLike, zeros_like, any) K(OnesLike, ones_like, any) K(Cast, cast, any)                              \
  /* assignment (dtype-agnostic) */                                                                         \
  K(Assign, assign, any) K(AssignAdd, assign_add, any) K(AssignSub, assign_sub, any) K(AssignMul, assign_mul, any) \
  /* random (Philox4x32-10, same streams as the CPU) */                                                     \
  LOOM_CU_FLT(K, RandomUniform, random_uniform) LOOM_CU_FLT(K, RandomStandardNormal, random_normal)         \
  LOOM_CU_FLT(K, TruncatedNormal, truncated_normal) LOOM_CU_FLT(K, Dropout, dropout)                        \
  /* linear algebra (cuBLAS), reductions */                                                                 \
  LOOM_CU_FLT(K, MatMul, matmul) LOOM_CU_FLT(K, BatchMatMul, batch_matmul)                                  \
  LOOM_CU_NUM(K, Sum, sum) LOOM_CU_FLT(K, Mean, mean) LOOM_CU_NUM(K, Max, max) LOOM_CU_NUM(K, Min, min)     \
  LOOM_CU_NUM(K, Prod, prod) LOOM_CU_FLT(K, LogSumExp, logsumexp) LOOM_CU_NUM(K, ReduceSumLike, reduce_sum_like) \
  LOOM_CU_NUM(K, BiasAddGrad, bias_add_grad) LOOM_CU_NUM(K, ArgMax, argmax) LOOM_CU_NUM(K, ArgMin, argmin)  \
  /* nn */                                                                                                  \
  LOOM_CU_FLT(K, Softmax, softmax) LOOM_CU_FLT(K, LogSoftmax, log_softmax)                                  \
  LOOM_CU_FLT(K, SoftmaxCrossEntropyWithLogits, softmax_xent)                                               \
  LOOM_CU_FLT(K, SparseSoftmaxCrossEntropyWithLogits, sparse_softmax_xent)                                  \
  K(Conv2D, conv2d, f32) K(Conv2DBackpropInput, conv2d_backprop_input, f32)                                 \
  K(Conv2DBackpropFilter, conv2d_backprop_filter, f32)                                                      \
  K(MaxPool, max_pool, f32) K(AvgPool, avg_pool, f32) K(MaxPoolGrad, max_pool_grad, f32)                    \
  K(AvgPoolGrad, avg_pool_grad, f32)                                                                        \
  /* gather (segment ops: extra_kernels.h) */                                                                                   \
  K(Gather, gather, any)                                                                                    \
  /* optimizers (f32, TF's formulas) */                                                                     \
  K(ApplyGradientDescent, apply_gradient_descent, f32) K(ApplyMomentum, apply_momentum, f32)                \
  K(ApplyAdagrad, apply_adagrad, f32) K(ApplyAdam, apply_adam, f32) K(ApplyFtrlV2, apply_ftrl, f32)         \
  K(ApplyRMSProp, apply_rmsprop, f32) K(ApplyCenteredRMSProp, apply_centered_rmsprop, f32)                  \
  K(ApplyAdadelta, apply_adadelta, f32)                                                                     \
  LOOM_CUDA_ARRAY_KERNELS(K) LOOM_CUDA_EXTRA_KERNELS(K)

#ifdef __cplusplus
extern "C" {
#endif
#define LOOM_CU_DECLARE(Op, k, dt) loom_code loom__cu_##k##_##dt(const loom_kctx *ctx);
LOOM_CUDA_KERNELS(LOOM_CU_DECLARE)
#undef LOOM_CU_DECLARE
#ifdef __cplusplus
}
#endif

#endif
