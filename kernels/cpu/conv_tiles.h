/* Register-tiled loops of the CPU convolution for one instruction set.
 * Included by kernels/cpu/conv.c once per (element type, ISA) with:
 *   T, SFX      element type and its suffix (f32, f64)
 *   ISA         variant suffix (generic, avx2, avx512)
 *   VBYTES      vector width in bytes (16, 32, 64)
 *   TARGET      function attribute selecting the ISA (empty: the build's own)
 * and defines the table FNI(conv_isa_tab) of the parallel-for callbacks.
 *
 * Tiles are sized to the register file: 16 vector registers for SSE2/AVX2
 * (tiles of at most 12 accumulators: 6 pixels x 2 vectors, 12 x 1; plus the
 * filter vectors and a broadcast), 32 for AVX-512 (6 x 4 = 24 accumulators).
 * Every output element is still summed in the same order (window element by
 * window element), whatever the tile, so the variants differ only where one
 * contracts multiply-adds into FMAs and another cannot (SSE2). */

#define FNI(name) CAT(CAT(name, SFX), ISA)
#define VEC FNI(vec)

typedef T VEC __attribute__((vector_size(VBYTES)));
#define VL ((int64_t)(VBYTES / sizeof(T)))
/* Unaligned loads and stores (macros: passing vectors by value to functions
 * would change the ABI on targets without such registers). */
#define VLOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define VSTORE(p, v) memcpy((p), &(v), sizeof(v))

#define UNROLL _Pragma("GCC unroll 32") /* constant tiles must live in registers */
#define ROLLED _Pragma("GCC unroll 1") /* a loop whose body is big enough: one copy of its addresses */

#if VBYTES == 64
#define WIDE 1 /* 32 registers */
#define DW_NV 4 /* vectors per filter-gradient tile (6 x DW_NV accumulators) */
#else
#define WIDE 0 /* 16 registers */
#define DW_NV 2
#endif

/* PX pixels x NV vectors of output channels from c0: PX*NV accumulators; per
 * window element NV filter loads and PX broadcasts feed PX*NV FMAs. */
#define DEF_FWD_TILE(NV, PX)                                                                           \
  TARGET static void FNI(fwd_tile_##NV##_##PX)(const T *const (*src)[CONV_DIRECT_MAX_KH], int64_t KH,  \
                                               int64_t KWC, const T *w, int64_t O, int64_t c0, T *y,   \
                                               int np) {                                               \
    VEC acc[PX][NV];                                                                                   \
    UNROLL for (int i = 0; i < PX; i++) UNROLL for (int v = 0; v < NV; v++) acc[i][v] = (VEC){0};      \
    const T *wr = w + c0;                                                                              \
    for (int64_t kh = 0; kh < KH; kh++) {                                                              \
      const T *s[PX];                                                                                  \
      UNROLL for (int i = 0; i < PX; i++) s[i] = src[i][kh];                                           \
      for (int64_t j = 0; j < KWC; j++, wr += O) {                                                     \
        VEC wv[NV];                                                                                    \
        UNROLL for (int v = 0; v < NV; v++) VLOAD(wv[v], wr + v * VL);                                 \
        UNROLL for (int i = 0; i < PX; i++) {                                                          \
          const T xv = s[i][j];                                                                        \
          UNROLL for (int v = 0; v < NV; v++) acc[i][v] += xv * wv[v];                                 \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
    UNROLL for (int i = 0; i < PX; i++) {                                                              \
      if (i < np) UNROLL for (int v = 0; v < NV; v++) VSTORE(y + i * O + c0 + v * VL, acc[i][v]);      \
    }                                                                                                  \
  }
#if WIDE
DEF_FWD_TILE(1, 12)
DEF_FWD_TILE(2, 12)
DEF_FWD_TILE(3, 6)
DEF_FWD_TILE(4, 6)
#else
DEF_FWD_TILE(1, 12)
DEF_FWD_TILE(2, 6)
#endif
#undef DEF_FWD_TILE

/* Rows i < np (of 12): y[i*O + c] = sum over (kh, j) of src[i][kh][j] *
 * w[(kh*KWC + j)*O + c] for every c < O. */
TARGET static void FNI(tile_rows)(const T *const (*cs)[CONV_DIRECT_MAX_KH], int np, int64_t KH, int64_t KWC,
                                  const T *w, int64_t O, T *y) {
  const int64_t nfull = O / VL;
  int np2 = np > 6 ? np - 6 : 0;
  int64_t v = 0;
#if WIDE
  for (; v + 4 <= nfull; v += 4) {
    FNI(fwd_tile_4_6)(cs, KH, KWC, w, O, v * VL, y, np);
    if (np2) FNI(fwd_tile_4_6)(cs + 6, KH, KWC, w, O, v * VL, y + 6 * O, np2);
  }
  switch (nfull - v) {
    case 3:
      FNI(fwd_tile_3_6)(cs, KH, KWC, w, O, v * VL, y, np);
      if (np2) FNI(fwd_tile_3_6)(cs + 6, KH, KWC, w, O, v * VL, y + 6 * O, np2);
      break;
    case 2: FNI(fwd_tile_2_12)(cs, KH, KWC, w, O, v * VL, y, np); break;
    case 1: FNI(fwd_tile_1_12)(cs, KH, KWC, w, O, v * VL, y, np); break;
    default: break;
  }
#else
  for (; v + 2 <= nfull; v += 2) {
    FNI(fwd_tile_2_6)(cs, KH, KWC, w, O, v * VL, y, np);
    if (np2) FNI(fwd_tile_2_6)(cs + 6, KH, KWC, w, O, v * VL, y + 6 * O, np2);
  }
  if (v < nfull) FNI(fwd_tile_1_12)(cs, KH, KWC, w, O, v * VL, y, np);
#endif
  for (int64_t o0 = nfull * VL; o0 < O; o0++)
    for (int i = 0; i < np; i++) {
      T acc = 0;
      const T *wr = w + o0;
      for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t j = 0; j < KWC; j++, wr += O) acc += cs[i][kh][j] * *wr;
      y[i * O + o0] = acc;
    }
}

/* PX consecutive pixels of one output row in the padded input, NV vectors of
 * output channels from c0: pixel i's window row kh starts at
 * base + kh*rstep + i*STEP, a constant offset from one pointer (the
 * first layers' windows of a few values, where locating PX windows through
 * pointers costs as much as multiplying them). Same order of sums as
 * fwd_tile. */
#define DEF_ROW_TILE(NV, PX, STEP)                                                                      \
  TARGET static void FNI(row_tile_##NV##_##PX##_##STEP)(const T *base, int64_t rstep, int64_t KH,       \
                                                       int64_t KWC, const T *w, int64_t O, int64_t c0,  \
                                                       T *y) {                                           \
    VEC acc[PX][NV];                                                                                    \
    UNROLL for (int i = 0; i < PX; i++) UNROLL for (int v = 0; v < NV; v++) acc[i][v] = (VEC){0};       \
    const T *wr = w + c0;                                                                               \
    for (int64_t kh = 0; kh < KH; kh++) {                                                               \
      const T *s = base + kh * rstep;                                                                   \
      for (int64_t j = 0; j < KWC; j++, wr += O) {                                                      \
        VEC wv[NV];                                                                                     \
        UNROLL for (int v = 0; v < NV; v++) VLOAD(wv[v], wr + v * VL);                                  \
        /* opaque to the compiler: the values are broadcast from memory by the multiply-adds (else   \
         * they are kept in registers across j and shuffled, a port the multiply-adds need) */         \
        const T *sj = s + j;                                                                            \
        __asm__("" : "+r"(sj));                                                                         \
        UNROLL for (int i = 0; i < PX; i++) {                                                           \
          const T xv = sj[i * STEP];                                                                    \
          UNROLL for (int v = 0; v < NV; v++) acc[i][v] += xv * wv[v];                                  \
        }                                                                                               \
      }                                                                                                 \
    }                                                                                                   \
    UNROLL for (int i = 0; i < PX; i++) UNROLL for (int v = 0; v < NV; v++)                            \
      VSTORE(y + i * O + c0 + v * VL, acc[i][v]);                                                       \
  }
#if WIDE
#define ROW_PX 14 /* 28 accumulators at 2 vectors */
#define DEF_ROW_TILES(STEP) DEF_ROW_TILE(1, 14, STEP) DEF_ROW_TILE(2, 14, STEP)
/* STEP 1 (a single input channel), one vector of output channels, KW (3 or 5) values a window row:
 * each input value is broadcast from memory once and feeds the KW multiply-adds of the pixels whose
 * windows hold it, the row's KW filter vectors in registers (PX + KW + 1 registers; row_tile spends
 * a broadcast on every multiply-add). Pixel i adds its terms at j = i + kw for kw ascending: the
 * same sums in the same order as row_tile. */
#define DEF_ROW_REUSE(PX, KW)                                                                           \
  TARGET static void FNI(row_reuse_##PX##_##KW)(const T *base, int64_t rstep, int64_t KH, const T *w,    \
                                                int64_t O, int64_t c0, T *y) {                           \
    VEC acc[PX];                                                                                        \
    UNROLL for (int i = 0; i < PX; i++) acc[i] = (VEC){0};                                              \
    const T *wr = w + c0;                                                                               \
    for (int64_t kh = 0; kh < KH; kh++, wr += KW * O) {                                                 \
      VEC wv[KW];                                                                                       \
      UNROLL for (int k = 0; k < KW; k++) VLOAD(wv[k], wr + k * O);                                     \
      const T *s = base + kh * rstep;                                                                   \
      UNROLL for (int j = 0; j < PX + KW - 1; j++) {                                                    \
        const VEC xb = ((VEC){0} + 1) * s[j]; /* a broadcast (x * 1 is x) */                            \
        UNROLL for (int k = 0; k < KW; k++) if (j - k >= 0 && j - k < PX) acc[j - k] += xb * wv[k];     \
      }                                                                                                 \
    }                                                                                                   \
    UNROLL for (int i = 0; i < PX; i++) VSTORE(y + i * O + c0, acc[i]);                                 \
  }
DEF_ROW_REUSE(14, 3)
DEF_ROW_REUSE(14, 5)
#undef DEF_ROW_REUSE
#else
#define ROW_PX 12
#define DEF_ROW_TILES(STEP) DEF_ROW_TILE(1, 12, STEP)
#endif
DEF_ROW_TILES(1)
DEF_ROW_TILES(2)
DEF_ROW_TILES(3)
DEF_ROW_TILES(4)
#undef DEF_ROW_TILES
#undef DEF_ROW_TILE

/* ROW_PX pixels of one output row whose windows are step (1..4) values apart, every full vector of
 * output channels (the caller's tile_rows does the rest of O). */
#if WIDE
#define ROW_CALL(STEP)                                                                                  \
  for (; v + 2 <= nfull; v += 2) FNI(row_tile_2_14_##STEP)(base, rstep, KH, KWC, w, O, v * VL, y);    \
  if (v < nfull) {                                                                                      \
    if (STEP == 1 && KWC == 5) FNI(row_reuse_14_5)(base, rstep, KH, w, O, v * VL, y);                  \
    else if (STEP == 1 && KWC == 3) FNI(row_reuse_14_3)(base, rstep, KH, w, O, v * VL, y);             \
    else FNI(row_tile_1_14_##STEP)(base, rstep, KH, KWC, w, O, v * VL, y);                             \
  }                                                                                                     \
  break;
#else
#define ROW_CALL(STEP)                                                                                  \
  for (; v < nfull; v++) FNI(row_tile_1_12_##STEP)(base, rstep, KH, KWC, w, O, v * VL, y);            \
  break;
#endif
TARGET static void FNI(row_group)(const T *base, int64_t step, int64_t rstep, int64_t KH, int64_t KWC,
                                  const T *w, int64_t O, T *y) {
  const int64_t nfull = O / VL;
  int64_t v = 0;
  switch (step) {
    case 1: ROW_CALL(1)
    case 2: ROW_CALL(2)
    case 3: ROW_CALL(3)
    default: ROW_CALL(4)
  }
  for (int64_t o0 = nfull * VL; o0 < O; o0++)
    for (int i = 0; i < ROW_PX; i++) {
      T acc = 0;
      const T *wr = w + o0;
      for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t j = 0; j < KWC; j++, wr += O) acc += base[kh * rstep + i * step + j] * *wr;
      y[i * O + o0] = acc;
    }
}
#undef ROW_CALL

/* Pixels [b, e), 12 at a time: their window rows at fixed offsets in the padded input when there is one
 * (a->xp: no bounds to check, nothing to gather), else gathered from x. */
TARGET static void FNI(direct_fwd_range)(void *p, int64_t b, int64_t e) {
  const FN(direct_args) *a = p;
  const geom *g = a->g;
  const int64_t O = g->O, KWC = g->KW * g->C, KH = g->KH, rstep = g->dh * a->Ws * g->C;
  T patch[12][CONV_DIRECT_MAX_K];
  const T *src[12][CONV_DIRECT_MAX_KH];
  const int64_t step = g->sw * g->C;
  const int rows = a->xp && step <= 4; /* whole groups of ROW_PX pixels of a row by row_group */
  int64_t n, oh, ow;
  pix_of(g, b, &n, &oh, &ow);
  for (int64_t r = b; r < e;) {
    if (rows && g->OW - ow >= ROW_PX && e - r >= ROW_PX) {
      FNI(row_group)(FN(pad_window)(g, a->xp, a->Hs, a->Ws, n, oh, ow), step, rstep, KH, KWC, a->w, O,
                     a->y + (r - a->y0) * O);
      if (a->epi) FN(epi_rows)(a->epi, a->y + (r - a->y0) * O, ROW_PX, O);
      r += ROW_PX;
      if ((ow += ROW_PX) == g->OW) {
        ow = 0;
        if (++oh == g->OH) {
          oh = 0;
          ++n;
        }
      }
      continue;
    }
    /* 12 pixels, or to the row's end (rows: the rest of a row, fewer than ROW_PX) */
    int64_t lim = rows && g->OW - ow < e - r ? g->OW - ow : e - r;
    int np = lim < 12 ? (int)lim : 12;
    for (int i = 0; i < 12; i++) {
      if (i < np) {
        if (a->xp) {
          const T *s = FN(pad_window)(g, a->xp, a->Hs, a->Ws, n, oh, ow);
          for (int64_t kh = 0; kh < KH; kh++) src[i][kh] = s + kh * rstep;
        } else {
          FN(window_rows)(g, a->x, n, oh, ow, patch[i], src[i]);
        }
        pix_next(g, &n, &oh, &ow);
      } else {
        for (int64_t kh = 0; kh < KH; kh++) src[i][kh] = src[0][kh]; /* padding lanes: results dropped */
      }
    }
    FNI(tile_rows)((const T *const (*)[CONV_DIRECT_MAX_KH])src, np, KH, KWC, a->w, O, a->y + (r - a->y0) * O);
    if (a->epi) FN(epi_rows)(a->epi, a->y + (r - a->y0) * O, np, O);
    r += np;
  }
}

/* C[M, N] = A[M, K] (row stride lda) x B[K, N], rows [b, e). */
TARGET static void FNI(gemm_nn_range)(void *p, int64_t b, int64_t e) {
  const FN(gemm_args) *a = p;
  const T *src[12][CONV_DIRECT_MAX_KH];
  for (int64_t r = b; r < e; r += 12) {
    int np = e - r < 12 ? (int)(e - r) : 12;
    for (int i = 0; i < 12; i++) src[i][0] = a->A + (r + (i < np ? i : 0)) * a->lda;
    FNI(tile_rows)((const T *const (*)[CONV_DIRECT_MAX_KH])src, np, 1, a->K, a->B, a->N, a->C + r * a->N);
  }
}

/* ---- filter gradient on the column matrix: dF[K, O] += col[m, K]^T x dY[m, O] ----
 * Register tiles of 6 filter rows x NV vectors of output channels (NV <=
 * DW_NV), streaming over the chunk's rows. */
#define DEF_DW_TILE(NV, ROWS, NAME)                                                                    \
  TARGET static void FNI(NAME)(const T *col, int64_t K, const T *dy, int64_t O, int64_t m, T *df,      \
                               int64_t k0, int64_t c0) {                                               \
    VEC acc[ROWS][NV];                                                                                 \
    UNROLL for (int i = 0; i < ROWS; i++)                                                              \
      UNROLL for (int v = 0; v < NV; v++) VLOAD(acc[i][v], df + (k0 + i) * O + c0 + v * VL);           \
    for (int64_t r = 0; r < m; r++) {                                                                  \
      const T *cr = col + r * K + k0, *dr = dy + r * O + c0;                                           \
      VEC d[NV];                                                                                       \
      UNROLL for (int v = 0; v < NV; v++) VLOAD(d[v], dr + v * VL);                                    \
      UNROLL for (int i = 0; i < ROWS; i++) {                                                          \
        const T sv = cr[i];                                                                            \
        UNROLL for (int v = 0; v < NV; v++) acc[i][v] += sv * d[v];                                    \
      }                                                                                                \
    }                                                                                                  \
    UNROLL for (int i = 0; i < ROWS; i++)                                                              \
      UNROLL for (int v = 0; v < NV; v++) VSTORE(df + (k0 + i) * O + c0 + v * VL, acc[i][v]);          \
  }
DEF_DW_TILE(1, 6, dw_tile_1)
DEF_DW_TILE(2, 6, dw_tile_2)
#if WIDE
DEF_DW_TILE(3, 6, dw_tile_3)
DEF_DW_TILE(4, 6, dw_tile_4)
/* two 6-row tiles at once where only 1 or 2 vectors of channels are left: 12 x NV accumulators */
DEF_DW_TILE(1, 12, dw_tile12_1)
DEF_DW_TILE(2, 12, dw_tile12_2)
#else
DEF_DW_TILE(1, 12, dw_tile12_1)
#endif
#undef DEF_DW_TILE

/* Task t: filter rows [6t, 6t + 6) for every output channel. */
TARGET static void FNI(dw_gemm_range)(void *p, int64_t b, int64_t e) {
  const FN(dwg_args) *a = p;
  const int64_t K = a->K, O = a->O, m = a->m, nfull = O / VL;
  int64_t tfull = K / 6 < e ? K / 6 : e; /* tasks [b, tfull) are full 6-row tiles */
  /* vector groups outer, tiles inner: the dy columns of a group stay in cache */
  for (int64_t v = 0; v < nfull; v += DW_NV) {
    int64_t nv = nfull - v < DW_NV ? nfull - v : DW_NV;
    for (int64_t t = b; t < tfull; t++) {
      int64_t k0 = t * 6;
      int pair = t + 1 < tfull; /* two full tiles: one 12-row tile where the registers allow */
      switch (nv) {
#if WIDE
        case 4: FNI(dw_tile_4)(a->col, K, a->dy, O, m, a->df, k0, v * VL); break;
        case 3: FNI(dw_tile_3)(a->col, K, a->dy, O, m, a->df, k0, v * VL); break;
        case 2:
          if (pair) FNI(dw_tile12_2)(a->col, K, a->dy, O, m, a->df, k0, v * VL), t++;
          else FNI(dw_tile_2)(a->col, K, a->dy, O, m, a->df, k0, v * VL);
          break;
#else
        case 2: FNI(dw_tile_2)(a->col, K, a->dy, O, m, a->df, k0, v * VL); break;
#endif
        default:
          if (pair) FNI(dw_tile12_1)(a->col, K, a->dy, O, m, a->df, k0, v * VL), t++;
          else FNI(dw_tile_1)(a->col, K, a->dy, O, m, a->df, k0, v * VL);
          break;
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

/* ---- filter gradient of a small window read from the padded input ----
 * dF rows [k0, k0 + R) x NV vectors of channels from c0, summed over pixels
 * [p0, p1) in R*NV accumulators: per pixel NV dy loads and R window values
 * at the fixed offsets off[k] from the pixel's window (rows k >= K read
 * offset 0 and are dropped). One pass over the pixels per tile. With resume
 * the sums start from df's values (a range continued: the same additions as
 * one pass). Pixel p's dy row is at a->dy + (p - a->dy0) * O. */
#define DEF_DWP_TILE(NV, R)                                                                              \
  TARGET static void FNI(dwp_tile_##NV##_##R)(const FN(dwp_args) *a, const int64_t *off, int64_t k0,     \
                                              int64_t K, int64_t c0, int64_t p0, int64_t p1, T *df,      \
                                              int resume) {                                              \
    const geom *g = a->g;                                                                                \
    const int64_t O = g->O, step = g->sw * g->C;                                                         \
    int64_t o[R];                                                                                        \
    UNROLL for (int i = 0; i < R; i++) o[i] = k0 + i < K ? off[k0 + i] : 0;                              \
    VEC acc[R][NV];                                                                                      \
    UNROLL for (int i = 0; i < R; i++) UNROLL for (int v = 0; v < NV; v++) {                             \
      acc[i][v] = (VEC){0};                                                                              \
      if (resume && k0 + i < K) VLOAD(acc[i][v], df + (k0 + i) * O + c0 + v * VL);                       \
    }                                                                                                    \
    int64_t n, oh, ow;                                                                                   \
    pix_of(g, p0, &n, &oh, &ow);                                                                         \
    for (int64_t p = p0; p < p1;) {                                                                      \
      int64_t cnt = g->OW - ow < p1 - p ? g->OW - ow : p1 - p; /* pixels left in this output row */     \
      const T *xs = FN(pad_window)(g, a->xp, a->Hs, a->Ws, n, oh, ow), *dyp = a->dy + (p - a->dy0) * O + c0; \
      for (int64_t j = 0; j < cnt; j++, xs += step, dyp += O) {                                          \
        VEC d[NV];                                                                                       \
        UNROLL for (int v = 0; v < NV; v++) VLOAD(d[v], dyp + v * VL);                                   \
        UNROLL for (int i = 0; i < R; i++) {                                                             \
          const T sv = xs[o[i]];                                                                         \
          UNROLL for (int v = 0; v < NV; v++) acc[i][v] += sv * d[v];                                    \
        }                                                                                                \
      }                                                                                                  \
      p += cnt;                                                                                          \
      ow += cnt;                                                                                         \
      if (ow == g->OW) {                                                                                 \
        ow = 0;                                                                                          \
        if (++oh == g->OH) {                                                                             \
          oh = 0;                                                                                        \
          ++n;                                                                                           \
        }                                                                                                \
      }                                                                                                  \
    }                                                                                                    \
    UNROLL for (int i = 0; i < R; i++) {                                                                 \
      if (k0 + i < K) UNROLL for (int v = 0; v < NV; v++) VSTORE(df + (k0 + i) * O + c0 + v * VL, acc[i][v]); \
    }                                                                                                    \
  }
#if WIDE
#define DWP_NV 4
DEF_DWP_TILE(1, 28)
DEF_DWP_TILE(1, 14)
DEF_DWP_TILE(1, 7)
DEF_DWP_TILE(2, 14)
DEF_DWP_TILE(2, 7)
DEF_DWP_TILE(4, 7)
#else
#define DWP_NV 2
DEF_DWP_TILE(1, 12)
DEF_DWP_TILE(1, 6)
DEF_DWP_TILE(2, 6)
#endif
#undef DEF_DWP_TILE

/* Pixels [p0, p1) of a small-window filter gradient summed into df (K6 x O; rows < K written),
 * reading the padded input; with resume added to df's sums (dwp_tile). */
TARGET static void FNI(dwp_pixels)(const FN(dwp_args) *a, T *df, int64_t p0, int64_t p1, int resume) {
  const geom *g = a->g;
  const int64_t K = g->K, O = g->O, KWC = g->KW * g->C, rstep = g->dh * a->Ws * g->C;
  const int64_t nfull = O / VL;
  int64_t off[CONV_DIRECT_DW_MAX_K];
  for (int64_t k = 0; k < K; k++) off[k] = (k / KWC) * rstep + k % KWC;
  for (int64_t v = 0; v < nfull;) {
    int64_t nv = nfull - v >= DWP_NV ? DWP_NV : nfull - v >= 2 ? 2 : 1;
    for (int64_t k0 = 0; k0 < K;) {
      int64_t rem = K - k0, R;
#if WIDE
      if (nv == 4) {
        R = 7;
        FNI(dwp_tile_4_7)(a, off, k0, K, v * VL, p0, p1, df, resume);
      } else if (nv == 2) {
        R = rem > 7 ? 14 : 7;
        if (R == 14) FNI(dwp_tile_2_14)(a, off, k0, K, v * VL, p0, p1, df, resume);
        else FNI(dwp_tile_2_7)(a, off, k0, K, v * VL, p0, p1, df, resume);
      } else {
        R = rem > 14 ? 28 : rem > 7 ? 14 : 7;
        if (R == 28) FNI(dwp_tile_1_28)(a, off, k0, K, v * VL, p0, p1, df, resume);
        else if (R == 14) FNI(dwp_tile_1_14)(a, off, k0, K, v * VL, p0, p1, df, resume);
        else FNI(dwp_tile_1_7)(a, off, k0, K, v * VL, p0, p1, df, resume);
      }
#else
      if (nv == 2) {
        R = 6;
        FNI(dwp_tile_2_6)(a, off, k0, K, v * VL, p0, p1, df, resume);
      } else {
        R = rem > 6 ? 12 : 6;
        if (R == 12) FNI(dwp_tile_1_12)(a, off, k0, K, v * VL, p0, p1, df, resume);
        else FNI(dwp_tile_1_6)(a, off, k0, K, v * VL, p0, p1, df, resume);
      }
#endif
      k0 += R;
    }
    v += nv;
  }
  /* channels past the last full vector */
  for (int64_t c = nfull * VL; c < O; c++)
    for (int64_t k = 0; k < K; k++) {
      T acc = resume ? df[k * O + c] : 0;
      int64_t n, oh, ow;
      pix_of(g, p0, &n, &oh, &ow);
      for (int64_t r = p0; r < p1; r++) {
        acc += FN(pad_window)(g, a->xp, a->Hs, a->Ws, n, oh, ow)[off[k]] * a->dy[(r - a->dy0) * O + c];
        pix_next(g, &n, &oh, &ow);
      }
      df[k * O + c] = acc;
    }
}

/* Task q: partition q (pixels [q*per, min((q+1)*per, M))) of a small-window
 * filter gradient into part + q*K6*O (rows < K written), reading the padded
 * input. */
TARGET static void FNI(dwp_range)(void *p, int64_t b, int64_t e) {
  const FN(dwp_args) *a = p;
  const int64_t M = a->g->M, K6 = dw_rows(a->g), O = a->g->O;
  for (int64_t q = b; q < e; q++) {
    int64_t p0 = q * a->per, p1 = (q + 1) * a->per < M ? (q + 1) * a->per : M;
    FNI(dwp_pixels)(a, a->part + q * K6 * O, p0, p1, 0);
  }
}
#undef DWP_NV

/* ---- Winograd F(2x2, 5x5) transforms of one tile (kernels/cpu/conv_winograd.h) ----
 * In one pass over the channels, a vector at a time, the 6x6 (or 6x2) intermediate rows in registers. */
#define WB_ROW(o0, o1, o2, o3, o4, o5, d0, d1, d2, d3, d4, d5) \
  do {                                                         \
    o0 = (T)4 * d0 - (T)5 * d2 + d4;                           \
    o1 = d3 + d4 - (T)4 * (d1 + d2);                           \
    o2 = (T)4 * (d1 - d2) + d4 - d3;                           \
    o3 = (T)2 * (d3 - d1) + d4 - d2;                           \
    o4 = (T)2 * (d1 - d3) + d4 - d2;                           \
    o5 = (T)4 * d1 - (T)5 * d3 + d5;                           \
  } while (0)

/* V = B^T d B: d's row r, column k at src + r*rs + k*C; element xi = a*6 + b to v + xi*vs. */
TARGET static void FNI(wino_in)(const T *src, int64_t rs, int64_t C, T *v, int64_t vs) {
  int64_t c = 0;
  for (; c + VL <= C; c += VL) {
    VEC t[6][6]; /* t[b][r] = (d B)[r][b] */
    UNROLL for (int r = 0; r < 6; r++) {
      VEC d0, d1, d2, d3, d4, d5;
      const T *q = src + r * rs + c;
      VLOAD(d0, q);
      VLOAD(d1, q + C);
      VLOAD(d2, q + 2 * C);
      VLOAD(d3, q + 3 * C);
      VLOAD(d4, q + 4 * C);
      VLOAD(d5, q + 5 * C);
      WB_ROW(t[0][r], t[1][r], t[2][r], t[3][r], t[4][r], t[5][r], d0, d1, d2, d3, d4, d5);
    }
    UNROLL for (int b = 0; b < 6; b++) {
      VEC o[6];
      WB_ROW(o[0], o[1], o[2], o[3], o[4], o[5], t[b][0], t[b][1], t[b][2], t[b][3], t[b][4], t[b][5]);
      UNROLL for (int a = 0; a < 6; a++) VSTORE(v + (a * 6 + b) * vs + c, o[a]);
    }
  }
  for (; c < C; c++) {
    T t[6][6];
    for (int r = 0; r < 6; r++) {
      const T *q = src + r * rs + c;
      WB_ROW(t[0][r], t[1][r], t[2][r], t[3][r], t[4][r], t[5][r], q[0], q[C], q[2 * C], q[3 * C], q[4 * C], q[5 * C]);
    }
    for (int b = 0; b < 6; b++) {
      T o[6];
      WB_ROW(o[0], o[1], o[2], o[3], o[4], o[5], t[b][0], t[b][1], t[b][2], t[b][3], t[b][4], t[b][5]);
      for (int a = 0; a < 6; a++) v[(a * 6 + b) * vs + c] = o[a];
    }
  }
}
#undef WB_ROW

#define WA_ROW(o0, o1, m0, m1, m2, m3, m4, m5) \
  do {                                         \
    o0 = m0 + m1 + m2 + m3 + m4;               \
    o1 = m1 - m2 + (T)2 * (m3 - m4) + m5;      \
  } while (0)
/* Y = A^T M A: M's element xi at m + xi*ms; the 2x2 result's (oy, ox) to y + oy*ys + ox*O. */
TARGET static void FNI(wino_out)(const T *m, int64_t ms, int64_t O, T *y, int64_t ys) {
  int64_t c = 0;
  for (; c + VL <= O; c += VL) {
    VEC t[2][6]; /* t[j][a] = (M A)[a][j] */
    UNROLL for (int a = 0; a < 6; a++) {
      VEC m0, m1, m2, m3, m4, m5;
      const T *q = m + a * 6 * ms + c;
      VLOAD(m0, q);
      VLOAD(m1, q + ms);
      VLOAD(m2, q + 2 * ms);
      VLOAD(m3, q + 3 * ms);
      VLOAD(m4, q + 4 * ms);
      VLOAD(m5, q + 5 * ms);
      WA_ROW(t[0][a], t[1][a], m0, m1, m2, m3, m4, m5);
    }
    UNROLL for (int j = 0; j < 2; j++) {
      VEC o0, o1;
      WA_ROW(o0, o1, t[j][0], t[j][1], t[j][2], t[j][3], t[j][4], t[j][5]);
      VSTORE(y + j * O + c, o0);
      VSTORE(y + ys + j * O + c, o1);
    }
  }
  for (; c < O; c++) {
    T t[2][6];
    for (int a = 0; a < 6; a++) {
      const T *q = m + a * 6 * ms + c;
      WA_ROW(t[0][a], t[1][a], q[0], q[ms], q[2 * ms], q[3 * ms], q[4 * ms], q[5 * ms]);
    }
    for (int j = 0; j < 2; j++) {
      T o0, o1;
      WA_ROW(o0, o1, t[j][0], t[j][1], t[j][2], t[j][3], t[j][4], t[j][5]);
      y[j * O + c] = o0;
      y[ys + j * O + c] = o1;
    }
  }
}
#undef WA_ROW

#define WY_ROW(o, a, b)   \
  do {                    \
    (o)[0] = a;           \
    (o)[1] = a + b;       \
    (o)[2] = a - b;       \
    (o)[3] = a + (T)2 * b; \
    (o)[4] = a - (T)2 * b; \
    (o)[5] = b;           \
  } while (0)
/* The filter gradient's A dy A^T of one 2x2 block of dy (rows y00 y01 / y10 y11 of O values):
 * element xi = k*6 + j to d + xi*ds. */
TARGET static void FNI(wino_dy)(const T *y00, const T *y01, const T *y10, const T *y11, int64_t O, T *d,
                                int64_t ds) {
  int64_t c = 0;
  for (; c + VL <= O; c += VL) {
    VEC a0, b0, a1, b1, e0[6], e1[6];
    VLOAD(a0, y00 + c);
    VLOAD(b0, y01 + c);
    VLOAD(a1, y10 + c);
    VLOAD(b1, y11 + c);
    WY_ROW(e0, a0, b0);
    WY_ROW(e1, a1, b1);
    UNROLL for (int j = 0; j < 6; j++) {
      VEC o[6];
      WY_ROW(o, e0[j], e1[j]);
      UNROLL for (int k = 0; k < 6; k++) VSTORE(d + (k * 6 + j) * ds + c, o[k]);
    }
  }
  for (; c < O; c++) {
    T e0[6], e1[6];
    WY_ROW(e0, y00[c], y01[c]);
    WY_ROW(e1, y10[c], y11[c]);
    for (int j = 0; j < 6; j++) {
      T o[6];
      WY_ROW(o, e0[j], e1[j]);
      for (int k = 0; k < 6; k++) d[(k * 6 + j) * ds + c] = o[k];
    }
  }
}
#undef WY_ROW

/* ---- Winograd F(4x4, 5x5) transforms of one tile (kernels/cpu/conv_winograd.h) ----
 * The points 0, 1, -1, 2, -2, 1/2, -1/2 and infinity; the 8x8 (8x4) intermediate rows in registers
 * (spilled where the register file is smaller). */
#define WB8_ROW(TY, o, d0, d1, d2, d3, d4, d5, d6, d7)                          \
  do {                                                                     \
    TY p1 = d1 + d5 - (T)4.25 * d3, q1 = d2 + d6 - (T)4.25 * d4;        \
    TY p2 = (T)0.5 * d1 - (T)2.5 * d3 + (T)2 * d5;                      \
    TY q2 = (T)0.25 * d2 - (T)1.25 * d4 + d6;                           \
    TY p3 = (T)2 * d1 - (T)2.5 * d3 + (T)0.5 * d5;                      \
    TY q3 = (T)4 * d2 - (T)5 * d4 + d6;                                 \
    (o)[0] = d0 - d6 + (T)5.25 * (d4 - d2);                                \
    (o)[1] = q1 + p1;                                                      \
    (o)[2] = q1 - p1;                                                      \
    (o)[3] = q2 + p2;                                                      \
    (o)[4] = q2 - p2;                                                      \
    (o)[5] = q3 + p3;                                                      \
    (o)[6] = q3 - p3;                                                      \
    (o)[7] = d7 - d1 + (T)5.25 * (d3 - d5);                                \
  } while (0)

/* V = B^T d B of an 8x8 window: d's row r, column k at src + r*rs + k*C; element xi = a*8 + b to
 * v + xi*vs. */
TARGET static void FNI(wino4_in)(const T *src, int64_t rs, int64_t C, T *v, int64_t vs) {
  int64_t c = 0;
  for (; c + VL <= C; c += VL) {
    VEC t[8][8]; /* t[a][k] = (B^T d)[a][k] */
    const T *q = src + c;
    ROLLED for (int k = 0; k < 8; k++, q += C) { /* column k: its 8 rows at fixed offsets from q */
      VEC d[8], o[8];
      UNROLL for (int r = 0; r < 8; r++) VLOAD(d[r], q + r * rs);
      WB8_ROW(VEC, o, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]);
      UNROLL for (int a = 0; a < 8; a++) t[a][k] = o[a];
    }
    T *p = v + c; /* elements in order: one pointer stepping by vs */
    ROLLED for (int a = 0; a < 8; a++) {
      VEC o[8];
      WB8_ROW(VEC, o, t[a][0], t[a][1], t[a][2], t[a][3], t[a][4], t[a][5], t[a][6], t[a][7]);
      UNROLL for (int k = 0; k < 8; k++, p += vs) VSTORE(p, o[k]);
    }
  }
  for (; c < C; c++) {
    T t[8][8];
    for (int r = 0; r < 8; r++) {
      const T *q = src + r * rs + c;
      T o[8];
      WB8_ROW(T, o, q[0], q[C], q[2 * C], q[3 * C], q[4 * C], q[5 * C], q[6 * C], q[7 * C]);
      for (int b = 0; b < 8; b++) t[b][r] = o[b];
    }
    for (int b = 0; b < 8; b++) {
      T o[8];
      WB8_ROW(T, o, t[b][0], t[b][1], t[b][2], t[b][3], t[b][4], t[b][5], t[b][6], t[b][7]);
      for (int a = 0; a < 8; a++) v[(a * 8 + b) * vs + c] = o[a];
    }
  }
}
#undef WB8_ROW

#define WA8_ROW(TY, o, m0, m1, m2, m3, m4, m5, m6, m7)                      \
  do {                                                                 \
    TY s1 = m1 + m2, d1 = m1 - m2, s2 = m3 + m4, d2 = m3 - m4;      \
    TY s3 = m5 + m6, d3 = m5 - m6;                                  \
    (o)[0] = m0 + s1 + s2 + s3;                                        \
    (o)[1] = d1 + (T)2 * d2 + (T)0.5 * d3;                             \
    (o)[2] = s1 + (T)4 * s2 + (T)0.25 * s3;                            \
    (o)[3] = d1 + (T)8 * d2 + (T)0.125 * d3 + m7;                      \
  } while (0)
/* Y = A^T M A of an 8x8 M: element xi at m + xi*ms; the 4x4 result's (oy, ox) to y + oy*ys + ox*O for
 * oy < rows, ox < cols. */
TARGET static void FNI(wino4_out)(const T *m, int64_t ms, int64_t O, T *y, int64_t ys, int64_t rows,
                                  int64_t cols) {
  int64_t c = 0;
  for (; c + VL <= O; c += VL) {
    VEC t[4][8]; /* t[j][a] = (M A)[a][j] */
    const T *q = m + c; /* elements in order */
    ROLLED for (int a = 0; a < 8; a++, q += 8 * ms) {
      VEC x[8], o[4];
      UNROLL for (int k = 0; k < 8; k++) VLOAD(x[k], q + k * ms);
      WA8_ROW(VEC, o, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]);
      UNROLL for (int j = 0; j < 4; j++) t[j][a] = o[j];
    }
    T *yo = y + c;
    ROLLED for (int j = 0; j < cols; j++, yo += O) {
      VEC o[4];
      WA8_ROW(VEC, o, t[j][0], t[j][1], t[j][2], t[j][3], t[j][4], t[j][5], t[j][6], t[j][7]);
      UNROLL for (int i = 0; i < 4; i++) if (i < rows) VSTORE(yo + i * ys, o[i]);
    }
  }
  for (; c < O; c++) {
    T t[4][8];
    for (int a = 0; a < 8; a++) {
      const T *q = m + a * 8 * ms + c;
      T o[4];
      WA8_ROW(T, o, q[0], q[ms], q[2 * ms], q[3 * ms], q[4 * ms], q[5 * ms], q[6 * ms], q[7 * ms]);
      for (int j = 0; j < 4; j++) t[j][a] = o[j];
    }
    for (int j = 0; j < cols; j++) {
      T o[4];
      WA8_ROW(T, o, t[j][0], t[j][1], t[j][2], t[j][3], t[j][4], t[j][5], t[j][6], t[j][7]);
      for (int i = 0; i < rows; i++) y[i * ys + j * O + c] = o[i];
    }
  }
}
#undef WA8_ROW

#define WY8_ROW(TY, o, y0, y1, y2, y3)                                      \
  do {                                                                 \
    TY s1 = y0 + y2, d1 = y1 + y3, s2 = y0 + (T)4 * y2;             \
    TY d2 = (T)2 * y1 + (T)8 * y3, s3 = y0 + (T)0.25 * y2;          \
    TY d3 = (T)0.5 * y1 + (T)0.125 * y3;                            \
    (o)[0] = y0;                                                       \
    (o)[1] = s1 + d1;                                                  \
    (o)[2] = s1 - d1;                                                  \
    (o)[3] = s2 + d2;                                                  \
    (o)[4] = s2 - d2;                                                  \
    (o)[5] = s3 + d3;                                                  \
    (o)[6] = s3 - d3;                                                  \
    (o)[7] = y3;                                                       \
  } while (0)
/* The filter gradient's A dy A^T of one 4x4 block of dy (yr[i*4 + j]: row i, column j, O values):
 * element xi = k*8 + j to d + xi*ds. */
TARGET static void FNI(wino4_dy)(const T *const *yr, int64_t O, T *d, int64_t ds) {
  int64_t c = 0;
  for (; c + VL <= O; c += VL) {
    VEC e[8][4]; /* e[k][j] = (A y)[k][j]: column j of the block over its rows */
    ROLLED for (int j = 0; j < 4; j++) {
      VEC y[4], o[8];
      UNROLL for (int i = 0; i < 4; i++) VLOAD(y[i], yr[i * 4 + j] + c);
      WY8_ROW(VEC, o, y[0], y[1], y[2], y[3]);
      UNROLL for (int k = 0; k < 8; k++) e[k][j] = o[k];
    }
    T *p = d + c; /* elements in order: one pointer stepping by ds */
    ROLLED for (int k = 0; k < 8; k++) {
      VEC o[8];
      WY8_ROW(VEC, o, e[k][0], e[k][1], e[k][2], e[k][3]);
      UNROLL for (int j = 0; j < 8; j++, p += ds) VSTORE(p, o[j]);
    }
  }
  for (; c < O; c++) {
    T e[4][8];
    for (int i = 0; i < 4; i++) WY8_ROW(T, e[i], yr[i * 4][c], yr[i * 4 + 1][c], yr[i * 4 + 2][c], yr[i * 4 + 3][c]);
    for (int j = 0; j < 8; j++) {
      T o[8];
      WY8_ROW(T, o, e[0][j], e[1][j], e[2][j], e[3][j]);
      for (int k = 0; k < 8; k++) d[(k * 8 + j) * ds + c] = o[k];
    }
  }
}
#undef WY8_ROW

/* ---- the filter gradient from a 2x2 max pool's winners (kernels/cpu/conv_winners.h) ----
 * The padded image in blocks of VL channels ([Cp/VL][Hs][Ws][VL], zero past C), so that a window's
 * values are at fixed offsets from its first (pixels VL apart, rows Ws*VL). */
TARGET static void FNI(wdw_pad)(const geom *g, const T *ximg, T *img, int64_t Hs, int64_t Ws, int64_t Cp,
                                 int border) {
  const int64_t C = g->C, plane = Hs * Ws * VL;
  if (border) memset(img, 0, (size_t)(Hs * Ws * Cp) * sizeof(T)); /* the rest is written for every image */
  for (int64_t ih = 0; ih < g->H; ih++) {
    const int64_t r = ih + g->pt;
    if (r < 0 || r >= Hs) continue;
    for (int64_t iw = 0; iw < g->W; iw++) {
      const int64_t q = iw + g->pl;
      if (q < 0 || q >= Ws) continue;
      const T *s = ximg + (ih * g->W + iw) * C;
      T *d = img + (r * Ws + q) * VL;
      int64_t c = 0;
      for (; c + VL <= C; c += VL, d += plane) {
        VEC v;
        VLOAD(v, s + c);
        VSTORE(d, v);
      }
      for (int64_t l = 0; c < C; c++, l++) d[l] = s[c]; /* the last block's lanes past C stay zero */
    }
  }
}

/* One output channel and one block of VL input channels: the K x K window offsets' sums in registers
 * (acc_io: rows [kh*K + kw], Cp apart, read and written back), over the pooled windows of one image
 * in order: each winner's window (img: the block's padded image, Ws pixels a row) times its pooled
 * value, 0 where the code is 4 (no winner: selected, not multiplied, so a non-finite value there adds
 * nothing, as the separate steps' zeros). code and gp: the image's values of that channel, O apart. */
#define DEF_WDW_TILE(K)                                                                                  \
  TARGET static void FNI(wdw_tile_##K)(const T *img, int64_t Ws, const uint8_t *code, const T *gp,      \
                                       int64_t O, int64_t PH, int64_t PW, T *acc_io, int64_t Cp,        \
                                       double *cs) {                                                    \
    VEC acc[K * K];                                                                                      \
    UNROLL for (int k = 0; k < K * K; k++) VLOAD(acc[k], acc_io + k * Cp);                              \
    const int64_t rs = Ws * VL;                                                                          \
    double sum = 0; /* the kept pooled values, for cs */                                                 \
    for (int64_t ph = 0; ph < PH; ph++, img += 2 * rs) {                                                 \
      const T *win = img; /* window (ph, pw)'s first pixel */                                            \
      for (int64_t pw = 0; pw < PW; pw++, win += 2 * VL, code += O, gp += O) {                           \
        const unsigned r = *code;                                                                        \
        const T gv = FN(keep_if)(*gp, r < 4);                                                            \
        sum += (double)gv;                                                                               \
        const T *row = win + ((r >> 1) & 1) * rs + (r & 1) * VL;                                         \
        UNROLL for (int kh = 0; kh < K; kh++, row += rs) UNROLL for (int kw = 0; kw < K; kw++) {         \
          VEC xv;                                                                                        \
          VLOAD(xv, row + kw * VL);                                                                      \
          acc[kh * K + kw] += gv * xv;                                                                   \
        }                                                                                                \
      }                                                                                                  \
    }                                                                                                    \
    UNROLL for (int k = 0; k < K * K; k++) VSTORE(acc_io + k * Cp, acc[k]);                             \
    if (cs) *cs = sum;                                                                                   \
  }
DEF_WDW_TILE(3)
DEF_WDW_TILE(5)
#undef DEF_WDW_TILE

/* Task q: partition q's sums part[q][O][KH*KW][Cp] (zero when it has no image). */
TARGET static void FNI(wdw_range)(void *p, int64_t b, int64_t e) {
  const FN(wdw_args) *a = p;
  const geom *g = a->g;
  const int64_t O = g->O, K = g->KH, KK = K * K, PH = g->OH / 2, PW = g->OW / 2, Cp = wdw_cp(g->C);
  const int64_t Hs = a->Hs, Ws = a->Ws;
  for (int64_t q = b; q < e; q++) {
    T *part = a->ws + q * wdw_part_elems(g), *img = part + O * KK * Cp;
    memset(part, 0, (size_t)(O * KK * Cp) * sizeof(T));
    const int64_t n0 = q * a->per, n1 = n0 + a->per < g->N ? n0 + a->per : g->N;
    for (int64_t n = n0; n < n1; n++) {
      FNI(wdw_pad)(g, a->x + n * g->H * g->W * g->C, img, Hs, Ws, Cp, n == n0);
      const uint8_t *code = a->code + n * PH * PW * O;
      const T *gp = a->dpool + n * PH * PW * O;
      for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < g->C; c += VL) {
          const T *blk = img + (c / VL) * Hs * Ws * VL;
          T *acc = part + o * KK * Cp + c;
          double *cs = a->colsum && c == 0 ? a->colsum + n * O + o : NULL;
          if (K == 5) FNI(wdw_tile_5)(blk, Ws, code + o, gp + o, O, PH, PW, acc, Cp, cs);
          else FNI(wdw_tile_3)(blk, Ws, code + o, gp + o, O, PH, PW, acc, Cp, cs);
        }
    }
  }
}

/* The same with vectors over output channels (a first layer's few input channels): one input channel
 * and VL output channels, the K x K offsets' sums in registers (acc_io: rows [kh*K + kw], ks apart);
 * per pooled window the VL pooled values split by winner (0-3: four masked copies, none for 4), each
 * times the values of its winner's window (img: the padded image, pixels C apart, from the channel).
 * code and gp: the image's values from the block's first channel, os apart a window. The window's
 * (K+1) x (K+1) patch (the four winners' windows together) is walked once, each value broadcast
 * into a register and feeding the offsets of every winner's window that holds it (acc[kh][kw] gets
 * winner q's term from value (kh + q/2, kw + q%2): row by row, in q order), so 36 broadcasts serve
 * the 100 multiply-adds of a 5x5 window. */
typedef uint8_t FNI(wbytes) __attribute__((vector_size(VL), aligned(1))); /* loaded in place: a widening load */
typedef __typeof__((VEC){0} == (VEC){0}) FNI(wlanes);
typedef double FNI(dsum) __attribute__((vector_size(VL * sizeof(double))));
/* The VL winner codes at p, widened to lanes (one widening load where the ISA has it). */
TARGET static inline __attribute__((always_inline)) FNI(wlanes) FNI(code_lanes)(const uint8_t *p) {
  FNI(wlanes) r;
#if CONV_X86 && VBYTES == 64
  if (sizeof(T) == 4) {
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    memcpy(&r, &v, sizeof r);
  } else {
    __m512i v = _mm512_cvtepu8_epi64(_mm_loadl_epi64((const __m128i *)p));
    memcpy(&r, &v, sizeof r);
  }
#elif CONV_X86 && VBYTES == 32
  if (sizeof(T) == 4) {
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    memcpy(&r, &v, sizeof r);
  } else {
    int32_t w;
    memcpy(&w, p, sizeof w);
    __m256i v = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(w));
    memcpy(&r, &v, sizeof r);
  }
#else
  r = __builtin_convertvector(*(const FNI(wbytes) *)p, FNI(wlanes));
#endif
  return r;
}
#define DEF_WDWO_TILE(K, NAME, CSTEP)                                                                   \
  TARGET static void FNI(NAME)(const T *img, int64_t Ws, int64_t C, const uint8_t *code, const T *gp,   \
                               int64_t os, int64_t PH, int64_t PW, T *acc_io, int64_t ks, double *cs,   \
                               int64_t ncs) {                                                           \
    VEC acc[K * K];                                                                                      \
    UNROLL for (int k = 0; k < K * K; k++) VLOAD(acc[k], acc_io + k * ks);                              \
    const int64_t cst = (CSTEP), rs = Ws * cst;                                                          \
    const uint8_t *code0 = code;                                                                         \
    const T *gp0 = gp;                                                                                   \
    for (int64_t ph = 0; ph < PH; ph++, img += 2 * rs) {                                                 \
      const T *win = img;                                                                                \
      for (int64_t pw = 0; pw < PW; pw++, win += 2 * cst, code += os, gp += os) {                        \
        const FNI(wlanes) r = FNI(code_lanes)(code);                                                     \
        FNI(wlanes) gi;                                                                                  \
        memcpy(&gi, gp, sizeof gi);                                                                      \
        VEC gq[4];                                                                                       \
        UNROLL for (int q = 0; q < 4; q++) {                                                             \
          const FNI(wlanes) m = gi & (r == q);                                                           \
          memcpy(&gq[q], &m, sizeof gq[q]);                                                              \
        }                                                                                                \
        /* row y of the patch: one add a row, opaque to the compiler (else it keeps a table of the      \
         * patch's offsets, or of its values across windows, on the stack) */                            \
        const T *ry = win;                                                                               \
        UNROLL for (int y = 0; y <= K; y++) {                                                            \
          UNROLL for (int x = 0; x <= K; x++) {                                                          \
            const VEC xb = ((VEC){0} + 1) * ry[x * cst]; /* a broadcast (x * 1 is x) */                  \
            UNROLL for (int q = 0; q < 4; q++) {                                                         \
              const int kh = y - (q >> 1), kw = x - (q & 1);                                             \
              if (kh >= 0 && kh < K && kw >= 0 && kw < K) acc[kh * K + kw] += gq[q] * xb;                \
            }                                                                                            \
          }                                                                                              \
          ry += rs;                                                                                      \
          __asm__("" : "+r"(ry));                                                                        \
        }                                                                                                \
      }                                                                                                  \
    }                                                                                                    \
    UNROLL for (int k = 0; k < K * K; k++) VSTORE(acc_io + k * ks, acc[k]);                             \
    if (cs) { /* a pass of its own over the windows, in the same order (registers left to the sums) */  \
      FNI(dsum) sum = {0};                                                                               \
      for (int64_t w = 0; w < PH * PW; w++, code0 += os, gp0 += os) {                                    \
        FNI(wlanes) gi;                                                                                  \
        memcpy(&gi, gp0, sizeof gi);                                                                     \
        const FNI(wlanes) m = gi & (FNI(code_lanes)(code0) < 4);                                         \
        VEC kept;                                                                                        \
        memcpy(&kept, &m, sizeof kept);                                                                  \
        sum += __builtin_convertvector(kept, FNI(dsum));                                                 \
      }                                                                                                  \
      double lanes[VL];                                                                                  \
      memcpy(lanes, &sum, sizeof lanes);                                                                 \
      memcpy(cs, lanes, (size_t)ncs * sizeof(double));                                                   \
    }                                                                                                    \
  }
DEF_WDWO_TILE(3, wdwo_tile_3, C)
DEF_WDWO_TILE(5, wdwo_tile_5, C)
/* one input channel: the window's values at fixed offsets from its row pointers */
DEF_WDWO_TILE(3, wdwo_tile_3_c1, 1)
DEF_WDWO_TILE(5, wdwo_tile_5_c1, 1)
#undef DEF_WDWO_TILE

/* Task q: partition q's sums part[q][KH*KW][C][Op] (zero when it has no image): the image padded as
 * the convolution's (pixels C apart), and where O is not a whole number of vectors its codes and
 * pooled values copied Op apart a window (4 and 0 past O). */
TARGET static void FNI(wdwo_range)(void *p, int64_t b, int64_t e) {
  const FN(wdw_args) *a = p;
  const geom *g = a->g;
  const int64_t C = g->C, O = g->O, K = g->KH, KK = K * K, PH = g->OH / 2, PW = g->OW / 2, Op = wdw_cp(O);
  const int64_t Hs = a->Hs, Ws = a->Ws, NW = PH * PW;
  for (int64_t q = b; q < e; q++) {
    T *part = a->ws + q * wdw_part_elems(g), *img = part + KK * C * Op, *gcopy = img + Hs * Ws * C;
    uint8_t *ccopy = (uint8_t *)(gcopy + NW * Op);
    memset(part, 0, (size_t)(KK * C * Op) * sizeof(T));
    const int64_t n0 = q * a->per, n1 = n0 + a->per < g->N ? n0 + a->per : g->N;
    for (int64_t n = n0; n < n1; n++) {
      FN(pad_image)(g, a->x + n * g->H * g->W * C, img, Hs, Ws, n == n0);
      const uint8_t *code = a->code + n * NW * O;
      const T *gp = a->dpool + n * NW * O;
      int64_t os = O;
      if (O % VL) {
        for (int64_t w = 0; w < NW; w++) {
          memcpy(ccopy + w * Op, code + w * O, (size_t)O);
          memset(ccopy + w * Op + O, 4, (size_t)(Op - O));
          memcpy(gcopy + w * Op, gp + w * O, (size_t)O * sizeof(T));
          memset(gcopy + w * Op + O, 0, (size_t)(Op - O) * sizeof(T));
        }
        code = ccopy;
        gp = gcopy;
        os = Op;
      }
      for (int64_t c = 0; c < C; c++)
        for (int64_t o = 0; o < O; o += VL) {
          T *acc = part + c * Op + o;
          double *cs = a->colsum && c == 0 ? a->colsum + n * O + o : NULL;
          const int64_t ncs = O - o < VL ? O - o : VL;
          if (C == 1 && K == 5) FNI(wdwo_tile_5_c1)(img, Ws, 1, code + o, gp + o, os, PH, PW, acc, Op, cs, ncs);
          else if (C == 1) FNI(wdwo_tile_3_c1)(img, Ws, 1, code + o, gp + o, os, PH, PW, acc, Op, cs, ncs);
          else if (K == 5) FNI(wdwo_tile_5)(img + c, Ws, C, code + o, gp + o, os, PH, PW, acc, C * Op, cs, ncs);
          else FNI(wdwo_tile_3)(img + c, Ws, C, code + o, gp + o, os, PH, PW, acc, C * Op, cs, ncs);
        }
    }
  }
}

#if WIDE
/* ---- a second layer's input gradient from a 2x2 max pool's winners (conv.c: wdx; AVX-512 only) ----
 * The routed dy of a 5x5 SAME convolution is zero but at each pooled window's winner, where it is
 * the pooled value, so dx is the sum over pooled windows and output channels of the pooled value
 * times the filter's taps for that channel, placed around the winner: 25 multiply-adds (vectors of
 * VL input channels) per pooled value, no transforms and none for the zeros. A pooled window's
 * terms all land in the 6x6 patch of dx around it, summed in registers in two halves of 3 rows (18
 * accumulators), output channels taken by winner (so that each winner's taps are at fixed places in
 * the patch), then added into the padded image dxp. wt: the filter as [O][5][5][C]; gp, code: the
 * image's pooled values and winners (O apart a window); dxp: (2*PH + 4) rows of Wp pixels of C
 * values from channel c0, zero on entry. Per image the sums run in a fixed order. */
#define WDX_TERMS(Q, HF)                                                                                \
  for (int i = 0; i < cnt[Q]; i++) {                                                                    \
    const int64_t o = lst[Q][i];                                                                        \
    const T gv = g[o];                                                                                  \
    const T *wo = wt + o * 25 * C + c0;                                                                 \
    UNROLL for (int kh = 0; kh < 5; kh++) {                                                             \
      const int row = (Q >> 1) + kh - 3 * (HF);                                                         \
      if (row < 0 || row > 2) continue;                                                                 \
      UNROLL for (int kw = 0; kw < 5; kw++) {                                                           \
        VEC wv;                                                                                         \
        VLOAD(wv, wo + (kh * 5 + kw) * C);                                                              \
        acc[row][(Q & 1) + kw] += gv * wv;                                                              \
      }                                                                                                 \
    }                                                                                                   \
  }
#define WDX_HALF(HF)                                                                                    \
  {                                                                                                     \
    VEC acc[3][6];                                                                                      \
    UNROLL for (int r = 0; r < 3; r++) UNROLL for (int x = 0; x < 6; x++) acc[r][x] = (VEC){0};        \
    WDX_TERMS(0, HF) WDX_TERMS(1, HF) WDX_TERMS(2, HF) WDX_TERMS(3, HF)                                 \
    UNROLL for (int r = 0; r < 3; r++) UNROLL for (int x = 0; x < 6; x++) {                            \
      T *d = patch + ((3 * (HF) + r) * Wp + x) * C;                                                     \
      VEC v;                                                                                            \
      VLOAD(v, d);                                                                                      \
      v += acc[r][x];                                                                                   \
      VSTORE(d, v);                                                                                     \
    }                                                                                                   \
  }
TARGET static void FNI(wdx_image)(const T *gp, const uint8_t *code, int64_t PH, int64_t PW, int64_t O,
                                  const T *wt, int64_t C, int64_t c0, T *dxp, int64_t Wp) {
  uint8_t lst[4][WDX_MAX_O];
  for (int64_t ph = 0; ph < PH; ph++)
    for (int64_t pw = 0; pw < PW; pw++) {
      const T *g = gp + (ph * PW + pw) * O;
      const uint8_t *cd = code + (ph * PW + pw) * O;
      int cnt[4] = {0, 0, 0, 0};
      for (int64_t o = 0; o < O; o++) {
        const unsigned q = cd[o];
        if (q < 4) lst[q][cnt[q]++] = (uint8_t)o;
      }
      T *patch = dxp + (2 * ph * Wp + 2 * pw) * C + c0;
      WDX_HALF(0)
      WDX_HALF(1)
    }
}
#undef WDX_HALF
#undef WDX_TERMS
#endif

static const FN(conv_isa) FNI(conv_isa_tab) = {FNI(direct_fwd_range), FNI(gemm_nn_range), FNI(dw_gemm_range),
                                               FNI(dwp_range),        FNI(dwp_pixels),    FNI(wino_in),
                                               FNI(wino_out),         FNI(wino_dy),       FNI(wino4_in),
                                               FNI(wino4_out),        FNI(wino4_dy),      FNI(wdw_range),
                                               FNI(wdwo_range)};

#undef UNROLL
#undef ROLLED
#undef ROW_PX
#undef WIDE
#undef DW_NV
#undef VL
#undef VLOAD
#undef VSTORE
#undef VEC
#undef FNI
