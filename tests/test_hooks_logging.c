/* The reporting hooks (estimator/hooks/logging.c): LoggingTensorHook
 * (values, at_end, formatting, the progress bar) and StepCounterHook. */
#include <fcntl.h>
#include <unistd.h>
#include "hooks_util.h"

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
