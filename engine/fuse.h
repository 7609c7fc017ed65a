/* engine/fuse.h - folding elementwise steps into the step before them
 * (engine/fuse.c). Internal header. */
#ifndef LOOM_ENGINE_FUSE_H
#define LOOM_ENGINE_FUSE_H
#include "engine/session_impl.h"

/* Folds the chains it can into their first step (ctx->epi) in a CPU plan
 * whose buffer offsets are set (top: the arena's size), after undoing an
 * earlier call's folding; sets p->nfolded (the steps folded away) and returns
 * the arena's size after it (a folded MaxPool's output may move past top).
 * Device plans: nothing folded, top returned. */
int64_t loom__plan_fuse(loom_plan *p, int64_t top);

#endif
