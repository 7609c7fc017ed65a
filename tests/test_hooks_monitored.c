/* Hooks and the monitored session: call order, merged fetches/feeds,
 * stop requests, failures, init_fn, hook run arguments, and the
 * SecondOrStepTimer (estimator/hooks/hooks.c). */
#include "hooks_util.h"

/* ====================================================================== *
 * Monitored session
 * ====================================================================== */
Test(monitored, call_order_across_hooks_and_variables_initialised) {
  g_log[0] = 0;
  model m = model_new(3.0f);
  rec ra = rec_make("A"), rb = rec_make("B");
  loom_hook *h[2] = {loom_hook_new(&rec_ops, &ra, "A"), loom_hook_new(&rec_ops, &rb, "B")};
  cr_assert_str_eq(loom_hook_name(h[0]), "A");
  cr_assert_eq(loom_hook_self(h[1]), &rb);
  loom_monitored_session *ms = ms_new(&m, 2, h);
  cr_assert_str_eq(g_log, "A.begin B.begin A.acs B.acs");
  /* default init ran before after_create_session */
  cr_assert_eq(ra.acs_x, 3.0f);
  cr_assert_eq(ra.acs_step, 0);
  cr_assert_eq(ra.acs_session, loom_monitored_session_session(ms));
  cr_assert_eq(train_until_stop(ms, &m, 2), 2);
  cr_assert_eq(ra.ctx_session, loom_monitored_session_session(ms));
  cr_assert_eq(ra.norig, 1);
  cr_assert_eq(ra.orig0.node, m.loss.node);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 2);
  cr_assert_eq(loom_monitored_session_should_stop(ms), 0);
  cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
  cr_assert_str_eq(g_log, "A.begin B.begin A.acs B.acs A.br B.br A.ar B.ar A.br B.br A.ar B.ar A.end B.end");
  rec_destroyed = 0;
  loom_hook_free(h[0]);
  loom_hook_free(h[1]);
  loom_hook_free(NULL);
  cr_assert_eq(rec_destroyed, 2);
  model_free(&m);
}

Test(monitored, extra_fetches_merged_and_delivered_to_each_hook) {
  g_log[0] = 0;
  const float x0 = 2.0f;
  model m = model_new(x0);
  rec ra = rec_make("A"), rb = rec_make("B"), rc = rec_make("C");
  ra.nfetch = 1;
  ra.fetch[0] = m.loss;
  rb.nfetch = 2;
  rb.fetch[0] = m.gso;
  rb.fetch[1] = m.xo;
  /* C fetches nothing */
  loom_hook *h[3] = {loom_hook_new(&rec_ops, &ra, "A"), loom_hook_new(&rec_ops, &rc, "C"),
                     loom_hook_new(&rec_ops, &rb, "B")};
  loom_monitored_session *ms = ms_new(&m, 3, h);
  loom_status *st = loom_status_new();
  loom_tensor *loss = NULL;
  for (int k = 0; k < 4; k++) {
    cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK, "%s", loom_status_message(st));
    float xk = x_after(x0, k), xk1 = x_after(x0, k + 1);
    /* the caller's loss and A's loss are the same value: x_k^2 */
    cr_assert_float_eq(scalar_f32(loss), xk * xk, 1e-6f, "step %d loss %g want %g", k, scalar_f32(loss), xk * xk);
    cr_assert_eq(ra.results[k][0], scalar_f32(loss));
    /* B: global_step and x after the step (the variables' values at the end of the run) */
    cr_assert_eq(rb.results[k][0], (float)(k + 1), "gs %g", rb.results[k][0]);
    cr_assert_float_eq(rb.results[k][1], xk1, 1e-6f);
  }
  cr_assert_eq(rc.nres, 4);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_tensor_free(loss);
  loom_status_free(st);
  for (int i = 0; i < 3; i++) loom_hook_free(h[i]);
  model_free(&m);
}

/* A hook that fetches the loss only on every other step (two plans). */
static loom_code alt_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  rec *r = self;
  (void)ctx;
  (void)st;
  r->nbr++;
  if (r->nbr % 2) {
    a->nfetches = r->nfetch;
    a->fetches = r->fetch;
  }
  return LOOM_OK;
}
static loom_code alt_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  rec *r = self;
  (void)ctx;
  (void)st;
  if (r->nbr % 2) r->results[0][0] = scalar_f32(res[0]);
  return LOOM_OK;
}

Test(monitored, steady_state_steps_do_not_allocate) {
  tu_alloc_count_begin();
  g_log[0] = 0;
  model m = model_new(1.5f);
  rec ra = rec_make("A"), rb = rec_make("B");
  ra.nfetch = 2;
  ra.fetch[0] = m.gso;
  ra.fetch[1] = m.loss;
  rb.nfetch = 1;
  rb.fetch[0] = m.loss;
  static const loom_hook_ops alt_ops = {NULL, NULL, alt_before, alt_after, NULL, NULL};
  static const loom_hook_ops fetch_ops = {NULL, NULL, rec_before, rec_after, NULL, NULL};
  loom_hook *h[2] = {loom_hook_new(&fetch_ops, &ra, "A"), loom_hook_new(&alt_ops, &rb, "B")};
  loom_monitored_session *ms = ms_new(&m, 2, h);
  loom_status *st = loom_status_new();
  loom_tensor *loss = NULL;
  for (int k = 0; k < 3; k++) cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK, "%s", loom_status_message(st));
  g_log[0] = 0;
  long before = tu_alloc_count();
  for (int k = 0; k < 6; k++) {
    ra.nres = 0;
    g_log[0] = 0;
    cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK);
  }
  long after = tu_alloc_count();
  cr_assert_eq(after - before, 0, "steady-state monitored steps allocated %ld times", after - before);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 9);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_tensor_free(loss);
  loom_status_free(st);
  loom_hook_free(h[0]);
  loom_hook_free(h[1]);
  model_free(&m);
  tu_alloc_count_end();
}

Test(monitored, standard_training_hooks_do_not_allocate_per_step) {
  /* the estimator's per-step set: NaN guard, logging (at_end keeps the last
   * values every step), stop-at-step */
  tu_alloc_count_begin();
  model m = model_new(1.5f);
  loom_status *st = loom_status_new();
  const char *tags[2] = {"loss", "step"};
  loom_output ts[2] = {m.loss, m.gso};
  loom_hook *h[3] = {loom_nan_tensor_hook(m.loss, 1, st), loom_logging_tensor_hook(2, tags, ts, 1000, 0, 1, st),
                     loom_stop_at_step_hook(0, 1000, st)};
  cr_assert(h[0] && h[1] && h[2], "%s", loom_status_message(st));
  loom_monitored_session *ms = ms_new(&m, 3, h);
  loom_tensor *loss = NULL;
  for (int k = 0; k < 3; k++) cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK, "%s", loom_status_message(st));
  long before = tu_alloc_count();
  for (int k = 0; k < 6; k++) cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK);
  long after = tu_alloc_count();
  cr_assert_eq(after - before, 0, "steady-state steps with the standard hooks allocated %ld times", after - before);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_tensor_free(loss);
  for (int i = 0; i < 3; i++) loom_hook_free(h[i]);
  loom_status_free(st);
  model_free(&m);
  tu_alloc_count_end();
}

Test(monitored, request_stop_takes_effect_after_the_current_step) {
  g_log[0] = 0;
  model m = model_new(1.0f);
  rec ra = rec_make("A"), rb = rec_make("B");
  ra.stop_in_after_run_at = 3;
  loom_hook *h[2] = {loom_hook_new(&rec_ops, &ra, "A"), loom_hook_new(&rec_ops, &rb, "B")};
  loom_monitored_session *ms = ms_new(&m, 2, h);
  cr_assert_eq(train_until_stop(ms, &m, 100), 3);
  /* B's after_run still ran for the stopping step */
  cr_assert_eq(rb.nar, 3);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 3);
  cr_assert(loom_monitored_session_should_stop(ms));
  loom_status *st = loom_status_new();
  loom_tensor *loss = NULL;
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_FAILED_PRECONDITION);
  cr_assert(strstr(loom_status_message(st), "should_stop"), "%s", loom_status_message(st));
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 3);
  /* a normal stop still ends the hooks */
  g_log[0] = 0;
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_str_eq(g_log, "A.end B.end");
  loom_hook_free(h[0]);
  loom_hook_free(h[1]);
  model_free(&m);
  loom_status_free(st);
}

Test(monitored, stop_requested_in_before_run_still_runs_the_step) {
  g_log[0] = 0;
  model m = model_new(1.0f);
  rec ra = rec_make("A");
  ra.stop_in_before_run_at = 2;
  loom_hook *h = loom_hook_new(&rec_ops, &ra, "A");
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 100), 2);
  cr_assert_eq(ra.nar, 2);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 2);
  cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
  loom_hook_free(h);
  model_free(&m);
}

Test(monitored, external_request_stop_and_no_hooks) {
  model m = model_new(1.0f);
  loom_monitored_session *ms = ms_new(&m, 0, NULL);
  cr_assert_eq(train_until_stop(ms, &m, 4), 4);
  loom_monitored_session_request_stop(ms);
  cr_assert(loom_monitored_session_should_stop(ms));
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 4);
  cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
  cr_assert_eq(loom_monitored_session_close(NULL, NULL), LOOM_OK);
  model_free(&m);
}

Test(monitored, failing_after_run_ends_the_run_without_end) {
  g_log[0] = 0;
  model m = model_new(1.0f);
  rec ra = rec_make("A"), rb = rec_make("B");
  ra.fail_after_run_at = 2;
  ra.fail_code = LOOM_INVALID_ARGUMENT;
  loom_hook *h[2] = {loom_hook_new(&rec_ops, &ra, "A"), loom_hook_new(&rec_ops, &rb, "B")};
  loom_monitored_session *ms = ms_new(&m, 2, h);
  loom_status *st = loom_status_new();
  loom_tensor *loss = NULL;
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK);
  g_log[0] = 0;
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_INVALID_ARGUMENT);
  cr_assert_str_eq(loom_status_message(st), "A: after_run failed");
  /* the failure stops at the failing hook */
  cr_assert_str_eq(g_log, "A.br B.br A.ar");
  cr_assert(loom_monitored_session_should_stop(ms));
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_FAILED_PRECONDITION);
  g_log[0] = 0;
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_str_eq(g_log, "", "end ran after a failure: %s", g_log);
  loom_tensor_free(loss);
  loom_status_free(st);
  loom_hook_free(h[0]);
  loom_hook_free(h[1]);
  model_free(&m);
}

Test(monitored, failing_before_run_skips_the_step) {
  g_log[0] = 0;
  model m = model_new(1.0f);
  rec ra = rec_make("A"), rb = rec_make("B");
  rb.fail_before_run_at = 1;
  rb.fail_code = LOOM_RESOURCE_EXHAUSTED;
  loom_hook *h[2] = {loom_hook_new(&rec_ops, &ra, "A"), loom_hook_new(&rec_ops, &rb, "B")};
  loom_monitored_session *ms = ms_new(&m, 2, h);
  loom_status *st = loom_status_new();
  loom_tensor *loss = NULL;
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_RESOURCE_EXHAUSTED);
  cr_assert_str_eq(loom_status_message(st), "B: before_run failed");
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 0);
  cr_assert_eq(ra.nar, 0);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert(!strstr(g_log, "end"), "%s", g_log);
  loom_tensor_free(loss);
  loom_status_free(st);
  loom_hook_free(h[0]);
  loom_hook_free(h[1]);
  model_free(&m);
}

Test(monitored, out_of_range_is_a_normal_end) {
  g_log[0] = 0;
  model m = model_new(1.0f);
  rec ra = rec_make("A");
  ra.fail_before_run_at = 3;
  ra.fail_code = LOOM_OUT_OF_RANGE;
  loom_hook *h = loom_hook_new(&rec_ops, &ra, "A");
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  loom_status *st = loom_status_new();
  loom_tensor *loss = NULL;
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK);
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK);
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OUT_OF_RANGE);
  cr_assert(loom_monitored_session_should_stop(ms));
  g_log[0] = 0;
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_str_eq(g_log, "A.end");
  loom_tensor_free(loss);
  loom_status_free(st);
  loom_hook_free(h);
  model_free(&m);
}

Test(monitored, session_run_failure_and_end_failure) {
  g_log[0] = 0;
  model m = model_new(1.0f);
  int64_t d1 = 1;
  loom_output ph = loom_placeholder(m.g, LOOM_F32, 1, &d1, "ph");
  rec ra = rec_make("A");
  loom_hook *h = loom_hook_new(&rec_ops, &ra, "A");
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  loom_status *st = loom_status_new();
  loom_tensor *out = NULL;
  /* fetching an unfed placeholder fails the run: no after_run, no end */
  cr_assert_neq(loom_monitored_session_run(ms, NULL, NULL, 0, &ph, &out, 1, NULL, 0, st), LOOM_OK);
  cr_assert(strstr(loom_status_message(st), "ph"), "%s", loom_status_message(st));
  cr_assert_eq(ra.nar, 0);
  cr_assert(loom_monitored_session_should_stop(ms));
  g_log[0] = 0;
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_str_eq(g_log, "");
  loom_tensor_free(out);
  /* end failing: close returns it, later hooks' end not called */
  rec rb = rec_make("B"), rc = rec_make("C");
  rb.fail_end = 1;
  loom_hook *h2[2] = {loom_hook_new(&rec_ops, &rb, "B"), loom_hook_new(&rec_ops, &rc, "C")};
  ms = ms_new(&m, 2, h2);
  cr_assert_eq(train_until_stop(ms, &m, 1), 1);
  g_log[0] = 0;
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_DATA_LOSS);
  cr_assert_str_eq(loom_status_message(st), "B: end failed");
  cr_assert_str_eq(g_log, "B.end");
  loom_hook_free(h);
  loom_hook_free(h2[0]);
  loom_hook_free(h2[1]);
  loom_status_free(st);
  model_free(&m);
}

Test(monitored, failures_during_creation) {
  g_log[0] = 0;
  model m = model_new(1.0f);
  rec ra = rec_make("A"), rb = rec_make("B");
  rb.fail_begin = 1;
  loom_hook *h[2] = {loom_hook_new(&rec_ops, &ra, "A"), loom_hook_new(&rec_ops, &rb, "B")};
  loom_status *st = loom_status_new();
  cr_assert_null(loom_monitored_session_new(m.g, NULL, NULL, NULL, 2, h, st));
  cr_assert_eq(loom_status_code(st), LOOM_FAILED_PRECONDITION);
  cr_assert_str_eq(loom_status_message(st), "B: begin failed");
  cr_assert_str_eq(g_log, "A.begin B.begin");
  rb.fail_begin = 0;
  ra.fail_acs = 1;
  g_log[0] = 0;
  cr_assert_null(loom_monitored_session_new(m.g, NULL, NULL, NULL, 2, h, st));
  cr_assert_eq(loom_status_code(st), LOOM_ABORTED);
  cr_assert_str_eq(loom_status_message(st), "A: after_create_session failed");
  cr_assert_str_eq(g_log, "A.begin B.begin A.acs");
  /* invalid arguments */
  cr_assert_null(loom_monitored_session_new(NULL, NULL, NULL, NULL, 0, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  loom_hook *hn[2] = {h[0], NULL};
  cr_assert_null(loom_monitored_session_new(m.g, NULL, NULL, NULL, 2, hn, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "hook 1 is NULL"), "%s", loom_status_message(st));
  cr_assert_null(loom_monitored_session_new(m.g, NULL, NULL, NULL, -1, NULL, st));
  cr_assert_eq(loom_monitored_session_run(NULL, NULL, NULL, 0, NULL, NULL, 0, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert(loom_monitored_session_should_stop(NULL));
  cr_assert_null(loom_monitored_session_session(NULL));
  loom_hook_free(h[0]);
  loom_hook_free(h[1]);
  loom_status_free(st);
  model_free(&m);
}

static int init_calls;
static loom_code my_init(loom_session *s, void *user, loom_status *st) {
  init_calls++;
  model *m = user;
  cr_assert_eq(loom_session_variable_initialized(s, "x"), 0);
  loom_node *t = loom_variables_initializer(m->g, 1, &m->gs, "init_gs");
  loom_code rc = loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &t, 1, st);
  if (rc) return rc;
  loom_tensor *v = loom_tensor_scalar_f32(7.0f);
  rc = loom_session_assign_variable(s, "x", v, st);
  loom_tensor_free(v);
  return rc;
}
static loom_code bad_init(loom_session *s, void *user, loom_status *st) {
  (void)s;
  (void)user;
  return loom_status_set(st, LOOM_NOT_FOUND, "no checkpoint to restore");
}

Test(monitored, custom_init_fn) {
  g_log[0] = 0;
  model m = model_new(1.0f);
  rec ra = rec_make("A");
  loom_hook *h = loom_hook_new(&rec_ops, &ra, "A");
  loom_status *st = loom_status_new();
  loom_monitored_session *ms = loom_monitored_session_new(m.g, NULL, my_init, &m, 1, &h, st);
  cr_assert(ms, "%s", loom_status_message(st));
  cr_assert_eq(init_calls, 1);
  cr_assert_eq(ra.acs_x, 7.0f);
  loom_tensor *loss = NULL;
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK);
  cr_assert_eq(scalar_f32(loss), 49.0f);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  g_log[0] = 0;
  cr_assert_null(loom_monitored_session_new(m.g, NULL, bad_init, NULL, 1, &h, st));
  cr_assert_eq(loom_status_code(st), LOOM_NOT_FOUND);
  cr_assert_str_eq(loom_status_message(st), "no checkpoint to restore");
  cr_assert_str_eq(g_log, "A.begin"); /* no after_create_session */
  loom_tensor_free(loss);
  loom_status_free(st);
  loom_hook_free(h);
  model_free(&m);
}

Test(monitored, graph_without_variables_and_hook_targets) {
  loom_graph *g = loom_graph_new();
  loom_output c = loom_const_f32(g, 2.5f, "c");
  loom_monitored_session *ms = loom_monitored_session_new(g, NULL, NULL, NULL, 0, NULL, NULL);
  cr_assert(ms);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_monitored_session_run(ms, NULL, NULL, 0, &c, &out, 1, NULL, 0, NULL), LOOM_OK);
  cr_assert_eq(scalar_f32(out), 2.5f);
  loom_tensor_free(out);
  cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
  loom_graph_free(g);

  /* a hook adds the train op as a target; the caller runs nothing */
  g_log[0] = 0;
  model m = model_new(1.0f);
  rec ra = rec_make("A");
  ra.ntarget = 1;
  ra.target[0] = m.train;
  ra.nfetch = 1;
  ra.fetch[0] = m.gso;
  loom_hook *h = loom_hook_new(&rec_ops, &ra, "A");
  ms = ms_new(&m, 1, &h);
  for (int k = 0; k < 3; k++)
    cr_assert_eq(loom_monitored_session_run(ms, NULL, NULL, 0, NULL, NULL, 0, NULL, 0, NULL), LOOM_OK);
  cr_assert_eq(ra.results[2][0], 3.0f);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 3);
  cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
  loom_hook_free(h);
  model_free(&m);
}

Test(monitored, hook_feeds_and_feed_conflicts) {
  g_log[0] = 0;
  model m = model_new(1.0f);
  loom_output ph = loom_placeholder(m.g, LOOM_F32, 0, NULL, "ph");
  loom_output y = loom_mul(m.g, ph, loom_const_f32(m.g, 3.0f, NULL), "y");
  rec ra = rec_make("A");
  ra.nfeed = 1;
  ra.feed[0] = ph;
  ra.feed_val[0] = loom_tensor_scalar_f32(4.0f);
  ra.nfetch = 1;
  ra.fetch[0] = y;
  loom_hook *h = loom_hook_new(&rec_ops, &ra, "A");
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  loom_status *st = loom_status_new();
  /* the caller fetches y too: the hook's feed serves both */
  loom_tensor *out = NULL;
  cr_assert_eq(loom_monitored_session_run(ms, NULL, NULL, 0, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s",
               loom_status_message(st));
  cr_assert_eq(scalar_f32(out), 12.0f);
  cr_assert_eq(ra.results[0][0], 12.0f);
  /* the same placeholder fed by the caller and the hook */
  loom_tensor *v = loom_tensor_scalar_f32(1.0f);
  cr_assert_eq(loom_monitored_session_run(ms, &ph, &v, 1, &y, &out, 1, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "Same tensor (ph:0) is fed by a SessionRunHook and user."), "%s",
            loom_status_message(st));
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  /* two hooks feeding the same tensor */
  rec rb = ra;
  rb.name = "B";
  loom_hook *h2[2] = {h, loom_hook_new(&rec_ops, &rb, "B")};
  ms = ms_new(&m, 2, h2);
  cr_assert_eq(loom_monitored_session_run(ms, NULL, NULL, 0, NULL, NULL, 0, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "is fed by two hooks."), "%s", loom_status_message(st));
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_tensor_free(v);
  loom_tensor_free(out);
  loom_tensor_free(ra.feed_val[0]);
  loom_hook_free(h);
  loom_hook_free(h2[1]);
  loom_status_free(st);
  model_free(&m);
}

static loom_code badargs_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  (void)self;
  (void)ctx;
  (void)st;
  a->nfetches = 2; /* no array */
  return LOOM_OK;
}

Test(monitored, invalid_hook_run_args) {
  model m = model_new(1.0f);
  static const loom_hook_ops ops = {.before_run = badargs_before};
  loom_hook *h = loom_hook_new(&ops, NULL, "bad");
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_monitored_session_run(ms, NULL, NULL, 0, NULL, NULL, 0, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "hook bad"), "%s", loom_status_message(st));
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_hook *h0 = loom_hook_new(NULL, NULL, NULL); /* all no-ops */
  ms = ms_new(&m, 1, &h0);
  cr_assert_eq(train_until_stop(ms, &m, 2), 2);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_hook_free(h0);
  loom_hook_free(h);
  loom_status_free(st);
  model_free(&m);
}

/* ====================================================================== *
 * SecondOrStepTimer
 * ====================================================================== */
Test(step_timer, every_steps) {
  loom_step_timer t;
  cr_assert_eq(loom_step_timer_init(&t, 0, 10, NULL), LOOM_OK);
  cr_assert_eq(t.last_step, -1);
  /* always triggers the first time */
  cr_assert(loom_step_timer_should_trigger(&t, 3));
  double es = -1;
  int64_t en = -1;
  loom_step_timer_update(&t, 3, &es, &en);
  cr_assert_eq(es, 0);
  cr_assert_eq(en, 0);
  /* never twice for one step */
  cr_assert_not(loom_step_timer_should_trigger(&t, 3));
  cr_assert_not(loom_step_timer_should_trigger(&t, 12));
  cr_assert(loom_step_timer_should_trigger(&t, 13));
  cr_assert(loom_step_timer_should_trigger(&t, 40));
  loom_step_timer_update(&t, 14, &es, &en);
  cr_assert_eq(en, 11);
  cr_assert(es >= 0);
  cr_assert_not(loom_step_timer_should_trigger(&t, 14));
  cr_assert_not(loom_step_timer_should_trigger(&t, 23));
  cr_assert(loom_step_timer_should_trigger(&t, 24));
}

Test(step_timer, every_secs) {
  loom_step_timer t;
  cr_assert_eq(loom_step_timer_init(&t, 0.05, 0, NULL), LOOM_OK);
  cr_assert(loom_step_timer_should_trigger(&t, 0));
  loom_step_timer_update(&t, 0, NULL, NULL);
  cr_assert_not(loom_step_timer_should_trigger(&t, 0));
  /* the step changes but the time has not passed (a 1-hour timer) */
  loom_step_timer t2;
  cr_assert_eq(loom_step_timer_init(&t2, 3600, 0, NULL), LOOM_OK);
  loom_step_timer_update(&t2, 5, NULL, NULL);
  cr_assert_not(loom_step_timer_should_trigger(&t2, 6));
  cr_assert_not(loom_step_timer_should_trigger(&t2, 1000000));
  usleep(60000);
  cr_assert(loom_step_timer_should_trigger(&t, 1));
  cr_assert_not(loom_step_timer_should_trigger(&t, 0)); /* same step: never */
  double es;
  int64_t en;
  loom_step_timer_update(&t, 1, &es, &en);
  cr_assert(es >= 0.05, "elapsed %g", es);
  cr_assert_eq(en, 1);
}

Test(step_timer, invalid) {
  loom_step_timer t;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_step_timer_init(&t, 0, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "exactly one of every_secs"), "%s", loom_status_message(st));
  cr_assert_eq(loom_step_timer_init(&t, 1, 1, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_step_timer_init(&t, -1, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_step_timer_init(&t, 0, -5, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_step_timer_init(&t, NAN, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_step_timer_init(NULL, 0, 1, st), LOOM_INVALID_ARGUMENT);
  loom_status_free(st);
}
