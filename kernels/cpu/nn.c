/* CPU kernels of the nn family: Softmax, LogSoftmax, the cross entropies,
 * L2Normalize, MaxPool/AvgPool and their gradients (NHWC).
 * Convolutions are in kernels/cpu/conv.c.
 *
 * This file is compiled once and includes itself twice (float, double). */
#ifndef LOOM_NN_TPL
#include <math.h>
#include <string.h>
#include "kernels/cpu/nn.h"
#include "kernels/cpu/isa.h"
/* GCC 12's -O2 only vectorizes loops whose trip count needs no epilogue;
 * the channel loops here have run-time lengths. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

static int64_t rows_grain(int64_t row_len) {
  int64_t g = LOOM_PAR_GRAIN / (row_len > 0 ? row_len : 1);
  return g > 0 ? g : 1;
}

/* ---- pooling geometry ---- */
/* (kernels/geometry.h, shared with kernels/cuda/nn.cu) */
typedef loom_pool_geom pgeom;

/* The valid part [*b, *e) of the window of output index o. */
static inline void pwin(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t in, int64_t *b, int64_t *e) {
  int64_t s = o * stride - pad, t = s + k;
  *b = s > 0 ? s : 0;
  *e = t < in ? t : in;
}

/* ---- L2Normalize geometry: [outer, len, inner] around the axis ---- */
static void axis_split(const loom_buf *x, int64_t axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = 1;
  *len = 1;
  *inner = 1;
  if (x->ndim == 0) return;
  if (axis < 0) axis += x->ndim;
  for (int i = 0; i < x->ndim; i++) {
    if (i < axis) *outer *= x->dims[i];
    else if (i == axis) *len = x->dims[i];
    else *inner *= x->dims[i];
  }
}

/* exp for float32 that GCC vectorizes (libm's expf is an opaque call): Cody-
 * Waite reduction x = n ln2 + r, |r| <= ln2/2, Cephes' degree-6 polynomial for
 * e^r, and 2^n built in the exponent bits. Relative error about 2 ulp; 0 below
 * -87.33 (the engine flushes denormals anyway), +inf above 88.37, NaN kept. */
static inline float nn_expf(float x) {
  const float lo = -87.3365447504019f, hi = 88.3762626647949f;
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  float fx = xc * 1.44269504088896341f;
  fx = (fx + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 */
  float r = xc - fx * 0.693359375f;
  r = r - fx * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  union {
    int32_t i;
    float f;
  } u;
  u.i = ((int32_t)fx + 127) << 23;
  float y = p * u.f;
  y = x < lo ? 0.0f : y;
  return x > hi ? INFINITY : y;
}

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

#define LOOM_NN_TPL 1
#define T float
#define SFX f32
#define EXP expf
#define FEXP nn_expf /* vectorizable exp in the row loops */
#define LOG logf
#define LOG1P log1pf
#define SQRT sqrtf
#define FABS fabsf
#define NEG_INF (-INFINITY)
#include "kernels/cpu/nn.c"
#undef T
#undef SFX
#undef EXP
#undef FEXP
#undef LOG
#undef LOG1P
#undef SQRT
#undef FABS
#define T double
#define SFX f64
#define EXP exp
#define FEXP exp
#define LOG log
#define LOG1P log1p
#define SQRT sqrt
#define FABS fabs
#include "kernels/cpu/nn.c"
#undef PBLK

#else /* ---------------- template body ---------------- */

/* Row reductions in 16 independent lanes (vectorizable without reassociation
 * flags; the summation order is fixed, so results are deterministic). */
LOOM_FORCE_INLINE T FN(row_max)(const T *x, int64_t n) {
  T mb[16];
  for (int k = 0; k < 16; k++) mb[k] = NEG_INF;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; k++) mb[k] = x[j + k] > mb[k] ? x[j + k] : mb[k];
  T m = NEG_INF;
  for (; j < n; j++) m = x[j] > m ? x[j] : m;
  for (int k = 0; k < 16; k++) m = mb[k] > m ? mb[k] : m;
  return m;
}

/* sum of exp(x[j] - m); also stores the exps in y when y != NULL (y may be x). */
LOOM_FORCE_INLINE T FN(sum_exp)(const T *x, T m, T *y, int64_t n) {
  T acc[16] = {0};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    T e[16];
    for (int k = 0; k < 16; k++) e[k] = FEXP(x[j + k] - m);
    if (y)
      for (int k = 0; k < 16; k++) y[j + k] = e[k];
    for (int k = 0; k < 16; k++) acc[k] += e[k];
  }
  T s = 0;
  for (; j < n; j++) {
    T v = FEXP(x[j] - m);
    if (y) y[j] = v;
    s += v;
  }
  for (int k = 0; k < 16; k++) s += acc[k];
  return s;
}

/* ---- Softmax / LogSoftmax over the last axis ---- */
typedef struct {
  const T *x;
  T *y;
  int64_t C;
} FN(rows_args);

LOOM_HOT static void FN(softmax_rows)(void *p, int64_t b, int64_t e) {
  const FN(rows_args) *a = p;
  const int64_t C = a->C;
  for (int64_t r = b; r < e; r++) {
    const T *x = a->x + r * C;
    T *y = a->y + r * C;
    T m = FN(row_max)(x, C);
    T inv = (T)1 / FN(sum_exp)(x, m, y, C);
    for (int64_t j = 0; j < C; j++) y[j] *= inv;
  }
}

LOOM_HOT static void FN(log_softmax_rows)(void *p, int64_t b, int64_t e) {
  const FN(rows_args) *a = p;
  const int64_t C = a->C;
  for (int64_t r = b; r < e; r++) {
    const T *x = a->x + r * C;
    T *y = a->y + r * C;
    T m = FN(row_max)(x, C);
    T ls = LOG(FN(sum_exp)(x, m, NULL, C));
    for (int64_t j = 0; j < C; j++) y[j] = (x[j] - m) - ls;
  }
}

static loom_code FN(rows_op)(const loom_kctx *ctx, loom_range_fn fn) {
  const loom_buf *X = ctx->in[0];
  int64_t C = X->ndim ? X->dims[X->ndim - 1] : 1;
  if (X->numel == 0) return LOOM_OK;
  FN(rows_args) a = {X->data, ctx->out[0]->data, C};
  loom__parallel_for(ctx->pool, X->numel / C, rows_grain(C), fn, &a);
  return LOOM_OK;
}
loom_code FN(loom__k_softmax)(const loom_kctx *ctx) { return FN(rows_op)(ctx, FN(softmax_rows)); }
loom_code FN(loom__k_log_softmax)(const loom_kctx *ctx) { return FN(rows_op)(ctx, FN(log_softmax_rows)); }

/* ---- (Sparse)SoftmaxCrossEntropyWithLogits ---- */
typedef struct {
  const T *x;
  const T *z;            /* dense labels, or NULL */
  const int32_t *l32;    /* sparse labels */
  const int64_t *l64;
  T *loss, *bp;
  int64_t C;
} FN(xent_args);

/* Sparse labels with few classes (C < 16: sum_exp's lanes never fill, one
 * exp at a time): the exps of a block of rows in one flat vector loop, then
 * each row's sum in sum_exp's order (0 + e0 + e1 + ...). Bitwise the row
 * loop's result: the same FEXP expression (no contraction in ISO C mode)
 * and the same additions. */
#ifndef XENT_BLK
#define XENT_BLK 32
#endif
LOOM_FORCE_INLINE void FN(xent_rows_narrow)(const FN(xent_args) *a, int64_t b, int64_t e) {
  const int64_t C = a->C;
  T xs[XENT_BLK * 16];
  for (int64_t r0 = b; r0 < e; r0 += XENT_BLK) {
    const int64_t nr = e - r0 < XENT_BLK ? e - r0 : XENT_BLK, n = nr * C;
    T m[XENT_BLK];
    const T *x = a->x + r0 * C;
    T *bp = a->bp + r0 * C;
    for (int64_t r = 0; r < nr; r++) {
      T mr = NEG_INF;
      for (int64_t j = 0; j < C; j++) mr = x[r * C + j] > mr ? x[r * C + j] : mr;
      m[r] = mr;
      for (int64_t j = 0; j < C; j++) xs[r * C + j] = x[r * C + j] - mr;
    }
    for (int64_t i = 0; i < n; i++) bp[i] = FEXP(xs[i]);
    for (int64_t r = 0; r < nr; r++) {
      T sr = 0;
      for (int64_t j = 0; j < C; j++) sr += bp[r * C + j];
      T ls = LOG(sr), inv = (T)1 / sr;
      int64_t l = a->l32 ? (int64_t)a->l32[r0 + r] : a->l64[r0 + r];
      for (int64_t j = 0; j < C; j++) bp[r * C + j] *= inv;
      bp[r * C + l] -= 1;
      a->loss[r0 + r] = ls - (x[r * C + l] - m[r]);
    }
  }
}

LOOM_HOT static void FN(xent_rows)(void *p, int64_t b, int64_t e) {
  const FN(xent_args) *a = p;
  const int64_t C = a->C;
  if (!a->z && C < 16) {
    FN(xent_rows_narrow)(a, b, e);
    return;
  }
  for (int64_t r = b; r < e; r++) {
    const T *x = a->x + r * C;
    T *bp = a->bp + r * C;
    T m = FN(row_max)(x, C);
    T s = FN(sum_exp)(x, m, bp, C);
    T ls = LOG(s), inv = (T)1 / s;
    if (a->z) {
      const T *z = a->z + r * C;
      T acc[16] = {0}, loss = 0;
      int64_t j = 0;
      for (; j + 16 <= C; j += 16)
        for (int k = 0; k < 16; k++) {
          T zk = z[j + k];
          acc[k] += zk != 0 ? zk * (ls - (x[j + k] - m)) : 0; /* 0 * inf stays 0 */
          bp[j + k] = bp[j + k] * inv - zk;
        }
      for (; j < C; j++) {
        loss += z[j] != 0 ? z[j] * (ls - (x[j] - m)) : 0;
        bp[j] = bp[j] * inv - z[j];
      }
      for (int k = 0; k < 16; k++) loss += acc[k];
      a->loss[r] = loss;
    } else {
      int64_t l = a->l32 ? (int64_t)a->l32[r] : a->l64[r];
      for (int64_t j = 0; j < C; j++) bp[j] *= inv;
      bp[l] -= 1;
      a->loss[r] = ls - (x[l] - m);
    }
  }
}

loom_code FN(loom__k_softmax_xent)(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  int64_t B = X->dims[0], C = X->dims[1];
  FN(xent_args) a = {X->data, ctx->in[1]->data, NULL, NULL, ctx->out[0]->data, ctx->out[1]->data, C};
  if (C == 0) {
    for (int64_t r = 0; r < B; r++) a.loss[r] = 0;
    return LOOM_OK;
  }
  loom__parallel_for(ctx->pool, B, rows_grain(C), FN(xent_rows), &a);
  return LOOM_OK;
}

loom_code FN(loom__k_sparse_softmax_xent)(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *L = ctx->in[1];
  int64_t B = X->dims[0], C = X->dims[1];
  FN(xent_args) a = {X->data, NULL, NULL, NULL, ctx->out[0]->data, ctx->out[1]->data, C};
  if (L->dtype == LOOM_I32) a.l32 = L->data;
  else if (L->dtype == LOOM_I64) a.l64 = L->data;
  else
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "labels must be int32 or int64, got %s",
                           loom_dtype_name(L->dtype));
  for (int64_t r = 0; r < B; r++) {
    int64_t l = a.l32 ? (int64_t)a.l32[r] : a.l64[r];
    if (l < 0 || l >= C)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "labels[%lld] = %lld is not in [0, %lld)",
                             (long long)r, (long long)l, (long long)C);
  }
  loom__parallel_for(ctx->pool, B, rows_grain(C), FN(xent_rows), &a);
  return LOOM_OK;
}

/* ---- SigmoidCrossEntropyWithLogits(logits x, labels z) ---- */
typedef struct {
  const T *x, *z;
  T *y;
} FN(ew_args);

LOOM_HOT static void FN(sigmoid_xent_range)(void *p, int64_t b, int64_t e) {
  const FN(ew_args) *a = p;
  for (int64_t i = b; i < e; i++) {
    T x = a->x[i], z = a->z[i];
    a->y[i] = (x > 0 ? x : 0) - x * z + LOG1P(EXP(-FABS(x)));
  }
}

loom_code FN(loom__k_sigmoid_xent)(const loom_kctx *ctx) {
  FN(ew_args) a = {ctx->in[0]->data, ctx->in[1]->data, ctx->out[0]->data};
  loom__parallel_for(ctx->pool, ctx->out[0]->numel, LOOM_PAR_GRAIN / 4, FN(sigmoid_xent_range), &a);
  return LOOM_OK;
}

/* ---- L2Normalize: task = a block of up to 64 adjacent lines of one outer index ---- */
typedef struct {
  const T *x;
  T *y;
  int64_t len, inner, nblk;
  T eps;
} FN(l2_args);

static void FN(l2_range)(void *p, int64_t b, int64_t e) {
  const FN(l2_args) *a = p;
  const int64_t len = a->len, inner = a->inner;
  for (int64_t t = b; t < e; t++) {
    int64_t o = t / a->nblk, i0 = (t - o * a->nblk) * 64;
    int64_t nb = inner - i0 < 64 ? inner - i0 : 64;
    const T *x = a->x + o * len * inner + i0;
    T *y = a->y + o * len * inner + i0;
    T s[64];
    for (int64_t i = 0; i < nb; i++) s[i] = 0;
    for (int64_t k = 0; k < len; k++)
      for (int64_t i = 0; i < nb; i++) s[i] += x[k * inner + i] * x[k * inner + i];
    for (int64_t i = 0; i < nb; i++) s[i] = (T)1 / SQRT(s[i] > a->eps ? s[i] : a->eps);
    for (int64_t k = 0; k < len; k++)
      for (int64_t i = 0; i < nb; i++) y[k * inner + i] = x[k * inner + i] * s[i];
  }
}

loom_code FN(loom__k_l2_normalize)(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  if (X->numel == 0) return LOOM_OK;
  int64_t outer, len, inner;
  axis_split(X, ctx->attrs->axis, &outer, &len, &inner);
  double eps = ctx->attrs->epsilon > 0 ? ctx->attrs->epsilon : 1e-12;
  int64_t nblk = (inner + 63) / 64;
  FN(l2_args) a = {X->data, ctx->out[0]->data, len, inner, nblk, (T)eps};
  int64_t per = len * (inner < 64 ? inner : 64);
  loom__parallel_for(ctx->pool, outer * nblk, rows_grain(per), FN(l2_range), &a);
  return LOOM_OK;
}

/* ---- MaxPool / AvgPool: task = one output row (n, oh) ---- */
typedef struct {
  const pgeom *g;
  const T *x, *dy;
  T *y;
  const T *mask; /* MaxPoolGrad: a folded ReluGrad's features (kernels/kernel.h), or NULL */
  double *colsum; /* MaxPoolGrad: each image's column sums for a BiasAddGrad (kernels/kernel.h), or NULL */
  const uint8_t *code; /* MaxPoolGrad: the routes its Conv2D recorded (kernels/kernel.h: argmax), or NULL */
} FN(pool_args);

/* The 2x2 window of a stride-2 pool whose rows start at x0 and x1, channels [c, c + PBLK): the
 * elementwise maximum (x > m ? x : m, in the order of the general loop). */
#define PBLK 16
typedef T FN(route_vec) __attribute__((vector_size(PBLK * sizeof(T))));
#ifndef LOOM_ROUTE_BYTES
#define LOOM_ROUTE_BYTES
typedef uint8_t route_bytes __attribute__((vector_size(PBLK)));
typedef double route_sums __attribute__((vector_size(PBLK * sizeof(double))));
#endif
LOOM_FORCE_INLINE void FN(max2x2_block)(const T *x0, const T *x1, int64_t C, T *o) {
  for (int k = 0; k < PBLK; k++) {
    T m = NEG_INF, v = x0[k];
    m = v > m ? v : m;
    v = x0[C + k];
    m = v > m ? v : m;
    v = x1[k];
    m = v > m ? v : m;
    v = x1[C + k];
    o[k] = v > m ? v : m;
  }
}

LOOM_HOT static void FN(max_pool_range)(void *p, int64_t b, int64_t e) {
  const FN(pool_args) *a = p;
  const pgeom *g = a->g;
  const int64_t C = g->C;
  /* 2x2 windows at stride 2: whole blocks of channels without the general loop's bookkeeping */
  const int two = g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && C % PBLK == 0;
  for (int64_t r = b; r < e; r++) {
    int64_t n = r / g->OH, oh = r - n * g->OH, hb, he;
    pwin(oh, g->sh, g->pt, g->kh, g->H, &hb, &he);
    for (int64_t ow = 0; ow < g->OW; ow++) {
      int64_t wb, we;
      pwin(ow, g->sw, g->pl, g->kw, g->W, &wb, &we);
      T *restrict o = a->y + (r * g->OW + ow) * C;
      if (two && he - hb == 2 && we - wb == 2) {
        const T *x0 = a->x + ((n * g->H + hb) * g->W + wb) * C, *x1 = x0 + g->W * C;
        for (int64_t c = 0; c < C; c += PBLK) FN(max2x2_block)(x0 + c, x1 + c, C, o + c);
        continue;
      }
      for (int64_t c = 0; c < C; c++) o[c] = NEG_INF;
      for (int64_t ih = hb; ih < he; ih++)
        for (int64_t iw = wb; iw < we; iw++) {
          const T *restrict xp = a->x + ((n * g->H + ih) * g->W + iw) * C;
          for (int64_t c = 0; c < C; c++) o[c] = xp[c] > o[c] ? xp[c] : o[c];
        }
    }
  }
}

LOOM_HOT static void FN(avg_pool_range)(void *p, int64_t b, int64_t e) {
  const FN(pool_args) *a = p;
  const pgeom *g = a->g;
  const int64_t C = g->C;
  for (int64_t r = b; r < e; r++) {
    int64_t n = r / g->OH, oh = r - n * g->OH, hb, he;
    pwin(oh, g->sh, g->pt, g->kh, g->H, &hb, &he);
    for (int64_t ow = 0; ow < g->OW; ow++) {
      int64_t wb, we;
      pwin(ow, g->sw, g->pl, g->kw, g->W, &wb, &we);
      T *restrict o = a->y + (r * g->OW + ow) * C;
      for (int64_t c = 0; c < C; c++) o[c] = 0;
      for (int64_t ih = hb; ih < he; ih++)
        for (int64_t iw = wb; iw < we; iw++) {
          const T *restrict xp = a->x + ((n * g->H + ih) * g->W + iw) * C;
          for (int64_t c = 0; c < C; c++) o[c] += xp[c];
        }
      int64_t cnt = (he - hb) * (we - wb);
      T inv = cnt > 0 ? (T)1 / (T)cnt : 0;
      for (int64_t c = 0; c < C; c++) o[c] *= inv;
    }
  }
}

static loom_code FN(pool_fwd)(const loom_kctx *ctx, loom_range_fn fn) {
  const loom_buf *X = ctx->in[0];
  loom_buf *Y = ctx->out[0];
  if (Y->numel == 0) return LOOM_OK;
  pgeom g;
  loom__pool_geom_init(&g, ctx->attrs, X->dims, Y->dims);
  FN(pool_args) a = {&g, X->data, NULL, Y->data, NULL, NULL, NULL};
  loom__parallel_for(ctx->pool, g.N * g.OH, rows_grain(g.OW * g.C * g.kh * g.kw), fn, &a);
  return LOOM_OK;
}
loom_code FN(loom__k_max_pool)(const loom_kctx *ctx) { return FN(pool_fwd)(ctx, FN(max_pool_range)); }
loom_code FN(loom__k_avg_pool)(const loom_kctx *ctx) { return FN(pool_fwd)(ctx, FN(avg_pool_range)); }

/* ---- MaxPoolGrad / AvgPoolGrad: task = one image (images never overlap) ---- */
/* Routes dy[c0..c0+PBLK) of one window to the first maximum of each channel.
 * The fixed block size keeps best/at in vector registers. */
LOOM_FORCE_INLINE void FN(argmax_block)(const T *ximg, T *dimg, const T *dy, int64_t W, int64_t C, int64_t c0,
                                    int64_t hb, int64_t he, int64_t wb, int64_t we, int tile, int relu) {
  T best[PBLK];
  int32_t at[PBLK]; /* pixel (ih*W + iw) of the first maximum */
  int32_t p0 = (int32_t)(hb * W + wb);
  const T *x0 = ximg + p0 * C + c0;
  for (int c = 0; c < PBLK; c++) {
    best[c] = x0[c];
    at[c] = p0;
  }
  for (int64_t ih = hb; ih < he; ih++)
    for (int64_t iw = ih == hb ? wb + 1 : wb; iw < we; iw++) {
      int32_t pix = (int32_t)(ih * W + iw);
      const T *xp = ximg + pix * C + c0;
      for (int c = 0; c < PBLK; c++) { /* strict: the first maximum wins */
        T v = xp[c], b = best[c];
        int32_t m = -(int32_t)(v > b); /* branch-free select (no masked stores) */
        at[c] = (at[c] & ~m) | (pix & m);
        best[c] = v > b ? v : b;
      }
    }
  if (tile) { /* this window alone covers its pixels: write them all once */
    if (relu) /* a folded ReluGrad whose features are x: the maximum is the feature there */
      for (int c = 0; c < PBLK; c++) at[c] = best[c] > 0 ? at[c] : -1;
    for (int64_t ih = hb; ih < he; ih++)
      for (int64_t iw = wb; iw < we; iw++) {
        int32_t pix = (int32_t)(ih * W + iw);
        T *d = dimg + pix * C + c0;
        for (int c = 0; c < PBLK; c++) d[c] = at[c] == pix ? dy[c0 + c] : (T)0;
      }
    return;
  }
  for (int c = 0; c < PBLK; c++) dimg[(int64_t)at[c] * C + c0 + c] += dy[c0 + c];
}
LOOM_FORCE_INLINE void FN(argmax_tail)(const T *ximg, T *dimg, const T *dy, int64_t W, int64_t C, int64_t c0, int64_t hb,
                            int64_t he, int64_t wb, int64_t we, int tile) {
  if (tile)
    for (int64_t ih = hb; ih < he; ih++)
      for (int64_t iw = wb; iw < we; iw++)
        for (int64_t c = c0; c < C; c++) dimg[(ih * W + iw) * C + c] = 0;
  for (int64_t c = c0; c < C; c++) {
    int64_t p0 = hb * W + wb, at = p0;
    T best = ximg[p0 * C + c];
    for (int64_t ih = hb; ih < he; ih++)
      for (int64_t iw = wb; iw < we; iw++) {
        int64_t pix = ih * W + iw;
        if (ximg[pix * C + c] > best) {
          best = ximg[pix * C + c];
          at = pix;
        }
      }
    dimg[at * C + c] += dy[c];
  }
}

/* s[c] = the sum over rows r < R of d[r*C + c], in double (the image just written, in cache). */
LOOM_FORCE_INLINE void FN(image_colsum)(const T *d, int64_t R, int64_t C, double *s) {
  int64_t c = 0;
  for (; c + PBLK <= C; c += PBLK) {
    double acc[PBLK] = {0};
    for (int64_t r = 0; r < R; r++)
      for (int k = 0; k < PBLK; k++) acc[k] += (double)d[r * C + c + k];
    for (int k = 0; k < PBLK; k++) s[c + k] = acc[k];
  }
  for (; c < C; c++) {
    double acc = 0;
    for (int64_t r = 0; r < R; r++) acc += (double)d[r * C + c];
    s[c] = acc;
  }
}

/* Image n's result of a MaxPoolGrad that routes by its pool's winners (kernels/kernel.h: argmax):
 * each pooled value of dy (image [OH, OW, C] at dy, its codes at code) to its 2x2 window's winner
 * (code 0-3, the window row by row; 4: none), zero at the window's other pixels; row r of the result
 * ([2 OH, 2 OW, C]) at dst + r * rs. */
LOOM_FORCE_INLINE void FN(route_image)(const T *dy, const uint8_t *code, int64_t OH, int64_t OW, int64_t C, T *dst,
                                       int64_t rs) {
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      const T *v0 = dy + (oh * OW + ow) * C;
      const uint8_t *k = code + (oh * OW + ow) * C;
      T *d0 = dst + 2 * oh * rs + 2 * ow * C, *d1 = d0 + rs;
      int64_t c = 0;
      for (; c + PBLK <= C; c += PBLK) { /* the bytes widened in registers, selects on T's lanes */
        FN(route_vec) v, r;
        route_bytes kb;
        memcpy(&kb, k + c, sizeof kb);
        memcpy(&v, v0 + c, sizeof v);
        r = __builtin_convertvector(kb, FN(route_vec));
        __typeof__(r == r) vi, o;
        memcpy(&vi, &v, sizeof vi);
        o = vi & (r == 0);
        memcpy(d0 + c, &o, sizeof o);
        o = vi & (r == 1);
        memcpy(d0 + C + c, &o, sizeof o);
        o = vi & (r == 2);
        memcpy(d1 + c, &o, sizeof o);
        o = vi & (r == 3);
        memcpy(d1 + C + c, &o, sizeof o);
      }
      for (; c < C; c++) {
        T v = v0[c];
        uint8_t r = k[c];
        d0[c] = r == 0 ? v : (T)0;
        d0[C + c] = r == 1 ? v : (T)0;
        d1[c] = r == 2 ? v : (T)0;
        d1[C + c] = r == 3 ? v : (T)0;
      }
    }
}

/* kernels/cpu/nn.h */
LOOM_HOT void FN(loom__max_pool_route_image)(const loom_kctx *mpg, int64_t n, void *dst, int64_t rs) {
  const loom_buf *DY = mpg->in[2];
  const int64_t OH = DY->dims[1], OW = DY->dims[2], C = DY->dims[3], per = OH * OW * C;
  FN(route_image)((const T *)DY->data + n * per, mpg->epi->argmax + n * per, OH, OW, C, dst, rs);
}

/* Image n of MaxPoolGrad (its folded steps included) into dimg; its column sums when colsum. */
LOOM_HOT static void FN(max_pool_grad_image)(const FN(pool_args) *a, int64_t n, T *dimg, int colsum) {
  const pgeom *g = a->g;
  const int64_t C = g->C;
  const T *ximg = a->x + n * g->H * g->W * C;
  /* Windows that tile the image (stride = window, every pixel covered) are
   * written once each; otherwise dx is cleared and gradients accumulate. */
  int tile = g->sh == g->kh && g->sw == g->kw && g->OH * g->sh - g->pt >= g->H && g->OW * g->sw - g->pl >= g->W;
  /* a folded ReluGrad over x itself, in the windows that write their pixels once; else a pass below */
  const int relu_in_block = tile && a->mask == a->x;
  if (a->code) { /* 2x2 windows at stride 2 covering the image (engine/fuse.c), the ReluGrad in the routes */
    const int64_t per = g->OH * g->OW * C;
    FN(route_image)(a->dy + n * per, a->code + n * per, g->OH, g->OW, C, dimg, g->W * C);
    if (a->colsum && colsum) FN(image_colsum)(dimg, g->H * g->W, C, a->colsum + n * C);
    return;
  }
  if (!tile) memset(dimg, 0, (size_t)(g->H * g->W * C) * sizeof(T));
  for (int64_t oh = 0; oh < g->OH; oh++) {
    int64_t hb, he;
    pwin(oh, g->sh, g->pt, g->kh, g->H, &hb, &he);
    for (int64_t ow = 0; ow < g->OW; ow++) {
      int64_t wb, we;
      pwin(ow, g->sw, g->pl, g->kw, g->W, &wb, &we);
      const T *dy = a->dy + ((n * g->OH + oh) * g->OW + ow) * C;
      if (hb >= he || wb >= we) continue;
      int64_t c0 = 0;
      for (; c0 + PBLK <= C; c0 += PBLK)
        FN(argmax_block)(ximg, dimg, dy, g->W, C, c0, hb, he, wb, we, tile, relu_in_block);
      if (c0 < C) FN(argmax_tail)(ximg, dimg, dy, g->W, C, c0, hb, he, wb, we, tile);
    }
  }
  if (a->mask && (!relu_in_block || C % PBLK)) { /* the folded ReluGrad over the image, as its kernel */
    const T *m = a->mask + n * g->H * g->W * C;
    for (int64_t i = 0; i < g->H * g->W * C; i++) dimg[i] = m[i] > 0 ? dimg[i] : (T)0;
  }
  if (a->colsum && colsum) FN(image_colsum)(dimg, g->H * g->W, C, a->colsum + n * C);
}

LOOM_HOT static void FN(max_pool_grad_range)(void *p, int64_t b, int64_t e) {
  const FN(pool_args) *a = p;
  const int64_t per = a->g->H * a->g->W * a->g->C;
  for (int64_t n = b; n < e; n++) FN(max_pool_grad_image)(a, n, a->y + n * per, 1);
}

/* Images [b, e)'s column sums of the routed result without making it: the pooled values whose code
 * is a winner (0-3), in double. */
LOOM_HOT static void FN(pooled_colsum_range)(void *p, int64_t b, int64_t e) {
  const FN(pool_args) *a = p;
  const pgeom *g = a->g;
  const int64_t C = g->C, NW = g->OH * g->OW;
  for (int64_t n = b; n < e; n++) {
    const T *dy = a->dy + n * NW * C;
    const uint8_t *k = a->code + n * NW * C;
    double *s = a->colsum + n * C;
    int64_t c0 = 0;
    for (; c0 + PBLK <= C; c0 += PBLK) { /* the bytes widened and compared in registers, the kept values widened */
      route_sums sv = {0};
      for (int64_t w = 0; w < NW; w++) {
        route_bytes kb;
        FN(route_vec) v;
        memcpy(&kb, k + w * C + c0, sizeof kb);
        memcpy(&v, dy + w * C + c0, sizeof v);
        __typeof__(v == v) vi, r = __builtin_convertvector(kb, __typeof__(v == v));
        memcpy(&vi, &v, sizeof vi);
        vi &= r < 4;
        memcpy(&v, &vi, sizeof v);
        sv += __builtin_convertvector(v, route_sums);
      }
      memcpy(s + c0, &sv, sizeof sv);
    }
    for (int64_t c = c0; c < C; c++) {
      double acc = 0;
      for (int64_t w = 0; w < NW; w++) acc += k[w * C + c] < 4 ? (double)dy[w * C + c] : 0.0;
      s[c] = acc;
    }
  }
}

/* A folded filter gradient's image of dy (kernels/cpu/nn.h: loom_dy_image_fn). */
static void FN(max_pool_grad_dy_image)(void *arg, int64_t n, void *dst, int first) {
  FN(max_pool_grad_image)(arg, n, dst, first);
}

LOOM_HOT static void FN(avg_pool_grad_range)(void *p, int64_t b, int64_t e) {
  const FN(pool_args) *a = p;
  const pgeom *g = a->g;
  const int64_t C = g->C;
  for (int64_t n = b; n < e; n++) {
    T *dimg = a->y + n * g->H * g->W * C;
    memset(dimg, 0, (size_t)(g->H * g->W * C) * sizeof(T));
    for (int64_t oh = 0; oh < g->OH; oh++) {
      int64_t hb, he;
      pwin(oh, g->sh, g->pt, g->kh, g->H, &hb, &he);
      for (int64_t ow = 0; ow < g->OW; ow++) {
        int64_t wb, we;
        pwin(ow, g->sw, g->pl, g->kw, g->W, &wb, &we);
        int64_t cnt = (he - hb) * (we - wb);
        if (cnt <= 0) continue;
        T inv = (T)1 / (T)cnt;
        const T *restrict dy = a->dy + ((n * g->OH + oh) * g->OW + ow) * C;
        for (int64_t ih = hb; ih < he; ih++)
          for (int64_t iw = wb; iw < we; iw++) {
            T *restrict d = dimg + (ih * g->W + iw) * C;
            for (int64_t c = 0; c < C; c++) d[c] += dy[c] * inv;
          }
      }
    }
  }
}

loom_code FN(loom__k_max_pool_grad)(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *DY = ctx->in[2];
  loom_buf *DX = ctx->out[0];
  if (DX->numel == 0) return LOOM_OK;
  pgeom g;
  loom__pool_geom_init(&g, ctx->attrs, X->dims, DY->dims);
  FN(pool_args) a = {&g, X->data, DY->data, DX->data, ctx->epi && ctx->epi->mask ? ctx->epi->mask->data : NULL,
                     ctx->epi ? ctx->epi->colsum : NULL, ctx->epi ? ctx->epi->argmax : NULL};
  if (ctx->epi && ctx->epi->dw) /* dx made image by image for the folded filter gradient, not written */
    return FN(loom__conv_dw_images)(ctx, ctx->epi->dw, FN(max_pool_grad_dy_image), &a);
  if (ctx->epi && ctx->epi->argmax && (ctx->epi->wdw || ctx->epi->unwritten)) {
    /* the column sums of an unwritten result: from the pooled values (by the filter gradient's loops,
     * which read them anyway, when there is one) */
    if (!ctx->epi->unwritten) loom__parallel_for(ctx->pool, g.N, 1, FN(max_pool_grad_range), &a);
    else if (a.colsum && !ctx->epi->wdw) loom__parallel_for(ctx->pool, g.N, 1, FN(pooled_colsum_range), &a);
    /* a filter gradient over the result, from the winners */
    return ctx->epi->wdw ? FN(loom__conv_dw_winners)(ctx, ctx->epi->wdw, DY->data, ctx->epi->argmax,
                                                     ctx->epi->unwritten ? a.colsum : NULL)
                         : LOOM_OK;
  }
  loom__parallel_for(ctx->pool, g.N, 1, FN(max_pool_grad_range), &a);
  return LOOM_OK;
}

loom_code FN(loom__k_avg_pool_grad)(const loom_kctx *ctx) {
  const loom_buf *DY = ctx->in[0];
  loom_buf *DX = ctx->out[0];
  if (DX->numel == 0) return LOOM_OK;
  pgeom g;
  loom__pool_geom_init(&g, ctx->attrs, DX->dims, DY->dims);
  FN(pool_args) a = {&g, NULL, DY->data, DX->data, NULL, NULL, NULL};
  loom__parallel_for(ctx->pool, g.N, 1, FN(avg_pool_grad_range), &a);
  return LOOM_OK;
}

#endif
