/* estimator/cluster.c - train_and_evaluate's dispatch by role, as TF's training.py does: local mode
 * (estimator/train_and_evaluate.c), or the role TF_CONFIG names in a distributed job (loom_job.h):
 *  - chief / master, worker: the one training loop, Estimator.train (estimator.c), with the
 *    parameter-server strategy (distributed/job.c, distributed/strategy.h);
 *  - ps: builds the TRAIN graph (its variables give the placement) and serves it (distributed/job.c);
 *  - evaluator: watches model_dir's checkpoints and evaluates each new one with train_and_evaluate's
 *    evaluation and exporters, never connecting to a PS.
 * loom_run_job is the same call with explicit job options.
 * The collective (all-reduce) strategy (distributed/collective_strategy.h) runs every rank as a trainer:
 * RunConfig.train_distribute = collective, or (AUTO) a TF_CONFIG with chief / worker tasks only; the ranks
 * are MPI's under mpirun or srun, else TF_CONFIG's (chief 0, then the workers; over Gloo); rank 0 is the
 * chief and evaluates the final checkpoint; an evaluator task (outside the ranks) watches model_dir as in
 * a PS job. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>
#include "distributed/collective.h"
#include "distributed/collective_strategy.h"
#include "distributed/job.h"
#include "estimator/estimator_impl.h"

/* The TRAIN graph of the estimator on the train input (for the PS task's placement). */
static loom_code build_train(loom_estimator *e, const loom_train_spec *ts, loom_dataset **ds, est_built *b,
                             loom_status *st) {
  *ds = ts->input_fn(LOOM_MODE_TRAIN, e->params, ts->input_user, st);
  if (!*ds) {
    if (!st || loom_status_code(st) == LOOM_OK)
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "TrainSpec.input_fn returned no dataset");
    return loom_status_code(st);
  }
  if (e->config.prefetch > 0) *ds = loom_dataset_prefetch(*ds, e->config.prefetch, st);
  if (!*ds) return loom_status_code(st);
  loom_code rc = loom__est_build(e, LOOM_MODE_TRAIN, *ds, NULL, NULL, b, st);
  if (rc != LOOM_OK) {
    loom_dataset_free(*ds);
    *ds = NULL;
  }
  return rc;
}

static loom_code run_ps(loom_estimator *e, loom__job *j, const loom_train_spec *ts, loom_status *st) {
  loom_dataset *ds = NULL;
  est_built b;
  loom_code rc = build_train(e, ts, &ds, &b, st);
  if (rc) return rc;
  rc = loom__job_serve_ps(j, b.g, st);
  loom__est_built_free(&b);
  loom_dataset_free(ds);
  return rc;
}

/* Estimator.train's options for a train spec. */
static loom_train_options train_options(const loom_train_spec *ts) {
  loom_train_options to = loom_train_options_default();
  to.max_steps = ts->max_steps;
  to.nhooks = ts->nhooks;
  to.hooks = ts->hooks;
  to.nlisteners = ts->nlisteners;
  to.listeners = ts->listeners;
  to.listener_selves = ts->listener_selves;
  return to;
}

/* Chief or worker: Estimator.train under the parameter-server strategy; SIGTERM / SIGINT stop it after
 * the step in flight (a second signal ends the process). */
static loom_code run_trainer(loom_estimator *e, loom__job *j, const loom_train_spec *ts, loom_status *st) {
  loom__strategy *s = loom__ps_strategy_new(j, ts->max_steps, e->config.keep_checkpoint_max, st);
  if (!s) return loom_status_code(st);
  loom_train_options to = train_options(ts);
  loom__job_signals_install();
  loom_code rc = loom__est_train(e, ts->input_fn, ts->input_user, &to, s, st);
  loom__job_signals_restore();
  loom__ps_strategy_free(s);
  return rc;
}

static loom_code run_evaluator(loom_estimator *e, loom__job *j, const loom_train_spec *ts, const loom_eval_spec *es,
                               loom_tae_result **out, loom_status *st) {
  const loom_job_options *o = loom__job_options(j);
  if (es->start_delay_secs > 0) {
    loom__job_log(j, LOOM_LOG_INFO, "waiting %g s (EvalSpec.start_delay_secs) before the first evaluation",
         es->start_delay_secs);
    loom__job_sleep(es->start_delay_secs);
  }
  loom__tae_eval *x = loom__tae_eval_new(e, ts, es, st);
  if (!x) return loom_status_code(st);
  loom_code rc = LOOM_OK;
  loom__job_waiter w;
  loom__job_waiter_init(&w, j, o->eval_deadline_s);
  double last_eval = -1e30;
  time_t started = time(NULL) - 1; /* a done file older than this evaluator is an earlier run's */
  for (;;) {
    char ckpt[4096];
    int64_t step = loom__est_latest(e, ckpt, sizeof ckpt) ? loom__ckpt_global_step(ckpt, -1) : -1;
    int64_t last = loom__tae_eval_last_step(x), fin = loom__job_done_step_since(j, started);
    int fresh = step >= 0 && step != last;
    if (fresh && loom__mono_secs() - last_eval >= es->throttle_secs) {
      last_eval = loom__mono_secs();
      loom_status *s2 = loom_status_new();
      rc = loom__tae_eval_latest(x, step, s2);
      if (rc != LOOM_OK) { /* a checkpoint removed under us (keep_checkpoint_max): the next one */
        loom__job_log(j, LOOM_LOG_WARN, "evaluation of step %lld failed: %s", (long long)step, loom_status_message(s2));
        if (rc != LOOM_NOT_FOUND && rc != LOOM_DATA_LOSS) {
          loom_status_set(st, rc, "%s", loom_status_message(s2));
          loom_status_free(s2);
          break;
        }
        rc = LOOM_OK;
      } else {
        loom__job_log(j, LOOM_LOG_INFO, "evaluated the checkpoint of global step %lld", (long long)step);
        loom__job_waiter_init(&w, j, o->eval_deadline_s);
      }
      loom_status_free(s2);
      last = loom__tae_eval_last_step(x);
    }
    if (ts->max_steps > 0 && last >= ts->max_steps) break;
    if (fin >= 0 && last >= 0 && last >= fin) break; /* the chief's last checkpoint was evaluated */
    char what[64], why[128];
    snprintf(what, sizeof what, "a new checkpoint in model_dir");
    snprintf(why, sizeof why, "last evaluated global step %lld, max_steps %lld", (long long)last,
             (long long)ts->max_steps);
    double poll = o->eval_poll_s;
    if (fresh) poll = es->throttle_secs - (loom__mono_secs() - last_eval);
    if (poll < o->eval_poll_s) poll = o->eval_poll_s;
    w.backoff = poll;
    if ((rc = loom__job_waiter_wait(&w, what, why, st)) != LOOM_OK) break;
  }
  if (rc == LOOM_OK && out) *out = loom__tae_eval_take(x);
  loom__tae_eval_free(x);
  return rc;
}


static loom_code run_role(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                          const loom_job_options *opt, loom_tae_result **out, loom_status *st);

/* The trainers of TF_CONFIG (chief, master and worker tasks); *nps its PS tasks; -1 when TF_CONFIG is unset
 * (or malformed: *bad). */
static int tf_config_trainers(int *nps, const char **type, loom_tf_config **keep, loom_status *st) {
  const char *tf = getenv("TF_CONFIG");
  *nps = 0;
  if (!tf || !tf[0]) return -1;
  loom_tf_config *c = loom_tf_config_parse(tf, st);
  if (!c) return -2;
  *nps = loom_tf_config_num_tasks(c, "ps");
  *type = loom_tf_config_task_type(c);
  *keep = c;
  return loom_tf_config_num_tasks(c, "chief") + loom_tf_config_num_tasks(c, "master") +
         loom_tf_config_num_tasks(c, "worker");
}

/* AUTO picks the collective strategy: a TF_CONFIG with trainers and no PS, naming this task one of them,
 * in a process an MPI or Slurm launcher started, or not (then over Gloo) when there are several (a
 * cluster of one chief alone trains locally, as in TF). */
static int collective_auto(void) {
  loom__coll_tf tf;
  int rank = 0, size = 0;
  loom__coll_env(&rank, &size);
  return loom__coll_tf_config(NULL, &tf, NULL) == 1 && (size > 0 || tf.size > 1);
}

/* Every MPI rank trains under the collective strategy; rank 0 checkpoints and evaluates the final one
 * (es NULL: nothing is evaluated, Estimator.train alone). */
static loom_code run_collective(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                                loom_tae_result **out, loom_status *st) {
  int nps = 0;
  const char *type = NULL;
  loom_tf_config *tc = NULL;
  int ntf = tf_config_trainers(&nps, &type, &tc, st);
  loom_code rc = ntf == -2 ? loom_status_code(st) : LOOM_OK;
  if (!rc && nps > 0)
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                         "RunConfig.train_distribute is the collective (all-reduce) strategy but TF_CONFIG names %d "
                         "\"ps\" task(s): the collective strategy has no parameter servers (drop the ps job, or use "
                         "LOOM_DISTRIBUTE_PARAMETER_SERVER)",
                         nps);
  int is_eval = !rc && type && !strcmp(type, "evaluator");
  loom_tf_config_free(tc);
  if (is_eval && !es)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "the evaluator task evaluates under train_and_evaluate, "
                                                      "it does not train");
  if (is_eval) return run_role(e, ts, es, NULL, out, st); /* watches model_dir as in a PS job */
  if (!rc) rc = loom__tae_check_specs(e, ts, es, st);
  if (!rc && ts->max_steps <= 0)
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "the collective strategy needs TrainSpec.max_steps > 0");
  if (rc) return rc;
  int env_rank = 0, env_size = 0;
  loom__coll_env(&env_rank, &env_size);
  loom__coll_tf tf;
  if (env_size <= 0 && loom__coll_tf_config(NULL, &tf, NULL) != 1)
    return loom_status_set(st, LOOM_FAILED_PRECONDITION,
                           "RunConfig.train_distribute is the collective (all-reduce) strategy but this process was not "
                           "started by an MPI launcher (no OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS) and "
                           "TF_CONFIG names no chief / worker tasks: run every worker under mpirun -np N or srun -n N, "
                           "or give each a TF_CONFIG of the cluster's chief and workers");
  const char *bb = getenv("LOOM_COLLECTIVE_BUCKET_BYTES");
  loom__strategy *s = loom__collective_strategy_new(0, bb && bb[0] ? atoll(bb) : -1, st);
  if (!s) return loom_status_code(st) ? loom_status_code(st) : LOOM_UNAVAILABLE;
  int rank = loom__coll_rank(), size = loom__coll_size();
  if (ntf > 0 && ntf != size) {
    loom__collective_strategy_free(s);
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TF_CONFIG names %d trainer task(s) (chief + worker) but %s runs %d rank(s): launch as "
                           "many ranks as TF_CONFIG has trainers",
                           ntf, env_size > 0 ? "MPI" : "the transport", size);
  }
  loom_params_set_int(e->params, "num_input_pipelines", size, NULL);
  loom_params_set_int(e->params, "input_pipeline_id", rank, NULL);
  loom_params_set(e->params, "task_type", rank == 0 ? "chief" : "worker", NULL);
  e->is_chief = rank == 0;
  loom_train_options to = train_options(ts);
  rc = loom__est_train(e, ts->input_fn, ts->input_user, &to, s, st);
  loom__collective_strategy_free(s);
  if (rc == LOOM_OK && rank == 0 && es) { /* the final checkpoint's evaluation and exports */
    char ckpt[4096];
    int64_t step = loom__est_latest(e, ckpt, sizeof ckpt) ? loom__ckpt_global_step(ckpt, -1) : -1;
    loom__tae_eval *x = step >= 0 ? loom__tae_eval_new(e, ts, es, st) : NULL;
    if (step >= 0 && !x) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
    if (x) {
      rc = loom__tae_eval_latest(x, step, st);
      if (rc == LOOM_OK) *out = loom__tae_eval_take(x);
      loom__tae_eval_free(x);
    }
  }
  return rc;
}

/* This process's role of the job TF_CONFIG (or opt->tf_config) names, with options opt (NULL: from params). */
static loom_code run_role(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                          const loom_job_options *opt, loom_tae_result **out, loom_status *st) {
  if (out) *out = NULL;
  if (!e || !ts || !es)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_run_job: estimator, train_spec or eval_spec is NULL");
  loom_job_options o = loom_job_options_default();
  loom_code orc = LOOM__OPTS_TAKE(&o, opt, "loom_run_job", loom_job_options, st);
  if (orc) return orc;
  const char *tf = opt ? o.tf_config : NULL;
  if (!loom__job_is_distributed(tf)) {
    if (tf)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "loom_run_job: options.tf_config names no PS job; local mode reads TF_CONFIG only");
    return loom__tae_local(e, ts, es, out, st);
  }
  loom__job *j = loom__job_new(opt, e->params, e->model_dir, st);
  if (!j) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  const char *type = loom__job_type(j);
  int is_eval = !strcmp(type, "evaluator"), is_ps = !strcmp(type, "ps");
  loom_code rc = loom__tae_check_specs(e, ts, es, st);
  if (!rc && !is_eval && !is_ps && ts->max_steps <= 0)
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                         "a distributed job needs TrainSpec.max_steps > 0 (the stop condition on the PS's global step)");
  if (rc) {
    loom__job_log_failure(j, rc, st);
    loom__job_free(j);
    return rc;
  }
  e->is_chief = loom__job_is_chief(j);
  /* the input_fn's InputContext: chief + workers are the input pipelines */
  {
    const loom_tf_config *tc = loom__job_tf_config(j);
    int nw = loom_tf_config_num_tasks(tc, "worker");
    int nc = loom_tf_config_num_tasks(tc, "chief") + loom_tf_config_num_tasks(tc, "master");
    int id = 0, n = nc + nw;
    if (!strcmp(type, "worker")) id = nc + loom_tf_config_task_id(tc);
    if (is_eval || is_ps || n < 1) n = 1, id = 0;
    loom_params_set_int(e->params, "num_input_pipelines", n, NULL);
    loom_params_set_int(e->params, "input_pipeline_id", id, NULL);
    /* a PS calls the input_fn only for the shapes of the features: an
     * input_fn may read a single example when it sees "ps" here */
    loom_params_set(e->params, "task_type", type, NULL);
  }
  loom__job_log(j, LOOM_LOG_INFO, "starting (%d PS, %d workers, model_dir %s)", loom__job_num_ps(j),
                loom__job_num_workers(j), e->model_dir);
  if (is_ps)
    rc = run_ps(e, j, ts, st);
  else if (is_eval)
    rc = run_evaluator(e, j, ts, es, out, st);
  else
    rc = run_trainer(e, j, ts, st);
  loom__job_log_failure(j, rc, st);
  loom__job_free(j);
  return rc;
}

loom_code loom_train_collective(loom_estimator *e, const loom_train_spec *ts, loom_status *st) {
  if (!e || !ts)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_train_collective: estimator or train_spec is NULL");
  return run_collective(e, ts, NULL, NULL, st);
}

loom_code loom_run_job(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                       const loom_job_options *opt, loom_tae_result **out, loom_status *st) {
  return run_role(e, ts, es, opt, out, st);
}

loom_code loom_train_and_evaluate(loom_estimator *e, const loom_train_spec *train_spec,
                                  const loom_eval_spec *eval_spec, loom_tae_result **out, loom_status *st) {
  if (out) *out = NULL;
  if (!e || !train_spec || !eval_spec || !out)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "train_and_evaluate: estimator, train_spec, eval_spec or out "
                                                      "is NULL");
  switch (e->config.train_distribute) {
  case LOOM_DISTRIBUTE_LOCAL: return loom__tae_local(e, train_spec, eval_spec, out, st);
  case LOOM_DISTRIBUTE_COLLECTIVE: return run_collective(e, train_spec, eval_spec, out, st);
  case LOOM_DISTRIBUTE_PARAMETER_SERVER:
    if (!loom__job_is_distributed(NULL))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "RunConfig.train_distribute is the parameter-server strategy but TF_CONFIG names no "
                             "\"ps\" tasks (and this task is not the evaluator)");
    return run_role(e, train_spec, eval_spec, NULL, out, st);
  default: /* AUTO: a TF_CONFIG with PS tasks (or naming the evaluator): this process's role of a job */
    if (loom__job_is_distributed(NULL)) return run_role(e, train_spec, eval_spec, NULL, out, st);
    if (collective_auto()) return run_collective(e, train_spec, eval_spec, out, st);
    return loom__tae_local(e, train_spec, eval_spec, out, st);
  }
}
