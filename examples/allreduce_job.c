/* examples/allreduce_job.c - a small classifier trained by train_and_evaluate under a chosen
 * RunConfig.train_distribute; with --distribute collective, launch it with mpirun (or srun):
 *
 *   mpirun -np 2 build/examples/allreduce_job --model_dir D --distribute collective --batch 16
 *   scripts/launch_local -p 0 -w 1 -e 0 -d D -- build/examples/allreduce_job --batch 16   (TF_CONFIG, Gloo)
 *
 * Flags: --model_dir D (required) [--distribute local|collective|auto] [--steps 100] [--batch 16 (per
 * worker)] [--optimizer sgd|adam|lazyadam|adagrad|ftrl|momentum] [--lr 0.1] [--hidden 16] [--hidden_odd_ranks N (ranks with an odd MPI
 * rank build this many hidden units: a model mismatch)] [--finite_odd_ranks 1 (their input is one pass
 * over the data: fewer steps than the others)] [--init_seed_odd_ranks N (their initializers' seeds
 * are offset by N: other initial values, which the broadcast from rank 0 replaces)] [--embed N (an id feature through an embedding of
 * N rows: a sparse gradient)] [--sleep_ms 0 (per step)] [--threads 1] [--profile_steps N (rank 0: a
 * ProfilerHook writes a Chrome trace of every N-th step into <model_dir>/profile)] [--log warn|info
 * (info: the library's info lines too, the collective transport's name among them)] [--device
 * cpu|cuda (the sessions' device: with cuda the dense gradients go through NCCL when it loads)]
 * [--grad_norm 1 (the train op also assigns the norm of hidden/kernel's gradient, as the update reads it,
 * to the variable grad_norm: an op besides the optimizer reads that gradient)].
 *
 * The data are deterministic and unshuffled: global step t reads examples [t*B, (t+1)*B) of a fixed set
 * (B = batch × workers), worker w of W the w-th slice of b, so W workers with batch b see the same examples
 * per step as one worker with batch W*b. Prints "rank=<r> pid=<pid>" at the start, "progress step=<s>"
 * every 10 steps, and "allreduce_job: done accuracy=<a>" (chief) at the end; exits 1 with the error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "loom/loom.h"
#include "synthetic.h"

enum { NS = 1024, NF = 8, NC = 3 };

typedef struct cfg {
  int64_t batch, embed, hidden;
  int finite;   /* the training input does not repeat (one pass) */
  int seed_off; /* added to the initializers' seeds */
  int adam; /* 0 SGD, 1 Adam, 2 Adagrad, 3 FTRL, 4 LazyAdam, 5 Momentum */
  double lr, sleep_ms;
  int grad_norm; /* the train op also stores the norm of hidden/kernel's gradient in a variable */
} cfg;

static const char *arg(int argc, char **argv, const char *name, const char *dflt) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return dflt;
}

static int optimizer_kind(const char *name) {
  return !strcmp(name, "adam")       ? 1
         : !strcmp(name, "adagrad")  ? 2
         : !strcmp(name, "ftrl")     ? 3
         : !strcmp(name, "lazyadam") ? 4
         : !strcmp(name, "momentum") ? 5
                                     : 0;
}

/* Worker id of num: per global step its slice of b examples; the whole set once per epoch, repeated. */
static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  cfg *c = user;
  int num = 1, id = 0;
  if (mode == LOOM_MODE_TRAIN) loom_job_input_context(p, &num, &id);
  int64_t b = c->batch, gb = b * num, steps = NS / gb, n = steps * b;
  float *x = malloc(sizeof(float) * (size_t)(n * NF));
  int32_t *y = malloc(sizeof(int32_t) * (size_t)n), *ids = malloc(sizeof(int32_t) * (size_t)n);
  if (!x || !y || !ids || n == 0) {
    free(x);
    free(y);
    free(ids);
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "allreduce_job: no data for batch %lld x %d workers", (long long)b, num);
    return NULL;
  }
  for (int64_t t = 0, k = 0; t < steps; t++)
    for (int64_t j = 0; j < b; j++, k++)
      synth_example((int)(t * gb + id * b + j), NF, NC, x + k * NF, y + k, ids + k, c->embed);
  loom_dataset *ds = synth_dataset(n, NF, x, y, ids, c->embed, st);
  if (ds && mode == LOOM_MODE_TRAIN && !c->finite) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, b, 0, st);
  return ds;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *rc, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)rc;
  (void)params;
  (void)st;
  cfg *c = user;
  loom_output h = loom_features_get(f, "x");
  if (c->embed > 0) {
    int64_t ed[2] = {c->embed, 4};
    loom_initializer ei = loom_init_random_uniform(-0.1, 0.1, 5 + c->seed_off);
    loom_variable *emb = loom_get_variable(g, "embedding", LOOM_F32, 2, ed, &ei, 1);
    loom_output e = loom_embedding_lookup(g, loom_variable_output(emb), loom_features_get(f, "id"), "lookup");
    loom_output parts[2] = {h, e};
    h = loom_concat(g, 2, parts, 1, "with_embedding");
  }
  loom_dense_options d = loom_dense_options_default();
  d.activation = "relu";
  d.kernel_initializer = loom_init_glorot_uniform(1 + c->seed_off);
  h = loom_layers_dense(g, h, c->hidden, &d, "hidden");
  loom_dense_options o = loom_dense_options_default();
  o.kernel_initializer = loom_init_glorot_uniform(2 + c->seed_off);
  loom_output logits = loom_layers_dense(g, h, NC, &o, "logits");
  loom_output cls = loom_argmax(g, logits, 1, LOOM_I32, "classes");
  loom_spec_add_prediction(spec, "classes", cls);
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_output none = {NULL, 0};
  loom_output loss = loom_losses_sparse_softmax_cross_entropy(g, labels, logits, none, NULL, NULL,
                                                              LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  loom_spec_add_eval_metric(spec, "accuracy", loom_metrics_accuracy(g, labels, cls, none, NULL));
  if (mode == LOOM_MODE_TRAIN) {
    loom_output lr = loom_const_f32(g, (float)c->lr, "lr");
    loom_adam_options lazy = loom_adam_options_default();
    lazy.lazy = 1;
    loom_optimizer *opt = c->adam == 1   ? loom_optimizer_adam(lr, NULL)
                          : c->adam == 2 ? loom_optimizer_adagrad(lr, NULL)
                          : c->adam == 3 ? loom_optimizer_ftrl(lr, NULL)
                          : c->adam == 4 ? loom_optimizer_adam(lr, &lazy)
                          : c->adam == 5 ? loom_optimizer_momentum(lr, NULL)
                                         : loom_optimizer_sgd(lr);
    if (!c->grad_norm) {
      loom_spec_set_train_op(spec, loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL));
    } else { /* the update, and the norm of the gradient it reads kept in the variable grad_norm */
      int nv = 0;
      loom_variable *const *tv = loom_trainable_variables(g, &nv);
      loom_output xs[8];
      loom_gradient gr[8];
      int k = -1;
      for (int i = 0; i < nv && i < 8; i++) {
        xs[i] = loom_variable_output(tv[i]);
        if (!strcmp(loom_variable_name(tv[i]), "hidden/kernel")) k = i;
      }
      loom_code grc = loom_gradients_sparse(g, 1, &loss, NULL, nv < 8 ? nv : 8, xs, gr, st);
      if (grc) {
        loom_optimizer_free(opt);
        return grc;
      }
      loom_node *apply = loom_optimizer_apply_gradients(opt, g, nv < 8 ? nv : 8, gr, tv, loom_get_global_step(g), NULL);
      loom_initializer z = loom_init_zeros();
      loom_variable *gn = loom_get_variable(g, "grad_norm", LOOM_F32, 0, NULL, &z, 0);
      loom_output norm = loom_global_norm(g, 1, &gr[k < 0 ? 0 : k].values, "grad_norm_value");
      loom_node *parts[2] = {apply, loom_assign(g, loom_variable_output(gn), norm, "store_grad_norm").node};
      loom_spec_set_train_op(spec, apply ? loom_group(g, 2, parts, "train") : NULL);
    }
    loom_optimizer_free(opt);
  }
  return LOOM_OK;
}

/* "progress step=<global step>" every 10 steps, and an optional sleep per step. */
typedef struct progress {
  loom_output gs;
  double sleep_ms;
} progress;
static loom_code pr_begin(void *self, loom_graph *g, loom_status *st) {
  (void)st;
  ((progress *)self)->gs = loom_variable_output(loom_get_global_step(g));
  return LOOM_OK;
}
static loom_code pr_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  (void)ctx;
  (void)st;
  a->nfetches = 1;
  a->fetches = &((progress *)self)->gs;
  return LOOM_OK;
}
static loom_code pr_after(void *self, loom_hook_context *ctx, loom_tensor *const *r, loom_status *st) {
  (void)ctx;
  (void)st;
  progress *p = self;
  int64_t gs = *(const int64_t *)loom_tensor_data_const(r[0]);
  if (gs % 10 == 0) {
    printf("progress step=%lld\n", (long long)gs);
    fflush(stdout);
  }
  if (p->sleep_ms > 0) {
    struct timespec ts = {(time_t)(p->sleep_ms / 1e3), (long)(fmod(p->sleep_ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
  }
  return LOOM_OK;
}

/* This process's rank: mpirun's or srun's, else TF_CONFIG's (chief 0, then the workers by index). */
static int job_rank(void) {
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  if (!r) r = getenv("PMI_RANK");
  if (!r) r = getenv("SLURM_PROCID");
  if (r) return atoi(r);
  loom_tf_config *c = loom_tf_config_parse(NULL, NULL);
  int rank = 0;
  if (c && !strcmp(loom_tf_config_task_type(c), "worker"))
    rank = loom_tf_config_num_tasks(c, "chief") + loom_tf_config_num_tasks(c, "master") + loom_tf_config_task_id(c);
  loom_tf_config_free(c);
  return rank;
}

int main(int argc, char **argv) {
  const char *model_dir = arg(argc, argv, "--model_dir", NULL);
  const char *dist = arg(argc, argv, "--distribute", "collective");
  if (!model_dir) {
    fprintf(stderr, "allreduce_job: --model_dir is required\n");
    return 2;
  }
  int rank = job_rank();
  cfg c = {atoll(arg(argc, argv, "--batch", "16")), atoll(arg(argc, argv, "--embed", "0")),
           atoll(arg(argc, argv, "--hidden", "16")), 0, 0, optimizer_kind(arg(argc, argv, "--optimizer", "sgd")),
           atof(arg(argc, argv, "--lr", "0.1")), atof(arg(argc, argv, "--sleep_ms", "0")),
           atoi(arg(argc, argv, "--grad_norm", "0"))};
  if (rank % 2 == 1 && atoll(arg(argc, argv, "--hidden_odd_ranks", "0")) > 0)
    c.hidden = atoll(arg(argc, argv, "--hidden_odd_ranks", "0"));
  if (rank % 2 == 1 && atoi(arg(argc, argv, "--finite_odd_ranks", "0"))) c.finite = 1;
  if (rank % 2 == 1) c.seed_off = atoi(arg(argc, argv, "--init_seed_odd_ranks", "0"));
  if (!strcmp(arg(argc, argv, "--log", "warn"), "info")) loom_log_set(NULL, NULL, LOOM_LOG_INFO);
  printf("rank=%d pid=%d\n", rank, (int)getpid());
  fflush(stdout);
  loom_status *st = loom_status_new();
  loom_run_config rc = loom_run_config_default();
  rc.num_threads = atoi(arg(argc, argv, "--threads", "1"));
  rc.save_checkpoints_steps = atoll(arg(argc, argv, "--steps", "100"));
  rc.save_summary_steps = 0;
  rc.log_step_count_steps = 1000000;
  rc.tf_random_seed = 42;
  rc.device = !strcmp(arg(argc, argv, "--device", "cpu"), "cuda") ? LOOM_DEVICE_CUDA : LOOM_DEVICE_CPU;
  rc.train_distribute = !strcmp(dist, "local")        ? LOOM_DISTRIBUTE_LOCAL
                        : !strcmp(dist, "collective") ? LOOM_DISTRIBUTE_COLLECTIVE
                                                      : LOOM_DISTRIBUTE_AUTO;
  loom_estimator *e = loom_estimator_new(model_fn, &c, model_dir, &rc, NULL, NULL, st);
  progress pr = {{NULL, 0}, c.sleep_ms};
  static const loom_hook_ops pr_ops = {pr_begin, NULL, pr_before, pr_after, NULL, NULL};
  loom_hook *ph = loom_hook_new(&pr_ops, &pr, "progress");
  loom_hook *hooks[2] = {ph, NULL};
  int64_t profile = atoll(arg(argc, argv, "--profile_steps", "0"));
  if (profile > 0 && rank == 0) {
    char pdir[4096];
    snprintf(pdir, sizeof pdir, "%s/profile", model_dir);
    hooks[1] = loom_profiler_hook(profile, 0, pdir, st);
  }
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &c;
  ts.max_steps = rc.save_checkpoints_steps;
  ts.nhooks = hooks[1] ? 2 : 1;
  ts.hooks = hooks;
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &c;
  es.steps = 4;
  es.throttle_secs = 0;
  es.start_delay_secs = 0; /* an evaluator task starts at once */
  loom_tae_result *r = NULL;
  loom_code code = e ? loom_train_and_evaluate(e, &ts, &es, &r, st) : loom_status_code(st);
  if (code == LOOM_OK && r && loom_tae_result_metrics(r)) {
    double acc = 0;
    loom_eval_result_get(loom_tae_result_metrics(r), "accuracy", &acc, NULL);
    printf("allreduce_job: done accuracy=%.4f\n", acc);
  }
  if (code != LOOM_OK) fprintf(stderr, "allreduce_job: rank %d: %s\n", rank, loom_status_message(st));
  loom_tae_result_free(r);
  loom_hook_free(ph);
  loom_hook_free(hooks[1]);
  loom_estimator_free(e);
  loom_status_free(st);
  return code == LOOM_OK ? 0 : 1;
}
