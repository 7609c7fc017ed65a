/* CPU kernels: MatMul and BatchMatMulV2 on OpenBLAS. Single-row or
 * single-column products go to gemv (gemm's packing is wasted on them).
 * An f32 MatMul whose left operand is mostly zeros (a wide & deep model's
 * first layer: one-hot indicator columns concatenated with a few numbers,
 * 8% nonzero on diamonds) skips the zeros (sparse_lhs_gemm below). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include "base/base.h"
#include "kernels/cpu/gemm_tiles.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/linalg.h"
#include "kernels/geometry.h"

/* Products of at least GEMM_PAR_FLOPS are cut into blocks that the
 * session's pool runs, about GEMM_CHUNKS_PER_THREAD per thread and each of at
 * least GEMM_CHUNK_FLOPS, so a thread that is descheduled holds up at most one
 * block (one per thread on the register tiles below, whose blocks then read
 * whole rows of B); BLAS itself runs one thread (loom__cpu_set_blas_threads). A block is
 *  - whole rows of C, or whole columns, whichever dimension is larger (the
 *    other operand is packed again by each block);
 *  - in a deep product (K at least GEMM_K_DEPTH times the larger side of C,
 *    and C at most GEMM_K_MAX_C elements: a dense layer's forward at a small
 *    batch, where each row or column block would pack all of a large A or B
 *    again), rows or columns of one of GEMM_K_PIECES pieces of K (multiples of
 *    GEMM_UNIT), so each operand is packed about once: piece 0 writes C, the
 *    others their partial products, added to C in piece order afterwards. The
 *    pieces depend on the shape alone (one thread computes them too), so the
 *    sum does not depend on the thread count. */
enum { GEMM_UNIT = 16, GEMM_CHUNKS_PER_THREAD = 2, GEMM_K_PIECES = 2, GEMM_K_DEPTH = 4 };
#define GEMM_PAR_FLOPS 1e6
#define GEMM_CHUNK_FLOPS 5e5
#define GEMM_K_MAX_C 65536
#define GEMM_SUM_GRAIN 16384 /* elements of C per chunk of the partials' sum */
/* f32 blocks of x W and x^T dy with at most this many rows of x (a batch) and C a multiple of 16
 * columns wide run on kernels/cpu/gemm_tiles.c's register tiles, which read the operands in place
 * (OpenBLAS packs both and zeroes C first: a third of its time at a dense layer's shapes). */
#define GEMM_TILES_MAX_BATCH 256

/* The length of a piece of K (a multiple of GEMM_UNIT; K itself when the
 * product is not cut along K). */
static int64_t gemm_kpiece(int64_t M, int64_t N, int64_t K) {
  int64_t D = N >= M ? N : M;
  if (M < 2 || N < 2 || 2.0 * (double)M * (double)N * (double)K < GEMM_PAR_FLOPS || K < GEMM_K_DEPTH * D ||
      M * N > GEMM_K_MAX_C)
    return K;
  int64_t kp = (K + GEMM_K_PIECES - 1) / GEMM_K_PIECES;
  return (kp + GEMM_UNIT - 1) / GEMM_UNIT * GEMM_UNIT;
}

size_t loom__gemm_ws_bytes(int64_t M, int64_t N, int64_t K, size_t elem) {
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  int64_t kp = gemm_kpiece(M, N, K), pieces = (K + kp - 1) / kp;
  return (size_t)((pieces - 1) * M * N) * elem;
}

/* Whether an M x N x K product (or a block of one) runs on the register tiles (GEMM_TILES_MAX_BATCH). */
static int gemm_tiles_job(size_t elem, int ta, int tb, int64_t M, int64_t N, int64_t K) {
  return elem == 4 && !tb && (ta ? K : M) <= GEMM_TILES_MAX_BATCH && loom__gemm_tiles_fit(N);
}

#define DEF_GEMM(T, S, GEMM, GEMV)                                                                        \
  static void gemm_ld_##S(int ta, int tb, int64_t M, int64_t N, int64_t K, const T *A, int64_t lda,      \
                          const T *B, int64_t ldb, T *C, int64_t ldc) {                                   \
    if (M == 1) { /* C[n] = sum_k a[k] op(B)[k,n] */                                                      \
      if (tb)                                                                                             \
        GEMV(CblasRowMajor, CblasNoTrans, (blasint)N, (blasint)K, 1, B, (blasint)ldb, A,                  \
             (blasint)(ta ? lda : 1), 0, C, 1);                                                           \
      else                                                                                                \
        GEMV(CblasRowMajor, CblasTrans, (blasint)K, (blasint)N, 1, B, (blasint)ldb, A,                    \
             (blasint)(ta ? lda : 1), 0, C, 1);                                                           \
    } else if (N == 1) { /* C[m] = sum_k op(A)[m,k] b[k] */                                               \
      if (ta)                                                                                             \
        GEMV(CblasRowMajor, CblasTrans, (blasint)K, (blasint)M, 1, A, (blasint)lda, B,                    \
             (blasint)(tb ? 1 : ldb), 0, C, (blasint)ldc);                                                \
      else                                                                                                \
        GEMV(CblasRowMajor, CblasNoTrans, (blasint)M, (blasint)K, 1, A, (blasint)lda, B,                  \
             (blasint)(tb ? 1 : ldb), 0, C, (blasint)ldc);                                                \
    } else if (gemm_tiles_job(sizeof(T), ta, tb, M, N, K)) {                                              \
      loom__gemm_tiles_f32(ta, M, N, K, (const float *)A, lda, (const float *)B, ldb, (float *)C, ldc);   \
    } else {                                                                                              \
      GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)M,     \
           (blasint)N, (blasint)K, 1, A, (blasint)lda, B, (blasint)ldb, 0, C, (blasint)ldc);              \
    }                                                                                                     \
  }                                                                                                       \
  typedef struct {                                                                                        \
    int ta, tb, split_n;                                                                                  \
    int64_t M, N, K;                                                                                      \
    const T *A, *B;                                                                                       \
    T *C;                                                                                                 \
    int64_t kpiece, subs, sub_units; /* K per piece; blocks per piece, GEMM_UNITs per block */            \
    T *part;                         /* pieces 1.. write [M,N] each here */                               \
  } gemm_job_##S;                                                                                         \
  /* block q: piece q / subs (its K range), rows or columns [lo,hi) of C */                               \
  static void gemm_block_##S(const gemm_job_##S *j, int64_t q) {                                          \
    int64_t lda = j->ta ? j->M : j->K, ldb = j->tb ? j->K : j->N;                                         \
    int64_t piece = q / j->subs, k0 = piece * j->kpiece;                                                  \
    int64_t kn = j->K - k0 < j->kpiece ? j->K - k0 : j->kpiece;                                           \
    int64_t D = j->split_n ? j->N : j->M, lo = (q % j->subs) * j->sub_units * GEMM_UNIT;                  \
    int64_t hi = lo + j->sub_units * GEMM_UNIT > D ? D : lo + j->sub_units * GEMM_UNIT;                   \
    if (lo >= hi) return;                                                                                 \
    const T *A = j->A + (j->ta ? k0 * j->M : k0), *B = j->B + (j->tb ? k0 : k0 * j->N);                   \
    T *C = piece ? j->part + (piece - 1) * j->M * j->N : j->C;                                            \
    if (j->split_n)                                                                                       \
      gemm_ld_##S(j->ta, j->tb, j->M, hi - lo, kn, A, lda, j->tb ? B + lo * j->K : B + lo, ldb, C + lo,   \
                  j->N);                                                                                  \
    else                                                                                                  \
      gemm_ld_##S(j->ta, j->tb, hi - lo, j->N, kn, j->ta ? A + lo : A + lo * j->K, lda, B, ldb,           \
                  C + lo * j->N, j->N);                                                                   \
  }                                                                                                       \
  static void gemm_range_##S(void *arg, int64_t b, int64_t e) {                                           \
    for (int64_t q = b; q < e; q++) gemm_block_##S(arg, q);                                               \
  }                                                                                                       \
  /* C += the partial products, in piece order */                                                         \
  static void gemm_sum_##S(void *arg, int64_t b, int64_t e) {                                             \
    const gemm_job_##S *j = arg;                                                                          \
    int64_t np = (j->K + j->kpiece - 1) / j->kpiece, mn = j->M * j->N;                                    \
    for (int64_t p = 1; p < np; p++) {                                                                    \
      const T *P = j->part + (p - 1) * mn;                                                                \
      for (int64_t i = b; i < e; i++) j->C[i] += P[i];                                                    \
    }                                                                                                     \
  }                                                                                                       \
  loom_code loom__gemm_par_##S(loom_pool *pool, int ta, int tb, int64_t M, int64_t N, int64_t K,          \
                               const T *A, const T *B, T *C, void *ws) {                                  \
    if (M == 0 || N == 0) return LOOM_OK;                                                                 \
    if (K == 0) {                                                                                         \
      memset(C, 0, (size_t)(M * N) * sizeof(T));                                                          \
      return LOOM_OK;                                                                                     \
    }                                                                                                     \
    int threads = loom__pool_threads(pool);                                                               \
    double flops = 2.0 * (double)M * (double)N * (double)K;                                               \
    gemm_job_##S j = {ta, tb, N >= M, M, N, K, A, B, C, K, 1, 0, NULL};                                   \
    int64_t D = j.split_n ? N : M, units = (D + GEMM_UNIT - 1) / GEMM_UNIT;                               \
    T *own = NULL; /* the partials when the caller gave no workspace */                                   \
    j.kpiece = gemm_kpiece(M, N, K);                                                                      \
    int64_t pieces = (K + j.kpiece - 1) / j.kpiece;                                                       \
    if (pieces > 1 && !(j.part = ws) &&                                                                   \
        !(j.part = own = loom__aligned_alloc((size_t)((pieces - 1) * M * N) * sizeof(T))))                \
      return LOOM_RESOURCE_EXHAUSTED;                                                                     \
    /* register tiles (no packing to repeat) take one block per thread: whole rows of B for each */      \
    int64_t per = gemm_tiles_job(sizeof(T), ta, tb, M, N, K) ? 1 : GEMM_CHUNKS_PER_THREAD;                 \
    int64_t want = threads < 2 || flops < GEMM_PAR_FLOPS ? 1 : (int64_t)threads * per;                    \
    int64_t subs = (want + pieces - 1) / pieces, by_flops = (int64_t)(flops / pieces / GEMM_CHUNK_FLOPS); \
    if (subs > by_flops) subs = by_flops;                                                                 \
    if (subs > units) subs = units;                                                                       \
    if (subs < 1) subs = 1;                                                                               \
    j.sub_units = (units + subs - 1) / subs;                                                              \
    j.subs = (units + j.sub_units - 1) / j.sub_units;                                                     \
    if (pieces * j.subs < 2)                                                                              \
      gemm_ld_##S(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, C, N);                                   \
    else                                                                                                  \
      loom__parallel_blocks(pool, pieces * j.subs, 1, gemm_range_##S, &j);                                \
    if (pieces > 1) loom__parallel_for(pool, M * N, GEMM_SUM_GRAIN, gemm_sum_##S, &j);                    \
    loom__aligned_free(own);                                                                              \
    return LOOM_OK;                                                                                       \
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

/* ---- f32 MatMul with a mostly-zero left operand (not transposed b) ----
 * C = op(A) B as C[m,:] = sum over k ascending of op(A)[m,k] * B[k,:],
 * skipping op(A)[m,k] == 0, one fused multiply-add per term (the
 * accumulation order of OpenBLAS's FMA kernels for these sizes; they differ
 * from it only in rounding where a BLAS kernel splits or reorders the sum:
 * bitwise equal to OpenBLAS 0.3.21's SKYLAKEX kernels on the wide & deep
 * shapes, e.g. 128x126 @ 126x64 both ways). Taken when at most 1/8 of A is
 * nonzero, b holds only finite values (0 * inf would be NaN in the dense
 * product: then the dense path runs) and the CPU has FMA. */
enum { SPARSE_LHS_MIN = 2048, SPARSE_STACK = 2048 };

#if defined(__x86_64__) && defined(__GNUC__)
#define SPARSE_LHS 1
#include <immintrin.h>
#define SPARSE_TARGET __attribute__((target("avx2,fma")))
SPARSE_TARGET static int all_finite(const float *x, int64_t n) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) bad |= !(fabsf(x[i]) <= 3.40282347e38f);
  return !bad;
}
/* 1 when more than a quarter of a's first 2048 values are nonzero: a dense operand, refused before
 * the heap buffers of a large one are allocated (every large MLP/CNN MatMul comes here first). */
SPARSE_TARGET static int dense_prefix(const float *a, int64_t n) {
  const int64_t len = n < 2048 ? n : 2048;
  int64_t nz = 0;
  for (int64_t i = 0; i < len; i++) nz += a[i] != 0.0f;
  return nz * 4 > len;
}
/* lane indices of the set bits of each 8-bit mask, packed low (for the
 * branch-free compaction below) */
static uint8_t g_lanes[256][8];
static pthread_once_t g_lanes_once = PTHREAD_ONCE_INIT;
static void lanes_init(void) {
  for (int m = 0; m < 256; m++)
    for (int b = 0, o = 0; b < 8; b++)
      if (m >> b & 1) g_lanes[m][o++] = (uint8_t)b;
}
/* Appends the nonzeros of a[0, n) (NaN counts as one) as (position, value)
 * to pos/val from *c on, 8 at a time: compare, movemask, and a permute that
 * packs the nonzero lanes (stores of 8 lanes, so pos/val need 8 entries of
 * slack past cap); 0 once more than cap in all. */
SPARSE_TARGET static int nonzeros(const float *a, int64_t n, int32_t *pos, float *val, int64_t *c, int64_t cap) {
  int64_t k = 0, o = *c;
  const __m256 zero = _mm256_setzero_ps();
  for (; k + 8 <= n; k += 8) {
    const __m256 x = _mm256_loadu_ps(a + k);
    const unsigned m = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(x, zero, _CMP_NEQ_UQ));
    const __m256i li = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)g_lanes[m]));
    _mm256_storeu_ps(val + o, _mm256_permutevar8x32_ps(x, li));
    _mm256_storeu_si256((__m256i *)(pos + o), _mm256_add_epi32(li, _mm256_set1_epi32((int)k)));
    o += __builtin_popcount(m);
    if (o > cap) return 0;
  }
  for (; k < n; k++)
    if (a[k] != 0.0f) {
      if (o + 1 > cap) return 0;
      pos[o] = (int32_t)k;
      val[o++] = a[k];
    }
  *c = o;
  return 1;
}
/* C[m, :] = sum over t in [ptr[m], ptr[m+1]) of val[t] * B[pos[t], :], t
 * ascending, one FMA per term; 32 columns of C in 4 registers at a time. */
SPARSE_TARGET static void csr_gemm(int64_t M, int64_t N, const int32_t *ptr, const int32_t *pos, const float *val,
                                   const float *restrict B, float *restrict C) {
  for (int64_t m = 0; m < M; m++) {
    const int32_t t0 = ptr[m], t1 = ptr[m + 1];
    float *c = C + m * N;
    int64_t j = 0;
    for (; j + 64 <= N; j += 64) { /* 8 independent accumulators: two FMAs a cycle */
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
      for (int32_t t = t0; t < t1; t++) {
        const __m256 v = _mm256_set1_ps(val[t]);
        const float *b = B + (int64_t)pos[t] * N + j;
        a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b), a0);
        a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 8), a1);
        a2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 16), a2);
        a3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 24), a3);
        a4 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 32), a4);
        a5 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 40), a5);
        a6 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 48), a6);
        a7 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 56), a7);
      }
      _mm256_storeu_ps(c + j, a0);
      _mm256_storeu_ps(c + j + 8, a1);
      _mm256_storeu_ps(c + j + 16, a2);
      _mm256_storeu_ps(c + j + 24, a3);
      _mm256_storeu_ps(c + j + 32, a4);
      _mm256_storeu_ps(c + j + 40, a5);
      _mm256_storeu_ps(c + j + 48, a6);
      _mm256_storeu_ps(c + j + 56, a7);
    }
    for (; j + 32 <= N; j += 32) {
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int32_t t = t0; t < t1; t++) {
        const __m256 v = _mm256_set1_ps(val[t]);
        const float *b = B + (int64_t)pos[t] * N + j;
        a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b), a0);
        a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 8), a1);
        a2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 16), a2);
        a3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 24), a3);
      }
      _mm256_storeu_ps(c + j, a0);
      _mm256_storeu_ps(c + j + 8, a1);
      _mm256_storeu_ps(c + j + 16, a2);
      _mm256_storeu_ps(c + j + 24, a3);
    }
    for (; j + 8 <= N; j += 8) {
      __m256 a0 = _mm256_setzero_ps();
      for (int32_t t = t0; t < t1; t++)
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(val[t]), _mm256_loadu_ps(B + (int64_t)pos[t] * N + j), a0);
      _mm256_storeu_ps(c + j, a0);
    }
    for (; j < N; j++) {
      float s = 0.0f;
      for (int32_t t = t0; t < t1; t++) s = fmaf(val[t], B[(int64_t)pos[t] * N + j], s);
      c[j] = s;
    }
  }
}
#else
#define SPARSE_LHS 0
#endif

/* 1 when the product was computed here: f32, b not transposed, op(A) at
 * most 1/8 nonzero, B finite, an AVX2 + FMA CPU. op(A) is gathered as rows
 * of (k, value), k ascending (for a transposed A by a counting pass over its
 * storage rows), then csr_gemm. */
static int sparse_lhs_run(const loom_kctx *ctx, int64_t M, int64_t N, int64_t K) {
#if SPARSE_LHS
  const int ta = ctx->attrs->transpose_a;
  const float *A = ctx->in[0]->data, *B = ctx->in[1]->data;
  if (ctx->attrs->transpose_b || M < 2 || N < 8 || M * K < SPARSE_LHS_MIN || M * K > INT32_MAX) return 0;
  static int cpu_ok = -1; /* benign race: every thread computes the same value */
  if (cpu_ok < 0) cpu_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
  if (!cpu_ok) return 0;
  const int64_t n = M * K, cap = n / 8;
  pthread_once(&g_lanes_once, lanes_init);
  int32_t spos[SPARSE_STACK + 8], sptr[SPARSE_STACK / 2], stmp[SPARSE_STACK / 2];
  float sval[SPARSE_STACK + 8];
  int heap = cap > SPARSE_STACK || M + 1 > SPARSE_STACK / 2 || K + 1 > SPARSE_STACK / 2;
  int32_t *pos = spos, *ptr = sptr, *tmp = stmp;
  float *val = sval;
  if (heap) {
    if (dense_prefix(A, n)) return 0; /* no allocation for an operand that is plainly dense */
    pos = malloc((size_t)(2 * (cap + 8) + 2 * (M + 1) + K + 2) * sizeof(int32_t));
    if (!pos) return 0;
    val = (float *)(pos + cap + 8);
    ptr = pos + 2 * (cap + 8);
    tmp = ptr + M + 1;
  }
  int done = 0;
  int64_t c = 0;
  if (!ta) { /* A [M, K]: row m's nonzeros in k order */
    int ok = 1;
    for (int64_t m = 0; m < M && ok; m++) {
      ptr[m] = (int32_t)c;
      ok = nonzeros(A + m * K, K, pos, val, &c, cap);
    }
    ptr[M] = (int32_t)c;
    if (ok && all_finite(B, K * N)) {
      csr_gemm(M, N, ptr, pos, val, B, ctx->out[0]->data);
      done = 1;
    }
  } else { /* A [K, M]: storage row k holds op(A)[:, k]; regroup by m keeping k ascending */
    int32_t *kp = tmp; /* K + 1 row starts of the storage rows */
    int ok = 1;
    for (int64_t k = 0; k < K && ok; k++) {
      kp[k] = (int32_t)c;
      ok = nonzeros(A + k * M, M, pos, val, &c, cap);
    }
    kp[K] = (int32_t)c;
    if (ok && all_finite(B, K * N)) {
      int32_t scpos[SPARSE_STACK];
      float scval[SPARSE_STACK];
      int32_t *cpos = c <= SPARSE_STACK ? scpos : malloc((size_t)c * (sizeof(int32_t) + sizeof(float)));
      if (cpos) {
        float *cval = c <= SPARSE_STACK ? scval : (float *)(cpos + c);
        for (int64_t m = 0; m <= M; m++) ptr[m] = 0;
        for (int64_t t = 0; t < c; t++) ptr[pos[t] + 1]++;
        for (int64_t m = 0; m < M; m++) ptr[m + 1] += ptr[m];
        for (int64_t k = 0; k < K; k++)
          for (int32_t t = kp[k]; t < kp[k + 1]; t++) {
            int32_t m = pos[t], d = ptr[m]++;
            cpos[d] = (int32_t)k;
            cval[d] = val[t];
          }
        for (int64_t m = M; m > 0; m--) ptr[m] = ptr[m - 1]; /* the cursors ended at the next row's start */
        ptr[0] = 0;
        csr_gemm(M, N, ptr, cpos, cval, B, ctx->out[0]->data);
        if (cpos != scpos) free(cpos);
        done = 1;
      }
    }
  }
  if (heap) free(pos);
  return done;
#else
  (void)ctx, (void)M, (void)N, (void)K;
  return 0;
#endif
}

static loom_code gemm_oom(const loom_kctx *ctx, int64_t M, int64_t N, int64_t K) {
  return loom_status_set(ctx->st, LOOM_RESOURCE_EXHAUSTED,
                         "out of memory for the partial products of a matrix product M=%lld N=%lld K=%lld",
                         (long long)M, (long long)N, (long long)K);
}

size_t loom__ws_matmul(const loom_attrs *a, int nin, const loom_buf *const *in, int nout, const loom_buf *const *out) {
  (void)nin, (void)nout;
  const loom_buf *y = out[0];
  if (y->ndim < 2) return 0;
  int64_t M = y->dims[y->ndim - 2], N = y->dims[y->ndim - 1], rows = 1;
  int64_t K = in[0]->dims[in[0]->ndim - (a->transpose_a ? 2 : 1)];
  for (int i = 0; i < y->ndim - 2; i++) rows *= y->dims[i];
  size_t elem = loom_dtype_size(y->dtype), one = loom__gemm_ws_bytes(M, N, K, elem);
  size_t folded = rows > 1 ? loom__gemm_ws_bytes(rows * M, N, K, elem) : 0; /* BatchMatMul's shared-b product */
  return one > folded ? one : folded;
}

/* The kernel's workspace when it holds the product's partials (it does
 * when the op's workspace came from loom__gemm_ws_bytes), else NULL. */
static void *mm_ws(const loom_kctx *ctx, int64_t M, int64_t N, int64_t K, size_t elem) {
  return ctx->ws && ctx->ws_size >= loom__gemm_ws_bytes(M, N, K, elem) ? ctx->ws : NULL;
}

#define DEF_MATMUL(T, S)                                                                                  \
  loom_code loom__k_matmul_##S(const loom_kctx *ctx) {                                                    \
    int64_t M, N, K;                                                                                      \
    loom_code rc = mm_dims(ctx, &M, &N, &K);                                                              \
    if (rc) return rc;                                                                                    \
    if (sizeof(T) == 4 && sparse_lhs_run(ctx, M, N, K)) return LOOM_OK;                                   \
    if (loom__gemm_par_##S(ctx->pool, ctx->attrs->transpose_a, ctx->attrs->transpose_b, M, N, K,          \
                           ctx->in[0]->data, ctx->in[1]->data, ctx->out[0]->data,                         \
                           mm_ws(ctx, M, N, K, sizeof(T))))                                               \
      return gemm_oom(ctx, M, N, K);                                                                      \
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
      if (loom__gemm_par_##S(ctx->pool, 0, tb, batches * M, N, K, A, B, C,                                \
                             mm_ws(ctx, batches * M, N, K, sizeof(T))))                                   \
        return gemm_oom(ctx, batches * M, N, K);                                                          \
      return LOOM_OK;                                                                                     \
    }                                                                                                     \
    int64_t oa = 0, ob = 0, szA = M * K, szB = K * N, szC = M * N;                                        \
    for (int64_t t = 0; t < batches; t++) {                                                               \
      if (loom__gemm_par_##S(ctx->pool, ta, tb, M, N, K, A + oa * szA, B + ob * szB, C + t * szC,         \
                             mm_ws(ctx, M, N, K, sizeof(T))))                                             \
        return gemm_oom(ctx, M, N, K);                                                                    \
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
