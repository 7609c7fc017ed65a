/* estimator/hooks/profiler.c - ProfilerHook: traces one step every N steps
 * or seconds and writes it as a Chrome trace, <dir>/timeline-<step>.json.
 * Helpers in common.c. */
#include <stdio.h>
#include <string.h>
#include "estimator/hooks/hooks_impl.h"

/* ===================================================================== *
 * ProfilerHook
 * ===================================================================== */
typedef struct profiler_hook {
  uint32_t magic;
  int64_t steps;
  double secs;
  char *dir;
  loom__gstep gs;
  loom_step_timer timer;
  int request;
  int64_t next_step;
  loom_session *traced;
} profiler_hook;

static loom_code prof_begin(void *self, loom_graph *g, loom_status *st) {
  profiler_hook *h = self;
  return loom__gstep_find(&h->gs, g, "ProfilerHook", st);
}
static loom_code prof_acs(void *self, loom_session *s, loom_status *st) {
  profiler_hook *h = self;
  loom_code rc = loom__mkdir_p(h->dir, st);
  if (rc) return rc;
  int64_t step;
  if ((rc = loom__gstep_read(&h->gs, s, &step, st))) return rc;
  /* the first trace comes save_steps (or save_secs) after the start */
  loom_step_timer_init(&h->timer, h->secs, h->steps, NULL);
  loom_step_timer_update(&h->timer, step, NULL, NULL);
  h->next_step = step + 1;
  h->traced = NULL;
  return LOOM_OK;
}
static loom_code prof_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  profiler_hook *h = self;
  h->request = loom_step_timer_should_trigger(&h->timer, h->next_step);
  if (h->request) {
    h->traced = loom_hook_context_session(ctx);
    loom_session_set_tracing(h->traced, 1);
  }
  a->nfetches = 1;
  a->fetches = &h->gs.out;
  return LOOM_OK;
}
static loom_code prof_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  profiler_hook *h = self;
  int64_t step = loom__hook_tensor_step(res[0]);
  h->next_step = step + 1;
  if (!h->request) return LOOM_OK;
  loom_session *s = loom_hook_context_session(ctx);
  loom_step_timer_update(&h->timer, step, NULL, NULL);
  int n = 0;
  const loom_trace_event *ev = loom_session_last_trace(s, &n);
  loom_session_set_tracing(s, 0);
  h->traced = NULL;
  size_t cap = strlen(h->dir) + 48;
  char *path = loom__malloc(cap);
  if (!path) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ProfilerHook: out of memory");
  snprintf(path, cap, "%s/timeline-%lld.json", h->dir, (long long)step);
  loom_code rc = loom_trace_write_chrome(path, ev, n, st);
  if (!rc) loom__log(LOOM_LOG_INFO, "Saved profile of step %lld to %s (%d nodes)", (long long)step, path, n);
  loom__free(path);
  return rc;
}
static loom_code prof_end(void *self, loom_session *s, loom_status *st) {
  profiler_hook *h = self;
  if (h->traced) loom_session_set_tracing(h->traced, 0);
  h->traced = NULL;
  return LOOM_OK;
}
static void prof_destroy(void *self) {
  profiler_hook *h = self;
  loom__free(h->dir);
  loom__gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_profiler_hook(int64_t save_steps, double save_secs, const char *output_dir, loom_status *st) {
  if (save_steps < 0 || !(save_secs >= 0) || (save_steps > 0) == (save_secs > 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "ProfilerHook: exactly one of save_steps (%lld) and save_secs (%g) must be > 0",
                    (long long)save_steps, save_secs);
    return NULL;
  }
  if (!output_dir || !*output_dir) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ProfilerHook: output_dir is empty");
    return NULL;
  }
  static const loom_hook_ops ops = {prof_begin, prof_acs, prof_before, prof_after, prof_end, prof_destroy};
  profiler_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = LOOM__HOOK_MAGIC_PROFILER;
    h->steps = save_steps;
    h->secs = save_secs;
    h->timer.last_step = -1;
    if (!(h->dir = loom__strdup(output_dir))) {
      loom__free(h);
      h = NULL;
    }
  }
  return loom__hook_wrap(&ops, h, "ProfilerHook", st);
}
