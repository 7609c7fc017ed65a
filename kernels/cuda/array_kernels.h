/* kernels/cuda/array_kernels.h - CUDA kernels of the layout ops
 * (kernels/cuda/array.cu), listed as in cuda_kernels.h. All move elements by
 * size (the "any" slot: f32, f64, i32, i64, u8, bool, as on the CPU); Range
 * switches on its output dtype (f32, f64, i32, i64), OneHot on its index
 * (i32, i64, u8) and output dtypes, Shape writes i32 or i64. Reshape,
 * ReshapeLike, ExpandDims, Squeeze and StopGradient are views (no kernel). */
#ifndef LOOM_CUDA_ARRAY_KERNELS_H
#define LOOM_CUDA_ARRAY_KERNELS_H
#define LOOM_CUDA_ARRAY_KERNELS(K)                                                              \
  K(BroadcastTo, broadcast, any) K(BroadcastLike, broadcast, any) K(Transpose, transpose, any)  \
  K(Slice, slice, any) K(Tile, tile, any) K(Pad, pad, any)                                      \
  K(Concat, concat, any) K(Pack, concat, any)                                                   \
  K(Split, split, any) K(SplitV, split, any) K(Unpack, split, any)                              \
  K(Fill, fill, any) K(Range, range, any) K(OneHot, one_hot, any) K(Shape, shape, any)
#endif
