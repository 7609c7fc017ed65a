/* engine/host_pass.c - the host pass of a session run: the part of the graph
 * whose output shapes depend on input values (ops flagged
 * LOOM_OPF_DATA_SHAPE: ragged ops that drop values, crosses, pruning, ops
 * that produce strings) is evaluated before the run is planned.
 *
 * A run needs the pass when a node it needs (reached from its fetches and
 * targets, stopping at fed outputs) is a data-shape op. The pass takes those
 * nodes and everything they depend on (again stopping at fed outputs), H,
 * and runs H in dependency order on the host with the CPU kernels: shapes
 * from def->value_shape (data-shape ops) or def->shape with concrete input
 * shapes (the others), outputs in buffers the pass owns (reused from run
 * to run; string bytes in a string arena reset every run). Then every node
 * of H that a node outside H needs (or that is fetched) has all its
 * outputs fed to the ordinary run, which plans the rest with known shapes
 * (the plan is cached; it is re-specialised when those shapes change).
 *
 * The walk that finds H, its order and its frontier is kept and reused
 * while the run's feeds, fetches and targets (and the graph's size) are the
 * same as last time. A view op in H (no kernel: Reshape, ExpandDims, ...)
 * aliases its input as in the plan. String outputs may point at the bytes
 * of their inputs (feeds, constants, the arena), which live for the run.
 *
 * H may hold only what is computable from feeds and constants: a variable,
 * an unfed placeholder, a stateful op or a control dependency inside H is
 * an INVALID_ARGUMENT naming both nodes. The pass runs under the session's
 * lock (one run at a time), with the session's thread pool. */
#include <stdio.h>
#include <string.h>
#include "engine/engine_impl.h"
#include "engine/session_impl.h"

typedef struct hp_out {
  loom_tensor t;   /* shell: data points at buf (owned = 0) */
  void *buf;
  size_t cap;
} hp_out;

struct loom_host_pass {
  int32_t scanned;       /* graph nodes already checked for data-shape ops */
  int32_t any;           /* the graph has one */
  int32_t cap;           /* per-node arrays sized for cap nodes */
  uint8_t *mark;         /* per node: 1 needed, 2 in H */
  int32_t *order;        /* H in dependency order */
  hp_out **outs;         /* per node: its outputs (H nodes only) */
  int32_t *stack;
  loom_strarena strings;
  /* the extended feed lists handed to the run */
  loom_output *xfeeds;
  loom_tensor **xvals;
  int32_t xcap;
  void *ws;
  size_t ws_cap;
  /* the walk's roots (fetches and targets, then the data-shape nodes) */
  const loom_node **roots;
  int32_t roots_cap;
  /* the last walk (H in order[0..c_nh), the frontier), reused while the
   * run's feeds, fetches and targets and the graph's size are the same */
  int32_t c_valid, c_N, c_nf, c_nx, c_nt, c_nh, c_nfront;
  loom_output *c_feeds, *c_fetches;
  loom_node **c_targets;
  int32_t c_capf, c_capx, c_capt;
  int32_t *c_front; /* frontier node ids (cap entries) */
};

void loom__host_pass_free(loom_host_pass *hp) {
  if (!hp) return;
  for (int32_t i = 0; i < hp->cap; i++) {
    if (!hp->outs || !hp->outs[i]) continue;
    /* the output count is not stored; outs[i] ends with a NULL-data sentinel */
    for (hp_out *o = hp->outs[i]; o->cap != (size_t)-1; o++) loom__aligned_free(o->buf);
    loom__free(hp->outs[i]);
  }
  loom__free(hp->outs);
  loom__free(hp->mark);
  loom__free(hp->order);
  loom__free(hp->stack);
  loom__free(hp->xfeeds);
  loom__free(hp->xvals);
  loom__free(hp->roots);
  loom__free(hp->c_feeds);
  loom__free(hp->c_fetches);
  loom__free(hp->c_targets);
  loom__free(hp->c_front);
  loom__aligned_free(hp->ws);
  loom__strarena_free(&hp->strings);
  loom__free(hp);
}

static int fed_slot(const loom_output *feeds, int nf, const loom_node *n, int idx) {
  for (int i = 0; i < nf; i++)
    if (feeds[i].node == n && feeds[i].index == idx) return i;
  return -1;
}
static int node_fed(const loom_output *feeds, int nf, const loom_node *n) {
  for (int i = 0; i < nf; i++)
    if (feeds[i].node == n) return 1;
  return 0;
}

static loom_code grow(loom_host_pass *hp, int32_t n, loom_status *st) {
  if (n <= hp->cap) return LOOM_OK;
  int32_t cap = hp->cap ? hp->cap : 64;
  while (cap < n) cap *= 2;
  uint8_t *mark = loom__realloc(hp->mark, (size_t)cap);
  if (mark) hp->mark = mark;
  int32_t *order = loom__realloc(hp->order, (size_t)cap * sizeof *order);
  if (order) hp->order = order;
  int32_t *stack = loom__realloc(hp->stack, (size_t)cap * 2 * sizeof *stack);
  if (stack) hp->stack = stack;
  int32_t *front = loom__realloc(hp->c_front, (size_t)cap * sizeof *front);
  if (front) hp->c_front = front;
  hp_out **outs = loom__realloc(hp->outs, (size_t)cap * sizeof *outs);
  if (outs) {
    memset(outs + hp->cap, 0, (size_t)(cap - hp->cap) * sizeof *outs);
    hp->outs = outs;
  }
  if (!mark || !order || !stack || !outs || !front)
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory in the host pass");
  hp->cap = cap;
  return LOOM_OK;
}

/* Marks (bit) every node reachable from the roots through inputs (and, for
 * bit 1, control inputs), not entering fed nodes. */
static void walk(loom_host_pass *hp, loom_graph *g, const loom_output *feeds, int nf, int nroots,
                 const loom_node *const *roots, uint8_t bit, int follow_ctrl) {
  int32_t *stack = hp->stack;
  int sp = 0;
  for (int r = 0; r < nroots; r++) {
    if (hp->mark[roots[r]->id] & bit) continue;
    hp->mark[roots[r]->id] |= bit;
    stack[sp++] = roots[r]->id;
    while (sp) {
      const loom_node *n = g->nodes[stack[--sp]];
      if (node_fed(feeds, nf, n)) continue;
      int ne = n->nin + (follow_ctrl ? n->nctrl : 0);
      for (int k = 0; k < ne; k++) {
        const loom_node *m = k < n->nin ? n->in[k].node : n->ctrl[k - n->nin];
        if (hp->mark[m->id] & bit) continue;
        hp->mark[m->id] |= bit;
        stack[sp++] = m->id;
      }
    }
  }
}

/* Makes o hold a tensor of desc d (buffer reused when big enough). */
static loom_code out_ensure(hp_out *o, const loom_tdesc *d, loom_status *st) {
  int64_t numel = loom__numel(d->ndim, d->dims);
  size_t es = d->dtype == LOOM_STRING ? sizeof(loom_tstring) : loom_dtype_size(d->dtype);
  size_t bytes = (size_t)numel * es;
  if (bytes > o->cap || !o->buf) {
    size_t cap = bytes < 64 ? 64 : bytes + bytes / 2;
    void *b = loom__aligned_alloc(cap);
    if (!b) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory (%zu bytes) in the host pass", cap);
    loom__aligned_free(o->buf);
    o->buf = b;
    o->cap = cap;
  }
  memset(&o->t, 0, sizeof o->t);
  o->t.dtype = d->dtype;
  o->t.ndim = d->ndim;
  memcpy(o->t.dims, d->dims, sizeof(int64_t) * (size_t)d->ndim);
  o->t.numel = numel;
  o->t.nbytes = bytes;
  o->t.data = o->buf;
  if (d->dtype == LOOM_STRING && bytes) memset(o->buf, 0, bytes);
  return LOOM_OK;
}

static void buf_of(loom_buf *b, const loom_tensor *t) {
  b->data = t->data;
  b->dtype = t->dtype;
  b->ndim = t->ndim;
  memcpy(b->dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
  b->numel = t->numel;
}

/* Runs node n of H. */
static loom_code eval_node(loom_session *s, loom_host_pass *hp, const loom_node *n, const loom_output *feeds,
                           loom_tensor *const *fv, int nf, loom_status *st) {
  enum { MAXIO = 64 };
  const loom_op_def *d = n->def;
  if (n->nin > MAXIO || n->nout > MAXIO)
    return loom_status_set(st, LOOM_UNIMPLEMENTED, "%s: too many inputs or outputs for the host pass", n->name);
  loom_buf inb[MAXIO], outb[MAXIO];
  loom_buf *inp[MAXIO], *outp[MAXIO];
  loom_tdesc ind[MAXIO], outd[MAXIO];
  const loom_tensor *vals[MAXIO];
  for (int k = 0; k < n->nin; k++) {
    const loom_node *m = n->in[k].node;
    int slot = fed_slot(feeds, nf, m, n->in[k].index);
    const loom_tensor *t = NULL;
    if (slot >= 0) t = fv[slot];
    else if (m->def->flags & LOOM_OPF_CONST) t = m->value;
    else if (hp->outs[m->id]) t = &hp->outs[m->id][n->in[k].index].t;
    if (!t)
      return loom_status_set(st, LOOM_INTERNAL, "%s: input %d (%s) has no value in the host pass", n->name, k,
                             m->name);
    buf_of(&inb[k], t);
    inp[k] = &inb[k];
    ind[k].dtype = t->dtype;
    ind[k].ndim = t->ndim;
    memcpy(ind[k].dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    vals[k] = (m->def->flags & LOOM_OPF_CONST) ? m->value : NULL;
  }
  memset(outd, 0, sizeof(loom_tdesc) * (size_t)n->nout);
  char msg[256] = "";
  loom_code rc;
  if ((d->flags & LOOM_OPF_DATA_SHAPE) && d->value_shape) {
    rc = d->value_shape(&n->attrs, n->nin, (const loom_buf *const *)inp, n->nout, outd, msg, sizeof msg);
  } else {
    loom_shape_ctx c;
    memset(&c, 0, sizeof c);
    c.attrs = &n->attrs;
    c.nin = n->nin;
    c.in = ind;
    c.in_value = vals;
    c.nout = n->nout;
    c.out = outd;
    rc = d->shape(&c);
    if (rc) snprintf(msg, sizeof msg, "%s", c.msg);
  }
  for (int j = 0; !rc && j < n->nout; j++)
    for (int k = 0; k < outd[j].ndim; k++)
      if (outd[j].dims[k] < 0) {
        rc = LOOM_INTERNAL;
        snprintf(msg, sizeof msg, "output %d has unknown dimension %d in the host pass", j, k);
      }
  if (rc) return loom_status_set(st, rc, "%s: %s", n->name, msg[0] ? msg : "invalid shapes at run time");
  if (!hp->outs[n->id]) {
    /* n->nout outputs plus a sentinel (cap = -1) so the free knows the count */
    hp_out *o = loom__calloc((size_t)n->nout + 1, sizeof *o);
    if (!o) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory in the host pass");
    o[n->nout].cap = (size_t)-1;
    hp->outs[n->id] = o;
  }
  loom_dtype key = (n->nin > 0 && !(d->flags & LOOM_OPF_KEY_OUTPUT)) ? inb[0].dtype
                   : (n->nout > 0 ? outd[0].dtype : LOOM_DTYPE_INVALID);
  loom_kernel_fn fn = d->kernels[LOOM_DEVICE_CPU][key >= 0 && key < LOOM_DTYPE_COUNT ? key : 0];
  if (!fn) fn = d->kernels[LOOM_DEVICE_CPU][0];
  if (!fn && (d->flags & LOOM_OPF_ALIAS0) && !(d->flags & LOOM_OPF_MUTATES_INPUT0) && n->nin >= 1 && n->nout == 1 &&
      loom__numel(outd[0].ndim, outd[0].dims) == inb[0].numel && outd[0].dtype == inb[0].dtype) {
    /* a view op (Reshape, ExpandDims, Squeeze, ...) has no kernel: as in
     * the plan, its output is its input's bytes with the new shape (they
     * live for the whole pass and run) */
    hp_out *o = &hp->outs[n->id][0];
    memset(&o->t, 0, sizeof o->t);
    o->t.dtype = outd[0].dtype;
    o->t.ndim = outd[0].ndim;
    memcpy(o->t.dims, outd[0].dims, sizeof(int64_t) * (size_t)outd[0].ndim);
    o->t.numel = inb[0].numel;
    o->t.nbytes = (size_t)inb[0].numel * (inb[0].dtype == LOOM_STRING ? sizeof(loom_tstring) : loom_dtype_size(inb[0].dtype));
    o->t.data = inb[0].data;
    return LOOM_OK;
  }
  for (int j = 0; j < n->nout; j++) {
    hp_out *o = &hp->outs[n->id][j];
    if ((rc = out_ensure(o, &outd[j], st))) return rc;
    buf_of(&outb[j], &o->t);
    outp[j] = &outb[j];
  }
  if (!fn)
    return loom_status_set(st, LOOM_UNIMPLEMENTED, "%s: no CPU kernel for %s on %s", n->name, d->name,
                           loom_dtype_name(key));
  size_t ws = d->workspace ? d->workspace(&n->attrs, n->nin, (const loom_buf *const *)inp, n->nout,
                                          (const loom_buf *const *)outp)
                           : 0;
  if (ws > hp->ws_cap) {
    void *w = loom__aligned_alloc(ws);
    if (!w) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory for %zu bytes of workspace", n->name, ws);
    loom__aligned_free(hp->ws);
    hp->ws = w;
    hp->ws_cap = ws;
  }
  static uint64_t no_counter;
  loom_kctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.attrs = &n->attrs;
  ctx.nin = n->nin;
  ctx.nout = n->nout;
  ctx.in = inp;
  ctx.out = outp;
  ctx.ws = ws ? hp->ws : NULL;
  ctx.ws_size = ws;
  ctx.pool = s->pool;
  ctx.counter = (s->counters && n->id < s->ncounters) ? &s->counters[n->id] : &no_counter;
  ctx.st = st;
  ctx.strings = &hp->strings;
  loom_status_clear(st);
  rc = fn(&ctx);
  if (rc) {
    char buf[768];
    snprintf(buf, sizeof buf, "%s", loom_status_message(st));
    return loom_status_set(st, rc, "%s: %s", n->name, buf[0] ? buf : loom_code_name(rc));
  }
  return LOOM_OK;
}

static int same_outputs(const loom_output *a, const loom_output *b, int n) {
  for (int i = 0; i < n; i++)
    if (a[i].node != b[i].node || a[i].index != b[i].index) return 0;
  return 1;
}

/* Is the cached walk the one for these feeds, fetches and targets? */
static int cache_hit(const loom_host_pass *hp, const loom_graph *g, const loom_output *feeds, int nf,
                     const loom_output *fetches, int nx, loom_node *const *targets, int nt) {
  if (!hp->c_valid || hp->c_N != g->nnodes || hp->c_nf != nf || hp->c_nx != nx || hp->c_nt != nt) return 0;
  if (!same_outputs(hp->c_feeds, feeds, nf) || !same_outputs(hp->c_fetches, fetches, nx)) return 0;
  for (int i = 0; i < nt; i++)
    if (hp->c_targets[i] != targets[i]) return 0;
  return 1;
}

static loom_code cache_keep(loom_host_pass *hp, const loom_graph *g, const loom_output *feeds, int nf,
                            const loom_output *fetches, int nx, loom_node *const *targets, int nt, loom_status *st) {
  hp->c_valid = 0;
  if (nf > hp->c_capf) {
    loom_output *f = loom__realloc(hp->c_feeds, (size_t)nf * sizeof *f);
    if (!f) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
    hp->c_feeds = f;
    hp->c_capf = nf;
  }
  if (nx > hp->c_capx) {
    loom_output *f = loom__realloc(hp->c_fetches, (size_t)nx * sizeof *f);
    if (!f) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
    hp->c_fetches = f;
    hp->c_capx = nx;
  }
  if (nt > hp->c_capt) {
    loom_node **t = loom__realloc(hp->c_targets, (size_t)nt * sizeof *t);
    if (!t) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
    hp->c_targets = t;
    hp->c_capt = nt;
  }
  if (nf) memcpy(hp->c_feeds, feeds, (size_t)nf * sizeof *feeds);
  if (nx) memcpy(hp->c_fetches, fetches, (size_t)nx * sizeof *fetches);
  if (nt) memcpy(hp->c_targets, targets, (size_t)nt * sizeof *targets);
  hp->c_N = g->nnodes;
  hp->c_nf = nf;
  hp->c_nx = nx;
  hp->c_nt = nt;
  hp->c_valid = 1;
  return LOOM_OK;
}

/* Finds H (order[0..c_nh), dependency order) and its frontier (c_front)
 * for these feeds, fetches and targets. */
static loom_code host_pass_walk(loom_session *s, loom_host_pass *hp, const loom_output *feeds, int nf,
                                const loom_output *fetches, int nx, loom_node *const *targets, int nt,
                                loom_status *st) {
  loom_graph *g = s->graph;
  hp->c_valid = 0;
  hp->c_nh = 0;
  hp->c_nfront = 0;
  loom_code rc = grow(hp, g->nnodes, st);
  if (rc) return rc;
  const int N = g->nnodes;
  memset(hp->mark, 0, (size_t)N);
  /* 1. the nodes the run needs (bit 1) */
  int nroots = nx + nt;
  /* the roots array is kept from run to run (a steady run allocates nothing);
   * it holds the fetches and targets, then the data-shape nodes (<= N) */
  int need = (nroots > N ? nroots : N) + 1;
  if (need > hp->roots_cap) {
    const loom_node **r = loom__realloc(hp->roots, (size_t)need * sizeof *r);
    if (!r) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
    hp->roots = r;
    hp->roots_cap = need;
  }
  const loom_node **roots = hp->roots;
  for (int i = 0; i < nx; i++) roots[i] = fetches[i].node;
  for (int i = 0; i < nt; i++) roots[nx + i] = targets[i];
  walk(hp, g, feeds, nf, nroots, roots, 1, 1);
  /* 2. H (bit 2): the needed data-shape nodes and their inputs' closure */
  int nd = 0;
  for (int i = 0; i < N; i++)
    if ((hp->mark[i] & 1) && (g->nodes[i]->def->flags & LOOM_OPF_DATA_SHAPE) && !node_fed(feeds, nf, g->nodes[i]))
      roots[nd++] = g->nodes[i];
  if (nd == 0) return cache_keep(hp, g, feeds, nf, fetches, nx, targets, nt, st);
  walk(hp, g, feeds, nf, nd, roots, 2, 0);
  /* 3. check H and order it (node ids are a topological order: inputs exist
   * before the nodes that use them) */
  int nh = 0;
  for (int i = 0; i < N; i++) {
    if (!(hp->mark[i] & 2)) continue;
    const loom_node *n = g->nodes[i];
    if (node_fed(feeds, nf, n) || (n->def->flags & LOOM_OPF_CONST)) continue;
    const char *why = NULL;
    if (n->def->flags & LOOM_OPF_VARIABLE) why = "is a variable";
    else if (n->def->flags & LOOM_OPF_FEED_ONLY) why = "is a placeholder that is not fed";
    else if (n->def->flags & (LOOM_OPF_STATEFUL | LOOM_OPF_MUTATES_INPUT0)) why = "is stateful";
    else if (n->def->bind) why = "is bound to session state";
    else if (n->nctrl) why = "has control dependencies";
    if (why) {
      const loom_node *user = n; /* an H node that needs n, for the message */
      for (int j = i + 1; j < N && user == n; j++)
        if (hp->mark[j] & 2)
          for (int k = 0; k < g->nodes[j]->nin; k++)
            if (g->nodes[j]->in[k].node == n) user = g->nodes[j];
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: data-dependent shapes must be computed from feeds and constants, but %s %s",
                             user->name, n->name, why);
    }
    hp->order[nh++] = i;
  }
  /* 4. the frontier: every H node (not fed, not a constant) whose outputs a
   * needed node outside H uses, or that is fetched; a target computed here
   * is done: feeding its outputs keeps the run from planning it again (with
   * shapes it cannot know) */
  uint8_t *front = hp->mark; /* bit 4 for "frontier" */
  for (int i = 0; i < nh; i++) front[hp->order[i]] |= 8; /* bit 8: evaluated here */
  for (int i = 0; i < N; i++) {
    if (!(hp->mark[i] & 1) || (hp->mark[i] & 2) || node_fed(feeds, nf, g->nodes[i])) continue;
    const loom_node *n = g->nodes[i];
    for (int k = 0; k < n->nin; k++) {
      int m = n->in[k].node->id;
      if (front[m] & 8) front[m] |= 4;
    }
  }
  for (int i = 0; i < nx; i++)
    if (front[fetches[i].node->id] & 8) front[fetches[i].node->id] |= 4;
  for (int i = 0; i < nt; i++)
    if (front[targets[i]->id] & 8) front[targets[i]->id] |= 4;
  int nfront = 0;
  for (int i = 0; i < N; i++)
    if (front[i] & 4) hp->c_front[nfront++] = i;
  hp->c_nh = nh;
  hp->c_nfront = nfront;
  return cache_keep(hp, g, feeds, nf, fetches, nx, targets, nt, st);
}

loom_code loom__host_pass_run(loom_session *s, const loom_output *feeds, loom_tensor *const *fv, int nf,
                              const loom_output *fetches, int nx, loom_node *const *targets, int nt,
                              const loom_output **xfeeds, loom_tensor *const **xvals, int *nxf, loom_status *st) {
  loom_graph *g = s->graph;
  *xfeeds = feeds;
  *xvals = fv;
  *nxf = nf;
  if (!s->host_pass && !(s->host_pass = loom__calloc(1, sizeof *s->host_pass)))
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
  loom_host_pass *hp = s->host_pass;
  for (; hp->scanned < g->nnodes; hp->scanned++)
    if (g->nodes[hp->scanned]->def->flags & LOOM_OPF_DATA_SHAPE) hp->any = 1;
  if (!hp->any) return LOOM_OK;
  loom_code rc;
  if (!cache_hit(hp, g, feeds, nf, fetches, nx, targets, nt) &&
      (rc = host_pass_walk(s, hp, feeds, nf, fetches, nx, targets, nt, st)))
    return rc;
  const int nh = hp->c_nh;
  if (nh == 0) return LOOM_OK;
  /* run H */
  loom__strarena_reset(&hp->strings);
  for (int i = 0; i < nh; i++)
    if ((rc = eval_node(s, hp, g->nodes[hp->order[i]], feeds, fv, nf, st))) return rc;
  /* feed the frontier */
  int nextra = 0;
  for (int i = 0; i < hp->c_nfront; i++) nextra += g->nodes[hp->c_front[i]]->nout;
  if (nf + nextra > hp->xcap) {
    int cap = nf + nextra;
    loom_output *xf = loom__realloc(hp->xfeeds, (size_t)cap * sizeof *xf);
    if (xf) hp->xfeeds = xf;
    loom_tensor **xv = loom__realloc(hp->xvals, (size_t)cap * sizeof *xv);
    if (xv) hp->xvals = xv;
    if (!xf || !xv) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
    hp->xcap = cap;
  }
  if (nf) {
    memcpy(hp->xfeeds, feeds, (size_t)nf * sizeof *feeds);
    memcpy(hp->xvals, fv, (size_t)nf * sizeof *fv);
  }
  int k = nf;
  for (int i = 0; i < hp->c_nfront; i++) {
    int id = hp->c_front[i];
    loom_node *n = g->nodes[id];
    for (int j = 0; j < n->nout; j++) {
      hp->xfeeds[k].node = n;
      hp->xfeeds[k].index = j;
      hp->xvals[k++] = &hp->outs[id][j].t;
    }
  }
  *xfeeds = hp->xfeeds;
  *xvals = hp->xvals;
  *nxf = k;
  return LOOM_OK;
}
