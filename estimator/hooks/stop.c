/* estimator/hooks/stop.c - the hooks that bound a training loop by the
 * global step: StopAtStepHook (stop at or after a step) and
 * GlobalStepWaiterHook (start once the global step has reached a value;
 * between-graph workers wait for the chief). Helpers in common.c. */
#include <errno.h>
#include <time.h>
#include "estimator/hooks/hooks_impl.h"

/* ===================================================================== *
 * StopAtStepHook
 * ===================================================================== */
typedef struct stop_hook {
  uint32_t magic;
  int64_t num_steps, last_step_arg, last_step;
  loom__gstep gs;
  loom_hook *hook;
} stop_hook;

static loom_code stop_begin(void *self, loom_graph *g, loom_status *st) {
  stop_hook *h = self;
  return loom__gstep_find(&h->gs, g, "StopAtStepHook", st);
}
static loom_code stop_acs(void *self, loom_session *s, loom_status *st) {
  stop_hook *h = self;
  int64_t step;
  loom_code rc = loom__gstep_read(&h->gs, s, &step, st);
  if (rc) return rc;
  h->last_step = h->num_steps > 0 ? step + h->num_steps : h->last_step_arg;
  if (step >= h->last_step) loom__hook_request_stop_early(h->hook);
  return LOOM_OK;
}
static loom_code stop_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  stop_hook *h = self;
  a->nfetches = 1;
  a->fetches = &h->gs.out;
  return LOOM_OK;
}
static loom_code stop_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  stop_hook *h = self;
  if (loom__hook_tensor_step(res[0]) >= h->last_step) loom_hook_context_request_stop(ctx);
  return LOOM_OK;
}
static void stop_destroy(void *self) {
  stop_hook *h = self;
  loom__gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_stop_at_step_hook(int64_t num_steps, int64_t last_step, loom_status *st) {
  if (num_steps < 0 || last_step < 0 || (num_steps > 0) == (last_step > 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "StopAtStepHook: exactly one of num_steps (%lld) and last_step (%lld) must be > 0, the other 0",
                    (long long)num_steps, (long long)last_step);
    return NULL;
  }
  static const loom_hook_ops ops = {stop_begin, stop_acs, stop_before, stop_after, NULL, stop_destroy};
  stop_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = LOOM__HOOK_MAGIC_STOP;
    h->num_steps = num_steps;
    h->last_step_arg = last_step;
    h->last_step = last_step;
  }
  loom_hook *hk = loom__hook_wrap(&ops, h, "StopAtStepHook", st);
  if (hk) h->hook = hk;
  return hk;
}

/* ===================================================================== *
 * GlobalStepWaiterHook
 * ===================================================================== */
typedef struct waiter_hook {
  uint32_t magic;
  int64_t wait;
  int started;
  loom__gstep gs;
} waiter_hook;

static loom_code waiter_begin(void *self, loom_graph *g, loom_status *st) {
  waiter_hook *h = self;
  h->started = 0;
  return loom__gstep_find(&h->gs, g, "GlobalStepWaiterHook", st);
}
static loom_code waiter_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  waiter_hook *h = self;
  if (h->started) return LOOM_OK;
  if (h->wait <= 0) {
    h->started = 1;
    return LOOM_OK;
  }
  loom_session *s = loom_hook_context_session(ctx);
  int64_t last_logged = 0;
  for (int polls = 0;; polls++) {
    int64_t step;
    loom_code rc = loom__gstep_read(&h->gs, s, &step, st);
    if (rc) return rc;
    if (step >= h->wait) {
      h->started = 1;
      return LOOM_OK;
    }
    if (!polls) {
      loom__log(LOOM_LOG_INFO, "Waiting for global step %lld before starting training.", (long long)h->wait);
    } else if (step - last_logged > 1000) {
      loom__log(LOOM_LOG_INFO, "Waiting for global step %lld before starting training. Current step is %lld.",
                (long long)h->wait, (long long)step);
      last_logged = step;
    }
    struct timespec ts = {0, 500000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
  }
}
static void waiter_destroy(void *self) {
  waiter_hook *h = self;
  loom__gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_global_step_waiter_hook(int64_t wait_until_step, loom_status *st) {
  if (wait_until_step < 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "GlobalStepWaiterHook: wait_until_step (%lld) must be >= 0",
                    (long long)wait_until_step);
    return NULL;
  }
  static const loom_hook_ops ops = {waiter_begin, NULL, waiter_before, NULL, NULL, waiter_destroy};
  waiter_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = LOOM__HOOK_MAGIC_WAITER;
    h->wait = wait_until_step;
  }
  return loom__hook_wrap(&ops, h, "GlobalStepWaiterHook", st);
}
