/* Gradient-check cases for the nn family (ops/nn.def.h): softmax and cross
 * entropies, convolutions, pooling and L2 normalisation.
 * Included by tests/test_grad.c, which defines grad_case, UN, BIN and F64C
 * (LOOM_F64). Each row:
 * {op, label, dtype, nin, {ranks}, {{dims}...}, builder, lo, hi, away, nodiff, tol, int_input, int_hi} */

/* ---- nn ---- */
UN(softmax)
UN(log_softmax)
static loom_output b_xent(loom_graph *g, const loom_output *x) {
  return loom_softmax_cross_entropy_with_logits(g, x[0], loom_softmax(g, x[1], NULL), NULL, NULL, NULL);
}
static loom_output b_xent_bp(loom_graph *g, const loom_output *x) {
  loom_output l, b;
  loom_softmax_cross_entropy_with_logits(g, x[0], loom_softmax(g, x[1], NULL), &l, &b, NULL);
  return loom_add(g, b, loom_expand_dims(g, l, -1, NULL), NULL);
}
static loom_output b_sxent(loom_graph *g, const loom_output *x) {
  return loom_sparse_softmax_cross_entropy_with_logits(g, x[0], x[1], NULL, NULL, NULL);
}
static loom_output b_sxent_bp(loom_graph *g, const loom_output *x) {
  loom_output l, b;
  loom_sparse_softmax_cross_entropy_with_logits(g, x[0], x[1], &l, &b, NULL);
  return loom_add(g, b, loom_expand_dims(g, l, -1, NULL), NULL);
}
/* node inputs are (logits, labels): x0 = logits, x1 = labels */
static loom_output b_sig_xent(loom_graph *g, const loom_output *x) {
  return loom_sigmoid_cross_entropy_with_logits(g, x[1], x[0], NULL);
}
static loom_output b_conv_same(loom_graph *g, const loom_output *x) {
  return loom_conv2d(g, x[0], x[1], NULL, LOOM_PADDING_SAME, NULL, NULL);
}
static loom_output b_conv_s2(loom_graph *g, const loom_output *x) {
  int64_t s[4] = {1, 2, 2, 1};
  return loom_conv2d(g, x[0], x[1], s, LOOM_PADDING_VALID, NULL, NULL);
}
static loom_output b_conv_dil(loom_graph *g, const loom_output *x) {
  int64_t d[4] = {1, 2, 1, 1};
  return loom_conv2d(g, x[0], x[1], NULL, LOOM_PADDING_SAME, d, NULL);
}
static loom_output b_conv_bi(loom_graph *g, const loom_output *x) {
  int64_t sz[4] = {2, 6, 6, 2};
  return loom_conv2d_backprop_input(g, sz, x[0], x[1], NULL, LOOM_PADDING_VALID, NULL, NULL);
}
static loom_output b_conv_bf(loom_graph *g, const loom_output *x) {
  int64_t sz[4] = {3, 3, 2, 4};
  return loom_conv2d_backprop_filter(g, x[0], sz, x[1], NULL, LOOM_PADDING_VALID, NULL, NULL);
}
static loom_output b_max_pool(loom_graph *g, const loom_output *x) {
  int64_t k[4] = {1, 2, 2, 1};
  return loom_max_pool(g, x[0], k, k, LOOM_PADDING_VALID, NULL);
}
static loom_output b_max_pool_same(loom_graph *g, const loom_output *x) {
  int64_t k[4] = {1, 3, 3, 1}, s[4] = {1, 2, 2, 1};
  return loom_max_pool(g, x[0], k, s, LOOM_PADDING_SAME, NULL);
}
static loom_output b_avg_pool(loom_graph *g, const loom_output *x) {
  int64_t k[4] = {1, 3, 3, 1}, s[4] = {1, 2, 2, 1};
  return loom_avg_pool(g, x[0], k, s, LOOM_PADDING_SAME, NULL);
}
static loom_output b_avg_pool_grad(loom_graph *g, const loom_output *x) {
  int64_t k[4] = {1, 3, 3, 1}, s[4] = {1, 2, 2, 1}, sh[4] = {2, 5, 5, 2};
  return loom_avg_pool_grad(g, sh, x[0], k, s, LOOM_PADDING_SAME, NULL);
}
static loom_output b_l2n1(loom_graph *g, const loom_output *x) { return loom_l2_normalize(g, x[0], 1, 0, NULL); }
static loom_output b_l2n0(loom_graph *g, const loom_output *x) { return loom_l2_normalize(g, x[0], 0, 0, NULL); }
/* epsilon above some rows' squared norms: those rows are x / sqrt(eps) */
static loom_output b_l2n_eps(loom_graph *g, const loom_output *x) { return loom_l2_normalize(g, x[0], -1, 0.5, NULL); }

static const grad_case CASES_NN[] = {
    {LOOM_OP_Softmax, "softmax", F64C, 1, {2}, {{3, 4}}, b_softmax, -2, 2, 0, 0, 0, 0, 0},
    {LOOM_OP_LogSoftmax, "log_softmax", F64C, 1, {2}, {{3, 4}}, b_log_softmax, -2, 2, 0, 0, 0, 0, 0},
    {LOOM_OP_SoftmaxCrossEntropyWithLogits, "xent_loss", F64C, 2, {2, 2}, {{3, 4}, {3, 4}}, b_xent, -2, 2, 0, 0, 0, 0,
     0},
    {LOOM_OP_SoftmaxCrossEntropyWithLogits, "xent_loss_and_backprop", F64C, 2, {2, 2}, {{3, 4}, {3, 4}}, b_xent_bp, -2,
     2, 0, 0, 0, 0, 0},
    {LOOM_OP_SparseSoftmaxCrossEntropyWithLogits, "sparse_xent_loss", F64C, 2, {2, 1}, {{3, 4}, {3}}, b_sxent, -2, 2, 0,
     0, 0, 2, 4},
    {LOOM_OP_SparseSoftmaxCrossEntropyWithLogits, "sparse_xent_loss_and_backprop", F64C, 2, {2, 1}, {{3, 4}, {3}},
     b_sxent_bp, -2, 2, 0, 0, 0, 2, 4},
    {LOOM_OP_SigmoidCrossEntropyWithLogits, "sigmoid_xent", F64C, 2, {2, 2}, {{3, 4}, {3, 4}}, b_sig_xent, -2, 2, 0, 0,
     0, 0, 0},
    {LOOM_OP_Conv2D, "conv2d_same", F64C, 2, {4, 4}, {{2, 5, 5, 3}, {3, 3, 3, 2}}, b_conv_same, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Conv2D, "conv2d_stride2_valid", F64C, 2, {4, 4}, {{2, 7, 6, 2}, {3, 2, 2, 3}}, b_conv_s2, -1, 1, 0, 0, 0,
     0, 0},
    {LOOM_OP_Conv2D, "conv2d_dilated", F64C, 2, {4, 4}, {{1, 6, 5, 2}, {2, 3, 2, 2}}, b_conv_dil, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_Conv2DBackpropInput, "conv2d_backprop_input", F64C, 2, {4, 4}, {{3, 3, 2, 4}, {2, 4, 4, 4}}, b_conv_bi, -1,
     1, 0, 0, 0, 0, 0},
    {LOOM_OP_Conv2DBackpropFilter, "conv2d_backprop_filter", F64C, 2, {4, 4}, {{2, 6, 6, 2}, {2, 4, 4, 4}}, b_conv_bf,
     -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_MaxPool, "max_pool", F64C, 1, {4}, {{2, 4, 4, 3}}, b_max_pool, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_MaxPool, "max_pool_same", F64C, 1, {4}, {{1, 5, 5, 2}}, b_max_pool_same, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_AvgPool, "avg_pool_same", F64C, 1, {4}, {{2, 5, 5, 2}}, b_avg_pool, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_AvgPoolGrad, "avg_pool_grad", F64C, 1, {4}, {{2, 3, 3, 2}}, b_avg_pool_grad, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_L2Normalize, "l2_normalize_axis1", F64C, 1, {2}, {{3, 4}}, b_l2n1, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_L2Normalize, "l2_normalize_axis0", F64C, 1, {3}, {{3, 2, 2}}, b_l2n0, -1, 1, 0, 0, 0, 0, 0},
    {LOOM_OP_L2Normalize, "l2_normalize_eps", F64C, 1, {2}, {{6, 2}}, b_l2n_eps, -0.7, 0.7, 0, 0, 0, 0, 0},
};
