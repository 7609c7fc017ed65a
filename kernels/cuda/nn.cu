/* kernels/cuda/nn.cu - CUDA kernels of the nn family (kernels/cpu/nn.c): Softmax,
 * LogSoftmax, the softmax cross entropies, SigmoidCrossEntropyWithLogits,
 * L2Normalize, MaxPool/AvgPool and their gradients. */
#include <math.h>
#include <float.h>
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/nn.h"
#include "kernels/geometry.h"

/* ============================================= softmax and cross entropy */
/* Softmax-family rows of C: mode 0 softmax, 1 log-softmax, 2 dense xent,
 * 3 sparse xent. One row is worked by a group of threads (a warp, or a
 * block for long rows): thread `me` of `nt` strides the row, and G::max /
 * G::sum combine across the group (every thread gets the result). */
/* The max of v over the block with the rows' comparator (o > m ? o : m). */
template <typename T> __device__ T block_max_plain(T v, T *sh) {
  for (int off = 16; off > 0; off >>= 1) {
    T o = __shfl_down_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < (int)(blockDim.x >> 5) ? sh[lane] : (T)-INFINITY;
    for (int off = 16; off > 0; off >>= 1) {
      T o = __shfl_down_sync(0xffffffffu, v, off);
      v = o > v ? o : v;
    }
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  v = sh[0];
  __syncthreads();
  return v;
}
struct warp_group {
  template <typename T> __device__ static T max(T v) {
    for (int off = 16; off; off >>= 1) {
      T o = __shfl_xor_sync(0xffffffffu, v, off);
      v = o > v ? o : v;
    }
    return v;
  }
  template <typename T> __device__ static T sum(T v) {
    for (int off = 16; off; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
  }
};
struct block_group {
  template <typename T> __device__ static T max(T v) {
    __shared__ T sh[32];
    return block_max_plain<T>(v, sh);
  }
  template <typename T> __device__ static T sum(T v) {
    __shared__ T sh[32];
    return block_reduce<T>(R_SUM, v, sh);
  }
};
template <typename G, typename T, typename L>
__device__ __forceinline__ void softmax_row(const T *x, T *y, int64_t r, int64_t C, int mode, const T *z, const L *lab,
                                            T *loss, const cu_errp &ep, int64_t me, int64_t nt) {
  const T *xr = x + r * C;
  T *yr = y + r * C;
  T m = (T)-INFINITY;
  for (int64_t j = me; j < C; j += nt) m = xr[j] > m ? xr[j] : m;
  m = G::max(m);
  T s = 0;
  for (int64_t j = me; j < C; j += nt) s += d_expx(xr[j] - m);
  s = G::sum(s);
  T ls = d_logx(s), inv = (T)1 / s;
  if (mode == 0) {
    for (int64_t j = me; j < C; j += nt) yr[j] = d_expx(xr[j] - m) * inv;
  } else if (mode == 1) {
    for (int64_t j = me; j < C; j += nt) yr[j] = xr[j] - m - ls;
  } else if (mode == 2) {
    const T *zr = z + r * C;
    T l = 0;
    for (int64_t j = me; j < C; j += nt) {
      T zj = zr[j];
      l += zj != 0 ? zj * (ls - (xr[j] - m)) : (T)0;
      yr[j] = d_expx(xr[j] - m) * inv - zj;
    }
    l = G::sum(l);
    if (me == 0) loss[r] = l;
  } else {
    int64_t lb = (int64_t)lab[r];
    for (int64_t j = me; j < C; j += nt) yr[j] = d_expx(xr[j] - m) * inv - (j == lb ? (T)1 : (T)0);
    if (me == 0) {
      loss[r] = lb >= 0 && lb < C ? ls - (xr[lb] - m) : (T)NAN;
      if (lb < 0 || lb >= C) cu_bad_index(ep, r, C);
    }
  }
}
/* One warp per row. */
template <typename T, typename L>
__global__ void k_rows(const T *x, T *y, int64_t rows, int64_t C, int mode, const T *z, const L *lab, T *loss,
                       cu_errp ep) {
  int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t r = warp; r < rows; r += nw) /* uniform per warp */
    softmax_row<warp_group>(x, y, r, C, mode, z, lab, loss, ep, threadIdx.x & 31, 32);
}
/* One block per row, for few long rows (C >= 1024: a vocabulary). */
template <typename T, typename L>
__global__ void k_rows_block(const T *x, T *y, int64_t rows, int64_t C, int mode, const T *z, const L *lab, T *loss,
                             cu_errp ep) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) /* uniform per block */
    softmax_row<block_group>(x, y, r, C, mode, z, lab, loss, ep, threadIdx.x, blockDim.x);
}
/* Softmax-family rows: a warp per row, or a block per row for few long rows. */
template <typename T, typename L>
static void launch_rows(cudaStream_t s, const T *x, T *y, int64_t rows, int64_t C, int mode, const T *z, const L *lab,
                        T *loss, cu_errp ep) {
  if (C >= 1024 && rows < 2048)
    LOOM_LAUNCH((unsigned)rows, NT, 0, s, k_rows_block<T, L>)(x, y, rows, C, mode, z, lab, loss, ep);
  else
    LOOM_LAUNCH(warps_grid(rows), NT, 0, s, k_rows<T, L>)(x, y, rows, C, mode, z, lab, loss, ep);
}
template <typename T> static loom_code rows_op(const loom_kctx *ctx, int mode) {
  const loom_buf *X = ctx->in[0];
  int64_t C = X->ndim ? X->dims[X->ndim - 1] : 1;
  if (X->numel == 0 || C == 0) return LOOM_OK;
  int64_t rows = X->numel / C;
  launch_rows<T, int32_t>(STREAM(ctx), (const T *)X->data, (T *)ctx->out[0]->data, rows, C, mode, NULL, NULL, NULL,
                          cu_errp{});
  return LOOM_OK;
}
template <typename T> static loom_code xent(const loom_kctx *ctx, int sparse) {
  const loom_buf *X = ctx->in[0], *L = ctx->in[1];
  int64_t B = X->dims[0], C = X->dims[1];
  cudaStream_t s = STREAM(ctx);
  if (B == 0) return LOOM_OK;
  if (C == 0) {
    cudaMemsetAsync(ctx->out[0]->data, 0, (size_t)B * sizeof(T), s);
    return LOOM_OK;
  }
  T *loss = (T *)ctx->out[0]->data, *bp = (T *)ctx->out[1]->data;
  if (!sparse)
    launch_rows<T, int32_t>(s, (const T *)X->data, bp, B, C, 2, (const T *)L->data, NULL, loss, cu_errp{});
  else if (L->dtype == LOOM_I32)
    launch_rows<T, int32_t>(s, (const T *)X->data, bp, B, C, 3, NULL, (const int32_t *)L->data, loss,
                            cu_watch(ctx, LOOM_CU_ERR_LABELS, L));
  else if (L->dtype == LOOM_I64)
    launch_rows<T, int64_t>(s, (const T *)X->data, bp, B, C, 3, NULL, (const int64_t *)L->data, loss,
                            cu_watch(ctx, LOOM_CU_ERR_LABELS, L));
  else
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "labels must be int32 or int64, got %s",
                           loom_dtype_name(L->dtype));
  return LOOM_OK;
}
#define NN_K(dt, T)                                                                                              \
  extern "C" loom_code loom__cu_softmax_##dt(const loom_kctx *ctx) { return rows_op<T>(ctx, 0); }              \
  extern "C" loom_code loom__cu_log_softmax_##dt(const loom_kctx *ctx) { return rows_op<T>(ctx, 1); }          \
  extern "C" loom_code loom__cu_softmax_xent_##dt(const loom_kctx *ctx) { return xent<T>(ctx, 0); }            \
  extern "C" loom_code loom__cu_sparse_softmax_xent_##dt(const loom_kctx *ctx) { return xent<T>(ctx, 1); }
NN_K(f32, float)
NN_K(f64, double)

/* ==================================== SigmoidCrossEntropyWithLogits */
extern "C" loom_code loom__cu_sigmoid_xent_f32(const loom_kctx *ctx) { return run_bin<float, float, op_sigmoid_xent>(ctx); }
extern "C" loom_code loom__cu_sigmoid_xent_f64(const loom_kctx *ctx) { return run_bin<double, double, op_sigmoid_xent>(ctx); }

namespace {
__device__ __forceinline__ float x_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double x_sqrt(double x) { return sqrt(x); }
/* Blocks for n independent units (one block each, grid-stride beyond). */
unsigned blocks_for(int64_t n) { return (unsigned)(n < 1 ? 1 : n > (1 << 20) ? (1 << 20) : n); }

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

} // namespace

#define FLT_K(dt, T) \
  extern "C" loom_code loom__cu_l2_normalize_##dt(const loom_kctx *ctx) { return run_l2<T>(ctx); }
FLT_K(f32, float)
FLT_K(f64, double)

/* (kernels/geometry.h, shared with kernels/cpu/nn.c) */
typedef loom_pool_geom pgeom;
/* The window of output (oh, ow), clipped to the input: rows [hb, he), cols [wb, we). */
__device__ __forceinline__ void pool_bounds(const pgeom &g, int64_t oh, int64_t ow, int64_t *hb, int64_t *he,
                                            int64_t *wb, int64_t *we) {
  int64_t s = oh * g.sh - g.pt, e = s + g.kh;
  *hb = s > 0 ? s : 0;
  *he = e < g.H ? e : g.H;
  s = ow * g.sw - g.pl;
  e = s + g.kw;
  *wb = s > 0 ? s : 0;
  *we = e < g.W ? e : g.W;
}
/* Index type I: uint32_t when the tensors have fewer than 2^31 elements (32-bit division). */
template <typename I> __global__ void k_pool(const float *x, float *y, pgeom g, I nout, int avg) {
  const I C = (I)g.C, OW = (I)g.OW, OH = (I)g.OH;
  for (I o = (I)blockIdx.x * blockDim.x + threadIdx.x; o < nout; o += (I)gridDim.x * blockDim.x) {
    I t = o / C, c = o - t * C, t2 = t / OW, ow = t - t2 * OW, n = t2 / OH, oh = t2 - n * OH;
    int64_t hb, he, wb, we;
    pool_bounds(g, oh, ow, &hb, &he, &wb, &we);
    float acc = avg ? 0.0f : -INFINITY;
    for (int64_t ih = hb; ih < he; ih++)
      for (int64_t iw = wb; iw < we; iw++) {
        float v = x[(((int64_t)n * g.H + ih) * g.W + iw) * g.C + c];
        acc = avg ? acc + v : (v > acc ? v : acc);
      }
    if (avg) {
      int64_t cnt = (he - hb) * (we - wb);
      acc = cnt > 0 ? acc * (1.0f / (float)cnt) : 0.0f;
    }
    y[o] = acc;
  }
}
/* Pooling gradients gathered per input element: each dx element adds, in
 * output order (oh, then ow, as the CPU accumulates), dy of every window
 * that covers it (avg: dy / window size; max: when it is the window's first
 * maximum). No atomics: deterministic. */
__device__ __forceinline__ void pool_range(int64_t i, int64_t pad, int64_t k, int64_t st, int64_t nout, int64_t *lo,
                                           int64_t *hi) {
  /* outputs o with o * st - pad <= i < o * st - pad + k */
  int64_t a = i + pad - k + 1; /* o * st >= a */
  *lo = a <= 0 ? 0 : (a + st - 1) / st;
  int64_t b = (i + pad) / st + 1;
  *hi = b < nout ? b : nout;
}
template <typename I> __global__ void k_pool_grad(const float *x, const float *dy, float *dx, pgeom g, I nin, int avg) {
  const I C = (I)g.C, W = (I)g.W, H = (I)g.H;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < nin; i += (I)gridDim.x * blockDim.x) {
    I t = i / C, c = i - t * C, t2 = t / W, iw = t - t2 * W, n = t2 / H, ih = t2 - n * H;
    int64_t oh0, oh1, ow0, ow1;
    pool_range(ih, g.pt, g.kh, g.sh, g.OH, &oh0, &oh1);
    pool_range(iw, g.pl, g.kw, g.sw, g.OW, &ow0, &ow1);
    float acc = 0.0f;
    for (int64_t oh = oh0; oh < oh1; oh++)
      for (int64_t ow = ow0; ow < ow1; ow++) {
        int64_t o = (((int64_t)n * g.OH + oh) * g.OW + ow) * g.C + c, hb, he, wb, we;
        pool_bounds(g, oh, ow, &hb, &he, &wb, &we);
        if (avg) {
          int64_t cnt = (he - hb) * (we - wb);
          /* as the CPU: times the reciprocal, rounded twice (nvcc would fuse a*b+c into one FMA) */
          if (cnt > 0) acc = __fadd_rn(acc, __fmul_rn(dy[o], 1.0f / (float)cnt));
        } else {
          int64_t best = -1;
          float bv = -INFINITY;
          for (int64_t h = hb; h < he; h++)
            for (int64_t w = wb; w < we; w++) {
              int64_t at = (((int64_t)n * g.H + h) * g.W + w) * g.C + c;
              if (best < 0 || x[at] > bv) {
                bv = x[at];
                best = at;
              }
            }
          if (best == (int64_t)i) acc += dy[o];
        }
      }
    dx[i] = acc;
  }
}
#define POOL_LAUNCH(kern, n, ...)                                                                     \
  do {                                                                                                \
    if ((n) < ((int64_t)1 << 31))                                                                     \
      LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), kern<uint32_t>)(__VA_ARGS__, (uint32_t)(n), mode); \
    else                                                                                              \
      LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), kern<int64_t>)(__VA_ARGS__, (int64_t)(n), mode);   \
  } while (0)
extern "C" loom_code loom__cu_max_pool_f32(const loom_kctx *ctx) {
  loom_buf *Y = ctx->out[0];
  if (Y->numel == 0) return LOOM_OK;
  pgeom g;
  loom__pool_geom_init(&g, ctx->attrs, ctx->in[0]->dims, Y->dims);
  int mode = 0;
  POOL_LAUNCH(k_pool, Y->numel, (const float *)ctx->in[0]->data, (float *)Y->data, g);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_avg_pool_f32(const loom_kctx *ctx) {
  loom_buf *Y = ctx->out[0];
  if (Y->numel == 0) return LOOM_OK;
  pgeom g;
  loom__pool_geom_init(&g, ctx->attrs, ctx->in[0]->dims, Y->dims);
  int mode = 1;
  POOL_LAUNCH(k_pool, Y->numel, (const float *)ctx->in[0]->data, (float *)Y->data, g);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_max_pool_grad_f32(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *DY = ctx->in[2];
  loom_buf *DX = ctx->out[0];
  if (DX->numel == 0) return LOOM_OK;
  pgeom g;
  loom__pool_geom_init(&g, ctx->attrs, X->dims, DY->dims);
  int mode = 0;
  POOL_LAUNCH(k_pool_grad, DX->numel, (const float *)X->data, (const float *)DY->data, (float *)DX->data, g);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_avg_pool_grad_f32(const loom_kctx *ctx) {
  const loom_buf *DY = ctx->in[0];
  loom_buf *DX = ctx->out[0];
  if (DX->numel == 0) return LOOM_OK;
  pgeom g;
  loom__pool_geom_init(&g, ctx->attrs, DX->dims, DY->dims);
  int mode = 1;
  POOL_LAUNCH(k_pool_grad, DX->numel, (const float *)NULL, (const float *)DY->data, (float *)DX->data, g);
  return LOOM_OK;
}

