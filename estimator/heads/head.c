/* Heads (TF 2.15 tf.estimator.*Head): losses, predictions, eval metrics and
 * export outputs for every mode. See include/loom/loom_head.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "base/base.h"
#include "loom/loom.h"
#include "loom/loom_head.h"
#include "estimator/estimator_impl.h"

typedef enum head_kind {
  HK_BINARY = 0,
  HK_MULTI_CLASS,
  HK_MULTI_LABEL,
  HK_REGRESSION,
  HK_POISSON,
  HK_LOGISTIC,
  HK_MULTI
} head_kind;

static const char *const kind_names[] = {"BinaryClassHead",        "MultiClassHead",        "MultiLabelHead",
                                         "RegressionHead",         "PoissonRegressionHead", "LogisticRegressionHead",
                                         "MultiHead"};

struct loom_head {
  head_kind kind;
  char *name;
  char *weight_column;
  int64_t n_classes;
  int64_t logits_dim;
  int nthr;
  double *thr;
  int nvocab;
  char **vocab;
  loom_reduction red;
  int compute_full_loss;
  int nheads;
  loom_head **heads;
  double *head_weights;
};

/* ------------------------------------------------------------ construction */

static char *dupstr(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = loom__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void loom_head_free(loom_head *h) {
  if (!h) return;
  loom__free(h->name);
  loom__free(h->weight_column);
  loom__free(h->thr);
  for (int i = 0; i < h->nvocab; i++) loom__free(h->vocab[i]);
  loom__free(h->vocab);
  for (int i = 0; i < h->nheads; i++) loom_head_free(h->heads[i]);
  loom__free(h->heads);
  loom__free(h->head_weights);
  loom__free(h);
}

static loom_head *fail(loom_head *h, loom_status *st, loom_code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static loom_head *fail(loom_head *h, loom_status *st, loom_code code, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  loom_status_set(st, code, "%s", msg);
  loom_head_free(h);
  return NULL;
}

/* Common fields; NULL (with st set) on failure. */
static loom_head *head_alloc(head_kind kind, const char *name, const char *weight_column, loom_reduction red,
                             int nthr, const double *thr, int nvocab, const char *const *vocab, loom_status *st) {
  const char *kn = kind_names[kind];
  loom_head *h = loom__calloc(1, sizeof *h);
  if (!h) return fail(NULL, st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", kn);
  h->kind = kind;
  h->red = red;
  if (red != LOOM_REDUCTION_SUM_OVER_BATCH_SIZE && red != LOOM_REDUCTION_SUM)
    return fail(h, st, LOOM_INVALID_ARGUMENT,
                "%s: loss_reduction must be SUM_OVER_BATCH_SIZE or SUM (got %d)", kn, (int)red);
  if (name && !name[0]) return fail(h, st, LOOM_INVALID_ARGUMENT, "%s: name is empty", kn);
  if (weight_column && !weight_column[0]) return fail(h, st, LOOM_INVALID_ARGUMENT, "%s: weight_column is empty", kn);
  if (nthr < 0 || (nthr > 0 && !thr))
    return fail(h, st, LOOM_INVALID_ARGUMENT, "%s: thresholds: %d given without values", kn, nthr);
  for (int i = 0; i < nthr; i++)
    if (!(thr[i] > 0.0 && thr[i] < 1.0))
      return fail(h, st, LOOM_INVALID_ARGUMENT, "%s: thresholds not in (0, 1): thresholds[%d] = %g", kn, i, thr[i]);
  if (nvocab < 0 || (nvocab > 0 && !vocab))
    return fail(h, st, LOOM_INVALID_ARGUMENT, "%s: label_vocabulary: %d entries given without values", kn, nvocab);
  for (int i = 0; i < nvocab; i++) {
    if (!vocab[i]) return fail(h, st, LOOM_INVALID_ARGUMENT, "%s: label_vocabulary[%d] is NULL", kn, i);
    for (int j = 0; j < i; j++)
      if (!strcmp(vocab[i], vocab[j]))
        return fail(h, st, LOOM_INVALID_ARGUMENT, "%s: label_vocabulary has '%s' twice", kn, vocab[i]);
  }
  if ((name && !(h->name = dupstr(name))) || (weight_column && !(h->weight_column = dupstr(weight_column))))
    return fail(h, st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", kn);
  if (nthr) {
    if (!(h->thr = loom__malloc(sizeof(double) * (size_t)nthr)))
      return fail(h, st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", kn);
    memcpy(h->thr, thr, sizeof(double) * (size_t)nthr);
    h->nthr = nthr;
  }
  if (nvocab) {
    if (!(h->vocab = loom__calloc((size_t)nvocab, sizeof(char *))))
      return fail(h, st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", kn);
    h->nvocab = nvocab;
    for (int i = 0; i < nvocab; i++)
      if (!(h->vocab[i] = dupstr(vocab[i]))) return fail(h, st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", kn);
  }
  return h;
}

loom_binary_head_options loom_binary_head_options_default(void) {
  loom_binary_head_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss_reduction = LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
  return o;
}
loom_multi_class_head_options loom_multi_class_head_options_default(void) {
  loom_multi_class_head_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss_reduction = LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
  return o;
}
loom_multi_label_head_options loom_multi_label_head_options_default(void) {
  loom_multi_label_head_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss_reduction = LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
  return o;
}
loom_regression_head_options loom_regression_head_options_default(void) {
  loom_regression_head_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.label_dimension = 1;
  o.loss_reduction = LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
  o.compute_full_loss = 1;
  return o;
}

loom_head *loom_binary_class_head_new(const loom_binary_head_options *o, loom_status *st) {
  loom_binary_head_options d = loom_binary_head_options_default();
  if (LOOM__OPTS_TAKE(&d, o, "BinaryClassHead", loom_binary_head_options, st)) return NULL;
  o = &d;
  if (o->nlabel_vocabulary != 0 && o->nlabel_vocabulary != 2)
    return fail(NULL, st, LOOM_INVALID_ARGUMENT, "BinaryClassHead: label_vocabulary must have 2 entries (got %d)",
                (int)o->nlabel_vocabulary);
  loom_head *h = head_alloc(HK_BINARY, o->name, o->weight_column, o->loss_reduction, o->nthresholds, o->thresholds,
                            o->nlabel_vocabulary, o->label_vocabulary, st);
  if (!h) return NULL;
  h->n_classes = 2;
  h->logits_dim = 1;
  return h;
}

loom_head *loom_multi_class_head_new(const loom_multi_class_head_options *o, loom_status *st) {
  if (!o) return fail(NULL, st, LOOM_INVALID_ARGUMENT, "MultiClassHead: options are NULL (n_classes is required)");
  loom_multi_class_head_options d = loom_multi_class_head_options_default();
  if (LOOM__OPTS_TAKE(&d, o, "MultiClassHead", loom_multi_class_head_options, st)) return NULL;
  o = &d;
  if (o->n_classes < 3)
    return fail(NULL, st, LOOM_INVALID_ARGUMENT,
                "MultiClassHead: n_classes must be >= 3 (got %lld); use BinaryClassHead for 2 classes",
                (long long)o->n_classes);
  if (o->nlabel_vocabulary != 0 && o->nlabel_vocabulary != o->n_classes)
    return fail(NULL, st, LOOM_INVALID_ARGUMENT,
                "MultiClassHead: label_vocabulary has %d entries; it must have n_classes (%lld)",
                (int)o->nlabel_vocabulary, (long long)o->n_classes);
  loom_head *h = head_alloc(HK_MULTI_CLASS, o->name, o->weight_column, o->loss_reduction, 0, NULL,
                            o->nlabel_vocabulary, o->label_vocabulary, st);
  if (!h) return NULL;
  h->n_classes = h->logits_dim = o->n_classes;
  return h;
}

loom_head *loom_multi_label_head_new(const loom_multi_label_head_options *o, loom_status *st) {
  if (!o) return fail(NULL, st, LOOM_INVALID_ARGUMENT, "MultiLabelHead: options are NULL (n_classes is required)");
  loom_multi_label_head_options d = loom_multi_label_head_options_default();
  if (LOOM__OPTS_TAKE(&d, o, "MultiLabelHead", loom_multi_label_head_options, st)) return NULL;
  o = &d;
  if (o->n_classes < 2)
    return fail(NULL, st, LOOM_INVALID_ARGUMENT, "MultiLabelHead: n_classes must be > 1 (got %lld)",
                (long long)o->n_classes);
  if (o->nlabel_vocabulary != 0 && o->nlabel_vocabulary != o->n_classes)
    return fail(NULL, st, LOOM_INVALID_ARGUMENT,
                "MultiLabelHead: label_vocabulary has %d entries; it must have n_classes (%lld)",
                (int)o->nlabel_vocabulary, (long long)o->n_classes);
  if (o->nlabel_vocabulary)
    return fail(NULL, st, LOOM_UNIMPLEMENTED,
                "MultiLabelHead: label_vocabulary (sparse string labels) is not supported; give multi-hot labels");
  loom_head *h = head_alloc(HK_MULTI_LABEL, o->name, o->weight_column, o->loss_reduction, o->nthresholds,
                            o->thresholds, o->nlabel_vocabulary, o->label_vocabulary, st);
  if (!h) return NULL;
  h->n_classes = h->logits_dim = o->n_classes;
  return h;
}

static loom_head *regression_new(head_kind kind, const loom_regression_head_options *o, loom_status *st) {
  loom_regression_head_options d = loom_regression_head_options_default();
  if (LOOM__OPTS_TAKE(&d, o, kind_names[kind], loom_regression_head_options, st)) return NULL;
  o = &d;
  if (o->label_dimension < 1)
    return fail(NULL, st, LOOM_INVALID_ARGUMENT, "%s: Invalid label_dimension %lld (must be >= 1)",
                kind_names[kind], (long long)o->label_dimension);
  if (kind == HK_LOGISTIC && o->label_dimension != 1)
    return fail(NULL, st, LOOM_INVALID_ARGUMENT, "LogisticRegressionHead: label_dimension must be 1 (got %lld)",
                (long long)o->label_dimension);
  loom_head *h = head_alloc(kind, o->name, o->weight_column, o->loss_reduction, 0, NULL, 0, NULL, st);
  if (!h) return NULL;
  h->logits_dim = o->label_dimension;
  h->compute_full_loss = o->compute_full_loss;
  return h;
}
loom_head *loom_regression_head_new(const loom_regression_head_options *o, loom_status *st) {
  return regression_new(HK_REGRESSION, o, st);
}
loom_head *loom_poisson_regression_head_new(const loom_regression_head_options *o, loom_status *st) {
  return regression_new(HK_POISSON, o, st);
}
loom_head *loom_logistic_regression_head_new(const loom_regression_head_options *o, loom_status *st) {
  return regression_new(HK_LOGISTIC, o, st);
}

loom_head *loom_multi_head_new(int n, loom_head *const *heads, const double *head_weights, loom_status *st) {
  loom_head *h = loom__calloc(1, sizeof *h);
  if (h && n > 0 && heads) {
    h->heads = loom__calloc((size_t)n, sizeof(loom_head *));
    if (h->heads) {
      for (int i = 0; i < n; i++) h->heads[i] = heads[i];
      h->nheads = n;
    }
  }
  if (!h || (n > 0 && heads && !h->heads)) {
    if (h) loom__free(h);
    for (int i = 0; heads && i < n; i++) loom_head_free(heads[i]);
    return fail(NULL, st, LOOM_RESOURCE_EXHAUSTED, "MultiHead: out of memory");
  }
  h->kind = HK_MULTI;
  h->red = LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
  if (n < 1 || !heads) return fail(h, st, LOOM_INVALID_ARGUMENT, "MultiHead: Must specify heads (got %d)", n);
  size_t namelen = 0;
  for (int i = 0; i < n; i++) {
    if (!heads[i]) return fail(h, st, LOOM_INVALID_ARGUMENT, "MultiHead: heads[%d] is NULL", i);
    if (heads[i]->kind == HK_MULTI) return fail(h, st, LOOM_INVALID_ARGUMENT, "MultiHead: heads[%d] is a MultiHead", i);
    if (!heads[i]->name)
      return fail(h, st, LOOM_INVALID_ARGUMENT, "MultiHead: All given heads must have name specified (heads[%d])", i);
    for (int j = 0; j < i; j++)
      if (!strcmp(heads[i]->name, heads[j]->name))
        return fail(h, st, LOOM_INVALID_ARGUMENT, "MultiHead: heads[%d] and heads[%d] are both named '%s'", j, i,
                    heads[i]->name);
    h->logits_dim += heads[i]->logits_dim;
    namelen += strlen(heads[i]->name) + 1;
  }
  if (head_weights) {
    if (!(h->head_weights = loom__malloc(sizeof(double) * (size_t)n)))
      return fail(h, st, LOOM_RESOURCE_EXHAUSTED, "MultiHead: out of memory");
    memcpy(h->head_weights, head_weights, sizeof(double) * (size_t)n);
  }
  if (!(h->name = loom__malloc(namelen))) return fail(h, st, LOOM_RESOURCE_EXHAUSTED, "MultiHead: out of memory");
  h->name[0] = 0;
  for (int i = 0; i < n; i++) {
    if (i) strcat(h->name, "_");
    strcat(h->name, heads[i]->name);
  }
  return h;
}

int64_t loom_head_logits_dimension(const loom_head *h) { return h ? h->logits_dim : 0; }
const char *loom_head_name(const loom_head *h) { return h ? h->name : NULL; }

/* ------------------------------------------------------------ collection */

#define HC_KEY 192
#define HC_MAXOUT 64

typedef struct hc_pred {
  char key[HC_KEY];
  loom_output v;
} hc_pred;
typedef struct hc_metric {
  char key[HC_KEY];
  loom_metric m;
} hc_metric;
typedef struct hc_export {
  char name[HC_KEY];
  loom_export_kind kind;
  int n;
  char keys[HC_MAXOUT][HC_KEY];
  loom_output outs[HC_MAXOUT];
} hc_export;

/* What one head builds, before it goes into the spec (a multi-head renames). */
typedef struct hc {
  int np, nm, ne;
  hc_pred p[HC_MAXOUT];
  hc_metric m[2 * HC_MAXOUT];
  hc_export e[16];
  loom_output loss;
} hc;

static void hc_pred_add(loom_graph *g, hc *c, const char *key, loom_output v) {
  if (c->np >= HC_MAXOUT) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "head: more than %d predictions", HC_MAXOUT);
    return;
  }
  snprintf(c->p[c->np].key, HC_KEY, "%s", key);
  c->p[c->np++].v = v;
}

/* TF's _summary_key: "<key>/<name>" when the head is named. */
static void hc_metric_add(loom_graph *g, hc *c, const loom_head *h, const char *key, loom_metric m) {
  if (c->nm >= 2 * HC_MAXOUT) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "head: more than %d metrics", 2 * HC_MAXOUT);
    return;
  }
  if (h && h->name)
    snprintf(c->m[c->nm].key, HC_KEY, "%s/%s", key, h->name);
  else
    snprintf(c->m[c->nm].key, HC_KEY, "%s", key);
  c->m[c->nm++].m = m;
}

static hc_export *hc_export_add(loom_graph *g, hc *c, const char *name, loom_export_kind kind) {
  if (c->ne >= 16) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "head: more than 16 export outputs");
    return NULL;
  }
  hc_export *e = &c->e[c->ne++];
  snprintf(e->name, HC_KEY, "%s", name);
  e->kind = kind;
  e->n = 0;
  return e;
}
static void hc_export_out(hc_export *e, const char *key, loom_output v) {
  if (!e || e->n >= HC_MAXOUT) return;
  snprintf(e->keys[e->n], HC_KEY, "%s", key);
  e->outs[e->n++] = v;
}
/* "predict": every prediction. */
static void hc_export_predict(loom_graph *g, hc *c, const char *name) {
  hc_export *e = hc_export_add(g, c, name, LOOM_EXPORT_PREDICT);
  for (int i = 0; e && i < c->np; i++) hc_export_out(e, c->p[i].key, c->p[i].v);
}

/* ------------------------------------------------------------ building blocks */

static loom_output no_output(void) {
  loom_output o = {NULL, 0};
  return o;
}

static loom_output f32c(loom_graph *g, float v) { return loom_const_f32(g, v, NULL); }

/* x [B] -> [B, 1]; [B, d] kept. Records an error when the last dim is
 * known and differs from d. */
static loom_output to_2d(loom_graph *g, const loom_head *h, loom_output x, int64_t d, const char *what) {
  if (!x.node) return x;
  int nd = loom_output_ndim(x);
  if (nd == 1 && d == 1) return loom_expand_dims(g, x, -1, NULL);
  int64_t dims[8];
  loom_output_dims(x, dims);
  if (nd != 2 || (dims[1] >= 0 && dims[1] != d)) {
    char shp[64];
    int k = snprintf(shp, sizeof shp, "[");
    for (int i = 0; i < nd && k < 56; i++)
      k += snprintf(shp + k, sizeof shp - (size_t)k, "%s%lld", i ? "," : "", (long long)dims[i]);
    snprintf(shp + k, sizeof shp - (size_t)k, "]");
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s%s%s: %s shape %s does not match [batch, %lld] (logits_dimension)",
                         kind_names[h->kind], h->name ? " " : "", h->name ? h->name : "", what, shp, (long long)d);
  }
  return x;
}

/* ids (any int dtype) [B, k] -> int64 ids, failing the run with the node
 * name check_label_range and the value when outside [0, n). */
static loom_output check_ids(loom_graph *g, loom_output ids, int64_t n) {
  ids = loom_cast(g, ids, LOOM_I64, NULL);
  loom_output table = loom_range(g, 0, (double)n, 1, LOOM_I64, "label_ids");
  return loom_gather(g, table, ids, 0, "check_label_range");
}

/* float labels must lie in [0, 1]: floor and ceil (as ids) in {0, 1}. */
static loom_output check_unit_range(loom_graph *g, loom_output labels) {
  labels = loom_cast(g, labels, LOOM_F32, NULL);
  loom_output lo = check_ids(g, loom_floor(g, labels, NULL), 2);
  loom_output hi = check_ids(g, loom_ceil(g, labels, NULL), 2);
  loom_node *deps[2] = {lo.node, hi.node};
  loom_graph_push_control_deps(g, 2, deps);
  loom_output out = loom_identity(g, labels, "checked_labels");
  loom_graph_pop_control_deps(g);
  return out;
}

static loom_output weights_of(loom_graph *g, const loom_head *h, const loom_features *f, int64_t d) {
  if (!h->weight_column) return no_output();
  loom_output w = f ? loom__features_lookup(f, h->weight_column) : no_output();
  if (!w.node) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: weight_column '%s' is not in features", kind_names[h->kind],
                         h->weight_column);
    return no_output();
  }
  w = loom_cast(g, w, LOOM_F32, "weights");
  if (loom_output_ndim(w) == 1) return loom_expand_dims(g, w, -1, NULL);
  int64_t dims[8];
  loom_output_dims(w, dims);
  if (loom_output_ndim(w) != 2 || (dims[1] >= 0 && dims[1] != 1 && dims[1] != d))
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: weight_column '%s' must be [batch] or [batch, 1]%s (rank %d)", kind_names[h->kind],
                         h->weight_column, d > 1 ? " or [batch, label_dimension]" : "", loom_output_ndim(w));
  return w;
}

/* Labels as the loss wants them: binary/logistic float [B,1] in [0, 1];
 * multi-class int64 [B,1] ids; multi-label float [B,n] 0/1; regression
 * float [B,d]. */
static loom_output process_labels(loom_graph *g, const loom_head *h, loom_output labels) {
  loom_dtype dt = loom_output_dtype(labels);
  if (h->nvocab > 0) {
    if (dt != LOOM_STRING) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                           "%s: Labels dtype should be string if there is a label_vocabulary. Instead got %s.",
                           kind_names[h->kind], loom_dtype_name(dt));
      return labels;
    }
    loom_output ids = loom_vocab_lookup_strings(g, to_2d(g, h, labels, 1, "labels"), h->nvocab,
                                                (const char *const *)h->vocab, 0, LOOM_VOCAB_MISS_FAILS,
                                                "label_vocabulary_lookup");
    return h->kind == HK_BINARY ? loom_cast(g, ids, LOOM_F32, NULL) : ids;
  }
  if (dt == LOOM_STRING) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: labels are strings but the head has no label_vocabulary",
                         kind_names[h->kind]);
    return labels;
  }
  switch (h->kind) {
  case HK_BINARY:
  case HK_LOGISTIC:
    return check_unit_range(g, to_2d(g, h, labels, 1, "labels"));
  case HK_MULTI_CLASS:
    if (dt != LOOM_I32 && dt != LOOM_I64 && dt != LOOM_U8) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "MultiClassHead: Labels dtype should be integer. Instead got %s.",
                           loom_dtype_name(dt));
      return labels;
    }
    return check_ids(g, to_2d(g, h, labels, 1, "labels"), h->n_classes);
  case HK_MULTI_LABEL:
    return check_unit_range(g, to_2d(g, h, labels, h->n_classes, "labels"));
  default:
    return loom_cast(g, to_2d(g, h, labels, h->logits_dim, "labels"), LOOM_F32, NULL);
  }
}

/* Per-example (per-element for regression) unweighted loss. */
static loom_output unweighted_loss(loom_graph *g, const loom_head *h, loom_output logits, loom_output labels) {
  switch (h->kind) {
  case HK_BINARY:
  case HK_LOGISTIC:
    return loom_sigmoid_cross_entropy_with_logits(g, labels, logits, "unweighted_loss");
  case HK_MULTI_CLASS: {
    int64_t b1[1] = {-1};
    loom_output ids = loom_reshape(g, labels, 1, b1, NULL);
    loom_output l = loom_sparse_softmax_cross_entropy_with_logits(g, logits, ids, NULL, NULL, "xent");
    return loom_expand_dims(g, l, -1, "unweighted_loss");
  }
  case HK_MULTI_LABEL: {
    int64_t ax = -1;
    loom_output l = loom_sigmoid_cross_entropy_with_logits(g, labels, logits, "xent");
    return loom_reduce_mean(g, l, 1, &ax, 1, "unweighted_loss");
  }
  case HK_REGRESSION:
    return loom_square(g, loom_sub(g, logits, labels, NULL), "unweighted_loss");
  case HK_POISSON: {
    /* tf.nn.log_poisson_loss: exp(c) - z * c, plus (compute_full_loss)
     * Stirling's z * log(z) - z + 0.5 * log(2 * pi * z) where z > 1. */
    loom_output l = loom_sub(g, loom_exp(g, logits, NULL), loom_mul(g, labels, logits, NULL), NULL);
    if (h->compute_full_loss) {
      loom_output safe = loom_maximum(g, labels, f32c(g, 1.0f), NULL);
      loom_output st = loom_add(g, loom_sub(g, loom_mul(g, safe, loom_log(g, safe, NULL), NULL), safe, NULL),
                                loom_mul(g, f32c(g, 0.5f),
                                         loom_log(g, loom_mul(g, f32c(g, (float)(2.0 * M_PI)), safe, NULL), NULL),
                                         NULL),
                                NULL);
      loom_output gt1 = loom_greater(g, labels, f32c(g, 1.0f), NULL);
      l = loom_add(g, l, loom_select(g, gt1, st, loom_zeros_like(g, st, NULL), NULL), NULL);
    }
    return loom_identity(g, l, "unweighted_loss");
  }
  default:
    return no_output();
  }
}

/* TF's "classes" / "all_classes" are strings: the vocabulary entry of each
 * id (a Const string vocabulary gathered by the ids) with a
 * label_vocabulary, else the decimal id (AsString). vocab: the vocabulary
 * Const, or {NULL, 0}. */
static loom_output class_names_of(loom_graph *g, loom_output vocab, loom_output ids, const char *name) {
  return vocab.node ? loom_gather(g, vocab, ids, 0, name) : loom_as_string(g, ids, name);
}

/* The head's label_vocabulary as a Const string [n]; {NULL, 0} without one. */
static loom_output vocab_const(loom_graph *g, const loom_head *h) {
  loom_output none = {NULL, 0};
  if (h->nvocab <= 0) return none;
  int64_t n = h->nvocab;
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 1, &n, NULL);
  for (int i = 0; t && i < h->nvocab; i++)
    if (loom_tensor_set_string(t, i, h->vocab[i], strlen(h->vocab[i]), NULL)) {
      loom_tensor_free(t);
      t = NULL;
    }
  if (!t) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory copying the label_vocabulary", h->name ? h->name : "head");
    return none;
  }
  loom_output v = loom_const(g, t, "label_vocabulary");
  loom_tensor_free(t);
  return v;
}

/* [B, n] int32 0..n-1 per row, batch taken from like [B, ...]. */
static loom_output all_ids(loom_graph *g, loom_output like_bn, int64_t n) {
  loom_output row = loom_range(g, 0, (double)n, 1, LOOM_I32, NULL);
  int64_t d2[2] = {1, n};
  row = loom_reshape(g, row, 2, d2, NULL);
  loom_output z = loom_cast(g, loom_zeros_like(g, like_bn, NULL), LOOM_I32, NULL);
  return loom_add(g, z, row, "all_class_ids");
}

/* Predictions in TF's order; returns via outs the tensors the metrics and
 * exports need. */
typedef struct head_preds {
  loom_output logistic, probabilities, class_ids, all_classes, predictions;
} head_preds;

static head_preds build_predictions(loom_graph *g, const loom_head *h, loom_output logits, hc *c) {
  head_preds p;
  memset(&p, 0, sizeof p);
  loom_graph_push_scope(g, "predictions");
  switch (h->kind) {
  case HK_BINARY:
  case HK_MULTI_CLASS: {
    loom_output scores_logits = logits;
    hc_pred_add(g, c, "logits", logits);
    if (h->kind == HK_BINARY) {
      p.logistic = loom_sigmoid(g, logits, "logistic");
      hc_pred_add(g, c, "logistic", p.logistic);
      loom_output two[2] = {loom_zeros_like(g, logits, NULL), logits};
      scores_logits = loom_concat(g, 2, two, -1, "two_class_logits");
    }
    p.probabilities = loom_softmax(g, scores_logits, "probabilities");
    hc_pred_add(g, c, "probabilities", p.probabilities);
    p.class_ids = loom_expand_dims(g, loom_argmax(g, scores_logits, -1, LOOM_I64, NULL), -1, "class_ids");
    hc_pred_add(g, c, "class_ids", p.class_ids);
    loom_output vocab = vocab_const(g, h);
    hc_pred_add(g, c, "classes", class_names_of(g, vocab, p.class_ids, "classes"));
    loom_output ids = all_ids(g, p.probabilities, h->n_classes);
    hc_pred_add(g, c, "all_class_ids", ids);
    p.all_classes = class_names_of(g, vocab, ids, "all_classes");
    hc_pred_add(g, c, "all_classes", p.all_classes);
    break;
  }
  case HK_MULTI_LABEL:
    hc_pred_add(g, c, "logits", logits);
    p.probabilities = loom_sigmoid(g, logits, "probabilities");
    hc_pred_add(g, c, "probabilities", p.probabilities);
    p.all_classes = class_names_of(g, vocab_const(g, h), all_ids(g, p.probabilities, h->n_classes), "classes");
    hc_pred_add(g, c, "classes", p.all_classes);
    break;
  case HK_REGRESSION:
    p.predictions = loom_identity(g, logits, "predictions");
    hc_pred_add(g, c, "predictions", p.predictions);
    break;
  case HK_POISSON:
  case HK_LOGISTIC:
    p.predictions = h->kind == HK_POISSON ? loom_exp(g, logits, "predictions") : loom_sigmoid(g, logits, "predictions");
    hc_pred_add(g, c, "predictions", p.predictions);
    hc_pred_add(g, c, "logits", logits);
    break;
  default:
    break;
  }
  loom_graph_pop_scope(g);
  return p;
}

static void build_exports(loom_graph *g, const loom_head *h, const head_preds *p, hc *c) {
  if (h->kind == HK_BINARY || h->kind == HK_MULTI_CLASS || h->kind == HK_MULTI_LABEL) {
    static const char *const names[2] = {"serving_default", "classification"};
    for (int i = 0; i < 2; i++) {
      hc_export *e = hc_export_add(g, c, names[i], LOOM_EXPORT_CLASSIFY);
      hc_export_out(e, "classes", p->all_classes);
      hc_export_out(e, "scores", p->probabilities);
    }
    if (h->kind == HK_BINARY) hc_export_out(hc_export_add(g, c, "regression", LOOM_EXPORT_REGRESS), "outputs", p->logistic);
  } else {
    hc_export_out(hc_export_add(g, c, "serving_default", LOOM_EXPORT_REGRESS), "outputs", p->predictions);
    hc_export_out(hc_export_add(g, c, "regression", LOOM_EXPORT_REGRESS), "outputs", p->predictions);
  }
  hc_export_predict(g, c, "predict");
}

static loom_metric scalar_metric(loom_graph *g, loom_metric m) {
  m.value = loom_reshape(g, m.value, 0, NULL, NULL);
  m.update = loom_reshape(g, m.update, 0, NULL, NULL);
  return m;
}

/* The threshold trio of binary and multi-label heads on scores in [0, 1]. */
static void threshold_metrics(loom_graph *g, const loom_head *h, hc *c, loom_output labels, loom_output scores,
                              loom_output w) {
  for (int i = 0; i < h->nthr; i++) {
    char key[HC_KEY];
    loom_output pred = loom_cast(g, loom_greater(g, scores, f32c(g, (float)h->thr[i]), NULL), LOOM_F32, NULL);
    snprintf(key, sizeof key, "accuracy/positive_threshold_%g", h->thr[i]);
    hc_metric_add(g, c, h, key, loom_metrics_accuracy(g, labels, pred, w, NULL));
    snprintf(key, sizeof key, "precision/positive_threshold_%g", h->thr[i]);
    hc_metric_add(g, c, h, key, loom_metrics_precision(g, labels, pred, w, NULL));
    snprintf(key, sizeof key, "recall/positive_threshold_%g", h->thr[i]);
    hc_metric_add(g, c, h, key, loom_metrics_recall(g, labels, pred, w, NULL));
  }
}

static void aucs(loom_graph *g, const loom_head *h, hc *c, loom_output labels, loom_output scores, loom_output w) {
  hc_metric_add(g, c, h, "auc",
                loom_metrics_auc(g, labels, scores, w, 200, NULL, LOOM_AUC_ROC, LOOM_AUC_TRAPEZOIDAL, NULL));
  hc_metric_add(g, c, h, "auc_precision_recall",
                loom_metrics_auc(g, labels, scores, w, 200, NULL, LOOM_AUC_PR, LOOM_AUC_CAREFUL_INTERPOLATION, NULL));
}

static void build_metrics(loom_graph *g, const loom_head *h, const head_preds *p, loom_output labels,
                          loom_output loss_el, loom_output w, hc *c) {
  loom_graph_push_scope(g, "metrics");
  hc_metric_add(g, c, h, "average_loss", loom_metrics_mean(g, loss_el, w, NULL));
  switch (h->kind) {
  case HK_BINARY: {
    loom_output cls = loom_cast(g, p->class_ids, LOOM_F32, NULL);
    hc_metric_add(g, c, h, "accuracy", loom_metrics_accuracy(g, labels, cls, w, NULL));
    hc_metric_add(g, c, h, "precision", loom_metrics_precision(g, labels, cls, w, NULL));
    hc_metric_add(g, c, h, "recall", loom_metrics_recall(g, labels, cls, w, NULL));
    hc_metric_add(g, c, h, "prediction/mean", loom_metrics_mean(g, p->logistic, w, NULL));
    loom_metric lm = loom_metrics_mean(g, labels, w, NULL);
    hc_metric_add(g, c, h, "label/mean", lm);
    /* max(label_mean, 1 - label_mean), from label/mean's own state */
    loom_metric base = lm;
    loom_output one = f32c(g, 1.0f);
    base.value = loom_maximum(g, lm.value, loom_sub(g, one, lm.value, NULL), "accuracy_baseline");
    base.update = loom_maximum(g, lm.update, loom_sub(g, one, lm.update, NULL), "accuracy_baseline_update");
    hc_metric_add(g, c, h, "accuracy_baseline", base);
    aucs(g, h, c, labels, p->logistic, w);
    threshold_metrics(g, h, c, labels, p->logistic, w);
    break;
  }
  case HK_MULTI_CLASS:
    hc_metric_add(g, c, h, "accuracy", loom_metrics_accuracy(g, labels, p->class_ids, w, NULL));
    break;
  case HK_MULTI_LABEL:
    aucs(g, h, c, labels, p->probabilities, w);
    threshold_metrics(g, h, c, labels, p->probabilities, w);
    break;
  default:
    hc_metric_add(g, c, h, "label/mean", loom_metrics_mean(g, labels, w, NULL));
    hc_metric_add(g, c, h, "prediction/mean", loom_metrics_mean(g, p->predictions, w, NULL));
    break;
  }
  for (int i = 0; i < c->nm; i++) c->m[i].m = scalar_metric(g, c->m[i].m);
  loom_graph_pop_scope(g);
}

/* One (non-multi) head into c: predictions always, loss and metrics with
 * labels (TRAIN / EVAL), exports in PREDICT. */
static void build_single(loom_graph *g, const loom_head *h, const loom_features *f, loom_mode mode,
                         loom_output logits, loom_output labels, hc *c) {
  loom_graph_push_scope(g, h->name ? h->name : "head");
  logits = to_2d(g, h, logits, h->logits_dim, "logits");
  if (loom_output_dtype(logits) != LOOM_F32) logits = loom_cast(g, logits, LOOM_F32, NULL);
  head_preds p = build_predictions(g, h, logits, c);
  if (mode == LOOM_MODE_PREDICT) {
    build_exports(g, h, &p, c);
  } else {
    if (!labels.node) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: labels are required in %s mode", kind_names[h->kind],
                           loom_mode_key(mode));
    } else {
      loom_graph_push_scope(g, "losses");
      loom_output lab = process_labels(g, h, labels);
      loom_output w = weights_of(g, h, f, h->logits_dim);
      loom_output el = unweighted_loss(g, h, logits, lab);
      c->loss = loom_losses_compute_weighted_loss(g, el, w, "weighted_loss", "", (int)h->red);
      loom_graph_pop_scope(g);
      if (mode == LOOM_MODE_EVAL) build_metrics(g, h, &p, lab, el, w, c);
    }
  }
  loom_graph_pop_scope(g);
}

/* ------------------------------------------------------------ create_spec */

static loom_code emit(loom_graph *g, loom_mode mode, hc *c, loom_head_train_op_fn train_op_fn, void *user,
                      loom_estimator_spec *spec, loom_status *st) {
  loom_code rc = loom_graph_status(g, st);
  if (rc) return rc;
  for (int i = 0; i < c->np && !rc; i++) rc = loom_spec_add_prediction(spec, c->p[i].key, c->p[i].v);
  if (mode == LOOM_MODE_PREDICT) {
    for (int i = 0; i < c->ne && !rc; i++) {
      const char *keys[HC_MAXOUT];
      for (int k = 0; k < c->e[i].n; k++) keys[k] = c->e[i].keys[k];
      rc = loom_spec_add_export_output(spec, c->e[i].name, c->e[i].kind, c->e[i].n, keys, c->e[i].outs);
    }
  } else {
    if (!rc) rc = loom_spec_set_loss(spec, c->loss);
    if (mode == LOOM_MODE_EVAL)
      for (int i = 0; i < c->nm && !rc; i++) rc = loom_spec_add_eval_metric(spec, c->m[i].key, c->m[i].m);
    if (mode == LOOM_MODE_TRAIN && !rc) {
      if (!train_op_fn) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "head: train_op_fn is NULL in TRAIN mode");
      loom_node *op = train_op_fn(g, c->loss, user);
      if ((rc = loom_graph_status(g, st)) != LOOM_OK) return rc;
      if (!op) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "head: train_op_fn returned no train op");
      rc = loom_spec_set_train_op(spec, op);
    }
  }
  if (rc) loom_status_set(st, rc, "head: the EstimatorSpec refused an entry (code %d)", (int)rc);
  return rc;
}

static loom_code check_args(const loom_head *h, loom_graph *g, loom_mode mode, loom_output logits,
                            loom_estimator_spec *spec, loom_status *st) {
  if (!h || !g || !spec) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "head: head, graph or spec is NULL");
  if (!loom_mode_key(mode)) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "head: unknown mode %d", (int)mode);
  if (!logits.node) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "head: logits are NULL");
  return LOOM_OK;
}

static loom_code multi_spec(const loom_head *h, loom_graph *g, const loom_features *f, loom_mode mode,
                            loom_output logits, const loom_output *labels, loom_head_train_op_fn train_op_fn,
                            void *user, loom_estimator_spec *spec, loom_status *st) {
  hc *all = loom__calloc(1, sizeof *all), *sub = loom__calloc(1, sizeof *sub);
  if (!all || !sub) {
    loom__free(all);
    loom__free(sub);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "MultiHead: out of memory");
  }
  int64_t dims[8];
  if (loom_output_ndim(logits) != 2 || (loom_output_dims(logits, dims), dims[1] >= 0 && dims[1] != h->logits_dim))
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "MultiHead %s: logits must be [batch, %lld] (the heads' logits dimensions summed)", h->name,
                         (long long)h->logits_dim);
  loom_graph_push_scope(g, h->name);
  loom_output total = no_output();
  hc_export *merged = NULL;
  int64_t off = 0;
  for (int i = 0; i < h->nheads && loom_graph_status(g, NULL) == LOOM_OK; i++) {
    const loom_head *sh = h->heads[i];
    memset(sub, 0, sizeof *sub);
    int64_t begin[2] = {0, off}, size[2] = {-1, sh->logits_dim};
    off += sh->logits_dim;
    loom_output lg = loom_slice(g, logits, begin, size, NULL);
    loom_output lab = labels ? labels[i] : no_output();
    build_single(g, sh, f, mode, lg, lab, sub);
    for (int k = 0; k < sub->np; k++) {
      char key[HC_KEY];
      snprintf(key, sizeof key, "%s/%s", sh->name, sub->p[k].key);
      hc_pred_add(g, all, key, sub->p[k].v);
    }
    if (mode == LOOM_MODE_PREDICT) {
      for (int k = 0; k < sub->ne; k++) {
        hc_export *se = &sub->e[k];
        char name[HC_KEY];
        int is_default = !strcmp(se->name, "serving_default");
        if (i == 0 && is_default) {
          hc_export *d = hc_export_add(g, all, "serving_default", se->kind);
          for (int j = 0; d && j < se->n; j++) hc_export_out(d, se->keys[j], se->outs[j]);
        }
        if (is_default)
          snprintf(name, sizeof name, "%s", sh->name);
        else
          snprintf(name, sizeof name, "%s/%s", sh->name, se->name);
        hc_export *d = hc_export_add(g, all, name, se->kind);
        for (int j = 0; d && j < se->n; j++) hc_export_out(d, se->keys[j], se->outs[j]);
      }
    } else if (sub->loss.node) {
      loom_output l = sub->loss;
      if (mode == LOOM_MODE_EVAL) {
        char key[HC_KEY];
        snprintf(key, sizeof key, "loss/%s", sh->name);
        loom_graph_push_scope(g, "merge_eval");
        loom_metric m = scalar_metric(g, loom_metrics_mean(g, l, no_output(), NULL));
        loom_graph_pop_scope(g);
        hc_metric_add(g, all, NULL, key, m);
        for (int k = 0; k < sub->nm; k++) hc_metric_add(g, all, NULL, sub->m[k].key, sub->m[k].m);
      }
      if (h->head_weights) l = loom_mul(g, l, f32c(g, (float)h->head_weights[i]), NULL);
      total = total.node ? loom_add(g, total, l, NULL) : l;
    }
  }
  if (mode == LOOM_MODE_PREDICT) {
    merged = hc_export_add(g, all, "predict", LOOM_EXPORT_PREDICT);
    for (int k = 0; merged && k < all->np; k++) hc_export_out(merged, all->p[k].key, all->p[k].v);
  } else if (total.node) {
    all->loss = loom_identity(g, total, "merge_losses");
  }
  loom_graph_pop_scope(g);
  loom_code rc = emit(g, mode, all, train_op_fn, user, spec, st);
  loom__free(all);
  loom__free(sub);
  return rc;
}

loom_code loom_head_create_spec_multi(const loom_head *h, loom_graph *g, const loom_features *features,
                                      loom_mode mode, loom_output logits, const loom_output *labels,
                                      loom_head_train_op_fn train_op_fn, void *user, loom_estimator_spec *spec,
                                      loom_status *st) {
  loom_code rc = check_args(h, g, mode, logits, spec, st);
  if (rc) return rc;
  if (h->kind != HK_MULTI)
    return loom_head_create_spec(h, g, features, mode, logits, labels ? labels[0] : no_output(), train_op_fn, user,
                                 spec, st);
  if (mode != LOOM_MODE_PREDICT && !labels)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "MultiHead %s: labels are required in %s mode", h->name,
                           loom_mode_key(mode));
  return multi_spec(h, g, features, mode, logits, labels, train_op_fn, user, spec, st);
}

loom_code loom_head_create_spec(const loom_head *h, loom_graph *g, const loom_features *features, loom_mode mode,
                                loom_output logits, loom_output labels, loom_head_train_op_fn train_op_fn,
                                void *user, loom_estimator_spec *spec, loom_status *st) {
  loom_code rc = check_args(h, g, mode, logits, spec, st);
  if (rc) return rc;
  if (h->kind == HK_MULTI) {
    loom_output labs[64];
    if (h->nheads > 64) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "MultiHead: more than 64 heads");
    for (int i = 0; i < h->nheads; i++) {
      labs[i] = features ? loom__features_lookup(features, h->heads[i]->name) : no_output();
      if (mode != LOOM_MODE_PREDICT && !labs[i].node)
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "MultiHead %s: labels of head '%s' are not in features (a feature named after the head)",
                               h->name, h->heads[i]->name);
    }
    return multi_spec(h, g, features, mode, logits, labs, train_op_fn, user, spec, st);
  }
  hc *c = loom__calloc(1, sizeof *c);
  if (!c) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "head: out of memory");
  build_single(g, h, features, mode, logits, labels, c);
  rc = emit(g, mode, c, train_op_fn, user, spec, st);
  loom__free(c);
  return rc;
}

/* ------------------------------------------------------------ loss and predictions alone */

static loom_output single_loss(loom_graph *g, const loom_head *h, const loom_features *f, loom_output logits,
                               loom_output labels) {
  loom_graph_push_scope(g, h->name ? h->name : "head");
  logits = to_2d(g, h, logits, h->logits_dim, "logits");
  if (loom_output_dtype(logits) != LOOM_F32) logits = loom_cast(g, logits, LOOM_F32, NULL);
  loom_graph_push_scope(g, "losses");
  loom_output lab = process_labels(g, h, labels);
  loom_output w = weights_of(g, h, f, h->logits_dim);
  loom_output el = unweighted_loss(g, h, logits, lab);
  loom_output loss = loom_losses_compute_weighted_loss(g, el, w, "weighted_loss", "", (int)h->red);
  loom_graph_pop_scope(g);
  loom_graph_pop_scope(g);
  return loss;
}

static int multi_logits_ok(loom_graph *g, const loom_head *h, loom_output logits) {
  int64_t dims[8];
  if (loom_output_ndim(logits) != 2 || (loom_output_dims(logits, dims), dims[1] >= 0 && dims[1] != h->logits_dim)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "MultiHead %s: logits must be [batch, %lld] (the heads' logits dimensions summed)", h->name,
                         (long long)h->logits_dim);
    return 0;
  }
  return 1;
}

static loom_output head_slice(loom_graph *g, loom_output logits, int64_t off, int64_t d) {
  int64_t begin[2] = {0, off}, size[2] = {-1, d};
  return loom_slice(g, logits, begin, size, NULL);
}

loom_output loom_head_loss(const loom_head *h, loom_graph *g, const loom_features *features, loom_output logits,
                           const loom_output *labels, loom_status *st) {
  if (!h || !g || !logits.node || !labels) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "head: head, graph, logits or labels is NULL");
    return no_output();
  }
  int n = h->kind == HK_MULTI ? h->nheads : 1;
  for (int i = 0; i < n; i++)
    if (!labels[i].node) {
      if (h->kind == HK_MULTI)
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "MultiHead %s: labels of head '%s' are NULL", h->name,
                        h->heads[i]->name);
      else
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: labels are NULL", kind_names[h->kind]);
      return no_output();
    }
  loom_output loss = no_output();
  if (h->kind != HK_MULTI) {
    loss = single_loss(g, h, features, logits, labels[0]);
  } else if (multi_logits_ok(g, h, logits)) {
    loom_graph_push_scope(g, h->name);
    int64_t off = 0;
    for (int i = 0; i < h->nheads && loom_graph_status(g, NULL) == LOOM_OK; i++) {
      const loom_head *sh = h->heads[i];
      loom_output l = single_loss(g, sh, features, head_slice(g, logits, off, sh->logits_dim), labels[i]);
      off += sh->logits_dim;
      if (h->head_weights) l = loom_mul(g, l, f32c(g, (float)h->head_weights[i]), NULL);
      loss = loss.node ? loom_add(g, loss, l, NULL) : l;
    }
    if (loom_graph_status(g, NULL) == LOOM_OK) loss = loom_identity(g, loss, "merge_losses");
    loom_graph_pop_scope(g);
  }
  if (loom_graph_status(g, st) != LOOM_OK) return no_output();
  return loss;
}

loom_code loom_head_predictions(const loom_head *h, loom_graph *g, loom_output logits, loom_head_prediction_fn fn,
                                void *user, loom_status *st) {
  if (!h || !g || !logits.node || !fn)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "head: head, graph, logits or fn is NULL");
  hc *all = loom__calloc(1, sizeof *all), *sub = loom__calloc(1, sizeof *sub);
  if (!all || !sub) {
    loom__free(all);
    loom__free(sub);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "head: out of memory");
  }
  if (h->kind != HK_MULTI) {
    build_single(g, h, NULL, LOOM_MODE_PREDICT, logits, no_output(), all);
  } else if (multi_logits_ok(g, h, logits)) {
    loom_graph_push_scope(g, h->name);
    int64_t off = 0;
    for (int i = 0; i < h->nheads && loom_graph_status(g, NULL) == LOOM_OK; i++) {
      const loom_head *sh = h->heads[i];
      memset(sub, 0, sizeof *sub);
      build_single(g, sh, NULL, LOOM_MODE_PREDICT, head_slice(g, logits, off, sh->logits_dim), no_output(), sub);
      off += sh->logits_dim;
      for (int k = 0; k < sub->np; k++) {
        char key[HC_KEY];
        snprintf(key, sizeof key, "%s/%s", sh->name, sub->p[k].key);
        hc_pred_add(g, all, key, sub->p[k].v);
      }
    }
    loom_graph_pop_scope(g);
  }
  loom_code rc = loom_graph_status(g, st);
  for (int i = 0; i < all->np && !rc; i++) fn(all->p[i].key, all->p[i].v, user);
  loom__free(all);
  loom__free(sub);
  return rc;
}
