/* kernels/cuda/reduce.cu - CUDA kernels of the reduce family (kernels/cpu/reduce.c):
 * reductions over axes, ArgMax/ArgMin, ReduceSumLike, BiasAdd and
 * BiasAddGrad. */
#include <math.h>
#include <float.h>
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/geometry.h"

extern "C" int loom__reduce_mask(const loom_attrs *a, int ndim, uint32_t *mask, int64_t *bad);
extern "C" int loom__sum_like_mask(int ndy, const int64_t *dy, int nx, const int64_t *x, uint32_t *mask);

/* ============================================================ reductions */

struct red_geom {
  int nk, nr;
  int64_t kd[LOOM_MAX_DIMS], ks[LOOM_MAX_DIMS]; /* kept dims and their input strides */
  int64_t rd[LOOM_MAX_DIMS], rs[LOOM_MAX_DIMS]; /* reduced dims and strides */
  int64_t R;
};
static void red_geom_init(red_geom *g, const loom_buf *x, uint32_t mask) {
  int64_t st[LOOM_MAX_DIMS], s = 1;
  for (int i = x->ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= x->dims[i];
  }
  g->nk = g->nr = 0;
  g->R = 1;
  for (int i = 0; i < x->ndim; i++) {
    if (x->dims[i] == 1) continue;
    if (mask & (1u << i)) {
      g->rd[g->nr] = x->dims[i];
      g->rs[g->nr++] = st[i];
      g->R *= x->dims[i];
    } else {
      g->kd[g->nk] = x->dims[i];
      g->ks[g->nk++] = st[i];
    }
  }
}
__device__ __forceinline__ int64_t red_off(const int64_t *d, const int64_t *s, int n, int64_t i) {
  int64_t off = 0;
  for (int k = n - 1; k >= 0; k--) {
    int64_t q = i / d[k];
    off += (i - q * d[k]) * s[k];
    i = q;
  }
  return off;
}
template <typename T> __device__ __forceinline__ T lse_fin(T m, T s) { return m + d_logx(s); }
template <> __device__ __forceinline__ int32_t lse_fin<int32_t>(int32_t m, int32_t s) { return m + s; }
template <> __device__ __forceinline__ int64_t lse_fin<int64_t>(int64_t m, int64_t s) { return m + s; }
template <typename T> __device__ __forceinline__ T expd(T x) { return d_expx(x); }
template <> __device__ __forceinline__ int32_t expd<int32_t>(int32_t x) { return x; }
template <> __device__ __forceinline__ int64_t expd<int64_t>(int64_t x) { return x; }

template <typename T> __device__ __forceinline__ bool d_isinf(T m) { return isinf(m); }
template <> __device__ __forceinline__ bool d_isinf<int32_t>(int32_t m) { return false; }
template <> __device__ __forceinline__ bool d_isinf<int64_t>(int64_t m) { return false; }
template <typename T> static T nan_of() { return (T)NAN; }
template <> int32_t nan_of<int32_t>() { return 0; }
template <> int64_t nan_of<int64_t>() { return 0; }

/* One thread per output. */
template <typename T> __global__ void k_reduce_thread(const T *x, T *y, int64_t nout, red_geom g, int kind) {
  GRID_LOOP(o, nout) {
    const T *base = x + red_off(g.kd, g.ks, g.nk, o);
    int k1 = kind == R_LSE ? R_MAX : kind == R_MEAN ? R_SUM : kind;
    /* a reduction of one element is that element, -0 included (as on the CPU) */
    T acc = g.R == 1 ? base[0] : red_init<T>(k1);
    for (int64_t r = g.R == 1; r < g.R; r++) acc = red_comb(k1, acc, base[red_off(g.rd, g.rs, g.nr, r)]);
    if (kind == R_LSE) {
      T m = acc, s = 0;
      if (d_isinf<T>(m)) {
        y[o] = m;
        continue;
      }
      for (int64_t r = 0; r < g.R; r++) s += expd<T>(base[red_off(g.rd, g.rs, g.nr, r)] - m);
      acc = lse_fin<T>(m, s);
    } else if (kind == R_MEAN) {
      acc = acc / (T)g.R;
    }
    y[o] = acc;
  }
}
/* One block per output (long reductions). */
template <typename T> __global__ void k_reduce_block(const T *x, T *y, int64_t nout, red_geom g, int kind) {
  __shared__ T sh[32];
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    const T *base = x + red_off(g.kd, g.ks, g.nk, o);
    int k1 = kind == R_LSE ? R_MAX : kind == R_MEAN ? R_SUM : kind;
    T acc = red_init<T>(k1);
    for (int64_t r = threadIdx.x; r < g.R; r += blockDim.x) acc = red_comb(k1, acc, base[red_off(g.rd, g.rs, g.nr, r)]);
    acc = block_reduce<T>(k1, acc, sh);
    if (kind == R_LSE) {
      T m = acc, s = 0;
      if (!d_isinf<T>(m)) {
        for (int64_t r = threadIdx.x; r < g.R; r += blockDim.x) s += expd<T>(base[red_off(g.rd, g.rs, g.nr, r)] - m);
        s = block_reduce<T>(R_SUM, s, sh);
        acc = lse_fin<T>(m, s);
      }
    } else if (kind == R_MEAN) {
      acc = acc / (T)g.R;
    }
    if (threadIdx.x == 0) y[o] = acc;
  }
}

template <typename T> __global__ void k_fill_red(T *y, int64_t n, T v) {
  GRID_LOOP(i, n) y[i] = v;
}

/* Column reduction of x viewed as [R, inner] (reduced axes leading, kept
 * axes trailing: BiasAddGrad, sums over the batch): 32 columns per block,
 * blockDim.y threads down each column over rows [blockIdx.y * rows_per, +
 * rows_per), partials combined through shared memory in a fixed order (no
 * atomics: deterministic). y gets row blockIdx.y of a [gridDim.y, inner]
 * result; mean_div > 0 divides (the mean's last pass). */
template <typename T>
__global__ void k_reduce_cols(const T *x, T *y, int64_t R, int64_t inner, int64_t rows_per, int kind,
                              int64_t mean_div) {
  __shared__ T sh[32][33];
  int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
  int64_t r0 = (int64_t)blockIdx.y * rows_per, r1 = r0 + rows_per < R ? r0 + rows_per : R;
  T acc = red_init<T>(kind);
  if (j < inner)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += blockDim.y) acc = red_comb(kind, acc, x[r * inner + j]);
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < inner) {
    T a = sh[0][threadIdx.x];
    for (unsigned t = 1; t < blockDim.y; t++) a = red_comb(kind, a, sh[t][threadIdx.x]);
    if (mean_div > 0) a = a / (T)mean_div;
    y[(int64_t)blockIdx.y * inner + j] = a;
  }
}

/* Row reduction of x viewed as [nrows, R] (reduced axes trailing: means over
 * the last axis, full reductions): one warp per (row, piece), lanes striding
 * the piece (coalesced), combined by shuffles in a fixed order. A row is cut
 * into npiece pieces of L elements; y gets [nrows, npiece] (npiece == 1: the
 * result; mean_div > 0 divides). */
template <typename T>
__global__ void k_reduce_rows(const T *x, T *y, int64_t nrows, int64_t R, int64_t L, int64_t npiece, int kind,
                              int64_t mean_div) {
  int lane = threadIdx.x & 31;
  int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t v = w; v < nrows * npiece; v += nw) { /* uniform per warp: the shuffles see all 32 lanes */
    int64_t o = v / npiece, c = v - o * npiece, b = c * L, e = b + L < R ? b + L : R;
    const T *p = x + o * R;
    T acc = red_init<T>(kind);
    for (int64_t r = b + lane; r < e; r += 32) acc = red_comb(kind, acc, p[r]);
    for (int off = 16; off; off >>= 1) acc = red_comb(kind, acc, __shfl_down_sync(0xffffffffu, acc, off));
    if (lane == 0) y[v] = mean_div > 0 ? acc / (T)mean_div : acc;
  }
}


/* Sum/mean/max/min/prod over trailing axes: one pass of a warp per row, or,
 * for few long rows (a full reduction), warps over 8192-element pieces into
 * the scratch and a second pass over the pieces. */
template <typename T>
static loom_code reduce_rows(const loom_kctx *ctx, int kind, const T *x, T *y, int64_t nrows, int64_t R) {
  int k1 = kind == R_MEAN ? R_SUM : kind;
  int64_t mean_div = kind == R_MEAN ? R : 0;
  cudaStream_t s = STREAM(ctx);
  int64_t npiece = nrows < 256 && R >= 65536 ? (R + 8191) / 8192 : 1;
  if (npiece > 4096) npiece = 4096;
  if (npiece == 1) {
    LOOM_LAUNCH(warps_grid(nrows), NT, 0, s, k_reduce_rows<T>)(x, y, nrows, R, R, (int64_t)1, k1, mean_div);
    return LOOM_OK;
  }
  int64_t L = (R + npiece - 1) / npiece;
  T *part = (T *)loom__cuda_scratch(CUCTX(ctx), (size_t)(nrows * npiece) * sizeof(T));
  if (!part) return loom_status_set(ctx->st, LOOM_RESOURCE_EXHAUSTED, "reduction: no device memory for partials");
  LOOM_LAUNCH(warps_grid(nrows * npiece), NT, 0, s, k_reduce_rows<T>)(x, part, nrows, R, L, npiece, k1, (int64_t)0);
  LOOM_LAUNCH(warps_grid(nrows), NT, 0, s, k_reduce_rows<T>)((const T *)part, y, nrows, npiece, npiece, (int64_t)1, k1,
                                                            mean_div);
  return LOOM_OK;
}

/* Whether the reduced axes all precede (leading) or all follow the kept ones (size-1 axes aside). */
static bool reduces_side(const loom_buf *x, uint32_t mask, bool leading) {
  bool other_seen = false;
  for (int i = 0; i < x->ndim; i++) {
    if (x->dims[i] == 1) continue;
    bool red = (mask & (1u << i)) != 0;
    if (red != leading) other_seen = true;
    else if (other_seen) return false;
  }
  return true;
}

/* Sum/mean/max/min/prod over leading axes with at least 32 rows: one pass
 * when a block of 32 x 32 threads suffices, else per-block partials in the
 * context's scratch and a second pass over them. */
template <typename T>
static loom_code reduce_cols(const loom_kctx *ctx, int kind, const T *x, T *y, int64_t R, int64_t inner) {
  const int64_t ROWS_PER_BLOCK = 4096;
  int k1 = kind == R_MEAN ? R_SUM : kind;
  int64_t mean_div = kind == R_MEAN ? R : 0;
  int64_t gy = (R + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
  if (gy > 128) gy = 128;
  int64_t rows_per = (R + gy - 1) / gy;
  unsigned gx = (unsigned)((inner + 31) / 32);
  cudaStream_t s = STREAM(ctx);
  if (gy == 1) {
    LOOM_LAUNCH(dim3(gx, 1), dim3(32, 32), 0, s, k_reduce_cols<T>)(x, y, R, inner, R, k1, mean_div);
    return LOOM_OK;
  }
  T *part = (T *)loom__cuda_scratch(CUCTX(ctx), (size_t)(gy * inner) * sizeof(T));
  if (!part) return loom_status_set(ctx->st, LOOM_RESOURCE_EXHAUSTED, "reduction: no device memory for partials");
  LOOM_LAUNCH(dim3(gx, (unsigned)gy), dim3(32, 32), 0, s, k_reduce_cols<T>)(x, part, R, inner, rows_per, k1, (int64_t)0);
  LOOM_LAUNCH(dim3(gx, 1), dim3(32, 32), 0, s, k_reduce_cols<T>)((const T *)part, y, gy, inner, gy, k1, mean_div);
  return LOOM_OK;
}

template <typename T> static loom_code reduce_run(const loom_kctx *ctx, int kind, const loom_buf *x, uint32_t mask) {
  loom_buf *y = ctx->out[0];
  int64_t nout = y->numel;
  if (nout == 0) return LOOM_OK;
  red_geom g;
  red_geom_init(&g, x, mask);
  int64_t count = 1;
  for (int i = 0; i < x->ndim; i++)
    if (mask & (1u << i)) count *= x->dims[i];
  cudaStream_t s = STREAM(ctx);
  if (count == 0) {
    T v;
    switch (kind) {
    case R_SUM: v = (T)0; break;
    case R_PROD: v = (T)1; break;
    case R_MEAN: v = nan_of<T>(); break;
    case R_LSE: v = (T)-INFINITY; break;
    default: {
      char b[160];
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,
                             "%s of an empty reduction: input shape %s has no elements along the reduced axes",
                             kind == R_MAX ? "Max" : "Min", loom__dims_str(b, sizeof b, x->ndim, x->dims));
    }
    }
    LOOM_LAUNCH(grid_for(nout), NT, 0, s, k_fill_red<T>)((T *)y->data, nout, v);
    return LOOM_OK;
  }
  if (g.R >= 32 && kind != R_LSE && nout > 1 && reduces_side(x, mask, true))
    return reduce_cols<T>(ctx, kind, (const T *)x->data, (T *)y->data, g.R, nout);
  if (g.R >= 32 && kind != R_LSE && reduces_side(x, mask, false))
    return reduce_rows<T>(ctx, kind, (const T *)x->data, (T *)y->data, nout, g.R);
  if (g.R >= 256 && nout < 8192)
    LOOM_LAUNCH((unsigned)(nout < 65535 * 8 ? nout : 65535 * 8), NT, 0, s, k_reduce_block<T>)((const T *)x->data, (T *)y->data,
                                                                                      nout, g, kind);
  else
    LOOM_LAUNCH(grid_for(nout), NT, 0, s, k_reduce_thread<T>)((const T *)x->data, (T *)y->data, nout, g, kind);
  return LOOM_OK;
}

template <typename T> static loom_code reduce_kernel(const loom_kctx *ctx, int kind) {
  uint32_t mask;
  int64_t bad = 0;
  if (loom__reduce_mask(ctx->attrs, ctx->in[0]->ndim, &mask, &bad))
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "invalid reduction axis %lld for an input of rank %d",
                           (long long)bad, (int)ctx->in[0]->ndim);
  return reduce_run<T>(ctx, kind, ctx->in[0], mask);
}
template <typename T> static loom_code sum_like_kernel(const loom_kctx *ctx) {
  const loom_buf *dy = ctx->in[0], *x = ctx->in[1];
  uint32_t mask;
  if (loom__sum_like_mask(dy->ndim, dy->dims, x->ndim, x->dims, &mask))
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "shapes do not broadcast");
  return reduce_run<T>(ctx, R_SUM, dy, mask);
}
template <typename T> static loom_code bias_grad_kernel(const loom_kctx *ctx) {
  const loom_buf *dy = ctx->in[0];
  uint32_t mask = dy->ndim ? (uint32_t)((1u << (dy->ndim - 1)) - 1) : 0;
  return reduce_run<T>(ctx, R_SUM, dy, mask);
}
#define RED_K(k, dt, T, KIND) \
  extern "C" loom_code loom__cu_##k##_##dt(const loom_kctx *ctx) { return reduce_kernel<T>(ctx, KIND); }
#define RED_NUM(k, KIND) RED_K(k, f32, float, KIND) RED_K(k, f64, double, KIND) RED_K(k, i32, int32_t, KIND) RED_K(k, i64, int64_t, KIND)
RED_NUM(sum, R_SUM)
RED_NUM(max, R_MAX)
RED_NUM(min, R_MIN)
RED_NUM(prod, R_PROD)
RED_K(mean, f32, float, R_MEAN)
RED_K(mean, f64, double, R_MEAN)
RED_K(logsumexp, f32, float, R_LSE)
RED_K(logsumexp, f64, double, R_LSE)
#define SL_K(dt, T)                                                                                               \
  extern "C" loom_code loom__cu_reduce_sum_like_##dt(const loom_kctx *ctx) { return sum_like_kernel<T>(ctx); } \
  extern "C" loom_code loom__cu_bias_add_grad_##dt(const loom_kctx *ctx) { return bias_grad_kernel<T>(ctx); }
SL_K(f32, float)
SL_K(f64, double)
SL_K(i32, int32_t)
SL_K(i64, int64_t)

/* ArgMax / ArgMin over attrs.axis: first index of the extreme value (NaN the most extreme). */
template <typename T>
__global__ void k_arg(const T *x, void *y, int i32, int is_min, int64_t outer, int64_t R, int64_t inner) {
  GRID_LOOP(o, outer * inner) {
    int64_t a = o / inner, b = o - a * inner;
    const T *p = x + a * R * inner + b;
    T best = p[0];
    int64_t bi = 0;
    for (int64_t r = 1; r < R; r++) {
      T v = p[r * inner];
      /* NaN beats everything (the first NaN wins), as on the CPU */
      if ((is_min ? v < best : v > best) || (v != v && best == best)) {
        best = v;
        bi = r;
      }
    }
    if (i32) ((int32_t *)y)[o] = (int32_t)bi;
    else ((int64_t *)y)[o] = bi;
  }
}
/* Rows along the last axis (class scores): one warp per row, lanes striding
 * it, then a shuffle combine where a tie goes to the lower index (the first
 * extreme, as the CPU; NaN the most extreme). */
template <typename T> __device__ __forceinline__ bool arg_beats(T v, T b, int is_min) {
  return (is_min ? v < b : v > b) || (v != v && b == b);
}
template <typename T> __global__ void k_arg_rows(const T *x, void *y, int i32, int is_min, int64_t rows, int64_t R) {
  int lane = threadIdx.x & 31;
  int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t o = w; o < rows; o += nw) { /* uniform per warp */
    const T *p = x + o * R;
    T best = p[0];
    int64_t bi = -1;
    for (int64_t r = lane; r < R; r += 32)
      if (bi < 0 || arg_beats(p[r], best, is_min)) {
        best = p[r];
        bi = r;
      }
    for (int off = 16; off; off >>= 1) {
      T ob = __shfl_down_sync(0xffffffffu, best, off);
      int64_t oi = __shfl_down_sync(0xffffffffu, bi, off);
      if (oi >= 0 && (bi < 0 || arg_beats(ob, best, is_min) || (!arg_beats(best, ob, is_min) && oi < bi))) {
        best = ob;
        bi = oi;
      }
    }
    if (lane == 0) {
      if (i32) ((int32_t *)y)[o] = (int32_t)bi;
      else ((int64_t *)y)[o] = bi;
    }
  }
}
template <typename T> static loom_code arg_kernel(const loom_kctx *ctx, int is_min) {
  const loom_buf *x = ctx->in[0];
  loom_buf *y = ctx->out[0];
  int64_t outer = 0, R = 0, inner = 1;
  loom_code rc = loom__arg_geom(ctx, is_min, &outer, &R, &inner);
  if (rc != LOOM_OK || outer == 0) return rc;
  if (inner == 1 && R >= 32) {
    LOOM_LAUNCH(warps_grid(outer), NT, 0, STREAM(ctx), k_arg_rows<T>)((const T *)x->data, y->data, y->dtype == LOOM_I32,
                                                                     is_min, outer, R);
    return LOOM_OK;
  }
  LOOM_LAUNCH(grid_for(outer * inner), NT, 0, STREAM(ctx), k_arg<T>)((const T *)x->data, y->data, y->dtype == LOOM_I32, is_min,
                                                            outer, R, inner);
  return LOOM_OK;
}
#define ARG_K(dt, T)                                                                                        \
  extern "C" loom_code loom__cu_argmax_##dt(const loom_kctx *ctx) { return arg_kernel<T>(ctx, 0); }       \
  extern "C" loom_code loom__cu_argmin_##dt(const loom_kctx *ctx) { return arg_kernel<T>(ctx, 1); }
ARG_K(f32, float)
ARG_K(f64, double)
ARG_K(i32, int32_t)
ARG_K(i64, int64_t)

/* ---- BiasAdd(value [..., C], bias [C]) ---- */
/* I: uint32_t below 2^31 elements (32-bit modulo: several times cheaper on a GPU than 64-bit) */
template <typename T, typename I> __global__ void k_bias_add(const T *x, const T *b, T *y, I n, I C) {
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) y[i] = x[i] + b[i % C];
}
template <typename T> static loom_code run_bias_add(const loom_kctx *ctx) {
  const loom_buf *x = ctx->in[0], *b = ctx->in[1];
  int64_t C = x->ndim ? x->dims[x->ndim - 1] : 1;
  if (b->numel != C)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "bias has %lld elements, the last dimension is %lld",
                           (long long)b->numel, (long long)C);
  int64_t n = ctx->out[0]->numel;
  if (n == 0) return LOOM_OK;
  if (n < ((int64_t)1 << 31))
    LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), k_bias_add<T, uint32_t>)((const T *)x->data, (const T *)b->data,
                                                                         (T *)ctx->out[0]->data, (uint32_t)n, (uint32_t)C);
  else
    LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), k_bias_add<T, int64_t>)((const T *)x->data, (const T *)b->data,
                                                                        (T *)ctx->out[0]->data, n, C);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_bias_add_f32(const loom_kctx *ctx) { return run_bias_add<float>(ctx); }
extern "C" loom_code loom__cu_bias_add_f64(const loom_kctx *ctx) { return run_bias_add<double>(ctx); }
extern "C" loom_code loom__cu_bias_add_i32(const loom_kctx *ctx) { return run_bias_add<int32_t>(ctx); }
extern "C" loom_code loom__cu_bias_add_i64(const loom_kctx *ctx) { return run_bias_add<int64_t>(ctx); }

