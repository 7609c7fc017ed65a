/* estimator/hooks/checkpoint.c - CheckpointSaverHook and its
 * CheckpointSaverListeners: saves at the start, every N steps or seconds
 * and at the end, into <dir>/model.ckpt-<step>. Helpers in common.c. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "estimator/hooks/hooks_impl.h"

/* ===================================================================== *
 * CheckpointSaverHook
 * ===================================================================== */
typedef struct ckpt_hook {
  uint32_t magic;
  char *dir, *prefix;
  double secs;
  int64_t steps;
  loom_saver *user_saver, *own_saver;
  int keep_max;
  loom_event_writer *w;
  int nl;
  const loom_checkpoint_listener **l;
  void **ls;
  loom_step_timer timer;
  loom__gstep gs;
} ckpt_hook;

static loom_saver *ckpt_saver(ckpt_hook *h) { return h->user_saver ? h->user_saver : h->own_saver; }

/* Saves at step; *stop = a listener asked to stop. */
static loom_code ckpt_save(ckpt_hook *h, loom_session *s, int64_t step, int *stop, loom_status *st) {
  loom_code rc;
  *stop = 0;
  if (h->nl) loom__log(LOOM_LOG_INFO, "Calling checkpoint listeners before saving checkpoint %lld...", (long long)step);
  for (int i = 0; i < h->nl; i++)
    if (h->l[i]->before_save && (rc = h->l[i]->before_save(h->ls ? h->ls[i] : NULL, s, step, st))) return rc;
  loom__log(LOOM_LOG_INFO, "Saving checkpoints for %lld into %s.", (long long)step, h->prefix);
  const char *path = loom_saver_save(ckpt_saver(h), s, h->prefix, step, st);
  if (!path) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  if (h->w && (rc = loom_event_writer_add_session_log(h->w, LOOM_SESSION_LOG_CHECKPOINT, path, step, st))) return rc;
  if (h->nl) loom__log(LOOM_LOG_INFO, "Calling checkpoint listeners after saving checkpoint %lld...", (long long)step);
  for (int i = 0; i < h->nl; i++) {
    int sv = 0;
    if (h->l[i]->after_save && (rc = h->l[i]->after_save(h->ls ? h->ls[i] : NULL, s, step, &sv, st))) return rc;
    if (sv) *stop = 1;
  }
  return LOOM_OK;
}

static loom_code ckpt_begin(void *self, loom_graph *g, loom_status *st) {
  ckpt_hook *h = self;
  loom_code rc = loom__gstep_find(&h->gs, g, "CheckpointSaverHook", st);
  if (rc) return rc;
  /* a default saver is built for each session's graph */
  loom_saver_free(h->own_saver);
  h->own_saver = NULL;
  for (int i = 0; i < h->nl; i++)
    if (h->l[i]->begin && (rc = h->l[i]->begin(h->ls ? h->ls[i] : NULL, st))) return rc;
  return LOOM_OK;
}
static loom_code ckpt_acs(void *self, loom_session *s, loom_status *st) {
  ckpt_hook *h = self;
  loom_code rc = loom__mkdir_p(h->dir, st);
  if (rc) return rc;
  if (!h->user_saver) {
    h->own_saver = loom_saver_new(loom_session_graph(s), 0, NULL, h->keep_max, st);
    if (!h->own_saver) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
    /* earlier runs' checkpoints count towards keep_max (no state file yet: none) */
    char state[4200];
    snprintf(state, sizeof state, "%s/checkpoint", h->dir);
    if (!access(state, F_OK) && (rc = loom_saver_recover_last_checkpoints(h->own_saver, h->dir, st))) return rc;
  }
  int64_t step;
  if ((rc = loom__gstep_read(&h->gs, s, &step, st))) return rc;
  int stop;
  if ((rc = ckpt_save(h, s, step, &stop, st))) return rc;
  loom_step_timer_init(&h->timer, h->secs, h->steps, NULL);
  loom_step_timer_update(&h->timer, step, NULL, NULL);
  return LOOM_OK;
}
static loom_code ckpt_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  ckpt_hook *h = self;
  a->nfetches = 1;
  a->fetches = &h->gs.out;
  return LOOM_OK;
}
static loom_code ckpt_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  ckpt_hook *h = self;
  int64_t step = loom__hook_tensor_step(res[0]);
  if (!loom_step_timer_should_trigger(&h->timer, step)) return LOOM_OK;
  loom_step_timer_update(&h->timer, step, NULL, NULL);
  int stop;
  loom_code rc = ckpt_save(h, loom_hook_context_session(ctx), step, &stop, st);
  if (rc) return rc;
  if (stop) loom_hook_context_request_stop(ctx);
  return LOOM_OK;
}
static loom_code ckpt_end(void *self, loom_session *s, loom_status *st) {
  ckpt_hook *h = self;
  int64_t step;
  loom_code rc = loom__gstep_read(&h->gs, s, &step, st);
  if (rc) return rc;
  if (step != h->timer.last_step) {
    int stop;
    if ((rc = ckpt_save(h, s, step, &stop, st))) return rc;
  }
  for (int i = 0; i < h->nl; i++)
    if (h->l[i]->end && (rc = h->l[i]->end(h->ls ? h->ls[i] : NULL, s, step, st))) return rc;
  return LOOM_OK;
}
static void ckpt_destroy(void *self) {
  ckpt_hook *h = self;
  loom__free(h->dir);
  loom__free(h->prefix);
  loom_saver_free(h->own_saver);
  loom__free(h->l);
  loom__free(h->ls);
  loom__gstep_free(&h->gs);
  loom__free(h);
}

loom_hook *loom_checkpoint_saver_hook(const char *dir, double save_secs, int64_t save_steps, loom_saver *saver,
                                      int keep_max, loom_event_writer *writer, int nlisteners,
                                      const loom_checkpoint_listener *const *listeners, void *const *listener_selves,
                                      loom_status *st) {
  if (!dir || !*dir) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "CheckpointSaverHook: checkpoint_dir is empty");
    return NULL;
  }
  if (save_steps < 0 || !(save_secs >= 0) || (save_steps > 0) == (save_secs > 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "CheckpointSaverHook: exactly one of save_secs (%g) and save_steps (%lld) must be > 0", save_secs,
                    (long long)save_steps);
    return NULL;
  }
  if (nlisteners < 0 || (nlisteners > 0 && !listeners)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "CheckpointSaverHook: invalid listener list (%d listeners)",
                    nlisteners);
    return NULL;
  }
  for (int i = 0; i < nlisteners; i++)
    if (!listeners[i]) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "CheckpointSaverHook: listener %d is NULL", i);
      return NULL;
    }
  static const loom_hook_ops ops = {ckpt_begin, ckpt_acs, ckpt_before, ckpt_after, ckpt_end, ckpt_destroy};
  ckpt_hook *h = loom__calloc(1, sizeof *h);
  if (h) {
    h->magic = LOOM__HOOK_MAGIC_CKPT;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--; /* "dir/" -> "dir" */
    h->dir = loom__malloc(n + 1);
    h->prefix = loom__malloc(n + 16);
    h->secs = save_secs;
    h->steps = save_steps;
    h->user_saver = saver;
    h->keep_max = keep_max;
    h->w = writer;
    h->nl = nlisteners;
    h->timer.last_step = -1;
    int ok = h->dir && h->prefix;
    if (ok) {
      memcpy(h->dir, dir, n);
      h->dir[n] = 0;
      snprintf(h->prefix, n + 16, "%s/model.ckpt", h->dir);
    }
    if (ok && nlisteners) {
      h->l = loom__malloc(sizeof *h->l * (size_t)nlisteners);
      ok = h->l != NULL;
      if (ok) memcpy(h->l, listeners, sizeof *h->l * (size_t)nlisteners);
      if (ok && listener_selves) {
        h->ls = loom__malloc(sizeof *h->ls * (size_t)nlisteners);
        ok = h->ls != NULL;
        if (ok) memcpy(h->ls, listener_selves, sizeof *h->ls * (size_t)nlisteners);
      }
    }
    if (!ok) {
      ckpt_destroy(h);
      h = NULL;
    }
  }
  return loom__hook_wrap(&ops, h, "CheckpointSaverHook", st);
}
