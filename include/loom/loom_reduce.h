/* loom_reduce.h - builders of the reduce op family: reductions over axes,
 * arg-extremes, matrix products and bias ops. Each adds one node to g and
 * returns its output; name may be NULL (the op's name, made unique). Errors
 * follow the sticky rule of loom_graph.h.
 *
 * Reductions take `naxes` axes from `axes` (naxes == -1: every axis, axes may
 * be NULL; naxes == 0: no axis, the identity). Axes may be negative (counted
 * from the end); an out-of-range or repeated axis is an INVALID_ARGUMENT error.
 * keepdims != 0 keeps reduced axes as size 1. */
#ifndef LOOM_REDUCE_H
#define LOOM_REDUCE_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Sum over axes (TF Sum). f32, f64, i32, i64. An empty reduction gives 0. */
LOOM_API loom_output loom_reduce_sum(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                                     const char *name);
/* Mean over axes (TF Mean). f32, f64. The mean of zero elements is NaN. */
LOOM_API loom_output loom_reduce_mean(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                                      const char *name);
/* Maximum over axes (TF Max); NaN propagates. f32, f64, i32, i64. Reducing
 * zero elements into a non-empty output is an INVALID_ARGUMENT run-time error. */
LOOM_API loom_output loom_reduce_max(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                                     const char *name);
/* Minimum over axes (TF Min); like loom_reduce_max. */
LOOM_API loom_output loom_reduce_min(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                                     const char *name);
/* Product over axes (TF Prod). f32, f64, i32, i64. An empty reduction gives 1. */
LOOM_API loom_output loom_reduce_prod(loom_graph *g, loom_output x, int naxes, const int64_t *axes, int keepdims,
                                      const char *name);
/* log(sum(exp(x))) over axes, computed stably like TF reduce_logsumexp
 * (max subtracted first; -inf for an empty reduction). f32, f64. */
LOOM_API loom_output loom_reduce_logsumexp(loom_graph *g, loom_output x, int naxes, const int64_t *axes,
                                           int keepdims, const char *name);

/* Index of the largest element along `axis` (negative counts from the end);
 * the axis is removed. Ties give the smallest index. `out` is LOOM_I64
 * (also when 0) or LOOM_I32. Not differentiable. An empty axis is a run-time error. */
LOOM_API loom_output loom_argmax(loom_graph *g, loom_output x, int64_t axis, loom_dtype out, const char *name);
/* Index of the smallest element along `axis`; like loom_argmax. */
LOOM_API loom_output loom_argmin(loom_graph *g, loom_output x, int64_t axis, loom_dtype out, const char *name);

/* Sums dy over the dimensions that broadcasting added or stretched to get
 * from x's shape to dy's; the result has x's shape and dy's dtype (x is read
 * only for its shape). Used by gradients of broadcasting ops. */
LOOM_API loom_output loom_reduce_sum_like(loom_graph *g, loom_output dy, loom_output x, const char *name);

/* op(a) x op(b) for rank-2 a and b (TF MatMul); op transposes when the flag is
 * set. f32 or f64 (same dtype). Incompatible inner dimensions are an
 * INVALID_ARGUMENT error naming both shapes. */
LOOM_API loom_output loom_matmul(loom_graph *g, loom_output a, loom_output b, int transpose_a, int transpose_b,
                                 const char *name);
/* Batched matrix product (TF BatchMatMulV2): a [..., M, K], b [..., K, N]
 * (adj_x / adj_y transpose the last two axes); the batch dimensions broadcast.
 * f32 or f64. */
LOOM_API loom_output loom_batch_matmul(loom_graph *g, loom_output a, loom_output b, int adj_x, int adj_y,
                                       const char *name);

/* value [..., C] + bias [C] (TF BiasAdd, NHWC). value rank >= 2. */
LOOM_API loom_output loom_bias_add(loom_graph *g, loom_output value, loom_output bias, const char *name);
/* Gradient of BiasAdd for bias: dy [..., C] summed over all but the last axis -> [C]. */
LOOM_API loom_output loom_bias_add_grad(loom_graph *g, loom_output dy, const char *name);

#ifdef __cplusplus
}
#endif
#endif
