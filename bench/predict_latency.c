/* Serving latency of the resident predictor: an MLP 784-512-256-10 (ReLU,
 * softmax probabilities) with random weights is exported to a temporary
 * directory and loaded with loom_predictor_load; its batch-1 latency
 * (median of many calls) is set against the same forward pass written
 * directly in C on OpenBLAS (cblas_sgemv for batch 1, cblas_sgemm for
 * batch 1024, bias, ReLU, softmax), which is the floor.
 *   --threads N (1)  the predictor's pool (which runs BLAS one thread per
 *                    block) and the floor's OpenBLAS threads
 *   --runs N (3000)  batch-1 calls timed;  --big-runs N (30) batch-1024 calls
 * Output: key=value lines (batch1_us (the median), batch1_p50_us, batch1_p99_us, raw_us, ratio,
 * batch1024_examples_per_sec, raw_batch1024_examples_per_sec, ...). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "loom/loom.h"
#include "bench_util.h"

static const int64_t L[4] = {784, 512, 256, 10};

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "predict_latency: %s: %s\n", what, st ? loom_status_message(st) : "");
  exit(1);
}

/* The floor: x [bs, 784] -> probabilities [bs, 10]; h0, h1 scratch. */
typedef struct raw_net {
  const float *w[3], *b[3];
  float *h[3];
} raw_net;

static int g_floor_threads = 1;

static void raw_forward(raw_net *n, const float *x, int bs, float *out) {
  openblas_set_num_threads(g_floor_threads); /* a session sets 1: the floor runs BLAS's own threads */
  const float *in = x;
  for (int l = 0; l < 3; l++) {
    int NI = (int)L[l], NO = (int)L[l + 1];
    float *h = l == 2 ? out : n->h[l];
    for (int r = 0; r < bs; r++) memcpy(h + (int64_t)r * NO, n->b[l], sizeof(float) * (size_t)NO);
    if (bs == 1)
      cblas_sgemv(CblasRowMajor, CblasTrans, NI, NO, 1.0f, n->w[l], NO, in, 1, 1.0f, h, 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, NO, NI, 1.0f, in, NI, n->w[l], NO, 1.0f, h, NO);
    if (l < 2)
      for (int64_t i = 0; i < (int64_t)bs * NO; i++) h[i] = h[i] > 0 ? h[i] : 0;
    in = h;
  }
  for (int r = 0; r < bs; r++) {
    float *z = out + r * 10, mx = z[0], s = 0;
    for (int k = 1; k < 10; k++) mx = z[k] > mx ? z[k] : mx;
    for (int k = 0; k < 10; k++) s += (z[k] = expf(z[k] - mx));
    for (int k = 0; k < 10; k++) z[k] /= s;
  }
  openblas_set_num_threads(1);
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= m)) m = d;
  }
  return m;
}

int main(int argc, char **argv) {
  int threads = atoi(bu_flag(argc, argv, "--threads", "1"));
  int runs = atoi(bu_flag(argc, argv, "--runs", "3000"));
  int big_runs = atoi(bu_flag(argc, argv, "--big-runs", "30"));
  if (threads < 1) threads = 1;
  if (runs < 10) runs = 10;
  if (big_runs < 3) big_runs = 3;
  g_floor_threads = threads;
  loom_status *st = loom_status_new();

  /* the model: random weights (PyTorch Linear's init range), seeded */
  loom_graph *g = loom_graph_new();
  loom_graph_set_random_seed(g, 1);
  int64_t xd[2] = {-1, 784};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_output h = x;
  const char *scopes[3] = {"dense", "dense_1", "dense_2"};
  for (int l = 0; l < 3; l++) {
    loom_dense_options o = loom_dense_options_default();
    double lim = 1.0 / sqrt((double)L[l]);
    o.kernel_initializer = loom_init_random_uniform(-lim, lim, 10 + l);
    o.bias_initializer = loom_init_random_uniform(-lim, lim, 20 + l);
    o.activation = l < 2 ? "relu" : NULL;
    h = loom_layers_dense(g, h, L[l + 1], &o, scopes[l]);
  }
  loom_output probs = loom_softmax(g, h, "probs");
  loom_node *init = loom_global_variables_initializer(g);
  if (loom_graph_status(g, st)) die("building the graph", st);
  loom_session_options so = loom_session_options_default();
  so.num_threads = threads;
  loom_session *s = loom_session_new(g, &so, st);
  if (!s || loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st)) die("initializing", st);

  /* export, then load */
  char dir[] = "/tmp/loom_predict_latency_XXXXXX";
  if (!mkdtemp(dir)) die("mkdtemp", NULL);
  char edir[128];
  snprintf(edir, sizeof edir, "%s/1", dir);
  const char *in_keys[1] = {"x"}, *out_keys[1] = {"probabilities"};
  loom_signature sig = {"serving_default", "tensorflow/serving/predict", 1, in_keys, &x, 1, out_keys, &probs};
  double t0 = bu_now_us();
  if (loom_export_write(g, s, 1, &sig, edir, st)) die("exporting", st);
  double export_ms = (bu_now_us() - t0) / 1000.0;
  loom_predictor_options po = loom_predictor_options_default();
  po.num_threads = threads;
  t0 = bu_now_us();
  loom_predictor *p = loom_predictor_load(edir, &po, st);
  double load_ms = (bu_now_us() - t0) / 1000.0;
  if (!p) die("loading", st);

  /* the floor's weights: the session's values */
  loom_tensor *wt[3] = {NULL, NULL, NULL}, *bt[3] = {NULL, NULL, NULL};
  raw_net rn;
  for (int l = 0; l < 3; l++) {
    char nm[64];
    snprintf(nm, sizeof nm, "%s/kernel", scopes[l]);
    if (loom_session_read_variable(s, nm, &wt[l], st)) die(nm, st);
    snprintf(nm, sizeof nm, "%s/bias", scopes[l]);
    if (loom_session_read_variable(s, nm, &bt[l], st)) die(nm, st);
    rn.w[l] = loom_tensor_data(wt[l]);
    rn.b[l] = loom_tensor_data(bt[l]);
    rn.h[l] = aligned_alloc(64, sizeof(float) * 1024 * 512);
  }

  /* inputs: batch 1 and batch 1024 of values in [0, 1) */
  int64_t d1[2] = {1, 784}, dbig[2] = {1024, 784};
  loom_tensor *x1 = loom_tensor_new(LOOM_F32, 2, d1, st), *xb = loom_tensor_new(LOOM_F32, 2, dbig, st);
  uint64_t rs = 12345;
  bu_init_uniform(loom_tensor_data(xb), 1024 * 784, 1, &rs);
  float *xbp = loom_tensor_data(xb);
  for (int64_t i = 0; i < 1024 * 784; i++) xbp[i] = 0.5f * (xbp[i] + 1.0f);
  memcpy(loom_tensor_data(x1), xbp + 5 * 784, sizeof(float) * 784);
  float *raw1 = aligned_alloc(64, 64), *rawb = aligned_alloc(64, sizeof(float) * 1024 * 10);

  /* correctness first: the predictor against the floor, both batch sizes */
  loom_tensor *o1 = NULL, *ob = NULL;
  if (loom_predictor_run(p, NULL, 1, &x1, 1, &o1, st)) die("predicting (batch 1)", st);
  if (loom_predictor_run(p, NULL, 1, &xb, 1, &ob, st)) die("predicting (batch 1024)", st);
  raw_forward(&rn, loom_tensor_data(x1), 1, raw1);
  raw_forward(&rn, xbp, 1024, rawb);
  double err1 = max_abs_diff(loom_tensor_data(o1), raw1, 10);
  double errb = max_abs_diff(loom_tensor_data(ob), rawb, 1024 * 10);
  if (!(err1 <= 1e-5) || !(errb <= 1e-5)) {
    fprintf(stderr, "predict_latency: the predictor differs from the C forward: batch1 %.3g, batch1024 %.3g\n",
            err1, errb);
    return 1;
  }

  /* batch 1: the predictor and the floor, interleaved in blocks so that
   * both see the same machine state */
  double *tp = malloc(sizeof(double) * (size_t)runs), *tr = malloc(sizeof(double) * (size_t)runs);
  for (int i = 0; i < 200; i++) {
    loom_predictor_run(p, NULL, 1, &x1, 1, &o1, st);
    raw_forward(&rn, loom_tensor_data(x1), 1, raw1);
  }
  const int blk = 100;
  for (int i0 = 0; i0 < runs; i0 += blk) {
    int n = runs - i0 < blk ? runs - i0 : blk;
    for (int i = 0; i < n; i++) {
      double a = bu_now_us();
      if (loom_predictor_run(p, NULL, 1, &x1, 1, &o1, st)) die("predicting", st);
      tp[i0 + i] = bu_now_us() - a;
    }
    for (int i = 0; i < n; i++) {
      double a = bu_now_us();
      raw_forward(&rn, loom_tensor_data(x1), 1, raw1);
      tr[i0 + i] = bu_now_us() - a;
    }
  }
  double batch1_us = bu_median(tp, runs), raw_us = bu_median(tr, runs); /* sorts tp and tr */
  double batch1_p99 = tp[(int)(0.99 * (runs - 1))], raw_p99 = tr[(int)(0.99 * (runs - 1))];

  /* batch 1024 */
  double *bp = malloc(sizeof(double) * (size_t)big_runs), *br = malloc(sizeof(double) * (size_t)big_runs);
  for (int i = 0; i < big_runs; i++) {
    double a = bu_now_us();
    if (loom_predictor_run(p, NULL, 1, &xb, 1, &ob, st)) die("predicting", st);
    bp[i] = bu_now_us() - a;
    a = bu_now_us();
    raw_forward(&rn, xbp, 1024, rawb);
    br[i] = bu_now_us() - a;
  }
  double big_us = bu_median(bp, big_runs), rbig_us = bu_median(br, big_runs);

  printf("impl=loom_predictor\nmodel=mlp_784_512_256_10\nthreads=%d\nruns=%d\n", threads, runs);
  printf("export_ms=%.2f\nload_ms=%.2f\n", export_ms, load_ms);
  printf("max_abs_diff_batch1=%.3g\nmax_abs_diff_batch1024=%.3g\n", err1, errb);
  printf("batch1_us=%.2f\nraw_us=%.2f\nratio=%.3f\noverhead_us=%.2f\n", batch1_us, raw_us, batch1_us / raw_us,
         batch1_us - raw_us);
  printf("batch1_p50_us=%.2f\nbatch1_p99_us=%.2f\nraw_p99_us=%.2f\n", batch1_us, batch1_p99, raw_p99);
  printf("batch1024_us=%.1f\nraw_batch1024_us=%.1f\n", big_us, rbig_us);
  printf("batch1024_examples_per_sec=%.0f\nraw_batch1024_examples_per_sec=%.0f\n", 1024e6 / big_us, 1024e6 / rbig_us);
  printf("peak_rss_mb=%.1f\n", bu_peak_rss_mb());

  free(tp);
  free(tr);
  free(bp);
  free(br);
  free(raw1);
  free(rawb);
  for (int l = 0; l < 3; l++) {
    free(rn.h[l]);
    loom_tensor_free(wt[l]);
    loom_tensor_free(bt[l]);
  }
  loom_tensor_free(o1);
  loom_tensor_free(ob);
  loom_tensor_free(x1);
  loom_tensor_free(xb);
  loom_predictor_free(p);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) fprintf(stderr, "predict_latency: could not remove %s\n", dir);
  return 0;
}
