/* The filter gradient of a convolution whose dy comes from a 2x2 stride-2
 * MaxPoolGrad routed by the pool's winners with its ReluGrad folded
 * (engine/fuse.c, kernels/kernel.h: argmax, wdw): such a dy is zero but at
 * each window's winner, where it is the pooled value (none where the code is
 * 4: the maximum was not above 0), so
 *   dW[kh][kw][c][o] = sum over pooled (n, ph, pw) of dpool[n][ph][pw][o] *
 *                      xpad[n][oh + kh][ow + kw][c],  (oh, ow) its winner
 * costs KH*KW multiply-adds per pooled value and output channel: a quarter of
 * the direct loops' and, for the 5x5 windows of a small CNN's second layer,
 * fewer than the Winograd filter gradient's products and transforms, with the
 * products summed exactly as written. Vectors run over input channels (the
 * padded image in blocks of a vector's channels, zero past C), the KH*KW
 * sums of one (o, block) in registers over an image's windows (conv_tiles.h:
 * wdw_tile_*); where the input channels are few (a first layer's one), over
 * output channels instead, each pooled vector split into four by its
 * winners (conv_tiles.h: wdwo_tile_*; the products of the direct loops, but
 * no dy made). Images are cut into wdw_parts() partitions by
 * the shape, each summing into its own part of the workspace; the partitions
 * are added in order, so the result does not depend on the threads.
 * Included by kernels/cpu/conv.c in its template body. */

/* Tasks r: row r of the partitions' sums added in order (part q's rows at q*stride + r*len, each
 * len values), then written to dw[kh][kw][c][o]: over input channels ([O][KK][Cp]) row r is output
 * channel r, its element k*Cp + c dw[k][c][r]; over output channels ([KK*C][Op]) row r is (k, c), its
 * element o dw[r][o]. */
typedef struct {
  const geom *g;
  const T *ws;
  T *dw;
  int64_t P, len, over_c;
} FN(wdw_sum_args);
LOOM_HOT static void FN(wdw_sum_range)(void *p, int64_t b, int64_t e) {
  const FN(wdw_sum_args) *a = p;
  const geom *g = a->g;
  const int64_t C = g->C, O = g->O, Cp = wdw_cp(C), stride = wdw_part_elems(g), len = a->len;
  T acc[WDW_SUM_MAX];
  for (int64_t r = b; r < e; r++) {
    const T *s = a->ws + r * len;
    if (a->over_c) {
      for (int64_t i = 0; i < len; i++) acc[i] = s[i];
      for (int64_t q = 1; q < a->P; q++)
        for (int64_t i = 0; i < len; i++) acc[i] += s[q * stride + i];
      for (int64_t k = 0; k < g->KH * g->KW; k++)
        for (int64_t c = 0; c < C; c++) a->dw[(k * C + c) * O + r] = acc[k * Cp + c];
    } else {
      T *d = a->dw + r * O;
      for (int64_t i = 0; i < O; i++) d[i] = s[i];
      for (int64_t q = 1; q < a->P; q++)
        for (int64_t i = 0; i < O; i++) d[i] += s[q * stride + i];
    }
  }
}

loom_code FN(loom__conv_dw_winners)(const loom_kctx *ctx, const loom_kctx *dw, const T *dpool, const uint8_t *code,
                                    double *colsum) {
  const loom_buf *X = dw->in[0], *DY = dw->in[1];
  loom_buf *DF = dw->out[0];
  size_t need = loom__conv_dw_winners_ws(dw->attrs, X, DY, DF);
  if (!need)
    return loom_status_set(ctx->st, LOOM_INTERNAL, "a filter gradient from a pool's winners of this geometry is not supported");
  if (!ctx->ws || ctx->ws_size < need) return ws_missing(ctx, need);
  geom g;
  geom_init(&g, dw->attrs, X->dims, DF->dims, DY->dims);
  const int64_t P = wdw_parts(&g), KK = g.KH * g.KW, over_c = wdw_over_c(&g);
  FN(wdw_args) a = {&g, X->data, dpool, code, ctx->ws, (g.N + P - 1) / P, g.OH + g.KH - 1, g.OW + g.KW - 1, colsum};
  const FN(conv_isa) *isa = FN(isa_for)(over_c ? g.C : g.O);
  loom__parallel_for(ctx->pool, P, 1, over_c ? isa->wdw_range : isa->wdwo_range, &a);
  FN(wdw_sum_args) s = {&g, ctx->ws, DF->data, P, over_c ? KK * wdw_cp(g.C) : wdw_cp(g.O), over_c};
  loom__parallel_for(ctx->pool, over_c ? g.O : KK * g.C, 4, FN(wdw_sum_range), &s);
  return LOOM_OK;
}
