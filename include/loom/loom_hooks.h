/* loom_hooks.h - SessionRunHooks and the monitored session that runs them
 * (tf.train.SessionRunHook, MonitoredSession, the standard hooks).
 *
 * Lifecycle, as in TF:
 *   begin(graph)              before the session exists; a hook may add ops
 *   after_create_session(s)   after variables are initialised or restored
 *   before_run(ctx, args)     before each run; may add fetches/feeds/targets
 *   after_run(ctx, results)   after each run; results = the hook's fetches
 *   end(s)                    at a normal end (not after an error)
 * A hook stops the loop with loom_hook_context_request_stop; the stop takes
 * effect after the current step. A hook's failure (non-OK return) ends the
 * run with that status. OUT_OF_RANGE (end of input) from the session run or
 * from a hook's before_run is a normal end: the step returns it, should_stop
 * becomes true and close still calls end() (MonitoredSession's handling of
 * OutOfRangeError).
 *
 * The standard hooks that need the global step fetch the global_step
 * variable's output; loom fetches a variable's value at the end of the run,
 * so they see the step after the train op's increment.
 *
 * Ownership: loom_hook objects passed to a monitored session or to
 * loom_estimator_* calls are borrowed; the caller frees them.
 * loom_spec_add_hook (loom_estimator.h) is the exception: the spec takes
 * the hook over. Every hook constructor below returns a new hook (NULL on
 * failure) that the caller frees with loom_hook_free (or hands to
 * loom_spec_add_hook).
 */
#ifndef LOOM_HOOKS_H
#define LOOM_HOOKS_H
#include "loom_base.h"
#include "loom_graph.h"
#include "loom_session.h"
#include "loom_summary.h"
#include "loom_tensor.h"
#include "loom_train.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_hook loom_hook;
typedef struct loom_hook_context loom_hook_context;

/* What a hook adds to a run (SessionRunArgs). Arrays are read during the
 * run only (the hook keeps them alive until after_run). */
typedef struct loom_hook_run_args {
  int32_t nfetches;
  const loom_output *fetches;
  int32_t nfeeds;
  const loom_output *feeds;
  loom_tensor *const *feed_values;
  int32_t ntargets;
  loom_node *const *targets;
} loom_hook_run_args;

typedef struct loom_hook_ops {
  loom_code (*begin)(void *self, loom_graph *g, loom_status *st);
  loom_code (*after_create_session)(void *self, loom_session *s, loom_status *st);
  /* Fill *args (zeroed on entry) to add to the run. */
  loom_code (*before_run)(void *self, loom_hook_context *ctx, loom_hook_run_args *args, loom_status *st);
  /* results[i] = value of args->fetches[i] (borrowed, valid during the call). */
  loom_code (*after_run)(void *self, loom_hook_context *ctx, loom_tensor *const *results, loom_status *st);
  loom_code (*end)(void *self, loom_session *s, loom_status *st);
  void (*destroy)(void *self); /* frees self (may be NULL) */
} loom_hook_ops;

/* Wraps a user hook. Every op may be NULL (no-op). name is for logs (copied).
 * Returns a new hook (NULL when out of memory; ops->destroy is then not
 * called, self stays the caller's); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_hook_new(const loom_hook_ops *ops, void *self, const char *name);
/* Calls ops->destroy(self). Accepts NULL. */
LOOM_API void loom_hook_free(loom_hook *h);
/* Owned by h; valid until loom_hook_free ("" for h NULL: static). */
LOOM_API const char *loom_hook_name(const loom_hook *h);
/* The self given to loom_hook_new (the hook's; freed by ops->destroy). */
LOOM_API void *loom_hook_self(const loom_hook *h);

/* Run context (SessionRunContext). */
/* The monitored session's session: owned by it; valid until
 * loom_monitored_session_close. */
LOOM_API loom_session *loom_hook_context_session(loom_hook_context *ctx);
LOOM_API void loom_hook_context_request_stop(loom_hook_context *ctx);
LOOM_API int loom_hook_context_stop_requested(const loom_hook_context *ctx);
/* The caller's own fetches of this run (original_args); *fetches is the
 * caller's array, valid during the run. */
LOOM_API int loom_hook_context_original_fetches(const loom_hook_context *ctx, const loom_output **fetches);

/* ---- monitored session ---- */
typedef struct loom_monitored_session loom_monitored_session;
/* Called between session creation and after_create_session: initialise or
 * restore variables. NULL = run the graph's global and local variable
 * initializers. */
typedef loom_code (*loom_session_init_fn)(loom_session *s, void *user, loom_status *st);
/* Calls begin on every hook, creates a session on g, runs init_fn, then
 * after_create_session on every hook (in order). Returns a new monitored
 * session (NULL on failure); loom_monitored_session_close frees it. g and
 * the hooks are borrowed and must outlive it. */
LOOM_API loom_monitored_session *loom_monitored_session_new(loom_graph *g, const loom_session_options *opts,
                                                            loom_session_init_fn init_fn, void *init_user,
                                                            int nhooks, loom_hook *const *hooks, loom_status *st);
/* One step: every hook's before_run (merging its fetches/feeds/targets),
 * one session run, every hook's after_run. fetch_values as in
 * loom_session_run (in/out, reused). A steady-state step allocates nothing
 * (merged arrays and each hook's result tensors are kept across steps).
 * FAILED_PRECONDITION when called after should_stop or after a failed step;
 * INVALID_ARGUMENT "Same tensor (<name>:<i>) is fed by a SessionRunHook and
 * user." / "... by two hooks." for conflicting feeds. */
LOOM_API loom_code loom_monitored_session_run(loom_monitored_session *ms, const loom_output *feeds,
                                             loom_tensor *const *feed_values, int nfeeds, const loom_output *fetches,
                                             loom_tensor **fetch_values, int nfetches, loom_node *const *targets,
                                             int ntargets, loom_status *st);
LOOM_API int loom_monitored_session_should_stop(const loom_monitored_session *ms);
LOOM_API void loom_monitored_session_request_stop(loom_monitored_session *ms);
/* Owned by ms; valid until loom_monitored_session_close. */
LOOM_API loom_session *loom_monitored_session_session(loom_monitored_session *ms);
/* Calls end on every hook (unless a run failed) and frees the session.
 * Returns the first hook failure. Accepts NULL. */
LOOM_API loom_code loom_monitored_session_close(loom_monitored_session *ms, loom_status *st);

/* ---- the standard hooks (all return NULL with INVALID_ARGUMENT on bad
 * arguments, naming the hook and the argument) ---- */

/* StopAtStepHook: exactly one of num_steps / last_step > 0 (the other 0).
 * Reads the graph's global_step; num_steps resolves to current + num_steps
 * in after_create_session (again for each session the hook is used in).
 * Stops when global_step >= last_step; when it already is at session
 * creation, should_stop is true at once and no step runs. */
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_stop_at_step_hook(int64_t num_steps, int64_t last_step, loom_status *st);

/* LoggingTensorHook: logs "tag = value, ... (x.xxx sec)" at INFO every
 * every_n_iter local iterations or every_n_secs (exactly one > 0), and at
 * the end when at_end (the values of the last step, fetched every step). Tensors are scalars or small (<= 16 elements shown).
 * When stdout is a terminal and total_steps > 0 it draws a progress bar
 * with steps/s and ETA instead of log lines (set total_steps 0 to never). */
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_logging_tensor_hook(int n, const char *const *tags, const loom_output *tensors,
                                             int64_t every_n_iter, double every_n_secs, int at_end,
                                             loom_status *st);
/* total_steps counts this hook's local iterations (steps of one session).
 * Ignored when h is not a LoggingTensorHook. */
LOOM_API void loom_logging_tensor_hook_set_total_steps(loom_hook *h, int64_t total_steps);

/* StepCounterHook: writes "global_step/sec" (steps since last / seconds)
 * every_n_steps or every_n_secs to writer (borrowed; NULL = log only). */
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_step_counter_hook(int64_t every_n_steps, double every_n_secs, loom_event_writer *writer,
                                           loom_status *st);

/* NanTensorHook: fetches loss each step; on NaN fails the run with
 * INVALID_ARGUMENT "NaN loss during training." (fail_on_nan_loss) or only
 * requests stop with a warning. */
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_nan_tensor_hook(loom_output loss, int fail_on_nan_loss, loom_status *st);

/* CheckpointSaverListener. Every op may be NULL. after_save returning 1
 * requests a stop. */
typedef struct loom_checkpoint_listener_ops {
  loom_code (*begin)(void *self, loom_status *st);
  loom_code (*before_save)(void *self, loom_session *s, int64_t step, loom_status *st);
  loom_code (*after_save)(void *self, loom_session *s, int64_t step, int *stop, loom_status *st);
  loom_code (*end)(void *self, loom_session *s, int64_t step, loom_status *st);
} loom_checkpoint_listener;

/* CheckpointSaverHook: saves "<dir>/model.ckpt-<step>" after session
 * creation, then every save_steps or save_secs (exactly one > 0), and at
 * end when the last step was not saved. saver NULL = a saver over all
 * global variables keeping keep_max (ignored when a saver is given); the
 * hook recovers earlier checkpoints in dir (its "checkpoint" state file)
 * for the default saver's keep_max accounting. dir is created if needed.
 * writer (borrowed, may be NULL) receives a SessionLog CHECKPOINT event per
 * save (checkpoint_path = the file written). listeners/listener_selves are
 * copied (the listeners borrowed; listener_selves may be NULL). */
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_checkpoint_saver_hook(const char *dir, double save_secs, int64_t save_steps,
                                               loom_saver *saver, int keep_max, loom_event_writer *writer,
                                               int nlisteners, const loom_checkpoint_listener *const *listeners,
                                               void *const *listener_selves, loom_status *st);

/* SummarySaverHook: every save_steps or save_secs (exactly one > 0) fetches
 * all of the graph's summaries (found in begin) and writes them at the
 * current global_step; writes SessionLog START the first time. */
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_summary_saver_hook(int64_t save_steps, double save_secs, loom_event_writer *writer,
                                            loom_status *st);

/* FinalOpsHook: runs the outputs once in end(); values kept for
 * loom_final_ops_hook_values (the array and tensors are owned by the hook;
 * valid until loom_hook_free;
 * NULL with *n = 0 before end() ran or when h is not a FinalOpsHook). */
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_final_ops_hook(int n, const loom_output *final_ops, loom_status *st);
LOOM_API loom_tensor *const *loom_final_ops_hook_values(const loom_hook *h, int *n);

/* FeedFnHook: before each run, fn fills feeds (up to cap) and returns the
 * count; values borrowed until after_run. A negative count means the input
 * is exhausted: the step returns OUT_OF_RANGE (a normal end, see above). */
typedef int (*loom_feed_fn)(void *user, int cap, loom_output *feeds, loom_tensor **values);
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_feed_fn_hook(loom_feed_fn fn, void *user, loom_status *st);

/* GlobalStepWaiterHook: before_run blocks (polling every 0.5 s, reading
 * the session's global_step) until global_step >= wait_until_step (>= 0;
 * 0 = never waits). Once reached it no longer checks. */
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_global_step_waiter_hook(int64_t wait_until_step, loom_status *st);

/* ProfilerHook: every save_steps or save_secs (exactly one > 0) traces one
 * step and writes "<output_dir>/timeline-<step>.json" (Chrome trace); the
 * first trace comes save_steps (save_secs) after session creation, as TF's.
 * output_dir is created if needed. */
/* New hook (NULL on failure); caller frees with loom_hook_free. */
LOOM_API loom_hook *loom_profiler_hook(int64_t save_steps, double save_secs, const char *output_dir,
                                       loom_status *st);

/* SecondOrStepTimer (exposed for hook authors): exactly one of every_secs /
 * every_steps > 0. Triggers the first time, never twice for one step. */
typedef struct loom_step_timer {
  double every_secs;
  int64_t every_steps;
  int64_t last_step;     /* -1 before the first trigger */
  double last_time;
} loom_step_timer;
LOOM_API loom_code loom_step_timer_init(loom_step_timer *t, double every_secs, int64_t every_steps, loom_status *st);
LOOM_API int loom_step_timer_should_trigger(const loom_step_timer *t, int64_t step);
/* Records a trigger; returns the seconds and steps since the previous one
 * (0 and 0 the first time). */
LOOM_API void loom_step_timer_update(loom_step_timer *t, int64_t step, double *elapsed_secs, int64_t *elapsed_steps);

#ifdef __cplusplus
}
#endif
#endif
