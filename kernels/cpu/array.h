/* CPU kernels of the array family. "_any" kernels move bytes by element
 * size and are registered for every fixed-size dtype (f32, f64, i32, i64,
 * u8, bool); the generic ones (cast, one_hot, shape, range) switch on the
 * dtypes themselves and are registered as kernels[CPU][0]. */
#ifndef LOOM_KERNELS_CPU_ARRAY_H
#define LOOM_KERNELS_CPU_ARRAY_H
#include "kernels/kernel.h"

/* data movement (any fixed-size dtype) */
loom_code loom__k_broadcast_any(const loom_kctx *ctx);  /* BroadcastTo, BroadcastLike */
loom_code loom__k_transpose_any(const loom_kctx *ctx);
loom_code loom__k_concat_any(const loom_kctx *ctx);     /* ConcatV2, Pack */
loom_code loom__k_split_any(const loom_kctx *ctx);      /* Split, SplitV, Unpack */
loom_code loom__k_slice_any(const loom_kctx *ctx);
loom_code loom__k_tile_any(const loom_kctx *ctx);
loom_code loom__k_pad_any(const loom_kctx *ctx);
loom_code loom__k_gather_any(const loom_kctx *ctx);
loom_code loom__k_scatter_update_any(const loom_kctx *ctx);
loom_code loom__k_fill_any(const loom_kctx *ctx);
loom_code loom__k_zeros_like_any(const loom_kctx *ctx);
loom_code loom__k_ones_like_any(const loom_kctx *ctx);

/* typed */
loom_code loom__k_scatter_add_f32(const loom_kctx *ctx);
loom_code loom__k_scatter_add_f64(const loom_kctx *ctx);
loom_code loom__k_scatter_add_i32(const loom_kctx *ctx);
loom_code loom__k_scatter_add_i64(const loom_kctx *ctx);
loom_code loom__k_segment_sum_f32(const loom_kctx *ctx);
loom_code loom__k_segment_sum_f64(const loom_kctx *ctx);
loom_code loom__k_segment_sum_i32(const loom_kctx *ctx);
loom_code loom__k_segment_sum_i64(const loom_kctx *ctx);
loom_code loom__k_segment_mean_f32(const loom_kctx *ctx);
loom_code loom__k_segment_mean_f64(const loom_kctx *ctx);
loom_code loom__k_segment_sqrtn_f32(const loom_kctx *ctx);
loom_code loom__k_segment_sqrtn_f64(const loom_kctx *ctx);
loom_code loom__k_top_k_f32(const loom_kctx *ctx);
loom_code loom__k_top_k_f64(const loom_kctx *ctx);
loom_code loom__k_top_k_i32(const loom_kctx *ctx);
loom_code loom__k_top_k_i64(const loom_kctx *ctx);
loom_code loom__k_top_k_u8(const loom_kctx *ctx);

/* generic (switch on dtypes inside) */
loom_code loom__k_cast_any(const loom_kctx *ctx);
loom_code loom__k_one_hot_any(const loom_kctx *ctx);
loom_code loom__k_shape_any(const loom_kctx *ctx);
loom_code loom__k_range_any(const loom_kctx *ctx);

#endif
