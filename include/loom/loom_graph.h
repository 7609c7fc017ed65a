/* loom_graph.h - the dataflow graph builder.
 *
 * A graph owns its nodes. Builders (loom_math.h, loom_array.h, loom_nn.h, ...)
 * add one node each and return a loom_output. Building uses a *sticky first
 * error*: when a builder fails (bad shape, wrong dtype, invalid input) the graph
 * records the first error, prefixed with the node's name, and the builder
 * returns a harmless placeholder output so model code can read as straight
 * lines; check loom_graph_status() once at the end.
 *
 * Thread safety: one thread builds a graph at a time. Sessions may read a graph
 * while it is being extended only from the building thread.
 */
#ifndef LOOM_GRAPH_H
#define LOOM_GRAPH_H

#include "loom_base.h"
#include "loom_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_graph loom_graph;
typedef struct loom_node loom_node;

/* One output of one node. {NULL, 0} is the "no output" value. */
typedef struct loom_output {
  loom_node *node;
  int32_t index;
} loom_output;

/* An empty graph; NULL when out of memory. Caller frees with loom_graph_free. */
LOOM_API loom_graph *loom_graph_new(void);
/* Frees the graph and every node. Sessions created on it must be freed first. */
LOOM_API void loom_graph_free(loom_graph *g);

/* The first building error (LOOM_OK if none); copies it into st. */
LOOM_API loom_code loom_graph_status(const loom_graph *g, loom_status *st);
/* Records an error as if a builder had failed (first one wins). Returns code. */
LOOM_API loom_code loom_graph_set_error(loom_graph *g, loom_code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Name scopes: nodes built between push and pop get "scope/" prefixes.
 * Scope names are made unique like TF ("dense", "dense_1", ...) unless
 * reuse != 0, which re-enters the scope with the same name. */
LOOM_API void loom_graph_push_scope(loom_graph *g, const char *name);
LOOM_API void loom_graph_push_scope_reuse(loom_graph *g, const char *name);
LOOM_API void loom_graph_pop_scope(loom_graph *g);
/* Current full scope prefix ("" at top level, else "a/b"). Owned by g;
 * valid until the next push or pop of a name scope or loom_graph_free (""
 * is a static string). */
LOOM_API const char *loom_graph_scope(const loom_graph *g);

/* Control dependencies: every node built while a control scope is pushed gets
 * these nodes as control inputs (TF's control_dependencies). */
LOOM_API void loom_graph_push_control_deps(loom_graph *g, int n, loom_node *const *deps);
LOOM_API void loom_graph_pop_control_deps(loom_graph *g);

LOOM_API int loom_graph_num_nodes(const loom_graph *g);
/* Nodes in creation order (which is a topological order); NULL when i is out
 * of range. Nodes are owned by g; valid until loom_graph_free. */
LOOM_API loom_node *loom_graph_node_at(const loom_graph *g, int i);
/* Full name lookup; NULL when absent. Owned by g; valid until loom_graph_free. */
LOOM_API loom_node *loom_graph_find(const loom_graph *g, const char *name);
/* "name" or "name:1" -> output; {NULL,0} when absent. */
LOOM_API loom_output loom_graph_find_output(const loom_graph *g, const char *name);

/* Owned by n's graph; valid until loom_graph_free ("" for n NULL: static). */
LOOM_API const char *loom_node_name(const loom_node *n);
/* The op's TF-style name, e.g. "MatMul". Static string (the op registry's;
 * "" for n NULL). */
LOOM_API const char *loom_node_op_name(const loom_node *n);
LOOM_API int loom_node_num_inputs(const loom_node *n);
LOOM_API loom_output loom_node_input(const loom_node *n, int i);
LOOM_API int loom_node_num_outputs(const loom_node *n);
LOOM_API loom_output loom_node_output(loom_node *n, int i);
LOOM_API int loom_node_id(const loom_node *n);
LOOM_API void loom_node_add_control_input(loom_node *n, loom_node *dep);

/* Static (build-time) type of an output; dims of -1 are unknown. */
LOOM_API loom_dtype loom_output_dtype(loom_output o);
LOOM_API int loom_output_ndim(loom_output o);
/* Copies ndim dims into dims (capacity LOOM_MAX_DIMS); returns ndim. */
LOOM_API int loom_output_dims(loom_output o, int64_t *dims);
LOOM_API int loom_output_valid(loom_output o);

/* Graph-level random seed (tf.compat.v1.set_random_seed). */
LOOM_API void loom_graph_set_random_seed(loom_graph *g, int64_t seed);
/* Resolves (graph seed, op seed) with TF's rules into the pair a random op
 * uses; has_op_seed = 0 means no op seed. Returns 1 when the result is
 * deterministic (some seed was set), 0 when it was drawn at random. */
LOOM_API int loom_graph_get_seed(loom_graph *g, int64_t op_seed, int has_op_seed, int64_t *seed, int64_t *seed2);

/* ---- sources ---- */
/* A value fed at run time. dims may contain -1 (unknown, e.g. the batch). */
LOOM_API loom_output loom_placeholder(loom_graph *g, loom_dtype dt, int ndim, const int64_t *dims, const char *name);
/* A constant; `value` is copied. */
LOOM_API loom_output loom_const(loom_graph *g, const loom_tensor *value, const char *name);
LOOM_API loom_output loom_const_f32(loom_graph *g, float v, const char *name);
LOOM_API loom_output loom_const_i32(loom_graph *g, int32_t v, const char *name);
LOOM_API loom_output loom_const_i64(loom_graph *g, int64_t v, const char *name);
/* A constant of numel(dims) elements of dt copied from data. */
LOOM_API loom_output loom_const_data(loom_graph *g, loom_dtype dt, int ndim, const int64_t *dims, const void *data,
                                     const char *name);
/* A node that does nothing but depends (control) on deps; use it as a run
 * target. Owned by g; valid until loom_graph_free (sticky rule: a failed
 * build records the error in g and may return NULL). */
LOOM_API loom_node *loom_group(loom_graph *g, int n, loom_node *const *deps, const char *name);
LOOM_API loom_output loom_identity(loom_graph *g, loom_output x, const char *name);

#ifdef __cplusplus
}
#endif
#endif
