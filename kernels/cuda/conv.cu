/* kernels/cuda/conv.cu - CUDA kernels of the conv family (kernels/cpu/conv.c): Conv2D
 * and its backprops (im2col + cuBLAS, chunked through the context's scratch). */
#include <math.h>
#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/conv.h"
#include "kernels/geometry.h"

/* ======================================================== convolution */
/* (kernels/geometry.h) */
typedef loom_conv_geom cgeom;
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

extern "C" loom_code loom__cu_conv2d_f32(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *F = ctx->in[1];
  loom_buf *Y = ctx->out[0];
  if (Y->numel == 0) return LOOM_OK;
  cgeom g;
  loom__conv_geom_init(&g, ctx->attrs, X->dims, F->dims, Y->dims);
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
  loom__conv_geom_init(&g, ctx->attrs, DX->dims, F->dims, DY->dims);
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
  loom__conv_geom_init(&g, ctx->attrs, X->dims, DF->dims, DY->dims);
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
