/* CPU kernels: Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter (NHWC input,
 * HWIO filter). No BLAS: register-tiled loops written with GCC/Clang vector
 * extensions (kernels/cpu/conv_tiles.h), compiled for AVX-512, AVX2+FMA and
 * the build's baseline and chosen at run time (loom__cpu_vec_level, kernels/cpu/isa.h), with tiles
 * sized to each register file: speed depends neither on the BLAS library
 * recognising the CPU nor on -march.
 *
 * - Direct forward (K = KH*KW*C <= CONV_DIRECT_MAX_K): output pixels, 12 at a
 *   time, read their windows straight from the image (a zero-padded copy at
 *   the borders) and accumulate tiles of 6 pixels x 4 vectors of output
 *   channels (or 12 x 2, 12 x 1) in registers (AVX-512; 6 x 2 and 12 x 1
 *   with 16 registers). A 1x1 stride-1 convolution is
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
 * - Filter gradient of small windows (K <= CONV_DIRECT_DW_MAX_K): the pixels
 *   in a fixed number of partitions (by the shape, not the threads), each
 *   gathering blocks of windows on the stack into the same dF tiles, summed
 *   into its own dF (the workspace); the partitions are added in order.
 * Work is split over the thread pool by pixels (forward, small-window dF),
 * filter rows (dF) or images (col2im).
 *
 * This file is compiled once and includes itself twice (float, double), and
 * each of those includes conv_tiles.h once per instruction set. */
#ifndef LOOM_CONV_TPL
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include "kernels/cpu/nn.h"
#include "kernels/geometry.h"
#include "kernels/cpu/isa.h"
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
#define CONV_DW_BLOCK 128         /* pixels per gathered block of the direct filter gradient */
#define CONV_DW_PART_PIXELS 4096  /* pixels per partition of the direct filter gradient, at least */
#define CONV_DW_MAX_PARTS 8
/* Windows whose rows hold at most CONV_PAD_MAX_KWC values (KW*C: the first
 * layers of image models) cost more to locate and gather than to multiply:
 * their direct forward pass and filter gradient read a zero-padded copy of
 * the input (the workspace, at most CONV_PAD_MAX_BYTES; the input itself when
 * no padding is needed) where every window is KH rows of KW*C values at fixed
 * offsets. */
#define CONV_PAD_MAX_KWC 32
#define CONV_PAD_MAX_BYTES ((int64_t)16 << 20)

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


/* Partitions of the pixels of a direct filter gradient: one per
 * CONV_DW_PART_PIXELS, at most CONV_DW_MAX_PARTS. */
static int64_t dw_parts(const geom *g) {
  int64_t p = g->M / CONV_DW_PART_PIXELS;
  return p < 1 ? 1 : p > CONV_DW_MAX_PARTS ? CONV_DW_MAX_PARTS : p;
}
/* Rows of its partitions' sums: K rounded up to whole tiles of 6 (the
 * gathered windows' extra columns are zero). */
static int64_t dw_rows(const geom *g) { return (g->K + 5) / 6 * 6; }

/* The padded input of a padded-image loop: Hs rows of Ws pixels per image,
 * element (n, r, q, c) the input's (n, r - pt, q - pl, c) or zero. */
typedef struct {
  int mode;       /* 0: none (gather windows); 1: the input itself (no padding needed); 2: a padded copy */
  int64_t Hs, Ws; /* its rows per image, pixels per row */
} pad_plan;

/* op: 0 forward, 2 backprop filter (the loops that read windows of x). */
static pad_plan pad_plan_of(const geom *g, size_t elem, int op) {
  pad_plan p = {0, 0, 0};
  if (g->M <= 0 || g->K <= 0 || g->dw != 1 || g->KW * g->C > CONV_PAD_MAX_KWC) return p;
  if (op == 0 ? !g->direct || g->pointwise : !g->direct_dw) return p;
  /* rows and columns the windows reach, padding included */
  int64_t Hp = (g->OH - 1) * g->sh + (g->KH - 1) * g->dh + 1, Wp = (g->OW - 1) * g->sw + g->KW;
  if (g->pt == 0 && g->pl == 0 && Hp <= g->H && Wp <= g->W) return (pad_plan){1, g->H, g->W};
  if ((double)g->N * (double)Hp * (double)Wp * (double)g->C * (double)elem > (double)CONV_PAD_MAX_BYTES) return p;
  return (pad_plan){2, Hp, Wp};
}
static size_t pad_bytes(const geom *g, const pad_plan *p, size_t elem) {
  return p->mode == 2 ? (size_t)(g->N * p->Hs * p->Ws * g->C) * elem : 0;
}

/* Winograd (kernels/cpu/conv_winograd.h) for 5x5 windows at stride and
 * dilation 1 with at least WINO_MIN_C input and WINO_MIN_O output channels
 * (fewer leave the transforms to dominate): output tiles of m x m pixels,
 * m = 4 (F(4x4, 5x5), 8x8 windows) or m = 2 (F(2x2, 5x5), 6x6 windows),
 * per geometry (wino_m). LOOM_CONV_WINOGRAD=0 turns it off, =2 and =4 ask
 * for one tile size (tests, benchmarks). */
/* Tiles per block: one 12-row register tile; the filter gradient's 24. Measured faster than 24 or 48
 * (and 12 or 48) on the Fashion-MNIST second layer (16 -> 32 channels), and than 48 on a 64 -> 64
 * channel layer. */
#define WINO_TB 12
#define WINO_DW_TB 24
#define WINO_MIN_C 8
#define WINO_MIN_O 8
#define WINO_MAX_C 256
#define WINO_MAX_O 128    /* bounds a stack buffer */
#define WINO_MAX_PARTS 8
#define WINO_TILES_PER_PART 64
/* the transforms' loops over channels read and write distinct rows */
#if defined(__GNUC__) && !defined(__clang__)
#define WINO_IVDEP _Pragma("GCC ivdep")
#else
#define WINO_IVDEP
#endif

/* 0: off; 1: the tile size per geometry; 2 or 4: that tile size. */
static int wino_mode(void) {
  static int mode = -1; /* read once; racing first calls store the same value */
  int v = __atomic_load_n(&mode, __ATOMIC_RELAXED);
  if (v < 0) {
    const char *e = getenv("LOOM_CONV_WINOGRAD");
    v = !e ? 1 : !strcmp(e, "0") ? 0 : !strcmp(e, "2") ? 2 : !strcmp(e, "4") ? 4 : 1;
    __atomic_store_n(&mode, v, __ATOMIC_RELAXED);
  }
  return v;
}
/* The output tile size: 4 where its elementwise products (64 per 4x4 tile, the output rounded up to
 * whole tiles) are fewer than F(2x2)'s (36 per 2x2 tile), else 2. */
static int64_t wino_m(const geom *g) {
  int mode = wino_mode();
  if (mode == 2 || mode == 4) return mode;
  int64_t p4 = 64 * ((g->OH + 3) / 4) * ((g->OW + 3) / 4), p2 = 36 * ((g->OH + 1) / 2) * ((g->OW + 1) / 2);
  return p4 < p2 ? 4 : 2;
}
/* Elements of a transformed tile: (m + 4)^2. */
static int64_t wino_xis(int64_t m) { return (m + 4) * (m + 4); }
static int64_t wino_tiles(const geom *g, int64_t m) { return g->N * ((g->OH + m - 1) / m) * ((g->OW + m - 1) / m); }
/* The zero-padded copy of an image the Winograd tiles read (whole m x m output blocks), one per part:
 * at most WINO_MAX_PAD_ELEMS values (4 MB in f32), else the direct loops. */
#define WINO_MAX_PAD_ELEMS ((int64_t)1 << 20)
static int64_t wino_pad_elems(const geom *g) {
  int64_t m = wino_m(g);
  return (m * ((g->OH + m - 1) / m) + 4) * (m * ((g->OW + m - 1) / m) + 4) * g->C;
}
static int wino_ok(const geom *g) {
  return g->KH == 5 && g->KW == 5 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->M > 0 &&
         g->C >= WINO_MIN_C && g->C <= WINO_MAX_C && g->O >= WINO_MIN_O && g->O <= WINO_MAX_O &&
         wino_mode() && wino_pad_elems(g) <= WINO_MAX_PAD_ELEMS;
}
/* Parts (each with its own scratch): one per WINO_TILES_PER_PART tiles, at most WINO_MAX_PARTS. */
static int64_t wino_parts(const geom *g) {
  int64_t p = wino_tiles(g, wino_m(g)) / WINO_TILES_PER_PART;
  return p < 1 ? 1 : p > WINO_MAX_PARTS ? WINO_MAX_PARTS : p;
}
/* Scratch of a part: V and M of a block, the padded image. */
static int64_t wino_part_elems(const geom *g) {
  return wino_xis(wino_m(g)) * WINO_TB * (g->C + g->O) + wino_pad_elems(g);
}
/* The workspace: U[xis][C][O], the parts' scratch. */
static int64_t wino_ws_elems(const geom *g) {
  return wino_xis(wino_m(g)) * g->C * g->O + wino_parts(g) * wino_part_elems(g);
}

/* The filter gradient's: input channels rounded up to whole 6-row tiles; a part's scratch (V and
 * D of a block, the padded image); the workspace (the parts' scratch and sums). */
static int64_t wino_dw_cp(int64_t C) { return (C + 5) / 6 * 6; }
static int64_t wino_dw_part_elems(const geom *g) {
  return wino_xis(wino_m(g)) * WINO_DW_TB * (wino_dw_cp(g->C) + g->O) + wino_pad_elems(g);
}
static int64_t wino_dw_ws_elems(const geom *g) {
  return wino_parts(g) * (wino_dw_part_elems(g) + wino_xis(wino_m(g)) * wino_dw_cp(g->C) * g->O);
}

/* op: 0 forward, 1 backprop input, 2 backprop filter. */
static size_t ws_bytes(const geom *g, size_t elem, int op) {
  if (g->M <= 0 || g->K <= 0 || g->O <= 0) return 0;
  size_t col = (size_t)chunk_rows(g, elem, op) * (size_t)g->K * elem, filt = (size_t)g->K * (size_t)g->O * elem;
  pad_plan pp = pad_plan_of(g, elem, op);
  switch (op) {
    case 0:
      if (wino_ok(g)) return (size_t)wino_ws_elems(g) * elem;
      if (pp.mode) return pad_bytes(g, &pp, elem);
      return g->direct || g->pointwise ? 0 : col;
    case 1:
      if (g->direct_dx) {
        geom t;
        geom_transposed(g, &t);
        if (wino_ok(&t)) return filt + (size_t)wino_ws_elems(&t) * elem;
      }
      return g->direct_dx || g->pointwise ? filt : filt + col; /* flipped or transposed filter */
    default:
      if (wino_ok(g)) return (size_t)wino_dw_ws_elems(g) * elem;
      if (g->direct_dw) /* the partitions' sums, then the padded input */
        return (size_t)(dw_parts(g) * dw_rows(g) * g->O) * elem + pad_bytes(g, &pp, elem);
      return g->pointwise ? 0 : col;
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

/* Three 4-d buffers of one floating type (the folds' queries below). */
static int float_bufs(const loom_buf *a, const loom_buf *b, const loom_buf *c) {
  return a->ndim == 4 && b->ndim == 4 && c->ndim == 4 && a->dtype == b->dtype && a->dtype == c->dtype &&
         (a->dtype == LOOM_F32 || a->dtype == LOOM_F64);
}
/* The filter gradient of a dy made image by image as it runs (loom__conv_dw_images): the
 * small-window loops over a padded input only. Its workspace: the partitions' sums and the padded
 * input as the kernel's, then one image of dy per partition (from dw_images_scratch). */
static int dw_images_ok(const geom *g, size_t elem) {
  return g->M > 0 && g->K > 0 && g->O > 0 && !wino_ok(g) && g->direct_dw && pad_plan_of(g, elem, 2).mode != 0;
}
static size_t dw_images_scratch(const geom *g, size_t elem) {
  pad_plan pp = pad_plan_of(g, elem, 2);
  size_t off = (size_t)dw_parts(g) * (size_t)dw_rows(g) * (size_t)g->O * elem + pad_bytes(g, &pp, elem);
  return (off + 63) / 64 * 64;
}
size_t loom__conv_dw_images_ws(const loom_attrs *a, const loom_buf *x, const loom_buf *dy, const loom_buf *df) {
  if (!float_bufs(x, dy, df)) return 0;
  geom g;
  geom_init(&g, a, x->dims, df->dims, dy->dims);
  size_t elem = dtype_bytes(x->dtype);
  if (!dw_images_ok(&g, elem)) return 0;
  return dw_images_scratch(&g, elem) + (size_t)dw_parts(&g) * (size_t)(g.OH * g.OW * g.O) * elem;
}

/* The filter gradient from a 2x2 max pool's winners (loom__conv_dw_winners, kernels/cpu/conv_winners.h):
 * stride and dilation 1, even output rows and columns, 3x3 or 5x5 windows; the images in
 * wdw_parts() partitions (by the shape), each with its sums and a padded image of
 * (OH + KH - 1) x (OW + KW - 1) pixels in the workspace. Vectors run over input channels (O x Cp
 * products per window of 4 pixels; the image in blocks of a vector's channels) where that is fewer
 * than over output channels (4 x C x Op: each pooled value masked by its winner, the image as it is,
 * and the codes and values copied whole vectors apart where O is not whole vectors). */
#define WDW_MAX_PARTS 8
#define WDX_MAX_O 256 /* output channels a pooled window's lists hold (uint8_t) */
#define WDW_SUM_MAX 8192 /* a row of sums (KH*KW*Cp values) added on the stack */
/* Channels rounded up to whole vectors of the widest instruction set (16 values in f32), zero past C. */
static int64_t wdw_cp(int64_t C) { return (C + 15) / 16 * 16; }
static int wdw_over_c(const geom *g) { return g->O * wdw_cp(g->C) < 4 * g->C * wdw_cp(g->O); }
static int wdw_ok(const geom *g) {
  return g->N > 0 && g->C > 0 && g->O > 0 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->OH > 0 &&
         g->OW > 0 && g->OH % 2 == 0 && g->OW % 2 == 0 && g->KH == g->KW && (g->KH == 3 || g->KH == 5) &&
         g->KH * g->KW * wdw_cp(g->C) <= WDW_SUM_MAX &&
         (g->OH + g->KH - 1) * (g->OW + g->KW - 1) * wdw_cp(g->C) <= WINO_MAX_PAD_ELEMS;
}
static int64_t wdw_parts(const geom *g) { return g->N < WDW_MAX_PARTS ? g->N : WDW_MAX_PARTS; }
static int64_t wdw_part_elems(const geom *g) {
  const int64_t KK = g->KH * g->KW, img = (g->OH + g->KH - 1) * (g->OW + g->KW - 1), NW = (g->OH / 2) * (g->OW / 2);
  /* the sums and the image; or the sums, the image, the pooled values and their codes of one image (in
   * values' room); whole 64-byte lines, so that every partition's sums and image are aligned */
  int64_t e = wdw_over_c(g) ? (g->O * KK + img) * wdw_cp(g->C) : KK * g->C * wdw_cp(g->O) + img * g->C + 2 * NW * wdw_cp(g->O);
  return (e + 15) / 16 * 16;
}
size_t loom__conv_dw_winners_ws(const loom_attrs *a, const loom_buf *x, const loom_buf *dy, const loom_buf *df) {
  if (!float_bufs(x, dy, df)) return 0;
  geom g;
  geom_init(&g, a, x->dims, df->dims, dy->dims);
  if (!wdw_ok(&g)) return 0;
  return (size_t)(wdw_parts(&g) * wdw_part_elems(&g)) * dtype_bytes(x->dtype);
}

int loom__conv_dx_routable(const loom_attrs *a, const loom_buf *f, const loom_buf *dy, const loom_buf *dx) {
  if (!float_bufs(f, dy, dx)) return 0;
  geom g, t;
  geom_init(&g, a, dx->dims, f->dims, dy->dims);
  if (!g.direct_dx || g.M == 0 || g.O == 0 || g.K == 0) return 0;
  geom_transposed(&g, &t);
  if (!wino_ok(&t)) return 0;
  /* every pixel of dy inside the padded image (wino_fwd's Hs x Ws), at rows pt.. and columns pl.. */
  const int64_t m = wino_m(&t), Hs = m * ((t.OH + m - 1) / m) + 4, Ws = m * ((t.OW + m - 1) / m) + 4;
  return t.pt >= 0 && t.pl >= 0 && t.pt + t.H <= Hs && t.pl + t.W <= Ws;
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

/* Run-time choice of the register-tiled loops (kernels/cpu/conv_tiles.h is
 * compiled once per instruction set, whatever -march the build used): AVX-512
 * (64-byte vectors, 32 registers), AVX2+FMA (32-byte vectors, 16 registers),
 * or the build's baseline (16-byte vectors: SSE2 on x86-64, NEON elsewhere),
 * at most kernels/cpu/isa.h's loom__cpu_vec_level (LOOM_CONV_ISA lowers it). */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define CONV_X86 1
#include <immintrin.h>
#else
#define CONV_X86 0
#endif

/* The input gradient from a pool's winners (wdx, below): 5x5 SAME at stride 1 over even rows and
 * columns, AVX-512, whole vectors of input channels. */
static int wdx_geom_ok(const geom *g, size_t elem) {
  return loom__cpu_vec_level() >= LOOM_VEC_AVX512 && g->C > 0 && g->C % (int64_t)(64 / elem) == 0 && g->O > 0 &&
         g->O <= WDX_MAX_O && g->N > 0 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->KH == 5 &&
         g->KW == 5 && g->pt == 2 && g->pl == 2 && g->H == g->OH && g->W == g->OW && g->OH > 0 && g->OW > 0 &&
         g->OH % 2 == 0 && g->OW % 2 == 0;
}
int loom__conv_dx_winners_fit(const loom_attrs *a, const loom_buf *f, const loom_buf *dy, const loom_buf *dx) {
  if (!float_bufs(f, dy, dx)) return 0;
  geom g;
  geom_init(&g, a, dx->dims, f->dims, dy->dims);
  return wdx_geom_ok(&g, dtype_bytes(dx->dtype));
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

/* Short rows (a window row of a few channels) are copied inline: a memcpy
 * call per row would cost more than the copy. */
LOOM_FORCE_INLINE void FN(copy)(T *restrict d, const T *restrict s, int64_t n) {
  if (n <= 16) {
    for (int64_t i = 0; i < n; i++) d[i] = s[i];
  } else {
    memcpy(d, s, (size_t)n * sizeof(T));
  }
}

/* dst[0..K) = the window (kh, kw, c) of output pixel (n, oh, ow), zero-padded. */
LOOM_FORCE_INLINE void FN(gather)(const geom *g, const T *x, int64_t n, int64_t oh, int64_t ow, T *dst) {
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
LOOM_HOT static void FN(im2col_range)(void *p, int64_t b, int64_t e) {
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
  const T *xp;    /* the padded input (pad_plan), or NULL */
  int64_t Hs, Ws; /* its rows per image, pixels per row */
  const loom_epilogue *epi; /* the forward pass: folded BiasAdd / Relu, applied as rows are written (or NULL) */
  int64_t y0;               /* the pixel whose output row is y[0] (y holds a range of pixels) */
} FN(direct_args);

/* The folded steps' work (kernels/kernel.h) on rows [0, rows) of O channels, as BiasAdd's and
 * Relu's kernels compute it. */
LOOM_FORCE_INLINE void FN(epi_rows)(const loom_epilogue *e, T *y, int64_t rows, int64_t O) {
  const T *b = e->bias ? (const T *)e->bias->data : NULL;
  if (b && e->relu) {
    for (int64_t r = 0; r < rows; r++, y += O)
      for (int64_t c = 0; c < O; c++) {
        T v = y[c] + b[c];
        y[c] = v < 0 ? (T)0 : v;
      }
  } else if (b) {
    for (int64_t r = 0; r < rows; r++, y += O)
      for (int64_t c = 0; c < O; c++) y[c] = y[c] + b[c];
  } else if (e->relu) {
    for (int64_t r = 0; r < rows; r++, y += O)
      for (int64_t c = 0; c < O; c++) y[c] = y[c] < 0 ? (T)0 : y[c];
  }
}
typedef struct {
  const loom_epilogue *epi;
  T *y;
  int64_t O;
} FN(epi_args);
LOOM_HOT static void FN(epi_range)(void *p, int64_t b, int64_t e) {
  const FN(epi_args) *a = p;
  FN(epi_rows)(a->epi, a->y + b * a->O, e - b, a->O);
}

/* A folded 2x2 stride-2 MaxPool of output rows y0 and y1 (W pixels, W even): W/2 pooled pixels to
 * o, each channel's maximum taken in MaxPool's order (the window row by row, NaN never replacing). */
LOOM_FORCE_INLINE void FN(pool_pair)(const T *y0, const T *y1, int64_t W, int64_t O, T *o) {
  for (int64_t q = 0; q < W / 2; q++, y0 += 2 * O, y1 += 2 * O, o += O)
    for (int64_t c = 0; c < O; c++) {
      T m = -INFINITY, v = y0[c];
      m = v > m ? v : m;
      v = y0[O + c];
      m = v > m ? v : m;
      v = y1[c];
      m = v > m ? v : m;
      v = y1[O + c];
      o[c] = v > m ? v : m;
    }
}
/* The same, also writing where each pooled value came from as MaxPoolGrad routes dy with a folded
 * ReluGrad over its input (kernels/kernel.h: argmax): the first maximum in the window's order (0-3),
 * or 4 where it is not above 0. */
#define ROUTE_BLK 16
typedef T FN(route_vec) __attribute__((vector_size(ROUTE_BLK * sizeof(T))));
typedef uint8_t route_bytes __attribute__((vector_size(ROUTE_BLK)));
typedef int32_t route_words __attribute__((vector_size(ROUTE_BLK * 4)));
/* One window (a0..a3 row by row): its maximum to *o; its route as a T (selects on lanes of one type
 * vectorize where this is inlined into a loop over channels). */
LOOM_FORCE_INLINE T FN(route_one)(T a0, T a1, T a2, T a3, T *o) {
  T m = a0 > -INFINITY ? a0 : -INFINITY;
  m = a1 > m ? a1 : m;
  m = a2 > m ? a2 : m;
  *o = a3 > m ? a3 : m;
  T b = a0, k = 0;
  k = a1 > b ? (T)1 : k;
  b = a1 > b ? a1 : b;
  k = a2 > b ? (T)2 : k;
  b = a2 > b ? a2 : b;
  k = a3 > b ? (T)3 : k;
  b = a3 > b ? a3 : b;
  return b > 0 ? k : (T)4;
}
LOOM_FORCE_INLINE void FN(route_block)(const T *y0, const T *y1, int64_t O, T *o, uint8_t *code) {
  T at[ROUTE_BLK];
  for (int c = 0; c < ROUTE_BLK; c++) at[c] = FN(route_one)(y0[c], y0[O + c], y1[c], y1[O + c], o + c);
  FN(route_vec) v; /* narrowed to bytes in registers (a loop of byte stores would go through memory) */
  memcpy(&v, at, sizeof v);
  route_words iv = __builtin_convertvector(v, route_words);
  route_bytes w = __builtin_convertvector(iv, route_bytes);
  memcpy(code, &w, sizeof w);
}
LOOM_FORCE_INLINE void FN(pool_pair_route)(const T *y0, const T *y1, int64_t W, int64_t O, T *o, uint8_t *code) {
  for (int64_t q = 0; q < W / 2; q++, y0 += 2 * O, y1 += 2 * O, o += O, code += O) {
    int64_t c = 0;
    for (; c + ROUTE_BLK <= O; c += ROUTE_BLK) FN(route_block)(y0 + c, y1 + c, O, o + c, code + c);
    for (; c < O; c++) code[c] = (uint8_t)FN(route_one)(y0[c], y0[O + c], y1[c], y1[O + c], o + c);
  }
}
/* Task u: the pair of output rows u (image u / (OH/2)); with `d`, the direct loops compute them first
 * (into a scratch of the task's when the routes are recorded and the rows fit: y is then not
 * written). */
#define POOL_ROWS_SCRATCH 4096
typedef struct {
  const geom *g;
  const FN(direct_args) *d;
  void (*rows)(void *, int64_t, int64_t);
  T *y, *pool;
  uint8_t *code; /* kernels/kernel.h: argmax, or NULL */
} FN(pool_args);
LOOM_HOT static void FN(pool_range)(void *p, int64_t b, int64_t e) {
  const FN(pool_args) *a = p;
  const int64_t OW = a->g->OW, O = a->g->O;
  T buf[POOL_ROWS_SCRATCH];
  const int scratch = a->code && a->d && 2 * OW * O <= POOL_ROWS_SCRATCH;
  for (int64_t u = b; u < e; u++) {
    T *y0 = a->y + u * 2 * OW * O;
    if (scratch) {
      FN(direct_args) d = *a->d;
      d.y = y0 = buf;
      d.y0 = u * 2 * OW;
      a->rows(&d, u * 2 * OW, (u + 1) * 2 * OW);
    } else if (a->d) {
      a->rows((void *)a->d, u * 2 * OW, (u + 1) * 2 * OW);
    }
    if (a->code)
      FN(pool_pair_route)(y0, y0 + OW * O, OW, O, a->pool + u * (OW / 2) * O, a->code + u * (OW / 2) * O);
    else
      FN(pool_pair)(y0, y0 + OW * O, OW, O, a->pool + u * (OW / 2) * O);
  }
}

/* The first window value of output pixel (n, oh, ow) in the padded input;
 * its row kh starts kh * dh * Ws * C further. */
LOOM_FORCE_INLINE const T *FN(pad_window)(const geom *g, const T *xp, int64_t Hs, int64_t Ws, int64_t n,
                                          int64_t oh, int64_t ow) {
  return xp + ((n * Hs + oh * g->sh) * Ws + ow * g->sw) * g->C;
}

/* Task n: image n of the padded input (pad_plan mode 2). */
typedef struct {
  const geom *g;
  const T *x;
  T *xp;
  int64_t Hs, Ws;
} FN(pad_args);

/* Image ximg into d (Hs rows of Ws pixels): its rows at rows [pt, pt + H), columns [pl, pl + W) of d,
 * clipped to d; the rest zero when border (else left as it is). */
static void FN(pad_image)(const geom *g, const T *ximg, T *d, int64_t Hs, int64_t Ws, int border) {
  const int64_t C = g->C, rowv = Ws * C;
  /* input columns [q0, q1) land at padded columns [q0 + pl, q1 + pl) */
  int64_t q0 = g->pl > 0 ? 0 : -g->pl, q1 = Ws - g->pl < g->W ? Ws - g->pl : g->W;
  if (q1 < q0) q1 = q0;
  for (int64_t r = 0; r < Hs; r++, d += rowv) {
    int64_t ih = r - g->pt;
    if (ih < 0 || ih >= g->H || q1 == q0) {
      if (border) memset(d, 0, (size_t)rowv * sizeof(T));
      continue;
    }
    int64_t lo = (q0 + g->pl) * C, hi = (q1 + g->pl) * C;
    if (border && lo > 0) memset(d, 0, (size_t)lo * sizeof(T));
    memcpy(d + lo, ximg + (ih * g->W + q0) * C, (size_t)(hi - lo) * sizeof(T));
    if (border && hi < rowv) memset(d + hi, 0, (size_t)(rowv - hi) * sizeof(T));
  }
}

static void FN(pad_range)(void *p, int64_t b, int64_t e) {
  const FN(pad_args) *a = p;
  const geom *g = a->g;
  for (int64_t n = b; n < e; n++)
    FN(pad_image)(g, a->x + n * g->H * g->W * g->C, a->xp + n * a->Hs * a->Ws * g->C, a->Hs, a->Ws, 1);
}

/* The input as the padded-image loops read it: x itself (mode 1) or its
 * padded copy written into buf (mode 2). */
static const T *FN(pad_input)(const loom_kctx *ctx, const geom *g, const pad_plan *pp, const T *x, T *buf) {
  if (pp->mode == 1) return x;
  FN(pad_args) a = {g, x, buf, pp->Hs, pp->Ws};
  int64_t per = pp->Hs * pp->Ws * g->C, grain = CONV_ROW_GRAIN * 4 / (per > 0 ? per : 1);
  loom__parallel_for(ctx->pool, g->N, grain > 0 ? grain : 1, FN(pad_range), &a);
  return buf;
}

/* src[kh] = the KW*C window values of row kh for pixel (n, oh, ow). */
LOOM_FORCE_INLINE void FN(window_rows)(const geom *g, const T *x, int64_t n, int64_t oh, int64_t ow, T *patch,
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

/* ---- C[M, N] = A[M, K] (row stride lda) x B[K, N] (ldb = ldc = N) ---- */
typedef struct {
  const T *A, *B;
  T *C;
  int64_t lda, N, K;
} FN(gemm_args);

typedef struct {
  const T *col, *dy;
  T *df;
  int64_t K, O, m;
} FN(dwg_args);

/* A small-window filter gradient (K <= CONV_DIRECT_DW_MAX_K): the pixels
 * are cut into dw_parts() partitions (a number fixed by the shape, not by
 * the threads), each summed into its own dF[K6, O] (K rounded up to tiles of
 * 6; part q at part + q*K6*O); the caller adds the partitions. Task q =
 * partition q. With a padded input (dwp_range) the windows are read in place;
 * otherwise (direct_dw_part) blocks of CONV_DW_BLOCK windows are gathered on
 * the stack and fed to the register tiles of dF += col^T x dY. */
typedef struct {
  const geom *g;
  const T *x, *dy;
  T *part;
  int64_t per; /* pixels per partition (the last may have fewer) */
  void (*tiles)(void *, int64_t, int64_t);
  const T *xp;    /* the padded input (pad_plan), or NULL: windows gathered from x */
  int64_t Hs, Ws;
  int64_t dy0; /* dwp_pixels: the pixel whose dy row is dy[0] (dy holds a range of pixels) */
} FN(dwp_args);

/* The filter gradient from a 2x2 max pool's winners (kernels/cpu/conv_winners.h): partition q holds
 * images [q*per, (q+1)*per), its sums part[q][O][KH*KW][C] and its padded image after them. */
typedef struct {
  const geom *g;
  const T *x, *dpool;    /* the input; dy's pooled values [N, OH/2, OW/2, O] */
  const uint8_t *code;   /* their winners (0-3; 4: none) */
  T *ws;                 /* the partitions' sums and images (wdw_part_elems each, 64-byte aligned) */
  int64_t per, Hs, Ws;   /* images per partition; the padded image's rows and columns */
  double *colsum;        /* or NULL: image n's sum of channel o's kept pooled values at [n*O + o], in double */
} FN(wdw_args);

/* v where keep, else 0 (a select on the bits: no branch, and a non-finite v gives 0 too). */
LOOM_FORCE_INLINE T FN(keep_if)(T v, int keep) {
  if (sizeof(T) == 4) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    b &= (uint32_t)0 - (uint32_t)keep;
    memcpy(&v, &b, sizeof b);
  } else {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    b &= (uint64_t)0 - (uint64_t)keep;
    memcpy(&v, &b, sizeof b);
  }
  return v;
}

/* The register-tiled loops of one instruction set (kernels/cpu/conv_tiles.h). */
typedef struct {
  void (*direct_fwd_range)(void *, int64_t, int64_t); /* pixels of a direct forward convolution */
  void (*gemm_nn_range)(void *, int64_t, int64_t);    /* rows of C = A x B */
  void (*dw_gemm_range)(void *, int64_t, int64_t);    /* 6-row tiles of dF += col^T x dY */
  void (*dwp_range)(void *, int64_t, int64_t);        /* partitions of a small-window dF from a padded input */
  void (*dwp_pixels)(const FN(dwp_args) *, T *, int64_t, int64_t, int); /* a range of its pixels */
  void (*wino_in)(const T *, int64_t, int64_t, T *, int64_t);  /* Winograd input transform of a tile */
  void (*wino_out)(const T *, int64_t, int64_t, T *, int64_t); /* Winograd output transform of a tile */
  void (*wino_dy)(const T *, const T *, const T *, const T *, int64_t, T *, int64_t); /* dy's 2x2 block */
  void (*wino4_in)(const T *, int64_t, int64_t, T *, int64_t);  /* the same for F(4x4, 5x5) */
  void (*wino4_out)(const T *, int64_t, int64_t, T *, int64_t, int64_t, int64_t); /* rows, columns kept */
  void (*wino4_dy)(const T *const *, int64_t, T *, int64_t); /* dy's 4x4 block */
  void (*wdw_range)(void *, int64_t, int64_t);  /* partitions of a filter gradient from a pool's winners */
  void (*wdwo_range)(void *, int64_t, int64_t); /* the same, vectors over output channels */
} FN(conv_isa);

#define ISA generic
#define VBYTES 16
#define TARGET
#include "kernels/cpu/conv_tiles.h"
#undef ISA
#undef VBYTES
#undef TARGET
#if CONV_X86
#define ISA avx2
#define VBYTES 32
#define TARGET __attribute__((target("avx2,fma")))
#include "kernels/cpu/conv_tiles.h"
#undef ISA
#undef VBYTES
#undef TARGET
#define ISA avx512
#define VBYTES 64
#define TARGET __attribute__((target("avx512f,avx2,fma")))
#include "kernels/cpu/conv_tiles.h"
#undef ISA
#undef VBYTES
#undef TARGET
#endif

/* The loops for this CPU (loom__cpu_vec_level, kernels/cpu/isa.h) over rows of n channels: the widest vectors that leave the
 * fewest channels to the scalar loops past the last full vector (8 channels of f32 on AVX-512 are one
 * AVX2 vector, not 8 scalar columns), never above the CPU's level. */
static const FN(conv_isa) *FN(isa_for)(int64_t n) {
  int level = loom__cpu_vec_level();
#if CONV_X86
  const int64_t vl[3] = {16 / (int64_t)sizeof(T), 32 / (int64_t)sizeof(T), 64 / (int64_t)sizeof(T)};
  int best = level;
  for (int l = level - 1; l >= LOOM_VEC_GENERIC; l--)
    if (n % vl[l] < n % vl[best]) best = l;
  switch (best) {
    case LOOM_VEC_AVX512: return &CAT(conv_isa_tab, CAT(SFX, avx512));
    case LOOM_VEC_AVX2: return &CAT(conv_isa_tab, CAT(SFX, avx2));
    default: break;
  }
#else
  (void)n;
  (void)level;
#endif
  return &CAT(conv_isa_tab, CAT(SFX, generic));
}

static void FN(gemm_nn)(const loom_kctx *ctx, const T *A, int64_t lda, const T *B, int64_t N, T *C, int64_t M,
                        int64_t K) {
  FN(gemm_args) a = {A, B, C, lda, N, K};
  int64_t grain = (CONV_ROW_GRAIN * 4) / (K * N > 0 ? K * N : 1);
  loom__parallel_for(ctx->pool, M, grain > 12 ? grain : 12, FN(isa_for)(N)->gemm_nn_range, &a);
}

#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/conv_winners.h"

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

LOOM_HOT static void FN(col2im_range)(void *p, int64_t b, int64_t e) {
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

/* Partitions of a small-window filter gradient, windows gathered (dwp_args). */

static void FN(direct_dw_part)(void *p, int64_t b, int64_t e) {
  const FN(dwp_args) *a = p;
  const geom *g = a->g;
  const int64_t K6 = dw_rows(g), O = g->O;
  T col[CONV_DW_BLOCK * (CONV_DIRECT_DW_MAX_K + 5)];
  memset(col, 0, sizeof col); /* the rows' padding columns K..K6 stay zero */
  for (int64_t q = b; q < e; q++) {
    T *df = a->part + q * K6 * O;
    memset(df, 0, (size_t)(K6 * O) * sizeof(T));
    int64_t r1 = (q + 1) * a->per < g->M ? (q + 1) * a->per : g->M;
    int64_t n, oh, ow;
    pix_of(g, q * a->per, &n, &oh, &ow);
    for (int64_t r = q * a->per; r < r1; r += CONV_DW_BLOCK) {
      int64_t m = r1 - r < CONV_DW_BLOCK ? r1 - r : CONV_DW_BLOCK;
      for (int64_t i = 0; i < m; i++) {
        FN(gather)(g, a->x, n, oh, ow, col + i * K6);
        pix_next(g, &n, &oh, &ow);
      }
      FN(dwg_args) d = {col, a->dy + r * O, df, K6, O, m};
      a->tiles(&d, 0, K6 / 6);
    }
  }
}

/* xp: the padded input (pad_plan, Hs x Ws per image) or NULL (windows read from x). */
static void FN(direct_fwd)(const loom_kctx *ctx, const geom *g, const T *x, const T *w, T *y, const T *xp,
                           int64_t Hs, int64_t Ws, const loom_epilogue *epi) {
  FN(direct_args) a = {g, x, w, NULL, y, NULL, xp, Hs, Ws, epi, 0};
  if (epi && epi->pool) { /* pairs of rows: convolved, then pooled while in cache */
    FN(pool_args) pa = {g, &a, FN(isa_for)(g->O)->direct_fwd_range, y, epi->pool->data, epi->argmax};
    int64_t per = 2 * g->OW * g->K * g->O, grain = CONV_ROW_GRAIN * 4 / (per > 0 ? per : 1);
    loom__parallel_for(ctx->pool, g->N * g->OH / 2, grain > 1 ? grain : 1, FN(pool_range), &pa);
    return;
  }
  int64_t grain = (CONV_ROW_GRAIN * 4) / (g->K * g->O > 0 ? g->K * g->O : 1);
  loom__parallel_for(ctx->pool, g->M, grain > 8 ? grain : 8,
                     FN(isa_for)(g->O)->direct_fwd_range, &a);
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
  } else if (wino_ok(&g)) {
    size_t need = (size_t)wino_ws_elems(&g) * sizeof(T);
    if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
    FN(wino_fwd)(ctx, &g, x, f, y, ctx->ws, ctx->epi, NULL); /* the folded steps per block of outputs */
    return LOOM_OK;
  } else if (g.direct) {
    pad_plan pp = pad_plan_of(&g, sizeof(T), 0);
    const T *xp = NULL;
    if (pp.mode) {
      size_t need = pad_bytes(&g, &pp, sizeof(T));
      if (need && (!ctx->ws || ctx->ws_size < need)) return ws_missing(ctx, need);
      xp = FN(pad_input)(ctx, &g, &pp, x, ctx->ws);
    }
    FN(direct_fwd)(ctx, &g, x, f, y, xp, pp.Hs, pp.Ws, ctx->epi); /* the folded steps as rows are written */
    return LOOM_OK;
  } else if (g.pointwise) {
    FN(gemm_nn)(ctx, x, g.C, f, g.O, y, g.M, g.C);
  } else {
    int64_t R = chunk_rows(&g, sizeof(T), 0);
    size_t need = (size_t)R * (size_t)g.K * sizeof(T);
    if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
    T *col = ctx->ws;
    for (int64_t r0 = 0; r0 < g.M; r0 += R) {
      int64_t m = g.M - r0 < R ? g.M - r0 : R;
      FN(im2col)(ctx, &g, x, col, r0, r0 + m);
      FN(gemm_nn)(ctx, col, g.K, f, g.O, y + r0 * g.O, m, g.K);
    }
  }
  if (ctx->epi) { /* the folded steps in one pass over the output */
    FN(epi_args) ea = {ctx->epi, y, g.O};
    int64_t grain = CONV_ROW_GRAIN / (g.O > 0 ? g.O : 1);
    loom__parallel_for(ctx->pool, Y->numel / g.O, grain > 1 ? grain : 1, FN(epi_range), &ea);
    if (ctx->epi->pool) {
      FN(pool_args) pa = {&g, NULL, NULL, y, ctx->epi->pool->data, ctx->epi->argmax};
      grain = CONV_ROW_GRAIN / (2 * g.OW * g.O > 0 ? 2 * g.OW * g.O : 1);
      loom__parallel_for(ctx->pool, g.N * g.OH / 2, grain > 1 ? grain : 1, FN(pool_range), &pa);
    }
  }
  return LOOM_OK;
}

/* Tasks k = kh*KW + kw: the filter flipped in space and transposed in channels (geom_transposed),
 * W'[kh][kw][o][c] = W[KH-1-kh][KW-1-kw][c][o]. */
typedef struct {
  const geom *g;
  const T *f;
  T *wt;
} FN(flip_args);
static void FN(flip_range)(void *p, int64_t b, int64_t e) {
  const FN(flip_args) *a = p;
  const geom *g = a->g;
  for (int64_t k = b; k < e; k++) {
    const T *src = a->f + (g->KH * g->KW - 1 - k) * g->C * g->O; /* (KH-1-kh, KW-1-kw) */
    T *dst = a->wt + k * g->O * g->C;
    for (int64_t o = 0; o < g->O; o++)
      for (int64_t c = 0; c < g->C; c++) dst[o * g->C + c] = src[c * g->O + o];
  }
}

/* ---- the input gradient from a 2x2 max pool's winners (conv_tiles.h: wdx_image) ----
 * Where a Conv2DBackpropInput's dy is a routing MaxPoolGrad's result (engine/fuse.c, kernels/kernel.h:
 * routed) and the convolution is 5x5 SAME at stride 1 over even rows and columns, dx is made from
 * the pooled values and winners directly on AVX-512 (vectors of input channels): images in
 * WDW_MAX_PARTS partitions, each with a zero-padded image of dx of its own in the workspace, so the
 * result does not depend on the threads. wt: the filter as [O][5][5][C]. */
#if CONV_X86
typedef struct {
  const geom *g;
  const T *f, *gp;
  const uint8_t *code;
  T *wt, *ws, *dx;
  int64_t per;
} FN(wdx_args);
static void FN(wdx_wt_range)(void *p, int64_t b, int64_t e) {
  const FN(wdx_args) *a = p;
  const int64_t C = a->g->C, O = a->g->O;
  for (int64_t o = b; o < e; o++)
    for (int64_t k = 0; k < 25; k++)
      for (int64_t c = 0; c < C; c++) a->wt[(o * 25 + k) * C + c] = a->f[(k * C + c) * O + o];
}
static void FN(wdx_range)(void *p, int64_t b, int64_t e) {
  const FN(wdx_args) *a = p;
  const geom *g = a->g;
  const int64_t C = g->C, O = g->O, H = g->H, W = g->W, Wp = W + 4, PH = g->OH / 2, PW = g->OW / 2;
  const int64_t vl = 64 / (int64_t)sizeof(T);
  for (int64_t q = b; q < e; q++) {
    T *img = a->ws + q * (H + 4) * Wp * C;
    const int64_t n0 = q * a->per, n1 = n0 + a->per < g->N ? n0 + a->per : g->N;
    for (int64_t n = n0; n < n1; n++) {
      memset(img, 0, (size_t)((H + 4) * Wp * C) * sizeof(T));
      for (int64_t c0 = 0; c0 < C; c0 += vl)
        CAT(CAT(wdx_image, SFX), avx512)(a->gp + n * PH * PW * O, a->code + n * PH * PW * O, PH, PW, O, a->wt, C,
                                         c0, img, Wp);
      for (int64_t ih = 0; ih < H; ih++)
        memcpy(a->dx + (n * H + ih) * W * C, img + ((ih + 2) * Wp + 2) * C, (size_t)(W * C) * sizeof(T));
    }
  }
}
/* dx from the routing MaxPoolGrad src->routed's pooled values and winners; 0 (nothing written) where
 * the shapes, the CPU or the workspace do not allow it. */
static int FN(wdx)(const loom_kctx *ctx, const geom *g, const T *f, T *dx, const loom_epilogue *src) {
  const loom_kctx *mpg = src->routed;
  const loom_buf *GP = mpg->in[2];
  const int64_t PH = g->OH / 2, PW = g->OW / 2;
  if (!wdx_geom_ok(g, sizeof(T)) || !mpg->epi || !mpg->epi->argmax || GP->ndim != 4 || GP->dims[0] != g->N ||
      GP->dims[1] != PH || GP->dims[2] != PW || GP->dims[3] != g->O)
    return 0;
  const int64_t parts = g->N < WDW_MAX_PARTS ? g->N : WDW_MAX_PARTS;
  const size_t need = ((size_t)(25 * g->C * g->O) + (size_t)(parts * (g->H + 4) * (g->W + 4) * g->C)) * sizeof(T);
  if (!ctx->ws || ctx->ws_size < need) return 0;
  FN(wdx_args) a = {g, f, GP->data, mpg->epi->argmax, ctx->ws, (T *)ctx->ws + 25 * g->C * g->O, dx,
                    (g->N + parts - 1) / parts};
  loom__parallel_for(ctx->pool, g->O, 8, FN(wdx_wt_range), &a);
  loom__parallel_for(ctx->pool, parts, 1, FN(wdx_range), &a);
  return 1;
}
#else
static int FN(wdx)(const loom_kctx *ctx, const geom *g, const T *f, T *dx, const loom_epilogue *src) {
  (void)ctx, (void)g, (void)f, (void)dx, (void)src;
  return 0; /* the winners' image loops are AVX-512's */
}
#endif

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
    geom t;
    geom_transposed(&g, &t);
    int wino = wino_ok(&t);
    size_t need = wbytes + (wino ? (size_t)wino_ws_elems(&t) * sizeof(T) : 0);
    if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
    /* dy made image by image from a routing MaxPoolGrad's pooled values (engine/fuse.c checked
     * loom__conv_dx_routable), or dx from them directly (wdx) */
    const loom_epilogue *src = ctx->epi && ctx->epi->route ? ctx->epi : NULL;
    if (src && FN(wdx)(ctx, &g, f, dx, src)) return LOOM_OK;
    T *wt = ctx->ws;
    FN(flip_args) fa = {&g, f, wt};
    loom__parallel_for(ctx->pool, g.KH * g.KW, 4, FN(flip_range), &fa);
    if (src && !wino)
      return loom_status_set(ctx->st, LOOM_INTERNAL, "Conv2DBackpropInput: a routed dy without the Winograd loops");
    if (wino) FN(wino_fwd)(ctx, &t, dy, wt, dx, wt + g.K * g.O, NULL, src);
    else FN(direct_fwd)(ctx, &t, dy, wt, dx, NULL, 0, 0, NULL);
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

/* The small-window filter gradient's partitions added in a fixed order into df: the result does not
 * depend on the threads. */
static void FN(dw_parts_sum)(const geom *g, const T *part, int64_t P, int64_t K6, T *df) {
  const int64_t KO = g->K * g->O, PO = K6 * g->O;
  for (int64_t i = 0; i < KO; i++) {
    T acc = part[i];
    for (int64_t q = 1; q < P; q++) acc += part[q * PO + i];
    df[i] = acc;
  }
}

/* Task q: partition q of the filter gradient of loom__conv_dw_images, each image of dy it covers
 * made into the partition's scratch, then its pixels added (the same additions, in the same order,
 * as the kernel's pass over a whole dy). */
typedef struct {
  FN(dwp_args) d;
  const FN(conv_isa) *isa;
  loom_dy_image_fn make;
  void *arg;
  T *scratch; /* one image of dy per partition */
} FN(dwi_args);
LOOM_HOT static void FN(dw_images_range)(void *p, int64_t b, int64_t e) {
  const FN(dwi_args) *a = p;
  const geom *g = a->d.g;
  const int64_t HW = g->OH * g->OW, K6 = dw_rows(g), O = g->O;
  for (int64_t q = b; q < e; q++) {
    T *img = a->scratch + q * HW * O, *df = a->d.part + q * K6 * O;
    int64_t p0 = q * a->d.per, p1 = p0 + a->d.per < g->M ? p0 + a->d.per : g->M;
    if (p0 >= p1) memset(df, 0, (size_t)(K6 * O) * sizeof(T));
    for (int64_t r = p0; r < p1;) {
      int64_t n = r / HW, s = n * HW, end = s + HW < p1 ? s + HW : p1;
      a->make(a->arg, n, img, r == s);
      FN(dwp_args) d = a->d;
      d.dy = img;
      d.dy0 = s;
      a->isa->dwp_pixels(&d, df, r, end, r > p0);
      r = end;
    }
  }
}

loom_code FN(loom__conv_dw_images)(const loom_kctx *ctx, const loom_kctx *dw, loom_dy_image_fn make, void *arg) {
  const loom_buf *X = dw->in[0], *DY = dw->in[1];
  loom_buf *DF = dw->out[0];
  size_t need = loom__conv_dw_images_ws(dw->attrs, X, DY, DF);
  if (!need)
    return loom_status_set(ctx->st, LOOM_INTERNAL, "a folded filter gradient of this geometry is not supported");
  if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
  geom g;
  geom_init(&g, dw->attrs, X->dims, DF->dims, DY->dims);
  const int64_t P = dw_parts(&g), K6 = dw_rows(&g);
  pad_plan pp = pad_plan_of(&g, sizeof(T), 2);
  size_t parts = (size_t)P * (size_t)K6 * (size_t)g.O * sizeof(T);
  const T *xp = FN(pad_input)(ctx, &g, &pp, X->data, (T *)((char *)ctx->ws + parts));
  FN(dwi_args) a = {{&g, X->data, NULL, ctx->ws, (g.M + P - 1) / P, NULL, xp, pp.Hs, pp.Ws, 0},
                    FN(isa_for)(g.O), make, arg, (T *)((char *)ctx->ws + dw_images_scratch(&g, sizeof(T)))};
  loom__parallel_for(ctx->pool, P, 1, FN(dw_images_range), &a);
  FN(dw_parts_sum)(&g, a.d.part, P, K6, DF->data);
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
  if (wino_ok(&g)) {
    size_t need = (size_t)wino_dw_ws_elems(&g) * sizeof(T);
    if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
    FN(wino_dw)(ctx, &g, x, dy, df, ctx->ws);
    return LOOM_OK;
  }
  if (g.direct_dw) {
    const int64_t P = dw_parts(&g), K6 = dw_rows(&g);
    pad_plan pp = pad_plan_of(&g, sizeof(T), 2);
    size_t parts = (size_t)P * (size_t)K6 * (size_t)g.O * sizeof(T), need = parts + pad_bytes(&g, &pp, sizeof(T));
    if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
    const T *xp = pp.mode ? FN(pad_input)(ctx, &g, &pp, x, (T *)((char *)ctx->ws + parts)) : NULL;
    const FN(conv_isa) *isa = FN(isa_for)(g.O);
    FN(dwp_args) a = {&g, x, dy, ctx->ws, (g.M + P - 1) / P, isa->dw_gemm_range, xp, pp.Hs, pp.Ws, 0};
    loom__parallel_for(ctx->pool, P, 1, xp ? isa->dwp_range : FN(direct_dw_part), &a);
    FN(dw_parts_sum)(&g, a.part, P, K6, df);
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
    loom__parallel_for(ctx->pool, (g.K + 5) / 6, 1, FN(isa_for)(g.O)->dw_gemm_range, &a);
  }
  return LOOM_OK;
}

#endif
