/* estimator/sequential.c - loom_sequential (include/loom/loom_sequential.h):
 * a layer stack with a loss, an optimizer and metrics, trained directly in
 * its own graph and session, and turned into an Estimator (TF's
 * model_to_estimator).
 *
 * The model definition (seq_def: input, layers, compile settings) is plain
 * data. One builder (seq_build) turns it into graph nodes with loom_layers.h;
 * the direct graph calls it twice (an inference tower and a training tower
 * sharing the variables through LOOM_REUSE_AUTO), the estimator's model_fn
 * once per mode on a copy of the definition, so both make the same ops with
 * the same variable names. */
#include "estimator/estimator_impl.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "loom/loom_array.h"
#include "loom/loom_layers.h"
#include "loom/loom_losses.h"
#include "loom/loom_math.h"
#include "loom/loom_metrics.h"
#include "loom/loom_nn.h"
#include "loom/loom_reduce.h"
#include "loom/loom_sequential.h"

enum { L_DENSE, L_CONV2D, L_MAXPOOL, L_AVGPOOL, L_FLATTEN, L_RESHAPE, L_DROPOUT, L_BATCHNORM, L_EMBEDDING, L_NKINDS };
static const char *const KIND_NAMES[L_NKINDS] = {"dense",   "conv2d",  "max_pooling2d", "average_pooling2d",
                                                 "flatten", "reshape", "dropout",       "batch_normalization",
                                                 "embedding"};

enum { LOSS_SPARSE_CE, LOSS_CE, LOSS_BINARY_CE, LOSS_MSE, LOSS_MAE };
static const struct {
  const char *name;
  int kind;
} LOSSES[] = {{"sparse_categorical_crossentropy", LOSS_SPARSE_CE},
              {"categorical_crossentropy", LOSS_CE},
              {"binary_crossentropy", LOSS_BINARY_CE},
              {"mean_squared_error", LOSS_MSE},
              {"mse", LOSS_MSE},
              {"mean_absolute_error", LOSS_MAE},
              {"mae", LOSS_MAE}};
#define LOSS_LIST "sparse_categorical_crossentropy, categorical_crossentropy, binary_crossentropy, mean_squared_error (mse), mean_absolute_error (mae)"

enum { MET_ACCURACY, MET_MSE, MET_MAE };
static const struct {
  const char *name;
  int kind;
} METRICS[] = {{"accuracy", MET_ACCURACY}, {"acc", MET_ACCURACY},         {"mse", MET_MSE},
               {"mean_squared_error", MET_MSE}, {"mae", MET_MAE}, {"mean_absolute_error", MET_MAE}};
#define METRIC_LIST "accuracy (acc), mse (mean_squared_error), mae (mean_absolute_error)"

enum { OPT_ADAM, OPT_SGD, OPT_ADAGRAD, OPT_RMSPROP, OPT_FTRL, OPT_ADADELTA };
static const struct {
  const char *name;
  int kind;
  double lr;
} OPTS[] = {{"Adam", OPT_ADAM, 1e-3},       {"SGD", OPT_SGD, 1e-2},   {"Adagrad", OPT_ADAGRAD, 1e-3},
            {"RMSProp", OPT_RMSPROP, 1e-3}, {"Ftrl", OPT_FTRL, 1e-3}, {"Adadelta", OPT_ADADELTA, 1e-3}};
#define OPT_LIST "Adam, SGD, Adagrad, RMSProp, Ftrl, Adadelta"

typedef struct seq_layer {
  int kind;
  char *name;
  int64_t units;       /* dense units, conv filters, embedding output_dim */
  int64_t k[2], s[2];  /* conv kernel size / pool size, pool strides */
  char *padding;       /* pools */
  char *activation;    /* dense, conv (the options' pointer is replaced by this copy) */
  loom_dense_options dense;
  loom_conv2d_options conv;
  loom_batch_norm_options bn;
  double rate;         /* dropout */
  int64_t seed;        /* dropout */
  int64_t input_dim;   /* embedding */
  loom_initializer init;
  int ndim;            /* reshape */
  int64_t dims[LOOM_MAX_DIMS];
} seq_layer;

typedef struct seq_def {
  char *feature;
  loom_dtype dtype;
  int has_input, ndim;
  int64_t dims[LOOM_MAX_DIMS];
  seq_layer *layers;
  int n, cap;
  /* compile */
  int loss_kind, from_logits, opt_kind, nmetrics;
  double lr;
  loom_sequential_optimizer_fn opt_fn;
  void *opt_user;
  char **metrics;
  int *metric_kind;
} seq_def;

struct loom_sequential {
  seq_def d;
  int compiled;
  int32_t num_threads;
  loom_graph *g;
  loom_session *s;
  loom_variable *gs;
  loom_output x, out; /* input placeholder, inference output */
  int nvars;
  char **var_names;
  int *var_ndim;
  int64_t (*var_dims)[LOOM_MAX_DIMS];
  /* built at the first fit / evaluate (needs the label spec) */
  int has_labels;
  loom_output labels;
  loom_node *train_op;
  int nmet; /* loss + metrics */
  loom_output *train_vals, *eval_vals;
  loom_node *train_update, *eval_update, *train_reset, *eval_reset;
};

/* ------------------------------------------------------------ def helpers */
static void layer_clear(seq_layer *l) {
  loom__free(l->name);
  loom__free(l->padding);
  loom__free(l->activation);
}

static void def_clear(seq_def *d) {
  loom__free(d->feature);
  for (int i = 0; i < d->n; i++) layer_clear(&d->layers[i]);
  loom__free(d->layers);
  for (int i = 0; i < d->nmetrics; i++) loom__free(d->metrics[i]);
  loom__free(d->metrics);
  loom__free(d->metric_kind);
  memset(d, 0, sizeof *d);
}

static void clear_metrics(seq_def *d) {
  for (int i = 0; i < d->nmetrics; i++) loom__free(d->metrics[i]);
  loom__free(d->metrics);
  loom__free(d->metric_kind);
  d->metrics = NULL;
  d->metric_kind = NULL;
  d->nmetrics = 0;
}

static void def_free(void *p) {
  if (!p) return;
  def_clear(p);
  loom__free(p);
}

static char *dup_or_null(const char *s, int *oom) {
  if (!s) return NULL;
  char *c = loom__strdup(s);
  if (!c) *oom = 1;
  return c;
}

static seq_def *def_clone(const seq_def *d) {
  seq_def *c = loom__calloc(1, sizeof *c);
  if (!c) return NULL;
  *c = *d;
  c->feature = NULL;
  c->layers = NULL;
  c->metrics = NULL;
  c->metric_kind = NULL;
  c->n = c->cap = c->nmetrics = 0;
  int oom = 0;
  c->feature = dup_or_null(d->feature, &oom);
  c->layers = loom__calloc((size_t)(d->n ? d->n : 1), sizeof *c->layers);
  c->metrics = loom__calloc((size_t)(d->nmetrics ? d->nmetrics : 1), sizeof(char *));
  c->metric_kind = loom__calloc((size_t)(d->nmetrics ? d->nmetrics : 1), sizeof(int));
  if (!c->layers || !c->metrics || !c->metric_kind) oom = 1;
  for (int i = 0; !oom && i < d->n; i++) {
    seq_layer *l = &c->layers[c->n++];
    *l = d->layers[i];
    l->name = l->padding = l->activation = NULL;
    l->name = dup_or_null(d->layers[i].name, &oom);
    l->padding = dup_or_null(d->layers[i].padding, &oom);
    l->activation = dup_or_null(d->layers[i].activation, &oom);
    l->dense.activation = l->conv.activation = l->activation;
    l->conv.padding = d->layers[i].conv.padding ? (l->padding ? l->padding : "valid") : NULL;
  }
  c->cap = c->n;
  for (int i = 0; !oom && i < d->nmetrics; i++) {
    c->metrics[i] = dup_or_null(d->metrics[i], &oom);
    c->metric_kind[i] = d->metric_kind[i];
    c->nmetrics++;
  }
  if (oom) {
    def_free(c);
    return NULL;
  }
  return c;
}

static const char *dims_str(char *buf, size_t cap, loom_output x) {
  int64_t d[LOOM_MAX_DIMS];
  int nd = loom_output_dims(x, d);
  return loom__dims_str(buf, cap, nd, d);
}

/* "layer 3 (conv2d 'conv2d_1')" */
static const char *layer_desc(char *buf, size_t cap, const seq_def *d, int i) {
  snprintf(buf, cap, "layer %d (%s '%s')", i, KIND_NAMES[d->layers[i].kind], d->layers[i].name);
  return buf;
}

/* "(the output of layer 2, flatten 'flatten')" or "(the model's input 'x')" */
static const char *from_desc(char *buf, size_t cap, const seq_def *d, int i) {
  if (i == 0)
    snprintf(buf, cap, "(the model's input '%s')", d->feature);
  else
    snprintf(buf, cap, "(the output of layer %d, %s '%s')", i - 1, KIND_NAMES[d->layers[i - 1].kind],
             d->layers[i - 1].name);
  return buf;
}

/* ------------------------------------------------------------ building */
static int is_int(loom_dtype dt) { return dt == LOOM_I32 || dt == LOOM_I64; }

static loom_code graph_err(loom_graph *g, const seq_def *d, int i, loom_status *st) {
  loom_status *tmp = loom_status_new();
  loom_code rc = loom_graph_status(g, tmp);
  char ld[256];
  if (i >= 0)
    rc = loom_status_set(st, rc, "%s: %s", layer_desc(ld, sizeof ld, d, i), loom_status_message(tmp));
  else
    rc = loom_status_set(st, rc, "%s", loom_status_message(tmp));
  loom_status_free(tmp);
  return rc;
}

/* Builds the layers on x; *out is the last layer's output. */
static loom_code seq_build(const seq_def *d, loom_graph *g, loom_output x, int training, int reuse, loom_output *out,
                           loom_status *st) {
  char ld[256], fd[256], ds[128];
  loom_output h = x;
  for (int i = 0; i < d->n; i++) {
    const seq_layer *l = &d->layers[i];
    int64_t dims[LOOM_MAX_DIMS];
    int nd = loom_output_dims(h, dims);
    const char *need = NULL;
    switch (l->kind) {
      case L_DENSE:
        if (nd < 2 || dims[nd - 1] < 0) need = "a rank >= 2 input [batch, ..., features] with known features";
        break;
      case L_CONV2D:
      case L_MAXPOOL:
      case L_AVGPOOL:
        if (nd != 4) need = "a rank-4 input [batch, height, width, channels]";
        break;
      case L_BATCHNORM:
        if (nd < 2 || dims[nd - 1] < 0) need = "a rank >= 2 input with known channels (last dim)";
        break;
      case L_EMBEDDING:
        if (!is_int(loom_output_dtype(h))) need = "integer ids (int32 or int64)";
        break;
      default:
        break;
    }
    if (!need && (l->kind == L_DENSE || l->kind == L_CONV2D || l->kind == L_BATCHNORM) && is_int(loom_output_dtype(h)))
      need = "a float input";
    if (need)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: expects %s, got %s rank %d %s %s",
                             layer_desc(ld, sizeof ld, d, i), need, loom_dtype_name(loom_output_dtype(h)), nd,
                             dims_str(ds, sizeof ds, h), from_desc(fd, sizeof fd, d, i));
    switch (l->kind) {
      case L_DENSE: {
        loom_dense_options o = l->dense;
        o.reuse = reuse;
        h = loom_layers_dense(g, h, l->units, &o, l->name);
        break;
      }
      case L_CONV2D: {
        loom_conv2d_options o = l->conv;
        o.reuse = reuse;
        h = loom_layers_conv2d(g, h, l->units, l->k, &o, l->name);
        break;
      }
      case L_MAXPOOL:
        h = loom_layers_max_pooling2d(g, h, l->k, l->s, l->padding, l->name);
        break;
      case L_AVGPOOL:
        h = loom_layers_average_pooling2d(g, h, l->k, l->s, l->padding, l->name);
        break;
      case L_FLATTEN:
        h = loom_layers_flatten(g, h, l->name);
        break;
      case L_RESHAPE: {
        int64_t rd[LOOM_MAX_DIMS];
        rd[0] = -1;
        int64_t have = 1, want = 1, unknown = 0;
        for (int k = 1; k < nd; k++) have = dims[k] < 0 || have < 0 ? -1 : have * dims[k];
        for (int k = 0; k < l->ndim; k++) {
          rd[k + 1] = l->dims[k];
          if (l->dims[k] < 0)
            unknown++;
          else
            want *= l->dims[k];
        }
        if (have >= 0 && ((unknown == 0 && want != have) || (unknown == 1 && (want == 0 || have % want != 0))))
          return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                                 "%s: cannot reshape %s (%lld values per example) to [batch%s] %s",
                                 layer_desc(ld, sizeof ld, d, i), dims_str(ds, sizeof ds, h), (long long)have,
                                 loom__dims_str(fd, sizeof fd, l->ndim, l->dims), "");
        loom_graph_push_scope(g, l->name);
        h = loom_reshape(g, h, l->ndim + 1, rd, NULL);
        loom_graph_pop_scope(g);
        break;
      }
      case L_DROPOUT: {
        loom_dropout_options o = loom_dropout_options_default();
        o.training = training;
        o.seed = l->seed;
        h = loom_layers_dropout(g, h, l->rate, &o, l->name);
        break;
      }
      case L_BATCHNORM: {
        loom_batch_norm_options o = l->bn;
        o.training = training;
        o.training_flag = (loom_output){NULL, 0};
        o.reuse = reuse;
        h = loom_layers_batch_normalization(g, h, &o, l->name);
        break;
      }
      case L_EMBEDDING: {
        loom_variable_scope_push(g, l->name, reuse);
        int64_t ed[2] = {l->input_dim, l->units};
        loom_variable *v = loom_get_variable(g, "embeddings", LOOM_F32, 2, ed, &l->init, 1);
        h = loom_embedding_lookup(g, loom_variable_output(v), h, "embedding_lookup");
        loom_variable_scope_pop(g);
        break;
      }
      default:
        break;
    }
    if (loom_graph_status(g, NULL) != LOOM_OK) return graph_err(g, d, i, st);
  }
  *out = h;
  return LOOM_OK;
}

/* Labels of rank one less than the output whose last dim is 1 get that dim. */
static loom_output fit_labels(loom_graph *g, loom_output labels, loom_output out) {
  int64_t od[LOOM_MAX_DIMS];
  int on = loom_output_dims(out, od), ln = loom_output_ndim(labels);
  if (on >= 1 && ln == on - 1 && od[on - 1] == 1) labels = loom_expand_dims(g, labels, -1, "labels_expanded");
  if (loom_output_dtype(labels) != loom_output_dtype(out)) labels = loom_cast(g, labels, loom_output_dtype(out), "labels_cast");
  return labels;
}

static loom_output clipped_log(loom_graph *g, loom_output p) {
  loom_output lo = loom_const_f32(g, 1e-7f, "epsilon"), hi = loom_const_f32(g, 1.0f - 1e-7f, "one_minus_epsilon");
  return loom_log(g, loom_clip_by_value(g, p, lo, hi, "clipped"), "log_probabilities");
}

static loom_output seq_loss(const seq_def *d, loom_graph *g, loom_output labels, loom_output out) {
  loom_output none = {NULL, 0}, loss = none;
  const int red = LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
  switch (d->loss_kind) {
    case LOSS_SPARSE_CE:
      loss = loom_losses_sparse_softmax_cross_entropy(g, labels, d->from_logits ? out : clipped_log(g, out), none,
                                                      "sparse_categorical_crossentropy", "", red);
      break;
    case LOSS_CE:
      loss = loom_losses_softmax_cross_entropy(g, loom_cast(g, labels, loom_output_dtype(out), NULL),
                                               d->from_logits ? out : clipped_log(g, out), none, 0,
                                               "categorical_crossentropy", "", red);
      break;
    case LOSS_BINARY_CE: {
      loom_output y = fit_labels(g, labels, out);
      loss = d->from_logits ? loom_losses_sigmoid_cross_entropy(g, y, out, none, 0, "binary_crossentropy", "", red)
                            : loom_losses_log_loss(g, y, out, none, 1e-7, "binary_crossentropy", "", red);
      break;
    }
    case LOSS_MSE:
      loss = loom_losses_mean_squared_error(g, fit_labels(g, labels, out), out, none, "mean_squared_error", "", red);
      break;
    case LOSS_MAE:
      loss = loom_losses_absolute_difference(g, fit_labels(g, labels, out), out, none, "mean_absolute_error", "", red);
      break;
  }
  int nreg = 0;
  loom_get_collection(g, LOOM_REGULARIZATION_LOSSES, &nreg);
  if (nreg > 0) loss = loom_add(g, loss, loom_losses_get_regularization_loss(g, NULL, "regularization_loss"), "total_loss");
  return loss;
}

/* The compiled metrics on (labels, out); names NULL: TF's unique default
 * names (the direct graph builds them twice). */
static loom_code seq_metrics(const seq_def *d, loom_graph *g, loom_output labels, loom_output out, int named,
                             loom_metric *mets, loom_status *st) {
  loom_output none = {NULL, 0};
  for (int i = 0; i < d->nmetrics; i++) {
    const char *name = named ? d->metrics[i] : NULL;
    int nd = loom_output_ndim(out);
    switch (d->metric_kind[i]) {
      case MET_ACCURACY:
        if (d->loss_kind == LOSS_SPARSE_CE) {
          mets[i] = loom_metrics_accuracy(g, labels, loom_argmax(g, out, nd - 1, LOOM_I64, "predicted_class"), none,
                                          name);
        } else if (d->loss_kind == LOSS_CE) {
          mets[i] = loom_metrics_accuracy(g, loom_argmax(g, labels, loom_output_ndim(labels) - 1, LOOM_I64, "label_class"),
                                          loom_argmax(g, out, nd - 1, LOOM_I64, "predicted_class"), none,
                                          name);
        } else if (d->loss_kind == LOSS_BINARY_CE) {
          loom_output th = loom_const_f32(g, d->from_logits ? 0.0f : 0.5f, "threshold");
          loom_output y = fit_labels(g, labels, out);
          mets[i] = loom_metrics_accuracy(g, y, loom_greater(g, out, th, "predicted_positive"), none,
                                          name);
        } else {
          return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                                 "loom_sequential_compile: metric '%s' needs a classification loss (got a regression loss)",
                                 d->metrics[i]);
        }
        break;
      case MET_MSE:
        mets[i] = loom_metrics_mean_squared_error(g, fit_labels(g, labels, out), out, none, name);
        break;
      case MET_MAE:
        mets[i] = loom_metrics_mean_absolute_error(g, fit_labels(g, labels, out), out, none, name);
        break;
    }
  }
  return loom_graph_status(g, st);
}

static loom_optimizer *seq_optimizer(const seq_def *d, loom_graph *g) {
  if (d->opt_fn) return d->opt_fn(g, d->opt_user);
  loom_output lr = loom_const_f32(g, (float)d->lr, "learning_rate");
  switch (d->opt_kind) {
    case OPT_SGD:
      return loom_optimizer_sgd(lr);
    case OPT_ADAGRAD:
      return loom_optimizer_adagrad(lr, NULL);
    case OPT_RMSPROP: {
      loom_rmsprop_options o = loom_rmsprop_options_default();
      o.epsilon = 1e-7; /* Keras' RMSprop: its mean square starts at 0 */
      o.initial_rms_value = 0.0;
      return loom_optimizer_rmsprop(lr, &o);
    }
    case OPT_FTRL:
      return loom_optimizer_ftrl(lr, NULL);
    case OPT_ADADELTA: {
      loom_adadelta_options o = loom_adadelta_options_default();
      o.epsilon = 1e-7;
      return loom_optimizer_adadelta(lr, &o);
    }
    default: {
      loom_adam_options o = loom_adam_options_default();
      o.epsilon = 1e-7;
      return loom_optimizer_adam(lr, &o);
    }
  }
}

/* The train op: minimise loss (after the update ops, batch normalization's
 * moving statistics), incrementing global_step. */
static loom_node *seq_train_op(const seq_def *d, loom_graph *g, loom_output loss, loom_variable *gs, loom_status *st) {
  loom_optimizer *opt = seq_optimizer(d, g);
  if (!opt) {
    if (loom_graph_status(g, st) == LOOM_OK)
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential: the optimizer factory returned NULL");
    return NULL;
  }
  loom_node *u = loom_group_collection(g, LOOM_UPDATE_OPS, "update_ops");
  if (u) loom_graph_push_control_deps(g, 1, &u);
  loom_node *t = loom_optimizer_minimize(opt, g, loss, 0, NULL, gs, NULL);
  if (u) loom_graph_pop_control_deps(g);
  loom_optimizer_free(opt);
  if (!t) loom_graph_status(g, st);
  return t;
}

/* The input feature of a features map: by name, else the only dense entry. */
static loom_output pick_feature(const seq_def *d, const loom_features *f, loom_status *st) {
  loom_output x = loom__features_lookup(f, d->feature); /* absent: the fallback below */
  if (x.node) return x;
  int n = loom_features_count(f), found = -1, ndense = 0;
  for (int i = 0; i < n; i++)
    if (!loom_features_is_sparse(f, i)) {
      ndense++;
      found = i;
    }
  if (ndense == 1) return loom_features_at(f, found);
  loom_status_set(st, LOOM_INVALID_ARGUMENT,
                  "loom_sequential: no feature '%s' among the %d features (and not exactly one dense feature to use instead)",
                  d->feature, n);
  return (loom_output){NULL, 0};
}

/* ------------------------------------------------------------ public: model */
loom_sequential *loom_sequential_new(loom_status *st) {
  loom_sequential *m = loom__calloc(1, sizeof *m);
  if (!m) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  m->d.feature = loom__strdup("x");
  m->d.dtype = LOOM_F32;
  m->d.from_logits = 1;
  if (!m->d.feature) {
    loom__free(m);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  return m;
}

static void direct_free(loom_sequential *m) {
  loom_session_free(m->s);
  loom_graph_free(m->g);
  for (int i = 0; i < m->nvars; i++) loom__free(m->var_names[i]);
  loom__free(m->var_names);
  loom__free(m->var_ndim);
  loom__free(m->var_dims);
  loom__free(m->train_vals);
  loom__free(m->eval_vals);
  m->s = NULL;
  m->g = NULL;
  m->nvars = 0;
  m->var_names = NULL;
  m->var_ndim = NULL;
  m->var_dims = NULL;
  m->train_vals = m->eval_vals = NULL;
}

void loom_sequential_free(loom_sequential *m) {
  if (!m) return;
  direct_free(m);
  def_clear(&m->d);
  loom__free(m);
}

loom_code loom_sequential_set_input(loom_sequential *m, const char *feature, loom_dtype dtype, int ndim,
                                    const int64_t *dims, loom_status *st) {
  if (!m) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_set_input: model is NULL");
  if (m->compiled) return loom_status_set(st, LOOM_FAILED_PRECONDITION, "loom_sequential_set_input: the model is compiled");
  if (ndim < 0 || ndim >= LOOM_MAX_DIMS || (ndim > 0 && !dims))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_set_input: bad rank %d (0..%d)", ndim,
                           LOOM_MAX_DIMS - 1);
  for (int i = 0; i < ndim; i++)
    if (dims[i] <= 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_set_input: dim %d is %lld (every dim must be known and > 0)",
                             i, (long long)dims[i]);
  if (dtype != LOOM_F32 && dtype != LOOM_F64 && !is_int(dtype))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_set_input: dtype %s (float32, float64, int32 or int64)",
                           loom_dtype_name(dtype));
  char *f = loom__strdup(feature && *feature ? feature : "x");
  if (!f) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  loom__free(m->d.feature);
  m->d.feature = f;
  m->d.dtype = dtype;
  m->d.ndim = ndim;
  for (int i = 0; i < ndim; i++) m->d.dims[i] = dims[i];
  m->d.has_input = 1;
  return LOOM_OK;
}

/* A new layer slot with its (unique) name, or NULL with st set. */
static seq_layer *add_layer(loom_sequential *m, int kind, const char *name, loom_status *st) {
  if (!m) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_add_%s: model is NULL", KIND_NAMES[kind]);
    return NULL;
  }
  if (m->compiled) {
    loom_status_set(st, LOOM_FAILED_PRECONDITION, "loom_sequential_add_%s: the model is already compiled",
                    KIND_NAMES[kind]);
    return NULL;
  }
  char buf[256];
  if (name && *name) {
    for (int i = 0; i < m->d.n; i++)
      if (!strcmp(m->d.layers[i].name, name)) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "layer %d (%s): the name '%s' is taken by layer %d", m->d.n,
                        KIND_NAMES[kind], name, i);
        return NULL;
      }
    snprintf(buf, sizeof buf, "%s", name);
  } else {
    for (int k = 0;; k++) {
      if (k == 0)
        snprintf(buf, sizeof buf, "%s", KIND_NAMES[kind]);
      else
        snprintf(buf, sizeof buf, "%s_%d", KIND_NAMES[kind], k);
      int used = 0;
      for (int i = 0; i < m->d.n && !used; i++) used = !strcmp(m->d.layers[i].name, buf);
      if (!used) break;
    }
  }
  if (m->d.n == m->d.cap) {
    int cap = m->d.cap ? 2 * m->d.cap : 8;
    seq_layer *l = loom__realloc(m->d.layers, sizeof *l * (size_t)cap);
    if (!l) {
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
      return NULL;
    }
    m->d.layers = l;
    m->d.cap = cap;
  }
  seq_layer *l = &m->d.layers[m->d.n];
  memset(l, 0, sizeof *l);
  l->kind = kind;
  l->name = loom__strdup(buf);
  if (!l->name) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  return l;
}

static int commit_layer(loom_sequential *m, seq_layer *l, int ok, const char *msg, loom_status *st) {
  if (!ok) {
    if (msg)
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "layer %d (%s '%s'): %s", m->d.n, KIND_NAMES[l->kind], l->name, msg);
    layer_clear(l);
    return -1;
  }
  return m->d.n++;
}

static int bad_activation(const char *a, char *msg, size_t cap) {
  if (loom_activation_valid(a)) return 0;
  snprintf(msg, cap, "Unknown activation function: %s", a);
  return 1;
}

/* The caller's layer options over the defaults in dst (loom__opts_take); a
 * bad struct_size is written to msg. */
static void take_layer_opts(void *dst, size_t size, const void *src, const char *type, char *msg, size_t cap) {
  if (!loom__opts_take(dst, size, src, NULL, type, NULL)) return;
  loom_status *s = loom_status_new();
  if (loom__opts_take(dst, size, src, NULL, type, s))
    snprintf(msg, cap, "%s", s ? loom_status_message(s) : "bad options struct_size");
  loom_status_free(s);
}

int loom_sequential_add_dense(loom_sequential *m, int64_t units, const loom_dense_options *o, const char *name,
                              loom_status *st) {
  seq_layer *l = add_layer(m, L_DENSE, name, st);
  if (!l) return -1;
  char msg[256] = "";
  l->units = units;
  l->dense = loom_dense_options_default();
  take_layer_opts(&l->dense, sizeof l->dense, o, "loom_dense_options", msg, sizeof msg);
  int oom = 0;
  l->activation = dup_or_null(l->dense.activation, &oom);
  l->dense.activation = l->activation;
  if (*msg) {
  } else if (oom) snprintf(msg, sizeof msg, "out of memory");
  else if (units <= 0) snprintf(msg, sizeof msg, "units must be positive, got %lld", (long long)units);
  else bad_activation(l->activation, msg, sizeof msg);
  return commit_layer(m, l, !*msg, msg, st);
}

int loom_sequential_add_conv2d(loom_sequential *m, int64_t filters, const int64_t kernel_size[2],
                               const loom_conv2d_options *o, const char *name, loom_status *st) {
  seq_layer *l = add_layer(m, L_CONV2D, name, st);
  if (!l) return -1;
  char msg[256] = "";
  int oom = 0;
  l->units = filters;
  l->conv = loom_conv2d_options_default();
  take_layer_opts(&l->conv, sizeof l->conv, o, "loom_conv2d_options", msg, sizeof msg);
  l->activation = dup_or_null(l->conv.activation, &oom);
  l->padding = dup_or_null(l->conv.padding ? l->conv.padding : "valid", &oom);
  l->conv.activation = l->activation;
  l->conv.padding = l->padding;
  if (kernel_size) l->k[0] = kernel_size[0], l->k[1] = kernel_size[1];
  if (*msg) {
  } else if (oom) snprintf(msg, sizeof msg, "out of memory");
  else if (filters <= 0) snprintf(msg, sizeof msg, "filters must be positive, got %lld", (long long)filters);
  else if (!kernel_size || l->k[0] <= 0 || l->k[1] <= 0) snprintf(msg, sizeof msg, "kernel_size must be two positive sizes");
  else bad_activation(l->activation, msg, sizeof msg);
  return commit_layer(m, l, !*msg, msg, st);
}

static int add_pool(loom_sequential *m, int kind, const int64_t pool_size[2], const int64_t strides[2],
                    const char *padding, const char *name, loom_status *st) {
  seq_layer *l = add_layer(m, kind, name, st);
  if (!l) return -1;
  char msg[256] = "";
  int oom = 0;
  if (pool_size) l->k[0] = pool_size[0], l->k[1] = pool_size[1];
  l->s[0] = strides ? strides[0] : l->k[0];
  l->s[1] = strides ? strides[1] : l->k[1];
  l->padding = dup_or_null(padding ? padding : "valid", &oom);
  if (oom) snprintf(msg, sizeof msg, "out of memory");
  else if (!pool_size || l->k[0] <= 0 || l->k[1] <= 0) snprintf(msg, sizeof msg, "pool_size must be two positive sizes");
  else if (l->s[0] <= 0 || l->s[1] <= 0) snprintf(msg, sizeof msg, "strides must be positive");
  return commit_layer(m, l, !*msg, msg, st);
}

int loom_sequential_add_max_pooling2d(loom_sequential *m, const int64_t pool_size[2], const int64_t strides[2],
                                      const char *padding, const char *name, loom_status *st) {
  return add_pool(m, L_MAXPOOL, pool_size, strides, padding, name, st);
}

int loom_sequential_add_average_pooling2d(loom_sequential *m, const int64_t pool_size[2], const int64_t strides[2],
                                          const char *padding, const char *name, loom_status *st) {
  return add_pool(m, L_AVGPOOL, pool_size, strides, padding, name, st);
}

int loom_sequential_add_flatten(loom_sequential *m, const char *name, loom_status *st) {
  seq_layer *l = add_layer(m, L_FLATTEN, name, st);
  return l ? commit_layer(m, l, 1, NULL, st) : -1;
}

int loom_sequential_add_reshape(loom_sequential *m, int ndim, const int64_t *dims, const char *name, loom_status *st) {
  seq_layer *l = add_layer(m, L_RESHAPE, name, st);
  if (!l) return -1;
  char msg[256] = "";
  int unknown = 0;
  if (ndim < 1 || ndim >= LOOM_MAX_DIMS || !dims) {
    snprintf(msg, sizeof msg, "target shape must have 1..%d dims", LOOM_MAX_DIMS - 1);
  } else {
    l->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
      l->dims[i] = dims[i];
      if (dims[i] < 0) unknown++;
      if (dims[i] == 0 || dims[i] < -1) snprintf(msg, sizeof msg, "target dim %d is %lld", i, (long long)dims[i]);
    }
    if (unknown > 1) snprintf(msg, sizeof msg, "at most one target dim may be -1");
  }
  return commit_layer(m, l, !*msg, msg, st);
}

int loom_sequential_add_dropout(loom_sequential *m, double rate, int64_t seed, const char *name, loom_status *st) {
  seq_layer *l = add_layer(m, L_DROPOUT, name, st);
  if (!l) return -1;
  char msg[128] = "";
  l->rate = rate;
  l->seed = seed;
  if (!(rate >= 0 && rate < 1)) snprintf(msg, sizeof msg, "rate must be in [0, 1), got %g", rate);
  return commit_layer(m, l, !*msg, msg, st);
}

int loom_sequential_add_batch_norm(loom_sequential *m, const loom_batch_norm_options *o, const char *name,
                                   loom_status *st) {
  seq_layer *l = add_layer(m, L_BATCHNORM, name, st);
  if (!l) return -1;
  char msg[256] = "";
  l->bn = loom_batch_norm_options_default();
  take_layer_opts(&l->bn, sizeof l->bn, o, "loom_batch_norm_options", msg, sizeof msg);
  return commit_layer(m, l, !*msg, msg, st);
}

int loom_sequential_add_embedding(loom_sequential *m, int64_t input_dim, int64_t output_dim,
                                  const loom_initializer *initializer, const char *name, loom_status *st) {
  seq_layer *l = add_layer(m, L_EMBEDDING, name, st);
  if (!l) return -1;
  char msg[128] = "";
  l->input_dim = input_dim;
  l->units = output_dim;
  l->init = initializer ? *initializer : loom_init_random_uniform(-0.05, 0.05, LOOM_SEED_NONE);
  if (input_dim <= 0 || output_dim <= 0)
    snprintf(msg, sizeof msg, "input_dim and output_dim must be positive, got %lld and %lld", (long long)input_dim,
             (long long)output_dim);
  return commit_layer(m, l, !*msg, msg, st);
}

int loom_sequential_num_layers(const loom_sequential *m) { return m ? m->d.n : 0; }
const char *loom_sequential_layer_name(const loom_sequential *m, int i) {
  return m && i >= 0 && i < m->d.n ? m->d.layers[i].name : NULL;
}
const char *loom_sequential_layer_kind(const loom_sequential *m, int i) {
  return m && i >= 0 && i < m->d.n ? KIND_NAMES[m->d.layers[i].kind] : NULL;
}

/* ------------------------------------------------------------ compile */
loom_sequential_compile_options loom_sequential_compile_options_default(void) {
  loom_sequential_compile_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.from_logits = 1;
  return o;
}

static loom_code run_target(loom_session *s, loom_node *n, loom_status *st) {
  if (!n) return LOOM_OK;
  return loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &n, 1, st);
}

/* Initialises the global variables not initialised yet. */
static loom_code init_new_globals(loom_sequential *m, loom_status *st) {
  int n = 0;
  loom_variable *const *vars = loom_global_variables(m->g, &n);
  loom_variable **todo = loom__calloc((size_t)(n ? n : 1), sizeof *todo);
  if (!todo) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!loom_session_variable_initialized(m->s, loom_variable_name(vars[i]))) todo[k++] = vars[i];
  loom_code rc = k ? run_target(m->s, loom_variables_initializer(m->g, k, todo, NULL), st) : LOOM_OK;
  loom__free(todo);
  return rc;
}

loom_code loom_sequential_compile(loom_sequential *m, const loom_sequential_compile_options *o, loom_status *st) {
  if (!m) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_compile: model is NULL");
  if (m->compiled) return loom_status_set(st, LOOM_FAILED_PRECONDITION, "loom_sequential_compile: already compiled");
  loom_sequential_compile_options c = loom_sequential_compile_options_default();
  loom_code orc = LOOM__OPTS_TAKE(&c, o, "loom_sequential_compile", loom_sequential_compile_options, st);
  if (orc) return orc;
  if (m->d.n == 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_compile: the model has no layers (an empty stack)");
  if (!m->d.has_input)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "loom_sequential_compile: no input shape (call loom_sequential_set_input first)");
  if (!c.loss) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_compile: loss is required (" LOSS_LIST ")");
  int lk = -1;
  for (size_t i = 0; i < sizeof LOSSES / sizeof LOSSES[0]; i++)
    if (!strcmp(LOSSES[i].name, c.loss)) lk = LOSSES[i].kind;
  if (lk < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_compile: unknown loss '%s' (" LOSS_LIST ")", c.loss);
  int ok_ = -1;
  double lr = 0;
  const char *oname = c.optimizer ? c.optimizer : "Adam";
  for (size_t i = 0; i < sizeof OPTS / sizeof OPTS[0]; i++)
    if (!strcmp(OPTS[i].name, oname)) ok_ = OPTS[i].kind, lr = OPTS[i].lr;
  if (ok_ < 0 && !c.optimizer_fn)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_compile: unknown optimizer '%s' (" OPT_LIST ")", oname);
  if (c.learning_rate < 0 || c.learning_rate != c.learning_rate)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_compile: learning_rate must be >= 0, got %g",
                           c.learning_rate);
  if (c.nmetrics < 0 || (c.nmetrics > 0 && !c.metrics))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_compile: metrics is NULL");
  clear_metrics(&m->d);
  m->d.metrics = loom__calloc((size_t)(c.nmetrics ? c.nmetrics : 1), sizeof(char *));
  m->d.metric_kind = loom__calloc((size_t)(c.nmetrics ? c.nmetrics : 1), sizeof(int));
  if (!m->d.metrics || !m->d.metric_kind) {
    clear_metrics(&m->d);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  loom_code rc = LOOM_OK;
  for (int i = 0; i < c.nmetrics && rc == LOOM_OK; i++) {
    int mk = -1;
    for (size_t k = 0; c.metrics[i] && k < sizeof METRICS / sizeof METRICS[0]; k++)
      if (!strcmp(METRICS[k].name, c.metrics[i])) mk = METRICS[k].kind;
    for (int k = 0; k < i && mk >= 0; k++)
      if (!strcmp(m->d.metrics[k], c.metrics[i]))
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_compile: metric '%s' given twice", c.metrics[i]);
    if (mk < 0)
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_compile: unknown metric '%s' (" METRIC_LIST ")",
                           c.metrics[i] ? c.metrics[i] : "(null)");
    else if (mk == MET_ACCURACY && (lk == LOSS_MSE || lk == LOSS_MAE))
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "loom_sequential_compile: metric '%s' needs a classification loss (the loss is '%s')",
                           c.metrics[i], c.loss);
    if (rc != LOOM_OK) break;
    m->d.metrics[i] = loom__strdup(c.metrics[i]);
    m->d.metric_kind[i] = mk;
    m->d.nmetrics++;
    if (!m->d.metrics[i]) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (rc != LOOM_OK) {
    clear_metrics(&m->d);
    return rc;
  }
  m->d.loss_kind = lk;
  m->d.from_logits = c.from_logits != 0;
  m->d.opt_kind = ok_;
  m->d.lr = c.learning_rate > 0 ? c.learning_rate : lr;
  m->d.opt_fn = c.optimizer_fn;
  m->d.opt_user = c.optimizer_user;
  m->num_threads = c.num_threads;

  /* the direct graph: input, inference tower, variables, session */
  m->g = loom_graph_new();
  if (!m->g) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  if (c.seed != LOOM_SEED_NONE) loom_graph_set_random_seed(m->g, c.seed);
  m->gs = loom_get_or_create_global_step(m->g);
  int64_t xd[LOOM_MAX_DIMS];
  xd[0] = -1;
  for (int i = 0; i < m->d.ndim; i++) xd[i + 1] = m->d.dims[i];
  m->x = loom_placeholder(m->g, m->d.dtype, m->d.ndim + 1, xd, m->d.feature);
  rc = seq_build(&m->d, m->g, m->x, 0, LOOM_REUSE_AUTO, &m->out, st);
  if (rc == LOOM_OK) rc = loom_graph_status(m->g, st);
  if (rc == LOOM_OK) {
    int n = 0;
    loom_variable *const *vars = loom_global_variables(m->g, &n);
    m->var_names = loom__calloc((size_t)(n ? n : 1), sizeof(char *));
    m->var_ndim = loom__calloc((size_t)(n ? n : 1), sizeof(int));
    m->var_dims = loom__calloc((size_t)(n ? n : 1), sizeof *m->var_dims);
    if (!m->var_names || !m->var_ndim || !m->var_dims) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    for (int i = 0; i < n && rc == LOOM_OK; i++) {
      if (vars[i] == m->gs) continue;
      m->var_ndim[m->nvars] = loom_variable_dims(vars[i], m->var_dims[m->nvars]);
      m->var_names[m->nvars] = loom__strdup(loom_variable_name(vars[i]));
      if (!m->var_names[m->nvars++]) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  if (rc == LOOM_OK) {
    loom_session_options so = loom_session_options_default();
    so.num_threads = m->num_threads;
    m->s = loom_session_new(m->g, &so, st);
    if (!m->s) rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  }
  if (rc == LOOM_OK) rc = run_target(m->s, loom_global_variables_initializer(m->g), st);
  if (rc != LOOM_OK) {
    direct_free(m);
    clear_metrics(&m->d);
    return rc;
  }
  m->compiled = 1;
  return LOOM_OK;
}

/* ------------------------------------------------------------ variables */
int loom_sequential_num_variables(const loom_sequential *m) { return m ? m->nvars : 0; }
const char *loom_sequential_variable_name(const loom_sequential *m, int i) {
  return m && i >= 0 && i < m->nvars ? m->var_names[i] : NULL;
}
int loom_sequential_variable_shape(const loom_sequential *m, int i, int64_t *dims) {
  if (!m || i < 0 || i >= m->nvars) return -1;
  for (int k = 0; dims && k < m->var_ndim[i]; k++) dims[k] = m->var_dims[i][k];
  return m->var_ndim[i];
}

static int var_index(const loom_sequential *m, const char *name) {
  for (int i = 0; name && i < m->nvars; i++)
    if (!strcmp(m->var_names[i], name)) return i;
  return -1;
}

static loom_code need_compiled(const loom_sequential *m, const char *fn, loom_status *st) {
  if (!m) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: model is NULL", fn);
  if (!m->compiled)
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "%s: the model is not compiled (call loom_sequential_compile)",
                           fn);
  return LOOM_OK;
}

loom_code loom_sequential_get_variable(loom_sequential *m, const char *name, loom_tensor **out, loom_status *st) {
  loom_code rc = need_compiled(m, "loom_sequential_get_variable", st);
  if (rc != LOOM_OK) return rc;
  if (var_index(m, name) < 0)
    return loom_status_set(st, LOOM_NOT_FOUND, "loom_sequential_get_variable: the model has no variable '%s'",
                           name ? name : "(null)");
  return loom_session_read_variable(m->s, name, out, st);
}

loom_code loom_sequential_set_variable(loom_sequential *m, const char *name, const loom_tensor *value,
                                       loom_status *st) {
  loom_code rc = need_compiled(m, "loom_sequential_set_variable", st);
  if (rc != LOOM_OK) return rc;
  if (var_index(m, name) < 0)
    return loom_status_set(st, LOOM_NOT_FOUND, "loom_sequential_set_variable: the model has no variable '%s'",
                           name ? name : "(null)");
  return loom_session_assign_variable(m->s, name, value, st);
}

loom_code loom_sequential_save_weights(loom_sequential *m, const char *path, loom_status *st) {
  loom_code rc = need_compiled(m, "loom_sequential_save_weights", st);
  if (rc != LOOM_OK) return rc;
  int n = m->nvars + 1;
  loom_tensor **ts = loom__calloc((size_t)n, sizeof *ts);
  const char **names = loom__calloc((size_t)n, sizeof *names);
  if (!ts || !names) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < n && rc == LOOM_OK; i++) {
    names[i] = i < m->nvars ? m->var_names[i] : loom_variable_name(m->gs);
    rc = loom_session_read_variable(m->s, names[i], &ts[i], st);
  }
  if (rc == LOOM_OK) rc = loom_checkpoint_write(path, n, names, (const loom_tensor *const *)ts, st);
  for (int i = 0; ts && i < n; i++) loom_tensor_free(ts[i]);
  loom__free(ts);
  loom__free(names);
  return rc;
}

/* ------------------------------------------------------------ direct loop */
/* The feature and label components of ds. */
static loom_code find_components(const loom_sequential *m, loom_dataset *ds, int need_label, int *fi, int *li,
                                 loom_status *st) {
  if (!ds) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential: dataset is NULL");
  int n = loom_dataset_num_components(ds);
  *li = loom_dataset_label_index(ds);
  *fi = loom_dataset_find(ds, m->d.feature);
  if (*fi < 0 || *fi == *li) {
    int found = -1, nf = 0;
    for (int i = 0; i < n; i++)
      if (i != *li) nf++, found = i;
    *fi = nf == 1 ? found : -1;
  }
  if (*fi < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "loom_sequential: the dataset has no component '%s' (and not exactly one feature component)",
                           m->d.feature);
  if (loom_dataset_component_row_splits(ds, *fi) >= 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential: the input component '%s' is ragged",
                           loom_dataset_component_name(ds, *fi));
  if (loom_dataset_component_dtype(ds, *fi) != m->d.dtype)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential: the input component '%s' is %s, the model's input is %s",
                           loom_dataset_component_name(ds, *fi), loom_dtype_name(loom_dataset_component_dtype(ds, *fi)),
                           loom_dtype_name(m->d.dtype));
  if (need_label && *li < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential: the dataset has no label component");
  return LOOM_OK;
}

/* Builds the label placeholder, the training tower, its train op and the
 * metrics of both towers (once, from ds's label spec). */
static loom_code ensure_labels(loom_sequential *m, loom_dataset *ds, int li, loom_status *st) {
  loom_dtype ldt = loom_dataset_component_dtype(ds, li);
  if (m->has_labels) {
    if (ldt != loom_output_dtype(m->labels))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential: the label component '%s' is %s; earlier labels were %s",
                             loom_dataset_component_name(ds, li), loom_dtype_name(ldt),
                             loom_dtype_name(loom_output_dtype(m->labels)));
    return LOOM_OK;
  }
  int64_t ld[LOOM_MAX_DIMS];
  int lnd = loom_dataset_component_shape(ds, li, ld);
  if (lnd >= 1) ld[0] = -1;
  loom_graph *g = m->g;
  m->labels = loom_placeholder(g, ldt, lnd, ld, loom_dataset_component_name(ds, li));
  loom_output train_out;
  loom_code rc = seq_build(&m->d, g, m->x, 1, LOOM_REUSE_AUTO, &train_out, st);
  if (rc != LOOM_OK) return rc;
  loom_output train_loss = seq_loss(&m->d, g, m->labels, train_out);
  loom_output eval_loss = seq_loss(&m->d, g, m->labels, m->out);
  if ((rc = loom_graph_status(g, st)) != LOOM_OK) return rc;
  m->train_op = seq_train_op(&m->d, g, train_loss, m->gs, st);
  if (!m->train_op) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  m->nmet = m->d.nmetrics + 1;
  m->train_vals = loom__calloc((size_t)m->nmet + 1, sizeof(loom_output));
  m->eval_vals = loom__calloc((size_t)m->nmet + 1, sizeof(loom_output));
  loom_metric *mets = loom__calloc((size_t)m->nmet, sizeof *mets);
  loom_node **ups = loom__calloc((size_t)m->nmet, sizeof *ups), **rs = loom__calloc((size_t)m->nmet, sizeof *rs);
  if (!m->train_vals || !m->eval_vals || !mets || !ups || !rs) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  for (int pass = 0; pass < 2 && rc == LOOM_OK; pass++) {
    loom_output none = {NULL, 0};
    mets[0] = loom_metrics_mean(g, pass ? eval_loss : train_loss, none, NULL);
    rc = seq_metrics(&m->d, g, m->labels, pass ? m->out : train_out, 0, mets + 1, st);
    loom_output *vals = pass ? m->eval_vals : m->train_vals;
    for (int i = 0; i < m->nmet; i++) {
      vals[i] = mets[i].value;
      ups[i] = mets[i].update.node;
      rs[i] = mets[i].reset;
    }
    vals[m->nmet] = loom_variable_output(m->gs);
    loom_node *u = loom_group(g, m->nmet, ups, pass ? "eval_update" : "train_metrics_update");
    loom_node *r = loom_group(g, m->nmet, rs, pass ? "eval_reset" : "train_metrics_reset");
    if (pass) m->eval_update = u, m->eval_reset = r;
    else m->train_update = u, m->train_reset = r;
  }
  loom__free(mets);
  loom__free(ups);
  loom__free(rs);
  if (rc == LOOM_OK) rc = loom_graph_status(g, st);
  if (rc == LOOM_OK) rc = init_new_globals(m, st);
  if (rc == LOOM_OK) rc = run_target(m->s, loom_local_variables_initializer(g), st);
  if (rc == LOOM_OK) m->has_labels = 1;
  return rc;
}

/* The names of a result: loss, the metrics, global_step. */
static loom_eval_result *read_result(loom_sequential *m, const loom_output *vals, loom_status *st) {
  int n = m->nmet + 1;
  loom_tensor **ts = loom__calloc((size_t)n, sizeof *ts);
  double *dv = loom__calloc((size_t)n, sizeof *dv);
  char **names = loom__calloc((size_t)n, sizeof *names);
  loom_eval_result *r = NULL;
  if (!ts || !dv || !names) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  } else if (loom_session_run(m->s, NULL, NULL, 0, vals, ts, n, NULL, 0, st) == LOOM_OK) {
    names[0] = "loss";
    for (int i = 0; i < m->d.nmetrics; i++) names[i + 1] = m->d.metrics[i];
    names[n - 1] = "global_step";
    for (int i = 0; i < n; i++) dv[i] = loom__tensor_scalar_f64(ts[i]);
    r = loom__eval_result_new(n, names, dv, (int64_t)dv[n - 1]);
    if (!r) loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (int i = 0; ts && i < n; i++) loom_tensor_free(ts[i]);
  loom__free(ts);
  loom__free(dv);
  loom__free(names);
  return r;
}

/* next batch: OK, OUT_OF_RANGE (end, st untouched) or an error. */
static loom_code next_batch(loom_dataset *ds, loom_tensor **vals, loom_status *st) {
  loom_status *tmp = loom_status_new();
  loom_code rc = loom_dataset_next(ds, vals, tmp);
  if (rc != LOOM_OK && rc != LOOM_OUT_OF_RANGE) loom_status_set(st, rc, "%s", loom_status_message(tmp));
  loom_status_free(tmp);
  return rc;
}

static void free_vals(loom_tensor **vals, int n) {
  for (int i = 0; vals && i < n; i++) loom_tensor_free(vals[i]);
  loom__free(vals);
}

loom_sequential_fit_options loom_sequential_fit_options_default(void) {
  loom_sequential_fit_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.epochs = 1;
  return o;
}

loom_code loom_sequential_fit(loom_sequential *m, loom_dataset *ds, const loom_sequential_fit_options *o,
                              loom_eval_result **history, loom_status *st) {
  loom_code rc = need_compiled(m, "loom_sequential_fit", st);
  if (rc != LOOM_OK) return rc;
  loom_sequential_fit_options f = loom_sequential_fit_options_default();
  if ((rc = LOOM__OPTS_TAKE(&f, o, "loom_sequential_fit", loom_sequential_fit_options, st)) != LOOM_OK) return rc;
  if (f.epochs < 1 || f.steps_per_epoch < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_fit: epochs must be >= 1 and steps_per_epoch >= 0 (got %lld, %lld)",
                           (long long)f.epochs, (long long)f.steps_per_epoch);
  int fi, li;
  if ((rc = find_components(m, ds, 1, &fi, &li, st)) != LOOM_OK) return rc;
  if ((rc = ensure_labels(m, ds, li, st)) != LOOM_OK) return rc;
  int nc = loom_dataset_num_components(ds);
  loom_tensor **vals = loom__calloc((size_t)nc, sizeof *vals);
  if (!vals) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  loom_output feeds[2] = {m->x, m->labels};
  loom_node *targets[2] = {m->train_op, m->train_update};
  int need_reset = 1;
  loom_eval_result *last = NULL;
  for (int64_t ep = 0; ep < f.epochs && rc == LOOM_OK; ep++) {
    if (need_reset && (rc = loom_dataset_reset(ds, st)) != LOOM_OK) break;
    if ((rc = run_target(m->s, m->train_reset, st)) != LOOM_OK) break;
    int64_t steps = 0;
    int ran_out = 0;
    while (f.steps_per_epoch == 0 || steps < f.steps_per_epoch) {
      rc = next_batch(ds, vals, st);
      if (rc == LOOM_OUT_OF_RANGE) {
        rc = LOOM_OK;
        ran_out = 1;
        break;
      }
      if (rc != LOOM_OK) break;
      loom_tensor *fv[2] = {vals[fi], vals[li]};
      if ((rc = loom_session_run(m->s, feeds, fv, 2, NULL, NULL, 0, targets, 2, st)) != LOOM_OK) break;
      steps++;
    }
    if (rc != LOOM_OK) break;
    if (steps == 0) {
      rc = loom_status_set(st, LOOM_OUT_OF_RANGE, "loom_sequential_fit: the dataset yielded no batch in epoch %lld",
                           (long long)ep + 1);
      break;
    }
    need_reset = f.steps_per_epoch == 0 || ran_out;
    loom_eval_result_free(last);
    last = read_result(m, m->train_vals, st);
    if (!last) {
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
      break;
    }
    if (f.verbose) {
      printf("Epoch %lld/%lld - %lld steps", (long long)ep + 1, (long long)f.epochs, (long long)steps);
      for (int i = 0; i < loom_eval_result_count(last); i++)
        if (strcmp(loom_eval_result_key(last, i), "global_step"))
          printf(" - %s: %.4f", loom_eval_result_key(last, i), loom_eval_result_value(last, i));
      printf("\n");
      fflush(stdout);
    }
  }
  free_vals(vals, nc);
  if (rc == LOOM_OK && history)
    *history = last;
  else
    loom_eval_result_free(last);
  return rc;
}

loom_code loom_sequential_evaluate(loom_sequential *m, loom_dataset *ds, int64_t steps, loom_eval_result **out,
                                   loom_status *st) {
  loom_code rc = need_compiled(m, "loom_sequential_evaluate", st);
  if (rc != LOOM_OK) return rc;
  if (!out) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_evaluate: out is NULL");
  int fi, li;
  if ((rc = find_components(m, ds, 1, &fi, &li, st)) != LOOM_OK) return rc;
  if ((rc = ensure_labels(m, ds, li, st)) != LOOM_OK) return rc;
  if ((rc = loom_dataset_reset(ds, st)) != LOOM_OK) return rc;
  if ((rc = run_target(m->s, m->eval_reset, st)) != LOOM_OK) return rc;
  int nc = loom_dataset_num_components(ds);
  loom_tensor **vals = loom__calloc((size_t)nc, sizeof *vals);
  if (!vals) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  loom_output feeds[2] = {m->x, m->labels};
  for (int64_t k = 0; steps <= 0 || k < steps; k++) {
    rc = next_batch(ds, vals, st);
    if (rc == LOOM_OUT_OF_RANGE) {
      rc = LOOM_OK;
      break;
    }
    if (rc != LOOM_OK) break;
    loom_tensor *fv[2] = {vals[fi], vals[li]};
    if ((rc = loom_session_run(m->s, feeds, fv, 2, NULL, NULL, 0, &m->eval_update, 1, st)) != LOOM_OK) break;
  }
  free_vals(vals, nc);
  if (rc != LOOM_OK) return rc;
  *out = read_result(m, m->eval_vals, st);
  return *out ? LOOM_OK : (loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL);
}

loom_code loom_sequential_predict_batch(loom_sequential *m, const loom_tensor *x, loom_tensor **out, loom_status *st) {
  loom_code rc = need_compiled(m, "loom_sequential_predict_batch", st);
  if (rc != LOOM_OK) return rc;
  if (!x || !out) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_predict_batch: x or out is NULL");
  loom_tensor *fx = (loom_tensor *)x; /* read only */
  return loom_session_run(m->s, &m->x, &fx, 1, &m->out, out, 1, NULL, 0, st);
}

loom_code loom_sequential_predict(loom_sequential *m, loom_dataset *ds, int64_t steps, loom_tensor **out,
                                  loom_status *st) {
  loom_code rc = need_compiled(m, "loom_sequential_predict", st);
  if (rc != LOOM_OK) return rc;
  if (!out) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_predict: out is NULL");
  int fi, li;
  if ((rc = find_components(m, ds, 0, &fi, &li, st)) != LOOM_OK) return rc;
  if ((rc = loom_dataset_reset(ds, st)) != LOOM_OK) return rc;
  int nc = loom_dataset_num_components(ds);
  loom_tensor **vals = loom__calloc((size_t)nc, sizeof *vals);
  if (!vals) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  loom_tensor *y = NULL;
  char *buf = NULL;
  size_t used = 0, cap = 0;
  int64_t rows = 0, od[LOOM_MAX_DIMS];
  int ond = 0;
  for (int64_t k = 0; steps <= 0 || k < steps; k++) {
    rc = next_batch(ds, vals, st);
    if (rc == LOOM_OUT_OF_RANGE) {
      rc = LOOM_OK;
      break;
    }
    if (rc != LOOM_OK) break;
    if ((rc = loom_session_run(m->s, &m->x, &vals[fi], 1, &m->out, &y, 1, NULL, 0, st)) != LOOM_OK) break;
    size_t nb = loom_tensor_nbytes(y);
    if (used + nb > cap) {
      size_t nc2 = cap ? 2 * cap : 4096;
      while (nc2 < used + nb) nc2 *= 2;
      char *b = loom__realloc(buf, nc2);
      if (!b) {
        rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
      buf = b;
      cap = nc2;
    }
    memcpy(buf + used, loom_tensor_data_const(y), nb);
    used += nb;
    ond = loom_tensor_ndim(y);
    for (int i = 0; i < ond; i++) od[i] = loom_tensor_dims(y)[i];
    rows += ond ? od[0] : 1;
  }
  if (rc == LOOM_OK && ond == 0 && rows == 0) {
    /* no batch: an empty [0, ...] output of the model's shape */
    ond = loom_output_dims(m->out, od);
    for (int i = 1; i < ond; i++)
      if (od[i] < 0) od[i] = 0;
  }
  if (rc == LOOM_OK) {
    if (ond > 0) od[0] = rows;
    loom_tensor *t = loom_tensor_new(loom_output_dtype(m->out), ond, od, st);
    if (!t) {
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
    } else {
      if (used) memcpy(loom_tensor_data(t), buf, used);
      *out = t;
    }
  }
  loom_tensor_free(y);
  loom__free(buf);
  free_vals(vals, nc);
  return rc;
}

/* ------------------------------------------------------------ estimator */
static loom_code seq_model_fn(loom_graph *g, const loom_features *features, loom_output labels, loom_mode mode,
                              const loom_params *params, const loom_run_config *config, loom_estimator_spec *spec,
                              void *user, loom_status *st) {
  (void)params;
  (void)config;
  const seq_def *d = user;
  loom_output x = pick_feature(d, features, st);
  if (!x.node) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  if (loom_output_dtype(x) != d->dtype) x = loom_cast(g, x, d->dtype, "input_cast");
  loom_output out;
  loom_code rc = seq_build(d, g, x, mode == LOOM_MODE_TRAIN, LOOM_REUSE_NONE, &out, st);
  if (rc != LOOM_OK) return rc;
  loom_spec_add_prediction(spec, d->layers[d->n - 1].name, out);
  if (mode == LOOM_MODE_PREDICT) return loom_graph_status(g, st);
  if (!labels.node) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential: the input_fn gave no labels");
  loom_output loss = seq_loss(d, g, labels, out);
  if ((rc = loom_graph_status(g, st)) != LOOM_OK) return rc;
  loom_spec_set_loss(spec, loss);
  if (mode == LOOM_MODE_EVAL) {
    loom_metric *mets = loom__calloc((size_t)(d->nmetrics ? d->nmetrics : 1), sizeof *mets);
    if (!mets) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    rc = seq_metrics(d, g, labels, out, 1, mets, st);
    for (int i = 0; i < d->nmetrics && rc == LOOM_OK; i++) loom_spec_add_eval_metric(spec, d->metrics[i], mets[i]);
    loom__free(mets);
    return rc;
  }
  loom_node *t = seq_train_op(d, g, loss, loom_get_global_step(g), st);
  if (!t) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  loom_spec_set_train_op(spec, t);
  return LOOM_OK;
}

static loom_code mkdir_p(const char *dir, loom_status *st) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return loom_status_set(st, LOOM_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
  return LOOM_OK;
}

/* model_to_estimator's _save_first_checkpoint: when model_dir has no
 * checkpoint, builds the estimator's TRAIN graph (so optimizer slots and
 * global_step exist), initialises it, copies the sequential's weights in and
 * saves <model_dir>/model.ckpt-0. */
static loom_code save_first_checkpoint(loom_sequential *m, const seq_def *d, loom_estimator *e, loom_status *st) {
  const char *dir = loom_estimator_model_dir(e);
  char latest[4096];
  if (loom_latest_checkpoint(dir, latest, sizeof latest, NULL) == LOOM_OK) return LOOM_OK;
  loom_code rc = mkdir_p(dir, st);
  if (rc != LOOM_OK) return rc;
  const loom_run_config *cfg = loom_estimator_config(e);
  loom_graph *g = loom_graph_new();
  if (!g) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  if (cfg->has_random_seed) loom_graph_set_random_seed(g, cfg->tf_random_seed);
  loom_variable *gs = loom_get_or_create_global_step(g);
  int64_t xd[LOOM_MAX_DIMS];
  xd[0] = -1;
  for (int i = 0; i < d->ndim; i++) xd[i + 1] = d->dims[i];
  loom_output x = loom_placeholder(g, d->dtype, d->ndim + 1, xd, d->feature), out;
  loom_session *s = NULL;
  loom_saver *sv = NULL;
  rc = seq_build(d, g, x, 1, LOOM_REUSE_NONE, &out, st);
  if (rc == LOOM_OK) {
    /* labels as the loss reads them (their spec adds no variable) */
    loom_output labels;
    if (m->has_labels) {
      int64_t ld[LOOM_MAX_DIMS];
      int lnd = loom_output_dims(m->labels, ld);
      labels = loom_placeholder(g, loom_output_dtype(m->labels), lnd, ld, "labels");
    } else if (d->loss_kind == LOSS_SPARSE_CE) {
      int64_t ld = -1;
      labels = loom_placeholder(g, LOOM_I32, 1, &ld, "labels");
    } else {
      int64_t od[LOOM_MAX_DIMS];
      int ond = loom_output_dims(out, od);
      labels = loom_placeholder(g, loom_output_dtype(out), ond, od, "labels");
    }
    loom_output loss = seq_loss(d, g, labels, out);
    if ((rc = loom_graph_status(g, st)) == LOOM_OK && !seq_train_op(d, g, loss, gs, st))
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  }
  if (rc == LOOM_OK) {
    loom_session_options so = loom_session_options_default();
    so.num_threads = cfg->num_threads;
    s = loom_session_new(g, &so, st);
    if (!s) rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  }
  if (rc == LOOM_OK) rc = run_target(s, loom_global_variables_initializer(g), st);
  /* the model's variables, and the optimizer's slots when direct training
   * made them (same names in both graphs); global_step stays 0 */
  int nv = 0;
  loom_variable *const *vars = loom_global_variables(g, &nv);
  for (int i = 0; i < nv && rc == LOOM_OK; i++) {
    const char *name = loom_variable_name(vars[i]);
    if (vars[i] == gs || !loom_graph_variable(m->g, name) || !loom_session_variable_initialized(m->s, name)) continue;
    loom_tensor *t = NULL;
    rc = loom_session_read_variable(m->s, name, &t, st);
    if (rc == LOOM_OK) rc = loom_session_assign_variable(s, name, t, st);
    loom_tensor_free(t);
  }
  if (rc == LOOM_OK) {
    sv = loom_saver_new(g, 0, NULL, 0, st);
    char *prefix = sv ? loom__path_join(dir, "model.ckpt") : NULL;
    if (!sv)
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
    else if (!prefix)
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    else if (!loom_saver_save(sv, s, prefix, 0, st))
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
    loom__free(prefix);
  }
  loom_saver_free(sv);
  loom_session_free(s);
  loom_graph_free(g);
  return rc;
}

loom_estimator *loom_sequential_to_estimator(loom_sequential *m, const char *model_dir, const loom_run_config *config,
                                             loom_status *st) {
  if (need_compiled(m, "loom_sequential_to_estimator", st) != LOOM_OK) return NULL;
  seq_def *d = def_clone(&m->d);
  if (!d) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  loom_estimator *e = loom_estimator_new(seq_model_fn, d, model_dir, config, NULL, NULL, st);
  if (!e) {
    def_free(d);
    return NULL;
  }
  e->user_free = def_free;
  if (save_first_checkpoint(m, d, e, st) != LOOM_OK) {
    loom_estimator_free(e);
    return NULL;
  }
  return e;
}

loom_code loom_sequential_serving_input_fn(loom_graph *g, loom_features *features, loom_features *receivers, void *user,
                                           loom_status *st) {
  const loom_sequential *m = user;
  if (!m) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_sequential_serving_input_fn: user (the model) is NULL");
  int64_t xd[LOOM_MAX_DIMS];
  xd[0] = -1;
  for (int i = 0; i < m->d.ndim; i++) xd[i + 1] = m->d.dims[i];
  loom_output x = loom_placeholder(g, m->d.dtype, m->d.ndim + 1, xd, m->d.feature);
  loom_code rc = loom_features_add(features, m->d.feature, x, st);
  return rc ? rc : loom_features_add(receivers, m->d.feature, x, st);
}
