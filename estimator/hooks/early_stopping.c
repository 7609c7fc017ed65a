/* estimator/hooks/early_stopping.c - the early-stopping hooks
 * (tf.estimator.experimental.make_early_stopping_hook and the stop_if_*
 * hooks): an in-memory evaluator (in_memory_eval.c) that, after each of its
 * evaluations, asks a predicate over the evaluation history whether to stop
 * training: the user's should_stop_fn, or one of TF's stop_if_higher/lower/
 * no_increase/no_decrease on a metric. */
#include <math.h>
#include "estimator/hooks/in_memory_eval.h"

/* TF's stop_if_* predicates over the evaluation history. */
static int builtin_should_stop(const inmem *m) {
  const loom_eval_result *cur = m->hist[m->nhist - 1];
  if (cur->global_step < m->min_steps) return 0;
  double v;
  if (loom_eval_result_get(cur, m->metric, &v, NULL) != LOOM_OK) return 0;
  switch (m->kind) {
  case LOOM_STOP_IF_HIGHER: return v > m->threshold;
  case LOOM_STOP_IF_LOWER: return v < m->threshold;
  default: break;
  }
  /* no increase / no decrease: steps since the best value */
  int higher = m->kind == LOOM_STOP_IF_NO_INCREASE;
  double best = 0;
  int64_t best_step = -1;
  for (int i = 0; i < m->nhist; i++) {
    double x;
    if (loom_eval_result_get(m->hist[i], m->metric, &x, NULL) != LOOM_OK) continue;
    if (best_step < 0 || (higher ? x > best : x < best)) {
      best = x;
      best_step = m->hist[i]->global_step;
    }
  }
  return best_step >= 0 && (double)(cur->global_step - best_step) >= m->threshold;
}

/* The user's should_stop_fn over the evaluation history. */
static int user_should_stop(const inmem *m) {
  return m->stop_fn(m->stop_user, m->nhist, (const loom_eval_result *const *)m->hist);
}

loom_hook *loom_early_stopping_hook(loom_estimator *e, loom_input_fn input_fn, void *input_user, int64_t eval_steps,
                                    loom_early_stop_fn should_stop, void *user, int64_t run_every_steps,
                                    loom_status *st) {
  if (!should_stop) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "early_stopping_hook: should_stop_fn is NULL");
    return NULL;
  }
  loom_hook *h = loom__inmem_new(e, input_fn, input_user, eval_steps, NULL, run_every_steps, "EarlyStoppingHook", st);
  if (h) {
    inmem *m = loom_hook_self(h);
    m->stop_fn = should_stop;
    m->stop_user = user;
    m->should_stop = user_should_stop;
  }
  return h;
}

loom_hook *loom_stop_if_hook(loom_estimator *e, loom_input_fn input_fn, void *input_user, int64_t eval_steps,
                             loom_early_stop_kind kind, const char *metric, double threshold, int64_t min_steps,
                             int64_t run_every_steps, loom_status *st) {
  if (!metric || (int)kind < 0 || kind > LOOM_STOP_IF_NO_DECREASE || !isfinite(threshold)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "stop_if hook: metric is NULL, kind unknown or threshold not finite");
    return NULL;
  }
  loom_hook *h = loom__inmem_new(e, input_fn, input_user, eval_steps, NULL, run_every_steps, "EarlyStoppingHook", st);
  if (h) {
    inmem *m = loom_hook_self(h);
    m->kind = (int32_t)kind;
    m->threshold = threshold;
    m->min_steps = min_steps;
    if (!(m->metric = loom__strdup(metric))) {
      loom_hook_free(h);
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
      return NULL;
    }
    m->should_stop = builtin_should_stop;
  }
  return h;
}
