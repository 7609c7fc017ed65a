/* engine/engine_impl.h - internal structures of the engine. Not installed. */
#ifndef LOOM_ENGINE_IMPL_H
#define LOOM_ENGINE_IMPL_H

#include <stdarg.h>
#include <stdbool.h>
#include "loom/loom_base.h"
#include "loom/loom_tensor.h"
#include "loom/loom_graph.h"
#include "loom/loom_session.h"
#include "loom/loom_autodiff.h"
#include "base/base.h"
#include "engine/engine_api.h" /* what the layers above may use */
#include "kernels/kernel.h"

/* ---- tensors (engine/tensor.c) ---- */
struct loom_tensor {
  loom_dtype dtype;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  int64_t numel;
  size_t nbytes;
  void *data;            /* for STRING: loom_tstring[numel] */
  loom_deallocator dealloc;
  void *dealloc_arg;
  int owned;             /* data from loom__aligned_alloc */
  char *sarena;          /* STRING: bytes that elements may point into (loom__tensor_set_strings); */
  size_t sarena_cap;     /* such elements are not freed one by one */
};
/* Copies n = t->numel strings (src[i]; ptr NULL is "") into owned string
 * tensor t's string block, each NUL-terminated; the block is reused when
 * big enough (a steady run's fetch allocates nothing). engine/tensor.c */
loom_code loom__tensor_copy_strings(loom_tensor *t, const loom_tstring *src, loom_status *st);

/* ---- op definitions and registry (engine/registry.c) ---- */
typedef struct loom_shape_ctx {
  const loom_attrs *attrs;
  int32_t nin;
  const loom_tdesc *in;
  const loom_tensor *const *in_value; /* constant value of input i when known, else NULL */
  int32_t nout;          /* capacity on entry (node's output count); shape fn fills out[0..nout) */
  loom_tdesc *out;
  char msg[256];         /* failure message (without node name) */
} loom_shape_ctx;
typedef loom_code (*loom_shape_fn)(loom_shape_ctx *c);
/* Scratch bytes for one call given concrete shapes. */
typedef size_t (*loom_workspace_fn)(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                    const loom_buf *const *out);
/* Gradient builder: dy[i] is the dense gradient flowing into output i
 * ({NULL,0} if none); fills dx[i] for each input (values {NULL,0} = no
 * gradient; indices set = sparse rows, see loom_autodiff.h). Builds with
 * ordinary builders into n's graph; errors go to the graph's sticky status. */
typedef loom_code (*loom_grad_fn)(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx);
/* Data-dependent output shapes (ops flagged LOOM_OPF_DATA_SHAPE): fills
 * out[0..nout) (dtype, ndim, dims) from the input VALUES, host buffers
 * in[0..nin) (strings as loom_tstring). Writes a failure message (without
 * the node name) into msg. Such an op's static shape fn gives -1 for the
 * dims it cannot know when building. */
typedef loom_code (*loom_value_shape_fn)(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                         loom_tdesc *out, char *msg, size_t msglen);
struct loom_session;
/* For source ops whose output memory lives outside the arena (Const,
 * variables): set out->data (shape is already filled). */
typedef loom_code (*loom_bind_fn)(struct loom_session *s, const loom_node *n, loom_buf *out, loom_status *st);

enum {
  LOOM_OPF_ALIAS0 = 1u << 0,      /* output 0 is a view of input 0 (same bytes, new shape): no kernel,
                                     unless MUTATES_INPUT0 is set too (then the kernel runs in place) */
  LOOM_OPF_STATEFUL = 1u << 1,    /* never pruned as duplicate/constant; has side effects or randomness */
  LOOM_OPF_NODIFF = 1u << 2,      /* explicitly not differentiable */
  LOOM_OPF_FEED_ONLY = 1u << 3,   /* Placeholder: must be fed */
  LOOM_OPF_MUTATES_INPUT0 = 1u << 4, /* writes its input 0 in place (assign ops) */
  LOOM_OPF_INPLACE_OK = 1u << 5,  /* output 0 may reuse input 0's buffer when it dies here */
  LOOM_OPF_KEY_OUTPUT = 1u << 6,  /* kernel table keyed by output 0's dtype, not input 0's */
  /* What the engine must know about a few ops, said by their definitions
   * (the engine never tests op ids; see DESIGN.md "Layers"): */
  LOOM_OPF_CONST = 1u << 7,       /* Const: output 0 is the node's constant payload (node->value), serialised
                                     with the graph and uploaded once per device plan */
  LOOM_OPF_VARIABLE = 1u << 8,    /* VariableV2: output 0 is a variable's buffer in the session's variable
                                     store (bound by name); attrs.resource holds the graph-side variable */
  LOOM_OPF_ASSIGN = 1u << 9,      /* Assign: overwrites its whole input 0 (a ref) with input 1, so it does not
                                     read input 0, a run of it initialises that variable, and a variable's
                                     initializer is one of these */
  LOOM_OPF_EMPTY_OK = 1u << 10,   /* variadic op that may have no data input at all (NoOp) */
  /* Output shape depends on the input values (ragged ops: dropping ignore
   * values, crosses, pruning): def->value_shape gives it. Such a node and
   * everything it depends on must be computable from feeds and constants
   * (never from variables); a session evaluates that part of the graph on
   * the host with CPU kernels before planning the rest, each run, and feeds
   * its results to the plan (engine/host_pass.c). */
  LOOM_OPF_DATA_SHAPE = 1u << 11,
  /* The CPU kernel honours ctx->epi (kernels/kernel.h): a BiasAdd, Relu and
   * 2x2 stride-2 MaxPool that follow it (Conv2D), a ReluGrad that follows it
   * (MaxPoolGrad); the planner folds those steps into it (engine/fuse.c). */
  LOOM_OPF_EPI_BIAS_RELU = 1u << 12,
  LOOM_OPF_EPI_MASK = 1u << 13,
  /* The CPU kernel (BiasAddGrad) adds up the per-image column sums of its
   * input that the MaxPoolGrad making it left in ctx->epi->colsum. */
  LOOM_OPF_EPI_COLSUM = 1u << 14,
};

enum { LOOM_DEVICE_COUNT = 2 };

typedef struct loom_op_def {
  const char *name;      /* TF-style name (ops/ sets it from its op list) */
  int32_t nin;           /* -1 = variadic (>= 1) */
  int32_t nout;          /* -1 = set by the builder (Split, Unstack) */
  loom_shape_fn shape;
  loom_value_shape_fn value_shape; /* LOOM_OPF_DATA_SHAPE ops only */
  loom_workspace_fn workspace;
  loom_bind_fn bind;
  loom_grad_fn grad;
  uint32_t nondiff_inputs; /* bit i: input i gets no gradient (indices, labels) */
  uint32_t flags;
  /* bit i: the kernel writes input i in place (optimizers: the variable and
   * its slots). MUTATES_INPUT0 alone means bit 0; see loom__op_mutates. */
  uint32_t mutated_inputs;
  loom_kernel_fn kernels[LOOM_DEVICE_COUNT][LOOM_DTYPE_COUNT];
} loom_op_def;

/* Whether input k of op d gets no gradient: its bit in nondiff_inputs; past
 * bit 31 (variadic ops such as Concat) only when every input is nondiff. */
static inline int loom__op_nondiff(const loom_op_def *d, int k) {
  return k < 32 ? (int)((d->nondiff_inputs >> k) & 1u) : d->nondiff_inputs == 0xffffffffu;
}

/* Whether op d writes its input j in place (mutated_inputs bit j; bit 0 also by MUTATES_INPUT0). */
static inline int loom__op_mutates(const loom_op_def *d, int j) {
  uint32_t m = d->mutated_inputs | ((d->flags & LOOM_OPF_MUTATES_INPUT0) ? 1u : 0u);
  return j < 32 && ((m >> j) & 1u);
}

/* The op registry (engine/registry.c). The engine owns no op: ops/ owns the
 * table (indexed by its op ids) and installs it once, before main, from a
 * static initializer (ops/registry_init.c); the engine only looks ops up.
 * Installing allocates nothing. Before an install the registry is empty:
 * count 0, every lookup NULL / -1, and graph building fails with
 * FAILED_PRECONDITION (loom__registry_error). */
void loom__registry_install(loom_op_def *table, int count);
/* The installed table (NULL before an install); backends put their kernels
 * into its device slots (loom_backend_i.register_kernels). */
loom_op_def *loom__op_table(void);
int loom__op_count(void);
/* The definition of op id `op`, NULL when out of range or nothing is installed. */
const loom_op_def *loom__op_def(int op);
/* The id of the op named `name` (TF name), -1 when unknown. */
int loom__op_find(const char *name);
/* The first op whose definition has all of `flags` (e.g. LOOM_OPF_FEED_ONLY), -1 when none. */
int loom__op_with_flags(uint32_t flags);
/* The message for a lookup in an empty registry. */
const char *loom__registry_error(void);

/* ---- graph (engine/graph.c) ---- */
struct loom_node {
  loom_graph *graph;
  int32_t id;
  int32_t op;
  const loom_op_def *def;
  char *name;
  int32_t nin;
  loom_output *in;
  int32_t nctrl, capctrl;
  loom_node **ctrl;
  int32_t nout;
  loom_tdesc *out;
  loom_attrs attrs;
  loom_tensor *value;    /* Const payload (attrs.value points here) */
};

struct loom_graph {
  loom_node **nodes;
  int32_t nnodes, capnodes;
  /* name -> node hash (open addressing on name) */
  loom_node **htab;
  int64_t hcap;
  /* scope stack */
  char **scopes;
  int32_t nscopes, capscopes;
  char *scope_str;
  /* control dependency stack */
  loom_node ***ctrl_stack;
  int32_t *ctrl_counts;
  int32_t nctrl_stack, capctrl_stack;
  /* sticky error */
  loom_code err_code;
  char *err_msg;
  /* graph-level random seed (TF's tf.set_random_seed): has_seed, seed;
   * op seeds drawn from it are counted by next_op_seed */
  int32_t has_seed;
  int64_t seed;
  int64_t next_op_seed;
  /* attached data owned by higher layers, one slot each (LOOM__GRAPH_EXT_*, engine_api.h), freed with the graph */
  void *ext[LOOM__GRAPH_EXT_COUNT];
  void (*ext_free[LOOM__GRAPH_EXT_COUNT])(void *);
  /* placeholder output returned after an error */
  loom_node *dummy;
};

/* Adds a node. inputs are checked (same graph, valid index), the shape fn is
 * run, the name is made unique under the current scope. On failure records
 * the sticky error and returns NULL (builders then return a dummy output).
 * `attrs` is copied (may be NULL). nout < 0 -> def->nout. */
loom_node *loom__graph_add(loom_graph *g, int op, const char *name, const char *default_name, int nin,
                           const loom_output *in, const loom_attrs *attrs, int nout);
/* Builder helper: node -> output 0, or the dummy when node is NULL. */
loom_output loom__out0(loom_graph *g, loom_node *n);
int loom__graph_failed(const loom_graph *g);
/* Unique full name for a new node under the current scope. Caller frees. */
char *loom__graph_unique_name(loom_graph *g, const char *base);

/* Broadcast helper shared by shape functions and kernels: result of NumPy
 * broadcasting a and b (-1 unknown allowed). Returns 0 on mismatch. */
int loom__broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out);

#endif
