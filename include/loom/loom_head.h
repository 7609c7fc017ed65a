/* loom_head.h - Heads (TF 2.15 tf.estimator.BinaryClassHead,
 * MultiClassHead, MultiLabelHead, RegressionHead, PoissonRegressionHead,
 * LogisticRegressionHead, MultiHead).
 *
 * A head turns logits [B, logits_dimension] (and, in TRAIN and EVAL, the
 * labels) into a complete EstimatorSpec for the mode, as TF's heads do:
 *   loss          the weighted per-example loss reduced with the head's
 *                 loss_reduction (SUM_OVER_BATCH_SIZE: sum(w * L) / number of
 *                 elements of L, TF 2.x's default; SUM: sum(w * L));
 *   predictions   TF's keys: binary "logits", "logistic", "probabilities",
 *                 "class_ids" (int64 [B,1]), "classes" (string [B,1]),
 *                 "all_class_ids" (int32 [B,n]), "all_classes" (string
 *                 [B,n]); multi-class the same without
 *                 "logistic"; multi-label "logits", "probabilities",
 *                 "classes"; regression "predictions" (plus "logits" for the
 *                 Poisson (exp) and logistic (sigmoid) heads); a multi-head
 *                 prefixes its heads' keys: "<head name>/<key>";
 *   eval metrics  TF's keys (suffixed "/<name>" when the head has a name):
 *                 binary "average_loss", "accuracy", "precision", "recall",
 *                 "prediction/mean", "label/mean", "accuracy_baseline",
 *                 "auc", "auc_precision_recall", and per threshold t
 *                 ("%g") "accuracy/positive_threshold_<t>",
 *                 "precision/positive_threshold_<t>",
 *                 "recall/positive_threshold_<t>"; multi-class
 *                 "average_loss", "accuracy"; multi-label "average_loss",
 *                 "auc", "auc_precision_recall" and the threshold trio;
 *                 regression, Poisson, logistic "average_loss", "label/mean",
 *                 "prediction/mean"; a multi-head its heads' metrics plus
 *                 "loss/<head name>" per head;
 *   export        TF's export outputs (PREDICT mode): classifiers
 *                 "serving_default" and "classification" (classify: classes =
 *                 all_classes, scores = probabilities), the binary head also
 *                 "regression" (regress: logistic), and "predict" (all
 *                 predictions); regressors "serving_default" and
 *                 "regression" (regress: predictions) and "predict"; a
 *                 multi-head "serving_default" (its first head's),
 *                 "<head>" (each head's default), "<head>/<output>" and
 *                 "predict" (every head's predictions, "<head>/<key>").
 *   train_op      from the caller's train_op_fn(g, loss, user) (TRAIN only),
 *                 so canned models plug their optimizers in.
 * Metric values follow TF's Keras metrics; AUCs use loom_metrics_auc (200
 * thresholds, ROC trapezoidal, PR careful interpolation), whose rates carry
 * tf.compat.v1's epsilon 1e-6 where Keras divides without one (results
 * differ by about 1e-6).
 *
 * Labels: binary any numeric dtype, [B] or [B,1], values in [0, 1];
 * multi-class integer [B] or [B,1], ids in [0, n_classes); multi-label a
 * dense multi-hot [B, n_classes] of 0/1; regression and Poisson numeric
 * [B, label_dimension] ([B] when label_dimension is 1); logistic [B] or
 * [B,1] in [0, 1]. A label outside its range fails the run with
 * INVALID_ARGUMENT naming the check node and the value
 * ("head/losses/check_label_range: indices[2,0] = 5 is not in [0, 3)").
 * With a label_vocabulary (binary, multi-class) the labels must be strings
 * and are mapped to their positions; an entry not in the vocabulary fails
 * the run naming it ("'cat' (element 2) is not in the vocabulary").
 *
 * "classes" ([B,1]) and "all_classes" ([B,n_classes]; multi-label
 * "classes" likewise) are strings, as in TF: the label_vocabulary entry of
 * the class, or without a vocabulary its decimal id ("2"); the classify
 * export outputs' "classes" are the all_classes strings.
 *
 * weight_column names a feature (any numeric dtype, [B] or [B,1]; [B,
 * label_dimension] for regression) that weights the loss and every metric;
 * a missing feature is an INVALID_ARGUMENT graph error naming it.
 *
 * Errors: constructors return NULL with INVALID_ARGUMENT naming the option
 * ("MultiClassHead: n_classes must be >= 3 (got 1)"); create_spec records
 * graph errors by the sticky rule and returns the graph's (or the spec
 * setters') first error code.
 */
#ifndef LOOM_HEAD_H
#define LOOM_HEAD_H
#include "loom_base.h"
#include "loom_estimator.h"
#include "loom_graph.h"
#include "loom_losses.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_head loom_head;

/* Returns the train op minimizing loss (e.g. loom_optimizer_minimize with
 * the global step); NULL is an error. */
typedef loom_node *(*loom_head_train_op_fn)(loom_graph *g, loom_output loss, void *user);

/* Options common to every head kind. Strings are copied by the
 * constructors; arrays are copied. */
typedef struct loom_binary_head_options {
  uint32_t struct_size;
  const char *weight_column;              /* NULL: every example weighs 1 */
  int32_t nthresholds;                    /* 0 */
  const double *thresholds;               /* each in (0, 1) */
  int32_t nlabel_vocabulary;              /* 0: labels are numbers; else 2 strings */
  const char *const *label_vocabulary;
  loom_reduction loss_reduction;          /* SUM_OVER_BATCH_SIZE (TF 2.x); or SUM */
  const char *name;                       /* NULL: keys without suffix */
} loom_binary_head_options;
LOOM_API loom_binary_head_options loom_binary_head_options_default(void);

typedef struct loom_multi_class_head_options {
  uint32_t struct_size;
  int64_t n_classes;                      /* >= 3 (required; 0 by default) */
  const char *weight_column;
  int32_t nlabel_vocabulary;              /* 0, or n_classes strings */
  const char *const *label_vocabulary;
  loom_reduction loss_reduction;
  const char *name;
} loom_multi_class_head_options;
LOOM_API loom_multi_class_head_options loom_multi_class_head_options_default(void);

typedef struct loom_multi_label_head_options {
  uint32_t struct_size;
  int64_t n_classes;                      /* >= 2 (required) */
  const char *weight_column;
  int32_t nthresholds;
  const double *thresholds;               /* each in (0, 1) */
  int32_t nlabel_vocabulary;              /* 0 (a vocabulary, for sparse string labels, is UNIMPLEMENTED) */
  const char *const *label_vocabulary;
  loom_reduction loss_reduction;
  const char *name;
} loom_multi_label_head_options;
LOOM_API loom_multi_label_head_options loom_multi_label_head_options_default(void);

/* RegressionHead; also the options of PoissonRegressionHead (loss
 * log_poisson_loss with compute_full_loss, inverse link exp) and of
 * LogisticRegressionHead (label_dimension must be 1; loss sigmoid cross
 * entropy with labels in [0, 1], inverse link sigmoid). */
typedef struct loom_regression_head_options {
  uint32_t struct_size;
  int64_t label_dimension;                /* 1; >= 1 */
  const char *weight_column;
  loom_reduction loss_reduction;
  int32_t compute_full_loss;              /* Poisson only: 1 (TF's default) adds Stirling's term */
  const char *name;
} loom_regression_head_options;
LOOM_API loom_regression_head_options loom_regression_head_options_default(void);

/* Constructors: a new head (NULL on failure); caller frees with
 * loom_head_free (or hands it to loom_multi_head_new). */
LOOM_API loom_head *loom_binary_class_head_new(const loom_binary_head_options *o, loom_status *st);
LOOM_API loom_head *loom_multi_class_head_new(const loom_multi_class_head_options *o, loom_status *st);
LOOM_API loom_head *loom_multi_label_head_new(const loom_multi_label_head_options *o, loom_status *st);
LOOM_API loom_head *loom_regression_head_new(const loom_regression_head_options *o, loom_status *st);
LOOM_API loom_head *loom_poisson_regression_head_new(const loom_regression_head_options *o, loom_status *st);
LOOM_API loom_head *loom_logistic_regression_head_new(const loom_regression_head_options *o, loom_status *st);
/* MultiHead over n >= 1 named heads (unique names); head_weights NULL = 1
 * each. The loss is sum_i head_weights[i] * loss_i. Takes ownership of the
 * heads, also when it fails (then they are freed). Its logits are the
 * heads' logits concatenated in order along the last axis. */
LOOM_API loom_head *loom_multi_head_new(int n, loom_head *const *heads, const double *head_weights,
                                        loom_status *st);
LOOM_API void loom_head_free(loom_head *h);

/* logits_dimension: 1 (binary, regression with label_dimension 1),
 * n_classes, label_dimension, or the multi-head's sum. 0 for NULL. */
LOOM_API int64_t loom_head_logits_dimension(const loom_head *h);
/* The name (NULL when unnamed; a multi-head's is its heads' names joined
 * by "_"). Owned by h. */
LOOM_API const char *loom_head_name(const loom_head *h);

/* Fills spec for mode from logits [B, logits_dimension] float32. labels
 * are needed in TRAIN and EVAL. features supplies the weight column (may
 * be NULL without one). In TRAIN, train_op_fn(g, loss, user) makes the
 * train op (NULL there is INVALID_ARGUMENT). For a multi-head, labels is
 * ignored and each head's labels are the feature named after the head
 * (use loom_head_create_spec_multi to pass them directly). */
LOOM_API loom_code loom_head_create_spec(const loom_head *h, loom_graph *g, const loom_features *features,
                                         loom_mode mode, loom_output logits, loom_output labels,
                                         loom_head_train_op_fn train_op_fn, void *user, loom_estimator_spec *spec,
                                         loom_status *st);
/* The same for a multi-head with one labels output per head (in the
 * heads' order; labels may be NULL in PREDICT). */
LOOM_API loom_code loom_head_create_spec_multi(const loom_head *h, loom_graph *g, const loom_features *features,
                                               loom_mode mode, loom_output logits, const loom_output *labels,
                                               loom_head_train_op_fn train_op_fn, void *user,
                                               loom_estimator_spec *spec, loom_status *st);

/* The training loss alone (TF's head.loss): the weighted per-example loss
 * reduced with the head's loss_reduction, built in g from logits [B,
 * logits_dimension] and labels (one output; a multi-head one per head in
 * its heads' order, its loss sum_i head_weights[i] * loss_i). features
 * supplies the weight column (may be NULL without one). Label checks as in
 * create_spec. Returns {NULL, 0} on failure (graph errors by the sticky
 * rule; NULL arguments INVALID_ARGUMENT in st). */
LOOM_API loom_output loom_head_loss(const loom_head *h, loom_graph *g, const loom_features *features,
                                    loom_output logits, const loom_output *labels, loom_status *st);
/* The predictions alone (TF's head.predictions): builds them in g from
 * logits and calls fn(key, value, user) for each, with create_spec's keys
 * in its order (a multi-head's "<head name>/<key>"). key is valid during
 * the call. Returns the graph's first error code. */
typedef void (*loom_head_prediction_fn)(const char *key, loom_output value, void *user);
LOOM_API loom_code loom_head_predictions(const loom_head *h, loom_graph *g, loom_output logits,
                                         loom_head_prediction_fn fn, void *user, loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
