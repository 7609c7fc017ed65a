/* kernels/cuda/optim.h - CUDA kernels of the optim family (kernels/cuda/optim.cu;
 * CPU: kernels/cpu/optim.c): assignment (dtype-agnostic), dense and sparse
 * optimizers (f32, TF's formulas; duplicate indices summed first), Ref
 * scatters, LearningRateSchedule. */
#ifndef LOOM_CUDA_OPTIM_H
#define LOOM_CUDA_OPTIM_H
#include "kernels/cuda/kernel_list.h"

#define LOOM_CUDA_OPTIM_KERNELS(K) \
  K(Assign, assign, any) K(AssignAdd, assign_add, any) K(AssignSub, assign_sub, any) K(AssignMul, assign_mul, any) \
  K(ApplyGradientDescent, apply_gradient_descent, f32) K(ApplyMomentum, apply_momentum, f32)                \
  K(ApplyAdagrad, apply_adagrad, f32) K(ApplyAdam, apply_adam, f32) K(ApplyFtrlV2, apply_ftrl, f32)         \
  K(ApplyRMSProp, apply_rmsprop, f32) K(ApplyCenteredRMSProp, apply_centered_rmsprop, f32)                  \
  K(ApplyAdadelta, apply_adadelta, f32)                                                                     \
  K(RefScatterUpdate, ref_scatter_update, any) K(RefScatterAdd, ref_scatter_add, any)                       \
  K(RefScatterSub, ref_scatter_sub, any)                                                                    \
  K(SparseApplyGradientDescent, sparse_apply_gradient_descent, f32)                                         \
  K(SparseApplyMomentum, sparse_apply_momentum, f32) K(SparseApplyAdagrad, sparse_apply_adagrad, f32)       \
  K(SparseApplyAdam, sparse_apply_adam, f32) K(SparseApplyFtrlV2, sparse_apply_ftrl, f32)                   \
  K(SparseApplyRMSProp, sparse_apply_rmsprop, f32)                                                          \
  K(SparseApplyCenteredRMSProp, sparse_apply_centered_rmsprop, f32)                                         \
  K(SparseApplyAdadelta, sparse_apply_adadelta, f32) K(LearningRateSchedule, lr_schedule, f32)

LOOM_CU_DECLARE_LIST(LOOM_CUDA_OPTIM_KERNELS)
#endif
