/* f32 products on AVX-512 register tiles with the operands read in place
 * (kernels/cpu/gemm_tiles.c): the blocks of a dense layer's forward pass and
 * filter gradient that kernels/cpu/linalg.c gives them. */
#ifndef LOOM_KERNELS_CPU_GEMM_TILES_H
#define LOOM_KERNELS_CPU_GEMM_TILES_H
#include <stdint.h>

/* Whether loom__gemm_tiles_f32 runs on this CPU (kernels/cpu/isa.h: loom__cpu_vec_level at AVX-512) for
 * products N columns wide (a multiple of 16). */
int loom__gemm_tiles_fit(int64_t N);

/* C[M,N] (row stride ldc) = A B (ta = 0: A is [M,K], row stride lda) or A^T B (ta = 1: A is [K,M]); B is
 * [K,N], row stride ldb. Only where loom__gemm_tiles_fit(N). */
void loom__gemm_tiles_f32(int ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                          int64_t ldb, float *C, int64_t ldc);

#endif
