/* loom_nn.h - builders of the nn op family. Each adds one node to g and
 * returns its output; name may be NULL (the op's name, made unique). Errors
 * follow the sticky rule of loom_graph.h.
 *
 * Images are NHWC ([batch, height, width, channels]); convolution filters are
 * HWIO ([height, width, in_channels, out_channels]). strides, ksize and
 * dilations are TF's 4-vectors in NHWC order ([1, h, w, 1]); NULL means all
 * ones. Padding follows TF exactly: VALID uses no padding; SAME gives
 * out = ceil(in / stride) and pads pad_total = max((out-1)*stride +
 * (k-1)*dilation + 1 - in, 0) with pad_total/2 before and the rest after.
 * float32 and float64 are supported. */
#ifndef LOOM_NN_H
#define LOOM_NN_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Padding schemes of convolutions and pools. */
enum { LOOM_PADDING_VALID = 0, LOOM_PADDING_SAME = 1 };

/* softmax over the last axis (numerically stable); rank >= 1. */
LOOM_API loom_output loom_softmax(loom_graph *g, loom_output logits, const char *name);
/* log(softmax) over the last axis: x - max - log(sum(exp(x - max))). */
LOOM_API loom_output loom_log_softmax(loom_graph *g, loom_output logits, const char *name);

/* TF SoftmaxCrossEntropyWithLogits: logits and labels [B, C] (labels are
 * probability rows). Outputs loss [B] = -sum(labels * log_softmax(logits))
 * and backprop [B, C] = softmax(logits) - labels. *loss / *backprop (either
 * may be NULL) receive the outputs; returns the loss. */
LOOM_API loom_output loom_softmax_cross_entropy_with_logits(loom_graph *g, loom_output logits, loom_output labels,
                                                            loom_output *loss, loom_output *backprop,
                                                            const char *name);
/* TF SparseSoftmaxCrossEntropyWithLogits: logits [B, C], labels [B] int32 or
 * int64 class indices. A label outside [0, C) fails the run with
 * INVALID_ARGUMENT ("labels[3] = 12 is not in [0, 10)"). Labels get no
 * gradient. Outputs as loom_softmax_cross_entropy_with_logits. */
LOOM_API loom_output loom_sparse_softmax_cross_entropy_with_logits(loom_graph *g, loom_output logits,
                                                                   loom_output labels, loom_output *loss,
                                                                   loom_output *backprop, const char *name);
/* tf.nn.sigmoid_cross_entropy_with_logits(labels, logits), elementwise on
 * same-shaped tensors: max(x, 0) - x*z + log(1 + exp(-|x|)) with x = logits,
 * z = labels. The node's inputs are (logits, labels). */
LOOM_API loom_output loom_sigmoid_cross_entropy_with_logits(loom_graph *g, loom_output labels, loom_output logits,
                                                            const char *name);

/* 2-D convolution (TF Conv2D): input [N,H,W,C], filter [KH,KW,C,O] ->
 * [N,OH,OW,O]. padding: LOOM_PADDING_VALID or LOOM_PADDING_SAME. */
LOOM_API loom_output loom_conv2d(loom_graph *g, loom_output input, loom_output filter, const int64_t strides[4],
                                 int padding, const int64_t dilations[4], const char *name);
/* Gradient of conv2d with respect to its input (TF Conv2DBackpropInput):
 * input_sizes [N,H,W,C] is the shape of the conv's input; N and C may be -1
 * (then taken from out_backprop and filter). */
LOOM_API loom_output loom_conv2d_backprop_input(loom_graph *g, const int64_t input_sizes[4], loom_output filter,
                                                loom_output out_backprop, const int64_t strides[4], int padding,
                                                const int64_t dilations[4], const char *name);
/* Gradient of conv2d with respect to its filter (TF Conv2DBackpropFilter):
 * filter_sizes [KH,KW,C,O]; C and O may be -1 (then taken from input and
 * out_backprop). */
LOOM_API loom_output loom_conv2d_backprop_filter(loom_graph *g, loom_output input, const int64_t filter_sizes[4],
                                                 loom_output out_backprop, const int64_t strides[4], int padding,
                                                 const int64_t dilations[4], const char *name);

/* Max pooling over [ksize[1], ksize[2]] windows of NHWC x (padding is never
 * the maximum). */
LOOM_API loom_output loom_max_pool(loom_graph *g, loom_output x, const int64_t ksize[4], const int64_t strides[4],
                                   int padding, const char *name);
/* Average pooling; with SAME padding each output is divided by the number of
 * valid (non-padded) elements of its window, like TF. */
LOOM_API loom_output loom_avg_pool(loom_graph *g, loom_output x, const int64_t ksize[4], const int64_t strides[4],
                                   int padding, const char *name);
/* Gradient of max_pool (TF MaxPoolGrad): each grad element goes to the first
 * maximum of its window in orig_input (row-major window order). */
LOOM_API loom_output loom_max_pool_grad(loom_graph *g, loom_output orig_input, loom_output orig_output,
                                        loom_output grad, const int64_t ksize[4], const int64_t strides[4],
                                        int padding, const char *name);
/* Gradient of avg_pool (TF AvgPoolGrad): orig_shape [N,H,W,C] is the pooled
 * input's shape (N and C may be -1: taken from grad). */
LOOM_API loom_output loom_avg_pool_grad(loom_graph *g, const int64_t orig_shape[4], loom_output grad,
                                        const int64_t ksize[4], const int64_t strides[4], int padding,
                                        const char *name);

/* x / sqrt(max(sum(x^2 over axis), epsilon)) (tf.math.l2_normalize);
 * epsilon <= 0 means TF's default 1e-12. */
LOOM_API loom_output loom_l2_normalize(loom_graph *g, loom_output x, int axis, double epsilon, const char *name);

#ifdef __cplusplus
}
#endif
#endif
