/* train_and_evaluate (local mode): evaluations follow checkpoint saves and
 * the throttle, the returned metrics equal a separate evaluate of the final
 * checkpoint (in process and through the checkpoint with eval hooks),
 * LatestExporter keeps N exports holding the right checkpoints, BestExporter
 * exports only on improvement and reloads the best from the eval events
 * after a restart, FinalExporter exports once and its export predicts like
 * the estimator, spec errors name the field. */
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "test_util.h"

/* ---- a linear regression, 3 features: train on y = x.(1,2,3) + 0.5 ---- */
#define NX 24
#define NF 3
static float X[NX * NF], Y[NX], YMID[NX];

static void make_data(void) {
  for (int i = 0; i < NX; i++) {
    float y = 0.5f, ym = 0.25f;
    for (int j = 0; j < NF; j++) {
      X[i * NF + j] = (float)((i * 7 + j * 3) % 11) / 11.0f - 0.4f;
      y += (float)(j + 1) * X[i * NF + j];
      ym += 0.5f * (float)(j + 1) * X[i * NF + j];
    }
    Y[i] = y;
    YMID[i] = ym;
  }
}

typedef struct data_opts {
  int64_t batch;
  int64_t epochs;  /* <= 0: forever */
  const float *y;  /* labels (NULL: Y) */
  float ysign;     /* labels times this (0: 1) */
  int shuffle;     /* seeded shuffle, reshuffled each pass */
} data_opts;

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)mode;
  (void)p;
  data_opts *o = user;
  int64_t xd[2] = {NX, NF}, yd[2] = {NX, 1};
  float ybuf[NX];
  for (int i = 0; i < NX; i++) ybuf[i] = (o->y ? o->y[i] : Y[i]) * (o->ysign != 0 ? o->ysign : 1.0f);
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, X, NULL);
  loom_tensor *y = loom_tensor_from_data(LOOM_F32, 2, yd, ybuf, NULL);
  const char *names[2] = {"x", "y"};
  const loom_tensor *arr[2] = {x, y};
  loom_dataset *ds = loom_dataset_from_tensors(2, names, arr, "y", st);
  loom_tensor_free(x);
  loom_tensor_free(y);
  if (ds && o->shuffle) ds = loom_dataset_shuffle(ds, NX, 1234, 1, st);
  if (ds) ds = loom_dataset_repeat(ds, o->epochs > 0 ? o->epochs : -1, st);
  if (ds) ds = loom_dataset_batch(ds, o->batch, 0, st);
  return ds;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)cfg;
  (void)st;
  (void)user;
  loom_output x = loom_features_get(f, "x");
  loom_dense_options d = loom_dense_options_default();
  d.kernel_initializer = loom_init_constant(0.1);
  loom_output pred = loom_layers_dense(g, x, 1, &d, "linear");
  loom_spec_add_prediction(spec, "predictions", pred);
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_output zero = {NULL, 0};
  loom_output loss =
      loom_losses_mean_squared_error(g, labels, pred, zero, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  loom_spec_add_eval_metric(spec, "mae", loom_metrics_mean_absolute_error(g, labels, pred, zero, NULL));
  if (mode == LOOM_MODE_TRAIN) {
    double lr = loom_params_get_double(params, "learning_rate", 0.2);
    loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, (float)lr, "lr"));
    loom_node *op = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL);
    loom_optimizer_free(opt);
    loom_spec_set_train_op(spec, op);
  }
  return LOOM_OK;
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  int64_t dims[2] = {-1, NF};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, dims, "x");
  loom_code rc = loom_features_add(f, "x", x, st);
  if (rc == LOOM_OK) rc = loom_features_add(r, "x", x, st);
  return rc;
}

static loom_run_config config(int64_t save_steps) {
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  c.save_checkpoints_steps = save_steps;
  c.keep_checkpoint_max = 0; /* keep all: exports are compared with them */
  c.save_summary_steps = 0;
  return c;
}

static loom_estimator *make_est(const char *dir, int64_t save_steps) {
  loom_status *st = loom_status_new();
  loom_run_config c = config(save_steps);
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
  cr_assert(e, "estimator: %s", loom_status_message(st));
  loom_status_free(st);
  return e;
}

static loom_tae_result *tae_ok(loom_estimator *e, const loom_train_spec *ts, const loom_eval_spec *es) {
  loom_status *st = loom_status_new();
  loom_tae_result *r = NULL;
  loom_code rc = loom_train_and_evaluate(e, ts, es, &r, st);
  cr_assert_eq(rc, LOOM_OK, "train_and_evaluate: %s", loom_status_message(st));
  cr_assert(r);
  loom_status_free(st);
  return r;
}

static double metric(const loom_eval_result *r, const char *key) {
  double v = NAN;
  cr_assert_eq(loom_eval_result_get(r, key, &v, NULL), LOOM_OK, "metric %s missing", key);
  return v;
}

/* Every scalar `tag` in the event files of dir, in file then record order. */
static int read_scalars(const char *dir, const char *tag, double *vals, int64_t *steps, int cap) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  char names[64][256];
  int nf = 0;
  struct dirent *de;
  while ((de = readdir(d)) && nf < 64)
    if (!strncmp(de->d_name, "events.out.tfevents.", 20)) snprintf(names[nf++], 256, "%s", de->d_name);
  closedir(d);
  for (int i = 1; i < nf; i++) /* sort by name: creation order */
    for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char t[256];
      memcpy(t, names[j], 256);
      memcpy(names[j], names[j - 1], 256);
      memcpy(names[j - 1], t, 256);
    }
  int n = 0;
  for (int f = 0; f < nf; f++) {
    char path[20000];
    snprintf(path, sizeof path, "%s/%s", dir, names[f]);
    loom_event_reader *r = loom_event_reader_open(path, NULL);
    cr_assert(r, "open %s", path);
    const loom_event *ev;
    while (loom_event_reader_next(r, &ev, NULL) == LOOM_OK)
      for (int i = 0; i < ev->nvalues; i++)
        if (!strcmp(ev->values[i].tag, tag) && n < cap) {
          vals[n] = ev->values[i].simple_value;
          steps[n++] = ev->step;
        }
    loom_event_reader_free(r);
  }
  return n;
}

/* The timestamped export directories under dir, ascending. */
static int list_exports(const char *dir, long long *ts, int cap) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    cr_assert(strspn(de->d_name, "0123456789") == strlen(de->d_name), "unexpected entry %s/%s", dir, de->d_name);
    if (n < cap) ts[n++] = atoll(de->d_name);
  }
  closedir(d);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && ts[j - 1] > ts[j]; j--) {
      long long t = ts[j];
      ts[j] = ts[j - 1];
      ts[j - 1] = t;
    }
  return n;
}

static int same_tensor(const loom_tensor *a, const loom_tensor *b) {
  return loom_tensor_nbytes(a) == loom_tensor_nbytes(b) &&
         !memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), loom_tensor_nbytes(a));
}

/* The export at dir holds the kernel and bias of model.ckpt-<step>. */
static int export_holds_step(const char *model_dir, const char *export_dir, int64_t step) {
  char ck[1024], ev[1024];
  snprintf(ck, sizeof ck, "%s/model.ckpt-%lld", model_dir, (long long)step);
  snprintf(ev, sizeof ev, "%s/variables/variables.ckpt", export_dir);
  int same = 1;
  const char *vars[2] = {"linear/kernel", "linear/bias"};
  for (int i = 0; i < 2; i++) {
    loom_tensor *a = NULL, *b = NULL;
    cr_assert_eq(loom_checkpoint_read_tensor(ck, vars[i], &a, NULL), LOOM_OK, "%s in %s", vars[i], ck);
    cr_assert_eq(loom_checkpoint_read_tensor(ev, vars[i], &b, NULL), LOOM_OK, "%s in %s", vars[i], ev);
    same &= same_tensor(a, b);
    loom_tensor_free(a);
    loom_tensor_free(b);
  }
  return same;
}

/* ====================================================================== */
Test(train_and_evaluate, defaults_and_spec_errors_name_the_field) {
  make_data();
  loom_train_spec ts = loom_train_spec_default();
  loom_eval_spec es = loom_eval_spec_default();
  cr_expect_eq(ts.max_steps, 0);
  cr_expect_eq(es.steps, 100);
  cr_expect_eq(es.start_delay_secs, 120.0);
  cr_expect_eq(es.throttle_secs, 600.0);
  cr_expect_eq(es.name, NULL);

  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  loom_estimator *e = make_est(dir, 10);
  data_opts d = {4, 0, NULL, 0, 0};
  loom_status *st = loom_status_new();
  loom_exporter *a = loom_latest_exporter("same", serving_fn, NULL, 5, st);
  loom_exporter *b = loom_final_exporter("same", serving_fn, NULL, st);
  cr_assert(a && b, "%s", loom_status_message(st));
  struct {
    const char *what;
    int field;
    const char *want;
  } cases[] = {
      {"train input_fn NULL", 0, "TrainSpec.input_fn"},
      {"max_steps < 0", 1, "TrainSpec.max_steps"},
      {"eval input_fn NULL", 2, "EvalSpec.input_fn"},
      {"eval steps < 0", 3, "EvalSpec.steps"},
      {"throttle < 0", 4, "EvalSpec.throttle_secs"},
      {"start delay < 0", 5, "EvalSpec.start_delay_secs"},
      {"exporter name reused", 6, "'same' is used by exporters 0 and 1"},
      {"NULL exporter", 7, "EvalSpec.exporters[1] is NULL"},
      {"NULL train hook", 8, "TrainSpec.hooks[0] is NULL"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    loom_train_spec t = loom_train_spec_default();
    t.input_fn = input_fn;
    t.input_user = &d;
    t.max_steps = 20;
    loom_eval_spec v = loom_eval_spec_default();
    v.input_fn = input_fn;
    v.input_user = &d;
    loom_exporter *two[2] = {a, b};
    loom_exporter *with_null[2] = {a, NULL};
    loom_hook *no_hook[1] = {NULL};
    switch (cases[k].field) {
    case 0: t.input_fn = NULL; break;
    case 1: t.max_steps = -1; break;
    case 2: v.input_fn = NULL; break;
    case 3: v.steps = -5; break;
    case 4: v.throttle_secs = -1; break;
    case 5: v.start_delay_secs = -0.5; break;
    case 6: v.nexporters = 2; v.exporters = two; break;
    case 7: v.nexporters = 2; v.exporters = with_null; break;
    case 8: t.nhooks = 1; t.hooks = no_hook; break;
    }
    loom_tae_result *r = (loom_tae_result *)1;
    loom_status_clear(st);
    cr_expect_eq(loom_train_and_evaluate(e, &t, &v, &r, st), LOOM_INVALID_ARGUMENT, "%s", cases[k].what);
    cr_expect(strstr(loom_status_message(st), cases[k].want), "%s: message '%s' lacks '%s'", cases[k].what,
              loom_status_message(st), cases[k].want);
    cr_expect_eq(r, NULL, "%s: *out not NULL", cases[k].what);
  }
  char ck[1024];
  cr_expect_neq(loom_estimator_latest_checkpoint(e, ck, sizeof ck, NULL), LOOM_OK, "a bad spec trained");
  /* checkpointing off: nothing would trigger an evaluation */
  {
    loom_run_config c = config(0);
    c.save_checkpoints_secs = 0;
    loom_estimator *e2 = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
    cr_assert(e2, "%s", loom_status_message(st));
    loom_train_spec t = loom_train_spec_default();
    t.input_fn = input_fn;
    t.input_user = &d;
    loom_eval_spec v = loom_eval_spec_default();
    v.input_fn = input_fn;
    v.input_user = &d;
    loom_tae_result *r = NULL;
    cr_expect_eq(loom_train_and_evaluate(e2, &t, &v, &r, st), LOOM_INVALID_ARGUMENT);
    cr_expect(strstr(loom_status_message(st), "save_checkpoints_steps"), "%s", loom_status_message(st));
    loom_estimator_free(e2);
  }
  /* exporter constructors */
  cr_expect_eq(loom_latest_exporter("a/b", serving_fn, NULL, 5, st), NULL);
  cr_expect(strstr(loom_status_message(st), "LatestExporter") && strstr(loom_status_message(st), "'a/b'"), "%s",
            loom_status_message(st));
  cr_expect_eq(loom_latest_exporter("x", serving_fn, NULL, -1, st), NULL);
  cr_expect(strstr(loom_status_message(st), "exports_to_keep"), "%s", loom_status_message(st));
  cr_expect_eq(loom_final_exporter("x", NULL, NULL, st), NULL);
  cr_expect(strstr(loom_status_message(st), "serving_input_receiver_fn"), "%s", loom_status_message(st));
  loom_exporter *best = loom_best_exporter(NULL, serving_fn, NULL, NULL, NULL, 5, st);
  cr_expect_str_eq(loom_exporter_name(best), "best_exporter");
  cr_expect_eq(loom_best_exporter_best(best), NULL);
  cr_expect_eq(loom_best_exporter_best(a), NULL, "not a BestExporter");
  loom_exporter_free(best);
  loom_exporter_free(a);
  loom_exporter_free(b);
  loom_exporter_free(NULL);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* Evaluations after every save but the first, plus the final one; the
 * returned metrics equal evaluate() of the final checkpoint. */

static int hook_begins;
static loom_code count_begin(void *self, loom_graph *g, loom_status *st) {
  (void)self;
  (void)g;
  (void)st;
  hook_begins++;
  return LOOM_OK;
}

static void count_case(int64_t save, int64_t max_steps, double throttle, int use_eval_hook, int want_n,
                       const int64_t *want_steps, double *out_loss, double *out_mae) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  loom_estimator *e = make_est(dir, save);
  data_opts d = {4, 0, NULL, 0, 0}, ed = {6, 1, NULL, 0, 0};
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  ts.max_steps = max_steps;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &ed;
  es.steps = 0; /* the whole eval set */
  es.name = "holdout";
  es.throttle_secs = throttle;
  static const loom_hook_ops ops = {count_begin, NULL, NULL, NULL, NULL, NULL};
  loom_hook *h = use_eval_hook ? loom_hook_new(&ops, NULL, "count") : NULL;
  if (h) {
    es.nhooks = 1;
    es.hooks = &h;
  }
  hook_begins = 0;
  loom_tae_result *r = tae_ok(e, &ts, &es);
  cr_expect_eq(loom_tae_result_num_evaluations(r), want_n, "save %lld max %lld throttle %g: %d evaluations, want %d",
               (long long)save, (long long)max_steps, throttle, loom_tae_result_num_evaluations(r), want_n);
  for (int i = 0; i < want_n && i < loom_tae_result_num_evaluations(r); i++)
    cr_expect_eq(loom_tae_result_evaluation_step(r, i), want_steps[i], "evaluation %d at step %lld, want %lld", i,
                 (long long)loom_tae_result_evaluation_step(r, i), (long long)want_steps[i]);
  if (use_eval_hook) cr_expect_eq(hook_begins, want_n, "eval hook begun %d times", hook_begins);
  /* the eval events: one loss per evaluation, at those steps */
  char evdir[1024];
  snprintf(evdir, sizeof evdir, "%s/eval_holdout", dir);
  double losses[64];
  int64_t steps[64];
  int n = read_scalars(evdir, "loss", losses, steps, 64);
  cr_expect_eq(n, want_n, "%d eval events", n);
  for (int i = 0; i < n && i < want_n; i++) cr_expect_eq(steps[i], want_steps[i]);
  const loom_eval_result *m = loom_tae_result_metrics(r);
  cr_assert(m);
  cr_expect_eq(loom_eval_result_global_step(m), max_steps);
  cr_expect_eq(loom_tae_result_num_exports(r), 0);
  /* a separate evaluation of the final checkpoint */
  loom_status *st = loom_status_new();
  loom_eval_options eo = loom_eval_options_default();
  eo.name = "again";
  loom_eval_result *again = NULL;
  cr_assert_eq(loom_estimator_evaluate(e, input_fn, &ed, &eo, &again, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(loom_eval_result_global_step(again), max_steps);
  cr_expect_eq(metric(m, "loss"), metric(again, "loss"), "loss %.9g vs evaluate %.9g", metric(m, "loss"),
               metric(again, "loss"));
  cr_expect_eq(metric(m, "mae"), metric(again, "mae"), "mae %.9g vs evaluate %.9g", metric(m, "mae"),
               metric(again, "mae"));
  cr_expect_eq(losses[n - 1], (double)(float)metric(m, "loss"), "last event loss");
  cr_expect(metric(m, "loss") < 0.5 * losses[0] || n == 1, "training did not reduce the loss: %g -> %g", losses[0],
            metric(m, "loss"));
  if (out_loss) *out_loss = metric(m, "loss");
  if (out_mae) *out_mae = metric(m, "mae");
  loom_eval_result_free(again);
  loom_hook_free(h);
  loom_status_free(st);
  loom_tae_result_free(r);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

Test(train_and_evaluate, evaluations_follow_saves_and_throttle) {
  make_data();
  /* throttle 0: after every save but the one at session creation */
  int64_t s1[] = {10, 20, 30, 40, 50};
  double l1, m1;
  count_case(10, 50, 0, 0, 5, s1, &l1, &m1);
  /* max_steps off the save grid: the final save (45) is evaluated at the end */
  int64_t s2[] = {10, 20, 30, 40, 45};
  count_case(10, 45, 0, 0, 5, s2, NULL, NULL);
  /* a long throttle: the first save after creation, then only the final one */
  int64_t s3[] = {10, 50};
  double l3, m3;
  count_case(10, 50, 3600, 0, 2, s3, &l3, &m3);
  /* the same training ends in the same final metrics */
  cr_expect_eq(l1, l3);
  cr_expect_eq(m1, m3);
  /* saves every 25: evaluations at 25 and 50 */
  int64_t s4[] = {25, 50};
  count_case(25, 50, 0, 0, 2, s4, NULL, NULL);
}

Test(train_and_evaluate, eval_hooks_evaluate_the_checkpoint_like_in_process) {
  make_data();
  int64_t s1[] = {10, 20, 30};
  double l_in, m_in, l_ck, m_ck;
  count_case(10, 30, 0, 0, 3, s1, &l_in, &m_in);
  count_case(10, 30, 0, 1, 3, s1, &l_ck, &m_ck); /* with an eval hook: evaluate() of each checkpoint */
  cr_expect_eq(l_in, l_ck, "in process %.9g, from the checkpoint %.9g", l_in, l_ck);
  cr_expect_eq(m_in, m_ck);
}

Test(train_and_evaluate, latest_exporter_keeps_n_exports_of_the_right_checkpoints) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  loom_estimator *e = make_est(dir, 10);
  data_opts d = {4, 0, NULL, 0, 0}, ed = {6, 1, NULL, 0, 0};
  loom_status *st = loom_status_new();
  loom_exporter *x = loom_latest_exporter("latest", serving_fn, NULL, 3, st);
  cr_assert(x, "%s", loom_status_message(st));
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  ts.max_steps = 60;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &ed;
  es.steps = 0;
  es.throttle_secs = 0;
  es.nexporters = 1;
  es.exporters = &x;
  loom_tae_result *r = tae_ok(e, &ts, &es);
  cr_expect_eq(loom_tae_result_num_evaluations(r), 6);
  cr_assert_eq(loom_tae_result_num_exports(r), 1);
  cr_expect_str_eq(loom_tae_result_export_name(r, 0), "latest");
  char base[1024];
  snprintf(base, sizeof base, "%s/export/latest", dir);
  long long ts_[16];
  int n = list_exports(base, ts_, 16);
  cr_assert_eq(n, 3, "%d exports kept, want 3", n);
  char want[1200];
  snprintf(want, sizeof want, "%s/%lld", base, ts_[2]);
  cr_expect_str_eq(loom_tae_result_export_path(r, 0), want, "the last export is the newest");
  /* the kept ones are the exports of steps 40, 50, 60, oldest first */
  for (int i = 0; i < 3; i++) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%lld", base, ts_[i]);
    cr_expect(export_holds_step(dir, p, 40 + 10 * i), "export %s does not hold step %d", p, 40 + 10 * i);
    cr_expect(!export_holds_step(dir, p, 30), "export %s holds step 30", p);
  }
  /* a second run on the same model_dir (already at max_steps) evaluates and exports once more, keeping 3 */
  loom_tae_result *r2 = tae_ok(e, &ts, &es);
  cr_expect_eq(loom_tae_result_num_evaluations(r2), 1);
  cr_expect_eq(loom_tae_result_evaluation_step(r2, 0), 60);
  long long ts2[16];
  cr_expect_eq(list_exports(base, ts2, 16), 3);
  cr_expect_eq(ts2[0], ts_[1], "the oldest was collected");
  cr_expect(ts2[2] > ts_[2], "timestamps grow with export order");
  loom_tae_result_free(r2);
  loom_tae_result_free(r);
  loom_exporter_free(x);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* Trains toward y = x.(1,2,3) + 0.5 while evaluating on labels half-way
 * there: the eval loss falls, then rises once the weights pass the middle.
 * BestExporter exports exactly at the evaluations that set a new minimum;
 * after a restart it reloads that minimum from the eval events and exports
 * nothing worse. */
Test(train_and_evaluate, best_exporter_exports_on_improvement_and_reloads_after_restart) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  loom_estimator *e = make_est(dir, 10);
  data_opts d = {4, 0, NULL, 0, 0}, ed = {6, 1, YMID, 0, 0};
  loom_status *st = loom_status_new();
  loom_exporter *x = loom_best_exporter("best", serving_fn, NULL, NULL, NULL, 0, st);
  cr_assert(x, "%s", loom_status_message(st));
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  ts.max_steps = 200;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &ed;
  es.steps = 0;
  es.name = "mid";
  es.throttle_secs = 0;
  es.nexporters = 1;
  es.exporters = &x;
  loom_tae_result *r = tae_ok(e, &ts, &es);
  int ne = loom_tae_result_num_evaluations(r);
  cr_assert_eq(ne, 20);
  char evdir[1024], base[1024];
  snprintf(evdir, sizeof evdir, "%s/eval_mid", dir);
  snprintf(base, sizeof base, "%s/export/best", dir);
  double losses[64];
  int64_t steps[64];
  cr_assert_eq(read_scalars(evdir, "loss", losses, steps, 64), ne);
  /* the evaluations that improved on every earlier one */
  int64_t improved[64];
  int ni = 0, worse = 0;
  double best = INFINITY;
  for (int i = 0; i < ne; i++) {
    if (losses[i] < best) {
      best = losses[i];
      improved[ni++] = steps[i];
    } else {
      worse++;
    }
  }
  cr_assert(ni >= 2 && worse >= 2, "the eval loss should fall then rise (%d improvements, %d worse)", ni, worse);
  long long t[64];
  int nx = list_exports(base, t, 64);
  cr_assert_eq(nx, ni, "%d exports, want one per improvement (%d)", nx, ni);
  for (int i = 0; i < nx; i++) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%lld", base, t[i]);
    cr_expect(export_holds_step(dir, p, improved[i]), "export %d (%s) does not hold step %lld", i, p,
              (long long)improved[i]);
  }
  const loom_eval_result *b = loom_best_exporter_best(x);
  cr_assert(b);
  cr_expect_eq(loom_eval_result_global_step(b), improved[ni - 1]);
  cr_expect_eq(loom_tae_result_export_path(r, 0), NULL, "the last evaluation was worse: no export");
  loom_tae_result_free(r);
  loom_exporter_free(x);
  loom_estimator_free(e);

  /* restart: a new estimator and a new exporter on the same model_dir; training on goes further away */
  e = make_est(dir, 10);
  x = loom_best_exporter("best", serving_fn, NULL, NULL, NULL, 0, st);
  es.exporters = &x;
  ts.max_steps = 240;
  r = tae_ok(e, &ts, &es);
  cr_expect_eq(loom_tae_result_num_evaluations(r), 4);
  cr_expect_eq(loom_tae_result_evaluation_step(r, 0), 210, "the restored checkpoint is not evaluated");
  b = loom_best_exporter_best(x);
  cr_assert(b);
  cr_expect_eq(loom_eval_result_global_step(b), improved[ni - 1], "best reloaded from the eval events");
  cr_expect_eq(metric(b, "loss"), best);
  long long t2[64];
  cr_expect_eq(list_exports(base, t2, 64), ni, "a worse model was exported after the restart");
  loom_tae_result_free(r);
  loom_exporter_free(x);
  loom_estimator_free(e);
  loom_status_free(st);
  tu_rmtree(dir);
}

static int higher_loss(void *user, const loom_eval_result *best, const loom_eval_result *cur) {
  ++*(int *)user;
  return metric(cur, "loss") > metric(best, "loss");
}

Test(train_and_evaluate, best_exporter_custom_compare_and_exports_to_keep) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  loom_estimator *e = make_est(dir, 10);
  data_opts d = {4, 0, NULL, 0, 0}, ed = {6, 1, NULL, 0, 0};
  loom_status *st = loom_status_new();
  int calls = 0;
  /* on the training labels the loss falls at every evaluation: "higher is better" exports only the first */
  loom_exporter *hi = loom_best_exporter("hi", serving_fn, NULL, higher_loss, &calls, 0, st);
  loom_exporter *lo = loom_best_exporter("lo", serving_fn, NULL, NULL, NULL, 2, st);
  cr_assert(hi && lo, "%s", loom_status_message(st));
  loom_exporter *xs[2] = {hi, lo};
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  ts.max_steps = 50;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &ed;
  es.steps = 0;
  es.throttle_secs = 0;
  es.nexporters = 2;
  es.exporters = xs;
  loom_tae_result *r = tae_ok(e, &ts, &es);
  cr_expect_eq(loom_tae_result_num_evaluations(r), 5);
  cr_expect_eq(calls, 4, "compare_fn called %d times", calls);
  char base[1024];
  long long t[16];
  snprintf(base, sizeof base, "%s/export/hi", dir);
  cr_assert_eq(list_exports(base, t, 16), 1);
  char p[1200];
  snprintf(p, sizeof p, "%s/%lld", base, t[0]);
  cr_expect(export_holds_step(dir, p, 10));
  snprintf(base, sizeof base, "%s/export/lo", dir);
  cr_assert_eq(list_exports(base, t, 16), 2, "exports_to_keep 2");
  snprintf(p, sizeof p, "%s/%lld", base, t[1]);
  cr_expect(export_holds_step(dir, p, 50));
  cr_expect_str_eq(loom_tae_result_export_path(r, 1), p);
  cr_expect_eq(loom_tae_result_export_path(r, 0), NULL);
  loom_tae_result_free(r);
  loom_exporter_free(hi);
  loom_exporter_free(lo);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

Test(train_and_evaluate, final_exporter_exports_once_and_predicts_like_the_estimator) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  loom_estimator *e = make_est(dir, 10);
  data_opts d = {4, 0, NULL, 0, 0}, ed = {6, 1, NULL, 0, 0};
  loom_status *st = loom_status_new();
  loom_exporter *fin = loom_final_exporter("final", serving_fn, NULL, st);
  loom_exporter *lat = loom_latest_exporter("latest", serving_fn, NULL, 0, st);
  cr_assert(fin && lat, "%s", loom_status_message(st));
  loom_exporter *xs[2] = {fin, lat};
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  ts.max_steps = 35;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &ed;
  es.steps = 0;
  es.throttle_secs = 0;
  es.nexporters = 2;
  es.exporters = xs;
  loom_tae_result *r = tae_ok(e, &ts, &es);
  cr_expect_eq(loom_tae_result_num_evaluations(r), 4); /* 10, 20, 30, 35 */
  char base[1024];
  long long t[16];
  snprintf(base, sizeof base, "%s/export/final", dir);
  cr_assert_eq(list_exports(base, t, 16), 1, "FinalExporter exported more than once");
  char p[1200];
  snprintf(p, sizeof p, "%s/%lld", base, t[0]);
  cr_expect_str_eq(loom_tae_result_export_path(r, 0), p);
  cr_expect(export_holds_step(dir, p, 35));
  snprintf(base, sizeof base, "%s/export/latest", dir);
  cr_expect_eq(list_exports(base, t, 16), 4, "LatestExporter with exports_to_keep 0 keeps all");

  /* the final export predicts exactly like Estimator.predict on the final checkpoint */
  loom_predictor *pr = loom_predictor_load(loom_tae_result_export_path(r, 0), NULL, st);
  cr_assert(pr, "%s", loom_status_message(st));
  data_opts pd = {NX, 1, NULL, 0, 0};
  loom_predict_options po = loom_predict_options_default();
  po.yield_single_examples = 0;
  loom_prediction_iter *it = loom_estimator_predict(e, input_fn, &pd, &po, st);
  cr_assert(it, "%s", loom_status_message(st));
  cr_assert_eq(loom_prediction_next(it, st), LOOM_OK, "%s", loom_status_message(st));
  int64_t xd[2] = {NX, NF};
  loom_tensor *xt = loom_tensor_from_data(LOOM_F32, 2, xd, X, NULL);
  cr_assert_eq(loom_predictor_num_outputs(pr, NULL), 1);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_predictor_run(pr, NULL, 1, &xt, 1, &out, st), LOOM_OK, "%s", loom_status_message(st));
  const loom_tensor *want = loom_prediction_get(it, "predictions");
  cr_assert(want);
  cr_expect(same_tensor(out, want), "predictor output differs from Estimator.predict");
  /* and both are the trained linear model (not the initial 0.1 weights) */
  loom_tensor *k = NULL, *bias = NULL;
  cr_assert_eq(loom_estimator_get_variable_value(e, "linear/kernel", &k, st), LOOM_OK);
  cr_assert_eq(loom_estimator_get_variable_value(e, "linear/bias", &bias, st), LOOM_OK);
  const float *w = loom_tensor_data_const(k), *bb = loom_tensor_data_const(bias), *o = loom_tensor_data_const(out);
  cr_expect(fabsf(w[2] - 0.1f) > 0.2f, "kernel not trained: %g", (double)w[2]);
  for (int i = 0; i < NX; i++) {
    float h = bb[0];
    for (int j = 0; j < NF; j++) h += X[i * NF + j] * w[j];
    cr_expect(fabsf(o[i] - h) <= 1e-5f * (1 + fabsf(h)), "example %d: %g vs hand %g", i, (double)o[i], (double)h);
  }
  loom_tensor_free(k);
  loom_tensor_free(bias);
  loom_tensor_free(out);
  loom_tensor_free(xt);
  loom_prediction_iter_free(it);
  loom_predictor_free(pr);
  loom_tae_result_free(r);
  loom_exporter_free(fin);
  loom_exporter_free(lat);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* max_steps 0 (TF's None): training runs to the end of the input; the
 * evaluation at the end is the final one. */
Test(train_and_evaluate, no_max_steps_trains_to_the_end_of_the_input) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  loom_estimator *e = make_est(dir, 4);
  data_opts d = {4, 3, NULL, 0, 0}, ed = {6, 1, NULL, 0, 0}; /* 3 epochs of 6 batches: 18 steps */
  loom_status *st = loom_status_new();
  loom_exporter *fin = loom_final_exporter("final", serving_fn, NULL, st);
  cr_assert(fin);
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &ed;
  es.throttle_secs = 0;
  es.nexporters = 1;
  es.exporters = &fin;
  loom_tae_result *r = tae_ok(e, &ts, &es);
  int64_t want[] = {4, 8, 12, 16, 18};
  cr_assert_eq(loom_tae_result_num_evaluations(r), 5);
  for (int i = 0; i < 5; i++) cr_expect_eq(loom_tae_result_evaluation_step(r, i), want[i]);
  cr_expect_eq(loom_eval_result_global_step(loom_tae_result_metrics(r)), 18);
  cr_assert(loom_tae_result_export_path(r, 0));
  cr_expect(export_holds_step(dir, loom_tae_result_export_path(r, 0), 18));
  loom_tae_result_free(r);
  loom_exporter_free(fin);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* A real throttle: steps take >= 20 ms, saves every 2 steps, throttle 0.1 s:
 * fewer evaluations than saves, the ones before the final evaluation
 * starting at least throttle_secs apart (an eval hook's begin times; with
 * eval hooks each evaluation builds its graph, so the hooks see each one). */
static loom_code slow_after(void *self, loom_hook_context *ctx, loom_tensor *const *r, loom_status *st) {
  (void)self;
  (void)ctx;
  (void)r;
  (void)st;
  usleep(20000);
  return LOOM_OK;
}

static double begin_times[64];
static int nbegin;
static loom_code time_begin(void *self, loom_graph *g, loom_status *st) {
  (void)self;
  (void)g;
  (void)st;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (nbegin < 64) begin_times[nbegin++] = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  return LOOM_OK;
}

Test(train_and_evaluate, throttle_secs_spaces_evaluations_in_time) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  loom_estimator *e = make_est(dir, 2);
  data_opts d = {4, 0, NULL, 0, 0}, ed = {6, 1, NULL, 0, 0};
  static const loom_hook_ops slow = {NULL, NULL, NULL, slow_after, NULL, NULL};
  loom_hook *h = loom_hook_new(&slow, NULL, "slow");
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  ts.max_steps = 30;
  ts.nhooks = 1;
  ts.hooks = &h;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &ed;
  es.steps = 0;
  es.throttle_secs = 0.1;
  static const loom_hook_ops timing = {time_begin, NULL, NULL, NULL, NULL, NULL};
  loom_hook *eh = loom_hook_new(&timing, NULL, "timing");
  es.nhooks = 1;
  es.hooks = &eh;
  nbegin = 0;
  loom_tae_result *r = tae_ok(e, &ts, &es);
  int n = loom_tae_result_num_evaluations(r);
  cr_expect(n >= 2 && n < 15, "%d evaluations for 15 saves with a 0.1 s throttle and 40 ms between saves", n);
  cr_expect_eq(loom_tae_result_evaluation_step(r, 0), 2, "the first save after creation is evaluated");
  cr_expect_eq(loom_tae_result_evaluation_step(r, n - 1), 30, "the final checkpoint is evaluated");
  cr_assert_eq(nbegin, n);
  for (int i = 1; i + 1 < n; i++) /* (the final evaluation is not throttled) */
    cr_expect(begin_times[i] - begin_times[i - 1] >= 0.09, "evaluations %d and %d started only %.3f s apart", i - 1,
              i, begin_times[i] - begin_times[i - 1]);
  loom_tae_result_free(r);
  loom_hook_free(h);
  loom_hook_free(eh);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* The best is reloaded from every event file of the eval dir: a planted
 * past evaluation with a tiny loss blocks every export; a truncated event
 * file (a killed job) costs only its damaged record. */
Test(train_and_evaluate, best_exporter_reloads_planted_and_damaged_event_files) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  char evdir[1024];
  snprintf(evdir, sizeof evdir, "%s/eval_x", dir);
  loom_status *st = loom_status_new();
  loom_event_writer *w = loom_event_writer_new(evdir, NULL, st);
  cr_assert(w, "%s", loom_status_message(st));
  const char *tags[2] = {"loss", "mae"};
  double good[2] = {1e-6, 1e-3}, bad[2] = {50.0, 7.0};
  cr_assert_eq(loom_event_writer_add_scalars(w, 2, tags, bad, 3, st), LOOM_OK);
  cr_assert_eq(loom_event_writer_add_scalars(w, 2, tags, good, 7, st), LOOM_OK);
  cr_assert_eq(loom_event_writer_add_text(w, "checkpoint_path", "somewhere", 7, st), LOOM_OK);
  loom_event_writer_free(w);
  /* a second file cut in the middle of its last record */
  loom_event_writer *w2 = loom_event_writer_new(evdir, NULL, st);
  cr_assert(w2);
  double worse[2] = {2.0, 1.0};
  cr_assert_eq(loom_event_writer_add_scalars(w2, 2, tags, worse, 9, st), LOOM_OK);
  char p2[2048];
  snprintf(p2, sizeof p2, "%s", loom_event_writer_path(w2));
  loom_event_writer_free(w2);
  size_t len = 0;
  char *bytes = tu_read_file(p2, &len);
  tu_write_file(p2, bytes, len - 5);
  free(bytes);

  loom_estimator *e = make_est(dir, 10);
  data_opts d = {4, 0, NULL, 0, 0}, ed = {6, 1, NULL, 0, 0};
  loom_exporter *x = loom_best_exporter("best", serving_fn, NULL, NULL, NULL, 5, st);
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  ts.max_steps = 20;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &ed;
  es.name = "x";
  es.throttle_secs = 0;
  es.nexporters = 1;
  es.exporters = &x;
  loom_tae_result *r = tae_ok(e, &ts, &es);
  cr_expect_eq(loom_tae_result_num_evaluations(r), 2);
  const loom_eval_result *b = loom_best_exporter_best(x);
  cr_assert(b);
  cr_expect_eq(loom_eval_result_global_step(b), 7, "best reloaded: step %lld", (long long)loom_eval_result_global_step(b));
  cr_expect_eq(metric(b, "loss"), (double)1e-6f);
  char base[1200];
  snprintf(base, sizeof base, "%s/export/best", dir);
  long long t[8];
  cr_expect_eq(list_exports(base, t, 8), 0, "exported a model worse than the reloaded best");
  loom_tae_result_free(r);
  loom_exporter_free(x);
  loom_estimator_free(e);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* A shuffled, endless eval input read for 3 batches: every evaluation sees
 * the batches a fresh input_fn gives (as TF calls input_fn per evaluation),
 * so the in-process results equal evaluate() of each checkpoint. */
Test(train_and_evaluate, shuffled_eval_input_matches_evaluate_of_each_checkpoint) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tae");
  loom_estimator *e = make_est(dir, 10);
  data_opts d = {4, 0, NULL, 0, 0}, ed = {5, 0, NULL, 0, 1};
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  ts.max_steps = 30;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &ed;
  es.steps = 3;
  es.name = "shuf";
  es.throttle_secs = 0;
  loom_tae_result *r = tae_ok(e, &ts, &es);
  cr_assert_eq(loom_tae_result_num_evaluations(r), 3);
  double losses[8];
  int64_t steps[8];
  char evdir[1024];
  snprintf(evdir, sizeof evdir, "%s/eval_shuf", dir);
  cr_assert_eq(read_scalars(evdir, "loss", losses, steps, 8), 3);
  loom_status *st = loom_status_new();
  for (int i = 0; i < 3; i++) {
    char ck[1024];
    snprintf(ck, sizeof ck, "%s/model.ckpt-%lld", dir, (long long)steps[i]);
    loom_eval_options eo = loom_eval_options_default();
    eo.steps = 3;
    eo.checkpoint_path = ck;
    eo.name = "check";
    loom_eval_result *again = NULL;
    cr_assert_eq(loom_estimator_evaluate(e, input_fn, &ed, &eo, &again, st), LOOM_OK, "%s", loom_status_message(st));
    cr_expect_eq(losses[i], (double)(float)metric(again, "loss"), "step %lld: %.9g vs evaluate %.9g",
                 (long long)steps[i], losses[i], metric(again, "loss"));
    loom_eval_result_free(again);
  }
  loom_status_free(st);
  loom_tae_result_free(r);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

/* loom_train_collective on ts under tf_config (NULL: no TF_CONFIG) refuses with code and a message holding msg. */
static void tcoll_refuses(loom_estimator *e, const loom_train_spec *ts, const char *tf_config, loom_code code,
                          const char *msg) {
  if (tf_config)
    setenv("TF_CONFIG", tf_config, 1);
  else
    unsetenv("TF_CONFIG");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_train_collective(e, ts, st), code, "%s", loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), msg), "%s", loom_status_message(st));
  loom_status_free(st);
  unsetenv("TF_CONFIG");
}

/* loom_train_collective (Estimator.train alone under the collective strategy): its argument and
 * environment errors (the collective job itself: python/tests/test_tf_distributed.py, tests/test_allreduce.c). */
Test(train_and_evaluate, train_collective_names_what_is_missing) {
  make_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_tcoll");
  loom_estimator *e = make_est(dir, 10);
  data_opts d = {4, 0, NULL, 0, 0};
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &d;
  tcoll_refuses(NULL, &ts, NULL, LOOM_INVALID_ARGUMENT, "estimator or train_spec is NULL");
  tcoll_refuses(e, NULL, NULL, LOOM_INVALID_ARGUMENT, "estimator or train_spec is NULL");
  ts.max_steps = 0;
  tcoll_refuses(e, &ts, NULL, LOOM_INVALID_ARGUMENT, "needs TrainSpec.max_steps > 0");
  ts.max_steps = 5;
  tcoll_refuses(e, &ts, NULL, LOOM_FAILED_PRECONDITION, "not started by an MPI launcher");
  tcoll_refuses(e, &ts,
                "{\"cluster\": {\"chief\": [\"127.0.0.1:1\"], \"ps\": [\"127.0.0.1:2\"]}, \"task\": "
                "{\"type\": \"chief\", \"index\": 0}}",
                LOOM_INVALID_ARGUMENT, "\"ps\" task(s)");
  tcoll_refuses(e, &ts,
                "{\"cluster\": {\"chief\": [\"127.0.0.1:1\"], \"worker\": [\"127.0.0.1:2\"]}, \"task\": "
                "{\"type\": \"evaluator\", \"index\": 0}}",
                LOOM_INVALID_ARGUMENT, "evaluator task evaluates under train_and_evaluate");
  /* the train spec is checked as train_and_evaluate checks it (no eval spec: none of its checks) */
  ts.input_fn = NULL;
  tcoll_refuses(e, &ts, NULL, LOOM_INVALID_ARGUMENT, "TrainSpec.input_fn is NULL");
  ts.input_fn = input_fn;
  ts.nhooks = 1;
  tcoll_refuses(e, &ts, NULL, LOOM_INVALID_ARGUMENT, "TrainSpec.hooks: 1 hooks given without an array");
  loom_estimator_free(e);
  tu_rmtree(dir);
}
