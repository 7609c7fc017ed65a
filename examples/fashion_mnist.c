/* examples/fashion_mnist.c - the main job (`make demo`).
 *
 * A custom model_fn (a small CNN, or an MLP with dropout: --model mlp)
 * trained with Adam through the Estimator on Debian's Fashion-MNIST, with
 * progress output; then evaluated (accuracy metric), exported, reloaded
 * with the resident predictor, which classifies a few test images. The last
 * line is "test_accuracy=<value>".
 *
 * Usage: fashion_mnist [--model cnn|mlp] [--epochs N] [--batch N]
 *                      [--model-dir DIR] [--threads N] [--data DIR]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "loom/loom.h"

static const char *CLASSES[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

typedef struct job {
  const char *data_dir;
  int64_t batch;
  uint64_t seed;
} job;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void paths(const job *j, int train, char *img, char *lab, size_t cap) {
  snprintf(img, cap, "%s/%s-images-idx3-ubyte.gz", j->data_dir, train ? "train" : "t10k");
  snprintf(lab, cap, "%s/%s-labels-idx1-ubyte.gz", j->data_dir, train ? "train" : "t10k");
}

/* input_fn: the training set shuffled each epoch and repeated; the test set
 * once, in order. */
static loom_dataset *input_fn(loom_mode mode, const loom_params *params, void *user, loom_status *st) {
  (void)params;
  const job *j = user;
  char img[512], lab[512];
  paths(j, mode == LOOM_MODE_TRAIN, img, lab, sizeof img);
  loom_idx_options o = loom_idx_options_default();
  loom_dataset *ds = loom_dataset_idx(img, lab, &o, st);
  if (ds && mode == LOOM_MODE_TRAIN) {
    ds = loom_dataset_shuffle(ds, 60000, j->seed, 1, st);
    if (ds) ds = loom_dataset_repeat(ds, -1, st);
  }
  if (ds) ds = loom_dataset_batch(ds, mode == LOOM_MODE_TRAIN ? j->batch : 1000, 0, st);
  return ds;
}

/* The model_fn: one function, three modes. */
static loom_code model_fn(loom_graph *g, const loom_features *features, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *config, loom_estimator_spec *spec,
                          void *user, loom_status *st) {
  (void)config;
  (void)user;
  (void)st;
  int training = mode == LOOM_MODE_TRAIN;
  loom_output x = loom_features_get(features, "image");
  const char *model = loom_params_get(params, "model");
  loom_dense_options relu = loom_dense_options_default();
  relu.activation = "relu";
  loom_dropout_options dop = loom_dropout_options_default();
  dop.training = training;
  loom_output h;
  if (model && !strcmp(model, "mlp")) {
    h = loom_layers_dense(g, x, 512, &relu, "dense");
    h = loom_layers_dropout(g, h, 0.2, &dop, "dropout");
    h = loom_layers_dense(g, h, 256, &relu, "dense_1");
    h = loom_layers_dropout(g, h, 0.2, &dop, "dropout_1");
  } else {
    int64_t shape[4] = {-1, 28, 28, 1}, k3[2] = {3, 3}, p2[2] = {2, 2};
    h = loom_reshape(g, x, 4, shape, "image_nhwc");
    loom_conv2d_options co = loom_conv2d_options_default();
    co.activation = "relu";
    h = loom_layers_conv2d(g, h, 32, k3, &co, "conv2d");
    h = loom_layers_max_pooling2d(g, h, p2, p2, "valid", "pool");
    h = loom_layers_conv2d(g, h, 64, k3, &co, "conv2d_1");
    h = loom_layers_max_pooling2d(g, h, p2, p2, "valid", "pool_1");
    h = loom_layers_flatten(g, h, "flatten");
    h = loom_layers_dense(g, h, 128, &relu, "dense");
    h = loom_layers_dropout(g, h, 0.3, &dop, "dropout");
  }
  loom_output logits = loom_layers_dense(g, h, 10, NULL, "logits");
  loom_output classes = loom_argmax(g, logits, 1, LOOM_I32, "classes");
  loom_spec_add_prediction(spec, "classes", classes);
  loom_spec_add_prediction(spec, "probabilities", loom_softmax(g, logits, "probabilities"));
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;

  loom_output none = {NULL, 0};
  loom_output loss = loom_losses_sparse_softmax_cross_entropy(g, labels, logits, none, NULL, NULL,
                                                              LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS);
  loom_spec_set_loss(spec, loss);
  loom_spec_add_eval_metric(spec, "accuracy", loom_metrics_accuracy(g, labels, classes, none, "accuracy"));
  if (training) {
    loom_output lr = loom_const_f32(g, (float)loom_params_get_double(params, "learning_rate", 1e-3), "learning_rate");
    loom_optimizer *opt = loom_optimizer_adam(lr, NULL);
    loom_spec_set_train_op(spec, loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL));
    loom_optimizer_free(opt);
  }
  return LOOM_OK;
}

/* Serving input: a batch of flattened images. */
static loom_code serving_input_fn(loom_graph *g, loom_features *features, loom_features *receivers, void *user,
                                  loom_status *st) {
  (void)user;
  int64_t dims[2] = {-1, 784};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, dims, "image");
  loom_code rc = loom_features_add(features, "image", x, st);
  return rc ? rc : loom_features_add(receivers, "image", x, st);
}

static int fail(const char *what, loom_status *st) {
  fprintf(stderr, "fashion_mnist: %s: %s\n", what, loom_status_message(st));
  return 1;
}

int main(int argc, char **argv) {
  const char *model = "cnn", *model_dir = NULL;
  int epochs = -1, threads = 0;
  job j = {"/usr/share/datasets/fashion-mnist", 64, 42};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--model") && v) model = argv[++i];
    else if (!strcmp(a, "--epochs") && v) epochs = atoi(argv[++i]);
    else if (!strcmp(a, "--batch") && v) j.batch = atoi(argv[++i]);
    else if (!strcmp(a, "--model-dir") && v) model_dir = argv[++i];
    else if (!strcmp(a, "--threads") && v) threads = atoi(argv[++i]);
    else if (!strcmp(a, "--data") && v) j.data_dir = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--model cnn|mlp] [--epochs N] [--batch N] [--model-dir DIR] [--threads N] [--data DIR]\n",
              argv[0]);
      return 2;
    }
  }
  if (epochs < 0) epochs = strcmp(model, "mlp") ? 4 : 12;
  loom_log_set(NULL, NULL, LOOM_LOG_INFO);
  loom_status *st = loom_status_new();
  char tmpdir[] = "/tmp/loom_fashion_mnist_XXXXXX";
  if (!model_dir) {
    if (!mkdtemp(tmpdir)) return fail("mkdtemp", st);
    model_dir = tmpdir;
  }
  printf("Fashion-MNIST: %s, Adam, batch %lld, %d epochs, model_dir %s\n", model, (long long)j.batch, epochs,
         model_dir);
  fflush(stdout);

  loom_run_config cfg = loom_run_config_default();
  cfg.has_random_seed = 1;
  cfg.tf_random_seed = 42;
  cfg.num_threads = threads;
  cfg.save_checkpoints_steps = -1;
  cfg.save_checkpoints_secs = 600;
  loom_params *params = loom_params_new();
  loom_params_set(params, "model", model, st);
  loom_params_set_double(params, "learning_rate", 1e-3, st);
  loom_estimator *est = loom_estimator_new(model_fn, NULL, model_dir, &cfg, params, NULL, st);
  loom_params_free(params);
  if (!est) return fail("estimator", st);

  /* train */
  double t0 = now_s();
  loom_train_options to = loom_train_options_default();
  to.max_steps = (int64_t)epochs * ((60000 + j.batch - 1) / j.batch);
  if (loom_estimator_train(est, input_fn, &j, &to, st) != LOOM_OK) return fail("train", st);
  double t_train = now_s() - t0;

  /* evaluate */
  loom_eval_result *res = NULL;
  if (loom_estimator_evaluate(est, input_fn, &j, NULL, &res, st) != LOOM_OK) return fail("evaluate", st);
  double acc = 0, loss = 0;
  loom_eval_result_get(res, "accuracy", &acc, NULL);
  loom_eval_result_get(res, "loss", &loss, NULL);
  printf("evaluation: accuracy = %.4f, loss = %.4f, global_step = %lld (training took %.1f s)\n", acc, loss,
         (long long)loom_eval_result_global_step(res), t_train);

  /* export and reload with the resident predictor */
  char base[600], exported[1024];
  snprintf(base, sizeof base, "%s/export", model_dir);
  if (loom_estimator_export(est, serving_input_fn, NULL, base, NULL, exported, sizeof exported, st) != LOOM_OK)
    return fail("export", st);
  printf("exported to %s\n", exported);
  loom_predictor_options po = loom_predictor_options_default();
  po.num_threads = threads;
  loom_predictor *pred = loom_predictor_load(exported, &po, st);
  if (!pred) return fail("predictor", st);

  /* classify a few test images */
  char img[512], lab[512];
  paths(&j, 0, img, lab, sizeof img);
  loom_idx_options io = loom_idx_options_default();
  io.limit = 8;
  loom_dataset *few = loom_dataset_idx(img, lab, &io, st);
  if (few) few = loom_dataset_batch(few, 8, 0, st);
  if (!few) return fail("test images", st);
  loom_tensor *vals[2] = {NULL, NULL};
  if (loom_dataset_next(few, vals, st) != LOOM_OK) return fail("test images", st);
  int ii = loom_dataset_find(few, "image"), li = loom_dataset_label_index(few);
  int nout = loom_predictor_num_outputs(pred, NULL), ci = 0;
  for (int k = 0; k < nout; k++)
    if (!strcmp(loom_predictor_output_key(pred, NULL, k), "classes")) ci = k;
  loom_tensor *outs[4] = {NULL, NULL, NULL, NULL};
  double tp = now_s();
  if (loom_predictor_run(pred, NULL, 1, &vals[ii], nout, outs, st) != LOOM_OK) return fail("predict", st);
  double us = (now_s() - tp) * 1e6;
  const int32_t *pc = loom_tensor_data_const(outs[ci]);
  const int32_t *tl = loom_tensor_data_const(vals[li]);
  printf("predictor (batch of 8 in %.0f us):\n", us);
  for (int i = 0; i < 8; i++)
    printf("  image %d: true %-12s predicted %-12s %s\n", i, CLASSES[tl[i]], CLASSES[pc[i]],
           tl[i] == pc[i] ? "" : "(wrong)");
  for (int k = 0; k < nout; k++) loom_tensor_free(outs[k]);
  loom_tensor_free(vals[0]);
  loom_tensor_free(vals[1]);
  loom_dataset_free(few);
  loom_predictor_free(pred);
  loom_eval_result_free(res);
  loom_estimator_free(est);
  loom_status_free(st);
  printf("test_accuracy=%.4f\n", acc);
  return 0;
}
