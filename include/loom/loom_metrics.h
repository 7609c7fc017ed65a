/* loom_metrics.h - streaming metrics (tf.compat.v1.metrics).
 *
 * Contract (TF's): a metric keeps its state in local metric variables (in
 * LOOM_LOCAL_VARIABLES and LOOM_METRIC_VARIABLES, not GLOBAL, not trainable,
 * zero-initialised) named like TF under the metric's variable scope
 * ("mean/total", "mean/count", "auc/true_positives", ...). Each builder
 * returns a loom_metric:
 *   value   reads the state only (no dependency on the inputs); running it
 *           any number of times changes nothing;
 *   update  folds one batch into the state and returns the running value
 *           (computed after every state assignment of the metric);
 *   reset   a NoOp node (run it as a target) that zeroes the metric's
 *           variables. loom_local_variables_initializer(g) also does.
 * Variables must be initialised (reset or the local initializer) before
 * the first run, as in TF. Fetching value and update in the same run gives
 * an unspecified interleaving, as in TF.
 *
 * Common arguments:
 *   weights  {NULL,0} = every element weighs 1; else broadcastable to the
 *            values by TF's rules (a scalar, or the same rank with dims 1 or
 *            equal; a trailing size-1 dim is squeezed / a missing one added
 *            as TF's _remove_squeezable_dimensions does). Any numeric dtype.
 *   name     the metric's variable scope; NULL = TF's default name, made
 *            unique ("mean", "mean_1", ...). An explicit name is used as is
 *            (a second metric with the same explicit name is an
 *            ALREADY_EXISTS graph error, like TF).
 * Shape errors are INVALID_ARGUMENT graph errors naming the metric's scope.
 * Errors follow the sticky rule of loom_graph.h. Values are float32 unless
 * noted. */
#ifndef LOOM_METRICS_H
#define LOOM_METRICS_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_metric {
  loom_output value;
  loom_output update;
  loom_node *reset;
} loom_metric;

/* Adds m->value to metrics_collection and m->update to updates_collection
 * (either may be NULL: skipped). */
LOOM_API void loom_metric_add_to_collections(loom_graph *g, const loom_metric *m, const char *metrics_collection,
                                             const char *updates_collection);

/* ---- totals and means: state "<name>/total", "<name>/count" ---- */
/* Weighted mean of values: sum(w * v) / sum(w) (0 while sum(w) == 0).
 * Default name "mean". */
LOOM_API loom_metric loom_metrics_mean(loom_graph *g, loom_output values, loom_output weights, const char *name);
/* Elementwise running mean of a fully known-shape tensor: state
 * "<name>/total_tensor", "<name>/count_tensor" of values' shape. */
LOOM_API loom_metric loom_metrics_mean_tensor(loom_graph *g, loom_output values, loom_output weights,
                                              const char *name);
/* Mean of (predictions == labels) (predictions cast to labels' dtype).
 * Default name "accuracy". */
LOOM_API loom_metric loom_metrics_accuracy(loom_graph *g, loom_output labels, loom_output predictions,
                                           loom_output weights, const char *name);
/* Mean of (labels - predictions)^2. Default name "mean_squared_error". */
LOOM_API loom_metric loom_metrics_mean_squared_error(loom_graph *g, loom_output labels, loom_output predictions,
                                                     loom_output weights, const char *name);
/* sqrt of the running mean squared error. Default name
 * "root_mean_squared_error". */
LOOM_API loom_metric loom_metrics_root_mean_squared_error(loom_graph *g, loom_output labels, loom_output predictions,
                                                         loom_output weights, const char *name);
/* Mean of |labels - predictions|. Default name "mean_absolute_error". */
LOOM_API loom_metric loom_metrics_mean_absolute_error(loom_graph *g, loom_output labels, loom_output predictions,
                                                      loom_output weights, const char *name);
/* Mean of |labels - predictions| / normalizer (0 where normalizer == 0);
 * normalizer has predictions' shape. Default name "mean_relative_error". */
LOOM_API loom_metric loom_metrics_mean_relative_error(loom_graph *g, loom_output labels, loom_output predictions,
                                                      loom_output normalizer, loom_output weights,
                                                      const char *name);
/* 1 - mean of sum(labels * predictions) along dim (unit-norm inputs).
 * Default name "mean_cosine_distance". */
LOOM_API loom_metric loom_metrics_mean_cosine_distance(loom_graph *g, loom_output labels, loom_output predictions,
                                                       int dim, loom_output weights, const char *name);
/* Mean of (values < threshold). Default name "percentage_below_threshold". */
LOOM_API loom_metric loom_metrics_percentage_below(loom_graph *g, loom_output values, double threshold,
                                                   loom_output weights, const char *name);

/* ---- binary counts: labels and predictions are cast to bool (x != 0);
 * weights are a scalar or have the values' rank. State "<name>/count";
 * value and update are the weighted count. Default names
 * "true_positives", "false_positives", "true_negatives",
 * "false_negatives". ---- */
LOOM_API loom_metric loom_metrics_true_positives(loom_graph *g, loom_output labels, loom_output predictions,
                                                 loom_output weights, const char *name);
LOOM_API loom_metric loom_metrics_false_positives(loom_graph *g, loom_output labels, loom_output predictions,
                                                  loom_output weights, const char *name);
LOOM_API loom_metric loom_metrics_true_negatives(loom_graph *g, loom_output labels, loom_output predictions,
                                                 loom_output weights, const char *name);
LOOM_API loom_metric loom_metrics_false_negatives(loom_graph *g, loom_output labels, loom_output predictions,
                                                  loom_output weights, const char *name);

/* tp / (tp + fp), 0 while tp + fp == 0. State "<name>/true_positives/count",
 * "<name>/false_positives/count". Default name "precision". */
LOOM_API loom_metric loom_metrics_precision(loom_graph *g, loom_output labels, loom_output predictions,
                                            loom_output weights, const char *name);
/* tp / (tp + fn), 0 while tp + fn == 0. State "<name>/true_positives/count",
 * "<name>/false_negatives/count". Default name "recall". */
LOOM_API loom_metric loom_metrics_recall(loom_graph *g, loom_output labels, loom_output predictions,
                                         loom_output weights, const char *name);

/* ---- at thresholds: predictions are float scores in [0, 1] (not checked at
 * run time, unlike TF's assertions), labels cast to bool; a prediction
 * counts as positive at threshold t when prediction > t. The thresholds
 * (nthresholds of them) are stored as float32. Value and update are
 * [nthresholds] vectors. State "<name>/true_positives" etc. of shape
 * [nthresholds]. ---- */
/* Default names "true_positives", "false_positives", "true_negatives",
 * "false_negatives" (state "<name>/<same>"). */
LOOM_API loom_metric loom_metrics_true_positives_at_thresholds(loom_graph *g, loom_output labels,
                                                               loom_output predictions, int nthresholds,
                                                               const double *thresholds, loom_output weights,
                                                               const char *name);
LOOM_API loom_metric loom_metrics_false_positives_at_thresholds(loom_graph *g, loom_output labels,
                                                                loom_output predictions, int nthresholds,
                                                                const double *thresholds, loom_output weights,
                                                                const char *name);
LOOM_API loom_metric loom_metrics_true_negatives_at_thresholds(loom_graph *g, loom_output labels,
                                                               loom_output predictions, int nthresholds,
                                                               const double *thresholds, loom_output weights,
                                                               const char *name);
LOOM_API loom_metric loom_metrics_false_negatives_at_thresholds(loom_graph *g, loom_output labels,
                                                                loom_output predictions, int nthresholds,
                                                                const double *thresholds, loom_output weights,
                                                                const char *name);
/* tp / (1e-7 + tp + fp) per threshold. Default name "precision_at_thresholds". */
LOOM_API loom_metric loom_metrics_precision_at_thresholds(loom_graph *g, loom_output labels, loom_output predictions,
                                                          int nthresholds, const double *thresholds,
                                                          loom_output weights, const char *name);
/* tp / (1e-7 + tp + fn) per threshold. Default name "recall_at_thresholds". */
LOOM_API loom_metric loom_metrics_recall_at_thresholds(loom_graph *g, loom_output labels, loom_output predictions,
                                                       int nthresholds, const double *thresholds,
                                                       loom_output weights, const char *name);

/* ---- AUC ---- */
enum { LOOM_AUC_ROC = 0, LOOM_AUC_PR = 1 };
enum {
  LOOM_AUC_TRAPEZOIDAL = 0,
  LOOM_AUC_CAREFUL_INTERPOLATION = 1, /* PR: TF's interpolate_pr_auc; ROC: same as trapezoidal */
  LOOM_AUC_MINORING = 2,
  LOOM_AUC_MAJORING = 3
};
/* Area under the ROC or PR curve from confusion counts at thresholds, exactly
 * as tf.compat.v1.metrics.auc: thresholds (NULL) = [(i+1)/(n-1) for i in
 * 0..n-3] with n = num_thresholds (>= 2, TF default 200), or the given
 * num_thresholds sorted values; then -1e-7 and 1 + 1e-7 are added at the
 * ends. Rates use epsilon 1e-6 (TF). State "<name>/true_positives",
 * "false_negatives", "true_negatives", "false_positives". Default name "auc". */
LOOM_API loom_metric loom_metrics_auc(loom_graph *g, loom_output labels, loom_output predictions, loom_output weights,
                                      int num_thresholds, const double *thresholds, int curve, int summation_method,
                                      const char *name);

/* TF's sensitivity_at_specificity: over the AUC thresholds of
 * num_thresholds (TF default 200), the sensitivity tp / (tp + fn + 1e-7) at
 * the first threshold whose specificity tn / (tn + fp + 1e-7) is closest to
 * `specificity` (in [0, 1]). State as auc's. Default name
 * "sensitivity_at_specificity". */
LOOM_API loom_metric loom_metrics_sensitivity_at_specificity(loom_graph *g, loom_output labels,
                                                           loom_output predictions, double specificity,
                                                           loom_output weights, int num_thresholds,
                                                           const char *name);
/* TF's specificity_at_sensitivity: the specificity at the last threshold
 * whose sensitivity is closest to `sensitivity`. Default name
 * "specificity_at_sensitivity". */
LOOM_API loom_metric loom_metrics_specificity_at_sensitivity(loom_graph *g, loom_output labels,
                                                           loom_output predictions, double sensitivity,
                                                           loom_output weights, int num_thresholds,
                                                           const char *name);

/* ---- ranking (sparse labels). labels are int32/int64 class ids, [batch]
 * or [batch, num_labels] (a dense set per row; repeated ids count once;
 * every entry is a member, so do not pad). class_id < 0: all classes;
 * otherwise only that class. weights: a scalar or [batch]. State and
 * values are float64, like TF: "<name>/true_positive_at_<k>",
 * "<name>/false_positive_at_<k>" (recall: "false_negative_at_<k>"), with
 * "_class<id>" appended when class_id >= 0; default name
 * "precision_at_<k>" / "recall_at_<k>" (plus "_class<id>"). Value
 * tp / (tp + fp) (recall tp / (tp + fn)) is NaN while the denominator is 0,
 * like TF. ---- */
/* predictions [batch, num_classes] scores; the top k (TopKV2) are predicted. */
LOOM_API loom_metric loom_metrics_precision_at_k(loom_graph *g, loom_output labels, loom_output predictions,
                                                 int64_t k, int64_t class_id, loom_output weights, const char *name);
LOOM_API loom_metric loom_metrics_recall_at_k(loom_graph *g, loom_output labels, loom_output predictions, int64_t k,
                                              int64_t class_id, loom_output weights, const char *name);
/* predictions_idx [batch, k] int32/int64: the predicted class ids. */
LOOM_API loom_metric loom_metrics_precision_at_top_k(loom_graph *g, loom_output labels, loom_output predictions_idx,
                                                     int64_t class_id, loom_output weights, const char *name);
LOOM_API loom_metric loom_metrics_recall_at_top_k(loom_graph *g, loom_output labels, loom_output predictions_idx,
                                                  int64_t class_id, loom_output weights, const char *name);

/* ---- confusion-matrix metrics (labels and predictions are class ids of
 * compatible shapes, flattened) ---- */
/* Mean over the num_classes classes of (weighted correct / weighted count)
 * per class (0 for classes never seen). State "<name>/total",
 * "<name>/count" [num_classes]. As in TF, update returns the per-class
 * accuracies [num_classes] (value is their mean). A label outside
 * [0, num_classes) fails the run. Default name "mean_accuracy". */
LOOM_API loom_metric loom_metrics_mean_per_class_accuracy(loom_graph *g, loom_output labels,
                                                          loom_output predictions, int64_t num_classes,
                                                          loom_output weights, const char *name);
/* Mean intersection-over-union over the classes present in labels or
 * predictions: IoU_c = cm[c][c] / (row_c + col_c - cm[c][c]). State
 * "<name>/total_confusion_matrix" float64 [num_classes, num_classes] (rows
 * labels, columns predictions). As in TF, update returns the confusion
 * matrix (float64). A label or prediction outside [0, num_classes) fails
 * the run. Default name "mean_iou". */
LOOM_API loom_metric loom_metrics_mean_iou(loom_graph *g, loom_output labels, loom_output predictions,
                                           int64_t num_classes, loom_output weights, const char *name);

#ifdef __cplusplus
}
#endif
#endif
