/* loom: small CNN trained on Fashion-MNIST through the layers API
 * (include/loom/loom_layers.h), Adam 1e-3, batch 64:
 *   conv2d(32, 3x3, valid)-relu-max_pooling2d(2) -> conv2d(64, 3x3, valid)-relu-
 *   max_pooling2d(2) -> flatten -> dense(128, relu) -> dense(10),
 * mean sparse softmax cross-entropy. Same recipe, flags and output keys as
 * bench/peers/torch_cnn.py.
 *   --epochs N (1) --steps N (0 = epochs) --threads N (1) --seed N (1) --device cpu
 *   --eval 0 skips the test-set pass (test_accuracy=nan)
 * Keys: step_us (median over steps, feeding included), steps_per_sec,
 * test_accuracy, gflops (forward + backward conv/dense FLOPs per step /
 * median step time; conv1 has no input gradient), peak_rss_mb, final_loss. */
#include "loom/loom.h"
#include "bench_util.h"

#define B 64

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "cnn_train: %s: %s\n", what, st ? loom_status_message(st) : "");
  exit(1);
}

/* FLOPs of one training step of the network above at batch B. */
static double step_flops(void) {
  double c1 = 2.0 * B * 26 * 26 * 32 * 3 * 3 * 1;  /* forward; + filter grad */
  double c2 = 2.0 * B * 11 * 11 * 64 * 3 * 3 * 32; /* forward; + filter and input grads */
  double d1 = 2.0 * B * 1600 * 128, d2 = 2.0 * B * 128 * 10;
  return 2 * c1 + 3 * c2 + 3 * d1 + 3 * d2;
}

int main(int argc, char **argv) {
  int epochs = atoi(bu_flag(argc, argv, "--epochs", "1"));
  int threads = atoi(bu_flag(argc, argv, "--threads", "1"));
  int64_t max_steps = atoll(bu_flag(argc, argv, "--steps", "0"));
  int64_t seed = atoll(bu_flag(argc, argv, "--seed", "1"));
  int eval = atoi(bu_flag(argc, argv, "--eval", "1"));
  const char *device = bu_flag(argc, argv, "--device", "cpu");
  if (strcmp(device, "cpu")) {
    fprintf(stderr, "cnn_train: --device %s is not available in this build (cpu only)\n", device);
    return 2;
  }
  bu_mnist d;
  if (bu_load_fashion(&d, bu_flag(argc, argv, "--data", BU_FASHION_DIR))) return 1;

  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  loom_graph_set_random_seed(g, seed);
  int64_t xd[2] = {-1, 784}, yd[1] = {-1}, imd[4] = {-1, 28, 28, 1};
  loom_output x8 = loom_placeholder(g, LOOM_U8, 2, xd, "x");
  loom_output y = loom_placeholder(g, LOOM_I32, 1, yd, "y");
  loom_output x = loom_mul(g, loom_cast(g, x8, LOOM_F32, NULL), loom_const_f32(g, 1.0f / 255.0f, NULL), "scale");
  x = loom_reshape(g, x, 4, imd, "image");

  int64_t k3[2] = {3, 3}, p2[2] = {2, 2};
  loom_conv2d_options co = loom_conv2d_options_default();
  co.activation = "relu";
  loom_output h = loom_layers_conv2d(g, x, 32, k3, &co, NULL);
  h = loom_layers_max_pooling2d(g, h, p2, p2, "valid", NULL);
  h = loom_layers_conv2d(g, h, 64, k3, &co, NULL);
  h = loom_layers_max_pooling2d(g, h, p2, p2, "valid", NULL);
  h = loom_layers_flatten(g, h, NULL);
  loom_dense_options dop = loom_dense_options_default();
  dop.activation = "relu";
  h = loom_layers_dense(g, h, 128, &dop, NULL);
  loom_output logits = loom_layers_dense(g, h, 10, NULL, NULL);

  loom_output xent;
  loom_sparse_softmax_cross_entropy_with_logits(g, logits, y, &xent, NULL, "xent");
  loom_output loss = loom_reduce_mean(g, xent, -1, NULL, 0, "loss");
  loom_variable *gs = loom_get_or_create_global_step(g);
  loom_optimizer *o = loom_optimizer_adam(loom_const_f32(g, 1e-3f, "learning_rate"), NULL);
  loom_node *train = loom_optimizer_minimize(o, g, loss, 0, NULL, gs, "train");
  loom_node *init = loom_global_variables_initializer(g);
  if (loom_graph_status(g, st)) die("building the graph", st);

  loom_session_options so = loom_session_options_default();
  so.num_threads = threads;
  loom_session *s = loom_session_new(g, &so, st);
  if (!s || loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st)) die("initializing", st);

  int64_t bxd[2] = {B, 784}, byd[1] = {B};
  loom_tensor *xb = loom_tensor_new(LOOM_U8, 2, bxd, NULL), *yb = loom_tensor_new(LOOM_I32, 1, byd, NULL);
  uint8_t *xp = loom_tensor_data(xb);
  int32_t *yp = loom_tensor_data(yb);
  loom_output feeds[2] = {x8, y};
  loom_tensor *fv[2] = {xb, yb};
  loom_tensor *loss_v = NULL;
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)d.ntrain);
  for (int64_t i = 0; i < d.ntrain; i++) idx[i] = (int32_t)i;
  int64_t spe = d.ntrain / B, total = max_steps > 0 ? max_steps : spe * epochs;
  double *times = malloc(sizeof(double) * (size_t)total);
  uint64_t shuf = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
  shuf ^= 0xABCDEF;
  for (int64_t sidx = 0; sidx < total; sidx++) {
    int64_t k = sidx % spe;
    if (k == 0) bu_shuffle(idx, d.ntrain, &shuf);
    double t0 = bu_now_us();
    for (int r = 0; r < B; r++) {
      memcpy(xp + (int64_t)r * 784, d.train_x + (int64_t)idx[k * B + r] * 784, 784);
      yp[r] = d.train_y[idx[k * B + r]];
    }
    if (loom_session_run(s, feeds, fv, 2, &loss, &loss_v, 1, &train, 1, st)) die("training step", st);
    times[sidx] = bu_now_us() - t0;
  }

  /* test accuracy through the same graph (unknown batch: 200 at a time) */
  double acc = NAN;
  if (eval) {
    const int EB = 200;
    int64_t ed[2] = {EB, 784};
    loom_tensor *eb = loom_tensor_new(LOOM_U8, 2, ed, NULL), *lg = NULL;
    int64_t correct = 0, tested = 0;
    for (int64_t s0 = 0; s0 + EB <= d.ntest; s0 += EB) {
      memcpy(loom_tensor_data(eb), d.test_x + s0 * 784, (size_t)EB * 784);
      if (loom_session_run(s, &x8, &eb, 1, &logits, &lg, 1, NULL, 0, st)) die("evaluating", st);
      const float *l = loom_tensor_data(lg);
      for (int r = 0; r < EB; r++) {
        int am = 0;
        for (int c = 1; c < 10; c++)
          if (l[r * 10 + c] > l[r * 10 + am]) am = c;
        correct += am == d.test_y[s0 + r];
      }
      tested += EB;
    }
    acc = (double)correct / (double)tested;
    loom_tensor_free(eb);
    loom_tensor_free(lg);
  }
  double med = bu_median(times, (int)total);
  printf("impl=loom\nmodel=cnn\nthreads=%d\nbatch=%d\nsteps=%lld\nfinal_loss=%.4f\n", threads, B, (long long)total,
         (double)*(float *)loom_tensor_data(loss_v));
  printf("step_us=%.1f\nsteps_per_sec=%.1f\ntest_accuracy=%.4f\ngflops=%.2f\npeak_rss_mb=%.1f\n", med, 1e6 / med, acc,
         step_flops() / (med * 1e3), bu_peak_rss_mb());
  loom_tensor_free(loss_v);
  loom_tensor_free(xb);
  loom_tensor_free(yb);
  loom_optimizer_free(o);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  free(idx);
  free(times);
  free(d.train_x);
  free(d.train_y);
  free(d.test_x);
  free(d.test_y);
  return 0;
}
