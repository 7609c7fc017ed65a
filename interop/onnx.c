/* ONNX export (loom_onnx.h): one signature of a serving graph written as an
 * ONNX ModelProto with protobuf-c (proto/onnx.proto, ONNX's field numbers).
 *
 * The nodes a signature's outputs need (data inputs only; control inputs are
 * dropped, the signature's placeholders end the walk) are visited in graph
 * order, which is topological, and each becomes one or a few ONNX nodes.
 * Tensor names: output 0 of node n is "n", output i is "n:i", a signature
 * input is its key; nodes the exporter adds get "<node>/onnx_<what>" names.
 * Every protobuf struct and string lives in one arena freed at the end. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "engine/engine_api.h"
#include "kernels/kernel.h"
#include "loom/loom.h"
#include "loom/loom_onnx.h"
#include "proto/onnx.pb-c.h"

enum { ONNX_IR_VERSION = 8, ONNX_OPSET_DEFAULT = 17 };

/* ---- arena ---- */
typedef struct ablock {
  struct ablock *next;
  max_align_t data[];
} ablock;

typedef struct ox {
  loom_graph *g;
  loom_status *st;
  loom_code rc;
  ablock *blocks;
  /* variable values: from a session or a checkpoint file */
  loom_session *sess;
  const char *ckpt;
  /* per node id: the name of output 0 when it is not the node's name (signature inputs) */
  const char **alias;
  const char *need; /* per node id: 1 = written (an output needs it) */
  int nnodes;
  /* growable lists */
  Onnx__NodeProto **nodes;
  size_t nnode, capnode;
  Onnx__TensorProto **inits;
  size_t ninit, capinit;
  int tmp;
} ox;

static void *ar(ox *x, size_t n) {
  if (x->rc) return NULL;
  ablock *b = calloc(1, sizeof *b + n + 1);
  if (!b) {
    x->rc = loom_status_set(x->st, LOOM_RESOURCE_EXHAUSTED, "onnx: out of memory");
    return NULL;
  }
  b->next = x->blocks;
  x->blocks = b;
  return b->data;
}

static char *ar_str(ox *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *ar_str(ox *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = ar(x, (size_t)n + 1);
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

static int push(ox *x, void ***arr, size_t *n, size_t *cap, void *item) {
  if (x->rc || !item) return 0;
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 64;
    void **p = realloc(*arr, nc * sizeof *p);
    if (!p) {
      x->rc = loom_status_set(x->st, LOOM_RESOURCE_EXHAUSTED, "onnx: out of memory");
      return 0;
    }
    *arr = p;
    *cap = nc;
  }
  (*arr)[(*n)++] = item;
  return 1;
}

static loom_code fail(ox *x, loom_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static loom_code fail(ox *x, loom_code code, const char *fmt, ...) {
  if (x->rc) return x->rc;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  x->rc = loom_status_set(x->st, code, "onnx: %s", msg);
  return x->rc;
}

static loom_code unsupported(ox *x, const loom_node *n, const char *why) {
  return fail(x, LOOM_UNIMPLEMENTED, "node '%s' (op %s)%s%s", loom_node_name(n), loom_node_op_name(n),
              why ? ": " : " has no ONNX equivalent in this exporter", why ? why : "");
}

/* ---- types ---- */
static int onnx_dtype(loom_dtype d) {
  switch (d) {
  case LOOM_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  case LOOM_F64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
  case LOOM_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
  case LOOM_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  case LOOM_U8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
  case LOOM_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
  default: return 0; /* strings: not written */
  }
}

/* The ONNX tensor name of a loom output. */
static const char *tname(ox *x, loom_output o) {
  int id = loom_node_id(o.node);
  if (o.index == 0 && id >= 0 && id < x->nnodes && x->alias[id]) return x->alias[id];
  if (o.index == 0) return loom_node_name(o.node);
  return ar_str(x, "%s:%d", loom_node_name(o.node), (int)o.index);
}

static const char *tmp_name(ox *x, const loom_node *n, const char *what) {
  return ar_str(x, "%s/onnx_%s_%d", loom_node_name(n), what, x->tmp++);
}

/* ---- nodes and attributes ---- */
static Onnx__NodeProto *emit(ox *x, const char *op, const char *name, int nin, const char *const *in, int nout,
                             const char *const *out) {
  if (x->rc) return NULL;
  Onnx__NodeProto *p = ar(x, sizeof *p);
  char **ins = ar(x, sizeof(char *) * (size_t)(nin + 1));
  char **outs = ar(x, sizeof(char *) * (size_t)(nout + 1));
  if (!p || !ins || !outs) return NULL;
  onnx__node_proto__init(p);
  for (int i = 0; i < nin; i++) {
    if (!in[i]) return NULL; /* an allocation failed */
    ins[i] = (char *)in[i];
  }
  for (int i = 0; i < nout; i++) {
    if (!out[i]) return NULL;
    outs[i] = (char *)out[i];
  }
  p->n_input = (size_t)nin;
  p->input = ins;
  p->n_output = (size_t)nout;
  p->output = outs;
  p->op_type = (char *)op;
  p->name = (char *)name;
  if (!name) return NULL;
  if (!push(x, (void ***)&x->nodes, &x->nnode, &x->capnode, p)) return NULL;
  return p;
}

/* One-in one-out node named after n plus what (or out given). */
static const char *emit1(ox *x, const loom_node *n, const char *op, const char *in, const char *out,
                         Onnx__NodeProto **np) {
  const char *o = out ? out : tmp_name(x, n, op);
  Onnx__NodeProto *p = emit(x, op, out ? loom_node_name(n) : tmp_name(x, n, op), 1, &in, 1, &o);
  if (np) *np = p;
  return p ? o : NULL;
}

static Onnx__AttributeProto *add_attr(ox *x, Onnx__NodeProto *p, const char *name, int type) {
  if (!p || x->rc) return NULL;
  Onnx__AttributeProto *a = ar(x, sizeof *a);
  Onnx__AttributeProto **arr = ar(x, sizeof *arr * (p->n_attribute + 1));
  if (!a || !arr) return NULL;
  onnx__attribute_proto__init(a);
  a->name = (char *)name;
  a->has_type = 1;
  a->type = type;
  if (p->n_attribute) memcpy(arr, p->attribute, sizeof *arr * p->n_attribute);
  arr[p->n_attribute++] = a;
  p->attribute = arr;
  return a;
}

static void attr_i(ox *x, Onnx__NodeProto *p, const char *name, int64_t v) {
  Onnx__AttributeProto *a = add_attr(x, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  if (a) a->has_i = 1, a->i = v;
}

static void attr_f(ox *x, Onnx__NodeProto *p, const char *name, double v) {
  Onnx__AttributeProto *a = add_attr(x, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  if (a) a->has_f = 1, a->f = (float)v;
}

static void attr_s(ox *x, Onnx__NodeProto *p, const char *name, const char *v) {
  Onnx__AttributeProto *a = add_attr(x, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  if (a) a->has_s = 1, a->s.data = (uint8_t *)v, a->s.len = strlen(v);
}

static void attr_ints(ox *x, Onnx__NodeProto *p, const char *name, int n, const int64_t *v) {
  Onnx__AttributeProto *a = add_attr(x, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  int64_t *c = ar(x, sizeof *c * (size_t)(n + 1));
  if (!a || !c) return;
  memcpy(c, v, sizeof *c * (size_t)n);
  a->n_ints = (size_t)n;
  a->ints = c;
}

/* ---- initializers ---- */
static Onnx__TensorProto *tensor_proto(ox *x, const char *name, loom_dtype dt, int ndim, const int64_t *dims,
                                       const void *data, size_t nbytes) {
  int t = onnx_dtype(dt);
  if (!t) {
    fail(x, LOOM_UNIMPLEMENTED, "tensor '%s' has dtype %s, which the exporter does not write", name,
         loom_dtype_name(dt));
    return NULL;
  }
  Onnx__TensorProto *p = ar(x, sizeof *p);
  int64_t *d = ar(x, sizeof *d * (size_t)(ndim + 1));
  uint8_t *b = ar(x, nbytes + 1);
  if (!p || !d || !b) return NULL;
  onnx__tensor_proto__init(p);
  memcpy(d, dims, sizeof *d * (size_t)ndim);
  if (nbytes) memcpy(b, data, nbytes); /* raw_data is little-endian, as loom's buffers on the hosts it runs on */
  p->n_dims = (size_t)ndim;
  p->dims = d;
  p->has_data_type = 1;
  p->data_type = t;
  p->name = (char *)name;
  p->has_raw_data = 1;
  p->raw_data.data = b;
  p->raw_data.len = nbytes;
  return p;
}

static const char *add_init(ox *x, const char *name, loom_dtype dt, int ndim, const int64_t *dims, const void *data,
                            size_t nbytes) {
  if (!name) return NULL;
  Onnx__TensorProto *p = tensor_proto(x, name, dt, ndim, dims, data, nbytes);
  return push(x, (void ***)&x->inits, &x->ninit, &x->capinit, p) ? name : NULL;
}

static const char *init_tensor(ox *x, const char *name, const loom_tensor *t) {
  int64_t dims[LOOM_MAX_DIMS];
  int nd = loom_tensor_ndim(t);
  for (int i = 0; i < nd; i++) dims[i] = loom_tensor_dim(t, i);
  return add_init(x, name, loom_tensor_dtype(t), nd, dims, loom_tensor_data_const(t), loom_tensor_nbytes(t));
}

/* A 1-D int64 constant (shapes, axes, pads). */
static const char *const_i64(ox *x, const loom_node *n, const char *what, int len, const int64_t *v) {
  int64_t d = len;
  return add_init(x, tmp_name(x, n, what), LOOM_I64, 1, &d, v, sizeof *v * (size_t)len);
}

/* A scalar of dtype dt with value v. */
static const char *const_scalar(ox *x, const loom_node *n, const char *what, loom_dtype dt, double v) {
  union {
    float f;
    double d;
    int32_t i;
    int64_t l;
    uint8_t b;
  } u;
  size_t sz = loom_dtype_size(dt);
  switch (dt) {
  case LOOM_F32: u.f = (float)v; break;
  case LOOM_F64: u.d = v; break;
  case LOOM_I32: u.i = (int32_t)v; break;
  case LOOM_I64: u.l = (int64_t)v; break;
  case LOOM_U8:
  case LOOM_BOOL: u.b = (uint8_t)v; break;
  default: fail(x, LOOM_UNIMPLEMENTED, "node '%s': a %s scalar", loom_node_name(n), loom_dtype_name(dt)); return NULL;
  }
  return add_init(x, tmp_name(x, n, what), dt, 0, NULL, &u, sz);
}

/* ---- value info ---- */
static Onnx__ValueInfoProto *value_info(ox *x, const char *name, loom_output o, int is_input) {
  loom_dtype dt = loom_output_dtype(o);
  if (!onnx_dtype(dt)) {
    fail(x, LOOM_UNIMPLEMENTED, "signature %s '%s' (node '%s') has dtype %s, which ONNX export does not support",
         is_input ? "input" : "output", name, loom_node_name(o.node), loom_dtype_name(dt));
    return NULL;
  }
  int64_t dims[LOOM_MAX_DIMS];
  int nd = loom_output_dims(o, dims);
  Onnx__ValueInfoProto *v = ar(x, sizeof *v);
  Onnx__TypeProto *t = ar(x, sizeof *t);
  Onnx__TypeProto__Tensor *tt = ar(x, sizeof *tt);
  Onnx__TensorShapeProto *sh = ar(x, sizeof *sh);
  Onnx__TensorShapeProto__Dimension **dv = ar(x, sizeof *dv * (size_t)(nd + 1));
  if (!v || !t || !tt || !sh || !dv) return NULL;
  onnx__value_info_proto__init(v);
  onnx__type_proto__init(t);
  onnx__type_proto__tensor__init(tt);
  onnx__tensor_shape_proto__init(sh);
  for (int i = 0; i < nd; i++) {
    Onnx__TensorShapeProto__Dimension *d = ar(x, sizeof *d);
    if (!d) return NULL;
    onnx__tensor_shape_proto__dimension__init(d);
    if (dims[i] >= 0) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = dims[i];
    } else {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = i == 0 ? "batch" : ar_str(x, "%s_dim%d", name, i);
    }
    dv[i] = d;
  }
  sh->n_dim = (size_t)nd;
  sh->dim = dv;
  tt->has_elem_type = 1;
  tt->elem_type = onnx_dtype(dt);
  tt->shape = sh;
  t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  t->tensor_type = tt;
  v->name = (char *)name;
  v->type = t;
  return v;
}

/* ---- op conversion ---- */
typedef struct simple_op {
  const char *loom, *onnx;
} simple_op;

/* Same inputs, same output, same meaning. */
static const simple_op SIMPLE[] = {
    {"Identity", "Identity"},   {"StopGradient", "Identity"}, {"AddV2", "Add"},
    {"BiasAdd", "Add"}, /* bias [C] broadcasts over the last axis, as BiasAdd's NHWC */
    {"Sub", "Sub"},             {"Mul", "Mul"},               {"RealDiv", "Div"},
    {"Pow", "Pow"},             {"Maximum", "Max"},           {"Minimum", "Min"},
    {"Neg", "Neg"},             {"Abs", "Abs"},               {"Exp", "Exp"},
    {"Log", "Log"},             {"Sqrt", "Sqrt"},             {"Tanh", "Tanh"},
    {"Sigmoid", "Sigmoid"},     {"Relu", "Relu"},             {"Softplus", "Softplus"},
    {"Sign", "Sign"},           {"Floor", "Floor"},           {"Ceil", "Ceil"},
    {"Round", "Round"}, /* both round half to even */
    {"Reciprocal", "Reciprocal"}, {"Equal", "Equal"},         {"Less", "Less"},
    {"LessEqual", "LessOrEqual"}, {"Greater", "Greater"},     {"GreaterEqual", "GreaterOrEqual"},
    {"LogicalAnd", "And"},      {"LogicalOr", "Or"},          {"LogicalNot", "Not"},
    {"SelectV2", "Where"},      {"Selu", "Selu"}, /* ONNX's default alpha and gamma are TF's constants */
};

static const int64_t TO_NCHW[4] = {0, 3, 1, 2}, TO_NHWC[4] = {0, 2, 3, 1}, HWIO_TO_OIHW[4] = {3, 2, 0, 1};

static void transpose_to(ox *x, const loom_node *n, const char *in, const char *out, const int64_t *perm, int r) {
  Onnx__NodeProto *q = emit(x, "Transpose", tmp_name(x, n, "Transpose"), 1, &in, 1, &out);
  attr_ints(x, q, "perm", r, perm);
}

static const char *transpose(ox *x, const loom_node *n, const char *in, const int64_t *perm, int r) {
  const char *o = tmp_name(x, n, "transposed");
  transpose_to(x, n, in, o, perm, r);
  return o;
}

static int64_t dim1(int64_t v) { return v > 0 ? v : 1; }

/* Conv2D / MaxPool / AvgPool: NHWC in and out around ONNX's NCHW op. */
static void conv_like(ox *x, const loom_node *n, const loom_attrs *a, const char *op, const char *out) {
  const char *xin = transpose(x, n, tname(x, loom_node_input(n, 0)), TO_NCHW, 4);
  const char *ins[2] = {xin, NULL};
  int nin = 1;
  if (!strcmp(op, "Conv")) {
    ins[1] = transpose(x, n, tname(x, loom_node_input(n, 1)), HWIO_TO_OIHW, 4);
    nin = 2;
  }
  const char *y = tmp_name(x, n, op);
  Onnx__NodeProto *p = emit(x, op, tmp_name(x, n, op), nin, ins, 1, &y);
  int64_t strides[2] = {dim1(a->strides[1]), dim1(a->strides[2])};
  attr_ints(x, p, "strides", 2, strides);
  if (!strcmp(op, "Conv")) {
    int64_t dil[2] = {dim1(a->dilations[1]), dim1(a->dilations[2])};
    attr_ints(x, p, "dilations", 2, dil);
  } else {
    int64_t k[2] = {dim1(a->ksize[1]), dim1(a->ksize[2])};
    attr_ints(x, p, "kernel_shape", 2, k);
    if (!strcmp(op, "AveragePool")) attr_i(x, p, "count_include_pad", 0); /* TF averages over the window's valid cells */
  }
  /* TF's SAME pads the extra cell at the end: SAME_UPPER */
  attr_s(x, p, "auto_pad", a->padding == LOOM_PAD_SAME ? "SAME_UPPER" : "VALID");
  transpose_to(x, n, y, out, TO_NHWC, 4);
}

/* Ops convert() handles besides SIMPLE[] (kept in step with it). */
static const char *const SPECIAL[] = {
    "Placeholder", "NoOp", "Const", "VariableV2", "NotEqual", "Square", "Rsqrt", "Log1p", "Relu6", "Elu",
    "LeakyRelu", "MatMul", "BatchMatMulV2", "Softmax", "LogSoftmax", "Conv2D", "MaxPool", "AvgPool", "Reshape",
    "ReshapeLike", "BroadcastLike", "BroadcastTo", "Transpose", "ConcatV2", "Pack", "ExpandDims", "Squeeze",
    "Slice", "Tile", "PadV2", "GatherV2", "Cast", "ArgMax", "ArgMin", "Shape", "Sum", "Mean", "Max", "Min", "Prod",
    "ReduceLogSumExp", "OneHot", "ZerosLike", "OnesLike", "Fill", "LoomMultiHotConcat", "Range", "Bucketize",
    "LoomDenseToRagged", "LoomSparseEmbedding",
};

static int op_supported(const char *op) {
  for (size_t i = 0; i < sizeof SIMPLE / sizeof *SIMPLE; i++)
    if (!strcmp(op, SIMPLE[i].loom)) return 1;
  for (size_t i = 0; i < sizeof SPECIAL / sizeof *SPECIAL; i++)
    if (!strcmp(op, SPECIAL[i])) return 1;
  return 0;
}

static int is_sig_input(const loom_signature *sig, const loom_node *n) {
  for (int i = 0; i < sig->ninputs; i++)
    if (sig->inputs[i].node == n) return 1;
  return 0;
}

static void reduce_op(ox *x, const loom_node *n, const loom_attrs *a, const char *op, const char *out) {
  const char *in = tname(x, loom_node_input(n, 0));
  int r = loom_output_ndim(loom_node_input(n, 0));
  int64_t axes[LOOM_MAX_DIMS];
  int na = a->naxes;
  if (na < 0) { /* all axes */
    na = r;
    for (int i = 0; i < r; i++) axes[i] = i;
  } else {
    memcpy(axes, a->axes, sizeof(int64_t) * (size_t)na);
  }
  if (na == 0) { /* reduces nothing */
    emit1(x, n, "Identity", in, out, NULL);
    return;
  }
  Onnx__NodeProto *p;
  if (!strcmp(op, "ReduceSum")) { /* axes as an input since opset 13 */
    const char *ins[2] = {in, const_i64(x, n, "axes", na, axes)};
    p = emit(x, op, loom_node_name(n), 2, ins, 1, &out);
  } else { /* an attribute until opset 18 */
    p = emit(x, op, loom_node_name(n), 1, &in, 1, &out);
    attr_ints(x, p, "axes", na, axes);
  }
  attr_i(x, p, "keepdims", a->keepdims ? 1 : 0);
}

/* Bucketize (out = how many boundaries b satisfy !(v < b), int32): the value against every boundary on a new
 * last axis, Not(Less) cast to int32 and summed over that axis. The comparison is in the kernel's types: an
 * integer value as float, a double value against the boundaries as doubles; NaN counts every boundary, as
 * !(NaN < b) does. */
static void bucketize(ox *x, const loom_node *n, const char *const *ins, const char *out) {
  Onnx__NodeProto *p;
  loom_dtype xdt = loom_output_dtype(loom_node_input(n, 0));
  const char *v = ins[0], *b = ins[1];
  if (xdt == LOOM_I32 || xdt == LOOM_I64) {
    v = emit1(x, n, "Cast", v, NULL, &p);
    attr_i(x, p, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
  } else if (xdt == LOOM_F64) {
    b = emit1(x, n, "Cast", b, NULL, &p);
    attr_i(x, p, "to", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE);
  }
  int64_t last = -1;
  const char *ax = const_i64(x, n, "axes", 1, &last);
  const char *ui[2] = {v, ax};
  const char *col = tmp_name(x, n, "column");
  emit(x, "Unsqueeze", tmp_name(x, n, "Unsqueeze"), 2, ui, 1, &col);
  const char *li[2] = {col, b};
  const char *less = tmp_name(x, n, "less");
  emit(x, "Less", tmp_name(x, n, "Less"), 2, li, 1, &less);
  const char *counted = emit1(x, n, "Cast", emit1(x, n, "Not", less, NULL, NULL), NULL, &p);
  attr_i(x, p, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT32);
  const char *si[2] = {counted, ax};
  p = emit(x, "ReduceSum", loom_node_name(n), 2, si, 1, &out);
  attr_i(x, p, "keepdims", 0);
}

/* The ids of a SparseEmbedding when they are a dense tensor's rows: DenseToRagged that drops nothing (every
 * row has the same count), its values and row_splits both feeding the embedding; NULL otherwise. */
static const loom_node *dense_rows_source(const loom_node *emb) {
  loom_output ids = loom_node_input(emb, 1), splits = loom_node_input(emb, 2);
  const loom_node *src = ids.node;
  if (strcmp(loom_node_op_name(src), "LoomDenseToRagged") || loom__node_attrs(src)->keepdims || ids.index != 0 ||
      splits.node != src || splits.index != 1)
    return NULL;
  return src;
}

/* DenseToRagged writes nothing: each node it feeds must be a SparseEmbedding that reads the dense tensor
 * itself (sparse_embedding below). */
static loom_code dense_to_ragged(ox *x, const loom_node *n) {
  int id = loom_node_id(n);
  for (int i = id + 1; i < x->nnodes; i++) {
    loom_node *c = loom_graph_node_at(x->g, i);
    if (!x->need[i]) continue;
    for (int k = 0; k < loom_node_num_inputs(c); k++) {
      if (loom_node_input(c, k).node != n) continue;
      if (strcmp(loom_node_op_name(c), "LoomSparseEmbedding") || dense_rows_source(c) != n)
        return unsupported(x, n, "ragged rows read by an op other than an embedding lookup");
    }
  }
  return LOOM_OK;
}

/* SparseEmbedding over a dense tensor's rows ([B, k] ids, k fixed): the rows gathered as [B, k, D], an entry
 * with a negative id (the kernel prunes it) zeroed, summed over k, divided by the kept count (mean) or its
 * square root (sqrtn), at least 1 (a row with no kept entry is zeros, as the kernel gives). Weighted ids,
 * max_norm and truly ragged ids have no form here. */
static void sparse_embedding(ox *x, const loom_node *n, const loom_attrs *a, const char *const *ins, const char *out) {
  const loom_node *src = dense_rows_source(n);
  if (!src) {
    unsupported(x, n, "ragged ids (only the rows of a dense tensor are written)");
    return;
  }
  if (loom_node_num_inputs(n) != 3 || a->alpha > 0) {
    unsupported(x, n, loom_node_num_inputs(n) != 3 ? "weighted ids" : "max_norm");
    return;
  }
  loom_output dense = loom_node_input(src, 0);
  loom_dtype idt = loom_output_dtype(dense);
  int64_t dims[LOOM_MAX_DIMS], k = 1;
  int r = loom_output_dims(dense, dims);
  for (int i = 1; i < r; i++) k = dims[i] < 0 || k < 0 ? -1 : k * dims[i];
  if (r < 1 || k < 1) {
    unsupported(x, n, "ids of unknown row length");
    return;
  }
  Onnx__NodeProto *p;
  int64_t shp[2] = {-1, k}, one = 1, last = -1;
  const char *ri[2] = {tname(x, dense), const_i64(x, n, "shape", 2, shp)};
  const char *ids = tmp_name(x, n, "ids");
  emit(x, "Reshape", tmp_name(x, n, "Reshape"), 2, ri, 1, &ids);
  const char *zero = const_scalar(x, n, "zero", idt, 0.0);
  const char *li[2] = {ids, zero}, *neg = tmp_name(x, n, "negative");
  emit(x, "Less", tmp_name(x, n, "Less"), 2, li, 1, &neg);
  const char *keep = emit1(x, n, "Cast", emit1(x, n, "Not", neg, NULL, NULL), NULL, &p);
  attr_i(x, p, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
  const char *mi[2] = {ids, zero}, *safe = tmp_name(x, n, "safe_ids");
  emit(x, "Max", tmp_name(x, n, "Max"), 2, mi, 1, &safe);
  const char *gi[2] = {ins[0], safe}, *rows = tmp_name(x, n, "rows");
  p = emit(x, "Gather", tmp_name(x, n, "Gather"), 2, gi, 1, &rows);
  attr_i(x, p, "axis", 0);
  const char *ax_last = const_i64(x, n, "axes", 1, &last), *ax1 = const_i64(x, n, "axes", 1, &one);
  const char *ui[2] = {keep, ax_last}, *keep3 = tmp_name(x, n, "keep");
  emit(x, "Unsqueeze", tmp_name(x, n, "Unsqueeze"), 2, ui, 1, &keep3);
  const char *xi[2] = {rows, keep3}, *kept = tmp_name(x, n, "kept_rows");
  emit(x, "Mul", tmp_name(x, n, "Mul"), 2, xi, 1, &kept);
  int comb = (int)a->num;
  const char *si[2] = {kept, ax1};
  const char *sum = comb == LOOM_COMBINER_SUM ? out : tmp_name(x, n, "sum");
  p = emit(x, "ReduceSum", comb == LOOM_COMBINER_SUM ? loom_node_name(n) : tmp_name(x, n, "ReduceSum"), 2, si, 1,
           &sum);
  attr_i(x, p, "keepdims", 0);
  if (comb == LOOM_COMBINER_SUM) return;
  const char *ci[2] = {keep, ax1}, *cnt = tmp_name(x, n, "count");
  p = emit(x, "ReduceSum", tmp_name(x, n, "ReduceSum"), 2, ci, 1, &cnt);
  attr_i(x, p, "keepdims", 1);
  const char *ai[2] = {cnt, const_scalar(x, n, "one", LOOM_F32, 1.0)}, *den = tmp_name(x, n, "count1");
  emit(x, "Max", tmp_name(x, n, "Max"), 2, ai, 1, &den);
  if (comb == LOOM_COMBINER_SQRTN) den = emit1(x, n, "Sqrt", den, NULL, NULL);
  const char *di[2] = {sum, den};
  emit(x, "Div", loom_node_name(n), 2, di, 1, &out);
}

static loom_code convert(ox *x, loom_node *n, const loom_signature *sig) {
  const char *op = loom_node_op_name(n);
  const loom_attrs *a = loom__node_attrs(n);
  int nin = loom_node_num_inputs(n);
  const char *out = tname(x, loom_node_output(n, 0));
  const char *name = loom_node_name(n);
  loom_dtype odt = loom_node_num_outputs(n) > 0 ? loom_output_dtype(loom_node_output(n, 0)) : LOOM_DTYPE_INVALID;
  const char *in[LOOM_MAX_DIMS * 2];
  const char **ins = in;
  const char **big = NULL;
  if (nin > (int)(sizeof in / sizeof *in)) {
    big = ar(x, sizeof *big * (size_t)nin);
    if (!big) return x->rc;
    ins = big;
  }
  for (int i = 0; i < nin; i++) ins[i] = tname(x, loom_node_input(n, i));

  if (!strcmp(op, "Placeholder")) {
    if (!is_sig_input(sig, n)) return unsupported(x, n, "a placeholder that is not one of the signature's inputs");
    return LOOM_OK;
  }
  if (!strcmp(op, "NoOp")) return LOOM_OK;
  if (!strcmp(op, "Const")) {
    if (!a->value || loom_tensor_dtype(a->value) == LOOM_STRING)
      return unsupported(x, n, "a string constant (ONNX export writes numeric tensors only)");
    init_tensor(x, out, a->value);
    return x->rc;
  }
  if (!strcmp(op, "VariableV2")) {
    loom_tensor *t = NULL;
    loom_code rc = x->sess ? loom_session_read_variable(x->sess, name, &t, x->st)
                           : loom_checkpoint_read_tensor(x->ckpt, name, &t, x->st);
    if (rc) {
      char msg[768];
      snprintf(msg, sizeof msg, "%s", loom_status_message(x->st));
      return fail(x, rc, "variable '%s': %s", name, msg);
    }
    init_tensor(x, out, t);
    loom_tensor_free(t);
    return x->rc;
  }
  for (size_t i = 0; i < sizeof SIMPLE / sizeof *SIMPLE; i++)
    if (!strcmp(op, SIMPLE[i].loom)) {
      emit(x, SIMPLE[i].onnx, name, nin, ins, 1, &out);
      return x->rc;
    }
  Onnx__NodeProto *p = NULL;
  if (!strcmp(op, "NotEqual")) {
    const char *e = tmp_name(x, n, "equal");
    emit(x, "Equal", tmp_name(x, n, "Equal"), 2, ins, 1, &e);
    emit1(x, n, "Not", e, out, NULL);
  } else if (!strcmp(op, "Square")) {
    const char *xx[2] = {ins[0], ins[0]};
    emit(x, "Mul", name, 2, xx, 1, &out);
  } else if (!strcmp(op, "Rsqrt")) {
    emit1(x, n, "Reciprocal", emit1(x, n, "Sqrt", ins[0], NULL, NULL), out, NULL);
  } else if (!strcmp(op, "Log1p")) {
    const char *s[2] = {ins[0], const_scalar(x, n, "one", odt, 1.0)};
    const char *sum = tmp_name(x, n, "sum");
    emit(x, "Add", tmp_name(x, n, "Add"), 2, s, 1, &sum);
    emit1(x, n, "Log", sum, out, NULL);
  } else if (!strcmp(op, "Relu6")) {
    const char *c[3] = {ins[0], const_scalar(x, n, "zero", odt, 0.0), const_scalar(x, n, "six", odt, 6.0)};
    emit(x, "Clip", name, 3, c, 1, &out);
  } else if (!strcmp(op, "Elu")) {
    emit1(x, n, "Elu", ins[0], out, &p);
    attr_f(x, p, "alpha", a->alpha != 0 ? a->alpha : 1.0);
  } else if (!strcmp(op, "LeakyRelu")) {
    emit1(x, n, "LeakyRelu", ins[0], out, &p);
    attr_f(x, p, "alpha", a->alpha);
  } else if (!strcmp(op, "MatMul")) {
    int r0 = loom_output_ndim(loom_node_input(n, 0)), r1 = loom_output_ndim(loom_node_input(n, 1));
    if (r0 != 2 || r1 != 2) return unsupported(x, n, "MatMul of inputs that are not 2-D");
    if (!a->transpose_a && !a->transpose_b) {
      emit(x, "MatMul", name, 2, ins, 1, &out);
    } else {
      if (odt != LOOM_F32 && odt != LOOM_F64) return unsupported(x, n, "a transposed MatMul that is not float");
      p = emit(x, "Gemm", name, 2, ins, 1, &out);
      if (a->transpose_a) attr_i(x, p, "transA", 1);
      if (a->transpose_b) attr_i(x, p, "transB", 1);
    }
  } else if (!strcmp(op, "BatchMatMulV2")) {
    const char *mm[2] = {ins[0], ins[1]};
    for (int k = 0; k < 2; k++) {
      if (!(k ? a->transpose_b : a->transpose_a)) continue;
      int r = loom_output_ndim(loom_node_input(n, k));
      int64_t perm[LOOM_MAX_DIMS];
      for (int i = 0; i < r; i++) perm[i] = i;
      perm[r - 2] = r - 1;
      perm[r - 1] = r - 2;
      mm[k] = transpose(x, n, ins[k], perm, r);
    }
    emit(x, "MatMul", name, 2, mm, 1, &out);
  } else if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) {
    p = emit(x, op, name, 1, ins, 1, &out);
    attr_i(x, p, "axis", -1); /* loom's softmaxes are over the last axis */
  } else if (!strcmp(op, "Range")) { /* no inputs: its values are known, written as an initializer */
    int64_t len;
    if (loom_output_dims(loom_node_output(n, 0), &len) != 1 || len < 0) return unsupported(x, n, "an unknown length");
    loom_dtype dt = odt;
    size_t es = loom_dtype_size(dt);
    uint8_t *vals = ar(x, es * (size_t)len + 1);
    if (!vals) return x->rc;
    for (int64_t i = 0; i < len; i++) {
      double v = a->start + (double)i * a->delta;
      if (dt == LOOM_F32) ((float *)vals)[i] = (float)v;
      else if (dt == LOOM_F64) ((double *)vals)[i] = v;
      else if (dt == LOOM_I32) ((int32_t *)vals)[i] = (int32_t)v;
      else if (dt == LOOM_I64) ((int64_t *)vals)[i] = (int64_t)v;
      else return unsupported(x, n, "a range of this dtype");
    }
    add_init(x, out, dt, 1, &len, vals, es * (size_t)len);
  } else if (!strcmp(op, "Bucketize")) {
    bucketize(x, n, ins, out);
  } else if (!strcmp(op, "LoomDenseToRagged")) {
    return dense_to_ragged(x, n);
  } else if (!strcmp(op, "LoomSparseEmbedding")) {
    sparse_embedding(x, n, a, ins, out);
  } else if (!strcmp(op, "Conv2D")) {
    conv_like(x, n, a, "Conv", out);
  } else if (!strcmp(op, "MaxPool")) {
    conv_like(x, n, a, "MaxPool", out);
  } else if (!strcmp(op, "AvgPool")) {
    conv_like(x, n, a, "AveragePool", out);
  } else if (!strcmp(op, "Reshape")) {
    int zero = 0;
    for (int i = 0; i < a->nshape; i++) zero |= a->shape[i] == 0;
    const char *r[2] = {ins[0], const_i64(x, n, "shape", a->nshape, a->shape)};
    p = emit(x, "Reshape", name, 2, r, 1, &out);
    if (zero) attr_i(x, p, "allowzero", 1); /* TF's 0 is a zero-size dim, ONNX's (by default) copies the input's */
  } else if (!strcmp(op, "ReshapeLike") || !strcmp(op, "BroadcastLike")) {
    const char *r[2] = {ins[0], emit1(x, n, "Shape", ins[1], NULL, NULL)};
    emit(x, !strcmp(op, "ReshapeLike") ? "Reshape" : "Expand", name, 2, r, 1, &out);
  } else if (!strcmp(op, "BroadcastTo")) {
    const char *r[2] = {ins[0], const_i64(x, n, "shape", a->nshape, a->shape)};
    emit(x, "Expand", name, 2, r, 1, &out);
  } else if (!strcmp(op, "Transpose")) {
    p = emit(x, "Transpose", name, 1, ins, 1, &out);
    attr_ints(x, p, "perm", a->naxes, a->axes);
  } else if (!strcmp(op, "ConcatV2")) {
    p = emit(x, "Concat", name, nin, ins, 1, &out);
    attr_i(x, p, "axis", a->axis);
  } else if (!strcmp(op, "Pack")) {
    const char **u = ar(x, sizeof *u * (size_t)(nin + 1));
    if (!u) return x->rc;
    for (int i = 0; i < nin; i++) {
      const char *ui[2] = {ins[i], const_i64(x, n, "axes", 1, &a->axis)};
      u[i] = tmp_name(x, n, "unsqueezed");
      emit(x, "Unsqueeze", tmp_name(x, n, "Unsqueeze"), 2, ui, 1, &u[i]);
    }
    p = emit(x, "Concat", name, nin, u, 1, &out);
    attr_i(x, p, "axis", a->axis);
  } else if (!strcmp(op, "ExpandDims")) {
    const char *ui[2] = {ins[0], const_i64(x, n, "axes", 1, &a->axis)};
    emit(x, "Unsqueeze", name, 2, ui, 1, &out);
  } else if (!strcmp(op, "Squeeze")) {
    const char *si[2] = {ins[0], a->naxes > 0 ? const_i64(x, n, "axes", a->naxes, a->axes) : NULL};
    emit(x, "Squeeze", name, a->naxes > 0 ? 2 : 1, si, 1, &out);
  } else if (!strcmp(op, "Slice")) {
    int r = a->nshape;
    int64_t ends[LOOM_MAX_DIMS], axes[LOOM_MAX_DIMS];
    for (int i = 0; i < r; i++) {
      ends[i] = a->size[i] < 0 ? INT64_MAX : a->shape[i] + a->size[i];
      axes[i] = i;
    }
    const char *si[4] = {ins[0], const_i64(x, n, "starts", r, a->shape), const_i64(x, n, "ends", r, ends),
                         const_i64(x, n, "axes", r, axes)};
    emit(x, "Slice", name, 4, si, 1, &out);
  } else if (!strcmp(op, "Tile")) {
    const char *ti[2] = {ins[0], const_i64(x, n, "repeats", a->nshape, a->shape)};
    emit(x, "Tile", name, 2, ti, 1, &out);
  } else if (!strcmp(op, "PadV2")) {
    int r = a->nshape;
    int64_t pads[2 * LOOM_MAX_DIMS];
    for (int i = 0; i < r; i++) pads[i] = a->shape[i], pads[r + i] = a->size[i];
    const char *pi[3] = {ins[0], const_i64(x, n, "pads", 2 * r, pads), const_scalar(x, n, "value", odt, a->alpha)};
    p = emit(x, "Pad", name, 3, pi, 1, &out);
    attr_s(x, p, "mode", "constant");
  } else if (!strcmp(op, "GatherV2")) {
    p = emit(x, "Gather", name, 2, ins, 1, &out);
    attr_i(x, p, "axis", a->axis);
  } else if (!strcmp(op, "Cast")) {
    if (!onnx_dtype(a->dtype)) return unsupported(x, n, "a cast to a string");
    emit1(x, n, "Cast", ins[0], out, &p);
    attr_i(x, p, "to", onnx_dtype(a->dtype));
  } else if (!strcmp(op, "ArgMax") || !strcmp(op, "ArgMin") || !strcmp(op, "Shape")) {
    int i64 = odt == LOOM_I64;
    const char *o = i64 ? out : tmp_name(x, n, "i64");
    if (!strcmp(op, "Shape")) {
      p = emit(x, "Shape", i64 ? name : tmp_name(x, n, "Shape"), 1, ins, 1, &o);
    } else {
      p = emit(x, op, i64 ? name : tmp_name(x, n, op), 1, ins, 1, &o);
      attr_i(x, p, "axis", a->axis);
      attr_i(x, p, "keepdims", 0);
    }
    if (!i64) { /* ONNX gives int64 */
      emit1(x, n, "Cast", o, out, &p);
      attr_i(x, p, "to", onnx_dtype(odt));
    }
  } else if (!strcmp(op, "Sum")) {
    reduce_op(x, n, a, "ReduceSum", out);
  } else if (!strcmp(op, "Mean")) {
    reduce_op(x, n, a, "ReduceMean", out);
  } else if (!strcmp(op, "Max")) {
    reduce_op(x, n, a, "ReduceMax", out);
  } else if (!strcmp(op, "Min")) {
    reduce_op(x, n, a, "ReduceMin", out);
  } else if (!strcmp(op, "Prod")) {
    reduce_op(x, n, a, "ReduceProd", out);
  } else if (!strcmp(op, "ReduceLogSumExp")) {
    reduce_op(x, n, a, "ReduceLogSumExp", out);
  } else if (!strcmp(op, "OneHot")) {
    int64_t two = 2;
    double v[2] = {a->beta, a->alpha};
    const char *vals;
    if (odt == LOOM_F32) {
      float f[2] = {(float)v[0], (float)v[1]};
      vals = add_init(x, tmp_name(x, n, "values"), odt, 1, &two, f, sizeof f);
    } else if (odt == LOOM_F64) {
      vals = add_init(x, tmp_name(x, n, "values"), odt, 1, &two, v, sizeof v);
    } else if (odt == LOOM_I64 || odt == LOOM_I32) {
      int64_t l[2] = {(int64_t)v[0], (int64_t)v[1]};
      int32_t i[2] = {(int32_t)v[0], (int32_t)v[1]};
      vals = odt == LOOM_I64 ? add_init(x, tmp_name(x, n, "values"), odt, 1, &two, l, sizeof l)
                             : add_init(x, tmp_name(x, n, "values"), odt, 1, &two, i, sizeof i);
    } else {
      return unsupported(x, n, "a one-hot of this dtype");
    }
    const char *oi[3] = {ins[0], const_scalar(x, n, "depth", LOOM_I64, (double)a->num), vals};
    p = emit(x, "OneHot", name, 3, oi, 1, &out);
    attr_i(x, p, "axis", a->axis);
  } else if (!strcmp(op, "ZerosLike") || !strcmp(op, "OnesLike")) {
    const char *shp = emit1(x, n, "Shape", ins[0], NULL, NULL);
    double v = !strcmp(op, "OnesLike");
    union {
      float f;
      double d;
      int32_t i;
      int64_t l;
      uint8_t b;
    } u;
    switch (odt) {
    case LOOM_F32: u.f = (float)v; break;
    case LOOM_F64: u.d = v; break;
    case LOOM_I32: u.i = (int32_t)v; break;
    case LOOM_I64: u.l = (int64_t)v; break;
    case LOOM_U8:
    case LOOM_BOOL: u.b = (uint8_t)v; break;
    default: return unsupported(x, n, "a string tensor");
    }
    int64_t one = 1;
    Onnx__TensorProto *t = tensor_proto(x, "value", odt, 1, &one, &u, loom_dtype_size(odt));
    p = emit(x, "ConstantOfShape", name, 1, &shp, 1, &out);
    Onnx__AttributeProto *at = add_attr(x, p, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    if (at) at->t = t;
  } else if (!strcmp(op, "Fill")) {
    const char *fi[2] = {ins[0], const_i64(x, n, "shape", a->nshape, a->shape)};
    emit(x, "Expand", name, 2, fi, 1, &out);
  } else if (!strcmp(op, "LoomMultiHotConcat")) {
    /* the input layer's concatenation: dense pieces as they are, int ids [B, n] as n one-hots (an id outside
       [0, depth) is a zero row, as loom's kernel gives: Equal against 0..depth-1, not ONNX's OneHot, which
       wraps negative ids); ragged pieces have no ONNX form here */
    const loom_node *ln = loom_node_input(n, 0).node;
    const loom_attrs *la = loom__node_attrs(ln);
    if (strcmp(loom_node_op_name(ln), "Const") || !la->value || loom_tensor_dtype(la->value) != LOOM_I64)
      return unsupported(x, n, "its layout is not a constant");
    const int64_t *lay = loom_tensor_data_const(la->value);
    int np = (int)(loom_tensor_numel(la->value) / 2), k = 1;
    const char **pieces = ar(x, sizeof *pieces * (size_t)(np + 1));
    if (!pieces) return x->rc;
    for (int q = 0; q < np && !x->rc; q++) {
      int64_t kind = lay[2 * q], depth = lay[2 * q + 1];
      if (kind == 0) { /* dense */
        pieces[q] = ins[k++];
      } else if (kind == 3) { /* one-hot ids */
        loom_output ido = loom_node_input(n, k);
        loom_dtype idt = loom_output_dtype(ido);
        int64_t *range = ar(x, sizeof *range * (size_t)(depth + 1));
        int32_t *range32 = ar(x, sizeof *range32 * (size_t)(depth + 1));
        if (!range || !range32) return x->rc;
        for (int64_t v = 0; v < depth; v++) range[v] = v, range32[v] = (int32_t)v;
        int64_t rd[1] = {depth}, m1 = -1, flat[2] = {0, -1};
        const char *rn = idt == LOOM_I64 ? add_init(x, tmp_name(x, n, "range"), LOOM_I64, 1, rd, range, sizeof *range * (size_t)depth)
                                        : add_init(x, tmp_name(x, n, "range"), LOOM_I32, 1, rd, range32, sizeof *range32 * (size_t)depth);
        const char *ui[2] = {ins[k++], const_i64(x, n, "axes", 1, &m1)};
        const char *un = tmp_name(x, n, "ids");
        emit(x, "Unsqueeze", tmp_name(x, n, "Unsqueeze"), 2, ui, 1, &un);
        const char *eq[2] = {un, rn};
        const char *hot = tmp_name(x, n, "hot");
        emit(x, "Equal", tmp_name(x, n, "Equal"), 2, eq, 1, &hot);
        const char *hf = emit1(x, n, "Cast", hot, NULL, &p);
        attr_i(x, p, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
        const char *ri[2] = {hf, const_i64(x, n, "shape", 2, flat)};
        pieces[q] = tmp_name(x, n, "onehot");
        emit(x, "Reshape", tmp_name(x, n, "Reshape"), 2, ri, 1, &pieces[q]);
      } else {
        return unsupported(x, n, "a ragged (multi-hot) piece; only dense and int one-hot pieces are written");
      }
    }
    p = emit(x, "Concat", name, np, pieces, 1, &out);
    attr_i(x, p, "axis", 1);
  } else {
    return unsupported(x, n, NULL);
  }
  if (loom_node_num_outputs(n) > 1 && !x->rc) return unsupported(x, n, "more than one output");
  return x->rc;
}

/* ---- the model ---- */
static loom_code write_file(ox *x, const char *path, const uint8_t *buf, size_t len) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return fail(x, LOOM_PERMISSION_DENIED, "cannot create %s: %s", tmp, strerror(errno));
  size_t w = fwrite(buf, 1, len, f);
  int bad = w != len || fflush(f) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path)) {
    int e = errno;
    remove(tmp);
    return fail(x, LOOM_DATA_LOSS, "writing %s failed: %s", path, strerror(e));
  }
  return LOOM_OK;
}

static loom_code export_core(ox *x, const loom_signature *sig, const char *out_path, const loom_onnx_options *o) {
  int opset = o->opset ? o->opset : ONNX_OPSET_DEFAULT;
  if (opset != ONNX_OPSET_DEFAULT)
    return fail(x, LOOM_INVALID_ARGUMENT, "opset %d: this exporter writes opset %d (whose reduce ops take their axes "
                "as attributes)", opset, ONNX_OPSET_DEFAULT);
  if (!out_path || !*out_path) return fail(x, LOOM_INVALID_ARGUMENT, "out_path is NULL or empty");
  if (!sig || sig->noutputs < 1) return fail(x, LOOM_INVALID_ARGUMENT, "the signature has no outputs");
  /* which outputs: the keys named, else every numeric one (the others are skipped with a note) */
  int nsel = o->noutputs > 0 ? o->noutputs : sig->noutputs;
  int *sel = calloc((size_t)nsel + 1, sizeof *sel);
  char *need = NULL, *direct = NULL;
  if (!sel) return fail(x, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  if (o->noutputs <= 0) {
    nsel = 0;
    for (int i = 0; i < sig->noutputs; i++) {
      loom_dtype dt = loom_output_dtype(sig->outputs[i]);
      if (onnx_dtype(dt)) {
        sel[nsel++] = i;
        continue;
      }
      loom__log(LOOM_LOG_INFO, "onnx: signature %s: output '%s' (%s) skipped: ONNX export writes numeric tensors only",
                sig->name ? sig->name : "", sig->output_keys[i], loom_dtype_name(dt));
    }
    if (!nsel) {
      fail(x, LOOM_UNIMPLEMENTED, "signature %s has no numeric output (ONNX export writes numeric tensors only)",
           sig->name ? sig->name : "");
      goto done;
    }
  }
  for (int i = 0; i < nsel && o->noutputs > 0; i++) {
    sel[i] = -1;
    for (int j = 0; o->output_keys && o->output_keys[i] && j < sig->noutputs; j++)
      if (!strcmp(sig->output_keys[j], o->output_keys[i])) sel[i] = j;
    if (sel[i] < 0) {
      fail(x, LOOM_NOT_FOUND, "signature %s has no output '%s'", sig->name ? sig->name : "",
           o->output_keys && o->output_keys[i] ? o->output_keys[i] : "(null)");
      goto done;
    }
  }
  x->nnodes = loom_graph_num_nodes(x->g);
  x->alias = ar(x, sizeof *x->alias * (size_t)(x->nnodes + 1));
  need = calloc((size_t)x->nnodes + 1, 1);
  if (!need || !x->alias) {
    fail(x, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int i = 0; i < sig->ninputs; i++) {
    int id = loom_node_id(sig->inputs[i].node);
    if (id < 0 || id >= x->nnodes || sig->inputs[i].index != 0 ||
        strcmp(loom_node_op_name(sig->inputs[i].node), "Placeholder")) {
      fail(x, LOOM_INVALID_ARGUMENT, "signature input '%s' is not a placeholder of the graph", sig->input_keys[i]);
      goto done;
    }
    x->alias[id] = sig->input_keys[i];
  }
  for (int i = 0; i < nsel; i++) {
    int id = loom_node_id(sig->outputs[sel[i]].node);
    if (id < 0 || id >= x->nnodes) {
      fail(x, LOOM_INVALID_ARGUMENT, "signature output '%s' is not a node of the graph", sig->output_keys[sel[i]]);
      goto done;
    }
    need[id] = 1;
  }
  /* graph order is topological: walk it backwards marking data inputs */
  for (int i = x->nnodes - 1; i >= 0; i--) {
    if (!need[i]) continue;
    loom_node *n = loom_graph_node_at(x->g, i);
    if (is_sig_input(sig, n)) continue;
    for (int k = 0; k < loom_node_num_inputs(n); k++) {
      int id = loom_node_id(loom_node_input(n, k).node);
      if (id >= 0 && id < x->nnodes) need[id] = 1;
    }
  }
  /* an op ONNX cannot express is named before anything it consumes (a string constant, say) */
  for (int i = 0; i < x->nnodes && !x->rc; i++)
    if (need[i] && !op_supported(loom_node_op_name(loom_graph_node_at(x->g, i))))
      unsupported(x, loom_graph_node_at(x->g, i), NULL);
  /* output keys are graph output names: a node of the same name gets "name:0" for its output 0,
     unless it is that output (then it is written under the key directly) */
  direct = calloc((size_t)nsel + 1, 1);
  if (!direct) fail(x, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < nsel && !x->rc; i++) {
    const char *key = sig->output_keys[sel[i]];
    for (int j = 0; j < i; j++)
      if (!strcmp(key, sig->output_keys[sel[j]])) fail(x, LOOM_INVALID_ARGUMENT, "output key '%s' is selected twice", key);
    loom_node *clash = loom_graph_find(x->g, key);
    if (!clash || !need[loom_node_id(clash)] || is_sig_input(sig, clash)) continue;
    int id = loom_node_id(clash);
    int same = 0;
    for (int j = 0; j < i; j++) same |= direct[j] && sig->outputs[sel[j]].node == clash;
    if (sig->outputs[sel[i]].node == clash && sig->outputs[sel[i]].index == 0 && !same) {
      direct[i] = 1;
      x->alias[id] = key;
    } else if (!x->alias[id]) {
      x->alias[id] = ar_str(x, "%s:0", key);
    }
  }
  x->need = need;
  for (int i = 0; i < x->nnodes && !x->rc; i++)
    if (need[i]) convert(x, loom_graph_node_at(x->g, i), sig);
  if (x->rc) goto done;
  /* graph inputs, outputs (Identity from the internal name to the key) */
  Onnx__ValueInfoProto **gin = ar(x, sizeof *gin * (size_t)(sig->ninputs + 1));
  Onnx__ValueInfoProto **gout = ar(x, sizeof *gout * (size_t)(nsel + 1));
  int ngin = 0;
  for (int i = 0; gin && i < sig->ninputs; i++)
    if (need[loom_node_id(sig->inputs[i].node)]) gin[ngin++] = value_info(x, sig->input_keys[i], sig->inputs[i], 1);
  for (int i = 0; gout && i < nsel && !x->rc; i++) {
    const char *key = sig->output_keys[sel[i]];
    const char *src = tname(x, sig->outputs[sel[i]]);
    if (!direct[i]) emit(x, "Identity", ar_str(x, "output/%s", key), 1, &src, 1, &key);
    gout[i] = value_info(x, key, sig->outputs[sel[i]], 0);
  }
  if (x->rc) goto done;
  Onnx__GraphProto graph;
  Onnx__ModelProto model;
  Onnx__OperatorSetIdProto ops, *opsp = &ops;
  onnx__graph_proto__init(&graph);
  onnx__model_proto__init(&model);
  onnx__operator_set_id_proto__init(&ops);
  ops.domain = "";
  ops.has_version = 1;
  ops.version = opset;
  graph.name = (char *)(o->graph_name ? o->graph_name : sig->name ? sig->name : "loom");
  graph.n_node = x->nnode;
  graph.node = x->nodes;
  graph.n_initializer = x->ninit;
  graph.initializer = x->inits;
  graph.n_input = (size_t)ngin;
  graph.input = gin;
  graph.n_output = (size_t)nsel;
  graph.output = gout;
  model.has_ir_version = 1;
  model.ir_version = ONNX_IR_VERSION;
  model.n_opset_import = 1;
  model.opset_import = &opsp;
  model.producer_name = "loom";
  model.producer_version = ar_str(x, "%s", loom_version());
  model.graph = &graph;
  if (x->rc) goto done;
  size_t len = onnx__model_proto__get_packed_size(&model);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) {
    fail(x, LOOM_RESOURCE_EXHAUSTED, "out of memory (%zu bytes)", len);
    goto done;
  }
  onnx__model_proto__pack(&model, buf);
  write_file(x, out_path, buf, len);
  free(buf);
done:
  free(direct);
  free(sel);
  free(need);
  return x->rc;
}

static void ox_free(ox *x) {
  for (ablock *b = x->blocks, *nx; b; b = nx) {
    nx = b->next;
    free(b);
  }
  free(x->nodes);
  free(x->inits);
}

static loom_onnx_options opts_of(const loom_onnx_options *opts) {
  loom_onnx_options o = loom_onnx_options_default();
  loom__opts_merge(&o, sizeof o, opts);
  return o;
}

loom_onnx_options loom_onnx_options_default(void) {
  loom_onnx_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.opset = ONNX_OPSET_DEFAULT;
  return o;
}

loom_code loom_onnx_export_graph(loom_graph *g, loom_session *s, const loom_signature *sig, const char *out_path,
                                 const loom_onnx_options *opts, loom_status *st) {
  if (!g || !s || !sig)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "onnx: the graph, session and signature must not be NULL");
  if (loom_graph_status(g, NULL))
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "onnx: the graph has a building error");
  ox x;
  memset(&x, 0, sizeof x);
  x.g = g;
  x.st = st;
  x.sess = s;
  loom_onnx_options o = opts_of(opts);
  loom_code rc = export_core(&x, sig, out_path, &o);
  ox_free(&x);
  return rc;
}

/* ---- from an export directory ---- */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    size_t k = fread(buf + n, 1, cap - n - 1, f);
    n += k;
    if (k == 0) break;
  }
  fclose(f);
  buf[n] = 0;
  *len = n;
  return buf;
}

loom_code loom_onnx_export(const char *export_dir, const char *out_path, const loom_onnx_options *opts,
                           loom_status *st) {
  if (!export_dir || !*export_dir) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "onnx: export_dir is NULL or empty");
  loom_onnx_options o = opts_of(opts);
  const char *signame = o.signature ? o.signature : "serving_default";
  char path[4200];
  size_t len = 0;
  loom_code rc = LOOM_OK;
  cJSON *root = NULL;
  loom_graph *g = NULL;
  const char **ik = NULL, **ok = NULL;
  loom_output *io = NULL, *oo = NULL;
  snprintf(path, sizeof path, "%s/saved_model.loom", export_dir);
  char *buf = slurp(path, &len);
  if (!buf) return loom_status_set(st, LOOM_NOT_FOUND, "onnx: cannot read %s: %s", path, strerror(errno));
  g = loom_graph_new();
  if (!g) {
    free(buf);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "onnx: out of memory");
  }
  rc = loom_graph_deserialize(g, buf, len, st);
  free(buf);
  if (rc) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", loom_status_message(st));
    loom_status_set(st, rc, "onnx: %s: %s", path, msg);
    goto out;
  }
  snprintf(path, sizeof path, "%s/signatures.json", export_dir);
  buf = slurp(path, &len);
  if (!buf) {
    rc = loom_status_set(st, LOOM_NOT_FOUND, "onnx: cannot read %s: %s", path, strerror(errno));
    goto out;
  }
  root = cJSON_Parse(buf);
  free(buf);
  const cJSON *sj = root ? cJSON_GetObjectItemCaseSensitive(root, signame) : NULL;
  if (!root) {
    rc = loom_status_set(st, LOOM_DATA_LOSS, "onnx: %s is not valid JSON", path);
    goto out;
  }
  if (!cJSON_IsObject(sj)) {
    rc = loom_status_set(st, LOOM_NOT_FOUND, "onnx: %s has no signature '%s'", path, signame);
    goto out;
  }
  const cJSON *ins = cJSON_GetObjectItemCaseSensitive(sj, "inputs"), *outs = cJSON_GetObjectItemCaseSensitive(sj, "outputs");
  int ni = cJSON_GetArraySize(ins), no = cJSON_GetArraySize(outs);
  ik = calloc((size_t)ni + 1, sizeof *ik);
  ok = calloc((size_t)no + 1, sizeof *ok);
  io = calloc((size_t)ni + 1, sizeof *io);
  oo = calloc((size_t)no + 1, sizeof *oo);
  if (!ik || !ok || !io || !oo) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "onnx: out of memory");
    goto out;
  }
  for (int side = 0; side < 2 && !rc; side++) {
    const cJSON *obj = side ? outs : ins;
    int i = 0;
    for (const cJSON *t = obj ? obj->child : NULL; t; t = t->next, i++) {
      const cJSON *nm = cJSON_GetObjectItemCaseSensitive(t, "name");
      loom_output out = cJSON_IsString(nm) ? loom_graph_find_output(g, nm->valuestring) : (loom_output){NULL, 0};
      if (!t->string || !out.node) {
        rc = loom_status_set(st, LOOM_DATA_LOSS, "onnx: %s: signature %s: %s %d names no tensor of the graph", path,
                             signame, side ? "output" : "input", i);
        break;
      }
      (side ? ok : ik)[i] = t->string;
      (side ? oo : io)[i] = out;
    }
  }
  if (rc) goto out;
  loom_signature sig = {signame, "", ni, ik, io, no, ok, oo};
  snprintf(path, sizeof path, "%s/variables/variables.ckpt", export_dir);
  ox x;
  memset(&x, 0, sizeof x);
  x.g = g;
  x.st = st;
  x.ckpt = path;
  rc = export_core(&x, &sig, out_path, &o);
  ox_free(&x);
out:
  free(ik);
  free(ok);
  free(io);
  free(oo);
  cJSON_Delete(root);
  loom_graph_free(g);
  return rc;
}
