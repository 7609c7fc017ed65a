/* Gradient-check cases for the array family (ops/array.def.h): reshape, broadcast,
 * transpose, concat/split, slice, pack, tile, pad, gather/scatter, segment
 * sums, cast, fill and top_k.
 * Included by tests/test_grad.c, which defines grad_case, UN, BIN and F64C
 * (LOOM_F64). Each row:
 * {op, label, dtype, nin, {ranks}, {{dims}...}, builder, lo, hi, away, nodiff, tol, int_input, int_hi} */

/* ---- array ---- */
static loom_output b_reshape_23(loom_graph *g, const loom_output *x) {
  int64_t d[2] = {3, 2};
  return loom_reshape(g, x[0], 2, d, NULL);
}
static loom_output b_reshape_like(loom_graph *g, const loom_output *x) { return loom_reshape_like(g, x[0], x[1], NULL); }
static loom_output b_broadcast_like(loom_graph *g, const loom_output *x) {
  return loom_broadcast_like(g, x[0], x[1], NULL);
}
static loom_output b_broadcast_to(loom_graph *g, const loom_output *x) {
  int64_t d[3] = {3, 2, 4};
  return loom_broadcast_to(g, x[0], 3, d, NULL);
}
static loom_output b_transpose(loom_graph *g, const loom_output *x) {
  int64_t p[3] = {2, 0, 1};
  return loom_transpose(g, x[0], 3, p, NULL);
}
static loom_output b_concat1(loom_graph *g, const loom_output *x) { return loom_concat(g, 3, x, 1, NULL); }
static loom_output b_concat0(loom_graph *g, const loom_output *x) { return loom_concat(g, 2, x, -2, NULL); }
/* 10 inputs (more pieces than split_v takes at once): x0 reused with slices */
static loom_output b_concat10(loom_graph *g, const loom_output *x) {
  loom_output in[10];
  for (int i = 0; i < 10; i++) {
    int64_t b[2] = {0, i % 4}, s[2] = {-1, 1 + (i % 2)};
    in[i] = i == 3 ? x[1] : loom_slice(g, x[0], b, s, NULL);
  }
  return loom_concat(g, 10, in, 1, NULL);
}
/* uses outputs 0 and 2 only: output 1 gets zeros */
static loom_output b_split(loom_graph *g, const loom_output *x) {
  loom_output o[3];
  loom_split(g, x[0], 3, 1, o, NULL);
  return loom_sub(g, o[0], loom_square(g, o[2], NULL), NULL);
}
static loom_output b_split_v(loom_graph *g, const loom_output *x) {
  loom_output o[3];
  int64_t sz[3] = {2, -1, 1};
  loom_split_v(g, x[0], 3, sz, 0, o, NULL);
  loom_output two[2] = {o[0], loom_square(g, o[2], NULL)};
  return loom_concat(g, 2, two, 0, NULL);
}
static loom_output b_slice(loom_graph *g, const loom_output *x) {
  int64_t b[2] = {1, 2}, s[2] = {2, -1};
  return loom_slice(g, x[0], b, s, NULL);
}
static loom_output b_slice3(loom_graph *g, const loom_output *x) {
  int64_t b[3] = {0, 1, 1}, s[3] = {1, 2, 1};
  return loom_slice(g, x[0], b, s, NULL);
}
static loom_output b_pack(loom_graph *g, const loom_output *x) { return loom_stack(g, 3, x, 1, NULL); }
static loom_output b_unpack(loom_graph *g, const loom_output *x) {
  loom_output o[3];
  loom_unstack(g, x[0], 3, 1, o, NULL);
  return loom_add(g, loom_square(g, o[0], NULL), o[2], NULL);
}
static loom_output b_expand_dims(loom_graph *g, const loom_output *x) { return loom_expand_dims(g, x[0], 1, NULL); }
static loom_output b_squeeze(loom_graph *g, const loom_output *x) {
  int64_t ax[1] = {1};
  return loom_squeeze(g, x[0], 1, ax, NULL);
}
static loom_output b_tile(loom_graph *g, const loom_output *x) {
  int64_t m[2] = {2, 3};
  return loom_tile(g, x[0], m, NULL);
}
static loom_output b_tile3(loom_graph *g, const loom_output *x) {
  int64_t m[3] = {1, 2, 2};
  return loom_tile(g, x[0], m, NULL);
}
static loom_output b_pad(loom_graph *g, const loom_output *x) {
  int64_t bf[2] = {1, 0}, af[2] = {2, 1};
  return loom_pad(g, x[0], bf, af, 0.5, NULL);
}
static loom_output b_gather0(loom_graph *g, const loom_output *x) { return loom_gather(g, x[0], x[1], 0, NULL); }
static loom_output b_gather1(loom_graph *g, const loom_output *x) { return loom_gather(g, x[0], x[1], 1, NULL); }
static loom_output b_gather_last(loom_graph *g, const loom_output *x) { return loom_gather(g, x[0], x[1], -1, NULL); }
static loom_output b_scatter_add(loom_graph *g, const loom_output *x) {
  return loom_scatter_add(g, x[0], x[1], x[2], NULL);
}
static loom_output b_scatter_update(loom_graph *g, const loom_output *x) {
  return loom_scatter_update(g, x[0], x[1], x[2], NULL);
}
static loom_output b_segment_sum(loom_graph *g, const loom_output *x) {
  return loom_unsorted_segment_sum(g, x[0], x[1], 4, NULL);
}
static loom_output b_segment_mean(loom_graph *g, const loom_output *x) {
  return loom_unsorted_segment_mean(g, x[0], x[1], 4, NULL);
}
static loom_output b_segment_sqrtn(loom_graph *g, const loom_output *x) {
  return loom_unsorted_segment_sqrt_n(g, x[0], x[1], 4, NULL);
}
static loom_output b_cast_up(loom_graph *g, const loom_output *x) { return loom_cast(g, x[0], LOOM_F64, NULL); }
static loom_output b_fill(loom_graph *g, const loom_output *x) {
  int64_t d[2] = {2, 3};
  return loom_fill(g, 2, d, x[0], NULL);
}
static loom_output b_top_k(loom_graph *g, const loom_output *x) {
  loom_output v, i;
  loom_top_k(g, x[0], 2, &v, &i, NULL);
  return v;
}

static const grad_case CASES_ARRAY[] = {
    {LOOM_OP_Reshape, "reshape", F64C, 1, {2}, {{2, 3}}, b_reshape_23, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_ReshapeLike, "reshape_like", F64C, 2, {2, 2}, {{2, 3}, {3, 2}}, b_reshape_like, -1, 1, 0, 2, 0, 0, 0},
    {LOOM_OP_BroadcastLike, "broadcast_like", F64C, 2, {2, 3}, {{3, 1}, {2, 3, 4}}, b_broadcast_like, -1, 1, 0, 2, 0,
     0, 0},
    {LOOM_OP_BroadcastTo, "broadcast_to", F64C, 1, {2}, {{2, 1}}, b_broadcast_to, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Transpose, "transpose", F64C, 1, {3}, {{2, 3, 4}}, b_transpose, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Concat, "concat_axis1", F64C, 3, {2, 2, 2}, {{2, 3}, {2, 1}, {2, 2}}, b_concat1, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Concat, "concat_axis0", F64C, 2, {2, 2}, {{1, 3}, {2, 3}}, b_concat0, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Concat, "concat_10_inputs", F64C, 2, {2, 2}, {{2, 5}, {2, 3}}, b_concat10, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Split, "split_unused_output", F64C, 1, {2}, {{2, 6}}, b_split, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_SplitV, "split_v", F64C, 1, {2}, {{5, 3}}, b_split_v, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Slice, "slice", F64C, 1, {2}, {{4, 5}}, b_slice, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Slice, "slice3", F64C, 1, {3}, {{2, 3, 4}}, b_slice3, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Pack, "pack", F64C, 3, {2, 2, 2}, {{2, 3}, {2, 3}, {2, 3}}, b_pack, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Unpack, "unpack", F64C, 1, {3}, {{2, 3, 2}}, b_unpack, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_ExpandDims, "expand_dims", F64C, 1, {2}, {{2, 3}}, b_expand_dims, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Squeeze, "squeeze", F64C, 1, {3}, {{2, 1, 3}}, b_squeeze, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Tile, "tile", F64C, 1, {2}, {{2, 3}}, b_tile, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Tile, "tile3", F64C, 1, {3}, {{2, 3, 2}}, b_tile3, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Pad, "pad", F64C, 1, {2}, {{2, 3}}, b_pad, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Gather, "gather_axis0", F64C, 2, {2, 1}, {{5, 3}, {7}}, b_gather0, -1, 1, 0, 0, 0, 2, 5},
    {LOOM_OP_Gather, "gather_axis0_rank2_idx", F64C, 2, {2, 2}, {{5, 3}, {2, 3}}, b_gather0, -1, 1, 0, 0, 0, 2, 5},
    {LOOM_OP_Gather, "gather_axis0_scalar_idx", F64C, 2, {2, 0}, {{5, 3}, {0}}, b_gather0, -1, 1, 0, 0, 0, 2, 5},
    {LOOM_OP_Gather, "gather_axis1", F64C, 2, {3, 2}, {{3, 4, 2}, {2, 3}}, b_gather1, -1, 1, 0, 0, 0, 2, 4},
    {LOOM_OP_Gather, "gather_axis1_scalar_idx", F64C, 2, {3, 0}, {{3, 4, 2}, {0}}, b_gather1, -1, 1, 0, 0, 0, 2, 4},
    {LOOM_OP_Gather, "gather_last", F64C, 2, {2, 1}, {{3, 4}, {5}}, b_gather_last, -1, 1, 0, 0, 0, 2, 4},
    {LOOM_OP_ScatterAdd, "scatter_add", F64C, 3, {2, 1, 2}, {{5, 3}, {4}, {4, 3}}, b_scatter_add, -1, 1, 0, 0, 0, 2,
     5},
    {LOOM_OP_ScatterUpdate, "scatter_update_dups", F64C, 3, {2, 1, 2}, {{4, 3}, {6}, {6, 3}}, b_scatter_update, -1, 1,
     0, 0, 0, 2, 4},
    {LOOM_OP_UnsortedSegmentSum, "segment_sum", F64C, 2, {2, 1}, {{6, 2}, {6}}, b_segment_sum, -1, 1, 0, 0, 0, 2, 4},
    {LOOM_OP_UnsortedSegmentMean, "segment_mean", F64C, 2, {2, 1}, {{6, 2}, {6}}, b_segment_mean, -1, 1, 0, 0, 0, 2, 4},
    {LOOM_OP_UnsortedSegmentSqrtN, "segment_sqrtn", F64C, 2, {3, 1}, {{6, 2, 2}, {6}}, b_segment_sqrtn, -1, 1, 0, 0, 0,
     2, 4},
    {LOOM_OP_Cast, "cast_f32_f64", LOOM_F32, 1, {2}, {{2, 3}}, b_cast_up, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Fill, "fill", F64C, 1, {0}, {{0}}, b_fill, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_TopK, "top_k", F64C, 1, {2}, {{3, 5}}, b_top_k, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_TopK, "top_k_rank3", F64C, 1, {3}, {{2, 2, 4}}, b_top_k, -1, 1, 0, 0, 0, 0, 0},
};
