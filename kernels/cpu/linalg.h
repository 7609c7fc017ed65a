/* CPU kernels of the reduce family's linear algebra: MatMul, BatchMatMulV2 (OpenBLAS). */
#ifndef LOOM_KERNELS_CPU_LINALG_H
#define LOOM_KERNELS_CPU_LINALG_H
#include "kernels/kernel.h"

/* C[M,N] = op(A) op(B) with op = transpose when ta/tb; A is [M,K] ([K,M] when
 * ta), B is [K,N] ([N,K] when tb), all row-major and contiguous. K == 0 gives
 * zeros; M == 1 or N == 1 uses gemv. Products large enough are cut into row
 * (or column) blocks that pool runs (serial when pool is NULL); deep products
 * with a small C are first cut along K (kernels/cpu/linalg.c), the same way
 * whatever the thread count. Dims must fit BLAS ints (checked by callers).
 * LOOM_RESOURCE_EXHAUSTED when the partial products' buffer cannot be had. */
loom_code loom__gemm_par_f32(loom_pool *pool, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                             const float *B, float *C);
loom_code loom__gemm_par_f64(loom_pool *pool, int ta, int tb, int64_t M, int64_t N, int64_t K, const double *A,
                             const double *B, double *C);

loom_code loom__k_matmul_f32(const loom_kctx *ctx);
loom_code loom__k_matmul_f64(const loom_kctx *ctx);
loom_code loom__k_batch_matmul_f32(const loom_kctx *ctx);
loom_code loom__k_batch_matmul_f64(const loom_kctx *ctx);

#endif
