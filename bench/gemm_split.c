/* bench/gemm_split.c - loom's f32 MatMul at 1 and 2 threads against raw
 * OpenBLAS at 1 thread and at its own 2 threads, on the dense-layer shapes of
 * the CNN trained at batch 64 (a 1568 -> 128 layer: forward, dx, dW) and on
 * the MLP shapes of bench/ops.c.
 *
 *   build/<dir>/bench/gemm_split [--iters N] [--rounds R] [--only cnn|mlp]
 *
 * Prints key=value lines only. The four sides run in the same process on the
 * same buffers, interleaved: each round runs every side for --iters calls in
 * a row (the order rotates from round to round) and keeps all but the first
 * two calls of each run (the threads of the side before may still be
 * spinning); the figures are medians over the rounds. loom's sides run the
 * MatMul node as a session target (no fetch), in a session of --threads 1 and
 * one of 2; OpenBLAS's 2 threads are switched on for its own side only
 * (openblas_set_num_threads), as loom keeps BLAS at 1 thread. OpenBLAS's
 * threads spin for 2^OPENBLAS_THREAD_TIMEOUT cycles after a call before they
 * sleep (2^28 by default, about 0.1 s, which would take a core from the next
 * side): the program runs itself again with OPENBLAS_THREAD_TIMEOUT=20 when
 * it is not set. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loom/loom.h"
#include "bench_util.h"

enum { SIDES = 4, SKIP = 2 };
static const char *side_name[SIDES] = {"loom_t1", "loom_t2", "blas_t1", "blas_t2"};

typedef struct {
  const char *name, *set;
  int64_t M, N, K;
  int ta, tb;
} mm_case;

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "error: %s: %s\n", what, st ? loom_status_message(st) : "");
  exit(1);
}

static void fill(float *p, int64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p[i] = (float)((double)((x * 2685821657736338717ull) >> 40) / 16777216.0 - 0.5);
  }
}

static loom_session *new_session(loom_graph *g, int threads, loom_status *st) {
  loom_session_options o = loom_session_options_default();
  o.num_threads = threads;
  loom_session *s = loom_session_new(g, &o, st);
  if (!s) die("session", st);
  return s;
}

static void raw(const mm_case *c, const float *A, const float *B, float *C) {
  cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans, c->tb ? CblasTrans : CblasNoTrans, (blasint)c->M,
              (blasint)c->N, (blasint)c->K, 1.0f, A, (blasint)(c->ta ? c->M : c->K), B,
              (blasint)(c->tb ? c->K : c->N), 0.0f, C, (blasint)c->N);
}

static void bench_case(const mm_case *c, int iters, int rounds) {
  loom_status *st = loom_status_new();
  int64_t da[2] = {c->ta ? c->K : c->M, c->ta ? c->M : c->K};
  int64_t db[2] = {c->tb ? c->N : c->K, c->tb ? c->K : c->N};
  loom_graph *g = loom_graph_new();
  loom_output a = loom_placeholder(g, LOOM_F32, 2, da, "a");
  loom_output b = loom_placeholder(g, LOOM_F32, 2, db, "b");
  loom_output y = loom_matmul(g, a, b, c->ta, c->tb, "mm");
  if (loom_graph_status(g, st)) die("graph", st);
  loom_session *s[2] = {new_session(g, 1, st), new_session(g, 2, st)};
  loom_tensor *av = loom_tensor_new(LOOM_F32, 2, da, st), *bv = loom_tensor_new(LOOM_F32, 2, db, st);
  if (!av || !bv) die("tensor", st);
  float *A = loom_tensor_data(av), *B = loom_tensor_data(bv);
  fill(A, c->M * c->K, 1);
  fill(B, c->K * c->N, 2);
  float *C = malloc(sizeof(float) * (size_t)(c->M * c->N));
  loom_output feeds[2] = {a, b};
  loom_tensor *vals[2] = {av, bv};
  loom_node *target = y.node;

  /* loom's answers at both thread counts against the raw call */
  openblas_set_num_threads(1);
  raw(c, A, B, C);
  double maxerr[2] = {0, 0};
  for (int t = 0; t < 2; t++) {
    loom_tensor *out = NULL;
    if (loom_session_run(s[t], feeds, vals, 2, &y, &out, 1, NULL, 0, st)) die(c->name, st);
    const float *L = loom_tensor_data(out);
    for (int64_t i = 0; i < c->M * c->N; i++) maxerr[t] = fmax(maxerr[t], fabs((double)L[i] - (double)C[i]));
    loom_tensor_free(out);
  }

  int keep = iters - SKIP, n = rounds * keep;
  double *tm[SIDES];
  for (int k = 0; k < SIDES; k++) tm[k] = malloc(sizeof(double) * (size_t)n);
  for (int r = -1; r < rounds; r++) /* round -1 warms every side up */
    for (int k0 = 0; k0 < SIDES; k0++) {
      int k = (k0 + (r < 0 ? 0 : r)) % SIDES;
      if (k == 3) openblas_set_num_threads(2);
      for (int i = 0; i < iters; i++) {
        double t0 = bu_now_us();
        if (k < 2) {
          if (loom_session_run(s[k], feeds, vals, 2, NULL, NULL, 0, &target, 1, st)) die(c->name, st);
        } else {
          raw(c, A, B, C);
        }
        double dt = bu_now_us() - t0;
        if (r >= 0 && i >= SKIP) tm[k][r * keep + i - SKIP] = dt;
      }
      if (k == 3) openblas_set_num_threads(1);
    }
  double med[SIDES];
  for (int k = 0; k < SIDES; k++) med[k] = bu_median(tm[k], n);
  printf("gemm_%s_shape=%s%s[%lld,%lld]x%s[%lld,%lld] M=%lld N=%lld K=%lld\n", c->name, c->set, c->ta ? " T" : " ",
         (long long)da[0], (long long)da[1], c->tb ? "T" : "", (long long)db[0], (long long)db[1], (long long)c->M,
         (long long)c->N, (long long)c->K);
  for (int k = 0; k < SIDES; k++) printf("gemm_%s_%s_us=%.1f\n", c->name, side_name[k], med[k]);
  printf("gemm_%s_loom_t1_vs_blas_t1=%.3f\n", c->name, med[0] / med[2]);
  printf("gemm_%s_loom_t2_vs_blas_t2=%.3f\n", c->name, med[1] / med[3]);
  printf("gemm_%s_loom_t2_vs_blas_t1=%.3f\n", c->name, med[1] / med[2]);
  printf("gemm_%s_max_abs_diff_t1=%.3g\n", c->name, maxerr[0]);
  printf("gemm_%s_max_abs_diff_t2=%.3g\n", c->name, maxerr[1]);
  fflush(stdout);
  for (int k = 0; k < SIDES; k++) free(tm[k]);
  free(C);
  loom_tensor_free(av);
  loom_tensor_free(bv);
  loom_session_free(s[0]);
  loom_session_free(s[1]);
  loom_graph_free(g);
  loom_status_free(st);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") || !strcmp(argv[i], "--rounds") || !strcmp(argv[i], "--only")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value\n", argv[i]);
        return 2;
      }
      i++;
    } else {
      fprintf(stderr, "usage: %s [--iters N] [--rounds R] [--only cnn|mlp]\n", argv[0]);
      return 2;
    }
  }
  if (!getenv("OPENBLAS_THREAD_TIMEOUT")) { /* read when OpenBLAS loads: run again with it set */
    setenv("OPENBLAS_THREAD_TIMEOUT", "20", 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "error: cannot run itself again with OPENBLAS_THREAD_TIMEOUT set\n");
    return 1;
  }
  int iters = atoi(bu_flag(argc, argv, "--iters", "8")), rounds = atoi(bu_flag(argc, argv, "--rounds", "25"));
  const char *only = bu_flag(argc, argv, "--only", "");
  if (iters <= SKIP || rounds < 1) {
    fprintf(stderr, "error: --iters must be > %d and --rounds >= 1\n", SKIP);
    return 2;
  }
  printf("iters=%d\nrounds=%d\nopenblas_thread_timeout=%s\n", iters, rounds, getenv("OPENBLAS_THREAD_TIMEOUT"));
  static const mm_case cases[] = {
      {"cnn_fwd", "cnn", 64, 128, 1568, 0, 0},   /* X[64,1568] . W[1568,128] */
      {"cnn_dx", "cnn", 64, 1568, 128, 0, 1},    /* dY[64,128] . W^T */
      {"cnn_dw", "cnn", 1568, 128, 64, 1, 0},    /* X^T . dY */
      {"mlp_fwd1", "mlp", 128, 512, 784, 0, 0},  /* bench/ops.c's MLP shapes */
      {"mlp_fwd2", "mlp", 128, 256, 512, 0, 0},
      {"mlp_fwd3", "mlp", 128, 10, 256, 0, 0},
      {"mlp_dw1", "mlp", 784, 512, 128, 1, 0},
      {"mlp_dx1", "mlp", 128, 784, 512, 0, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!*only || !strcmp(only, cases[i].set)) bench_case(&cases[i], iters, rounds);
  return 0;
}
