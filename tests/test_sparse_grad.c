/* Sparse gradients (GatherV2 -> IndexedSlices), Dropout's same-run mask
 * gradient, and gradients of the array/nn ops on graphs whose placeholders
 * have unknown dimensions (compared with the same graph built with known
 * dimensions, which the finite-difference table in test_grad.c checks). */
#include "test_util.h"
#include "ops/op_list.h"
#include "engine/engine_impl.h"

/* ---------- helpers ---------- */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static loom_tensor *rand_f64(int ndim, const int64_t *dims, double lo, double hi) {
  loom_tensor *t = loom_tensor_new(LOOM_F64, ndim, dims, NULL);
  double *d = loom_tensor_data(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) d[i] = lo + (hi - lo) * urand();
  return t;
}

static loom_tensor *rand_i32(int ndim, const int64_t *dims, int hi) {
  loom_tensor *t = loom_tensor_new(LOOM_I32, ndim, dims, NULL);
  int32_t *d = loom_tensor_data(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) d[i] = (int32_t)(urand() * hi);
  return t;
}

/* Runs nf fetches in one run; asserts OK. */
static void run_n(loom_graph *g, int nfeeds, const loom_output *feeds, loom_tensor *const *vals, int nf,
                  const loom_output *fetch, loom_tensor **out) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "graph: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "session: %s", loom_status_message(st));
  for (int i = 0; i < nf; i++) out[i] = NULL;
  cr_assert_eq(loom_session_run(s, feeds, vals, nfeeds, fetch, out, nf, NULL, 0, st), LOOM_OK, "run: %s",
               loom_status_message(st));
  loom_session_free(s);
  loom_status_free(st);
}

static void expect_close(const loom_tensor *a, const loom_tensor *b, double tol, const char *what) {
  cr_assert_eq(loom_tensor_dtype(a), loom_tensor_dtype(b), "%s: dtypes differ", what);
  cr_assert_eq(loom_tensor_ndim(a), loom_tensor_ndim(b), "%s: ranks differ", what);
  for (int i = 0; i < loom_tensor_ndim(a); i++)
    cr_assert_eq(loom_tensor_dim(a, i), loom_tensor_dim(b, i), "%s: dim %d differs", what, i);
  for (int64_t i = 0; i < loom_tensor_numel(a); i++) {
    double x, y;
    if (loom_tensor_dtype(a) == LOOM_F64) {
      x = ((const double *)loom_tensor_data_const(a))[i];
      y = ((const double *)loom_tensor_data_const(b))[i];
    } else {
      x = ((const float *)loom_tensor_data_const(a))[i];
      y = ((const float *)loom_tensor_data_const(b))[i];
    }
    cr_assert(fabs(x - y) <= tol * (1 + fabs(y)), "%s: element %lld: %.12g vs %.12g", what, (long long)i, x, y);
  }
}

static const loom_node *node_of(loom_output o) { return o.node; }

/* ---------- sparse gradients of Gather ---------- */
enum { V = 6, D = 3 };

/* loss = sum(gather(T, idx) * W) (+ sum(T * U) when dense_use) */
typedef struct {
  loom_graph *g;
  loom_output table;
  loom_tensor *tv;
} table_graph;

static table_graph make_table(void) {
  table_graph t;
  t.g = loom_graph_new();
  int64_t td[2] = {V, D};
  t.table = loom_placeholder(t.g, LOOM_F64, 2, td, "table");
  t.tv = rand_f64(2, td, -1, 1);
  return t;
}

/* Adds sum(gather(table, idx) * W) to *loss and the hand gradient into dense[V*D]. */
static loom_output gather_term(loom_graph *g, loom_output table, int n, const int32_t *idx, double *dense,
                               loom_output loss) {
  int64_t nd = n, wd[2] = {n, D};
  double *w = malloc(sizeof(double) * (size_t)(n * D));
  for (int i = 0; i < n * D; i++) w[i] = 0.25 + urand();
  for (int i = 0; i < n; i++)
    for (int j = 0; j < D; j++) dense[idx[i] * D + j] += w[i * D + j];
  loom_output ix = loom_const_data(g, LOOM_I32, 1, &nd, idx, NULL);
  loom_output wc = loom_const_data(g, LOOM_F64, 2, wd, w, NULL);
  free(w);
  loom_output term = loom_reduce_sum(g, loom_mul(g, loom_gather(g, table, ix, 0, NULL), wc, NULL), -1, NULL, 0, NULL);
  return loss.node ? loom_add(g, loss, term, NULL) : term;
}

/* Densifies a fetched sparse gradient by hand. */
static void densify_by_hand(const loom_tensor *values, const loom_tensor *indices, double *out) {
  memset(out, 0, sizeof(double) * V * D);
  int64_t n = loom_tensor_numel(indices);
  cr_assert_eq(loom_tensor_dim(values, 0), n, "values rows %lld vs %lld indices", (long long)loom_tensor_dim(values, 0),
               (long long)n);
  const double *v = loom_tensor_data_const(values);
  for (int64_t i = 0; i < n; i++) {
    int64_t r = loom_tensor_dtype(indices) == LOOM_I64 ? ((const int64_t *)loom_tensor_data_const(indices))[i]
                                                        : ((const int32_t *)loom_tensor_data_const(indices))[i];
    cr_assert(r >= 0 && r < V, "index %lld out of range", (long long)r);
    for (int j = 0; j < D; j++) out[r * D + j] += v[i * D + j];
  }
}

static void expect_dense(const loom_tensor *t, const double *want) {
  cr_assert_eq(loom_tensor_numel(t), V * D);
  const double *d = loom_tensor_data_const(t);
  for (int i = 0; i < V * D; i++)
    cr_assert(fabs(d[i] - want[i]) <= 1e-12 * (1 + fabs(want[i])), "element %d: %.12g want %.12g", i, d[i], want[i]);
}

Test(sparse_grad, gather_repeated_indices_is_sparse_and_matches_dense) {
  table_graph t = make_table();
  double hand[V * D] = {0};
  static const int32_t idx[5] = {1, 4, 1, 1, 5};
  loom_output loss = gather_term(t.g, t.table, 5, idx, hand, (loom_output){NULL, 0});
  loom_gradient sg;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients_sparse(t.g, 1, &loss, NULL, 1, &t.table, &sg, st), LOOM_OK, "%s",
               loom_status_message(st));
  cr_assert(sg.indices.node != NULL, "the gradient of a gather is sparse");
  cr_assert_eq(loom_output_ndim(sg.values), 2);
  int64_t vd[LOOM_MAX_DIMS];
  loom_output_dims(sg.values, vd);
  cr_assert(vd[0] == 5 && vd[1] == D, "values are [n, D]");
  loom_output dense;
  cr_assert_eq(loom_gradients(t.g, 1, &loss, NULL, 1, &t.table, &dense, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert(dense.node);
  loom_tensor *out[3];
  loom_output f[3] = {sg.values, sg.indices, dense};
  run_n(t.g, 1, &t.table, &t.tv, 3, f, out);
  const int32_t *gi = loom_tensor_data_const(out[1]);
  for (int i = 0; i < 5; i++) cr_assert_eq(gi[i], idx[i], "indices are the gather's indices");
  double mine[V * D];
  densify_by_hand(out[0], out[1], mine);
  expect_dense(out[2], hand);
  for (int i = 0; i < V * D; i++) cr_assert(fabs(mine[i] - hand[i]) <= 1e-12);
  for (int i = 0; i < 3; i++) loom_tensor_free(out[i]);
  loom_status_free(st);
  loom_tensor_free(t.tv);
  loom_graph_free(t.g);
}

Test(sparse_grad, two_gathers_stay_sparse_concatenated) {
  table_graph t = make_table();
  double hand[V * D] = {0};
  static const int32_t i1[4] = {0, 2, 2, 5}, i2[3] = {5, 1, 0};
  loom_output loss = gather_term(t.g, t.table, 4, i1, hand, (loom_output){NULL, 0});
  loss = gather_term(t.g, t.table, 3, i2, hand, loss);
  loom_gradient sg;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients_sparse(t.g, 1, &loss, NULL, 1, &t.table, &sg, st), LOOM_OK, "%s",
               loom_status_message(st));
  cr_assert(sg.indices.node != NULL, "two sparse paths stay sparse");
  cr_assert_str_eq(loom_node_op_name(node_of(sg.indices)), "ConcatV2");
  loom_tensor *out[2];
  loom_output f[2] = {sg.values, sg.indices};
  run_n(t.g, 1, &t.table, &t.tv, 2, f, out);
  cr_assert_eq(loom_tensor_numel(out[1]), 7, "4 + 3 rows");
  double mine[V * D];
  densify_by_hand(out[0], out[1], mine);
  for (int i = 0; i < V * D; i++) cr_assert(fabs(mine[i] - hand[i]) <= 1e-12, "element %d", i);
  /* the dense convenience densifies the concatenation */
  loom_output dense;
  cr_assert_eq(loom_gradients(t.g, 1, &loss, NULL, 1, &t.table, &dense, st), LOOM_OK);
  loom_tensor *dv = tu_run1(t.g, 1, &t.table, &t.tv, dense);
  expect_dense(dv, hand);
  loom_tensor_free(dv);
  for (int i = 0; i < 2; i++) loom_tensor_free(out[i]);
  loom_status_free(st);
  loom_tensor_free(t.tv);
  loom_graph_free(t.g);
}

Test(sparse_grad, gather_plus_dense_use_is_densified_sum) {
  table_graph t = make_table();
  double hand[V * D] = {0};
  static const int32_t idx[3] = {3, 3, 0};
  loom_output loss = gather_term(t.g, t.table, 3, idx, hand, (loom_output){NULL, 0});
  int64_t td[2] = {V, D};
  loom_tensor *uv = rand_f64(2, td, -1, 1);
  loom_output u = loom_const(t.g, uv, "u");
  loss = loom_add(t.g, loss, loom_reduce_sum(t.g, loom_mul(t.g, t.table, u, NULL), -1, NULL, 0, NULL), NULL);
  for (int i = 0; i < V * D; i++) hand[i] += ((const double *)loom_tensor_data_const(uv))[i];
  loom_gradient sg;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients_sparse(t.g, 1, &loss, NULL, 1, &t.table, &sg, st), LOOM_OK, "%s",
               loom_status_message(st));
  cr_assert(sg.indices.node == NULL, "a dense path densifies the sum");
  loom_tensor *dv = tu_run1(t.g, 1, &t.table, &t.tv, sg.values);
  expect_dense(dv, hand);
  loom_tensor_free(dv);
  loom_tensor_free(uv);
  loom_status_free(st);
  loom_tensor_free(t.tv);
  loom_graph_free(t.g);
}

Test(sparse_grad, sparse_passes_identity_and_rank2_indices) {
  table_graph t = make_table();
  double hand[V * D] = {0};
  static const int32_t idx[6] = {1, 1, 2, 0, 5, 1};
  int64_t id2[2] = {2, 3}, wd[3] = {2, 3, D};
  double w[2 * 3 * D];
  for (int i = 0; i < 2 * 3 * D; i++) w[i] = 0.5 + urand();
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < D; j++) hand[idx[i] * D + j] += w[i * D + j];
  loom_output ix = loom_const_data(t.g, LOOM_I32, 2, id2, idx, NULL);
  loom_output y = loom_gather(t.g, loom_identity(t.g, t.table, NULL), ix, 0, NULL);
  loom_output loss = loom_reduce_sum(t.g, loom_mul(t.g, y, loom_const_data(t.g, LOOM_F64, 3, wd, w, NULL), NULL), -1,
                                     NULL, 0, NULL);
  loom_gradient sg;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients_sparse(t.g, 1, &loss, NULL, 1, &t.table, &sg, st), LOOM_OK, "%s",
               loom_status_message(st));
  cr_assert(sg.indices.node != NULL, "Identity passes sparse gradients through");
  loom_tensor *out[2];
  loom_output f[2] = {sg.values, sg.indices};
  run_n(t.g, 1, &t.table, &t.tv, 2, f, out);
  cr_assert_eq(loom_tensor_ndim(out[0]), 2, "values flattened to [6, D]");
  cr_assert_eq(loom_tensor_dim(out[0], 0), 6);
  double mine[V * D];
  densify_by_hand(out[0], out[1], mine);
  for (int i = 0; i < V * D; i++) cr_assert(fabs(mine[i] - hand[i]) <= 1e-12, "element %d", i);
  for (int i = 0; i < 2; i++) loom_tensor_free(out[i]);
  loom_status_free(st);
  loom_tensor_free(t.tv);
  loom_graph_free(t.g);
}

/* ---------- Dropout ---------- */
Test(sparse_grad, dropout_gradient_uses_the_same_runs_mask) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {40, 30};
  loom_output x = loom_placeholder(g, LOOM_F64, 2, xd, "x");
  loom_output mask;
  loom_output y = loom_dropout(g, x, 0.4, 7, 11, &mask, "drop");
  loom_tensor *wv = rand_f64(2, xd, 0.5, 1.5);
  loom_output loss = loom_reduce_sum(g, loom_mul(g, y, loom_const(g, wv, "w"), NULL), -1, NULL, 0, NULL);
  loom_output dx;
  cr_assert_eq(loom_gradients(g, 1, &loss, NULL, 1, &x, &dx, NULL), LOOM_OK);
  loom_tensor *xv = rand_f64(2, xd, -1, 1);
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  loom_output f[3] = {y, mask, dx};
  loom_tensor *out[3] = {NULL, NULL, NULL};
  double first_mask0 = -1;
  int differs = 0;
  for (int run = 0; run < 3; run++) {
    cr_assert_eq(loom_session_run(s, &x, &xv, 1, f, out, 3, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
    const double *yy = loom_tensor_data_const(out[0]), *m = loom_tensor_data_const(out[1]),
                 *d = loom_tensor_data_const(out[2]), *xx = loom_tensor_data_const(xv),
                 *w = loom_tensor_data_const(wv);
    int kept = 0;
    for (int64_t i = 0; i < 40 * 30; i++) {
      cr_assert(m[i] == 0.0 || fabs(m[i] - 1 / 0.6) < 1e-12, "mask_scaled is 0 or 1/(1-rate), got %g", m[i]);
      cr_assert(fabs(yy[i] - xx[i] * m[i]) <= 1e-12, "y = x * mask_scaled");
      cr_assert(fabs(d[i] - w[i] * m[i]) <= 1e-12, "run %d element %lld: dx %.12g != dy * mask_scaled %.12g", run,
                (long long)i, d[i], w[i] * m[i]);
      kept += m[i] != 0;
    }
    cr_assert(kept > 600 && kept < 840, "about 60%% kept, got %d of 1200", kept);
    double sig = 0;
    for (int64_t i = 0; i < 64; i++) sig = sig * 2 + (m[i] != 0);
    if (run == 0) first_mask0 = sig;
    else if (sig != first_mask0) differs = 1;
  }
  cr_assert(differs, "each run draws a new mask");
  for (int i = 0; i < 3; i++) loom_tensor_free(out[i]);
  loom_session_free(s);
  loom_status_free(st);
  loom_tensor_free(xv);
  loom_tensor_free(wv);
  loom_graph_free(g);
}

Test(sparse_grad, dropout_mask_output_has_no_gradient) {
  loom_graph *g = loom_graph_new();
  int64_t xd[1] = {8};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, xd, "x");
  loom_output mask;
  loom_dropout(g, x, 0.5, 1, 1, &mask, NULL);
  loom_output loss = loom_reduce_sum(g, mask, -1, NULL, 0, NULL), dx;
  cr_assert_eq(loom_gradients(g, 1, &loss, NULL, 1, &x, &dx, NULL), LOOM_OK);
  cr_assert(dx.node == NULL, "the mask does not depend on x differentiably");
  loom_graph_free(g);
}

/* ---------- unknown dimensions: same gradients as with known dims ---------- */
#define MAXIN 3
typedef loom_output (*ubuild)(loom_graph *g, const loom_output *x);
typedef struct {
  const char *label;
  int nin;
  int ndim[MAXIN];
  int64_t dims[MAXIN][4];
  unsigned unknown[MAXIN]; /* bit d: dim d is -1 in the second graph */
  ubuild build;
  int int_input, int_hi;
  const char *path_op; /* an op the unknown-dims gradient must use (the runtime-shaped path), or NULL */
} ucase;

static void grads_of(const ucase *c, int unknown, loom_tensor *const *xv, loom_tensor *wv, loom_tensor **gout,
                     loom_tensor **yout) {
  loom_graph *g = loom_graph_new();
  loom_output ph[MAXIN];
  for (int i = 0; i < c->nin; i++) {
    int64_t d[4];
    for (int k = 0; k < c->ndim[i]; k++) d[k] = (unknown && ((c->unknown[i] >> k) & 1)) ? -1 : c->dims[i][k];
    ph[i] = loom_placeholder(g, ((c->int_input >> i) & 1) ? LOOM_I32 : LOOM_F64, c->ndim[i], d, NULL);
  }
  loom_output y = c->build(g, ph);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s: build: %s", c->label, loom_status_message(st));
  if (yout) {
    *yout = tu_run1(g, c->nin, ph, xv, y);
    loom_status_free(st);
    loom_graph_free(g);
    return;
  }
  loom_output loss = loom_reduce_sum(g, loom_mul(g, y, loom_const(g, wv, "w"), NULL), -1, NULL, 0, NULL);
  loom_output gr[MAXIN];
  int before = loom_graph_num_nodes(g);
  cr_assert_eq(loom_gradients(g, 1, &loss, NULL, c->nin, ph, gr, st), LOOM_OK, "%s (unknown=%d): %s", c->label,
               unknown, loom_status_message(st));
  if (unknown && c->path_op) {
    /* "Op" or "Op/k": an Op node (with k inputs) */
    char op[64];
    snprintf(op, sizeof op, "%s", c->path_op);
    char *slash = strchr(op, '/');
    int nin = slash ? atoi(slash + 1) : -1, found = 0;
    if (slash) *slash = 0;
    for (int i = before; i < loom_graph_num_nodes(g); i++) {
      const loom_node *nd = loom_graph_node_at(g, i);
      if (!strcmp(loom_node_op_name(nd), op) && (nin < 0 || loom_node_num_inputs(nd) == nin)) found = 1;
    }
    cr_assert(found, "%s: the gradient does not use %s", c->label, c->path_op);
  }
  loom_output f[MAXIN];
  int nf = 0;
  for (int i = 0; i < c->nin; i++)
    if (!((c->int_input >> i) & 1)) {
      cr_assert(gr[i].node, "%s: no gradient for input %d", c->label, i);
      f[nf++] = gr[i];
    }
  run_n(g, c->nin, ph, xv, nf, f, gout);
  loom_status_free(st);
  loom_graph_free(g);
}

static void check_unknown(const ucase *c) {
  loom_tensor *xv[MAXIN];
  for (int i = 0; i < c->nin; i++)
    xv[i] = ((c->int_input >> i) & 1) ? rand_i32(c->ndim[i], c->dims[i], c->int_hi)
                                      : rand_f64(c->ndim[i], c->dims[i], -1, 1);
  loom_tensor *y;
  grads_of(c, 0, xv, NULL, NULL, &y);
  loom_tensor *wv = rand_f64(loom_tensor_ndim(y), loom_tensor_dims(y), 0.5, 1.5);
  loom_tensor *ga[MAXIN], *gb[MAXIN];
  grads_of(c, 0, xv, wv, ga, NULL);
  grads_of(c, 1, xv, wv, gb, NULL);
  int nf = 0;
  for (int i = 0; i < c->nin; i++)
    if (!((c->int_input >> i) & 1)) nf++;
  for (int i = 0; i < nf; i++) {
    char what[96];
    snprintf(what, sizeof what, "%s: gradient %d", c->label, i);
    expect_close(gb[i], ga[i], 1e-12, what);
    loom_tensor_free(ga[i]);
    loom_tensor_free(gb[i]);
  }
  for (int i = 0; i < c->nin; i++) loom_tensor_free(xv[i]);
  loom_tensor_free(y);
  loom_tensor_free(wv);
}

static loom_output u_concat1(loom_graph *g, const loom_output *x) { return loom_concat(g, 2, x, 1, NULL); }
static loom_output u_concat0(loom_graph *g, const loom_output *x) { return loom_concat(g, 3, x, 0, NULL); }
static loom_output u_slice(loom_graph *g, const loom_output *x) {
  int64_t b[2] = {1, 1}, s[2] = {2, 3};
  return loom_slice(g, x[0], b, s, NULL);
}
static loom_output u_slice3(loom_graph *g, const loom_output *x) {
  int64_t b[3] = {0, 1, 1}, s[3] = {1, 2, 2};
  return loom_slice(g, x[0], b, s, NULL);
}
static loom_output u_pad(loom_graph *g, const loom_output *x) {
  int64_t bf[2] = {1, 0}, af[2] = {2, 1};
  return loom_pad(g, x[0], bf, af, 0.0, NULL);
}
static loom_output u_tile(loom_graph *g, const loom_output *x) {
  int64_t m[2] = {2, 3};
  return loom_tile(g, x[0], m, NULL);
}
static loom_output u_gather0(loom_graph *g, const loom_output *x) { return loom_gather(g, x[0], x[1], 0, NULL); }
static loom_output u_gather1(loom_graph *g, const loom_output *x) { return loom_gather(g, x[0], x[1], 1, NULL); }
static loom_output u_top_k(loom_graph *g, const loom_output *x) {
  loom_output v;
  loom_top_k(g, x[0], 2, &v, NULL, NULL);
  return v;
}
static loom_output u_conv(loom_graph *g, const loom_output *x) {
  return loom_conv2d(g, x[0], x[1], NULL, LOOM_PADDING_SAME, NULL, NULL);
}
static loom_output u_pools(loom_graph *g, const loom_output *x) {
  int64_t k[4] = {1, 3, 3, 1}, s[4] = {1, 2, 2, 1};
  return loom_add(g, loom_avg_pool(g, x[0], k, s, LOOM_PADDING_SAME, NULL),
                  loom_max_pool(g, x[0], k, s, LOOM_PADDING_SAME, NULL), NULL);
}
static loom_output u_conv_s2(loom_graph *g, const loom_output *x) {
  int64_t s[4] = {1, 2, 2, 1};
  return loom_conv2d(g, x[0], x[1], s, LOOM_PADDING_SAME, NULL, NULL);
}
static loom_output u_conv_bf(loom_graph *g, const loom_output *x) {
  int64_t sz[4] = {3, 3, 2, 4};
  return loom_conv2d_backprop_filter(g, x[0], sz, x[1], NULL, LOOM_PADDING_VALID, NULL, NULL);
}
static loom_output u_segment_mean(loom_graph *g, const loom_output *x) {
  return loom_unsorted_segment_mean(g, x[0], x[1], 3, NULL);
}
static loom_output u_scatter_update(loom_graph *g, const loom_output *x) {
  int64_t n = 3;
  static const int32_t idx[3] = {3, 0, 2};
  return loom_scatter_update(g, x[0], loom_const_data(g, LOOM_I32, 1, &n, idx, NULL), x[1], NULL);
}
static loom_output u_xent(loom_graph *g, const loom_output *x) {
  loom_output l, b;
  loom_softmax_cross_entropy_with_logits(g, x[0], loom_softmax(g, x[1], NULL), &l, &b, NULL);
  return loom_add(g, b, loom_expand_dims(g, l, -1, NULL), NULL);
}
static loom_output u_l2n(loom_graph *g, const loom_output *x) { return loom_l2_normalize(g, x[0], 1, 0, NULL); }
static loom_output u_split(loom_graph *g, const loom_output *x) {
  loom_output o[3];
  loom_split(g, x[0], 3, 1, o, NULL);
  return loom_mul(g, o[0], o[2], NULL);
}
/* like only shapes the result: x1 gets its gradient from the product */
static loom_output u_bcast_like(loom_graph *g, const loom_output *x) {
  return loom_mul(g, loom_broadcast_like(g, x[0], x[1], NULL), x[1], NULL);
}

static const ucase UCASES[] = {
    {"concat_axis1_batch_unknown", 2, {2, 2}, {{3, 3}, {3, 2}}, {1, 1}, u_concat1, 0, 0, "SplitV"},
    {"concat_axis0_one_unknown", 3, {2, 2, 2}, {{2, 3}, {4, 3}, {1, 3}}, {0, 1, 0}, u_concat0, 0, 0, "SplitV"},
    {"slice_size_on_unknown_dim", 1, {2}, {{4, 5}}, {1}, u_slice, 0, 0, "ConcatV2"},
    {"slice_two_unknown_dims", 1, {3}, {{2, 3, 4}}, {3}, u_slice3, 0, 0, "ConcatV2"},
    {"pad_unknown", 1, {2}, {{3, 3}}, {3}, u_pad, 0, 0, "SplitV"},
    {"tile_unknown", 1, {2}, {{2, 3}}, {1}, u_tile, 0, 0, "Split"},
    {"gather0_rank2_indices", 2, {2, 2}, {{5, 3}, {2, 3}}, {2, 1}, u_gather0, 2, 5, "GatherV2"},
    {"gather1_rank2_indices", 2, {3, 2}, {{2, 4, 2}, {2, 3}}, {1, 1}, u_gather1, 2, 4, "GatherV2"},
    {"gather1_unknown_axis", 2, {2, 1}, {{3, 4}, {5}}, {3, 1}, u_gather1, 2, 4, "TensorScatterAdd"},
    {"top_k_unknown_batch", 1, {2}, {{3, 5}}, {1}, u_top_k, 0, 0, "OneHot"},
    {"conv2d_unknown_batch", 2, {4, 4}, {{2, 5, 5, 3}, {3, 3, 3, 2}}, {1, 8}, u_conv, 0, 0, "Conv2DBackpropInput/2"},
    {"conv2d_unknown_hw", 2, {4, 4}, {{2, 7, 6, 3}, {3, 3, 3, 2}}, {15, 0}, u_conv_s2, 0, 0, "Conv2DBackpropInput/3"},
    {"conv2d_backprop_filter_unknown_hw", 2, {4, 4}, {{2, 6, 6, 2}, {2, 4, 4, 4}}, {7, 7}, u_conv_bf, 0, 0,
     "Conv2DBackpropInput/3"},
    {"pools_unknown_hw", 1, {4}, {{2, 6, 5, 2}}, {15}, u_pools, 0, 0, "AvgPoolGrad/2"},
    {"pools_unknown_batch", 1, {4}, {{2, 5, 5, 2}}, {9}, u_pools, 0, 0, "AvgPoolGrad/1"},
    {"segment_mean_unknown_rows", 2, {2, 1}, {{6, 2}, {6}}, {1, 1}, u_segment_mean, 2, 3, NULL},
    {"scatter_update_unknown", 2, {2, 2}, {{5, 3}, {3, 3}}, {1, 1}, u_scatter_update, 0, 0, NULL},
    {"xent_unknown_batch", 2, {2, 2}, {{3, 4}, {3, 4}}, {1, 1}, u_xent, 0, 0, NULL},
    {"l2_normalize_unknown", 1, {2}, {{3, 4}}, {1}, u_l2n, 0, 0, NULL},
    {"split_unknown_batch", 1, {2}, {{2, 6}}, {1}, u_split, 0, 0, NULL},
    {"broadcast_like_unknown", 2, {2, 2}, {{1, 4}, {3, 4}}, {0, 1}, u_bcast_like, 0, 0, NULL},
};

Test(sparse_grad, unknown_dims_give_the_same_gradients) {
  for (size_t i = 0; i < sizeof UCASES / sizeof UCASES[0]; i++) check_unknown(&UCASES[i]);
}

/* ---------- documented limits fail cleanly, naming the node ---------- */
static void expect_unimplemented(loom_graph *g, loom_output loss, loom_output x, const char *node) {
  loom_output gr;
  loom_status *st = loom_status_new();
  loom_code rc = loom_gradients(g, 1, &loss, NULL, 1, &x, &gr, st);
  cr_assert_eq(rc, LOOM_UNIMPLEMENTED, "got %s: %s", loom_code_name(rc), loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), node), "message names %s: %s", node, loom_status_message(st));
  loom_status_free(st);
}

Test(sparse_grad, limits_are_unimplemented_errors) {
  {
    loom_graph *g = loom_graph_new();
    int64_t d[2] = {-1, 3};
    loom_output a = loom_placeholder(g, LOOM_F64, 2, d, "a"), b = loom_placeholder(g, LOOM_F64, 2, d, "b");
    loom_output in[2] = {a, b};
    loom_output y = loom_concat(g, 2, in, 0, "cat");
    expect_unimplemented(g, loom_reduce_sum(g, y, -1, NULL, 0, NULL), a, "cat");
    loom_graph_free(g);
  }
  { /* a filter whose window size is unknown */
    loom_graph *g = loom_graph_new();
    int64_t d[4] = {2, 5, 5, 3}, fd[4] = {-1, -1, 3, 2};
    loom_output x = loom_placeholder(g, LOOM_F64, 4, d, "x");
    loom_output f = loom_placeholder(g, LOOM_F64, 4, fd, "f");
    loom_output y = loom_conv2d(g, x, f, NULL, LOOM_PADDING_SAME, NULL, "conv");
    expect_unimplemented(g, loom_reduce_sum(g, y, -1, NULL, 0, NULL), x, "conv");
    loom_graph_free(g);
  }
  { /* top_k over an unknown last dimension */
    loom_graph *g = loom_graph_new();
    int64_t d[2] = {3, -1};
    loom_output x = loom_placeholder(g, LOOM_F64, 2, d, "x"), v;
    loom_top_k(g, x, 2, &v, NULL, "topk");
    expect_unimplemented(g, loom_reduce_sum(g, v, -1, NULL, 0, NULL), x, "topk");
    loom_graph_free(g);
  }
}

/* The optional `like` input the gradients add to AvgPoolGrad and
 * Conv2DBackpropInput (ops/nn.c): run-time sizes, and malformed uses. */
Test(sparse_grad, like_input_of_backprop_ops) {
  loom_graph *g = loom_graph_new();
  int64_t gd[4] = {-1, 3, 3, 2}, ld[4] = {-1, -1, -1, 2}, l3[3] = {2, 5, 5};
  loom_output grad = loom_placeholder(g, LOOM_F64, 4, gd, "grad");
  loom_output like = loom_placeholder(g, LOOM_F64, 4, ld, "like");
  loom_attrs a;
  memset(&a, 0, sizeof a);
  for (int i = 0; i < 4; i++) {
    a.ksize[i] = a.strides[i] = (i == 1 || i == 2) ? 2 : 1;
    a.shape[i] = -1;
  }
  a.nshape = 4;
  a.padding = LOOM_PAD_SAME;
  loom_output in[3] = {grad, like, like};
  loom_node *n = loom__graph_add(g, LOOM_OP_AvgPoolGrad, "apg", NULL, 2, in, &a, 1);
  cr_assert(n, "AvgPoolGrad with a like input builds");
  int64_t gv[4] = {2, 3, 3, 2}, lv[4] = {2, 5, 6, 2};
  loom_tensor *vals[2] = {rand_f64(4, gv, -1, 1), rand_f64(4, lv, -1, 1)};
  loom_output feeds[2] = {grad, like};
  loom_tensor *out = tu_run1(g, 2, feeds, vals, (loom_output){n, 0});
  cr_assert_eq(loom_tensor_dim(out, 1), 5);
  cr_assert_eq(loom_tensor_dim(out, 2), 6, "H and W come from like at run time");
  loom_tensor_free(out);
  for (int i = 0; i < 2; i++) loom_tensor_free(vals[i]);
  loom_graph_free(g);

  g = loom_graph_new();
  grad = loom_placeholder(g, LOOM_F64, 4, gd, "grad");
  like = loom_placeholder(g, LOOM_F64, 4, ld, "like");
  in[0] = grad;
  in[1] = in[2] = like;
  cr_assert_null(loom__graph_add(g, LOOM_OP_AvgPoolGrad, "bad", NULL, 3, in, &a, 1));
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "bad") && strstr(loom_status_message(st), "1 or 2 inputs"), "%s",
            loom_status_message(st));
  loom_graph_free(g);

  g = loom_graph_new();
  in[0] = loom_placeholder(g, LOOM_F64, 4, (int64_t[]){3, 3, 2, 4}, "f");
  in[1] = loom_placeholder(g, LOOM_F64, 4, (int64_t[]){2, 4, 4, 4}, "dy");
  in[2] = loom_placeholder(g, LOOM_F64, 3, l3, "like3");
  memset(&a, 0, sizeof a);
  for (int i = 0; i < 4; i++) a.strides[i] = a.dilations[i] = 1;
  a.nshape = 4;
  for (int i = 0; i < 4; i++) a.shape[i] = -1;
  cr_assert_null(loom__graph_add(g, LOOM_OP_Conv2DBackpropInput, "cbi", NULL, 3, in, &a, 1));
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "cbi") && strstr(loom_status_message(st), "like"), "%s",
            loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
}
