/* engine/variables.h - internal: the session's variable store and the
 * graph-side training state (variables, variable scopes, collections).
 *
 * The store is an object behind a small vtable so that something other than
 * local memory (a parameter-server client) can back variables later: it
 * must hand out stable, 64-byte aligned host buffers (bound into plans at
 * specialization) and may synchronise them around runs (before_run /
 * after_run). */
#ifndef LOOM_VARIABLES_H
#define LOOM_VARIABLES_H
#include "engine/session_impl.h"
#include "loom/loom_train.h"

typedef struct loom_var_entry {
  char *name;
  loom_dtype dtype;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  int64_t numel;
  size_t nbytes;
  void *data;          /* 64-byte aligned, never moves while the session lives */
  int32_t initialized; /* set by Assign, restore, loom_session_assign_variable */
} loom_var_entry;

typedef struct loom_var_store loom_var_store;
typedef struct loom_var_store_ops {
  /* NULL when absent. */
  loom_var_entry *(*lookup)(loom_var_store *vs, const char *name);
  /* A new zero-filled, uninitialised entry (name must be absent). */
  loom_var_entry *(*create)(loom_var_store *vs, const char *name, loom_dtype dt, int ndim, const int64_t *dims,
                            loom_status *st);
  int64_t (*count)(loom_var_store *vs);
  loom_var_entry *(*at)(loom_var_store *vs, int64_t i);
  /* Optional (NULL for local memory): called around every run. */
  loom_code (*before_run)(loom_var_store *vs, loom_session *s, const loom_plan *p, loom_status *st);
  loom_code (*after_run)(loom_var_store *vs, loom_session *s, const loom_plan *p, loom_status *st);
  void (*destroy)(loom_var_store *vs);
} loom_var_store_ops;

struct loom_var_store {
  const loom_var_store_ops *ops;
  int64_t n_uninit; /* entries with initialized == 0 (the run check is free when 0) */
};

/* The session's store, created (local memory) on first use; NULL only when
 * out of memory (st says so). */
loom_var_store *loom__var_store(loom_session *s, loom_status *st);
/* Replaces the session's store (before any run). Takes ownership. */
void loom__var_store_install(loom_session *s, loom_var_store *vs);
void loom__var_mark_initialized(loom_var_store *vs, loom_var_entry *e);
/* The entry of the graph's variable `name`, created from the graph's
 * VariableV2 node when missing. NOT_FOUND when g has no such variable. */
loom_var_entry *loom__var_entry(loom_session *s, const char *name, loom_status *st);
/* VariableV2's bind function. */
loom_code loom__var_bind(struct loom_session *s, const loom_node *n, loom_buf *out, loom_status *st);

/* ---- graph side ---- */
struct loom_variable {
  loom_graph *g;
  char *name;
  loom_node *node;      /* VariableV2 */
  loom_node *init;      /* "<name>/Assign" */
  loom_output init_value;
  loom_dtype dtype;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  int32_t trainable;
  int32_t from_get_variable;
};

/* Creates a variable named exactly `full_name` (unique=0: must be free) or
 * uniquified under the root (unique=1), with its initial value built by
 * init (or given by init_value when init is NULL), in the given collections
 * (LOOM_COLL_* bits) and TRAINABLE_VARIABLES when trainable. The variable
 * node, its initializer subgraph and its Assign are built at the root name
 * scope with no control dependencies (TF's init_scope). Sticky errors; NULL
 * on failure. */
loom_variable *loom__variable_create(loom_graph *g, const char *full_name, int unique, loom_dtype dtype, int ndim,
                                     const int64_t *dims, const loom_initializer *init, loom_output init_value,
                                     int trainable, uint32_t collections);
/* Registers an imported VariableV2 node n (loom_graph_deserialize) as a
 * graph variable, as if it had been created here: init (its "<name>/Assign"
 * node, or NULL: no initializer) and the initial value init's input 1,
 * trainable, from_get_variable, and the collections (LOOM_COLL_* bits, plus
 * TRAINABLE_VARIABLES when trainable; global_step adds it to GLOBAL_STEP).
 * Sticky errors; NULL on failure. */
loom_variable *loom__variable_import(loom_graph *g, loom_node *n, loom_node *init, int trainable,
                                     int from_get_variable, uint32_t collections, int global_step);
/* The dummy variable handed out after an error (its output is the graph's
 * dummy output). */
loom_variable *loom__variable_dummy(loom_graph *g);
/* The VariableV2 node a ref output refers to (through in-place ops and pure
 * views), or NULL. */
const loom_node *loom__ref_root(loom_output ref);

/* Enters the root name scope with no control dependencies; leave with
 * loom__root_scope_leave (restores both). */
typedef struct loom_root_scope {
  char **scopes;
  int32_t nscopes, capscopes;
  char *scope_str;
  int32_t nctrl;
} loom_root_scope;
void loom__root_scope_enter(loom_graph *g, loom_root_scope *sv);
void loom__root_scope_leave(loom_graph *g, loom_root_scope *sv);

#endif
