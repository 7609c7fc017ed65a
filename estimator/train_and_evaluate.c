/* estimator/train_and_evaluate.c - tf.estimator.train_and_evaluate in local
 * mode (loom_train_and_evaluate.h): one train() call whose checkpoint
 * listener evaluates (throttled) after each save and runs the exporters,
 * as TF's _NewCheckpointListenerForEvaluate does; exporters are in
 * exporters.c.
 *
 * In-process evaluation (EvalSpec without hooks): the eval graph and its
 * session are built at the first evaluation; each evaluation copies every
 * variable the eval graph shares with the training session (the values the
 * checkpoint just received), re-runs the local initializers (metrics),
 * and runs on a fresh dataset from EvalSpec.input_fn (as TF calls it per
 * evaluation). With eval hooks, each
 * evaluation is loom_estimator_evaluate(checkpoint_path = the checkpoint
 * just saved). The public entry, which dispatches by role, is cluster.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "estimator/estimator_impl.h"

/* ----------------------------------------------------------------- specs */
loom_train_spec loom_train_spec_default(void) {
  loom_train_spec s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  return s;
}

loom_eval_spec loom_eval_spec_default(void) {
  loom_eval_spec s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.steps = 100;
  s.start_delay_secs = 120;
  s.throttle_secs = 600;
  return s;
}

/* ---------------------------------------------------------------- result */
struct loom_tae_result {
  loom_eval_result *metrics;
  int32_t nexp;
  char **names;
  char **paths;
  int32_t neval, capeval;
  int64_t *steps;
};

const loom_eval_result *loom_tae_result_metrics(const loom_tae_result *r) { return r ? r->metrics : NULL; }
int loom_tae_result_num_exports(const loom_tae_result *r) { return r ? r->nexp : 0; }
const char *loom_tae_result_export_name(const loom_tae_result *r, int i) {
  return (r && i >= 0 && i < r->nexp) ? r->names[i] : NULL;
}
const char *loom_tae_result_export_path(const loom_tae_result *r, int i) {
  return (r && i >= 0 && i < r->nexp) ? r->paths[i] : NULL;
}
int loom_tae_result_num_evaluations(const loom_tae_result *r) { return r ? r->neval : 0; }
int64_t loom_tae_result_evaluation_step(const loom_tae_result *r, int i) {
  return (r && i >= 0 && i < r->neval) ? r->steps[i] : -1;
}
void loom_tae_result_free(loom_tae_result *r) {
  if (!r) return;
  loom_eval_result_free(r->metrics);
  for (int i = 0; i < r->nexp; i++) {
    loom__free(r->names ? r->names[i] : NULL);
    loom__free(r->paths ? r->paths[i] : NULL);
  }
  loom__free(r->names);
  loom__free(r->paths);
  loom__free(r->steps);
  loom__free(r);
}

/* ------------------------------------------------------------- evaluator */
typedef struct tae_ctx {
  loom_estimator *e;
  const loom_train_spec *ts;
  const loom_eval_spec *es;
  loom_tae_result *res;
  int first_save_done;  /* the save at session creation is not evaluated */
  int evaluated;        /* an evaluation ran (the throttle timer was triggered) */
  int64_t last_step;    /* its global step */
  int last_final;       /* it was the final evaluation */
  double last_time;
  /* in-process evaluation */
  int built;
  est_built b;
  est_eval_ops ops;
  loom_dataset *ds;
  loom_monitored_session *ms;
  loom_tensor *tmp;
} tae_ctx;

static void ctx_free(tae_ctx *c) {
  if (c->ms) loom_monitored_session_close(c->ms, NULL);
  loom__est_eval_ops_free(&c->ops);
  if (c->built) loom__est_built_free(&c->b);
  loom_dataset_free(c->ds);
  loom_tensor_free(c->tmp);
}

/* A fresh eval dataset from EvalSpec.input_fn (TF calls it per evaluation,
 * so a seeded shuffle gives every evaluation the same batches). */
static loom_dataset *eval_dataset(tae_ctx *c, loom_status *st) {
  loom_estimator *e = c->e;
  loom_dataset *ds = c->es->input_fn(LOOM_MODE_EVAL, e->params, c->es->input_user, st);
  if (!ds) {
    if (!st || loom_status_code(st) == LOOM_OK)
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "EvalSpec.input_fn returned no dataset");
    return NULL;
  }
  if (e->config.prefetch > 0) ds = loom_dataset_prefetch(ds, e->config.prefetch, st);
  return ds;
}

static int same_components(const loom_dataset *a, const loom_dataset *b) {
  int n = loom_dataset_num_components(a);
  if (n != loom_dataset_num_components(b) || loom_dataset_label_index(a) != loom_dataset_label_index(b)) return 0;
  for (int i = 0; i < n; i++) {
    int64_t da[LOOM_MAX_DIMS], db[LOOM_MAX_DIMS];
    int ra = loom_dataset_component_shape(a, i, da), rb = loom_dataset_component_shape(b, i, db);
    if (strcmp(loom_dataset_component_name(a, i), loom_dataset_component_name(b, i)) ||
        loom_dataset_component_dtype(a, i) != loom_dataset_component_dtype(b, i) || ra != rb ||
        loom_dataset_component_row_splits(a, i) != loom_dataset_component_row_splits(b, i))
      return 0;
    for (int k = 0; k < ra && k < LOOM_MAX_DIMS; k++)
      if (da[k] != db[k]) return 0;
  }
  return 1;
}

static loom_code inproc_build(tae_ctx *c, loom_status *st) {
  loom_estimator *e = c->e;
  if (!(c->ds = eval_dataset(c, st))) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  loom_code rc = loom__est_build(e, LOOM_MODE_EVAL, c->ds, NULL, NULL, &c->b, st);
  if (rc != LOOM_OK) return rc;
  c->built = 1;
  if ((rc = loom__est_eval_ops(&c->b, &c->ops, st)) != LOOM_OK) return rc;
  loom_session_options so = loom__est_session_options(e);
  c->ms = loom_monitored_session_new(c->b.g, &so, NULL, NULL, 0, NULL, st);
  if (!c->ms) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  return LOOM_OK;
}

/* Evaluates the training session's values (those just saved to ckpt). */
static loom_code inproc_evaluate(tae_ctx *c, loom_session *train_s, const char *ckpt, loom_eval_result **out,
                                 loom_status *st) {
  loom_code rc;
  if (!c->built) {
    if ((rc = inproc_build(c, st)) != LOOM_OK) return rc;
  } else {
    loom_dataset *ds = eval_dataset(c, st);
    if (!ds) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
    if (!same_components(ds, c->ds)) {
      loom_dataset_free(ds);
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "EvalSpec.input_fn returned a dataset whose components (names, dtypes, shapes) differ "
                             "from its first one");
    }
    loom_dataset_free(c->ds);
    c->ds = ds;
  }
  loom_session *es = loom_monitored_session_session(c->ms);
  int nv = 0;
  loom_variable *const *vars = loom_global_variables(c->b.g, &nv);
  for (int i = 0; i < nv; i++) {
    const char *vn = loom_variable_name(vars[i]);
    if (!loom_session_variable_initialized(train_s, vn)) continue;
    if ((rc = loom_session_read_variable(train_s, vn, &c->tmp, st)) != LOOM_OK) return rc;
    if ((rc = loom_session_assign_variable(es, vn, c->tmp, st)) != LOOM_OK) return rc;
  }
  loom_node *li = loom_local_variables_initializer(c->b.g);
  if (li && (rc = loom_session_run(es, NULL, NULL, 0, NULL, NULL, 0, &li, 1, st)) != LOOM_OK) return rc;
  if ((rc = loom__est_eval_run(c->e, c->ms, c->ds, &c->b, &c->ops, c->es->steps, out, st)) != LOOM_OK) return rc;
  rc = loom__est_write_eval(c->e, c->es->name, *out, ckpt, st);
  if (rc == LOOM_OK) {
    double l = 0;
    loom_eval_result_get(*out, "loss", &l, NULL);
    loom__log(LOOM_LOG_INFO, "Saving dict for global step %lld: loss = %g", (long long)(*out)->global_step, l);
  } else {
    loom_eval_result_free(*out);
    *out = NULL;
  }
  return rc;
}

static loom_code record_eval(tae_ctx *c, loom_eval_result *r, loom_status *st) {
  loom_tae_result *res = c->res;
  if (res->neval == res->capeval) {
    int nc = res->capeval ? 2 * res->capeval : 16;
    int64_t *ns = loom__realloc(res->steps, sizeof *ns * (size_t)nc);
    if (!ns) {
      loom_eval_result_free(r);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    }
    res->steps = ns;
    res->capeval = nc;
  }
  res->steps[res->neval++] = r->global_step;
  loom_eval_result_free(res->metrics);
  res->metrics = r;
  for (int i = 0; i < res->nexp; i++) {
    loom__free(res->paths[i]);
    res->paths[i] = NULL;
  }
  return LOOM_OK;
}

/* Evaluates the checkpoint of `step` (in process from train_s when
 * possible) and runs the exporters. at_end: the evaluation at the end of
 * training. */
static loom_code run_exporters(tae_ctx *c, const char *ckpt, const loom_eval_result *r, int is_final,
                               int only_final, loom_status *st);

static loom_code evaluate_and_export(tae_ctx *c, loom_session *train_s, int64_t step, int at_end, loom_status *st) {
  loom_estimator *e = c->e;
  char ckpt[4096];
  if (!loom__est_latest(e, ckpt, sizeof ckpt))
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "train_and_evaluate: no checkpoint in %s to evaluate",
                           e->model_dir);
  loom_eval_result *r = NULL;
  loom_code rc;
  double t0 = loom__mono_secs(); /* the throttle counts from the start of an evaluation, as TF's timer */
  if (train_s && c->es->nhooks == 0) {
    rc = inproc_evaluate(c, train_s, ckpt, &r, st);
  } else {
    loom_eval_options eo = loom_eval_options_default();
    eo.steps = c->es->steps;
    eo.nhooks = c->es->nhooks;
    eo.hooks = c->es->hooks;
    eo.checkpoint_path = ckpt;
    eo.name = c->es->name;
    rc = loom_estimator_evaluate(e, c->es->input_fn, c->es->input_user, &eo, &r, st);
  }
  if (rc != LOOM_OK) return rc;
  c->evaluated = 1;
  c->last_step = step;
  c->last_time = t0;
  int64_t max_steps = c->ts->max_steps;
  int is_final = max_steps > 0 ? r->global_step >= max_steps : at_end;
  c->last_final = is_final;
  if ((rc = record_eval(c, r, st)) != LOOM_OK) return rc;
  return run_exporters(c, ckpt, r, is_final, 0, st);
}

/* Runs the exporters on the evaluation r of ckpt (only_final: just the
 * FinalExporters). */
static loom_code run_exporters(tae_ctx *c, const char *ckpt, const loom_eval_result *r, int is_final,
                               int only_final, loom_status *st) {
  loom_estimator *e = c->e;
  loom_code rc;
  for (int i = 0; i < c->es->nexporters; i++) {
    loom_exporter *x = c->es->exporters[i];
    if (only_final && !loom__exporter_is_final(x)) continue;
    char base[4200], out[4200];
    snprintf(base, sizeof base, "%s/export/%s", e->model_dir, loom_exporter_name(x));
    if ((rc = loom__exporter_export(x, e, base, ckpt, r, is_final, out, sizeof out, st)) != LOOM_OK) return rc;
    if (out[0]) {
      loom__log(LOOM_LOG_INFO, "Exporter %s exported %s", loom_exporter_name(x), out);
      loom__free(c->res->paths[i]);
      if (!(c->res->paths[i] = loom__strdup(out))) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  return LOOM_OK;
}

static loom_code lst_after_save(void *self, loom_session *s, int64_t step, int *stop, loom_status *st) {
  (void)stop;
  tae_ctx *c = self;
  if (!c->first_save_done) { /* the model is not trained yet */
    c->first_save_done = 1;
    return LOOM_OK;
  }
  /* SecondOrStepTimer(every_secs = throttle_secs) */
  if (c->evaluated && (step == c->last_step || loom__mono_secs() - c->last_time < c->es->throttle_secs)) {
    loom__log(LOOM_LOG_INFO, "Skip the current checkpoint eval (step %lld) due to throttle secs (%g secs).",
              (long long)step, c->es->throttle_secs);
    return LOOM_OK;
  }
  return evaluate_and_export(c, s, step, 0, st);
}

static loom_code lst_end(void *self, loom_session *s, int64_t step, loom_status *st) {
  tae_ctx *c = self;
  if (!c->evaluated || step != c->last_step) return evaluate_and_export(c, s, step, 1, st);
  /* Without max_steps the end of the input is seen only after the last
   * save was evaluated (as not final): that evaluation is the final one,
   * for the FinalExporters. */
  if (c->ts->max_steps == 0 && !c->last_final && c->res->metrics) {
    char ckpt[4096];
    c->last_final = 1;
    if (!loom__est_latest(c->e, ckpt, sizeof ckpt))
      return loom_status_set(st, LOOM_FAILED_PRECONDITION, "train_and_evaluate: no checkpoint in %s", c->e->model_dir);
    return run_exporters(c, ckpt, c->res->metrics, 1, 1, st);
  }
  return LOOM_OK;
}

static const loom_checkpoint_listener eval_listener = {NULL, NULL, lst_after_save, lst_end};

/* ----------------------------------------------------------- validation */
static loom_code check_specs(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                             loom_status *st) {
  loom_train_spec tsd = loom_train_spec_default();
  loom_eval_spec esd = loom_eval_spec_default();
  loom_code orc = LOOM__OPTS_TAKE(&tsd, ts, "train_and_evaluate", loom_train_spec, st);
  if (!orc && es) orc = LOOM__OPTS_TAKE(&esd, es, "train_and_evaluate", loom_eval_spec, st);
  if (orc) return orc;
  if (!ts->input_fn) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TrainSpec.input_fn is NULL");
  if (ts->max_steps < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TrainSpec.max_steps must be > 0 (or 0 for none: until the input ends), given: %lld",
                           (long long)ts->max_steps);
  if (ts->nhooks < 0 || (ts->nhooks > 0 && !ts->hooks))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TrainSpec.hooks: %d hooks given without an array",
                           ts->nhooks);
  for (int i = 0; i < ts->nhooks; i++)
    if (!ts->hooks[i]) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TrainSpec.hooks[%d] is NULL", i);
  if (ts->nlisteners < 0 || (ts->nlisteners > 0 && !ts->listeners))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TrainSpec.listeners: %d listeners given without an array",
                           ts->nlisteners);
  for (int i = 0; i < ts->nlisteners; i++)
    if (!ts->listeners[i]) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TrainSpec.listeners[%d] is NULL", i);
  if (!es) return LOOM_OK; /* train alone */
  if (!es->input_fn) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EvalSpec.input_fn is NULL");
  if (es->steps < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "EvalSpec.steps must be > 0 (or 0 for none: until the input ends), given: %lld",
                           (long long)es->steps);
  if (!(es->throttle_secs >= 0) || isinf(es->throttle_secs))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EvalSpec.throttle_secs must be >= 0, given: %g",
                           es->throttle_secs);
  if (!(es->start_delay_secs >= 0) || isinf(es->start_delay_secs))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EvalSpec.start_delay_secs must be >= 0, given: %g",
                           es->start_delay_secs);
  if (es->name && (!*es->name || strchr(es->name, '/')))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EvalSpec.name '%s' is not a valid directory suffix",
                           es->name);
  if (es->nhooks < 0 || (es->nhooks > 0 && !es->hooks))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EvalSpec.hooks: %d hooks given without an array", es->nhooks);
  for (int i = 0; i < es->nhooks; i++)
    if (!es->hooks[i]) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EvalSpec.hooks[%d] is NULL", i);
  if (es->nexporters < 0 || (es->nexporters > 0 && !es->exporters))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EvalSpec.exporters: %d exporters given without an array",
                           es->nexporters);
  for (int i = 0; i < es->nexporters; i++) {
    if (!es->exporters[i]) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "EvalSpec.exporters[%d] is NULL", i);
    for (int j = 0; j < i; j++)
      if (!strcmp(loom_exporter_name(es->exporters[i]), loom_exporter_name(es->exporters[j])))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "EvalSpec.exporters must have unique names: '%s' is used by exporters %d and %d",
                               loom_exporter_name(es->exporters[i]), j, i);
  }
  if (e->config.save_checkpoints_steps <= 0 && e->config.save_checkpoints_secs <= 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "train_and_evaluate: RunConfig disables checkpoints (save_checkpoints_steps and "
                           "save_checkpoints_secs are 0); local train_and_evaluate evaluates after each checkpoint save");
  return LOOM_OK;
}

/* ------------------------------------------------------------ the entry */
loom_code loom__tae_local(loom_estimator *e, const loom_train_spec *train_spec, const loom_eval_spec *eval_spec,
                          loom_tae_result **out, loom_status *st) {
  if (out) *out = NULL;
  if (!e || !train_spec || !eval_spec || !out)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "train_and_evaluate: estimator, train_spec, eval_spec or out "
                                                      "is NULL");
  loom_code rc = check_specs(e, train_spec, eval_spec, st);
  if (rc != LOOM_OK) return rc;
  if (!e->is_chief)
    return loom_status_set(st, LOOM_UNIMPLEMENTED,
                           "train_and_evaluate: TF_CONFIG names a non-chief task of a cluster without PS tasks; "
                           "only local mode and PS jobs are implemented");
  const loom_train_spec *ts = train_spec;
  const loom_eval_spec *es = eval_spec;

  tae_ctx c;
  memset(&c, 0, sizeof c);
  c.e = e;
  c.ts = ts;
  c.es = es;
  int nl = ts->nlisteners + 1;
  const loom_checkpoint_listener **ls = loom__calloc((size_t)nl, sizeof *ls);
  void **selves = loom__calloc((size_t)nl, sizeof *selves);
  c.res = loom__calloc(1, sizeof *c.res);
  if (c.res && es->nexporters > 0) {
    c.res->names = loom__calloc((size_t)es->nexporters, sizeof(char *));
    c.res->paths = loom__calloc((size_t)es->nexporters, sizeof(char *));
    if (c.res->names && c.res->paths) {
      c.res->nexp = es->nexporters;
      for (int i = 0; i < es->nexporters; i++)
        if (!(c.res->names[i] = loom__strdup(loom_exporter_name(es->exporters[i])))) c.res->nexp = -1;
    }
  }
  if (!ls || !selves || !c.res || c.res->nexp != es->nexporters) {
    if (c.res && c.res->nexp < 0) c.res->nexp = es->nexporters;
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int i = 0; i < ts->nlisteners; i++) {
    ls[i] = ts->listeners[i];
    selves[i] = ts->listener_selves ? ts->listener_selves[i] : NULL;
  }
  ls[nl - 1] = &eval_listener;
  selves[nl - 1] = &c;

  {
    char eval_dir[4096];
    loom_estimator_eval_dir(e, es->name, eval_dir, sizeof eval_dir);
    for (int i = 0; i < es->nexporters; i++)
      if ((rc = loom__exporter_begin(es->exporters[i], e, eval_dir, st)) != LOOM_OK) goto done;
  }
  loom__log(LOOM_LOG_INFO,
            "Start train and evaluate loop. The evaluate will happen after every checkpoint. Checkpoint frequency is "
            "determined based on RunConfig arguments: save_checkpoints_steps %lld or save_checkpoints_secs %g.",
            (long long)e->config.save_checkpoints_steps, e->config.save_checkpoints_secs);

  /* Already at max_steps: train() would skip; evaluate and export that checkpoint. */
  char ckpt[4096];
  if (ts->max_steps > 0 && loom__est_latest(e, ckpt, sizeof ckpt)) {
    int64_t gs = loom__ckpt_global_step(ckpt, -1);
    if (gs >= ts->max_steps) {
      loom__log(LOOM_LOG_INFO,
                "Skipping training since max_steps has already saved (global_step %lld >= %lld); evaluating it.",
                (long long)gs, (long long)ts->max_steps);
      rc = evaluate_and_export(&c, NULL, gs, 1, st);
      goto done;
    }
  }
  {
    loom_train_options to = loom_train_options_default();
    to.max_steps = ts->max_steps;
    to.nhooks = ts->nhooks;
    to.hooks = ts->hooks;
    to.nlisteners = nl;
    to.listeners = ls;
    to.listener_selves = selves;
    rc = loom_estimator_train(e, ts->input_fn, ts->input_user, &to, st);
  }
done:
  ctx_free(&c);
  loom__free(ls);
  loom__free(selves);
  if (rc == LOOM_OK)
    *out = c.res;
  else
    loom_tae_result_free(c.res);
  return rc;
}

/* ---- the distributed evaluator (estimator/cluster.c) ----
 * The evaluation and export steps of local mode, driven by cluster.c's watch
 * of model_dir/checkpoint instead of a saving listener. */
struct loom__tae_eval {
  tae_ctx c;
};

loom_code loom__tae_check_specs(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                                loom_status *st) {
  return check_specs(e, ts, es, st);
}

loom__tae_eval *loom__tae_eval_new(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es,
                                   loom_status *st) {
  loom__tae_eval *x = loom__calloc(1, sizeof *x);
  if (!x) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  tae_ctx *c = &x->c;
  c->e = e;
  c->ts = ts;
  c->es = es;
  c->res = loom__calloc(1, sizeof *c->res);
  int ok = c->res != NULL;
  if (ok && es->nexporters > 0) {
    c->res->names = loom__calloc((size_t)es->nexporters, sizeof(char *));
    c->res->paths = loom__calloc((size_t)es->nexporters, sizeof(char *));
    ok = c->res->names && c->res->paths;
    if (ok) c->res->nexp = es->nexporters;
    for (int i = 0; ok && i < es->nexporters; i++)
      ok = (c->res->names[i] = loom__strdup(loom_exporter_name(es->exporters[i]))) != NULL;
  }
  if (!ok) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    loom__tae_eval_free(x);
    return NULL;
  }
  char eval_dir[4096];
  loom_estimator_eval_dir(e, es->name, eval_dir, sizeof eval_dir);
  for (int i = 0; i < es->nexporters; i++)
    if (loom__exporter_begin(es->exporters[i], e, eval_dir, st) != LOOM_OK) {
      loom__tae_eval_free(x);
      return NULL;
    }
  return x;
}

loom_code loom__tae_eval_latest(loom__tae_eval *x, int64_t step, loom_status *st) {
  return evaluate_and_export(&x->c, NULL, step, 0, st);
}

int64_t loom__tae_eval_last_step(const loom__tae_eval *x) { return x->c.evaluated ? x->c.last_step : -1; }

loom_tae_result *loom__tae_eval_take(loom__tae_eval *x) {
  loom_tae_result *r = x->c.res;
  x->c.res = NULL;
  return r;
}

void loom__tae_eval_free(loom__tae_eval *x) {
  if (!x) return;
  ctx_free(&x->c);
  loom_tae_result_free(x->c.res);
  loom__free(x);
}
