/* kernels/cuda/conv.h - CUDA kernels of the conv family (kernels/cuda/conv.cu;
 * CPU: kernels/cpu/conv.c): Conv2D and its backprops (f32). */
#ifndef LOOM_CUDA_CONV_H
#define LOOM_CUDA_CONV_H
#include "kernels/cuda/kernel_list.h"

#define LOOM_CUDA_CONV_KERNELS(K) \
  K(Conv2D, conv2d, f32) K(Conv2DBackpropInput, conv2d_backprop_input, f32)                                 \
  K(Conv2DBackpropFilter, conv2d_backprop_filter, f32)

LOOM_CU_DECLARE_LIST(LOOM_CUDA_CONV_KERNELS)
#endif
