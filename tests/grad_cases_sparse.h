/* Gradient-check cases for the sparse family (ops/sparse.def.h):
 * SparseEmbedding's gradient with respect to params (sparse, densified by
 * loom_gradients; pruned entries carry index LOOM_NO_ROW_*) for each combiner, with and
 * without weights, with max_norm clipping; MultiHotConcat (input_layer's
 * output) with respect to its dense pieces, between multi-hot and one-hot
 * pieces. DenseToRagged, RaggedMultiHot and SparseEmbeddingGrad are marked
 * not differentiable.
 * Included by tests/test_grad.c, which defines grad_case, UN, BIN and F64C
 * (LOOM_F64). Each row:
 * {op, label, dtype, nin, {ranks}, {{dims}...}, builder, lo, hi, away, nodiff, tol, int_input, int_hi} */

#include "ops/sparse_internal.h"

/* ---- sparse ---- */
/* params x[0] [6, 3]; rows: {1, 4, 1}, {}, {-1, 5}, {0, 3, 2, 3}, {2} with
 * weights pruning id 5 (0) and one 3 (-1) */
static loom_output b_sparse_emb(loom_graph *g, const loom_output *x, int comb, int weighted, double max_norm) {
  static const int64_t ids[10] = {1, 4, 1, -1, 5, 0, 3, 2, 3, 2}, sp[6] = {0, 3, 3, 5, 9, 10};
  static const float w[10] = {0.5f, 2, 1.5f, 3, 0, 1, -1, 0.75f, 2.5f, 1.25f};
  int64_t n = 10, ns = 6;
  loom_sparse r = {loom_const_data(g, LOOM_I64, 1, &n, ids, NULL), loom_const_data(g, LOOM_I64, 1, &ns, sp, NULL)};
  loom_output wt = weighted ? loom_const_data(g, LOOM_F32, 1, &n, w, NULL) : (loom_output){NULL, 0};
  return loom_sparse_embedding(g, x[0], r, wt, (loom_combiner)comb, max_norm, NULL);
}
#define EMB_CASE(nm, comb, weighted, max_norm) \
  static loom_output b_emb_##nm(loom_graph *g, const loom_output *x) { return b_sparse_emb(g, x, comb, weighted, max_norm); }
EMB_CASE(sum, 0, 0, 0)
EMB_CASE(mean, 1, 0, 0)
EMB_CASE(sqrtn, 2, 0, 0)
EMB_CASE(sum_w, 0, 1, 0)
EMB_CASE(mean_w, 1, 1, 0)
EMB_CASE(sqrtn_w, 2, 1, 0)
EMB_CASE(sum_clip, 0, 0, 0.6)
EMB_CASE(mean_w_clip, 1, 1, 0.6)
EMB_CASE(sqrtn_w_clip, 2, 1, 0.6)
#undef EMB_CASE

/* pieces: x[0] [3, 2] dense, ragged ids (depth 4), x[1] [3, 1] dense,
 * one-hot ids [3, 2] (depth 3), weighted ragged ids (depth 2) */
static loom_output b_multi_hot_concat(loom_graph *g, const loom_output *x) {
  static const int64_t ids[4] = {0, 3, 3, 1}, sp[4] = {0, 2, 2, 4}, oh[6] = {0, 2, 1, 1, 2, 0};
  static const float w[4] = {0.5f, -1, 2, 1};
  int64_t n = 4, ns = 4, od[2] = {3, 2};
  loom_output in[9] = {x[0],
                       loom_const_data(g, LOOM_I64, 1, &n, ids, NULL),
                       loom_const_data(g, LOOM_I64, 1, &ns, sp, NULL),
                       x[1],
                       loom_const_data(g, LOOM_I64, 2, od, oh, NULL),
                       loom_const_data(g, LOOM_I64, 1, &n, ids, NULL),
                       loom_const_data(g, LOOM_I64, 1, &ns, sp, NULL),
                       loom_const_data(g, LOOM_F32, 1, &n, w, NULL)};
  static const int32_t kind[5] = {LOOM__MHC_DENSE, LOOM__MHC_RAGGED, LOOM__MHC_DENSE, LOOM__MHC_ONEHOT,
                                  LOOM__MHC_RAGGED_W};
  static const int64_t depth[5] = {0, 4, 0, 3, 4};
  return loom__multi_hot_concat(g, 5, kind, depth, 8, in, NULL);
}

#define EMB_ROW(nm) \
  {LOOM_OP_SparseEmbedding, "sparse_embedding_" #nm, LOOM_F32, 1, {2}, {{6, 3}}, b_emb_##nm, -1, 1, 0, 0, 0, 0, 0}
static const grad_case CASES_SPARSE[] = {
    EMB_ROW(sum),      EMB_ROW(mean),        EMB_ROW(sqrtn),       EMB_ROW(sum_w),      EMB_ROW(mean_w),
    EMB_ROW(sqrtn_w),  EMB_ROW(sum_clip),    EMB_ROW(mean_w_clip), EMB_ROW(sqrtn_w_clip),
    {LOOM_OP_MultiHotConcat, "multi_hot_concat", LOOM_F32, 2, {2, 2}, {{3, 2}, {3, 1}}, b_multi_hot_concat, -1, 1, 0, 0, 0, 0, 0},
};
#undef EMB_ROW
