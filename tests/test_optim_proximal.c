/* ProximalGradientDescent, ProximalAdagrad and AdagradDA (tf.compat.v1.train's optimizers and TF's
 * Apply and SparseApply kernels): one-step values computed by hand, several steps dense and sparse (a repeated
 * index summed first, as tf.train.Optimizer does) against TF's formulas in double, slot names, the
 * gradient scale, and the errors. */
#include "optim_case.h"

enum { K_PGD, K_PADAGRAD, K_DA };

typedef struct pcase {
  int kind;
  double lr, l1, l2, init; /* init: the (squared) accumulator's initial value */
} pcase;

static loom_optimizer *make_opt(const pcase *c, loom_output lr) {
  switch (c->kind) {
  case K_PGD: {
    loom_proximal_gradient_descent_options o = loom_proximal_gradient_descent_options_default();
    o.l1 = c->l1;
    o.l2 = c->l2;
    return loom_optimizer_proximal_gradient_descent(lr, &o);
  }
  case K_PADAGRAD: {
    loom_proximal_adagrad_options o = loom_proximal_adagrad_options_default();
    o.initial_accumulator_value = c->init;
    o.l1 = c->l1;
    o.l2 = c->l2;
    return loom_optimizer_proximal_adagrad(lr, &o);
  }
  default: {
    loom_adagrad_da_options o = loom_adagrad_da_options_default();
    o.initial_gradient_squared_accumulator_value = c->init;
    o.l1 = c->l1;
    o.l2 = c->l2;
    return loom_optimizer_adagrad_da(lr, &o);
  }
  }
}

static double sgn(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

/* TF's update of one element in double; s0, s1: the slots; t: the 1-based step (AdagradDA's T) */
static void ref_elem(const pcase *c, double *v, double *s0, double *s1, double g, int t) {
  double lr = c->lr, l1 = c->l1, l2 = c->l2;
  switch (c->kind) {
  case K_PGD: {
    double p = *v - lr * g;
    *v = l1 > 0 ? sgn(p) * fmax(fabs(p) - lr * l1, 0) / (1 + lr * l2) : p / (1 + lr * l2);
    break;
  }
  case K_PADAGRAD: {
    *s0 += g * g;
    double r = lr / sqrt(*s0), p = *v - r * g;
    *v = l1 > 0 ? sgn(p) * fmax(fabs(p) - r * l1, 0) / (1 + r * l2) : p / (1 + r * l2);
    break;
  }
  default:
    *s0 += g;
    *s1 += g * g;
    *v = -sgn(*s0) * lr * fmax(fabs(*s0) - (l1 > 0 ? t * l1 : 0), 0) / (l2 * t * lr + sqrt(*s1));
    break;
  }
}

static const char *const SLOTS[3][2] = {{NULL, NULL},
                                        {"accumulator", NULL},
                                        {"gradient_accumulator", "gradient_squared_accumulator"}};
static const char *const SLOT_VARS[3][2] = {
    {NULL, NULL}, {"v/ProximalAdagrad", NULL}, {"v/AdagradDA", "v/AdagradDA_1"}};

static loom_tensor *read_var(loom_session *s, const char *name) {
  loom_status *st = loom_status_new();
  loom_tensor *t = NULL;
  cr_assert_eq(loom_session_read_variable(s, name, &t, st), LOOM_OK, "read %s: %s", name, loom_status_message(st));
  loom_status_free(st);
  return t;
}

static void run(loom_session *s, loom_node *t, int nfeeds, const loom_output *feeds, loom_tensor *const *vals) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, feeds, vals, nfeeds, NULL, NULL, 0, &t, 1, st), LOOM_OK, "run: %s",
               loom_status_message(st));
  loom_status_free(st);
}

static void expect_close(const float *got, const double *want, int n, double tol, const char *what) {
  for (int i = 0; i < n; i++)
    cr_assert(fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs(want[i])), "%s[%d]: got %.9g want %.9g", what, i,
              (double)got[i], want[i]);
}

/* 4 steps of c on a [5, 3] variable; sparse: indices SP_IDX; scale: the apply op's gradient scale */
static void run_case(const pcase *c, int sparse, float scale) {
  optim_case_graph o = optim_case_graph_new(c->lr, sparse);
  loom_graph *g = o.g;
  loom_variable *v = o.v, *gs = o.global_step;
  loom_gradient grad = o.grad;
  loom_optimizer *opt = make_opt(c, o.lr);
  loom_node *train = loom_optimizer_apply_gradients(opt, g, 1, &grad, &v, gs, NULL);
  cr_assert(train, "apply_gradients failed");
  if (scale != 1.0f) { /* the one optimizer op of the graph gets the scale */
    int napply = 0;
    loom_status *st = loom_status_new();
    for (int i = 0; loom_graph_node_at(g, i); i++) {
      loom_node *n = loom_graph_node_at(g, i);
      const char *op = loom_node_op_name(n);
      if (strncmp(op, "Apply", 5) && strncmp(op, "SparseApply", 11)) continue;
      cr_assert_eq(loom_apply_set_gradient_scale(n, scale, st), LOOM_OK, "%s", loom_status_message(st));
      cr_assert_eq(loom_apply_gradient_scale(n), scale);
      napply++;
    }
    loom_status_free(st);
    cr_assert_eq(napply, 1);
  }
  int ns = c->kind == K_PGD ? 0 : c->kind == K_PADAGRAD ? 1 : 2;
  for (int k = 0; k < ns; k++) {
    loom_variable *sl = loom_optimizer_get_slot(opt, v, SLOTS[c->kind][k]);
    cr_assert(sl, "slot %s missing", SLOTS[c->kind][k]);
    cr_assert_str_eq(loom_variable_name(sl), SLOT_VARS[c->kind][k]);
    cr_assert_eq(loom_variable_trainable(sl), 0);
  }
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "graph: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "%s", loom_status_message(st));
  loom_status_free(st);
  run(s, loom_global_variables_initializer(g), 0, NULL, NULL);
  double rv[NEL], r0[NEL], r1[NEL];
  for (int i = 0; i < NEL; i++) {
    rv[i] = o.v0[i];
    r0[i] = c->kind == K_PADAGRAD ? c->init : 0.0;
    r1[i] = c->kind == K_DA ? c->init : 0.0;
  }
  for (int t = 1; t <= 4; t++) {
    float gv[NEL];
    int n = sparse ? SP_N * COLS : NEL;
    for (int i = 0; i < n; i++) gv[i] = (float)(0.5 * sin(1.3 * i + t) + 0.1 * t - 0.15);
    loom_tensor *gt = tu_f32(2, o.gd, gv);
    run(s, train, 1, &grad.values, &gt);
    loom_tensor_free(gt);
    double dense[NEL] = {0};
    int touched[ROWS] = {0};
    if (!sparse) {
      for (int i = 0; i < NEL; i++) dense[i] = gv[i];
      for (int r = 0; r < ROWS; r++) touched[r] = 1;
    } else {
      for (int k = 0; k < SP_N; k++) {
        touched[SP_IDX[k]] = 1;
        for (int j = 0; j < COLS; j++) dense[SP_IDX[k] * COLS + j] += gv[k * COLS + j];
      }
    }
    for (int r = 0; r < ROWS; r++)
      for (int j = 0; j < COLS && touched[r]; j++) {
        int i = r * COLS + j;
        ref_elem(c, &rv[i], &r0[i], &r1[i], dense[i] * scale, t);
      }
    char what[96];
    snprintf(what, sizeof what, "kind %d sparse %d scale %g step %d var", c->kind, sparse, scale, t);
    loom_tensor *vt = read_var(s, "v");
    expect_close(loom_tensor_data(vt), rv, NEL, 2e-5, what);
    loom_tensor_free(vt);
    for (int k = 0; k < ns; k++) {
      loom_tensor *slt = read_var(s, SLOT_VARS[c->kind][k]);
      snprintf(what, sizeof what, "kind %d sparse %d step %d slot %s", c->kind, sparse, t, SLOTS[c->kind][k]);
      expect_close(loom_tensor_data(slt), k ? r1 : r0, NEL, 2e-5, what);
      loom_tensor_free(slt);
    }
  }
  loom_tensor *step = read_var(s, "global_step");
  cr_assert_eq(*(int64_t *)loom_tensor_data(step), 4);
  loom_tensor_free(step);
  loom_session_free(s);
  loom_optimizer_free(opt);
  loom_graph_free(g);
}

static void run_all(int kind, double lr, double init) {
  const double l1s[3] = {0.0, 0.03, 0.0}, l2s[3] = {0.0, 0.2, 0.5};
  for (int k = 0; k < 3; k++) {
    pcase c = {kind, lr, l1s[k], l2s[k], init};
    run_case(&c, 0, 1.0f);
    run_case(&c, 1, 1.0f);
  }
}

Test(proximal, gradient_descent_dense_and_sparse) { run_all(K_PGD, 0.3, 0); }
Test(proximal, adagrad_dense_and_sparse) { run_all(K_PADAGRAD, 0.2, 0.1); }
Test(proximal, adagrad_da_dense_and_sparse) { run_all(K_DA, 0.1, 0.1); }

/* l1 large enough to zero some elements (the max(., 0)) */
Test(proximal, l1_zeroes_small_weights) {
  pcase a = {K_PGD, 0.5, 0.4, 0.1, 0};
  run_case(&a, 0, 1.0f);
  run_case(&a, 1, 1.0f);
  pcase b = {K_PADAGRAD, 0.5, 0.5, 0.0, 0.1};
  run_case(&b, 0, 1.0f);
  pcase d = {K_DA, 0.1, 0.6, 0.1, 0.1};
  run_case(&d, 0, 1.0f);
  run_case(&d, 1, 1.0f);
}

Test(proximal, gradient_scale_reads_the_scaled_gradient) {
  for (int kind = K_PGD; kind <= K_DA; kind++) {
    pcase c = {kind, 0.2, 0.02, 0.1, 0.1};
    run_case(&c, 0, 0.25f);
    run_case(&c, 1, 0.25f);
  }
}

/* One step on a one-element variable, values worked out by hand from TF's formulas. */
static float one_step(const pcase *c, float v0, const float *grads, int nsteps, float *slot0) {
  loom_graph *g = loom_graph_new();
  int64_t d1[1] = {1};
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 1, d1, &v0, "v0"), 1, 0, "v");
  loom_gradient grad = {{NULL, 0}, {NULL, 0}};
  grad.values = loom_placeholder(g, LOOM_F32, 1, d1, "grad");
  loom_optimizer *opt = make_opt(c, loom_const_f32(g, (float)c->lr, "lr"));
  loom_node *train = loom_optimizer_apply_gradients(opt, g, 1, &grad, &v, loom_get_or_create_global_step(g), NULL);
  cr_assert(train);
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "%s", loom_status_message(st));
  loom_status_free(st);
  run(s, loom_global_variables_initializer(g), 0, NULL, NULL);
  for (int k = 0; k < nsteps; k++) {
    loom_tensor *gt = tu_f32(1, d1, &grads[k]);
    run(s, train, 1, &grad.values, &gt);
    loom_tensor_free(gt);
  }
  loom_tensor *t = read_var(s, "v");
  float r = *(float *)loom_tensor_data(t);
  loom_tensor_free(t);
  if (slot0) {
    t = read_var(s, loom_variable_name(loom_optimizer_get_slot(opt, v, SLOTS[c->kind][0])));
    *slot0 = *(float *)loom_tensor_data(t);
    loom_tensor_free(t);
  }
  loom_session_free(s);
  loom_optimizer_free(opt);
  loom_graph_free(g);
  return r;
}

Test(proximal, hand_computed_steps) {
  float g2 = 2.0f, g3 = 0.3f, gda[2] = {0.5f, -0.2f}, acc = 0;
  /* prox = 1 - 0.1 * 2 = 0.8; (0.8 - 0.1 * 0.5) / (1 + 0.1 * 1) = 0.75 / 1.1 */
  pcase a = {K_PGD, 0.1, 0.5, 1.0, 0};
  cr_assert_float_eq(one_step(&a, 1.0f, &g2, 1, NULL), 0.6818181818f, 1e-6);
  pcase a0 = {K_PGD, 0.1, 0.0, 1.0, 0}; /* 0.8 / 1.1 */
  cr_assert_float_eq(one_step(&a0, 1.0f, &g2, 1, NULL), 0.7272727273f, 1e-6);
  pcase az = {K_PGD, 0.1, 0.5, 0.0, 0}; /* |0.02 - 0| < 0.05: zero */
  float g0 = 0.0f;
  cr_assert_eq(one_step(&az, 0.02f, &g0, 1, NULL), 0.0f);
  /* accum = 0.1 + 0.09 = 0.19; r = 0.1 / sqrt(0.19); prox = 1 - 0.3 r; (prox - 0.2 r) / (1 + 0.5 r) */
  pcase b = {K_PADAGRAD, 0.1, 0.2, 0.5, 0.1};
  cr_assert_float_eq(one_step(&b, 1.0f, &g3, 1, &acc), 0.7941920563f, 1e-6);
  cr_assert_float_eq(acc, 0.19f, 1e-7);
  pcase b0 = {K_PADAGRAD, 0.1, 0.0, 0.5, 0.1}; /* prox / (1 + 0.5 r) */
  cr_assert_float_eq(one_step(&b0, 1.0f, &g3, 1, NULL), 0.8353536451f, 1e-6);
  /* ga = 0.5, gg = 0.1 + 0.25; T = 1: -0.1 * (0.5 - 0.01) / (0.2 * 1 * 0.1 + sqrt(0.35)) */
  pcase d = {K_DA, 0.1, 0.01, 0.2, 0.1};
  cr_assert_float_eq(one_step(&d, 7.0f, gda, 1, &acc), -0.08011667888f, 1e-6);
  cr_assert_float_eq(acc, 0.5f, 1e-7);
  pcase d0 = {K_DA, 0.1, 0.0, 0.2, 0.1}; /* -0.1 * 0.5 / (0.02 + sqrt(0.35)) */
  cr_assert_float_eq(one_step(&d0, 7.0f, gda, 1, NULL), -0.08175171315f, 1e-6);
  /* step 2, T = 2: ga = 0.3, gg = 0.39: -0.1 * (0.3 - 2 * 0.01) / (0.2 * 2 * 0.1 + sqrt(0.39)) */
  cr_assert_float_eq(one_step(&d, 7.0f, gda, 2, NULL), -0.04213695776f, 1e-6);
}

static void expect_graph_error(loom_graph *g, const char *needle) {
  loom_status *st = loom_status_new();
  cr_assert_neq(loom_graph_status(g, st), LOOM_OK);
  cr_assert(strstr(loom_status_message(st), needle), "message: %s", loom_status_message(st));
  loom_status_free(st);
}

Test(proximal, errors) {
  /* AdagradDA reads the global step */
  loom_graph *g = loom_graph_new();
  int64_t d1[1] = {2};
  float z[2] = {0, 0};
  loom_variable *v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 1, d1, z, "v0"), 1, 0, "v");
  loom_gradient grad = {{NULL, 0}, {NULL, 0}};
  grad.values = loom_const_data(g, LOOM_F32, 1, d1, z, "grad");
  loom_optimizer *o = loom_optimizer_adagrad_da(loom_const_f32(g, 0.1f, "lr"), NULL);
  cr_assert_null(loom_optimizer_apply_gradients(o, g, 1, &grad, &v, NULL, NULL));
  expect_graph_error(g, "AdagradDA needs global_step");
  loom_optimizer_free(o);
  loom_graph_free(g);

  /* ProximalAdagrad's accumulator must start positive */
  g = loom_graph_new();
  v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 1, d1, z, "v0"), 1, 0, "v");
  grad.values = loom_const_data(g, LOOM_F32, 1, d1, z, "grad");
  loom_proximal_adagrad_options po = loom_proximal_adagrad_options_default();
  po.initial_accumulator_value = 0.0;
  o = loom_optimizer_proximal_adagrad(loom_const_f32(g, 0.1f, "lr"), &po);
  cr_assert_null(loom_optimizer_apply_gradients(o, g, 1, &grad, &v, NULL, NULL));
  expect_graph_error(g, "initial_accumulator_value must be positive");
  loom_optimizer_free(o);
  loom_graph_free(g);

  /* negative regularization strengths */
  g = loom_graph_new();
  v = loom_variable_new(g, loom_const_data(g, LOOM_F32, 1, d1, z, "v0"), 1, 0, "v");
  grad.values = loom_const_data(g, LOOM_F32, 1, d1, z, "grad");
  loom_proximal_gradient_descent_options pg = loom_proximal_gradient_descent_options_default();
  pg.l2 = -0.5;
  o = loom_optimizer_proximal_gradient_descent(loom_const_f32(g, 0.1f, "lr"), &pg);
  cr_assert_null(loom_optimizer_apply_gradients(o, g, 1, &grad, &v, NULL, NULL));
  expect_graph_error(g, "ProximalGradientDescent: l2_regularization_strength must be >= 0, got -0.5");
  loom_optimizer_free(o);
  loom_graph_free(g);

  /* the raw op: a float global step, and a hyperparameter that is not a scalar */
  g = loom_graph_new();
  loom_output var = loom_variable_v2(g, LOOM_F32, 1, d1, "w");
  loom_output ga = loom_variable_v2(g, LOOM_F32, 1, d1, "ga"), gg = loom_variable_v2(g, LOOM_F32, 1, d1, "gg");
  loom_output f = loom_const_f32(g, 1.0f, "f");
  loom_apply_adagrad_da(g, var, ga, gg, loom_const_data(g, LOOM_F32, 1, d1, z, "gr"), f, f, f, f, "da");
  expect_graph_error(g, "global_step must be an int32 or int64 scalar");
  loom_graph_free(g);
  g = loom_graph_new();
  var = loom_variable_v2(g, LOOM_F32, 1, d1, "w");
  loom_apply_proximal_gradient_descent(g, var, loom_const_f32(g, 0.1f, "a"),
                                       loom_const_data(g, LOOM_F32, 1, d1, z, "l1"), loom_const_f32(g, 0.0f, "l2"),
                                       loom_const_data(g, LOOM_F32, 1, d1, z, "gr"), "pgd");
  expect_graph_error(g, "l1 must be a float32 scalar");
  loom_graph_free(g);
  /* ref inputs must be variables */
  g = loom_graph_new();
  loom_output c2 = loom_const_data(g, LOOM_F32, 1, d1, z, "c");
  loom_apply_proximal_adagrad(g, c2, c2, f, f, f, c2, "pa");
  expect_graph_error(g, "must be a variable");
  loom_graph_free(g);
}

Test(proximal, defaults_match_tf) {
  loom_proximal_gradient_descent_options a = loom_proximal_gradient_descent_options_default();
  cr_assert(a.l1 == 0 && a.l2 == 0);
  loom_proximal_adagrad_options b = loom_proximal_adagrad_options_default();
  cr_assert(b.initial_accumulator_value == 0.1 && b.l1 == 0 && b.l2 == 0);
  loom_adagrad_da_options c = loom_adagrad_da_options_default();
  cr_assert(c.initial_gradient_squared_accumulator_value == 0.1 && c.l1 == 0 && c.l2 == 0);
}
