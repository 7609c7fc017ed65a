/* test_strategy.c - the parameter-server strategy trains the model the user wrote: with one trainer and
 * no overlap, a chief + 1 PS job (both roles in this process, each on its own thread, the PS on port 0
 * published through model_dir/rendezvous) reaches, after 200 steps, the same trainable variables and
 * global step, optimizer slots and Adam's beta powers as local training of the same estimator on the
 * same data: bitwise (the PS runs the same kernels on the gradients the train op's apply ops consume). Covered: the 8 canned estimators with
 * their default optimizers (Linear: Ftrl; DNN: Adagrad; DNNLinearCombined: Ftrl on linear/ and Adagrad
 * on dnn/; Baseline: Ftrl; sparse rows through the vocabulary column and the embedding), a DNN with
 * optimizer "RMSProp" (Keras': the mean square starts at 0) and one with TF 1's centered RMSProp (it starts
 * at 1; the PS reads the start from the slot variable's initial value), and a custom
 * model_fn with Adam, an exponential learning-rate decay, clip_by_global_norm and a sparse embedding.
 * A train op the PS cannot reproduce fails the job at start naming the op and the variable. */
#include <pthread.h>
#include "canned_small.h"
#include "loom/loom_job.h"

#define STEPS 200

typedef struct role {
  const char *model; /* a canned fixture name, or "custom" */
  const char *dir;
  const char *tf;    /* TF_CONFIG JSON */
  int64_t steps;     /* max_steps */
  loom_code rc;
  char msg[1024];
} role;

/* ---- the custom model_fn: embedding (sparse) + dense, Adam with exponential decay, clipped gradients ---- */
static int g_bad_train_op;  /* 1: an extra AssignAdd on a trainable variable in the train op */
static int g_restart_half; /* equivalence_case: the job stops halfway and restarts against fresh PS tasks */
static int g_num_ps = 1;          /* PS tasks of the jobs */
static int64_t g_min_slice_bytes; /* loom_job_options.min_slice_bytes (0: the default) */
static loom_code custom_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                           const loom_params *params, const loom_run_config *config, loom_estimator_spec *spec,
                           void *user, loom_status *st) {
  (void)params, (void)config, (void)user, (void)st;
  loom_output x = loom_features_get(f, "x"), ids = loom_features_get(f, "id");
  loom_initializer gi = loom_init_glorot_uniform(3), zi = loom_init_zeros();
  int64_t ed[2] = {6, 3}, kd[2] = {5, 1}, bd[1] = {1};
  loom_variable *emb = loom_get_variable(g, "emb", LOOM_F32, 2, ed, &gi, 1);
  loom_variable *k = loom_get_variable(g, "kernel", LOOM_F32, 2, kd, &gi, 1);
  loom_variable *b = loom_get_variable(g, "bias", LOOM_F32, 1, bd, &zi, 1);
  loom_output e = loom_gather(g, loom_variable_output(emb), ids, 0, NULL); /* [n, 3] */
  loom_output h = loom_concat(g, 2, (loom_output[]){x, e}, 1, NULL);      /* [n, 5] */
  loom_output y = loom_add(g, loom_matmul(g, h, loom_variable_output(k), 0, 0, NULL), loom_variable_output(b), NULL);
  loom_spec_add_prediction(spec, "y", y);
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_output loss = loom_reduce_mean(g, loom_square(g, loom_sub(g, y, labels, NULL), NULL), -1, NULL, 0, "loss");
  loom_spec_set_loss(spec, loss);
  if (mode != LOOM_MODE_TRAIN) return LOOM_OK;
  loom_variable *vars[3] = {emb, k, b};
  loom_output xs[3] = {loom_variable_output(emb), loom_variable_output(k), loom_variable_output(b)};
  loom_gradient gr[3], cl[3];
  loom_code rc = loom_gradients_sparse(g, 1, &loss, NULL, 3, xs, gr, st);
  if (rc) return rc;
  loom_clip_gradients_by_global_norm(g, 3, gr, 0.5, cl, NULL);
  loom_variable *gs = loom_get_global_step(g);
  loom_output lr = loom_exponential_decay(g, 0.05, loom_variable_output(gs), 40, 0.5, 0, NULL);
  loom_optimizer *opt = loom_optimizer_adam(lr, NULL);
  loom_node *train = loom_optimizer_apply_gradients(opt, g, 3, cl, vars, gs, NULL);
  loom_optimizer_free(opt);
  if (g_bad_train_op && train) {
    loom_output one = loom_const_f32(g, 1.0f, NULL);
    loom_node *bump = loom_assign_add(g, loom_variable_output(b), loom_reshape(g, one, 1, bd, NULL), "bump_bias").node;
    loom_node *both[2] = {train, bump};
    train = loom_group(g, 2, both, "train_and_bump");
  }
  return loom_spec_set_train_op(spec, train);
}

static void custom_data(cu_data *d) {
  memset(d, 0, sizeof *d);
  float x[8] = {0.5f, 1.0f, 1.5f, -1.0f, 0.0f, 2.0f, 1.0f, 1.0f};
  int64_t id[4] = {1, 4, 1, 5}; /* a repeated id: its rows' gradients are summed */
  float yl[4] = {0.5f, -1.0f, 2.0f, 1.0f};
  int64_t xd[2] = {4, 2}, idd[1] = {4}, yd[2] = {4, 1};
  d->names[0] = "x";
  d->cols[0] = loom_tensor_from_data(LOOM_F32, 2, xd, x, NULL);
  d->names[1] = "id";
  d->cols[1] = loom_tensor_from_data(LOOM_I64, 1, idd, id, NULL);
  d->names[2] = "label";
  d->cols[2] = loom_tensor_from_data(LOOM_F32, 2, yd, yl, NULL);
  d->label = "label";
  d->nf = 3;
  d->n = 4;
}

/* The estimator of r->model in dir, with its data in *d and its columns in *sc. */
static loom_estimator *make_model(const char *model, const char *dir, small_cols *sc, cu_data *d, loom_status *st) {
  loom_run_config cfg = cu_config();
  cfg.save_checkpoints_steps = STEPS;
  if (!strcmp(model, "custom")) {
    custom_data(d);
    sc->set = NULL;
    return loom_estimator_new(custom_fn, NULL, dir, &cfg, NULL, NULL, st);
  }
  small_cols_make(sc);
  small_data(d, strstr(model, "3") ? 3 : 2, strstr(model, "regressor") != NULL);
  return make_fixture_model(model, sc, dir, &cfg, st);
}

/* A TrainSpec of max_steps steps and an EvalSpec (one batch, no delay) over d. */
static void make_specs(cu_data *d, int64_t max_steps, loom_train_spec *ts, loom_eval_spec *es) {
  *ts = loom_train_spec_default();
  ts->input_fn = cu_input_fn;
  ts->input_user = d;
  ts->max_steps = max_steps;
  *es = loom_eval_spec_default();
  es->input_fn = cu_input_fn;
  es->input_user = d;
  es->steps = 1;
  es->start_delay_secs = 0;
  es->throttle_secs = 0;
}

static void *run_role(void *arg) {
  role *r = arg;
  loom_status *st = loom_status_new();
  small_cols sc;
  cu_data d;
  loom_estimator *e = make_model(r->model, r->dir, &sc, &d, st);
  if (!e) {
    r->rc = loom_status_code(st);
    snprintf(r->msg, sizeof r->msg, "%s", loom_status_message(st));
  } else {
    loom_train_spec ts;
    loom_eval_spec es;
    make_specs(&d, r->steps, &ts, &es);
    loom_job_options o = loom_job_options_default();
    o.tf_config = r->tf;
    o.start_deadline_s = o.peer_lost_deadline_s = 30;
    o.diag_every_s = 5;
    o.ps_idle_exit_s = 3; /* a PS whose chief failed before connecting exits */
    o.min_slice_bytes = g_min_slice_bytes;
    r->rc = loom_run_job(e, &ts, &es, &o, NULL, st);
    snprintf(r->msg, sizeof r->msg, "%s", loom_status_message(st));
    loom_estimator_free(e);
  }
  cu_data_free(&d);
  loom_fc_set_free(sc.set);
  loom_status_free(st);
  return NULL;
}

static void tf_config(char *buf, size_t cap, const char *type, int index) {
  snprintf(buf, cap,
           "{\"cluster\": {\"chief\": [\"127.0.0.1:0\"], \"ps\": [\"127.0.0.1:0\"%s%s]}, \"task\": {\"type\": "
           "\"%s\", \"index\": %d}}",
           g_num_ps > 1 ? ", \"127.0.0.1:0\"" : "", g_num_ps > 2 ? ", \"127.0.0.1:0\"" : "", type, index);
}

/* Runs the chief + 1 PS job of model in dir to max_steps; returns the chief's code (msg: its message). */
static loom_code run_job(const char *model, const char *dir, int64_t steps, char *msg, size_t cap) {
  char tps[3][300], tch[300];
  role ps[3];
  pthread_t t[3];
  for (int i = 0; i < g_num_ps; i++) {
    tf_config(tps[i], sizeof tps[i], "ps", i);
    ps[i] = (role){model, dir, tps[i], steps, LOOM_OK, ""};
    cr_assert_eq(pthread_create(&t[i], NULL, run_role, &ps[i]), 0);
  }
  tf_config(tch, sizeof tch, "chief", 0);
  role ch = {model, dir, tch, steps, LOOM_OK, ""};
  run_role(&ch);
  loom_code rc = ch.rc;
  snprintf(msg, cap, "%s", ch.msg);
  for (int i = 0; i < g_num_ps; i++) {
    pthread_join(t[i], NULL);
    if (rc == LOOM_OK && ps[i].rc != LOOM_OK) {
      rc = ps[i].rc;
      snprintf(msg, cap, "ps:%d: %s", i, ps[i].msg);
    }
  }
  return rc;
}

/* Local training and the job of the same model: every variable of model.ckpt-STEPS bitwise equal (the
 * trainable ones, the optimizer slots and Adam's beta powers the chief pulls from the PS before it saves),
 * global_step STEPS in both. */
static void equivalence_case(const char *model) {
  char ldir[TU_TMPDIR_CAP], jdir[TU_TMPDIR_CAP], msg[1024];
  tu_tmpdir(ldir, sizeof ldir, "strat_l");
  tu_tmpdir(jdir, sizeof jdir, "strat_j");
  loom_status *st = loom_status_new();
  {
    small_cols sc;
    cu_data d;
    loom_estimator *e = make_model(model, ldir, &sc, &d, st);
    cr_assert(e, "%s: %s", model, loom_status_message(st));
    loom_train_options to = loom_train_options_default();
    to.max_steps = STEPS;
    cr_assert_eq(loom_estimator_train(e, cu_input_fn, &d, &to, st), LOOM_OK, "%s local: %s", model,
                 loom_status_message(st));
    loom_estimator_free(e);
    cu_data_free(&d);
    loom_fc_set_free(sc.set);
  }
  loom_code rc = LOOM_OK;
  if (g_restart_half) { /* half the steps, the PS tasks lost with their own checkpoints, the rest */
    rc = run_job(model, jdir, STEPS / 2, msg, sizeof msg);
    cr_assert_eq(rc, LOOM_OK, "%s job (first half): %s", model, msg);
    char ps[TU_TMPDIR_CAP + 8];
    snprintf(ps, sizeof ps, "%s/ps", jdir);
    tu_rmtree(ps);
  }
  rc = run_job(model, jdir, STEPS, msg, sizeof msg);
  cr_assert_eq(rc, LOOM_OK, "%s job: %s", model, msg);
  char a[TU_TMPDIR_CAP + 32], b[TU_TMPDIR_CAP + 32];
  snprintf(a, sizeof a, "%s/model.ckpt-%d", ldir, STEPS);
  snprintf(b, sizeof b, "%s/model.ckpt-%d", jdir, STEPS);
  cu_vars lv;
  memset(&lv, 0, sizeof lv);
  cr_assert_eq(loom_checkpoint_list_variables(a, cu__collect, &lv, st), LOOM_OK, "%s", loom_status_message(st));
  int compared = 0, differ = 0;
  for (int i = 0; i < lv.n; i++) {
    const char *n = lv.v[i].name;
    loom_tensor *ta = NULL, *tb = NULL;
    cr_assert_eq(loom_checkpoint_read_tensor(a, n, &ta, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert_eq(loom_checkpoint_read_tensor(b, n, &tb, st), LOOM_OK, "%s: %s: %s", model, n, loom_status_message(st));
    cr_assert_eq(loom_tensor_nbytes(ta), loom_tensor_nbytes(tb), "%s: %s", model, n);
    if (memcmp(loom_tensor_data_const(ta), loom_tensor_data_const(tb), loom_tensor_nbytes(ta))) {
      differ++;
      const float *pa = loom_tensor_data_const(ta), *pb = loom_tensor_data_const(tb);
      cr_expect(0, "%s: %s differs (local %.9g, job %.9g at [0])", model, n,
                loom_tensor_dtype(ta) == LOOM_F32 ? (double)pa[0] : 0.0,
                loom_tensor_dtype(ta) == LOOM_F32 ? (double)pb[0] : 0.0);
    }
    if (!strcmp(n, "global_step")) cr_expect_eq(*(const int64_t *)loom_tensor_data_const(tb), STEPS);
    compared++;
    loom_tensor_free(ta);
    loom_tensor_free(tb);
  }
  cr_expect_geq(compared, 3, "%s: %d variables compared", model, compared);
  for (int i = 0; i < g_num_ps; i++) { /* every PS task held a part of the model: its shard checkpoint */
    char sh[TU_TMPDIR_CAP + 64];
    snprintf(sh, sizeof sh, "%s/ps/model.ckpt-%d.ps-%d-of-%d", jdir, STEPS, i, g_num_ps);
    cr_expect_eq(access(sh, R_OK), 0, "%s: %s", model, sh);
  }
  fprintf(stderr, "%s: %d variables compared, %d differ\n", model, compared, differ);
  loom_status_free(st);
  tu_rmtree(ldir);
  tu_rmtree(jdir);
}

Test(strategy, dnn_classifier_adagrad_equals_local, .timeout = 120) { equivalence_case("dnn_classifier3"); }
Test(strategy, dnn_classifier_rmsprop_mean_square_from_zero_equals_local, .timeout = 120) {
  equivalence_case("dnn_rmsprop_classifier3");
}
Test(strategy, dnn_classifier_tf1_centered_rmsprop_mean_square_from_one_equals_local, .timeout = 120) {
  equivalence_case("dnn_tf1rmsprop_classifier3");
}
Test(strategy, linear_classifier_ftrl_equals_local, .timeout = 120) { equivalence_case("linear_classifier3"); }
Test(strategy, dnn_linear_combined_classifier_ftrl_and_adagrad_equals_local, .timeout = 120) {
  equivalence_case("combined_classifier3");
}
Test(strategy, dnn_regressor_equals_local, .timeout = 120) { equivalence_case("dnn_regressor"); }
Test(strategy, linear_regressor_equals_local, .timeout = 120) { equivalence_case("linear_regressor"); }
Test(strategy, dnn_linear_combined_regressor_equals_local, .timeout = 120) { equivalence_case("combined_regressor"); }
Test(strategy, baseline_classifier_equals_local, .timeout = 120) { equivalence_case("baseline_classifier"); }
Test(strategy, baseline_regressor_equals_local, .timeout = 120) { equivalence_case("baseline_regressor"); }
Test(strategy, custom_adam_decay_clip_embedding_equals_local, .timeout = 120) { equivalence_case("custom"); }

/* The job stops at step 100 and its PS tasks are lost with their checkpoints (model_dir/ps removed):
 * the restarted chief restores model.ckpt-100 (variables, slots, beta powers, as pulled from the PS) and
 * re-creates the variables on the fresh PS with their slots and the step of their schedule; at 200 the
 * checkpoint still equals uninterrupted local training's, bitwise (the input restarts, but every batch
 * is the whole data set). */
Test(strategy, restart_against_fresh_ps_keeps_slots_and_schedule_equals_local, .timeout = 120) {
  g_restart_half = 1;
  equivalence_case("custom");
  equivalence_case("combined_classifier3");
  g_restart_half = 0;
}

/* Three PS tasks, every variable above 8 bytes partitioned (row ranges; the embeddings' rows by row mod
 * 3): each shard carries its variable's rule, the schedule's step advances on every shard, the chief
 * reassembles the slots from the shards: still bitwise equal to local training. */
Test(strategy, three_ps_partitioned_equals_local, .timeout = 120) {
  g_num_ps = 3;
  g_min_slice_bytes = 8;
  equivalence_case("custom");
  equivalence_case("combined_classifier3");
  equivalence_case("linear_regressor");
}
/* Keras' legacy RMSProp decays every row's mean square on a sparse update: with the embedding's rows
 * split over three PS tasks, a task whose rows the batch missed decays them too. */
Test(strategy, three_ps_partitioned_rmsprop_equals_local, .timeout = 120) {
  g_num_ps = 3;
  g_min_slice_bytes = 8;
  equivalence_case("dnn_rmsprop_classifier3");
}

/* An assignment to a trainable variable in the train op: no PS counterpart; the chief fails at start,
 * naming the op and the variable, before it trains a step. */
Test(strategy, unreproducible_train_op_fails_at_start_naming_op_and_variable, .timeout = 120) {
  g_bad_train_op = 1;
  char dir[TU_TMPDIR_CAP], msg[1024];
  tu_tmpdir(dir, sizeof dir, "strat_bad");
  loom_code rc = run_job("custom", dir, STEPS, msg, sizeof msg);
  cr_expect_eq(rc, LOOM_INVALID_ARGUMENT, "code %d: %s", rc, msg);
  cr_expect(strstr(msg, "bump_bias") && strstr(msg, "AssignAdd") && strstr(msg, "bias"), "%s", msg);
  g_bad_train_op = 0;
  tu_rmtree(dir);
}

/* RunConfig.train_distribute: LOCAL trains locally under a TF_CONFIG that names PS tasks (no PS is
 * needed: the call returns with the local checkpoint); PARAMETER_SERVER without PS tasks in TF_CONFIG is
 * INVALID_ARGUMENT; COLLECTIVE outside an MPI launcher is FAILED_PRECONDITION (tests/test_allreduce.c runs it
 * under mpirun); a value outside the enum fails the constructor. */
Test(strategy, run_config_train_distribute_selects_the_strategy, .timeout = 60) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "strat_rc");
  loom_status *st = loom_status_new();
  small_cols sc;
  cu_data d;
  small_cols_make(&sc);
  small_data(&d, 2, 0);
  loom_run_config cfg = cu_config();
  cfg.train_distribute = 7;
  cr_expect_null(make_fixture_model("linear_classifier", &sc, dir, &cfg, st));
  cr_expect(strstr(loom_status_message(st), "train_distribute"), "%s", loom_status_message(st));
  loom_train_spec ts;
  loom_eval_spec es;
  make_specs(&d, 20, &ts, &es);
  static const int kinds[3] = {LOOM_DISTRIBUTE_LOCAL, LOOM_DISTRIBUTE_PARAMETER_SERVER, LOOM_DISTRIBUTE_COLLECTIVE};
  static const loom_code want_plain[3] = {LOOM_OK, LOOM_INVALID_ARGUMENT, LOOM_FAILED_PRECONDITION};
  for (int k = 0; k < 3; k++) {
    cfg = cu_config();
    cfg.train_distribute = kinds[k];
    loom_estimator *e = make_fixture_model("linear_classifier", &sc, dir, &cfg, st);
    cr_assert(e, "%s", loom_status_message(st));
    loom_tae_result *r = NULL;
    loom_status_clear(st);
    loom_code rc = loom_train_and_evaluate(e, &ts, &es, &r, st);
    cr_expect_eq(rc, want_plain[k], "train_distribute %d: code %d: %s", kinds[k], rc, loom_status_message(st));
    loom_tae_result_free(r);
    loom_estimator_free(e);
  }
  /* LOCAL under a TF_CONFIG naming PS tasks (unreachable ones): local training, at once */
  setenv("TF_CONFIG",
         "{\"cluster\": {\"chief\": [\"127.0.0.1:1\"], \"ps\": [\"127.0.0.1:1\"]}, \"task\": {\"type\": \"chief\", "
         "\"index\": 0}}",
         1);
  cfg = cu_config();
  cfg.train_distribute = LOOM_DISTRIBUTE_LOCAL;
  cfg.save_checkpoints_steps = 40;
  loom_estimator *e = make_fixture_model("linear_classifier", &sc, dir, &cfg, st);
  cr_assert(e, "%s", loom_status_message(st));
  loom_tae_result *r = NULL;
  ts.max_steps = 40;
  cr_expect_eq(loom_train_and_evaluate(e, &ts, &es, &r, st), LOOM_OK, "%s", loom_status_message(st));
  char ck[TU_TMPDIR_CAP + 32];
  snprintf(ck, sizeof ck, "%s/model.ckpt-40", dir);
  cr_expect_eq(access(ck, R_OK), 0, "local checkpoint %s", ck);
  unsetenv("TF_CONFIG");
  loom_tae_result_free(r);
  loom_estimator_free(e);
  cu_data_free(&d);
  loom_fc_set_free(sc.set);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* A canned DNN with batch normalization: its train op also updates the moving averages, non-trainable
 * variables the PS does not hold; the trainer runs those updates itself each step (the chief's are
 * checkpointed): still bitwise equal to local training, moving averages included. */
Test(strategy, dnn_batch_norm_moving_averages_on_the_trainer_equals_local, .timeout = 120) {
  equivalence_case("dnn_classifier_bn");
}
