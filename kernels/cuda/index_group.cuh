/* kernels/cuda/index_group.cuh - rows addressed by indices, grouped without
 * float atomics (shared by kernels/cuda/array.cu: TopK, TensorScatter*,
 * UnsortedSegment*; and optim.cu: Ref scatters, SparseApply*).
 *
 * The indices become sorted keys (index << pb | position) in device scratch
 * (bitonic sort), and the first slot of each group, one thread per column,
 * walks its group in position order. So duplicates give exactly the CPU's
 * result: scatter add/sub accumulate into the row in index order, scatter
 * update keeps the last row, segments sum from 0 in order, and the sparse
 * optimizers sum the gradient rows of a repeated index first (in position
 * order, as kernels/cpu/optim.c) and update each row once. An index out of
 * range is reported with cu_bad_index (the first bad position, as the CPU
 * names it); the in-place ops (Ref scatters, optimizers) then change
 * nothing, like the CPU, which fails before writing. */
#ifndef LOOM_CUDA_INDEX_GROUP_CUH
#define LOOM_CUDA_INDEX_GROUP_CUH
#include <math.h>
#include <string.h>
#include <type_traits>
#include "kernels/cuda/common.cuh"

namespace {

#define TILE 2048 /* elements a block sorts in shared memory (power of two) */
#define NONE (~0ull)

__device__ __forceinline__ float x_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double x_sqrt(double x) { return sqrt(x); }

/* Blocks for n independent units (one block each, grid-stride beyond). */
unsigned blocks_for(int64_t n) { return (unsigned)(n < 1 ? 1 : n > (1 << 20) ? (1 << 20) : n); }
int64_t pow2_ge(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}
int bits_for(uint64_t v) {
  int b = 0;
  for (; v; v >>= 1) b++;
  return b;
}
int log2_of(int64_t p) { return bits_for((uint64_t)p) - 1; }

/* 2-D launch: x over columns (a power of two up to 32 wide), y over rows. */
struct launch2 {
  dim3 g, b;
};
launch2 grid2(int64_t ny, int64_t nx) {
  unsigned bx = 1;
  while (bx < 32 && (int64_t)bx < nx) bx <<= 1;
  unsigned by = NT / bx;
  int64_t gx = (nx + bx - 1) / bx, gy = (ny + by - 1) / by;
  if (gx > 1024) gx = 1024;
  if (gx < 1) gx = 1;
  if (gy > 65535) gy = 65535;
  if (gy < 1) gy = 1;
  launch2 l;
  l.g = dim3((unsigned)gx, (unsigned)gy, 1);
  l.b = dim3(bx, by, 1);
  return l;
}
#define Y_LOOP(t, n) for (int64_t t = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; t < (n); t += (int64_t)gridDim.y * blockDim.y)
#define X_LOOP(j, n) for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < (n); j += (int64_t)gridDim.x * blockDim.x)

/* ======================================================== bitonic sorting */
/* Sorts segments of L (a power of two) items ascending by less(): a first
 * pass sorts TILE-sized tiles in shared memory, then each merge size runs
 * its strides >= TILE over global memory and the rest in shared memory.
 * Tiles of one segment alternate direction by their position, so the
 * result is one bitonic sort of the whole segment. */
template <typename It, typename Less>
__device__ void bitonic_tile(It *s, int T, int64_t base, int64_t size_lo, int64_t size_hi, Less less) {
  for (int64_t size = size_lo; size <= size_hi; size <<= 1) {
    int st = (int)((size >> 1) < (T >> 1) ? (size >> 1) : (T >> 1));
    for (; st > 0; st >>= 1) {
      for (int p = threadIdx.x; p < (T >> 1); p += blockDim.x) {
        int i = ((p & ~(st - 1)) << 1) | (p & (st - 1)), l = i + st;
        bool up = ((base + i) & size) == 0;
        It a = s[i], b = s[l];
        if (up ? less(b, a) : less(a, b)) {
          s[i] = b;
          s[l] = a;
        }
      }
      __syncthreads();
    }
  }
}
template <typename It, typename Less>
__global__ void k_bitonic_tile(It *a, int64_t ntiles, int T, int64_t L, int64_t size_lo, int64_t size_hi, Less less) {
  __shared__ It s[TILE];
  for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
    It *b = a + t * T;
    for (int i = threadIdx.x; i < T; i += blockDim.x) s[i] = b[i];
    __syncthreads();
    bitonic_tile(s, T, (t * T) & (L - 1), size_lo, size_hi, less);
    for (int i = threadIdx.x; i < T; i += blockDim.x) b[i] = s[i];
    __syncthreads();
  }
}
template <typename It, typename Less>
__global__ void k_bitonic_global(It *a, int64_t npairs, int lgh, int64_t size, int64_t st, Less less) {
  GRID_LOOP(q, npairs) {
    int64_t seg = q >> lgh, p = q & ((1LL << lgh) - 1);
    int64_t i = ((p & ~(st - 1)) << 1) | (p & (st - 1)), l = i + st;
    bool up = (i & size) == 0;
    It *b = a + (seg << (lgh + 1));
    It x = b[i], y = b[l];
    if (up ? less(y, x) : less(x, y)) {
      b[i] = y;
      b[l] = x;
    }
  }
}
template <typename It, typename Less> void bitonic_sort(cudaStream_t s, It *a, int64_t nseg, int64_t L, Less less) {
  if (L < 2 || nseg < 1) return;
  int T = (int)(L < TILE ? L : TILE);
  int64_t ntiles = nseg * (L / T);
  unsigned nb = T / 2 >= NT ? NT : (T / 2 < 32 ? 32 : (unsigned)(T / 2));
  LOOM_LAUNCH(blocks_for(ntiles), nb, 0, s, k_bitonic_tile<It, Less>)(a, ntiles, T, L, 2, (int64_t)T, less);
  int lgh = log2_of(L / 2);
  for (int64_t size = 2 * (int64_t)T; size <= L; size <<= 1) {
    for (int64_t st = size / 2; st >= T; st >>= 1)
      LOOM_LAUNCH(grid_for(nseg * (L / 2)), NT, 0, s, k_bitonic_global<It, Less>)(a, nseg * (L / 2), lgh, size, st, less);
    LOOM_LAUNCH(blocks_for(ntiles), nb, 0, s, k_bitonic_tile<It, Less>)(a, ntiles, T, L, size, size, less);
  }
}

struct u64_less {
  __device__ __forceinline__ bool operator()(unsigned long long a, unsigned long long b) const { return a < b; }
};

/* ====================================================== index grouping */
/* The indices sorted as keys (index << pb) | position (bad ones NONE, last);
 * a group is a run of one index, in position order. bad != NONE: the first
 * bad position (some index was out of range). */
struct grp {
  const unsigned long long *keys;
  const unsigned long long *bad;
  int64_t n;
  int pb;
  void *pieces; /* group_sort's extra scratch: per-slot piece sums (k_grp_pieces) */
};
__device__ __forceinline__ bool grp_failed(const grp &G) { return G.bad && *G.bad != NONE; }
/* Slot t starts a group: its index in *r. */
__device__ __forceinline__ bool grp_leader(const grp &G, int64_t t, int64_t *r) {
  unsigned long long k = G.keys[t];
  if (k == NONE) return false;
  int64_t rr = (int64_t)(k >> G.pb);
  if (t > 0 && (int64_t)(G.keys[t - 1] >> G.pb) == rr) return false;
  *r = rr;
  return true;
}
/* Position of slot u when it belongs to group r, else -1. */
__device__ __forceinline__ int64_t grp_pos(const grp &G, int64_t u, int64_t r) {
  if (u >= G.n) return -1;
  unsigned long long k = G.keys[u];
  if (k == NONE || (int64_t)(k >> G.pb) != r) return -1;
  return (int64_t)(k & ((1ull << G.pb) - 1));
}
/* One past the last slot of group r (binary search over the sorted keys). */
__device__ __forceinline__ int64_t grp_end(const grp &G, int64_t r) {
  unsigned long long want = (unsigned long long)(r + 1) << G.pb;
  int64_t lo = 0, hi = G.n;
  while (lo < hi) {
    int64_t mid = (lo + hi) >> 1;
    if (G.keys[mid] < want) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
/* First slot of group r, or -1 when no index is r. */
__device__ __forceinline__ int64_t grp_find(const grp &G, int64_t r) {
  unsigned long long want = (unsigned long long)r << G.pb;
  int64_t lo = 0, hi = G.n;
  while (lo < hi) {
    int64_t mid = (lo + hi) >> 1;
    if (G.keys[mid] < want) lo = mid + 1;
    else hi = mid;
  }
  return grp_pos(G, lo, r) >= 0 ? lo : -1;
}

__global__ void k_grp_keys(const void *idx, int i32, int64_t n, int64_t L, int64_t bound, int pb,
                           unsigned long long *keys, unsigned long long *bad, int skip_no_row) {
  GRID_LOOP(t, L) {
    unsigned long long key = NONE;
    if (t < n) {
      int64_t v = cu_load_index(idx, i32, t);
      if (v >= 0 && v < bound) key = ((unsigned long long)v << pb) | (unsigned long long)t;
      else if (!(skip_no_row && v == (i32 ? (int64_t)LOOM_NO_ROW_I32 : (int64_t)LOOM_NO_ROW_I64)))
        atomicMin(bad, (unsigned long long)t);
    }
    keys[t] = key;
  }
}
__global__ void k_grp_report(int64_t bound, const unsigned long long *bad, cu_errp ep) {
  if (threadIdx.x == 0 && blockIdx.x == 0 && *bad != NONE) cu_bad_index(ep, (int64_t)*bad, bound);
}
/* Groups the n >= 1 indices of I (int32/int64) by value in [0, bound).
 * skip_no_row: index LOOM_NO_ROW_I32/I64 (kernels/kernel.h) belongs to no
 * group and is no error (the sparse optimizers: it marks a pruned entry of
 * SparseEmbedding's gradient). */
loom_code group_sort(const loom_kctx *ctx, const loom_buf *I, int64_t bound, int kind, grp *G, size_t extra = 0,
                     int skip_no_row = 0) {
  int64_t n = I->numel;
  int pb = bits_for((uint64_t)(n - 1));
  if (pb < 1) pb = 1;
  int ib = bound > 0 ? bits_for((uint64_t)(bound - 1)) : 0;
  if (ib + pb > 63)
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "%lld indices into %lld rows: too many for the CUDA kernel",
                           (long long)n, (long long)bound);
  int64_t L = pow2_ge(n);
  size_t kbytes = ((size_t)(L + 1) * sizeof(unsigned long long) + 255) & ~(size_t)255;
  size_t need = kbytes + extra;
  unsigned long long *keys = (unsigned long long *)loom__cuda_scratch(CUCTX(ctx), need);
  if (!keys) return no_scratch(ctx, need);
  G->pieces = extra ? (void *)((char *)keys + kbytes) : NULL;
  unsigned long long *bad = keys + L;
  cudaStream_t s = STREAM(ctx);
  int i32 = I->dtype == LOOM_I32;
  cudaMemsetAsync(bad, 0xff, sizeof *bad, s);
  LOOM_LAUNCH(grid_for(L), NT, 0, s, k_grp_keys)(I->data, i32, n, L, bound, pb, keys, bad, skip_no_row);
  LOOM_LAUNCH(1, 32, 0, s, k_grp_report)(bound, bad, cu_watch(ctx, kind, I));
  bitonic_sort(s, keys, 1, L, u64_less());
  G->keys = keys;
  G->bad = bad;
  G->n = n;
  G->pb = pb;
  return LOOM_OK;
}
loom_code check_int_indices(const loom_kctx *ctx, const loom_buf *I, const char *what) {
  if (I->dtype == LOOM_I32 || I->dtype == LOOM_I64) return LOOM_OK;
  return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "%s must be int32 or int64, got %s", what,
                         loom_dtype_name(I->dtype));
}

/* ============================================================= scatters */
/* dst[r, j] for each group: op 0 = the last update row, 1 = += each in
 * order, 2 = -= each in order (U: the type integers wrap in). */
template <typename T, typename U> __global__ void k_scatter(T *dst, const T *upd, grp G, int64_t row, int op) {
  if (grp_failed(G)) return;
  Y_LOOP(t, G.n) {
    int64_t r;
    if (!grp_leader(G, t, &r)) continue;
    X_LOOP(j, row) {
      T *d = dst + r * row + j;
      if (op == 0) {
        int64_t last = -1;
        for (int64_t u = t, p; (p = grp_pos(G, u, r)) >= 0; u++) last = p;
        *d = upd[last * row + j];
      } else {
        T v = *d;
        for (int64_t u = t, p; (p = grp_pos(G, u, r)) >= 0; u++)
          v = op == 1 ? (T)((U)v + (U)upd[p * row + j]) : (T)((U)v - (U)upd[p * row + j]);
        *d = v;
      }
    }
  }
}
template <typename T, typename U>
loom_code scatter_rows(const loom_kctx *ctx, T *dst, const loom_buf *I, const T *upd, int64_t nrows, int64_t row,
                       int op) {
  if (I->numel == 0) return LOOM_OK;
  grp G;
  loom_code rc = group_sort(ctx, I, nrows, LOOM_CU_ERR_INDICES, &G);
  if (rc || row == 0) return rc;
  launch2 l = grid2(G.n, row);
  LOOM_LAUNCH(l.g, l.b, 0, STREAM(ctx), k_scatter<T, U>)(dst, upd, G, row, op);
  return LOOM_OK;
}

/* TensorScatterAdd / TensorScatterUpdate: out = tensor with rows replaced/added. */
/* ============================================ long groups: piece sums */
/* A group of repeated indices is summed in pieces of GRP_PIECE slots: pass 1
 * (k_grp_pieces) sums each piece in position order into the slot where it
 * starts, pass 2 (grp_sum) adds a group's pieces in order. A group no longer
 * than one piece is summed exactly as one serial walk would; a padding id
 * repeated 10k times costs a 313-step chain per column, not 10k. zero_start:
 * the sum starts from 0 (segment sums, as the CPU) instead of the first row. */
#define GRP_PIECE 32
template <typename T>
__global__ void k_grp_pieces(const T *src, T *P, grp G, int64_t inner, int zero_start) {
  if (grp_failed(G)) return;
  const unsigned long long pm = (1ull << G.pb) - 1;
  Y_LOOP(t, G.n) {
    unsigned long long k = G.keys[t];
    if (k == NONE) continue;
    int64_t r = (int64_t)(k >> G.pb), first = grp_find(G, r);
    if ((t - first) % GRP_PIECE) continue;
    int64_t e = grp_end(G, r);
    if (e > t + GRP_PIECE) e = t + GRP_PIECE;
    X_LOOP(j, inner) {
      int64_t u = t;
      T s = zero_start ? (T)0 : src[(int64_t)(G.keys[u++] & pm) * inner + j];
      for (; u < e; u++) s += src[(int64_t)(G.keys[u] & pm) * inner + j];
      P[t * inner + j] = s;
    }
  }
}
/* The sum of group r (leader slot t, end slot e), column j, from the pieces. */
template <typename T>
__device__ __forceinline__ T grp_sum(const grp &G, const T *P, int64_t t, int64_t e, int64_t inner, int64_t j) {
  T s = P[t * inner + j];
  for (int64_t u = t + GRP_PIECE; u < e; u += GRP_PIECE) s += P[u * inner + j];
  return s;
}
template <typename T> loom_code launch_pieces(const loom_kctx *ctx, const T *src, const grp &G, int64_t inner,
                                              int zero_start) {
  launch2 l = grid2(G.n, inner);
  LOOM_LAUNCH(l.g, l.b, 0, STREAM(ctx), k_grp_pieces<T>)(src, (T *)G.pieces, G, inner, zero_start);
  return LOOM_OK;
}

} // namespace

#endif
