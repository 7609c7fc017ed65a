/* kernels/cuda/train.cu - CUDA kernels of the train and random families:
 * dense optimizer updates (TF's training_ops formulas, as
 * kernels/cpu/optim.c; hyperparameters are read from their device scalars
 * inside the kernel, so nothing waits on the host), SparseApplyGradientDescent
 * (atomic adds: repeated indices sum like the CPU's pre-summing, up to
 * rounding order), Assign/AssignAdd/Sub/Mul, and the random ops with the
 * CPU's Philox4x32-10 streams (kernels/cpu/random.c documents the layout):
 * the same (seed, seed2, run) gives the same numbers on both devices, up to
 * the last ulp of log/sin/cos in the normal transforms. */
#include <math.h>
#include "kernels/cuda/common.cuh"
#include "base/philox.h"

/* ============================================================ optimizers */
enum { OPT_GD, OPT_MOMENTUM, OPT_ADAGRAD, OPT_ADAM, OPT_FTRL, OPT_RMSPROP, OPT_CRMSPROP, OPT_ADADELTA };
struct opt_ptrs {
  float *var, *s0, *s1, *s2;
  const float *g;
  const float *h[6]; /* device scalars, meaning per kind (see the kernels below) */
  int flag;
};
__global__ void k_opt(opt_ptrs a, int kind, int64_t n) {
  float h0 = a.h[0] ? *a.h[0] : 0.f, h1 = a.h[1] ? *a.h[1] : 0.f, h2 = a.h[2] ? *a.h[2] : 0.f;
  float h3 = a.h[3] ? *a.h[3] : 0.f, h4 = a.h[4] ? *a.h[4] : 0.f, h5 = a.h[5] ? *a.h[5] : 0.f;
  GRID_LOOP(i, n) {
    float gi = a.g[i];
    switch (kind) {
    case OPT_GD: a.var[i] -= h0 * gi; break;
    case OPT_MOMENTUM: { /* h0 lr, h1 momentum */
      float acc = a.s0[i] * h1 + gi;
      a.s0[i] = acc;
      a.var[i] -= a.flag ? gi * h0 + acc * h1 * h0 : h0 * acc;
      break;
    }
    case OPT_ADAGRAD: {
      float acc = a.s0[i] + gi * gi;
      a.s0[i] = acc;
      a.var[i] -= h0 * gi / sqrtf(acc);
      break;
    }
    case OPT_ADAM: { /* h0 b1p, h1 b2p, h2 lr, h3 b1, h4 b2, h5 eps */
      float alpha = h2 * sqrtf(1.0f - h1) / (1.0f - h0), b1 = h3, ob1 = 1.0f - h3, ob2 = 1.0f - h4;
      float mi = a.s0[i] + (gi - a.s0[i]) * ob1;
      float vi = a.s1[i] + (gi * gi - a.s1[i]) * ob2;
      a.s0[i] = mi;
      a.s1[i] = vi;
      a.var[i] -= a.flag ? ((gi * ob1 + b1 * mi) * alpha) / (sqrtf(vi) + h5) : (mi * alpha) / (sqrtf(vi) + h5);
      break;
    }
    case OPT_FTRL: { /* h0 lr, h1 l1, h2 l2, h3 shrinkage, h4 lr_power */
      float l1 = h1, l2x2 = 2.0f * h2, shr2 = 2.0f * h3, p = h4, lr = h0;
      float vi = a.var[i], ai = a.s0[i];
      float gs = gi + shr2 * vi;
      float na = ai + gi * gi;
      float pna = p == -0.5f ? sqrtf(na) : powf(na, -p);
      float pa = p == -0.5f ? sqrtf(ai) : powf(ai, -p);
      float li = a.s1[i] + gs - (pna - pa) / lr * vi;
      a.s1[i] = li;
      float y = pna / lr + l2x2;
      float x = (li > 0.0f ? l1 : (li < 0.0f ? -l1 : 0.0f)) - li;
      a.var[i] = fabsf(li) > l1 ? x / y : 0.0f;
      a.s0[i] = na;
      break;
    }
    case OPT_RMSPROP: { /* h0 lr, h1 rho, h2 momentum, h3 eps */
      float s = a.s0[i] + (gi * gi - a.s0[i]) * (1.0f - h1);
      a.s0[i] = s;
      float mo = a.s1[i] * h2 + (gi * h0) / sqrtf(s + h3);
      a.s1[i] = mo;
      a.var[i] -= mo;
      break;
    }
    case OPT_CRMSPROP: {
      float orho = 1.0f - h1;
      float mg = a.s0[i] + (gi - a.s0[i]) * orho;
      float s = a.s1[i] + (gi * gi - a.s1[i]) * orho;
      a.s0[i] = mg;
      a.s1[i] = s;
      float mo = a.s2[i] * h2 + (gi * h0) / sqrtf((s - mg * mg) + h3);
      a.s2[i] = mo;
      a.var[i] -= mo;
      break;
    }
    case OPT_ADADELTA: { /* h0 lr, h1 rho, h2 eps */
      float acc = a.s0[i] * h1 + gi * gi * (1.0f - h1);
      a.s0[i] = acc;
      float upd = sqrtf(a.s1[i] + h2) / sqrtf(acc + h2) * gi;
      a.var[i] -= upd * h0;
      a.s1[i] = a.s1[i] * h1 + upd * upd * (1.0f - h1);
      break;
    }
    default: break;
    }
  }
}
static float *fp(const loom_kctx *ctx, int i) { return (float *)ctx->in[i]->data; }
static loom_code run_opt(const loom_kctx *ctx, int kind, opt_ptrs *a, int gi, int nstate, const int *hs, int nh) {
  a->var = fp(ctx, 0);
  a->s0 = nstate > 0 ? fp(ctx, 1) : NULL;
  a->s1 = nstate > 1 ? fp(ctx, 2) : NULL;
  a->s2 = nstate > 2 ? fp(ctx, 3) : NULL;
  a->g = fp(ctx, gi);
  for (int k = 0; k < 6; k++) a->h[k] = k < nh ? fp(ctx, hs[k]) : NULL;
  int64_t n = ctx->in[0]->numel;
  if (n > 0) LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), k_opt)(*a, kind, n);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_apply_gradient_descent_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {1}; /* var, alpha, delta */
  return run_opt(ctx, OPT_GD, &a, 2, 0, h, 1);
}
extern "C" loom_code loom__cu_apply_momentum_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  a.flag = (int)(ctx->attrs->num & 1);
  static const int h[] = {2, 4}; /* var, accum, lr, grad, momentum */
  return run_opt(ctx, OPT_MOMENTUM, &a, 3, 1, h, 2);
}
extern "C" loom_code loom__cu_apply_adagrad_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {2}; /* var, accum, lr, grad */
  return run_opt(ctx, OPT_ADAGRAD, &a, 3, 1, h, 1);
}
extern "C" loom_code loom__cu_apply_adam_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  a.flag = (int)(ctx->attrs->num & 1);
  static const int h[] = {3, 4, 5, 6, 7, 8}; /* var, m, v, b1p, b2p, lr, b1, b2, eps, grad */
  return run_opt(ctx, OPT_ADAM, &a, 9, 2, h, 6);
}
extern "C" loom_code loom__cu_apply_ftrl_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {4, 5, 6, 7, 8}; /* var, accum, linear, grad, lr, l1, l2, shrinkage, lr_power */
  return run_opt(ctx, OPT_FTRL, &a, 3, 2, h, 5);
}
extern "C" loom_code loom__cu_apply_rmsprop_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {3, 4, 5, 6}; /* var, ms, mom, lr, rho, momentum, eps, grad */
  return run_opt(ctx, OPT_RMSPROP, &a, 7, 2, h, 4);
}
extern "C" loom_code loom__cu_apply_centered_rmsprop_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {4, 5, 6, 7}; /* var, mg, ms, mom, lr, rho, momentum, eps, grad */
  return run_opt(ctx, OPT_CRMSPROP, &a, 8, 3, h, 4);
}
extern "C" loom_code loom__cu_apply_adadelta_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {3, 4, 5}; /* var, accum, accum_update, lr, rho, eps, grad */
  return run_opt(ctx, OPT_ADADELTA, &a, 6, 2, h, 3);
}


/* ============================================================ assignment */
template <typename T, typename U> __global__ void k_assign_ew(T *x, const T *y, int64_t n, int op) {
  GRID_LOOP(i, n) {
    if (op == 0) x[i] = (T)((U)x[i] + (U)y[i]);
    else if (op == 1) x[i] = (T)((U)x[i] - (U)y[i]);
    else x[i] = (T)((U)x[i] * (U)y[i]);
  }
}
static loom_code assign_ew(const loom_kctx *ctx, int op) {
  const loom_buf *ref = ctx->in[0], *val = ctx->in[1];
  int64_t n = ref->numel;
  if (n == 0) return LOOM_OK;
  cudaStream_t s = STREAM(ctx);
  switch (ref->dtype) {
  case LOOM_F32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<float, float>)((float *)ref->data, (const float *)val->data, n, op); break;
  case LOOM_F64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<double, double>)((double *)ref->data, (const double *)val->data, n, op); break;
  case LOOM_I32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<int32_t, uint32_t>)((int32_t *)ref->data, (const int32_t *)val->data, n, op); break;
  case LOOM_I64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<int64_t, uint64_t>)((int64_t *)ref->data, (const int64_t *)val->data, n, op); break;
  case LOOM_U8: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<uint8_t, uint8_t>)((uint8_t *)ref->data, (const uint8_t *)val->data, n, op); break;
  default: return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA kernel for %s", loom_dtype_name(ref->dtype));
  }
  return LOOM_OK;
}
extern "C" loom_code loom__cu_assign_any(const loom_kctx *ctx) {
  const loom_buf *ref = ctx->in[0], *val = ctx->in[1];
  size_t nbytes = (size_t)ref->numel * loom_dtype_size(ref->dtype);
  if (!nbytes || ref->data == val->data) return LOOM_OK;
  cudaMemcpyAsync(ref->data, val->data, nbytes, cudaMemcpyDeviceToDevice, STREAM(ctx));
  return LOOM_OK;
}
extern "C" loom_code loom__cu_assign_add_any(const loom_kctx *ctx) { return assign_ew(ctx, 0); }
extern "C" loom_code loom__cu_assign_sub_any(const loom_kctx *ctx) { return assign_ew(ctx, 1); }
extern "C" loom_code loom__cu_assign_mul_any(const loom_kctx *ctx) { return assign_ew(ctx, 2); }

/* ================================================================ random */
#define RUN_MIX 0x9E3779B97F4A7C15ull
#define TWO_PI 6.283185307179586476925286766559
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
__device__ __forceinline__ float u24(uint32_t x) { return (float)(x >> 8) * 0x1p-24f; }
__device__ __forceinline__ float u24_nz(uint32_t x) { return (float)((x >> 8) + 1) * 0x1p-24f; }
__device__ __forceinline__ double u53(uint32_t hi, uint32_t lo) {
  return (double)(((((uint64_t)hi) << 32) | lo) >> 11) * 0x1p-53;
}
__device__ __forceinline__ double u53_nz(uint32_t hi, uint32_t lo) {
  return (double)((((((uint64_t)hi) << 32) | lo) >> 11) + 1) * 0x1p-53;
}
__device__ __forceinline__ void bm_f32(uint32_t a, uint32_t b, float *z0, float *z1) {
  float r = sqrtf(-2.0f * logf(u24_nz(a)));
  float t = (float)TWO_PI * u24(b);
  *z0 = r * cosf(t);
  *z1 = r * sinf(t);
}
__device__ __forceinline__ void bm_f64(const uint32_t w[4], double *z0, double *z1) {
  double r = sqrt(-2.0 * log(u53_nz(w[0], w[1])));
  double t = TWO_PI * u53(w[2], w[3]);
  *z0 = r * cos(t);
  *z1 = r * sin(t);
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
        v[k] = lo + sc * u24(w[k]);
        if (v[k] >= hi && hi > lo) v[k] = top;
      }
    } else {
      bm_f32(w[0], w[1], &v[0], &v[1]);
      bm_f32(w[2], w[3], &v[2], &v[3]);
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
      v[0] = lo + sc * u53(w[0], w[1]);
      v[1] = lo + sc * u53(w[2], w[3]);
      for (int k = 0; k < 2; k++)
        if (v[k] >= hi && hi > lo) v[k] = top;
    } else {
      bm_f64(w, &v[0], &v[1]);
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
      bm_f32(w[0], w[1], &v[0], &v[1]);
      if (fabsf(v[0]) < 2.0f || fabsf(v[1]) < 2.0f) {
        z = fabsf(v[0]) < 2.0f ? v[0] : v[1];
        break;
      }
      bm_f32(w[2], w[3], &v[2], &v[3]);
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
      bm_f64(w, &v[0], &v[1]);
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
