/* estimator/hooks/hooks_impl.h - internals shared by hooks.c (monitored session)
 * and hooks_std.c (the standard hooks). Not installed. */
#ifndef LOOM_HOOKS_IMPL_H
#define LOOM_HOOKS_IMPL_H
#include "engine/engine_impl.h"
#include "base/fsutil.h"
#include "loom/loom_hooks.h"

/* Called from a hook's after_create_session: the monitored session being
 * created is stopped before its first step (should_stop is true at once).
 * StopAtStepHook uses it when global_step is already >= last_step. */
void loom__hook_request_stop_early(loom_hook *h);

/* The hook's ops (a copy made by loom_hook_new); NULL for NULL. The
 * standard hooks' typed accessors identify their hooks by them. */
const loom_hook_ops *loom__hook_ops(const loom_hook *h);


#endif
