/* CPU kernels: Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter (NHWC input,
 * HWIO filter). No BLAS: register-tiled loops written with GCC/Clang vector
 * extensions (64-byte vectors: AVX-512 registers, or pairs of AVX2 ones), so
 * speed does not depend on the BLAS library recognising the CPU.
 *
 * - Direct forward (K = KH*KW*C <= CONV_DIRECT_MAX_K): output pixels, 12 at a
 *   time, read their windows straight from the image (a zero-padded copy at
 *   the borders) and accumulate tiles of 6 pixels x 4 vectors of output
 *   channels (or 12 x 2, 12 x 1) in registers. A 1x1 stride-1 convolution is
 *   the same loop with the input rows as windows (a plain GEMM).
 * - Input gradient, stride 1: a direct forward convolution of dy with the
 *   filter flipped in space and transposed in channels (the op's workspace).
 * - Otherwise im2col: the rows of the column matrix are output pixels
 *   (n, oh, ow) in NHWC order, its columns the window (kh, kw, c): exactly the
 *   row order of the flattened HWIO filter [K, O], so that
 *     forward         Y[M, O]   = col[M, K] x F[K, O]
 *     backprop input  dcol[M,K] = dY[M, O] x F^T, then col2im adds dcol into dX
 *     backprop filter dF[K, O]  = col^T x dY[M, O]  (tiles of 6 rows x 4 vectors)
 *   with M = N*OH*OW. The column buffer is the op's workspace and holds a
 *   chunk of rows sized per call (about CONV_WS_BYTES, at least one row), so a
 *   big batch is processed in chunks that stay in cache.
 * - Filter gradient of small windows (K <= CONV_DIRECT_DW_MAX_K): direct loops.
 * Work is split over the thread pool by pixels (forward), filter rows (dF) or
 * images (col2im).
 *
 * This file is compiled once and includes itself twice (float, double). */
#ifndef LOOM_CONV_TPL
#include <string.h>
#include "kernels/cpu/nn.h"
#include "kernels/geometry.h"
/* GCC 12's -O2 only vectorizes loops whose trip count needs no epilogue
 * (the channel loops here have run-time lengths), -std=c11 turns off FMA
 * contraction, and short copy loops must not become memcpy calls. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic", "fp-contract=fast", "no-tree-loop-distribute-patterns")
#endif

#define CONV_WS_BYTES ((int64_t)2 << 20)       /* im2col chunk (forward, input gradient) */
#define CONV_DW_CHUNK_BYTES ((int64_t)1 << 20) /* col + dy rows per filter-gradient chunk */
#define CONV_ROW_GRAIN 32768 /* elements copied per parallel task, roughly */
/* Direct loops instead of im2col: the forward pass (and the stride-1 input
 * gradient) for K = KH*KW*C <= CONV_DIRECT_MAX_K and KH <= CONV_DIRECT_MAX_KH
 * (bounds of per-thread stack buffers); the filter gradient for
 * K <= CONV_DIRECT_DW_MAX_K. */
#define CONV_DIRECT_MAX_K 1152
#define CONV_DIRECT_MAX_KH 64
#define CONV_DIRECT_DW_MAX_K 64

typedef loom_conv_geom geom; /* kernels/geometry.h */

/* xd: input [N,H,W,C], fd: filter [KH,KW,C,O], yd: output [N,OH,OW,O]:
 * the shared geometry, then the CPU's choice of loops. */
static void geom_init(geom *g, const loom_attrs *a, const int64_t *xd, const int64_t *fd, const int64_t *yd) {
  loom__conv_geom_init(g, a, xd, fd, yd);
  g->pointwise = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
                 g->OH == g->H && g->OW == g->W;
  g->direct = g->K <= CONV_DIRECT_MAX_K && g->KH <= CONV_DIRECT_MAX_KH;
  g->direct_dw = !g->pointwise && g->K <= CONV_DIRECT_DW_MAX_K;
  g->direct_dx = g->sh == 1 && g->sw == 1 && g->KH * g->KW * g->O <= CONV_DIRECT_MAX_K &&
                 g->KH <= CONV_DIRECT_MAX_KH;
}

/* For stride 1, dX is the forward convolution of dy with the filter flipped
 * in space and transposed in channels (W'[kh][kw][o][c] =
 * W[KH-1-kh][KW-1-kw][c][o]), padded by (K-1)*dilation - pad before. */
static void geom_transposed(const geom *g, geom *t) {
  *t = *g;
  t->H = g->OH;
  t->W = g->OW;
  t->C = g->O;
  t->O = g->C;
  t->OH = g->H;
  t->OW = g->W;
  t->pt = (g->KH - 1) * g->dh - g->pt;
  t->pl = (g->KW - 1) * g->dw - g->pl;
  t->K = g->KH * g->KW * g->O;
  t->M = g->N * g->H * g->W;
  t->pointwise = 0;
  t->direct = 1;
}

/* Rows of the column matrix per chunk. */
static int64_t chunk_rows(const geom *g, size_t elem, int op) {
  if (g->M <= 0) return 0;
  /* the filter gradient re-reads its chunk of col and dy rows per tile: keep both in L2 */
  int64_t per_row = (op == 2 ? g->K + g->O : g->K) * (int64_t)elem;
  int64_t r = per_row > 0 ? (op == 2 ? CONV_DW_CHUNK_BYTES : CONV_WS_BYTES) / per_row : g->M;
  if (r < 1) r = 1;
  if (r > g->M) r = g->M;
  return r;
}


/* op: 0 forward, 1 backprop input, 2 backprop filter. */
static size_t ws_bytes(const geom *g, size_t elem, int op) {
  if (g->M <= 0 || g->K <= 0 || g->O <= 0) return 0;
  size_t col = (size_t)chunk_rows(g, elem, op) * (size_t)g->K * elem, filt = (size_t)g->K * (size_t)g->O * elem;
  switch (op) {
    case 0: return g->direct || g->pointwise ? 0 : col;
    case 1: return g->direct_dx || g->pointwise ? filt : filt + col; /* flipped or transposed filter */
    default: return g->direct_dw || g->pointwise ? 0 : col;
  }
}

static size_t dtype_bytes(loom_dtype dt) { return dt == LOOM_F64 ? 8 : 4; }

size_t loom__ws_conv2d(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                       const loom_buf *const *out) {
  geom g;
  geom_init(&g, a, in[0]->dims, in[1]->dims, out[0]->dims);
  return ws_bytes(&g, dtype_bytes(in[0]->dtype), 0);
}
size_t loom__ws_conv2d_backprop_input(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                      const loom_buf *const *out) {
  geom g;
  geom_init(&g, a, out[0]->dims, in[0]->dims, in[1]->dims);
  return ws_bytes(&g, dtype_bytes(in[0]->dtype), 1);
}
size_t loom__ws_conv2d_backprop_filter(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                       const loom_buf *const *out) {
  geom g;
  geom_init(&g, a, in[0]->dims, out[0]->dims, in[1]->dims);
  return ws_bytes(&g, dtype_bytes(in[0]->dtype), 2);
}

/* (n, oh, ow) of output pixel r, and the step to the next pixel. */
static inline void pix_of(const geom *g, int64_t r, int64_t *n, int64_t *oh, int64_t *ow) {
  int64_t P = g->OH * g->OW;
  *n = r / P;
  int64_t q = r - *n * P;
  *oh = q / g->OW;
  *ow = q - *oh * g->OW;
}
static inline void pix_next(const geom *g, int64_t *n, int64_t *oh, int64_t *ow) {
  if (++*ow == g->OW) {
    *ow = 0;
    if (++*oh == g->OH) {
      *oh = 0;
      ++*n;
    }
  }
}

static loom_code ws_missing(const loom_kctx *ctx, size_t need) {
  return loom_status_set(ctx->st, LOOM_INTERNAL, "convolution workspace of %zu bytes is smaller than %zu",
                         ctx->ws_size, need);
}

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

#define LOOM_CONV_TPL 1
#define T float
#define SFX f32
#include "kernels/cpu/conv.c"
#undef T
#undef SFX
#define T double
#define SFX f64
#include "kernels/cpu/conv.c"
#undef T
#undef SFX

#else /* ---------------- template body: T, SFX ---------------- */

typedef struct {
  const geom *g;
  const T *x;
  T *col;
  int64_t r0, r1; /* global rows of the chunk */
} FN(cols_args);

static inline void FN(copy)(T *restrict d, const T *restrict s, int64_t n) {
  if (n <= 4) {
    for (int64_t i = 0; i < n; i++) d[i] = s[i];
  } else {
    memcpy(d, s, (size_t)n * sizeof(T));
  }
}

/* dst[0..K) = the window (kh, kw, c) of output pixel (n, oh, ow), zero-padded. */
static inline void FN(gather)(const geom *g, const T *x, int64_t n, int64_t oh, int64_t ow, T *dst) {
  const int64_t KWC = g->KW * g->C, C = g->C;
  int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
  const T *ximg = x + n * g->H * g->W * C;
  int inside_w = iw0 >= 0 && iw0 + (g->KW - 1) * g->dw < g->W;
  for (int64_t kh = 0; kh < g->KH; kh++, dst += KWC) {
    int64_t ih = ih0 + kh * g->dh;
    if (ih < 0 || ih >= g->H) {
      memset(dst, 0, (size_t)KWC * sizeof(T));
      continue;
    }
    const T *xr = ximg + ih * g->W * C;
    if (inside_w && g->dw == 1) {
      FN(copy)(dst, xr + iw0 * C, KWC);
      continue;
    }
    for (int64_t kw = 0; kw < g->KW; kw++) {
      int64_t iw = iw0 + kw * g->dw;
      if (iw < 0 || iw >= g->W) memset(dst + kw * C, 0, (size_t)C * sizeof(T));
      else FN(copy)(dst + kw * C, xr + iw * C, C);
    }
  }
}

/* col[i - r0] = the window of output pixel i, for i in [r0 + b, r0 + e). */
static void FN(im2col_range)(void *p, int64_t b, int64_t e) {
  const FN(cols_args) *a = p;
  const geom *g = a->g;
  int64_t n, oh, ow;
  pix_of(g, a->r0 + b, &n, &oh, &ow);
  for (int64_t i = b; i < e; i++) {
    FN(gather)(g, a->x, n, oh, ow, a->col + i * g->K);
    pix_next(g, &n, &oh, &ow);
  }
}

/* ---- direct convolution ----
 * Each output pixel runs K x O multiply-adds with a vector of output channels
 * in registers, reading its window straight from the image (or from a
 * zero-padded copy at the borders). */
typedef struct {
  const geom *g;
  const T *x, *w, *dy;
  T *y, *dw;
} FN(direct_args);

/* src[kh] = the KW*C window values of row kh for pixel (n, oh, ow). */
static inline void FN(window_rows)(const geom *g, const T *x, int64_t n, int64_t oh, int64_t ow, T *patch,
                                   const T **src) {
  const int64_t KWC = g->KW * g->C;
  int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
  if (g->dw == 1 && ih0 >= 0 && ih0 + (g->KH - 1) * g->dh < g->H && iw0 >= 0 && iw0 + g->KW <= g->W) {
    const T *base = x + ((n * g->H + ih0) * g->W + iw0) * g->C;
    for (int64_t kh = 0; kh < g->KH; kh++) src[kh] = base + kh * g->dh * g->W * g->C;
  } else {
    FN(gather)(g, x, n, oh, ow, patch);
    for (int64_t kh = 0; kh < g->KH; kh++) src[kh] = patch + kh * KWC;
  }
}

/* 64-byte vectors (GCC/Clang vector extensions: AVX-512 registers, or pairs
 * of AVX2 ones) for the register-blocked direct loops. */
typedef T FN(vec) __attribute__((vector_size(64)));
#define VL ((int64_t)(64 / sizeof(T)))
/* Unaligned loads and stores (macros: passing vectors by value to functions
 * would change the ABI on targets without 64-byte registers). */
#define VLOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define VSTORE(p, v) memcpy((p), &(v), sizeof(v))

#define UNROLL _Pragma("GCC unroll 16") /* constant tiles must live in registers */

/* PX pixels x NV vectors of output channels from c0: PX*NV accumulators (24
 * or fewer); per window element NV filter loads and PX broadcasts feed PX*NV
 * FMAs. */
#define DEF_FWD_TILE(NV, PX)                                                                          \
  static void FN(fwd_tile_##NV##_##PX)(const T *const (*src)[CONV_DIRECT_MAX_KH], int64_t KH,          \
                                       int64_t KWC, const T *w, int64_t O, int64_t c0, T *y, int np) { \
    FN(vec) acc[PX][NV];                                                                              \
    UNROLL for (int i = 0; i < PX; i++) UNROLL for (int v = 0; v < NV; v++) acc[i][v] = (FN(vec)){0}; \
    const T *wr = w + c0;                                                                             \
    for (int64_t kh = 0; kh < KH; kh++) {                                                             \
      const T *s[PX];                                                                                 \
      UNROLL for (int i = 0; i < PX; i++) s[i] = src[i][kh];                                          \
      for (int64_t j = 0; j < KWC; j++, wr += O) {                                                    \
        FN(vec) wv[NV];                                                                               \
        UNROLL for (int v = 0; v < NV; v++) VLOAD(wv[v], wr + v * VL);                           \
        UNROLL for (int i = 0; i < PX; i++) {                                                         \
          const T xv = s[i][j];                                                                       \
          UNROLL for (int v = 0; v < NV; v++) acc[i][v] += xv * wv[v];                                \
        }                                                                                             \
      }                                                                                               \
    }                                                                                                 \
    UNROLL for (int i = 0; i < PX; i++) {                                                             \
      if (i < np) UNROLL for (int v = 0; v < NV; v++) VSTORE(y + i * O + c0 + v * VL, acc[i][v]); \
    }                                                                                                 \
  }
DEF_FWD_TILE(1, 12)
DEF_FWD_TILE(2, 12)
DEF_FWD_TILE(3, 6)
DEF_FWD_TILE(4, 6)
#undef DEF_FWD_TILE

/* Rows i < np (of 12): y[i*O + c] = sum over (kh, j) of src[i][kh][j] *
 * w[(kh*KWC + j)*O + c] for every c < O. */
static void FN(tile_rows)(const T *const (*cs)[CONV_DIRECT_MAX_KH], int np, int64_t KH, int64_t KWC, const T *w,
                          int64_t O, T *y) {
  const int64_t nfull = O / VL;
  int np2 = np > 6 ? np - 6 : 0;
  int64_t v = 0;
  for (; v + 4 <= nfull; v += 4) {
    FN(fwd_tile_4_6)(cs, KH, KWC, w, O, v * VL, y, np);
    if (np2) FN(fwd_tile_4_6)(cs + 6, KH, KWC, w, O, v * VL, y + 6 * O, np2);
  }
  switch (nfull - v) {
    case 3:
      FN(fwd_tile_3_6)(cs, KH, KWC, w, O, v * VL, y, np);
      if (np2) FN(fwd_tile_3_6)(cs + 6, KH, KWC, w, O, v * VL, y + 6 * O, np2);
      break;
    case 2: FN(fwd_tile_2_12)(cs, KH, KWC, w, O, v * VL, y, np); break;
    case 1: FN(fwd_tile_1_12)(cs, KH, KWC, w, O, v * VL, y, np); break;
    default: break;
  }
  for (int64_t o0 = nfull * VL; o0 < O; o0++)
    for (int i = 0; i < np; i++) {
      T acc = 0;
      const T *wr = w + o0;
      for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t j = 0; j < KWC; j++, wr += O) acc += cs[i][kh][j] * *wr;
      y[i * O + o0] = acc;
    }
}

/* Pixels [b, e), 12 at a time, read through their window rows. */
static void FN(direct_fwd_range)(void *p, int64_t b, int64_t e) {
  const FN(direct_args) *a = p;
  const geom *g = a->g;
  const int64_t O = g->O, KWC = g->KW * g->C, KH = g->KH;
  T patch[12][CONV_DIRECT_MAX_K];
  const T *src[12][CONV_DIRECT_MAX_KH];
  int64_t n, oh, ow;
  pix_of(g, b, &n, &oh, &ow);
  for (int64_t r = b; r < e; r += 12) {
    int np = e - r < 12 ? (int)(e - r) : 12;
    for (int i = 0; i < 12; i++) {
      if (i < np) {
        FN(window_rows)(g, a->x, n, oh, ow, patch[i], src[i]);
        pix_next(g, &n, &oh, &ow);
      } else {
        for (int64_t kh = 0; kh < KH; kh++) src[i][kh] = src[0][kh]; /* padding lanes: results dropped */
      }
    }
    FN(tile_rows)((const T *const (*)[CONV_DIRECT_MAX_KH])src, np, KH, KWC, a->w, O, a->y + r * O);
  }
}

/* ---- C[M, N] = A[M, K] (row stride lda) x B[K, N] (ldb = ldc = N) ---- */
typedef struct {
  const T *A, *B;
  T *C;
  int64_t lda, N, K;
} FN(gemm_args);

static void FN(gemm_nn_range)(void *p, int64_t b, int64_t e) {
  const FN(gemm_args) *a = p;
  const T *src[12][CONV_DIRECT_MAX_KH];
  for (int64_t r = b; r < e; r += 12) {
    int np = e - r < 12 ? (int)(e - r) : 12;
    for (int i = 0; i < 12; i++) src[i][0] = a->A + (r + (i < np ? i : 0)) * a->lda;
    FN(tile_rows)((const T *const (*)[CONV_DIRECT_MAX_KH])src, np, 1, a->K, a->B, a->N, a->C + r * a->N);
  }
}

static void FN(gemm_nn)(const loom_kctx *ctx, const T *A, int64_t lda, const T *B, int64_t N, T *C, int64_t M,
                        int64_t K) {
  FN(gemm_args) a = {A, B, C, lda, N, K};
  int64_t grain = (CONV_ROW_GRAIN * 4) / (K * N > 0 ? K * N : 1);
  loom__parallel_for(ctx->pool, M, grain > 12 ? grain : 12, FN(gemm_nn_range), &a);
}

/* Task t: output channel vectors [t*DWV, t*DWV + DWV) (VL channels each) of
 * dW, summed over every pixel, 4 pixels per step. */
#define DWV 4
static void FN(direct_dw_range)(void *p, int64_t b, int64_t e) {
  const FN(direct_args) *a = p;
  const geom *g = a->g;
  const int64_t K = g->K, O = g->O, KWC = g->KW * g->C, KH = g->KH, nvec = (O + VL - 1) / VL;
  T patch[4][CONV_DIRECT_DW_MAX_K];
  const T *src[4][CONV_DIRECT_DW_MAX_K];
  FN(vec) acc[CONV_DIRECT_DW_MAX_K][DWV];
  for (int64_t t = b; t < e; t++) {
    int64_t v0 = t * DWV, nv = nvec - v0 < DWV ? nvec - v0 : DWV;
    for (int64_t k = 0; k < K; k++)
      for (int v = 0; v < DWV; v++) acc[k][v] = (FN(vec)){0};
    int64_t n = 0, oh = 0, ow = 0;
    for (int64_t r = 0; r < g->M; r += 4) {
      int np = g->M - r < 4 ? (int)(g->M - r) : 4;
      FN(vec) d[4][DWV];
      for (int i = 0; i < 4; i++) {
        if (i < np) {
          FN(window_rows)(g, a->x, n, oh, ow, patch[i], src[i]);
          pix_next(g, &n, &oh, &ow);
        } else {
          for (int64_t kh = 0; kh < KH; kh++) src[i][kh] = src[0][kh];
        }
        for (int64_t v = 0; v < nv; v++) {
          int64_t c0 = (v0 + v) * VL;
          if (i >= np) {
            d[i][v] = (FN(vec)){0}; /* padding pixels add nothing */
          } else if (c0 + VL <= O) {
            VLOAD(d[i][v], a->dy + (r + i) * O + c0);
          } else {
            T tmp[64 / sizeof(T)];
            for (int64_t q = 0; q < VL; q++) tmp[q] = c0 + q < O ? a->dy[(r + i) * O + c0 + q] : 0;
            VLOAD(d[i][v], tmp);
          }
        }
      }
      int64_t k = 0;
      for (int64_t kh = 0; kh < KH; kh++) {
        const T *s0 = src[0][kh], *s1 = src[1][kh], *s2 = src[2][kh], *s3 = src[3][kh];
        for (int64_t j = 0; j < KWC; j++, k++)
          for (int64_t v = 0; v < nv; v++)
            acc[k][v] += s0[j] * d[0][v] + s1[j] * d[1][v] + s2[j] * d[2][v] + s3[j] * d[3][v];
      }
    }
    for (int64_t k = 0; k < K; k++)
      for (int64_t v = 0; v < nv; v++) {
        T tmp[64 / sizeof(T)];
        VSTORE(tmp, acc[k][v]);
        int64_t c0 = (v0 + v) * VL;
        for (int64_t q = 0; q < VL && c0 + q < O; q++) a->dw[k * O + c0 + q] = tmp[q];
      }
  }
}
/* ---- filter gradient on the column matrix: dF[K, O] += col[m, K]^T x dY[m, O] ----
 * Register tiles of 6 filter rows x NV vectors of output channels (24
 * accumulators for NV = 4), streaming over the chunk's rows. */
#define DEF_DW_TILE(NV)                                                                            \
  static void FN(dw_tile_##NV)(const T *col, int64_t K, const T *dy, int64_t O, int64_t m, T *df, \
                               int64_t k0, int64_t c0) {                                          \
    FN(vec) acc[6][NV];                                                                           \
    UNROLL for (int i = 0; i < 6; i++)                                                                   \
      UNROLL for (int v = 0; v < NV; v++) VLOAD(acc[i][v], df + (k0 + i) * O + c0 + v * VL);         \
    for (int64_t r = 0; r < m; r++) {                                                             \
      const T *cr = col + r * K + k0, *dr = dy + r * O + c0;                                      \
      FN(vec) d[NV];                                                                              \
      UNROLL for (int v = 0; v < NV; v++) VLOAD(d[v], dr + v * VL);                                 \
      UNROLL for (int i = 0; i < 6; i++) {                                                               \
        const T sv = cr[i];                                                                       \
        UNROLL for (int v = 0; v < NV; v++) acc[i][v] += sv * d[v];                                      \
      }                                                                                           \
    }                                                                                             \
    UNROLL for (int i = 0; i < 6; i++)                                                                   \
      UNROLL for (int v = 0; v < NV; v++) VSTORE(df + (k0 + i) * O + c0 + v * VL, acc[i][v]);        \
  }
DEF_DW_TILE(1)
DEF_DW_TILE(2)
DEF_DW_TILE(3)
DEF_DW_TILE(4)
#undef DEF_DW_TILE
#undef UNROLL

typedef struct {
  const T *col, *dy;
  T *df;
  int64_t K, O, m;
} FN(dwg_args);

/* Task t: filter rows [6t, 6t + 6) for every output channel. */
static void FN(dw_gemm_range)(void *p, int64_t b, int64_t e) {
  const FN(dwg_args) *a = p;
  const int64_t K = a->K, O = a->O, m = a->m, nfull = O / VL;
  int64_t tfull = K / 6 < e ? K / 6 : e; /* tasks [b, tfull) are full 6-row tiles */
  /* vector groups outer, tiles inner: the dy columns of a group stay in cache */
  for (int64_t v = 0; v < nfull; v += 4) {
    int64_t nv = nfull - v < 4 ? nfull - v : 4;
    for (int64_t t = b; t < tfull; t++) {
      int64_t k0 = t * 6;
      switch (nv) {
        case 4: FN(dw_tile_4)(a->col, K, a->dy, O, m, a->df, k0, v * VL); break;
        case 3: FN(dw_tile_3)(a->col, K, a->dy, O, m, a->df, k0, v * VL); break;
        case 2: FN(dw_tile_2)(a->col, K, a->dy, O, m, a->df, k0, v * VL); break;
        default: FN(dw_tile_1)(a->col, K, a->dy, O, m, a->df, k0, v * VL); break;
      }
    }
  }
  /* leftovers: rows past the last full tile, channels past the last full vector */
  for (int64_t t = b; t < e; t++) {
    int64_t k0 = t * 6, kend = k0 + 6 < K ? k0 + 6 : K;
    int64_t cstart = k0 + 6 <= K ? nfull * VL : 0;
    if (cstart >= O) continue;
    for (int64_t k = k0; k < kend; k++) {
      T *dr = a->df + k * O;
      for (int64_t r = 0; r < m; r++) {
        const T sv = a->col[r * K + k], *yr = a->dy + r * O;
        for (int64_t c = cstart; c < O; c++) dr[c] += sv * yr[c];
      }
    }
  }
}
#undef VL
#undef VLOAD
#undef VSTORE

static void FN(im2col)(const loom_kctx *ctx, const geom *g, const T *x, T *col, int64_t r0, int64_t r1) {
  FN(cols_args) a = {g, x, col, r0, r1};
  int64_t grain = CONV_ROW_GRAIN / (g->K > 0 ? g->K : 1);
  loom__parallel_for(ctx->pool, r1 - r0, grain > 0 ? grain : 1, FN(im2col_range), &a);
}

/* Adds the chunk's rows of col into dX; task b..e = images n0+b .. n0+e
 * (different images never overlap, so images run in parallel). */
typedef struct {
  const geom *g;
  const T *col;
  T *dx;
  int64_t r0, r1, n0;
} FN(c2i_args);

static void FN(col2im_range)(void *p, int64_t b, int64_t e) {
  const FN(c2i_args) *a = p;
  const geom *g = a->g;
  const int64_t P = g->OH * g->OW, C = g->C, KWC = g->KW * g->C;
  for (int64_t n = a->n0 + b; n < a->n0 + e; n++) {
    int64_t rb = n * P > a->r0 ? n * P : a->r0, re = (n + 1) * P < a->r1 ? (n + 1) * P : a->r1;
    T *dimg = a->dx + n * g->H * g->W * C;
    for (int64_t r = rb; r < re; r++) {
      int64_t q = r - n * P, oh = q / g->OW, ow = q - oh * g->OW;
      int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
      const T *src = a->col + (r - a->r0) * g->K;
      int inside_w = iw0 >= 0 && iw0 + (g->KW - 1) * g->dw < g->W;
      for (int64_t kh = 0; kh < g->KH; kh++, src += KWC) {
        int64_t ih = ih0 + kh * g->dh;
        if (ih < 0 || ih >= g->H) continue;
        T *dr = dimg + ih * g->W * C;
        if (inside_w && g->dw == 1) {
          T *restrict d = dr + iw0 * C;
          const T *restrict s = src;
          for (int64_t j = 0; j < KWC; j++) d[j] += s[j];
          continue;
        }
        for (int64_t kw = 0; kw < g->KW; kw++) {
          int64_t iw = iw0 + kw * g->dw;
          if (iw < 0 || iw >= g->W) continue;
          T *restrict d = dr + iw * C;
          const T *restrict s = src + kw * C;
          for (int64_t c = 0; c < C; c++) d[c] += s[c];
        }
      }
    }
  }
}

static void FN(direct_fwd)(const loom_kctx *ctx, const geom *g, const T *x, const T *w, T *y) {
  FN(direct_args) a = {g, x, w, NULL, y, NULL};
  int64_t grain = (CONV_ROW_GRAIN * 4) / (g->K * g->O > 0 ? g->K * g->O : 1);
  loom__parallel_for(ctx->pool, g->M, grain > 8 ? grain : 8, FN(direct_fwd_range), &a);
}

loom_code FN(loom__k_conv2d)(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *F = ctx->in[1];
  loom_buf *Y = ctx->out[0];
  geom g;
  geom_init(&g, ctx->attrs, X->dims, F->dims, Y->dims);
  const T *x = X->data, *f = F->data;
  T *y = Y->data;
  if (Y->numel == 0) return LOOM_OK;
  if (g.K == 0) {
    memset(y, 0, (size_t)Y->numel * sizeof(T));
    return LOOM_OK;
  }
  if (g.direct) {
    FN(direct_fwd)(ctx, &g, x, f, y);
    return LOOM_OK;
  }
  if (g.pointwise) {
    FN(gemm_nn)(ctx, x, g.C, f, g.O, y, g.M, g.C);
    return LOOM_OK;
  }
  int64_t R = chunk_rows(&g, sizeof(T), 0);
  size_t need = (size_t)R * (size_t)g.K * sizeof(T);
  if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
  T *col = ctx->ws;
  for (int64_t r0 = 0; r0 < g.M; r0 += R) {
    int64_t m = g.M - r0 < R ? g.M - r0 : R;
    FN(im2col)(ctx, &g, x, col, r0, r0 + m);
    FN(gemm_nn)(ctx, col, g.K, f, g.O, y + r0 * g.O, m, g.K);
  }
  return LOOM_OK;
}

loom_code FN(loom__k_conv2d_backprop_input)(const loom_kctx *ctx) {
  const loom_buf *F = ctx->in[0], *DY = ctx->in[1];
  loom_buf *DX = ctx->out[0];
  geom g;
  geom_init(&g, ctx->attrs, DX->dims, F->dims, DY->dims);
  const T *f = F->data, *dy = DY->data;
  T *dx = DX->data;
  if (DX->numel == 0) return LOOM_OK;
  if (g.M == 0 || g.O == 0 || g.K == 0) {
    memset(dx, 0, (size_t)DX->numel * sizeof(T));
    return LOOM_OK;
  }
  size_t wbytes = (size_t)g.K * (size_t)g.O * sizeof(T);
  if (g.direct_dx) { /* a forward convolution of dy with the flipped filter */
    if (!ctx->ws || ctx->ws_size < wbytes) return ws_missing(ctx, wbytes);
    T *wt = ctx->ws;
    for (int64_t kh = 0; kh < g.KH; kh++)
      for (int64_t kw = 0; kw < g.KW; kw++)
        for (int64_t o = 0; o < g.O; o++)
          for (int64_t c = 0; c < g.C; c++)
            wt[((kh * g.KW + kw) * g.O + o) * g.C + c] =
                f[(((g.KH - 1 - kh) * g.KW + (g.KW - 1 - kw)) * g.C + c) * g.O + o];
    geom t;
    geom_transposed(&g, &t);
    FN(direct_fwd)(ctx, &t, dy, wt, dx);
    return LOOM_OK;
  }
  /* dcol[m, K] = dY[m, O] x F^T[O, K], then col2im */
  int64_t R = g.pointwise ? 0 : chunk_rows(&g, sizeof(T), 1);
  size_t need = wbytes + (size_t)R * (size_t)g.K * sizeof(T);
  if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
  T *ft = ctx->ws, *col = ft + g.K * g.O;
  for (int64_t k = 0; k < g.K; k++)
    for (int64_t o = 0; o < g.O; o++) ft[o * g.K + k] = f[k * g.O + o];
  if (g.pointwise) {
    FN(gemm_nn)(ctx, dy, g.O, ft, g.C, dx, g.M, g.O);
    return LOOM_OK;
  }
  memset(dx, 0, (size_t)DX->numel * sizeof(T));
  const int64_t P = g.OH * g.OW;
  for (int64_t r0 = 0; r0 < g.M; r0 += R) {
    int64_t m = g.M - r0 < R ? g.M - r0 : R;
    FN(gemm_nn)(ctx, dy + r0 * g.O, g.O, ft, g.K, col, m, g.O);
    int64_t n0 = r0 / P, n1 = (r0 + m - 1) / P + 1;
    FN(c2i_args) a = {&g, col, dx, r0, r0 + m, n0};
    loom__parallel_for(ctx->pool, n1 - n0, 1, FN(col2im_range), &a);
  }
  return LOOM_OK;
}

loom_code FN(loom__k_conv2d_backprop_filter)(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *DY = ctx->in[1];
  loom_buf *DF = ctx->out[0];
  geom g;
  geom_init(&g, ctx->attrs, X->dims, DF->dims, DY->dims);
  const T *x = X->data, *dy = DY->data;
  T *df = DF->data;
  if (DF->numel == 0) return LOOM_OK;
  if (g.M == 0) {
    memset(df, 0, (size_t)DF->numel * sizeof(T));
    return LOOM_OK;
  }
  if (g.direct_dw) {
    FN(direct_args) a = {&g, x, NULL, dy, NULL, df};
    int64_t vl = 64 / (int64_t)sizeof(T), nvec = (g.O + vl - 1) / vl;
    loom__parallel_for(ctx->pool, (nvec + DWV - 1) / DWV, 1, FN(direct_dw_range), &a);
    return LOOM_OK;
  }
  /* dF[K, O] = col^T x dY, chunk by chunk (for 1x1 stride-1 the input is the column matrix) */
  int64_t R = chunk_rows(&g, sizeof(T), 2);
  T *col = NULL;
  if (!g.pointwise) {
    size_t need = (size_t)R * (size_t)g.K * sizeof(T);
    if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
    col = ctx->ws;
  }
  memset(df, 0, (size_t)DF->numel * sizeof(T));
  for (int64_t r0 = 0; r0 < g.M; r0 += R) {
    int64_t m = g.M - r0 < R ? g.M - r0 : R;
    const T *rows = x + r0 * g.C;
    if (!g.pointwise) {
      FN(im2col)(ctx, &g, x, col, r0, r0 + m);
      rows = col;
    }
    FN(dwg_args) a = {rows, dy + r0 * g.O, df, g.K, g.O, m};
    loom__parallel_for(ctx->pool, (g.K + 5) / 6, 1, FN(dw_gemm_range), &a);
  }
  return LOOM_OK;
}

#endif
