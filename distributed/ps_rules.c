/* distributed/ps_rules.c - the model's own update rules for the PS, read from its train op (ps_rules.h).
 * Input positions are the apply ops' (ops/train.c, TF's); hyperparameter slots are loom_ps_optimizer's. */
#include <stdio.h>
#include <string.h>
#include "base/base.h"
#include "distributed/ps_rules.h"
#include "engine/engine_api.h"
#include "kernels/cpu/optim.h"
#include "kernels/kernel.h"

#define NO -1
enum { MAXH = 5, MAXS = 3 };

/* One apply op: its PS optimizer, input positions (var, lr, grad, indices), the inputs that are
 * hyperparameters (hin[k] goes to hyper[hslot[k]]), the slots (their initial values: the PS's fixed ones,
 * or, for slot sinit_q when sinit_h >= 0, hyper[sinit_h], read from the slot variable's initial value),
 * Adam's beta powers. */
typedef struct apply_kind {
  const char *op;
  loom_ps_optimizer opt;
  int lr, grad, idx;
  int nh, hin[MAXH], hslot[MAXH];
  int ns, sin[MAXS];
  float sfix[MAXS];
  int sinit_h; /* slot sinit_q's initial value goes to hyper[sinit_h] (-1: all fixed) */
  int sinit_q;
  int b1p, b2p;
  int centered; /* hyper[4] = 1 */
} apply_kind;

static const apply_kind KINDS[] = {
    {"ApplyGradientDescent", LOOM_PS_SGD, 1, 2, NO, 0, {0}, {0}, 0, {0}, {0}, NO, 0, NO, NO, 0},
    {"SparseApplyGradientDescent", LOOM_PS_SGD, 1, 2, 3, 0, {0}, {0}, 0, {0}, {0}, NO, 0, NO, NO, 0},
    {"ApplyMomentum", LOOM_PS_MOMENTUM, 2, 3, NO, 1, {4}, {1}, 1, {1}, {0}, NO, 0, NO, NO, 0},
    {"SparseApplyMomentum", LOOM_PS_MOMENTUM, 2, 3, 4, 1, {5}, {1}, 1, {1}, {0}, NO, 0, NO, NO, 0},
    {"ApplyAdagrad", LOOM_PS_ADAGRAD, 2, 3, NO, 0, {0}, {0}, 1, {1}, {0}, 1, 0, NO, NO, 0},
    {"SparseApplyAdagrad", LOOM_PS_ADAGRAD, 2, 3, 4, 0, {0}, {0}, 1, {1}, {0}, 1, 0, NO, NO, 0},
    {"ApplyAdam", LOOM_PS_ADAM, 5, 9, NO, 3, {6, 7, 8}, {1, 2, 3}, 2, {1, 2}, {0, 0}, NO, 0, 3, 4, 0},
    {"SparseApplyAdam", LOOM_PS_ADAM, 5, 9, 10, 3, {6, 7, 8}, {1, 2, 3}, 2, {1, 2}, {0, 0}, NO, 0, 3, 4, 0},
    {"ApplyFtrlV2", LOOM_PS_FTRL, 4, 3, NO, 4, {5, 6, 7, 8}, {3, 4, 5, 1}, 2, {1, 2}, {0, 0}, 2, 0, NO, NO, 0},
    {"SparseApplyFtrlV2", LOOM_PS_FTRL, 5, 3, 4, 4, {6, 7, 8, 9}, {3, 4, 5, 1}, 2, {1, 2}, {0, 0}, 2, 0, NO, NO, 0},
    {"ApplyRMSProp", LOOM_PS_RMSPROP, 3, 7, NO, 3, {4, 5, 6}, {1, 2, 3}, 2, {1, 2}, {0, 0}, 5, 0, NO, NO, 0},
    {"SparseApplyRMSProp", LOOM_PS_RMSPROP, 3, 7, 8, 3, {4, 5, 6}, {1, 2, 3}, 2, {1, 2}, {0, 0}, 5, 0, NO, NO, 0},
    {"ApplyCenteredRMSProp", LOOM_PS_RMSPROP, 4, 8, NO, 3, {5, 6, 7}, {1, 2, 3}, 3, {1, 2, 3}, {0, 0, 0}, 5, 1, NO, NO,
     1},
    {"SparseApplyCenteredRMSProp", LOOM_PS_RMSPROP, 4, 8, 9, 3, {5, 6, 7}, {1, 2, 3}, 3, {1, 2, 3}, {0, 0, 0}, 5, 1, NO,
     NO, 1},
    {"ApplyAdadelta", LOOM_PS_ADADELTA, 3, 6, NO, 2, {4, 5}, {1, 2}, 2, {1, 2}, {0, 0}, NO, 0, NO, NO, 0},
    {"SparseApplyAdadelta", LOOM_PS_ADADELTA, 3, 6, 7, 2, {4, 5}, {1, 2}, 2, {1, 2}, {0, 0}, NO, 0, NO, NO, 0},
};

typedef struct var_rule {
  loom_node *apply;
  const apply_kind *k;
  loom_gradient grad;
  loom_node *sched;        /* the LearningRateSchedule node (NULL: a constant learning rate) */
  int f_lr, f_h, f_s, f_b; /* first fetch index of the lr (or the schedule's extras), hypers, slot inits, beta powers */
  int f_sv;                /* first fetch index of the slots' current values */
  loom_tensor *slot_t[MAXS];
  const float *slot_p[MAXS];
  loom_ps_update_rule rule;
  loom_variable *slot_vars[MAXS], *b1p, *b2p;
  double *bounds;
  float *values;
} var_rule;

struct loom_ps_rules {
  loom_graph *g;
  const loom_ps_placement *p;
  loom_variable *gs;
  int n;
  var_rule *v;
  loom_output *fetch;
  int nfetch, capfetch;
  loom_node **local; /* the trainer's own updates of its non-trainable state (batch norm's moving averages) */
  int nlocal, caplocal;
};

void loom__ps_rules_free(loom_ps_rules *r) {
  if (!r) return;
  for (int i = 0; r->v && i < r->n; i++) {
    loom__free(r->v[i].bounds);
    loom__free(r->v[i].values);
    for (int k = 0; k < MAXS; k++) loom_tensor_free(r->v[i].slot_t[k]);
  }
  loom__free(r->v);
  loom__free(r->fetch);
  loom__free(r->local);
  loom__free(r);
}

static const apply_kind *kind_of(const char *op) {
  for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
    if (!strcmp(op, KINDS[i].op)) return &KINDS[i];
  return NULL;
}

/* The optimizer ops without a PS counterpart: their gradient and indices inputs (for the collective
 * strategy's gradient scale). */
static const struct {
  const char *op;
  int grad, idx;
} LOCAL_ONLY[] = {
    {"ApplyProximalGradientDescent", 4, NO}, {"SparseApplyProximalGradientDescent", 4, 5},
    {"ApplyProximalAdagrad", 5, NO},         {"SparseApplyProximalAdagrad", 5, 6},
    {"ApplyAdagradDA", 3, NO},               {"SparseApplyAdagradDA", 3, 4},
};

int loom__apply_op_grad_inputs(const char *op, int *grad, int *indices) {
  const apply_kind *k = kind_of(op);
  if (!k) {
    for (size_t i = 0; i < sizeof LOCAL_ONLY / sizeof LOCAL_ONLY[0]; i++)
      if (!strcmp(op, LOCAL_ONLY[i].op)) {
        *grad = LOCAL_ONLY[i].grad;
        *indices = LOCAL_ONLY[i].idx;
        return 1;
      }
    return 0;
  }
  *grad = k->grad;
  *indices = k->idx;
  return 1;
}

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* The variable node an input reads (NULL: not a variable). */
static loom_node *var_node(loom_output o) {
  return o.node && !strcmp(loom_node_op_name(o.node), "VariableV2") ? o.node : NULL;
}

static int var_index(const loom_ps_rules *r, const char *name) {
  for (int i = 0; i < r->n; i++)
    if (!strcmp(loom_ps_placement_var(r->p, i)->name, name)) return i;
  return -1;
}

/* 0 when out's value is a constant of the graph (no variable, placeholder, schedule or random op feeds it);
 * else the first node that is not, in *bad. allow_gs: the global step variable may feed it. */
static int not_constant(loom_ps_rules *r, loom_output out, int allow_gs, loom_node **bad, loom_status *st) {
  loom_node **order = NULL;
  int n = 0;
  loom_node *root = out.node;
  if (loom__graph_collect(r->g, 1, &root, &order, &n, st) != LOOM_OK) return -1;
  int found = 0;
  for (int i = 0; i < n && !found; i++) {
    const char *op = loom_node_op_name(order[i]);
    if (allow_gs && order[i] == loom_variable_node(r->gs)) continue;
    if (!strcmp(op, "VariableV2") || starts(op, "Placeholder") || !strcmp(op, "LearningRateSchedule") ||
        starts(op, "Random") || starts(op, "Stateless") || starts(op, "Assign") || starts(op, "Apply") ||
        starts(op, "SparseApply") || !strcmp(op, "TruncatedNormal") || !strcmp(op, "Multinomial")) {
      *bad = order[i];
      found = 1;
    }
  }
  loom__free(order);
  return found;
}

static int add_fetch(loom_ps_rules *r, loom_output o) {
  if (r->nfetch == r->capfetch) {
    int nc = r->capfetch ? 2 * r->capfetch : 32;
    loom_output *f = loom__realloc(r->fetch, (size_t)nc * sizeof *f);
    if (!f) return -1;
    r->fetch = f;
    r->capfetch = nc;
  }
  r->fetch[r->nfetch] = o;
  return r->nfetch++;
}

#define BAD(...) (loom_status_set(st, LOOM_INVALID_ARGUMENT, __VA_ARGS__), -1)

/* The learning rate of apply op a (variable vname): a constant, or a schedule of the global step. */
static int read_lr(loom_ps_rules *r, var_rule *vr, const char *vname, loom_status *st) {
  loom_output lr = loom_node_input(vr->apply, vr->k->lr);
  loom_node *bad = NULL;
  if (lr.node && !strcmp(loom_node_op_name(lr.node), "LearningRateSchedule")) {
    int ni = loom_node_num_inputs(lr.node);
    int nc = not_constant(r, loom_node_input(lr.node, 0), 1, &bad, st);
    if (nc < 0) return -1;
    if (nc || !r->gs)
      return BAD("train op: the learning-rate schedule %s of variable %s reads %s (%s), not the global step: the PS "
                 "evaluates a schedule at the global step only",
                 loom_node_name(lr.node), vname, bad ? loom_node_name(bad) : "no global step",
                 bad ? loom_node_op_name(bad) : "-");
    vr->sched = lr.node;
    vr->f_lr = r->nfetch;
    for (int i = 1; i < ni; i++) {
      if ((nc = not_constant(r, loom_node_input(lr.node, i), 0, &bad, st)) != 0)
        return nc < 0 ? -1
                      : BAD("train op: the learning-rate schedule %s of variable %s takes %s (%s), not a constant",
                            loom_node_name(lr.node), vname, loom_node_name(bad), loom_node_op_name(bad));
      if (add_fetch(r, loom_node_input(lr.node, i)) < 0) return BAD("out of memory");
    }
    return 0;
  }
  int nc = not_constant(r, lr, 0, &bad, st);
  if (nc)
    return nc < 0 ? -1
                  : BAD("train op: the learning rate of %s %s (variable %s) is computed from %s (%s); the PS "
                        "takes a constant or a learning-rate schedule of the global step (train/schedules.c)",
                        loom_node_op_name(vr->apply), loom_node_name(vr->apply), vname, loom_node_name(bad),
                        loom_node_op_name(bad));
  vr->f_lr = add_fetch(r, lr);
  return vr->f_lr < 0 ? BAD("out of memory") : 0;
}

static int read_apply(loom_ps_rules *r, loom_node *a, const apply_kind *k, loom_status *st) {
  loom_node *vn = var_node(loom_node_input(a, 0));
  const char *vname = vn ? loom_node_name(vn) : "?";
  int idx = vn ? var_index(r, vname) : -1;
  if (idx < 0)
    return BAD("train op: %s %s updates %s, which is not a trainable variable of the placement (the PS holds "
               "the trainable variables)",
               k->op, loom_node_name(a), vname);
  var_rule *vr = &r->v[idx];
  if (vr->apply)
    return BAD("train op: variable %s is updated twice (%s %s and %s %s); the PS applies one update rule per "
               "variable",
               vname, loom_node_op_name(vr->apply), loom_node_name(vr->apply), k->op, loom_node_name(a));
  const struct loom_attrs *at = loom__node_attrs(a);
  if ((k->opt == LOOM_PS_ADAM && k->idx == NO && at && at->num != 0))
    return BAD("train op: %s %s (variable %s) uses Nesterov momentum, which the PS's Adam has not", k->op,
               loom_node_name(a), vname);
  vr->apply = a;
  vr->k = k;
  vr->grad.values = loom_node_input(a, k->grad);
  if (k->idx != NO) vr->grad.indices = loom_node_input(a, k->idx);
  vr->rule.optimizer = k->opt;
  vr->rule.schedule = -1;
  if (k->opt == LOOM_PS_MOMENTUM && at && (at->num & 1)) vr->rule.hyper[2] = 1.0f;
  if (k->opt == LOOM_PS_ADAM && k->idx != NO && !(at && ((at->num >> 1) & 1))) vr->rule.hyper[4] = 1.0f;
  if (k->centered) vr->rule.hyper[4] = 1.0f;
  if (k->opt == LOOM_PS_RMSPROP && at && (at->num & 1)) vr->rule.hyper[6] = 1.0f; /* Keras' legacy form */
  if (read_lr(r, vr, vname, st) < 0) return -1;
  loom_node *bad = NULL;
  vr->f_h = r->nfetch;
  for (int i = 0; i < k->nh; i++) {
    loom_output h = loom_node_input(a, k->hin[i]);
    int nc = not_constant(r, h, 0, &bad, st);
    if (nc)
      return nc < 0 ? -1
                    : BAD("train op: input %d of %s %s (variable %s) is computed from %s (%s), not a constant",
                          k->hin[i], k->op, loom_node_name(a), vname, loom_node_name(bad), loom_node_op_name(bad));
    if (add_fetch(r, h) < 0) return BAD("out of memory");
  }
  vr->f_s = r->nfetch;
  for (int i = 0; i < k->ns; i++) {
    loom_node *sn = var_node(loom_node_input(a, k->sin[i]));
    loom_variable *sv = sn ? loom_graph_variable(r->g, loom_node_name(sn)) : NULL;
    if (!sv)
      return BAD("train op: input %d of %s %s (variable %s) is not a slot variable", k->sin[i], k->op,
                 loom_node_name(a), vname);
    if (add_fetch(r, loom_variable_initial_value(sv)) < 0) return BAD("out of memory");
    vr->slot_vars[i] = sv;
  }
  vr->f_sv = r->nfetch;
  for (int i = 0; i < k->ns; i++)
    if (add_fetch(r, loom_variable_output(vr->slot_vars[i])) < 0) return BAD("out of memory");
  vr->f_b = r->nfetch;
  if (k->b1p != NO) {
    loom_node *b1 = var_node(loom_node_input(a, k->b1p)), *b2 = var_node(loom_node_input(a, k->b2p));
    if (!b1 || !b2)
      return BAD("train op: %s %s (variable %s): the beta powers are not variables", k->op, loom_node_name(a), vname);
    if (add_fetch(r, loom_node_input(a, k->b1p)) < 0 || add_fetch(r, loom_node_input(a, k->b2p)) < 0)
      return BAD("out of memory");
    vr->b1p = loom_graph_variable(r->g, loom_node_name(b1));
    vr->b2p = loom_graph_variable(r->g, loom_node_name(b2));
  }
  return 0;
}

/* An assignment in the train op: the global step's increment, or an Adam beta power's update. */
static int assign_ok(loom_ps_rules *r, loom_node *a, int nnodes, loom_node **order) {
  loom_node *t = var_node(loom_node_input(a, 0));
  if (!t) return 0;
  if (r->gs && t == loom_variable_node(r->gs) && !strcmp(loom_node_op_name(a), "AssignAdd")) return 1;
  if (strcmp(loom_node_op_name(a), "AssignMul")) return 0;
  for (int i = 0; i < nnodes; i++) {
    const apply_kind *k = kind_of(loom_node_op_name(order[i]));
    if (k && k->b1p != NO &&
        (var_node(loom_node_input(order[i], k->b1p)) == t || var_node(loom_node_input(order[i], k->b2p)) == t))
      return 1;
  }
  return 0;
}

/* An assignment to a variable the PS does not hold (not trainable: batch norm's moving averages): the
 * trainer runs it itself, provided nothing it needs is an optimizer's update. 1 kept, 0 not such an
 * assignment, -1 error (st set). */
static int local_update(loom_ps_rules *r, loom_node *a, loom_status *st) {
  loom_node *t = var_node(loom_node_input(a, 0));
  if (!t || var_index(r, loom_node_name(t)) >= 0 || (r->gs && t == loom_variable_node(r->gs))) return 0;
  loom_node **order = NULL;
  int n = 0;
  if (loom__graph_collect(r->g, 1, &a, &order, &n, st) != LOOM_OK) return -1;
  const char *bad = NULL;
  for (int i = 0; i < n && !bad; i++)
    if (kind_of(loom_node_op_name(order[i]))) bad = loom_node_name(order[i]);
  loom__free(order);
  if (bad)
    return BAD("train op: %s %s updates variable %s after the optimizer's update %s: the trainer cannot run it "
               "without the PS's update",
               loom_node_op_name(a), loom_node_name(a), loom_node_name(t), bad);
  if (r->nlocal == r->caplocal) {
    int nc = r->caplocal ? 2 * r->caplocal : 8;
    loom_node **q = loom__realloc(r->local, (size_t)nc * sizeof *q);
    if (!q) return BAD("out of memory");
    r->local = q;
    r->caplocal = nc;
  }
  r->local[r->nlocal++] = a;
  return 1;
}

int loom__ps_rules_local_updates(const loom_ps_rules *r, loom_node *const **nodes) {
  *nodes = r ? r->local : NULL;
  return r ? r->nlocal : 0;
}

loom_ps_rules *loom__ps_rules_new(loom_graph *g, loom_node *train_op, loom_variable *global_step,
                                  const loom_ps_placement *p, loom_status *st) {
  if (!g || !train_op || !p) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "update rules: no graph, train op or placement");
    return NULL;
  }
  loom_ps_rules *r = loom__calloc(1, sizeof *r);
  int n = loom_ps_placement_num_vars(p);
  if (r) r->v = loom__calloc((size_t)(n ? n : 1), sizeof *r->v);
  if (!r || !r->v) {
    loom__ps_rules_free(r);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  r->g = g;
  r->p = p;
  r->gs = global_step;
  r->n = n;
  loom_node **order = NULL;
  int cnt = 0;
  if (loom__graph_collect(g, 1, &train_op, &order, &cnt, st) != LOOM_OK) {
    loom__ps_rules_free(r);
    return NULL;
  }
  int bad = 0;
  for (int i = 0; i < cnt && !bad; i++) {
    loom_node *a = order[i];
    const char *op = loom_node_op_name(a);
    const apply_kind *k = kind_of(op);
    if (k) {
      bad = read_apply(r, a, k, st) < 0;
    } else if (starts(op, "Apply") || starts(op, "SparseApply") || starts(op, "ResourceApply") ||
               starts(op, "ResourceSparseApply")) {
      loom_node *vn = var_node(loom_node_input(a, 0));
      bad = BAD("train op: %s %s (variable %s) has no parameter-server counterpart", op, loom_node_name(a),
                vn ? loom_node_name(vn) : "?") < 0;
    } else if ((starts(op, "Assign") || starts(op, "Scatter")) && !assign_ok(r, a, cnt, order)) {
      int lu = local_update(r, a, st);
      if (lu) {
        bad = lu < 0;
        continue;
      }
      loom_node *vn = var_node(loom_node_input(a, 0));
      bad = BAD("train op: %s %s updates variable %s, which the PS cannot reproduce (it applies the optimizers' "
                "updates of the trainable variables, the global step and Adam's beta powers; the trainer the "
                "assignments to other variables)",
                op, loom_node_name(a), vn ? loom_node_name(vn) : "?") < 0;
    }
  }
  loom__free(order);
  if (bad) {
    loom__ps_rules_free(r);
    return NULL;
  }
  if (r->gs && add_fetch(r, loom_variable_output(r->gs)) < 0) {
    loom__ps_rules_free(r);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  return r;
}

void loom__ps_rules_gradients(const loom_ps_rules *r, loom_gradient *grads) {
  for (int i = 0; i < r->n; i++) grads[i] = r->v[i].grad;
}

const loom_ps_update_rule *loom__ps_rules_get(const loom_ps_rules *r, int var) {
  return r && var >= 0 && var < r->n && r->v[var].apply ? &r->v[var].rule : NULL;
}

int loom__ps_rules_slots(const loom_ps_rules *r, int var, loom_variable **slots, loom_variable **beta1_power,
                         loom_variable **beta2_power) {
  const var_rule *vr = r && var >= 0 && var < r->n && r->v[var].apply ? &r->v[var] : NULL;
  *beta1_power = vr ? vr->b1p : NULL;
  *beta2_power = vr ? vr->b2p : NULL;
  for (int i = 0; vr && i < vr->k->ns; i++) slots[i] = vr->slot_vars[i];
  return vr ? vr->k->ns : 0;
}

static double scalar_of(const loom_tensor *t) { return loom__tensor_scalar_f64(t); }

/* The first element of t when every element equals it; 0 with *uniform = 0 otherwise. */
static float uniform_value(const loom_tensor *t, int *uniform) {
  *uniform = 1;
  if (loom_tensor_dtype(t) != LOOM_F32 || loom_tensor_numel(t) < 1) return (float)scalar_of(t);
  const float *d = loom_tensor_data_const(t);
  for (int64_t i = 1; i < loom_tensor_numel(t); i++)
    if (d[i] != d[0]) {
      *uniform = 0;
      break;
    }
  return d[0];
}

static loom_code eval_var(loom_ps_rules *r, int i, loom_tensor **vals, int64_t gs, loom_status *st) {
  var_rule *vr = &r->v[i];
  const apply_kind *k = vr->k;
  const char *vname = loom_ps_placement_var(r->p, i)->name;
  loom_ps_update_rule *u = &vr->rule;
  u->step = gs;
  if (vr->sched) {
    const struct loom_attrs *at = loom__node_attrs(vr->sched);
    u->schedule = (int32_t)at->num;
    u->flag = at->keepdims;
    u->lr = at->alpha;
    u->decay_steps = at->start;
    u->beta = at->beta;
    u->limit = at->limit;
    if (u->schedule == LOOM_LRS_PIECEWISE) {
      const loom_tensor *b = vals[vr->f_lr], *v = vals[vr->f_lr + 1];
      int64_t nb = loom_tensor_numel(b);
      loom__free(vr->bounds);
      loom__free(vr->values);
      vr->bounds = loom__malloc(8 * (size_t)nb + 8);
      vr->values = loom__malloc(4 * (size_t)nb + 4);
      if (!vr->bounds || !vr->values) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
      if (nb) memcpy(vr->bounds, loom_tensor_data_const(b), 8 * (size_t)nb);
      memcpy(vr->values, loom_tensor_data_const(v), 4 * (size_t)nb + 4);
      u->nboundaries = (int32_t)nb;
      u->boundaries = vr->bounds;
      u->values = vr->values;
    }
  } else {
    u->hyper[0] = (float)scalar_of(vals[vr->f_lr]);
  }
  for (int h = 0; h < k->nh; h++) u->hyper[k->hslot[h]] = (float)scalar_of(vals[vr->f_h + h]);
  for (int s = 0; s < k->ns; s++) {
    int uni = 1;
    float v0 = uniform_value(vals[vr->f_s + s], &uni);
    float want = s == k->sinit_q && k->sinit_h != NO ? v0 : k->sfix[s];
    if (!uni || v0 != want)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "train op: slot %s of %s %s (variable %s) starts at %s%g; the PS starts it at %g",
                             loom_node_name(loom_node_input(vr->apply, k->sin[s]).node), k->op,
                             loom_node_name(vr->apply), vname, uni ? "" : "values other than ", (double)v0,
                             (double)want);
    if (s == k->sinit_q && k->sinit_h != NO) u->hyper[k->sinit_h] = v0;
  }
  for (int q = 0; q < k->ns; q++) { /* the slots' values now (a restored checkpoint's, or initial) */
    loom_tensor_free(vr->slot_t[q]);
    vr->slot_t[q] = vals[vr->f_sv + q];
    vals[vr->f_sv + q] = NULL;
    if (loom_tensor_dtype(vr->slot_t[q]) != LOOM_F32)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "train op: slot %s of variable %s is not float32",
                             loom_variable_name(vr->slot_vars[q]), vname);
    vr->slot_p[q] = loom_tensor_data_const(vr->slot_t[q]);
  }
  /* the slots' values travel only when some differ from the initial ones (a restored checkpoint's) */
  int fresh = 1;
  for (int q = 0; q < k->ns && fresh; q++) {
    int uni = 1;
    float now = uniform_value(vr->slot_t[q], &uni);
    float init = q == k->sinit_q && k->sinit_h != NO ? u->hyper[k->sinit_h] : k->sfix[q];
    fresh = uni && now == init;
  }
  u->nslot_values = fresh ? 0 : k->ns;
  u->slot_values = fresh ? NULL : vr->slot_p;
  if (k->b1p != NO) {
    u->beta1_power = (float)scalar_of(vals[vr->f_b]);
    u->beta2_power = (float)scalar_of(vals[vr->f_b + 1]);
  }
  return LOOM_OK;
}

loom_code loom__ps_rules_eval(loom_ps_rules *r, loom_session *s, loom_status *st) {
  if (!r || !s) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "update rules: NULL rules or session");
  loom_tensor **vals = loom__calloc((size_t)r->nfetch + 1, sizeof *vals);
  if (!vals) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  loom_code rc = r->nfetch ? loom_session_run(s, NULL, NULL, 0, r->fetch, vals, r->nfetch, NULL, 0, st) : LOOM_OK;
  int64_t gs = rc == LOOM_OK && r->gs ? (int64_t)scalar_of(vals[r->nfetch - 1]) : 0;
  for (int i = 0; i < r->n && rc == LOOM_OK; i++)
    if (r->v[i].apply) rc = eval_var(r, i, vals, gs, st);
  for (int i = 0; i < r->nfetch; i++) loom_tensor_free(vals[i]);
  loom__free(vals);
  return rc;
}
