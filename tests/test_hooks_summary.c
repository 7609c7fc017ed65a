/* The hooks that write event and trace files: SummarySaverHook
 * (estimator/hooks/summary.c) and ProfilerHook (estimator/hooks/profiler.c). */
#include <cjson/cJSON.h>
#include "hooks_util.h"

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
  int ngraph = 0;
  while (loom_event_reader_next(r, &ev, st) == LOOM_OK) {
    if (ev->file_version) continue;
    if (ev->graph_def) { /* the graph, once, before everything else */
      cr_assert_eq(n, 0, "the graph event comes first");
      cr_assert_gt(ev->graph_def_size, 0);
      ngraph++;
      continue;
    }
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
  cr_assert_eq(ngraph, 1, "one graph event per session");
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
