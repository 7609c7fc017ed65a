/* kernels/cuda/nn.h - CUDA kernels of the nn family (kernels/cuda/nn.cu;
 * CPU: kernels/cpu/nn.c): softmax, cross entropies, L2Normalize, pooling. */
#ifndef LOOM_CUDA_NN_H
#define LOOM_CUDA_NN_H
#include "kernels/cuda/kernel_list.h"

#define LOOM_CUDA_NN_KERNELS(K) \
  LOOM_CU_FLT(K, Softmax, softmax) LOOM_CU_FLT(K, LogSoftmax, log_softmax)                                  \
  LOOM_CU_FLT(K, SoftmaxCrossEntropyWithLogits, softmax_xent)                                               \
  LOOM_CU_FLT(K, SparseSoftmaxCrossEntropyWithLogits, sparse_softmax_xent)                                  \
  LOOM_CU_FLT(K, SigmoidCrossEntropyWithLogits, sigmoid_xent) LOOM_CU_FLT(K, L2Normalize, l2_normalize)     \
  K(MaxPool, max_pool, f32) K(AvgPool, avg_pool, f32) K(MaxPoolGrad, max_pool_grad, f32)                    \
  K(AvgPoolGrad, avg_pool_grad, f32)

LOOM_CU_DECLARE_LIST(LOOM_CUDA_NN_KERNELS)
#endif
