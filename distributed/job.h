/* distributed/job.h - internal: a distributed job's context (TF_CONFIG, options, the rendezvous in
 * model_dir/rendezvous), the parameter-server strategy of its trainers (distributed/strategy.h), the PS
 * task's serving loop, and the waits its roles share; the roles themselves live one level up (cluster.c). */
#ifndef LOOM_DIST_JOB_H
#define LOOM_DIST_JOB_H
#include <time.h>
#include "base/base.h"
#include "distributed/strategy.h"
#include "loom/loom_distributed.h"
#include "loom/loom_job.h"

typedef struct loom__job loom__job;

/* 1 when the TF_CONFIG (json NULL: the environment) names a PS job or an evaluator task. */
int loom__job_is_distributed(const char *json);

/* The job of this process: options o (NULL: the defaults, with params' "learning_rate", "overlap_comm",
 * "ps_optimizer"), TF_CONFIG (o->tf_config or the environment), model_dir/rendezvous created.
 * INVALID_ARGUMENT for bad options or TF_CONFIG (logged with its exit code). */
loom__job *loom__job_new(const loom_job_options *o, const loom_params *params, const char *model_dir,
                         loom_status *st);
void loom__job_free(loom__job *j);
const char *loom__job_type(const loom__job *j); /* "chief", "master", "worker", "ps", "evaluator" */
const char *loom__job_name(const loom__job *j); /* "worker:1" */
int loom__job_is_chief(const loom__job *j);
int loom__job_num_ps(const loom__job *j);
int loom__job_num_workers(const loom__job *j);
const loom_tf_config *loom__job_tf_config(const loom__job *j);
const loom_job_options *loom__job_options(const loom__job *j);
/* "job <name>: <st's message> (exit code N)" at ERROR when rc is not OK. */
void loom__job_log_failure(const loom__job *j, loom_code rc, loom_status *st);
void loom__job_log(const loom__job *j, loom_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The trainers' strategy (chief, worker): placement, the PS hook, the chief's PS-side checkpoint listener
 * and end-of-job protocol (distributed/job.c's top). max_steps: the last global step; each step is
 * reserved at ps:0 up to it (loom_ps_reserve_step), so the job makes exactly max_steps steps for any
 * number of trainers. keep_checkpoint_max: the PS-side checkpoints kept. A worker that finds the job
 * finished before it connected (the done file newer than its start) ends with LOOM_OK, nothing to do. */
loom__strategy *loom__ps_strategy_new(loom__job *j, int64_t max_steps, int keep_checkpoint_max, loom_status *st);
void loom__ps_strategy_free(loom__strategy *s);
/* The PS task: serves g's placement until SHUTDOWN, the idle deadline or SIGTERM/SIGINT. */
loom_code loom__job_serve_ps(loom__job *j, loom_graph *g, loom_status *st);

/* SIGTERM / SIGINT for a trainer or the evaluator: the first sets the count that every wait of the job
 * and the training loop's stop check read (the step in flight finishes, the loop stops, the chief's
 * final checkpoint is written, the process exits 0); the second ends the process at once (the default
 * disposition, re-raised). _restore puts the previous handlers back. */
void loom__job_signals_install(void);
void loom__job_signals_restore(void);
int loom__job_signal_count(void);

/* A bounded wait: backoff 10 ms growing to 250 ms, a diagnostic line every diag_every_s, UNAVAILABLE
 * naming what was awaited at the deadline. */
typedef struct loom__job_waiter {
  const loom__job *j;
  double t0, deadline, last_diag, backoff;
} loom__job_waiter;
void loom__job_waiter_init(loom__job_waiter *w, const loom__job *j, double deadline_s);
/* LOOM_OK to try again (after sleeping), UNAVAILABLE past the deadline (what: "ps:1 (host:port)", why:
 * the last failure). */
loom_code loom__job_waiter_wait(loom__job_waiter *w, const char *what, const char *why, loom_status *st);
/* Sleeps s seconds (ends early on a signal). */
void loom__job_sleep(double s);
/* The final step the chief wrote at the end of training (model_dir/rendezvous/done); -1 when absent or
 * older than not_before. */
int64_t loom__job_done_step_since(const loom__job *j, time_t not_before);

#endif
