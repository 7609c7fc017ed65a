/* loom: MLP 784-512-256-10 (ReLU, mean sparse softmax cross-entropy, batch
 * 128) trained on Fashion-MNIST through the graph API: variables, autodiff,
 * optimizer ops. Same recipe, flags and output keys as bench/mlp_floor.c
 * (the hand-written C+OpenBLAS floor) and bench/peers/torch_mlp.py.
 *   --opt sgd|adam --lr F --epochs N --threads N --seed N --steps N --device cpu
 * Inputs are fed as uint8 and scaled in the graph (Cast, Mul 1/255), as the
 * floor converts them inside its step. */
#include "loom/loom.h"
#include "blas_probe.h"

#define B 128

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "mlp_train: %s: %s\n", what, st ? loom_status_message(st) : "");
  exit(1);
}

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
  if (strcmp(device, "cpu")) {
    fprintf(stderr, "mlp_train: --device %s is not available in this build (cpu only)\n", device);
    return 2;
  }
  bu_mnist d;
  if (bu_load_fashion(&d, bu_flag(argc, argv, "--data", BU_FASHION_DIR))) return 1;

  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  loom_graph_set_random_seed(g, seed);
  int64_t xd[2] = {-1, 784}, yd[1] = {-1};
  loom_output x8 = loom_placeholder(g, LOOM_U8, 2, xd, "x");
  loom_output y = loom_placeholder(g, LOOM_I32, 1, yd, "y");
  loom_output x = loom_mul(g, loom_cast(g, x8, LOOM_F32, NULL), loom_const_f32(g, 1.0f / 255.0f, NULL), "scale");
  loom_output h = dense(g, x, 784, 512, 1, "dense", seed * 10 + 1);
  h = dense(g, h, 512, 256, 1, "dense_1", seed * 10 + 2);
  loom_output logits = dense(g, h, 256, 10, 0, "dense_2", seed * 10 + 3);
  loom_output xent;
  loom_sparse_softmax_cross_entropy_with_logits(g, logits, y, &xent, NULL, "xent");
  loom_output loss = loom_reduce_mean(g, xent, -1, NULL, 0, "loss");
  loom_variable *gs = loom_get_or_create_global_step(g);
  loom_output lr_t = loom_const_f32(g, (float)lr, "learning_rate");
  loom_optimizer *o = adam ? loom_optimizer_adam(lr_t, NULL) : loom_optimizer_sgd(lr_t);
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
  double *times = malloc(sizeof(double) * (size_t)total), blas_total = 0, step_total = 0;
  uint64_t shuf = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
  shuf ^= 0xABCDEF;
  for (int64_t sidx = 0; sidx < total; sidx++) {
    int64_t k = sidx % spe;
    if (k == 0) bu_shuffle(idx, d.ntrain, &shuf);
    double t0 = bu_now_us();
    bp_blas_us = 0;
    for (int r = 0; r < B; r++) {
      memcpy(xp + (int64_t)r * 784, d.train_x + (int64_t)idx[k * B + r] * 784, 784);
      yp[r] = d.train_y[idx[k * B + r]];
    }
    if (loom_session_run(s, feeds, fv, 2, &loss, &loss_v, 1, &train, 1, st)) die("training step", st);
    times[sidx] = bu_now_us() - t0;
    blas_total += bp_blas_us;
    step_total += times[sidx];
  }
  /* test accuracy, batch by batch through the same graph */
  int64_t correct = 0, tested = 0;
  loom_tensor *lg = NULL;
  for (int64_t s0 = 0; s0 + B <= d.ntest; s0 += B) {
    memcpy(xp, d.test_x + s0 * 784, (size_t)B * 784);
    if (loom_session_run(s, &x8, &xb, 1, &logits, &lg, 1, NULL, 0, st)) die("evaluating", st);
    const float *l = loom_tensor_data(lg);
    for (int r = 0; r < B; r++) {
      int am = 0;
      for (int c = 1; c < 10; c++)
        if (l[r * 10 + c] > l[r * 10 + am]) am = c;
      correct += am == d.test_y[s0 + r];
    }
    tested += B;
  }
  double med = bu_median(times, (int)total);
  printf("impl=loom\nopt=%s\nthreads=%d\nsteps=%lld\nfinal_loss=%.4f\n", opt, threads, (long long)total,
         (double)*(float *)loom_tensor_data(loss_v));
  printf("step_us=%.1f\nsteps_per_sec=%.1f\ntest_accuracy=%.4f\npeak_rss_mb=%.1f\nblas_fraction=%.3f\n", med,
         1e6 / med, (double)correct / (double)tested, bu_peak_rss_mb(), blas_total / step_total);
  loom_tensor_free(lg);
  loom_tensor_free(loss_v);
  loom_tensor_free(xb);
  loom_tensor_free(yb);
  loom_optimizer_free(o);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  free(idx);
  free(times);
  return 0;
}
