/* kernels/cuda/linalg.h - CUDA kernels of the linalg family (kernels/cuda/linalg.cu;
 * CPU: kernels/cpu/linalg.c): MatMul, BatchMatMul (cuBLAS). */
#ifndef LOOM_CUDA_LINALG_H
#define LOOM_CUDA_LINALG_H
#include "kernels/cuda/kernel_list.h"

#define LOOM_CUDA_LINALG_KERNELS(K) \
  LOOM_CU_FLT(K, MatMul, matmul) LOOM_CU_FLT(K, BatchMatMul, batch_matmul)

LOOM_CU_DECLARE_LIST(LOOM_CUDA_LINALG_KERNELS)
#endif
