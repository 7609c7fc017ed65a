/* Winograd convolution on the CPU for 5x5 windows at stride and dilation 1:
 * F(m x m, 5x5) for the forward pass (and the input gradient, the forward
 * pass of the flipped filter), F(5x5, m x m) for the filter gradient (below),
 * with output tiles of m = 4 or m = 2 pixels a side (conv.c's wino_m: 4
 * unless the output, rounded up to whole 4x4 tiles, needs more products).
 * Included by kernels/cpu/conv.c in its template body (T, SFX, FN, geom, the
 * ISA tables FN(isa_for)(channels)).
 *
 * Each m x m block of output pixels ("tile") of an image reads an
 * (m+4) x (m+4) window d, and
 *   Y = A^T [ (G g G^T) (.) (B^T d B) ] A     ((.) elementwise, per channel)
 * costs (m+4)^2 multiplications per (input, output) channel pair where the
 * direct loops spend 25 m^2: 64 per 16 outputs for m = 4 (points 0, 1, -1,
 * 2, -2, 1/2, -1/2, infinity), 36 per 4 outputs for m = 2 (points 0, 1, -1,
 * 2, -2, infinity). The matrices' entries are exact in binary except G's
 * (ninths and 45ths for m = 4, multiplied by as rounded to T; m = 2 divides
 * by 6, 12, 24 and 3); the f32 results
 * stay within ~1e-5 of the largest element for either size
 * (tests/test_nn.c's winograd_4x4_tiles gives the figures). The tile transforms
 * (kernels/cpu/conv_tiles.h: wino_in, wino_out, wino_dy and their wino4_
 * forms) run over vectors of channels, the intermediate rows in registers
 * (m = 2) or a small stack array (m = 4, whose elements are stored in order
 * through one pointer); the (m+4)^2 elementwise products summed over input
 * channels are (m+4)^2 matrix products (tiles x C) x (C x O), done by the
 * register tiles of the direct loops. Tiles are processed WINO_TB (filter
 * gradient: WINO_DW_TB) at a time in a fixed number of parts (each with its
 * own scratch in the workspace), so the result does not depend on the
 * threads. A part copies each image it reaches into a zero-padded image of
 * its own (in cache; the border written once), so that no window needs
 * bounds; tiles past the output's last row or column compute
 * values that are not written. */

/* The filter transforms: G applied to 5 rows (row k at s + k*ss) of n values, (m+4) rows written to
 * o + i*os. m = 2: */
LOOM_HOT static void FN(wino_g)(const T *s, int64_t ss, T *o, int64_t os, int64_t n) {
  for (int64_t c = 0; c < n; c++) {
    T g0 = s[c], g1 = s[ss + c], g2 = s[2 * ss + c], g3 = s[3 * ss + c], g4 = s[4 * ss + c];
    o[c] = g0 / 4;
    o[os + c] = -(g0 + g1 + g2 + g3 + g4) / 6;
    o[2 * os + c] = (-g0 + g1 - g2 + g3 - g4) / 6;
    o[3 * os + c] = g0 / 24 + g1 / 12 + g2 / 6 + g3 / 3 + g4 * 2 / 3;
    o[4 * os + c] = g0 / 24 - g1 / 12 + g2 / 6 - g3 / 3 + g4 * 2 / 3;
    o[5 * os + c] = g4;
  }
}

/* m = 4 (G's rows at the points 0, 1, -1, 2, -2, 1/2, -1/2, infinity, each divided by the product of
 * its point's differences to the others): */
LOOM_HOT static void FN(wino4_g)(const T *s, int64_t ss, T *o, int64_t os, int64_t n) {
  /* the entries rounded to T once (a division per element costs as much as the rest) */
  const T k2_9 = (T)(2.0 / 9), k1_90 = (T)(1.0 / 90), k1_45 = (T)(1.0 / 45), k2_45 = (T)(2.0 / 45),
          k4_45 = (T)(4.0 / 45), k8_45 = (T)(8.0 / 45), k16_45 = (T)(16.0 / 45), k32_45 = (T)(32.0 / 45);
  for (int64_t c = 0; c < n; c++) {
    T g0 = s[c], g1 = s[ss + c], g2 = s[2 * ss + c], g3 = s[3 * ss + c], g4 = s[4 * ss + c];
    T e1 = g0 + g2 + g4, d1 = g1 + g3;
    T e2 = g0 * k1_90 + g2 * k2_45 + g4 * k8_45, d2 = g1 * k1_45 + g3 * k4_45;
    T e3 = g0 * k32_45 + g2 * k8_45 + g4 * k2_45, d3 = g1 * k16_45 + g3 * k4_45;
    o[c] = g0;
    o[os + c] = -(e1 + d1) * k2_9;
    o[2 * os + c] = -(e1 - d1) * k2_9;
    o[3 * os + c] = e2 + d2;
    o[4 * os + c] = e2 - d2;
    o[5 * os + c] = e3 + d3;
    o[6 * os + c] = e3 - d3;
    o[7 * os + c] = g4;
  }
}

typedef struct {
  const geom *g;
  const T *x, *u; /* the input; the transformed filter U[xis][C][O] */
  int64_t Hs, Ws; /* the padded image's rows and columns (wino_pad_elems) */
  T *y, *scratch; /* output; the parts' scratch (wino_part_elems each) */
  int64_t m, th, tw, ntiles, per; /* tile size; tiles per column and row of an image, in all, per part */
  const loom_epilogue *epi;       /* folded steps (kernels/kernel.h) applied to each block written, or NULL */
  const loom_epilogue *src;       /* x's images made by src->route (kernels/kernel.h: routed), or NULL */
} FN(wino_args);

/* The folded steps on the rows x cols block of outputs at yt (rows rs apart; image n, first row oh0
 * and column ow0, both even), as BiasAdd's, Relu's and a 2x2 stride-2 MaxPool's kernels compute them. */
LOOM_FORCE_INLINE void FN(wino_block_epi)(const FN(wino_args) *a, T *yt, int64_t rs, int64_t n, int64_t oh0,
                                          int64_t ow0, int64_t rows, int64_t cols) {
  const geom *g = a->g;
  const int64_t O = g->O;
  for (int64_t oy = 0; oy < rows; oy++) FN(epi_rows)(a->epi, yt + oy * rs, cols, O);
  if (!a->epi->pool) return;
  T *pool = (T *)a->epi->pool->data + ((n * (g->OH / 2) + oh0 / 2) * (g->OW / 2) + ow0 / 2) * O;
  uint8_t *code = a->epi->argmax ? (uint8_t *)a->epi->argmax + (pool - (T *)a->epi->pool->data) : NULL;
  for (int64_t oy = 0; oy + 1 < rows; oy += 2, pool += (g->OW / 2) * O)
    if (code) {
      FN(pool_pair_route)(yt + oy * rs, yt + (oy + 1) * rs, cols, O, pool, code);
      code += (g->OW / 2) * O;
    } else {
      FN(pool_pair)(yt + oy * rs, yt + (oy + 1) * rs, cols, O, pool);
    }
}

/* Tile t's image n and first output row and column. */
static inline void FN(wino_tile)(int64_t t, int64_t th, int64_t tw, int64_t m, int64_t *n, int64_t *oh,
                                 int64_t *ow) {
  *n = t / (th * tw);
  int64_t r = t - *n * th * tw, ty = r / tw;
  *oh = m * ty;
  *ow = m * (r - ty * tw);
}

/* Task q: the tiles of part q. */
LOOM_HOT static void FN(wino_part)(void *p, int64_t b, int64_t e) {
  const FN(wino_args) *a = p;
  const geom *g = a->g;
  const int64_t C = g->C, O = g->O, m = a->m, X = wino_xis(m);
  /* the input transform runs over vectors of C channels, the products and the output transform over O */
  const FN(conv_isa) *isa_c = FN(isa_for)(C), *isa = FN(isa_for)(O);
  void (*tin)(const T *, int64_t, int64_t, T *, int64_t) = m == 4 ? isa_c->wino4_in : isa_c->wino_in;
  T blk[4 * 4 * WINO_MAX_O];
  const int own_block = a->epi && a->epi->argmax && a->epi->pool;
  for (int64_t q = b; q < e; q++) {
    T *v = a->scratch + q * wino_part_elems(g); /* V[X][WINO_TB][C] */
    T *mm = v + X * WINO_TB * C;                /* M[X][WINO_TB][O] */
    T *img = mm + X * WINO_TB * O;              /* the padded image of the tiles being transformed */
    int64_t cur = -1;
    int64_t t0 = q * a->per, tend = t0 + a->per < a->ntiles ? t0 + a->per : a->ntiles;
    for (int64_t tb = t0; tb < tend; tb += WINO_TB) {
      int64_t nb = tend - tb < WINO_TB ? tend - tb : WINO_TB;
      /* input transform of each tile: V[xi][i][c] */
      for (int64_t i = 0; i < nb; i++) {
        int64_t n, oh, ow;
        FN(wino_tile)(tb + i, a->th, a->tw, m, &n, &oh, &ow);
        if (n != cur) { /* the border is written once per part: the images only change inside it */
          if (!a->src) {
            FN(pad_image)(g, a->x + n * g->H * g->W * C, img, a->Hs, a->Ws, cur < 0);
          } else { /* the whole image routed into the interior (loom__conv_dx_routable) */
            if (cur < 0) memset(img, 0, (size_t)(a->Hs * a->Ws * C) * sizeof(T));
            a->src->route(a->src->routed, n, img + (g->pt * a->Ws + g->pl) * C, a->Ws * C);
          }
          cur = n;
        }
        tin(img + (oh * a->Ws + ow) * C, a->Ws * C, C, v + i * C, WINO_TB * C);
      }
      /* the X products M[xi] = V[xi] (nb x C) x U[xi] (C x O) */
      for (int64_t xi = 0; xi < X; xi++) {
        FN(gemm_args) ga = {v + xi * WINO_TB * C, a->u + xi * C * O, mm + xi * WINO_TB * O, C, O, C};
        isa->gemm_nn_range(&ga, 0, nb);
      }
      /* output transform: Y = A^T M A, clipped at the image's last row and column (into a block of
       * the part's when the pool's routes are recorded: nothing reads y then, engine/fuse.c) */
      for (int64_t i = 0; i < nb; i++) {
        int64_t n, oh0, ow0;
        FN(wino_tile)(tb + i, a->th, a->tw, m, &n, &oh0, &ow0);
        T *yt = a->y + ((n * g->OH + oh0) * g->OW + ow0) * O;
        int64_t ys = g->OW * O;
        if (own_block) {
          yt = blk;
          ys = m * O;
        }
        int64_t rows = g->OH - oh0 < m ? g->OH - oh0 : m, cols = g->OW - ow0 < m ? g->OW - ow0 : m;
        if (m == 4) {
          isa->wino4_out(mm + i * O, WINO_TB * O, O, yt, ys, rows, cols);
        } else if (rows == m && cols == m) { /* the whole block: written in place */
          isa->wino_out(mm + i * O, WINO_TB * O, O, yt, ys);
        } else {
          T out[2][2 * WINO_MAX_O];
          isa->wino_out(mm + i * O, WINO_TB * O, O, out[0], 2 * WINO_MAX_O);
          for (int64_t oy = 0; oy < rows; oy++) memcpy(yt + oy * ys, out[oy], (size_t)(cols * O) * sizeof(T));
        }
        if (a->epi) FN(wino_block_epi)(a, yt, ys, n, oh0, ow0, rows, cols);
      }
    }
  }
}

/* Tasks c: U[X][c][O] = G w[.][.][c][:] G^T, the transformed filter of input channel c. */
typedef struct {
  const geom *g;
  const T *w;
  T *u;
} FN(wino_u_args);
LOOM_HOT static void FN(wino_u_range)(void *p, int64_t b, int64_t e) {
  const FN(wino_u_args) *a = p;
  const int64_t C = a->g->C, O = a->g->O, m = wino_m(a->g), R = m + 4;
  void (*gt)(const T *, int64_t, T *, int64_t, int64_t) = m == 4 ? FN(wino4_g) : FN(wino_g);
  T tmp[8 * 5 * WINO_MAX_O];
  for (int64_t c = b; c < e; c++) {
    /* w[kh][kw][c][:] rows: first over kh (tmp[i][kw][:]), then over kw */
    for (int64_t kw = 0; kw < 5; kw++) gt(a->w + (kw * C + c) * O, 5 * C * O, tmp + kw * O, 5 * O, O);
    for (int64_t i = 0; i < R; i++) gt(tmp + i * 5 * O, O, a->u + (i * R * C + c) * O, C * O, O);
  }
}

/* y = conv(x, w) by Winograd F(m x m, 5x5), m = wino_m(g), then epi's steps (or NULL); ws holds
 * wino_ws_elems(g) values. */
static void FN(wino_fwd)(const loom_kctx *ctx, const geom *g, const T *x, const T *w, T *y, T *ws,
                         const loom_epilogue *epi, const loom_epilogue *src) {
  const int64_t C = g->C, O = g->O, m = wino_m(g), X = wino_xis(m);
  T *u = ws; /* U[X][C][O] = G w G^T per (c, o), the input channels over the threads */
  FN(wino_u_args) ua = {g, w, u};
  loom__parallel_for(ctx->pool, C, 4, FN(wino_u_range), &ua);
  FN(wino_args) a = {g, x, u, 0, 0, y, ws + X * C * O, m, 0, 0, 0, 0, epi, src};
  a.th = (g->OH + m - 1) / m;
  a.tw = (g->OW + m - 1) / m;
  /* an image zero-padded to the tiles' windows: rows [-pt, m*th + 4 - pt), columns [-pl, m*tw + 4 - pl) */
  a.Hs = m * a.th + 4;
  a.Ws = m * a.tw + 4;
  int64_t P = wino_parts(g);
  a.ntiles = g->N * a.th * a.tw;
  a.per = (a.ntiles + P - 1) / P;
  loom__parallel_for(ctx->pool, P, 1, FN(wino_part), &a);
}

/* ---- the filter gradient ----
 * dW = sum over the m x m blocks of dy of the correlation of the block with
 * its (m+4) x (m+4) input window, which is F(5x5, m x m):
 *   dW = G^T [ sum over tiles of (A dy_tile A^T) (.) (B^T d B) ] G
 * (the transposed roles of the forward pass's matrices). The sum over tiles
 * is (m+4)^2 products (Cp x tiles) x (tiles x O) on the filter gradient's
 * register tiles (dw_gemm_range; C rounded up to whole tiles of 6 rows with
 * zero columns), accumulated per part and added in a fixed order. */

/* G^T applied to m+4 rows (row j at s + j*ss) of n values: 5 rows to o + k*os. m = 2: */
LOOM_HOT static void FN(wino_gt)(const T *restrict s, int64_t ss, T *restrict o, int64_t os, int64_t n) {
  for (int64_t c = 0; c < n; c++) {
    T s0 = s[c], s1 = s[ss + c], s2 = s[2 * ss + c], s3 = s[3 * ss + c], s4 = s[4 * ss + c], s5 = s[5 * ss + c];
    T p = s1 + s2, m = s2 - s1, p34 = s3 + s4, m34 = s3 - s4;
    o[c] = s0 / 4 - p / 6 + p34 / 24;
    o[os + c] = m / 6 + m34 / 12;
    o[2 * os + c] = (p34 - p) / 6;
    o[3 * os + c] = m / 6 + m34 / 3;
    o[4 * os + c] = -p / 6 + p34 * 2 / 3 + s5;
  }
}
/* m = 4: */
LOOM_HOT static void FN(wino4_gt)(const T *restrict s, int64_t ss, T *restrict o, int64_t os, int64_t n) {
  const T k2_9 = (T)(2.0 / 9), k1_90 = (T)(1.0 / 90), k1_45 = (T)(1.0 / 45), k2_45 = (T)(2.0 / 45),
          k4_45 = (T)(4.0 / 45), k8_45 = (T)(8.0 / 45), k16_45 = (T)(16.0 / 45), k32_45 = (T)(32.0 / 45);
  for (int64_t c = 0; c < n; c++) {
    T s0 = s[c], s1 = s[ss + c], s2 = s[2 * ss + c], s3 = s[3 * ss + c], s4 = s[4 * ss + c];
    T s5 = s[5 * ss + c], s6 = s[6 * ss + c], s7 = s[7 * ss + c];
    T p1 = s1 + s2, m1 = s1 - s2, p2 = s3 + s4, m2 = s3 - s4, p3 = s5 + s6, m3 = s5 - s6;
    o[c] = s0 - p1 * k2_9 + p2 * k1_90 + p3 * k32_45;
    o[os + c] = -m1 * k2_9 + m2 * k1_45 + m3 * k16_45;
    o[2 * os + c] = -p1 * k2_9 + p2 * k2_45 + p3 * k8_45;
    o[3 * os + c] = -m1 * k2_9 + (m2 + m3) * k4_45;
    o[4 * os + c] = -p1 * k2_9 + p2 * k8_45 + p3 * k2_45 + s7;
  }
}

typedef struct {
  const geom *g;
  const T *x, *dy; /* the input; dy */
  int64_t Hs, Ws;   /* the padded image's rows and columns */
  T *scratch, *msum; /* the parts' scratch; their sums M[xis][Cp][O] */
  int64_t m, th, tw, ntiles, per, Cp;
} FN(wino_dw_args);

/* Task q: the sums of part q's tiles. */
LOOM_HOT static void FN(wino_dw_part)(void *p, int64_t b, int64_t e) {
  const FN(wino_dw_args) *a = p;
  const geom *g = a->g;
  const int64_t C = g->C, O = g->O, Cp = a->Cp, m = a->m, X = wino_xis(m);
  /* the input transform runs over vectors of C channels, dy's transform and the products over O */
  const FN(conv_isa) *isa_c = FN(isa_for)(C), *isa = FN(isa_for)(O);
  void (*tin)(const T *, int64_t, int64_t, T *, int64_t) = m == 4 ? isa_c->wino4_in : isa_c->wino_in;
  for (int64_t q = b; q < e; q++) {
    T *v = a->scratch + q * wino_dw_part_elems(g); /* V[X][WINO_DW_TB][Cp] */
    T *dd = v + X * WINO_DW_TB * Cp;                   /* D[X][WINO_DW_TB][O] */
    T *img = dd + X * WINO_DW_TB * O;                  /* the padded image of the tiles being transformed */
    int64_t cur = -1;
    T *mq = a->msum + q * X * Cp * O;
    memset(mq, 0, (size_t)(X * Cp * O) * sizeof(T));
    if (Cp > C) /* the rows' padding columns stay zero */
      for (int64_t r = 0; r < X * WINO_DW_TB; r++)
        for (int64_t c = C; c < Cp; c++) v[r * Cp + c] = 0;
    T zero[WINO_MAX_O] = {0};
    int64_t t0 = q * a->per, tend = t0 + a->per < a->ntiles ? t0 + a->per : a->ntiles;
    for (int64_t tb = t0; tb < tend; tb += WINO_DW_TB) {
      int64_t nb = tend - tb < WINO_DW_TB ? tend - tb : WINO_DW_TB;
      for (int64_t i = 0; i < nb; i++) {
        int64_t n, oh0, ow0;
        FN(wino_tile)(tb + i, a->th, a->tw, m, &n, &oh0, &ow0);
        if (n != cur) {
          FN(pad_image)(g, a->x + n * g->H * g->W * C, img, a->Hs, a->Ws, cur < 0);
          cur = n;
        }
        tin(img + (oh0 * a->Ws + ow0) * C, a->Ws * C, C, v + i * Cp, WINO_DW_TB * Cp); /* V[xi][i][:] */
        /* dy's m x m block (zero past the last row and column) */
        const T *yr[16];
        for (int64_t oy = 0; oy < m; oy++)
          for (int64_t ox = 0; ox < m; ox++) {
            int64_t oh = oh0 + oy, ow = ow0 + ox;
            yr[oy * m + ox] = oh < g->OH && ow < g->OW ? a->dy + ((n * g->OH + oh) * g->OW + ow) * O : zero;
          }
        if (m == 4) isa->wino4_dy(yr, O, dd + i * O, WINO_DW_TB * O); /* D[xi][i][:] */
        else isa->wino_dy(yr[0], yr[1], yr[2], yr[3], O, dd + i * O, WINO_DW_TB * O);
      }
      for (int64_t xi = 0; xi < X; xi++) {
        FN(dwg_args) ga = {v + xi * WINO_DW_TB * Cp, dd + xi * WINO_DW_TB * O, mq + xi * Cp * O, Cp, O, nb};
        isa->dw_gemm_range(&ga, 0, Cp / 6);
      }
    }
  }
}

/* Task t: slice t of the parts' sums, part 0's slice += those of parts 1 .. P-1 in order. */
#define WINO_SUM_SLICE 4096
typedef struct {
  T *ms;
  int64_t P, len; /* parts; values per part */
} FN(wino_sum_args);
LOOM_HOT static void FN(wino_sum_range)(void *p, int64_t b, int64_t e) {
  const FN(wino_sum_args) *a = p;
  int64_t i0 = b * WINO_SUM_SLICE, i1 = e * WINO_SUM_SLICE < a->len ? e * WINO_SUM_SLICE : a->len;
  for (int64_t q = 1; q < a->P; q++) {
    const T *mq = a->ms + q * a->len;
    for (int64_t i = i0; i < i1; i++) a->ms[i] += mq[i];
  }
}

/* dw = the filter gradient by Winograd F(5x5, m x m), m = wino_m(g); ws holds wino_dw_ws_elems(g)
 * values. */
static void FN(wino_dw)(const loom_kctx *ctx, const geom *g, const T *x, const T *dy, T *dw, T *ws) {
  const int64_t C = g->C, O = g->O, Cp = wino_dw_cp(C), P = wino_parts(g), m = wino_m(g), X = wino_xis(m),
                R = m + 4;
  FN(wino_dw_args) a = {g, x, dy, 0, 0, ws, ws + P * wino_dw_part_elems(g), m, 0, 0, 0, 0, Cp};
  a.th = (g->OH + m - 1) / m;
  a.tw = (g->OW + m - 1) / m;
  a.ntiles = g->N * a.th * a.tw;
  a.per = (a.ntiles + P - 1) / P;
  a.Hs = m * a.th + 4;
  a.Ws = m * a.tw + 4;
  loom__parallel_for(ctx->pool, P, 1, FN(wino_dw_part), &a);
  /* the parts' sums added in a fixed order (in slices over the threads), then
   * dW[kh][kw][c][:] = (G^T M G)[kh][kw] per input channel */
  T *ms = a.msum;
  FN(wino_sum_args) sa = {ms, P, X * Cp * O};
  loom__parallel_for(ctx->pool, (sa.len + WINO_SUM_SLICE - 1) / WINO_SUM_SLICE, 1, FN(wino_sum_range), &sa);
  void (*gt)(const T *restrict, int64_t, T *restrict, int64_t, int64_t) = m == 4 ? FN(wino4_gt) : FN(wino_gt);
  T tmp[8 * 5 * WINO_MAX_O];
  for (int64_t c = 0; c < C; c++) {
    /* rows a: tmp[a][kw][:] = sum over b of G[b][kw] M[a*R + b][c][:]; then over a */
    for (int64_t r = 0; r < R; r++) gt(ms + (r * R * Cp + c) * O, Cp * O, tmp + r * 5 * O, O, O);
    for (int64_t kw = 0; kw < 5; kw++) gt(tmp + kw * O, 5 * O, dw + (kw * C + c) * O, 5 * C * O, O);
  }
}
