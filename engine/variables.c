/* Variables, the engine's side: the session's variable store (local memory
 * behind a vtable), the per-run uninitialised-read check, session-side
 * read/assign, and the small interface the graph side of variables
 * (train/variables.c: tf.get_variable, scopes, collections, initializers)
 * uses (engine/variable_api.h). */
#include <string.h>
#include <stdio.h>
#include <math.h>
#include "engine/variables.h"
#include "engine/backend.h"

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

void *loom__session_var_buffer(loom_session *s, const char *name, int64_t *numel, loom_status *st) {
  loom_var_entry *e = loom__var_entry(s, name, st);
  if (e && numel) *numel = e->numel;
  return e ? e->data : NULL;
}

int loom__session_vars_on_host(const loom_session *s) { return s && s->opts.device == LOOM_DEVICE_CPU; }

void loom__session_var_mark_initialized(loom_session *s, const char *name) {
  loom_var_store *vs = loom__var_store(s, NULL);
  if (vs) loom__var_mark_initialized(vs, vs->ops->lookup(vs, name));
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
  if (!n || !(n->def->flags & LOOM_OPF_VARIABLE)) {
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
    if (n->def->flags & LOOM_OPF_VARIABLE) return n;
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
    if (n->def->flags & LOOM_OPF_VARIABLE) return n;
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
        if (j == 0 && (n->def->flags & LOOM_OPF_ASSIGN)) continue; /* Assign only writes its ref */
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
      if (!(n->def->flags & LOOM_OPF_ASSIGN)) continue;
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
 * For the graph side of variables (train/): engine/variable_api.h
 * ====================================================================== */
int loom__node_is_variable(const loom_node *n) { return n && (n->def->flags & LOOM_OPF_VARIABLE); }
void *loom__node_resource(const loom_node *n) { return n ? n->attrs.resource : NULL; }
void loom__node_set_resource(loom_node *n, void *r) {
  if (n) n->attrs.resource = r;
}
loom_graph *loom__node_graph(const loom_node *n) { return n ? n->graph : NULL; }

static loom_graph_var_hooks g_var_hooks;
void loom__graph_var_hooks_install(const loom_graph_var_hooks *h) {
  if (h) g_var_hooks = *h;
}
const loom_graph_var_hooks *loom__graph_var_hooks(void) { return &g_var_hooks; }

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

