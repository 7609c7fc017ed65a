/* layers/layers.c - tf.compat.v1.layers-style graph builders (see
 * include/loom/loom_layers.h): activations by name, regularizers, dense,
 * conv2d, pooling, flatten, dropout, batch normalization, embedding lookups.
 *
 * Everything here is composed from public builders; the one engine internal
 * used is the builders' placeholder output after a failure (engine_api.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "loom/loom.h"
#include "engine/engine_api.h"

#define LNAME 256

/* ------------------------------------------------------------ helpers */
static loom_output dummy(loom_graph *g) { return loom__graph_dummy(g); }
static int failed(const loom_graph *g) { return loom_graph_status(g, NULL) != LOOM_OK; }

/* The caller's options over the defaults in *dst (loom__opts_take); a bad
 * struct_size becomes the graph's error. 1 on error. */
static int take_opts(loom_graph *g, void *dst, size_t size, const void *src, const char *who, const char *type) {
  if (!loom__opts_take(dst, size, src, who, type, NULL)) return 0;
  loom_status *st = loom_status_new();
  loom_code rc = loom__opts_take(dst, size, src, who, type, st);
  if (rc) loom_graph_set_error(g, rc, "%s", st ? loom_status_message(st) : "bad options struct_size");
  loom_status_free(st);
  return rc != LOOM_OK;
}

static int float_dtype(loom_dtype dt) { return dt == LOOM_F32 || dt == LOOM_F64; }

static const char *dims_str(char *buf, size_t cap, loom_output x) {
  int64_t d[LOOM_MAX_DIMS];
  int n = loom_output_dims(x, d);
  size_t k = 0;
  k += (size_t)snprintf(buf + k, cap - k, "[");
  for (int i = 0; i < n && k < cap; i++) {
    if (d[i] < 0) k += (size_t)snprintf(buf + k, cap - k, "%s?", i ? "," : "");
    else k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)d[i]);
  }
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

/* A scalar constant of dtype dt (f32 or f64). */
static loom_output const_scalar(loom_graph *g, loom_dtype dt, double v, const char *name) {
  if (dt == LOOM_F64) return loom_const_data(g, LOOM_F64, 0, NULL, &v, name);
  float f = (float)v;
  return loom_const_data(g, LOOM_F32, 0, NULL, &f, name);
}

/* 1 when a node named `prefix` or "prefix/..." exists. */
static int prefix_in_use(loom_graph *g, const char *prefix) {
  size_t n = strlen(prefix);
  int nn = loom_graph_num_nodes(g);
  for (int i = 0; i < nn; i++) {
    const char *nm = loom_node_name(loom_graph_node_at(g, i));
    if (!strncmp(nm, prefix, n) && (nm[n] == '/' || nm[n] == 0)) return 1;
  }
  return 0;
}

/* The layer's (variable) scope name: `name` when given; else `base` made
 * unique against both the variable scope and the op name scope ("dense",
 * "dense_1", ...). With reuse and no name, `base` itself (so that the layer
 * can find an earlier layer's variables). */
static void layer_name(loom_graph *g, const char *name, const char *base, int reuse, char *out, size_t cap) {
  if (name && *name) {
    snprintf(out, cap, "%s", name);
    return;
  }
  snprintf(out, cap, "%s", base);
  if (reuse != LOOM_REUSE_NONE) return;
  const char *vs = loom_variable_scope_name(g), *gs = loom_graph_scope(g);
  char vp[LNAME * 2], gp[LNAME * 2];
  for (int i = 1;; i++) {
    snprintf(vp, sizeof vp, "%s%s%s", vs, *vs ? "/" : "", out);
    snprintf(gp, sizeof gp, "%s%s%s", gs, *gs ? "/" : "", out);
    if (!prefix_in_use(g, vp) && !prefix_in_use(g, gp)) return;
    snprintf(out, cap, "%s_%d", base, i);
  }
}

/* The full name a layer scope will have, for error messages. */
static void full_layer_name(loom_graph *g, const char *lname, char *out, size_t cap) {
  const char *vs = loom_variable_scope_name(g);
  snprintf(out, cap, "%s%s%s", vs, *vs ? "/" : "", lname);
}

/* Common prologue of the weight-carrying layers: names the layer (lname, and
 * full = with the variable scope) and checks x is a valid float input.
 * Fills d/nd/dt; returns 0, or -1 after recording the error. */
static int layer_begin(loom_graph *g, loom_output x, const char *name, const char *base, int reuse, char *lname,
                       char *full, int64_t *d, int *nd, loom_dtype *dt) {
  layer_name(g, name, base, reuse, lname, LNAME);
  full_layer_name(g, lname, full, LNAME * 2);
  if (!loom_output_valid(x)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid input", full);
    return -1;
  }
  *nd = loom_output_dims(x, d);
  *dt = loom_output_dtype(x);
  if (!float_dtype(*dt)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: inputs must be float32 or float64, got %s", full,
                         loom_dtype_name(*dt));
    return -1;
  }
  return 0;
}

/* "valid" / "same" (any case; NULL = valid) -> LOOM_PADDING_*; -1 otherwise. */
static int parse_padding(const char *p) {
  if (!p || !strcasecmp(p, "valid")) return LOOM_PADDING_VALID;
  if (!strcasecmp(p, "same")) return LOOM_PADDING_SAME;
  return -1;
}

/* ------------------------------------------------------------ activations */
typedef struct act_entry {
  const char *name;
  int kind;
} act_entry;
enum { ACT_LINEAR, ACT_RELU, ACT_RELU6, ACT_ELU, ACT_SELU, ACT_SIGMOID, ACT_TANH, ACT_SOFTPLUS, ACT_GELU, ACT_LEAKY, ACT_SOFTMAX };
static const act_entry ACTS[] = {
    {"linear", ACT_LINEAR},     {"relu", ACT_RELU},   {"relu6", ACT_RELU6},       {"elu", ACT_ELU},
    {"selu", ACT_SELU},         {"sigmoid", ACT_SIGMOID}, {"tanh", ACT_TANH}, {"softplus", ACT_SOFTPLUS},
    {"gelu", ACT_GELU},         {"leaky_relu", ACT_LEAKY}, {"softmax", ACT_SOFTMAX},
};
#define NACTS ((int)(sizeof ACTS / sizeof ACTS[0]))

static int act_kind(const char *a) {
  if (!a || !*a) return ACT_LINEAR;
  for (int i = 0; i < NACTS; i++)
    if (!strcmp(a, ACTS[i].name)) return ACTS[i].kind;
  return -1;
}

int loom_activation_valid(const char *activation) { return act_kind(activation) >= 0; }

loom_output loom_activation(loom_graph *g, loom_output x, const char *activation, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  int k = act_kind(activation);
  if (k < 0) {
    char list[256];
    size_t n = 0;
    for (int i = 0; i < NACTS; i++) n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", ACTS[i].name);
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "Unknown activation function: %s (known: %s)", activation, list);
    return dummy(g);
  }
  switch (k) {
    case ACT_RELU: return loom_relu(g, x, name);
    case ACT_RELU6: return loom_relu6(g, x, name);
    case ACT_ELU: return loom_elu(g, x, name);
    case ACT_SELU: return loom_selu(g, x, name);
    case ACT_SIGMOID: return loom_sigmoid(g, x, name);
    case ACT_TANH: return loom_tanh(g, x, name);
    case ACT_SOFTPLUS: return loom_softplus(g, x, name);
    case ACT_GELU: return loom_gelu(g, x, 0, name);
    case ACT_LEAKY: return loom_leaky_relu(g, x, 0.2, name);
    case ACT_SOFTMAX: return loom_softmax(g, x, name); /* over the last axis, as Keras' "softmax" */
    default: return x;
  }
}

/* ------------------------------------------------------------ regularizers */
loom_regularizer loom_no_regularizer(void) {
  loom_regularizer r = {LOOM_REG_NONE, 0, 0};
  return r;
}
loom_regularizer loom_l1_regularizer(double scale) {
  loom_regularizer r = {LOOM_REG_L1, scale, 0};
  return r;
}
loom_regularizer loom_l2_regularizer(double scale) {
  loom_regularizer r = {LOOM_REG_L2, 0, scale};
  return r;
}
loom_regularizer loom_l1_l2_regularizer(double scale_l1, double scale_l2) {
  loom_regularizer r = {LOOM_REG_L1_L2, scale_l1, scale_l2};
  return r;
}

loom_output loom_regularizer_apply(loom_graph *g, const loom_regularizer *r, loom_output w, const char *name) {
  loom_output none = {NULL, 0};
  if (!g || !r || r->kind == LOOM_REG_NONE) return none;
  if (failed(g)) return none;
  int use1 = r->kind == LOOM_REG_L1 || r->kind == LOOM_REG_L1_L2;
  int use2 = r->kind == LOOM_REG_L2 || r->kind == LOOM_REG_L1_L2;
  if (r->kind < LOOM_REG_NONE || r->kind > LOOM_REG_L1_L2) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "regularizer: unknown kind %d", (int)r->kind);
    return none;
  }
  if ((use1 && !(r->l1 >= 0)) || (use2 && !(r->l2 >= 0))) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "Setting a scale less than 0 on a regularizer: %g (l1) / %g (l2) for %s", use1 ? r->l1 : 0.0,
                         use2 ? r->l2 : 0.0, loom_node_name(w.node));
    return none;
  }
  if (use1 && r->l1 == 0) use1 = 0;
  if (use2 && r->l2 == 0) use2 = 0;
  if (!use1 && !use2) return none;
  loom_dtype dt = loom_output_dtype(w);
  if (!float_dtype(dt)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "regularizer: %s has dtype %s, expected float32 or float64",
                         loom_node_name(w.node), loom_dtype_name(dt));
    return none;
  }
  loom_output l1 = none, l2 = none;
  int both = use1 && use2;
  if (use1) {
    loom_output s = loom_reduce_sum(g, loom_abs(g, w, NULL), -1, NULL, 0, NULL);
    l1 = loom_mul(g, const_scalar(g, dt, r->l1, "scale"), s, both ? "l1_regularizer" : name ? name : "l1_regularizer");
  }
  if (use2) {
    /* scale * tf.nn.l2_loss(w) = scale * sum(w^2) / 2 */
    loom_output s = loom_reduce_sum(g, loom_square(g, w, NULL), -1, NULL, 0, NULL);
    l2 = loom_mul(g, const_scalar(g, dt, 0.5 * r->l2, "scale"), s,
                  both ? "l2_regularizer" : name ? name : "l2_regularizer");
  }
  if (both) return loom_add(g, l1, l2, name ? name : "l1_l2_regularizer");
  return use1 ? l1 : l2;
}

loom_node *loom_group_collection(loom_graph *g, const char *collection, const char *name) {
  if (!g) return NULL;
  int n = 0;
  const loom_output *outs = loom_get_collection(g, collection, &n);
  if (n == 0) return NULL;
  loom_node **deps = loom__malloc(sizeof *deps * (size_t)n);
  if (!deps) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "group %s: out of memory", collection);
    return NULL;
  }
  for (int i = 0; i < n; i++) deps[i] = outs[i].node;
  loom_node *r = loom_group(g, n, deps, name);
  loom__free(deps);
  return r;
}

/* A layer variable in the current variable scope; its regularization loss
 * (when `reg` gives one and the variable is new) goes to the collection. */
static loom_variable *layer_var(loom_graph *g, const char *vname, loom_dtype dt, int ndim, const int64_t *dims,
                                const loom_initializer *init, int trainable, const loom_regularizer *reg) {
  const char *vs = loom_variable_scope_name(g);
  char full[LNAME * 2];
  snprintf(full, sizeof full, "%s%s%s", vs, *vs ? "/" : "", vname);
  int existed = loom_graph_variable(g, full) != NULL;
  loom_variable *v = loom_get_variable(g, vname, dt, ndim, dims, init, trainable);
  if (!existed && reg && reg->kind != LOOM_REG_NONE && !failed(g)) {
    loom_graph_push_scope_reuse(g, vname);
    loom_graph_push_scope(g, "Regularizer");
    loom_output l = loom_regularizer_apply(g, reg, loom_variable_output(v), NULL);
    loom_graph_pop_scope(g);
    loom_graph_pop_scope(g);
    if (l.node && !failed(g)) loom_add_to_collection(g, LOOM_REGULARIZATION_LOSSES, l);
  }
  return v;
}

/* ------------------------------------------------------------ dense */
loom_dense_options loom_dense_options_default(void) {
  loom_dense_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.activation = NULL;
  o.use_bias = 1;
  o.kernel_initializer = loom_init_glorot_uniform(LOOM_SEED_NONE);
  o.bias_initializer = loom_init_zeros();
  o.kernel_regularizer = loom_no_regularizer();
  o.bias_regularizer = loom_no_regularizer();
  o.trainable = 1;
  o.reuse = LOOM_REUSE_NONE;
  return o;
}

loom_output loom_layers_dense(loom_graph *g, loom_output x, int64_t units, const loom_dense_options *o,
                              const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (failed(g)) return dummy(g);
  loom_dense_options op = loom_dense_options_default();
  if (take_opts(g, &op, sizeof op, o, "layers_dense", "loom_dense_options")) return dummy(g);
  char lname[LNAME], full[LNAME * 2], ds[128];
  int64_t d[LOOM_MAX_DIMS];
  int nd;
  loom_dtype dt;
  if (layer_begin(g, x, name, "dense", op.reuse, lname, full, d, &nd, &dt)) return dummy(g);
  if (units <= 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: units must be positive, got %lld", full, (long long)units);
    return dummy(g);
  }
  if (nd < 2) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: inputs must have rank >= 2 (expected min_ndim=2), got %s",
                         full, dims_str(ds, sizeof ds, x));
    return dummy(g);
  }
  int64_t in = d[nd - 1];
  if (in < 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: the last dimension of the inputs to Dense should be defined, got %s", full,
                         dims_str(ds, sizeof ds, x));
    return dummy(g);
  }
  int unknown = 0;
  for (int i = 0; i < nd - 1; i++) unknown += d[i] < 0;
  if (nd > 2 && unknown > 1) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: inputs of rank %d need every leading dimension but one known, got %s", full, nd,
                         dims_str(ds, sizeof ds, x));
    return dummy(g);
  }
  loom_variable_scope_push(g, lname, op.reuse);
  int64_t kd[2] = {in, units}, bd[1] = {units};
  loom_variable *k = layer_var(g, "kernel", dt, 2, kd, &op.kernel_initializer, op.trainable, &op.kernel_regularizer);
  loom_variable *b = NULL;
  if (op.use_bias) b = layer_var(g, "bias", dt, 1, bd, &op.bias_initializer, op.trainable, &op.bias_regularizer);
  loom_output h = x;
  if (nd > 2) {
    int64_t flat[2] = {-1, in};
    h = loom_reshape(g, h, 2, flat, NULL);
  }
  h = loom_matmul(g, h, loom_variable_output(k), 0, 0, NULL);
  if (nd > 2) {
    int64_t od[LOOM_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++) od[i] = d[i];
    od[nd - 1] = units;
    h = loom_reshape(g, h, nd, od, NULL);
  }
  if (b) h = loom_bias_add(g, h, loom_variable_output(b), NULL);
  h = loom_activation(g, h, op.activation, NULL);
  loom_variable_scope_pop(g);
  return failed(g) ? dummy(g) : h;
}

/* ------------------------------------------------------------ conv2d */
loom_conv2d_options loom_conv2d_options_default(void) {
  loom_conv2d_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.strides[0] = o.strides[1] = 1;
  o.padding = "valid";
  o.dilation_rate[0] = o.dilation_rate[1] = 1;
  o.activation = NULL;
  o.use_bias = 1;
  o.kernel_initializer = loom_init_glorot_uniform(LOOM_SEED_NONE);
  o.bias_initializer = loom_init_zeros();
  o.kernel_regularizer = loom_no_regularizer();
  o.bias_regularizer = loom_no_regularizer();
  o.trainable = 1;
  o.reuse = LOOM_REUSE_NONE;
  return o;
}

loom_output loom_layers_conv2d(loom_graph *g, loom_output x, int64_t filters, const int64_t kernel_size[2],
                               const loom_conv2d_options *o, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (failed(g)) return dummy(g);
  loom_conv2d_options op = loom_conv2d_options_default();
  if (take_opts(g, &op, sizeof op, o, "layers_conv2d", "loom_conv2d_options")) return dummy(g);
  char lname[LNAME], full[LNAME * 2], ds[128];
  int64_t d[LOOM_MAX_DIMS];
  int nd;
  loom_dtype dt;
  if (layer_begin(g, x, name, "conv2d", op.reuse, lname, full, d, &nd, &dt)) return dummy(g);
  if (nd != 4 || d[3] < 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: inputs must be NHWC of rank 4 with known channels (expected ndim=4), got %s", full,
                         dims_str(ds, sizeof ds, x));
    return dummy(g);
  }
  if (filters <= 0 || !kernel_size || kernel_size[0] <= 0 || kernel_size[1] <= 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: filters (%lld) and kernel_size must be positive", full,
                         (long long)filters);
    return dummy(g);
  }
  int pad = parse_padding(op.padding);
  if (pad < 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: padding must be \"valid\" or \"same\", got \"%s\"", full,
                         op.padding);
    return dummy(g);
  }
  if (op.strides[0] <= 0 || op.strides[1] <= 0 || op.dilation_rate[0] <= 0 || op.dilation_rate[1] <= 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: strides and dilation_rate must be positive", full);
    return dummy(g);
  }
  if ((op.strides[0] > 1 || op.strides[1] > 1) && (op.dilation_rate[0] > 1 || op.dilation_rate[1] > 1)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                         "%s: strides > 1 not supported in conjunction with dilation_rate > 1", full);
    return dummy(g);
  }
  loom_variable_scope_push(g, lname, op.reuse);
  int64_t kd[4] = {kernel_size[0], kernel_size[1], d[3], filters}, bd[1] = {filters};
  loom_variable *k = layer_var(g, "kernel", dt, 4, kd, &op.kernel_initializer, op.trainable, &op.kernel_regularizer);
  loom_variable *b = NULL;
  if (op.use_bias) b = layer_var(g, "bias", dt, 1, bd, &op.bias_initializer, op.trainable, &op.bias_regularizer);
  int64_t st4[4] = {1, op.strides[0], op.strides[1], 1}, dl4[4] = {1, op.dilation_rate[0], op.dilation_rate[1], 1};
  loom_output h = loom_conv2d(g, x, loom_variable_output(k), st4, pad, dl4, NULL);
  if (b) h = loom_bias_add(g, h, loom_variable_output(b), NULL);
  h = loom_activation(g, h, op.activation, NULL);
  loom_variable_scope_pop(g);
  return failed(g) ? dummy(g) : h;
}

/* ------------------------------------------------------------ pooling */
static loom_output pool2d(loom_graph *g, loom_output x, const int64_t pool_size[2], const int64_t strides[2],
                          const char *padding, const char *name, int is_max) {
  if (!g) return (loom_output){NULL, 0};
  if (failed(g)) return dummy(g);
  const char *base = is_max ? "max_pooling2d" : "average_pooling2d";
  char lname[LNAME];
  layer_name(g, name, base, LOOM_REUSE_NONE, lname, sizeof lname);
  if (!pool_size || pool_size[0] <= 0 || pool_size[1] <= 0 || (strides && (strides[0] <= 0 || strides[1] <= 0))) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: pool_size and strides must be given and positive", lname);
    return dummy(g);
  }
  int pad = parse_padding(padding);
  if (pad < 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: padding must be \"valid\" or \"same\", got \"%s\"", lname,
                         padding);
    return dummy(g);
  }
  const int64_t *s = strides ? strides : pool_size;
  int64_t k4[4] = {1, pool_size[0], pool_size[1], 1}, s4[4] = {1, s[0], s[1], 1};
  loom_graph_push_scope(g, lname);
  loom_output y = is_max ? loom_max_pool(g, x, k4, s4, pad, NULL) : loom_avg_pool(g, x, k4, s4, pad, NULL);
  loom_graph_pop_scope(g);
  return y;
}

loom_output loom_layers_max_pooling2d(loom_graph *g, loom_output x, const int64_t pool_size[2],
                                      const int64_t strides[2], const char *padding, const char *name) {
  return pool2d(g, x, pool_size, strides, padding, name, 1);
}
loom_output loom_layers_average_pooling2d(loom_graph *g, loom_output x, const int64_t pool_size[2],
                                          const int64_t strides[2], const char *padding, const char *name) {
  return pool2d(g, x, pool_size, strides, padding, name, 0);
}

/* ------------------------------------------------------------ flatten */
loom_output loom_layers_flatten(loom_graph *g, loom_output x, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (failed(g)) return dummy(g);
  char lname[LNAME], ds[128];
  layer_name(g, name, "flatten", LOOM_REUSE_NONE, lname, sizeof lname);
  if (!loom_output_valid(x)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid input", lname);
    return dummy(g);
  }
  int64_t d[LOOM_MAX_DIMS];
  int nd = loom_output_dims(x, d);
  if (nd < 1) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: inputs must have rank >= 1, got a scalar", lname);
    return dummy(g);
  }
  int64_t rest = 1;
  int rest_known = 1;
  for (int i = 1; i < nd; i++) {
    if (d[i] < 0) rest_known = 0;
    else rest *= d[i];
  }
  int64_t od[2];
  if (rest_known) {
    od[0] = d[0] < 0 ? -1 : d[0];
    od[1] = rest;
  } else if (d[0] >= 0) {
    od[0] = d[0];
    od[1] = -1;
  } else {
    loom_graph_set_error(g, LOOM_UNIMPLEMENTED,
                         "%s: flatten needs the batch dimension or every other dimension known, got %s", lname,
                         dims_str(ds, sizeof ds, x));
    return dummy(g);
  }
  loom_graph_push_scope(g, lname);
  loom_output y = loom_reshape(g, x, 2, od, NULL);
  loom_graph_pop_scope(g);
  return y;
}

/* ------------------------------------------------------------ training flags */
/* Checks a run-time training flag (bool scalar); 0 on error (recorded). */
static int check_flag(loom_graph *g, loom_output f, const char *who) {
  if (!loom_output_valid(f) || loom_output_dtype(f) != LOOM_BOOL || loom_output_ndim(f) != 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: training_flag must be a bool scalar, got %s of rank %d", who,
                         loom_output_valid(f) ? loom_dtype_name(loom_output_dtype(f)) : "an invalid output",
                         loom_output_valid(f) ? loom_output_ndim(f) : 0);
    return 0;
  }
  return 1;
}

/* ------------------------------------------------------------ dropout */
loom_dropout_options loom_dropout_options_default(void) {
  loom_dropout_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.training = 0;
  o.training_flag = (loom_output){NULL, 0};
  o.seed = LOOM_SEED_NONE;
  return o;
}

loom_output loom_layers_dropout(loom_graph *g, loom_output x, double rate, const loom_dropout_options *o,
                                const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (failed(g)) return dummy(g);
  loom_dropout_options op = loom_dropout_options_default();
  if (take_opts(g, &op, sizeof op, o, "layers_dropout", "loom_dropout_options")) return dummy(g);
  char lname[LNAME];
  layer_name(g, name, "dropout", LOOM_REUSE_NONE, lname, sizeof lname);
  if (!(rate >= 0 && rate < 1)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: rate must be in [0, 1), got %g", lname, rate);
    return dummy(g);
  }
  if (!float_dtype(loom_output_dtype(x))) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: inputs must be float32 or float64, got %s", lname,
                         loom_dtype_name(loom_output_dtype(x)));
    return dummy(g);
  }
  int dynamic = op.training_flag.node != NULL;
  if (dynamic && !check_flag(g, op.training_flag, lname)) return dummy(g);
  if (!dynamic && !op.training) return x;
  int64_t s1 = 0, s2 = 0;
  loom_graph_get_seed(g, op.seed == LOOM_SEED_NONE ? 0 : op.seed, op.seed != LOOM_SEED_NONE, &s1, &s2);
  loom_graph_push_scope(g, lname);
  loom_output y = loom_dropout(g, x, rate, (uint64_t)s1, (uint64_t)s2, NULL, NULL);
  if (dynamic) y = loom_select(g, op.training_flag, y, x, NULL);
  loom_graph_pop_scope(g);
  return y;
}

/* ------------------------------------------------------------ batch normalization */
loom_batch_norm_options loom_batch_norm_options_default(void) {
  loom_batch_norm_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.axis = -1;
  o.momentum = 0.99;
  o.epsilon = 1e-3;
  o.center = 1;
  o.scale = 1;
  o.beta_initializer = loom_init_zeros();
  o.gamma_initializer = loom_init_ones();
  o.moving_mean_initializer = loom_init_zeros();
  o.moving_variance_initializer = loom_init_ones();
  o.beta_regularizer = loom_no_regularizer();
  o.gamma_regularizer = loom_no_regularizer();
  o.training = 0;
  o.training_flag = (loom_output){NULL, 0};
  o.trainable = 1;
  o.reuse = LOOM_REUSE_NONE;
  return o;
}

loom_output loom_layers_batch_normalization(loom_graph *g, loom_output x, const loom_batch_norm_options *o,
                                            const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (failed(g)) return dummy(g);
  loom_batch_norm_options op = loom_batch_norm_options_default();
  if (take_opts(g, &op, sizeof op, o, "layers_batch_norm", "loom_batch_norm_options")) return dummy(g);
  char lname[LNAME], full[LNAME * 2], ds[128];
  int64_t d[LOOM_MAX_DIMS];
  int nd;
  loom_dtype dt;
  if (layer_begin(g, x, name, "batch_normalization", op.reuse, lname, full, d, &nd, &dt)) return dummy(g);
  int axis = op.axis < 0 ? op.axis + nd : op.axis;
  if (nd < 1 || axis < 0 || axis >= nd) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: axis %d is out of range for inputs %s", full, (int)op.axis,
                         dims_str(ds, sizeof ds, x));
    return dummy(g);
  }
  int64_t C = d[axis];
  if (C < 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: axis %d of inputs %s should have a defined dimension", full,
                         (int)op.axis, dims_str(ds, sizeof ds, x));
    return dummy(g);
  }
  if (!(op.epsilon > 0) || !(op.momentum >= 0 && op.momentum <= 1)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: need epsilon > 0 and momentum in [0, 1], got %g and %g", full,
                         op.epsilon, op.momentum);
    return dummy(g);
  }
  int dynamic = op.training_flag.node != NULL;
  if (dynamic && !check_flag(g, op.training_flag, full)) return dummy(g);
  int training = dynamic || op.training;

  loom_variable_scope_push(g, lname, op.reuse);
  int64_t cd[1] = {C};
  loom_variable *gamma = NULL, *beta = NULL;
  if (op.scale)
    gamma = layer_var(g, "gamma", dt, 1, cd, &op.gamma_initializer, op.trainable, &op.gamma_regularizer);
  if (op.center) beta = layer_var(g, "beta", dt, 1, cd, &op.beta_initializer, op.trainable, &op.beta_regularizer);
  loom_variable *mm = layer_var(g, "moving_mean", dt, 1, cd, &op.moving_mean_initializer, 0, NULL);
  loom_variable *mv = layer_var(g, "moving_variance", dt, 1, cd, &op.moving_variance_initializer, 0, NULL);
  loom_output mmo = loom_variable_output(mm), mvo = loom_variable_output(mv);

  /* parameters are [C]; for a channel axis other than the last they are
   * reshaped to [1,..,C,..,1] to broadcast */
  int64_t bshape[LOOM_MAX_DIMS];
  for (int i = 0; i < nd; i++) bshape[i] = i == axis ? C : 1;
  int need_reshape = axis != nd - 1;
  int64_t raxes[LOOM_MAX_DIMS];
  int nr = 0;
  for (int i = 0; i < nd; i++)
    if (i != axis) raxes[nr++] = i;

  loom_output mean = mmo, var = mvo;
  if (training) {
    loom_graph_push_scope(g, "moments");
    loom_output bm = loom_reduce_mean(g, x, nr, raxes, 0, "mean");
    loom_output bmb = need_reshape ? loom_reshape(g, bm, nd, bshape, NULL) : bm;
    loom_output diff = loom_sub(g, x, loom_stop_gradient(g, bmb, NULL), NULL);
    loom_output bv = loom_reduce_mean(g, loom_square(g, diff, NULL), nr, raxes, 0, "variance");
    loom_graph_pop_scope(g);
    if (dynamic) {
      mean = loom_select(g, op.training_flag, bm, mmo, "mean");
      var = loom_select(g, op.training_flag, bv, mvo, "variance");
    } else {
      mean = bm;
      var = bv;
    }
    /* moving -= (moving - batch) * (1 - momentum) [* training] */
    loom_output decay = const_scalar(g, dt, 1.0 - op.momentum, "decay");
    if (dynamic) decay = loom_mul(g, decay, loom_cast(g, op.training_flag, dt, NULL), NULL);
    loom_output um = loom_assign_sub(g, mmo, loom_mul(g, loom_sub(g, mmo, bm, NULL), decay, NULL), "AssignMovingAvg");
    loom_output uv =
        loom_assign_sub(g, mvo, loom_mul(g, loom_sub(g, mvo, bv, NULL), decay, NULL), "AssignMovingAvg_1");
    if (!failed(g)) {
      loom_add_to_collection(g, LOOM_UPDATE_OPS, um);
      loom_add_to_collection(g, LOOM_UPDATE_OPS, uv);
    }
  }
  loom_graph_push_scope(g, "batchnorm");
  /* inv = rsqrt(var + eps) * gamma; y = x * inv + (beta - mean * inv) */
  loom_output inv = loom_rsqrt(g, loom_add(g, var, const_scalar(g, dt, op.epsilon, "y"), NULL), NULL);
  if (gamma) inv = loom_mul(g, inv, loom_variable_output(gamma), NULL);
  loom_output shift = loom_mul(g, mean, inv, NULL);
  shift = beta ? loom_sub(g, loom_variable_output(beta), shift, NULL) : loom_neg(g, shift, NULL);
  if (need_reshape) {
    inv = loom_reshape(g, inv, nd, bshape, NULL);
    shift = loom_reshape(g, shift, nd, bshape, NULL);
  }
  loom_output y = loom_add(g, loom_mul(g, x, inv, NULL), shift, NULL);
  loom_graph_pop_scope(g);
  loom_variable_scope_pop(g);
  return failed(g) ? dummy(g) : y;
}

/* ------------------------------------------------------------ embeddings */
loom_output loom_embedding_lookup(loom_graph *g, loom_output params, loom_output ids, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  return loom_gather(g, params, ids, 0, name ? name : "embedding_lookup");
}

loom_output loom_embedding_lookup_sparse(loom_graph *g, loom_output params, loom_output ids, loom_output segment_ids,
                                         int64_t num_rows, const char *combiner, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (failed(g)) return dummy(g);
  const char *nm = name && *name ? name : "embedding_lookup_sparse";
  const char *cb = combiner ? combiner : "mean";
  int kind = !strcmp(cb, "sum") ? 0 : !strcmp(cb, "mean") ? 1 : !strcmp(cb, "sqrtn") ? 2 : -1;
  if (kind < 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: combiner must be one of 'mean', 'sqrtn' or 'sum', got '%s'",
                         nm, cb);
    return dummy(g);
  }
  if (num_rows < 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: num_rows must be known and >= 0, got %lld", nm,
                         (long long)num_rows);
    return dummy(g);
  }
  int64_t idd[LOOM_MAX_DIMS], sd[LOOM_MAX_DIMS];
  char b1[128], b2[128];
  int ni = loom_output_dims(ids, idd), ns = loom_output_dims(segment_ids, sd);
  if (ni != 1 || ns != 1 || (idd[0] >= 0 && sd[0] >= 0 && idd[0] != sd[0])) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: ids %s and segment_ids %s must be vectors of one length", nm,
                         dims_str(b1, sizeof b1, ids), dims_str(b2, sizeof b2, segment_ids));
    return dummy(g);
  }
  loom_graph_push_scope(g, nm);
  loom_output emb = loom_gather(g, params, ids, 0, "embedding_lookup");
  loom_output y;
  if (kind == 0) y = loom_unsorted_segment_sum(g, emb, segment_ids, num_rows, NULL);
  else if (kind == 1) y = loom_unsorted_segment_mean(g, emb, segment_ids, num_rows, NULL);
  else y = loom_unsorted_segment_sqrt_n(g, emb, segment_ids, num_rows, NULL);
  loom_graph_pop_scope(g);
  return y;
}

loom_code loom_row_splits_to_segment_ids(const loom_tensor *row_splits, loom_tensor **segment_ids, int64_t *nrows,
                                         loom_status *st) {
  if (!row_splits || !segment_ids)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "row_splits_to_segment_ids: NULL argument");
  loom_dtype dt = loom_tensor_dtype(row_splits);
  if (dt != LOOM_I32 && dt != LOOM_I64)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "row_splits must be int32 or int64, got %s",
                           loom_dtype_name(dt));
  if (loom_tensor_ndim(row_splits) != 1 || loom_tensor_dim(row_splits, 0) < 1)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "row_splits must be a vector of at least one element");
  int64_t n = loom_tensor_dim(row_splits, 0);
  const void *p = loom_tensor_data_const(row_splits);
#define RS(i) (dt == LOOM_I32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i])
  if (RS(0) != 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "row_splits[0] = %lld, must be 0", (long long)RS(0));
  for (int64_t i = 1; i < n; i++)
    if (RS(i) < RS(i - 1))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "row_splits[%lld] = %lld is less than row_splits[%lld] = %lld",
                             (long long)i, (long long)RS(i), (long long)(i - 1), (long long)RS(i - 1));
  int64_t nv = RS(n - 1);
  loom_tensor *out = *segment_ids;
  if (out && (loom_tensor_dtype(out) != dt || loom_tensor_numel(out) != nv)) {
    loom_tensor_free(out);
    out = NULL;
  }
  if (!out) {
    out = loom_tensor_new(dt, 1, &nv, st);
    if (!out) {
      *segment_ids = NULL;
      return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
    }
  } else if (loom_tensor_reshape(out, 1, &nv, st)) {
    return loom_status_code(st);
  }
  void *o = loom_tensor_data(out);
  for (int64_t r = 0; r + 1 < n; r++)
    for (int64_t i = RS(r); i < RS(r + 1); i++) {
      if (dt == LOOM_I32) ((int32_t *)o)[i] = (int32_t)r;
      else ((int64_t *)o)[i] = r;
    }
#undef RS
  *segment_ids = out;
  if (nrows) *nrows = n - 1;
  loom_status_clear(st);
  return LOOM_OK;
}
