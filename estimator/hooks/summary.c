/* estimator/hooks/summary.c - SummarySaverHook: writes the graph's
 * summaries (and a session-start log) to an event writer every N steps or
 * seconds. Helpers in common.c. */
#include <string.h>
#include "estimator/hooks/hooks_impl.h"

/* ===================================================================== *
 * SummarySaverHook
 * ===================================================================== */
typedef struct summary_hook {
  uint32_t magic;
  int64_t steps;
  double secs;
  loom_event_writer *w;
  loom_graph *g;
  loom__gstep gs;
  loom_output *fetch; /* [global_step, summaries...] */
  int nfetch, capfetch;
  loom_step_timer timer;
  int first, request;
  int64_t next_step;
} summary_hook;

static loom_code summary_begin(void *self, loom_graph *g, loom_status *st) {
  summary_hook *h = self;
  loom_code rc = loom__gstep_find(&h->gs, g, "SummarySaverHook", st);
  if (rc) return rc;
  const loom_output *outs = NULL;
  int n = loom_graph_summaries(g, NULL, NULL, &outs);
  if (n + 1 > h->capfetch) {
    loom_output *p = loom__realloc(h->fetch, sizeof *p * (size_t)(n + 1));
    if (!p) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "SummarySaverHook: out of memory");
    h->fetch = p;
    h->capfetch = n + 1;
  }
  h->fetch[0] = h->gs.out;
  if (n) memcpy(h->fetch + 1, outs, sizeof *outs * (size_t)n);
  h->nfetch = n + 1;
  h->g = g;
  loom_step_timer_init(&h->timer, h->secs, h->steps, NULL);
  h->first = 1;
  h->next_step = 0;
  return LOOM_OK;
}
static loom_code summary_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  summary_hook *h = self;
  h->request = h->first || loom_step_timer_should_trigger(&h->timer, h->next_step);
  a->nfetches = h->request ? h->nfetch : 1;
  a->fetches = h->fetch;
  return LOOM_OK;
}
static loom_code summary_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  summary_hook *h = self;
  int64_t step = loom__hook_tensor_step(res[0]);
  loom_code rc;
  /* the graph once per session (TF's Estimator writes it when the session
   * is created), then the session-start log */
  if (h->first && (rc = loom_event_writer_add_graph(h->w, h->g, st))) return rc;
  if (h->first && (rc = loom_event_writer_add_session_log(h->w, LOOM_SESSION_LOG_START, NULL, step, st))) return rc;
  if (h->request) {
    loom_step_timer_update(&h->timer, step, NULL, NULL);
    if (h->nfetch > 1 && (rc = loom_event_writer_add_graph_summaries(h->w, h->g, res + 1, step, st))) return rc;
  }
  h->first = 0;
  h->next_step = step + 1;
  return LOOM_OK;
}
static loom_code summary_end(void *self, loom_session *s, loom_status *st) {
  summary_hook *h = self;
  return loom_event_writer_flush(h->w, st);
}
static void summary_destroy(void *self) {
  summary_hook *h = self;
  loom__free(h->fetch);
  loom__gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_summary_saver_hook(int64_t save_steps, double save_secs, loom_event_writer *writer, loom_status *st) {
  if (save_steps < 0 || !(save_secs >= 0) || (save_steps > 0) == (save_secs > 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "SummarySaverHook: exactly one of save_steps (%lld) and save_secs (%g) must be > 0",
                    (long long)save_steps, save_secs);
    return NULL;
  }
  if (!writer) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "SummarySaverHook: writer is NULL");
    return NULL;
  }
  static const loom_hook_ops ops = {summary_begin, NULL, summary_before, summary_after, summary_end, summary_destroy};
  summary_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = LOOM__HOOK_MAGIC_SUMMARY;
    h->steps = save_steps;
    h->secs = save_secs;
    h->w = writer;
    h->timer.last_step = -1;
  }
  return loom__hook_wrap(&ops, h, "SummarySaverHook", st);
}
