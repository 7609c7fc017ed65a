/* metrics/metrics_curve.c - metrics on confusion counts at thresholds
 * (tf.compat.v1.metrics *_at_thresholds, precision/recall_at_thresholds,
 * auc), after TF's _confusion_matrix_at_thresholds: a prediction is
 * positive at threshold t when prediction > t; the counts per threshold are
 * reduced from a [thresholds, batch] comparison built by broadcasting. */
#include <stdlib.h>
#include "base/base.h"
#include "metrics/metric_impl.h"

enum { I_TP = 1, I_FN = 2, I_TN = 4, I_FP = 8 };

typedef struct cm_out {
  loom_output tp, fn, tn, fp;     /* the variables */
  loom_output utp, ufn, utn, ufp; /* their update (assign) outputs */
} cm_out;

/* Builds the variables and updates named in `includes`, in TF's order (tp,
 * fn, tn, fp). thr holds n float thresholds. Returns 0 on a graph error. */
static int confusion_at_thresholds(lm_ctx *c, loom_output labels, loom_output predictions, int n, const float *thr,
                                   loom_output weights, int includes, cm_out *o) {
  loom_graph *g = c->g;
  memset(o, 0, sizeof *o);
  predictions = bu_cast(g, predictions, LOOM_F32);
  labels = bu_cast(g, labels, LOOM_BOOL);
  if (!loom__metric_squeeze(c, &predictions, &labels, &weights)) return 0;
  int64_t row[2] = {1, -1}, col[2] = {n, 1};
  loom_output pred = loom_reshape(g, predictions, 2, row, NULL);        /* [1, N] */
  loom_output lab = loom_reshape(g, labels, 2, row, NULL);              /* [1, N] */
  loom_output th = loom_const_data(g, LOOM_F32, 2, col, thr, "thresholds"); /* [T, 1] */
  loom_output pos = loom_greater(g, pred, th, "pred_is_pos");            /* [T, N] */
  loom_output neg = loom_logical_not(g, pos, "pred_is_neg");
  loom_output lneg = loom_logical_not(g, lab, "label_is_neg");
  loom_output w = {NULL, 0};
  if (bu_valid(weights)) {
    w = bu_broadcast_weights(g, bu_cast(g, weights, LOOM_F32), predictions, c->where);
    w = loom_reshape(g, w, 2, row, NULL);
  }
  int64_t ax = 1;
  int64_t dims[1] = {n};
  struct {
    int bit;
    const char *name;
    loom_output l, p;
    loom_output *var, *upd;
  } parts[4] = {{I_TP, "true_positives", lab, pos, &o->tp, &o->utp},
                {I_FN, "false_negatives", lab, neg, &o->fn, &o->ufn},
                {I_TN, "true_negatives", lneg, neg, &o->tn, &o->utn},
                {I_FP, "false_positives", lneg, pos, &o->fp, &o->ufp}};
  for (int i = 0; i < 4; i++) {
    if (!(includes & parts[i].bit)) continue;
    loom_variable *v = loom__metric_var(c, parts[i].name, LOOM_F32, 1, dims);
    loom_output x = loom_cast(g, loom_logical_and(g, parts[i].l, parts[i].p, NULL), LOOM_F32, NULL);
    if (bu_valid(w)) x = loom_mul(g, x, w, NULL);
    *parts[i].var = loom_variable_output(v);
    *parts[i].upd = loom__metric_assign_add(c, v, loom_reduce_sum(g, x, 1, &ax, 0, NULL));
  }
  return loom_graph_status(g, NULL) == LOOM_OK;
}

static float *float_thresholds(loom_graph *g, int n, const double *t, const char *where) {
  if (n < 1 || !t) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: at least one threshold is needed, got %d", where, n);
    return NULL;
  }
  float *f = loom__malloc(sizeof *f * (size_t)n);
  if (!f) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", where);
    return NULL;
  }
  for (int i = 0; i < n; i++) f[i] = (float)t[i];
  return f;
}

static loom_metric count_at_thresholds(loom_graph *g, int bit, const char *def, loom_output labels,
                                       loom_output predictions, int n, const double *thresholds, loom_output weights,
                                       const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, def);
  float *thr = float_thresholds(g, n, thresholds, c.where);
  cm_out o;
  if (!thr || !confusion_at_thresholds(&c, labels, predictions, n, thr, weights, bit, &o)) {
    loom__free(thr);
    return loom__metric_fail(&c, predictions);
  }
  loom__free(thr);
  loom_output var = bit == I_TP ? o.tp : bit == I_FN ? o.fn : bit == I_TN ? o.tn : o.fp;
  loom_output upd = bit == I_TP ? o.utp : bit == I_FN ? o.ufn : bit == I_TN ? o.utn : o.ufp;
  return loom__metric_end(&c, loom_identity(g, var, "value"), upd);
}

loom_metric loom_metrics_true_positives_at_thresholds(loom_graph *g, loom_output labels, loom_output predictions,
                                                      int nthresholds, const double *thresholds, loom_output weights,
                                                      const char *name) {
  return count_at_thresholds(g, I_TP, "true_positives", labels, predictions, nthresholds, thresholds, weights, name);
}
loom_metric loom_metrics_false_positives_at_thresholds(loom_graph *g, loom_output labels, loom_output predictions,
                                                       int nthresholds, const double *thresholds,
                                                       loom_output weights, const char *name) {
  return count_at_thresholds(g, I_FP, "false_positives", labels, predictions, nthresholds, thresholds, weights,
                             name);
}
loom_metric loom_metrics_true_negatives_at_thresholds(loom_graph *g, loom_output labels, loom_output predictions,
                                                      int nthresholds, const double *thresholds, loom_output weights,
                                                      const char *name) {
  return count_at_thresholds(g, I_TN, "true_negatives", labels, predictions, nthresholds, thresholds, weights, name);
}
loom_metric loom_metrics_false_negatives_at_thresholds(loom_graph *g, loom_output labels, loom_output predictions,
                                                       int nthresholds, const double *thresholds,
                                                       loom_output weights, const char *name) {
  return count_at_thresholds(g, I_FN, "false_negatives", labels, predictions, nthresholds, thresholds, weights,
                             name);
}

/* a / (eps + a + b) */
static loom_output eps_ratio(loom_graph *g, loom_output a, loom_output b, const char *name) {
  loom_output den = loom_add(g, loom_add(g, bu_scalar(g, LOOM_F32, 1e-7, NULL), a, NULL), b, NULL);
  return loom_div(g, a, den, name);
}

static loom_metric pr_at_thresholds(loom_graph *g, int other, const char *def, loom_output labels,
                                    loom_output predictions, int n, const double *thresholds, loom_output weights,
                                    const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, def);
  float *thr = float_thresholds(g, n, thresholds, c.where);
  cm_out o;
  if (!thr || !confusion_at_thresholds(&c, labels, predictions, n, thr, weights, I_TP | other, &o)) {
    loom__free(thr);
    return loom__metric_fail(&c, predictions);
  }
  loom__free(thr);
  loom_output v = eps_ratio(g, o.tp, other == I_FP ? o.fp : o.fn, "value");
  loom__metric_update_begin(&c);
  loom_output u = eps_ratio(g, o.utp, other == I_FP ? o.ufp : o.ufn, "update_op");
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_precision_at_thresholds(loom_graph *g, loom_output labels, loom_output predictions,
                                                 int nthresholds, const double *thresholds, loom_output weights,
                                                 const char *name) {
  return pr_at_thresholds(g, I_FP, "precision_at_thresholds", labels, predictions, nthresholds, thresholds, weights,
                          name);
}

loom_metric loom_metrics_recall_at_thresholds(loom_graph *g, loom_output labels, loom_output predictions,
                                              int nthresholds, const double *thresholds, loom_output weights,
                                              const char *name) {
  return pr_at_thresholds(g, I_FN, "recall_at_thresholds", labels, predictions, nthresholds, thresholds, weights,
                          name);
}

/* ---- AUC ---- */
/* x[lo : lo + n - 1] of a [n] vector (lo 0: x[:n-1], lo 1: x[1:]). */
static loom_output part(loom_graph *g, loom_output x, int n, int lo) {
  int64_t b = lo, s = n - 1;
  return loom_slice(g, x, &b, &s, NULL);
}

/* TF's interpolate_pr_auc (Davis & Goadrich). */
static loom_output interpolate_pr_auc(loom_graph *g, int n, loom_output tp, loom_output fp, loom_output fn,
                                      const char *name) {
  loom_output zero = bu_scalar(g, LOOM_F32, 0.0, NULL);
  loom_output tp0 = part(g, tp, n, 0), tp1 = part(g, tp, n, 1);
  loom_output dtp = loom_sub(g, tp0, tp1, NULL);
  loom_output p = loom_add(g, tp, fp, NULL);
  loom_output p0 = part(g, p, n, 0), p1 = part(g, p, n, 1);
  loom_output prec_slope = bu_div_no_nan(g, dtp, loom_maximum(g, loom_sub(g, p0, p1, NULL), zero, NULL), "prec_slope");
  loom_output intercept = loom_sub(g, tp1, loom_mul(g, prec_slope, p1, NULL), NULL);
  loom_output both = loom_logical_and(g, loom_greater(g, p0, zero, NULL), loom_greater(g, p1, zero, NULL), NULL);
  loom_output ratio = bu_div_no_nan(g, p0, loom_maximum(g, p1, zero, NULL), "recall_relative_ratio");
  loom_output safe = loom_select(g, both, ratio, loom_ones_like(g, p1, NULL), NULL);
  loom_output num = loom_mul(g, prec_slope, loom_add(g, dtp, loom_mul(g, intercept, loom_log(g, safe, NULL), NULL), NULL),
                             NULL);
  loom_output den = loom_maximum(g, loom_add(g, tp1, part(g, fn, n, 1), NULL), zero, NULL);
  loom_output inc = bu_div_no_nan(g, num, den, "pr_auc_increment");
  return loom_reduce_sum(g, inc, -1, NULL, 0, name);
}

static loom_output compute_auc(loom_graph *g, int n, int curve, int method, loom_output tp, loom_output fn,
                               loom_output tn, loom_output fp, const char *name) {
  if (curve == LOOM_AUC_PR && method == LOOM_AUC_CAREFUL_INTERPOLATION)
    return interpolate_pr_auc(g, n, tp, fp, fn, name);
  loom_output eps = bu_scalar(g, LOOM_F32, 1e-6, NULL);
  loom_output rec = loom_div(g, loom_add(g, tp, eps, NULL), loom_add(g, loom_add(g, tp, fn, NULL), eps, NULL), NULL);
  loom_output x, y;
  if (curve == LOOM_AUC_ROC) {
    x = loom_div(g, fp, loom_add(g, loom_add(g, fp, tn, NULL), eps, NULL), NULL);
    y = rec;
  } else {
    x = rec;
    y = loom_div(g, loom_add(g, tp, eps, NULL), loom_add(g, loom_add(g, tp, fp, NULL), eps, NULL), NULL);
  }
  loom_output dx = loom_sub(g, part(g, x, n, 0), part(g, x, n, 1), NULL);
  loom_output y0 = part(g, y, n, 0), y1 = part(g, y, n, 1);
  loom_output h;
  if (method == LOOM_AUC_MINORING)
    h = loom_minimum(g, y0, y1, NULL);
  else if (method == LOOM_AUC_MAJORING)
    h = loom_maximum(g, y0, y1, NULL);
  else
    h = loom_mul(g, loom_add(g, y0, y1, NULL), bu_scalar(g, LOOM_F32, 0.5, NULL), NULL);
  return loom_reduce_sum(g, loom_mul(g, dx, h, NULL), -1, NULL, 0, name);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

loom_metric loom_metrics_auc(loom_graph *g, loom_output labels, loom_output predictions, loom_output weights,
                             int num_thresholds, const double *thresholds, int curve, int summation_method,
                             const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, "auc");
  if (curve != LOOM_AUC_ROC && curve != LOOM_AUC_PR) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: curve must be either ROC or PR, %d unknown", c.where, curve);
    return loom__metric_fail(&c, predictions);
  }
  if (summation_method < LOOM_AUC_TRAPEZOIDAL || summation_method > LOOM_AUC_MAJORING) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid summation_method %d", c.where, summation_method);
    return loom__metric_fail(&c, predictions);
  }
  int inner = thresholds ? num_thresholds : num_thresholds - 2;
  if (inner < 0 || (!thresholds && num_thresholds < 2)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: num_thresholds must be >= 2, got %d", c.where, num_thresholds);
    return loom__metric_fail(&c, predictions);
  }
  int n = inner + 2;
  double *t = loom__malloc(sizeof *t * (size_t)n);
  float *f = loom__malloc(sizeof *f * (size_t)n);
  if (!t || !f) {
    loom__free(t);
    loom__free(f);
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", c.where);
    return loom__metric_fail(&c, predictions);
  }
  const double keps = 1e-7;
  for (int i = 0; i < inner; i++) t[i + 1] = thresholds ? thresholds[i] : (double)(i + 1) / (double)(num_thresholds - 1);
  if (thresholds) qsort(t + 1, (size_t)inner, sizeof *t, cmp_double);
  t[0] = 0.0 - keps;
  t[n - 1] = 1.0 + keps;
  for (int i = 0; i < n; i++) f[i] = (float)t[i];
  loom__free(t);
  cm_out o;
  int ok = confusion_at_thresholds(&c, labels, predictions, n, f, weights, I_TP | I_FN | I_TN | I_FP, &o);
  loom__free(f);
  if (!ok) return loom__metric_fail(&c, predictions);
  loom_output v = compute_auc(g, n, curve, summation_method, o.tp, o.fn, o.tn, o.fp, "value");
  loom__metric_update_begin(&c);
  loom_output u = compute_auc(g, n, curve, summation_method, o.utp, o.ufn, o.utn, o.ufp, "update_op");
  return loom__metric_end(&c, v, u);
}

/* ---- sensitivity at specificity / specificity at sensitivity ---- */
/* x[i] of a [n] vector for a rank-0 index. */
static loom_output at(loom_graph *g, loom_output x, loom_output i) { return loom_gather(g, x, i, 0, NULL); }

/* TF 1.x: sensitivity at the first threshold whose specificity is closest
 * to the target (argmin); specificity at the last threshold whose
 * sensitivity is closest (argmax of the cumulative count of minima). */
static loom_output rate_at(loom_graph *g, int n, int sens_at_spec, double target, loom_output tp, loom_output fn,
                           loom_output tn, loom_output fp, const char *name) {
  loom_output keps = bu_scalar(g, LOOM_F32, 1e-7, NULL);
  loom_output tgt = bu_scalar(g, LOOM_F32, target, NULL);
  loom_output idx;
  if (sens_at_spec) {
    loom_output spec = loom_div(g, tn, loom_add(g, loom_add(g, tn, fp, NULL), keps, NULL), NULL);
    idx = loom_argmin(g, loom_abs(g, loom_sub(g, spec, tgt, NULL), NULL), 0, LOOM_I64, NULL);
    loom_output a = at(g, tp, idx), b = at(g, fn, idx);
    return loom_div(g, a, loom_add(g, loom_add(g, a, b, NULL), keps, NULL), name);
  }
  loom_output sens = loom_div(g, tp, loom_add(g, loom_add(g, tp, fn, NULL), keps, NULL), NULL);
  loom_output d = loom_abs(g, loom_sub(g, sens, tgt, NULL), NULL);
  loom_output mn = loom_reduce_min(g, d, -1, NULL, 0, NULL);
  loom_output pos = loom_range(g, 1, (double)n + 1, 1, LOOM_F32, NULL);
  loom_output score = loom_mul(g, loom_cast(g, loom_equal(g, d, mn, NULL), LOOM_F32, NULL), pos, NULL);
  idx = loom_argmax(g, score, 0, LOOM_I64, NULL);
  loom_output a = at(g, tn, idx), b = at(g, fp, idx);
  return loom_div(g, a, loom_add(g, loom_add(g, a, b, NULL), keps, NULL), name);
}

static loom_metric rate_metric(loom_graph *g, int sens_at_spec, loom_output labels, loom_output predictions,
                               double target, loom_output weights, int num_thresholds, const char *name) {
  lm_ctx c;
  loom__metric_begin(&c, g, name, sens_at_spec ? "sensitivity_at_specificity" : "specificity_at_sensitivity");
  if (!(target >= 0.0 && target <= 1.0)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: `%s` must be in the range [0, 1], got %g", c.where,
                         sens_at_spec ? "specificity" : "sensitivity", target);
    return loom__metric_fail(&c, predictions);
  }
  if (num_thresholds < 2) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: num_thresholds must be >= 2, got %d", c.where,
                         num_thresholds);
    return loom__metric_fail(&c, predictions);
  }
  int n = num_thresholds;
  float *f = loom__malloc(sizeof *f * (size_t)n);
  if (!f) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", c.where);
    return loom__metric_fail(&c, predictions);
  }
  for (int i = 1; i < n - 1; i++) f[i] = (float)((double)i / (double)(n - 1));
  f[0] = (float)(0.0 - 1e-7);
  f[n - 1] = (float)(1.0 + 1e-7);
  cm_out o;
  int ok = confusion_at_thresholds(&c, labels, predictions, n, f, weights, I_TP | I_FN | I_TN | I_FP, &o);
  loom__free(f);
  if (!ok) return loom__metric_fail(&c, predictions);
  loom_output v = rate_at(g, n, sens_at_spec, target, o.tp, o.fn, o.tn, o.fp, "value");
  loom__metric_update_begin(&c);
  loom_output u = rate_at(g, n, sens_at_spec, target, o.utp, o.ufn, o.utn, o.ufp, "update_op");
  return loom__metric_end(&c, v, u);
}

loom_metric loom_metrics_sensitivity_at_specificity(loom_graph *g, loom_output labels, loom_output predictions,
                                                    double specificity, loom_output weights, int num_thresholds,
                                                    const char *name) {
  return rate_metric(g, 1, labels, predictions, specificity, weights, num_thresholds, name);
}

loom_metric loom_metrics_specificity_at_sensitivity(loom_graph *g, loom_output labels, loom_output predictions,
                                                    double sensitivity, loom_output weights, int num_thresholds,
                                                    const char *name) {
  return rate_metric(g, 0, labels, predictions, sensitivity, weights, num_thresholds, name);
}
