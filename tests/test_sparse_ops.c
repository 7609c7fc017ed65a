/* The sparse op family (loom_sparse.h ragged ops): SparseEmbedding against
 * hand-computed values and TF 2.15 fixtures (scripts/gen_sparse_fixtures.py,
 * tests/fixtures/sparse/embedding.txt), its sparse gradient, sparse
 * optimizer updates touching only the looked-up rows, DenseToRagged through
 * a session's host pass, RaggedMultiHot, RaggedPadIndex (the padding of
 * sequence columns, fed from placeholders so T is found at run time), and
 * the errors of malformed ragged inputs. Finite-difference checks of the gradient: tests/grad_cases_sparse.h. */
#include "test_util.h"
#include "ops/sparse_internal.h"

static loom_tensor *i64v(int64_t n, const int64_t *v) { return loom_tensor_from_data(LOOM_I64, 1, &n, v, NULL); }
static loom_tensor *f32v(int64_t n, const float *v) { return loom_tensor_from_data(LOOM_F32, 1, &n, v, NULL); }

static loom_output cst_i64(loom_graph *g, int64_t n, const int64_t *v, const char *name) {
  return loom_const_data(g, LOOM_I64, 1, &n, v, name);
}
static loom_output cst_f32(loom_graph *g, int ndim, const int64_t *dims, const float *v, const char *name) {
  return loom_const_data(g, LOOM_F32, ndim, dims, v, name);
}

/* ---------------------------------------------------------------- hand values */
/* params rows: e0 = (3, 4) (norm 5), e1 = (1, 0), e2 = (0, 2) */
static const float P3[6] = {3, 4, 1, 0, 0, 2};

static loom_tensor *embed(int comb, int weighted, double max_norm, int nnz, const int64_t *ids, int nrows,
                          const int64_t *splits, const float *w) {
  loom_graph *g = loom_graph_new();
  int64_t pd[2] = {3, 2};
  loom_output p = cst_f32(g, 2, pd, P3, "params");
  loom_sparse sp = {cst_i64(g, nnz, ids, "ids"), cst_i64(g, nrows + 1, splits, "splits")};
  int64_t wn = nnz;
  loom_output wt = weighted ? cst_f32(g, 1, &wn, w, "w") : (loom_output){NULL, 0};
  loom_output y = loom_sparse_embedding(g, p, sp, wt, (loom_combiner)comb, max_norm, "emb");
  loom_tensor *out = tu_run1(g, 0, NULL, NULL, y);
  loom_graph_free(g);
  return out;
}

Test(sparse_embedding, hand_computed_combiners) {
  /* row 0: ids 0, 1 (w 2, 1); row 1: empty; row 2: ids -1 (pruned), 2, 2 (w 9, 0.5, 1.5);
   * row 3: id 1 with weight 0 (pruned with weights for mean / sqrtn; adds 0 with sum) */
  const int64_t ids[6] = {0, 1, -1, 2, 2, 1}, sp[5] = {0, 2, 2, 5, 6};
  const float w[6] = {2, 1, 9, 0.5f, 1.5f, 0};
  int64_t od[2] = {4, 2};
  struct {
    int comb, weighted;
    float want[8];
  } cases[] = {
      {0, 0, {4, 4, 0, 0, 0, 4, 1, 0}},
      {1, 0, {2, 2, 0, 0, 0, 2, 1, 0}},
      {2, 0, {4 / sqrtf(2), 4 / sqrtf(2), 0, 0, 0, 4 / sqrtf(2), 1, 0}},
      {0, 1, {7, 8, 0, 0, 0, 4, 0, 0}},
      {1, 1, {7.0f / 3, 8.0f / 3, 0, 0, 0, 2, 0, 0}},
      {2, 1, {7 / sqrtf(5), 8 / sqrtf(5), 0, 0, 0, 4 / sqrtf(2.5f), 0, 0}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    loom_tensor *o = embed(cases[i].comb, cases[i].weighted, 0, 6, ids, 4, sp, w);
    tu_expect_f32(o, 2, od, cases[i].want, 1e-6);
    loom_tensor_free(o);
  }
}

Test(sparse_embedding, max_norm_clips_each_row) {
  /* max_norm 2.5: e0 = (3,4) -> (1.5, 2); e1 (norm 1) and e2 (norm 2) unchanged */
  const int64_t ids[3] = {0, 1, 2}, sp[3] = {0, 2, 3};
  const float w[3] = {2, 1, 1};
  int64_t od[2] = {2, 2};
  loom_tensor *o = embed(0, 0, 2.5, 3, ids, 2, sp, w);
  float want[4] = {2.5f, 2, 0, 2};
  tu_expect_f32(o, 2, od, want, 1e-6);
  loom_tensor_free(o);
  o = embed(1, 1, 2.5, 3, ids, 2, sp, w);
  float want_w[4] = {(3.0f + 1) / 3, 4.0f / 3, 0, 2};
  tu_expect_f32(o, 2, od, want_w, 1e-6);
  loom_tensor_free(o);
  /* max_norm <= 0: no clipping */
  o = embed(0, 0, 0, 3, ids, 2, sp, w);
  float want0[4] = {4, 4, 0, 2};
  tu_expect_f32(o, 2, od, want0, 0);
  loom_tensor_free(o);
}

/* ---------------------------------------------------------------- TF fixtures */
typedef struct fx_case {
  char name[64];
  int64_t V, D, B, nnz;
  int comb, weighted;
  double max_norm;
  float *params, *weights, *gw, *out, *grad;
  int64_t *ids, *splits;
} fx_case;

static FILE *open_fixture(const char *rel) {
  char path[256];
  snprintf(path, sizeof path, "tests/fixtures/sparse/%s", rel);
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(path, sizeof path, "../tests/fixtures/sparse/%s", rel);
    f = fopen(path, "r");
  }
  cr_assert(f, "cannot open fixture %s", rel);
  return f;
}

static void read_floats(FILE *f, const char *tag, int64_t n, float **dst) {
  char word[32];
  cr_assert_eq(fscanf(f, "%31s", word), 1);
  cr_assert_str_eq(word, tag);
  *dst = malloc((size_t)(n ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) cr_assert_eq(fscanf(f, "%f", &(*dst)[i]), 1, "%s[%lld]", tag, (long long)i);
}
static void read_ints(FILE *f, const char *tag, int64_t n, int64_t **dst) {
  char word[32];
  cr_assert_eq(fscanf(f, "%31s", word), 1);
  cr_assert_str_eq(word, tag);
  *dst = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
  for (int64_t i = 0; i < n; i++) {
    long long v;
    cr_assert_eq(fscanf(f, "%lld", &v), 1, "%s[%lld]", tag, (long long)i);
    (*dst)[i] = v;
  }
}

/* Reads the next case; 0 at the end of the file. */
static int read_case(FILE *f, fx_case *c) {
  char word[32];
  for (;;) {
    if (fscanf(f, "%31s", word) != 1) return 0;
    if (word[0] == '#') {
      int ch;
      while ((ch = fgetc(f)) != EOF && ch != '\n') {
      }
      continue;
    }
    break;
  }
  cr_assert_str_eq(word, "case");
  long long V, D, B, nnz;
  cr_assert_eq(fscanf(f, "%63s %lld %lld %lld %lld %d %d %lf", c->name, &V, &D, &B, &nnz, &c->comb, &c->weighted,
                      &c->max_norm),
               8);
  c->V = V, c->D = D, c->B = B, c->nnz = nnz;
  read_floats(f, "params", V * D, &c->params);
  read_ints(f, "ids", nnz, &c->ids);
  read_ints(f, "splits", B + 1, &c->splits);
  read_floats(f, "weights", nnz, &c->weights);
  read_floats(f, "gw", B * D, &c->gw);
  read_floats(f, "out", B * D, &c->out);
  read_floats(f, "grad", V * D, &c->grad);
  cr_assert_eq(fscanf(f, "%31s", word), 1);
  cr_assert_str_eq(word, "end");
  return 1;
}
static void free_case(fx_case *c) {
  free(c->params), free(c->weights), free(c->gw), free(c->out), free(c->grad), free(c->ids), free(c->splits);
}

static void expect_close(const float *got, const float *want, int64_t n, double tol, const char *what,
                         const char *name) {
  for (int64_t i = 0; i < n; i++)
    cr_assert(fabs((double)got[i] - want[i]) <= tol * (1 + fabs(want[i])), "%s %s[%lld]: %.9g, TF %.9g", name, what,
              (long long)i, got[i], want[i]);
}

Test(sparse_embedding, matches_tf_safe_embedding_lookup_sparse) {
  FILE *f = open_fixture("embedding.txt");
  fx_case c;
  int ncases = 0;
  while (read_case(f, &c)) {
    loom_graph *g = loom_graph_new();
    int64_t pd[2] = {c.V, c.D}, od[2] = {c.B, c.D};
    loom_output p = loom_placeholder(g, LOOM_F32, 2, pd, "params");
    loom_sparse sp = {cst_i64(g, c.nnz, c.ids, "ids"), cst_i64(g, c.B + 1, c.splits, "splits")};
    loom_output w = c.weighted ? cst_f32(g, 1, &c.nnz, c.weights, "w") : (loom_output){NULL, 0};
    loom_output y = loom_sparse_embedding(g, p, sp, w, (loom_combiner)c.comb, c.max_norm, "emb");
    loom_output loss = loom_reduce_sum(g, loom_mul(g, y, cst_f32(g, 2, od, c.gw, "gw"), NULL), -1, NULL, 0, "loss");
    loom_status *st = loom_status_new();
    /* dense gradient: the sparse one densified (pruned entries' index -1 included) */
    loom_output dp;
    cr_assert_eq(loom_gradients(g, 1, &loss, NULL, 1, &p, &dp, st), LOOM_OK, "%s", loom_status_message(st));
    loom_gradient sg;
    cr_assert_eq(loom_gradients_sparse(g, 1, &loss, NULL, 1, &p, &sg, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert(sg.indices.node, "%s: the gradient of params is not sparse", c.name);
    loom_session *s = loom_session_new(g, NULL, st);
    loom_tensor *pv = loom_tensor_from_data(LOOM_F32, 2, pd, c.params, NULL);
    loom_output fetch[4] = {y, dp, sg.indices, sg.values};
    loom_tensor *out[4] = {NULL};
    cr_assert_eq(loom_session_run(s, &p, &pv, 1, fetch, out, 4, NULL, 0, st), LOOM_OK, "%s: %s", c.name,
                 loom_status_message(st));
    expect_close(loom_tensor_data_const(out[0]), c.out, c.B * c.D, 2e-6, "out", c.name);
    expect_close(loom_tensor_data_const(out[1]), c.grad, c.V * c.D, 2e-6, "grad", c.name);
    /* the IndexedSlices: one entry per id; pruned ones at index INT64_MIN
     * (LOOM_NO_ROW_I64) with zero rows */
    cr_assert_eq(loom_tensor_numel(out[2]), c.nnz);
    const int64_t *ix = loom_tensor_data_const(out[2]);
    const float *rows = loom_tensor_data_const(out[3]);
    for (int64_t i = 0; i < c.nnz; i++) {
      /* TF prunes weights <= 0 only for mean and sqrtn */
      int pruned = c.ids[i] < 0 || (c.weighted && c.comb != 0 && !(c.weights[i] > 0));
      cr_assert_eq(ix[i], pruned ? INT64_MIN : c.ids[i], "%s: indices[%lld]", c.name, (long long)i);
      if (pruned)
        for (int64_t k = 0; k < c.D; k++) cr_assert_eq(rows[i * c.D + k], 0.0f);
    }
    for (int i = 0; i < 4; i++) loom_tensor_free(out[i]);
    loom_tensor_free(pv);
    loom_session_free(s);
    loom_status_free(st);
    loom_graph_free(g);
    free_case(&c);
    ncases++;
  }
  fclose(f);
  cr_assert_eq(ncases, 12, "fixture cases: %d", ncases);
}

/* ---------------------------------------------------------------- sparse optimizers */
enum { TV = 10, TD = 3 };

typedef struct {
  const char *name;
  const char *slots[2];
} opt_case;

static loom_optimizer *make_opt(loom_graph *g, int k) {
  loom_output lr = loom_const_f32(g, 0.1f, "lr");
  switch (k) {
  case 0: return loom_optimizer_sgd(lr);
  case 1: {
    loom_adagrad_options o = loom_adagrad_options_default();
    return loom_optimizer_adagrad(lr, &o);
  }
  case 2: {
    loom_ftrl_options o = loom_ftrl_options_default();
    o.l1 = 0.01;
    o.l2 = 0.01;
    return loom_optimizer_ftrl(lr, &o);
  }
  case 3: {
    loom_adam_options o = loom_adam_options_default();
    o.lazy = 1;
    return loom_optimizer_adam(lr, &o);
  }
  default: {
    loom_momentum_options o = loom_momentum_options_default();
    return loom_optimizer_momentum(lr, &o);
  }
  }
}

Test(sparse_embedding, optimizers_update_only_the_looked_up_rows) {
  static const opt_case OPTS[5] = {{"sgd", {NULL, NULL}},
                                   {"adagrad", {"accum", NULL}},
                                   {"ftrl", {"accum", "linear"}},
                                   {"lazy_adam", {"m", "v"}},
                                   {"momentum", {"momentum", NULL}}};
  /* touched rows: 1, 3, 4 (4 twice); pruned: id -1, id 7 with weight 0, id 8 with weight -2 */
  const int64_t ids[8] = {1, -1, 4, 7, 3, 4, 8, 1}, sp[4] = {0, 3, 3, 8};
  const float w[8] = {1, 1, 0.5f, 0, 2, 1, -2, 0.25f};
  const int touched[TV] = {0, 1, 0, 1, 1, 0, 0, 0, 0, 0};
  for (int k = 0; k < 5; k++) {
    for (int mean = 0; mean < 2; mean++) {
      loom_graph *g = loom_graph_new();
      int64_t td[2] = {TV, TD};
      loom_initializer init = loom_init_random_uniform(-1, 1, 7);
      loom_variable *v = loom_get_variable(g, "table", LOOM_F32, 2, td, &init, 1);
      loom_sparse rag = {cst_i64(g, 8, ids, "ids"), cst_i64(g, 4, sp, "splits")};
      if (k & 1) rag.values = loom_cast(g, rag.values, LOOM_I32, "ids32"); /* int32 ids: LOOM_NO_ROW_I32 */
      int64_t wn = 8;
      loom_output y = loom_sparse_embedding(g, loom_variable_output(v), rag, cst_f32(g, 1, &wn, w, "w"),
                                            mean ? LOOM_COMBINER_MEAN : LOOM_COMBINER_SQRTN, mean ? 0.0 : 0.8, "emb");
      float gwv[3 * TD] = {1, -2, 0.5f, 3, 1, 1, -1, 0.25f, 2};
      int64_t od[2] = {3, TD};
      loom_output loss = loom_reduce_sum(g, loom_mul(g, y, cst_f32(g, 2, od, gwv, "gw"), NULL), -1, NULL, 0, "loss");
      loom_optimizer *opt = make_opt(g, k);
      loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
      loom_node *initop = loom_global_variables_initializer(g);
      loom_status *st = loom_status_new();
      cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s: %s", OPTS[k].name, loom_status_message(st));
      loom_output fetch[3];
      int nf = 1;
      fetch[0] = loom_variable_output(v);
      for (int j = 0; j < 2 && OPTS[k].slots[j]; j++) {
        loom_variable *sv = loom_optimizer_get_slot(opt, v, OPTS[k].slots[j]);
        cr_assert(sv, "%s: no slot %s", OPTS[k].name, OPTS[k].slots[j]);
        fetch[nf++] = loom_variable_output(sv);
      }
      loom_session *s = loom_session_new(g, NULL, st);
      cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &initop, 1, st), LOOM_OK, "%s",
                   loom_status_message(st));
      loom_tensor *before[3] = {NULL}, *after[3] = {NULL};
      cr_assert_eq(loom_session_run(s, NULL, NULL, 0, fetch, before, nf, NULL, 0, st), LOOM_OK);
      for (int step = 0; step < 3; step++)
        cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &train, 1, st), LOOM_OK, "%s: %s",
                     OPTS[k].name, loom_status_message(st));
      cr_assert_eq(loom_session_run(s, NULL, NULL, 0, fetch, after, nf, NULL, 0, st), LOOM_OK);
      for (int j = 0; j < nf; j++) {
        const float *b = loom_tensor_data_const(before[j]), *a = loom_tensor_data_const(after[j]);
        for (int r = 0; r < TV; r++) {
          int same = memcmp(b + r * TD, a + r * TD, TD * sizeof(float)) == 0;
          if (touched[r])
            cr_assert(!same, "%s (%s): touched row %d of tensor %d did not change", OPTS[k].name,
                      mean ? "mean" : "sqrtn+max_norm", r, j);
          else
            cr_assert(same, "%s (%s): untouched row %d of tensor %d changed", OPTS[k].name,
                      mean ? "mean" : "sqrtn+max_norm", r, j);
        }
        loom_tensor_free(before[j]);
        loom_tensor_free(after[j]);
      }
      loom_session_free(s);
      loom_status_free(st);
      loom_optimizer_free(opt);
      loom_graph_free(g);
    }
  }
}

/* SGD's update of a touched row is -lr * (summed gradient rows): checks the
 * values, with a duplicate id and pruned entries around it. */
Test(sparse_embedding, sgd_step_values) {
  loom_graph *g = loom_graph_new();
  int64_t td[2] = {3, 2};
  loom_variable *v = loom_variable_new(g, cst_f32(g, 2, td, P3, "init"), 1, 0, "table");
  const int64_t ids[4] = {2, -1, 2, 0}, sp[3] = {0, 3, 4};
  loom_sparse rag = {cst_i64(g, 4, ids, "ids"), cst_i64(g, 3, sp, "splits")};
  loom_output y = loom_sparse_embedding(g, loom_variable_output(v), rag, (loom_output){NULL, 0}, LOOM_COMBINER_MEAN,
                                        0, "emb");
  loom_output loss = loom_reduce_sum(g, y, -1, NULL, 0, "loss");
  loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 0.5f, "lr"));
  loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
  loom_node *initop = loom_global_variables_initializer(g);
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &initop, 1, st), LOOM_OK);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &train, 1, st), LOOM_OK, "%s",
               loom_status_message(st));
  loom_output vo = loom_variable_output(v);
  loom_tensor *t = NULL;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &vo, &t, 1, NULL, 0, st), LOOM_OK);
  /* row 0 of y = mean(e2, e2): d/de2 = 1/2 + 1/2; row 1 = e0: d/de0 = 1 */
  float want[6] = {3 - 0.5f, 4 - 0.5f, 1, 0, 0 - 0.5f, 2 - 0.5f};
  tu_expect_f32(t, 2, td, want, 1e-6);
  loom_tensor_free(t);
  loom_session_free(s);
  loom_status_free(st);
  loom_optimizer_free(opt);
  loom_graph_free(g);
}

/* The table is also gathered: the two sparse gradients are concatenated
 * (pruned entries included) and applied by SGD; then it is also used
 * densely, so the sum is densified (the no-row index clamped). */
Test(sparse_embedding, gradient_summed_with_gather_and_dense_paths) {
  for (int dense = 0; dense < 2; dense++) {
    loom_graph *g = loom_graph_new();
    int64_t td[2] = {3, 2};
    loom_variable *v = loom_variable_new(g, cst_f32(g, 2, td, P3, "init"), 1, 0, "table");
    loom_output tv = loom_variable_output(v);
    const int64_t ids[3] = {-1, 2, 1}, sp[2] = {0, 3}, gi[2] = {0, 2};
    loom_sparse rag = {cst_i64(g, 3, ids, "ids"), cst_i64(g, 2, sp, "splits")};
    loom_output y = loom_sparse_embedding(g, tv, rag, (loom_output){NULL, 0}, LOOM_COMBINER_SUM, 0, "emb");
    loom_output gat = loom_gather(g, tv, cst_i64(g, 2, gi, "gi"), 0, "gather");
    loom_output loss = loom_add(g, loom_reduce_sum(g, y, -1, NULL, 0, NULL), loom_reduce_sum(g, gat, -1, NULL, 0, NULL),
                                NULL);
    if (dense) loss = loom_add(g, loss, loom_reduce_sum(g, loom_mul(g, tv, loom_const_f32(g, 2.0f, NULL), NULL), -1, NULL, 0, NULL), "loss");
    loom_gradient gr;
    loom_status *st = loom_status_new();
    cr_assert_eq(loom_gradients_sparse(g, 1, &loss, NULL, 1, &tv, &gr, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert_eq(gr.indices.node != NULL, !dense, "sparse only without the dense path");
    loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 1.0f, "lr"));
    loom_node *train = loom_optimizer_apply_gradients(opt, g, 1, &gr, &v, NULL, NULL);
    loom_node *initop = loom_global_variables_initializer(g);
    loom_session *s = loom_session_new(g, NULL, st);
    cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &initop, 1, st), LOOM_OK);
    cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &train, 1, st), LOOM_OK, "%s",
                 loom_status_message(st));
    loom_tensor *t = NULL;
    cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &tv, &t, 1, NULL, 0, st), LOOM_OK);
    /* d/drow: row 0 gathered (1), row 1 embedded (1), row 2 both (2); + 2 everywhere when dense */
    float d = dense ? 2.0f : 0.0f;
    float want[6] = {3 - 1 - d, 4 - 1 - d, 1 - 1 - d, 0 - 1 - d, 0 - 2 - d, 2 - 2 - d};
    tu_expect_f32(t, 2, td, want, 1e-6);
    loom_tensor_free(t);
    loom_session_free(s);
    loom_status_free(st);
    loom_optimizer_free(opt);
    loom_graph_free(g);
  }
}

/* ---------------------------------------------------------------- errors */
static void expect_run_error(const int64_t *ids, int nnz, const int64_t *sp, int nsp, const char *want) {
  loom_graph *g = loom_graph_new();
  int64_t pd[2] = {3, 2};
  loom_output p = cst_f32(g, 2, pd, P3, "params");
  int64_t n = nnz, ns = nsp;
  loom_output ip = loom_placeholder(g, LOOM_I64, 1, (int64_t[]){-1}, "ids");
  loom_output spp = loom_placeholder(g, LOOM_I64, 1, (int64_t[]){-1}, "splits");
  loom_sparse rag = {ip, spp};
  loom_output y = loom_sparse_embedding(g, p, rag, (loom_output){NULL, 0}, LOOM_COMBINER_SUM, 0, "my_embedding");
  loom_tensor *iv = i64v(n, ids), *sv = i64v(ns, sp);
  loom_output feeds[2] = {ip, spp};
  loom_tensor *vals[2] = {iv, sv};
  char msg[512];
  loom_code rc = tu_run_err(g, 2, feeds, vals, y, msg, sizeof msg);
  cr_assert_eq(rc, LOOM_INVALID_ARGUMENT, "want INVALID_ARGUMENT, got %s (%s)", loom_code_name(rc), msg);
  cr_assert(strstr(msg, "my_embedding"), "message does not name the node: %s", msg);
  cr_assert(strstr(msg, want), "message '%s' lacks '%s'", msg, want);
  loom_tensor_free(iv);
  loom_tensor_free(sv);
  loom_graph_free(g);
}

Test(sparse_embedding, errors_name_the_node) {
  const int64_t ok_sp[3] = {0, 1, 2};
  expect_run_error((int64_t[]){0, 3}, 2, ok_sp, 3, "ids[1] = 3 is not in [0, 3)");
  expect_run_error((int64_t[]){0, 1}, 2, (int64_t[]){1, 1, 2}, 3, "row_splits[0] = 1, expected 0");
  expect_run_error((int64_t[]){0, 1}, 2, (int64_t[]){0, 2, 1, 2}, 4, "non-decreasing");
  expect_run_error((int64_t[]){0, 1}, 2, (int64_t[]){0, 1}, 2, "must equal the number of values, 2");
  expect_run_error((int64_t[]){0, 1}, 2, (int64_t[]){0}, 1, "must equal the number of values, 2");
  /* an out-of-range id pruned by its weight (0) is no error with mean, as in
   * TF; with sum TF keeps the entry (it prunes weights only for mean and
   * sqrtn), so the id fails */
  for (int comb = 0; comb < 2; comb++) {
    loom_graph *g = loom_graph_new();
    int64_t pd[2] = {3, 2};
    const int64_t ids[2] = {9, 1}, sp[2] = {0, 2};
    const float w[2] = {0, 2};
    int64_t two = 2;
    loom_sparse rag = {cst_i64(g, 2, ids, "ids"), cst_i64(g, 2, sp, "splits")};
    loom_output y = loom_sparse_embedding(g, cst_f32(g, 2, pd, P3, "p"), rag, cst_f32(g, 1, &two, w, "w"),
                                          comb ? LOOM_COMBINER_MEAN : LOOM_COMBINER_SUM, 0, "e");
    if (comb) {
      loom_tensor *t = tu_run1(g, 0, NULL, NULL, y);
      float want[2] = {1, 0};
      tu_expect_f32(t, 2, (int64_t[]){1, 2}, want, 0);
      loom_tensor_free(t);
    } else {
      char msg[512];
      cr_assert_eq(tu_run_err(g, 0, NULL, NULL, y, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
      cr_assert(strstr(msg, "e: ") && strstr(msg, "ids[0] = 9"), "%s", msg);
    }
    loom_graph_free(g);
  }
}

Test(sparse_embedding, build_errors_name_the_node) {
  struct {
    loom_dtype ids_dt, sp_dt, p_dt;
    int comb;
    const char *want;
  } cases[] = {
      {LOOM_I64, LOOM_I32, LOOM_F32, 0, "row_splits must be int64"},
      {LOOM_F32, LOOM_I64, LOOM_F32, 0, "ids must be int32 or int64"},
      {LOOM_I64, LOOM_I64, LOOM_F64, 0, "params must be float32"},
      {LOOM_I64, LOOM_I64, LOOM_F32, 7, "combiner 7"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    loom_graph *g = loom_graph_new();
    loom_output p = loom_placeholder(g, cases[i].p_dt, 2, (int64_t[]){4, 2}, "p");
    loom_sparse rag = {loom_placeholder(g, cases[i].ids_dt, 1, (int64_t[]){-1}, "ids"),
                       loom_placeholder(g, cases[i].sp_dt, 1, (int64_t[]){-1}, "splits")};
    loom_sparse_embedding(g, p, rag, (loom_output){NULL, 0}, (loom_combiner)cases[i].comb, 0, "bad_embedding");
    loom_status *st = loom_status_new();
    cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT, "case %zu", i);
    const char *m = loom_status_message(st);
    cr_assert(strstr(m, "bad_embedding") && strstr(m, cases[i].want), "case %zu: %s", i, m);
    loom_status_free(st);
    loom_graph_free(g);
  }
  /* weights with another number of values */
  loom_graph *g = loom_graph_new();
  loom_sparse rag = {loom_placeholder(g, LOOM_I64, 1, (int64_t[]){3}, "ids"),
                     loom_placeholder(g, LOOM_I64, 1, (int64_t[]){-1}, "splits")};
  loom_ragged_multi_hot(g, rag, loom_placeholder(g, LOOM_F32, 1, (int64_t[]){2}, "w"), 5, "bad_multi_hot");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "bad_multi_hot"), "%s", loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- ragged placeholders */
Test(sparse_embedding, ragged_placeholders_fed_directly) {
  loom_graph *g = loom_graph_new();
  int64_t pd[2] = {3, 2};
  loom_output p = cst_f32(g, 2, pd, P3, "params");
  loom_sparse rag = {loom_placeholder(g, LOOM_I64, 1, (int64_t[]){-1}, "ids"),
                     loom_placeholder(g, LOOM_I64, 1, (int64_t[]){-1}, "ids/row_splits")};
  loom_output wp = loom_placeholder(g, LOOM_F32, 1, (int64_t[]){-1}, "weights");
  loom_output y = loom_sparse_embedding(g, p, rag, wp, LOOM_COMBINER_SUM, 0, "emb");
  int64_t yd[LOOM_MAX_DIMS];
  cr_assert_eq(loom_output_dims(y, yd), 2);
  cr_assert(yd[0] == -1 && yd[1] == 2);
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  /* two batches of different sizes through the same session */
  for (int b = 0; b < 2; b++) {
    const int64_t ids0[3] = {0, 2, 1}, sp0[3] = {0, 1, 3}, ids1[1] = {1}, sp1[4] = {0, 0, 1, 1};
    const float w0[3] = {1, 2, 3}, w1[1] = {4};
    loom_tensor *iv = b ? i64v(1, ids1) : i64v(3, ids0), *sv = b ? i64v(4, sp1) : i64v(3, sp0);
    loom_tensor *wv = b ? f32v(1, w1) : f32v(3, w0);
    loom_output feeds[3] = {rag.values, rag.row_splits, wp};
    loom_tensor *vals[3] = {iv, sv, wv}, *out = NULL;
    cr_assert_eq(loom_session_run(s, feeds, vals, 3, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s",
                 loom_status_message(st));
    if (b == 0) tu_expect_f32(out, 2, (int64_t[]){2, 2}, (float[]){3, 4, 3, 4}, 0);
    else tu_expect_f32(out, 2, (int64_t[]){3, 2}, (float[]){0, 0, 4, 0, 0, 0}, 0);
    loom_tensor_free(out);
    loom_tensor_free(iv);
    loom_tensor_free(sv);
    loom_tensor_free(wv);
  }
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- DenseToRagged */
static void expect_splits(const loom_tensor *t, int n, const int64_t *want) {
  cr_assert_eq(loom_tensor_dtype(t), LOOM_I64);
  cr_assert_eq(loom_tensor_numel(t), n);
  for (int i = 0; i < n; i++)
    cr_assert_eq(((const int64_t *)loom_tensor_data_const(t))[i], want[i], "splits[%d]", i);
}

Test(dense_to_ragged, strings_through_the_host_pass) {
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_STRING, 2, (int64_t[]){-1, 3}, "x");
  loom_sparse r = loom_dense_to_ragged(g, x, 1, -1, "to_ragged");
  loom_sparse keep = loom_dense_to_ragged(g, x, 0, -1, "keep_all");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  int64_t kd[LOOM_MAX_DIMS];
  cr_assert_eq(loom_output_dims(keep.values, kd), 1);
  cr_assert_eq(kd[0], -1);
  const char *in[6] = {"a", "", "ccc", "", "", ""};
  loom_tensor *xv = loom_tensor_new(LOOM_STRING, 2, (int64_t[]){2, 3}, NULL);
  for (int i = 0; i < 6; i++) loom_tensor_set_string(xv, i, in[i], strlen(in[i]), NULL);
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  for (int rep = 0; rep < 2; rep++) { /* the host pass's buffers are reused */
    loom_output fetch[4] = {r.values, r.row_splits, keep.values, keep.row_splits};
    loom_tensor *out[4] = {NULL};
    cr_assert_eq(loom_session_run(s, &x, &xv, 1, fetch, out, 4, NULL, 0, st), LOOM_OK, "%s",
                 loom_status_message(st));
    cr_assert_eq(loom_tensor_dtype(out[0]), LOOM_STRING);
    cr_assert_eq(loom_tensor_numel(out[0]), 2);
    size_t len;
    const char *s0 = loom_tensor_get_string(out[0], 0, &len);
    cr_assert(len == 1 && !memcmp(s0, "a", 1));
    s0 = loom_tensor_get_string(out[0], 1, &len);
    cr_assert(len == 3 && !memcmp(s0, "ccc", 3));
    expect_splits(out[1], 3, (int64_t[]){0, 2, 2});
    cr_assert_eq(loom_tensor_numel(out[2]), 6);
    expect_splits(out[3], 3, (int64_t[]){0, 3, 6});
    for (int i = 0; i < 4; i++) loom_tensor_free(out[i]);
  }
  loom_session_free(s);
  loom_status_free(st);
  loom_tensor_free(xv);
  loom_graph_free(g);
}

/* A view op inside the host pass (its output is its input's bytes), and
 * runs alternating between two fetch lists and changing fed values: the
 * cached walk of one run never serves the other, and string values always
 * point at the current feed. */
Test(dense_to_ragged, view_in_the_host_pass_and_alternating_fetches) {
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_STRING, 2, (int64_t[]){-1, 2}, "x");
  loom_output flat = loom_reshape(g, x, 2, (int64_t[]){-1, 1}, "flat");
  loom_sparse r = loom_dense_to_ragged(g, flat, 1, -1, "per_element");
  loom_sparse rows = loom_dense_to_ragged(g, x, 1, -1, "per_row");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  const char *in[2][4] = {{"ab", "", "", "xyz"}, {"", "q", "rs", "t"}};
  for (int rep = 0; rep < 6; rep++) {
    int b = rep % 2, which = (rep / 2) % 2;
    loom_tensor *xv = loom_tensor_new(LOOM_STRING, 2, (int64_t[]){2, 2}, NULL);
    for (int i = 0; i < 4; i++) loom_tensor_set_string(xv, i, in[b][i], strlen(in[b][i]), NULL);
    loom_output fetch[2] = {which ? rows.values : r.values, which ? rows.row_splits : r.row_splits};
    loom_tensor *out[2] = {NULL};
    cr_assert_eq(loom_session_run(s, &x, &xv, 1, fetch, out, 2, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
    int k = 0;
    for (int i = 0; i < 4; i++) {
      if (!in[b][i][0]) continue;
      size_t len;
      const char *v = loom_tensor_get_string(out[0], k++, &len);
      cr_assert(len == strlen(in[b][i]) && !memcmp(v, in[b][i], len), "rep %d value %d", rep, k - 1);
    }
    cr_assert_eq(loom_tensor_numel(out[0]), k);
    if (which) expect_splits(out[1], 3, b ? (int64_t[]){0, 1, 3} : (int64_t[]){0, 1, 2});
    else expect_splits(out[1], 5, b ? (int64_t[]){0, 0, 1, 2, 3} : (int64_t[]){0, 1, 1, 1, 2});
    loom_tensor_free(out[0]);
    loom_tensor_free(out[1]);
    loom_tensor_free(xv);
  }
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

Test(dense_to_ragged, ints_and_floats) {
  loom_graph *g = loom_graph_new();
  const int32_t xi[6] = {4, -1, 2, -1, -1, 7};
  const float xf[4] = {0, -1, 2.5f, 0};
  loom_output ci = loom_const_data(g, LOOM_I32, 2, (int64_t[]){3, 2}, xi, "xi");
  loom_output cf = loom_const_data(g, LOOM_F32, 2, (int64_t[]){2, 2}, xf, "xf");
  loom_sparse ri = loom_dense_to_ragged(g, ci, 1, -1, "ri");
  loom_sparse rf = loom_dense_to_ragged(g, cf, 1, 0, "rf"); /* floats are never dropped */
  loom_sparse r7 = loom_dense_to_ragged(g, ci, 1, 7, "r7");
  loom_output fetch[6] = {ri.values, ri.row_splits, rf.values, rf.row_splits, r7.values, r7.row_splits};
  loom_tensor *out[6] = {NULL};
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, fetch, out, 6, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_tensor_dtype(out[0]), LOOM_I32);
  cr_assert_eq(loom_tensor_numel(out[0]), 3);
  const int32_t *vi = loom_tensor_data_const(out[0]);
  cr_assert(vi[0] == 4 && vi[1] == 2 && vi[2] == 7);
  expect_splits(out[1], 4, (int64_t[]){0, 1, 2, 3});
  tu_expect_f32(out[2], 1, (int64_t[]){4}, xf, 0);
  expect_splits(out[3], 3, (int64_t[]){0, 2, 4});
  cr_assert_eq(loom_tensor_numel(out[4]), 5);
  expect_splits(out[5], 4, (int64_t[]){0, 2, 4, 5});
  for (int i = 0; i < 6; i++) loom_tensor_free(out[i]);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

/* dense int64 ids (-1 padded) from a feed -> ragged (host pass) -> embedding of
 * a variable -> Adagrad: the rows of the fed ids change, the others do not. */
Test(dense_to_ragged, feeds_an_embedding_trained_with_adagrad) {
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_I64, 2, (int64_t[]){-1, 2}, "x");
  loom_sparse r = loom_dense_to_ragged(g, x, 1, -1, "ragged");
  int64_t td[2] = {6, 2};
  loom_initializer init = loom_init_random_uniform(-1, 1, 3);
  loom_variable *v = loom_get_variable(g, "emb_table", LOOM_F32, 2, td, &init, 1);
  loom_output y = loom_sparse_embedding(g, loom_variable_output(v), r, (loom_output){NULL, 0}, LOOM_COMBINER_MEAN, 0,
                                        "emb");
  loom_output loss = loom_reduce_sum(g, loom_square(g, y, NULL), -1, NULL, 0, "loss");
  loom_adagrad_options ao = loom_adagrad_options_default();
  loom_optimizer *opt = loom_optimizer_adagrad(loom_const_f32(g, 0.1f, "lr"), &ao);
  loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
  loom_node *initop = loom_global_variables_initializer(g);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &initop, 1, st), LOOM_OK);
  loom_output vo = loom_variable_output(v);
  loom_tensor *before = NULL, *after = NULL;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &vo, &before, 1, NULL, 0, st), LOOM_OK);
  const int64_t xv[6] = {2, -1, -1, -1, 5, 2};
  loom_tensor *xt = loom_tensor_from_data(LOOM_I64, 2, (int64_t[]){3, 2}, xv, NULL);
  loom_tensor *yt = NULL;
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, &y, &yt, 1, &train, 1, st), LOOM_OK, "%s", loom_status_message(st));
  /* y (before the update): row 0 = e2, row 1 = 0, row 2 = (e5 + e2) / 2 */
  const float *b = loom_tensor_data_const(before), *yy = loom_tensor_data_const(yt);
  float want[6] = {b[4], b[5], 0, 0, (b[10] + b[4]) / 2, (b[11] + b[5]) / 2};
  tu_expect_f32(yt, 2, (int64_t[]){3, 2}, want, 1e-6);
  (void)yy;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &vo, &after, 1, NULL, 0, st), LOOM_OK);
  const float *a = loom_tensor_data_const(after);
  for (int row = 0; row < 6; row++) {
    int same = !memcmp(a + 2 * row, b + 2 * row, 2 * sizeof(float));
    cr_assert_eq(same, !(row == 2 || row == 5), "row %d", row);
  }
  loom_tensor_free(before);
  loom_tensor_free(after);
  loom_tensor_free(yt);
  loom_tensor_free(xt);
  loom_session_free(s);
  loom_status_free(st);
  loom_optimizer_free(opt);
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- RaggedMultiHot */
Test(ragged_multi_hot, counts_weights_and_ignores_out_of_range) {
  loom_graph *g = loom_graph_new();
  const int64_t ids[6] = {1, 3, 1, -1, 4, 0}, sp[4] = {0, 3, 3, 6};
  const float w[6] = {0.5f, 2, 1, 9, 9, 3};
  loom_sparse rag = {cst_i64(g, 6, ids, "ids"), cst_i64(g, 4, sp, "sp")};
  int64_t wn = 6;
  loom_output a = loom_ragged_multi_hot(g, rag, (loom_output){NULL, 0}, 4, "mh");
  loom_output b = loom_ragged_multi_hot(g, rag, cst_f32(g, 1, &wn, w, "w"), 4, "mhw");
  loom_tensor *ta = tu_run1(g, 0, NULL, NULL, a), *tb = tu_run1(g, 0, NULL, NULL, b);
  float wa[12] = {0, 2, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0};
  float wb[12] = {0, 1.5f, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0};
  tu_expect_f32(ta, 2, (int64_t[]){3, 4}, wa, 0);
  tu_expect_f32(tb, 2, (int64_t[]){3, 4}, wb, 0);
  loom_tensor_free(ta);
  loom_tensor_free(tb);
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- RaggedPadIndex */
/* rows of 3, 0, 5 values: steps of k values, padding slots read value 8 (one past the end) */
Test(ragged_pad_index, steps_lengths_and_padding_from_fed_row_splits) {
  loom_graph *g = loom_graph_new();
  loom_output sp = loom_placeholder(g, LOOM_I64, 1, (int64_t[]){-1}, "sp");
  loom_output len1, len2;
  loom_output i1 = loom__ragged_pad_index(g, sp, (loom_output){NULL, 0}, 1, 0, &len1, "i1");
  loom_output i2 = loom__ragged_pad_index(g, sp, (loom_output){NULL, 0}, 2, 1, &len2, "i2");
  cr_assert_eq(loom_output_ndim(i1), 2);
  cr_assert_eq(loom_output_ndim(i2), 3);
  const int64_t splits[4] = {0, 3, 3, 8};
  loom_tensor *fv = i64v(4, splits);
  loom_tensor *t1 = tu_run1(g, 1, &sp, &fv, i1), *t2 = tu_run1(g, 1, &sp, &fv, i2);
  loom_tensor *l1 = tu_run1(g, 1, &sp, &fv, len1), *l2 = tu_run1(g, 1, &sp, &fv, len2);
  const int64_t w1[15] = {0, 1, 2, 8, 8, 8, 8, 8, 8, 8, 3, 4, 5, 6, 7};
  const int64_t w2[18] = {0, 1, 2, 8, 8, 8, 8, 8, 8, 8, 8, 8, 3, 4, 5, 6, 7, 8};
  const int64_t wl1[3] = {3, 0, 5}, wl2[3] = {2, 0, 3};
  cr_assert_eq(loom_tensor_ndim(t1), 2);
  cr_assert(loom_tensor_dim(t1, 0) == 3 && loom_tensor_dim(t1, 1) == 5);
  cr_assert(loom_tensor_dim(t2, 0) == 3 && loom_tensor_dim(t2, 1) == 3 && loom_tensor_dim(t2, 2) == 2);
  cr_assert_arr_eq(loom_tensor_data(t1), w1, sizeof w1);
  cr_assert_arr_eq(loom_tensor_data(t2), w2, sizeof w2);
  cr_assert_arr_eq(loom_tensor_data(l1), wl1, sizeof wl1);
  cr_assert_arr_eq(loom_tensor_data(l2), wl2, sizeof wl2);
  loom_tensor_free(t1);
  loom_tensor_free(t2);
  loom_tensor_free(l1);
  loom_tensor_free(l2);
  loom_tensor_free(fv);
  loom_graph_free(g);
}

Test(ragged_pad_index, lengths_that_differ_from_the_expected_fail_naming_the_example) {
  loom_graph *g = loom_graph_new();
  const int64_t a[3] = {0, 2, 3}, b[3] = {0, 2, 4};
  loom_output la;
  loom__ragged_pad_index(g, cst_i64(g, 3, a, "a"), (loom_output){NULL, 0}, 1, 0, &la, "pa");
  loom_output ib = loom__ragged_pad_index(g, cst_i64(g, 3, b, "b"), la, 1, 0, NULL, "pb");
  char msg[512];
  cr_assert_eq(tu_run_err(g, 0, NULL, NULL, ib, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "pb") && strstr(msg, "example 1 has 1 steps in one column and 2 in another"), "%s", msg);
  const int64_t bad[3] = {0, 2, 1};
  loom_output ic = loom__ragged_pad_index(g, cst_i64(g, 3, bad, "bad"), (loom_output){NULL, 0}, 1, 0, NULL, "pc");
  cr_assert_eq(tu_run_err(g, 0, NULL, NULL, ic, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "non-decreasing"), "%s", msg);
  loom_graph_free(g);
}

/* ---------------------------------------------------------------- performance contract */
Test(sparse_embedding, steady_state_training_step_does_not_allocate) {
  tu_alloc_count_begin();
  loom_graph *g = loom_graph_new();
  enum { NV = 1000, ND = 16, NB = 256, PER = 5 };
  int64_t td[2] = {NV, ND};
  loom_initializer init = loom_init_random_uniform(-1, 1, 5);
  loom_variable *v = loom_get_variable(g, "t", LOOM_F32, 2, td, &init, 1);
  loom_sparse rag = {loom_placeholder(g, LOOM_I64, 1, (int64_t[]){-1}, "ids"),
                     loom_placeholder(g, LOOM_I64, 1, (int64_t[]){NB + 1}, "splits")};
  loom_output y = loom_sparse_embedding(g, loom_variable_output(v), rag, (loom_output){NULL, 0}, LOOM_COMBINER_SQRTN,
                                        1.0, "emb");
  loom_output loss = loom_reduce_sum(g, loom_square(g, y, NULL), -1, NULL, 0, "loss");
  loom_adagrad_options ao = loom_adagrad_options_default();
  loom_optimizer *opt = loom_optimizer_adagrad(loom_const_f32(g, 0.05f, "lr"), &ao);
  loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
  loom_node *initop = loom_global_variables_initializer(g);
  loom_session_options so = loom_session_options_default();
  so.num_threads = 2;
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, &so, st);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &initop, 1, st), LOOM_OK);
  int64_t nnz = NB * PER;
  loom_tensor *iv = loom_tensor_new(LOOM_I64, 1, &nnz, NULL), *sv = loom_tensor_new(LOOM_I64, 1, (int64_t[]){NB + 1}, NULL);
  int64_t *ip = loom_tensor_data(iv), *spp = loom_tensor_data(sv);
  for (int64_t i = 0; i < nnz; i++) ip[i] = (i * 7919) % NV - (i % 13 == 0); /* some -1 */
  for (int64_t r = 0; r <= NB; r++) spp[r] = r * PER;
  loom_output feeds[2] = {rag.values, rag.row_splits};
  loom_tensor *vals[2] = {iv, sv};
  cr_assert_eq(loom_session_run(s, feeds, vals, 2, NULL, NULL, 0, &train, 1, st), LOOM_OK, "%s",
               loom_status_message(st));
  long before = tu_alloc_count();
  for (int r = 0; r < 5; r++) cr_assert_eq(loom_session_run(s, feeds, vals, 2, NULL, NULL, 0, &train, 1, st), LOOM_OK);
  long after = tu_alloc_count();
  cr_assert_eq(after - before, 0, "steady-state training steps allocated %ld times", after - before);
  loom_tensor_free(iv);
  loom_tensor_free(sv);
  loom_session_free(s);
  loom_status_free(st);
  loom_optimizer_free(opt);
  loom_graph_free(g);
  tu_alloc_count_end();
}

/* The same with the ids coming through DenseToRagged (the session's host
 * pass): its buffers, string arena and feed lists are reused from run to run. */
Test(dense_to_ragged, steady_state_host_pass_does_not_allocate) {
  tu_alloc_count_begin();
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_I64, 2, (int64_t[]){-1, 4}, "x");
  loom_output xs = loom_placeholder(g, LOOM_STRING, 2, (int64_t[]){-1, 2}, "xs");
  loom_sparse r = loom_dense_to_ragged(g, x, 1, -1, "ragged");
  loom_sparse rs = loom_dense_to_ragged(g, xs, 1, 0, "ragged_s");
  int64_t td[2] = {50, 8};
  loom_initializer init = loom_init_random_uniform(-1, 1, 5);
  loom_variable *v = loom_get_variable(g, "t", LOOM_F32, 2, td, &init, 1);
  loom_output y = loom_sparse_embedding(g, loom_variable_output(v), r, (loom_output){NULL, 0}, LOOM_COMBINER_MEAN, 0,
                                        "emb");
  loom_output loss = loom_reduce_sum(g, loom_square(g, y, NULL), -1, NULL, 0, "loss");
  loom_adagrad_options ao = loom_adagrad_options_default();
  loom_optimizer *opt = loom_optimizer_adagrad(loom_const_f32(g, 0.05f, "lr"), &ao);
  loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
  loom_node *initop = loom_global_variables_initializer(g);
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &initop, 1, st), LOOM_OK);
  int64_t xv[32 * 4];
  for (int i = 0; i < 32 * 4; i++) xv[i] = i % 3 == 0 ? -1 : (i * 7) % 50;
  loom_tensor *xt = loom_tensor_from_data(LOOM_I64, 2, (int64_t[]){32, 4}, xv, NULL);
  loom_tensor *st_x = loom_tensor_new(LOOM_STRING, 2, (int64_t[]){32, 2}, NULL);
  for (int i = 0; i < 64; i++) loom_tensor_set_string(st_x, i, "abcdef", (size_t)(i % 4), NULL);
  loom_output feeds[2] = {x, xs};
  loom_tensor *vals[2] = {xt, st_x};
  loom_node *targets[2] = {train, rs.values.node};
  cr_assert_eq(loom_session_run(s, feeds, vals, 2, NULL, NULL, 0, targets, 2, st), LOOM_OK, "%s",
               loom_status_message(st));
  long before = tu_alloc_count();
  for (int i = 0; i < 5; i++) cr_assert_eq(loom_session_run(s, feeds, vals, 2, NULL, NULL, 0, targets, 2, st), LOOM_OK);
  long after = tu_alloc_count();
  cr_assert_eq(after - before, 0, "steady-state runs through the host pass allocated %ld times", after - before);
  loom_tensor_free(xt);
  loom_tensor_free(st_x);
  loom_session_free(s);
  loom_status_free(st);
  loom_optimizer_free(opt);
  loom_graph_free(g);
  tu_alloc_count_end();
}

/* Many ids with repeats (the sparse optimizers' radix sort, one and two
 * passes, ids that share their low 11 bits): one Adagrad step (lr 1,
 * accumulators 0.1) with the sum combiner: the gradient G of row v is the sum
 * of the loss weights of the output rows that look v up, summed before the
 * update (acc = 0.1 + G^2, v -= G / sqrt(acc)). */
Test(sparse_embedding, adagrad_many_repeated_ids) {
  const int64_t vocab[2] = {300, 5000};
  for (int c = 0; c < 2; c++) {
    enum { NB = 100, PER = 5, ND = 4 };
    int64_t V = vocab[c], nnz = NB * PER;
    loom_graph *g = loom_graph_new();
    int64_t td[2] = {V, ND};
    loom_initializer init = loom_init_random_uniform(-1, 1, 9);
    loom_variable *v = loom_get_variable(g, "t", LOOM_F32, 2, td, &init, 1);
    int64_t *ids = malloc((size_t)nnz * sizeof *ids), sp[NB + 1];
    for (int64_t i = 0; i < nnz; i++)
      ids[i] = c ? ((i * 7) % 3) * 2048 + (i * i) % 5 : (i * i * 31 + 7) % V - (i % 17 == 0);
    for (int r = 0; r <= NB; r++) sp[r] = r * PER;
    float gw[NB * ND];
    for (int i = 0; i < NB * ND; i++) gw[i] = 0.25f * (float)(i % 5) - 0.5f;
    loom_sparse rag = {cst_i64(g, nnz, ids, "ids"), cst_i64(g, NB + 1, sp, "sp")};
    loom_output y = loom_sparse_embedding(g, loom_variable_output(v), rag, (loom_output){NULL, 0}, LOOM_COMBINER_SUM,
                                          0, "emb");
    loom_output loss =
        loom_reduce_sum(g, loom_mul(g, y, cst_f32(g, 2, (int64_t[]){NB, ND}, gw, "gw"), NULL), -1, NULL, 0, "loss");
    loom_adagrad_options ao = loom_adagrad_options_default();
    loom_optimizer *opt = loom_optimizer_adagrad(loom_const_f32(g, 1.0f, "lr"), &ao);
    loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
    loom_node *initop = loom_global_variables_initializer(g);
    loom_status *st = loom_status_new();
    loom_session *s = loom_session_new(g, NULL, st);
    loom_output vo = loom_variable_output(v);
    loom_tensor *b = NULL, *a = NULL;
    cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &initop, 1, st), LOOM_OK);
    cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &vo, &b, 1, NULL, 0, st) == LOOM_OK &&
                     loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &train, 1, st) == LOOM_OK &&
                     loom_session_run(s, NULL, NULL, 0, &vo, &a, 1, NULL, 0, st) == LOOM_OK,
                 1, "%s", loom_status_message(st));
    float *want = malloc((size_t)(V * ND) * sizeof *want);
    memcpy(want, loom_tensor_data_const(b), (size_t)(V * ND) * sizeof *want);
    float *sum = calloc((size_t)(V * ND), sizeof *sum);
    for (int64_t i = 0; i < nnz; i++)
      if (ids[i] >= 0)
        for (int k = 0; k < ND; k++) sum[ids[i] * ND + k] += gw[(i / PER) * ND + k];
    for (int64_t i = 0; i < V * ND; i++) want[i] -= sum[i] / sqrtf(0.1f + sum[i] * sum[i]);
    tu_expect_f32(a, 2, td, want, 1e-5);
    free(want);
    free(sum);
    free(ids);
    loom_tensor_free(a);
    loom_tensor_free(b);
    loom_session_free(s);
    loom_status_free(st);
    loom_optimizer_free(opt);
    loom_graph_free(g);
  }
}

/* The ops and their attributes survive a graph round trip (export). */
Test(sparse_ops, graph_serialization_round_trip) {
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_I64, 2, (int64_t[]){-1, 3}, "x");
  loom_sparse r = loom_dense_to_ragged(g, x, 1, -1, "ragged");
  int64_t pd[2] = {3, 2};
  loom_output p = cst_f32(g, 2, pd, P3, "params");
  loom_sparse_embedding(g, p, r, (loom_output){NULL, 0}, LOOM_COMBINER_SQRTN, 2.5, "emb");
  loom_ragged_multi_hot(g, r, (loom_output){NULL, 0}, 3, "mh");
  void *data = NULL;
  size_t size = 0;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_serialize(g, 0, NULL, &data, &size, st), LOOM_OK, "%s", loom_status_message(st));
  loom_graph *h = loom_graph_new();
  cr_assert_eq(loom_graph_deserialize(h, data, size, st), LOOM_OK, "%s", loom_status_message(st));
  loom_buffer_free(data);
  const int64_t xv[6] = {0, -1, 0, 1, 2, -1};
  loom_tensor *xt = loom_tensor_from_data(LOOM_I64, 2, (int64_t[]){2, 3}, xv, NULL);
  loom_graph *gs[2] = {g, h};
  for (int k = 0; k < 2; k++) {
    loom_output xk = loom_graph_find_output(gs[k], "x");
    loom_output fetch[2] = {loom_graph_find_output(gs[k], "emb"), loom_graph_find_output(gs[k], "mh")};
    loom_tensor *out[2] = {NULL};
    loom_session *s = loom_session_new(gs[k], NULL, st);
    cr_assert_eq(loom_session_run(s, &xk, &xt, 1, fetch, out, 2, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
    /* row 0: e0 (3,4) twice, clipped to norm 2.5 -> (1.5, 2) each, sum / sqrt(2);
     * row 1: e1 (1, 0) + e2 (0, 2), / sqrt(2) */
    float r2 = sqrtf(2.0f);
    tu_expect_f32(out[0], 2, (int64_t[]){2, 2}, (float[]){3 / r2, 4 / r2, 1 / r2, 2 / r2}, 1e-6);
    tu_expect_f32(out[1], 2, (int64_t[]){2, 3}, (float[]){2, 0, 0, 0, 1, 1}, 0);
    loom_tensor_free(out[0]);
    loom_tensor_free(out[1]);
    loom_session_free(s);
  }
  loom_tensor_free(xt);
  loom_status_free(st);
  loom_graph_free(h);
  loom_graph_free(g);
}
