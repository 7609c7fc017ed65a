/* kernels/cuda/extra_kernels.h - CUDA kernels of selection, clipping,
 * scatter/segment (sum/mean/sqrt n: grouped by a device sort, no atomics),
 * sparse optimizer and schedule ops (kernels/cuda/extra.cu),
 * listed as in cuda_kernels.h. */
#ifndef LOOM_CUDA_EXTRA_KERNELS_H
#define LOOM_CUDA_EXTRA_KERNELS_H
#define LOOM_CUDA_EXTRA_KERNELS(K)                                                                            \
  K(Select, select, f32) K(Select, select, f64) K(Select, select, i32) K(Select, select, i64)                  \
  K(Select, select, u8) K(Select, select, bool)                                                               \
  LOOM_CU_NUM(K, ClipByValue, clip_by_value) LOOM_CU_FLT(K, L2Normalize, l2_normalize)                        \
  LOOM_CU_NUM(K, TopK, top_k) K(TopK, top_k, u8)                                                              \
  /* functional scatters, ref (variable) scatters, segment mean / sqrt(n) */                                  \
  LOOM_CU_NUM(K, ScatterAdd, scatter_add) K(ScatterUpdate, scatter_update, any)                               \
  K(RefScatterUpdate, ref_scatter_update, any) K(RefScatterAdd, ref_scatter_add, any)                         \
  K(RefScatterSub, ref_scatter_sub, any)                                                                      \
  LOOM_CU_NUM(K, UnsortedSegmentSum, segment_sum)                                                            \
  LOOM_CU_FLT(K, UnsortedSegmentMean, segment_mean) LOOM_CU_FLT(K, UnsortedSegmentSqrtN, segment_sqrtn)       \
  /* sparse optimizers (f32, TF's formulas; duplicate indices summed first) and schedules */                  \
  K(SparseApplyGradientDescent, sparse_apply_gradient_descent, f32)                                          \
  K(SparseApplyMomentum, sparse_apply_momentum, f32) K(SparseApplyAdagrad, sparse_apply_adagrad, f32)         \
  K(SparseApplyAdam, sparse_apply_adam, f32) K(SparseApplyFtrlV2, sparse_apply_ftrl, f32)                     \
  K(SparseApplyRMSProp, sparse_apply_rmsprop, f32)                                                            \
  K(SparseApplyCenteredRMSProp, sparse_apply_centered_rmsprop, f32)                                           \
  K(SparseApplyAdadelta, sparse_apply_adadelta, f32) K(LearningRateSchedule, lr_schedule, f32)
#endif
