/* Reduce family: reductions over axes, ArgMax/ArgMin, ReduceSumLike, MatMul,
 * BatchMatMulV2, BiasAdd, BiasAddGrad - each against a reference loop. */
#include "test_util.h"
#include "kernels/cpu/gemm_tiles.h"
#ifndef LOOM_TEST_EMULATED
#define LOOM_TEST_EMULATED 0 /* 1 in test-qemu's builds (Makefile) */
#endif

enum { K_SUM, K_MEAN, K_MAX, K_MIN, K_PROD, K_LSE, K_COUNT };
static const char *kname[] = {"sum", "mean", "max", "min", "prod", "lse"};

typedef loom_output (*red_builder)(loom_graph *, loom_output, int, const int64_t *, int, const char *);
static red_builder builder_of(int k) {
  switch (k) {
  case K_SUM: return loom_reduce_sum;
  case K_MEAN: return loom_reduce_mean;
  case K_MAX: return loom_reduce_max;
  case K_MIN: return loom_reduce_min;
  case K_PROD: return loom_reduce_prod;
  default: return loom_reduce_logsumexp;
  }
}

static int64_t numel(int nd, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= d[i];
  return n;
}

/* Deterministic values in [-2, 2) with a few repeats. */
static double val(int64_t i) { return (double)((i * 37 + 11) % 41) / 10.25 - 2.0; }

/* Reference: reduce x (double) over mask; returns output numel; fills out. */
static int64_t ref_reduce(int k, int nd, const int64_t *dims, const double *x, uint32_t mask, double *out) {
  int64_t n = numel(nd, dims), no = 1, cnt = 1;
  for (int i = 0; i < nd; i++) {
    if (mask & (1u << i)) cnt *= dims[i];
    else no *= dims[i];
  }
  int64_t *map = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    int64_t rem = i, o = 0, mul = 1;
    for (int d = nd - 1; d >= 0; d--) {
      int64_t id = rem % dims[d];
      rem /= dims[d];
      if (!(mask & (1u << d))) {
        o += id * mul;
        mul *= dims[d];
      }
    }
    map[i] = o;
  }
  double init = k == K_PROD ? 1.0 : k == K_MAX || k == K_LSE ? -INFINITY : k == K_MIN ? INFINITY : 0.0;
  for (int64_t o = 0; o < no; o++) out[o] = init;
  for (int64_t i = 0; i < n; i++) {
    double *acc = &out[map[i]];
    switch (k) {
    case K_SUM:
    case K_MEAN: *acc += x[i]; break;
    case K_PROD: *acc *= x[i]; break;
    case K_MAX:
    case K_LSE: *acc = x[i] > *acc ? x[i] : *acc; break;
    case K_MIN: *acc = x[i] < *acc ? x[i] : *acc; break;
    }
  }
  if (k == K_MEAN)
    for (int64_t o = 0; o < no; o++) out[o] /= (double)cnt;
  if (k == K_LSE) {
    double *s = calloc((size_t)(no ? no : 1), sizeof(double));
    for (int64_t o = 0; o < no; o++) out[o] = isfinite(out[o]) ? out[o] : 0.0;
    for (int64_t i = 0; i < n; i++) s[map[i]] += exp(x[i] - out[map[i]]);
    for (int64_t o = 0; o < no; o++) out[o] = log(s[o]) + out[o];
    free(s);
  }
  free(map);
  return no;
}

static uint32_t mask_of(int nd, int naxes, const int64_t *axes) {
  if (naxes < 0) return (1u << nd) - 1;
  uint32_t m = 0;
  for (int i = 0; i < naxes; i++) m |= 1u << (axes[i] < 0 ? axes[i] + nd : axes[i]);
  return m;
}

static loom_tensor *run_threads(loom_graph *g, loom_output x, loom_tensor *xv, loom_output y, int threads) {
  loom_status *st = loom_status_new();
  cr_assert(loom_graph_status(g, st) == LOOM_OK, "graph error: %s", loom_status_message(st));
  loom_session_options o = loom_session_options_default();
  o.num_threads = threads;
  loom_session *s = loom_session_new(g, &o, st);
  loom_tensor *out = NULL;
  loom_code rc = loom_session_run(s, &x, &xv, 1, &y, &out, 1, NULL, 0, st);
  cr_assert(rc == LOOM_OK, "run failed: %s", loom_status_message(st));
  loom_session_free(s);
  loom_status_free(st);
  return out;
}

/* Runs reduction k of dtype dt over an input of dims, checks shape and values. */
static void check_reduce(int k, loom_dtype dt, int nd, const int64_t *dims, int naxes, const int64_t *axes,
                         int keepdims, int threads) {
  int64_t n = numel(nd, dims);
  double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
  double *want = malloc(sizeof(double) * (size_t)(n + 64));
  void *raw = malloc(8 * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    double v = val(i);
    if (k == K_PROD) v = 0.75 + 0.25 * (double)((i * 7) % 5) / 4.0; /* keep products tame */
    if (dt == LOOM_I32 || dt == LOOM_I64) v = (double)((i * 13 + 5) % 9) - 4.0;
    if ((dt == LOOM_I32 || dt == LOOM_I64) && k == K_PROD) v = (double)((i % 3) + 1) * ((i % 5) ? 1 : -1);
    x[i] = v;
    switch (dt) {
    case LOOM_F32: ((float *)raw)[i] = (float)v; x[i] = (double)(float)v; break;
    case LOOM_F64: ((double *)raw)[i] = v; break;
    case LOOM_I32: ((int32_t *)raw)[i] = (int32_t)v; break;
    default: ((int64_t *)raw)[i] = (int64_t)v; break;
    }
  }
  uint32_t mask = mask_of(nd, naxes, axes);
  int64_t no = ref_reduce(k, nd, dims, x, mask, want);

  loom_graph *g = loom_graph_new();
  loom_output xp = loom_placeholder(g, dt, nd, dims, "x");
  loom_output y = builder_of(k)(g, xp, naxes, axes, keepdims, "r");
  loom_tensor *xv = loom_tensor_from_data(dt, nd, dims, raw, NULL);
  loom_tensor *out = run_threads(g, xp, xv, y, threads);
  cr_assert_eq(loom_tensor_dtype(out), dt);
  /* shape */
  int on = 0;
  int64_t od[8];
  for (int i = 0; i < nd; i++) {
    if (mask & (1u << i)) {
      if (keepdims) od[on++] = 1;
    } else {
      od[on++] = dims[i];
    }
  }
  cr_assert_eq(loom_tensor_ndim(out), on, "%s: rank %d want %d", kname[k], loom_tensor_ndim(out), on);
  for (int i = 0; i < on; i++) cr_assert_eq(loom_tensor_dim(out, i), od[i]);
  cr_assert_eq(loom_tensor_numel(out), no);
  const void *d = loom_tensor_data_const(out);
  for (int64_t i = 0; i < no; i++) {
    double got;
    switch (dt) {
    case LOOM_F32: got = ((const float *)d)[i]; break;
    case LOOM_F64: got = ((const double *)d)[i]; break;
    case LOOM_I32: got = ((const int32_t *)d)[i]; break;
    default: got = (double)((const int64_t *)d)[i]; break;
    }
    double tol = dt == LOOM_F32 ? 2e-5 : 1e-11;
    cr_assert(fabs(got - want[i]) <= tol * (1 + fabs(want[i])) || (isnan(got) && isnan(want[i])),
              "%s %s naxes=%d keep=%d: element %lld got %.9g want %.9g", kname[k], loom_dtype_name(dt), naxes,
              keepdims, (long long)i, got, want[i]);
  }
  loom_tensor_free(out);
  loom_tensor_free(xv);
  loom_graph_free(g);
  free(x);
  free(want);
  free(raw);
}

Test(reduce, all_kinds_axes_keepdims_f32) {
  int64_t dims[3] = {2, 3, 4};
  int64_t combos[][3] = {{0}, {1}, {2}, {-1}, {0, 1}, {0, 2}, {1, 2}, {2, 0}, {0, 1, 2}, {-3, -1}};
  int ncombo[] = {1, 1, 1, 1, 2, 2, 2, 2, 3, 2};
  for (int k = 0; k < K_COUNT; k++)
    for (int keep = 0; keep < 2; keep++) {
      for (int c = 0; c < 10; c++) check_reduce(k, LOOM_F32, 3, dims, ncombo[c], combos[c], keep, 1);
      check_reduce(k, LOOM_F32, 3, dims, -1, NULL, keep, 1);
      check_reduce(k, LOOM_F32, 3, dims, 0, NULL, keep, 1); /* no axes: identity */
    }
}

Test(reduce, f64_and_integers) {
  int64_t dims[3] = {3, 2, 5};
  int64_t combos[][2] = {{0}, {1}, {-1}, {0, 2}, {1, 2}};
  int ncombo[] = {1, 1, 1, 2, 2};
  for (int k = 0; k < K_COUNT; k++)
    for (int c = 0; c < 5; c++) {
      check_reduce(k, LOOM_F64, 3, dims, ncombo[c], combos[c], c & 1, 1);
      if (k == K_MEAN || k == K_LSE) continue;
      check_reduce(k, LOOM_I32, 3, dims, ncombo[c], combos[c], c & 1, 1);
      check_reduce(k, LOOM_I64, 3, dims, ncombo[c], combos[c], !(c & 1), 1);
    }
}

/* Multi-pass patterns ([R][K][R], [K][R][K][R], ...) use the workspace. */
Test(reduce, generic_patterns) {
  int64_t d4[4] = {2, 3, 4, 5}, d5[5] = {2, 3, 2, 4, 3};
  int64_t c4[][2] = {{0, 2}, {1, 3}, {0, 3}, {-4, -2}};
  int64_t c5[][3] = {{0, 2, 4}, {1, 3, 0}, {0, 4, 2}};
  for (int k = 0; k < K_COUNT; k++) {
    for (int c = 0; c < 4; c++) check_reduce(k, LOOM_F32, 4, d4, 2, c4[c], c & 1, 2);
    for (int c = 0; c < 3; c++) check_reduce(k, LOOM_F32, 5, d5, 3, c5[c], c & 1, 2);
    check_reduce(k, LOOM_F64, 5, d5, 3, c5[0], 1, 2);
  }
  int64_t di[4] = {3, 2, 4, 3};
  int64_t ax[2] = {0, 2};
  check_reduce(K_SUM, LOOM_I64, 4, di, 2, ax, 0, 2);
  check_reduce(K_MAX, LOOM_I32, 4, di, 2, ax, 1, 2);
}

/* Big enough for the parallel split, column chunking and all-reduce blocks. */
Test(reduce, large_parallel_paths) {
  int64_t rows[2] = {64, 3000}, cols[2] = {700, 300}, thin[2] = {40000, 3}, mid[3] = {3, 500, 70};
  int64_t a0[1] = {0}, a1[1] = {1};
  for (int k = 0; k < K_COUNT; k++) {
    check_reduce(k, LOOM_F32, 2, rows, 1, a1, 0, 4);
    check_reduce(k, LOOM_F32, 2, cols, 1, a0, 0, 4);
    check_reduce(k, LOOM_F32, 2, thin, 1, a0, 1, 3);
    check_reduce(k, LOOM_F32, 2, thin, 1, a1, 0, 3);
    check_reduce(k, LOOM_F32, 3, mid, 1, a1, 0, 4);
    check_reduce(k, LOOM_F64, 2, cols, -1, NULL, 0, 4);
  }
  int64_t big[1] = {300000};
  for (int k = 0; k < K_COUNT; k++) check_reduce(k, LOOM_F32, 1, big, -1, NULL, 0, 4);
  check_reduce(K_SUM, LOOM_I64, 1, big, -1, NULL, 1, 4);
  check_reduce(K_MAX, LOOM_I32, 2, cols, 1, a0, 1, 4);
}

/* f32 sums stay accurate over many elements (naive float accumulation of
 * 0.1 x 2^22 drifts by about 1e-2 relative). */
Test(reduce, f32_sum_accuracy) {
  int64_t n = 1 << 22, d[1] = {n};
  float *v = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = 0.1f;
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x");
  loom_output s = loom_reduce_sum(g, x, -1, NULL, 0, NULL);
  loom_output m = loom_reduce_mean(g, x, -1, NULL, 0, NULL);
  loom_tensor *xv = tu_f32(1, d, v);
  loom_tensor *out = tu_run1(g, 1, &x, &xv, s);
  double want = (double)0.1f * (double)n;
  cr_assert(fabs(((float *)loom_tensor_data(out))[0] - want) <= 1e-6 * want, "sum %.9g want %.9g",
            ((float *)loom_tensor_data(out))[0], want);
  loom_tensor_free(out);
  out = tu_run1(g, 1, &x, &xv, m);
  cr_assert(fabs(((float *)loom_tensor_data(out))[0] - 0.1f) <= 1e-7f);
  /* columns: [n/4, 4] over axis 0 */
  int64_t d2[2] = {n / 4, 4};
  loom_graph *g2 = loom_graph_new();
  loom_output x2 = loom_placeholder(g2, LOOM_F32, 2, d2, "x");
  int64_t ax0 = 0;
  loom_output s2 = loom_reduce_sum(g2, x2, 1, &ax0, 0, NULL);
  loom_tensor *xv2 = tu_f32(2, d2, v);
  loom_tensor *out2 = tu_run1(g2, 1, &x2, &xv2, s2);
  for (int j = 0; j < 4; j++)
    cr_assert(fabs(((float *)loom_tensor_data(out2))[j] - want / 4) <= 1e-6 * want / 4);
  loom_tensor_free(out);
  loom_tensor_free(out2);
  loom_tensor_free(xv);
  loom_tensor_free(xv2);
  loom_graph_free(g);
  loom_graph_free(g2);
  free(v);
}

Test(reduce, logsumexp_stable_and_special_values) {
  int64_t d[1] = {2};
  float v[2] = {1000.0f, 1000.5f};
  loom_graph *g = loom_graph_new();
  loom_output c = loom_const_data(g, LOOM_F32, 1, d, v, "c");
  loom_output l = loom_reduce_logsumexp(g, c, -1, NULL, 0, "lse");
  loom_tensor *out = tu_run1(g, 0, NULL, NULL, l);
  float want = (float)(1000.5 + log(1.0 + exp(-0.5)));
  tu_expect_f32(out, 0, NULL, &want, 1e-6);
  cr_assert(isfinite(((float *)loom_tensor_data(out))[0]));
  loom_tensor_free(out);
  /* -1000 stays finite too; rows of -inf give -inf, +inf gives +inf */
  int64_t d2[2] = {3, 2};
  float w[6] = {-1000.0f, -1000.5f, -INFINITY, -INFINITY, INFINITY, 1.0f};
  loom_output c2 = loom_const_data(g, LOOM_F32, 2, d2, w, "c2");
  int64_t ax = -1;
  loom_output l2 = loom_reduce_logsumexp(g, c2, 1, &ax, 1, NULL);
  out = tu_run1(g, 0, NULL, NULL, l2);
  int64_t od[2] = {3, 1};
  float want2[3] = {(float)(-1000.0 + log(1.0 + exp(-0.5))), -INFINITY, INFINITY};
  cr_assert_eq(loom_tensor_ndim(out), 2);
  cr_assert_eq(loom_tensor_dim(out, 0), od[0]);
  const float *o = loom_tensor_data(out);
  cr_assert(fabsf(o[0] - want2[0]) < 1e-3f, "got %g", o[0]);
  cr_assert(isinf(o[1]) && o[1] < 0, "got %g", o[1]);
  cr_assert(isinf(o[2]) && o[2] > 0, "got %g", o[2]);
  loom_tensor_free(out);
  loom_graph_free(g);
}

Test(reduce, max_min_nan_propagates) {
  int64_t d[2] = {2, 3};
  float v[6] = {1, NAN, 3, 4, 5, 6};
  loom_graph *g = loom_graph_new();
  loom_output c = loom_const_data(g, LOOM_F32, 2, d, v, "c");
  int64_t ax = 1;
  loom_output mx = loom_reduce_max(g, c, 1, &ax, 0, NULL);
  loom_output mn = loom_reduce_min(g, c, 1, &ax, 0, NULL);
  loom_tensor *a = tu_run1(g, 0, NULL, NULL, mx);
  loom_tensor *b = tu_run1(g, 0, NULL, NULL, mn);
  const float *pa = loom_tensor_data(a), *pb = loom_tensor_data(b);
  cr_assert(isnan(pa[0]) && pa[1] == 6.0f);
  cr_assert(isnan(pb[0]) && pb[1] == 4.0f);
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_graph_free(g);
}

Test(reduce, empty_axes_zero_size_and_scalars) {
  /* [0,3] over axis 0: sum 0, prod 1, mean NaN, lse -inf, max/min errors at run time */
  int64_t d[2] = {0, 3}, ax0 = 0, ax1 = 1, od[1] = {3};
  for (int k = 0; k < K_COUNT; k++) {
    loom_graph *g = loom_graph_new();
    loom_output x = loom_placeholder(g, LOOM_F32, 2, d, "x");
    loom_output y = builder_of(k)(g, x, 1, &ax0, 0, "empty_red");
    loom_output y1 = builder_of(k)(g, x, 1, &ax1, 0, "over_axis1");
    loom_tensor *xv = loom_tensor_new(LOOM_F32, 2, d, NULL);
    if (k == K_MAX || k == K_MIN) {
      char msg[512];
      loom_code rc = tu_run_err(g, 1, &x, &xv, y, msg, sizeof msg);
      cr_assert_eq(rc, LOOM_INVALID_ARGUMENT, "%s: rc %d", kname[k], rc);
      cr_assert(strstr(msg, "empty_red") && strstr(msg, "empty") && strstr(msg, "[0,3]"), "msg: %s", msg);
    } else {
      loom_tensor *out = tu_run1(g, 1, &x, &xv, y);
      float want = k == K_SUM ? 0.0f : k == K_PROD ? 1.0f : k == K_MEAN ? NAN : -INFINITY;
      float w3[3] = {want, want, want};
      if (k == K_LSE) {
        const float *o = loom_tensor_data(out);
        for (int i = 0; i < 3; i++) cr_assert(isinf(o[i]) && o[i] < 0);
      } else {
        tu_expect_f32(out, 1, od, w3, 0);
      }
      loom_tensor_free(out);
    }
    /* reducing the other axis gives an empty output: fine for every kind */
    loom_tensor *o1 = tu_run1(g, 1, &x, &xv, y1);
    cr_assert_eq(loom_tensor_numel(o1), 0);
    cr_assert_eq(loom_tensor_dim(o1, 0), 0);
    loom_tensor_free(o1);
    loom_tensor_free(xv);
    loom_graph_free(g);
  }
  /* scalars: all axes (none) is the identity; an explicit axis is out of range */
  loom_graph *g = loom_graph_new();
  loom_output s = loom_const_f32(g, 2.5f, "s");
  loom_output r = loom_reduce_sum(g, s, -1, NULL, 1, NULL);
  loom_output r2 = loom_reduce_logsumexp(g, s, -1, NULL, 0, NULL);
  loom_tensor *o = tu_run1(g, 0, NULL, NULL, r);
  float w = 2.5f;
  tu_expect_f32(o, 0, NULL, &w, 0);
  loom_tensor_free(o);
  o = tu_run1(g, 0, NULL, NULL, r2);
  tu_expect_f32(o, 0, NULL, &w, 1e-7);
  loom_tensor_free(o);
  int64_t a0 = 0;
  loom_reduce_sum(g, s, 1, &a0, 0, "scalar_axis");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "scalar_axis"), "%s", loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
}

static void expect_build_error(loom_output (*mk)(loom_graph *, loom_output), loom_dtype dt, int nd,
                               const int64_t *dims, const char *node, const char *needle) {
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, dt, nd, dims, "x");
  mk(g, x);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT, "%s: no error", node);
  cr_assert(strstr(loom_status_message(st), node), "message does not name %s: %s", node, loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), needle), "message lacks '%s': %s", needle, loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
}
static loom_output mk_out_of_range(loom_graph *g, loom_output x) {
  int64_t a[1] = {3};
  return loom_reduce_sum(g, x, 1, a, 0, "bad_axis");
}
static loom_output mk_neg_out_of_range(loom_graph *g, loom_output x) {
  int64_t a[1] = {-4};
  return loom_reduce_max(g, x, 1, a, 0, "bad_neg");
}
static loom_output mk_duplicate(loom_graph *g, loom_output x) {
  int64_t a[2] = {1, -2};
  return loom_reduce_mean(g, x, 2, a, 1, "dup_axis");
}
static loom_output mk_mean_int(loom_graph *g, loom_output x) { return loom_reduce_mean(g, x, -1, NULL, 0, "mean_int"); }
static loom_output mk_argmax_axis(loom_graph *g, loom_output x) { return loom_argmax(g, x, 3, LOOM_I64, "am_axis"); }
static loom_output mk_argmax_dtype(loom_graph *g, loom_output x) { return loom_argmax(g, x, 0, LOOM_F32, "am_dt"); }
static loom_output mk_bias_rank(loom_graph *g, loom_output x) {
  return loom_bias_add(g, x, loom_const_f32(g, 1.0f, NULL), "bias_bad");
}

Test(reduce, malformed_calls_name_the_node) {
  int64_t d[3] = {2, 3, 4};
  expect_build_error(mk_out_of_range, LOOM_F32, 3, d, "bad_axis", "out of range");
  expect_build_error(mk_neg_out_of_range, LOOM_F32, 3, d, "bad_neg", "-4");
  expect_build_error(mk_duplicate, LOOM_F32, 3, d, "dup_axis", "repeated");
  expect_build_error(mk_mean_int, LOOM_I32, 3, d, "mean_int", "int32");
  expect_build_error(mk_argmax_axis, LOOM_F32, 3, d, "am_axis", "out of range");
  expect_build_error(mk_argmax_dtype, LOOM_F32, 3, d, "am_dt", "int32 or int64");
  expect_build_error(mk_bias_rank, LOOM_F32, 3, d, "bias_bad", "does not match");
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 3, d, "x");
  loom_reduce_sum(g, x, 2, NULL, 0, "null_axes");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "null_axes"));
  loom_status_free(st);
  loom_graph_free(g);
}

/* ---- ArgMax / ArgMin ---- */
static void check_arg(int is_min, loom_dtype dt, loom_dtype odt, int nd, const int64_t *dims, const double *x,
                      int64_t axis) {
  int64_t n = numel(nd, dims);
  void *raw = malloc(8 * (size_t)n);
  for (int64_t i = 0; i < n; i++) switch (dt) {
    case LOOM_F32: ((float *)raw)[i] = (float)x[i]; break;
    case LOOM_F64: ((double *)raw)[i] = x[i]; break;
    case LOOM_I32: ((int32_t *)raw)[i] = (int32_t)x[i]; break;
    default: ((int64_t *)raw)[i] = (int64_t)x[i]; break;
    }
  int64_t ax = axis < 0 ? axis + nd : axis, outer = 1, inner = 1, R = dims[ax];
  for (int i = 0; i < ax; i++) outer *= dims[i];
  for (int i = (int)ax + 1; i < nd; i++) inner *= dims[i];
  loom_graph *g = loom_graph_new();
  loom_output xp = loom_placeholder(g, dt, nd, dims, "x");
  loom_output y = is_min ? loom_argmin(g, xp, axis, odt, NULL) : loom_argmax(g, xp, axis, odt, NULL);
  cr_assert_str_eq(loom_node_op_name(y.node), is_min ? "ArgMin" : "ArgMax");
  loom_tensor *xv = loom_tensor_from_data(dt, nd, dims, raw, NULL);
  loom_tensor *out = run_threads(g, xp, xv, y, 3);
  cr_assert_eq(loom_tensor_dtype(out), odt ? odt : LOOM_I64);
  cr_assert_eq(loom_tensor_ndim(out), nd - 1);
  cr_assert_eq(loom_tensor_numel(out), outer * inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t best = 0;
      for (int64_t r = 1; r < R; r++) {
        double v = x[(o * R + r) * inner + j], b = x[(o * R + best) * inner + j];
        if (is_min ? v < b : v > b) best = r;
      }
      int64_t got = loom_tensor_dtype(out) == LOOM_I32 ? ((int32_t *)loom_tensor_data(out))[o * inner + j]
                                                        : ((int64_t *)loom_tensor_data(out))[o * inner + j];
      cr_assert_eq(got, best, "arg%s axis %lld at (%lld,%lld): got %lld want %lld", is_min ? "min" : "max",
                   (long long)axis, (long long)o, (long long)j, (long long)got, (long long)best);
    }
  loom_tensor_free(out);
  loom_tensor_free(xv);
  loom_graph_free(g);
  free(raw);
}

Test(argmax, ties_axes_dtypes) {
  /* ties: TF returns the smallest index */
  int64_t d[2] = {2, 4};
  double t[8] = {1, 3, 3, 0, 5, 5, 5, 5};
  loom_graph *g = loom_graph_new();
  float tf[8];
  for (int i = 0; i < 8; i++) tf[i] = (float)t[i];
  loom_output c = loom_const_data(g, LOOM_F32, 2, d, tf, "c");
  loom_output am = loom_argmax(g, c, 1, 0, "am");
  loom_output an = loom_argmin(g, c, -1, LOOM_I32, "an");
  loom_tensor *a = tu_run1(g, 0, NULL, NULL, am), *b = tu_run1(g, 0, NULL, NULL, an);
  cr_assert_eq(loom_tensor_dtype(a), LOOM_I64);
  cr_assert_eq(loom_tensor_dtype(b), LOOM_I32);
  cr_assert_eq(((int64_t *)loom_tensor_data(a))[0], 1);
  cr_assert_eq(((int64_t *)loom_tensor_data(a))[1], 0);
  cr_assert_eq(((int32_t *)loom_tensor_data(b))[0], 3);
  cr_assert_eq(((int32_t *)loom_tensor_data(b))[1], 0);
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_graph_free(g);

  int64_t d3[3] = {3, 5, 4};
  double *x = malloc(sizeof(double) * 3 * 5 * 300 * 7);
  for (int i = 0; i < 60; i++) x[i] = (double)((i * 7) % 5); /* many ties */
  for (int ax = -3; ax < 3; ax++) {
    check_arg(0, LOOM_F32, LOOM_I64, 3, d3, x, ax);
    check_arg(1, LOOM_F64, LOOM_I32, 3, d3, x, ax);
    check_arg(0, LOOM_I32, LOOM_I32, 3, d3, x, ax);
    check_arg(1, LOOM_I64, 0, 3, d3, x, ax);
  }
  /* wide inner (column chunks), long rows (parallel) */
  int64_t w[3] = {3, 5, 300 * 7};
  for (int64_t i = 0; i < numel(3, w); i++) x[i] = val(i * 3 + 1);
  check_arg(0, LOOM_F32, LOOM_I64, 3, w, x, 1);
  check_arg(1, LOOM_F32, LOOM_I64, 3, w, x, 1);
  check_arg(0, LOOM_F32, LOOM_I32, 3, w, x, 2);
  free(x);
}

/* NaN: the first NaN wins (NumPy's rule), in short rows, long rows and columns. */
Test(argmax, nan_first_wins) {
  int64_t d[2] = {2, 100};
  float v[200];
  for (int i = 0; i < 200; i++) v[i] = (float)(i % 17);
  v[70] = NAN;
  v[90] = NAN;
  v[100 + 3] = NAN;
  loom_graph *g = loom_graph_new();
  loom_output c = loom_const_data(g, LOOM_F32, 2, d, v, "c");
  loom_output rows = loom_argmax(g, c, 1, LOOM_I32, NULL), rmin = loom_argmin(g, c, 1, LOOM_I32, NULL);
  loom_output cols = loom_argmax(g, c, 0, LOOM_I32, NULL);
  loom_tensor *a = tu_run1(g, 0, NULL, NULL, rows), *b = tu_run1(g, 0, NULL, NULL, rmin);
  loom_tensor *cc = tu_run1(g, 0, NULL, NULL, cols);
  const int32_t *pa = loom_tensor_data(a), *pb = loom_tensor_data(b), *pc = loom_tensor_data(cc);
  cr_assert_eq(pa[0], 70);
  cr_assert_eq(pa[1], 3);
  cr_assert_eq(pb[0], 70);
  cr_assert_eq(pb[1], 3);
  cr_assert_eq(pc[3], 1);  /* column 3: [3, NaN] */
  cr_assert_eq(pc[70], 0); /* column 70: [NaN, 2] */
  cr_assert_eq(pc[1], 1);  /* column 1: [1, 16] */
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_tensor_free(cc);
  loom_graph_free(g);
}

Test(argmax, empty_axis_is_an_error) {
  int64_t d[2] = {3, 0};
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 2, d, "x");
  loom_output am = loom_argmax(g, x, 1, LOOM_I64, "am_empty");
  loom_output ok = loom_argmax(g, x, 0, LOOM_I64, "am_ok"); /* output [0]: nothing to do */
  loom_tensor *xv = loom_tensor_new(LOOM_F32, 2, d, NULL);
  char msg[512];
  cr_assert_eq(tu_run_err(g, 1, &x, &xv, am, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "am_empty") && strstr(msg, "empty"), "%s", msg);
  loom_tensor *o = tu_run1(g, 1, &x, &xv, ok);
  cr_assert_eq(loom_tensor_numel(o), 0);
  loom_tensor_free(o);
  loom_tensor_free(xv);
  loom_graph_free(g);
}

/* ---- MatMul ---- */
static void naive_mm(int ta, int tb, int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *C) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) {
        double a = ta ? A[k * M + m] : A[m * K + k];
        double b = tb ? B[n * K + k] : B[k * N + n];
        s += a * b;
      }
      C[m * N + n] = s;
    }
}

/* Runs MatMul at `threads`, checks it against the double reference and
 * returns a copy of the output (the caller frees it). */
static void *run_matmul(loom_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K, int threads) {
  int64_t da[2] = {ta ? K : M, ta ? M : K}, db[2] = {tb ? N : K, tb ? K : N};
  int64_t na = M * K, nb = K * N;
  double *A = malloc(sizeof(double) * (size_t)(na + 1)), *B = malloc(sizeof(double) * (size_t)(nb + 1));
  double *C = malloc(sizeof(double) * (size_t)(M * N + 1));
  float *Af = malloc(sizeof(float) * (size_t)(na + 1)), *Bf = malloc(sizeof(float) * (size_t)(nb + 1));
  for (int64_t i = 0; i < na; i++) Af[i] = (float)(A[i] = val(i));
  for (int64_t i = 0; i < nb; i++) Bf[i] = (float)(B[i] = val(i * 5 + 3));
  naive_mm(ta, tb, M, N, K, A, B, C);
  loom_graph *g = loom_graph_new();
  int64_t unk[2] = {-1, -1};
  loom_output a = loom_placeholder(g, dt, 2, unk, "a");
  loom_output b = loom_placeholder(g, dt, 2, unk, "b");
  loom_output y = loom_matmul(g, a, b, ta, tb, "mm");
  cr_assert_str_eq(loom_node_op_name(y.node), "MatMul");
  loom_tensor *av = loom_tensor_from_data(dt, 2, da, dt == LOOM_F32 ? (void *)Af : (void *)A, NULL);
  loom_tensor *bv = loom_tensor_from_data(dt, 2, db, dt == LOOM_F32 ? (void *)Bf : (void *)B, NULL);
  loom_output feeds[2] = {a, b};
  loom_tensor *vals[2] = {av, bv};
  loom_status *st = loom_status_new();
  loom_session_options o = loom_session_options_default();
  o.num_threads = threads;
  loom_session *s = loom_session_new(g, &o, st);
  loom_tensor *out = NULL;
  for (int rep = 0; rep < 2; rep++) { /* second run reuses the plan, the arena and the fetched tensor */
    cr_assert_eq(loom_session_run(s, feeds, vals, 2, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s",
                 loom_status_message(st));
    cr_assert_eq(loom_tensor_dim(out, 0), M);
    cr_assert_eq(loom_tensor_dim(out, 1), N);
    for (int64_t i = 0; i < M * N; i++) {
      double got = dt == LOOM_F32 ? ((float *)loom_tensor_data(out))[i] : ((double *)loom_tensor_data(out))[i];
      double tol = dt == LOOM_F32 ? 1e-4 : 1e-12;
      cr_assert(fabs(got - C[i]) <= tol * (1 + fabs(C[i]) + (double)K),
                "mm %s ta=%d tb=%d M=%lld N=%lld K=%lld: [%lld] got %.9g want %.9g", loom_dtype_name(dt), ta, tb,
                (long long)M, (long long)N, (long long)K, (long long)i, got, C[i]);
    }
  }
  size_t bytes = (size_t)(M * N) * (dt == LOOM_F32 ? sizeof(float) : sizeof(double));
  void *copy = malloc(bytes + 1);
  memcpy(copy, loom_tensor_data(out), bytes);
  loom_tensor_free(out);
  loom_session_free(s);
  loom_status_free(st);
  loom_tensor_free(av);
  loom_tensor_free(bv);
  loom_graph_free(g);
  free(A);
  free(B);
  free(C);
  free(Af);
  free(Bf);
  return copy;
}

static void check_matmul(loom_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K, int threads) {
  free(run_matmul(dt, ta, tb, M, N, K, threads));
}

Test(matmul, transposes_gemv_paths_and_empty_k) {
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      check_matmul(LOOM_F32, ta, tb, 5, 3, 7, 2);
      check_matmul(LOOM_F64, ta, tb, 4, 6, 5, 1);
      check_matmul(LOOM_F32, ta, tb, 1, 9, 6, 2);  /* M == 1: gemv */
      check_matmul(LOOM_F32, ta, tb, 8, 1, 6, 2);  /* N == 1: gemv */
      check_matmul(LOOM_F64, ta, tb, 1, 1, 6, 1);  /* dot */
      check_matmul(LOOM_F32, ta, tb, 3, 4, 0, 1);  /* K == 0: zeros */
      check_matmul(LOOM_F32, ta, tb, 0, 4, 3, 1);  /* empty output */
      check_matmul(LOOM_F32, ta, tb, 70, 90, 130, 4);
    }
}

/* Products the pool cuts into blocks: column blocks (N >= M), row blocks
 * with a short last block, and blocks that are themselves gemv (one row or
 * one column of C, strided operands). */
Test(matmul, pool_blocks_rows_columns_and_gemv) {
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      check_matmul(LOOM_F32, ta, tb, 40, 200, 150, 2);
      check_matmul(LOOM_F64, ta, tb, 133, 50, 400, 3);
      check_matmul(LOOM_F32, ta, tb, 1, 333, 2000, 2);
      check_matmul(LOOM_F64, ta, tb, 300, 1, 2000, 3);
      check_matmul(LOOM_F32, ta, tb, 785, 17, 300, 2);
    }
}

/* f32 products of a batch's rows x a matrix a multiple of 16 columns wide, and the transposed batch x
 * such a matrix (a dense layer's forward and filter gradient), which run on kernels/cpu/gemm_tiles.c's
 * register tiles where the CPU has AVX-512: within f32 rounding of the double reference and the same
 * bits at 1, 2 and 3 threads (the MatMul's blocks of rows or columns, and its halves of K, differ by
 * thread count and shape). The tiles' own arithmetic is checked bit for bit below. */
Test(matmul, register_tiles_same_bits_at_any_thread_count) {
  static const int64_t shapes[][4] = {/* ta, M, N, K */
                                      {0, 64, 128, 300}, {0, 13, 192, 129}, {0, 7, 64, 1},  {0, 64, 128, 1568},
                                      {1, 1568, 128, 64}, {1, 11, 64, 200}, {1, 130, 64, 17}};
  for (int i = 0; i < 7; i++) {
    int ta = (int)shapes[i][0];
    int64_t M = shapes[i][1], N = shapes[i][2], K = shapes[i][3];
    if (LOOM_TEST_EMULATED && M * N * K > 2000000) continue;
    size_t bytes = (size_t)(M * N) * sizeof(float);
    float *one = run_matmul(LOOM_F32, ta, 0, M, N, K, 1);
    for (int threads = 2; threads <= 3; threads++) {
      float *more = run_matmul(LOOM_F32, ta, 0, M, N, K, threads);
      cr_assert(!memcmp(one, more, bytes), "ta=%d M=%lld N=%lld K=%lld: %d threads differ from 1", ta, (long long)M,
                (long long)N, (long long)K, threads);
      free(more);
    }
    free(one);
  }
}

/* The register tiles called directly (kernels/cpu/gemm_tiles.h), on operands with rows longer than
 * the product reads (lda, ldc past K or M and N): every element of C is the multiply-adds of its terms
 * in k order (fmaf here: the same bits), across K blocks of 64, row tiles of 6 with short last ones
 * and 64-column strips with narrower last ones; C's columns past N keep their sentinel. Skipped where
 * the CPU has no AVX-512 (LOOM_CONV_ISA lowers it too). */
Test(matmul, register_tiles_multiply_add_in_k_order) {
  static const int64_t shapes[][4] = {/* ta, M, N, K */
                                      {0, 64, 128, 300}, {0, 13, 208, 129}, {0, 7, 16, 1}, {0, 1, 48, 65},
                                      {1, 11, 64, 200},  {1, 130, 32, 17},  {1, 6, 80, 64}};
  for (int i = 0; i < 7; i++) {
    const int ta = (int)shapes[i][0];
    const int64_t M = shapes[i][1], N = shapes[i][2], K = shapes[i][3];
    if (!loom__gemm_tiles_fit(N)) return;
    const int64_t lda = (ta ? M : K) + 3, ldb = N + 5, ldc = N + 7, arows = ta ? K : M;
    float *A = malloc(sizeof(float) * (size_t)(arows * lda)), *B = malloc(sizeof(float) * (size_t)(K * ldb));
    float *C = malloc(sizeof(float) * (size_t)(M * ldc));
    cr_assert(A && B && C);
    for (int64_t j = 0; j < arows * lda; j++) A[j] = (float)val(j);
    for (int64_t j = 0; j < K * ldb; j++) B[j] = (float)val(j * 5 + 3);
    for (int64_t j = 0; j < M * ldc; j++) C[j] = -7.0f;
    loom__gemm_tiles_f32(ta, M, N, K, A, lda, B, ldb, C, ldc);
    for (int64_t m = 0; m < M; m++) {
      for (int64_t n = 0; n < N; n++) {
        float s = 0;
        for (int64_t k = 0; k < K; k++) s = fmaf(ta ? A[k * lda + m] : A[m * lda + k], B[k * ldb + n], s);
        cr_assert(!memcmp(&s, C + m * ldc + n, sizeof s), "ta=%d M=%lld N=%lld K=%lld [%lld][%lld]: %.9g, the "
                  "k-order sum %.9g", ta, (long long)M, (long long)N, (long long)K, (long long)m, (long long)n,
                  C[m * ldc + n], s);
      }
      for (int64_t n = N; n < ldc; n++) cr_assert_eq(C[m * ldc + n], -7.0f, "C[%lld][%lld] written", (long long)m, (long long)n);
    }
    free(A);
    free(B);
    free(C);
  }
}

/* Deep products with a small C (K at least 4x C's larger side: a dense
 * layer's forward at a small batch) are summed in pieces along K, the same
 * pieces at any thread count: the same bits at 1, 2 and 5 threads where C is
 * at most one block wide (blocks of rows or columns may round differently
 * in OpenBLAS's small-product kernels, with or without the pieces), and the
 * double reference within f32 rounding at every thread count. */
Test(matmul, deep_products_summed_in_pieces_along_k) {
  /* the CNN's dense layer (smaller under the CPU emulator: still cut along K) */
  static const int64_t shapes[][3] = {
      {16, 12, 4000}, {9, 16, 4001}, {LOOM_TEST_EMULATED ? 16 : 64, LOOM_TEST_EMULATED ? 32 : 128, 1568}, {37, 50, 1001}};
  for (int i = 0; i < 4; i++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (int f64 = 0; f64 < 2; f64++) {
          loom_dtype dt = f64 ? LOOM_F64 : LOOM_F32;
          int64_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
          size_t bytes = (size_t)(M * N) * (f64 ? sizeof(double) : sizeof(float));
          void *one = run_matmul(dt, ta, tb, M, N, K, 1);
          for (int threads = 2; threads <= (LOOM_TEST_EMULATED ? 2 : 5); threads += 3) {
            void *more = run_matmul(dt, ta, tb, M, N, K, threads);
            if (M <= 16 && N <= 16)
              cr_assert(!memcmp(one, more, bytes), "mm %s ta=%d tb=%d M=%lld N=%lld K=%lld: %d threads differ from 1",
                        loom_dtype_name(dt), ta, tb, (long long)M, (long long)N, (long long)K, threads);
            free(more);
          }
          free(one);
        }
}

/* The partial products of a deep product live in the op's workspace: a
 * MatMul and a BatchMatMulV2 (shared b: one folded product) cut along K
 * allocate nothing in steady-state runs, at 1 and 2 threads. */
Test(matmul, deep_products_steady_state_does_not_allocate) {
  tu_alloc_count_begin();
  for (int threads = 1; threads <= 2; threads++)
    for (int batched = 0; batched < 2; batched++) {
      loom_graph *g = loom_graph_new();
      /* the CNN's dense layer (a quarter of its rows and columns under the CPU emulator: still cut along K) */
      const int64_t M = LOOM_TEST_EMULATED ? 16 : 64, N = LOOM_TEST_EMULATED ? 32 : 128;
      int64_t da[3] = {2, M / 2, 1568}, db[2] = {1568, N};
      int64_t d2[2] = {M, 1568};
      loom_output a = batched ? loom_placeholder(g, LOOM_F32, 3, da, "a") : loom_placeholder(g, LOOM_F32, 2, d2, "a");
      loom_output b = loom_placeholder(g, LOOM_F32, 2, db, "b");
      loom_output y = batched ? loom_batch_matmul(g, a, b, 0, 0, "mm") : loom_matmul(g, a, b, 0, 0, "mm");
      loom_tensor *av = batched ? loom_tensor_new(LOOM_F32, 3, da, NULL) : loom_tensor_new(LOOM_F32, 2, d2, NULL);
      loom_tensor *bv = loom_tensor_new(LOOM_F32, 2, db, NULL);
      float *ap = loom_tensor_data(av), *bp = loom_tensor_data(bv);
      for (int64_t i = 0; i < M * 1568; i++) ap[i] = (float)val(i);
      for (int64_t i = 0; i < 1568 * N; i++) bp[i] = (float)val(i * 5 + 3);
      loom_output feeds[2] = {a, b};
      loom_tensor *vals[2] = {av, bv};
      loom_session_options o = loom_session_options_default();
      o.num_threads = threads;
      loom_status *st = loom_status_new();
      loom_session *s = loom_session_new(g, &o, st);
      loom_tensor *out = NULL;
      cr_assert_eq(loom_session_run(s, feeds, vals, 2, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s",
                   loom_status_message(st));
      long before = tu_alloc_count();
      for (int r = 0; r < 5; r++)
        cr_assert_eq(loom_session_run(s, feeds, vals, 2, &y, &out, 1, NULL, 0, st), LOOM_OK);
      long after = tu_alloc_count();
      cr_assert_eq(after - before, 0, "threads=%d batched=%d: steady-state runs allocated %ld times", threads, batched,
                   after - before);
      /* row 1, column 2 against the double reference */
      double want = 0;
      for (int64_t k = 0; k < 1568; k++) want += val(1 * 1568 + k) * val((k * N + 2) * 5 + 3);
      float got = ((const float *)loom_tensor_data_const(out))[1 * N + 2];
      cr_assert(fabs(got - want) <= 1e-4 * (1 + fabs(want)), "got %.9g want %.9g", got, want);
      loom_tensor_free(out);
      loom_tensor_free(av);
      loom_tensor_free(bv);
      loom_session_free(s);
      loom_status_free(st);
      loom_graph_free(g);
    }
  tu_alloc_count_end();
}

/* MatMul with a mostly-zero left operand (a wide & deep first layer: a few
 * numbers and one-hot columns; the kernel skips zeros when at most 1/8 of
 * op(A) is nonzero, kernels/cpu/linalg.c) against the double reference;
 * density 1/8 +- a little takes either path. bad_b: B's row 'bad_row' holds
 * inf in column 0, a row op(A) never uses: 0 * inf makes column 0 NaN in
 * every row, as in the dense product. Returns the output (caller frees). */
static float *run_mm_sparse(int ta, int tb, int64_t M, int64_t N, int64_t K, int per_row, int bad_b) {
  int64_t da[2] = {ta ? K : M, ta ? M : K}, db[2] = {tb ? N : K, tb ? K : N};
  double *A = calloc((size_t)(M * K + 1), sizeof(double)), *B = malloc(sizeof(double) * (size_t)(K * N + 1));
  double *C = malloc(sizeof(double) * (size_t)(M * N + 1));
  float *Af = calloc((size_t)(M * K + 1), sizeof(float)), *Bf = malloc(sizeof(float) * (size_t)(K * N + 1));
  const int64_t bad_row = K - 1;
  for (int64_t m = 0; m < M; m++)
    for (int j = 0; j < per_row; j++) { /* column 0 numeric, the rest one-hot-like, never bad_row */
      int64_t k = j == 0 ? 0 : 1 + (m * 7 + j * 13) % (K - 2);
      double v = j == 0 ? val(m) : 1.0 + 0.25 * j;
      A[ta ? k * M + m : m * K + k] = v;
    }
  for (int64_t i = 0; i < M * K; i++) Af[i] = (float)A[i];
  for (int64_t i = 0; i < K * N; i++) Bf[i] = (float)(B[i] = val(i * 3 + 1));
  if (bad_b) Bf[tb ? 0 * K + bad_row : bad_row * N + 0] = INFINITY;
  naive_mm(ta, tb, M, N, K, A, B, C);
  loom_graph *g = loom_graph_new();
  int64_t unk[2] = {-1, -1};
  loom_output a = loom_placeholder(g, LOOM_F32, 2, unk, "a");
  loom_output b = loom_placeholder(g, LOOM_F32, 2, unk, "b");
  loom_output y = loom_matmul(g, a, b, ta, tb, "mm");
  loom_tensor *av = loom_tensor_from_data(LOOM_F32, 2, da, Af, NULL);
  loom_tensor *bv = loom_tensor_from_data(LOOM_F32, 2, db, Bf, NULL);
  loom_output feeds[2] = {a, b};
  loom_tensor *vals[2] = {av, bv};
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_session_run(s, feeds, vals, 2, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  float *r = malloc(sizeof(float) * (size_t)(M * N + 1));
  memcpy(r, loom_tensor_data(out), sizeof(float) * (size_t)(M * N));
  for (int64_t i = 0; i < M * N; i++) {
    if (bad_b && i % N == 0) {
      cr_assert(isnan(r[i]), "ta=%d tb=%d M=%lld N=%lld K=%lld: [%lld] = %g, want NaN (0 * inf)", ta, tb, (long long)M,
                (long long)N, (long long)K, (long long)i, r[i]);
      continue;
    }
    cr_assert(fabs(r[i] - C[i]) <= 1e-5 * (1 + fabs(C[i])) * per_row,
              "sparse mm ta=%d tb=%d M=%lld N=%lld K=%lld per_row=%d: [%lld] got %.9g want %.9g", ta, tb, (long long)M,
              (long long)N, (long long)K, per_row, (long long)i, r[i], C[i]);
  }
  loom_tensor_free(out);
  loom_session_free(s);
  loom_status_free(st);
  loom_tensor_free(av);
  loom_tensor_free(bv);
  loom_graph_free(g);
  free(A);
  free(B);
  free(C);
  free(Af);
  free(Bf);
  return r;
}

Test(matmul, mostly_zero_left_operand) {
  static const int64_t shapes[][3] = {{128, 64, 126}, {126, 64, 128}, {33, 100, 70}, {64, 13, 41}, {1000, 40, 126}};
  for (int i = 0; i < 5; i++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        int64_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
        free(run_mm_sparse(ta, tb, M, N, K, 4, 0));
        free(run_mm_sparse(ta, tb, M, N, K, 4, 1));
        free(run_mm_sparse(ta, tb, M, N, K, (int)(K / 8), 0));     /* about the threshold */
        free(run_mm_sparse(ta, tb, M, N, K, (int)(K / 8) + 2, 0)); /* dense path */
      }
  /* the same product from the sparse and the dense path (A and its transpose): equal within rounding */
  float *x = run_mm_sparse(0, 0, 128, 64, 126, 10, 0), *xt = run_mm_sparse(1, 0, 128, 64, 126, 10, 0);
  for (int64_t i = 0; i < 128 * 64; i++) cr_assert_float_eq(x[i], xt[i], 1e-5f * (1 + fabsf(x[i])));
  free(x);
  free(xt);
}

Test(matmul, shape_mismatch_names_node_and_shapes) {
  loom_graph *g = loom_graph_new();
  int64_t da[2] = {-1, 784}, db[2] = {512, 10};
  loom_output a = loom_placeholder(g, LOOM_F32, 2, da, "a");
  loom_output b = loom_placeholder(g, LOOM_F32, 2, db, "b");
  loom_graph_push_scope(g, "dense");
  loom_matmul(g, a, b, 0, 0, "mm");
  loom_graph_pop_scope(g);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  const char *m = loom_status_message(st);
  cr_assert(strstr(m, "dense/mm") && strstr(m, "[?,784]") && strstr(m, "[512,10]") && strstr(m, "MatMul"), "%s", m);
  loom_graph_free(g);

  /* unknown at build time, wrong at run time */
  g = loom_graph_new();
  int64_t unk[2] = {-1, -1};
  a = loom_placeholder(g, LOOM_F32, 2, unk, "a");
  b = loom_placeholder(g, LOOM_F32, 2, unk, "b");
  loom_output y = loom_matmul(g, a, b, 0, 1, "late");
  int64_t d1[2] = {2, 3}, d2[2] = {4, 5};
  loom_tensor *av = loom_tensor_new(LOOM_F32, 2, d1, NULL), *bv = loom_tensor_new(LOOM_F32, 2, d2, NULL);
  loom_output feeds[2] = {a, b};
  loom_tensor *vals[2] = {av, bv};
  char msg[512];
  cr_assert_eq(tu_run_err(g, 2, feeds, vals, y, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "late") && strstr(msg, "[2,3]") && strstr(msg, "[4,5]"), "%s", msg);
  loom_tensor_free(av);
  loom_tensor_free(bv);
  /* wrong rank and dtype */
  loom_graph_free(g);
  g = loom_graph_new();
  int64_t d3[3] = {2, 3, 4};
  a = loom_placeholder(g, LOOM_F32, 3, d3, "a");
  loom_matmul(g, a, a, 0, 0, "rank3");
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "rank3"));
  loom_graph_free(g);
  g = loom_graph_new();
  a = loom_placeholder(g, LOOM_F32, 2, d1, "a");
  b = loom_placeholder(g, LOOM_F64, 2, d2, "b");
  loom_matmul(g, a, b, 0, 0, "mixed");
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "mixed") && strstr(loom_status_message(st), "float64"));
  loom_graph_free(g);
  g = loom_graph_new();
  a = loom_placeholder(g, LOOM_I32, 2, d1, "a");
  loom_matmul(g, a, a, 1, 0, "ints");
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "ints"));
  loom_graph_free(g);
  loom_status_free(st);
}

/* ---- BatchMatMulV2 ---- */
static void check_bmm(int nda, const int64_t *da, int ndb, const int64_t *db, int adjx, int adjy, int nwant,
                      const int64_t *want_dims) {
  int64_t na = numel(nda, da), nb = numel(ndb, db);
  float *A = malloc(sizeof(float) * (size_t)na), *B = malloc(sizeof(float) * (size_t)nb);
  for (int64_t i = 0; i < na; i++) A[i] = (float)val(i);
  for (int64_t i = 0; i < nb; i++) B[i] = (float)val(i * 3 + 2);
  loom_graph *g = loom_graph_new();
  loom_output a = loom_const_data(g, LOOM_F32, nda, da, A, "a");
  loom_output b = loom_const_data(g, LOOM_F32, ndb, db, B, "b");
  loom_output y = loom_batch_matmul(g, a, b, adjx, adjy, NULL);
  cr_assert_str_eq(loom_node_op_name(y.node), "BatchMatMulV2");
  loom_tensor *out = tu_run1(g, 0, NULL, NULL, y);
  cr_assert_eq(loom_tensor_ndim(out), nwant);
  for (int i = 0; i < nwant; i++) cr_assert_eq(loom_tensor_dim(out, i), want_dims[i]);
  int64_t M = want_dims[nwant - 2], N = want_dims[nwant - 1];
  int64_t K = adjx ? da[nda - 2] : da[nda - 1];
  int nbo = nwant - 2;
  int64_t batches = numel(nbo, want_dims);
  const float *o = loom_tensor_data(out);
  double *Ad = malloc(sizeof(double) * (size_t)(M * K)), *Bd = malloc(sizeof(double) * (size_t)(K * N));
  double *C = malloc(sizeof(double) * (size_t)(M * N));
  for (int64_t t = 0; t < batches; t++) {
    /* batch index -> a / b matrix indices by broadcasting */
    int64_t rem = t, ia = 0, ib = 0, mula = 1, mulb = 1;
    for (int d = nbo - 1; d >= 0; d--) {
      int64_t id = rem % want_dims[d];
      rem /= want_dims[d];
      int xa = d - (nbo - (nda - 2)), xb = d - (nbo - (ndb - 2));
      if (xa >= 0) {
        ia += (da[xa] == 1 ? 0 : id) * mula;
        mula *= da[xa];
      }
      if (xb >= 0) {
        ib += (db[xb] == 1 ? 0 : id) * mulb;
        mulb *= db[xb];
      }
    }
    for (int64_t i = 0; i < M * K; i++) Ad[i] = A[ia * M * K + i];
    for (int64_t i = 0; i < K * N; i++) Bd[i] = B[ib * K * N + i];
    naive_mm(adjx, adjy, M, N, K, Ad, Bd, C);
    for (int64_t i = 0; i < M * N; i++)
      cr_assert(fabs(o[t * M * N + i] - C[i]) < 1e-4 * (1 + fabs(C[i])), "batch %lld elem %lld: %g vs %g",
                (long long)t, (long long)i, o[t * M * N + i], C[i]);
  }
  free(Ad);
  free(Bd);
  free(C);
  loom_tensor_free(out);
  loom_graph_free(g);
  free(A);
  free(B);
}

Test(batch_matmul, broadcast_batches_and_adjoints) {
  int64_t a1[4] = {2, 1, 3, 4}, b1[3] = {3, 4, 5}, w1[4] = {2, 3, 3, 5};
  check_bmm(4, a1, 3, b1, 0, 0, 4, w1);
  int64_t a2[4] = {2, 1, 4, 3}, b2[3] = {3, 5, 4};
  check_bmm(4, a2, 3, b2, 1, 1, 4, w1);
  int64_t a3[3] = {2, 3, 4}, b3[2] = {4, 5}, w3[3] = {2, 3, 5}; /* shared b: one folded gemm */
  check_bmm(3, a3, 2, b3, 0, 0, 3, w3);
  int64_t b4[3] = {1, 5, 4};
  check_bmm(3, a3, 3, b4, 0, 1, 3, w3);
  int64_t a5[3] = {1, 1, 4}, b5[3] = {3, 4, 1}, w5[3] = {3, 1, 1}; /* gemv / dot paths */
  check_bmm(3, a5, 3, b5, 0, 0, 3, w5);

  loom_graph *g = loom_graph_new();
  int64_t x[3] = {2, 3, 4}, y[3] = {3, 4, 5};
  loom_output a = loom_placeholder(g, LOOM_F32, 3, x, "a");
  loom_output b = loom_placeholder(g, LOOM_F32, 3, y, "b");
  loom_batch_matmul(g, a, b, 0, 0, "bad_batch");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "bad_batch") && strstr(loom_status_message(st), "[2,3,4]"), "%s",
            loom_status_message(st));
  loom_graph_free(g);
  g = loom_graph_new();
  int64_t z[3] = {2, 5, 4};
  a = loom_placeholder(g, LOOM_F32, 3, x, "a");
  b = loom_placeholder(g, LOOM_F32, 3, z, "b");
  loom_batch_matmul(g, a, b, 0, 0, "bad_inner");
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "bad_inner") && strstr(loom_status_message(st), "[2,5,4]"));
  loom_status_free(st);
  loom_graph_free(g);
}

/* ---- BiasAdd / BiasAddGrad ---- */
Test(bias, add_and_grad) {
  int64_t d[3] = {2, 2, 3}, bd[1] = {3};
  float v[12], bias[3] = {10, 20, 30}, want[12];
  for (int i = 0; i < 12; i++) {
    v[i] = (float)i;
    want[i] = (float)i + bias[i % 3];
  }
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 3, d, "x");
  loom_output b = loom_const_data(g, LOOM_F32, 1, bd, bias, "b");
  loom_output y = loom_bias_add(g, x, b, NULL);
  loom_output gb = loom_bias_add_grad(g, x, NULL);
  cr_assert_str_eq(loom_node_op_name(y.node), "BiasAdd");
  cr_assert_str_eq(loom_node_op_name(gb.node), "BiasAddGrad");
  loom_tensor *xv = tu_f32(3, d, v);
  loom_tensor *o = tu_run1(g, 1, &x, &xv, y);
  tu_expect_f32(o, 3, d, want, 0);
  loom_tensor_free(o);
  o = tu_run1(g, 1, &x, &xv, gb);
  float wg[3] = {0 + 3 + 6 + 9, 1 + 4 + 7 + 10, 2 + 5 + 8 + 11};
  tu_expect_f32(o, 1, bd, wg, 0);
  loom_tensor_free(o);
  loom_tensor_free(xv);
  loom_graph_free(g);

  /* a bigger one through the parallel split; f64 */
  int64_t D[2] = {3000, 40}, C[1] = {40};
  double *V = malloc(sizeof(double) * 120000), B[40], WG[40] = {0};
  for (int i = 0; i < 40; i++) B[i] = i * 0.5;
  for (int i = 0; i < 120000; i++) {
    V[i] = val(i);
    WG[i % 40] += V[i];
  }
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_F64, 2, D, "x");
  b = loom_const_data(g, LOOM_F64, 1, C, B, "b");
  y = loom_bias_add(g, x, b, NULL);
  gb = loom_bias_add_grad(g, x, NULL);
  xv = loom_tensor_from_data(LOOM_F64, 2, D, V, NULL);
  o = run_threads(g, x, xv, y, 4);
  for (int i = 0; i < 120000; i++) cr_assert_eq(((double *)loom_tensor_data(o))[i], V[i] + B[i % 40]);
  loom_tensor_free(o);
  o = run_threads(g, x, xv, gb, 4);
  for (int i = 0; i < 40; i++) cr_assert(fabs(((double *)loom_tensor_data(o))[i] - WG[i]) < 1e-9);
  loom_tensor_free(o);
  loom_tensor_free(xv);
  loom_graph_free(g);
  free(V);

  /* bias of the wrong length, known only at run time */
  g = loom_graph_new();
  int64_t u2[2] = {-1, -1}, u1[1] = {-1}, d2[2] = {2, 3}, d1[1] = {4};
  x = loom_placeholder(g, LOOM_F32, 2, u2, "x");
  b = loom_placeholder(g, LOOM_F32, 1, u1, "b");
  y = loom_bias_add(g, x, b, "late_bias");
  loom_tensor *xv2 = loom_tensor_new(LOOM_F32, 2, d2, NULL), *bv = loom_tensor_new(LOOM_F32, 1, d1, NULL);
  loom_output feeds[2] = {x, b};
  loom_tensor *vals[2] = {xv2, bv};
  char msg[512];
  cr_assert_eq(tu_run_err(g, 2, feeds, vals, y, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "late_bias") && strstr(msg, "[4]") && strstr(msg, "[2,3]"), "%s", msg);
  loom_tensor_free(xv2);
  loom_tensor_free(bv);
  loom_graph_free(g);
}

/* ---- ReduceSumLike ---- */
static void check_sum_like(int nd, const int64_t *dd, int nx, const int64_t *xd) {
  int64_t n = numel(nd, dd);
  float *v = malloc(sizeof(float) * (size_t)(n + 1));
  double *x = malloc(sizeof(double) * (size_t)(n + 1)), *want = malloc(sizeof(double) * (size_t)(n + 64));
  for (int64_t i = 0; i < n; i++) x[i] = v[i] = (float)val(i);
  uint32_t mask = 0;
  for (int i = 0; i < nd; i++) {
    int j = i - (nd - nx);
    if (j < 0 || (xd[j] == 1 && dd[i] != 1)) mask |= 1u << i;
  }
  int64_t no = ref_reduce(K_SUM, nd, dd, x, mask, want);
  loom_graph *g = loom_graph_new();
  loom_output dy = loom_placeholder(g, LOOM_F32, nd, dd, "dy");
  loom_output xs = loom_placeholder(g, LOOM_F64, nx, xd, "xs"); /* only its shape matters */
  loom_output y = loom_reduce_sum_like(g, dy, xs, NULL);
  cr_assert_str_eq(loom_node_op_name(y.node), "ReduceSumLike");
  loom_tensor *dv = tu_f32(nd, dd, v), *xv = loom_tensor_new(LOOM_F64, nx, xd, NULL);
  loom_output feeds[2] = {dy, xs};
  loom_tensor *vals[2] = {dv, xv};
  loom_tensor *o = tu_run1(g, 2, feeds, vals, y);
  cr_assert_eq(loom_tensor_numel(o), no);
  float *wf = malloc(sizeof(float) * (size_t)(no + 1));
  for (int64_t i = 0; i < no; i++) wf[i] = (float)want[i];
  tu_expect_f32(o, nx, xd, wf, 1e-5);
  free(wf);
  loom_tensor_free(o);
  loom_tensor_free(dv);
  loom_tensor_free(xv);
  loom_graph_free(g);
  free(v);
  free(x);
  free(want);
}

Test(reduce_sum_like, broadcast_dims) {
  int64_t d23[2] = {2, 3}, x3[1] = {3}, x21[2] = {2, 1}, x13[2] = {1, 3};
  check_sum_like(2, d23, 1, x3);
  check_sum_like(2, d23, 2, x21);
  check_sum_like(2, d23, 2, x13);
  check_sum_like(2, d23, 0, NULL); /* -> scalar */
  check_sum_like(2, d23, 2, d23);  /* nothing broadcast */
  int64_t d234[3] = {2, 3, 4}, x31[2] = {3, 1}, x114[3] = {1, 1, 4}, x214[3] = {2, 1, 4};
  check_sum_like(3, d234, 2, x31); /* two passes through the workspace */
  check_sum_like(3, d234, 3, x114);
  check_sum_like(3, d234, 3, x214);
  int64_t d0[2] = {0, 3};
  check_sum_like(2, d0, 1, x3); /* empty: zeros */

  loom_graph *g = loom_graph_new();
  int64_t bad[1] = {2};
  loom_output dy = loom_placeholder(g, LOOM_F32, 2, d23, "dy");
  loom_output xs = loom_placeholder(g, LOOM_F32, 1, bad, "xs");
  loom_reduce_sum_like(g, dy, xs, "rsl");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "rsl") && strstr(loom_status_message(st), "[2]"));
  loom_status_free(st);
  loom_graph_free(g);
}

/* Builders compile as C; op names are TF's. */
Test(reduce, op_names) {
  loom_graph *g = loom_graph_new();
  loom_output c = loom_const_f32(g, 1.0f, NULL);
  cr_assert_str_eq(loom_node_op_name(loom_reduce_sum(g, c, -1, NULL, 0, NULL).node), "Sum");
  cr_assert_str_eq(loom_node_op_name(loom_reduce_mean(g, c, -1, NULL, 0, NULL).node), "Mean");
  cr_assert_str_eq(loom_node_op_name(loom_reduce_max(g, c, -1, NULL, 0, NULL).node), "Max");
  cr_assert_str_eq(loom_node_op_name(loom_reduce_min(g, c, -1, NULL, 0, NULL).node), "Min");
  cr_assert_str_eq(loom_node_op_name(loom_reduce_prod(g, c, -1, NULL, 0, NULL).node), "Prod");
  cr_assert_str_eq(loom_node_op_name(loom_reduce_logsumexp(g, c, -1, NULL, 0, NULL).node), "ReduceLogSumExp");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  loom_graph_free(g);
}

/* Axis attributes at the int64 extremes are plain range errors naming the
 * node and the value (normalizing them must not overflow: checked under
 * UBSan). */
static loom_output mk_axis_max(loom_graph *g, loom_output x) {
  int64_t a[1] = {INT64_MAX};
  return loom_reduce_sum(g, x, 1, a, 0, "ax_max");
}
static loom_output mk_axis_min(loom_graph *g, loom_output x) {
  int64_t a[2] = {0, INT64_MIN};
  return loom_reduce_prod(g, x, 2, a, 1, "ax_min");
}
static loom_output mk_argmax_min(loom_graph *g, loom_output x) { return loom_argmax(g, x, INT64_MIN, 0, "am_min"); }
static loom_output mk_argmin_max(loom_graph *g, loom_output x) { return loom_argmin(g, x, INT64_MAX, 0, "an_max"); }

Test(reduce, extreme_axes_are_range_errors) {
  int64_t d[3] = {2, 3, 4};
  expect_build_error(mk_axis_max, LOOM_F32, 3, d, "ax_max", "axis 9223372036854775807 is out of range");
  expect_build_error(mk_axis_min, LOOM_F32, 3, d, "ax_min", "axis -9223372036854775808 is out of range");
  expect_build_error(mk_argmax_min, LOOM_F32, 3, d, "am_min", "axis -9223372036854775808 is out of range");
  expect_build_error(mk_argmin_max, LOOM_F32, 3, d, "an_max", "axis 9223372036854775807 is out of range");
}
