/* Random ops: Philox4x32-10 known answers, determinism, fresh numbers per run,
 * thread-count independence, distribution statistics, dropout, errors. */
#include "test_util.h"
#include "base/philox.h"

/* Runs `fetch` once on session s; asserts OK. */
static loom_tensor *run_on(loom_session *s, loom_output fetch) {
  loom_status *st = loom_status_new();
  loom_tensor *out = NULL;
  loom_code rc = loom_session_run(s, NULL, NULL, 0, &fetch, &out, 1, NULL, 0, st);
  cr_assert(rc == LOOM_OK, "run failed: %s", loom_status_message(st));
  loom_status_free(st);
  return out;
}

static loom_session *new_session(loom_graph *g, int threads) {
  loom_status *st = loom_status_new();
  cr_assert(loom_graph_status(g, st) == LOOM_OK, "graph: %s", loom_status_message(st));
  loom_session_options o = loom_session_options_default();
  o.num_threads = threads;
  loom_session *s = loom_session_new(g, &o, st);
  cr_assert(s, "session: %s", loom_status_message(st));
  loom_status_free(st);
  return s;
}

static int same_bytes(const loom_tensor *a, const loom_tensor *b) {
  return loom_tensor_nbytes(a) == loom_tensor_nbytes(b) &&
         !memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), loom_tensor_nbytes(a));
}

static double elem(const loom_tensor *t, int64_t i) {
  return loom_tensor_dtype(t) == LOOM_F32 ? (double)((const float *)loom_tensor_data_const(t))[i]
                                          : ((const double *)loom_tensor_data_const(t))[i];
}

static void moments(const loom_tensor *t, double *mean, double *sd, double *mn, double *mx) {
  int64_t n = loom_tensor_numel(t);
  double s = 0, s2 = 0;
  *mn = INFINITY;
  *mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    double v = elem(t, i);
    s += v;
    if (v < *mn) *mn = v;
    if (v > *mx) *mx = v;
  }
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) {
    double d = elem(t, i) - *mean;
    s2 += d * d;
  }
  *sd = sqrt(s2 / (double)(n - 1));
}

Test(philox, known_answer_vectors) {
  /* Random123 kat_vectors for philox4x32_10 */
  struct {
    uint32_t ctr[4], key[2], want[4];
  } kat[3] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (int t = 0; t < 3; t++) {
    uint32_t out[4];
    loom_philox4x32_10(kat[t].ctr, kat[t].key, out);
    for (int i = 0; i < 4; i++)
      cr_assert_eq(out[i], kat[t].want[i], "vector %d word %d: %08x want %08x", t, i, out[i], kat[t].want[i]);
  }
}

Test(random, uniform_stream_layout_matches_philox) {
  /* seed = seed2 = 0, first run: element k of block 0 is word k of Philox(0; 0). */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {6};
  loom_output u = loom_random_uniform(g, 1, d, LOOM_F32, 0, 1, 0, 0, "u");
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, u);
  const float *p = loom_tensor_data_const(t);
  uint32_t w[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
  for (int k = 0; k < 4; k++) cr_assert_eq(p[k], (float)(w[k] >> 8) * 0x1p-24f, "element %d", k);
  uint32_t c1[4] = {1, 0, 0, 0}, k0[2] = {0, 0}, w1[4];
  loom_philox4x32_10(c1, k0, w1);
  cr_assert_eq(p[4], (float)(w1[0] >> 8) * 0x1p-24f);
  cr_assert_eq(p[5], (float)(w1[1] >> 8) * 0x1p-24f);
  loom_tensor_free(t);
  loom_graph_free(g);
}

Test(random, deterministic_per_seed_and_new_values_each_run) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {37, 11};
  loom_output ops[4] = {
      loom_random_uniform(g, 2, d, LOOM_F32, -1, 3, 42, 7, "u"),
      loom_random_normal(g, 2, d, LOOM_F64, 0, 1, 42, 7, "n"),
      loom_truncated_normal(g, 2, d, LOOM_F32, 0, 1, 42, 7, "tn"),
      loom_random_uniform(g, 2, d, LOOM_F32, -1, 3, 43, 7, "u_other_seed"),
  };
  loom_output u2 = loom_random_uniform(g, 2, d, LOOM_F32, -1, 3, 42, 8, "u_other_seed2");
  loom_session *s1 = new_session(g, 1), *s2 = new_session(g, 1);
  for (int k = 0; k < 3; k++) {
    loom_tensor *a0 = run_on(s1, ops[k]), *a1 = run_on(s1, ops[k]);
    loom_tensor *b0 = run_on(s2, ops[k]), *b1 = run_on(s2, ops[k]);
    cr_assert(same_bytes(a0, b0), "op %d: same seed, new session, first run must match", k);
    cr_assert(same_bytes(a1, b1), "op %d: second runs must match", k);
    cr_assert(!same_bytes(a0, a1), "op %d: the second run must draw new numbers", k);
    loom_tensor_free(a0);
    loom_tensor_free(a1);
    loom_tensor_free(b0);
    loom_tensor_free(b1);
  }
  loom_session_free(s2);
  s2 = new_session(g, 1);
  loom_tensor *a = run_on(s2, ops[0]), *b = run_on(s2, ops[3]), *c = run_on(s2, u2);
  cr_assert(!same_bytes(a, b), "a different seed gives different numbers");
  cr_assert(!same_bytes(a, c), "a different seed2 gives different numbers");
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_tensor_free(c);
  loom_session_free(s1);
  loom_session_free(s2);
  loom_graph_free(g);
}

Test(random, same_values_with_1_and_2_threads) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {1001, 203}; /* > 2 * LOOM_PAR_GRAIN: runs in parallel, odd sizes */
  loom_output x = loom_random_normal(g, 2, d, LOOM_F32, 0, 1, 5, 6, "x");
  loom_output outs[7];
  outs[0] = loom_random_uniform(g, 2, d, LOOM_F32, 0, 1, 1, 2, "u32");
  outs[1] = loom_random_uniform(g, 2, d, LOOM_F64, 0, 1, 1, 2, "u64");
  outs[2] = x;
  outs[3] = loom_random_normal(g, 2, d, LOOM_F64, 0, 1, 1, 2, "n64");
  outs[4] = loom_truncated_normal(g, 2, d, LOOM_F32, 0, 1, 1, 2, "t32");
  outs[5] = loom_truncated_normal(g, 2, d, LOOM_F64, 0, 1, 1, 2, "t64");
  loom_output mask;
  loom_output y = loom_dropout(g, x, 0.25, 9, 9, &mask, "drop");
  (void)y;
  outs[6] = mask;
  loom_session *s1 = new_session(g, 1), *s2 = new_session(g, 2);
  for (int r = 0; r < 2; r++) {
    loom_status *st = loom_status_new();
    loom_tensor *a[7] = {0}, *b[7] = {0};
    cr_assert_eq(loom_session_run(s1, NULL, NULL, 0, outs, a, 7, NULL, 0, st), LOOM_OK, "%s",
                 loom_status_message(st));
    cr_assert_eq(loom_session_run(s2, NULL, NULL, 0, outs, b, 7, NULL, 0, st), LOOM_OK, "%s",
                 loom_status_message(st));
    for (int k = 0; k < 7; k++) {
      cr_assert(same_bytes(a[k], b[k]), "run %d output %d differs between 1 and 2 threads", r, k);
      loom_tensor_free(a[k]);
      loom_tensor_free(b[k]);
    }
    loom_status_free(st);
  }
  loom_session_free(s1);
  loom_session_free(s2);
  loom_graph_free(g);
}

Test(random, uniform_statistics) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {100000};
  loom_output u32 = loom_random_uniform(g, 1, d, LOOM_F32, 0, 1, 123, 0, NULL);
  loom_output u64 = loom_random_uniform(g, 1, d, LOOM_F64, 0, 1, 123, 0, NULL);
  loom_output r = loom_random_uniform(g, 1, d, LOOM_F32, -2, 6, 77, 1, NULL);
  loom_output outs[3] = {u32, u64, r};
  for (int k = 0; k < 3; k++) {
    loom_tensor *t = tu_run1(g, 0, NULL, NULL, outs[k]);
    double lo = k == 2 ? -2 : 0, hi = k == 2 ? 6 : 1, w = hi - lo;
    double mean, sd, mn, mx;
    moments(t, &mean, &sd, &mn, &mx);
    /* mean: sd(mean) = w/sqrt(12 n) ~ 0.00091 w; variance: sd ~ 0.00024 w^2 */
    cr_assert(fabs(mean - (lo + hi) / 2) < 0.0050 * w, "op %d mean %g", k, mean);
    cr_assert(fabs(sd * sd - w * w / 12) < 0.0015 * w * w, "op %d var %g", k, sd * sd);
    cr_assert(mn >= lo && mx < hi, "op %d range [%g, %g]", k, mn, mx);
    cr_assert(mn < lo + 0.001 * w && mx > hi - 0.001 * w, "op %d should cover the range", k);
    /* a coarse histogram: 10 bins of ~10000 each (sd ~ 95) */
    int64_t bins[10] = {0};
    for (int64_t i = 0; i < 100000; i++) bins[(int)((elem(t, i) - lo) / w * 10)]++;
    for (int b = 0; b < 10; b++) cr_assert(llabs(bins[b] - 10000) < 600, "op %d bin %d: %lld", k, b, (long long)bins[b]);
    loom_tensor_free(t);
  }
  loom_graph_free(g);
}

Test(random, normal_statistics) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {400, 250};
  loom_output n32 = loom_random_normal(g, 2, d, LOOM_F32, 3.0, 2.0, 11, 12, NULL);
  loom_output n64 = loom_random_normal(g, 2, d, LOOM_F64, 3.0, 2.0, 11, 12, NULL);
  loom_output outs[2] = {n32, n64};
  for (int k = 0; k < 2; k++) {
    loom_tensor *t = tu_run1(g, 0, NULL, NULL, outs[k]);
    double mean, sd, mn, mx;
    moments(t, &mean, &sd, &mn, &mx);
    /* sd(mean) = 2/sqrt(1e5) = 0.0063; sd(sd) ~ 2/sqrt(2e5) = 0.0045 */
    cr_assert(fabs(mean - 3.0) < 0.035, "op %d mean %g", k, mean);
    cr_assert(fabs(sd - 2.0) < 0.025, "op %d stddev %g", k, sd);
    /* about 68.27% within one stddev (sd of the fraction ~ 0.0015) */
    int64_t in1 = 0;
    for (int64_t i = 0; i < 100000; i++) in1 += fabs(elem(t, i) - 3.0) < 2.0;
    cr_assert(fabs(in1 / 1e5 - 0.6827) < 0.008, "op %d within 1 sd: %g", k, in1 / 1e5);
    cr_assert(mn < 3.0 - 2 * 3.5 && mx > 3.0 + 2 * 3.5, "op %d tails too short: [%g, %g]", k, mn, mx);
    loom_tensor_free(t);
  }
  loom_graph_free(g);
}

Test(random, truncated_normal_within_two_stddev) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {100000};
  loom_output t32 = loom_truncated_normal(g, 1, d, LOOM_F32, -1.0, 0.5, 3, 4, NULL);
  loom_output t64 = loom_truncated_normal(g, 1, d, LOOM_F64, -1.0, 0.5, 3, 4, NULL);
  loom_output outs[2] = {t32, t64};
  for (int k = 0; k < 2; k++) {
    loom_tensor *t = tu_run1(g, 0, NULL, NULL, outs[k]);
    double mean, sd, mn, mx;
    moments(t, &mean, &sd, &mn, &mx);
    cr_assert(mn >= -1.0 - 1.0 && mx <= -1.0 + 1.0, "op %d range [%g, %g] beyond 2 stddev", k, mn, mx);
    cr_assert(mn < -1.99 && mx > -0.01, "op %d should reach near the bounds: [%g, %g]", k, mn, mx);
    /* standard normal truncated to (-2, 2) has stddev 0.8796 */
    cr_assert(fabs(mean + 1.0) < 0.006, "op %d mean %g", k, mean);
    cr_assert(fabs(sd - 0.5 * 0.87963) < 0.006, "op %d stddev %g", k, sd);
    loom_tensor_free(t);
  }
  loom_graph_free(g);
}

Test(random, dropout_keep_rate_and_scaling) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {500, 200};
  int64_t n = 100000;
  float *xv = malloc((size_t)n * sizeof *xv);
  for (int64_t i = 0; i < n; i++) xv[i] = (float)(i % 97) - 40.0f;
  loom_output x = loom_const_data(g, LOOM_F32, 2, d, xv, "x");
  loom_output mask;
  loom_output y = loom_dropout(g, x, 0.3, 1, 2, &mask, "drop");
  loom_output mask0;
  loom_output y0 = loom_dropout(g, x, 0.0, 1, 2, &mask0, "keep_all");
  cr_assert_str_eq(loom_node_name(y.node), "drop");
  cr_assert_eq(mask.node, y.node);
  cr_assert_eq(mask.index, 1);
  int64_t od[LOOM_MAX_DIMS];
  cr_assert_eq(loom_output_dims(mask, od), 2);
  cr_assert_eq(od[0], 500);
  loom_session *s = new_session(g, 2);
  loom_status *st = loom_status_new();
  loom_output f[4] = {y, mask, y0, mask0};
  loom_tensor *r[4] = {0};
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, f, r, 4, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  const float *yv = loom_tensor_data_const(r[0]), *mv = loom_tensor_data_const(r[1]);
  const float *y0v = loom_tensor_data_const(r[2]), *m0v = loom_tensor_data_const(r[3]);
  float scale = (float)(1.0 / 0.7);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; i++) {
    cr_assert(mv[i] == 0.0f || mv[i] == scale, "mask[%lld] = %g", (long long)i, (double)mv[i]);
    kept += mv[i] != 0.0f;
    cr_assert_eq(yv[i], xv[i] * mv[i], "y[%lld]", (long long)i);
    cr_assert_eq(y0v[i], xv[i]);
    cr_assert_eq(m0v[i], 1.0f);
  }
  /* keep rate 0.7; sd of the fraction = sqrt(0.21/1e5) = 0.00145 */
  cr_assert(fabs(kept / 1e5 - 0.7) < 0.008, "keep rate %g", kept / 1e5);
  /* the scaled mask has mean ~1, so E[y] ~ E[x] */
  /* a new run draws a new mask */
  loom_tensor *r2[4] = {0};
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, f, r2, 4, NULL, 0, st), LOOM_OK);
  cr_assert(!same_bytes(r2[1], r[1]), "second run: new mask");
  for (int k = 0; k < 4; k++) loom_tensor_free(r2[k]);
  for (int k = 0; k < 4; k++) loom_tensor_free(r[k]);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(g);
  free(xv);

  /* f64 */
  g = loom_graph_new();
  double xd[5] = {1, 2, 3, 4, 5};
  int64_t d5[1] = {5};
  loom_output x64 = loom_const_data(g, LOOM_F64, 1, d5, xd, "x");
  loom_output y64 = loom_dropout(g, x64, 0.5, 3, 3, NULL, "drop");
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, y64);
  cr_assert_eq(loom_tensor_dtype(t), LOOM_F64);
  const double *p = loom_tensor_data_const(t);
  for (int i = 0; i < 5; i++) cr_assert(p[i] == 0.0 || p[i] == 2.0 * xd[i]);
  loom_tensor_free(t);
  loom_graph_free(g);
}

Test(random, rank0_and_zero_size) {
  loom_graph *g = loom_graph_new();
  loom_output s = loom_random_uniform(g, 0, NULL, LOOM_F64, 2, 3, 1, 1, "scalar");
  int64_t zd[2] = {0, 5};
  loom_output z = loom_random_normal(g, 2, zd, LOOM_F32, 0, 1, 1, 1, "empty");
  loom_output zt = loom_truncated_normal(g, 2, zd, LOOM_F64, 0, 1, 1, 1, "empty_t");
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, s);
  cr_assert_eq(loom_tensor_ndim(t), 0);
  double v = *(const double *)loom_tensor_data_const(t);
  cr_assert(v >= 2 && v < 3, "%g", v);
  loom_tensor_free(t);
  t = tu_run1(g, 0, NULL, NULL, z);
  cr_assert_eq(loom_tensor_numel(t), 0);
  cr_assert_eq(loom_tensor_dim(t, 1), 5);
  loom_tensor_free(t);
  t = tu_run1(g, 0, NULL, NULL, zt);
  cr_assert_eq(loom_tensor_numel(t), 0);
  loom_tensor_free(t);
  loom_output xs = loom_const_f32(g, 4.0f, "xs");
  loom_output ds = loom_dropout(g, xs, 0.5, 1, 1, NULL, "ds");
  t = tu_run1(g, 0, NULL, NULL, ds);
  float f = *(const float *)loom_tensor_data_const(t);
  cr_assert(f == 0.0f || f == 8.0f, "%g", (double)f);
  loom_tensor_free(t);
  loom_graph_free(g);
}

static void expect_build_error(loom_graph *g, const char *needle) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT, "want an error containing '%s'", needle);
  cr_assert(strstr(loom_status_message(st), needle), "message '%s' lacks '%s'", loom_status_message(st), needle);
  loom_status_free(st);
  loom_graph_free(g);
}

Test(random, malformed_calls_name_the_node) {
  int64_t d[2] = {2, 3}, unk[2] = {-1, 3};
  loom_graph *g = loom_graph_new();
  loom_random_uniform(g, 2, d, LOOM_I32, 0, 1, 0, 0, "ints");
  expect_build_error(g, "ints: random values must be float32 or float64, got int32");

  g = loom_graph_new();
  loom_random_normal(g, 2, unk, LOOM_F32, 0, 1, 0, 0, "unknown");
  expect_build_error(g, "unknown: shape [?,3] must be fully known");

  g = loom_graph_new();
  loom_graph_push_scope(g, "init");
  loom_random_uniform(g, 2, d, LOOM_F32, 1, 1, 0, 0, "empty_range");
  expect_build_error(g, "init/empty_range: range [1, 1) is empty");

  g = loom_graph_new();
  loom_truncated_normal(g, 2, d, LOOM_F32, 0, -1, 0, 0, "neg");
  expect_build_error(g, "neg: stddev must be > 0");

  g = loom_graph_new();
  loom_output x = loom_const_f32(g, 1.0f, "x");
  loom_dropout(g, x, 1.0, 0, 0, NULL, "drop");
  expect_build_error(g, "drop: dropout rate 1 is not in [0, 1)");

  g = loom_graph_new();
  loom_output xi = loom_const_i32(g, 1, "xi");
  loom_output m;
  loom_dropout(g, xi, 0.5, 0, 0, &m, "drop_int");
  cr_assert(loom_output_valid(m));
  expect_build_error(g, "drop_int: input 0 has unsupported dtype int32");

  g = loom_graph_new();
  loom_random_uniform(g, 9, d, LOOM_F32, 0, 1, 0, 0, "rank9");
  expect_build_error(g, "rank9: invalid rank 9");
}

/* The run counter belongs to (session, node): a random node continues its
 * sequence when a different plan (another fetch list) runs it, exactly as if
 * one plan had run it twice; a new session starts over. */
Test(random, sequence_continues_across_plans_of_a_session) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {64};
  loom_output r = loom_random_uniform(g, 1, d, LOOM_F32, 0.0, 1.0, 7, 11, "r");
  loom_output r2 = loom_add(g, r, r, "r2");
  loom_status *st = loom_status_new();
  /* reference: one plan run twice */
  loom_session *s1 = loom_session_new(g, NULL, st);
  loom_tensor *a1 = NULL, *a2 = NULL;
  cr_assert_eq(loom_session_run(s1, NULL, NULL, 0, &r, &a1, 1, NULL, 0, st), LOOM_OK);
  cr_assert_eq(loom_session_run(s1, NULL, NULL, 0, &r, &a2, 1, NULL, 0, st), LOOM_OK);
  /* other session: first run fetches r, second run fetches {r, r2} (a new plan) */
  loom_session *s2 = loom_session_new(g, NULL, st);
  loom_tensor *b1 = NULL, *b2[2] = {NULL, NULL};
  loom_output both[2] = {r, r2};
  cr_assert_eq(loom_session_run(s2, NULL, NULL, 0, &r, &b1, 1, NULL, 0, st), LOOM_OK);
  cr_assert_eq(loom_session_run(s2, NULL, NULL, 0, both, b2, 2, NULL, 0, st), LOOM_OK);
  cr_assert(!memcmp(loom_tensor_data(a1), loom_tensor_data(b1), 64 * 4), "new session starts the sequence over");
  cr_assert(memcmp(loom_tensor_data(a1), loom_tensor_data(a2), 64 * 4), "second run draws new values");
  cr_assert(!memcmp(loom_tensor_data(a2), loom_tensor_data(b2[0]), 64 * 4),
            "the second plan continues the node's sequence");
  const float *x = loom_tensor_data(b2[0]), *y = loom_tensor_data(b2[1]);
  for (int i = 0; i < 64; i++) cr_assert_eq(y[i], 2 * x[i]);
  loom_tensor_free(a1);
  loom_tensor_free(a2);
  loom_tensor_free(b1);
  loom_tensor_free(b2[0]);
  loom_tensor_free(b2[1]);
  loom_session_free(s1);
  loom_session_free(s2);
  loom_status_free(st);
  loom_graph_free(g);
}

/* A shape past INT64_MAX / 16 elements (loom_tensor_new's limit) fails the
 * build naming the dim, instead of overflowing the element count when a
 * session plans the node. */
Test(random, huge_shape_names_the_dim) {
  int64_t big[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, max1[3] = {2, INT64_MAX, 0};
  loom_graph *g = loom_graph_new();
  loom_random_uniform(g, 2, big, LOOM_F32, 0, 1, 0, 0, "u");
  expect_build_error(g, "u: shape[1] = 1099511627776 is too large");

  g = loom_graph_new();
  loom_random_normal(g, 3, max1, LOOM_F64, 0, 1, 0, 0, "n");
  expect_build_error(g, "n: shape[1] = 9223372036854775807 is too large");

  g = loom_graph_new();
  loom_truncated_normal(g, 2, big, LOOM_F32, 0, 1, 0, 0, "t");
  expect_build_error(g, "t: shape[1] = 1099511627776 is too large");
}

/* Dropout's stream against Philox computed here: element 4b+k of the first run is kept (scaled by
 * 1/(1-rate)) iff word k of Philox(key = seed; counter = {b, 0, seed2, 0}) is at least
 * ceil(rate * 2^32); 1000 elements (whole 16-block groups and a tail), f32 and f64, rates 0.4 and
 * one just below 1 (the bound 2^32: nothing kept), at 1 and 2 threads. */
static void dropout_stream(loom_dtype dt, double rate, int threads) {
  loom_graph *g = loom_graph_new();
  const int64_t n = 1000;
  loom_output x = loom_fill(g, 1, &n, loom_cast(g, loom_const_f32(g, 1.0f, "one"), dt, "one_t"), "ones");
  loom_output f[2];
  f[0] = loom_dropout(g, x, rate, 5, 9, &f[1], "drop");
  loom_session *s = new_session(g, threads);
  loom_status *st = loom_status_new();
  loom_tensor *out[2] = {NULL, NULL};
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, f, out, 2, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
  loom_session_free(s);
  loom_tensor *ty = out[0], *tm = out[1];
  const uint64_t thr = (uint64_t)ceil(rate * 4294967296.0);
  const double scale = 1.0 / (1.0 - rate);
  const uint32_t key[2] = {5, 0};
  int kept = 0;
  for (int64_t b = 0; b * 4 < n; b++) {
    uint32_t ctr[4] = {(uint32_t)b, 0, 9, 0}, w[4];
    loom_philox4x32_10(ctr, key, w);
    for (int k = 0; k < 4 && b * 4 + k < n; k++) {
      const int64_t i = b * 4 + k;
      const double want = (uint64_t)w[k] >= thr ? (dt == LOOM_F32 ? (double)(float)scale : scale) : 0.0;
      const double m = dt == LOOM_F32 ? ((const float *)loom_tensor_data_const(tm))[i] : ((const double *)loom_tensor_data_const(tm))[i];
      const double v = dt == LOOM_F32 ? ((const float *)loom_tensor_data_const(ty))[i] : ((const double *)loom_tensor_data_const(ty))[i];
      cr_assert(m == want && v == want, "rate %g element %lld: mask %.9g, y %.9g, want %.9g", rate, (long long)i, m, v, want);
      kept += want != 0;
    }
  }
  if (rate < 0.5) cr_assert(kept > 500 && kept < 700, "rate %g: %d of 1000 kept", rate, kept);
  else cr_assert_eq(kept, 0);
  loom_tensor_free(ty);
  loom_tensor_free(tm);
  loom_graph_free(g);
}

Test(random, dropout_stream_matches_philox) {
  for (int threads = 1; threads <= 2; threads++) {
    dropout_stream(LOOM_F32, 0.4, threads);
    dropout_stream(LOOM_F64, 0.4, threads);
    dropout_stream(LOOM_F32, 1.0 - 0x1p-40, threads);
  }
}
