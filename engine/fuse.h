/* engine/fuse.h - folding elementwise steps into the step before them
 * (engine/fuse.c). Internal header. */
#ifndef LOOM_ENGINE_FUSE_H
#define LOOM_ENGINE_FUSE_H
#include "engine/session_impl.h"

/* Folds the chains it can into their first step (ctx->epi) in a CPU plan
 * whose buffer offsets are set, after undoing an earlier call's folding;
 * returns the steps folded away (p->nfolded). Device plans: none. */
int loom__plan_fuse(loom_plan *p);

#endif
