/* estimator/cluster.c - train_and_evaluate's dispatch by role, as TF's training.py does: local mode
 * (estimator/train_and_evaluate.c), or the role TF_CONFIG names in a distributed job (loom_job.h):
 *  - chief / master, worker: the one training loop, Estimator.train (estimator.c), with the
 *    parameter-server strategy (distributed/job.c, distributed/strategy.h);
 *  - ps: builds the TRAIN graph (its variables give the placement) and serves it (distributed/job.c);
 *  - evaluator: watches model_dir's checkpoints and evaluates each new one with train_and_evaluate's
 *    evaluation and exporters, never connecting to a PS.
 * loom_run_job is the same call with explicit job options. */
#include <stdio.h>
#include <string.h>
#include <time.h>
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

/* Chief or worker: Estimator.train under the parameter-server strategy; SIGTERM / SIGINT stop it after
 * the step in flight (a second signal ends the process). */
static loom_code run_trainer(loom_estimator *e, loom__job *j, const loom_train_spec *ts, loom_status *st) {
  loom__strategy *s = loom__ps_strategy_new(j, ts->max_steps, e->config.keep_checkpoint_max, st);
  if (!s) return loom_status_code(st);
  loom_train_options to = loom_train_options_default();
  to.max_steps = ts->max_steps;
  to.nhooks = ts->nhooks;
  to.hooks = ts->hooks;
  to.nlisteners = ts->nlisteners;
  to.listeners = ts->listeners;
  to.listener_selves = ts->listener_selves;
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
  case LOOM_DISTRIBUTE_COLLECTIVE:
    return loom_status_set(st, LOOM_UNIMPLEMENTED,
                           "RunConfig.train_distribute: the collective (all-reduce) strategy is not implemented yet; "
                           "use LOOM_DISTRIBUTE_PARAMETER_SERVER or LOOM_DISTRIBUTE_LOCAL");
  case LOOM_DISTRIBUTE_PARAMETER_SERVER:
    if (!loom__job_is_distributed(NULL))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "RunConfig.train_distribute is the parameter-server strategy but TF_CONFIG names no "
                             "\"ps\" tasks (and this task is not the evaluator)");
    return run_role(e, train_spec, eval_spec, NULL, out, st);
  default: /* AUTO: a TF_CONFIG with PS tasks (or naming the evaluator): this process's role of a job */
    if (loom__job_is_distributed(NULL)) return run_role(e, train_spec, eval_spec, NULL, out, st);
    return loom__tae_local(e, train_spec, eval_spec, out, st);
  }
}
