/* fmnist_model_fn.c - Fashion-MNIST with a custom model_fn: the DNN of
 * fmnist_canned.c (dense 128 relu, dense 64 relu, 10 logits; Adagrad 0.05;
 * the mean sparse softmax cross entropy) written by hand. Trains briefly,
 * evaluates, exports.
 *   fmnist_model_fn [--steps N] [--data DIR] [--model-dir DIR (default: a new /tmp dir)] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loom/loom.h"

static const char *dir = "/usr/share/datasets/fashion-mnist";

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p, (void)user;
  char img[512], lab[512];
  const char *part = mode == LOOM_MODE_TRAIN ? "train" : "t10k";
  snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte.gz", dir, part);
  snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte.gz", dir, part);
  loom_dataset *ds = loom_dataset_idx(img, lab, NULL, st);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_repeat(loom_dataset_shuffle(ds, 10000, 1, 1, st), -1, st);
  return ds ? loom_dataset_batch(ds, 128, 0, st) : NULL;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *p, const loom_run_config *c, loom_estimator_spec *spec, void *u,
                          loom_status *st) {
  (void)p, (void)c, (void)u, (void)st;
  loom_dense_options relu = loom_dense_options_default();
  relu.activation = "relu";
  loom_output h = loom_layers_dense(g, loom_features_get(f, "image"), 128, &relu, NULL);
  h = loom_layers_dense(g, h, 64, &relu, NULL);
  loom_output logits = loom_layers_dense(g, h, 10, NULL, NULL);
  loom_output classes = loom_argmax(g, logits, 1, LOOM_I64, "classes");
  loom_spec_add_prediction(spec, "class_ids", classes);
  loom_spec_add_prediction(spec, "probabilities", loom_softmax(g, logits, "probabilities"));
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_output none = {NULL, 0};
  loom_output loss = loom_losses_sparse_softmax_cross_entropy(g, labels, logits, none, NULL, NULL,
                                                              LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  loom_spec_add_eval_metric(spec, "accuracy", loom_metrics_accuracy(g, labels, classes, none, NULL));
  if (mode == LOOM_MODE_TRAIN) {
    loom_optimizer *opt = loom_optimizer_adagrad(loom_const_f32(g, 0.05f, "learning_rate"), NULL);
    loom_spec_set_train_op(spec, loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL));
    loom_optimizer_free(opt);
  }
  return LOOM_OK;
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  loom_output x = loom_placeholder(g, LOOM_F32, 2, (int64_t[]){-1, 784}, "image");
  loom_code rc = loom_features_add(f, "image", x, st);
  return rc ? rc : loom_features_add(r, "image", x, st);
}

int main(int argc, char **argv) {
  int64_t steps = 1000;
  const char *model_dir = NULL;
  char tmp[] = "/tmp/loom_fmnist_model_fn_XXXXXX";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--steps")) steps = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--data")) dir = argv[i + 1];
    else if (!strcmp(argv[i], "--model-dir")) model_dir = argv[i + 1];
  }
  if (!model_dir && !(model_dir = mkdtemp(tmp))) return 1;
  loom_status *st = loom_status_new();
  loom_estimator *e = loom_estimator_new(model_fn, NULL, model_dir, NULL, NULL, NULL, st);
  loom_train_options to = loom_train_options_default();
  to.steps = steps;
  loom_eval_result *r = NULL;
  char base[600], exported[1024];
  snprintf(base, sizeof base, "%s/export", model_dir);
  if (!e || loom_estimator_train(e, input_fn, NULL, &to, st) ||
      loom_estimator_evaluate(e, input_fn, NULL, NULL, &r, st) ||
      loom_estimator_export(e, serving_fn, NULL, base, NULL, exported, sizeof exported, st)) {
    fprintf(stderr, "fmnist_model_fn: %s\n", loom_status_message(st));
    return 1;
  }
  double acc = 0, loss = 0;
  loom_eval_result_get(r, "accuracy", &acc, NULL);
  loom_eval_result_get(r, "loss", &loss, NULL);
  printf("loss = %g, global_step = %lld\nexported to %s\n", loss, (long long)loom_eval_result_global_step(r), exported);
  printf("test_accuracy=%.4f\n", acc);
  loom_eval_result_free(r);
  loom_estimator_free(e);
  loom_status_free(st);
  return 0;
}
