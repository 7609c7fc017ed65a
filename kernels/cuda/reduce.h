/* kernels/cuda/reduce.h - CUDA kernels of the reduce family (kernels/cuda/reduce.cu;
 * CPU: kernels/cpu/reduce.c): reductions over axes, ArgMax/ArgMin,
 * ReduceSumLike, BiasAdd, BiasAddGrad. */
#ifndef LOOM_CUDA_REDUCE_H
#define LOOM_CUDA_REDUCE_H
#include "kernels/cuda/kernel_list.h"

#define LOOM_CUDA_REDUCE_KERNELS(K) \
  LOOM_CU_NUM(K, Sum, sum) LOOM_CU_FLT(K, Mean, mean) LOOM_CU_NUM(K, Max, max) LOOM_CU_NUM(K, Min, min)     \
  LOOM_CU_NUM(K, Prod, prod) LOOM_CU_FLT(K, LogSumExp, logsumexp) LOOM_CU_NUM(K, ReduceSumLike, reduce_sum_like) \
  LOOM_CU_NUM(K, ArgMax, argmax) LOOM_CU_NUM(K, ArgMin, argmin)                                             \
  LOOM_CU_NUM(K, BiasAdd, bias_add) LOOM_CU_NUM(K, BiasAddGrad, bias_add_grad)

LOOM_CU_DECLARE_LIST(LOOM_CUDA_REDUCE_KERNELS)
#endif
