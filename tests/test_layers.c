/* Layers (tf.compat.v1.layers semantics): output shapes with unknown batch,
 * TF variable and op names, values on known inputs against hand/reference
 * computations (variables set with loom_session_assign_variable), batch
 * normalization in training and inference and its moving averages, dropout
 * keep rate and scaling, regularization losses, activations by name, sparse
 * embedding lookups, error messages, and finite-difference gradient checks
 * of layer compositions. */
#include "test_util.h"

/* ---------------------------------------------------------------- helpers */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* xorshift64: deterministic data in [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53 * 2.0 - 1.0;
}

static loom_session *new_session(loom_graph *g) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "graph error: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "%s", loom_status_message(st));
  loom_status_free(st);
  return s;
}

static void run_node(loom_session *s, loom_node *t, int nf, const loom_output *feeds, loom_tensor *const *vals) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_session_run(s, feeds, vals, nf, NULL, NULL, 0, &t, 1, st);
  cr_assert_eq(rc, LOOM_OK, "run failed: %s", loom_status_message(st));
  loom_status_free(st);
}

static loom_tensor *fetch(loom_session *s, loom_output o, int nf, const loom_output *feeds, loom_tensor *const *vals) {
  loom_status *st = loom_status_new();
  loom_tensor *t = NULL;
  loom_code rc = loom_session_run(s, feeds, vals, nf, &o, &t, 1, NULL, 0, st);
  cr_assert_eq(rc, LOOM_OK, "fetch failed: %s", loom_status_message(st));
  loom_status_free(st);
  return t;
}

static loom_tensor *read_var(loom_session *s, const char *name) {
  loom_status *st = loom_status_new();
  loom_tensor *t = NULL;
  cr_assert_eq(loom_session_read_variable(s, name, &t, st), LOOM_OK, "read %s: %s", name, loom_status_message(st));
  loom_status_free(st);
  return t;
}

static void set_var(loom_session *s, const char *name, loom_dtype dt, int nd, const int64_t *dims, const void *data) {
  loom_status *st = loom_status_new();
  loom_tensor *t = loom_tensor_from_data(dt, nd, dims, data, NULL);
  cr_assert_eq(loom_session_assign_variable(s, name, t, st), LOOM_OK, "assign %s: %s", name, loom_status_message(st));
  loom_tensor_free(t);
  loom_status_free(st);
}

static void expect_graph_error(loom_graph *g, loom_code code, const char *needle) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), code, "want error '%s', got code %d '%s'", needle,
               (int)loom_graph_status(g, NULL), loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), needle), "message '%s' lacks '%s'", loom_status_message(st), needle);
  loom_status_free(st);
}

/* Asserts t (f32 or f64) has the dims and values close to want (double). */
static void expect_vals(const loom_tensor *t, int nd, const int64_t *dims, const double *want, double tol,
                        const char *what) {
  cr_assert(t, "%s: no tensor", what);
  cr_assert_eq(loom_tensor_ndim(t), nd, "%s: rank %d want %d", what, loom_tensor_ndim(t), nd);
  for (int i = 0; i < nd; i++)
    cr_assert_eq(loom_tensor_dim(t, i), dims[i], "%s: dim %d = %lld want %lld", what, i,
                 (long long)loom_tensor_dim(t, i), (long long)dims[i]);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) {
    double got = loom_tensor_dtype(t) == LOOM_F32 ? ((const float *)loom_tensor_data_const(t))[i]
                                                  : ((const double *)loom_tensor_data_const(t))[i];
    cr_assert(fabs(got - want[i]) <= tol * (1 + fabs(want[i])), "%s[%lld]: got %.9g want %.9g", what, (long long)i,
              got, want[i]);
  }
}

static void expect_static_dims(loom_output o, int nd, const int64_t *dims, const char *what) {
  int64_t d[LOOM_MAX_DIMS];
  int n = loom_output_dims(o, d);
  cr_assert_eq(n, nd, "%s: rank %d want %d", what, n, nd);
  for (int i = 0; i < nd; i++) cr_assert_eq(d[i], dims[i], "%s: dim %d = %lld want %lld", what, i, (long long)d[i],
                                            (long long)dims[i]);
}

static int in_var_collection(loom_graph *g, const char *coll, const char *name) {
  int n = 0;
  loom_variable *const *vs = loom_get_variable_collection(g, coll, &n);
  for (int i = 0; i < n; i++)
    if (!strcmp(loom_variable_name(vs[i]), name)) return 1;
  return 0;
}

static float *frand(int64_t n, double lo, double hi) {
  float *p = malloc(sizeof *p * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * 0.5 * (urand() + 1));
  return p;
}

/* ======================================================================
 * dense
 * ====================================================================== */
Test(dense, shapes_names_and_values_unknown_batch) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 3};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_dense_options o = loom_dense_options_default();
  o.activation = "relu";
  loom_output y = loom_layers_dense(g, x, 4, &o, NULL);
  loom_output y2 = loom_layers_dense(g, y, 2, NULL, NULL); /* linear, default name dense_1 */
  int64_t w1[2] = {-1, 4}, w2[2] = {-1, 2};
  expect_static_dims(y, 2, w1, "dense");
  expect_static_dims(y2, 2, w2, "dense_1");
  cr_assert(loom_graph_variable(g, "dense/kernel"));
  cr_assert(loom_graph_variable(g, "dense/bias"));
  cr_assert(loom_graph_variable(g, "dense_1/kernel"));
  cr_assert(loom_graph_variable(g, "dense_1/bias"));
  cr_assert_str_eq(loom_node_op_name(y.node), "Relu");
  cr_assert_str_eq(loom_node_name(y.node), "dense/Relu");
  cr_assert_str_eq(loom_node_name(y2.node), "dense_1/BiasAdd");
  cr_assert(loom_graph_find(g, "dense/MatMul"));
  cr_assert(in_var_collection(g, LOOM_TRAINABLE_VARIABLES, "dense/kernel"));
  cr_assert(in_var_collection(g, LOOM_TRAINABLE_VARIABLES, "dense_1/bias"));
  int64_t kd[2];
  cr_assert_eq(loom_variable_dims(loom_graph_variable(g, "dense/kernel"), kd), 2);
  cr_assert(kd[0] == 3 && kd[1] == 4);

  loom_session *s = new_session(g);
  loom_node *init = loom_global_variables_initializer(g);
  run_node(s, init, 0, NULL, NULL);
  float K[12] = {1, -2, 0.5f, 0, 0, 1, -1, 2, 3, 0, 1, -1}, Bv[4] = {0.1f, -0.2f, 0.3f, 0.4f};
  float K2[8] = {1, 2, -1, 0.5f, 0.25f, 0, 2, -3}, B2[2] = {0.5f, -0.5f};
  int64_t kd1[2] = {3, 4}, bd1[1] = {4}, kd2[2] = {4, 2}, bd2[1] = {2};
  set_var(s, "dense/kernel", LOOM_F32, 2, kd1, K);
  set_var(s, "dense/bias", LOOM_F32, 1, bd1, Bv);
  set_var(s, "dense_1/kernel", LOOM_F32, 2, kd2, K2);
  set_var(s, "dense_1/bias", LOOM_F32, 1, bd2, B2);
  float X[6] = {1, 2, 3, -1, 0.5f, 2};
  int64_t xd2[2] = {2, 3};
  loom_tensor *xv = tu_f32(2, xd2, X);
  double h[8], want[4];
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < 4; j++) {
      double a = Bv[j];
      for (int i = 0; i < 3; i++) a += (double)X[r * 3 + i] * K[i * 4 + j];
      h[r * 4 + j] = a > 0 ? a : 0;
    }
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < 2; j++) {
      double a = B2[j];
      for (int i = 0; i < 4; i++) a += h[r * 4 + i] * K2[i * 2 + j];
      want[r * 2 + j] = a;
    }
  loom_tensor *hv = fetch(s, y, 1, &x, &xv), *yv = fetch(s, y2, 1, &x, &xv);
  int64_t hd[2] = {2, 4}, yd[2] = {2, 2};
  expect_vals(hv, 2, hd, h, 1e-6, "hidden");
  expect_vals(yv, 2, yd, want, 1e-6, "output");
  loom_tensor_free(hv);
  loom_tensor_free(yv);
  loom_tensor_free(xv);
  loom_session_free(s);
  loom_graph_free(g);
}

Test(dense, default_initializers_no_bias_reuse_and_rank3) {
  loom_graph *g = loom_graph_new();
  loom_graph_set_random_seed(g, 7);
  int64_t xd[3] = {-1, 5, 6};
  loom_output x = loom_placeholder(g, LOOM_F32, 3, xd, "x");
  loom_dense_options o = loom_dense_options_default();
  o.use_bias = 0;
  loom_output y = loom_layers_dense(g, x, 40, &o, "proj");
  int64_t wd[3] = {-1, 5, 40};
  expect_static_dims(y, 3, wd, "rank-3 dense");
  cr_assert(loom_graph_variable(g, "proj/kernel"));
  cr_assert_null(loom_graph_variable(g, "proj/bias"));
  /* reuse: same variables, new op scope */
  o.reuse = LOOM_REUSE_TRUE;
  loom_output y2 = loom_layers_dense(g, x, 40, &o, "proj");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  int nv = 0;
  loom_global_variables(g, &nv);
  cr_assert_eq(nv, 1, "reuse created new variables (%d)", nv);
  cr_assert(!strncmp(loom_node_name(y2.node), "proj_1/", 7), "reused layer's ops in %s", loom_node_name(y2.node));
  /* a layer with bias: zeros; kernel: glorot uniform limit sqrt(6/(6+40)) */
  loom_output z = loom_layers_dense(g, x, 40, NULL, "withbias");
  loom_session *s = new_session(g);
  run_node(s, loom_global_variables_initializer(g), 0, NULL, NULL);
  loom_tensor *k = read_var(s, "withbias/kernel"), *b = read_var(s, "withbias/bias");
  const float *kp = loom_tensor_data(k), *bp = loom_tensor_data(b);
  double lim = sqrt(6.0 / 46.0), mx = 0;
  for (int i = 0; i < 240; i++) {
    cr_assert(fabsf(kp[i]) <= lim + 1e-6, "kernel[%d] = %g beyond glorot limit %g", i, (double)kp[i], lim);
    mx = fmax(mx, fabs(kp[i]));
  }
  cr_assert(mx > 0.5 * lim, "kernel values too small for glorot_uniform (max %g)", mx);
  for (int i = 0; i < 40; i++) cr_assert_eq(bp[i], 0.0f);
  /* rank-3 values: y[b,t,:] = x[b,t,:] @ K */
  float *X = frand(2 * 5 * 6, -1, 1);
  int64_t xr[3] = {2, 5, 6};
  loom_tensor *xv = tu_f32(3, xr, X);
  loom_tensor *yv = fetch(s, y, 1, &x, &xv), *kv = read_var(s, "proj/kernel");
  const float *K = loom_tensor_data(kv);
  double *want = malloc(sizeof(double) * 2 * 5 * 40);
  for (int r = 0; r < 10; r++)
    for (int j = 0; j < 40; j++) {
      double a = 0;
      for (int i = 0; i < 6; i++) a += (double)X[r * 6 + i] * K[i * 40 + j];
      want[r * 40 + j] = a;
    }
  int64_t yd[3] = {2, 5, 40};
  expect_vals(yv, 3, yd, want, 1e-5, "rank-3 dense");
  (void)z;
  free(want);
  free(X);
  loom_tensor_free(k);
  loom_tensor_free(b);
  loom_tensor_free(kv);
  loom_tensor_free(xv);
  loom_tensor_free(yv);
  loom_session_free(s);
  loom_graph_free(g);
}

Test(dense, errors_name_the_layer) {
  {
    loom_graph *g = loom_graph_new();
    int64_t xd[2] = {4, -1};
    loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
    loom_layers_dense(g, x, 3, NULL, "fc");
    expect_graph_error(g, LOOM_INVALID_ARGUMENT, "fc: the last dimension of the inputs to Dense should be defined");
    loom_graph_free(g);
  }
  {
    loom_graph *g = loom_graph_new();
    int64_t xd[1] = {4};
    loom_output x = loom_placeholder(g, LOOM_F32, 1, xd, "x");
    loom_output y = loom_layers_dense(g, x, 3, NULL, NULL);
    cr_assert(loom_output_valid(y));
    expect_graph_error(g, LOOM_INVALID_ARGUMENT, "dense: inputs must have rank >= 2");
    loom_graph_free(g);
  }
  {
    loom_graph *g = loom_graph_new();
    int64_t xd[2] = {4, 2};
    loom_output x = loom_placeholder(g, LOOM_I32, 2, xd, "x");
    loom_layers_dense(g, x, 3, NULL, NULL);
    expect_graph_error(g, LOOM_INVALID_ARGUMENT, "float32 or float64, got int32");
    loom_graph_free(g);
  }
  {
    loom_graph *g = loom_graph_new();
    int64_t xd[2] = {4, 2};
    loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
    loom_dense_options o = loom_dense_options_default();
    o.activation = "swishy";
    loom_layers_dense(g, x, 3, &o, NULL);
    expect_graph_error(g, LOOM_INVALID_ARGUMENT, "Unknown activation function: swishy");
    loom_graph_free(g);
  }
  { /* same explicit name twice without reuse: TF's "already exists" */
    loom_graph *g = loom_graph_new();
    int64_t xd[2] = {4, 2};
    loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
    loom_layers_dense(g, x, 3, NULL, "fc");
    loom_layers_dense(g, x, 3, NULL, "fc");
    expect_graph_error(g, LOOM_ALREADY_EXISTS, "Variable fc/kernel already exists");
    loom_graph_free(g);
  }
  { /* unknown units */
    loom_graph *g = loom_graph_new();
    int64_t xd[2] = {4, 2};
    loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
    loom_layers_dense(g, x, 0, NULL, NULL);
    expect_graph_error(g, LOOM_INVALID_ARGUMENT, "units must be positive");
    loom_graph_free(g);
  }
}

Test(dense, nested_variable_scope_names) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 3};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_variable_scope_push(g, "model", LOOM_REUSE_NONE);
  loom_output a = loom_layers_dense(g, x, 2, NULL, NULL);
  loom_output b = loom_layers_dense(g, a, 2, NULL, NULL);
  loom_variable_scope_pop(g);
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  cr_assert(loom_graph_variable(g, "model/dense/kernel"));
  cr_assert(loom_graph_variable(g, "model/dense_1/kernel"));
  cr_assert_str_eq(loom_node_name(b.node), "model/dense_1/BiasAdd");
  loom_graph_free(g);
}

/* ======================================================================
 * activations by name
 * ====================================================================== */
static double ref_act(const char *a, double x) {
  if (!strcmp(a, "relu")) return x > 0 ? x : 0;
  if (!strcmp(a, "relu6")) return fmin(fmax(x, 0), 6);
  if (!strcmp(a, "elu")) return x > 0 ? x : expm1(x);
  if (!strcmp(a, "selu")) return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * expm1(x));
  if (!strcmp(a, "sigmoid")) return 1 / (1 + exp(-x));
  if (!strcmp(a, "tanh")) return tanh(x);
  if (!strcmp(a, "softplus")) return log1p(exp(x));
  if (!strcmp(a, "gelu")) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
  if (!strcmp(a, "leaky_relu")) return x > 0 ? x : 0.2 * x;
  return x;
}

Test(activation, every_name_vs_reference_and_unknown_name) {
  static const char *names[] = {"relu", "relu6", "elu", "selu", "sigmoid", "tanh", "softplus", "gelu", "leaky_relu",
                                "linear"};
  float X[8] = {-7, -2.5f, -0.3f, 0, 0.2f, 1.5f, 6.5f, 9};
  int64_t xd[1] = {8};
  for (unsigned k = 0; k < sizeof names / sizeof names[0]; k++) {
    loom_graph *g = loom_graph_new();
    loom_output x = loom_placeholder(g, LOOM_F32, 1, xd, "x");
    loom_output y = loom_activation(g, x, names[k], NULL);
    cr_assert(loom_activation_valid(names[k]));
    loom_tensor *xv = tu_f32(1, xd, X);
    loom_tensor *yv = tu_run1(g, 1, &x, &xv, y);
    double want[8];
    for (int i = 0; i < 8; i++) want[i] = ref_act(names[k], X[i]);
    expect_vals(yv, 1, xd, want, 2e-6, names[k]);
    loom_tensor_free(xv);
    loom_tensor_free(yv);
    loom_graph_free(g);
  }
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 1, xd, "x");
  loom_output y0 = loom_activation(g, x, NULL, NULL);
  cr_assert(y0.node == x.node && y0.index == x.index, "NULL activation must be the identity");
  loom_output y1 = loom_activation(g, x, "linear", NULL);
  cr_assert(y1.node == x.node, "linear must be the identity");
  cr_assert_not(loom_activation_valid("Relu"));
  loom_activation(g, x, "Relu", NULL);
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "Unknown activation function: Relu");
  loom_graph_free(g);
}

/* "softmax" (Keras' Dense(activation="softmax")): exp(x - max) / sum over the last axis. */
Test(activation, softmax_over_the_last_axis) {
  static const float X[6] = {1.0f, 2.0f, 3.0f, -1.0f, 0.0f, 5.0f};
  int64_t xd[2] = {2, 3};
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  cr_assert(loom_activation_valid("softmax"));
  loom_output y = loom_activation(g, x, "softmax", NULL);
  loom_tensor *xv = tu_f32(2, xd, X);
  loom_tensor *yv = tu_run1(g, 1, &x, &xv, y);
  double want[6];
  for (int r = 0; r < 2; r++) {
    double m = fmax(fmax(X[3 * r], X[3 * r + 1]), X[3 * r + 2]), z = 0;
    for (int c = 0; c < 3; c++) z += exp(X[3 * r + c] - m);
    for (int c = 0; c < 3; c++) want[3 * r + c] = exp(X[3 * r + c] - m) / z;
  }
  expect_vals(yv, 2, xd, want, 1e-6, "softmax");
  loom_tensor_free(xv);
  loom_tensor_free(yv);
  loom_graph_free(g);
}

/* ======================================================================
 * conv2d and pooling
 * ====================================================================== */
/* NHWC x HWIO reference with TF padding. */
static void ref_conv(const float *x, int N, int H, int W, int C, const float *k, int KH, int KW, int O, int sh, int sw,
                     int dh, int dw, int same, const float *bias, double *y, int *OHp, int *OWp) {
  int ekh = (KH - 1) * dh + 1, ekw = (KW - 1) * dw + 1;
  int OH = same ? (H + sh - 1) / sh : (H - ekh) / sh + 1, OW = same ? (W + sw - 1) / sw : (W - ekw) / sw + 1;
  int ph = same ? ((OH - 1) * sh + ekh - H > 0 ? ((OH - 1) * sh + ekh - H) / 2 : 0) : 0;
  int pw = same ? ((OW - 1) * sw + ekw - W > 0 ? ((OW - 1) * sw + ekw - W) / 2 : 0) : 0;
  for (int n = 0; n < N; n++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++)
        for (int o = 0; o < O; o++) {
          double a = bias ? bias[o] : 0;
          for (int i = 0; i < KH; i++)
            for (int j = 0; j < KW; j++) {
              int ih = oh * sh - ph + i * dh, iw = ow * sw - pw + j * dw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              for (int c = 0; c < C; c++)
                a += (double)x[((n * H + ih) * W + iw) * C + c] * k[((i * KW + j) * C + c) * O + o];
            }
          y[((n * OH + oh) * OW + ow) * O + o] = a;
        }
  *OHp = OH;
  *OWp = OW;
}

static void conv_case(int same, int sh, int dh, const char *act) {
  loom_graph *g = loom_graph_new();
  const int N = 2, H = 7, W = 6, C = 3, O = 4;
  int64_t xd[4] = {-1, H, W, C};
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_conv2d_options o = loom_conv2d_options_default();
  o.padding = same ? "SAME" : "valid";
  o.strides[0] = o.strides[1] = sh;
  o.dilation_rate[0] = o.dilation_rate[1] = dh;
  o.activation = act;
  int64_t ks[2] = {3, 2};
  loom_output y = loom_layers_conv2d(g, x, O, ks, &o, NULL);
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  int64_t kd[4];
  cr_assert_eq(loom_variable_dims(loom_graph_variable(g, "conv2d/kernel"), kd), 4);
  cr_assert(kd[0] == 3 && kd[1] == 2 && kd[2] == C && kd[3] == O);
  cr_assert(loom_graph_find(g, "conv2d/Conv2D"));
  int64_t yd[4];
  loom_output_dims(y, yd);
  cr_assert_eq(yd[0], -1);
  cr_assert_eq(yd[3], O);
  loom_session *s = new_session(g);
  float *X = frand(N * H * W * C, -1, 1), *K = frand(3 * 2 * C * O, -1, 1), *Bv = frand(O, -1, 1);
  int64_t kk[4] = {3, 2, C, O}, bd[1] = {O}, xr[4] = {N, H, W, C};
  set_var(s, "conv2d/kernel", LOOM_F32, 4, kk, K);
  set_var(s, "conv2d/bias", LOOM_F32, 1, bd, Bv);
  double want[2 * 7 * 6 * 4];
  int OH, OW;
  ref_conv(X, N, H, W, C, K, 3, 2, O, sh, sh, dh, dh, same, Bv, want, &OH, &OW);
  for (int i = 0; i < N * OH * OW * O; i++) want[i] = act ? ref_act(act, want[i]) : want[i];
  cr_assert_eq(yd[1], OH, "static OH %lld want %d", (long long)yd[1], OH);
  cr_assert_eq(yd[2], OW);
  loom_tensor *xv = tu_f32(4, xr, X);
  loom_tensor *yv = fetch(s, y, 1, &x, &xv);
  int64_t wd[4] = {N, OH, OW, O};
  expect_vals(yv, 4, wd, want, 1e-5, "conv2d");
  free(X);
  free(K);
  free(Bv);
  loom_tensor_free(xv);
  loom_tensor_free(yv);
  loom_session_free(s);
  loom_graph_free(g);
}

Test(conv2d, valid_same_strides_dilation_vs_reference) {
  conv_case(0, 1, 1, NULL);
  conv_case(1, 1, 1, "relu");
  conv_case(1, 2, 1, "tanh");
  conv_case(0, 2, 1, NULL);
  conv_case(0, 1, 2, "elu");
  conv_case(1, 1, 2, NULL);
}

Test(conv2d, errors) {
  {
    loom_graph *g = loom_graph_new();
    int64_t xd[4] = {-1, 8, 8, 3}, ks[2] = {3, 3};
    loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
    loom_conv2d_options o = loom_conv2d_options_default();
    o.padding = "full";
    loom_layers_conv2d(g, x, 4, ks, &o, "c1");
    expect_graph_error(g, LOOM_INVALID_ARGUMENT, "c1: padding must be \"valid\" or \"same\", got \"full\"");
    loom_graph_free(g);
  }
  {
    loom_graph *g = loom_graph_new();
    int64_t xd[4] = {-1, 8, 8, 3}, ks[2] = {3, 3};
    loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
    loom_conv2d_options o = loom_conv2d_options_default();
    o.strides[0] = 2;
    o.dilation_rate[1] = 2;
    loom_layers_conv2d(g, x, 4, ks, &o, NULL);
    expect_graph_error(g, LOOM_INVALID_ARGUMENT, "strides > 1 not supported in conjunction with dilation_rate > 1");
    loom_graph_free(g);
  }
  {
    loom_graph *g = loom_graph_new();
    int64_t xd[3] = {8, 8, 3}, ks[2] = {3, 3};
    loom_output x = loom_placeholder(g, LOOM_F32, 3, xd, "x");
    loom_layers_conv2d(g, x, 4, ks, NULL, NULL);
    expect_graph_error(g, LOOM_INVALID_ARGUMENT, "conv2d: inputs must be NHWC of rank 4");
    loom_graph_free(g);
  }
  {
    loom_graph *g = loom_graph_new();
    int64_t xd[4] = {-1, 2, 2, 3}, ks[2] = {3, 3};
    loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
    loom_layers_conv2d(g, x, 4, ks, NULL, NULL); /* VALID 3x3 on 2x2: the op rejects it */
    cr_assert_neq(loom_graph_status(g, NULL), LOOM_OK);
    expect_graph_error(g, LOOM_INVALID_ARGUMENT, "conv2d/Conv2D");
    loom_graph_free(g);
  }
}

Test(pooling, max_and_average_shapes_and_values) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {-1, 4, 5, 2}, p2[2] = {2, 2}, s1[2] = {1, 1};
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_output m = loom_layers_max_pooling2d(g, x, p2, NULL, NULL, NULL);      /* strides = pool_size, valid */
  loom_output a = loom_layers_average_pooling2d(g, x, p2, p2, "same", NULL); /* 2x3 outputs */
  loom_output m1 = loom_layers_max_pooling2d(g, x, p2, s1, "valid", "mp");
  int64_t md[4] = {-1, 2, 2, 2}, ad[4] = {-1, 2, 3, 2}, m1d[4] = {-1, 3, 4, 2};
  expect_static_dims(m, 4, md, "max_pooling2d");
  expect_static_dims(a, 4, ad, "average_pooling2d");
  expect_static_dims(m1, 4, m1d, "mp");
  cr_assert_str_eq(loom_node_name(m.node), "max_pooling2d/MaxPool");
  cr_assert_str_eq(loom_node_name(a.node), "average_pooling2d/AvgPool");
  cr_assert_str_eq(loom_node_name(m1.node), "mp/MaxPool");
  loom_output m2 = loom_layers_max_pooling2d(g, x, p2, NULL, NULL, NULL);
  cr_assert_str_eq(loom_node_name(m2.node), "max_pooling2d_1/MaxPool");
  float X[40];
  for (int i = 0; i < 40; i++) X[i] = (float)((i * 7) % 11) - 5.0f;
  int64_t xr[4] = {1, 4, 5, 2};
  loom_tensor *xv = tu_f32(4, xr, X);
  loom_session *s = new_session(g);
  loom_tensor *mv = fetch(s, m, 1, &x, &xv), *av = fetch(s, a, 1, &x, &xv), *m1v = fetch(s, m1, 1, &x, &xv);
#define XA(h, w, c) ((double)X[((h) * 5 + (w)) * 2 + (c)])
  double wm[8], wa[12], wm1[24];
  for (int oh = 0; oh < 2; oh++)
    for (int ow = 0; ow < 2; ow++)
      for (int c = 0; c < 2; c++) {
        double v = -1e9;
        for (int i = 0; i < 2; i++)
          for (int j = 0; j < 2; j++) v = fmax(v, XA(oh * 2 + i, ow * 2 + j, c));
        wm[(oh * 2 + ow) * 2 + c] = v;
      }
  /* SAME 2x2 stride 2 on 4x5: width pad_total = (3-1)*2+2-5 = 1 -> 0 before, 1 after */
  for (int oh = 0; oh < 2; oh++)
    for (int ow = 0; ow < 3; ow++)
      for (int c = 0; c < 2; c++) {
        double sum = 0;
        int cnt = 0;
        for (int i = 0; i < 2; i++)
          for (int j = 0; j < 2; j++) {
            int h = oh * 2 + i, w = ow * 2 + j;
            if (w >= 5) continue;
            sum += XA(h, w, c);
            cnt++;
          }
        wa[(oh * 3 + ow) * 2 + c] = sum / cnt;
      }
  for (int oh = 0; oh < 3; oh++)
    for (int ow = 0; ow < 4; ow++)
      for (int c = 0; c < 2; c++) {
        double v = -1e9;
        for (int i = 0; i < 2; i++)
          for (int j = 0; j < 2; j++) v = fmax(v, XA(oh + i, ow + j, c));
        wm1[(oh * 4 + ow) * 2 + c] = v;
      }
#undef XA
  int64_t mr[4] = {1, 2, 2, 2}, ar[4] = {1, 2, 3, 2}, m1r[4] = {1, 3, 4, 2};
  expect_vals(mv, 4, mr, wm, 1e-6, "max pool");
  expect_vals(av, 4, ar, wa, 1e-6, "avg pool");
  expect_vals(m1v, 4, m1r, wm1, 1e-6, "max pool stride 1");
  loom_tensor_free(mv);
  loom_tensor_free(av);
  loom_tensor_free(m1v);
  loom_tensor_free(xv);
  loom_session_free(s);
  /* errors */
  loom_layers_max_pooling2d(g, x, p2, NULL, "full", "bad");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "bad: padding must be");
  loom_graph_free(g);
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  int64_t p0[2] = {0, 2};
  loom_layers_average_pooling2d(g, x, p0, NULL, NULL, NULL);
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "average_pooling2d: pool_size and strides must be given and positive");
  loom_graph_free(g);
}

/* ======================================================================
 * flatten
 * ====================================================================== */
Test(flatten, keeps_unknown_batch) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {-1, 3, 4, 5}, x1d[1] = {-1}, x2d[3] = {2, -1, 3};
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_output f = loom_layers_flatten(g, x, NULL);
  int64_t fd[2] = {-1, 60};
  expect_static_dims(f, 2, fd, "flatten");
  cr_assert_str_eq(loom_node_name(f.node), "flatten/Reshape");
  loom_output x1 = loom_placeholder(g, LOOM_F32, 1, x1d, "x1");
  loom_output f1 = loom_layers_flatten(g, x1, NULL);
  int64_t f1d[2] = {-1, 1};
  expect_static_dims(f1, 2, f1d, "flatten rank 1");
  cr_assert_str_eq(loom_node_name(f1.node), "flatten_1/Reshape");
  loom_output x2 = loom_placeholder(g, LOOM_F32, 3, x2d, "x2");
  loom_output f2 = loom_layers_flatten(g, x2, NULL);
  int64_t f2d[2] = {2, -1};
  expect_static_dims(f2, 2, f2d, "flatten unknown inner");
  float X[120];
  for (int i = 0; i < 120; i++) X[i] = (float)i;
  int64_t xr[4] = {2, 3, 4, 5};
  loom_tensor *xv = tu_f32(4, xr, X);
  loom_tensor *fv = tu_run1(g, 1, &x, &xv, f);
  double want[120];
  for (int i = 0; i < 120; i++) want[i] = i;
  int64_t wr[2] = {2, 60};
  expect_vals(fv, 2, wr, want, 0, "flatten");
  loom_tensor_free(fv);
  loom_tensor_free(xv);
  /* both unknown: error */
  int64_t x3d[3] = {-1, -1, 3};
  loom_output x3 = loom_placeholder(g, LOOM_F32, 3, x3d, "x3");
  loom_layers_flatten(g, x3, NULL);
  expect_graph_error(g, LOOM_UNIMPLEMENTED, "flatten_3: flatten needs");
  loom_graph_free(g);
}

/* ======================================================================
 * dropout
 * ====================================================================== */
Test(dropout, identity_outside_training_keep_rate_and_scaling) {
  loom_graph *g = loom_graph_new();
  loom_graph_set_random_seed(g, 3);
  const int n = 100000;
  int64_t xd[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, xd, "x");
  loom_output id = loom_layers_dropout(g, x, 0.3, NULL, NULL);
  cr_assert(id.node == x.node && id.index == x.index, "not training: dropout must return x itself");
  loom_dropout_options o = loom_dropout_options_default();
  o.training = 1;
  o.seed = 11;
  loom_output y = loom_layers_dropout(g, x, 0.3, &o, NULL);
  cr_assert_str_eq(loom_node_op_name(y.node), "Dropout");
  cr_assert_str_eq(loom_node_name(y.node), "dropout/Dropout");
  loom_dropout_options of = loom_dropout_options_default();
  int64_t sd[1] = {0};
  of.training_flag = loom_placeholder(g, LOOM_BOOL, 0, sd, "is_training");
  loom_output yf = loom_layers_dropout(g, x, 0.5, &of, NULL);
  cr_assert_str_eq(loom_node_name(yf.node), "dropout_1/SelectV2");

  float *X = frand(n, 0.5, 2);
  int64_t xr[1] = {n};
  loom_tensor *xv = tu_f32(1, xr, X);
  loom_session *s = new_session(g);
  loom_tensor *yv = fetch(s, y, 1, &x, &xv);
  const float *yp = loom_tensor_data(yv);
  int kept = 0;
  for (int i = 0; i < n; i++) {
    if (yp[i] == 0) continue;
    kept++;
    cr_assert(fabs(yp[i] - X[i] / 0.7) <= 1e-6 * fabs(X[i] / 0.7), "kept element %d: %g, want %g", i, (double)yp[i],
              X[i] / 0.7);
  }
  double rate = (double)kept / n;
  cr_assert(fabs(rate - 0.7) < 0.01, "keep rate %g, want 0.7", rate);
  /* a second run draws a new mask */
  loom_tensor *yv2 = fetch(s, y, 1, &x, &xv);
  cr_assert(memcmp(loom_tensor_data(yv), loom_tensor_data(yv2), sizeof(float) * n), "same mask twice");
  /* run-time flag: false = exact identity, true = dropout at 0.5 */
  uint8_t f0 = 0, f1 = 1;
  loom_tensor *fl0 = loom_tensor_from_data(LOOM_BOOL, 0, NULL, &f0, NULL);
  loom_tensor *fl1 = loom_tensor_from_data(LOOM_BOOL, 0, NULL, &f1, NULL);
  loom_output feeds[2] = {x, of.training_flag};
  loom_tensor *v0[2] = {xv, fl0}, *v1[2] = {xv, fl1};
  loom_tensor *z0 = fetch(s, yf, 2, feeds, v0), *z1 = fetch(s, yf, 2, feeds, v1);
  cr_assert_eq(memcmp(loom_tensor_data(z0), X, sizeof(float) * n), 0, "flag false is not the identity");
  const float *zp = loom_tensor_data(z1);
  kept = 0;
  for (int i = 0; i < n; i++) {
    if (zp[i] == 0) continue;
    kept++;
    cr_assert(fabs(zp[i] - 2 * X[i]) <= 1e-6 * 2 * X[i]);
  }
  cr_assert(fabs((double)kept / n - 0.5) < 0.01, "keep rate %g, want 0.5", (double)kept / n);
  loom_tensor_free(z0);
  loom_tensor_free(z1);
  loom_tensor_free(fl0);
  loom_tensor_free(fl1);
  loom_tensor_free(yv);
  loom_tensor_free(yv2);
  loom_tensor_free(xv);
  free(X);
  loom_session_free(s);
  /* errors */
  o.training = 1;
  loom_layers_dropout(g, x, 1.0, &o, "drop");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "drop: rate must be in [0, 1), got 1");
  loom_graph_free(g);
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_F32, 1, xd, "x");
  of.training_flag = loom_placeholder(g, LOOM_F32, 0, sd, "flag");
  loom_layers_dropout(g, x, 0.5, &of, NULL);
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "training_flag must be a bool scalar, got float32");
  loom_graph_free(g);
}

Test(dropout, same_seed_same_masks_in_a_new_session) {
  float a[64], b[64];
  for (int rep = 0; rep < 2; rep++) {
    loom_graph *g = loom_graph_new();
    loom_graph_set_random_seed(g, 5);
    int64_t xd[1] = {64};
    loom_output x = loom_placeholder(g, LOOM_F32, 1, xd, "x");
    loom_dropout_options o = loom_dropout_options_default();
    o.training = 1;
    o.seed = 2;
    loom_output y = loom_layers_dropout(g, x, 0.5, &o, NULL);
    float X[64];
    for (int i = 0; i < 64; i++) X[i] = 1;
    loom_tensor *xv = tu_f32(1, xd, X);
    loom_tensor *yv = tu_run1(g, 1, &x, &xv, y);
    memcpy(rep ? b : a, loom_tensor_data(yv), sizeof a);
    loom_tensor_free(xv);
    loom_tensor_free(yv);
    loom_graph_free(g);
  }
  cr_assert_eq(memcmp(a, b, sizeof a), 0);
}

/* ======================================================================
 * batch normalization
 * ====================================================================== */
/* Hand batch norm of x [n, C] (channels last after flattening other dims). */
static void ref_bn(const double *x, int n, int C, const double *gamma, const double *beta, const double *mean,
                   const double *var, double eps, double *y) {
  for (int i = 0; i < n; i++)
    for (int c = 0; c < C; c++)
      y[i * C + c] = (x[i * C + c] - mean[c]) / sqrt(var[c] + eps) * (gamma ? gamma[c] : 1) + (beta ? beta[c] : 0);
}
static void moments(const double *x, int n, int C, double *mean, double *var) {
  for (int c = 0; c < C; c++) {
    double m = 0, v = 0;
    for (int i = 0; i < n; i++) m += x[i * C + c];
    m /= n;
    for (int i = 0; i < n; i++) v += (x[i * C + c] - m) * (x[i * C + c] - m);
    mean[c] = m;
    var[c] = v / n;
  }
}

Test(batch_norm, training_inference_and_moving_averages) {
  loom_graph *g = loom_graph_new();
  enum { N = 4, H = 3, W = 2, C = 3 };
  int64_t xd[4] = {-1, H, W, C};
  loom_output x = loom_placeholder(g, LOOM_F32, 4, xd, "x");
  loom_batch_norm_options o = loom_batch_norm_options_default();
  o.training = 1;
  o.momentum = 0.9;
  loom_output yt = loom_layers_batch_normalization(g, x, &o, NULL);
  loom_batch_norm_options oi = loom_batch_norm_options_default();
  oi.reuse = LOOM_REUSE_TRUE;
  loom_output yi = loom_layers_batch_normalization(g, x, &oi, "batch_normalization");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK, "build");
  expect_static_dims(yt, 4, xd, "bn train");
  expect_static_dims(yi, 4, xd, "bn inference");
  /* variables: names, trainable flags, collections */
  static const char *vn[4] = {"batch_normalization/gamma", "batch_normalization/beta", "batch_normalization/moving_mean",
                              "batch_normalization/moving_variance"};
  for (int i = 0; i < 4; i++) {
    cr_assert(loom_graph_variable(g, vn[i]), "missing %s", vn[i]);
    cr_assert(in_var_collection(g, LOOM_GLOBAL_VARIABLES, vn[i]));
    cr_assert_eq(in_var_collection(g, LOOM_TRAINABLE_VARIABLES, vn[i]), i < 2, "%s trainable flag", vn[i]);
  }
  int nu = 0;
  const loom_output *ups = loom_get_collection(g, LOOM_UPDATE_OPS, &nu);
  cr_assert_eq(nu, 2, "update ops: %d (the inference layer must add none)", nu);
  cr_assert_str_eq(loom_node_op_name(ups[0].node), "AssignSub");
  cr_assert_str_eq(loom_node_name(ups[0].node), "batch_normalization/AssignMovingAvg");
  loom_node *upd = loom_group_collection(g, LOOM_UPDATE_OPS, "update_ops");
  cr_assert(upd);
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_node(s, init, 0, NULL, NULL);
  double gamma[C] = {1.5, -0.5, 2}, beta[C] = {0.1, 0.2, -0.3};
  float gf[C], bf[C];
  for (int c = 0; c < C; c++) gf[c] = (float)gamma[c], bf[c] = (float)beta[c];
  int64_t cd[1] = {C};
  set_var(s, vn[0], LOOM_F32, 1, cd, gf);
  set_var(s, vn[1], LOOM_F32, 1, cd, bf);
  /* moving averages start at 0 / 1: check three update runs by hand */
  double mm[C] = {0, 0, 0}, mv[C] = {1, 1, 1};
  int64_t xr[4] = {N, H, W, C};
  const int n = N * H * W;
  for (int step = 0; step < 3; step++) {
    float *X = frand(n * C, -2 + step, 3 + step);
    double xdv[N * H * W * C], bm[C], bv[C], want[N * H * W * C];
    for (int i = 0; i < n * C; i++) xdv[i] = X[i];
    moments(xdv, n, C, bm, bv);
    loom_tensor *xv = tu_f32(4, xr, X);
    loom_tensor *yv = fetch(s, yt, 1, &x, &xv);
    ref_bn(xdv, n, C, gamma, beta, bm, bv, 1e-3, want);
    expect_vals(yv, 4, xr, want, 2e-5, "bn training output");
    /* inference uses the moving statistics (before this step's update) */
    loom_tensor *iv = fetch(s, yi, 1, &x, &xv);
    ref_bn(xdv, n, C, gamma, beta, mm, mv, 1e-3, want);
    expect_vals(iv, 4, xr, want, 2e-5, "bn inference output");
    run_node(s, upd, 1, &x, &xv);
    for (int c = 0; c < C; c++) {
      mm[c] = mm[c] * 0.9 + bm[c] * 0.1;
      mv[c] = mv[c] * 0.9 + bv[c] * 0.1;
    }
    loom_tensor *m = read_var(s, vn[2]), *v = read_var(s, vn[3]);
    expect_vals(m, 1, cd, mm, 1e-5, "moving_mean");
    expect_vals(v, 1, cd, mv, 1e-5, "moving_variance");
    loom_tensor_free(m);
    loom_tensor_free(v);
    loom_tensor_free(xv);
    loom_tensor_free(yv);
    loom_tensor_free(iv);
    free(X);
  }
  loom_session_free(s);
  loom_graph_free(g);
}

Test(batch_norm, axis1_no_center_no_scale_and_runtime_flag) {
  loom_graph *g = loom_graph_new();
  enum { N = 5, C = 2, L = 3 };
  int64_t xd[3] = {-1, C, L}, sd[1] = {0};
  loom_output x = loom_placeholder(g, LOOM_F64, 3, xd, "x");
  loom_output flag = loom_placeholder(g, LOOM_BOOL, 0, sd, "training");
  loom_batch_norm_options o = loom_batch_norm_options_default();
  o.axis = 1;
  o.center = 0;
  o.scale = 0;
  o.epsilon = 0.01;
  o.training_flag = flag;
  loom_output y = loom_layers_batch_normalization(g, x, &o, "bn");
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  cr_assert_null(loom_graph_variable(g, "bn/gamma"));
  cr_assert_null(loom_graph_variable(g, "bn/beta"));
  cr_assert(loom_graph_variable(g, "bn/moving_mean"));
  loom_node *upd = loom_group_collection(g, LOOM_UPDATE_OPS, NULL);
  loom_session *s = new_session(g);
  run_node(s, loom_global_variables_initializer(g), 0, NULL, NULL);
  double mm[C] = {0.5, -1}, mv[C] = {2, 0.25};
  int64_t cd[1] = {C};
  set_var(s, "bn/moving_mean", LOOM_F64, 1, cd, mm);
  set_var(s, "bn/moving_variance", LOOM_F64, 1, cd, mv);
  double X[N * C * L], T[N * L * C];
  for (int i = 0; i < N * C * L; i++) X[i] = urand() * 3;
  /* transpose to [N*L, C] for the reference */
  for (int b = 0; b < N; b++)
    for (int c = 0; c < C; c++)
      for (int l = 0; l < L; l++) T[(b * L + l) * C + c] = X[(b * C + c) * L + l];
  int64_t xr[3] = {N, C, L};
  loom_tensor *xv = loom_tensor_from_data(LOOM_F64, 3, xr, X, NULL);
  uint8_t f0 = 0, f1 = 1;
  loom_tensor *fl0 = loom_tensor_from_data(LOOM_BOOL, 0, NULL, &f0, NULL);
  loom_tensor *fl1 = loom_tensor_from_data(LOOM_BOOL, 0, NULL, &f1, NULL);
  loom_output feeds[2] = {x, flag};
  loom_tensor *v0[2] = {xv, fl0}, *v1[2] = {xv, fl1};
  double ref[N * L * C], want[N * C * L], bm[C], bv[C];
  /* flag false: moving statistics */
  loom_tensor *y0 = fetch(s, y, 2, feeds, v0);
  ref_bn(T, N * L, C, NULL, NULL, mm, mv, 0.01, ref);
  for (int b = 0; b < N; b++)
    for (int c = 0; c < C; c++)
      for (int l = 0; l < L; l++) want[(b * C + c) * L + l] = ref[(b * L + l) * C + c];
  expect_vals(y0, 3, xr, want, 1e-12, "flag false");
  /* flag true: batch statistics */
  loom_tensor *y1 = fetch(s, y, 2, feeds, v1);
  moments(T, N * L, C, bm, bv);
  ref_bn(T, N * L, C, NULL, NULL, bm, bv, 0.01, ref);
  for (int b = 0; b < N; b++)
    for (int c = 0; c < C; c++)
      for (int l = 0; l < L; l++) want[(b * C + c) * L + l] = ref[(b * L + l) * C + c];
  expect_vals(y1, 3, xr, want, 1e-12, "flag true");
  /* updates: no change when the flag is false, TF's formula when true */
  run_node(s, upd, 2, feeds, v0);
  loom_tensor *m = read_var(s, "bn/moving_mean");
  expect_vals(m, 1, cd, mm, 0, "moving_mean unchanged");
  run_node(s, upd, 2, feeds, v1);
  double wm[C], wv[C];
  for (int c = 0; c < C; c++) wm[c] = mm[c] * 0.99 + bm[c] * 0.01, wv[c] = mv[c] * 0.99 + bv[c] * 0.01;
  loom_tensor *m2 = read_var(s, "bn/moving_mean"), *v2 = read_var(s, "bn/moving_variance");
  expect_vals(m2, 1, cd, wm, 1e-12, "moving_mean");
  expect_vals(v2, 1, cd, wv, 1e-12, "moving_variance");
  loom_tensor_free(m);
  loom_tensor_free(m2);
  loom_tensor_free(v2);
  loom_tensor_free(y0);
  loom_tensor_free(y1);
  loom_tensor_free(xv);
  loom_tensor_free(fl0);
  loom_tensor_free(fl1);
  loom_session_free(s);
  loom_graph_free(g);
}

Test(batch_norm, update_ops_as_control_dependencies_of_a_train_op) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 2};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_batch_norm_options o = loom_batch_norm_options_default();
  o.training = 1;
  loom_output h = loom_layers_batch_normalization(g, x, &o, NULL);
  loom_output loss = loom_reduce_sum(g, loom_square(g, loom_layers_dense(g, h, 1, NULL, NULL), NULL), -1, NULL, 0,
                                     "loss");
  loom_node *u = loom_group_collection(g, LOOM_UPDATE_OPS, "update_ops");
  loom_graph_push_control_deps(g, 1, &u);
  loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 0.01f, "lr"));
  loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, "train");
  loom_graph_pop_control_deps(g);
  loom_session *s = new_session(g);
  run_node(s, loom_global_variables_initializer(g), 0, NULL, NULL);
  float X[8] = {1, 10, 3, 20, 5, 30, 7, 40};
  int64_t xr[2] = {4, 2}, cd[1] = {2};
  loom_tensor *xv = tu_f32(2, xr, X);
  run_node(s, train, 1, &x, &xv);
  loom_tensor *m = read_var(s, "batch_normalization/moving_mean");
  double want[2] = {0.01 * 4, 0.01 * 25};
  expect_vals(m, 1, cd, want, 1e-6, "moving_mean after one train step");
  loom_tensor_free(m);
  loom_tensor_free(xv);
  loom_optimizer_free(opt);
  loom_session_free(s);
  loom_graph_free(g);
}

Test(batch_norm, errors) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {4, -1};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_layers_batch_normalization(g, x, NULL, "bn");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "bn: axis -1 of inputs [4,?] should have a defined dimension");
  loom_graph_free(g);
  g = loom_graph_new();
  int64_t x2[2] = {4, 3};
  x = loom_placeholder(g, LOOM_F32, 2, x2, "x");
  loom_batch_norm_options o = loom_batch_norm_options_default();
  o.axis = 2;
  loom_layers_batch_normalization(g, x, &o, NULL);
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "batch_normalization: axis 2 is out of range for inputs [4,3]");
  loom_graph_free(g);
}

/* ======================================================================
 * regularizers
 * ====================================================================== */
Test(regularizers, l1_l2_l1l2_values_collection_and_total) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 3};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_dense_options o = loom_dense_options_default();
  o.kernel_regularizer = loom_l2_regularizer(0.1);
  o.bias_regularizer = loom_l1_regularizer(0.5);
  loom_layers_dense(g, x, 2, &o, NULL);
  loom_conv2d_options co = loom_conv2d_options_default();
  co.kernel_regularizer = loom_l1_l2_regularizer(0.01, 0.2);
  co.bias_regularizer = loom_l2_regularizer(0); /* scale 0: no loss */
  int64_t id[4] = {-1, 4, 4, 1}, ks[2] = {2, 2};
  loom_output im = loom_placeholder(g, LOOM_F32, 4, id, "im");
  loom_layers_conv2d(g, im, 2, ks, &co, NULL);
  int n = 0;
  const loom_output *ls = loom_get_collection(g, LOOM_REGULARIZATION_LOSSES, &n);
  cr_assert_eq(n, 3, "regularization losses: %d", n);
  cr_assert_str_eq(loom_node_name(ls[0].node), "dense/kernel/Regularizer/l2_regularizer");
  cr_assert_str_eq(loom_node_name(ls[2].node), "conv2d/kernel/Regularizer/l1_l2_regularizer");
  loom_output total = loom_losses_get_regularization_loss(g, NULL, NULL);
  cr_assert_str_eq(loom_node_name(total.node), "total_regularization_loss");
  loom_session *s = new_session(g);
  float K[6] = {1, -2, 0.5f, 3, -1, 0.25f}, Bv[2] = {-1, 2}, CK[8] = {1, -1, 2, -2, 0.5f, 0, 3, -3};
  int64_t kd[2] = {3, 2}, bd[1] = {2}, ckd[4] = {2, 2, 1, 2};
  set_var(s, "dense/kernel", LOOM_F32, 2, kd, K);
  set_var(s, "dense/bias", LOOM_F32, 1, bd, Bv);
  set_var(s, "conv2d/kernel", LOOM_F32, 4, ckd, CK);
  double l2 = 0, l1b = 0, c1 = 0, c2 = 0;
  for (int i = 0; i < 6; i++) l2 += (double)K[i] * K[i];
  l2 *= 0.1 / 2;
  l1b = 0.5 * (1 + 2);
  for (int i = 0; i < 8; i++) c1 += fabs(CK[i]), c2 += (double)CK[i] * CK[i];
  double cl = 0.01 * c1 + 0.2 * c2 / 2;
  double want[3] = {l2, l1b, cl};
  for (int i = 0; i < 3; i++) {
    loom_tensor *t = fetch(s, ls[i], 0, NULL, NULL);
    expect_vals(t, 0, NULL, &want[i], 1e-6, loom_node_name(ls[i].node));
    loom_tensor_free(t);
  }
  loom_tensor *t = fetch(s, total, 0, NULL, NULL);
  double sum = l2 + l1b + cl;
  expect_vals(t, 0, NULL, &sum, 1e-6, "total");
  loom_tensor_free(t);
  loom_session_free(s);
  /* standalone apply; none; negative scale */
  loom_regularizer none = loom_no_regularizer();
  cr_assert_null(loom_regularizer_apply(g, &none, x, NULL).node);
  loom_regularizer neg = loom_l1_regularizer(-1);
  loom_regularizer_apply(g, &neg, x, NULL);
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "Setting a scale less than 0 on a regularizer");
  loom_graph_free(g);
  /* empty collection: constant 0 */
  g = loom_graph_new();
  loom_output z = loom_losses_get_regularization_loss(g, NULL, NULL);
  loom_tensor *zv = tu_run1(g, 0, NULL, NULL, z);
  double zero = 0;
  expect_vals(zv, 0, NULL, &zero, 0, "empty total");
  loom_tensor_free(zv);
  cr_assert_null(loom_group_collection(g, LOOM_UPDATE_OPS, NULL));
  loom_graph_free(g);
}

/* ======================================================================
 * embedding lookups
 * ====================================================================== */
Test(embedding, ragged_sum_mean_sqrtn_with_empty_rows) {
  /* ragged ids: [[1, 3], [], [0, 3, 3], [2]] */
  int64_t splits[5] = {0, 2, 2, 5, 6}, ids[6] = {1, 3, 0, 3, 3, 2};
  int64_t sd[1] = {5};
  loom_status *st = loom_status_new();
  loom_tensor *rs = loom_tensor_from_data(LOOM_I64, 1, sd, splits, NULL), *seg = NULL;
  int64_t nrows = -1;
  cr_assert_eq(loom_row_splits_to_segment_ids(rs, &seg, &nrows, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(nrows, 4);
  cr_assert_eq(loom_tensor_numel(seg), 6);
  const int64_t *sp = loom_tensor_data(seg);
  int64_t wseg[6] = {0, 0, 2, 2, 2, 3};
  for (int i = 0; i < 6; i++) cr_assert_eq(sp[i], wseg[i], "segment_ids[%d] = %lld", i, (long long)sp[i]);
  /* reuse the output tensor; int32 splits */
  int32_t s32[3] = {0, 1, 3};
  int64_t s3[1] = {3};
  loom_tensor *rs32 = loom_tensor_from_data(LOOM_I32, 1, s3, s32, NULL), *seg32 = NULL;
  cr_assert_eq(loom_row_splits_to_segment_ids(rs32, &seg32, NULL, st), LOOM_OK);
  cr_assert_eq(loom_tensor_dtype(seg32), LOOM_I32);
  cr_assert_eq(((int32_t *)loom_tensor_data(seg32))[2], 1);
  /* bad splits */
  int64_t bad[3] = {0, 3, 2};
  loom_tensor *rb = loom_tensor_from_data(LOOM_I64, 1, s3, bad, NULL), *sb = NULL;
  cr_assert_eq(loom_row_splits_to_segment_ids(rb, &sb, NULL, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "row_splits[2] = 2 is less than row_splits[1] = 3"), "%s",
            loom_status_message(st));
  int64_t bad0[3] = {1, 3, 4};
  loom_tensor *rb0 = loom_tensor_from_data(LOOM_I64, 1, s3, bad0, NULL);
  cr_assert_eq(loom_row_splits_to_segment_ids(rb0, &sb, NULL, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "row_splits[0] = 1, must be 0"));

  static const char *comb[3] = {"sum", "mean", "sqrtn"};
  float P[4 * 2] = {1, 2, 10, 20, 100, 200, 1000, 2000};
  int64_t pd[2] = {4, 2}, nd[1] = {-1};
  for (int k = 0; k < 3; k++) {
    loom_graph *g = loom_graph_new();
    loom_output params = loom_const_data(g, LOOM_F32, 2, pd, P, "params");
    loom_output idp = loom_placeholder(g, LOOM_I64, 1, nd, "ids");
    loom_output sgp = loom_placeholder(g, LOOM_I64, 1, nd, "seg");
    loom_output y = loom_embedding_lookup_sparse(g, params, idp, sgp, 4, comb[k], NULL);
    int64_t yd[2] = {4, 2};
    expect_static_dims(y, 2, yd, comb[k]);
    loom_tensor *iv = loom_tensor_from_data(LOOM_I64, 1, (int64_t[]){6}, ids, NULL);
    loom_output feeds[2] = {idp, sgp};
    loom_tensor *vals[2] = {iv, seg};
    loom_tensor *yv = tu_run1(g, 2, feeds, vals, y);
    double want[8] = {0};
    for (int r = 0; r < 4; r++) {
      int cnt = 0;
      for (int i = 0; i < 6; i++) {
        if (wseg[i] != r) continue;
        cnt++;
        for (int j = 0; j < 2; j++) want[r * 2 + j] += P[ids[i] * 2 + j];
      }
      for (int j = 0; j < 2 && cnt; j++)
        want[r * 2 + j] /= k == 0 ? 1.0 : k == 1 ? (double)cnt : sqrt((double)cnt);
    }
    expect_vals(yv, 2, yd, want, 1e-6, comb[k]);
    loom_tensor_free(yv);
    loom_tensor_free(iv);
    loom_graph_free(g);
  }
  /* plain lookup and a bad combiner */
  loom_graph *g = loom_graph_new();
  loom_output params = loom_const_data(g, LOOM_F32, 2, pd, P, "params");
  loom_output e = loom_embedding_lookup(g, params, loom_const_data(g, LOOM_I64, 1, (int64_t[]){2},
                                                                   (int64_t[]){3, 0}, "i"), NULL);
  loom_tensor *ev = tu_run1(g, 0, NULL, NULL, e);
  double we[4] = {1000, 2000, 1, 2};
  expect_vals(ev, 2, (int64_t[]){2, 2}, we, 0, "embedding_lookup");
  loom_tensor_free(ev);
  loom_embedding_lookup_sparse(g, params, e, e, 2, "max", "emb");
  expect_graph_error(g, LOOM_INVALID_ARGUMENT, "emb: combiner must be one of 'mean', 'sqrtn' or 'sum', got 'max'");
  loom_graph_free(g);
  loom_tensor_free(rs);
  loom_tensor_free(seg);
  loom_tensor_free(rs32);
  loom_tensor_free(seg32);
  loom_tensor_free(rb);
  loom_tensor_free(rb0);
  loom_tensor_free(sb);
  loom_status_free(st);
}

/* ======================================================================
 * gradient checks over layer compositions: central differences of
 * loss = sum(y * w) (fixed random w) against loom_gradients, for the input
 * (a placeholder) and the layer variables (set with assign_variable).
 * ====================================================================== */
typedef struct gc_param {
  loom_output x;    /* placeholder or variable output */
  const char *var;  /* variable name, NULL for the placeholder */
  loom_tensor *val; /* its value */
} gc_param;

static double get_d(loom_tensor *t, int64_t i) {
  return loom_tensor_dtype(t) == LOOM_F64 ? ((double *)loom_tensor_data(t))[i] : ((float *)loom_tensor_data(t))[i];
}
static void set_d(loom_tensor *t, int64_t i, double v) {
  if (loom_tensor_dtype(t) == LOOM_F64) ((double *)loom_tensor_data(t))[i] = v;
  else ((float *)loom_tensor_data(t))[i] = (float)v;
}

static double gc_loss(loom_session *s, int np, gc_param *p, int ifeed, loom_output loss) {
  loom_status *st = loom_status_new();
  for (int i = 0; i < np; i++)
    if (p[i].var) cr_assert_eq(loom_session_assign_variable(s, p[i].var, p[i].val, st), LOOM_OK);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_session_run(s, &p[ifeed].x, &p[ifeed].val, 1, &loss, &out, 1, NULL, 0, st), LOOM_OK, "%s",
               loom_status_message(st));
  double v = get_d(out, 0);
  loom_tensor_free(out);
  loom_status_free(st);
  return v;
}

/* p[0] must be the fed placeholder; the rest variables. Values are filled
 * uniformly from [lo, hi]. */
static void grad_check(loom_graph *g, loom_output y, int np, gc_param *p, double lo, double hi, const char *label) {
  loom_dtype dt = loom_output_dtype(y);
  for (int i = 0; i < np; i++) {
    int64_t d[LOOM_MAX_DIMS];
    int nd = loom_output_dims(p[i].x, d);
    p[i].val = loom_tensor_new(dt, nd, d, NULL);
    for (int64_t k = 0; k < loom_tensor_numel(p[i].val); k++) set_d(p[i].val, k, lo + (hi - lo) * 0.5 * (urand() + 1));
  }
  int64_t yd[LOOM_MAX_DIMS];
  int yn = loom_output_dims(y, yd);
  loom_tensor *wv = loom_tensor_new(dt, yn, yd, NULL);
  for (int64_t k = 0; k < loom_tensor_numel(wv); k++) set_d(wv, k, 0.5 + 0.5 * (urand() + 1));
  loom_output w = loom_const(g, wv, "w");
  loom_output loss = loom_reduce_sum(g, loom_mul(g, y, w, NULL), -1, NULL, 0, "gc_loss");
  loom_output xs[8], gr[8];
  for (int i = 0; i < np; i++) xs[i] = p[i].x;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients(g, 1, &loss, NULL, np, xs, gr, st), LOOM_OK, "%s: %s", label, loom_status_message(st));
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_node(s, init, 0, NULL, NULL); /* variables not checked keep their initial values */
  double eps = dt == LOOM_F64 ? 1e-6 : 1e-2, tol = dt == LOOM_F64 ? 1e-6 : 2e-2;
  for (int i = 0; i < np; i++) {
    cr_assert(gr[i].node, "%s: no gradient for parameter %d", label, i);
    for (int j = 0; j < np; j++) /* undo the last perturbation */
      if (p[j].var) cr_assert_eq(loom_session_assign_variable(s, p[j].var, p[j].val, st), LOOM_OK);
    loom_tensor *an = NULL;
    cr_assert_eq(loom_session_run(s, &p[0].x, &p[0].val, 1, &gr[i], &an, 1, NULL, 0, st), LOOM_OK, "%s: %s", label,
                 loom_status_message(st));
    int64_t n = loom_tensor_numel(p[i].val);
    cr_assert_eq(loom_tensor_numel(an), n);
    int64_t step = n > 24 ? n / 24 : 1;
    for (int64_t k = 0; k < n; k += step) {
      double x0 = get_d(p[i].val, k);
      set_d(p[i].val, k, x0 + eps);
      double lp = gc_loss(s, np, p, 0, loss);
      set_d(p[i].val, k, x0 - eps);
      double lm = gc_loss(s, np, p, 0, loss);
      set_d(p[i].val, k, x0);
      double num = (lp - lm) / (2 * eps), a = get_d(an, k);
      cr_assert(fabs(num - a) <= tol * (1 + fabs(num)), "%s: d/d%s[%lld]: analytic %.9g numeric %.9g", label,
                p[i].var ? p[i].var : "x", (long long)k, a, num);
    }
    loom_tensor_free(an);
  }
  for (int i = 0; i < np; i++) loom_tensor_free(p[i].val);
  loom_tensor_free(wv);
  loom_status_free(st);
  loom_session_free(s);
}

static void dense_grad_case(loom_dtype dt, const char *act) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {3, 4};
  loom_output x = loom_placeholder(g, dt, 2, xd, "x");
  loom_dense_options o = loom_dense_options_default();
  o.activation = act;
  loom_output h = loom_layers_dense(g, x, 5, &o, NULL);
  loom_output y = loom_layers_dense(g, h, 2, NULL, NULL);
  gc_param p[5] = {{x, NULL, NULL},
                   {loom_variable_output(loom_graph_variable(g, "dense/kernel")), "dense/kernel", NULL},
                   {loom_variable_output(loom_graph_variable(g, "dense/bias")), "dense/bias", NULL},
                   {loom_variable_output(loom_graph_variable(g, "dense_1/kernel")), "dense_1/kernel", NULL},
                   {loom_variable_output(loom_graph_variable(g, "dense_1/bias")), "dense_1/bias", NULL}};
  char label[64];
  snprintf(label, sizeof label, "dense+%s %s", act, loom_dtype_name(dt));
  grad_check(g, y, 5, p, -1, 1, label);
  loom_graph_free(g);
}

Test(gradients, dense_with_activations) {
  dense_grad_case(LOOM_F32, "tanh");
  dense_grad_case(LOOM_F64, "tanh");
  dense_grad_case(LOOM_F64, "sigmoid");
  dense_grad_case(LOOM_F64, "elu");
  dense_grad_case(LOOM_F64, "softplus");
  dense_grad_case(LOOM_F64, "gelu");
}

static void conv_pool_grad_case(loom_dtype dt, int maxpool, const char *padding) {
  loom_graph *g = loom_graph_new();
  int64_t xd[4] = {2, 6, 6, 2}, ks[2] = {3, 3}, p2[2] = {2, 2};
  loom_output x = loom_placeholder(g, dt, 4, xd, "x");
  loom_conv2d_options o = loom_conv2d_options_default();
  o.activation = "tanh";
  o.padding = padding;
  loom_output h = loom_layers_conv2d(g, x, 3, ks, &o, NULL);
  h = maxpool ? loom_layers_max_pooling2d(g, h, p2, NULL, padding, NULL)
              : loom_layers_average_pooling2d(g, h, p2, NULL, padding, NULL);
  h = loom_layers_flatten(g, h, NULL);
  loom_output y = loom_layers_dense(g, h, 2, NULL, NULL);
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  gc_param p[4] = {{x, NULL, NULL},
                   {loom_variable_output(loom_graph_variable(g, "conv2d/kernel")), "conv2d/kernel", NULL},
                   {loom_variable_output(loom_graph_variable(g, "conv2d/bias")), "conv2d/bias", NULL},
                   {loom_variable_output(loom_graph_variable(g, "dense/kernel")), "dense/kernel", NULL}};
  char label[64];
  snprintf(label, sizeof label, "conv+%s %s %s", maxpool ? "maxpool" : "avgpool", padding, loom_dtype_name(dt));
  grad_check(g, y, 4, p, -1, 1, label);
  loom_graph_free(g);
}

Test(gradients, conv_pool_flatten_dense) {
  conv_pool_grad_case(LOOM_F64, 1, "valid");
  conv_pool_grad_case(LOOM_F64, 0, "same");
  conv_pool_grad_case(LOOM_F64, 1, "same");
  conv_pool_grad_case(LOOM_F32, 0, "valid");
}

static void bn_grad_case(loom_dtype dt, int rank4) {
  loom_graph *g = loom_graph_new();
  int64_t xd4[4] = {3, 2, 2, 3}, xd2[2] = {6, 3};
  loom_output x = loom_placeholder(g, dt, rank4 ? 4 : 2, rank4 ? xd4 : xd2, "x");
  loom_batch_norm_options o = loom_batch_norm_options_default();
  o.training = 1;
  loom_output y = loom_layers_batch_normalization(g, x, &o, NULL);
  y = loom_tanh(g, y, NULL);
  gc_param p[3] = {{x, NULL, NULL},
                   {loom_variable_output(loom_graph_variable(g, "batch_normalization/gamma")),
                    "batch_normalization/gamma", NULL},
                   {loom_variable_output(loom_graph_variable(g, "batch_normalization/beta")),
                    "batch_normalization/beta", NULL}};
  grad_check(g, y, 3, p, -2, 2, rank4 ? "batch norm (training) NHWC" : "batch norm (training) [N,C]");
  loom_graph_free(g);
}

Test(gradients, batch_norm_training_mode) {
  bn_grad_case(LOOM_F64, 1);
  bn_grad_case(LOOM_F64, 0);
  bn_grad_case(LOOM_F32, 1);
}

Test(gradients, embedding_sparse_params) {
  loom_graph *g = loom_graph_new();
  int64_t pd[2] = {5, 3};
  loom_output params = loom_placeholder(g, LOOM_F64, 2, pd, "params");
  int64_t ids[5] = {4, 1, 1, 0, 3}, seg[5] = {0, 0, 1, 2, 2};
  loom_output idc = loom_const_data(g, LOOM_I64, 1, (int64_t[]){5}, ids, "ids");
  loom_output sgc = loom_const_data(g, LOOM_I64, 1, (int64_t[]){5}, seg, "seg");
  loom_output y = loom_embedding_lookup_sparse(g, params, idc, sgc, 4, "sqrtn", NULL);
  gc_param p[1] = {{params, NULL, NULL}};
  grad_check(g, y, 1, p, -1, 1, "embedding_lookup_sparse sqrtn");
  loom_graph_free(g);
}
