/* Gradient functions of the nn family (see loom_grad_fn in engine/engine_impl.h).
 *
 * Convolution and pooling gradients pass the forward input's static shape
 * to Conv2DBackpropInput / AvgPoolGrad (unknown entries as -1). When its
 * spatial dims H, W are unknown at build time, the forward input is added as
 * the ops' optional `like` input (see ops/nn.c), which supplies the run-time
 * shape. The filter's KH and KW must be known (an UNIMPLEMENTED error names
 * the node otherwise).
 *
 * Second order: Conv2DBackpropInput, Conv2DBackpropFilter and AvgPoolGrad are
 * linear in their tensor inputs and have gradients (as in TF); MaxPoolGrad is
 * marked not differentiable (TF needs a dedicated MaxPoolGradGrad kernel). */
#include "ops/op_common.h"

static const loom_tdesc *desc(loom_output o) { return &o.node->out[o.index]; }

static loom_output scalar_of(loom_graph *g, loom_dtype dt, double v) {
  if (dt == LOOM_F64) return loom_const_data(g, LOOM_F64, 0, NULL, &v, NULL);
  float f = (float)v;
  return loom_const_data(g, LOOM_F32, 0, NULL, &f, NULL);
}

static loom_output sum_last_keep(loom_graph *g, loom_output x) {
  int64_t ax = -1;
  return loom_reduce_sum(g, x, 1, &ax, 1, NULL);
}


/* softmax Jacobian-vector product: (v - sum(v * s, -1)) * s */
static loom_output softmax_jvp(loom_graph *g, loom_output v, loom_output s) {
  return loom_mul(g, loom_sub(g, v, sum_last_keep(g, loom_mul(g, v, s, NULL)), NULL), s, NULL);
}

static loom_code grad_softmax(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = softmax_jvp(g, dy[0], (loom_output){n, 0});
  return LOOM_OK;
}

static loom_code grad_log_softmax(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output y = {n, 0};
  dx[0].values = loom_sub(g, dy[0], loom_mul(g, loom_exp(g, y, NULL), sum_last_keep(g, dy[0]), NULL), NULL);
  return LOOM_OK;
}

/* (Sparse)SoftmaxCrossEntropyWithLogits: outputs (loss [B], backprop [B,C]
 * = softmax(logits) - labels). dlogits = dloss[:, None] * backprop plus, when
 * backprop itself is used, softmax's Jacobian applied to its gradient. Dense
 * labels: dlabels = -dloss[:, None] * log_softmax(logits) - dbackprop. */
static loom_code grad_xent(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output logits = n->in[0];
  loom_output gl = {NULL, 0}, gb = {NULL, 0};
  if (dy[0].node) gl = loom_mul(g, loom_expand_dims(g, dy[0], -1, NULL), (loom_output){n, 1}, NULL);
  if (dy[1].node) gb = softmax_jvp(g, dy[1], loom_softmax(g, logits, NULL));
  if (gl.node && gb.node) dx[0].values = loom_add(g, gl, gb, NULL);
  else dx[0].values = gl.node ? gl : gb;
  if (n->op == LOOM_OP_SoftmaxCrossEntropyWithLogits) {
    loom_output d = {NULL, 0};
    if (dy[0].node)
      d = loom_mul(g, loom_expand_dims(g, dy[0], -1, NULL), loom_neg(g, loom_log_softmax(g, logits, NULL), NULL),
                   NULL);
    if (dy[1].node) d = d.node ? loom_sub(g, d, dy[1], NULL) : loom_neg(g, dy[1], NULL);
    dx[1].values = d;
  }
  return LOOM_OK;
}

/* loss = max(x, 0) - x z + log(1 + e^-|x|): dx = dy (sigmoid(x) - z), dz = -dy x */
static loom_code grad_sigmoid_xent(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0], z = n->in[1];
  dx[0].values = loom_mul(g, dy[0], loom_sub(g, loom_sigmoid(g, x, NULL), z, NULL), NULL);
  dx[1].values = loom_neg(g, loom_mul(g, dy[0], x, NULL), NULL);
  return LOOM_OK;
}

/* The static shape of a 4-D tensor for a backprop op's size attribute;
 * entries must be known at indices k0 and k1. */
static int sizes4(loom_graph *g, const loom_node *n, loom_output o, int k0, int k1, const char *what, int64_t *out) {
  const loom_tdesc *d = desc(o);
  for (int i = 0; i < 4; i++) out[i] = d->dims[i];
  if (out[k0] >= 0 && out[k1] >= 0) return 1;
  loom_graph_set_error(g, LOOM_UNIMPLEMENTED,
                       "%s: gradient of %s: the %s %s must have known dimensions %d and %d when differentiating",
                       n->name, n->def->name, what, loom__tdesc_str(d), k0, k1);
  return 0;
}

/* 4 static dims of o (-1 unknown); returns 1 when H and W (1, 2) are known. */
static int hw_known(loom_output o, int64_t *out) {
  const loom_tdesc *d = desc(o);
  for (int i = 0; i < 4; i++) out[i] = d->dims[i];
  return out[1] >= 0 && out[2] >= 0;
}

/* Conv2DBackpropInput sized like x: static sizes, or x as the `like` input. */
static loom_output conv_bi_like(loom_graph *g, const loom_node *n, loom_output x, loom_output f, loom_output dy) {
  int64_t xs[4];
  int known = hw_known(x, xs);
  loom_attrs a = n->attrs;
  a.nshape = 4;
  memcpy(a.shape, xs, sizeof xs);
  loom_output in[3] = {f, dy, x};
  return loom__out0(g, loom__graph_add(g, LOOM_OP_Conv2DBackpropInput, NULL, NULL, known ? 2 : 3, in, &a, 1));
}

static const int64_t *dil(const loom_node *n) {
  static const int64_t ones[4] = {1, 1, 1, 1};
  const int64_t *d = n->attrs.dilations;
  return (d[0] || d[1] || d[2] || d[3]) ? d : ones;
}

static loom_code grad_conv2d(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0], f = n->in[1];
  const loom_attrs *a = &n->attrs;
  int64_t fs[4];
  if (!sizes4(g, n, f, 0, 1, "filter", fs)) return LOOM_UNIMPLEMENTED;
  dx[0].values = conv_bi_like(g, n, x, f, dy[0]);
  dx[1].values = loom_conv2d_backprop_filter(g, x, fs, dy[0], a->strides, a->padding, dil(n), NULL);
  return LOOM_OK;
}

/* Conv2DBackpropInput(filter, out_backprop) = dx: linear in both inputs. */
static loom_code grad_conv2d_backprop_input(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output f = n->in[0], ob = n->in[1];
  const loom_attrs *a = &n->attrs;
  int64_t fs[4];
  if (!sizes4(g, n, f, 0, 1, "filter", fs)) return LOOM_UNIMPLEMENTED;
  dx[0].values = loom_conv2d_backprop_filter(g, dy[0], fs, ob, a->strides, a->padding, dil(n), NULL);
  dx[1].values = loom_conv2d(g, dy[0], f, a->strides, a->padding, dil(n), NULL);
  return LOOM_OK;
}

/* Conv2DBackpropFilter(input, out_backprop) = dfilter: linear in both inputs. */
static loom_code grad_conv2d_backprop_filter(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0], ob = n->in[1];
  const loom_attrs *a = &n->attrs;
  dx[0].values = conv_bi_like(g, n, x, dy[0], ob);
  dx[1].values = loom_conv2d(g, x, dy[0], a->strides, a->padding, dil(n), NULL);
  return LOOM_OK;
}

static loom_code grad_max_pool(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  const loom_attrs *a = &n->attrs;
  dx[0].values = loom_max_pool_grad(g, n->in[0], (loom_output){n, 0}, dy[0], a->ksize, a->strides, a->padding, NULL);
  return LOOM_OK;
}

static loom_code grad_avg_pool(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0];
  int64_t xs[4];
  int known = hw_known(x, xs);
  loom_attrs a = n->attrs;
  a.nshape = 4;
  memcpy(a.shape, xs, sizeof xs);
  loom_output in[2] = {dy[0], x};
  dx[0].values = loom__out0(g, loom__graph_add(g, LOOM_OP_AvgPoolGrad, NULL, NULL, known ? 1 : 2, in, &a, 1));
  return LOOM_OK;
}

/* AvgPoolGrad(grad) is the transpose of the (linear) AvgPool. */
static loom_code grad_avg_pool_grad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  const loom_attrs *a = &n->attrs;
  dx[0].values = loom_avg_pool(g, dy[0], a->ksize, a->strides, a->padding, NULL);
  return LOOM_OK;
}

/* y = x / nrm, nrm = sqrt(max(s, eps)), s = sum(x^2, axis):
 * dx = (dy - y * sum(dy * y, axis) [s > eps]) / nrm */
static loom_code grad_l2_normalize(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0], y = {n, 0};
  loom_dtype dt = desc(x)->dtype;
  int64_t ax = n->attrs.axis;
  double eps = n->attrs.epsilon > 0 ? n->attrs.epsilon : 1e-12;
  loom_output e = scalar_of(g, dt, eps);
  int nax = desc(x)->ndim == 0 ? -1 : 1; /* a scalar is normalized by itself: reduce over all (nothing) */
  loom_output s = loom_reduce_sum(g, loom_square(g, x, NULL), nax, nax < 0 ? NULL : &ax, 1, NULL);
  loom_output nrm = loom_sqrt(g, loom_maximum(g, s, e, NULL), NULL);
  loom_output dot = loom_reduce_sum(g, loom_mul(g, dy[0], y, NULL), nax, nax < 0 ? NULL : &ax, 1, NULL);
  loom_output on = loom_cast(g, loom_greater(g, s, e, NULL), dt, NULL);
  loom_output num = loom_sub(g, dy[0], loom_mul(g, y, loom_mul(g, dot, on, NULL), NULL), NULL);
  dx[0].values = loom_div(g, num, nrm, NULL);
  return LOOM_OK;
}

void loom__register_nn_grads(loom_op_def *t);
void loom__register_nn_grads(loom_op_def *t) {
  t[LOOM_OP_Softmax].grad = grad_softmax;
  t[LOOM_OP_LogSoftmax].grad = grad_log_softmax;
  t[LOOM_OP_SoftmaxCrossEntropyWithLogits].grad = grad_xent;
  t[LOOM_OP_SparseSoftmaxCrossEntropyWithLogits].grad = grad_xent;
  t[LOOM_OP_SigmoidCrossEntropyWithLogits].grad = grad_sigmoid_xent;
  t[LOOM_OP_Conv2D].grad = grad_conv2d;
  t[LOOM_OP_Conv2DBackpropInput].grad = grad_conv2d_backprop_input;
  t[LOOM_OP_Conv2DBackpropFilter].grad = grad_conv2d_backprop_filter;
  t[LOOM_OP_MaxPool].grad = grad_max_pool;
  t[LOOM_OP_AvgPool].grad = grad_avg_pool;
  t[LOOM_OP_AvgPoolGrad].grad = grad_avg_pool_grad;
  t[LOOM_OP_MaxPoolGrad].flags |= LOOM_OPF_NODIFF;
  t[LOOM_OP_L2Normalize].grad = grad_l2_normalize;
}
