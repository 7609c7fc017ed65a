/* kernels/cuda/math.cu - CUDA kernels of the math family (kernels/cpu/math.c): binary
 * ops with NumPy broadcasting, comparisons, logical ops, unary ops, the
 * activation gradients, Select and ClipByValue. Formulas follow
 * kernels/cpu/math.c expression by expression. */
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/math.h"

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
UOP(u_gelu_tanh, d_gelu_tanh(x))
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


namespace {
/* ================================================= Select, ClipByValue */
/* Ternary elementwise ops with NumPy broadcasting: o[i] = F::f(a, b, c).
 * Operands the size of the output or scalars index flat; anything else
 * goes through the merged broadcast geometry. */
template <class F, class A, class B, class C, class O>
__global__ void k_tern_flat(const A *a, const B *b, const C *c, O *o, int64_t n, int sa, int sb, int sc) {
  GRID_LOOP(i, n) o[i] = F::f(a[sa ? i : 0], b[sb ? i : 0], c[sc ? i : 0]);
}
template <class F, class A, class B, class C, class O>
__global__ void k_tern_bcast(const A *a, const B *b, const C *c, O *o, int64_t n, bcast_geom g) {
  GRID_LOOP(i, n) {
    int64_t off[3];
    bcast_off_t<int64_t>(g, i, 3, off);
    o[i] = F::f(a[off[0]], b[off[1]], c[off[2]]);
  }
}
template <class F, class A, class B, class C, class O> loom_code run_ternary(const loom_kctx *ctx) {
  const loom_buf *in[3] = {ctx->in[0], ctx->in[1], ctx->in[2]};
  loom_buf *Ob = ctx->out[0];
  int64_t n = Ob->numel;
  if (n == 0) return LOOM_OK;
  cudaStream_t s = STREAM(ctx);
  const A *a = (const A *)in[0]->data;
  const B *b = (const B *)in[1]->data;
  const C *c = (const C *)in[2]->data;
  O *o = (O *)Ob->data;
  int flat = 1;
  for (int k = 0; k < 3; k++) flat &= in[k]->numel == n || in[k]->numel == 1;
  if (flat) {
    LOOM_LAUNCH(grid_for(n), NT, 0, s, k_tern_flat<F, A, B, C, O>)(a, b, c, o, n, in[0]->numel == n && n != 1,
                                                                    in[1]->numel == n && n != 1,
                                                                    in[2]->numel == n && n != 1);
    return LOOM_OK;
  }
  bcast_geom g;
  bcast_init(&g, Ob);
  for (int k = 0; k < 3; k++) bcast_strides(&g, k, in[k]);
  bcast_merge(&g, 3);
  LOOM_LAUNCH(grid_for(n), NT, 0, s, k_tern_bcast<F, A, B, C, O>)(a, b, c, o, n, g);
  return LOOM_OK;
}

/* Select(mask, x, y): both branches are read, as on the CPU. */
struct select_f {
  template <class W> __device__ __forceinline__ static W f(uint8_t m, W x, W y) { return m ? x : y; }
};
/* ClipByValue: min(max(t, lo), hi) as the CPU writes it: NaN in t stays NaN. */
struct clip_f {
  template <class T> __device__ __forceinline__ static T f(T v, T l, T h) {
    v = v < l ? l : v;
    return v > h ? h : v;
  }
};
template <typename W> loom_code run_select(const loom_kctx *ctx) { return run_ternary<select_f, uint8_t, W, W, W>(ctx); }
template <typename T> loom_code run_clip(const loom_kctx *ctx) { return run_ternary<clip_f, T, T, T, T>(ctx); }

} // namespace

#define SELECT_K(dt, W) \
  extern "C" loom_code loom__cu_select_##dt(const loom_kctx *ctx) { return run_select<W>(ctx); }
SELECT_K(f32, uint32_t)
SELECT_K(f64, uint64_t)
SELECT_K(i32, uint32_t)
SELECT_K(i64, uint64_t)
SELECT_K(u8, uint8_t)
SELECT_K(bool, uint8_t)

#define NUM_K(dt, T) \
  extern "C" loom_code loom__cu_clip_by_value_##dt(const loom_kctx *ctx) { return run_clip<T>(ctx); }
NUM_K(f32, float)
NUM_K(f64, double)
NUM_K(i32, int32_t)
NUM_K(i64, int64_t)
