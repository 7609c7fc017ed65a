/* String tensors in ordinary session runs (not the host pass): AsString and
 * Gather/Tile on strings computed from a variable, values copied out by the
 * fetch, the session's string arena reset every run, a steady run with
 * string outputs allocating nothing, index errors naming the node. */
#include "test_util.h"

static void expect_strings(const loom_tensor *t, int n, const char *const *want, const char *what) {
  cr_assert_eq(loom_tensor_dtype(t), LOOM_STRING, "%s: dtype %s", what, loom_dtype_name(loom_tensor_dtype(t)));
  cr_assert_eq(loom_tensor_numel(t), n, "%s: %lld strings, want %d", what, (long long)loom_tensor_numel(t), n);
  for (int i = 0; i < n; i++) {
    size_t len = 0;
    const char *s = loom_tensor_get_string(t, i, &len);
    cr_expect(len == strlen(want[i]) && !memcmp(s, want[i], len), "%s[%d] = '%.*s', want '%s'", what, i, (int)len,
              s, want[i]);
    cr_expect_eq(s[len], 0, "%s[%d] is not NUL-terminated", what, i);
  }
}

static loom_output string_const(loom_graph *g, int ndim, const int64_t *dims, const char *const *v, const char *name) {
  loom_tensor *t = loom_tensor_new(LOOM_STRING, ndim, dims, NULL);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) loom_tensor_set_string(t, i, v[i], strlen(v[i]), NULL);
  loom_output o = loom_const(g, t, name);
  loom_tensor_free(t);
  return o;
}

/* A variable's values become strings (AsString) and pick vocabulary entries
 * (Gather of a string Const): this ran only in the host pass before, which
 * cannot read variables. Assigning the variable changes the strings. */
Test(string_run, as_string_and_gather_read_a_variable) {
  loom_graph *g = loom_graph_new();
  int64_t d3[1] = {3};
  int64_t init[3] = {2, 0, 3};
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_I64, 1, d3, init, "init"), 0, 0, "v");
  cr_assert(v);
  loom_output vo = loom_variable_output(v);
  int64_t dn[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_I32, 1, dn, "x");
  /* decimal text of v[x] */
  loom_output txt = loom_as_string(g, loom_gather(g, vo, x, 0, NULL), "txt");
  /* vocabulary entries: vocab[v[x]] */
  static const char *const vocab[4] = {"zero", "one", "two", "three"};
  int64_t d4[1] = {4};
  loom_output voc = string_const(g, 1, d4, vocab, "vocab");
  loom_output names = loom_gather(g, voc, loom_gather(g, vo, x, 0, NULL), 0, "names");
  /* strings through view ops and Tile: [n] -> [n,1] -> tiled [n,2] */
  loom_output tiled = loom_tile(g, loom_expand_dims(g, names, -1, NULL), (int64_t[]){1, 2}, "tiled");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "%s", loom_status_message(st));
  loom_node *ini = loom_global_variables_initializer(g);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &ini, 1, st), LOOM_OK, "%s", loom_status_message(st));
  int32_t xi[4] = {2, 0, 1, 2};
  int64_t d[1] = {4};
  loom_tensor *xt = loom_tensor_from_data(LOOM_I32, 1, d, xi, NULL);
  loom_output fetch[3] = {txt, names, tiled};
  loom_tensor *out[3] = {0};
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, fetch, out, 3, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  static const char *const t1[4] = {"3", "2", "0", "3"};
  static const char *const n1[4] = {"three", "two", "zero", "three"};
  static const char *const tl1[8] = {"three", "three", "two", "two", "zero", "zero", "three", "three"};
  expect_strings(out[0], 4, t1, "txt");
  expect_strings(out[1], 4, n1, "names");
  expect_strings(out[2], 8, tl1, "tiled");
  cr_expect_eq(loom_tensor_ndim(out[2]), 2);
  cr_expect_eq(loom_tensor_dim(out[2], 1), 2);

  /* a new value of the variable: new strings (nothing was computed ahead of the run) */
  int64_t nv[3] = {1, 3, 0};
  loom_output assign = loom_assign(g, vo, loom_const_data(g, LOOM_I64, 1, d3, nv, NULL), NULL);
  loom_node *an = assign.node;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &an, 1, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, fetch, out, 3, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  static const char *const t2[4] = {"0", "1", "3", "0"};
  static const char *const n2[4] = {"zero", "one", "three", "zero"};
  expect_strings(out[0], 4, t2, "txt after assign");
  expect_strings(out[1], 4, n2, "names after assign");

  /* an index outside the vocabulary fails the run naming the Gather */
  loom_output bad = loom_gather(g, voc, x, 0, "bad_lookup");
  int32_t xb[4] = {0, 1, 4, 2};
  loom_tensor *xbt = loom_tensor_from_data(LOOM_I32, 1, d, xb, NULL);
  loom_tensor *bo = NULL;
  cr_expect_eq(loom_session_run(s, &x, &xbt, 1, &bad, &bo, 1, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "bad_lookup"), "%s", loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), "4"), "%s", loom_status_message(st));
  loom_tensor_free(bo);
  loom_tensor_free(xbt);
  for (int i = 0; i < 3; i++) loom_tensor_free(out[i]);
  loom_tensor_free(xt);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

/* After warm-up a run whose fetches are strings allocates nothing: the
 * session's string arena keeps its chunk, the fetched string tensors keep
 * their string block. Many long strings, so the arena grows past its
 * first chunk during the warm-up. */
Test(string_run, steady_state_with_string_outputs_allocates_nothing) {
  tu_alloc_count_begin();
  loom_graph *g = loom_graph_new();
  int64_t dn[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_I64, 1, dn, "x");
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_I64, 0, NULL, &(int64_t){1000000000000LL}, NULL),
                                       0, 0, "offset");
  loom_output txt = loom_as_string(g, loom_add(g, x, loom_variable_output(v), NULL), "txt");
  static const char *const vocab[3] = {"alpha", "beta", "gamma"};
  loom_tensor *vt = loom_tensor_new(LOOM_STRING, 1, (int64_t[]){3}, NULL);
  for (int i = 0; i < 3; i++) loom_tensor_set_string(vt, i, vocab[i], strlen(vocab[i]), NULL);
  loom_output voc = loom_const(g, vt, "vocab");
  loom_tensor_free(vt);
  loom_output xm = loom_placeholder(g, LOOM_I64, 1, dn, "xm"); /* x mod 3 */
  loom_output names = loom_gather(g, voc, xm, 0, "names");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  loom_node *ini = loom_global_variables_initializer(g);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &ini, 1, st), LOOM_OK, "%s", loom_status_message(st));
  int64_t n = 20000; /* 20000 13-digit strings: ~260 KB, past the arena's first 64 KB chunk */
  loom_tensor *xt = loom_tensor_new(LOOM_I64, 1, &n, NULL);
  int64_t *xp = loom_tensor_data(xt);
  loom_tensor *xmt = loom_tensor_new(LOOM_I64, 1, &n, NULL);
  int64_t *xmp = loom_tensor_data(xmt);
  for (int64_t i = 0; i < n; i++) xp[i] = i * 7, xmp[i] = (i * 7) % 3;
  loom_output feeds[2] = {x, xm};
  loom_tensor *fv[2] = {xt, xmt};
  loom_output fetch[2] = {txt, names};
  loom_tensor *out[2] = {0};
  for (int r = 0; r < 4; r++) /* warm-up: plan, arena growth, fetch tensors */
    cr_assert_eq(loom_session_run(s, feeds, fv, 2, fetch, out, 2, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  long before = tu_alloc_count();
  for (int r = 0; r < 5; r++) cr_assert_eq(loom_session_run(s, feeds, fv, 2, fetch, out, 2, NULL, 0, st), LOOM_OK);
  long after = tu_alloc_count();
  cr_expect_eq(after - before, 0, "steady-state runs with string fetches allocated %ld times", after - before);
  for (int64_t i = 0; i < n; i += 1999) {
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)(1000000000000LL + i * 7));
    size_t len = 0;
    const char *sv = loom_tensor_get_string(out[0], i, &len);
    cr_expect(len == strlen(want) && !memcmp(sv, want, len), "txt[%lld] = '%.*s', want %s", (long long)i, (int)len,
              sv, want);
    sv = loom_tensor_get_string(out[1], i, &len);
    const char *wn = vocab[(i * 7) % 3];
    cr_expect(len == strlen(wn) && !memcmp(sv, wn, len), "names[%lld] = '%.*s', want %s", (long long)i, (int)len,
              sv, wn);
  }
  for (int i = 0; i < 2; i++) loom_tensor_free(out[i]);
  loom_tensor_free(xt);
  loom_tensor_free(xmt);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
  tu_alloc_count_end();
}

/* Gather along axis 1 of a [2,3] string matrix; a fetched string tensor
 * reused by a later run with other strings (lengths grow and shrink). */
Test(string_run, gather_axis1_and_fetch_tensor_reuse) {
  loom_graph *g = loom_graph_new();
  static const char *const m[6] = {"a", "bb", "ccc", "dddd", "", "ffffff"};
  loom_output mat = string_const(g, 2, (int64_t[]){2, 3}, m, "mat");
  int64_t dn[1] = {-1};
  loom_output ix = loom_placeholder(g, LOOM_I64, 1, dn, "ix");
  loom_output cols = loom_gather(g, mat, ix, 1, "cols");
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  int64_t i1[2] = {2, 0};
  loom_tensor *t1 = loom_tensor_from_data(LOOM_I64, 1, (int64_t[]){2}, i1, NULL);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_session_run(s, &ix, &t1, 1, &cols, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  static const char *const w1[4] = {"ccc", "a", "ffffff", "dddd"};
  expect_strings(out, 4, w1, "cols");
  int64_t i2[2] = {1, 1};
  loom_tensor *t2 = loom_tensor_from_data(LOOM_I64, 1, (int64_t[]){2}, i2, NULL);
  cr_assert_eq(loom_session_run(s, &ix, &t2, 1, &cols, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  static const char *const w2[4] = {"bb", "bb", "", ""};
  expect_strings(out, 4, w2, "cols (reused fetch)");
  loom_tensor_free(out);
  loom_tensor_free(t1);
  loom_tensor_free(t2);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

/* AsString of floats is still refused at build time, naming the dtype. */
Test(string_run, as_string_of_floats_is_an_error) {
  loom_graph *g = loom_graph_new();
  loom_as_string(g, loom_const_f32(g, 1.5f, NULL), "txt");
  loom_status *st = loom_status_new();
  cr_expect_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "txt") && strstr(loom_status_message(st), "float32"), "%s",
            loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
}
