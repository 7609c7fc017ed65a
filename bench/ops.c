/* bench/ops.c - op-level benchmarks: per-op dispatch cost, MatMul vs raw
 * OpenBLAS on the MLP shapes, elementwise Add vs a plain C loop.
 *
 *   build/<dir>/bench/ops [--threads N] [--device cpu] [--iters N]
 *
 * Prints key=value lines only. Every loom/raw pair is measured in the same
 * process, interleaved (alternating which goes first), on the same input
 * buffers, and summarised by the median.
 *
 * What the loom MatMul/Add numbers include (the "honest option"):
 *  - <name>_loom_us runs the op's node as a session *target*: plan lookup,
 *    feed binding, the kernel writing its output into the session arena, no
 *    fetch. This is the cost of the op inside a bigger graph, where its output
 *    is consumed by the next node rather than copied out.
 *  - <name>_loom_fetch_us fetches the output into a caller tensor reused
 *    between runs: the same plus one memcpy of the result (M*N floats), which
 *    is what a caller that reads the product pays. Both are printed with their
 *    ratio to the raw BLAS call, and <name>_copy_us is a plain memcpy of the
 *    same byte count for reference.
 *
 * Which BLAS routine loom's kernel called is checked, not assumed: this file
 * defines cblas_sgemm / cblas_sgemv, which the static libloom.a links against
 * instead of libopenblas.so's; they count calls and forward to the real ones
 * (looked up with dlsym(RTLD_NEXT)). The raw baseline calls the real functions
 * directly, so it does not pay the (one indirect call) forwarding cost. */
#include <cblas.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"
#include "bench_util.h"

/* ---- BLAS call counting (see the header comment) ---- */
typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                         const blasint, const blasint, const blasint, const float, const float *, const blasint,
                         const float *, const blasint, const float, float *, const blasint);
typedef void (*sgemv_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const blasint, const blasint,
                         const float, const float *, const blasint, const float *, const blasint, const float,
                         float *, const blasint);
static sgemm_fn real_sgemm;
static sgemv_fn real_sgemv;
static long n_sgemm, n_sgemv;

static int blas_resolve(void) {
  if (!real_sgemm) real_sgemm = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
  if (!real_sgemv) real_sgemv = (sgemv_fn)dlsym(RTLD_NEXT, "cblas_sgemv");
  return real_sgemm && real_sgemv ? 0 : -1;
}

void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER Order, OPENBLAS_CONST enum CBLAS_TRANSPOSE TransA,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE TransB, OPENBLAS_CONST blasint M, OPENBLAS_CONST blasint N,
                 OPENBLAS_CONST blasint K, OPENBLAS_CONST float alpha, OPENBLAS_CONST float *A,
                 OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *B, OPENBLAS_CONST blasint ldb,
                 OPENBLAS_CONST float beta, float *C, OPENBLAS_CONST blasint ldc) {
  if (!real_sgemm && blas_resolve()) abort();
  n_sgemm++;
  real_sgemm(Order, TransA, TransB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void cblas_sgemv(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE trans,
                 OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float *a, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *x,
                 OPENBLAS_CONST blasint incx, OPENBLAS_CONST float beta, float *y, OPENBLAS_CONST blasint incy) {
  if (!real_sgemv && blas_resolve()) abort();
  n_sgemv++;
  real_sgemv(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

/* ---- helpers ---- */
static int g_threads = 1;
static int g_iters = 200;

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "error: %s: %s\n", what, st ? loom_status_message(st) : "");
  exit(1);
}

static loom_session *new_session(loom_graph *g, loom_status *st) {
  if (loom_graph_status(g, st)) die("graph", st);
  loom_session_options o = loom_session_options_default();
  o.num_threads = g_threads;
  loom_session *s = loom_session_new(g, &o, st);
  if (!s) die("session", st);
  return s;
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

static float *aligned_floats(int64_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, (size_t)(n > 0 ? n : 1) * sizeof(float))) return NULL;
  return p;
}

/* ---- dispatch: a chain of 1000 AddV2 of 1-element tensors ---- */
static void bench_dispatch(void) {
  enum { NOPS = 1000, REPEATS = 9 };
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {1};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x");
  loom_output one = loom_const_data(g, LOOM_F32, 1, d, (float[]){1.0f}, "one");
  loom_output y = x;
  for (int i = 0; i < NOPS; i++) y = loom_add(g, y, one, NULL);
  loom_session *s = new_session(g, st);
  loom_tensor *xv = loom_tensor_from_data(LOOM_F32, 1, d, (float[]){0.0f}, st);
  loom_tensor *out = NULL;
  for (int w = 0; w < 20; w++)
    if (loom_session_run(s, &x, &xv, 1, &y, &out, 1, NULL, 0, st)) die("dispatch run", st);
  if (((float *)loom_tensor_data(out))[0] != (float)NOPS) die("dispatch result is wrong", NULL);
  int runs = 200;
  double per_op[REPEATS];
  for (int r = 0; r < REPEATS; r++) {
    double t0 = bu_now_us();
    for (int i = 0; i < runs; i++) loom_session_run(s, &x, &xv, 1, &y, &out, 1, NULL, 0, st);
    per_op[r] = (bu_now_us() - t0) / ((double)runs * NOPS);
  }
  printf("dispatch_ops=%d\n", NOPS);
  printf("dispatch_us_per_op=%.4f\n", bu_median(per_op, REPEATS));
  loom_tensor_free(out);
  loom_tensor_free(xv);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
}

/* ---- MatMul vs raw BLAS ---- */
typedef struct {
  const char *name;
  int64_t M, N, K;
  int ta, tb;
} mm_case;

static void bench_matmul(const mm_case *c) {
  loom_status *st = loom_status_new();
  int64_t da[2] = {c->ta ? c->K : c->M, c->ta ? c->M : c->K};
  int64_t db[2] = {c->tb ? c->N : c->K, c->tb ? c->K : c->N};
  loom_graph *g = loom_graph_new();
  loom_output a = loom_placeholder(g, LOOM_F32, 2, da, "a");
  loom_output b = loom_placeholder(g, LOOM_F32, 2, db, "b");
  loom_output y = loom_matmul(g, a, b, c->ta, c->tb, "mm");
  loom_session *s = new_session(g, st);
  loom_tensor *av = loom_tensor_new(LOOM_F32, 2, da, st), *bv = loom_tensor_new(LOOM_F32, 2, db, st);
  if (!av || !bv) die("tensor", st);
  float *A = loom_tensor_data(av), *B = loom_tensor_data(bv);
  fill(A, c->M * c->K, 1);
  fill(B, c->K * c->N, 2);
  float *Craw = aligned_floats(c->M * c->N), *Ccopy = aligned_floats(c->M * c->N);
  loom_output feeds[2] = {a, b};
  loom_tensor *vals[2] = {av, bv};
  loom_node *target = y.node;
  loom_tensor *out = NULL;

  /* warm-up; also checks loom's answer against the raw call and which BLAS routine it used */
  long gemm0 = n_sgemm, gemv0 = n_sgemv;
  if (loom_session_run(s, feeds, vals, 2, &y, &out, 1, NULL, 0, st)) die(c->name, st);
  long used_gemm = n_sgemm - gemm0, used_gemv = n_sgemv - gemv0;
  const char *path = used_gemv == 1 && used_gemm == 0 ? "sgemv" : used_gemm == 1 && used_gemv == 0 ? "sgemm" : "other";
  int gemv = c->M == 1 || c->N == 1;
  enum CBLAS_TRANSPOSE TA = c->ta ? CblasTrans : CblasNoTrans, TB = c->tb ? CblasTrans : CblasNoTrans;
#define RAW_CALL()                                                                                              \
  do {                                                                                                          \
    if (c->M == 1)                                                                                              \
      real_sgemv(CblasRowMajor, c->tb ? CblasNoTrans : CblasTrans, (blasint)(c->tb ? c->N : c->K),              \
                 (blasint)(c->tb ? c->K : c->N), 1.0f, B, (blasint)(c->tb ? c->K : c->N), A, 1, 0.0f, Craw, 1); \
    else                                                                                                        \
      real_sgemm(CblasRowMajor, TA, TB, (blasint)c->M, (blasint)c->N, (blasint)c->K, 1.0f, A,                  \
                 (blasint)(c->ta ? c->M : c->K), B, (blasint)(c->tb ? c->K : c->N), 0.0f, Craw, (blasint)c->N); \
  } while (0)
  RAW_CALL();
  const float *Cl = loom_tensor_data(out);
  double maxerr = 0;
  for (int64_t i = 0; i < c->M * c->N; i++) {
    double e = fabs((double)Cl[i] - (double)Craw[i]);
    if (e > maxerr) maxerr = e;
  }
  for (int w = 0; w < 3; w++) {
    loom_session_run(s, feeds, vals, 2, NULL, NULL, 0, &target, 1, st);
    RAW_CALL();
  }

  int n = g_iters;
  double *tl = malloc(sizeof(double) * (size_t)n), *tf = malloc(sizeof(double) * (size_t)n);
  double *tr = malloc(sizeof(double) * (size_t)n), *tc = malloc(sizeof(double) * (size_t)n);
  size_t bytes = (size_t)(c->M * c->N) * sizeof(float);
  for (int i = 0; i < n; i++) {
    /* rotate the order of the three measurements so none always runs on a warmer cache */
    for (int k = 0; k < 3; k++) {
      int which = (i + k) % 3;
      double t0 = bu_now_us();
      if (which == 0) {
        if (loom_session_run(s, feeds, vals, 2, NULL, NULL, 0, &target, 1, st)) die(c->name, st);
        tl[i] = bu_now_us() - t0;
      } else if (which == 1) {
        if (loom_session_run(s, feeds, vals, 2, &y, &out, 1, NULL, 0, st)) die(c->name, st);
        tf[i] = bu_now_us() - t0;
      } else {
        RAW_CALL();
        tr[i] = bu_now_us() - t0;
      }
    }
  }
#undef RAW_CALL
  /* the copy on its own (not inside the loop above: reading Craw there would warm the raw call's output) */
  for (int i = 0; i < n; i++) {
    double t0 = bu_now_us();
    memcpy(Ccopy, Craw, bytes);
    tc[i] = bu_now_us() - t0;
  }
  double ml = bu_median(tl, n), mf = bu_median(tf, n), mr = bu_median(tr, n), mc = bu_median(tc, n);
  printf("matmul_%s_shape=%s[%lld,%lld]x%s[%lld,%lld]\n", c->name, c->ta ? "T" : "", (long long)da[0],
         (long long)da[1], c->tb ? "T" : "", (long long)db[0], (long long)db[1]);
  printf("matmul_%s_path=%s\n", c->name, path);
  printf("matmul_%s_loom_us=%.2f\n", c->name, ml);
  printf("matmul_%s_loom_fetch_us=%.2f\n", c->name, mf);
  printf("matmul_%s_%s_us=%.2f\n", c->name, gemv ? "sgemv" : "blas", mr);
  if (gemv) printf("matmul_%s_blas_us=%.2f\n", c->name, mr);
  printf("matmul_%s_copy_us=%.2f\n", c->name, mc);
  printf("matmul_%s_vs_blas=%.4f\n", c->name, ml / mr);
  printf("matmul_%s_fetch_vs_blas=%.4f\n", c->name, mf / mr);
  printf("matmul_%s_gflops=%.2f\n", c->name, 2.0 * (double)c->M * (double)c->N * (double)c->K / (ml * 1e3));
  printf("matmul_%s_max_abs_diff=%.3g\n", c->name, maxerr);
  free(tl);
  free(tf);
  free(tr);
  free(tc);
  free(Craw);
  free(Ccopy);
  loom_tensor_free(out);
  loom_tensor_free(av);
  loom_tensor_free(bv);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
}

/* ---- elementwise Add of 1M floats vs a C loop ---- */
static void __attribute__((noinline)) c_add(const float *restrict a, const float *restrict b, float *restrict c,
                                            int64_t n) {
  for (int64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
}

static void bench_add(void) {
  const int64_t n = 1 << 20;
  loom_status *st = loom_status_new();
  int64_t d[1] = {n};
  loom_graph *g = loom_graph_new();
  loom_output a = loom_placeholder(g, LOOM_F32, 1, d, "a");
  loom_output b = loom_placeholder(g, LOOM_F32, 1, d, "b");
  loom_output y = loom_add(g, a, b, "add");
  loom_session *s = new_session(g, st);
  loom_tensor *av = loom_tensor_new(LOOM_F32, 1, d, st), *bv = loom_tensor_new(LOOM_F32, 1, d, st);
  float *A = loom_tensor_data(av), *B = loom_tensor_data(bv), *C = aligned_floats(n);
  fill(A, n, 3);
  fill(B, n, 4);
  loom_output feeds[2] = {a, b};
  loom_tensor *vals[2] = {av, bv};
  loom_node *target = y.node;
  loom_tensor *out = NULL;
  if (loom_session_run(s, feeds, vals, 2, &y, &out, 1, NULL, 0, st)) die("add", st);
  c_add(A, B, C, n);
  if (memcmp(C, loom_tensor_data(out), (size_t)n * sizeof(float))) die("add result differs from the C loop", NULL);
  int iters = g_iters * 2;
  double *tl = malloc(sizeof(double) * (size_t)iters), *tf = malloc(sizeof(double) * (size_t)iters);
  double *tc = malloc(sizeof(double) * (size_t)iters);
  for (int i = 0; i < iters; i++)
    for (int k = 0; k < 3; k++) {
      int which = (i + k) % 3;
      double t0 = bu_now_us();
      if (which == 0) {
        loom_session_run(s, feeds, vals, 2, NULL, NULL, 0, &target, 1, st);
        tl[i] = bu_now_us() - t0;
      } else if (which == 1) {
        loom_session_run(s, feeds, vals, 2, &y, &out, 1, NULL, 0, st);
        tf[i] = bu_now_us() - t0;
      } else {
        c_add(A, B, C, n);
        tc[i] = bu_now_us() - t0;
      }
    }
  double ml = bu_median(tl, iters), mf = bu_median(tf, iters), mc = bu_median(tc, iters);
  printf("add_1m_loom_us=%.2f\n", ml);
  printf("add_1m_loom_fetch_us=%.2f\n", mf);
  printf("add_1m_c_loop_us=%.2f\n", mc);
  printf("add_1m_vs_c=%.4f\n", ml / mc);
  free(tl);
  free(tf);
  free(tc);
  free(C);
  loom_tensor_free(out);
  loom_tensor_free(av);
  loom_tensor_free(bv);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
}

#ifdef LOOM_HAVE_CUDA
/* --device cuda: loom's MatMul in a CUDA session (inputs are variables, so
 * they stay on the device; each run ends with one stream synchronization)
 * against a raw cublasSgemm on the same shapes in the same process. */
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
static int bench_matmul_cuda(const mm_case *c) {
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  int64_t da[2] = {c->ta ? c->K : c->M, c->ta ? c->M : c->K}, db[2] = {c->tb ? c->N : c->K, c->tb ? c->K : c->N};
  loom_tensor *av = loom_tensor_new(LOOM_F32, 2, da, st), *bv = loom_tensor_new(LOOM_F32, 2, db, st);
  fill(loom_tensor_data(av), da[0] * da[1], 1);
  fill(loom_tensor_data(bv), db[0] * db[1], 2);
  loom_variable *va = loom_variable_new(g, loom_const(g, av, "a0"), 0, 0, "a");
  loom_variable *vb = loom_variable_new(g, loom_const(g, bv, "b0"), 0, 0, "b");
  loom_output y = loom_matmul(g, loom_variable_output(va), loom_variable_output(vb), (int)c->ta, (int)c->tb, "mm");
  loom_node *init = loom_global_variables_initializer(g);
  loom_session_options o = loom_session_options_default();
  o.device = LOOM_DEVICE_CUDA;
  loom_session *s = loom_session_new(g, &o, st);
  if (!s) die("cuda session", st);
  if (loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st)) die("init", st);
  loom_node *target = y.node;
  double *tl = malloc(sizeof(double) * (size_t)g_iters), *tr = malloc(sizeof(double) * (size_t)g_iters);
  for (int i = 0; i < 10; i++)
    if (loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &target, 1, st)) die("matmul", st);
  for (int i = 0; i < g_iters; i++) {
    double t0 = bu_now_us();
    if (loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &target, 1, st)) die("matmul", st);
    tl[i] = bu_now_us() - t0;
  }
  loom_tensor *out = NULL;
  if (loom_session_run(s, NULL, NULL, 0, &y, &out, 1, NULL, 0, st)) die("matmul fetch", st);
  /* raw cuBLAS */
  float *A, *B, *C;
  size_t na = (size_t)(da[0] * da[1]) * 4, nb = (size_t)(db[0] * db[1]) * 4, nc = (size_t)(c->M * c->N) * 4;
  cublasHandle_t h;
  if (cudaMalloc((void **)&A, na) || cudaMalloc((void **)&B, nb) || cudaMalloc((void **)&C, nc) ||
      cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "error: raw cuBLAS setup failed\n");
    return 1;
  }
  cudaMemcpy(A, loom_tensor_data(av), na, cudaMemcpyHostToDevice);
  cudaMemcpy(B, loom_tensor_data(bv), nb, cudaMemcpyHostToDevice);
  const float one = 1, zero = 0;
  int M = (int)c->M, N = (int)c->N, K = (int)c->K;
  for (int i = 0; i < 10 + g_iters; i++) {
    double t0 = bu_now_us();
    cublasSgemm(h, c->tb ? CUBLAS_OP_T : CUBLAS_OP_N, c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B,
                c->tb ? K : N, A, c->ta ? M : K, &zero, C, N);
    cudaDeviceSynchronize();
    if (i >= 10) tr[i - 10] = bu_now_us() - t0;
  }
  float *hc = malloc(nc);
  cudaMemcpy(hc, C, nc, cudaMemcpyDeviceToHost);
  const float *ly = loom_tensor_data(out);
  double maxerr = 0;
  for (int64_t i = 0; i < c->M * c->N; i++) {
    double e = fabs((double)ly[i] - (double)hc[i]);
    if (e > maxerr) maxerr = e;
  }
  double ml = bu_median(tl, g_iters), mr = bu_median(tr, g_iters);
  printf("matmul_%s_cuda_loom_us=%.2f\n", c->name, ml);
  printf("matmul_%s_cuda_cublas_us=%.2f\n", c->name, mr);
  printf("matmul_%s_cuda_vs_cublas=%.4f\n", c->name, ml / mr);
  printf("matmul_%s_cuda_max_abs_diff=%.3g\n", c->name, maxerr);
  free(hc);
  free(tl);
  free(tr);
  cublasDestroy(h);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  loom_tensor_free(out);
  loom_tensor_free(av);
  loom_tensor_free(bv);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  return 0;
}
#endif

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") || !strcmp(argv[i], "--device") || !strcmp(argv[i], "--iters")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value\n", argv[i]);
        return 2;
      }
      i++;
    } else {
      fprintf(stderr, "usage: %s [--threads N] [--device cpu|cuda] [--iters N]\n", argv[0]);
      return 2;
    }
  }
  const char *dev = bu_flag(argc, argv, "--device", "cpu");
  int cuda = !strcmp(dev, "cuda");
  if (strcmp(dev, "cpu") && !cuda) {
    fprintf(stderr, "error: --device must be cpu or cuda, got %s\n", dev);
    return 2;
  }
#ifndef LOOM_HAVE_CUDA
  if (cuda) {
    fprintf(stderr, "error: --device cuda: this build of loom has no CUDA backend (build with make CUDA=1)\n");
    return 2;
  }
#endif
  g_threads = atoi(bu_flag(argc, argv, "--threads", "1"));
  g_iters = atoi(bu_flag(argc, argv, "--iters", "200"));
  if (g_threads < 1 || g_iters < 1) {
    fprintf(stderr, "error: --threads and --iters must be >= 1\n");
    return 2;
  }
  if (blas_resolve()) {
    fprintf(stderr, "error: cannot find cblas_sgemm/cblas_sgemv with dlsym (is OpenBLAS linked dynamically?)\n");
    return 1;
  }
  printf("device=%s\n", cuda ? "cuda" : "cpu");
  printf("threads=%d\n", g_threads);
  printf("iters=%d\n", g_iters);
  bench_dispatch();
  static const mm_case cases[] = {
      {"128x784x512", 128, 512, 784, 0, 0},    /* x . W1 */
      {"128x512x256", 128, 256, 512, 0, 0},    /* h1 . W2 */
      {"128x256x10", 128, 10, 256, 0, 0},      /* h2 . W3 */
      {"784x128x512_tn", 784, 512, 128, 1, 0}, /* dW1 = x^T . dy: [128,784]^T [128,512] */
      {"128x512x784_nt", 128, 784, 512, 0, 1}, /* dx = dy . W1^T: [128,512] [784,512]^T */
      {"1x784x512", 1, 512, 784, 0, 0},        /* one row: sgemv */
  };
#ifdef LOOM_HAVE_CUDA
  if (cuda) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      if (bench_matmul_cuda(&cases[i])) return 1;
    return 0;
  }
#endif
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) bench_matmul(&cases[i]);
  bench_add();
  return 0;
}
