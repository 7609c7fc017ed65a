/* Train family: variables (get_variable reuse rules, collections,
 * initialisation, the uninitialised-read error), assign/scatter ops,
 * initializers (seeds, TF's limits and moments), optimizers (dense and
 * sparse updates vs TF's formulas in double), learning-rate schedules,
 * clipping, minimize through autodiff. */
#include <stddef.h>
#include "optim_case.h"

/* ---------------------------------------------------------------- helpers */
static loom_session *new_session(loom_graph *g) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "graph error: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "%s", loom_status_message(st));
  loom_status_free(st);
  return s;
}

static void run_target(loom_session *s, loom_node *t, int nfeeds, const loom_output *feeds, loom_tensor *const *vals) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_session_run(s, feeds, vals, nfeeds, NULL, NULL, 0, &t, 1, st);
  cr_assert_eq(rc, LOOM_OK, "run failed: %s", loom_status_message(st));
  loom_status_free(st);
}

static loom_tensor *fetch(loom_session *s, loom_output o) {
  loom_status *st = loom_status_new();
  loom_tensor *t = NULL;
  loom_code rc = loom_session_run(s, NULL, NULL, 0, &o, &t, 1, NULL, 0, st);
  cr_assert_eq(rc, LOOM_OK, "fetch failed: %s", loom_status_message(st));
  loom_status_free(st);
  return t;
}

static loom_tensor *read_var(loom_session *s, const char *name) {
  loom_status *st = loom_status_new();
  loom_tensor *t = NULL;
  loom_code rc = loom_session_read_variable(s, name, &t, st);
  cr_assert_eq(rc, LOOM_OK, "read %s: %s", name, loom_status_message(st));
  loom_status_free(st);
  return t;
}

static loom_code graph_err(loom_graph *g, char *msg, size_t cap) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_graph_status(g, st);
  snprintf(msg, cap, "%s", loom_status_message(st));
  loom_status_free(st);
  return rc;
}

static void expect_close(const float *got, const double *want, int n, double tol, const char *what) {
  for (int i = 0; i < n; i++) {
    double err = fabs((double)got[i] - want[i]);
    cr_assert(err <= tol * (1.0 + fabs(want[i])), "%s[%d]: got %.9g want %.9g", what, i, (double)got[i], want[i]);
  }
}

/* ======================================================================
 * Variables
 * ====================================================================== */
Test(variables, get_variable_names_scopes_collections) {
  loom_graph *g = loom_graph_new();
  int64_t kd[2] = {3, 4}, bd[1] = {4};
  loom_initializer z = loom_init_zeros();
  loom_variable_scope_push(g, "dense", LOOM_REUSE_NONE);
  loom_variable *k = loom_get_variable(g, "kernel", LOOM_F32, 2, kd, NULL, 1);
  loom_variable *b = loom_get_variable(g, "bias", LOOM_F32, 1, bd, &z, 1);
  loom_output op = loom_add(g, loom_variable_output(b), loom_variable_output(b), "sum");
  loom_variable_scope_pop(g);
  cr_assert_str_eq(loom_variable_name(k), "dense/kernel");
  cr_assert_str_eq(loom_variable_name(b), "dense/bias");
  cr_assert_str_eq(loom_node_name(op.node), "dense/sum");
  cr_assert_str_eq(loom_node_op_name(loom_variable_node(k)), "VariableV2");
  cr_assert_str_eq(loom_node_name(loom_variable_initializer_node(k)), "dense/kernel/Assign");
  cr_assert_str_eq(loom_node_name(loom_variable_initial_value(k).node), "dense/kernel/Initializer/random_uniform");
  cr_assert_eq(loom_graph_variable(g, "dense/kernel"), k);
  int64_t dims[LOOM_MAX_DIMS];
  cr_assert_eq(loom_variable_dims(k, dims), 2);
  cr_assert_eq(dims[0], 3);
  cr_assert_eq(dims[1], 4);
  cr_assert_eq(loom_variable_dtype(k), LOOM_F32);

  /* reuse: the same object; ops get a fresh name scope like TF */
  loom_variable_scope_push(g, "dense", LOOM_REUSE_TRUE);
  loom_variable *k2 = loom_get_variable(g, "kernel", LOOM_F32, 2, kd, NULL, 1);
  loom_output op2 = loom_add(g, loom_variable_output(b), loom_variable_output(b), "sum");
  /* nested scopes inherit reuse */
  loom_variable_scope_push(g, "inner", LOOM_REUSE_NONE);
  cr_assert_str_eq(loom_variable_scope_name(g), "dense/inner");
  loom_variable_scope_pop(g);
  loom_variable_scope_pop(g);
  cr_assert_eq(k2, k);
  cr_assert_str_eq(loom_node_name(op2.node), "dense_1/sum");

  /* AUTO_REUSE creates, then reuses */
  loom_variable_scope_push(g, "auto", LOOM_REUSE_AUTO);
  loom_variable *a1 = loom_get_variable(g, "w", LOOM_F32, 1, bd, &z, 0);
  loom_variable *a2 = loom_get_variable(g, "w", LOOM_F32, 1, bd, &z, 0);
  loom_variable_scope_pop(g);
  cr_assert_eq(a1, a2);
  cr_assert_str_eq(loom_variable_name(a1), "auto/w");

  /* collections */
  int n = 0;
  loom_variable *const *gv = loom_global_variables(g, &n);
  cr_assert_eq(n, 3);
  cr_assert_eq(gv[0], k);
  loom_trainable_variables(g, &n);
  cr_assert_eq(n, 2);
  loom_local_variables(g, &n);
  cr_assert_eq(n, 0);
  loom_variable *lv = loom_get_variable_ex(g, "count", LOOM_F32, 0, NULL, &z, 0, LOOM_COLL_LOCAL | LOOM_COLL_METRIC);
  loom_local_variables(g, &n);
  cr_assert_eq(n, 1);
  loom_get_variable_collection(g, LOOM_METRIC_VARIABLES, &n);
  cr_assert_eq(n, 1);
  loom_global_variables(g, &n);
  cr_assert_eq(n, 3);
  (void)lv;
  /* generic collections */
  loom_add_to_collection(g, LOOM_REGULARIZATION_LOSSES, op);
  loom_add_node_to_collection(g, LOOM_UPDATE_OPS, op2.node);
  const loom_output *c = loom_get_collection(g, LOOM_REGULARIZATION_LOSSES, &n);
  cr_assert_eq(n, 1);
  cr_assert_eq(c[0].node, op.node);
  c = loom_get_collection(g, LOOM_UPDATE_OPS, &n);
  cr_assert_eq(n, 1);
  cr_assert_eq(c[0].node, op2.node);
  cr_assert_null(loom_get_collection(g, "nothing", &n));
  cr_assert_eq(n, 0);
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  loom_graph_free(g);
}

Test(variables, reuse_errors) {
  int64_t kd[2] = {3, 4}, kd2[2] = {5, 4};
  char msg[512];
  /* exists without reuse */
  loom_graph *g = loom_graph_new();
  loom_variable_scope_push(g, "dense", LOOM_REUSE_NONE);
  loom_get_variable(g, "kernel", LOOM_F32, 2, kd, NULL, 1);
  loom_variable_scope_pop(g);
  loom_variable_scope_push(g, "dense", LOOM_REUSE_NONE);
  loom_variable *bad = loom_get_variable(g, "kernel", LOOM_F32, 2, kd, NULL, 1);
  loom_variable_scope_pop(g);
  cr_assert(bad); /* a harmless dummy */
  cr_assert(loom_output_valid(loom_variable_output(bad)));
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_ALREADY_EXISTS);
  cr_assert(strstr(msg, "Variable dense/kernel already exists, disallowed. Did you mean to set reuse=True"), "%s",
            msg);
  loom_graph_free(g);

  /* reuse with a missing variable */
  g = loom_graph_new();
  loom_variable_scope_push(g, "dense", LOOM_REUSE_TRUE);
  loom_get_variable(g, "kernel", LOOM_F32, 2, kd, NULL, 1);
  loom_variable_scope_pop(g);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_NOT_FOUND);
  cr_assert(strstr(msg, "Variable dense/kernel does not exist"), "%s", msg);
  loom_graph_free(g);

  /* reuse with another shape / dtype */
  g = loom_graph_new();
  loom_get_variable(g, "w", LOOM_F32, 2, kd, NULL, 1);
  loom_variable_scope_push(g, "", LOOM_REUSE_TRUE); /* empty scope name is an error */
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  loom_graph_free(g);
  g = loom_graph_new();
  loom_variable_scope_push(g, "s", LOOM_REUSE_NONE);
  loom_get_variable(g, "w", LOOM_F32, 2, kd, NULL, 1);
  loom_variable_scope_pop(g);
  loom_variable_scope_push(g, "s", LOOM_REUSE_TRUE);
  loom_get_variable(g, "w", LOOM_F32, 2, kd2, NULL, 1);
  loom_variable_scope_pop(g);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "Trying to share variable s/w, but specified shape [5,4] and found shape [3,4]"), "%s", msg);
  loom_graph_free(g);
  g = loom_graph_new();
  loom_get_variable(g, "w", LOOM_F32, 2, kd, NULL, 1);
  loom_variable_scope_push(g, "", LOOM_REUSE_TRUE);
  loom_graph_free(g);
  g = loom_graph_new();
  loom_variable_scope_push(g, "s", LOOM_REUSE_AUTO);
  loom_get_variable(g, "w", LOOM_F32, 2, kd, NULL, 1);
  loom_get_variable(g, "w", LOOM_F64, 2, kd, NULL, 1);
  loom_variable_scope_pop(g);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "specified dtype float64 and found dtype float32"), "%s", msg);
  loom_graph_free(g);

  /* unknown dims, a name taken by another node */
  g = loom_graph_new();
  int64_t unk[1] = {-1};
  loom_get_variable(g, "w", LOOM_F32, 1, unk, NULL, 1);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "w: the shape [?] must be fully defined"), "%s", msg);
  loom_graph_free(g);
  g = loom_graph_new();
  loom_const_f32(g, 1.0f, "taken");
  loom_get_variable(g, "taken", LOOM_F32, 0, NULL, NULL, 1);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_ALREADY_EXISTS);
  loom_graph_free(g);
}

Test(variables, initialize_read_and_uninitialized_error) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {2, 3};
  loom_initializer c = loom_init_constant(1.5);
  loom_variable_scope_push(g, "dense", LOOM_REUSE_NONE);
  loom_variable *k = loom_get_variable(g, "kernel", LOOM_F32, 2, d, &c, 1);
  loom_variable_scope_pop(g);
  float idata[6] = {1, 2, 3, 4, 5, 6};
  loom_variable *w = loom_variable_new(g, loom_const_data(g, LOOM_F32, 2, d, idata, "w_init"), 1, 0, "w");
  cr_assert_str_eq(loom_variable_name(w), "w");
  loom_output y = loom_mul(g, loom_variable_output(k), loom_variable_output(w), "y");
  loom_output view = loom_identity(g, loom_variable_output(k), "view");
  loom_node *init = loom_global_variables_initializer(g);
  cr_assert_str_eq(loom_node_name(init), "init");
  loom_session *s = new_session(g);
  loom_status *st = loom_status_new();
  loom_tensor *out = NULL;
  /* reading before initialisation fails with TF's message */
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &y, &out, 1, NULL, 0, st), LOOM_FAILED_PRECONDITION);
  cr_assert(strstr(loom_status_message(st), "Attempting to use uninitialized value dense/kernel"), "%s",
            loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), "y:"), "%s", loom_status_message(st));
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &view, &out, 1, NULL, 0, st), LOOM_FAILED_PRECONDITION);
  cr_assert_eq(loom_session_read_variable(s, "w", &out, st), LOOM_FAILED_PRECONDITION);
  cr_assert_eq(loom_session_read_variable(s, "nope", &out, st), LOOM_NOT_FOUND);
  cr_assert_eq(loom_session_variable_initialized(s, "w"), 0);
  /* initialising only k leaves w uninitialised */
  run_target(s, loom_variable_initializer_node(k), 0, NULL, NULL);
  cr_assert_eq(loom_session_variable_initialized(s, "dense/kernel"), 1);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &y, &out, 1, NULL, 0, st), LOOM_FAILED_PRECONDITION);
  cr_assert(strstr(loom_status_message(st), "uninitialized value w"), "%s", loom_status_message(st));
  run_target(s, init, 0, NULL, NULL);
  out = fetch(s, y);
  float want[6] = {1.5f, 3, 4.5f, 6, 7.5f, 9};
  tu_expect_f32(out, 2, d, want, 0);
  loom_tensor_free(out);
  /* session-side read / assign */
  loom_tensor *kv = read_var(s, "dense/kernel");
  float want_k[6] = {1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f};
  tu_expect_f32(kv, 2, d, want_k, 0);
  float nd[6] = {-1, -2, -3, -4, -5, -6};
  loom_tensor *nt = tu_f32(2, d, nd);
  cr_assert_eq(loom_session_assign_variable(s, "dense/kernel", nt, st), LOOM_OK);
  loom_tensor_free(kv);
  kv = NULL;
  cr_assert_eq(loom_session_read_variable(s, "dense/kernel", &kv, st), LOOM_OK);
  tu_expect_f32(kv, 2, d, nd, 0);
  loom_tensor_free(kv);
  int64_t bd[1] = {6};
  loom_tensor *wrong = loom_tensor_new(LOOM_F32, 1, bd, NULL);
  cr_assert_eq(loom_session_assign_variable(s, "dense/kernel", wrong, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "[6]") && strstr(loom_status_message(st), "[2,3]"), "%s",
            loom_status_message(st));
  loom_tensor_free(wrong);
  out = fetch(s, y);
  float want2[6] = {-1, -4, -9, -16, -25, -36};
  tu_expect_f32(out, 2, d, want2, 0);
  loom_tensor_free(out);
  loom_tensor_free(nt);
  /* a second session has its own, uninitialised store */
  loom_session *s2 = new_session(g);
  out = NULL;
  cr_assert_eq(loom_session_run(s2, NULL, NULL, 0, &y, &out, 1, NULL, 0, st), LOOM_FAILED_PRECONDITION);
  loom_session_free(s2);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

Test(variables, assign_ops_and_scatter) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {4, 2};
  float v0[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 2, d, v0, NULL), 1, 0, "v");
  loom_output vo = loom_variable_output(v);
  float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, twos[8] = {2, 2, 2, 2, 2, 2, 2, 2};
  loom_output one = loom_const_data(g, LOOM_F32, 2, d, ones, "one");
  loom_output two = loom_const_data(g, LOOM_F32, 2, d, twos, "two");
  loom_output add = loom_assign_add(g, vo, one, "add");
  loom_output sub = loom_assign_sub(g, vo, two, "sub");
  loom_output mul = loom_assign_mul(g, vo, two, "mul");
  loom_output set = loom_assign(g, vo, two, "set");
  int32_t idx[3] = {1, 3, 1};
  int64_t id[1] = {3}, ud[2] = {3, 2};
  float upd[6] = {10, 20, 30, 40, 50, 60};
  loom_output ix = loom_const_data(g, LOOM_I32, 1, id, idx, "ix");
  loom_output up = loom_const_data(g, LOOM_F32, 2, ud, upd, "up");
  loom_output sadd = loom_var_scatter_add(g, vo, ix, up, "sadd");
  loom_output ssub = loom_var_scatter_sub(g, vo, ix, up, "ssub");
  loom_output supd = loom_var_scatter_update(g, vo, ix, up, "supd");
  /* chained in-place ops: the output of one is a ref */
  loom_output chain = loom_assign_add(g, add, one, "chain");
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  loom_tensor *t = fetch(s, add); /* fetch of an in-place op's output: the updated variable */
  float w1[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  tu_expect_f32(t, 2, d, w1, 0);
  loom_tensor_free(t);
  t = fetch(s, sub);
  float w2[8] = {-1, 0, 1, 2, 3, 4, 5, 6};
  tu_expect_f32(t, 2, d, w2, 0);
  loom_tensor_free(t);
  t = fetch(s, mul);
  float w3[8] = {-2, 0, 2, 4, 6, 8, 10, 12};
  tu_expect_f32(t, 2, d, w3, 0);
  loom_tensor_free(t);
  t = fetch(s, sadd); /* rows 1 (twice) and 3 */
  float w4[8] = {-2, 0, 2 + 10 + 50, 4 + 20 + 60, 6, 8, 10 + 30, 12 + 40};
  tu_expect_f32(t, 2, d, w4, 0);
  loom_tensor_free(t);
  t = fetch(s, ssub);
  float w5[8] = {-2, 0, 2, 4, 6, 8, 10, 12};
  tu_expect_f32(t, 2, d, w5, 0);
  loom_tensor_free(t);
  t = fetch(s, supd); /* last write wins */
  float w6[8] = {-2, 0, 50, 60, 6, 8, 30, 40};
  tu_expect_f32(t, 2, d, w6, 0);
  loom_tensor_free(t);
  t = fetch(s, chain);
  float w7[8] = {0, 2, 52, 62, 8, 10, 32, 42};
  tu_expect_f32(t, 2, d, w7, 0);
  loom_tensor_free(t);
  t = fetch(s, set);
  tu_expect_f32(t, 2, d, twos, 0);
  loom_tensor_free(t);
  loom_session_free(s);
  loom_graph_free(g);

  /* int64 scatter, bad index at run time */
  g = loom_graph_new();
  int64_t d1[1] = {5};
  int64_t iv[5] = {0, 0, 0, 0, 0};
  loom_variable *c = loom_variable_new(g, loom_const_data(g, LOOM_I64, 1, d1, iv, NULL), 0, 0, "counts");
  int64_t bidx[2] = {1, 7}, one_i[2] = {1, 1}, nd[1] = {2};
  loom_output bad = loom_var_scatter_add(g, loom_variable_output(c), loom_const_data(g, LOOM_I64, 1, nd, bidx, NULL),
                                         loom_const_data(g, LOOM_I64, 1, nd, one_i, NULL), "bad");
  init = loom_global_variables_initializer(g);
  s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  char msg[256];
  loom_status *st = loom_status_new();
  t = NULL;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &bad, &t, 1, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  snprintf(msg, sizeof msg, "%s", loom_status_message(st));
  cr_assert(strstr(msg, "bad:") && strstr(msg, "indices[1] = 7 is not in [0, 5)"), "%s", msg);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(g);
}

Test(variables, builder_errors) {
  char msg[512];
  loom_graph *g = loom_graph_new();
  loom_output notvar = loom_const_f32(g, 1.0f, "c");
  loom_assign(g, notvar, notvar, "asg");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "asg: input ref must be a variable, got c"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t d[1] = {3}, d2[1] = {4};
  loom_output v = loom_variable_v2(g, LOOM_F32, 1, d, "v");
  loom_output val = loom_const_data(g, LOOM_F32, 1, d2, (float[4]){0}, NULL);
  loom_assign(g, v, val, "asg");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "asg: value shape [4] does not match the variable's shape [3]"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  v = loom_variable_v2(g, LOOM_F32, 1, d, "v");
  loom_assign_add(g, v, loom_const_data(g, LOOM_F64, 1, d, (double[3]){1, 1, 1}, NULL), "aa");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "aa: value dtype float64 does not match the variable's float32"), "%s", msg);
  loom_graph_free(g);

  /* optimizer op shape errors name the node and both shapes */
  g = loom_graph_new();
  v = loom_variable_v2(g, LOOM_F32, 1, d, "v");
  val = loom_const_data(g, LOOM_F32, 1, d2, (float[4]){0}, NULL);
  loom_apply_gradient_descent(g, v, loom_const_f32(g, 0.1f, NULL), val, "gd");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "gd: delta shape [4] does not match var shape [3]"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  v = loom_variable_v2(g, LOOM_F32, 1, d, "v");
  loom_apply_gradient_descent(g, v, loom_const_data(g, LOOM_F32, 1, d, (float[3]){0}, NULL),
                              loom_const_data(g, LOOM_F32, 1, d, (float[3]){0}, NULL), "gd");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "gd: alpha must be a float32 scalar, got float32 [3]"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t vd[2] = {5, 3}, gd2[2] = {2, 4}, idd[1] = {2};
  v = loom_variable_v2(g, LOOM_F32, 2, vd, "v");
  loom_sparse_apply_gradient_descent(g, v, loom_const_f32(g, 0.1f, NULL), loom_placeholder(g, LOOM_F32, 2, gd2, "g"),
                                     loom_placeholder(g, LOOM_I32, 1, idd, "i"), "sgd");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "sgd: grad shape [2,4] must be [len(indices)] + var shape [5,3]"), "%s", msg);
  loom_graph_free(g);

  /* a fed variable cannot be modified in place */
  g = loom_graph_new();
  v = loom_variable_v2(g, LOOM_F32, 1, d, "v");
  loom_output asg = loom_assign(g, v, loom_const_data(g, LOOM_F32, 1, d, (float[3]){1, 2, 3}, NULL), "asg");
  loom_session *s = new_session(g);
  loom_tensor *fv = loom_tensor_new(LOOM_F32, 1, d, NULL);
  loom_tensor *out = NULL;
  loom_status *st = loom_status_new();
  loom_code frc = loom_session_run(s, &v, &fv, 1, &asg, &out, 1, NULL, 0, st);
  cr_assert_eq(frc, LOOM_INVALID_ARGUMENT, "%d %s", frc, loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), "asg: would modify v in place, but this run feeds it"), "%s",
            loom_status_message(st));
  loom_tensor_free(fv);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(g);
}

Test(variables, global_step) {
  loom_graph *g = loom_graph_new();
  cr_assert_null(loom_get_global_step(g));
  loom_variable *gs = loom_get_or_create_global_step(g);
  cr_assert_eq(loom_get_or_create_global_step(g), gs);
  cr_assert_eq(loom_get_global_step(g), gs);
  cr_assert_str_eq(loom_variable_name(gs), "global_step");
  cr_assert_eq(loom_variable_dtype(gs), LOOM_I64);
  cr_assert_eq(loom_variable_dims(gs, NULL), 0);
  cr_assert_eq(loom_variable_trainable(gs), 0);
  int n;
  loom_global_variables(g, &n);
  cr_assert_eq(n, 1);
  loom_trainable_variables(g, &n);
  cr_assert_eq(n, 0);
  loom_output inc = loom_assign_add(g, loom_variable_output(gs), loom_const_i64(g, 1, NULL), "inc");
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  for (int i = 0; i < 3; i++) run_target(s, inc.node, 0, NULL, NULL);
  loom_tensor *t = read_var(s, "global_step");
  cr_assert_eq(*(int64_t *)loom_tensor_data(t), 3);
  loom_tensor_free(t);
  loom_session_free(s);
  loom_graph_free(g);
}

/* ======================================================================
 * Initializers
 * ====================================================================== */
static loom_tensor *init_values(int64_t graph_seed, const loom_initializer *init, loom_dtype dt, int ndim,
                                const int64_t *dims) {
  loom_graph *g = loom_graph_new();
  if (graph_seed >= 0) loom_graph_set_random_seed(g, graph_seed);
  loom_variable *v = loom_get_variable(g, "v", dt, ndim, dims, init, 1);
  loom_node *init_op = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init_op, 0, NULL, NULL);
  loom_tensor *t = read_var(s, loom_variable_name(v));
  loom_session_free(s);
  loom_graph_free(g);
  return t;
}

static void moments(const loom_tensor *t, double *mn, double *mx, double *mean, double *sd) {
  const float *p = loom_tensor_data_const(t);
  int64_t n = loom_tensor_numel(t);
  double s = 0, s2 = 0;
  *mn = INFINITY;
  *mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    s += p[i];
    s2 += (double)p[i] * p[i];
    if (p[i] < *mn) *mn = p[i];
    if (p[i] > *mx) *mx = p[i];
  }
  *mean = s / (double)n;
  *sd = sqrt(s2 / (double)n - *mean * *mean);
}

Test(initializers, constant_kinds) {
  int64_t d[2] = {3, 5};
  loom_initializer z = loom_init_zeros(), o = loom_init_ones(), c = loom_init_constant(-2.5);
  loom_tensor *t = init_values(-1, &z, LOOM_F32, 2, d);
  for (int i = 0; i < 15; i++) cr_assert_eq(((float *)loom_tensor_data(t))[i], 0.0f);
  loom_tensor_free(t);
  t = init_values(-1, &o, LOOM_F64, 2, d);
  for (int i = 0; i < 15; i++) cr_assert_eq(((double *)loom_tensor_data(t))[i], 1.0);
  loom_tensor_free(t);
  t = init_values(-1, &c, LOOM_F32, 2, d);
  for (int i = 0; i < 15; i++) cr_assert_eq(((float *)loom_tensor_data(t))[i], -2.5f);
  loom_tensor_free(t);
  t = init_values(-1, &c, LOOM_I32, 0, NULL);
  cr_assert_eq(*(int32_t *)loom_tensor_data(t), -2);
  loom_tensor_free(t);
  /* default for integers: zeros */
  t = init_values(-1, NULL, LOOM_I64, 2, d);
  for (int i = 0; i < 15; i++) cr_assert_eq(((int64_t *)loom_tensor_data(t))[i], 0);
  loom_tensor_free(t);
  /* zero-size variable */
  int64_t dz[2] = {0, 4};
  t = init_values(-1, &o, LOOM_F32, 2, dz);
  cr_assert_eq(loom_tensor_numel(t), 0);
  loom_tensor_free(t);
  /* random initializers need floats */
  loom_graph *g = loom_graph_new();
  loom_initializer ru = loom_init_random_uniform(0, 1, 1);
  loom_get_variable(g, "v", LOOM_I32, 2, d, &ru, 1);
  char msg[256];
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "float"), "%s", msg);
  loom_graph_free(g);
}

Test(initializers, seeds_are_deterministic) {
  int64_t d[2] = {20, 30};
  loom_initializer gu = loom_init_glorot_uniform(LOOM_SEED_NONE);
  loom_tensor *a = init_values(42, &gu, LOOM_F32, 2, d);
  loom_tensor *b = init_values(42, &gu, LOOM_F32, 2, d);
  loom_tensor *c = init_values(43, &gu, LOOM_F32, 2, d);
  cr_assert(!memcmp(loom_tensor_data(a), loom_tensor_data(b), loom_tensor_nbytes(a)));
  cr_assert(memcmp(loom_tensor_data(a), loom_tensor_data(c), loom_tensor_nbytes(a)));
  /* an op seed alone is deterministic too; different op seeds differ */
  loom_initializer s1 = loom_init_glorot_uniform(7), s2 = loom_init_glorot_uniform(8);
  loom_tensor *e = init_values(-1, &s1, LOOM_F32, 2, d);
  loom_tensor *f = init_values(-1, &s1, LOOM_F32, 2, d);
  loom_tensor *h = init_values(-1, &s2, LOOM_F32, 2, d);
  cr_assert(!memcmp(loom_tensor_data(e), loom_tensor_data(f), loom_tensor_nbytes(e)));
  cr_assert(memcmp(loom_tensor_data(e), loom_tensor_data(h), loom_tensor_nbytes(e)));
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_tensor_free(c);
  loom_tensor_free(e);
  loom_tensor_free(f);
  loom_tensor_free(h);
}

Test(initializers, distributions_match_tf) {
  double mn, mx, mean, sd;
  /* glorot_uniform: U(-l, l), l = sqrt(6 / (fan_in + fan_out)) */
  int64_t d[2] = {200, 300};
  loom_initializer gu = loom_init_glorot_uniform(1);
  loom_tensor *t = init_values(-1, &gu, LOOM_F32, 2, d);
  double l = sqrt(6.0 / 500.0);
  moments(t, &mn, &mx, &mean, &sd);
  cr_assert(mn >= -l && mx <= l, "range [%g, %g] limit %g", mn, mx, l);
  cr_assert(mn < -0.99 * l && mx > 0.99 * l, "range [%g, %g] limit %g", mn, mx, l);
  cr_assert(fabs(mean) < 0.01 * l, "mean %g", mean);
  cr_assert(fabs(sd - l / sqrt(3.0)) < 0.01 * l, "sd %g want %g", sd, l / sqrt(3.0));
  loom_tensor_free(t);

  /* he_normal on a conv kernel (HWIO): fan_in = 3*3*16; truncated at 2 sigma
   * with TF's correction, so the sample sd is sqrt(2 / fan_in) */
  int64_t kd[4] = {3, 3, 16, 64};
  loom_initializer hn = loom_init_he_normal(2);
  t = init_values(-1, &hn, LOOM_F32, 4, kd);
  double want_sd = sqrt(2.0 / 144.0), sigma = want_sd / .87962566103423978;
  moments(t, &mn, &mx, &mean, &sd);
  cr_assert(mn > -2 * sigma && mx < 2 * sigma, "range [%g, %g] 2 sigma %g", mn, mx, 2 * sigma);
  cr_assert(mx > 1.9 * sigma, "max %g", mx);
  cr_assert(fabs(mean) < 0.02 * want_sd, "mean %g", mean);
  cr_assert(fabs(sd - want_sd) < 0.02 * want_sd, "sd %g want %g", sd, want_sd);
  loom_tensor_free(t);

  /* glorot_normal: truncated, fan_avg */
  loom_initializer gn = loom_init_glorot_normal(3);
  t = init_values(-1, &gn, LOOM_F32, 2, d);
  want_sd = sqrt(1.0 / 250.0);
  moments(t, &mn, &mx, &mean, &sd);
  cr_assert(fabs(sd - want_sd) < 0.02 * want_sd, "sd %g want %g", sd, want_sd);
  cr_assert(mx < 2 * want_sd / .87962566103423978);
  loom_tensor_free(t);

  /* he_uniform: limit sqrt(6 / fan_in) */
  loom_initializer hu = loom_init_he_uniform(4);
  t = init_values(-1, &hu, LOOM_F32, 4, kd);
  l = sqrt(6.0 / 144.0);
  moments(t, &mn, &mx, &mean, &sd);
  cr_assert(mn >= -l && mx <= l && mx > 0.99 * l, "range [%g, %g] limit %g", mn, mx, l);
  loom_tensor_free(t);

  /* variance_scaling fan_out, untruncated normal: sd sqrt(scale / fan_out) */
  loom_initializer vs = loom_init_variance_scaling(3.0, LOOM_FAN_OUT, LOOM_DIST_UNTRUNCATED_NORMAL, 5);
  t = init_values(-1, &vs, LOOM_F32, 2, d);
  want_sd = sqrt(3.0 / 300.0);
  moments(t, &mn, &mx, &mean, &sd);
  cr_assert(fabs(sd - want_sd) < 0.02 * want_sd, "sd %g want %g", sd, want_sd);
  cr_assert(mx > 3 * want_sd, "untruncated: max %g", mx);
  loom_tensor_free(t);

  /* rank-1 fans: fan_in = fan_out = d0; rank 0: 1 */
  int64_t d1[1] = {60000};
  loom_initializer vu = loom_init_variance_scaling(1.0, LOOM_FAN_AVG, LOOM_DIST_UNIFORM, 6);
  t = init_values(-1, &vu, LOOM_F32, 1, d1);
  l = sqrt(3.0 / 60000.0);
  moments(t, &mn, &mx, &mean, &sd);
  cr_assert(mn >= -l && mx <= l && mx > 0.99 * l, "range [%g, %g] limit %g", mn, mx, l);
  loom_tensor_free(t);
  t = init_values(-1, &vu, LOOM_F32, 0, NULL);
  float v = *(float *)loom_tensor_data(t);
  cr_assert(fabsf(v) <= sqrtf(3.0f));
  loom_tensor_free(t);

  /* plain random initializers */
  loom_initializer ru = loom_init_random_uniform(-3, 5, 9);
  t = init_values(-1, &ru, LOOM_F32, 2, d);
  moments(t, &mn, &mx, &mean, &sd);
  cr_assert(mn >= -3 && mx < 5 && mn < -2.99 && mx > 4.99, "range [%g, %g]", mn, mx);
  cr_assert(fabs(mean - 1) < 0.03, "mean %g", mean);
  loom_tensor_free(t);
  loom_initializer rn = loom_init_random_normal(2, 0.5, 10);
  t = init_values(-1, &rn, LOOM_F32, 2, d);
  moments(t, &mn, &mx, &mean, &sd);
  cr_assert(fabs(mean - 2) < 0.01 && fabs(sd - 0.5) < 0.01, "mean %g sd %g", mean, sd);
  loom_tensor_free(t);
  loom_initializer tn = loom_init_truncated_normal(-1, 2, 11);
  t = init_values(-1, &tn, LOOM_F32, 2, d);
  moments(t, &mn, &mx, &mean, &sd);
  cr_assert(mn > -5 && mx < 3, "range [%g, %g]", mn, mx);
  cr_assert(fabs(sd - 2 * .87962566103423978) < 0.03, "sd %g", sd);
  loom_tensor_free(t);
}

/* ======================================================================
 * Optimizers vs TF's formulas (double reference)
 * ====================================================================== */
enum { K_SGD, K_MOM, K_ADAGRAD, K_ADAM, K_FTRL, K_RMS, K_ADADELTA };

typedef struct optcase {
  int kind;
  double lr;
  loom_momentum_options mom;
  loom_adagrad_options ada;
  loom_adam_options adam;
  loom_ftrl_options ftrl;
  loom_rmsprop_options rms;
  loom_adadelta_options add;
} optcase;

typedef struct refst {
  double var[NEL], s[3][NEL];
} refst;

static void ref_init(const optcase *c, refst *r, const float *v0) {
  memset(r, 0, sizeof *r);
  for (int i = 0; i < NEL; i++) {
    r->var[i] = v0[i];
    switch (c->kind) {
    case K_ADAGRAD: r->s[0][i] = c->ada.initial_accumulator_value; break;
    case K_FTRL: r->s[0][i] = c->ftrl.initial_accumulator_value; break;
    case K_RMS: r->s[0][i] = c->rms.initial_rms_value; break; /* rms starts at 1 (TF 1) or 0 (Keras) */
    default: break;
    }
  }
}

/* one element update; t = 1-based step (Adam) */
static void ref_elem(const optcase *c, refst *r, int i, double g, int t) {
  double *v = &r->var[i], *a = &r->s[0][i], *b = &r->s[1][i], *e = &r->s[2][i], lr = c->lr;
  switch (c->kind) {
  case K_SGD: *v -= lr * g; break;
  case K_MOM:
    *a = *a * c->mom.momentum + g;
    if (c->mom.use_nesterov) *v -= g * lr + *a * c->mom.momentum * lr;
    else *v -= lr * *a;
    break;
  case K_ADAGRAD:
    *a += g * g;
    *v -= lr * g / sqrt(*a);
    break;
  case K_ADAM: {
    double b1 = c->adam.beta1, b2 = c->adam.beta2;
    double alpha = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
    *a = *a + (g - *a) * (1 - b1);
    *b = *b + (g * g - *b) * (1 - b2);
    *v -= *a * alpha / (sqrt(*b) + c->adam.epsilon);
    break;
  }
  case K_FTRL: {
    double p = c->ftrl.learning_rate_power, l1 = c->ftrl.l1, l2 = c->ftrl.l2, sh = c->ftrl.l2_shrinkage;
    double gs = g + 2 * sh * *v, na = *a + g * g;
    *b += gs - (pow(na, -p) - pow(*a, -p)) / lr * *v;
    double x = (*b > 0 ? l1 : *b < 0 ? -l1 : 0) - *b, y = pow(na, -p) / lr + 2 * l2;
    *v = fabs(*b) > l1 ? x / y : 0.0;
    *a = na;
    break;
  }
  case K_RMS: {
    double rho = c->rms.decay, eps = c->rms.epsilon;
    /* s[0] = rms, s[1] = mom, s[2] = mg */
    *a += (g * g - *a) * (1 - rho);
    double denom = *a + eps;
    if (c->rms.centered) {
      *e += (g - *e) * (1 - rho);
      denom = *a - *e * *e + eps;
    }
    if (c->rms.keras_legacy) /* Keras' legacy RMSprop: epsilon outside the square root */
      denom = pow(sqrt(denom - eps) + eps, 2);
    *b = *b * c->rms.momentum + lr * g / sqrt(denom);
    *v -= *b;
    break;
  }
  case K_ADADELTA: {
    double rho = c->add.rho, eps = c->add.epsilon;
    *a = *a * rho + g * g * (1 - rho);
    double u = sqrt(*b + eps) / sqrt(*a + eps) * g;
    *v -= u * lr;
    *b = *b * rho + u * u * (1 - rho);
    break;
  }
  }
}

static loom_optimizer *make_opt(const optcase *c, loom_output lr) {
  switch (c->kind) {
  case K_SGD: return loom_optimizer_sgd(lr);
  case K_MOM: return loom_optimizer_momentum(lr, &c->mom);
  case K_ADAGRAD: return loom_optimizer_adagrad(lr, &c->ada);
  case K_ADAM: return loom_optimizer_adam(lr, &c->adam);
  case K_FTRL: return loom_optimizer_ftrl(lr, &c->ftrl);
  case K_RMS: return loom_optimizer_rmsprop(lr, &c->rms);
  default: return loom_optimizer_adadelta(lr, &c->add);
  }
}

/* slot names in the reference's order s[0], s[1], s[2] */
static int ref_slots(const optcase *c, const char **names) {
  switch (c->kind) {
  case K_MOM: names[0] = "momentum"; return 1;
  case K_ADAGRAD: names[0] = "accum"; return 1;
  case K_ADAM: names[0] = "m"; names[1] = "v"; return 2;
  case K_FTRL: names[0] = "accum"; names[1] = "linear"; return 2;
  case K_RMS:
    names[0] = "rms";
    names[1] = "momentum";
    names[2] = "mg";
    return c->rms.centered ? 3 : 2;
  case K_ADADELTA: names[0] = "accum"; names[1] = "accum_update"; return 2;
  default: return 0;
  }
}


static void run_optcase(const optcase *c, int sparse, const char *const *expect_slot_names) {
  optim_case_graph o = optim_case_graph_new(c->lr, sparse);
  loom_graph *g = o.g;
  loom_variable *v = o.v, *gs = o.global_step;
  loom_gradient grad = o.grad;
  loom_optimizer *opt = make_opt(c, o.lr);
  loom_node *train = loom_optimizer_apply_gradients(opt, g, 1, &grad, &v, gs, NULL);
  cr_assert(train, "apply_gradients failed");
  cr_assert_str_eq(loom_node_name(train), loom_optimizer_name(opt));
  const char *sn[3];
  int ns = ref_slots(c, sn);
  for (int k = 0; k < ns; k++) {
    loom_variable *sl = loom_optimizer_get_slot(opt, v, sn[k]);
    cr_assert(sl, "slot %s missing", sn[k]);
    if (expect_slot_names) cr_assert_str_eq(loom_variable_name(sl), expect_slot_names[k]);
    cr_assert_eq(loom_variable_trainable(sl), 0);
  }
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  refst r;
  ref_init(c, &r, o.v0);
  for (int t = 1; t <= 3; t++) {
    float gv[NEL];
    int n = sparse ? SP_N * COLS : NEL;
    for (int i = 0; i < n; i++) gv[i] = (float)(0.5 * sin(1.3 * i + t) + 0.1 * t);
    loom_tensor *gt = tu_f32(2, o.gd, gv);
    run_target(s, train, 1, &grad.values, &gt);
    loom_tensor_free(gt);
    /* reference */
    if (!sparse) {
      for (int i = 0; i < NEL; i++) ref_elem(c, &r, i, gv[i], t);
    } else {
      double dense[NEL] = {0};
      int touched[ROWS] = {0};
      for (int k = 0; k < SP_N; k++) {
        touched[SP_IDX[k]] = 1;
        for (int j = 0; j < COLS; j++) dense[SP_IDX[k] * COLS + j] += gv[k * COLS + j];
      }
      for (int row = 0; row < ROWS; row++) {
        int lazy = c->kind == K_ADAM && c->adam.lazy;
        if (!touched[row] && c->kind == K_RMS && c->rms.keras_legacy) { /* every row's mean square decays */
          for (int j = 0; j < COLS; j++) {
            r.s[0][row * COLS + j] *= c->rms.decay;
            r.s[2][row * COLS + j] *= c->rms.decay;
          }
          continue;
        }
        if (!touched[row] && (c->kind != K_ADAM || lazy)) continue;
        for (int j = 0; j < COLS; j++) ref_elem(c, &r, row * COLS + j, dense[row * COLS + j], t);
      }
    }
    loom_tensor *vt = read_var(s, "v");
    char what[64];
    snprintf(what, sizeof what, "kind %d sparse %d step %d var", c->kind, sparse, t);
    expect_close(loom_tensor_data(vt), r.var, NEL, 3e-5, what);
    loom_tensor_free(vt);
    for (int k = 0; k < ns; k++) {
      loom_tensor *st = read_var(s, loom_variable_name(loom_optimizer_get_slot(opt, v, sn[k])));
      snprintf(what, sizeof what, "kind %d sparse %d step %d slot %s", c->kind, sparse, t, sn[k]);
      expect_close(loom_tensor_data(st), r.s[k], NEL, 3e-5, what);
      loom_tensor_free(st);
    }
  }
  loom_tensor *step = read_var(s, "global_step");
  cr_assert_eq(*(int64_t *)loom_tensor_data(step), 3);
  loom_tensor_free(step);
  if (c->kind == K_ADAM) {
    loom_tensor *b1 = read_var(s, "beta1_power");
    cr_assert(fabs(*(float *)loom_tensor_data(b1) - pow(c->adam.beta1, 4)) < 1e-6);
    loom_tensor_free(b1);
  }
  loom_session_free(s);
  loom_optimizer_free(opt);
  loom_graph_free(g);
}

static optcase base_case(int kind, double lr) {
  optcase c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.lr = lr;
  c.mom = loom_momentum_options_default();
  c.ada = loom_adagrad_options_default();
  c.adam = loom_adam_options_default();
  c.ftrl = loom_ftrl_options_default();
  c.rms = loom_rmsprop_options_default();
  c.add = loom_adadelta_options_default();
  return c;
}

Test(optimizers, defaults_match_tf) {
  loom_adam_options a = loom_adam_options_default();
  cr_assert(a.beta1 == 0.9 && a.beta2 == 0.999 && a.epsilon == 1e-8 && !a.lazy);
  loom_adagrad_options ag = loom_adagrad_options_default();
  cr_assert(ag.initial_accumulator_value == 0.1);
  loom_ftrl_options f = loom_ftrl_options_default();
  cr_assert(f.learning_rate_power == -0.5 && f.initial_accumulator_value == 0.1 && f.l1 == 0 && f.l2 == 0 &&
            f.l2_shrinkage == 0);
  loom_rmsprop_options r = loom_rmsprop_options_default();
  cr_assert(r.decay == 0.9 && r.momentum == 0 && r.epsilon == 1e-10 && !r.centered && r.initial_rms_value == 1.0);
  loom_adadelta_options d = loom_adadelta_options_default();
  cr_assert(d.rho == 0.95 && d.epsilon == 1e-8);
}

Test(optimizers, sgd) {
  optcase c = base_case(K_SGD, 0.1);
  run_optcase(&c, 0, NULL);
  run_optcase(&c, 1, NULL);
}

Test(optimizers, momentum_and_nesterov) {
  optcase c = base_case(K_MOM, 0.1);
  c.mom.momentum = 0.9;
  const char *names[] = {"v/Momentum"};
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names);
  c.mom.use_nesterov = 1;
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names);
}

Test(optimizers, adagrad) {
  optcase c = base_case(K_ADAGRAD, 0.2);
  const char *names[] = {"v/Adagrad"};
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names);
}

Test(optimizers, adam_bias_correction) {
  optcase c = base_case(K_ADAM, 0.01);
  const char *names[] = {"v/Adam", "v/Adam_1"};
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names); /* TF semantics: every row's moments decay */
  c.adam.lazy = 1;
  run_optcase(&c, 1, names);
  c = base_case(K_ADAM, 0.05);
  c.adam.beta1 = 0.5;
  c.adam.beta2 = 0.75;
  c.adam.epsilon = 0.1;
  run_optcase(&c, 0, names);
}

Test(optimizers, ftrl) {
  optcase c = base_case(K_FTRL, 0.3);
  const char *names[] = {"v/Ftrl", "v/Ftrl_1"};
  run_optcase(&c, 0, names);
  c.ftrl.l1 = 0.05;
  c.ftrl.l2 = 0.2;
  c.ftrl.l2_shrinkage = 0.1;
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names);
  c.ftrl.learning_rate_power = -0.7; /* the general pow() path */
  c.ftrl.initial_accumulator_value = 0.5;
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names);
}

Test(optimizers, rmsprop_plain_and_centered) {
  optcase c = base_case(K_RMS, 0.01);
  const char *names[] = {"v/RMSProp", "v/RMSProp_1"};
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names);
  c.rms.momentum = 0.5;
  c.rms.epsilon = 1e-3;
  run_optcase(&c, 0, names);
  c.rms.centered = 1;
  const char *cnames[] = {"v/RMSProp", "v/RMSProp_2", "v/RMSProp_1"};
  run_optcase(&c, 0, cnames);
  run_optcase(&c, 1, cnames);
}

/* Keras' RMSprop: the mean square starts at 0 (the reference starts it there too), plain, with momentum,
 * centered, dense and sparse. */
Test(optimizers, rmsprop_mean_square_from_zero) {
  optcase c = base_case(K_RMS, 0.01);
  c.rms.initial_rms_value = 0.0;
  c.rms.epsilon = 1e-7;
  const char *names[] = {"v/RMSProp", "v/RMSProp_1"};
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names);
  c.rms.momentum = 0.5;
  run_optcase(&c, 0, names);
  c.rms.centered = 1;
  const char *cnames[] = {"v/RMSProp", "v/RMSProp_2", "v/RMSProp_1"};
  run_optcase(&c, 0, cnames);
  run_optcase(&c, 1, cnames);
}

/* Keras' legacy RMSprop without momentum (the canned estimators'): epsilon outside the square root, and a
 * sparse update decays every row's mean square (and mean gradient); dense and sparse, plain and centered. */
Test(optimizers, rmsprop_keras_legacy) {
  optcase c = base_case(K_RMS, 0.01);
  c.rms.initial_rms_value = 0.0;
  c.rms.epsilon = 1e-3; /* large enough that its place shows */
  c.rms.keras_legacy = 1;
  const char *names[] = {"v/RMSProp", "v/RMSProp_1"};
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names);
  c.rms.centered = 1;
  const char *cnames[] = {"v/RMSProp", "v/RMSProp_2", "v/RMSProp_1"};
  run_optcase(&c, 0, cnames);
  run_optcase(&c, 1, cnames);
}

/* One step of TF 2.15's tf.keras.optimizers.legacy.RMSprop(0.1) (the canned estimators') from w = [1, -2]
 * with gradient [0.5, 0.25]: rms [0.025, 0.00625], w [0.68377244, -2.3162274]; the new Keras RMSprop's and
 * TF's kernel (epsilon 1e-7 inside the square root) give w[1] -2.31622529. A caller built before
 * initial_rms_value existed (a smaller struct_size) keeps TF 1's start, 1. */
static void rms_one_step(const loom_rmsprop_options *o, float w_out[2], float rms_out[2]) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {2};
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 1, d, (float[2]){1, -2}, "w0"), 1, 0, "w");
  loom_gradient gr = {loom_const_data(g, LOOM_F32, 1, d, (float[2]){0.5f, 0.25f}, "g"), {NULL, 0}};
  loom_optimizer *opt = loom_optimizer_rmsprop(loom_const_f32(g, 0.1f, "lr"), o);
  loom_node *train = loom_optimizer_apply_gradients(opt, g, 1, &gr, &v, NULL, NULL);
  cr_assert(train, "apply_gradients failed");
  loom_session *s = new_session(g);
  run_target(s, loom_global_variables_initializer(g), 0, NULL, NULL);
  run_target(s, train, 0, NULL, NULL);
  loom_tensor *wt = read_var(s, "w"), *rt = read_var(s, "w/RMSProp");
  memcpy(w_out, loom_tensor_data(wt), 2 * sizeof(float));
  memcpy(rms_out, loom_tensor_data(rt), 2 * sizeof(float));
  loom_tensor_free(wt);
  loom_tensor_free(rt);
  loom_session_free(s);
  loom_optimizer_free(opt);
  loom_graph_free(g);
}

Test(optimizers, rmsprop_from_zero_matches_tf2_keras_one_step) {
  loom_rmsprop_options o = loom_rmsprop_options_default();
  o.epsilon = 1e-7;
  o.initial_rms_value = 0.0;
  float w[2], rms[2];
  rms_one_step(&o, w, rms);
  cr_expect(fabs(rms[0] - 0.025) < 1e-7 && fabs(rms[1] - 0.00625) < 1e-8, "rms %.9g %.9g", rms[0], rms[1]);
  cr_expect(fabs(w[1] + 2.31622529) < 2e-7, "w %.9g %.9g", w[0], w[1]);
  o.keras_legacy = 1;
  rms_one_step(&o, w, rms);
  cr_expect(fabs(w[0] - 0.68377244) < 2e-7 && fabs(w[1] + 2.3162274) < 2e-7, "legacy: w %.9g %.9g", w[0], w[1]);
  o.keras_legacy = 0;
  o.struct_size = (uint32_t)offsetof(loom_rmsprop_options, initial_rms_value); /* an older caller */
  rms_one_step(&o, w, rms);
  cr_expect(fabs(rms[0] - 0.925) < 1e-6 && fabs(rms[1] - 0.90625) < 1e-6, "older caller: rms %.9g %.9g", rms[0],
            rms[1]);
}

Test(optimizers, adadelta) {
  optcase c = base_case(K_ADADELTA, 1.0);
  const char *names[] = {"v/Adadelta", "v/Adadelta_1"};
  run_optcase(&c, 0, names);
  run_optcase(&c, 1, names);
  c.add.epsilon = 1e-3;
  c.add.rho = 0.5;
  run_optcase(&c, 0, names);
}

Test(optimizers, errors) {
  char msg[512];
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_variable *v = loom_get_variable(g, "v", LOOM_F32, 1, d, NULL, 1);
  loom_optimizer *o = loom_optimizer_sgd(loom_const_f32(g, 0.1f, NULL));
  loom_gradient none = {{NULL, 0}, {NULL, 0}};
  cr_assert_null(loom_optimizer_apply_gradients(o, g, 1, &none, &v, NULL, NULL));
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "No gradients provided for any variable: [v]"), "%s", msg);
  loom_optimizer_free(o);
  loom_graph_free(g);

  g = loom_graph_new();
  v = loom_get_variable(g, "v", LOOM_F32, 1, d, NULL, 1);
  loom_adagrad_options ao = loom_adagrad_options_default();
  ao.initial_accumulator_value = 0.0;
  o = loom_optimizer_adagrad(loom_const_f32(g, 0.1f, NULL), &ao);
  loom_gradient gr = {loom_const_data(g, LOOM_F32, 1, d, (float[3]){1, 2, 3}, NULL), {NULL, 0}};
  cr_assert_null(loom_optimizer_apply_gradients(o, g, 1, &gr, &v, NULL, NULL));
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "initial_accumulator_value must be positive"), "%s", msg);
  loom_optimizer_free(o);
  loom_graph_free(g);

  g = loom_graph_new();
  v = loom_get_variable(g, "v", LOOM_F32, 1, d, NULL, 1);
  loom_rmsprop_options ro = loom_rmsprop_options_default();
  ro.initial_rms_value = -1.0;
  o = loom_optimizer_rmsprop(loom_const_f32(g, 0.1f, NULL), &ro);
  gr = (loom_gradient){loom_const_data(g, LOOM_F32, 1, d, (float[3]){1, 2, 3}, NULL), {NULL, 0}};
  cr_assert_null(loom_optimizer_apply_gradients(o, g, 1, &gr, &v, NULL, NULL));
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "RMSProp: initial_rms_value must be >= 0 and finite, got -1"), "%s", msg);
  loom_optimizer_free(o);
  loom_graph_free(g);

  g = loom_graph_new();
  v = loom_get_variable(g, "v", LOOM_F32, 1, d, NULL, 1);
  ro = loom_rmsprop_options_default();
  ro.keras_legacy = 1;
  ro.momentum = 0.5;
  o = loom_optimizer_rmsprop(loom_const_f32(g, 0.1f, NULL), &ro);
  gr = (loom_gradient){loom_const_data(g, LOOM_F32, 1, d, (float[3]){1, 2, 3}, NULL), {NULL, 0}};
  cr_assert_null(loom_optimizer_apply_gradients(o, g, 1, &gr, &v, NULL, NULL));
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "keras_legacy needs momentum 0"), "%s", msg);
  loom_optimizer_free(o);
  loom_graph_free(g);

  /* the sparse index range is checked at run time */
  g = loom_graph_new();
  int64_t vd[2] = {4, 2}, gd[2] = {2, 2}, id[1] = {2};
  loom_initializer z = loom_init_zeros();
  v = loom_get_variable(g, "emb", LOOM_F32, 2, vd, &z, 1);
  o = loom_optimizer_adagrad(loom_const_f32(g, 0.1f, NULL), NULL);
  loom_gradient sg = {loom_const_data(g, LOOM_F32, 2, gd, (float[4]){1, 1, 1, 1}, NULL),
                      loom_const_data(g, LOOM_I64, 1, id, (int64_t[2]){1, -1}, NULL)};
  loom_node *train = loom_optimizer_apply_gradients(o, g, 1, &sg, &v, NULL, "train");
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &train, 1, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "train/update_emb/SparseApplyAdagrad: indices[1] = -1 is not in [0, 4)"),
            "%s", loom_status_message(st));
  loom_status_free(st);
  loom_session_free(s);
  loom_optimizer_free(o);
  loom_graph_free(g);
}

Test(optimizers, large_variable_parallel) {
  /* big enough for loom__parallel_for to split: dense Adam and sparse Adagrad
   * against a direct computation */
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {1024, 256};
  int64_t n = d[0] * d[1];
  float *v0 = malloc(sizeof(float) * (size_t)n), *gv = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    v0[i] = (float)((i % 97) * 0.01 - 0.4);
    gv[i] = (float)((i % 89) * 0.02 - 0.7);
  }
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 2, d, v0, NULL), 1, 0, "big");
  loom_gradient gr = {loom_const_data(g, LOOM_F32, 2, d, gv, NULL), {NULL, 0}};
  loom_optimizer *o = loom_optimizer_adam(loom_const_f32(g, 0.001f, NULL), NULL);
  loom_node *train = loom_optimizer_apply_gradients(o, g, 1, &gr, &v, NULL, NULL);
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  run_target(s, train, 0, NULL, NULL);
  loom_tensor *t = read_var(s, "big");
  const float *p = loom_tensor_data(t);
  double alpha = 0.001 * sqrt(1 - 0.999) / (1 - 0.9);
  for (int64_t i = 0; i < n; i += 997) {
    double gg = gv[i], m = 0.1 * gg, vv = 0.001 * gg * gg;
    double want = v0[i] - alpha * m / (sqrt(vv) + 1e-8);
    cr_assert(fabs(p[i] - want) < 1e-5, "element %lld: %g vs %g", (long long)i, p[i], want);
  }
  loom_tensor_free(t);
  loom_session_free(s);
  loom_optimizer_free(o);
  free(v0);
  free(gv);
  loom_graph_free(g);
}

/* ======================================================================
 * Learning-rate schedules
 * ====================================================================== */
static double sched_at(loom_graph *g, loom_output lr, loom_output step_ph, int64_t step) {
  loom_session *s = new_session(g);
  loom_tensor *sv = loom_tensor_scalar_i64(step);
  loom_tensor *out = NULL;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, &step_ph, &sv, 1, &lr, &out, 1, NULL, 0, st), LOOM_OK, "%s",
               loom_status_message(st));
  double r = *(float *)loom_tensor_data(out);
  loom_tensor_free(out);
  loom_tensor_free(sv);
  loom_status_free(st);
  loom_session_free(s);
  return r;
}

Test(schedules, values_at_steps) {
  loom_graph *g = loom_graph_new();
  loom_output step = loom_placeholder(g, LOOM_I64, 0, NULL, "step");
  loom_output ed = loom_exponential_decay(g, 0.1, step, 100, 0.96, 0, "ed");
  loom_output eds = loom_exponential_decay(g, 0.1, step, 100, 0.96, 1, "eds");
  double b[2] = {100, 200}, vals[3] = {1.0, 0.5, 0.1};
  loom_output pc = loom_piecewise_constant(g, step, 2, b, vals, "pc");
  loom_output pd = loom_polynomial_decay(g, 0.1, step, 1000, 0.0001, 1.0, 0, "pd");
  loom_output pd2 = loom_polynomial_decay(g, 0.1, step, 1000, 0.01, 2.0, 0, "pd2");
  loom_output pdc = loom_polynomial_decay(g, 0.1, step, 1000, 0.01, 0.5, 1, "pdc");
  loom_output cd = loom_cosine_decay(g, 0.1, step, 1000, 0.1, "cd");
  int64_t steps[] = {0, 1, 50, 100, 101, 150, 200, 201, 999, 1000, 1500, 2500};
  for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
    double s = (double)steps[k];
    double tol = 1e-6;
    cr_assert(fabs(sched_at(g, ed, step, steps[k]) - 0.1 * pow(0.96, s / 100)) < tol);
    cr_assert(fabs(sched_at(g, eds, step, steps[k]) - 0.1 * pow(0.96, floor(s / 100))) < tol);
    double want_pc = s <= 100 ? 1.0 : s <= 200 ? 0.5 : 0.1;
    cr_assert(fabs(sched_at(g, pc, step, steps[k]) - want_pc) < tol, "pc at %g", s);
    double sc = s < 1000 ? s : 1000;
    cr_assert(fabs(sched_at(g, pd, step, steps[k]) - ((0.1 - 0.0001) * (1 - sc / 1000) + 0.0001)) < tol);
    cr_assert(fabs(sched_at(g, pd2, step, steps[k]) - ((0.1 - 0.01) * pow(1 - sc / 1000, 2) + 0.01)) < tol);
    double ds = 1000 * (s == 0 ? 1 : ceil(s / 1000));
    cr_assert(fabs(sched_at(g, pdc, step, steps[k]) - ((0.1 - 0.01) * pow(1 - s / ds, 0.5) + 0.01)) < tol,
              "pdc at %g", s);
    double cdv = 0.5 * (1 + cos(M_PI * sc / 1000));
    cr_assert(fabs(sched_at(g, cd, step, steps[k]) - 0.1 * (0.9 * cdv + 0.1)) < tol);
  }
  loom_graph_free(g);
}

Test(schedules, drives_sgd_from_global_step) {
  loom_graph *g = loom_graph_new();
  loom_variable *gs = loom_get_or_create_global_step(g);
  double b[1] = {1}, vals[2] = {1.0, 0.25};
  loom_output lr = loom_piecewise_constant(g, loom_variable_output(gs), 1, b, vals, NULL);
  float x0 = 10.0f;
  loom_variable *w = loom_variable_new(g, loom_const_f32(g, x0, NULL), 1, 0, "w");
  loom_gradient gr = {loom_const_f32(g, 1.0f, NULL), {NULL, 0}};
  loom_optimizer *o = loom_optimizer_sgd(lr);
  loom_node *train = loom_optimizer_apply_gradients(o, g, 1, &gr, &w, gs, NULL);
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  for (int i = 0; i < 4; i++) run_target(s, train, 0, NULL, NULL);
  /* steps 0 and 1 use 1.0, steps 2 and 3 use 0.25 */
  loom_tensor *t = read_var(s, "w");
  cr_assert_float_eq(*(float *)loom_tensor_data(t), 10.0f - 2.0f - 0.5f, 1e-6);
  loom_tensor_free(t);
  loom_session_free(s);
  loom_optimizer_free(o);
  loom_graph_free(g);
}

/* ======================================================================
 * Clipping
 * ====================================================================== */
Test(clipping, by_norm_and_global_norm) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {2}, d2[2] = {2, 2};
  loom_output a = loom_const_data(g, LOOM_F32, 1, d, (float[2]){3, 4}, "a");
  loom_output b = loom_const_data(g, LOOM_F32, 2, d2, (float[4]){1, 2, 2, 4}, "b");
  loom_output ca = loom_clip_by_norm(g, a, 1.0, NULL);
  loom_output ca2 = loom_clip_by_norm(g, a, 10.0, NULL);
  loom_output zero = loom_const_data(g, LOOM_F32, 1, d, (float[2]){0, 0}, "zero");
  loom_output cz = loom_clip_by_norm(g, zero, 1.0, NULL);
  loom_output in[3] = {a, {NULL, 0}, b}, out[3], gn;
  loom_clip_by_global_norm(g, 3, in, 2.0, out, &gn, NULL);
  loom_output out2[3], gn2;
  loom_clip_by_global_norm(g, 3, in, 100.0, out2, &gn2, NULL);
  loom_session *s = new_session(g);
  loom_tensor *t = fetch(s, ca);
  tu_expect_f32(t, 1, d, (float[2]){0.6f, 0.8f}, 1e-6);
  loom_tensor_free(t);
  t = fetch(s, ca2);
  tu_expect_f32(t, 1, d, (float[2]){3, 4}, 1e-6);
  loom_tensor_free(t);
  t = fetch(s, cz);
  tu_expect_f32(t, 1, d, (float[2]){0, 0}, 0);
  loom_tensor_free(t);
  /* global norm = sqrt(9 + 16 + 1 + 4 + 4 + 16) = sqrt(50) */
  t = fetch(s, gn);
  cr_assert_float_eq(*(float *)loom_tensor_data(t), sqrtf(50.0f), 1e-5);
  loom_tensor_free(t);
  cr_assert_null(out[1].node);
  double sc = 2.0 / sqrt(50.0);
  t = fetch(s, out[0]);
  tu_expect_f32(t, 1, d, (float[2]){(float)(3 * sc), (float)(4 * sc)}, 1e-6);
  loom_tensor_free(t);
  t = fetch(s, out[2]);
  tu_expect_f32(t, 2, d2, (float[4]){(float)sc, (float)(2 * sc), (float)(2 * sc), (float)(4 * sc)}, 1e-6);
  loom_tensor_free(t);
  t = fetch(s, out2[2]);
  tu_expect_f32(t, 2, d2, (float[4]){1, 2, 2, 4}, 1e-6);
  loom_tensor_free(t);
  loom_session_free(s);
  loom_graph_free(g);
}

/* ======================================================================
 * minimize (autodiff)
 * ====================================================================== */
Test(minimize, linear_model_sgd_matches_hand_gradient) {
  /* loss = sum((w * x + b - y)^2), w [3], b scalar */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  float x[3] = {1, 2, 3}, y[3] = {2, 3, 7};
  float w0[3] = {0.5f, -0.5f, 0.25f};
  loom_variable *w = loom_variable_new(g, loom_const_data(g, LOOM_F32, 1, d, w0, NULL), 1, 0, "w");
  loom_variable *b = loom_variable_new(g, loom_const_f32(g, 0.1f, NULL), 1, 0, "b");
  loom_output xo = loom_const_data(g, LOOM_F32, 1, d, x, "x"), yo = loom_const_data(g, LOOM_F32, 1, d, y, "y");
  loom_output pred = loom_add(g, loom_mul(g, loom_variable_output(w), xo, NULL), loom_variable_output(b), NULL);
  loom_output diff = loom_sub(g, pred, yo, NULL);
  loom_output loss = loom_reduce_sum(g, loom_square(g, diff, NULL), -1, NULL, 0, "loss");
  loom_variable *gs = loom_get_or_create_global_step(g);
  loom_optimizer *o = loom_optimizer_sgd(loom_const_f32(g, 0.01f, NULL));
  loom_node *train = loom_optimizer_minimize(o, g, loss, 0, NULL, gs, NULL);
  cr_assert(train);
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  double W[3] = {w0[0], w0[1], w0[2]}, B = 0.1;
  for (int step = 0; step < 3; step++) {
    run_target(s, train, 0, NULL, NULL);
    double gw[3], gb = 0;
    for (int i = 0; i < 3; i++) {
      double r = W[i] * x[i] + B - y[i];
      gw[i] = 2 * r * x[i];
      gb += 2 * r;
    }
    for (int i = 0; i < 3; i++) W[i] -= 0.01 * gw[i];
    B -= 0.01 * gb;
  }
  loom_tensor *t = read_var(s, "w");
  expect_close(loom_tensor_data(t), W, 3, 1e-5, "w");
  loom_tensor_free(t);
  t = read_var(s, "b");
  expect_close(loom_tensor_data(t), &B, 1, 1e-5, "b");
  loom_tensor_free(t);
  t = read_var(s, "global_step");
  cr_assert_eq(*(int64_t *)loom_tensor_data(t), 3);
  loom_tensor_free(t);
  loom_session_free(s);
  loom_optimizer_free(o);
  loom_graph_free(g);
}

Test(minimize, embedding_sparse_gradient_touches_only_rows) {
  loom_graph *g = loom_graph_new();
  int64_t ed[2] = {6, 2}, id[1] = {3};
  float e0[12];
  for (int i = 0; i < 12; i++) e0[i] = (float)i;
  loom_variable *emb = loom_variable_new(g, loom_const_data(g, LOOM_F32, 2, ed, e0, NULL), 1, 0, "emb");
  int32_t ids[3] = {4, 1, 4};
  loom_output rows = loom_gather(g, loom_variable_output(emb), loom_const_data(g, LOOM_I32, 1, id, ids, NULL), 0,
                                 NULL);
  loom_output loss = loom_reduce_sum(g, rows, -1, NULL, 0, "loss");
  loom_optimizer *o = loom_optimizer_adagrad(loom_const_f32(g, 0.5f, NULL), NULL);
  loom_node *train = loom_optimizer_minimize(o, g, loss, 0, NULL, NULL, "train");
  char msg[512];
  if (!train && graph_err(g, msg, sizeof msg) == LOOM_UNIMPLEMENTED && strstr(msg, "GatherV2"))
    cr_skip_test("GatherV2 has no gradient yet: %s", msg);
  cr_assert(train, "%s", (graph_err(g, msg, sizeof msg), msg));
  cr_assert(loom_graph_find(g, "train/update_emb/SparseApplyAdagrad"), "sparse kernel not used");
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  run_target(s, train, 0, NULL, NULL);
  loom_tensor *t = read_var(s, "emb");
  const float *p = loom_tensor_data(t);
  /* row 4 got gradient 2 (twice), row 1 got 1; accum starts at 0.1 */
  for (int r = 0; r < 6; r++)
    for (int j = 0; j < 2; j++) {
      double gr = r == 4 ? 2 : r == 1 ? 1 : 0;
      double want = e0[r * 2 + j] - (gr ? 0.5 * gr / sqrt(0.1 + gr * gr) : 0);
      cr_assert(fabs(p[r * 2 + j] - want) < 1e-6, "emb[%d,%d] = %g want %g", r, j, p[r * 2 + j], want);
    }
  loom_tensor_free(t);
  loom_session_free(s);
  loom_optimizer_free(o);
  loom_graph_free(g);
}

Test(optimizers, raw_apply_adam_nesterov) {
  /* TF's ApplyAdam with use_nesterov: var -= ((g*(1-b1) + b1*m) * alpha) / (sqrt(v) + eps) */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {4};
  float v0[4] = {1, -2, 0.5f, 3}, gv[4] = {0.3f, -0.1f, 2.0f, -1.5f};
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 1, d, v0, NULL), 1, 0, "v");
  loom_initializer z = loom_init_zeros();
  loom_variable *m = loom_get_variable(g, "m", LOOM_F32, 1, d, &z, 0);
  loom_variable *vv = loom_get_variable(g, "vv", LOOM_F32, 1, d, &z, 0);
  loom_output upd = loom_apply_adam(g, loom_variable_output(v), loom_variable_output(m), loom_variable_output(vv),
                                    loom_const_f32(g, 0.9f, NULL), loom_const_f32(g, 0.999f, NULL),
                                    loom_const_f32(g, 0.1f, NULL), loom_const_f32(g, 0.9f, NULL),
                                    loom_const_f32(g, 0.999f, NULL), loom_const_f32(g, 1e-3f, NULL),
                                    loom_const_data(g, LOOM_F32, 1, d, gv, NULL), 1, "adam");
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init, 0, NULL, NULL);
  loom_tensor *t = fetch(s, upd);
  double want[4], alpha = 0.1 * sqrt(1 - 0.999) / (1 - 0.9);
  for (int i = 0; i < 4; i++) {
    double mm = 0.1 * gv[i], v2 = 0.001 * gv[i] * gv[i];
    want[i] = v0[i] - ((gv[i] * 0.1 + 0.9 * mm) * alpha) / (sqrt(v2) + 1e-3);
  }
  expect_close(loom_tensor_data(t), want, 4, 1e-5, "nesterov adam");
  loom_tensor_free(t);
  loom_session_free(s);
  loom_graph_free(g);
}

/* A raw VariableV2 whose shape is past INT64_MAX / 16 elements (the limit
 * loom_tensor_new and the variable store enforce) fails the build naming the
 * dim, instead of overflowing the element count when a session plans it. */
Test(variables, raw_variable_huge_shape_names_the_dim) {
  char msg[512];
  int64_t big[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, max1[3] = {0, INT64_MAX, 2};
  loom_graph *g = loom_graph_new();
  loom_variable_v2(g, LOOM_F32, 2, big, "v");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT, "%s", msg);
  cr_assert(strstr(msg, "v: shape[1] = 1099511627776 is too large") == msg, "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_variable_v2(g, LOOM_I64, 3, max1, "w");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT, "%s", msg);
  cr_assert(strstr(msg, "w: shape[1] = 9223372036854775807 is too large") == msg, "%s", msg);
  loom_graph_free(g);
}

/* Every update of a step sees the step's pre-update values (TF's semantics:
 * gradients first, then the apply ops). The variables are created in the
 * reverse of their forward order (w2 before w1, then an embedding last), so
 * an in-place update of w2 or w1 scheduled before the gradient of w1 or of
 * the embedding (which read w2 and w1) would change those gradients. */
static loom_graph *war_model(loom_output *x, loom_output *ids, loom_output *y, loom_output *loss) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {4, 5}, yd[2] = {4, 1}, idd[1] = {4};
  *x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  *ids = loom_placeholder(g, LOOM_I64, 1, idd, "ids");
  *y = loom_placeholder(g, LOOM_F32, 2, yd, "y");
  loom_initializer i2 = loom_init_random_normal(0, 1, 7), i1 = loom_init_random_normal(0, 1, 8),
                   ie = loom_init_random_normal(0, 1, 9);
  loom_variable *w2 = loom_get_variable(g, "w2", LOOM_F32, 2, (int64_t[]){3, 1}, &i2, 1);
  loom_variable *w1 = loom_get_variable(g, "w1", LOOM_F32, 2, (int64_t[]){5, 3}, &i1, 1);
  loom_variable *emb = loom_get_variable(g, "emb", LOOM_F32, 2, (int64_t[]){10, 5}, &ie, 1);
  loom_output e = loom_gather(g, loom_variable_output(emb), *ids, 0, "lookup");
  loom_output h = loom_tanh(g, loom_matmul(g, loom_add(g, *x, e, NULL), loom_variable_output(w1), 0, 0, NULL), NULL);
  loom_output out = loom_matmul(g, h, loom_variable_output(w2), 0, 0, NULL);
  *loss = loom_reduce_mean(g, loom_square(g, loom_sub(g, out, *y, NULL), NULL), 0, NULL, 0, "loss");
  return g;
}

Test(optimizers, minimize_updates_see_pre_step_values) {
  loom_status *st = loom_status_new();
  float xv[20], yv[4];
  int64_t idv[4] = {3, 7, 3, 1};
  for (int i = 0; i < 20; i++) xv[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
  for (int i = 0; i < 4; i++) yv[i] = (float)i - 1.5f;
  loom_tensor *xt = tu_f32(2, (int64_t[]){4, 5}, xv), *yt = tu_f32(2, (int64_t[]){4, 1}, yv);
  loom_tensor *it = loom_tensor_new(LOOM_I64, 1, (int64_t[]){4}, st);
  memcpy(loom_tensor_data(it), idv, sizeof idv);
  const char *names[3] = {"w2", "w1", "emb"};
  float want[3][50], got[3][50];
  int64_t n[3] = {3, 15, 50};
  for (int pass = 0; pass < 2; pass++) {
    loom_output x, ids, y, loss;
    loom_graph *g = war_model(&x, &ids, &y, &loss);
    loom_output feeds[3] = {x, ids, y};
    loom_tensor *fv[3] = {xt, it, yt};
    loom_node *train = NULL;
    loom_output xs[3], gr[3];
    for (int q = 0; q < 3; q++) xs[q] = loom_variable_output(loom_graph_variable(g, names[q]));
    if (pass == 1) train = loom_optimizer_minimize(loom_optimizer_sgd(loom_const_f32(g, 0.5f, "lr")), g, loss, 0,
                                                   NULL, NULL, NULL);
    else cr_assert_eq(loom_gradients(g, 1, &loss, NULL, 3, xs, gr, st), LOOM_OK, "%s", loom_status_message(st));
    loom_node *init = loom_global_variables_initializer(g);
    loom_session *s = new_session(g);
    run_target(s, init, 0, NULL, NULL);
    loom_tensor *gt[3] = {0};
    if (pass == 0)
      cr_assert_eq(loom_session_run(s, feeds, fv, 3, gr, gt, 3, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
    else
      run_target(s, train, 3, feeds, fv);
    for (int q = 0; q < 3; q++) {
      loom_tensor *v = read_var(s, names[q]);
      const float *vd = loom_tensor_data(v);
      for (int k = 0; k < n[q]; k++) {
        if (pass == 0) want[q][k] = vd[k] - 0.5f * ((const float *)loom_tensor_data(gt[q]))[k];
        else got[q][k] = vd[k];
      }
      loom_tensor_free(v);
      loom_tensor_free(gt[q]);
    }
    loom_session_free(s);
    loom_graph_free(g);
  }
  for (int q = 0; q < 3; q++)
    for (int k = 0; k < n[q]; k++)
      cr_assert_float_eq(got[q][k], want[q][k], 1e-6, "%s[%d]: minimize %.7g, gradients-then-SGD %.7g", names[q], k,
                         got[q][k], want[q][k]);
  loom_tensor_free(xt);
  loom_tensor_free(yt);
  loom_tensor_free(it);
  loom_status_free(st);
}

/* ======================================================================
 * The optimizer ops' gradient scale (loom_apply_set_gradient_scale): an
 * update with scale s reads grad * s, the bits of the same update fed
 * grad * s computed beforehand (dense: for every s; sparse with a repeated
 * index: the kernel sums the rows and scales the sum, so the bits for a
 * power of two and within float rounding otherwise). Every optimizer, dense
 * and sparse; 4 steps; every variable and slot compared.
 * ====================================================================== */
#define GS_R 37
#define GS_C 9
#define GS_N 16 /* sparse rows, repeated indices among them */
typedef struct scale_case {
  const char *name;
  optcase c;
  int raw_adam_nesterov; /* ApplyAdam with use_nesterov (no optimizer object makes it) */
} scale_case;

typedef struct scale_graph {
  loom_graph *g;
  loom_node *train;
  loom_output grad;
  loom_optimizer *opt;
  loom_session *s;
  int napply;
} scale_graph;

static void scale_graph_new(scale_graph *sg, const scale_case *k, int sparse, float scale) {
  memset(sg, 0, sizeof *sg);
  loom_graph *g = sg->g = loom_graph_new();
  int64_t vd[2] = {GS_R, GS_C}, gd[2] = {sparse ? GS_N : GS_R, GS_C}, idd[1] = {GS_N};
  static float v0[GS_R * GS_C];
  for (int i = 0; i < GS_R * GS_C; i++) v0[i] = (float)(0.3 * sin(0.7 * i + 0.2) + 0.01 * (i % 17));
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 2, vd, v0, "v0"), 1, 0, "v");
  loom_output lr = loom_const_f32(g, (float)k->c.lr, "lr");
  sg->grad = loom_placeholder(g, LOOM_F32, 2, gd, "grad");
  if (k->raw_adam_nesterov) {
    loom_initializer z = loom_init_zeros();
    loom_variable *m = loom_get_variable(g, "m", LOOM_F32, 2, vd, &z, 0);
    loom_variable *vv = loom_get_variable(g, "vv", LOOM_F32, 2, vd, &z, 0);
    loom_output upd = loom_apply_adam(g, loom_variable_output(v), loom_variable_output(m), loom_variable_output(vv),
                                      loom_const_f32(g, 0.9f, NULL), loom_const_f32(g, 0.999f, NULL), lr,
                                      loom_const_f32(g, 0.9f, NULL), loom_const_f32(g, 0.999f, NULL),
                                      loom_const_f32(g, 1e-3f, NULL), sg->grad, 1, "adam");
    sg->train = upd.node;
  } else {
    static const int32_t idx[GS_N] = {0, 5, 36, 5, 12, 0, 7, 20, 5, 33, 1, 12, 2, 3, 36, 9};
    loom_gradient gr = {sg->grad, {NULL, 0}};
    if (sparse) gr.indices = loom_const_data(g, LOOM_I32, 1, idd, idx, "idx");
    sg->opt = make_opt(&k->c, lr);
    sg->train = loom_optimizer_apply_gradients(sg->opt, g, 1, &gr, &v, NULL, "train");
  }
  cr_assert(sg->train, "%s: building the update failed", k->name);
  /* every optimizer op of the graph gets the scale */
  loom_status *st = loom_status_new();
  for (int i = 0; scale != 1.0f && loom_graph_node_at(g, i); i++) {
    loom_node *n = loom_graph_node_at(g, i);
    const char *op = loom_node_op_name(n);
    if (strncmp(op, "Apply", 5) && strncmp(op, "SparseApply", 11)) continue;
    cr_assert_eq(loom_apply_set_gradient_scale(n, scale, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert_eq(loom_apply_gradient_scale(n), scale);
    sg->napply++;
  }
  loom_status_free(st);
  if (scale != 1.0f) cr_assert_eq(sg->napply, 1, "%s: %d optimizer ops", k->name, sg->napply);
  loom_node *init = loom_global_variables_initializer(g);
  sg->s = new_session(g);
  run_target(sg->s, init, 0, NULL, NULL);
}

static void scale_graph_free(scale_graph *sg) {
  loom_session_free(sg->s);
  if (sg->opt) loom_optimizer_free(sg->opt);
  loom_graph_free(sg->g);
}

/* a: the scaled op fed grad, b: the plain op fed grad * scale; tol 0: the same bits */
static void scale_case_run(const scale_case *k, int sparse, float scale, double tol) {
  scale_graph a, b;
  scale_graph_new(&a, k, sparse, scale);
  scale_graph_new(&b, k, sparse, 1.0f);
  int64_t gd[2] = {sparse ? GS_N : GS_R, GS_C};
  int n = (int)(gd[0] * gd[1]);
  float gv[GS_R * GS_C], gsv[GS_R * GS_C];
  for (int t = 1; t <= 4; t++) {
    for (int i = 0; i < n; i++) {
      gv[i] = (float)(0.7 * sin(1.3 * i + t) + 0.2 * cos(0.37 * i * t) + 0.05 * t);
      gsv[i] = gv[i] * scale;
    }
    loom_tensor *ga = tu_f32(2, gd, gv), *gb = tu_f32(2, gd, gsv);
    run_target(a.s, a.train, 1, &a.grad, &ga);
    run_target(b.s, b.train, 1, &b.grad, &gb);
    loom_tensor_free(ga);
    loom_tensor_free(gb);
    int nv = 0;
    loom_variable *const *vars = loom_global_variables(a.g, &nv);
    cr_assert(nv >= 1);
    for (int j = 0; j < nv; j++) {
      const char *name = loom_variable_name(vars[j]);
      loom_tensor *ta = read_var(a.s, name), *tb = read_var(b.s, name);
      cr_assert_eq(loom_tensor_numel(ta), loom_tensor_numel(tb));
      const float *pa = loom_tensor_data(ta), *pb = loom_tensor_data(tb);
      for (int64_t e = 0; e < loom_tensor_numel(ta); e++) {
        if (tol == 0)
          cr_assert(!memcmp(&pa[e], &pb[e], sizeof(float)),
                    "%s, %s, scale %g, step %d: %s[%lld] = %.9g with the scale, %.9g fed grad * scale", k->name,
                    sparse ? "sparse" : "dense", (double)scale, t, name, (long long)e, (double)pa[e], (double)pb[e]);
        else
          cr_assert(fabs((double)pa[e] - pb[e]) <= tol * (1.0 + fabs((double)pb[e])),
                    "%s, %s, scale %g, step %d: %s[%lld] = %.9g with the scale, %.9g fed grad * scale", k->name,
                    sparse ? "sparse" : "dense", (double)scale, t, name, (long long)e, (double)pa[e], (double)pb[e]);
      }
      loom_tensor_free(ta);
      loom_tensor_free(tb);
    }
  }
  scale_graph_free(&a);
  scale_graph_free(&b);
}

static int scale_cases(scale_case *k) {
  int n = 0;
  k[n++] = (scale_case){"sgd", base_case(K_SGD, 0.1), 0};
  k[n] = (scale_case){"momentum", base_case(K_MOM, 0.1), 0};
  k[n++].c.mom.momentum = 0.9;
  k[n] = (scale_case){"momentum nesterov", base_case(K_MOM, 0.1), 0};
  k[n].c.mom.momentum = 0.9;
  k[n++].c.mom.use_nesterov = 1;
  k[n++] = (scale_case){"adagrad", base_case(K_ADAGRAD, 0.2), 0};
  k[n++] = (scale_case){"adam", base_case(K_ADAM, 0.01), 0};
  k[n] = (scale_case){"lazy adam", base_case(K_ADAM, 0.01), 0};
  k[n++].c.adam.lazy = 1;
  k[n++] = (scale_case){"ftrl", base_case(K_FTRL, 0.1), 0};
  k[n] = (scale_case){"ftrl power -0.7 l1 l2 shrinkage", base_case(K_FTRL, 0.1), 0};
  k[n].c.ftrl.learning_rate_power = -0.7;
  k[n].c.ftrl.l1 = 0.01;
  k[n].c.ftrl.l2 = 0.2;
  k[n++].c.ftrl.l2_shrinkage = 0.1;
  k[n++] = (scale_case){"rmsprop", base_case(K_RMS, 0.01), 0};
  k[n] = (scale_case){"centered rmsprop momentum", base_case(K_RMS, 0.01), 0};
  k[n].c.rms.momentum = 0.5;
  k[n++].c.rms.centered = 1;
  k[n] = (scale_case){"rmsprop keras legacy", base_case(K_RMS, 0.01), 0};
  k[n].c.rms.initial_rms_value = 0.0;
  k[n].c.rms.epsilon = 1e-3;
  k[n++].c.rms.keras_legacy = 1;
  k[n] = (scale_case){"centered rmsprop keras legacy", base_case(K_RMS, 0.01), 0};
  k[n].c.rms.initial_rms_value = 0.0;
  k[n].c.rms.keras_legacy = 1;
  k[n++].c.rms.centered = 1;
  k[n++] = (scale_case){"adadelta", base_case(K_ADADELTA, 1.0), 0};
  return n;
}

Test(optimizers, gradient_scale_matches_prescaled_gradient) {
  scale_case k[16];
  int n = scale_cases(k);
  for (int i = 0; i < n; i++)
    for (int sparse = 0; sparse < 2; sparse++) {
      if (!sparse && k[i].c.kind == K_ADAM && k[i].c.adam.lazy) continue; /* lazy is sparse only */
      scale_case_run(&k[i], sparse, 0.5f, 0);
      scale_case_run(&k[i], sparse, 0.25f, 0);
      /* 1/3: dense the same bits; sparse sums a repeated index's rows before the scale */
      scale_case_run(&k[i], sparse, 1.0f / 3.0f, sparse ? 1e-5 : 0);
      scale_case_run(&k[i], sparse, 3.0f, sparse ? 1e-5 : 0);
    }
  scale_case raw = {"adam nesterov (raw ApplyAdam)", base_case(K_ADAM, 0.01), 1};
  scale_case_run(&raw, 0, 0.5f, 0);
  scale_case_run(&raw, 0, 1.0f / 3.0f, 0);
}

Test(optimizers, gradient_scale_one_and_errors) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 1, d, (float[3]){1, 2, 3}, NULL), 1, 0, "v");
  loom_output delta = loom_const_data(g, LOOM_F32, 1, d, (float[3]){0.5f, -1, 2}, "delta");
  loom_output upd = loom_apply_gradient_descent(g, loom_variable_output(v), loom_const_f32(g, 0.1f, NULL), delta, "gd");
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_apply_gradient_scale(upd.node), 1.0f);
  cr_assert_eq(loom_apply_gradient_scale(delta.node), 1.0f); /* not an optimizer op */
  cr_assert_eq(loom_apply_set_gradient_scale(delta.node, 0.5f, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "delta") && strstr(loom_status_message(st), "not an optimizer op"), "%s",
            loom_status_message(st));
  cr_assert_eq(loom_apply_set_gradient_scale(NULL, 0.5f, st), LOOM_INVALID_ARGUMENT);
  const float bad[4] = {0.0f, -0.5f, INFINITY, NAN};
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(loom_apply_set_gradient_scale(upd.node, bad[i], st), LOOM_INVALID_ARGUMENT, "scale %g",
                 (double)bad[i]);
    cr_assert(strstr(loom_status_message(st), "gd") && strstr(loom_status_message(st), "finite number > 0"), "%s",
              loom_status_message(st));
    cr_assert_eq(loom_apply_gradient_scale(upd.node), 1.0f, "a rejected scale is not kept");
  }
  /* a serialized graph keeps the scale */
  cr_assert_eq(loom_apply_set_gradient_scale(upd.node, 2.0f, st), LOOM_OK);
  cr_assert_eq(loom_apply_gradient_scale(upd.node), 2.0f);
  void *buf = NULL;
  size_t size = 0;
  cr_assert_eq(loom_graph_serialize(g, 1, &upd.node, &buf, &size, st), LOOM_OK, "%s", loom_status_message(st));
  loom_graph *g2 = loom_graph_new();
  cr_assert_eq(loom_graph_deserialize(g2, buf, size, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_apply_gradient_scale(loom_graph_find(g2, "gd")), 2.0f);
  loom_graph_free(g2);
  loom_buffer_free(buf);
  /* 1 is the default: the same update */
  cr_assert_eq(loom_apply_set_gradient_scale(upd.node, 1.0f, st), LOOM_OK);
  cr_assert_eq(loom_apply_gradient_scale(upd.node), 1.0f);
  loom_session *s = new_session(g);
  run_target(s, loom_global_variables_initializer(g), 0, NULL, NULL);
  loom_tensor *t = fetch(s, upd);
  const float *p = loom_tensor_data(t);
  const float want[3] = {1 - 0.1f * 0.5f, 2 - 0.1f * -1.0f, 3 - 0.1f * 2.0f};
  for (int i = 0; i < 3; i++) cr_assert(!memcmp(&p[i], &want[i], sizeof(float)), "v[%d] = %.9g", i, (double)p[i]);
  loom_tensor_free(t);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}
