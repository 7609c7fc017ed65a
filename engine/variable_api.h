/* engine/variable_api.h - what the graph side of variables (train/:
 * tf.get_variable, scopes, collections, initializers, optimizers, the saver)
 * needs from the engine beyond the public API and engine_api.h. Not
 * installed; no struct internals. The engine's variable *store* (what a
 * session binds) stays in engine/variables.c. */
#ifndef LOOM_VARIABLE_API_H
#define LOOM_VARIABLE_API_H
#include <stdint.h>
#include "engine/engine_api.h"
#include "loom/loom_session.h"

/* Whether n is a variable node (its op's definition has LOOM_OPF_VARIABLE: VariableV2). */
int loom__node_is_variable(const loom_node *n);
/* The graph-side object of a variable node (attrs.resource; NULL when none). */
void *loom__node_resource(const loom_node *n);
void loom__node_set_resource(loom_node *n, void *r);
loom_graph *loom__node_graph(const loom_node *n);
/* Unique full name for a new node under the current scope. Caller frees. */
char *loom__graph_unique_name(loom_graph *g, const char *base);
/* The variable node a ref output refers to (through in-place ops and pure
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

/* The session's variable store as layers above the engine reach it (no store internals): the
 * buffer that backs the graph's variable `name` in s (created from its VariableV2 node when the store
 * has no entry yet; *numel elements of the variable's dtype, 64-byte aligned, never moved while the
 * session lives). NULL with NOT_FOUND when the graph has no such variable. A buffer written from
 * outside a run (a parameter-server pull) is marked initialised with loom__session_var_mark_initialized;
 * loom_session_variable_initialized (public) tells whether it is. */
void *loom__session_var_buffer(loom_session *s, const char *name, int64_t *numel, loom_status *st);
void loom__session_var_mark_initialized(loom_session *s, const char *name);
/* 1 when s's variables live in host memory (a CPU session), 0 for a device session (NULL: 0). */
int loom__session_vars_on_host(const loom_session *s);

/* A graph variable's metadata as loom_graph_serialize stores it (bits of
 * the record's variable word; the file format, do not renumber). */
enum {
  LOOM_VARMETA_VAR = 1u << 0,          /* the node has a graph-side variable */
  LOOM_VARMETA_TRAINABLE = 1u << 1,
  LOOM_VARMETA_GET_VARIABLE = 1u << 2, /* made by get_variable */
  LOOM_VARMETA_GLOBAL = 1u << 3,       /* in GLOBAL_VARIABLES */
  LOOM_VARMETA_LOCAL = 1u << 4,
  LOOM_VARMETA_METRIC = 1u << 5,
  LOOM_VARMETA_MODEL = 1u << 6,
  LOOM_VARMETA_GLOBAL_STEP = 1u << 7,
  LOOM_VARMETA_ALL = (1u << 8) - 1
};
/* How the graph's serializer reaches the graph side of variables, which
 * lives above the engine: train/ installs these before main. Without them
 * variables serialize as raw VariableV2 nodes. */
typedef struct loom_graph_var_hooks {
  /* The LOOM_VARMETA_* bits of variable node n (0: no graph-side variable)
   * and its initializer node (*init, NULL when none). */
  uint32_t (*describe)(loom_graph *g, const loom_node *n, loom_node **init);
  /* Registers the imported variable node n (initializer init or NULL) with
   * the bits of describe. Sticky graph errors; nonzero on failure. */
  int (*import)(loom_graph *g, loom_node *n, loom_node *init, uint32_t meta);
} loom_graph_var_hooks;
void loom__graph_var_hooks_install(const loom_graph_var_hooks *h);
const loom_graph_var_hooks *loom__graph_var_hooks(void);

/* A saver of the named variables of g (engine/checkpoint.c); loom_saver_new
 * (train/saver.c) resolves its variable list into names. */
struct loom_saver;
struct loom_saver *loom__saver_new_names(loom_graph *g, int n, const char *const *names, int keep_max,
                                         loom_status *st);

#endif
