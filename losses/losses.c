/* losses/losses.c - tf.compat.v1.losses built from existing ops: the
 * per-element losses, compute_weighted_loss with TF's reductions, and the
 * loss collections (get_losses, get_regularization_loss, get_total_loss). */
#include "base/base.h"
#include "loom/loom.h"
#include "loom/loom_losses.h"
#include "ops/build_util.h"

static int valid_reduction(int r) {
  return r == LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS || r == LOOM_REDUCTION_NONE || r == LOOM_REDUCTION_SUM ||
         r == LOOM_REDUCTION_MEAN || r == LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
}

/* compute_weighted_loss inside the loss's (already entered) name scope. */
static loom_output weighted_loss(loom_graph *g, loom_output losses, loom_output weights, const char *loss_collection,
                                 int reduction) {
  const char *where = bu_where(g, "weighted_loss");
  if (!valid_reduction(reduction)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid reduction %d", where, reduction);
    return losses;
  }
  loom_dtype in_dt = loom_output_dtype(losses);
  loom_output l = bu_cast(g, losses, LOOM_F32);
  int has_w = bu_valid(weights);
  loom_output w = {NULL, 0};
  if (has_w) {
    w = bu_cast(g, weights, LOOM_F32);
    if (!bu_check_broadcastable(g, w, l, where)) return losses;
  }
  loom_output wl = has_w ? loom_mul(g, l, w, NULL) : l;
  loom_output loss;
  if (reduction == LOOM_REDUCTION_NONE) {
    loss = wl;
  } else {
    loom_output sum = loom_reduce_sum(g, wl, -1, NULL, 0, reduction == LOOM_REDUCTION_SUM ? "Sum" : NULL);
    if (reduction == LOOM_REDUCTION_SUM) {
      loss = sum;
    } else {
      loom_output denom;
      if (reduction == LOOM_REDUCTION_MEAN) {
        denom = has_w ? loom_reduce_sum(g, loom_mul(g, loom_ones_like(g, l, NULL), w, NULL), -1, NULL, 0, NULL)
                      : bu_numel(g, l, LOOM_F32, NULL);
      } else if (reduction == LOOM_REDUCTION_SUM_OVER_BATCH_SIZE || !has_w) {
        denom = bu_numel(g, l, LOOM_F32, "num_elements");
      } else { /* SUM_BY_NONZERO_WEIGHTS: _num_present */
        loom_output zero = bu_scalar(g, LOOM_F32, 0.0, NULL), one = bu_scalar(g, LOOM_F32, 1.0, NULL);
        loom_output present = loom_select(g, loom_equal(g, w, zero, NULL), zero, one, NULL);
        present = bu_broadcast_weights(g, present, l, where);
        denom = loom_reduce_sum(g, present, -1, NULL, 0, "num_present");
      }
      loss = bu_div_no_nan(g, sum, denom, "value");
    }
  }
  loss = bu_cast(g, loss, in_dt);
  loom_losses_add_loss(g, loss, loss_collection);
  return loss;
}

loom_output loom_losses_compute_weighted_loss(loom_graph *g, loom_output losses, loom_output weights,
                                              const char *scope, const char *loss_collection, int reduction) {
  if (!g) return (loom_output){NULL, 0};
  loom_graph_push_scope(g, scope && *scope ? scope : "weighted_loss");
  loom_output r = weighted_loss(g, losses, weights, loss_collection, reduction);
  loom_graph_pop_scope(g);
  return r;
}

/* Enters the loss's scope and casts labels/predictions (dt: LOOM_F32, or
 * LOOM_DTYPE_INVALID = labels cast to predictions' dtype) and checks that
 * their shapes are compatible. Returns 0 on a shape error. */
static int enter(loom_graph *g, const char *scope, const char *def, loom_output *labels, loom_output *predictions,
                 loom_dtype dt, const char *what) {
  loom_graph_push_scope(g, scope && *scope ? scope : def);
  if (dt == LOOM_DTYPE_INVALID) {
    loom_dtype pd = loom_output_dtype(*predictions);
    if (pd != LOOM_F64) pd = LOOM_F32;
    *predictions = bu_cast(g, *predictions, pd);
    *labels = bu_cast(g, *labels, pd);
  } else {
    *predictions = bu_cast(g, *predictions, dt);
    *labels = bu_cast(g, *labels, dt);
  }
  return bu_check_compatible(g, *predictions, *labels, what, bu_where(g, def));
}

static loom_output leave(loom_graph *g, loom_output loss) {
  loom_graph_pop_scope(g);
  return loss;
}

loom_output loom_losses_mean_squared_error(loom_graph *g, loom_output labels, loom_output predictions,
                                           loom_output weights, const char *scope, const char *loss_collection,
                                           int reduction) {
  if (!g) return (loom_output){NULL, 0};
  if (!enter(g, scope, "mean_squared_error", &labels, &predictions, LOOM_F32, "predictions vs labels"))
    return leave(g, predictions);
  loom_output l = loom_square(g, loom_sub(g, predictions, labels, NULL), "SquaredDifference");
  return leave(g, weighted_loss(g, l, weights, loss_collection, reduction));
}

loom_output loom_losses_absolute_difference(loom_graph *g, loom_output labels, loom_output predictions,
                                            loom_output weights, const char *scope, const char *loss_collection,
                                            int reduction) {
  if (!g) return (loom_output){NULL, 0};
  if (!enter(g, scope, "absolute_difference", &labels, &predictions, LOOM_F32, "predictions vs labels"))
    return leave(g, predictions);
  loom_output l = loom_abs(g, loom_sub(g, predictions, labels, NULL), NULL);
  return leave(g, weighted_loss(g, l, weights, loss_collection, reduction));
}

loom_output loom_losses_huber_loss(loom_graph *g, loom_output labels, loom_output predictions, loom_output weights,
                                   double delta, const char *scope, const char *loss_collection, int reduction) {
  if (!g) return (loom_output){NULL, 0};
  if (!enter(g, scope, "huber_loss", &labels, &predictions, LOOM_F32, "predictions vs labels"))
    return leave(g, predictions);
  loom_output err = loom_abs(g, loom_sub(g, predictions, labels, NULL), NULL);
  loom_output d = bu_scalar(g, LOOM_F32, delta, NULL);
  loom_output quad = loom_minimum(g, err, d, NULL);
  loom_output lin = loom_sub(g, err, quad, NULL);
  loom_output half = bu_scalar(g, LOOM_F32, 0.5, NULL);
  loom_output l = loom_add(g, loom_mul(g, half, loom_mul(g, quad, quad, NULL), NULL), loom_mul(g, d, lin, NULL), NULL);
  return leave(g, weighted_loss(g, l, weights, loss_collection, reduction));
}

loom_output loom_losses_log_loss(loom_graph *g, loom_output labels, loom_output predictions, loom_output weights,
                                 double epsilon, const char *scope, const char *loss_collection, int reduction) {
  if (!g) return (loom_output){NULL, 0};
  if (!enter(g, scope, "log_loss", &labels, &predictions, LOOM_F32, "predictions vs labels"))
    return leave(g, predictions);
  loom_output eps = bu_scalar(g, LOOM_F32, epsilon, NULL);
  loom_output one = bu_scalar(g, LOOM_F32, 1.0, NULL);
  loom_output a = loom_mul(g, labels, loom_log(g, loom_add(g, predictions, eps, NULL), NULL), NULL);
  loom_output b = loom_mul(g, loom_sub(g, one, labels, NULL),
                           loom_log(g, loom_add(g, loom_sub(g, one, predictions, NULL), eps, NULL), NULL), NULL);
  loom_output l = loom_sub(g, loom_neg(g, a, NULL), b, NULL);
  return leave(g, weighted_loss(g, l, weights, loss_collection, reduction));
}

loom_output loom_losses_hinge_loss(loom_graph *g, loom_output labels, loom_output logits, loom_output weights,
                                   const char *scope, const char *loss_collection, int reduction) {
  if (!g) return (loom_output){NULL, 0};
  if (!enter(g, scope, "hinge_loss", &labels, &logits, LOOM_F32, "logits vs labels")) return leave(g, logits);
  loom_output one = bu_scalar(g, LOOM_F32, 1.0, NULL), two = bu_scalar(g, LOOM_F32, 2.0, NULL);
  loom_output sl = loom_sub(g, loom_mul(g, two, labels, NULL), one, NULL);
  loom_output l = loom_relu(g, loom_sub(g, one, loom_mul(g, sl, logits, NULL), NULL), NULL);
  return leave(g, weighted_loss(g, l, weights, loss_collection, reduction));
}

loom_output loom_losses_sigmoid_cross_entropy(loom_graph *g, loom_output multi_class_labels, loom_output logits,
                                              loom_output weights, double label_smoothing, const char *scope,
                                              const char *loss_collection, int reduction) {
  if (!g) return (loom_output){NULL, 0};
  loom_output labels = multi_class_labels;
  if (!enter(g, scope, "sigmoid_cross_entropy_loss", &labels, &logits, LOOM_DTYPE_INVALID, "logits vs labels"))
    return leave(g, logits);
  loom_dtype dt = loom_output_dtype(logits);
  if (label_smoothing > 0)
    labels = loom_add(g, loom_mul(g, labels, bu_scalar(g, dt, 1.0 - label_smoothing, NULL), NULL),
                      bu_scalar(g, dt, 0.5 * label_smoothing, NULL), NULL);
  loom_output l = loom_sigmoid_cross_entropy_with_logits(g, labels, logits, "xentropy");
  return leave(g, weighted_loss(g, l, weights, loss_collection, reduction));
}

loom_output loom_losses_softmax_cross_entropy(loom_graph *g, loom_output onehot_labels, loom_output logits,
                                              loom_output weights, double label_smoothing, const char *scope,
                                              const char *loss_collection, int reduction) {
  if (!g) return (loom_output){NULL, 0};
  loom_output labels = onehot_labels;
  if (!enter(g, scope, "softmax_cross_entropy_loss", &labels, &logits, LOOM_DTYPE_INVALID, "logits vs labels"))
    return leave(g, logits);
  loom_dtype dt = loom_output_dtype(logits);
  if (loom_output_ndim(logits) != 2) {
    char s[96];
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: logits must be [batch, num_classes], got %s",
                         bu_where(g, "softmax_cross_entropy_loss"), bu_shape_str(s, sizeof s, logits));
    return leave(g, logits);
  }
  if (label_smoothing > 0) {
    int64_t c = bu_last_dim(labels);
    loom_output ncls;
    if (c >= 0) {
      ncls = bu_scalar(g, dt, (double)c, NULL);
    } else {
      int64_t ax = -1;
      ncls = loom_reduce_sum(g, loom_ones_like(g, labels, NULL), 1, &ax, 1, NULL);
    }
    loom_output neg = loom_div(g, bu_scalar(g, dt, label_smoothing, NULL), ncls, NULL);
    labels = loom_add(g, loom_mul(g, labels, bu_scalar(g, dt, 1.0 - label_smoothing, NULL), NULL), neg, NULL);
  }
  labels = loom_stop_gradient(g, labels, "labels_stop_gradient");
  loom_output l = loom_softmax_cross_entropy_with_logits(g, logits, labels, NULL, NULL, "xentropy");
  return leave(g, weighted_loss(g, l, weights, loss_collection, reduction));
}

loom_output loom_losses_sparse_softmax_cross_entropy(loom_graph *g, loom_output labels, loom_output logits,
                                                     loom_output weights, const char *scope,
                                                     const char *loss_collection, int reduction) {
  if (!g) return (loom_output){NULL, 0};
  loom_graph_push_scope(g, scope && *scope ? scope : "sparse_softmax_cross_entropy_loss");
  const char *where = bu_where(g, "sparse_softmax_cross_entropy_loss");
  loom_dtype ld = loom_output_dtype(labels);
  if (ld != LOOM_I32 && ld != LOOM_I64) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: labels must be int32 or int64 class ids, got %s", where,
                         loom_dtype_name(ld));
    return leave(g, logits);
  }
  bu_remove_squeezable(g, &labels, &logits, 1);
  if (bu_valid(weights) && loom_output_ndim(weights) - loom_output_ndim(labels) == 1) {
    int64_t ax = -1;
    weights = loom_squeeze(g, weights, 1, &ax, NULL);
  }
  if (loom_output_ndim(logits) != 2 || loom_output_ndim(labels) != 1) {
    char s1[96], s2[96];
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: expected logits [batch, num_classes] and labels [batch], got logits %s and labels %s",
                         where, bu_shape_str(s1, sizeof s1, logits), bu_shape_str(s2, sizeof s2, labels));
    return leave(g, logits);
  }
  int64_t dl[LOOM_MAX_DIMS], dg[LOOM_MAX_DIMS];
  loom_output_dims(labels, dl);
  loom_output_dims(logits, dg);
  if (dl[0] >= 0 && dg[0] >= 0 && dl[0] != dg[0]) {
    char s1[96], s2[96];
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: labels %s and logits %s have different batch sizes", where,
                         bu_shape_str(s1, sizeof s1, labels), bu_shape_str(s2, sizeof s2, logits));
    return leave(g, logits);
  }
  loom_output l = loom_sparse_softmax_cross_entropy_with_logits(g, logits, labels, NULL, NULL, "xentropy");
  return leave(g, weighted_loss(g, l, weights, loss_collection, reduction));
}

loom_output loom_losses_cosine_distance(loom_graph *g, loom_output labels, loom_output predictions, int axis,
                                        loom_output weights, const char *scope, const char *loss_collection,
                                        int reduction) {
  if (!g) return (loom_output){NULL, 0};
  if (!enter(g, scope, "cosine_distance_loss", &labels, &predictions, LOOM_F32, "predictions vs labels"))
    return leave(g, predictions);
  int r = loom_output_ndim(predictions);
  if (axis < -r || axis >= r) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: axis %d is out of range for rank %d",
                         bu_where(g, "cosine_distance_loss"), axis, r);
    return leave(g, predictions);
  }
  int64_t ax = axis;
  loom_output dot = loom_reduce_sum(g, loom_mul(g, predictions, labels, NULL), 1, &ax, 1, NULL);
  loom_output l = loom_sub(g, bu_scalar(g, LOOM_F32, 1.0, NULL), dot, NULL);
  return leave(g, weighted_loss(g, l, weights, loss_collection, reduction));
}

/* ---- collections ---- */
void loom_losses_add_loss(loom_graph *g, loom_output loss, const char *loss_collection) {
  if (!g || !bu_valid(loss)) return;
  if (loss_collection && !*loss_collection) return;
  loom_add_to_collection(g, loss_collection ? loss_collection : LOOM_LOSSES, loss);
}

static int filtered(loom_graph *g, const char *coll, const char *scope, loom_output *out, int cap) {
  int n = 0, k = 0;
  const loom_output *all = loom_get_collection(g, coll, &n);
  size_t sl = scope ? strlen(scope) : 0;
  for (int i = 0; i < n; i++) {
    if (sl && strncmp(loom_node_name(all[i].node), scope, sl) != 0) continue;
    if (out && k < cap) out[k] = all[i];
    k++;
  }
  return k;
}

int loom_losses_get_losses(loom_graph *g, const char *scope, const char *loss_collection, loom_output *out, int cap) {
  if (!g) return 0;
  return filtered(g, loss_collection ? loss_collection : LOOM_LOSSES, scope, out, cap);
}

int loom_losses_get_regularization_losses(loom_graph *g, const char *scope, loom_output *out, int cap) {
  if (!g) return 0;
  return filtered(g, LOOM_REGULARIZATION_LOSSES, scope, out, cap);
}

/* Sum of the collected outputs (n >= 1), allocating the list. */
static loom_output sum_list(loom_graph *g, int nl, int nr, const char *scope, int add_reg, const char *name) {
  int n = nl + nr;
  loom_output *xs = loom__malloc(sizeof *xs * (size_t)n);
  if (!xs) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", name);
    return bu_scalar(g, LOOM_F32, 0.0, NULL);
  }
  int k = 0;
  if (nl) k += loom_losses_get_losses(g, scope, NULL, xs, nl);
  if (add_reg && nr) loom_losses_get_regularization_losses(g, scope, xs + k, nr);
  loom_output r = bu_add_n(g, n, xs, name);
  loom__free(xs);
  return r;
}

loom_output loom_losses_get_regularization_loss(loom_graph *g, const char *scope, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  const char *nm = name && *name ? name : "total_regularization_loss";
  int nr = loom_losses_get_regularization_losses(g, scope, NULL, 0);
  if (!nr) return bu_scalar(g, LOOM_F32, 0.0, "Const");
  return sum_list(g, 0, nr, scope, 1, nm);
}

loom_output loom_losses_get_total_loss(loom_graph *g, int add_regularization_losses, const char *scope,
                                       const char *name) {
  if (!g) return (loom_output){NULL, 0};
  const char *nm = name && *name ? name : "total_loss";
  int nl = loom_losses_get_losses(g, scope, NULL, NULL, 0);
  int nr = add_regularization_losses ? loom_losses_get_regularization_losses(g, scope, NULL, 0) : 0;
  if (nl + nr == 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: no losses to add (the \"losses\"%s collection%s empty under scope '%s')", nm,
                         add_regularization_losses ? " and \"regularization_losses\"" : "",
                         add_regularization_losses ? "s are" : " is", scope ? scope : "");
    return bu_scalar(g, LOOM_F32, 0.0, NULL);
  }
  return sum_list(g, nl, nr, scope, add_regularization_losses, nm);
}
