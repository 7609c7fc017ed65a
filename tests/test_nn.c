/* nn ops: softmax, cross entropies, Conv2D and its gradients, pools and their
 * gradients, l2_normalize: forward values against straightforward reference
 * loops computed in double, edge shapes, and malformed calls. */
#include "test_util.h"
#ifndef LOOM_TEST_EMULATED
#define LOOM_TEST_EMULATED 0 /* 1 in test-qemu's builds (Makefile) */
#endif

/* ---------------- helpers ---------------- */
static uint64_t rng_state = 88172645463325252ull;
static double urand(void) { /* xorshift64: deterministic test data in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}
static float *frand(int64_t n) {
  float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = (float)urand();
  return p;
}
static double *to_d(const float *p, int64_t n) {
  double *d = calloc((size_t)(n ? n : 1), sizeof *d);
  for (int64_t i = 0; i < n; i++) d[i] = p[i];
  return d;
}

/* Asserts t (f32 or f64) has the shape and finite values equal to want
 * (double) within tol * (|want| + 1e-2 * max|want|): relative, with a floor
 * scaled to the tensor for results that cancel to near zero. */
static void expect_close(const loom_tensor *t, int ndim, const int64_t *dims, const double *want, double tol,
                         const char *what) {
  cr_assert(t, "%s: no tensor", what);
  cr_assert_eq(loom_tensor_ndim(t), ndim, "%s: rank %d want %d", what, loom_tensor_ndim(t), ndim);
  for (int i = 0; i < ndim; i++)
    cr_assert_eq(loom_tensor_dim(t, i), dims[i], "%s: dim %d = %lld want %lld", what, i,
                 (long long)loom_tensor_dim(t, i), (long long)dims[i]);
  int64_t n = loom_tensor_numel(t);
  double scale = 0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
  for (int64_t i = 0; i < n; i++) {
    double got = loom_tensor_dtype(t) == LOOM_F32 ? ((const float *)loom_tensor_data_const(t))[i]
                                                  : ((const double *)loom_tensor_data_const(t))[i];
    cr_assert(isfinite(got), "%s: element %lld is %g", what, (long long)i, got);
    cr_assert(fabs(got - want[i]) <= tol * (fabs(want[i]) + 1e-2 * scale + 1e-30),
              "%s: element %lld: got %.9g want %.9g", what, (long long)i, got, want[i]);
  }
}

static void expect_graph_error(loom_graph *g, loom_code code, const char *needle) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), code, "want error '%s', got '%s'", needle, loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), needle), "message '%s' lacks '%s'", loom_status_message(st), needle);
  loom_status_free(st);
}

/* Runs two fetches. */
static void run2(loom_graph *g, loom_output a, loom_output b, loom_tensor **ta, loom_tensor **tb) {
  loom_status *st = loom_status_new();
  cr_assert(loom_graph_status(g, st) == LOOM_OK, "graph: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  loom_output f[2] = {a, b};
  loom_tensor *r[2] = {NULL, NULL};
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, f, r, 2, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  *ta = r[0];
  *tb = r[1];
  loom_session_free(s);
  loom_status_free(st);
}

/* ---------------- softmax ---------------- */
static void ref_softmax(const double *x, int64_t rows, int64_t C, int logsm, double *y) {
  for (int64_t r = 0; r < rows; r++) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < C; j++) m = fmax(m, x[r * C + j]);
    for (int64_t j = 0; j < C; j++) s += exp(x[r * C + j] - m);
    for (int64_t j = 0; j < C; j++)
      y[r * C + j] = logsm ? x[r * C + j] - m - log(s) : exp(x[r * C + j] - m) / s;
  }
}

Test(softmax, softmax_and_log_softmax_vs_reference) {
  int64_t shapes[3][3] = {{7, 0, 0}, {3, 5, 0}, {2, 3, 4}};
  int ranks[3] = {1, 2, 3};
  for (int k = 0; k < 3; k++) {
    int64_t n = 1;
    for (int i = 0; i < ranks[k]; i++) n *= shapes[k][i];
    float *x = frand(n);
    for (int64_t i = 0; i < n; i++) x[i] *= 20.0f;
    x[0] = 80.0f; /* exp overflows without the max shift */
    double *xd = to_d(x, n), *want = calloc((size_t)n, sizeof *want);
    int64_t C = shapes[k][ranks[k] - 1];
    loom_graph *g = loom_graph_new();
    loom_output xo = loom_const_data(g, LOOM_F32, ranks[k], shapes[k], x, "x");
    loom_output sm = loom_softmax(g, xo, "sm"), lsm = loom_log_softmax(g, xo, "lsm");
    cr_assert_str_eq(loom_node_op_name(sm.node), "Softmax");
    cr_assert_str_eq(loom_node_op_name(lsm.node), "LogSoftmax");
    loom_tensor *a, *b;
    run2(g, sm, lsm, &a, &b);
    ref_softmax(xd, n / C, C, 0, want);
    expect_close(a, ranks[k], shapes[k], want, 1e-5, "softmax");
    ref_softmax(xd, n / C, C, 1, want);
    expect_close(b, ranks[k], shapes[k], want, 1e-5, "log_softmax");
    loom_tensor_free(a);
    loom_tensor_free(b);
    loom_graph_free(g);
    free(x);
    free(xd);
    free(want);
  }
  /* f64, with a row of equal values and a row of huge values */
  double x64[6] = {1, 1, 1, 1e300, -1e300, 0};
  int64_t d[2] = {2, 3};
  loom_graph *g = loom_graph_new();
  loom_output xo = loom_const_data(g, LOOM_F64, 2, d, x64, "x");
  loom_tensor *a, *b;
  run2(g, loom_softmax(g, xo, NULL), loom_log_softmax(g, xo, NULL), &a, &b);
  cr_assert_eq(loom_tensor_dtype(a), LOOM_F64);
  const double *pa = loom_tensor_data_const(a), *pb = loom_tensor_data_const(b);
  for (int j = 0; j < 3; j++) {
    cr_assert(fabs(pa[j] - 1.0 / 3) < 1e-15);
    cr_assert(fabs(pb[j] + log(3.0)) < 1e-15);
  }
  cr_assert_eq(pa[3], 1.0);
  cr_assert_eq(pa[4], 0.0);
  cr_assert_eq(pb[3], 0.0);
  cr_assert_eq(pb[4], -2e300);
  cr_assert_eq(pb[5], -1e300);
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_graph_free(g);
}

Test(softmax, zero_size_rank0_and_bad_dtype) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {-1, 4};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, d, "x");
  loom_output y = loom_softmax(g, x, "sm");
  int64_t zd[2] = {0, 4};
  loom_tensor *z = loom_tensor_new(LOOM_F32, 2, zd, NULL);
  loom_tensor *out = tu_run1(g, 1, &x, &z, y);
  cr_assert_eq(loom_tensor_numel(out), 0);
  cr_assert_eq(loom_tensor_dim(out, 1), 4);
  loom_tensor_free(out);
  loom_tensor_free(z);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t d0[2] = {2, 0};
  loom_output e = loom_const_data(g, LOOM_F32, 2, d0, NULL, "e");
  out = tu_run1(g, 0, NULL, NULL, loom_log_softmax(g, e, NULL));
  cr_assert_eq(loom_tensor_numel(out), 0);
  loom_tensor_free(out);
  loom_softmax(g, loom_const_f32(g, 1.0f, "s"), "scalar_sm");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "scalar_sm: logits must have rank >= 1");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_log_softmax(g, loom_const_i32(g, 1, "i"), "int_lsm");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "int_lsm: logits must be float32 or float64, got int32");
  loom_graph_free(g);
}

/* ---------------- cross entropies ---------------- */
static void ref_xent(const double *x, const double *z, int64_t B, int64_t C, double *loss, double *bp) {
  double *ls = malloc((size_t)(B * C) * sizeof *ls);
  ref_softmax(x, B, C, 1, ls);
  for (int64_t r = 0; r < B; r++) {
    loss[r] = 0;
    for (int64_t j = 0; j < C; j++) {
      if (z[r * C + j] != 0) loss[r] -= z[r * C + j] * ls[r * C + j];
      bp[r * C + j] = exp(ls[r * C + j]) - z[r * C + j];
    }
  }
  free(ls);
}

Test(xent, softmax_cross_entropy_values_and_huge_logits) {
  /* row 0: uniform logits -> loss log(3); row 1: hand-computed; rows 2-3: huge logits */
  float x[12] = {1, 1, 1, 1, 2, 3, 1e30f, 0, -1e30f, 1000, 0, -1000};
  float z[12] = {0, 0, 1, 0.25f, 0.25f, 0.5f, 1, 0, 0, 0, 1, 0};
  int64_t d[2] = {4, 3};
  loom_graph *g = loom_graph_new();
  loom_output lo, bo;
  loom_output ret = loom_softmax_cross_entropy_with_logits(g, loom_const_data(g, LOOM_F32, 2, d, x, "x"),
                                                           loom_const_data(g, LOOM_F32, 2, d, z, "z"), &lo, &bo,
                                                           "xent");
  cr_assert_eq(ret.node, lo.node);
  cr_assert_eq(bo.index, 1);
  cr_assert_str_eq(loom_node_op_name(lo.node), "SoftmaxCrossEntropyWithLogits");
  loom_tensor *L, *BP;
  run2(g, lo, bo, &L, &BP);
  /* row 1: lse = 3 + log(1 + e^-1 + e^-2) = 3.40760596; loss = lse - (0.25*1 + 0.25*2 + 0.5*3) */
  double lse1 = 3.0 + log(1.0 + exp(-1.0) + exp(-2.0));
  double want_loss[4] = {log(3.0), lse1 - 2.25, 0.0, 1000.0};
  int64_t bd[1] = {4};
  expect_close(L, 1, bd, want_loss, 1e-6, "loss");
  double want_bp[12] = {1.0 / 3, 1.0 / 3, 1.0 / 3 - 1,
                        exp(1 - lse1) - 0.25, exp(2 - lse1) - 0.25, exp(3 - lse1) - 0.5,
                        0, 0, 0,
                        1, -1, 0};
  expect_close(BP, 2, d, want_bp, 1e-6, "backprop");
  loom_tensor_free(L);
  loom_tensor_free(BP);
  loom_graph_free(g);

  /* random rows vs the reference, f32 and f64 */
  for (int f64 = 0; f64 < 2; f64++) {
    int64_t B = 9, C = 7, dd[2] = {9, 7};
    float *xf = frand(B * C), *zf = frand(B * C);
    for (int64_t i = 0; i < B * C; i++) {
      xf[i] *= 8;
      zf[i] = fabsf(zf[i]);
    }
    double *xd = to_d(xf, B * C), *zd = to_d(zf, B * C);
    double loss[9], bp[63];
    ref_xent(xd, zd, B, C, loss, bp);
    g = loom_graph_new();
    loom_output xo = f64 ? loom_const_data(g, LOOM_F64, 2, dd, xd, "x") : loom_const_data(g, LOOM_F32, 2, dd, xf, "x");
    loom_output zo = f64 ? loom_const_data(g, LOOM_F64, 2, dd, zd, "z") : loom_const_data(g, LOOM_F32, 2, dd, zf, "z");
    loom_output l2 = loom_softmax_cross_entropy_with_logits(g, xo, zo, NULL, &bo, NULL);
    run2(g, l2, bo, &L, &BP);
    int64_t bb[1] = {B};
    expect_close(L, 1, bb, loss, f64 ? 1e-12 : 1e-5, "random loss");
    expect_close(BP, 2, dd, bp, f64 ? 1e-12 : 1e-5, "random backprop");
    loom_tensor_free(L);
    loom_tensor_free(BP);
    loom_graph_free(g);
    free(xf);
    free(zf);
    free(xd);
    free(zd);
  }
}

Test(xent, sparse_softmax_cross_entropy) {
  float x[12] = {1, 1, 1, 1, 2, 3, 1e30f, 0, -1e30f, 1000, 0, -1000};
  int32_t l32[4] = {2, 1, 0, 1};
  int64_t l64[4] = {2, 1, 0, 1};
  int64_t d[2] = {4, 3}, ld[1] = {4};
  double lse1 = 3.0 + log(1.0 + exp(-1.0) + exp(-2.0));
  double want_loss[4] = {log(3.0), lse1 - 2.0, 0.0, 1000.0};
  double want_bp[12] = {1.0 / 3, 1.0 / 3, 1.0 / 3 - 1, exp(1 - lse1), exp(2 - lse1) - 1, exp(3 - lse1),
                        0, 0, 0, 1, -1, 0};
  for (int w = 0; w < 2; w++) {
    loom_graph *g = loom_graph_new();
    loom_output xo = loom_const_data(g, LOOM_F32, 2, d, x, "x");
    loom_output lo = w ? loom_const_data(g, LOOM_I64, 1, ld, l64, "l") : loom_const_data(g, LOOM_I32, 1, ld, l32, "l");
    loom_output loss, bp;
    loom_sparse_softmax_cross_entropy_with_logits(g, xo, lo, &loss, &bp, "sxent");
    cr_assert_str_eq(loom_node_op_name(loss.node), "SparseSoftmaxCrossEntropyWithLogits");
    loom_tensor *L, *BP;
    run2(g, loss, bp, &L, &BP);
    expect_close(L, 1, ld, want_loss, 1e-6, "sparse loss");
    expect_close(BP, 2, d, want_bp, 1e-6, "sparse backprop");
    loom_tensor_free(L);
    loom_tensor_free(BP);
    loom_graph_free(g);
  }
}

Test(xent, sparse_label_out_of_range_names_node_and_value) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 10}, ld[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_output l = loom_placeholder(g, LOOM_I64, 1, ld, "labels");
  loom_graph_push_scope(g, "loss");
  loom_output loss = loom_sparse_softmax_cross_entropy_with_logits(g, x, l, NULL, NULL, "xent");
  loom_graph_pop_scope(g);
  int64_t rd[2] = {5, 10}, rl[1] = {5};
  loom_tensor *xt = loom_tensor_new(LOOM_F32, 2, rd, NULL);
  int64_t labels[5] = {0, 9, 3, 12, 1};
  loom_tensor *lt = loom_tensor_from_data(LOOM_I64, 1, rl, labels, NULL);
  loom_output feeds[2] = {x, l};
  loom_tensor *vals[2] = {xt, lt};
  char msg[512];
  cr_assert_eq(tu_run_err(g, 2, feeds, vals, loss, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "loss/xent: labels[3] = 12 is not in [0, 10)"), "%s", msg);
  labels[3] = -1;
  loom_tensor_free(lt);
  lt = loom_tensor_from_data(LOOM_I64, 1, rl, labels, NULL);
  vals[1] = lt;
  cr_assert_eq(tu_run_err(g, 2, feeds, vals, loss, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "labels[3] = -1 is not in [0, 10)"), "%s", msg);
  labels[3] = 4;
  loom_tensor_free(lt);
  lt = loom_tensor_from_data(LOOM_I64, 1, rl, labels, NULL);
  vals[1] = lt;
  loom_tensor *out = tu_run1(g, 2, feeds, vals, loss);
  const float *lv = loom_tensor_data_const(out);
  for (int i = 0; i < 5; i++) cr_assert(fabsf(lv[i] - logf(10.0f)) < 1e-5f);
  loom_tensor_free(out);
  loom_tensor_free(xt);
  loom_tensor_free(lt);
  loom_graph_free(g);
}

Test(xent, zero_size_batches_and_classes) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 5}, ld[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x"), z = loom_placeholder(g, LOOM_F32, 2, xd, "z");
  loom_output l = loom_placeholder(g, LOOM_I32, 1, ld, "l");
  loom_output bp1, bp2;
  loom_output l1 = loom_softmax_cross_entropy_with_logits(g, x, z, NULL, &bp1, "dense");
  loom_output l2 = loom_sparse_softmax_cross_entropy_with_logits(g, x, l, NULL, &bp2, "sparse");
  int64_t e2[2] = {0, 5}, e1[1] = {0};
  loom_tensor *xt = loom_tensor_new(LOOM_F32, 2, e2, NULL), *lt = loom_tensor_new(LOOM_I32, 1, e1, NULL);
  loom_output feeds[3] = {x, z, l};
  loom_tensor *vals[3] = {xt, xt, lt};
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  loom_output f[4] = {l1, bp1, l2, bp2};
  loom_tensor *r[4] = {0};
  cr_assert_eq(loom_session_run(s, feeds, vals, 3, f, r, 4, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_tensor_numel(r[0]), 0);
  cr_assert_eq(loom_tensor_dim(r[1], 1), 5);
  cr_assert_eq(loom_tensor_numel(r[2]), 0);
  cr_assert_eq(loom_tensor_numel(r[3]), 0);
  for (int k = 0; k < 4; k++) loom_tensor_free(r[k]);
  loom_session_free(s);
  loom_status_free(st);
  loom_tensor_free(xt);
  loom_tensor_free(lt);
  loom_graph_free(g);

  /* no classes: the dense loss is 0 */
  g = loom_graph_new();
  int64_t d0[2] = {3, 0};
  loom_output e = loom_const_data(g, LOOM_F32, 2, d0, NULL, "e");
  loom_output loss = loom_softmax_cross_entropy_with_logits(g, e, e, NULL, NULL, NULL);
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, loss);
  int64_t three[1] = {3};
  float zero3[3] = {0, 0, 0};
  tu_expect_f32(t, 1, three, zero3, 0);
  loom_tensor_free(t);
  loom_graph_free(g);
}

Test(xent, malformed_calls) {
  loom_graph *g = loom_graph_new();
  int64_t a[2] = {2, 3}, b[2] = {2, 4}, c1[1] = {3};
  loom_softmax_cross_entropy_with_logits(g, loom_placeholder(g, LOOM_F32, 2, a, "x"),
                                         loom_placeholder(g, LOOM_F32, 2, b, "z"), NULL, NULL, "xe");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "xe: logits [2,3] and labels [2,4] must have the same shape");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_sparse_softmax_cross_entropy_with_logits(g, loom_placeholder(g, LOOM_F32, 2, a, "x"),
                                                loom_placeholder(g, LOOM_F32, 1, c1, "l"), NULL, NULL, "sx");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "sx: labels must be int32 or int64, got float32");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_sparse_softmax_cross_entropy_with_logits(g, loom_placeholder(g, LOOM_F32, 2, a, "x"),
                                                loom_placeholder(g, LOOM_I32, 1, c1, "l"), NULL, NULL, "sx");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "sx: logits [2,3] and labels [3] must have the same batch size");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_softmax_cross_entropy_with_logits(g, loom_placeholder(g, LOOM_F32, 1, c1, "x"),
                                         loom_placeholder(g, LOOM_F32, 1, c1, "z"), NULL, NULL, "rank1");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "rank1: logits must have rank 2, got shape [3]");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_sigmoid_cross_entropy_with_logits(g, loom_placeholder(g, LOOM_F64, 2, a, "z"),
                                         loom_placeholder(g, LOOM_F32, 2, a, "x"), "sig");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "sig: logits (float32) and labels (float64) must have the same dtype");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_sigmoid_cross_entropy_with_logits(g, loom_placeholder(g, LOOM_F32, 2, a, "z"),
                                         loom_placeholder(g, LOOM_F32, 2, b, "x"), "sig2");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "sig2: logits [2,4] and labels [2,3] must have the same shape");
  loom_graph_free(g);
}

Test(xent, sigmoid_cross_entropy_extreme_logits) {
  float x[10] = {0, 1, -1, 100, -100, 1e4f, -1e4f, 3e38f, -3e38f, 0.5f};
  float z[10] = {0.5f, 1, 0, 0, 0, 1, 1, 1, 0, 0.3f};
  int64_t d[2] = {2, 5};
  loom_graph *g = loom_graph_new();
  loom_output zo = loom_const_data(g, LOOM_F32, 2, d, z, "z"), xo = loom_const_data(g, LOOM_F32, 2, d, x, "x");
  loom_output y = loom_sigmoid_cross_entropy_with_logits(g, zo, xo, "sig");
  cr_assert_eq(loom_node_input(y.node, 0).node, xo.node, "input 0 is the logits");
  cr_assert_eq(loom_node_input(y.node, 1).node, zo.node, "input 1 is the labels");
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, y);
  double want[10];
  for (int i = 0; i < 10; i++) {
    double xv = x[i], zv = z[i];
    want[i] = fmax(xv, 0) - xv * zv + log1p(exp(-fabs(xv)));
  }
  /* hand-checked: x=0 -> log 2; x=100, z=0 -> 100; x=-1e4, z=1 -> 1e4; x=1e4, z=1 -> 0 */
  cr_assert(fabs(want[0] - log(2.0)) < 1e-12 && want[3] == 100.0 && want[6] == 1e4 && want[5] == 0.0);
  const float *p = loom_tensor_data_const(t);
  for (int i = 0; i < 10; i++) {
    cr_assert(isfinite(p[i]), "element %d is %g", i, (double)p[i]);
    cr_assert(fabs(p[i] - want[i]) <= 1e-6 * (1 + fabs(want[i])), "element %d: %.9g want %.9g", i, (double)p[i],
              want[i]);
  }
  loom_tensor_free(t);
  loom_graph_free(g);
}

/* ---------------- convolution ---------------- */
typedef struct {
  int64_t N, H, W, C, KH, KW, O, sh, sw, dh, dw;
  int pad;
} ccfg;

/* TF's SAME/VALID arithmetic, written out independently of the library. */
static void ref_out(int64_t in, int64_t k, int64_t s, int64_t d, int pad, int64_t *out, int64_t *before) {
  int64_t ek = (k - 1) * d + 1;
  if (pad) {
    *out = (in + s - 1) / s;
    int64_t total = (*out - 1) * s + ek - in;
    *before = total > 0 ? total / 2 : 0;
  } else {
    *out = (in - ek + s) / s;
    *before = 0;
  }
}

static void conv_dims(const ccfg *c, int64_t *OH, int64_t *OW, int64_t *pt, int64_t *pl) {
  ref_out(c->H, c->KH, c->sh, c->dh, c->pad, OH, pt);
  ref_out(c->W, c->KW, c->sw, c->dw, c->pad, OW, pl);
}

/* The direct 7-loop convolution; with dx/dw != NULL it accumulates the
 * gradients for dy instead (the same loops, transposed). */
static void ref_conv(const ccfg *c, const double *x, const double *w, double *y, const double *dy, double *dx,
                     double *dw) {
  int64_t OH, OW, pt, pl;
  conv_dims(c, &OH, &OW, &pt, &pl);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++)
        for (int64_t o = 0; o < c->O; o++) {
          int64_t yi = ((n * OH + oh) * OW + ow) * c->O + o;
          double acc = 0;
          for (int64_t kh = 0; kh < c->KH; kh++)
            for (int64_t kw = 0; kw < c->KW; kw++)
              for (int64_t ci = 0; ci < c->C; ci++) {
                int64_t ih = oh * c->sh - pt + kh * c->dh, iw = ow * c->sw - pl + kw * c->dw;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                int64_t xi = ((n * c->H + ih) * c->W + iw) * c->C + ci;
                int64_t wi = ((kh * c->KW + kw) * c->C + ci) * c->O + o;
                if (y) acc += x[xi] * w[wi];
                if (dx) dx[xi] += dy[yi] * w[wi];
                if (dw) dw[wi] += dy[yi] * x[xi];
              }
          if (y) y[yi] = acc;
        }
}

/* f32 tolerance of check_conv (relative, with a floor of 1% of the largest element; the filter
 * gradient's widens with the number of terms) */
static double conv_tol_f32 = 1e-4;

static void check_conv(const ccfg *c, loom_dtype dt) {
  int64_t OH, OW, pt, pl;
  conv_dims(c, &OH, &OW, &pt, &pl);
  int64_t xd[4] = {c->N, c->H, c->W, c->C}, wd[4] = {c->KH, c->KW, c->C, c->O}, yd[4] = {c->N, OH, OW, c->O};
  int64_t nx = c->N * c->H * c->W * c->C, nw = c->KH * c->KW * c->C * c->O, ny = c->N * OH * OW * c->O;
  float *xf = frand(nx), *wf = frand(nw), *dyf = frand(ny);
  double *x = to_d(xf, nx), *w = to_d(wf, nw), *dy = to_d(dyf, ny);
  double *y = calloc((size_t)ny + 1, sizeof *y), *dx = calloc((size_t)nx + 1, sizeof *dx),
         *dw = calloc((size_t)nw + 1, sizeof *dw);
  ref_conv(c, x, w, y, NULL, NULL, NULL);
  ref_conv(c, x, w, NULL, dy, dx, dw);

  loom_graph *g = loom_graph_new();
  int f64 = dt == LOOM_F64;
  loom_output X = loom_const_data(g, dt, 4, xd, f64 ? (const void *)x : xf, "x");
  loom_output Wt = loom_const_data(g, dt, 4, wd, f64 ? (const void *)w : wf, "w");
  loom_output DY = loom_const_data(g, dt, 4, yd, f64 ? (const void *)dy : dyf, "dy");
  int64_t strides[4] = {1, c->sh, c->sw, 1}, dil[4] = {1, c->dh, c->dw, 1};
  loom_output Y = loom_conv2d(g, X, Wt, strides, c->pad, dil, "conv");
  loom_output DX = loom_conv2d_backprop_input(g, xd, Wt, DY, strides, c->pad, dil, "conv_dx");
  loom_output DW = loom_conv2d_backprop_filter(g, X, wd, DY, strides, c->pad, dil, "conv_dw");
  /* -1 entries of the sizes are inferred */
  int64_t xs_inf[4] = {-1, c->H, c->W, -1}, ws_inf[4] = {c->KH, c->KW, -1, -1};
  loom_output DX2 = loom_conv2d_backprop_input(g, xs_inf, Wt, DY, strides, c->pad, dil, "conv_dx2");
  loom_output DW2 = loom_conv2d_backprop_filter(g, X, ws_inf, DY, strides, c->pad, dil, "conv_dw2");
  int64_t sd[LOOM_MAX_DIMS];
  cr_assert_eq(loom_output_dims(Y, sd), 4);
  for (int i = 0; i < 4; i++) cr_assert_eq(sd[i], yd[i], "static output dim %d", i);
  loom_output_dims(DX2, sd);
  for (int i = 0; i < 4; i++) cr_assert_eq(sd[i], xd[i], "inferred input_sizes dim %d", i);
  loom_output_dims(DW2, sd);
  for (int i = 0; i < 4; i++) cr_assert_eq(sd[i], wd[i], "inferred filter_sizes dim %d", i);

  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  loom_output f[5] = {Y, DX, DW, DX2, DW2};
  loom_tensor *r[5] = {0};
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, f, r, 5, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  double tol = f64 ? 1e-10 : conv_tol_f32;
  char what[160];
  snprintf(what, sizeof what, "conv N%lld H%lld W%lld C%lld K%lldx%lld O%lld s%lld,%lld d%lld,%lld %s %s",
           (long long)c->N, (long long)c->H, (long long)c->W, (long long)c->C, (long long)c->KH, (long long)c->KW,
           (long long)c->O, (long long)c->sh, (long long)c->sw, (long long)c->dh, (long long)c->dw,
           c->pad ? "SAME" : "VALID", f64 ? "f64" : "f32");
  expect_close(r[0], 4, yd, y, tol, what);
  expect_close(r[1], 4, xd, dx, tol, what);
  /* dW sums N*OH*OW products per element: rounding error of an f32 sum grows like sqrt(terms) * 2^-24
   * of its partial sums, so past ~1k terms the floor (1e-6 of the largest element) widens with sqrt.
   * The AVX2/AVX-512 tiles (FMA, split sums) stay inside 1e-6; the SSE tiles of the portable build on
   * a pre-AVX2 CPU (`make test-qemu`, Nehalem) exceeded it at 18432 terms. */
  double tol_dw = f64 ? tol : conv_tol_f32 * fmax(1.0, sqrt((double)(c->N * OH * OW) / 1024.0));
  expect_close(r[2], 4, wd, dw, tol_dw, what);
  expect_close(r[3], 4, xd, dx, tol, what);
  expect_close(r[4], 4, wd, dw, tol_dw, what);
  /* adjoint identity: <conv(x,w), dy> = <x, dX> = <w, dW> */
  double a = 0, b = 0, cc = 0;
  for (int64_t i = 0; i < ny; i++) a += y[i] * dy[i];
  for (int64_t i = 0; i < nx; i++)
    b += x[i] * (f64 ? ((const double *)loom_tensor_data_const(r[1]))[i] : ((const float *)loom_tensor_data_const(r[1]))[i]);
  for (int64_t i = 0; i < nw; i++)
    cc += w[i] * (f64 ? ((const double *)loom_tensor_data_const(r[2]))[i] : ((const float *)loom_tensor_data_const(r[2]))[i]);
  double sc = 1e-4 * (1 + fabs(a) + sqrt((double)ny));
  cr_assert(fabs(a - b) < sc && fabs(a - cc) < sc, "%s: adjoint <y,dy>=%g <x,dx>=%g <w,dw>=%g", what, a, b, cc);
  for (int k = 0; k < 5; k++) loom_tensor_free(r[k]);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
  free(xf);
  free(wf);
  free(dyf);
  free(x);
  free(w);
  free(dy);
  free(y);
  free(dx);
  free(dw);
}

Test(conv, conv2d_and_gradients_vs_direct_loops) {
  enum { V = 0, S = 1 };
  ccfg cfgs[] = {
      /*  N  H  W  C  KH KW O  sh sw dh dw pad */
      {1, 5, 5, 1, 3, 3, 1, 1, 1, 1, 1, V},
      {1, 5, 5, 1, 3, 3, 1, 1, 1, 1, 1, S},
      {2, 7, 6, 3, 3, 3, 4, 1, 1, 1, 1, S},
      {2, 7, 6, 3, 3, 2, 5, 1, 1, 1, 1, V},
      {3, 8, 9, 2, 3, 3, 4, 2, 2, 1, 1, S}, /* stride 2, even/odd sizes */
      {2, 9, 8, 2, 3, 3, 3, 2, 2, 1, 1, V},
      {1, 10, 10, 3, 4, 4, 2, 3, 2, 1, 1, S}, /* even window: asymmetric SAME padding */
      {2, 9, 9, 2, 3, 3, 3, 1, 1, 2, 2, S}, /* dilation 2 */
      {1, 11, 10, 2, 3, 2, 2, 1, 1, 2, 3, V},
      {2, 9, 10, 3, 3, 3, 2, 2, 2, 2, 2, S}, /* stride and dilation */
      {3, 4, 5, 6, 1, 1, 7, 1, 1, 1, 1, S}, /* 1x1 stride 1: direct GEMM */
      {3, 4, 5, 6, 1, 1, 7, 1, 1, 1, 1, V},
      {2, 5, 5, 4, 1, 1, 3, 2, 2, 1, 1, V}, /* 1x1 stride 2 */
      {2, 6, 6, 2, 6, 6, 3, 1, 1, 1, 1, V}, /* window = image */
      {1, 3, 3, 2, 5, 5, 2, 1, 1, 1, 1, S}, /* window larger than the image */
      {4, 28, 28, 1, 3, 3, 8, 1, 1, 1, 1, S}, /* the MNIST-like layers */
      {4, 14, 14, 8, 3, 3, 16, 1, 1, 1, 1, V},
      {2, 6, 5, 130, 3, 3, 5, 1, 1, 1, 1, S}, /* K = 1170: im2col + GEMM forward */
      {2, 5, 6, 3, 3, 3, 130, 1, 1, 1, 1, S}, /* KH*KW*O = 1170: GEMM + col2im input gradient */
      {2, 7, 7, 5, 3, 3, 20, 1, 1, 1, 1, V},  /* O not a multiple of the vector width */
      {1, 3, 4, 1200, 1, 1, 3, 1, 1, 1, 1, V}, /* 1x1, K = 1200: GEMM on the input */
      {2, 3, 2, 3, 1, 1, 1200, 1, 1, 1, 1, S}, /* 1x1, O = 1200: GEMM input gradient */
  };
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) check_conv(&cfgs[i], LOOM_F32);
  check_conv(&cfgs[2], LOOM_F64);
  check_conv(&cfgs[4], LOOM_F64);
  check_conv(&cfgs[17], LOOM_F64);
  check_conv(&cfgs[19], LOOM_F64);
  check_conv(&cfgs[9], LOOM_F64);
  check_conv(&cfgs[10], LOOM_F64);
}

Test(conv, chunked_im2col_large_batch) {
  /* column matrix of 8*48*48 rows x 144 = 10.6 MB: processed in several chunks
   * whose boundaries fall inside images */
  ccfg c = {8, 48, 48, 16, 3, 3, 6, 1, 1, 1, 1, 1};
  check_conv(&c, LOOM_F32);
  ccfg c2 = {3, 40, 40, 24, 5, 5, 4, 2, 2, 1, 1, 0};
  check_conv(&c2, LOOM_F32);
}

Test(conv, small_window_filter_gradient_in_partitions) {
  /* K <= 64: the filter gradient sums partitions of >= 4096 pixels (3 and 2
   * here, boundaries inside images) over blocks of 128 gathered windows, K
   * rounded up to tiles of 6 (25 -> 30, 18) */
  ccfg c = {16, 28, 28, 1, 5, 5, 16, 1, 1, 1, 1, 1}; /* the Fashion-MNIST first layer */
  check_conv(&c, LOOM_F32);
  ccfg c2 = {20, 30, 29, 2, 3, 3, 20, 2, 1, 1, 1, 1}; /* stride 2 x 1, O not a multiple of the vector */
  check_conv(&c2, LOOM_F32);
  check_conv(&c2, LOOM_F64);
}

Test(conv, padded_input_loops) {
  /* windows rows of KW*C <= 32 values: the forward pass and the filter gradient read a zero-padded
   * copy of the input (or the input itself when no padding is needed); each case against the
   * reference loops, f32 and f64 */
  enum { V = 0, S = 1 };
  ccfg cfgs[] = {
      /*  N  H  W  C  KH KW O  sh sw dh dw pad */
      {3, 28, 28, 1, 5, 5, 16, 1, 1, 1, 1, S}, /* the Fashion-MNIST first layer */
      {2, 13, 11, 1, 5, 5, 16, 1, 1, 1, 1, V}, /* VALID: the input read in place */
      {2, 12, 11, 3, 3, 3, 17, 2, 3, 1, 1, V}, /* strides leaving unread rows and columns */
      {2, 10, 9, 2, 4, 4, 5, 3, 2, 1, 1, S},   /* even window: asymmetric SAME padding */
      {2, 11, 12, 2, 3, 3, 6, 1, 1, 2, 1, S},  /* row dilation (columns must be contiguous) */
      {2, 9, 9, 8, 3, 4, 33, 1, 1, 1, 1, S},   /* KW*C = 32: the largest padded case */
      {2, 9, 9, 11, 3, 3, 8, 1, 1, 1, 1, S},   /* KW*C = 33: windows gathered */
      {2, 9, 9, 2, 3, 3, 4, 1, 1, 1, 2, S},    /* column dilation: windows gathered */
      {1, 3, 3, 1, 5, 5, 3, 1, 1, 1, 1, S},    /* window larger than the image */
      {5, 7, 6, 1, 2, 7, 40, 2, 1, 1, 1, S},   /* window wider than the image, O = 2.5 vectors */
      /* rows of >= 14 output pixels: whole groups of a row read at one pointer (windows 1..4 values
       * apart), the rest of each row by the 12-pixel tiles */
      {2, 20, 31, 3, 3, 3, 19, 1, 1, 1, 1, S},  /* windows 3 apart, 14 + 14 + 3 per row, O = 19 */
      {2, 16, 33, 2, 5, 5, 8, 1, 1, 1, 1, S},   /* 2 apart, O = 8: channels past the last full vector */
      {2, 12, 40, 1, 3, 3, 48, 1, 2, 1, 1, S},  /* stride 2: 2 apart, 14 + 6 per row, O = 3 vectors */
      {2, 9, 30, 4, 3, 3, 32, 1, 1, 1, 1, V},   /* 4 apart, the input read in place */
  };
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    check_conv(&cfgs[i], LOOM_F32);
    check_conv(&cfgs[i], LOOM_F64);
  }
}

Test(conv, winograd_5x5) {
  /* 5x5 windows at stride and dilation 1 with >= 8 input and output channels: the forward pass and the
   * input gradient run Winograd F(4x4, 5x5) on these shapes (output tiles clipped at the last row and
   * column, border tiles zero-padded) and the filter gradient runs F(5x5, 4x4); other shapes stay on
   * the direct loops (winograd_4x4_tiles covers the F(2x2) shapes and the errors) */
  enum { V = 0, S = 1 };
  ccfg cfgs[] = {
      /*  N  H  W  C  KH KW O  sh sw dh dw pad */
      {2, 14, 14, 16, 5, 5, 32, 1, 1, 1, 1, S}, /* the Fashion-MNIST second layer (input gradient: C 32, O 16) */
      {3, 9, 11, 8, 5, 5, 9, 1, 1, 1, 1, S},    /* odd output: clipped tiles; O = 9 */
      {2, 12, 9, 10, 5, 5, 12, 1, 1, 1, 1, V},  /* VALID: 8 x 5 outputs */
      {1, 3, 4, 8, 5, 5, 8, 1, 1, 1, 1, S},     /* window larger than the image: every tile on the border */
      {8, 16, 16, 8, 5, 5, 20, 1, 1, 1, 1, S},  /* 512 tiles: the most parts, partial blocks */
      {1, 7, 6, 9, 5, 5, 128, 1, 1, 1, 1, S},   /* the widest O */
      {2, 8, 8, 7, 5, 5, 16, 1, 1, 1, 1, S},    /* C = 7: direct forward, Winograd input gradient */
  };
  /* Winograd's rounding: the transforms' entries (up to 21/4 and 1/90) make intermediate sums one to
   * two orders of magnitude above the results, so f32 results stray up to ~1e-5 (forward, input
   * gradient) and ~2e-5 (filter gradient: the tiles' sum runs in the transformed domain) of the
   * largest element, where the direct loops stay within 1e-6; f64 checks the algorithm at 1e-10 */
  conv_tol_f32 = 1e-3;
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    check_conv(&cfgs[i], LOOM_F32);
    check_conv(&cfgs[i], LOOM_F64);
  }
  conv_tol_f32 = 1e-4;
}

/* The forward pass, input gradient and filter gradient of c on random data in [-1, 1) at dtype dt with
 * `threads` threads: their largest error against the double-precision reference loops, relative to the
 * largest element of each (err[0..2]; err NULL: not computed), and the results themselves (r[0..2],
 * freed by the caller). */
static void conv_errors(const ccfg *c, loom_dtype dt, int threads, double err[3], loom_tensor *r[3]) {
  int64_t OH, OW, pt, pl;
  conv_dims(c, &OH, &OW, &pt, &pl);
  int64_t xd[4] = {c->N, c->H, c->W, c->C}, wd[4] = {c->KH, c->KW, c->C, c->O}, yd[4] = {c->N, OH, OW, c->O};
  int64_t n[3] = {c->N * OH * OW * c->O, c->N * c->H * c->W * c->C, c->KH * c->KW * c->C * c->O};
  uint64_t seed = rng_state;
  rng_state = 88172645463325252ull; /* the same data at every dtype and thread count */
  float *xf = frand(n[1]), *wf = frand(n[2]), *dyf = frand(n[0]);
  rng_state = seed;
  double *x = to_d(xf, n[1]), *w = to_d(wf, n[2]), *dy = to_d(dyf, n[0]);
  double *want[3] = {calloc((size_t)n[0], sizeof(double)), calloc((size_t)n[1], sizeof(double)),
                     calloc((size_t)n[2], sizeof(double))};
  if (err) {
    ref_conv(c, x, w, want[0], NULL, NULL, NULL);
    ref_conv(c, x, w, NULL, dy, want[1], want[2]);
  }
  int f64 = dt == LOOM_F64;
  loom_graph *g = loom_graph_new();
  loom_output X = loom_const_data(g, dt, 4, xd, f64 ? (const void *)x : xf, "x");
  loom_output Wt = loom_const_data(g, dt, 4, wd, f64 ? (const void *)w : wf, "w");
  loom_output DY = loom_const_data(g, dt, 4, yd, f64 ? (const void *)dy : dyf, "dy");
  int64_t strides[4] = {1, c->sh, c->sw, 1}, dil[4] = {1, c->dh, c->dw, 1};
  loom_output f[3] = {loom_conv2d(g, X, Wt, strides, c->pad, dil, "conv"),
                      loom_conv2d_backprop_input(g, xd, Wt, DY, strides, c->pad, dil, "conv_dx"),
                      loom_conv2d_backprop_filter(g, X, wd, DY, strides, c->pad, dil, "conv_dw")};
  loom_status *st = loom_status_new();
  loom_session_options so = loom_session_options_default();
  so.num_threads = threads;
  loom_session *s = loom_session_new(g, &so, st);
  cr_assert(s, "%s", loom_status_message(st));
  for (int k = 0; k < 3; k++) r[k] = NULL; /* fetch slots must start empty */
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, f, r, 3, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  for (int k = 0; k < 3 && err; k++) {
    double scale = 0, e = 0;
    for (int64_t i = 0; i < n[k]; i++) scale = fmax(scale, fabs(want[k][i]));
    for (int64_t i = 0; i < n[k]; i++) {
      double got = f64 ? ((const double *)loom_tensor_data_const(r[k]))[i]
                       : ((const float *)loom_tensor_data_const(r[k]))[i];
      cr_assert(isfinite(got));
      e = fmax(e, fabs(got - want[k][i]));
    }
    err[k] = e / scale;
  }
  for (int k = 0; k < 3; k++) free(want[k]);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
  free(xf);
  free(wf);
  free(dyf);
  free(x);
  free(w);
  free(dy);
}

Test(conv, winograd_4x4_tiles) {
  /* Outputs whose 4x4 tiles need fewer elementwise products than 2x2 tiles (64 per 16 pixels against
   * 36 per 4, the output rounded up to whole tiles) run F(4x4, 5x5) forward and input gradient and
   * F(5x5, 4x4) filter gradient; the rest (here 2 x 6 outputs) F(2x2). Ragged edges (outputs not
   * multiples of 4), batch 1, channels not multiples of the vectors, against the double-precision
   * reference loops. Largest errors measured, relative to each result's largest element (f32; the
   * AVX-512, AVX2 and SSE loops): forward and input gradient 1.7e-6 to 9.3e-6, filter gradient 2.3e-6
   * to 8.4e-6; the same shapes with F(2x2) only (LOOM_CONV_WINOGRAD=2) 0.4e-6 to 5e-6 and 2.3e-6 to
   * 1.5e-5, with the direct loops (=0) 0.2e-6 to 1.3e-6 and up to 4.7e-6; f64 at most 1.3e-14.
   * Bounds: 3e-5 (f32), 1e-12 (f64). */
  enum { V = 0, S = 1 };
  ccfg cfgs[] = {
      /*  N  H  W  C  KH KW O  sh sw dh dw pad */
      /* the Fashion-MNIST second layer: 16x16 tiles over 14x14 (batch 4 under the CPU emulator of
       * test-qemu, which checks the instructions, not the sizes: batch 64 took minutes there; the
       * two largest shapes below run one image there) */
      {LOOM_TEST_EMULATED ? 4 : 64, 14, 14, 16, 5, 5, 32, 1, 1, 1, 1, S},
      {1, 14, 14, 16, 5, 5, 32, 1, 1, 1, 1, S},  /* batch 1 */
      {2, 13, 11, 12, 5, 5, 20, 1, 1, 1, 1, S},  /* ragged by 3 and 1; C, O not multiples of 16 */
      {3, 12, 15, 9, 5, 5, 24, 1, 1, 1, 1, V},   /* VALID: 8 x 11 outputs */
      {LOOM_TEST_EMULATED ? 1 : 2, 21, 18, 24, 5, 5, 40, 1, 1, 1, 1, S},  /* C = 1.5 vectors, O = 2.5 */
      {1, 9, 9, 8, 5, 5, 8, 1, 1, 1, 1, S},      /* the fewest channels */
      {1, 5, 6, 130, 5, 5, 9, 1, 1, 1, 1, S},    /* one tile row; C > 128: input gradient stays direct */
      {LOOM_TEST_EMULATED ? 1 : 2, 10, 9, 64, 5, 5, 48, 1, 1, 1, 1, S}, /* 64 -> 48 channels (input gradient: GEMM, K = 1600) */
      {2, 2, 6, 8, 5, 5, 16, 1, 1, 1, 1, S},     /* 2 x 6 outputs: F(2x2) */
      {3, 2, 9, 8, 5, 5, 12, 1, 1, 1, 1, S},     /* 2 x 9: F(2x2), the last column of tiles clipped */
      {2, 10, 2, 12, 5, 5, 9, 1, 1, 1, 1, S},    /* 10 x 2: F(2x2) */
  };
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    const ccfg *c = &cfgs[i];
    double e32[3], e64[3];
    loom_tensor *r32[3], *r64[3];
    conv_errors(c, LOOM_F32, 2, e32, r32);
    conv_errors(c, LOOM_F64, 2, e64, r64);
    for (int k = 0; k < 3; k++) {
      cr_assert(e32[k] < 3e-5, "cfg %zu op %d: f32 error %g of the largest element", i, k, e32[k]);
      cr_assert(e64[k] < 1e-12, "cfg %zu op %d: f64 error %g of the largest element", i, k, e64[k]);
      loom_tensor_free(r32[k]);
      loom_tensor_free(r64[k]);
    }
    cr_log_info("winograd_4x4 cfg %zu: f32 errors %.2g %.2g %.2g, f64 %.2g %.2g %.2g", i, e32[0], e32[1],
                e32[2], e64[0], e64[1], e64[2]);
  }
}

Test(conv, winograd_independent_of_threads) {
  /* the tiles go in parts fixed by the shape (1, 2 and 8 parts here), each with its own scratch, the
   * filter gradient's part sums added in a fixed order: bit-identical results on 1, 2 and 5 threads */
  ccfg cfgs[] = {
      {LOOM_TEST_EMULATED ? 32 : 64, 14, 14, 16, 5, 5, 32, 1, 1, 1, 1, 1}, /* F(4x4), 512+ tiles: 8 parts */
      {8, 16, 16, 8, 5, 5, 20, 1, 1, 1, 1, 1},   /* F(4x4), 128 tiles: 2 parts */
      {8, 3, 4, 8, 5, 5, 8, 1, 1, 1, 1, 1},      /* 8 tiles: 1 part */
      {16, 6, 2, 8, 5, 5, 12, 1, 1, 1, 1, 1},    /* F(2x2), 96 tiles */
  };
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    loom_tensor *r1[3], *rn[3];
    conv_errors(&cfgs[i], LOOM_F32, 1, NULL, r1);
    for (int th = 2; th <= (LOOM_TEST_EMULATED ? 2 : 5); th += 3) { /* 5 too, natively */
      conv_errors(&cfgs[i], LOOM_F32, th, NULL, rn);
      for (int k = 0; k < 3; k++) {
        size_t bytes = (size_t)loom_tensor_numel(r1[k]) * sizeof(float);
        cr_assert(!memcmp(loom_tensor_data_const(r1[k]), loom_tensor_data_const(rn[k]), bytes),
                  "cfg %zu op %d: 1 and %d threads differ", i, k, th);
        loom_tensor_free(rn[k]);
      }
    }
    for (int k = 0; k < 3; k++) loom_tensor_free(r1[k]);
  }
}

Test(conv, zero_size_and_unknown_batch) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {-1, 6, 6, 2}, wd[4] = {3, 3, 2, 4};
  float *wv = frand(72);
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_output w = loom_const_data(g, LOOM_F32, 4, wd, wv, "w");
  int64_t s2[4] = {1, 2, 2, 1};
  loom_output y = loom_conv2d(g, x, w, s2, LOOM_PADDING_SAME, NULL, "conv");
  int64_t sd[LOOM_MAX_DIMS];
  loom_output_dims(y, sd);
  cr_assert(sd[0] == -1 && sd[1] == 3 && sd[2] == 3 && sd[3] == 4);
  int64_t zd[4] = {0, 6, 6, 2};
  loom_tensor *z = loom_tensor_new(LOOM_F32, 4, zd, NULL);
  loom_tensor *out = tu_run1(g, 1, &x, &z, y);
  cr_assert_eq(loom_tensor_numel(out), 0);
  cr_assert_eq(loom_tensor_dim(out, 3), 4);
  loom_tensor_free(out);
  /* gradient of the empty batch: dW = 0 */
  int64_t ydims[4] = {-1, 3, 3, 4};
  loom_output dy = loom_placeholder(g, LOOM_F32, 4, ydims, "dy");
  loom_output dw = loom_conv2d_backprop_filter(g, x, wd, dy, s2, LOOM_PADDING_SAME, NULL, "dw");
  int64_t zy[4] = {0, 3, 3, 4};
  loom_tensor *zdy = loom_tensor_new(LOOM_F32, 4, zy, NULL);
  for (int k = 0; k < 72; k++) ((float *)loom_tensor_data(zdy))[0] = 0;
  loom_output feeds[2] = {x, dy};
  loom_tensor *vals[2] = {z, zdy};
  out = tu_run1(g, 2, feeds, vals, dw);
  cr_assert_eq(loom_tensor_numel(out), 72);
  for (int k = 0; k < 72; k++) cr_assert_eq(((const float *)loom_tensor_data_const(out))[k], 0.0f);
  loom_tensor_free(out);
  loom_tensor_free(z);
  loom_tensor_free(zdy);
  loom_graph_free(g);
  free(wv);
}

Test(conv, malformed_calls_name_the_node) {
  int64_t xd[4] = {1, 5, 5, 3}, wd[4] = {3, 3, 4, 8}, w3[4] = {3, 3, 3, 8};
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_graph_push_scope(g, "layer1");
  loom_conv2d(g, x, loom_placeholder(g, LOOM_F32, 4, wd, "w"), NULL, LOOM_PADDING_SAME, NULL, "conv");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT,
                     "layer1/conv: input depth 3 does not match the filter's in_channels 4 (input [1,5,5,3], "
                     "filter [3,3,4,8])");
  loom_graph_free(g);

  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  int64_t bad_s[4] = {2, 1, 1, 1};
  loom_conv2d(g, x, loom_placeholder(g, LOOM_F32, 4, w3, "w"), bad_s, LOOM_PADDING_SAME, NULL, "c2");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "c2: strides [2,1,1,1] must be [1, h, w, 1]");
  loom_graph_free(g);

  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  int64_t big[4] = {7, 3, 3, 8};
  loom_conv2d(g, x, loom_placeholder(g, LOOM_F32, 4, big, "w"), NULL, LOOM_PADDING_VALID, NULL, "c3");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "c3: the 7x3 window (dilations 1x1) does not fit in input [1,5,5,3]");
  loom_graph_free(g);

  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_conv2d(g, x, loom_placeholder(g, LOOM_F32, 4, w3, "w"), NULL, 7, NULL, "c4");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "c4: padding 7 is neither VALID (0) nor SAME (1)");
  loom_graph_free(g);

  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_conv2d(g, x, loom_placeholder(g, LOOM_F64, 4, w3, "w"), NULL, LOOM_PADDING_SAME, NULL, "c5");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "c5: input (float32) and filter (float64) must have the same dtype");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t dyd[4] = {1, 4, 4, 8};
  loom_conv2d_backprop_input(g, xd, loom_placeholder(g, LOOM_F32, 4, w3, "w"),
                             loom_placeholder(g, LOOM_F32, 4, dyd, "dy"), NULL, LOOM_PADDING_SAME, NULL, "dx");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT,
                     "dx: out_backprop [1,4,4,8] does not match the convolution output [1,5,5,8] of input [1,5,5,3] "
                     "and filter [3,3,3,8]");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t dyd2[4] = {1, 3, 3, 6};
  loom_conv2d_backprop_filter(g, loom_placeholder(g, LOOM_F32, 4, xd, "x"), w3,
                              loom_placeholder(g, LOOM_F32, 4, dyd2, "dy"), NULL, LOOM_PADDING_VALID, NULL, "dw");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "dw: out_backprop [1,3,3,6] does not match the convolution output");
  loom_graph_free(g);

  /* a mismatch only visible at run time (unknown dims at build time) */
  g = loom_graph_new();
  int64_t ux[4] = {-1, -1, -1, -1};
  x = loom_placeholder(g, LOOM_F32, 4, ux, "x");
  loom_output y = loom_conv2d(g, x, loom_placeholder(g, LOOM_F32, 4, w3, "w"), NULL, LOOM_PADDING_SAME, NULL, "late");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  int64_t rd[4] = {1, 5, 5, 2};
  loom_tensor *xt = loom_tensor_new(LOOM_F32, 4, rd, NULL);
  loom_tensor *wt = loom_tensor_new(LOOM_F32, 4, w3, NULL);
  loom_output feeds[2] = {x, loom_graph_find_output(g, "w")};
  loom_tensor *vals[2] = {xt, wt};
  char msg[512];
  cr_assert_eq(tu_run_err(g, 2, feeds, vals, y, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "late: input depth 2 does not match the filter's in_channels 3"), "%s", msg);
  loom_tensor_free(xt);
  loom_tensor_free(wt);
  loom_graph_free(g);
}

/* ---------------- pools ---------------- */
typedef struct {
  int64_t N, H, W, C, kh, kw, sh, sw;
  int pad;
} pcfg;

static void ref_pool(const pcfg *c, const double *x, double *ymax, double *yavg, const double *dy, double *dxmax,
                     double *dxavg) {
  int64_t OH, OW, pt, pl;
  ref_out(c->H, c->kh, c->sh, 1, c->pad, &OH, &pt);
  ref_out(c->W, c->kw, c->sw, 1, c->pad, &OW, &pl);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++)
        for (int64_t ch = 0; ch < c->C; ch++) {
          double m = -INFINITY, s = 0;
          int64_t cnt = 0, arg = -1;
          for (int64_t i = 0; i < c->kh; i++)
            for (int64_t j = 0; j < c->kw; j++) {
              int64_t ih = oh * c->sh - pt + i, iw = ow * c->sw - pl + j;
              if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
              int64_t xi = ((n * c->H + ih) * c->W + iw) * c->C + ch;
              if (arg < 0 || x[xi] > m) {
                m = x[xi];
                arg = xi;
              }
              s += x[xi];
              cnt++;
            }
          int64_t yi = ((n * OH + oh) * OW + ow) * c->C + ch;
          ymax[yi] = m;
          yavg[yi] = s / (double)cnt;
          dxmax[arg] += dy[yi];
          for (int64_t i = 0; i < c->kh; i++)
            for (int64_t j = 0; j < c->kw; j++) {
              int64_t ih = oh * c->sh - pt + i, iw = ow * c->sw - pl + j;
              if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
              dxavg[((n * c->H + ih) * c->W + iw) * c->C + ch] += dy[yi] / (double)cnt;
            }
        }
}

static void check_pool(const pcfg *c, int ties, loom_dtype dt) {
  int64_t OH, OW, t0;
  ref_out(c->H, c->kh, c->sh, 1, c->pad, &OH, &t0);
  ref_out(c->W, c->kw, c->sw, 1, c->pad, &OW, &t0);
  int64_t xd[4] = {c->N, c->H, c->W, c->C}, yd[4] = {c->N, OH, OW, c->C};
  int64_t nx = c->N * c->H * c->W * c->C, ny = c->N * OH * OW * c->C;
  float *xf = frand(nx), *dyf = frand(ny);
  if (ties)
    for (int64_t i = 0; i < nx; i++) xf[i] = (float)((int)(xf[i] * 2.0f)); /* values in {-1, 0, 1}: many ties */
  double *x = to_d(xf, nx), *dy = to_d(dyf, ny);
  double *ymax = calloc((size_t)ny + 1, 8), *yavg = calloc((size_t)ny + 1, 8), *dxmax = calloc((size_t)nx + 1, 8),
         *dxavg = calloc((size_t)nx + 1, 8);
  ref_pool(c, x, ymax, yavg, dy, dxmax, dxavg);
  int f64 = dt == LOOM_F64;
  loom_graph *g = loom_graph_new();
  loom_output X = loom_const_data(g, dt, 4, xd, f64 ? (const void *)x : xf, "x");
  loom_output DY = loom_const_data(g, dt, 4, yd, f64 ? (const void *)dy : dyf, "dy");
  int64_t k[4] = {1, c->kh, c->kw, 1}, s[4] = {1, c->sh, c->sw, 1};
  loom_output MP = loom_max_pool(g, X, k, s, c->pad, "mp");
  loom_output AP = loom_avg_pool(g, X, k, s, c->pad, "ap");
  loom_output MG = loom_max_pool_grad(g, X, MP, DY, k, s, c->pad, "mpg");
  int64_t inf[4] = {-1, c->H, c->W, -1};
  loom_output AG = loom_avg_pool_grad(g, inf, DY, k, s, c->pad, "apg");
  cr_assert_str_eq(loom_node_op_name(MG.node), "MaxPoolGrad");
  cr_assert_str_eq(loom_node_op_name(AG.node), "AvgPoolGrad");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *sess = loom_session_new(g, NULL, st);
  loom_output f[4] = {MP, AP, MG, AG};
  loom_tensor *r[4] = {0};
  cr_assert_eq(loom_session_run(sess, NULL, NULL, 0, f, r, 4, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  char what[128];
  snprintf(what, sizeof what, "pool N%lld H%lld W%lld C%lld k%lldx%lld s%lldx%lld %s%s", (long long)c->N,
           (long long)c->H, (long long)c->W, (long long)c->C, (long long)c->kh, (long long)c->kw, (long long)c->sh,
           (long long)c->sw, c->pad ? "SAME" : "VALID", ties ? " ties" : "");
  double tol = f64 ? 1e-12 : 1e-5;
  expect_close(r[0], 4, yd, ymax, 0, what);
  expect_close(r[1], 4, yd, yavg, tol, what);
  expect_close(r[2], 4, xd, dxmax, tol, what);
  expect_close(r[3], 4, xd, dxavg, tol, what);
  for (int i = 0; i < 4; i++) loom_tensor_free(r[i]);
  loom_session_free(sess);
  loom_status_free(st);
  loom_graph_free(g);
  free(xf);
  free(dyf);
  free(x);
  free(dy);
  free(ymax);
  free(yavg);
  free(dxmax);
  free(dxavg);
}

Test(pool, pools_and_gradients_vs_reference) {
  pcfg cfgs[] = {
      /* N H  W  C   kh kw sh sw pad */
      {2, 6, 6, 3, 2, 2, 2, 2, 0},
      {2, 5, 7, 3, 2, 2, 2, 2, 1},  /* odd sizes, SAME: partial windows at the end */
      {1, 7, 7, 2, 3, 3, 2, 2, 1},
      {1, 7, 6, 2, 3, 3, 1, 1, 1},  /* overlapping windows */
      {3, 8, 8, 70, 3, 2, 2, 3, 0}, /* C > 64 (channel blocks in MaxPoolGrad) */
      {1, 4, 4, 1, 4, 4, 1, 1, 0},  /* global pooling */
      {1, 3, 5, 2, 1, 1, 2, 2, 1},  /* 1x1 window, stride > window */
      {4, 28, 28, 8, 2, 2, 2, 2, 0},
      {2, 5, 5, 17, 2, 2, 2, 2, 0}, /* stride = window, VALID: the last row/column is in no window */
      {2, 6, 6, 17, 3, 3, 3, 3, 1}, /* windows tile the image exactly */
      /* 2x2 at stride 2 over whole blocks of 16 channels: the loops of that window */
      {2, 6, 8, 32, 2, 2, 2, 2, 0}, /* tiling the image */
      {2, 7, 9, 16, 2, 2, 2, 2, 1}, /* SAME, odd: the last row's and column's windows are partial */
      {2, 7, 7, 16, 2, 2, 2, 2, 0}, /* VALID, odd: a row and a column in no window */
  };
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    check_pool(&cfgs[i], 0, LOOM_F32);
    check_pool(&cfgs[i], 1, LOOM_F32);
    if (cfgs[i].C % 16 == 0) check_pool(&cfgs[i], 1, LOOM_F64);
  }
  check_pool(&cfgs[1], 1, LOOM_F64);
  check_pool(&cfgs[3], 0, LOOM_F64);
}

Test(pool, avg_pool_same_divides_by_valid_count) {
  /* TF: x = 1..9 as [1,3,3,1], 2x2 window, stride 2, SAME -> [[3, 4.5], [7.5, 9]] */
  float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  int64_t xd[4] = {1, 3, 3, 1}, k[4] = {1, 2, 2, 1}, s[4] = {1, 2, 2, 1};
  loom_graph *g = loom_graph_new();
  loom_output X = loom_const_data(g, LOOM_F32, 4, xd, x, "x");
  loom_output a = loom_avg_pool(g, X, k, s, LOOM_PADDING_SAME, "ap");
  loom_output m = loom_max_pool(g, X, k, s, LOOM_PADDING_SAME, "mp");
  loom_tensor *A, *M;
  run2(g, a, m, &A, &M);
  int64_t yd[4] = {1, 2, 2, 1};
  float wa[4] = {3, 4.5f, 7.5f, 9}, wm[4] = {5, 6, 8, 9};
  tu_expect_f32(A, 4, yd, wa, 1e-6);
  tu_expect_f32(M, 4, yd, wm, 0);
  loom_tensor_free(A);
  loom_tensor_free(M);
  /* its gradient spreads 1/count: counts 4, 2, 2, 1 */
  float ones[4] = {1, 1, 1, 1};
  loom_output dy = loom_const_data(g, LOOM_F32, 4, yd, ones, "dy");
  loom_tensor *G = tu_run1(g, 0, NULL, NULL, loom_avg_pool_grad(g, xd, dy, k, s, LOOM_PADDING_SAME, "apg"));
  float wg[9] = {0.25f, 0.25f, 0.5f, 0.25f, 0.25f, 0.5f, 0.5f, 0.5f, 1};
  tu_expect_f32(G, 4, xd, wg, 1e-6);
  loom_tensor_free(G);
  /* max pool grad with ties routes to the first maximum */
  float c[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  loom_output C = loom_const_data(g, LOOM_F32, 4, xd, c, "c");
  loom_output cm = loom_max_pool(g, C, k, s, LOOM_PADDING_SAME, NULL);
  G = tu_run1(g, 0, NULL, NULL, loom_max_pool_grad(g, C, cm, dy, k, s, LOOM_PADDING_SAME, "mpg"));
  float wmg[9] = {1, 0, 1, 0, 0, 0, 1, 0, 1};
  tu_expect_f32(G, 4, xd, wmg, 0);
  loom_tensor_free(G);
  loom_graph_free(g);
}

Test(pool, malformed_calls_and_zero_size) {
  int64_t xd[4] = {2, 4, 4, 3}, k3[4] = {1, 3, 3, 1}, s1[4] = {1, 1, 1, 1};
  loom_graph *g = loom_graph_new();
  int64_t kbad[4] = {1, 2, 2, 2};
  loom_max_pool(g, loom_placeholder(g, LOOM_F32, 4, xd, "x"), kbad, s1, LOOM_PADDING_VALID, "mp");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "mp: ksize [1,2,2,2] must be [1, h, w, 1]");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t k5[4] = {1, 5, 1, 1};
  loom_avg_pool(g, loom_placeholder(g, LOOM_F32, 4, xd, "x"), k5, s1, LOOM_PADDING_VALID, "ap");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "ap: the 5x1 window (dilations 1x1) does not fit in input [2,4,4,3]");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t r3[3] = {4, 4, 3};
  loom_max_pool(g, loom_placeholder(g, LOOM_F32, 3, r3, "x"), k3, s1, LOOM_PADDING_VALID, "rank3");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "rank3: input (NHWC) must have rank 4, got shape [4,4,3]");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_output y = loom_max_pool(g, x, k3, s1, LOOM_PADDING_VALID, "mp");
  int64_t gd[4] = {2, 3, 3, 3};
  loom_max_pool_grad(g, x, y, loom_placeholder(g, LOOM_F32, 4, gd, "g"), k3, s1, LOOM_PADDING_VALID, "mpg");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "mpg: grad [2,3,3,3] does not match the pooling output [2,2,2,3]");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_avg_pool_grad(g, xd, loom_placeholder(g, LOOM_F32, 4, gd, "g"), k3, s1, LOOM_PADDING_VALID, "apg");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "apg: grad [2,3,3,3] does not match the pooling output [2,2,2,3]");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_avg_pool(g, loom_placeholder(g, LOOM_I32, 4, xd, "x"), k3, s1, LOOM_PADDING_VALID, "ip");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "ip: input must be float32 or float64, got int32");
  loom_graph_free(g);

  /* an empty batch */
  g = loom_graph_new();
  int64_t ud[4] = {-1, 4, 4, 3};
  x = loom_placeholder(g, LOOM_F32, 4, ud, "x");
  y = loom_avg_pool(g, x, k3, s1, LOOM_PADDING_SAME, "ap");
  loom_output mg = loom_max_pool_grad(g, x, loom_max_pool(g, x, k3, s1, LOOM_PADDING_SAME, NULL), y, k3, s1,
                                      LOOM_PADDING_SAME, "mg");
  int64_t zd[4] = {0, 4, 4, 3};
  loom_tensor *z = loom_tensor_new(LOOM_F32, 4, zd, NULL);
  loom_tensor *out = tu_run1(g, 1, &x, &z, mg);
  cr_assert_eq(loom_tensor_numel(out), 0);
  cr_assert_eq(loom_tensor_dim(out, 1), 4);
  loom_tensor_free(out);
  loom_tensor_free(z);
  loom_graph_free(g);
}

/* ---------------- l2_normalize ---------------- */
Test(l2norm, l2_normalize_axes_and_epsilon) {
  int64_t d[3] = {3, 70, 5};
  int64_t n = 3 * 70 * 5;
  float *x = frand(n);
  for (int64_t i = 0; i < 5; i++) x[i] = 0; /* a zero line along axis 2 (first 5 elems) */
  double *xd = to_d(x, n), *want = malloc((size_t)n * sizeof *want);
  int axes[4] = {0, 1, 2, -2};
  for (int ai = 0; ai < 4; ai++) {
    int ax = axes[ai] < 0 ? axes[ai] + 3 : axes[ai];
    int64_t outer = 1, len = d[ax], inner = 1;
    for (int i = 0; i < ax; i++) outer *= d[i];
    for (int i = ax + 1; i < 3; i++) inner *= d[i];
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        double s = 0;
        for (int64_t k = 0; k < len; k++) s += xd[(o * len + k) * inner + i] * xd[(o * len + k) * inner + i];
        for (int64_t k = 0; k < len; k++)
          want[(o * len + k) * inner + i] = xd[(o * len + k) * inner + i] / sqrt(fmax(s, 1e-12));
      }
    loom_graph *g = loom_graph_new();
    loom_output y = loom_l2_normalize(g, loom_const_data(g, LOOM_F32, 3, d, x, "x"), axes[ai], 0, "l2");
    cr_assert_str_eq(loom_node_op_name(y.node), "L2Normalize");
    loom_tensor *t = tu_run1(g, 0, NULL, NULL, y);
    expect_close(t, 3, d, want, 1e-5, "l2_normalize");
    loom_tensor_free(t);
    loom_graph_free(g);
  }
  /* a large epsilon dominates: y = x / sqrt(eps) */
  float v[3] = {0.1f, 0.2f, 0.2f};
  int64_t d3[1] = {3};
  loom_graph *g = loom_graph_new();
  loom_output y = loom_l2_normalize(g, loom_const_data(g, LOOM_F32, 1, d3, v, "v"), 0, 4.0, NULL);
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, y);
  float w[3] = {0.05f, 0.1f, 0.1f};
  tu_expect_f32(t, 1, d3, w, 1e-6);
  loom_tensor_free(t);
  /* epsilon does not bind: norm 0.3 */
  y = loom_l2_normalize(g, loom_const_data(g, LOOM_F32, 1, d3, v, "v"), -1, 1e-12, NULL);
  t = tu_run1(g, 0, NULL, NULL, y);
  float w2[3] = {1.0f / 3, 2.0f / 3, 2.0f / 3};
  tu_expect_f32(t, 1, d3, w2, 1e-6);
  loom_tensor_free(t);
  /* f64 scalar: x / |x| */
  double sv = -2.5;
  y = loom_l2_normalize(g, loom_const_data(g, LOOM_F64, 0, NULL, &sv, "s"), 0, 0, NULL);
  t = tu_run1(g, 0, NULL, NULL, y);
  cr_assert_eq(loom_tensor_ndim(t), 0);
  cr_assert_eq(*(const double *)loom_tensor_data_const(t), -1.0);
  loom_tensor_free(t);
  loom_l2_normalize(g, loom_const_data(g, LOOM_F32, 1, d3, v, "v"), 1, 0, "bad_axis");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "bad_axis: axis 1 is out of range for x [3]");
  loom_graph_free(g);
  free(x);
  free(xd);
  free(want);
}

/* The gradient of a scalar's l2_normalize (x / |x|, flat away from 0) builds and is 0. */
Test(l2norm, l2_normalize_scalar_gradient) {
  loom_graph *g = loom_graph_new();
  double sv = -2.5;
  loom_output x = loom_const_data(g, LOOM_F64, 0, NULL, &sv, "s");
  loom_output y = loom_l2_normalize(g, x, 0, 0, NULL);
  loom_output dx;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients(g, 1, &y, NULL, 1, &x, &dx, st), LOOM_OK, "%s", loom_status_message(st));
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, dx);
  cr_assert_eq(loom_tensor_ndim(t), 0);
  cr_assert_float_eq(*(const double *)loom_tensor_data_const(t), 0.0, 1e-15);
  loom_tensor_free(t);
  loom_status_free(st);
  loom_graph_free(g);
}

/* ---------------- absurd attribute values ---------------- */
/* Builders called directly with INT64_MAX / INT64_MIN / huge strides, ksize,
 * dilations and size vectors fail with INVALID_ARGUMENT naming the node and
 * the attribute, instead of overflowing int64 in the output-size arithmetic
 * (undefined behaviour). strides/ksize/dilations entries are capped at 2^24
 * (as the graph reader does); size vectors at INT64_MAX / 16 elements. */

#define I64MAX INT64_MAX
#define I64MIN INT64_MIN

/* The graph failed: INVALID_ARGUMENT, message "node: ...frag...". */
static void expect_node_error(loom_graph *g, const char *node, const char *frag) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT, "want '%s', got '%s'", frag, loom_status_message(st));
  const char *m = loom_status_message(st);
  size_t n = strlen(node);
  cr_assert(!strncmp(m, node, n) && !strncmp(m + n, ": ", 2), "message does not start with '%s: ': %s", node, m);
  cr_assert(strstr(m, frag), "message '%s' lacks '%s'", m, frag);
  loom_status_free(st);
}

/* conv2d(x [1,5,5,3], w [3,3,3,8]) with the given strides and dilations. */
static void conv_with(const int64_t *strides, const int64_t *dil, int pad, const char *name, const char *frag) {
  int64_t xd[4] = {1, 5, 5, 3}, wd[4] = {3, 3, 3, 8};
  loom_graph *g = loom_graph_new();
  loom_conv2d(g, loom_placeholder(g, LOOM_F32, 4, xd, "x"), loom_placeholder(g, LOOM_F32, 4, wd, "w"), strides, pad,
              dil, name);
  expect_node_error(g, name, frag);
  loom_graph_free(g);
}

Test(conv_limits, huge_strides_and_dilations) {
  int64_t s_max[4] = {1, I64MAX, 1, 1}, s_min[4] = {1, 1, I64MIN, 1}, s_big[4] = {1, 1, (int64_t)1 << 25, 1};
  conv_with(s_max, NULL, LOOM_PADDING_SAME, "c1", "strides[1] = 9223372036854775807 is too large (at most 16777216)");
  conv_with(s_max, NULL, LOOM_PADDING_VALID, "c2", "strides[1] = 9223372036854775807 is too large");
  conv_with(s_min, NULL, LOOM_PADDING_SAME, "c3",
            "strides [1,1,-9223372036854775808,1] must be [1, h, w, 1] with h, w >= 1");
  conv_with(s_big, NULL, LOOM_PADDING_SAME, "c4", "strides[2] = 33554432 is too large");
  int64_t d_max[4] = {1, I64MAX, 1, 1}, d_min[4] = {1, 1, I64MIN, 1};
  conv_with(NULL, d_max, LOOM_PADDING_SAME, "c5", "dilations[1] = 9223372036854775807 is too large");
  conv_with(NULL, d_max, LOOM_PADDING_VALID, "c6", "dilations[1] = 9223372036854775807 is too large");
  conv_with(NULL, d_min, LOOM_PADDING_SAME, "c7", "dilations [1,1,-9223372036854775808,1] must be [1, h, w, 1]");

  /* the largest allowed stride builds and runs: one output row */
  int64_t xd[4] = {1, 5, 5, 3}, wd[4] = {3, 3, 3, 8}, s_ok[4] = {1, (int64_t)1 << 24, 1, 1};
  loom_graph *g = loom_graph_new();
  float ones[75], w[216];
  for (int i = 0; i < 75; i++) ones[i] = 1;
  for (int i = 0; i < 216; i++) w[i] = 1;
  loom_output y = loom_conv2d(g, loom_const_data(g, LOOM_F32, 4, xd, ones, NULL),
                              loom_const_data(g, LOOM_F32, 4, wd, w, NULL), s_ok, LOOM_PADDING_SAME, NULL, "ok");
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, y);
  cr_assert_eq(loom_tensor_dim(t, 1), 1);
  cr_assert_eq(loom_tensor_dim(t, 2), 5);
  /* rows: one output, no padding (window rows 0..2); columns: stride 1,
   * pad_left 1, so output (0,0) sums 3 rows x 2 columns x 3 channels */
  cr_assert_float_eq(((const float *)loom_tensor_data_const(t))[0], 3 * 2 * 3, 1e-5);
  loom_tensor_free(t);
  loom_graph_free(g);
}

/* A filter dim from a placeholder times a dilation overflows the window extent. */
Test(conv_limits, window_extent_overflow) {
  int64_t xd[4] = {1, -1, 5, 3}, wd[4] = {(int64_t)1 << 62, 1, 3, 8}, dil[4] = {1, 4, 1, 1};
  loom_graph *g = loom_graph_new();
  loom_conv2d(g, loom_placeholder(g, LOOM_F32, 4, xd, "x"), loom_placeholder(g, LOOM_F32, 4, wd, "w"), NULL,
              LOOM_PADDING_SAME, dil, "cw");
  expect_node_error(g, "cw", "the 4611686018427387904x1 window with dilations 4x1 is too large");
  loom_graph_free(g);
}

Test(conv_limits, backprop_huge_sizes) {
  int64_t wd[4] = {3, 3, 3, 8}, ud[4] = {-1, -1, -1, -1}, s2[4] = {1, 2, 1, 1};
  loom_graph *g = loom_graph_new();
  int64_t is1[4] = {1, I64MAX, 5, 3};
  loom_conv2d_backprop_input(g, is1, loom_placeholder(g, LOOM_F32, 4, wd, "w"),
                             loom_placeholder(g, LOOM_F32, 4, ud, "dy"), s2, LOOM_PADDING_SAME, NULL, "bi1");
  expect_node_error(g, "bi1", "input_sizes[1] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t is2[4] = {1, (int64_t)1 << 40, (int64_t)1 << 40, 3};
  loom_conv2d_backprop_input(g, is2, loom_placeholder(g, LOOM_F32, 4, wd, "w"),
                             loom_placeholder(g, LOOM_F32, 4, ud, "dy"), NULL, LOOM_PADDING_SAME, NULL, "bi2");
  expect_node_error(g, "bi2", "input_sizes[2] = 1099511627776 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t fs[4] = {I64MAX, I64MAX, 3, 8}, d2[4] = {1, 2, 2, 1};
  loom_conv2d_backprop_filter(g, loom_placeholder(g, LOOM_F32, 4, ud, "x"), fs,
                              loom_placeholder(g, LOOM_F32, 4, ud, "dy"), NULL, LOOM_PADDING_SAME, d2, "bf");
  expect_node_error(g, "bf", "filter_sizes[0] = 9223372036854775807 is too large");
  loom_graph_free(g);
}

Test(pool_limits, huge_ksize_strides_and_orig_shape) {
  int64_t xd[4] = {1, 5, 5, 3}, s1[4] = {1, 1, 1, 1}, k3[4] = {1, 3, 3, 1};
  loom_graph *g = loom_graph_new();
  int64_t k_max[4] = {1, I64MAX, 1, 1};
  loom_max_pool(g, loom_placeholder(g, LOOM_F32, 4, xd, "x"), k_max, s1, LOOM_PADDING_SAME, "mp");
  expect_node_error(g, "mp", "ksize[1] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t k_min[4] = {1, I64MIN, 1, 1};
  loom_avg_pool(g, loom_placeholder(g, LOOM_F32, 4, xd, "x"), k_min, s1, LOOM_PADDING_SAME, "ap1");
  expect_node_error(g, "ap1", "ksize [1,-9223372036854775808,1,1] must be [1, h, w, 1]");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t s_max[4] = {1, 1, I64MAX, 1};
  loom_avg_pool(g, loom_placeholder(g, LOOM_F32, 4, xd, "x"), k3, s_max, LOOM_PADDING_SAME, "ap2");
  expect_node_error(g, "ap2", "strides[2] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t gd[4] = {1, -1, 5, 3}, os[4] = {1, I64MAX, 5, 3}, s2[4] = {1, 2, 1, 1};
  loom_avg_pool_grad(g, os, loom_placeholder(g, LOOM_F32, 4, gd, "g"), k3, s2, LOOM_PADDING_SAME, "apg");
  expect_node_error(g, "apg", "orig_input_shape[1] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_output y = loom_max_pool(g, x, k3, s1, LOOM_PADDING_SAME, NULL);
  int64_t k_big[4] = {1, 1, (int64_t)1 << 30, 1};
  loom_max_pool_grad(g, x, y, y, k_big, s1, LOOM_PADDING_SAME, "mpg");
  expect_node_error(g, "mpg", "ksize[2] = 1073741824 is too large");
  loom_graph_free(g);
}
