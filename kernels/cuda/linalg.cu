/* kernels/cuda/linalg.cu - CUDA kernels of the linalg family (kernels/cpu/linalg.c):
 * MatMul, BatchMatMul (cuBLAS). */
#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/linalg.h"
#include "kernels/geometry.h"

static cublasStatus_t gemm_strided(cublasHandle_t h, int ta, int tb, int M, int N, int K, const float *A, long long sA,
                                   const float *B, long long sB, float *C, long long sC, int batches) {
  const float one = 1.0f, zero = 0.0f;
  return cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one,
                                   B, tb ? K : N, sB, A, ta ? M : K, sA, &zero, C, N, sC, batches);
}
static cublasStatus_t gemm_strided(cublasHandle_t h, int ta, int tb, int M, int N, int K, const double *A,
                                   long long sA, const double *B, long long sB, double *C, long long sC, int batches) {
  const double one = 1.0, zero = 0.0;
  return cublasDgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one,
                                   B, tb ? K : N, sB, A, ta ? M : K, sA, &zero, C, N, sC, batches);
}


static loom_code mm_dims(const loom_kctx *ctx, int64_t *M, int64_t *N, int64_t *K) {
  loom_code rc = loom__matmul_dims(ctx, M, N, K);
  if (rc) return rc;
  if (*M > INT32_MAX || *N > INT32_MAX || *K > INT32_MAX)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "matrix dimensions exceed the cuBLAS integer range");
  return LOOM_OK;
}

template <typename T> static loom_code run_matmul(const loom_kctx *ctx) {
  int64_t M, N, K;
  loom_code rc = mm_dims(ctx, &M, &N, &K);
  if (rc) return rc;
  loom_buf *y = ctx->out[0];
  if (y->numel == 0) return LOOM_OK;
  if (K == 0) {
    cudaMemsetAsync(y->data, 0, (size_t)y->numel * sizeof(T), STREAM(ctx));
    return LOOM_OK;
  }
  cublasStatus_t s = gemm_rm(CUCTX(ctx)->blas, ctx->attrs->transpose_a, ctx->attrs->transpose_b, (int)M, (int)N,
                             (int)K, (const T *)ctx->in[0]->data, (const T *)ctx->in[1]->data, (T *)y->data, (T)0);
  return s == CUBLAS_STATUS_SUCCESS ? LOOM_OK : blas_fail(ctx, s);
}

template <typename T> static loom_code run_batch_matmul(const loom_kctx *ctx) {
  const loom_buf *a = ctx->in[0], *b = ctx->in[1];
  loom_buf *y = ctx->out[0];
  int ta = ctx->attrs->transpose_a, tb = ctx->attrs->transpose_b;
  int64_t M, N, K;
  loom_code rc = mm_dims(ctx, &M, &N, &K);
  if (rc) return rc;
  if (y->numel == 0) return LOOM_OK;
  if (K == 0) {
    cudaMemsetAsync(y->data, 0, (size_t)y->numel * sizeof(T), STREAM(ctx));
    return LOOM_OK;
  }
  int nbo = y->ndim - 2, nba = a->ndim - 2, nbb = b->ndim - 2;
  int64_t sa[LOOM_MAX_DIMS], sb[LOOM_MAX_DIMS], idx[LOOM_MAX_DIMS];
  int64_t batches = 1, ba = 1, bb = 1;
  for (int i = nbo - 1; i >= 0; i--) {
    int ia = i - (nbo - nba), ib = i - (nbo - nbb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    sa[i] = da == 1 ? 0 : ba;
    sb[i] = db == 1 ? 0 : bb;
    ba *= da;
    bb *= db;
    batches *= y->dims[i];
    idx[i] = 0;
  }
  const T *A = (const T *)a->data, *B = (const T *)b->data;
  T *C = (T *)y->data;
  cublasHandle_t h = CUCTX(ctx)->blas;
  cublasStatus_t s;
  if ((ba == batches || ba == 1) && (bb == batches || bb == 1) && batches <= INT32_MAX) {
    s = gemm_strided(h, ta, tb, (int)M, (int)N, (int)K, A, ba == 1 ? 0 : M * K, B, bb == 1 ? 0 : K * N, C, M * N,
                     (int)batches);
    return s == CUBLAS_STATUS_SUCCESS ? LOOM_OK : blas_fail(ctx, s);
  }
  /* partial broadcasting: one strided-batched call per index of the outer
   * batch dims, over the innermost batch dim (its stride 0 when broadcast) */
  int last = nbo - 1;
  int64_t inner = y->dims[last], outer = batches / inner, oa = 0, ob = 0;
  if (inner > INT32_MAX) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "batch dimension exceeds the cuBLAS range");
  for (int64_t t = 0; t < outer; t++) {
    s = gemm_strided(h, ta, tb, (int)M, (int)N, (int)K, A + oa * M * K, sa[last] * M * K, B + ob * K * N,
                     sb[last] * K * N, C + t * inner * M * N, M * N, (int)inner);
    if (s != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, s);
    for (int d = last - 1; d >= 0; d--) {
      idx[d]++;
      oa += sa[d];
      ob += sb[d];
      if (idx[d] < y->dims[d]) break;
      oa -= sa[d] * y->dims[d];
      ob -= sb[d] * y->dims[d];
      idx[d] = 0;
    }
  }
  return LOOM_OK;
}
extern "C" loom_code loom__cu_matmul_f32(const loom_kctx *ctx) { return run_matmul<float>(ctx); }
extern "C" loom_code loom__cu_matmul_f64(const loom_kctx *ctx) { return run_matmul<double>(ctx); }
extern "C" loom_code loom__cu_batch_matmul_f32(const loom_kctx *ctx) { return run_batch_matmul<float>(ctx); }
extern "C" loom_code loom__cu_batch_matmul_f64(const loom_kctx *ctx) { return run_batch_matmul<double>(ctx); }
