/* estimator/hooks/hooks_impl.h - internals shared by the files of
 * estimator/hooks/: hooks.c (the hook wrapper and the monitored session),
 * common.c (helpers of the standard hooks) and one file per hook family
 * (stop.c, logging.c, nan.c, checkpoint.c, summary.c, profiler.c,
 * final_ops.c, feed_fn.c; in_memory_eval.c and early_stopping.c share
 * in_memory_eval.h besides). Only base/ and public headers below it, no
 * engine internals. Not installed. */
#ifndef LOOM_HOOKS_IMPL_H
#define LOOM_HOOKS_IMPL_H
#include <stdint.h>
#include "base/base.h"
#include "base/fsutil.h"
#include "loom/loom_hooks.h"
#include "loom/loom_session.h"
#include "loom/loom_summary.h"
#include "loom/loom_train.h"

/* Called from a hook's after_create_session: the monitored session being
 * created is stopped before its first step (should_stop is true at once).
 * StopAtStepHook uses it when global_step is already >= last_step. */
void loom__hook_request_stop_early(loom_hook *h);

/* The hook's ops (a copy made by loom_hook_new); NULL for NULL. The
 * standard hooks' typed accessors identify their hooks by them. */
const loom_hook_ops *loom__hook_ops(const loom_hook *h);

/* ---- the standard hooks' shared helpers (common.c) ---- */

/* Tags at the start of every standard hook's state, so the typed accessors
 * can check what they were given. */
enum {
  LOOM__HOOK_MAGIC_STOP = 0x484b0001u,
  LOOM__HOOK_MAGIC_LOG,
  LOOM__HOOK_MAGIC_COUNTER,
  LOOM__HOOK_MAGIC_NAN,
  LOOM__HOOK_MAGIC_CKPT,
  LOOM__HOOK_MAGIC_SUMMARY,
  LOOM__HOOK_MAGIC_FINAL,
  LOOM__HOOK_MAGIC_FEED,
  LOOM__HOOK_MAGIC_WAITER,
  LOOM__HOOK_MAGIC_PROFILER
};

/* Wraps self in a hook; on failure frees self through ops->destroy. */
loom_hook *loom__hook_wrap(const loom_hook_ops *ops, void *self, const char *name, loom_status *st);
/* The state of a standard hook, identified by its destroy op (each
 * accessor's hook kind has its own), after checking the magic tag. */
void *loom__hook_self_of(const loom_hook *h, void (*destroy)(void *), uint32_t magic);
/* A destroy op for states that own nothing but themselves. */
void loom__hook_plain_destroy(void *self);

/* The graph's global step: its output and its variable name. */
typedef struct loom__gstep {
  loom_output out;
  char *name;
  loom_tensor *tmp; /* read buffer, reused */
} loom__gstep;
/* Finds g's global step (FAILED_PRECONDITION naming hook if there is none);
 * copies its name into gs->name, freeing the previous one. */
loom_code loom__gstep_find(loom__gstep *gs, loom_graph *g, const char *hook, loom_status *st);
void loom__gstep_free(loom__gstep *gs);
/* The session's current global step. */
loom_code loom__gstep_read(loom__gstep *gs, loom_session *s, int64_t *step, loom_status *st);
/* A fetched global step (the first element of a numeric tensor; 0 for
 * NULL, empty or non-numeric). */
int64_t loom__hook_tensor_step(const loom_tensor *t);

#endif
