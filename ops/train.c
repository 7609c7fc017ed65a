/* Train ops: VariableV2, the in-place Assign and Scatter ops, the optimizer
 * Apply ops (TF's training_ops, float32), LearningRateSchedule; their shape
 * functions and raw builders. The optimizer objects are in
 * train/optimizers.c, schedules and clipping in train/schedules.c,
 * tf.get_variable in train/variables.c, the variable store in
 * engine/variables.c.
 *
 * Attributes read:
 *   VariableV2: dtype, nshape/shape (fully known), resource (the
 *     loom_variable, owned by the graph's training state; may be NULL).
 *   ApplyMomentum/SparseApplyMomentum/ApplyAdam: num bit 0 = use_nesterov.
 *   SparseApplyAdam: num bit 1 = lazy.
 *   ApplyAdagradDA/SparseApplyAdagradDA: the global step input is an int32 or int64 scalar.
 *   every Apply/SparseApply op: alpha = the gradient scale (0, the default:
 *     1; loom_apply_set_gradient_scale; kernels/cpu/optim.h).
 *   LearningRateSchedule: see kernels/cpu/optim.c. */
#include <math.h>
#include "ops/op_common.h"
#include "engine/variables.h"
#include "kernels/cpu/optim.h"
#include "ops/train_ops.h"

/* ---- VariableV2 ---- */
static loom_code shape_variable(loom_shape_ctx *c) {
  /* the plan's element count cannot overflow */
  if (loom__shape_check_attr_size(c, "shape", c->attrs->nshape, c->attrs->shape)) return LOOM_INVALID_ARGUMENT;
  c->out[0].dtype = c->attrs->dtype;
  c->out[0].ndim = c->attrs->nshape;
  memcpy(c->out[0].dims, c->attrs->shape, sizeof(int64_t) * (size_t)c->attrs->nshape);
  return LOOM_OK;
}

static int dims_compatible(const loom_tdesc *a, const loom_tdesc *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] >= 0 && b->dims[i] >= 0 && a->dims[i] != b->dims[i]) return 0;
  return 1;
}

/* ---- Assign family: (ref, value) ---- */
static loom_code shape_assign_common(loom_shape_ctx *c, int numeric) {
  const loom_tdesc *r = &c->in[0], *v = &c->in[1];
  if (r->dtype != v->dtype)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "value dtype %s does not match the variable's %s",
                            loom_dtype_name(v->dtype), loom_dtype_name(r->dtype));
  if (numeric && !(LOOM_DT_NUM & LOOM_DT(r->dtype)))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "unsupported dtype %s", loom_dtype_name(r->dtype));
  if (r->dtype == LOOM_STRING)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "string variables are not supported");
  if (!dims_compatible(r, v))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "value shape %s does not match the variable's shape %s",
                            loom__tdesc_str(v), loom__tdesc_str(r));
  c->out[0] = *r;
  return LOOM_OK;
}
static loom_code shape_assign(loom_shape_ctx *c) { return shape_assign_common(c, 0); }
static loom_code shape_assign_num(loom_shape_ctx *c) { return shape_assign_common(c, 1); }

/* ---- Scatter: (ref, indices, updates); updates = indices.shape + ref.shape[1:] ---- */
static loom_code shape_scatter(loom_shape_ctx *c) {
  const loom_tdesc *r = &c->in[0], *ix = &c->in[1], *u = &c->in[2];
  if (r->ndim < 1) return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "the variable must have rank >= 1, got a scalar");
  if (!(LOOM_DT(r->dtype) & LOOM_DT_NUM) || r->dtype == LOOM_U8)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "unsupported variable dtype %s", loom_dtype_name(r->dtype));
  if (!(LOOM_DT(ix->dtype) & LOOM_DT_INT))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "indices must be int32 or int64, got %s",
                            loom_dtype_name(ix->dtype));
  if (u->dtype != r->dtype)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "updates dtype %s does not match the variable's %s",
                            loom_dtype_name(u->dtype), loom_dtype_name(r->dtype));
  int ok = u->ndim == ix->ndim + r->ndim - 1;
  for (int i = 0; ok && i < ix->ndim; i++) ok = u->dims[i] < 0 || ix->dims[i] < 0 || u->dims[i] == ix->dims[i];
  for (int i = 1; ok && i < r->ndim; i++) {
    int64_t a = u->dims[ix->ndim + i - 1], b = r->dims[i];
    ok = a < 0 || b < 0 || a == b;
  }
  if (!ok)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                            "updates shape %s must be indices shape %s + variable shape %s without its first dim",
                            loom__tdesc_str(u), loom__tdesc_str(ix), loom__tdesc_str(r));
  c->out[0] = *r;
  return LOOM_OK;
}

/* ---- Apply ops ----
 * sig: one letter per input: V var, R slot (var's shape), S float scalar,
 * G gradient (dense: var's shape; sparse: [n, var.dims[1:]]), I indices, T an int32/int64 scalar (the
 * global step). */
typedef struct apply_sig {
  const char *sig;
  const char *names[12];
} apply_sig;

static const apply_sig SIG_GD = {"VSG", {"var", "alpha", "delta"}};
static const apply_sig SIG_SGD = {"VSGI", {"var", "alpha", "grad", "indices"}};
static const apply_sig SIG_MOM = {"VRSGS", {"var", "accum", "lr", "grad", "momentum"}};
static const apply_sig SIG_SMOM = {"VRSGIS", {"var", "accum", "lr", "grad", "indices", "momentum"}};
static const apply_sig SIG_ADAGRAD = {"VRSG", {"var", "accum", "lr", "grad"}};
static const apply_sig SIG_SADAGRAD = {"VRSGI", {"var", "accum", "lr", "grad", "indices"}};
static const apply_sig SIG_ADAM = {
    "VRRSSSSSSG", {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"}};
static const apply_sig SIG_SADAM = {
    "VRRSSSSSSGI",
    {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad", "indices"}};
static const apply_sig SIG_FTRL = {
    "VRRGSSSSS", {"var", "accum", "linear", "grad", "lr", "l1", "l2", "l2_shrinkage", "lr_power"}};
static const apply_sig SIG_SFTRL = {
    "VRRGISSSSS", {"var", "accum", "linear", "grad", "indices", "lr", "l1", "l2", "l2_shrinkage", "lr_power"}};
static const apply_sig SIG_RMS = {"VRRSSSSG", {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}};
static const apply_sig SIG_SRMS = {
    "VRRSSSSGI", {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad", "indices"}};
static const apply_sig SIG_CRMS = {
    "VRRRSSSSG", {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}};
static const apply_sig SIG_SCRMS = {
    "VRRRSSSSGI", {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad", "indices"}};
static const apply_sig SIG_ADADELTA = {
    "VRRSSSG", {"var", "accum", "accum_update", "lr", "rho", "epsilon", "grad"}};
static const apply_sig SIG_SADADELTA = {
    "VRRSSSGI", {"var", "accum", "accum_update", "lr", "rho", "epsilon", "grad", "indices"}};

static const apply_sig SIG_PGD = {"VSSSG", {"var", "alpha", "l1", "l2", "delta"}};
static const apply_sig SIG_SPGD = {"VSSSGI", {"var", "alpha", "l1", "l2", "grad", "indices"}};
static const apply_sig SIG_PADAGRAD = {"VRSSSG", {"var", "accum", "lr", "l1", "l2", "grad"}};
static const apply_sig SIG_SPADAGRAD = {"VRSSSGI", {"var", "accum", "lr", "l1", "l2", "grad", "indices"}};
static const apply_sig SIG_ADAGRAD_DA = {
    "VRRGSSST",
    {"var", "gradient_accumulator", "gradient_squared_accumulator", "grad", "lr", "l1", "l2", "global_step"}};
static const apply_sig SIG_SADAGRAD_DA = {
    "VRRGISSST",
    {"var", "gradient_accumulator", "gradient_squared_accumulator", "grad", "indices", "lr", "l1", "l2",
     "global_step"}};

static int sig_find(const apply_sig *s, char ch) {
  for (int i = 0; s->sig[i]; i++)
    if (s->sig[i] == ch) return i;
  return -1;
}

static loom_code shape_apply(loom_shape_ctx *c, const apply_sig *s) {
  const loom_tdesc *var = &c->in[0];
  int sparse = sig_find(s, 'I') >= 0;
  double gscale = c->attrs->alpha; /* 0: the default, 1 */
  if (gscale != 0.0 && !((float)gscale > 0.0f && !isinf((float)gscale)))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "gradient scale %g must be a finite float32 > 0", gscale);
  if (var->dtype != LOOM_F32)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "var must be float32, got %s", loom_dtype_name(var->dtype));
  if (sparse && var->ndim < 1)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "var must have rank >= 1 for a sparse update, got a scalar");
  int ii = sig_find(s, 'I');
  for (int i = 1; s->sig[i]; i++) {
    const loom_tdesc *d = &c->in[i];
    const char *nm = s->names[i];
    switch (s->sig[i]) {
    case 'R':
      if (d->dtype != var->dtype || !dims_compatible(d, var))
        return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s (%s %s) must match var (%s %s)", nm,
                                loom_dtype_name(d->dtype), loom__tdesc_str(d), loom_dtype_name(var->dtype),
                                loom__tdesc_str(var));
      break;
    case 'S':
      if (d->dtype != var->dtype || d->ndim != 0)
        return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s must be a %s scalar, got %s %s", nm,
                                loom_dtype_name(var->dtype), loom_dtype_name(d->dtype), loom__tdesc_str(d));
      break;
    case 'T':
      if ((d->dtype != LOOM_I32 && d->dtype != LOOM_I64) || d->ndim != 0)
        return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s must be an int32 or int64 scalar, got %s %s", nm,
                                loom_dtype_name(d->dtype), loom__tdesc_str(d));
      break;
    case 'I':
      if (!(LOOM_DT(d->dtype) & LOOM_DT_INT) || d->ndim != 1)
        return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "indices must be a rank-1 int32/int64 tensor, got %s %s",
                                loom_dtype_name(d->dtype), loom__tdesc_str(d));
      break;
    case 'G':
      if (d->dtype != var->dtype)
        return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s dtype %s does not match var's %s", nm,
                                loom_dtype_name(d->dtype), loom_dtype_name(var->dtype));
      if (!sparse) {
        if (!dims_compatible(d, var))
          return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s shape %s does not match var shape %s", nm,
                                  loom__tdesc_str(d), loom__tdesc_str(var));
      } else {
        const loom_tdesc *ix = &c->in[ii];
        int ok = d->ndim == var->ndim && ix->ndim == 1;
        if (ok && d->dims[0] >= 0 && ix->dims[0] >= 0) ok = d->dims[0] == ix->dims[0];
        for (int k = 1; ok && k < var->ndim; k++)
          ok = d->dims[k] < 0 || var->dims[k] < 0 || d->dims[k] == var->dims[k];
        if (!ok)
          return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                                  "%s shape %s must be [len(indices)] + var shape %s without its first dim "
                                  "(indices %s)",
                                  nm, loom__tdesc_str(d), loom__tdesc_str(var), loom__tdesc_str(ix));
      }
      break;
    default: break;
    }
  }
  c->out[0] = *var;
  return LOOM_OK;
}

static size_t ws_apply(const apply_sig *s, const loom_attrs *a, const loom_buf *const *in, int bitmap) {
  int ii = sig_find(s, 'I');
  const loom_buf *var = in[0];
  int64_t nrows = var->ndim ? var->dims[0] : 0;
  int64_t row = nrows > 0 ? var->numel / nrows : 0;
  /* RMSProp in Keras' legacy form (attrs.num bit 0) decays every row: the touched rows' bitmap */
  if (s == &SIG_SRMS || s == &SIG_SCRMS) bitmap = (int)(a->num & 1);
  return loom__sparse_apply_ws(in[ii]->numel, row, nrows, bitmap);
}

#define SHAPE_FN(NAME, SIG) \
  static loom_code shape_##NAME(loom_shape_ctx *c) { return shape_apply(c, &SIG); }
#define WS_FN(NAME, SIG)                                                                      \
  static size_t ws_##NAME(const loom_attrs *a, int nin, const loom_buf *const *in, int nout, \
                          const loom_buf *const *out) {                                       \
    (void)nin;                                                                                \
    (void)nout;                                                                               \
    (void)out;                                                                                \
    return ws_apply(&SIG, a, in, 0);                                                          \
  }
#define SPARSE_FNS(NAME, SIG) SHAPE_FN(NAME, SIG) WS_FN(NAME, SIG)
SHAPE_FN(gd, SIG_GD)
SPARSE_FNS(sgd, SIG_SGD)
SHAPE_FN(mom, SIG_MOM)
SPARSE_FNS(smom, SIG_SMOM)
SHAPE_FN(adagrad, SIG_ADAGRAD)
SPARSE_FNS(sadagrad, SIG_SADAGRAD)
SHAPE_FN(adam, SIG_ADAM)
SHAPE_FN(sadam, SIG_SADAM)
SHAPE_FN(ftrl, SIG_FTRL)
SPARSE_FNS(sftrl, SIG_SFTRL)
SHAPE_FN(rms, SIG_RMS)
SPARSE_FNS(srms, SIG_SRMS)
SHAPE_FN(crms, SIG_CRMS)
SPARSE_FNS(scrms, SIG_SCRMS)
SHAPE_FN(adadelta, SIG_ADADELTA)
SPARSE_FNS(sadadelta, SIG_SADADELTA)
SHAPE_FN(pgd, SIG_PGD)
SPARSE_FNS(spgd, SIG_SPGD)
SHAPE_FN(padagrad, SIG_PADAGRAD)
SPARSE_FNS(spadagrad, SIG_SPADAGRAD)
SHAPE_FN(adagrad_da, SIG_ADAGRAD_DA)
SPARSE_FNS(sadagrad_da, SIG_SADAGRAD_DA)

/* sparse Adam: the bitmap of touched rows unless lazy */
static size_t ws_sadam_bm(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                          const loom_buf *const *out) {
  (void)nin;
  (void)nout;
  (void)out;
  return ws_apply(&SIG_SADAM, a, in, !((a->num >> 1) & 1));
}

/* ---- LearningRateSchedule ---- */
static loom_code shape_lr_schedule(loom_shape_ctx *c) {
  const loom_tdesc *s = &c->in[0];
  if (s->ndim != 0 || !(LOOM_DT(s->dtype) & (LOOM_DT_INT | LOOM_DT_FLOAT)))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "global_step must be a numeric scalar, got %s %s",
                            loom_dtype_name(s->dtype), loom__tdesc_str(s));
  if (c->attrs->num == LOOM_LRS_PIECEWISE) {
    if (c->nin != 3 || c->in[1].dtype != LOOM_F64 || c->in[2].dtype != LOOM_F32 || c->in[1].ndim != 1 ||
        c->in[2].ndim != 1 || c->in[2].dims[0] != c->in[1].dims[0] + 1)
      return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "piecewise_constant needs n boundaries and n + 1 values");
  } else if (c->nin != 1) {
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "takes 1 input, got %d", c->nin);
  }
  c->out[0].dtype = LOOM_F32;
  c->out[0].ndim = 0;
  return LOOM_OK;
}

#define INPLACE_FLAGS (LOOM_OPF_ALIAS0 | LOOM_OPF_MUTATES_INPUT0 | LOOM_OPF_STATEFUL | LOOM_OPF_NODIFF)

static void reg_apply(loom_op_def *t, int op, int nin, loom_shape_fn shape, loom_workspace_fn ws, loom_kernel_fn k) {
  t[op].nin = nin;
  t[op].nout = 1;
  t[op].shape = shape;
  t[op].workspace = ws;
  t[op].flags = INPLACE_FLAGS;
  t[op].nondiff_inputs = 0xffffffffu;
  t[op].kernels[LOOM_DEVICE_CPU][LOOM_F32] = k;
}

/* The optimizer ops (Apply*, SparseApply*): the variable and its slots, written in place (inputs 0 .. n-1). */
static const struct {
  int op, n;
} muts[] = {
      {LOOM_OP_ApplyGradientDescent, 1}, {LOOM_OP_SparseApplyGradientDescent, 1}, {LOOM_OP_ApplyMomentum, 2},
      {LOOM_OP_SparseApplyMomentum, 2},  {LOOM_OP_ApplyAdagrad, 2},              {LOOM_OP_SparseApplyAdagrad, 2},
      {LOOM_OP_ApplyAdam, 3},            {LOOM_OP_SparseApplyAdam, 3},           {LOOM_OP_ApplyFtrlV2, 3},
      {LOOM_OP_SparseApplyFtrlV2, 3},    {LOOM_OP_ApplyRMSProp, 3},              {LOOM_OP_SparseApplyRMSProp, 3},
      {LOOM_OP_ApplyCenteredRMSProp, 4}, {LOOM_OP_SparseApplyCenteredRMSProp, 4}, {LOOM_OP_ApplyAdadelta, 3},
      {LOOM_OP_SparseApplyAdadelta, 3},  {LOOM_OP_ApplyProximalGradientDescent, 1},
      {LOOM_OP_SparseApplyProximalGradientDescent, 1}, {LOOM_OP_ApplyProximalAdagrad, 2},
      {LOOM_OP_SparseApplyProximalAdagrad, 2}, {LOOM_OP_ApplyAdagradDA, 3}, {LOOM_OP_SparseApplyAdagradDA, 3},
};
#define NMUTS (sizeof muts / sizeof muts[0])

void loom__register_train(loom_op_def *t) {
  t[LOOM_OP_VariableV2].nin = 0;
  t[LOOM_OP_VariableV2].nout = 1;
  t[LOOM_OP_VariableV2].shape = shape_variable;
  t[LOOM_OP_VariableV2].bind = loom__var_bind;
  t[LOOM_OP_VariableV2].flags = LOOM_OPF_STATEFUL | LOOM_OPF_KEY_OUTPUT | LOOM_OPF_VARIABLE;

  static const struct {
    int op;
    loom_shape_fn shape;
    loom_kernel_fn k;
  } assigns[] = {
      {LOOM_OP_Assign, shape_assign, loom__k_assign},
      {LOOM_OP_AssignAdd, shape_assign_num, loom__k_assign_add},
      {LOOM_OP_AssignSub, shape_assign_num, loom__k_assign_sub},
      {LOOM_OP_AssignMul, shape_assign_num, loom__k_assign_mul},
      {LOOM_OP_RefScatterUpdate, shape_scatter, loom__k_scatter_update},
      {LOOM_OP_RefScatterAdd, shape_scatter, loom__k_scatter_add},
      {LOOM_OP_RefScatterSub, shape_scatter, loom__k_scatter_sub},
  };
  for (size_t i = 0; i < sizeof assigns / sizeof assigns[0]; i++) {
    int op = assigns[i].op;
    int scat = op == LOOM_OP_RefScatterUpdate || op == LOOM_OP_RefScatterAdd || op == LOOM_OP_RefScatterSub;
    t[op].nin = scat ? 3 : 2;
    t[op].nout = 1;
    t[op].shape = assigns[i].shape;
    t[op].flags = INPLACE_FLAGS | (op == LOOM_OP_Assign ? LOOM_OPF_ASSIGN : 0u);
    t[op].nondiff_inputs = 0xffffffffu;
    t[op].kernels[LOOM_DEVICE_CPU][0] = assigns[i].k; /* dtype-agnostic: dispatches inside */
  }

  reg_apply(t, LOOM_OP_ApplyGradientDescent, 3, shape_gd, NULL, loom__k_apply_gradient_descent_f32);
  reg_apply(t, LOOM_OP_SparseApplyGradientDescent, 4, shape_sgd, ws_sgd, loom__k_sparse_apply_gradient_descent_f32);
  reg_apply(t, LOOM_OP_ApplyMomentum, 5, shape_mom, NULL, loom__k_apply_momentum_f32);
  reg_apply(t, LOOM_OP_SparseApplyMomentum, 6, shape_smom, ws_smom, loom__k_sparse_apply_momentum_f32);
  reg_apply(t, LOOM_OP_ApplyAdagrad, 4, shape_adagrad, NULL, loom__k_apply_adagrad_f32);
  reg_apply(t, LOOM_OP_SparseApplyAdagrad, 5, shape_sadagrad, ws_sadagrad, loom__k_sparse_apply_adagrad_f32);
  reg_apply(t, LOOM_OP_ApplyAdam, 10, shape_adam, NULL, loom__k_apply_adam_f32);
  reg_apply(t, LOOM_OP_SparseApplyAdam, 11, shape_sadam, ws_sadam_bm, loom__k_sparse_apply_adam_f32);
  reg_apply(t, LOOM_OP_ApplyFtrlV2, 9, shape_ftrl, NULL, loom__k_apply_ftrl_f32);
  reg_apply(t, LOOM_OP_SparseApplyFtrlV2, 10, shape_sftrl, ws_sftrl, loom__k_sparse_apply_ftrl_f32);
  reg_apply(t, LOOM_OP_ApplyRMSProp, 8, shape_rms, NULL, loom__k_apply_rmsprop_f32);
  reg_apply(t, LOOM_OP_SparseApplyRMSProp, 9, shape_srms, ws_srms, loom__k_sparse_apply_rmsprop_f32);
  reg_apply(t, LOOM_OP_ApplyCenteredRMSProp, 9, shape_crms, NULL, loom__k_apply_centered_rmsprop_f32);
  reg_apply(t, LOOM_OP_SparseApplyCenteredRMSProp, 10, shape_scrms, ws_scrms,
            loom__k_sparse_apply_centered_rmsprop_f32);
  reg_apply(t, LOOM_OP_ApplyAdadelta, 7, shape_adadelta, NULL, loom__k_apply_adadelta_f32);
  reg_apply(t, LOOM_OP_SparseApplyAdadelta, 8, shape_sadadelta, ws_sadadelta, loom__k_sparse_apply_adadelta_f32);
  /* CPU only: a device plan runs them on the CPU */
  reg_apply(t, LOOM_OP_ApplyProximalGradientDescent, 5, shape_pgd, NULL, loom__k_apply_proximal_gradient_descent_f32);
  reg_apply(t, LOOM_OP_SparseApplyProximalGradientDescent, 6, shape_spgd, ws_spgd,
            loom__k_sparse_apply_proximal_gradient_descent_f32);
  reg_apply(t, LOOM_OP_ApplyProximalAdagrad, 6, shape_padagrad, NULL, loom__k_apply_proximal_adagrad_f32);
  reg_apply(t, LOOM_OP_SparseApplyProximalAdagrad, 7, shape_spadagrad, ws_spadagrad,
            loom__k_sparse_apply_proximal_adagrad_f32);
  reg_apply(t, LOOM_OP_ApplyAdagradDA, 8, shape_adagrad_da, NULL, loom__k_apply_adagrad_da_f32);
  reg_apply(t, LOOM_OP_SparseApplyAdagradDA, 9, shape_sadagrad_da, ws_sadagrad_da, loom__k_sparse_apply_adagrad_da_f32);

  for (size_t i = 0; i < NMUTS; i++) t[muts[i].op].mutated_inputs = (1u << muts[i].n) - 1;

  t[LOOM_OP_LearningRateSchedule].nin = -1;
  t[LOOM_OP_LearningRateSchedule].nout = 1;
  t[LOOM_OP_LearningRateSchedule].shape = shape_lr_schedule;
  t[LOOM_OP_LearningRateSchedule].flags = LOOM_OPF_NODIFF | LOOM_OPF_KEY_OUTPUT;
  t[LOOM_OP_LearningRateSchedule].nondiff_inputs = 0xffffffffu;
  t[LOOM_OP_LearningRateSchedule].kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_lr_schedule;
}

/* =====================================================================
 * Builders
 * ===================================================================== */
loom_output loom_variable_v2(loom_graph *g, loom_dtype dtype, int ndim, const int64_t *dims, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (dtype <= 0 || dtype >= LOOM_DTYPE_COUNT || dtype == LOOM_STRING || ndim < 0 || ndim > LOOM_MAX_DIMS ||
      (ndim && !dims)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid variable dtype %s or rank %d",
                         name ? name : "VariableV2", loom_dtype_name(dtype), ndim);
    return loom__graph_dummy(g);
  }
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.dtype = dtype;
  a.nshape = ndim;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: a variable's shape must be fully defined",
                           name ? name : "VariableV2");
      return loom__graph_dummy(g);
    }
    a.shape[i] = dims[i];
  }
  return loom__buildn(g, LOOM_OP_VariableV2, name, 0, NULL, &a);
}

/* Checks that the listed inputs are variables (refs); records the error. */
static int check_refs(loom_graph *g, const char *opname, const char *name, int n, const loom_output *in,
                      const char *const *names) {
  if (!g || loom__graph_failed(g)) return 0;
  for (int i = 0; i < n; i++) {
    if (!in[i].node || in[i].node == g->dummy) continue; /* loom__graph_add reports it */
    if (!loom__ref_root(in[i])) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: input %s must be a variable, got %s (op %s)",
                           name && *name ? name : opname, names ? names[i] : "ref", loom_node_name(in[i].node),
                           loom_node_op_name(in[i].node));
      return 0;
    }
  }
  return 1;
}

static loom_output build_inplace(loom_graph *g, int op, const char *name, int nin, const loom_output *in, int nrefs,
                                 const char *const *refnames, const loom_attrs *attrs) {
  if (!g) return (loom_output){NULL, 0};
  if (!check_refs(g, loom__op_def(op)->name, name, nrefs, in, refnames)) return loom__graph_dummy(g);
  return loom__buildn(g, op, name, nin, in, attrs);
}

loom_output loom_assign(loom_graph *g, loom_output ref, loom_output value, const char *name) {
  loom_output in[2] = {ref, value};
  return build_inplace(g, LOOM_OP_Assign, name, 2, in, 1, NULL, NULL);
}
loom_output loom_assign_add(loom_graph *g, loom_output ref, loom_output value, const char *name) {
  loom_output in[2] = {ref, value};
  return build_inplace(g, LOOM_OP_AssignAdd, name, 2, in, 1, NULL, NULL);
}
loom_output loom_assign_sub(loom_graph *g, loom_output ref, loom_output value, const char *name) {
  loom_output in[2] = {ref, value};
  return build_inplace(g, LOOM_OP_AssignSub, name, 2, in, 1, NULL, NULL);
}
loom_output loom_assign_mul(loom_graph *g, loom_output ref, loom_output value, const char *name) {
  loom_output in[2] = {ref, value};
  return build_inplace(g, LOOM_OP_AssignMul, name, 2, in, 1, NULL, NULL);
}
loom_output loom_var_scatter_update(loom_graph *g, loom_output ref, loom_output indices, loom_output updates,
                                const char *name) {
  loom_output in[3] = {ref, indices, updates};
  return build_inplace(g, LOOM_OP_RefScatterUpdate, name, 3, in, 1, NULL, NULL);
}
loom_output loom_var_scatter_add(loom_graph *g, loom_output ref, loom_output indices, loom_output updates,
                             const char *name) {
  loom_output in[3] = {ref, indices, updates};
  return build_inplace(g, LOOM_OP_RefScatterAdd, name, 3, in, 1, NULL, NULL);
}
loom_output loom_var_scatter_sub(loom_graph *g, loom_output ref, loom_output indices, loom_output updates,
                             const char *name) {
  loom_output in[3] = {ref, indices, updates};
  return build_inplace(g, LOOM_OP_RefScatterSub, name, 3, in, 1, NULL, NULL);
}

/* Apply builders: refs are the leading 'V'/'R' inputs of the signature. */
static loom_output build_apply(loom_graph *g, int op, const apply_sig *s, const char *name, const loom_output *in,
                               int64_t flags) {
  int nin = (int)strlen(s->sig), nrefs = 0;
  while (nrefs < nin && (s->sig[nrefs] == 'V' || s->sig[nrefs] == 'R')) nrefs++;
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.num = flags;
  return build_inplace(g, op, name, nin, in, nrefs, s->names, &a);
}

loom_output loom_apply_gradient_descent(loom_graph *g, loom_output var, loom_output alpha, loom_output delta,
                                        const char *name) {
  loom_output in[] = {var, alpha, delta};
  return build_apply(g, LOOM_OP_ApplyGradientDescent, &SIG_GD, name, in, 0);
}
loom_output loom_sparse_apply_gradient_descent(loom_graph *g, loom_output var, loom_output alpha, loom_output grad,
                                               loom_output indices, const char *name) {
  loom_output in[] = {var, alpha, grad, indices};
  return build_apply(g, LOOM_OP_SparseApplyGradientDescent, &SIG_SGD, name, in, 0);
}
loom_output loom_apply_momentum(loom_graph *g, loom_output var, loom_output accum, loom_output lr, loom_output grad,
                                loom_output momentum, int use_nesterov, const char *name) {
  loom_output in[] = {var, accum, lr, grad, momentum};
  return build_apply(g, LOOM_OP_ApplyMomentum, &SIG_MOM, name, in, use_nesterov ? 1 : 0);
}
loom_output loom_sparse_apply_momentum(loom_graph *g, loom_output var, loom_output accum, loom_output lr,
                                       loom_output grad, loom_output indices, loom_output momentum, int use_nesterov,
                                       const char *name) {
  loom_output in[] = {var, accum, lr, grad, indices, momentum};
  return build_apply(g, LOOM_OP_SparseApplyMomentum, &SIG_SMOM, name, in, use_nesterov ? 1 : 0);
}
loom_output loom_apply_adagrad(loom_graph *g, loom_output var, loom_output accum, loom_output lr, loom_output grad,
                               const char *name) {
  loom_output in[] = {var, accum, lr, grad};
  return build_apply(g, LOOM_OP_ApplyAdagrad, &SIG_ADAGRAD, name, in, 0);
}
loom_output loom_sparse_apply_adagrad(loom_graph *g, loom_output var, loom_output accum, loom_output lr,
                                      loom_output grad, loom_output indices, const char *name) {
  loom_output in[] = {var, accum, lr, grad, indices};
  return build_apply(g, LOOM_OP_SparseApplyAdagrad, &SIG_SADAGRAD, name, in, 0);
}
loom_output loom_apply_adam(loom_graph *g, loom_output var, loom_output m, loom_output v, loom_output beta1_power,
                            loom_output beta2_power, loom_output lr, loom_output beta1, loom_output beta2,
                            loom_output epsilon, loom_output grad, int use_nesterov, const char *name) {
  loom_output in[] = {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad};
  return build_apply(g, LOOM_OP_ApplyAdam, &SIG_ADAM, name, in, use_nesterov ? 1 : 0);
}
loom_output loom_sparse_apply_adam(loom_graph *g, loom_output var, loom_output m, loom_output v,
                                   loom_output beta1_power, loom_output beta2_power, loom_output lr, loom_output beta1,
                                   loom_output beta2, loom_output epsilon, loom_output grad, loom_output indices,
                                   int lazy, const char *name) {
  loom_output in[] = {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices};
  return build_apply(g, LOOM_OP_SparseApplyAdam, &SIG_SADAM, name, in, lazy ? 2 : 0);
}
loom_output loom_apply_ftrl(loom_graph *g, loom_output var, loom_output accum, loom_output linear, loom_output grad,
                            loom_output lr, loom_output l1, loom_output l2, loom_output l2_shrinkage,
                            loom_output lr_power, const char *name) {
  loom_output in[] = {var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power};
  return build_apply(g, LOOM_OP_ApplyFtrlV2, &SIG_FTRL, name, in, 0);
}
loom_output loom_sparse_apply_ftrl(loom_graph *g, loom_output var, loom_output accum, loom_output linear,
                                   loom_output grad, loom_output indices, loom_output lr, loom_output l1,
                                   loom_output l2, loom_output l2_shrinkage, loom_output lr_power, const char *name) {
  loom_output in[] = {var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power};
  return build_apply(g, LOOM_OP_SparseApplyFtrlV2, &SIG_SFTRL, name, in, 0);
}
loom_output loom_apply_rmsprop(loom_graph *g, loom_output var, loom_output mg, loom_output ms, loom_output mom,
                               loom_output lr, loom_output rho, loom_output momentum, loom_output epsilon,
                               loom_output grad, int centered, const char *name) {
  int64_t legacy = (centered & LOOM_RMSPROP_KERAS_LEGACY) ? 1 : 0;
  if (centered & LOOM_RMSPROP_CENTERED) {
    loom_output in[] = {var, mg, ms, mom, lr, rho, momentum, epsilon, grad};
    return build_apply(g, LOOM_OP_ApplyCenteredRMSProp, &SIG_CRMS, name, in, legacy);
  }
  loom_output in[] = {var, ms, mom, lr, rho, momentum, epsilon, grad};
  return build_apply(g, LOOM_OP_ApplyRMSProp, &SIG_RMS, name, in, legacy);
}
loom_output loom_sparse_apply_rmsprop(loom_graph *g, loom_output var, loom_output mg, loom_output ms,
                                      loom_output mom, loom_output lr, loom_output rho, loom_output momentum,
                                      loom_output epsilon, loom_output grad, loom_output indices, int centered,
                                      const char *name) {
  int64_t legacy = (centered & LOOM_RMSPROP_KERAS_LEGACY) ? 1 : 0;
  if (centered & LOOM_RMSPROP_CENTERED) {
    loom_output in[] = {var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices};
    return build_apply(g, LOOM_OP_SparseApplyCenteredRMSProp, &SIG_SCRMS, name, in, legacy);
  }
  loom_output in[] = {var, ms, mom, lr, rho, momentum, epsilon, grad, indices};
  return build_apply(g, LOOM_OP_SparseApplyRMSProp, &SIG_SRMS, name, in, legacy);
}
loom_output loom_apply_adadelta(loom_graph *g, loom_output var, loom_output accum, loom_output accum_update,
                                loom_output lr, loom_output rho, loom_output epsilon, loom_output grad,
                                const char *name) {
  loom_output in[] = {var, accum, accum_update, lr, rho, epsilon, grad};
  return build_apply(g, LOOM_OP_ApplyAdadelta, &SIG_ADADELTA, name, in, 0);
}
loom_output loom_sparse_apply_adadelta(loom_graph *g, loom_output var, loom_output accum, loom_output accum_update,
                                       loom_output lr, loom_output rho, loom_output epsilon, loom_output grad,
                                       loom_output indices, const char *name) {
  loom_output in[] = {var, accum, accum_update, lr, rho, epsilon, grad, indices};
  return build_apply(g, LOOM_OP_SparseApplyAdadelta, &SIG_SADADELTA, name, in, 0);
}

loom_output loom_apply_proximal_gradient_descent(loom_graph *g, loom_output var, loom_output alpha, loom_output l1,
                                                 loom_output l2, loom_output delta, const char *name) {
  loom_output in[] = {var, alpha, l1, l2, delta};
  return build_apply(g, LOOM_OP_ApplyProximalGradientDescent, &SIG_PGD, name, in, 0);
}
loom_output loom_sparse_apply_proximal_gradient_descent(loom_graph *g, loom_output var, loom_output alpha,
                                                        loom_output l1, loom_output l2, loom_output grad,
                                                        loom_output indices, const char *name) {
  loom_output in[] = {var, alpha, l1, l2, grad, indices};
  return build_apply(g, LOOM_OP_SparseApplyProximalGradientDescent, &SIG_SPGD, name, in, 0);
}
loom_output loom_apply_proximal_adagrad(loom_graph *g, loom_output var, loom_output accum, loom_output lr,
                                        loom_output l1, loom_output l2, loom_output grad, const char *name) {
  loom_output in[] = {var, accum, lr, l1, l2, grad};
  return build_apply(g, LOOM_OP_ApplyProximalAdagrad, &SIG_PADAGRAD, name, in, 0);
}
loom_output loom_sparse_apply_proximal_adagrad(loom_graph *g, loom_output var, loom_output accum, loom_output lr,
                                               loom_output l1, loom_output l2, loom_output grad, loom_output indices,
                                               const char *name) {
  loom_output in[] = {var, accum, lr, l1, l2, grad, indices};
  return build_apply(g, LOOM_OP_SparseApplyProximalAdagrad, &SIG_SPADAGRAD, name, in, 0);
}
loom_output loom_apply_adagrad_da(loom_graph *g, loom_output var, loom_output gradient_accumulator,
                                  loom_output gradient_squared_accumulator, loom_output grad, loom_output lr,
                                  loom_output l1, loom_output l2, loom_output global_step, const char *name) {
  loom_output in[] = {var, gradient_accumulator, gradient_squared_accumulator, grad, lr, l1, l2, global_step};
  return build_apply(g, LOOM_OP_ApplyAdagradDA, &SIG_ADAGRAD_DA, name, in, 0);
}
loom_output loom_sparse_apply_adagrad_da(loom_graph *g, loom_output var, loom_output gradient_accumulator,
                                         loom_output gradient_squared_accumulator, loom_output grad,
                                         loom_output indices, loom_output lr, loom_output l1, loom_output l2,
                                         loom_output global_step, const char *name) {
  loom_output in[] = {var, gradient_accumulator, gradient_squared_accumulator, grad, indices, lr, l1, l2,
                      global_step};
  return build_apply(g, LOOM_OP_SparseApplyAdagradDA, &SIG_SADAGRAD_DA, name, in, 0);
}

/* ---- the gradient scale of an optimizer op ---- */
static int is_apply_op(const loom_node *n) {
  for (size_t i = 0; n && i < NMUTS; i++)
    if (n->op == muts[i].op) return 1;
  return 0;
}

loom_code loom_apply_set_gradient_scale(loom_node *apply, float scale, loom_status *st) {
  if (!is_apply_op(apply))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "apply_set_gradient_scale: node %s (op %s) is not an optimizer op (Apply*, SparseApply*)",
                           apply ? loom_node_name(apply) : "(null)", apply ? loom_node_op_name(apply) : "none");
  if (!(scale > 0.0f) || isinf(scale))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "apply_set_gradient_scale: %s: the gradient scale %g must be a finite number > 0",
                           loom_node_name(apply), (double)scale);
  apply->attrs.alpha = scale == 1.0f ? 0.0 : (double)scale;
  return LOOM_OK;
}

float loom_apply_gradient_scale(const loom_node *apply) {
  return is_apply_op(apply) ? loom__apply_grad_scale(&apply->attrs) : 1.0f;
}

/* ---- LearningRateSchedule (the schedules are train/schedules.c) ---- */
loom_output loom__lr_schedule(loom_graph *g, int kind, loom_output step, int nextra, const loom_output *extra,
                              double lr, double decay_steps, double beta, double limit, int flag, const char *name,
                              const char *defname) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.num = kind;
  a.alpha = lr;
  a.start = decay_steps;
  a.beta = beta;
  a.limit = limit;
  a.keepdims = flag;
  loom_output in[3] = {step, {NULL, 0}, {NULL, 0}};
  for (int i = 0; i < nextra && i < 2; i++) in[1 + i] = extra[i];
  return loom__out0(g, loom__graph_add(g, LOOM_OP_LearningRateSchedule, name, defname, 1 + nextra, in, &a, 1));
}
