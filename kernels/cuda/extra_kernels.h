/* kernels/cuda/extra_kernels.h - CUDA kernels of selection, clipping,
 * scatter/segment, sparse optimizer and schedule ops (kernels/cuda/extra.cu),
 * listed as in cuda_kernels.h. */
#ifndef LOOM_CUDA_EXTRA_KERNELS_H
#define LOOM_CUDA_EXTRA_KERNELS_H
#define LOOM_CUDA_EXTRA_KERNELS(K)
#endif
