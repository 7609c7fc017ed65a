/* The all-reduce strategy's 1/N average, in the optimizer's read or in a pass of its own, on the
 * gradients of the Fashion-MNIST MLP 784-512-256-10 (535,818 floats), one thread:
 *   pass_then_update_ms: p[j] *= 1/N over the summed gradient (what the strategy did before the
 *     optimizer ops had a gradient scale, and still does where docs/distributed.md says), then the update;
 *   scaled_update_ms: the update with the gradient scale 1/N (the sum read and scaled in the kernel);
 * both in one process, alternated round by round, medians of --rounds rounds of --iters updates each; the
 * variables of the two sides are compared bit for bit at the end (same_bits=1).
 *   --optimizer sgd|adam|adagrad (sgd)  --ranks N (2)  --rounds R (15)  --iters I (200) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "loom/loom.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static const char *arg(int argc, char **argv, const char *name, const char *dflt) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return dflt;
}
static int fail(const char *what, loom_status *st) {
  fprintf(stderr, "fused_average: %s: %s\n", what, loom_status_message(st));
  return 1;
}

int main(int argc, char **argv) {
  const char *opt = arg(argc, argv, "--optimizer", "sgd");
  int ranks = atoi(arg(argc, argv, "--ranks", "2")), rounds = atoi(arg(argc, argv, "--rounds", "15"));
  int iters = atoi(arg(argc, argv, "--iters", "200"));
  if (ranks < 1 || rounds < 1 || rounds > 1000 || iters < 1) {
    fprintf(stderr, "fused_average: --ranks, --rounds (<= 1000) and --iters must be positive\n");
    return 2;
  }
  const int64_t n = 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10, d[1] = {n};
  const float inv = 1.0f / (float)ranks;
  loom_status *st = loom_status_new();
  loom_graph *g[2];
  loom_node *train[2];
  loom_output grad[2];
  loom_session *s[2];
  for (int k = 0; k < 2; k++) { /* k 0: fed the averages; k 1: fed the sums, gradient scale 1/N */
    g[k] = loom_graph_new();
    loom_initializer ini = loom_init_random_uniform(-0.1, 0.1, 3);
    loom_variable *v = loom_get_variable(g[k], "v", LOOM_F32, 1, d, &ini, 1);
    grad[k] = loom_placeholder(g[k], LOOM_F32, 1, d, "grad");
    loom_gradient gr = {grad[k], {NULL, 0}};
    loom_output lr = loom_const_f32(g[k], 0.01f, "lr");
    loom_optimizer *o = !strcmp(opt, "adam")      ? loom_optimizer_adam(lr, NULL)
                        : !strcmp(opt, "adagrad") ? loom_optimizer_adagrad(lr, NULL)
                                                  : loom_optimizer_sgd(lr);
    train[k] = loom_optimizer_apply_gradients(o, g[k], 1, &gr, &v, NULL, NULL);
    loom_optimizer_free(o);
    if (!train[k]) return fail("building the update", (loom_graph_status(g[k], st), st));
    for (int i = 0; k == 1 && loom_graph_node_at(g[k], i); i++) {
      loom_node *nd = loom_graph_node_at(g[k], i);
      const char *op = loom_node_op_name(nd);
      if ((!strncmp(op, "Apply", 5) || !strncmp(op, "SparseApply", 11)) &&
          loom_apply_set_gradient_scale(nd, inv, st) != LOOM_OK)
        return fail("setting the gradient scale", st);
    }
    loom_session_options so = loom_session_options_default();
    so.num_threads = 1;
    if (!(s[k] = loom_session_new(g[k], &so, st))) return fail("session", st);
    loom_node *init = loom_global_variables_initializer(g[k]);
    if (loom_session_run(s[k], NULL, NULL, 0, NULL, NULL, 0, &init, 1, st)) return fail("initializing", st);
  }
  float *sum = malloc((size_t)n * sizeof(float)), *buf = malloc((size_t)n * sizeof(float));
  double *ta = malloc((size_t)rounds * sizeof(double)), *tb = malloc((size_t)rounds * sizeof(double));
  if (!sum || !buf || !ta || !tb) return 2;
  for (int64_t i = 0; i < n; i++) sum[i] = (float)((i % 97) - 48) * 1e-3f * (float)ranks;
  loom_tensor *tbuf = loom_tensor_wrap(LOOM_F32, 1, d, buf, (size_t)n * sizeof(float), NULL, NULL, st);
  if (!tbuf) return fail("wrap", st);
  for (int r = 0; r < rounds; r++) {
    /* each update reads a fresh copy of the sums (as the strategy's all-reduce leaves them); the copy is
     * timed on its own and subtracted */
    double c0 = now();
    for (int it = 0; it < iters; it++) memcpy(buf, sum, (size_t)n * sizeof(float));
    double c1 = now(), copy = (c1 - c0) / iters;
    double t0 = now();
    for (int it = 0; it < iters; it++) {
      memcpy(buf, sum, (size_t)n * sizeof(float));
      for (int64_t j = 0; j < n; j++) buf[j] *= inv;
      if (loom_session_run(s[0], &grad[0], &tbuf, 1, NULL, NULL, 0, &train[0], 1, st)) return fail("update", st);
    }
    double t1 = now();
    for (int it = 0; it < iters; it++) {
      memcpy(buf, sum, (size_t)n * sizeof(float));
      if (loom_session_run(s[1], &grad[1], &tbuf, 1, NULL, NULL, 0, &train[1], 1, st)) return fail("update", st);
    }
    double t2 = now();
    ta[r] = ((t1 - t0) / iters - copy) * 1e3;
    tb[r] = ((t2 - t1) / iters - copy) * 1e3;
  }
  loom_tensor *va = NULL, *vb = NULL;
  if (loom_session_read_variable(s[0], "v", &va, st) || loom_session_read_variable(s[1], "v", &vb, st))
    return fail("reading the variables", st);
  int same = !memcmp(loom_tensor_data_const(va), loom_tensor_data_const(vb), (size_t)n * sizeof(float));
  qsort(ta, (size_t)rounds, sizeof(double), cmpd);
  qsort(tb, (size_t)rounds, sizeof(double), cmpd);
  printf("optimizer=%s ranks=%d floats=%lld rounds=%d iters=%d\n", opt, ranks, (long long)n, rounds, iters);
  printf("pass_then_update_ms=%.4f scaled_update_ms=%.4f scaled_vs_pass=%.3f same_bits=%d\n", ta[rounds / 2],
         tb[rounds / 2], tb[rounds / 2] / ta[rounds / 2], same);
  loom_tensor_free(va);
  loom_tensor_free(vb);
  loom_tensor_free(tbuf);
  for (int k = 0; k < 2; k++) {
    loom_session_free(s[k]);
    loom_graph_free(g[k]);
  }
  free(sum);
  free(buf);
  free(ta);
  free(tb);
  loom_status_free(st);
  return same ? 0 : 1;
}
