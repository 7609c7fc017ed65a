/* estimator/hooks/in_memory_eval.c - evaluation inside training, without
 * checkpoints (InMemoryEvaluatorHook). The early-stopping hooks built on it
 * are in early_stopping.c.
 *
 * The eval graph and its session are built once (at the first evaluation);
 * each evaluation copies the training session's values of every variable
 * the eval graph shares with it (by name), resets the metrics (local
 * initializers), rewinds the input (loom_dataset_reset) and runs it. */
#include <stdio.h>
#include <string.h>
#include "estimator/hooks/in_memory_eval.h"

static void inmem_destroy(void *self) {
  inmem *m = self;
  if (m->ms) loom_monitored_session_close(m->ms, NULL);
  loom__est_eval_ops_free(&m->ops);
  if (m->built) loom__est_built_free(&m->b);
  loom_dataset_free(m->ds);
  loom_tensor_free(m->tmp);
  for (int i = 0; i < m->nhist; i++) loom_eval_result_free(m->hist[i]);
  loom__free(m->hist);
  loom__free(m->name);
  loom__free(m->metric);
  loom__free(m);
}

static loom_code inmem_build(inmem *m, loom_status *st) {
  loom_estimator *e = m->e;
  m->ds = m->input_fn(LOOM_MODE_EVAL, e->params, m->input_user, st);
  if (!m->ds)
    return (st && loom_status_code(st)) ? loom_status_code(st)
                                        : loom_status_set(st, LOOM_INVALID_ARGUMENT, "eval input_fn returned no dataset");
  loom_code rc = loom__est_build(e, LOOM_MODE_EVAL, m->ds, NULL, NULL, &m->b, st);
  if (rc != LOOM_OK) return rc;
  m->built = 1;
  if ((rc = loom__est_eval_ops(&m->b, &m->ops, st)) != LOOM_OK) return rc;
  loom_session_options so = loom__est_session_options(e);
  m->ms = loom_monitored_session_new(m->b.g, &so, NULL, NULL, 0, NULL, st);
  if (!m->ms) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  return LOOM_OK;
}

/* One in-memory evaluation; appends the result to the history. */
static loom_code inmem_evaluate(inmem *m, loom_status *st) {
  loom_code rc;
  if (!m->built && (rc = inmem_build(m, st)) != LOOM_OK) return rc;
  loom_session *es = loom_monitored_session_session(m->ms);
  int nv = 0;
  loom_variable *const *vars = loom_global_variables(m->b.g, &nv);
  for (int i = 0; i < nv; i++) {
    const char *vn = loom_variable_name(vars[i]);
    if (!loom_session_variable_initialized(m->train_s, vn)) continue;
    if ((rc = loom_session_read_variable(m->train_s, vn, &m->tmp, st)) != LOOM_OK) return rc;
    if ((rc = loom_session_assign_variable(es, vn, m->tmp, st)) != LOOM_OK) return rc;
  }
  loom_node *li = loom_local_variables_initializer(m->b.g);
  if (li && (rc = loom_session_run(es, NULL, NULL, 0, NULL, NULL, 0, &li, 1, st)) != LOOM_OK) return rc;
  if ((rc = loom_dataset_reset(m->ds, st)) != LOOM_OK) return rc;
  loom_eval_result *r = NULL;
  if ((rc = loom__est_eval_run(m->e, m->ms, m->ds, &m->b, &m->ops, m->steps, &r, st)) != LOOM_OK) return rc;
  loom_eval_result **nh = loom__realloc(m->hist, sizeof(*nh) * (size_t)(m->nhist + 1));
  if (!nh) {
    loom_eval_result_free(r);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  m->hist = nh;
  m->hist[m->nhist++] = r;
  m->last_eval_step = r->global_step;
  double loss = 0;
  loom_eval_result_get(r, "loss", &loss, NULL);
  loom__log(LOOM_LOG_INFO, "In-memory evaluation%s%s at step %lld: loss = %g", m->name ? " " : "",
            m->name ? m->name : "", (long long)r->global_step, loss);
  return loom__est_write_eval(m->e, m->name, r, NULL, st);
}

static loom_code inmem_after_create(void *self, loom_session *s, loom_status *st) {
  inmem *m = self;
  m->train_s = s;
  if (!m->tf_schedule) return LOOM_OK;
  m->iter = 0; /* counts the steps of this call, as TF's begin() */
  return inmem_evaluate(m, st);
}

static loom_code inmem_after_run(void *self, loom_hook_context *ctx, loom_tensor *const *results, loom_status *st) {
  (void)results;
  inmem *m = self;
  if (++m->iter % m->every_n != 0) return LOOM_OK;
  loom_code rc = inmem_evaluate(m, st);
  if (rc != LOOM_OK) return rc;
  if (m->should_stop && m->should_stop(m)) {
    loom__log(LOOM_LOG_INFO, "Early stopping requested at step %lld.", (long long)m->last_eval_step);
    loom_hook_context_request_stop(ctx);
  }
  return LOOM_OK;
}

static loom_code inmem_end(void *self, loom_session *s, loom_status *st) {
  inmem *m = self;
  m->train_s = s;
  if (m->should_stop) return LOOM_OK; /* early stopping evaluates on its schedule only */
  if (m->tf_schedule) return inmem_evaluate(m, st);
  if (m->iter % m->every_n == 0 && m->nhist > 0) return LOOM_OK; /* this step was just evaluated */
  return inmem_evaluate(m, st);
}

static const loom_hook_ops inmem_ops = {NULL, inmem_after_create, NULL, inmem_after_run, inmem_end, inmem_destroy};

loom_hook *loom__inmem_new(loom_estimator *e, loom_input_fn input_fn, void *input_user, int64_t steps,
                           const char *name, int64_t every_n, const char *what, loom_status *st) {
  if (!e || !input_fn) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: estimator or input_fn is NULL", what);
    return NULL;
  }
  if (every_n <= 0 || steps < 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: every_n_iter / run_every_steps must be > 0 and steps >= 0", what);
    return NULL;
  }
  inmem *m = loom__calloc(1, sizeof *m);
  if (!m || (name && !(m->name = loom__strdup(name)))) {
    loom__free(m);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  m->e = e;
  m->input_fn = input_fn;
  m->input_user = input_user;
  m->steps = steps;
  m->every_n = every_n;
  m->kind = -1;
  loom_hook *h = loom_hook_new(&inmem_ops, m, what);
  if (!h) {
    inmem_destroy(m);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  return h;
}

loom_hook *loom_in_memory_evaluator_hook(loom_estimator *e, loom_input_fn input_fn, void *input_user, int64_t steps,
                                         const char *name, int64_t every_n_iter, loom_status *st) {
  return loom__inmem_new(e, input_fn, input_user, steps, name, every_n_iter, "InMemoryEvaluatorHook", st);
}

loom_hook *loom_in_memory_evaluator_hook_tf(loom_estimator *e, loom_input_fn input_fn, void *input_user,
                                            int64_t steps, const char *name, int64_t every_n_iter, loom_status *st) {
  loom_hook *h = loom__inmem_new(e, input_fn, input_user, steps, name, every_n_iter, "InMemoryEvaluatorHook", st);
  if (h) ((inmem *)loom_hook_self(h))->tf_schedule = 1;
  return h;
}

const loom_eval_result *loom_in_memory_evaluator_last(const loom_hook *h) {
  const inmem *m = h ? loom_hook_self(h) : NULL;
  return (m && m->nhist) ? m->hist[m->nhist - 1] : NULL;
}
