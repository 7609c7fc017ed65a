/* kernels/cuda/blas.cuh - row-major GEMM over cuBLAS and its error status,
 * shared by kernels/cuda/linalg.cu and conv.cu. */
#ifndef LOOM_CUDA_BLAS_CUH
#define LOOM_CUDA_BLAS_CUH
#include "kernels/cuda/common.cuh"

static inline cublasStatus_t gemm_rm(cublasHandle_t h, int ta, int tb, int M, int N, int K, const float *A, const float *B,
                              float *C, float beta) {
  const float one = 1.0f;
  return cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B, tb ? K : N,
                     A, ta ? M : K, &beta, C, N);
}
static inline cublasStatus_t gemm_rm(cublasHandle_t h, int ta, int tb, int M, int N, int K, const double *A,
                              const double *B, double *C, double beta) {
  const double one = 1.0;
  return cublasDgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B, tb ? K : N,
                     A, ta ? M : K, &beta, C, N);
}

static inline loom_code blas_fail(const loom_kctx *ctx, cublasStatus_t s) {
  return loom_status_set(ctx->st, s == CUBLAS_STATUS_ALLOC_FAILED ? LOOM_RESOURCE_EXHAUSTED : LOOM_INTERNAL,
                         "cuBLAS error %d", (int)s);
}
#endif
