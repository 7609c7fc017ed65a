/* engine/backend.c - the backend registry (the one place that knows which
 * backends this build has) and the device side of sessions: device arenas,
 * constants, variable mirrors, CPU-fallback steps with copies, fetches.
 * See engine/backend.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "engine/backend.h"

#ifdef LOOM_HAVE_CUDA
const loom_backend_i *loom__backend_cuda(void); /* engine/cuda/runtime.c */
#endif

const loom_backend_i *loom__backend_get(loom_device_type dev) {
#ifdef LOOM_HAVE_CUDA
  if (dev == LOOM_DEVICE_CUDA) return loom__backend_cuda();
#endif
  (void)dev;
  return NULL;
}

int loom__backend_device_count(loom_device_type dev) {
  const loom_backend_i *b = loom__backend_get(dev);
  return b ? b->device_count() : 0;
}

int loom__backend_supports(loom_device_type dev, int op, loom_dtype dt) {
  if (op < 0 || op >= loom__op_count() || (int)dev < 0 || (int)dev >= LOOM_DEVICE_COUNT) return 0;
  const loom_op_def *d = loom__op_def(op);
  return d->kernels[dev][dt >= 0 && dt < LOOM_DTYPE_COUNT ? dt : 0] != NULL || d->kernels[dev][0] != NULL;
}

/* ---- device sessions ---- */
enum { MIRROR_SAME = 0, MIRROR_HOST_NEWER = 1, MIRROR_DEV_NEWER = 2 };
typedef struct dev_var {
  void *host;   /* the variable store's buffer (stable while the session lives) */
  void *dev;
  size_t bytes;
  int state;
} dev_var;

struct loom_dev_session {
  const loom_backend_i *be;
  void *ctx;
  int sync_steps;
  char *disabled; /* LOOM_CUDA_DISABLE: ops run on the CPU even with a device kernel */
  dev_var *vars;
  int32_t nvars, capvars;
  int graphs; /* whole-step graphs allowed (LOOM_CUDA_GRAPHS != 0 when the session was created) */
};

struct loom_dev_plan {
  loom_dev_session *ds;
  void *arena;
  size_t arena_size;
  void **consts;             /* device copies of Const payloads */
  int32_t nconsts, capconsts;
  int32_t *pvars;            /* mirrors bound by this plan (indices into ds->vars) */
  uint8_t *pwritten;         /* ... and whether a step writes them */
  int32_t npvars, cappvars;
  /* CPU-fallback steps: host staging (one region, reused step after step) */
  char *stage;
  size_t stage_size;
  loom_buf *hbufs;           /* per host step: nin + nout host views */
  loom_buf **hptrs;
  size_t *hoff;              /* staging offset of each host view */
  int32_t *hbase;            /* per step: first index into hbufs, -1 for device steps */
  size_t *hws;               /* per step: staging offset of its workspace */
  int32_t nh;
  /* fetches: page-locked staging the run's final synchronization fills */
  char *fstage;
  size_t fstage_size;
  size_t *foff;              /* per fetch: offset in fstage */
  int fstaged;               /* fstage holds this run's fetches */
  /* whole-step graph (loom__dev_run_graph): 0 not decided yet, 1 capturable, -1 never */
  int graph_state;
  void *graph;               /* the captured steps, launched while graph_sig matches */
  uint64_t graph_sig;
};

loom_code loom__dev_session_new(loom_session *s, loom_status *st) {
  loom_device_type dev = s->opts.device;
  const loom_backend_i *be = loom__backend_get(dev);
  const char *dname = dev == LOOM_DEVICE_CUDA ? "CUDA" : "such";
  if (!be) return loom_status_set(st, LOOM_UNAVAILABLE, "session: no %s device (this build has no CUDA backend)", dname);
  int n = be->device_count();
  if (n <= 0) return loom_status_set(st, LOOM_UNAVAILABLE, "session: no %s device", dname);
  if (s->opts.device_index < 0 || s->opts.device_index >= n)
    return loom_status_set(st, LOOM_UNAVAILABLE, "session: no %s device %d (%d present)", dname,
                           (int)s->opts.device_index, n);
  loom_dev_session *ds = loom__calloc(1, sizeof *ds);
  if (!ds) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
  ds->be = be;
  ds->ctx = be->context_new(s->opts.device_index, st);
  if (!ds->ctx) {
    loom__free(ds);
    return loom_status_code(st) ? loom_status_code(st) : LOOM_UNAVAILABLE;
  }
  s->dev = ds;
  const char *sync = getenv("LOOM_CUDA_SYNC");
  ds->sync_steps = sync && sync[0] && strcmp(sync, "0") != 0;
  const char *graphs = getenv("LOOM_CUDA_GRAPHS");
  ds->graphs = !(graphs && !strcmp(graphs, "0"));
  const char *dis = getenv("LOOM_CUDA_DISABLE");
  if (dis && *dis && !(ds->disabled = loom__strdup(dis))) {
    loom__dev_session_free(s);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory");
  }
  return LOOM_OK;
}

int loom__dev_sync_steps(const loom_session *s) { return s && s->dev && s->dev->sync_steps; }

void loom__dev_session_free(loom_session *s) {
  loom_dev_session *ds = s ? s->dev : NULL;
  if (!ds) return;
  for (int i = 0; i < ds->nvars; i++) ds->be->buffer_free(ds->ctx, ds->vars[i].dev);
  loom__free(ds->vars);
  loom__free(ds->disabled);
  ds->be->context_free(ds->ctx);
  loom__free(ds);
  s->dev = NULL;
}

void *loom__dev_context(const loom_session *s) { return s && s->dev ? s->dev->ctx : NULL; }
const loom_backend_i *loom__dev_backend(const loom_session *s) { return s && s->dev ? s->dev->be : NULL; }

/* Whether op name is an entry of the comma-separated list (NULL: none). */
static int op_listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !strncmp(p, name, n)) return 1;
    p = e ? e + 1 : NULL;
  }
  return 0;
}

loom_kernel_fn loom__dev_resolve(loom_session *s, const loom_node *n, loom_dtype key, int *on_host) {
  const loom_op_def *d = n->def;
  int dev = (int)s->opts.device;
  int k = key >= 0 && key < LOOM_DTYPE_COUNT ? key : 0;
  loom_kernel_fn fn = d->kernels[dev][k];
  if (!fn) fn = d->kernels[dev][0];
  if (fn && !op_listed(s->dev->disabled, d->name)) {
    *on_host = 0;
    return fn;
  }
  fn = d->kernels[LOOM_DEVICE_CPU][k];
  if (!fn) fn = d->kernels[LOOM_DEVICE_CPU][0];
  if (fn) {
    loom__log(LOOM_LOG_INFO, "%s: op %s has no %s kernel for %s%s; it runs on the CPU with copies", n->name, d->name,
              s->dev->be->name, loom_dtype_name(key), d->kernels[dev][k] || d->kernels[dev][0] ? " (LOOM_CUDA_DISABLE)" : "");
    *on_host = 1;
  }
  return fn;
}

static size_t value_bytes(const loom_buf *b) { return (size_t)b->numel * loom_dtype_size(b->dtype); }
static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }
#define LOOM_DEV_FETCH_STAGE_MAX ((size_t)1 << 20) /* page-locked fetch staging per plan, at most */

static void plan_reset_binds(loom_dev_plan *dp) {
  loom_dev_session *ds = dp->ds;
  for (int i = 0; i < dp->nconsts; i++) ds->be->buffer_free(ds->ctx, dp->consts[i]);
  dp->nconsts = 0;
  dp->npvars = 0;
}

loom_dev_plan *loom__dev_plan_new(loom_session *s) {
  loom_dev_plan *dp = loom__calloc(1, sizeof *dp);
  if (dp) dp->ds = s->dev;
  return dp;
}

void loom__dev_plan_free(loom_plan *p) {
  loom_dev_plan *dp = p ? p->dev : NULL;
  if (!dp) return;
  loom_dev_session *ds = dp->ds;
  if (ds) {
    if (dp->graph) ds->be->graph_free(ds->ctx, dp->graph);
    plan_reset_binds(dp);
    ds->be->buffer_free(ds->ctx, dp->arena);
    if (dp->fstage) ds->be->host_free(ds->ctx, dp->fstage);
  }
  loom__free(dp->foff);
  loom__free(dp->consts);
  loom__free(dp->pvars);
  loom__free(dp->pwritten);
  loom__aligned_free(dp->stage);
  loom__free(dp->hbufs);
  loom__free(dp->hptrs);
  loom__free(dp->hoff);
  loom__free(dp->hbase);
  loom__free(dp->hws);
  loom__free(dp);
  p->dev = NULL;
}

loom_code loom__dev_plan_arena(loom_session *s, loom_plan *p, size_t bytes, char **base, loom_status *st) {
  loom_dev_plan *dp = p->dev;
  loom_dev_session *ds = s->dev;
  if (!dp->ds) dp->ds = ds;
  plan_reset_binds(dp);
  if (bytes > dp->arena_size || !dp->arena) {
    void *na = ds->be->buffer_alloc(ds->ctx, bytes ? bytes : 64, st);
    if (!na) return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
    ds->be->buffer_free(ds->ctx, dp->arena);
    dp->arena = na;
    dp->arena_size = bytes ? bytes : 64;
  }
  *base = dp->arena;
  return LOOM_OK;
}

static int grow(void **arr, int32_t *cap, int32_t need, size_t elem) {
  if (need <= *cap) return 0;
  int32_t nc = *cap ? *cap * 2 : 16;
  while (nc < need) nc *= 2;
  void *na = loom__realloc(*arr, (size_t)nc * elem);
  if (!na) return -1;
  *arr = na;
  *cap = nc;
  return 0;
}

loom_code loom__dev_plan_bind(loom_session *s, loom_plan *p, plan_value *v, loom_status *st) {
  loom_dev_plan *dp = p->dev;
  loom_dev_session *ds = s->dev;
  size_t nb = value_bytes(&v->buf);
  if (v->node->def->flags & LOOM_OPF_CONST) {
    if (grow((void **)&dp->consts, &dp->capconsts, dp->nconsts + 1, sizeof *dp->consts))
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", v->node->name);
    void *d = ds->be->buffer_alloc(ds->ctx, nb ? nb : 64, st);
    if (!d) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: cannot allocate device memory for a constant: %s",
                                   v->node->name, loom_status_message(st));
    dp->consts[dp->nconsts++] = d;
    loom_code rc = ds->be->copy_h2d(ds->ctx, d, v->buf.data, nb, st);
    if (rc) return rc;
    v->buf.data = d;
    return LOOM_OK;
  }
  /* a variable (or any bound host buffer): a mirror per host buffer */
  int mi = -1;
  for (int i = 0; i < ds->nvars; i++)
    if (ds->vars[i].host == v->buf.data) {
      mi = i;
      break;
    }
  if (mi >= 0 && ds->vars[mi].bytes < nb) return loom_status_set(st, LOOM_INTERNAL, "%s: variable changed size", v->node->name);
  if (mi < 0) {
    if (grow((void **)&ds->vars, &ds->capvars, ds->nvars + 1, sizeof *ds->vars))
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", v->node->name);
    void *d = ds->be->buffer_alloc(ds->ctx, nb ? nb : 64, st);
    if (!d) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: cannot allocate device memory for a variable: %s",
                                   v->node->name, loom_status_message(st));
    mi = ds->nvars++;
    ds->vars[mi] = (dev_var){v->buf.data, d, nb, MIRROR_HOST_NEWER};
  }
  int have = 0;
  for (int i = 0; i < dp->npvars; i++) have |= dp->pvars[i] == mi;
  if (!have) {
    int32_t cap = dp->cappvars;
    if (grow((void **)&dp->pvars, &dp->cappvars, dp->npvars + 1, sizeof *dp->pvars) ||
        grow((void **)&dp->pwritten, &cap, dp->npvars + 1, sizeof *dp->pwritten))
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", v->node->name);
    dp->pvars[dp->npvars] = mi;
    dp->pwritten[dp->npvars++] = 0;
  }
  v->buf.data = ds->vars[mi].dev;
  return LOOM_OK;
}

loom_code loom__dev_plan_finish(loom_session *s, loom_plan *p, loom_status *st) {
  loom_dev_plan *dp = p->dev;
  loom_dev_session *ds = s->dev;
  /* variables written in place by a step */
  for (int i = 0; i < p->nsteps; i++) {
    const loom_node *n = p->steps[i].node;
    for (int j = 0; j < n->nin; j++) {
      if (!loom__op_mutates(n->def, j)) continue;
      int vi = p->node_val[n->in[j].node->id] + n->in[j].index;
      while (p->values[vi].kind == VAL_ALIAS) vi = p->values[vi].alias_of;
      for (int k = 0; k < dp->npvars; k++)
        if (ds->vars[dp->pvars[k]].dev == p->values[vi].buf.data) dp->pwritten[k] = 1;
    }
  }
  /* host staging of CPU-fallback steps */
  int32_t nh = 0;
  for (int i = 0; i < p->nsteps; i++)
    if (p->steps[i].on_host) nh += p->steps[i].node->nin + p->steps[i].node->nout;
  loom__free(dp->hbufs);
  loom__free(dp->hptrs);
  loom__free(dp->hoff);
  loom__free(dp->hbase);
  loom__free(dp->hws);
  dp->hbufs = loom__calloc((size_t)nh + 1, sizeof *dp->hbufs);
  dp->hptrs = loom__calloc((size_t)nh + 1, sizeof *dp->hptrs);
  dp->hoff = loom__calloc((size_t)nh + 1, sizeof *dp->hoff);
  dp->hbase = loom__calloc((size_t)p->nsteps + 1, sizeof *dp->hbase);
  dp->hws = loom__calloc((size_t)p->nsteps + 1, sizeof *dp->hws);
  if (!dp->hbufs || !dp->hptrs || !dp->hoff || !dp->hbase || !dp->hws)
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory planning CPU fallback steps");
  dp->nh = nh;
  size_t need = 0;
  int32_t h = 0;
  for (int i = 0; i < p->nsteps; i++) {
    plan_step *sp = &p->steps[i];
    dp->hbase[i] = -1;
    if (!sp->on_host) continue;
    const loom_node *n = sp->node;
    dp->hbase[i] = h;
    size_t off = 0;
    for (int k = 0; k < n->nin + n->nout; k++) {
      const loom_buf *b = k < n->nin ? sp->ctx.in[k] : sp->ctx.out[k - n->nin];
      dp->hptrs[h + k] = &dp->hbufs[h + k];
      /* output 0 of an in-place op shares input 0's staging (it is the same device memory) */
      if (k == n->nin && (n->def->flags & LOOM_OPF_ALIAS0) && n->nin > 0) {
        dp->hoff[h + k] = dp->hoff[h];
        continue;
      }
      dp->hoff[h + k] = off;
      off += al64(value_bytes(b) ? value_bytes(b) : 1);
    }
    dp->hws[i] = off;
    off += al64(sp->ws_bytes);
    if (off > need) need = off;
    h += n->nin + n->nout;
  }
  if (need > dp->stage_size) {
    char *ns = loom__aligned_alloc(need);
    if (!ns) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: cannot allocate %zu bytes of host staging", need);
    loom__aligned_free(dp->stage);
    dp->stage = ns;
    dp->stage_size = need;
  }
  /* page-locked staging for the fetches (without it, each fetch is copied after the run). Only for
   * small fetches (a loss, metrics, a batch of predictions): page-locked memory is scarce and slow
   * to allocate, and one more synchronization is nothing beside a large copy. */
  dp->fstaged = 0;
  if (!ds->be->host_alloc || p->nfetches <= 0) return LOOM_OK;
  size_t *fo = loom__realloc(dp->foff, sizeof *fo * (size_t)p->nfetches);
  if (!fo) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "session: out of memory planning fetches");
  dp->foff = fo;
  size_t fneed = 0;
  for (int i = 0; i < p->nfetches; i++) {
    fo[i] = fneed;
    fneed += al64(value_bytes(&p->values[p->fetch_val[i]].buf));
  }
  if (fneed > LOOM_DEV_FETCH_STAGE_MAX) { /* copied after the run instead */
    if (dp->fstage) ds->be->host_free(ds->ctx, dp->fstage);
    dp->fstage = NULL;
    dp->fstage_size = 0;
  } else if (fneed > dp->fstage_size || !dp->fstage) {
    if (dp->fstage) ds->be->host_free(ds->ctx, dp->fstage);
    dp->fstage = ds->be->host_alloc(ds->ctx, fneed ? fneed : 64);
    dp->fstage_size = dp->fstage ? fneed : 0;
  }
  return LOOM_OK;
}

loom_code loom__dev_run_begin(loom_session *s, loom_plan *p, loom_tensor *const *feeds, loom_status *st) {
  loom_dev_plan *dp = p->dev;
  loom_dev_session *ds = s->dev;
  loom_code rc;
  dp->fstaged = 0;
  if (ds->be->begin_run) ds->be->begin_run(ds->ctx);
  for (int k = 0; k < dp->npvars; k++) {
    dev_var *m = &ds->vars[dp->pvars[k]];
    if (m->state != MIRROR_HOST_NEWER) continue;
    if ((rc = ds->be->copy_h2d(ds->ctx, m->dev, m->host, m->bytes, st))) return rc;
    m->state = MIRROR_SAME;
  }
  for (int i = 0; i < p->nfeeds; i++) {
    if (p->feed_val[i] < 0) continue;
    plan_value *v = &p->values[p->feed_val[i]];
    if ((rc = ds->be->copy_h2d(ds->ctx, v->buf.data, feeds[i]->data, value_bytes(&v->buf), st))) return rc;
  }
  return LOOM_OK;
}

/* ---- whole-step graphs ---- */
static int graph_eligible(const loom_dev_session *ds, const loom_plan *p) {
  if (!ds->graphs || ds->sync_steps || !ds->be->capture_begin) return 0;
  for (int i = 0; i < p->nsteps; i++) {
    const plan_step *sp = &p->steps[i];
    const loom_op_def *d = sp->node->def;
    if (sp->on_host) return 0;                      /* host work between kernels */
    if (d->flags & LOOM_OPF_DATA_SHAPE) return 0;   /* shapes known only after the kernel ran */
    int writes_inputs = (d->flags & (LOOM_OPF_MUTATES_INPUT0 | LOOM_OPF_ASSIGN | LOOM_OPF_VARIABLE)) ||
                        d->mutated_inputs;
    if ((d->flags & LOOM_OPF_STATEFUL) && !writes_inputs) return 0; /* random draws: a host run counter */
  }
  return 1;
}
/* What a captured graph depends on: every step's kernel, buffers, shapes, workspace and attributes. */
static uint64_t graph_sig(const loom_plan *p) {
  uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
  for (int i = 0; i < p->nsteps; i++) {
    const plan_step *sp = &p->steps[i];
    const loom_node *n = sp->node;
    MIX((uintptr_t)sp->ctx.ws);
    MIX(sp->ctx.ws_size);
    MIX((uintptr_t)sp->ctx.attrs);
    for (int k = 0; k < n->nin + n->nout; k++) {
      const loom_buf *b = k < n->nin ? sp->ctx.in[k] : sp->ctx.out[k - n->nin];
      MIX((uintptr_t)b->data);
      MIX(b->dtype);
      MIX(b->ndim);
      for (int d = 0; d < b->ndim; d++) MIX(b->dims[d]);
    }
  }
#undef MIX
  return h;
}
loom_code loom__dev_run_graph(loom_session *s, loom_plan *p, int *done, loom_status *st) {
  loom_dev_plan *dp = p->dev;
  loom_dev_session *ds = s->dev;
  const loom_backend_i *be = ds->be;
  *done = 0;
  if (dp->graph_state == 0) dp->graph_state = graph_eligible(ds, p) ? 1 : -1;
  if (dp->graph_state < 0) return LOOM_OK;
  uint64_t sig = graph_sig(p);
  if (dp->graph && be->graph_valid && !be->graph_valid(ds->ctx, dp->graph)) {
    be->graph_free(ds->ctx, dp->graph); /* the scratch moved: once uncaptured, then captured again */
    dp->graph = NULL;
    return LOOM_OK;
  }
  if (sig != dp->graph_sig) { /* first run, or new buffers/shapes: once uncaptured (lazy loads, scratch growth) */
    if (dp->graph) be->graph_free(ds->ctx, dp->graph);
    dp->graph = NULL;
    dp->graph_sig = sig;
    return LOOM_OK;
  }
  if (!dp->graph) {
    loom_status *cst = loom_status_new(); /* capture failures are not the run's errors */
    loom_code rc = cst ? be->capture_begin(ds->ctx, cst) : LOOM_RESOURCE_EXHAUSTED;
    int captured = rc == LOOM_OK;
    for (int i = 0; i < p->nsteps && !rc; i++) {
      plan_step *sp = &p->steps[i];
      sp->ctx.st = cst;
      if (be->begin_step) be->begin_step(ds->ctx, i);
      rc = sp->fn(&sp->ctx);
      if (!rc) rc = be->check(ds->ctx, sp->node->def->name, cst);
      sp->ctx.st = st;
    }
    void *g = captured ? be->capture_end(ds->ctx) : NULL;
    loom_status_free(cst);
    if (rc || !g) { /* nothing of it ran: the caller runs the steps one by one, now and from now on */
      if (g) be->graph_free(ds->ctx, g);
      dp->graph_state = -1;
      return LOOM_OK;
    }
    dp->graph = g;
    dp->graph_sig = sig;
  }
  loom_code rc = be->graph_launch(ds->ctx, dp->graph, st);
  if (rc) return rc;
  for (int i = 0; i < p->nsteps; i++) (*p->steps[i].ctx.counter)++;
  *done = 1;
  return LOOM_OK;
}

loom_code loom__dev_host_step(loom_session *s, loom_plan *p, int i, loom_status *st) {
  loom_dev_plan *dp = p->dev;
  loom_dev_session *ds = s->dev;
  plan_step *sp = &p->steps[i];
  const loom_node *n = sp->node;
  int32_t h = dp->hbase[i];
  loom_code rc;
  for (int k = 0; k < n->nin + n->nout; k++) {
    const loom_buf *db = k < n->nin ? sp->ctx.in[k] : sp->ctx.out[k - n->nin];
    loom_buf *hb = &dp->hbufs[h + k];
    *hb = *db;
    hb->data = dp->stage + dp->hoff[h + k];
    if (k < n->nin && (rc = ds->be->copy_d2h(ds->ctx, hb->data, db->data, value_bytes(db), st))) return rc;
  }
  loom_kctx c = sp->ctx;
  c.in = dp->hptrs + h;
  c.out = dp->hptrs + h + n->nin;
  c.ws = sp->ws_bytes ? dp->stage + dp->hws[i] : NULL;
  c.ws_size = sp->ws_bytes;
  c.backend = NULL;
  c.st = st;
  loom__set_ftz();
  rc = sp->fn(&c);
  if (rc) return rc;
  for (int j = 0; j < n->nout; j++) {
    const loom_buf *db = sp->ctx.out[j];
    if ((rc = ds->be->copy_h2d(ds->ctx, db->data, dp->hbufs[h + n->nin + j].data, value_bytes(db), st))) return rc;
  }
  /* inputs written in place (a variable and its slots) go back too, unless an output aliasing them already did */
  for (int j = 0; j < n->nin; j++) {
    if (!loom__op_mutates(n->def, j) || (n->nout > 0 && sp->ctx.out[0]->data == sp->ctx.in[j]->data)) continue;
    if ((rc = ds->be->copy_h2d(ds->ctx, sp->ctx.in[j]->data, dp->hbufs[h + j].data, value_bytes(sp->ctx.in[j]), st)))
      return rc;
  }
  return LOOM_OK;
}

static void mark_written(loom_dev_session *ds, loom_dev_plan *dp) {
  for (int k = 0; k < dp->npvars; k++)
    if (dp->pwritten[k]) ds->vars[dp->pvars[k]].state = MIRROR_DEV_NEWER;
}

loom_code loom__dev_run_end(loom_session *s, loom_plan *p, loom_status *st) {
  loom_dev_plan *dp = p->dev;
  loom_dev_session *ds = s->dev;
  loom_code rc = LOOM_OK;
  dp->fstaged = 0;
  for (int i = 0; dp->fstage && i < p->nfetches && !rc; i++) {
    const loom_buf *b = &p->values[p->fetch_val[i]].buf; /* device plans hold no strings */
    rc = ds->be->copy_d2h_async(ds->ctx, dp->fstage + dp->foff[i], b->data, value_bytes(b), st);
  }
  if (rc) {
    loom__dev_run_abort(s, p); /* the queued copies finish before the staging can be freed */
    return rc;
  }
  rc = ds->be->synchronize(ds->ctx,
                           ds->sync_steps ? "run"
                                          : "run (a device step failed asynchronously; set "
                                            "LOOM_CUDA_SYNC=1 to name the op)",
                           st);
  dp->fstaged = !rc && dp->fstage != NULL;
  mark_written(ds, dp);
  if (!rc) rc = loom__dev_data_error(s, p, st);
  return rc;
}

void loom__dev_run_abort(loom_session *s, loom_plan *p) {
  loom_dev_plan *dp = p->dev;
  loom_dev_session *ds = s->dev;
  dp->fstaged = 0;
  /* queued work finishes; a bad index it reported is dropped with the run */
  if (ds->be->synchronize(ds->ctx, "run", NULL) == LOOM_OK) loom__dev_data_error(s, p, NULL);
  mark_written(ds, dp); /* steps that ran may have written them in place */
}

loom_code loom__dev_data_error(loom_session *s, loom_plan *p, loom_status *st) {
  loom_dev_session *ds = s->dev;
  if (!ds->be->take_data_error) return LOOM_OK;
  loom_dev_data_error e;
  loom_code rc = ds->be->take_data_error(ds->ctx, &e, st);
  if (rc || e.step < 0) return rc;
  const plan_step *sp = e.step < p->nsteps ? &p->steps[e.step] : NULL;
  /* the index tensor among the step's inputs, and the bad value in it */
  const loom_buf *ib = NULL;
  for (int k = 0; sp && e.indices && k < sp->ctx.nin; k++)
    if (sp->ctx.in[k]->data == e.indices) ib = sp->ctx.in[k];
  if (ib && e.pos >= 0 && e.pos < ib->numel && (ib->dtype == LOOM_I32 || ib->dtype == LOOM_I64 || ib->dtype == LOOM_U8)) {
    size_t es = loom_dtype_size(ib->dtype);
    unsigned char v[8] = {0};
    if ((rc = ds->be->copy_d2h(ds->ctx, v, (const char *)ib->data + (size_t)e.pos * es, es, st))) return rc;
    if (ib->dtype == LOOM_I32) {
      int32_t x;
      memcpy(&x, v, 4);
      e.value = x;
    } else if (ib->dtype == LOOM_I64) {
      memcpy(&e.value, v, 8);
    } else {
      e.value = v[0];
    }
  }
  /* the position in the index tensor's own dims ("[3,0]", "" for a scalar), as the CPU kernels print it */
  char pos[160] = "";
  int64_t idx[LOOM_MAX_DIMS] = {e.pos};
  int known = ib && e.pos >= 0 && e.pos < ib->numel; /* then every dim is >= 1 */
  int nd = known ? ib->ndim : 1;
  for (int64_t d = nd - 1, r = e.pos; known && d >= 0; d--) {
    idx[d] = r % ib->dims[d];
    r /= ib->dims[d];
  }
  if (nd > 0) loom__dims_str(pos, sizeof pos, nd, idx);
  return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s%s = %lld is not in [0, %lld)",
                         sp ? sp->node->name : "run", e.what, pos, (long long)e.value, (long long)e.bound);
}

loom_code loom__dev_fetch(loom_session *s, loom_plan *p, int i, loom_tensor **dst, loom_status *st) {
  loom_dev_session *ds = s->dev;
  loom_dev_plan *dp = p->dev;
  const loom_buf *b = &p->values[p->fetch_val[i]].buf;
  loom_tensor *t = *dst;
  if (t && (t->dtype != b->dtype || t->numel != b->numel || t->dtype == LOOM_STRING)) {
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
  if (!t->nbytes) return LOOM_OK;
  if (dp->fstaged) {
    memcpy(t->data, dp->fstage + dp->foff[i], t->nbytes);
    return LOOM_OK;
  }
  return ds->be->copy_d2h(ds->ctx, t->data, b->data, t->nbytes, st);
}

/* all: every mirror, else the one of host */
static loom_code mirrors_to_host(loom_session *s, int all, const void *host, loom_status *st) {
  loom_dev_session *ds = s ? s->dev : NULL;
  if (!ds) return LOOM_OK;
  for (int i = 0; i < ds->nvars; i++) {
    dev_var *m = &ds->vars[i];
    if (m->state != MIRROR_DEV_NEWER || (!all && m->host != host)) continue;
    loom_code rc = ds->be->copy_d2h(ds->ctx, m->host, m->dev, m->bytes, st);
    if (rc) return rc;
    m->state = MIRROR_SAME;
  }
  return LOOM_OK;
}

loom_code loom__dev_vars_to_host(loom_session *s, loom_status *st) { return mirrors_to_host(s, 1, NULL, st); }
loom_code loom__dev_var_to_host(loom_session *s, const void *host, loom_status *st) {
  return mirrors_to_host(s, 0, host, st);
}

static void mirrors_host_changed(loom_session *s, int all, const void *host) {
  loom_dev_session *ds = s ? s->dev : NULL;
  if (!ds) return;
  for (int i = 0; i < ds->nvars; i++)
    if (all || ds->vars[i].host == host) ds->vars[i].state = MIRROR_HOST_NEWER;
}
void loom__dev_vars_host_changed(loom_session *s) { mirrors_host_changed(s, 1, NULL); }
void loom__dev_var_host_changed(loom_session *s, const void *host) { mirrors_host_changed(s, 0, host); }

loom_code loom__dev_host_plan_begin(loom_session *s, loom_plan *p, loom_status *st) {
  loom_code rc;
  for (int i = 0; i < p->nvalues; i++)
    if (p->values[i].kind == VAL_BIND && (p->values[i].node->def->flags & LOOM_OPF_VARIABLE) &&
        (rc = loom__dev_var_to_host(s, p->values[i].buf.data, st)))
      return rc;
  for (int i = 0; i < p->nsteps; i++) {
    const loom_node *n = p->steps[i].node;
    for (int j = 0; j < n->nin; j++)
      if (loom__op_mutates(n->def, j)) loom__dev_var_host_changed(s, p->steps[i].ctx.in[j]->data);
  }
  return LOOM_OK;
}
