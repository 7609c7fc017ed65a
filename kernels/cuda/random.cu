/* kernels/cuda/random.cu - CUDA kernels of the random family (kernels/cpu/random.c):
 * RandomUniform, RandomStandardNormal, TruncatedNormal, Dropout with the
 * CPU's Philox4x32-10 streams (kernels/cpu/random.c documents the layout):
 * the same (seed, seed2, run) gives the same numbers on both devices, up to
 * the last ulp of log/sin/cos in the normal transforms. */
#include <math.h>
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/random.h"
#include "base/philox.h"

/* ================================================================ random */
#define RUN_MIX 0x9E3779B97F4A7C15ull
struct rng {
  uint32_t k0, k1, s0, s1;
  double a, b;
};
static rng rng_init(const loom_kctx *ctx) {
  rng j;
  const loom_attrs *at = ctx->attrs;
  uint64_t run = ctx->counter ? *ctx->counter : 0;
  uint64_t s = at->seed2 + run * RUN_MIX;
  j.k0 = (uint32_t)at->seed;
  j.k1 = (uint32_t)(at->seed >> 32);
  j.s0 = (uint32_t)s;
  j.s1 = (uint32_t)(s >> 32);
  j.a = at->alpha;
  j.b = at->beta;
  return j;
}
/* Philox4x32-10 exactly as loom_philox4x32_10 (base/philox.h: same constants, same rounds). */
__device__ __forceinline__ void gen(const rng &j, uint64_t blk, uint32_t w[4]) {
  uint32_t c0 = (uint32_t)blk, c1 = (uint32_t)(blk >> 32), c2 = j.s0, c3 = j.s1;
  uint32_t k0 = j.k0, k1 = j.k1;
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r) {
      k0 += LOOM_PHILOX_W0;
      k1 += LOOM_PHILOX_W1;
    }
    uint32_t lo0 = LOOM_PHILOX_M0 * c0, hi0 = __umulhi(LOOM_PHILOX_M0, c0);
    uint32_t lo1 = LOOM_PHILOX_M1 * c2, hi1 = __umulhi(LOOM_PHILOX_M1, c2);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  w[0] = c0;
  w[1] = c1;
  w[2] = c2;
  w[3] = c3;
}
/* One thread per block of 4 (f32) or 2 (f64) elements. kind 0 uniform, 1 normal. */
__global__ void k_rand_f32(rng j, float *o, int64_t n, int kind) {
  float lo = (float)j.a, hi = (float)j.b, sc = (float)(j.b - j.a), top = nextafterf(hi, lo);
  GRID_LOOP(blk, (n + 3) / 4) {
    uint32_t w[4];
    float v[4];
    gen(j, (uint64_t)blk, w);
    if (kind == 0) {
      for (int k = 0; k < 4; k++) {
        v[k] = lo + sc * loom_philox_u24(w[k]);
        if (v[k] >= hi && hi > lo) v[k] = top;
      }
    } else {
      loom_box_muller_f32(w[0], w[1], &v[0], &v[1]);
      loom_box_muller_f32(w[2], w[3], &v[2], &v[3]);
      for (int k = 0; k < 4; k++) v[k] = lo + hi * v[k]; /* mean + sd * z */
    }
    for (int k = 0; k < 4; k++)
      if (blk * 4 + k < n) o[blk * 4 + k] = v[k];
  }
}
__global__ void k_rand_f64(rng j, double *o, int64_t n, int kind) {
  double lo = j.a, hi = j.b, sc = j.b - j.a, top = nextafter(hi, lo);
  GRID_LOOP(blk, (n + 1) / 2) {
    uint32_t w[4];
    double v[2];
    gen(j, (uint64_t)blk, w);
    if (kind == 0) {
      v[0] = lo + sc * loom_philox_u53(w[0], w[1]);
      v[1] = lo + sc * loom_philox_u53(w[2], w[3]);
      for (int k = 0; k < 2; k++)
        if (v[k] >= hi && hi > lo) v[k] = top;
    } else {
      loom_box_muller_f64(w, &v[0], &v[1]);
      v[0] = j.a + j.b * v[0];
      v[1] = j.a + j.b * v[1];
    }
    for (int k = 0; k < 2; k++)
      if (blk * 2 + k < n) o[blk * 2 + k] = v[k];
  }
}
#define TN_MAX_TRIES 64
__global__ void k_trunc_f32(rng j, float *o, int64_t n) {
  float mean = (float)j.a, sd = (float)j.b;
  GRID_LOOP(i, n) {
    float z = 0.0f;
    for (uint64_t a = 0; a < TN_MAX_TRIES; a++) {
      uint32_t w[4];
      float v[4];
      gen(j, (uint64_t)i + (a << 40), w);
      loom_box_muller_f32(w[0], w[1], &v[0], &v[1]);
      if (fabsf(v[0]) < 2.0f || fabsf(v[1]) < 2.0f) {
        z = fabsf(v[0]) < 2.0f ? v[0] : v[1];
        break;
      }
      loom_box_muller_f32(w[2], w[3], &v[2], &v[3]);
      if (fabsf(v[2]) < 2.0f || fabsf(v[3]) < 2.0f) {
        z = fabsf(v[2]) < 2.0f ? v[2] : v[3];
        break;
      }
    }
    o[i] = mean + sd * z;
  }
}
__global__ void k_trunc_f64(rng j, double *o, int64_t n) {
  GRID_LOOP(i, n) {
    double z = 0.0;
    for (uint64_t a = 0; a < TN_MAX_TRIES; a++) {
      uint32_t w[4];
      double v[2];
      gen(j, (uint64_t)i + (a << 40), w);
      loom_box_muller_f64(w, &v[0], &v[1]);
      if (fabs(v[0]) < 2.0) {
        z = v[0];
        break;
      }
      if (fabs(v[1]) < 2.0) {
        z = v[1];
        break;
      }
    }
    o[i] = j.a + j.b * z;
  }
}
template <typename T> __global__ void k_dropout(rng j, const T *x, T *y, T *m, int64_t n, unsigned long long thr, T scale) {
  GRID_LOOP(blk, (n + 3) / 4) {
    uint32_t w[4];
    gen(j, (uint64_t)blk, w);
    for (int k = 0; k < 4; k++) {
      int64_t i = blk * 4 + k;
      if (i >= n) break;
      T v = (unsigned long long)w[k] >= thr ? scale : (T)0;
      m[i] = v;
      y[i] = x[i] * v;
    }
  }
}
static void defaults01(rng *j) {
  if (j->a == 0 && j->b == 0) j->b = 1;
}
extern "C" loom_code loom__cu_random_uniform_f32(const loom_kctx *ctx) {
  rng j = rng_init(ctx);
  defaults01(&j);
  int64_t n = ctx->out[0]->numel;
  if (n) LOOM_LAUNCH(grid_for((n + 3) / 4), NT, 0, STREAM(ctx), k_rand_f32)(j, (float *)ctx->out[0]->data, n, 0);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_random_uniform_f64(const loom_kctx *ctx) {
  rng j = rng_init(ctx);
  defaults01(&j);
  int64_t n = ctx->out[0]->numel;
  if (n) LOOM_LAUNCH(grid_for((n + 1) / 2), NT, 0, STREAM(ctx), k_rand_f64)(j, (double *)ctx->out[0]->data, n, 0);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_random_normal_f32(const loom_kctx *ctx) {
  rng j = rng_init(ctx);
  defaults01(&j);
  int64_t n = ctx->out[0]->numel;
  if (n) LOOM_LAUNCH(grid_for((n + 3) / 4), NT, 0, STREAM(ctx), k_rand_f32)(j, (float *)ctx->out[0]->data, n, 1);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_random_normal_f64(const loom_kctx *ctx) {
  rng j = rng_init(ctx);
  defaults01(&j);
  int64_t n = ctx->out[0]->numel;
  if (n) LOOM_LAUNCH(grid_for((n + 1) / 2), NT, 0, STREAM(ctx), k_rand_f64)(j, (double *)ctx->out[0]->data, n, 1);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_truncated_normal_f32(const loom_kctx *ctx) {
  rng j = rng_init(ctx);
  defaults01(&j);
  int64_t n = ctx->out[0]->numel;
  if (n) LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), k_trunc_f32)(j, (float *)ctx->out[0]->data, n);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_truncated_normal_f64(const loom_kctx *ctx) {
  rng j = rng_init(ctx);
  defaults01(&j);
  int64_t n = ctx->out[0]->numel;
  if (n) LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), k_trunc_f64)(j, (double *)ctx->out[0]->data, n);
  return LOOM_OK;
}
template <typename T> static loom_code dropout(const loom_kctx *ctx) {
  rng j = rng_init(ctx);
  double rate = ctx->attrs->alpha;
  if (!(rate >= 0.0 && rate < 1.0))
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "dropout rate %g is not in [0, 1)", rate);
  unsigned long long thr = (unsigned long long)ceil(rate * 4294967296.0);
  int64_t n = ctx->out[0]->numel;
  if (n)
    LOOM_LAUNCH(grid_for((n + 3) / 4), NT, 0, STREAM(ctx), k_dropout<T>)(j, (const T *)ctx->in[0]->data, (T *)ctx->out[0]->data,
                                                                (T *)ctx->out[1]->data, n, thr, (T)(1.0 / (1.0 - rate)));
  return LOOM_OK;
}
extern "C" loom_code loom__cu_dropout_f32(const loom_kctx *ctx) { return dropout<float>(ctx); }
extern "C" loom_code loom__cu_dropout_f64(const loom_kctx *ctx) { return dropout<double>(ctx); }
