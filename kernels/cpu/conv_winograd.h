/* Winograd convolution on the CPU for 5x5 windows at stride and dilation 1:
 * F(2x2, 5x5) for the forward pass (and the input gradient, the forward pass
 * of the flipped filter), F(5x5, 2x2) for the filter gradient (below).
 * Included by kernels/cpu/conv.c in its template body (T, SFX, FN, geom, the
 * ISA tables FN(isa_for)(channels)).
 *
 * Each 2x2 block of output pixels ("tile") of an image reads a 6x6 window
 * d; with the points 0, 1, -1, 2, -2 and infinity,
 *   Y = A^T [ (G g G^T) (.) (B^T d B) ] A     ((.) elementwise, per channel)
 * costs 36 multiplications per (input, output) channel pair where the direct
 * loops spend 100. The tile transforms (kernels/cpu/conv_tiles.h: wino_in,
 * wino_out, wino_dy) run over vectors of channels with the intermediate rows
 * in registers; the 36 elementwise products summed over input channels are
 * 36 matrix products (tiles x C) x (C x O), done by the register tiles of the
 * direct loops. Tiles are processed WINO_TB at a time in a fixed number of
 * parts (each with its own scratch in the workspace), so the result does not
 * depend on the threads. The tiles read a zero-padded copy of the input (the
 * workspace's end), so that no window needs bounds. */

/* The filter transform G applied to 5 rows (row k at s + k*ss) of n values:
 * 6 rows written to o + i*os. */
static void FN(wino_g)(const T *s, int64_t ss, T *o, int64_t os, int64_t n) {
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

typedef struct {
  const geom *g;
  const T *x, *u; /* the zero-padded input (Hs x Ws per image); transformed filter U[36][C][O] */
  int64_t Hs, Ws;
  T *y, *scratch; /* output; the parts' scratch (wino_part_elems each) */
  int64_t th, tw, ntiles, per; /* tiles per column and row of an image, in all, per part */
} FN(wino_args);

/* Task q: the tiles of part q. */
LOOM_HOT static void FN(wino_part)(void *p, int64_t b, int64_t e) {
  const FN(wino_args) *a = p;
  const geom *g = a->g;
  const int64_t C = g->C, O = g->O;
  /* the input transform runs over vectors of C channels, the products and the output transform over O */
  const FN(conv_isa) *isa_c = FN(isa_for)(C), *isa = FN(isa_for)(O);
  for (int64_t q = b; q < e; q++) {
    T *v = a->scratch + q * wino_part_elems(C, O); /* V[36][WINO_TB][C] */
    T *mm = v + 36 * WINO_TB * C;                  /* M[36][WINO_TB][O] */
    int64_t t0 = q * a->per, tend = t0 + a->per < a->ntiles ? t0 + a->per : a->ntiles;
    for (int64_t tb = t0; tb < tend; tb += WINO_TB) {
      int64_t nb = tend - tb < WINO_TB ? tend - tb : WINO_TB;
      /* input transform of each tile: V[xi][i][c] */
      for (int64_t i = 0; i < nb; i++) {
        int64_t t = tb + i, n = t / (a->th * a->tw), r = t - n * a->th * a->tw, ty = r / a->tw, tx = r - ty * a->tw;
        const T *src = a->x + ((n * a->Hs + 2 * ty) * a->Ws + 2 * tx) * C; /* the 6x6 window */
        const int64_t rs = a->Ws * C;
        isa_c->wino_in(src, rs, C, v + i * C, WINO_TB * C); /* V[xi][i][:] */
      }
      /* the 36 products M[xi] = V[xi] (nb x C) x U[xi] (C x O) */
      for (int64_t xi = 0; xi < 36; xi++) {
        FN(gemm_args) ga = {v + xi * WINO_TB * C, a->u + xi * C * O, mm + xi * WINO_TB * O, C, O, C};
        isa->gemm_nn_range(&ga, 0, nb);
      }
      /* output transform: Y = A^T M A, clipped at the image's last row and column */
      for (int64_t i = 0; i < nb; i++) {
        int64_t t = tb + i, n = t / (a->th * a->tw), r = t - n * a->th * a->tw, ty = r / a->tw, tx = r - ty * a->tw;
        if (2 * ty + 1 < g->OH && 2 * tx + 1 < g->OW) { /* the whole 2x2 block: written in place */
          isa->wino_out(mm + i * O, WINO_TB * O, O, a->y + ((n * g->OH + 2 * ty) * g->OW + 2 * tx) * O, g->OW * O);
          continue;
        }
        T out[2][2 * WINO_MAX_O];
        isa->wino_out(mm + i * O, WINO_TB * O, O, out[0], 2 * WINO_MAX_O);
        for (int64_t oy = 0; oy < 2; oy++) {
          int64_t oh = 2 * ty + oy;
          if (oh >= g->OH) break;
          for (int64_t ox = 0; ox < 2; ox++) {
            int64_t ow = 2 * tx + ox;
            if (ow >= g->OW) break;
            memcpy(a->y + ((n * g->OH + oh) * g->OW + ow) * O, out[oy] + ox * O, (size_t)O * sizeof(T));
          }
        }
      }
    }
  }
}

/* y = conv(x, w) by Winograd F(2x2, 5x5); ws holds wino_ws_elems(g) values. */
static void FN(wino_fwd)(const loom_kctx *ctx, const geom *g, const T *x, const T *w, T *y, T *ws) {
  const int64_t C = g->C, O = g->O;
  T *u = ws; /* U[36][C][O] = G w G^T per (c, o) */
  T tmp[6 * 5 * WINO_MAX_O];
  for (int64_t c = 0; c < C; c++) {
    /* w[kh][kw][c][:] rows: first over kh (tmp[i][kw][:]), then over kw */
    for (int64_t kw = 0; kw < 5; kw++) FN(wino_g)(w + (kw * C + c) * O, 5 * C * O, tmp + kw * O, 5 * O, O);
    for (int64_t i = 0; i < 6; i++) FN(wino_g)(tmp + i * 5 * O, O, u + (i * 6 * C + c) * O, C * O, O);
  }
  FN(wino_args) a = {g, NULL, u, 0, 0, y, ws + 36 * C * O, 0, 0, 0, 0};
  a.th = (g->OH + 1) / 2;
  a.tw = (g->OW + 1) / 2;
  /* the input, zero-padded to the tiles' windows (rows and columns [-pt, 2*th + 4 - pt) and
   * [-pl, 2*tw + 4 - pl)), after the parts' scratch */
  pad_plan pp = {2, 2 * a.th + 4, 2 * a.tw + 4};
  a.Hs = pp.Hs;
  a.Ws = pp.Ws;
  a.x = FN(pad_input)(ctx, g, &pp, x, a.scratch + wino_parts(g) * wino_part_elems(C, O));
  a.ntiles = g->N * a.th * a.tw;
  int64_t P = wino_parts(g);
  a.per = (a.ntiles + P - 1) / P;
  loom__parallel_for(ctx->pool, P, 1, FN(wino_part), &a);
}

/* ---- the filter gradient ----
 * dW = sum over the 2x2 blocks of dy of the correlation of the block with
 * its 6x6 input window, which is F(5x5, 2x2):
 *   dW = G^T [ sum over tiles of (A dy_tile A^T) (.) (B^T d B) ] G
 * (the transposed roles of the forward pass's matrices). The sum over tiles
 * is 36 products (Cp x tiles) x (tiles x O) on the filter gradient's
 * register tiles (dw_gemm_range; C rounded up to whole tiles of 6 rows with
 * zero columns), accumulated per part and added in a fixed order. */

/* G^T applied to 6 rows (row j at s + j*ss) of n values: 5 rows to o + k*os. */
static void FN(wino_gt)(const T *restrict s, int64_t ss, T *restrict o, int64_t os, int64_t n) {
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

typedef struct {
  const geom *g;
  const T *x, *dy; /* the zero-padded input (Hs x Ws per image); dy */
  int64_t Hs, Ws;
  T *scratch, *msum; /* the parts' scratch; their sums M[36][Cp][O] */
  int64_t th, tw, ntiles, per, Cp;
} FN(wino_dw_args);

/* Task q: the sums of part q's tiles. */
LOOM_HOT static void FN(wino_dw_part)(void *p, int64_t b, int64_t e) {
  const FN(wino_dw_args) *a = p;
  const geom *g = a->g;
  const int64_t C = g->C, O = g->O, Cp = a->Cp;
  /* the input transform runs over vectors of C channels, dy's transform and the products over O */
  const FN(conv_isa) *isa_c = FN(isa_for)(C), *isa = FN(isa_for)(O);
  for (int64_t q = b; q < e; q++) {
    T *v = a->scratch + q * wino_dw_part_elems(Cp, O); /* V[36][WINO_TB][Cp] */
    T *dd = v + 36 * WINO_TB * Cp;                       /* D[36][WINO_TB][O] */
    T *mq = a->msum + q * 36 * Cp * O;
    memset(mq, 0, (size_t)(36 * Cp * O) * sizeof(T));
    if (Cp > C) /* the rows' padding columns stay zero */
      for (int64_t r = 0; r < 36 * WINO_TB; r++)
        for (int64_t c = C; c < Cp; c++) v[r * Cp + c] = 0;
    T zero[WINO_MAX_O] = {0};
    int64_t t0 = q * a->per, tend = t0 + a->per < a->ntiles ? t0 + a->per : a->ntiles;
    for (int64_t tb = t0; tb < tend; tb += WINO_TB) {
      int64_t nb = tend - tb < WINO_TB ? tend - tb : WINO_TB;
      for (int64_t i = 0; i < nb; i++) {
        int64_t t = tb + i, n = t / (a->th * a->tw), r = t - n * a->th * a->tw, ty = r / a->tw, tx = r - ty * a->tw;
        const T *src = a->x + ((n * a->Hs + 2 * ty) * a->Ws + 2 * tx) * C;
        const int64_t rs = a->Ws * C;
        isa_c->wino_in(src, rs, C, v + i * Cp, WINO_TB * Cp); /* V[xi][i][:] */
        /* dy's 2x2 block (zero past the last row and column): columns, then rows */
        const T *yr[2][2];
        for (int64_t oy = 0; oy < 2; oy++)
          for (int64_t ox = 0; ox < 2; ox++) {
            int64_t oh = 2 * ty + oy, ow = 2 * tx + ox;
            yr[oy][ox] = oh < g->OH && ow < g->OW ? a->dy + ((n * g->OH + oh) * g->OW + ow) * O : zero;
          }
        isa->wino_dy(yr[0][0], yr[0][1], yr[1][0], yr[1][1], O, dd + i * O, WINO_TB * O); /* D[xi][i][:] */
      }
      for (int64_t xi = 0; xi < 36; xi++) {
        FN(dwg_args) ga = {v + xi * WINO_TB * Cp, dd + xi * WINO_TB * O, mq + xi * Cp * O, Cp, O, nb};
        isa->dw_gemm_range(&ga, 0, Cp / 6);
      }
    }
  }
}

/* dw = the filter gradient by Winograd F(5x5, 2x2); ws holds wino_dw_ws_elems(g) values. */
static void FN(wino_dw)(const loom_kctx *ctx, const geom *g, const T *x, const T *dy, T *dw, T *ws) {
  const int64_t C = g->C, O = g->O, Cp = wino_dw_cp(C), P = wino_parts(g);
  FN(wino_dw_args) a = {g, NULL, dy, 0, 0, ws, ws + P * wino_dw_part_elems(Cp, O), 0, 0, 0, 0, Cp};
  a.th = (g->OH + 1) / 2;
  a.tw = (g->OW + 1) / 2;
  a.ntiles = g->N * a.th * a.tw;
  a.per = (a.ntiles + P - 1) / P;
  pad_plan pp = {2, 2 * a.th + 4, 2 * a.tw + 4};
  a.Hs = pp.Hs;
  a.Ws = pp.Ws;
  a.x = FN(pad_input)(ctx, g, &pp, x, a.msum + P * 36 * Cp * O);
  loom__parallel_for(ctx->pool, P, 1, FN(wino_dw_part), &a);
  /* the parts' sums in a fixed order, then dW[kh][kw][c][:] = (G^T M G)[kh][kw] per input channel */
  T *m = a.msum;
  for (int64_t q = 1; q < P; q++) {
    const T *mq = m + q * 36 * Cp * O;
    for (int64_t i = 0; i < 36 * Cp * O; i++) m[i] += mq[i];
  }
  T tmp[6 * 5 * WINO_MAX_O];
  for (int64_t c = 0; c < C; c++) {
    /* rows a: tmp[a][kw][:] = sum over b of G[b][kw] M[a*6 + b][c][:]; then over a */
    for (int64_t r6 = 0; r6 < 6; r6++) FN(wino_gt)(m + (r6 * 6 * Cp + c) * O, Cp * O, tmp + r6 * 5 * O, O, O);
    for (int64_t kw = 0; kw < 5; kw++) FN(wino_gt)(tmp + kw * O, 5 * O, dw + (kw * C + c) * O, 5 * C * O, O);
  }
}
