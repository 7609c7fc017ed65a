/* f32 products read in place: C = A B and C = A^T B where B's rows are
 * contiguous and C is a multiple of 16 columns wide, on AVX-512 register
 * tiles, for the blocks of a dense layer's forward pass (x W: A the batch's
 * rows) and filter gradient (x^T dy) that kernels/cpu/linalg.c would
 * otherwise hand to OpenBLAS. At those shapes (a batch of 64, a few hundred
 * to a few thousand inputs, 128 units) BLAS spends a third of its time
 * packing both operands into its panel layouts and zeroing C; here B's row
 * segments are loaded as they lie (4 vectors of a strip of 64 columns; the
 * last strip 1-3 vectors) and A's values are broadcast from memory, 6 rows
 * of C times 4 vectors in 24 registers. K runs in blocks of GEMM_TILE_KB
 * (64 rows of B: 32 KB at 128 columns, kept in L1 across the row tiles),
 * each block's C values loaded and stored once per tile. Each element of C
 * adds its terms in k order: the sum does not depend on the thread count or
 * on the caller's blocks of rows or columns.
 *
 * A is read at A[r*ars + k*aks] (row r of C, step k): ars = lda, aks = 1 for
 * A B; ars = 1, aks = lda for A^T B. */
#include <stdint.h>
#include <string.h>
#include "kernels/cpu/gemm_tiles.h"
#include "kernels/cpu/isa.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TILES_X86 1
#define TILES_TARGET __attribute__((target("avx512f,avx2,fma")))
#include <immintrin.h>
#define UNROLL _Pragma("GCC unroll 8")
#else
#define TILES_X86 0
#define TILES_TARGET
#endif

enum { TILE_ROWS = 6, TILE_VECS = 4, TILE_COLS = 16 * TILE_VECS, GEMM_TILE_KB = 64 };

int loom__gemm_tiles_fit(int64_t N) {
  return TILES_X86 && loom__cpu_vec_level() >= LOOM_VEC_AVX512 && N > 0 && N % 16 == 0;
}

#if TILES_X86
/* R rows (1..TILE_ROWS) of C x NV vectors (1..TILE_VECS) of columns over k in [k0, k1): acc = C's values
 * (first: 0), then each k adds A[r][k] * B[k][columns]. */
#define DEF_TILE(R, NV)                                                                                 \
  TILES_TARGET static void tile_##R##_##NV(const float *A, int64_t ars, int64_t aks, const float *B,  \
                                           int64_t ldb, float *C, int64_t ldc, int64_t k0, int64_t k1, \
                                           int first) {                                                 \
    __m512 acc[R][NV];                                                                                  \
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int v = 0; v < NV; v++)                            \
      acc[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(C + r * ldc + v * 16);                 \
    const float *a = A + k0 * aks, *b = B + k0 * ldb;                                                   \
    for (int64_t k = k0; k < k1; k++, a += aks, b += ldb) {                                             \
      __m512 bv[NV];                                                                                    \
      UNROLL for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(b + v * 16);                          \
      UNROLL for (int r = 0; r < R; r++) {                                                              \
        const __m512 av = _mm512_set1_ps(a[r * ars]);                                                   \
        UNROLL for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);          \
      }                                                                                                 \
    }                                                                                                   \
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int v = 0; v < NV; v++)                            \
      _mm512_storeu_ps(C + r * ldc + v * 16, acc[r][v]);                                                \
  }
#define DEF_TILES(NV) DEF_TILE(1, NV) DEF_TILE(2, NV) DEF_TILE(3, NV) DEF_TILE(4, NV) DEF_TILE(5, NV) DEF_TILE(6, NV)
DEF_TILES(1)
DEF_TILES(2)
DEF_TILES(3)
DEF_TILES(4)
#undef DEF_TILES
#undef DEF_TILE

typedef void (*tile_fn)(const float *, int64_t, int64_t, const float *, int64_t, float *, int64_t, int64_t, int64_t,
                        int);
#define TILE_ROW(NV) {NULL, tile_1_##NV, tile_2_##NV, tile_3_##NV, tile_4_##NV, tile_5_##NV, tile_6_##NV}
static const tile_fn tile_tab[TILE_VECS + 1][TILE_ROWS + 1] = {{NULL}, TILE_ROW(1), TILE_ROW(2), TILE_ROW(3),
                                                                TILE_ROW(4)};
#undef TILE_ROW

/* K in blocks, rows in tiles, strips of 64 columns (the last 16, 32 or 48 wide): a block's rows of B
 * stay in cache across the row tiles, a tile's values of A across the strips. */
TILES_TARGET static void tiles(int64_t M, int64_t N, int64_t K, const float *A, int64_t ars, int64_t aks,
                               const float *B, int64_t ldb, float *C, int64_t ldc) {
  for (int64_t k0 = 0; k0 < K; k0 += GEMM_TILE_KB) {
    int64_t k1 = K - k0 < GEMM_TILE_KB ? K : k0 + GEMM_TILE_KB;
    for (int64_t i = 0; i < M; i += TILE_ROWS) {
      int64_t R = M - i < TILE_ROWS ? M - i : TILE_ROWS;
      for (int64_t j = 0; j < N; j += TILE_COLS) {
        const int64_t nv = N - j < TILE_COLS ? (N - j) / 16 : TILE_VECS;
        tile_tab[nv][R](A + i * ars, ars, aks, B + j, ldb, C + i * ldc + j, ldc, k0, k1, k0 == 0);
      }
    }
  }
}
#endif

void loom__gemm_tiles_f32(int ta, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                          int64_t ldb, float *C, int64_t ldc) {
#if TILES_X86
  if (K == 0) {
    for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, (size_t)N * sizeof(float));
    return;
  }
  if (ta) tiles(M, N, K, A, 1, lda, B, ldb, C, ldc);
  else tiles(M, N, K, A, lda, 1, B, ldb, C, ldc);
#else
  (void)ta, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)C, (void)ldc;
#endif
}
