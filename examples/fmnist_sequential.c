/* fmnist_sequential.c - Fashion-MNIST with a layer stack (loom_sequential.h):
 * the DNN of fmnist_canned.c (dense 128 relu, dense 64 relu, 10 logits;
 * Adagrad 0.05) as a Keras-style Sequential, trained directly for --epochs
 * epochs, then turned into an Estimator (model_to_estimator: the trained
 * weights become its first checkpoint) that trains --steps more steps,
 * evaluates and exports.
 *   fmnist_sequential [--epochs N] [--steps N] [--data DIR] [--model-dir DIR (default: a new /tmp dir)] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loom/loom.h"

static const char *dir = "/usr/share/datasets/fashion-mnist";

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p;
  char img[512], lab[512];
  const char *part = mode == LOOM_MODE_TRAIN ? "train" : "t10k";
  snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte.gz", dir, part);
  snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte.gz", dir, part);
  loom_dataset *ds = loom_dataset_idx(img, lab, NULL, st);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_shuffle(ds, 10000, 1, 1, st);
  if (ds && mode == LOOM_MODE_TRAIN && !user) ds = loom_dataset_repeat(ds, -1, st); /* the estimator's */
  return ds ? loom_dataset_batch(ds, 128, 0, st) : NULL;
}

static int fail(loom_status *st) {
  fprintf(stderr, "fmnist_sequential: %s\n", loom_status_message(st));
  return 1;
}

int main(int argc, char **argv) {
  int64_t epochs = 1, steps = 200;
  const char *model_dir = NULL;
  char tmp[] = "/tmp/loom_fmnist_sequential_XXXXXX";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--epochs")) epochs = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) steps = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--data")) dir = argv[i + 1];
    else if (!strcmp(argv[i], "--model-dir")) model_dir = argv[i + 1];
  }
  if (!model_dir && !(model_dir = mkdtemp(tmp))) return 1;
  loom_status *st = loom_status_new();
  loom_dense_options relu = loom_dense_options_default();
  relu.activation = "relu";
  loom_sequential *m = loom_sequential_new(st);
  loom_sequential_set_input(m, "image", LOOM_F32, 1, (int64_t[]){784}, st);
  loom_sequential_add_dense(m, 128, &relu, NULL, st);
  loom_sequential_add_dense(m, 64, &relu, NULL, st);
  loom_sequential_add_dense(m, 10, NULL, NULL, st);
  loom_sequential_compile_options c = loom_sequential_compile_options_default();
  c.loss = "sparse_categorical_crossentropy"; /* from logits */
  c.optimizer = "Adagrad";
  c.learning_rate = 0.05;
  c.metrics = (const char *[]){"accuracy"};
  c.nmetrics = 1;
  if (loom_sequential_compile(m, &c, st)) return fail(st);

  /* direct training and evaluation (Keras' fit / evaluate) */
  loom_dataset *train = input_fn(LOOM_MODE_TRAIN, NULL, m, st), *test = input_fn(LOOM_MODE_EVAL, NULL, m, st);
  loom_sequential_fit_options fo = loom_sequential_fit_options_default();
  fo.epochs = epochs;
  fo.verbose = 1;
  loom_eval_result *r = NULL;
  if (!train || !test || loom_sequential_fit(m, train, &fo, NULL, st) || loom_sequential_evaluate(m, test, 0, &r, st))
    return fail(st);
  double acc = 0;
  loom_eval_result_get(r, "accuracy", &acc, NULL);
  printf("sequential evaluate: accuracy = %.4f\n", acc);
  loom_eval_result_free(r);

  /* model_to_estimator: more training, evaluation and export */
  loom_estimator *e = loom_sequential_to_estimator(m, model_dir, NULL, st);
  loom_train_options to = loom_train_options_default();
  to.steps = steps;
  char base[600], exported[1024];
  snprintf(base, sizeof base, "%s/export", model_dir);
  if (!e || (steps > 0 && loom_estimator_train(e, input_fn, NULL, &to, st)) ||
      loom_estimator_evaluate(e, input_fn, NULL, NULL, &r, st) ||
      loom_estimator_export(e, loom_sequential_serving_input_fn, m, base, NULL, exported, sizeof exported, st))
    return fail(st);
  loom_eval_result_get(r, "accuracy", &acc, NULL);
  printf("estimator evaluate: global_step = %lld\nexported to %s\n", (long long)loom_eval_result_global_step(r),
         exported);
  printf("test_accuracy=%.4f\n", acc);
  loom_eval_result_free(r);
  loom_estimator_free(e);
  loom_dataset_free(train);
  loom_dataset_free(test);
  loom_sequential_free(m);
  loom_status_free(st);
  return 0;
}
