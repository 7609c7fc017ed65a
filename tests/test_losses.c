/* Losses (tf.compat.v1.losses): every loss under every reduction and several
 * weight shapes (including zero weights) against reference loops in double,
 * a few literal hand-computed values, label smoothing, collections,
 * regularization and total loss, unknown batch sizes, gradients, and shape
 * errors that name the loss's scope. */
#include "test_util.h"

/* ------------------------------------------------------------- helpers */
static loom_output cf(loom_graph *g, int ndim, const int64_t *dims, const float *v) {
  return loom_const_data(g, LOOM_F32, ndim, dims, v, NULL);
}

static loom_code graph_err(loom_graph *g, char *msg, size_t cap) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_graph_status(g, st);
  snprintf(msg, cap, "%s", loom_status_message(st));
  loom_status_free(st);
  return rc;
}

static double run_scalar(loom_graph *g, loom_output o) {
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, o);
  cr_assert_eq(loom_tensor_numel(t), 1);
  double v = loom_tensor_dtype(t) == LOOM_F64 ? *(const double *)loom_tensor_data_const(t)
                                               : *(const float *)loom_tensor_data_const(t);
  loom_tensor_free(t);
  return v;
}

static void expect_near(double got, double want, double tol, const char *what) {
  cr_assert(fabs(got - want) <= tol * (1.0 + fabs(want)), "%s: got %.9g want %.9g", what, got, want);
}

/* Reference reduction of per-element losses L[n] with broadcast weights W[n]
 * (NULL = 1). NONE is handled by the caller. */
static double ref_reduce(const double *L, const double *W, int n, int reduction) {
  double s = 0, sw = 0, nz = 0;
  for (int i = 0; i < n; i++) {
    double w = W ? W[i] : 1.0;
    s += w * L[i];
    sw += w;
    nz += w != 0.0;
  }
  switch (reduction) {
  case LOOM_REDUCTION_SUM: return s;
  case LOOM_REDUCTION_MEAN: return sw == 0 ? 0 : s / sw;
  case LOOM_REDUCTION_SUM_OVER_BATCH_SIZE: return n == 0 ? 0 : s / n;
  default: return nz == 0 ? 0 : s / nz;
  }
}

static const int REDUCTIONS[] = {LOOM_REDUCTION_NONE, LOOM_REDUCTION_SUM, LOOM_REDUCTION_MEAN,
                                 LOOM_REDUCTION_SUM_OVER_BATCH_SIZE, LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS};
static const char *const RED_NAMES[] = {"NONE", "SUM", "MEAN", "SUM_OVER_BATCH_SIZE", "SUM_BY_NONZERO_WEIGHTS"};

/* Weight cases for a [R, C] per-element loss. */
typedef struct wcase {
  const char *name;
  int ndim; /* -1: no weights */
  int64_t dims[2];
  float v[12];
} wcase;

static void bcast_weights(const wcase *w, int R, int C, double *W) {
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      int64_t wi = 0;
      if (w->ndim == 2) wi = (w->dims[0] == 1 ? 0 : i) * w->dims[1] + (w->dims[1] == 1 ? 0 : j);
      if (w->ndim == 1) wi = w->dims[0] == 1 ? 0 : (C == 1 ? i : j);
      W[i * C + j] = w->v[wi];
    }
}

/* --------------------------------------------------- elementwise losses */
enum { K_MSE, K_ABS, K_HUBER, K_LOG, K_HINGE, K_SIGMOID, K_SIGMOID_SMOOTH, K_COUNT };
static const char *const KNAMES[] = {"mean_squared_error", "absolute_difference", "huber_loss", "log_loss",
                                     "hinge_loss", "sigmoid_cross_entropy_loss", "sigmoid_cross_entropy_loss"};

static const float LAB01[12] = {0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0};
static const float PROB[12] = {0.1f, 0.8f, 0.6f, 0.3f, 0.95f, 0.5f, 0.2f, 0.7f, 0.4f, 0.05f, 0.99f, 0.01f};
static const float LABR[12] = {0.5f, -1.0f, 2.0f, 3.0f, 0.0f, 1.5f, -2.0f, 0.25f, 4.0f, -0.5f, 1.0f, 2.0f};
static const float PREDR[12] = {1.0f, -3.0f, 2.2f, 0.5f, 0.1f, 1.4f, 1.0f, 0.25f, 2.5f, -0.4f, -1.0f, 2.9f};
static const float LOGITS[12] = {2.0f, -1.0f, 0.5f, -3.0f, 0.0f, 1.5f, -0.7f, 4.0f, -2.5f, 0.3f, 1.0f, -0.2f};

static double ref_elem(int kind, double l, double p) {
  switch (kind) {
  case K_MSE: return (p - l) * (p - l);
  case K_ABS: return fabs(p - l);
  case K_HUBER: {
    double e = fabs(p - l), q = e < 1.0 ? e : 1.0;
    return 0.5 * q * q + 1.0 * (e - q);
  }
  case K_LOG: return -l * log(p + 1e-7) - (1 - l) * log(1 - p + 1e-7);
  case K_HINGE: {
    double v = 1 - (2 * l - 1) * p;
    return v > 0 ? v : 0;
  }
  case K_SIGMOID_SMOOTH: l = l * (1 - 0.2) + 0.5 * 0.2; /* fall through */
  default: return (p > 0 ? p : 0) - p * l + log1p(exp(-fabs(p)));
  }
}

static void elem_inputs(int kind, const float **lab, const float **pred) {
  switch (kind) {
  case K_MSE:
  case K_ABS:
  case K_HUBER: *lab = LABR, *pred = PREDR; break;
  case K_LOG: *lab = LAB01, *pred = PROB; break;
  default: *lab = LAB01, *pred = LOGITS; break;
  }
}

static loom_output build_elem(loom_graph *g, int kind, loom_output l, loom_output p, loom_output w, int red) {
  switch (kind) {
  case K_MSE: return loom_losses_mean_squared_error(g, l, p, w, NULL, NULL, red);
  case K_ABS: return loom_losses_absolute_difference(g, l, p, w, NULL, NULL, red);
  case K_HUBER: return loom_losses_huber_loss(g, l, p, w, 1.0, NULL, NULL, red);
  case K_LOG: return loom_losses_log_loss(g, l, p, w, 1e-7, NULL, NULL, red);
  case K_HINGE: return loom_losses_hinge_loss(g, l, p, w, NULL, NULL, red);
  case K_SIGMOID: return loom_losses_sigmoid_cross_entropy(g, l, p, w, 0.0, NULL, NULL, red);
  default: return loom_losses_sigmoid_cross_entropy(g, l, p, w, 0.2, NULL, NULL, red);
  }
}

static const wcase ELEM_W[] = {
    {"none", -1, {0, 0}, {0}},
    {"scalar 0.5", 0, {0, 0}, {0.5f}},
    {"scalar 0", 0, {0, 0}, {0.0f}},
    {"rows [3,1] with a zero", 2, {3, 1}, {1.0f, 0.0f, 2.0f}},
    {"cols [1,4] with a zero", 2, {1, 4}, {0.0f, 1.0f, 1.0f, 3.0f}},
    {"full [3,4] with zeros", 2, {3, 4}, {1, 0, 2, 0.5f, 0, 0, 3, 1, 1, 1, 0, 2}},
    {"all zero [3,4]", 2, {3, 4}, {0}},
};

static void check_elem_loss(int kind) {
  const int R = 3, C = 4;
  int64_t d[2] = {R, C};
  const float *lab, *pred;
  elem_inputs(kind, &lab, &pred);
  double L[12];
  for (int i = 0; i < 12; i++) L[i] = ref_elem(kind, lab[i], pred[i]);
  for (size_t wc = 0; wc < sizeof ELEM_W / sizeof ELEM_W[0]; wc++) {
    const wcase *w = &ELEM_W[wc];
    double W[12];
    if (w->ndim >= 0) bcast_weights(w, R, C, W);
    for (int r = 0; r < 5; r++) {
      int red = REDUCTIONS[r];
      loom_graph *g = loom_graph_new();
      loom_output wo = w->ndim < 0 ? (loom_output){NULL, 0} : cf(g, w->ndim, w->dims, w->v);
      loom_output loss = build_elem(g, kind, cf(g, 2, d, lab), cf(g, 2, d, pred), wo, red);
      loom_tensor *t = tu_run1(g, 0, NULL, NULL, loss);
      const float *got = loom_tensor_data_const(t);
      if (red == LOOM_REDUCTION_NONE) {
        cr_assert_eq(loom_tensor_numel(t), 12, "%s/%s/%s: numel", KNAMES[kind], w->name, RED_NAMES[r]);
        for (int i = 0; i < 12; i++) {
          double want = (w->ndim >= 0 ? W[i] : 1.0) * L[i];
          cr_assert(fabs(got[i] - want) <= 2e-5 * (1 + fabs(want)), "%s/%s/NONE[%d]: got %.9g want %.9g",
                    KNAMES[kind], w->name, i, (double)got[i], want);
        }
      } else {
        cr_assert_eq(loom_tensor_ndim(t), 0);
        double want = ref_reduce(L, w->ndim >= 0 ? W : NULL, 12, red);
        cr_assert(fabs(got[0] - want) <= 2e-5 * (1 + fabs(want)), "%s/%s/%s: got %.9g want %.9g", KNAMES[kind],
                  w->name, RED_NAMES[r], (double)got[0], want);
      }
      loom_tensor_free(t);
      loom_graph_free(g);
    }
  }
}

Test(losses, mean_squared_error_all_reductions) { check_elem_loss(K_MSE); }
Test(losses, absolute_difference_all_reductions) { check_elem_loss(K_ABS); }
Test(losses, huber_all_reductions) { check_elem_loss(K_HUBER); }
Test(losses, log_loss_all_reductions) { check_elem_loss(K_LOG); }
Test(losses, hinge_all_reductions) { check_elem_loss(K_HINGE); }
Test(losses, sigmoid_cross_entropy_all_reductions) { check_elem_loss(K_SIGMOID); }
Test(losses, sigmoid_cross_entropy_label_smoothing) { check_elem_loss(K_SIGMOID_SMOOTH); }

/* Literal values worked out by hand. */
Test(losses, hand_computed_values) {
  int64_t d[1] = {4};
  float l[4] = {1, 2, 3, 4}, p[4] = {2, 2, 1, 4}, w[4] = {1, 0, 2, 0};
  loom_graph *g = loom_graph_new();
  loom_output L = cf(g, 1, d, l), P = cf(g, 1, d, p), W = cf(g, 1, d, w);
  /* squared errors 1,0,4,0; weighted 1,0,8,0 = 9 */
  loom_output nz = loom_losses_mean_squared_error(g, L, P, W, NULL, NULL, LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS);
  loom_output sum = loom_losses_mean_squared_error(g, L, P, W, NULL, NULL, LOOM_REDUCTION_SUM);
  loom_output mean = loom_losses_mean_squared_error(g, L, P, W, NULL, NULL, LOOM_REDUCTION_MEAN);
  loom_output sob = loom_losses_mean_squared_error(g, L, P, W, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_output plain = loom_losses_mean_squared_error(g, L, P, (loom_output){NULL, 0}, NULL, NULL, 0);
  /* huber delta 1: errors 1,0,2,0 -> 0.5, 0, 1.5, 0 */
  loom_output hub = loom_losses_huber_loss(g, L, P, (loom_output){NULL, 0}, 1.0, NULL, NULL, LOOM_REDUCTION_SUM);
  /* huber delta 3: 0.5, 0, 2, 0 */
  loom_output hub3 = loom_losses_huber_loss(g, L, P, (loom_output){NULL, 0}, 3.0, NULL, NULL, LOOM_REDUCTION_SUM);
  expect_near(run_scalar(g, nz), 9.0 / 2.0, 1e-6, "SUM_BY_NONZERO_WEIGHTS");
  expect_near(run_scalar(g, sum), 9.0, 1e-6, "SUM");
  expect_near(run_scalar(g, mean), 9.0 / 3.0, 1e-6, "MEAN");
  expect_near(run_scalar(g, sob), 9.0 / 4.0, 1e-6, "SUM_OVER_BATCH_SIZE");
  expect_near(run_scalar(g, plain), 5.0 / 4.0, 1e-6, "unweighted default");
  expect_near(run_scalar(g, hub), 2.0, 1e-6, "huber");
  expect_near(run_scalar(g, hub3), 2.5, 1e-6, "huber delta 3");
  loom_graph_free(g);

  /* hinge: labels {0,1}, logits {0.5,-2}: relu(1+0.5)=1.5, relu(1-(-2))=3 */
  g = loom_graph_new();
  int64_t d2[1] = {2};
  float hl[2] = {0, 1}, hx[2] = {0.5f, -2.0f};
  loom_output h = loom_losses_hinge_loss(g, cf(g, 1, d2, hl), cf(g, 1, d2, hx), (loom_output){NULL, 0}, NULL, NULL,
                                         LOOM_REDUCTION_SUM);
  expect_near(run_scalar(g, h), 4.5, 1e-6, "hinge");
  loom_graph_free(g);

  /* softmax CE of uniform logits over 4 classes = log 4; with weight 0 on
   * one of two rows and SUM_BY_NONZERO_WEIGHTS -> log 4 */
  g = loom_graph_new();
  int64_t d3[2] = {2, 4}, d4[1] = {2};
  float z[8] = {0}, oh[8] = {1, 0, 0, 0, 0, 0, 1, 0}, w2[2] = {0, 3};
  loom_output s = loom_losses_softmax_cross_entropy(g, cf(g, 2, d3, oh), cf(g, 2, d3, z), cf(g, 1, d4, w2), 0, NULL,
                                                    NULL, 0);
  expect_near(run_scalar(g, s), 3 * log(4.0), 1e-5, "softmax uniform");
  loom_graph_free(g);
}

/* ------------------------------------------------ per-example losses */
static const float SM_LOGITS[12] = {1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 0.0f, 3.0f, 1.0f, -2.0f, 1.0f, 0.5f, 0.25f};
static const float SM_LABELS[12] = {0, 1, 0, 0, 0.25f, 0.25f, 0.5f, 0, 1, 0, 0, 0};
static const int32_t SP_LABELS[3] = {1, 2, 0};

static void ref_softmax_ce(const float *logits, const float *labels, double smoothing, double *out) {
  for (int i = 0; i < 3; i++) {
    double mx = -1e30, se = 0;
    for (int j = 0; j < 4; j++) mx = fmax(mx, logits[i * 4 + j]);
    for (int j = 0; j < 4; j++) se += exp(logits[i * 4 + j] - mx);
    double lse = mx + log(se), loss = 0;
    for (int j = 0; j < 4; j++) {
      double y = labels[i * 4 + j] * (1 - smoothing) + smoothing / 4;
      loss -= y * (logits[i * 4 + j] - lse);
    }
    out[i] = loss;
  }
}

static const wcase ROW_W[] = {
    {"none", -1, {0, 0}, {0}},
    {"scalar 2", 0, {0, 0}, {2.0f}},
    {"scalar 0", 0, {0, 0}, {0.0f}},
    {"[3] with a zero", 1, {3, 0}, {0.5f, 0.0f, 4.0f}},
    {"[3] all zero", 1, {3, 0}, {0, 0, 0}},
};

enum { P_SOFTMAX, P_SOFTMAX_SMOOTH, P_SPARSE, P_SPARSE_W2D, P_COSINE };

static void check_row_loss(int which) {
  double L[3];
  float onehot[12] = {0};
  for (int i = 0; i < 3; i++) onehot[i * 4 + SP_LABELS[i]] = 1;
  if (which == P_SOFTMAX) ref_softmax_ce(SM_LOGITS, SM_LABELS, 0, L);
  if (which == P_SOFTMAX_SMOOTH) ref_softmax_ce(SM_LOGITS, SM_LABELS, 0.1, L);
  if (which == P_SPARSE || which == P_SPARSE_W2D) ref_softmax_ce(SM_LOGITS, onehot, 0, L);
  float cl[12], cp[12];
  if (which == P_COSINE) { /* unit rows */
    for (int i = 0; i < 3; i++) {
      double nl = 0, np = 0;
      for (int j = 0; j < 4; j++) nl += SM_LOGITS[i * 4 + j] * SM_LOGITS[i * 4 + j], np += LABR[i * 4 + j] * LABR[i * 4 + j];
      double dot = 0;
      for (int j = 0; j < 4; j++) {
        cl[i * 4 + j] = (float)(SM_LOGITS[i * 4 + j] / sqrt(nl));
        cp[i * 4 + j] = (float)(LABR[i * 4 + j] / sqrt(np));
        dot += (double)cl[i * 4 + j] * cp[i * 4 + j];
      }
      L[i] = 1 - dot;
    }
  }
  int64_t d2[2] = {3, 4};
  for (size_t wc = 0; wc < sizeof ROW_W / sizeof ROW_W[0]; wc++) {
    const wcase *w = &ROW_W[wc];
    double W[3];
    for (int i = 0; i < 3; i++) W[i] = w->ndim == 1 ? w->v[i] : w->v[0];
    for (int r = 0; r < 5; r++) {
      int red = REDUCTIONS[r];
      loom_graph *g = loom_graph_new();
      loom_output wo = {NULL, 0};
      if (w->ndim >= 0) {
        int64_t wd[2] = {3, 1};
        if (which == P_SPARSE_W2D && w->ndim == 1)
          wo = cf(g, 2, wd, w->v); /* [3,1], squeezed like TF */
        else if (which == P_COSINE && w->ndim == 1)
          wo = cf(g, 2, wd, w->v); /* cosine losses are [3,1] */
        else
          wo = cf(g, w->ndim, w->dims, w->v);
      }
      loom_output loss;
      if (which == P_SOFTMAX || which == P_SOFTMAX_SMOOTH) {
        loss = loom_losses_softmax_cross_entropy(g, cf(g, 2, d2, SM_LABELS), cf(g, 2, d2, SM_LOGITS), wo,
                                                 which == P_SOFTMAX ? 0.0 : 0.1, NULL, NULL, red);
      } else if (which == P_COSINE) {
        loss = loom_losses_cosine_distance(g, cf(g, 2, d2, cp), cf(g, 2, d2, cl), 1, wo, NULL, NULL, red);
      } else {
        int64_t d1[1] = {3};
        loom_output lab = loom_const_data(g, LOOM_I32, 1, d1, SP_LABELS, NULL);
        loss = loom_losses_sparse_softmax_cross_entropy(g, lab, cf(g, 2, d2, SM_LOGITS), wo, NULL, NULL, red);
      }
      loom_tensor *t = tu_run1(g, 0, NULL, NULL, loss);
      const float *got = loom_tensor_data_const(t);
      if (red == LOOM_REDUCTION_NONE) {
        cr_assert_eq(loom_tensor_numel(t), 3);
        for (int i = 0; i < 3; i++) {
          double want = (w->ndim >= 0 ? W[i] : 1.0) * L[i];
          cr_assert(fabs(got[i] - want) <= 2e-5 * (1 + fabs(want)), "case %d/%s/NONE[%d]: got %.9g want %.9g",
                    which, w->name, i, (double)got[i], want);
        }
      } else {
        double want = ref_reduce(L, w->ndim >= 0 ? W : NULL, 3, red);
        cr_assert(fabs(got[0] - want) <= 2e-5 * (1 + fabs(want)), "case %d/%s/%s: got %.9g want %.9g", which,
                  w->name, RED_NAMES[r], (double)got[0], want);
      }
      loom_tensor_free(t);
      loom_graph_free(g);
    }
  }
}

Test(losses, softmax_cross_entropy_all_reductions) { check_row_loss(P_SOFTMAX); }
Test(losses, softmax_cross_entropy_label_smoothing) { check_row_loss(P_SOFTMAX_SMOOTH); }
Test(losses, sparse_softmax_cross_entropy_all_reductions) { check_row_loss(P_SPARSE); }
Test(losses, sparse_softmax_cross_entropy_weights_2d_squeezed) { check_row_loss(P_SPARSE_W2D); }
Test(losses, cosine_distance_all_reductions) { check_row_loss(P_COSINE); }

/* As in TF (remove_squeezable_dimensions, expected rank difference 1), labels [batch, 1] are
 * squeezed against [batch, classes] logits: the loss of labels [batch]; labels [batch, 2] are a rank
 * error. TF 2.15 gives 1.6289292573928833 for these logits and labels {1, 2, 0}. */
Test(losses, sparse_labels_of_rank_of_logits_are_squeezed) {
  static const float LG[12] = {1, 2, 3, 4, 0, 1, 0, 1, 3, 2, 1, 0};
  int64_t d2[2] = {3, 4};
  for (int shape = 0; shape < 2; shape++) {
    loom_graph *g = loom_graph_new();
    int64_t dl[2] = {3, 1}, d1[1] = {3};
    loom_output lab = shape ? loom_const_data(g, LOOM_I64, 2, dl, (int64_t[]){1, 2, 0}, NULL)
                            : loom_const_data(g, LOOM_I64, 1, d1, (int64_t[]){1, 2, 0}, NULL);
    loom_output loss = loom_losses_sparse_softmax_cross_entropy(g, lab, cf(g, 2, d2, LG), (loom_output){NULL, 0},
                                                                NULL, NULL, LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS);
    loom_tensor *t = tu_run1(g, 0, NULL, NULL, loss);
    const float *got = loom_tensor_data_const(t);
    cr_assert(fabs(got[0] - 1.6289292573928833) < 1e-6, "labels of rank %d: %.9g", shape + 1, (double)got[0]);
    loom_tensor_free(t);
    loom_graph_free(g);
  }
  loom_graph *g = loom_graph_new();
  int64_t dl[2] = {3, 2};
  loom_output lab = loom_const_data(g, LOOM_I64, 2, dl, (int64_t[]){1, 1, 2, 2, 0, 0}, NULL);
  loom_losses_sparse_softmax_cross_entropy(g, lab, cf(g, 2, d2, LG), (loom_output){NULL, 0}, NULL, NULL, 0);
  char msg[512];
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "sparse_softmax_cross_entropy_loss") && strstr(msg, "[3,2]"), "%s", msg);
  loom_graph_free(g);
}

/* Losses of a batch of unknown size: the element counts come at run time. */
Test(losses, unknown_batch_size) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {-1, 4};
  loom_output l = loom_placeholder(g, LOOM_F32, 2, d, "l");
  loom_output p = loom_placeholder(g, LOOM_F32, 2, d, "p");
  int64_t wd[2] = {-1, 1};
  loom_output w = loom_placeholder(g, LOOM_F32, 2, wd, "w");
  loom_output sob = loom_losses_mean_squared_error(g, l, p, (loom_output){NULL, 0}, NULL, NULL,
                                                   LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_output nz = loom_losses_mean_squared_error(g, l, p, w, NULL, NULL, LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS);
  loom_output mean = loom_losses_mean_squared_error(g, l, p, w, NULL, NULL, LOOM_REDUCTION_MEAN);
  int64_t rd[2] = {3, 4}, rw[2] = {3, 1};
  float wv[3] = {1, 0, 2};
  loom_tensor *tl = tu_f32(2, rd, LABR), *tp = tu_f32(2, rd, PREDR), *tw = tu_f32(2, rw, wv);
  loom_output feeds[3] = {l, p, w};
  loom_tensor *vals[3] = {tl, tp, tw};
  double L[12], W[12];
  for (int i = 0; i < 12; i++) L[i] = ref_elem(K_MSE, LABR[i], PREDR[i]), W[i] = wv[i / 4];
  loom_output fetch[3] = {sob, nz, mean};
  int reds[3] = {LOOM_REDUCTION_SUM_OVER_BATCH_SIZE, LOOM_REDUCTION_SUM_BY_NONZERO_WEIGHTS, LOOM_REDUCTION_MEAN};
  for (int k = 0; k < 3; k++) {
    loom_tensor *t = tu_run1(g, 3, feeds, vals, fetch[k]);
    double want = ref_reduce(L, k ? W : NULL, 12, reds[k]);
    expect_near(*(const float *)loom_tensor_data_const(t), want, 2e-5, RED_NAMES[k + 2]);
    loom_tensor_free(t);
  }
  loom_tensor_free(tl);
  loom_tensor_free(tp);
  loom_tensor_free(tw);
  loom_graph_free(g);
}

Test(losses, float64_logits_keep_their_dtype) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {3, 4};
  double x[12], y[12];
  for (int i = 0; i < 12; i++) x[i] = SM_LOGITS[i], y[i] = SM_LABELS[i];
  loom_output loss = loom_losses_softmax_cross_entropy(g, loom_const_data(g, LOOM_F64, 2, d, y, NULL),
                                                       loom_const_data(g, LOOM_F64, 2, d, x, NULL),
                                                       (loom_output){NULL, 0}, 0, NULL, NULL, 0);
  cr_assert_eq(loom_output_dtype(loss), LOOM_F64);
  double L[3];
  ref_softmax_ce(SM_LOGITS, SM_LABELS, 0, L);
  /* like TF, compute_weighted_loss works in float32 and casts back */
  expect_near(run_scalar(g, loss), (L[0] + L[1] + L[2]) / 3, 1e-6, "f64 softmax");
  loom_graph_free(g);
}

/* ------------------------------------------------------- collections */
Test(losses, names_and_collections) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {4};
  loom_output l = cf(g, 1, d, LABR), p = cf(g, 1, d, PREDR);
  loom_output a = loom_losses_mean_squared_error(g, l, p, (loom_output){NULL, 0}, NULL, NULL, 0);
  loom_output b = loom_losses_mean_squared_error(g, l, p, (loom_output){NULL, 0}, NULL, NULL, 0);
  loom_output c = loom_losses_absolute_difference(g, l, p, (loom_output){NULL, 0}, "my_loss", "", 0);
  loom_output e = loom_losses_absolute_difference(g, l, p, (loom_output){NULL, 0}, NULL, "other", 0);
  loom_output s = loom_losses_mean_squared_error(g, l, p, (loom_output){NULL, 0}, NULL, NULL, LOOM_REDUCTION_SUM);
  cr_assert_str_eq(loom_node_name(a.node), "mean_squared_error/value");
  cr_assert_str_eq(loom_node_name(b.node), "mean_squared_error_1/value");
  cr_assert_str_eq(loom_node_name(c.node), "my_loss/value");
  cr_assert_str_eq(loom_node_name(s.node), "mean_squared_error_2/Sum");
  loom_output got[8];
  int n = loom_losses_get_losses(g, NULL, NULL, got, 8);
  cr_assert_eq(n, 3, "losses collection has %d", n);
  cr_assert(got[0].node == a.node && got[1].node == b.node && got[2].node == s.node);
  n = loom_losses_get_losses(g, NULL, "other", got, 8);
  cr_assert_eq(n, 1);
  cr_assert(got[0].node == e.node);
  cr_assert_eq(loom_losses_get_losses(g, "mean_squared_error_1", NULL, got, 8), 1);
  cr_assert(got[0].node == b.node);
  cr_assert_eq(loom_losses_get_losses(g, NULL, NULL, NULL, 0), 3);
  /* compute_weighted_loss on its own */
  loom_output wl = loom_losses_compute_weighted_loss(g, p, cf(g, 0, NULL, (float[]){2.0f}), NULL, "", 0);
  cr_assert_str_eq(loom_node_name(wl.node), "weighted_loss/value");
  double sp = 0;
  for (int i = 0; i < 4; i++) sp += 2.0 * PREDR[i];
  expect_near(run_scalar(g, wl), sp / 4, 1e-6, "compute_weighted_loss");
  loom_graph_free(g);
}

Test(losses, regularization_and_total_loss) {
  loom_graph *g = loom_graph_new();
  loom_output r0 = loom_losses_get_regularization_loss(g, NULL, NULL);
  expect_near(run_scalar(g, r0), 0.0, 0, "empty regularization");
  int64_t d[1] = {4};
  loom_output l = cf(g, 1, d, LABR), p = cf(g, 1, d, PREDR);
  loom_output a = loom_losses_mean_squared_error(g, l, p, (loom_output){NULL, 0}, NULL, NULL, 0);
  loom_output b = loom_losses_absolute_difference(g, l, p, (loom_output){NULL, 0}, NULL, NULL, LOOM_REDUCTION_SUM);
  double va = run_scalar(g, a), vb = run_scalar(g, b);
  loom_output t0 = loom_losses_get_total_loss(g, 1, NULL, NULL);
  cr_assert_str_eq(loom_node_name(t0.node), "total_loss");
  expect_near(run_scalar(g, t0), va + vb, 1e-6, "total without regularization");
  loom_graph_push_scope(g, "reg");
  loom_add_to_collection(g, LOOM_REGULARIZATION_LOSSES, loom_const_f32(g, 0.25f, "r1"));
  loom_graph_pop_scope(g);
  loom_add_to_collection(g, LOOM_REGULARIZATION_LOSSES, loom_const_f32(g, 1.5f, "r2"));
  loom_output r = loom_losses_get_regularization_loss(g, NULL, NULL);
  cr_assert_str_eq(loom_node_name(r.node), "total_regularization_loss");
  expect_near(run_scalar(g, r), 1.75, 1e-7, "regularization sum");
  expect_near(run_scalar(g, loom_losses_get_regularization_loss(g, "reg", "rs")), 0.25, 1e-7, "scoped");
  expect_near(run_scalar(g, loom_losses_get_total_loss(g, 1, NULL, "t1")), va + vb + 1.75, 1e-6, "total");
  expect_near(run_scalar(g, loom_losses_get_total_loss(g, 0, NULL, "t2")), va + vb, 1e-6, "total no reg");
  expect_near(run_scalar(g, loom_losses_get_total_loss(g, 1, "absolute", "t3")), vb, 1e-6, "total scoped");
  loom_graph_free(g);
}

Test(losses, total_loss_without_losses_is_an_error) {
  loom_graph *g = loom_graph_new();
  loom_losses_get_total_loss(g, 1, NULL, NULL);
  char msg[512];
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "total_loss") && strstr(msg, "no losses"), "%s", msg);
  loom_graph_free(g);
}

/* ------------------------------------------------------------ gradients */
Test(losses, gradients_flow_through_the_reductions) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {3, 4}, wd[2] = {3, 1};
  float wv[3] = {1, 0, 2};
  loom_output p = loom_placeholder(g, LOOM_F32, 2, d, "p");
  loom_output w = cf(g, 2, wd, wv);
  loom_output mse = loom_losses_mean_squared_error(g, cf(g, 2, d, LABR), p, w, NULL, NULL, 0);
  loom_output sm = loom_losses_softmax_cross_entropy(g, cf(g, 2, d, SM_LABELS), p, (loom_output){NULL, 0}, 0, NULL,
                                                     NULL, LOOM_REDUCTION_MEAN);
  loom_output gr[2];
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_gradients(g, 1, &mse, NULL, 1, &p, &gr[0], st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_gradients(g, 1, &sm, NULL, 1, &p, &gr[1], st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
  loom_tensor *tp = tu_f32(2, d, PREDR);
  loom_tensor *t0 = tu_run1(g, 1, &p, &tp, gr[0]);
  /* d/dp sum(w (p-l)^2) / nonzero = 2 w (p - l) / 8 (8 nonzero entries) */
  float want[12];
  for (int i = 0; i < 12; i++) want[i] = (float)(2.0 * wv[i / 4] * (PREDR[i] - LABR[i]) / 8.0);
  tu_expect_f32(t0, 2, d, want, 1e-5);
  loom_tensor *t1 = tu_run1(g, 1, &p, &tp, gr[1]);
  for (int i = 0; i < 3; i++) {
    double mx = -1e30, se = 0;
    for (int j = 0; j < 4; j++) mx = fmax(mx, PREDR[i * 4 + j]);
    for (int j = 0; j < 4; j++) se += exp(PREDR[i * 4 + j] - mx);
    for (int j = 0; j < 4; j++) want[i * 4 + j] = (float)((exp(PREDR[i * 4 + j] - mx) / se - SM_LABELS[i * 4 + j]) / 3);
  }
  tu_expect_f32(t1, 2, d, want, 1e-5);
  loom_tensor_free(t0);
  loom_tensor_free(t1);
  loom_tensor_free(tp);
  loom_graph_free(g);
}

/* --------------------------------------------------------------- errors */
Test(losses, shape_mismatch_names_the_loss) {
  loom_graph *g = loom_graph_new();
  int64_t a[2] = {2, 3}, b[2] = {2, 4};
  float z[8] = {0};
  loom_losses_mean_squared_error(g, cf(g, 2, a, z), cf(g, 2, b, z), (loom_output){NULL, 0}, NULL, NULL, 0);
  char msg[512];
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "mean_squared_error") && strstr(msg, "[2,4]") && strstr(msg, "[2,3]") &&
                strstr(msg, "incompatible"),
            "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_losses_sigmoid_cross_entropy(g, cf(g, 2, a, z), cf(g, 2, b, z), (loom_output){NULL, 0}, 0, "sce", NULL, 0);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "sce") && strstr(msg, "incompatible"), "%s", msg);
  loom_graph_free(g);
}

Test(losses, weights_not_broadcastable_names_the_loss) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {3, 4}, wd[1] = {4};
  float w[4] = {1, 1, 1, 1};
  /* TF: weights must be a scalar or have the losses' rank */
  loom_losses_absolute_difference(g, cf(g, 2, d, LABR), cf(g, 2, d, PREDR), cf(g, 1, wd, w), NULL, NULL, 0);
  char msg[512];
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "absolute_difference") && strstr(msg, "weights can not be broadcast"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t wd2[2] = {2, 4};
  float w2[8] = {0};
  loom_losses_hinge_loss(g, cf(g, 2, d, LAB01), cf(g, 2, d, LOGITS), cf(g, 2, wd2, w2), NULL, NULL, 0);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "hinge_loss") && strstr(msg, "weights.shape=[2,4]"), "%s", msg);
  loom_graph_free(g);
}

Test(losses, bad_arguments) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {3, 4}, d1[1] = {3};
  loom_losses_mean_squared_error(g, cf(g, 2, d, LABR), cf(g, 2, d, PREDR), (loom_output){NULL, 0}, NULL, NULL, 99);
  char msg[512];
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "mean_squared_error") && strstr(msg, "reduction"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  float fl[3] = {0, 1, 2};
  loom_losses_sparse_softmax_cross_entropy(g, cf(g, 1, d1, fl), cf(g, 2, d, SM_LOGITS), (loom_output){NULL, 0}, NULL,
                                           NULL, 0);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "sparse_softmax_cross_entropy_loss") && strstr(msg, "int32 or int64"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  int64_t d4[1] = {4};
  loom_output lab = loom_const_data(g, LOOM_I32, 1, d4, (int32_t[]){0, 1, 2, 0}, NULL);
  loom_losses_sparse_softmax_cross_entropy(g, lab, cf(g, 2, d, SM_LOGITS), (loom_output){NULL, 0}, NULL, NULL, 0);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "sparse_softmax_cross_entropy_loss") && strstr(msg, "batch"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_losses_cosine_distance(g, cf(g, 2, d, LABR), cf(g, 2, d, PREDR), 2, (loom_output){NULL, 0}, NULL, NULL, 0);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "cosine_distance_loss") && strstr(msg, "axis"), "%s", msg);
  loom_graph_free(g);

  /* a bad sparse label fails the run, naming the node */
  g = loom_graph_new();
  loom_output bad = loom_const_data(g, LOOM_I32, 1, d1, (int32_t[]){0, 7, 1}, NULL);
  loom_output loss =
      loom_losses_sparse_softmax_cross_entropy(g, bad, cf(g, 2, d, SM_LOGITS), (loom_output){NULL, 0}, NULL, NULL, 0);
  cr_assert_eq(tu_run_err(g, 0, NULL, NULL, loss, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "sparse_softmax_cross_entropy_loss/xentropy"), "%s", msg);
  loom_graph_free(g);
}
