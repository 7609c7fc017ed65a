/* bench/estimator_overhead.c - what the Estimator harness costs.
 *
 * The same MLP (784-512-256-10, ReLU, Adam, batch 128) on Fashion-MNIST is
 * trained for --steps steps twice per round:
 *   raw: one session, a hand-written loop that gathers shuffled rows into
 *        the feed tensor and runs the train op;
 *   est: Estimator.train with an input pipeline (from_tensors -> shuffle ->
 *        repeat -> batch), the default hooks (NaN guard, logging,
 *        step counter, summaries every 100 steps, checkpoints at start and
 *        end), event files.
 * Both include session creation and variable initialisation. Rounds
 * alternate; the best time of each is used. Prints key=value lines:
 * raw_step_us, est_step_us, overhead (= est/raw - 1; target <= 0.05).
 *
 * Usage: estimator_overhead [--steps N] [--rounds R] [--threads T]
 *                           [--prefetch N (RunConfig.prefetch, default 0)]
 *                           [--checkpoints 0|1 (default 1: TF's default saves)]
 */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "bench/bench_util.h"
#include "loom/loom.h"

#define BATCH 128

static loom_tensor *g_images, *g_labels;

static loom_output mlp(loom_graph *g, loom_output x) {
  loom_dense_options relu = loom_dense_options_default();
  relu.activation = "relu";
  loom_output h = loom_layers_dense(g, x, 512, &relu, "dense");
  h = loom_layers_dense(g, h, 256, &relu, "dense_1");
  return loom_layers_dense(g, h, 10, NULL, "logits");
}

static loom_node *train_op(loom_graph *g, loom_output logits, loom_output labels, loom_output *loss) {
  loom_output none = {NULL, 0};
  *loss = loom_losses_sparse_softmax_cross_entropy(g, labels, logits, none, NULL, NULL,
                                                   LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS);
  loom_optimizer *opt = loom_optimizer_adam(loom_const_f32(g, 1e-3f, "learning_rate"), NULL);
  loom_node *op = loom_optimizer_minimize(opt, g, *loss, 0, NULL, loom_get_or_create_global_step(g), NULL);
  loom_optimizer_free(opt);
  return op;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *p, const loom_run_config *c, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)mode;
  (void)p;
  (void)c;
  (void)user;
  (void)st;
  loom_output logits = mlp(g, loom_features_get(f, "image")), loss;
  loom_spec_add_prediction(spec, "logits", logits);
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_node *op = train_op(g, logits, labels, &loss);
  loom_spec_set_loss(spec, loss);
  loom_spec_set_train_op(spec, op);
  return LOOM_OK;
}

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)mode;
  (void)p;
  (void)user;
  const char *names[2] = {"image", "label"};
  const loom_tensor *arr[2] = {g_images, g_labels};
  loom_dataset *ds = loom_dataset_from_tensors(2, names, arr, "label", st);
  if (ds) ds = loom_dataset_shuffle(ds, 60000, 7, 1, st);
  if (ds) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, BATCH, 1, st);
  return ds;
}

static double run_raw(int64_t steps, int threads) {
  double t0 = bu_now_us();
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 784}, yd[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "image");
  loom_output y = loom_placeholder(g, LOOM_I32, 1, yd, "label");
  loom_output loss;
  loom_node *op = train_op(g, mlp(g, x), y, &loss);
  loom_session_options so = loom_session_options_default();
  so.num_threads = threads;
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, &so, st);
  loom_node *init = loom_global_variables_initializer(g);
  if (!s || loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st)) {
    fprintf(stderr, "raw: %s\n", loom_status_message(st));
    exit(1);
  }
  int64_t bx[2] = {BATCH, 784}, by[1] = {BATCH};
  loom_tensor *fx = loom_tensor_new(LOOM_F32, 2, bx, NULL), *fy = loom_tensor_new(LOOM_I32, 1, by, NULL);
  int32_t *idx = malloc(sizeof(int32_t) * 60000);
  for (int i = 0; i < 60000; i++) idx[i] = i;
  uint64_t rs = 7;
  bu_shuffle(idx, 60000, &rs);
  const float *img = loom_tensor_data_const(g_images);
  const int32_t *lab = loom_tensor_data_const(g_labels);
  loom_output feeds[2] = {x, y};
  loom_tensor *fv[2] = {fx, fy};
  loom_tensor *lv = NULL;
  int64_t pos = 0;
  for (int64_t step = 0; step < steps; step++) {
    if (pos + BATCH > 60000) {
      bu_shuffle(idx, 60000, &rs);
      pos = 0;
    }
    float *dx = loom_tensor_data(fx);
    int32_t *dy = loom_tensor_data(fy);
    for (int i = 0; i < BATCH; i++) {
      memcpy(dx + (size_t)i * 784, img + (size_t)idx[pos + i] * 784, 784 * sizeof(float));
      dy[i] = lab[idx[pos + i]];
    }
    pos += BATCH;
    if (loom_session_run(s, feeds, fv, 2, &loss, &lv, 1, &op, 1, st)) {
      fprintf(stderr, "raw: %s\n", loom_status_message(st));
      exit(1);
    }
  }
  double t = bu_now_us() - t0;
  loom_tensor_free(lv);
  loom_tensor_free(fx);
  loom_tensor_free(fy);
  free(idx);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  return t;
}

static int rm_cb(const char *p, const struct stat *sb, int f, struct FTW *w) {
  (void)sb;
  (void)f;
  (void)w;
  return remove(p);
}

static int g_prefetch = 0, g_ckpt = 1;

static double run_est(int64_t steps, int threads) {
  char dir[] = "/tmp/loom_est_overhead_XXXXXX";
  if (!mkdtemp(dir)) exit(1);
  double t0 = bu_now_us();
  loom_status *st = loom_status_new();
  loom_run_config c = loom_run_config_default();
  c.num_threads = threads;
  c.progress_bar = 0;
  c.prefetch = g_prefetch;
  if (!g_ckpt) c.save_checkpoints_secs = c.save_checkpoints_steps = 0;
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
  loom_train_options o = loom_train_options_default();
  o.steps = steps;
  if (!e || loom_estimator_train(e, input_fn, NULL, &o, st)) {
    fprintf(stderr, "estimator: %s\n", loom_status_message(st));
    exit(1);
  }
  double t = bu_now_us() - t0;
  loom_estimator_free(e);
  loom_status_free(st);
  nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  return t;
}

int main(int argc, char **argv) {
  int64_t steps = atoll(bu_flag(argc, argv, "--steps", "2000"));
  int rounds = atoi(bu_flag(argc, argv, "--rounds", "3"));
  int threads = atoi(bu_flag(argc, argv, "--threads", "2"));
  g_prefetch = atoi(bu_flag(argc, argv, "--prefetch", "0"));
  g_ckpt = atoi(bu_flag(argc, argv, "--checkpoints", "1"));
  bu_mnist m;
  if (bu_load_fashion(&m, BU_FASHION_DIR) != 0) {
    printf("skipped=1 reason=no_fashion_mnist\n");
    return 0;
  }
  int64_t xd[2] = {60000, 784}, yd[1] = {60000};
  g_images = loom_tensor_new(LOOM_F32, 2, xd, NULL);
  g_labels = loom_tensor_new(LOOM_I32, 1, yd, NULL);
  float *px = loom_tensor_data(g_images);
  int32_t *py = loom_tensor_data(g_labels);
  for (int64_t i = 0; i < 60000 * 784; i++) px[i] = m.train_x[i] / 255.0f;
  for (int i = 0; i < 60000; i++) py[i] = m.train_y[i];
  double best_raw = 1e300, best_est = 1e300;
  for (int r = 0; r < rounds; r++) {
    double a = run_raw(steps, threads), b = run_est(steps, threads);
    fprintf(stderr, "round %d: raw %.0f ms, estimator %.0f ms\n", r, a / 1e3, b / 1e3);
    if (a < best_raw) best_raw = a;
    if (b < best_est) best_est = b;
  }
  printf("steps=%lld\nthreads=%d\nbatch=%d\n", (long long)steps, threads, BATCH);
  printf("raw_step_us=%.1f\nest_step_us=%.1f\n", best_raw / steps, best_est / steps);
  printf("overhead=%.4f\n", best_est / best_raw - 1);
  loom_tensor_free(g_images);
  loom_tensor_free(g_labels);
  return 0;
}
