/* examples/dist_job.c - one binary, one model_fn, any role of a distributed
 * job (docs/distributed.md): an MLP classifier trained with
 * loom_run_job. The role comes from TF_CONFIG (as Kubeflow's TFJob sets
 * it), or from mpirun's / Slurm's environment with --launcher mpi|slurm.
 * Without TF_CONFIG it trains locally (train_and_evaluate).
 *
 *   dist_job --model_dir D [--max_steps 200] [--save_steps 50] [--batch 32]
 *            [--hidden 32] [--data synthetic|<fashion-mnist dir>]
 *            [--launcher mpi|slurm --num_ps 1 --evaluator 1]
 *            [--lr 0.1] [--model_optimizer sgd|default] [--optimizer sgd|adam (a
 *            job-level override of the model's update rules)] [--deadline 60] [--diag 2]
 *            [--throttle 0] [--start_delay 0] [--idle_exit 0] [--threads 1]
 *            [--strategy ps|collective]  (collective: RunConfig.train_distribute, every
 *            mpirun rank a trainer, without --launcher)
 *            [--overlap 0|1]  (loom_job_options.overlap_comm: trainers overlap
 *            the PS exchange with the next step, staleness 1)
 *            [--seed N] (RunConfig's graph-level random seed)
 *            [--warmup K] (the steps/s printed at the end leave out the first K steps; default 0: only
 *            the first step is left out)
 *            [--embed N [--wide_deep 1]]  (an id feature in [0, N) through an
 *            embedding; with --wide_deep the canned DNNLinearCombinedClassifier
 *            on feature columns instead of this file's model_fn)
 *
 * The synthetic data (1024 examples, 16 features, 4 classes whose labels
 * are the argmax of a fixed linear map) is sharded by input pipeline
 * (loom_job_input_context): the chief and each worker read their own rows.
 * Prints "dist_job: role=... exit=..." and, for a trainer, "steps=..." and
 * "local_steps_per_sec=..." at the end; the exit status is
 * loom_job_exit_code. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "loom/loom.h"
#include "synthetic.h"

#define NS 1024
#define NF 16
#define NC 4

typedef struct cfg {
  const char *data;
  int64_t batch;
  const char *hidden; /* units per hidden layer: "32" or "512,256" */
  int64_t embed;      /* > 0: synthetic data gets an id feature in [0, embed) through an embedding (sparse) */
} cfg;

static const char *arg(int argc, char **argv, const char *name, const char *dflt) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return dflt;
}

static int fashion(const cfg *c) { return strcmp(c->data, "synthetic") != 0; }

static loom_dataset *synthetic(int num, int id, int64_t batch, uint64_t seed, int train, int64_t embed,
                               loom_status *st) {
  int64_t n = 0;
  for (int i = 0; i < NS; i++)
    if (i % num == id) n++;
  float *x = malloc(sizeof(float) * (size_t)(n * NF));
  int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  if (!x || !y || !ids) {
    free(x);
    free(y);
    free(ids);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  int64_t k = 0;
  for (int i = 0; i < NS; i++) {
    if (i % num != id) continue;
    synth_example(i, NF, NC, x + k * NF, y + k, ids + k, embed);
    k++;
  }
  loom_dataset *ds = synth_dataset(n, NF, x, y, ids, embed, st);
  if (ds && train) ds = loom_dataset_shuffle(ds, n, seed, 1, st);
  if (ds && train) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, batch, 0, st);
  return ds;
}

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  cfg *c = user;
  int num = 1, id = 0;
  loom_job_input_context(p, &num, &id); /* this trainer's shard */
  int train = mode == LOOM_MODE_TRAIN;
  if (train) {
    printf("dist_job: input_pipeline=%d/%d\n", id, num);
    fflush(stdout);
  }
  if (!fashion(c))
    return synthetic(train ? num : 1, train ? id : 0, c->batch, 7 + (uint64_t)id, train, c->embed, st);
  char im[1024], lb[1024];
  snprintf(im, sizeof im, "%s/%s-images-idx3-ubyte.gz", c->data, train ? "train" : "t10k");
  snprintf(lb, sizeof lb, "%s/%s-labels-idx1-ubyte.gz", c->data, train ? "train" : "t10k");
  loom_idx_options o = loom_idx_options_default();
  const char *task = loom_params_get(p, "task_type");
  if (task && !strcmp(task, "ps")) o.limit = 1; /* a PS needs only the shapes (loom_job.h) */
  loom_dataset *ds = loom_dataset_idx(im, lb, &o, st);
  /* Fashion-MNIST: every trainer reads all of it in its own order */
  if (ds && train) ds = loom_dataset_shuffle(ds, 10000, 11 + (uint64_t)id, 1, st);
  if (ds && train) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, c->batch, 0, st);
  return ds;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *rc, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)rc;
  (void)st;
  cfg *c = user;
  loom_output x = loom_features_get(f, fashion(c) ? "image" : "x");
  loom_dense_options d = loom_dense_options_default();
  d.activation = "relu";
  d.kernel_initializer = loom_init_glorot_uniform(1);
  loom_output h = x;
  if (c->embed > 0 && !fashion(c)) { /* an embedding: its gradient is sparse (rows travel to the PS) */
    int64_t ed[2] = {c->embed, 4};
    loom_initializer ei = loom_init_random_uniform(-0.1, 0.1, 5);
    loom_variable *emb = loom_get_variable(g, "embedding", LOOM_F32, 2, ed, &ei, 1);
    loom_output e = loom_embedding_lookup(g, loom_variable_output(emb), loom_features_get(f, "id"), "lookup");
    loom_output parts[2] = {x, e};
    h = loom_concat(g, 2, parts, 1, "with_embedding");
  }
  int layer = 0;
  for (const char *q = c->hidden; *q;) {
    char nm[32];
    snprintf(nm, sizeof nm, layer ? "hidden_%d" : "hidden", layer);
    d.kernel_initializer = loom_init_glorot_uniform(1 + layer);
    h = loom_layers_dense(g, h, atoll(q), &d, nm);
    layer++;
    q = strchr(q, ',');
    if (!q) break;
    q++;
  }
  loom_dense_options o = loom_dense_options_default();
  o.kernel_initializer = loom_init_glorot_uniform(100);
  loom_output logits = loom_layers_dense(g, h, fashion(c) ? 10 : NC, &o, "logits");
  loom_output cls = loom_argmax(g, logits, 1, LOOM_I32, "classes");
  loom_spec_add_prediction(spec, "classes", cls);
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_output none = {NULL, 0};
  loom_output loss = loom_losses_sparse_softmax_cross_entropy(g, labels, logits, none, NULL, NULL,
                                                              LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  loom_spec_add_eval_metric(spec, "accuracy", loom_metrics_accuracy(g, labels, cls, none, NULL));
  if (mode == LOOM_MODE_TRAIN) { /* locally the train op runs; in a job the PS runs its update rules */
    loom_output lr = loom_const_f32(g, (float)loom_params_get_double(params, "learning_rate", 0.1), "lr");
    const char *mo = loom_params_get(params, "model_optimizer");
    loom_optimizer *opt = mo && !strcmp(mo, "default") ? loom_optimizer_adagrad(lr, NULL) : loom_optimizer_sgd(lr);
    loom_spec_set_train_op(spec, loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL));
    loom_optimizer_free(opt);
  }
  return LOOM_OK;
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  cfg *c = user;
  int64_t dims[2] = {-1, fashion(c) ? 784 : NF};
  const char *name = fashion(c) ? "image" : "x";
  loom_output x = loom_placeholder(g, LOOM_F32, 2, dims, name);
  loom_code rc = loom_features_add(f, name, x, st);
  if (rc == LOOM_OK) rc = loom_features_add(r, name, x, st);
  if (rc == LOOM_OK && c->embed > 0 && !fashion(c)) {
    int64_t idd[1] = {-1};
    loom_output id = loom_placeholder(g, LOOM_I32, 1, idd, "id");
    rc = loom_features_add(f, "id", id, st);
    if (rc == LOOM_OK) rc = loom_features_add(r, "id", id, st);
  }
  return rc;
}

/* A training hook: "progress step=<global step>" on stdout every `every`
 * local steps, and an optional sleep per step (--step_sleep_ms: makes the
 * kill tests' pace independent of the machine's load). */
typedef struct progress {
  loom_output gs;
  int64_t n, every;
  double sleep_ms;
  int64_t warmup;         /* steps not timed (--warmup): the rate is measured from the end of step warmup + 1 */
  double t_step1;         /* seconds since main started, after the first step */
  double t_first, t_last; /* seconds since main started, after the first timed / last step */
  int64_t gs_first, gs_last;
} progress;
static struct timespec g_t0;
static double since_start(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - g_t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - g_t0.tv_nsec);
}
static loom_code pr_begin(void *self, loom_graph *g, loom_status *st) {
  progress *p = self;
  loom_variable *v = loom_get_global_step(g);
  if (!v) return loom_status_set(st, LOOM_FAILED_PRECONDITION, "no global step");
  p->gs = loom_variable_output(v);
  return LOOM_OK;
}
static loom_code pr_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  (void)ctx;
  (void)st;
  progress *p = self;
  a->nfetches = 1;
  a->fetches = &p->gs;
  return LOOM_OK;
}
static loom_code pr_after(void *self, loom_hook_context *ctx, loom_tensor *const *r, loom_status *st) {
  (void)ctx;
  (void)st;
  progress *p = self;
  int64_t gs = *(const int64_t *)loom_tensor_data_const(r[0]);
  if (p->n > 0 && gs != p->gs_last + 1) { /* not the next step (another trainer's, or a restore) */
    printf("progress jump from=%lld to=%lld\n", (long long)p->gs_last, (long long)gs);
    fflush(stdout);
  }
  if (p->n == 0) p->t_step1 = since_start();
  if (p->n == p->warmup) p->t_first = since_start(), p->gs_first = gs;
  p->t_last = since_start();
  p->gs_last = gs;
  if (++p->n % p->every == 0) {
    printf("progress step=%lld\n", (long long)*(const int64_t *)loom_tensor_data_const(r[0]));
    fflush(stdout);
  }
  if (p->sleep_ms > 0) { /* simulated compute: a handled signal does not shorten it */
    struct timespec ts = {(time_t)(p->sleep_ms / 1e3), (long)(fmod(p->sleep_ms, 1e3) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  return LOOM_OK;
}

int main(int argc, char **argv) {
  clock_gettime(CLOCK_MONOTONIC, &g_t0);
  if (!getenv("LOOM_QUIET")) loom_log_set(NULL, NULL, LOOM_LOG_INFO);
  cfg c = {arg(argc, argv, "--data", "synthetic"), atoll(arg(argc, argv, "--batch", "32")),
           arg(argc, argv, "--hidden", "32"), atoll(arg(argc, argv, "--embed", "0"))};
  const char *model_dir = arg(argc, argv, "--model_dir", NULL);
  const char *launcher = arg(argc, argv, "--launcher", NULL);
  if (!model_dir) {
    fprintf(stderr, "dist_job: --model_dir is required\n");
    return LOOM_JOB_EXIT_CONFIG;
  }
  loom_status *st = loom_status_new();
  if (launcher) { /* mpirun / srun: TF_CONFIG from the rank */
    char *tf = loom_job_tf_config_from_env(strcmp(launcher, "auto") ? launcher : NULL,
                                           atoi(arg(argc, argv, "--num_ps", "1")),
                                           atoi(arg(argc, argv, "--evaluator", "0")), 0, st);
    if (!tf) {
      fprintf(stderr, "dist_job: %s\n", loom_status_message(st));
      loom_status_free(st);
      return LOOM_JOB_EXIT_CONFIG;
    }
    setenv("TF_CONFIG", tf, 1);
    loom_job_string_free(tf);
  }
  loom_run_config rc = loom_run_config_default();
  rc.progress_bar = 0;
  rc.num_threads = atoi(arg(argc, argv, "--threads", "1"));
  rc.save_checkpoints_steps = atoll(arg(argc, argv, "--save_steps", "50"));
  rc.save_summary_steps = atoll(arg(argc, argv, "--summary_steps", "0"));
  rc.log_step_count_steps = atoll(arg(argc, argv, "--log_steps", "100"));
  rc.keep_checkpoint_max = 3;
  /* --seed N: the graph-level random seed (initializers of the canned models), the same in every process */
  const char *seed = arg(argc, argv, "--seed", NULL);
  if (seed) rc.has_random_seed = 1, rc.tf_random_seed = atoll(seed);
  /* --strategy collective: every mpirun rank trains by all-reduce (train_and_evaluate, no PS, no launcher) */
  int collective = !strcmp(arg(argc, argv, "--strategy", "ps"), "collective");
  if (collective) rc.train_distribute = LOOM_DISTRIBUTE_COLLECTIVE;
  loom_params *params = loom_params_new();
  double lr = atof(arg(argc, argv, "--lr", "0.1"));
  loom_params_set_double(params, "learning_rate", lr, NULL);
  /* --model_optimizer default: the models' default optimizers (this file's MLP: Adagrad at --lr, as TF's
   * DNNClassifier; --wide_deep: the canned defaults, Ftrl on the linear part and Adagrad on the DNN
   * part); sgd (the default): SGD at --lr everywhere */
  const char *mopt = arg(argc, argv, "--model_optimizer", "sgd");
  int default_opts = !strcmp(mopt, "default");
  if (!default_opts && strcmp(mopt, "sgd")) {
    fprintf(stderr, "dist_job: --model_optimizer '%s' is not sgd or default\n", mopt);
    return LOOM_JOB_EXIT_CONFIG;
  }
  loom_params_set(params, "model_optimizer", mopt, NULL);
  loom_estimator *e = NULL;
  loom_fc_set *cs = NULL;
  if (atoi(arg(argc, argv, "--wide_deep", "0")) && c.embed > 0 && !fashion(&c)) {
    /* wide & deep with feature columns (canned DNNLinearCombinedClassifier):
     * wide: the id (identity, embed buckets) and id x bucketized x crossed
     * (hashed into embed buckets); deep: x and an 8-wide embedding of the
     * id. Both parts' id weights get sparse gradients (rows to the PS). In a
     * job the PS applies the model's own optimizers (SGD at --lr). */
    cs = loom_fc_set_new();
    int64_t xs[1] = {NF};
    const float bounds[3] = {-0.25f, 0.0f, 0.25f};
    const loom_fc *idc = cs ? loom_fc_identity(cs, "id", c.embed, 0, 0, st) : NULL;
    const loom_fc *xc = idc ? loom_fc_numeric(cs, "x", 1, xs, NULL, LOOM_F32, NULL, NULL, st) : NULL;
    const loom_fc *xb = xc ? loom_fc_bucketized(cs, xc, 3, bounds, st) : NULL;
    const loom_fc *cross =
        xb ? loom_fc_crossed(cs, 2, (const char *const[]){NULL, NULL}, (const loom_fc *const[]){idc, xb}, c.embed, 0, st)
           : NULL;
    const loom_fc *emb = cross ? loom_fc_embedding(cs, idc, 8, NULL, st) : NULL;
    const loom_fc *lcols[2] = {idc, cross}, *dcols[2] = {xc, emb};
    int64_t units[8];
    int nu = 0;
    for (const char *q = c.hidden; *q && nu < 8;) {
      units[nu++] = atoll(q);
      q = strchr(q, ',');
      if (!q) break;
      q++;
    }
    if (emb) {
      loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
      o.model_dir = model_dir;
      o.config = &rc;
      o.n_classes = NC;
      o.nlinear_feature_columns = 2;
      o.linear_feature_columns = lcols;
      if (!default_opts) o.linear_optimizer = (loom_canned_optimizer){"SGD", lr, NULL, NULL};
      o.ndnn_feature_columns = 2;
      o.dnn_feature_columns = dcols;
      if (!default_opts) o.dnn_optimizer = (loom_canned_optimizer){"SGD", lr, NULL, NULL};
      o.ndnn_hidden_units = nu;
      o.dnn_hidden_units = units;
      e = loom_dnn_linear_combined_classifier_new(&o, st);
    }
  } else {
    e = loom_estimator_new(model_fn, &c, model_dir, &rc, params, NULL, st);
  }
  loom_params_free(params);
  if (!e) {
    fprintf(stderr, "dist_job: %s\n", loom_status_message(st));
    int code = loom_job_exit_code(loom_status_code(st));
    loom_status_free(st);
    return code;
  }
  loom_train_spec ts = loom_train_spec_default();
  ts.input_fn = input_fn;
  ts.input_user = &c;
  ts.max_steps = atoll(arg(argc, argv, "--max_steps", "200"));
  progress pr = {{NULL, 0}, 0, atoll(arg(argc, argv, "--progress", "100")), atof(arg(argc, argv, "--step_sleep_ms", "0")),
                 atoll(arg(argc, argv, "--warmup", "0")), 0, 0, 0, 0, 0};
  if (pr.warmup < 0) pr.warmup = 0;
  static const loom_hook_ops pr_ops = {pr_begin, NULL, pr_before, pr_after, NULL, NULL};
  loom_hook *prh = loom_hook_new(&pr_ops, &pr, "progress");
  ts.nhooks = prh ? 1 : 0;
  ts.hooks = &prh;
  loom_exporter *x = loom_latest_exporter("latest", serving_fn, &c, 2, st);
  loom_eval_spec es = loom_eval_spec_default();
  es.input_fn = input_fn;
  es.input_user = &c;
  es.steps = fashion(&c) ? 20 : 0;
  es.throttle_secs = atof(arg(argc, argv, "--throttle", "0"));
  es.start_delay_secs = atof(arg(argc, argv, "--start_delay", "0"));
  es.nexporters = x ? 1 : 0;
  es.exporters = &x;
  loom_job_options jo = loom_job_options_default();
  jo.optimizer = LOOM_PS_SGD;
  jo.hyper[0] = (float)lr;
  /* without --optimizer the PS runs the model's own train op (SGD at --lr); with it, an override */
  const char *on = arg(argc, argv, "--optimizer", "");
  jo.job_optimizer = *on != 0;
  if (!strcmp(on, "adam")) {
    jo.optimizer = LOOM_PS_ADAM;
    jo.hyper[1] = 0.9f, jo.hyper[2] = 0.999f, jo.hyper[3] = 1e-8f;
  }
  double dl = atof(arg(argc, argv, "--deadline", "60"));
  jo.start_deadline_s = dl;
  jo.peer_lost_deadline_s = dl;
  jo.eval_deadline_s = dl;
  jo.diag_every_s = atof(arg(argc, argv, "--diag", "2"));
  if (arg(argc, argv, "--idle_exit", NULL)) jo.ps_idle_exit_s = atof(arg(argc, argv, "--idle_exit", NULL));
  if (arg(argc, argv, "--chief_lost_save", NULL))
    jo.ps_chief_lost_save_s = atof(arg(argc, argv, "--chief_lost_save", NULL));
  jo.rpc_timeout_s = atof(arg(argc, argv, "--rpc_timeout", "5"));
  jo.eval_poll_s = 0.2;
  jo.overlap_comm = atoi(arg(argc, argv, "--overlap", "0"));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  loom_tae_result *r = NULL;
  loom_code code = collective ? loom_train_and_evaluate(e, &ts, &es, &r, st) : loom_run_job(e, &ts, &es, &jo, &r, st);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  const char *tfc = getenv("TF_CONFIG");
  loom_tf_config *tc = loom_tf_config_parse(NULL, NULL);
  printf("dist_job: role=%s:%d exit=%d secs=%.3f\n", tc ? loom_tf_config_task_type(tc) : "?",
         tc ? loom_tf_config_task_id(tc) : 0, loom_job_exit_code(code), secs);
  (void)tfc;
  loom_tf_config_free(tc);
  if (code) fprintf(stderr, "dist_job: %s\n", loom_status_message(st));
  if (r && loom_tae_result_metrics(r)) {
    const loom_eval_result *m = loom_tae_result_metrics(r);
    double acc = 0;
    loom_eval_result_get(m, "accuracy", &acc, NULL);
    printf("dist_job: evaluated=%d last_step=%lld accuracy=%.4f export=%s\n", loom_tae_result_num_evaluations(r),
           (long long)loom_eval_result_global_step(m), acc,
           loom_tae_result_num_exports(r) > 0 && loom_tae_result_export_path(r, 0) ? loom_tae_result_export_path(r, 0)
                                                                                  : "none");
  }
  if (pr.n > pr.warmup + 1) {
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    printf("dist_job: local_steps=%lld first_step_after_launch_s=%.3f global_steps=%lld global_steps_per_sec=%.1f "
           "local_steps_per_sec=%.1f\n",
           (long long)pr.n, pr.t_step1, (long long)(pr.gs_last - pr.gs_first),
           (double)(pr.gs_last - pr.gs_first) / (pr.t_last - pr.t_first),
           (double)(pr.n - pr.warmup - 1) / (pr.t_last - pr.t_first));
  }
  {
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    printf("dist_job: end_unix=%.3f\n", (double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec);
  }
  fflush(stdout);
  loom_tae_result_free(r);
  loom_exporter_free(x);
  loom_hook_free(prh);
  loom_estimator_free(e);
  loom_fc_set_free(cs);
  loom_status_free(st);
  return loom_job_exit_code(code);
}
