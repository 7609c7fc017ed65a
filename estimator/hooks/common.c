/* estimator/hooks/common.c - helpers shared by the standard SessionRunHooks
 * (tf.compat.v1.train.basic_session_run_hooks), one file per family:
 * stop.c (StopAtStep, GlobalStepWaiter), logging.c (LoggingTensor with a
 * terminal progress bar, StepCounter), nan.c (NanTensor), checkpoint.c
 * (CheckpointSaver + listeners), summary.c (SummarySaver), profiler.c
 * (Profiler, Chrome trace), final_ops.c (FinalOps), feed_fn.c (FeedFn);
 * in_memory_eval.c and early_stopping.c hold the evaluation hooks.
 *
 * Hooks that need the global step each step fetch the global_step variable's
 * output (an int64 scalar; loom fetches a variable's value at the end of the
 * run, i.e. after the train op's increment). Hooks that fetch nothing on a
 * step add nothing to it. Every hook keeps its fetch arrays in its own state,
 * so steps allocate nothing. */
#include "estimator/hooks/hooks_impl.h"

loom_hook *loom__hook_wrap(const loom_hook_ops *ops, void *self, const char *name, loom_status *st) {
  loom_hook *h = self ? loom_hook_new(ops, self, name) : NULL;
  if (!h) {
    if (self) ops->destroy(self);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", name);
    return NULL;
  }
  loom_status_clear(st);
  return h;
}

void *loom__hook_self_of(const loom_hook *h, void (*destroy)(void *), uint32_t magic) {
  const loom_hook_ops *ops = loom__hook_ops(h);
  if (!ops || ops->destroy != destroy) return NULL;
  uint32_t *p = loom_hook_self(h);
  return p && *p == magic ? p : NULL;
}

void loom__hook_plain_destroy(void *self) { loom__free(self); }

loom_code loom__gstep_find(loom__gstep *gs, loom_graph *g, const char *hook, loom_status *st) {
  loom_variable *v = loom_get_global_step(g);
  if (!v) return loom_status_set(st, LOOM_FAILED_PRECONDITION, "Global step should be created to use %s.", hook);
  char *nm = loom__strdup(loom_variable_name(v));
  if (!nm) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", hook);
  loom__free(gs->name);
  gs->name = nm;
  gs->out = loom_variable_output(v);
  return LOOM_OK;
}

void loom__gstep_free(loom__gstep *gs) {
  loom__free(gs->name);
  loom_tensor_free(gs->tmp);
}

int64_t loom__hook_tensor_step(const loom_tensor *t) {
  const void *d = t ? loom_tensor_data_const(t) : NULL;
  if (!d || loom_tensor_numel(t) < 1) return 0;
  switch (loom_tensor_dtype(t)) {
  case LOOM_F32: return (int64_t)*(const float *)d;
  case LOOM_F64: return (int64_t)*(const double *)d;
  case LOOM_I32: return *(const int32_t *)d;
  case LOOM_I64: return (int64_t)(double)*(const int64_t *)d;
  default: return 0;
  }
}

loom_code loom__gstep_read(loom__gstep *gs, loom_session *s, int64_t *step, loom_status *st) {
  loom_code rc = loom_session_read_variable(s, gs->name, &gs->tmp, st);
  if (rc) return rc;
  *step = loom__hook_tensor_step(gs->tmp);
  return LOOM_OK;
}
