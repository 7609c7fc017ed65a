/* tests/gpu/test_parity_ops.c - GPU vs CPU parity of every kernel of the
 * main LOOM_CUDA_KERNELS list (kernels/cuda/cuda_kernels.h) that
 * tests/gpu/test_parity.c does not already cover, for every dtype listed
 * there: all binary and unary elementwise ops (special values included:
 * +-0, NaN, +-inf, ties of round, denormals), every *Grad helper op called
 * through its builder, BiasAdd / BiasAddGrad, sigmoid cross entropy,
 * ZerosLike / OnesLike, Cast between every pair of {f32, f64, i32, i64, u8,
 * bool} (NaN, inf and out-of-range floats to integers: the CPU saturates),
 * Assign / AssignAdd / AssignSub / AssignMul on variables, Dropout (same seed:
 * same mask), every reduction and ArgMax/ArgMin over several axis sets (both
 * the thread-per-output and the block-per-output paths of reduce_run in
 * kernels/cuda/reduce.cu), ReduceSumLike, the conv backprops and pool
 * gradients called directly, Gather of every element size, UnsortedSegmentSum,
 * the f64 forms of matmul / batch matmul / softmax / cross entropies / random
 * ops, SparseApplyGradientDescent, and every dense optimizer trained 5 steps
 * on a tiny model (loss per step, then every variable and slot variable).
 *
 * Shapes per family: a typical one, a broadcast one where the op
 * broadcasts, a zero-size one, rank-0 scalars, rank > 4 where the kernel
 * walks dims, and one large case (> 300k elements: many blocks and
 * grid-stride loops).
 *
 * Comparison: tolerance 0 means bit-exact (signed zeros must agree; NaN
 * matches any NaN) and is used for exact ops (IEEE add/sub/mul/div/sqrt,
 * selection, integers, layout, casts); compound float arithmetic uses
 * |cpu - gpu| / (1 + |cpu|) <= 1e-6 (f32) / 1e-12 (f64) (the GPU may contract
 * to FMA and its libm differs in the last ulp); looser bounds are documented
 * where the GPU legitimately sums in another order. A node that has no CUDA
 * kernel runs on the CPU with copies, which would make a comparison vacuous:
 * every such fallback during a case is reported as a failure.
 *
 * Usage: test_parity_ops [section...] (binary unary bias sxent like cast
 * reduce arg sumlike assign dropout conv pool gather segsum extra optim);
 * no argument runs everything. Without a CUDA device it prints a skip line
 * and exits 0. */
#include <stdarg.h>
#include "tests/gpu/parity.h"

#define M(dt) (1u << (dt))
#define MFLT (M(F32) | M(F64))
#define MNUM (MFLT | M(I32) | M(I64))
#define MALL (MNUM | M(U8) | M(BOOL))
#define T32 1e-6
#define T64 1e-12

static int g_notes;

/* ------------------------------------------------------- fallback watch */
static int g_fb;
static char g_fb_msg[512];
static void log_sink(loom_log_level lv, const char *m, void *u) {
  (void)u;
  if (strstr(m, "runs on the CPU with copies")) {
    if (!g_fb) snprintf(g_fb_msg, sizeof g_fb_msg, "%s", m);
    g_fb++;
    return;
  }
  if (lv >= LOOM_LOG_WARN) fprintf(stderr, "%s\n", m);
}

/* ------------------------------------------------------------ values */
/* V_MIX: special values, small integers and uniform (-8, 8) mixed; V_SPEC: special values only (dyadic, so
 * products and 1 - y*y are exact: no cancellation noise); V_SPECSUM: special values whose sums are exact in any
 * order (no 1e20 next to 0.5). */
enum { V_MIX, V_SIGNED, V_WIDE, V_POS, V_SMALL, V_BOOL, V_NEAR1, V_UNIT, V_RELU6, V_CAST, V_IDX, V_SPEC, V_SPECSUM, V_MID };

static uint64_t r64s = 0x9E3779B97F4A7C15ull;
static uint64_t r64(void) {
  r64s ^= r64s << 13;
  r64s ^= r64s >> 7;
  r64s ^= r64s << 17;
  return r64s;
}
static double ur(void) { return (double)(r64() >> 11) * 0x1p-53; }
static int64_t pick(int64_t n) { return (int64_t)(ur() * (double)n); }

static const double fmix_sp[] = {0.0,  -0.0, NAN,  INFINITY, -INFINITY, 0.5,   -0.5,  1.0,   -1.0,  1.5,   -1.5,
                                 2.5,  -2.5, 3.5,  6.0,      -6.0,      1e20,  -1e20, 88.0,
                                 -88., 710., -710.};
static const double fcast_sp[] = {NAN,        INFINITY,     -INFINITY,   0.0,        -0.0,         0.5,
                                  -0.7,       -1.0,         1.5,         -2.5,       255.0,        255.9,
                                  256.0,      300.0,        -300.0,      -128.5,     127.5,        3e9,
                                  -3e9,       2147483647.0, 2147483648.0, -2147483648.0, -2147483649.0, 4294967296.0,
                                  9.3e18,     -9.3e18,      9223372036854775807.0, -9223372036854775808.0, 1e20, -1e20,
                                  16777217.0, 0.49999999999999994};
static const int64_t i32_sp[] = {0, -1, 1, 2, -2, INT32_MIN, INT32_MAX, INT32_MIN + 1, 255, 256, 300, -129};
static const int64_t i64_sp[] = {0,          -1,        1,         2,        INT64_MIN,           INT64_MAX,
                                 INT64_MIN + 1, (1ll << 40) + 300, -(1ll << 33) - 1, (1ll << 53) + 1, 16777217,
                                 (1ll << 31), -(1ll << 31) - 1, 255, 300};
#define NSP(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

static double fval(int kind) {
  double u = ur();
  switch (kind) {
  case V_MIX:
    if (u < 1.0 / 3) return fmix_sp[pick(NSP(fmix_sp))];
    if (u < 2.0 / 3) return (double)(pick(7) - 3);
    return 16 * ur() - 8;
  case V_SPEC: return fmix_sp[pick(NSP(fmix_sp))];
  case V_SPECSUM: {
    static const double sp[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 0.5, -1.5, 2.5, 3.0, -4.0, 0.25};
    return sp[pick(NSP(sp))];
  }
  case V_SIGNED: return 2 * u - 1;
  case V_WIDE: return 16 * u - 8;
  case V_MID: return 6 * u - 3;
  case V_POS: return 0.05 + 4 * u;
  case V_SMALL: return (double)(pick(7) - 3);
  case V_BOOL: return u < 0.5;
  case V_NEAR1: return 0.999 + 0.002 * u;
  case V_UNIT: return u;
  case V_RELU6: {
    static const double sp[] = {0.0, -0.0, 6.0, -6.0, NAN, 3.0, INFINITY, 5.9999999};
    if (u < 1.0 / 3) return sp[pick(NSP(sp))];
    return 10 * ur() - 2;
  }
  case V_CAST:
    if (u < 0.5) return fcast_sp[pick(NSP(fcast_sp))];
    return 600 * ur() - 300;
  default: return u;
  }
}

static int64_t ival(int kind, loom_dtype dt, int64_t hi) {
  double u = ur();
  int is64 = dt == I64;
  switch (kind) {
  case V_MIX:
    if (u < 0.25) return is64 ? i64_sp[pick(NSP(i64_sp))] : i32_sp[pick(NSP(i32_sp))];
    if (u < 0.5) return pick(7) - 3;
    return pick(2000) - 1000;
  case V_POS: return 1 + pick(999);
  case V_SMALL: return pick(7) - 3;
  case V_BOOL: return u < 0.5;
  case V_NEAR1:
    if (hi == 2 && u < 1.0 / 32) return 2;
    return ur() < 0.5 ? 1 : -1;
  case V_CAST:
    if (u < 0.5) return is64 ? i64_sp[pick(NSP(i64_sp))] : i32_sp[pick(NSP(i32_sp))];
    return is64 ? (int64_t)r64() : (int64_t)(int32_t)(uint32_t)r64();
  case V_IDX: return pick(hi);
  default: return pick(2000) - 1000;
  }
}

static loom_tensor *gen(loom_dtype dt, int nd, const int64_t *dims, int kind, int64_t hi) {
  loom_tensor *t = loom_tensor_new(dt, nd, dims, NULL);
  int64_t n = loom_tensor_numel(t);
  void *d = loom_tensor_data(t);
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
    case F32: ((float *)d)[i] = (float)fval(kind); break;
    case F64: ((double *)d)[i] = fval(kind); break;
    case I32: ((int32_t *)d)[i] = (int32_t)ival(kind, dt, hi); break;
    case I64: ((int64_t *)d)[i] = ival(kind, dt, hi); break;
    case BOOL: ((uint8_t *)d)[i] = ur() < 0.5; break;
    default:
      ((uint8_t *)d)[i] = (uint8_t)(kind == V_IDX ? pick(hi) : kind == V_SMALL ? pick(4) : kind == V_BOOL ? ur() < .5 : pick(256));
      break;
    }
  }
  return t;
}

/* (the comparison, parity_cmp, is in tests/gpu/parity.h) */

/* ------------------------------------------------------- one graph case */
#define MAXF 8
typedef struct {
  loom_graph *g;
  int nf, nx, expect_err;
  loom_output feeds[MAXF];
  loom_tensor *fv[MAXF];
  loom_output fetch[MAXF];
  double tol[MAXF];
  const char *what[MAXF];
} gc;

static void gc_init(gc *c) {
  memset(c, 0, sizeof *c);
  c->g = loom_graph_new();
}
static loom_output gc_feed_t(gc *c, loom_tensor *t) {
  loom_output p = loom_placeholder(c->g, loom_tensor_dtype(t), loom_tensor_ndim(t), loom_tensor_dims(t), NULL);
  c->feeds[c->nf] = p;
  c->fv[c->nf++] = t;
  return p;
}
static loom_output gc_feed(gc *c, loom_dtype dt, int nd, const int64_t *dims, int kind, int64_t hi) {
  return gc_feed_t(c, gen(dt, nd, dims, kind, hi));
}
static void gc_fetch(gc *c, loom_output o, double tol, const char *what) {
  c->fetch[c->nx] = o;
  c->tol[c->nx] = tol;
  c->what[c->nx++] = what;
}

static int both_failed(const char *name, int expect, loom_code r1, loom_status *s1, loom_code r2, loom_status *s2) {
  g_checked++;
  if (r1 != r2 || !r1) {
    printf("FAIL %s: cpu %s (%s), gpu %s (%s)\n", name, loom_code_name(r1), r1 ? loom_status_message(s1) : "ok",
           loom_code_name(r2), r2 ? loom_status_message(s2) : "ok");
    g_fail++;
    return 0;
  }
  if (!expect) {
    printf("FAIL %s: both devices failed: %s\n", name, loom_status_message(s1));
    g_fail++;
    return 0;
  }
  if (strcmp(loom_status_message(s1), loom_status_message(s2))) {
    printf("NOTE %s: same code %s, different messages:\n     cpu: %s\n     gpu: %s\n", name, loom_code_name(r1),
           loom_status_message(s1), loom_status_message(s2));
    g_notes++;
  }
  return 1;
}

static void check_fallback(const char *name, int fb0) {
  if (!parity_check(g_fb <= fb0, "%s: %d node(s) ran on the CPU instead of the GPU, e.g. \"%s\"", name, g_fb - fb0,
                    g_fb_msg))
    g_fb = 0;
}

static void gc_run(gc *c, const char *fmt, ...) {
  char name[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  loom_status *st = loom_status_new(), *s2 = loom_status_new();
  loom_session *sc = NULL, *sg = NULL;
  loom_tensor *oc[MAXF] = {0}, *og[MAXF] = {0};
  if (loom_graph_status(c->g, st)) {
    printf("FAIL %s: graph: %s\n", name, loom_status_message(st));
    g_fail++;
    goto done;
  }
  sc = session(c->g, LOOM_DEVICE_CPU);
  g_fb = 0;
  sg = session(c->g, LOOM_DEVICE_CUDA);
  if (!sc || !sg) {
    g_fail++;
    goto done;
  }
  loom_code r1 = loom_session_run(sc, c->feeds, c->fv, c->nf, c->fetch, oc, c->nx, NULL, 0, st);
  loom_code r2 = loom_session_run(sg, c->feeds, c->fv, c->nf, c->fetch, og, c->nx, NULL, 0, s2);
  check_fallback(name, 0);
  if (r1 || r2 || c->expect_err) {
    both_failed(name, c->expect_err, r1, st, r2, s2);
  } else {
    for (int k = 0; k < c->nx; k++) parity_cmp(name, c->what[k], oc[k], og[k], c->tol[k], c->nf ? c->fv[0] : NULL);
  }
done:
  for (int k = 0; k < c->nx; k++) {
    loom_tensor_free(oc[k]);
    loom_tensor_free(og[k]);
  }
  for (int k = 0; k < c->nf; k++) loom_tensor_free(c->fv[k]);
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(c->g);
  loom_status_free(st);
  loom_status_free(s2);
}

static double tol_for(loom_dtype dt, double t32, double t64) { return dt == F32 ? t32 : dt == F64 ? t64 : 0; }
static const char *dn(loom_dtype dt) { return loom_dtype_name(dt); }

/* sections selected on the command line */
static int g_argc;
static char **g_argv;
static int want(const char *sec) {
  if (g_argc < 2) return 1;
  for (int i = 1; i < g_argc; i++)
    if (!strcmp(g_argv[i], sec)) return 1;
  return 0;
}

/* ================================================================ binary */
#define B2(fname, expr) \
  static loom_output fname(loom_graph *g, const loom_output *i) { return expr; }
B2(f_add, loom_add(g, i[0], i[1], NULL))
B2(f_sub, loom_sub(g, i[0], i[1], NULL))
B2(f_mul, loom_mul(g, i[0], i[1], NULL))
B2(f_div, loom_div(g, i[0], i[1], NULL))
B2(f_pow, loom_pow(g, i[0], i[1], NULL))
B2(f_maximum, loom_maximum(g, i[0], i[1], NULL))
B2(f_minimum, loom_minimum(g, i[0], i[1], NULL))
B2(f_eq, loom_equal(g, i[0], i[1], NULL))
B2(f_ne, loom_not_equal(g, i[0], i[1], NULL))
B2(f_lt, loom_less(g, i[0], i[1], NULL))
B2(f_le, loom_less_equal(g, i[0], i[1], NULL))
B2(f_gt, loom_greater(g, i[0], i[1], NULL))
B2(f_ge, loom_greater_equal(g, i[0], i[1], NULL))
B2(f_and, loom_logical_and(g, i[0], i[1], NULL))
B2(f_or, loom_logical_or(g, i[0], i[1], NULL))
B2(f_relu_g, loom_relu_grad(g, i[0], i[1], NULL))
B2(f_relu6_g, loom_relu6_grad(g, i[0], i[1], NULL))
B2(f_sigmoid_g, loom_sigmoid_grad(g, i[0], i[1], NULL))
B2(f_tanh_g, loom_tanh_grad(g, i[0], i[1], NULL))
B2(f_elu_g, loom_elu_grad(g, i[0], i[1], NULL))
B2(f_selu_g, loom_selu_grad(g, i[0], i[1], NULL))
B2(f_lrelu_g, loom_leaky_relu_grad(g, i[0], i[1], 0.2, NULL))
B2(f_lrelu_g3, loom_leaky_relu_grad(g, i[0], i[1], 0.37, NULL))
B2(f_softplus_g, loom_softplus_grad(g, i[0], i[1], NULL))
B2(f_gelu_g, loom_gelu_grad(g, i[0], i[1], 0, NULL))
B2(f_gelu_g_tanh, loom_gelu_grad(g, i[0], i[1], 1, NULL))
B2(f_rsqrt_g, loom_rsqrt_grad(g, i[0], i[1], NULL))
B2(f_sqrt_g, loom_sqrt_grad(g, i[0], i[1], NULL))

typedef struct {
  const char *name;
  build_fn fn;
  unsigned dts;
  int ka, kb;
  double t32, t64; /* 0: exact */
} opspec;

static const opspec bops[] = {
    {"add", f_add, MNUM, V_MIX, V_MIX, 0, 0},
    {"sub", f_sub, MNUM, V_MIX, V_MIX, 0, 0},
    {"mul", f_mul, MNUM, V_MIX, V_MIX, 0, 0},
    {"div", f_div, MFLT, V_MIX, V_MIX, 0, 0},
    {"pow", f_pow, MFLT, V_MIX, V_MIX, T32, T64},
    {"pow pos", f_pow, MFLT, V_POS, V_WIDE, T32, T64},
    {"maximum", f_maximum, MNUM, V_MIX, V_MIX, 0, 0},
    {"minimum", f_minimum, MNUM, V_MIX, V_MIX, 0, 0},
    {"equal", f_eq, MNUM, V_MIX, V_MIX, 0, 0},
    {"not_equal", f_ne, MNUM, V_MIX, V_MIX, 0, 0},
    {"less", f_lt, MNUM, V_MIX, V_MIX, 0, 0},
    {"less_equal", f_le, MNUM, V_MIX, V_MIX, 0, 0},
    {"greater", f_gt, MNUM, V_MIX, V_MIX, 0, 0},
    {"greater_equal", f_ge, MNUM, V_MIX, V_MIX, 0, 0},
    {"logical_and", f_and, M(BOOL), V_BOOL, V_BOOL, 0, 0},
    {"logical_or", f_or, M(BOOL), V_BOOL, V_BOOL, 0, 0},
    {"relu_grad", f_relu_g, MFLT, V_MIX, V_MIX, 0, 0},
    {"relu6_grad", f_relu6_g, MFLT, V_MIX, V_RELU6, 0, 0},
    {"sigmoid_grad", f_sigmoid_g, MFLT, V_WIDE, V_WIDE, T32, T64},
    {"tanh_grad", f_tanh_g, MFLT, V_WIDE, V_WIDE, T32, T64},
    {"elu_grad", f_elu_g, MFLT, V_WIDE, V_WIDE, T32, T64},
    {"selu_grad", f_selu_g, MFLT, V_WIDE, V_WIDE, T32, T64},
    {"leaky_relu_grad", f_lrelu_g, MFLT, V_MIX, V_MIX, 0, 0},
    {"leaky_relu_grad a=.37", f_lrelu_g3, MFLT, V_MIX, V_MIX, 0, 0},
    {"softplus_grad", f_softplus_g, MFLT, V_WIDE, V_WIDE, T32, T64},
    {"gelu_grad", f_gelu_g, MFLT, V_WIDE, V_WIDE, T32, T64},
    {"gelu_grad tanh", f_gelu_g_tanh, MFLT, V_WIDE, V_MID, 1e-5, T64},
    {"rsqrt_grad", f_rsqrt_g, MFLT, V_MIX, V_MIX, 0, 0},
    {"sqrt_grad", f_sqrt_g, MFLT, V_MIX, V_MIX, 0, 0},
};

typedef struct {
  const char *tag;
  int na;
  int64_t a[LOOM_MAX_DIMS];
  int nb;
  int64_t b[LOOM_MAX_DIMS];
} shp2;
static const shp2 bshapes[] = {
    {"[33,65]", 2, {33, 65}, 2, {33, 65}},
    {"[33,65]+[65]", 2, {33, 65}, 1, {65}},
    {"[7,1,5]+[9,1]", 3, {7, 1, 5}, 2, {9, 1}},
    {"[17,3]+scalar", 2, {17, 3}, 0, {0}},
    {"scalar+[17,3]", 0, {0}, 2, {17, 3}},
    {"scalar+scalar", 0, {0}, 0, {0}},
    {"[0,5]+[5]", 2, {0, 5}, 1, {5}},
    {"[4,0]+[4,1]", 2, {4, 0}, 2, {4, 1}},
    {"rank6 [2,1,3,1,4,5]+[2,3,2,1,5]", 6, {2, 1, 3, 1, 4, 5}, 5, {2, 3, 2, 1, 5}},
    {"large [320001]", 1, {320001}, 1, {320001}},
    {"large bcast [1201,267]+[1201,1]", 2, {1201, 267}, 2, {1201, 1}},
};

static void sec_binary(void) {
  for (size_t o = 0; o < sizeof bops / sizeof bops[0]; o++) {
    const opspec *op = &bops[o];
    for (int dt = 1; dt < LOOM_DTYPE_COUNT; dt++) {
      if (!(op->dts & M(dt))) continue;
      /* Ops with a tolerance run on bounded inputs (V_WIDE), plus once on special values only: with large
       * inputs an ulp of FMA contraction or of the libm differs is amplified by cancellation (1 - y*y in
       * tanh_grad, x - x*z). The tanh-form GELU gradient has 1 + th and 1 - th^2 with th = tanh(...) near
       * +-1: an ulp of tanh is amplified ~1/(1 - |th|) (x in (-3, 3); its special-value run gets 10x). */
      const size_t ns = sizeof bshapes / sizeof bshapes[0];
      for (size_t s = 0; s <= ns; s++) {
        int spec = s == ns;
        if (spec && op->t32 == 0) continue;
        const shp2 *sh = &bshapes[spec ? 0 : s];
        gc c;
        gc_init(&c);
        loom_output in[2];
        in[0] = gc_feed(&c, (loom_dtype)dt, sh->na, sh->a, spec ? V_SPEC : op->ka, 0);
        in[1] = gc_feed(&c, (loom_dtype)dt, sh->nb, sh->b, spec ? V_SPEC : op->kb, 0);
        double t = tol_for((loom_dtype)dt, op->t32, op->t64);
        if (spec && op->fn == f_gelu_g_tanh) t *= 10; /* see above */
        gc_fetch(&c, op->fn(c.g, in), t, "output");
        gc_run(&c, "%s %s %s%s", op->name, dn((loom_dtype)dt), sh->tag, spec ? " special values" : "");
      }
    }
  }
}

/* ================================================================= unary */
#define B1(fname, expr) \
  static loom_output fname(loom_graph *g, const loom_output *i) { return expr; }
B1(f_neg, loom_neg(g, i[0], NULL))
B1(f_abs, loom_abs(g, i[0], NULL))
B1(f_square, loom_square(g, i[0], NULL))
B1(f_sign, loom_sign(g, i[0], NULL))
B1(f_exp, loom_exp(g, i[0], NULL))
B1(f_log, loom_log(g, i[0], NULL))
B1(f_log1p, loom_log1p(g, i[0], NULL))
B1(f_sqrt, loom_sqrt(g, i[0], NULL))
B1(f_rsqrt, loom_rsqrt(g, i[0], NULL))
B1(f_tanh, loom_tanh(g, i[0], NULL))
B1(f_sigmoid, loom_sigmoid(g, i[0], NULL))
B1(f_relu, loom_relu(g, i[0], NULL))
B1(f_relu6, loom_relu6(g, i[0], NULL))
B1(f_elu, loom_elu(g, i[0], NULL))
B1(f_selu, loom_selu(g, i[0], NULL))
B1(f_lrelu, loom_leaky_relu(g, i[0], 0.2, NULL))
B1(f_softplus, loom_softplus(g, i[0], NULL))
B1(f_gelu, loom_gelu(g, i[0], 0, NULL))
B1(f_gelu_tanh, loom_gelu(g, i[0], 1, NULL))
B1(f_floor, loom_floor(g, i[0], NULL))
B1(f_ceil, loom_ceil(g, i[0], NULL))
B1(f_round, loom_round(g, i[0], NULL))
B1(f_recip, loom_reciprocal(g, i[0], NULL))
B1(f_not, loom_logical_not(g, i[0], NULL))

/* kb: a second feed kind run on the typical shape (special values), -1 none */
static const opspec uops[] = {
    {"neg", f_neg, MNUM, V_MIX, -1, 0, 0},
    {"abs", f_abs, MNUM, V_MIX, -1, 0, 0},
    {"square", f_square, MNUM, V_MIX, -1, 0, 0},
    {"sign", f_sign, MFLT, V_MIX, -1, 0, 0},
    {"exp", f_exp, MFLT, V_MIX, -1, T32, T64},
    {"log", f_log, MFLT, V_POS, V_MIX, T32, T64},
    {"log1p", f_log1p, MFLT, V_POS, V_MIX, T32, T64},
    {"sqrt", f_sqrt, MFLT, V_POS, V_MIX, 0, 0},
    {"rsqrt", f_rsqrt, MFLT, V_POS, V_MIX, 0, 0},
    {"tanh", f_tanh, MFLT, V_MIX, -1, T32, T64},
    {"sigmoid", f_sigmoid, MFLT, V_MIX, -1, T32, T64},
    {"relu", f_relu, MFLT, V_MIX, -1, 0, 0},
    {"relu6", f_relu6, MFLT, V_RELU6, V_MIX, 0, 0},
    {"elu", f_elu, MFLT, V_MIX, -1, T32, T64},
    {"selu", f_selu, MFLT, V_MIX, -1, T32, T64},
    {"leaky_relu", f_lrelu, MFLT, V_MIX, -1, 0, 0},
    {"softplus", f_softplus, MFLT, V_MIX, -1, T32, T64},
    {"gelu", f_gelu, MFLT, V_MIX, -1, T32, T64},
    {"gelu tanh", f_gelu_tanh, MFLT, V_MIX, -1, T32, T64},
    {"floor", f_floor, MFLT, V_MIX, -1, 0, 0},
    {"ceil", f_ceil, MFLT, V_MIX, -1, 0, 0},
    {"round", f_round, MFLT, V_MIX, -1, 0, 0},
    {"reciprocal", f_recip, MFLT, V_MIX, -1, 0, 0},
    {"logical_not", f_not, M(BOOL), V_BOOL, -1, 0, 0},
};

typedef struct {
  const char *tag;
  int nd;
  int64_t d[LOOM_MAX_DIMS];
} shp1;
static const shp1 ushapes[] = {
    {"[100,37]", 2, {100, 37}},
    {"[0,3]", 2, {0, 3}},
    {"scalar", 0, {0}},
    {"rank5 [2,3,1,4,5]", 5, {2, 3, 1, 4, 5}},
    {"large [320001]", 1, {320001}},
};

static void sec_unary(void) {
  for (size_t o = 0; o < sizeof uops / sizeof uops[0]; o++) {
    const opspec *op = &uops[o];
    for (int dt = 1; dt < LOOM_DTYPE_COUNT; dt++) {
      if (!(op->dts & M(dt))) continue;
      for (size_t s = 0; s <= sizeof ushapes / sizeof ushapes[0]; s++) {
        int last = s == sizeof ushapes / sizeof ushapes[0];
        if (last && op->kb < 0) continue;
        const shp1 *sh = &ushapes[last ? 0 : s];
        gc c;
        gc_init(&c);
        loom_output in = gc_feed(&c, (loom_dtype)dt, sh->nd, sh->d, last ? op->kb : op->ka, 0);
        gc_fetch(&c, op->fn(c.g, &in), tol_for((loom_dtype)dt, op->t32, op->t64), "output");
        gc_run(&c, "%s %s %s%s", op->name, dn((loom_dtype)dt), sh->tag, last ? " special values" : "");
      }
    }
  }
}

/* ===================================================== bias, xent, likes */
static void sec_bias(void) {
  static const shp2 sh[] = {
      {"[50,13]", 2, {50, 13}, 1, {13}},
      {"[2,3,4,5]", 4, {2, 3, 4, 5}, 1, {5}},
      {"rank6 [2,1,3,2,2,7]", 6, {2, 1, 3, 2, 2, 7}, 1, {7}},
      {"[0,7]", 2, {0, 7}, 1, {7}},
      {"[4,0]", 2, {4, 0}, 1, {0}},
      {"[1,1]", 2, {1, 1}, 1, {1}},
      {"large [1100,291]", 2, {1100, 291}, 1, {291}},
  };
  static const shp1 gsh[] = {
      {"[50,13]", 2, {50, 13}},
      {"[1,7]", 2, {1, 7}},
      {"[2,3,4,5]", 4, {2, 3, 4, 5}},
      {"rank6 [2,1,3,2,2,7]", 6, {2, 1, 3, 2, 2, 7}},
      {"[0,7]", 2, {0, 7}},
      {"[3,0]", 2, {3, 0}},
      {"[700,300] (block path)", 2, {700, 300}},
      {"large [5000,64] (block path)", 2, {5000, 64}},
      {"large [40000,9]", 2, {40000, 9}},
  };
  for (int dt = F32; dt <= I64; dt++) {
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
      gc c;
      gc_init(&c);
      loom_output x = gc_feed(&c, (loom_dtype)dt, sh[s].na, sh[s].a, V_MIX, 0);
      loom_output b = gc_feed(&c, (loom_dtype)dt, sh[s].nb, sh[s].b, V_MIX, 0);
      gc_fetch(&c, loom_bias_add(c.g, x, b, NULL), 0, "output");
      gc_run(&c, "bias_add %s %s", dn((loom_dtype)dt), sh[s].tag);
    }
    /* BiasAddGrad sums over all rows: f32 sums accumulate in double on the CPU and in float on the GPU
     * (per thread, then a block tree): 1e-5 relative, 1e-12 for f64. Over 40000 rows the GPU's float
     * partial sums (~156 per thread, 256 threads) drift ~3e-5 absolute from the CPU's double sum (outputs
     * of magnitude ~100, some near 0, measured against 1 + |cpu|): 1e-4 there. */
    for (size_t s = 0; s < sizeof gsh / sizeof gsh[0]; s++) {
      gc c;
      gc_init(&c);
      loom_output dy = gc_feed(&c, (loom_dtype)dt, gsh[s].nd, gsh[s].d, V_SIGNED, 0);
      gc_fetch(&c, loom_bias_add_grad(c.g, dy, NULL), tol_for((loom_dtype)dt, gsh[s].d[0] > 10000 ? 1e-4 : 1e-5, T64), "output");
      gc_run(&c, "bias_add_grad %s %s", dn((loom_dtype)dt), gsh[s].tag);
    }
  }
}

static void sec_sxent(void) {
  for (int dt = F32; dt <= F64; dt++)
    for (size_t s = 0; s < sizeof ushapes / sizeof ushapes[0] + 1; s++) {
      int last = s == sizeof ushapes / sizeof ushapes[0];
      const shp1 *sh = &ushapes[last ? 0 : s];
      gc c;
      gc_init(&c);
      loom_output x = gc_feed(&c, (loom_dtype)dt, sh->nd, sh->d, last ? V_SPEC : V_WIDE, 0);
      loom_output z = gc_feed(&c, (loom_dtype)dt, sh->nd, sh->d, last ? V_SPEC : V_UNIT, 0);
      gc_fetch(&c, loom_sigmoid_cross_entropy_with_logits(c.g, z, x, NULL), tol_for((loom_dtype)dt, T32, T64), "output");
      gc_run(&c, "sigmoid_xent %s %s%s", dn((loom_dtype)dt), sh->tag, last ? " special values" : "");
    }
}

static void sec_like(void) {
  for (int dt = F32; dt <= BOOL; dt++)
    for (size_t s = 0; s < sizeof ushapes / sizeof ushapes[0]; s++) {
      for (int ones = 0; ones < 2; ones++) {
        gc c;
        gc_init(&c);
        loom_output x = gc_feed(&c, (loom_dtype)dt, ushapes[s].nd, ushapes[s].d, V_MIX, 0);
        gc_fetch(&c, ones ? loom_ones_like(c.g, x, NULL) : loom_zeros_like(c.g, x, NULL), 0, "output");
        gc_run(&c, "%s %s %s", ones ? "ones_like" : "zeros_like", dn((loom_dtype)dt), ushapes[s].tag);
      }
    }
}

/* ================================================================= cast */
static void sec_cast(void) {
  static const shp1 sh[] = {
      {"[1000]", 1, {1000}}, {"[0,4]", 2, {0, 4}}, {"scalar", 0, {0}}, {"large [320001]", 1, {320001}}};
  for (int from = F32; from <= BOOL; from++)
    for (int to = F32; to <= BOOL; to++)
      for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        gc c;
        gc_init(&c);
        loom_output x = gc_feed(&c, (loom_dtype)from, sh[s].nd, sh[s].d, V_CAST, 0);
        gc_fetch(&c, loom_cast(c.g, x, (loom_dtype)to, NULL), 0, "output");
        gc_run(&c, "cast %s->%s %s", dn((loom_dtype)from), dn((loom_dtype)to), sh[s].tag);
      }
}

/* ============================================================ reductions */
typedef loom_output (*red_fn)(loom_graph *, loom_output, int, const int64_t *, int, const char *);
typedef struct {
  const char *name;
  red_fn fn;
  unsigned dts;
  int kind;
  double t32, t64, t32_long; /* t32_long: reductions over > 256 elements */
} redspec;
/* Sums and means: the CPU accumulates f32 in double, the GPU in float (one thread's strided run, then a
 * shuffle tree): 1e-5 relative over long rows. Products likewise (inputs near 1); the product of 320k f32
 * values rounded at every step on the GPU drifts ~sqrt(n) * 2^-24 ~ 3e-5 from the CPU's double product, so
 * 1e-4 there. LSE sums exp() the same way. Max/Min select: exact. "special" runs take special values whose
 * sums do not depend on the order (NaN, +-inf, +-0, small dyadic numbers). */
static const redspec reds[] = {
    {"sum", loom_reduce_sum, MNUM, V_SIGNED, T32, T64, 1e-5},
    {"mean", loom_reduce_mean, MFLT, V_SIGNED, T32, T64, 1e-5},
    {"max", loom_reduce_max, MNUM, V_MIX, 0, 0, 0},
    {"min", loom_reduce_min, MNUM, V_MIX, 0, 0, 0},
    {"prod", loom_reduce_prod, MNUM, V_NEAR1, T32, T64, 1e-4},
    {"logsumexp", loom_reduce_logsumexp, MFLT, V_WIDE, T32, T64, 1e-5},
    {"logsumexp special", loom_reduce_logsumexp, MFLT, V_MIX, T32, T64, 1e-5},
    {"sum special", loom_reduce_sum, MFLT, V_SPECSUM, 0, 0, 0},
    {"mean special", loom_reduce_mean, MFLT, V_SPECSUM, T32, T64, 1e-5},
    {"prod special", loom_reduce_prod, MFLT, V_SPECSUM, T32, T64, 1e-5},
};
typedef struct {
  const char *tag;
  int nd;
  int64_t d[LOOM_MAX_DIMS];
  int naxes;
  int64_t ax[LOOM_MAX_DIMS];
  int big; /* 1: long reduction (looser f32 tolerance); 2: large int prod (only +-1) */
} redshape;
static const redshape rshapes[] = {
    {"[5,7,9] axes {}", 3, {5, 7, 9}, 0, {0}, 0},
    {"[5,7,9] axes {0}", 3, {5, 7, 9}, 1, {0}, 0},
    {"[5,7,9] axes {1}", 3, {5, 7, 9}, 1, {1}, 0},
    {"[5,7,9] axes {2}", 3, {5, 7, 9}, 1, {2}, 0},
    {"[5,7,9] axes {-1}", 3, {5, 7, 9}, 1, {-1}, 0},
    {"[5,7,9] axes {0,2}", 3, {5, 7, 9}, 2, {0, 2}, 0},
    {"[5,7,9] axes {2,1}", 3, {5, 7, 9}, 2, {2, 1}, 0},
    {"[5,7,9] all", 3, {5, 7, 9}, -1, {0}, 0},
    {"[5,1,9] axes {1}", 3, {5, 1, 9}, 1, {1}, 0},
    {"[1,1,9] axes {0,1}", 3, {1, 1, 9}, 2, {0, 1}, 0},
    {"scalar all", 0, {0}, -1, {0}, 0},
    {"scalar axes {}", 0, {0}, 0, {0}, 0},
    {"[0,4] axes {1}", 2, {0, 4}, 1, {1}, 0},
    {"[0,4] axes {0} (empty reduction)", 2, {0, 4}, 1, {0}, 0},
    {"[0,4] all (empty reduction)", 2, {0, 4}, -1, {0}, 0},
    {"rank5 [2,3,4,5,6] axes {1,3}", 5, {2, 3, 4, 5, 6}, 2, {1, 3}, 0},
    {"rank6 [2,3,2,2,3,5] axes {0,2,5}", 6, {2, 3, 2, 2, 3, 5}, 3, {0, 2, 5}, 0},
    {"[6,1000] axes {1} (block path)", 2, {6, 1000}, 1, {1}, 1},
    {"[1000,6] axes {0} (block path, strided)", 2, {1000, 6}, 1, {0}, 1},
    {"[4,300,5] axes {0,2} (block path)", 3, {4, 300, 5}, 2, {0, 2}, 1},
    {"[8200,39] axes {1} (thread path, 8200 outputs)", 2, {8200, 39}, 1, {1}, 1},
    {"[8192,256] axes {1} (thread path, R=256)", 2, {8192, 256}, 1, {1}, 1},
    {"large [320,1001] axes {1} (block path)", 2, {320, 1001}, 1, {1}, 1},
    {"large [2000,160] axes {0} (block path)", 2, {2000, 160}, 1, {0}, 1},
    {"large [700,458] all (block path, one output)", 2, {700, 458}, -1, {0}, 2},
    {"large [160001,2] axes {1} (thread path)", 2, {160001, 2}, 1, {1}, 1},
};

static void sec_reduce(void) {
  for (size_t r = 0; r < sizeof reds / sizeof reds[0]; r++)
    for (int dt = F32; dt <= I64; dt++) {
      if (!(reds[r].dts & M(dt))) continue;
      for (size_t s = 0; s < sizeof rshapes / sizeof rshapes[0]; s++)
        for (int keep = 0; keep < 2; keep++) {
          const redshape *sh = &rshapes[s];
          if (sh->big && keep != (int)(s & 1)) continue; /* long cases: one keep_dims flavour each (time) */
          int kind = reds[r].kind;
          int64_t hi = 0;
          if (kind == V_NEAR1 && sh->big < 2) hi = 2;
          if ((kind == V_SIGNED) && (dt == I32 || dt == I64)) kind = V_WIDE;
          gc c;
          gc_init(&c);
          loom_output x = gc_feed(&c, (loom_dtype)dt, sh->nd, sh->d, kind, hi);
          double t = tol_for((loom_dtype)dt, sh->big ? reds[r].t32_long : reds[r].t32, reds[r].t64);
          gc_fetch(&c, reds[r].fn(c.g, x, sh->naxes, sh->ax, keep, NULL), t, "output");
          /* max/min of zero elements into a non-empty output: an error on both devices */
          if (strstr(sh->tag, "empty reduction") && (reds[r].fn == loom_reduce_max || reds[r].fn == loom_reduce_min))
            c.expect_err = 1;
          gc_run(&c, "reduce_%s %s %s keep=%d", reds[r].name, dn((loom_dtype)dt), sh->tag, keep);
        }
    }
}

static void sec_arg(void) {
  typedef struct {
    const char *tag;
    int nd;
    int64_t d[LOOM_MAX_DIMS];
    int64_t axis;
    int err;
  } ash;
  static const ash sh[] = {
      {"[5,7,9] axis 0", 3, {5, 7, 9}, 0, 0},
      {"[5,7,9] axis 1", 3, {5, 7, 9}, 1, 0},
      {"[5,7,9] axis 2", 3, {5, 7, 9}, 2, 0},
      {"[5,7,9] axis -1", 3, {5, 7, 9}, -1, 0},
      {"[1000] axis 0", 1, {1000}, 0, 0},
      {"[1] axis 0", 1, {1}, 0, 0},
      {"[0,5] axis 1", 2, {0, 5}, 1, 0},
      {"[5,0] axis 1 (empty axis)", 2, {5, 0}, 1, 1},
      {"rank5 [2,3,4,5,6] axis 2", 5, {2, 3, 4, 5, 6}, 2, 0},
      {"large [320,1001] axis 1", 2, {320, 1001}, 1, 0},
      {"large [1001,320] axis 0", 2, {1001, 320}, 0, 0},
  };
  static const int kinds[] = {V_SMALL, V_MIX};
  for (int dt = F32; dt <= I64; dt++)
    for (int out = I32; out <= I64; out++)
      for (int mn = 0; mn < 2; mn++)
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
          for (int k = 0; k < 2; k++) {
            gc c;
            gc_init(&c);
            loom_output x = gc_feed(&c, (loom_dtype)dt, sh[s].nd, sh[s].d, kinds[k], 0);
            loom_output y = mn ? loom_argmin(c.g, x, sh[s].axis, (loom_dtype)out, NULL)
                               : loom_argmax(c.g, x, sh[s].axis, (loom_dtype)out, NULL);
            gc_fetch(&c, y, 0, "output");
            c.expect_err = sh[s].err;
            gc_run(&c, "%s %s->%s %s %s", mn ? "argmin" : "argmax", dn((loom_dtype)dt), dn((loom_dtype)out), sh[s].tag,
                   k ? "special values" : "small ints (ties)");
          }
}

static void sec_sumlike(void) {
  static const shp2 sh[] = {
      {"[4,5,6] like [5,1]", 3, {4, 5, 6}, 2, {5, 1}},
      {"[4,5,6] like [4,1,6]", 3, {4, 5, 6}, 3, {4, 1, 6}},
      {"[4,5,6] like [1,5,6]", 3, {4, 5, 6}, 3, {1, 5, 6}},
      {"[4,5,6] like scalar", 3, {4, 5, 6}, 0, {0}},
      {"[4,5,6] like [4,5,6]", 3, {4, 5, 6}, 3, {4, 5, 6}},
      {"scalar like scalar", 0, {0}, 0, {0}},
      {"[0,5] like [5]", 2, {0, 5}, 1, {5}},
      {"[3,0] like [3,1]", 2, {3, 0}, 2, {3, 1}},
      {"rank6 [2,3,1,4,5,2] like [3,1,1,5,1]", 6, {2, 3, 1, 4, 5, 2}, 5, {3, 1, 1, 5, 1}},
      {"large [640,501] like [501] (block path)", 2, {640, 501}, 1, {501}},
      {"large [640,501] like [640,1] (block path)", 2, {640, 501}, 2, {640, 1}},
  };
  for (int dt = F32; dt <= I64; dt++)
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
      gc c;
      gc_init(&c);
      loom_output dy = gc_feed(&c, (loom_dtype)dt, sh[s].na, sh[s].a, dt <= F64 ? V_SIGNED : V_WIDE, 0);
      loom_output x = gc_feed(&c, (loom_dtype)dt, sh[s].nb, sh[s].b, V_SMALL, 0);
      gc_fetch(&c, loom_reduce_sum_like(c.g, dy, x, NULL), tol_for((loom_dtype)dt, 1e-5, T64), "output");
      gc_run(&c, "reduce_sum_like %s %s", dn((loom_dtype)dt), sh[s].tag);
    }
}

/* ============================================================ variables */
/* Runs `op` (an output on variable "v") 3 times with fresh feeds for value, comparing each output and
 * then the variable itself. */
static void assign_case(int which, loom_dtype dt, const shp1 *sh) {
  static const char *names[] = {"assign", "assign_add", "assign_sub", "assign_mul"};
  char name[160];
  snprintf(name, sizeof name, "%s %s %s", names[which], dn(dt), sh->tag);
  loom_graph *g = loom_graph_new();
  loom_initializer z = loom_init_zeros();
  loom_variable *v = loom_get_variable(g, "v", dt, sh->nd, sh->d, &z, 0);
  loom_output val = loom_placeholder(g, dt, sh->nd, sh->d, "value");
  loom_output ref = loom_variable_output(v), y;
  switch (which) {
  case 0: y = loom_assign(g, ref, val, NULL); break;
  case 1: y = loom_assign_add(g, ref, val, NULL); break;
  case 2: y = loom_assign_sub(g, ref, val, NULL); break;
  default: y = loom_assign_mul(g, ref, val, NULL); break;
  }
  loom_status *st = loom_status_new(), *s2 = loom_status_new();
  loom_session *sc = NULL, *sg = NULL;
  if (loom_graph_status(g, st)) {
    printf("FAIL %s: graph: %s\n", name, loom_status_message(st));
    g_fail++;
    goto done;
  }
  sc = session(g, LOOM_DEVICE_CPU);
  g_fb = 0;
  sg = session(g, LOOM_DEVICE_CUDA);
  if (!sc || !sg) goto done;
  int kind = dt == F32 || dt == F64 ? V_MIX : dt == U8 ? V_CAST : V_CAST;
  loom_tensor *init = gen(dt, sh->nd, sh->d, kind, 0);
  if (loom_session_assign_variable(sc, "v", init, st) || loom_session_assign_variable(sg, "v", init, s2)) {
    printf("FAIL %s: assign_variable: %s / %s\n", name, loom_status_message(st), loom_status_message(s2));
    g_fail++;
  }
  loom_tensor_free(init);
  for (int step = 0; step < 3; step++) {
    loom_tensor *fv = gen(dt, sh->nd, sh->d, kind, 0), *oc = NULL, *og = NULL;
    loom_code r1 = loom_session_run(sc, &val, &fv, 1, &y, &oc, 1, NULL, 0, st);
    loom_code r2 = loom_session_run(sg, &val, &fv, 1, &y, &og, 1, NULL, 0, s2);
    char what[64];
    snprintf(what, sizeof what, "run %d output", step);
    if (r1 || r2) both_failed(name, dt == BOOL && which, r1, st, r2, s2);
    else parity_cmp(name, what, oc, og, 0, NULL);
    loom_tensor_free(fv);
    loom_tensor_free(oc);
    loom_tensor_free(og);
    if (r1 || r2) break;
  }
  check_fallback(name, 0);
  loom_tensor *a = NULL, *b = NULL;
  loom_code r1 = loom_session_read_variable(sc, "v", &a, st), r2 = loom_session_read_variable(sg, "v", &b, s2);
  if (r1 || r2) both_failed(name, 0, r1, st, r2, s2);
  else parity_cmp(name, "variable after 3 runs", a, b, 0, NULL);
  loom_tensor_free(a);
  loom_tensor_free(b);
done:
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(g);
  loom_status_free(st);
  loom_status_free(s2);
}

static void sec_assign(void) {
  static const shp1 sh[] = {
      {"[37,11]", 2, {37, 11}}, {"[0,4]", 2, {0, 4}}, {"scalar", 0, {0}}, {"large [320001]", 1, {320001}}};
  for (int which = 0; which < 4; which++)
    for (int dt = F32; dt <= BOOL; dt++)
      for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
        if (dt != BOOL || which == 0) assign_case(which, (loom_dtype)dt, &sh[s]); /* bool: Assign only */
}

/* =============================================================== dropout */
static void sec_dropout(void) {
  static const shp1 sh[] = {{"[100,37]", 2, {100, 37}},
                            {"[0,5]", 2, {0, 5}},
                            {"scalar", 0, {0}},
                            {"[7]", 1, {7}},
                            {"large [320003]", 1, {320003}}};
  static const double rates[] = {0.0, 0.5, 0.9};
  for (int dt = F32; dt <= F64; dt++)
    for (size_t r = 0; r < 3; r++)
      for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        char name[160];
        snprintf(name, sizeof name, "dropout %s rate %.1f %s", dn((loom_dtype)dt), rates[r], sh[s].tag);
        loom_graph *g = loom_graph_new();
        loom_output x = loom_placeholder(g, (loom_dtype)dt, sh[s].nd, sh[s].d, "x"), mask;
        loom_output y = loom_dropout(g, x, rates[r], 1234 + r, 77, &mask, NULL);
        loom_output f[2] = {y, mask};
        loom_session *sc = session(g, LOOM_DEVICE_CPU);
        g_fb = 0;
        loom_session *sg = session(g, LOOM_DEVICE_CUDA);
        loom_tensor *fv = gen((loom_dtype)dt, sh[s].nd, sh[s].d, V_MIX, 0);
        loom_status *st = loom_status_new(), *s2 = loom_status_new();
        /* two runs: the second draws a new mask (run counter) on both devices */
        for (int run_i = 0; sc && sg && run_i < 2; run_i++) {
          loom_tensor *oc[2] = {0}, *og[2] = {0};
          loom_code r1 = loom_session_run(sc, &x, &fv, 1, f, oc, 2, NULL, 0, st);
          loom_code r2 = loom_session_run(sg, &x, &fv, 1, f, og, 2, NULL, 0, s2);
          if (r1 || r2) both_failed(name, 0, r1, st, r2, s2);
          else {
            char w[64];
            snprintf(w, sizeof w, "run %d y", run_i);
            parity_cmp(name, w, oc[0], og[0], 0, fv);
            snprintf(w, sizeof w, "run %d mask", run_i);
            parity_cmp(name, w, oc[1], og[1], 0, NULL);
          }
          for (int k = 0; k < 2; k++) {
            loom_tensor_free(oc[k]);
            loom_tensor_free(og[k]);
          }
        }
        check_fallback(name, 0);
        loom_tensor_free(fv);
        loom_status_free(st);
        loom_status_free(s2);
        loom_session_free(sc);
        loom_session_free(sg);
        loom_graph_free(g);
      }
}

/* ======================================================== conv and pool */
typedef struct {
  const char *tag;
  int64_t x[4], f[4];
  int64_t stride, dil;
  int pad;
} convcase;
static const convcase convs[] = {
    {"same s1 3x3", {2, 9, 9, 3}, {3, 3, 3, 5}, 1, 1, LOOM_PADDING_SAME},
    {"valid s2 4x3", {2, 10, 11, 4}, {4, 3, 4, 6}, 2, 1, LOOM_PADDING_VALID},
    {"same s2 3x3", {2, 9, 8, 3}, {3, 3, 3, 4}, 2, 1, LOOM_PADDING_SAME},
    {"same dilation 2", {1, 8, 8, 2}, {3, 3, 2, 3}, 1, 2, LOOM_PADDING_SAME},
    {"valid dilation 2", {2, 9, 10, 3}, {2, 3, 3, 2}, 1, 2, LOOM_PADDING_VALID},
    {"pointwise 1x1", {3, 5, 5, 4}, {1, 1, 4, 2}, 1, 1, LOOM_PADDING_VALID},
    {"1x1 s2", {2, 7, 7, 3}, {1, 1, 3, 5}, 2, 1, LOOM_PADDING_SAME},
    {"zero batch", {0, 5, 5, 2}, {3, 3, 2, 2}, 1, 1, LOOM_PADDING_SAME},
    {"zero out channels", {2, 5, 5, 2}, {3, 3, 2, 0}, 1, 1, LOOM_PADDING_SAME},
    {"large [4,64,64,20] 3x3", {4, 64, 64, 20}, {3, 3, 20, 8}, 1, 1, LOOM_PADDING_SAME},
};

/* Conv2DBackpropInput/Filter: cuBLAS GEMMs sum in another order, and col2im gathers overlapping windows
 * in another order than the CPU: 1e-5 relative. The large filter gradient sums 4*64*64 = 16384 products per element (magnitude ~40,
 * f32 rounding ~1e-4 absolute in any blocking): 1e-3 there. */
static void sec_conv(void) {
  for (size_t k = 0; k < sizeof convs / sizeof convs[0]; k++) {
    const convcase *cc = &convs[k];
    int64_t st[4] = {1, cc->stride, cc->stride, 1}, dl[4] = {1, cc->dil, cc->dil, 1}, yd[4];
    for (int which = 0; which < 2; which++) {
      gc c;
      gc_init(&c);
      /* the forward op gives the output shape (it is pruned: not fetched) */
      loom_output px = loom_placeholder(c.g, F32, 4, cc->x, NULL), pf = loom_placeholder(c.g, F32, 4, cc->f, NULL);
      loom_output_dims(loom_conv2d(c.g, px, pf, st, cc->pad, dl, NULL), yd);
      loom_output dy = gc_feed(&c, F32, 4, yd, V_SIGNED, 0), out;
      if (which == 0) {
        loom_output f = gc_feed(&c, F32, 4, cc->f, V_SIGNED, 0);
        out = loom_conv2d_backprop_input(c.g, cc->x, f, dy, st, cc->pad, dl, NULL);
      } else {
        loom_output x = gc_feed(&c, F32, 4, cc->x, V_SIGNED, 0);
        out = loom_conv2d_backprop_filter(c.g, x, cc->f, dy, st, cc->pad, dl, NULL);
      }
      gc_fetch(&c, out, which && cc->x[0] * cc->x[1] * cc->x[2] > 10000 ? 1e-3 : 1e-5, "output");
      char s1[64];
      gc_run(&c, "%s f32 %s dy%s", which ? "conv2d_backprop_filter" : "conv2d_backprop_input", cc->tag,
             parity_dims_str(s1, sizeof s1, 4, yd));
    }
  }
}

typedef struct {
  const char *tag;
  int64_t x[4];
  int64_t k, s;
  int pad;
} poolcase;
static const poolcase pools[] = {
    {"2x2 s2 valid (tiling)", {2, 8, 8, 3}, 2, 2, LOOM_PADDING_VALID},
    {"2x2 s2 valid odd", {2, 9, 9, 3}, 2, 2, LOOM_PADDING_VALID},
    {"3x3 s2 same (overlap)", {2, 9, 9, 3}, 3, 2, LOOM_PADDING_SAME},
    {"3x3 s1 same C=17", {1, 7, 7, 17}, 3, 1, LOOM_PADDING_SAME},
    {"2x2 s2 same odd", {2, 7, 5, 33}, 2, 2, LOOM_PADDING_SAME},
    {"3x3 s3 valid C=16", {2, 9, 9, 16}, 3, 3, LOOM_PADDING_VALID},
    {"zero batch", {0, 6, 6, 2}, 2, 2, LOOM_PADDING_VALID},
    {"zero channels", {2, 6, 6, 0}, 2, 2, LOOM_PADDING_VALID},
    {"large [4,64,64,20] 2x2 s2", {4, 64, 64, 20}, 2, 2, LOOM_PADDING_VALID},
    {"large [4,64,64,20] 3x3 s2 same", {4, 64, 64, 20}, 3, 2, LOOM_PADDING_SAME},
};

/* MaxPoolGrad: each dy goes to the first maximum of its window (ties from small-int inputs). AvgPoolGrad:
 * dy times the reciprocal of the window size. The GPU gathers per input element in the CPU's output order:
 * exact. */
static void sec_pool(void) {
  for (size_t k = 0; k < sizeof pools / sizeof pools[0]; k++) {
    const poolcase *pc = &pools[k];
    int64_t ks[4] = {1, pc->k, pc->k, 1}, st[4] = {1, pc->s, pc->s, 1}, yd[4];
    for (int which = 0; which < 2; which++)
      for (int vk = 0; vk < (which ? 1 : 3); vk++) {
        gc c;
        gc_init(&c);
        loom_output out;
        if (which == 0) {
          loom_output x = gc_feed(&c, F32, 4, pc->x, vk == 2 ? V_SPEC : vk ? V_SIGNED : V_SMALL, 0);
          loom_output y = loom_max_pool(c.g, x, ks, st, pc->pad, NULL);
          loom_output_dims(y, yd);
          loom_output dy = gc_feed(&c, F32, 4, yd, V_SIGNED, 0);
          out = loom_max_pool_grad(c.g, x, y, dy, ks, st, pc->pad, NULL);
          gc_fetch(&c, y, 0, "pool output");
        } else {
          loom_output px = loom_placeholder(c.g, F32, 4, pc->x, NULL);
          loom_output_dims(loom_avg_pool(c.g, px, ks, st, pc->pad, NULL), yd);
          loom_output dy = gc_feed(&c, F32, 4, yd, V_SIGNED, 0);
          out = loom_avg_pool_grad(c.g, pc->x, dy, ks, st, pc->pad, NULL);
        }
        gc_fetch(&c, out, 0, "gradient");
        gc_run(&c, "%s f32 %s%s", which ? "avg_pool_grad" : "max_pool_grad", pc->tag,
               which ? "" : vk == 2 ? " special values" : vk ? " random" : " small ints (ties)");
      }
  }
}

/* ======================================================== gather, segments */
typedef struct {
  const char *tag;
  int np;
  int64_t p[LOOM_MAX_DIMS];
  int ni;
  int64_t i[LOOM_MAX_DIMS];
  int64_t axis;
  int err;
} gathercase;
static const gathercase gathers[] = {
    {"[50,7] axis 0 idx[33]", 2, {50, 7}, 1, {33}, 0, 0},
    {"[4,30,5] axis 1 idx[2,6]", 3, {4, 30, 5}, 2, {2, 6}, 1, 0},
    {"[6,4,9] axis -1 idx[5]", 3, {6, 4, 9}, 1, {5}, -1, 0},
    {"[6,4,9] axis 2 idx[2,2,2]", 3, {6, 4, 9}, 3, {2, 2, 2}, 2, 0},
    {"[10,3] axis 0 scalar idx", 2, {10, 3}, 0, {0}, 0, 0},
    {"[3,10,2] axis 1 scalar idx", 3, {3, 10, 2}, 0, {0}, 1, 0},
    {"[20] axis 0 idx[15]", 1, {20}, 1, {15}, 0, 0},
    {"rank5 [2,3,7,2,3] axis 2 idx[4]", 5, {2, 3, 7, 2, 3}, 1, {4}, 2, 0},
    {"[50,7] axis 0 idx[0]", 2, {50, 7}, 1, {0}, 0, 0},
    {"[5,0,3] axis 1 idx[0]", 3, {5, 0, 3}, 1, {0}, 1, 0},
    {"[5,4,0] axis 1 idx[3]", 3, {5, 4, 0}, 1, {3}, 1, 0},
    {"[50,7] axis 0 bad index", 2, {50, 7}, 1, {9}, 0, 1},
    {"large [1000,400] axis 0 idx[801]", 2, {1000, 400}, 1, {801}, 0, 0},
    {"large [10,2000,16] axis 1 idx[2000]", 3, {10, 2000, 16}, 1, {2000}, 1, 0},
};

static void sec_gather(void) {
  static const loom_dtype dts[] = {U8, BOOL, I32, F32, I64, F64};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (int it = I32; it <= I64; it++)
      for (size_t k = 0; k < sizeof gathers / sizeof gathers[0]; k++) {
        const gathercase *gcs = &gathers[k];
        gc c;
        gc_init(&c);
        loom_output p = gc_feed(&c, dts[d], gcs->np, gcs->p, V_MIX, 0);
        int64_t ax = gcs->axis < 0 ? gcs->axis + gcs->np : gcs->axis;
        loom_tensor *ti = gen((loom_dtype)it, gcs->ni, gcs->i, V_IDX, gcs->p[ax]);
        if (gcs->err) ((it == I32) ? (void)(((int32_t *)loom_tensor_data(ti))[4] = (int32_t)gcs->p[ax])
                                   : (void)(((int64_t *)loom_tensor_data(ti))[6] = -1));
        loom_output i = gc_feed_t(&c, ti);
        gc_fetch(&c, loom_gather(c.g, p, i, gcs->axis, NULL), 0, "output");
        c.expect_err = gcs->err;
        gc_run(&c, "gather %s idx %s %s", dn(dts[d]), dn((loom_dtype)it), gcs->tag);
      }
}

typedef struct {
  const char *tag;
  int nd;
  int64_t d[LOOM_MAX_DIMS];
  int64_t nseg;
  int err;
} segcase;
static const segcase segs_[] = {
    {"[40,7] into 10", 2, {40, 7}, 10, 0},
    {"[30,3,4] into 12", 3, {30, 3, 4}, 12, 0},
    {"[40] into 50", 1, {40}, 50, 0},
    {"[1,5] into 1", 2, {1, 5}, 1, 0},
    {"[0,5] into 4", 2, {0, 5}, 4, 0},
    {"[0,5] into 0", 2, {0, 5}, 0, 0},
    {"[6,0] into 3", 2, {6, 0}, 3, 0},
    {"[40,7] bad id", 2, {40, 7}, 10, 1},
    {"large [4000,80] into 50", 2, {4000, 80}, 50, 0},
};

/* UnsortedSegmentSum for every data dtype: the GPU adds each segment's rows in position order like the CPU
 * (grouped by a device sort, no atomics); 1e-6 relative for f32 (1e-5 for the large case, ~80 rows per
 * segment), exact for integers. */
static void sec_segsum(void) {
  static const loom_dtype dts[4] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64};
  for (int di = 0; di < 4; di++)
  for (int it = I32; it <= I64; it++)
    for (size_t k = 0; k < sizeof segs_ / sizeof segs_[0]; k++) {
      const segcase *sc = &segs_[k];
      gc c;
      gc_init(&c);
      loom_dtype ddt = dts[di];
      loom_output d = gc_feed(&c, ddt, sc->nd, sc->d, ddt == LOOM_I32 || ddt == LOOM_I64 ? V_IDX : V_SIGNED, 100);
      loom_tensor *ti = gen((loom_dtype)it, 1, sc->d, V_IDX, sc->nseg);
      if (sc->err) {
        if (it == I32) ((int32_t *)loom_tensor_data(ti))[5] = -3;
        else ((int64_t *)loom_tensor_data(ti))[7] = sc->nseg;
      }
      loom_output i = gc_feed_t(&c, ti);
      double tol = ddt == LOOM_F32 ? (sc->d[0] > 1000 ? 1e-5 : T32) : ddt == LOOM_F64 ? 1e-12 : 0;
      gc_fetch(&c, loom_unsorted_segment_sum(c.g, d, i, sc->nseg, NULL), tol, "output");
      c.expect_err = sc->err;
      gc_run(&c, "unsorted_segment_sum %s ids %s %s", dn(ddt), dn((loom_dtype)it), sc->tag);
    }
}

/* ================================================== f64 and other extras */
static void sec_extra(void) {
  /* MatMul / BatchMatMul f64 (cuBLAS Dgemm) */
  typedef struct {
    const char *tag;
    int64_t a[2], b[2];
    int ta, tb;
  } mmc;
  static const mmc mms[] = {
      {"[64,33]x[33,17]", {64, 33}, {33, 17}, 0, 0},  {"[33,64]^T x[17,33]^T", {33, 64}, {17, 33}, 1, 1},
      {"[33,64]^T x[33,17]", {33, 64}, {33, 17}, 1, 0}, {"[64,33]x[17,33]^T", {64, 33}, {17, 33}, 0, 1},
      {"[1,129]x[129,65]", {1, 129}, {129, 65}, 0, 0}, {"[0,5]x[5,3]", {0, 5}, {5, 3}, 0, 0},
      {"[4,0]x[0,3] (K=0)", {4, 0}, {0, 3}, 0, 0},     {"large [600,534]x[534,8]", {600, 534}, {534, 8}, 0, 0},
  };
  for (int dt = F32; dt <= F64; dt++)
    for (size_t k = 0; k < sizeof mms / sizeof mms[0]; k++) {
      gc c;
      gc_init(&c);
      loom_output a = gc_feed(&c, (loom_dtype)dt, 2, mms[k].a, V_SIGNED, 0);
      loom_output b = gc_feed(&c, (loom_dtype)dt, 2, mms[k].b, V_SIGNED, 0);
      gc_fetch(&c, loom_matmul(c.g, a, b, mms[k].ta, mms[k].tb, NULL), tol_for((loom_dtype)dt, 1e-5, T64), "output");
      gc_run(&c, "matmul %s %s", dn((loom_dtype)dt), mms[k].tag);
    }
  static const shp2 bmm[] = {
      {"[3,8,9]x[1,9,5]", 3, {3, 8, 9}, 3, {1, 9, 5}},
      {"[2,3,4,5]x[5,6]", 4, {2, 3, 4, 5}, 2, {5, 6}},
      {"[2,1,4,5]x[3,5,2] (pairwise bcast)", 4, {2, 1, 4, 5}, 3, {3, 5, 2}},
      {"[0,4,5]x[0,5,2]", 3, {0, 4, 5}, 3, {0, 5, 2}},
  };
  for (int dt = F32; dt <= F64; dt++)
    for (size_t k = 0; k < sizeof bmm / sizeof bmm[0]; k++) {
      gc c;
      gc_init(&c);
      loom_output a = gc_feed(&c, (loom_dtype)dt, bmm[k].na, bmm[k].a, V_SIGNED, 0);
      loom_output b = gc_feed(&c, (loom_dtype)dt, bmm[k].nb, bmm[k].b, V_SIGNED, 0);
      gc_fetch(&c, loom_batch_matmul(c.g, a, b, 0, 0, NULL), tol_for((loom_dtype)dt, 1e-5, T64), "output");
      gc_run(&c, "batch_matmul %s %s", dn((loom_dtype)dt), bmm[k].tag);
    }
  /* softmax / log_softmax */
  static const shp1 smx[] = {{"[64,10]", 2, {64, 10}},    {"[3,3000]", 2, {3, 3000}}, {"[10]", 1, {10}},
                             {"[2,3,7]", 3, {2, 3, 7}},   {"[0,5]", 2, {0, 5}},       {"[4,1]", 2, {4, 1}},
                             {"large [320,1001]", 2, {320, 1001}}, {"[200,5] special values", 2, {200, 5}}};
  for (int dt = F32; dt <= F64; dt++)
    for (size_t k = 0; k < sizeof smx / sizeof smx[0]; k++)
      for (int lg = 0; lg < 2; lg++) {
        gc c;
        gc_init(&c);
        loom_output x = gc_feed(&c, (loom_dtype)dt, smx[k].nd, smx[k].d, strstr(smx[k].tag, "special") ? V_SPEC : V_WIDE, 0);
        gc_fetch(&c, lg ? loom_log_softmax(c.g, x, NULL) : loom_softmax(c.g, x, NULL), tol_for((loom_dtype)dt, 1e-5, T64),
                 "output");
        gc_run(&c, "%s %s %s", lg ? "log_softmax" : "softmax", dn((loom_dtype)dt), smx[k].tag);
      }
  /* cross entropies: both outputs */
  static const shp1 xe[] = {{"[32,10]", 2, {32, 10}}, {"[5,1000]", 2, {5, 1000}}, {"[0,10]", 2, {0, 10}},
                            {"large [320,1001]", 2, {320, 1001}}, {"[200,5] special logits", 2, {200, 5}}};
  for (int dt = F32; dt <= F64; dt++)
    for (size_t k = 0; k < sizeof xe / sizeof xe[0]; k++)
      for (int lt = 0; lt < 3; lt++) { /* 0 dense labels, 1 sparse i32, 2 sparse i64 */
        gc c;
        gc_init(&c);
        loom_output x = gc_feed(&c, (loom_dtype)dt, 2, xe[k].d, strstr(xe[k].tag, "special") ? V_SPEC : V_WIDE, 0), loss, bp;
        if (lt == 0) {
          loom_output z = gc_feed(&c, (loom_dtype)dt, 2, xe[k].d, V_UNIT, 0);
          loom_softmax_cross_entropy_with_logits(c.g, x, z, &loss, &bp, NULL);
        } else {
          loom_output l = gc_feed(&c, lt == 1 ? I32 : I64, 1, xe[k].d, V_IDX, xe[k].d[1]);
          loom_sparse_softmax_cross_entropy_with_logits(c.g, x, l, &loss, &bp, NULL);
        }
        double t = tol_for((loom_dtype)dt, 1e-5, T64);
        gc_fetch(&c, loss, t, "loss");
        gc_fetch(&c, bp, t, "backprop");
        gc_run(&c, "%s %s %s", lt == 0 ? "softmax_xent" : lt == 1 ? "sparse_xent labels int32" : "sparse_xent labels int64",
               dn((loom_dtype)dt), xe[k].tag);
      }
  /* random ops f64 (and f32 other shapes); two runs each */
  static const shp1 rsh[] = {{"[37,129]", 2, {37, 129}}, {"[1001]", 1, {1001}}, {"[3]", 1, {3}},
                             {"scalar", 0, {0}},         {"[0,4]", 2, {0, 4}},   {"large [320003]", 1, {320003}}};
  for (int dt = F32; dt <= F64; dt++)
    for (size_t k = 0; k < sizeof rsh / sizeof rsh[0]; k++)
      for (int kind = 0; kind < 3; kind++) {
        char name[160];
        static const char *kn[] = {"random_uniform", "random_normal", "truncated_normal"};
        snprintf(name, sizeof name, "%s %s %s", kn[kind], dn((loom_dtype)dt), rsh[k].tag);
        loom_graph *g = loom_graph_new();
        loom_output y = kind == 0   ? loom_random_uniform(g, rsh[k].nd, rsh[k].d, (loom_dtype)dt, -2, 3, 7, 11, NULL)
                        : kind == 1 ? loom_random_normal(g, rsh[k].nd, rsh[k].d, (loom_dtype)dt, 0.5, 2, 5, 3, NULL)
                                    : loom_truncated_normal(g, rsh[k].nd, rsh[k].d, (loom_dtype)dt, 1, 2, 9, 1, NULL);
        loom_session *sc = session(g, LOOM_DEVICE_CPU);
        g_fb = 0;
        loom_session *sg = session(g, LOOM_DEVICE_CUDA);
        for (int r = 0; sc && sg && r < 2; r++) {
          loom_tensor *a = NULL, *b = NULL;
          if (run(sc, name, NULL, NULL, 0, &y, &a, 1, NULL, 0) && run(sg, name, NULL, NULL, 0, &y, &b, 1, NULL, 0)) {
            char w[32];
            snprintf(w, sizeof w, "run %d", r);
            parity_cmp(name, w, a, b, tol_for((loom_dtype)dt, 1e-5, T64), NULL);
          }
          loom_tensor_free(a);
          loom_tensor_free(b);
        }
        check_fallback(name, 0);
        loom_session_free(sc);
        loom_session_free(sg);
        loom_graph_free(g);
      }
  /* NoOp (loom_group) run as a target: nothing to compare, but it must not fall back to the CPU */
  {
    loom_graph *g = loom_graph_new();
    loom_node *nop = loom_group(g, 0, NULL, "nothing");
    loom_session *sc = session(g, LOOM_DEVICE_CPU);
    g_fb = 0;
    loom_session *sg = session(g, LOOM_DEVICE_CUDA);
    if (sc && sg) {
      run(sc, "noop", NULL, NULL, 0, NULL, NULL, 0, &nop, 1);
      run(sg, "noop", NULL, NULL, 0, NULL, NULL, 0, &nop, 1);
    }
    check_fallback("noop", 0);
    loom_session_free(sc);
    loom_session_free(sg);
    loom_graph_free(g);
  }
  /* SparseApplyGradientDescent with repeated indices: both devices sum the rows of a repeated index first,
   * in position order (1e-6). big 2: 6000 indices into 20 rows, ~300 repeats each: the GPU sums such long
   * groups in pieces of 32 (another order: 1e-5). */
  for (int it = I32; it <= I64; it++)
    for (int big = 0; big < 3; big++) {
      char name[128];
      snprintf(name, sizeof name, "sparse_apply_gradient_descent idx %s %s", dn((loom_dtype)it),
               big == 2 ? "hot rows var [40,8] idx[6000]" : big ? "large var [4000,80] idx[3000]" : "var [20,6] idx[15]");
      int64_t vd[2] = {big == 2 ? 40 : big ? 4000 : 20, big == 2 ? 8 : big ? 80 : 6}, gd[2] = {big == 2 ? 6000 : big ? 3000 : 15, vd[1]};
      loom_graph *g = loom_graph_new();
      loom_initializer z = loom_init_zeros();
      loom_variable *v = loom_get_variable(g, "v", F32, 2, vd, &z, 0);
      loom_output gr = loom_placeholder(g, F32, 2, gd, "g"), ix = loom_placeholder(g, (loom_dtype)it, 1, gd, "i");
      loom_output up = loom_sparse_apply_gradient_descent(g, loom_variable_output(v), loom_const_f32(g, 0.3f, NULL), gr, ix, NULL);
      loom_session *sc = session(g, LOOM_DEVICE_CPU);
      g_fb = 0;
      loom_session *sg = session(g, LOOM_DEVICE_CUDA);
      loom_status *st = loom_status_new();
      loom_tensor *init = gen(F32, 2, vd, V_SIGNED, 0);
      loom_session_assign_variable(sc, "v", init, st);
      loom_session_assign_variable(sg, "v", init, st);
      loom_tensor_free(init);
      for (int r = 0; r < 3; r++) {
        loom_tensor *fg = gen(F32, 2, gd, V_SIGNED, 0), *fi = gen((loom_dtype)it, 1, gd, V_IDX, vd[0] / 2);
        loom_output feeds[2] = {gr, ix};
        loom_tensor *fv[2] = {fg, fi};
        run(sc, name, feeds, fv, 2, NULL, NULL, 0, &up.node, 1);
        run(sg, name, feeds, fv, 2, NULL, NULL, 0, &up.node, 1);
        loom_tensor_free(fg);
        loom_tensor_free(fi);
      }
      check_fallback(name, 0);
      loom_tensor *a = NULL, *b = NULL;
      if (!loom_session_read_variable(sc, "v", &a, st) && !loom_session_read_variable(sg, "v", &b, st))
        parity_cmp(name, "variable after 3 updates", a, b, big == 2 ? 1e-5 : T32, NULL);
      loom_tensor_free(a);
      loom_tensor_free(b);
      loom_status_free(st);
      loom_session_free(sc);
      loom_session_free(sg);
      loom_graph_free(g);
    }
}

/* ============================================================ optimizers */
enum {
  O_SGD, O_MOM, O_NESTEROV, O_ADAGRAD, O_ADAM, O_FTRL, O_FTRL_P, O_RMSPROP, O_RMSPROP_MOM, O_CRMSPROP, O_ADADELTA,
  O_RMSPROP_KERAS, O_CRMSPROP_KERAS
};
static const char *opt_names[] = {"sgd",        "momentum",          "momentum nesterov",
                                  "adagrad",    "adam",              "ftrl lr_power -0.5 l1 l2 shrinkage",
                                  "ftrl lr_power -0.7", "rmsprop",   "rmsprop momentum",
                                  "rmsprop centered momentum", "adadelta",
                                  "rmsprop keras_legacy", "rmsprop centered keras_legacy"};

static loom_optimizer *make_opt(loom_graph *g, int which) {
  loom_output lr = loom_const_f32(g, which == O_ADADELTA ? 1.0f : which == O_ADAM ? 0.01f : 0.05f, "lr");
  switch (which) {
  case O_SGD: return loom_optimizer_sgd(lr);
  case O_MOM:
  case O_NESTEROV: {
    loom_momentum_options o = loom_momentum_options_default();
    o.momentum = 0.9;
    o.use_nesterov = which == O_NESTEROV;
    return loom_optimizer_momentum(lr, &o);
  }
  case O_ADAGRAD: return loom_optimizer_adagrad(lr, NULL);
  case O_ADAM: return loom_optimizer_adam(lr, NULL);
  case O_FTRL:
  case O_FTRL_P: {
    loom_ftrl_options o = loom_ftrl_options_default();
    if (which == O_FTRL) {
      o.l1 = 0.001;
      o.l2 = 0.002;
      o.l2_shrinkage = 0.003;
    } else {
      o.learning_rate_power = -0.7;
    }
    return loom_optimizer_ftrl(lr, &o);
  }
  case O_RMSPROP:
  case O_RMSPROP_MOM:
  case O_CRMSPROP: {
    loom_rmsprop_options o = loom_rmsprop_options_default();
    if (which != O_RMSPROP) o.momentum = 0.5;
    o.centered = which == O_CRMSPROP;
    return loom_optimizer_rmsprop(lr, &o);
  }
  case O_RMSPROP_KERAS:
  case O_CRMSPROP_KERAS: {
    loom_rmsprop_options o = loom_rmsprop_options_default();
    o.initial_rms_value = 0.0;
    o.epsilon = 1e-7;
    o.keras_legacy = 1;
    o.centered = which == O_CRMSPROP_KERAS;
    return loom_optimizer_rmsprop(lr, &o);
  }
  default: return loom_optimizer_adadelta(lr, NULL);
  }
}

/* A linear layer + relu + linear on [16,8] inputs, squared loss; 5 steps on both devices. MatMul on
 * cuBLAS vs BLAS and the f32 sums of the gradients differ in the last bits, which the adaptive
 * optimizers carry: 1e-5 relative on the losses and the variables. */
static void opt_case(int which) {
  const char *name = opt_names[which];
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {16, 8}, yd[2] = {16, 3}, w1d[2] = {8, 6}, b1d[1] = {6}, w2d[2] = {6, 3};
  loom_output x = loom_placeholder(g, F32, 2, xd, "x"), yt = loom_placeholder(g, F32, 2, yd, "y");
  loom_initializer wi = loom_init_random_normal(0, 0.5, 42), bi = loom_init_constant(0.1);
  loom_variable *w1 = loom_get_variable(g, "w1", F32, 2, w1d, &wi, 1);
  loom_variable *b1 = loom_get_variable(g, "b1", F32, 1, b1d, &bi, 1);
  loom_variable *w2 = loom_get_variable(g, "w2", F32, 2, w2d, &wi, 1);
  loom_output h = loom_relu(g, loom_bias_add(g, loom_matmul(g, x, loom_variable_output(w1), 0, 0, NULL), loom_variable_output(b1), NULL), NULL);
  loom_output p = loom_matmul(g, h, loom_variable_output(w2), 0, 0, NULL);
  loom_output loss = loom_reduce_mean(g, loom_square(g, loom_sub(g, p, yt, NULL), NULL), -1, NULL, 0, NULL);
  loom_optimizer *opt = make_opt(g, which);
  loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
  loom_node *init = loom_global_variables_initializer(g);
  loom_status *st = loom_status_new();
  loom_session *sc = NULL, *sg = NULL;
  loom_tensor *fx = gen(F32, 2, xd, V_SIGNED, 0), *fy = gen(F32, 2, yd, V_SIGNED, 0);
  if (loom_graph_status(g, st)) {
    printf("FAIL optimizer %s: graph: %s\n", name, loom_status_message(st));
    g_fail++;
    goto done;
  }
  sc = session(g, LOOM_DEVICE_CPU);
  g_fb = 0;
  sg = session(g, LOOM_DEVICE_CUDA);
  loom_output feeds[2] = {x, yt};
  loom_tensor *fv[2] = {fx, fy};
  if (!sc || !sg || !run(sc, name, NULL, NULL, 0, NULL, NULL, 0, &init, 1) || !run(sg, name, NULL, NULL, 0, NULL, NULL, 0, &init, 1))
    goto done;
  for (int step = 0; step < 5; step++) {
    loom_tensor *lc = NULL, *lg = NULL;
    if (run(sc, name, feeds, fv, 2, &loss, &lc, 1, &train, 1) && run(sg, name, feeds, fv, 2, &loss, &lg, 1, &train, 1)) {
      char what[64];
      snprintf(what, sizeof what, "step %d loss", step);
      char nm[128];
      snprintf(nm, sizeof nm, "optimizer %s", name);
      parity_cmp(nm, what, lc, lg, 1e-5, NULL);
    }
    loom_tensor_free(lc);
    loom_tensor_free(lg);
  }
  {
    char nm[128];
    snprintf(nm, sizeof nm, "optimizer %s", name);
    check_fallback(nm, 0);
    int nv = 0, nslots = 0;
    loom_variable *const *vars = loom_global_variables(g, &nv);
    for (int i = 0; i < nv; i++) {
      const char *vn = loom_variable_name(vars[i]);
      if (!loom_variable_trainable(vars[i])) nslots++;
      loom_tensor *a = NULL, *b = NULL;
      if (!loom_session_read_variable(sc, vn, &a, st) && !loom_session_read_variable(sg, vn, &b, st)) {
        char what[160];
        snprintf(what, sizeof what, "%s %s after 5 steps", loom_variable_trainable(vars[i]) ? "variable" : "slot", vn);
        parity_cmp(nm, what, a, b, 1e-5, NULL);
      } else {
        printf("FAIL %s: read %s: %s\n", nm, vn, loom_status_message(st));
        g_fail++;
      }
      loom_tensor_free(a);
      loom_tensor_free(b);
    }
    static const int want_slots[] = {0, 3, 3, 3, 8, 6, 6, 6, 6, 9, 6, 6, 9};
    if (nslots != want_slots[which]) {
      printf("FAIL %s: %d slot/non-trainable variables, expected %d\n", nm, nslots, want_slots[which]);
      g_fail++;
    }
  }
done:
  loom_optimizer_free(opt);
  loom_tensor_free(fx);
  loom_tensor_free(fy);
  loom_session_free(sc);
  loom_session_free(sg);
  loom_status_free(st);
  loom_graph_free(g);
}

static void sec_optim(void) {
  for (int w = 0; w <= O_CRMSPROP_KERAS; w++) opt_case(w);
}

int main(int argc, char **argv) {
  g_argc = argc;
  g_argv = argv;
  if (!parity_gpu_present("test_parity_ops")) return 0;
  loom_log_set(log_sink, NULL, LOOM_LOG_INFO);
  static const struct {
    const char *name;
    void (*fn)(void);
  } secs[] = {{"binary", sec_binary}, {"unary", sec_unary},     {"bias", sec_bias},     {"sxent", sec_sxent},
              {"like", sec_like},     {"cast", sec_cast},       {"reduce", sec_reduce}, {"arg", sec_arg},
              {"sumlike", sec_sumlike}, {"assign", sec_assign}, {"dropout", sec_dropout}, {"conv", sec_conv},
              {"pool", sec_pool},     {"gather", sec_gather},   {"segsum", sec_segsum}, {"extra", sec_extra},
              {"optim", sec_optim}};
  for (size_t i = 0; i < sizeof secs / sizeof secs[0]; i++) {
    if (!want(secs[i].name)) continue;
    int f0 = g_fail, c0 = g_checked;
    r64s = 0x9E3779B97F4A7C15ull + 0x100000001B3ull * (uint64_t)(i + 1); /* same feeds whatever sections run */
    secs[i].fn();
    printf("-- %s: %d comparisons, %d failures\n", secs[i].name, g_checked - c0, g_fail - f0);
    fflush(stdout);
  }
  if (g_notes) printf("%d notes (same error code, different message)\n", g_notes);
  return parity_report("test_parity_ops");
}
