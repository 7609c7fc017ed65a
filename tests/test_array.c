/* Array ops: every op against hand-computed values or a reference loop,
 * negative axes, rank-0 and zero-size shapes, and each error path (code and
 * node name in the message). */
#include "test_util.h"

/* ---------------------------------------------------------------- helpers */

static loom_output cf32(loom_graph *g, int nd, const int64_t *d, const float *v) {
  return loom_const_data(g, LOOM_F32, nd, d, v, NULL);
}
static loom_output ci32(loom_graph *g, int nd, const int64_t *d, const int32_t *v) {
  return loom_const_data(g, LOOM_I32, nd, d, v, NULL);
}
static loom_output ci64(loom_graph *g, int nd, const int64_t *d, const int64_t *v) {
  return loom_const_data(g, LOOM_I64, nd, d, v, NULL);
}

static loom_tensor *run(loom_graph *g, loom_output o) { return tu_run1(g, 0, NULL, NULL, o); }

/* Runs several fetches at once. */
static void run_n(loom_graph *g, int nf, const loom_output *feeds, loom_tensor *const *vals, int n,
                  const loom_output *fetches, loom_tensor **outs) {
  loom_status *st = loom_status_new();
  cr_assert(loom_graph_status(g, st) == LOOM_OK, "graph error: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s);
  for (int i = 0; i < n; i++) outs[i] = NULL;
  loom_code rc = loom_session_run(s, feeds, vals, nf, fetches, outs, n, NULL, 0, st);
  cr_assert(rc == LOOM_OK, "run failed: %s", loom_status_message(st));
  loom_session_free(s);
  loom_status_free(st);
}

static void expect_shape(const loom_tensor *t, loom_dtype dt, int nd, const int64_t *d) {
  cr_assert(t);
  cr_assert_eq(loom_tensor_dtype(t), dt, "dtype %s want %s", loom_dtype_name(loom_tensor_dtype(t)),
               loom_dtype_name(dt));
  cr_assert_eq(loom_tensor_ndim(t), nd, "rank %d want %d", loom_tensor_ndim(t), nd);
  for (int i = 0; i < nd; i++)
    cr_assert_eq(loom_tensor_dim(t, i), d[i], "dim %d: %lld want %lld", i, (long long)loom_tensor_dim(t, i),
                 (long long)d[i]);
}

static void expect_i32(const loom_tensor *t, int nd, const int64_t *d, const int32_t *want) {
  expect_shape(t, LOOM_I32, nd, d);
  const int32_t *p = loom_tensor_data_const(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++)
    cr_assert_eq(p[i], want[i], "element %lld: %d want %d", (long long)i, p[i], want[i]);
}
static void expect_i64(const loom_tensor *t, int nd, const int64_t *d, const int64_t *want) {
  expect_shape(t, LOOM_I64, nd, d);
  const int64_t *p = loom_tensor_data_const(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++)
    cr_assert_eq(p[i], want[i], "element %lld: %lld want %lld", (long long)i, (long long)p[i], (long long)want[i]);
}
static void expect_u8(const loom_tensor *t, loom_dtype dt, int nd, const int64_t *d, const uint8_t *want) {
  expect_shape(t, dt, nd, d);
  const uint8_t *p = loom_tensor_data_const(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++)
    cr_assert_eq(p[i], want[i], "element %lld: %d want %d", (long long)i, p[i], want[i]);
}
static void check_f32(loom_graph *g, loom_output o, int nd, const int64_t *d, const float *want) {
  loom_tensor *t = run(g, o);
  tu_expect_f32(t, nd, d, want, 1e-6);
  loom_tensor_free(t);
}

/* The graph failed to build: code INVALID_ARGUMENT, message "node: ...frag...". */
static void expect_build_err(loom_graph *g, const char *node, const char *frag) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT, "code %d: %s", loom_status_code(st),
               loom_status_message(st));
  char want[256];
  snprintf(want, sizeof want, "%s: ", node);
  const char *m = loom_status_message(st);
  cr_assert(strstr(m, want) == m, "message does not start with the node name: %s", m);
  cr_assert(strstr(m, frag), "message lacks '%s': %s", frag, m);
  loom_status_free(st);
}

/* The run fails: code INVALID_ARGUMENT, message "node: ...frag...". */
static void expect_run_err(loom_graph *g, int nf, const loom_output *feeds, loom_tensor *const *vals,
                           loom_output fetch, const char *node, const char *frag) {
  char msg[512], want[256];
  loom_code rc = tu_run_err(g, nf, feeds, vals, fetch, msg, sizeof msg);
  cr_assert_eq(rc, LOOM_INVALID_ARGUMENT, "code %d: %s", rc, msg);
  snprintf(want, sizeof want, "%s: ", node);
  cr_assert(strstr(msg, want) == msg, "message does not start with the node name: %s", msg);
  cr_assert(strstr(msg, frag), "message lacks '%s': %s", frag, msg);
}

static const float X23[6] = {1, 2, 3, 4, 5, 6};
static const int64_t D23[2] = {2, 3};

/* ---------------------------------------------------------------- views */

Test(array, reshape_values_and_inference) {
  loom_graph *g = loom_graph_new();
  loom_output x = cf32(g, 2, D23, X23);
  int64_t s1[2] = {3, -1}, w1[2] = {3, 2};
  check_f32(g, loom_reshape(g, x, 2, s1, NULL), 2, w1, X23);
  int64_t s2[1] = {-1}, w2[1] = {6};
  check_f32(g, loom_reshape(g, x, 1, s2, NULL), 1, w2, X23);
  int64_t s3[3] = {1, 6, 1};
  check_f32(g, loom_reshape(g, x, 3, s3, NULL), 3, s3, X23);
  /* rank 0 <-> [1] */
  loom_output sc = loom_const_f32(g, 7.0f, NULL);
  int64_t one[1] = {1};
  float seven = 7.0f;
  loom_output r1 = loom_reshape(g, sc, 1, one, NULL);
  check_f32(g, r1, 1, one, &seven);
  check_f32(g, loom_reshape(g, r1, 0, NULL, NULL), 0, NULL, &seven);
  /* zero-size: [0,3] -> [3,-1] infers 0 */
  int64_t zd[2] = {0, 3};
  loom_output z = loom_placeholder(g, LOOM_F32, 2, zd, "z");
  int64_t s4[2] = {3, -1}, w4[2] = {3, 0};
  loom_output zr = loom_reshape(g, z, 2, s4, NULL);
  int64_t od[LOOM_MAX_DIMS];
  cr_assert_eq(loom_output_dims(zr, od), 2);
  cr_assert_eq(od[1], 0);
  loom_tensor *zt = loom_tensor_new(LOOM_F32, 2, zd, NULL);
  loom_tensor *o = tu_run1(g, 1, &z, &zt, zr);
  tu_expect_f32(o, 2, w4, NULL, 0);
  loom_tensor_free(o);
  loom_tensor_free(zt);
  /* unknown batch: [?,4] -> [-1,2] keeps -1 at build time, resolves at run time */
  int64_t pd[2] = {-1, 4};
  loom_output p = loom_placeholder(g, LOOM_F32, 2, pd, "p");
  int64_t s5[2] = {-1, 2};
  loom_output pr = loom_reshape(g, p, 2, s5, "pr");
  cr_assert_eq(loom_output_dims(pr, od), 2);
  cr_assert_eq(od[0], -1);
  cr_assert_eq(od[1], 2);
  float pv[12];
  for (int i = 0; i < 12; i++) pv[i] = (float)i;
  int64_t pdd[2] = {3, 4}, w5[2] = {6, 2};
  loom_tensor *pt = tu_f32(2, pdd, pv);
  o = tu_run1(g, 1, &p, &pt, pr);
  tu_expect_f32(o, 2, w5, pv, 0);
  loom_tensor_free(o);
  /* run-time mismatch: [?,4] -> [5] */
  int64_t s6[1] = {5};
  loom_output bad = loom_reshape(g, p, 1, s6, "bad_rt");
  expect_run_err(g, 1, &p, &pt, bad, "bad_rt", "12 elements");
  loom_tensor_free(pt);
  loom_graph_free(g);
}

Test(array, reshape_errors) {
  loom_graph *g = loom_graph_new();
  int64_t s[1] = {4};
  loom_reshape(g, cf32(g, 2, D23, X23), 1, s, "r");
  expect_build_err(g, "r", "cannot reshape [2,3] (6 elements) to [4] (4 elements)");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t s2[2] = {-1, -1};
  loom_reshape(g, cf32(g, 2, D23, X23), 2, s2, "two");
  expect_build_err(g, "two", "only one dimension");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t s3[2] = {4, -1};
  loom_reshape(g, cf32(g, 2, D23, X23), 2, s3, "nodiv");
  expect_build_err(g, "nodiv", "cannot be inferred");
  loom_graph_free(g);
}

Test(array, alias_ops_share_and_chain) {
  loom_graph *g = loom_graph_new();
  int64_t pd[2] = {2, 3};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, pd, "x");
  int64_t s[1] = {6};
  loom_output r = loom_reshape(g, x, 1, s, "r");
  loom_output e = loom_expand_dims(g, r, 0, "e");       /* [1,6] */
  int64_t ax[1] = {0};
  loom_output q = loom_squeeze(g, e, 1, ax, "q");       /* [6] */
  loom_output sg = loom_stop_gradient(g, q, "sg");
  int64_t s2[2] = {3, 2};
  loom_output back = loom_reshape(g, sg, 2, s2, "back");
  loom_tensor *xt = tu_f32(2, pd, X23);
  loom_session *ses = loom_session_new(g, NULL, NULL);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_session_run(ses, &x, &xt, 1, &back, &out, 1, NULL, 0, NULL), LOOM_OK);
  tu_expect_f32(out, 2, s2, X23, 0);
  loom_session_stats stats;
  loom_session_get_stats(ses, &stats);
  cr_assert_eq(stats.nodes_run, 0, "views ran %d kernels", stats.nodes_run); /* pure views: no kernel, no copy */
  loom_tensor_free(out);
  loom_session_free(ses);
  /* chaining reshape -> add */
  loom_output sum = loom_add(g, back, back, "sum");
  float want[6] = {2, 4, 6, 8, 10, 12};
  out = tu_run1(g, 1, &x, &xt, sum);
  tu_expect_f32(out, 2, s2, want, 0);
  loom_tensor_free(out);
  /* reshape_like */
  loom_output rl = loom_reshape_like(g, x, back, "rl");
  out = tu_run1(g, 1, &x, &xt, rl);
  tu_expect_f32(out, 2, s2, X23, 0);
  loom_tensor_free(out);
  loom_tensor_free(xt);
  loom_graph_free(g);
}

Test(array, expand_dims_and_squeeze) {
  loom_graph *g = loom_graph_new();
  loom_output x = cf32(g, 2, D23, X23);
  int64_t w0[3] = {1, 2, 3}, w1[3] = {2, 1, 3}, wl[3] = {2, 3, 1};
  check_f32(g, loom_expand_dims(g, x, 0, NULL), 3, w0, X23);
  check_f32(g, loom_expand_dims(g, x, 1, NULL), 3, w1, X23);
  check_f32(g, loom_expand_dims(g, x, -1, NULL), 3, wl, X23);
  loom_output sc = loom_const_f32(g, 3.0f, NULL);
  float three = 3.0f;
  int64_t one[1] = {1};
  check_f32(g, loom_expand_dims(g, sc, -1, NULL), 1, one, &three);
  check_f32(g, loom_squeeze(g, sc, 0, NULL, NULL), 0, NULL, &three);
  int64_t d[4] = {1, 2, 1, 3};
  loom_output y = cf32(g, 4, d, X23);
  check_f32(g, loom_squeeze(g, y, 0, NULL, NULL), 2, D23, X23);
  int64_t ax[1] = {-2}, w2[3] = {1, 2, 3};
  check_f32(g, loom_squeeze(g, y, 1, ax, NULL), 3, w2, X23);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t bad[1] = {1};
  loom_squeeze(g, cf32(g, 2, D23, X23), 1, bad, "sq");
  expect_build_err(g, "sq", "cannot squeeze dimension 1 of [2,3]: its size is 3");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t ud[2] = {-1, 1};
  loom_squeeze(g, loom_placeholder(g, LOOM_F32, 2, ud, "p"), 0, NULL, "sqa");
  expect_build_err(g, "sqa", "dimension 0 is unknown");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_expand_dims(g, cf32(g, 2, D23, X23), 3, "ed");
  expect_build_err(g, "ed", "axis 3 is out of range");
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- broadcast, transpose */

Test(array, broadcast_to_and_like) {
  loom_graph *g = loom_graph_new();
  float r3[3] = {1, 2, 3};
  int64_t d3[1] = {3};
  float want[6] = {1, 2, 3, 1, 2, 3};
  check_f32(g, loom_broadcast_to(g, cf32(g, 1, d3, r3), 2, D23, NULL), 2, D23, want);
  float c2[2] = {1, 2};
  int64_t d21[2] = {2, 1};
  float want2[6] = {1, 1, 1, 2, 2, 2};
  check_f32(g, loom_broadcast_like(g, cf32(g, 2, d21, c2), cf32(g, 2, D23, X23), NULL), 2, D23, want2);
  float five = 5;
  float w5[4] = {5, 5, 5, 5};
  int64_t d22[2] = {2, 2};
  check_f32(g, loom_broadcast_to(g, cf32(g, 0, NULL, &five), 2, d22, NULL), 2, d22, w5);
  /* [1,3,1] -> [2,3,4] vs a reference loop */
  int64_t din[3] = {1, 3, 1}, dout[3] = {2, 3, 4};
  float wantb[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) wantb[(i * 3 + j) * 4 + k] = r3[j];
  check_f32(g, loom_broadcast_to(g, cf32(g, 3, din, r3), 3, dout, NULL), 3, dout, wantb);
  /* same shape: a copy */
  check_f32(g, loom_broadcast_to(g, cf32(g, 2, D23, X23), 2, D23, NULL), 2, D23, X23);
  /* zero-size target */
  int64_t z[2] = {0, 3};
  loom_tensor *t = run(g, loom_broadcast_to(g, cf32(g, 1, d3, r3), 2, z, NULL));
  tu_expect_f32(t, 2, z, NULL, 0);
  loom_tensor_free(t);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t d2[1] = {2};
  loom_broadcast_to(g, cf32(g, 1, d2, c2), 2, D23, "bt");
  expect_build_err(g, "bt", "cannot broadcast [2] to [2,3]");
  loom_graph_free(g);

  /* unknown dims: checked again at run time */
  g = loom_graph_new();
  int64_t u2[2] = {-1, -1};
  loom_output px = loom_placeholder(g, LOOM_F32, 2, u2, "px");
  loom_output bl = loom_broadcast_like(g, px, cf32(g, 2, D23, X23), "bl");
  loom_tensor *ok = tu_f32(2, d21, c2);
  t = tu_run1(g, 1, &px, &ok, bl);
  tu_expect_f32(t, 2, D23, want2, 0);
  loom_tensor_free(t);
  loom_tensor *badt = tu_f32(2, d22, w5);
  expect_run_err(g, 1, &px, &badt, bl, "bl", "cannot broadcast [2,2] to [2,3]");
  loom_tensor_free(ok);
  loom_tensor_free(badt);
  loom_graph_free(g);
}

static void transpose_ref(int nd, const int64_t *dims, const int64_t *perm, const float *x, float *y) {
  int64_t st[8], od[8], n = 1;
  for (int i = nd - 1; i >= 0; i--) {
    st[i] = n;
    n *= dims[i];
  }
  for (int j = 0; j < nd; j++) od[j] = dims[perm[j]];
  for (int64_t o = 0; o < n; o++) {
    int64_t r = o, src = 0;
    for (int j = nd - 1; j >= 0; j--) {
      src += (r % od[j]) * st[perm[j]];
      r /= od[j];
    }
    y[o] = x[src];
  }
}

Test(array, transpose_values) {
  loom_graph *g = loom_graph_new();
  /* small 2-D */
  int64_t p10[2] = {1, 0}, d32[2] = {3, 2};
  float w[6] = {1, 4, 2, 5, 3, 6};
  check_f32(g, loom_transpose(g, cf32(g, 2, D23, X23), 2, p10, NULL), 2, d32, w);
  check_f32(g, loom_transpose(g, cf32(g, 2, D23, X23), 0, NULL, NULL), 2, d32, w); /* default: reversed */
  /* larger 2-D crossing tile edges, and 3-D perms, vs the reference */
  static float big[67 * 45 * 3], ref[67 * 45 * 3];
  for (int i = 0; i < 67 * 45 * 3; i++) big[i] = (float)i;
  int64_t db[2] = {67, 45}, dbt[2] = {45, 67};
  transpose_ref(2, db, p10, big, ref);
  check_f32(g, loom_transpose(g, cf32(g, 2, db, big), 2, p10, NULL), 2, dbt, ref);
  int64_t d3[3] = {67, 15, 9};
  int64_t perms[4][3] = {{2, 0, 1}, {0, 2, 1}, {1, 0, 2}, {2, 1, 0}};
  for (int k = 0; k < 4; k++) {
    int64_t od[3] = {d3[perms[k][0]], d3[perms[k][1]], d3[perms[k][2]]};
    transpose_ref(3, d3, perms[k], big, ref);
    check_f32(g, loom_transpose(g, cf32(g, 3, d3, big), 3, perms[k], NULL), 3, od, ref);
  }
  /* big enough to run in parallel: the tiled 2-D path and the row path */
  enum { TN = 2 * 300 * 400 }; /* >= 40 * 50 * 60 */
  static float huge[TN], href[TN];
  for (int i = 0; i < TN; i++) huge[i] = (float)i;
  int64_t dh[2] = {300, 400}, dht[2] = {400, 300};
  transpose_ref(2, dh, p10, huge, href);
  check_f32(g, loom_transpose(g, cf32(g, 2, dh, huge), 2, p10, NULL), 2, dht, href);
  int64_t dh3[3] = {40, 50, 60};
  int64_t hp[2][3] = {{2, 0, 1}, {1, 0, 2}};
  for (int k = 0; k < 2; k++) {
    int64_t od[3] = {dh3[hp[k][0]], dh3[hp[k][1]], dh3[hp[k][2]]};
    transpose_ref(3, dh3, hp[k], huge, href);
    check_f32(g, loom_transpose(g, cf32(g, 3, dh3, huge), 3, hp[k], NULL), 3, od, href);
  }
  /* and a big concat + split round trip along axis 1 */
  loom_output two[2] = {cf32(g, 2, dh, huge), cf32(g, 2, dh, huge + 300 * 400)};
  loom_output cat = loom_concat(g, 2, two, 1, NULL);
  loom_output halves[2];
  cr_assert_eq(loom_split(g, cat, 2, 1, halves, NULL), LOOM_OK);
  check_f32(g, halves[1], 2, dh, huge + 300 * 400);
  loom_tensor *ct = run(g, cat);
  const float *cp = loom_tensor_data_const(ct);
  for (int r = 0; r < 300; r++)
    for (int c = 0; c < 800; c++)
      cr_assert_eq(cp[r * 800 + c], c < 400 ? huge[r * 400 + c] : huge[300 * 400 + r * 400 + c - 400]);
  loom_tensor_free(ct);
  /* rank 0 */
  float v = 2.5f;
  check_f32(g, loom_transpose(g, loom_const_f32(g, v, NULL), 0, NULL, NULL), 0, NULL, &v);
  /* other dtypes */
  int64_t iv[6] = {1, 2, 3, 4, 5, 6}, iw[6] = {1, 4, 2, 5, 3, 6};
  loom_tensor *t = run(g, loom_transpose(g, ci64(g, 2, D23, iv), 2, p10, NULL));
  expect_i64(t, 2, d32, iw);
  loom_tensor_free(t);
  uint8_t bv[6] = {1, 0, 0, 1, 1, 0}, bw[6] = {1, 1, 0, 1, 0, 0};
  t = run(g, loom_transpose(g, loom_const_data(g, LOOM_BOOL, 2, D23, bv, NULL), 2, p10, NULL));
  expect_u8(t, LOOM_BOOL, 2, d32, bw);
  loom_tensor_free(t);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t dup[2] = {0, 0};
  loom_transpose(g, cf32(g, 2, D23, X23), 2, dup, "tp");
  expect_build_err(g, "tp", "perm [0,0] is not a permutation of [0,2)");
  loom_graph_free(g);
  g = loom_graph_new();
  int64_t oor[2] = {0, 2};
  loom_transpose(g, cf32(g, 2, D23, X23), 2, oor, "tp2");
  expect_build_err(g, "tp2", "is not a permutation");
  loom_graph_free(g);
  g = loom_graph_new();
  int64_t p3[3] = {0, 1, 2};
  loom_transpose(g, cf32(g, 2, D23, X23), 3, p3, "tp3");
  expect_build_err(g, "tp3", "has 3 entries but the input [2,3] has rank 2");
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- concat, split, slice, stack */

Test(array, concat_values_and_errors) {
  loom_graph *g = loom_graph_new();
  float b[2] = {7, 8};
  int64_t d21[2] = {2, 1}, d12[2] = {1, 2};
  loom_output in1[3] = {cf32(g, 2, D23, X23), cf32(g, 2, d21, b), cf32(g, 2, D23, X23)};
  int64_t w1d[2] = {2, 7};
  float w1[14] = {1, 2, 3, 7, 1, 2, 3, 4, 5, 6, 8, 4, 5, 6};
  check_f32(g, loom_concat(g, 3, in1, 1, NULL), 2, w1d, w1);
  check_f32(g, loom_concat(g, 3, in1, -1, NULL), 2, w1d, w1);
  float r[3] = {9, 9, 9};
  int64_t d13[2] = {1, 3};
  loom_output in0[2] = {cf32(g, 2, D23, X23), cf32(g, 2, d13, r)};
  int64_t w0d[2] = {3, 3};
  float w0[9] = {1, 2, 3, 4, 5, 6, 9, 9, 9};
  check_f32(g, loom_concat(g, 2, in0, 0, NULL), 2, w0d, w0);
  check_f32(g, loom_concat(g, 2, in0, -2, NULL), 2, w0d, w0);
  /* a zero-size piece */
  int64_t d03[2] = {0, 3};
  loom_output inz[2] = {loom_const_data(g, LOOM_F32, 2, d03, NULL, NULL), cf32(g, 2, D23, X23)};
  check_f32(g, loom_concat(g, 2, inz, 0, NULL), 2, D23, X23);
  /* int32 */
  int32_t iv[2] = {1, 2}, iw[4] = {1, 2, 1, 2};
  int64_t d2[1] = {2}, d4[1] = {4};
  loom_output ii[2] = {ci32(g, 1, d2, iv), ci32(g, 1, d2, iv)};
  loom_tensor *t = run(g, loom_concat(g, 2, ii, 0, NULL));
  expect_i32(t, 1, d4, iw);
  loom_tensor_free(t);
  (void)d12;
  loom_graph_free(g);

  g = loom_graph_new();
  loom_output bad[2] = {cf32(g, 2, D23, X23), cf32(g, 2, d21, b)};
  loom_concat(g, 2, bad, 0, "cat");
  expect_build_err(g, "cat", "input 1 has shape [2,1] but input 0 has [2,3]: dimension 1 differs");
  loom_graph_free(g);
  g = loom_graph_new();
  loom_output mix[2] = {cf32(g, 1, d2, b), ci32(g, 1, d2, iv)};
  loom_concat(g, 2, mix, 0, "catd");
  expect_build_err(g, "catd", "input 1 has dtype int32 but input 0 has float32");
  loom_graph_free(g);
  g = loom_graph_new();
  loom_output sc[2] = {loom_const_f32(g, 1, NULL), loom_const_f32(g, 2, NULL)};
  loom_concat(g, 2, sc, 0, "cats");
  expect_build_err(g, "cats", "cannot concatenate scalars");
  loom_graph_free(g);
  g = loom_graph_new();
  loom_output one[1] = {cf32(g, 2, D23, X23)};
  loom_concat(g, 1, one, 2, "cata");
  expect_build_err(g, "cata", "axis 2 is out of range for rank 2");
  loom_graph_free(g);
}

Test(array, split_and_split_v) {
  loom_graph *g = loom_graph_new();
  loom_output x = cf32(g, 2, D23, X23);
  loom_output o[3];
  cr_assert_eq(loom_split(g, x, 3, 1, o, "sp"), LOOM_OK);
  cr_assert_str_eq(loom_node_op_name(o[0].node), "Split");
  loom_tensor *t[3];
  run_n(g, 0, NULL, NULL, 3, o, t);
  int64_t d21[2] = {2, 1};
  float w0[2] = {1, 4}, w1[2] = {2, 5}, w2[2] = {3, 6};
  tu_expect_f32(t[0], 2, d21, w0, 0);
  tu_expect_f32(t[1], 2, d21, w1, 0);
  tu_expect_f32(t[2], 2, d21, w2, 0);
  for (int i = 0; i < 3; i++) loom_tensor_free(t[i]);
  loom_output h[2];
  cr_assert_eq(loom_split(g, x, 2, -2, h, NULL), LOOM_OK);
  run_n(g, 0, NULL, NULL, 2, h, t);
  int64_t d13[2] = {1, 3};
  tu_expect_f32(t[0], 2, d13, X23, 0);
  tu_expect_f32(t[1], 2, d13, X23 + 3, 0);
  loom_tensor_free(t[0]);
  loom_tensor_free(t[1]);
  /* split_v with an inferred size */
  int64_t sizes[2] = {-1, 2};
  cr_assert_eq(loom_split_v(g, x, 2, sizes, 1, h, NULL), LOOM_OK);
  run_n(g, 0, NULL, NULL, 2, h, t);
  float v1[4] = {2, 3, 5, 6};
  int64_t d22[2] = {2, 2};
  tu_expect_f32(t[0], 2, d21, w0, 0);
  tu_expect_f32(t[1], 2, d22, v1, 0);
  loom_tensor_free(t[0]);
  loom_tensor_free(t[1]);
  loom_graph_free(g);

  /* non-divisible at build time: code returned, outs are placeholders */
  g = loom_graph_new();
  loom_output y[2];
  cr_assert_eq(loom_split(g, cf32(g, 2, D23, X23), 2, 1, y, "sp2"), LOOM_INVALID_ARGUMENT);
  cr_assert(loom_output_valid(y[0]) && loom_output_valid(y[1]));
  expect_build_err(g, "sp2", "dimension 1 of [2,3] (3) is not divisible by num_split 2");
  loom_graph_free(g);

  /* non-divisible at run time */
  g = loom_graph_new();
  int64_t pd[1] = {-1};
  loom_output p = loom_placeholder(g, LOOM_F32, 1, pd, "p");
  cr_assert_eq(loom_split(g, p, 2, 0, y, "sp3"), LOOM_OK);
  int64_t d3[1] = {3};
  loom_tensor *pt = tu_f32(1, d3, X23);
  expect_run_err(g, 1, &p, &pt, y[0], "sp3", "not divisible by num_split 2");
  loom_tensor_free(pt);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t bads[2] = {1, 1};
  loom_split_v(g, cf32(g, 2, D23, X23), 2, bads, 1, y, "spv");
  expect_build_err(g, "spv", "do not add up");
  loom_graph_free(g);
}

Test(array, slice_values) {
  loom_graph *g = loom_graph_new();
  loom_output x = cf32(g, 2, D23, X23);
  int64_t b[2] = {0, 1}, s[2] = {2, -1}, wd[2] = {2, 2};
  float w[4] = {2, 3, 5, 6};
  check_f32(g, loom_slice(g, x, b, s, NULL), 2, wd, w);
  int64_t b2[2] = {1, 0}, s2[2] = {1, 2}, wd2[2] = {1, 2};
  float w2[2] = {4, 5};
  check_f32(g, loom_slice(g, x, b2, s2, NULL), 2, wd2, w2);
  int64_t b3[2] = {1, 3}, s3[2] = {1, 0}, wd3[2] = {1, 0};
  loom_tensor *t = run(g, loom_slice(g, x, b3, s3, NULL));
  tu_expect_f32(t, 2, wd3, NULL, 0);
  loom_tensor_free(t);
  /* 3-D vs reference */
  float big[4 * 5 * 6], ref[2 * 3 * 4];
  for (int i = 0; i < 120; i++) big[i] = (float)i;
  int64_t d3[3] = {4, 5, 6}, bb[3] = {1, 2, 1}, ss[3] = {2, 3, 4};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) ref[(i * 3 + j) * 4 + k] = big[((i + 1) * 5 + j + 2) * 6 + k + 1];
  check_f32(g, loom_slice(g, cf32(g, 3, d3, big), bb, ss, NULL), 3, ss, ref);
  float v = 4;
  check_f32(g, loom_slice(g, loom_const_f32(g, v, NULL), NULL, NULL, NULL), 0, NULL, &v);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t eb[2] = {1, 2}, es[2] = {1, 2};
  loom_slice(g, cf32(g, 2, D23, X23), eb, es, "sl");
  expect_build_err(g, "sl", "out of bounds of [2,3] at dimension 1");
  loom_graph_free(g);
}

Test(array, stack_and_unstack) {
  loom_graph *g = loom_graph_new();
  float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
  int64_t d3[1] = {3};
  loom_output ab[2] = {cf32(g, 1, d3, a), cf32(g, 1, d3, b)};
  check_f32(g, loom_stack(g, 2, ab, 0, NULL), 2, D23, X23);
  int64_t d32[2] = {3, 2};
  float w1[6] = {1, 4, 2, 5, 3, 6};
  check_f32(g, loom_stack(g, 2, ab, 1, NULL), 2, d32, w1);
  check_f32(g, loom_stack(g, 2, ab, -1, NULL), 2, d32, w1);
  loom_output sc[3] = {loom_const_f32(g, 1, NULL), loom_const_f32(g, 2, NULL), loom_const_f32(g, 3, NULL)};
  check_f32(g, loom_stack(g, 3, sc, 0, NULL), 1, d3, a);
  /* unstack along 1 and -2 */
  loom_output o[3];
  cr_assert_eq(loom_unstack(g, cf32(g, 2, D23, X23), 3, 1, o, NULL), LOOM_OK);
  loom_tensor *t[3];
  run_n(g, 0, NULL, NULL, 3, o, t);
  int64_t d2[1] = {2};
  float c0[2] = {1, 4}, c2[2] = {3, 6};
  tu_expect_f32(t[0], 1, d2, c0, 0);
  tu_expect_f32(t[2], 1, d2, c2, 0);
  for (int i = 0; i < 3; i++) loom_tensor_free(t[i]);
  cr_assert_eq(loom_unstack(g, cf32(g, 2, D23, X23), 2, -2, o, NULL), LOOM_OK);
  run_n(g, 0, NULL, NULL, 2, o, t);
  tu_expect_f32(t[0], 1, d3, a, 0);
  tu_expect_f32(t[1], 1, d3, b, 0);
  loom_tensor_free(t[0]);
  loom_tensor_free(t[1]);
  /* unstack [3] into scalars */
  cr_assert_eq(loom_unstack(g, cf32(g, 1, d3, a), 3, 0, o, NULL), LOOM_OK);
  run_n(g, 0, NULL, NULL, 3, o, t);
  tu_expect_f32(t[1], 0, NULL, a + 1, 0);
  for (int i = 0; i < 3; i++) loom_tensor_free(t[i]);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_output mm[2] = {cf32(g, 1, d3, a), cf32(g, 2, D23, X23)};
  loom_stack(g, 2, mm, 0, "st");
  expect_build_err(g, "st", "input 1 has shape [2,3] but input 0 has [3]");
  loom_graph_free(g);
  g = loom_graph_new();
  cr_assert_eq(loom_unstack(g, cf32(g, 2, D23, X23), 2, 1, o, "us"), LOOM_INVALID_ARGUMENT);
  expect_build_err(g, "us", "cannot unstack dimension 1 of [2,3] into 2 outputs");
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- tile, pad */

Test(array, tile_and_pad) {
  loom_graph *g = loom_graph_new();
  loom_output x = cf32(g, 2, D23, X23);
  int64_t m[2] = {2, 2}, wd[2] = {4, 6};
  float w[24];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) w[i * 6 + j] = X23[(i % 2) * 3 + j % 3];
  check_f32(g, loom_tile(g, x, m, NULL), 2, wd, w);
  int64_t m2[2] = {1, 0}, wd2[2] = {2, 0};
  loom_tensor *t = run(g, loom_tile(g, x, m2, NULL));
  tu_expect_f32(t, 2, wd2, NULL, 0);
  loom_tensor_free(t);
  float a2[2] = {1, 2};
  int64_t d2[1] = {2}, m3[1] = {3}, d6[1] = {6};
  float w3[6] = {1, 2, 1, 2, 1, 2};
  check_f32(g, loom_tile(g, cf32(g, 1, d2, a2), m3, NULL), 1, d6, w3);
  /* pad */
  int64_t bf[2] = {1, 0}, af[2] = {0, 2}, pd[2] = {3, 5};
  float pw[15] = {9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9};
  check_f32(g, loom_pad(g, x, bf, af, 9.0, NULL), 2, pd, pw);
  int32_t iv[2] = {5, 6};
  int64_t b1[1] = {2}, a1[1] = {1}, d5[1] = {5};
  int32_t iw[5] = {-1, -1, 5, 6, -1};
  t = run(g, loom_pad(g, ci32(g, 1, d2, iv), b1, a1, -1.0, NULL));
  expect_i32(t, 1, d5, iw);
  loom_tensor_free(t);
  int64_t z[2] = {0, 0};
  check_f32(g, loom_pad(g, x, z, z, 1.0, NULL), 2, D23, X23);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t neg[2] = {-1, 0};
  loom_pad(g, cf32(g, 2, D23, X23), neg, z, 0, "pad");
  expect_build_err(g, "pad", "must be >= 0");
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- gather, scatter */

Test(array, gather_axes_and_index_ranks) {
  loom_graph *g = loom_graph_new();
  float tab[12] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
  int64_t dt[2] = {4, 3};
  loom_output T = cf32(g, 2, dt, tab);
  /* axis 0, the embedding path; i32 and i64 */
  int32_t ix[3] = {3, 0, 3};
  int64_t d3[1] = {3}, w0d[2] = {3, 3};
  float w0[9] = {30, 31, 32, 0, 1, 2, 30, 31, 32};
  check_f32(g, loom_gather(g, T, ci32(g, 1, d3, ix), 0, NULL), 2, w0d, w0);
  int64_t ix64[3] = {3, 0, 3};
  check_f32(g, loom_gather(g, T, ci64(g, 1, d3, ix64), 0, NULL), 2, w0d, w0);
  /* axis 1 (and -1) */
  int32_t ic[2] = {2, 0};
  int64_t d2[1] = {2}, w1d[2] = {4, 2};
  float w1[8] = {2, 0, 12, 10, 22, 20, 32, 30};
  check_f32(g, loom_gather(g, T, ci32(g, 1, d2, ic), 1, NULL), 2, w1d, w1);
  check_f32(g, loom_gather(g, T, ci32(g, 1, d2, ic), -1, NULL), 2, w1d, w1);
  /* 2-D indices on axis 0: [2,2] + [3] */
  int32_t i2[4] = {1, 2, 0, 1};
  int64_t d22[2] = {2, 2}, w2d[3] = {2, 2, 3};
  float w2[12] = {10, 11, 12, 20, 21, 22, 0, 1, 2, 10, 11, 12};
  check_f32(g, loom_gather(g, T, ci32(g, 2, d22, i2), 0, NULL), 3, w2d, w2);
  /* 2-D indices on axis 1: [4] + [2,2] */
  int64_t w3d[3] = {4, 2, 2};
  float w3[16];
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 4; k++) w3[r * 4 + k] = tab[r * 3 + i2[k]];
  check_f32(g, loom_gather(g, T, ci32(g, 2, d22, i2), 1, NULL), 3, w3d, w3);
  /* scalar index drops the axis */
  loom_output s = loom_gather(g, T, loom_const_i32(g, 2, NULL), 0, NULL);
  check_f32(g, s, 1, d3, tab + 6);
  /* zero indices */
  int64_t d0[1] = {0}, wz[2] = {0, 3};
  loom_tensor *t = run(g, loom_gather(g, T, loom_const_data(g, LOOM_I32, 1, d0, NULL, NULL), 0, NULL));
  tu_expect_f32(t, 2, wz, NULL, 0);
  loom_tensor_free(t);
  /* a 3-D middle axis vs reference, big enough to go parallel */
  enum { A = 8, B = 50, C = 97, K = 40 };
  static float p3[A * B * C], ref[A * K * C];
  static int32_t ik[K];
  for (int i = 0; i < A * B * C; i++) p3[i] = (float)i;
  for (int k = 0; k < K; k++) ik[k] = (k * 7) % B;
  for (int a = 0; a < A; a++)
    for (int k = 0; k < K; k++)
      for (int c = 0; c < C; c++) ref[(a * K + k) * C + c] = p3[(a * B + ik[k]) * C + c];
  int64_t dp[3] = {A, B, C}, dk[1] = {K}, dr[3] = {A, K, C};
  check_f32(g, loom_gather(g, cf32(g, 3, dp, p3), ci32(g, 1, dk, ik), 1, NULL), 3, dr, ref);
  /* u8 params */
  uint8_t u[4] = {9, 8, 7, 6};
  int64_t d4[1] = {4};
  uint8_t uw[2] = {7, 9};
  int32_t ui[2] = {2, 0};
  t = run(g, loom_gather(g, loom_const_data(g, LOOM_U8, 1, d4, u, NULL), ci32(g, 1, d2, ui), 0, NULL));
  expect_u8(t, LOOM_U8, 1, d2, uw);
  loom_tensor_free(t);
  loom_graph_free(g);
}

Test(array, gather_errors) {
  /* out-of-range index at run time names the index, its value and the range */
  loom_graph *g = loom_graph_new();
  float tab[6] = {1, 2, 3, 4, 5, 6};
  int64_t d3[1] = {3}, pd[2] = {-1, 2};
  loom_output T = cf32(g, 2, D23, tab); /* [2,3] */
  loom_output ip = loom_placeholder(g, LOOM_I32, 2, pd, "ids");
  loom_output gth = loom_gather(g, T, ip, 0, "emb");
  int32_t bad[4] = {0, 1, 1, 5};
  int64_t bd[2] = {2, 2};
  loom_tensor *bt = loom_tensor_from_data(LOOM_I32, 2, bd, bad, NULL);
  expect_run_err(g, 1, &ip, &bt, gth, "emb", "indices[1,1] = 5 is not in [0, 2)");
  int32_t neg[4] = {0, -1, 1, 1};
  loom_tensor *nt = loom_tensor_from_data(LOOM_I32, 2, bd, neg, NULL);
  expect_run_err(g, 1, &ip, &nt, gth, "emb", "indices[0,1] = -1 is not in [0, 2)");
  /* axis 1 range is [0,3) */
  loom_output g1 = loom_gather(g, T, ip, 1, "g1");
  expect_run_err(g, 1, &ip, &bt, g1, "g1", "= 5 is not in [0, 3)");
  loom_tensor_free(bt);
  loom_tensor_free(nt);
  (void)d3;
  loom_graph_free(g);

  g = loom_graph_new();
  loom_gather(g, cf32(g, 2, D23, tab), loom_const_f32(g, 1, NULL), 0, "gf");
  expect_build_err(g, "gf", "indices must be int32 or int64, got float32");
  loom_graph_free(g);
  g = loom_graph_new();
  loom_gather(g, cf32(g, 2, D23, tab), loom_const_i32(g, 1, NULL), 2, "ga");
  expect_build_err(g, "ga", "axis 2 is out of range");
  loom_graph_free(g);
}

Test(array, scatter_add_and_update) {
  loom_graph *g = loom_graph_new();
  float base[6] = {1, 1, 1, 2, 2, 2};
  int64_t d32[2] = {3, 2};
  float upd[6] = {10, 20, 30, 40, 50, 60};
  int32_t idx[3] = {2, 0, 2};
  int64_t d3[1] = {3};
  loom_output T = cf32(g, 2, d32, base), I = ci32(g, 1, d3, idx), U = cf32(g, 2, d32, upd);
  float wa[6] = {31, 41, 1, 2, 62, 82};
  check_f32(g, loom_scatter_add(g, T, I, U, NULL), 2, d32, wa);
  float wu[6] = {30, 40, 1, 2, 50, 60}; /* duplicates: the last wins */
  check_f32(g, loom_scatter_update(g, T, I, U, NULL), 2, d32, wu);
  /* int64 tensor, [k,1] indices */
  int64_t tb[3] = {1, 2, 3}, ub[2] = {5, 7}, iv[2] = {1, 1}, wi[3] = {1, 14, 3};
  int64_t d21[2] = {2, 1}, d2[1] = {2};
  loom_tensor *t = run(g, loom_scatter_add(g, ci64(g, 1, d3, tb), ci64(g, 2, d21, iv), ci64(g, 1, d2, ub), NULL));
  expect_i64(t, 1, d3, wi);
  loom_tensor_free(t);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t pd[1] = {-1};
  loom_output ip = loom_placeholder(g, LOOM_I32, 1, pd, "ix");
  loom_output up = loom_placeholder(g, LOOM_F32, 2, (int64_t[]){-1, 2}, "up");
  loom_output sa = loom_scatter_add(g, cf32(g, 2, d32, base), ip, up, "sa");
  int32_t bi[1] = {3};
  int64_t d1[1] = {1}, d12[2] = {1, 2};
  loom_tensor *it = loom_tensor_from_data(LOOM_I32, 1, d1, bi, NULL);
  loom_tensor *ut = tu_f32(2, d12, upd);
  loom_output feeds[2] = {ip, up};
  loom_tensor *vals[2] = {it, ut};
  expect_run_err(g, 2, feeds, vals, sa, "sa", "indices[0] = 3 is not in [0, 3)");
  loom_tensor_free(it);
  loom_tensor_free(ut);
  loom_graph_free(g);

  g = loom_graph_new();
  uint8_t bb[3] = {1, 0, 1};
  loom_output bt = loom_const_data(g, LOOM_BOOL, 1, d3, bb, NULL);
  loom_scatter_add(g, bt, ci32(g, 1, d3, idx), bt, "sab");
  expect_build_err(g, "sab", "input 0 has unsupported dtype bool");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_scatter_update(g, cf32(g, 2, d32, base), ci32(g, 1, d3, idx), cf32(g, 2, D23, upd), "su");
  expect_build_err(g, "su", "updates [2,3] do not match indices [3] and tensor [3,2]");
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- segments, one_hot */

Test(array, unsorted_segments) {
  loom_graph *g = loom_graph_new();
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t d42[2] = {4, 2}, d4[1] = {4};
  int32_t ids[4] = {0, 2, 0, 2}; /* segment 1 and 3 empty */
  loom_output D = cf32(g, 2, d42, data), I = ci32(g, 1, d4, ids);
  float ws[8] = {6, 8, 0, 0, 10, 12, 0, 0};
  check_f32(g, loom_unsorted_segment_sum(g, D, I, 4, NULL), 2, d42, ws);
  float wm[8] = {3, 4, 0, 0, 5, 6, 0, 0};
  check_f32(g, loom_unsorted_segment_mean(g, D, I, 4, NULL), 2, d42, wm);
  float r2 = sqrtf(2.0f);
  float wq[8] = {6 / r2, 8 / r2, 0, 0, 10 / r2, 12 / r2, 0, 0};
  check_f32(g, loom_unsorted_segment_sqrt_n(g, D, I, 4, NULL), 2, d42, wq);
  /* 1-D data, int64 ids, one row per segment */
  int64_t ids64[4] = {1, 1, 1, 0};
  int64_t d2[1] = {2};
  float w1[2] = {4, 2};
  check_f32(g, loom_unsorted_segment_mean(g, cf32(g, 1, d4, data), ci64(g, 1, d4, ids64), 2, NULL), 1, d2, w1);
  /* zero rows: all segments empty */
  int64_t d0[1] = {0}, d02[2] = {0, 2}, w3d[2] = {3, 2};
  float zero6[6] = {0};
  check_f32(g,
            loom_unsorted_segment_mean(g, loom_const_data(g, LOOM_F32, 2, d02, NULL, NULL),
                                       loom_const_data(g, LOOM_I32, 1, d0, NULL, NULL), 3, NULL),
            2, w3d, zero6);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t pd[1] = {4};
  loom_output ip = loom_placeholder(g, LOOM_I32, 1, pd, "seg");
  loom_output s = loom_unsorted_segment_sum(g, cf32(g, 2, d42, data), ip, 3, "ss");
  int32_t bad[4] = {0, 1, 3, 0};
  loom_tensor *bt = loom_tensor_from_data(LOOM_I32, 1, d4, bad, NULL);
  expect_run_err(g, 1, &ip, &bt, s, "ss", "segment_ids[2] = 3 is not in [0, 3)");
  int32_t neg[4] = {0, -2, 1, 0};
  loom_tensor *nt = loom_tensor_from_data(LOOM_I32, 1, d4, neg, NULL);
  expect_run_err(g, 1, &ip, &nt, s, "ss", "segment_ids[1] = -2 is not in [0, 3)");
  loom_tensor_free(bt);
  loom_tensor_free(nt);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t d3[1] = {3};
  loom_unsorted_segment_sum(g, cf32(g, 2, d42, data), ci32(g, 1, d3, ids), 2, "sb");
  expect_build_err(g, "sb", "segment_ids [3] must be a vector as long as the first dimension of data [4,2]");
  loom_graph_free(g);
}

Test(array, one_hot_values) {
  loom_graph *g = loom_graph_new();
  int32_t ix[3] = {0, 2, 5}; /* 5 is out of range: an all-off row */
  int64_t d3[1] = {3}, w1d[2] = {3, 3};
  float w1[9] = {1, 0, 0, 0, 0, 1, 0, 0, 0};
  check_f32(g, loom_one_hot(g, ci32(g, 1, d3, ix), 3, 1.0, 0.0, -1, LOOM_DTYPE_INVALID, NULL), 2, w1d, w1);
  int32_t ixn[3] = {-1, 1, 0};
  float w2[9] = {-1, -1, -1, -1, 5, -1, 5, -1, -1};
  check_f32(g, loom_one_hot(g, ci32(g, 1, d3, ixn), 3, 5.0, -1.0, -1, LOOM_F32, NULL), 2, w1d, w2);
  /* axis 0: [depth, n] */
  int64_t ix64[2] = {1, 0}, d2[1] = {2}, w3d[2] = {3, 2};
  int32_t w3[6] = {0, 1, 1, 0, 0, 0};
  loom_tensor *t = run(g, loom_one_hot(g, ci64(g, 1, d2, ix64), 3, 1, 0, 0, LOOM_I32, NULL));
  expect_i32(t, 2, w3d, w3);
  loom_tensor_free(t);
  /* 2-D indices, middle axis: [2, depth, 2] */
  int32_t i22[4] = {0, 1, 1, 1};
  int64_t d22[2] = {2, 2}, w4d[3] = {2, 2, 2};
  float w4[8] = {1, 0, 0, 1, 0, 0, 1, 1};
  check_f32(g, loom_one_hot(g, ci32(g, 2, d22, i22), 2, 1, 0, 1, LOOM_F32, NULL), 3, w4d, w4);
  /* scalar index, bool output */
  uint8_t wb[4] = {0, 0, 1, 0};
  int64_t d4[1] = {4};
  t = run(g, loom_one_hot(g, loom_const_i32(g, 2, NULL), 4, 1, 0, -1, LOOM_BOOL, NULL));
  expect_u8(t, LOOM_BOOL, 1, d4, wb);
  loom_tensor_free(t);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_one_hot(g, loom_const_f32(g, 1, NULL), 3, 1, 0, -1, LOOM_F32, "oh");
  expect_build_err(g, "oh", "indices must be int32, int64 or uint8, got float32");
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- cast, fills, shape, range */

Test(array, cast_values) {
  loom_graph *g = loom_graph_new();
  float f[6] = {-1.7f, 2.9f, 0.0f, -0.2f, 3e9f, NAN};
  int64_t d6[1] = {6};
  loom_output F = cf32(g, 1, d6, f);
  int32_t wi[6] = {-1, 2, 0, 0, INT32_MAX, 0};
  loom_tensor *t = run(g, loom_cast(g, F, LOOM_I32, NULL));
  expect_i32(t, 1, d6, wi);
  loom_tensor_free(t);
  int64_t wl[6] = {-1, 2, 0, 0, 3000000000LL, 0};
  t = run(g, loom_cast(g, F, LOOM_I64, NULL));
  expect_i64(t, 1, d6, wl);
  loom_tensor_free(t);
  uint8_t wb[6] = {1, 1, 0, 1, 1, 1};
  t = run(g, loom_cast(g, F, LOOM_BOOL, NULL));
  expect_u8(t, LOOM_BOOL, 1, d6, wb);
  loom_tensor_free(t);
  uint8_t wu[6] = {0, 2, 0, 0, 255, 0};
  t = run(g, loom_cast(g, F, LOOM_U8, NULL));
  expect_u8(t, LOOM_U8, 1, d6, wu);
  loom_tensor_free(t);
  /* bool -> f32, i64 -> f64, i32 -> i64, i32 -> bool, u8 -> f32 */
  uint8_t b[3] = {1, 0, 1};
  int64_t d3[1] = {3};
  float wbf[3] = {1, 0, 1};
  check_f32(g, loom_cast(g, loom_const_data(g, LOOM_BOOL, 1, d3, b, NULL), LOOM_F32, NULL), 1, d3, wbf);
  int64_t l[3] = {-5, 1LL << 40, 7};
  t = run(g, loom_cast(g, ci64(g, 1, d3, l), LOOM_F64, NULL));
  expect_shape(t, LOOM_F64, 1, d3);
  const double *dp = loom_tensor_data_const(t);
  cr_assert(dp[0] == -5.0 && dp[1] == 1099511627776.0 && dp[2] == 7.0);
  loom_tensor_free(t);
  int32_t iv[3] = {-3, 0, 9};
  int64_t w64[3] = {-3, 0, 9};
  t = run(g, loom_cast(g, ci32(g, 1, d3, iv), LOOM_I64, NULL));
  expect_i64(t, 1, d3, w64);
  loom_tensor_free(t);
  uint8_t wib[3] = {1, 0, 1};
  t = run(g, loom_cast(g, ci32(g, 1, d3, iv), LOOM_BOOL, NULL));
  expect_u8(t, LOOM_BOOL, 1, d3, wib);
  loom_tensor_free(t);
  /* same dtype and a scalar */
  float s = 1.5f;
  check_f32(g, loom_cast(g, loom_const_f32(g, s, NULL), LOOM_F32, NULL), 0, NULL, &s);
  double half = -2.5;
  t = run(g, loom_cast(g, loom_const_data(g, LOOM_F64, 0, NULL, &half, NULL), LOOM_I32, NULL));
  int32_t m2 = -2;
  expect_i32(t, 0, NULL, &m2);
  loom_tensor_free(t);
  /* big enough to go parallel */
  enum { N = 100000 };
  static float wantf[N];
  static int32_t bi[N];
  for (int i = 0; i < N; i++) {
    bi[i] = i - N / 2;
    wantf[i] = (float)(i - N / 2);
  }
  int64_t dn[1] = {N};
  check_f32(g, loom_cast(g, ci32(g, 1, dn, bi), LOOM_F32, NULL), 1, dn, wantf);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_cast(g, cf32(g, 1, d3, wbf), LOOM_STRING, "cs");
  expect_build_err(g, "cs", "unsupported target dtype string");
  loom_graph_free(g);
}

Test(array, fill_zeros_ones_shape) {
  loom_graph *g = loom_graph_new();
  float w[6] = {2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f};
  check_f32(g, loom_fill(g, 2, D23, loom_const_f32(g, 2.5f, NULL), NULL), 2, D23, w);
  int32_t wi[3] = {7, 7, 7};
  int64_t d3[1] = {3};
  loom_tensor *t = run(g, loom_fill(g, 1, d3, loom_const_i32(g, 7, NULL), NULL));
  expect_i32(t, 1, d3, wi);
  loom_tensor_free(t);
  float s = -1;
  check_f32(g, loom_fill(g, 0, NULL, loom_const_f32(g, s, NULL), NULL), 0, NULL, &s);
  int64_t z[2] = {0, 4};
  t = run(g, loom_fill(g, 2, z, loom_const_f32(g, 1, NULL), NULL));
  tu_expect_f32(t, 2, z, NULL, 0);
  loom_tensor_free(t);
  loom_output x = cf32(g, 2, D23, X23);
  float zero[6] = {0}, one[6] = {1, 1, 1, 1, 1, 1};
  check_f32(g, loom_zeros_like(g, x, NULL), 2, D23, zero);
  check_f32(g, loom_ones_like(g, x, NULL), 2, D23, one);
  int64_t i64v[3] = {4, 5, 6}, i64w[3] = {1, 1, 1};
  t = run(g, loom_ones_like(g, ci64(g, 1, d3, i64v), NULL));
  expect_i64(t, 1, d3, i64w);
  loom_tensor_free(t);
  uint8_t bw[3] = {1, 1, 1};
  t = run(g, loom_ones_like(g, loom_const_data(g, LOOM_BOOL, 1, d3, bw, NULL), NULL));
  expect_u8(t, LOOM_BOOL, 1, d3, bw);
  loom_tensor_free(t);
  /* shape: i32 default, i64, a scalar, a fed unknown dim */
  int64_t d2[1] = {2}, d0[1] = {0};
  int32_t ws[2] = {2, 3};
  t = run(g, loom_shape(g, x, LOOM_DTYPE_INVALID, NULL));
  expect_i32(t, 1, d2, ws);
  loom_tensor_free(t);
  int64_t wl[2] = {2, 3};
  t = run(g, loom_shape(g, x, LOOM_I64, NULL));
  expect_i64(t, 1, d2, wl);
  loom_tensor_free(t);
  t = run(g, loom_shape(g, loom_const_f32(g, 1, NULL), LOOM_I32, NULL));
  expect_i32(t, 1, d0, NULL);
  loom_tensor_free(t);
  int64_t pd[2] = {-1, 3};
  loom_output p = loom_placeholder(g, LOOM_F32, 2, pd, "p");
  loom_output sh = loom_shape(g, p, LOOM_I32, NULL);
  int64_t fd[2] = {5, 3};
  loom_tensor *ft = loom_tensor_new(LOOM_F32, 2, fd, NULL);
  t = tu_run1(g, 1, &p, &ft, sh);
  int32_t wf[2] = {5, 3};
  expect_i32(t, 1, d2, wf);
  loom_tensor_free(t);
  loom_tensor_free(ft);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_fill(g, 1, d3, cf32(g, 1, d3, w), "fl");
  expect_build_err(g, "fl", "value must be a scalar, got [3]");
  loom_graph_free(g);
  g = loom_graph_new();
  loom_shape(g, cf32(g, 1, d3, w), LOOM_F32, "sh");
  expect_build_err(g, "sh", "output dtype must be int32 or int64");
  loom_graph_free(g);
}

Test(array, range_values) {
  loom_graph *g = loom_graph_new();
  int64_t d4[1] = {4};
  float w1[4] = {0, 0.5f, 1.0f, 1.5f};
  check_f32(g, loom_range(g, 0, 2, 0.5, LOOM_DTYPE_INVALID, NULL), 1, d4, w1);
  int64_t d3[1] = {3};
  float w2[3] = {0, 0.75f, 1.5f}; /* ceil(2/0.75) = 3 */
  check_f32(g, loom_range(g, 0, 2, 0.75, LOOM_F32, NULL), 1, d3, w2);
  int32_t wi[3] = {10, 7, 4};
  loom_tensor *t = run(g, loom_range(g, 10, 2, -3, LOOM_I32, NULL));
  expect_i32(t, 1, d3, wi);
  loom_tensor_free(t);
  int64_t wl[4] = {-2, -1, 0, 1};
  t = run(g, loom_range(g, -2, 2, 1, LOOM_I64, NULL));
  expect_i64(t, 1, d4, wl);
  loom_tensor_free(t);
  int64_t d0[1] = {0};
  t = run(g, loom_range(g, 3, 3, 1, LOOM_F32, NULL));
  tu_expect_f32(t, 1, d0, NULL, 0);
  loom_tensor_free(t);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_range(g, 0, 5, 0, LOOM_F32, "rg");
  expect_build_err(g, "rg", "delta must not be 0");
  loom_graph_free(g);
  g = loom_graph_new();
  loom_range(g, 5, 0, 1, LOOM_I32, "rg2");
  expect_build_err(g, "rg2", "requires start <= limit when delta > 0");
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- top_k */

Test(array, top_k_values) {
  loom_graph *g = loom_graph_new();
  float x[10] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  int64_t d25[2] = {2, 5};
  loom_output X = cf32(g, 2, d25, x);
  loom_output v, ix;
  cr_assert_eq(loom_top_k(g, X, 3, &v, &ix, "tk"), LOOM_OK);
  loom_output f[2] = {v, ix};
  loom_tensor *t[2];
  run_n(g, 0, NULL, NULL, 2, f, t);
  int64_t d23[2] = {2, 3};
  float wv[6] = {5, 4, 3, 9, 6, 5};
  int32_t wi[6] = {4, 2, 0, 0, 2, 3};
  tu_expect_f32(t[0], 2, d23, wv, 0);
  expect_i32(t[1], 2, d23, wi);
  loom_tensor_free(t[0]);
  loom_tensor_free(t[1]);
  /* ties keep the lower index first; k == n is a stable descending sort */
  float y[6] = {2, 7, 2, 7, 2, 1};
  int64_t d6[1] = {6};
  cr_assert_eq(loom_top_k(g, cf32(g, 1, d6, y), 6, &v, &ix, NULL), LOOM_OK);
  f[0] = v;
  f[1] = ix;
  run_n(g, 0, NULL, NULL, 2, f, t);
  float wy[6] = {7, 7, 2, 2, 2, 1};
  int32_t wyi[6] = {1, 3, 0, 2, 4, 5};
  tu_expect_f32(t[0], 1, d6, wy, 0);
  expect_i32(t[1], 1, d6, wyi);
  loom_tensor_free(t[0]);
  loom_tensor_free(t[1]);
  /* int32 input, k = 0 */
  int32_t iv[4] = {5, -1, 8, 5};
  int64_t d4[1] = {4}, d2[1] = {2}, dz[1] = {0};
  cr_assert_eq(loom_top_k(g, ci32(g, 1, d4, iv), 2, &v, &ix, NULL), LOOM_OK);
  f[0] = v;
  f[1] = ix;
  run_n(g, 0, NULL, NULL, 2, f, t);
  int32_t wiv[2] = {8, 5}, wii[2] = {2, 0};
  expect_i32(t[0], 1, d2, wiv);
  expect_i32(t[1], 1, d2, wii);
  loom_tensor_free(t[0]);
  loom_tensor_free(t[1]);
  cr_assert_eq(loom_top_k(g, ci32(g, 1, d4, iv), 0, &v, &ix, NULL), LOOM_OK);
  loom_tensor *e = run(g, ix);
  expect_i32(e, 1, dz, NULL);
  loom_tensor_free(e);
  /* many rows vs a reference (selection sort) */
  enum { R = 64, N = 300, K = 7 };
  static float big[R * N], refv[R * K];
  static int32_t refi[R * K];
  for (int i = 0; i < R * N; i++) big[i] = (float)((i * 7919) % 1000);
  for (int r = 0; r < R; r++) {
    char used[N] = {0};
    for (int k = 0; k < K; k++) {
      int best = -1;
      for (int j = 0; j < N; j++)
        if (!used[j] && (best < 0 || big[r * N + j] > big[r * N + best])) best = j;
      used[best] = 1;
      refv[r * K + k] = big[r * N + best];
      refi[r * K + k] = best;
    }
  }
  int64_t db[2] = {R, N}, dk[2] = {R, K};
  cr_assert_eq(loom_top_k(g, cf32(g, 2, db, big), K, &v, &ix, NULL), LOOM_OK);
  f[0] = v;
  f[1] = ix;
  run_n(g, 0, NULL, NULL, 2, f, t);
  tu_expect_f32(t[0], 2, dk, refv, 0);
  expect_i32(t[1], 2, dk, refi);
  loom_tensor_free(t[0]);
  loom_tensor_free(t[1]);
  loom_graph_free(g);

  g = loom_graph_new();
  cr_assert_eq(loom_top_k(g, cf32(g, 2, d25, x), 6, &v, &ix, "tk2"), LOOM_INVALID_ARGUMENT);
  cr_assert(loom_output_valid(v) && loom_output_valid(ix));
  expect_build_err(g, "tk2", "k (6) is larger than the last dimension 5 of [2,5]");
  loom_graph_free(g);
}

/* Gradients reach every input of a 40-way concat (inputs past the 32 bits of
 * an op's nondiff mask are differentiable for a variadic op). */
Test(array, concat_gradient_past_32_inputs) {
  loom_graph *g = loom_graph_new();
  loom_output in[40];
  for (int i = 0; i < 40; i++) in[i] = loom_const_f32(g, (float)i, NULL);
  int64_t one[1] = {1};
  for (int i = 0; i < 40; i++) in[i] = loom_reshape(g, in[i], 1, one, NULL);
  loom_output cat = loom_concat(g, 40, in, 0, NULL);
  loom_output w = loom_range(g, 1, 41, 1, LOOM_F32, NULL);
  loom_output loss = loom_reduce_sum(g, loom_mul(g, cat, w, NULL), -1, NULL, 0, NULL);
  loom_output dx[40];
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients(g, 1, &loss, NULL, 40, in, dx, st), LOOM_OK, "%s", loom_status_message(st));
  for (int i = 0; i < 40; i++) {
    cr_assert(dx[i].node, "input %d got no gradient", i);
    loom_tensor *t = tu_run1(g, 0, NULL, NULL, dx[i]);
    cr_assert_float_eq(((const float *)loom_tensor_data_const(t))[0], (float)(i + 1), 1e-6, "d/d in[%d]", i);
    loom_tensor_free(t);
  }
  loom_status_free(st);
  loom_graph_free(g);
}

/* ------------------------------------------------- absurd attribute values */
/* Builders called directly with INT64_MAX / INT64_MIN / huge attributes fail
 * with INVALID_ARGUMENT naming the node and the attribute, instead of
 * overflowing int64 in the shape function (undefined behaviour) or building
 * a shape whose element count overflows when a session plans it. The limit
 * is INT64_MAX / 16 elements (loom_tensor_new's). */

#define I64MAX INT64_MAX
#define I64MIN INT64_MIN
static const int64_t BIG = (int64_t)1 << 40; /* fine alone, too large squared */

Test(array_limits, reshape_huge_shape_and_huge_input) {
  loom_graph *g = loom_graph_new();
  int64_t s1[2] = {2, I64MAX};
  loom_reshape(g, cf32(g, 2, D23, X23), 2, s1, "r1");
  expect_build_err(g, "r1", "shape[1] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t s2[3] = {-1, I64MAX, 2};
  loom_reshape(g, cf32(g, 2, D23, X23), 3, s2, "r2");
  expect_build_err(g, "r2", "shape[1] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t unk[1] = {-1}, s3[2] = {BIG, BIG};
  loom_reshape(g, loom_placeholder(g, LOOM_F32, 1, unk, "x"), 2, s3, "r3");
  expect_build_err(g, "r3", "shape[1] = 1099511627776 is too large");
  loom_graph_free(g);

  /* the input's own element count is past the limit */
  g = loom_graph_new();
  int64_t huge[2] = {BIG, BIG}, flat[1] = {-1};
  loom_reshape(g, loom_placeholder(g, LOOM_F32, 2, huge, "x"), 1, flat, "r4");
  expect_build_err(g, "r4", "input [1099511627776,1099511627776] has more than 576460752303423487 elements");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_reshape_like(g, loom_placeholder(g, LOOM_F32, 2, huge, "x"), cf32(g, 2, D23, X23), "r5");
  expect_build_err(g, "r5", "input 0 [1099511627776,1099511627776] has more than");
  loom_graph_free(g);
}

Test(array_limits, broadcast_to_and_fill_huge_dims) {
  loom_graph *g = loom_graph_new();
  int64_t t1[2] = {I64MAX, 2};
  loom_broadcast_to(g, loom_const_f32(g, 1, NULL), 2, t1, "b1");
  expect_build_err(g, "b1", "shape[0] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t d1[2] = {BIG, BIG};
  loom_fill(g, 2, d1, loom_const_f32(g, 1, NULL), "f1");
  expect_build_err(g, "f1", "dims[1] = 1099511627776 is too large");
  loom_graph_free(g);

  /* a zero dim does not excuse the others */
  g = loom_graph_new();
  int64_t d2[3] = {I64MAX, I64MAX, 0};
  loom_fill(g, 3, d2, loom_const_f32(g, 1, NULL), "f2");
  expect_build_err(g, "f2", "dims[0] = 9223372036854775807 is too large");
  loom_graph_free(g);

  /* right at the limit is fine to build */
  g = loom_graph_new();
  int64_t d3[2] = {INT64_MAX / 16, 0};
  loom_fill(g, 2, d3, loom_const_f32(g, 1, NULL), "f3");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  loom_graph_free(g);
}

Test(array_limits, concat_of_huge_dims) {
  loom_graph *g = loom_graph_new();
  int64_t a[1] = {I64MAX}, b[1] = {1};
  loom_output in[2] = {loom_placeholder(g, LOOM_F32, 1, a, "a"), loom_placeholder(g, LOOM_F32, 1, b, "b")};
  loom_concat(g, 2, in, 0, "c1");
  expect_build_err(g, "c1", "input 1 [1]: the concatenated dimension 0 would be larger than 576460752303423487");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t h[2] = {(int64_t)1 << 62, 1};
  in[0] = loom_placeholder(g, LOOM_F32, 2, h, "a");
  in[1] = loom_placeholder(g, LOOM_F32, 2, h, "b");
  loom_concat(g, 2, in, -2, "c2");
  expect_build_err(g, "c2", "the concatenated dimension 0 would be larger than");
  loom_graph_free(g);
}

Test(array_limits, split_v_huge_sizes) {
  loom_graph *g = loom_graph_new();
  int64_t unk[1] = {-1}, sz[3] = {I64MAX, I64MAX, -1};
  loom_output outs[3];
  cr_assert_neq(loom_split_v(g, loom_placeholder(g, LOOM_F32, 1, unk, "x"), 3, sz, 0, outs, "s1"), LOOM_OK);
  expect_build_err(g, "s1", "sizes[0] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t xd[2] = {-1, BIG}, sz2[2] = {BIG, -1};
  cr_assert_neq(loom_split_v(g, loom_placeholder(g, LOOM_F32, 2, xd, "x"), 2, sz2, 0, outs, "s2"), LOOM_OK);
  expect_build_err(g, "s2", "sizes[0] = 1099511627776 is too large: piece 0 [1099511627776,1099511627776]");
  loom_graph_free(g);
}

Test(array_limits, slice_huge_begin_and_size) {
  /* begin + size wrapped to a negative number and passed the bounds check */
  loom_graph *g = loom_graph_new();
  int64_t d5[1] = {5}, b1[1] = {2}, s1[1] = {I64MAX};
  float v5[5] = {0};
  loom_slice(g, cf32(g, 1, d5, v5), b1, s1, "sl1");
  expect_build_err(g, "sl1", "size[0] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t unk[1] = {-1}, b2[1] = {I64MAX}, s2[1] = {-1};
  loom_slice(g, loom_placeholder(g, LOOM_F32, 1, unk, "x"), b2, s2, "sl2");
  expect_build_err(g, "sl2", "begin[0] = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t b3[1] = {I64MIN}, s3[1] = {1};
  loom_slice(g, loom_placeholder(g, LOOM_F32, 1, unk, "x"), b3, s3, "sl3");
  expect_build_err(g, "sl3", "negative entry at dimension 0");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t u2[2] = {-1, -1}, b4[2] = {0, 0}, s4[2] = {BIG, BIG};
  loom_slice(g, loom_placeholder(g, LOOM_F32, 2, u2, "x"), b4, s4, "sl4");
  expect_build_err(g, "sl4", "size[1] = 1099511627776 is too large");
  loom_graph_free(g);
}

Test(array_limits, tile_huge_multiples) {
  loom_graph *g = loom_graph_new();
  int64_t m1[2] = {1, I64MAX};
  loom_tile(g, cf32(g, 2, D23, X23), m1, "t1");
  expect_build_err(g, "t1", "multiples[1] = 9223372036854775807 is too large: dimension 1 of [2,3]");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t m2[2] = {BIG, BIG};
  loom_tile(g, cf32(g, 2, D23, X23), m2, "t2");
  expect_build_err(g, "t2", "multiples[1] = 1099511627776 is too large: the result [2199023255552,3298534883328]");
  loom_graph_free(g);
}

Test(array_limits, pad_huge_paddings) {
  loom_graph *g = loom_graph_new();
  int64_t be[2] = {I64MAX, 0}, af[2] = {1, 0};
  loom_pad(g, cf32(g, 2, D23, X23), be, af, 0, "p1");
  expect_build_err(g, "p1", "before[0] = 9223372036854775807 and after[0] = 1 are too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t be2[2] = {0, 0}, af2[2] = {0, I64MAX};
  loom_pad(g, cf32(g, 2, D23, X23), be2, af2, 0, "p2");
  expect_build_err(g, "p2", "before[1] = 0 and after[1] = 9223372036854775807 are too large: dimension 1 of [2,3]");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t u2[2] = {-1, -1}, be3[2] = {BIG, BIG}, af3[2] = {0, 0};
  loom_pad(g, loom_placeholder(g, LOOM_F32, 2, u2, "x"), be3, af3, 0, "p3");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK); /* dims unknown: the run checks */
  loom_graph_free(g);

  g = loom_graph_new();
  loom_pad(g, cf32(g, 2, D23, X23), be3, af3, 0, "p4");
  expect_build_err(g, "p4", "paddings: the result [1099511627778,1099511627779] would have more than");
  loom_graph_free(g);
}

Test(array_limits, one_hot_segments_top_k_huge_counts) {
  loom_graph *g = loom_graph_new();
  int64_t d3[1] = {3};
  int32_t iv[3] = {0, 1, 2};
  loom_one_hot(g, ci32(g, 1, d3, iv), I64MAX, 1, 0, -1, LOOM_F32, "oh");
  expect_build_err(g, "oh", "depth = 9223372036854775807 is too large: the result [3,9223372036854775807]");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t d42[2] = {4, 2};
  float dv[8] = {0};
  int32_t ids[4] = {0, 0, 1, 1};
  int64_t d4[1] = {4};
  loom_unsorted_segment_sum(g, cf32(g, 2, d42, dv), ci32(g, 1, d4, ids), I64MAX, "seg");
  expect_build_err(g, "seg", "num_segments = 9223372036854775807 is too large");
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t u2[2] = {BIG, -1};
  loom_output v, ix;
  cr_assert_neq(loom_top_k(g, loom_placeholder(g, LOOM_F32, 2, u2, "x"), BIG, &v, &ix, "tk"), LOOM_OK);
  expect_build_err(g, "tk", "k = 1099511627776 is too large");
  loom_graph_free(g);
}

Test(array_limits, range_huge_int64_span) {
  /* |limit - start| overflowed int64 */
  loom_graph *g = loom_graph_new();
  loom_range(g, -9e18, 9e18, 1, LOOM_I64, "rg1");
  expect_build_err(g, "rg1", "start -9e+18 and limit 9e+18 are too far apart");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_range(g, 9e18, -9e18, -4e18, LOOM_I64, "rg2");
  expect_build_err(g, "rg2", "are too far apart");
  loom_graph_free(g);

  g = loom_graph_new();
  loom_range(g, 0, 9e18, 1, LOOM_I64, "rg3");
  expect_build_err(g, "rg3", "give 9000000000000000000 elements, more than 576460752303423487");
  loom_graph_free(g);

  /* a large span with few elements still works */
  g = loom_graph_new();
  loom_output r = loom_range(g, -4e18, 5e18, 3e18, LOOM_I64, "rg4");
  loom_tensor *t = run(g, r);
  int64_t d3[1] = {3};
  int64_t want[3] = {-4000000000000000000, -1000000000000000000, 2000000000000000000};
  expect_i64(t, 1, d3, want);
  loom_tensor_free(t);
  loom_graph_free(g);
}

/* Axis attributes at the int64 extremes are plain range errors (the shape
 * functions normalize them without arithmetic that could overflow). */
Test(array_limits, extreme_axes_are_range_errors) {
  const int64_t ext[2] = {I64MAX, I64MIN};
  for (int k = 0; k < 2; k++) {
    loom_graph *g = loom_graph_new();
    loom_output x = cf32(g, 2, D23, X23);
    loom_expand_dims(g, x, ext[k], "ed");
    expect_build_err(g, "ed", "is out of range");
    loom_graph_free(g);

    g = loom_graph_new();
    x = cf32(g, 2, D23, X23);
    loom_output two[2] = {x, x};
    loom_concat(g, 2, two, ext[k], "cc");
    expect_build_err(g, "cc", "is out of range");
    loom_graph_free(g);

    g = loom_graph_new();
    x = cf32(g, 2, D23, X23);
    two[0] = two[1] = x;
    loom_stack(g, 2, two, ext[k], "st");
    expect_build_err(g, "st", "is out of range");
    loom_graph_free(g);

    g = loom_graph_new();
    loom_gather(g, cf32(g, 2, D23, X23), loom_const_i32(g, 0, NULL), ext[k], "ga");
    expect_build_err(g, "ga", "is out of range");
    loom_graph_free(g);

    g = loom_graph_new();
    int64_t ax[1] = {ext[k]};
    loom_squeeze(g, cf32(g, 2, D23, X23), 1, ax, "sq");
    expect_build_err(g, "sq", "is out of range");
    loom_graph_free(g);

    g = loom_graph_new();
    int64_t perm[2] = {ext[k], 0};
    loom_transpose(g, cf32(g, 2, D23, X23), 2, perm, "tr");
    expect_build_err(g, "tr", "is not a permutation");
    loom_graph_free(g);

    g = loom_graph_new();
    int64_t d3[1] = {3};
    int32_t iv[3] = {0, 1, 2};
    loom_one_hot(g, ci32(g, 1, d3, iv), 4, 1, 0, ext[k], LOOM_F32, "oh");
    expect_build_err(g, "oh", "must be -1 or in [0,1]");
    loom_graph_free(g);

    g = loom_graph_new();
    loom_output outs[2];
    loom_split(g, cf32(g, 2, D23, X23), 2, ext[k], outs, "sp");
    expect_build_err(g, "sp", "is out of range");
    loom_graph_free(g);
  }
}
