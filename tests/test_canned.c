/* test_canned.c - the canned estimators (loom_canned.h): TF 2.15's variable
 * names and shapes (tests/fixtures/canned/canned_vars.h from
 * scripts/gen_canned_fixtures.py), defaults, training to known accuracies on
 * iris and diamonds, metric and prediction keys, export -> predictor ==
 * predict, and option errors. Warm start and resume: test_canned_warm.c. */
#include "canned_util.h"
#include "canned_small.h"
#include "fixtures/canned/canned_vars.h"
#include "fixtures/canned/wd_trajectory.h"
#include "fixtures/canned/dnn_rmsprop_trajectory.h"


Test(canned, variable_names_and_shapes_equal_tf) {
  small_cols s;
  small_cols_make(&s);
  loom_status *st = loom_status_new();
  for (int m = 0; m < CANNED_NMODELS; m++) {
    const canned_model_vars *want = &canned_models[m];
    char dir[TU_TMPDIR_CAP];
    tu_tmpdir(dir, sizeof dir, "canned_vars");
    loom_run_config cfg = cu_config();
    loom_estimator *e = make_fixture_model(want->model, &s, dir, &cfg, st);
    cr_assert(e, "%s: %s", want->model, loom_status_message(st));
    cu_data d;
    small_data(&d, want->model[strlen(want->model) - 1] == '3' ? 3 : 2, strstr(want->model, "regressor") != NULL);
    cu_train(e, &d, 1);
    cu_vars got;
    cu_list_vars(e, &got);
    int nwant = 0;
    for (int i = 0; i < want->n; i++) {
      const canned_var *w = &want->vars[i];
      if (w->slot) continue;
      nwant++;
      const cu_var *g = cu_find(&got, w->name);
      cr_expect(g, "%s: loom has no variable %s", want->model, w->name);
      if (!g) continue;
      cr_expect_eq(g->rank, w->rank, "%s: %s rank %d want %d", want->model, w->name, g->rank, w->rank);
      for (int k = 0; k < w->rank && k < g->rank; k++)
        cr_expect_eq(g->dims[k], w->dims[k], "%s: %s dim %d = %lld want %lld", want->model, w->name, k,
                     (long long)g->dims[k], (long long)w->dims[k]);
    }
    int nmodel = 0;
    for (int i = 0; i < got.n; i++) {
      if (cu_is_slot(&got, got.v[i].name)) continue;
      nmodel++;
      int known = 0;
      for (int k = 0; k < want->n; k++) known |= !strcmp(want->vars[k].name, got.v[i].name);
      cr_expect(known, "%s: loom variable %s is not in TF's model", want->model, got.v[i].name);
    }
    cr_expect_eq(nmodel, nwant, "%s: %d model variables, TF %d", want->model, nmodel, nwant);
    cu_data_free(&d);
    loom_estimator_free(e);
    tu_rmtree(dir);
  }
  loom_fc_set_free(s.set);
  loom_status_free(st);
}

Test(canned, default_options_and_learning_rates) {
  loom_linear_options l = loom_linear_options_default();
  cr_expect_str_eq(l.optimizer.name, "Ftrl");
  cr_expect_eq(l.n_classes, 2);
  cr_expect_eq(l.label_dimension, 1);
  cr_expect_eq(l.sparse_combiner, LOOM_COMBINER_SUM);
  cr_expect_eq(l.loss_reduction, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_dnn_options d = loom_dnn_options_default();
  cr_expect_str_eq(d.optimizer.name, "Adagrad");
  cr_expect_str_eq(d.activation, "relu");
  cr_expect_eq(d.dropout, 0);
  cr_expect_eq(d.batch_norm, 0);
  loom_dnn_linear_combined_options c = loom_dnn_linear_combined_options_default();
  cr_expect_str_eq(c.linear_optimizer.name, "Ftrl");
  cr_expect_str_eq(c.dnn_optimizer.name, "Adagrad");
  loom_baseline_options b = loom_baseline_options_default();
  cr_expect_str_eq(b.optimizer.name, "Ftrl");
  /* TF 2.15's learning rates */
  cr_expect_eq(loom_canned_learning_rate("Linear", &l.optimizer, 9), 0.2);
  loom_canned_optimizer none = {NULL, 0, NULL, NULL};
  cr_expect_eq(loom_canned_learning_rate("Linear", &none, 4), 0.2);
  cr_expect(fabs(loom_canned_learning_rate("Linear", &none, 36) - 1.0 / 6) < 1e-15);
  /* TF 2.15's DNN*V2: a name gets the Keras optimizer's default (not dnn.py's
   * _LEARNING_RATE 0.05, which only the TF 1 path passes) */
  cr_expect_eq(loom_canned_learning_rate("DNN", &d.optimizer, 3), 0.001);
  cr_expect_eq(loom_canned_learning_rate("DNN", &none, 3), 0.001);
  static const char *const dnn_names[4] = {"Adam", "Ftrl", "RMSProp", "SGD"};
  static const double dnn_lr[4] = {0.001, 0.001, 0.001, 0.01};
  for (int i = 0; i < 4; i++) {
    loom_canned_optimizer o = {dnn_names[i], 0, NULL, NULL};
    cr_expect_eq(loom_canned_learning_rate("DNN", &o, 3), dnn_lr[i], "%s", dnn_names[i]);
  }
  cr_expect_eq(loom_canned_learning_rate("DNNLinearCombined/dnn", &c.dnn_optimizer, 3), 0.001);
  cr_expect_eq(loom_canned_learning_rate("DNNLinearCombined/linear", &c.linear_optimizer, 4), 0.005);
  cr_expect(fabs(loom_canned_learning_rate("DNNLinearCombined/linear", &c.linear_optimizer, 1000000) - 0.001) <
            1e-15);
  cr_expect_eq(loom_canned_learning_rate("Baseline", &b.optimizer, 0), 0.3);
  loom_canned_optimizer adam = {"Adam", 0.01, NULL, NULL};
  cr_expect_eq(loom_canned_learning_rate("DNN", &adam, 3), 0.01);
  cr_expect_eq(loom_canned_learning_rate("Boosted", &adam, 3), -1);
}

/* Every canned constructor rejects two feature columns of one name with
 * TF's message naming the estimator, the field and both positions (a DNN
 * accepted them and a linear model failed later on variable reuse). The
 * same name in the linear and the dnn list of a combined model is fine. */
Test(canned, duplicate_feature_column_names_rejected) {
  small_cols s;
  small_cols_make(&s);
  loom_status *st = loom_status_new();
  const loom_fc *dup[3] = {s.lin[0], s.lin[1], s.lin[0]};
  const loom_fc *dupd[3] = {s.dnn[1], s.dnn[0], s.dnn[1]};
  static const int64_t h4[1] = {4};
  const char *tail = "This usually means that these columns refer to same base feature. Either one must be "
                     "discarded or a duplicated but renamed item must be inserted in features dict.";
#define EXPECT_DUP(call, what)                                                                           \
  do {                                                                                                  \
    loom_estimator *e_ = (call);                                                                        \
    cr_expect_null(e_);                                                                                 \
    loom_estimator_free(e_);                                                                            \
    cr_expect_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);                                          \
    cr_expect(strstr(loom_status_message(st), what) && strstr(loom_status_message(st), tail), "%s",     \
              loom_status_message(st));                                                                 \
  } while (0)
  loom_linear_options l = loom_linear_options_default();
  l.nfeature_columns = 3;
  l.feature_columns = dup;
  EXPECT_DUP(loom_linear_classifier_new(&l, st),
             "LinearClassifier: Duplicate feature column name found for columns: 'x' (feature_columns[2]) and "
             "'x' (feature_columns[0])");
  EXPECT_DUP(loom_linear_regressor_new(&l, st), "LinearRegressor: Duplicate feature column name");
  loom_dnn_options d = loom_dnn_options_default();
  d.nfeature_columns = 3;
  d.feature_columns = dupd;
  d.nhidden_units = 1;
  d.hidden_units = h4;
  EXPECT_DUP(loom_dnn_classifier_new(&d, st),
             "DNNClassifier: Duplicate feature column name found for columns: 'c_embedding' (feature_columns[2]) "
             "and 'c_embedding' (feature_columns[0])");
  EXPECT_DUP(loom_dnn_regressor_new(&d, st), "DNNRegressor: Duplicate feature column name");
  loom_dnn_linear_combined_options c = loom_dnn_linear_combined_options_default();
  c.nlinear_feature_columns = 3;
  c.linear_feature_columns = dup;
  c.ndnn_feature_columns = 2;
  c.dnn_feature_columns = s.dnn;
  c.ndnn_hidden_units = 1;
  c.dnn_hidden_units = h4;
  EXPECT_DUP(loom_dnn_linear_combined_classifier_new(&c, st), "(linear_feature_columns[2])");
  c.nlinear_feature_columns = 2;
  c.ndnn_feature_columns = 3;
  c.dnn_feature_columns = dupd;
  EXPECT_DUP(loom_dnn_linear_combined_regressor_new(&c, st), "(dnn_feature_columns[2])");
#undef EXPECT_DUP
  c.ndnn_feature_columns = 2;
  c.dnn_feature_columns = s.dnn; /* 'x' in both lists */
  c.linear_feature_columns = s.lin;
  loom_estimator *e = loom_dnn_linear_combined_classifier_new(&c, st);
  cr_expect_not_null(e, "%s", loom_status_message(st));
  loom_estimator_free(e);
  loom_status_free(st);
  loom_fc_set_free(s.set);
}

/* ---- iris: every classifier with n_classes 3 ---- */
typedef struct iris_cols {
  loom_fc_set *set;
  const loom_fc *cols[4];
} iris_cols;

static void iris_cols_make(iris_cols *ic) {
  static const char *const fn[4] = {"SepalLength", "SepalWidth", "PetalLength", "PetalWidth"};
  ic->set = loom_fc_set_new();
  for (int k = 0; k < 4; k++) {
    ic->cols[k] = loom_fc_numeric(ic->set, fn[k], 0, NULL, NULL, LOOM_F32, NULL, NULL, NULL);
    cr_assert(ic->cols[k]);
  }
}

enum { K_LINEAR, K_DNN, K_COMBINED, K_BASELINE };
static const char *const KIND_NAMES[4] = {"Linear", "DNN", "DNNLinearCombined", "Baseline"};

static const int64_t IRIS_HIDDEN[2] = {10, 10};

static loom_estimator *iris_model(int kind, iris_cols *ic, const char *dir, loom_run_config *cfg, int64_t n_classes,
                                  int32_t nvocab, const char *const *vocab, loom_status *st) {
  switch (kind) {
    case K_LINEAR: {
      loom_linear_options o = loom_linear_options_default();
      o.model_dir = dir;
      o.config = cfg;
      o.n_classes = n_classes;
      o.nlabel_vocabulary = nvocab;
      o.label_vocabulary = vocab;
      o.nfeature_columns = 4;
      o.feature_columns = ic->cols;
      return loom_linear_classifier_new(&o, st);
    }
    case K_DNN: {
      loom_dnn_options o = loom_dnn_options_default();
      o.model_dir = dir;
      o.config = cfg;
      o.n_classes = n_classes;
      o.nlabel_vocabulary = nvocab;
      o.label_vocabulary = vocab;
      o.nfeature_columns = 4;
      o.feature_columns = ic->cols;
      o.nhidden_units = 2;
      o.hidden_units = IRIS_HIDDEN;
      o.optimizer.learning_rate = 0.1;
      return loom_dnn_classifier_new(&o, st);
    }
    case K_COMBINED: {
      loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
      o.model_dir = dir;
      o.config = cfg;
      o.n_classes = n_classes;
      o.nlabel_vocabulary = nvocab;
      o.label_vocabulary = vocab;
      o.nlinear_feature_columns = 2;
      o.linear_feature_columns = ic->cols + 2;
      o.ndnn_feature_columns = 4;
      o.dnn_feature_columns = ic->cols;
      o.ndnn_hidden_units = 2;
      o.dnn_hidden_units = IRIS_HIDDEN;
      o.dnn_optimizer.learning_rate = 0.1;
      o.linear_optimizer.learning_rate = 0.1;
      return loom_dnn_linear_combined_classifier_new(&o, st);
    }
    default: {
      loom_baseline_options o = loom_baseline_options_default();
      o.model_dir = dir;
      o.config = cfg;
      o.n_classes = n_classes;
      o.nlabel_vocabulary = nvocab;
      o.label_vocabulary = vocab;
      return loom_baseline_classifier_new(&o, st);
    }
  }
}

static void check_keys_eval(loom_estimator *e, cu_data *d, int n, const char *const *want) {
  loom_status *st = loom_status_new();
  loom_eval_result *r = NULL;
  loom_eval_options eo = loom_eval_options_default();
  cr_assert_eq(loom_estimator_evaluate(e, cu_input_fn, d, &eo, &r, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(loom_eval_result_count(r), n, "%d eval keys, want %d", loom_eval_result_count(r), n);
  for (int i = 0; i < n && i < loom_eval_result_count(r); i++) cr_expect_str_eq(loom_eval_result_key(r, i), want[i]);
  loom_eval_result_free(r);
  loom_status_free(st);
}

/* predict (one batch) vs the exported model through loom_predictor: same
 * values for every prediction key; the keys equal want (sorted). */
/* Classifiers: "all_classes" [B, n] holds the classes' strings (vocab[k],
 * or the decimal k without a vocabulary) and "classes" [B, 1] the string of
 * "class_ids", as TF's heads give them. */
static void check_string_classes(const loom_prediction_iter *it, int64_t n_classes, const char *const *vocab) {
  const loom_tensor *ids = loom_prediction_get(it, "class_ids"), *cls = loom_prediction_get(it, "classes"),
                    *all = loom_prediction_get(it, "all_classes");
  cr_assert(ids && cls && all);
  cr_assert_eq(loom_tensor_dtype(cls), LOOM_STRING);
  cr_assert_eq(loom_tensor_dtype(all), LOOM_STRING);
  int64_t B = loom_tensor_numel(ids);
  cr_assert_eq(loom_tensor_numel(cls), B);
  cr_assert_eq(loom_tensor_numel(all), B * n_classes);
  const int64_t *id = loom_tensor_data_const(ids);
  for (int64_t i = 0; i < B; i++) {
    char dec[24];
    size_t len = 0;
    for (int64_t k = 0; k < n_classes; k++) {
      snprintf(dec, sizeof dec, "%lld", (long long)k);
      const char *want = vocab ? vocab[k] : dec;
      const char *s = loom_tensor_get_string(all, i * n_classes + k, &len);
      cr_expect(len == strlen(want) && !memcmp(s, want, len), "all_classes[%lld,%lld] = '%.*s', want '%s'",
                (long long)i, (long long)k, (int)len, s, want);
    }
    snprintf(dec, sizeof dec, "%lld", (long long)id[i]);
    const char *want = vocab ? vocab[id[i]] : dec;
    const char *s = loom_tensor_get_string(cls, i, &len);
    cr_expect(len == strlen(want) && !memcmp(s, want, len), "classes[%lld] = '%.*s', class id %lld", (long long)i,
              (int)len, s, (long long)id[i]);
  }
}

static void check_predict_export(loom_estimator *e, cu_data *test, const char *dir, int nkeys,
                                 const char *const *want_keys, int64_t n_classes, const char *const *vocab) {
  loom_status *st = loom_status_new();
  loom_predict_options po = loom_predict_options_default();
  po.yield_single_examples = 0;
  loom_prediction_iter *it = loom_estimator_predict(e, cu_predict_input_fn, test, &po, st);
  cr_assert(it, "%s", loom_status_message(st));
  cr_assert_eq(loom_prediction_next(it, st), LOOM_OK, "%s", loom_status_message(st));
  int np = loom_prediction_count(it);
  cr_expect_eq(np, nkeys, "%d prediction keys, want %d", np, nkeys);
  for (int i = 0; i < nkeys; i++) cr_expect(loom_prediction_get(it, want_keys[i]), "no prediction %s", want_keys[i]);
  if (n_classes) check_string_classes(it, n_classes, vocab);

  char base[600], exp_dir[1024];
  snprintf(base, sizeof base, "%s/export", dir);
  cr_assert_eq(loom_estimator_export(e, cu_serving_fn, test, base, NULL, exp_dir, sizeof exp_dir, st), LOOM_OK, "%s",
               loom_status_message(st));
  loom_predictor_options pro = loom_predictor_options_default();
  pro.signature = "predict";
  pro.num_threads = 1;
  loom_predictor *pd = loom_predictor_load(exp_dir, &pro, st);
  cr_assert(pd, "%s", loom_status_message(st));
  int ni = loom_predictor_num_inputs(pd, "predict"), no = loom_predictor_num_outputs(pd, "predict");
  cr_assert_eq(no, np, "predictor has %d outputs, predict %d", no, np);
  loom_tensor *in[CU_MAXF];
  for (int i = 0; i < ni; i++) {
    const char *k = loom_predictor_input_key(pd, "predict", i);
    in[i] = NULL;
    for (int j = 0; j < test->nf; j++)
      if (!strcmp(test->names[j], k)) in[i] = test->cols[j];
    cr_assert(in[i], "no data for serving input %s", k);
  }
  loom_tensor *out[16] = {0};
  cr_assert_eq(loom_predictor_run(pd, "predict", ni, in, no, out, st), LOOM_OK, "%s", loom_status_message(st));
  for (int i = 0; i < no; i++) {
    const char *k = loom_predictor_output_key(pd, "predict", i);
    const loom_tensor *p = loom_prediction_get(it, k);
    cr_assert(p, "predict lacks %s", k);
    cr_expect_eq(loom_tensor_nbytes(p), loom_tensor_nbytes(out[i]), "%s: sizes differ", k);
    if (loom_tensor_dtype(p) != LOOM_STRING && loom_tensor_nbytes(p) == loom_tensor_nbytes(out[i]))
      cr_expect(!memcmp(loom_tensor_data_const(p), loom_tensor_data_const(out[i]), loom_tensor_nbytes(p)),
                "%s: predictor and predict differ", k);
    if (loom_tensor_dtype(p) == LOOM_STRING) { /* classes, all_classes: bitwise equal strings */
      cr_expect_eq(loom_tensor_dtype(out[i]), LOOM_STRING, "%s: predictor gives %s", k,
                   loom_dtype_name(loom_tensor_dtype(out[i])));
      for (int64_t j = 0; j < loom_tensor_numel(p) && loom_tensor_dtype(out[i]) == LOOM_STRING; j++) {
        size_t la = 0, lb = 0;
        const char *a = loom_tensor_get_string(p, j, &la), *b = loom_tensor_get_string(out[i], j, &lb);
        cr_expect(la == lb && !memcmp(a, b, la), "%s[%lld]: predict '%.*s', predictor '%.*s'", k, (long long)j,
                  (int)la, a, (int)lb, b);
      }
    }
    loom_tensor_free(out[i]);
  }
  loom_predictor_free(pd);
  loom_prediction_iter_free(it);
  loom_status_free(st);
}

static const char *const MC_EVAL_KEYS[] = {"accuracy", "average_loss", "global_step", "loss"};
static const char *const MC_PRED_KEYS[] = {"all_class_ids", "all_classes", "class_ids",
                                           "classes",       "logits",      "probabilities"};

static void iris_case(int kind, int64_t steps, double min_acc, double max_acc) {
  iris_cols ic;
  iris_cols_make(&ic);
  cu_data tr, te;
  cu_iris(&tr, 0, 0);
  cu_iris(&te, 1, 0);
  tr.batch = 32;
  tr.shuffle = 1;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "canned_iris");
  loom_status *st = loom_status_new();
  loom_run_config cfg = cu_config();
  loom_estimator *e = iris_model(kind, &ic, dir, &cfg, 3, 0, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  cu_train(e, &tr, steps);
  double acc = cu_eval(e, &te, "accuracy");
  cr_expect(acc >= min_acc && acc <= max_acc, "%s: test accuracy %g not in [%g, %g]", KIND_NAMES[kind], acc, min_acc,
            max_acc);
  check_keys_eval(e, &te, 4, MC_EVAL_KEYS);
  check_predict_export(e, &te, dir, 6, MC_PRED_KEYS, 3, NULL);
  loom_estimator_free(e);
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
  tu_rmtree(dir);
}

Test(canned, iris_linear_classifier_3_classes) { iris_case(K_LINEAR, 1000, 0.9, 1.0); }
Test(canned, iris_dnn_classifier_3_classes) { iris_case(K_DNN, 1000, 0.9, 1.0); }
Test(canned, iris_dnn_linear_combined_classifier_3_classes) { iris_case(K_COMBINED, 1000, 0.9, 1.0); }

/* Baseline learns the class priors: its probabilities are the training
 * label frequencies (to ~1e-2 after FTRL at 0.3), for every example. */
Test(canned, iris_baseline_classifier_learns_priors) {
  iris_cols ic;
  iris_cols_make(&ic);
  cu_data tr, te;
  cu_iris(&tr, 0, 0);
  cu_iris(&te, 1, 0);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "canned_base");
  loom_status *st = loom_status_new();
  loom_run_config cfg = cu_config();
  loom_estimator *e = iris_model(K_BASELINE, &ic, dir, &cfg, 3, 0, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  cu_train(e, &tr, 2000);
  double freq[3] = {0};
  const int64_t *lab = loom_tensor_data_const(tr.cols[4]);
  for (int i = 0; i < tr.n; i++) freq[lab[i]] += 1.0 / tr.n;
  loom_predict_options po = loom_predict_options_default();
  loom_prediction_iter *it = loom_estimator_predict(e, cu_predict_input_fn, &te, &po, st);
  cr_assert(it, "%s", loom_status_message(st));
  int n = 0;
  while (loom_prediction_next(it, st) == LOOM_OK) {
    const float *p = loom_tensor_data_const(loom_prediction_get(it, "probabilities"));
    for (int k = 0; k < 3; k++) cr_expect(fabs(p[k] - freq[k]) < 0.01, "p[%d] = %g, frequency %g", k, p[k], freq[k]);
    n++;
  }
  cr_expect_eq(n, 30);
  loom_prediction_iter_free(it);
  double majority = fmax(freq[0], fmax(freq[1], freq[2]));
  (void)majority;
  check_keys_eval(e, &te, 4, MC_EVAL_KEYS);
  check_predict_export(e, &te, dir, 6, MC_PRED_KEYS, 3, NULL);
  loom_estimator_free(e);
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* ---- binary: setosa or not, with string labels through label_vocabulary ---- */
static const char *const BIN_EVAL_KEYS[] = {"accuracy",        "accuracy_baseline", "auc",        "auc_precision_recall",
                                            "average_loss",    "global_step",       "label/mean", "loss",
                                            "precision",       "prediction/mean",   "recall"};
static const char *const BIN_PRED_KEYS[] = {"all_class_ids", "all_classes", "class_ids",    "classes",
                                            "logistic",      "logits",      "probabilities"};

static void to_binary_strings(cu_data *d) {
  int64_t ld[2] = {d->n, 1};
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 2, ld, NULL);
  for (int i = 0; i < d->n; i++) {
    size_t len;
    const char *s = loom_tensor_get_string(d->cols[4], i, &len);
    const char *v = !strncmp(s, "setosa", len) ? "setosa" : "other";
    loom_tensor_set_string(t, i, v, strlen(v), NULL);
  }
  loom_tensor_free(d->cols[4]);
  d->cols[4] = t;
}

Test(canned, binary_classifiers_with_label_vocabulary) {
  iris_cols ic;
  iris_cols_make(&ic);
  cu_data tr, te;
  cu_iris(&tr, 0, 1);
  cu_iris(&te, 1, 1);
  to_binary_strings(&tr);
  to_binary_strings(&te);
  tr.batch = 32;
  static const char *const voc[2] = {"other", "setosa"};
  loom_status *st = loom_status_new();
  for (int kind = 0; kind < 4; kind++) {
    char dir[TU_TMPDIR_CAP];
    tu_tmpdir(dir, sizeof dir, "canned_bin");
    loom_run_config cfg = cu_config();
    loom_estimator *e = iris_model(kind, &ic, dir, &cfg, 2, 2, voc, st);
    cr_assert(e, "%s: %s", KIND_NAMES[kind], loom_status_message(st));
    cu_train(e, &tr, 300);
    double acc = cu_eval(e, &te, "accuracy");
    if (kind == K_BASELINE) {
      double base = cu_eval(e, &te, "accuracy_baseline");
      cr_expect(fabs(acc - base) < 1e-9, "Baseline: accuracy %g, accuracy_baseline %g", acc, base);
    } else {
      cr_expect(acc >= 0.99, "%s: setosa accuracy %g", KIND_NAMES[kind], acc);
    }
    check_keys_eval(e, &te, 11, BIN_EVAL_KEYS);
    check_predict_export(e, &te, dir, 7, BIN_PRED_KEYS, 2, voc);
    loom_estimator_free(e);
    tu_rmtree(dir);
  }
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
}

/* n_classes 3 with label_vocabulary (string species labels) */
Test(canned, multi_class_label_vocabulary) {
  iris_cols ic;
  iris_cols_make(&ic);
  cu_data tr, te;
  cu_iris(&tr, 0, 1);
  cu_iris(&te, 1, 1);
  tr.batch = 32;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "canned_mcv");
  loom_status *st = loom_status_new();
  loom_run_config cfg = cu_config();
  loom_estimator *e = iris_model(K_DNN, &ic, dir, &cfg, 3, 3, IRIS_NAMES, st);
  cr_assert(e, "%s", loom_status_message(st));
  cu_train(e, &tr, 600);
  double acc = cu_eval(e, &te, "accuracy");
  cr_expect(acc >= 0.9, "accuracy %g", acc);
  /* classes are the species names, from Estimator predict and the exported model alike */
  check_predict_export(e, &te, dir, 6, MC_PRED_KEYS, 3, IRIS_NAMES);
  loom_estimator_free(e);
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* ---- diamonds: the regressors ---- */
typedef struct diamond_cols {
  loom_fc_set *set;
  const loom_fc *lin[5]; /* carat, cut, color, clarity, color x clarity */
  const loom_fc *dnn[4]; /* carat, indicators of cut, color, clarity */
} diamond_cols;

static void diamond_cols_make(diamond_cols *dc) {
  loom_status *st = loom_status_new();
  dc->set = loom_fc_set_new();
  static const char *const cuts[5] = {"Fair", "Good", "Very Good", "Premium", "Ideal"};
  static const char *const colors[7] = {"D", "E", "F", "G", "H", "I", "J"};
  static const char *const clar[8] = {"I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"};
  loom_fc *carat = loom_fc_numeric(dc->set, "carat", 0, NULL, NULL, LOOM_F32, NULL, NULL, st);
  loom_fc *cut = loom_fc_vocabulary_list(dc->set, "cut", 5, cuts, 0, -1, st);
  loom_fc *color = loom_fc_vocabulary_list(dc->set, "color", 7, colors, 0, -1, st);
  loom_fc *cl = loom_fc_vocabulary_list(dc->set, "clarity", 8, clar, 0, -1, st);
  cr_assert(carat && cut && color && cl, "%s", loom_status_message(st));
  const loom_fc *cc[2] = {color, cl};
  loom_fc *cross = loom_fc_crossed(dc->set, 2, NULL, cc, 100, 0, st);
  cr_assert(cross, "%s", loom_status_message(st));
  dc->lin[0] = carat;
  dc->lin[1] = cut;
  dc->lin[2] = color;
  dc->lin[3] = cl;
  dc->lin[4] = cross;
  dc->dnn[0] = carat;
  dc->dnn[1] = loom_fc_indicator(dc->set, cut, st);
  dc->dnn[2] = loom_fc_indicator(dc->set, color, st);
  dc->dnn[3] = loom_fc_indicator(dc->set, cl, st);
  cr_assert(dc->dnn[1] && dc->dnn[2] && dc->dnn[3], "%s", loom_status_message(st));
  loom_status_free(st);
}

static const int64_t DIA_HIDDEN[2] = {16, 8};

static loom_estimator *diamond_model(int kind, diamond_cols *dc, const char *dir, loom_run_config *cfg,
                                     loom_status *st) {
  switch (kind) {
    case K_LINEAR: {
      loom_linear_options o = loom_linear_options_default();
      o.model_dir = dir;
      o.config = cfg;
      o.nfeature_columns = 5;
      o.feature_columns = dc->lin;
      return loom_linear_regressor_new(&o, st);
    }
    case K_DNN: {
      loom_dnn_options o = loom_dnn_options_default();
      o.model_dir = dir;
      o.config = cfg;
      o.nfeature_columns = 4;
      o.feature_columns = dc->dnn;
      o.nhidden_units = 2;
      o.hidden_units = DIA_HIDDEN;
      o.optimizer.learning_rate = 0.1;
      return loom_dnn_regressor_new(&o, st);
    }
    case K_COMBINED: {
      loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
      o.model_dir = dir;
      o.config = cfg;
      o.nlinear_feature_columns = 5;
      o.linear_feature_columns = dc->lin;
      o.ndnn_feature_columns = 4;
      o.dnn_feature_columns = dc->dnn;
      o.ndnn_hidden_units = 2;
      o.dnn_hidden_units = DIA_HIDDEN;
      o.dnn_optimizer.learning_rate = 0.1;
      o.linear_optimizer.learning_rate = 0.1;
      return loom_dnn_linear_combined_regressor_new(&o, st);
    }
    default: {
      loom_baseline_options o = loom_baseline_options_default();
      o.model_dir = dir;
      o.config = cfg;
      return loom_baseline_regressor_new(&o, st);
    }
  }
}

static const char *const REG_EVAL_KEYS[] = {"average_loss", "global_step", "label/mean", "loss", "prediction/mean"};
static const char *const REG_PRED_KEYS[] = {"predictions"};

Test(canned, diamonds_regressors) {
  diamond_cols dc;
  diamond_cols_make(&dc);
  cu_data tr, te;
  cu_diamonds(&tr, 0);
  cu_diamonds(&te, 1);
  tr.batch = 32;
  tr.shuffle = 1;
  /* the variance of the test prices (in thousands^2): what predicting the
   * mean scores */
  const float *y = loom_tensor_data_const(te.cols[4]);
  double mean = 0, var = 0;
  for (int i = 0; i < te.n; i++) mean += y[i] / te.n;
  for (int i = 0; i < te.n; i++) var += (y[i] - mean) * (y[i] - mean) / te.n;
  loom_status *st = loom_status_new();
  double loss[4];
  for (int kind = 0; kind < 4; kind++) {
    char dir[TU_TMPDIR_CAP];
    tu_tmpdir(dir, sizeof dir, "canned_dia");
    loom_run_config cfg = cu_config();
    loom_estimator *e = diamond_model(kind, &dc, dir, &cfg, st);
    cr_assert(e, "%s: %s", KIND_NAMES[kind], loom_status_message(st));
    cu_train(e, &tr, 1000);
    loss[kind] = cu_eval(e, &te, "average_loss");
    check_keys_eval(e, &te, 5, REG_EVAL_KEYS);
    check_predict_export(e, &te, dir, 1, REG_PRED_KEYS, 0, NULL);
    loom_estimator_free(e);
    tu_rmtree(dir);
  }
  printf("diamonds test MSE (price in thousands): variance %.4f, Linear %.4f, DNN %.4f, DNNLinearCombined %.4f, "
         "Baseline %.4f\n",
         var, loss[K_LINEAR], loss[K_DNN], loss[K_COMBINED], loss[K_BASELINE]);
  cr_expect(loss[K_BASELINE] < 1.3 * var && loss[K_BASELINE] > 0.8 * var, "Baseline MSE %g, variance %g",
            loss[K_BASELINE], var);
  cr_expect(loss[K_LINEAR] < 0.25 * var, "Linear MSE %g, variance %g", loss[K_LINEAR], var);
  cr_expect(loss[K_DNN] < 0.25 * var, "DNN MSE %g, variance %g", loss[K_DNN], var);
  cr_expect(loss[K_COMBINED] < 0.25 * var, "DNNLinearCombined MSE %g, variance %g", loss[K_COMBINED], var);
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(dc.set);
  loom_status_free(st);
}

/* Writes the fixture's initial values (TF's draws) as a checkpoint at path, for warm_start_from. */
static void traj_write_init(const char *path, const traj_var *vars, int n) {
  loom_status *st = loom_status_new();
  const char *names[16];
  loom_tensor *vals[16];
  cr_assert(n <= 16);
  for (int i = 0; i < n; i++) {
    names[i] = vars[i].name;
    vals[i] = loom_tensor_from_data(LOOM_F32, vars[i].rank, vars[i].dims, vars[i].init, st);
    cr_assert(vals[i], "%s", loom_status_message(st));
  }
  cr_assert_eq(loom_checkpoint_write(path, n, names, (const loom_tensor *const *)vals, st), LOOM_OK, "%s",
               loom_status_message(st));
  for (int i = 0; i < n; i++) loom_tensor_free(vals[i]);
  loom_status_free(st);
}

/* Every variable of e is within 1e-4 (relative, 1e-3 absolute floor) of TF's after the fixture's steps. */
static void traj_expect_trained(loom_estimator *e, const traj_var *vars, int n, int steps) {
  loom_status *st = loom_status_new();
  for (int i = 0; i < n; i++) {
    const traj_var *v = &vars[i];
    loom_tensor *t = NULL;
    cr_assert_eq(loom_estimator_get_variable_value(e, v->name, &t, st), LOOM_OK, "%s: %s", v->name,
                 loom_status_message(st));
    cr_assert_eq(loom_tensor_numel(t), v->n, "%s", v->name);
    const float *a = loom_tensor_data_const(t);
    double worst = 0, moved = 0;
    int at = 0;
    for (int k = 0; k < v->n; k++) {
      double d = fabs((double)a[k] - v->trained[k]) / (1e-3 + fabs(v->trained[k]));
      if (d > worst) worst = d, at = k;
      moved = fmax(moved, fabs((double)v->trained[k] - v->init[k]));
    }
    cr_expect(moved > 1e-3, "%s: TF's fixture did not train it", v->name);
    cr_expect(worst < 1e-4, "%s[%d]: loom %.9g, TF %.9g after %d steps from the same weights (worst rel %g)",
              v->name, at, a[at], v->trained[at], steps, worst);
    loom_tensor_free(t);
  }
  loom_status_free(st);
}

/* A trajectory test's common part: the diamonds' columns, 32-row unshuffled batches, the fixture's initial
 * weights written to warm-start from, and a model_dir beside them. */
typedef struct traj_run {
  diamond_cols dc;
  cu_data tr;
  loom_status *st;
  loom_run_config cfg;
  char dir[TU_TMPDIR_CAP], init[TU_TMPDIR_CAP + 16], mdir[TU_TMPDIR_CAP + 16];
} traj_run;

static void traj_begin(traj_run *t, const char *name, const traj_var *vars, int n) {
  diamond_cols_make(&t->dc);
  cu_diamonds(&t->tr, 0);
  t->tr.batch = 32;
  t->tr.shuffle = 0;
  t->st = loom_status_new();
  tu_tmpdir(t->dir, sizeof t->dir, name);
  snprintf(t->init, sizeof t->init, "%s/init.ckpt", t->dir);
  traj_write_init(t->init, vars, n);
  snprintf(t->mdir, sizeof t->mdir, "%s/model", t->dir);
  t->cfg = cu_config();
}

/* Trains e (made from t's options) steps and checks the variables against the fixture; frees it all. */
static void traj_end(traj_run *t, loom_estimator *e, const traj_var *vars, int n, int steps) {
  cr_assert(e, "%s", loom_status_message(t->st));
  cu_train(e, &t->tr, steps);
  traj_expect_trained(e, vars, n, steps);
  loom_estimator_free(e);
  cu_data_free(&t->tr);
  loom_fc_set_free(t->dc.set);
  loom_status_free(t->st);
  tu_rmtree(t->dir);
}

/* ---- training semantics: TF's trajectory from TF's own initial weights ----
 * The wide & deep regressor (Ftrl 0.1 + Adagrad 0.05, bench/canned.c's
 * diamonds_wd optimizers) warm-started from the initial values TF drew and
 * trained on the same batches ends at TF's variables
 * (tests/fixtures/canned/wd_trajectory.h from
 * scripts/gen_canned_trajectory_fixtures.py): forward pass, loss reduction,
 * gradients, both optimizers' slots and updates, the cross's buckets and the
 * split of the variables between the two optimizers all take part. */
Test(canned, wide_deep_regressor_follows_tf_from_the_same_weights) {
  traj_run t;
  traj_begin(&t, "canned_wdt", WD_VARS, WD_NVARS);
  loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
  o.model_dir = t.mdir;
  o.config = &t.cfg;
  o.warm_start_from = t.init;
  o.nlinear_feature_columns = 5;
  o.linear_feature_columns = t.dc.lin;
  o.linear_optimizer = (loom_canned_optimizer){"Ftrl", 0.1, NULL, NULL};
  o.ndnn_feature_columns = 4;
  o.dnn_feature_columns = t.dc.dnn;
  o.dnn_optimizer = (loom_canned_optimizer){"Adagrad", 0.05, NULL, NULL};
  o.ndnn_hidden_units = 2;
  o.dnn_hidden_units = DIA_HIDDEN;
  traj_end(&t, loom_dnn_linear_combined_regressor_new(&o, t.st), WD_VARS, WD_NVARS, WD_STEPS);
}

/* The DNN regressor with optimizer "RMSProp" at its default rate follows TF 2.15's (Keras' legacy RMSprop:
 * the mean square starts at 0, not at TF 1's 1) from TF's initial weights on the same batches
 * (tests/fixtures/canned/dnn_rmsprop_trajectory.h, scripts/gen_canned_trajectory_fixtures.py). */
Test(canned, dnn_regressor_rmsprop_follows_tf2_from_the_same_weights) {
  traj_run t;
  traj_begin(&t, "canned_rmst", RMS_VARS, RMS_NVARS);
  loom_dnn_options o = loom_dnn_options_default();
  o.model_dir = t.mdir;
  o.config = &t.cfg;
  o.warm_start_from = t.init;
  o.nfeature_columns = 4;
  o.feature_columns = t.dc.dnn;
  o.optimizer = (loom_canned_optimizer){"RMSProp", 0, NULL, NULL};
  o.nhidden_units = 2;
  o.hidden_units = DIA_HIDDEN;
  traj_end(&t, loom_dnn_regressor_new(&o, t.st), RMS_VARS, RMS_NVARS, RMS_STEPS);
}

/* ---- user optimizers: a name with the estimator's default rate, and an object ---- */
static int factory_calls;
static loom_optimizer *momentum_factory(loom_graph *g, void *user) {
  (void)user;
  factory_calls++;
  return loom_optimizer_momentum(loom_const_f32(g, 0.05f, "lr"), NULL);
}

Test(canned, user_optimizers) {
  iris_cols ic;
  iris_cols_make(&ic);
  cu_data tr, te;
  cu_iris(&tr, 0, 0);
  cu_iris(&te, 1, 0);
  tr.batch = 32;
  loom_status *st = loom_status_new();
  static const char *const names[4] = {"Adam", "SGD", "RMSProp", NULL};
  for (int i = 0; i < 4; i++) {
    char dir[TU_TMPDIR_CAP];
    tu_tmpdir(dir, sizeof dir, "canned_opt");
    loom_run_config cfg = cu_config();
    loom_dnn_options o = loom_dnn_options_default();
    o.model_dir = dir;
    o.config = &cfg;
    o.n_classes = 3;
    o.nfeature_columns = 4;
    o.feature_columns = ic.cols;
    o.nhidden_units = 2;
    o.hidden_units = IRIS_HIDDEN;
    o.optimizer.name = names[i];
    if (!names[i]) o.optimizer.fn = momentum_factory;
    int calls = factory_calls;
    loom_estimator *e = loom_dnn_classifier_new(&o, st);
    cr_assert(e, "%s", loom_status_message(st));
    cu_train(e, &tr, 600);
    double acc = cu_eval(e, &te, "accuracy");
    cr_expect(acc >= 0.9, "%s: accuracy %g", names[i] ? names[i] : "Momentum factory", acc);
    if (!names[i]) cr_expect_eq(factory_calls, calls + 1, "factory called %d times", factory_calls - calls);
    /* slots of the optimizer chosen */
    cu_vars l;
    cu_list_vars(e, &l);
    static const char *const slot[4] = {"dnn/logits/kernel/Adam", NULL, "dnn/logits/kernel/RMSProp",
                                        "dnn/logits/kernel/Momentum"};
    if (slot[i]) cr_expect(cu_find(&l, slot[i]), "no slot %s", slot[i]);
    loom_estimator_free(e);
    tu_rmtree(dir);
  }
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
}

/* ---- bad options and bad labels ---- */
static void expect_err(loom_estimator *e, loom_status *st, const char *a, const char *b) {
  cr_expect_null(e);
  loom_estimator_free(e);
  cr_expect_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT, "%s", loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), a), "'%s' not in: %s", a, loom_status_message(st));
  if (b) cr_expect(strstr(loom_status_message(st), b), "'%s' not in: %s", b, loom_status_message(st));
}

Test(canned, bad_options_name_the_option) {
  iris_cols ic;
  iris_cols_make(&ic);
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "canned_bad");
  loom_dnn_options d = loom_dnn_options_default();
  d.model_dir = dir;
  d.nfeature_columns = 4;
  d.feature_columns = ic.cols;
  expect_err(loom_dnn_classifier_new(&d, st), st, "DNNClassifier", "hidden_units must not be empty");
  d.nhidden_units = 2;
  d.hidden_units = IRIS_HIDDEN;
  d.n_classes = 1;
  expect_err(loom_dnn_classifier_new(&d, st), st, "n_classes must be > 1", "got 1");
  d.n_classes = 3;
  d.optimizer.name = "Adamax";
  expect_err(loom_dnn_classifier_new(&d, st), st, "unknown optimizer 'Adamax'", "Adagrad, Adam, Ftrl, RMSProp, SGD");
  d.optimizer.name = "Adagrad";
  d.activation = "swishy";
  expect_err(loom_dnn_classifier_new(&d, st), st, "activation 'swishy'", NULL);
  d.activation = "relu";
  d.dropout = 1.5;
  expect_err(loom_dnn_regressor_new(&d, st), st, "DNNRegressor: dropout must be in [0, 1)", "1.5");
  d.dropout = 0;
  int64_t bad_h[2] = {10, 0};
  d.hidden_units = bad_h;
  expect_err(loom_dnn_classifier_new(&d, st), st, "hidden_units[1] must be >= 1", "got 0");
  d.hidden_units = IRIS_HIDDEN;
  static const char *const two[2] = {"a", "b"};
  d.nlabel_vocabulary = 2;
  d.label_vocabulary = two;
  expect_err(loom_dnn_classifier_new(&d, st), st, "label_vocabulary must have n_classes (3) entries", "got 2");
  d.nlabel_vocabulary = 0;
  d.label_dimension = 0;
  expect_err(loom_dnn_regressor_new(&d, st), st, "label_dimension must be >= 1", "got 0");

  loom_linear_options l = loom_linear_options_default();
  l.model_dir = dir;
  expect_err(loom_linear_classifier_new(&l, st), st, "LinearClassifier: feature_columns must not be empty", NULL);
  l.nfeature_columns = 4;
  l.feature_columns = ic.cols;
  l.n_classes = 0;
  expect_err(loom_linear_classifier_new(&l, st), st, "n_classes must be > 1 (got 0)", NULL);
  l.n_classes = 2;
  l.optimizer.learning_rate = -1;
  expect_err(loom_linear_regressor_new(&l, st), st, "optimizer.learning_rate must be >= 0", NULL);

  loom_dnn_linear_combined_options c = loom_dnn_linear_combined_options_default();
  c.model_dir = dir;
  expect_err(loom_dnn_linear_combined_classifier_new(&c, st), st,
             "Either linear_feature_columns or dnn_feature_columns must be defined", NULL);
  c.ndnn_feature_columns = 4;
  c.dnn_feature_columns = ic.cols;
  expect_err(loom_dnn_linear_combined_classifier_new(&c, st), st, "dnn_hidden_units must be defined", NULL);
  c.ndnn_hidden_units = 2;
  c.dnn_hidden_units = IRIS_HIDDEN;
  c.nlinear_feature_columns = 1;
  c.linear_feature_columns = ic.cols;
  c.linear_optimizer.name = "LBFGS";
  expect_err(loom_dnn_linear_combined_regressor_new(&c, st), st, "unknown linear_optimizer 'LBFGS'", NULL);

  loom_baseline_options b = loom_baseline_options_default();
  b.model_dir = dir;
  b.loss_reduction = LOOM_REDUCTION_MEAN;
  expect_err(loom_baseline_classifier_new(&b, st), st, "loss_reduction must be SUM_OVER_BATCH_SIZE or SUM", NULL);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
  tu_rmtree(dir);
}

Test(canned, label_out_of_range_fails_the_run_naming_the_value) {
  iris_cols ic;
  iris_cols_make(&ic);
  cu_data tr;
  cu_iris(&tr, 0, 0);
  int64_t *lab = loom_tensor_data(tr.cols[4]);
  lab[5] = 7;
  loom_status *st = loom_status_new();
  loom_run_config cfg = cu_config();
  for (int kind = 0; kind < 4; kind++) {
    char dir[TU_TMPDIR_CAP];
    tu_tmpdir(dir, sizeof dir, "canned_range");
    loom_estimator *e = iris_model(kind, &ic, dir, &cfg, 3, 0, NULL, st);
    cr_assert(e, "%s", loom_status_message(st));
    loom_train_options to = loom_train_options_default();
    to.steps = 2;
    cr_expect_eq(loom_estimator_train(e, cu_input_fn, &tr, &to, st), LOOM_INVALID_ARGUMENT, "%s: %s",
                 KIND_NAMES[kind], loom_status_message(st));
    cr_expect(strstr(loom_status_message(st), "= 7 is not in [0, 3)"), "%s: %s", KIND_NAMES[kind],
              loom_status_message(st));
    loom_estimator_free(e);
    tu_rmtree(dir);
  }
  cu_data_free(&tr);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
}

Test(canned, label_not_in_vocabulary_fails_naming_it) {
  iris_cols ic;
  iris_cols_make(&ic);
  cu_data tr;
  cu_iris(&tr, 0, 1);
  loom_tensor_set_string(tr.cols[4], 3, "daisy", 5, NULL);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "canned_voc");
  loom_status *st = loom_status_new();
  loom_run_config cfg = cu_config();
  loom_estimator *e = iris_model(K_LINEAR, &ic, dir, &cfg, 3, 3, IRIS_NAMES, st);
  cr_assert(e, "%s", loom_status_message(st));
  loom_train_options to = loom_train_options_default();
  to.steps = 2;
  cr_expect_neq(loom_estimator_train(e, cu_input_fn, &tr, &to, st), LOOM_OK);
  cr_expect(strstr(loom_status_message(st), "'daisy'"), "%s", loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), "not in the vocabulary"), "%s", loom_status_message(st));
  loom_estimator_free(e);
  cu_data_free(&tr);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* ---- dropout + batch_norm: trains, and PREDICT is deterministic (no dropout there) ---- */
Test(canned, dnn_dropout_batch_norm) {
  iris_cols ic;
  iris_cols_make(&ic);
  cu_data tr, te;
  cu_iris(&tr, 0, 0);
  cu_iris(&te, 1, 0);
  tr.batch = 32;
  tr.shuffle = 1;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "canned_drop");
  loom_status *st = loom_status_new();
  loom_run_config cfg = cu_config();
  loom_dnn_options o = loom_dnn_options_default();
  o.model_dir = dir;
  o.config = &cfg;
  o.n_classes = 3;
  o.nfeature_columns = 4;
  o.feature_columns = ic.cols;
  o.nhidden_units = 2;
  o.hidden_units = IRIS_HIDDEN;
  o.dropout = 0.2;
  o.batch_norm = 1;
  o.optimizer.learning_rate = 0.1;
  loom_estimator *e = loom_dnn_classifier_new(&o, st);
  cr_assert(e, "%s", loom_status_message(st));
  cu_train(e, &tr, 1500);
  double acc = cu_eval(e, &te, "accuracy");
  cr_expect(acc >= 0.85, "accuracy %g", acc);
  check_predict_export(e, &te, dir, 6, MC_PRED_KEYS, 3, NULL);
  loom_predict_options po = loom_predict_options_default();
  po.yield_single_examples = 0;
  loom_tensor *p[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    loom_prediction_iter *it = loom_estimator_predict(e, cu_predict_input_fn, &te, &po, st);
    cr_assert(it && loom_prediction_next(it, st) == LOOM_OK, "%s", loom_status_message(st));
    p[k] = loom_tensor_copy(loom_prediction_get(it, "logits"), st);
    loom_prediction_iter_free(it);
  }
  cr_expect(!memcmp(loom_tensor_data_const(p[0]), loom_tensor_data_const(p[1]), loom_tensor_nbytes(p[0])),
            "predict is not deterministic");
  loom_tensor_free(p[0]);
  loom_tensor_free(p[1]);
  loom_estimator_free(e);
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* ---- weight_column and loss_reduction reach the head ---- */
static loom_optimizer *zero_sgd(loom_graph *g, void *user) {
  (void)user;
  return loom_optimizer_sgd(loom_const_f32(g, 0.0f, "lr"));
}

Test(canned, weight_column_and_loss_reduction) {
  cu_data d;
  cu_iris(&d, 1, 0);
  /* binary labels (class 0 or not) and a weight per example */
  int64_t *lab = loom_tensor_data(d.cols[4]);
  float w[30];
  double sw = 0, swy = 0;
  for (int i = 0; i < 30; i++) {
    lab[i] = lab[i] == 0;
    w[i] = (float)(1 + i % 3);
    sw += w[i];
    swy += w[i] * (double)lab[i];
  }
  d.names[5] = "w";
  d.cols[5] = cu_f32col(30, w);
  d.nf = 6;
  loom_status *st = loom_status_new();
  double loss[2];
  for (int k = 0; k < 2; k++) {
    char dir[TU_TMPDIR_CAP];
    tu_tmpdir(dir, sizeof dir, "canned_w");
    loom_run_config cfg = cu_config();
    loom_baseline_options o = loom_baseline_options_default();
    o.model_dir = dir;
    o.config = &cfg;
    o.weight_column = "w";
    o.loss_reduction = k ? LOOM_REDUCTION_SUM : LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
    o.optimizer.fn = zero_sgd;
    loom_estimator *e = loom_baseline_classifier_new(&o, st);
    cr_assert(e, "%s", loom_status_message(st));
    cu_train(e, &d, 1);
    double lm = cu_eval(e, &d, "label/mean"), avg = cu_eval(e, &d, "average_loss");
    loss[k] = cu_eval(e, &d, "loss");
    cr_expect(fabs(lm - swy / sw) < 1e-6, "label/mean %g want %g", lm, swy / sw);
    /* logits 0: every example's loss is log 2; average_loss is weighted by w */
    cr_expect(fabs(avg - log(2.0)) < 1e-6, "average_loss %g", avg);
    loom_estimator_free(e);
    tu_rmtree(dir);
  }
  /* SUM_OVER_BATCH_SIZE: sum(w * log 2) / 30; SUM: sum(w * log 2) (one batch) */
  cr_expect(fabs(loss[0] - sw * log(2.0) / 30) < 1e-5, "loss %g want %g", loss[0], sw * log(2.0) / 30);
  cr_expect(fabs(loss[1] - sw * log(2.0)) < 1e-4, "loss %g want %g", loss[1], sw * log(2.0));
  cu_data_free(&d);
  loom_status_free(st);
}

/* ---- per-layer summaries (TF 2.15's canned dnn.py / linear.py /
 * dnn_linear_combined.py) ---- */
#include <dirent.h>

/* The training events file of dir (not eval/'s). */
static void train_events_path(const char *dir, char *out, size_t cap) {
  DIR *d = opendir(dir);
  cr_assert(d);
  struct dirent *de;
  out[0] = 0;
  while ((de = readdir(d)))
    if (!strncmp(de->d_name, "events.out.tfevents.", 20)) snprintf(out, cap, "%s/%s", dir, de->d_name);
  closedir(d);
  cr_assert(out[0], "no events file in %s", dir);
}

static float *ckpt_f32(const char *ckpt, const char *name, int64_t want) {
  loom_tensor *t = NULL;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_checkpoint_read_tensor(ckpt, name, &t, st), LOOM_OK, "%s: %s", name, loom_status_message(st));
  cr_assert_eq(loom_tensor_numel(t), want, "%s", name);
  float *v = malloc(sizeof(float) * (size_t)want);
  memcpy(v, loom_tensor_data_const(t), sizeof(float) * (size_t)want);
  loom_tensor_free(t);
  loom_status_free(st);
  return v;
}

/* y[n, out] = act(x[n, in] W[in, out] + b) in double; returns y. */
static double *dense_ref(const double *x, int n, int in, const float *w, const float *b, int out, int relu) {
  double *y = calloc((size_t)n * out, sizeof *y);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < out; j++) {
      double s = b[j];
      for (int k = 0; k < in; k++) s += x[i * in + k] * w[k * out + j];
      y[i * out + j] = relu && s < 0 ? 0 : s;
    }
  return y;
}

typedef struct hist_ref {
  double frac0, min, max, sum, sumsq;
  int64_t num;
} hist_ref;
static hist_ref hist_of(const double *v, int64_t n) {
  hist_ref h = {0, INFINITY, -INFINITY, 0, 0, n};
  int64_t z = 0;
  for (int64_t i = 0; i < n; i++) {
    z += v[i] == 0;
    h.min = fmin(h.min, v[i]);
    h.max = fmax(h.max, v[i]);
    h.sum += v[i];
    h.sumsq += v[i] * v[i];
  }
  h.frac0 = (double)z / (double)n;
  return h;
}

static const loom_event_value *find_value(const loom_event *ev, const char *tag) {
  for (int i = 0; i < ev->nvalues; i++)
    if (!strcmp(ev->values[i].tag, tag)) return &ev->values[i];
  return NULL;
}

static void expect_layer(const loom_event *ev, const char *layer, const hist_ref *r) {
  char t[96];
  snprintf(t, sizeof t, "%s/fraction_of_zero_values", layer);
  const loom_event_value *f = find_value(ev, t);
  cr_assert(f && f->kind == 0, "step %lld: no scalar %s", (long long)ev->step, t);
  /* one element of slack: a pre-activation within rounding of 0 may fall on
   * either side in float32 */
  cr_expect(fabs(f->simple_value - r->frac0) <= 1.0 / (double)r->num + 1e-7, "%s = %g, reference %g", t,
            f->simple_value, r->frac0);
  snprintf(t, sizeof t, "%s/activation", layer);
  const loom_event_value *h = find_value(ev, t);
  cr_assert(h && h->kind == 1, "step %lld: no histogram %s", (long long)ev->step, t);
  cr_expect_eq(h->hnum, (double)r->num, "%s num", t);
  double tol = 1e-4 * (1 + fabs(r->max) + fabs(r->min));
  cr_expect(fabs(h->hmin - r->min) <= tol && fabs(h->hmax - r->max) <= tol, "%s min/max %g %g, reference %g %g", t,
            h->hmin, h->hmax, r->min, r->max);
  cr_expect(fabs(h->hsum - r->sum) <= 1e-4 * (double)r->num * (1 + fabs(r->max)), "%s sum %g, reference %g", t,
            h->hsum, r->sum);
  cr_expect(fabs(h->hsum_squares - r->sumsq) <= 1e-4 * (1 + r->sumsq), "%s sum_squares %g, reference %g", t,
            h->hsum_squares, r->sumsq);
}

/* A DNNLinearCombinedClassifier (3 classes) trained two steps on the whole
 * iris training split with save_summary_steps 1: the events file holds TF's
 * tags in TF's order at each step, and the step-1 values equal an
 * independent forward pass from the step-0 checkpoint. */
Test(canned, per_layer_summaries_as_tf) {
  iris_cols ic;
  iris_cols_make(&ic);
  cu_data tr;
  cu_iris(&tr, 0, 0);
  tr.batch = 0; /* all 120 rows, file order */
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "canned_sum");
  loom_status *st = loom_status_new();
  loom_run_config cfg = cu_config();
  cfg.save_summary_steps = 1;
  loom_estimator *e = iris_model(K_COMBINED, &ic, dir, &cfg, 3, 0, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  cu_train(e, &tr, 2);

  /* the reference forward pass at the initial variables (model.ckpt-0);
   * input_layer orders the columns by name, as TF */
  char ckpt[TU_TMPDIR_CAP + 32];
  snprintf(ckpt, sizeof ckpt, "%s/model.ckpt-0", dir);
  static const char *const sorted[4] = {"PetalLength", "PetalWidth", "SepalLength", "SepalWidth"};
  const int n = 120;
  double x[120 * 4];
  for (int k = 0; k < 4; k++) {
    int c = -1;
    for (int i = 0; i < tr.nf; i++)
      if (!strcmp(tr.names[i], sorted[k])) c = i;
    cr_assert(c >= 0);
    const float *v = loom_tensor_data_const(tr.cols[c]);
    for (int i = 0; i < n; i++) x[i * 4 + k] = v[i];
  }
  float *w0 = ckpt_f32(ckpt, "dnn/hiddenlayer_0/kernel", 40), *b0 = ckpt_f32(ckpt, "dnn/hiddenlayer_0/bias", 10);
  float *w1 = ckpt_f32(ckpt, "dnn/hiddenlayer_1/kernel", 100), *b1 = ckpt_f32(ckpt, "dnn/hiddenlayer_1/bias", 10);
  float *w2 = ckpt_f32(ckpt, "dnn/logits/kernel", 30), *b2 = ckpt_f32(ckpt, "dnn/logits/bias", 3);
  double *h0 = dense_ref(x, n, 4, w0, b0, 10, 1), *h1 = dense_ref(h0, n, 10, w1, b1, 10, 1);
  double *lg = dense_ref(h1, n, 10, w2, b2, 3, 0);
  hist_ref r0 = hist_of(h0, n * 10), r1 = hist_of(h1, n * 10), r2 = hist_of(lg, n * 3);
  cr_expect(r0.frac0 > 0 && r0.frac0 < 1, "the reference layer should have some zeros (%g)", r0.frac0);

  static const char *const want_tags[] = {
      "dnn/hiddenlayer_0/fraction_of_zero_values", "dnn/hiddenlayer_0/activation",
      "dnn/hiddenlayer_1/fraction_of_zero_values", "dnn/hiddenlayer_1/activation",
      "dnn/logits/fraction_of_zero_values",        "dnn/logits/activation",
      "bias",                                      "fraction_of_zero_weights",
      "linear/fraction_of_zero_values",            "linear/activation",
      "loss"};
  const int nwant = (int)(sizeof want_tags / sizeof *want_tags);
  char path[TU_TMPDIR_CAP + 300];
  train_events_path(dir, path, sizeof path);
  loom_event_reader *rd = loom_event_reader_open(path, st);
  cr_assert(rd, "%s", loom_status_message(st));
  const loom_event *ev;
  int seen = 0;
  while (loom_event_reader_next(rd, &ev, st) == LOOM_OK) {
    if (!find_value(ev, "loss")) continue;
    seen++;
    cr_assert_eq(ev->nvalues, nwant, "step %lld: %d values, TF writes %d", (long long)ev->step, ev->nvalues, nwant);
    for (int i = 0; i < nwant; i++)
      cr_expect_str_eq(ev->values[i].tag, want_tags[i], "step %lld value %d", (long long)ev->step, i);
    const loom_event_value *bias = find_value(ev, "bias"), *fzw = find_value(ev, "fraction_of_zero_weights");
    const loom_event_value *lin = find_value(ev, "linear/fraction_of_zero_values");
    cr_assert(bias && fzw && lin);
    cr_expect_eq(bias->kind, 1, "3 logits: the linear bias is a histogram");
    cr_expect_eq(bias->hnum, 3);
    if (ev->step == 1) {
      /* the values the first step's forward pass saw: initial weights */
      expect_layer(ev, "dnn/hiddenlayer_0", &r0);
      expect_layer(ev, "dnn/hiddenlayer_1", &r1);
      expect_layer(ev, "dnn/logits", &r2);
      cr_expect_eq(bias->hmin, 0);
      cr_expect_eq(bias->hmax, 0);
      cr_expect_eq(fzw->simple_value, 1.0, "linear weights start at zero");
      cr_expect_eq(lin->simple_value, 1.0, "linear logits start at zero");
      const loom_event_value *la = find_value(ev, "linear/activation");
      cr_expect_eq(la->hnum, 360);
      cr_expect_eq(la->hmin, 0);
      cr_expect_eq(la->hmax, 0);
    } else {
      cr_expect_eq(ev->step, 2);
      cr_expect(fzw->simple_value < 1.0, "after one Ftrl step some linear weights are nonzero (%g)",
                fzw->simple_value);
      cr_expect(bias->hmax > bias->hmin, "the bias moved after one step");
      cr_expect(lin->simple_value < 1.0);
    }
  }
  cr_expect_eq(seen, 2, "summary events at steps 1 and 2");
  loom_event_reader_free(rd);

  /* summaries change nothing in training: the same run without them ends
   * with bitwise the same variables */
  char dir2[TU_TMPDIR_CAP];
  tu_tmpdir(dir2, sizeof dir2, "canned_nosum");
  loom_run_config cfg0 = cu_config();
  loom_estimator *e0 = iris_model(K_COMBINED, &ic, dir2, &cfg0, 3, 0, NULL, st);
  cr_assert(e0, "%s", loom_status_message(st));
  cu_train(e0, &tr, 2);
  static const char *const vars[] = {"dnn/hiddenlayer_0/kernel", "dnn/logits/kernel",
                                     "linear/linear_model/bias_weights", "linear/linear_model/PetalLength/weights"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    loom_tensor *a = NULL, *b = NULL;
    cr_assert_eq(loom_estimator_get_variable_value(e, vars[i], &a, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert_eq(loom_estimator_get_variable_value(e0, vars[i], &b, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert_eq(loom_tensor_numel(a), loom_tensor_numel(b));
    cr_expect(!memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), sizeof(float) * (size_t)loom_tensor_numel(a)),
              "%s differs with summaries on", vars[i]);
    loom_tensor_free(a);
    loom_tensor_free(b);
  }
  /* and without summaries the events file holds only the loss... nothing:
   * save_summary_steps 0 writes no summary event */
  train_events_path(dir2, path, sizeof path);
  rd = loom_event_reader_open(path, st);
  if (rd) {
    while (loom_event_reader_next(rd, &ev, st) == LOOM_OK)
      cr_expect(!find_value(ev, "dnn/hiddenlayer_0/activation"), "no layer summaries with save_summary_steps 0");
    loom_event_reader_free(rd);
  }
  loom_estimator_free(e0);
  loom_estimator_free(e);
  free(w0), free(b0), free(w1), free(b1), free(w2), free(b2);
  free(h0), free(h1), free(lg);
  cu_data_free(&tr);
  loom_fc_set_free(ic.set);
  loom_status_free(st);
  tu_rmtree(dir);
  tu_rmtree(dir2);
}

/* The linear part's FTRL on sparse rows (logits-wide: 5 floats, the short-
 * row vector path of kernels/cpu/optim.c) is bitwise the dense kernel's
 * element loop on the same values: every row updated once through
 * SparseApplyFtrl against ApplyFtrl on the whole [40, 5] table, three steps,
 * with and without l1 / l2 / shrinkage. */
static void ftrl_sparse_vs_dense(float l1, float l2, float shrink) {
  enum { R = 40, C = 5, N = R * C };
  int64_t d[2] = {R, C}, di[1] = {R};
  float v0[N], a0[N], g[3][N];
  int64_t idx[R];
  for (int i = 0; i < N; i++) {
    v0[i] = (float)(0.3 * sin(0.37 * i + 0.1));
    a0[i] = 0.1f + 0.01f * (float)(i % 7);
    for (int s = 0; s < 3; s++) g[s][i] = (float)(0.5 * cos(0.11 * i * (s + 1) + s) * (i % 9 == 0 ? 0 : 1));
  }
  for (int r = 0; r < R; r++) idx[r] = r;
  loom_graph *gr = loom_graph_new();
  loom_variable *vars[2][3];
  const char *nm[3] = {"var", "accum", "linear"};
  for (int k = 0; k < 2; k++)
    for (int j = 0; j < 3; j++) {
      char name[32];
      snprintf(name, sizeof name, "%s_%d", nm[j], k);
      const float *init = j == 0 ? v0 : j == 1 ? a0 : NULL;
      float zeros[N] = {0};
      vars[k][j] = loom_variable_new(gr, loom_const_data(gr, LOOM_F32, 2, d, init ? init : zeros, NULL), 0, 0, name);
    }
  loom_output gph = loom_placeholder(gr, LOOM_F32, 2, d, "g");
  loom_output ids = loom_const_data(gr, LOOM_I64, 1, di, idx, "ids");
  loom_output lr = loom_const_f32(gr, 0.1f, NULL), ol1 = loom_const_f32(gr, l1, NULL), ol2 = loom_const_f32(gr, l2, NULL);
  loom_output osh = loom_const_f32(gr, shrink, NULL), pw = loom_const_f32(gr, -0.5f, NULL);
  loom_output dense = loom_apply_ftrl(gr, loom_variable_output(vars[0][0]), loom_variable_output(vars[0][1]),
                                      loom_variable_output(vars[0][2]), gph, lr, ol1, ol2, osh, pw, "dense");
  loom_output sparse = loom_sparse_apply_ftrl(gr, loom_variable_output(vars[1][0]), loom_variable_output(vars[1][1]),
                                              loom_variable_output(vars[1][2]), gph, ids, lr, ol1, ol2, osh, pw,
                                              "sparse");
  loom_node *init = loom_global_variables_initializer(gr);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(gr, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *s = loom_session_new(gr, NULL, st);
  cr_assert(s, "%s", loom_status_message(st));
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st), LOOM_OK, "%s", loom_status_message(st));
  for (int step = 0; step < 3; step++) {
    loom_tensor *gt = loom_tensor_from_data(LOOM_F32, 2, d, g[step], NULL);
    loom_node *targets[2] = {dense.node, sparse.node};
    cr_assert_eq(loom_session_run(s, &gph, &gt, 1, NULL, NULL, 0, targets, 2, st), LOOM_OK, "%s",
                 loom_status_message(st));
    loom_tensor_free(gt);
  }
  for (int j = 0; j < 3; j++) {
    loom_output f[2] = {loom_variable_output(vars[0][j]), loom_variable_output(vars[1][j])};
    loom_tensor *out[2] = {NULL, NULL};
    cr_assert_eq(loom_session_run(s, NULL, NULL, 0, f, out, 2, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
    cr_expect(!memcmp(loom_tensor_data_const(out[0]), loom_tensor_data_const(out[1]), sizeof(float) * N),
              "%s: the sparse short-row update differs from the dense one (l1 %g l2 %g shrinkage %g)", nm[j], l1, l2,
              shrink);
    if (j == 0) { /* and the update did something */
      const float *v = loom_tensor_data_const(out[0]);
      int moved = 0;
      for (int i = 0; i < N; i++) moved += v[i] != v0[i];
      cr_expect(moved > N / 2, "only %d of %d weights moved", moved, N);
    }
    loom_tensor_free(out[0]);
    loom_tensor_free(out[1]);
  }
  loom_session_free(s);
  loom_graph_free(gr);
  loom_status_free(st);
}

Test(canned, ftrl_short_sparse_rows_bitwise_the_dense_kernel) {
  ftrl_sparse_vs_dense(0.0f, 0.0f, 0.0f);
  ftrl_sparse_vs_dense(0.01f, 0.05f, 0.02f);
}
