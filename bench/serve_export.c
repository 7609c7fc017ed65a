/* For bench/serve.sh: exports an MLP (ReLU hidden layers, softmax output,
 * random weights) to <base>/mlp/1 and times the resident predictor in
 * process on batch 1 (the number loom-serve's HTTP latency is set against).
 *   --base DIR   --widths 784,512,256,10   --runs N (3000)   --threads N (1)
 * Writes <base>/request.json (one batch-1 row-format request) and prints
 * key=value lines: inproc_p50_us, inproc_p99_us, inproc_mean_us. */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "loom/loom.h"
#include "bench_util.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *base = bu_flag(argc, argv, "--base", NULL);
  const char *widths = bu_flag(argc, argv, "--widths", "784,512,256,10");
  int runs = atoi(bu_flag(argc, argv, "--runs", "3000"));
  int threads = atoi(bu_flag(argc, argv, "--threads", "1"));
  if (!base) {
    fprintf(stderr, "serve_export: --base DIR is required\n");
    return 2;
  }
  int64_t L[16];
  int nl = 0;
  for (const char *p = widths; *p && nl < 16;) {
    L[nl++] = strtoll(p, (char **)&p, 10);
    if (*p == ',') p++;
  }
  if (nl < 2) return 2;
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  loom_graph_set_random_seed(g, 1);
  int64_t xd[2] = {-1, L[0]};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x"), h = x;
  for (int l = 0; l + 1 < nl; l++) {
    loom_dense_options o = loom_dense_options_default();
    double lim = 1.0 / sqrt((double)L[l]);
    o.kernel_initializer = loom_init_random_uniform(-lim, lim, 10 + l);
    o.bias_initializer = loom_init_random_uniform(-lim, lim, 20 + l);
    o.activation = l + 2 < nl ? "relu" : NULL;
    char sc[32];
    snprintf(sc, sizeof sc, "dense_%d", l);
    h = loom_layers_dense(g, h, L[l + 1], &o, sc);
  }
  loom_output probs = loom_softmax(g, h, "probs");
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = loom_session_new(g, NULL, st);
  if (!s || loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st)) {
    fprintf(stderr, "serve_export: %s\n", loom_status_message(st));
    return 1;
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/mlp", base);
  mkdir(base, 0755);
  mkdir(dir, 0755);
  snprintf(dir, sizeof dir, "%s/mlp/1", base);
  const char *ik[1] = {"x"}, *ok[1] = {"probabilities"};
  loom_signature sig = {"serving_default", "tensorflow/serving/predict", 1, ik, &x, 1, ok, &probs};
  if (loom_export_write(g, s, 1, &sig, dir, st)) {
    fprintf(stderr, "serve_export: %s\n", loom_status_message(st));
    return 1;
  }
  /* the request: one row of values in [0, 1) */
  int64_t d1[2] = {1, L[0]};
  loom_tensor *x1 = loom_tensor_new(LOOM_F32, 2, d1, st);
  float *xp = loom_tensor_data(x1);
  char path[4200];
  snprintf(path, sizeof path, "%s/request.json", base);
  FILE *f = fopen(path, "w");
  fprintf(f, "{\"instances\": [[");
  for (int64_t i = 0; i < L[0]; i++) {
    xp[i] = (float)((i * 37 % 101) / 101.0);
    fprintf(f, "%s%.4g", i ? ", " : "", xp[i]);
  }
  fprintf(f, "]]}");
  fclose(f);
  loom_predictor_options po = loom_predictor_options_default();
  po.num_threads = threads;
  loom_predictor *p = loom_predictor_load(dir, &po, st);
  if (!p) {
    fprintf(stderr, "serve_export: %s\n", loom_status_message(st));
    return 1;
  }
  loom_tensor *out = NULL;
  double *t = malloc(sizeof(double) * (size_t)runs), sum = 0;
  for (int i = 0; i < 200; i++) loom_predictor_run(p, NULL, 1, &x1, 1, &out, st);
  for (int i = 0; i < runs; i++) {
    double t0 = bu_now_us();
    loom_predictor_run(p, NULL, 1, &x1, 1, &out, st);
    t[i] = bu_now_us() - t0;
    sum += t[i];
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_d);
  printf("widths=%s\ninproc_p50_us=%.2f\ninproc_p99_us=%.2f\ninproc_mean_us=%.2f\n", widths, t[runs / 2],
         t[(int)(runs * 0.99)], sum / runs);
  loom_tensor_free(out);
  loom_tensor_free(x1);
  loom_predictor_free(p);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  free(t);
  return 0;
}
