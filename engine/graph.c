/* Graph builder: nodes, names, scopes, sticky errors. */
#include <string.h>
#include <stdlib.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include "engine/engine_impl.h"
/* ---- names ---- */
static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

static int htab_insert(loom_graph *g, loom_node *n) {
  if ((int64_t)(g->nnodes + 1) * 2 > g->hcap) {
    int64_t nc = g->hcap ? g->hcap * 2 : 64;
    loom_node **nt = loom__calloc((size_t)nc, sizeof *nt);
    if (!nt) return -1;
    for (int64_t i = 0; i < g->hcap; i++)
      if (g->htab[i]) {
        uint64_t h = hash_str(g->htab[i]->name) & (uint64_t)(nc - 1);
        while (nt[h]) h = (h + 1) & (uint64_t)(nc - 1);
        nt[h] = g->htab[i];
      }
    loom__free(g->htab);
    g->htab = nt;
    g->hcap = nc;
  }
  uint64_t h = hash_str(n->name) & (uint64_t)(g->hcap - 1);
  while (g->htab[h]) h = (h + 1) & (uint64_t)(g->hcap - 1);
  g->htab[h] = n;
  return 0;
}

loom_node *loom_graph_find(const loom_graph *g, const char *name) {
  if (!g || !name || !g->hcap) return NULL;
  uint64_t h = hash_str(name) & (uint64_t)(g->hcap - 1);
  while (g->htab[h]) {
    if (!strcmp(g->htab[h]->name, name)) return g->htab[h];
    h = (h + 1) & (uint64_t)(g->hcap - 1);
  }
  return NULL;
}

loom_output loom_graph_find_output(const loom_graph *g, const char *name) {
  loom_output o = {NULL, 0};
  if (!name) return o;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", name);
  char *colon = strrchr(buf, ':');
  int idx = 0;
  if (colon) {
    char *end;
    long v = strtol(colon + 1, &end, 10);
    if (*end == 0 && end != colon + 1) {
      *colon = 0;
      idx = (int)v;
    }
  }
  loom_node *n = loom_graph_find(g, buf);
  if (n && idx >= 0 && idx < n->nout) {
    o.node = n;
    o.index = idx;
  }
  return o;
}

/* TF-style uniquing: "name", then "name_1", "name_2", ... */
char *loom__graph_unique_name(loom_graph *g, const char *base) {
  char full[512];
  const char *sc = g->scope_str ? g->scope_str : "";
  snprintf(full, sizeof full, "%s%s%s", sc, *sc ? "/" : "", base);
  if (!loom_graph_find(g, full)) return loom__strdup(full);
  char cand[540];
  for (int i = 1;; i++) {
    snprintf(cand, sizeof cand, "%s_%d", full, i);
    if (!loom_graph_find(g, cand)) return loom__strdup(cand);
  }
}

/* ---- graph ---- */
loom_graph *loom_graph_new(void) {
  loom_graph *g = loom__calloc(1, sizeof *g);
  if (!g) return NULL;
  g->scope_str = loom__strdup("");
  if (!g->scope_str) {
    loom__free(g);
    return NULL;
  }
  return g;
}

static void node_free(loom_node *n) {
  if (!n) return;
  loom__free(n->name);
  loom__free(n->in);
  loom__free(n->ctrl);
  loom__free(n->out);
  loom_tensor_free(n->value);
  loom__free(n);
}

void loom_graph_free(loom_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->nnodes; i++) node_free(g->nodes[i]);
  node_free(g->dummy);
  for (int i = 0; i < LOOM__GRAPH_EXT_COUNT; i++)
    if (g->ext[i] && g->ext_free[i]) g->ext_free[i](g->ext[i]);
  loom__free(g->nodes);
  loom__free(g->htab);
  for (int i = 0; i < g->nscopes; i++) loom__free(g->scopes[i]);
  loom__free(g->scopes);
  loom__free(g->scope_str);
  for (int i = 0; i < g->nctrl_stack; i++) loom__free(g->ctrl_stack[i]);
  loom__free(g->ctrl_stack);
  loom__free(g->ctrl_counts);
  loom__free(g->err_msg);
  loom__free(g);
}

loom_code loom_graph_status(const loom_graph *g, loom_status *st) {
  if (!g) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "graph is NULL");
  if (g->err_code) return loom_status_set(st, g->err_code, "%s", g->err_msg ? g->err_msg : "");
  loom_status_clear(st);
  return LOOM_OK;
}

int loom__graph_failed(const loom_graph *g) { return g->err_code != LOOM_OK; }

/* ---- per-graph attached data of the layers above (engine_api.h) ---- */
void *loom__graph_ext(const loom_graph *g, int slot) {
  return g && slot >= 0 && slot < LOOM__GRAPH_EXT_COUNT ? g->ext[slot] : NULL;
}

void loom__graph_set_ext(loom_graph *g, int slot, void *p, void (*free_fn)(void *)) {
  if (!g || slot < 0 || slot >= LOOM__GRAPH_EXT_COUNT) return;
  g->ext[slot] = p;
  g->ext_free[slot] = free_fn;
}

loom_code loom_graph_set_error(loom_graph *g, loom_code code, const char *fmt, ...) {
  if (!g || g->err_code) return code;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g->err_code = code;
  g->err_msg = loom__strdup(buf);
  loom__log(LOOM_LOG_DEBUG, "graph error: %s", buf);
  return code;
}

static void rebuild_scope(loom_graph *g) {
  size_t len = 1;
  for (int i = 0; i < g->nscopes; i++) len += strlen(g->scopes[i]) + 1;
  char *s = loom__malloc(len);
  if (!s) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "name scope: out of memory");
    return;
  }
  s[0] = 0;
  for (int i = 0; i < g->nscopes; i++) {
    if (i) strcat(s, "/");
    strcat(s, g->scopes[i]);
  }
  loom__free(g->scope_str);
  g->scope_str = s;
}

static int scope_in_use(loom_graph *g, const char *prefix) {
  size_t n = strlen(prefix);
  for (int i = 0; i < g->nnodes; i++) {
    const char *nm = g->nodes[i]->name;
    if (!strncmp(nm, prefix, n) && (nm[n] == '/' || nm[n] == 0)) return 1;
  }
  return 0;
}

static void push_scope(loom_graph *g, const char *name, int reuse) {
  if (!g) return;
  if (g->nscopes == g->capscopes) {
    int nc = g->capscopes ? g->capscopes * 2 : 8;
    char **ns = loom__realloc(g->scopes, (size_t)nc * sizeof *ns);
    if (!ns) {
      loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "name scope %s: out of memory", name ? name : "");
      return;
    }
    g->scopes = ns;
    g->capscopes = nc;
  }
  const char *base = (name && *name) ? name : "scope";
  char cand[512], full[1024];
  snprintf(cand, sizeof cand, "%s", base);
  if (!reuse) {
    for (int i = 1;; i++) {
      const char *cur = g->scope_str ? g->scope_str : ""; /* NULL after an out-of-memory root scope */
      snprintf(full, sizeof full, "%s%s%s", cur, *cur ? "/" : "", cand);
      if (!scope_in_use(g, full)) break;
      snprintf(cand, sizeof cand, "%s_%d", base, i);
    }
  }
  char *dup = loom__strdup(cand);
  if (!dup) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "name scope %s: out of memory", cand);
    return;
  }
  g->scopes[g->nscopes++] = dup;
  rebuild_scope(g);
}
void loom_graph_push_scope(loom_graph *g, const char *name) { push_scope(g, name, 0); }
void loom_graph_push_scope_reuse(loom_graph *g, const char *name) { push_scope(g, name, 1); }
void loom_graph_pop_scope(loom_graph *g) {
  if (!g || !g->nscopes) return;
  loom__free(g->scopes[--g->nscopes]);
  rebuild_scope(g);
}
const char *loom_graph_scope(const loom_graph *g) { return g && g->scope_str ? g->scope_str : ""; }

void loom_graph_push_control_deps(loom_graph *g, int n, loom_node *const *deps) {
  if (!g) return;
  if (g->nctrl_stack == g->capctrl_stack) {
    int nc = g->capctrl_stack ? g->capctrl_stack * 2 : 4;
    loom_node ***s = loom__realloc(g->ctrl_stack, (size_t)nc * sizeof *s);
    int32_t *c = loom__realloc(g->ctrl_counts, (size_t)nc * sizeof *c);
    if (s) g->ctrl_stack = s;
    if (c) g->ctrl_counts = c;
    if (!s || !c) {
      loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "control dependencies: out of memory");
      return;
    }
    g->capctrl_stack = nc;
  }
  loom_node **copy = loom__malloc((size_t)(n > 0 ? n : 1) * sizeof *copy);
  if (!copy) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "control dependencies: out of memory");
    return;
  }
  for (int i = 0; i < n; i++) copy[i] = deps[i];
  g->ctrl_stack[g->nctrl_stack] = copy;
  g->ctrl_counts[g->nctrl_stack] = n;
  g->nctrl_stack++;
}
void loom_graph_pop_control_deps(loom_graph *g) {
  if (!g || !g->nctrl_stack) return;
  g->nctrl_stack--;
  loom__free(g->ctrl_stack[g->nctrl_stack]);
}

int loom_graph_num_nodes(const loom_graph *g) { return g ? g->nnodes : 0; }
loom_node *loom_graph_node_at(const loom_graph *g, int i) { return (g && i >= 0 && i < g->nnodes) ? g->nodes[i] : NULL; }

const char *loom_node_name(const loom_node *n) { return n ? n->name : ""; }
const char *loom_node_op_name(const loom_node *n) { return n ? n->def->name : ""; }
int loom_node_num_inputs(const loom_node *n) { return n ? n->nin : 0; }
int loom__node_num_control_inputs(const loom_node *n) { return n ? n->nctrl : 0; }
const loom_node *loom__node_control_input(const loom_node *n, int i) {
  return n && i >= 0 && i < n->nctrl ? n->ctrl[i] : NULL;
}
loom_output loom_node_input(const loom_node *n, int i) {
  loom_output o = {NULL, 0};
  return (n && i >= 0 && i < n->nin) ? n->in[i] : o;
}
int loom_node_num_outputs(const loom_node *n) { return n ? n->nout : 0; }
loom_output loom_node_output(loom_node *n, int i) {
  loom_output o = {NULL, 0};
  if (n && i >= 0 && i < n->nout) {
    o.node = n;
    o.index = i;
  }
  return o;
}
int loom_node_id(const loom_node *n) { return n ? n->id : -1; }

const loom_attrs *loom__node_attrs(const loom_node *n) { return n ? &n->attrs : NULL; }

void loom_node_add_control_input(loom_node *n, loom_node *dep) {
  if (!n || !dep || n == dep) return;
  if (dep->graph != n->graph) {
    loom_graph_set_error(n->graph, LOOM_INVALID_ARGUMENT, "%s: control input %s is from another graph", n->name,
                         dep->name);
    return;
  }
  for (int i = 0; i < n->nctrl; i++)
    if (n->ctrl[i] == dep) return;
  if (n->nctrl == n->capctrl) {
    int nc = n->capctrl ? n->capctrl * 2 : 4;
    loom_node **c = loom__realloc(n->ctrl, (size_t)nc * sizeof *c);
    if (!c) {
      loom_graph_set_error(n->graph, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", n->name);
      return;
    }
    n->ctrl = c;
    n->capctrl = nc;
  }
  n->ctrl[n->nctrl++] = dep;
}

loom_dtype loom_output_dtype(loom_output o) {
  return (o.node && o.index >= 0 && o.index < o.node->nout) ? o.node->out[o.index].dtype : LOOM_DTYPE_INVALID;
}
int loom_output_ndim(loom_output o) {
  return (o.node && o.index >= 0 && o.index < o.node->nout) ? o.node->out[o.index].ndim : 0;
}
int loom_output_dims(loom_output o, int64_t *dims) {
  if (!o.node || o.index < 0 || o.index >= o.node->nout) return 0;
  const loom_tdesc *d = &o.node->out[o.index];
  for (int i = 0; i < d->ndim; i++) dims[i] = d->dims[i];
  return d->ndim;
}
int loom_output_valid(loom_output o) { return o.node && o.index >= 0 && o.index < o.node->nout; }

/* ---- adding nodes ---- */
loom_output loom__graph_dummy(loom_graph *g) {
  if (!g->dummy) {
    loom_node *d = loom__calloc(1, sizeof *d);
    if (!d) return (loom_output){NULL, 0};
    d->graph = g;
    d->id = -1;
    /* a feed-only def (Placeholder): never run, never folded; the engine's
     * own stand-in when no op is registered */
    static const loom_op_def unregistered = {.name = "Placeholder", .nin = 0, .nout = 1,
                                             .flags = LOOM_OPF_FEED_ONLY | LOOM_OPF_NODIFF};
    d->op = loom__op_with_flags(LOOM_OPF_FEED_ONLY);
    d->def = d->op >= 0 ? loom__op_def(d->op) : &unregistered;
    d->name = loom__strdup("<error>");
    d->nout = 1;
    d->out = loom__calloc(1, sizeof *d->out);
    if (d->out) d->out[0].dtype = LOOM_F32;
    g->dummy = d;
  }
  return (loom_output){g->dummy, 0};
}

loom_output loom__out0(loom_graph *g, loom_node *n) {
  if (!n) return loom__graph_dummy(g);
  return (loom_output){n, 0};
}

loom_node *loom__graph_add(loom_graph *g, int op, const char *name, const char *default_name, int nin,
                           const loom_output *in, const loom_attrs *attrs, int nout) {
  if (!g) return NULL;
  if (g->err_code) return NULL; /* sticky: stop building after the first error */
  const loom_op_def *def = loom__op_def(op);
  if (!def && !loom__op_count()) {
    loom_graph_set_error(g, LOOM_FAILED_PRECONDITION, "%s", loom__registry_error());
    return NULL;
  }
  if (!def) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "unknown op %d", op);
    return NULL;
  }
  char *full = loom__graph_unique_name(g, name && *name ? name : (default_name ? default_name : def->name));
  if (!full) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory adding %s", def->name);
    return NULL;
  }
  if (def->nin >= 0 && nin != def->nin) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: %s takes %d inputs, got %d", full, def->name, def->nin, nin);
    loom__free(full);
    return NULL;
  }
  if (nin < 0 || (nin > 0 && !in)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid input list", full);
    loom__free(full);
    return NULL;
  }
  for (int i = 0; i < nin; i++) {
    const char *why = NULL;
    if (!in[i].node) why = "is missing (NULL)";
    else if (in[i].node == g->dummy) why = "comes from a failed builder";
    else if (in[i].node->graph != g) why = "belongs to another graph";
    else if (in[i].index < 0 || in[i].index >= in[i].node->nout) why = "has an output index out of range";
    if (why) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: input %d %s", full, i, why);
      loom__free(full);
      return NULL;
    }
  }
  if (nout < 0) nout = def->nout;
  if (nout < 0) nout = 1;
  loom_node *n = loom__calloc(1, sizeof *n);
  loom_tdesc *outs = loom__calloc((size_t)(nout ? nout : 1), sizeof *outs);
  loom_tdesc *ind = loom__calloc((size_t)(nin ? nin : 1), sizeof *ind);
  const loom_tensor **vals = loom__calloc((size_t)(nin ? nin : 1), sizeof *vals);
  loom_output *inputs = loom__calloc((size_t)(nin ? nin : 1), sizeof *inputs);
  if (!n || !outs || !ind || !vals || !inputs) {
    loom__free(n); loom__free(outs); loom__free(ind); loom__free(vals); loom__free(inputs); loom__free(full);
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "out of memory adding %s", def->name);
    return NULL;
  }
  n->graph = g;
  n->op = op;
  n->def = def;
  n->name = full;
  n->nin = nin;
  n->in = inputs;
  n->nout = nout;
  n->out = outs;
  if (attrs) n->attrs = *attrs;
  for (int i = 0; i < nin; i++) {
    inputs[i] = in[i];
    ind[i] = in[i].node->out[in[i].index];
    vals[i] = in[i].node->value; /* Const payload, else NULL */
  }
  loom_code rc = LOOM_OK;
  if (def->shape) {
    loom_shape_ctx c;
    memset(&c, 0, sizeof c);
    c.attrs = &n->attrs;
    c.nin = nin;
    c.in = ind;
    c.in_value = vals;
    c.nout = nout;
    c.out = outs;
    rc = def->shape(&c);
    if (rc) loom_graph_set_error(g, rc, "%s: %s", full, c.msg[0] ? c.msg : "invalid inputs");
  } else {
    rc = loom_graph_set_error(g, LOOM_UNIMPLEMENTED, "%s: op %s has no shape function", full, def->name);
  }
  loom__free(ind);
  loom__free(vals);
  if (!rc && g->nnodes == g->capnodes) {
    int nc = g->capnodes ? g->capnodes * 2 : 64;
    loom_node **nn = loom__realloc(g->nodes, (size_t)nc * sizeof *nn);
    if (!nn) rc = loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", full);
    else {
      g->nodes = nn;
      g->capnodes = nc;
    }
  }
  if (!rc && htab_insert(g, n)) rc = loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", full);
  if (rc) {
    node_free(n);
    return NULL;
  }
  n->id = g->nnodes;
  g->nodes[g->nnodes++] = n;
  for (int s = 0; s < g->nctrl_stack; s++)
    for (int j = 0; j < g->ctrl_counts[s]; j++) loom_node_add_control_input(n, g->ctrl_stack[s][j]);
  return n;
}

int loom__broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t da = i < n - na ? 1 : a[i - (n - na)];
    int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
    int64_t r;
    if (da == db) r = da;
    else if (da == 1) r = db;
    else if (db == 1) r = da;
    else if (da < 0) r = db;   /* unknown vs known: assume it matches */
    else if (db < 0) r = da;
    else return 0;
    out[i] = r;
  }
  *nout = n;
  return 1;
}

void loom_graph_set_random_seed(loom_graph *g, int64_t seed) {
  if (!g) return;
  g->has_seed = 1;
  g->seed = seed;
}

/* TF's get_seed(op_seed) rules: graph seed set, op seed not -> op seed from a
 * per-graph counter; op seed set, graph seed not -> graph seed = default
 * 87654321; neither -> both from a nondeterministic source. Returns 1 when
 * deterministic. */
int loom_graph_get_seed(loom_graph *g, int64_t op_seed, int has_op_seed, int64_t *seed, int64_t *seed2) {
  if (!g) return 0;
  if (g->has_seed) {
    *seed = g->seed;
    *seed2 = has_op_seed ? op_seed : g->next_op_seed++;
    return 1;
  }
  if (has_op_seed) {
    *seed = 87654321;
    *seed2 = op_seed;
    return 1;
  }
  static _Atomic uint64_t ctr = 0x2545F4914F6CDD1Dull;
  uint64_t t = (uint64_t)(uintptr_t)g ^ (uint64_t)time(NULL);
  uint64_t c = atomic_fetch_add_explicit(&ctr, 0x9E3779B97F4A7C15ull, memory_order_relaxed) + 0x9E3779B97F4A7C15ull;
  *seed = (int64_t)((t * 0xBF58476D1CE4E5B9ull) ^ c);
  *seed2 = (int64_t)(c * 0x94D049BB133111EBull);
  return 0;
}
