/* kernels/cuda/elementwise.cuh - elementwise device functions, the binary
 * functors and the broadcasting binary launcher (run_bin), shared by
 * kernels/cuda/math.cu and nn.cu (SigmoidCrossEntropyWithLogits). Formulas
 * follow kernels/cpu/math.c expression by expression. */
#ifndef LOOM_CUDA_ELEMENTWISE_CUH
#define LOOM_CUDA_ELEMENTWISE_CUH
#include <math.h>
#include <type_traits>
#include "kernels/cuda/common.cuh"

#define K_SELU_SCALE 1.0507009873554804934193349852946
#define K_SELU_ALPHA 1.6732632423543772848170429916717
#define K_SQRT1_2 0.70710678118654752440084436210485
#define K_SQRT_2_PI 0.79788456080286535587989211986876
#define K_INV_SQRT_2PI 0.39894228040143267793994605993438
#define K_GELU_C 0.044715

template <typename T> struct U_of { typedef T type; };
template <> struct U_of<int32_t> { typedef uint32_t type; };
template <> struct U_of<int64_t> { typedef uint64_t type; };

__device__ __forceinline__ float d_exp(float x) { return expf(x); }
__device__ __forceinline__ double d_exp(double x) { return exp(x); }
__device__ __forceinline__ float d_log(float x) { return logf(x); }
__device__ __forceinline__ double d_log(double x) { return log(x); }
__device__ __forceinline__ float d_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double d_log1p(double x) { return log1p(x); }
__device__ __forceinline__ float d_expm1(float x) { return expm1f(x); }
__device__ __forceinline__ double d_expm1(double x) { return expm1(x); }
__device__ __forceinline__ float d_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double d_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float d_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double d_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float d_erf(float x) { return erff(x); }
__device__ __forceinline__ double d_erf(double x) { return erf(x); }
__device__ __forceinline__ float d_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double d_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float d_fabs(float x) { return fabsf(x); }
__device__ __forceinline__ double d_fabs(double x) { return fabs(x); }
__device__ __forceinline__ float d_floor(float x) { return floorf(x); }
__device__ __forceinline__ double d_floor(double x) { return floor(x); }
__device__ __forceinline__ float d_ceil(float x) { return ceilf(x); }
__device__ __forceinline__ double d_ceil(double x) { return ceil(x); }
__device__ __forceinline__ float d_rint(float x) { return rintf(x); }
__device__ __forceinline__ double d_rint(double x) { return rint(x); }

/* ---- binary ops: struct with T apply(T x, T y, T p) ---- */
#define BOP(NAME, TO, EXPR)                                                             \
  struct NAME {                                                                         \
    template <typename T> __device__ __forceinline__ TO(T) operator()(T x, T y, T p) const { \
      typedef typename U_of<T>::type U;                                                 \
      (void)p;                                                                          \
      return EXPR;                                                                      \
    }                                                                                   \
  };
#define SAME(T) T
#define BOOL(T) uint8_t
BOP(op_add, SAME, (T)((U)x + (U)y))
BOP(op_sub, SAME, (T)((U)x - (U)y))
BOP(op_mul, SAME, (T)((U)x * (U)y))
BOP(op_div, SAME, x / y)
BOP(op_pow, SAME, d_pow(x, y))
BOP(op_max, SAME, (x > y || x != x) ? x : y)
BOP(op_min, SAME, (x < y || x != x) ? x : y)
BOP(op_eq, BOOL, (uint8_t)(x == y))
BOP(op_ne, BOOL, (uint8_t)(x != y))
BOP(op_lt, BOOL, (uint8_t)(x < y))
BOP(op_le, BOOL, (uint8_t)(x <= y))
BOP(op_gt, BOOL, (uint8_t)(x > y))
BOP(op_ge, BOOL, (uint8_t)(x >= y))
BOP(op_and, BOOL, (uint8_t)((x != 0) & (y != 0)))
BOP(op_or, BOOL, (uint8_t)((x != 0) | (y != 0)))
/* gradient helpers: (dy, y) or (y, dy) as in TF, see kernels/cpu/math.c */
BOP(op_relu_g, SAME, y > 0 ? x : (T)0)
BOP(op_relu6_g, SAME, ((y > 0) & (y < 6)) ? x : (T)0)
BOP(op_sigmoid_g, SAME, y * x * (1 - x))
BOP(op_tanh_g, SAME, y * (1 - x * x))
BOP(op_elu_g, SAME, y > 0 ? x : x * (y + 1))
BOP(op_selu_g, SAME, y > 0 ? x * (T)K_SELU_SCALE : x * (y + (T)(K_SELU_SCALE * K_SELU_ALPHA)))
BOP(op_lrelu_g, SAME, y > 0 ? x : x * p)
BOP(op_softplus_g, SAME, x / (1 + d_exp(-y)))
BOP(op_gelu_g_exact, SAME,
    x * ((T)0.5 * (1 + d_erf(y * (T)K_SQRT1_2)) + y * (T)K_INV_SQRT_2PI * d_exp((T)-0.5 * y * y)))
BOP(op_rsqrt_g, SAME, y * (T)-0.5 * x * x * x)
BOP(op_sqrt_g, SAME, y * (T)0.5 / x)
BOP(op_sigmoid_xent, SAME, (x > 0 ? x : (T)0) - x * y + d_log1p(d_exp(-d_fabs(x))))
/* 0.5 x (1 + tanh u) as x q or x E q (kernels/cpu/math.c DEF_GELU_TANH) */
template <typename T> __device__ __forceinline__ T d_gelu_tanh(T x) {
  T u = (T)K_SQRT_2_PI * (x + (T)K_GELU_C * x * x * x);
  T e = d_exp((T)-2 * d_fabs(u)), q = (T)1 / (1 + e);
  return x * (u >= 0 ? q : e * q);
}
struct op_gelu_g_tanh {
  template <typename T> __device__ __forceinline__ T operator()(T dy, T x, T p) const {
    (void)p;
    /* kernels/cpu/math.c DEF_GELU_TANH: no 1 + tanh(u) / 1 - tanh(u)^2 cancellation */
    T u = (T)K_SQRT_2_PI * (x + (T)K_GELU_C * x * x * x);
    T e = d_exp((T)-2 * d_fabs(u)), q = (T)1 / (1 + e);
    T h = u >= 0 ? q : e * q;
    T d = e > 0 ? 2 * x * e * q * q * (T)K_SQRT_2_PI * (1 + (T)(3 * K_GELU_C) * x * x) : (T)0;
    return dy * (h + d);
  }
};

template <typename T, typename TO, typename F>
__global__ void k_bin_flat(const T *a, const T *b, TO *c, int64_t n, int sa, int sb, T p) {
  F f;
  GRID_LOOP(i, n) c[i] = f(a[sa ? i : 0], b[sb ? i : 0], p);
}
template <typename T, typename TO, typename F, typename I>
__global__ void k_bin_bcast(const T *a, const T *b, TO *c, I n, bcast_geom g, T p) {
  F f;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
    I off[2];
    bcast_off_t<I>(g, i, 2, off);
    c[i] = f(a[off[0]], b[off[1]], p);
  }
}

template <typename T, typename TO, typename F> static loom_code run_bin(const loom_kctx *ctx) {
  const loom_buf *A = ctx->in[0], *B = ctx->in[1];
  loom_buf *C = ctx->out[0];
  int64_t n = C->numel;
  if (n == 0) return LOOM_OK;
  T p = ctx->attrs ? (T)ctx->attrs->alpha : (T)0;
  cudaStream_t s = STREAM(ctx);
  if ((A->numel == n || A->numel == 1) && (B->numel == n || B->numel == 1)) {
    LOOM_LAUNCH(grid_for(n), NT, 0, s, k_bin_flat<T, TO, F>)((const T *)A->data, (const T *)B->data, (TO *)C->data, n,
                                                    A->numel == n && n != 1, B->numel == n && n != 1, p);
    return LOOM_OK;
  }
  bcast_geom g;
  bcast_init(&g, C);
  bcast_strides(&g, 0, A);
  bcast_strides(&g, 1, B);
  bcast_merge(&g, 2);
  if (n < ((int64_t)1 << 31))
    LOOM_LAUNCH(grid_for(n), NT, 0, s, k_bin_bcast<T, TO, F, uint32_t>)((const T *)A->data, (const T *)B->data,
                                                                     (TO *)C->data, (uint32_t)n, g, p);
  else
    LOOM_LAUNCH(grid_for(n), NT, 0, s, k_bin_bcast<T, TO, F, int64_t>)((const T *)A->data, (const T *)B->data,
                                                                    (TO *)C->data, n, g, p);
  return LOOM_OK;
}

#endif
