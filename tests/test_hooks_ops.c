/* FinalOpsHook (estimator/hooks/final_ops.c) and FeedFnHook
 * (estimator/hooks/feed_fn.c). */
#include "hooks_util.h"

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
