/* estimator/estimator.c - Estimator construction, train and evaluate.
 * EstimatorSpec is in spec.c; graph building per mode, session
 * initialisation and checkpoints in build.c (shared with predict.c);
 * predict and export in predict.c, in-process evaluation in
 * hooks/in_memory_eval.c. estimator.c and predict.c do not call each
 * other: the estimator frees predict's cache through the destructor
 * predict.c leaves in it. */
#include "estimator/estimator_impl.h"
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- estimator */
loom_estimator *loom_estimator_new(loom_model_fn model_fn, void *user, const char *model_dir,
                                   const loom_run_config *config, const loom_params *params,
                                   const char *warm_start_from, loom_status *st) {
  if (!model_fn) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "Estimator: model_fn is NULL");
    return NULL;
  }
  loom_run_config c = loom_run_config_default();
  /* a caller's older, smaller RunConfig sets only what it knows */
  if (LOOM__OPTS_TAKE(&c, config, "Estimator", loom_run_config, st)) return NULL;
  if (c.save_checkpoints_steps > 0 && c.save_checkpoints_secs > 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "RunConfig: save_checkpoints_steps and save_checkpoints_secs are both set; set at most one");
    return NULL;
  }
  if (c.train_distribute < LOOM_DISTRIBUTE_AUTO || c.train_distribute > LOOM_DISTRIBUTE_COLLECTIVE) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "RunConfig: train_distribute %d is not a loom_distribute value (0..3)",
                    (int)c.train_distribute);
    return NULL;
  }
  if (c.save_summary_steps < 0 || c.keep_checkpoint_max < 0 || c.log_step_count_steps <= 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "RunConfig: save_summary_steps and keep_checkpoint_max must be >= 0 and log_step_count_steps > 0");
    return NULL;
  }
  if (c.save_checkpoints_steps < 0 && c.save_checkpoints_secs < 0) c.save_checkpoints_secs = 600;
  if (c.save_checkpoints_steps > 0) c.save_checkpoints_secs = 0;
  if (c.save_checkpoints_secs > 0 && c.save_checkpoints_steps < 0) c.save_checkpoints_steps = 0;
  if (c.save_checkpoints_steps < 0) c.save_checkpoints_steps = 0;
  if (c.save_checkpoints_secs < 0) c.save_checkpoints_secs = 0;

  loom_tf_config *tc = loom_tf_config_parse(NULL, st);
  if (!tc) return NULL;
  const char *dir = model_dir;
  if (dir && c.model_dir && strcmp(dir, c.model_dir) != 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "Estimator: model_dir '%s' differs from config.model_dir '%s'", dir,
                    c.model_dir);
    loom_tf_config_free(tc);
    return NULL;
  }
  if (!dir) dir = c.model_dir;
  if (!dir) dir = loom_tf_config_model_dir(tc);
  char tmpl[] = "/tmp/loom_model_XXXXXX";
  if (!dir) {
    if (!mkdtemp(tmpl)) {
      loom_status_set(st, LOOM_INTERNAL, "Estimator: cannot create a temporary model_dir: %s", strerror(errno));
      loom_tf_config_free(tc);
      return NULL;
    }
    dir = tmpl;
    loom__log(LOOM_LOG_WARN, "Using temporary folder as model directory: %s", dir);
  }
  loom_estimator *e = loom__calloc(1, sizeof *e);
  if (!e) goto oom;
  e->model_fn = model_fn;
  e->user = user;
  e->config = c;
  e->is_chief = loom_tf_config_is_chief(tc);
  loom_tf_config_free(tc);
  tc = NULL;
  e->model_dir = loom__strdup(dir);
  e->params = params ? loom_params_copy(params) : loom_params_new();
  if (!e->model_dir || !e->params) goto oom;
  e->config.model_dir = e->model_dir;
  if (warm_start_from && !(e->warm_start_from = loom__strdup(warm_start_from))) goto oom;
  if (loom__mkdir_p(e->model_dir, st) != LOOM_OK) {
    loom_estimator_free(e);
    return NULL;
  }
  return e;
oom:
  loom_tf_config_free(tc);
  loom_estimator_free(e);
  loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  return NULL;
}



void loom_estimator_free(loom_estimator *e) {
  if (!e) return;
  if (e->pred_cache_free) e->pred_cache_free(e->pred_cache);
  if (e->warm_start_free) e->warm_start_free(e->warm_start_state);
  if (e->user_free) e->user_free(e->user);
  loom__free(e->model_dir);
  loom_params_free(e->params);
  loom__free(e->warm_start_from);
  loom__free(e->warm_start_regex);
  loom__free(e);
}

const char *loom_estimator_model_dir(const loom_estimator *e) { return e ? e->model_dir : NULL; }
const loom_run_config *loom_estimator_config(const loom_estimator *e) { return e ? &e->config : NULL; }
const loom_params *loom_estimator_params(const loom_estimator *e) { return e ? e->params : NULL; }

loom_code loom_estimator_set_warm_start_vars(loom_estimator *e, const char *regex, loom_status *st) {
  if (!e) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "estimator is NULL");
  if (regex) {
    regex_t re;
    if (regcomp(&re, regex, REG_EXTENDED | REG_NOSUB) != 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "warm start: invalid regex '%s'", regex);
    regfree(&re);
  }
  loom__free(e->warm_start_regex);
  e->warm_start_regex = regex ? loom__strdup(regex) : NULL;
  return LOOM_OK;
}

loom_code loom_estimator_latest_checkpoint(const loom_estimator *e, char *buf, size_t cap, loom_status *st) {
  if (!e || !buf) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "estimator or buffer is NULL");
  return loom_latest_checkpoint(e->model_dir, buf, cap, st);
}

loom_code loom_estimator_get_variable_names(const loom_estimator *e, loom_checkpoint_entry_fn fn, void *user,
                                            loom_status *st) {
  char ck[4096];
  if (!e || !fn) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "estimator or callback is NULL");
  if (!loom__est_latest(e, ck, sizeof ck))
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "Estimator is not trained yet: no checkpoint in %s",
                           e->model_dir);
  return loom_checkpoint_list_variables(ck, fn, user, st);
}

loom_code loom_estimator_get_variable_value(const loom_estimator *e, const char *name, loom_tensor **out,
                                            loom_status *st) {
  char ck[4096];
  if (!e || !name || !out) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "estimator, name or out is NULL");
  if (!loom__est_latest(e, ck, sizeof ck))
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "Estimator is not trained yet: no checkpoint in %s",
                           e->model_dir);
  return loom_checkpoint_read_tensor(ck, name, out, st);
}

loom_code loom_estimator_call_model_fn(const loom_estimator *e, loom_graph *g, const loom_features *features,
                                       loom_output labels, loom_mode mode, loom_estimator_spec *spec,
                                       loom_status *st) {
  if (!e || !g || !spec)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_estimator_call_model_fn: estimator, graph or spec is NULL");
  return e->model_fn(g, features, labels, mode, e->params, &e->config, spec, e->user, st);
}

const char *loom_estimator_eval_dir(const loom_estimator *e, const char *name, char *buf, size_t cap) {
  if (!e || !buf || !cap) return NULL;
  if (name && *name)
    snprintf(buf, cap, "%s/eval_%s", e->model_dir, name);
  else
    snprintf(buf, cap, "%s/eval", e->model_dir);
  return buf;
}

/* ------------------------------------------------------------------ train */
loom_train_options loom_train_options_default(void) {
  loom_train_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  return o;
}

typedef struct init_ctx {
  loom_estimator *e;
  loom_graph *g;
  const char *ckpt;
  int warm;
  const char *shown; /* the name errors give for ckpt (a pin's checkpoint); NULL: ckpt */
} init_ctx;

/* Replaces every from in st's message by to (the pin's hard link by the
 * checkpoint it pins: the link is gone by the time the caller reads it). */
static void status_rename(loom_status *st, const char *from, const char *to) {
  const char *m = loom_status_message(st);
  size_t fl = strlen(from), tl = strlen(to);
  if (!fl || !strstr(m, from)) return;
  char out[2048];
  size_t o = 0;
  for (const char *p = m; *p && o + 1 < sizeof out;) {
    if (!strncmp(p, from, fl) && o + tl + 1 < sizeof out) {
      memcpy(out + o, to, tl);
      o += tl;
      p += fl;
    } else {
      out[o++] = *p++;
    }
  }
  out[o] = 0;
  loom_status_set(st, loom_status_code(st), "%s", out);
}

static loom_code init_cb(loom_session *s, void *user, loom_status *st) {
  init_ctx *c = user;
  loom_code rc = loom__est_init_session(c->e, s, c->g, c->ckpt, c->warm, st);
  if (rc && c->ckpt && c->shown && strcmp(c->ckpt, c->shown)) status_rename(st, c->ckpt, c->shown);
  return rc;
}

int64_t loom__ckpt_global_step(const char *ckpt, int64_t missing) {
  loom_tensor *t = NULL;
  int64_t step = missing;
  if (loom_checkpoint_read_tensor(ckpt, "global_step", &t, NULL) == LOOM_OK && loom_tensor_numel(t) == 1) {
    if (loom_tensor_dtype(t) == LOOM_I64)
      step = *(const int64_t *)loom_tensor_data_const(t);
    else if (loom_tensor_dtype(t) == LOOM_I32)
      step = *(const int32_t *)loom_tensor_data_const(t);
  }
  loom_tensor_free(t);
  return step;
}

int loom__est_has_loss_summary(loom_graph *g) {
  const char *const *tags = NULL;
  int n = loom_graph_summaries(g, &tags, NULL, NULL);
  for (int i = 0; i < n; i++)
    if (!strcmp(tags[i], "loss")) return 1;
  return 0;
}


static loom_dataset *call_input_fn(loom_estimator *e, loom_input_fn input_fn, void *user, loom_mode mode,
                                   loom_status *st) {
  if (!input_fn) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "input_fn is NULL");
    return NULL;
  }
  loom_dataset *ds = input_fn(mode, e->params, user, st);
  if (!ds) {
    if (!st || loom_status_code(st) == LOOM_OK)
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "input_fn returned no dataset in mode %s", loom_mode_key(mode));
    return NULL;
  }
  if (e->config.prefetch > 0) ds = loom_dataset_prefetch(ds, e->config.prefetch, st);
  return ds;
}

/* The step loop shared by train and evaluate: feeds each batch, runs
 * fetches/targets until should_stop, the input's end or max_batches. */
static loom_code feed_loop(loom_monitored_session *ms, loom_dataset *ds, est_built *b, const loom_output *fetches,
                           loom_tensor **fetch_values, int nfetches, loom_node *const *targets, int ntargets,
                           int64_t max_batches, int64_t *batches, loom_status *st) {
  int n = loom_dataset_num_components(ds);
  loom_tensor **vals = loom__calloc((size_t)(n ? n : 1), sizeof(loom_tensor *));
  loom_tensor **feed_vals = loom__calloc((size_t)(b->ncomp ? b->ncomp : 1), sizeof(loom_tensor *));
  loom_code rc = LOOM_OK;
  if (!vals || !feed_vals) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  *batches = 0;
  while (!loom_monitored_session_should_stop(ms) && (max_batches <= 0 || *batches < max_batches)) {
    rc = loom_dataset_next(ds, vals, st);
    if (rc == LOOM_OUT_OF_RANGE) {
      rc = LOOM_OK;
      if (st) loom_status_clear(st);
      break;
    }
    if (rc != LOOM_OK) break;
    for (int i = 0; i < b->ncomp; i++) feed_vals[i] = vals[b->comp_index[i]];
    rc = loom_monitored_session_run(ms, b->inputs, feed_vals, b->ncomp, fetches, fetch_values, nfetches, targets,
                                    ntargets, st);
    if (rc == LOOM_OUT_OF_RANGE) { /* a hook ended the input: a normal end */
      rc = LOOM_OK;
      if (st) loom_status_clear(st);
      break;
    }
    if (rc != LOOM_OK) break;
    (*batches)++;
  }
done:
  if (vals)
    for (int i = 0; i < n; i++) loom_tensor_free(vals[i]);
  loom__free(vals);
  loom__free(feed_vals);
  return rc;
}

loom_code loom_estimator_train(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                               const loom_train_options *opt, loom_status *st) {
  return loom__est_train(e, input_fn, input_user, opt, NULL, st);
}

/* The end of a training call under strategy s (began: its begin ran). */
static loom_code strategy_end(loom__strategy *s, int began, loom_code rc, loom_status *st) {
  return s ? s->ops->end(s, began, rc, st) : rc;
}

static loom_code train_loop(loom_estimator *e, loom_input_fn input_fn, void *input_user, const loom_train_options *opt,
                            loom__strategy *strategy, int *began, loom_status *st);

/* The one training loop, for every strategy (NULL: local). */
loom_code loom__est_train(loom_estimator *e, loom_input_fn input_fn, void *input_user, const loom_train_options *opt,
                          loom__strategy *strategy, loom_status *st) {
  int began = 0;
  loom_code rc = e ? train_loop(e, input_fn, input_user, opt, strategy, &began, st)
                   : loom_status_set(st, LOOM_INVALID_ARGUMENT, "estimator is NULL");
  return strategy_end(strategy, began, rc, st);
}

static loom_code train_loop(loom_estimator *e, loom_input_fn input_fn, void *input_user, const loom_train_options *opt,
                            loom__strategy *strategy, int *began, loom_status *st) {
  loom_train_options o = loom_train_options_default();
  loom_code orc = LOOM__OPTS_TAKE(&o, opt, "train", loom_train_options, st);
  if (orc) return orc;
  if (o.steps < 0 || o.max_steps < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "train: steps and max_steps must be > 0 when given (got %lld, %lld)",
                           (long long)o.steps, (long long)o.max_steps);
  if (o.steps > 0 && o.max_steps > 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "train: can not provide both steps and max_steps");
  int ckpt_on = e->config.save_checkpoints_steps > 0 || e->config.save_checkpoints_secs > 0;
  if (o.nlisteners > 0 && !ckpt_on)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "train: saving listeners given but checkpointing is disabled in RunConfig");
  char ckpt[4096];
  int have_ckpt = loom__est_latest(e, ckpt, sizeof ckpt);
  int64_t start_step = have_ckpt ? loom__ckpt_global_step(ckpt, 0) : 0;
  if (o.max_steps > 0 && have_ckpt && !strategy) { /* under a strategy the global step is the strategy's */
    int64_t gs = start_step;
    if (gs >= o.max_steps) {
      loom__log(LOOM_LOG_INFO, "Skipping training since max_steps has already saved (global_step %lld >= %lld).",
                (long long)gs, (long long)o.max_steps);
      return LOOM_OK;
    }
  }
  loom_dataset *ds = call_input_fn(e, input_fn, input_user, LOOM_MODE_TRAIN, st);
  if (!ds) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  est_built b;
  loom_code rc = loom__est_build(e, LOOM_MODE_TRAIN, ds, NULL, NULL, &b, st);
  if (rc != LOOM_OK) {
    loom_dataset_free(ds);
    return rc;
  }
  loom_output gs_out = loom_variable_output(b.global_step);
  loom__strategy_plan plan;
  memset(&plan, 0, sizeof plan);
  plan.run_train_op = 1;
  plan.is_chief = e->is_chief;
  plan.restore = 1;
  loom_event_writer *writer = NULL;
  est_hook_list hl;
  memset(&hl, 0, sizeof hl);
  const loom_checkpoint_listener **ls = NULL;
  void **selves = NULL;
  if ((rc = loom_graph_status(b.g, st)) != LOOM_OK) goto out_graph;
  if (strategy) { /* what the strategy changes: its hook first, its listener, who checkpoints */
    *began = 1;
    rc = strategy->ops->begin(strategy, b.g, b.spec.train_op, b.spec.loss, b.global_step, &plan, st);
    if (plan.hook) loom__hl_add(&hl, plan.hook, 1);
    if (rc != LOOM_OK) goto out_hooks;
  }
  int chief = plan.is_chief;
  if (chief && e->config.save_summary_steps > 0 && !loom__est_has_loss_summary(b.g))
    loom_summary_scalar(b.g, "loss", b.spec.loss);
  if ((rc = loom_graph_status(b.g, st)) != LOOM_OK) goto out_hooks;
  if (chief) {
    writer = loom_event_writer_new(e->model_dir, NULL, st);
    if (!writer) {
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
      goto out_hooks;
    }
  }
  {
    int64_t total = o.steps;
    if (o.max_steps > 0) total = o.max_steps - start_step;
    loom__est_add_train_hooks(&hl, e, &b, gs_out, o.nhooks, o.hooks, o.steps, o.max_steps,
                              e->config.progress_bar && !strategy ? total : 0, st);
  }
  if (chief && plan.listener) { /* the strategy's listener first, at the same step */
    ls = loom__calloc((size_t)o.nlisteners + 1, sizeof *ls);
    selves = loom__calloc((size_t)o.nlisteners + 1, sizeof *selves);
    if (!ls || !selves) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "train: out of memory");
      goto out_hooks;
    }
    ls[0] = plan.listener;
    selves[0] = plan.listener_self;
    for (int i = 0; i < o.nlisteners; i++) {
      ls[i + 1] = o.listeners[i];
      selves[i + 1] = o.listener_selves ? o.listener_selves[i] : NULL;
    }
    loom__est_add_chief_hooks(&hl, e, &b, writer, o.nlisteners + 1, ls, selves, st);
  } else if (chief) {
    loom__est_add_chief_hooks(&hl, e, &b, writer, o.nlisteners, o.listeners, o.listener_selves, st);
  }
  if (hl.oom) { /* a hook that could not be made says why, else it ran out of memory */
    rc = loom_status_code(st) ? loom_status_code(st)
                              : loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "train: out of memory collecting hooks");
    goto out_hooks;
  }
  if (st && loom_status_code(st) != LOOM_OK) {
    rc = loom_status_code(st);
    goto out_hooks;
  }
  {
    init_ctx ic = {e, b.g, have_ckpt && plan.restore ? ckpt : NULL, 1, NULL};
    loom_session_options so = loom__est_session_options(e);
    if (so.device != LOOM_DEVICE_CPU && plan.device_index > 0) {
      int ndev = loom__dev_count(so.device);
      so.device_index = ndev > 0 ? plan.device_index % ndev : 0;
    }
    loom_monitored_session *ms = loom_monitored_session_new(b.g, &so, init_cb, &ic, hl.n, hl.items, st);
    if (!ms) {
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
      goto out_hooks;
    }
    loom_tensor *loss_val = NULL;
    int64_t nb = 0;
    loom_node *const *targets = plan.run_train_op ? &b.spec.train_op : plan.targets;
    int ntargets = plan.run_train_op ? 1 : plan.ntargets;
    rc = feed_loop(ms, ds, &b, &b.spec.loss, &loss_val, 1, targets, ntargets, 0, &nb, st);
    if (rc == LOOM_OK && nb == 0) loom__log(LOOM_LOG_WARN, "Training with estimator made no steps.");
    if (rc == LOOM_OK && loss_val)
      loom__log(LOOM_LOG_INFO, "Loss for final step: %g.",
                loom_tensor_dtype(loss_val) == LOOM_F64 ? *(const double *)loom_tensor_data_const(loss_val)
                                                            : (double)*(const float *)loom_tensor_data_const(loss_val));
    loom_tensor_free(loss_val);
    if (rc == LOOM_OK) {
      rc = loom_monitored_session_close(ms, st);
    } else {
      loom_monitored_session_close(ms, NULL);
    }
  }
out_hooks:
  loom__hl_free(&hl);
  loom_event_writer_free(writer);
  loom__free(ls);
  loom__free(selves);
out_graph:
  loom__est_built_free(&b);
  loom_dataset_free(ds);
  return rc;
}

/* ------------------------------------------------------------- evaluate */
loom_eval_options loom_eval_options_default(void) {
  loom_eval_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  return o;
}

loom_eval_result *loom__eval_result_new(int n, char *const *keys, const double *values, int64_t step) {
  loom_eval_result *r = loom__calloc(1, sizeof *r);
  if (!r) return NULL;
  r->keys = loom__calloc((size_t)(n + 1), sizeof(char *));
  r->values = loom__calloc((size_t)(n + 1), sizeof(double));
  if (!r->keys || !r->values) {
    loom_eval_result_free(r);
    return NULL;
  }
  /* insertion sort by key */
  for (int i = 0; i < n; i++) {
    int j = r->n;
    while (j > 0 && strcmp(r->keys[j - 1], keys[i]) > 0) {
      r->keys[j] = r->keys[j - 1];
      r->values[j] = r->values[j - 1];
      j--;
    }
    r->keys[j] = loom__strdup(keys[i]);
    r->values[j] = values[i];
    r->n++;
    if (!r->keys[j]) {
      loom_eval_result_free(r);
      return NULL;
    }
  }
  r->global_step = step;
  return r;
}

loom_eval_result *loom__eval_result_copy(const loom_eval_result *r) {
  return loom__eval_result_new(r->n, r->keys, r->values, r->global_step);
}

int loom_eval_result_count(const loom_eval_result *r) { return r ? r->n : 0; }
const char *loom_eval_result_key(const loom_eval_result *r, int i) {
  return (r && i >= 0 && i < r->n) ? r->keys[i] : NULL;
}
double loom_eval_result_value(const loom_eval_result *r, int i) {
  return (r && i >= 0 && i < r->n) ? r->values[i] : 0.0;
}
loom_code loom_eval_result_get(const loom_eval_result *r, const char *key, double *value, loom_status *st) {
  for (int i = 0; r && key && i < r->n; i++)
    if (!strcmp(r->keys[i], key)) {
      if (value) *value = r->values[i];
      return LOOM_OK;
    }
  return loom_status_set(st, LOOM_NOT_FOUND, "no metric '%s' in the evaluation result", key ? key : "(null)");
}
int64_t loom_eval_result_global_step(const loom_eval_result *r) { return r ? r->global_step : 0; }
void loom_eval_result_free(loom_eval_result *r) {
  if (!r) return;
  for (int i = 0; r->keys && i < r->n; i++) loom__free(r->keys[i]);
  loom__free(r->keys);
  loom__free(r->values);
  loom__free(r);
}

loom_code loom__est_write_eval(loom_estimator *e, const char *name, const loom_eval_result *r, const char *ckpt,
                               loom_status *st) {
  char dir[4096];
  loom_estimator_eval_dir(e, name, dir, sizeof dir);
  loom_event_writer *w = loom_event_writer_new(dir, NULL, st);
  if (!w) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  const char **tags = loom__calloc((size_t)r->n + 1, sizeof(char *));
  double *vals = loom__calloc((size_t)r->n + 1, sizeof(double));
  if (!tags || !vals) {
    loom__free(tags);
    loom__free(vals);
    loom_event_writer_free(w);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  int n = 0;
  for (int i = 0; i < r->n; i++) {
    if (!strcmp(r->keys[i], "global_step")) continue;
    tags[n] = r->keys[i];
    vals[n++] = r->values[i];
  }
  loom_code rc = loom_event_writer_add_scalars(w, n, tags, vals, r->global_step, st);
  if (rc == LOOM_OK && ckpt) rc = loom_event_writer_add_text(w, "checkpoint_path", ckpt, r->global_step, st);
  loom__free(tags);
  loom__free(vals);
  loom_event_writer_free(w);
  return rc;
}


void loom__est_eval_ops_free(est_eval_ops *o) {
  for (int i = 0; i < o->n; i++) loom__free(o->names[i]);
  loom__free(o->names);
  loom__free(o->values);
  memset(o, 0, sizeof *o);
}

loom_code loom__est_eval_ops(est_built *b, est_eval_ops *o, loom_status *st) {
  memset(o, 0, sizeof *o);
  int n = b->spec.nmet + 2; /* loss, the spec's metrics, global_step */
  o->names = loom__calloc((size_t)n, sizeof(char *));
  o->values = loom__calloc((size_t)n, sizeof(loom_output));
  loom_node **ups = loom__calloc((size_t)n, sizeof(loom_node *));
  if (!o->names || !o->values || !ups) {
    loom__free(ups);
    loom__est_eval_ops_free(o);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  loom_output zero = {NULL, 0};
  loom_metric lm = loom_metrics_mean(b->g, b->spec.loss, zero, NULL);
  o->names[0] = loom__strdup("loss");
  o->values[0] = lm.value;
  ups[0] = lm.update.node;
  o->n = 1;
  for (int i = 0; i < b->spec.nmet; i++) {
    o->names[o->n] = loom__strdup(b->spec.met_names[i]);
    o->values[o->n] = b->spec.mets[i].value;
    ups[o->n++] = b->spec.mets[i].update.node;
  }
  o->update = loom_group(b->g, o->n, ups, "eval_update");
  o->names[o->n] = loom__strdup("global_step");
  o->values[o->n++] = loom_variable_output(b->global_step);
  loom__free(ups);
  for (int i = 0; i < o->n; i++)
    if (!o->names[i]) {
      loom__est_eval_ops_free(o);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    }
  loom_code rc = loom_graph_status(b->g, st);
  if (rc != LOOM_OK) loom__est_eval_ops_free(o);
  return rc;
}

loom_code loom__est_eval_run(loom_estimator *e, loom_monitored_session *ms, loom_dataset *ds, est_built *b,
                             est_eval_ops *o, int64_t steps, loom_eval_result **out, loom_status *st) {
  (void)e;
  int64_t nb = 0;
  loom_code rc = feed_loop(ms, ds, b, NULL, NULL, 0, &o->update, 1, steps, &nb, st);
  if (rc != LOOM_OK) return rc;
  loom_session *s = loom_monitored_session_session(ms);
  loom_tensor **vals = loom__calloc((size_t)o->n, sizeof(loom_tensor *));
  double *dv = loom__calloc((size_t)o->n, sizeof(double));
  if (!vals || !dv) {
    loom__free(vals);
    loom__free(dv);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  rc = loom_session_run(s, NULL, NULL, 0, o->values, vals, o->n, NULL, 0, st);
  if (rc == LOOM_OK) {
    for (int i = 0; i < o->n; i++) dv[i] = loom__tensor_scalar_f64(vals[i]);
    *out = loom__eval_result_new(o->n, o->names, dv, (int64_t)dv[o->n - 1]); /* the last is global_step */
    if (!*out) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    if (nb == 0) loom__log(LOOM_LOG_WARN, "Evaluation ran no batches: the input was empty.");
  }
  for (int i = 0; i < o->n; i++) loom_tensor_free(vals[i]);
  loom__free(vals);
  loom__free(dv);
  return rc;
}

loom_code loom_estimator_evaluate(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                  const loom_eval_options *opt, loom_eval_result **out, loom_status *st) {
  if (!e || !out) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "estimator or out is NULL");
  *out = NULL;
  loom_eval_options o = loom_eval_options_default();
  loom_code orc = LOOM__OPTS_TAKE(&o, opt, "evaluate", loom_eval_options, st);
  if (orc) return orc;
  if (o.steps < 0) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "evaluate: steps must be > 0 when given");
  loom_dataset *ds = call_input_fn(e, input_fn, input_user, LOOM_MODE_EVAL, st);
  if (!ds) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  est_built b;
  loom_code rc = loom__est_build(e, LOOM_MODE_EVAL, ds, NULL, NULL, &b, st);
  if (rc != LOOM_OK) {
    loom_dataset_free(ds);
    return rc;
  }
  est_eval_ops eo;
  if ((rc = loom__est_eval_ops(&b, &eo, st)) != LOOM_OK) goto out;
  est_hook_list hl;
  memset(&hl, 0, sizeof hl);
  for (int i = 0; i < o.nhooks; i++) loom__hl_add(&hl, o.hooks[i], 0);
  for (int i = 0; i < b.spec.nhooks[LOOM_HOOKS_EVALUATION]; i++)
    loom__hl_add(&hl, b.spec.hooks[LOOM_HOOKS_EVALUATION][i], 0);
  char ckpt[4096], pin[4200];
  int have = 0;
  const char *use = NULL;
  loom_monitored_session *ms = NULL;
  if (hl.oom) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "evaluate: out of memory collecting hooks");
  } else if ((rc = loom__est_pin_checkpoint(e, o.checkpoint_path, ckpt, sizeof ckpt, pin, sizeof pin, &have, st)) ==
             LOOM_OK) {
    if (have) {
      use = ckpt;
    } else {
      loom__log(LOOM_LOG_INFO, "Could not find trained model in model_dir: %s, running initialization to evaluate.",
                e->model_dir);
    }
    init_ctx ic = {e, b.g, have ? pin : NULL, 0, have ? ckpt : NULL};
    loom_session_options so = loom__est_session_options(e);
    ms = loom_monitored_session_new(b.g, &so, init_cb, &ic, hl.n, hl.items, st);
    if (have) loom__est_unpin_checkpoint(ckpt, pin);
    if (!ms) rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  }
  if (!ms) {
    loom__hl_free(&hl);
    loom__est_eval_ops_free(&eo);
    goto out;
  }
  rc = loom__est_eval_run(e, ms, ds, &b, &eo, o.steps, out, st);
  if (rc == LOOM_OK)
    rc = loom_monitored_session_close(ms, st);
  else
    loom_monitored_session_close(ms, NULL);
  if (rc == LOOM_OK) rc = loom__est_write_eval(e, o.name, *out, use, st);
  if (rc == LOOM_OK) {
    double l = 0;
    loom_eval_result_get(*out, "loss", &l, NULL);
    loom__log(LOOM_LOG_INFO, "Saving dict for global step %lld: loss = %g", (long long)(*out)->global_step, l);
  } else {
    loom_eval_result_free(*out);
    *out = NULL;
  }
  loom__hl_free(&hl);
  loom__est_eval_ops_free(&eo);
out:
  loom__est_built_free(&b);
  loom_dataset_free(ds);
  return rc;
}
