/* fmnist_canned.c - Fashion-MNIST with a canned DNNClassifier (TF's
 * tf.estimator.DNNClassifier(hidden_units=[128, 64],
 * feature_columns=[numeric_column('image', shape=784)], n_classes=10),
 * Adagrad 0.05): train briefly, evaluate, export. The same model as
 * fmnist_model_fn.c (custom model_fn) and fmnist_sequential.c (layer stack).
 *   fmnist_canned [--steps N] [--data DIR] [--model-dir DIR (default: a new /tmp dir)]
 * DIR defaults to /usr/share/datasets/fashion-mnist (Debian's
 * dataset-fashion-mnist IDX files). */
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

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  loom_output x = loom_placeholder(g, LOOM_F32, 2, (int64_t[]){-1, 784}, "image");
  loom_code rc = loom_features_add(f, "image", x, st);
  return rc ? rc : loom_features_add(r, "image", x, st);
}

int main(int argc, char **argv) {
  int64_t steps = 1000;
  const char *model_dir = NULL;
  char tmp[] = "/tmp/loom_fmnist_canned_XXXXXX";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--steps")) steps = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--data")) dir = argv[i + 1];
    else if (!strcmp(argv[i], "--model-dir")) model_dir = argv[i + 1];
  }
  if (!model_dir && !(model_dir = mkdtemp(tmp))) return 1;
  loom_status *st = loom_status_new();
  loom_fc_set *cols = loom_fc_set_new();
  const loom_fc *image = loom_fc_numeric(cols, "image", 1, (int64_t[]){784}, NULL, LOOM_F32, NULL, NULL, st);

  loom_dnn_options o = loom_dnn_options_default();  /* relu; TF 2.15's default Adagrad rate is 0.001 */
  o.model_dir = model_dir;
  o.optimizer.learning_rate = 0.05; /* Adagrad 0.05: the same model as fmnist_model_fn.c / fmnist_sequential.c */
  o.hidden_units = (int64_t[]){128, 64};
  o.nhidden_units = 2;
  o.feature_columns = &image;
  o.nfeature_columns = 1;
  o.n_classes = 10;
  loom_estimator *e = image ? loom_dnn_classifier_new(&o, st) : NULL;

  loom_train_options to = loom_train_options_default();
  to.steps = steps;
  loom_eval_result *r = NULL;
  char base[600], exported[1024];
  snprintf(base, sizeof base, "%s/export", model_dir);
  if (!e || loom_estimator_train(e, input_fn, NULL, &to, st) ||
      loom_estimator_evaluate(e, input_fn, NULL, NULL, &r, st) ||
      loom_estimator_export(e, serving_fn, NULL, base, NULL, exported, sizeof exported, st)) {
    fprintf(stderr, "fmnist_canned: %s\n", loom_status_message(st));
    return 1;
  }
  for (int i = 0; i < loom_eval_result_count(r); i++)
    printf("%s = %g\n", loom_eval_result_key(r, i), loom_eval_result_value(r, i));
  printf("exported to %s\n", exported);
  double acc = 0;
  loom_eval_result_get(r, "accuracy", &acc, NULL);
  printf("test_accuracy=%.4f\n", acc);
  loom_eval_result_free(r);
  loom_estimator_free(e);
  loom_fc_set_free(cols);
  loom_status_free(st);
  return 0;
}
