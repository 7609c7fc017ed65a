/* Variables: the session's variable store (local memory behind a vtable),
 * the per-run uninitialised-read check, session-side read/assign, and the
 * graph side of tf.get_variable: variable scopes, collections, initializers,
 * the global step. */
#include <string.h>
#include <stdio.h>
#include <math.h>
#include "engine/variables.h"
#include "engine/backend.h"
#include "ops/op_list.h"
#include "loom/loom_random.h"
#include "loom/loom_array.h"

/* ======================================================================
 * Local-memory store: entries in an array + an open-addressing name hash.
 * ====================================================================== */
typedef struct local_store {
  loom_var_store base;
  loom_var_entry **items;
  int64_t n, cap;
  loom_var_entry **htab;
  int64_t hcap;
} local_store;

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

static loom_var_entry *ls_lookup(loom_var_store *vs, const char *name) {
  local_store *ls = (local_store *)vs;
  if (!ls->hcap || !name) return NULL;
  uint64_t m = (uint64_t)ls->hcap - 1, h = name_hash(name) & m;
  while (ls->htab[h]) {
    if (!strcmp(ls->htab[h]->name, name)) return ls->htab[h];
    h = (h + 1) & m;
  }
  return NULL;
}

static int ls_hput(loom_var_entry **tab, int64_t cap, loom_var_entry *e) {
  uint64_t m = (uint64_t)cap - 1, h = name_hash(e->name) & m;
  while (tab[h]) h = (h + 1) & m;
  tab[h] = e;
  return 0;
}

static void entry_free(loom_var_entry *e) {
  if (!e) return;
  loom__free(e->name);
  loom__aligned_free(e->data);
  loom__free(e);
}

static loom_var_entry *ls_create(loom_var_store *vs, const char *name, loom_dtype dt, int ndim, const int64_t *dims,
                                 loom_status *st) {
  local_store *ls = (local_store *)vs;
  if (dt <= 0 || dt >= LOOM_DTYPE_COUNT || dt == LOOM_STRING || ndim < 0 || ndim > LOOM_MAX_DIMS) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "variable %s: unsupported dtype %s or rank %d", name,
                    loom_dtype_name(dt), ndim);
    return NULL;
  }
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0 || (dims[i] && numel > INT64_MAX / 16 / dims[i])) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "variable %s: invalid dimension %lld", name, (long long)dims[i]);
      return NULL;
    }
    numel *= dims[i];
  }
  if (ls->n == ls->cap) {
    int64_t nc = ls->cap ? ls->cap * 2 : 16;
    loom_var_entry **ni = loom__realloc(ls->items, (size_t)nc * sizeof *ni);
    if (!ni) goto oom;
    ls->items = ni;
    ls->cap = nc;
  }
  if ((ls->n + 1) * 2 > ls->hcap) {
    int64_t nc = ls->hcap ? ls->hcap * 2 : 32;
    loom_var_entry **nt = loom__calloc((size_t)nc, sizeof *nt);
    if (!nt) goto oom;
    for (int64_t i = 0; i < ls->n; i++) ls_hput(nt, nc, ls->items[i]);
    loom__free(ls->htab);
    ls->htab = nt;
    ls->hcap = nc;
  }
  loom_var_entry *e = loom__calloc(1, sizeof *e);
  if (!e) goto oom;
  e->name = loom__strdup(name);
  e->dtype = dt;
  e->ndim = ndim;
  for (int i = 0; i < ndim; i++) e->dims[i] = dims[i];
  e->numel = numel;
  e->nbytes = (size_t)numel * loom_dtype_size(dt);
  e->data = loom__aligned_alloc(e->nbytes ? e->nbytes : 64);
  if (!e->name || !e->data) {
    entry_free(e);
    goto oom;
  }
  memset(e->data, 0, e->nbytes);
  ls->items[ls->n++] = e;
  ls_hput(ls->htab, ls->hcap, e);
  vs->n_uninit++;
  return e;
oom:
  loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "variable %s: out of memory", name);
  return NULL;
}

static int64_t ls_count(loom_var_store *vs) { return ((local_store *)vs)->n; }
static loom_var_entry *ls_at(loom_var_store *vs, int64_t i) {
  local_store *ls = (local_store *)vs;
  return (i >= 0 && i < ls->n) ? ls->items[i] : NULL;
}
static void ls_destroy(loom_var_store *vs) {
  local_store *ls = (local_store *)vs;
  for (int64_t i = 0; i < ls->n; i++) entry_free(ls->items[i]);
  loom__free(ls->items);
  loom__free(ls->htab);
  loom__free(ls);
}

static const loom_var_store_ops local_ops = {ls_lookup, ls_create, ls_count, ls_at, NULL, NULL, ls_destroy};

/* ======================================================================
 * Session glue
 * ====================================================================== */
static void store_free(void *p) {
  loom_var_store *vs = p;
  if (vs && vs->ops && vs->ops->destroy) vs->ops->destroy(vs);
}

static loom_code vars_hook(struct loom_session *s, const loom_plan *p, int phase, loom_status *st);

void loom__var_store_install(loom_session *s, loom_var_store *vs) {
  if (!s) return;
  if (s->vars && s->vars_free) s->vars_free(s->vars);
  s->vars = vs;
  s->vars_free = store_free;
  s->vars_hook = vars_hook;
}

loom_var_store *loom__var_store(loom_session *s, loom_status *st) {
  if (s->vars) return s->vars;
  local_store *ls = loom__calloc(1, sizeof *ls);
  if (!ls) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory creating the variable store");
    return NULL;
  }
  ls->base.ops = &local_ops;
  loom__var_store_install(s, &ls->base);
  return s->vars;
}

void loom__var_mark_initialized(loom_var_store *vs, loom_var_entry *e) {
  if (!e || e->initialized) return;
  e->initialized = 1;
  if (vs->n_uninit > 0) vs->n_uninit--;
}

static int same_shape(const loom_var_entry *e, loom_dtype dt, int ndim, const int64_t *dims) {
  if (e->dtype != dt || e->ndim != ndim) return 0;
  for (int i = 0; i < ndim; i++)
    if (e->dims[i] != dims[i]) return 0;
  return 1;
}

static loom_var_entry *entry_for_node(loom_var_store *vs, const loom_node *n, loom_status *st) {
  const loom_tdesc *d = &n->out[0];
  loom_var_entry *e = vs->ops->lookup(vs, n->name);
  if (!e) return vs->ops->create(vs, n->name, d->dtype, d->ndim, d->dims, st);
  if (!same_shape(e, d->dtype, d->ndim, d->dims)) {
    char b1[96], b2[96];
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: the session holds variable %s as %s %s, the graph wants %s %s",
                    n->name, e->name, loom_dtype_name(e->dtype), loom__dims_str(b1, sizeof b1, e->ndim, e->dims),
                    loom_dtype_name(d->dtype), loom__dims_str(b2, sizeof b2, d->ndim, d->dims));
    return NULL;
  }
  return e;
}

loom_code loom__var_bind(struct loom_session *s, const loom_node *n, loom_buf *out, loom_status *st) {
  loom_var_store *vs = loom__var_store(s, st);
  if (!vs) return LOOM_RESOURCE_EXHAUSTED;
  loom_var_entry *e = entry_for_node(vs, n, st);
  if (!e) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  out->data = e->data;
  return LOOM_OK;
}

loom_var_entry *loom__var_entry(loom_session *s, const char *name, loom_status *st) {
  loom_var_store *vs = loom__var_store(s, st);
  if (!vs) return NULL;
  loom_var_entry *e = vs->ops->lookup(vs, name);
  const loom_node *n = loom_graph_find(s->graph, name);
  if (!n || n->op != LOOM_OP_VariableV2) {
    if (e) return e; /* held by the store (e.g. a remote one) without a node here */
    loom_status_set(st, LOOM_NOT_FOUND, "variable %s does not exist in the graph", name);
    return NULL;
  }
  return entry_for_node(vs, n, st);
}

/* ---- the per-run check ---- */
static int is_fed(const loom_plan *p, const loom_node *n) {
  for (int i = 0; i < p->nfeeds; i++)
    if (p->feeds[i].node == n) return 1;
  return 0;
}

/* The variable a value read sees: through pure views (Identity, Reshape...)
 * but not through in-place ops (their output was written this run). */
static const loom_node *read_root(const loom_plan *p, loom_output o) {
  const loom_node *n = o.node;
  int idx = o.index;
  for (int guard = 0; n && guard < 4096; guard++) {
    if (is_fed(p, n)) return NULL;
    if (n->op == LOOM_OP_VariableV2) return n;
    uint32_t f = n->def->flags;
    if (idx != 0 || n->nin < 1 || !(f & LOOM_OPF_ALIAS0) || (f & LOOM_OPF_MUTATES_INPUT0)) return NULL;
    idx = n->in[0].index;
    n = n->in[0].node;
  }
  return NULL;
}

/* The variable an in-place op writes: through other in-place ops. */
const loom_node *loom__ref_root(loom_output ref) {
  const loom_node *n = ref.node;
  int idx = ref.index;
  for (int guard = 0; n && guard < 4096; guard++) {
    if (n->op == LOOM_OP_VariableV2) return n;
    uint32_t f = n->def->flags;
    if (idx != 0 || n->nin < 1 || !(f & LOOM_OPF_ALIAS0) || !(f & LOOM_OPF_MUTATES_INPUT0)) return NULL;
    idx = n->in[0].index;
    n = n->in[0].node;
  }
  return NULL;
}

static loom_code check_read(loom_var_store *vs, const loom_plan *p, loom_output o, const char *reader,
                            loom_status *st) {
  const loom_node *v = read_root(p, o);
  if (!v) return LOOM_OK;
  loom_var_entry *e = vs->ops->lookup(vs, v->name);
  if (e && !e->initialized)
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "%s: Attempting to use uninitialized value %s", reader,
                           v->name);
  return LOOM_OK;
}

static loom_code vars_hook(struct loom_session *s, const loom_plan *p, int phase, loom_status *st) {
  loom_var_store *vs = s->vars;
  if (!vs) return LOOM_OK;
  loom_code rc;
  if (phase == 0) {
    if (vs->ops->before_run && (rc = vs->ops->before_run(vs, s, p, st))) return rc;
    if (vs->n_uninit == 0) return LOOM_OK; /* the steady state: nothing to check */
    for (int k = 0; k < p->nsteps; k++) {
      const loom_node *n = p->steps[k].node;
      for (int j = 0; j < n->nin; j++) {
        if (j == 0 && n->op == LOOM_OP_Assign) continue; /* Assign only writes its ref */
        if ((rc = check_read(vs, p, n->in[j], n->name, st))) return rc;
      }
    }
    for (int k = 0; k < p->nfetches; k++)
      if ((rc = check_read(vs, p, p->fetches[k], "fetch", st))) return rc;
    return LOOM_OK;
  }
  if (vs->n_uninit > 0) {
    for (int k = 0; k < p->nsteps; k++) {
      const loom_node *n = p->steps[k].node;
      if (n->op != LOOM_OP_Assign) continue;
      const loom_node *v = loom__ref_root(n->in[0]);
      if (v && !is_fed(p, v)) loom__var_mark_initialized(vs, vs->ops->lookup(vs, v->name));
    }
  }
  if (vs->ops->after_run && (rc = vs->ops->after_run(vs, s, p, st))) return rc;
  return LOOM_OK;
}

/* ---- public session helpers ---- */
loom_code loom_session_read_variable(loom_session *s, const char *name, loom_tensor **out, loom_status *st) {
  if (!s || !name || !out) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "read_variable: NULL argument");
  pthread_mutex_lock(&s->mu);
  loom_code rc = LOOM_OK;
  loom_var_entry *e = loom__var_entry(s, name, st);
  if (!e) {
    rc = loom_status_code(st) ? loom_status_code(st) : LOOM_NOT_FOUND;
    goto done;
  }
  if (!e->initialized) {
    rc = loom_status_set(st, LOOM_FAILED_PRECONDITION, "Attempting to use uninitialized value %s", name);
    goto done;
  }
  loom_tensor *t = *out;
  if (t && (t->dtype != e->dtype || t->numel != e->numel)) {
    loom_tensor_free(t);
    t = *out = NULL;
  }
  if (!t) {
    t = loom_tensor_new(e->dtype, e->ndim, e->dims, st);
    if (!t) {
      rc = LOOM_RESOURCE_EXHAUSTED;
      goto done;
    }
    *out = t;
  } else {
    t->ndim = e->ndim;
    memcpy(t->dims, e->dims, sizeof(int64_t) * (size_t)e->ndim);
  }
  if ((rc = loom__dev_var_to_host(s, e->data, st))) goto done; /* device sessions: the device copy may be newer */
  if (e->nbytes) memcpy(t->data, e->data, e->nbytes);
done:
  pthread_mutex_unlock(&s->mu);
  if (!rc) loom_status_clear(st);
  return rc;
}

loom_code loom_session_assign_variable(loom_session *s, const char *name, const loom_tensor *value,
                                       loom_status *st) {
  if (!s || !name || !value) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "assign_variable: NULL argument");
  pthread_mutex_lock(&s->mu);
  loom_code rc = LOOM_OK;
  loom_var_entry *e = loom__var_entry(s, name, st);
  if (!e) {
    rc = loom_status_code(st) ? loom_status_code(st) : LOOM_NOT_FOUND;
    goto done;
  }
  if (!same_shape(e, value->dtype, value->ndim, value->dims)) {
    char b1[96], b2[96];
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "assign to variable %s: value is %s %s, the variable is %s %s",
                         name, loom_dtype_name(value->dtype), loom__dims_str(b1, sizeof b1, value->ndim, value->dims),
                         loom_dtype_name(e->dtype), loom__dims_str(b2, sizeof b2, e->ndim, e->dims));
    goto done;
  }
  /* the whole variable is overwritten: nothing to copy down first */
  if (e->nbytes) memcpy(e->data, value->data, e->nbytes);
  loom__dev_var_host_changed(s, e->data); /* device sessions: this one is re-uploaded before the next run */
  loom__var_mark_initialized(s->vars, e);
done:
  pthread_mutex_unlock(&s->mu);
  if (!rc) loom_status_clear(st);
  return rc;
}

int loom_session_variable_initialized(loom_session *s, const char *name) {
  if (!s || !name) return 0;
  pthread_mutex_lock(&s->mu);
  int r = 0;
  if (s->vars) {
    loom_var_store *vs = s->vars;
    loom_var_entry *e = vs->ops->lookup(vs, name);
    r = e && e->initialized;
  }
  pthread_mutex_unlock(&s->mu);
  return r;
}

/* ======================================================================
 * Graph side: training state attached to the graph
 * ====================================================================== */
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
  if (g->ext[LOOM__GRAPH_EXT_TRAIN]) return g->ext[LOOM__GRAPH_EXT_TRAIN];
  train_state *ts = loom__calloc(1, sizeof *ts);
  if (!ts) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory creating the training state");
    return NULL;
  }
  ts->dummy.g = g;
  ts->dummy.name = NULL;
  ts->dummy.dtype = LOOM_F32;
  g->ext[LOOM__GRAPH_EXT_TRAIN] = ts;
  g->ext_free[LOOM__GRAPH_EXT_TRAIN] = ts_free;
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
  vcoll *c = g && g->ext[LOOM__GRAPH_EXT_TRAIN] ? vcoll_get(g, collection, 0) : NULL;
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
  ocoll *c = g && g->ext[LOOM__GRAPH_EXT_TRAIN] ? ocoll_get(g, collection, 0) : NULL;
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
  train_state *ts = g ? g->ext[LOOM__GRAPH_EXT_TRAIN] : NULL;
  if (!ts || !ts->nscopes) return;
  ts->nscopes--;
  loom__free(ts->scopes[ts->nscopes].full);
  loom_graph_pop_scope(g);
}

const char *loom_variable_scope_name(loom_graph *g) {
  train_state *ts = g ? g->ext[LOOM__GRAPH_EXT_TRAIN] : NULL;
  return ts && ts->nscopes ? ts->scopes[ts->nscopes - 1].full : "";
}

static int scope_reuse(loom_graph *g) {
  train_state *ts = g->ext[LOOM__GRAPH_EXT_TRAIN];
  return ts && ts->nscopes ? ts->scopes[ts->nscopes - 1].reuse : LOOM_REUSE_NONE;
}

/* ---- root scope ---- */
void loom__root_scope_enter(loom_graph *g, loom_root_scope *sv) {
  sv->scopes = g->scopes;
  sv->nscopes = g->nscopes;
  sv->capscopes = g->capscopes;
  sv->scope_str = g->scope_str;
  sv->nctrl = g->nctrl_stack;
  g->scopes = NULL;
  g->nscopes = g->capscopes = 0;
  g->scope_str = loom__strdup("");
  g->nctrl_stack = 0;
}

void loom__root_scope_leave(loom_graph *g, loom_root_scope *sv) {
  for (int i = 0; i < g->nscopes; i++) loom__free(g->scopes[i]);
  loom__free(g->scopes);
  loom__free(g->scope_str);
  g->scopes = sv->scopes;
  g->nscopes = sv->nscopes;
  g->capscopes = sv->capscopes;
  g->scope_str = sv->scope_str;
  g->nctrl_stack = sv->nctrl;
}

/* ======================================================================
 * Initializers
 * ====================================================================== */
static loom_initializer init_make(int kind, double a, double b, int64_t seed) {
  loom_initializer i;
  memset(&i, 0, sizeof i);
  i.kind = kind;
  i.a = a;
  i.b = b;
  i.seed = seed;
  return i;
}
loom_initializer loom_init_zeros(void) { return init_make(LOOM_INIT_ZEROS, 0, 0, LOOM_SEED_NONE); }
loom_initializer loom_init_ones(void) { return init_make(LOOM_INIT_ONES, 1, 0, LOOM_SEED_NONE); }
loom_initializer loom_init_constant(double value) { return init_make(LOOM_INIT_CONSTANT, value, 0, LOOM_SEED_NONE); }
loom_initializer loom_init_random_uniform(double minval, double maxval, int64_t seed) {
  return init_make(LOOM_INIT_RANDOM_UNIFORM, minval, maxval, seed);
}
loom_initializer loom_init_random_normal(double mean, double stddev, int64_t seed) {
  return init_make(LOOM_INIT_RANDOM_NORMAL, mean, stddev, seed);
}
loom_initializer loom_init_truncated_normal(double mean, double stddev, int64_t seed) {
  return init_make(LOOM_INIT_TRUNCATED_NORMAL, mean, stddev, seed);
}
loom_initializer loom_init_variance_scaling(double scale, loom_fan_mode mode, loom_init_distribution dist,
                                            int64_t seed) {
  loom_initializer i = init_make(LOOM_INIT_VARIANCE_SCALING, scale, 0, seed);
  i.mode = mode;
  i.distribution = dist;
  return i;
}
loom_initializer loom_init_glorot_uniform(int64_t seed) {
  return loom_init_variance_scaling(1.0, LOOM_FAN_AVG, LOOM_DIST_UNIFORM, seed);
}
loom_initializer loom_init_glorot_normal(int64_t seed) {
  return loom_init_variance_scaling(1.0, LOOM_FAN_AVG, LOOM_DIST_TRUNCATED_NORMAL, seed);
}
loom_initializer loom_init_he_uniform(int64_t seed) {
  return loom_init_variance_scaling(2.0, LOOM_FAN_IN, LOOM_DIST_UNIFORM, seed);
}
loom_initializer loom_init_he_normal(int64_t seed) {
  return loom_init_variance_scaling(2.0, LOOM_FAN_IN, LOOM_DIST_TRUNCATED_NORMAL, seed);
}

/* A tensor of the full shape filled with v (cast to dtype): a scalar
 * constant, filled by a Fill node for rank >= 1 (no big constant). */
static loom_output const_fill(loom_graph *g, loom_dtype dt, int ndim, const int64_t *dims, double v,
                              const char *name) {
  loom_tensor *t = loom_tensor_new(dt, 0, NULL, NULL);
  if (!t) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", name);
    return loom__graph_dummy(g);
  }
  void *d = t->data;
  switch (dt) {
  case LOOM_F32: *(float *)d = (float)v; break;
  case LOOM_F64: *(double *)d = v; break;
  case LOOM_I32: *(int32_t *)d = (int32_t)v; break;
  case LOOM_I64: *(int64_t *)d = (int64_t)v; break;
  case LOOM_U8: *(uint8_t *)d = (uint8_t)v; break;
  case LOOM_BOOL: *(uint8_t *)d = v != 0.0; break;
  default: break;
  }
  loom_output o;
  if (ndim == 0) {
    o = loom_const(g, t, name);
  } else {
    char vn[256];
    snprintf(vn, sizeof vn, "%s/value", name);
    o = loom_fill(g, ndim, dims, loom_const(g, t, vn), name);
  }
  loom_tensor_free(t);
  return o;
}

static void compute_fans(int ndim, const int64_t *dims, double *fan_in, double *fan_out) {
  if (ndim < 1) {
    *fan_in = *fan_out = 1;
  } else if (ndim == 1) {
    *fan_in = *fan_out = (double)dims[0];
  } else if (ndim == 2) {
    *fan_in = (double)dims[0];
    *fan_out = (double)dims[1];
  } else {
    double rf = 1;
    for (int i = 0; i < ndim - 2; i++) rf *= (double)dims[i];
    *fan_in = (double)dims[ndim - 2] * rf;
    *fan_out = (double)dims[ndim - 1] * rf;
  }
}

loom_output loom_initializer_build(loom_graph *g, const loom_initializer *init, loom_dtype dtype, int ndim,
                                   const int64_t *dims, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (ndim < 0 || ndim > LOOM_MAX_DIMS || (ndim && !dims)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "initializer: invalid rank %d", ndim);
    return loom__graph_dummy(g);
  }
  for (int i = 0; i < ndim; i++)
    if (dims[i] < 0) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "initializer: the shape must be fully known");
      return loom__graph_dummy(g);
    }
  int isfloat = dtype == LOOM_F32 || dtype == LOOM_F64;
  loom_initializer def;
  if (!init || init->kind == LOOM_INIT_DEFAULT) {
    def = isfloat ? loom_init_glorot_uniform(init ? init->seed : LOOM_SEED_NONE) : loom_init_zeros();
    init = &def;
  }
  switch (init->kind) {
  case LOOM_INIT_ZEROS: return const_fill(g, dtype, ndim, dims, 0.0, name ? name : "zeros");
  case LOOM_INIT_ONES: return const_fill(g, dtype, ndim, dims, 1.0, name ? name : "ones");
  case LOOM_INIT_CONSTANT: return const_fill(g, dtype, ndim, dims, init->a, name ? name : "Const");
  default: break;
  }
  if (!isfloat) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "initializer: random initializers need a float dtype, not %s",
                         loom_dtype_name(dtype));
    return loom__graph_dummy(g);
  }
  int64_t s1 = 0, s2 = 0;
  loom_graph_get_seed(g, init->seed, init->seed != LOOM_SEED_NONE, &s1, &s2);
  uint64_t u1 = (uint64_t)s1, u2 = (uint64_t)s2;
  switch (init->kind) {
  case LOOM_INIT_RANDOM_UNIFORM:
    return loom_random_uniform(g, ndim, dims, dtype, init->a, init->b, u1, u2, name ? name : "random_uniform");
  case LOOM_INIT_RANDOM_NORMAL:
    return loom_random_normal(g, ndim, dims, dtype, init->a, init->b, u1, u2, name ? name : "random_normal");
  case LOOM_INIT_TRUNCATED_NORMAL:
    return loom_truncated_normal(g, ndim, dims, dtype, init->a, init->b, u1, u2, name ? name : "truncated_normal");
  case LOOM_INIT_VARIANCE_SCALING: {
    if (!(init->a > 0)) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "variance_scaling: scale must be positive, got %g", init->a);
      return loom__graph_dummy(g);
    }
    double fan_in, fan_out, n;
    compute_fans(ndim, dims, &fan_in, &fan_out);
    n = init->mode == LOOM_FAN_IN ? fan_in : init->mode == LOOM_FAN_OUT ? fan_out : (fan_in + fan_out) / 2.0;
    double scale = init->a / (n > 1.0 ? n : 1.0);
    if (init->distribution == LOOM_DIST_UNIFORM) {
      double limit = sqrt(3.0 * scale);
      return loom_random_uniform(g, ndim, dims, dtype, -limit, limit, u1, u2, name ? name : "random_uniform");
    }
    if (init->distribution == LOOM_DIST_UNTRUNCATED_NORMAL)
      return loom_random_normal(g, ndim, dims, dtype, 0.0, sqrt(scale), u1, u2, name ? name : "random_normal");
    /* constant from scipy.stats.truncnorm.std(a=-2, b=2, loc=0., scale=1.) */
    return loom_truncated_normal(g, ndim, dims, dtype, 0.0, sqrt(scale) / .87962566103423978, u1, u2,
                                 name ? name : "truncated_normal");
  }
  default:
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "initializer: unknown kind %d", (int)init->kind);
    return loom__graph_dummy(g);
  }
}

/* ======================================================================
 * Variables
 * ====================================================================== */
loom_variable *loom__variable_create(loom_graph *g, const char *full_name, int unique, loom_dtype dtype, int ndim,
                                     const int64_t *dims, const loom_initializer *init, loom_output init_value,
                                     int trainable, uint32_t collections) {
  train_state *ts = ts_get(g);
  if (!ts || loom__graph_failed(g)) return NULL;
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
  if (!loom__graph_failed(g)) {
    loom_graph_push_scope_reuse(g, var.node->name);
    if (init) {
      loom_graph_push_scope_reuse(g, "Initializer");
      iv = loom_initializer_build(g, init, dtype, ndim, dims, NULL);
      loom_graph_pop_scope(g);
    } else {
      iv = init_value;
    }
    loom_output a = loom_assign(g, var, iv, "Assign");
    assign = loom__graph_failed(g) ? NULL : a.node;
    loom_graph_pop_scope(g);
  }
  loom__root_scope_leave(g, &rs);
  if (!assign) {
    loom__free(v);
    return NULL;
  }
  v->g = g;
  v->name = loom__strdup(var.node->name);
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
  var.node->attrs.resource = v;
  ts->vars[ts->nvars++] = v;
  if (!collections) collections = LOOM_COLL_GLOBAL;
  if (collections & LOOM_COLL_GLOBAL) loom_add_variable_to_collection(g, LOOM_GLOBAL_VARIABLES, v);
  if (collections & LOOM_COLL_LOCAL) loom_add_variable_to_collection(g, LOOM_LOCAL_VARIABLES, v);
  if (collections & LOOM_COLL_METRIC) loom_add_variable_to_collection(g, LOOM_METRIC_VARIABLES, v);
  if (collections & LOOM_COLL_MODEL) loom_add_variable_to_collection(g, LOOM_MODEL_VARIABLES, v);
  if (v->trainable) loom_add_variable_to_collection(g, LOOM_TRAINABLE_VARIABLES, v);
  return v;
}

loom_variable *loom__variable_import(loom_graph *g, loom_node *n, loom_node *init, int trainable,
                                     int from_get_variable, uint32_t collections, int global_step) {
  train_state *ts = ts_get(g);
  if (!ts || loom__graph_failed(g)) return NULL;
  if (!n || n->graph != g || n->op != LOOM_OP_VariableV2 || n->attrs.resource) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "import: %s is not an unregistered variable node",
                         n ? n->name : "(null)");
    return NULL;
  }
  loom_variable *v = loom__calloc(1, sizeof *v);
  if (!v || grow((void **)&ts->vars, &ts->capvars, ts->nvars + 1, sizeof *ts->vars) ||
      !(v->name = loom__strdup(n->name))) {
    loom__free(v);
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "Variable %s: out of memory", n->name);
    return NULL;
  }
  v->g = g;
  v->node = n;
  v->init = init;
  if (init && init->nin > 1) v->init_value = init->in[1];
  v->dtype = n->out[0].dtype;
  v->ndim = n->out[0].ndim;
  for (int i = 0; i < v->ndim; i++) v->dims[i] = n->out[0].dims[i];
  v->trainable = trainable != 0;
  v->from_get_variable = from_get_variable != 0;
  n->attrs.resource = v;
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
  if (!n || n->op != LOOM_OP_VariableV2) return NULL;
  return n->attrs.resource;
}

static loom_variable *fail_var(loom_graph *g) { return loom__variable_dummy(g); }

loom_variable *loom_get_variable_ex(loom_graph *g, const char *name, loom_dtype dtype, int ndim, const int64_t *dims,
                                    const loom_initializer *initializer, int trainable, uint32_t collections) {
  if (!g) return NULL;
  if (!ts_get(g)) return NULL;
  if (loom__graph_failed(g)) return fail_var(g);
  if (!name || !*name) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "get_variable: empty name");
    return fail_var(g);
  }
  const char *scope = loom_variable_scope_name(g);
  char full[1024];
  snprintf(full, sizeof full, "%s%s%s", scope, *scope ? "/" : "", name);
  int reuse = scope_reuse(g);
  loom_node *n = loom_graph_find(g, full);
  loom_variable *v = (n && n->op == LOOM_OP_VariableV2) ? n->attrs.resource : NULL;
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
  if (loom__graph_failed(g)) return fail_var(g);
  if (!loom_output_valid(initial_value) || initial_value.node->graph != g) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "Variable %s: invalid initial value", name ? name : "Variable");
    return fail_var(g);
  }
  const loom_tdesc *d = &initial_value.node->out[initial_value.index];
  /* the name is made unique under the current name scope, like tf.Variable */
  char *full = loom__graph_unique_name(g, name && *name ? name : "Variable");
  if (!full) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "Variable: out of memory");
    return fail_var(g);
  }
  loom_variable *v = loom__variable_create(g, full, 0, d->dtype, d->ndim, d->dims, NULL, initial_value, trainable,
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
  if (loom__graph_failed(g)) return fail_var(g);
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
