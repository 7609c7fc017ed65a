/* CPU kernels of the sparse family (ragged rows, see loom_sparse.h):
 * DenseToRagged, SparseEmbedding and its gradient, RaggedMultiHot.
 * Internal header (not installed). */
#ifndef LOOM_KERNELS_CPU_SPARSE_H
#define LOOM_KERNELS_CPU_SPARSE_H
#include "kernels/kernel.h"

/* Combiner codes (attrs.num of SparseEmbedding / SparseEmbeddingGrad); the
 * values of loom_combiner. */
enum { LOOM__COMB_SUM = 0, LOOM__COMB_MEAN = 1, LOOM__COMB_SQRTN = 2 };

/* Checks row splits `s` (int64 [B + 1]) against nnz values: s[0] = 0,
 * non-decreasing, s[B] = nnz. Writes the failure (without a node name) into
 * st and returns INVALID_ARGUMENT, else LOOM_OK. */
loom_code loom__check_row_splits(const loom_buf *s, int64_t nnz, loom_status *st);

/* DenseToRagged: number of values x keeps (attrs: keepdims = drop_ignore,
 * num = ignore_int); x any of string, i32, i64, f32, f64 (only strings and
 * ints are ever dropped). */
int64_t loom__dense_to_ragged_count(const loom_buf *x, int drop_ignore, int64_t ignore_int);
/* in: x [B, ...]; out: values [nnz] (x's dtype), row_splits [B + 1] int64.
 * String bytes are copied into ctx->strings (they point into x without it). */
loom_code loom__k_dense_to_ragged(const loom_kctx *ctx);

/* SparseEmbedding: in params [V, D] f32, ids [nnz] i32/i64, row_splits
 * [B + 1] i64, optional weights [nnz] f32; out [B, D] f32. attrs: num =
 * combiner, alpha = max_norm (<= 0: none). */
loom_code loom__k_sparse_embedding_f32(const loom_kctx *ctx);
/* SparseEmbeddingGrad: in dy [B, D], params, ids, row_splits, optional
 * weights; out indices [nnz] (the ids' dtype) and rows [nnz, D] f32: entry i's gradient
 * row under index ids[i], or index LOOM_NO_ROW_I32/I64 with a zero row for a pruned entry
 * (id < 0; weight <= 0 with the mean and sqrtn combiners). */
loom_code loom__k_sparse_embedding_grad_f32(const loom_kctx *ctx);

/* RaggedMultiHot: in ids [nnz] i32/i64, row_splits, optional weights f32;
 * out [B, depth] f32 (attrs.num = depth). */
loom_code loom__k_ragged_multi_hot(const loom_kctx *ctx);

/* RaggedPadIndex: in row_splits [B + 1] i64, optional expected lengths [B]
 * i64; out index [B, T(, k)] i64 and lengths [B] i64 (attrs: num = k,
 * keepdims = keep the k dim). T = the longest row's ceil(length / k);
 * slot (r, t, e) = row_splits[r] + t * k + e when inside row r, else
 * row_splits[B] (one past the last value: the padding row). */
int64_t loom__ragged_pad_steps(const int64_t *splits, int64_t B, int64_t k);
loom_code loom__k_ragged_pad_index(const loom_kctx *ctx);

/* MultiHotConcat: in[0] = layout int64 [2 * np] (kind, depth per piece;
 * ops/sparse_internal.h), then the pieces' inputs -> float32 [B, total]. */
loom_code loom__k_multi_hot_concat(const loom_kctx *ctx);

#endif
