/* kernels/cuda/extra.cu - CUDA kernels of selection, clipping, L2
 * normalization, top-k, the scatter and segment-mean ops, the sparse
 * optimizers and LearningRateSchedule. Each follows its CPU kernel
 * (kernels/cpu/math.c, nn.c, array.c, optim.c) expression by expression.
 *
 * Rows addressed by indices (TensorScatter*, Ref scatters, UnsortedSegment
 * Mean/SqrtN, SparseApply*) are grouped without float atomics: the indices
 * become sorted keys (index << pb | position) in device scratch (bitonic
 * sort), and the first slot of each group, one thread per column, walks its
 * group in position order. So duplicates give exactly the CPU's result:
 * scatter add/sub accumulate into the row in index order, scatter update
 * keeps the last row, segments sum from 0 in order, and the sparse
 * optimizers sum the gradient rows of a repeated index first (in position
 * order, as kernels/cpu/optim.c) and update each row once. An index out of
 * range is reported with cu_bad_index (the first bad position, as the CPU
 * names it); the in-place ops (Ref scatters, optimizers) then change
 * nothing, like the CPU, which fails before writing.
 *
 * TopK orders by value descending with NaN above everything and ties (and
 * -0 == +0) by lower index, the CPU's total order: rows up to 64 by rank
 * counting, up to 2048 by a bitonic sort in shared memory, longer rows by
 * a radix select of the k-th key, then a sort of the k winners.
 *
 * Arithmetic differs from the CPU only where nvcc contracts a * b + c into
 * an FMA (the CPU build does not), and in L2Normalize's reduction order for
 * reductions done by a warp or block (last bits). */
#include <math.h>
#include <string.h>
#include <type_traits>
#include "kernels/cuda/common.cuh"
#include "kernels/cpu/optim.h"

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
loom_code no_scratch(const loom_kctx *ctx, size_t n) {
  return loom_status_set(ctx->st, LOOM_RESOURCE_EXHAUSTED, "cannot allocate %zu bytes of device scratch", n);
}

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

/* ================================================= Select, ClipByValue */
/* Ternary elementwise ops with NumPy broadcasting: o[i] = F::f(a, b, c).
 * Operands the size of the output or scalars index flat; anything else
 * goes through the merged broadcast geometry. */
template <class F, class A, class B, class C, class O>
__global__ void k_tern_flat(const A *a, const B *b, const C *c, O *o, int64_t n, int sa, int sb, int sc) {
  GRID_LOOP(i, n) o[i] = F::f(a[sa ? i : 0], b[sb ? i : 0], c[sc ? i : 0]);
}
template <class F, class A, class B, class C, class O>
__global__ void k_tern_bcast(const A *a, const B *b, const C *c, O *o, int64_t n, bcast_geom g) {
  GRID_LOOP(i, n) {
    int64_t off[3];
    bcast_off_t<int64_t>(g, i, 3, off);
    o[i] = F::f(a[off[0]], b[off[1]], c[off[2]]);
  }
}
template <class F, class A, class B, class C, class O> loom_code run_ternary(const loom_kctx *ctx) {
  const loom_buf *in[3] = {ctx->in[0], ctx->in[1], ctx->in[2]};
  loom_buf *Ob = ctx->out[0];
  int64_t n = Ob->numel;
  if (n == 0) return LOOM_OK;
  cudaStream_t s = STREAM(ctx);
  const A *a = (const A *)in[0]->data;
  const B *b = (const B *)in[1]->data;
  const C *c = (const C *)in[2]->data;
  O *o = (O *)Ob->data;
  int flat = 1;
  for (int k = 0; k < 3; k++) flat &= in[k]->numel == n || in[k]->numel == 1;
  if (flat) {
    LOOM_LAUNCH(grid_for(n), NT, 0, s, k_tern_flat<F, A, B, C, O>)(a, b, c, o, n, in[0]->numel == n && n != 1,
                                                                    in[1]->numel == n && n != 1,
                                                                    in[2]->numel == n && n != 1);
    return LOOM_OK;
  }
  bcast_geom g;
  bcast_init(&g, Ob);
  for (int k = 0; k < 3; k++) bcast_strides(&g, k, in[k]);
  bcast_merge(&g, 3);
  LOOM_LAUNCH(grid_for(n), NT, 0, s, k_tern_bcast<F, A, B, C, O>)(a, b, c, o, n, g);
  return LOOM_OK;
}

/* Select(mask, x, y): both branches are read, as on the CPU. */
struct select_f {
  template <class W> __device__ __forceinline__ static W f(uint8_t m, W x, W y) { return m ? x : y; }
};
/* ClipByValue: min(max(t, lo), hi) as the CPU writes it: NaN in t stays NaN. */
struct clip_f {
  template <class T> __device__ __forceinline__ static T f(T v, T l, T h) {
    v = v < l ? l : v;
    return v > h ? h : v;
  }
};
template <typename W> loom_code run_select(const loom_kctx *ctx) { return run_ternary<select_f, uint8_t, W, W, W>(ctx); }
template <typename T> loom_code run_clip(const loom_kctx *ctx) { return run_ternary<clip_f, T, T, T, T>(ctx); }

/* ============================================================ L2Normalize */
/* Line l of [outer, len, inner] starts at (l / inner) * len * inner + l % inner,
 * stride inner. y = x / sqrt(max(sum x^2, eps)); y may be x (INPLACE_OK):
 * every line is read whole before it is written. */
template <typename T>
__global__ void k_l2_cols(const T *x, T *y, int64_t lines, int64_t len, int64_t inner, T eps) {
  GRID_LOOP(l, lines) {
    int64_t o = l / inner, i = l - o * inner, base = o * len * inner + i;
    T s = 0;
    for (int64_t k = 0; k < len; k++) {
      T v = x[base + k * inner];
      s += v * v;
    }
    s = (T)1 / x_sqrt(s > eps ? s : eps);
    for (int64_t k = 0; k < len; k++) y[base + k * inner] = x[base + k * inner] * s;
  }
}
template <typename T> __device__ __forceinline__ T warp_sum(T v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
template <typename T>
__global__ void k_l2_warp(const T *x, T *y, int64_t lines, int64_t len, int64_t inner, T eps) {
  int lane = threadIdx.x & 31;
  int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t l = w; l < lines; l += nw) {
    int64_t o = l / inner, i = l - o * inner, base = o * len * inner + i;
    T s = 0;
    for (int64_t k = lane; k < len; k += 32) {
      T v = x[base + k * inner];
      s += v * v;
    }
    s = warp_sum(s);
    s = (T)1 / x_sqrt(s > eps ? s : eps);
    for (int64_t k = lane; k < len; k += 32) y[base + k * inner] = x[base + k * inner] * s;
  }
}
template <typename T>
__global__ void k_l2_block(const T *x, T *y, int64_t lines, int64_t len, int64_t inner, T eps) {
  __shared__ T red[NT / 32];
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
  for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    int64_t o = l / inner, i = l - o * inner, base = o * len * inner + i;
    T s = 0;
    for (int64_t k = threadIdx.x; k < len; k += blockDim.x) {
      T v = x[base + k * inner];
      s += v * v;
    }
    s = warp_sum(s);
    if (lane == 0) red[wid] = s;
    __syncthreads();
    if (wid == 0) {
      T v = lane < nwarp ? red[lane] : (T)0;
      v = warp_sum(v);
      if (lane == 0) red[0] = v;
    }
    __syncthreads();
    s = red[0];
    __syncthreads(); /* red is rewritten by the next line */
    s = (T)1 / x_sqrt(s > eps ? s : eps);
    for (int64_t k = threadIdx.x; k < len; k += blockDim.x) y[base + k * inner] = x[base + k * inner] * s;
  }
}
template <typename T> loom_code run_l2(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  if (X->numel == 0) return LOOM_OK;
  int64_t outer = 1, len = 1, inner = 1, axis = ctx->attrs->axis;
  if (X->ndim > 0) {
    if (axis < 0) axis += X->ndim;
    for (int i = 0; i < X->ndim; i++) {
      if (i < axis) outer *= X->dims[i];
      else if (i == axis) len = X->dims[i];
      else inner *= X->dims[i];
    }
  }
  T eps = (T)(ctx->attrs->epsilon > 0 ? ctx->attrs->epsilon : 1e-12);
  int64_t lines = outer * inner;
  const T *x = (const T *)X->data;
  T *y = (T *)ctx->out[0]->data;
  cudaStream_t s = STREAM(ctx);
  if (inner > 1 && lines >= 2048) /* one thread per line: coalesced over inner */
    LOOM_LAUNCH(grid_for(lines), NT, 0, s, k_l2_cols<T>)(x, y, lines, len, inner, eps);
  else if (len > 2048) /* few long lines: a block each */
    LOOM_LAUNCH(blocks_for(lines), NT, 0, s, k_l2_block<T>)(x, y, lines, len, inner, eps);
  else
    LOOM_LAUNCH(grid_for(lines * 32), NT, 0, s, k_l2_warp<T>)(x, y, lines, len, inner, eps);
  return LOOM_OK;
}

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

/* ================================================================== TopK */
/* Order keys: larger = ranks higher. NaN above +inf, -0 == +0. */
__device__ __forceinline__ unsigned long long okey(float v) {
  unsigned int u;
  memcpy(&u, &v, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffull; /* NaN */
  if ((u & 0x7fffffffu) == 0) u = 0;
  return (u & 0x80000000u) ? (unsigned long long)(~u) : (unsigned long long)(u | 0x80000000u);
}
__device__ __forceinline__ unsigned long long okey(double v) {
  unsigned long long u;
  memcpy(&u, &v, sizeof u);
  const unsigned long long sign = 1ull << 63, abs = u & ~sign;
  if (abs > 0x7ff0000000000000ull) return NONE; /* NaN */
  if (abs == 0) u = 0;
  return (u & sign) ? ~u : (u | sign);
}
__device__ __forceinline__ unsigned long long okey(int32_t v) { return (unsigned long long)((uint32_t)v ^ 0x80000000u); }
__device__ __forceinline__ unsigned long long okey(int64_t v) { return (unsigned long long)v ^ (1ull << 63); }
__device__ __forceinline__ unsigned long long okey(uint8_t v) { return v; }
template <typename T> struct key_bits { static const int n = 8 * (int)sizeof(T); };

struct kv {
  unsigned long long key;
  unsigned int idx;
};
struct kv_better { /* "less" of a best-first sort; padding (key 0, idx ~0) ranks last */
  __device__ __forceinline__ bool operator()(const kv &a, const kv &b) const {
    return a.key > b.key || (a.key == b.key && a.idx < b.idx);
  }
};
struct u64_less {
  __device__ __forceinline__ bool operator()(unsigned long long a, unsigned long long b) const { return a < b; }
};

/* n <= 64: the rank of each element is the number ranking above it. */
template <typename T> __global__ void k_topk_rank(const T *x, T *v, int32_t *ix, int64_t rows, int64_t n, int64_t k) {
  GRID_LOOP(e, rows * n) {
    int64_t r = e / n, j = e - r * n;
    const T *xr = x + r * n;
    unsigned long long kj = okey(xr[j]);
    int64_t rank = 0;
    for (int64_t i = 0; i < n; i++) {
      unsigned long long ki = okey(xr[i]);
      rank += ki > kj || (ki == kj && i < j);
    }
    if (rank < k) {
      v[r * k + rank] = xr[j];
      ix[r * k + rank] = (int32_t)j;
    }
  }
}
/* n <= TILE: a block sorts a row in shared memory. */
template <typename T>
__global__ void k_topk_sort(const T *x, T *v, int32_t *ix, int64_t rows, int64_t n, int64_t k, int L) {
  __shared__ kv s[TILE];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    for (int i = threadIdx.x; i < L; i += blockDim.x) {
      kv e;
      e.key = i < n ? okey(xr[i]) : 0;
      e.idx = i < n ? (unsigned)i : 0xffffffffu;
      s[i] = e;
    }
    __syncthreads();
    bitonic_tile(s, L, 0, 2, L, kv_better());
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      unsigned id = s[j].idx;
      v[r * k + j] = xr[id];
      ix[r * k + j] = (int32_t)id;
    }
    __syncthreads();
  }
}
/* n > TILE: a block per row finds the k-th largest key (radix select, 8
 * bits a pass), then writes the k winners (every key above it, and the
 * lowest-index ties) to w[row * Lk ...], padding to Lk. NT threads. */
template <typename T>
__global__ void k_topk_select(const T *x, kv *W, int64_t rows, int64_t n, int64_t k, int64_t Lk) {
  __shared__ unsigned int hist[256];
  __shared__ unsigned long long sh_prefix, sh_mask;
  __shared__ long long sh_kk;
  __shared__ long long cg[NT], ce[NT];
  const int tid = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    kv *w = W + r * Lk;
    if (tid == 0) {
      sh_prefix = 0;
      sh_mask = 0;
      sh_kk = k;
    }
    for (int shift = key_bits<T>::n - 8; shift >= 0; shift -= 8) {
      for (int d = tid; d < 256; d += blockDim.x) hist[d] = 0;
      __syncthreads();
      unsigned long long prefix = sh_prefix, mask = sh_mask;
      for (int64_t i = tid; i < n; i += blockDim.x) {
        unsigned long long key = okey(xr[i]);
        if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255], 1u);
      }
      __syncthreads();
      if (tid == 0) {
        long long kk = sh_kk, cum = 0;
        int d = 255;
        for (; d > 0; d--) {
          if (cum + (long long)hist[d] >= kk) break;
          cum += hist[d];
        }
        sh_kk = kk - cum;
        sh_prefix = prefix | ((unsigned long long)d << shift);
        sh_mask = mask | (255ull << shift);
      }
      __syncthreads();
    }
    const unsigned long long thr = sh_prefix;
    const long long kk = sh_kk, ngt = k - kk;
    int64_t chunk = (n + blockDim.x - 1) / blockDim.x, b0 = tid * chunk, b1 = b0 + chunk;
    if (b1 > n) b1 = n;
    long long g = 0, e = 0;
    for (int64_t i = b0; i < b1; i++) {
      unsigned long long key = okey(xr[i]);
      g += key > thr;
      e += key == thr;
    }
    cg[tid] = g;
    ce[tid] = e;
    __syncthreads();
    if (tid == 0) {
      long long a = 0, b = 0;
      for (unsigned t = 0; t < blockDim.x; t++) {
        long long x1 = cg[t], x2 = ce[t];
        cg[t] = a;
        ce[t] = b;
        a += x1;
        b += x2;
      }
    }
    __syncthreads();
    long long pg = cg[tid], pe = ce[tid];
    for (int64_t i = b0; i < b1; i++) {
      unsigned long long key = okey(xr[i]);
      kv it;
      it.key = key;
      it.idx = (unsigned)i;
      if (key > thr) w[pg++] = it;
      else if (key == thr) {
        if (pe < kk) w[ngt + pe] = it;
        pe++;
      }
    }
    for (int64_t j = k + tid; j < Lk; j += blockDim.x) {
      kv it;
      it.key = 0;
      it.idx = 0xffffffffu;
      w[j] = it;
    }
    __syncthreads();
  }
}
template <typename T>
__global__ void k_topk_write(const T *x, const kv *W, T *v, int32_t *ix, int64_t rows, int64_t n, int64_t k, int64_t Lk) {
  GRID_LOOP(e, rows * k) {
    int64_t r = e / k, j = e - r * k;
    unsigned id = W[r * Lk + j].idx;
    v[e] = x[r * n + id];
    ix[e] = (int32_t)id;
  }
}
template <typename T> loom_code run_topk(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *V = ctx->out[0], *I = ctx->out[1];
  if (X->ndim < 1) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "input must have rank >= 1, got a scalar");
  int64_t n = X->dims[X->ndim - 1], k = V->dims[V->ndim - 1];
  if (k == 0 || V->numel == 0) return LOOM_OK;
  int64_t rows = V->numel / k;
  const T *x = (const T *)X->data;
  T *v = (T *)V->data;
  int32_t *ix = (int32_t *)I->data;
  cudaStream_t s = STREAM(ctx);
  if (n <= 64) {
    LOOM_LAUNCH(grid_for(rows * n), NT, 0, s, k_topk_rank<T>)(x, v, ix, rows, n, k);
  } else if (n <= TILE) {
    int L = (int)pow2_ge(n);
    unsigned nb = L / 2 >= NT ? NT : (unsigned)(L / 2);
    LOOM_LAUNCH(blocks_for(rows), nb, 0, s, k_topk_sort<T>)(x, v, ix, rows, n, k, L);
  } else {
    int64_t Lk = pow2_ge(k);
    size_t need = (size_t)rows * (size_t)Lk * sizeof(kv);
    kv *W = (kv *)loom__cuda_scratch(CUCTX(ctx), need);
    if (!W) return no_scratch(ctx, need);
    LOOM_LAUNCH(blocks_for(rows), NT, 0, s, k_topk_select<T>)(x, W, rows, n, k, Lk);
    bitonic_sort(s, W, rows, Lk, kv_better());
    LOOM_LAUNCH(grid_for(rows * k), NT, 0, s, k_topk_write<T>)(x, W, v, ix, rows, n, k, Lk);
  }
  return LOOM_OK;
}

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
                           unsigned long long *keys, unsigned long long *bad) {
  GRID_LOOP(t, L) {
    unsigned long long key = NONE;
    if (t < n) {
      int64_t v = cu_load_index(idx, i32, t);
      if (v >= 0 && v < bound) key = ((unsigned long long)v << pb) | (unsigned long long)t;
      else atomicMin(bad, (unsigned long long)t);
    }
    keys[t] = key;
  }
}
__global__ void k_grp_report(int64_t bound, const unsigned long long *bad, cu_errp ep) {
  if (threadIdx.x == 0 && blockIdx.x == 0 && *bad != NONE) cu_bad_index(ep, (int64_t)*bad, bound);
}
/* Groups the n >= 1 indices of I (int32/int64) by value in [0, bound). */
loom_code group_sort(const loom_kctx *ctx, const loom_buf *I, int64_t bound, int kind, grp *G, size_t extra = 0) {
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
  LOOM_LAUNCH(grid_for(L), NT, 0, s, k_grp_keys)(I->data, i32, n, L, bound, pb, keys, bad);
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
template <typename T, typename U> loom_code run_tensor_scatter(const loom_kctx *ctx, int op) {
  const loom_buf *Tn = ctx->in[0], *I = ctx->in[1], *Up = ctx->in[2];
  loom_buf *O = ctx->out[0];
  loom_code rc = check_int_indices(ctx, I, "indices");
  if (rc) return rc;
  if (Tn->ndim < 1) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "tensor must have rank >= 1, got a scalar");
  if (O->numel && O->data != Tn->data)
    cudaMemcpyAsync(O->data, Tn->data, (size_t)O->numel * sizeof(T), cudaMemcpyDeviceToDevice, STREAM(ctx));
  int64_t row = 1;
  for (int i = 1; i < Tn->ndim; i++) row *= Tn->dims[i];
  return scatter_rows<T, U>(ctx, (T *)O->data, I, (const T *)Up->data, Tn->dims[0], row, op);
}

/* Ref scatters: the variable (input 0) in place; f32, f64, i32, i64. */
loom_code run_ref_scatter(const loom_kctx *ctx, int op) {
  const loom_buf *R = ctx->in[0], *I = ctx->in[1], *Up = ctx->in[2];
  loom_code rc = check_int_indices(ctx, I, "indices");
  if (rc) return rc;
  int64_t nrows = R->ndim ? R->dims[0] : 0, row = nrows > 0 ? R->numel / nrows : 0, n = I->numel;
  if (Up->numel != n * row)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "updates have %lld elements, expected %lld rows of %lld",
                           (long long)Up->numel, (long long)n, (long long)row);
  switch (R->dtype) {
  case LOOM_F32: return scatter_rows<float, float>(ctx, (float *)R->data, I, (const float *)Up->data, nrows, row, op);
  case LOOM_F64: return scatter_rows<double, double>(ctx, (double *)R->data, I, (const double *)Up->data, nrows, row, op);
  case LOOM_I32:
    return scatter_rows<int32_t, uint32_t>(ctx, (int32_t *)R->data, I, (const int32_t *)Up->data, nrows, row, op);
  case LOOM_I64:
    return scatter_rows<int64_t, uint64_t>(ctx, (int64_t *)R->data, I, (const int64_t *)Up->data, nrows, row, op);
  default: return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no kernel for %s", loom_dtype_name(R->dtype));
  }
}

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

/* ================================================ segment sum/mean/sqrtN */
/* sqrtn: 0 mean, 1 sqrt(n), 2 plain sum. One thread per (segment, column)
 * adds the segment's rows in position order: deterministic, no atomics. */
template <typename T> __global__ void k_segment(const T *P, T *o, grp G, int64_t inner, int sqrtn) {
  if (grp_failed(G)) return;
  Y_LOOP(t, G.n) {
    int64_t r;
    if (!grp_leader(G, t, &r)) continue;
    int64_t e = grp_end(G, r), c = e - t;
    X_LOOP(j, inner) {
      T s = grp_sum<T>(G, P, t, e, inner, j);
      if constexpr (std::is_floating_point<T>::value) {
        if (c > 1 && sqrtn < 2) s /= sqrtn ? x_sqrt((T)c) : (T)c;
      }
      o[r * inner + j] = s;
    }
  }
}
template <typename T> loom_code run_segment(const loom_kctx *ctx, int sqrtn) {
  const loom_buf *D = ctx->in[0], *I = ctx->in[1];
  loom_buf *O = ctx->out[0];
  loom_code rc = check_int_indices(ctx, I, "segment_ids");
  if (rc) return rc;
  cudaStream_t s = STREAM(ctx);
  if (O->numel) cudaMemsetAsync(O->data, 0, (size_t)O->numel * sizeof(T), s);
  if (I->numel == 0) return LOOM_OK;
  int64_t inner = 1;
  for (int i = 1; i < D->ndim; i++) inner *= D->dims[i];
  grp G;
  rc = group_sort(ctx, I, O->dims[0], LOOM_CU_ERR_SEGMENT_IDS, &G, (size_t)(I->numel * inner) * sizeof(T));
  if (rc || inner == 0) return rc;
  launch_pieces<T>(ctx, (const T *)D->data, G, inner, 1);
  launch2 l = grid2(G.n, inner);
  LOOM_LAUNCH(l.g, l.b, 0, s, k_segment<T>)((const T *)G.pieces, (T *)O->data, G, inner, sqrtn);
  return LOOM_OK;
}

/* ===================================================== sparse optimizers */
enum { SP_MOMENTUM, SP_ADAGRAD, SP_ADAM, SP_FTRL, SP_RMSPROP, SP_CRMSPROP, SP_ADADELTA, SP_GD };
struct sopt {
  float *var, *s0, *s1, *s2;
  const float *g;
  const float *hp[7]; /* lr, a, b, c, d (meaning per kind, as kernels/cpu/optim.c's hyper), beta1_power, beta2_power */
  int kind, flag;
  int64_t row, nrows;
};
struct hyp {
  float lr, a, b, c, d;
};
__device__ __forceinline__ hyp load_hyp(const sopt &A) {
  float v[7];
  for (int i = 0; i < 7; i++) v[i] = A.hp[i] ? *A.hp[i] : 0.0f;
  hyp h;
  h.lr = A.kind == SP_ADAM ? v[0] * sqrtf(1.0f - v[6]) / (1.0f - v[5]) : v[0];
  h.a = v[1];
  h.b = v[2];
  h.c = v[3];
  h.d = v[4];
  return h;
}
/* One element e of the variable with (summed) gradient g: the CPU spans. */
__device__ __forceinline__ void sopt_apply(const sopt &A, const hyp &h, int64_t e, float g) {
  float *var = A.var + e;
  switch (A.kind) {
  case SP_MOMENTUM: { /* a = momentum */
    float acc = A.s0[e] * h.a + g;
    A.s0[e] = acc;
    if (A.flag) *var -= g * h.lr + acc * h.a * h.lr;
    else *var -= h.lr * acc;
    break;
  }
  case SP_ADAGRAD: {
    float acc = A.s0[e] + g * g;
    A.s0[e] = acc;
    *var -= h.lr * g / sqrtf(acc);
    break;
  }
  case SP_ADAM: { /* lr = alpha, a = beta1, b = beta2, c = epsilon */
    float ob1 = 1.0f - h.a, ob2 = 1.0f - h.b, m = A.s0[e], v = A.s1[e];
    float mi = m + (g - m) * ob1;
    float vi = v + (g * g - v) * ob2;
    A.s0[e] = mi;
    A.s1[e] = vi;
    *var -= (mi * h.lr) / (sqrtf(vi) + h.c);
    break;
  }
  case SP_FTRL: { /* a = l1, b = l2, c = l2_shrinkage, d = lr_power */
    float l1 = h.a, l2x2 = 2.0f * h.b, shr2 = 2.0f * h.c, p = h.d, lr = h.lr;
    float vi = *var, ai = A.s0[e];
    float gs = g + shr2 * vi;
    float na = ai + g * g;
    float li, y;
    if (p == -0.5f) {
      float sna = sqrtf(na);
      li = A.s1[e] + gs - (sna - sqrtf(ai)) / lr * vi;
      y = sna / lr + l2x2;
    } else {
      float pna = powf(na, -p);
      li = A.s1[e] + gs - (pna - powf(ai, -p)) / lr * vi;
      y = pna / lr + l2x2;
    }
    A.s1[e] = li;
    float x = (li > 0.0f ? l1 : (li < 0.0f ? -l1 : 0.0f)) - li;
    *var = fabsf(li) > l1 ? x / y : 0.0f;
    A.s0[e] = na;
    break;
  }
  case SP_RMSPROP: { /* a = rho, b = momentum, c = epsilon */
    float ms = A.s0[e];
    float s = ms + (g * g - ms) * (1.0f - h.a);
    A.s0[e] = s;
    float mo = A.s1[e] * h.b + (g * h.lr) / sqrtf(s + h.c);
    A.s1[e] = mo;
    *var -= mo;
    break;
  }
  case SP_CRMSPROP: {
    float orho = 1.0f - h.a, mg = A.s0[e], ms = A.s1[e];
    float mgi = mg + (g - mg) * orho;
    float s = ms + (g * g - ms) * orho;
    A.s0[e] = mgi;
    A.s1[e] = s;
    float denom = (s - mgi * mgi) + h.c;
    float mo = A.s2[e] * h.b + (g * h.lr) / sqrtf(denom);
    A.s2[e] = mo;
    *var -= mo;
    break;
  }
  case SP_ADADELTA: { /* a = rho, b = epsilon */
    float rho = h.a, orho = 1.0f - h.a, eps = h.b;
    float acc = A.s0[e] * rho + g * g * orho;
    A.s0[e] = acc;
    float upd = sqrtf(A.s1[e] + eps) / sqrtf(acc + eps) * g;
    *var -= upd * h.lr;
    A.s1[e] = A.s1[e] * rho + upd * upd * orho;
    break;
  }
  case SP_GD: *var -= h.lr * g; break;
  default: break;
  }
}
/* Gradient of group r (starting at slot t), column j: rows summed in position order (in pieces). */
__device__ __forceinline__ float group_grad(const sopt &A, const grp &G, int64_t t, int64_t r, int64_t j) {
  return grp_sum<float>(G, (const float *)G.pieces, t, grp_end(G, r), A.row, j);
}
/* The given rows only (every optimizer but non-lazy Adam). */
__global__ void k_sopt_rows(sopt A, grp G) {
  if (grp_failed(G)) return;
  hyp h = load_hyp(A);
  Y_LOOP(t, G.n) {
    int64_t r;
    if (!grp_leader(G, t, &r)) continue;
    X_LOOP(j, A.row) sopt_apply(A, h, r * A.row + j, group_grad(A, G, t, r, j));
  }
}
/* Non-lazy Adam: every row; rows without an index decay with a zero gradient. */
__global__ void k_sopt_adam_all(sopt A, grp G) {
  if (grp_failed(G)) return;
  hyp h = load_hyp(A);
  const float ob1 = 1.0f - h.a, ob2 = 1.0f - h.b;
  Y_LOOP(r, A.nrows) {
    int64_t t = G.n > 0 ? grp_find(G, r) : -1;
    X_LOOP(j, A.row) {
      int64_t e = r * A.row + j;
      if (t >= 0) {
        sopt_apply(A, h, e, group_grad(A, G, t, r, j));
      } else {
        float mi = A.s0[e] - A.s0[e] * ob1;
        float vi = A.s1[e] - A.s1[e] * ob2;
        A.s0[e] = mi;
        A.s1[e] = vi;
        A.var[e] -= (mi * h.lr) / (sqrtf(vi) + h.c);
      }
    }
  }
}
/* gi, ii: gradient and indices inputs; st: slot inputs count; h: scalar inputs (lr, a, b, c, d, b1p, b2p; -1 none). */
loom_code run_sparse_opt(const loom_kctx *ctx, int kind, int gi, int ii, int nstate, const int h[7], int all_rows) {
  const loom_buf *V = ctx->in[0], *G = ctx->in[gi], *I = ctx->in[ii];
  loom_code rc = check_int_indices(ctx, I, "indices");
  if (rc) return rc;
  int64_t nrows = V->ndim ? V->dims[0] : 0, row = nrows > 0 ? V->numel / nrows : 0, n = I->numel;
  if (G->numel != n * row)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "gradient has %lld elements, expected %lld rows of %lld",
                           (long long)G->numel, (long long)n, (long long)row);
  sopt A;
  memset(&A, 0, sizeof A);
  A.var = (float *)V->data;
  A.s0 = nstate > 0 ? (float *)ctx->in[1]->data : NULL;
  A.s1 = nstate > 1 ? (float *)ctx->in[2]->data : NULL;
  A.s2 = nstate > 2 ? (float *)ctx->in[3]->data : NULL;
  A.g = (const float *)G->data;
  for (int k = 0; k < 7; k++) A.hp[k] = h[k] >= 0 ? (const float *)ctx->in[h[k]]->data : NULL;
  A.kind = kind;
  A.flag = (int)(ctx->attrs->num & 1);
  A.row = row;
  A.nrows = nrows;
  grp Gr;
  memset(&Gr, 0, sizeof Gr);
  if (n > 0) {
    rc = group_sort(ctx, I, nrows, LOOM_CU_ERR_INDICES, &Gr, (size_t)(n * row) * sizeof(float));
    if (rc) return rc;
    if (row > 0) launch_pieces<float>(ctx, A.g, Gr, row, 0);
  }
  if (row == 0) return LOOM_OK;
  cudaStream_t s = STREAM(ctx);
  if (all_rows) {
    if (nrows == 0) return LOOM_OK;
    launch2 l = grid2(nrows, row);
    LOOM_LAUNCH(l.g, l.b, 0, s, k_sopt_adam_all)(A, Gr);
  } else if (n > 0) {
    launch2 l = grid2(n, row);
    LOOM_LAUNCH(l.g, l.b, 0, s, k_sopt_rows)(A, Gr);
  }
  return LOOM_OK;
}

/* ================================================== LearningRateSchedule */
struct lrs {
  int kind, flag; /* flag: staircase / cycle */
  double lr, ds, beta, power;
};
__device__ __forceinline__ double rd_scalar(const void *p, int dt) {
  switch (dt) {
  case LOOM_I32: return (double)*(const int32_t *)p;
  case LOOM_I64: return (double)*(const int64_t *)p;
  case LOOM_F32: return (double)*(const float *)p;
  case LOOM_F64: return *(const double *)p;
  default: return 0.0;
  }
}
__global__ void k_lr_schedule(const void *step_p, int sdt, const double *bnd, const float *vals, int64_t nb, lrs a,
                              float *out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double step = rd_scalar(step_p, sdt), lr = a.lr, ds = a.ds, r = 0.0;
  switch (a.kind) {
  case LOOM_LRS_EXPONENTIAL: {
    double p = step / ds;
    if (a.flag) p = floor(p);
    r = lr * pow(a.beta, p);
    break;
  }
  case LOOM_LRS_PIECEWISE: {
    int64_t i = 0;
    while (i < nb && !(step <= bnd[i])) i++;
    r = vals[i];
    break;
  }
  case LOOM_LRS_POLYNOMIAL: {
    double s = step;
    if (a.flag) {
      double mult = s == 0.0 ? 1.0 : ceil(s / ds);
      ds *= mult;
    } else if (s > ds) {
      s = ds;
    }
    double p = s / ds;
    r = (lr - a.beta) * pow(1.0 - p, a.power) + a.beta;
    break;
  }
  case LOOM_LRS_COSINE: {
    double s = step < ds ? step : ds;
    double c = 0.5 * (1.0 + cos(3.14159265358979323846 * s / ds));
    r = lr * ((1.0 - a.beta) * c + a.beta);
    break;
  }
  default: break;
  }
  *out = (float)r;
}

} // namespace

/* ============================================================ entry points */
#define SELECT_K(dt, W) \
  extern "C" loom_code loom__cu_select_##dt(const loom_kctx *ctx) { return run_select<W>(ctx); }
SELECT_K(f32, uint32_t)
SELECT_K(f64, uint64_t)
SELECT_K(i32, uint32_t)
SELECT_K(i64, uint64_t)
SELECT_K(u8, uint8_t)
SELECT_K(bool, uint8_t)

#define NUM_K(dt, T, U)                                                                                               \
  extern "C" loom_code loom__cu_clip_by_value_##dt(const loom_kctx *ctx) { return run_clip<T>(ctx); }                \
  extern "C" loom_code loom__cu_top_k_##dt(const loom_kctx *ctx) { return run_topk<T>(ctx); }                        \
  extern "C" loom_code loom__cu_scatter_add_##dt(const loom_kctx *ctx) { return run_tensor_scatter<T, U>(ctx, 1); } \
  extern "C" loom_code loom__cu_segment_sum_##dt(const loom_kctx *ctx) { return run_segment<T>(ctx, 2); }
NUM_K(f32, float, float)
NUM_K(f64, double, double)
NUM_K(i32, int32_t, uint32_t)
NUM_K(i64, int64_t, uint64_t)
extern "C" loom_code loom__cu_top_k_u8(const loom_kctx *ctx) { return run_topk<uint8_t>(ctx); }

#define FLT_K(dt, T)                                                                                               \
  extern "C" loom_code loom__cu_l2_normalize_##dt(const loom_kctx *ctx) { return run_l2<T>(ctx); }                \
  extern "C" loom_code loom__cu_segment_mean_##dt(const loom_kctx *ctx) { return run_segment<T>(ctx, 0); }        \
  extern "C" loom_code loom__cu_segment_sqrtn_##dt(const loom_kctx *ctx) { return run_segment<T>(ctx, 1); }
FLT_K(f32, float)
FLT_K(f64, double)

extern "C" loom_code loom__cu_scatter_update_any(const loom_kctx *ctx) {
  switch (loom_dtype_size(ctx->in[0]->dtype)) {
  case 1: return run_tensor_scatter<uint8_t, uint8_t>(ctx, 0);
  case 4: return run_tensor_scatter<uint32_t, uint32_t>(ctx, 0);
  case 8: return run_tensor_scatter<uint64_t, uint64_t>(ctx, 0);
  default:
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA scatter for %s", loom_dtype_name(ctx->in[0]->dtype));
  }
}
extern "C" loom_code loom__cu_ref_scatter_update_any(const loom_kctx *ctx) { return run_ref_scatter(ctx, 0); }
extern "C" loom_code loom__cu_ref_scatter_add_any(const loom_kctx *ctx) { return run_ref_scatter(ctx, 1); }
extern "C" loom_code loom__cu_ref_scatter_sub_any(const loom_kctx *ctx) { return run_ref_scatter(ctx, 2); }

/* Sparse optimizers: input orders as TF's (see kernels/cpu/optim.c). */
extern "C" loom_code loom__cu_sparse_apply_gradient_descent_f32(const loom_kctx *ctx) {
  static const int h[7] = {1, -1, -1, -1, -1, -1, -1}; /* var, alpha, grad, indices */
  return run_sparse_opt(ctx, SP_GD, 2, 3, 0, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_momentum_f32(const loom_kctx *ctx) {
  static const int h[7] = {2, 5, -1, -1, -1, -1, -1}; /* var, accum, lr, grad, indices, momentum */
  return run_sparse_opt(ctx, SP_MOMENTUM, 3, 4, 1, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_adagrad_f32(const loom_kctx *ctx) {
  static const int h[7] = {2, -1, -1, -1, -1, -1, -1}; /* var, accum, lr, grad, indices */
  return run_sparse_opt(ctx, SP_ADAGRAD, 3, 4, 1, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_adam_f32(const loom_kctx *ctx) {
  /* var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices; num bit 1 = lazy */
  static const int h[7] = {5, 6, 7, 8, -1, 3, 4};
  int lazy = (int)((ctx->attrs->num >> 1) & 1);
  return run_sparse_opt(ctx, SP_ADAM, 9, 10, 2, h, !lazy);
}
extern "C" loom_code loom__cu_sparse_apply_ftrl_f32(const loom_kctx *ctx) {
  static const int h[7] = {5, 6, 7, 8, 9, -1, -1}; /* var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power */
  return run_sparse_opt(ctx, SP_FTRL, 3, 4, 2, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_rmsprop_f32(const loom_kctx *ctx) {
  static const int h[7] = {3, 4, 5, 6, -1, -1, -1}; /* var, ms, mom, lr, rho, momentum, epsilon, grad, indices */
  return run_sparse_opt(ctx, SP_RMSPROP, 7, 8, 2, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_centered_rmsprop_f32(const loom_kctx *ctx) {
  static const int h[7] = {4, 5, 6, 7, -1, -1, -1}; /* var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices */
  return run_sparse_opt(ctx, SP_CRMSPROP, 8, 9, 3, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_adadelta_f32(const loom_kctx *ctx) {
  static const int h[7] = {3, 4, 5, -1, -1, -1, -1}; /* var, accum, accum_update, lr, rho, epsilon, grad, indices */
  return run_sparse_opt(ctx, SP_ADADELTA, 6, 7, 2, h, 0);
}

/* LearningRateSchedule: attrs as kernels/cpu/optim.c (num = kind, alpha = lr,
 * start = decay_steps, beta, limit = power, keepdims = staircase/cycle). */
extern "C" loom_code loom__cu_lr_schedule_f32(const loom_kctx *ctx) {
  const loom_attrs *at = ctx->attrs;
  int kind = (int)at->num;
  if (kind != LOOM_LRS_EXPONENTIAL && kind != LOOM_LRS_PIECEWISE && kind != LOOM_LRS_POLYNOMIAL &&
      kind != LOOM_LRS_COSINE)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "unknown schedule kind %lld", (long long)at->num);
  lrs a;
  a.kind = kind;
  a.flag = at->keepdims != 0;
  a.lr = at->alpha;
  a.ds = at->start;
  a.beta = at->beta;
  a.power = at->limit;
  const double *bnd = NULL;
  const float *vals = NULL;
  int64_t nb = 0;
  if (kind == LOOM_LRS_PIECEWISE) {
    if (ctx->nin != 3)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "piecewise_constant needs n boundaries and n + 1 values");
    bnd = (const double *)ctx->in[1]->data;
    vals = (const float *)ctx->in[2]->data;
    nb = ctx->in[1]->numel;
  }
  LOOM_LAUNCH(1, 32, 0, STREAM(ctx), k_lr_schedule)(ctx->in[0]->data, (int)ctx->in[0]->dtype, bnd, vals, nb, a,
                                                    (float *)ctx->out[0]->data);
  return LOOM_OK;
}
