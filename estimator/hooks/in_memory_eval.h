/* estimator/hooks/in_memory_eval.h - the InMemoryEvaluatorHook's state,
 * shared by in_memory_eval.c (the evaluator) and early_stopping.c (the
 * early-stopping hooks, which are evaluators with a stop predicate). Not
 * installed. */
#ifndef LOOM_IN_MEMORY_EVAL_H
#define LOOM_IN_MEMORY_EVAL_H
#include "base/base.h"
#include "estimator/estimator_impl.h"
#include "loom/loom_data.h"
#include "loom/loom_estimator.h"
#include "loom/loom_hooks.h"

typedef struct inmem inmem;
struct inmem {
  loom_estimator *e;
  loom_input_fn input_fn;
  void *input_user;
  int64_t steps;
  char *name;
  int64_t every_n;
  int tf_schedule; /* TF's InMemoryEvaluatorHook: also at session creation; at the end always */
  /* early stopping (set by early_stopping.c; should_stop NULL: a plain
   * evaluator): asked after each evaluation whether to stop training */
  int (*should_stop)(const inmem *m);
  loom_early_stop_fn stop_fn;
  void *stop_user;
  int32_t kind;
  char *metric;
  double threshold;
  int64_t min_steps;
  /* state */
  loom_session *train_s;
  int64_t iter;
  int built;
  est_built b;
  est_eval_ops ops;
  loom_dataset *ds;
  loom_monitored_session *ms;
  loom_tensor *tmp;
  loom_eval_result **hist; /* every evaluation's result, oldest first */
  int32_t nhist;
  int64_t last_eval_step;
};

/* A hook named `what` evaluating input_fn's data for `steps` steps (0: to
 * its end) every every_n training steps; its self is the inmem. NULL with
 * st set on bad arguments or out of memory. */
loom_hook *loom__inmem_new(loom_estimator *e, loom_input_fn input_fn, void *input_user, int64_t steps,
                           const char *name, int64_t every_n, const char *what, loom_status *st);

#endif
