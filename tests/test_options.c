/* Options structs (loom_base.h): every _default() sets struct_size to its
 * sizeof, and every public call that takes one rejects a zero-initialised
 * struct (struct_size 0) with "<type>: struct_size is 0: initialise it with
 * <type>_default()" before it reads any field, and a larger size than its
 * own; a smaller one (an older caller build) keeps the defaults for the
 * fields it lacks. */
#include <stddef.h>
#include "data_util.h"

static loom_status *ST;
static void setup(void) { ST = loom_status_new(); }
static void teardown(void) { loom_status_free(ST); }
TestSuite(options, .init = setup, .fini = teardown);

#define ZERO(T, v) \
  T v;             \
  memset(&v, 0, sizeof v)

static void expect_zero_msg(const char *m, const char *type) {
  char want[256];
  snprintf(want, sizeof want, "%s: struct_size is 0: initialise it with %s_default()", type, type);
  cr_assert(strstr(m, want), "message '%s' lacks '%s'", m, want);
}
static void expect_zero(loom_code rc, const char *type) {
  cr_assert_eq(rc, LOOM_INVALID_ARGUMENT, "%s: %s: %s", type, loom_code_name(rc), loom_status_message(ST));
  expect_zero_msg(loom_status_message(ST), type);
}
static void expect_zero_null(const void *p, const char *type) {
  cr_assert_null(p, "%s accepted a zeroed struct", type);
  expect_zero(loom_status_code(ST), type);
}

#define CHECK_DEFAULT(T) cr_expect_eq(T##_default().struct_size, sizeof(T), #T)

Test(options, every_default_sets_struct_size) {
  CHECK_DEFAULT(loom_idx_options);
  CHECK_DEFAULT(loom_csv_options);
  CHECK_DEFAULT(loom_tfrecord_options);
  CHECK_DEFAULT(loom_ps_server_options);
  CHECK_DEFAULT(loom_ps_connect_options);
  CHECK_DEFAULT(loom_fc_embedding_options);
  CHECK_DEFAULT(loom_dense_options);
  CHECK_DEFAULT(loom_conv2d_options);
  CHECK_DEFAULT(loom_dropout_options);
  CHECK_DEFAULT(loom_batch_norm_options);
  CHECK_DEFAULT(loom_momentum_options);
  CHECK_DEFAULT(loom_adagrad_options);
  CHECK_DEFAULT(loom_adam_options);
  CHECK_DEFAULT(loom_ftrl_options);
  CHECK_DEFAULT(loom_rmsprop_options);
  CHECK_DEFAULT(loom_adadelta_options);
  CHECK_DEFAULT(loom_linear_options);
  CHECK_DEFAULT(loom_dnn_options);
  CHECK_DEFAULT(loom_dnn_linear_combined_options);
  CHECK_DEFAULT(loom_baseline_options);
  CHECK_DEFAULT(loom_train_options);
  CHECK_DEFAULT(loom_eval_options);
  CHECK_DEFAULT(loom_predict_options);
  CHECK_DEFAULT(loom_predictor_options);
  CHECK_DEFAULT(loom_binary_head_options);
  CHECK_DEFAULT(loom_multi_class_head_options);
  CHECK_DEFAULT(loom_multi_label_head_options);
  CHECK_DEFAULT(loom_regression_head_options);
  CHECK_DEFAULT(loom_job_options);
  CHECK_DEFAULT(loom_session_options);
  CHECK_DEFAULT(loom_sequential_compile_options);
  CHECK_DEFAULT(loom_sequential_fit_options);
  CHECK_DEFAULT(loom_run_config);
  CHECK_DEFAULT(loom_train_spec);
  CHECK_DEFAULT(loom_eval_spec);
}

/* A zeroed struct used to reach the field checks ("loss_reduction must be
 * ... (got 0)") or ran with all-zero settings. */
Test(options, canned_and_heads_reject_a_zeroed_struct) {
  ZERO(loom_dnn_options, d);
  expect_zero_null(loom_dnn_classifier_new(&d, ST), "loom_dnn_options");
  cr_assert(strstr(loom_status_message(ST), "DNNClassifier: "), "%s", loom_status_message(ST));
  expect_zero_null(loom_dnn_regressor_new(&d, ST), "loom_dnn_options");
  ZERO(loom_linear_options, l);
  expect_zero_null(loom_linear_classifier_new(&l, ST), "loom_linear_options");
  ZERO(loom_dnn_linear_combined_options, c);
  expect_zero_null(loom_dnn_linear_combined_regressor_new(&c, ST), "loom_dnn_linear_combined_options");
  ZERO(loom_baseline_options, b);
  expect_zero_null(loom_baseline_classifier_new(&b, ST), "loom_baseline_options");
  ZERO(loom_binary_head_options, bh);
  expect_zero_null(loom_binary_class_head_new(&bh, ST), "loom_binary_head_options");
  ZERO(loom_multi_class_head_options, mh);
  mh.n_classes = 3;
  expect_zero_null(loom_multi_class_head_new(&mh, ST), "loom_multi_class_head_options");
  ZERO(loom_multi_label_head_options, lh);
  lh.n_classes = 3;
  expect_zero_null(loom_multi_label_head_new(&lh, ST), "loom_multi_label_head_options");
  ZERO(loom_regression_head_options, rh);
  expect_zero_null(loom_regression_head_new(&rh, ST), "loom_regression_head_options");
  expect_zero_null(loom_poisson_regression_head_new(&rh, ST), "loom_regression_head_options");
  /* larger than this library's: a newer header (or garbage) */
  loom_dnn_options big = loom_dnn_options_default();
  big.struct_size = sizeof big + 64;
  cr_assert_null(loom_dnn_classifier_new(&big, ST));
  cr_assert(strstr(loom_status_message(ST), "larger than this library's"), "%s", loom_status_message(ST));
}

static loom_dataset *no_input(loom_mode mode, const loom_params *params, void *user, loom_status *st) {
  (void)mode, (void)params, (void)user;
  loom_status_set(st, LOOM_INTERNAL, "the input_fn must not be called");
  return NULL;
}

Test(options, estimator_calls_reject_a_zeroed_struct) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_opts");
  loom_fc_set *s = loom_fc_set_new();
  const loom_fc *x = loom_fc_numeric(s, "x", 0, NULL, NULL, LOOM_F32, NULL, NULL, ST);
  loom_linear_options l = loom_linear_options_default();
  l.nfeature_columns = 1;
  l.feature_columns = &x;
  l.model_dir = dir;
  loom_estimator *e = loom_linear_regressor_new(&l, ST);
  cr_assert(e, "%s", loom_status_message(ST));
  ZERO(loom_train_options, t);
  expect_zero(loom_estimator_train(e, no_input, NULL, &t, ST), "loom_train_options");
  ZERO(loom_eval_options, ev);
  loom_eval_result *res = NULL;
  expect_zero(loom_estimator_evaluate(e, no_input, NULL, &ev, &res, ST), "loom_eval_options");
  ZERO(loom_predict_options, p);
  expect_zero_null(loom_estimator_predict(e, no_input, NULL, &p, ST), "loom_predict_options");
  ZERO(loom_job_options, j);
  loom_train_spec ts = loom_train_spec_default();
  loom_eval_spec es = loom_eval_spec_default();
  loom_tae_result *out = NULL;
  expect_zero(loom_run_job(e, &ts, &es, &j, &out, ST), "loom_job_options");
  loom_tae_result *tr = NULL;
  ZERO(loom_train_spec, zts);
  expect_zero(loom_train_and_evaluate(e, &zts, &es, &tr, ST), "loom_train_spec");
  ZERO(loom_eval_spec, zes);
  ts.input_fn = no_input;
  expect_zero(loom_train_and_evaluate(e, &ts, &zes, &tr, ST), "loom_eval_spec");
  ZERO(loom_run_config, rc);
  l.config = &rc;
  expect_zero_null(loom_linear_regressor_new(&l, ST), "loom_run_config");
  ZERO(loom_predictor_options, po);
  expect_zero_null(loom_predictor_load(dir, &po, ST), "loom_predictor_options");
  loom_estimator_free(e);
  loom_fc_set_free(s);
  tu_rmtree(dir);
}

Test(options, graph_builders_report_a_zeroed_struct_in_the_graph) {
  int64_t d2[2] = {-1, 4};
  struct {
    const char *type;
    int which;
  } cases[] = {{"loom_dense_options", 0}, {"loom_conv2d_options", 1}, {"loom_dropout_options", 2},
               {"loom_batch_norm_options", 3}};
  for (int k = 0; k < 4; k++) {
    loom_graph *g = loom_graph_new();
    loom_output x = loom_placeholder(g, LOOM_F32, 2, d2, "x");
    union {
      loom_dense_options d;
      loom_conv2d_options c;
      loom_dropout_options r;
      loom_batch_norm_options b;
    } z;
    memset(&z, 0, sizeof z);
    if (k == 0) loom_layers_dense(g, x, 3, &z.d, "d");
    if (k == 1) loom_layers_conv2d(g, x, 3, (const int64_t[2]){1, 1}, &z.c, "c");
    if (k == 2) loom_layers_dropout(g, x, 0.5, &z.r, "r");
    if (k == 3) loom_layers_batch_normalization(g, x, &z.b, "b");
    cr_assert_neq(loom_graph_status(g, ST), LOOM_OK, "%s", cases[k].type);
    expect_zero_msg(loom_status_message(ST), cases[k].type);
    loom_graph_free(g);
  }
  /* optimizers: reported when applied */
  ZERO(loom_momentum_options, mo);
  ZERO(loom_adagrad_options, ag);
  ZERO(loom_adam_options, ad);
  ZERO(loom_ftrl_options, fo);
  ZERO(loom_rmsprop_options, rm);
  ZERO(loom_adadelta_options, dd);
  for (int k = 0; k < 6; k++) {
    loom_graph *g = loom_graph_new();
    loom_output lr = loom_const_f32(g, 0.1f, "lr");
    static const char *types[6] = {"loom_momentum_options", "loom_adagrad_options", "loom_adam_options",
                                   "loom_ftrl_options",     "loom_rmsprop_options", "loom_adadelta_options"};
    loom_optimizer *o = k == 0   ? loom_optimizer_momentum(lr, &mo)
                        : k == 1 ? loom_optimizer_adagrad(lr, &ag)
                        : k == 2 ? loom_optimizer_adam(lr, &ad)
                        : k == 3 ? loom_optimizer_ftrl(lr, &fo)
                        : k == 4 ? loom_optimizer_rmsprop(lr, &rm)
                                 : loom_optimizer_adadelta(lr, &dd);
    cr_assert(o);
    cr_assert_null(loom_optimizer_apply_gradients(o, g, 0, NULL, NULL, NULL, NULL));
    cr_assert_neq(loom_graph_status(g, ST), LOOM_OK);
    expect_zero_msg(loom_status_message(ST), types[k]);
    loom_optimizer_free(o);
    loom_graph_free(g);
  }
  ZERO(loom_session_options, so);
  loom_graph *g = loom_graph_new();
  expect_zero_null(loom_session_new(g, &so, ST), "loom_session_options");
  loom_graph_free(g);
  loom_sequential *m = loom_sequential_new(ST);
  ZERO(loom_dense_options, dn);
  cr_assert_eq(loom_sequential_add_dense(m, 3, &dn, "d", ST), -1);
  expect_zero_msg(loom_status_message(ST), "loom_dense_options");
  ZERO(loom_batch_norm_options, bn);
  cr_assert_eq(loom_sequential_add_batch_norm(m, &bn, "b", ST), -1);
  expect_zero_msg(loom_status_message(ST), "loom_batch_norm_options");
  ZERO(loom_sequential_compile_options, co);
  expect_zero(loom_sequential_compile(m, &co, ST), "loom_sequential_compile_options");
  loom_sequential_free(m);
}

Test(options, data_columns_and_ps_reject_a_zeroed_struct) {
  ZERO(loom_idx_options, io);
  expect_zero_null(loom_dataset_idx("/nonexistent", NULL, &io, ST), "loom_idx_options");
  ZERO(loom_tfrecord_options, to);
  const char *paths[1] = {"/nonexistent"};
  loom_feature_spec spec[1];
  memset(spec, 0, sizeof spec);
  expect_zero_null(loom_dataset_tfrecord_ex(1, paths, 1, spec, NULL, &to, ST), "loom_tfrecord_options");
  ZERO(loom_csv_options, co);
  expect_zero_null(loom_dataset_csv(1, paths, &co, ST), "loom_csv_options");
  int n = -1;
  char **names = NULL;
  loom_tensor **t = NULL;
  expect_zero(loom_csv_read_tensors("/nonexistent", &co, &n, &names, &t, ST), "loom_csv_options");
  ZERO(loom_ps_server_options, so);
  expect_zero_null(loom_ps_server_start(&so, ST), "loom_ps_server_options");
  ZERO(loom_ps_connect_options, pc);
  pc.host = "127.0.0.1";
  expect_zero_null(loom_ps_connect(&pc, ST), "loom_ps_connect_options");
  loom_fc_set *s = loom_fc_set_new();
  const loom_fc *id = loom_fc_identity(s, "id", 5, 0, 0, ST);
  ZERO(loom_fc_embedding_options, eo);
  expect_zero_null(loom_fc_embedding(s, id, 2, &eo, ST), "loom_fc_embedding_options");
  loom_fc *out[1];
  expect_zero(loom_fc_shared_embeddings(s, 1, &id, 2, &eo, out, ST), "loom_fc_embedding_options");
  loom_fc_set_free(s);
}

/* A caller built against an older, smaller header: the fields past its
 * struct_size keep their defaults (here label_name, whose garbage value
 * would otherwise be an error). */
Test(options, smaller_struct_size_keeps_the_defaults) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_opts");
  char *p = path_in(dir, "a.csv");
  tu_write_file(p, "a\n1\n2\n", 6);
  loom_csv_column col = {NULL, LOOM_F32, NULL, 1, 0};
  loom_csv_options o = loom_csv_options_default();
  o.ncolumns = 1;
  o.columns = &col;
  o.label_name = "no_such_column";
  const char *paths[1] = {p};
  cr_assert_null(loom_dataset_csv(1, paths, &o, ST));
  o.struct_size = (uint32_t)offsetof(loom_csv_options, label_name);
  loom_dataset *ds = chk(loom_dataset_csv(1, paths, &o, ST), ST);
  cr_assert_eq(loom_dataset_label_index(ds), -1);
  loom_dataset_free(ds);
  free(p);
  tu_rmtree(dir);
}
