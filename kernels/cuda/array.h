/* kernels/cuda/array.h - CUDA kernels of the array family (kernels/cuda/array.cu;
 * CPU: kernels/cpu/array.c). The layout ops move elements by size (the
 * "any" slot: f32, f64, i32, i64, u8, bool, as on the CPU); Range switches
 * on its output dtype, OneHot on its index and output dtypes, Shape writes
 * i32 or i64. Reshape, ReshapeLike, ExpandDims, Squeeze and StopGradient
 * are views (no kernel). NoOp (no CPU family: ops/core.c) lives here too. */
#ifndef LOOM_CUDA_ARRAY_H
#define LOOM_CUDA_ARRAY_H
#include "kernels/cuda/kernel_list.h"

#define LOOM_CUDA_ARRAY_KERNELS(K) \
  K(NoOp, noop, any) K(ZerosLike, zeros_like, any) K(OnesLike, ones_like, any) K(Cast, cast, any)          \
  K(BroadcastTo, broadcast, any) K(BroadcastLike, broadcast, any) K(Transpose, transpose, any)              \
  K(Slice, slice, any) K(Tile, tile, any) K(Pad, pad, any)                                                  \
  K(Concat, concat, any) K(Pack, concat, any)                                                               \
  K(Split, split, any) K(SplitV, split, any) K(Unpack, split, any)                                          \
  K(Fill, fill, any) K(Range, range, any) K(OneHot, one_hot, any) K(Shape, shape, any)                      \
  K(Gather, gather, any) LOOM_CU_NUM(K, TopK, top_k) K(TopK, top_k, u8)                                     \
  /* functional scatters and segments (sum/mean/sqrt n: grouped by a device sort, no atomics) */           \
  LOOM_CU_NUM(K, ScatterAdd, scatter_add) K(ScatterUpdate, scatter_update, any)                             \
  LOOM_CU_NUM(K, UnsortedSegmentSum, segment_sum)                                                           \
  LOOM_CU_FLT(K, UnsortedSegmentMean, segment_mean) LOOM_CU_FLT(K, UnsortedSegmentSqrtN, segment_sqrtn)

LOOM_CU_DECLARE_LIST(LOOM_CUDA_ARRAY_KERNELS)
#endif
