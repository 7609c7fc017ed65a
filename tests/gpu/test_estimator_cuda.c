/* tests/gpu/test_estimator_cuda.c - the Estimator with RunConfig.device =
 * CUDA against the same Estimator on the CPU: an MLP regression trained with
 * Adam (so slot variables exist) for 30 steps with checkpoints, then resumed
 * for 10 more, must leave the same checkpoint (every variable, slots and
 * global_step included: this reads variables written on the device back
 * through the checkpoint saver), the same evaluation metrics and the same
 * predictions. Runs on a GPU (make test-gpu) and under the CUDA emulator
 * (make test-cuemu); skips without a device. */

#include <ftw.h>
#include <unistd.h>
#include "tests/gpu/parity.h"

#define NX 64
#define NF 5
static float X[NX * NF], Y[NX];

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p;
  (void)user;
  int64_t xd[2] = {NX, NF}, yd[2] = {NX, 1};
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, X, NULL);
  loom_tensor *y = loom_tensor_from_data(LOOM_F32, 2, yd, Y, NULL);
  const char *names[2] = {"x", "y"};
  const loom_tensor *arr[2] = {x, y};
  loom_dataset *ds = loom_dataset_from_tensors(2, names, arr, "y", st);
  loom_tensor_free(x);
  loom_tensor_free(y);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, 16, 0, st);
  return ds;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)params;
  (void)cfg;
  (void)user;
  (void)st;
  loom_output x = loom_features_get(f, "x");
  loom_dense_options d = loom_dense_options_default();
  d.activation = "relu";
  loom_output h = loom_layers_dense(g, x, 16, &d, "hidden");
  loom_output pred = loom_layers_dense(g, h, 1, NULL, "out");
  loom_spec_add_prediction(spec, "predictions", pred);
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_output zero = {NULL, 0};
  loom_output loss = loom_losses_mean_squared_error(g, labels, pred, zero, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  loom_spec_add_eval_metric(spec, "mae", loom_metrics_mean_absolute_error(g, labels, pred, zero, NULL));
  if (mode == LOOM_MODE_TRAIN) {
    loom_optimizer *opt = loom_optimizer_adam(loom_const_f32(g, 0.01f, "lr"), NULL);
    loom_spec_set_train_op(spec, loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL));
    loom_optimizer_free(opt);
  }
  return LOOM_OK;
}

static loom_estimator *make_est(const char *dir, loom_device_type dev) {
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  c.has_random_seed = 1;
  c.tf_random_seed = 7;
  c.save_checkpoints_steps = 10;
  c.device = dev;
  loom_status *st = loom_status_new();
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
  if (!e) {
    printf("FAIL estimator on device %d: %s\n", (int)dev, loom_status_message(st));
    g_fail++;
  }
  loom_status_free(st);
  return e;
}

static int train(loom_estimator *e, int64_t steps) {
  loom_status *st = loom_status_new();
  loom_train_options o = loom_train_options_default();
  o.steps = steps;
  loom_code rc = loom_estimator_train(e, input_fn, NULL, &o, st);
  if (rc) {
    printf("FAIL train: %s\n", loom_status_message(st));
    g_fail++;
  }
  loom_status_free(st);
  return rc == LOOM_OK;
}

typedef struct names {
  char name[64][128];
  int n;
} names;
static int add_name(const char *name, loom_dtype dt, int ndim, const int64_t *dims, void *user) {
  (void)dt;
  (void)ndim;
  (void)dims;
  names *nm = user;
  if (nm->n < 64) snprintf(nm->name[nm->n++], 128, "%s", name);
  return 0;
}

static void compare_checkpoints(loom_estimator *a, loom_estimator *b, const char *when) {
  names nm = {.n = 0};
  loom_status *st = loom_status_new();
  if (loom_estimator_get_variable_names(a, add_name, &nm, st)) {
    printf("FAIL variable names: %s\n", loom_status_message(st));
    g_fail++;
  }
  int slots = 0;
  for (int i = 0; i < nm.n; i++) {
    loom_tensor *ta = NULL, *tb = NULL;
    if (loom_estimator_get_variable_value(a, nm.name[i], &ta, st) ||
        loom_estimator_get_variable_value(b, nm.name[i], &tb, st)) {
      printf("FAIL %s: reading %s: %s\n", when, nm.name[i], loom_status_message(st));
      g_fail++;
    } else {
      char what[256];
      snprintf(what, sizeof what, "%s: checkpointed %s", when, nm.name[i]);
      compare(what, ta, tb, 1e-5);
      slots += strstr(nm.name[i], "Adam") != NULL;
    }
    loom_tensor_free(ta);
    loom_tensor_free(tb);
  }
  parity_check(nm.n >= 6 && slots >= 4,
               "%s: expected the weights and their Adam slots in the checkpoint, found %d names (%d slots)", when, nm.n,
               slots);
  loom_status_free(st);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

int main(void) {
  if (!parity_gpu_present("test_estimator_cuda")) return 0;
  for (int i = 0; i < NX; i++) {
    float y = 0.3f;
    for (int j = 0; j < NF; j++) {
      X[i * NF + j] = (float)((i * 13 + j * 7) % 17) / 17.0f - 0.5f;
      y += (j % 2 ? -1.0f : 1.0f) * X[i * NF + j] * X[i * NF + j] * (float)(j + 1);
    }
    Y[i] = y;
  }
  char dc[] = "/tmp/loom_estcpu_XXXXXX", dg[] = "/tmp/loom_estgpu_XXXXXX";
  if (!mkdtemp(dc) || !mkdtemp(dg)) return 1;
  loom_estimator *ec = make_est(dc, LOOM_DEVICE_CPU), *eg = make_est(dg, LOOM_DEVICE_CUDA);
  if (ec && eg && train(ec, 30) && train(eg, 30)) {
    compare_checkpoints(ec, eg, "after 30 steps");
    if (train(ec, 10) && train(eg, 10)) compare_checkpoints(ec, eg, "after resuming for 10 more");
    /* evaluation */
    loom_status *st = loom_status_new();
    loom_eval_options eo = loom_eval_options_default();
    loom_eval_result *rc = NULL, *rg = NULL;
    if (loom_estimator_evaluate(ec, input_fn, NULL, &eo, &rc, st) || loom_estimator_evaluate(eg, input_fn, NULL, &eo, &rg, st)) {
      printf("FAIL evaluate: %s\n", loom_status_message(st));
      g_fail++;
    } else {
      const char *keys[3] = {"loss", "mae", "global_step"};
      for (int k = 0; k < 3; k++) {
        double a = NAN, b = NAN;
        loom_eval_result_get(rc, keys[k], &a, NULL);
        loom_eval_result_get(rg, keys[k], &b, NULL);
        parity_check(fabs(a - b) <= 1e-5 * (1 + fabs(a)), "evaluate %s: cpu %.9g gpu %.9g", keys[k], a, b);
      }
      double gs = 0;
      loom_eval_result_get(rg, "global_step", &gs, NULL);
      parity_check(gs == 40, "evaluate global_step %g, want 40", gs);
    }
    loom_eval_result_free(rc);
    loom_eval_result_free(rg);
    /* predictions, one per example */
    loom_predict_options po = loom_predict_options_default();
    loom_prediction_iter *pc = loom_estimator_predict(ec, input_fn, NULL, &po, st);
    loom_prediction_iter *pg = loom_estimator_predict(eg, input_fn, NULL, &po, st);
    int n = 0;
    while (pc && pg && loom_prediction_next(pc, st) == LOOM_OK && loom_prediction_next(pg, NULL) == LOOM_OK) {
      char what[64];
      snprintf(what, sizeof what, "prediction %d", n++);
      compare(what, loom_prediction_get(pc, "predictions"), loom_prediction_get(pg, "predictions"), 1e-5);
    }
    parity_check(n == NX, "predict: %d predictions compared, want %d (%s)", n, NX, loom_status_message(st));
    loom_prediction_iter_free(pc);
    loom_prediction_iter_free(pg);
    loom_status_free(st);
  }
  loom_estimator_free(ec);
  loom_estimator_free(eg);
  nftw(dc, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  nftw(dg, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  return parity_report("test_estimator_cuda");
}
