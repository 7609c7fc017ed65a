/* Hooks and the monitored session: call order, merged fetches/feeds,
 * stop requests, failures, the SecondOrStepTimer and the standard hooks
 * (StopAtStep, NanTensor, LoggingTensor, CheckpointSaver + listeners,
 * FinalOps, FeedFn, GlobalStepWaiter, StepCounter, SummarySaver, Profiler). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "test_util.h"

/* ---------------------------------------------------------------- helpers */
/* loss = x^2, SGD lr 0.1: x_{k+1} = 0.8 x_k; global_step += 1 per step. */
typedef struct model {
  loom_graph *g;
  loom_variable *gs, *x;
  loom_output loss, xo, gso;
  loom_node *train;
  loom_optimizer *opt;
} model;

static model model_new(float x0) {
  model m;
  memset(&m, 0, sizeof m);
  m.g = loom_graph_new();
  m.gs = loom_get_or_create_global_step(m.g);
  loom_initializer init = loom_init_constant(x0);
  m.x = loom_get_variable(m.g, "x", LOOM_F32, 0, NULL, &init, 1);
  m.xo = loom_variable_output(m.x);
  m.gso = loom_variable_output(m.gs);
  m.loss = loom_square(m.g, m.xo, "sq");
  m.opt = loom_optimizer_sgd(loom_const_f32(m.g, 0.1f, "lr"));
  m.train = loom_optimizer_minimize(m.opt, m.g, m.loss, 0, NULL, m.gs, "train");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(m.g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
  return m;
}
static void model_free(model *m) {
  loom_optimizer_free(m->opt);
  loom_graph_free(m->g);
}
/* x after k steps from x0 (float arithmetic as the kernel does it). */
static float x_after(float x0, int k) {
  float x = x0;
  for (int i = 0; i < k; i++) x = x - 0.1f * (2.0f * x);
  return x;
}
static int64_t scalar_i64(const loom_tensor *t) {
  cr_assert(t);
  if (loom_tensor_dtype(t) == LOOM_I32) return *(const int32_t *)loom_tensor_data_const(t);
  cr_assert_eq(loom_tensor_dtype(t), LOOM_I64);
  return *(const int64_t *)loom_tensor_data_const(t);
}
static float scalar_f32(const loom_tensor *t) {
  cr_assert(t);
  cr_assert_eq(loom_tensor_dtype(t), LOOM_F32);
  return *(const float *)loom_tensor_data_const(t);
}
static int64_t read_step(loom_session *s) {
  loom_tensor *t = NULL;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_read_variable(s, "global_step", &t, st), LOOM_OK, "%s", loom_status_message(st));
  int64_t v = scalar_i64(t);
  loom_tensor_free(t);
  loom_status_free(st);
  return v;
}
/* One training step through the monitored session, fetching the loss. */
static loom_code train_step(loom_monitored_session *ms, model *m, loom_tensor **loss, loom_status *st) {
  return loom_monitored_session_run(ms, NULL, NULL, 0, &m->loss, loss, 1, &m->train, 1, st);
}
static loom_monitored_session *ms_new(model *m, int nhooks, loom_hook *const *hooks) {
  loom_status *st = loom_status_new();
  loom_monitored_session *ms = loom_monitored_session_new(m->g, NULL, NULL, NULL, nhooks, hooks, st);
  cr_assert(ms, "monitored session: %s", loom_status_message(st));
  loom_status_free(st);
  return ms;
}
/* Runs train steps until should_stop (at most cap); returns the count. */
static int train_until_stop(loom_monitored_session *ms, model *m, int cap) {
  loom_status *st = loom_status_new();
  loom_tensor *loss = NULL;
  int n = 0;
  while (!loom_monitored_session_should_stop(ms) && n < cap) {
    cr_assert_eq(train_step(ms, m, &loss, st), LOOM_OK, "step %d: %s", n, loom_status_message(st));
    n++;
  }
  loom_tensor_free(loss);
  loom_status_free(st);
  return n;
}
static int count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  cr_assert(d, "opendir %s", dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
  closedir(d);
  return n;
}

/* ---- a recording hook ---- */
typedef struct rec {
  char *log;  /* shared across hooks: "A.begin B.begin ..." */
  size_t cap;
  const char *name;
  int nfetch;            /* fetches to add in before_run */
  loom_output fetch[4];
  int ntarget;
  loom_node *target[2];
  int nfeed;
  loom_output feed[2];
  loom_tensor *feed_val[2];
  float results[16][4];  /* per after_run: the fetched values (as float) */
  int nres;
  int stop_in_after_run_at;  /* after_run call number (1-based) that requests stop; 0 never */
  int stop_in_before_run_at;
  int fail_after_run_at;     /* after_run call number that fails */
  int fail_before_run_at;
  loom_code fail_code;
  int fail_begin, fail_acs, fail_end;
  int nbr, nar;
  float acs_x;               /* x read in after_create_session */
  int64_t acs_step;
  loom_session *acs_session, *ctx_session;
  int norig;                 /* original fetches seen in before_run */
  loom_output orig0;
} rec;

static void rec_log(rec *r, const char *what) {
  size_t n = strlen(r->log);
  snprintf(r->log + n, r->cap - n, "%s%s.%s", n ? " " : "", r->name, what);
}
static loom_code rec_begin(void *self, loom_graph *g, loom_status *st) {
  rec *r = self;
  (void)g;
  rec_log(r, "begin");
  if (r->fail_begin) return loom_status_set(st, LOOM_FAILED_PRECONDITION, "%s: begin failed", r->name);
  return LOOM_OK;
}
static loom_code rec_acs(void *self, loom_session *s, loom_status *st) {
  rec *r = self;
  rec_log(r, "acs");
  r->acs_session = s;
  loom_tensor *t = NULL;
  if (loom_session_read_variable(s, "x", &t, NULL) == LOOM_OK) r->acs_x = scalar_f32(t);
  loom_tensor_free(t);
  t = NULL;
  if (loom_session_read_variable(s, "global_step", &t, NULL) == LOOM_OK) r->acs_step = scalar_i64(t);
  loom_tensor_free(t);
  if (r->fail_acs) return loom_status_set(st, LOOM_ABORTED, "%s: after_create_session failed", r->name);
  return LOOM_OK;
}
static loom_code rec_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  rec *r = self;
  rec_log(r, "br");
  r->nbr++;
  r->ctx_session = loom_hook_context_session(ctx);
  const loom_output *of = NULL;
  r->norig = loom_hook_context_original_fetches(ctx, &of);
  if (r->norig > 0) r->orig0 = of[0];
  cr_assert_eq(a->nfetches, 0);
  cr_assert_eq(a->nfeeds, 0);
  cr_assert_eq(a->ntargets, 0);
  if (r->fail_before_run_at == r->nbr) return loom_status_set(st, r->fail_code, "%s: before_run failed", r->name);
  if (r->stop_in_before_run_at == r->nbr) loom_hook_context_request_stop(ctx);
  a->nfetches = r->nfetch;
  a->fetches = r->fetch;
  a->ntargets = r->ntarget;
  a->targets = r->target;
  a->nfeeds = r->nfeed;
  a->feeds = r->feed;
  a->feed_values = r->feed_val;
  return LOOM_OK;
}
static loom_code rec_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  rec *r = self;
  rec_log(r, "ar");
  r->nar++;
  for (int i = 0; i < r->nfetch && r->nres < 16; i++) {
    const loom_tensor *t = res[i];
    cr_assert(t);
    switch (loom_tensor_dtype(t)) {
    case LOOM_F32: r->results[r->nres][i] = scalar_f32(t); break;
    default: r->results[r->nres][i] = (float)scalar_i64(t); break;
    }
  }
  r->nres++;
  if (r->fail_after_run_at == r->nar) return loom_status_set(st, r->fail_code, "%s: after_run failed", r->name);
  if (r->stop_in_after_run_at == r->nar) {
    cr_assert_eq(loom_hook_context_stop_requested(ctx), 0);
    loom_hook_context_request_stop(ctx);
    cr_assert_eq(loom_hook_context_stop_requested(ctx), 1);
  }
  return LOOM_OK;
}
static loom_code rec_end(void *self, loom_session *s, loom_status *st) {
  rec *r = self;
  (void)s;
  rec_log(r, "end");
  if (r->fail_end) return loom_status_set(st, LOOM_DATA_LOSS, "%s: end failed", r->name);
  return LOOM_OK;
}
static int rec_destroyed;
static void rec_destroy(void *self) {
  (void)self;
  rec_destroyed++;
}
static const loom_hook_ops rec_ops = {rec_begin, rec_acs, rec_before, rec_after, rec_end, rec_destroy};

static char g_log[4096];
static rec rec_make(const char *name) {
  rec r;
  memset(&r, 0, sizeof r);
  r.log = g_log;
  r.cap = sizeof g_log;
  r.name = name;
  r.fail_code = LOOM_INTERNAL;
  return r;
}

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

/* ====================================================================== *
 * Standard hooks
 * ====================================================================== */
/* ---- captured log lines ---- */
static char g_lines[64][512];
static int g_nlines;
static void capture_log(loom_log_level lvl, const char *msg, void *user) {
  (void)user;
  if (g_nlines < 64) snprintf(g_lines[g_nlines++], 512, "%s%s", lvl >= LOOM_LOG_WARN ? "W:" : "", msg);
}
static void capture_start(void) {
  g_nlines = 0;
  loom_log_set(capture_log, NULL, LOOM_LOG_INFO);
}
static int find_line(const char *substr) {
  for (int i = 0; i < g_nlines; i++)
    if (strstr(g_lines[i], substr)) return i;
  return -1;
}

/* init_fn: the global initializers, then global_step = *(int64_t *)user. */
static loom_code init_at_step(loom_session *s, void *user, loom_status *st) {
  loom_node *t = loom_global_variables_initializer(loom_session_graph(s));
  loom_code rc = loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &t, 1, st);
  if (rc) return rc;
  loom_tensor *v = loom_tensor_scalar_i64(*(const int64_t *)user);
  rc = loom_session_assign_variable(s, "global_step", v, st);
  loom_tensor_free(v);
  return rc;
}
static loom_monitored_session *ms_new_at(model *m, int64_t *step, int nhooks, loom_hook *const *hooks) {
  loom_status *st = loom_status_new();
  loom_monitored_session *ms = loom_monitored_session_new(m->g, NULL, init_at_step, step, nhooks, hooks, st);
  cr_assert(ms, "monitored session: %s", loom_status_message(st));
  loom_status_free(st);
  return ms;
}

Test(stop_at_step, num_steps_counts_from_the_current_step) {
  model m = model_new(1.0f);
  loom_status *st = loom_status_new();
  loom_hook *h = loom_stop_at_step_hook(5, 0, st);
  cr_assert(h, "%s", loom_status_message(st));
  cr_assert_str_eq(loom_hook_name(h), "StopAtStepHook");
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 100), 5);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 5);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  /* the same hook again, starting at step 10: stops at 15 */
  int64_t start = 10;
  ms = ms_new_at(&m, &start, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 100), 5);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 15);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_hook_free(h);
  loom_status_free(st);
  model_free(&m);
}

Test(stop_at_step, last_step_and_already_past_it) {
  model m = model_new(1.0f);
  loom_hook *h = loom_stop_at_step_hook(0, 7, NULL);
  cr_assert(h);
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 100), 7);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 7);
  cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
  int64_t start = 4;
  ms = ms_new_at(&m, &start, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 100), 3);
  cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
  /* already at (or past) last_step: no step at all, but end() still runs */
  g_log[0] = 0;
  rec ra = rec_make("A");
  loom_hook *hs[2] = {h, loom_hook_new(&rec_ops, &ra, "A")};
  for (int64_t s0 = 7; s0 <= 9; s0 += 2) {
    g_log[0] = 0;
    ms = ms_new_at(&m, &s0, 2, hs);
    cr_assert(loom_monitored_session_should_stop(ms));
    cr_assert_eq(train_until_stop(ms, &m, 100), 0);
    cr_assert_eq(read_step(loom_monitored_session_session(ms)), s0);
    cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
    cr_assert_str_eq(g_log, "A.begin A.acs A.end");
  }
  loom_hook_free(hs[1]);
  loom_hook_free(h);
  model_free(&m);
}

Test(stop_at_step, invalid_arguments_and_no_global_step) {
  loom_status *st = loom_status_new();
  cr_assert_null(loom_stop_at_step_hook(0, 0, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "StopAtStepHook: exactly one of num_steps (0) and last_step (0)"), "%s",
            loom_status_message(st));
  cr_assert_null(loom_stop_at_step_hook(3, 4, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert_null(loom_stop_at_step_hook(-1, 0, st));
  cr_assert_null(loom_stop_at_step_hook(0, -4, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  /* a graph without a global step */
  loom_graph *g = loom_graph_new();
  loom_const_f32(g, 1, "c");
  loom_hook *h = loom_stop_at_step_hook(1, 0, st);
  cr_assert_null(loom_monitored_session_new(g, NULL, NULL, NULL, 1, &h, st));
  cr_assert_eq(loom_status_code(st), LOOM_FAILED_PRECONDITION);
  cr_assert_str_eq(loom_status_message(st), "Global step should be created to use StopAtStepHook.");
  loom_hook_free(h);
  loom_graph_free(g);
  loom_status_free(st);
}

/* loss = p (a fed scalar) with the train op as the caller's target */
static loom_code nan_step(loom_monitored_session *ms, model *m, loom_output p, float v, loom_status *st) {
  loom_tensor *pv = loom_tensor_scalar_f32(v);
  loom_code rc = loom_monitored_session_run(ms, &p, &pv, 1, NULL, NULL, 0, &m->train, 1, st);
  loom_tensor_free(pv);
  return rc;
}

Test(nan_tensor, fails_with_the_message_or_only_stops) {
  model m = model_new(1.0f);
  loom_output p = loom_placeholder(m.g, LOOM_F32, 0, NULL, "p");
  loom_output loss = loom_identity(m.g, p, "fed_loss");
  loom_status *st = loom_status_new();
  g_log[0] = 0;
  rec ra = rec_make("A");
  loom_hook *hs[2] = {loom_nan_tensor_hook(loss, 1, st), loom_hook_new(&rec_ops, &ra, "A")};
  cr_assert(hs[0], "%s", loom_status_message(st));
  loom_monitored_session *ms = ms_new(&m, 2, hs);
  cr_assert_eq(nan_step(ms, &m, p, 1.5f, st), LOOM_OK);
  cr_assert_eq(nan_step(ms, &m, p, INFINITY, st), LOOM_OK); /* only NaN counts */
  cr_assert_eq(nan_step(ms, &m, p, NAN, st), LOOM_INVALID_ARGUMENT);
  cr_assert_str_eq(loom_status_message(st), "NaN loss during training.");
  cr_assert(loom_monitored_session_should_stop(ms));
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 3); /* the NaN step itself ran */
  g_log[0] = 0;
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_str_eq(g_log, ""); /* failed: no end() */
  loom_hook_free(hs[0]);

  /* fail_on_nan_loss = 0: a warning and a stop after the step */
  capture_start();
  hs[0] = loom_nan_tensor_hook(loss, 0, st);
  ms = ms_new(&m, 2, hs);
  cr_assert_eq(nan_step(ms, &m, p, 2.0f, st), LOOM_OK);
  cr_assert_not(loom_monitored_session_should_stop(ms));
  cr_assert_eq(nan_step(ms, &m, p, NAN, st), LOOM_OK);
  cr_assert(loom_monitored_session_should_stop(ms));
  cr_assert_geq(find_line("W:Model diverged with loss = NaN."), 0);
  g_log[0] = 0;
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_str_eq(g_log, "A.end");
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);

  cr_assert_null(loom_nan_tensor_hook((loom_output){NULL, 0}, 1, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "NanTensorHook: loss"), "%s", loom_status_message(st));
  loom_hook_free(hs[0]);
  loom_hook_free(hs[1]);
  loom_status_free(st);
  model_free(&m);
}

/* Checks a "... (x.xxx sec)" suffix and returns the line without it. */
static void strip_secs(char *line) {
  char *p = strstr(line, " (");
  cr_assert(p, "no seconds in '%s'", line);
  double secs = -1;
  char tail[8] = "";
  cr_assert_eq(sscanf(p, " (%lf sec%7s", &secs, tail), 2, "bad suffix '%s'", p);
  cr_assert_str_eq(tail, ")");
  cr_assert(secs >= 0);
  *p = 0;
}

Test(logging_tensor, every_n_iter_values_and_at_end) {
  const float x0 = 3.0f;
  model m = model_new(x0);
  loom_status *st = loom_status_new();
  const char *tags[2] = {"loss", "step"};
  loom_output ts[2] = {m.loss, m.gso};
  loom_hook *h = loom_logging_tensor_hook(2, tags, ts, 2, 0, 1, st);
  cr_assert(h, "%s", loom_status_message(st));
  capture_start();
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 5), 5);
  loom_session_stats stats;
  loom_session_get_stats(loom_monitored_session_session(ms), &stats);
  /* initializers, and one plan for every step: with at_end the hook fetches
   * loss + step each step (it keeps the last values for end()) */
  cr_assert_eq(stats.plans_compiled, 2);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);
  /* iterations 0, 2, 4 and the end */
  cr_assert_eq(g_nlines, 4, "%d lines", g_nlines);
  char want[256];
  int steps[3] = {0, 2, 4};
  for (int i = 0; i < 3; i++) {
    float xk = x_after(x0, steps[i]);
    snprintf(want, sizeof want, "loss = %.7g, step = %d", (double)(xk * xk), steps[i] + 1);
    if (i) strip_secs(g_lines[i]);
    cr_assert_str_eq(g_lines[i], want);
  }
  /* at_end logs the last step's values (end() cannot re-run tensors that
   * depend on fed inputs): the loss computed in step 5 (x_4^2) and the
   * step after its increment, 5 */
  float x4 = x_after(x0, 4);
  snprintf(want, sizeof want, "loss = %.7g, step = 5", (double)(x4 * x4));
  strip_secs(g_lines[3]);
  cr_assert_str_eq(g_lines[3], want);
  loom_hook_free(h);
  loom_status_free(st);
  model_free(&m);
}

Test(logging_tensor, secs_only_at_end_default_tags_and_formatting) {
  model m = model_new(2.0f);
  int64_t d3 = 3, d20 = 20;
  loom_output v3 = loom_const_data(m.g, LOOM_F32, 1, &d3, (float[3]){1, 2.5f, -3}, "v3");
  int32_t twenty[20];
  for (int i = 0; i < 20; i++) twenty[i] = i;
  loom_output v20 = loom_const_data(m.g, LOOM_I32, 1, &d20, twenty, "v20");
  loom_output ts[3] = {m.gso, v3, v20};
  loom_status *st = loom_status_new();
  /* every hour: only the first iteration logs */
  loom_hook *h = loom_logging_tensor_hook(3, NULL, ts, 0, 3600, 0, st);
  cr_assert(h, "%s", loom_status_message(st));
  capture_start();
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 4), 4);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_eq(g_nlines, 1);
  cr_assert_str_eq(g_lines[0],
                   "global_step = 1, v3 = [1 2.5 -3], v20 = [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 ...]");
  loom_hook_free(h);
  /* only at end */
  h = loom_logging_tensor_hook(1, (const char *[]){"x"}, &m.xo, 0, 0, 1, st);
  cr_assert(h, "%s", loom_status_message(st));
  capture_start();
  ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 3), 3);
  cr_assert_eq(g_nlines, 0);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_eq(g_nlines, 1);
  char want[64];
  snprintf(want, sizeof want, "x = %.7g", (double)x_after(2.0f, 3));
  cr_assert_str_eq(g_lines[0], want);
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);
  loom_hook_free(h);
  /* invalid */
  cr_assert_null(loom_logging_tensor_hook(1, NULL, &m.xo, 0, 0, 0, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "LoggingTensorHook: either at_end and/or exactly one of every_n_iter"),
            "%s", loom_status_message(st));
  cr_assert_null(loom_logging_tensor_hook(1, NULL, &m.xo, 5, 2.0, 0, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert_null(loom_logging_tensor_hook(1, NULL, &m.xo, -1, 0, 1, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert_null(loom_logging_tensor_hook(0, NULL, NULL, 1, 0, 0, st));
  cr_assert(strstr(loom_status_message(st), "LoggingTensorHook: no tensors"), "%s", loom_status_message(st));
  loom_output bad[1] = {{NULL, 0}};
  cr_assert_null(loom_logging_tensor_hook(1, NULL, bad, 1, 0, 0, st));
  cr_assert(strstr(loom_status_message(st), "tensor 0"), "%s", loom_status_message(st));
  loom_status_free(st);
  model_free(&m);
}

Test(logging_tensor, progress_bar_on_a_terminal) {
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  cr_assert(master >= 0);
  cr_assert_eq(grantpt(master), 0);
  cr_assert_eq(unlockpt(master), 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  cr_assert(slave >= 0);
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  cr_assert_eq(dup2(slave, STDOUT_FILENO), STDOUT_FILENO);

  model m = model_new(1.0f);
  loom_hook *hs[2] = {loom_logging_tensor_hook(1, (const char *[]){"loss"}, &m.loss, 5, 0, 0, NULL),
                      loom_stop_at_step_hook(10, 0, NULL)};
  loom_logging_tensor_hook_set_total_steps(hs[0], 10);
  loom_logging_tensor_hook_set_total_steps(hs[1], 10); /* not a logging hook: ignored */
  capture_start();
  loom_monitored_session *ms = ms_new(&m, 2, hs);
  int n = train_until_stop(ms, &m, 100);
  cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  close(slave);
  cr_assert_eq(n, 10);
  /* the bar replaces the log lines */
  cr_assert_eq(g_nlines, 0, "log line: %s", g_nlines ? g_lines[0] : "");
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);
  char out[16384];
  size_t len = 0;
  fcntl(master, F_SETFL, O_NONBLOCK);
  for (;;) {
    ssize_t k = read(master, out + len, sizeof out - 1 - len);
    if (k <= 0) break;
    len += (size_t)k;
  }
  out[len] = 0;
  close(master);
  cr_assert(strchr(out, '\r'), "no carriage return: %s", out);
  cr_assert(strstr(out, "100% [==============================] 10/10"), "%s", out);
  cr_assert(strstr(out, "steps/s"), "%s", out);
  cr_assert(strstr(out, "ETA"), "%s", out);
  cr_assert(strstr(out, "loss = 1"), "%s", out);
  /* one newline, at the very end */
  char *nl = strchr(out, '\n');
  cr_assert(nl && nl[1] == 0, "newline not at the end: %s", out);
  loom_hook_free(hs[0]);
  loom_hook_free(hs[1]);
  model_free(&m);
}

/* ---- checkpoint listener ---- */
typedef struct lrec {
  char log[1024];
  int stop_at; /* after_save at this step returns stop */
} lrec;
static void lrec_add(lrec *r, const char *what, int64_t step) {
  size_t n = strlen(r->log);
  if (step >= 0) snprintf(r->log + n, sizeof r->log - n, "%s%s:%lld", n ? " " : "", what, (long long)step);
  else snprintf(r->log + n, sizeof r->log - n, "%s%s", n ? " " : "", what);
}
static loom_code l_begin(void *self, loom_status *st) {
  (void)st;
  lrec_add(self, "begin", -1);
  return LOOM_OK;
}
static loom_code l_before(void *self, loom_session *s, int64_t step, loom_status *st) {
  (void)st;
  cr_assert_eq(read_step(s), step);
  lrec_add(self, "before", step);
  return LOOM_OK;
}
static loom_code l_after(void *self, loom_session *s, int64_t step, int *stop, loom_status *st) {
  (void)st;
  (void)s;
  lrec *r = self;
  lrec_add(r, "after", step);
  if (r->stop_at == step) *stop = 1;
  return LOOM_OK;
}
static loom_code l_end(void *self, loom_session *s, int64_t step, loom_status *st) {
  (void)st;
  (void)s;
  lrec_add(self, "end", step);
  return LOOM_OK;
}
static const loom_checkpoint_listener lops = {l_begin, l_before, l_after, l_end};

static float ckpt_f32(const char *path, const char *name) {
  loom_tensor *t = NULL;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_checkpoint_read_tensor(path, name, &t, st), LOOM_OK, "%s", loom_status_message(st));
  float v = loom_tensor_dtype(t) == LOOM_F32 ? scalar_f32(t) : (float)scalar_i64(t);
  loom_tensor_free(t);
  loom_status_free(st);
  return v;
}

Test(checkpoint_saver, saves_at_creation_every_n_steps_and_at_end_with_keep_max) {
  const float x0 = 2.0f;
  model m = model_new(x0);
  char root[TU_TMPDIR_CAP];
  tu_tmpdir(root, sizeof root, "loom_hooks");
  char dir[512], p[600];
  snprintf(dir, sizeof dir, "%s/run/ckpt", root); /* created by the hook */
  lrec lr = {{0}, -1};
  const loom_checkpoint_listener *ls[1] = {&lops};
  void *lself[1] = {&lr};
  loom_status *st = loom_status_new();
  loom_event_writer *w = loom_event_writer_new(root, NULL, st);
  cr_assert(w, "%s", loom_status_message(st));
  loom_hook *hs[2] = {loom_stop_at_step_hook(7, 0, st), NULL};
  hs[1] = loom_checkpoint_saver_hook(dir, 0, 3, NULL, 2, w, 1, ls, lself, st);
  cr_assert(hs[1], "%s", loom_status_message(st));
  loom_monitored_session *ms = ms_new(&m, 2, hs);
  snprintf(p, sizeof p, "%s/model.ckpt-0", dir);
  cr_assert(tu_file_exists(p), "no save at creation");
  cr_assert_eq(train_until_stop(ms, &m, 100), 7);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_str_eq(lr.log, "begin before:0 after:0 before:3 after:3 before:6 after:6 before:7 after:7 end:7");
  /* keep_max 2: only 6 and 7 remain */
  cr_assert_eq(count_files(dir, "model.ckpt-"), 2);
  snprintf(p, sizeof p, "%s/model.ckpt-6", dir);
  cr_assert(tu_file_exists(p));
  cr_assert_float_eq(ckpt_f32(p, "x"), x_after(x0, 6), 1e-6f);
  cr_assert_eq(ckpt_f32(p, "global_step"), 6.0f);
  snprintf(p, sizeof p, "%s/model.ckpt-7", dir);
  cr_assert_eq(ckpt_f32(p, "global_step"), 7.0f);
  char latest[600];
  cr_assert_eq(loom_latest_checkpoint(dir, latest, sizeof latest, st), LOOM_OK);
  cr_assert_str_eq(latest, p);
  /* SessionLog CHECKPOINT events at 0, 3, 6, 7 */
  char evpath[600];
  snprintf(evpath, sizeof evpath, "%s", loom_event_writer_path(w));
  loom_event_writer_free(w);
  loom_event_reader *r = loom_event_reader_open(evpath, st);
  cr_assert(r, "%s", loom_status_message(st));
  const loom_event *ev;
  int64_t want[4] = {0, 3, 6, 7};
  int k = 0;
  while (loom_event_reader_next(r, &ev, st) == LOOM_OK) {
    if (ev->file_version) continue;
    cr_assert_eq(ev->session_log_status, LOOM_SESSION_LOG_CHECKPOINT);
    cr_assert(k < 4);
    cr_assert_eq(ev->step, want[k]);
    char wp[600];
    snprintf(wp, sizeof wp, "%s/model.ckpt-%lld", dir, (long long)want[k]);
    cr_assert_str_eq(ev->checkpoint_path, wp);
    k++;
  }
  cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE, "%s", loom_status_message(st));
  cr_assert_eq(k, 4);
  loom_event_reader_free(r);
  loom_hook_free(hs[0]);
  loom_hook_free(hs[1]);

  /* a second run resuming at step 7: earlier checkpoints count for keep_max */
  hs[0] = loom_stop_at_step_hook(0, 10, st);
  hs[1] = loom_checkpoint_saver_hook(dir, 0, 3, NULL, 2, NULL, 0, NULL, NULL, st);
  int64_t start = 7;
  ms = ms_new_at(&m, &start, 2, hs);
  cr_assert_eq(train_until_stop(ms, &m, 100), 3);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_eq(count_files(dir, "model.ckpt-"), 2);
  snprintf(p, sizeof p, "%s/model.ckpt-6", dir);
  cr_assert_not(tu_file_exists(p), "model.ckpt-6 not deleted: keep_max ignored the first run's checkpoints");
  snprintf(p, sizeof p, "%s/model.ckpt-10", dir);
  cr_assert(tu_file_exists(p));
  snprintf(p, sizeof p, "%s/model.ckpt-7", dir);
  cr_assert(tu_file_exists(p));
  loom_hook_free(hs[0]);
  loom_hook_free(hs[1]);
  loom_status_free(st);
  tu_rmtree(root);
  model_free(&m);
}

Test(checkpoint_saver, listener_stop_secs_and_user_saver) {
  model m = model_new(1.0f);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_hooks");
  lrec lr = {{0}, 3};
  lrec lr2 = {{0}, -1};
  const loom_checkpoint_listener *ls[2] = {&lops, &lops};
  void *lself[2] = {&lr, &lr2};
  loom_status *st = loom_status_new();
  loom_hook *h = loom_checkpoint_saver_hook(dir, 0, 3, NULL, 0, NULL, 2, ls, lself, st);
  cr_assert(h, "%s", loom_status_message(st));
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  /* after_save at step 3 asks to stop: training ends after that step */
  cr_assert_eq(train_until_stop(ms, &m, 100), 3);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_str_eq(lr.log, "begin before:0 after:0 before:3 after:3 end:3");
  cr_assert_str_eq(lr2.log, "begin before:0 after:0 before:3 after:3 end:3");
  cr_assert_eq(count_files(dir, "model.ckpt-"), 2); /* keep_max 0: all kept */
  loom_hook_free(h);
  tu_rmtree(dir);

  /* save_secs: at creation and at the end only (an hour never passes) */
  tu_tmpdir(dir, sizeof dir, "loom_hooks");
  loom_saver *sv = loom_saver_new(m.g, 1, &m.x, 0, st);
  cr_assert(sv, "%s", loom_status_message(st));
  loom_hook *hs[2] = {loom_stop_at_step_hook(5, 0, st), loom_checkpoint_saver_hook(dir, 3600, 0, sv, 1, NULL, 0, NULL, NULL, st)};
  cr_assert(hs[1]);
  ms = ms_new(&m, 2, hs);
  cr_assert_eq(train_until_stop(ms, &m, 100), 5);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  char p[600];
  snprintf(p, sizeof p, "%s/model.ckpt-0", dir);
  cr_assert(tu_file_exists(p));
  snprintf(p, sizeof p, "%s/model.ckpt-5", dir);
  cr_assert(tu_file_exists(p));
  cr_assert_eq(count_files(dir, "model.ckpt-"), 2); /* the user's saver keeps everything */
  /* the user's saver holds x only */
  loom_tensor *t = NULL;
  cr_assert_eq(loom_checkpoint_read_tensor(p, "global_step", &t, st), LOOM_NOT_FOUND);
  cr_assert_float_eq(ckpt_f32(p, "x"), x_after(1.0f, 5), 1e-6f);
  loom_hook_free(hs[0]);
  loom_hook_free(hs[1]);
  loom_saver_free(sv);
  tu_rmtree(dir);

  /* invalid arguments */
  cr_assert_null(loom_checkpoint_saver_hook(NULL, 0, 1, NULL, 0, NULL, 0, NULL, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "CheckpointSaverHook: checkpoint_dir"), "%s", loom_status_message(st));
  cr_assert_null(loom_checkpoint_saver_hook("/tmp/x", 0, 0, NULL, 0, NULL, 0, NULL, NULL, st));
  cr_assert(strstr(loom_status_message(st), "exactly one of save_secs (0) and save_steps (0)"), "%s",
            loom_status_message(st));
  cr_assert_null(loom_checkpoint_saver_hook("/tmp/x", 5, 5, NULL, 0, NULL, 0, NULL, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  const loom_checkpoint_listener *nl[1] = {NULL};
  cr_assert_null(loom_checkpoint_saver_hook("/tmp/x", 0, 5, NULL, 0, NULL, 1, nl, NULL, st));
  cr_assert(strstr(loom_status_message(st), "listener 0 is NULL"), "%s", loom_status_message(st));
  cr_assert_null(loom_checkpoint_saver_hook("/tmp/x", 0, 5, NULL, 0, NULL, 2, NULL, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  loom_status_free(st);
  model_free(&m);
}

Test(checkpoint_saver, unwritable_directory_fails_creation) {
  model m = model_new(1.0f);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_hooks");
  char file[600], sub[700];
  snprintf(file, sizeof file, "%s/afile", dir);
  tu_write_file(file, "", 0);
  snprintf(sub, sizeof sub, "%s/ckpt", file); /* a directory under a file */
  loom_status *st = loom_status_new();
  loom_hook *h = loom_checkpoint_saver_hook(sub, 0, 1, NULL, 0, NULL, 0, NULL, NULL, st);
  cr_assert_null(loom_monitored_session_new(m.g, NULL, NULL, NULL, 1, &h, st));
  cr_assert_neq(loom_status_code(st), LOOM_OK);
  cr_assert(strstr(loom_status_message(st), "afile"), "%s", loom_status_message(st));
  loom_hook_free(h);
  loom_status_free(st);
  tu_rmtree(dir);
  model_free(&m);
}

Test(final_ops, values_after_end) {
  const float x0 = 4.0f;
  model m = model_new(x0);
  loom_output fo[2] = {m.xo, m.gso};
  loom_status *st = loom_status_new();
  loom_hook *h = loom_final_ops_hook(2, fo, st);
  cr_assert(h, "%s", loom_status_message(st));
  int n = -1;
  cr_assert_null(loom_final_ops_hook_values(h, &n));
  cr_assert_eq(n, 0);
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 4), 4);
  cr_assert_null(loom_final_ops_hook_values(h, &n));
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_tensor *const *v = loom_final_ops_hook_values(h, &n);
  cr_assert(v);
  cr_assert_eq(n, 2);
  cr_assert_float_eq(scalar_f32(v[0]), x_after(x0, 4), 1e-6f);
  cr_assert_eq(scalar_i64(v[1]), 4);
  /* not a FinalOpsHook */
  loom_hook *other = loom_stop_at_step_hook(1, 0, NULL);
  cr_assert_null(loom_final_ops_hook_values(other, &n));
  cr_assert_eq(n, 0);
  cr_assert_null(loom_final_ops_hook_values(NULL, NULL));
  /* a user hook with a one-byte self: not read as a standard hook */
  static char tiny = 0;
  loom_hook *user = loom_hook_new(NULL, &tiny, "tiny");
  cr_assert_null(loom_final_ops_hook_values(user, &n));
  loom_logging_tensor_hook_set_total_steps(user, 5);
  loom_logging_tensor_hook_set_total_steps(NULL, 5);
  cr_assert_eq(tiny, 0);
  loom_hook_free(user);
  loom_hook_free(other);
  loom_hook_free(h);
  cr_assert_null(loom_final_ops_hook(-1, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  loom_output bad[2] = {m.xo, {NULL, 0}};
  cr_assert_null(loom_final_ops_hook(2, bad, st));
  cr_assert(strstr(loom_status_message(st), "FinalOpsHook: final_ops[1]"), "%s", loom_status_message(st));
  loom_status_free(st);
  model_free(&m);
}

typedef struct feeder {
  loom_output ph;
  loom_tensor *val;
  int calls, limit;
} feeder;
static int feed_fn(void *user, int cap, loom_output *feeds, loom_tensor **values) {
  feeder *f = user;
  cr_assert(cap >= 1);
  if (f->calls == f->limit) return -1;
  f->calls++;
  *(float *)loom_tensor_data(f->val) = (float)f->calls;
  feeds[0] = f->ph;
  values[0] = f->val;
  return 1;
}

Test(feed_fn, feeds_a_placeholder_each_step_and_ends_input) {
  model m = model_new(1.0f);
  loom_output ph = loom_placeholder(m.g, LOOM_F32, 0, NULL, "ph");
  loom_output y = loom_mul(m.g, ph, loom_const_f32(m.g, 3.0f, NULL), "y");
  feeder f = {ph, loom_tensor_scalar_f32(0), 0, 3};
  loom_status *st = loom_status_new();
  g_log[0] = 0;
  rec ra = rec_make("A");
  loom_hook *hs[2] = {loom_feed_fn_hook(feed_fn, &f, st), loom_hook_new(&rec_ops, &ra, "A")};
  cr_assert(hs[0], "%s", loom_status_message(st));
  loom_monitored_session *ms = ms_new(&m, 2, hs);
  loom_tensor *out = NULL;
  for (int k = 1; k <= 3; k++) {
    cr_assert_eq(loom_monitored_session_run(ms, NULL, NULL, 0, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s",
                 loom_status_message(st));
    cr_assert_eq(scalar_f32(out), 3.0f * (float)k);
  }
  /* a negative count is the end of the input: a normal end */
  cr_assert_eq(loom_monitored_session_run(ms, NULL, NULL, 0, &y, &out, 1, NULL, 0, st), LOOM_OUT_OF_RANGE);
  cr_assert(loom_monitored_session_should_stop(ms));
  g_log[0] = 0;
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  cr_assert_str_eq(g_log, "A.end");
  cr_assert_null(loom_feed_fn_hook(NULL, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "FeedFnHook: feed_fn"), "%s", loom_status_message(st));
  loom_tensor_free(out);
  loom_tensor_free(f.val);
  loom_hook_free(hs[0]);
  loom_hook_free(hs[1]);
  loom_status_free(st);
  model_free(&m);
}

typedef struct advancer {
  loom_session *s;
  atomic_int assigned;
} advancer;
static void *advance_thread(void *arg) {
  advancer *a = arg;
  usleep(100000);
  loom_tensor *t = loom_tensor_scalar_i64(3);
  cr_assert_eq(loom_session_assign_variable(a->s, "global_step", t, NULL), LOOM_OK);
  loom_tensor_free(t);
  atomic_store(&a->assigned, 1);
  return NULL;
}

Test(global_step_waiter, returns_at_once_when_reached_and_blocks_otherwise) {
  model m = model_new(1.0f);
  loom_status *st = loom_status_new();
  /* reached already (and wait_until_step 0): no waiting */
  int64_t start = 5;
  loom_hook *hs[2] = {loom_global_step_waiter_hook(5, st), loom_global_step_waiter_hook(0, st)};
  cr_assert(hs[0] && hs[1], "%s", loom_status_message(st));
  loom_monitored_session *ms = ms_new_at(&m, &start, 2, hs);
  cr_assert_eq(train_until_stop(ms, &m, 2), 2);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 7);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_hook_free(hs[0]);
  loom_hook_free(hs[1]);
  /* not reached: before_run blocks until another thread moves global_step to 3 */
  loom_hook *h = loom_global_step_waiter_hook(3, st);
  ms = ms_new(&m, 1, &h);
  advancer a = {loom_monitored_session_session(ms), 0};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, advance_thread, &a), 0);
  loom_tensor *loss = NULL;
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(atomic_load(&a.assigned), 1, "the step ran before global_step reached 3");
  pthread_join(th, NULL);
  cr_assert_eq(read_step(loom_monitored_session_session(ms)), 4);
  /* once started it no longer waits */
  cr_assert_eq(train_step(ms, &m, &loss, st), LOOM_OK);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_hook_free(h);
  loom_tensor_free(loss);
  cr_assert_null(loom_global_step_waiter_hook(-1, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "GlobalStepWaiterHook: wait_until_step"), "%s", loom_status_message(st));
  loom_status_free(st);
  model_free(&m);
}

/* ---- event files ---- */
typedef struct evrec {
  int64_t step;
  int slog;
  char tag[64];
  double value;
  int nvalues;
} evrec;
/* Reads every event after the file_version one. */
static int read_events(const char *path, evrec *out, int cap) {
  loom_status *st = loom_status_new();
  loom_event_reader *r = loom_event_reader_open(path, st);
  cr_assert(r, "%s", loom_status_message(st));
  const loom_event *ev;
  int n = 0;
  while (loom_event_reader_next(r, &ev, st) == LOOM_OK) {
    if (ev->file_version) continue;
    cr_assert(n < cap);
    evrec *e = &out[n++];
    memset(e, 0, sizeof *e);
    e->step = ev->step;
    e->slog = ev->session_log_status;
    e->nvalues = ev->nvalues;
    if (ev->nvalues) {
      snprintf(e->tag, sizeof e->tag, "%s", ev->values[0].tag);
      e->value = ev->values[0].simple_value;
    }
  }
  cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE, "%s", loom_status_message(st));
  loom_event_reader_free(r);
  loom_status_free(st);
  return n;
}

Test(step_counter, writes_global_step_per_sec) {
  model m = model_new(1.0f);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_hooks");
  loom_status *st = loom_status_new();
  loom_event_writer *w = loom_event_writer_new(dir, NULL, st);
  cr_assert(w, "%s", loom_status_message(st));
  loom_hook *h = loom_step_counter_hook(2, 0, w, st);
  cr_assert(h, "%s", loom_status_message(st));
  capture_start();
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 6), 6);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);
  char path[600];
  snprintf(path, sizeof path, "%s", loom_event_writer_path(w));
  loom_event_writer_free(w);
  /* the timer starts at step 1, then fires at 3 and 5 */
  evrec ev[16];
  int n = read_events(path, ev, 16);
  cr_assert_eq(n, 2);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(ev[i].step, 3 + 2 * i);
    cr_assert_str_eq(ev[i].tag, "global_step/sec");
    cr_assert(ev[i].value > 0 && isfinite(ev[i].value), "rate %g", ev[i].value);
  }
  /* and one log line per write */
  int k = 0;
  for (int i = 0; i < g_nlines; i++)
    if (!strncmp(g_lines[i], "global_step/sec: ", 17)) {
      double v = 0;
      cr_assert_eq(sscanf(g_lines[i] + 17, "%lf", &v), 1);
      cr_assert(v > 0);
      k++;
    }
  cr_assert_eq(k, 2);
  loom_hook_free(h);
  /* without a writer it only logs; a stuck global step warns every 20 checks */
  capture_start();
  h = loom_step_counter_hook(1, 0, NULL, st);
  ms = ms_new(&m, 1, &h);
  loom_tensor *out = NULL;
  for (int i = 0; i < 21; i++)
    cr_assert_eq(loom_monitored_session_run(ms, NULL, NULL, 0, &m.loss, &out, 1, NULL, 0, st), LOOM_OK);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);
  cr_assert_geq(find_line("W:It seems that global step has not been increased"), 0);
  loom_tensor_free(out);
  loom_hook_free(h);
  cr_assert_null(loom_step_counter_hook(0, 0, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "StepCounterHook: exactly one of every_n_steps (0) and every_n_secs (0)"),
            "%s", loom_status_message(st));
  cr_assert_null(loom_step_counter_hook(10, 1.0, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  loom_status_free(st);
  tu_rmtree(dir);
  model_free(&m);
}

Test(summary_saver, writes_the_graph_summaries_at_the_right_steps) {
  const float x0 = 2.0f;
  model m = model_new(x0);
  loom_summary_scalar(m.g, "loss", m.loss);
  loom_summary_scalar(m.g, "x_value", m.xo);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_hooks");
  loom_status *st = loom_status_new();
  loom_event_writer *w = loom_event_writer_new(dir, NULL, st);
  cr_assert(w, "%s", loom_status_message(st));
  loom_hook *h = loom_summary_saver_hook(3, 0, w, st);
  cr_assert(h, "%s", loom_status_message(st));
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 7), 7);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  char path[600];
  snprintf(path, sizeof path, "%s", loom_event_writer_path(w));
  loom_event_writer_free(w);
  /* START at step 1, then summaries at 1, 4, 7 computed in the runs that
   * produced those steps (values of x_{step-1}) */
  loom_event_reader *r = loom_event_reader_open(path, st);
  cr_assert(r);
  const loom_event *ev;
  int n = 0, nsum = 0;
  int64_t want[3] = {1, 4, 7};
  while (loom_event_reader_next(r, &ev, st) == LOOM_OK) {
    if (ev->file_version) continue;
    if (n++ == 0) {
      cr_assert_eq(ev->session_log_status, LOOM_SESSION_LOG_START);
      cr_assert_eq(ev->step, 1);
      continue;
    }
    cr_assert_eq(ev->session_log_status, 0);
    cr_assert(nsum < 3);
    cr_assert_eq(ev->step, want[nsum]);
    cr_assert_eq(ev->nvalues, 2);
    float xk = x_after(x0, (int)want[nsum] - 1);
    cr_assert_str_eq(ev->values[0].tag, "loss");
    cr_assert_float_eq(ev->values[0].simple_value, (double)(xk * xk), 1e-6);
    cr_assert_str_eq(ev->values[1].tag, "x_value");
    /* x's identity aliases the variable: fetched at the end of the run,
     * after the update */
    cr_assert_float_eq(ev->values[1].simple_value, (double)x_after(x0, (int)want[nsum]), 1e-6, "x %g",
                       ev->values[1].simple_value);
    nsum++;
  }
  cr_assert_eq(nsum, 3);
  loom_event_reader_free(r);
  loom_hook_free(h);
  cr_assert_null(loom_summary_saver_hook(0, 0, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "SummarySaverHook: exactly one of save_steps"), "%s",
            loom_status_message(st));
  cr_assert_null(loom_summary_saver_hook(5, 0, NULL, st));
  cr_assert(strstr(loom_status_message(st), "SummarySaverHook: writer is NULL"), "%s", loom_status_message(st));
  loom_status_free(st);
  tu_rmtree(dir);
  model_free(&m);
}

Test(summary_saver, graph_without_summaries_writes_start_only) {
  model m = model_new(1.0f);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_hooks");
  loom_event_writer *w = loom_event_writer_new(dir, NULL, NULL);
  cr_assert(w);
  loom_hook *h = loom_summary_saver_hook(2, 0, w, NULL);
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 5), 5);
  cr_assert_eq(loom_monitored_session_close(ms, NULL), LOOM_OK);
  char path[600];
  snprintf(path, sizeof path, "%s", loom_event_writer_path(w));
  loom_event_writer_free(w);
  evrec ev[8];
  cr_assert_eq(read_events(path, ev, 8), 1);
  cr_assert_eq(ev[0].slog, LOOM_SESSION_LOG_START);
  cr_assert_eq(ev[0].step, 1);
  loom_hook_free(h);
  tu_rmtree(dir);
  model_free(&m);
}

Test(profiler, writes_a_chrome_trace_of_the_profiled_steps) {
  model m = model_new(1.0f);
  char root[TU_TMPDIR_CAP];
  tu_tmpdir(root, sizeof root, "loom_hooks");
  char dir[512];
  snprintf(dir, sizeof dir, "%s/prof", root);
  loom_status *st = loom_status_new();
  loom_hook *h = loom_profiler_hook(2, 0, dir, st);
  cr_assert(h, "%s", loom_status_message(st));
  loom_monitored_session *ms = ms_new(&m, 1, &h);
  cr_assert_eq(train_until_stop(ms, &m, 5), 5);
  loom_session_stats stats;
  loom_session_get_stats(loom_monitored_session_session(ms), &stats);
  cr_assert_eq(loom_monitored_session_close(ms, st), LOOM_OK);
  /* steps 2 and 4 are traced */
  cr_assert_eq(count_files(dir, "timeline-"), 2);
  for (int step = 2; step <= 4; step += 2) {
    char p[600];
    snprintf(p, sizeof p, "%s/timeline-%d.json", dir, step);
    char *text = tu_read_file(p, NULL);
    cJSON *root_json = cJSON_Parse(text);
    cr_assert(root_json, "%s is not JSON", p);
    cJSON *evs = cJSON_GetObjectItem(root_json, "traceEvents");
    cr_assert(cJSON_IsArray(evs));
    /* one complete event per node the step ran */
    cr_assert_eq(cJSON_GetArraySize(evs), stats.nodes_run);
    int found_apply = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, evs) {
      cr_assert_str_eq(cJSON_GetObjectItem(e, "ph")->valuestring, "X");
      cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(e, "ts")));
      cr_assert(cJSON_GetObjectItem(e, "dur")->valuedouble >= 0);
      const char *op = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "op")->valuestring;
      if (!strcmp(op, "ApplyGradientDescent")) found_apply = 1;
    }
    cr_assert(found_apply, "no ApplyGradientDescent event in %s", p);
    cJSON_Delete(root_json);
    free(text);
  }
  loom_hook_free(h);
  cr_assert_null(loom_profiler_hook(0, 0, dir, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "ProfilerHook: exactly one of save_steps"), "%s", loom_status_message(st));
  cr_assert_null(loom_profiler_hook(1, 0, "", st));
  cr_assert(strstr(loom_status_message(st), "ProfilerHook: output_dir"), "%s", loom_status_message(st));
  loom_status_free(st);
  tu_rmtree(root);
  model_free(&m);
}
