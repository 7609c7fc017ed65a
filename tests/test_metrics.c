/* Streaming metrics (tf.compat.v1.metrics): every metric is streamed over
 * uneven batches (5, 2, 7 examples, with weights including zeros) and must
 * equal a reference computed once on the concatenated data; the update output
 * tracks the running value; the value output reads the state only (fetched
 * twice with no feeds); reset and the local-variables initializer zero the
 * state. AUC is checked against the exact sorted-pairs AUC on 500 random
 * scores; variable names, collections and errors are checked too. */
#include "test_util.h"

#define N 14
static const int BATCH_END[3] = {5, 7, 14};

/* ------------------------------------------------------------------ data */
static const float WT[N] = {1, 0.5f, 2, 0, 1, 1, 3, 0, 1, 2, 0.5f, 1, 1, 0};
static const int32_t YB[N] = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0};
static const float PB[N] = {0.9f, 0.2f, 0.6f, 0.4f, 0.5f, 0.05f, 0.8f, 0.7f, 0.3f, 0.99f, 0.0f, 1.0f, 0.45f, 0.55f};
static const float PBOOL[N] = {1, 0, 0.7f, 0, 1, 0, 2, 1, 0, 1, 0, 0.3f, 0, 1};
static const float YR[N] = {0.5f, -1, 2, 3, 0, 1.5f, -2, 0.25f, 4, -0.5f, 1, 2, 0.75f, -3};
static const float PR[N] = {1, -3, 2.2f, 0.5f, 0.1f, 1.4f, 1, 0.25f, 2.5f, -0.4f, -1, 2.9f, 0.7f, -2};
static const float NORM[N] = {1, 2, 0, 4, 0.5f, 1, 3, 0, 2, 1, 1, 0.5f, 2, 1};
static const int32_t YC[N] = {0, 1, 2, 3, 1, 1, 0, 2, 2, 3, 0, 1, 2, 1};
static const int32_t PC[N] = {0, 2, 2, 3, 1, 0, 0, 1, 2, 3, 3, 1, 0, 1};
#define NC 4
#define NCLS 5
static float LOGIT[N * NCLS];   /* distinct scores per row */
static int64_t YK1[N];          /* one label per row */
static int64_t YK2[N * 2];      /* two labels per row (some repeated) */
static float VEC[N * 3], VEC2[N * 3]; /* unit vectors for cosine distance */

static void init_data(void) {
  uint32_t s = 12345;
  for (int i = 0; i < N * NCLS; i++) {
    s = s * 1664525u + 1013904223u;
    LOGIT[i] = (float)((s >> 8) % 100000) / 1000.0f + (float)(i % NCLS) * 1e-3f;
  }
  for (int i = 0; i < N; i++) {
    YK1[i] = (i * 3) % NCLS;
    YK2[2 * i] = (i * 7) % NCLS;
    YK2[2 * i + 1] = i % 4 == 0 ? YK2[2 * i] : (i * 2 + 1) % NCLS;
    double a = 0, b = 0;
    for (int j = 0; j < 3; j++) {
      VEC[i * 3 + j] = (float)sin(i + 2.0 * j + 1), VEC2[i * 3 + j] = (float)cos(0.7 * i - j);
      a += VEC[i * 3 + j] * VEC[i * 3 + j], b += VEC2[i * 3 + j] * VEC2[i * 3 + j];
    }
    for (int j = 0; j < 3; j++) VEC[i * 3 + j] /= (float)sqrt(a), VEC2[i * 3 + j] /= (float)sqrt(b);
  }
}

/* -------------------------------------------------------------- harness */
typedef struct feed_spec {
  loom_dtype dt;
  int ndim; /* with the batch dim first */
  int64_t dims[3];
  const void *data; /* N rows */
} feed_spec;

typedef loom_metric (*build_fn)(loom_graph *g, const loom_output *in, const void *arg);
/* Fills the expected value (nv entries) and, when upd is not NULL, the
 * expected update output for examples [lo, hi). */
typedef void (*ref_fn)(int lo, int hi, const void *arg, double *val, double *upd);

typedef struct metric_case {
  const char *name;
  int nin;
  feed_spec in[4];
  build_fn build;
  ref_fn ref;
  const void *arg;
  int nv;          /* elements of value */
  int nu;          /* elements of update (0: same as value) */
  double tol;
} metric_case;

static int64_t row_elems(const feed_spec *f) {
  int64_t r = 1;
  for (int i = 1; i < f->ndim; i++) r *= f->dims[i];
  return r;
}

static loom_tensor *batch_tensor(const feed_spec *f, int lo, int hi) {
  int64_t d[3];
  for (int i = 0; i < f->ndim; i++) d[i] = f->dims[i];
  d[0] = hi - lo;
  size_t es = loom_dtype_size(f->dt);
  const char *p = (const char *)f->data + (size_t)(lo * row_elems(f)) * es;
  return loom_tensor_from_data(f->dt, f->ndim, d, p, NULL);
}

static void to_double(const loom_tensor *t, double *out, int n) {
  cr_assert_eq(loom_tensor_numel(t), n, "numel %lld want %d", (long long)loom_tensor_numel(t), n);
  for (int i = 0; i < n; i++)
    out[i] = loom_tensor_dtype(t) == LOOM_F64 ? ((const double *)loom_tensor_data_const(t))[i]
                                               : (double)((const float *)loom_tensor_data_const(t))[i];
}

static void expect_vals(const char *what, const char *stage, const double *got, const double *want, int n,
                        double tol) {
  for (int i = 0; i < n; i++) {
    int ok = (isnan(got[i]) && isnan(want[i])) || fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i]));
    cr_assert(ok, "%s %s[%d]: got %.9g want %.9g", what, stage, i, got[i], want[i]);
  }
}

static void run_ok(loom_session *s, int nf, const loom_output *feeds, loom_tensor *const *vals, int nx,
                   const loom_output *fetches, loom_tensor **outs, loom_node *target) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_session_run(s, feeds, vals, nf, fetches, outs, nx, target ? &target : NULL, target ? 1 : 0, st);
  cr_assert_eq(rc, LOOM_OK, "run: %s", loom_status_message(st));
  loom_status_free(st);
}

/* Fetches the value (no feeds) twice; both must match want. */
static void check_value(loom_session *s, const metric_case *mc, loom_output value, const double *want,
                        const char *stage) {
  double got[256];
  for (int rep = 0; rep < 2; rep++) {
    loom_tensor *t = NULL;
    run_ok(s, 0, NULL, NULL, 1, &value, &t, NULL);
    to_double(t, got, mc->nv);
    loom_tensor_free(t);
    expect_vals(mc->name, stage, got, want, mc->nv, mc->tol);
  }
}

static void run_case(const metric_case *mc) {
  loom_graph *g = loom_graph_new();
  loom_output ph[4];
  for (int i = 0; i < mc->nin; i++) ph[i] = loom_placeholder(g, mc->in[i].dt, mc->in[i].ndim, mc->in[i].dims, NULL);
  loom_metric m = mc->build(g, ph, mc->arg);
  loom_node *local_init = loom_local_variables_initializer(g);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s: graph error: %s", mc->name, loom_status_message(st));
  cr_assert(m.reset, "%s: no reset node", mc->name);
  loom_session *s = loom_session_new(g, NULL, st);
  loom_status_free(st);
  int nu = mc->nu ? mc->nu : mc->nv;
  double want[256], wantu[256], got[256];

  run_ok(s, 0, NULL, NULL, 0, NULL, NULL, m.reset);
  mc->ref(0, 0, mc->arg, want, NULL);
  check_value(s, mc, m.value, want, "initial");
  /* stream the batches; update returns the running value */
  int lo = 0;
  for (int b = 0; b < 3; b++) {
    int hi = BATCH_END[b];
    loom_tensor *vals[4];
    for (int i = 0; i < mc->nin; i++) vals[i] = batch_tensor(&mc->in[i], lo, hi);
    loom_tensor *t = NULL;
    run_ok(s, mc->nin, ph, vals, 1, &m.update, &t, NULL);
    mc->ref(0, hi, mc->arg, want, wantu);
    to_double(t, got, nu);
    char stage[64];
    snprintf(stage, sizeof stage, "update after batch %d", b);
    expect_vals(mc->name, stage, got, mc->nu ? wantu : want, nu, mc->tol);
    loom_tensor_free(t);
    for (int i = 0; i < mc->nin; i++) loom_tensor_free(vals[i]);
    lo = hi;
  }
  mc->ref(0, N, mc->arg, want, NULL);
  check_value(s, mc, m.value, want, "final value");
  /* reset, then a single batch */
  run_ok(s, 0, NULL, NULL, 0, NULL, NULL, m.reset);
  mc->ref(0, 0, mc->arg, want, NULL);
  check_value(s, mc, m.value, want, "after reset");
  loom_tensor *vals[4];
  for (int i = 0; i < mc->nin; i++) vals[i] = batch_tensor(&mc->in[i], 5, 7);
  run_ok(s, mc->nin, ph, vals, 0, NULL, NULL, m.update.node);
  for (int i = 0; i < mc->nin; i++) loom_tensor_free(vals[i]);
  mc->ref(5, 7, mc->arg, want, NULL);
  check_value(s, mc, m.value, want, "second batch alone");
  /* the local initializer also resets */
  run_ok(s, 0, NULL, NULL, 0, NULL, NULL, local_init);
  mc->ref(0, 0, mc->arg, want, NULL);
  check_value(s, mc, m.value, want, "after local init");
  loom_session_free(s);
  loom_graph_free(g);
}

static const loom_output NOW = {NULL, 0};

/* ------------------------------------------------------ reference utils */
static double wt(int i, int weighted) { return weighted ? WT[i] : 1.0; }
static double div0(double a, double b) { return b == 0 ? 0 : a / b; }

typedef struct opt {
  int weighted;
  int kind;
} opt;

/* ================================================================ means */
static loom_metric b_mean(loom_graph *g, const loom_output *in, const void *arg) {
  const opt *o = arg;
  return loom_metrics_mean(g, in[0], o->weighted ? in[1] : NOW, NULL);
}
static void r_mean(int lo, int hi, const void *arg, double *v, double *u) {
  const opt *o = arg;
  double s = 0, c = 0;
  for (int i = lo; i < hi; i++) s += wt(i, o->weighted) * PR[i], c += wt(i, o->weighted);
  v[0] = div0(s, c);
  (void)u;
}

Test(metrics, mean) {
  opt u = {0, 0}, w = {1, 0};
  metric_case a = {"mean", 1, {{LOOM_F32, 1, {-1}, PR}}, b_mean, r_mean, &u, 1, 0, 1e-5};
  run_case(&a);
  metric_case b = {"mean weighted", 2, {{LOOM_F32, 1, {-1}, PR}, {LOOM_F32, 1, {-1}, WT}}, b_mean, r_mean, &w, 1, 0,
                   1e-5};
  run_case(&b);
  /* weights [N, 1] against values [N] are squeezed, like TF */
  metric_case c = {"mean weights [N,1]", 2, {{LOOM_F32, 1, {-1}, PR}, {LOOM_F32, 2, {-1, 1}, WT}}, b_mean, r_mean, &w,
                   1, 0, 1e-5};
  run_case(&c);
}

/* values [N, 3] with weights [N] (expanded to [N, 1] and broadcast) */
static loom_metric b_mean_rows(loom_graph *g, const loom_output *in, const void *arg) {
  (void)arg;
  return loom_metrics_mean(g, in[0], in[1], NULL);
}
static void r_mean_rows(int lo, int hi, const void *arg, double *v, double *u) {
  double s = 0, c = 0;
  for (int i = lo; i < hi; i++)
    for (int j = 0; j < 3; j++) s += WT[i] * VEC[i * 3 + j], c += WT[i];
  v[0] = div0(s, c);
  (void)arg, (void)u;
}
Test(metrics, mean_weights_broadcast_over_rows) {
  metric_case a = {"mean rows", 2, {{LOOM_F32, 2, {-1, 3}, VEC}, {LOOM_F32, 1, {-1}, WT}}, b_mean_rows, r_mean_rows,
                   NULL, 1, 0, 1e-5};
  init_data();
  run_case(&a);
}

static loom_metric b_mean_tensor(loom_graph *g, const loom_output *in, const void *arg) {
  (void)arg;
  /* mean_tensor needs a known shape: view the batch as 14 rows fed whole */
  return loom_metrics_mean_tensor(g, in[0], in[1], NULL);
}

Test(metrics, mean_tensor) {
  /* a fixed-shape [3] value per step, three steps with scalar weights */
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x");
  loom_output w = loom_placeholder(g, LOOM_F32, 0, NULL, "w");
  loom_output in[2] = {x, w};
  loom_metric m = b_mean_tensor(g, in, NULL);
  loom_session *s = loom_session_new(g, NULL, NULL);
  run_ok(s, 0, NULL, NULL, 0, NULL, NULL, m.reset);
  float xs[3][3] = {{1, 2, 3}, {4, 0, -1}, {2, 2, 2}};
  float ws[3] = {1, 0, 3};
  for (int k = 0; k < 3; k++) {
    loom_tensor *vals[2] = {tu_f32(1, d, xs[k]), loom_tensor_scalar_f32(ws[k])};
    run_ok(s, 2, in, vals, 0, NULL, NULL, m.update.node);
    loom_tensor_free(vals[0]);
    loom_tensor_free(vals[1]);
  }
  loom_tensor *t = NULL;
  run_ok(s, 0, NULL, NULL, 1, &m.value, &t, NULL);
  float want[3] = {(1 + 6) / 4.0f, (2 + 6) / 4.0f, (3 + 6) / 4.0f};
  tu_expect_f32(t, 1, d, want, 1e-6);
  loom_tensor_free(t);
  cr_assert(loom_graph_variable(g, "mean/total_tensor") && loom_graph_variable(g, "mean/count_tensor"));
  loom_session_free(s);
  loom_graph_free(g);
}

enum { E_ACC, E_MSE, E_RMSE, E_MAE, E_MRE, E_COS, E_BELOW };
static loom_metric b_err(loom_graph *g, const loom_output *in, const void *arg) {
  const opt *o = arg;
  loom_output w = o->weighted ? in[2] : NOW;
  switch (o->kind) {
  case E_ACC: return loom_metrics_accuracy(g, in[0], in[1], w, NULL);
  case E_MSE: return loom_metrics_mean_squared_error(g, in[0], in[1], w, NULL);
  case E_RMSE: return loom_metrics_root_mean_squared_error(g, in[0], in[1], w, NULL);
  case E_MAE: return loom_metrics_mean_absolute_error(g, in[0], in[1], w, NULL);
  case E_MRE: return loom_metrics_mean_relative_error(g, in[0], in[1], in[3], w, NULL);
  case E_COS: return loom_metrics_mean_cosine_distance(g, in[0], in[1], 1, w, NULL);
  default: return loom_metrics_percentage_below(g, in[1], 0.5, w, NULL);
  }
}
static void r_err(int lo, int hi, const void *arg, double *v, double *u) {
  const opt *o = arg;
  double s = 0, c = 0;
  for (int i = lo; i < hi; i++) {
    double e, l = YR[i], p = PR[i];
    switch (o->kind) {
    case E_ACC: e = YC[i] == PC[i]; break;
    case E_MSE:
    case E_RMSE: e = (l - p) * (l - p); break;
    case E_MAE: e = fabs(l - p); break;
    case E_MRE: e = NORM[i] == 0 ? 0 : fabs(l - p) / NORM[i]; break;
    case E_COS: {
      e = 0;
      for (int j = 0; j < 3; j++) e += (double)VEC[i * 3 + j] * VEC2[i * 3 + j];
      break;
    }
    default: e = PR[i] < 0.5; break;
    }
    s += wt(i, o->weighted) * e, c += wt(i, o->weighted);
  }
  v[0] = div0(s, c);
  if (o->kind == E_RMSE) v[0] = sqrt(v[0]);
  if (o->kind == E_COS) v[0] = 1 - v[0];
  (void)u;
}

static void err_case(const char *name, int kind) {
  init_data();
  for (int w = 0; w < 2; w++) {
    opt o = {w, kind};
    metric_case mc = {name, 4,
                      {{LOOM_F32, 1, {-1}, YR}, {LOOM_F32, 1, {-1}, PR}, {LOOM_F32, 1, {-1}, WT},
                       {LOOM_F32, 1, {-1}, NORM}},
                      b_err, r_err, &o, 1, 0, 1e-5};
    if (kind == E_ACC) {
      mc.in[0] = (feed_spec){LOOM_I32, 1, {-1}, YC};
      mc.in[1] = (feed_spec){LOOM_I32, 1, {-1}, PC};
    }
    if (kind == E_COS) {
      mc.in[0] = (feed_spec){LOOM_F32, 2, {-1, 3}, VEC2};
      mc.in[1] = (feed_spec){LOOM_F32, 2, {-1, 3}, VEC};
      /* weights [N] against the [N, 1] per-example distance: expanded */
    }
    if (kind != E_MRE) mc.nin = 3;
    run_case(&mc);
  }
}

Test(metrics, accuracy) { err_case("accuracy", E_ACC); }
Test(metrics, mean_squared_error) { err_case("mean_squared_error", E_MSE); }
Test(metrics, root_mean_squared_error) { err_case("root_mean_squared_error", E_RMSE); }
Test(metrics, mean_absolute_error) { err_case("mean_absolute_error", E_MAE); }
Test(metrics, mean_relative_error) { err_case("mean_relative_error", E_MRE); }
Test(metrics, mean_cosine_distance) { err_case("mean_cosine_distance", E_COS); }
Test(metrics, percentage_below) { err_case("percentage_below", E_BELOW); }

/* accuracy with labels [N, 1] vs predictions [N] (squeezed) and int64 vs
 * float predictions (cast to the labels' dtype) */
static loom_metric b_acc_mixed(loom_graph *g, const loom_output *in, const void *arg) {
  (void)arg;
  return loom_metrics_accuracy(g, in[0], in[1], in[2], NULL);
}
static void r_acc_mixed(int lo, int hi, const void *arg, double *v, double *u) {
  opt o = {1, E_ACC};
  r_err(lo, hi, &o, v, u);
  (void)arg;
}
Test(metrics, accuracy_squeezes_and_casts) {
  float pcf[N];
  for (int i = 0; i < N; i++) pcf[i] = (float)PC[i];
  metric_case mc = {"accuracy mixed", 3,
                    {{LOOM_I32, 2, {-1, 1}, YC}, {LOOM_F32, 1, {-1}, pcf}, {LOOM_F32, 1, {-1}, WT}},
                    b_acc_mixed, r_acc_mixed, NULL, 1, 0, 1e-6};
  run_case(&mc);
}

/* ================================================================ counts */
enum { K_TP, K_FP, K_TN, K_FN, K_PREC, K_REC };
static loom_metric b_count(loom_graph *g, const loom_output *in, const void *arg) {
  const opt *o = arg;
  loom_output w = o->weighted ? in[2] : NOW;
  switch (o->kind) {
  case K_TP: return loom_metrics_true_positives(g, in[0], in[1], w, NULL);
  case K_FP: return loom_metrics_false_positives(g, in[0], in[1], w, NULL);
  case K_TN: return loom_metrics_true_negatives(g, in[0], in[1], w, NULL);
  case K_FN: return loom_metrics_false_negatives(g, in[0], in[1], w, NULL);
  case K_PREC: return loom_metrics_precision(g, in[0], in[1], w, NULL);
  default: return loom_metrics_recall(g, in[0], in[1], w, NULL);
  }
}
static void r_count(int lo, int hi, const void *arg, double *v, double *u) {
  const opt *o = arg;
  double tp = 0, fp = 0, tn = 0, fn = 0;
  for (int i = lo; i < hi; i++) {
    int l = YB[i] != 0, p = PBOOL[i] != 0;
    double w = wt(i, o->weighted);
    tp += w * (l && p), fp += w * (!l && p), tn += w * (!l && !p), fn += w * (l && !p);
  }
  double r[6] = {tp, fp, tn, fn, div0(tp, tp + fp), div0(tp, tp + fn)};
  v[0] = r[o->kind];
  (void)u;
}
static void count_case(const char *name, int kind) {
  for (int w = 0; w < 2; w++) {
    opt o = {w, kind};
    metric_case mc = {name, 3, {{LOOM_I32, 1, {-1}, YB}, {LOOM_F32, 1, {-1}, PBOOL}, {LOOM_F32, 1, {-1}, WT}},
                      b_count, r_count, &o, 1, 0, 1e-6};
    run_case(&mc);
  }
}
Test(metrics, true_positives) { count_case("true_positives", K_TP); }
Test(metrics, false_positives) { count_case("false_positives", K_FP); }
Test(metrics, true_negatives) { count_case("true_negatives", K_TN); }
Test(metrics, false_negatives) { count_case("false_negatives", K_FN); }
Test(metrics, precision) { count_case("precision", K_PREC); }
Test(metrics, recall) { count_case("recall", K_REC); }

/* ========================================================== thresholds */
static const double THR[5] = {0.0, 0.3, 0.5, 0.75, 1.0};
enum { T_TP, T_FP, T_TN, T_FN, T_PREC, T_REC };
static loom_metric b_thr(loom_graph *g, const loom_output *in, const void *arg) {
  const opt *o = arg;
  loom_output w = o->weighted ? in[2] : NOW;
  switch (o->kind) {
  case T_TP: return loom_metrics_true_positives_at_thresholds(g, in[0], in[1], 5, THR, w, NULL);
  case T_FP: return loom_metrics_false_positives_at_thresholds(g, in[0], in[1], 5, THR, w, NULL);
  case T_TN: return loom_metrics_true_negatives_at_thresholds(g, in[0], in[1], 5, THR, w, NULL);
  case T_FN: return loom_metrics_false_negatives_at_thresholds(g, in[0], in[1], 5, THR, w, NULL);
  case T_PREC: return loom_metrics_precision_at_thresholds(g, in[0], in[1], 5, THR, w, NULL);
  default: return loom_metrics_recall_at_thresholds(g, in[0], in[1], 5, THR, w, NULL);
  }
}
static void r_thr(int lo, int hi, const void *arg, double *v, double *u) {
  const opt *o = arg;
  for (int t = 0; t < 5; t++) {
    float th = (float)THR[t];
    double tp = 0, fp = 0, tn = 0, fn = 0;
    for (int i = lo; i < hi; i++) {
      int l = YB[i] != 0, p = PB[i] > th;
      double w = wt(i, o->weighted);
      tp += w * (l && p), fp += w * (!l && p), tn += w * (!l && !p), fn += w * (l && !p);
    }
    double r[6] = {tp, fp, tn, fn, tp / (1e-7 + tp + fp), tp / (1e-7 + tp + fn)};
    v[t] = r[o->kind];
  }
  (void)u;
}
static void thr_case(const char *name, int kind) {
  for (int w = 0; w < 2; w++) {
    opt o = {w, kind};
    metric_case mc = {name, 3, {{LOOM_I32, 1, {-1}, YB}, {LOOM_F32, 1, {-1}, PB}, {LOOM_F32, 1, {-1}, WT}}, b_thr,
                      r_thr, &o, 5, 0, 1e-5};
    run_case(&mc);
  }
}
Test(metrics, true_positives_at_thresholds) { thr_case("tp_at_thresholds", T_TP); }
Test(metrics, false_positives_at_thresholds) { thr_case("fp_at_thresholds", T_FP); }
Test(metrics, true_negatives_at_thresholds) { thr_case("tn_at_thresholds", T_TN); }
Test(metrics, false_negatives_at_thresholds) { thr_case("fn_at_thresholds", T_FN); }
Test(metrics, precision_at_thresholds) { thr_case("precision_at_thresholds", T_PREC); }
Test(metrics, recall_at_thresholds) { thr_case("recall_at_thresholds", T_REC); }

/* ================================================================= AUC */
/* TF's auc formulas in double on counts at TF's float thresholds. */
static double ref_auc(int n, const float *pred, const int32_t *lab, const float *w, int nthr, int curve, int method) {
  double tp[512], fn[512], tn[512], fp[512];
  for (int t = 0; t < nthr; t++) {
    double x = t == 0 ? -1e-7 : t == nthr - 1 ? 1.0 + 1e-7 : (double)t / (nthr - 1);
    float th = (float)x;
    tp[t] = fn[t] = tn[t] = fp[t] = 0;
    for (int i = 0; i < n; i++) {
      double ww = w ? w[i] : 1.0;
      int l = lab[i] != 0, p = pred[i] > th;
      tp[t] += ww * (l && p), fn[t] += ww * (l && !p), tn[t] += ww * (!l && !p), fp[t] += ww * (!l && p);
    }
  }
  double area = 0, eps = 1e-6;
  if (curve == LOOM_AUC_PR && method == LOOM_AUC_CAREFUL_INTERPOLATION) {
    for (int t = 0; t < nthr - 1; t++) {
      double dtp = tp[t] - tp[t + 1], p0 = tp[t] + fp[t], p1 = tp[t + 1] + fp[t + 1];
      double slope = div0(dtp, fmax(p0 - p1, 0));
      double icpt = tp[t + 1] - slope * p1;
      double ratio = (p0 > 0 && p1 > 0) ? div0(p0, fmax(p1, 0)) : 1.0;
      area += div0(slope * (dtp + icpt * log(ratio)), fmax(tp[t + 1] + fn[t + 1], 0));
    }
    return area;
  }
  for (int t = 0; t < nthr - 1; t++) {
    double x0, x1, y0, y1;
    double r0 = (tp[t] + eps) / (tp[t] + fn[t] + eps), r1 = (tp[t + 1] + eps) / (tp[t + 1] + fn[t + 1] + eps);
    if (curve == LOOM_AUC_ROC) {
      x0 = fp[t] / (fp[t] + tn[t] + eps), x1 = fp[t + 1] / (fp[t + 1] + tn[t + 1] + eps), y0 = r0, y1 = r1;
    } else {
      x0 = r0, x1 = r1;
      y0 = (tp[t] + eps) / (tp[t] + fp[t] + eps), y1 = (tp[t + 1] + eps) / (tp[t + 1] + fp[t + 1] + eps);
    }
    double h = method == LOOM_AUC_MINORING ? fmin(y0, y1) : method == LOOM_AUC_MAJORING ? fmax(y0, y1) : (y0 + y1) / 2;
    area += (x0 - x1) * h;
  }
  return area;
}

typedef struct auc_opt {
  int weighted, curve, method, nthr;
} auc_opt;
static loom_metric b_auc(loom_graph *g, const loom_output *in, const void *arg) {
  const auc_opt *o = arg;
  return loom_metrics_auc(g, in[0], in[1], o->weighted ? in[2] : NOW, o->nthr, NULL, o->curve, o->method, NULL);
}
static void r_auc(int lo, int hi, const void *arg, double *v, double *u) {
  const auc_opt *o = arg;
  v[0] = ref_auc(hi - lo, PB + lo, YB + lo, o->weighted ? WT + lo : NULL, o->nthr, o->curve, o->method);
  (void)u;
}

Test(metrics, auc_streamed_all_curves_and_methods) {
  int nthr[2] = {200, 7};
  for (int k = 0; k < 2; k++)
    for (int curve = 0; curve < 2; curve++)
      for (int method = 0; method < 4; method++)
        for (int w = 0; w < 2; w++) {
          auc_opt o = {w, curve, method, nthr[k]};
          char name[96];
          snprintf(name, sizeof name, "auc curve %d method %d weighted %d thresholds %d", curve, method, w, nthr[k]);
          metric_case mc = {name, 3, {{LOOM_I32, 1, {-1}, YB}, {LOOM_F32, 1, {-1}, PB}, {LOOM_F32, 1, {-1}, WT}},
                            b_auc, r_auc, &o, 1, 0, 2e-5};
          run_case(&mc);
        }
}

#define NA 500
static float AS[NA];
static int32_t AL[NA];
static void auc_data(void) {
  uint32_t s = 777;
  for (int i = 0; i < NA; i++) {
    s = s * 1664525u + 1013904223u;
    double u = (double)(s >> 8) / 16777216.0;
    s = s * 1664525u + 1013904223u;
    double r = (double)(s >> 8) / 16777216.0;
    AS[i] = (float)u;
    AL[i] = r < 0.15 + 0.7 * u; /* positives score higher on average */
  }
}

/* P(score_pos > score_neg) + 0.5 P(tie) over all pairs. */
static double exact_auc(void) {
  double num = 0, pairs = 0;
  for (int i = 0; i < NA; i++)
    if (AL[i])
      for (int j = 0; j < NA; j++)
        if (!AL[j]) {
          num += AS[i] > AS[j] ? 1.0 : AS[i] == AS[j] ? 0.5 : 0.0;
          pairs += 1;
        }
  return num / pairs;
}

/* Average precision: mean over positives (sorted by score, descending) of
 * the precision at their rank. */
static int cmp_desc(const void *a, const void *b) {
  float x = AS[*(const int *)a], y = AS[*(const int *)b];
  return x > y ? -1 : x < y;
}
static double average_precision(void) {
  int idx[NA];
  for (int i = 0; i < NA; i++) idx[i] = i;
  qsort(idx, NA, sizeof idx[0], cmp_desc);
  double tp = 0, s = 0, P = 0;
  for (int i = 0; i < NA; i++) P += AL[i];
  for (int r = 0; r < NA; r++)
    if (AL[idx[r]]) {
      tp += 1;
      s += tp / (r + 1);
    }
  return s / P;
}

static double stream_auc(int curve, int method, const float *scores, const int32_t *labels) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output l = loom_placeholder(g, LOOM_I32, 1, d, "l"), p = loom_placeholder(g, LOOM_F32, 1, d, "p");
  loom_metric m = loom_metrics_auc(g, l, p, NOW, 200, NULL, curve, method, NULL);
  loom_session *s = loom_session_new(g, NULL, NULL);
  run_ok(s, 0, NULL, NULL, 0, NULL, NULL, m.reset);
  int ends[4] = {120, 121, 333, NA}, lo = 0;
  for (int b = 0; b < 4; b++) {
    int64_t bd[1] = {ends[b] - lo};
    loom_tensor *vals[2] = {loom_tensor_from_data(LOOM_I32, 1, bd, labels + lo, NULL),
                            loom_tensor_from_data(LOOM_F32, 1, bd, scores + lo, NULL)};
    loom_output feeds[2] = {l, p};
    run_ok(s, 2, feeds, vals, 0, NULL, NULL, m.update.node);
    loom_tensor_free(vals[0]);
    loom_tensor_free(vals[1]);
    lo = ends[b];
  }
  loom_tensor *t = NULL;
  run_ok(s, 0, NULL, NULL, 1, &m.value, &t, NULL);
  double v = *(const float *)loom_tensor_data_const(t);
  loom_tensor_free(t);
  loom_session_free(s);
  loom_graph_free(g);
  return v;
}

Test(metrics, auc_roc_matches_exact_pairs_auc) {
  auc_data();
  double exact = exact_auc();
  double got = stream_auc(LOOM_AUC_ROC, LOOM_AUC_TRAPEZOIDAL, AS, AL);
  cr_assert(exact > 0.6 && exact < 0.95, "dataset AUC %g", exact);
  cr_assert(fabs(got - exact) <= 1e-3, "ROC AUC %.6f, exact %.6f", got, exact);
  /* careful_interpolation on ROC is the trapezoidal rule (TF) */
  cr_assert(fabs(stream_auc(LOOM_AUC_ROC, LOOM_AUC_CAREFUL_INTERPOLATION, AS, AL) - got) <= 1e-6);
  /* minoring <= trapezoidal <= majoring */
  double lo = stream_auc(LOOM_AUC_ROC, LOOM_AUC_MINORING, AS, AL), hi = stream_auc(LOOM_AUC_ROC, LOOM_AUC_MAJORING, AS, AL);
  cr_assert(lo <= got + 1e-6 && got <= hi + 1e-6 && hi - lo < 0.02, "minoring %g trapezoid %g majoring %g", lo, got, hi);
}

Test(metrics, auc_pr_is_sane) {
  auc_data();
  double ap = average_precision();
  double careful = stream_auc(LOOM_AUC_PR, LOOM_AUC_CAREFUL_INTERPOLATION, AS, AL);
  double trap = stream_auc(LOOM_AUC_PR, LOOM_AUC_TRAPEZOIDAL, AS, AL);
  double pos = 0;
  for (int i = 0; i < NA; i++) pos += AL[i];
  pos /= NA;
  cr_assert(careful > pos && careful <= 1.0, "PR AUC %g vs positive rate %g", careful, pos);
  cr_assert(fabs(careful - ap) < 0.02, "PR AUC (careful) %.5f vs average precision %.5f", careful, ap);
  cr_assert(fabs(trap - ap) < 0.05, "PR AUC (trapezoidal) %.5f vs average precision %.5f", trap, ap);
  /* perfectly separated scores: both areas ~1 */
  float sep[NA];
  for (int i = 0; i < NA; i++) sep[i] = AL[i] ? 0.6f + 0.3f * AS[i] : 0.3f * AS[i];
  cr_assert(fabs(stream_auc(LOOM_AUC_PR, LOOM_AUC_CAREFUL_INTERPOLATION, sep, AL) - 1.0) < 1e-3);
  cr_assert(fabs(stream_auc(LOOM_AUC_ROC, LOOM_AUC_TRAPEZOIDAL, sep, AL) - 1.0) < 1e-3);
}

Test(metrics, auc_custom_thresholds) {
  /* explicit (unsorted) thresholds give the same counts as the generated ones */
  double th[5]; /* the inner thresholds of num_thresholds 7 (i/6, i = 1..5), reversed */
  for (int i = 0; i < 5; i++) th[i] = (double)(5 - i) / 6.0;
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {N};
  loom_output l = loom_const_data(g, LOOM_I32, 1, d, YB, NULL), p = loom_const_data(g, LOOM_F32, 1, d, PB, NULL);
  loom_metric a = loom_metrics_auc(g, l, p, NOW, 5, th, LOOM_AUC_ROC, LOOM_AUC_TRAPEZOIDAL, NULL);
  loom_metric b = loom_metrics_auc(g, l, p, NOW, 7, NULL, LOOM_AUC_ROC, LOOM_AUC_TRAPEZOIDAL, NULL);
  loom_session *s = loom_session_new(g, NULL, NULL);
  run_ok(s, 0, NULL, NULL, 0, NULL, NULL, loom_local_variables_initializer(g));
  loom_output f[2] = {a.update, b.update};
  loom_tensor *t[2] = {NULL, NULL};
  run_ok(s, 0, NULL, NULL, 2, f, t, NULL);
  double va = *(const float *)loom_tensor_data_const(t[0]), vb = *(const float *)loom_tensor_data_const(t[1]);
  cr_assert(fabs(va - vb) < 1e-6, "%g vs %g", va, vb);
  cr_assert(fabs(va - ref_auc(N, PB, YB, NULL, 7, LOOM_AUC_ROC, LOOM_AUC_TRAPEZOIDAL)) < 1e-5);
  cr_assert(loom_graph_variable(g, "auc/true_positives") && loom_graph_variable(g, "auc_1/false_positives"));
  loom_tensor_free(t[0]);
  loom_tensor_free(t[1]);
  loom_session_free(s);
  loom_graph_free(g);
}

/* ============================================ sensitivity / specificity */
typedef struct ss_opt {
  int weighted, sens_at_spec, nthr;
  double target;
} ss_opt;
static loom_metric b_ss(loom_graph *g, const loom_output *in, const void *arg) {
  const ss_opt *o = arg;
  loom_output w = o->weighted ? in[2] : NOW;
  return o->sens_at_spec ? loom_metrics_sensitivity_at_specificity(g, in[0], in[1], o->target, w, o->nthr, NULL)
                         : loom_metrics_specificity_at_sensitivity(g, in[0], in[1], o->target, w, o->nthr, NULL);
}
/* In float, in the graph's order of operations (the argmin/argmax picks must agree). */
static void r_ss(int lo, int hi, const void *arg, double *v, double *u) {
  const ss_opt *o = arg;
  float tp[256], fn[256], tn[256], fp[256], keps = 1e-7f, tgt = (float)o->target;
  for (int t = 0; t < o->nthr; t++) {
    float th = t == 0 ? (float)(0.0 - 1e-7) : t == o->nthr - 1 ? (float)(1.0 + 1e-7) : (float)((double)t / (o->nthr - 1));
    tp[t] = fn[t] = tn[t] = fp[t] = 0;
    for (int i = lo; i < hi; i++) {
      float w = o->weighted ? WT[i] : 1.0f;
      int l = YB[i] != 0, p = PB[i] > th;
      tp[t] += w * (l && p), fn[t] += w * (l && !p), tn[t] += w * (!l && !p), fp[t] += w * (!l && p);
    }
  }
  int best = 0;
  float bd = 0;
  for (int t = 0; t < o->nthr; t++) {
    float r = o->sens_at_spec ? tn[t] / ((tn[t] + fp[t]) + keps) : tp[t] / ((tp[t] + fn[t]) + keps);
    float d = fabsf(r - tgt);
    if (t == 0 || (o->sens_at_spec ? d < bd : d <= bd)) best = t, bd = d;
  }
  v[0] = o->sens_at_spec ? tp[best] / ((tp[best] + fn[best]) + keps) : tn[best] / ((tn[best] + fp[best]) + keps);
  (void)u;
}
Test(metrics, sensitivity_at_specificity_and_specificity_at_sensitivity) {
  double targets[3] = {0.5, 0.8, 0.0};
  int nthr[2] = {200, 5};
  for (int which = 0; which < 2; which++)
    for (int k = 0; k < 2; k++)
      for (int t = 0; t < 3; t++)
        for (int w = 0; w < 2; w++) {
          ss_opt o = {w, which, nthr[k], targets[t]};
          char name[96];
          snprintf(name, sizeof name, "%s target %g thresholds %d weighted %d",
                   which ? "sensitivity_at_specificity" : "specificity_at_sensitivity", targets[t], nthr[k], w);
          metric_case mc = {name, 3, {{LOOM_I32, 1, {-1}, YB}, {LOOM_F32, 1, {-1}, PB}, {LOOM_F32, 1, {-1}, WT}},
                            b_ss, r_ss, &o, 1, 0, 1e-6};
          run_case(&mc);
        }
}

/* ========================================================= top k */
typedef struct k_opt {
  int weighted, recall, k, class_id, two, top_k_idx;
} k_opt;

static void topk_row(int i, int k, int *out) {
  int used[NCLS] = {0};
  for (int r = 0; r < k; r++) {
    int best = -1;
    for (int j = 0; j < NCLS; j++)
      if (!used[j] && (best < 0 || LOGIT[i * NCLS + j] > LOGIT[i * NCLS + best])) best = j;
    used[best] = 1;
    out[r] = best;
  }
}
static int32_t TOPK_IDX[N * 3];

static loom_metric b_k(loom_graph *g, const loom_output *in, const void *arg) {
  const k_opt *o = arg;
  loom_output w = o->weighted ? in[2] : NOW;
  if (o->top_k_idx)
    return o->recall ? loom_metrics_recall_at_top_k(g, in[0], in[1], o->class_id, w, NULL)
                     : loom_metrics_precision_at_top_k(g, in[0], in[1], o->class_id, w, NULL);
  return o->recall ? loom_metrics_recall_at_k(g, in[0], in[1], o->k, o->class_id, w, NULL)
                   : loom_metrics_precision_at_k(g, in[0], in[1], o->k, o->class_id, w, NULL);
}
static void r_k(int lo, int hi, const void *arg, double *v, double *u) {
  const k_opt *o = arg;
  double tp = 0, other = 0;
  for (int i = lo; i < hi; i++) {
    int top[NCLS];
    topk_row(i, o->k, top);
    int nl = o->two ? 2 : 1;
    const int64_t *lab = o->two ? YK2 + 2 * i : YK1 + i;
    double w = wt(i, o->weighted), t = 0, f = 0;
    if (o->class_id >= 0) {
      int inl = 0, inp = 0;
      for (int j = 0; j < nl; j++) inl |= lab[j] == o->class_id;
      for (int r = 0; r < o->k; r++) inp |= top[r] == o->class_id;
      t = inl && inp;
      f = o->recall ? (inl && !inp) : (inp && !inl);
    } else {
      for (int r = 0; r < o->k; r++) {
        int in = 0;
        for (int j = 0; j < nl; j++) in |= lab[j] == top[r];
        t += in;
        if (!o->recall) f += !in;
      }
      if (o->recall)
        for (int j = 0; j < nl; j++) {
          if (j && lab[j] == lab[0]) continue; /* a set: count once */
          int in = 0;
          for (int r = 0; r < o->k; r++) in |= lab[j] == top[r];
          f += !in;
        }
    }
    tp += w * t, other += w * f;
  }
  v[0] = tp / (tp + other); /* NaN when empty, like TF */
  (void)u;
}

Test(metrics, precision_and_recall_at_k) {
  init_data();
  for (int i = 0; i < N; i++) topk_row(i, 3, TOPK_IDX + 3 * i);
  for (int recall = 0; recall < 2; recall++)
    for (int two = 0; two < 2; two++)
      for (int k = 1; k <= 3; k += 2)
        for (int cls = -1; cls <= 2; cls += 3)
          for (int w = 0; w < 2; w++) {
            k_opt o = {w, recall, k, cls, two, 0};
            char name[96];
            snprintf(name, sizeof name, "%s_at_%d two=%d class=%d weighted=%d", recall ? "recall" : "precision", k,
                     two, cls, w);
            metric_case mc = {name, 3,
                              {{LOOM_I64, two ? 2 : 1, {-1, 2}, two ? (const void *)YK2 : (const void *)YK1},
                               {LOOM_F32, 2, {-1, NCLS}, LOGIT},
                               {LOOM_F32, 1, {-1}, WT}},
                              b_k, r_k, &o, 1, 0, 1e-9};
            run_case(&mc);
          }
  /* the *_at_top_k forms take the predicted ids */
  for (int recall = 0; recall < 2; recall++) {
    k_opt o = {1, recall, 3, -1, 1, 1};
    metric_case mc = {recall ? "recall_at_top_k" : "precision_at_top_k", 3,
                      {{LOOM_I64, 2, {-1, 2}, YK2}, {LOOM_I32, 2, {-1, 3}, TOPK_IDX}, {LOOM_F32, 1, {-1}, WT}},
                      b_k, r_k, &o, 1, 0, 1e-9};
    run_case(&mc);
  }
}

/* ==================================================== confusion metrics */
static loom_metric b_mpca(loom_graph *g, const loom_output *in, const void *arg) {
  const opt *o = arg;
  return loom_metrics_mean_per_class_accuracy(g, in[0], in[1], NC, o->weighted ? in[2] : NOW, NULL);
}
static void r_mpca(int lo, int hi, const void *arg, double *v, double *u) {
  const opt *o = arg;
  double tot[NC] = {0}, cor[NC] = {0}, m = 0;
  for (int i = lo; i < hi; i++) {
    tot[YC[i]] += wt(i, o->weighted);
    cor[YC[i]] += wt(i, o->weighted) * (YC[i] == PC[i]);
  }
  for (int c = 0; c < NC; c++) {
    double a = div0(cor[c], tot[c]);
    m += a;
    if (u) u[c] = a;
  }
  v[0] = m / NC;
}
Test(metrics, mean_per_class_accuracy) {
  for (int w = 0; w < 2; w++) {
    opt o = {w, 0};
    metric_case mc = {"mean_per_class_accuracy", 3,
                      {{LOOM_I32, 1, {-1}, YC}, {LOOM_I32, 1, {-1}, PC}, {LOOM_F32, 1, {-1}, WT}},
                      b_mpca, r_mpca, &o, 1, NC, 1e-6};
    run_case(&mc);
  }
}

static loom_metric b_iou(loom_graph *g, const loom_output *in, const void *arg) {
  const opt *o = arg;
  return loom_metrics_mean_iou(g, in[0], in[1], NC, o->weighted ? in[2] : NOW, NULL);
}
static void r_iou(int lo, int hi, const void *arg, double *v, double *u) {
  const opt *o = arg;
  double cm[NC][NC] = {{0}};
  for (int i = lo; i < hi; i++) cm[YC[i]][PC[i]] += wt(i, o->weighted);
  double s = 0, nv = 0;
  for (int c = 0; c < NC; c++) {
    double row = 0, col = 0;
    for (int j = 0; j < NC; j++) row += cm[c][j], col += cm[j][c];
    double den = row + col - cm[c][c];
    if (den != 0) nv += 1, s += cm[c][c] / den;
  }
  v[0] = nv > 0 ? s / nv : 0;
  if (u)
    for (int a = 0; a < NC; a++)
      for (int b = 0; b < NC; b++) u[a * NC + b] = cm[a][b];
}
Test(metrics, mean_iou) {
  for (int w = 0; w < 2; w++) {
    opt o = {w, 0};
    metric_case mc = {"mean_iou", 3, {{LOOM_I32, 1, {-1}, YC}, {LOOM_I32, 1, {-1}, PC}, {LOOM_F32, 1, {-1}, WT}},
                      b_iou, r_iou, &o, 1, NC * NC, 1e-6};
    run_case(&mc);
  }
}

/* ======================================================= names, errors */
static int in_coll(loom_variable *const *vs, int n, loom_variable *v) {
  for (int i = 0; i < n; i++)
    if (vs[i] == v) return 1;
  return 0;
}

Test(metrics, variable_names_and_collections) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1}, d2[2] = {-1, NCLS};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x"), y = loom_placeholder(g, LOOM_I32, 1, d, "y");
  loom_output lg = loom_placeholder(g, LOOM_F32, 2, d2, "logits");
  loom_metric m0 = loom_metrics_mean(g, x, NOW, NULL);
  loom_metrics_mean(g, x, NOW, NULL);
  loom_metrics_accuracy(g, y, y, NOW, NULL);
  loom_metrics_root_mean_squared_error(g, x, x, NOW, NULL);
  loom_metrics_precision(g, y, x, NOW, NULL);
  loom_metrics_recall(g, y, x, NOW, "my_recall");
  loom_metrics_auc(g, y, x, NOW, 200, NULL, LOOM_AUC_ROC, LOOM_AUC_TRAPEZOIDAL, NULL);
  loom_metrics_true_positives_at_thresholds(g, y, x, 5, THR, NOW, NULL);
  loom_metrics_precision_at_thresholds(g, y, x, 5, THR, NOW, NULL);
  loom_metrics_mean_iou(g, y, y, 3, NOW, NULL);
  loom_metrics_mean_per_class_accuracy(g, y, y, 3, NOW, NULL);
  loom_metrics_precision_at_k(g, y, lg, 3, -1, NOW, NULL);
  loom_metrics_recall_at_k(g, y, lg, 2, 1, NOW, NULL);
  loom_metrics_sensitivity_at_specificity(g, y, x, 0.5, NOW, 200, NULL);
  loom_variable_scope_push(g, "eval", LOOM_REUSE_NONE);
  loom_metrics_mean(g, x, NOW, NULL);
  loom_variable_scope_pop(g);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
  const char *names[] = {"mean/total", "mean/count", "mean_1/total", "accuracy/total", "accuracy/count",
                         "root_mean_squared_error/total", "precision/true_positives/count",
                         "precision/false_positives/count", "my_recall/true_positives/count",
                         "my_recall/false_negatives/count", "auc/true_positives", "auc/false_negatives",
                         "auc/true_negatives", "auc/false_positives", "true_positives/true_positives",
                         "precision_at_thresholds/true_positives", "precision_at_thresholds/false_positives",
                         "mean_iou/total_confusion_matrix", "mean_accuracy/total", "mean_accuracy/count",
                         "precision_at_3/true_positive_at_3", "precision_at_3/false_positive_at_3",
                         "recall_at_2_class1/true_positive_at_2_class1",
                         "recall_at_2_class1/false_negative_at_2_class1", "eval/mean/total",
                         "sensitivity_at_specificity/true_negatives"};
  int nl = 0, nm = 0, ng = 0, nt = 0;
  loom_variable *const *lv = loom_local_variables(g, &nl);
  loom_variable *const *mv = loom_get_variable_collection(g, LOOM_METRIC_VARIABLES, &nm);
  loom_variable *const *gv = loom_global_variables(g, &ng);
  loom_variable *const *tv = loom_trainable_variables(g, &nt);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    loom_variable *v = loom_graph_variable(g, names[i]);
    cr_assert(v, "no variable %s", names[i]);
    cr_assert(in_coll(lv, nl, v) && in_coll(mv, nm, v), "%s not in LOCAL and METRIC variables", names[i]);
    cr_assert(!in_coll(gv, ng, v) && !in_coll(tv, nt, v), "%s in GLOBAL or TRAINABLE variables", names[i]);
  }
  int64_t dims[LOOM_MAX_DIMS];
  cr_assert_eq(loom_variable_dims(loom_graph_variable(g, "auc/true_positives"), dims), 1);
  cr_assert_eq(dims[0], 200);
  cr_assert_eq(loom_variable_dtype(loom_graph_variable(g, "mean_iou/total_confusion_matrix")), LOOM_F64);
  cr_assert_eq(loom_variable_dtype(loom_graph_variable(g, "precision_at_3/true_positive_at_3")), LOOM_F64);
  cr_assert_eq(loom_variable_dtype(loom_graph_variable(g, "mean/total")), LOOM_F32);
  cr_assert_str_eq(loom_node_name(m0.value.node), "mean/value");
  cr_assert_str_eq(loom_node_name(m0.update.node), "mean/update_op");
  cr_assert_str_eq(loom_node_name(m0.reset), "mean/reset");
  /* collections helper */
  loom_metric_add_to_collections(g, &m0, "metric_values", LOOM_UPDATE_OPS);
  int n = 0;
  const loom_output *c = loom_get_collection(g, "metric_values", &n);
  cr_assert(n == 1 && c[0].node == m0.value.node);
  c = loom_get_collection(g, LOOM_UPDATE_OPS, &n);
  cr_assert(n == 1 && c[0].node == m0.update.node);
  loom_graph_free(g);
}

/* The value reads the state only: it runs with no feeds and does not move
 * when fetched; the variables hold TF's raw totals. */
Test(metrics, value_reads_state_only) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x"), w = loom_placeholder(g, LOOM_F32, 1, d, "w");
  loom_metric m = loom_metrics_mean(g, x, w, NULL);
  loom_session *s = loom_session_new(g, NULL, NULL);
  run_ok(s, 0, NULL, NULL, 0, NULL, NULL, m.reset);
  int64_t bd[1] = {3};
  loom_tensor *vals[2] = {tu_f32(1, bd, (float[]){1, 2, 3}), tu_f32(1, bd, (float[]){1, 0, 3})};
  loom_output feeds[2] = {x, w};
  run_ok(s, 2, feeds, vals, 0, NULL, NULL, m.update.node);
  for (int rep = 0; rep < 3; rep++) {
    loom_tensor *t = NULL;
    run_ok(s, 0, NULL, NULL, 1, &m.value, &t, NULL);
    cr_assert_float_eq(*(const float *)loom_tensor_data_const(t), 10.0f / 4.0f, 1e-6);
    loom_tensor_free(t);
  }
  loom_tensor *tot = NULL, *cnt = NULL;
  cr_assert_eq(loom_session_read_variable(s, "mean/total", &tot, NULL), LOOM_OK);
  cr_assert_eq(loom_session_read_variable(s, "mean/count", &cnt, NULL), LOOM_OK);
  cr_assert_float_eq(*(const float *)loom_tensor_data_const(tot), 10.0f, 1e-6);
  cr_assert_float_eq(*(const float *)loom_tensor_data_const(cnt), 4.0f, 1e-6);
  loom_tensor_free(tot);
  loom_tensor_free(cnt);
  loom_tensor_free(vals[0]);
  loom_tensor_free(vals[1]);
  loom_session_free(s);
  loom_graph_free(g);
}

static loom_code graph_err(loom_graph *g, char *msg, size_t cap) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_graph_status(g, st);
  snprintf(msg, cap, "%s", loom_status_message(st));
  loom_status_free(st);
  return rc;
}

Test(metrics, shape_errors_name_the_metric) {
  char msg[512];
  loom_graph *g = loom_graph_new();
  int64_t a[1] = {5}, b[1] = {4}, c2[2] = {5, 3};
  float z[15] = {0};
  loom_metrics_accuracy(g, loom_const_data(g, LOOM_F32, 1, a, z, NULL), loom_const_data(g, LOOM_F32, 1, b, z, NULL),
                        NOW, NULL);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "accuracy") && strstr(msg, "[5]") && strstr(msg, "[4]") && strstr(msg, "incompatible"), "%s",
            msg);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_metrics_mean(g, loom_const_data(g, LOOM_F32, 2, c2, z, NULL), loom_const_data(g, LOOM_F32, 1, b, z, NULL),
                    "my_mean");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "my_mean") && strstr(msg, "weights can not be broadcast"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_metrics_auc(g, loom_const_data(g, LOOM_F32, 1, a, z, NULL), loom_const_data(g, LOOM_F32, 1, a, z, NULL), NOW,
                   200, NULL, 7, 0, NULL);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "auc") && strstr(msg, "curve"), "%s", msg);
  loom_graph_free(g);

  g = loom_graph_new();
  loom_metrics_precision_at_k(g, loom_const_data(g, LOOM_F32, 1, a, z, NULL),
                              loom_const_data(g, LOOM_F32, 2, c2, z, NULL), 2, -1, NOW, NULL);
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "precision_at_2") && strstr(msg, "int32 or int64"), "%s", msg);
  loom_graph_free(g);

  /* the same explicit name twice: TF's "already exists" */
  g = loom_graph_new();
  loom_output x = loom_const_data(g, LOOM_F32, 1, a, z, NULL);
  loom_metrics_mean(g, x, NOW, "m");
  loom_metrics_mean(g, x, NOW, "m");
  cr_assert_eq(graph_err(g, msg, sizeof msg), LOOM_ALREADY_EXISTS);
  cr_assert(strstr(msg, "m/total"), "%s", msg);
  loom_graph_free(g);
}

Test(metrics, bad_class_ids_fail_the_run) {
  char msg[512];
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_output l = loom_const_data(g, LOOM_I32, 1, d, (int32_t[]){0, 5, 1}, NULL);
  loom_output p = loom_const_data(g, LOOM_I32, 1, d, (int32_t[]){0, 1, 1}, NULL);
  loom_metric iou = loom_metrics_mean_iou(g, l, p, 3, NOW, NULL);
  loom_metric acc = loom_metrics_mean_per_class_accuracy(g, l, p, 3, NOW, NULL);
  loom_session *s = loom_session_new(g, NULL, NULL);
  run_ok(s, 0, NULL, NULL, 0, NULL, NULL, loom_local_variables_initializer(g));
  loom_status *st = loom_status_new();
  loom_tensor *t = NULL;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &iou.update, &t, 1, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  snprintf(msg, sizeof msg, "%s", loom_status_message(st));
  cr_assert(strstr(msg, "mean_iou/confusion_matrix"), "%s", msg);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &acc.update, &t, 1, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  snprintf(msg, sizeof msg, "%s", loom_status_message(st));
  cr_assert(strstr(msg, "mean_accuracy/"), "%s", msg);
  loom_tensor_free(t);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(g);
}

Test(metrics, uninitialized_state_is_reported) {
  loom_graph *g = loom_graph_new();
  loom_metric m = loom_metrics_mean(g, loom_const_f32(g, 1.0f, NULL), NOW, NULL);
  char msg[512];
  cr_assert_eq(tu_run_err(g, 0, NULL, NULL, m.value, msg, sizeof msg), LOOM_FAILED_PRECONDITION);
  cr_assert(strstr(msg, "uninitialized") && strstr(msg, "mean/"), "%s", msg);
  loom_graph_free(g);
}

/* A batch of zero examples folds in nothing. */
Test(metrics, empty_batch_changes_nothing) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output y = loom_placeholder(g, LOOM_I32, 1, d, "y"), p = loom_placeholder(g, LOOM_F32, 1, d, "p");
  loom_output w = loom_placeholder(g, LOOM_F32, 1, d, "w");
  loom_metric ms[4] = {loom_metrics_mean(g, p, w, NULL),
                       loom_metrics_auc(g, y, p, w, 200, NULL, LOOM_AUC_ROC, LOOM_AUC_TRAPEZOIDAL, NULL),
                       loom_metrics_precision(g, y, p, NOW, NULL), loom_metrics_mean_iou(g, y, y, 3, w, NULL)};
  loom_session *s = loom_session_new(g, NULL, NULL);
  run_ok(s, 0, NULL, NULL, 0, NULL, NULL, loom_local_variables_initializer(g));
  loom_output feeds[3] = {y, p, w};
  for (int b = 0; b < 2; b++) {
    int lo = b ? 5 : 0, hi = 5; /* a real batch [0, 5), then an empty one */
    int64_t bd[1] = {hi - lo};
    loom_tensor *vals[3] = {loom_tensor_from_data(LOOM_I32, 1, bd, YB + lo, NULL),
                            loom_tensor_from_data(LOOM_F32, 1, bd, PB + lo, NULL),
                            loom_tensor_from_data(LOOM_F32, 1, bd, WT + lo, NULL)};
    for (int k = 0; k < 4; k++) run_ok(s, 3, feeds, vals, 0, NULL, NULL, ms[k].update.node);
    for (int i = 0; i < 3; i++) loom_tensor_free(vals[i]);
  }
  double want[1], got[1];
  {
    double sw = 0, sv = 0;
    for (int i = 0; i < 5; i++) sw += WT[i], sv += WT[i] * PB[i];
    want[0] = sv / sw;
  }
  loom_tensor *t = NULL;
  run_ok(s, 0, NULL, NULL, 1, &ms[0].value, &t, NULL);
  to_double(t, got, 1);
  cr_assert(fabs(got[0] - want[0]) < 1e-6, "mean %g want %g", got[0], want[0]);
  run_ok(s, 0, NULL, NULL, 1, &ms[1].value, &t, NULL);
  to_double(t, got, 1);
  cr_assert(fabs(got[0] - ref_auc(5, PB, YB, WT, 200, LOOM_AUC_ROC, LOOM_AUC_TRAPEZOIDAL)) < 1e-5, "auc %g", got[0]);
  loom_tensor_free(t);
  loom_session_free(s);
  loom_graph_free(g);
}
