/* Estimator with a ragged feature (loom_data.h, loom_sparse.h): a dataset's
 * ragged pair ("ids", "ids/row_splits") reaches model_fn as ONE sparse
 * entry of the features map (rank-1 placeholders of unknown length), and
 * train, evaluate and predict feed each batch's merged values and splits.
 * The features map's sparse entries on their own. */
#include "test_util.h"

/* ids rows: {1,2} {} {3} {4,5,6} {}; x dense [5, 1]; y label [5, 1].
 * Batches of 2: ({1,2}, {0,2,2}), ({3,4,5,6}, {0,1,4}), ({}, {0,0}). */
typedef struct in_opts {
  int64_t batch;
  int shuffle;
} in_opts;

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)mode;
  (void)p;
  in_opts *o = user;
  const int64_t idv[6] = {1, 2, 3, 4, 5, 6}, sp[6] = {0, 2, 2, 3, 6, 6};
  const float xv[5] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f}, yv[5] = {10, 11, 12, 13, 14};
  int64_t n6 = 6, d2[2] = {5, 1};
  loom_tensor *vals[3] = {loom_tensor_from_data(LOOM_I64, 1, &n6, idv, NULL),
                          loom_tensor_from_data(LOOM_F32, 2, d2, xv, NULL),
                          loom_tensor_from_data(LOOM_F32, 2, d2, yv, NULL)};
  loom_tensor *splits[3] = {loom_tensor_from_data(LOOM_I64, 1, &n6, sp, NULL), NULL, NULL};
  const char *names[3] = {"ids", "x", "y"};
  loom_dataset *ds = loom_dataset_from_ragged_tensors(3, names, (const loom_tensor *const *)vals,
                                                      (const loom_tensor *const *)splits, "y", st);
  for (int i = 0; i < 3; i++) {
    loom_tensor_free(vals[i]);
    loom_tensor_free(splits[i]);
  }
  if (ds && o->shuffle) ds = loom_dataset_shuffle(ds, 5, 7, 1, st);
  if (ds) ds = loom_dataset_batch(ds, o->batch, 0, st);
  return ds;
}

static int fn_calls;

/* loss = w1 * sum(ids) + w2 * sum(row_splits) + w3 * sum(x): linear in the
 * variables, so SGD with learning rate 1 leaves w1 = -(sum of all batches'
 * ids), w2 = -(sum of all batches' merged splits), w3 = -(sum of x). */
static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)params;
  (void)cfg;
  (void)user;
  (void)st;
  fn_calls++;
  cr_assert_eq(loom_features_count(f), 2, "features: %d", loom_features_count(f));
  int ids_i = strcmp(loom_features_name(f, 0), "ids") == 0 ? 0 : 1;
  cr_assert_str_eq(loom_features_name(f, ids_i), "ids");
  cr_assert_str_eq(loom_features_name(f, 1 - ids_i), "x");
  cr_assert(loom_features_is_sparse(f, ids_i));
  cr_assert(!loom_features_is_sparse(f, 1 - ids_i));
  cr_assert(!loom_features_is_sparse(f, 2));
  loom_sparse ids = loom_features_get_sparse(f, "ids");
  cr_assert(ids.values.node && ids.row_splits.node);
  cr_assert(loom_features_get(f, "ids").node == ids.values.node, "get of a sparse entry gives its values");
  cr_assert_null(loom_features_get_sparse(f, "x").values.node);
  cr_assert_null(loom_features_get_sparse(f, "ids/row_splits").values.node);
  for (int i = 0; i < loom_features_count(f); i++) /* (get of an absent key would fail the graph) */
    cr_assert_str_neq(loom_features_name(f, i), "ids/row_splits");
  int64_t d[LOOM_MAX_DIMS];
  cr_assert_eq(loom_output_dims(ids.values, d), 1);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(loom_output_dtype(ids.values), LOOM_I64);
  cr_assert_eq(loom_output_dims(ids.row_splits, d), 1);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(loom_output_dtype(ids.row_splits), LOOM_I64);
  loom_output x = loom_features_get(f, "x");
  cr_assert_eq(loom_output_dims(x, d), 2);
  cr_assert(mode == LOOM_MODE_PREDICT ? labels.node == NULL : labels.node != NULL);

  loom_output sv = loom_reduce_sum(g, loom_cast(g, ids.values, LOOM_F32, NULL), -1, NULL, 0, "sum_ids");
  loom_output ss = loom_reduce_sum(g, loom_cast(g, ids.row_splits, LOOM_F32, NULL), -1, NULL, 0, "sum_splits");
  loom_output sx = loom_reduce_sum(g, x, -1, NULL, 0, "sum_x");
  loom_initializer zero = loom_init_zeros();
  loom_output w1 = loom_variable_output(loom_get_variable(g, "w1", LOOM_F32, 0, NULL, &zero, 1));
  loom_output w2 = loom_variable_output(loom_get_variable(g, "w2", LOOM_F32, 0, NULL, &zero, 1));
  loom_output w3 = loom_variable_output(loom_get_variable(g, "w3", LOOM_F32, 0, NULL, &zero, 1));
  loom_output loss = loom_add(g, loom_add(g, loom_mul(g, w1, sv, NULL), loom_mul(g, w2, ss, NULL), NULL),
                              loom_mul(g, w3, sx, NULL), "loss");
  loom_spec_add_prediction(spec, "values", loom_identity(g, ids.values, NULL));
  loom_spec_add_prediction(spec, "splits", loom_identity(g, ids.row_splits, NULL));
  loom_spec_add_prediction(spec, "x", loom_identity(g, x, NULL));
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_spec_set_loss(spec, loss);
  loom_output none = {NULL, 0};
  loom_spec_add_eval_metric(spec, "mean_split",
                            loom_metrics_mean(g, loom_cast(g, ids.row_splits, LOOM_F32, NULL), none, NULL));
  loom_spec_add_eval_metric(spec, "mean_label", loom_metrics_mean(g, labels, none, NULL));
  if (mode == LOOM_MODE_TRAIN) {
    loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 1.0f, "lr"));
    loom_node *op = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL);
    loom_optimizer_free(opt);
    loom_spec_set_train_op(spec, op);
  }
  return LOOM_OK;
}

static float var_f32(loom_estimator *e, const char *name) {
  loom_tensor *t = NULL;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_estimator_get_variable_value(e, name, &t, st), LOOM_OK, "%s", loom_status_message(st));
  float v = loom_tensor_dtype(t) == LOOM_F32 ? *(const float *)loom_tensor_data_const(t)
                                              : (float)*(const int64_t *)loom_tensor_data_const(t);
  loom_tensor_free(t);
  loom_status_free(st);
  return v;
}

static loom_estimator *make_est(const char *dir, int prefetch) {
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  c.prefetch = prefetch;
  loom_status *st = loom_status_new();
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
  cr_assert(e, "estimator: %s", loom_status_message(st));
  loom_status_free(st);
  return e;
}

Test(estimator_ragged, train_evaluate_predict_feed_batched_pairs) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est_ragged");
  for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
    char sub[TU_TMPDIR_CAP + 16];
    snprintf(sub, sizeof sub, "%s/p%d", dir, prefetch);
    loom_estimator *e = make_est(sub, prefetch);
    loom_status *st = loom_status_new();
    in_opts io = {2, 0};
    loom_train_options to = loom_train_options_default();
    cr_assert_eq(loom_estimator_train(e, input_fn, &io, &to, st), LOOM_OK, "train: %s", loom_status_message(st));
    /* batches: ids sums 3, 18, 0; merged splits sums 4, 5, 0; x sums 2, 6, 4.5 */
    cr_assert_eq(var_f32(e, "global_step"), 3.0f);
    cr_assert_eq(var_f32(e, "w1"), -21.0f, "w1 = %g", var_f32(e, "w1"));
    cr_assert_eq(var_f32(e, "w2"), -9.0f, "w2 = %g", var_f32(e, "w2"));
    cr_assert_eq(var_f32(e, "w3"), -12.5f, "w3 = %g", var_f32(e, "w3"));

    /* evaluate: loss per batch = w . (sums): -21*3 - 9*4 - 12.5*2 = -124,
     * -21*18 - 9*5 - 12.5*6 = -498, -12.5*4.5 = -56.25; mean -226.083.. */
    loom_eval_result *r = NULL;
    loom_eval_options eo = loom_eval_options_default();
    cr_assert_eq(loom_estimator_evaluate(e, input_fn, &io, &eo, &r, st), LOOM_OK, "evaluate: %s",
                 loom_status_message(st));
    double loss, ms, ml;
    cr_assert_eq(loom_eval_result_get(r, "loss", &loss, st), LOOM_OK);
    cr_assert_eq(loom_eval_result_get(r, "mean_split", &ms, st), LOOM_OK);
    cr_assert_eq(loom_eval_result_get(r, "mean_label", &ml, st), LOOM_OK);
    cr_assert(fabs(loss - (-124.0 - 498.0 - 56.25) / 3) < 1e-4, "loss %g", loss);
    cr_assert(fabs(ms - 9.0 / 8.0) < 1e-6, "mean of all splits entries %g (want 9/8)", ms); /* {0,2,2} {0,1,4} {0,0} */
    cr_assert(fabs(ml - 12.0) < 1e-6, "mean label %g", ml);
    cr_assert_eq(loom_eval_result_global_step(r), 3);
    loom_eval_result_free(r);

    /* predict (batches): the values and merged splits as fed */
    loom_predict_options po = loom_predict_options_default();
    po.yield_single_examples = 0;
    io.batch = 3;
    loom_prediction_iter *it = loom_estimator_predict(e, input_fn, &io, &po, st);
    cr_assert(it, "predict: %s", loom_status_message(st));
    cr_assert_eq(loom_prediction_next(it, st), LOOM_OK, "%s", loom_status_message(st));
    const loom_tensor *v = loom_prediction_get(it, "values"), *s = loom_prediction_get(it, "splits");
    cr_assert_eq(loom_tensor_numel(v), 3);
    cr_assert_eq(((const int64_t *)loom_tensor_data_const(v))[2], 3);
    cr_assert_eq(loom_tensor_numel(s), 4);
    const int64_t want_s0[4] = {0, 2, 2, 3};
    for (int i = 0; i < 4; i++) cr_assert_eq(((const int64_t *)loom_tensor_data_const(s))[i], want_s0[i]);
    cr_assert_eq(loom_prediction_next(it, st), LOOM_OK, "%s", loom_status_message(st));
    v = loom_prediction_get(it, "values");
    s = loom_prediction_get(it, "splits");
    const int64_t want_v1[3] = {4, 5, 6}, want_s1[3] = {0, 3, 3};
    cr_assert_eq(loom_tensor_numel(v), 3);
    cr_assert_eq(loom_tensor_numel(s), 3);
    for (int i = 0; i < 3; i++) {
      cr_assert_eq(((const int64_t *)loom_tensor_data_const(v))[i], want_v1[i]);
      cr_assert_eq(((const int64_t *)loom_tensor_data_const(s))[i], want_s1[i]);
    }
    cr_assert_eq(loom_prediction_next(it, st), LOOM_OUT_OF_RANGE);
    loom_prediction_iter_free(it);
    loom_status_free(st);
    loom_estimator_free(e);
  }
  tu_rmtree(dir);
}

/* A shuffled input: each predicted batch's values and splits belong to
 * the rows its dense x says (x = r + 0.5 for row r), and training sums
 * the same ids whatever the order. */
Test(estimator_ragged, shuffled_batches) {
  static const int64_t row_ids[5][3] = {{1, 2}, {0}, {3}, {4, 5, 6}, {0}};
  static const int64_t row_len[5] = {2, 0, 1, 3, 0};
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est_ragged");
  loom_estimator *e = make_est(dir, 2);
  loom_status *st = loom_status_new();
  in_opts io = {2, 1};
  loom_train_options to = loom_train_options_default();
  cr_assert_eq(loom_estimator_train(e, input_fn, &io, &to, st), LOOM_OK, "train: %s", loom_status_message(st));
  cr_assert_eq(var_f32(e, "global_step"), 3.0f);
  cr_assert_eq(var_f32(e, "w1"), -21.0f, "w1 = %g", var_f32(e, "w1"));
  cr_assert_eq(var_f32(e, "w3"), -12.5f);
  loom_predict_options po = loom_predict_options_default();
  po.yield_single_examples = 0;
  loom_prediction_iter *it = loom_estimator_predict(e, input_fn, &io, &po, st);
  cr_assert(it, "predict: %s", loom_status_message(st));
  int seen[5] = {0}, in_order = 1, prev = -1;
  while (loom_prediction_next(it, st) == LOOM_OK) {
    const loom_tensor *v = loom_prediction_get(it, "values"), *s = loom_prediction_get(it, "splits"),
                      *x = loom_prediction_get(it, "x");
    const int64_t *vv = loom_tensor_data_const(v), *sv = loom_tensor_data_const(s);
    const float *xv = loom_tensor_data_const(x);
    int64_t b = loom_tensor_numel(x);
    cr_assert_eq(loom_tensor_numel(s), b + 1);
    cr_assert_eq(sv[0], 0);
    cr_assert_eq(sv[b], loom_tensor_numel(v));
    for (int64_t j = 0; j < b; j++) {
      int r = (int)xv[j];
      cr_assert(r >= 0 && r < 5);
      if (r != prev + 1) in_order = 0;
      prev = r;
      seen[r]++;
      cr_assert_eq(sv[j + 1] - sv[j], row_len[r], "row %d has %lld ids", r, (long long)(sv[j + 1] - sv[j]));
      for (int64_t k = 0; k < row_len[r]; k++) cr_assert_eq(vv[sv[j] + k], row_ids[r][k]);
    }
  }
  cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE, "%s", loom_status_message(st));
  for (int r = 0; r < 5; r++) cr_assert_eq(seen[r], 1, "row %d seen %d times", r, seen[r]);
  cr_assert(!in_order, "the shuffle kept the order");
  loom_prediction_iter_free(it);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}

Test(estimator_ragged, features_map_sparse_entries) {
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  int64_t unk = -1;
  loom_sparse sp = {loom_placeholder(g, LOOM_STRING, 1, &unk, "v"), loom_placeholder(g, LOOM_I64, 1, &unk, "s")};
  loom_output dense = loom_placeholder(g, LOOM_F32, 1, &unk, "d");
  loom_features *f = loom_features_new();
  cr_assert_eq(loom_features_add(f, "d", dense, st), LOOM_OK);
  cr_assert_eq(loom_features_add_sparse(f, "q", sp, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_features_count(f), 2);
  cr_assert(!loom_features_is_sparse(f, 0));
  cr_assert(loom_features_is_sparse(f, 1));
  cr_assert(!loom_features_is_sparse(f, -1));
  cr_assert(!loom_features_is_sparse(NULL, 0));
  loom_sparse got = loom_features_get_sparse(f, "q");
  cr_assert(got.values.node == sp.values.node && got.row_splits.node == sp.row_splits.node);
  cr_assert(loom_features_at(f, 1).node == sp.values.node);
  cr_assert_null(loom_features_get_sparse(f, "d").row_splits.node);
  cr_assert_null(loom_features_get_sparse(f, "nope").values.node);
  cr_assert_null(loom_features_get_sparse(NULL, "q").values.node);
  /* a name taken (dense or sparse), missing parts, int32 splits */
  loom_code rc = loom_features_add_sparse(f, "q", sp, st);
  cr_assert_eq(rc, LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "'q'"), "%s", loom_status_message(st));
  cr_assert_eq(loom_features_add_sparse(f, "d", sp, st), LOOM_INVALID_ARGUMENT);
  cr_assert(loom_features_add(f, "q", dense, st) != LOOM_OK);
  loom_sparse half = {sp.values, {NULL, 0}};
  cr_assert_eq(loom_features_add_sparse(f, "h", half, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "'h'") && strstr(loom_status_message(st), "row_splits"), "%s",
            loom_status_message(st));
  loom_sparse s32 = {sp.values, loom_placeholder(g, LOOM_I32, 1, &unk, "s32")};
  cr_assert_eq(loom_features_add_sparse(f, "w", s32, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "'w'") && strstr(loom_status_message(st), "int32"), "%s",
            loom_status_message(st));
  cr_assert_eq(loom_features_add_sparse(NULL, "z", sp, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_features_add_sparse(f, "", sp, st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(loom_features_count(f), 2);
  loom_features_free(f);
  loom_graph_free(g);
  loom_status_free(st);
}

/* Export with a sparse receiver: the signature takes "ids" and
 * "ids/row_splits" as two inputs, and the predictor feeds both. */
static loom_code serving_fn(loom_graph *g, loom_features *features, loom_features *receivers, void *user,
                            loom_status *st) {
  (void)user;
  int64_t unk = -1, xd[2] = {-1, 1};
  loom_sparse ids = {loom_placeholder(g, LOOM_I64, 1, &unk, "in_ids"),
                     loom_placeholder(g, LOOM_I64, 1, &unk, "in_ids_splits")};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "in_x");
  loom_code rc = loom_features_add_sparse(receivers, "ids", ids, st);
  if (!rc) rc = loom_features_add(receivers, "x", x, st);
  if (!rc) rc = loom_features_add_sparse(features, "ids", ids, st);
  if (!rc) rc = loom_features_add(features, "x", x, st);
  return rc;
}

Test(estimator_ragged, export_sparse_receiver) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_est_ragged");
  loom_estimator *e = make_est(dir, 0);
  loom_status *st = loom_status_new();
  in_opts io = {2, 0};
  loom_train_options to = loom_train_options_default();
  cr_assert_eq(loom_estimator_train(e, input_fn, &io, &to, st), LOOM_OK, "train: %s", loom_status_message(st));
  char base[TU_TMPDIR_CAP + 16], out[4096];
  snprintf(base, sizeof base, "%s/export", dir);
  cr_assert_eq(loom_estimator_export(e, serving_fn, NULL, base, NULL, out, sizeof out, st), LOOM_OK, "export: %s",
               loom_status_message(st));
  loom_predictor *p = loom_predictor_load(out, NULL, st);
  cr_assert(p, "load: %s", loom_status_message(st));
  int nin = loom_predictor_num_inputs(p, NULL);
  cr_assert_eq(nin, 3);
  int64_t n3 = 3, n3s = 3, xd[2] = {2, 1};
  const int64_t vv[3] = {1, 2, 3}, sv[3] = {0, 2, 3};
  const float xv[2] = {0.5f, 1.5f};
  loom_tensor *tv = loom_tensor_from_data(LOOM_I64, 1, &n3, vv, NULL);
  loom_tensor *ts = loom_tensor_from_data(LOOM_I64, 1, &n3s, sv, NULL);
  loom_tensor *tx = loom_tensor_from_data(LOOM_F32, 2, xd, xv, NULL);
  loom_tensor *in[3] = {0};
  for (int i = 0; i < nin; i++) {
    const char *k = loom_predictor_input_key(p, NULL, i);
    if (!strcmp(k, "ids"))
      in[i] = tv;
    else if (!strcmp(k, "ids/row_splits"))
      in[i] = ts;
    else if (!strcmp(k, "x"))
      in[i] = tx;
    cr_assert(in[i], "unexpected input key %s", k);
  }
  int nout = loom_predictor_num_outputs(p, NULL);
  cr_assert_eq(nout, 3);
  loom_tensor *o[3] = {0};
  cr_assert_eq(loom_predictor_run(p, NULL, 3, in, 3, o, st), LOOM_OK, "run: %s", loom_status_message(st));
  for (int i = 0; i < nout; i++) {
    const char *k = loom_predictor_output_key(p, NULL, i);
    const loom_tensor *want = !strcmp(k, "values") ? tv : !strcmp(k, "splits") ? ts : tx;
    cr_assert_eq(loom_tensor_nbytes(o[i]), loom_tensor_nbytes(want), "output %s", k);
    cr_assert(!memcmp(loom_tensor_data_const(o[i]), loom_tensor_data_const(want), loom_tensor_nbytes(want)),
              "output %s", k);
    loom_tensor_free(o[i]);
  }
  loom_tensor_free(tv);
  loom_tensor_free(ts);
  loom_tensor_free(tx);
  loom_predictor_free(p);
  loom_status_free(st);
  loom_estimator_free(e);
  tu_rmtree(dir);
}
