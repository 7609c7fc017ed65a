/* loom: small CNN trained on Fashion-MNIST through the layers API
 * (include/loom/loom_layers.h), Adam 1e-3, batch 64:
 *   conv2d(32, 3x3, valid)-relu-max_pooling2d(2) -> conv2d(64, 3x3, valid)-relu-
 *   max_pooling2d(2) -> flatten -> dense(128, relu) -> dense(10),
 * mean sparse softmax cross-entropy. Same recipe, flags and output keys as
 * bench/peers/torch_cnn.py.
 *   --epochs N (1) --steps N (0 = epochs) --threads N (1) --seed N (1) --batch N (64) --device cpu
 *   --eval 0 skips the test-set pass (test_accuracy=nan)
 * Keys: step_us (median over steps, feeding included), steps_per_sec,
 * test_accuracy, gflops (forward + backward conv/dense FLOPs per step /
 * median step time; conv1 has no input gradient), peak_rss_mb, final_loss. */
#include "train_harness.h"

static int B = 64;

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
  B = atoi(bu_flag(argc, argv, "--batch", "64"));
  if (B < 1) {
    fprintf(stderr, "cnn_train: --batch must be >= 1\n");
    return 2;
  }
  loom_device_type dev;
  if (th_device(device, &dev)) {
    fprintf(stderr, "cnn_train: --device must be cpu or cuda, got %s\n", device);
    return 2;
  }
  bu_mnist d;
  if (bu_load_fashion(&d, bu_flag(argc, argv, "--data", BU_FASHION_DIR))) return 1;

  th_model m = {.g = loom_graph_new(), .device = dev};
  loom_graph *g = m.g;
  loom_graph_set_random_seed(g, seed);
  int64_t imd[4] = {-1, 28, 28, 1};
  loom_output x = loom_reshape(g, th_inputs(&m), 4, imd, "image");

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
  m.logits = loom_layers_dense(g, h, 10, NULL, NULL);
  loom_optimizer *o = loom_optimizer_adam(loom_const_f32(g, 1e-3f, "learning_rate"), NULL);
  th_loss_and_train(&m, o);

  int64_t total = max_steps > 0 ? max_steps : d.ntrain / B * epochs;
  th_result r;
  th_run("cnn_train", &m, &d, B, eval ? 200 : 0, threads, total, seed, NULL, &r);
  printf("impl=loom\nmodel=cnn\nthreads=%d\nbatch=%d\nsteps=%lld\nfinal_loss=%.4f\n", threads, B,
         (long long)r.steps, (double)r.final_loss);
  printf("step_cpu_us=%.1f\n", r.step_cpu_us);
  printf("step_us=%.1f\nsteps_per_sec=%.1f\ntest_accuracy=%.4f\ngflops=%.2f\npeak_rss_mb=%.1f\n", r.step_us,
         r.steps_per_sec, r.test_accuracy, step_flops() / (r.step_us * 1e3), bu_peak_rss_mb());
  loom_optimizer_free(o);
  loom_graph_free(g);
  free(d.train_x);
  free(d.train_y);
  free(d.test_x);
  free(d.test_y);
  return 0;
}
