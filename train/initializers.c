/* train/initializers.c - tf.initializers: zeros, ones, constant, random
 * uniform / normal / truncated normal, variance scaling with Glorot and He,
 * and loom_initializer_build, which turns one into the graph nodes that
 * produce a variable's initial value (loom_train.h). */
#include <string.h>
#include <stdio.h>
#include <math.h>
#include "train/train_impl.h"

static loom_initializer init_make(int kind, double a, double b, int64_t seed) {
  loom_initializer i;
  memset(&i, 0, sizeof i);
  i.kind = kind;
  i.a = a;
  i.b = b;
  i.seed = seed;
  return i;
}
loom_initializer loom_init_zeros(void) { return init_make(LOOM_INIT_ZEROS, 0, 0, LOOM_SEED_NONE); }
loom_initializer loom_init_ones(void) { return init_make(LOOM_INIT_ONES, 1, 0, LOOM_SEED_NONE); }
loom_initializer loom_init_constant(double value) { return init_make(LOOM_INIT_CONSTANT, value, 0, LOOM_SEED_NONE); }
loom_initializer loom_init_random_uniform(double minval, double maxval, int64_t seed) {
  return init_make(LOOM_INIT_RANDOM_UNIFORM, minval, maxval, seed);
}
loom_initializer loom_init_random_normal(double mean, double stddev, int64_t seed) {
  return init_make(LOOM_INIT_RANDOM_NORMAL, mean, stddev, seed);
}
loom_initializer loom_init_truncated_normal(double mean, double stddev, int64_t seed) {
  return init_make(LOOM_INIT_TRUNCATED_NORMAL, mean, stddev, seed);
}
loom_initializer loom_init_variance_scaling(double scale, loom_fan_mode mode, loom_init_distribution dist,
                                            int64_t seed) {
  loom_initializer i = init_make(LOOM_INIT_VARIANCE_SCALING, scale, 0, seed);
  i.mode = mode;
  i.distribution = dist;
  return i;
}
loom_initializer loom_init_glorot_uniform(int64_t seed) {
  return loom_init_variance_scaling(1.0, LOOM_FAN_AVG, LOOM_DIST_UNIFORM, seed);
}
loom_initializer loom_init_glorot_normal(int64_t seed) {
  return loom_init_variance_scaling(1.0, LOOM_FAN_AVG, LOOM_DIST_TRUNCATED_NORMAL, seed);
}
loom_initializer loom_init_he_uniform(int64_t seed) {
  return loom_init_variance_scaling(2.0, LOOM_FAN_IN, LOOM_DIST_UNIFORM, seed);
}
loom_initializer loom_init_he_normal(int64_t seed) {
  return loom_init_variance_scaling(2.0, LOOM_FAN_IN, LOOM_DIST_TRUNCATED_NORMAL, seed);
}

/* A tensor of the full shape filled with v (cast to dtype): a scalar
 * constant, filled by a Fill node for rank >= 1 (no big constant). */
static loom_output const_fill(loom_graph *g, loom_dtype dt, int ndim, const int64_t *dims, double v,
                              const char *name) {
  loom_tensor *t = loom_tensor_new(dt, 0, NULL, NULL);
  if (!t) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", name);
    return loom__graph_dummy(g);
  }
  void *d = loom_tensor_data(t);
  switch (dt) {
  case LOOM_F32: *(float *)d = (float)v; break;
  case LOOM_F64: *(double *)d = v; break;
  case LOOM_I32: *(int32_t *)d = (int32_t)v; break;
  case LOOM_I64: *(int64_t *)d = (int64_t)v; break;
  case LOOM_U8: *(uint8_t *)d = (uint8_t)v; break;
  case LOOM_BOOL: *(uint8_t *)d = v != 0.0; break;
  default: break;
  }
  loom_output o;
  if (ndim == 0) {
    o = loom_const(g, t, name);
  } else {
    char vn[256];
    snprintf(vn, sizeof vn, "%s/value", name);
    o = loom_fill(g, ndim, dims, loom_const(g, t, vn), name);
  }
  loom_tensor_free(t);
  return o;
}

static void compute_fans(int ndim, const int64_t *dims, double *fan_in, double *fan_out) {
  if (ndim < 1) {
    *fan_in = *fan_out = 1;
  } else if (ndim == 1) {
    *fan_in = *fan_out = (double)dims[0];
  } else if (ndim == 2) {
    *fan_in = (double)dims[0];
    *fan_out = (double)dims[1];
  } else {
    double rf = 1;
    for (int i = 0; i < ndim - 2; i++) rf *= (double)dims[i];
    *fan_in = (double)dims[ndim - 2] * rf;
    *fan_out = (double)dims[ndim - 1] * rf;
  }
}

loom_output loom_initializer_build(loom_graph *g, const loom_initializer *init, loom_dtype dtype, int ndim,
                                   const int64_t *dims, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (ndim < 0 || ndim > LOOM_MAX_DIMS || (ndim && !dims)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "initializer: invalid rank %d", ndim);
    return loom__graph_dummy(g);
  }
  for (int i = 0; i < ndim; i++)
    if (dims[i] < 0) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "initializer: the shape must be fully known");
      return loom__graph_dummy(g);
    }
  int isfloat = dtype == LOOM_F32 || dtype == LOOM_F64;
  loom_initializer def;
  if (!init || init->kind == LOOM_INIT_DEFAULT) {
    def = isfloat ? loom_init_glorot_uniform(init ? init->seed : LOOM_SEED_NONE) : loom_init_zeros();
    init = &def;
  }
  switch (init->kind) {
  case LOOM_INIT_ZEROS: return const_fill(g, dtype, ndim, dims, 0.0, name ? name : "zeros");
  case LOOM_INIT_ONES: return const_fill(g, dtype, ndim, dims, 1.0, name ? name : "ones");
  case LOOM_INIT_CONSTANT: return const_fill(g, dtype, ndim, dims, init->a, name ? name : "Const");
  default: break;
  }
  if (!isfloat) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "initializer: random initializers need a float dtype, not %s",
                         loom_dtype_name(dtype));
    return loom__graph_dummy(g);
  }
  int64_t s1 = 0, s2 = 0;
  loom_graph_get_seed(g, init->seed, init->seed != LOOM_SEED_NONE, &s1, &s2);
  uint64_t u1 = (uint64_t)s1, u2 = (uint64_t)s2;
  switch (init->kind) {
  case LOOM_INIT_RANDOM_UNIFORM:
    return loom_random_uniform(g, ndim, dims, dtype, init->a, init->b, u1, u2, name ? name : "random_uniform");
  case LOOM_INIT_RANDOM_NORMAL:
    return loom_random_normal(g, ndim, dims, dtype, init->a, init->b, u1, u2, name ? name : "random_normal");
  case LOOM_INIT_TRUNCATED_NORMAL:
    return loom_truncated_normal(g, ndim, dims, dtype, init->a, init->b, u1, u2, name ? name : "truncated_normal");
  case LOOM_INIT_VARIANCE_SCALING: {
    if (!(init->a > 0)) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "variance_scaling: scale must be positive, got %g", init->a);
      return loom__graph_dummy(g);
    }
    double fan_in, fan_out, n;
    compute_fans(ndim, dims, &fan_in, &fan_out);
    n = init->mode == LOOM_FAN_IN ? fan_in : init->mode == LOOM_FAN_OUT ? fan_out : (fan_in + fan_out) / 2.0;
    double scale = init->a / (n > 1.0 ? n : 1.0);
    if (init->distribution == LOOM_DIST_UNIFORM) {
      double limit = sqrt(3.0 * scale);
      return loom_random_uniform(g, ndim, dims, dtype, -limit, limit, u1, u2, name ? name : "random_uniform");
    }
    if (init->distribution == LOOM_DIST_UNTRUNCATED_NORMAL)
      return loom_random_normal(g, ndim, dims, dtype, 0.0, sqrt(scale), u1, u2, name ? name : "random_normal");
    /* constant from scipy.stats.truncnorm.std(a=-2, b=2, loc=0., scale=1.) */
    return loom_truncated_normal(g, ndim, dims, dtype, 0.0, sqrt(scale) / .87962566103423978, u1, u2,
                                 name ? name : "truncated_normal");
  }
  default:
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "initializer: unknown kind %d", (int)init->kind);
    return loom__graph_dummy(g);
  }
}

