/* canned_dnn_fashion_mnist.c - Fashion-MNIST with a canned DNNClassifier
 * (TF's tf.estimator.DNNClassifier(hidden_units=[128, 64],
 * feature_columns=[numeric_column('image', shape=784)], n_classes=10)):
 * train briefly, evaluate, export.
 *   build/examples/canned_dnn_fashion_mnist [data_dir] [steps]
 * data_dir defaults to /usr/share/datasets/fashion-mnist (Debian's
 * dataset-fashion-mnist IDX files). */
#include <stdio.h>
#include <stdlib.h>
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
  if (argc > 1) dir = argv[1];
  int64_t steps = argc > 2 ? atoll(argv[2]) : 1000;
  loom_status *st = loom_status_new();
  loom_fc_set *cols = loom_fc_set_new();
  const loom_fc *image = loom_fc_numeric(cols, "image", 1, (int64_t[]){784}, NULL, LOOM_F32, NULL, NULL, st);

  loom_dnn_options o = loom_dnn_options_default();  /* Adagrad 0.001, relu: TF 2.15's defaults */
  o.model_dir = "/tmp/loom_canned_fashion_mnist";
  o.hidden_units = (int64_t[]){128, 64};
  o.nhidden_units = 2;
  o.feature_columns = &image;
  o.nfeature_columns = 1;
  o.n_classes = 10;
  loom_estimator *e = image ? loom_dnn_classifier_new(&o, st) : NULL;

  loom_train_options to = loom_train_options_default();
  to.steps = steps;
  loom_eval_result *r = NULL;
  char exported[1024];
  if (!e || loom_estimator_train(e, input_fn, NULL, &to, st) ||
      loom_estimator_evaluate(e, input_fn, NULL, NULL, &r, st) ||
      loom_estimator_export(e, serving_fn, NULL, "/tmp/loom_canned_fashion_mnist/export", NULL, exported,
                            sizeof exported, st)) {
    fprintf(stderr, "canned_dnn_fashion_mnist: %s\n", loom_status_message(st));
    return 1;
  }
  for (int i = 0; i < loom_eval_result_count(r); i++)
    printf("%s = %g\n", loom_eval_result_key(r, i), loom_eval_result_value(r, i));
  printf("exported to %s\n", exported);
  loom_eval_result_free(r);
  loom_estimator_free(e);
  loom_fc_set_free(cols);
  loom_status_free(st);
  return 0;
}
