/* Estimator: step semantics, evaluate vs a hand computation, predict,
 * hooks, NaN guard, event files, export -> predictor parity, warm start,
 * resident predict, in-memory evaluation and early stopping. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include "test_util.h"

/* ---- a linear regression y = x.w + b, 3 features ---- */
#define NX 24
#define NF 3
static float X[NX * NF], Y[NX];
static int model_fn_calls;

static void make_data(void) {
  for (int i = 0; i < NX; i++) {
    float y = 0.5f;
    for (int j = 0; j < NF; j++) {
      X[i * NF + j] = (float)((i * 7 + j * 3) % 11) / 11.0f - 0.4f;
      y += (float)(j + 1) * X[i * NF + j];
    }
    Y[i] = y;
  }
}

typedef struct data_opts {
  int64_t batch;
  int64_t epochs; /* <= 0 forever */
  int nan_labels;
  int n;          /* examples used (0 = NX) */
} data_opts;

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)mode;
  (void)p;
  data_opts *o = user;
  int n = o->n ? o->n : NX;
  int64_t xd[2] = {n, NF}, yd[2] = {n, 1};
  float ybuf[NX];
  for (int i = 0; i < n; i++) ybuf[i] = o->nan_labels ? NAN : Y[i];
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, X, NULL);
  loom_tensor *y = loom_tensor_from_data(LOOM_F32, 2, yd, ybuf, NULL);
  const char *names[2] = {"x", "y"};
  const loom_tensor *arr[2] = {x, y};
  loom_dataset *ds = loom_dataset_from_tensors(2, names, arr, "y", st);
  loom_tensor_free(x);
  loom_tensor_free(y);
  if (ds) ds = loom_dataset_repeat(ds, o->epochs > 0 ? o->epochs : -1, st);
  if (ds) ds = loom_dataset_batch(ds, o->batch, 0, st);
  return ds;
}

typedef struct model_opts {
  int no_train_op;
  int reserved_metric;
  double lr;
} model_opts;

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)cfg;
  (void)st;
  model_opts *mo = user;
  model_fn_calls++;
  loom_output x = loom_features_get(f, "x");
  cr_assert(x.node, "feature x missing");
  loom_dense_options d = loom_dense_options_default();
  d.kernel_initializer = loom_init_constant(0.1);
  loom_output pred = loom_layers_dense(g, x, 1, &d, "linear");
  loom_spec_add_prediction(spec, "predictions", pred);
  loom_spec_add_prediction(spec, "doubled", loom_mul(g, pred, loom_const_f32(g, 2.0f, NULL), NULL));
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_output zero = {NULL, 0};
  loom_output loss = loom_losses_mean_squared_error(g, labels, pred, zero, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  loom_spec_add_eval_metric(spec, mo && mo->reserved_metric ? "loss" : "mae",
                            loom_metrics_mean_absolute_error(g, labels, pred, zero, NULL));
  if (mode == LOOM_MODE_TRAIN && !(mo && mo->no_train_op)) {
    double lr = loom_params_get_double(params, "learning_rate", mo && mo->lr > 0 ? mo->lr : 0.1);
    loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, (float)lr, "lr"));
    loom_node *op = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL);
    loom_optimizer_free(opt);
    loom_spec_set_train_op(spec, op);
  }
  return LOOM_OK;
}

static loom_run_config quiet_config(void) {
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  c.prefetch = 0;
  return c;
}

static loom_estimator *make_est(const char *dir, const loom_run_config *c, model_opts *mo) {
  loom_status *st = loom_status_new();
  loom_estimator *e = loom_estimator_new(model_fn, mo, dir, c, NULL, NULL, st);
  cr_assert(e, "estimator: %s", loom_status_message(st));
  loom_status_free(st);
  return e;
}

static int64_t step_of(loom_estimator *e) {
  loom_tensor *t = NULL;
  cr_assert_eq(loom_estimator_get_variable_value(e, "global_step", &t, NULL), LOOM_OK);
  int64_t s = *(const int64_t *)loom_tensor_data_const(t);
  loom_tensor_free(t);
  return s;
}

static void train_ok(loom_estimator *e, data_opts *d, int64_t steps, int64_t max_steps) {
  loom_status *st = loom_status_new();
  loom_train_options o = loom_train_options_default();
  o.steps = steps;
  o.max_steps = max_steps;
  loom_code rc = loom_estimator_train(e, input_fn, d, &o, st);
  cr_assert_eq(rc, LOOM_OK, "train: %s", loom_status_message(st));
  loom_status_free(st);
}

static loom_tensor *var_value(loom_estimator *e, const char *name) {
  loom_tensor *t = NULL;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_estimator_get_variable_value(e, name, &t, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
  return t;
}

/* The model's output for example i worked by hand: bias + x_i . kernel, in float. */
static float hand_predict(const loom_tensor *kernel, const loom_tensor *bias, int i) {
  const float *w = loom_tensor_data_const(kernel), *b = loom_tensor_data_const(bias);
  float p = b[0];
  for (int j = 0; j < NF; j++) p += X[i * NF + j] * w[j];
  return p;
}

Test(estimator, step_semantics) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  loom_estimator *e = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 0, 0};
  train_ok(e, &d, 10, 0);
  cr_expect_eq(step_of(e), 10);
  train_ok(e, &d, 10, 0); /* steps are relative */
  cr_expect_eq(step_of(e), 20);
  train_ok(e, &d, 0, 25); /* max_steps is absolute */
  cr_expect_eq(step_of(e), 25);
  train_ok(e, &d, 0, 25); /* already reached: skipped */
  cr_expect_eq(step_of(e), 25);
  train_ok(e, &d, 0, 5);
  cr_expect_eq(step_of(e), 25);
  /* finite input: stops at the end of data (24 examples, batch 4, 2 epochs = 12 steps) */
  data_opts fin = {4, 2, 0, 0};
  train_ok(e, &fin, 0, 0);
  cr_expect_eq(step_of(e), 37);
  /* a new estimator on the same model_dir resumes */
  loom_estimator *e2 = make_est(dir, &c, NULL);
  train_ok(e2, &d, 3, 0);
  cr_expect_eq(step_of(e2), 40);
  /* bad arguments */
  loom_status *st = loom_status_new();
  loom_train_options o = loom_train_options_default();
  o.steps = 5;
  o.max_steps = 10;
  cr_expect_eq(loom_estimator_train(e, input_fn, &d, &o, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "both steps and max_steps"), "%s", loom_status_message(st));
  o.steps = -1;
  o.max_steps = 0;
  cr_expect_eq(loom_estimator_train(e, input_fn, &d, &o, st), LOOM_INVALID_ARGUMENT);
  loom_status_free(st);
  loom_estimator_free(e);
  loom_estimator_free(e2);
  tu_rmtree(dir);
}

Test(estimator, split_training_is_bitwise_equal) {
  make_data();
  char d1[TU_TMPDIR_CAP], d2[TU_TMPDIR_CAP];
  tu_tmpdir(d1, sizeof d1, "loom_est");
  tu_tmpdir(d2, sizeof d2, "loom_est");
  loom_run_config c = quiet_config();
  /* 24 examples / batch 4 = 6 batches per pass: 12 steps = 2 full passes,
   * so the input order of train(12)+train(12) equals train(24). */
  data_opts d = {4, 0, 0, 0};
  loom_estimator *a = make_est(d1, &c, NULL), *b = make_est(d2, &c, NULL);
  train_ok(a, &d, 12, 0);
  train_ok(a, &d, 12, 0);
  train_ok(b, &d, 24, 0);
  const char *names[2] = {"linear/kernel", "linear/bias"};
  for (int k = 0; k < 2; k++) {
    loom_tensor *ta = var_value(a, names[k]), *tb = var_value(b, names[k]);
    cr_assert_eq(loom_tensor_nbytes(ta), loom_tensor_nbytes(tb));
    cr_expect(memcmp(loom_tensor_data_const(ta), loom_tensor_data_const(tb), loom_tensor_nbytes(ta)) == 0,
              "%s differs between train(12)+train(12) and train(24)", names[k]);
    loom_tensor_free(ta);
    loom_tensor_free(tb);
  }
  cr_expect_eq(step_of(a), 24);
  cr_expect_eq(step_of(b), 24);
  loom_estimator_free(a);
  loom_estimator_free(b);
  tu_rmtree(d1);
  tu_rmtree(d2);
}

/* Reads every scalar with tag from the event files in dir. */
static int read_scalars(const char *dir, const char *tag, double *vals, int64_t *steps, int cap) {
  char cmd[512], path[1024];
  snprintf(cmd, sizeof cmd, "ls %s/events.out.tfevents.* 2>/dev/null", dir);
  FILE *p = popen(cmd, "r");
  int n = 0;
  while (p && fgets(path, sizeof path, p)) {
    path[strcspn(path, "\n")] = 0;
    loom_event_reader *r = loom_event_reader_open(path, NULL);
    cr_assert(r, "open %s", path);
    const loom_event *ev;
    loom_code rc;
    while ((rc = loom_event_reader_next(r, &ev, NULL)) == LOOM_OK)
      for (int i = 0; i < ev->nvalues; i++)
        if (!strcmp(ev->values[i].tag, tag) && n < cap) {
          vals[n] = ev->values[i].simple_value;
          steps[n++] = ev->step;
        }
    cr_expect_eq(rc, LOOM_OUT_OF_RANGE, "event file %s ended with an error", path);
    loom_event_reader_free(r);
  }
  if (p) pclose(p);
  return n;
}

Test(estimator, evaluate_matches_hand_computation) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  loom_estimator *e = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 0, 0};
  train_ok(e, &d, 7, 0);
  loom_tensor *w = var_value(e, "linear/kernel"), *bias = var_value(e, "linear/bias");
  /* evaluation on 10 examples in batches of 4: batches 4, 4, 2 */
  data_opts ed = {4, 1, 0, 10};
  double loss_sum = 0, abs_sum = 0;
  int nb = 0;
  for (int start = 0; start < 10; start += 4, nb++) {
    int end = start + 4 < 10 ? start + 4 : 10;
    double se = 0;
    for (int i = start; i < end; i++) {
      float p = hand_predict(w, bias, i);
      se += ((double)p - Y[i]) * ((double)p - Y[i]);
      abs_sum += fabs((double)p - Y[i]);
    }
    loss_sum += se / (end - start);
  }
  loom_status *st = loom_status_new();
  loom_eval_result *r = NULL;
  loom_eval_options eo = loom_eval_options_default();
  cr_assert_eq(loom_estimator_evaluate(e, input_fn, &ed, &eo, &r, st), LOOM_OK, "%s", loom_status_message(st));
  double v;
  cr_assert_eq(loom_eval_result_get(r, "loss", &v, NULL), LOOM_OK);
  cr_expect(fabs(v - loss_sum / nb) < 1e-5, "loss %g want %g (mean of batch losses)", v, loss_sum / nb);
  cr_assert_eq(loom_eval_result_get(r, "mae", &v, NULL), LOOM_OK);
  cr_expect(fabs(v - abs_sum / 10) < 1e-5, "mae %g want %g", v, abs_sum / 10);
  cr_assert_eq(loom_eval_result_get(r, "global_step", &v, NULL), LOOM_OK);
  cr_expect_eq(v, 7.0);
  cr_expect_eq(loom_eval_result_global_step(r), 7);
  cr_expect_eq(loom_eval_result_count(r), 3);
  cr_expect_str_eq(loom_eval_result_key(r, 0), "global_step"); /* sorted */
  /* steps limits the batches: 1 batch only */
  loom_eval_result *r1 = NULL;
  eo.steps = 1;
  eo.name = "one";
  cr_assert_eq(loom_estimator_evaluate(e, input_fn, &ed, &eo, &r1, st), LOOM_OK, "%s", loom_status_message(st));
  loom_eval_result_get(r1, "mae", &v, NULL);
  double a1 = 0;
  for (int i = 0; i < 4; i++) a1 += fabs((double)hand_predict(w, bias, i) - Y[i]);
  cr_expect(fabs(v - a1 / 4) < 1e-5, "mae over one batch %g want %g", v, a1 / 4);
  /* eval events: eval/ and eval_one/ hold the metrics at step 7 */
  char evdir[256];
  double ev[8];
  int64_t es[8];
  loom_estimator_eval_dir(e, NULL, evdir, sizeof evdir);
  cr_assert_eq(read_scalars(evdir, "mae", ev, es, 8), 1, "one mae value in %s", evdir);
  cr_expect(fabs(ev[0] - abs_sum / 10) < 1e-5 && es[0] == 7, "eval/ mae %g at step %lld", ev[0], (long long)es[0]);
  cr_assert_eq(read_scalars(evdir, "loss", ev, es, 8), 1);
  cr_expect(fabs(ev[0] - loss_sum / nb) < 1e-5, "eval/ loss %g", ev[0]);
  cr_expect_eq(read_scalars(evdir, "global_step", ev, es, 8), 0, "global_step is not written as a scalar");
  loom_estimator_eval_dir(e, "one", evdir, sizeof evdir);
  cr_assert_eq(read_scalars(evdir, "mae", ev, es, 8), 1, "one mae value in %s", evdir);
  cr_expect(fabs(ev[0] - a1 / 4) < 1e-5, "eval_one/ mae %g", ev[0]);
  /* the checkpoint pin is removed after the restore */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "ls %s | grep -q pin", dir);
  cr_expect_neq(system(cmd), 0, "a .pin link was left in %s", dir);
  /* an explicit checkpoint_path that does not exist */
  loom_eval_result *rn = NULL;
  eo.checkpoint_path = "/nonexistent/model.ckpt-3";
  cr_expect_eq(loom_estimator_evaluate(e, input_fn, &ed, &eo, &rn, st), LOOM_NOT_FOUND);
  cr_expect(strstr(loom_status_message(st), "/nonexistent/model.ckpt-3"), "%s", loom_status_message(st));
  cr_expect_null(rn);
  /* reserved metric name */
  model_opts bad = {0, 1, 0};
  loom_estimator *eb = make_est(dir, &c, &bad);
  loom_eval_result *rb = NULL;
  eo = loom_eval_options_default();
  cr_expect_eq(loom_estimator_evaluate(eb, input_fn, &ed, &eo, &rb, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "reserved"), "%s", loom_status_message(st));
  loom_estimator_free(eb);
  loom_eval_result_free(r);
  loom_eval_result_free(r1);
  loom_tensor_free(w);
  loom_tensor_free(bias);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}


Test(estimator, train_writes_events_and_checkpoints) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  c.save_summary_steps = 5;
  c.save_checkpoints_steps = 10;
  c.keep_checkpoint_max = 2;
  c.log_step_count_steps = 10;
  loom_estimator *e = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 0, 0};
  train_ok(e, &d, 30, 0);
  double v[64];
  int64_t s[64];
  int n = read_scalars(dir, "loss", v, s, 64);
  cr_expect_eq(n, 6, "loss summaries at steps 0,5,...,25: got %d", n);
  for (int i = 0; i < n; i++) cr_expect(isfinite(v[i]) && v[i] >= 0, "loss %g", v[i]);
  if (n >= 2) cr_expect(s[1] - s[0] == 5, "summary steps %lld %lld", (long long)s[0], (long long)s[1]);
  n = read_scalars(dir, "global_step/sec", v, s, 64);
  cr_expect(n >= 1, "global_step/sec written");
  /* checkpoints at 0,10,20,30; keep 2 -> 20 and 30 */
  char path[256];
  struct stat sb;
  snprintf(path, sizeof path, "%s/model.ckpt-30", dir);
  cr_expect_eq(stat(path, &sb), 0, "final checkpoint");
  snprintf(path, sizeof path, "%s/model.ckpt-20", dir);
  cr_expect_eq(stat(path, &sb), 0);
  snprintf(path, sizeof path, "%s/model.ckpt-10", dir);
  cr_expect_neq(stat(path, &sb), 0, "keep_checkpoint_max=2 deletes model.ckpt-10");
  char latest[512];
  cr_expect_eq(loom_estimator_latest_checkpoint(e, latest, sizeof latest, NULL), LOOM_OK);
  cr_expect(strstr(latest, "model.ckpt-30"), "%s", latest);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

Test(estimator, predict_one_result_per_example_and_resident) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  loom_estimator *e = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 0, 0};
  train_ok(e, &d, 5, 0);
  loom_tensor *w = var_value(e, "linear/kernel"), *bias = var_value(e, "linear/bias");
  data_opts pd = {5, 1, 0, 13}; /* 13 examples: batches 5, 5, 3 */
  loom_status *st = loom_status_new();
  loom_predict_options po = loom_predict_options_default();
  int calls0 = model_fn_calls;
  for (int round = 0; round < 2; round++) {
    loom_prediction_iter *it = loom_estimator_predict(e, input_fn, &pd, &po, st);
    cr_assert(it, "%s", loom_status_message(st));
    int n = 0;
    while (loom_prediction_next(it, st) == LOOM_OK) {
      const loom_tensor *p = loom_prediction_get(it, "predictions");
      const loom_tensor *p2 = loom_prediction_get(it, "doubled");
      cr_assert(p && p2);
      cr_assert_eq(loom_tensor_ndim(p), 1);
      float want = hand_predict(w, bias, n);
      float got = ((const float *)loom_tensor_data_const(p))[0];
      cr_expect(fabsf(got - want) < 1e-5f, "example %d: %g want %g", n, got, want);
      cr_expect(fabsf(((const float *)loom_tensor_data_const(p2))[0] - 2 * got) < 1e-6f);
      n++;
    }
    cr_expect_eq(loom_status_code(st), LOOM_OUT_OF_RANGE);
    cr_expect_eq(n, 13, "one result per example: %d", n);
    loom_prediction_iter_free(it);
  }
  cr_expect_eq(model_fn_calls, calls0 + 1, "second predict rebuilt the graph (%d model_fn calls)",
               model_fn_calls - calls0);
  /* After more training, predict sees the new checkpoint without a rebuild. */
  train_ok(e, &d, 5, 0);
  int calls1 = model_fn_calls;
  loom_tensor *w2 = var_value(e, "linear/kernel"), *b2 = var_value(e, "linear/bias");
  po.yield_single_examples = 0;
  const char *keys[1] = {"predictions"};
  po.npredict_keys = 1;
  po.predict_keys = keys;
  loom_prediction_iter *it = loom_estimator_predict(e, input_fn, &pd, &po, st);
  cr_assert(it, "%s", loom_status_message(st));
  cr_assert_eq(loom_prediction_next(it, st), LOOM_OK);
  cr_expect_eq(loom_prediction_count(it), 1);
  const loom_tensor *p = loom_prediction_value(it, 0);
  cr_expect_eq(loom_tensor_dim(p, 0), 5, "batches when yield_single_examples=0");
  float want = hand_predict(w2, b2, 0);
  cr_expect(fabsf(((const float *)loom_tensor_data_const(p))[0] - want) < 1e-5f, "new checkpoint used");
  cr_expect_eq(model_fn_calls, calls1, "no rebuild for a new checkpoint");
  /* Interleave a second iterator with the first. */
  loom_prediction_iter *it2 = loom_estimator_predict(e, input_fn, &pd, &po, st);
  cr_assert(it2, "%s", loom_status_message(st));
  cr_expect_eq(loom_prediction_next(it2, st), LOOM_OK);
  cr_expect_eq(loom_prediction_next(it, st), LOOM_OK);
  cr_expect_eq(loom_tensor_dim(loom_prediction_value(it, 0), 0), 5);
  cr_expect_eq(loom_prediction_next(it, st), LOOM_OK);
  cr_expect_eq(loom_tensor_dim(loom_prediction_value(it, 0), 0), 3);
  cr_expect_eq(loom_prediction_next(it, st), LOOM_OUT_OF_RANGE);
  loom_prediction_iter_free(it);
  loom_prediction_iter_free(it2);
  /* an unknown predict key */
  const char *bad[1] = {"nope"};
  po.predict_keys = bad;
  cr_expect_null(loom_estimator_predict(e, input_fn, &pd, &po, st));
  cr_expect(strstr(loom_status_message(st), "nope"), "%s", loom_status_message(st));
  loom_tensor_free(w);
  loom_tensor_free(bias);
  loom_tensor_free(w2);
  loom_tensor_free(b2);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* A hook recording its calls. */
typedef struct rec_hook {
  char log[512];
  int stop_after;
  int runs;
} rec_hook;
static loom_code rh_begin(void *self, loom_graph *g, loom_status *st) {
  (void)g;
  (void)st;
  strcat(((rec_hook *)self)->log, "B");
  return LOOM_OK;
}
static loom_code rh_acs(void *self, loom_session *s, loom_status *st) {
  (void)s;
  (void)st;
  strcat(((rec_hook *)self)->log, "C");
  return LOOM_OK;
}
static loom_code rh_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  (void)ctx;
  (void)a;
  (void)st;
  rec_hook *h = self;
  if (strlen(h->log) < 500) strcat(h->log, "b");
  return LOOM_OK;
}
static loom_code rh_after(void *self, loom_hook_context *ctx, loom_tensor *const *r, loom_status *st) {
  (void)r;
  (void)st;
  rec_hook *h = self;
  if (strlen(h->log) < 500) strcat(h->log, "a");
  if (++h->runs == h->stop_after) loom_hook_context_request_stop(ctx);
  return LOOM_OK;
}
static loom_code rh_end(void *self, loom_session *s, loom_status *st) {
  (void)s;
  (void)st;
  strcat(((rec_hook *)self)->log, "E");
  return LOOM_OK;
}
static const loom_hook_ops rec_ops = {rh_begin, rh_acs, rh_before, rh_after, rh_end, NULL};

Test(estimator, hooks_fire_in_order_and_stop) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  loom_estimator *e = make_est(dir, &c, NULL);
  rec_hook rh = {{0}, 3, 0};
  loom_hook *h = loom_hook_new(&rec_ops, &rh, "rec");
  loom_train_options o = loom_train_options_default();
  o.steps = 100;
  o.nhooks = 1;
  o.hooks = &h;
  data_opts d = {4, 0, 0, 0};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_estimator_train(e, input_fn, &d, &o, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_str_eq(rh.log, "BCbababaE");
  cr_expect_eq(step_of(e), 3, "stopped after the requesting step");
  loom_hook_free(h);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

Test(estimator, nan_loss_fails) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  loom_estimator *e = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 1, 0};
  loom_train_options o = loom_train_options_default();
  o.steps = 10;
  loom_status *st = loom_status_new();
  cr_expect_neq(loom_estimator_train(e, input_fn, &d, &o, st), LOOM_OK);
  cr_expect(strstr(loom_status_message(st), "NaN loss"), "%s", loom_status_message(st));
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

Test(estimator, spec_validation) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  model_opts mo = {1, 0, 0};
  loom_estimator *e = make_est(dir, &c, &mo);
  data_opts d = {4, 0, 0, 0};
  loom_train_options o = loom_train_options_default();
  o.steps = 1;
  loom_status *st = loom_status_new();
  cr_expect_eq(loom_estimator_train(e, input_fn, &d, &o, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "train_op"), "%s", loom_status_message(st));
  loom_estimator_free(e);
  /* both checkpoint settings */
  c.save_checkpoints_steps = 10;
  c.save_checkpoints_secs = 10;
  cr_expect_null(loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st));
  cr_expect(strstr(loom_status_message(st), "save_checkpoints"), "%s", loom_status_message(st));
  /* model_dir mismatch */
  c = quiet_config();
  c.model_dir = "/tmp/elsewhere";
  cr_expect_null(loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st));
  cr_expect_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  /* no checkpoint yet: variable queries fail cleanly */
  c = quiet_config();
  e = make_est(dir, &c, NULL);
  loom_tensor *t = NULL;
  cr_expect_eq(loom_estimator_get_variable_value(e, "global_step", &t, st), LOOM_FAILED_PRECONDITION);
  loom_estimator_free(e);
  loom_status_free(st);
  tu_rmtree(dir);
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  int64_t dims[2] = {-1, NF};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, dims, "x");
  loom_code rc = loom_features_add(f, "x", x, st);
  if (rc == LOOM_OK) rc = loom_features_add(r, "x", x, st);
  return rc;
}

Test(estimator, export_predictor_matches_predict) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  loom_estimator *e = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 0, 0};
  loom_status *st = loom_status_new();
  char base[128], path[512];
  snprintf(base, sizeof base, "%s/export", dir);
  cr_expect_eq(loom_estimator_export(e, serving_fn, NULL, base, NULL, path, sizeof path, st), LOOM_NOT_FOUND,
               "export without a checkpoint");
  train_ok(e, &d, 8, 0);
  cr_assert_eq(loom_estimator_export(e, serving_fn, NULL, base, NULL, path, sizeof path, st), LOOM_OK, "%s",
               loom_status_message(st));
  cr_expect(strncmp(path, base, strlen(base)) == 0 && !strstr(path, "temp-"), "%s", path);
  loom_predictor *p = loom_predictor_load(path, NULL, st);
  cr_assert(p, "%s", loom_status_message(st));
  data_opts pd = {NX, 1, 0, 0};
  loom_predict_options po = loom_predict_options_default();
  po.yield_single_examples = 0;
  loom_prediction_iter *it = loom_estimator_predict(e, input_fn, &pd, &po, st);
  cr_assert(it);
  cr_assert_eq(loom_prediction_next(it, st), LOOM_OK);
  int64_t xd[2] = {NX, NF};
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, X, NULL);
  int nout = loom_predictor_num_outputs(p, NULL);
  cr_assert_eq(nout, 2);
  loom_tensor *outs[2] = {NULL, NULL};
  cr_assert_eq(loom_predictor_run(p, NULL, 1, &x, nout, outs, st), LOOM_OK, "%s", loom_status_message(st));
  for (int k = 0; k < nout; k++) {
    const loom_tensor *want = loom_prediction_get(it, loom_predictor_output_key(p, NULL, k));
    cr_assert(want, "key %s", loom_predictor_output_key(p, NULL, k));
    cr_assert_eq(loom_tensor_nbytes(outs[k]), loom_tensor_nbytes(want));
    cr_expect(memcmp(loom_tensor_data_const(outs[k]), loom_tensor_data_const(want), loom_tensor_nbytes(want)) == 0,
              "predictor output %s differs from Estimator.predict", loom_predictor_output_key(p, NULL, k));
    loom_tensor_free(outs[k]);
  }
  loom_prediction_iter_free(it);
  loom_tensor_free(x);
  loom_predictor_free(p);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

Test(estimator, warm_start) {
  make_data();
  char d1[TU_TMPDIR_CAP], d2[TU_TMPDIR_CAP];
  tu_tmpdir(d1, sizeof d1, "loom_est");
  tu_tmpdir(d2, sizeof d2, "loom_est");
  loom_run_config c = quiet_config();
  loom_estimator *a = make_est(d1, &c, NULL);
  data_opts d = {4, 0, 0, 0};
  train_ok(a, &d, 6, 0);
  loom_tensor *wa = var_value(a, "linear/kernel");
  loom_status *st = loom_status_new();
  /* model_fn with lr 1e-30: after one step the kernel is (bitwise, nearly) the warm-started value */
  model_opts tiny = {0, 0, 1e-30};
  loom_estimator *b = loom_estimator_new(model_fn, &tiny, d2, &c, NULL, d1, st);
  cr_assert(b, "%s", loom_status_message(st));
  train_ok(b, &d, 1, 0);
  loom_tensor *wb = var_value(b, "linear/kernel");
  const float *x = loom_tensor_data_const(wa), *y = loom_tensor_data_const(wb);
  for (int j = 0; j < NF; j++) cr_expect(fabsf(x[j] - y[j]) < 1e-6f, "kernel[%d] %g vs %g", j, x[j], y[j]);
  cr_expect_eq(step_of(b), 1, "global_step is not warm-started");
  /* a regex that excludes the kernel keeps its initial value 0.1 */
  char d3[TU_TMPDIR_CAP];
  tu_tmpdir(d3, sizeof d3, "loom_est");
  loom_estimator *b2 = loom_estimator_new(model_fn, &tiny, d3, &c, NULL, d1, st);
  cr_assert(b2);
  cr_assert_eq(loom_estimator_set_warm_start_vars(b2, "linear/bias", st), LOOM_OK);
  train_ok(b2, &d, 1, 0);
  loom_tensor *wc = var_value(b2, "linear/kernel");
  cr_expect(fabsf(((const float *)loom_tensor_data_const(wc))[0] - 0.1f) < 1e-6f, "kernel not warm-started");
  /* a missing warm-start source is an error naming it */
  char d4[TU_TMPDIR_CAP];
  tu_tmpdir(d4, sizeof d4, "loom_est");
  loom_estimator *b3 = loom_estimator_new(model_fn, NULL, d4, &c, NULL, "/nonexistent/ckpt", st);
  loom_train_options o = loom_train_options_default();
  o.steps = 1;
  cr_expect_eq(loom_estimator_train(b3, input_fn, &d, &o, st), LOOM_NOT_FOUND);
  cr_expect(strstr(loom_status_message(st), "/nonexistent/ckpt"), "%s", loom_status_message(st));
  loom_tensor_free(wa);
  loom_tensor_free(wb);
  loom_tensor_free(wc);
  loom_estimator_free(a);
  loom_estimator_free(b);
  loom_estimator_free(b2);
  loom_estimator_free(b3);
  loom_status_free(st);
  tu_rmtree(d1);
  tu_rmtree(d2);
  tu_rmtree(d3);
  tu_rmtree(d4);
}

Test(estimator, in_memory_evaluation_and_early_stopping) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  c.save_checkpoints_secs = 0;
  c.save_checkpoints_steps = 0; /* no checkpoints at all */
  loom_estimator *e = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 0, 0}, ed = {8, 1, 0, 0};
  loom_status *st = loom_status_new();
  loom_hook *h = loom_in_memory_evaluator_hook(e, input_fn, &ed, 0, NULL, 5, st);
  cr_assert(h, "%s", loom_status_message(st));
  loom_train_options o = loom_train_options_default();
  o.steps = 20;
  o.nhooks = 1;
  o.hooks = &h;
  cr_assert_eq(loom_estimator_train(e, input_fn, &d, &o, st), LOOM_OK, "%s", loom_status_message(st));
  const loom_eval_result *r = loom_in_memory_evaluator_last(h);
  cr_assert(r);
  cr_expect_eq(loom_eval_result_global_step(r), 20);
  double loss;
  cr_expect_eq(loom_eval_result_get(r, "loss", &loss, NULL), LOOM_OK);
  cr_expect(loss >= 0 && loss < 1.0, "loss after 20 steps %g", loss);
  char latest[256];
  cr_expect_neq(loom_estimator_latest_checkpoint(e, latest, sizeof latest, NULL), LOOM_OK, "no checkpoint was needed");
  loom_hook_free(h);
  /* stop_if_lower: loss < 10 holds at the first evaluation (step 4) */
  loom_hook *es = loom_stop_if_hook(e, input_fn, &ed, 0, LOOM_STOP_IF_LOWER, "loss", 10.0, 0, 4, st);
  cr_assert(es, "%s", loom_status_message(st));
  o.steps = 100;
  o.hooks = &es;
  cr_assert_eq(loom_estimator_train(e, input_fn, &d, &o, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(loom_eval_result_global_step(loom_in_memory_evaluator_last(es)), 4,
               "early stop at the first evaluation (fresh session: steps restart without a checkpoint)");
  loom_hook_free(es);
  cr_expect_null(loom_stop_if_hook(e, input_fn, &ed, 0, LOOM_STOP_IF_LOWER, NULL, 1.0, 0, 4, st));
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* The steps of the evaluations (events with "loss") in an eval dir, sorted. */
static int eval_steps(const char *eval_dir, int64_t *steps, int cap) {
  int n = 0;
  DIR *d = opendir(eval_dir);
  cr_assert(d, "no eval dir %s", eval_dir);
  struct dirent *de;
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, "events.out.tfevents", 19)) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", eval_dir, de->d_name);
    loom_event_reader *r = loom_event_reader_open(path, NULL);
    cr_assert(r);
    const loom_event *ev;
    while (loom_event_reader_next(r, &ev, NULL) == LOOM_OK)
      for (int i = 0; i < ev->nvalues; i++)
        if (!strcmp(ev->values[i].tag, "loss") && n < cap) steps[n++] = ev->step;
    loom_event_reader_free(r);
  }
  closedir(d);
  for (int i = 1; i < n; i++) /* files in any order: the steps sorted */
    for (int j = i; j > 0 && steps[j - 1] > steps[j]; j--) {
      int64_t t = steps[j];
      steps[j] = steps[j - 1];
      steps[j - 1] = t;
    }
  return n;
}

Test(estimator, in_memory_evaluator_tf_schedule) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  c.save_checkpoints_secs = 0;
  c.save_checkpoints_steps = 100;
  loom_estimator *e = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 0, 0}, ed = {8, 1, 0, 0};
  loom_status *st = loom_status_new();
  /* TF's InMemoryEvaluatorHook: at session creation, every 3 steps of the call, at its end */
  loom_hook *h = loom_in_memory_evaluator_hook_tf(e, input_fn, &ed, 0, "mem", 3, st);
  cr_assert(h, "%s", loom_status_message(st));
  loom_train_options o = loom_train_options_default();
  o.steps = 6;
  o.nhooks = 1;
  o.hooks = &h;
  cr_assert_eq(loom_estimator_train(e, input_fn, &d, &o, st), LOOM_OK, "%s", loom_status_message(st));
  o.steps = 4; /* a second call on the same hook: its own count of steps */
  cr_assert_eq(loom_estimator_train(e, input_fn, &d, &o, st), LOOM_OK, "%s", loom_status_message(st));
  loom_hook_free(h);
  char ed_dir[1024];
  int64_t got[16];
  int n = eval_steps(loom_estimator_eval_dir(e, "mem", ed_dir, sizeof ed_dir), got, 16);
  const int64_t want[] = {0, 3, 6, 6, 6, 9, 10};
  cr_assert_eq(n, 7, "%d evaluations", n);
  for (int i = 0; i < n; i++) cr_expect_eq(got[i], want[i], "evaluation %d at step %lld", i, (long long)got[i]);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* tf.estimator.add_metrics in C: a model_fn that builds another estimator's
 * model, reads its predictions and adds / replaces eval metrics. */
static loom_code add_metrics_model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                                      const loom_params *params, const loom_run_config *cfg,
                                      loom_estimator_spec *spec, void *user, loom_status *st) {
  (void)params;
  (void)cfg;
  loom_code rc = loom_estimator_call_model_fn(user, g, f, labels, mode, spec, st);
  if (rc != LOOM_OK || mode != LOOM_MODE_EVAL) return rc;
  cr_assert_eq(loom_spec_prediction_count(spec), 2);
  cr_assert_str_eq(loom_spec_prediction_key(spec, 1), "doubled");
  cr_assert_null(loom_spec_prediction_key(spec, 2));
  cr_assert_null(loom_spec_prediction_value(spec, -1).node);
  loom_output doubled = loom_spec_prediction_value(spec, 1), none = {NULL, 0};
  loom_spec_put_eval_metric(spec, "mean_doubled", loom_metrics_mean(g, doubled, none, NULL));
  return loom_spec_put_eval_metric(spec, "mae", loom_metrics_mean(g, doubled, none, NULL)); /* replaces "mae" */
}

Test(estimator, call_model_fn_wraps_another_estimator) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  loom_estimator *inner = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 0, 0}, ed = {8, 1, 0, 0};
  train_ok(inner, &d, 5, 0);
  loom_status *st = loom_status_new();
  loom_estimator *e = loom_estimator_new(add_metrics_model_fn, inner, dir, &c, NULL, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  loom_eval_options eo = loom_eval_options_default();
  loom_eval_result *r = NULL, *ri = NULL;
  cr_assert_eq(loom_estimator_evaluate(e, input_fn, &ed, &eo, &r, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_estimator_evaluate(inner, input_fn, &ed, &eo, &ri, st), LOOM_OK, "%s", loom_status_message(st));
  double loss, iloss, mae, md;
  cr_assert_eq(loom_eval_result_get(r, "loss", &loss, NULL), LOOM_OK);
  cr_assert_eq(loom_eval_result_get(ri, "loss", &iloss, NULL), LOOM_OK);
  cr_expect(fabs(loss - iloss) < 1e-9, "the same model: loss %g vs %g", loss, iloss);
  cr_assert_eq(loom_eval_result_get(r, "mae", &mae, NULL), LOOM_OK);
  cr_assert_eq(loom_eval_result_get(r, "mean_doubled", &md, NULL), LOOM_OK);
  cr_expect(fabs(mae - md) < 1e-9, "mae replaced by the mean of doubled: %g vs %g", mae, md);
  cr_expect_eq(loom_eval_result_count(r), 4);
  cr_expect_eq(loom_eval_result_global_step(r), 5);
  cr_expect_neq(loom_estimator_call_model_fn(NULL, NULL, NULL, (loom_output){NULL, 0}, LOOM_MODE_EVAL, NULL, st),
                LOOM_OK);
  loom_eval_result_free(r);
  loom_eval_result_free(ri);
  loom_status_free(st);
  loom_estimator_free(e);
  loom_estimator_free(inner);
  tu_rmtree(dir);
}

/* Counts allocations between two steps of a training run. */
typedef struct alloc_probe {
  int64_t step, from, to;
  long at_from, at_to;
} alloc_probe;
static loom_code probe_after(void *self, loom_hook_context *ctx, loom_tensor *const *r, loom_status *st) {
  (void)ctx;
  (void)r;
  (void)st;
  alloc_probe *p = self;
  ++p->step;
  if (p->step == p->from) p->at_from = tu_alloc_count();
  if (p->step == p->to) p->at_to = tu_alloc_count();
  return LOOM_OK;
}

Test(estimator, training_steps_do_not_allocate) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  c.log_step_count_steps = 100000; /* no periodic log lines or summaries in the window */
  c.save_summary_steps = 100000;
  loom_estimator *e = make_est(dir, &c, NULL);
  data_opts d = {4, 0, 0, 0};
  /* steps 20..140 span 20 passes over the data (6 batches each): the input
   * pipeline's ends and restarts, the default hooks, the feeds and runs */
  alloc_probe p = {0, 20, 140, -1, -1};
  static const loom_hook_ops probe_ops = {NULL, NULL, NULL, probe_after, NULL, NULL};
  loom_hook *h = loom_hook_new(&probe_ops, &p, "probe");
  loom_train_options o = loom_train_options_default();
  o.steps = 150;
  o.nhooks = 1;
  o.hooks = &h;
  tu_alloc_count_begin();
  loom_status *st = loom_status_new();
  loom_code rc = loom_estimator_train(e, input_fn, &d, &o, st);
  tu_alloc_count_end();
  cr_assert_eq(rc, LOOM_OK, "%s", loom_status_message(st));
  cr_assert(p.at_from >= 0 && p.at_to >= 0);
  cr_expect_eq(p.at_to - p.at_from, 0, "120 training steps allocated %ld times", p.at_to - p.at_from);
  loom_status_free(st);
  loom_hook_free(h);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* ---- EstimatorSpec setters: return codes and the sticky spec error ---- */
typedef struct setter_probe {
  int which;            /* 0: bad arguments; 1: out of memory in add_prediction */
  loom_code rc[12];
  int destroyed;        /* hooks destroyed */
} setter_probe;

static void probe_destroy(void *self) { ++*(int *)self; }
static const loom_hook_ops probe_hook_ops = {NULL, NULL, NULL, NULL, NULL, probe_destroy};

static void *fail_malloc(size_t n, void *u) {
  (void)n;
  (void)u;
  return NULL;
}
static void *fail_realloc(void *p, size_t n, void *u) {
  (void)p;
  (void)n;
  (void)u;
  return NULL;
}
static void libc_free(void *p, void *u) {
  (void)u;
  free(p);
}

static loom_code bad_setters_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                                const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec,
                                void *user, loom_status *st) {
  setter_probe *p = user;
  loom_code rc = model_fn(g, f, labels, mode, params, cfg, spec, NULL, st); /* a valid spec first */
  if (rc != LOOM_OK) return rc;
  loom_output x = loom_features_get(f, "x");
  loom_output none = {NULL, 0};
  if (p->which == 1) {
    static const loom_allocator failing = {fail_malloc, fail_realloc, libc_free, NULL};
    loom_set_allocator(&failing);
    p->rc[0] = loom_spec_add_prediction(spec, "x_again", x);
    loom_set_allocator(NULL);
    p->rc[1] = loom_spec_add_prediction(spec, "x_after", x); /* memory is back: this one works */
    return LOOM_OK;
  }
  p->rc[0] = loom_spec_add_prediction(spec, "predictions", x); /* duplicate key: the first failure */
  p->rc[1] = loom_spec_add_prediction(spec, NULL, x);
  p->rc[2] = loom_spec_add_prediction(spec, "nothing", none);
  p->rc[3] = loom_spec_add_eval_metric(spec, "global_step", loom_metrics_mean(g, x, none, NULL));
  p->rc[4] = loom_spec_add_eval_metric(spec, "mae", loom_metrics_mean(g, x, none, NULL)); /* duplicate */
  loom_metric empty;
  memset(&empty, 0, sizeof empty);
  p->rc[5] = loom_spec_add_eval_metric(spec, "empty", empty);
  p->rc[6] = loom_spec_set_loss(spec, none);
  p->rc[7] = loom_spec_set_train_op(spec, NULL);
  p->rc[8] = loom_spec_add_hook(spec, (loom_hook_slot)7, loom_hook_new(&probe_hook_ops, &p->destroyed, "bad_slot"));
  p->rc[9] = loom_spec_add_hook(spec, LOOM_HOOKS_TRAINING, NULL);
  const char *key = "out";
  p->rc[10] = loom_spec_add_export_output(spec, "serving_default", LOOM_EXPORT_PREDICT, 0, &key, &x);
  p->rc[11] = loom_spec_add_export_output(spec, "serving_default", LOOM_EXPORT_PREDICT, 1, &key, &x); /* valid */
  return LOOM_OK;
}

Test(estimator, spec_setters_null_spec) {
  loom_output none = {NULL, 0};
  loom_metric m;
  memset(&m, 0, sizeof m);
  const char *key = "k";
  cr_assert_eq(loom_spec_set_loss(NULL, none), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_spec_set_train_op(NULL, NULL), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_spec_add_prediction(NULL, "k", none), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_spec_add_eval_metric(NULL, "k", m), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_spec_add_export_output(NULL, NULL, LOOM_EXPORT_PREDICT, 1, &key, &none), LOOM_INVALID_ARGUMENT);
  /* the hook is taken over even when the call fails */
  int destroyed = 0;
  cr_assert_eq(loom_spec_add_hook(NULL, LOOM_HOOKS_TRAINING, loom_hook_new(&probe_hook_ops, &destroyed, "h")),
               LOOM_INVALID_ARGUMENT);
  cr_assert_eq(destroyed, 1);
}

Test(estimator, spec_setters_report_bad_arguments_and_validation_names_the_setter) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  setter_probe p;
  memset(&p, 0, sizeof p);
  loom_status *st = loom_status_new();
  loom_estimator *e = loom_estimator_new(bad_setters_fn, &p, dir, &c, NULL, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  data_opts d = {4, 0, 0, 0};
  loom_train_options o = loom_train_options_default();
  o.steps = 1;
  loom_code rc = loom_estimator_train(e, input_fn, &d, &o, st);
  for (int i = 0; i < 11; i++) cr_expect_eq(p.rc[i], LOOM_INVALID_ARGUMENT, "setter call %d returned %d", i, p.rc[i]);
  cr_expect_eq(p.rc[11], LOOM_OK);
  cr_expect_eq(p.destroyed, 1, "the hook given with a bad slot was freed");
  cr_assert_eq(rc, LOOM_INVALID_ARGUMENT, "%s", loom_status_message(st));
  cr_expect_str_eq(loom_status_message(st),
                   "EstimatorSpec: loom_spec_add_prediction: duplicate prediction key 'predictions'");
  loom_tensor *t = NULL; /* no step ran: no checkpoint was written */
  cr_expect_eq(loom_estimator_get_variable_value(e, "global_step", &t, NULL), LOOM_FAILED_PRECONDITION);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

Test(estimator, spec_setter_out_of_memory_is_reported_at_validation) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est");
  loom_run_config c = quiet_config();
  setter_probe p;
  memset(&p, 0, sizeof p);
  p.which = 1;
  loom_status *st = loom_status_new();
  loom_estimator *e = loom_estimator_new(bad_setters_fn, &p, dir, &c, NULL, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  data_opts d = {4, 0, 0, 0};
  loom_train_options o = loom_train_options_default();
  o.steps = 1;
  loom_code rc = loom_estimator_train(e, input_fn, &d, &o, st);
  cr_expect_eq(p.rc[0], LOOM_RESOURCE_EXHAUSTED);
  cr_expect_eq(p.rc[1], LOOM_OK);
  cr_assert_eq(rc, LOOM_RESOURCE_EXHAUSTED, "%s", loom_status_message(st));
  cr_expect_str_eq(loom_status_message(st),
                   "EstimatorSpec: loom_spec_add_prediction: out of memory adding 'x_again'");
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}
