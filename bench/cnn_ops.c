/* bench/cnn_ops.c - per-op times of the convolution and pooling ops of
 * python/examples/tf_programs/fashion_mnist_cnn.py (batch 64: conv 5x5x1x16
 * SAME -> max-pool 2x2 -> conv 5x5x16x32 SAME -> max-pool 2x2), forward and
 * gradients, each op run alone as a session target on fixed random inputs;
 * layer1_grad: the first layer's backward pass from the pool's gradient
 * (pool1 + MaxPoolGrad + ReluGrad + filter and bias gradients; with folding
 * one step for the last four, LOOM_FOLD=0 runs them apart); layer2_fwd: the
 * second convolution with its BiasAdd, Relu and 2x2 MaxPool (one step folded);
 * layer1_fwd: the same for the first; layer2_step: the second layer's forward chain and, from
 * the pool's gradient, MaxPoolGrad -> ReluGrad -> its filter, input and bias gradients (the filter
 * gradient from the pool's winners when folded); layer1_step: the first layer's forward chain and
 * its filter and bias gradients (from the winners when folded: no dy made).
 *
 *   build/bench/cnn_ops [--threads N (2)] [--iters N (40)] [--batch N (64)] [--op NAME (all)]
 *
 * Prints key=value lines: <op>_us (median over iters, rounds alternate the
 * ops' order) and <op>_gflops for the convolutions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"
#include "bench_util.h"

enum { NOPS = 14, NIN = 8 };

/* Conv2D(x, w) (SAME, stride 1) -> BiasAdd (o values) -> Relu. */
static loom_output relu_chain(loom_graph *g, loom_output x, loom_output w, int64_t o) {
  float bias[32];
  for (int i = 0; i < 32; i++) bias[i] = 0.01f * (float)(i - 16);
  int64_t s1[4] = {1, 1, 1, 1}, bd[1] = {o};
  loom_output c = loom_conv2d(g, x, w, s1, LOOM_PADDING_SAME, NULL, NULL);
  return loom_relu(g, loom_bias_add(g, c, loom_const_data(g, LOOM_F32, 1, bd, bias, NULL), NULL), NULL);
}

int main(int argc, char **argv) {
  int threads = atoi(bu_flag(argc, argv, "--threads", "2"));
  int iters = atoi(bu_flag(argc, argv, "--iters", "40"));
  int64_t B = atoll(bu_flag(argc, argv, "--batch", "64"));
  const char *only = bu_flag(argc, argv, "--op", ""); /* run just this op (profiling) */
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  int64_t dx1[4] = {B, 28, 28, 1}, dw1[4] = {5, 5, 1, 16}, dy1[4] = {B, 28, 28, 16};
  int64_t dx2[4] = {B, 14, 14, 16}, dw2[4] = {5, 5, 16, 32}, dy2[4] = {B, 14, 14, 32};
  int64_t dp1[4] = {B, 14, 14, 16}, dp2[4] = {B, 7, 7, 32};
  int64_t s1[4] = {1, 1, 1, 1}, k2[4] = {1, 2, 2, 1};
  loom_output x1 = loom_random_normal(g, 4, dx1, LOOM_F32, 0, 1, 1, 0, "x1");
  loom_output w1 = loom_random_normal(g, 4, dw1, LOOM_F32, 0, 1, 2, 0, "w1");
  loom_output g1 = loom_random_normal(g, 4, dy1, LOOM_F32, 0, 1, 3, 0, "g1");
  loom_output x2 = loom_random_normal(g, 4, dx2, LOOM_F32, 0, 1, 4, 0, "x2");
  loom_output w2 = loom_random_normal(g, 4, dw2, LOOM_F32, 0, 1, 5, 0, "w2");
  loom_output g2 = loom_random_normal(g, 4, dy2, LOOM_F32, 0, 1, 6, 0, "g2");
  loom_output gp = loom_random_normal(g, 4, dp1, LOOM_F32, 0, 1, 7, 0, "gp");
  loom_output gp2 = loom_random_normal(g, 4, dp2, LOOM_F32, 0, 1, 8, 0, "gp2");
  /* the inputs as variables-like constants: evaluated once, fed afterwards */
  loom_output in[NIN] = {x1, w1, g1, x2, w2, g2, gp, gp2};
  loom_session_options so = loom_session_options_default();
  so.num_threads = threads;
  loom_session *s = loom_session_new(g, &so, st);
  loom_tensor *val[NIN] = {0};
  if (!s || loom_session_run(s, NULL, NULL, 0, in, val, NIN, NULL, 0, st)) {
    fprintf(stderr, "cnn_ops: %s\n", loom_status_message(st));
    return 1;
  }
  loom_output p[NIN];
  for (int i = 0; i < NIN; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "p%d", i);
    p[i] = loom_placeholder(g, LOOM_F32, 4, loom_tensor_dims(val[i]), nm);
  }
  loom_output pool1 = loom_max_pool(g, p[2], k2, k2, LOOM_PADDING_VALID, "pool1");
  loom_output ops[NOPS] = {
      loom_conv2d(g, p[0], p[1], s1, LOOM_PADDING_SAME, NULL, "conv1"),
      loom_conv2d_backprop_filter(g, p[0], dw1, p[2], s1, LOOM_PADDING_SAME, NULL, "conv1_dw"),
      loom_conv2d(g, p[3], p[4], s1, LOOM_PADDING_SAME, NULL, "conv2"),
      loom_conv2d_backprop_input(g, dx2, p[4], p[5], s1, LOOM_PADDING_SAME, NULL, "conv2_dx"),
      loom_conv2d_backprop_filter(g, p[3], dw2, p[5], s1, LOOM_PADDING_SAME, NULL, "conv2_dw"),
      pool1,
      loom_max_pool_grad(g, p[2], pool1, p[6], k2, k2, LOOM_PADDING_VALID, "pool1_grad"),
      loom_relu(g, p[2], "relu1"),
      loom_bias_add_grad(g, p[2], "bias1_grad"),
      {NULL, 0},
      {NULL, 0},
      {NULL, 0},
      {NULL, 0},
      {NULL, 0},
  };
  /* each layer's forward pass: Conv2D -> BiasAdd -> Relu -> MaxPool (one step when folded) */
  loom_output relu1 = relu_chain(g, p[0], p[1], 16), relu2 = relu_chain(g, p[3], p[4], 32);
  loom_output pool1f = loom_max_pool(g, relu1, k2, k2, LOOM_PADDING_VALID, "layer1_fwd");
  loom_output pool2f = loom_max_pool(g, relu2, k2, k2, LOOM_PADDING_VALID, "layer2_fwd");
  ops[NOPS - 1] = pool1f;
  ops[NOPS - 2] = pool2f;
  { /* the first layer's backward pass from the pool's gradient: MaxPoolGrad -> ReluGrad -> filter and
     * bias gradients (folded into one step, engine/fuse.c; LOOM_FOLD=0: four) */
    loom_output rg = loom_relu_grad(g, loom_max_pool_grad(g, p[2], pool1, p[6], k2, k2, LOOM_PADDING_VALID, NULL),
                                    p[2], NULL);
    loom_node *deps[2] = {loom_conv2d_backprop_filter(g, p[0], dw1, rg, s1, LOOM_PADDING_SAME, NULL, NULL).node,
                          loom_bias_add_grad(g, rg, NULL).node};
    ops[NOPS - 3].node = loom_group(g, 2, deps, "layer1_grad");
  }
  { /* the layers' forward chains above and their gradients from the pool's: MaxPoolGrad -> ReluGrad ->
     * filter, input (second layer) and bias gradients (when folded: the filter gradient from the
     * pool's winners inside the MaxPoolGrad, the second layer's input gradient from the pooled values,
     * so neither layer's dy is made; LOOM_FOLD=0: each step apart) */
    loom_output rg2 = loom_relu_grad(
        g, loom_max_pool_grad(g, relu2, pool2f, p[7], k2, k2, LOOM_PADDING_VALID, NULL), relu2, NULL);
    loom_node *deps2[3] = {loom_conv2d_backprop_filter(g, p[3], dw2, rg2, s1, LOOM_PADDING_SAME, NULL, NULL).node,
                           loom_conv2d_backprop_input(g, dx2, p[4], rg2, s1, LOOM_PADDING_SAME, NULL, NULL).node,
                           loom_bias_add_grad(g, rg2, NULL).node};
    ops[NOPS - 4].node = loom_group(g, 3, deps2, "layer2_step");
    loom_output rg1 = loom_relu_grad(
        g, loom_max_pool_grad(g, relu1, pool1f, p[6], k2, k2, LOOM_PADDING_VALID, NULL), relu1, NULL);
    loom_node *deps1[2] = {loom_conv2d_backprop_filter(g, p[0], dw1, rg1, s1, LOOM_PADDING_SAME, NULL, NULL).node,
                           loom_bias_add_grad(g, rg1, NULL).node};
    ops[NOPS - 5].node = loom_group(g, 2, deps1, "layer1_step");
  }
  const char *names[NOPS] = {"conv1",       "conv1_dw",    "conv2",       "conv2_dx",    "conv2_dw",
                             "pool1",       "pool1_grad",  "relu1",       "bias1_grad",  "layer1_step",
                             "layer2_step", "layer1_grad", "layer2_fwd",  "layer1_fwd"};
  double flops[NOPS] = {2.0 * B * 784 * 16 * 25, 2.0 * B * 784 * 16 * 25, 2.0 * B * 196 * 32 * 400,
                        2.0 * B * 196 * 32 * 400, 2.0 * B * 196 * 32 * 400, 0, 0, 0, 0, 0, 0, 0,
                        2.0 * B * 196 * 32 * 400, 2.0 * B * 784 * 16 * 25};
  double *t = calloc((size_t)NOPS * iters, sizeof *t);
  for (int it = -3; it < iters; it++)
    for (int k = 0; k < NOPS; k++) {
      int j = it % 2 ? NOPS - 1 - k : k;
      if (*only && strcmp(only, names[j])) continue;
      loom_node *tg = ops[j].node;
      double t0 = bu_now_us();
      if (loom_session_run(s, p, val, NIN, NULL, NULL, 0, &tg, 1, st)) {
        fprintf(stderr, "cnn_ops: %s: %s\n", names[j], loom_status_message(st));
        return 1;
      }
      if (it >= 0) t[j * iters + it] = bu_now_us() - t0;
    }
  printf("threads=%d\nbatch=%lld\niters=%d\n", threads, (long long)B, iters);
  for (int j = 0; j < NOPS; j++) {
    if (*only && strcmp(only, names[j])) continue;
    double us = bu_median(t + j * iters, iters);
    printf("%s_us=%.1f\n", names[j], us);
    if (flops[j] > 0) printf("%s_gflops=%.1f\n", names[j], flops[j] / (us * 1e3));
  }
  for (int i = 0; i < NIN; i++) loom_tensor_free(val[i]);
  free(t);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  return 0;
}
