/* Crash safety: a training process (a tiny Estimator that
 * checkpoints every step, writes summaries every step and exports after
 * every two steps) is SIGKILLed at random moments, again and again on the
 * same model_dir. After each kill: the model_dir's latest checkpoint is
 * complete and restores (its global_step never goes back), every export
 * directory is complete (a predictor loads it and predicts) or absent, the
 * event files read back (a torn record only at the very end) and the next
 * process resumes training from the checkpoint. Prints the kills survived.
 *
 * `make test` runs 20 kills (a few seconds); LOOM_CRASH_KILLS=N runs N. The
 * random moments come from LOOM_CRASH_SEED (default: the time; printed). */
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include "test_util.h"

#define NX 8
#define NF 2
static float X[NX * NF], Y[NX];

static void make_data(void) {
  for (int i = 0; i < NX; i++) {
    X[i * NF] = (float)i / NX;
    X[i * NF + 1] = (float)(i % 3) - 1;
    Y[i] = 0.5f + X[i * NF] - 2 * X[i * NF + 1];
  }
}

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p, (void)user, (void)mode;
  int64_t xd[2] = {NX, NF}, yd[2] = {NX, 1};
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, X, st);
  loom_tensor *y = loom_tensor_from_data(LOOM_F32, 2, yd, Y, st);
  const char *names[2] = {"x", "y"};
  const loom_tensor *arr[2] = {x, y};
  loom_dataset *ds = x && y ? loom_dataset_from_tensors(2, names, arr, "y", st) : NULL;
  loom_tensor_free(x);
  loom_tensor_free(y);
  if (ds) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, 4, 0, st);
  return ds;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)cfg, (void)user, (void)params;
  loom_output x = loom_features_get(f, "x");
  loom_dense_options d = loom_dense_options_default();
  d.kernel_initializer = loom_init_constant(0.1);
  loom_output pred = loom_layers_dense(g, x, 1, &d, "linear");
  loom_spec_add_prediction(spec, "predictions", pred);
  if (mode == LOOM_MODE_PREDICT) return loom_graph_status(g, st);
  loom_output zero = {NULL, 0};
  loom_output loss =
      loom_losses_mean_squared_error(g, labels, pred, zero, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  loom_summary_scalar(g, "loss_again", loss);
  if (mode == LOOM_MODE_TRAIN) {
    loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 0.01f, "lr"));
    loom_node *op = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL);
    loom_optimizer_free(opt);
    loom_spec_set_train_op(spec, op);
  }
  return loom_graph_status(g, st);
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  int64_t dims[2] = {-1, NF};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, dims, "x");
  loom_code rc = loom_features_add(f, "x", x, st);
  if (rc == LOOM_OK) rc = loom_features_add(r, "x", x, st);
  return rc;
}

static loom_run_config crash_config(void) {
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  c.save_summary_steps = 1;
  c.save_checkpoints_steps = 1;
  c.keep_checkpoint_max = 3;
  c.log_step_count_steps = 1000;
  return c;
}

/* The child: trains 2 steps and exports, forever, until killed. */
static void __attribute__((noreturn)) child_train(const char *dir) {
  loom_log_set(NULL, NULL, LOOM_LOG_ERROR);
  loom_status *st = loom_status_new();
  loom_run_config c = crash_config();
  char base[600], path[800];
  snprintf(base, sizeof base, "%s/export", dir);
  for (;;) {
    loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
    if (!e) {
      fprintf(stderr, "child: estimator: %s\n", loom_status_message(st));
      _exit(3);
    }
    for (int k = 0; k < 4; k++) {
      loom_train_options to = loom_train_options_default();
      to.steps = 2;
      if (loom_estimator_train(e, input_fn, NULL, &to, st) != LOOM_OK) {
        fprintf(stderr, "child: train: %s\n", loom_status_message(st));
        _exit(4);
      }
      if (loom_estimator_export(e, serving_fn, NULL, base, NULL, path, sizeof path, st) != LOOM_OK) {
        fprintf(stderr, "child: export: %s\n", loom_status_message(st));
        _exit(5);
      }
    }
    loom_estimator_free(e); /* a new process-like start: restore from the model_dir */
  }
}

/* Every export under base loads and predicts; returns how many; counts temp- staging dirs. */
static int check_exports(const char *base, int kill, int *staging) {
  DIR *d = opendir(base);
  if (!d) return 0;
  loom_status *st = loom_status_new();
  struct dirent *de;
  int n = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    if (!strncmp(de->d_name, "temp-", 5)) { /* an export being staged when the process died: not an export */
      (*staging)++;
      continue;
    }
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", base, de->d_name);
    loom_predictor *pr = loom_predictor_load(p, NULL, st);
    cr_assert(pr, "kill %d: export %s is incomplete: %s", kill, p, loom_status_message(st));
    int64_t xd[2] = {NX, NF};
    loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, X, NULL), *out = NULL;
    cr_assert_eq(loom_predictor_run(pr, NULL, 1, &x, 1, &out, st), LOOM_OK, "kill %d: %s: %s", kill, p,
                 loom_status_message(st));
    cr_assert(isfinite(*(const float *)loom_tensor_data_const(out)));
    loom_tensor_free(out);
    loom_tensor_free(x);
    loom_predictor_free(pr);
    n++;
  }
  closedir(d);
  loom_status_free(st);
  return n;
}

/* Event files read back; a torn record is allowed only as the last one of
 * the file (the process died writing it). Returns the events read. */
static long check_events(const char *dir, int kill, int *torn) {
  DIR *d = opendir(dir);
  cr_assert(d);
  loom_status *st = loom_status_new();
  struct dirent *de;
  long count = 0;
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, "events.out", 10)) continue;
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    loom_event_reader *r = loom_event_reader_open(p, st);
    cr_assert(r, "kill %d: %s", kill, loom_status_message(st));
    const loom_event *ev;
    loom_code rc;
    while ((rc = loom_event_reader_next(r, &ev, st)) == LOOM_OK) count++;
    if (rc != LOOM_OUT_OF_RANGE) {
      cr_assert_eq(rc, LOOM_DATA_LOSS, "kill %d: %s: %s", kill, p, loom_status_message(st));
      /* only at the end: nothing readable follows */
      cr_assert_neq(loom_event_reader_next(r, &ev, st), LOOM_OK, "kill %d: %s: a record after a torn one", kill, p);
      (*torn)++;
    }
    loom_event_reader_free(r);
  }
  closedir(d);
  loom_status_free(st);
  return count;
}

static int64_t restored_step(const char *dir, int kill) {
  loom_status *st = loom_status_new();
  char ck[800];
  loom_code rc = loom_latest_checkpoint(dir, ck, sizeof ck, st);
  if (rc == LOOM_NOT_FOUND) {
    loom_status_free(st);
    return -1; /* killed before the first checkpoint */
  }
  cr_assert_eq(rc, LOOM_OK, "kill %d: %s", kill, loom_status_message(st));
  loom_run_config c = crash_config();
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
  cr_assert(e, "kill %d: %s", kill, loom_status_message(st));
  loom_tensor *t = NULL;
  cr_assert_eq(loom_estimator_get_variable_value(e, "global_step", &t, st), LOOM_OK,
               "kill %d: the latest checkpoint %s does not restore: %s", kill, ck, loom_status_message(st));
  int64_t step = *(const int64_t *)loom_tensor_data_const(t);
  loom_tensor_free(t);
  loom_estimator_free(e);
  loom_status_free(st);
  return step;
}

Test(crash_safety, sigkill_at_random_moments, .timeout = 600) {
  make_data();
  int kills = 20;
  const char *v = getenv("LOOM_CRASH_KILLS");
  if (v && atoi(v) > 0) kills = atoi(v);
  unsigned seed = (unsigned)time(NULL);
  if ((v = getenv("LOOM_CRASH_SEED"))) seed = (unsigned)strtoul(v, NULL, 10);
  srand(seed);
  char dir[TU_TMPDIR_CAP], base[600];
  tu_tmpdir(dir, sizeof dir, "loom_crash");
  snprintf(base, sizeof base, "%s/export", dir);
  int64_t last = -1;
  int survived = 0, staging = 0, torn = 0, advanced = 0;
  for (int k = 0; k < kills; k++) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) child_train(dir);
    /* the first process needs the graph built before anything is written:
     * give every process at least 20 ms, then a random moment in ~250 ms */
    struct timespec ts = {0, (20 + rand() % 250) * 1000000L};
    nanosleep(&ts, NULL);
    int status = 0;
    pid_t w = waitpid(pid, &status, WNOHANG);
    cr_assert_eq(w, 0, "kill %d: the training process ended by itself (status %d)", k, status);
    kill(pid, SIGKILL);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "kill %d: status %d", k, status);
    int64_t step = restored_step(dir, k);
    cr_assert(step >= last, "kill %d: the model_dir went back from step %lld to %lld", k, (long long)last,
              (long long)step);
    if (step > last) advanced++;
    last = step;
    staging = 0; /* counted afresh: what is left now */
    check_exports(base, k, &staging);
    torn = 0;
    check_events(dir, k, &torn);
    survived++;
  }
  /* training resumes in a new process: it continues from the last checkpoint */
  loom_status *st = loom_status_new();
  loom_run_config c = crash_config();
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  loom_train_options to = loom_train_options_default();
  to.steps = 3;
  cr_assert_eq(loom_estimator_train(e, input_fn, NULL, &to, st), LOOM_OK, "%s", loom_status_message(st));
  loom_estimator_free(e);
  cr_assert_eq(restored_step(dir, kills), (last < 0 ? 0 : last) + 3, "training did not resume from step %lld",
               (long long)last);
  cr_assert(advanced >= kills / 4, "only %d of %d processes got a checkpoint written before the kill", advanced,
            kills);
  loom_status_free(st);
  fprintf(stderr,
          "crash-safety: %d of %d SIGKILLs survived (seed %u): the model_dir restored every time (last step %lld, "
          "advanced after %d kills), %d export staging dirs (temp-*) left by killed exports, %d event files ending in a torn record, "
          "training resumed\n",
          survived, kills, seed, (long long)last, advanced, staging, torn);
  if (getenv("LOOM_CRASH_KEEP"))
    fprintf(stderr, "crash-safety: model_dir kept: %s\n", dir);
  else
    tu_rmtree(dir);
}
