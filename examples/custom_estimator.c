/* examples/custom_estimator.c - a custom Estimator, one model_fn with a
 * branch per mode (TF's "Creating custom Estimators" pattern).
 *
 * Data: a CSV file written at start (columns x1, x2, x3, city, y with
 * y = 1*x1 - 2*x2 + 0.5*x3 + 3 + noise). The model_fn:
 *   all modes: features -> dense(16, relu) -> dense(1) = predictions
 *   PREDICT:   returns predictions only (and an export output)
 *   EVAL:      loss + eval_metric_ops (RMSE, MAE)
 *   TRAIN:     loss + train_op (Adagrad, global_step += 1) + a training hook
 * Then train (with a custom hook that counts steps), evaluate, predict a few
 * rows, and export. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loom/loom.h"

#define NROWS 2000

static const char *CSV = "/tmp/loom_custom_estimator.csv";

static int write_csv(void) {
  FILE *f = fopen(CSV, "w");
  if (!f) return -1;
  fprintf(f, "x1,x2,x3,city,y\n");
  uint64_t s = 12345;
  for (int i = 0; i < NROWS; i++) {
    double x[3];
    for (int k = 0; k < 3; k++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x[k] = (double)(s >> 11) / 9007199254740992.0 * 2 - 1;
    }
    double noise = ((double)((s >> 20) % 1000) / 1000.0 - 0.5) * 0.05;
    int missing = i % 17 == 0; /* an empty x3 field: the column default 0.25 applies */
    if (missing) x[2] = 0.25;
    double y = x[0] - 2 * x[1] + 0.5 * x[2] + 3 + noise;
    char x3[32] = "";
    if (!missing) snprintf(x3, sizeof x3, "%.6f", x[2]);
    fprintf(f, "%.6f,%.6f,%s,\"%s\",%.6f\n", x[0], x[1], x3, i % 2 ? "Paris, FR" : "Oslo", y);
  }
  fclose(f);
  return 0;
}

/* input_fn: x3 may be empty (default 0.25); the string column is skipped. */
static loom_dataset *input_fn(loom_mode mode, const loom_params *params, void *user, loom_status *st) {
  (void)user;
  loom_csv_column cols[5] = {
      {"x1", LOOM_F32, NULL, 1, 0},   {"x2", LOOM_F32, NULL, 1, 0}, {"x3", LOOM_F32, "0.25", 1, 0},
      {"city", LOOM_STRING, "", 0, 0}, {"y", LOOM_F32, NULL, 1, 0},
  };
  loom_csv_options o = {sizeof(loom_csv_options), 1, ',', 5, cols, "y"};
  const char *paths[1] = {CSV};
  loom_dataset *ds = loom_dataset_csv(1, paths, &o, st);
  int64_t batch = loom_params_get_int(params, "batch_size", 32);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_shuffle(ds, 1000, 1, 1, st);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, batch, 0, st);
  return ds;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *config, loom_estimator_spec *spec,
                          void *user, loom_status *st) {
  (void)config;
  (void)user;
  (void)st;
  /* Shared by every mode: the network. Scalar CSV columns -> [batch, 3]. */
  loom_output cols[3];
  const char *names[3] = {"x1", "x2", "x3"};
  for (int k = 0; k < 3; k++) {
    int64_t shape[2] = {-1, 1};
    cols[k] = loom_reshape(g, loom_features_get(f, names[k]), 2, shape, NULL);
  }
  loom_output x = loom_concat(g, 3, cols, 1, "inputs");
  loom_dense_options relu = loom_dense_options_default();
  relu.activation = "relu";
  loom_output h = loom_layers_dense(g, x, 16, &relu, "hidden");
  int64_t flat[1] = {-1};
  loom_output pred = loom_reshape(g, loom_layers_dense(g, h, 1, NULL, "output"), 1, flat, "predictions");

  /* PREDICT: predictions (and how to export them). */
  loom_spec_add_prediction(spec, "predictions", pred);
  if (mode == LOOM_MODE_PREDICT) {
    const char *key = "outputs";
    loom_spec_add_export_output(spec, "serving_default", LOOM_EXPORT_PREDICT, 1, &key, &pred);
    return LOOM_OK;
  }

  /* EVAL and TRAIN: a loss. */
  loom_output none = {NULL, 0};
  loom_output loss =
      loom_losses_mean_squared_error(g, labels, pred, none, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);

  /* EVAL: metrics (the estimator adds "loss"). */
  if (mode == LOOM_MODE_EVAL) {
    loom_spec_add_eval_metric(spec, "rmse", loom_metrics_root_mean_squared_error(g, labels, pred, none, NULL));
    loom_spec_add_eval_metric(spec, "mae", loom_metrics_mean_absolute_error(g, labels, pred, none, NULL));
    return LOOM_OK;
  }

  /* TRAIN: the train op, plus a hook that logs the learning rate once. */
  double lr = loom_params_get_double(params, "learning_rate", 0.1);
  loom_optimizer *opt = loom_optimizer_adagrad(loom_const_f32(g, (float)lr, "learning_rate"), NULL);
  loom_spec_set_train_op(spec, loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL));
  loom_optimizer_free(opt);
  const char *tag = "loss";
  loom_spec_add_hook(spec, LOOM_HOOKS_TRAINING, loom_logging_tensor_hook(1, &tag, &loss, 500, 0, 1, NULL));
  return LOOM_OK;
}

/* A custom SessionRunHook: counts the steps it saw. */
typedef struct counter {
  int steps;
} counter;
static loom_code count_after_run(void *self, loom_hook_context *ctx, loom_tensor *const *r, loom_status *st) {
  (void)ctx;
  (void)r;
  (void)st;
  ((counter *)self)->steps++;
  return LOOM_OK;
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  const char *names[3] = {"x1", "x2", "x3"};
  int64_t d[1] = {-1};
  for (int k = 0; k < 3; k++) {
    loom_output ph = loom_placeholder(g, LOOM_F32, 1, d, names[k]);
    loom_code rc = loom_features_add(f, names[k], ph, st);
    if (!rc) rc = loom_features_add(r, names[k], ph, st);
    if (rc) return rc;
  }
  return LOOM_OK;
}

static int die(const char *what, loom_status *st) {
  fprintf(stderr, "custom_estimator: %s: %s\n", what, loom_status_message(st));
  return 1;
}

int main(void) {
  loom_log_set(NULL, NULL, LOOM_LOG_INFO);
  if (write_csv()) return 1;
  loom_status *st = loom_status_new();
  char dir[] = "/tmp/loom_custom_estimator_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  loom_params *p = loom_params_new();
  loom_params_set_double(p, "learning_rate", 0.1, st);
  loom_params_set_int(p, "batch_size", 32, st);
  loom_run_config c = loom_run_config_default();
  c.has_random_seed = 1;
  c.tf_random_seed = 7;
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, p, NULL, st);
  loom_params_free(p);
  if (!e) return die("estimator", st);

  counter cnt = {0};
  static const loom_hook_ops counter_ops = {NULL, NULL, NULL, count_after_run, NULL, NULL};
  loom_hook *h = loom_hook_new(&counter_ops, &cnt, "counter");
  loom_train_options to = loom_train_options_default();
  to.steps = 1500;
  to.nhooks = 1;
  to.hooks = &h;
  if (loom_estimator_train(e, input_fn, NULL, &to, st)) return die("train", st);
  printf("trained %d steps (counted by a custom hook)\n", cnt.steps);
  loom_hook_free(h);

  loom_eval_result *r = NULL;
  if (loom_estimator_evaluate(e, input_fn, NULL, NULL, &r, st)) return die("evaluate", st);
  for (int i = 0; i < loom_eval_result_count(r); i++)
    printf("eval %s = %.5f\n", loom_eval_result_key(r, i), loom_eval_result_value(r, i));

  loom_prediction_iter *it = loom_estimator_predict(e, input_fn, NULL, NULL, st);
  if (!it) return die("predict", st);
  for (int i = 0; i < 3 && loom_prediction_next(it, st) == LOOM_OK; i++)
    printf("prediction %d: %.4f\n", i, *(const float *)loom_tensor_data_const(loom_prediction_get(it, "predictions")));
  loom_prediction_iter_free(it);

  char base[256], out[512];
  snprintf(base, sizeof base, "%s/export", dir);
  if (loom_estimator_export(e, serving_fn, NULL, base, NULL, out, sizeof out, st)) return die("export", st);
  printf("exported to %s\n", out);
  double rmse = 1;
  loom_eval_result_get(r, "rmse", &rmse, NULL);
  loom_eval_result_free(r);
  loom_estimator_free(e);
  loom_status_free(st);
  printf("rmse=%.5f\n", rmse);
  return rmse < 0.2 ? 0 : 1;
}
