/* CPU kernels of the random family (Philox4x32-10, see base/philox.h).
 *
 * Stream layout. key = attrs.seed (k0 = low word, k1 = high word); the 128-bit
 * counter is {block lo, block hi, s lo, s hi} with
 *   s = attrs.seed2 + run * 0x9E3779B97F4A7C15   (run = *ctx->counter)
 * The engine bumps the run counter after every run of the node, so each run
 * draws new numbers; multiplying by an odd constant is a bijection, so for
 * fixed seeds every (run, block) pair has its own counter. Block b yields four
 * 32-bit words, used as follows:
 *   RandomUniform        f32: elements 4b..4b+3, one word each (24-bit mantissa)
 *                        f64: elements 2b, 2b+1, two words each (53 bits)
 *   RandomStandardNormal f32: elements 4b..4b+3 (Box-Muller on word pairs)
 *                        f64: elements 2b, 2b+1 (Box-Muller on 64-bit pairs)
 *   TruncatedNormal      element i tries blocks i + (a << 40), a = 0, 1, ...;
 *                        each block gives 4 (f32) or 2 (f64) standard normal
 *                        candidates; the first with |z| < 2 is taken (TF:
 *                        resample beyond two standard deviations).
 *   Dropout              elements 4b..4b+3: keep iff word * 2^-32 >= rate
 *                        (word >= ceil(rate * 2^32)).
 * Values therefore depend only on (seed, seed2, run, position): the work is
 * split between threads freely. */
#include <math.h>
#include <string.h>
#include "kernels/cpu/random.h"
#include "kernels/cpu/isa.h"
/* GCC 12's -O2 only vectorizes loops whose trip count needs no epilogue;
 * the channel loops here have run-time lengths. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
#include "base/philox.h"

#define RNG_GRAIN 4096
#define RUN_MIX 0x9E3779B97F4A7C15ull

typedef struct {
  uint32_t key[2];
  uint32_t s0, s1;
  void *out;
  void *out2;
  const void *x;
  double a, b;
} rng_job;

static rng_job job_init(const loom_kctx *ctx) {
  rng_job j;
  memset(&j, 0, sizeof j);
  const loom_attrs *at = ctx->attrs;
  uint64_t run = ctx->counter ? *ctx->counter : 0;
  uint64_t s = at->seed2 + run * RUN_MIX;
  j.key[0] = (uint32_t)at->seed;
  j.key[1] = (uint32_t)(at->seed >> 32);
  j.s0 = (uint32_t)s;
  j.s1 = (uint32_t)(s >> 32);
  j.a = at->alpha;
  j.b = at->beta;
  return j;
}

static inline void gen(const rng_job *j, uint64_t blk, uint32_t w[4]) {
  uint32_t c[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), j->s0, j->s1};
  loom_philox4x32_10(c, j->key, w);
}

/* Blocks blk0 .. blk0+15 at once: w[k][i] = word k of block blk0 + i. The
 * lane loops vectorize (32x32->64-bit multiplies), several times faster than
 * one block at a time; values are the same as gen(). Inlined into the LOOM_HOT
 * ranges, so it runs with 8 or 16 lanes where the CPU has them. */
LOOM_FORCE_INLINE void gen16(const rng_job *j, uint64_t blk0, uint32_t w[4][16]) {
  uint32_t c0[16], c1[16], c2[16], c3[16];
  for (int i = 0; i < 16; i++) {
    uint64_t blk = blk0 + (uint64_t)i;
    c0[i] = (uint32_t)blk;
    c1[i] = (uint32_t)(blk >> 32);
    c2[i] = j->s0;
    c3[i] = j->s1;
  }
  uint32_t k0 = j->key[0], k1 = j->key[1];
  for (int r = 0; r < 10; r++) {
    if (r) {
      k0 += LOOM_PHILOX_W0;
      k1 += LOOM_PHILOX_W1;
    }
    for (int i = 0; i < 16; i++) {
      uint64_t p0 = (uint64_t)LOOM_PHILOX_M0 * c0[i];
      uint64_t p1 = (uint64_t)LOOM_PHILOX_M1 * c2[i];
      uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[i] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[i] ^ k1;
      c1[i] = (uint32_t)p1;
      c3[i] = (uint32_t)p0;
      c0[i] = n0;
      c2[i] = n2;
    }
  }
  for (int i = 0; i < 16; i++) {
    w[0][i] = c0[i];
    w[1][i] = c1[i];
    w[2][i] = c2[i];
    w[3][i] = c3[i];
  }
}

/* Stores the P values of block blk that fall into [b, e). */
#define STORE_BLOCK(o, blk, P, v, b, e)                    \
  do {                                                     \
    int64_t base_ = (int64_t)(blk) * (P);                  \
    for (int k_ = 0; k_ < (P); k_++) {                     \
      int64_t i_ = base_ + k_;                             \
      if (i_ >= (b) && i_ < (e)) (o)[i_] = (v)[k_];        \
    }                                                      \
  } while (0)

/* ---- RandomUniform ---- */
LOOM_HOT static void range_uniform_f32(void *p, int64_t b, int64_t e) {
  const rng_job *j = p;
  float *o = j->out;
  float lo = (float)j->a, hi = (float)j->b, sc = (float)(j->b - j->a);
  float top = nextafterf(hi, lo);
  for (int64_t blk = b / 4; blk * 4 < e;) {
    if (blk * 4 >= b && (blk + 16) * 4 <= e) { /* 16 whole blocks */
      uint32_t w[4][16];
      gen16(j, (uint64_t)blk, w);
      float *ob = o + blk * 4;
      for (int i = 0; i < 16; i++)
        for (int k = 0; k < 4; k++) {
          float v = lo + sc * loom_philox_u24(w[k][i]);
          ob[i * 4 + k] = v >= hi && hi > lo ? top : v; /* rounding must not reach hi */
        }
      blk += 16;
      continue;
    }
    uint32_t w[4];
    float v[4];
    gen(j, (uint64_t)blk, w);
    for (int k = 0; k < 4; k++) {
      v[k] = lo + sc * loom_philox_u24(w[k]);
      if (v[k] >= hi && hi > lo) v[k] = top;
    }
    STORE_BLOCK(o, blk, 4, v, b, e);
    blk++;
  }
}
static void range_uniform_f64(void *p, int64_t b, int64_t e) {
  const rng_job *j = p;
  double *o = j->out;
  double lo = j->a, hi = j->b, sc = j->b - j->a, top = nextafter(hi, lo);
  for (int64_t blk = b / 2; blk * 2 < e; blk++) {
    uint32_t w[4];
    double v[2];
    gen(j, (uint64_t)blk, w);
    v[0] = lo + sc * loom_philox_u53(w[0], w[1]);
    v[1] = lo + sc * loom_philox_u53(w[2], w[3]);
    for (int k = 0; k < 2; k++)
      if (v[k] >= hi && hi > lo) v[k] = top;
    STORE_BLOCK(o, blk, 2, v, b, e);
  }
}
static void uniform_defaults(rng_job *j) {
  if (j->a == 0 && j->b == 0) j->b = 1; /* [0, 1) */
}
loom_code loom__k_random_uniform_f32(const loom_kctx *ctx) {
  rng_job j = job_init(ctx);
  uniform_defaults(&j);
  j.out = ctx->out[0]->data;
  loom__parallel_for(ctx->pool, ctx->out[0]->numel, RNG_GRAIN, range_uniform_f32, &j);
  return LOOM_OK;
}
loom_code loom__k_random_uniform_f64(const loom_kctx *ctx) {
  rng_job j = job_init(ctx);
  uniform_defaults(&j);
  j.out = ctx->out[0]->data;
  loom__parallel_for(ctx->pool, ctx->out[0]->numel, RNG_GRAIN, range_uniform_f64, &j);
  return LOOM_OK;
}

/* ---- RandomStandardNormal (mean attrs.alpha, stddev attrs.beta) ---- */
static void normal_defaults(rng_job *j) {
  if (j->a == 0 && j->b == 0) j->b = 1; /* N(0, 1) */
}
static void range_normal_f32(void *p, int64_t b, int64_t e) {
  const rng_job *j = p;
  float *o = j->out;
  float mean = (float)j->a, sd = (float)j->b;
  for (int64_t blk = b / 4; blk * 4 < e; blk++) {
    uint32_t w[4];
    float v[4];
    gen(j, (uint64_t)blk, w);
    loom_box_muller_f32(w[0], w[1], &v[0], &v[1]);
    loom_box_muller_f32(w[2], w[3], &v[2], &v[3]);
    for (int k = 0; k < 4; k++) v[k] = mean + sd * v[k];
    STORE_BLOCK(o, blk, 4, v, b, e);
  }
}
static void range_normal_f64(void *p, int64_t b, int64_t e) {
  const rng_job *j = p;
  double *o = j->out;
  for (int64_t blk = b / 2; blk * 2 < e; blk++) {
    uint32_t w[4];
    double v[2];
    gen(j, (uint64_t)blk, w);
    loom_box_muller_f64(w, &v[0], &v[1]);
    v[0] = j->a + j->b * v[0];
    v[1] = j->a + j->b * v[1];
    STORE_BLOCK(o, blk, 2, v, b, e);
  }
}
loom_code loom__k_random_normal_f32(const loom_kctx *ctx) {
  rng_job j = job_init(ctx);
  normal_defaults(&j);
  j.out = ctx->out[0]->data;
  loom__parallel_for(ctx->pool, ctx->out[0]->numel, RNG_GRAIN, range_normal_f32, &j);
  return LOOM_OK;
}
loom_code loom__k_random_normal_f64(const loom_kctx *ctx) {
  rng_job j = job_init(ctx);
  normal_defaults(&j);
  j.out = ctx->out[0]->data;
  loom__parallel_for(ctx->pool, ctx->out[0]->numel, RNG_GRAIN, range_normal_f64, &j);
  return LOOM_OK;
}

/* ---- TruncatedNormal ---- */
#define TN_MAX_TRIES 64 /* all 64 blocks rejected: probability < 1e-300 */
static void range_truncated_f32(void *p, int64_t b, int64_t e) {
  const rng_job *j = p;
  float *o = j->out;
  float mean = (float)j->a, sd = (float)j->b;
  for (int64_t i = b; i < e; i++) {
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
      loom_box_muller_f32(w[2], w[3], &v[2], &v[3]); /* rarely needed (p = 0.2%) */
      if (fabsf(v[2]) < 2.0f || fabsf(v[3]) < 2.0f) {
        z = fabsf(v[2]) < 2.0f ? v[2] : v[3];
        break;
      }
    }
    o[i] = mean + sd * z;
  }
}
static void range_truncated_f64(void *p, int64_t b, int64_t e) {
  const rng_job *j = p;
  double *o = j->out;
  for (int64_t i = b; i < e; i++) {
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
    o[i] = j->a + j->b * z;
  }
}
loom_code loom__k_truncated_normal_f32(const loom_kctx *ctx) {
  rng_job j = job_init(ctx);
  normal_defaults(&j);
  j.out = ctx->out[0]->data;
  loom__parallel_for(ctx->pool, ctx->out[0]->numel, RNG_GRAIN, range_truncated_f32, &j);
  return LOOM_OK;
}
loom_code loom__k_truncated_normal_f64(const loom_kctx *ctx) {
  rng_job j = job_init(ctx);
  normal_defaults(&j);
  j.out = ctx->out[0]->data;
  loom__parallel_for(ctx->pool, ctx->out[0]->numel, RNG_GRAIN, range_truncated_f64, &j);
  return LOOM_OK;
}

/* ---- Dropout: y = x * mask_scaled, mask_scaled = keep / (1 - rate) ---- */
#define DEF_DROPOUT(T, SFX)                                                           \
  LOOM_HOT static void range_dropout_##SFX(void *p, int64_t b, int64_t e) {           \
    const rng_job *j = p;                                                             \
    const T *x = j->x;                                                                \
    T *y = j->out, *m = j->out2;                                                      \
    double rate = j->a;                                                               \
    T scale = (T)j->b;                                                                \
    /* keep iff word * 2^-32 >= rate, i.e. word >= thr (exact); as scale * 0 or 1, no \
     * branch on the random words. rate < 1: thr <= 2^32, which keeps nothing (the    \
     * words against a 32-bit bound, scale 0) */                                      \
    const uint64_t thr = (uint64_t)ceil(rate * 4294967296.0);                         \
    const uint32_t thr32 = thr > UINT32_MAX ? UINT32_MAX : (uint32_t)thr;             \
    if (thr > UINT32_MAX) scale = 0;                                                  \
    for (int64_t blk = b / 4; blk * 4 < e;) {                                         \
      if (blk * 4 >= b && (blk + 16) * 4 <= e) {                                      \
        uint32_t w[4][16];                                                            \
        gen16(j, (uint64_t)blk, w);                                                   \
        T keep[4][16], *mb = m + blk * 4; /* compared a word row at a time (vectors), \
                                             then put in element order */             \
        for (int k = 0; k < 4; k++)                                                   \
          for (int i = 0; i < 16; i++) keep[k][i] = scale * (T)(w[k][i] >= thr32);    \
        for (int i = 0; i < 16; i++)                                                  \
          for (int k = 0; k < 4; k++) mb[i * 4 + k] = keep[k][i];                     \
        blk += 16;                                                                    \
        continue;                                                                     \
      }                                                                               \
      uint32_t w[4];                                                                  \
      T v[4];                                                                         \
      gen(j, (uint64_t)blk, w);                                                       \
      for (int k = 0; k < 4; k++) v[k] = scale * (T)(w[k] >= thr32);                  \
      STORE_BLOCK(m, blk, 4, v, b, e);                                                \
      blk++;                                                                          \
    }                                                                                 \
    for (int64_t i = b; i < e; i++) y[i] = x[i] * m[i];                               \
  }                                                                                   \
  loom_code loom__k_dropout_##SFX(const loom_kctx *ctx) {                             \
    rng_job j = job_init(ctx);                                                        \
    double rate = ctx->attrs->alpha;                                                  \
    if (!(rate >= 0.0 && rate < 1.0))                                                 \
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,                          \
                             "dropout rate %g is not in [0, 1)", rate);               \
    j.a = rate;                                                                       \
    j.b = 1.0 / (1.0 - rate);                                                         \
    j.x = ctx->in[0]->data;                                                           \
    j.out = ctx->out[0]->data;                                                        \
    j.out2 = ctx->out[1]->data;                                                       \
    loom__parallel_for(ctx->pool, ctx->out[0]->numel, RNG_GRAIN, range_dropout_##SFX, &j); \
    return LOOM_OK;                                                                   \
  }
DEF_DROPOUT(float, f32)
DEF_DROPOUT(double, f64)
