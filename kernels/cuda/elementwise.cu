/* kernels/cuda/elementwise.cu - elementwise CUDA kernels: binary ops with
 * NumPy broadcasting, unary ops, gradient helpers, BiasAdd, sigmoid cross
 * entropy, ZerosLike/OnesLike, Cast, NoOp. Formulas follow
 * kernels/cpu/math.c expression by expression. */
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
struct op_gelu_g_tanh {
  template <typename T> __device__ __forceinline__ T operator()(T dy, T x, T p) const {
    (void)p;
    T th = d_tanh((T)K_SQRT_2_PI * (x + (T)K_GELU_C * x * x * x));
    return dy * ((T)0.5 * (1 + th) + (T)0.5 * x * (1 - th * th) * (T)K_SQRT_2_PI * (1 + (T)(3 * K_GELU_C) * x * x));
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

#define BIN_K(k, dt, T, F) \
  extern "C" loom_code loom__cu_##k##_##dt(const loom_kctx *ctx) { return run_bin<T, T, F>(ctx); }
#define CMP_K(k, dt, T, F) \
  extern "C" loom_code loom__cu_##k##_##dt(const loom_kctx *ctx) { return run_bin<T, uint8_t, F>(ctx); }
#define BIN_FLT(k, F) BIN_K(k, f32, float, F) BIN_K(k, f64, double, F)
#define BIN_NUM(k, F) BIN_FLT(k, F) BIN_K(k, i32, int32_t, F) BIN_K(k, i64, int64_t, F)
#define CMP_NUM(k, F) CMP_K(k, f32, float, F) CMP_K(k, f64, double, F) CMP_K(k, i32, int32_t, F) CMP_K(k, i64, int64_t, F)

BIN_NUM(add, op_add)
BIN_NUM(sub, op_sub)
BIN_NUM(mul, op_mul)
BIN_FLT(div, op_div)
BIN_FLT(pow, op_pow)
BIN_NUM(maximum, op_max)
BIN_NUM(minimum, op_min)
CMP_NUM(equal, op_eq)
CMP_NUM(not_equal, op_ne)
CMP_NUM(less, op_lt)
CMP_NUM(less_equal, op_le)
CMP_NUM(greater, op_gt)
CMP_NUM(greater_equal, op_ge)
CMP_K(logical_and, bool, uint8_t, op_and)
CMP_K(logical_or, bool, uint8_t, op_or)
BIN_FLT(relu_grad, op_relu_g)
BIN_FLT(relu6_grad, op_relu6_g)
BIN_FLT(sigmoid_grad, op_sigmoid_g)
BIN_FLT(tanh_grad, op_tanh_g)
BIN_FLT(elu_grad, op_elu_g)
BIN_FLT(selu_grad, op_selu_g)
BIN_FLT(leaky_relu_grad, op_lrelu_g)
BIN_FLT(softplus_grad, op_softplus_g)
BIN_FLT(rsqrt_grad, op_rsqrt_g)
BIN_FLT(sqrt_grad, op_sqrt_g)
BIN_FLT(sigmoid_xent, op_sigmoid_xent)
#define GELU_G(dt, T)                                                                                        \
  extern "C" loom_code loom__cu_gelu_grad_##dt(const loom_kctx *ctx) {                                      \
    return ctx->attrs && ctx->attrs->num ? run_bin<T, T, op_gelu_g_tanh>(ctx) : run_bin<T, T, op_gelu_g_exact>(ctx); \
  }
GELU_G(f32, float)
GELU_G(f64, double)

/* ---- unary ---- */
#define UOP(NAME, EXPR)                                                              \
  struct NAME {                                                                      \
    template <typename T> __device__ __forceinline__ T operator()(T x, T p) const { \
      typedef typename U_of<T>::type U;                                              \
      (void)p;                                                                       \
      return EXPR;                                                                   \
    }                                                                                \
  };
/* floats: -x and fabs (neg(0) = -0, abs(-0) = 0, as the CPU); integers wrap */
template <typename T> __device__ __forceinline__ T d_neg(T x) {
  typedef typename U_of<T>::type U;
  if constexpr (std::is_floating_point<T>::value) return -x;
  else return (T)((U)0 - (U)x);
}
template <typename T> __device__ __forceinline__ T d_abs(T x) {
  if constexpr (std::is_floating_point<T>::value) return d_fabs(x);
  else return x < 0 ? d_neg(x) : x;
}
UOP(u_neg, d_neg(x))
UOP(u_abs, d_abs(x))
UOP(u_square, (T)((U)x * (U)x))
UOP(u_sign, x > 0 ? (T)1 : x < 0 ? (T)-1 : x)
UOP(u_exp, d_exp(x))
UOP(u_log, d_log(x))
UOP(u_log1p, d_log1p(x))
UOP(u_sqrt, d_sqrt(x))
UOP(u_rsqrt, (T)1 / d_sqrt(x))
UOP(u_tanh, d_tanh(x))
UOP(u_sigmoid, (T)1 / (1 + d_exp(-x)))
UOP(u_relu, x < 0 ? (T)0 : x)
UOP(u_relu6, x < 0 ? (T)0 : x > 6 ? (T)6 : x)
UOP(u_elu, x > 0 ? x : d_expm1(x))
UOP(u_selu, x > 0 ? (T)K_SELU_SCALE * x : (T)(K_SELU_SCALE * K_SELU_ALPHA) * d_expm1(x))
UOP(u_lrelu, x > 0 ? x : x * p)
UOP(u_softplus, (x > 0 ? x : (T)0) + d_log1p(d_exp(-d_fabs(x))))
UOP(u_gelu_exact, (T)0.5 * x * (1 + d_erf(x * (T)K_SQRT1_2)))
UOP(u_gelu_tanh, (T)0.5 * x * (1 + d_tanh((T)K_SQRT_2_PI * (x + (T)K_GELU_C * x * x * x))))
UOP(u_floor, d_floor(x))
UOP(u_ceil, d_ceil(x))
UOP(u_round, d_rint(x))
UOP(u_recip, (T)1 / x)
UOP(u_not, (T)(x == 0))

template <typename T, typename F> __global__ void k_un(const T *a, T *c, int64_t n, T p) {
  F f;
  GRID_LOOP(i, n) c[i] = f(a[i], p);
}
template <typename T, typename F> static loom_code run_un(const loom_kctx *ctx) {
  int64_t n = ctx->out[0]->numel;
  if (n == 0) return LOOM_OK;
  T p = ctx->attrs ? (T)ctx->attrs->alpha : (T)0;
  LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), k_un<T, F>)((const T *)ctx->in[0]->data, (T *)ctx->out[0]->data, n, p);
  return LOOM_OK;
}
#define UN_K(k, dt, T, F) \
  extern "C" loom_code loom__cu_##k##_##dt(const loom_kctx *ctx) { return run_un<T, F>(ctx); }
#define UN_FLT(k, F) UN_K(k, f32, float, F) UN_K(k, f64, double, F)
#define UN_NUM(k, F) UN_FLT(k, F) UN_K(k, i32, int32_t, F) UN_K(k, i64, int64_t, F)
UN_NUM(neg, u_neg)
UN_NUM(abs, u_abs)
UN_NUM(square, u_square)
UN_FLT(sign, u_sign)
UN_FLT(exp, u_exp)
UN_FLT(log, u_log)
UN_FLT(log1p, u_log1p)
UN_FLT(sqrt, u_sqrt)
UN_FLT(rsqrt, u_rsqrt)
UN_FLT(tanh, u_tanh)
UN_FLT(sigmoid, u_sigmoid)
UN_FLT(relu, u_relu)
UN_FLT(relu6, u_relu6)
UN_FLT(elu, u_elu)
UN_FLT(selu, u_selu)
UN_FLT(leaky_relu, u_lrelu)
UN_FLT(softplus, u_softplus)
UN_FLT(floor, u_floor)
UN_FLT(ceil, u_ceil)
UN_FLT(round, u_round)
UN_FLT(reciprocal, u_recip)
UN_K(logical_not, bool, uint8_t, u_not)
#define GELU_K(dt, T)                                                                                   \
  extern "C" loom_code loom__cu_gelu_##dt(const loom_kctx *ctx) {                                      \
    return ctx->attrs && ctx->attrs->num ? run_un<T, u_gelu_tanh>(ctx) : run_un<T, u_gelu_exact>(ctx); \
  }
GELU_K(f32, float)
GELU_K(f64, double)

/* ---- BiasAdd(value [..., C], bias [C]) ---- */
/* I: uint32_t below 2^31 elements (32-bit modulo: several times cheaper on a GPU than 64-bit) */
template <typename T, typename I> __global__ void k_bias_add(const T *x, const T *b, T *y, I n, I C) {
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) y[i] = x[i] + b[i % C];
}
template <typename T> static loom_code run_bias_add(const loom_kctx *ctx) {
  const loom_buf *x = ctx->in[0], *b = ctx->in[1];
  int64_t C = x->ndim ? x->dims[x->ndim - 1] : 1;
  if (b->numel != C)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "bias has %lld elements, the last dimension is %lld",
                           (long long)b->numel, (long long)C);
  int64_t n = ctx->out[0]->numel;
  if (n == 0) return LOOM_OK;
  if (n < ((int64_t)1 << 31))
    LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), k_bias_add<T, uint32_t>)((const T *)x->data, (const T *)b->data,
                                                                         (T *)ctx->out[0]->data, (uint32_t)n, (uint32_t)C);
  else
    LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), k_bias_add<T, int64_t>)((const T *)x->data, (const T *)b->data,
                                                                        (T *)ctx->out[0]->data, n, C);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_bias_add_f32(const loom_kctx *ctx) { return run_bias_add<float>(ctx); }
extern "C" loom_code loom__cu_bias_add_f64(const loom_kctx *ctx) { return run_bias_add<double>(ctx); }
extern "C" loom_code loom__cu_bias_add_i32(const loom_kctx *ctx) { return run_bias_add<int32_t>(ctx); }
extern "C" loom_code loom__cu_bias_add_i64(const loom_kctx *ctx) { return run_bias_add<int64_t>(ctx); }

/* ---- NoOp, ZerosLike, OnesLike, Cast ---- */
extern "C" loom_code loom__cu_noop_any(const loom_kctx *ctx) {
  (void)ctx;
  return LOOM_OK;
}
extern "C" loom_code loom__cu_zeros_like_any(const loom_kctx *ctx) {
  loom_buf *y = ctx->out[0];
  size_t n = (size_t)y->numel * loom_dtype_size(y->dtype);
  if (n) cudaMemsetAsync(y->data, 0, n, STREAM(ctx));
  return LOOM_OK;
}
template <typename T> __global__ void k_fill(T *y, int64_t n, T v) {
  GRID_LOOP(i, n) y[i] = v;
}
extern "C" loom_code loom__cu_ones_like_any(const loom_kctx *ctx) {
  loom_buf *y = ctx->out[0];
  int64_t n = y->numel;
  if (n == 0) return LOOM_OK;
  cudaStream_t s = STREAM(ctx);
  switch (y->dtype) {
  case LOOM_F32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<float>)((float *)y->data, n, 1.0f); break;
  case LOOM_F64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<double>)((double *)y->data, n, 1.0); break;
  case LOOM_I32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<int32_t>)((int32_t *)y->data, n, 1); break;
  case LOOM_I64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<int64_t>)((int64_t *)y->data, n, 1); break;
  case LOOM_U8:
  case LOOM_BOOL: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<uint8_t>)((uint8_t *)y->data, n, 1); break;
  default: return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA kernel for %s", loom_dtype_name(y->dtype));
  }
  return LOOM_OK;
}

/* Float to integer truncates toward zero, saturates out of range and maps NaN
 * to 0 (kernels/cpu/array.c, SAT_CONV); everything else converts as C does. */
template <typename B> struct int_range;
template <> struct int_range<int32_t> {
  static constexpr int32_t lo = INT32_MIN, hi = INT32_MAX;
};
template <> struct int_range<int64_t> {
  static constexpr int64_t lo = INT64_MIN, hi = INT64_MAX;
};
template <> struct int_range<uint8_t> {
  static constexpr uint8_t lo = 0, hi = 255;
};
template <typename A, typename B> __device__ __forceinline__ B cast1(A x) {
  if constexpr (std::is_floating_point<A>::value && std::is_integral<B>::value) {
    double d = (double)x;
    if (d != d) return (B)0;
    if (d <= (double)int_range<B>::lo) return int_range<B>::lo;
    if (d >= (double)int_range<B>::hi) return int_range<B>::hi;
    return (B)d;
  } else {
    return (B)x;
  }
}
template <typename A, typename B> __global__ void k_cast(const A *x, B *y, int64_t n, int to_bool) {
  GRID_LOOP(i, n) y[i] = to_bool ? (B)(x[i] != (A)0) : cast1<A, B>(x[i]);
}
template <typename A> static loom_code cast_from(const loom_kctx *ctx, int64_t n) {
  const A *x = (const A *)ctx->in[0]->data;
  void *y = ctx->out[0]->data;
  cudaStream_t s = STREAM(ctx);
  switch (ctx->out[0]->dtype) {
  case LOOM_F32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, float>)(x, (float *)y, n, 0); break;
  case LOOM_F64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, double>)(x, (double *)y, n, 0); break;
  case LOOM_I32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, int32_t>)(x, (int32_t *)y, n, 0); break;
  case LOOM_I64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, int64_t>)(x, (int64_t *)y, n, 0); break;
  case LOOM_U8: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, uint8_t>)(x, (uint8_t *)y, n, 0); break;
  case LOOM_BOOL: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, uint8_t>)(x, (uint8_t *)y, n, 1); break;
  default:
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA cast to %s", loom_dtype_name(ctx->out[0]->dtype));
  }
  return LOOM_OK;
}
extern "C" loom_code loom__cu_cast_any(const loom_kctx *ctx) {
  int64_t n = ctx->out[0]->numel;
  if (n == 0) return LOOM_OK;
  if (ctx->in[0]->dtype == ctx->out[0]->dtype) {
    cudaMemcpyAsync(ctx->out[0]->data, ctx->in[0]->data, (size_t)n * loom_dtype_size(ctx->in[0]->dtype),
                    cudaMemcpyDeviceToDevice, STREAM(ctx));
    return LOOM_OK;
  }
  switch (ctx->in[0]->dtype) {
  case LOOM_F32: return cast_from<float>(ctx, n);
  case LOOM_F64: return cast_from<double>(ctx, n);
  case LOOM_I32: return cast_from<int32_t>(ctx, n);
  case LOOM_I64: return cast_from<int64_t>(ctx, n);
  case LOOM_U8:
  case LOOM_BOOL: return cast_from<uint8_t>(ctx, n);
  default:
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA cast from %s", loom_dtype_name(ctx->in[0]->dtype));
  }
}
