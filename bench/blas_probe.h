/* Times every cblas_sgemm/cblas_sgemv call of the process (libloom.a's
 * included) by interposing them and forwarding to OpenBLAS via
 * dlsym(RTLD_NEXT). Needs OpenBLAS linked dynamically (the default). The
 * time is summed over the calling threads: loom's pool calls BLAS from
 * several threads at --threads > 1, so the total can exceed the wall time. */
#ifndef LOOM_BLAS_PROBE_H
#define LOOM_BLAS_PROBE_H
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include "bench_util.h"

typedef void (*bp_sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                            const blasint, const blasint, const blasint, const float, const float *, const blasint,
                            const float *, const blasint, const float, float *, const blasint);
typedef void (*bp_sgemv_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const blasint, const blasint,
                            const float, const float *, const blasint, const float *, const blasint, const float,
                            float *, const blasint);
static bp_sgemm_fn bp_real_sgemm;
static bp_sgemv_fn bp_real_sgemv;
static double bp_blas_us;
static pthread_mutex_t bp_mu = PTHREAD_MUTEX_INITIALIZER;
static void bp_add(double us) {
  pthread_mutex_lock(&bp_mu);
  bp_blas_us += us;
  pthread_mutex_unlock(&bp_mu);
}

void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER Order, OPENBLAS_CONST enum CBLAS_TRANSPOSE TransA,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE TransB, OPENBLAS_CONST blasint M, OPENBLAS_CONST blasint N,
                 OPENBLAS_CONST blasint K, OPENBLAS_CONST float alpha, OPENBLAS_CONST float *A,
                 OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *B, OPENBLAS_CONST blasint ldb,
                 OPENBLAS_CONST float beta, float *C, OPENBLAS_CONST blasint ldc) {
  if (!bp_real_sgemm) bp_real_sgemm = (bp_sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
  if (!bp_real_sgemm) abort();
  double t = bu_now_us();
  bp_real_sgemm(Order, TransA, TransB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  bp_add(bu_now_us() - t);
}

void cblas_sgemv(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE trans,
                 OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float *a, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *x,
                 OPENBLAS_CONST blasint incx, OPENBLAS_CONST float beta, float *y, OPENBLAS_CONST blasint incy) {
  if (!bp_real_sgemv) bp_real_sgemv = (bp_sgemv_fn)dlsym(RTLD_NEXT, "cblas_sgemv");
  if (!bp_real_sgemv) abort();
  double t = bu_now_us();
  bp_real_sgemv(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
  bp_add(bu_now_us() - t);
}
#endif
