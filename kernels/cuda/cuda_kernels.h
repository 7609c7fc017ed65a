/* kernels/cuda/cuda_kernels.h - every CUDA kernel: the union of the family
 * lists (kernels/cuda/<family>.h, one per CPU family in kernels/cpu/; see
 * kernels/cuda/kernel_list.h). ops/bind_cuda.c binds each family's list. */
#ifndef LOOM_CUDA_KERNELS_H
#define LOOM_CUDA_KERNELS_H
#include "kernels/cuda/array.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/linalg.h"
#include "kernels/cuda/math.h"
#include "kernels/cuda/nn.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/random.h"
#include "kernels/cuda/reduce.h"

#define LOOM_CUDA_KERNELS(K)                                                                                 \
  LOOM_CUDA_ARRAY_KERNELS(K) LOOM_CUDA_CONV_KERNELS(K) LOOM_CUDA_LINALG_KERNELS(K) LOOM_CUDA_MATH_KERNELS(K) \
  LOOM_CUDA_NN_KERNELS(K) LOOM_CUDA_OPTIM_KERNELS(K) LOOM_CUDA_RANDOM_KERNELS(K) LOOM_CUDA_REDUCE_KERNELS(K)

#endif
