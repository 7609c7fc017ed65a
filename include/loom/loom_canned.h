/* loom_canned.h - TF 2.15's canned (premade) estimators: LinearClassifier /
 * LinearRegressor, DNNClassifier / DNNRegressor, DNNLinearCombinedClassifier
 * / DNNLinearCombinedRegressor (wide & deep) and BaselineClassifier /
 * BaselineRegressor; and warm starting with WarmStartSettings / VocabInfo.
 *
 * Each constructor returns a plain loom_estimator (loom_estimator.h): train,
 * evaluate, predict, export and the hooks work as for a custom model_fn, and
 * loom_estimator_free frees the canned model too. The model is TF's:
 *   head        n_classes 2: BinaryClassHead (1 logit); n_classes > 2:
 *               MultiClassHead; regressors RegressionHead(label_dimension);
 *               weight_column, label_vocabulary and loss_reduction are the
 *               head's (loom_head.h: prediction keys, eval metric keys and
 *               export outputs as TF's).
 *   Linear      logits = linear_model(feature_columns, units = logits
 *               dimension, sparse_combiner) under scope "linear":
 *               linear/linear_model/<column>/weights,
 *               linear/linear_model/bias_weights.
 *   DNN         input_layer(feature_columns) under
 *               dnn/input_from_feature_columns/input_layer/..., then per
 *               hidden layer i dense(units, activation, glorot_uniform)
 *               dnn/hiddenlayer_<i>/{kernel,bias}, in TRAIN followed by
 *               dropout(rate) when dropout > 0, then (batch_norm)
 *               BatchNormalization(momentum 0.999, epsilon 1e-3)
 *               dnn/hiddenlayer_<i>/batchnorm_<i>/{gamma,beta,moving_mean,
 *               moving_variance} (training statistics in TRAIN, moving ones
 *               otherwise; the moving-statistics updates run with the train
 *               op); the logits layer dnn/logits/{kernel,bias} is linear.
 *   Combined    logits = dnn logits + linear logits (either part may be
 *               absent, not both); one train op runs the DNN optimizer on
 *               the dnn/ variables and the linear optimizer on the linear/
 *               ones from the same loss, and increments global_step once.
 *   Baseline    logits = baseline/bias [logits dimension] for every example
 *               (the features are ignored but for the weight column).
 * These names and shapes equal TF's (tests/fixtures/canned/canned_vars.h,
 * from scripts/gen_canned_fixtures.py); optimizer slots are named TF1-style
 * ("<var>/Ftrl", "<var>/Adagrad"), not Keras' "training/<Opt>/<var>/...".
 *
 * Optimizers (TF 2.15's defaults, checked against tensorflow_estimator's
 * canned/ sources): an optimizer is given by name, "Adagrad", "Adam", "Ftrl",
 * "RMSProp" or "SGD" (Keras legacy semantics: Adagrad/Ftrl initial
 * accumulator 0.1, Adam epsilon 1e-7, RMSProp rho 0.9 epsilon 1e-7, its
 * mean square starting at 0, epsilon outside the square root: keras_legacy), with
 * learning_rate 0 = the estimator's default learning rate for a named
 * optimizer, or by a factory callback (the optimizer object). Defaults:
 *   Linear     "Ftrl" at 0.2 (TF 2.15: the default optimizer is the string
 *              'Ftrl' and a string gets _LEARNING_RATE = 0.2). TF's
 *              optimizer=None default, Ftrl at min(0.2, 1/sqrt(number of
 *              feature columns)), is name NULL here.
 *   DNN        "Adagrad" at 0.001: TF 2.15's DNN estimators pass no
 *              learning rate, so a name gets that Keras optimizer's own
 *              default, 0.001 (Adagrad, Adam, Ftrl, RMSProp) or 0.01 (SGD).
 *   Combined   linear "Ftrl" at min(0.005, 1/sqrt(number of linear
 *              columns)); dnn "Adagrad" at 0.001 (also for names given
 *              without a learning rate, as TF).
 *   Baseline   "Ftrl" at 0.3.
 *
 * Feature columns are borrowed: their loom_fc_set must outlive the
 * estimator. Option arrays and strings are copied.
 *
 * Errors: constructors return NULL with INVALID_ARGUMENT naming the option
 * and the value ("DNNClassifier: hidden_units must not be empty",
 * "LinearClassifier: n_classes must be > 1 (got 1)", "DNNClassifier:
 * unknown optimizer 'Adamax' (Adagrad, Adam, Ftrl, RMSProp, SGD)"); labels
 * out of range or not in label_vocabulary fail the train/evaluate run with
 * the head's messages (loom_head.h).
 */
#ifndef LOOM_CANNED_H
#define LOOM_CANNED_H
#include "loom_base.h"
#include "loom_estimator.h"
#include "loom_feature_columns.h"
#include "loom_losses.h"
#include "loom_train.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- optimizers ---- */
/* Makes the optimizer in g (called once per TRAIN graph); NULL is an error. */
typedef loom_optimizer *(*loom_canned_optimizer_fn)(loom_graph *g, void *user);
typedef struct loom_canned_optimizer {
  const char *name;           /* "Adagrad", "Adam", "Ftrl", "RMSProp", "SGD"; NULL: see above */
  double learning_rate;       /* > 0, or 0: the estimator's default */
  loom_canned_optimizer_fn fn; /* not NULL: the optimizer (name and learning_rate ignored) */
  void *user;                 /* passed to fn */
} loom_canned_optimizer;

/* ---- warm start (tf.estimator.WarmStartSettings / VocabInfo) ---- */
/* Remaps the rows (axis 0) or columns (axis 1) of a 2-D variable whose
 * vocabulary changed: entry k of the new vocabulary takes the old row of the
 * same string; new entries and the num_oov_buckets OOV rows after the
 * vocabulary get backup_initializer's values (NULL: zeros, as TF). A
 * vocabulary is a file (one entry per line, TF's vocabulary file) or a list;
 * size <= 0 = all of it, else its first size entries. */
typedef struct loom_vocab_info {
  const char *var_name;          /* the variable of the new model */
  const char *new_vocab_file;    /* or new_vocab */
  int64_t new_vocab_size;
  const char *const *new_vocab;
  int64_t num_oov_buckets;       /* 0 */
  const char *old_vocab_file;    /* or old_vocab */
  int64_t old_vocab_size;
  const char *const *old_vocab;
  const loom_initializer *backup_initializer; /* NULL: zeros */
  int32_t axis;                  /* 0 (rows) or 1 (columns) */
} loom_vocab_info;
LOOM_API loom_vocab_info loom_vocab_info_default(void);

typedef struct loom_warm_start_settings {
  uint32_t struct_size;
  const char *ckpt_to_initialize_from; /* a checkpoint file, a model directory or an export directory */
  /* vars_to_warm_start: a POSIX extended regex matched at the start of the
   * names of the TRAINABLE variables (".*" by default); or NULL with
   * var_regexes non-NULL: a list of nvar_regexes regexes (0: the empty
   * list, nothing selected) over all GLOBAL variables (optimizer slots,
   * moving statistics, global_step...); or NULL (or "") with var_regexes
   * NULL: TF's None, all trainable variables selected but only those of
   * vocab_infos warm-started. Not both vars_to_warm_start and
   * var_regexes. */
  const char *vars_to_warm_start;
  int32_t nvar_regexes;
  const char *const *var_regexes;
  int32_t nvocab_infos;
  const loom_vocab_info *vocab_infos;
  /* var_name_to_prev_var_name: new_names[i] is read from the checkpoint's
   * prev_names[i]. */
  int32_t nprev_names;
  const char *const *new_names;
  const char *const *prev_names;
} loom_warm_start_settings;
LOOM_API loom_warm_start_settings loom_warm_start_settings_default(void);

/* Replaces e's warm_start_from / warm start regex by ws (copied). Applied
 * like warm_start_from: when training starts in a model_dir without a
 * checkpoint. Errors then, as TF's ValueErrors, INVALID_ARGUMENT with a
 * message starting "WarmStartSettings: ": a new_names or vocab_infos entry
 * naming no variable vars_to_warm_start selects ("not used"; nothing is
 * read then), and a selected variable (or its prev_names entry) absent
 * from the checkpoint, naming both. A shape mismatch without a vocab_info
 * is INVALID_ARGUMENT naming the variable and both shapes; a missing
 * vocabulary file is NOT_FOUND naming it. */
LOOM_API loom_code loom_estimator_set_warm_start_settings(loom_estimator *e, const loom_warm_start_settings *ws,
                                                          loom_status *st);

/* ---- options ----
 * Fields used by every canned estimator (the classifier or the regressor
 * reads n_classes or label_dimension): */
#define LOOM_CANNED_COMMON_FIELDS                                                                    \
  const char *model_dir;             /* NULL: config's, or a temp dir (loom_estimator_new) */     \
  const loom_run_config *config;     /* NULL: loom_run_config_default() */                        \
  int64_t n_classes;                 /* classifiers: 2 (>= 2) */                                   \
  int64_t label_dimension;           /* regressors: 1 (>= 1) */                                    \
  const char *weight_column;         /* NULL: unweighted */                                        \
  int32_t nlabel_vocabulary;         /* classifiers: 0, or n_classes strings */                    \
  const char *const *label_vocabulary;                                                             \
  loom_reduction loss_reduction;     /* SUM_OVER_BATCH_SIZE (TF 2.x); or SUM */                    \
  const char *warm_start_from;       /* NULL; a directory or checkpoint (all trainable variables) */ \
  const loom_warm_start_settings *warm_start; /* NULL; overrides warm_start_from */

typedef struct loom_linear_options {
  uint32_t struct_size;
  LOOM_CANNED_COMMON_FIELDS
  int32_t nfeature_columns;          /* >= 1 */
  const loom_fc *const *feature_columns;
  loom_canned_optimizer optimizer;   /* {"Ftrl", 0}: 0.2 */
  loom_combiner sparse_combiner;     /* LOOM_COMBINER_SUM */
} loom_linear_options;
LOOM_API loom_linear_options loom_linear_options_default(void);

typedef struct loom_dnn_options {
  uint32_t struct_size;
  LOOM_CANNED_COMMON_FIELDS
  int32_t nhidden_units;             /* >= 1 */
  const int64_t *hidden_units;       /* each >= 1 */
  int32_t nfeature_columns;          /* >= 1 */
  const loom_fc *const *feature_columns;
  loom_canned_optimizer optimizer;   /* {"Adagrad", 0}: 0.001 (SGD: 0.01) */
  const char *activation;            /* "relu" (loom_activation's names) */
  double dropout;                    /* 0 = none; else in (0, 1) */
  int32_t batch_norm;                /* 0 */
} loom_dnn_options;
LOOM_API loom_dnn_options loom_dnn_options_default(void);

typedef struct loom_dnn_linear_combined_options {
  uint32_t struct_size;
  LOOM_CANNED_COMMON_FIELDS
  int32_t nlinear_feature_columns;
  const loom_fc *const *linear_feature_columns;
  loom_canned_optimizer linear_optimizer; /* {"Ftrl", 0}: min(0.005, 1/sqrt(n linear columns)) */
  int32_t ndnn_feature_columns;
  const loom_fc *const *dnn_feature_columns;
  loom_canned_optimizer dnn_optimizer;    /* {"Adagrad", 0}: 0.001 */
  int32_t ndnn_hidden_units;              /* >= 1 when there are dnn columns */
  const int64_t *dnn_hidden_units;
  const char *dnn_activation;             /* "relu" */
  double dnn_dropout;                     /* 0 */
  int32_t batch_norm;                     /* 0 */
  loom_combiner linear_sparse_combiner;   /* LOOM_COMBINER_SUM */
} loom_dnn_linear_combined_options;
LOOM_API loom_dnn_linear_combined_options loom_dnn_linear_combined_options_default(void);

typedef struct loom_baseline_options {
  uint32_t struct_size;
  LOOM_CANNED_COMMON_FIELDS
  loom_canned_optimizer optimizer;   /* {"Ftrl", 0}: 0.3 */
} loom_baseline_options;
LOOM_API loom_baseline_options loom_baseline_options_default(void);

/* Constructors: a new estimator (NULL on failure); free with
 * loom_estimator_free. o NULL = the defaults (invalid where columns or
 * hidden units are required). */
LOOM_API loom_estimator *loom_linear_classifier_new(const loom_linear_options *o, loom_status *st);
LOOM_API loom_estimator *loom_linear_regressor_new(const loom_linear_options *o, loom_status *st);
LOOM_API loom_estimator *loom_dnn_classifier_new(const loom_dnn_options *o, loom_status *st);
LOOM_API loom_estimator *loom_dnn_regressor_new(const loom_dnn_options *o, loom_status *st);
LOOM_API loom_estimator *loom_dnn_linear_combined_classifier_new(const loom_dnn_linear_combined_options *o,
                                                                 loom_status *st);
LOOM_API loom_estimator *loom_dnn_linear_combined_regressor_new(const loom_dnn_linear_combined_options *o,
                                                                loom_status *st);
LOOM_API loom_estimator *loom_baseline_classifier_new(const loom_baseline_options *o, loom_status *st);
LOOM_API loom_estimator *loom_baseline_regressor_new(const loom_baseline_options *o, loom_status *st);

/* The learning rate a canned estimator uses for an optimizer spec
 * (opt->learning_rate when > 0, else the default for that estimator kind):
 * kind "Linear", "DNN", "DNNLinearCombined/linear",
 * "DNNLinearCombined/dnn", "Baseline"; ncols the (linear) column count.
 * -1 for an unknown kind. */
LOOM_API double loom_canned_learning_rate(const char *kind, const loom_canned_optimizer *opt, int ncols);

#ifdef __cplusplus
}
#endif
#endif
