/* Feature columns: constructors (TF's names and checks), parse spec,
 * input_layer / linear_model against TF 2.15 fixtures
 * (scripts/gen_fc_layer_fixtures.py -> tests/fixtures/fc_layer/), error
 * messages naming the column, sequence columns and the sequence input
 * layer (hand values), and the analyzer against numpy. */
#include "test_util.h"

#define FIX "tests/fixtures/fc_layer/"

/* ---- helpers ---- */
static int64_t numel(int nd, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= d[i];
  return n;
}
static loom_status *ST;
static void setup(void) { ST = loom_status_new(); }
static void teardown(void) { loom_status_free(ST); }
TestSuite(fc, .init = setup, .fini = teardown);

/* The weight formula of scripts/gen_fc_layer_fixtures.py (wval). */
static float wval(const char *name, int ndim, const int64_t *dims, int64_t i, int64_t j) {
  int64_t k = (int64_t)strlen(name);
  (void)dims;
  if (ndim == 1) return (float)(((i * 7 + k) % 13 - 6) / 8.0);
  return (float)(((i * 7 + j * 3 + k) % 13 - 6) / 8.0);
}

static loom_output c_f32(loom_graph *g, int64_t r, int64_t c, const float *v) {
  int64_t d[2] = {r, c};
  return loom_const_data(g, LOOM_F32, 2, d, v, NULL);
}
static loom_output c_i64(loom_graph *g, int ndim, const int64_t *d, const int64_t *v) {
  return loom_const_data(g, LOOM_I64, ndim, d, v, NULL);
}
static loom_output c_str(loom_graph *g, int ndim, const int64_t *d, const char *const *v) {
  loom_tensor *t = loom_tensor_new(LOOM_STRING, ndim, d, NULL);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) loom_tensor_set_string(t, i, v[i], strlen(v[i]), NULL);
  loom_output o = loom_const(g, t, NULL);
  loom_tensor_free(t);
  return o;
}
static void add_sparse(loom_features *f, const char *name, loom_output values, loom_graph *g, int64_t nrows,
                       const int64_t *splits) {
  int64_t n = nrows + 1;
  loom_sparse sp = {values, c_i64(g, 1, &n, splits)};
  cr_assert_eq(loom_features_add_sparse(f, name, sp, ST), LOOM_OK, "%s", loom_status_message(ST));
}

/* The features of the fixture script (features()). */
static loom_features *fixture_features(loom_graph *g) {
  loom_features *f = loom_features_new();
  float age[] = {23, 35.5f, 61, 17};
  float hw[] = {0.2f, 1.9f, 1.0f, 0.4f, 3.0f, 1.5f, -1.0f, 0.5f};
  loom_features_add(f, "age", c_f32(g, 4, 1, age), ST);
  loom_features_add(f, "hw", c_f32(g, 4, 2, hw), ST);
  const char *city[] = {"sf", "la", "ny", "", "", "", "sf", "zz"};
  int64_t d42[2] = {4, 2}, d41[2] = {4, 1};
  loom_features_add(f, "city", c_str(g, 2, d42, city), ST);
  const char *tags[] = {"a", "b", "c", "a", "a", "d"};
  int64_t n6 = 6, tsp[] = {0, 2, 2, 3, 6};
  add_sparse(f, "tags", c_str(g, 1, &n6, tags), g, 4, tsp);
  int64_t uid[] = {3, 7, -1, 0}, uid2[] = {1, 1, 2, 7}, zip[] = {94110, 10001, 60601, 94110};
  loom_features_add(f, "uid", c_i64(g, 2, d41, uid), ST);
  loom_features_add(f, "uid2", c_i64(g, 2, d41, uid2), ST);
  loom_features_add(f, "zip", c_i64(g, 2, d41, zip), ST);
  int64_t code[] = {5, 1, 2, 9}, n4 = 4, csp[] = {0, 1, 3, 3, 4};
  float wk[] = {2.0f, 0.5f, 1.5f, 3.0f};
  add_sparse(f, "code", c_i64(g, 1, &n4, code), g, 4, csp);
  add_sparse(f, "wkey", loom_const_data(g, LOOM_F32, 1, &n4, wk, NULL), g, 4, csp);
  const char *color[] = {"blue", "pink", "red", "gold"};
  loom_features_add(f, "color", c_str(g, 2, d41, color), ST);
  cr_assert_eq(loom_graph_status(g, ST), LOOM_OK, "%s", loom_status_message(ST));
  return f;
}

static loom_output normalize_hw(loom_graph *g, loom_output x, void *user) {
  (void)user;
  return loom_div(g, loom_sub(g, x, loom_const_f32(g, 1.0f, NULL), NULL), loom_const_f32(g, 2.0f, NULL), NULL);
}

typedef struct fixture_cols {
  loom_fc_set *s;
  const loom_fc *cols[24];
  int n;
} fixture_cols;

/* The columns of the fixture script (columns(kind)). */
static void fixture_columns(fixture_cols *fc, int input_layer, int zscore_hw) {
  loom_fc_set *s = fc->s = loom_fc_set_new();
  int64_t sh2 = 2;
  const loom_fc *age = loom_fc_numeric(s, "age", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST);
  double m[2] = {1, 1}, sd[2] = {2, 2};
  const loom_fc *hw = zscore_hw ? loom_fc_numeric_zscore(s, "hw", 1, &sh2, NULL, 2, m, sd, ST)
                                : loom_fc_numeric(s, "hw", 1, &sh2, NULL, LOOM_F32, normalize_hw, NULL, ST);
  float ab[] = {18, 30, 50}, hb[] = {0.5f, 1.5f};
  const loom_fc *age_b = loom_fc_bucketized(s, age, 3, ab, ST);
  const loom_fc *hw_b = loom_fc_bucketized(s, hw, 2, hb, ST);
  const char *cv[] = {"la", "ny", "sf"};
  const loom_fc *city = loom_fc_vocabulary_list(s, "city", 3, cv, 2, -1, ST);
  const loom_fc *tags = loom_fc_hash_bucket(s, "tags", 10, LOOM_STRING, ST);
  const loom_fc *uid = loom_fc_identity(s, "uid", 8, 0, 0, ST);
  int64_t codes[] = {9, 5, 1};
  const loom_fc *code = loom_fc_vocabulary_list_int64(s, "code", 3, codes, 0, 0, ST);
  const loom_fc *code_w = loom_fc_weighted(s, code, "wkey", ST);
  const loom_fc *zipc = loom_fc_hash_bucket(s, "zip", 20, LOOM_I64, ST);
  const loom_fc *color = loom_fc_vocabulary_file(s, "color", FIX "colors.txt", 0, 2, -1, LOOM_STRING, ST);
  cr_assert(color, "%s", loom_status_message(ST));
  const char *ck[] = {"city", NULL};
  const loom_fc *cc[] = {NULL, age_b};
  const loom_fc *cross = loom_fc_crossed(s, 2, ck, cc, 16, 0, ST);
  const char *ck2[] = {"tags", "zip"};
  const loom_fc *cross2 = loom_fc_crossed(s, 2, ck2, NULL, 7, 0, ST);
  cr_assert(cross && cross2, "%s", loom_status_message(ST));
  int n = 0;
  if (input_layer) {
    loom_fc_embedding_options o = loom_fc_embedding_options_default();
    const loom_fc *uid2 = loom_fc_identity(s, "uid2", 8, 0, 0, ST);
    fc->cols[n++] = age;
    fc->cols[n++] = hw;
    fc->cols[n++] = age_b;
    fc->cols[n++] = hw_b;
    fc->cols[n++] = loom_fc_indicator(s, city, ST);
    fc->cols[n++] = loom_fc_indicator(s, tags, ST);
    fc->cols[n++] = loom_fc_embedding(s, uid, 3, NULL, ST);
    o.combiner = LOOM_COMBINER_SQRTN;
    fc->cols[n++] = loom_fc_embedding(s, code_w, 2, &o, ST);
    fc->cols[n++] = loom_fc_indicator(s, cross, ST);
    fc->cols[n++] = loom_fc_indicator(s, cross2, ST);
    o.combiner = LOOM_COMBINER_SUM;
    fc->cols[n++] = loom_fc_embedding(s, zipc, 2, &o, ST);
    fc->cols[n++] = loom_fc_indicator(s, code_w, ST);
    fc->cols[n++] = loom_fc_indicator(s, color, ST);
    loom_fc *sh[2];
    const loom_fc *shc[2] = {uid2, uid};
    cr_assert_eq(loom_fc_shared_embeddings(s, 2, shc, 3, &o, sh, ST), LOOM_OK, "%s", loom_status_message(ST));
    fc->cols[n++] = sh[0];
    fc->cols[n++] = sh[1];
  } else {
    const loom_fc *l[] = {age, hw, age_b, city, tags, uid, code_w, cross, cross2, zipc, color};
    for (int i = 0; i < 11; i++) fc->cols[n++] = l[i];
    fc->cols[n++] = loom_fc_embedding(s, hw_b, 2, NULL, ST);
  }
  for (int i = 0; i < n; i++) cr_assert(fc->cols[i], "column %d: %s", i, loom_status_message(ST));
  fc->n = n;
}

/* Assigns every global variable its wval values and runs out; compares with
 * the fixture file (variable names and shapes, output within 1e-6). */
static void check_against_fixture(loom_graph *g, loom_output out, const char *path) {
  int nv = 0;
  loom_variable *const *vars = loom_global_variables(g, &nv);
  loom_node *assigns[64];
  cr_assert(nv <= 64);
  for (int v = 0; v < nv; v++) {
    int64_t d[LOOM_MAX_DIMS];
    int nd = loom_variable_dims(vars[v], d);
    int64_t ne = numel(nd, d);
    float *w = malloc((size_t)ne * sizeof(float));
    for (int64_t e = 0; e < ne; e++)
      w[e] = nd == 1 ? wval(loom_variable_name(vars[v]), 1, d, e, 0)
                     : wval(loom_variable_name(vars[v]), 2, d, e / d[1], e % d[1]);
    loom_output a = loom_assign(g, loom_variable_output(vars[v]), loom_const_data(g, LOOM_F32, nd, d, w, NULL), NULL);
    assigns[v] = a.node;
    free(w);
  }
  cr_assert_eq(loom_graph_status(g, ST), LOOM_OK, "%s", loom_status_message(ST));
  loom_session *s = loom_session_new(g, NULL, ST);
  cr_assert(s, "%s", loom_status_message(ST));
  loom_node *init = loom_global_variables_initializer(g);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, ST), LOOM_OK, "%s", loom_status_message(ST));
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, assigns, nv, ST), LOOM_OK, "%s",
               loom_status_message(ST));
  loom_tensor *y = NULL;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &out, &y, 1, NULL, 0, ST), LOOM_OK, "%s", loom_status_message(ST));

  FILE *f = fopen(path, "r");
  cr_assert(f, "fixture %s", path);
  int fnv = 0;
  cr_assert_eq(fscanf(f, "vars %d\n", &fnv), 1);
  cr_assert_eq(fnv, nv, "%d variables, TF made %d", nv, fnv);
  char line[512];
  for (int v = 0; v < fnv; v++) {
    cr_assert(fgets(line, sizeof line, f));
    char name[256];
    long long d0 = 0, d1 = 0;
    int k = sscanf(line, "var %255s %lld %lld", name, &d0, &d1);
    cr_assert(k >= 2);
    loom_variable *var = loom_graph_variable(g, name);
    cr_assert(var, "TF's variable %s is missing", name);
    int64_t d[LOOM_MAX_DIMS];
    int nd = loom_variable_dims(var, d);
    cr_assert_eq(nd, k - 1, "%s: rank", name);
    cr_assert_eq(d[0], d0, "%s: dim 0 %lld, TF %lld", name, (long long)d[0], d0);
    if (nd == 2) cr_assert_eq(d[1], d1, "%s: dim 1 %lld, TF %lld", name, (long long)d[1], d1);
  }
  long long r = 0, c = 0;
  cr_assert_eq(fscanf(f, "out %lld %lld", &r, &c), 2);
  cr_assert_eq(loom_tensor_ndim(y), 2);
  cr_assert_eq(loom_tensor_dim(y, 0), r);
  cr_assert_eq(loom_tensor_dim(y, 1), c, "width %lld, TF %lld", (long long)loom_tensor_dim(y, 1), c);
  const float *yd = loom_tensor_data_const(y);
  for (long long i = 0; i < r * c; i++) {
    double want;
    cr_assert_eq(fscanf(f, "%lf", &want), 1);
    cr_assert(fabs(yd[i] - want) <= 1e-6 + 1e-6 * fabs(want), "%s: element [%lld,%lld] = %.9g, TF %.9g", path, i / c,
              i % c, yd[i], want);
  }
  fclose(f);
  loom_tensor_free(y);
  loom_session_free(s);
}

/* ---- against TF ---- */
Test(fc, input_layer_matches_tf) {
  loom_graph *g = loom_graph_new();
  loom_features *f = fixture_features(g);
  fixture_cols fc;
  fixture_columns(&fc, 1, 0);
  loom_output out;
  cr_assert_eq(loom_fc_input_layer(g, f, fc.n, fc.cols, NULL, 1, &out, ST), LOOM_OK, "%s", loom_status_message(ST));
  check_against_fixture(g, out, FIX "input_layer.txt");
  loom_features_free(f);
  loom_fc_set_free(fc.s);
  loom_graph_free(g);
}

/* The same with hw normalized by numeric_zscore instead of a callback. */
Test(fc, input_layer_zscore_matches_tf) {
  loom_graph *g = loom_graph_new();
  loom_features *f = fixture_features(g);
  fixture_cols fc;
  fixture_columns(&fc, 1, 1);
  loom_output out;
  cr_assert_eq(loom_fc_input_layer(g, f, fc.n, fc.cols, NULL, 1, &out, ST), LOOM_OK, "%s", loom_status_message(ST));
  check_against_fixture(g, out, FIX "input_layer.txt");
  loom_features_free(f);
  loom_fc_set_free(fc.s);
  loom_graph_free(g);
}

Test(fc, linear_model_matches_tf) {
  loom_graph *g = loom_graph_new();
  loom_features *f = fixture_features(g);
  fixture_cols fc;
  fixture_columns(&fc, 0, 0);
  loom_output out;
  cr_assert_eq(loom_fc_linear_model(g, f, fc.n, fc.cols, 2, LOOM_COMBINER_SQRTN, NULL, 1, &out, ST), LOOM_OK, "%s",
               loom_status_message(ST));
  check_against_fixture(g, out, FIX "linear_model.txt");
  loom_features_free(f);
  loom_fc_set_free(fc.s);
  loom_graph_free(g);
}

/* ---- names, sizes, constructor checks ---- */
Test(fc, names_and_sizes) {
  fixture_cols fc;
  fixture_columns(&fc, 1, 0);
  const char *want[] = {"age", "hw", "age_bucketized", "hw_bucketized", "city_indicator", "tags_indicator",
                        "uid_embedding", "code_weighted_by_wkey_embedding", "age_bucketized_X_city_indicator",
                        "tags_X_zip_indicator", "zip_embedding", "code_weighted_by_wkey_indicator", "color_indicator",
                        "uid2_shared_embedding", "uid_shared_embedding"};
  int64_t width[] = {1, 2, 4, 6, 5, 10, 3, 2, 16, 7, 2, 3, 8, 3, 3};
  for (int i = 0; i < fc.n; i++) {
    cr_assert_str_eq(loom_fc_name(fc.cols[i]), want[i]);
    cr_assert_eq(loom_fc_dense_width(fc.cols[i]), width[i], "%s: width %lld", want[i],
                 (long long)loom_fc_dense_width(fc.cols[i]));
  }
  cr_assert_eq(loom_fc_num_buckets(fc.cols[2]), 4);  /* bucketized: categorical too */
  cr_assert_eq(loom_fc_num_buckets(fc.cols[0]), 0);  /* numeric */
  cr_assert_eq(loom_fc_num_buckets(fc.cols[4]), 0);  /* indicator is dense */
  loom_fc_set_free(fc.s);
}

static void expect_err(const void *c, const char *needle) {
  cr_assert_null(c, "constructor accepted a bad argument (%s)", needle);
  cr_assert_eq(loom_status_code(ST), LOOM_INVALID_ARGUMENT, "code %d: %s", loom_status_code(ST), loom_status_message(ST));
  cr_assert(strstr(loom_status_message(ST), needle), "message \"%s\" lacks \"%s\"", loom_status_message(ST), needle);
}

Test(fc, constructor_checks) {
  loom_fc_set *s = loom_fc_set_new();
  int64_t bad_shape = 0;
  expect_err(loom_fc_numeric(s, "x", 1, &bad_shape, NULL, LOOM_F32, NULL, NULL, ST), "greater than 0");
  expect_err(loom_fc_numeric(s, "", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST), "non-empty");
  expect_err(loom_fc_numeric(s, "x", 0, NULL, NULL, LOOM_STRING, NULL, NULL, ST), "convertible to float");
  const loom_fc *x = loom_fc_numeric(s, "x", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST);
  float unsorted[] = {1, 3, 2}, dup[] = {1, 1};
  expect_err(loom_fc_bucketized(s, x, 3, unsorted, ST), "sorted");
  expect_err(loom_fc_bucketized(s, x, 2, dup, ST), "x_bucketized");
  expect_err(loom_fc_bucketized(s, x, 0, unsorted, ST), "empty");
  const loom_fc *id = loom_fc_identity(s, "id", 5, 0, 0, ST);
  expect_err(loom_fc_bucketized(s, id, 1, unsorted, ST), "numeric_column");
  expect_err(loom_fc_identity(s, "id2", 0, 0, 0, ST), "id2");
  expect_err(loom_fc_identity(s, "id3", 4, 1, 4, ST), "default_value 4 not in range [0, 4)");
  const char *dupv[] = {"a", "b", "a"};
  expect_err(loom_fc_vocabulary_list(s, "v", 3, dupv, 0, -1, ST), "duplicate keys");
  expect_err(loom_fc_vocabulary_list(s, "v", 2, dupv, 2, 0, ST), "both default_value");
  expect_err(loom_fc_vocabulary_list(s, "v", 0, dupv, 0, -1, ST), "non-empty");
  int64_t dupi[] = {4, 4};
  expect_err(loom_fc_vocabulary_list_int64(s, "vi", 2, dupi, 0, -1, ST), "duplicate keys in vocabulary: 4");
  expect_err(loom_fc_hash_bucket(s, "h", 0, LOOM_STRING, ST), "at least 1");
  expect_err(loom_fc_hash_bucket(s, "h", 4, LOOM_F32, ST), "string or integer");
  const loom_fc *h = loom_fc_hash_bucket(s, "h", 4, LOOM_STRING, ST);
  const char *k1[] = {"a"};
  expect_err(loom_fc_crossed(s, 1, k1, NULL, 10, 0, ST), "length > 1");
  const loom_fc *hk[] = {h, NULL};
  const char *rk[] = {NULL, "b"};
  expect_err(loom_fc_crossed(s, 2, rk, hk, 10, 0, ST), "hashed column is not supported");
  const loom_fc *xk[] = {x, NULL};
  expect_err(loom_fc_crossed(s, 2, rk, xk, 10, 0, ST), "categorical");
  expect_err(loom_fc_indicator(s, x, ST), "CategoricalColumn");
  expect_err(loom_fc_embedding(s, id, 0, NULL, ST), "invalid dimension");
  expect_err(loom_fc_weighted(s, id, "", ST), "weight_feature_key");
  const loom_fc *h8 = loom_fc_hash_bucket(s, "h8", 5, LOOM_STRING, ST);
  loom_fc *out[2];
  const loom_fc *mix[] = {id, h8};
  cr_assert_eq(loom_fc_shared_embeddings(s, 2, mix, 4, NULL, out, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "same type"), "%s", loom_status_message(ST));
  const loom_fc *h9 = loom_fc_hash_bucket(s, "h9", 6, LOOM_STRING, ST);
  const loom_fc *nb[] = {h8, h9};
  cr_assert_eq(loom_fc_shared_embeddings(s, 2, nb, 4, NULL, out, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "same number of buckets"), "%s", loom_status_message(ST));
  cr_assert_null(loom_fc_vocabulary_file(s, "vf", FIX "no_such_file.txt", 0, 0, -1, LOOM_STRING, ST));
  cr_assert_eq(loom_status_code(ST), LOOM_NOT_FOUND, "%s", loom_status_message(ST));
  cr_assert(strstr(loom_status_message(ST), "vf") && strstr(loom_status_message(ST), "no_such_file.txt"), "%s",
            loom_status_message(ST));
  /* crossed names: sorted leaf names, nested crosses flattened */
  const loom_fc *ab = loom_fc_bucketized(s, x, 1, unsorted, ST);
  const char *rk2[] = {"zz", NULL};
  const loom_fc *ck2[] = {NULL, ab};
  const loom_fc *cr = loom_fc_crossed(s, 2, rk2, ck2, 10, 0, ST);
  cr_assert_str_eq(loom_fc_name(cr), "x_bucketized_X_zz");
  const char *rk3[] = {NULL, "aa"};
  const loom_fc *ck3[] = {cr, NULL};
  cr_assert_str_eq(loom_fc_name(loom_fc_crossed(s, 2, rk3, ck3, 10, 0, ST)), "aa_X_x_bucketized_X_zz");
  loom_fc_set_free(s);
}

Test(fc, parse_example_spec) {
  loom_fc_set *s = loom_fc_set_new();
  int64_t sh2 = 2;
  float def[] = {1.5f, -2};
  const loom_fc *hw = loom_fc_numeric(s, "hw", 1, &sh2, def, LOOM_F32, NULL, NULL, ST);
  float b[] = {0};
  const loom_fc *hwb = loom_fc_bucketized(s, hw, 1, b, ST);
  const loom_fc *id = loom_fc_identity(s, "id", 5, 0, 0, ST);
  const loom_fc *w = loom_fc_weighted(s, id, "idw", ST);
  const loom_fc *emb = loom_fc_embedding(s, w, 2, NULL, ST);
  const char *rk[] = {"word", NULL};
  const loom_fc *ck[] = {NULL, hwb};
  const loom_fc *cr = loom_fc_crossed(s, 2, rk, ck, 10, 0, ST);
  const loom_fc *cols[] = {emb, cr, hw};
  int n = 0;
  loom_feature_spec *sp = NULL;
  cr_assert_eq(loom_fc_make_parse_example_spec(3, cols, &n, &sp, ST), LOOM_OK, "%s", loom_status_message(ST));
  cr_assert_eq(n, 4);
  cr_assert_str_eq(sp[0].name, "hw");
  cr_assert_eq(sp[0].dtype, LOOM_F32);
  cr_assert_eq(sp[0].varlen, 0);
  cr_assert_eq(sp[0].ndim, 1);
  cr_assert_eq(sp[0].dims[0], 2);
  cr_assert_eq(((const float *)sp[0].default_value)[1], -2.0f);
  cr_assert_str_eq(sp[1].name, "id");
  cr_assert_eq(sp[1].dtype, LOOM_I64);
  cr_assert_eq(sp[1].varlen, 1);
  cr_assert_eq(sp[1].ragged, 1);
  cr_assert_eq(sp[0].ragged, 0);
  cr_assert_str_eq(sp[2].name, "idw");
  cr_assert_eq(sp[2].dtype, LOOM_F32);
  cr_assert_eq(sp[2].varlen, 1);
  cr_assert_str_eq(sp[3].name, "word");
  cr_assert_eq(sp[3].dtype, LOOM_STRING);
  loom_fc_parse_spec_free(n, sp);
  /* conflicting specs for one key */
  const loom_fc *hw_other = loom_fc_numeric(s, "hw", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST);
  const loom_fc *c2[] = {hw, hw_other};
  cr_assert_eq(loom_fc_make_parse_example_spec(2, c2, &n, &sp, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "hw"), "%s", loom_status_message(ST));
  const loom_fc *hid = loom_fc_hash_bucket(s, "id", 3, LOOM_STRING, ST);
  const loom_fc *c3[] = {id, hid};
  cr_assert_eq(loom_fc_make_parse_example_spec(2, c3, &n, &sp, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "id"), "%s", loom_status_message(ST));
  loom_fc_set_free(s);
}

/* ---- malformed inputs name the column ---- */
static void expect_layer_err(loom_code rc, const char *a, const char *b) {
  cr_assert_eq(rc, LOOM_INVALID_ARGUMENT, "code %d: %s", rc, loom_status_message(ST));
  cr_assert(strstr(loom_status_message(ST), a), "\"%s\" lacks \"%s\"", loom_status_message(ST), a);
  if (b) cr_assert(strstr(loom_status_message(ST), b), "\"%s\" lacks \"%s\"", loom_status_message(ST), b);
}

Test(fc, input_errors_name_the_column) {
  loom_graph *g = loom_graph_new();
  loom_features *f = fixture_features(g);
  loom_fc_set *s = loom_fc_set_new();
  loom_output out;
  const loom_fc *miss = loom_fc_numeric(s, "weight", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST);
  expect_layer_err(loom_fc_input_layer(g, f, 1, &miss, NULL, 1, &out, ST), "weight", "not in the features");
  const loom_fc *strnum = loom_fc_numeric(s, "city", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST);
  expect_layer_err(loom_fc_input_layer(g, f, 1, &strnum, NULL, 1, &out, ST), "column city", "string");
  const loom_fc *spnum = loom_fc_numeric(s, "tags", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST);
  expect_layer_err(loom_fc_input_layer(g, f, 1, &spnum, NULL, 1, &out, ST), "tags", "SparseTensor");
  const loom_fc *h = loom_fc_hash_bucket(s, "age", 5, LOOM_STRING, ST);
  const loom_fc *hi = loom_fc_indicator(s, h, ST);
  expect_layer_err(loom_fc_input_layer(g, f, 1, &hi, NULL, 1, &out, ST), "column age", "float32");
  const loom_fc *idc = loom_fc_identity(s, "city", 5, 0, 0, ST);
  const loom_fc *ide = loom_fc_embedding(s, idc, 2, NULL, ST);
  expect_layer_err(loom_fc_input_layer(g, f, 1, &ide, NULL, 1, &out, ST), "column city", "integer");
  expect_layer_err(loom_fc_input_layer(g, f, 1, &idc, NULL, 1, &out, ST), "city", "categorical");
  const loom_fc *wb = loom_fc_weighted(s, loom_fc_identity(s, "uid", 8, 0, 0, ST), "zip", ST);
  const loom_fc *wbi = loom_fc_indicator(s, wb, ST);
  expect_layer_err(loom_fc_input_layer(g, f, 1, &wbi, NULL, 1, &out, ST), "uid_weighted_by_zip", "float32");
  int64_t sh3 = 3;
  const loom_fc *hw3 = loom_fc_numeric(s, "hw", 1, &sh3, NULL, LOOM_F32, NULL, NULL, ST);
  expect_layer_err(loom_fc_linear_model(g, f, 1, &hw3, 1, LOOM_COMBINER_SUM, NULL, 1, &out, ST), "column hw", "3");
  loom_features_free(f);
  loom_fc_set_free(s);
  loom_graph_free(g);
}

/* Two columns of one name: TF's "Duplicate feature column name found"
 * from input_layer and linear_model, naming both positions, before any
 * variable is made (a second linear_model variable of that name failed
 * with a variable-scope reuse message before). */
Test(fc, duplicate_column_names_rejected) {
  loom_graph *g = loom_graph_new();
  loom_features *f = fixture_features(g);
  loom_fc_set *s = loom_fc_set_new();
  loom_output out;
  const loom_fc *cols[3] = {loom_fc_numeric(s, "age", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST),
                            loom_fc_numeric(s, "hw", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST),
                            loom_fc_numeric(s, "age", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST)};
  const char *want = "Duplicate feature column name found for columns: 'age' (feature_columns[2]) and 'age' "
                     "(feature_columns[0])";
  cr_assert_eq(loom_fc_input_layer(g, f, 3, cols, NULL, 1, &out, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "input_layer: ") && strstr(loom_status_message(ST), want), "%s",
            loom_status_message(ST));
  cr_assert_eq(loom_fc_linear_model(g, f, 3, cols, 1, LOOM_COMBINER_SUM, NULL, 1, &out, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "linear_model: ") && strstr(loom_status_message(ST), want), "%s",
            loom_status_message(ST));
  int nv = -1;
  loom_global_variables(g, &nv);
  cr_assert_eq(nv, 0, "no variable made before the check");
  cr_assert_eq(loom_fc_check_unique_names("x", "cols", 2, cols, ST), LOOM_OK);
  /* one name under two kinds of column is a duplicate too */
  const loom_fc *b = loom_fc_bucketized(s, cols[0], 1, (const float[]){30}, ST);
  const loom_fc *two[2] = {b, loom_fc_numeric(s, "age_bucketized", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST)};
  cr_assert_eq(loom_fc_check_unique_names("x", "cols", 2, two, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "'age_bucketized' (cols[1]) and 'age_bucketized' (cols[0])"), "%s",
            loom_status_message(ST));
  loom_features_free(f);
  loom_fc_set_free(s);
  loom_graph_free(g);
}

/* An identity id outside [0, num_buckets) fails the run naming the column. */
Test(fc, identity_out_of_range_is_a_run_error) {
  loom_graph *g = loom_graph_new();
  loom_features *f = loom_features_new();
  int64_t d[2] = {2, 1}, v[] = {1, 9};
  loom_features_add(f, "item", c_i64(g, 2, d, v), ST);
  loom_fc_set *s = loom_fc_set_new();
  const loom_fc *ind = loom_fc_indicator(s, loom_fc_identity(s, "item", 4, 0, 0, ST), ST);
  loom_output out;
  cr_assert_eq(loom_fc_input_layer(g, f, 1, &ind, NULL, 1, &out, ST), LOOM_OK, "%s", loom_status_message(ST));
  char msg[512];
  cr_assert_eq(tu_run_err(g, 0, NULL, NULL, out, msg, sizeof msg), LOOM_INVALID_ARGUMENT, "%s", msg);
  cr_assert(strstr(msg, "item"), "%s", msg);
  loom_features_free(f);
  loom_fc_set_free(s);
  loom_graph_free(g);
}

/* ---- analyzer (numpy values from the fixture script) ---- */
static loom_dataset *analyzer_csv(int batch) {
  loom_csv_column cols[] = {{.name = "carat", .dtype = LOOM_F32, .select = 1},
                            {.name = "cut", .dtype = LOOM_STRING, .select = 1},
                            {.name = "depth", .dtype = LOOM_F32, .select = 1},
                            {.name = "clarity", .dtype = LOOM_I64, .select = 1}};
  loom_csv_options o = {sizeof(loom_csv_options), 1, ',', 4, cols, NULL};
  const char *p = FIX "analyzer.csv";
  loom_dataset *ds = loom_dataset_csv(1, &p, &o, ST);
  cr_assert(ds, "%s", loom_status_message(ST));
  if (batch) ds = loom_dataset_batch(ds, batch, 0, ST);
  cr_assert(ds, "%s", loom_status_message(ST));
  return ds;
}

static void analyzer_check(int batch) {
  loom_dataset *ds = analyzer_csv(batch);
  loom_fc_analyzer *a = loom_fc_analyzer_new(ST);
  cr_assert_eq(loom_fc_analyze_quantiles(a, "carat", 4, ST), LOOM_OK);
  cr_assert_eq(loom_fc_analyze_quantiles(a, "depth", 10, ST), LOOM_OK);
  cr_assert_eq(loom_fc_analyze_moments(a, "carat", ST), LOOM_OK);
  cr_assert_eq(loom_fc_analyze_moments(a, "depth", ST), LOOM_OK);
  cr_assert_eq(loom_fc_analyze_vocabulary(a, "cut", 0, 1, ST), LOOM_OK);
  cr_assert_eq(loom_fc_analyze_vocabulary(a, "clarity", 0, 26, ST), LOOM_OK);
  cr_assert_eq(loom_fc_analyzer_run(a, ds, ST), LOOM_OK, "%s", loom_status_message(ST));
  FILE *f = fopen(FIX "analyzer_expected.txt", "r");
  cr_assert(f);
  char line[1024];
  char dir[256];
  tu_tmpdir(dir, sizeof dir, "fcvocab");
  int checked = 0;
  while (fgets(line, sizeof line, f)) {
    char kind[32], key[64];
    int off = 0;
    cr_assert_eq(sscanf(line, "%31s %63s %n", kind, key, &off), 2);
    const char *rest = line + off;
    if (!strcmp(kind, "quantiles")) {
      int nbk, nb;
      int k;
      sscanf(rest, "%d %d %n", &nbk, &nb, &k);
      rest += k;
      int got_n;
      const float *bd;
      cr_assert_eq(loom_fc_analyzer_boundaries(a, key, &got_n, &bd, ST), LOOM_OK, "%s", loom_status_message(ST));
      cr_assert_eq(got_n, nb, "%s: %d boundaries, numpy %d", key, got_n, nb);
      for (int i = 0; i < nb; i++) {
        double w;
        sscanf(rest, "%lf %n", &w, &k);
        rest += k;
        cr_assert_eq(bd[i], (float)w, "%s boundary %d: %.9g, numpy %.9g", key, i, bd[i], w);
      }
      checked++;
    } else if (!strcmp(kind, "moments")) {
      double m, sd;
      sscanf(rest, "%lf %lf", &m, &sd);
      int64_t n;
      const double *mean, *stdv;
      cr_assert_eq(loom_fc_analyzer_moments(a, key, &n, &mean, &stdv, ST), LOOM_OK, "%s", loom_status_message(ST));
      cr_assert_eq(n, 1);
      cr_assert(fabs(mean[0] - m) < 1e-9 * fabs(m), "%s mean %.17g numpy %.17g", key, mean[0], m);
      cr_assert(fabs(stdv[0] - sd) < 1e-9 * fabs(sd), "%s std %.17g numpy %.17g", key, stdv[0], sd);
      checked++;
    } else if (!strcmp(kind, "vocab")) {
      long long top_k, thr, nitems;
      int k;
      sscanf(rest, "%lld %lld %lld %n", &top_k, &thr, &nitems, &k);
      rest += k;
      char want[512];
      snprintf(want, sizeof want, "%s", rest);
      want[strcspn(want, "\n")] = 0;
      for (char *p = want; *p; p++)
        if (*p == '|') *p = '\n';
      strcat(want, "\n");
      loom_fc_analyzer *a2 = a;
      if (top_k > 0) { /* a second analyzer for top_k */
        a2 = loom_fc_analyzer_new(ST);
        loom_fc_analyze_vocabulary(a2, key, top_k, thr, ST);
        cr_assert_eq(loom_fc_analyzer_run(a2, ds, ST), LOOM_OK, "%s", loom_status_message(ST));
      }
      char path[512];
      snprintf(path, sizeof path, "%s/%s.txt", dir, key);
      int64_t written = -1;
      cr_assert_eq(loom_fc_analyzer_write_vocabulary(a2, key, path, &written, ST), LOOM_OK, "%s",
                   loom_status_message(ST));
      cr_assert_eq(written, nitems);
      size_t len;
      char *got = tu_read_file(path, &len);
      cr_assert(got);
      cr_assert(len == strlen(want) && !memcmp(got, want, len), "%s vocabulary:\n%.*s\nnumpy:\n%s", key, (int)len, got,
                want);
      free(got);
      /* the same entries in memory, in the file's order */
      int64_t nmem = -1;
      const char *const *mv = NULL;
      const int64_t *mc = NULL;
      cr_assert_eq(loom_fc_analyzer_vocabulary(a2, key, &nmem, &mv, &mc, ST), LOOM_OK, "%s", loom_status_message(ST));
      cr_assert_eq(nmem, nitems);
      const char *line_at = want;
      for (int64_t i = 0; i < nmem; i++) {
        size_t ll = strcspn(line_at, "\n");
        cr_assert(strlen(mv[i]) == ll && !memcmp(mv[i], line_at, ll), "%s entry %lld: %s", key, (long long)i, mv[i]);
        cr_assert(mc[i] >= thr && (i == 0 || mc[i] <= mc[i - 1]), "%s counts", key);
        line_at += ll + 1;
      }
      /* the file reads back as a vocabulary column */
      loom_fc_set *s = loom_fc_set_new();
      const loom_fc *vc = loom_fc_vocabulary_file(s, key, path, 0, 0, -1, LOOM_STRING, ST);
      cr_assert(vc, "%s", loom_status_message(ST));
      cr_assert_eq(loom_fc_num_buckets(vc), nitems);
      loom_fc_set_free(s);
      if (a2 != a) loom_fc_analyzer_free(a2);
      checked++;
    }
  }
  fclose(f);
  cr_assert_eq(checked, 7);
  tu_rmtree(dir);
  loom_fc_analyzer_free(a);
  loom_dataset_free(ds);
}

Test(fc, analyzer_matches_numpy_unbatched) { analyzer_check(0); }
Test(fc, analyzer_matches_numpy_batched) { analyzer_check(32); }

/* The vocabulary in memory: values and counts by hand, threshold and
 * top_k applied, integers in decimal; errors before run and for a key not
 * asked for. */
Test(fc, analyzer_vocabulary_in_memory) {
  int64_t n = 7;
  loom_tensor *sv = loom_tensor_new(LOOM_STRING, 1, &n, NULL);
  const char *w[7] = {"b", "a", "b", "c", "b", "a", "d"};
  for (int i = 0; i < 7; i++) loom_tensor_set_string(sv, i, w[i], 1, NULL);
  const int64_t iv[7] = {5, 7, 5, -3, 5, 7, 5};
  loom_tensor *it = loom_tensor_from_data(LOOM_I64, 1, &n, iv, NULL);
  const char *names[2] = {"w", "i"};
  const loom_tensor *arr[2] = {sv, it};
  loom_dataset *ds = loom_dataset_batch(loom_dataset_from_tensors(2, names, arr, NULL, ST), 3, 0, ST);
  cr_assert(ds, "%s", loom_status_message(ST));
  loom_fc_analyzer *a = loom_fc_analyzer_new(ST);
  cr_assert_eq(loom_fc_analyze_vocabulary(a, "w", 0, 2, ST), LOOM_OK);
  cr_assert_eq(loom_fc_analyze_vocabulary(a, "i", 2, 0, ST), LOOM_OK);
  int64_t k = -1;
  const char *const *v = NULL;
  const int64_t *c = NULL;
  cr_assert_eq(loom_fc_analyzer_vocabulary(a, "w", &k, &v, &c, ST), LOOM_FAILED_PRECONDITION);
  cr_assert_eq(loom_fc_analyzer_run(a, ds, ST), LOOM_OK, "%s", loom_status_message(ST));
  cr_assert_eq(loom_fc_analyzer_vocabulary(a, "w", &k, &v, &c, ST), LOOM_OK, "%s", loom_status_message(ST));
  cr_assert_eq(k, 2); /* b 3, a 2; c and d seen once, under the threshold */
  cr_assert_str_eq(v[0], "b");
  cr_assert_eq(c[0], 3);
  cr_assert_str_eq(v[1], "a");
  cr_assert_eq(c[1], 2);
  cr_assert_eq(loom_fc_analyzer_vocabulary(a, "i", &k, &v, &c, ST), LOOM_OK, "%s", loom_status_message(ST));
  cr_assert_eq(k, 2); /* top 2 of 5 x4, 7 x2, -3 x1 */
  cr_assert_str_eq(v[0], "5");
  cr_assert_eq(c[0], 4);
  cr_assert_str_eq(v[1], "7");
  cr_assert_eq(c[1], 2);
  cr_assert_eq(loom_fc_analyzer_vocabulary(a, "nope", &k, &v, &c, ST), LOOM_NOT_FOUND);
  cr_assert_eq(loom_fc_analyzer_vocabulary(a, "w", NULL, NULL, NULL, ST), LOOM_OK);
  loom_fc_analyzer_free(a);
  loom_dataset_free(ds);
  loom_tensor_free(sv);
  loom_tensor_free(it);
}

Test(fc, analyzer_errors) {
  loom_dataset *ds = analyzer_csv(0);
  loom_fc_analyzer *a = loom_fc_analyzer_new(ST);
  cr_assert_eq(loom_fc_analyze_moments(a, "cut", ST), LOOM_OK);
  cr_assert_eq(loom_fc_analyzer_run(a, ds, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "cut") && strstr(loom_status_message(ST), "string"), "%s",
            loom_status_message(ST));
  loom_fc_analyzer_free(a);
  a = loom_fc_analyzer_new(ST);
  cr_assert_eq(loom_fc_analyze_quantiles(a, "price", 4, ST), LOOM_OK);
  cr_assert_eq(loom_fc_analyzer_run(a, ds, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "price"), "%s", loom_status_message(ST));
  const float *b;
  int nb;
  cr_assert_eq(loom_fc_analyzer_boundaries(a, "price", &nb, &b, ST), LOOM_FAILED_PRECONDITION);
  cr_assert_eq(loom_fc_analyzer_boundaries(a, "carat", &nb, &b, ST), LOOM_NOT_FOUND);
  cr_assert_eq(loom_fc_analyze_quantiles(a, "price", 4, ST), LOOM_INVALID_ARGUMENT); /* asked twice */
  cr_assert_eq(loom_fc_analyze_quantiles(a, "carat", 0, ST), LOOM_INVALID_ARGUMENT);
  loom_fc_analyzer_free(a);
  loom_dataset_free(ds);
}

/* A second input_layer / linear_model in one graph gets TF's unique default
 * scope ("input_layer_1"), not a clash with the first one's variables. */
Test(fc, second_layer_call_gets_a_unique_scope) {
  loom_graph *g = loom_graph_new();
  loom_features *f = fixture_features(g);
  loom_fc_set *s = loom_fc_set_new();
  const loom_fc *emb = loom_fc_embedding(s, loom_fc_hash_bucket(s, "city", 7, LOOM_STRING, ST), 3, NULL, ST);
  const loom_fc *lin = loom_fc_hash_bucket(s, "city", 7, LOOM_STRING, ST);
  loom_output a, b, c, d;
  cr_assert_eq(loom_fc_input_layer(g, f, 1, &emb, NULL, 1, &a, ST), LOOM_OK, "%s", loom_status_message(ST));
  cr_assert_eq(loom_fc_input_layer(g, f, 1, &emb, NULL, 1, &b, ST), LOOM_OK, "%s", loom_status_message(ST));
  cr_assert_eq(loom_fc_linear_model(g, f, 1, &lin, 1, LOOM_COMBINER_SUM, NULL, 1, &c, ST), LOOM_OK, "%s",
               loom_status_message(ST));
  cr_assert_eq(loom_fc_linear_model(g, f, 1, &lin, 1, LOOM_COMBINER_SUM, NULL, 1, &d, ST), LOOM_OK, "%s",
               loom_status_message(ST));
  const char *want[] = {"input_layer/city_embedding/embedding_weights",
                        "input_layer_1/city_embedding/embedding_weights", "linear_model/city/weights",
                        "linear_model/bias_weights", "linear_model_1/city/weights", "linear_model_1/bias_weights"};
  int nv = 0;
  loom_variable *const *vs = loom_global_variables(g, &nv);
  cr_assert_eq(nv, 6);
  for (int i = 0; i < 6; i++) {
    int found = 0;
    for (int j = 0; j < nv; j++) found |= strcmp(loom_variable_name(vs[j]), want[i]) == 0;
    cr_assert(found, "no variable %s", want[i]);
  }
  loom_features_free(f);
  loom_fc_set_free(s);
  loom_graph_free(g);
}

/* Runs input_layer over the features map built by mk (initialised
 * variables) and returns the output. */
static loom_tensor *run_layer(loom_graph *g, int n, const loom_fc *const *cols, loom_features *f, int nfeeds,
                              const loom_output *feeds, loom_tensor *const *vals) {
  loom_output out;
  cr_assert_eq(loom_fc_input_layer(g, f, n, cols, NULL, 1, &out, ST), LOOM_OK, "%s", loom_status_message(ST));
  loom_session *s = loom_session_new(g, NULL, ST);
  cr_assert(s, "%s", loom_status_message(ST));
  loom_node *init = loom_global_variables_initializer(g);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, ST), LOOM_OK, "%s", loom_status_message(ST));
  loom_tensor *t = NULL;
  cr_assert_eq(loom_session_run(s, feeds, vals, nfeeds, &out, &t, 1, NULL, 0, ST), LOOM_OK, "%s",
               loom_status_message(ST));
  loom_session_free(s);
  return t;
}

/* End to end: make_parse_example_spec -> tf.Examples in a TFRecord file ->
 * ragged dataset batches -> sparse features -> input_layer gives exactly
 * what the same values give as constants. */
Test(fc, tfrecord_parse_spec_to_input_layer) {
  loom_fc_set *s = loom_fc_set_new();
  loom_fc_embedding_options eo = loom_fc_embedding_options_default();
  loom_initializer ini = loom_init_random_uniform(-1, 1, 7);
  eo.initializer = &ini;
  eo.combiner = LOOM_COMBINER_SQRTN;
  static const char *CITY[] = {"sf", "la", "ny"};
  const loom_fc *cols[3] = {
      loom_fc_numeric(s, "age", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST),
      loom_fc_indicator(s, loom_fc_vocabulary_list(s, "city", 3, CITY, 1, -1, ST), ST),
      loom_fc_embedding(s, loom_fc_hash_bucket(s, "tags", 11, LOOM_STRING, ST), 4, &eo, ST)};
  for (int i = 0; i < 3; i++) cr_assert(cols[i], "%s", loom_status_message(ST));
  int nspec = 0;
  loom_feature_spec *spec = NULL;
  cr_assert_eq(loom_fc_make_parse_example_spec(3, cols, &nspec, &spec, ST), LOOM_OK, "%s", loom_status_message(ST));
  cr_assert_eq(nspec, 3);
  /* 5 examples: age, city (0-2 values), tags (0-3 values) */
  float age[] = {30, 41.5f, 17, 66, 25};
  const char *city[] = {"sf", "zz", "la", "ny", "sf", "la"};
  int64_t csp[] = {0, 2, 2, 3, 5, 6};
  const char *tags[] = {"x", "y", "z", "x", "w", "y", "y"};
  int64_t tsp[] = {0, 3, 4, 4, 6, 7};
  char path[] = "/tmp/loom_fc_e2e_XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(path, ST);
  cr_assert(w, "%s", loom_status_message(ST));
  for (int r = 0; r < 5; r++) {
    int64_t one = 1, nc = csp[r + 1] - csp[r], nt = tsp[r + 1] - tsp[r];
    loom_tensor *ta = loom_tensor_new(LOOM_F32, 1, &one, ST);
    ((float *)loom_tensor_data(ta))[0] = age[r];
    loom_tensor *tc = loom_tensor_new(LOOM_STRING, 1, &nc, ST);
    for (int64_t k = 0; k < nc; k++) loom_tensor_set_string(tc, k, city[csp[r] + k], strlen(city[csp[r] + k]), ST);
    loom_tensor *tt = loom_tensor_new(LOOM_STRING, 1, &nt, ST);
    for (int64_t k = 0; k < nt; k++) loom_tensor_set_string(tt, k, tags[tsp[r] + k], strlen(tags[tsp[r] + k]), ST);
    const char *names[] = {"age", "city", "tags"};
    const loom_tensor *vals[] = {ta, tc, tt};
    cr_assert_eq(loom_tfrecord_writer_write_example(w, 3, names, vals, ST), LOOM_OK, "%s", loom_status_message(ST));
    loom_tensor_free(ta);
    loom_tensor_free(tc);
    loom_tensor_free(tt);
  }
  cr_assert_eq(loom_tfrecord_writer_close(w, ST), LOOM_OK);
  const char *paths[] = {path};
  loom_dataset *ds = loom_dataset_tfrecord(1, paths, nspec, spec, NULL, ST);
  cr_assert(ds, "%s", loom_status_message(ST));
  ds = loom_dataset_batch(ds, 5, 0, ST);
  cr_assert(ds, "%s", loom_status_message(ST));
  int nc = loom_dataset_num_components(ds);
  cr_assert_eq(nc, 5);
  loom_tensor *vals[5] = {0};
  cr_assert_eq(loom_dataset_next(ds, vals, ST), LOOM_OK, "%s", loom_status_message(ST));
  /* graph 1: placeholders fed from the dataset */
  loom_graph *g1 = loom_graph_new();
  loom_features *f1 = loom_features_new();
  loom_output feeds[5];
  for (int i = 0; i < nc; i++) {
    int64_t dims[LOOM_MAX_DIMS];
    int nd = loom_dataset_component_shape(ds, i, dims);
    feeds[i] = loom_placeholder(g1, loom_dataset_component_dtype(ds, i), nd, dims, loom_dataset_component_name(ds, i));
  }
  for (int i = 0; i < nc; i++) {
    int rs = loom_dataset_component_row_splits(ds, i);
    const char *name = loom_dataset_component_name(ds, i);
    if (strstr(name, "/row_splits")) continue;
    if (rs >= 0) {
      loom_sparse sp = {feeds[i], feeds[rs]};
      cr_assert_eq(loom_features_add_sparse(f1, name, sp, ST), LOOM_OK);
    } else {
      cr_assert_eq(loom_features_add(f1, name, feeds[i], ST), LOOM_OK);
    }
  }
  loom_tensor *got = run_layer(g1, 3, cols, f1, nc, feeds, vals);
  /* graph 2: the same values as constants */
  loom_graph *g2 = loom_graph_new();
  loom_features *f2 = loom_features_new();
  loom_features_add(f2, "age", c_f32(g2, 5, 1, age), ST);
  int64_t n6 = 6, n7 = 7;
  add_sparse(f2, "city", c_str(g2, 1, &n6, city), g2, 5, csp);
  add_sparse(f2, "tags", c_str(g2, 1, &n7, tags), g2, 5, tsp);
  loom_tensor *want = run_layer(g2, 3, cols, f2, 0, NULL, NULL);
  const int64_t *gd = loom_tensor_dims(got), *wd = loom_tensor_dims(want);
  cr_assert_eq(loom_tensor_ndim(got), 2);
  cr_assert_eq(loom_tensor_ndim(want), 2);
  cr_assert_eq(gd[0], 5);
  cr_assert_eq(gd[1], 1 + 4 + 4);
  cr_assert_eq(wd[1], gd[1]);
  const float *pg = loom_tensor_data_const(got), *pw = loom_tensor_data_const(want);
  for (int64_t i = 0; i < 5 * gd[1]; i++) cr_assert_eq(pg[i], pw[i], "element %lld: %g vs %g", (long long)i, pg[i], pw[i]);
  /* spot checks by hand: the age column first (sorted names: age, city_indicator, tags_embedding),
   * row 0's cities "sf" and "zz" (the OOV bucket 3), row 1 has no city, row 2 no tags (zeros) */
  cr_assert_eq(pg[0 * 9], 30.0f);
  cr_assert_eq(pg[0 * 9 + 1 + 0], 1.0f);
  cr_assert_eq(pg[0 * 9 + 1 + 3], 1.0f);
  cr_assert_eq(pg[0 * 9 + 1 + 1] + pg[0 * 9 + 1 + 2], 0.0f);
  for (int k = 0; k < 4; k++) cr_assert_eq(pg[1 * 9 + 1 + k], 0.0f);
  for (int k = 0; k < 4; k++) cr_assert_eq(pg[2 * 9 + 5 + k], 0.0f);
  for (int i = 0; i < nc; i++) loom_tensor_free(vals[i]);
  loom_tensor_free(got);
  loom_tensor_free(want);
  loom_features_free(f1);
  loom_features_free(f2);
  loom_graph_free(g1);
  loom_graph_free(g2);
  loom_dataset_free(ds);
  loom_fc_parse_spec_free(nspec, spec);
  loom_fc_set_free(s);
  unlink(path);
}

/* input_layer's gradient: a numeric column gets its column of dy, an
 * embedding table the dy rows of the ids looked up, indicator and
 * bucketized columns nothing (checked against values computed by hand). */
Test(fc, input_layer_gradient_reaches_numeric_and_embedding_columns) {
  loom_graph *g = loom_graph_new();
  int64_t d = -1;
  loom_output x = loom_placeholder(g, LOOM_F32, 1, &d, "x");
  loom_output city = loom_placeholder(g, LOOM_STRING, 1, &d, "city");
  loom_features *f = loom_features_new();
  cr_assert_eq(loom_features_add(f, "x", x, ST), LOOM_OK);
  cr_assert_eq(loom_features_add(f, "city", city, ST), LOOM_OK);
  loom_fc_set *s = loom_fc_set_new();
  const char *voc[3] = {"a", "b", "c"};
  float bnd[2] = {0.0f, 1.0f};
  const loom_fc *num = loom_fc_numeric(s, "x", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST);
  const loom_fc *cols[4] = {
      num, loom_fc_bucketized(s, num, 2, bnd, ST),
      loom_fc_embedding(s, loom_fc_hash_bucket(s, "city", 7, LOOM_STRING, ST), 3, NULL, ST),
      loom_fc_indicator(s, loom_fc_vocabulary_list(s, "city", 3, voc, 0, -1, ST), ST)};
  for (int i = 0; i < 4; i++) cr_assert(cols[i], "%s", loom_status_message(ST));
  loom_output out;
  cr_assert_eq(loom_fc_input_layer(g, f, 4, cols, NULL, 1, &out, ST), LOOM_OK, "%s", loom_status_message(ST));
  /* columns by name: city_embedding [0, 3), city_indicator [3, 6), x [6], x_bucketized [7, 10) */
  enum { B = 4, W = 10 };
  float cv[B * W];
  for (int i = 0; i < B * W; i++) cv[i] = (float)(i % 7) - 2.5f + 0.125f * (float)i;
  loom_output c = loom_const_data(g, LOOM_F32, 2, (int64_t[]){B, W}, cv, "c");
  loom_output loss = loom_reduce_sum(g, loom_mul(g, out, c, NULL), 0, NULL, 0, NULL);
  int nv = 0;
  loom_variable *const *vs = loom_global_variables(g, &nv);
  cr_assert_eq(nv, 1);
  loom_output xs[2] = {x, loom_variable_output(vs[0])}, gr[2];
  cr_assert_eq(loom_gradients(g, 1, &loss, NULL, 2, xs, gr, ST), LOOM_OK, "%s", loom_status_message(ST));
  loom_session *sess = loom_session_new(g, NULL, ST);
  loom_node *init = loom_global_variables_initializer(g);
  cr_assert_eq(loom_session_run(sess, NULL, NULL, 0, NULL, NULL, 0, &init, 1, ST), LOOM_OK, "%s", loom_status_message(ST));
  const float xv[B] = {-1.0f, 0.5f, 1.0f, 3.0f};
  const char *cities[B] = {"a", "zz", "c", "a"};
  loom_tensor *xt = tu_f32(1, (int64_t[]){B}, xv);
  loom_tensor *ct = loom_tensor_new(LOOM_STRING, 1, (int64_t[]){B}, NULL);
  for (int i = 0; i < B; i++) loom_tensor_set_string(ct, i, cities[i], strlen(cities[i]), NULL);
  loom_output feeds[2] = {x, city}, fetch[3] = {out, gr[0], gr[1]};
  loom_tensor *fv[2] = {xt, ct}, *res[3] = {NULL, NULL, NULL};
  cr_assert_eq(loom_session_run(sess, feeds, fv, 2, fetch, res, 3, NULL, 0, ST), LOOM_OK, "%s", loom_status_message(ST));
  /* forward: indicator, x, buckets as TF computes them */
  const float *o = loom_tensor_data_const(res[0]);
  for (int r = 0; r < B; r++) {
    for (int k = 0; k < 3; k++) cr_assert_eq(o[r * W + 3 + k], strcmp(cities[r], voc[k]) == 0 ? 1.0f : 0.0f);
    cr_assert_eq(o[r * W + 6], xv[r]);
    int bucket = xv[r] < 0.0f ? 0 : xv[r] < 1.0f ? 1 : 2;
    for (int k = 0; k < 3; k++) cr_assert_eq(o[r * W + 7 + k], k == bucket ? 1.0f : 0.0f, "row %d bucket %d", r, k);
  }
  /* d loss / d x = column 6 of c */
  const float *gx = loom_tensor_data_const(res[1]);
  for (int r = 0; r < B; r++) cr_assert_eq(gx[r], cv[r * W + 6]);
  /* d loss / d table: row h(city) gets c[r, 0:3] (mean of one id) */
  float want[7 * 3] = {0};
  for (int r = 0; r < B; r++) {
    int h = (int)(loom_fingerprint64(cities[r], strlen(cities[r])) % 7);
    for (int k = 0; k < 3; k++) want[h * 3 + k] += cv[r * W + k];
  }
  tu_expect_f32(res[2], 2, (int64_t[]){7, 3}, want, 1e-6);
  for (int i = 0; i < 3; i++) loom_tensor_free(res[i]);
  loom_tensor_free(xt);
  loom_tensor_free(ct);
  loom_session_free(sess);
  loom_features_free(f);
  loom_fc_set_free(s);
  loom_graph_free(g);
}

/* ---- sequence columns ---- */
/* Two examples: ids {3, 1} and {2}, values {1, 2, 3, 4} and {5, 6} (shape (2,), default -1): T = 2;
 * the indicator, then the numeric column (sorted by name), example 1's second step padded. */
Test(fc, sequence_input_layer_hand_values_spec_and_errors) {
  loom_fc_set *s = loom_fc_set_new();
  const loom_fc *id = loom_fc_identity(s, "a", 4, 0, 0, ST);
  const loom_fc *seq = loom_fc_sequence_categorical(s, id, ST);
  cr_assert(seq, "%s", loom_status_message(ST));
  int64_t two = 2;
  const loom_fc *num = loom_fc_sequence_numeric(s, "b", 1, &two, -1.0, LOOM_F32, ST);
  cr_assert(num, "%s", loom_status_message(ST));
  const loom_fc *ind = loom_fc_indicator(s, seq, ST);
  cr_assert_str_eq(loom_fc_name(seq), "a");
  cr_assert_str_eq(loom_fc_name(ind), "a_indicator");
  cr_assert_eq(loom_fc_num_buckets(seq), 4);
  cr_assert_eq(loom_fc_dense_width(num), 2);
  /* only indicator / embedding take a sequence column */
  expect_err(loom_fc_weighted(s, seq, "w", ST), "sequence categorical column");
  expect_err(loom_fc_sequence_categorical(s, ind, ST), "identity, vocabulary or hash bucket");
  /* parse spec: VarLenFeatures (float32 for the numeric one) */
  const loom_fc *both[2] = {num, ind};
  int nspec = 0;
  loom_feature_spec *spec = NULL;
  cr_assert_eq(loom_fc_make_parse_example_spec(2, both, &nspec, &spec, ST), LOOM_OK);
  cr_assert_eq(nspec, 2);
  cr_assert(!strcmp(spec[0].name, "a") && spec[0].varlen && spec[0].dtype == LOOM_I64);
  cr_assert(!strcmp(spec[1].name, "b") && spec[1].varlen && spec[1].dtype == LOOM_F32);
  loom_fc_parse_spec_free(nspec, spec);

  loom_graph *g = loom_graph_new();
  loom_features *f = loom_features_new();
  int64_t n3 = 3, n6 = 6, asp[3] = {0, 2, 3}, bsp[3] = {0, 4, 6};
  const int64_t ids[3] = {3, 1, 2};
  const float vals[6] = {1, 2, 3, 4, 5, 6};
  add_sparse(f, "a", c_i64(g, 1, &n3, ids), g, 2, asp);
  add_sparse(f, "b", loom_const_data(g, LOOM_F32, 1, &n6, vals, NULL), g, 2, bsp);
  loom_output out, len;
  cr_assert_eq(loom_fc_sequence_input_layer(g, f, 2, both, NULL, 1, &out, &len, ST), LOOM_OK, "%s",
               loom_status_message(ST));
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, out), *l = tu_run1(g, 0, NULL, NULL, len);
  const float want[2 * 2 * 6] = {0, 0, 0, 1, 1, 2, 0, 1, 0, 0, 3, 4, 0, 0, 1, 0, 5, 6, 0, 0, 0, 0, -1, -1};
  tu_expect_f32(t, 3, (int64_t[]){2, 2, 6}, want, 0);
  const int64_t wl[2] = {2, 1};
  cr_assert_arr_eq(loom_tensor_data(l), wl, sizeof wl);
  loom_tensor_free(t);
  loom_tensor_free(l);
  /* a sequence column in input_layer, a non-sequence one in the sequence layer: TF's messages */
  const loom_fc *plain = loom_fc_indicator(s, id, ST);
  cr_assert_eq(loom_fc_input_layer(g, f, 1, &ind, NULL, 1, &out, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "must not be of type SequenceCategoricalColumn"), "%s",
            loom_status_message(ST));
  cr_assert_eq(loom_fc_sequence_input_layer(g, f, 1, &plain, NULL, 1, &out, &len, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "must be of type SequenceCategoricalColumn to use SequenceFeatures"),
            "%s", loom_status_message(ST));
  loom_features_free(f);
  loom_graph_free(g);
  loom_fc_set_free(s);
}

/* ---- normalizers through loom_fc_normalizer_via_out (what the Python binding uses) ---- */
static int halve_out(loom_graph *g, loom_output x, loom_output *out, void *user) {
  if (user) return 1; /* the binding's failure: no tensor */
  *out = loom_mul(g, x, loom_const_f32(g, 0.5f, NULL), NULL);
  return 0;
}

/* numeric: x [2, 2] -> x / 2; a failing normalizer fails the layer naming the column; the sequence column
 * normalizes its values (1..6 -> 0.5..3), its padding stays -1. */
Test(fc, normalizer_via_out_numeric_and_sequence) {
  loom_fc_set *s = loom_fc_set_new();
  int64_t two = 2;
  loom_fc_normalizer_out ok = {halve_out, NULL}, bad = {halve_out, &ok};
  const loom_fc *x = loom_fc_numeric(s, "x", 1, &two, NULL, LOOM_F32, loom_fc_normalizer_via_out, &ok, ST);
  const loom_fc *xb = loom_fc_numeric(s, "xb", 1, &two, NULL, LOOM_F32, loom_fc_normalizer_via_out, &bad, ST);
  const loom_fc *b =
      loom_fc_sequence_numeric_normalized(s, "b", 1, &two, -1.0, LOOM_F32, loom_fc_normalizer_via_out, &ok, ST);
  cr_assert(x && xb && b, "%s", loom_status_message(ST));
  cr_assert_str_eq(loom_fc_name(b), "b");
  loom_graph *g = loom_graph_new();
  loom_features *f = loom_features_new();
  const float xv[4] = {1, 2, 3, 5}, vals[6] = {1, 2, 3, 4, 5, 6};
  int64_t n6 = 6, bsp[3] = {0, 4, 6};
  loom_features_add(f, "x", c_f32(g, 2, 2, xv), ST);
  loom_features_add(f, "xb", c_f32(g, 2, 2, xv), ST);
  add_sparse(f, "b", loom_const_data(g, LOOM_F32, 1, &n6, vals, NULL), g, 2, bsp);
  loom_output out, len;
  cr_assert_eq(loom_fc_input_layer(g, f, 1, &x, NULL, 1, &out, ST), LOOM_OK, "%s", loom_status_message(ST));
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, out);
  const float want[4] = {0.5f, 1, 1.5f, 2.5f};
  tu_expect_f32(t, 2, (int64_t[]){2, 2}, want, 0);
  loom_tensor_free(t);
  cr_assert_eq(loom_fc_input_layer(g, f, 1, &xb, NULL, 1, &out, ST), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(ST), "column xb: normalizer_fn returned no tensor"), "%s",
            loom_status_message(ST));
  loom_graph *g2 = loom_graph_new();
  loom_features *f2 = loom_features_new();
  add_sparse(f2, "b", loom_const_data(g2, LOOM_F32, 1, &n6, vals, NULL), g2, 2, bsp);
  cr_assert_eq(loom_fc_sequence_input_layer(g2, f2, 1, &b, NULL, 1, &out, &len, ST), LOOM_OK, "%s",
               loom_status_message(ST));
  t = tu_run1(g2, 0, NULL, NULL, out);
  const float ws[2 * 2 * 2] = {0.5f, 1, 1.5f, 2, 2.5f, 3, -1, -1};
  tu_expect_f32(t, 3, (int64_t[]){2, 2, 2}, ws, 0);
  loom_tensor_free(t);
  loom_features_free(f2);
  loom_graph_free(g2);
  loom_features_free(f);
  loom_graph_free(g);
  loom_fc_set_free(s);
}
