/* loom: MLP 784-512-256-10 (ReLU, mean sparse softmax cross-entropy, batch
 * 128) trained on Fashion-MNIST through the graph API: variables, autodiff,
 * optimizer ops. Same recipe, flags and output keys as bench/mlp_floor.c
 * (the hand-written C+OpenBLAS floor) and bench/peers/torch_mlp.py.
 *   --opt sgd|adam --lr F --epochs N --threads N --seed N --steps N --batch N (128) --device cpu
 * Inputs are fed as uint8 and scaled in the graph (Cast, Mul 1/255), as the
 * floor converts them inside its step. */
#include "blas_probe.h"
#include "train_harness.h"


static loom_output dense(loom_graph *g, loom_output x, int64_t in, int64_t out, int relu, const char *scope,
                         int64_t seed) {
  double lim = 1.0 / sqrt((double)in); /* PyTorch Linear's default init range */
  loom_initializer init = loom_init_random_uniform(-lim, lim, seed);
  loom_initializer binit = loom_init_random_uniform(-lim, lim, seed + 1000);
  loom_variable_scope_push(g, scope, LOOM_REUSE_NONE);
  int64_t wd[2] = {in, out}, bd[1] = {out};
  loom_variable *w = loom_get_variable(g, "kernel", LOOM_F32, 2, wd, &init, 1);
  loom_variable *b = loom_get_variable(g, "bias", LOOM_F32, 1, bd, &binit, 1);
  loom_output h = loom_bias_add(g, loom_matmul(g, x, loom_variable_output(w), 0, 0, NULL), loom_variable_output(b), NULL);
  if (relu) h = loom_relu(g, h, NULL);
  loom_variable_scope_pop(g);
  return h;
}

int main(int argc, char **argv) {
  const char *opt = bu_flag(argc, argv, "--opt", "sgd");
  int adam = !strcmp(opt, "adam");
  double lr = atof(bu_flag(argc, argv, "--lr", adam ? "0.001" : "0.1"));
  int epochs = atoi(bu_flag(argc, argv, "--epochs", "1"));
  int threads = atoi(bu_flag(argc, argv, "--threads", "1"));
  int64_t max_steps = atoll(bu_flag(argc, argv, "--steps", "0"));
  int64_t seed = atoll(bu_flag(argc, argv, "--seed", "1"));
  const char *device = bu_flag(argc, argv, "--device", "cpu");
  int B = atoi(bu_flag(argc, argv, "--batch", "128"));
  if (B < 1) {
    fprintf(stderr, "mlp_train: --batch must be >= 1\n");
    return 2;
  }
  loom_device_type dev;
  if (th_device(device, &dev)) {
    fprintf(stderr, "mlp_train: --device must be cpu or cuda, got %s\n", device);
    return 2;
  }
  bu_mnist d;
  if (bu_load_fashion(&d, bu_flag(argc, argv, "--data", BU_FASHION_DIR))) return 1;

  th_model m = {.g = loom_graph_new(), .device = dev};
  loom_graph *g = m.g;
  loom_graph_set_random_seed(g, seed);
  loom_output h = dense(g, th_inputs(&m), 784, 512, 1, "dense", seed * 10 + 1);
  h = dense(g, h, 512, 256, 1, "dense_1", seed * 10 + 2);
  m.logits = dense(g, h, 256, 10, 0, "dense_2", seed * 10 + 3);
  loom_output lr_t = loom_const_f32(g, (float)lr, "learning_rate");
  loom_optimizer *o = adam ? loom_optimizer_adam(lr_t, NULL) : loom_optimizer_sgd(lr_t);
  th_loss_and_train(&m, o);

  int64_t total = max_steps > 0 ? max_steps : d.ntrain / B * epochs;
  th_result r;
  th_run("mlp_train", &m, &d, B, B, threads, total, seed, &bp_blas_us, &r);
  printf("impl=loom\nopt=%s\nthreads=%d\nsteps=%lld\nfinal_loss=%.4f\n", opt, threads, (long long)r.steps,
         (double)r.final_loss);
  printf("step_cpu_us=%.1f\nstep_p10_us=%.1f\n", r.step_cpu_us, r.step_p10_us);
  printf("step_us=%.1f\nsteps_per_sec=%.1f\ntest_accuracy=%.4f\npeak_rss_mb=%.1f\nblas_fraction=%.3f\n", r.step_us,
         r.steps_per_sec, r.test_accuracy, bu_peak_rss_mb(), r.blas_fraction);
  loom_optimizer_free(o);
  loom_graph_free(g);
  return 0;
}
