/* CPU kernels: MatMul and BatchMatMulV2 on OpenBLAS. Single-row or
 * single-column products go to gemv (gemm's packing is wasted on them). */
#include <cblas.h>
#include <limits.h>
#include <string.h>
#include "kernels/cpu/linalg.h"
#include "kernels/geometry.h"

#define DEF_GEMM(T, S, GEMM, GEMV)                                                                        \
  void loom__gemm_##S(int ta, int tb, int64_t M, int64_t N, int64_t K, const T *A, const T *B, T *C) {      \
    if (M == 0 || N == 0) return;                                                                         \
    if (K == 0) {                                                                                         \
      memset(C, 0, (size_t)(M * N) * sizeof(T));                                                          \
      return;                                                                                             \
    }                                                                                                     \
    if (M == 1) { /* C[n] = sum_k a[k] op(B)[k,n]; a is contiguous whether transposed or not */           \
      if (tb)                                                                                             \
        GEMV(CblasRowMajor, CblasNoTrans, (blasint)N, (blasint)K, 1, B, (blasint)K, A, 1, 0, C, 1);       \
      else                                                                                                \
        GEMV(CblasRowMajor, CblasTrans, (blasint)K, (blasint)N, 1, B, (blasint)N, A, 1, 0, C, 1);         \
    } else if (N == 1) { /* C[m] = sum_k op(A)[m,k] b[k] */                                               \
      if (ta)                                                                                             \
        GEMV(CblasRowMajor, CblasTrans, (blasint)K, (blasint)M, 1, A, (blasint)M, B, 1, 0, C, 1);         \
      else                                                                                                \
        GEMV(CblasRowMajor, CblasNoTrans, (blasint)M, (blasint)K, 1, A, (blasint)K, B, 1, 0, C, 1);       \
    } else {                                                                                              \
      GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)M,     \
           (blasint)N, (blasint)K, 1, A, (blasint)(ta ? M : K), B, (blasint)(tb ? K : N), 0, C, (blasint)N); \
    }                                                                                                     \
  }

DEF_GEMM(float, f32, cblas_sgemm, cblas_sgemv)
DEF_GEMM(double, f64, cblas_dgemm, cblas_dgemv)

static int blas_ok(int64_t v) { return v >= 0 && v <= INT_MAX; }

static loom_code too_big(const loom_kctx *ctx, int64_t M, int64_t N, int64_t K) {
  return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,
                         "matrix dimensions M=%lld N=%lld K=%lld exceed the BLAS integer range", (long long)M,
                         (long long)N, (long long)K);
}

/* Matrix dims of the last two axes of a and b. */
static loom_code mm_dims(const loom_kctx *ctx, int64_t *M, int64_t *N, int64_t *K) {
  loom_code rc = loom__matmul_dims(ctx, M, N, K);
  if (rc) return rc;
  if (!blas_ok(*M) || !blas_ok(*N) || !blas_ok(*K)) return too_big(ctx, *M, *N, *K);
  return LOOM_OK;
}

#define DEF_MATMUL(T, S)                                                                                  \
  loom_code loom__k_matmul_##S(const loom_kctx *ctx) {                                                    \
    int64_t M, N, K;                                                                                      \
    loom_code rc = mm_dims(ctx, &M, &N, &K);                                                              \
    if (rc) return rc;                                                                                    \
    loom__gemm_##S(ctx->attrs->transpose_a, ctx->attrs->transpose_b, M, N, K, ctx->in[0]->data,           \
                   ctx->in[1]->data, ctx->out[0]->data);                                                  \
    return LOOM_OK;                                                                                       \
  }                                                                                                       \
  loom_code loom__k_batch_matmul_##S(const loom_kctx *ctx) {                                              \
    const loom_buf *a = ctx->in[0], *b = ctx->in[1];                                                      \
    loom_buf *y = ctx->out[0];                                                                            \
    int ta = ctx->attrs->transpose_a, tb = ctx->attrs->transpose_b;                                       \
    int64_t M, N, K;                                                                                      \
    loom_code rc = mm_dims(ctx, &M, &N, &K);                                                              \
    if (rc) return rc;                                                                                    \
    if (y->numel == 0) return LOOM_OK;                                                                    \
    int nbo = y->ndim - 2, nba = a->ndim - 2, nbb = b->ndim - 2;                                          \
    int64_t sa[LOOM_MAX_DIMS], sb[LOOM_MAX_DIMS], idx[LOOM_MAX_DIMS];                                     \
    int64_t batches = 1, ba = 1, bb = 1;                                                                  \
    for (int i = nbo - 1; i >= 0; i--) {                                                                  \
      int ia = i - (nbo - nba), ib = i - (nbo - nbb);                                                     \
      int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;                             \
      sa[i] = da == 1 ? 0 : ba;                                                                           \
      sb[i] = db == 1 ? 0 : bb;                                                                           \
      ba *= da;                                                                                           \
      bb *= db;                                                                                           \
      batches *= y->dims[i];                                                                              \
      idx[i] = 0;                                                                                         \
    }                                                                                                     \
    const T *A = a->data, *B = b->data;                                                                   \
    T *C = y->data;                                                                                       \
    if (bb == 1 && ba == batches && !ta && blas_ok(batches * M)) {                                        \
      /* b is shared and a's batches are contiguous rows: one [batches*M, K] x [K, N] product */          \
      loom__gemm_##S(0, tb, batches * M, N, K, A, B, C);                                                  \
      return LOOM_OK;                                                                                     \
    }                                                                                                     \
    int64_t oa = 0, ob = 0, szA = M * K, szB = K * N, szC = M * N;                                        \
    for (int64_t t = 0; t < batches; t++) {                                                               \
      loom__gemm_##S(ta, tb, M, N, K, A + oa * szA, B + ob * szB, C + t * szC);                           \
      for (int d = nbo - 1; d >= 0; d--) {                                                                \
        idx[d]++;                                                                                         \
        oa += sa[d];                                                                                      \
        ob += sb[d];                                                                                      \
        if (idx[d] < y->dims[d]) break;                                                                   \
        oa -= sa[d] * y->dims[d];                                                                         \
        ob -= sb[d] * y->dims[d];                                                                         \
        idx[d] = 0;                                                                                       \
      }                                                                                                   \
    }                                                                                                     \
    return LOOM_OK;                                                                                       \
  }

DEF_MATMUL(float, f32)
DEF_MATMUL(double, f64)
