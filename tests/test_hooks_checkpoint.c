/* CheckpointSaverHook and its listeners (estimator/hooks/checkpoint.c). */
#include <sys/stat.h>
#include "hooks_util.h"

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
