/* train/optimizers.c - optimizers (tf.train.*Optimizer): slot variables,
 * hyperparameter constants, one Apply/SparseApply op per variable (the ops
 * are ops/train.c), the finishing updates (Adam's beta powers) and the
 * global-step increment. */
#include <string.h>
#include <stdio.h>
#include "train/train_impl.h"

enum { OPT_SGD, OPT_MOMENTUM, OPT_ADAGRAD, OPT_ADAM, OPT_FTRL, OPT_RMSPROP, OPT_ADADELTA, OPT_PROX_GD, OPT_PROX_ADAGRAD,
       OPT_ADAGRAD_DA };

typedef struct slot_entry {
  const loom_variable *var;
  char name[32];
  loom_variable *slot;
} slot_entry;

struct loom_optimizer {
  int kind;
  const char *name;
  loom_output lr;
  loom_momentum_options mom;
  loom_adagrad_options adagrad;
  loom_adam_options adam;
  loom_ftrl_options ftrl;
  loom_rmsprop_options rms;
  loom_adadelta_options adadelta;
  loom_proximal_gradient_descent_options pgd;
  loom_proximal_adagrad_options padagrad;
  loom_adagrad_da_options da;
  char bad_options[256]; /* a bad options struct_size, reported at apply */
  slot_entry *slots;
  int nslots, capslots;
  /* Adam's non-slot variables (per graph: the last graph used) */
  loom_graph *g;
  loom_variable *beta1_power, *beta2_power;
};

loom_momentum_options loom_momentum_options_default(void) {
  loom_momentum_options o = {sizeof(loom_momentum_options), 0.9, 0};
  return o;
}
loom_adagrad_options loom_adagrad_options_default(void) {
  loom_adagrad_options o = {sizeof(loom_adagrad_options), 0.1};
  return o;
}
loom_adam_options loom_adam_options_default(void) {
  loom_adam_options o = {sizeof(loom_adam_options), 0.9, 0.999, 1e-8, 0};
  return o;
}
loom_ftrl_options loom_ftrl_options_default(void) {
  loom_ftrl_options o = {sizeof(loom_ftrl_options), -0.5, 0.1, 0.0, 0.0, 0.0};
  return o;
}
loom_rmsprop_options loom_rmsprop_options_default(void) {
  loom_rmsprop_options o = {sizeof(loom_rmsprop_options), 0.9, 0.0, 1e-10, 0, 1.0, 0};
  return o;
}
loom_adadelta_options loom_adadelta_options_default(void) {
  loom_adadelta_options o = {sizeof(loom_adadelta_options), 0.95, 1e-8};
  return o;
}

loom_proximal_gradient_descent_options loom_proximal_gradient_descent_options_default(void) {
  loom_proximal_gradient_descent_options o = {sizeof(loom_proximal_gradient_descent_options), 0.0, 0.0};
  return o;
}
loom_proximal_adagrad_options loom_proximal_adagrad_options_default(void) {
  loom_proximal_adagrad_options o = {sizeof(loom_proximal_adagrad_options), 0.1, 0.0, 0.0};
  return o;
}
loom_adagrad_da_options loom_adagrad_da_options_default(void) {
  loom_adagrad_da_options o = {sizeof(loom_adagrad_da_options), 0.1, 0.0, 0.0};
  return o;
}

static loom_optimizer *opt_new(int kind, const char *name, loom_output lr) {
  loom_optimizer *o = loom__calloc(1, sizeof *o);
  if (!o) return NULL;
  o->kind = kind;
  o->name = name;
  o->lr = lr;
  o->mom = loom_momentum_options_default();
  o->adagrad = loom_adagrad_options_default();
  o->adam = loom_adam_options_default();
  o->ftrl = loom_ftrl_options_default();
  o->rms = loom_rmsprop_options_default();
  o->adadelta = loom_adadelta_options_default();
  o->pgd = loom_proximal_gradient_descent_options_default();
  o->padagrad = loom_proximal_adagrad_options_default();
  o->da = loom_adagrad_da_options_default();
  return o;
}

/* The caller's options over o's defaults in dst (loom__opts_take); a bad
 * struct_size is kept and becomes the graph's error at apply. */
static loom_optimizer *opt_take(loom_optimizer *o, void *dst, size_t size, const void *src, const char *type) {
  if (!o || !src || !loom__opts_take(dst, size, src, o->name, type, NULL)) return o;
  loom_status *st = loom_status_new();
  if (loom__opts_take(dst, size, src, o->name, type, st))
    snprintf(o->bad_options, sizeof o->bad_options, "%s", st ? loom_status_message(st) : "bad options struct_size");
  loom_status_free(st);
  return o;
}

loom_optimizer *loom_optimizer_sgd(loom_output lr) { return opt_new(OPT_SGD, "GradientDescent", lr); }
loom_optimizer *loom_optimizer_momentum(loom_output lr, const loom_momentum_options *opts) {
  loom_optimizer *o = opt_new(OPT_MOMENTUM, "Momentum", lr);
  return o ? opt_take(o, &o->mom, sizeof o->mom, opts, "loom_momentum_options") : NULL;
}
loom_optimizer *loom_optimizer_adagrad(loom_output lr, const loom_adagrad_options *opts) {
  loom_optimizer *o = opt_new(OPT_ADAGRAD, "Adagrad", lr);
  return o ? opt_take(o, &o->adagrad, sizeof o->adagrad, opts, "loom_adagrad_options") : NULL;
}
loom_optimizer *loom_optimizer_adam(loom_output lr, const loom_adam_options *opts) {
  loom_optimizer *o = opt_new(OPT_ADAM, "Adam", lr);
  return o ? opt_take(o, &o->adam, sizeof o->adam, opts, "loom_adam_options") : NULL;
}
loom_optimizer *loom_optimizer_ftrl(loom_output lr, const loom_ftrl_options *opts) {
  loom_optimizer *o = opt_new(OPT_FTRL, "Ftrl", lr);
  return o ? opt_take(o, &o->ftrl, sizeof o->ftrl, opts, "loom_ftrl_options") : NULL;
}
loom_optimizer *loom_optimizer_rmsprop(loom_output lr, const loom_rmsprop_options *opts) {
  loom_optimizer *o = opt_new(OPT_RMSPROP, "RMSProp", lr);
  return o ? opt_take(o, &o->rms, sizeof o->rms, opts, "loom_rmsprop_options") : NULL;
}
loom_optimizer *loom_optimizer_adadelta(loom_output lr, const loom_adadelta_options *opts) {
  loom_optimizer *o = opt_new(OPT_ADADELTA, "Adadelta", lr);
  return o ? opt_take(o, &o->adadelta, sizeof o->adadelta, opts, "loom_adadelta_options") : NULL;
}

loom_optimizer *loom_optimizer_proximal_gradient_descent(loom_output lr,
                                                         const loom_proximal_gradient_descent_options *opts) {
  loom_optimizer *o = opt_new(OPT_PROX_GD, "ProximalGradientDescent", lr);
  return o ? opt_take(o, &o->pgd, sizeof o->pgd, opts, "loom_proximal_gradient_descent_options") : NULL;
}
loom_optimizer *loom_optimizer_proximal_adagrad(loom_output lr, const loom_proximal_adagrad_options *opts) {
  loom_optimizer *o = opt_new(OPT_PROX_ADAGRAD, "ProximalAdagrad", lr);
  return o ? opt_take(o, &o->padagrad, sizeof o->padagrad, opts, "loom_proximal_adagrad_options") : NULL;
}
loom_optimizer *loom_optimizer_adagrad_da(loom_output lr, const loom_adagrad_da_options *opts) {
  loom_optimizer *o = opt_new(OPT_ADAGRAD_DA, "AdagradDA", lr);
  return o ? opt_take(o, &o->da, sizeof o->da, opts, "loom_adagrad_da_options") : NULL;
}

void loom_optimizer_free(loom_optimizer *o) {
  if (!o) return;
  loom__free(o->slots);
  loom__free(o);
}

const char *loom_optimizer_name(const loom_optimizer *o) { return o ? o->name : ""; }

loom_variable *loom_optimizer_get_slot(const loom_optimizer *o, const loom_variable *var, const char *slot_name) {
  if (!o || !var || !slot_name) return NULL;
  for (int i = 0; i < o->nslots; i++)
    if (o->slots[i].var == var && !strcmp(o->slots[i].name, slot_name)) return o->slots[i].slot;
  return NULL;
}

/* get-or-create "<var>/<opt name>[_k]" initialised to value */
static loom_variable *make_slot(loom_optimizer *o, loom_graph *g, const loom_variable *var, const char *sname,
                                double value) {
  loom_variable *s = loom_optimizer_get_slot(o, var, sname);
  if (s) return s;
  if (o->nslots == o->capslots) {
    int nc = o->capslots ? o->capslots * 2 : 16;
    slot_entry *ns = loom__realloc(o->slots, (size_t)nc * sizeof *ns);
    if (!ns) {
      loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory creating slots", o->name);
      return NULL;
    }
    o->slots = ns;
    o->capslots = nc;
  }
  char full[1024];
  snprintf(full, sizeof full, "%s/%s", var->name, o->name);
  loom_initializer init = value == 0.0 ? loom_init_zeros() : loom_init_constant(value);
  s = loom__variable_create(g, full, 1, var->dtype, var->ndim, var->dims, &init, (loom_output){NULL, 0}, 0,
                            LOOM_COLL_GLOBAL);
  if (!s) return NULL;
  slot_entry *e = &o->slots[o->nslots++];
  e->var = var;
  snprintf(e->name, sizeof e->name, "%s", sname);
  e->slot = s;
  return s;
}

static int create_slots(loom_optimizer *o, loom_graph *g, const loom_variable *v) {
  switch (o->kind) {
  case OPT_SGD: return 1;
  case OPT_MOMENTUM: return make_slot(o, g, v, "momentum", 0.0) != NULL;
  case OPT_ADAGRAD: return make_slot(o, g, v, "accum", o->adagrad.initial_accumulator_value) != NULL;
  case OPT_ADAM: return make_slot(o, g, v, "m", 0.0) && make_slot(o, g, v, "v", 0.0);
  case OPT_FTRL:
    return make_slot(o, g, v, "accum", o->ftrl.initial_accumulator_value) && make_slot(o, g, v, "linear", 0.0);
  case OPT_RMSPROP:
    if (!make_slot(o, g, v, "rms", o->rms.initial_rms_value)) return 0;
    if (o->rms.centered && !make_slot(o, g, v, "mg", 0.0)) return 0;
    return make_slot(o, g, v, "momentum", 0.0) != NULL;
  case OPT_ADADELTA: return make_slot(o, g, v, "accum", 0.0) && make_slot(o, g, v, "accum_update", 0.0);
  case OPT_PROX_GD: return 1;
  case OPT_PROX_ADAGRAD: return make_slot(o, g, v, "accumulator", o->padagrad.initial_accumulator_value) != NULL;
  case OPT_ADAGRAD_DA:
    return make_slot(o, g, v, "gradient_accumulator", 0.0) &&
           make_slot(o, g, v, "gradient_squared_accumulator", o->da.initial_gradient_squared_accumulator_value);
  default: return 0;
  }
}

static int validate(loom_optimizer *o, loom_graph *g) {
  if (o->bad_options[0]) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s", o->bad_options);
    return 0;
  }
  const char *bad = NULL;
  double val = 0;
  switch (o->kind) {
  case OPT_ADAGRAD:
    if (!(o->adagrad.initial_accumulator_value > 0)) bad = "initial_accumulator_value must be positive", val = o->adagrad.initial_accumulator_value;
    break;
  case OPT_FTRL:
    if (!(o->ftrl.initial_accumulator_value >= 0)) bad = "initial_accumulator_value must be >= 0", val = o->ftrl.initial_accumulator_value;
    else if (!(o->ftrl.learning_rate_power <= 0)) bad = "learning_rate_power must be <= 0", val = o->ftrl.learning_rate_power;
    else if (!(o->ftrl.l1 >= 0)) bad = "l1_regularization_strength must be >= 0", val = o->ftrl.l1;
    else if (!(o->ftrl.l2 >= 0)) bad = "l2_regularization_strength must be >= 0", val = o->ftrl.l2;
    else if (!(o->ftrl.l2_shrinkage >= 0)) bad = "l2_shrinkage_regularization_strength must be >= 0", val = o->ftrl.l2_shrinkage;
    break;
  case OPT_PROX_GD:
  case OPT_PROX_ADAGRAD:
  case OPT_ADAGRAD_DA: {
    double l1 = o->kind == OPT_PROX_GD ? o->pgd.l1 : o->kind == OPT_PROX_ADAGRAD ? o->padagrad.l1 : o->da.l1;
    double l2 = o->kind == OPT_PROX_GD ? o->pgd.l2 : o->kind == OPT_PROX_ADAGRAD ? o->padagrad.l2 : o->da.l2;
    if (o->kind == OPT_PROX_ADAGRAD && !(o->padagrad.initial_accumulator_value > 0))
      bad = "initial_accumulator_value must be positive", val = o->padagrad.initial_accumulator_value;
    else if (o->kind == OPT_ADAGRAD_DA && !(o->da.initial_gradient_squared_accumulator_value > 0))
      bad = "initial_gradient_squared_accumulator_value must be positive",
      val = o->da.initial_gradient_squared_accumulator_value;
    else if (!(l1 >= 0)) bad = "l1_regularization_strength must be >= 0", val = l1;
    else if (!(l2 >= 0)) bad = "l2_regularization_strength must be >= 0", val = l2;
    break;
  }
  case OPT_RMSPROP:
    if (!(o->rms.initial_rms_value >= 0) || o->rms.initial_rms_value > 3.4e38)
      bad = "initial_rms_value must be >= 0 and finite", val = o->rms.initial_rms_value;
    else if (o->rms.keras_legacy && o->rms.momentum != 0)
      bad = "keras_legacy needs momentum 0 (Keras' legacy RMSprop uses TF's kernels with momentum)",
      val = o->rms.momentum;
    break;
  default: break;
  }
  if (bad) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: %s, got %g", o->name, bad, val);
    return 0;
  }
  return 1;
}

static loom_output vout(const loom_variable *v) { return (loom_output){v->node, 0}; }

static loom_output build_update(loom_optimizer *o, loom_graph *g, const loom_gradient *gr, const loom_variable *v,
                                const loom_output *h) {
  int sparse = gr->indices.node != NULL;
  loom_output var = vout(v), gv = gr->values, ix = gr->indices;
  const loom_output lr = o->lr;
#define SLOT(nm) vout(loom_optimizer_get_slot(o, v, nm))
  switch (o->kind) {
  case OPT_SGD:
    return sparse ? loom_sparse_apply_gradient_descent(g, var, lr, gv, ix, "SparseApplyGradientDescent")
                  : loom_apply_gradient_descent(g, var, lr, gv, "ApplyGradientDescent");
  case OPT_MOMENTUM:
    return sparse ? loom_sparse_apply_momentum(g, var, SLOT("momentum"), lr, gv, ix, h[0], o->mom.use_nesterov,
                                               "SparseApplyMomentum")
                  : loom_apply_momentum(g, var, SLOT("momentum"), lr, gv, h[0], o->mom.use_nesterov, "ApplyMomentum");
  case OPT_ADAGRAD:
    return sparse ? loom_sparse_apply_adagrad(g, var, SLOT("accum"), lr, gv, ix, "SparseApplyAdagrad")
                  : loom_apply_adagrad(g, var, SLOT("accum"), lr, gv, "ApplyAdagrad");
  case OPT_ADAM: {
    loom_output b1p = vout(o->beta1_power), b2p = vout(o->beta2_power);
    return sparse ? loom_sparse_apply_adam(g, var, SLOT("m"), SLOT("v"), b1p, b2p, lr, h[0], h[1], h[2], gv, ix,
                                           o->adam.lazy, "SparseApplyAdam")
                  : loom_apply_adam(g, var, SLOT("m"), SLOT("v"), b1p, b2p, lr, h[0], h[1], h[2], gv, 0, "ApplyAdam");
  }
  case OPT_FTRL:
    return sparse ? loom_sparse_apply_ftrl(g, var, SLOT("accum"), SLOT("linear"), gv, ix, lr, h[0], h[1], h[2], h[3],
                                           "SparseApplyFtrlV2")
                  : loom_apply_ftrl(g, var, SLOT("accum"), SLOT("linear"), gv, lr, h[0], h[1], h[2], h[3],
                                    "ApplyFtrlV2");
  case OPT_RMSPROP: {
    int c = (o->rms.centered ? LOOM_RMSPROP_CENTERED : 0) | (o->rms.keras_legacy ? LOOM_RMSPROP_KERAS_LEGACY : 0);
    loom_output mg = o->rms.centered ? SLOT("mg") : (loom_output){NULL, 0};
    return sparse ? loom_sparse_apply_rmsprop(g, var, mg, SLOT("rms"), SLOT("momentum"), lr, h[0], h[1], h[2], gv, ix,
                                              c, o->rms.centered ? "SparseApplyCenteredRMSProp" : "SparseApplyRMSProp")
                  : loom_apply_rmsprop(g, var, mg, SLOT("rms"), SLOT("momentum"), lr, h[0], h[1], h[2], gv, c,
                                       o->rms.centered ? "ApplyCenteredRMSProp" : "ApplyRMSProp");
  }
  case OPT_ADADELTA:
    return sparse ? loom_sparse_apply_adadelta(g, var, SLOT("accum"), SLOT("accum_update"), lr, h[0], h[1], gv, ix,
                                               "SparseApplyAdadelta")
                  : loom_apply_adadelta(g, var, SLOT("accum"), SLOT("accum_update"), lr, h[0], h[1], gv,
                                        "ApplyAdadelta");
  case OPT_PROX_GD:
    return sparse ? loom_sparse_apply_proximal_gradient_descent(g, var, lr, h[0], h[1], gv, ix,
                                                                "SparseApplyProximalGradientDescent")
                  : loom_apply_proximal_gradient_descent(g, var, lr, h[0], h[1], gv, "ApplyProximalGradientDescent");
  case OPT_PROX_ADAGRAD:
    return sparse ? loom_sparse_apply_proximal_adagrad(g, var, SLOT("accumulator"), lr, h[0], h[1], gv, ix,
                                                       "SparseApplyProximalAdagrad")
                  : loom_apply_proximal_adagrad(g, var, SLOT("accumulator"), lr, h[0], h[1], gv,
                                                "ApplyProximalAdagrad");
  case OPT_ADAGRAD_DA:
    return sparse ? loom_sparse_apply_adagrad_da(g, var, SLOT("gradient_accumulator"),
                                                 SLOT("gradient_squared_accumulator"), gv, ix, lr, h[0], h[1], h[2],
                                                 "SparseApplyAdagradDA")
                  : loom_apply_adagrad_da(g, var, SLOT("gradient_accumulator"), SLOT("gradient_squared_accumulator"),
                                          gv, lr, h[0], h[1], h[2], "ApplyAdagradDA");
  default: return loom__graph_dummy(g);
  }
#undef SLOT
}

static loom_node *apply_impl(loom_optimizer *o, loom_graph *g, int n, const loom_gradient *grads,
                             loom_variable *const *vars, loom_variable *global_step, const char *name);

loom_node *loom_optimizer_apply_gradients(loom_optimizer *o, loom_graph *g, int n, const loom_gradient *grads,
                                          loom_variable *const *vars, loom_variable *global_step, const char *name) {
  if (!g) return NULL;
  if (!o) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "apply_gradients: optimizer is NULL");
    return NULL;
  }
  if (loom__train_failed(g)) return NULL;
  if (n < 0 || (n > 0 && (!grads || !vars))) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid gradient/variable lists", o->name);
    return NULL;
  }
  if (!validate(o, g)) return NULL;
  if (!loom_output_valid(o->lr) || loom__node_graph(o->lr.node) != g) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: the learning rate is not an output of this graph", o->name);
    return NULL;
  }
  /* vars may be a collection array that creating slots below reallocates */
  loom_variable **vcopy = loom__malloc(sizeof *vcopy * (size_t)(n > 0 ? n : 1));
  if (!vcopy) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", o->name);
    return NULL;
  }
  for (int i = 0; i < n; i++) vcopy[i] = vars[i];
  loom_node *r = apply_impl(o, g, n, grads, vcopy, global_step, name);
  loom__free(vcopy);
  return r;
}

static loom_node *apply_impl(loom_optimizer *o, loom_graph *g, int n, const loom_gradient *grads,
                             loom_variable *const *vars, loom_variable *global_step, const char *name) {
  int nvalid = 0;
  for (int i = 0; i < n; i++) {
    if (!vars[i] || !vars[i]->node || vars[i]->g != g) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: variable %d is not a variable of this graph", o->name, i);
      return NULL;
    }
    if (grads[i].values.node) nvalid++;
  }
  if (!nvalid) {
    char buf[512];
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < sizeof buf - 64; i++)
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? ", " : "", vars[i]->name);
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "No gradients provided for any variable: [%s]", buf);
    return NULL;
  }
  /* slots and non-slot variables (at the root, like TF) */
  for (int i = 0; i < n; i++)
    if (grads[i].values.node && !create_slots(o, g, vars[i])) return NULL;
  if (o->kind == OPT_ADAM && (o->g != g || !o->beta1_power)) {
    loom_initializer b1 = loom_init_constant(o->adam.beta1), b2 = loom_init_constant(o->adam.beta2);
    o->beta1_power = loom__variable_create(g, "beta1_power", 1, LOOM_F32, 0, NULL, &b1, (loom_output){NULL, 0}, 0,
                                           LOOM_COLL_GLOBAL);
    o->beta2_power = loom__variable_create(g, "beta2_power", 1, LOOM_F32, 0, NULL, &b2, (loom_output){NULL, 0}, 0,
                                           LOOM_COLL_GLOBAL);
    if (!o->beta1_power || !o->beta2_power) return NULL;
    o->g = g;
  }
  if (o->kind == OPT_ADAGRAD_DA && (!global_step || !global_step->node || global_step->g != g ||
                                    global_step->ndim != 0 ||
                                    (global_step->dtype != LOOM_I32 && global_step->dtype != LOOM_I64))) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: AdagradDA needs global_step (an integer scalar variable of this graph): its update "
                         "reads the step",
                         o->name);
    return NULL;
  }
  const char *nm = name && *name ? name : o->name;
  loom_graph_push_scope(g, nm);
  loom_output h[4];
  switch (o->kind) {
  case OPT_MOMENTUM: h[0] = loom_const_f32(g, (float)o->mom.momentum, "momentum"); break;
  case OPT_ADAM:
    h[0] = loom_const_f32(g, (float)o->adam.beta1, "beta1");
    h[1] = loom_const_f32(g, (float)o->adam.beta2, "beta2");
    h[2] = loom_const_f32(g, (float)o->adam.epsilon, "epsilon");
    break;
  case OPT_FTRL:
    h[0] = loom_const_f32(g, (float)o->ftrl.l1, "l1_regularization_strength");
    h[1] = loom_const_f32(g, (float)o->ftrl.l2, "l2_regularization_strength");
    h[2] = loom_const_f32(g, (float)o->ftrl.l2_shrinkage, "l2_shrinkage_regularization_strength");
    h[3] = loom_const_f32(g, (float)o->ftrl.learning_rate_power, "learning_rate_power");
    break;
  case OPT_RMSPROP:
    h[0] = loom_const_f32(g, (float)o->rms.decay, "decay");
    h[1] = loom_const_f32(g, (float)o->rms.momentum, "momentum");
    h[2] = loom_const_f32(g, (float)o->rms.epsilon, "epsilon");
    break;
  case OPT_ADADELTA:
    h[0] = loom_const_f32(g, (float)o->adadelta.rho, "rho");
    h[1] = loom_const_f32(g, (float)o->adadelta.epsilon, "epsilon");
    break;
  case OPT_PROX_GD:
  case OPT_PROX_ADAGRAD: {
    double l1 = o->kind == OPT_PROX_GD ? o->pgd.l1 : o->padagrad.l1, l2 = o->kind == OPT_PROX_GD ? o->pgd.l2 : o->padagrad.l2;
    h[0] = loom_const_f32(g, (float)l1, "l1_regularization_strength");
    h[1] = loom_const_f32(g, (float)l2, "l2_regularization_strength");
    break;
  }
  case OPT_ADAGRAD_DA: {
    h[0] = loom_const_f32(g, (float)o->da.l1, "l1_regularization_strength");
    h[1] = loom_const_f32(g, (float)o->da.l2, "l2_regularization_strength");
    /* T: the global step before this step's increment, plus 1 (read before the updates run) */
    loom_output gs = vout(global_step);
    loom_output one = global_step->dtype == LOOM_I64 ? loom_const_i64(g, 1, NULL) : loom_const_i32(g, 1, NULL);
    h[2] = loom_add(g, loom_identity(g, gs, "global_step_identity"), one, "global_step_on_worker");
    break;
  }
  default: break;
  }
  loom_node **ups = loom__malloc(sizeof *ups * (size_t)(nvalid + 2));
  int nu = 0;
  if (!ups) {
    loom_graph_pop_scope(g);
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", o->name);
    return NULL;
  }
  for (int i = 0; i < n && !loom__train_failed(g); i++) {
    if (!grads[i].values.node) continue;
    char sc[1024];
    snprintf(sc, sizeof sc, "update_%s", vars[i]->name);
    loom_graph_push_scope(g, sc);
    loom_output u = build_update(o, g, &grads[i], vars[i], h);
    loom_graph_pop_scope(g);
    if (!loom__train_failed(g)) ups[nu++] = u.node;
  }
  loom_node *train = NULL;
  if (!loom__train_failed(g)) {
    int nf = nu;
    if (o->kind == OPT_ADAM) {
      /* beta powers advance after every update has read them */
      loom_graph_push_control_deps(g, nu, ups);
      loom_output b1 = loom_assign_mul(g, vout(o->beta1_power), h[0], "update_beta1");
      loom_output b2 = loom_assign_mul(g, vout(o->beta2_power), h[1], "update_beta2");
      loom_graph_pop_control_deps(g);
      if (!loom__train_failed(g)) {
        ups[nf++] = b1.node;
        ups[nf++] = b2.node;
      }
    }
    loom_node *fin = NULL;
    if (global_step) { /* "<name>/update", then the increment is "<name>" */
      fin = loom__train_failed(g) ? NULL : loom_group(g, nf, ups, "update");
      loom_graph_pop_scope(g);
    } else {
      loom_graph_pop_scope(g);
      fin = loom__train_failed(g) ? NULL : loom_group(g, nf, ups, nm);
    }
    if (fin && global_step) {
      if (!global_step->node || global_step->g != g || global_step->ndim != 0 ||
          (global_step->dtype != LOOM_I32 && global_step->dtype != LOOM_I64)) {
        loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: global_step must be an integer scalar variable of this graph",
                             nm);
      } else {
        loom_output one = global_step->dtype == LOOM_I64 ? loom_const_i64(g, 1, NULL) : loom_const_i32(g, 1, NULL);
        loom_graph_push_control_deps(g, 1, &fin);
        loom_output inc = loom_assign_add(g, vout(global_step), one, nm);
        loom_graph_pop_control_deps(g);
        train = loom__train_failed(g) ? NULL : inc.node;
      }
    } else {
      train = fin;
    }
  } else {
    loom_graph_pop_scope(g);
  }
  loom__free(ups);
  return loom__train_failed(g) ? NULL : train;
}

loom_node *loom_optimizer_minimize(loom_optimizer *o, loom_graph *g, loom_output loss, int nvars,
                                   loom_variable *const *vars, loom_variable *global_step, const char *name) {
  if (!g) return NULL;
  if (!o) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "minimize: optimizer is NULL");
    return NULL;
  }
  if (loom__train_failed(g)) return NULL;
  int n = nvars;
  loom_variable *const *list = vars;
  if (n <= 0 || !list) list = loom_trainable_variables(g, &n); /* apply_gradients copies it */
  if (n <= 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: No variables to optimize.", o->name);
    return NULL;
  }
  loom_output *xs = loom__calloc((size_t)n, sizeof *xs);
  loom_gradient *gr = loom__calloc((size_t)n, sizeof *gr);
  loom_status *st = loom_status_new();
  loom_node *r = NULL;
  if (!xs || !gr || !st) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", o->name);
    goto done;
  }
  for (int i = 0; i < n; i++) {
    if (!list[i] || !list[i]->node) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: variable %d is invalid", o->name, i);
      goto done;
    }
    xs[i] = vout(list[i]);
  }
  loom_code rc = loom_gradients_sparse(g, 1, &loss, NULL, n, xs, gr, st);
  if (rc) {
    loom_graph_set_error(g, rc, "%s: %s", o->name, loom_status_message(st));
    goto done;
  }
  r = loom_optimizer_apply_gradients(o, g, n, gr, list, global_step, name);
done:
  loom__free(xs);
  loom__free(gr);
  loom_status_free(st);
  return r;
}
