/* Sessions: compiled, cached plans; liveness-based memory planning; execution. */
#include <string.h>
#include <stdio.h>
#include <stdint.h>
#include <unistd.h>
#include <time.h>
#include "engine/session_impl.h"
#include "base/pool.h"
#include "base/cpus.h"
#include "engine/backend.h"
#include "engine/fuse.h"

void loom__cpu_set_blas_threads(int n); /* kernels/cpu/blas.c */

loom_session_options loom_session_options_default(void) {
  loom_session_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.num_threads = 0;
  o.device = LOOM_DEVICE_CPU;
  return o;
}

/* The first session of a process says at INFO how many threads it runs and
 * why; later ones only when their count differs from the last one said. */
static void log_threads(int n, const char *why) {
  static atomic_int last = 0;
  if (atomic_exchange(&last, n) != n) loom__log(LOOM_LOG_INFO, "session: %s", why);
}

loom_session *loom_session_new(loom_graph *g, const loom_session_options *opts, loom_status *st) {
  if (!g) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "session: graph is NULL");
    return NULL;
  }
  loom_session_options o = loom_session_options_default();
  if (LOOM__OPTS_TAKE(&o, opts, "session", loom_session_options, st)) return NULL;
  if (o.device != LOOM_DEVICE_CPU && o.device != LOOM_DEVICE_CUDA) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "session: unknown device %d", (int)o.device);
    return NULL;
  }
  if (o.device != LOOM_DEVICE_CPU && loom__backend_device_count(o.device) <= 0) {
    loom_status_set(st, LOOM_UNAVAILABLE, "session: no CUDA device%s",
                    loom__backend_get(o.device) ? "" : " (this build has no CUDA backend; build with make CUDA=1)");
    return NULL;
  }
  char why[256];
  o.num_threads = loom__threads_resolve(o.num_threads, why, sizeof why);
  log_threads(o.num_threads, why);
  loom_session *s = loom__calloc(1, sizeof *s);
  if (!s) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
    return NULL;
  }
  s->graph = g;
  s->opts = o;
  s->pool = loom__pool_new(o.num_threads);
  if (!s->pool) {
    loom__free(s);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: cannot create thread pool");
    return NULL;
  }
  /* One thread budget: the pool splits large products into blocks and BLAS
   * runs each block on one thread, so the two never oversubscribe the cores. */
  loom__cpu_set_blas_threads(o.num_threads);
  pthread_mutex_init(&s->mu, NULL);
  atomic_init(&s->cancel, 0);
  if (o.device != LOOM_DEVICE_CPU && loom__dev_session_new(s, st)) {
    loom_session_free(s);
    return NULL;
  }
  return s;
}

static void plan_free(loom_plan *p) {
  if (!p) return;
  loom__free(p->feeds);
  loom__free(p->fetches);
  loom__free(p->targets);
  loom__free(p->order);
  loom__free(p->node_val);
  loom__free(p->values);
  for (int i = 0; p->steps && i < p->nsteps; i++) {
    loom__free(p->steps[i].colsum_mem);
    loom__free(p->steps[i].argmax_mem);
  }
  loom__free(p->steps);
  loom__free(p->ptrs);
  loom__free(p->fetch_val);
  loom__free(p->feed_val);
  loom__free(p->fetch_ready);
  loom__free(p->ready_order);
  loom__free(p->feed_shape);
  loom__dev_plan_free(p);
  loom__free(p);
}

void loom_session_free(loom_session *s) {
  if (!s) return;
  loom_plan *p = s->plans;
  while (p) {
    loom_plan *n = p->next;
    plan_free(p);
    p = n;
  }
  if (s->vars && s->vars_free) s->vars_free(s->vars);
  loom__dev_session_free(s);
  loom__free(s->counters);
  loom__free(s->trace);
  loom__host_pass_free(s->host_pass);
  loom__strarena_free(&s->strings);
  loom__pool_free(s->pool);
  loom__aligned_free(s->arena);
  pthread_mutex_destroy(&s->mu);
  loom__free(s);
}

loom_graph *loom_session_graph(loom_session *s) { return s ? s->graph : NULL; }
void loom_session_cancel(loom_session *s) {
  if (s) atomic_store(&s->cancel, 1);
}
void loom_session_get_stats(const loom_session *s, loom_session_stats *out) {
  if (s && out) *out = s->stats;
}

/* ---- signature ---- */
static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
static uint64_t sig_hash(const loom_output *feeds, int nf, const loom_output *fetches, int nx,
                         loom_node *const *targets, int nt) {
  uint64_t h = mix(mix(mix(0, (uint64_t)nf), (uint64_t)nx), (uint64_t)nt);
  for (int i = 0; i < nf; i++) h = mix(mix(h, (uint64_t)(uintptr_t)feeds[i].node), (uint64_t)feeds[i].index);
  for (int i = 0; i < nx; i++) h = mix(mix(h, (uint64_t)(uintptr_t)fetches[i].node), (uint64_t)fetches[i].index);
  for (int i = 0; i < nt; i++) h = mix(h, (uint64_t)(uintptr_t)targets[i]);
  return h;
}
static int out_eq(loom_output a, loom_output b) { return a.node == b.node && a.index == b.index; }
static loom_plan *find_plan(loom_session *s, uint64_t h, const loom_output *feeds, int nf, const loom_output *fetches,
                            int nx, loom_node *const *targets, int nt) {
  for (loom_plan *p = s->plans; p; p = p->next) {
    if (p->hash != h || p->nfeeds != nf || p->nfetches != nx || p->ntargets != nt) continue;
    int ok = 1;
    for (int i = 0; ok && i < nf; i++) ok = out_eq(p->feeds[i], feeds[i]);
    for (int i = 0; ok && i < nx; i++) ok = out_eq(p->fetches[i], fetches[i]);
    for (int i = 0; ok && i < nt; i++) ok = p->targets[i] == targets[i];
    if (ok) return p;
  }
  return NULL;
}

static int node_in_graph(const loom_graph *g, const loom_node *n) {
  return n && n->graph == g && n->id >= 0 && n->id < g->nnodes && g->nodes[n->id] == n;
}

/* ---- compile ---- */
static int feed_slot_of(const loom_output *feeds, int nf, const loom_node *n, int idx) {
  for (int i = 0; i < nf; i++)
    if (feeds[i].node == n && feeds[i].index == idx) return i;
  return -1;
}
static int node_fed(const loom_output *feeds, int nf, const loom_node *n) {
  for (int i = 0; i < nf; i++)
    if (feeds[i].node == n) return 1;
  return 0;
}

/* Iterative DFS post-order from fetches and targets into p->order; fed nodes
 * are leaves. extra_off/extra (CSR by node id, may be NULL) add edges "must
 * run after" to a node beyond its inputs and control inputs; an extra edge
 * that would close a cycle is skipped (only inputs and control inputs are
 * binding). state must be all 0 on entry. */
static loom_code plan_dfs(const loom_graph *g, loom_plan *p, const loom_output *feeds, int nf,
                          const loom_output *fetches, int nx, loom_node *const *targets, int nt,
                          const int32_t *extra_off, const int32_t *extra, uint8_t *state, int32_t *stack,
                          loom_status *st) {
  p->nnodes = 0;
  int nroots = nx + nt;
  for (int r = 0; r < nroots; r++) {
    const loom_node *root = r < nx ? fetches[r].node : targets[r - nx];
    if (state[root->id] == 2) continue;
    int sp = 0;
    stack[sp++] = root->id;
    stack[sp++] = 0;
    state[root->id] = 1;
    while (sp) {
      int id = stack[sp - 2];
      int k = stack[sp - 1];
      const loom_node *n = g->nodes[id];
      int fed = node_fed(feeds, nf, n);
      int nedges = fed ? 0 : n->nin + n->nctrl;
      int nextra = fed || !extra_off ? 0 : extra_off[id + 1] - extra_off[id];
      if (k < nedges + nextra) {
        stack[sp - 1] = k + 1;
        const loom_node *m = k < n->nin ? n->in[k].node
                             : k < nedges ? n->ctrl[k - n->nin]
                                          : g->nodes[extra[extra_off[id] + k - nedges]];
        if (!node_in_graph(g, m)) return loom_status_set(st, LOOM_INTERNAL, "%s: input node is not in the graph", n->name);
        if (state[m->id] == 1) {
          if (k >= nedges) continue; /* an ordering edge that cannot hold: inputs decide */
          return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: the graph has a cycle through %s", n->name, m->name);
        }
        if (state[m->id] == 0) {
          state[m->id] = 1;
          stack[sp++] = m->id;
          stack[sp++] = 0;
        }
      } else {
        state[id] = 2;
        p->order[p->nnodes++] = n;
        sp -= 2;
      }
    }
  }
  return LOOM_OK;
}

/* The variable whose buffer output (n, idx) is: through ops whose output 0
 * aliases their input 0 (views, in-place updates) down to a variable node;
 * NULL for anything else. */
static const loom_node *var_root(const loom_output *feeds, int nf, const loom_node *n, int idx) {
  for (int hops = 0; n && hops < 1024; hops++) {
    if (node_fed(feeds, nf, n)) return NULL;
    if (n->def->bind) return n;
    if (!(n->def->flags & LOOM_OPF_ALIAS0) || idx != 0 || n->nin < 1) return NULL;
    idx = n->in[0].index;
    n = n->in[0].node;
  }
  return NULL;
}

/* Write-after-read ordering. An op that updates a variable in place (Assign,
 * the Apply* optimizers) must run after every other op of the plan that reads
 * that variable, unless the reader depends on the update. Otherwise, with the
 * updates of a step scheduled in creation order, the gradient of one variable
 * could read another one already updated (w2 created before w1: w1's gradient
 * reads w2). TF's semantics: every gradient sees the step's pre-update values.
 * Adds those edges and redoes the DFS when any is missing. */
static loom_code order_mutations(const loom_graph *g, loom_plan *p, const loom_output *feeds, int nf,
                                 const loom_output *fetches, int nx, loom_node *const *targets, int nt,
                                 uint8_t *state, int32_t *stack, loom_status *st) {
  int N = g->nnodes, nn = p->nnodes;
  int nmut = 0, nreads = 0;
  for (int i = 0; i < nn; i++) {
    const loom_node *n = p->order[i];
    if (node_fed(feeds, nf, n) || n->def->bind) continue;
    for (int j = 0; j < n->nin; j++)
      if (var_root(feeds, nf, n->in[j].node, n->in[j].index)) {
        nreads++;
        if (loom__op_mutates(n->def, j)) nmut++;
      }
  }
  if (!nmut) return LOOM_OK;
  loom_code rc = LOOM_OK;
  /* reads[r] = (reader position, variable id, mutates); consumers in CSR */
  int32_t *pos = loom__malloc(((size_t)N + 1) * sizeof *pos);
  int32_t *rd = loom__malloc(((size_t)nreads * 3 + 1) * sizeof *rd);
  int32_t *coff = loom__calloc((size_t)nn + 2, sizeof *coff);
  int32_t *cons = NULL, *mark = NULL, *queue = NULL, *eoff = NULL, *edges = NULL, *esrc = NULL, *edst = NULL;
  int nedges = 0, capedges = 0;
  if (!pos || !rd || !coff) goto oom;
  for (int i = 0; i < N; i++) pos[i] = -1;
  for (int i = 0; i < nn; i++) pos[p->order[i]->id] = i;
  int nr = 0, ncons = 0;
  for (int i = 0; i < nn; i++) {
    const loom_node *n = p->order[i];
    if (node_fed(feeds, nf, n)) continue;
    for (int k = 0; k < n->nin + n->nctrl; k++) {
      const loom_node *m = k < n->nin ? n->in[k].node : n->ctrl[k - n->nin];
      if (pos[m->id] >= 0) coff[pos[m->id] + 1]++, ncons++;
    }
    if (n->def->bind) continue;
    for (int j = 0; j < n->nin; j++) {
      const loom_node *v = var_root(feeds, nf, n->in[j].node, n->in[j].index);
      if (!v) continue;
      /* a pure view reads nothing itself (its consumers do) */
      if ((n->def->flags & LOOM_OPF_ALIAS0) && !loom__op_mutates(n->def, 0) && j == 0) continue;
      rd[3 * nr] = i, rd[3 * nr + 1] = v->id, rd[3 * nr + 2] = loom__op_mutates(n->def, j);
      nr++;
    }
  }
  for (int i = 0; i < nn; i++) coff[i + 1] += coff[i];
  cons = loom__malloc(((size_t)ncons + 1) * sizeof *cons);
  mark = loom__malloc(((size_t)nn + 1) * sizeof *mark);
  queue = loom__malloc(((size_t)nn + 1) * sizeof *queue);
  if (!cons || !mark || !queue) goto oom;
  {
    int32_t *fill = loom__malloc(((size_t)nn + 1) * sizeof *fill);
    if (!fill) goto oom;
    memcpy(fill, coff, (size_t)nn * sizeof *fill);
    for (int i = 0; i < nn; i++) {
      const loom_node *n = p->order[i];
      if (node_fed(feeds, nf, n)) continue;
      for (int k = 0; k < n->nin + n->nctrl; k++) {
        const loom_node *m = k < n->nin ? n->in[k].node : n->ctrl[k - n->nin];
        if (pos[m->id] >= 0) cons[fill[pos[m->id]]++] = i;
      }
    }
    loom__free(fill);
  }
  for (int i = 0; i < nn; i++) mark[i] = -1;
  for (int r = 0; r < nr; r++) {
    if (!rd[3 * r + 2]) continue;
    int mi = rd[3 * r], var = rd[3 * r + 1];
    /* the descendants of the update (they run after it anyway) */
    int qh = 0, qt = 0;
    queue[qt++] = mi; /* marks are stamped with r: no reset between updates */
    mark[mi] = r;
    while (qh < qt) {
      int u = queue[qh++];
      for (int c = coff[u]; c < coff[u + 1]; c++)
        if (mark[cons[c]] != r) mark[cons[c]] = r, queue[qt++] = cons[c];
    }
    for (int q = 0; q < nr; q++) {
      int ri = rd[3 * q];
      /* other updates of the same variable keep their order */
      if (rd[3 * q + 1] != var || rd[3 * q + 2] || mark[ri] == r) continue;
      if (nedges == capedges) {
        int nc = capedges ? 2 * capedges : 64;
        int32_t *a = loom__realloc(esrc, (size_t)nc * sizeof *a);
        if (!a) goto oom;
        esrc = a;
        int32_t *b = loom__realloc(edst, (size_t)nc * sizeof *b);
        if (!b) goto oom;
        edst = b;
        capedges = nc;
      }
      esrc[nedges] = p->order[mi]->id, edst[nedges] = p->order[ri]->id, nedges++;
    }
  }
  /* only redo the order when some reader runs after the update that should wait for it */
  int needed = 0;
  for (int e = 0; e < nedges && !needed; e++) needed = pos[edst[e]] > pos[esrc[e]];
  if (needed) {
    eoff = loom__calloc((size_t)N + 2, sizeof *eoff);
    edges = loom__malloc(((size_t)nedges + 1) * sizeof *edges);
    if (!eoff || !edges) goto oom;
    for (int e = 0; e < nedges; e++) eoff[esrc[e] + 1]++;
    for (int i = 0; i < N; i++) eoff[i + 1] += eoff[i];
    int32_t *fill = loom__malloc(((size_t)N + 1) * sizeof *fill);
    if (!fill) goto oom;
    memcpy(fill, eoff, (size_t)N * sizeof *fill);
    for (int e = 0; e < nedges; e++) edges[fill[esrc[e]]++] = edst[e];
    loom__free(fill);
    memset(state, 0, (size_t)N + 1);
    rc = plan_dfs(g, p, feeds, nf, fetches, nx, targets, nt, eoff, edges, state, stack, st);
  }
  goto done;
oom:
  rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory compiling a plan");
done:
  loom__free(pos);
  loom__free(rd);
  loom__free(coff);
  loom__free(cons);
  loom__free(mark);
  loom__free(queue);
  loom__free(eoff);
  loom__free(edges);
  loom__free(esrc);
  loom__free(edst);
  return rc;
}

static loom_code fetch_readiness(loom_plan *p, loom_status *st);
static loom_code compile_plan(loom_session *s, const loom_output *feeds, int nf, const loom_output *fetches, int nx,
                              loom_node *const *targets, int nt, loom_plan **out, loom_status *st) {
  loom_graph *g = s->graph;
  int N = g->nnodes;
  loom_code rc = LOOM_OK;
  loom_plan *p = loom__calloc(1, sizeof *p);
  uint8_t *state = loom__calloc((size_t)N + 1, 1); /* 0 new, 1 on stack, 2 done */
  int32_t *stack = loom__malloc(((size_t)N + 1) * 2 * sizeof(int32_t));
  if (!p || !state || !stack) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory compiling a plan");
    goto fail;
  }
  p->hash = sig_hash(feeds, nf, fetches, nx, targets, nt);
  p->nfeeds = nf;
  p->nfetches = nx;
  p->ntargets = nt;
  p->feeds = loom__calloc((size_t)nf + 1, sizeof *p->feeds);
  p->fetches = loom__calloc((size_t)nx + 1, sizeof *p->fetches);
  p->targets = loom__calloc((size_t)nt + 1, sizeof *p->targets);
  p->order = loom__calloc((size_t)N + 1, sizeof *p->order);
  p->node_val = loom__malloc(((size_t)N + 1) * sizeof *p->node_val);
  p->fetch_val = loom__calloc((size_t)nx + 1, sizeof *p->fetch_val);
  p->feed_val = loom__calloc((size_t)nf + 1, sizeof *p->feed_val);
  p->feed_shape = loom__calloc((size_t)nf + 1, sizeof *p->feed_shape);
  if (!p->feeds || !p->fetches || !p->targets || !p->order || !p->node_val || !p->fetch_val || !p->feed_val ||
      !p->feed_shape) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory compiling a plan");
    goto fail;
  }
  if (nf) memcpy(p->feeds, feeds, (size_t)nf * sizeof *feeds);
  if (nx) memcpy(p->fetches, fetches, (size_t)nx * sizeof *fetches);
  if (nt) memcpy(p->targets, targets, (size_t)nt * sizeof *targets);
  p->node_cap = N;
  for (int i = 0; i < N; i++) p->node_val[i] = -1;

  /* Iterative DFS post-order from fetches and targets; fed nodes are leaves. */
  if ((rc = plan_dfs(g, p, feeds, nf, fetches, nx, targets, nt, NULL, NULL, state, stack, st))) goto fail;
  /* then again, if some in-place update must wait for other readers of its variable */
  if ((rc = order_mutations(g, p, feeds, nf, fetches, nx, targets, nt, state, stack, st))) goto fail;

  /* Device sessions: the plan runs on the device unless it holds strings. */
  if (s->dev) {
    int strings = 0;
    for (int i = 0; i < p->nnodes && !strings; i++)
      for (int j = 0; j < p->order[i]->nout; j++) strings |= p->order[i]->out[j].dtype == LOOM_STRING;
    p->host_only = strings;
    if (!strings && !(p->dev = loom__dev_plan_new(s))) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory compiling a plan");
      goto fail;
    }
    if (strings) loom__log(LOOM_LOG_INFO, "session: a plan with string values runs on the CPU");
  }
  /* Values: one per output of every needed node. */
  int nvals = 0;
  for (int i = 0; i < p->nnodes; i++) nvals += p->order[i]->nout;
  p->values = loom__calloc((size_t)nvals + 1, sizeof *p->values);
  p->steps = loom__calloc((size_t)p->nnodes + 1, sizeof *p->steps);
  if (!p->values || !p->steps) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory compiling a plan");
    goto fail;
  }
  int nptrs = 0;
  for (int i = 0; i < p->nnodes; i++) {
    const loom_node *n = p->order[i];
    const loom_op_def *d = n->def;
    int fed = node_fed(feeds, nf, n);
    p->node_val[n->id] = p->nvalues;
    for (int j = 0; j < n->nout; j++) {
      plan_value *v = &p->values[p->nvalues++];
      v->node = n;
      v->index = j;
      v->producer = -1;
      v->last_use = -1;
      v->feed_slot = -1;
      v->alias_of = -1;
      v->buf.dtype = n->out[j].dtype;
      if (fed) {
        v->feed_slot = feed_slot_of(feeds, nf, n, j);
        v->kind = v->feed_slot >= 0 ? VAL_FEED : VAL_NONE;
      } else if (d->bind) {
        v->kind = VAL_BIND;
      } else if ((d->flags & LOOM_OPF_ALIAS0) && j == 0) {
        v->kind = VAL_ALIAS;
        v->alias_of = p->node_val[n->in[0].node->id] + n->in[0].index;
      } else {
        v->kind = VAL_ARENA;
      }
    }
    if (fed) {
      for (int j = 0; j < n->nout; j++)
        if (feed_slot_of(feeds, nf, n, j) < 0) {
          /* partially fed multi-output node: its other outputs are unavailable */
          for (int x = 0; x < nx; x++)
            if (fetches[x].node == n && fetches[x].index == j) {
              rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: output %d is fetched but another output is fed",
                                   n->name, j);
              goto fail;
            }
        }
      continue;
    }
    if (d->flags & LOOM_OPF_FEED_ONLY) {
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: placeholder must be fed (it is needed by this run)",
                           n->name);
      goto fail;
    }
    /* pure views need no kernel; in-place ops (assign, optimizers) alias and run */
    if (d->bind || ((d->flags & LOOM_OPF_ALIAS0) && !(d->flags & LOOM_OPF_MUTATES_INPUT0))) continue;
    /* resolve the kernel */
    loom_dtype key = (n->nin > 0 && !(d->flags & LOOM_OPF_KEY_OUTPUT)) ? n->in[0].node->out[n->in[0].index].dtype
                     : (n->nout > 0 ? n->out[0].dtype : LOOM_DTYPE_INVALID);
    int on_host = 0;
    loom_kernel_fn fn;
    if (p->dev) {
      fn = loom__dev_resolve(s, n, key, &on_host);
    } else {
      fn = d->kernels[LOOM_DEVICE_CPU][key >= 0 && key < LOOM_DTYPE_COUNT ? key : 0];
      if (!fn) fn = d->kernels[LOOM_DEVICE_CPU][0]; /* dtype-agnostic kernel (NoOp, Cast, ...) */
    }
    if (!fn) {
      rc = loom_status_set(st, LOOM_UNIMPLEMENTED, "%s: op %s has no CPU kernel for %s", n->name, d->name,
                           loom_dtype_name(key));
      goto fail;
    }
    plan_step *sp = &p->steps[p->nsteps++];
    sp->fn = fn;
    sp->node = n;
    sp->on_host = on_host;
    sp->ws_value = -1;
    nptrs += n->nin + n->nout;
  }
  /* feeds are read-only: an in-place op (Assign, Apply*) must not write a fed value */
  for (int i = 0; i < p->nsteps; i++) {
    const loom_node *n = p->steps[i].node;
    if (!(n->def->flags & LOOM_OPF_MUTATES_INPUT0) || n->nin < 1) continue;
    int vi = p->node_val[n->in[0].node->id] + n->in[0].index;
    while (p->values[vi].kind == VAL_ALIAS) vi = p->values[vi].alias_of;
    if (p->values[vi].kind == VAL_FEED || p->values[vi].kind == VAL_NONE) {
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: would modify %s in place, but this run feeds it", n->name,
                           p->values[vi].node->name);
      goto fail;
    }
  }
  p->ptrs = loom__calloc((size_t)nptrs + 1, sizeof *p->ptrs);
  if (!p->ptrs) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory compiling a plan");
    goto fail;
  }
  int pi = 0;
  for (int i = 0; i < p->nsteps; i++) {
    plan_step *sp = &p->steps[i];
    const loom_node *n = sp->node;
    loom_buf **ins = &p->ptrs[pi];
    for (int k = 0; k < n->nin; k++) {
      int vi = p->node_val[n->in[k].node->id] + n->in[k].index;
      p->ptrs[pi++] = &p->values[vi].buf;
    }
    loom_buf **outs = &p->ptrs[pi];
    for (int k = 0; k < n->nout; k++) {
      plan_value *v = &p->values[p->node_val[n->id] + k];
      v->producer = i;
      p->ptrs[pi++] = &v->buf;
    }
    sp->ctx.attrs = &n->attrs;
    sp->ctx.nin = n->nin;
    sp->ctx.nout = n->nout;
    sp->ctx.in = ins;
    sp->ctx.out = outs;
    sp->ctx.pool = s->pool;
    sp->ctx.strings = &s->strings; /* string-producing CPU kernels (a plan with strings runs on the CPU) */
    sp->ctx.backend = p->dev && !sp->on_host ? loom__dev_context(s) : NULL;
  }
  for (int i = 0; i < nx; i++) p->fetch_val[i] = p->node_val[fetches[i].node->id] + fetches[i].index;
  if ((rc = fetch_readiness(p, st))) goto fail;
  for (int i = 0; i < nf; i++) p->feed_val[i] = p->node_val[feeds[i].node->id] >= 0
                                                    ? p->node_val[feeds[i].node->id] + feeds[i].index
                                                    : -1;
  loom__free(state);
  loom__free(stack);
  *out = p;
  return LOOM_OK;
fail:
  loom__free(state);
  loom__free(stack);
  plan_free(p);
  return rc;
}

/* p->fetch_ready and p->ready_order (the run observer's schedule): a fetch is final after the last step
 * that writes its bytes: its producer, the producers along its chain of views and in-place ops, and any
 * in-place op (Assign, Apply*) on the same buffer. */
static int root_value(const loom_plan *p, int vi) {
  while (p->values[vi].kind == VAL_ALIAS) vi = p->values[vi].alias_of;
  return vi;
}
static loom_code fetch_readiness(loom_plan *p, loom_status *st) {
  int nx = p->nfetches;
  p->fetch_ready = loom__calloc((size_t)nx + 1, sizeof *p->fetch_ready);
  p->ready_order = loom__calloc((size_t)nx + 1, sizeof *p->ready_order);
  int nmut = 0;
  for (int i = 0; i < p->nsteps; i++) nmut += (p->steps[i].node->def->flags & LOOM_OPF_MUTATES_INPUT0) != 0;
  int32_t *mut = loom__malloc(((size_t)nmut + 1) * 2 * sizeof *mut); /* (step, root value) pairs */
  if (!p->fetch_ready || !p->ready_order || !mut) {
    loom__free(mut);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory compiling a plan");
  }
  nmut = 0;
  for (int i = 0; i < p->nsteps; i++) {
    const loom_node *n = p->steps[i].node;
    if (!(n->def->flags & LOOM_OPF_MUTATES_INPUT0) || n->nin < 1) continue;
    mut[2 * nmut] = i;
    mut[2 * nmut++ + 1] = root_value(p, p->node_val[n->in[0].node->id] + n->in[0].index);
  }
  for (int f = 0; f < nx; f++) {
    int r = -1, vi = p->fetch_val[f];
    for (;;) {
      if (p->values[vi].producer > r) r = p->values[vi].producer;
      if (p->values[vi].kind != VAL_ALIAS) break;
      vi = p->values[vi].alias_of;
    }
    for (int m = 0; m < nmut; m++) /* in-place writers of the same buffer, after it */
      if (mut[2 * m] > r && mut[2 * m + 1] == vi) r = mut[2 * m];
    p->fetch_ready[f] = r;
    /* insertion into the order (fetches are few) */
    int k = f;
    while (k > 0 && p->fetch_ready[p->ready_order[k - 1]] > r) {
      p->ready_order[k] = p->ready_order[k - 1];
      k--;
    }
    p->ready_order[k] = f;
  }
  loom__free(mut);
  return LOOM_OK;
}

void loom__session_set_observer(loom_session *s, const loom__run_observer *obs) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  if (obs && (obs->fetch_ready || obs->step_done))
    s->obs = *obs;
  else
    memset(&s->obs, 0, sizeof s->obs);
  pthread_mutex_unlock(&s->mu);
}

/* Tells the observer of the fetches that are final after step i (-1: before the first step), from
 * position *cur of p->ready_order on. */
static void observe_fetches(loom_session *s, const loom_plan *p, int i, int *cur) {
  while (*cur < p->nfetches && p->fetch_ready[p->ready_order[*cur]] <= i) {
    int f = p->ready_order[(*cur)++];
    const loom_buf *b = &p->values[p->fetch_val[f]].buf;
    s->obs.fetch_ready(s->obs.user, f, p->fetches[f], b->data, b->dtype, b->ndim, b->dims);
  }
}

/* ---- specialization: concrete shapes + memory plan ---- */
typedef struct { int64_t off, size; } block;

typedef struct {
  block *free_list;
  int nfree, capfree;
  int64_t top;
} offset_alloc;

static int64_t oa_alloc(offset_alloc *a, int64_t size) {
  size = (size + 63) & ~(int64_t)63;
  if (size == 0) size = 64;
  int best = -1;
  for (int i = 0; i < a->nfree; i++)
    if (a->free_list[i].size >= size && (best < 0 || a->free_list[i].size < a->free_list[best].size)) best = i;
  if (best >= 0) {
    int64_t off = a->free_list[best].off;
    a->free_list[best].off += size;
    a->free_list[best].size -= size;
    if (a->free_list[best].size == 0) a->free_list[best] = a->free_list[--a->nfree];
    return off;
  }
  /* extend the top; merge a free block touching the top */
  for (int i = 0; i < a->nfree; i++)
    if (a->free_list[i].off + a->free_list[i].size == a->top) {
      int64_t off = a->free_list[i].off;
      a->free_list[i] = a->free_list[--a->nfree];
      a->top = off + size;
      return off;
    }
  int64_t off = a->top;
  a->top += size;
  return off;
}

static int oa_free(offset_alloc *a, int64_t off, int64_t size) {
  size = (size + 63) & ~(int64_t)63;
  if (size == 0) size = 64;
  /* coalesce with neighbours */
  for (int i = 0; i < a->nfree; i++) {
    if (a->free_list[i].off + a->free_list[i].size == off) {
      off = a->free_list[i].off;
      size += a->free_list[i].size;
      a->free_list[i--] = a->free_list[--a->nfree];
    } else if (off + size == a->free_list[i].off) {
      size += a->free_list[i].size;
      a->free_list[i--] = a->free_list[--a->nfree];
    }
  }
  if (a->nfree == a->capfree) {
    int nc = a->capfree ? a->capfree * 2 : 32;
    block *nb = loom__realloc(a->free_list, (size_t)nc * sizeof *nb);
    if (!nb) return -1;
    a->free_list = nb;
    a->capfree = nc;
  }
  a->free_list[a->nfree++] = (block){off, size};
  return 0;
}

static int root_of(const loom_plan *p, int vi) {
  while (p->values[vi].kind == VAL_ALIAS) vi = p->values[vi].alias_of;
  return vi;
}

/* The value whose buffer step i's output 0 may take over (-1: none): an op flagged
 * LOOM_OPF_INPLACE_OK (elementwise: output element j depends on input 0's element j only) in a CPU
 * plan, whose input 0 is an arena value of the same dtype and size that no later step reads and no
 * fetch returns. The kernel then reads and writes the same bytes: one buffer and one pass over
 * memory fewer (BiasAdd, Relu, ReluGrad ... of a convolution's output). */
static int inplace_input(const loom_plan *p, int i) {
  const loom_node *n = p->steps[i].node;
  if (p->dev || !(n->def->flags & LOOM_OPF_INPLACE_OK) || n->nin < 1 || n->nout < 1) return -1;
  const plan_value *v = &p->values[p->node_val[n->id]];
  int r = root_of(p, p->node_val[n->in[0].node->id] + n->in[0].index);
  const plan_value *x = &p->values[r];
  if (x->kind != VAL_ARENA || x->last_use != i || x->bytes != v->bytes || x->bytes == 0 ||
      x->buf.dtype != v->buf.dtype)
    return -1;
  return r;
}

/* The session's CPU arena, grown to at least need bytes (its old contents are not kept: nothing in
 * it outlives a run). Plans bound to the old one are rebound when they next run (bind_arena). */
static loom_code session_arena(loom_session *s, size_t need, loom_status *st) {
  if (need <= s->arena_cap && s->arena) return LOOM_OK;
  void *na = loom__aligned_alloc(need ? need : 64);
  if (!na) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: cannot allocate a %zu-byte arena", need);
  loom__aligned_free(s->arena);
  s->arena = na;
  s->arena_cap = need;
  return LOOM_OK;
}

/* Points p's arena values and workspaces into the arena at base. */
static void bind_arena(loom_plan *p, char *base) {
  const int dev = p->dev != NULL;
  for (int i = 0; i < p->nvalues; i++) {
    plan_value *v = &p->values[i];
    if (v->kind == VAL_ARENA || (dev && v->kind == VAL_FEED)) v->buf.data = base + v->offset;
  }
  for (int i = 0; i < p->nsteps; i++) {
    plan_step *sp = &p->steps[i];
    sp->ctx.ws = sp->ws_bytes && !sp->on_host ? base + sp->ws_offset : NULL;
    sp->ctx.ws_size = sp->ws_bytes;
  }
  p->arena_base = base;
}

static loom_code specialize(loom_session *s, loom_plan *p, loom_tensor *const *fv, loom_status *st) {
  char b1[96], b2[96];
  loom_code rc0;
  /* 1. concrete shapes, in execution order */
  for (int i = 0; i < p->nnodes; i++) {
    const loom_node *n = p->order[i];
    plan_value *v0 = &p->values[p->node_val[n->id]];
    if (v0->kind == VAL_FEED || v0->kind == VAL_NONE) {
      for (int j = 0; j < n->nout; j++) {
        plan_value *v = v0 + j;
        if (v->kind != VAL_FEED) continue;
        const loom_tensor *t = fv[v->feed_slot];
        const loom_tdesc *d = &n->out[j];
        if (t->dtype != d->dtype)
          return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: fed a %s tensor, expected %s", n->name,
                                 loom_dtype_name(t->dtype), loom_dtype_name(d->dtype));
        int ok = t->ndim == d->ndim;
        for (int k = 0; ok && k < d->ndim; k++) ok = d->dims[k] < 0 || d->dims[k] == t->dims[k];
        if (!ok)
          return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: fed shape %s is incompatible with %s", n->name,
                                 loom__dims_str(b1, sizeof b1, t->ndim, t->dims),
                                 loom__dims_str(b2, sizeof b2, d->ndim, d->dims));
        v->buf.ndim = t->ndim;
        memcpy(v->buf.dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
        v->buf.numel = t->numel;
        v->buf.dtype = t->dtype;
      }
      continue;
    }
    loom_tdesc in[64], outd[64];
    const loom_tensor *vals[64];
    loom_tdesc *inp = n->nin <= 64 ? in : loom__calloc((size_t)n->nin, sizeof *inp);
    const loom_tensor **valp = n->nin <= 64 ? vals : loom__calloc((size_t)n->nin, sizeof *valp);
    loom_tdesc *outp = n->nout <= 64 ? outd : loom__calloc((size_t)n->nout, sizeof *outp);
    if (!inp || !valp || !outp) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", n->name);
    for (int k = 0; k < n->nin; k++) {
      const loom_buf *b = &p->values[p->node_val[n->in[k].node->id] + n->in[k].index].buf;
      inp[k].dtype = b->dtype;
      inp[k].ndim = b->ndim;
      memcpy(inp[k].dims, b->dims, sizeof(int64_t) * (size_t)b->ndim);
      valp[k] = n->in[k].node->value;
    }
    memset(outp, 0, sizeof(loom_tdesc) * (size_t)n->nout);
    loom_shape_ctx c;
    memset(&c, 0, sizeof c);
    c.attrs = &n->attrs;
    c.nin = n->nin;
    c.in = inp;
    c.in_value = valp;
    c.nout = n->nout;
    c.out = outp;
    loom_code rc = n->def->shape(&c);
    for (int j = 0; !rc && j < n->nout; j++) {
      plan_value *v = v0 + j;
      v->buf.dtype = outp[j].dtype;
      v->buf.ndim = outp[j].ndim;
      memcpy(v->buf.dims, outp[j].dims, sizeof(int64_t) * (size_t)outp[j].ndim);
      for (int k = 0; k < outp[j].ndim; k++)
        if (outp[j].dims[k] < 0) {
          rc = LOOM_INTERNAL;
          snprintf(c.msg, sizeof c.msg, "output %d has unknown dimension %d at run time", j, k);
        }
      v->buf.numel = loom__numel(outp[j].ndim, outp[j].dims);
    }
    if (inp != in) loom__free(inp);
    if (valp != vals) loom__free((void *)valp);
    if (outp != outd) loom__free(outp);
    if (rc) return loom_status_set(st, rc, "%s: %s", n->name, c.msg[0] ? c.msg : "invalid shapes at run time");
  }
  /* 2. liveness */
  for (int i = 0; i < p->nvalues; i++) {
    plan_value *v = &p->values[i];
    v->last_use = -1;
    v->bytes = (size_t)v->buf.numel * (v->buf.dtype == LOOM_STRING ? sizeof(loom_tstring) : loom_dtype_size(v->buf.dtype));
  }
  for (int i = 0; i < p->nsteps; i++) {
    const loom_node *n = p->steps[i].node;
    for (int k = 0; k < n->nin; k++) {
      int r = root_of(p, p->node_val[n->in[k].node->id] + n->in[k].index);
      if (p->values[r].last_use < i) p->values[r].last_use = i;
    }
  }
  for (int i = 0; i < p->nfetches; i++) p->values[root_of(p, p->fetch_val[i])].last_use = INT32_MAX;
  /* 3. offsets */
  offset_alloc a;
  memset(&a, 0, sizeof a);
  /* dying[i]: values whose last use is step i, as a linked list through an index array */
  int32_t *head = loom__malloc(((size_t)p->nsteps + 1) * sizeof *head);
  int32_t *next = loom__malloc(((size_t)p->nvalues + 1) * sizeof *next);
  uint8_t *handed = loom__calloc((size_t)p->nvalues + 1, 1); /* buffers an in-place output took over */
  if (!head || !next || !handed) {
    loom__free(head);
    loom__free(next);
    loom__free(handed);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory planning buffers");
  }
  for (int i = 0; i < p->nsteps; i++) head[i] = -1;
  /* device plans: fed values are copied into the arena, live from the start */
  const int dev = p->dev != NULL;
  for (int i = 0; dev && i < p->nvalues; i++)
    if (p->values[i].kind == VAL_FEED) p->values[i].offset = oa_alloc(&a, (int64_t)p->values[i].bytes);
  for (int i = 0; i < p->nvalues; i++) {
    plan_value *v = &p->values[i];
    next[i] = -1;
    if (dev && v->kind == VAL_FEED && v->last_use < 0 && oa_free(&a, v->offset, (int64_t)v->bytes)) goto oom;
    if ((v->kind == VAL_ARENA || (dev && v->kind == VAL_FEED)) && v->last_use >= 0 && v->last_use < p->nsteps) {
      next[i] = head[v->last_use];
      head[v->last_use] = i;
    }
  }
  int64_t naive = 0;
  for (int i = 0; i < p->nsteps; i++) {
    plan_step *sp = &p->steps[i];
    const loom_node *n = sp->node;
    for (int k = 0; k < n->nout; k++) {
      plan_value *v = &p->values[p->node_val[n->id] + k];
      if (v->kind != VAL_ARENA) continue;
      naive += (int64_t)v->bytes;
      int r = k == 0 ? inplace_input(p, i) : -1;
      if (r >= 0) { /* output 0 written over input 0, which dies here */
        v->offset = p->values[r].offset;
        handed[r] = 1;
        continue;
      }
      v->offset = oa_alloc(&a, (int64_t)v->bytes);
    }
    sp->ws_bytes = 0;
    if (n->def->workspace)
      sp->ws_bytes = n->def->workspace(&n->attrs, n->nin, (const loom_buf *const *)sp->ctx.in, n->nout,
                                       (const loom_buf *const *)sp->ctx.out);
    const int ws_here = sp->ws_bytes && !sp->on_host; /* CPU-fallback steps get host staging */
    if (ws_here) sp->ws_offset = oa_alloc(&a, (int64_t)sp->ws_bytes);
    /* outputs nobody reads die right away (but after the step) */
    if (ws_here && oa_free(&a, sp->ws_offset, (int64_t)sp->ws_bytes)) goto oom;
    for (int k = 0; k < n->nout; k++) {
      int vi = p->node_val[n->id] + k;
      plan_value *v = &p->values[vi];
      if (v->kind == VAL_ARENA && v->last_use < 0 && oa_free(&a, v->offset, (int64_t)v->bytes)) goto oom;
    }
    for (int vi = head[i]; vi >= 0; vi = next[vi])
      if (!handed[vi] && oa_free(&a, p->values[vi].offset, (int64_t)p->values[vi].bytes)) goto oom;
  }
  loom__free(a.free_list);
  loom__free(head);
  loom__free(next);
  loom__free(handed);
  /* 4. elementwise steps folded into the step before them (CPU plans; a folded pool's output may
   * move past the end) */
  size_t need = (size_t)loom__plan_fuse(p, a.top);
  char *base = NULL;
  if (dev) {
    loom_code rc = loom__dev_plan_arena(s, p, need, &base, st);
    if (rc) return rc;
  } else {
    if ((rc0 = session_arena(s, need, st))) return rc0;
    base = s->arena;
  }
  p->arena_size = need;
  p->naive_bytes = naive;
  /* 5. data pointers */
  bind_arena(p, base);
  for (int i = 0; i < p->nvalues; i++) {
    plan_value *v = &p->values[i];
    if (v->kind == VAL_BIND) {
      loom_code rc = v->node->def->bind(s, v->node, &v->buf, st);
      if (!rc && dev) rc = loom__dev_plan_bind(s, p, v, st);
      if (rc) return rc;
    }
  }
  if (dev) {
    loom_code rc = loom__dev_plan_finish(s, p, st);
    if (rc) return rc;
  }
  for (int i = 0; i < p->nfeeds; i++) {
    p->feed_shape[i].dtype = fv[i]->dtype;
    p->feed_shape[i].ndim = fv[i]->ndim;
    memcpy(p->feed_shape[i].dims, fv[i]->dims, sizeof(int64_t) * (size_t)fv[i]->ndim);
  }
  p->specialized = 1;
  return LOOM_OK;
oom:
  loom__free(a.free_list);
  loom__free(head);
  loom__free(next);
  loom__free(handed);
  return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory planning buffers");
}

static void resolve_aliases(loom_plan *p) {
  for (int i = 0; i < p->nvalues; i++) {
    plan_value *v = &p->values[i];
    if (v->kind == VAL_ALIAS) v->buf.data = p->values[v->alias_of].buf.data; /* in order: alias_of < i */
  }
}

static loom_code fetch_copy(const loom_buf *b, loom_tensor **dst, loom_status *st) {
  loom_tensor *t = *dst;
  if (t && (t->dtype != b->dtype || t->numel != b->numel || (t->dtype == LOOM_STRING && !t->owned))) {
    loom_tensor_free(t);
    t = *dst = NULL;
  }
  if (!t) {
    t = loom_tensor_new(b->dtype, b->ndim, b->dims, st);
    if (!t) return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
    *dst = t;
  } else {
    t->ndim = b->ndim;
    memcpy(t->dims, b->dims, sizeof(int64_t) * (size_t)b->ndim);
  }
  if (b->dtype == LOOM_STRING) {
    if (b->numel && loom__tensor_copy_strings(t, b->data, st)) return LOOM_RESOURCE_EXHAUSTED;
  } else if (t->nbytes) {
    memcpy(t->data, b->data, t->nbytes);
  }
  return LOOM_OK;
}

/* Can fetch i's value (an arena value) be computed straight into the
 * caller's tensor, saving the copy after the run? When the tensor is there
 * already (a reused fetch), holds the same dtype (not strings) and element
 * count, is aligned like the arena, is not another fetch's tensor, its
 * value is fetched once, and its bytes overlap no value fed to this run.
 * (A failed run may then leave the tensor partly written.) */
static int direct_fetch(const loom_plan *p, int i, loom_tensor *const *fetch_values, int nx,
                        loom_tensor *const *feed_values, int nf) {
  const loom_tensor *t = fetch_values[i];
  const loom_buf *b = &p->values[p->fetch_val[i]].buf;
  if (!t || !t->data || t->dtype != b->dtype || t->dtype == LOOM_STRING || t->numel != b->numel || t->numel <= 0 ||
      ((uintptr_t)t->data & 63))
    return 0;
  for (int j = 0; j < nx; j++)
    if (j != i && (fetch_values[j] == t || p->fetch_val[j] == p->fetch_val[i])) return 0;
  const char *lo = t->data, *hi = lo + t->nbytes;
  for (int j = 0; j < nf; j++) {
    const loom_tensor *f = feed_values[j];
    const char *flo = f->data, *fhi = flo + f->nbytes;
    if (flo && flo < hi && lo < fhi) return 0;
  }
  return 1;
}

/* Run counters of stateful ops (random draws) live in the session, one per
 * graph node, so a node continues its sequence whichever plan runs it.
 * Grown when the graph has grown; every plan's steps are re-pointed (plan
 * compilation only, never on the per-step path). */
static void point_counters(loom_session *s, loom_plan *q) {
  for (int i = 0; i < q->nsteps; i++) q->steps[i].ctx.counter = &s->counters[q->steps[i].node->id];
}
static loom_code bind_counters(loom_session *s, loom_plan *fresh, loom_status *st) {
  int n = s->graph->nnodes;
  if (n > s->ncounters) {
    uint64_t *c = loom__realloc(s->counters, (size_t)n * sizeof *c);
    if (!c) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
    memset(c + s->ncounters, 0, (size_t)(n - s->ncounters) * sizeof *c);
    s->counters = c;
    s->ncounters = n;
  }
  for (loom_plan *q = s->plans; q; q = q->next) point_counters(s, q);
  point_counters(s, fresh);
  return LOOM_OK;
}

/* ---- tracing (loom_summary.h) ---- */
void loom_session_set_tracing(loom_session *s, int on) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->tracing = on != 0;
  pthread_mutex_unlock(&s->mu);
}
const loom_trace_event *loom_session_last_trace(const loom_session *s, int *n) {
  if (n) *n = s ? s->ntrace : 0;
  return s && s->ntrace ? s->trace : NULL;
}
static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static loom_code trace_room(loom_session *s, int32_t n, loom_status *st) {
  if (s->ntrace + n > s->trace_cap) {
    int32_t cap = s->ntrace + n;
    loom_trace_event *t = loom__realloc(s->trace, (size_t)cap * sizeof *t);
    if (!t) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory for the run trace");
    s->trace = t;
    s->trace_cap = cap;
  }
  return LOOM_OK;
}
/* Room for one event per step of p; the trace restarts empty unless kept (loom__session_trace_keep). */
static loom_code trace_begin(loom_session *s, const loom_plan *p, loom_status *st) {
  if (!s->trace_keep) s->ntrace = 0;
  return trace_room(s, p->nsteps, st);
}
int64_t loom__session_trace_origin(const loom_session *s) { return s && s->trace_last ? s->trace_t0 : 0; }
loom_code loom__session_trace_add(loom_session *s, const loom_trace_event *ev, int n, loom_status *st) {
  if (!s || n <= 0 || !s->trace_last) return LOOM_OK;
  pthread_mutex_lock(&s->mu);
  loom_code rc = trace_room(s, n, st);
  if (!rc) {
    memcpy(s->trace + s->ntrace, ev, (size_t)n * sizeof *ev);
    s->ntrace += n;
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}
void loom__session_trace_keep(loom_session *s, int on) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->trace_keep = on != 0;
  pthread_mutex_unlock(&s->mu);
}
static void trace_step(loom_session *s, const loom_node *n, int64_t t0, int64_t start, int64_t end) {
  loom_trace_event *e = &s->trace[s->ntrace++];
  e->node = n->name;
  e->op = n->def->name;
  e->start_ns = start - t0;
  e->dur_ns = end - start;
  e->thread = 0; /* kernels run one at a time on the calling thread */
}

/* One run of a device plan: feeds copied in, kernels on the device's stream
 * (CPU-fallback steps copy in and out), one synchronization at the end,
 * fetches copied out. With tracing on, every step is synchronized so that
 * its time is its own. */
static loom_code run_device(loom_session *s, loom_plan *p, loom_tensor *const *feed_values,
                            loom_tensor **fetch_values, int nfetches, int tracing, int64_t t0, loom_status *st) {
  const loom_backend_i *be = loom__dev_backend(s);
  void *bctx = loom__dev_context(s);
  loom_code rc;
  resolve_aliases(p);
  if (s->vars_hook && (rc = s->vars_hook(s, p, 0, st))) return rc;
  if (tracing && (rc = trace_begin(s, p, st))) return rc;
  if ((rc = loom__dev_run_begin(s, p, feed_values, st))) return rc;
  int sync_steps = tracing || loom__dev_sync_steps(s);
  int graph_done = 0; /* the steps ran as one captured graph (engine/backend.c loom__dev_run_graph) */
  if (!sync_steps && (rc = loom__dev_run_graph(s, p, &graph_done, st))) {
    loom__dev_run_abort(s, p);
    return rc;
  }
  for (int i = 0; !graph_done && i < p->nsteps; i++) {
    plan_step *sp = &p->steps[i];
    if (atomic_load_explicit(&s->cancel, memory_order_relaxed)) {
      atomic_store(&s->cancel, 0);
      loom__dev_run_abort(s, p);
      return loom_status_set(st, LOOM_CANCELLED, "run cancelled before %s", sp->node->name);
    }
    sp->ctx.st = st;
    int64_t a = tracing ? mono_ns() : 0;
    if (sp->on_host) {
      rc = loom__dev_host_step(s, p, i, st);
    } else {
      if (be->begin_step) be->begin_step(bctx, i);
      rc = sp->fn(&sp->ctx);
      if (!rc) rc = be->check(bctx, sp->node->def->name, st);
      if (!rc && sync_steps) rc = be->synchronize(bctx, sp->node->def->name, st);
      if (!rc && sync_steps && (rc = loom__dev_data_error(s, p, st))) { /* names the node */
        loom__dev_run_abort(s, p);
        return rc;
      }
    }
    if (tracing) trace_step(s, sp->node, t0, a, mono_ns());
    if (rc) {
      const char *m = loom_status_message(st);
      char buf[768];
      snprintf(buf, sizeof buf, "%s", m);
      loom_status_set(st, rc, "%s: %s", sp->node->name, buf[0] ? buf : loom_code_name(rc));
      loom__dev_run_abort(s, p);
      return rc;
    }
    (*sp->ctx.counter)++;
  }
  if ((rc = loom__dev_run_end(s, p, st))) return rc;
  if (atomic_load(&s->cancel)) {
    atomic_store(&s->cancel, 0);
    return loom_status_set(st, LOOM_CANCELLED, "run cancelled");
  }
  if (s->vars_hook && (rc = s->vars_hook(s, p, 1, st))) return rc;
  for (int i = 0; i < nfetches; i++)
    if ((rc = loom__dev_fetch(s, p, i, &fetch_values[i], st))) return rc;
  s->stats.arena_bytes = (int64_t)p->arena_size;
  s->stats.naive_bytes = p->naive_bytes;
  s->stats.nodes_run = p->nsteps - p->nfolded;
  return LOOM_OK;
}

loom_code loom_session_run(loom_session *s, const loom_output *feeds, loom_tensor *const *feed_values, int nfeeds,
                           const loom_output *fetches, loom_tensor **fetch_values, int nfetches,
                           loom_node *const *targets, int ntargets, loom_status *st) {
  if (!s) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "session is NULL");
  if (nfeeds < 0 || nfetches < 0 || ntargets < 0 || (nfeeds && (!feeds || !feed_values)) ||
      (nfetches && (!fetches || !fetch_values)) || (ntargets && !targets))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "session run: invalid argument lists");
  loom_graph *g = s->graph;
  if (g->err_code)
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "graph has a build error: %s", g->err_msg ? g->err_msg : "");
  for (int i = 0; i < nfeeds; i++) {
    if (!node_in_graph(g, feeds[i].node) || feeds[i].index < 0 || feeds[i].index >= feeds[i].node->nout)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feed %d (%s) is not an output of this graph", i,
                             feeds[i].node && feeds[i].node != g->dummy ? "foreign node" : "NULL");
    if (!feed_values[i])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feed value is NULL", feeds[i].node->name);
    for (int j = 0; j < i; j++)
      if (out_eq(feeds[i], feeds[j]))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: fed twice", feeds[i].node->name);
  }
  for (int i = 0; i < nfetches; i++)
    if (!node_in_graph(g, fetches[i].node) || fetches[i].index < 0 || fetches[i].index >= fetches[i].node->nout)
      return loom_status_set(st, LOOM_NOT_FOUND, "fetch %d (%s) is not an output of this graph", i,
                             fetches[i].node ? loom_node_name(fetches[i].node) : "NULL");
  for (int i = 0; i < ntargets; i++)
    if (!node_in_graph(g, targets[i]))
      return loom_status_set(st, LOOM_NOT_FOUND, "target %d (%s) is not a node of this graph", i,
                             targets[i] ? loom_node_name(targets[i]) : "NULL");

  pthread_mutex_lock(&s->mu);
  loom_code rc = LOOM_OK;
  const int tracing = s->tracing;
  /* a kept trace (loom__session_trace_keep) continues on its time origin */
  const int cont = tracing && s->trace_keep && s->trace_last;
  const int64_t t0 = cont ? s->trace_t0 : tracing ? mono_ns() : 0;
  if (tracing && !cont) s->ntrace = 0;
  s->trace_t0 = t0;
  s->trace_last = tracing;
  loom__strarena_reset(&s->strings); /* the last run's strings were copied out by its fetches */
  /* the feed-derived part with data-dependent shapes runs first; its results join the feeds */
  rc = loom__host_pass_run(s, feeds, feed_values, nfeeds, fetches, nfetches, targets, ntargets, &feeds, &feed_values,
                           &nfeeds, st);
  if (rc) goto done;
  uint64_t h = sig_hash(feeds, nfeeds, fetches, nfetches, targets, ntargets);
  loom_plan *p = find_plan(s, h, feeds, nfeeds, fetches, nfetches, targets, ntargets);
  if (p) {
    s->stats.plan_cache_hits++;
  } else {
    rc = compile_plan(s, feeds, nfeeds, fetches, nfetches, targets, ntargets, &p, st);
    if (rc) goto done;
    rc = bind_counters(s, p, st);
    if (rc) {
      plan_free(p);
      goto done;
    }
    p->next = s->plans;
    s->plans = p;
    s->stats.plans_compiled++;
  }
  /* same shapes as last time? then nothing to plan */
  int same = p->specialized;
  for (int i = 0; same && i < nfeeds; i++) {
    const loom_tensor *t = feed_values[i];
    const loom_tdesc *d = &p->feed_shape[i];
    same = t->dtype == d->dtype && t->ndim == d->ndim &&
           !memcmp(t->dims, d->dims, sizeof(int64_t) * (size_t)t->ndim);
  }
  if (!same) {
    if (p->specialized) s->stats.respecializations++;
    rc = specialize(s, p, feed_values, st);
    if (rc) {
      p->specialized = 0;
      goto done;
    }
  }
  if (p->dev) {
    rc = run_device(s, p, feed_values, fetch_values, nfetches, tracing, t0, st);
    goto done;
  }
  if (p->arena_base != (char *)s->arena) bind_arena(p, s->arena); /* another plan grew the arena */
  for (int i = 0; i < nfeeds; i++)
    if (p->feed_val[i] >= 0) p->values[p->feed_val[i]].buf.data = feed_values[i]->data;
  for (int i = 0; i < nfetches; i++) {
    plan_value *v = &p->values[p->fetch_val[i]];
    if (v->kind != VAL_ARENA) continue;
    v->buf.data = direct_fetch(p, i, fetch_values, nfetches, feed_values, nfeeds) ? fetch_values[i]->data
                                                                               : p->arena_base + v->offset;
  }
  resolve_aliases(p);
  if (s->vars_hook && (rc = s->vars_hook(s, p, 0, st))) goto done;
  if (tracing && (rc = trace_begin(s, p, st))) goto done;
  if (s->dev && (rc = loom__dev_host_plan_begin(s, p, st))) goto done; /* a CPU plan of a device session */

  loom__set_ftz();
  const loom__run_observer obs = s->obs;
  int ocur = 0;
  if (obs.fetch_ready) observe_fetches(s, p, -1, &ocur);
  for (int i = 0; i < p->nsteps; i++) {
    if (atomic_load_explicit(&s->cancel, memory_order_relaxed)) {
      atomic_store(&s->cancel, 0);
      rc = loom_status_set(st, LOOM_CANCELLED, "run cancelled before %s", p->steps[i].node->name);
      goto done;
    }
    plan_step *sp = &p->steps[i];
    sp->ctx.st = st;
    if (tracing) {
      int64_t a = mono_ns();
      rc = sp->fn(&sp->ctx);
      trace_step(s, sp->node, t0, a, mono_ns());
    } else {
      rc = sp->fn(&sp->ctx);
    }
    if (rc) {
      const char *m = loom_status_message(st);
      char buf[768];
      snprintf(buf, sizeof buf, "%s", m);
      loom_status_set(st, rc, "%s: %s", sp->node->name, buf[0] ? buf : loom_code_name(rc));
      goto done;
    }
    (*sp->ctx.counter)++;
    if (obs.fetch_ready) observe_fetches(s, p, i, &ocur);
    if (obs.step_done) obs.step_done(obs.user);
  }
  if (atomic_load(&s->cancel)) {
    atomic_store(&s->cancel, 0);
    rc = loom_status_set(st, LOOM_CANCELLED, "run cancelled");
    goto done;
  }
  if (s->vars_hook && (rc = s->vars_hook(s, p, 1, st))) goto done;
  for (int i = 0; i < nfetches; i++) {
    const loom_buf *b = &p->values[p->fetch_val[i]].buf;
    if (p->values[p->fetch_val[i]].kind == VAL_ARENA && fetch_values[i] && b->data == fetch_values[i]->data) {
      /* written in place (direct_fetch): only the shape to set */
      fetch_values[i]->ndim = b->ndim;
      memcpy(fetch_values[i]->dims, b->dims, sizeof(int64_t) * (size_t)b->ndim);
      continue;
    }
    rc = fetch_copy(b, &fetch_values[i], st);
    if (rc) goto done;
  }
  s->stats.arena_bytes = (int64_t)p->arena_size;
  s->stats.naive_bytes = p->naive_bytes;
  s->stats.nodes_run = p->nsteps - p->nfolded;
done:
  pthread_mutex_unlock(&s->mu);
  if (!rc) loom_status_clear(st);
  return rc;
}
