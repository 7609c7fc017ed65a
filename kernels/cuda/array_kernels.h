/* kernels/cuda/array_kernels.h - CUDA kernels of the layout ops
 * (kernels/cuda/array.cu), listed as in cuda_kernels.h. */
#ifndef LOOM_CUDA_ARRAY_KERNELS_H
#define LOOM_CUDA_ARRAY_KERNELS_H
#define LOOM_CUDA_ARRAY_KERNELS(K)
#endif
