/* train/train_impl.h - internal to train/: the graph side of variables
 * (tf.get_variable, scopes, collections, initializers), shared by the
 * variables, optimizers and the saver. train/ sees the engine only through
 * the public API, engine/engine_api.h and engine/variable_api.h. */
#ifndef LOOM_TRAIN_IMPL_H
#define LOOM_TRAIN_IMPL_H
#include "base/base.h"
#include "engine/variable_api.h"
#include "loom/loom.h"

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

/* Whether g holds a sticky error (g not NULL). */
static inline int loom__train_failed(const loom_graph *g) { return loom_graph_status(g, NULL) != LOOM_OK; }

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
/* The dummy variable handed out after an error (its output is the graph's
 * dummy output). */
loom_variable *loom__variable_dummy(loom_graph *g);

#endif
