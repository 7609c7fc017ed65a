/* estimator/hooks/hooks.c - SessionRunHook wrapper, run context, the monitored
 * session (tf.compat.v1.train.MonitoredSession's hook protocol) and the
 * SecondOrStepTimer.
 *
 * A step merges the caller's feeds/fetches/targets with every hook's into
 * arrays kept across steps (grown, never shrunk) and makes one session run.
 * Each hook's result tensors are kept per hook slot and handed back to the
 * session on the next step, so a steady-state step allocates nothing. */
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include "estimator/hooks/hooks_impl.h"
#include "loom/loom_train.h"


/* ===================================================================== *
 * Hooks
 * ===================================================================== */
struct loom_hook {
  loom_hook_ops ops;
  void *self;
  char *name;
  int stop_early; /* set by loom__hook_request_stop_early in after_create_session */
};

loom_hook *loom_hook_new(const loom_hook_ops *ops, void *self, const char *name) {
  loom_hook *h = loom__calloc(1, sizeof *h);
  if (!h) return NULL;
  if (ops) h->ops = *ops;
  h->self = self;
  h->name = loom__strdup(name && *name ? name : "hook");
  if (!h->name) {
    loom__free(h);
    return NULL;
  }
  return h;
}

void loom_hook_free(loom_hook *h) {
  if (!h) return;
  if (h->ops.destroy) h->ops.destroy(h->self);
  loom__free(h->name);
  loom__free(h);
}

const char *loom_hook_name(const loom_hook *h) { return h ? h->name : ""; }
void *loom_hook_self(const loom_hook *h) { return h ? h->self : NULL; }

const loom_hook_ops *loom__hook_ops(const loom_hook *h) { return h ? &h->ops : NULL; }

void loom__hook_request_stop_early(loom_hook *h) {
  if (h) h->stop_early = 1;
}

/* ===================================================================== *
 * Run context
 * ===================================================================== */
struct loom_hook_context {
  loom_session *s;
  const loom_output *orig_fetches;
  int norig;
  int stop;
};

loom_session *loom_hook_context_session(loom_hook_context *ctx) { return ctx ? ctx->s : NULL; }
void loom_hook_context_request_stop(loom_hook_context *ctx) {
  if (ctx) ctx->stop = 1;
}
int loom_hook_context_stop_requested(const loom_hook_context *ctx) { return ctx ? ctx->stop : 0; }
int loom_hook_context_original_fetches(const loom_hook_context *ctx, const loom_output **fetches) {
  if (fetches) *fetches = ctx ? ctx->orig_fetches : NULL;
  return ctx ? ctx->norig : 0;
}

/* ===================================================================== *
 * Monitored session
 * ===================================================================== */
typedef struct hook_slot {
  loom_hook *h;
  loom_hook_run_args args; /* this step's */
  loom_tensor **res;       /* result tensors, reused across steps */
  int capres;
} hook_slot;

struct loom_monitored_session {
  loom_graph *g;
  loom_session *s;
  int nhooks;
  hook_slot *slots;
  loom_hook_context ctx;
  atomic_int stop;
  int failed; /* a step failed: no end() */
  /* merged argument arrays (grown only) */
  loom_output *feeds;
  loom_tensor **feed_vals;
  int capfeeds;
  loom_output *fetches;
  loom_tensor **fetch_vals;
  int capfetches;
  loom_node **targets;
  int captargets;
};

static int new_cap(int cap, int n) {
  int nc = cap ? cap : 8;
  while (nc < n) nc *= 2;
  return nc;
}
/* Grows *arr (elements of size sz, cap of them) to nc elements, zeroing the
 * new ones; 0 on success. */
static int grow_to(void **arr, int cap, int nc, size_t sz) {
  void *p = loom__realloc(*arr, sz * (size_t)nc);
  if (!p) return -1;
  memset((char *)p + sz * (size_t)cap, 0, sz * (size_t)(nc - cap));
  *arr = p;
  return 0;
}
static int grow(void **arr, int *cap, int n, size_t sz) {
  if (n <= *cap) return 0;
  int nc = new_cap(*cap, n);
  if (grow_to(arr, *cap, nc, sz)) return -1;
  *cap = nc;
  return 0;
}
/* Makes the merged arrays hold nf feeds, nx fetches and nt targets. */
static int reserve(loom_monitored_session *ms, int nf, int nx, int nt) {
  if (nf > ms->capfeeds) {
    int nc = new_cap(ms->capfeeds, nf);
    if (grow_to((void **)&ms->feeds, ms->capfeeds, nc, sizeof *ms->feeds) ||
        grow_to((void **)&ms->feed_vals, ms->capfeeds, nc, sizeof *ms->feed_vals))
      return -1;
    ms->capfeeds = nc;
  }
  if (nx > ms->capfetches) {
    int nc = new_cap(ms->capfetches, nx);
    if (grow_to((void **)&ms->fetches, ms->capfetches, nc, sizeof *ms->fetches) ||
        grow_to((void **)&ms->fetch_vals, ms->capfetches, nc, sizeof *ms->fetch_vals))
      return -1;
    ms->capfetches = nc;
  }
  return grow((void **)&ms->targets, &ms->captargets, nt, sizeof *ms->targets);
}

static loom_code default_init(loom_session *s, loom_graph *g, loom_status *st) {
  int ng = 0, nl = 0;
  loom_global_variables(g, &ng);
  loom_local_variables(g, &nl);
  loom_node *t[2];
  int nt = 0;
  if (ng > 0) t[nt++] = loom_global_variables_initializer(g);
  if (nl > 0) t[nt++] = loom_local_variables_initializer(g);
  if (!nt) return LOOM_OK;
  loom_code rc = loom_graph_status(g, st);
  if (rc) return rc;
  return loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, t, nt, st);
}

static void ms_free(loom_monitored_session *ms) {
  if (!ms) return;
  loom_session_free(ms->s);
  for (int i = 0; i < ms->nhooks; i++) {
    for (int j = 0; j < ms->slots[i].capres; j++) loom_tensor_free(ms->slots[i].res[j]);
    loom__free(ms->slots[i].res);
  }
  loom__free(ms->slots);
  loom__free(ms->feeds);
  loom__free(ms->feed_vals);
  loom__free(ms->fetches);
  loom__free(ms->fetch_vals);
  loom__free(ms->targets);
  loom__free(ms);
}

loom_monitored_session *loom_monitored_session_new(loom_graph *g, const loom_session_options *opts,
                                                   loom_session_init_fn init_fn, void *init_user, int nhooks,
                                                   loom_hook *const *hooks, loom_status *st) {
  if (!g) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "monitored session: graph is NULL");
    return NULL;
  }
  if (nhooks < 0 || (nhooks > 0 && !hooks)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "monitored session: invalid hook list (%d hooks)", nhooks);
    return NULL;
  }
  for (int i = 0; i < nhooks; i++)
    if (!hooks[i]) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "monitored session: hook %d is NULL", i);
      return NULL;
    }
  loom_monitored_session *ms = loom__calloc(1, sizeof *ms);
  if (!ms || (nhooks && !(ms->slots = loom__calloc((size_t)nhooks, sizeof *ms->slots)))) {
    loom__free(ms);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "monitored session: out of memory");
    return NULL;
  }
  ms->g = g;
  ms->nhooks = nhooks;
  atomic_init(&ms->stop, 0);
  for (int i = 0; i < nhooks; i++) ms->slots[i].h = hooks[i];

  loom_code rc = LOOM_OK;
  for (int i = 0; i < nhooks && !rc; i++)
    if (hooks[i]->ops.begin) rc = hooks[i]->ops.begin(hooks[i]->self, g, st);
  if (!rc) rc = loom_graph_status(g, st);
  if (!rc) {
    ms->s = loom_session_new(g, opts, st);
    if (!ms->s) rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  }
  if (!rc) rc = init_fn ? init_fn(ms->s, init_user, st) : default_init(ms->s, g, st);
  ms->ctx.s = ms->s;
  int stop_early = 0;
  for (int i = 0; i < nhooks && !rc; i++) {
    hooks[i]->stop_early = 0;
    if (hooks[i]->ops.after_create_session) rc = hooks[i]->ops.after_create_session(hooks[i]->self, ms->s, st);
    stop_early |= hooks[i]->stop_early;
    hooks[i]->stop_early = 0;
  }
  if (rc) {
    ms_free(ms);
    return NULL;
  }
  if (stop_early) atomic_store(&ms->stop, 1);
  loom_status_clear(st);
  return ms;
}

static loom_code bad_args(loom_monitored_session *ms, const loom_hook *h, loom_status *st) {
  ms->failed = 1;
  return loom_status_set(st, LOOM_INVALID_ARGUMENT, "hook %s: before_run returned invalid run args", h->name);
}

/* A failure in a step: OUT_OF_RANGE (end of input) ends the loop normally
 * (end() still runs, as MonitoredSession does for OutOfRangeError); any
 * other code marks the session failed. */
static loom_code step_failed(loom_monitored_session *ms, loom_code rc) {
  if (rc == LOOM_OUT_OF_RANGE) atomic_store(&ms->stop, 1);
  else ms->failed = 1;
  return rc;
}

loom_code loom_monitored_session_run(loom_monitored_session *ms, const loom_output *feeds,
                                     loom_tensor *const *feed_values, int nfeeds, const loom_output *fetches,
                                     loom_tensor **fetch_values, int nfetches, loom_node *const *targets,
                                     int ntargets, loom_status *st) {
  if (!ms) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "monitored session is NULL");
  if (nfeeds < 0 || nfetches < 0 || ntargets < 0 || (nfeeds && (!feeds || !feed_values)) ||
      (nfetches && (!fetches || !fetch_values)) || (ntargets && !targets))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "monitored session run: invalid argument lists");
  if (ms->failed)
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "monitored session: run called after a failed step");
  if (atomic_load(&ms->stop))
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "Run called even after should_stop requested.");

  loom_hook_context *ctx = &ms->ctx;
  ctx->stop = 0;
  ctx->orig_fetches = fetches;
  ctx->norig = nfetches;
  int nf = nfeeds, nx = nfetches, nt = ntargets;
  loom_code rc;
  for (int i = 0; i < ms->nhooks; i++) {
    hook_slot *sl = &ms->slots[i];
    loom_hook *h = sl->h;
    memset(&sl->args, 0, sizeof sl->args);
    if (!h->ops.before_run) continue;
    if ((rc = h->ops.before_run(h->self, ctx, &sl->args, st))) return step_failed(ms, rc);
    const loom_hook_run_args *a = &sl->args;
    if (a->nfetches < 0 || a->nfeeds < 0 || a->ntargets < 0 || (a->nfetches && !a->fetches) ||
        (a->nfeeds && (!a->feeds || !a->feed_values)) || (a->ntargets && !a->targets))
      return bad_args(ms, h, st);
    if (a->nfetches > sl->capres && grow((void **)&sl->res, &sl->capres, a->nfetches, sizeof *sl->res)) {
      ms->failed = 1;
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "monitored session: out of memory");
    }
    nf += a->nfeeds;
    nx += a->nfetches;
    nt += a->ntargets;
  }
  if (reserve(ms, nf, nx, nt)) {
    ms->failed = 1;
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "monitored session: out of memory");
  }
  /* merge: the caller's first, then each hook's in hook order */
  if (nfeeds) {
    memcpy(ms->feeds, feeds, sizeof *feeds * (size_t)nfeeds);
    memcpy(ms->feed_vals, feed_values, sizeof *feed_values * (size_t)nfeeds);
  }
  if (nfetches) memcpy(ms->fetch_vals, fetch_values, sizeof *fetch_values * (size_t)nfetches);
  if (nfetches) memcpy(ms->fetches, fetches, sizeof *fetches * (size_t)nfetches);
  if (ntargets) memcpy(ms->targets, targets, sizeof *targets * (size_t)ntargets);
  nf = nfeeds, nx = nfetches, nt = ntargets;
  for (int i = 0; i < ms->nhooks; i++) {
    const loom_hook_run_args *a = &ms->slots[i].args;
    if (a->nfeeds) {
      for (int j = 0; j < a->nfeeds; j++)
        for (int k = 0; k < nf; k++)
          if (ms->feeds[k].node == a->feeds[j].node && ms->feeds[k].index == a->feeds[j].index) {
            ms->failed = 1;
            return loom_status_set(st, LOOM_INVALID_ARGUMENT, "Same tensor (%s:%d) is fed by %s.",
                                   a->feeds[j].node ? loom_node_name(a->feeds[j].node) : "NULL",
                                   (int)a->feeds[j].index,
                                   k < nfeeds ? "a SessionRunHook and user" : "two hooks");
          }
      memcpy(ms->feeds + nf, a->feeds, sizeof *a->feeds * (size_t)a->nfeeds);
      memcpy(ms->feed_vals + nf, a->feed_values, sizeof *a->feed_values * (size_t)a->nfeeds);
      nf += a->nfeeds;
    }
    if (a->nfetches) {
      memcpy(ms->fetches + nx, a->fetches, sizeof *a->fetches * (size_t)a->nfetches);
      memcpy(ms->fetch_vals + nx, ms->slots[i].res, sizeof *ms->slots[i].res * (size_t)a->nfetches);
      nx += a->nfetches;
    }
    if (a->ntargets) {
      memcpy(ms->targets + nt, a->targets, sizeof *a->targets * (size_t)a->ntargets);
      nt += a->ntargets;
    }
  }

  rc = loom_session_run(ms->s, ms->feeds, ms->feed_vals, nf, ms->fetches, ms->fetch_vals, nx, ms->targets, nt, st);
  /* hand the (possibly replaced) result tensors back, on failure too */
  if (nfetches) memcpy(fetch_values, ms->fetch_vals, sizeof *fetch_values * (size_t)nfetches);
  nx = nfetches;
  for (int i = 0; i < ms->nhooks; i++) {
    hook_slot *sl = &ms->slots[i];
    if (sl->args.nfetches) {
      memcpy(sl->res, ms->fetch_vals + nx, sizeof *sl->res * (size_t)sl->args.nfetches);
      nx += sl->args.nfetches;
    }
  }
  if (rc) return step_failed(ms, rc);

  for (int i = 0; i < ms->nhooks; i++) {
    hook_slot *sl = &ms->slots[i];
    loom_hook *h = sl->h;
    if (!h->ops.after_run) continue;
    if ((rc = h->ops.after_run(h->self, ctx, sl->res, st))) return step_failed(ms, rc);
  }
  if (ctx->stop) atomic_store(&ms->stop, 1);
  loom_status_clear(st);
  return LOOM_OK;
}

int loom_monitored_session_should_stop(const loom_monitored_session *ms) {
  if (!ms) return 1;
  return ms->failed || atomic_load(&((loom_monitored_session *)ms)->stop);
}

void loom_monitored_session_request_stop(loom_monitored_session *ms) {
  if (ms) atomic_store(&ms->stop, 1);
}

loom_session *loom_monitored_session_session(loom_monitored_session *ms) { return ms ? ms->s : NULL; }

loom_code loom_monitored_session_close(loom_monitored_session *ms, loom_status *st) {
  if (!ms) return LOOM_OK;
  loom_code rc = LOOM_OK;
  if (!ms->failed)
    for (int i = 0; i < ms->nhooks && !rc; i++) {
      loom_hook *h = ms->slots[i].h;
      if (h->ops.end) rc = h->ops.end(h->self, ms->s, st);
    }
  ms_free(ms);
  if (!rc) loom_status_clear(st);
  return rc;
}

/* ===================================================================== *
 * SecondOrStepTimer
 * ===================================================================== */
loom_code loom_step_timer_init(loom_step_timer *t, double every_secs, int64_t every_steps, loom_status *st) {
  if (!t) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "step timer is NULL");
  if (!(every_secs >= 0) || every_steps < 0 || (every_secs > 0) == (every_steps > 0))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "step timer: exactly one of every_secs (%g) and every_steps (%lld) must be > 0", every_secs,
                           (long long)every_steps);
  t->every_secs = every_secs;
  t->every_steps = every_steps;
  t->last_step = -1;
  t->last_time = 0;
  return LOOM_OK;
}

int loom_step_timer_should_trigger(const loom_step_timer *t, int64_t step) {
  if (!t) return 0;
  if (t->last_step < 0) return 1;
  if (step == t->last_step) return 0;
  if (t->every_secs > 0 && loom__mono_secs() >= t->last_time + t->every_secs) return 1;
  if (t->every_steps > 0 && step >= t->last_step + t->every_steps) return 1;
  return 0;
}

void loom_step_timer_update(loom_step_timer *t, int64_t step, double *elapsed_secs, int64_t *elapsed_steps) {
  if (!t) return;
  double now = loom__mono_secs();
  double es = 0;
  int64_t en = 0;
  if (t->last_step >= 0) {
    es = now - t->last_time;
    en = step - t->last_step;
  }
  t->last_time = now;
  t->last_step = step;
  if (elapsed_secs) *elapsed_secs = es;
  if (elapsed_steps) *elapsed_steps = en;
}
