/* test_canned_warm.c - canned estimators: bitwise resume from a checkpoint,
 * warm start from another canned model's directory (by name), and
 * WarmStartSettings (regexes, renames, VocabInfo remapping of grown
 * vocabularies, errors). */
#include "canned_util.h"

static const int64_t HID[2] = {10, 10};
static const char *const IRIS_F[4] = {"SepalLength", "SepalWidth", "PetalLength", "PetalWidth"};

typedef struct cols4 {
  loom_fc_set *set;
  const loom_fc *c[4];
} cols4;
static void cols4_make(cols4 *c) {
  c->set = loom_fc_set_new();
  for (int k = 0; k < 4; k++) c->c[k] = loom_fc_numeric(c->set, IRIS_F[k], 0, NULL, NULL, LOOM_F32, NULL, NULL, NULL);
}

/* SGD at learning rate 0: one training step leaves the variables as warm
 * start set them. */
static loom_optimizer *frozen(loom_graph *g, void *user) {
  (void)user;
  return loom_optimizer_sgd(loom_const_f32(g, 0.0f, "lr"));
}

static loom_tensor *var_value(loom_estimator *e, const char *name) {
  loom_status *st = loom_status_new();
  loom_tensor *t = NULL;
  cr_assert_eq(loom_estimator_get_variable_value(e, name, &t, st), LOOM_OK, "%s: %s", name, loom_status_message(st));
  loom_status_free(st);
  return t;
}
static int same_tensor(const loom_tensor *a, const loom_tensor *b) {
  return loom_tensor_nbytes(a) == loom_tensor_nbytes(b) &&
         !memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), loom_tensor_nbytes(a));
}
static void expect_same_var(loom_estimator *a, const char *na, loom_estimator *b, const char *nb) {
  loom_tensor *ta = var_value(a, na), *tb = var_value(b, nb);
  cr_expect(same_tensor(ta, tb), "%s differs from %s", na, nb);
  loom_tensor_free(ta);
  loom_tensor_free(tb);
}

/* ---- training resumes bitwise: N steps == N/2 + N/2 with a restart ---- */
static loom_estimator *model(int kind, cols4 *c, const char *dir, loom_run_config *cfg, int bn,
                             const char *warm_from, const loom_warm_start_settings *ws, loom_canned_optimizer_fn opt,
                             loom_status *st) {
  if (kind == 0) {
    loom_linear_options o = loom_linear_options_default();
    o.model_dir = dir;
    o.config = cfg;
    o.n_classes = 3;
    o.nfeature_columns = 4;
    o.feature_columns = c->c;
    o.warm_start_from = warm_from;
    o.warm_start = ws;
    o.optimizer.fn = opt;
    return loom_linear_classifier_new(&o, st);
  }
  if (kind == 1) {
    loom_dnn_options o = loom_dnn_options_default();
    o.model_dir = dir;
    o.config = cfg;
    o.n_classes = 3;
    o.nfeature_columns = 4;
    o.feature_columns = c->c;
    o.nhidden_units = 2;
    o.hidden_units = HID;
    o.batch_norm = bn;
    o.warm_start_from = warm_from;
    o.warm_start = ws;
    o.optimizer.fn = opt;
    return loom_dnn_classifier_new(&o, st);
  }
  if (kind == 2) {
    loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
    o.model_dir = dir;
    o.config = cfg;
    o.n_classes = 3;
    o.nlinear_feature_columns = 4;
    o.linear_feature_columns = c->c;
    o.ndnn_feature_columns = 4;
    o.dnn_feature_columns = c->c;
    o.ndnn_hidden_units = 2;
    o.dnn_hidden_units = HID;
    o.batch_norm = bn;
    o.warm_start_from = warm_from;
    o.warm_start = ws;
    o.dnn_optimizer.learning_rate = 0.1;
    o.linear_optimizer.learning_rate = 0.1;
    return loom_dnn_linear_combined_classifier_new(&o, st);
  }
  loom_baseline_options o = loom_baseline_options_default();
  o.model_dir = dir;
  o.config = cfg;
  o.n_classes = 3;
  o.warm_start_from = warm_from;
  o.warm_start = ws;
  o.optimizer.fn = opt;
  return loom_baseline_classifier_new(&o, st);
}

Test(canned_warm, training_resumes_bitwise_from_a_checkpoint) {
  cols4 c;
  cols4_make(&c);
  cu_data tr;
  cu_iris(&tr, 0, 0); /* full batches: every step sees the same data */
  loom_status *st = loom_status_new();
  static const char *const what[5] = {"LinearClassifier", "DNNClassifier", "DNNLinearCombinedClassifier",
                                      "BaselineClassifier", "DNNLinearCombinedClassifier with batch_norm"};
  for (int k = 0; k < 5; k++) {
    int kind = k == 4 ? 2 : k, bn = k == 4;
    char d1[TU_TMPDIR_CAP], d2[TU_TMPDIR_CAP];
    tu_tmpdir(d1, sizeof d1, "canned_res1");
    tu_tmpdir(d2, sizeof d2, "canned_res2");
    loom_run_config cfg = cu_config();
    loom_estimator *a = model(kind, &c, d1, &cfg, bn, NULL, NULL, NULL, st);
    cr_assert(a, "%s", loom_status_message(st));
    cu_train(a, &tr, 40);
    loom_estimator *b = model(kind, &c, d2, &cfg, bn, NULL, NULL, NULL, st);
    cr_assert(b, "%s", loom_status_message(st));
    cu_train(b, &tr, 20);
    loom_estimator_free(b);
    b = model(kind, &c, d2, &cfg, bn, NULL, NULL, NULL, st);
    cr_assert(b, "%s", loom_status_message(st));
    cu_train(b, &tr, 20);
    loom_tensor *gs = var_value(b, "global_step");
    cr_expect_eq(*(const int64_t *)loom_tensor_data_const(gs), 40, "%s: global_step", what[k]);
    loom_tensor_free(gs);
    cu_expect_same_checkpoints(a, b, what[k]);
    /* the moving statistics moved (they are part of the comparison) */
    if (bn) {
      loom_tensor *mv = var_value(b, "dnn/hiddenlayer_0/batchnorm_0/moving_mean");
      const float *p = loom_tensor_data_const(mv);
      double s = 0;
      for (int i = 0; i < 10; i++) s += fabs(p[i]);
      cr_expect(s > 0, "moving_mean did not move");
      loom_tensor_free(mv);
    }
    loom_estimator_free(a);
    loom_estimator_free(b);
    tu_rmtree(d1);
    tu_rmtree(d2);
  }
  /* both optimizers of the combined model stepped, global_step once per step */
  cu_data_free(&tr);
  loom_fc_set_free(c.set);
  loom_status_free(st);
}

/* ---- warm start a DNNClassifier from a DNNLinearCombinedClassifier's directory ---- */
Test(canned_warm, dnn_from_combined_directory_by_name) {
  cols4 c;
  cols4_make(&c);
  cu_data tr;
  cu_iris(&tr, 0, 0);
  tr.batch = 32;
  loom_status *st = loom_status_new();
  char d1[TU_TMPDIR_CAP], d2[TU_TMPDIR_CAP], d3[TU_TMPDIR_CAP];
  tu_tmpdir(d1, sizeof d1, "canned_ws1");
  tu_tmpdir(d2, sizeof d2, "canned_ws2");
  tu_tmpdir(d3, sizeof d3, "canned_ws3");
  loom_run_config cfg = cu_config();
  loom_estimator *comb = model(2, &c, d1, &cfg, 0, NULL, NULL, NULL, st);
  cr_assert(comb, "%s", loom_status_message(st));
  cu_train(comb, &tr, 200);
  double acc_comb = cu_eval(comb, &tr, "accuracy");

  loom_estimator *dnn = model(1, &c, d2, &cfg, 0, d1, NULL, frozen, st);
  cr_assert(dnn, "%s", loom_status_message(st));
  cu_train(dnn, &tr, 1);
  static const char *const names[6] = {"dnn/hiddenlayer_0/kernel", "dnn/hiddenlayer_0/bias",
                                       "dnn/hiddenlayer_1/kernel", "dnn/hiddenlayer_1/bias",
                                       "dnn/logits/kernel",        "dnn/logits/bias"};
  for (int i = 0; i < 6; i++) expect_same_var(dnn, names[i], comb, names[i]);
  /* the DNN part alone is a worse but working classifier */
  double acc_dnn = cu_eval(dnn, &tr, "accuracy");
  cr_expect(acc_dnn > 0.5 && acc_dnn <= acc_comb + 0.05, "dnn part %g, combined %g", acc_dnn, acc_comb);

  /* WarmStartSettings: only the hidden layers; the logits keep their fresh values */
  loom_warm_start_settings ws = loom_warm_start_settings_default();
  ws.ckpt_to_initialize_from = d1;
  ws.vars_to_warm_start = "dnn/hiddenlayer_.*";
  loom_estimator *part = model(1, &c, d3, &cfg, 0, NULL, &ws, frozen, st);
  cr_assert(part, "%s", loom_status_message(st));
  cu_train(part, &tr, 1);
  for (int i = 0; i < 4; i++) expect_same_var(part, names[i], comb, names[i]);
  loom_tensor *a = var_value(part, "dnn/logits/kernel"), *b = var_value(comb, "dnn/logits/kernel");
  cr_expect(!same_tensor(a, b), "dnn/logits/kernel was warm-started");
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_estimator_free(part);
  loom_estimator_free(dnn);
  loom_estimator_free(comb);
  cu_data_free(&tr);
  loom_fc_set_free(c.set);
  loom_status_free(st);
  tu_rmtree(d1);
  tu_rmtree(d2);
  tu_rmtree(d3);
}

/* ---- renames and global-variable regexes ---- */
Test(canned_warm, prev_var_names_and_global_regexes) {
  cols4 c;
  cols4_make(&c);
  cu_data tr;
  cu_iris(&tr, 0, 0);
  loom_status *st = loom_status_new();
  char d1[TU_TMPDIR_CAP], d2[TU_TMPDIR_CAP];
  tu_tmpdir(d1, sizeof d1, "canned_ren1");
  tu_tmpdir(d2, sizeof d2, "canned_ren2");
  loom_run_config cfg = cu_config();
  loom_estimator *lin = model(0, &c, d1, &cfg, 0, NULL, NULL, NULL, st);
  cr_assert(lin, "%s", loom_status_message(st));
  cu_train(lin, &tr, 30);
  /* Baseline's bias [3] from the linear model's bias_weights [3], and the
   * global step from a list of regexes over GLOBAL variables */
  static const char *const nn[1] = {"baseline/bias"}, *const pn[1] = {"linear/linear_model/bias_weights"};
  static const char *const res[2] = {"baseline/.*", "global_step"};
  loom_warm_start_settings ws = loom_warm_start_settings_default();
  ws.ckpt_to_initialize_from = d1;
  ws.vars_to_warm_start = NULL;
  ws.nvar_regexes = 2;
  ws.var_regexes = res;
  ws.nprev_names = 1;
  ws.new_names = nn;
  ws.prev_names = pn;
  loom_estimator *base = model(3, &c, d2, &cfg, 0, NULL, &ws, frozen, st);
  cr_assert(base, "%s", loom_status_message(st));
  cu_train(base, &tr, 1);
  expect_same_var(base, "baseline/bias", lin, "linear/linear_model/bias_weights");
  loom_tensor *gs = var_value(base, "global_step");
  cr_expect_eq(*(const int64_t *)loom_tensor_data_const(gs), 31, "global_step %lld",
               (long long)*(const int64_t *)loom_tensor_data_const(gs));
  loom_tensor_free(gs);
  loom_estimator_free(base);
  loom_estimator_free(lin);
  cu_data_free(&tr);
  loom_fc_set_free(c.set);
  loom_status_free(st);
  tu_rmtree(d1);
  tu_rmtree(d2);
}

/* ---- settings naming what is not there: TF's ValueErrors ---- */
/* Trains e one step: an INVALID_ARGUMENT whose message has each of want. */
static void expect_warm_error(loom_estimator *e, cu_data *d, const char *what, const char *w1, const char *w2) {
  loom_status *st = loom_status_new();
  loom_train_options to = loom_train_options_default();
  to.steps = 1;
  cr_expect_eq(loom_estimator_train(e, cu_input_fn, d, &to, st), LOOM_INVALID_ARGUMENT, "%s: %s", what,
               loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), w1), "%s: no '%s' in: %s", what, w1, loom_status_message(st));
  cr_expect(!w2 || strstr(loom_status_message(st), w2), "%s: no '%s' in: %s", what, w2, loom_status_message(st));
  loom_status_free(st);
}

Test(canned_warm, settings_naming_what_is_not_there_are_errors) {
  cols4 c;
  cols4_make(&c);
  cu_data tr;
  cu_iris(&tr, 0, 0);
  loom_status *st = loom_status_new();
  char d1[TU_TMPDIR_CAP], d2[TU_TMPDIR_CAP];
  tu_tmpdir(d1, sizeof d1, "canned_wse1");
  loom_run_config cfg = cu_config();
  /* the old model: a linear classifier trained with SGD (no optimizer slots) */
  loom_estimator *lin = model(0, &c, d1, &cfg, 0, NULL, NULL, frozen, st);
  cr_assert(lin, "%s", loom_status_message(st));
  cu_train(lin, &tr, 2);

  /* a selected variable the checkpoint lacks (warm_start_from: every trainable variable) */
  tu_tmpdir(d2, sizeof d2, "canned_wse2");
  loom_estimator *e = model(1, &c, d2, &cfg, 0, d1, NULL, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  expect_warm_error(e, &tr, "dnn from a linear checkpoint",
                    "WarmStartSettings: variable dnn/hiddenlayer_0/kernel is not in checkpoint", d1);
  loom_estimator_free(e);
  tu_rmtree(d2);

  /* ... selected by a list of regexes over the global variables */
  static const char *const logits_bias[1] = {"dnn/logits/bias"};
  loom_warm_start_settings ws = loom_warm_start_settings_default();
  ws.ckpt_to_initialize_from = d1;
  ws.vars_to_warm_start = NULL;
  ws.nvar_regexes = 1;
  ws.var_regexes = logits_bias;
  tu_tmpdir(d2, sizeof d2, "canned_wse3");
  e = model(1, &c, d2, &cfg, 0, NULL, &ws, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  expect_warm_error(e, &tr, "list", "variable dnn/logits/bias is not in checkpoint", d1);
  loom_estimator_free(e);
  tu_rmtree(d2);

  /* a rename whose checkpoint name is not there names both */
  static const char *const bias[1] = {"linear/linear_model/bias_weights"}, *const old_bias[1] = {"linear/old_bias"};
  ws = loom_warm_start_settings_default();
  ws.ckpt_to_initialize_from = d1;
  ws.nprev_names = 1;
  ws.new_names = bias;
  ws.prev_names = old_bias;
  tu_tmpdir(d2, sizeof d2, "canned_wse4");
  e = model(0, &c, d2, &cfg, 0, NULL, &ws, frozen, st);
  cr_assert(e, "%s", loom_status_message(st));
  expect_warm_error(e, &tr, "renamed",
                    "variable linear/old_bias (var_name_to_prev_var_name of linear/linear_model/bias_weights) is "
                    "not in checkpoint",
                    d1);
  loom_estimator_free(e);
  tu_rmtree(d2);

  /* a rename of a variable the model does not have is "not used" */
  static const char *const nope[1] = {"linear/linear_model/nope"};
  ws.new_names = nope;
  ws.prev_names = bias;
  tu_tmpdir(d2, sizeof d2, "canned_wse5");
  e = model(0, &c, d2, &cfg, 0, NULL, &ws, frozen, st);
  cr_assert(e, "%s", loom_status_message(st));
  expect_warm_error(e, &tr, "rename not used",
                    "var_name_to_prev_var_name names variable linear/linear_model/nope, which is not used",
                    "linear/linear_model/bias_weights");
  loom_estimator_free(e);
  tu_rmtree(d2);

  /* a VocabInfo of a variable the regex does not select is "not used" (so is one with the empty list) */
  static const char *const voc[2] = {"a", "b"};
  loom_vocab_info vi = loom_vocab_info_default();
  vi.var_name = "linear/linear_model/SepalLength/weights";
  vi.new_vocab = voc;
  vi.new_vocab_size = 2;
  vi.old_vocab = voc;
  vi.old_vocab_size = 2;
  for (int k = 0; k < 2; k++) {
    ws = loom_warm_start_settings_default();
    ws.ckpt_to_initialize_from = d1;
    ws.vars_to_warm_start = k ? NULL : "linear/linear_model/bias.*";
    ws.var_regexes = k ? logits_bias : NULL; /* non-NULL with nvar_regexes 0: the empty list */
    ws.nvocab_infos = 1;
    ws.vocab_infos = &vi;
    tu_tmpdir(d2, sizeof d2, "canned_wse6");
    e = model(0, &c, d2, &cfg, 0, NULL, &ws, frozen, st);
    cr_assert(e, "%s", loom_status_message(st));
    expect_warm_error(e, &tr, k ? "VocabInfo with []" : "VocabInfo not selected",
                      "var_name_to_vocab_info names variable linear/linear_model/SepalLength/weights, which is not "
                      "used",
                      k ? "the global variables matching []"
                        : "the trainable variables matching 'linear/linear_model/bias.*'");
    loom_estimator_free(e);
    tu_rmtree(d2);
  }

  /* optimizer slots: a regex selects only trainable variables, and a list's
   * slots absent from the checkpoint keep their initial values (TF 2.15
   * names its slots training/<optimizer>/...: a list of model names does not
   * select them) */
  static const char *const all_linear[1] = {"linear/.*"};
  for (int k = 0; k < 2; k++) {
    ws = loom_warm_start_settings_default();
    ws.ckpt_to_initialize_from = d1;
    if (k) {
      ws.vars_to_warm_start = NULL;
      ws.nvar_regexes = 1;
      ws.var_regexes = all_linear;
    }
    tu_tmpdir(d2, sizeof d2, "canned_wse7");
    e = model(0, &c, d2, &cfg, 0, NULL, &ws, NULL, st); /* Ftrl: slots */
    cr_assert(e, "%s", loom_status_message(st));
    loom_train_options to = loom_train_options_default();
    to.steps = 1;
    cr_expect_eq(loom_estimator_train(e, cu_input_fn, &tr, &to, st), LOOM_OK, "%s", loom_status_message(st));
    loom_tensor *a = var_value(e, "linear/linear_model/bias_weights/Ftrl"); /* the slot exists */
    loom_tensor_free(a);
    loom_estimator_free(e);
    tu_rmtree(d2);
  }

  /* vars_to_warm_start and var_regexes together are refused */
  ws = loom_warm_start_settings_default();
  ws.ckpt_to_initialize_from = d1;
  ws.nvar_regexes = 1;
  ws.var_regexes = all_linear;
  e = model(0, &c, d1, &cfg, 0, NULL, &ws, NULL, st);
  cr_expect_null(e);
  cr_expect(strstr(loom_status_message(st), "not both"), "%s", loom_status_message(st));

  loom_estimator_free(lin);
  cu_data_free(&tr);
  loom_fc_set_free(c.set);
  loom_status_free(st);
  tu_rmtree(d1);
}

/* ---- vocabulary remapping ---- */
typedef struct voc_model {
  loom_fc_set *set;
  const loom_fc *lin[2], *dnn[2];
} voc_model;

static void voc_cols(voc_model *m, int n, const char *const *vocab, int64_t oov) {
  loom_status *st = loom_status_new();
  m->set = loom_fc_set_new();
  int64_t two = 2;
  loom_fc *x = loom_fc_numeric(m->set, "x", 1, &two, NULL, LOOM_F32, NULL, NULL, st);
  loom_fc *c = loom_fc_vocabulary_list(m->set, "c", n, vocab, oov, -1, st);
  cr_assert(x && c, "%s", loom_status_message(st));
  loom_fc *e = loom_fc_embedding(m->set, c, 3, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  m->lin[0] = m->dnn[0] = x;
  m->lin[1] = c;
  m->dnn[1] = e;
  loom_status_free(st);
}

static void voc_data(cu_data *d) {
  memset(d, 0, sizeof *d);
  float x[12] = {0.5f, 1.0f, 1.5f, -1.0f, 0.0f, 2.0f, 1.0f, 1.0f, -0.5f, 0.2f, 0.3f, 0.1f};
  int64_t xd[2] = {6, 2}, ld[2] = {6, 1};
  char c[6][16] = {"a", "b", "c", "a", "c", "b"};
  int64_t lab[6] = {0, 1, 1, 0, 1, 0};
  d->names[0] = "x";
  d->cols[0] = loom_tensor_from_data(LOOM_F32, 2, xd, x, NULL);
  d->names[1] = "c";
  d->cols[1] = cu_strcol(6, c);
  d->names[2] = "label";
  d->cols[2] = loom_tensor_from_data(LOOM_I64, 2, ld, lab, NULL);
  d->label = "label";
  d->nf = 3;
  d->n = 6;
}

static loom_estimator *voc_combined(voc_model *m, const char *dir, loom_run_config *cfg, const char *from,
                                    const loom_warm_start_settings *ws, int freeze, loom_status *st) {
  static const int64_t h[1] = {4};
  loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
  o.model_dir = dir;
  o.config = cfg;
  o.nlinear_feature_columns = 2;
  o.linear_feature_columns = m->lin;
  o.ndnn_feature_columns = 2;
  o.dnn_feature_columns = m->dnn;
  o.ndnn_hidden_units = 1;
  o.dnn_hidden_units = h;
  o.dnn_optimizer.learning_rate = 0.5;
  o.linear_optimizer.learning_rate = 0.5;
  if (freeze) {
    o.dnn_optimizer.fn = frozen;
    o.linear_optimizer.fn = frozen;
  }
  o.warm_start_from = from;
  o.warm_start = ws;
  return loom_dnn_linear_combined_classifier_new(&o, st);
}

#define LIN_W "linear/linear_model/c/weights"
#define EMB_W "dnn/input_from_feature_columns/input_layer/c_embedding/embedding_weights"

Test(canned_warm, vocabulary_remap_of_linear_weights_and_embeddings) {
  static const char *const old_v[3] = {"a", "b", "c"};
  static const char *const new_v[4] = {"c", "d", "a", "b"};
  voc_model om, nm;
  voc_cols(&om, 3, old_v, 0);
  voc_cols(&nm, 4, new_v, 1);
  cu_data d;
  voc_data(&d);
  loom_status *st = loom_status_new();
  char d1[TU_TMPDIR_CAP], d2[TU_TMPDIR_CAP], d3[TU_TMPDIR_CAP];
  tu_tmpdir(d1, sizeof d1, "canned_voc1");
  tu_tmpdir(d2, sizeof d2, "canned_voc2");
  tu_tmpdir(d3, sizeof d3, "canned_voc3");
  loom_run_config cfg = cu_config();
  loom_estimator *old = voc_combined(&om, d1, &cfg, NULL, NULL, 0, st);
  cr_assert(old, "%s", loom_status_message(st));
  cu_train(old, &d, 30);

  /* vocabulary files for the embedding, lists for the linear weights */
  char of[700], nf[700];
  snprintf(of, sizeof of, "%s/old_vocab.txt", d3);
  snprintf(nf, sizeof nf, "%s/new_vocab.txt", d3);
  tu_write_file(of, "a\nb\nc\n", 6);
  tu_write_file(nf, "c\nd\na\nb\n", 8);
  loom_initializer quarter = loom_init_constant(0.25);
  loom_vocab_info vi[2];
  vi[0] = loom_vocab_info_default();
  vi[0].var_name = LIN_W;
  vi[0].new_vocab = new_v;
  vi[0].new_vocab_size = 4;
  vi[0].num_oov_buckets = 1;
  vi[0].old_vocab = old_v;
  vi[0].old_vocab_size = 3;
  vi[0].backup_initializer = &quarter;
  vi[1] = loom_vocab_info_default();
  vi[1].var_name = EMB_W;
  vi[1].new_vocab_file = nf;
  vi[1].num_oov_buckets = 1;
  vi[1].old_vocab_file = of;
  loom_warm_start_settings ws = loom_warm_start_settings_default();
  ws.ckpt_to_initialize_from = d1;
  ws.nvocab_infos = 2;
  ws.vocab_infos = vi;
  loom_estimator *nw = voc_combined(&nm, d2, &cfg, NULL, &ws, 1, st);
  cr_assert(nw, "%s", loom_status_message(st));
  cu_train(nw, &d, 1);

  loom_tensor *ol = var_value(old, LIN_W), *nl = var_value(nw, LIN_W);
  loom_tensor *oe = var_value(old, EMB_W), *ne = var_value(nw, EMB_W);
  cr_assert_eq(loom_tensor_dim(nl, 0), 5);
  cr_assert_eq(loom_tensor_dim(ne, 0), 5);
  const float *olp = loom_tensor_data_const(ol), *nlp = loom_tensor_data_const(nl);
  const float *oep = loom_tensor_data_const(oe), *nep = loom_tensor_data_const(ne);
  /* new row k <- old row map[k]; -1: backup (0.25 for the linear table, zeros for the embedding) */
  static const int map[5] = {2, -1, 0, 1, -1};
  for (int k = 0; k < 5; k++) {
    if (map[k] >= 0) {
      cr_expect_eq(nlp[k], olp[map[k]], "linear row %d: %g want %g", k, nlp[k], olp[map[k]]);
      for (int j = 0; j < 3; j++)
        cr_expect_eq(nep[k * 3 + j], oep[map[k] * 3 + j], "embedding row %d col %d", k, j);
    } else {
      cr_expect_eq(nlp[k], 0.25f, "linear row %d: %g want the backup 0.25", k, nlp[k]);
      for (int j = 0; j < 3; j++) cr_expect_eq(nep[k * 3 + j], 0.0f, "embedding row %d col %d not zero", k, j);
    }
  }
  /* the trained old rows are not all equal (the test would pass by accident otherwise) */
  cr_expect(olp[0] != olp[1] || olp[1] != olp[2]);
  /* the variables without a VocabInfo were warm-started plainly (".*") */
  expect_same_var(nw, "linear/linear_model/x/weights", old, "linear/linear_model/x/weights");
  expect_same_var(nw, "dnn/logits/kernel", old, "dnn/logits/kernel");
  loom_tensor_free(ol);
  loom_tensor_free(nl);
  loom_tensor_free(oe);
  loom_tensor_free(ne);
  loom_estimator_free(nw);

  /* without VocabInfo the grown table is an error naming it */
  char d4[TU_TMPDIR_CAP];
  tu_tmpdir(d4, sizeof d4, "canned_voc4");
  loom_estimator *bad = voc_combined(&nm, d4, &cfg, d1, NULL, 1, st);
  cr_assert(bad, "%s", loom_status_message(st));
  loom_train_options to = loom_train_options_default();
  to.steps = 1;
  cr_expect_eq(loom_estimator_train(bad, cu_input_fn, &d, &to, st), LOOM_INVALID_ARGUMENT, "%s",
               loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), "embedding_weights") || strstr(loom_status_message(st), LIN_W), "%s",
            loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), "VocabInfo"), "%s", loom_status_message(st));
  loom_estimator_free(bad);
  tu_rmtree(d4);

  /* a missing vocabulary file is NOT_FOUND naming it */
  tu_tmpdir(d4, sizeof d4, "canned_voc5");
  char missing[700];
  snprintf(missing, sizeof missing, "%s/nope.txt", d3);
  vi[1].old_vocab_file = missing;
  bad = voc_combined(&nm, d4, &cfg, NULL, &ws, 1, st);
  cr_assert(bad, "%s", loom_status_message(st));
  cr_expect_eq(loom_estimator_train(bad, cu_input_fn, &d, &to, st), LOOM_NOT_FOUND, "%s", loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), "nope.txt"), "%s", loom_status_message(st));
  loom_estimator_free(bad);
  tu_rmtree(d4);

  /* a table whose size is not new vocabulary + OOV names both */
  tu_tmpdir(d4, sizeof d4, "canned_voc6");
  vi[1].old_vocab_file = of;
  vi[1].num_oov_buckets = 2;
  bad = voc_combined(&nm, d4, &cfg, NULL, &ws, 1, st);
  cr_assert(bad, "%s", loom_status_message(st));
  cr_expect_eq(loom_estimator_train(bad, cu_input_fn, &d, &to, st), LOOM_INVALID_ARGUMENT, "%s",
               loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), "num_oov_buckets 2"), "%s", loom_status_message(st));
  loom_estimator_free(bad);
  tu_rmtree(d4);

  /* bad settings are refused when set */
  loom_warm_start_settings w2 = loom_warm_start_settings_default();
  w2.ckpt_to_initialize_from = d1;
  w2.vars_to_warm_start = "dnn/(";
  bad = voc_combined(&nm, d4, &cfg, NULL, &w2, 1, st);
  cr_expect_null(bad);
  cr_expect(strstr(loom_status_message(st), "vars_to_warm_start: invalid regex 'dnn/('"), "%s",
            loom_status_message(st));
  loom_estimator_free(bad);
  tu_rmtree(d4);

  loom_estimator_free(old);
  cu_data_free(&d);
  loom_fc_set_free(om.set);
  loom_fc_set_free(nm.set);
  loom_status_free(st);
  tu_rmtree(d1);
  tu_rmtree(d2);
  tu_rmtree(d3);
}

/* axis 1: the columns of the logits kernel remapped when the label
 * vocabulary grew (TF's VocabInfo(axis=1) for the output layer) */
Test(canned_warm, vocabulary_remap_axis_1) {
  cols4 c;
  cols4_make(&c);
  cu_data tr;
  cu_iris(&tr, 0, 1);
  loom_status *st = loom_status_new();
  char d1[TU_TMPDIR_CAP], d2[TU_TMPDIR_CAP];
  tu_tmpdir(d1, sizeof d1, "canned_ax1");
  tu_tmpdir(d2, sizeof d2, "canned_ax2");
  loom_run_config cfg = cu_config();
  static const char *const ov[3] = {"setosa", "versicolor", "virginica"};
  static const char *const nv[4] = {"virginica", "setosa", "rosa", "versicolor"};
  loom_dnn_options o = loom_dnn_options_default();
  o.model_dir = d1;
  o.config = &cfg;
  o.n_classes = 3;
  o.nlabel_vocabulary = 3;
  o.label_vocabulary = ov;
  o.nfeature_columns = 4;
  o.feature_columns = c.c;
  o.nhidden_units = 2;
  o.hidden_units = HID;
  loom_estimator *a = loom_dnn_classifier_new(&o, st);
  cr_assert(a, "%s", loom_status_message(st));
  cu_train(a, &tr, 20);
  loom_vocab_info vi = loom_vocab_info_default();
  vi.var_name = "dnn/logits/kernel";
  vi.new_vocab = nv;
  vi.new_vocab_size = 4;
  vi.old_vocab = ov;
  vi.old_vocab_size = 3;
  vi.axis = 1;
  loom_warm_start_settings ws = loom_warm_start_settings_default();
  ws.ckpt_to_initialize_from = d1;
  /* the VocabInfo's variable must be selected too (TF: "not used" otherwise) */
  ws.vars_to_warm_start = "dnn/hiddenlayer.*|dnn/logits/kernel";
  ws.nvocab_infos = 1;
  ws.vocab_infos = &vi;
  o.model_dir = d2;
  o.n_classes = 4;
  o.nlabel_vocabulary = 4;
  o.label_vocabulary = nv;
  o.warm_start = &ws;
  o.optimizer.fn = frozen;
  loom_estimator *b = loom_dnn_classifier_new(&o, st);
  cr_assert(b, "%s", loom_status_message(st));
  cu_train(b, &tr, 1);
  loom_tensor *ok = var_value(a, "dnn/logits/kernel"), *nk = var_value(b, "dnn/logits/kernel");
  cr_assert_eq(loom_tensor_dim(nk, 1), 4);
  const float *op = loom_tensor_data_const(ok), *np = loom_tensor_data_const(nk);
  static const int map[4] = {2, 0, -1, 1};
  for (int r = 0; r < 10; r++)
    for (int k = 0; k < 4; k++) {
      float want = map[k] >= 0 ? op[r * 3 + map[k]] : 0.0f;
      cr_expect_eq(np[r * 4 + k], want, "row %d col %d: %g want %g", r, k, np[r * 4 + k], want);
    }
  expect_same_var(b, "dnn/hiddenlayer_1/kernel", a, "dnn/hiddenlayer_1/kernel");
  loom_tensor_free(ok);
  loom_tensor_free(nk);
  loom_estimator_free(a);
  loom_estimator_free(b);
  cu_data_free(&tr);
  loom_fc_set_free(c.set);
  loom_status_free(st);
  tu_rmtree(d1);
  tu_rmtree(d2);
}
