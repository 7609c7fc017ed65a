/* The hooks that stop or hold training: StopAtStepHook and
 * GlobalStepWaiterHook (estimator/hooks/stop.c), NanTensorHook
 * (estimator/hooks/nan.c). */
#include <pthread.h>
#include <stdatomic.h>
#include "hooks_util.h"

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
