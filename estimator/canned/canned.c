/* estimator/canned/canned.c - the canned estimators (Linear, DNN,
 * DNNLinearCombined, Baseline; classifier and regressor): options with TF
 * 2.15's defaults, validation, the shared model_fn and the train op with
 * one or two optimizers. See include/loom/loom_canned.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "base/base.h"
#include "estimator/estimator_impl.h"
#include "loom/loom.h"
#include "loom/loom_canned.h"

enum { CK_LINEAR = 0, CK_DNN = 1, CK_COMBINED = 2, CK_BASELINE = 3 };

/* Default learning rates (tensorflow_estimator/python/estimator/canned). */
#define LINEAR_LR 0.2
/* DNN: TF 2.15's DNN*V2 calls get_optimizer_instance_v2(optimizer) without a
 * learning rate, so a name gets the Keras legacy optimizer's own default:
 * 0.001 (Adagrad, Adam, Ftrl, RMSprop), 0.01 (SGD). (0.05 is the TF 1 path.) */
#define DNN_LR 0.001
#define DNN_SGD_LR 0.01
#define COMBINED_LINEAR_LR 0.005
#define COMBINED_DNN_LR 0.001
#define BASELINE_LR 0.3

typedef struct canned_opt {
  char *name;             /* resolved name, or NULL with fn */
  double lr;              /* resolved learning rate */
  loom_canned_optimizer_fn fn;
  void *user;
} canned_opt;

typedef struct canned_model {
  int kind;
  char est_name[64];
  loom_head *head;
  int32_t nlin, ndnn;
  const loom_fc **lin, **dnn;
  int32_t nhidden;
  int64_t *hidden;
  char *activation;
  double dropout;
  int32_t batch_norm;
  loom_combiner combiner;
  canned_opt lin_opt, dnn_opt; /* single-optimizer models use lin_opt (Linear, Baseline) or dnn_opt (DNN) */
} canned_model;

static const char *const OPT_NAMES[] = {"Adagrad", "Adam", "Ftrl", "RMSProp", "SGD"};

static void canned_free(void *p) {
  canned_model *m = p;
  if (!m) return;
  loom_head_free(m->head);
  loom__free(m->lin);
  loom__free(m->dnn);
  loom__free(m->hidden);
  loom__free(m->activation);
  loom__free(m->lin_opt.name);
  loom__free(m->dnn_opt.name);
  loom__free(m);
}

double loom_canned_learning_rate(const char *kind, const loom_canned_optimizer *opt, int ncols) {
  if (!kind || (strcmp(kind, "Linear") && strcmp(kind, "DNN") && strcmp(kind, "DNNLinearCombined/linear") &&
                strcmp(kind, "DNNLinearCombined/dnn") && strcmp(kind, "Baseline")))
    return -1;
  if (opt && opt->learning_rate > 0) return opt->learning_rate;
  if (!strcmp(kind, "Linear")) {
    if (opt && !opt->name && !opt->fn) return fmin(LINEAR_LR, 1.0 / sqrt(ncols > 0 ? ncols : 1));
    return LINEAR_LR;
  }
  if (!strcmp(kind, "DNN")) return opt && opt->name && !strcmp(opt->name, "SGD") ? DNN_SGD_LR : DNN_LR;
  if (!strcmp(kind, "DNNLinearCombined/linear")) return fmin(COMBINED_LINEAR_LR, 1.0 / sqrt(ncols > 0 ? ncols : 1));
  if (!strcmp(kind, "DNNLinearCombined/dnn")) return COMBINED_DNN_LR;
  if (!strcmp(kind, "Baseline")) return BASELINE_LR;
  return -1;
}

/* Resolves an optimizer option: name NULL -> dflt_name. */
static loom_code resolve_opt(const char *est, const char *opt_field, const loom_canned_optimizer *o,
                             const char *dflt_name, const char *lr_kind, int ncols, canned_opt *out,
                             loom_status *st) {
  memset(out, 0, sizeof *out);
  if (o->fn) {
    out->fn = o->fn;
    out->user = o->user;
    return LOOM_OK;
  }
  if (o->learning_rate < 0 || isnan(o->learning_rate))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s.learning_rate must be >= 0 (got %g)", est, opt_field,
                           o->learning_rate);
  const char *name = o->name ? o->name : dflt_name;
  int ok = 0;
  for (size_t i = 0; i < sizeof OPT_NAMES / sizeof *OPT_NAMES; i++) ok |= !strcmp(name, OPT_NAMES[i]);
  if (!ok)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s: unknown %s '%s' (supported: Adagrad, Adam, Ftrl, RMSProp, SGD)", est, opt_field,
                           name);
  out->name = loom__strdup(name);
  if (!out->name) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  out->lr = loom_canned_learning_rate(lr_kind, o, ncols);
  return LOOM_OK;
}

static loom_optimizer *make_optimizer(loom_graph *g, const canned_opt *o, const char *scope) {
  if (o->fn) return o->fn(g, o->user);
  loom_graph_push_scope(g, scope);
  loom_output lr = loom_const_f32(g, (float)o->lr, "learning_rate");
  loom_graph_pop_scope(g);
  if (!strcmp(o->name, "Adagrad")) return loom_optimizer_adagrad(lr, NULL);
  if (!strcmp(o->name, "Ftrl")) return loom_optimizer_ftrl(lr, NULL);
  if (!strcmp(o->name, "SGD")) return loom_optimizer_sgd(lr);
  if (!strcmp(o->name, "Adam")) {
    loom_adam_options a = loom_adam_options_default();
    a.epsilon = 1e-7; /* Keras' */
    return loom_optimizer_adam(lr, &a);
  }
  loom_rmsprop_options r = loom_rmsprop_options_default();
  r.epsilon = 1e-7; /* Keras' RMSprop: rho 0.9, momentum 0, epsilon 1e-7, the mean square starting at 0 */
  r.initial_rms_value = 0.0;
  r.keras_legacy = 1; /* tf.keras.optimizers.legacy.RMSprop: epsilon outside the square root */
  return loom_optimizer_rmsprop(lr, &r);
}

/* ---- the train op: each part's optimizer on its variables, from one loss ---- */
static int has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static loom_node *canned_train_op(loom_graph *g, loom_output loss, void *user) {
  const canned_model *m = user;
  int nv = 0;
  loom_variable *const *tv = loom_trainable_variables(g, &nv);
  loom_variable **vars = loom__calloc((size_t)(nv ? nv : 1), sizeof *vars);
  loom_output *xs = loom__calloc((size_t)(nv ? nv : 1), sizeof *xs);
  loom_gradient *grads = loom__calloc((size_t)(nv ? nv : 1), sizeof *grads);
  loom_node *ops[3] = {0};
  int nops = 0;
  loom_node *train = NULL;
  if (!vars || !xs || !grads) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int i = 0; i < nv; i++) {
    vars[i] = tv[i];
    xs[i] = loom_variable_output(tv[i]);
  }
  loom_status *st = loom_status_new();
  loom_code rc = loom_gradients_sparse(g, 1, &loss, NULL, nv, xs, grads, st);
  if (rc != LOOM_OK) {
    loom_graph_set_error(g, rc, "%s: %s", m->est_name, loom_status_message(st));
    loom_status_free(st);
    goto done;
  }
  loom_status_free(st);
  /* the parts: dnn/ (DNN optimizer), linear/ and baseline/ (linear optimizer) */
  static const char *const prefixes[2][2] = {{"dnn/", NULL}, {"linear/", "baseline/"}};
  for (int part = 0; part < 2; part++) {
    const canned_opt *co = part == 0 ? &m->dnn_opt : &m->lin_opt;
    if (part == 0 && !(m->kind == CK_DNN || (m->kind == CK_COMBINED && m->ndnn > 0))) continue;
    if (part == 1 && (m->kind == CK_DNN || (m->kind == CK_COMBINED && m->nlin == 0))) continue;
    int n = 0;
    loom_gradient *pg = loom__calloc((size_t)(nv ? nv : 1), sizeof *pg);
    loom_variable **pv = loom__calloc((size_t)(nv ? nv : 1), sizeof *pv);
    if (!pg || !pv) {
      loom__free(pg);
      loom__free(pv);
      loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory");
      goto done;
    }
    for (int i = 0; i < nv; i++) {
      const char *name = loom_variable_name(vars[i]);
      if (!has_prefix(name, prefixes[part][0]) && !(prefixes[part][1] && has_prefix(name, prefixes[part][1])))
        continue;
      if (!grads[i].values.node) continue;
      pg[n] = grads[i];
      pv[n++] = vars[i];
    }
    if (n > 0) {
      loom_optimizer *opt = make_optimizer(g, co, part == 0 ? "dnn_optimizer" : "linear_optimizer");
      if (!opt) {
        loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: the %s optimizer factory returned NULL", m->est_name,
                             part == 0 ? "dnn" : "linear");
      } else {
        ops[nops++] = loom_optimizer_apply_gradients(opt, g, n, pg, pv, NULL, NULL);
        loom_optimizer_free(opt);
      }
    }
    loom__free(pg);
    loom__free(pv);
  }
  if (nops == 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: No gradients provided for any variable", m->est_name);
    goto done;
  }
  loom_node *upd = loom_group_collection(g, LOOM_UPDATE_OPS, "update_ops");
  if (upd) ops[nops++] = upd;
  for (int i = 0; i < nops; i++)
    if (!ops[i]) goto done; /* graph error recorded */
  /* global_step += 1 once, after every update */
  loom_graph_push_control_deps(g, nops, ops);
  loom_variable *gs = loom_get_or_create_global_step(g);
  loom_output inc = loom_assign_add(g, loom_variable_output(gs), loom_const_i64(g, 1, "global_step/one"),
                                    "global_step/increment");
  loom_graph_pop_control_deps(g);
  train = loom_group(g, 1, &inc.node, "train_op");
done:
  loom__free(vars);
  loom__free(xs);
  loom__free(grads);
  return train;
}

/* ---- per-layer summaries (TF 2.15's canned dnn.py / linear.py /
 * dnn_linear_combined.py write these while training; tags as TF's events
 * file holds them) ---- */
/* tf.math.zero_fraction: the fraction of elements equal to 0 (f32). */
static loom_output zero_fraction(loom_graph *g, loom_output x, const char *name) {
  loom_graph_push_scope(g, name);
  loom_output z = loom_equal(g, x, loom_zeros_like(g, x, NULL), NULL);
  z = loom_reduce_mean(g, loom_cast(g, z, LOOM_F32, NULL), -1, NULL, 0, "fraction");
  loom_graph_pop_scope(g);
  return z;
}

/* "<tag>/fraction_of_zero_values" and "<tag>/activation" (a histogram). */
static void add_layer_summary(loom_graph *g, const char *tag, loom_output value) {
  char t[160];
  snprintf(t, sizeof t, "%s/fraction_of_zero_values", tag);
  loom_summary_scalar(g, t, zero_fraction(g, value, "zero_fraction"));
  snprintf(t, sizeof t, "%s/activation", tag);
  loom_summary_histogram(g, t, value);
}

/* The linear model's "bias" (a scalar for one unit, else a histogram) and
 * "fraction_of_zero_weights" over its other variables. */
static void add_linear_summaries(loom_graph *g, int64_t units) {
  int nv = 0;
  loom_variable *const *tv = loom_trainable_variables(g, &nv);
  static const char prefix[] = "linear/linear_model/";
  loom_output *ws = loom__calloc((size_t)(nv ? nv : 1), sizeof *ws);
  if (!ws) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  int nw = 0;
  loom_output bias = {0};
  for (int i = 0; i < nv; i++) {
    const char *name = loom_variable_name(tv[i]);
    if (!has_prefix(name, prefix)) continue;
    if (!strcmp(name + sizeof prefix - 1, "bias_weights")) {
      bias = loom_variable_output(tv[i]);
      continue;
    }
    ws[nw++] = loom_reshape(g, loom_variable_output(tv[i]), 1, (int64_t[]){-1}, NULL);
  }
  if (bias.node) {
    /* a copy made with the forward pass, so (as in TF) the value is the one
     * the step's logits used, not the one after the update */
    bias = loom_add(g, bias, loom_const_f32(g, 0.0f, NULL), "bias_value");
    if (units > 1) loom_summary_histogram(g, "bias", bias);
    else loom_summary_scalar(g, "bias", bias);
  }
  if (nw > 0)
    loom_summary_scalar(g, "fraction_of_zero_weights",
                        zero_fraction(g, nw == 1 ? ws[0] : loom_concat(g, nw, ws, 0, NULL), "zero_fraction"));
  loom__free(ws);
}

/* ---- the model ---- */
static loom_code dnn_logits(const canned_model *m, loom_graph *g, const loom_features *f, loom_mode mode,
                            int64_t units, loom_output *out, loom_output *layers, loom_status *st) {
  loom_variable_scope_push(g, "dnn", LOOM_REUSE_NONE);
  loom_variable_scope_push(g, "input_from_feature_columns", LOOM_REUSE_NONE);
  loom_output net = {0};
  loom_code rc = loom_fc_input_layer(g, f, m->ndnn, m->dnn, "input_layer", 1, &net, st);
  loom_variable_scope_pop(g);
  if (rc != LOOM_OK) {
    loom_variable_scope_pop(g);
    return rc;
  }
  for (int i = 0; i < m->nhidden; i++) {
    char name[48], bn[80];
    snprintf(name, sizeof name, "hiddenlayer_%d", i);
    loom_dense_options d = loom_dense_options_default();
    d.activation = m->activation;
    d.kernel_initializer = loom_init_glorot_uniform(LOOM_SEED_NONE);
    net = loom_layers_dense(g, net, m->hidden[i], &d, name);
    if (m->dropout > 0 && mode == LOOM_MODE_TRAIN) {
      loom_dropout_options dop = loom_dropout_options_default();
      dop.training = 1;
      snprintf(bn, sizeof bn, "%s/dropout", name);
      net = loom_layers_dropout(g, net, m->dropout, &dop, bn);
    }
    if (m->batch_norm) {
      loom_batch_norm_options b = loom_batch_norm_options_default();
      b.momentum = 0.999;
      b.training = mode == LOOM_MODE_TRAIN;
      loom_variable_scope_push(g, name, LOOM_REUSE_NONE);
      snprintf(bn, sizeof bn, "batchnorm_%d", i);
      net = loom_layers_batch_normalization(g, net, &b, bn);
      loom_variable_scope_pop(g);
    }
    layers[i] = net;
  }
  loom_dense_options d = loom_dense_options_default();
  d.kernel_initializer = loom_init_glorot_uniform(LOOM_SEED_NONE);
  *out = loom_layers_dense(g, net, units, &d, "logits");
  loom_variable_scope_pop(g);
  return loom_graph_status(g, st);
}

/* [B, 1] zeros from any feature (the batch size for Baseline). */
static loom_code batch_zeros(const canned_model *m, loom_graph *g, const loom_features *f, loom_output *out,
                             loom_status *st) {
  int n = loom_features_count(f);
  for (int i = 0; i < n; i++) {
    loom_output x;
    if (loom_features_is_sparse(f, i)) {
      loom_sparse sp = loom_features_get_sparse(f, loom_features_name(f, i));
      int64_t b = 1, sz = -1;
      x = loom_slice(g, sp.row_splits, &b, &sz, "baseline/batch");
    } else {
      x = loom_features_at(f, i);
    }
    int nd = loom_output_ndim(x);
    if (nd < 1) continue;
    int64_t begin[LOOM_MAX_DIMS] = {0}, size[LOOM_MAX_DIMS];
    size[0] = -1;
    for (int k = 1; k < nd; k++) size[k] = 1;
    x = loom_slice(g, x, begin, size, "baseline/first");
    int64_t rd[2] = {-1, 1};
    x = loom_reshape(g, x, 2, rd, "baseline/column");
    x = loom_zeros_like(g, loom_cast(g, x, LOOM_F32, "baseline/cast"), "baseline/zeros");
    *out = x;
    return loom_graph_status(g, st);
  }
  return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                         "%s: the features must hold at least one tensor of rank >= 1 (the batch size comes from it)",
                         m->est_name);
}

static loom_code canned_model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                                 const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec,
                                 void *user, loom_status *st) {
  (void)params;
  canned_model *m = user;
  int64_t units = loom_head_logits_dimension(m->head);
  loom_output logits = {0}, part = {0};
  loom_code rc;
  /* TF's per-layer summaries, in training only (where the SummarySaverHook
   * writes them; they are fetched at save_summary_steps only). They are
   * added after every layer is built so the variables' initializers see the
   * same graph with or without them. */
  int summaries = mode == LOOM_MODE_TRAIN && cfg && cfg->save_summary_steps > 0;
  if (m->kind == CK_DNN || (m->kind == CK_COMBINED && m->ndnn > 0)) {
    loom_output *layers = loom__calloc((size_t)m->nhidden, sizeof *layers);
    if (!layers) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    rc = dnn_logits(m, g, f, mode, units, &logits, layers, st);
    if (rc == LOOM_OK && summaries) {
      char tag[48];
      for (int i = 0; i < m->nhidden; i++) {
        snprintf(tag, sizeof tag, "dnn/hiddenlayer_%d", i);
        add_layer_summary(g, tag, layers[i]);
      }
      add_layer_summary(g, "dnn/logits", logits);
    }
    loom__free(layers);
    if (rc != LOOM_OK) return rc;
  }
  if (m->kind == CK_LINEAR || (m->kind == CK_COMBINED && m->nlin > 0)) {
    loom_variable_scope_push(g, "linear", LOOM_REUSE_NONE);
    rc = loom_fc_linear_model(g, f, m->nlin, m->lin, units, m->combiner, "linear_model", 1, &part, st);
    loom_variable_scope_pop(g);
    if (rc != LOOM_OK) return rc;
    if (summaries) {
      add_linear_summaries(g, units);
      if (m->kind == CK_COMBINED) add_layer_summary(g, "linear", part);
    }
    logits = logits.node ? loom_add(g, logits, part, "add_logits") : part;
  }
  if (m->kind == CK_BASELINE) {
    loom_output z;
    if ((rc = batch_zeros(m, g, f, &z, st)) != LOOM_OK) return rc;
    loom_variable_scope_push(g, "baseline", LOOM_REUSE_NONE);
    loom_initializer zi = loom_init_zeros();
    loom_variable *b = loom_get_variable(g, "bias", LOOM_F32, 1, &units, &zi, 1);
    loom_variable_scope_pop(g);
    logits = loom_add(g, z, loom_variable_output(b), "baseline/logits");
  }
  if ((rc = loom_graph_status(g, st)) != LOOM_OK) return rc;
  return loom_head_create_spec(m->head, g, f, mode, logits, labels, canned_train_op, m, spec, st);
}

/* ---- construction ---- */
typedef struct common_opts {
  LOOM_CANNED_COMMON_FIELDS
} common_opts;

#define COMMON_DEFAULTS(o)                                    \
  do {                                                        \
    (o).n_classes = 2;                                        \
    (o).label_dimension = 1;                                  \
    (o).loss_reduction = LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;  \
  } while (0)

#define COPY_COMMON(dst, src)                          \
  do {                                                 \
    (dst).model_dir = (src)->model_dir;                \
    (dst).config = (src)->config;                      \
    (dst).n_classes = (src)->n_classes;                \
    (dst).label_dimension = (src)->label_dimension;    \
    (dst).weight_column = (src)->weight_column;        \
    (dst).nlabel_vocabulary = (src)->nlabel_vocabulary; \
    (dst).label_vocabulary = (src)->label_vocabulary;  \
    (dst).loss_reduction = (src)->loss_reduction;      \
    (dst).warm_start_from = (src)->warm_start_from;    \
    (dst).warm_start = (src)->warm_start;              \
  } while (0)

static loom_canned_optimizer opt_named(const char *name) {
  loom_canned_optimizer o = {name, 0, NULL, NULL};
  return o;
}

loom_linear_options loom_linear_options_default(void) {
  loom_linear_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  COMMON_DEFAULTS(o);
  o.optimizer = opt_named("Ftrl");
  o.sparse_combiner = LOOM_COMBINER_SUM;
  return o;
}
loom_dnn_options loom_dnn_options_default(void) {
  loom_dnn_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  COMMON_DEFAULTS(o);
  o.optimizer = opt_named("Adagrad");
  o.activation = "relu";
  return o;
}
loom_dnn_linear_combined_options loom_dnn_linear_combined_options_default(void) {
  loom_dnn_linear_combined_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  COMMON_DEFAULTS(o);
  o.linear_optimizer = opt_named("Ftrl");
  o.dnn_optimizer = opt_named("Adagrad");
  o.dnn_activation = "relu";
  o.linear_sparse_combiner = LOOM_COMBINER_SUM;
  return o;
}
loom_baseline_options loom_baseline_options_default(void) {
  loom_baseline_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  COMMON_DEFAULTS(o);
  o.optimizer = opt_named("Ftrl");
  return o;
}

static loom_head *make_head(const char *est, int classifier, const common_opts *c, loom_status *st) {
  if (c->loss_reduction != LOOM_REDUCTION_SUM_OVER_BATCH_SIZE && c->loss_reduction != LOOM_REDUCTION_SUM) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: loss_reduction must be SUM_OVER_BATCH_SIZE or SUM (got %d)", est,
                    (int)c->loss_reduction);
    return NULL;
  }
  if (!classifier) {
    if (c->label_dimension < 1) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: label_dimension must be >= 1 (got %lld)", est,
                      (long long)c->label_dimension);
      return NULL;
    }
    loom_regression_head_options r = loom_regression_head_options_default();
    r.label_dimension = c->label_dimension;
    r.weight_column = c->weight_column;
    r.loss_reduction = c->loss_reduction;
    return loom_regression_head_new(&r, st);
  }
  if (c->n_classes <= 1) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: n_classes must be > 1 (got %lld)", est, (long long)c->n_classes);
    return NULL;
  }
  if (c->nlabel_vocabulary != 0) {
    if (c->nlabel_vocabulary != c->n_classes || !c->label_vocabulary) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "%s: label_vocabulary must have n_classes (%lld) entries (got %d)", est,
                      (long long)c->n_classes, (int)c->nlabel_vocabulary);
      return NULL;
    }
    for (int i = 0; i < c->nlabel_vocabulary; i++)
      if (!c->label_vocabulary[i]) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: label_vocabulary[%d] is NULL", est, i);
        return NULL;
      }
  }
  if (c->n_classes == 2) {
    loom_binary_head_options b = loom_binary_head_options_default();
    b.weight_column = c->weight_column;
    b.nlabel_vocabulary = c->nlabel_vocabulary;
    b.label_vocabulary = c->label_vocabulary;
    b.loss_reduction = c->loss_reduction;
    return loom_binary_class_head_new(&b, st);
  }
  loom_multi_class_head_options mc = loom_multi_class_head_options_default();
  mc.n_classes = c->n_classes;
  mc.weight_column = c->weight_column;
  mc.nlabel_vocabulary = c->nlabel_vocabulary;
  mc.label_vocabulary = c->label_vocabulary;
  mc.loss_reduction = c->loss_reduction;
  return loom_multi_class_head_new(&mc, st);
}

static loom_code copy_cols(const char *est, const char *field, int32_t n, const loom_fc *const *cols,
                           const loom_fc ***out, loom_status *st) {
  if (n < 0 || (n > 0 && !cols))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s: %d columns but no array", est, field, (int)n);
  if (n == 0) return LOOM_OK;
  loom_code rc = loom_fc_check_unique_names(est, field, n, cols, st);
  if (rc) return rc;
  *out = loom__calloc((size_t)n, sizeof **out);
  if (!*out) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < n; i++) (*out)[i] = cols[i];
  return LOOM_OK;
}

static loom_code dnn_parts(canned_model *m, const char *est, const char *hu_field, int32_t nh, const int64_t *h,
                           const char *act_field, const char *act, const char *do_field, double dropout,
                           loom_status *st) {
  if (nh <= 0 || !h) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s must not be empty", est, hu_field);
  for (int i = 0; i < nh; i++)
    if (h[i] < 1)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s[%d] must be >= 1 (got %lld)", est, hu_field, i,
                             (long long)h[i]);
  if (!act) act = "relu";
  if (!loom_activation_valid(act))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: unknown %s '%s'", est, act_field, act);
  if (!(dropout >= 0 && dropout < 1))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s must be in [0, 1) (got %g)", est, do_field, dropout);
  m->nhidden = nh;
  m->hidden = loom__calloc((size_t)nh, sizeof *m->hidden);
  m->activation = loom__strdup(act);
  if (!m->hidden || !m->activation) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  memcpy(m->hidden, h, sizeof *h * (size_t)nh);
  m->dropout = dropout;
  return LOOM_OK;
}

/* Makes the estimator around m (taking ownership of m). */
static loom_estimator *finish(canned_model *m, int classifier, const common_opts *c, loom_status *st) {
  m->head = make_head(m->est_name, classifier, c, st);
  if (!m->head) {
    canned_free(m);
    return NULL;
  }
  loom_estimator *e = loom_estimator_new(canned_model_fn, m, c->model_dir, c->config, NULL, NULL, st);
  if (!e) {
    canned_free(m);
    return NULL;
  }
  e->user_free = canned_free;
  /* a plain warm_start_from is WarmStartSettings(from) (all trainable
   * variables by name), as TF */
  loom_warm_start_settings plain = loom_warm_start_settings_default();
  plain.ckpt_to_initialize_from = c->warm_start_from;
  const loom_warm_start_settings *ws = c->warm_start ? c->warm_start : c->warm_start_from ? &plain : NULL;
  if (ws && loom_estimator_set_warm_start_settings(e, ws, st) != LOOM_OK) {
    loom_estimator_free(e);
    return NULL;
  }
  return e;
}

static canned_model *model_new(int kind, const char *est, loom_status *st) {
  canned_model *m = loom__calloc(1, sizeof *m);
  if (!m) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  m->kind = kind;
  snprintf(m->est_name, sizeof m->est_name, "%s", est);
  return m;
}

/* o (NULL: the defaults in d) over the defaults in d; o then points at d. */
#define TAKE_OPTS(o, d, T, est)                                \
  do {                                                         \
    if (LOOM__OPTS_TAKE(&(d), (o), (est), T, st)) return NULL; \
    (o) = &(d);                                                \
  } while (0)

static loom_estimator *linear_new(const loom_linear_options *o, int classifier, loom_status *st) {
  const char *est = classifier ? "LinearClassifier" : "LinearRegressor";
  loom_linear_options d = loom_linear_options_default();
  TAKE_OPTS(o, d, loom_linear_options, est);
  if (o->nfeature_columns <= 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature_columns must not be empty", est);
    return NULL;
  }
  canned_model *m = model_new(CK_LINEAR, est, st);
  if (!m) return NULL;
  common_opts c;
  COPY_COMMON(c, o);
  if (copy_cols(est, "feature_columns", o->nfeature_columns, o->feature_columns, &m->lin, st) != LOOM_OK ||
      resolve_opt(est, "optimizer", &o->optimizer, "Ftrl", "Linear", o->nfeature_columns, &m->lin_opt, st) !=
          LOOM_OK) {
    canned_free(m);
    return NULL;
  }
  m->nlin = o->nfeature_columns;
  m->combiner = o->sparse_combiner;
  return finish(m, classifier, &c, st);
}

static loom_estimator *dnn_new(const loom_dnn_options *o, int classifier, loom_status *st) {
  const char *est = classifier ? "DNNClassifier" : "DNNRegressor";
  loom_dnn_options d = loom_dnn_options_default();
  TAKE_OPTS(o, d, loom_dnn_options, est);
  if (o->nfeature_columns <= 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature_columns must not be empty", est);
    return NULL;
  }
  canned_model *m = model_new(CK_DNN, est, st);
  if (!m) return NULL;
  common_opts c;
  COPY_COMMON(c, o);
  if (dnn_parts(m, est, "hidden_units", o->nhidden_units, o->hidden_units, "activation", o->activation, "dropout",
                o->dropout, st) != LOOM_OK ||
      copy_cols(est, "feature_columns", o->nfeature_columns, o->feature_columns, &m->dnn, st) != LOOM_OK ||
      resolve_opt(est, "optimizer", &o->optimizer, "Adagrad", "DNN", o->nfeature_columns, &m->dnn_opt, st) !=
          LOOM_OK) {
    canned_free(m);
    return NULL;
  }
  m->ndnn = o->nfeature_columns;
  m->batch_norm = o->batch_norm;
  return finish(m, classifier, &c, st);
}

static loom_estimator *combined_new(const loom_dnn_linear_combined_options *o, int classifier, loom_status *st) {
  const char *est = classifier ? "DNNLinearCombinedClassifier" : "DNNLinearCombinedRegressor";
  loom_dnn_linear_combined_options d = loom_dnn_linear_combined_options_default();
  TAKE_OPTS(o, d, loom_dnn_linear_combined_options, est);
  if (o->nlinear_feature_columns <= 0 && o->ndnn_feature_columns <= 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "%s: Either linear_feature_columns or dnn_feature_columns must be defined", est);
    return NULL;
  }
  canned_model *m = model_new(CK_COMBINED, est, st);
  if (!m) return NULL;
  common_opts c;
  COPY_COMMON(c, o);
  loom_code rc = LOOM_OK;
  if (o->ndnn_feature_columns > 0) {
    if (o->ndnn_hidden_units <= 0 || !o->dnn_hidden_units)
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s: dnn_hidden_units must be defined when dnn_feature_columns is specified", est);
    if (rc == LOOM_OK)
      rc = dnn_parts(m, est, "dnn_hidden_units", o->ndnn_hidden_units, o->dnn_hidden_units, "dnn_activation",
                     o->dnn_activation, "dnn_dropout", o->dnn_dropout, st);
    if (rc == LOOM_OK)
      rc = copy_cols(est, "dnn_feature_columns", o->ndnn_feature_columns, o->dnn_feature_columns, &m->dnn, st);
    if (rc == LOOM_OK)
      rc = resolve_opt(est, "dnn_optimizer", &o->dnn_optimizer, "Adagrad", "DNNLinearCombined/dnn",
                       o->ndnn_feature_columns, &m->dnn_opt, st);
    m->ndnn = o->ndnn_feature_columns;
  }
  if (rc == LOOM_OK && o->nlinear_feature_columns > 0) {
    rc = copy_cols(est, "linear_feature_columns", o->nlinear_feature_columns, o->linear_feature_columns, &m->lin,
                   st);
    if (rc == LOOM_OK)
      rc = resolve_opt(est, "linear_optimizer", &o->linear_optimizer, "Ftrl", "DNNLinearCombined/linear",
                       o->nlinear_feature_columns, &m->lin_opt, st);
    m->nlin = o->nlinear_feature_columns;
  }
  if (rc != LOOM_OK) {
    canned_free(m);
    return NULL;
  }
  m->batch_norm = o->batch_norm;
  m->combiner = o->linear_sparse_combiner;
  return finish(m, classifier, &c, st);
}

static loom_estimator *baseline_new(const loom_baseline_options *o, int classifier, loom_status *st) {
  const char *est = classifier ? "BaselineClassifier" : "BaselineRegressor";
  loom_baseline_options d = loom_baseline_options_default();
  TAKE_OPTS(o, d, loom_baseline_options, est);
  canned_model *m = model_new(CK_BASELINE, est, st);
  if (!m) return NULL;
  common_opts c;
  COPY_COMMON(c, o);
  if (resolve_opt(est, "optimizer", &o->optimizer, "Ftrl", "Baseline", 0, &m->lin_opt, st) != LOOM_OK) {
    canned_free(m);
    return NULL;
  }
  return finish(m, classifier, &c, st);
}

loom_estimator *loom_linear_classifier_new(const loom_linear_options *o, loom_status *st) {
  return linear_new(o, 1, st);
}
loom_estimator *loom_linear_regressor_new(const loom_linear_options *o, loom_status *st) {
  return linear_new(o, 0, st);
}
loom_estimator *loom_dnn_classifier_new(const loom_dnn_options *o, loom_status *st) { return dnn_new(o, 1, st); }
loom_estimator *loom_dnn_regressor_new(const loom_dnn_options *o, loom_status *st) { return dnn_new(o, 0, st); }
loom_estimator *loom_dnn_linear_combined_classifier_new(const loom_dnn_linear_combined_options *o, loom_status *st) {
  return combined_new(o, 1, st);
}
loom_estimator *loom_dnn_linear_combined_regressor_new(const loom_dnn_linear_combined_options *o, loom_status *st) {
  return combined_new(o, 0, st);
}
loom_estimator *loom_baseline_classifier_new(const loom_baseline_options *o, loom_status *st) {
  return baseline_new(o, 1, st);
}
loom_estimator *loom_baseline_regressor_new(const loom_baseline_options *o, loom_status *st) {
  return baseline_new(o, 0, st);
}
