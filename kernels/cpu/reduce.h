/* CPU kernels of the reduce family: reductions over axes, ArgMax/ArgMin,
 * ReduceSumLike, BiasAdd/BiasAddGrad. Matrix products are in linalg.h. */
#ifndef LOOM_KERNELS_CPU_REDUCE_H
#define LOOM_KERNELS_CPU_REDUCE_H
#include "kernels/kernel.h"

/* Reduction kinds understood by loom__reduce_run. */
enum { LOOM_RED_SUM = 0, LOOM_RED_MEAN, LOOM_RED_PROD, LOOM_RED_MAX, LOOM_RED_MIN, LOOM_RED_LSE };

/* Bit mask of the reduced axes of a rank-`ndim` input from attrs->naxes /
 * attrs->axes (naxes -1 = all, negative axes count from the end). Returns 0,
 * or -1 on an out-of-range axis, -2 on a duplicate axis, -3 on a bad naxes
 * (*bad gets the offending axis value when not NULL). */
int loom__reduce_mask(const loom_attrs *a, int ndim, uint32_t *mask, int64_t *bad);
/* Mask of the dims of dy (rank ndy) that were broadcast from x (rank nx):
 * the leading ndy-nx dims and those where x has 1 and dy does not. Returns
 * -1 when x's shape does not broadcast to dy's. */
int loom__sum_like_mask(int ndy, const int64_t *dy, int nx, const int64_t *x, uint32_t *mask);
/* Scratch bytes a reduction of `dims` over `mask` needs (elements of elem bytes). */
size_t loom__reduce_ws_bytes(int ndim, const int64_t *dims, uint32_t mask, size_t elem);
/* y = reduce(x over mask); y has numel = product of the kept dims (its shape is
 * not read). ws must hold loom__reduce_ws_bytes bytes. `what` names the op in
 * error messages. */
loom_code loom__reduce_run(int kind, const loom_buf *x, uint32_t mask, loom_buf *y, void *ws, loom_pool *pool,
                           loom_status *st, const char *what);

#define LOOM_RED_KERNELS(X) \
  X(sum, f32) X(sum, f64) X(sum, i32) X(sum, i64) \
  X(mean, f32) X(mean, f64) \
  X(max, f32) X(max, f64) X(max, i32) X(max, i64) \
  X(min, f32) X(min, f64) X(min, i32) X(min, i64) \
  X(prod, f32) X(prod, f64) X(prod, i32) X(prod, i64) \
  X(logsumexp, f32) X(logsumexp, f64) \
  X(argmax, f32) X(argmax, f64) X(argmax, i32) X(argmax, i64) \
  X(argmin, f32) X(argmin, f64) X(argmin, i32) X(argmin, i64) \
  X(reduce_sum_like, f32) X(reduce_sum_like, f64) X(reduce_sum_like, i32) X(reduce_sum_like, i64) \
  X(bias_add, f32) X(bias_add, f64) X(bias_add, i32) X(bias_add, i64) \
  X(bias_add_grad, f32) X(bias_add_grad, f64) X(bias_add_grad, i32) X(bias_add_grad, i64)

#define LOOM_RED_DECL(op, dt) loom_code loom__k_##op##_##dt(const loom_kctx *ctx);
LOOM_RED_KERNELS(LOOM_RED_DECL)
#undef LOOM_RED_DECL

#endif
