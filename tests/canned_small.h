/* canned_small.h - the small column set of the canned fixtures (x numeric [2], c vocabulary a/b/c with a
 * 2-wide embedding for the DNN part), its 4-row data, and the 8 canned estimators over it by fixture name
 * ("linear_classifier3", "dnn_regressor", "combined_classifier", "baseline_regressor", ...). */
#ifndef CANNED_SMALL_H
#define CANNED_SMALL_H
#include "canned_util.h"

typedef struct small_cols {
  loom_fc_set *set;
  const loom_fc *lin[2], *dnn[2];
} small_cols;

static inline void small_cols_make(small_cols *s) {
  loom_status *st = loom_status_new();
  s->set = loom_fc_set_new();
  int64_t two = 2;
  static const char *const voc[3] = {"a", "b", "c"};
  loom_fc *x = loom_fc_numeric(s->set, "x", 1, &two, NULL, LOOM_F32, NULL, NULL, st);
  loom_fc *c = loom_fc_vocabulary_list(s->set, "c", 3, voc, 0, -1, st);
  cr_assert(x && c, "%s", loom_status_message(st));
  loom_fc *emb = loom_fc_embedding(s->set, c, 2, NULL, st);
  cr_assert(emb, "%s", loom_status_message(st));
  s->lin[0] = x;
  s->lin[1] = c;
  s->dnn[0] = x;
  s->dnn[1] = emb;
  loom_status_free(st);
}

static inline void small_data(cu_data *d, int n_classes, int regression) {
  memset(d, 0, sizeof *d);
  float x[8] = {0.5f, 1.0f, 1.5f, -1.0f, 0.0f, 2.0f, 1.0f, 1.0f};
  int64_t xd[2] = {4, 2}, ld[2] = {4, 1};
  char c[4][16] = {"a", "b", "c", "a"};
  int64_t lab[4] = {0, 1, 2 % n_classes, 1};
  float rl[4] = {0, 1, 2, 1};
  d->names[0] = "x";
  d->cols[0] = loom_tensor_from_data(LOOM_F32, 2, xd, x, NULL);
  d->names[1] = "c";
  d->cols[1] = cu_strcol(4, c);
  d->names[2] = "label";
  d->cols[2] = regression ? loom_tensor_from_data(LOOM_F32, 2, ld, rl, NULL)
                          : loom_tensor_from_data(LOOM_I64, 2, ld, lab, NULL);
  d->label = "label";
  d->nf = 3;
  d->n = 4;
}

/* TF 1's RMSProp (tf.compat.v1.train.RMSPropOptimizer: the mean square starts at 1), centered, momentum 0.5. */
static inline loom_optimizer *small_tf1_rmsprop(loom_graph *g, void *user) {
  (void)user;
  loom_rmsprop_options o = loom_rmsprop_options_default();
  o.centered = 1;
  o.momentum = 0.5;
  return loom_optimizer_rmsprop(loom_const_f32(g, 0.01f, "learning_rate"), &o);
}

/* A "dnn_rmsprop_*" model trains with optimizer "RMSProp" (Keras': the mean square starts at 0), a
 * "dnn_tf1rmsprop_*" one with small_tf1_rmsprop. */
static inline loom_estimator *make_fixture_model(const char *model, small_cols *s, const char *dir, loom_run_config *cfg,
                                          loom_status *st) {
  static const int64_t h43[2] = {4, 3}, h4[1] = {4};
  int cls3 = model[strlen(model) - 1] == '3';
  if (!strncmp(model, "linear", 6)) {
    loom_linear_options o = loom_linear_options_default();
    o.model_dir = dir;
    o.config = cfg;
    o.nfeature_columns = 2;
    o.feature_columns = s->lin;
    o.n_classes = cls3 ? 3 : 2;
    return strstr(model, "classifier") ? loom_linear_classifier_new(&o, st) : loom_linear_regressor_new(&o, st);
  }
  if (!strncmp(model, "dnn", 3)) {
    loom_dnn_options o = loom_dnn_options_default();
    o.model_dir = dir;
    o.config = cfg;
    o.nfeature_columns = 2;
    o.feature_columns = s->dnn;
    o.n_classes = cls3 ? 3 : 2;
    int bn = strstr(model, "_bn") != NULL;
    o.nhidden_units = bn ? 1 : 2;
    o.hidden_units = bn ? h4 : h43;
    o.batch_norm = bn;
    if (strstr(model, "_rmsprop")) o.optimizer.name = "RMSProp";
    if (strstr(model, "_tf1rmsprop")) o.optimizer.fn = small_tf1_rmsprop;
    return strstr(model, "classifier") ? loom_dnn_classifier_new(&o, st) : loom_dnn_regressor_new(&o, st);
  }
  if (!strncmp(model, "combined", 8)) {
    loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
    o.model_dir = dir;
    o.config = cfg;
    o.nlinear_feature_columns = 2;
    o.linear_feature_columns = s->lin;
    o.ndnn_feature_columns = 2;
    o.dnn_feature_columns = s->dnn;
    o.ndnn_hidden_units = 2;
    o.dnn_hidden_units = h43;
    o.n_classes = cls3 ? 3 : 2;
    return strstr(model, "classifier") ? loom_dnn_linear_combined_classifier_new(&o, st)
                                       : loom_dnn_linear_combined_regressor_new(&o, st);
  }
  loom_baseline_options o = loom_baseline_options_default();
  o.model_dir = dir;
  o.config = cfg;
  o.n_classes = cls3 ? 3 : 2;
  return strstr(model, "classifier") ? loom_baseline_classifier_new(&o, st) : loom_baseline_regressor_new(&o, st);
}

#endif
