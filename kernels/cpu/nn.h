/* CPU kernels of the nn family (kernels/cpu/nn.c: softmax, cross entropies,
 * pools, l2_normalize; kernels/cpu/conv.c: Conv2D and its gradients). */
#ifndef LOOM_KERNELS_CPU_NN_H
#define LOOM_KERNELS_CPU_NN_H
#include "kernels/kernel.h"

/* TF's output size of one spatial dimension and the padding before it.
 * in < 0 (unknown) gives -1; VALID with a window larger than the input gives
 * -2 (an error: the output would be empty or negative; so does an empty
 * window, k == 0); an effective window (k - 1) * dilation + 1 past INT64_MAX
 * gives -3 (an error). Needs stride >= 1 and dilation >= 1; no overflow for
 * any in and k. */
static inline int64_t loom__conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t dilation, int padding,
                                          int64_t *pad_before) {
  int64_t ek = -1; /* effective window; -1 while k is unknown */
  if (pad_before) *pad_before = 0;
  if (k >= 0 && (__builtin_mul_overflow(k - 1, dilation, &ek) || __builtin_add_overflow(ek, 1, &ek))) return -3;
  if (in < 0) return -1;
  if (padding == LOOM_PAD_SAME) {
    int64_t out = in / stride + (in % stride != 0); /* ceil(in / stride) */
    if (pad_before && k >= 1) {
      /* (out - 1) * stride + ek - in, ordered so nothing overflows:
       * 0 <= (out - 1) * stride < in when out >= 1 */
      int64_t total = (ek - in) + (out - 1) * stride;
      *pad_before = total > 0 ? total / 2 : 0;
    }
    return out;
  }
  if (k < 1) return k < 0 ? -1 : -2;
  if (in < ek) return -2;
  return (in - ek) / stride + 1;
}

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
