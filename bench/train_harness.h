/* Shared driver of the loom training benchmarks (mlp_train, cnn_train):
 * uint8 inputs scaled in the graph, mean sparse softmax cross-entropy, a
 * shuffled training loop timing each step (feeding included), and a test-set
 * pass through the same graph. */
#ifndef LOOM_TRAIN_HARNESS_H
#define LOOM_TRAIN_HARNESS_H
#include <math.h>
#include <string.h>
#include "loom/loom.h"
#include "bench_util.h"

typedef struct th_model {
  loom_graph *g;
  loom_output x8, y, logits, loss;
  loom_node *train;
  loom_device_type device; /* --device cpu (default) or cuda */
} th_model;

/* --device cpu|cuda -> *dev; 0 on success. */
static int th_device(const char *name, loom_device_type *dev) {
  if (!strcmp(name, "cpu")) *dev = LOOM_DEVICE_CPU;
  else if (!strcmp(name, "cuda")) *dev = LOOM_DEVICE_CUDA;
  else return -1;
  return 0;
}

typedef struct th_result {
  int64_t steps;
  double step_us, steps_per_sec, test_accuracy, blas_fraction;
  double step_p10_us; /* the 10th percentile step: the steps other processes disturbed least */
  double step_cpu_us; /* median process CPU time per step: less moved by other processes than wall time */
  float final_loss;
} th_result;

static void th_die(const char *prog, const char *what, loom_status *st) {
  fprintf(stderr, "%s: %s: %s\n", prog, what, st ? loom_status_message(st) : "");
  exit(1);
}

/* Placeholders x (uint8 [?,784]) and y (int32 [?]); returns x as float in [0,1]. */
static loom_output th_inputs(th_model *m) {
  int64_t xd[2] = {-1, 784}, yd[1] = {-1};
  m->x8 = loom_placeholder(m->g, LOOM_U8, 2, xd, "x");
  m->y = loom_placeholder(m->g, LOOM_I32, 1, yd, "y");
  return loom_mul(m->g, loom_cast(m->g, m->x8, LOOM_F32, NULL), loom_const_f32(m->g, 1.0f / 255.0f, NULL), "scale");
}

/* loss = mean sparse xent(logits, y); train = o.minimize(loss, global_step). */
static void th_loss_and_train(th_model *m, loom_optimizer *o) {
  loom_output xent;
  loom_sparse_softmax_cross_entropy_with_logits(m->g, m->logits, m->y, &xent, NULL, "xent");
  m->loss = loom_reduce_mean(m->g, xent, -1, NULL, 0, "loss");
  m->train = loom_optimizer_minimize(o, m->g, m->loss, 0, NULL, loom_get_or_create_global_step(m->g), "train");
}

/* Initialises, trains `total` steps of `batch`, evaluates (eval_batch at a
 * time; eval_batch 0 skips it: test_accuracy = NaN). blas_us, when not NULL,
 * is a counter the caller's BLAS probe adds to; its share of the step time
 * becomes blas_fraction (NaN otherwise). */
static void th_run(const char *prog, th_model *m, const bu_mnist *d, int batch, int eval_batch, int threads,
                   int64_t total, int64_t seed, double *blas_us, th_result *r) {
  loom_status *st = loom_status_new();
  loom_node *init = loom_global_variables_initializer(m->g);
  if (loom_graph_status(m->g, st)) th_die(prog, "building the graph", st);
  loom_session_options so = loom_session_options_default();
  so.num_threads = threads;
  so.device = m->device;
  loom_session *s = loom_session_new(m->g, &so, st);
  if (!s || loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st)) th_die(prog, "initializing", st);

  int64_t bxd[2] = {batch, 784}, byd[1] = {batch};
  loom_tensor *xb = loom_tensor_new(LOOM_U8, 2, bxd, NULL), *yb = loom_tensor_new(LOOM_I32, 1, byd, NULL);
  uint8_t *xp = loom_tensor_data(xb);
  int32_t *yp = loom_tensor_data(yb);
  loom_output feeds[2] = {m->x8, m->y};
  loom_tensor *fv[2] = {xb, yb}, *loss_v = NULL;
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)d->ntrain);
  for (int64_t i = 0; i < d->ntrain; i++) idx[i] = (int32_t)i;
  int64_t spe = d->ntrain / batch;
  double *times = malloc(sizeof(double) * (size_t)total), blas_total = 0, step_total = 0;
  double *cpu = malloc(sizeof(double) * (size_t)total);
  uint64_t shuf = ((uint64_t)seed * 0x9E3779B97F4A7C15ull + 1) ^ 0xABCDEF;
  for (int64_t k0 = 0; k0 < total; k0++) {
    int64_t k = k0 % spe;
    if (k == 0) bu_shuffle(idx, d->ntrain, &shuf);
    double t0 = bu_now_us(), c0 = bu_cpu_us();
    if (blas_us) *blas_us = 0;
    for (int r0 = 0; r0 < batch; r0++) {
      memcpy(xp + (int64_t)r0 * 784, d->train_x + (int64_t)idx[k * batch + r0] * 784, 784);
      yp[r0] = d->train_y[idx[k * batch + r0]];
    }
    if (loom_session_run(s, feeds, fv, 2, &m->loss, &loss_v, 1, &m->train, 1, st)) th_die(prog, "training step", st);
    times[k0] = bu_now_us() - t0;
    cpu[k0] = bu_cpu_us() - c0;
    step_total += times[k0];
    if (blas_us) blas_total += *blas_us;
  }
  r->test_accuracy = NAN;
  if (eval_batch > 0) {
    int64_t ed[2] = {eval_batch, 784}, correct = 0, tested = 0;
    loom_tensor *eb = loom_tensor_new(LOOM_U8, 2, ed, NULL), *lg = NULL;
    for (int64_t s0 = 0; s0 + eval_batch <= d->ntest; s0 += eval_batch) {
      memcpy(loom_tensor_data(eb), d->test_x + s0 * 784, (size_t)eval_batch * 784);
      if (loom_session_run(s, &m->x8, &eb, 1, &m->logits, &lg, 1, NULL, 0, st)) th_die(prog, "evaluating", st);
      const float *l = loom_tensor_data(lg);
      for (int r0 = 0; r0 < eval_batch; r0++) {
        int am = 0;
        for (int c = 1; c < 10; c++)
          if (l[r0 * 10 + c] > l[r0 * 10 + am]) am = c;
        correct += am == d->test_y[s0 + r0];
      }
      tested += eval_batch;
    }
    r->test_accuracy = (double)correct / (double)tested;
    loom_tensor_free(eb);
    loom_tensor_free(lg);
  }
  r->steps = total;
  r->step_us = bu_median(times, (int)total);
  r->step_p10_us = times[total / 10]; /* sorted by bu_median */
  r->step_cpu_us = bu_median(cpu, (int)total);
  free(cpu);
  r->steps_per_sec = 1e6 / r->step_us;
  r->blas_fraction = blas_us ? blas_total / step_total : NAN;
  r->final_loss = *(float *)loom_tensor_data(loss_v);
  loom_tensor_free(loss_v);
  loom_tensor_free(xb);
  loom_tensor_free(yb);
  loom_session_free(s);
  loom_status_free(st);
  free(idx);
  free(times);
}
#endif
