/* CPU kernels of the reduce family's linear algebra: MatMul, BatchMatMulV2 (OpenBLAS). */
#ifndef LOOM_KERNELS_CPU_LINALG_H
#define LOOM_KERNELS_CPU_LINALG_H
#include "kernels/kernel.h"

/* C[M,N] = op(A) op(B) with op = transpose when ta/tb; A is [M,K] ([K,M] when
 * ta), B is [K,N] ([N,K] when tb), all row-major and contiguous. K == 0 gives
 * zeros; M == 1 or N == 1 uses gemv. Products large enough are cut into row
 * (or column) blocks that pool runs (serial when pool is NULL); deep products
 * with a small C are first cut along K (kernels/cpu/linalg.c), the same way
 * whatever the thread count, their partial products in ws, which holds
 * loom__gemm_ws_bytes bytes (NULL: allocated and freed by the call). Dims must
 * fit BLAS ints (checked by callers). LOOM_RESOURCE_EXHAUSTED when ws is NULL
 * and the partials cannot be allocated. */
loom_code loom__gemm_par_f32(loom_pool *pool, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                             const float *B, float *C, void *ws);
loom_code loom__gemm_par_f64(loom_pool *pool, int ta, int tb, int64_t M, int64_t N, int64_t K, const double *A,
                             const double *B, double *C, void *ws);
/* Workspace bytes of loom__gemm_par for an M x N x K product of elem-byte values (0 when it is not cut along K). */
size_t loom__gemm_ws_bytes(int64_t M, int64_t N, int64_t K, size_t elem);
/* The MatMul and BatchMatMulV2 ops' workspace (the largest product their kernels make). */
size_t loom__ws_matmul(const loom_attrs *a, int nin, const loom_buf *const *in, int nout, const loom_buf *const *out);

loom_code loom__k_matmul_f32(const loom_kctx *ctx);
loom_code loom__k_matmul_f64(const loom_kctx *ctx);
loom_code loom__k_batch_matmul_f32(const loom_kctx *ctx);
loom_code loom__k_batch_matmul_f64(const loom_kctx *ctx);

#endif
