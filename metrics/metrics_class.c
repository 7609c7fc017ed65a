/* metrics/metrics_class.c - class-id metrics of tf.compat.v1.metrics:
 * precision/recall at k over sparse label sets (set sizes computed densely
 * by broadcasting comparisons), mean_per_class_accuracy (scatter-add into
 * per-class totals) and mean_iou (confusion matrix by unsorted_segment_sum). */
#include "base/base.h"
#include "metrics/metric_impl.h"

static int is_int(loom_dtype d) { return d == LOOM_I32 || d == LOOM_I64; }

/* [L, L] float64 constant m[j][j'] = (j' < j). */
static loom_output lower_mask(loom_graph *g, int64_t L) {
  double *m = loom__calloc((size_t)(L * L), sizeof *m);
  if (!m) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "at_k: out of memory");
    return bu_scalar(g, LOOM_F64, 0.0, NULL);
  }
  for (int64_t j = 0; j < L; j++)
    for (int64_t k = 0; k < j; k++) m[j * L + k] = 1.0;
  int64_t d[2] = {L, L};
  loom_output o = loom_const_data(g, LOOM_F64, 2, d, m, NULL);
  loom__free(m);
  return o;
}

/* 1.0 where x[..., j] is the first occurrence of its value in its row
 * (float64, x's shape); L = last dim of x. */
static loom_output first_occurrence(loom_graph *g, loom_output x, int64_t L) {
  if (L == 1) return loom_ones_like(g, bu_cast(g, x, LOOM_F64), NULL);
  loom_output eq = loom_cast(g, loom_equal(g, loom_expand_dims(g, x, -1, NULL), loom_expand_dims(g, x, -2, NULL), NULL),
                             LOOM_F64, NULL); /* [..., L, L] */
  int64_t ax = -1;
  loom_output dup = loom_reduce_sum(g, loom_mul(g, eq, lower_mask(g, L), NULL), 1, &ax, 0, NULL);
  return loom_cast(g, loom_equal(g, dup, bu_scalar(g, LOOM_F64, 0.0, NULL), NULL), LOOM_F64, NULL);
}

/* The shared body of precision/recall at top k in an entered scope. */
static loom_metric at_top_k(lm_ctx *c, int recall, loom_output labels, loom_output idx, int64_t k, int64_t class_id,
                            loom_output weights) {
  loom_graph *g = c->g;
  if (!is_int(loom_output_dtype(labels)) || !is_int(loom_output_dtype(idx))) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: labels and predicted ids must be int32 or int64, got %s and %s",
                         c->where, loom_dtype_name(loom_output_dtype(labels)),
                         loom_dtype_name(loom_output_dtype(idx)));
    return loom__metric_fail(c, idx);
  }
  int pr = loom_output_ndim(idx), lr = loom_output_ndim(labels);
  if (pr < 1 || (lr != pr && lr != pr - 1)) {
    char s1[96], s2[96];
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: labels %s must have the rank of the predictions %s or one less (rank %d)", c->where,
                         bu_shape_str(s1, sizeof s1, labels), bu_shape_str(s2, sizeof s2, idx), pr);
    return loom__metric_fail(c, idx);
  }
  if (lr == pr - 1) labels = loom_expand_dims(g, labels, -1, NULL);
  labels = bu_cast(g, labels, LOOM_I64);
  idx = bu_cast(g, idx, LOOM_I64);
  int64_t dl[LOOM_MAX_DIMS], dp[LOOM_MAX_DIMS];
  loom_output_dims(labels, dl);
  loom_output_dims(idx, dp);
  int64_t L = dl[pr - 1];
  int ok = L >= 0;
  for (int i = 0; ok && i < pr - 1; i++) ok = dl[i] < 0 || dp[i] < 0 || dl[i] == dp[i];
  if (!ok) {
    char s1[96], s2[96];
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: labels %s and predicted ids %s must share the leading dims and labels need a known "
                         "last dim",
                         c->where, bu_shape_str(s1, sizeof s1, labels), bu_shape_str(s2, sizeof s2, idx));
    return loom__metric_fail(c, idx);
  }
  int64_t ax = -1;
  loom_output zero = bu_scalar(g, LOOM_F64, 0.0, NULL);
  loom_output tp, other;
  if (class_id >= 0) {
    loom_output cid = bu_scalar(g, LOOM_I64, (double)class_id, NULL);
    loom_output inl = loom_greater(
        g, loom_reduce_sum(g, loom_cast(g, loom_equal(g, labels, cid, NULL), LOOM_F64, NULL), 1, &ax, 0, NULL), zero,
        NULL);
    loom_output inp = loom_greater(
        g, loom_reduce_sum(g, loom_cast(g, loom_equal(g, idx, cid, NULL), LOOM_F64, NULL), 1, &ax, 0, NULL), zero,
        NULL);
    tp = loom_cast(g, loom_logical_and(g, inl, inp, NULL), LOOM_F64, NULL);
    other = recall ? loom_cast(g, loom_logical_and(g, inl, loom_logical_not(g, inp, NULL), NULL), LOOM_F64, NULL)
                   : loom_cast(g, loom_logical_and(g, inp, loom_logical_not(g, inl, NULL), NULL), LOOM_F64, NULL);
  } else {
    int64_t ax2 = -2;
    loom_output match = loom_cast(
        g, loom_equal(g, loom_expand_dims(g, labels, -1, NULL), loom_expand_dims(g, idx, -2, NULL), NULL), LOOM_F64,
        NULL); /* [..., L, K] */
    loom_output one = bu_scalar(g, LOOM_F64, 1.0, NULL);
    /* predicted ids (distinct) found among the labels */
    loom_output inlab =
        loom_cast(g, loom_greater(g, loom_reduce_sum(g, match, 1, &ax2, 0, NULL), zero, NULL), LOOM_F64, NULL);
    loom_output up = first_occurrence(g, idx, k);
    tp = loom_reduce_sum(g, loom_mul(g, up, inlab, NULL), 1, &ax, 0, NULL);
    if (recall) {
      loom_output inpred =
          loom_cast(g, loom_greater(g, loom_reduce_sum(g, match, 1, &ax, 0, NULL), zero, NULL), LOOM_F64, NULL);
      loom_output ul = first_occurrence(g, labels, L);
      other = loom_reduce_sum(g, loom_mul(g, ul, loom_sub(g, one, inpred, NULL), NULL), 1, &ax, 0, NULL);
    } else {
      other = loom_reduce_sum(g, loom_mul(g, up, loom_sub(g, one, inlab, NULL), NULL), 1, &ax, 0, NULL);
    }
  }
  if (bu_valid(weights)) {
    loom_output w = bu_cast(g, weights, LOOM_F64);
    if (!bu_check_broadcastable(g, w, tp, c->where)) return loom__metric_fail(c, idx);
    tp = loom_mul(g, tp, w, NULL);
    other = loom_mul(g, other, w, NULL);
  }
  char tpn[96], on[96], sfx[48] = "";
  if (class_id >= 0) snprintf(sfx, sizeof sfx, "_class%lld", (long long)class_id);
  snprintf(tpn, sizeof tpn, "true_positive_at_%lld%s", (long long)k, sfx);
  snprintf(on, sizeof on, "%s_at_%lld%s", recall ? "false_negative" : "false_positive", (long long)k, sfx);
  loom_variable *vtp = loom__metric_var(c, tpn, LOOM_F64, 0, NULL);
  loom_variable *vo = loom__metric_var(c, on, LOOM_F64, 0, NULL);
  loom_output utp = loom__metric_assign_add(c, vtp, loom_reduce_sum(g, tp, -1, NULL, 0, NULL));
  loom_output uo = loom__metric_assign_add(c, vo, loom_reduce_sum(g, other, -1, NULL, 0, NULL));
  loom_output vt = loom_variable_output(vtp);
  loom_output v = loom_div(g, vt, loom_add(g, vt, loom_variable_output(vo), NULL), "value");
  loom__metric_update_begin(c);
  loom_output u = loom_div(g, utp, loom_add(g, utp, uo, NULL), "update");
  return loom__metric_end(c, v, u);
}

static void at_k_name(char *buf, size_t cap, const char *what, int64_t k, int64_t class_id) {
  if (class_id >= 0)
    snprintf(buf, cap, "%s_at_%lld_class%lld", what, (long long)k, (long long)class_id);
  else
    snprintf(buf, cap, "%s_at_%lld", what, (long long)k);
}

static loom_metric at_k(loom_graph *g, int recall, loom_output labels, loom_output predictions, int64_t k,
                        int64_t class_id, loom_output weights, const char *name) {
  char def[128];
  at_k_name(def, sizeof def, recall ? "recall" : "precision", k, class_id);
  lm_ctx c;
  loom__metric_begin(&c, g, name, def);
  if (k < 1) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: k must be >= 1, got %lld", c.where, (long long)k);
    return loom__metric_fail(&c, predictions);
  }
  loom_output vals, idx;
  loom_top_k(g, predictions, k, &vals, &idx, NULL);
  return at_top_k(&c, recall, labels, idx, k, class_id, weights);
}

static loom_metric at_top_k_pub(loom_graph *g, int recall, loom_output labels, loom_output idx, int64_t class_id,
                                loom_output weights, const char *name) {
  int64_t k = bu_last_dim(idx);
  char def[128];
  at_k_name(def, sizeof def, recall ? "recall" : "precision", k, class_id);
  lm_ctx c;
  loom__metric_begin(&c, g, name, def);
  if (k < 1) {
    char s[96];
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: predictions_idx %s needs a known last dim k >= 1", c.where,
                         bu_shape_str(s, sizeof s, idx));
    return loom__metric_fail(&c, idx);
  }
  return at_top_k(&c, recall, labels, idx, k, class_id, weights);
}

loom_metric loom_metrics_precision_at_k(loom_graph *g, loom_output labels, loom_output predictions, int64_t k,
                                        int64_t class_id, loom_output weights, const char *name) {
  return at_k(g, 0, labels, predictions, k, class_id, weights, name);
}
loom_metric loom_metrics_recall_at_k(loom_graph *g, loom_output labels, loom_output predictions, int64_t k,
                                     int64_t class_id, loom_output weights, const char *name) {
  return at_k(g, 1, labels, predictions, k, class_id, weights, name);
}
loom_metric loom_metrics_precision_at_top_k(loom_graph *g, loom_output labels, loom_output predictions_idx,
                                            int64_t class_id, loom_output weights, const char *name) {
  return at_top_k_pub(g, 0, labels, predictions_idx, class_id, weights, name);
}
loom_metric loom_metrics_recall_at_top_k(loom_graph *g, loom_output labels, loom_output predictions_idx,
                                         int64_t class_id, loom_output weights, const char *name) {
  return at_top_k_pub(g, 1, labels, predictions_idx, class_id, weights, name);
}

/* ---- confusion-matrix metrics ---- */
static loom_output flat(loom_graph *g, loom_output x) {
  if (loom_output_ndim(x) == 1) return x;
  int64_t d = -1;
  return loom_reshape(g, x, 1, &d, NULL);
}

static int check_classes(lm_ctx *c, int64_t num_classes) {
  if (num_classes >= 1) return 1;
  loom_graph_set_error(c->g, LOOM_INVALID_ARGUMENT, "%s: num_classes must be >= 1, got %lld", c->where,
                       (long long)num_classes);
  return 0;
}

loom_metric loom_metrics_mean_per_class_accuracy(loom_graph *g, loom_output labels, loom_output predictions,
                                                 int64_t num_classes, loom_output weights, const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, "mean_accuracy");
  if (!check_classes(&c, num_classes)) return loom__metric_fail(&c, predictions);
  labels = flat(g, bu_cast(g, labels, LOOM_I64));
  predictions = flat(g, predictions);
  if (!bu_check_compatible(g, predictions, labels, "predictions vs labels", c.where))
    return loom__metric_fail(&c, predictions);
  int64_t dims[1] = {num_classes};
  loom_variable *total = loom__metric_var(&c, "total", LOOM_F32, 1, dims);
  loom_variable *count = loom__metric_var(&c, "count", LOOM_F32, 1, dims);
  loom_output lf = bu_cast(g, labels, LOOM_F32);
  loom_output ones = loom_ones_like(g, lf, NULL);
  predictions = bu_cast(g, predictions, LOOM_I64);
  loom_output correct = loom_cast(g, loom_equal(g, predictions, labels, NULL), LOOM_F32, NULL);
  if (bu_valid(weights)) {
    loom_output w = bu_cast(g, loom_output_ndim(weights) > 1 ? flat(g, weights) : weights, LOOM_F32);
    correct = loom_mul(g, correct, w, NULL);
    ones = loom_mul(g, ones, w, NULL);
  }
  loom_output ut = loom__metric_scatter_add(&c, total, labels, ones);
  loom_output uc = loom__metric_scatter_add(&c, count, labels, correct);
  loom_output zero = bu_scalar(g, LOOM_F32, 0.0, NULL);
  loom_output per = bu_div_no_nan(g, loom_variable_output(count), loom_maximum(g, loom_variable_output(total), zero, NULL),
                                  NULL);
  loom_output v = loom_reduce_mean(g, per, -1, NULL, 0, "mean_accuracy");
  loom__metric_update_begin(&c);
  loom_output u = bu_div_no_nan(g, uc, loom_maximum(g, ut, zero, NULL), "update_op");
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_mean_iou(loom_graph *g, loom_output labels, loom_output predictions, int64_t num_classes,
                                  loom_output weights, const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, "mean_iou");
  if (!check_classes(&c, num_classes)) return loom__metric_fail(&c, predictions);
  if (!bu_check_compatible(g, predictions, labels, "predictions vs labels", c.where))
    return loom__metric_fail(&c, predictions);
  int64_t C = num_classes;
  int64_t dims[2] = {C, C};
  loom_variable *cm = loom__metric_var(&c, "total_confusion_matrix", LOOM_F64, 2, dims);
  loom_output p = flat(g, bu_cast(g, predictions, LOOM_I64));
  loom_output l = flat(g, bu_cast(g, labels, LOOM_I64));
  loom_output zero = bu_scalar(g, LOOM_I64, 0.0, NULL), nc = bu_scalar(g, LOOM_I64, (double)C, NULL);
  loom_output valid = loom_logical_and(
      g, loom_logical_and(g, loom_greater_equal(g, l, zero, NULL), loom_less(g, l, nc, NULL), NULL),
      loom_logical_and(g, loom_greater_equal(g, p, zero, NULL), loom_less(g, p, nc, NULL), NULL), NULL);
  loom_output ids = loom_add(g, loom_mul(g, l, nc, NULL), p, NULL);
  ids = loom_select(g, valid, ids, bu_scalar(g, LOOM_I64, -1.0, NULL), "confusion_matrix_ids");
  loom_output data = loom_ones_like(g, bu_cast(g, l, LOOM_F64), NULL);
  if (bu_valid(weights)) {
    loom_output w = bu_cast(g, loom_output_ndim(weights) > 1 ? flat(g, weights) : weights, LOOM_F64);
    data = loom_mul(g, data, w, NULL);
  }
  loom_output cur = loom_unsorted_segment_sum(g, data, ids, C * C, "confusion_matrix");
  loom_output upd = loom__metric_assign_add(&c, cm, loom_reshape(g, cur, 2, dims, NULL));

  /* value: mean IoU over classes with a nonzero denominator (float32, as TF) */
  loom_output m = bu_cast(g, loom_variable_output(cm), LOOM_F32);
  int64_t a0 = 0, a1 = 1, cc = C * C;
  loom_output rows = loom_reduce_sum(g, m, 1, &a0, 0, "sum_over_row");
  loom_output cols = loom_reduce_sum(g, m, 1, &a1, 0, "sum_over_col");
  int64_t *di = loom__malloc(sizeof *di * (size_t)C);
  if (!di) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", c.where);
    return loom__metric_fail(&c, predictions);
  }
  for (int64_t i = 0; i < C; i++) di[i] = i * (C + 1);
  loom_output diag_ix = loom_const_data(g, LOOM_I64, 1, &C, di, NULL);
  loom__free(di);
  loom_output diag = loom_gather(g, loom_reshape(g, m, 1, &cc, NULL), diag_ix, 0, "cm_diag");
  loom_output den = loom_sub(g, loom_add(g, rows, cols, NULL), diag, NULL);
  loom_output fz = bu_scalar(g, LOOM_F32, 0.0, NULL), fo = bu_scalar(g, LOOM_F32, 1.0, NULL);
  loom_output nvalid =
      loom_reduce_sum(g, loom_cast(g, loom_not_equal(g, den, fz, NULL), LOOM_F32, NULL), -1, NULL, 0, NULL);
  den = loom_select(g, loom_greater(g, den, fz, NULL), den, fo, NULL);
  loom_output iou = loom_div(g, diag, den, NULL);
  loom_output mean = bu_div_no_nan(g, loom_reduce_sum(g, iou, -1, NULL, 0, NULL), nvalid, NULL);
  loom_output v = loom_select(g, loom_greater(g, nvalid, fz, NULL), mean, fz, "value");
  return loom__metric_end(&c, v, upd);
}
