/* loom_job.h - distributed jobs: one binary and one model_fn
 * run in any role TF_CONFIG names (chief or master, worker, ps, evaluator),
 * with the parameter server of loom_distributed.h. Included by
 * loom_train_and_evaluate.h. docs/distributed.md.
 *
 * loom_run_job (and loom_train_and_evaluate, which calls it when TF_CONFIG
 * names PS tasks or the evaluator):
 *  - chief/master: builds the TRAIN graph, connects to every PS (waiting
 *    with backoff), creates the variables there from its own initial values
 *    or its latest checkpoint (variables a PS already holds are kept), then
 *    trains; saves checkpoints (model_dir/model.ckpt-<step>, the format
 *    evaluate/predict/export read) and at the same step the PS-side
 *    checkpoint (model_dir/ps/: each PS its shard with optimizer slots),
 *    summaries, chief-only hooks; at the end a final checkpoint, the file
 *    model_dir/rendezvous/done, and SHUTDOWN to every PS.
 *  - worker: waits for the PS tasks and for the chief's variables, then
 *    trains; the model_fn's train op is not run by the trainer: the
 *    gradients its apply ops consume go to the PS, which applies each
 *    variable's own update rule (the model's optimizer, hyperparameters
 *    and learning-rate schedule; see job_optimizer for the override). The
 *    global step is the PS's (ps:0): every trainer reserves each step
 *    there before pushing it (loom_ps_reserve_step), pushes only a granted
 *    step and stops at the first refusal, so the job ends at global step
 *    max_steps exactly, for any number of trainers.
 *  - ps: builds the graph (for the placement and its hash), serves until
 *    SHUTDOWN or SIGTERM/SIGINT (exit 0), or the idle deadline (exit 0 when
 *    the job finished, else retryable). Without a chief connection for
 *    ps_chief_lost_save_s it checkpoints its shard itself. A PS that starts
 *    restores the newest complete state of its shard (the chief's PS-side
 *    checkpoint in model_dir/ps/, its own save, or the chief's newer
 *    model.ckpt-N when that holds every variable of the shard: under the
 *    model's own update rules the chief then creates the shard from it
 *    with each variable's rule and optimizer slots; with job_optimizer
 *    only an SGD shard is taken from it, by the PS) before it publishes
 *    its address.
 *  - evaluator: never connects to a PS; watches model_dir/checkpoint,
 *    evaluates each new checkpoint after start_delay_secs, at most once
 *    per throttle_secs, runs the exporters, and returns once an evaluated
 *    global step reaches max_steps (or the chief's done file names the
 *    last step and it was evaluated).
 * SIGTERM / SIGINT to a trainer: the step in flight finishes (or none
 * starts), the chief writes its final checkpoint (model_dir and the PS
 * shards), no done file (the job is not finished), exit 0; a second signal
 * ends the process at once. Hooks never see a global step from before a
 * PS restore (the trainer re-reads it when it reconnects).
 * Every wait has a deadline and prints a line every diag_every_s naming
 * what it waits for, e.g. "job worker:0: waiting for ps:1 (127.0.0.1:40213):
 * connection refused, 12 s elapsed (deadline 300 s)".
 *
 * Addresses: a PS address with port 0 ("127.0.0.1:0") means "bind a free
 * port and publish it": the PS writes host:port to
 * model_dir/rendezvous/ps-<i>.addr and the others read it there (this is
 * how launch_local, mpirun and Slurm jobs meet: through model_dir). */
#ifndef LOOM_JOB_H
#define LOOM_JOB_H
#include "loom_estimator.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_job_options {
  uint32_t struct_size;
  const char *tf_config;        /* NULL: the TF_CONFIG environment variable */
  loom_ps_optimizer optimizer;  /* job_optimizer = 1 only: the PS-side optimizer of every variable (SGD) */
  float hyper[8];               /* its hyperparameters (loom_ps_optimizer); {0.01} */
  loom_ps_strategy strategy;    /* placement (greedy by bytes) */
  int64_t min_slice_bytes;      /* 0: 256 KiB (loom_ps_placement_new) */
  const void *token;            /* shared secret; NULL: LOOM_PS_TOKEN from the environment, else none */
  size_t token_len;
  const char *bind_host;        /* PS bind address; NULL: LOOM_JOB_BIND, else the host of its own address */
  double start_deadline_s;      /* waiting for the PS tasks / the chief's variables at start: 300 */
  double peer_lost_deadline_s;  /* reconnecting to a lost PS: 120 */
  /* A PS exits after this long with no connection (default 300; 0: never): with 0 when the job
   * finished (model_dir/rendezvous/done), else with the retryable code after saving its shard (a PS
   * whose trainers are gone for good must not hold its resources forever; restarted, it restores). */
  double ps_idle_exit_s;
  double diag_every_s;          /* the period of the waiting lines: 10 */
  double rpc_timeout_s;         /* every PS request: 10 */
  double eval_poll_s;           /* the evaluator's look at model_dir/checkpoint: 1 */
  double eval_deadline_s;       /* the evaluator gives up after this long without a new checkpoint: 600 */
  /* Trainers: overlap communication with computation (default 0: off). After
   * the run of step t fetches its gradients they are sent to the PS tasks,
   * and step t+1 runs on the values already in the session while the PS
   * applies step t; step t's new values are read into the variable buffers
   * after that run (never during one). Every gradient is thus computed on
   * values one own update old (staleness 1, as TF's async workers): off,
   * one trainer reproduces local training bit for bit; on, it does not.
   * Checkpoints still hold the values after their step. Params key when o
   * is NULL: "overlap_comm" (int). */
  int overlap_comm;
  /* (added) A PS with no chief connection for this long checkpoints its shard itself (model_dir/ps/self-
   * <placement>/), again every this long while updates arrive, so that progress never lives only in a
   * PS's memory for longer; a restarted PS restores the newest state of its shard. Default 30; 0: never. */
  double ps_chief_lost_save_s;
  /* (added) 0 (default): every variable is updated on the PS by the model's own update rule, read from
   * the model_fn's train op (its optimizer, hyperparameters, learning-rate schedule and the gradient it
   * consumes, clipping included); a train op the PS cannot reproduce fails the job at start, naming the
   * op and the variable. 1: an explicit override: `optimizer` and `hyper` update every variable with the
   * gradients of the loss (the train op is ignored). Params key when o is NULL: "ps_optimizer" (its
   * presence sets it). */
  int job_optimizer;
} loom_job_options;
LOOM_API loom_job_options loom_job_options_default(void);

/* A thin alias of loom_train_and_evaluate (the same dispatch by role, estimator/cluster.c) that takes
 * the job's options explicitly; it ignores RunConfig.train_distribute (a TF_CONFIG with PS tasks runs
 * the parameter-server strategy).
 * Runs this process's role (see the top of this header). In local mode
 * (TF_CONFIG unset or without a cluster) it is loom_train_and_evaluate.
 * o NULL: the defaults, with the params "ps_optimizer" (sgd, momentum,
 * adagrad, adam, ftrl, rmsprop, adadelta: job_optimizer = 1) and
 * "learning_rate" (hyper[0]) when given. *out: the evaluator's (and local mode's) result; NULL for the
 * other roles. Codes: INVALID_ARGUMENT (bad TF_CONFIG or specs),
 * PERMISSION_DENIED (the PS refused the token), FAILED_PRECONDITION (the
 * PS holds another placement), UNAVAILABLE / DEADLINE_EXCEEDED (a peer not
 * reachable or lost past its deadline); loom_job_exit_code maps them. */
LOOM_API loom_code loom_run_job(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                                const loom_job_options *o, loom_tae_result **out, loom_status *st);

/* Estimator.train() alone under the collective (all-reduce) strategy: this process is one rank of the
 * job the MPI launcher, or TF_CONFIG's chief and worker tasks (no "ps"), make; every rank trains until
 * the global step reaches ts->max_steps (> 0, required), rank 0 (the chief) writes the checkpoints, and
 * nothing is evaluated (loom_train_and_evaluate evaluates the final checkpoint on rank 0). Codes as
 * that collective path: INVALID_ARGUMENT (specs, a TF_CONFIG with "ps" tasks, this task the
 * evaluator), FAILED_PRECONDITION (neither a launcher nor a TF_CONFIG cluster), UNAVAILABLE /
 * DEADLINE_EXCEEDED (a peer). */
LOOM_API loom_code loom_train_collective(loom_estimator *e, const loom_train_spec *ts, loom_status *st);

/* Exit codes for a job's process, for Kubeflow's ExitCode restart policy
 * (1-127 permanent, 128-255 retryable). */
typedef enum loom_job_exit {
  LOOM_JOB_EXIT_OK = 0,
  LOOM_JOB_EXIT_FAILED = 1,      /* another permanent failure (model, data, I/O) */
  LOOM_JOB_EXIT_CONFIG = 2,      /* bad TF_CONFIG / launcher environment / arguments */
  LOOM_JOB_EXIT_AUTH = 3,        /* the PS refused the token */
  LOOM_JOB_EXIT_PLACEMENT = 4,   /* the PS holds another placement (other model or PS count) */
  LOOM_JOB_EXIT_RETRYABLE = 200  /* a peer unreachable or lost past its deadline: restart me */
} loom_job_exit;
LOOM_API int loom_job_exit_code(loom_code rc);

/* The TF_CONFIG JSON of this process from a launcher's environment:
 * launcher "mpi" (OMPI_COMM_WORLD_RANK / _SIZE, or PMIX_RANK / PMI_RANK and
 * PMI_SIZE), "slurm" (SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_NODELIST or
 * SLURM_JOB_NODELIST, SLURM_STEP_TASKS_PER_NODE), NULL: whichever is set.
 * Roles by rank: 0 chief, 1..num_ps ps, the last rank the evaluator when
 * evaluator != 0, the rest workers. Hosts: Slurm's node of each task (block
 * distribution), for mpi LOOM_JOB_HOST or 127.0.0.1; ports: port_base + rank
 * (port_base 0: every port 0, i.e. rendezvous through model_dir). Needs at
 * least 1 + num_ps (+1) tasks. Returns a new string (NULL on failure: st
 * says which variable is missing or wrong); caller frees with
 * loom_job_string_free. */
LOOM_API char *loom_job_tf_config_from_env(const char *launcher, int num_ps, int evaluator, int port_base,
                                           loom_status *st);
LOOM_API void loom_job_string_free(char *s);
/* For an input_fn that shards its data by worker (TF's InputContext):
 * the number of training input pipelines (chief + workers) and this one's
 * index, from the params the job gives the input_fn ("num_input_pipelines",
 * "input_pipeline_id"); 1 and 0 in local mode and for the evaluator. The
 * job also sets the param "task_type" (chief, worker, ps, evaluator): a PS
 * calls the TRAIN input_fn only for the shapes of the features (to build
 * the graph whose variables give the placement), so an input_fn that loads
 * its data eagerly may load a single example when it sees "ps". */
LOOM_API void loom_job_input_context(const loom_params *params, int *num_pipelines, int *pipeline_id);

#ifdef __cplusplus
}
#endif
#endif
