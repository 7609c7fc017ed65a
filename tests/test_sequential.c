/* test_sequential.c - loom_sequential (loom_sequential.h): Keras variable
 * names and shapes, direct training on a seeded problem, and the
 * model_to_estimator path: the estimator's logits, evaluation and exported
 * predictor equal the sequential's for the same weights; errors name the
 * layer. */
#include "loom/loom_sequential.h"
#include "test_util.h"

/* ---- a seeded 3-class problem in 2-D that a linear model cannot solve:
 * class 0 inside radius 0.5, else class 1 or 2 by the sign of x*y ---- */
static uint64_t lcg;
static double urand(void) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(lcg >> 11) / 9007199254740992.0;
}

typedef struct data {
  loom_tensor *x, *y;
  int64_t n, batch;
} data;

static data make_data(int64_t n, uint64_t seed, int64_t batch) {
  lcg = seed;
  data d = {NULL, NULL, n, batch};
  d.x = loom_tensor_new(LOOM_F32, 2, (int64_t[]){n, 2}, NULL);
  d.y = loom_tensor_new(LOOM_I32, 1, (int64_t[]){n}, NULL);
  float *x = loom_tensor_data(d.x);
  int32_t *y = loom_tensor_data(d.y);
  for (int64_t i = 0; i < n; i++) {
    double a = 2 * urand() - 1, b = 2 * urand() - 1;
    x[2 * i] = (float)a;
    x[2 * i + 1] = (float)b;
    y[i] = a * a + b * b < 0.25 ? 0 : a * b > 0 ? 1 : 2;
  }
  return d;
}

static void data_free(data *d) {
  loom_tensor_free(d->x);
  loom_tensor_free(d->y);
}

static loom_dataset *dataset(const data *d, int shuffle, int repeat, loom_status *st) {
  const char *names[2] = {"x", "label"};
  const loom_tensor *arr[2] = {d->x, d->y};
  loom_dataset *ds = loom_dataset_from_tensors(2, names, arr, "label", st);
  if (ds && shuffle) ds = loom_dataset_shuffle(ds, d->n, 3, 1, st);
  if (ds && repeat) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, d->batch, 0, st);
  cr_assert(ds, "dataset: %s", loom_status_message(st));
  return ds;
}

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p;
  return dataset(user, mode == LOOM_MODE_TRAIN, mode == LOOM_MODE_TRAIN, st);
}

static loom_sequential *mlp(int with_bn, loom_status *st) {
  loom_sequential *m = loom_sequential_new(st);
  cr_assert(m);
  cr_assert_eq(loom_sequential_set_input(m, NULL, LOOM_F32, 1, (int64_t[]){2}, st), LOOM_OK);
  loom_dense_options relu = loom_dense_options_default();
  relu.activation = "relu";
  cr_assert_eq(loom_sequential_add_dense(m, 32, &relu, NULL, st), 0);
  if (with_bn) {
    cr_assert_eq(loom_sequential_add_batch_norm(m, NULL, NULL, st), 1);
    cr_assert_eq(loom_sequential_add_dropout(m, 0.1, 5, NULL, st), 2);
  }
  cr_assert(loom_sequential_add_dense(m, 3, NULL, NULL, st) >= 0, "%s", loom_status_message(st));
  loom_sequential_compile_options c = loom_sequential_compile_options_default();
  c.loss = "sparse_categorical_crossentropy";
  c.learning_rate = 0.02;
  c.metrics = (const char *[]){"accuracy"};
  c.nmetrics = 1;
  c.seed = 1;
  c.num_threads = 1;
  cr_assert_eq(loom_sequential_compile(m, &c, st), LOOM_OK, "compile: %s", loom_status_message(st));
  return m;
}

static double result(const loom_eval_result *r, const char *key) {
  double v = -1;
  cr_assert_eq(loom_eval_result_get(r, key, &v, NULL), LOOM_OK, "no key %s", key);
  return v;
}

/* ---- names and shapes ---- */
typedef struct seen {
  int n;
  char names[32][64];
  int ndim[32];
  int64_t dims[32][4];
} seen;
static int collect(const char *name, loom_dtype dt, int ndim, const int64_t *dims, void *u) {
  (void)dt;
  seen *s = u;
  if (s->n < 32) {
    snprintf(s->names[s->n], 64, "%s", name);
    s->ndim[s->n] = ndim;
    for (int i = 0; i < ndim && i < 4; i++) s->dims[s->n][i] = dims[i];
    s->n++;
  }
  return 0;
}

Test(sequential, conv_dense_names_and_shapes) {
  loom_status *st = loom_status_new();
  loom_sequential *m = loom_sequential_new(st);
  loom_sequential_set_input(m, "image", LOOM_F32, 1, (int64_t[]){64}, st);
  loom_conv2d_options co = loom_conv2d_options_default();
  co.activation = "relu";
  loom_dense_options relu = loom_dense_options_default();
  relu.activation = "relu";
  int64_t k3[2] = {3, 3}, p2[2] = {2, 2};
  loom_sequential_add_reshape(m, 3, (int64_t[]){8, 8, 1}, NULL, st);
  loom_sequential_add_conv2d(m, 4, k3, &co, NULL, st);
  loom_sequential_add_max_pooling2d(m, p2, NULL, NULL, NULL, st);
  co.padding = "same";
  loom_sequential_add_conv2d(m, 6, k3, &co, NULL, st);
  loom_sequential_add_average_pooling2d(m, (int64_t[]){1, 1}, NULL, NULL, NULL, st);
  loom_sequential_add_flatten(m, NULL, st);
  loom_sequential_add_dense(m, 16, &relu, NULL, st);
  loom_sequential_add_batch_norm(m, NULL, NULL, st);
  loom_sequential_add_dropout(m, 0.5, LOOM_SEED_NONE, NULL, st);
  cr_assert_eq(loom_sequential_add_dense(m, 10, NULL, NULL, st), 9, "%s", loom_status_message(st));
  const char *layers[10] = {"reshape", "conv2d",  "max_pooling2d",       "conv2d_1", "average_pooling2d",
                            "flatten", "dense",   "batch_normalization", "dropout",  "dense_1"};
  cr_assert_eq(loom_sequential_num_layers(m), 10);
  for (int i = 0; i < 10; i++) cr_expect_str_eq(loom_sequential_layer_name(m, i), layers[i]);
  cr_expect_str_eq(loom_sequential_layer_kind(m, 7), "batch_normalization");
  loom_sequential_compile_options c = loom_sequential_compile_options_default();
  c.loss = "sparse_categorical_crossentropy";
  cr_assert_eq(loom_sequential_compile(m, &c, st), LOOM_OK, "%s", loom_status_message(st));

  /* 8x8 -conv3-> 6x6x4 -pool2-> 3x3x4 -conv3 same-> 3x3x6 -> 54 */
  const char *want[] = {"conv2d/kernel",  "conv2d/bias",  "conv2d_1/kernel",
                        "conv2d_1/bias",  "dense/kernel", "dense/bias",
                        "batch_normalization/gamma", "batch_normalization/beta", "batch_normalization/moving_mean",
                        "batch_normalization/moving_variance", "dense_1/kernel", "dense_1/bias"};
  int64_t wd[12][4] = {{3, 3, 1, 4}, {4}, {3, 3, 4, 6}, {6}, {54, 16}, {16}, {16}, {16}, {16}, {16}, {16, 10}, {10}};
  int wn[12] = {4, 1, 4, 1, 2, 1, 1, 1, 1, 1, 2, 1};
  cr_assert_eq(loom_sequential_num_variables(m), 12, "%d variables", loom_sequential_num_variables(m));
  for (int i = 0; i < 12; i++) {
    int64_t d[LOOM_MAX_DIMS];
    cr_expect_str_eq(loom_sequential_variable_name(m, i), want[i]);
    cr_assert_eq(loom_sequential_variable_shape(m, i, d), wn[i], "%s rank", want[i]);
    for (int k = 0; k < wn[i]; k++) cr_expect_eq(d[k], wd[i][k], "%s dim %d: %lld", want[i], k, (long long)d[k]);
  }

  /* the estimator's first checkpoint holds the same names and shapes */
  char dir[128];
  tu_tmpdir(dir, sizeof dir, "loom_seq_names");
  loom_estimator *e = loom_sequential_to_estimator(m, dir, NULL, st);
  cr_assert(e, "to_estimator: %s", loom_status_message(st));
  seen s = {0};
  cr_assert_eq(loom_estimator_get_variable_names(e, collect, &s, st), LOOM_OK, "%s", loom_status_message(st));
  for (int i = 0; i < 12; i++) {
    int found = 0;
    for (int j = 0; j < s.n; j++)
      if (!strcmp(s.names[j], want[i])) {
        found = 1;
        cr_expect_eq(s.ndim[j], wn[i]);
        for (int k = 0; k < wn[i]; k++) cr_expect_eq(s.dims[j][k], wd[i][k], "%s dim %d", want[i], k);
      }
    cr_expect(found, "estimator checkpoint lacks %s", want[i]);
  }
  int has_gs = 0, has_slot = 0;
  for (int j = 0; j < s.n; j++) {
    has_gs |= !strcmp(s.names[j], "global_step");
    has_slot |= !strcmp(s.names[j], "dense/kernel/Adam");
  }
  cr_expect(has_gs && has_slot, "first checkpoint: global_step %d, dense/kernel/Adam %d", has_gs, has_slot);
  loom_estimator_free(e);
  loom_sequential_free(m);
  tu_rmtree(dir);
  loom_status_free(st);
}

/* ---- direct training ---- */
Test(sequential, fit_reaches_known_accuracy_reproducibly) {
  loom_status *st = loom_status_new();
  data tr = make_data(600, 11, 32), te = make_data(300, 12, 100);
  double acc[2], loss[2];
  for (int run = 0; run < 2; run++) {
    loom_sequential *m = mlp(0, st);
    loom_dataset *ds = dataset(&tr, 1, 0, st), *ev = dataset(&te, 0, 0, st);
    loom_eval_result *r0 = NULL, *h = NULL, *r = NULL;
    cr_assert_eq(loom_sequential_evaluate(m, ev, 0, &r0, st), LOOM_OK, "%s", loom_status_message(st));
    loom_sequential_fit_options fo = loom_sequential_fit_options_default();
    fo.epochs = 40;
    cr_assert_eq(loom_sequential_fit(m, ds, &fo, &h, st), LOOM_OK, "fit: %s", loom_status_message(st));
    cr_expect_eq(loom_eval_result_global_step(h), 40 * 19, "steps %lld", (long long)loom_eval_result_global_step(h));
    cr_assert_eq(loom_sequential_evaluate(m, ev, 0, &r, st), LOOM_OK, "%s", loom_status_message(st));
    acc[run] = result(r, "accuracy");
    loss[run] = result(r, "loss");
    cr_expect(result(r0, "accuracy") < 0.7, "untrained accuracy %g", result(r0, "accuracy"));
    cr_expect(acc[run] >= 0.97, "accuracy after 40 epochs %g (measured here: 0.9867)", acc[run]);
    cr_expect(result(h, "accuracy") >= 0.9, "training accuracy %g", result(h, "accuracy"));
    cr_expect(loss[run] < result(r0, "loss") / 3, "loss %g vs untrained %g", loss[run], result(r0, "loss"));
    loom_eval_result_free(r0);
    loom_eval_result_free(h);
    loom_eval_result_free(r);
    loom_dataset_free(ds);
    loom_dataset_free(ev);
    loom_sequential_free(m);
  }
  /* same seed, same data order, one thread: the same numbers */
  cr_expect(acc[0] == acc[1] && loss[0] == loss[1], "runs differ: %.9g/%.9g vs %.9g/%.9g", acc[0], loss[0], acc[1],
            loss[1]);
  data_free(&tr);
  data_free(&te);
  loom_status_free(st);
}

/* ---- model_to_estimator ---- */
Test(sequential, estimator_matches_sequential) {
  loom_status *st = loom_status_new();
  data tr = make_data(400, 21, 32), te = make_data(250, 22, 50);
  loom_sequential *m = mlp(1, st); /* dense, batch_norm, dropout, dense: modes matter */
  loom_dataset *ds = dataset(&tr, 1, 0, st), *ev = dataset(&te, 0, 0, st);
  loom_sequential_fit_options fo = loom_sequential_fit_options_default();
  fo.epochs = 5;
  cr_assert_eq(loom_sequential_fit(m, ds, &fo, NULL, st), LOOM_OK, "fit: %s", loom_status_message(st));
  loom_tensor *logits = NULL;
  cr_assert_eq(loom_sequential_predict(m, ev, 0, &logits, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_tensor_dim(logits, 0), 250);
  cr_assert_eq(loom_tensor_dim(logits, 1), 3);
  loom_eval_result *rs = NULL;
  cr_assert_eq(loom_sequential_evaluate(m, ev, 0, &rs, st), LOOM_OK, "%s", loom_status_message(st));
  /* the moving statistics moved during fit (batch norm was trained) */
  loom_tensor *mm = NULL;
  cr_assert_eq(loom_sequential_get_variable(m, "batch_normalization/moving_mean", &mm, st), LOOM_OK);
  cr_expect(((const float *)loom_tensor_data_const(mm))[0] != 0.0f);

  char dir[128];
  tu_tmpdir(dir, sizeof dir, "loom_seq_est");
  loom_run_config cfg = loom_run_config_default();
  cfg.num_threads = 1;
  cfg.save_summary_steps = 0;
  loom_estimator *e = loom_sequential_to_estimator(m, dir, &cfg, st);
  cr_assert(e, "to_estimator: %s", loom_status_message(st));

  /* the weights carried over */
  for (int i = 0; i < loom_sequential_num_variables(m); i++) {
    const char *name = loom_sequential_variable_name(m, i);
    loom_tensor *a = NULL, *b = NULL;
    cr_assert_eq(loom_sequential_get_variable(m, name, &a, st), LOOM_OK);
    cr_assert_eq(loom_estimator_get_variable_value(e, name, &b, st), LOOM_OK, "%s: %s", name, loom_status_message(st));
    cr_expect(loom_tensor_nbytes(a) == loom_tensor_nbytes(b) &&
                  !memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), loom_tensor_nbytes(a)),
              "%s differs", name);
    loom_tensor_free(a);
    loom_tensor_free(b);
  }

  /* predict: bitwise the same logits, keyed by the last layer's name */
  loom_predict_options po = loom_predict_options_default();
  po.yield_single_examples = 0;
  loom_prediction_iter *it = loom_estimator_predict(e, input_fn, &te, &po, st);
  cr_assert(it, "predict: %s", loom_status_message(st));
  int64_t row = 0;
  const float *want = loom_tensor_data_const(logits);
  while (loom_prediction_next(it, st) == LOOM_OK) {
    cr_assert_eq(loom_prediction_count(it), 1);
    cr_expect_str_eq(loom_prediction_key(it, 0), "dense_1");
    const loom_tensor *p = loom_prediction_get(it, "dense_1");
    cr_assert(p);
    int64_t b = loom_tensor_dim(p, 0);
    cr_assert(row + b <= 250);
    cr_expect(!memcmp(loom_tensor_data_const(p), want + row * 3, (size_t)b * 3 * sizeof(float)),
              "estimator logits differ from the sequential's in rows %lld..%lld", (long long)row, (long long)(row + b));
    row += b;
  }
  cr_expect_eq(row, 250);
  loom_prediction_iter_free(it);

  /* evaluate: the same loss and accuracy */
  loom_eval_result *re = NULL;
  cr_assert_eq(loom_estimator_evaluate(e, input_fn, &te, NULL, &re, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect(result(re, "loss") == result(rs, "loss"), "estimator loss %.9g, sequential %.9g", result(re, "loss"),
            result(rs, "loss"));
  cr_expect(result(re, "accuracy") == result(rs, "accuracy"), "accuracy %.9g vs %.9g", result(re, "accuracy"),
            result(rs, "accuracy"));
  cr_expect_eq(loom_eval_result_count(re), 3, "keys: loss, accuracy, global_step");
  cr_expect_eq(loom_eval_result_global_step(re), 0);

  /* export -> predictor: the same logits */
  char base[256], exported[512];
  snprintf(base, sizeof base, "%s/export", dir);
  cr_assert_eq(loom_estimator_export(e, loom_sequential_serving_input_fn, m, base, NULL, exported, sizeof exported, st),
               LOOM_OK, "export: %s", loom_status_message(st));
  loom_predictor_options pro = loom_predictor_options_default();
  pro.num_threads = 1;
  loom_predictor *pred = loom_predictor_load(exported, &pro, st);
  cr_assert(pred, "predictor: %s", loom_status_message(st));
  cr_assert_eq(loom_predictor_num_outputs(pred, NULL), 1);
  cr_expect_str_eq(loom_predictor_output_key(pred, NULL, 0), "dense_1");
  cr_expect_str_eq(loom_predictor_input_key(pred, NULL, 0), "x");
  loom_tensor *out = NULL;
  cr_assert_eq(loom_predictor_run(pred, NULL, 1, &te.x, 1, &out, st), LOOM_OK, "%s", loom_status_message(st));
  /* one batch of 250 vs batches of 50: equal within float rounding, and
   * bitwise equal to the sequential's batch-of-250 prediction */
  loom_tensor *whole = NULL;
  cr_assert_eq(loom_sequential_predict_batch(m, te.x, &whole, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect(!memcmp(loom_tensor_data_const(out), loom_tensor_data_const(whole), loom_tensor_nbytes(whole)),
            "exported predictor differs from the sequential");
  for (int64_t i = 0; i < 750; i++)
    cr_expect(fabsf(((const float *)loom_tensor_data_const(whole))[i] - want[i]) < 1e-5f, "batch size changed %lld", (long long)i);
  loom_tensor_free(out);
  loom_tensor_free(whole);
  loom_predictor_free(pred);

  /* training the estimator continues from the sequential's weights */
  loom_train_options to = loom_train_options_default();
  to.steps = 30;
  cr_assert_eq(loom_estimator_train(e, input_fn, &tr, &to, st), LOOM_OK, "train: %s", loom_status_message(st));
  loom_eval_result *r2 = NULL;
  cr_assert_eq(loom_estimator_evaluate(e, input_fn, &te, NULL, &r2, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(loom_eval_result_global_step(r2), 30);
  cr_expect(result(r2, "accuracy") > result(rs, "accuracy") - 0.1, "accuracy fell from %g to %g",
            result(rs, "accuracy"), result(r2, "accuracy"));
  loom_eval_result_free(r2);

  loom_eval_result_free(re);
  loom_eval_result_free(rs);
  loom_tensor_free(mm);
  loom_tensor_free(logits);
  loom_estimator_free(e);
  loom_sequential_free(m); /* after the estimator: either order works */
  loom_dataset_free(ds);
  loom_dataset_free(ev);
  data_free(&tr);
  data_free(&te);
  tu_rmtree(dir);
  loom_status_free(st);
}

Test(sequential, estimator_outlives_sequential) {
  loom_status *st = loom_status_new();
  data te = make_data(60, 5, 20);
  loom_sequential *m = mlp(0, st);
  loom_tensor *want = NULL;
  cr_assert_eq(loom_sequential_predict_batch(m, te.x, &want, st), LOOM_OK);
  char dir[128];
  tu_tmpdir(dir, sizeof dir, "loom_seq_own");
  loom_run_config cfg = loom_run_config_default();
  cfg.num_threads = 1;
  loom_estimator *e = loom_sequential_to_estimator(m, dir, &cfg, st);
  cr_assert(e, "%s", loom_status_message(st));
  loom_sequential_free(m);
  te.batch = 60;
  loom_predict_options po = loom_predict_options_default();
  po.yield_single_examples = 0;
  loom_prediction_iter *it = loom_estimator_predict(e, input_fn, &te, &po, st);
  cr_assert(it && loom_prediction_next(it, st) == LOOM_OK, "%s", loom_status_message(st));
  const loom_tensor *p = loom_prediction_value(it, 0);
  cr_expect(!memcmp(loom_tensor_data_const(p), loom_tensor_data_const(want), loom_tensor_nbytes(want)));
  loom_prediction_iter_free(it);
  loom_estimator_free(e);
  loom_tensor_free(want);
  data_free(&te);
  tu_rmtree(dir);
  loom_status_free(st);
}

/* ---- errors ---- */
Test(sequential, errors_name_the_layer) {
  loom_status *st = loom_status_new();
  loom_sequential_compile_options c = loom_sequential_compile_options_default();
  c.loss = "sparse_categorical_crossentropy";

  /* a conv layer after flatten: wrong rank, named by index and kind */
  loom_sequential *m = loom_sequential_new(st);
  loom_sequential_set_input(m, "image", LOOM_F32, 3, (int64_t[]){8, 8, 1}, st);
  loom_sequential_add_conv2d(m, 4, (int64_t[]){3, 3}, NULL, NULL, st);
  loom_sequential_add_flatten(m, NULL, st);
  loom_sequential_add_conv2d(m, 4, (int64_t[]){3, 3}, NULL, NULL, st);
  loom_sequential_add_dense(m, 2, NULL, NULL, st);
  cr_assert_eq(loom_sequential_compile(m, &c, st), LOOM_INVALID_ARGUMENT);
  const char *msg = loom_status_message(st);
  cr_expect(strstr(msg, "layer 2 (conv2d 'conv2d_1')") && strstr(msg, "rank-4") && strstr(msg, "rank 2") &&
                strstr(msg, "[?,144]") && strstr(msg, "layer 1, flatten 'flatten'"),
            "message: %s", msg);
  /* not compiled: fit is refused */
  data tr = make_data(10, 1, 5);
  loom_dataset *ds = dataset(&tr, 0, 0, st);
  cr_expect_eq(loom_sequential_fit(m, ds, NULL, NULL, st), LOOM_FAILED_PRECONDITION);
  cr_expect(strstr(loom_status_message(st), "not compiled"), "%s", loom_status_message(st));
  loom_dataset_free(ds);
  data_free(&tr);
  loom_sequential_free(m);

  /* an unknown loss, metric, optimizer; an empty stack; no input */
  m = loom_sequential_new(st);
  cr_expect_eq(loom_sequential_compile(m, &c, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "no layers"), "%s", loom_status_message(st));
  loom_sequential_add_dense(m, 2, NULL, NULL, st);
  cr_expect_eq(loom_sequential_compile(m, &c, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "no input shape"), "%s", loom_status_message(st));
  loom_sequential_set_input(m, NULL, LOOM_F32, 1, (int64_t[]){4}, st);
  loom_sequential_compile_options bad = c;
  bad.loss = "hinge_of_doom";
  cr_expect_eq(loom_sequential_compile(m, &bad, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "unknown loss 'hinge_of_doom'") &&
                strstr(loom_status_message(st), "sparse_categorical_crossentropy"),
            "%s", loom_status_message(st));
  bad = c;
  bad.metrics = (const char *[]){"accuracy", "f1"};
  bad.nmetrics = 2;
  cr_expect_eq(loom_sequential_compile(m, &bad, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "unknown metric 'f1'"), "%s", loom_status_message(st));
  bad = c;
  bad.optimizer = "Adamax";
  cr_expect_eq(loom_sequential_compile(m, &bad, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "unknown optimizer 'Adamax'"), "%s", loom_status_message(st));
  bad = c;
  bad.loss = "mse";
  bad.metrics = (const char *[]){"accuracy"};
  bad.nmetrics = 1;
  cr_expect_eq(loom_sequential_compile(m, &bad, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "classification loss"), "%s", loom_status_message(st));
  /* a failed compile leaves the model usable */
  cr_assert_eq(loom_sequential_compile(m, &c, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(loom_sequential_add_dense(m, 2, NULL, NULL, st), -1);
  cr_expect_eq(loom_status_code(st), LOOM_FAILED_PRECONDITION);
  cr_expect_eq(loom_sequential_compile(m, &c, st), LOOM_FAILED_PRECONDITION);
  loom_sequential_free(m);

  /* bad layer arguments name the index being added */
  m = loom_sequential_new(st);
  loom_sequential_add_flatten(m, NULL, st);
  loom_dense_options o = loom_dense_options_default();
  o.activation = "swishy";
  cr_expect_eq(loom_sequential_add_dense(m, 3, &o, NULL, st), -1);
  cr_expect(strstr(loom_status_message(st), "layer 1 (dense 'dense')") && strstr(loom_status_message(st), "swishy"),
            "%s", loom_status_message(st));
  cr_expect_eq(loom_sequential_add_dropout(m, 1.5, 0, NULL, st), -1);
  cr_expect(strstr(loom_status_message(st), "layer 1 (dropout"), "%s", loom_status_message(st));
  cr_expect_eq(loom_sequential_add_dense(m, 3, NULL, "flatten", st), -1);
  cr_expect(strstr(loom_status_message(st), "taken by layer 0"), "%s", loom_status_message(st));
  cr_expect_eq(loom_sequential_num_layers(m), 1);
  /* an embedding fed floats */
  loom_sequential_free(m);
  m = loom_sequential_new(st);
  loom_sequential_set_input(m, NULL, LOOM_F32, 1, (int64_t[]){4}, st);
  loom_sequential_add_embedding(m, 10, 3, NULL, NULL, st);
  cr_expect_eq(loom_sequential_compile(m, &c, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "layer 0 (embedding 'embedding')") &&
                strstr(loom_status_message(st), "integer ids"),
            "%s", loom_status_message(st));
  loom_sequential_free(m);
  loom_status_free(st);
}

/* An embedding stack: ids -> embedding -> flatten -> dense, trained directly
 * (the ids' class is the parity of their sum). */
Test(sequential, embedding_stack_trains) {
  loom_status *st = loom_status_new();
  int64_t n = 400;
  loom_tensor *ids = loom_tensor_new(LOOM_I32, 2, (int64_t[]){n, 3}, NULL);
  loom_tensor *y = loom_tensor_new(LOOM_I32, 1, (int64_t[]){n}, NULL);
  int32_t *pi = loom_tensor_data(ids), *py = loom_tensor_data(y);
  lcg = 99;
  for (int64_t i = 0; i < n; i++) {
    for (int k = 0; k < 3; k++) pi[3 * i + k] = (int32_t)(urand() * 8);
    py[i] = pi[3 * i] >= 4; /* the first id decides */
  }
  loom_sequential *m = loom_sequential_new(st);
  loom_sequential_set_input(m, "ids", LOOM_I32, 1, (int64_t[]){3}, st);
  loom_sequential_add_embedding(m, 8, 4, NULL, NULL, st);
  loom_sequential_add_flatten(m, NULL, st);
  loom_sequential_add_dense(m, 1, NULL, NULL, st);
  loom_sequential_compile_options c = loom_sequential_compile_options_default();
  c.loss = "binary_crossentropy";
  c.learning_rate = 0.05;
  c.metrics = (const char *[]){"accuracy"};
  c.nmetrics = 1;
  c.seed = 3;
  cr_assert_eq(loom_sequential_compile(m, &c, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_str_eq(loom_sequential_variable_name(m, 0), "embedding/embeddings");
  const char *names[2] = {"ids", "label"};
  const loom_tensor *arr[2] = {ids, y};
  loom_dataset *ds = loom_dataset_batch(loom_dataset_from_tensors(2, names, arr, "label", st), 40, 0, st);
  loom_sequential_fit_options fo = loom_sequential_fit_options_default();
  fo.epochs = 30;
  cr_assert_eq(loom_sequential_fit(m, ds, &fo, NULL, st), LOOM_OK, "%s", loom_status_message(st));
  loom_eval_result *r = NULL;
  cr_assert_eq(loom_sequential_evaluate(m, ds, 0, &r, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect(result(r, "accuracy") >= 0.99, "accuracy %g", result(r, "accuracy"));
  loom_eval_result_free(r);
  loom_dataset_free(ds);
  loom_sequential_free(m);
  loom_tensor_free(ids);
  loom_tensor_free(y);
  loom_status_free(st);
}

/* "RMSProp" is Keras' RMSprop: its mean square ("dense/kernel/RMSProp", in the estimator's first checkpoint)
 * starts at 0, not at TF 1's 1. */
Test(sequential, rmsprop_mean_square_starts_at_zero_as_keras) {
  loom_status *st = loom_status_new();
  loom_sequential *m = loom_sequential_new(st);
  cr_assert(m);
  cr_assert_eq(loom_sequential_set_input(m, NULL, LOOM_F32, 1, (int64_t[]){2}, st), LOOM_OK);
  cr_assert(loom_sequential_add_dense(m, 3, NULL, NULL, st) >= 0, "%s", loom_status_message(st));
  loom_sequential_compile_options c = loom_sequential_compile_options_default();
  c.loss = "sparse_categorical_crossentropy";
  c.optimizer = "RMSProp";
  c.seed = 1;
  c.num_threads = 1;
  cr_assert_eq(loom_sequential_compile(m, &c, st), LOOM_OK, "compile: %s", loom_status_message(st));
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "seq_rms");
  loom_estimator *e = loom_sequential_to_estimator(m, dir, NULL, st); /* its first checkpoint has the slots */
  cr_assert(e, "%s", loom_status_message(st));
  loom_tensor *t = NULL;
  cr_assert_eq(loom_estimator_get_variable_value(e, "dense/kernel/RMSProp", &t, st), LOOM_OK, "%s",
               loom_status_message(st));
  const float *p = loom_tensor_data_const(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) cr_expect_eq(p[i], 0.0f, "rms[%lld] = %g", (long long)i, p[i]);
  cr_expect_eq(loom_tensor_numel(t), 6);
  loom_tensor_free(t);
  loom_estimator_free(e);
  loom_sequential_free(m);
  loom_status_free(st);
  tu_rmtree(dir);
}
