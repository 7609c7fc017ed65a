/* kernels/cuda/dense.cu - CUDA kernels: MatMul/BatchMatMul (cuBLAS),
 * reductions, ArgMax/ArgMin, Softmax/LogSoftmax and the softmax cross
 * entropies, Conv2D and its backprops (im2col + cuBLAS, chunked through the
 * context's scratch), pooling and its gradients, Gather, UnsortedSegmentSum.
 * Index inputs are not range-checked on the device: out-of-range indices are
 * skipped (gather writes zeros). */
#include <math.h>
#include <float.h>
#include "kernels/cuda/common.cuh"
#include "kernels/cpu/nn.h"

extern "C" int loom__reduce_mask(const loom_attrs *a, int ndim, uint32_t *mask, int64_t *bad);
extern "C" int loom__sum_like_mask(int ndy, const int64_t *dy, int nx, const int64_t *x, uint32_t *mask);

/* ================================================================ matmul */
static cublasStatus_t gemm_rm(cublasHandle_t h, int ta, int tb, int M, int N, int K, const float *A, const float *B,
                              float *C, float beta) {
  const float one = 1.0f;
  return cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B, tb ? K : N,
                     A, ta ? M : K, &beta, C, N);
}
static cublasStatus_t gemm_rm(cublasHandle_t h, int ta, int tb, int M, int N, int K, const double *A,
                              const double *B, double *C, double beta) {
  const double one = 1.0;
  return cublasDgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B, tb ? K : N,
                     A, ta ? M : K, &beta, C, N);
}
static cublasStatus_t gemm_strided(cublasHandle_t h, int ta, int tb, int M, int N, int K, const float *A, long long sA,
                                   const float *B, long long sB, float *C, long long sC, int batches) {
  const float one = 1.0f, zero = 0.0f;
  return cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one,
                                   B, tb ? K : N, sB, A, ta ? M : K, sA, &zero, C, N, sC, batches);
}
static cublasStatus_t gemm_strided(cublasHandle_t h, int ta, int tb, int M, int N, int K, const double *A,
                                   long long sA, const double *B, long long sB, double *C, long long sC, int batches) {
  const double one = 1.0, zero = 0.0;
  return cublasDgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one,
                                   B, tb ? K : N, sB, A, ta ? M : K, sA, &zero, C, N, sC, batches);
}

static loom_code blas_fail(const loom_kctx *ctx, cublasStatus_t s) {
  return loom_status_set(ctx->st, s == CUBLAS_STATUS_ALLOC_FAILED ? LOOM_RESOURCE_EXHAUSTED : LOOM_INTERNAL,
                         "cuBLAS error %d", (int)s);
}

static loom_code mm_dims(const loom_kctx *ctx, int64_t *M, int64_t *N, int64_t *K) {
  const loom_buf *a = ctx->in[0], *b = ctx->in[1];
  int ta = ctx->attrs->transpose_a, tb = ctx->attrs->transpose_b;
  if (a->ndim < 2 || b->ndim < 2)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "inputs must have rank >= 2, got ranks %d and %d",
                           (int)a->ndim, (int)b->ndim);
  int64_t ar = a->dims[a->ndim - 2], ac = a->dims[a->ndim - 1];
  int64_t br = b->dims[b->ndim - 2], bc = b->dims[b->ndim - 1];
  *M = ta ? ac : ar;
  *K = ta ? ar : ac;
  *N = tb ? br : bc;
  int64_t K2 = tb ? bc : br;
  if (*K != K2)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "inner dimensions %lld and %lld differ", (long long)*K,
                           (long long)K2);
  if (*M > INT32_MAX || *N > INT32_MAX || *K > INT32_MAX)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "matrix dimensions exceed the cuBLAS integer range");
  return LOOM_OK;
}

template <typename T> static loom_code run_matmul(const loom_kctx *ctx) {
  int64_t M, N, K;
  loom_code rc = mm_dims(ctx, &M, &N, &K);
  if (rc) return rc;
  loom_buf *y = ctx->out[0];
  if (y->numel == 0) return LOOM_OK;
  if (K == 0) {
    cudaMemsetAsync(y->data, 0, (size_t)y->numel * sizeof(T), STREAM(ctx));
    return LOOM_OK;
  }
  cublasStatus_t s = gemm_rm(CUCTX(ctx)->blas, ctx->attrs->transpose_a, ctx->attrs->transpose_b, (int)M, (int)N,
                             (int)K, (const T *)ctx->in[0]->data, (const T *)ctx->in[1]->data, (T *)y->data, (T)0);
  return s == CUBLAS_STATUS_SUCCESS ? LOOM_OK : blas_fail(ctx, s);
}

template <typename T> static loom_code run_batch_matmul(const loom_kctx *ctx) {
  const loom_buf *a = ctx->in[0], *b = ctx->in[1];
  loom_buf *y = ctx->out[0];
  int ta = ctx->attrs->transpose_a, tb = ctx->attrs->transpose_b;
  int64_t M, N, K;
  loom_code rc = mm_dims(ctx, &M, &N, &K);
  if (rc) return rc;
  if (y->numel == 0) return LOOM_OK;
  if (K == 0) {
    cudaMemsetAsync(y->data, 0, (size_t)y->numel * sizeof(T), STREAM(ctx));
    return LOOM_OK;
  }
  int nbo = y->ndim - 2, nba = a->ndim - 2, nbb = b->ndim - 2;
  int64_t sa[LOOM_MAX_DIMS], sb[LOOM_MAX_DIMS], idx[LOOM_MAX_DIMS];
  int64_t batches = 1, ba = 1, bb = 1;
  for (int i = nbo - 1; i >= 0; i--) {
    int ia = i - (nbo - nba), ib = i - (nbo - nbb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    sa[i] = da == 1 ? 0 : ba;
    sb[i] = db == 1 ? 0 : bb;
    ba *= da;
    bb *= db;
    batches *= y->dims[i];
    idx[i] = 0;
  }
  const T *A = (const T *)a->data, *B = (const T *)b->data;
  T *C = (T *)y->data;
  cublasHandle_t h = CUCTX(ctx)->blas;
  cublasStatus_t s;
  if ((ba == batches || ba == 1) && (bb == batches || bb == 1) && batches <= INT32_MAX) {
    s = gemm_strided(h, ta, tb, (int)M, (int)N, (int)K, A, ba == 1 ? 0 : M * K, B, bb == 1 ? 0 : K * N, C, M * N,
                     (int)batches);
    return s == CUBLAS_STATUS_SUCCESS ? LOOM_OK : blas_fail(ctx, s);
  }
  /* partial broadcasting: one strided-batched call per index of the outer
   * batch dims, over the innermost batch dim (its stride 0 when broadcast) */
  int last = nbo - 1;
  int64_t inner = y->dims[last], outer = batches / inner, oa = 0, ob = 0;
  if (inner > INT32_MAX) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "batch dimension exceeds the cuBLAS range");
  for (int64_t t = 0; t < outer; t++) {
    s = gemm_strided(h, ta, tb, (int)M, (int)N, (int)K, A + oa * M * K, sa[last] * M * K, B + ob * K * N,
                     sb[last] * K * N, C + t * inner * M * N, M * N, (int)inner);
    if (s != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, s);
    for (int d = last - 1; d >= 0; d--) {
      idx[d]++;
      oa += sa[d];
      ob += sb[d];
      if (idx[d] < y->dims[d]) break;
      oa -= sa[d] * y->dims[d];
      ob -= sb[d] * y->dims[d];
      idx[d] = 0;
    }
  }
  return LOOM_OK;
}
extern "C" loom_code loom__cu_matmul_f32(const loom_kctx *ctx) { return run_matmul<float>(ctx); }
extern "C" loom_code loom__cu_matmul_f64(const loom_kctx *ctx) { return run_matmul<double>(ctx); }
extern "C" loom_code loom__cu_batch_matmul_f32(const loom_kctx *ctx) { return run_batch_matmul<float>(ctx); }
extern "C" loom_code loom__cu_batch_matmul_f64(const loom_kctx *ctx) { return run_batch_matmul<double>(ctx); }

/* ============================================================ reductions */
extern "C" const char *loom__dims_str(char *buf, size_t cap, int ndim, const int64_t *dims); /* engine */
enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_LSE };

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
template <typename T> __device__ __forceinline__ T red_init(int kind) {
  switch (kind) {
  case R_MAX: return (T)-INFINITY;
  case R_MIN: return (T)INFINITY;
  case R_PROD: return (T)1;
  default: return (T)0;
  }
}
template <> __device__ __forceinline__ int32_t red_init<int32_t>(int kind) {
  return kind == R_MAX ? INT32_MIN : kind == R_MIN ? INT32_MAX : kind == R_PROD ? 1 : 0;
}
template <> __device__ __forceinline__ int64_t red_init<int64_t>(int kind) {
  return kind == R_MAX ? INT64_MIN : kind == R_MIN ? INT64_MAX : kind == R_PROD ? 1 : 0;
}
template <typename T> __device__ __forceinline__ T red_comb(int kind, T a, T b) {
  switch (kind) {
  /* the running value a stays unless b strictly beats it (NaN beats all), as on the CPU */
  case R_MAX: return (b > a || (b != b && a == a)) ? b : a;
  case R_MIN: return (b < a || (b != b && a == a)) ? b : a;
  case R_PROD: return a * b;
  default: return a + b;
  }
}
__device__ __forceinline__ float d_expx(float x) { return expf(x); }
__device__ __forceinline__ double d_expx(double x) { return exp(x); }
__device__ __forceinline__ float d_logx(float x) { return logf(x); }
__device__ __forceinline__ double d_logx(double x) { return log(x); }
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
template <typename T> __device__ T block_reduce(int kind, T v, T *sh) {
  for (int off = 16; off > 0; off >>= 1) v = red_comb(kind, v, __shfl_down_sync(0xffffffffu, v, off));
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < (int)(blockDim.x >> 5) ? sh[lane] : red_init<T>(kind);
    for (int off = 16; off > 0; off >>= 1) v = red_comb(kind, v, __shfl_down_sync(0xffffffffu, v, off));
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  v = sh[0];
  __syncthreads();
  return v;
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

/* Blocks of NT threads for one warp per row. */
static unsigned warps_grid(int64_t rows) {
  int64_t b = (rows * 32 + NT - 1) / NT;
  return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
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
  int64_t axis = ctx->attrs->axis;
  if (axis < 0) axis += x->ndim;
  if (axis < 0 || axis >= x->ndim)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "axis %lld is out of range for an input of rank %d",
                           (long long)ctx->attrs->axis, (int)x->ndim);
  if (y->numel == 0) return LOOM_OK;
  int64_t outer = 1, inner = 1, R = x->dims[axis];
  for (int i = 0; i < axis; i++) outer *= x->dims[i];
  for (int i = (int)axis + 1; i < x->ndim; i++) inner *= x->dims[i];
  if (R == 0) {
    char b[160];
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "%s over an empty axis %lld of input shape %s",
                           is_min ? "ArgMin" : "ArgMax", (long long)axis, loom__dims_str(b, sizeof b, x->ndim, x->dims));
  }
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

/* ======================================================== convolution */
struct cgeom {
  int64_t N, H, W, C, KH, KW, O, OH, OW, sh, sw, dh, dw, pt, pl, K, M;
};
static int64_t a1(int64_t v) { return v >= 1 ? v : 1; }
static void cgeom_init(cgeom *g, const loom_attrs *a, const int64_t *xd, const int64_t *fd, const int64_t *yd) {
  g->N = xd[0];
  g->H = xd[1];
  g->W = xd[2];
  g->C = xd[3];
  g->KH = fd[0];
  g->KW = fd[1];
  g->O = fd[3];
  g->OH = yd[1];
  g->OW = yd[2];
  g->sh = a1(a->strides[1]);
  g->sw = a1(a->strides[2]);
  g->dh = a1(a->dilations[1]);
  g->dw = a1(a->dilations[2]);
  loom__conv_out_size(g->H, g->KH, g->sh, g->dh, a->padding, &g->pt);
  loom__conv_out_size(g->W, g->KW, g->sw, g->dw, a->padding, &g->pl);
  g->K = g->KH * g->KW * g->C;
  g->M = g->N * g->OH * g->OW;
}
/* col[r - r0][(kh, kw, c)] for output rows [r0, r0 + m). */
/* Index type I: uint32_t when every index of the launch fits 31 bits
 * (conv_idx32), so the per-element divisions are 32-bit, several times
 * cheaper on a GPU than 64-bit; int64_t otherwise. */
template <typename I> __global__ void k_im2col(const float *x, float *col, cgeom g, I r0, I m) {
  const I K = (I)g.K, C = (I)g.C, KW = (I)g.KW, OW = (I)g.OW, OH = (I)g.OH;
  const I n_el = m * K, step = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n_el; i += step) {
    I r = i / K, k = i - r * K;
    I t = k / C, c = k - t * C, kh = t / KW, kw = t - kh * KW;
    I rr = r0 + r, t2 = rr / OW, ow = rr - t2 * OW, n = t2 / OH, oh = t2 - n * OH;
    int64_t ih = (int64_t)oh * g.sh - g.pt + (int64_t)kh * g.dh, iw = (int64_t)ow * g.sw - g.pl + (int64_t)kw * g.dw;
    col[i] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? x[(((I)n * (I)g.H + (I)ih) * (I)g.W + (I)iw) * C + c] : 0.0f;
  }
}
/* dx[n, ih, iw, c] += the col entries of output rows [r0, r0 + m) that read
 * it: one thread per input element gathers over the (kh, kw) taps whose
 * window covers it (no atomics: deterministic, and no contention). */
template <typename I> __global__ void k_col2im(const float *col, float *dx, cgeom g, I r0, I m) {
  const I C = (I)g.C, W = (I)g.W, H = (I)g.H, nin = (I)(g.N * g.H * g.W * g.C), step = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < nin; i += step) {
    I t = i / C, c = i - t * C, t2 = t / W, iw = t - t2 * W, n = t2 / H, ih = t2 - n * H;
    float acc = 0.0f;
    for (int64_t kh = 0; kh < g.KH; kh++) {
      int64_t yy = (int64_t)ih + g.pt - kh * g.dh; /* = oh * sh */
      if (yy < 0 || yy % g.sh) continue;
      int64_t oh = yy / g.sh;
      if (oh >= g.OH) continue;
      for (int64_t kw = 0; kw < g.KW; kw++) {
        int64_t xx = (int64_t)iw + g.pl - kw * g.dw;
        if (xx < 0 || xx % g.sw) continue;
        int64_t ow = xx / g.sw;
        if (ow >= g.OW) continue;
        I rr = ((I)n * (I)g.OH + (I)oh) * (I)g.OW + (I)ow;
        if (rr < r0 || rr >= r0 + m) continue;
        acc += col[(rr - r0) * (I)g.K + ((I)kh * (I)g.KW + (I)kw) * C + c];
      }
    }
    dx[i] += acc;
  }
}
/* Whether a conv's indices (input, output rows x K, chunk) all fit 31 bits. */
static bool conv_idx32(const cgeom *g, int64_t rows) {
#ifdef LOOM_CUDA_CONV_IDX64 /* test-only: force the 64-bit path */
  (void)g;
  (void)rows;
  return false;
#endif
  const int64_t lim = (int64_t)1 << 31;
  return g->N * g->H * g->W * g->C < lim && g->M * g->K < lim && rows * g->K < lim && g->M < lim;
}
/* im2col of rows [r0, r0 + m) in the index type that fits. */
static void launch_im2col(cudaStream_t s, const float *x, float *col, const cgeom &g, int64_t r0, int64_t m) {
  if (conv_idx32(&g, m))
    LOOM_LAUNCH(grid_for(m * g.K), NT, 0, s, k_im2col<uint32_t>)(x, col, g, (uint32_t)r0, (uint32_t)m);
  else
    LOOM_LAUNCH(grid_for(m * g.K), NT, 0, s, k_im2col<int64_t>)(x, col, g, r0, m);
}
#ifndef LOOM_CUDA_COL_BYTES
#define LOOM_CUDA_COL_BYTES ((int64_t)256 << 20) /* im2col scratch per chunk of output rows */
#endif
#define COL_BYTES LOOM_CUDA_COL_BYTES
static int64_t chunk_rows(const cgeom *g) {
  int64_t r = COL_BYTES / (g->K * (int64_t)sizeof(float) > 0 ? g->K * (int64_t)sizeof(float) : 1);
  if (r < 1) r = 1;
  if (r > g->M) r = g->M;
  if (r > INT32_MAX / (g->K > 0 ? g->K : 1)) r = INT32_MAX / (g->K > 0 ? g->K : 1);
  return r;
}
static loom_code no_scratch(const loom_kctx *ctx, size_t n) {
  return loom_status_set(ctx->st, LOOM_RESOURCE_EXHAUSTED, "cannot allocate %zu bytes of device scratch", n);
}

extern "C" loom_code loom__cu_conv2d_f32(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *F = ctx->in[1];
  loom_buf *Y = ctx->out[0];
  if (Y->numel == 0) return LOOM_OK;
  cgeom g;
  cgeom_init(&g, ctx->attrs, X->dims, F->dims, Y->dims);
  cudaStream_t s = STREAM(ctx);
  if (g.K == 0) {
    cudaMemsetAsync(Y->data, 0, (size_t)Y->numel * sizeof(float), s);
    return LOOM_OK;
  }
  cublasHandle_t h = CUCTX(ctx)->blas;
  const float *x = (const float *)X->data, *f = (const float *)F->data;
  float *y = (float *)Y->data;
  if (g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.M <= INT32_MAX) { /* pointwise */
    cublasStatus_t st = gemm_rm(h, 0, 0, (int)g.M, (int)g.O, (int)g.C, x, f, y, 0.0f);
    return st == CUBLAS_STATUS_SUCCESS ? LOOM_OK : blas_fail(ctx, st);
  }
  int64_t R = chunk_rows(&g);
  size_t need = (size_t)R * (size_t)g.K * sizeof(float);
  float *col = (float *)loom__cuda_scratch(CUCTX(ctx), need);
  if (!col) return no_scratch(ctx, need);
  for (int64_t r0 = 0; r0 < g.M; r0 += R) {
    int64_t m = g.M - r0 < R ? g.M - r0 : R;
    launch_im2col(s, x, col, g, r0, m);
    cublasStatus_t st = gemm_rm(h, 0, 0, (int)m, (int)g.O, (int)g.K, col, f, y + r0 * g.O, 0.0f);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, st);
  }
  return LOOM_OK;
}

extern "C" loom_code loom__cu_conv2d_backprop_input_f32(const loom_kctx *ctx) {
  const loom_buf *F = ctx->in[0], *DY = ctx->in[1];
  loom_buf *DX = ctx->out[0];
  if (DX->numel == 0) return LOOM_OK;
  cgeom g;
  cgeom_init(&g, ctx->attrs, DX->dims, F->dims, DY->dims);
  cudaStream_t s = STREAM(ctx);
  cudaMemsetAsync(DX->data, 0, (size_t)DX->numel * sizeof(float), s);
  if (g.K == 0 || g.M == 0 || g.O == 0) return LOOM_OK;
  cublasHandle_t h = CUCTX(ctx)->blas;
  int64_t R = chunk_rows(&g);
  size_t need = (size_t)R * (size_t)g.K * sizeof(float);
  float *col = (float *)loom__cuda_scratch(CUCTX(ctx), need);
  if (!col) return no_scratch(ctx, need);
  const float *f = (const float *)F->data, *dy = (const float *)DY->data;
  for (int64_t r0 = 0; r0 < g.M; r0 += R) {
    int64_t m = g.M - r0 < R ? g.M - r0 : R;
    /* dcol [m, K] = dy [m, O] x F^T [O, K] */
    cublasStatus_t st = gemm_rm(h, 0, 1, (int)m, (int)g.K, (int)g.O, dy + r0 * g.O, f, col, 0.0f);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, st);
    if (conv_idx32(&g, m))
      LOOM_LAUNCH(grid_for(DX->numel), NT, 0, s, k_col2im<uint32_t>)(col, (float *)DX->data, g, (uint32_t)r0, (uint32_t)m);
    else
      LOOM_LAUNCH(grid_for(DX->numel), NT, 0, s, k_col2im<int64_t>)(col, (float *)DX->data, g, r0, m);
  }
  return LOOM_OK;
}

extern "C" loom_code loom__cu_conv2d_backprop_filter_f32(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *DY = ctx->in[1];
  loom_buf *DF = ctx->out[0];
  if (DF->numel == 0) return LOOM_OK;
  cgeom g;
  cgeom_init(&g, ctx->attrs, X->dims, DF->dims, DY->dims);
  cudaStream_t s = STREAM(ctx);
  if (g.M == 0) {
    cudaMemsetAsync(DF->data, 0, (size_t)DF->numel * sizeof(float), s);
    return LOOM_OK;
  }
  cublasHandle_t h = CUCTX(ctx)->blas;
  int64_t R = chunk_rows(&g);
  size_t need = (size_t)R * (size_t)g.K * sizeof(float);
  float *col = (float *)loom__cuda_scratch(CUCTX(ctx), need);
  if (!col) return no_scratch(ctx, need);
  const float *x = (const float *)X->data, *dy = (const float *)DY->data;
  for (int64_t r0 = 0; r0 < g.M; r0 += R) {
    int64_t m = g.M - r0 < R ? g.M - r0 : R;
    launch_im2col(s, x, col, g, r0, m);
    /* dF [K, O] (+)= col^T [K, m] x dy [m, O] */
    cublasStatus_t st =
        gemm_rm(h, 1, 0, (int)g.K, (int)g.O, (int)m, col, dy + r0 * g.O, (float *)DF->data, r0 ? 1.0f : 0.0f);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, st);
  }
  return LOOM_OK;
}

/* ============================================================ pooling */
struct pgeom {
  int64_t N, H, W, C, OH, OW, kh, kw, sh, sw, pt, pl;
};
static void pgeom_init(pgeom *g, const loom_attrs *a, const int64_t *xd, const int64_t *yd) {
  g->N = xd[0];
  g->H = xd[1];
  g->W = xd[2];
  g->C = xd[3];
  g->OH = yd[1];
  g->OW = yd[2];
  g->kh = a1(a->ksize[1]);
  g->kw = a1(a->ksize[2]);
  g->sh = a1(a->strides[1]);
  g->sw = a1(a->strides[2]);
  loom__conv_out_size(g->H, g->kh, g->sh, 1, a->padding, &g->pt);
  loom__conv_out_size(g->W, g->kw, g->sw, 1, a->padding, &g->pl);
}
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
  pgeom_init(&g, ctx->attrs, ctx->in[0]->dims, Y->dims);
  int mode = 0;
  POOL_LAUNCH(k_pool, Y->numel, (const float *)ctx->in[0]->data, (float *)Y->data, g);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_avg_pool_f32(const loom_kctx *ctx) {
  loom_buf *Y = ctx->out[0];
  if (Y->numel == 0) return LOOM_OK;
  pgeom g;
  pgeom_init(&g, ctx->attrs, ctx->in[0]->dims, Y->dims);
  int mode = 1;
  POOL_LAUNCH(k_pool, Y->numel, (const float *)ctx->in[0]->data, (float *)Y->data, g);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_max_pool_grad_f32(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *DY = ctx->in[2];
  loom_buf *DX = ctx->out[0];
  if (DX->numel == 0) return LOOM_OK;
  pgeom g;
  pgeom_init(&g, ctx->attrs, X->dims, DY->dims);
  int mode = 0;
  POOL_LAUNCH(k_pool_grad, DX->numel, (const float *)X->data, (const float *)DY->data, (float *)DX->data, g);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_avg_pool_grad_f32(const loom_kctx *ctx) {
  const loom_buf *DY = ctx->in[0];
  loom_buf *DX = ctx->out[0];
  if (DX->numel == 0) return LOOM_OK;
  pgeom g;
  pgeom_init(&g, ctx->attrs, DX->dims, DY->dims);
  int mode = 1;
  POOL_LAUNCH(k_pool_grad, DX->numel, (const float *)NULL, (const float *)DY->data, (float *)DX->data, g);
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
