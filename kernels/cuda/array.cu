/* kernels/cuda/array.cu - CUDA kernels of the array family (kernels/cpu/array.c):
 * the layout ops BroadcastTo, BroadcastLike, Transpose, Slice, Tile, PadV2,
 * ConcatV2, Pack, Split, SplitV, Unpack, Fill, Range, OneHot, Shape; then
 * Gather, NoOp, ZerosLike, OnesLike, Cast; then TopK, TensorScatterAdd/Update
 * and the UnsortedSegment ops (rows grouped by kernels/cuda/index_group.cuh).
 * Reshape, ReshapeLike, ExpandDims, Squeeze and StopGradient are views
 * (LOOM_OPF_ALIAS0) and need no kernel.
 *
 * TopK orders by value descending with NaN above everything and ties (and
 * -0 == +0) by lower index, the CPU's total order: rows up to 64 by rank
 * counting, up to 2048 by a bitonic sort in shared memory, longer rows by
 * a radix select of the k-th key, then a sort of the k winners. Gather
 * writes zeros for an out-of-range index (and reports it).
 *
 * The layout ops:
 *
 * Every kernel moves elements by size (the "any" slot: f32, f64, i32, i64,
 * u8, bool), matching kernels/cpu/array.c bit for bit:
 *  - one output-indexed gather copy (BroadcastTo/Like, Transpose, Slice,
 *    Tile): the output is contiguous and the thread index runs along its
 *    innermost dimension, so writes are coalesced; dims are coalesced first
 *    (size-1 dims dropped, dims contiguous in both source and destination
 *    merged) and, where the innermost run is contiguous in the source too,
 *    elements are widened to up to 16 bytes per access;
 *  - a tiled shared-memory transpose when the innermost output dim is
 *    strided in the source (a batched 2-D transpose of any two dims);
 *  - Pad writes every output element once (the value or a source element);
 *  - Concat/Pack and Split/SplitV/Unpack: rows of per-piece chunks, up to 16
 *    piece pointers per launch in a by-value struct (more pieces: several
 *    launches over column groups).
 * Index arithmetic is 32-bit with multiply-high division by invariant
 * divisors when every extent fits in int32, 64-bit otherwise. */
#include <string.h>
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/array.h"

namespace {

/* ============================================================ helpers */
#define AR_MAXD (2 * LOOM_MAX_DIMS) /* Tile doubles the rank */
#define AR_CAT 16                   /* pieces per Concat/Split launch */

/* Division by an invariant d: q = (umulhi(n, m) + n) >> s, exact for
 * n < 2^31 and 1 <= d <= INT32_MAX; the 64-bit path divides plainly. */
struct fastdiv {
  int64_t d;
  uint32_t m, s;
};
static fastdiv fastdiv_make(int64_t d) {
  fastdiv f;
  f.d = d;
  f.m = 0;
  f.s = 0;
  if (d >= 1 && d <= INT32_MAX) {
    uint32_t s = 0;
    while (((uint64_t)1 << s) < (uint64_t)d) s++;
    f.s = s;
    f.m = (uint32_t)(((((uint64_t)1 << s) - (uint64_t)d) << 32) / (uint64_t)d + 1);
  }
  return f;
}
__device__ __forceinline__ uint32_t fq(uint32_t n, const fastdiv &f) { return (__umulhi(n, f.m) + n) >> f.s; }
__device__ __forceinline__ int64_t fq(int64_t n, const fastdiv &f) { return n / f.d; }

#define ILOOP(I, i, n) \
  for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < (n); i += (I)gridDim.x * (I)blockDim.x)

/* Elements moved by size; 2 and 16 bytes arise from widening. */
struct alignas(16) v16 {
  unsigned long long a, b;
};
template <int S> struct el_of;
template <> struct el_of<1> { typedef uint8_t t; };
template <> struct el_of<2> { typedef uint16_t t; };
template <> struct el_of<4> { typedef uint32_t t; };
template <> struct el_of<8> { typedef unsigned long long t; };
template <> struct el_of<16> { typedef v16 t; };

/* LOOM_CUDA_ARRAY_IDX64 (tests only) forces the 64-bit index path. */
#ifdef LOOM_CUDA_ARRAY_IDX64
static inline int fits32(int64_t n) { return (void)n, 0; }
#else
static inline int fits32(int64_t n) { return n >= 0 && n <= INT32_MAX; }
#endif
static inline int aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static void cstrides(int nd, const int64_t *dims, int64_t *st) {
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    st[i] = s;
    s *= dims[i];
  }
}
static int64_t prod(const int64_t *d, int b, int e) {
  int64_t p = 1;
  for (int i = b; i < e; i++) p *= d[i];
  return p;
}

/* double -> integer as the CPU converts fill values (truncation, NaN -> 0, saturation). */
static int64_t sat(double x, double lo, double hi) {
  if (x != x) return 0;
  if (x <= lo) return (int64_t)lo;
  if (x >= hi) return hi >= 9.2e18 ? INT64_MAX : (int64_t)hi;
  return (int64_t)x;
}
/* The bytes of v converted to dt (kernels/cpu/array.c value_bytes). */
static void value_bytes(loom_dtype dt, double v, unsigned char out[8]) {
  memset(out, 0, 8);
  switch (dt) {
  case LOOM_F32: {
    float x = (float)v;
    memcpy(out, &x, 4);
    break;
  }
  case LOOM_F64: memcpy(out, &v, 8); break;
  case LOOM_I32: {
    int32_t x = (int32_t)sat(v, (double)INT32_MIN, (double)INT32_MAX);
    memcpy(out, &x, 4);
    break;
  }
  case LOOM_I64: {
    int64_t x = v != v ? 0 : v <= (double)INT64_MIN ? INT64_MIN : v >= (double)INT64_MAX ? INT64_MAX : (int64_t)v;
    memcpy(out, &x, 8);
    break;
  }
  case LOOM_U8: out[0] = (unsigned char)sat(v, 0, 255); break;
  case LOOM_BOOL: out[0] = v != 0; break;
  default: break;
  }
}
/* An element of S bytes holding the es-byte pattern pat repeated. */
template <int S> static typename el_of<S>::t pattern(const unsigned char *pat, size_t es) {
  unsigned char b[16];
  for (int i = 0; i < S; i++) b[i] = pat[(size_t)i % es];
  typename el_of<S>::t v;
  memcpy(&v, b, S);
  return v;
}

static loom_code bad_size(const loom_kctx *ctx, loom_dtype dt) {
  return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA kernel for %s", loom_dtype_name(dt));
}
static int es_ok(size_t es) { return es == 1 || es == 2 || es == 4 || es == 8 || es == 16; }

/* ================================================== gather copy */
/* out[i] (contiguous, nd dims) = src[sum_d idx_d * ss_d]. */
struct cgeom {
  int nd;
  fastdiv dd[AR_MAXD];
  int64_t ss[AR_MAXD];
};
/* host form before coalescing */
struct chost {
  int nd;
  int64_t d[AR_MAXD], s[AR_MAXD];
};

/* Drops size-1 dims and merges an outer dim into the next when the pair is contiguous in the source. */
static void ch_coalesce(chost *g) {
  int n = 0;
  for (int i = 0; i < g->nd; i++) {
    if (g->d[i] == 1) continue;
    if (n > 0 && g->s[n - 1] == g->s[i] * g->d[i]) {
      g->d[n - 1] *= g->d[i];
      g->s[n - 1] = g->s[i];
      continue;
    }
    g->d[n] = g->d[i];
    g->s[n] = g->s[i];
    n++;
  }
  g->nd = n;
}

template <typename E, typename I> __global__ void k_copy(const E *__restrict__ src, E *__restrict__ dst, I n, cgeom g) {
  ILOOP(I, i, n) {
    I r = i, off = 0;
    for (int d = g.nd - 1; d > 0; d--) {
      I q = fq(r, g.dd[d]);
      off += (r - q * (I)g.dd[d].d) * (I)g.ss[d];
      r = q;
    }
    dst[i] = src[off + r * (I)g.ss[0]];
  }
}

/* Batched 2-D transpose: dim P (source stride 1, destination stride pd) and
 * the innermost output dim L (source stride ls, destination stride 1);
 * other dims are batch dims. 32x32 tiles, 32x8 threads. */
struct tgeom {
  int nb;
  int64_t bd[AR_MAXD], bs[AR_MAXD], bo[AR_MAXD];
  int64_t nbatch, P, L, pd, ls;
};
#define TT 32
#define TR 8
template <typename E> __global__ void k_transpose_tiled(const E *__restrict__ src, E *__restrict__ dst, tgeom g) {
  __shared__ E tile[TT][TT + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t b = blockIdx.z; b < g.nbatch; b += gridDim.z) {
    int64_t so = 0, dof = 0, r = b;
    for (int d = g.nb - 1; d >= 0; d--) {
      int64_t q = r / g.bd[d], c = r - q * g.bd[d];
      so += c * g.bs[d];
      dof += c * g.bo[d];
      r = q;
    }
    for (int64_t p0 = (int64_t)blockIdx.y * TT; p0 < g.P; p0 += (int64_t)gridDim.y * TT)
      for (int64_t l0 = (int64_t)blockIdx.x * TT; l0 < g.L; l0 += (int64_t)gridDim.x * TT) {
        int64_t p = p0 + tx;
        for (int j = 0; j < TT; j += TR) {
          int64_t l = l0 + ty + j;
          if (p < g.P && l < g.L) tile[ty + j][tx] = src[so + p + l * g.ls];
        }
        __syncthreads();
        int64_t l = l0 + tx;
        for (int j = 0; j < TT; j += TR) {
          int64_t pp = p0 + ty + j;
          if (pp < g.P && l < g.L) dst[dof + pp * g.pd + l] = tile[tx][ty + j];
        }
        __syncthreads();
      }
  }
}

template <int S, typename I> static void launch_copy(cudaStream_t st, const void *src, void *dst, int64_t n, const cgeom &g) {
  typedef typename el_of<S>::t E;
  LOOM_LAUNCH(grid_for(n), NT, 0, st, k_copy<E, I>)((const E *)src, (E *)dst, (I)n, g);
}
template <typename I> static void launch_copy_es(cudaStream_t st, size_t es, const void *src, void *dst, int64_t n, const cgeom &g) {
  switch (es) {
  case 1: launch_copy<1, I>(st, src, dst, n, g); break;
  case 2: launch_copy<2, I>(st, src, dst, n, g); break;
  case 4: launch_copy<4, I>(st, src, dst, n, g); break;
  case 8: launch_copy<8, I>(st, src, dst, n, g); break;
  default: launch_copy<16, I>(st, src, dst, n, g); break;
  }
}

template <typename E> static void launch_tiled(cudaStream_t st, const void *src, void *dst, const tgeom &g) {
  int64_t gx = (g.L + TT - 1) / TT, gy = (g.P + TT - 1) / TT, gz = g.nbatch;
  dim3 grid((unsigned)(gx < (1 << 20) ? gx : (1 << 20)), (unsigned)(gy < 65535 ? gy : 65535),
            (unsigned)(gz < 65535 ? gz : 65535));
  LOOM_LAUNCH(grid, dim3(TT, TR), 0, st, k_transpose_tiled<E>)((const E *)src, (E *)dst, g);
}

/* Runs out = gather(src) for the geometry h (dims of the contiguous output, source strides in elements). */
static loom_code run_copy(const loom_kctx *ctx, chost h, size_t es, const void *src, void *dst, int allow_tiled) {
  cudaStream_t st = STREAM(ctx);
  if (!es_ok(es)) return bad_size(ctx, ctx->out[0]->dtype);
  int64_t n = 1;
  for (int i = 0; i < h.nd; i++) n *= h.d[i];
  if (n == 0) return LOOM_OK;
  ch_coalesce(&h);
  if (h.nd == 0 || (h.nd == 1 && h.s[0] == 1)) {
    cudaMemcpyAsync(dst, src, (size_t)n * es, cudaMemcpyDeviceToDevice, st);
    return LOOM_OK;
  }
  int nd = h.nd;
  /* innermost output dim strided in the source, some other dim contiguous: tiled transpose */
  if (allow_tiled && nd >= 2 && h.s[nd - 1] != 1 && es <= 8) {
    int p = -1;
    for (int i = 0; i < nd - 1; i++)
      if (h.s[i] == 1) p = i;
    if (p >= 0 && h.d[p] >= 16 && h.d[nd - 1] >= 16) {
      int64_t os[AR_MAXD];
      cstrides(nd, h.d, os);
      tgeom t;
      t.nb = 0;
      t.nbatch = 1;
      for (int i = 0; i < nd - 1; i++) {
        if (i == p) continue;
        t.bd[t.nb] = h.d[i];
        t.bs[t.nb] = h.s[i];
        t.bo[t.nb++] = os[i];
        t.nbatch *= h.d[i];
      }
      t.P = h.d[p];
      t.pd = os[p];
      t.L = h.d[nd - 1];
      t.ls = h.s[nd - 1];
      switch (es) {
      case 1: launch_tiled<uint8_t>(st, src, dst, t); break;
      case 2: launch_tiled<uint16_t>(st, src, dst, t); break;
      case 4: launch_tiled<uint32_t>(st, src, dst, t); break;
      default: launch_tiled<unsigned long long>(st, src, dst, t); break;
      }
      return LOOM_OK;
    }
  }
  /* widen: innermost run contiguous in the source, every outer stride a multiple */
  if (h.s[nd - 1] == 1) {
    for (size_t w = 16 / es; w >= 2; w /= 2) {
      int ok = h.d[nd - 1] % (int64_t)w == 0 && aligned(src, es * w) && aligned(dst, es * w);
      for (int i = 0; ok && i < nd - 1; i++) ok = h.s[i] % (int64_t)w == 0;
      if (!ok) continue;
      h.d[nd - 1] /= (int64_t)w;
      for (int i = 0; i < nd - 1; i++) h.s[i] /= (int64_t)w;
      es *= w;
      n /= (int64_t)w;
      ch_coalesce(&h);
      if (h.nd == 0) {
        h.nd = 1;
        h.d[0] = 1;
        h.s[0] = 0;
      }
      nd = h.nd;
      break;
    }
  }
  cgeom g;
  g.nd = nd;
  int64_t extent = 1;
  for (int i = 0; i < nd; i++) {
    g.dd[i] = fastdiv_make(h.d[i]);
    g.ss[i] = h.s[i];
    extent += (h.d[i] - 1) * h.s[i];
  }
  if (fits32(n) && fits32(extent)) launch_copy_es<uint32_t>(st, es, src, dst, n, g);
  else launch_copy_es<int64_t>(st, es, src, dst, n, g);
  return LOOM_OK;
}

/* ================================================== pad */
/* out[i] = value, or src[...] where every coordinate c_d is in [lo_d, lo_d + xd_d). */
struct pgeom {
  int nd;
  fastdiv od[LOOM_MAX_DIMS];
  int64_t lo[LOOM_MAX_DIMS], xd[LOOM_MAX_DIMS], ss[LOOM_MAX_DIMS];
};
template <typename E, typename I>
__global__ void k_pad(const E *__restrict__ src, E *__restrict__ dst, I n, pgeom g, E val) {
  ILOOP(I, i, n) {
    I r = i;
    int64_t off = 0;
    bool in = true;
    for (int d = g.nd - 1; d >= 0; d--) {
      I q = d ? fq(r, g.od[d]) : (I)0;
      int64_t c = (int64_t)(r - q * (I)g.od[d].d) - g.lo[d];
      in = in && c >= 0 && c < g.xd[d];
      off += c * g.ss[d];
      r = q;
    }
    dst[i] = in ? src[off] : val;
  }
}
template <int S> static void launch_pad(cudaStream_t st, const void *src, void *dst, int64_t n, const pgeom &g,
                                        const unsigned char *pat, size_t es0) {
  typedef typename el_of<S>::t E;
  E v = pattern<S>(pat, es0);
  if (fits32(n)) LOOM_LAUNCH(grid_for(n), NT, 0, st, k_pad<E, uint32_t>)((const E *)src, (E *)dst, (uint32_t)n, g, v);
  else LOOM_LAUNCH(grid_for(n), NT, 0, st, k_pad<E, int64_t>)((const E *)src, (E *)dst, n, g, v);
}

/* ================================================== fill (value from device) */
template <typename E> __global__ void k_fill_dev(const E *__restrict__ v, E *__restrict__ o, int64_t n) {
  const E x = *v;
  GRID_LOOP(i, n) o[i] = x;
}
template <typename E> __global__ void k_fill_val(E *__restrict__ o, int64_t n, E x) {
  GRID_LOOP(i, n) o[i] = x;
}
/* Fills n elements of es bytes with the pattern pat (widened when aligned). */
static void fill_pattern(cudaStream_t st, void *dst, size_t es, int64_t n, const unsigned char *pat) {
  size_t bytes = (size_t)n * es;
  int uniform = 1;
  for (size_t i = 1; i < es; i++) uniform &= pat[i] == pat[0];
  if (uniform) {
    cudaMemsetAsync(dst, pat[0], bytes, st);
    return;
  }
  if (aligned(dst, 16) && bytes % 16 == 0) {
    int64_t m = (int64_t)(bytes / 16);
    LOOM_LAUNCH(grid_for(m), NT, 0, st, k_fill_val<v16>)((v16 *)dst, m, pattern<16>(pat, es));
  } else if (es == 4) {
    LOOM_LAUNCH(grid_for(n), NT, 0, st, k_fill_val<uint32_t>)((uint32_t *)dst, n, pattern<4>(pat, es));
  } else {
    LOOM_LAUNCH(grid_for(n), NT, 0, st, k_fill_val<unsigned long long>)((unsigned long long *)dst, n, pattern<8>(pat, es));
  }
}

/* ================================================== concat / split */
/* One launch: columns [c0, c0 + cum[n]) of every row of the big tensor (row
 * length W), piece k holding columns [cum[k], cum[k+1]) of the group. */
struct catg {
  int n;
  int64_t W, c0;
  int64_t cum[AR_CAT + 1];
  void *p[AR_CAT];
};
template <typename E, typename I, bool SPLIT> __global__ void k_cat(E *__restrict__ big, I n, fastdiv wg, catg g) {
  ILOOP(I, i, n) {
    I o = fq(i, wg);
    int64_t c = (int64_t)(i - o * (I)wg.d);
    int lo = 0, hi = g.n - 1; /* largest k with cum[k] <= c (skips empty pieces) */
    while (lo < hi) {
      int mid = (lo + hi + 1) >> 1;
      if (g.cum[mid] <= c) lo = mid;
      else hi = mid - 1;
    }
    int64_t w = g.cum[lo + 1] - g.cum[lo];
    int64_t at = (int64_t)o * w + (c - g.cum[lo]);
    int64_t bo = (int64_t)o * g.W + g.c0 + c;
    if (SPLIT) ((E *)g.p[lo])[at] = big[bo];
    else big[bo] = ((const E *)g.p[lo])[at];
  }
}
template <typename E, bool SPLIT> static void launch_cat(cudaStream_t st, void *big, int64_t outer, const catg &g) {
  int64_t wgc = g.cum[g.n], n = outer * wgc;
  fastdiv f = fastdiv_make(wgc);
  if (fits32(n) && fits32(outer * g.W)) LOOM_LAUNCH(grid_for(n), NT, 0, st, k_cat<E, uint32_t, SPLIT>)((E *)big, (uint32_t)n, f, g);
  else LOOM_LAUNCH(grid_for(n), NT, 0, st, k_cat<E, int64_t, SPLIT>)((E *)big, n, f, g);
}
template <bool SPLIT> static void launch_cat_es(cudaStream_t st, size_t es, void *big, int64_t outer, const catg &g) {
  switch (es) {
  case 1: launch_cat<uint8_t, SPLIT>(st, big, outer, g); break;
  case 2: launch_cat<uint16_t, SPLIT>(st, big, outer, g); break;
  case 4: launch_cat<uint32_t, SPLIT>(st, big, outer, g); break;
  case 8: launch_cat<unsigned long long, SPLIT>(st, big, outer, g); break;
  default: launch_cat<v16, SPLIT>(st, big, outer, g); break;
  }
}

/* Concat/Pack (split = 0: pieces are the inputs) and Split/SplitV/Unpack (split = 1: pieces are the outputs). */
static loom_code cat_run(const loom_kctx *ctx, int split) {
  const loom_buf *big = split ? ctx->in[0] : ctx->out[0];
  int np = split ? ctx->nout : ctx->nin;
  loom_buf *const *pieces = split ? ctx->out : ctx->in;
  size_t es = loom_dtype_size(big->dtype);
  if (!es_ok(es)) return bad_size(ctx, big->dtype);
  if (big->numel == 0) return LOOM_OK;
  int64_t axis = ctx->attrs->axis < 0 ? ctx->attrs->axis + big->ndim : ctx->attrs->axis;
  if (axis < 0 || axis >= big->ndim)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                           (long long)ctx->attrs->axis, (int)big->ndim);
  int64_t outer = prod(big->dims, 0, (int)axis);
  int64_t W = big->numel / outer, sum = 0;
  for (int k = 0; k < np; k++) sum += pieces[k]->numel / outer;
  if (sum != W) return loom_status_set(ctx->st, LOOM_INTERNAL, "piece sizes do not add up to the row length");
  cudaStream_t st = STREAM(ctx);
  /* axis 0: each piece is one contiguous run of the big tensor; one copy per
   * piece when there are few or they are large (else the kernel, 16 per launch) */
  if (outer == 1 && (np <= 4 || (size_t)big->numel * es >= ((size_t)np << 18))) {
    int64_t c = 0;
    for (int k = 0; k < np; k++) {
      size_t b = (size_t)pieces[k]->numel * es;
      char *bp = (char *)big->data + (size_t)c * es;
      if (b) {
        if (split) cudaMemcpyAsync(pieces[k]->data, bp, b, cudaMemcpyDeviceToDevice, st);
        else cudaMemcpyAsync(bp, pieces[k]->data, b, cudaMemcpyDeviceToDevice, st);
      }
      c += pieces[k]->numel;
    }
    return LOOM_OK;
  }
  /* widen when every chunk and pointer allows it */
  size_t w = 16 / es;
  for (; w >= 2; w /= 2) {
    int ok = W % (int64_t)w == 0 && aligned(big->data, es * w);
    for (int k = 0; ok && k < np; k++)
      if (pieces[k]->numel) ok = (pieces[k]->numel / outer) % (int64_t)w == 0 && aligned(pieces[k]->data, es * w);
    if (ok) break;
  }
  if (w < 2) w = 1;
  catg g;
  g.W = W / (int64_t)w;
  int64_t c0 = 0;
  for (int k0 = 0; k0 < np; k0 += AR_CAT) {
    int k1 = k0 + AR_CAT < np ? k0 + AR_CAT : np;
    g.n = 0;
    g.c0 = c0;
    g.cum[0] = 0;
    for (int k = k0; k < k1; k++) {
      int64_t wk = pieces[k]->numel / outer / (int64_t)w;
      if (!wk) continue;
      g.p[g.n] = pieces[k]->data;
      g.cum[g.n + 1] = g.cum[g.n] + wk;
      g.n++;
    }
    if (g.n) {
      if (split) launch_cat_es<true>(st, es * w, big->data, outer, g);
      else launch_cat_es<false>(st, es * w, big->data, outer, g);
    }
    c0 += g.cum[g.n];
  }
  return LOOM_OK;
}

/* ================================================== one-hot, range, shape */
template <typename E, typename X, typename I>
__global__ void k_one_hot(const X *__restrict__ idx, E *__restrict__ out, I n, fastdiv inner, fastdiv depth, E on, E off) {
  ILOOP(I, i, n) {
    I t = fq(i, inner), ii = i - t * (I)inner.d;
    I x = fq(t, depth), j = t - x * (I)depth.d;
    int64_t v = (int64_t)idx[x * (I)inner.d + ii];
    out[i] = v == (int64_t)j ? on : off;
  }
}
template <typename E, typename X>
static void launch_one_hot(cudaStream_t st, const void *idx, void *out, int64_t n, const fastdiv &inner, const fastdiv &depth,
                           const unsigned char *on, const unsigned char *off, size_t es) {
  E von = pattern<sizeof(E)>(on, es), voff = pattern<sizeof(E)>(off, es);
  if (fits32(n)) LOOM_LAUNCH(grid_for(n), NT, 0, st, k_one_hot<E, X, uint32_t>)((const X *)idx, (E *)out, (uint32_t)n, inner, depth, von, voff);
  else LOOM_LAUNCH(grid_for(n), NT, 0, st, k_one_hot<E, X, int64_t>)((const X *)idx, (E *)out, n, inner, depth, von, voff);
}
template <typename E>
static loom_code one_hot_idx(const loom_kctx *ctx, int64_t n, const fastdiv &inner, const fastdiv &depth,
                             const unsigned char *on, const unsigned char *off, size_t es) {
  const loom_buf *I = ctx->in[0];
  void *out = ctx->out[0]->data;
  cudaStream_t st = STREAM(ctx);
  switch (I->dtype) {
  case LOOM_I32: launch_one_hot<E, int32_t>(st, I->data, out, n, inner, depth, on, off, es); break;
  case LOOM_I64: launch_one_hot<E, int64_t>(st, I->data, out, n, inner, depth, on, off, es); break;
  case LOOM_U8: launch_one_hot<E, uint8_t>(st, I->data, out, n, inner, depth, on, off, es); break;
  default:
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "indices must be int32, int64 or uint8, got %s",
                           loom_dtype_name(I->dtype));
  }
  return LOOM_OK;
}

/* start + i * delta rounded once per operation as on the CPU (no fused multiply-add). */
__device__ __forceinline__ double range_at(double start, double delta, int64_t i) {
#ifdef LOOM_CUEMU
  volatile double p = (double)i * delta; /* g++ would contract C++ to an FMA (-ffp-contract=fast) */
  return start + p;
#else
  return __dadd_rn(start, __dmul_rn((double)i, delta));
#endif
}
template <typename T> __global__ void k_range_f(T *__restrict__ o, int64_t n, double start, double delta) {
  GRID_LOOP(i, n) o[i] = (T)range_at(start, delta, i);
}
template <typename T> __global__ void k_range_i(T *__restrict__ o, int64_t n, int64_t start, int64_t delta) {
  GRID_LOOP(i, n) o[i] = (T)(int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)delta);
}

struct shape_dims {
  int n;
  int64_t d[LOOM_MAX_DIMS];
};
template <typename T> __global__ void k_shape(T *__restrict__ o, shape_dims s) {
  int i = (int)threadIdx.x;
  if (i < s.n) o[i] = (T)s.d[i];
}

} // namespace

/* ================================================== entry points */
/* BroadcastTo, BroadcastLike (input 1 only gives the shape; never read). */
extern "C" loom_code loom__cu_broadcast_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  size_t es = loom_dtype_size(O->dtype);
  if (!es_ok(es)) return bad_size(ctx, O->dtype);
  if (O->numel == 0) return LOOM_OK;
  if (X->numel == O->numel) {
    cudaMemcpyAsync(O->data, X->data, (size_t)O->numel * es, cudaMemcpyDeviceToDevice, STREAM(ctx));
    return LOOM_OK;
  }
  int off = O->ndim - X->ndim;
  if (off < 0) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "cannot broadcast to a lower rank");
  int64_t xs[LOOM_MAX_DIMS];
  cstrides(X->ndim, X->dims, xs);
  chost h;
  h.nd = O->ndim;
  for (int i = 0; i < O->ndim; i++) {
    int xi = i - off;
    h.d[i] = O->dims[i];
    h.s[i] = (xi < 0 || X->dims[xi] == 1) ? 0 : xs[xi];
  }
  return run_copy(ctx, h, es, X->data, O->data, 0);
}

extern "C" loom_code loom__cu_transpose_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  if (a->naxes != X->ndim) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "perm does not match the rank");
  int64_t xs[LOOM_MAX_DIMS];
  cstrides(X->ndim, X->dims, xs);
  chost h;
  h.nd = O->ndim;
  for (int j = 0; j < O->ndim; j++) {
    int64_t p = a->axes[j];
    if (p < 0 || p >= X->ndim) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "perm is not a permutation");
    h.d[j] = O->dims[j];
    h.s[j] = xs[p];
  }
  return run_copy(ctx, h, loom_dtype_size(O->dtype), X->data, O->data, 1);
}

extern "C" loom_code loom__cu_slice_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  size_t es = loom_dtype_size(O->dtype);
  if (O->numel == 0) return LOOM_OK;
  int64_t xs[LOOM_MAX_DIMS];
  cstrides(X->ndim, X->dims, xs);
  int64_t off = 0;
  for (int i = 0; i < X->ndim; i++) off += a->shape[i] * xs[i];
  chost h;
  h.nd = O->ndim;
  for (int i = 0; i < O->ndim; i++) {
    h.d[i] = O->dims[i];
    h.s[i] = xs[i];
  }
  return run_copy(ctx, h, es, (const char *)X->data + off * (int64_t)es, O->data, 0);
}

extern "C" loom_code loom__cu_tile_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  if (O->numel == 0) return LOOM_OK;
  int r = X->ndim;
  int64_t xs[LOOM_MAX_DIMS];
  cstrides(r, X->dims, xs);
  chost h; /* output dim i viewed as (multiple, input dim): source strides (0, xs[i]) */
  h.nd = 2 * r;
  for (int i = 0; i < r; i++) {
    int64_t d = X->dims[i];
    h.d[2 * i] = d ? O->dims[i] / d : 0;
    h.s[2 * i] = 0;
    h.d[2 * i + 1] = d;
    h.s[2 * i + 1] = xs[i];
  }
  return run_copy(ctx, h, loom_dtype_size(O->dtype), X->data, O->data, 0);
}

extern "C" loom_code loom__cu_pad_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  size_t es = loom_dtype_size(O->dtype);
  if (!es_ok(es)) return bad_size(ctx, O->dtype);
  if (O->numel == 0) return LOOM_OK;
  cudaStream_t st = STREAM(ctx);
  unsigned char pat[8];
  value_bytes(O->dtype, a->alpha, pat);
  if (X->numel == 0) {
    fill_pattern(st, O->data, es, O->numel, pat);
    return LOOM_OK;
  }
  if (X->numel == O->numel) {
    cudaMemcpyAsync(O->data, X->data, (size_t)O->numel * es, cudaMemcpyDeviceToDevice, st);
    return LOOM_OK;
  }
  /* dims outer..inner; an outer dim merges into an unpadded inner one */
  int64_t od[LOOM_MAX_DIMS], lo[LOOM_MAX_DIMS], xd[LOOM_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < X->ndim; i++) {
    int64_t o = O->dims[i], l = a->shape[i], x = X->dims[i];
    if (o == 1 && x == 1) continue;
    od[nd] = o;
    lo[nd] = l;
    xd[nd] = x;
    nd++;
  }
  int m = 0; /* merge dim i+1 (inner, unpadded) into dim i, scanning outer..inner */
  for (int i = 0; i < nd; i++) {
    if (m > 0 && od[i] == xd[i]) {
      od[m - 1] *= od[i];
      lo[m - 1] *= od[i];
      xd[m - 1] *= xd[i];
      continue;
    }
    od[m] = od[i];
    lo[m] = lo[i];
    xd[m] = xd[i];
    m++;
  }
  nd = m;
  /* widen: the innermost dim's size, offset and source extent divisible, pointers aligned */
  size_t w = 16 / es;
  for (; w >= 2; w /= 2)
    if (od[nd - 1] % (int64_t)w == 0 && lo[nd - 1] % (int64_t)w == 0 && xd[nd - 1] % (int64_t)w == 0 &&
        aligned(X->data, es * w) && aligned(O->data, es * w))
      break;
  if (w < 2) w = 1;
  od[nd - 1] /= (int64_t)w;
  lo[nd - 1] /= (int64_t)w;
  xd[nd - 1] /= (int64_t)w;
  pgeom g;
  g.nd = nd;
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    g.od[i] = fastdiv_make(od[i]);
    g.lo[i] = lo[i];
    g.xd[i] = xd[i];
    g.ss[i] = s;
    s *= xd[i];
  }
  int64_t n = O->numel / (int64_t)w;
  switch (es * w) {
  case 1: launch_pad<1>(st, X->data, O->data, n, g, pat, es); break;
  case 2: launch_pad<2>(st, X->data, O->data, n, g, pat, es); break;
  case 4: launch_pad<4>(st, X->data, O->data, n, g, pat, es); break;
  case 8: launch_pad<8>(st, X->data, O->data, n, g, pat, es); break;
  default: launch_pad<16>(st, X->data, O->data, n, g, pat, es); break;
  }
  return LOOM_OK;
}

/* ConcatV2, Pack */
extern "C" loom_code loom__cu_concat_any(const loom_kctx *ctx) { return cat_run(ctx, 0); }
/* Split, SplitV, Unpack */
extern "C" loom_code loom__cu_split_any(const loom_kctx *ctx) { return cat_run(ctx, 1); }

/* Fill: input 0 is the scalar value (read on the device). */
extern "C" loom_code loom__cu_fill_any(const loom_kctx *ctx) {
  loom_buf *O = ctx->out[0];
  int64_t n = O->numel;
  if (n == 0) return LOOM_OK;
  const void *v = ctx->in[0]->data;
  cudaStream_t st = STREAM(ctx);
  switch (loom_dtype_size(O->dtype)) {
  case 1: LOOM_LAUNCH(grid_for(n), NT, 0, st, k_fill_dev<uint8_t>)((const uint8_t *)v, (uint8_t *)O->data, n); break;
  case 4: LOOM_LAUNCH(grid_for(n), NT, 0, st, k_fill_dev<uint32_t>)((const uint32_t *)v, (uint32_t *)O->data, n); break;
  case 8:
    LOOM_LAUNCH(grid_for(n), NT, 0, st, k_fill_dev<unsigned long long>)((const unsigned long long *)v,
                                                                       (unsigned long long *)O->data, n);
    break;
  default: return bad_size(ctx, O->dtype);
  }
  return LOOM_OK;
}

extern "C" loom_code loom__cu_one_hot_any(const loom_kctx *ctx) {
  const loom_buf *I = ctx->in[0];
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  if (O->numel == 0) return LOOM_OK;
  size_t es = loom_dtype_size(O->dtype);
  int axis = a->axis < 0 ? I->ndim : (int)a->axis;
  int64_t inner = prod(I->dims, axis, I->ndim), depth = a->num;
  unsigned char on[8], off[8];
  value_bytes(O->dtype, a->alpha, on);
  value_bytes(O->dtype, a->beta, off);
  fastdiv fi = fastdiv_make(inner), fd = fastdiv_make(depth);
  switch (es) {
  case 1: return one_hot_idx<uint8_t>(ctx, O->numel, fi, fd, on, off, es);
  case 4: return one_hot_idx<uint32_t>(ctx, O->numel, fi, fd, on, off, es);
  case 8: return one_hot_idx<unsigned long long>(ctx, O->numel, fi, fd, on, off, es);
  default: return bad_size(ctx, O->dtype);
  }
}

extern "C" loom_code loom__cu_range_any(const loom_kctx *ctx) {
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  int64_t n = O->numel;
  cudaStream_t st = STREAM(ctx);
  int64_t s = (int64_t)a->start, d = (int64_t)a->delta;
  switch (O->dtype) {
  case LOOM_F32:
    if (n) LOOM_LAUNCH(grid_for(n), NT, 0, st, k_range_f<float>)((float *)O->data, n, a->start, a->delta);
    break;
  case LOOM_F64:
    if (n) LOOM_LAUNCH(grid_for(n), NT, 0, st, k_range_f<double>)((double *)O->data, n, a->start, a->delta);
    break;
  case LOOM_I32:
    if (n) LOOM_LAUNCH(grid_for(n), NT, 0, st, k_range_i<int32_t>)((int32_t *)O->data, n, s, d);
    break;
  case LOOM_I64:
    if (n) LOOM_LAUNCH(grid_for(n), NT, 0, st, k_range_i<int64_t>)((int64_t *)O->data, n, s, d);
    break;
  default:
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "range of %s is not supported", loom_dtype_name(O->dtype));
  }
  return LOOM_OK;
}

/* Shape: only the input's dims are read (never its data); they travel to the
 * device as a kernel argument. */
extern "C" loom_code loom__cu_shape_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  if (X->ndim == 0) return LOOM_OK;
  shape_dims s;
  s.n = X->ndim;
  for (int i = 0; i < LOOM_MAX_DIMS; i++) s.d[i] = i < X->ndim ? X->dims[i] : 0;
  if (O->dtype == LOOM_I64) LOOM_LAUNCH(1, 32, 0, STREAM(ctx), k_shape<int64_t>)((int64_t *)O->data, s);
  else LOOM_LAUNCH(1, 32, 0, STREAM(ctx), k_shape<int32_t>)((int32_t *)O->data, s);
  return LOOM_OK;
}

/* ================================================== gather, segments */
template <typename E>
__global__ void k_gather(const E *src, E *dst, const void *idx, int i32, int64_t outer, int64_t K, int64_t N,
                         int64_t inner, cu_errp ep) {
  GRID_LOOP(i, outer * K * inner) {
    int64_t j = i % inner, t = i / inner, k = t % K, o = t / K;
    int64_t v = cu_load_index(idx, i32, k);
    if (v >= 0 && v < N) {
      dst[i] = src[(o * N + v) * inner + j];
    } else {
      dst[i] = (E)0;
      if (j == 0 && o == 0) cu_bad_index(ep, k, N);
    }
  }
}
extern "C" loom_code loom__cu_gather_any(const loom_kctx *ctx) {
  const loom_buf *P = ctx->in[0], *I = ctx->in[1];
  loom_buf *O = ctx->out[0];
  int64_t axis = ctx->attrs->axis;
  if (axis < 0) axis += P->ndim;
  if (axis < 0 || axis >= P->ndim) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "axis out of range");
  if (I->dtype != LOOM_I32 && I->dtype != LOOM_I64)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "indices must be int32 or int64");
  if (O->numel == 0) return LOOM_OK;
  int64_t N = P->dims[axis], outer = 1, inner = 1;
  for (int i = 0; i < axis; i++) outer *= P->dims[i];
  for (int i = (int)axis + 1; i < P->ndim; i++) inner *= P->dims[i];
  int64_t K = I->numel, n = outer * K * inner;
  int i32 = I->dtype == LOOM_I32;
  cudaStream_t s = STREAM(ctx);
  cu_errp ep = cu_watch(ctx, LOOM_CU_ERR_INDICES, I);
  switch (loom_dtype_size(P->dtype)) {
  case 1: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_gather<uint8_t>)((const uint8_t *)P->data, (uint8_t *)O->data, I->data, i32, outer, K, N, inner, ep); break;
  case 4: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_gather<uint32_t>)((const uint32_t *)P->data, (uint32_t *)O->data, I->data, i32, outer, K, N, inner, ep); break;
  case 8: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_gather<uint64_t>)((const uint64_t *)P->data, (uint64_t *)O->data, I->data, i32, outer, K, N, inner, ep); break;
  default: return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA gather for %s", loom_dtype_name(P->dtype));
  }
  return LOOM_OK;
}

/* ---- NoOp, ZerosLike, OnesLike, Cast ---- */
extern "C" loom_code loom__cu_noop_any(const loom_kctx *ctx) {
  (void)ctx;
  return LOOM_OK;
}
extern "C" loom_code loom__cu_zeros_like_any(const loom_kctx *ctx) {
  loom_buf *y = ctx->out[0];
  size_t n = (size_t)y->numel * loom_dtype_size(y->dtype);
  if (n) cudaMemsetAsync(y->data, 0, n, STREAM(ctx));
  return LOOM_OK;
}
template <typename T> __global__ void k_fill(T *y, int64_t n, T v) {
  GRID_LOOP(i, n) y[i] = v;
}
extern "C" loom_code loom__cu_ones_like_any(const loom_kctx *ctx) {
  loom_buf *y = ctx->out[0];
  int64_t n = y->numel;
  if (n == 0) return LOOM_OK;
  cudaStream_t s = STREAM(ctx);
  switch (y->dtype) {
  case LOOM_F32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<float>)((float *)y->data, n, 1.0f); break;
  case LOOM_F64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<double>)((double *)y->data, n, 1.0); break;
  case LOOM_I32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<int32_t>)((int32_t *)y->data, n, 1); break;
  case LOOM_I64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<int64_t>)((int64_t *)y->data, n, 1); break;
  case LOOM_U8:
  case LOOM_BOOL: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_fill<uint8_t>)((uint8_t *)y->data, n, 1); break;
  default: return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA kernel for %s", loom_dtype_name(y->dtype));
  }
  return LOOM_OK;
}

/* Float to integer truncates toward zero, saturates out of range and maps NaN
 * to 0 (kernels/cpu/array.c, SAT_CONV); everything else converts as C does. */
template <typename B> struct int_range;
template <> struct int_range<int32_t> {
  static constexpr int32_t lo = INT32_MIN, hi = INT32_MAX;
};
template <> struct int_range<int64_t> {
  static constexpr int64_t lo = INT64_MIN, hi = INT64_MAX;
};
template <> struct int_range<uint8_t> {
  static constexpr uint8_t lo = 0, hi = 255;
};
template <typename A, typename B> __device__ __forceinline__ B cast1(A x) {
  if constexpr (std::is_floating_point<A>::value && std::is_integral<B>::value) {
    double d = (double)x;
    if (d != d) return (B)0;
    if (d <= (double)int_range<B>::lo) return int_range<B>::lo;
    if (d >= (double)int_range<B>::hi) return int_range<B>::hi;
    return (B)d;
  } else {
    return (B)x;
  }
}
template <typename A, typename B> __global__ void k_cast(const A *x, B *y, int64_t n, int to_bool) {
  GRID_LOOP(i, n) y[i] = to_bool ? (B)(x[i] != (A)0) : cast1<A, B>(x[i]);
}
template <typename A> static loom_code cast_from(const loom_kctx *ctx, int64_t n) {
  const A *x = (const A *)ctx->in[0]->data;
  void *y = ctx->out[0]->data;
  cudaStream_t s = STREAM(ctx);
  switch (ctx->out[0]->dtype) {
  case LOOM_F32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, float>)(x, (float *)y, n, 0); break;
  case LOOM_F64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, double>)(x, (double *)y, n, 0); break;
  case LOOM_I32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, int32_t>)(x, (int32_t *)y, n, 0); break;
  case LOOM_I64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, int64_t>)(x, (int64_t *)y, n, 0); break;
  case LOOM_U8: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, uint8_t>)(x, (uint8_t *)y, n, 0); break;
  case LOOM_BOOL: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_cast<A, uint8_t>)(x, (uint8_t *)y, n, 1); break;
  default:
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA cast to %s", loom_dtype_name(ctx->out[0]->dtype));
  }
  return LOOM_OK;
}
extern "C" loom_code loom__cu_cast_any(const loom_kctx *ctx) {
  int64_t n = ctx->out[0]->numel;
  if (n == 0) return LOOM_OK;
  if (ctx->in[0]->dtype == ctx->out[0]->dtype) {
    cudaMemcpyAsync(ctx->out[0]->data, ctx->in[0]->data, (size_t)n * loom_dtype_size(ctx->in[0]->dtype),
                    cudaMemcpyDeviceToDevice, STREAM(ctx));
    return LOOM_OK;
  }
  switch (ctx->in[0]->dtype) {
  case LOOM_F32: return cast_from<float>(ctx, n);
  case LOOM_F64: return cast_from<double>(ctx, n);
  case LOOM_I32: return cast_from<int32_t>(ctx, n);
  case LOOM_I64: return cast_from<int64_t>(ctx, n);
  case LOOM_U8:
  case LOOM_BOOL: return cast_from<uint8_t>(ctx, n);
  default:
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA cast from %s", loom_dtype_name(ctx->in[0]->dtype));
  }
}

/* ================================================== TopK, scatters, segments */
#include "kernels/cuda/index_group.cuh"
namespace {
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

} // namespace

#define NUM_K(dt, T, U)                                                                                               \
  extern "C" loom_code loom__cu_top_k_##dt(const loom_kctx *ctx) { return run_topk<T>(ctx); }                        \
  extern "C" loom_code loom__cu_scatter_add_##dt(const loom_kctx *ctx) { return run_tensor_scatter<T, U>(ctx, 1); } \
  extern "C" loom_code loom__cu_segment_sum_##dt(const loom_kctx *ctx) { return run_segment<T>(ctx, 2); }
NUM_K(f32, float, float)
NUM_K(f64, double, double)
NUM_K(i32, int32_t, uint32_t)
NUM_K(i64, int64_t, uint64_t)
extern "C" loom_code loom__cu_top_k_u8(const loom_kctx *ctx) { return run_topk<uint8_t>(ctx); }

#define FLT_K(dt, T)                                                                                               \
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
