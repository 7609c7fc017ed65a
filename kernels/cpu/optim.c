/* CPU kernels of the train family.
 *
 * Optimizer updates follow TF's training_ops kernels formula by formula
 * (float32). Each optimizer has one "span" function updating n contiguous
 * elements (restrict pointers, sqrtf: GCC vectorizes them with
 * -fno-math-errno); the dense kernel runs it over [lo, hi) chunks of the
 * variable with loom__parallel_for, the sparse kernel over whole rows.
 *
 * Sparse kernels (indices [n] into the variable's first dimension, gradient
 * rows [n, row]) first sort the indices in the workspace (radix sort) and sum the rows of
 * repeated indices (what tf.train.Optimizer does before calling TF's sparse
 * kernels), then update each distinct row once, rows in parallel. The index
 * LOOM_NO_ROW_I32/I64 (kernels/kernel.h) is skipped: it marks a gradient
 * entry that belongs to no row (a pruned id of SparseEmbedding's gradient,
 * kernels/cpu/sparse.c); other indices outside [0, rows) are errors.
 *
 * Every optimizer kernel reads its gradient times the op's gradient scale
 * (loom__apply_grad_scale, 1 by default): g * scale rounded to float, as if
 * the gradient had been scaled beforehand (sparse: the rows of a repeated
 * index are summed first, then scaled). A scale of 1 runs the unscaled
 * loops (run_span). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/optim.h"
#include "kernels/cpu/isa.h"

/* glibc's libmvec has a vector powf (FTRL with learning_rate_power != -0.5);
 * glibc declares it only under -ffast-math (same trick as kernels/cpu/math.c). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    !defined(__FAST_MATH__) && !defined(LOOM_NO_LIBMVEC) && __GNUC__ >= 6
float powf(float, float) __attribute__((__simd__("notinbranch")));
#endif

static inline float scal(const loom_kctx *ctx, int i) { return *(const float *)ctx->in[i]->data; }
static inline int64_t row_grain(int64_t row) {
  int64_t g = LOOM_PAR_GRAIN / (row > 0 ? row : 1);
  return g > 0 ? g : 1;
}

/* =====================================================================
 * Update spans (TF training_ops.cc formulas)
 * ===================================================================== */
typedef struct hyper {
  float lr, a, b, c, d, e; /* per-optimizer meaning, see each kernel */
  int flag;
  float gs; /* the gradient scale (1: the gradient as it is) */
} hyper;

LOOM_FORCE_INLINE void gd_span(float *restrict var, const float *restrict g, int64_t n, const hyper *h,
                               const float gs) {
  const float lr = h->lr;
  for (int64_t i = 0; i < n; i++) var[i] -= lr * (g[i] * gs);
}

/* a = momentum; flag = use_nesterov */
LOOM_FORCE_INLINE void momentum_span(float *restrict var, float *restrict acc, const float *restrict g, int64_t n,
                                 const hyper *h, const float gs) {
  const float lr = h->lr, mom = h->a;
  if (h->flag) {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * gs;
      float a = acc[i] * mom + gi;
      acc[i] = a;
      var[i] -= gi * lr + a * mom * lr;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      float a = acc[i] * mom + g[i] * gs;
      acc[i] = a;
      var[i] -= lr * a;
    }
  }
}

LOOM_FORCE_INLINE void adagrad_span(float *restrict var, float *restrict acc, const float *restrict g, int64_t n,
                                const hyper *h, const float gs) {
  const float lr = h->lr;
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i] * gs;
    float a = acc[i] + gi * gi;
    acc[i] = a;
    var[i] -= lr * gi / sqrtf(a);
  }
}

/* lr = alpha = lr*sqrt(1-beta2^t)/(1-beta1^t); a = beta1, b = beta2, c = epsilon; flag = nesterov */
LOOM_FORCE_INLINE void adam_span(float *restrict var, float *restrict m, float *restrict v, const float *restrict g,
                             int64_t n, const hyper *h, const float gs) {
  const float alpha = h->lr, b1 = h->a, b2 = h->b, eps = h->c, ob1 = 1.0f - b1, ob2 = 1.0f - b2;
  if (h->flag) {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * gs;
      float mi = m[i] + (gi - m[i]) * ob1;
      float vi = v[i] + (gi * gi - v[i]) * ob2;
      m[i] = mi;
      v[i] = vi;
      var[i] -= ((gi * ob1 + b1 * mi) * alpha) / (sqrtf(vi) + eps);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * gs;
      float mi = m[i] + (gi - m[i]) * ob1;
      float vi = v[i] + (gi * gi - v[i]) * ob2;
      m[i] = mi;
      v[i] = vi;
      var[i] -= (mi * alpha) / (sqrtf(vi) + eps);
    }
  }
}

/* Adam with a zero gradient (rows a sparse gradient does not touch). */
LOOM_FORCE_INLINE void adam_span_zero(float *restrict var, float *restrict m, float *restrict v, int64_t n,
                                  const hyper *h) {
  const float alpha = h->lr, eps = h->c, ob1 = 1.0f - h->a, ob2 = 1.0f - h->b;
  for (int64_t i = 0; i < n; i++) {
    float mi = m[i] - m[i] * ob1;
    float vi = v[i] - v[i] * ob2;
    m[i] = mi;
    v[i] = vi;
    var[i] -= (mi * alpha) / (sqrtf(vi) + eps);
  }
}

/* ApplyFtrlV2: a = l1, b = l2, c = l2_shrinkage, d = lr_power */
LOOM_FORCE_INLINE void ftrl_span(float *restrict var, float *restrict acc, float *restrict lin, const float *restrict g,
                             int64_t n, const hyper *h, const float gs) {
  const float lr = h->lr, l1 = h->a, l2x2 = 2.0f * h->b, shr2 = 2.0f * h->c, p = h->d;
  if (p == -0.5f) {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * gs, vi = var[i], ai = acc[i];
      float gsh = gi + shr2 * vi;
      float na = ai + gi * gi;
      float sna = sqrtf(na);
      float li = lin[i] + gsh - (sna - sqrtf(ai)) / lr * vi;
      lin[i] = li;
      float y = sna / lr + l2x2;
      float x = (li > 0.0f ? l1 : (li < 0.0f ? -l1 : 0.0f)) - li;
      float q = x / y; /* unconditional, so the loop vectorizes (the value is the same) */
      var[i] = fabsf(li) > l1 ? q : 0.0f;
      acc[i] = na;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * gs, vi = var[i], ai = acc[i];
      float gsh = gi + shr2 * vi;
      float na = ai + gi * gi;
      float pna = powf(na, -p);
      float li = lin[i] + gsh - (pna - powf(ai, -p)) / lr * vi;
      lin[i] = li;
      float y = pna / lr + l2x2;
      float x = (li > 0.0f ? l1 : (li < 0.0f ? -l1 : 0.0f)) - li;
      var[i] = fabsf(li) > l1 ? x / y : 0.0f;
      acc[i] = na;
    }
  }
}

/* FTRL on rows shorter than a few vectors (a linear model's sparse rows are
 * logits-dimension wide: 1 to 10 floats): the same per-element arithmetic on
 * 8 padded lanes with a fixed trip count, so the compiler emits one vector
 * division or square root per operation instead of n scalar ones (a
 * divss/sqrtss chain per element dominated the InstEval wide part's update).
 * Each lane's result is bitwise the scalar loop's: IEEE division and square
 * root are correctly rounded in either form and the expression is the same
 * (no contraction in ISO C mode). The padding lanes (accumulator 1, the rest
 * 0) stay finite and are dropped. */
enum { FTRL_LANES = 8 };
static void ftrl_span_lanes(float *restrict var, float *restrict acc, float *restrict lin, const float *restrict g,
                            int64_t n, const hyper *h, const float gs) {
  for (int64_t o = 0; o < n; o += FTRL_LANES) {
    int m = n - o < FTRL_LANES ? (int)(n - o) : FTRL_LANES;
    float v[FTRL_LANES] = {0}, a[FTRL_LANES] = {1, 1, 1, 1, 1, 1, 1, 1}, l[FTRL_LANES] = {0}, gg[FTRL_LANES] = {0};
    for (int i = 0; i < m; i++) v[i] = var[o + i], a[i] = acc[o + i], l[i] = lin[o + i], gg[i] = g[o + i];
    ftrl_span(v, a, l, gg, FTRL_LANES, h, gs);
    for (int i = 0; i < m; i++) var[o + i] = v[i], acc[o + i] = a[i], lin[o + i] = l[i];
  }
}

/* a = rho (decay), b = momentum, c = epsilon; flag: epsilon outside the square root (Keras' legacy RMSprop
 * without momentum: lr * g / (sqrt(ms) + epsilon)) */
LOOM_FORCE_INLINE void rmsprop_span(float *restrict var, float *restrict ms, float *restrict mom, const float *restrict g,
                                int64_t n, const hyper *h, const float gs) {
  const float lr = h->lr, orho = 1.0f - h->a, momentum = h->b, eps = h->c;
  const int out = h->flag;
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i] * gs;
    float s = ms[i] + (gi * gi - ms[i]) * orho;
    ms[i] = s;
    float mo = mom[i] * momentum + (gi * lr) / (out ? sqrtf(s) + eps : sqrtf(s + eps));
    mom[i] = mo;
    var[i] -= mo;
  }
}

LOOM_FORCE_INLINE void centered_rmsprop_span(float *restrict var, float *restrict mg, float *restrict ms,
                                         float *restrict mom, const float *restrict g, int64_t n, const hyper *h,
                                         const float gs) {
  const float lr = h->lr, orho = 1.0f - h->a, momentum = h->b, eps = h->c;
  const int out = h->flag;
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i] * gs;
    float mgi = mg[i] + (gi - mg[i]) * orho;
    float s = ms[i] + (gi * gi - ms[i]) * orho;
    mg[i] = mgi;
    ms[i] = s;
    float mo = mom[i] * momentum + (gi * lr) / (out ? sqrtf(s - mgi * mgi) + eps : sqrtf((s - mgi * mgi) + eps));
    mom[i] = mo;
    var[i] -= mo;
  }
}

/* a = rho, b = epsilon */
LOOM_FORCE_INLINE void adadelta_span(float *restrict var, float *restrict acc, float *restrict accu,
                                 const float *restrict g, int64_t n, const hyper *h, const float gs) {
  const float lr = h->lr, rho = h->a, orho = 1.0f - h->a, eps = h->b;
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i] * gs;
    float a = acc[i] * rho + gi * gi * orho;
    acc[i] = a;
    float upd = sqrtf(accu[i] + eps) / sqrtf(a + eps) * gi;
    var[i] -= upd * lr;
    accu[i] = accu[i] * rho + upd * upd * orho;
  }
}

/* TF's sign(x): -1, 0 or 1 */
static inline float sgnf(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }

/* ProximalGradientDescent (FOBOS): a = l1, b = l2. prox = var - g * lr; var = sign(prox) * max(|prox| -
 * lr * l1, 0) / (1 + l2 * lr) when l1 > 0, else prox / (1 + l2 * lr). */
LOOM_FORCE_INLINE void prox_gd_span(float *restrict var, const float *restrict g, int64_t n, const hyper *h,
                                    const float gs) {
  const float lr = h->lr, l1 = h->a, lrl1 = lr * l1, den = 1.0f + h->b * lr;
  if (l1 > 0.0f) {
    for (int64_t i = 0; i < n; i++) {
      float p = var[i] - (g[i] * gs) * lr;
      var[i] = sgnf(p) * fmaxf(fabsf(p) - lrl1, 0.0f) / den;
    }
  } else {
    for (int64_t i = 0; i < n; i++) var[i] = (var[i] - (g[i] * gs) * lr) / den;
  }
}

/* ProximalAdagrad: a = l1, b = l2. accum += g^2; the step's rate r = lr / sqrt(accum); prox = var - g * r;
 * var = sign(prox) * max(|prox| - r * l1, 0) / (1 + l2 * r) when l1 > 0, else prox / (1 + l2 * r). */
LOOM_FORCE_INLINE void prox_adagrad_span(float *restrict var, float *restrict acc, const float *restrict g, int64_t n,
                                         const hyper *h, const float gs) {
  const float lr = h->lr, l1 = h->a, l2 = h->b;
  if (l1 > 0.0f) {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * gs;
      float a = acc[i] + gi * gi;
      acc[i] = a;
      float r = lr * (1.0f / sqrtf(a));
      float p = var[i] - gi * r;
      var[i] = sgnf(p) * fmaxf(fabsf(p) - r * l1, 0.0f) / (1.0f + l2 * r);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * gs;
      float a = acc[i] + gi * gi;
      acc[i] = a;
      float r = lr * (1.0f / sqrtf(a));
      var[i] = (var[i] - gi * r) / (1.0f + l2 * r);
    }
  }
}

/* AdagradDA: a = l1, b = l2, c = the global step T (as float); ga += g, gg += g^2. Dense (TF's
 * ApplyAdagradDA): var = -sign(ga) * lr * max(|ga| - T * l1, 0) / (l2 * (T * lr) + sqrt(gg)) when l1 > 0,
 * else -(lr * ga) / (l2 * (T * lr) + sqrt(gg)). flag (TF's SparseApplyAdagradDA's form of the same value):
 * var = -sign(ga) * max(|ga| / T - l1, 0) / (l2 + sqrt(gg) / (T * lr)), else -(ga / T) / (l2 + sqrt(gg) /
 * (T * lr)). */
LOOM_FORCE_INLINE void adagrad_da_span(float *restrict var, float *restrict ga, float *restrict gg,
                                       const float *restrict g, int64_t n, const hyper *h, const float gs) {
  const float lr = h->lr, l1 = h->a, l2 = h->b, t = h->c, tlr = t * lr, tl1 = t * l1, l2tlr = l2 * tlr;
  if (!h->flag) {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * gs;
      float a = ga[i] + gi, b = gg[i] + gi * gi;
      ga[i] = a;
      gg[i] = b;
      float den = l2tlr + sqrtf(b);
      var[i] = l1 > 0.0f ? -lr * sgnf(a) * fmaxf(fabsf(a) - tl1, 0.0f) / den : lr * a * -1.0f / den;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] * gs;
      float a = ga[i] + gi, b = gg[i] + gi * gi;
      ga[i] = a;
      gg[i] = b;
      float den = l2 + sqrtf(b) / tlr;
      var[i] = l1 > 0.0f ? -1.0f * sgnf(a) * fmaxf(fabsf(a) / t - l1, 0.0f) / den : -1.0f * (a / t) / den;
    }
  }
}

/* =====================================================================
 * Dense kernels
 * ===================================================================== */
enum { OPT_GD, OPT_MOMENTUM, OPT_ADAGRAD, OPT_ADAM, OPT_FTRL, OPT_RMSPROP, OPT_CRMSPROP, OPT_ADADELTA,
       OPT_PROX_GD, OPT_PROX_ADAGRAD, OPT_ADAGRAD_DA };

typedef struct opt_args {
  int kind;
  float *var, *s[3];
  const float *g;
  hyper h;
  /* sparse */
  int64_t row;
  const int64_t *rows;
  const float *const *grows;
  const uint64_t *bitmap;
} opt_args;

LOOM_FORCE_INLINE void run_span_gs(const opt_args *a, int64_t off, const float *g, int64_t n, const float gs) {
  float *var = a->var + off;
  switch (a->kind) {
  case OPT_GD: gd_span(var, g, n, &a->h, gs); break;
  case OPT_MOMENTUM: momentum_span(var, a->s[0] + off, g, n, &a->h, gs); break;
  case OPT_ADAGRAD: adagrad_span(var, a->s[0] + off, g, n, &a->h, gs); break;
  case OPT_ADAM: adam_span(var, a->s[0] + off, a->s[1] + off, g, n, &a->h, gs); break;
  case OPT_FTRL:
    if (n < 4 * FTRL_LANES && a->h.d == -0.5f) ftrl_span_lanes(var, a->s[0] + off, a->s[1] + off, g, n, &a->h, gs);
    else ftrl_span(var, a->s[0] + off, a->s[1] + off, g, n, &a->h, gs);
    break;
  case OPT_RMSPROP: rmsprop_span(var, a->s[0] + off, a->s[1] + off, g, n, &a->h, gs); break;
  case OPT_CRMSPROP: centered_rmsprop_span(var, a->s[0] + off, a->s[1] + off, a->s[2] + off, g, n, &a->h, gs); break;
  case OPT_ADADELTA: adadelta_span(var, a->s[0] + off, a->s[1] + off, g, n, &a->h, gs); break;
  case OPT_PROX_GD: prox_gd_span(var, g, n, &a->h, gs); break;
  case OPT_PROX_ADAGRAD: prox_adagrad_span(var, a->s[0] + off, g, n, &a->h, gs); break;
  case OPT_ADAGRAD_DA: adagrad_da_span(var, a->s[0] + off, a->s[1] + off, g, n, &a->h, gs); break;
  default: break;
  }
}

/* The spans with the gradient scale: a scale of 1 is a constant there, so the compiler drops the multiply
 * (x * 1 is x) and the loops are the unscaled ones; another scale multiplies each gradient element as it
 * is read (the product rounded to float, as a gradient scaled beforehand). */
LOOM_FORCE_INLINE void run_span(const opt_args *a, int64_t off, const float *g, int64_t n) {
  if (a->h.gs == 1.0f) run_span_gs(a, off, g, n, 1.0f);
  else run_span_gs(a, off, g, n, a->h.gs);
}

LOOM_HOT static void dense_chunk(void *arg, int64_t lo, int64_t hi) {
  const opt_args *a = arg;
  run_span(a, lo, a->g + lo, hi - lo);
}

static loom_code run_dense(const loom_kctx *ctx, opt_args *a, int grad_input) {
  a->var = ctx->in[0]->data;
  a->g = ctx->in[grad_input]->data;
  a->h.gs = loom__apply_grad_scale(ctx->attrs);
  int64_t n = ctx->in[0]->numel;
  if (n > 0) loom__parallel_for(ctx->pool, n, LOOM_PAR_GRAIN, dense_chunk, a);
  return LOOM_OK;
}

loom_code loom__k_apply_gradient_descent_f32(const loom_kctx *ctx) {
  /* var, alpha, delta */
  opt_args a = {0};
  a.kind = OPT_GD;
  a.h.lr = scal(ctx, 1);
  return run_dense(ctx, &a, 2);
}

loom_code loom__k_apply_momentum_f32(const loom_kctx *ctx) {
  /* var, accum, lr, grad, momentum; attrs.num bit 0 = use_nesterov */
  opt_args a = {0};
  a.kind = OPT_MOMENTUM;
  a.s[0] = ctx->in[1]->data;
  a.h.lr = scal(ctx, 2);
  a.h.a = scal(ctx, 4);
  a.h.flag = (int)(ctx->attrs->num & 1);
  return run_dense(ctx, &a, 3);
}

loom_code loom__k_apply_adagrad_f32(const loom_kctx *ctx) {
  /* var, accum, lr, grad */
  opt_args a = {0};
  a.kind = OPT_ADAGRAD;
  a.s[0] = ctx->in[1]->data;
  a.h.lr = scal(ctx, 2);
  return run_dense(ctx, &a, 3);
}

static void adam_hyper(const loom_kctx *ctx, hyper *h) {
  /* var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad */
  float b1p = scal(ctx, 3), b2p = scal(ctx, 4), lr = scal(ctx, 5);
  h->lr = lr * sqrtf(1.0f - b2p) / (1.0f - b1p);
  h->a = scal(ctx, 6);
  h->b = scal(ctx, 7);
  h->c = scal(ctx, 8);
  h->flag = (int)(ctx->attrs->num & 1);
}

loom_code loom__k_apply_adam_f32(const loom_kctx *ctx) {
  opt_args a = {0};
  a.kind = OPT_ADAM;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  adam_hyper(ctx, &a.h);
  return run_dense(ctx, &a, 9);
}

loom_code loom__k_apply_ftrl_f32(const loom_kctx *ctx) {
  /* var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power */
  opt_args a = {0};
  a.kind = OPT_FTRL;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.h.lr = scal(ctx, 4);
  a.h.a = scal(ctx, 5);
  a.h.b = scal(ctx, 6);
  a.h.c = scal(ctx, 7);
  a.h.d = scal(ctx, 8);
  return run_dense(ctx, &a, 3);
}

loom_code loom__k_apply_rmsprop_f32(const loom_kctx *ctx) {
  /* var, ms, mom, lr, rho, momentum, epsilon, grad */
  opt_args a = {0};
  a.kind = OPT_RMSPROP;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.h.lr = scal(ctx, 3);
  a.h.a = scal(ctx, 4);
  a.h.b = scal(ctx, 5);
  a.h.c = scal(ctx, 6);
  a.h.flag = (int)(ctx->attrs->num & 1);
  return run_dense(ctx, &a, 7);
}

loom_code loom__k_apply_centered_rmsprop_f32(const loom_kctx *ctx) {
  /* var, mg, ms, mom, lr, rho, momentum, epsilon, grad */
  opt_args a = {0};
  a.kind = OPT_CRMSPROP;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.s[2] = ctx->in[3]->data;
  a.h.lr = scal(ctx, 4);
  a.h.a = scal(ctx, 5);
  a.h.b = scal(ctx, 6);
  a.h.c = scal(ctx, 7);
  a.h.flag = (int)(ctx->attrs->num & 1);
  return run_dense(ctx, &a, 8);
}

loom_code loom__k_apply_adadelta_f32(const loom_kctx *ctx) {
  /* var, accum, accum_update, lr, rho, epsilon, grad */
  opt_args a = {0};
  a.kind = OPT_ADADELTA;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.h.lr = scal(ctx, 3);
  a.h.a = scal(ctx, 4);
  a.h.b = scal(ctx, 5);
  return run_dense(ctx, &a, 6);
}

loom_code loom__k_apply_proximal_gradient_descent_f32(const loom_kctx *ctx) {
  /* var, alpha, l1, l2, delta */
  opt_args a = {0};
  a.kind = OPT_PROX_GD;
  a.h.lr = scal(ctx, 1);
  a.h.a = scal(ctx, 2);
  a.h.b = scal(ctx, 3);
  return run_dense(ctx, &a, 4);
}

loom_code loom__k_apply_proximal_adagrad_f32(const loom_kctx *ctx) {
  /* var, accum, lr, l1, l2, grad */
  opt_args a = {0};
  a.kind = OPT_PROX_ADAGRAD;
  a.s[0] = ctx->in[1]->data;
  a.h.lr = scal(ctx, 2);
  a.h.a = scal(ctx, 3);
  a.h.b = scal(ctx, 4);
  return run_dense(ctx, &a, 5);
}

/* AdagradDA's global step input (int32 or int64 scalar) as float, as TF's kernels convert it */
static float step_scal(const loom_kctx *ctx, int i) {
  const loom_buf *b = ctx->in[i];
  return b->dtype == LOOM_I64 ? (float)*(const int64_t *)b->data : (float)*(const int32_t *)b->data;
}

loom_code loom__k_apply_adagrad_da_f32(const loom_kctx *ctx) {
  /* var, gradient_accumulator, gradient_squared_accumulator, grad, lr, l1, l2, global_step */
  opt_args a = {0};
  a.kind = OPT_ADAGRAD_DA;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.h.lr = scal(ctx, 4);
  a.h.a = scal(ctx, 5);
  a.h.b = scal(ctx, 6);
  a.h.c = step_scal(ctx, 7);
  return run_dense(ctx, &a, 3);
}

/* =====================================================================
 * Sparse kernels
 * ===================================================================== */
typedef struct ipair {
  int64_t idx, pos;
} ipair;

static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t loom__sparse_apply_ws(int64_t n, int64_t row, int64_t nrows, int bitmap) {
  if (n < 0) n = 0;
  if (row < 0) row = 0;
  size_t s = 2 * al64((size_t)n * sizeof(ipair)) + al64((size_t)n * sizeof(int64_t)) +
             al64((size_t)n * sizeof(float *)) + al64((size_t)n * (size_t)row * sizeof(float));
  if (bitmap) s += al64((size_t)((nrows + 63) / 64) * sizeof(uint64_t));
  return s + 64;
}

/* Sorts the n pairs (built in position order, idx in [0, nrows)) by idx,
 * keeping position order within an index (stable): insertion sort for a
 * few, else an LSD radix sort, 11 bits a pass, through tmp (n pairs of
 * workspace: qsort took a fifth of a big embedding training step, and
 * glibc's may malloc). Returns the buffer that holds the result (a or tmp). */
static ipair *sort_pairs(ipair *a, ipair *tmp, int64_t n, int64_t nrows) {
  if (n <= 32) {
    for (int64_t i = 1; i < n; i++) {
      ipair x = a[i];
      int64_t j = i;
      while (j > 0 && a[j - 1].idx > x.idx) {
        a[j] = a[j - 1];
        j--;
      }
      a[j] = x;
    }
    return a;
  }
  int bits = 0;
  while (bits < 63 && ((int64_t)1 << bits) < nrows) bits++;
  /* digits of up to 11 bits, fewer for a short list (a batch's 128 ids into
   * 50000 rows: two passes of 8 bits, not 2 x 2048 counters to clear and scan) */
  int db = 4;
  while (db < 11 && ((int64_t)1 << db) < 2 * n) db++;
  int passes = (bits + db - 1) / db;
  if (passes > 0) db = (bits + passes - 1) / passes;
  const int64_t nd = (int64_t)1 << db, mask = nd - 1;
  int64_t cnt[2048];
  for (int shift = 0; shift < bits; shift += db) {
    memset(cnt, 0, (size_t)nd * sizeof cnt[0]);
    for (int64_t i = 0; i < n; i++) cnt[(a[i].idx >> shift) & mask]++;
    int64_t o = 0;
    for (int d = 0; d < nd; d++) {
      int64_t c = cnt[d];
      cnt[d] = o;
      o += c;
    }
    for (int64_t i = 0; i < n; i++) tmp[cnt[(a[i].idx >> shift) & mask]++] = a[i];
    ipair *t = a;
    a = tmp;
    tmp = t;
  }
  return a;
}

/* Reads and checks indices; fills *nu distinct rows (ascending) with their
 * summed gradient rows. */
static loom_code sparse_prepare(const loom_kctx *ctx, int gi, int ii, int bitmap, opt_args *a, int64_t *nu_out) {
  const loom_buf *var = ctx->in[0], *grad = ctx->in[gi], *ind = ctx->in[ii];
  int64_t nrows = var->ndim ? var->dims[0] : 0;
  int64_t row = nrows > 0 ? var->numel / nrows : 0;
  int64_t n = ind->numel;
  if (grad->numel != n * row)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "gradient has %lld elements, expected %lld rows of %lld",
                           (long long)grad->numel, (long long)n, (long long)row);
  size_t need = loom__sparse_apply_ws(n, row, nrows, bitmap);
  if (ctx->ws_size < need)
    return loom_status_set(ctx->st, LOOM_INTERNAL, "sparse apply: workspace of %zu bytes, need %zu", ctx->ws_size, need);
  char *w = (char *)(((uintptr_t)ctx->ws + 63) & ~(uintptr_t)63);
  ipair *pairs = (ipair *)w;
  w += al64((size_t)n * sizeof(ipair));
  ipair *ptmp = (ipair *)w;
  w += al64((size_t)n * sizeof(ipair));
  int64_t *rows = (int64_t *)w;
  w += al64((size_t)n * sizeof(int64_t));
  const float **grows = (const float **)w;
  w += al64((size_t)n * sizeof(float *));
  float *sums = (float *)w;
  w += al64((size_t)n * (size_t)row * sizeof(float));
  uint64_t *bm = bitmap ? (uint64_t *)w : NULL;
  int64_t nk = 0; /* kept pairs: LOOM_NO_ROW_* marks a gradient entry for no row (a pruned id) */
  const int64_t no_row = ind->dtype == LOOM_I32 ? (int64_t)LOOM_NO_ROW_I32 : LOOM_NO_ROW_I64;
  for (int64_t i = 0; i < n; i++) {
    int64_t k = ind->dtype == LOOM_I32 ? ((const int32_t *)ind->data)[i] : ((const int64_t *)ind->data)[i];
    if (k == no_row) continue;
    if (k < 0 || k >= nrows)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "indices[%lld] = %lld is not in [0, %lld)",
                             (long long)i, (long long)k, (long long)nrows);
    pairs[nk].idx = k;
    pairs[nk++].pos = i;
  }
  n = nk;
  if (n > 1) pairs = sort_pairs(pairs, ptmp, n, nrows);
  const float *G = grad->data;
  int64_t nu = 0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i + 1;
    while (j < n && pairs[j].idx == pairs[i].idx) j++;
    rows[nu] = pairs[i].idx;
    if (j - i == 1) {
      grows[nu] = G + pairs[i].pos * row;
    } else {
      float *s = sums + nu * row;
      memcpy(s, G + pairs[i].pos * row, (size_t)row * sizeof(float));
      for (int64_t k = i + 1; k < j; k++) {
        const float *src = G + pairs[k].pos * row;
        for (int64_t c = 0; c < row; c++) s[c] += src[c];
      }
      grows[nu] = s;
    }
    nu++;
    i = j;
  }
  if (bm) {
    memset(bm, 0, (size_t)((nrows + 63) / 64) * sizeof(uint64_t));
    for (int64_t k = 0; k < nu; k++) bm[rows[k] >> 6] |= 1ull << (rows[k] & 63);
  }
  a->var = var->data;
  a->h.gs = loom__apply_grad_scale(ctx->attrs); /* applied to the summed rows */
  a->row = row;
  a->rows = rows;
  a->grows = grows;
  a->bitmap = bm;
  *nu_out = nu;
  return LOOM_OK;
}

/* FTRL (learning_rate_power -0.5) on short sparse rows (a linear model's
 * rows are logits-wide, 1 to 10 floats): the rows' elements are gathered
 * into flat blocks, updated by ftrl_span as one long vector loop (16 lanes
 * on AVX-512 instead of a padded row at a time), and scattered back. The
 * rows are distinct (sparse_prepare summed repeats), so the order does not
 * matter, and each element gets the scalar loop's arithmetic: bitwise the
 * same result (IEEE division and square root are correctly rounded in
 * vector and scalar form; no contraction in ISO C mode). */
enum { FLAT_BLOCK = 512 };
LOOM_HOT static void ftrl_flat_chunk(void *arg, int64_t lo, int64_t hi) {
  const opt_args *a = arg;
  const int64_t row = a->row;
  float v[FLAT_BLOCK], ac[FLAT_BLOCK], l[FLAT_BLOCK], g[FLAT_BLOCK];
  const int64_t per = FLAT_BLOCK / row;
  enum { AHEAD = 16 };
  for (int64_t k0 = lo; k0 < hi; k0 += per) {
    int64_t k1 = k0 + per < hi ? k0 + per : hi, m = 0;
    for (int64_t k = k0; k < k1; k++) {
      if (k + AHEAD < hi) {
        int64_t off = a->rows[k + AHEAD] * row;
        __builtin_prefetch(a->var + off, 1);
        __builtin_prefetch(a->s[0] + off, 1);
        __builtin_prefetch(a->s[1] + off, 1);
      }
      int64_t off = a->rows[k] * row;
      const float *gr = a->grows[k];
      for (int64_t c = 0; c < row; c++, m++)
        v[m] = a->var[off + c], ac[m] = a->s[0][off + c], l[m] = a->s[1][off + c], g[m] = gr[c];
    }
    ftrl_span(v, ac, l, g, m, &a->h, a->h.gs);
    m = 0;
    for (int64_t k = k0; k < k1; k++) {
      int64_t off = a->rows[k] * row;
      for (int64_t c = 0; c < row; c++, m++) a->var[off + c] = v[m], a->s[0][off + c] = ac[m], a->s[1][off + c] = l[m];
    }
  }
}

LOOM_HOT static void sparse_chunk(void *arg, int64_t lo, int64_t hi) {
  const opt_args *a = arg;
  /* the touched rows are scattered over the table (a hashed cross has 50000
   * rows): the variable's and its slots' rows a few updates ahead are
   * prefetched, so their cache misses overlap the arithmetic */
  enum { AHEAD = 8 };
  for (int64_t k = lo; k < hi; k++) {
    if (k + AHEAD < hi) {
      int64_t off = a->rows[k + AHEAD] * a->row;
      __builtin_prefetch(a->var + off, 1);
      for (int j = 0; j < 3; j++)
        if (a->s[j]) __builtin_prefetch(a->s[j] + off, 1);
    }
    run_span(a, a->rows[k] * a->row, a->grows[k], a->row);
  }
}

static loom_code run_sparse(const loom_kctx *ctx, opt_args *a, int gi, int ii) {
  int64_t nu = 0;
  loom_code rc = sparse_prepare(ctx, gi, ii, 0, a, &nu);
  if (rc) return rc;
  if (nu > 0 && a->row > 0)
    loom__parallel_for(ctx->pool, nu, row_grain(a->row),
                       a->kind == OPT_FTRL && a->h.d == -0.5f && a->row <= FLAT_BLOCK / 8 ? ftrl_flat_chunk : sparse_chunk, a);
  return LOOM_OK;
}

loom_code loom__k_sparse_apply_gradient_descent_f32(const loom_kctx *ctx) {
  /* var, alpha, grad, indices */
  opt_args a = {0};
  a.kind = OPT_GD;
  a.h.lr = scal(ctx, 1);
  return run_sparse(ctx, &a, 2, 3);
}

loom_code loom__k_sparse_apply_momentum_f32(const loom_kctx *ctx) {
  /* var, accum, lr, grad, indices, momentum */
  opt_args a = {0};
  a.kind = OPT_MOMENTUM;
  a.s[0] = ctx->in[1]->data;
  a.h.lr = scal(ctx, 2);
  a.h.a = scal(ctx, 5);
  a.h.flag = (int)(ctx->attrs->num & 1);
  return run_sparse(ctx, &a, 3, 4);
}

loom_code loom__k_sparse_apply_adagrad_f32(const loom_kctx *ctx) {
  /* var, accum, lr, grad, indices */
  opt_args a = {0};
  a.kind = OPT_ADAGRAD;
  a.s[0] = ctx->in[1]->data;
  a.h.lr = scal(ctx, 2);
  return run_sparse(ctx, &a, 3, 4);
}

LOOM_HOT static void adam_untouched_chunk(void *arg, int64_t lo, int64_t hi) {
  const opt_args *a = arg;
  const int64_t row = a->row;
  for (int64_t r = lo; r < hi;) {
    if (a->bitmap[r >> 6] >> (r & 63) & 1) {
      r++;
      continue;
    }
    int64_t e = r + 1; /* run of untouched rows */
    while (e < hi && !(a->bitmap[e >> 6] >> (e & 63) & 1)) e++;
    int64_t off = r * row;
    adam_span_zero(a->var + off, a->s[0] + off, a->s[1] + off, (e - r) * row, &a->h);
    r = e;
  }
}

loom_code loom__k_sparse_apply_adam_f32(const loom_kctx *ctx) {
  /* var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices;
   * attrs.num bit 1 = lazy (touch only the given rows) */
  opt_args a = {0};
  a.kind = OPT_ADAM;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  adam_hyper(ctx, &a.h);
  a.h.flag = 0; /* TF's sparse Adam has no Nesterov form */
  int lazy = (int)((ctx->attrs->num >> 1) & 1);
  int64_t nu = 0;
  loom_code rc = sparse_prepare(ctx, 9, 10, !lazy, &a, &nu);
  if (rc) return rc;
  if (a.row == 0) return LOOM_OK;
  if (nu > 0) loom__parallel_for(ctx->pool, nu, row_grain(a.row), sparse_chunk, &a);
  if (!lazy) {
    int64_t nrows = ctx->in[0]->dims[0];
    loom__parallel_for(ctx->pool, nrows, row_grain(a.row), adam_untouched_chunk, &a);
  }
  return LOOM_OK;
}

loom_code loom__k_sparse_apply_ftrl_f32(const loom_kctx *ctx) {
  /* var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power */
  opt_args a = {0};
  a.kind = OPT_FTRL;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.h.lr = scal(ctx, 5);
  a.h.a = scal(ctx, 6);
  a.h.b = scal(ctx, 7);
  a.h.c = scal(ctx, 8);
  a.h.d = scal(ctx, 9);
  return run_sparse(ctx, &a, 3, 4);
}

/* RMSProp's rows without an index in Keras' legacy form: the mean square (and the mean gradient) decay by
 * rho (s[0] = ms, or s[0] = mg and s[1] = ms when centered). */
LOOM_HOT static void rms_untouched_chunk(void *arg, int64_t lo, int64_t hi) {
  const opt_args *a = arg;
  const int64_t row = a->row;
  const float rho = a->h.a;
  const int ns = a->kind == OPT_CRMSPROP ? 2 : 1;
  for (int64_t r = lo; r < hi; r++) {
    if (a->bitmap[r >> 6] >> (r & 63) & 1) continue;
    for (int k = 0; k < ns; k++)
      for (int64_t c = 0; c < row; c++) a->s[k][r * row + c] *= rho;
  }
}

/* attrs.num bit 0: Keras' legacy form (epsilon outside the square root; every row's mean square decays) */
static loom_code run_sparse_rms(const loom_kctx *ctx, opt_args *a, int gi, int ii) {
  a->h.flag = (int)(ctx->attrs->num & 1);
  if (!a->h.flag) return run_sparse(ctx, a, gi, ii);
  int64_t nu = 0;
  loom_code rc = sparse_prepare(ctx, gi, ii, 1, a, &nu);
  if (rc) return rc;
  if (a->row == 0) return LOOM_OK;
  if (nu > 0) loom__parallel_for(ctx->pool, nu, row_grain(a->row), sparse_chunk, a);
  loom__parallel_for(ctx->pool, ctx->in[0]->dims[0], row_grain(a->row), rms_untouched_chunk, a);
  return LOOM_OK;
}

loom_code loom__k_sparse_apply_rmsprop_f32(const loom_kctx *ctx) {
  /* var, ms, mom, lr, rho, momentum, epsilon, grad, indices */
  opt_args a = {0};
  a.kind = OPT_RMSPROP;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.h.lr = scal(ctx, 3);
  a.h.a = scal(ctx, 4);
  a.h.b = scal(ctx, 5);
  a.h.c = scal(ctx, 6);
  return run_sparse_rms(ctx, &a, 7, 8);
}

loom_code loom__k_sparse_apply_centered_rmsprop_f32(const loom_kctx *ctx) {
  /* var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices */
  opt_args a = {0};
  a.kind = OPT_CRMSPROP;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.s[2] = ctx->in[3]->data;
  a.h.lr = scal(ctx, 4);
  a.h.a = scal(ctx, 5);
  a.h.b = scal(ctx, 6);
  a.h.c = scal(ctx, 7);
  return run_sparse_rms(ctx, &a, 8, 9);
}

loom_code loom__k_sparse_apply_adadelta_f32(const loom_kctx *ctx) {
  /* var, accum, accum_update, lr, rho, epsilon, grad, indices */
  opt_args a = {0};
  a.kind = OPT_ADADELTA;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.h.lr = scal(ctx, 3);
  a.h.a = scal(ctx, 4);
  a.h.b = scal(ctx, 5);
  return run_sparse(ctx, &a, 6, 7);
}

loom_code loom__k_sparse_apply_proximal_gradient_descent_f32(const loom_kctx *ctx) {
  /* var, alpha, l1, l2, grad, indices */
  opt_args a = {0};
  a.kind = OPT_PROX_GD;
  a.h.lr = scal(ctx, 1);
  a.h.a = scal(ctx, 2);
  a.h.b = scal(ctx, 3);
  return run_sparse(ctx, &a, 4, 5);
}

loom_code loom__k_sparse_apply_proximal_adagrad_f32(const loom_kctx *ctx) {
  /* var, accum, lr, l1, l2, grad, indices */
  opt_args a = {0};
  a.kind = OPT_PROX_ADAGRAD;
  a.s[0] = ctx->in[1]->data;
  a.h.lr = scal(ctx, 2);
  a.h.a = scal(ctx, 3);
  a.h.b = scal(ctx, 4);
  return run_sparse(ctx, &a, 5, 6);
}

loom_code loom__k_sparse_apply_adagrad_da_f32(const loom_kctx *ctx) {
  /* var, gradient_accumulator, gradient_squared_accumulator, grad, indices, lr, l1, l2, global_step */
  opt_args a = {0};
  a.kind = OPT_ADAGRAD_DA;
  a.s[0] = ctx->in[1]->data;
  a.s[1] = ctx->in[2]->data;
  a.h.lr = scal(ctx, 5);
  a.h.a = scal(ctx, 6);
  a.h.b = scal(ctx, 7);
  a.h.c = step_scal(ctx, 8);
  a.h.flag = 1; /* TF's sparse form */
  return run_sparse(ctx, &a, 3, 4);
}

/* =====================================================================
 * Assign family
 * ===================================================================== */
typedef struct copy_args {
  char *dst;
  const char *src;
} copy_args;
static void copy_chunk(void *arg, int64_t lo, int64_t hi) {
  const copy_args *c = arg;
  memcpy(c->dst + lo, c->src + lo, (size_t)(hi - lo));
}

loom_code loom__k_assign(const loom_kctx *ctx) {
  const loom_buf *ref = ctx->in[0], *val = ctx->in[1];
  size_t nbytes = (size_t)ref->numel * loom_dtype_size(ref->dtype);
  if (!nbytes || ref->data == val->data) return LOOM_OK;
  copy_args c = {ref->data, val->data};
  loom__parallel_for(ctx->pool, (int64_t)nbytes, (int64_t)1 << 20, copy_chunk, &c);
  return LOOM_OK;
}

typedef struct ew_args {
  void *x;
  const void *y;
  int op; /* 0 add, 1 sub, 2 mul */
} ew_args;

#define EW_CHUNK(sfx, T)                                                    \
  LOOM_HOT static void ew_##sfx(void *arg, int64_t lo, int64_t hi) {                \
    const ew_args *e = arg;                                                 \
    T *restrict x = (T *)e->x + lo;                                         \
    const T *restrict y = (const T *)e->y + lo;                             \
    int64_t n = hi - lo;                                                    \
    if (e->op == 0)                                                         \
      for (int64_t i = 0; i < n; i++) x[i] += y[i];                         \
    else if (e->op == 1)                                                    \
      for (int64_t i = 0; i < n; i++) x[i] -= y[i];                         \
    else                                                                    \
      for (int64_t i = 0; i < n; i++) x[i] *= y[i];                         \
  }
EW_CHUNK(f32, float)
EW_CHUNK(f64, double)
/* integers wrap around like TF (computed unsigned) */
#define EW_CHUNK_I(sfx, T, U)                                               \
  LOOM_HOT static void ew_##sfx(void *arg, int64_t lo, int64_t hi) {                \
    const ew_args *e = arg;                                                 \
    T *restrict x = (T *)e->x + lo;                                         \
    const T *restrict y = (const T *)e->y + lo;                             \
    int64_t n = hi - lo;                                                    \
    if (e->op == 0)                                                         \
      for (int64_t i = 0; i < n; i++) x[i] = (T)((U)x[i] + (U)y[i]);        \
    else if (e->op == 1)                                                    \
      for (int64_t i = 0; i < n; i++) x[i] = (T)((U)x[i] - (U)y[i]);        \
    else                                                                    \
      for (int64_t i = 0; i < n; i++) x[i] = (T)((U)x[i] * (U)y[i]);        \
  }
EW_CHUNK_I(i32, int32_t, uint32_t)
EW_CHUNK_I(i64, int64_t, uint64_t)
EW_CHUNK_I(u8, uint8_t, uint8_t)

static loom_code assign_ew(const loom_kctx *ctx, int op) {
  const loom_buf *ref = ctx->in[0], *val = ctx->in[1];
  ew_args e = {ref->data, val->data, op};
  loom_range_fn fn = NULL;
  switch (ref->dtype) {
  case LOOM_F32: fn = ew_f32; break;
  case LOOM_F64: fn = ew_f64; break;
  case LOOM_I32: fn = ew_i32; break;
  case LOOM_I64: fn = ew_i64; break;
  case LOOM_U8: fn = ew_u8; break;
  default:
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no kernel for %s", loom_dtype_name(ref->dtype));
  }
  if (ref->numel > 0) loom__parallel_for(ctx->pool, ref->numel, LOOM_PAR_GRAIN, fn, &e);
  return LOOM_OK;
}
loom_code loom__k_assign_add(const loom_kctx *ctx) { return assign_ew(ctx, 0); }
loom_code loom__k_assign_sub(const loom_kctx *ctx) { return assign_ew(ctx, 1); }
loom_code loom__k_assign_mul(const loom_kctx *ctx) { return assign_ew(ctx, 2); }

/* =====================================================================
 * Ref scatter ops: var[indices[i], :] (=, +=, -=) updates[i, :]. Columns
 * are split among threads; each thread walks every index in order, so
 * duplicates accumulate (Add/Sub) or the last one wins (Update).
 * ===================================================================== */
typedef struct sc_args {
  char *ref;
  const char *upd;
  const void *ind;
  int ind64;
  int64_t n, row;
  int op; /* 0 update, 1 add, 2 sub */
} sc_args;

static inline int64_t sc_index(const sc_args *s, int64_t i) {
  return s->ind64 ? ((const int64_t *)s->ind)[i] : ((const int32_t *)s->ind)[i];
}

#define SC_CHUNK(sfx, T)                                                             \
  LOOM_HOT static void sc_##sfx(void *arg, int64_t lo, int64_t hi) {                         \
    const sc_args *s = arg;                                                          \
    T *ref = (T *)s->ref;                                                            \
    const T *upd = (const T *)s->upd;                                                \
    for (int64_t i = 0; i < s->n; i++) {                                             \
      T *restrict d = ref + sc_index(s, i) * s->row + lo;                            \
      const T *restrict u = upd + i * s->row + lo;                                   \
      int64_t m = hi - lo;                                                           \
      if (s->op == 0)                                                                \
        for (int64_t c = 0; c < m; c++) d[c] = u[c];                                 \
      else if (s->op == 1)                                                           \
        for (int64_t c = 0; c < m; c++) d[c] += u[c];                                \
      else                                                                           \
        for (int64_t c = 0; c < m; c++) d[c] -= u[c];                                \
    }                                                                                \
  }
SC_CHUNK(f32, float)
SC_CHUNK(f64, double)
SC_CHUNK(i32, int32_t)
SC_CHUNK(i64, int64_t)

static loom_code scatter(const loom_kctx *ctx, int op) {
  const loom_buf *ref = ctx->in[0], *ind = ctx->in[1], *upd = ctx->in[2];
  int64_t nrows = ref->ndim ? ref->dims[0] : 0;
  int64_t row = nrows > 0 ? ref->numel / nrows : 0;
  sc_args s = {ref->data, upd->data, ind->data, ind->dtype == LOOM_I64, ind->numel, row, op};
  if (upd->numel != s.n * row)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "updates have %lld elements, expected %lld rows of %lld",
                           (long long)upd->numel, (long long)s.n, (long long)row);
  for (int64_t i = 0; i < s.n; i++) {
    int64_t k = sc_index(&s, i);
    if (k < 0 || k >= nrows)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "indices[%lld] = %lld is not in [0, %lld)",
                             (long long)i, (long long)k, (long long)nrows);
  }
  if (s.n == 0 || row == 0) return LOOM_OK;
  loom_range_fn fn = NULL;
  switch (ref->dtype) {
  case LOOM_F32: fn = sc_f32; break;
  case LOOM_F64: fn = sc_f64; break;
  case LOOM_I32: fn = sc_i32; break;
  case LOOM_I64: fn = sc_i64; break;
  default:
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no kernel for %s", loom_dtype_name(ref->dtype));
  }
  int64_t grain = LOOM_PAR_GRAIN / (s.n > 0 ? s.n : 1);
  loom__parallel_for(ctx->pool, row, grain > 16 ? grain : 16, fn, &s);
  return LOOM_OK;
}
loom_code loom__k_scatter_update(const loom_kctx *ctx) { return scatter(ctx, 0); }
loom_code loom__k_scatter_add(const loom_kctx *ctx) { return scatter(ctx, 1); }
loom_code loom__k_scatter_sub(const loom_kctx *ctx) { return scatter(ctx, 2); }

/* =====================================================================
 * Learning-rate schedules. attrs: num = kind, alpha = learning rate,
 * start = decay_steps, beta = decay_rate (exponential) / end_lr
 * (polynomial) / alpha (cosine), limit = power, keepdims = staircase/cycle.
 * Piecewise: inputs 1 = boundaries (float64 [n]), 2 = values (float32 [n+1]).
 * ===================================================================== */
static double read_scalar(const loom_buf *b) {
  switch (b->dtype) {
  case LOOM_I32: return (double)*(const int32_t *)b->data;
  case LOOM_I64: return (double)*(const int64_t *)b->data;
  case LOOM_F32: return (double)*(const float *)b->data;
  case LOOM_F64: return *(const double *)b->data;
  default: return 0.0;
  }
}

loom_code loom__k_lr_schedule(const loom_kctx *ctx) {
  const loom_attrs *at = ctx->attrs;
  double step = read_scalar(ctx->in[0]);
  double lr = at->alpha, ds = at->start, r = 0.0;
  switch ((int)at->num) {
  case LOOM_LRS_EXPONENTIAL: {
    double p = step / ds;
    if (at->keepdims) p = floor(p);
    r = lr * pow(at->beta, p);
    break;
  }
  case LOOM_LRS_PIECEWISE: {
    const double *b = ctx->in[1]->data;
    const float *v = ctx->in[2]->data;
    int64_t n = ctx->in[1]->numel, i = 0;
    while (i < n && !(step <= b[i])) i++;
    r = v[i];
    break;
  }
  case LOOM_LRS_POLYNOMIAL: {
    double s = step;
    if (at->keepdims) {
      double mult = s == 0.0 ? 1.0 : ceil(s / ds);
      ds *= mult;
    } else if (s > ds) {
      s = ds;
    }
    double p = s / ds;
    r = (lr - at->beta) * pow(1.0 - p, at->limit) + at->beta;
    break;
  }
  case LOOM_LRS_COSINE: {
    double s = step < ds ? step : ds;
    double c = 0.5 * (1.0 + cos(3.14159265358979323846 * s / ds));
    r = lr * ((1.0 - at->beta) * c + at->beta);
    break;
  }
  default:
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "unknown schedule kind %lld", (long long)at->num);
  }
  *(float *)ctx->out[0]->data = (float)r;
  return LOOM_OK;
}
