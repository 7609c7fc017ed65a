/* tests/gpu/test_parity.c - GPU vs CPU parity (make test-gpu): the math,
 * reduction, nn, gather and random ops, their gradients, and two small models
 * (an MLP and a CNN) trained 20 SGD/Adam steps on both devices, comparing
 * every loss and the final variables. Harness: tests/gpu/parity.h. Without a
 * CUDA device (or in a build without the CUDA backend) it prints a skip line
 * and exits 0. */
#include "tests/gpu/parity.h"

static const int64_t S1[4] = {1, 1, 1, 1}, S2[4] = {1, 2, 2, 1};
static loom_output b_add(loom_graph *g, const loom_output *i) { return loom_add(g, i[0], i[1], NULL); }
static loom_output b_sub(loom_graph *g, const loom_output *i) { return loom_sub(g, i[0], i[1], NULL); }
static loom_output b_mul(loom_graph *g, const loom_output *i) { return loom_mul(g, i[0], i[1], NULL); }
static loom_output b_div(loom_graph *g, const loom_output *i) {
  return loom_div(g, i[0], loom_add(g, loom_abs(g, i[1], NULL), loom_const_f32(g, 0.5f, NULL), NULL), NULL);
}
static loom_output b_max(loom_graph *g, const loom_output *i) { return loom_maximum(g, i[0], i[1], NULL); }
static loom_output b_less(loom_graph *g, const loom_output *i) { return loom_less(g, i[0], i[1], NULL); }
static loom_output b_relu(loom_graph *g, const loom_output *i) { return loom_relu(g, i[0], NULL); }
static loom_output b_tanh(loom_graph *g, const loom_output *i) { return loom_tanh(g, i[0], NULL); }
static loom_output b_sigmoid(loom_graph *g, const loom_output *i) { return loom_sigmoid(g, i[0], NULL); }
static loom_output b_exp(loom_graph *g, const loom_output *i) { return loom_exp(g, i[0], NULL); }
static loom_output b_elu(loom_graph *g, const loom_output *i) { return loom_elu(g, i[0], NULL); }
static loom_output b_softplus(loom_graph *g, const loom_output *i) { return loom_softplus(g, i[0], NULL); }
static loom_output b_gelu(loom_graph *g, const loom_output *i) { return loom_gelu(g, i[0], 0, NULL); }
static loom_output b_lrelu(loom_graph *g, const loom_output *i) { return loom_leaky_relu(g, i[0], 0.2, NULL); }
static loom_output b_square(loom_graph *g, const loom_output *i) { return loom_square(g, i[0], NULL); }
static loom_output b_matmul(loom_graph *g, const loom_output *i) { return loom_matmul(g, i[0], i[1], 0, 0, NULL); }
static loom_output b_matmul_tt(loom_graph *g, const loom_output *i) { return loom_matmul(g, i[0], i[1], 1, 1, NULL); }
static loom_output b_bmm(loom_graph *g, const loom_output *i) { return loom_batch_matmul(g, i[0], i[1], 0, 1, NULL); }
static loom_output b_bias(loom_graph *g, const loom_output *i) { return loom_bias_add(g, i[0], i[1], NULL); }
static loom_output b_sum_all(loom_graph *g, const loom_output *i) { return loom_reduce_sum(g, i[0], -1, NULL, 0, NULL); }
static loom_output b_sum_1(loom_graph *g, const loom_output *i) {
  int64_t ax[1] = {1};
  return loom_reduce_sum(g, i[0], 1, ax, 1, NULL);
}
static loom_output b_mean_02(loom_graph *g, const loom_output *i) {
  int64_t ax[2] = {0, 2};
  return loom_reduce_mean(g, i[0], 2, ax, 0, NULL);
}
static loom_output b_max_r(loom_graph *g, const loom_output *i) {
  int64_t ax[1] = {-1};
  return loom_reduce_max(g, i[0], 1, ax, 0, NULL);
}
static loom_output b_lse(loom_graph *g, const loom_output *i) {
  int64_t ax[1] = {1};
  return loom_reduce_logsumexp(g, i[0], 1, ax, 0, NULL);
}
static loom_output b_argmax(loom_graph *g, const loom_output *i) { return loom_argmax(g, i[0], 1, LOOM_I64, NULL); }
static loom_output b_softmax(loom_graph *g, const loom_output *i) { return loom_softmax(g, i[0], NULL); }
static loom_output b_log_softmax(loom_graph *g, const loom_output *i) { return loom_log_softmax(g, i[0], NULL); }
static loom_output b_xent(loom_graph *g, const loom_output *i) {
  return loom_softmax_cross_entropy_with_logits(g, i[0], loom_softmax(g, i[1], NULL), NULL, NULL, NULL);
}
static loom_output b_sxent(loom_graph *g, const loom_output *i) {
  return loom_sparse_softmax_cross_entropy_with_logits(g, i[0], i[1], NULL, NULL, NULL);
}
static loom_output b_conv_same(loom_graph *g, const loom_output *i) {
  return loom_conv2d(g, i[0], i[1], S1, LOOM_PADDING_SAME, NULL, NULL);
}
static loom_output b_conv_valid_s2(loom_graph *g, const loom_output *i) {
  return loom_conv2d(g, i[0], i[1], S2, LOOM_PADDING_VALID, NULL, NULL);
}
static loom_output b_maxpool(loom_graph *g, const loom_output *i) {
  int64_t k[4] = {1, 2, 2, 1};
  return loom_max_pool(g, i[0], k, S2, LOOM_PADDING_SAME, NULL);
}
static loom_output b_avgpool(loom_graph *g, const loom_output *i) {
  int64_t k[4] = {1, 3, 3, 1};
  return loom_avg_pool(g, i[0], k, S2, LOOM_PADDING_SAME, NULL);
}
static loom_output b_gather(loom_graph *g, const loom_output *i) { return loom_gather(g, i[0], i[1], 0, NULL); }
static loom_output b_uniform(loom_graph *g, const loom_output *i) {
  (void)i;
  int64_t d[2] = {37, 129};
  return loom_random_uniform(g, 2, d, LOOM_F32, -2, 3, 7, 11, NULL);
}
static loom_output b_normal(loom_graph *g, const loom_output *i) {
  (void)i;
  int64_t d[1] = {1001};
  return loom_random_normal(g, 1, d, LOOM_F32, 0, 1, 5, 3, NULL);
}
static loom_output b_trunc(loom_graph *g, const loom_output *i) {
  (void)i;
  int64_t d[1] = {1001};
  return loom_truncated_normal(g, 1, d, LOOM_F32, 1, 2, 9, 1, NULL);
}

static const pcase cases[] = {
    {"add same", 2, {F32, F32}, {2, 2}, {{33, 65}, {33, 65}}, {0}, b_add, 1e-6, 1},
    {"add bcast row", 2, {F32, F32}, {2, 1}, {{33, 65}, {65}}, {0}, b_add, 1e-6, 1},
    {"sub bcast col", 2, {F32, F32}, {3, 3}, {{4, 5, 6}, {4, 1, 6}}, {0}, b_sub, 1e-6, 1},
    {"mul scalar", 2, {F32, F32}, {2, 0}, {{17, 3}, {0}}, {0}, b_mul, 1e-6, 1},
    {"mul i32", 2, {LOOM_I32, LOOM_I32}, {2, 2}, {{7, 9}, {7, 9}}, {100, 100}, b_mul, 0, 0},
    {"div", 2, {F32, F32}, {2, 2}, {{31, 7}, {31, 7}}, {0}, b_div, 1e-6, 1},
    {"maximum", 2, {F32, F32}, {2, 1}, {{31, 7}, {7}}, {0}, b_max, 0, 1},
    {"less", 2, {F32, F32}, {2, 2}, {{31, 7}, {31, 7}}, {0}, b_less, 0, 0},
    {"relu", 1, {F32}, {2}, {{100, 37}}, {0}, b_relu, 0, 1},
    {"tanh", 1, {F32}, {2}, {{100, 37}}, {0}, b_tanh, 1e-6, 1},
    {"sigmoid", 1, {F32}, {2}, {{100, 37}}, {0}, b_sigmoid, 1e-6, 1},
    {"exp", 1, {F32}, {1}, {{1000}}, {0}, b_exp, 1e-6, 1},
    {"elu", 1, {F32}, {1}, {{1000}}, {0}, b_elu, 1e-6, 1},
    {"softplus", 1, {F32}, {1}, {{1000}}, {0}, b_softplus, 1e-6, 1},
    {"gelu", 1, {F32}, {1}, {{1000}}, {0}, b_gelu, 1e-6, 1},
    {"leaky_relu", 1, {F32}, {1}, {{1000}}, {0}, b_lrelu, 1e-6, 1},
    {"square f64", 1, {LOOM_F64}, {1}, {{1000}}, {0}, b_square, 1e-12, 1},
    {"matmul", 2, {F32, F32}, {2, 2}, {{64, 33}, {33, 17}}, {0}, b_matmul, 1e-5, 1},
    {"matmul tt", 2, {F32, F32}, {2, 2}, {{33, 64}, {17, 33}}, {0}, b_matmul_tt, 1e-5, 1},
    {"matmul gemv", 2, {F32, F32}, {2, 2}, {{1, 129}, {129, 65}}, {0}, b_matmul, 1e-5, 1},
    {"batch matmul bcast", 2, {F32, F32}, {3, 3}, {{3, 8, 9}, {1, 5, 9}}, {0}, b_bmm, 1e-5, 1},
    /* batch dims [2,1] x [1,3]: broadcast both ways (one strided call per outer index) */
    {"batch matmul partial bcast", 2, {F32, F32}, {4, 4}, {{2, 1, 3, 4}, {1, 3, 5, 4}}, {0}, b_bmm, 1e-5, 1},
    {"batch matmul partial bcast 2", 2, {F32, F32}, {4, 4}, {{1, 3, 6, 7}, {4, 1, 2, 7}}, {0}, b_bmm, 1e-5, 1},
    {"bias_add", 2, {F32, F32}, {2, 1}, {{50, 13}, {13}}, {0}, b_bias, 1e-6, 1},
    {"sum all", 1, {F32}, {2}, {{300, 301}}, {0}, b_sum_all, 1e-4, 1},
    {"sum axis1 keep", 1, {F32}, {3}, {{5, 700, 3}}, {0}, b_sum_1, 1e-5, 1},
    {"mean axes 0,2", 1, {F32}, {3}, {{6, 7, 8}}, {0}, b_mean_02, 1e-5, 1},
    {"max last", 1, {F32}, {2}, {{40, 513}}, {0}, b_max_r, 0, 1},
    {"logsumexp", 1, {F32}, {2}, {{40, 77}}, {0}, b_lse, 1e-5, 1},
    {"argmax", 1, {F32}, {3}, {{4, 50, 3}}, {0}, b_argmax, 0, 0},
    {"softmax", 1, {F32}, {2}, {{64, 10}}, {0}, b_softmax, 1e-5, 1},
    {"softmax wide", 1, {F32}, {2}, {{3, 3000}}, {0}, b_softmax, 1e-5, 1},
    {"log_softmax", 1, {F32}, {2}, {{64, 10}}, {0}, b_log_softmax, 1e-5, 1},
    {"softmax xent", 2, {F32, F32}, {2, 2}, {{32, 10}, {32, 10}}, {0}, b_xent, 1e-5, 1},
    {"sparse xent", 2, {F32, LOOM_I32}, {2, 1}, {{32, 10}, {32}}, {0, 10}, b_sxent, 1e-5, 1},
    /* C >= 1024: a block per row */
    {"log_softmax wide", 1, {F32}, {2}, {{5, 2500}}, {0}, b_log_softmax, 1e-5, 1},
    {"softmax xent wide", 2, {F32, F32}, {2, 2}, {{4, 2000}, {4, 2000}}, {0}, b_xent, 1e-5, 1},
    {"sparse xent wide", 2, {F32, LOOM_I32}, {2, 1}, {{6, 3000}, {6}}, {0, 3000}, b_sxent, 1e-5, 1},
    {"conv2d same", 2, {F32, F32}, {4, 4}, {{2, 9, 9, 3}, {3, 3, 3, 5}}, {0}, b_conv_same, 1e-5, 1},
    {"conv2d valid s2", 2, {F32, F32}, {4, 4}, {{2, 10, 11, 4}, {4, 3, 4, 6}}, {0}, b_conv_valid_s2, 1e-5, 1},
    {"max_pool", 1, {F32}, {4}, {{2, 9, 9, 3}}, {0}, b_maxpool, 0, 1},
    {"avg_pool", 1, {F32}, {4}, {{2, 9, 9, 3}}, {0}, b_avgpool, 1e-6, 1},
    {"gather", 2, {F32, LOOM_I64}, {2, 1}, {{50, 7}, {33}}, {0, 50}, b_gather, 0, 1},
    {"random_uniform", 0, {0}, {0}, {{0}}, {0}, b_uniform, 1e-6, 0},
    {"random_normal", 0, {0}, {0}, {{0}}, {0}, b_normal, 1e-5, 0},
    {"truncated_normal", 0, {0}, {0}, {{0}}, {0}, b_trunc, 1e-5, 0},
};

/* ---- training: 20 steps on both devices ---- */

static void train_case(const char *name, int cnn, int adam) {
  loom_graph *g = loom_graph_new();
  const int64_t B = 16;
  int64_t xd[4] = {B, 8, 8, 2}, ld[1] = {B};
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_output lab = loom_placeholder(g, LOOM_I32, 1, ld, "labels");
  loom_output h;
  if (cnn) {
    int64_t fd[4] = {3, 3, 2, 4}, k[4] = {1, 2, 2, 1};
    loom_initializer fi = loom_init_random_normal(0, 0.2, 7);
    loom_variable *f = loom_get_variable(g, "conv/w", LOOM_F32, 4, fd, &fi, 1);
    h = loom_relu(g, loom_conv2d(g, x, loom_variable_output(f), S1, LOOM_PADDING_SAME, NULL, NULL), NULL);
    h = loom_max_pool(g, h, k, S2, LOOM_PADDING_VALID, NULL);
    int64_t rd[2] = {B, 4 * 4 * 4};
    h = parity_dense(g, loom_reshape(g, h, 2, rd, NULL), 64, 10, 0, "fc");
  } else {
    int64_t rd[2] = {B, 128};
    h = parity_dense(g, loom_reshape(g, x, 2, rd, NULL), 128, 32, 1, "fc1");
    h = parity_dense(g, h, 32, 10, 0, "fc2");
  }
  loom_output loss = loom_reduce_mean(g, loom_sparse_softmax_cross_entropy_with_logits(g, h, lab, NULL, NULL, NULL), -1, NULL, 0, NULL);
  loom_optimizer *opt =
      adam ? loom_optimizer_adam(loom_const_f32(g, 0.01f, NULL), NULL) : loom_optimizer_sgd(loom_const_f32(g, 0.1f, NULL));
  loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
  loom_node *init = loom_global_variables_initializer(g);
  loom_tensor *fx = rand_tensor(LOOM_F32, 4, xd, 0), *fl = rand_tensor(LOOM_I32, 1, ld, 10);
  loom_session *sc = session(g, LOOM_DEVICE_CPU), *sg = session(g, LOOM_DEVICE_CUDA);
  loom_output feeds[2] = {x, lab};
  loom_tensor *fv[2] = {fx, fl};
  if (sc && sg && run(sc, name, NULL, NULL, 0, NULL, NULL, 0, &init, 1) && run(sg, name, NULL, NULL, 0, NULL, NULL, 0, &init, 1)) {
    for (int step = 0; step < 20; step++) {
      loom_tensor *lc = NULL, *lg = NULL;
      if (!run(sc, name, feeds, fv, 2, &loss, &lc, 1, &train, 1) || !run(sg, name, feeds, fv, 2, &loss, &lg, 1, &train, 1))
        break;
      char what[96];
      snprintf(what, sizeof what, "%s step %d loss", name, step);
      compare(what, lc, lg, 1e-4);
      loom_tensor_free(lc);
      loom_tensor_free(lg);
    }
    int nv = 0;
    loom_variable *const *vars = loom_get_variable_collection(g, LOOM_GLOBAL_VARIABLES, &nv); /* slots too */
    for (int i = 0; i < nv; i++) {
      loom_tensor *a = NULL, *b = NULL;
      loom_status *st = loom_status_new();
      if (!loom_session_read_variable(sc, loom_variable_name(vars[i]), &a, st) &&
          !loom_session_read_variable(sg, loom_variable_name(vars[i]), &b, st)) {
        char what[128];
        snprintf(what, sizeof what, "%s variable %s after 20 steps", name, loom_variable_name(vars[i]));
        compare(what, a, b, 1e-4);
      }
      loom_status_free(st);
      loom_tensor_free(a);
      loom_tensor_free(b);
    }
  }
  loom_optimizer_free(opt);
  loom_tensor_free(fx);
  loom_tensor_free(fl);
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(g);
}
int main(void) {
  if (!parity_gpu_present("test_parity")) return 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
  train_case("mlp sgd", 0, 0);
  train_case("mlp adam", 0, 1);
  train_case("cnn sgd", 1, 0);
  /* the CPU-fallback path: these ops run on the host with copies between device steps */
  setenv("LOOM_CUDA_DISABLE", "MatMul,BiasAddGrad,ApplyAdam,SparseSoftmaxCrossEntropyWithLogits,MaxPoolGrad", 1);
  train_case("mlp adam, some ops on the CPU", 0, 1);
  train_case("cnn sgd, some ops on the CPU", 1, 0);
  unsetenv("LOOM_CUDA_DISABLE");
  return parity_report("test_parity");
}
