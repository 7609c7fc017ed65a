/* Core ops: Placeholder, Const, NoOp, Identity. */
#include "ops/op_common.h"

/* Placeholder: attrs.dtype, attrs.nshape/shape (-1 = unknown). */
static loom_code shape_placeholder(loom_shape_ctx *c) {
  c->out[0].dtype = c->attrs->dtype;
  c->out[0].ndim = c->attrs->nshape;
  memcpy(c->out[0].dims, c->attrs->shape, sizeof(int64_t) * (size_t)c->attrs->nshape);
  return LOOM_OK;
}

/* Const: attrs.value. */
static loom_code shape_const(loom_shape_ctx *c) {
  const loom_tensor *v = c->attrs->value;
  c->out[0].dtype = v->dtype;
  c->out[0].ndim = v->ndim;
  memcpy(c->out[0].dims, v->dims, sizeof(int64_t) * (size_t)v->ndim);
  return LOOM_OK;
}
static loom_code bind_const(struct loom_session *s, const loom_node *n, loom_buf *out, loom_status *st) {
  (void)s;
  (void)st;
  out->data = n->value->data; /* read-only: inputs are never written */
  return LOOM_OK;
}

static loom_code shape_none(loom_shape_ctx *c) {
  (void)c;
  return LOOM_OK;
}
static loom_code k_noop(const loom_kctx *ctx) {
  (void)ctx;
  return LOOM_OK;
}

void loom__register_core(loom_op_def *t) {
  t[LOOM_OP_Placeholder].nin = 0;
  t[LOOM_OP_Placeholder].nout = 1;
  t[LOOM_OP_Placeholder].shape = shape_placeholder;
  t[LOOM_OP_Placeholder].flags = LOOM_OPF_FEED_ONLY | LOOM_OPF_NODIFF;

  t[LOOM_OP_Const].nin = 0;
  t[LOOM_OP_Const].nout = 1;
  t[LOOM_OP_Const].shape = shape_const;
  t[LOOM_OP_Const].bind = bind_const;
  t[LOOM_OP_Const].flags = LOOM_OPF_NODIFF | LOOM_OPF_CONST;

  t[LOOM_OP_NoOp].nin = -1;
  t[LOOM_OP_NoOp].nout = 0;
  t[LOOM_OP_NoOp].shape = shape_none;
  t[LOOM_OP_NoOp].flags = LOOM_OPF_NODIFF | LOOM_OPF_EMPTY_OK;
  t[LOOM_OP_NoOp].kernels[LOOM_DEVICE_CPU][0] = k_noop;

  t[LOOM_OP_Identity].nin = 1;
  t[LOOM_OP_Identity].nout = 1;
  t[LOOM_OP_Identity].shape = loom__shape_same;
  t[LOOM_OP_Identity].flags = LOOM_OPF_ALIAS0;
}

/* ---- builders ---- */
loom_output loom_placeholder(loom_graph *g, loom_dtype dt, int ndim, const int64_t *dims, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (dt <= 0 || dt >= LOOM_DTYPE_COUNT || ndim < 0 || ndim > LOOM_MAX_DIMS || (ndim && !dims)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid placeholder dtype %d or rank %d",
                         name ? name : "Placeholder", (int)dt, ndim);
    return loom__graph_dummy(g);
  }
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.dtype = dt;
  a.nshape = ndim;
  for (int i = 0; i < ndim; i++) a.shape[i] = dims[i] < 0 ? -1 : dims[i];
  return loom__buildn(g, LOOM_OP_Placeholder, name, 0, NULL, &a);
}

loom_output loom_const(loom_graph *g, const loom_tensor *value, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (!value) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: constant value is NULL", name ? name : "Const");
    return loom__graph_dummy(g);
  }
  loom_tensor *copy = loom_tensor_copy(value, NULL);
  if (!copy) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory copying a constant", name ? name : "Const");
    return loom__graph_dummy(g);
  }
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.value = copy;
  loom_node *n = loom__graph_add(g, LOOM_OP_Const, name, NULL, 0, NULL, &a, 1);
  if (!n) {
    loom_tensor_free(copy);
    return loom__graph_dummy(g);
  }
  n->value = copy;
  return (loom_output){n, 0};
}

loom_output loom_const_data(loom_graph *g, loom_dtype dt, int ndim, const int64_t *dims, const void *data,
                            const char *name) {
  if (!g) return (loom_output){NULL, 0};
  loom_status *st = loom_status_new();
  loom_tensor *t = loom_tensor_from_data(dt, ndim, dims, data, st);
  if (!t) {
    loom_graph_set_error(g, loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED, "%s: %s",
                         name ? name : "Const", loom_status_message(st));
    loom_status_free(st);
    return loom__graph_dummy(g);
  }
  loom_status_free(st);
  loom_output o = loom_const(g, t, name);
  loom_tensor_free(t);
  return o;
}

loom_output loom_const_f32(loom_graph *g, float v, const char *name) {
  return loom_const_data(g, LOOM_F32, 0, NULL, &v, name);
}
loom_output loom_const_i32(loom_graph *g, int32_t v, const char *name) {
  return loom_const_data(g, LOOM_I32, 0, NULL, &v, name);
}
loom_output loom_const_i64(loom_graph *g, int64_t v, const char *name) {
  return loom_const_data(g, LOOM_I64, 0, NULL, &v, name);
}

loom_node *loom_group(loom_graph *g, int n, loom_node *const *deps, const char *name) {
  if (!g) return NULL;
  loom_node *node = loom__graph_add(g, LOOM_OP_NoOp, name, NULL, 0, NULL, NULL, 0);
  if (!node) return NULL;
  for (int i = 0; i < n; i++) {
    if (!deps || !deps[i]) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: dependency %d is NULL", node->name, i);
      return NULL;
    }
    loom_node_add_control_input(node, deps[i]);
  }
  return node;
}

loom_output loom_identity(loom_graph *g, loom_output x, const char *name) {
  return loom__build1(g, LOOM_OP_Identity, name, x, NULL);
}
