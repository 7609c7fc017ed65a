/* kernels/cuda/reduce.cuh - reduction device helpers (combine, block
 * reduction, warp-per-row grid) shared by kernels/cuda/reduce.cu and nn.cu. */
#ifndef LOOM_CUDA_REDUCE_CUH
#define LOOM_CUDA_REDUCE_CUH
#include <math.h>
#include "kernels/cuda/common.cuh"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_LSE };
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

/* Blocks of NT threads for one warp per row. */
static unsigned warps_grid(int64_t rows) {
  int64_t b = (rows * 32 + NT - 1) / NT;
  return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

#endif
