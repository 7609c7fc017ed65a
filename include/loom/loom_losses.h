/* loom_losses.h - losses (tf.compat.v1.losses).
 *
 * Each loss computes a per-element loss from existing ops, weights it and
 * reduces it as TF's compute_weighted_loss does, adds the result to a loss
 * collection and returns it. Common arguments, in TF's order:
 *   weights         {NULL,0} = 1.0; else a scalar or a tensor broadcastable
 *                   to the per-element loss by TF's rule (same rank, each dim
 *                   1 or equal); any numeric dtype (cast to float32).
 *   scope           name scope of the loss's nodes; NULL = the loss's name
 *                   ("mean_squared_error", ...), made unique like TF.
 *   loss_collection NULL = LOOM_LOSSES ("losses"); "" = add to none.
 *   reduction       a loom_reduction; 0 is TF v1's default
 *                   SUM_BY_NONZERO_WEIGHTS.
 * Inputs are cast to float32 (the cross-entropy losses keep the logits'
 * float dtype). Shape errors (labels vs predictions, weights not
 * broadcastable) are INVALID_ARGUMENT graph errors that name the loss's scope,
 * e.g. "mean_squared_error: Shapes [2,3] and [2,4] are incompatible ...".
 * Errors follow the sticky rule of loom_graph.h. */
#ifndef LOOM_LOSSES_H
#define LOOM_LOSSES_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* tf.compat.v1.losses.Reduction. With w the weights broadcast to the
 * per-element loss L:
 *   NONE                    w * L (unreduced)
 *   SUM                     sum(w * L)
 *   MEAN                    sum(w * L) / sum(w)
 *   SUM_OVER_BATCH_SIZE     sum(w * L) / number of elements of L
 *   SUM_BY_NONZERO_WEIGHTS  sum(w * L) / number of nonzero entries of w
 * Divisions are divide_no_nan (0 when the divisor is 0). */
typedef enum loom_reduction {
  LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS = 0, /* TF v1 default */
  LOOM_REDUCTION_NONE = 1,
  LOOM_REDUCTION_SUM = 2,
  LOOM_REDUCTION_MEAN = 3,
  LOOM_REDUCTION_SUM_OVER_BATCH_SIZE = 4,
  LOOM_REDUCTION_SUM_OVER_NONZERO_WEIGHTS = LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS /* TF's alias */
} loom_reduction;

/* Weights and reduces an already computed per-element loss (default scope
 * "weighted_loss"). The result is cast back to losses' dtype. */
LOOM_API loom_output loom_losses_compute_weighted_loss(loom_graph *g, loom_output losses, loom_output weights,
                                                       const char *scope, const char *loss_collection,
                                                       int reduction);

/* (predictions - labels)^2; labels and predictions of compatible shapes. */
LOOM_API loom_output loom_losses_mean_squared_error(loom_graph *g, loom_output labels, loom_output predictions,
                                                    loom_output weights, const char *scope,
                                                    const char *loss_collection, int reduction);
/* |predictions - labels|. */
LOOM_API loom_output loom_losses_absolute_difference(loom_graph *g, loom_output labels, loom_output predictions,
                                                     loom_output weights, const char *scope,
                                                     const char *loss_collection, int reduction);
/* Huber: with e = |predictions - labels|, q = min(e, delta):
 * 0.5 * q^2 + delta * (e - q). TF's default delta is 1.0. */
LOOM_API loom_output loom_losses_huber_loss(loom_graph *g, loom_output labels, loom_output predictions,
                                            loom_output weights, double delta, const char *scope,
                                            const char *loss_collection, int reduction);
/* -labels * log(p + eps) - (1 - labels) * log(1 - p + eps), p = predictions.
 * TF's default epsilon is 1e-7. */
LOOM_API loom_output loom_losses_log_loss(loom_graph *g, loom_output labels, loom_output predictions,
                                          loom_output weights, double epsilon, const char *scope,
                                          const char *loss_collection, int reduction);
/* relu(1 - (2 * labels - 1) * logits): labels 0/1 are mapped to -1/1. */
LOOM_API loom_output loom_losses_hinge_loss(loom_graph *g, loom_output labels, loom_output logits,
                                            loom_output weights, const char *scope, const char *loss_collection,
                                            int reduction);
/* tf.nn.sigmoid_cross_entropy_with_logits per element; label_smoothing s > 0
 * replaces the labels z by z * (1 - s) + 0.5 * s. Default scope
 * "sigmoid_cross_entropy_loss". */
LOOM_API loom_output loom_losses_sigmoid_cross_entropy(loom_graph *g, loom_output multi_class_labels,
                                                       loom_output logits, loom_output weights,
                                                       double label_smoothing, const char *scope,
                                                       const char *loss_collection, int reduction);
/* Softmax cross entropy of logits [batch, classes] against probability rows
 * onehot_labels (same shape); per-example loss [batch], so weights are a
 * scalar or [batch]. label_smoothing s > 0 replaces the labels y by
 * y * (1 - s) + s / classes. Labels get no gradient. Default scope
 * "softmax_cross_entropy_loss". */
LOOM_API loom_output loom_losses_softmax_cross_entropy(loom_graph *g, loom_output onehot_labels, loom_output logits,
                                                       loom_output weights, double label_smoothing,
                                                       const char *scope, const char *loss_collection,
                                                       int reduction);
/* Softmax cross entropy with integer class ids: labels [batch] (or
 * [batch, 1], squeezed), logits [batch, classes]; weights a scalar, [batch]
 * or [batch, 1]. A label outside [0, classes) fails the run. Default scope
 * "sparse_softmax_cross_entropy_loss". */
LOOM_API loom_output loom_losses_sparse_softmax_cross_entropy(loom_graph *g, loom_output labels,
                                                              loom_output logits, loom_output weights,
                                                              const char *scope, const char *loss_collection,
                                                              int reduction);
/* 1 - sum(predictions * labels) along axis (kept as size 1), for unit-norm
 * inputs. Default scope "cosine_distance_loss". */
LOOM_API loom_output loom_losses_cosine_distance(loom_graph *g, loom_output labels, loom_output predictions,
                                                 int axis, loom_output weights, const char *scope,
                                                 const char *loss_collection, int reduction);

/* ---- collections ---- */
/* Adds loss to loss_collection (NULL = "losses"; "" = none). */
LOOM_API void loom_losses_add_loss(loom_graph *g, loom_output loss, const char *loss_collection);
/* The members of loss_collection (NULL = "losses") whose node name starts
 * with scope (NULL or "" = all), in insertion order: up to cap of them are
 * copied into out (may be NULL when cap is 0). Returns how many match. */
LOOM_API int loom_losses_get_losses(loom_graph *g, const char *scope, const char *loss_collection, loom_output *out,
                                    int cap);
/* Same for the "regularization_losses" collection. */
LOOM_API int loom_losses_get_regularization_losses(loom_graph *g, const char *scope, loom_output *out, int cap);
/* The sum of the regularization losses under scope (name NULL =
 * "total_regularization_loss"), or a float32 constant 0 when there are none. */
LOOM_API loom_output loom_losses_get_regularization_loss(loom_graph *g, const char *scope, const char *name);
/* The sum of the "losses" collection plus, when add_regularization_losses
 * != 0, the regularization losses (both filtered by scope; name NULL =
 * "total_loss"). No losses at all is an INVALID_ARGUMENT graph error. */
LOOM_API loom_output loom_losses_get_total_loss(loom_graph *g, int add_regularization_losses, const char *scope,
                                                const char *name);

#ifdef __cplusplus
}
#endif
#endif
