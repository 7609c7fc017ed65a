/* train/variables.c - the graph side of variables (tf.get_variable,
 * tf.Variable): the training state attached to a graph (every variable
 * object, variable and output collections, variable scopes and reuse),
 * variable creation and import, the global step, and the
 * hooks through which the engine's graph serializer describes and
 * re-registers variables (engine/variable_api.h). The variable store that
 * sessions bind stays in the engine (engine/variables.c); initializers are
 * in train/initializers.c. */
#include <string.h>
#include <stdio.h>
#include <math.h>
#include "train/train_impl.h"

typedef struct vcoll {
  char *name;
  loom_variable **items;
  int n, cap;
} vcoll;
typedef struct ocoll {
  char *name;
  loom_output *items;
  int n, cap;
} ocoll;
typedef struct vscope {
  char *full;
  int reuse;
} vscope;

typedef struct train_state {
  loom_variable **vars; /* every variable object (owned) */
  int nvars, capvars;
  loom_variable dummy;
  vcoll *vcolls;
  int nvcolls, capvcolls;
  ocoll *ocolls;
  int nocolls, capocolls;
  vscope *scopes;
  int nscopes, capscopes;
} train_state;

static void variable_free(loom_variable *v) {
  if (!v) return;
  loom__free(v->name);
  loom__free(v);
}

static void ts_free(void *p) {
  train_state *ts = p;
  if (!ts) return;
  for (int i = 0; i < ts->nvars; i++) variable_free(ts->vars[i]);
  loom__free(ts->vars);
  for (int i = 0; i < ts->nvcolls; i++) {
    loom__free(ts->vcolls[i].name);
    loom__free(ts->vcolls[i].items);
  }
  loom__free(ts->vcolls);
  for (int i = 0; i < ts->nocolls; i++) {
    loom__free(ts->ocolls[i].name);
    loom__free(ts->ocolls[i].items);
  }
  loom__free(ts->ocolls);
  for (int i = 0; i < ts->nscopes; i++) loom__free(ts->scopes[i].full);
  loom__free(ts->scopes);
  loom__free(ts);
}

static train_state *ts_get(loom_graph *g) {
  if (!g) return NULL;
  train_state *cur = loom__graph_ext(g, LOOM__GRAPH_EXT_TRAIN);
  if (cur) return cur;
  train_state *ts = loom__calloc(1, sizeof *ts);
  if (!ts) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory creating the training state");
    return NULL;
  }
  ts->dummy.g = g;
  ts->dummy.name = NULL;
  ts->dummy.dtype = LOOM_F32;
  loom__graph_set_ext(g, LOOM__GRAPH_EXT_TRAIN, ts, ts_free);
  return ts;
}

loom_variable *loom__variable_dummy(loom_graph *g) {
  train_state *ts = ts_get(g);
  return ts ? &ts->dummy : NULL;
}

static int grow(void **arr, int *cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int nc = *cap ? *cap * 2 : 8;
  while (nc < need) nc *= 2;
  void *p = loom__realloc(*arr, (size_t)nc * elem);
  if (!p) return -1;
  *arr = p;
  *cap = nc;
  return 0;
}

static vcoll *vcoll_get(loom_graph *g, const char *name, int create) {
  train_state *ts = ts_get(g);
  if (!ts || !name) return NULL;
  for (int i = 0; i < ts->nvcolls; i++)
    if (!strcmp(ts->vcolls[i].name, name)) return &ts->vcolls[i];
  if (!create) return NULL;
  if (grow((void **)&ts->vcolls, &ts->capvcolls, ts->nvcolls + 1, sizeof *ts->vcolls)) return NULL;
  vcoll *c = &ts->vcolls[ts->nvcolls];
  memset(c, 0, sizeof *c);
  c->name = loom__strdup(name);
  if (!c->name) return NULL;
  ts->nvcolls++;
  return c;
}

static ocoll *ocoll_get(loom_graph *g, const char *name, int create) {
  train_state *ts = ts_get(g);
  if (!ts || !name) return NULL;
  for (int i = 0; i < ts->nocolls; i++)
    if (!strcmp(ts->ocolls[i].name, name)) return &ts->ocolls[i];
  if (!create) return NULL;
  if (grow((void **)&ts->ocolls, &ts->capocolls, ts->nocolls + 1, sizeof *ts->ocolls)) return NULL;
  ocoll *c = &ts->ocolls[ts->nocolls];
  memset(c, 0, sizeof *c);
  c->name = loom__strdup(name);
  if (!c->name) return NULL;
  ts->nocolls++;
  return c;
}

void loom_add_variable_to_collection(loom_graph *g, const char *collection, loom_variable *v) {
  if (!g || !v || !v->node) return;
  vcoll *c = vcoll_get(g, collection, 1);
  if (!c) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory adding to collection %s",
                         collection ? collection : "(null)");
    return;
  }
  for (int i = 0; i < c->n; i++)
    if (c->items[i] == v) return;
  if (grow((void **)&c->items, &c->cap, c->n + 1, sizeof *c->items)) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory adding to collection %s", collection);
    return;
  }
  c->items[c->n++] = v;
}

loom_variable *const *loom_get_variable_collection(loom_graph *g, const char *collection, int *n) {
  vcoll *c = loom__graph_ext(g, LOOM__GRAPH_EXT_TRAIN) ? vcoll_get(g, collection, 0) : NULL;
  if (n) *n = c ? c->n : 0;
  return c ? c->items : NULL;
}

void loom_add_to_collection(loom_graph *g, const char *collection, loom_output value) {
  if (!g || !value.node) return;
  ocoll *c = ocoll_get(g, collection, 1);
  if (!c || grow((void **)&c->items, &c->cap, c->n + 1, sizeof *c->items)) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory adding to collection %s",
                         collection ? collection : "(null)");
    return;
  }
  c->items[c->n++] = value;
}

void loom_add_node_to_collection(loom_graph *g, const char *collection, loom_node *node) {
  loom_output o = {node, 0};
  loom_add_to_collection(g, collection, o);
}

const loom_output *loom_get_collection(loom_graph *g, const char *collection, int *n) {
  ocoll *c = loom__graph_ext(g, LOOM__GRAPH_EXT_TRAIN) ? ocoll_get(g, collection, 0) : NULL;
  if (n) *n = c ? c->n : 0;
  return c ? c->items : NULL;
}

loom_variable *const *loom_global_variables(loom_graph *g, int *n) {
  return loom_get_variable_collection(g, LOOM_GLOBAL_VARIABLES, n);
}
loom_variable *const *loom_trainable_variables(loom_graph *g, int *n) {
  return loom_get_variable_collection(g, LOOM_TRAINABLE_VARIABLES, n);
}
loom_variable *const *loom_local_variables(loom_graph *g, int *n) {
  return loom_get_variable_collection(g, LOOM_LOCAL_VARIABLES, n);
}

/* ---- variable scopes ---- */
void loom_variable_scope_push(loom_graph *g, const char *name, int reuse) {
  train_state *ts = ts_get(g);
  if (!ts) return;
  if (!name || !*name) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "variable scope: empty name");
    return;
  }
  if (grow((void **)&ts->scopes, &ts->capscopes, ts->nscopes + 1, sizeof *ts->scopes)) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "variable scope %s: out of memory", name);
    return;
  }
  const char *parent = ts->nscopes ? ts->scopes[ts->nscopes - 1].full : "";
  int preuse = ts->nscopes ? ts->scopes[ts->nscopes - 1].reuse : LOOM_REUSE_NONE;
  size_t len = strlen(parent) + strlen(name) + 2;
  char *full = loom__malloc(len);
  if (!full) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "variable scope %s: out of memory", name);
    return;
  }
  snprintf(full, len, "%s%s%s", parent, *parent ? "/" : "", name);
  int eff = preuse == LOOM_REUSE_TRUE ? LOOM_REUSE_TRUE : (reuse != LOOM_REUSE_NONE ? reuse : preuse);
  ts->scopes[ts->nscopes].full = full;
  ts->scopes[ts->nscopes].reuse = eff;
  ts->nscopes++;
  loom_graph_push_scope(g, name); /* ops: "name", "name_1", ... like TF */
}

void loom_variable_scope_pop(loom_graph *g) {
  train_state *ts = loom__graph_ext(g, LOOM__GRAPH_EXT_TRAIN);
  if (!ts || !ts->nscopes) return;
  ts->nscopes--;
  loom__free(ts->scopes[ts->nscopes].full);
  loom_graph_pop_scope(g);
}

const char *loom_variable_scope_name(loom_graph *g) {
  train_state *ts = loom__graph_ext(g, LOOM__GRAPH_EXT_TRAIN);
  return ts && ts->nscopes ? ts->scopes[ts->nscopes - 1].full : "";
}

static int scope_reuse(loom_graph *g) {
  train_state *ts = loom__graph_ext(g, LOOM__GRAPH_EXT_TRAIN);
  return ts && ts->nscopes ? ts->scopes[ts->nscopes - 1].reuse : LOOM_REUSE_NONE;
}

/* ======================================================================
 * Variables
 * ====================================================================== */
loom_variable *loom__variable_create(loom_graph *g, const char *full_name, int unique, loom_dtype dtype, int ndim,
                                     const int64_t *dims, const loom_initializer *init, loom_output init_value,
                                     int trainable, uint32_t collections) {
  train_state *ts = ts_get(g);
  if (!ts || loom__train_failed(g)) return NULL;
  if (dtype <= 0 || dtype >= LOOM_DTYPE_COUNT || dtype == LOOM_STRING) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "Variable %s: unsupported dtype %s", full_name,
                         loom_dtype_name(dtype));
    return NULL;
  }
  if (ndim < 0 || ndim > LOOM_MAX_DIMS || (ndim && !dims)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "Variable %s: invalid rank %d", full_name, ndim);
    return NULL;
  }
  for (int i = 0; i < ndim; i++)
    if (dims[i] < 0) {
      char b[96];
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "Variable %s: the shape %s must be fully defined", full_name,
                           loom__dims_str(b, sizeof b, ndim, dims));
      return NULL;
    }
  if (!unique && loom_graph_find(g, full_name)) {
    loom_graph_set_error(g, LOOM_ALREADY_EXISTS, "Variable %s: a node with this name already exists", full_name);
    return NULL;
  }
  if (grow((void **)&ts->vars, &ts->capvars, ts->nvars + 1, sizeof *ts->vars)) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "Variable %s: out of memory", full_name);
    return NULL;
  }
  loom_variable *v = loom__calloc(1, sizeof *v);
  if (!v) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "Variable %s: out of memory", full_name);
    return NULL;
  }
  loom_root_scope rs;
  loom__root_scope_enter(g, &rs);
  loom_output var = loom_variable_v2(g, dtype, ndim, dims, full_name);
  loom_node *assign = NULL;
  loom_output iv = {NULL, 0};
  if (!loom__train_failed(g)) {
    loom_graph_push_scope_reuse(g, loom_node_name(var.node));
    if (init) {
      loom_graph_push_scope_reuse(g, "Initializer");
      iv = loom_initializer_build(g, init, dtype, ndim, dims, NULL);
      loom_graph_pop_scope(g);
    } else {
      iv = init_value;
    }
    loom_output a = loom_assign(g, var, iv, "Assign");
    assign = loom__train_failed(g) ? NULL : a.node;
    loom_graph_pop_scope(g);
  }
  loom__root_scope_leave(g, &rs);
  if (!assign) {
    loom__free(v);
    return NULL;
  }
  v->g = g;
  v->name = loom__strdup(loom_node_name(var.node));
  v->node = var.node;
  v->init = assign;
  v->init_value = iv;
  v->dtype = dtype;
  v->ndim = ndim;
  for (int i = 0; i < ndim; i++) v->dims[i] = dims[i];
  v->trainable = trainable != 0;
  if (!v->name) {
    loom__free(v);
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "Variable %s: out of memory", full_name);
    return NULL;
  }
  loom__node_set_resource(var.node, v);
  ts->vars[ts->nvars++] = v;
  if (!collections) collections = LOOM_COLL_GLOBAL;
  if (collections & LOOM_COLL_GLOBAL) loom_add_variable_to_collection(g, LOOM_GLOBAL_VARIABLES, v);
  if (collections & LOOM_COLL_LOCAL) loom_add_variable_to_collection(g, LOOM_LOCAL_VARIABLES, v);
  if (collections & LOOM_COLL_METRIC) loom_add_variable_to_collection(g, LOOM_METRIC_VARIABLES, v);
  if (collections & LOOM_COLL_MODEL) loom_add_variable_to_collection(g, LOOM_MODEL_VARIABLES, v);
  if (v->trainable) loom_add_variable_to_collection(g, LOOM_TRAINABLE_VARIABLES, v);
  return v;
}

static loom_variable *variable_import(loom_graph *g, loom_node *n, loom_node *init, int trainable,
                                      int from_get_variable, uint32_t collections, int global_step) {
  train_state *ts = ts_get(g);
  if (!ts || loom__train_failed(g)) return NULL;
  if (!n || loom__node_graph(n) != g || !loom__node_is_variable(n) || loom__node_resource(n)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "import: %s is not an unregistered variable node",
                         n ? loom_node_name(n) : "(null)");
    return NULL;
  }
  loom_variable *v = loom__calloc(1, sizeof *v);
  if (!v || grow((void **)&ts->vars, &ts->capvars, ts->nvars + 1, sizeof *ts->vars) ||
      !(v->name = loom__strdup(loom_node_name(n)))) {
    loom__free(v);
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "Variable %s: out of memory", loom_node_name(n));
    return NULL;
  }
  v->g = g;
  v->node = n;
  v->init = init;
  if (init && loom_node_num_inputs(init) > 1) v->init_value = loom_node_input(init, 1);
  loom_output o = loom_node_output(n, 0);
  v->dtype = loom_output_dtype(o);
  v->ndim = loom_output_dims(o, v->dims);
  v->trainable = trainable != 0;
  v->from_get_variable = from_get_variable != 0;
  loom__node_set_resource(n, v);
  ts->vars[ts->nvars++] = v;
  if (collections & LOOM_COLL_GLOBAL) loom_add_variable_to_collection(g, LOOM_GLOBAL_VARIABLES, v);
  if (collections & LOOM_COLL_LOCAL) loom_add_variable_to_collection(g, LOOM_LOCAL_VARIABLES, v);
  if (collections & LOOM_COLL_METRIC) loom_add_variable_to_collection(g, LOOM_METRIC_VARIABLES, v);
  if (collections & LOOM_COLL_MODEL) loom_add_variable_to_collection(g, LOOM_MODEL_VARIABLES, v);
  if (v->trainable) loom_add_variable_to_collection(g, LOOM_TRAINABLE_VARIABLES, v);
  if (global_step) loom_add_variable_to_collection(g, LOOM_GLOBAL_STEP, v);
  return v;
}

loom_variable *loom_graph_variable(loom_graph *g, const char *name) {
  loom_node *n = loom_graph_find(g, name);
  if (!loom__node_is_variable(n)) return NULL;
  return loom__node_resource(n);
}

static loom_variable *fail_var(loom_graph *g) { return loom__variable_dummy(g); }

loom_variable *loom_get_variable_ex(loom_graph *g, const char *name, loom_dtype dtype, int ndim, const int64_t *dims,
                                    const loom_initializer *initializer, int trainable, uint32_t collections) {
  if (!g) return NULL;
  if (!ts_get(g)) return NULL;
  if (loom__train_failed(g)) return fail_var(g);
  if (!name || !*name) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "get_variable: empty name");
    return fail_var(g);
  }
  const char *scope = loom_variable_scope_name(g);
  char full[1024];
  snprintf(full, sizeof full, "%s%s%s", scope, *scope ? "/" : "", name);
  int reuse = scope_reuse(g);
  loom_node *n = loom_graph_find(g, full);
  loom_variable *v = loom__node_is_variable(n) ? loom__node_resource(n) : NULL;
  if (v && v->from_get_variable) {
    if (reuse == LOOM_REUSE_NONE) {
      loom_graph_set_error(g, LOOM_ALREADY_EXISTS,
                           "Variable %s already exists, disallowed. Did you mean to set reuse=True or "
                           "reuse=tf.AUTO_REUSE in VarScope?",
                           full);
      return fail_var(g);
    }
    int ok = v->dtype == dtype && v->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = v->dims[i] == dims[i];
    if (!ok) {
      char b1[96], b2[96];
      if (v->dtype != dtype)
        loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                             "Trying to share variable %s, but specified dtype %s and found dtype %s.", full,
                             loom_dtype_name(dtype), loom_dtype_name(v->dtype));
      else
        loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                             "Trying to share variable %s, but specified shape %s and found shape %s.", full,
                             loom__dims_str(b1, sizeof b1, ndim, dims), loom__dims_str(b2, sizeof b2, v->ndim, v->dims));
      return fail_var(g);
    }
    return v;
  }
  if (reuse == LOOM_REUSE_TRUE) {
    loom_graph_set_error(g, LOOM_NOT_FOUND,
                         "Variable %s does not exist, or was not created with tf.get_variable(). Did you mean to "
                         "set reuse=tf.AUTO_REUSE in VarScope?",
                         full);
    return fail_var(g);
  }
  if (n) {
    loom_graph_set_error(g, LOOM_ALREADY_EXISTS,
                         "Variable %s already exists, disallowed (a node of the graph has this name).", full);
    return fail_var(g);
  }
  loom_initializer def = {0};
  def.kind = LOOM_INIT_DEFAULT;
  def.seed = LOOM_SEED_NONE;
  v = loom__variable_create(g, full, 0, dtype, ndim, dims, initializer ? initializer : &def, (loom_output){NULL, 0},
                            trainable, collections);
  if (!v) return fail_var(g);
  v->from_get_variable = 1;
  return v;
}

loom_variable *loom_get_variable(loom_graph *g, const char *name, loom_dtype dtype, int ndim, const int64_t *dims,
                                 const loom_initializer *initializer, int trainable) {
  return loom_get_variable_ex(g, name, dtype, ndim, dims, initializer, trainable, LOOM_COLL_GLOBAL);
}

loom_variable *loom_variable_new(loom_graph *g, loom_output initial_value, int trainable, uint32_t collections,
                                 const char *name) {
  if (!g) return NULL;
  if (!ts_get(g)) return NULL;
  if (loom__train_failed(g)) return fail_var(g);
  if (!loom_output_valid(initial_value) || loom__node_graph(initial_value.node) != g) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "Variable %s: invalid initial value", name ? name : "Variable");
    return fail_var(g);
  }
  loom_dtype idt = loom_output_dtype(initial_value);
  int64_t idims[LOOM_MAX_DIMS];
  int indim = loom_output_dims(initial_value, idims);
  /* the name is made unique under the current name scope, like tf.Variable */
  char *full = loom__graph_unique_name(g, name && *name ? name : "Variable");
  if (!full) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "Variable: out of memory");
    return fail_var(g);
  }
  loom_variable *v = loom__variable_create(g, full, 0, idt, indim, idims, NULL, initial_value, trainable,
                                           collections);
  loom__free(full);
  return v ? v : fail_var(g);
}

loom_output loom_variable_output(const loom_variable *v) {
  if (!v) return (loom_output){NULL, 0};
  if (!v->node) return loom__graph_dummy(v->g);
  return (loom_output){v->node, 0};
}
loom_node *loom_variable_node(const loom_variable *v) { return v ? v->node : NULL; }
const char *loom_variable_name(const loom_variable *v) { return v && v->name ? v->name : ""; }
loom_dtype loom_variable_dtype(const loom_variable *v) { return v ? v->dtype : LOOM_DTYPE_INVALID; }
int loom_variable_dims(const loom_variable *v, int64_t *dims) {
  if (!v) return 0;
  for (int i = 0; dims && i < v->ndim; i++) dims[i] = v->dims[i];
  return v->ndim;
}
int loom_variable_trainable(const loom_variable *v) { return v ? v->trainable : 0; }
loom_node *loom_variable_initializer_node(const loom_variable *v) { return v ? v->init : NULL; }
loom_output loom_variable_initial_value(const loom_variable *v) {
  if (!v) return (loom_output){NULL, 0};
  if (!v->node) return loom__graph_dummy(v->g);
  return v->init_value;
}

loom_node *loom_variables_initializer(loom_graph *g, int n, loom_variable *const *vars, const char *name) {
  if (!g) return NULL;
  loom_node **deps = loom__malloc(sizeof *deps * (size_t)(n > 0 ? n : 1));
  if (!deps) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "variables_initializer: out of memory");
    return NULL;
  }
  int k = 0;
  for (int i = 0; i < n; i++)
    if (vars && vars[i] && vars[i]->init) deps[k++] = vars[i]->init;
  loom_node *r = loom_group(g, k, deps, name ? name : "init");
  loom__free(deps);
  return r;
}

loom_node *loom_global_variables_initializer(loom_graph *g) {
  int n = 0;
  loom_variable *const *v = loom_global_variables(g, &n);
  return loom_variables_initializer(g, n, v, "init");
}

loom_node *loom_local_variables_initializer(loom_graph *g) {
  int n = 0;
  loom_variable *const *v = loom_local_variables(g, &n);
  return loom_variables_initializer(g, n, v, "init");
}

loom_variable *loom_get_global_step(loom_graph *g) {
  int n = 0;
  loom_variable *const *v = loom_get_variable_collection(g, LOOM_GLOBAL_STEP, &n);
  return n > 0 ? v[0] : NULL;
}

loom_variable *loom_get_or_create_global_step(loom_graph *g) {
  if (!g) return NULL;
  loom_variable *v = loom_get_global_step(g);
  if (v) return v;
  if (!ts_get(g)) return NULL;
  if (loom__train_failed(g)) return fail_var(g);
  if (loom_graph_find(g, "global_step")) {
    loom_graph_set_error(g, LOOM_ALREADY_EXISTS,
                         "global_step: a node named global_step exists but is not the global step");
    return fail_var(g);
  }
  loom_initializer z = loom_init_zeros();
  v = loom__variable_create(g, "global_step", 0, LOOM_I64, 0, NULL, &z, (loom_output){NULL, 0}, 0, LOOM_COLL_GLOBAL);
  if (!v) return fail_var(g);
  v->from_get_variable = 1;
  loom_add_variable_to_collection(g, LOOM_GLOBAL_STEP, v);
  return v;
}

/* ---- the graph serializer's view (engine/variable_api.h) ---- */
static int in_var_coll(loom_graph *g, const char *coll, const loom_variable *v) {
  int k = 0;
  loom_variable *const *list = loom_get_variable_collection(g, coll, &k);
  for (int i = 0; i < k; i++)
    if (list[i] == v) return 1;
  return 0;
}

static uint32_t var_describe(loom_graph *g, const loom_node *n, loom_node **init) {
  const loom_variable *v = loom__node_resource(n);
  *init = NULL;
  if (!v) return 0;
  uint32_t f = LOOM_VARMETA_VAR;
  if (v->trainable) f |= LOOM_VARMETA_TRAINABLE;
  if (v->from_get_variable) f |= LOOM_VARMETA_GET_VARIABLE;
  if (in_var_coll(g, LOOM_GLOBAL_VARIABLES, v)) f |= LOOM_VARMETA_GLOBAL;
  if (in_var_coll(g, LOOM_LOCAL_VARIABLES, v)) f |= LOOM_VARMETA_LOCAL;
  if (in_var_coll(g, LOOM_METRIC_VARIABLES, v)) f |= LOOM_VARMETA_METRIC;
  if (in_var_coll(g, LOOM_MODEL_VARIABLES, v)) f |= LOOM_VARMETA_MODEL;
  if (in_var_coll(g, LOOM_GLOBAL_STEP, v)) f |= LOOM_VARMETA_GLOBAL_STEP;
  *init = v->init;
  return f;
}

/* Raw variables too (meta 0): no collections, not trainable. */
static int var_import(loom_graph *g, loom_node *n, loom_node *init, uint32_t m) {
  uint32_t coll = 0;
  if (m & LOOM_VARMETA_GLOBAL) coll |= LOOM_COLL_GLOBAL;
  if (m & LOOM_VARMETA_LOCAL) coll |= LOOM_COLL_LOCAL;
  if (m & LOOM_VARMETA_METRIC) coll |= LOOM_COLL_METRIC;
  if (m & LOOM_VARMETA_MODEL) coll |= LOOM_COLL_MODEL;
  return variable_import(g, n, init, (m & LOOM_VARMETA_TRAINABLE) != 0, (m & LOOM_VARMETA_GET_VARIABLE) != 0, coll,
                         (m & LOOM_VARMETA_GLOBAL_STEP) != 0)
             ? 0
             : -1;
}

/* Installed before main, like the op table (ops/registry_init.c); allocates nothing. */
__attribute__((constructor)) static void var_hooks_register(void) {
  static const loom_graph_var_hooks hooks = {var_describe, var_import};
  loom__graph_var_hooks_install(&hooks);
}
