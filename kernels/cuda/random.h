/* kernels/cuda/random.h - CUDA kernels of the random family (kernels/cuda/random.cu;
 * CPU: kernels/cpu/random.c; Philox4x32-10, the same streams as the CPU). */
#ifndef LOOM_CUDA_RANDOM_H
#define LOOM_CUDA_RANDOM_H
#include "kernels/cuda/kernel_list.h"

#define LOOM_CUDA_RANDOM_KERNELS(K) \
  LOOM_CU_FLT(K, RandomUniform, random_uniform) LOOM_CU_FLT(K, RandomStandardNormal, random_normal)         \
  LOOM_CU_FLT(K, TruncatedNormal, truncated_normal) LOOM_CU_FLT(K, Dropout, dropout)

LOOM_CU_DECLARE_LIST(LOOM_CUDA_RANDOM_KERNELS)
#endif
