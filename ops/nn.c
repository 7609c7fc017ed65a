/* nn ops: definitions, shape functions, builders.
 *
 * Attributes read (kernels/kernel.h):
 *   Softmax, LogSoftmax, the cross entropies: none.
 *   Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter: strides[4] ([1,sh,sw,1]),
 *     dilations[4] ([1,dh,dw,1]; all zero = ones), padding (LOOM_PAD_*);
 *     Conv2DBackpropInput: nshape = 4, shape = input_sizes [N,H,W,C]
 *     (N, C may be -1: taken from out_backprop / filter);
 *     Conv2DBackpropFilter: nshape = 4, shape = filter_sizes [KH,KW,C,O]
 *     (C, O may be -1: taken from input / out_backprop).
 *   MaxPool, AvgPool, MaxPoolGrad, AvgPoolGrad: ksize[4], strides[4], padding;
 *     AvgPoolGrad: nshape = 4, shape = orig_input_shape (N, C may be -1).
 *   L2Normalize: axis, epsilon (<= 0: 1e-12).
 * Limits: strides, ksize and dilations entries are at most MAX_WINDOW_ATTR
 *   (2^24, the graph reader's bound, engine/graph_io.c); input_sizes,
 *   filter_sizes and orig_input_shape describe at most LOOM_MAX_NUMEL
 *   (INT64_MAX / 16, loom_tensor_new's bound) elements; window arithmetic in
 *   loom__conv_out_size is overflow-checked. Past them: INVALID_ARGUMENT
 *   naming the attribute and its value.
 * Inputs:
 *   SoftmaxCrossEntropyWithLogits (logits [B,C], labels [B,C]) -> (loss [B], backprop [B,C])
 *   SparseSoftmaxCrossEntropyWithLogits (logits [B,C], labels [B] int) -> same
 *   SigmoidCrossEntropyWithLogits (logits, labels) -> loss (elementwise)
 *   Conv2D (input, filter); Conv2DBackpropInput (filter, out_backprop);
 *   Conv2DBackpropFilter (input, out_backprop); MaxPoolGrad (orig_input,
 *   orig_output, grad); AvgPoolGrad (grad).
 *   Conv2DBackpropInput and AvgPoolGrad take an optional last input `like`
 *   (the forward op's input, read for its shape only): unknown (-1) entries of
 *   input_sizes / orig_input_shape, H and W included, are then taken from its
 *   run-time shape. Gradients use it when the spatial dims are unknown at
 *   build time (ops/grad_nn.c); the public builders never add it. */
#include <stdarg.h>
#include "ops/op_common.h"
#include "kernels/cpu/nn.h"
#include "kernels/geometry.h"

#define MAX_WINDOW_ATTR ((int64_t)1 << 24)

/* ---- shape helpers ---- */
static int merge_dim(int64_t a, int64_t b, int64_t *out) {
  if (a < 0) {
    *out = b;
    return 1;
  }
  if (b < 0 || a == b) {
    *out = a;
    return 1;
  }
  return 0;
}

static loom_code need_float(loom_shape_ctx *c, int i, const char *what) {
  if (c->in[i].dtype != LOOM_F32 && c->in[i].dtype != LOOM_F64)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s must be float32 or float64, got %s", what,
                            loom_dtype_name(c->in[i].dtype));
  return LOOM_OK;
}

static loom_code need_same_dtype(loom_shape_ctx *c, int i, int j, const char *a, const char *b) {
  if (c->in[i].dtype != c->in[j].dtype)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s (%s) and %s (%s) must have the same dtype", a,
                            loom_dtype_name(c->in[i].dtype), b, loom_dtype_name(c->in[j].dtype));
  return LOOM_OK;
}

static loom_code need_rank(loom_shape_ctx *c, int i, int rank, const char *what) {
  if (c->in[i].ndim != rank)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s must have rank %d, got shape %s", what, rank,
                            loom__tdesc_str(&c->in[i]));
  return LOOM_OK;
}

static const char *dims4(const int64_t *d) {
  static __thread char bufs[4][96];
  static __thread int k;
  char *b = bufs[k++ & 3];
  return loom__dims_str(b, 96, 4, d);
}

/* "[1,-5,2,1]": an attribute vector, negatives printed as they are. */
static const char *vec4(const int64_t *v) {
  static __thread char bufs[2][96];
  static __thread int k;
  char *b = bufs[k++ & 1];
  snprintf(b, 96, "[%lld,%lld,%lld,%lld]", (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3]);
  return b;
}

/* A [1, h, w, 1] vector with 1 <= h, w <= MAX_WINDOW_ATTR; all zeros allowed
 * when zero_ok (= ones). */
static loom_code check_vec4(loom_shape_ctx *c, const char *what, const int64_t *v, int zero_ok) {
  if (zero_ok && !v[0] && !v[1] && !v[2] && !v[3]) return LOOM_OK;
  if (v[0] != 1 || v[3] != 1 || v[1] < 1 || v[2] < 1)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                            "%s %s must be [1, h, w, 1] with h, w >= 1 (no %s over batch or depth)", what,
                            vec4(v), what);
  for (int i = 1; i < 3; i++)
    if (v[i] > MAX_WINDOW_ATTR)
      return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s[%d] = %lld is too large (at most %lld)", what, i,
                              (long long)v[i], (long long)MAX_WINDOW_ATTR);
  return LOOM_OK;
}

static loom_code check_padding(loom_shape_ctx *c) {
  if (c->attrs->padding != LOOM_PAD_VALID && c->attrs->padding != LOOM_PAD_SAME)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "padding %d is neither VALID (0) nor SAME (1)",
                            (int)c->attrs->padding);
  return LOOM_OK;
}

/* Spatial output sizes of a window op over xd (NHWC) with window kh x kw. */
static loom_code window_out(loom_shape_ctx *c, const int64_t *xd, int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                            int64_t *oh, int64_t *ow) {
  const loom_attrs *a = c->attrs;
  *oh = loom__conv_out_size(xd[1], kh, loom__attr_or_1(a->strides[1]), dh, a->padding, NULL);
  *ow = loom__conv_out_size(xd[2], kw, loom__attr_or_1(a->strides[2]), dw, a->padding, NULL);
  if (*oh == -3 || *ow == -3)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                            "the %lldx%lld window with dilations %lldx%lld is too large (its extent overflows int64)",
                            (long long)kh, (long long)kw, (long long)dh, (long long)dw);
  if (*oh == -2 || *ow == -2)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                            "the %lldx%lld window (dilations %lldx%lld) does not fit in input %s with VALID padding",
                            (long long)kh, (long long)kw, (long long)dh, (long long)dw, dims4(xd));
  return LOOM_OK;
}

static loom_code conv_attrs(loom_shape_ctx *c) {
  loom_code rc = check_vec4(c, "strides", c->attrs->strides, 0);
  if (!rc) rc = check_vec4(c, "dilations", c->attrs->dilations, 1);
  if (!rc) rc = check_padding(c);
  return rc;
}

/* Checks input xd [N,H,W,C] against filter fd [KH,KW,C,O] and, when dy is
 * given, the gradient dy against the conv output; fills xd/fd unknowns it can
 * resolve and the output shape yd. */
static loom_code conv_check(loom_shape_ctx *c, int64_t *xd, int64_t *fd, const int64_t *dy, int64_t *yd) {
  const loom_attrs *a = c->attrs;
  if ((fd[0] == 0 || fd[1] == 0))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "filter %s has an empty window", dims4(fd));
  int64_t ch;
  if (!merge_dim(xd[3], fd[2], &ch))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "input depth %lld does not match the filter's in_channels %lld "
                            "(input %s, filter %s)", (long long)xd[3], (long long)fd[2], dims4(xd), dims4(fd));
  xd[3] = fd[2] = ch;
  int64_t oh, ow;
  loom_code rc = window_out(c, xd, fd[0], fd[1], loom__attr_or_1(a->dilations[1]), loom__attr_or_1(a->dilations[2]), &oh, &ow);
  if (rc) return rc;
  int64_t want[4] = {xd[0], oh, ow, fd[3]};
  for (int i = 0; i < 4; i++) {
    if (dy && !merge_dim(want[i], dy[i], &yd[i]))
      return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                              "out_backprop %s does not match the convolution output %s of input %s and filter %s",
                              dims4(dy), dims4(want), dims4(xd), dims4(fd));
    if (!dy) yd[i] = want[i];
  }
  if (dy) {
    xd[0] = yd[0];
    fd[3] = yd[3];
  }
  return LOOM_OK;
}

/* ---- Softmax, LogSoftmax ---- */
static loom_code shape_softmax(loom_shape_ctx *c) {
  loom_code rc = need_float(c, 0, "logits");
  if (rc) return rc;
  if (c->in[0].ndim < 1)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "logits must have rank >= 1, got a scalar");
  c->out[0] = c->in[0];
  return LOOM_OK;
}

/* ---- cross entropies ---- */
static loom_code shape_xent(loom_shape_ctx *c) {
  loom_code rc = need_float(c, 0, "logits");
  if (!rc) rc = need_same_dtype(c, 0, 1, "logits", "labels");
  if (!rc) rc = need_rank(c, 0, 2, "logits");
  if (!rc) rc = need_rank(c, 1, 2, "labels");
  if (rc) return rc;
  int64_t d[2];
  for (int i = 0; i < 2; i++)
    if (!merge_dim(c->in[0].dims[i], c->in[1].dims[i], &d[i]))
      return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "logits %s and labels %s must have the same shape",
                              loom__tdesc_str(&c->in[0]), loom__tdesc_str(&c->in[1]));
  c->out[0].dtype = c->out[1].dtype = c->in[0].dtype;
  c->out[0].ndim = 1;
  c->out[0].dims[0] = d[0];
  c->out[1].ndim = 2;
  c->out[1].dims[0] = d[0];
  c->out[1].dims[1] = d[1];
  return LOOM_OK;
}

static loom_code shape_sparse_xent(loom_shape_ctx *c) {
  loom_code rc = need_float(c, 0, "logits");
  if (!rc) rc = need_rank(c, 0, 2, "logits");
  if (!rc) rc = need_rank(c, 1, 1, "labels");
  if (rc) return rc;
  if (c->in[1].dtype != LOOM_I32 && c->in[1].dtype != LOOM_I64)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "labels must be int32 or int64, got %s",
                            loom_dtype_name(c->in[1].dtype));
  int64_t b;
  if (!merge_dim(c->in[0].dims[0], c->in[1].dims[0], &b))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "logits %s and labels %s must have the same batch size",
                            loom__tdesc_str(&c->in[0]), loom__tdesc_str(&c->in[1]));
  c->out[0].dtype = c->out[1].dtype = c->in[0].dtype;
  c->out[0].ndim = 1;
  c->out[0].dims[0] = b;
  c->out[1].ndim = 2;
  c->out[1].dims[0] = b;
  c->out[1].dims[1] = c->in[0].dims[1];
  return LOOM_OK;
}

static loom_code shape_sigmoid_xent(loom_shape_ctx *c) {
  loom_code rc = need_float(c, 0, "logits");
  if (!rc) rc = need_same_dtype(c, 0, 1, "logits", "labels");
  if (rc) return rc;
  const loom_tdesc *x = &c->in[0], *z = &c->in[1];
  int ok = x->ndim == z->ndim;
  c->out[0] = *x;
  for (int i = 0; ok && i < x->ndim; i++) ok = merge_dim(x->dims[i], z->dims[i], &c->out[0].dims[i]);
  if (!ok)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "logits %s and labels %s must have the same shape",
                            loom__tdesc_str(x), loom__tdesc_str(z));
  return LOOM_OK;
}

/* ---- convolutions ---- */
static loom_code shape_conv2d(loom_shape_ctx *c) {
  loom_code rc = need_float(c, 0, "input");
  if (!rc) rc = need_same_dtype(c, 0, 1, "input", "filter");
  if (!rc) rc = need_rank(c, 0, 4, "input (NHWC)");
  if (!rc) rc = need_rank(c, 1, 4, "filter (HWIO)");
  if (!rc) rc = conv_attrs(c);
  if (rc) return rc;
  int64_t xd[4], fd[4], yd[4];
  memcpy(xd, c->in[0].dims, sizeof xd);
  memcpy(fd, c->in[1].dims, sizeof fd);
  rc = conv_check(c, xd, fd, NULL, yd);
  if (rc) return rc;
  c->out[0].dtype = c->in[0].dtype;
  c->out[0].ndim = 4;
  memcpy(c->out[0].dims, yd, sizeof yd);
  return LOOM_OK;
}

static loom_code sizes_attr(loom_shape_ctx *c, const char *what, int must0, int must1) {
  const loom_attrs *a = c->attrs;
  if (a->nshape != 4)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s must have 4 entries, got %d", what, (int)a->nshape);
  for (int i = 0; i < 4; i++) {
    int must = i == must0 || i == must1;
    if (a->shape[i] < -1 || (must && a->shape[i] < 0))
      return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s %s: entry %d must be %s", what, vec4(a->shape), i,
                              must ? ">= 0" : ">= 0 or -1 (inferred)");
  }
  /* the known non-zero entries describe at most LOOM_MAX_NUMEL elements */
  return loom__shape_check_attr_size(c, what, 4, a->shape);
}

/* Fills the -1 entries of sizes from input `like` (rank 4) when present. */
static loom_code sizes_from_like(loom_shape_ctx *c, int like, int64_t *xd) {
  if (c->nin <= like) return LOOM_OK;
  loom_code rc = need_rank(c, like, 4, "like (the forward input)");
  if (rc) return rc;
  for (int i = 0; i < 4; i++)
    if (xd[i] < 0) xd[i] = c->in[like].dims[i];
  return LOOM_OK;
}

static loom_code shape_conv2d_backprop_input(loom_shape_ctx *c) {
  if (c->nin != 2 && c->nin != 3)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "takes 2 or 3 inputs (filter, out_backprop[, like]), got %d",
                            (int)c->nin);
  loom_code rc = need_float(c, 0, "filter");
  if (!rc) rc = need_same_dtype(c, 0, 1, "filter", "out_backprop");
  if (!rc) rc = need_rank(c, 0, 4, "filter (HWIO)");
  if (!rc) rc = need_rank(c, 1, 4, "out_backprop (NHWC)");
  if (!rc) rc = conv_attrs(c);
  if (!rc) rc = sizes_attr(c, "input_sizes", c->nin == 3 ? -1 : 1, c->nin == 3 ? -1 : 2);
  if (rc) return rc;
  int64_t xd[4], fd[4], yd[4];
  memcpy(xd, c->attrs->shape, sizeof xd);
  rc = sizes_from_like(c, 2, xd);
  if (rc) return rc;
  memcpy(fd, c->in[0].dims, sizeof fd);
  rc = conv_check(c, xd, fd, c->in[1].dims, yd);
  if (rc) return rc;
  c->out[0].dtype = c->in[0].dtype;
  c->out[0].ndim = 4;
  memcpy(c->out[0].dims, xd, sizeof xd);
  return LOOM_OK;
}

static loom_code shape_conv2d_backprop_filter(loom_shape_ctx *c) {
  loom_code rc = need_float(c, 0, "input");
  if (!rc) rc = need_same_dtype(c, 0, 1, "input", "out_backprop");
  if (!rc) rc = need_rank(c, 0, 4, "input (NHWC)");
  if (!rc) rc = need_rank(c, 1, 4, "out_backprop (NHWC)");
  if (!rc) rc = conv_attrs(c);
  if (!rc) rc = sizes_attr(c, "filter_sizes", 0, 1);
  if (rc) return rc;
  int64_t xd[4], fd[4], yd[4];
  memcpy(xd, c->in[0].dims, sizeof xd);
  memcpy(fd, c->attrs->shape, sizeof fd);
  rc = conv_check(c, xd, fd, c->in[1].dims, yd);
  if (rc) return rc;
  c->out[0].dtype = c->in[0].dtype;
  c->out[0].ndim = 4;
  memcpy(c->out[0].dims, fd, sizeof fd);
  return LOOM_OK;
}

/* ---- pools ---- */
static loom_code pool_attrs(loom_shape_ctx *c) {
  loom_code rc = check_vec4(c, "ksize", c->attrs->ksize, 0);
  if (!rc) rc = check_vec4(c, "strides", c->attrs->strides, 0);
  if (!rc) rc = check_padding(c);
  return rc;
}

/* Pool output of xd, merged with dy (grad) when given. */
static loom_code pool_check(loom_shape_ctx *c, int64_t *xd, const int64_t *dy, const char *dyname, int64_t *yd) {
  int64_t oh, ow;
  loom_code rc = window_out(c, xd, c->attrs->ksize[1], c->attrs->ksize[2], 1, 1, &oh, &ow);
  if (rc) return rc;
  int64_t want[4] = {xd[0], oh, ow, xd[3]};
  for (int i = 0; i < 4; i++) {
    if (dy && !merge_dim(want[i], dy[i], &yd[i]))
      return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s %s does not match the pooling output %s of input %s",
                              dyname, dims4(dy), dims4(want), dims4(xd));
    if (!dy) yd[i] = want[i];
  }
  if (dy) {
    xd[0] = yd[0];
    xd[3] = yd[3];
  }
  return LOOM_OK;
}

static loom_code shape_pool(loom_shape_ctx *c) {
  loom_code rc = need_float(c, 0, "input");
  if (!rc) rc = need_rank(c, 0, 4, "input (NHWC)");
  if (!rc) rc = pool_attrs(c);
  if (rc) return rc;
  int64_t xd[4], yd[4];
  memcpy(xd, c->in[0].dims, sizeof xd);
  rc = pool_check(c, xd, NULL, NULL, yd);
  if (rc) return rc;
  c->out[0].dtype = c->in[0].dtype;
  c->out[0].ndim = 4;
  memcpy(c->out[0].dims, yd, sizeof yd);
  return LOOM_OK;
}

static loom_code shape_max_pool_grad(loom_shape_ctx *c) {
  loom_code rc = need_float(c, 0, "orig_input");
  if (!rc) rc = need_same_dtype(c, 0, 1, "orig_input", "orig_output");
  if (!rc) rc = need_same_dtype(c, 0, 2, "orig_input", "grad");
  if (!rc) rc = need_rank(c, 0, 4, "orig_input (NHWC)");
  if (!rc) rc = need_rank(c, 1, 4, "orig_output (NHWC)");
  if (!rc) rc = need_rank(c, 2, 4, "grad (NHWC)");
  if (!rc) rc = pool_attrs(c);
  if (rc) return rc;
  int64_t xd[4], yd[4], y2[4];
  memcpy(xd, c->in[0].dims, sizeof xd);
  rc = pool_check(c, xd, c->in[1].dims, "orig_output", yd);
  if (!rc) rc = pool_check(c, xd, c->in[2].dims, "grad", y2);
  if (rc) return rc;
  c->out[0].dtype = c->in[0].dtype;
  c->out[0].ndim = 4;
  memcpy(c->out[0].dims, xd, sizeof xd);
  return LOOM_OK;
}

static loom_code shape_avg_pool_grad(loom_shape_ctx *c) {
  if (c->nin != 1 && c->nin != 2)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "takes 1 or 2 inputs (grad[, like]), got %d", (int)c->nin);
  loom_code rc = need_float(c, 0, "grad");
  if (!rc) rc = need_rank(c, 0, 4, "grad (NHWC)");
  if (!rc) rc = pool_attrs(c);
  if (!rc) rc = sizes_attr(c, "orig_input_shape", c->nin == 2 ? -1 : 1, c->nin == 2 ? -1 : 2);
  if (rc) return rc;
  int64_t xd[4], yd[4];
  memcpy(xd, c->attrs->shape, sizeof xd);
  rc = sizes_from_like(c, 1, xd);
  if (rc) return rc;
  rc = pool_check(c, xd, c->in[0].dims, "grad", yd);
  if (rc) return rc;
  c->out[0].dtype = c->in[0].dtype;
  c->out[0].ndim = 4;
  memcpy(c->out[0].dims, xd, sizeof xd);
  return LOOM_OK;
}

/* ---- L2Normalize ---- */
static loom_code shape_l2_normalize(loom_shape_ctx *c) {
  loom_code rc = need_float(c, 0, "x");
  if (rc) return rc;
  if (loom__norm_axis(c->attrs->axis, c->in[0].ndim) < 0)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "axis %lld is out of range for x %s",
                            (long long)c->attrs->axis, loom__tdesc_str(&c->in[0]));
  c->out[0] = c->in[0];
  return LOOM_OK;
}

/* ---- registration ---- */
static void def(loom_op_def *d, int nin, int nout, loom_shape_fn shape, loom_kernel_fn f32, loom_kernel_fn f64,
                uint32_t flags) {
  d->nin = nin;
  d->nout = nout;
  d->shape = shape;
  d->flags = flags;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F32] = f32;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F64] = f64;
}

void loom__register_nn(loom_op_def *t) {
#define K2(op) loom__k_##op##_f32, loom__k_##op##_f64
  def(&t[LOOM_OP_Softmax], 1, 1, shape_softmax, K2(softmax), LOOM_OPF_INPLACE_OK);
  def(&t[LOOM_OP_LogSoftmax], 1, 1, shape_softmax, K2(log_softmax), LOOM_OPF_INPLACE_OK);
  def(&t[LOOM_OP_SoftmaxCrossEntropyWithLogits], 2, 2, shape_xent, K2(softmax_xent), 0);
  def(&t[LOOM_OP_SparseSoftmaxCrossEntropyWithLogits], 2, 2, shape_sparse_xent, K2(sparse_softmax_xent), 0);
  t[LOOM_OP_SparseSoftmaxCrossEntropyWithLogits].nondiff_inputs = 1u << 1; /* labels */
  def(&t[LOOM_OP_SigmoidCrossEntropyWithLogits], 2, 1, shape_sigmoid_xent, K2(sigmoid_xent), LOOM_OPF_INPLACE_OK);
  def(&t[LOOM_OP_Conv2D], 2, 1, shape_conv2d, K2(conv2d), LOOM_OPF_EPI_BIAS_RELU);
  t[LOOM_OP_Conv2D].workspace = loom__ws_conv2d;
  def(&t[LOOM_OP_Conv2DBackpropInput], -1, 1, shape_conv2d_backprop_input, K2(conv2d_backprop_input), 0);
  t[LOOM_OP_Conv2DBackpropInput].workspace = loom__ws_conv2d_backprop_input;
  t[LOOM_OP_Conv2DBackpropInput].nondiff_inputs = 1u << 2; /* like (shape only) */
  def(&t[LOOM_OP_Conv2DBackpropFilter], 2, 1, shape_conv2d_backprop_filter, K2(conv2d_backprop_filter), 0);
  t[LOOM_OP_Conv2DBackpropFilter].workspace = loom__ws_conv2d_backprop_filter;
  def(&t[LOOM_OP_MaxPool], 1, 1, shape_pool, K2(max_pool), 0);
  def(&t[LOOM_OP_AvgPool], 1, 1, shape_pool, K2(avg_pool), 0);
  def(&t[LOOM_OP_MaxPoolGrad], 3, 1, shape_max_pool_grad, K2(max_pool_grad), LOOM_OPF_EPI_MASK);
  def(&t[LOOM_OP_AvgPoolGrad], -1, 1, shape_avg_pool_grad, K2(avg_pool_grad), 0);
  t[LOOM_OP_AvgPoolGrad].nondiff_inputs = 1u << 1; /* like (shape only) */
  def(&t[LOOM_OP_L2Normalize], 1, 1, shape_l2_normalize, K2(l2_normalize), LOOM_OPF_INPLACE_OK);
#undef K2
}

/* ---- builders ---- */
static loom_output builder_fail(loom_graph *g, const char *name, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static loom_output builder_fail(loom_graph *g, const char *name, const char *op, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *full = loom__graph_unique_name(g, name && *name ? name : op);
  loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: %s", full ? full : op, msg);
  loom__free(full);
  return loom__graph_dummy(g);
}

loom_output loom_softmax(loom_graph *g, loom_output logits, const char *name) {
  return loom__build1(g, LOOM_OP_Softmax, name, logits, NULL);
}

loom_output loom_log_softmax(loom_graph *g, loom_output logits, const char *name) {
  return loom__build1(g, LOOM_OP_LogSoftmax, name, logits, NULL);
}

static loom_output build_xent(loom_graph *g, int op, loom_output logits, loom_output labels, loom_output *loss,
                              loom_output *backprop, const char *name) {
  if (loss) *loss = (loom_output){NULL, 0};
  if (backprop) *backprop = (loom_output){NULL, 0};
  if (!g) return (loom_output){NULL, 0};
  loom_output in[2] = {logits, labels};
  loom_node *n = loom__graph_add(g, op, name, NULL, 2, in, NULL, 2);
  loom_output l = n ? (loom_output){n, 0} : loom__graph_dummy(g);
  loom_output b = n ? (loom_output){n, 1} : loom__graph_dummy(g);
  if (loss) *loss = l;
  if (backprop) *backprop = b;
  return l;
}

loom_output loom_softmax_cross_entropy_with_logits(loom_graph *g, loom_output logits, loom_output labels,
                                                   loom_output *loss, loom_output *backprop, const char *name) {
  return build_xent(g, LOOM_OP_SoftmaxCrossEntropyWithLogits, logits, labels, loss, backprop, name);
}

loom_output loom_sparse_softmax_cross_entropy_with_logits(loom_graph *g, loom_output logits, loom_output labels,
                                                          loom_output *loss, loom_output *backprop,
                                                          const char *name) {
  return build_xent(g, LOOM_OP_SparseSoftmaxCrossEntropyWithLogits, logits, labels, loss, backprop, name);
}

loom_output loom_sigmoid_cross_entropy_with_logits(loom_graph *g, loom_output labels, loom_output logits,
                                                   const char *name) {
  return loom__build2(g, LOOM_OP_SigmoidCrossEntropyWithLogits, name, logits, labels, NULL);
}

static void set4(int64_t *dst, const int64_t *src) {
  for (int i = 0; i < 4; i++) dst[i] = src ? src[i] : 1;
}

static loom_attrs conv_attrs_of(const int64_t strides[4], int padding, const int64_t dilations[4]) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  set4(a.strides, strides);
  set4(a.dilations, dilations);
  a.padding = padding;
  return a;
}

loom_output loom_conv2d(loom_graph *g, loom_output input, loom_output filter, const int64_t strides[4], int padding,
                        const int64_t dilations[4], const char *name) {
  loom_attrs a = conv_attrs_of(strides, padding, dilations);
  return loom__build2(g, LOOM_OP_Conv2D, name, input, filter, &a);
}

loom_output loom_conv2d_backprop_input(loom_graph *g, const int64_t input_sizes[4], loom_output filter,
                                       loom_output out_backprop, const int64_t strides[4], int padding,
                                       const int64_t dilations[4], const char *name) {
  if (g && !input_sizes) return builder_fail(g, name, "Conv2DBackpropInput", "input_sizes is NULL");
  loom_attrs a = conv_attrs_of(strides, padding, dilations);
  a.nshape = 4;
  if (input_sizes) memcpy(a.shape, input_sizes, 4 * sizeof(int64_t));
  return loom__build2(g, LOOM_OP_Conv2DBackpropInput, name, filter, out_backprop, &a);
}

loom_output loom_conv2d_backprop_filter(loom_graph *g, loom_output input, const int64_t filter_sizes[4],
                                        loom_output out_backprop, const int64_t strides[4], int padding,
                                        const int64_t dilations[4], const char *name) {
  if (g && !filter_sizes) return builder_fail(g, name, "Conv2DBackpropFilter", "filter_sizes is NULL");
  loom_attrs a = conv_attrs_of(strides, padding, dilations);
  a.nshape = 4;
  if (filter_sizes) memcpy(a.shape, filter_sizes, 4 * sizeof(int64_t));
  return loom__build2(g, LOOM_OP_Conv2DBackpropFilter, name, input, out_backprop, &a);
}

static loom_attrs pool_attrs_of(const int64_t ksize[4], const int64_t strides[4], int padding) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  set4(a.ksize, ksize);
  set4(a.strides, strides);
  a.padding = padding;
  return a;
}

loom_output loom_max_pool(loom_graph *g, loom_output x, const int64_t ksize[4], const int64_t strides[4],
                          int padding, const char *name) {
  if (g && !ksize) return builder_fail(g, name, "MaxPool", "ksize is NULL");
  loom_attrs a = pool_attrs_of(ksize, strides, padding);
  return loom__build1(g, LOOM_OP_MaxPool, name, x, &a);
}

loom_output loom_avg_pool(loom_graph *g, loom_output x, const int64_t ksize[4], const int64_t strides[4],
                          int padding, const char *name) {
  if (g && !ksize) return builder_fail(g, name, "AvgPool", "ksize is NULL");
  loom_attrs a = pool_attrs_of(ksize, strides, padding);
  return loom__build1(g, LOOM_OP_AvgPool, name, x, &a);
}

loom_output loom_max_pool_grad(loom_graph *g, loom_output orig_input, loom_output orig_output, loom_output grad,
                               const int64_t ksize[4], const int64_t strides[4], int padding, const char *name) {
  if (g && !ksize) return builder_fail(g, name, "MaxPoolGrad", "ksize is NULL");
  loom_attrs a = pool_attrs_of(ksize, strides, padding);
  loom_output in[3] = {orig_input, orig_output, grad};
  return loom__buildn(g, LOOM_OP_MaxPoolGrad, name, 3, in, &a);
}

loom_output loom_avg_pool_grad(loom_graph *g, const int64_t orig_shape[4], loom_output grad, const int64_t ksize[4],
                               const int64_t strides[4], int padding, const char *name) {
  if (g && !ksize) return builder_fail(g, name, "AvgPoolGrad", "ksize is NULL");
  if (g && !orig_shape) return builder_fail(g, name, "AvgPoolGrad", "orig_shape is NULL");
  loom_attrs a = pool_attrs_of(ksize, strides, padding);
  a.nshape = 4;
  if (orig_shape) memcpy(a.shape, orig_shape, 4 * sizeof(int64_t));
  return loom__build1(g, LOOM_OP_AvgPoolGrad, name, grad, &a);
}

loom_output loom_l2_normalize(loom_graph *g, loom_output x, int axis, double epsilon, const char *name) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.axis = axis;
  a.epsilon = epsilon > 0 ? epsilon : 1e-12;
  return loom__build1(g, LOOM_OP_L2Normalize, name, x, &a);
}
