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

/* A Conv2DBackpropFilter folded into the MaxPoolGrad whose result is its dy (engine/fuse.c): the
 * MaxPoolGrad makes dy one image at a time (make: image n into dst; first: 1 for the first call
 * for that image) and the filter gradient adds each while it is in cache; dy itself is never
 * written. loom__conv_dw_images_ws: the workspace that needs (x, dy, df: the filter gradient's
 * input, dy and output), 0 when this geometry is not done so. loom__conv_dw_images_*: computes
 * dw's output with the workspace of ctx (the MaxPoolGrad's step). */
typedef void (*loom_dy_image_fn)(void *arg, int64_t n, void *dst, int first);
size_t loom__conv_dw_images_ws(const loom_attrs *a, const loom_buf *x, const loom_buf *dy, const loom_buf *df);
loom_code loom__conv_dw_images_f32(const loom_kctx *ctx, const loom_kctx *dw, loom_dy_image_fn make, void *arg);
loom_code loom__conv_dw_images_f64(const loom_kctx *ctx, const loom_kctx *dw, loom_dy_image_fn make, void *arg);

/* A Conv2DBackpropFilter whose dy is the result of a MaxPoolGrad that routes by the winners of a
 * 2x2 stride-2 max pool (kernels/kernel.h: argmax) with its ReluGrad folded (engine/fuse.c): dy is
 * zero but at each window's winner (code 0-3, none for 4), so the filter gradient is summed over
 * the pooled values alone, each times its winner's input window (vectors over input channels: a
 * quarter of the direct loops' products; or over output channels where the input channels are
 * few), added exactly (no Winograd rounding), in a fixed order (partitions of whole images by the
 * shape, added in order). loom__conv_dw_winners_ws: the workspace that needs (x, dy, df: the
 * filter gradient's input, dy and output), 0 when this geometry is not done so (stride and dilation
 * 1, even output rows and columns, 3x3 or 5x5 windows). loom__conv_dw_winners_*: computes dw's
 * output from dpool (the MaxPoolGrad's dy, [N, OH/2, OW/2, O]) and code (the winners, same shape)
 * with the workspace of ctx (the MaxPoolGrad's step); and, where colsum is not NULL, each image's
 * column sums of the pooled values at winners (colsum[n*O + o], in double, over the pooled values in
 * order: what a BiasAddGrad over the unwritten result adds up). */
size_t loom__conv_dw_winners_ws(const loom_attrs *a, const loom_buf *x, const loom_buf *dy, const loom_buf *df);
loom_code loom__conv_dw_winners_f32(const loom_kctx *ctx, const loom_kctx *dw, const float *dpool,
                                    const uint8_t *code, double *colsum);
loom_code loom__conv_dw_winners_f64(const loom_kctx *ctx, const loom_kctx *dw, const double *dpool,
                                    const uint8_t *code, double *colsum);

/* Image n of the result of MaxPoolGrad step mpg, which routes by its pool's winners (kernels/kernel.h:
 * argmax): dy's pooled values at their winners, zeros elsewhere, row r at dst + r * rs elements
 * (kernels/kernel.h: route). */
void loom__max_pool_route_image_f32(const loom_kctx *mpg, int64_t n, void *dst, int64_t rs);
void loom__max_pool_route_image_f64(const loom_kctx *mpg, int64_t n, void *dst, int64_t rs);

/* Whether a Conv2DBackpropInput (attrs a, filter f, dy, output dx) runs the Winograd loops over a
 * zero-padded copy of each whole image of dy, so that it can make those images itself from a
 * routing MaxPoolGrad's pooled values (kernels/kernel.h: routed). */
int loom__conv_dx_routable(const loom_attrs *a, const loom_buf *f, const loom_buf *dy, const loom_buf *dx);
/* Whether such a routed input gradient is made from the pool's winners directly, no routed dy made
 * (kernels/cpu/conv.c: wdx): a 5x5 SAME convolution at stride 1 over even rows and columns, on
 * AVX-512 with whole vectors of input channels; else by the Winograd loops over the routed dy. */
int loom__conv_dx_winners_fit(const loom_attrs *a, const loom_buf *f, const loom_buf *dy, const loom_buf *dx);

#endif
