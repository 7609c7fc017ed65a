/* CPU kernels of the math family: elementwise ops with NumPy broadcasting.
 *
 * Every op is written once as an expression macro E(T, U, x, y, p) (binary)
 * or E(T, U, x, p) (unary) -- T the element type, U its unsigned twin for
 * wrap-around integer arithmetic (T itself for floats), p the op's parameter
 * (attrs.alpha) -- and stamped out per dtype by FOR_FLT / FOR_INT.
 *
 * Binary kernels use the broadcasting plan of kernels/cpu/bcast.h: after
 * coalescing, the inner loop of each row is one of vector-vector,
 * vector-scalar or scalar-vector, each a loop GCC vectorizes. This covers
 * same shapes (one row), tensor op scalar (one row), bias-like [N,C] op [C]
 * (N rows) and [N,C] op [N,1]; anything else walks the outer dims with an
 * odometer. A short broadcast row ([N,C] op [C] with
 * C <= TILE_MAX_INNER) is first repeated into a small stack tile so the inner
 * loop spans many rows. Work is split over the flat output range with
 * loom__parallel_for above LOOM_PAR_GRAIN.
 *
 * Transcendentals call expf/logf/... so that GCC can use glibc's libmvec
 * vector variants (declared below; glibc only declares them under
 * -ffast-math). libmvec is pulled in by -lm (libm.so is a linker script
 * naming it AS_NEEDED). Define LOOM_NO_LIBMVEC to get scalar calls. */
#if defined(__GNUC__) && !defined(__clang__)
/* GCC 12's -O2 uses the "very-cheap" vectorizer cost model, which rejects
 * loops of unknown trip count (they need a scalar epilogue): every loop here. */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kernels/cpu/math.h"
#include "kernels/cpu/bcast.h"
#include "kernels/cpu/isa.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    !defined(__FAST_MATH__) && !defined(LOOM_NO_LIBMVEC) && __GNUC__ >= 6
#define LOOM_SIMD_DECL __attribute__((__simd__("notinbranch")))
float expf(float) LOOM_SIMD_DECL;
double exp(double) LOOM_SIMD_DECL;
float logf(float) LOOM_SIMD_DECL;
double log(double) LOOM_SIMD_DECL;
float powf(float, float) LOOM_SIMD_DECL;
double pow(double, double) LOOM_SIMD_DECL;
#if __GLIBC_PREREQ(2, 35)
float log1pf(float) LOOM_SIMD_DECL;
double log1p(double) LOOM_SIMD_DECL;
float expm1f(float) LOOM_SIMD_DECL;
double expm1(double) LOOM_SIMD_DECL;
float tanhf(float) LOOM_SIMD_DECL;
double tanh(double) LOOM_SIMD_DECL;
float erff(float) LOOM_SIMD_DECL;
double erf(double) LOOM_SIMD_DECL;
#endif
#endif

/* Type-generic libm call: fn##f for float, fn for double. */
#define G1(fn, x) _Generic((x), float: fn##f, default: fn)(x)
#define G2(fn, x, y) _Generic((x), float: fn##f, default: fn)((x), (y))

#define K_SELU_SCALE 1.0507009873554804934193349852946
#define K_SELU_ALPHA 1.6732632423543772848170429916717
#define K_SQRT1_2 0.70710678118654752440084436210485   /* 1/sqrt(2) */
#define K_SQRT_2_PI 0.79788456080286535587989211986876 /* sqrt(2/pi) */
#define K_INV_SQRT_2PI 0.39894228040143267793994605993438 /* 1/sqrt(2*pi) */
#define K_GELU_C 0.044715

/* ---------------------------------------------------------------- dtypes */
#define FOR_FLT(M, ...) M(f32, float, float, __VA_ARGS__) M(f64, double, double, __VA_ARGS__)
#define FOR_INT(M, ...) M(i32, int32_t, uint32_t, __VA_ARGS__) M(i64, int64_t, uint64_t, __VA_ARGS__)
#define FOR_NUM(M, ...) FOR_FLT(M, __VA_ARGS__) FOR_INT(M, __VA_ARGS__)

/* ------------------------------------------------------------ expressions */
/* binary: x, y are the inputs in op order */
#define E_ADD(T, U, x, y, p) (T)((U)(x) + (U)(y))
#define E_SUB(T, U, x, y, p) (T)((U)(x) - (U)(y))
#define E_MUL(T, U, x, y, p) (T)((U)(x) * (U)(y))
#define E_DIV_F(T, U, x, y, p) ((x) / (y))
/* y == 0 was rejected before; INT_MIN / -1 wraps like TF instead of trapping */
#define E_DIV_I(T, U, x, y, p) ((y) == -1 ? (T)((U)0 - (U)(x)) : (T)((x) / (y)))
#define E_POW(T, U, x, y, p) G2(pow, x, y)
/* float max/min propagate NaN from either side */
#define E_MAX_F(T, U, x, y, p) (((x) > (y) || (x) != (x)) ? (x) : (y))
#define E_MIN_F(T, U, x, y, p) (((x) < (y) || (x) != (x)) ? (x) : (y))
#define E_MAX_I(T, U, x, y, p) ((x) > (y) ? (x) : (y))
#define E_MIN_I(T, U, x, y, p) ((x) < (y) ? (x) : (y))
#define E_EQ(T, U, x, y, p) ((x) == (y))
#define E_NE(T, U, x, y, p) ((x) != (y))
#define E_LT(T, U, x, y, p) ((x) < (y))
#define E_LE(T, U, x, y, p) ((x) <= (y))
#define E_GT(T, U, x, y, p) ((x) > (y))
#define E_GE(T, U, x, y, p) ((x) >= (y))
#define E_AND(T, U, x, y, p) (((x) != 0) & ((y) != 0))
#define E_OR(T, U, x, y, p) (((x) != 0) | ((y) != 0))
/* gradient helpers, argument order as in TF */
#define E_RELU_G(T, U, dy, y, p) ((y) > 0 ? (dy) : (T)0)
#define E_RELU6_G(T, U, dy, y, p) ((((y) > 0) & ((y) < 6)) ? (dy) : (T)0)
#define E_SIGMOID_G(T, U, y, dy, p) ((dy) * (y) * (1 - (y)))
#define E_TANH_G(T, U, y, dy, p) ((dy) * (1 - (y) * (y)))
#define E_ELU_G(T, U, dy, y, p) ((y) > 0 ? (dy) : (dy) * ((y) + 1))
#define E_SELU_G(T, U, dy, y, p) \
  ((y) > 0 ? (dy) * (T)K_SELU_SCALE : (dy) * ((y) + (T)(K_SELU_SCALE * K_SELU_ALPHA)))
#define E_LRELU_G(T, U, dy, x, p) ((x) > 0 ? (dy) : (dy) * (p))
#define E_SOFTPLUS_G(T, U, dy, x, p) ((dy) / (1 + G1(exp, -(x))))
#define E_GELU_G_EXACT(T, U, dy, x, p)                                  \
  ((dy) * ((T)0.5 * (1 + G1(erf, (x) * (T)K_SQRT1_2)) +                 \
           (x) * (T)K_INV_SQRT_2PI * G1(exp, (T)-0.5 * (x) * (x))))
/* The tanh-form GELU, u = sqrt(2/pi) (x + 0.044715 x^3), without cancellation. Written
 * as 1 + tanh(u) and 1 - tanh(u)^2 with th = tanh(u) rounded, both lose ~log10(1/(1 - |th|)) digits
 * where |th| is near 1: in f64 the gradient was 2.7e-7 off (relative) at x = -6, 0.7% at -7 and 0 for
 * x <= -8 (th rounds to -1). The CPU and an H100 disagreed by only 1.43e-11 at x = -6 because both
 * rounded the same tanh; the GPU contracted 1 - th*th into an FMA, whose difference from the CPU's
 * two roundings is exactly (1 + th)/2 = 1.43e-11 relative. With E = exp(-2|u|) in (0, 1] and q = 1/(1+E):
 *   (1 + tanh u) / 2 = q (u >= 0) or E q (u < 0),   (1 - tanh^2 u) / 4 = E q^2,
 * every factor is a product of well-conditioned terms, so the result is good to a few ulps wherever
 * gelu'(x) is not itself near its root (x ~ -0.75, where any formula cancels). The same formula is in
 * kernels/cuda/ (elementwise.cuh, math.cu). Where E underflows (|u| > 372 in f64, 52 in f32) the
 * derivative term is its limit 0: x^3 may overflow there (f32 x = 1e20), and 0 * inf was NaN. */
#define DEF_GELU_TANH(T, S)                                                                    \
  LOOM_FORCE_INLINE T gelu_tanh_##S(T x) {                                                     \
    T u = (T)K_SQRT_2_PI * (x + (T)K_GELU_C * x * x * x);                                      \
    T e = G1(exp, (T)-2 * G1(fabs, u)), q = 1 / (1 + e);                                       \
    return x * (u >= 0 ? q : e * q);                                                           \
  }                                                                                            \
  LOOM_FORCE_INLINE T gelu_grad_tanh_##S(T dy, T x) {                                          \
    T u = (T)K_SQRT_2_PI * (x + (T)K_GELU_C * x * x * x);                                      \
    T e = G1(exp, (T)-2 * G1(fabs, u)), q = 1 / (1 + e);                                       \
    T h = u >= 0 ? q : e * q; /* (1 + tanh u) / 2 */                                           \
    T d = e > 0 ? 2 * x * e * q * q * (T)K_SQRT_2_PI * (1 + (T)(3 * K_GELU_C) * x * x) : (T)0; \
    return dy * (h + d);                                                                       \
  }
DEF_GELU_TANH(float, f32)
DEF_GELU_TANH(double, f64)
#define E_GELU_G_TANH(T, U, dy, x, p) _Generic((x), float: gelu_grad_tanh_f32, default: gelu_grad_tanh_f64)(dy, x)
#define E_RSQRT_G(T, U, y, dy, p) ((dy) * (T)-0.5 * (y) * (y) * (y))
#define E_SQRT_G(T, U, y, dy, p) ((dy) * (T)0.5 / (y))

/* unary */
#define E_NEG_F(T, U, x, p) (-(x))
#define E_NEG_I(T, U, x, p) (T)((U)0 - (U)(x))
#define E_ABS_F(T, U, x, p) G1(fabs, x)
#define E_ABS_I(T, U, x, p) ((x) < 0 ? (T)((U)0 - (U)(x)) : (x))
#define E_SQUARE(T, U, x, p) (T)((U)(x) * (U)(x))
/* sign(NaN) = NaN, sign(+-0) = +-0 */
#define E_SIGN_F(T, U, x, p) ((x) > 0 ? (T)1 : (x) < 0 ? (T)-1 : (x))
#define E_SIGN_I(T, U, x, p) (T)(((x) > 0) - ((x) < 0))
#define E_EXP(T, U, x, p) G1(exp, x)
#define E_LOG(T, U, x, p) G1(log, x)
#define E_LOG1P(T, U, x, p) G1(log1p, x)
#define E_SQRT(T, U, x, p) G1(sqrt, x)
#define E_RSQRT(T, U, x, p) ((T)1 / G1(sqrt, x))
#define E_TANH(T, U, x, p) G1(tanh, x)
#define E_SIGMOID(T, U, x, p) ((T)1 / (1 + G1(exp, -(x))))
#define E_RELU(T, U, x, p) ((x) < 0 ? (T)0 : (x))
#define E_RELU6(T, U, x, p) ((x) < 0 ? (T)0 : (x) > 6 ? (T)6 : (x))
#define E_ELU(T, U, x, p) ((x) > 0 ? (x) : G1(expm1, x))
#define E_SELU(T, U, x, p) \
  ((x) > 0 ? (T)K_SELU_SCALE * (x) : (T)(K_SELU_SCALE * K_SELU_ALPHA) * G1(expm1, x))
#define E_LRELU(T, U, x, p) ((x) > 0 ? (x) : (x) * (p))
/* max(x,0) + log1p(exp(-|x|)): no overflow for large |x| */
#define E_SOFTPLUS(T, U, x, p) (((x) > 0 ? (x) : (T)0) + G1(log1p, G1(exp, -G1(fabs, x))))
#define E_GELU_EXACT(T, U, x, p) ((T)0.5 * (x) * (1 + G1(erf, (x) * (T)K_SQRT1_2)))
#define E_GELU_TANH(T, U, x, p) _Generic((x), float: gelu_tanh_f32, default: gelu_tanh_f64)(x)
#define E_FLOOR(T, U, x, p) G1(floor, x)
#define E_CEIL(T, U, x, p) G1(ceil, x)
/* rint in the default rounding mode: half to even, like TF's Round */
#define E_ROUND(T, U, x, p) G1(rint, x)
#define E_RECIP(T, U, x, p) ((T)1 / (x))
#define E_NOT(T, U, x, p) ((x) == 0)

/* ------------------------------------------------------ binary framework */
typedef struct bin_args {
  loom_bcast p;
  const void *a, *b;
  void *c;
  double p0;
  int tiled; /* 1: b is a short row broadcast over a's rows; 2: a is; 0: neither */
} bin_args;

/* Rows this short are run as "tiled": the broadcast row is repeated into a
 * stack buffer of TILE_BYTES so the inner loop spans many rows at once. */
#define TILE_MAX_INNER 64
#define TILE_BYTES 2048

/* The elementwise loops may run in place (engine/session.c gives an op's output input 0's buffer
 * when that input dies there; c == a, and c == b for x op x): same-index reads and writes only, so
 * the pointers are not restrict-qualified and GCC is told the iterations are independent. */
#if defined(__GNUC__) && !defined(__clang__)
#define ELEM_IVDEP _Pragma("GCC ivdep")
#else
#define ELEM_IVDEP
#endif

#define DEF_BINARY_CHUNK(NAME, T, U, TC, E)                                                          \
  LOOM_FORCE_INLINE void NAME##_vv(const T *a, const T *b, TC *c, int64_t n,                             \
                               T p0) {                                                               \
    ELEM_IVDEP                                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                                \
      T x_ = a[i], y_ = b[i];                                                                        \
      c[i] = (TC)(E(T, U, x_, y_, p0));                                                              \
    }                                                                                                \
  }                                                                                                  \
  LOOM_FORCE_INLINE void NAME##_vs(const T *a, T y_, TC *c, int64_t n, T p0) {                          \
    ELEM_IVDEP                                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                                \
      T x_ = a[i];                                                                                   \
      c[i] = (TC)(E(T, U, x_, y_, p0));                                                              \
    }                                                                                                \
  }                                                                                                  \
  LOOM_FORCE_INLINE void NAME##_sv(T x_, const T *b, TC *c, int64_t n, T p0) {                          \
    ELEM_IVDEP                                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                                \
      T y_ = b[i];                                                                                   \
      c[i] = (TC)(E(T, U, x_, y_, p0));                                                              \
    }                                                                                                \
  }                                                                                                  \
  LOOM_FORCE_INLINE void NAME##_tiled(const bin_args *ba, int64_t lo, int64_t hi) {                            \
    const int64_t inner = ba->p.dims[1];                                                             \
    T tile[TILE_BYTES / sizeof(T)];                                                                  \
    const int64_t tl = (int64_t)(sizeof tile / sizeof(T)) / inner * inner;                           \
    const T *row = ba->tiled == 1 ? (const T *)ba->b : (const T *)ba->a;                             \
    const T *full = ba->tiled == 1 ? (const T *)ba->a : (const T *)ba->b;                            \
    TC *C = ba->c;                                                                                   \
    const T p0 = (T)ba->p0;                                                                          \
    for (int64_t r = 0; r < tl; r += inner) memcpy(tile + r, row, (size_t)inner * sizeof(T));        \
    for (int64_t pos = lo; pos < hi;) {                                                              \
      int64_t j = pos % inner, len = tl - j;                                                         \
      if (len > hi - pos) len = hi - pos;                                                            \
      if (ba->tiled == 1)                                                                            \
        NAME##_vv(full + pos, tile + j, C + pos, len, p0);                                           \
      else                                                                                           \
        NAME##_vv(tile + j, full + pos, C + pos, len, p0);                                           \
      pos += len;                                                                                    \
    }                                                                                                \
  }                                                                                                  \
  LOOM_HOT static void NAME##_chunk(void *arg, int64_t lo, int64_t hi) {                                      \
    const bin_args *ba = arg;                                                                        \
    if (ba->tiled) {                                                                                 \
      NAME##_tiled(ba, lo, hi);                                                                      \
      return;                                                                                        \
    }                                                                                                \
    const loom_bcast *p = &ba->p;                                                                    \
    const T *A = ba->a, *B = ba->b;                                                                  \
    TC *C = ba->c;                                                                                   \
    const T p0 = (T)ba->p0;                                                                          \
    const int64_t inner = loom__bcast_inner(p);                                                      \
    const int sa = loom__bcast_istride(p, 0) != 0, sb = loom__bcast_istride(p, 1) != 0;             \
    loom_bcast_it it;                                                                                \
    loom__bcast_seek(p, 2, lo, &it);                                                                 \
    for (int64_t i = lo; i < hi;) {                                                                  \
      int64_t len = inner - it.j;                                                                    \
      if (len > hi - i) len = hi - i;                                                                \
      const T *a = A + it.off[0], *b = B + it.off[1];                                                \
      TC *c = C + i;                                                                                 \
      if (sa && sb)                                                                                  \
        NAME##_vv(a, b, c, len, p0);                                                                 \
      else if (sa)                                                                                   \
        NAME##_vs(a, *b, c, len, p0);                                                                \
      else if (sb)                                                                                   \
        NAME##_sv(*a, b, c, len, p0);                                                                \
      else {                                                                                         \
        T x_ = *a, y_ = *b;                                                                          \
        TC v_ = (TC)(E(T, U, x_, y_, p0));                                                           \
        for (int64_t k = 0; k < len; k++) c[k] = v_;                                                 \
      }                                                                                              \
      i += len;                                                                                      \
      loom__bcast_next_row(p, 2, &it);                                                               \
    }                                                                                                \
  }

static loom_code run_binary(const loom_kctx *ctx, loom_range_fn chunk) {
  loom_buf *C = ctx->out[0];
  if (C->numel == 0) return LOOM_OK;
  bin_args x;
  loom__bcast_init(&x.p, 2, (const loom_buf *const *)ctx->in, C);
  x.a = ctx->in[0]->data;
  x.b = ctx->in[1]->data;
  x.c = C->data;
  x.p0 = ctx->attrs ? ctx->attrs->alpha : 0.0;
  x.tiled = 0;
  const loom_bcast *p = &x.p;
  if (p->ndim == 2 && p->dims[1] <= TILE_MAX_INNER && p->dims[0] > 1) {
    int64_t w = p->dims[1];
    if (p->st[0][0] == w && p->st[0][1] == 1 && p->st[1][0] == 0 && p->st[1][1] == 1) x.tiled = 1;
    if (p->st[1][0] == w && p->st[1][1] == 1 && p->st[0][0] == 0 && p->st[0][1] == 1) x.tiled = 2;
  }
  loom__parallel_for(ctx->pool, C->numel, LOOM_PAR_GRAIN, chunk, &x);
  return LOOM_OK;
}

#define DEF_BINARY(NAME, T, U, TC, E) \
  DEF_BINARY_CHUNK(NAME, T, U, TC, E) \
  loom_code loom__k_##NAME(const loom_kctx *ctx) { return run_binary(ctx, NAME##_chunk); }

/* stampers: (dtype suffix, T, U, kernel name, expression) */
#define BIN(sfx, T, U, k, E) DEF_BINARY(k##_##sfx, T, U, T, E)
#define CMP(sfx, T, U, k, E) DEF_BINARY(k##_##sfx, T, U, uint8_t, E)
#define CMP_ALL(k, E)                      \
  FOR_NUM(CMP, k, E)                       \
  CMP(u8, uint8_t, uint8_t, k, E)

FOR_NUM(BIN, add, E_ADD)
FOR_NUM(BIN, sub, E_SUB)
FOR_NUM(BIN, mul, E_MUL)
FOR_FLT(BIN, div, E_DIV_F)
FOR_FLT(BIN, pow, E_POW)
FOR_FLT(BIN, maximum, E_MAX_F)
FOR_INT(BIN, maximum, E_MAX_I)
FOR_FLT(BIN, minimum, E_MIN_F)
FOR_INT(BIN, minimum, E_MIN_I)

CMP_ALL(equal, E_EQ)
CMP(bool, uint8_t, uint8_t, equal, E_EQ)
CMP_ALL(not_equal, E_NE)
CMP(bool, uint8_t, uint8_t, not_equal, E_NE)
CMP_ALL(less, E_LT)
CMP_ALL(less_equal, E_LE)
CMP_ALL(greater, E_GT)
CMP_ALL(greater_equal, E_GE)
CMP(bool, uint8_t, uint8_t, logical_and, E_AND)
CMP(bool, uint8_t, uint8_t, logical_or, E_OR)

FOR_FLT(BIN, relu_grad, E_RELU_G)
FOR_FLT(BIN, relu6_grad, E_RELU6_G)
FOR_FLT(BIN, sigmoid_grad, E_SIGMOID_G)
FOR_FLT(BIN, tanh_grad, E_TANH_G)
FOR_FLT(BIN, elu_grad, E_ELU_G)
FOR_FLT(BIN, selu_grad, E_SELU_G)
FOR_FLT(BIN, leaky_relu_grad, E_LRELU_G)
FOR_FLT(BIN, softplus_grad, E_SOFTPLUS_G)
FOR_FLT(BIN, rsqrt_grad, E_RSQRT_G)
FOR_FLT(BIN, sqrt_grad, E_SQRT_G)

/* GeluGrad: attrs.num != 0 selects the tanh approximation. */
#define GELU_GRAD(sfx, T, U, unused)                                                                  \
  DEF_BINARY_CHUNK(gelu_grad_exact_##sfx, T, U, T, E_GELU_G_EXACT)                                    \
  DEF_BINARY_CHUNK(gelu_grad_tanh_##sfx, T, U, T, E_GELU_G_TANH)                                      \
  loom_code loom__k_gelu_grad_##sfx(const loom_kctx *ctx) {                                           \
    return run_binary(ctx, ctx->attrs && ctx->attrs->num ? gelu_grad_tanh_##sfx##_chunk               \
                                                         : gelu_grad_exact_##sfx##_chunk);            \
  }
FOR_FLT(GELU_GRAD, 0)

/* Integer division: truncates toward zero; a zero divisor is an error. */
#define IDIV(sfx, T, U, unused)                                                                       \
  DEF_BINARY_CHUNK(div_##sfx, T, U, T, E_DIV_I)                                                       \
  loom_code loom__k_div_##sfx(const loom_kctx *ctx) {                                                 \
    if (ctx->out[0]->numel > 0) {                                                                     \
      const T *restrict b = ctx->in[1]->data;                                                         \
      int zero = 0;                                                                                   \
      for (int64_t i = 0; i < ctx->in[1]->numel; i++) zero |= b[i] == 0;                              \
      if (zero) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "integer division by zero");   \
    }                                                                                                 \
    return run_binary(ctx, div_##sfx##_chunk);                                                        \
  }
FOR_INT(IDIV, 0)

/* ------------------------------------------------------- unary framework */
typedef struct un_args {
  const void *a;
  void *c;
  double p0;
} un_args;

#define DEF_UNARY_CHUNK(NAME, T, U, TC, E)                                                        \
  LOOM_FORCE_INLINE void NAME##_loop(const T *a, TC *c, int64_t n, T p0) {                            \
    ELEM_IVDEP                                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                             \
      T x_ = a[i];                                                                                \
      c[i] = (TC)(E(T, U, x_, p0));                                                               \
    }                                                                                             \
  }                                                                                               \
  LOOM_HOT static void NAME##_chunk(void *arg, int64_t lo, int64_t hi) {                                   \
    const un_args *u = arg;                                                                       \
    NAME##_loop((const T *)u->a + lo, (TC *)u->c + lo, hi - lo, (T)u->p0);                        \
  }

static loom_code run_unary(const loom_kctx *ctx, loom_range_fn chunk) {
  un_args u;
  u.a = ctx->in[0]->data;
  u.c = ctx->out[0]->data;
  u.p0 = ctx->attrs ? ctx->attrs->alpha : 0.0;
  loom__parallel_for(ctx->pool, ctx->out[0]->numel, LOOM_PAR_GRAIN, chunk, &u);
  return LOOM_OK;
}

#define DEF_UNARY(NAME, T, U, TC, E) \
  DEF_UNARY_CHUNK(NAME, T, U, TC, E) \
  loom_code loom__k_##NAME(const loom_kctx *ctx) { return run_unary(ctx, NAME##_chunk); }

#define UN(sfx, T, U, k, E) DEF_UNARY(k##_##sfx, T, U, T, E)

FOR_FLT(UN, neg, E_NEG_F)
FOR_INT(UN, neg, E_NEG_I)
FOR_FLT(UN, abs, E_ABS_F)
FOR_INT(UN, abs, E_ABS_I)
FOR_NUM(UN, square, E_SQUARE)
FOR_FLT(UN, sign, E_SIGN_F)
FOR_INT(UN, sign, E_SIGN_I)
FOR_FLT(UN, exp, E_EXP)
FOR_FLT(UN, log, E_LOG)
FOR_FLT(UN, log1p, E_LOG1P)
FOR_FLT(UN, sqrt, E_SQRT)
FOR_FLT(UN, rsqrt, E_RSQRT)
FOR_FLT(UN, tanh, E_TANH)
FOR_FLT(UN, sigmoid, E_SIGMOID)
FOR_FLT(UN, relu, E_RELU)
FOR_FLT(UN, relu6, E_RELU6)
FOR_FLT(UN, elu, E_ELU)
FOR_FLT(UN, selu, E_SELU)
FOR_FLT(UN, leaky_relu, E_LRELU)
FOR_FLT(UN, softplus, E_SOFTPLUS)
FOR_FLT(UN, floor, E_FLOOR)
FOR_FLT(UN, ceil, E_CEIL)
FOR_FLT(UN, round, E_ROUND)
FOR_FLT(UN, reciprocal, E_RECIP)
DEF_UNARY(logical_not_bool, uint8_t, uint8_t, uint8_t, E_NOT)

/* Gelu: attrs.num != 0 selects the tanh approximation. */
#define GELU(sfx, T, U, unused)                                                                      \
  DEF_UNARY_CHUNK(gelu_exact_##sfx, T, U, T, E_GELU_EXACT)                                           \
  DEF_UNARY_CHUNK(gelu_tanh_##sfx, T, U, T, E_GELU_TANH)                                             \
  loom_code loom__k_gelu_##sfx(const loom_kctx *ctx) {                                               \
    return run_unary(ctx, ctx->attrs && ctx->attrs->num ? gelu_tanh_##sfx##_chunk : gelu_exact_##sfx##_chunk); \
  }
FOR_FLT(GELU, 0)

/* ------------------------------------------------ three-input ops (bcast) */
typedef struct tri_args {
  loom_bcast p;
  const void *in[3];
  void *c;
} tri_args;

static loom_code run_ternary(const loom_kctx *ctx, loom_range_fn chunk) {
  loom_buf *C = ctx->out[0];
  if (C->numel == 0) return LOOM_OK;
  tri_args x;
  loom__bcast_init(&x.p, 3, (const loom_buf *const *)ctx->in, C);
  for (int k = 0; k < 3; k++) x.in[k] = ctx->in[k]->data;
  x.c = C->data;
  loom__parallel_for(ctx->pool, C->numel, LOOM_PAR_GRAIN, chunk, &x);
  return LOOM_OK;
}

/* Runs ROW(c, len, in0, in1, in2, s0, s1, s2) over the rows of [lo, hi):
 * pointers at the row's first element and the inputs' inner strides (0/1). */
#define TRI_CHUNK(NAME, T0, T, ROW)                                                \
  LOOM_HOT static void NAME##_chunk(void *arg, int64_t lo, int64_t hi) {                    \
    const tri_args *ta = arg;                                                      \
    const loom_bcast *p = &ta->p;                                                  \
    const T0 *I0 = ta->in[0];                                                      \
    const T *I1 = ta->in[1], *I2 = ta->in[2];                                      \
    T *C = ta->c;                                                                  \
    const int64_t inner = loom__bcast_inner(p);                                    \
    const int64_t s0 = loom__bcast_istride(p, 0), s1 = loom__bcast_istride(p, 1),  \
                  s2 = loom__bcast_istride(p, 2);                                  \
    loom_bcast_it it;                                                              \
    loom__bcast_seek(p, 3, lo, &it);                                               \
    for (int64_t i = lo; i < hi;) {                                                \
      int64_t len = inner - it.j;                                                  \
      if (len > hi - i) len = hi - i;                                              \
      ROW(C + i, len, I0 + it.off[0], I1 + it.off[1], I2 + it.off[2], s0, s1, s2); \
      i += len;                                                                    \
      loom__bcast_next_row(p, 3, &it);                                             \
    }                                                                              \
  }

/* Select(cond, x, y): by element size; cond != 0 picks x. */
#define DEF_SELECT(W, T)                                                                               \
  LOOM_FORCE_INLINE void sel##W##_vvv(T *restrict c, int64_t n, const uint8_t *restrict m,                \
                                  const T *restrict x, const T *restrict y) {                         \
    for (int64_t i = 0; i < n; i++) {                                                                 \
      T xv = x[i], yv = y[i];                                                                         \
      c[i] = m[i] ? xv : yv;                                                                          \
    }                                                                                                 \
  }                                                                                                   \
  LOOM_FORCE_INLINE void sel##W##_row(T *restrict c, int64_t n, const uint8_t *restrict m,                \
                                  const T *restrict x, const T *restrict y, int64_t s0, int64_t s1,   \
                                  int64_t s2) {                                                       \
    if (s0 && s1 && s2) {                                                                             \
      sel##W##_vvv(c, n, m, x, y);                                                                    \
    } else if (!s0) {                                                                                 \
      const T *src = *m ? x : y;                                                                      \
      int64_t ss = *m ? s1 : s2;                                                                      \
      if (ss) memcpy(c, src, (size_t)n * sizeof(T));                                                  \
      else {                                                                                          \
        T v = *src;                                                                                   \
        for (int64_t i = 0; i < n; i++) c[i] = v;                                                     \
      }                                                                                               \
    } else {                                                                                          \
      for (int64_t i = 0; i < n; i++) {                                                               \
        T xv = x[i * s1], yv = y[i * s2];                                                             \
        c[i] = m[i] ? xv : yv;                                                                        \
      }                                                                                               \
    }                                                                                                 \
  }                                                                                                   \
  TRI_CHUNK(sel##W, uint8_t, T, sel##W##_row)
DEF_SELECT(1, uint8_t)
DEF_SELECT(4, uint32_t)
DEF_SELECT(8, uint64_t)

#define SELECT_K(sfx, W)                                                                   \
  loom_code loom__k_select_##sfx(const loom_kctx *ctx) { return run_ternary(ctx, sel##W##_chunk); }
SELECT_K(f32, 4)
SELECT_K(i32, 4)
SELECT_K(f64, 8)
SELECT_K(i64, 8)
SELECT_K(u8, 1)
SELECT_K(bool, 1)

/* ClipByValue(t, lo, hi) = min(max(t, lo), hi); the output has t's shape, so
 * t's inner stride is always 1. NaN in t stays NaN. */
#define CLIP(sfx, T, U, unused)                                                                         \
  static inline void clip_##sfx##_vss(T *restrict c, int64_t n, const T *restrict x, T l, T h) {       \
    for (int64_t i = 0; i < n; i++) {                                                                  \
      T v = x[i];                                                                                      \
      v = v < l ? l : v;                                                                               \
      c[i] = v > h ? h : v;                                                                            \
    }                                                                                                  \
  }                                                                                                    \
  static inline void clip_##sfx##_vvv(T *restrict c, int64_t n, const T *restrict x,                   \
                                      const T *restrict l, const T *restrict h) {                      \
    for (int64_t i = 0; i < n; i++) {                                                                  \
      T v = x[i], lv = l[i], hv = h[i];                                                                \
      v = v < lv ? lv : v;                                                                             \
      c[i] = v > hv ? hv : v;                                                                          \
    }                                                                                                  \
  }                                                                                                    \
  static inline void clip_##sfx##_row(T *restrict c, int64_t n, const T *x, const T *l, const T *h,    \
                                      int64_t s0, int64_t s1, int64_t s2) {                            \
    if (!s1 && !s2)                                                                                    \
      clip_##sfx##_vss(c, n, x, *l, *h);                                                               \
    else if (s1 && s2)                                                                                 \
      clip_##sfx##_vvv(c, n, x, l, h);                                                                 \
    else                                                                                               \
      for (int64_t i = 0; i < n; i++) {                                                                \
        T v = x[i], lv = l[i * s1], hv = h[i * s2];                                                    \
        v = v < lv ? lv : v;                                                                           \
        c[i] = v > hv ? hv : v;                                                                        \
      }                                                                                                \
  }                                                                                                    \
  TRI_CHUNK(clip_##sfx, T, T, clip_##sfx##_row)                                                        \
  loom_code loom__k_clip_by_value_##sfx(const loom_kctx *ctx) { return run_ternary(ctx, clip_##sfx##_chunk); }
FOR_NUM(CLIP, 0)
