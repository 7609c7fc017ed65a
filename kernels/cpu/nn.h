/* CPU kernels of the nn family (kernels/cpu/nn.c: softmax, cross entropies,
 * pools, l2_normalize; kernels/cpu/conv.c: Conv2D and its gradients). */
#ifndef LOOM_KERNELS_CPU_NN_H
#define LOOM_KERNELS_CPU_NN_H
#include "kernels/kernel.h"
#include "kernels/geometry.h" /* loom__conv_out_size (ops/nn.c) */

#define LOOM_NN_KERNELS(X) \
  X(softmax)               \
  X(log_softmax)           \
  X(softmax_xent)          \
  X(sparse_softmax_xent)   \
  X(sigmoid_xent)          \
  X(l2_normalize)          \
  X(max_pool)              \
  X(avg_pool)              \
  X(max_pool_grad)         \
  X(avg_pool_grad)         \
  X(conv2d)                \
  X(conv2d_backprop_input) \
  X(conv2d_backprop_filter)

#define LOOM_NN_DECL(op)                               \
  loom_code loom__k_##op##_f32(const loom_kctx *ctx); \
  loom_code loom__k_##op##_f64(const loom_kctx *ctx);
LOOM_NN_KERNELS(LOOM_NN_DECL)
#undef LOOM_NN_DECL

/* Scratch (im2col column buffers) of the convolution kernels. */
size_t loom__ws_conv2d(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                       const loom_buf *const *out);
size_t loom__ws_conv2d_backprop_input(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                      const loom_buf *const *out);
size_t loom__ws_conv2d_backprop_filter(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                       const loom_buf *const *out);

#endif
