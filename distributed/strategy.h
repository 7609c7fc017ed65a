/* distributed/strategy.h - internal: a distribution strategy (TF's tf.distribute idea) as the one
 * training loop (Estimator.train, one level up) sees it. Local training is no strategy (NULL).
 * A strategy contributes only what differs from local training:
 *  - where the variables live and how gradients are exchanged and applied: its hook, run first among the
 *    training hooks (before every run it may set the session's global step; it adds the fetches it needs
 *    and after the run exchanges them), and whether the loop runs the model's train op (run_train_op 0:
 *    the loop fetches the loss only and the hook applies the update elsewhere);
 *  - which process checkpoints and writes summaries (is_chief) and what is restored at start (restore);
 *  - a checkpoint listener the chief's saver calls first at every save (the PS shards' own checkpoint);
 *  - what happens at the end (end: the chief's end-of-job protocol, the trainers' end markers), given the
 *    loop's outcome.
 * Kinds: LOOM__STRATEGY_PS (distributed/job.c: async, bounded staleness or sync with backup workers, per
 * the PS's consistency) and LOOM__STRATEGY_COLLECTIVE (distributed/collective_strategy.c, all-reduce):
 * every worker holds all variables (restored on every worker, then broadcast from worker 0 when the session
 * exists), the loop fetches the loss (run_train_op 0) and the strategy's hook runs the model's train op on
 * the gradients averaged over the workers; worker 0 is the chief. */
#ifndef LOOM_DIST_STRATEGY_H
#define LOOM_DIST_STRATEGY_H
#include "loom/loom.h"
#include "loom/loom_hooks.h"

typedef enum loom__strategy_kind {
  LOOM__STRATEGY_PS = 1,
  LOOM__STRATEGY_COLLECTIVE = 2,
} loom__strategy_kind;

/* What begin tells the loop. */
typedef struct loom__strategy_plan {
  loom_hook *hook;                          /* run first among the hooks (owned by the loop once given) */
  const loom_checkpoint_listener *listener; /* the chief's saver calls it first (NULL: none) */
  void *listener_self;
  int run_train_op;                         /* 0: the loop fetches the loss and runs targets instead */
  loom_node *const *targets;                /* run_train_op 0: what the trainer itself updates each step */
  int ntargets;
  int is_chief;                             /* checkpoints, summaries, chief hooks */
  int restore;                              /* restore model_dir's latest checkpoint into the session */
  int skip_if_checkpoint_done;              /* 1: no training when model_dir's checkpoint is at max_steps */
  int32_t device_index;                     /* a training session on a device uses device_index modulo the
                                               devices present (a rank's own GPU; 0 by default) */
} loom__strategy_plan;

typedef struct loom__strategy loom__strategy;
typedef struct loom__strategy_ops {
  loom__strategy_kind kind;
  const char *name;
  /* The TRAIN graph g is built (train_op, loss, global_step its parts); fills plan. */
  loom_code (*begin)(loom__strategy *s, loom_graph *g, loom_node *train_op, loom_output loss,
                     loom_variable *global_step, loom__strategy_plan *plan, loom_status *st);
  /* The loop is over (rc: its outcome, the session closed); called whenever begin was (and also when
   * the loop failed before begin: began 0). Returns the call's final code. */
  loom_code (*end)(loom__strategy *s, int began, loom_code rc, loom_status *st);
} loom__strategy_ops;

struct loom__strategy {
  const loom__strategy_ops *ops;
};

#endif
