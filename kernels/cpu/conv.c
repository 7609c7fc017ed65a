/* CPU kernels: Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter (NHWC input,
 * HWIO filter) by im2col + GEMM.
 *
 * The rows of the column matrix are output pixels (n, oh, ow) in NHWC order,
 * its columns the window (kh, kw, c): exactly the row order of the flattened
 * HWIO filter [K = KH*KW*C, O], so that
 *   forward         Y[M, O]   = col[M, K] x F[K, O]
 *   backprop input  dcol[M,K] = dY[M, O] x F^T, then col2im adds dcol into dX
 *   backprop filter dF[K, O]  = col^T x dY[M, O]
 * with M = N*OH*OW. The column buffer is the op's workspace; it holds a chunk
 * of rows sized per call (at most CONV_WS_BYTES, at least one row), so a big
 * batch is processed in chunks. 1x1 stride-1 convolutions skip im2col: the
 * input itself is the column matrix (pure GEMM, no workspace).
 *
 * This file is compiled once and includes itself twice (float, double). */
#ifndef LOOM_CONV_TPL
#include <string.h>
#include <cblas.h>
#include "kernels/cpu/nn.h"

#define CONV_WS_BYTES ((int64_t)8 << 20)
#define CONV_ROW_GRAIN 32768 /* elements copied per parallel task, roughly */

typedef struct geom {
  int64_t N, H, W, C, KH, KW, O, OH, OW;
  int64_t sh, sw, dh, dw, pt, pl;
  int64_t K, M;
  int pointwise;
} geom;

static int64_t attr_or_1(int64_t v) { return v >= 1 ? v : 1; }

/* xd: input [N,H,W,C], fd: filter [KH,KW,C,O], yd: output [N,OH,OW,O]. */
static void geom_init(geom *g, const loom_attrs *a, const int64_t *xd, const int64_t *fd, const int64_t *yd) {
  g->N = xd[0];
  g->H = xd[1];
  g->W = xd[2];
  g->C = xd[3];
  g->KH = fd[0];
  g->KW = fd[1];
  g->O = fd[3];
  g->OH = yd[1];
  g->OW = yd[2];
  g->sh = attr_or_1(a->strides[1]);
  g->sw = attr_or_1(a->strides[2]);
  g->dh = attr_or_1(a->dilations[1]);
  g->dw = attr_or_1(a->dilations[2]);
  loom__conv_out_size(g->H, g->KH, g->sh, g->dh, a->padding, &g->pt);
  loom__conv_out_size(g->W, g->KW, g->sw, g->dw, a->padding, &g->pl);
  g->K = g->KH * g->KW * g->C;
  g->M = g->N * g->OH * g->OW;
  g->pointwise = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
                 g->OH == g->H && g->OW == g->W;
}

/* Rows of the column matrix per chunk. */
static int64_t chunk_rows(const geom *g, size_t elem) {
  if (g->M <= 0) return 0;
  int64_t r = g->K > 0 ? CONV_WS_BYTES / (g->K * (int64_t)elem) : g->M;
  if (r < 1) r = 1;
  if (r > g->M) r = g->M;
  if (r > (1 << 30) / (g->K > 0 ? g->K : 1)) r = (1 << 30) / (g->K > 0 ? g->K : 1); /* BLAS int range */
  if (r < 1) r = 1;
  return r;
}

/* Rows per GEMM call when no workspace is needed (1x1 stride-1): only the
 * BLAS int range limits them. */
static int64_t pointwise_rows(const geom *g) {
  int64_t w = g->C > g->O ? g->C : g->O;
  int64_t r = (int64_t)(1 << 30) / (w > 0 ? w : 1);
  if (r > g->M) r = g->M;
  return r > 0 ? r : 1;
}

static size_t ws_bytes(const geom *g, size_t elem) {
  if (g->pointwise || g->M <= 0 || g->K <= 0 || g->O <= 0) return 0;
  return (size_t)chunk_rows(g, elem) * (size_t)g->K * elem;
}

static size_t dtype_bytes(loom_dtype dt) { return dt == LOOM_F64 ? 8 : 4; }

size_t loom__ws_conv2d(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                       const loom_buf *const *out) {
  geom g;
  geom_init(&g, a, in[0]->dims, in[1]->dims, out[0]->dims);
  return ws_bytes(&g, dtype_bytes(in[0]->dtype));
}
size_t loom__ws_conv2d_backprop_input(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                      const loom_buf *const *out) {
  geom g;
  geom_init(&g, a, out[0]->dims, in[0]->dims, in[1]->dims);
  return ws_bytes(&g, dtype_bytes(in[0]->dtype));
}
size_t loom__ws_conv2d_backprop_filter(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                       const loom_buf *const *out) {
  geom g;
  geom_init(&g, a, in[0]->dims, out[0]->dims, in[1]->dims);
  return ws_bytes(&g, dtype_bytes(in[0]->dtype));
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
#define GEMM cblas_sgemm
#include "kernels/cpu/conv.c"
#undef T
#undef SFX
#undef GEMM
#define T double
#define SFX f64
#define GEMM cblas_dgemm
#include "kernels/cpu/conv.c"
#undef T
#undef SFX
#undef GEMM

#else /* ---------------- template body: T, SFX, GEMM ---------------- */

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

/* col[i - r0] = the window of output pixel i, for i in [r0 + b, r0 + e). */
static void FN(im2col_range)(void *p, int64_t b, int64_t e) {
  const FN(cols_args) *a = p;
  const geom *g = a->g;
  const int64_t KWC = g->KW * g->C, P = g->OH * g->OW;
  for (int64_t i = b; i < e; i++) {
    int64_t r = a->r0 + i;
    int64_t n = r / P, q = r - n * P, oh = q / g->OW, ow = q - oh * g->OW;
    int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
    const T *ximg = a->x + n * g->H * g->W * g->C;
    T *dst = a->col + i * g->K;
    int inside_w = iw0 >= 0 && iw0 + (g->KW - 1) * g->dw < g->W;
    for (int64_t kh = 0; kh < g->KH; kh++, dst += KWC) {
      int64_t ih = ih0 + kh * g->dh;
      if (ih < 0 || ih >= g->H) {
        memset(dst, 0, (size_t)KWC * sizeof(T));
        continue;
      }
      const T *xr = ximg + ih * g->W * g->C;
      if (inside_w && g->dw == 1) {
        FN(copy)(dst, xr + iw0 * g->C, KWC);
        continue;
      }
      for (int64_t kw = 0; kw < g->KW; kw++) {
        int64_t iw = iw0 + kw * g->dw;
        if (iw < 0 || iw >= g->W) memset(dst + kw * g->C, 0, (size_t)g->C * sizeof(T));
        else FN(copy)(dst + kw * g->C, xr + iw * g->C, g->C);
      }
    }
  }
}

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
  int64_t R = g.pointwise ? pointwise_rows(&g) : chunk_rows(&g, sizeof(T));
  if (g.pointwise) {
    for (int64_t r0 = 0; r0 < g.M; r0 += R) {
      int64_t m = g.M - r0 < R ? g.M - r0 : R;
      GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)g.O, (int)g.C, 1, x + r0 * g.C, (int)g.C, f,
           (int)g.O, 0, y + r0 * g.O, (int)g.O);
    }
    return LOOM_OK;
  }
  size_t need = (size_t)R * (size_t)g.K * sizeof(T);
  if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
  T *col = ctx->ws;
  for (int64_t r0 = 0; r0 < g.M; r0 += R) {
    int64_t m = g.M - r0 < R ? g.M - r0 : R;
    FN(im2col)(ctx, &g, x, col, r0, r0 + m);
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)g.O, (int)g.K, 1, col, (int)g.K, f, (int)g.O, 0,
         y + r0 * g.O, (int)g.O);
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
  int64_t R = g.pointwise ? pointwise_rows(&g) : chunk_rows(&g, sizeof(T));
  if (g.pointwise && g.O > 0) {
    for (int64_t r0 = 0; r0 < g.M; r0 += R) {
      int64_t m = g.M - r0 < R ? g.M - r0 : R;
      GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)g.C, (int)g.O, 1, dy + r0 * g.O, (int)g.O, f,
           (int)g.O, 0, dx + r0 * g.C, (int)g.C);
    }
    return LOOM_OK;
  }
  memset(dx, 0, (size_t)DX->numel * sizeof(T));
  if (g.M == 0 || g.O == 0 || g.K == 0) return LOOM_OK;
  size_t need = (size_t)R * (size_t)g.K * sizeof(T);
  if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
  T *col = ctx->ws;
  const int64_t P = g.OH * g.OW;
  for (int64_t r0 = 0; r0 < g.M; r0 += R) {
    int64_t m = g.M - r0 < R ? g.M - r0 : R;
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)g.K, (int)g.O, 1, dy + r0 * g.O, (int)g.O, f,
         (int)g.O, 0, col, (int)g.K);
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
  int64_t R = g.pointwise ? pointwise_rows(&g) : chunk_rows(&g, sizeof(T));
  if (g.pointwise) {
    for (int64_t r0 = 0; r0 < g.M; r0 += R) {
      int64_t m = g.M - r0 < R ? g.M - r0 : R;
      GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)g.C, (int)g.O, (int)m, 1, x + r0 * g.C, (int)g.C,
           dy + r0 * g.O, (int)g.O, r0 ? 1 : 0, df, (int)g.O);
    }
    return LOOM_OK;
  }
  size_t need = (size_t)R * (size_t)g.K * sizeof(T);
  if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
  T *col = ctx->ws;
  for (int64_t r0 = 0; r0 < g.M; r0 += R) {
    int64_t m = g.M - r0 < R ? g.M - r0 : R;
    FN(im2col)(ctx, &g, x, col, r0, r0 + m);
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)g.K, (int)g.O, (int)m, 1, col, (int)g.K, dy + r0 * g.O,
         (int)g.O, r0 ? 1 : 0, df, (int)g.O);
  }
  return LOOM_OK;
}

#endif
