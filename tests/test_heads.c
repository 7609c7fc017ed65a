/* Heads (loom_head.h) against TF 2.15's tf.estimator heads: loss under both
 * reductions, every eval metric key and value, every prediction key and
 * value, the export output names and kinds (fixtures from
 * scripts/gen_head_fixtures.py); hand-computed checks; a head inside a
 * model_fn trained, evaluated and used for prediction by the Estimator;
 * bad options and bad labels. */
#include "test_util.h"
#include "estimator/estimator_impl.h"
#include "fixtures/heads/heads_fixtures.h"

#define B 4

static loom_head *make_head(const char *name, loom_reduction red) {
  loom_status *st = loom_status_new();
  loom_head *h = NULL;
  static const double thr2[2] = {0.3, 0.7}, thr1[1] = {0.5};
  static const char *const bin_vocab[2] = {"neg", "pos"}, *const mc_vocab[3] = {"cat", "dog", "bird"};
  if (!strcmp(name, "binary") || !strcmp(name, "binary_named") || !strcmp(name, "binary_vocab")) {
    loom_binary_head_options o = loom_binary_head_options_default();
    o.weight_column = "w";
    o.loss_reduction = red;
    if (!strcmp(name, "binary")) {
      o.nthresholds = 2;
      o.thresholds = thr2;
    } else if (!strcmp(name, "binary_vocab")) {
      o.nlabel_vocabulary = 2;
      o.label_vocabulary = bin_vocab;
    } else {
      o.name = "bin";
    }
    h = loom_binary_class_head_new(&o, st);
  } else if (!strcmp(name, "multi_class") || !strcmp(name, "multi_class_vocab")) {
    loom_multi_class_head_options o = loom_multi_class_head_options_default();
    o.n_classes = 3;
    o.weight_column = "w";
    o.loss_reduction = red;
    if (!strcmp(name, "multi_class_vocab")) {
      o.nlabel_vocabulary = 3;
      o.label_vocabulary = mc_vocab;
    }
    h = loom_multi_class_head_new(&o, st);
  } else if (!strcmp(name, "multi_label")) {
    loom_multi_label_head_options o = loom_multi_label_head_options_default();
    o.n_classes = 3;
    o.weight_column = "w";
    o.nthresholds = 1;
    o.thresholds = thr1;
    o.loss_reduction = red;
    h = loom_multi_label_head_new(&o, st);
  } else if (!strcmp(name, "regression") || !strcmp(name, "poisson") || !strcmp(name, "logistic")) {
    loom_regression_head_options o = loom_regression_head_options_default();
    o.weight_column = "w";
    o.loss_reduction = red;
    if (!strcmp(name, "regression")) {
      o.label_dimension = 2;
      h = loom_regression_head_new(&o, st);
    } else if (!strcmp(name, "poisson")) {
      h = loom_poisson_regression_head_new(&o, st);
    } else {
      h = loom_logistic_regression_head_new(&o, st);
    }
  } else if (!strcmp(name, "multi_head")) {
    loom_binary_head_options bo = loom_binary_head_options_default();
    bo.weight_column = "w";
    bo.loss_reduction = red;
    bo.name = "b";
    loom_multi_class_head_options mo = loom_multi_class_head_options_default();
    mo.n_classes = 3;
    mo.weight_column = "w";
    mo.loss_reduction = red;
    mo.name = "m";
    loom_head *hs[2] = {loom_binary_class_head_new(&bo, st), loom_multi_class_head_new(&mo, st)};
    cr_assert(hs[0] && hs[1], "%s", loom_status_message(st));
    double hw[2] = {1.0, 2.0};
    h = loom_multi_head_new(2, hs, hw, st);
  }
  cr_assert(h, "head %s: %s", name, loom_status_message(st));
  loom_status_free(st);
  return h;
}

/* A graph with the case's logits, labels and weight feature as constants;
 * the head's spec for mode. */
typedef struct built {
  loom_graph *g;
  loom_features *f;
  loom_head *h;
  loom_estimator_spec spec;
} built;

static int is_float_labels(const char *name) {
  return !strcmp(name, "regression") || !strcmp(name, "poisson") || !strcmp(name, "logistic");
}

static int node_train_calls;
static loom_node *train_op_fn(loom_graph *g, loom_output loss, void *user) {
  (void)loss;
  (void)user;
  node_train_calls++;
  return loom_group(g, 0, NULL, "train_op");
}

static void build_case(built *b, const hf_case *c, loom_mode mode, loom_reduction red) {
  memset(b, 0, sizeof *b);
  b->g = loom_graph_new();
  b->f = loom_features_new();
  b->h = make_head(c->name, red);
  int64_t L = c->nlogits / B;
  int64_t ld[2] = {B, L}, wd[2] = {B, 1};
  loom_output logits = loom_const_data(b->g, LOOM_F32, 2, ld, c->logits, "logits");
  loom_features_add(b->f, "w", loom_const_data(b->g, LOOM_F32, 2, wd, hf_weights, "w"), NULL);
  b->spec.mode = mode;
  b->spec.g = b->g;
  loom_status *st = loom_status_new();
  loom_code rc;
  if (!strcmp(c->name, "multi_head")) {
    int64_t lab[8];
    for (int i = 0; i < 8; i++) lab[i] = (int64_t)c->labels[i];
    loom_output labs[2] = {loom_const_data(b->g, LOOM_I64, 2, wd, lab, "lb"),
                           loom_const_data(b->g, LOOM_I64, 2, wd, lab + 4, "lm")};
    rc = loom_head_create_spec_multi(b->h, b->g, b->f, mode, logits, labs, train_op_fn, NULL, &b->spec, st);
  } else {
    int64_t dd[2] = {B, c->nlabels / B};
    loom_output labels;
    if (c->nvocab) {
      /* the vocabulary entries of the ids, as TF's fixture fed them */
      loom_tensor *lt = loom_tensor_new(LOOM_STRING, 2, dd, NULL);
      for (int i = 0; i < c->nlabels; i++) {
        const char *e = c->vocab[(int)c->labels[i]];
        loom_tensor_set_string(lt, i, e, strlen(e), NULL);
      }
      labels = loom_const(b->g, lt, "labels");
      loom_tensor_free(lt);
    } else if (is_float_labels(c->name)) {
      float v[16];
      for (int i = 0; i < c->nlabels; i++) v[i] = (float)c->labels[i];
      labels = loom_const_data(b->g, LOOM_F32, 2, dd, v, "labels");
    } else {
      int64_t v[16];
      for (int i = 0; i < c->nlabels; i++) v[i] = (int64_t)c->labels[i];
      labels = loom_const_data(b->g, LOOM_I64, 2, dd, v, "labels");
    }
    rc = loom_head_create_spec(b->h, b->g, b->f, mode, logits, labels, train_op_fn, NULL, &b->spec, st);
  }
  cr_assert_eq(rc, LOOM_OK, "%s %s: %s", c->name, loom_mode_key(mode), loom_status_message(st));
  cr_assert_eq(loom__spec_validate(&b->spec, st), LOOM_OK, "%s: spec: %s", c->name, loom_status_message(st));
  loom_status_free(st);
}

static void built_free(built *b) {
  loom__spec_clear(&b->spec);
  loom_features_free(b->f);
  loom_head_free(b->h);
  loom_graph_free(b->g);
}

static int cmpstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void expect_sorted_keys(const char *what, const char *cname, int n, char **keys, int want_n,
                               const char *const *want) {
  char *sorted[128];
  cr_assert(n <= 128);
  for (int i = 0; i < n; i++) sorted[i] = keys[i];
  qsort(sorted, (size_t)n, sizeof(char *), cmpstr);
  char got[4096] = "", exp[4096] = "";
  for (int i = 0; i < n; i++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s ", sorted[i]);
  for (int i = 0; i < want_n; i++) snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s ", want[i]);
  cr_expect_str_eq(got, exp, "%s %s keys:\n got  %s\n want %s", cname, what, got, exp);
}

static double scalar_of(const loom_tensor *t) {
  switch (loom_tensor_dtype(t)) {
  case LOOM_F32: return *(const float *)loom_tensor_data_const(t);
  case LOOM_F64: return *(const double *)loom_tensor_data_const(t);
  default: cr_assert_fail("metric dtype %s", loom_dtype_name(loom_tensor_dtype(t)));
  }
  return 0;
}

static double elem_of(const loom_tensor *t, int64_t i) {
  const void *d = loom_tensor_data_const(t);
  switch (loom_tensor_dtype(t)) {
  case LOOM_F32: return ((const float *)d)[i];
  case LOOM_F64: return ((const double *)d)[i];
  case LOOM_I32: return ((const int32_t *)d)[i];
  case LOOM_I64: return (double)((const int64_t *)d)[i];
  default: cr_assert_fail("dtype %s", loom_dtype_name(loom_tensor_dtype(t)));
  }
  return 0;
}

/* TF's AUCs (Keras) divide without loom_metrics_auc's v1 epsilon. */
static double tol_for(const char *key) { return strstr(key, "auc") ? 2e-4 : 2e-6; }

/* ---- EVAL: loss and every metric; keys exactly TF's ---- */
Test(heads, eval_metrics_match_tf) {
  for (int ci = 0; ci < HF_NCASES; ci++) {
    const hf_case *c = &hf_cases[ci];
    built b;
    build_case(&b, c, LOOM_MODE_EVAL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
    expect_sorted_keys("metric", c->name, b.spec.nmet, b.spec.met_names, c->nmetrics, c->metric_keys);
    cr_assert_eq(b.spec.nmet, c->nmetrics, "%s: %d metrics, want %d", c->name, b.spec.nmet, c->nmetrics);
    loom_status *st = loom_status_new();
    loom_session *s = loom_session_new(b.g, NULL, st);
    cr_assert(s, "%s", loom_status_message(st));
    loom_node *init = loom_local_variables_initializer(b.g);
    cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st), LOOM_OK, "%s",
                 loom_status_message(st));
    loom_output ups[128];
    loom_tensor *upv[128] = {0};
    for (int i = 0; i < b.spec.nmet; i++) ups[i] = b.spec.mets[i].update;
    ups[b.spec.nmet] = b.spec.loss;
    cr_assert_eq(loom_session_run(s, NULL, NULL, 0, ups, upv, b.spec.nmet + 1, NULL, 0, st), LOOM_OK, "%s: %s",
                 c->name, loom_status_message(st));
    double loss = scalar_of(upv[b.spec.nmet]);
    cr_expect(fabs(loss - c->loss_sobs) <= 2e-6 * (1 + fabs(c->loss_sobs)), "%s: loss %.9g want %.9g", c->name, loss,
              c->loss_sobs);
    for (int i = 0; i <= b.spec.nmet; i++) loom_tensor_free(upv[i]);
    for (int i = 0; i < b.spec.nmet; i++) {
      loom_tensor *v = NULL;
      cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &b.spec.mets[i].value, &v, 1, NULL, 0, st), LOOM_OK, "%s",
                   loom_status_message(st));
      double got = scalar_of(v);
      loom_tensor_free(v);
      int k = 0;
      while (k < c->nmetrics && strcmp(c->metric_keys[k], b.spec.met_names[i])) k++;
      if (k == c->nmetrics) continue; /* reported by the key comparison */
      double want = c->metric_values[k], tol = tol_for(b.spec.met_names[i]);
      cr_expect(fabs(got - want) <= tol * (1 + fabs(want)), "%s: metric %s = %.9g, TF %.9g", c->name,
                b.spec.met_names[i], got, want);
    }
    loom_session_free(s);
    loom_status_free(st);
    built_free(&b);
  }
}

/* ---- loom_head_loss and loom_head_predictions alone (TF's head.loss, head.predictions) ---- */
static void collect_pred(const char *key, loom_output v, void *user) {
  int *n = user;
  cr_assert(key && *key && v.node, "prediction %d", *n);
  (*n)++;
}

Test(heads, loss_and_predictions_alone_match_tf) {
  for (int ci = 0; ci < HF_NCASES; ci++) {
    const hf_case *c = &hf_cases[ci];
    for (int r = 0; r < 2; r++) {
      loom_reduction red = r ? LOOM_REDUCTION_SUM : LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
      built b; /* the EVAL spec's graph: the same logits, labels and weights as constants */
      build_case(&b, c, LOOM_MODE_EVAL, red);
      loom_head *h = make_head(c->name, red);
      loom_status *st = loom_status_new();
      int64_t L = c->nlogits / B, ld[2] = {B, L}, wd[2] = {B, 1};
      loom_output logits = loom_const_data(b.g, LOOM_F32, 2, ld, c->logits, "logits2");
      loom_output labs[2];
      if (!strcmp(c->name, "multi_head")) {
        int64_t lab[8];
        for (int i = 0; i < 8; i++) lab[i] = (int64_t)c->labels[i];
        labs[0] = loom_const_data(b.g, LOOM_I64, 2, wd, lab, "lb2");
        labs[1] = loom_const_data(b.g, LOOM_I64, 2, wd, lab + 4, "lm2");
      } else if (c->nvocab) {
        int64_t dd[2] = {B, c->nlabels / B};
        loom_tensor *lt = loom_tensor_new(LOOM_STRING, 2, dd, NULL);
        for (int i = 0; i < c->nlabels; i++) {
          const char *e = c->vocab[(int)c->labels[i]];
          loom_tensor_set_string(lt, i, e, strlen(e), NULL);
        }
        labs[0] = loom_const(b.g, lt, "labels2");
        loom_tensor_free(lt);
      } else {
        int64_t dd[2] = {B, c->nlabels / B};
        float v[16];
        for (int i = 0; i < c->nlabels; i++) v[i] = (float)c->labels[i];
        labs[0] = loom_const_data(b.g, LOOM_F32, 2, dd, v, "labels2");
        if (!is_float_labels(c->name)) labs[0] = loom_cast(b.g, labs[0], LOOM_I64, NULL);
      }
      loom_output loss = loom_head_loss(h, b.g, b.f, logits, labs, st);
      cr_assert(loss.node, "%s: %s", c->name, loom_status_message(st));
      int np = 0;
      cr_assert_eq(loom_head_predictions(h, b.g, logits, collect_pred, &np, st), LOOM_OK, "%s: %s", c->name,
                   loom_status_message(st));
      cr_expect_eq(np, c->npreds, "%s: %d predictions, TF %d", c->name, np, c->npreds);
      loom_session *s = loom_session_new(b.g, NULL, st);
      cr_assert(s, "%s", loom_status_message(st));
      loom_tensor *v = NULL;
      cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &loss, &v, 1, NULL, 0, st), LOOM_OK, "%s: %s", c->name,
                   loom_status_message(st));
      double got = scalar_of(v), want = r ? c->loss_sum : c->loss_sobs;
      cr_expect(fabs(got - want) <= 2e-6 * (1 + fabs(want)), "%s red %d: loss %.9g want %.9g", c->name, (int)red,
                got, want);
      loom_tensor_free(v);
      loom_session_free(s);
      loom_status_free(st);
      loom_head_free(h);
      built_free(&b);
    }
  }
  /* a multi-head without a head's labels names it */
  loom_head *h = make_head("multi_head", LOOM_REDUCTION_SUM);
  loom_graph *g = loom_graph_new();
  loom_status *st = loom_status_new();
  int64_t ld[2] = {B, 4};
  float z[16] = {0};
  loom_output labs[2] = {loom_const_data(g, LOOM_F32, 2, ld, z, "l"), {NULL, 0}};
  loom_output loss = loom_head_loss(h, g, NULL, loom_const_data(g, LOOM_F32, 2, ld, z, "x"), labs, st);
  cr_expect(!loss.node && strstr(loom_status_message(st), "labels of head 'm'"), "%s", loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
  loom_head_free(h);
}

/* ---- TRAIN: the loss under SUM and SUM_OVER_BATCH_SIZE; the train op ---- */
Test(heads, train_loss_both_reductions) {
  for (int ci = 0; ci < HF_NCASES; ci++) {
    const hf_case *c = &hf_cases[ci];
    for (int r = 0; r < 2; r++) {
      loom_reduction red = r ? LOOM_REDUCTION_SUM : LOOM_REDUCTION_SUM_OVER_BATCH_SIZE;
      double want = r ? c->loss_sum : c->loss_sobs;
      int calls = node_train_calls;
      built b;
      build_case(&b, c, LOOM_MODE_TRAIN, red);
      cr_expect_eq(node_train_calls, calls + 1, "%s: train_op_fn called %d times", c->name, node_train_calls - calls);
      cr_expect(b.spec.train_op != NULL);
      loom_tensor *t = tu_run1(b.g, 0, NULL, NULL, b.spec.loss);
      double got = scalar_of(t);
      loom_tensor_free(t);
      cr_expect(fabs(got - want) <= 2e-6 * (1 + fabs(want)), "%s reduction %d: loss %.9g, TF %.9g", c->name, (int)red,
                got, want);
      built_free(&b);
    }
  }
}

/* ---- PREDICT: prediction keys and values, export outputs ---- */
static const char *kind_tf_name(loom_export_kind k) {
  return k == LOOM_EXPORT_CLASSIFY ? "ClassificationOutput" : k == LOOM_EXPORT_REGRESS ? "RegressionOutput"
                                                                                        : "PredictOutput";
}

Test(heads, predictions_and_exports_match_tf) {
  for (int ci = 0; ci < HF_NCASES; ci++) {
    const hf_case *c = &hf_cases[ci];
    built b;
    build_case(&b, c, LOOM_MODE_PREDICT, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
    const char *want_keys[64];
    for (int i = 0; i < c->npreds; i++) want_keys[i] = c->preds[i].key;
    expect_sorted_keys("prediction", c->name, b.spec.npred, b.spec.pred_keys, c->npreds, want_keys);
    for (int i = 0; i < b.spec.npred; i++) {
      const hf_pred *p = NULL;
      for (int k = 0; k < c->npreds; k++)
        if (!strcmp(c->preds[k].key, b.spec.pred_keys[i])) p = &c->preds[k];
      if (!p) continue;
      loom_tensor *t = tu_run1(b.g, 0, NULL, NULL, b.spec.preds[i]);
      cr_assert_eq(loom_tensor_numel(t), p->n, "%s %s: %lld values, want %d", c->name, p->key,
                   (long long)loom_tensor_numel(t), p->n);
      loom_dtype dt = loom_tensor_dtype(t);
      if (p->s) {
        /* "classes" / "all_classes": TF's exact strings (decimal ids or vocabulary entries) */
        cr_assert_eq(dt, LOOM_STRING, "%s %s: dtype %s", c->name, p->key, loom_dtype_name(dt));
        for (int k = 0; k < p->n; k++) {
          size_t len = 0;
          const char *sv = loom_tensor_get_string(t, k, &len);
          cr_expect(len == strlen(p->s[k]) && !memcmp(sv, p->s[k], len), "%s %s[%d] = '%.*s', TF '%s'", c->name,
                    p->key, k, (int)len, sv, p->s[k]);
        }
      } else {
        cr_expect_str_eq(loom_dtype_name(dt), p->dtype, "%s %s: dtype %s, TF %s", c->name, p->key,
                         loom_dtype_name(dt), p->dtype);
        for (int k = 0; k < p->n; k++)
          cr_expect(fabs(elem_of(t, k) - p->v[k]) <= 1e-6 * (1 + fabs(p->v[k])), "%s %s[%d] = %.9g, TF %.9g",
                    c->name, p->key, k, elem_of(t, k), p->v[k]);
      }
      loom_tensor_free(t);
    }
    /* export outputs: names, kinds, predict keys */
    char *names[32];
    for (int i = 0; i < b.spec.nexp; i++) names[i] = b.spec.exps[i].name;
    expect_sorted_keys("export", c->name, b.spec.nexp, names, c->nexports, c->export_names);
    for (int i = 0; i < b.spec.nexp; i++) {
      const est_export_out *x = &b.spec.exps[i];
      char desc[2048];
      snprintf(desc, sizeof desc, "%s", kind_tf_name(x->kind));
      if (x->kind == LOOM_EXPORT_PREDICT) {
        char *ks[64];
        for (int k = 0; k < x->n; k++) ks[k] = x->keys[k];
        qsort(ks, (size_t)x->n, sizeof(char *), cmpstr);
        for (int k = 0; k < x->n; k++) snprintf(desc + strlen(desc), sizeof desc - strlen(desc), "%s%s", k ? "," : ":", ks[k]);
      } else if (x->kind == LOOM_EXPORT_CLASSIFY) {
        cr_expect(x->n == 2 && !strcmp(x->keys[0], "classes") && !strcmp(x->keys[1], "scores"));
      } else {
        cr_expect(x->n == 1 && !strcmp(x->keys[0], "outputs"));
      }
      for (int k = 0; k < c->nexports; k++)
        if (!strcmp(c->export_names[k], x->name))
          cr_expect_str_eq(desc, c->export_kinds[k], "%s export %s: %s, TF %s", c->name, x->name, desc,
                           c->export_kinds[k]);
    }
    built_free(&b);
  }
}

/* ---- hand computations (independent of TF) ---- */
Test(heads, binary_by_hand) {
  /* logits -1, .5, 2, -.3; labels 0 1 1 1; weights 1 2 .5 1.5 */
  const hf_case *c = &hf_cases[0];
  double num = 0, den = 0, wsum = 0, lm = 0, pm = 0;
  for (int i = 0; i < B; i++) {
    double x = c->logits[i], z = c->labels[i], w = hf_weights[i];
    double l = fmax(x, 0) - x * z + log1p(exp(-fabs(x)));
    num += w * l;
    den += 1;
    wsum += w;
    lm += w * z;
    pm += w / (1 + exp(-x));
  }
  built b;
  build_case(&b, c, LOOM_MODE_EVAL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_tensor *t = tu_run1(b.g, 0, NULL, NULL, b.spec.loss);
  cr_expect(fabs(scalar_of(t) - num / den) < 1e-6, "loss %.9g want %.9g", scalar_of(t), num / den);
  loom_tensor_free(t);
  cr_expect(fabs(c->metric_values[7] - lm / wsum) < 1e-6, "label/mean fixture");
  cr_expect(fabs(c->metric_values[11] - pm / wsum) < 1e-6, "prediction/mean fixture");
  /* accuracy: correct = examples 0, 1, 2 -> (1 + 2 + .5) / 5 */
  cr_expect(fabs(c->metric_values[0] - 3.5 / 5.0) < 1e-6);
  built_free(&b);
}

Test(heads, poisson_loss_by_hand) {
  const hf_case *c = NULL;
  for (int i = 0; i < HF_NCASES; i++)
    if (!strcmp(hf_cases[i].name, "poisson")) c = &hf_cases[i];
  double sum = 0;
  for (int i = 0; i < B; i++) {
    double x = c->logits[i], z = c->labels[i];
    double l = exp(x) - z * x;
    if (z > 1) l += z * log(z) - z + 0.5 * log(2 * M_PI * z);
    sum += hf_weights[i] * l;
  }
  cr_expect(fabs(c->loss_sum - sum) < 1e-5, "TF %.9g, by hand %.9g", c->loss_sum, sum);
  built b;
  build_case(&b, c, LOOM_MODE_TRAIN, LOOM_REDUCTION_SUM);
  loom_tensor *t = tu_run1(b.g, 0, NULL, NULL, b.spec.loss);
  cr_expect(fabs(scalar_of(t) - sum) < 1e-5, "loom %.9g, by hand %.9g", scalar_of(t), sum);
  loom_tensor_free(t);
  built_free(&b);
}

/* ---- bad options ---- */
Test(heads, bad_options_name_the_option) {
  loom_status *st = loom_status_new();
  loom_multi_class_head_options mo = loom_multi_class_head_options_default();
  mo.n_classes = 1;
  cr_expect_null(loom_multi_class_head_new(&mo, st));
  cr_expect_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "n_classes"), "%s", loom_status_message(st));
  mo.n_classes = 2;
  cr_expect_null(loom_multi_class_head_new(&mo, st));
  cr_expect(strstr(loom_status_message(st), "n_classes"), "%s", loom_status_message(st));
  loom_multi_label_head_options lo = loom_multi_label_head_options_default();
  lo.n_classes = 1;
  cr_expect_null(loom_multi_label_head_new(&lo, st));
  cr_expect(strstr(loom_status_message(st), "n_classes"), "%s", loom_status_message(st));
  loom_regression_head_options ro = loom_regression_head_options_default();
  ro.label_dimension = 0;
  cr_expect_null(loom_regression_head_new(&ro, st));
  cr_expect(strstr(loom_status_message(st), "label_dimension"), "%s", loom_status_message(st));
  ro.label_dimension = 2;
  cr_expect_null(loom_logistic_regression_head_new(&ro, st));
  cr_expect(strstr(loom_status_message(st), "label_dimension"), "%s", loom_status_message(st));
  ro.label_dimension = 1;
  ro.loss_reduction = LOOM_REDUCTION_NONE;
  cr_expect_null(loom_poisson_regression_head_new(&ro, st));
  cr_expect(strstr(loom_status_message(st), "loss_reduction"), "%s", loom_status_message(st));
  loom_binary_head_options bo = loom_binary_head_options_default();
  double thr = 1.5;
  bo.nthresholds = 1;
  bo.thresholds = &thr;
  cr_expect_null(loom_binary_class_head_new(&bo, st));
  cr_expect(strstr(loom_status_message(st), "thresholds"), "%s", loom_status_message(st));
  const char *voc3[3] = {"a", "b", "c"};
  bo = loom_binary_head_options_default();
  bo.nlabel_vocabulary = 3;
  bo.label_vocabulary = voc3;
  cr_expect_null(loom_binary_class_head_new(&bo, st));
  cr_expect(strstr(loom_status_message(st), "label_vocabulary"), "%s", loom_status_message(st));
  /* multi-head: unnamed heads, duplicate names */
  loom_head *hs[2] = {loom_binary_class_head_new(NULL, st), loom_regression_head_new(NULL, st)};
  cr_expect_null(loom_multi_head_new(2, hs, NULL, st));
  cr_expect(strstr(loom_status_message(st), "name"), "%s", loom_status_message(st));
  bo = loom_binary_head_options_default();
  bo.name = "x";
  loom_head *hd[2] = {loom_binary_class_head_new(&bo, st), loom_binary_class_head_new(&bo, st)};
  cr_expect_null(loom_multi_head_new(2, hd, NULL, st));
  cr_expect(strstr(loom_status_message(st), "'x'"), "%s", loom_status_message(st));
  loom_status_free(st);
}

/* ---- bad labels at run time, missing weight column at build time ---- */
static loom_code run_with_labels(loom_head *h, loom_dtype dt, int ncol, const void *labels, int64_t L, char *msg,
                                 size_t cap) {
  loom_graph *g = loom_graph_new();
  loom_features *f = loom_features_new();
  float lg[B * 3] = {0};
  int64_t ld[2] = {B, L}, dd[2] = {B, ncol};
  loom_output logits = loom_const_data(g, LOOM_F32, 2, ld, lg, "logits");
  loom_output lab = loom_const_data(g, dt, 2, dd, labels, "labels");
  loom_estimator_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.mode = LOOM_MODE_EVAL;
  spec.g = g;
  loom_status *st = loom_status_new();
  loom_code rc = loom_head_create_spec(h, g, f, LOOM_MODE_EVAL, logits, lab, NULL, NULL, &spec, st);
  if (rc == LOOM_OK) rc = tu_run_err(g, 0, NULL, NULL, spec.loss, msg, cap);
  else snprintf(msg, cap, "%s", loom_status_message(st));
  loom_status_free(st);
  loom__spec_clear(&spec);
  loom_features_free(f);
  loom_graph_free(g);
  return rc;
}

Test(heads, labels_out_of_range_fail_the_run) {
  char msg[512];
  loom_multi_class_head_options mo = loom_multi_class_head_options_default();
  mo.n_classes = 3;
  loom_head *h = loom_multi_class_head_new(&mo, NULL);
  int64_t ok[B] = {0, 1, 2, 1}, bad[B] = {0, 1, 5, 1};
  cr_expect_eq(run_with_labels(h, LOOM_I64, 1, ok, 3, msg, sizeof msg), LOOM_OK, "%s", msg);
  cr_expect_eq(run_with_labels(h, LOOM_I64, 1, bad, 3, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "check_label_range") && strstr(msg, "= 5"), "%s", msg);
  float fl[B] = {0, 1, 2, 1};
  cr_expect_eq(run_with_labels(h, LOOM_F32, 1, fl, 3, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "integer"), "%s", msg);
  loom_head_free(h);

  h = loom_binary_class_head_new(NULL, NULL);
  float b_ok[B] = {0, 1, 1, 0}, b_bad[B] = {0, 1, 2, 0}, b_neg[B] = {0, -0.5f, 1, 0};
  cr_expect_eq(run_with_labels(h, LOOM_F32, 1, b_ok, 1, msg, sizeof msg), LOOM_OK, "%s", msg);
  cr_expect_eq(run_with_labels(h, LOOM_F32, 1, b_bad, 1, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "check_label_range") && strstr(msg, "= 2"), "%s", msg);
  cr_expect_eq(run_with_labels(h, LOOM_F32, 1, b_neg, 1, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "check_label_range") && strstr(msg, "= -1"), "%s", msg);
  /* labels of the wrong width */
  float wide[B * 2] = {0};
  cr_expect_eq(run_with_labels(h, LOOM_F32, 2, wide, 1, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "labels shape [4,2]"), "%s", msg);
  loom_head_free(h);

  loom_binary_head_options bo = loom_binary_head_options_default();
  bo.weight_column = "wcol";
  h = loom_binary_class_head_new(&bo, NULL);
  cr_expect_eq(run_with_labels(h, LOOM_F32, 1, b_ok, 1, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "weight_column 'wcol'"), "%s", msg);
  loom_head_free(h);

  loom_multi_label_head_options lo = loom_multi_label_head_options_default();
  lo.n_classes = 3;
  h = loom_multi_label_head_new(&lo, NULL);
  int64_t ml_bad[B * 3] = {1, 0, 1, 0, 3, 0, 0, 0, 0, 1, 1, 1};
  cr_expect_eq(run_with_labels(h, LOOM_I64, 3, ml_bad, 3, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "check_label_range") && strstr(msg, "= 3"), "%s", msg);
  loom_head_free(h);
}

/* ---- a head inside a model_fn: train, evaluate, predict ---- */
#define NE 64
static float EX[NE * 2], EY[NE], EW[NE];

static void make_estimator_data(void) {
  for (int i = 0; i < NE; i++) {
    float a = (float)((i * 37) % 17) / 8.0f - 1.0f, bb = (float)((i * 11) % 13) / 6.0f - 1.0f;
    EX[2 * i] = a;
    EX[2 * i + 1] = bb;
    EY[i] = a + 0.5f * bb > 0.1f ? 1.0f : 0.0f;
    EW[i] = i % 4 == 0 ? 2.0f : 1.0f;
  }
}

static loom_dataset *est_input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p;
  (void)user;
  int64_t xd[2] = {NE, 2}, yd[2] = {NE, 1}, wd[1] = {NE};
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, EX, NULL);
  loom_tensor *y = loom_tensor_from_data(LOOM_F32, 2, yd, EY, NULL);
  loom_tensor *w = loom_tensor_from_data(LOOM_F32, 1, wd, EW, NULL);
  const char *names[3] = {"x", "y", "w"};
  const loom_tensor *arr[3] = {x, y, w};
  loom_dataset *ds = loom_dataset_from_tensors(3, names, arr, "y", st);
  loom_tensor_free(x);
  loom_tensor_free(y);
  loom_tensor_free(w);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, 16, 0, st);
  return ds;
}

static loom_node *sgd_train_op(loom_graph *g, loom_output loss, void *user) {
  (void)user;
  loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 0.5f, "lr"));
  loom_node *op = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL);
  loom_optimizer_free(opt);
  return op;
}

static loom_code head_model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                               const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec,
                               void *user, loom_status *st) {
  (void)params;
  (void)cfg;
  const loom_head *h = user;
  loom_dense_options d = loom_dense_options_default();
  loom_output logits = loom_layers_dense(g, loom_features_get(f, "x"), loom_head_logits_dimension(h), &d, "logits");
  return loom_head_create_spec(h, g, f, mode, logits, labels, sgd_train_op, NULL, spec, st);
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  int64_t dims[2] = {-1, 2};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, dims, "x");
  loom_code rc = loom_features_add(f, "x", x, st);
  if (rc == LOOM_OK) rc = loom_features_add(r, "x", x, st);
  return rc;
}

Test(heads, binary_head_in_estimator) {
  make_estimator_data();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "heads_est");
  loom_status *st = loom_status_new();
  loom_binary_head_options bo = loom_binary_head_options_default();
  bo.weight_column = "w";
  double thr = 0.5;
  bo.nthresholds = 1;
  bo.thresholds = &thr;
  loom_head *h = loom_binary_class_head_new(&bo, st);
  cr_assert(h, "%s", loom_status_message(st));
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  loom_estimator *e = loom_estimator_new(head_model_fn, h, dir, &c, NULL, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  loom_train_options to = loom_train_options_default();
  to.steps = 300;
  cr_assert_eq(loom_estimator_train(e, est_input_fn, NULL, &to, st), LOOM_OK, "%s", loom_status_message(st));

  loom_eval_result *r = NULL;
  loom_eval_options eo = loom_eval_options_default();
  cr_assert_eq(loom_estimator_evaluate(e, est_input_fn, NULL, &eo, &r, st), LOOM_OK, "%s", loom_status_message(st));
  static const char *const want[] = {"accuracy", "accuracy/positive_threshold_0.5", "accuracy_baseline", "auc",
                                     "auc_precision_recall", "average_loss", "global_step", "label/mean", "loss",
                                     "precision", "precision/positive_threshold_0.5", "prediction/mean", "recall",
                                     "recall/positive_threshold_0.5"};
  cr_assert_eq(loom_eval_result_count(r), 14, "%d results", loom_eval_result_count(r));
  for (int i = 0; i < 14; i++) cr_expect_str_eq(loom_eval_result_key(r, i), want[i]);
  double acc, acc_t, base, lmean, auc;
  loom_eval_result_get(r, "accuracy", &acc, NULL);
  loom_eval_result_get(r, "accuracy/positive_threshold_0.5", &acc_t, NULL);
  loom_eval_result_get(r, "accuracy_baseline", &base, NULL);
  loom_eval_result_get(r, "label/mean", &lmean, NULL);
  loom_eval_result_get(r, "auc", &auc, NULL);
  cr_expect(acc > 0.9, "accuracy %g", acc);
  cr_expect(fabs(acc - acc_t) < 1e-6, "accuracy %g vs at 0.5 %g", acc, acc_t);
  double ws = 0, wl = 0;
  for (int i = 0; i < NE; i++) {
    ws += EW[i];
    wl += EW[i] * EY[i];
  }
  cr_expect(fabs(lmean - wl / ws) < 1e-6, "label/mean %g want %g", lmean, wl / ws);
  cr_expect(fabs(base - fmax(wl / ws, 1 - wl / ws)) < 1e-6, "accuracy_baseline %g", base);
  cr_expect(auc > 0.95, "auc %g", auc);
  cr_expect_eq(loom_eval_result_global_step(r), 300);
  loom_eval_result_free(r);

  loom_predict_options po = loom_predict_options_default();
  loom_prediction_iter *it = loom_estimator_predict(e, est_input_fn, NULL, &po, st);
  cr_assert(it, "%s", loom_status_message(st));
  int n = 0, right = 0;
  static char cls[NE][4], allc[NE][2][4]; /* the string classes, to compare with the predictor's */
  while (loom_prediction_next(it, st) == LOOM_OK) {
    cr_assert_eq(loom_prediction_count(it), 7);
    const loom_tensor *ct = loom_prediction_get(it, "classes"), *act = loom_prediction_get(it, "all_classes");
    cr_assert(ct && act && n < NE);
    cr_assert_eq(loom_tensor_dtype(ct), LOOM_STRING);
    cr_assert_eq(loom_tensor_numel(ct), 1);
    cr_assert_eq(loom_tensor_numel(act), 2);
    size_t len = 0;
    const char *cs = loom_tensor_get_string(ct, 0, &len);
    cr_assert(len < 4);
    memcpy(cls[n], cs, len);
    for (int k = 0; k < 2; k++) {
      cs = loom_tensor_get_string(act, k, &len);
      cr_expect(len == 1 && cs[0] == '0' + k, "all_classes[%d] = '%.*s'", k, (int)len, cs);
      memcpy(allc[n][k], cs, len < 4 ? len : 3);
    }
    const loom_tensor *ids = loom_prediction_get(it, "class_ids");
    const loom_tensor *pr = loom_prediction_get(it, "probabilities");
    const loom_tensor *lg = loom_prediction_get(it, "logistic");
    cr_assert(ids && pr && lg);
    int64_t id = *(const int64_t *)loom_tensor_data_const(ids);
    const float *p = loom_tensor_data_const(pr);
    float lgv = *(const float *)loom_tensor_data_const(lg);
    cr_expect(fabs(p[1] - lgv) < 1e-6 && fabs(p[0] + p[1] - 1) < 1e-6);
    cr_expect_eq(id, lgv > 0.5f ? 1 : 0);
    cr_expect_str_eq(cls[n], id ? "1" : "0", "row %d: classes '%s' for class id %lld", n, cls[n], (long long)id);
    right += (float)id == EY[n];
    n++;
  }
  cr_expect_eq(n, NE);
  cr_expect(right >= (int)(0.9 * NE), "%d of %d right", right, NE);
  loom_prediction_iter_free(it);

  /* export: with a float receiver TF (and loom) skip the classify/regress
   * signatures (they need one string receiver); "predict" carries every
   * prediction, and so does "serving_default", a predict signature in place
   * of the classify one (TF Serving's :predict needs no signature_name) */
  char exp_base[512], exp_dir[1024];
  snprintf(exp_base, sizeof exp_base, "%s/export", dir);
  cr_assert_eq(loom_estimator_export(e, serving_fn, NULL, exp_base, NULL, exp_dir, sizeof exp_dir, st), LOOM_OK,
               "%s", loom_status_message(st));
  loom_predictor_options pro = loom_predictor_options_default();
  pro.signature = "predict";
  loom_predictor *pd = loom_predictor_load(exp_dir, &pro, st);
  cr_assert(pd, "%s", loom_status_message(st));
  cr_assert_eq(loom_predictor_num_outputs(pd, "predict"), 7);
  cr_expect_eq(loom_predictor_num_outputs(pd, "serving_default"), 7);
  for (int i = 0; i < 7; i++)
    cr_expect_str_eq(loom_predictor_output_key(pd, "serving_default", i), loom_predictor_output_key(pd, "predict", i));
  int ki = -1, ci = -1, ai = -1;
  for (int i = 0; i < 7; i++) {
    const char *key = loom_predictor_output_key(pd, "predict", i);
    if (!strcmp(key, "class_ids")) ki = i;
    if (!strcmp(key, "classes")) ci = i;
    if (!strcmp(key, "all_classes")) ai = i;
  }
  cr_assert(ki >= 0 && ci >= 0 && ai >= 0);
  int64_t xd[2] = {NE, 2};
  loom_tensor *xin = loom_tensor_from_data(LOOM_F32, 2, xd, EX, NULL);
  loom_tensor *outs[7] = {0};
  cr_assert_eq(loom_predictor_run(pd, "predict", 1, &xin, 7, outs, st), LOOM_OK, "%s", loom_status_message(st));
  int right2 = 0;
  for (int i = 0; i < NE; i++) right2 += (float)((const int64_t *)loom_tensor_data_const(outs[ki]))[i] == EY[i];
  cr_expect_eq(right2, right, "predictor %d right, predict %d", right2, right);
  /* string classes from the exported model: bitwise those of Estimator predict */
  cr_assert_eq(loom_tensor_dtype(outs[ci]), LOOM_STRING);
  cr_assert_eq(loom_tensor_dtype(outs[ai]), LOOM_STRING);
  cr_assert_eq(loom_tensor_numel(outs[ci]), NE);
  cr_assert_eq(loom_tensor_numel(outs[ai]), 2 * NE);
  for (int i = 0; i < NE; i++) {
    size_t len = 0;
    const char *cs = loom_tensor_get_string(outs[ci], i, &len);
    cr_expect(len == strlen(cls[i]) && !memcmp(cs, cls[i], len), "row %d: predictor classes '%.*s', predict '%s'", i,
              (int)len, cs, cls[i]);
    for (int k = 0; k < 2; k++) {
      cs = loom_tensor_get_string(outs[ai], 2 * i + k, &len);
      cr_expect(len == strlen(allc[i][k]) && !memcmp(cs, allc[i][k], len), "row %d: predictor all_classes[%d] '%.*s'",
                i, k, (int)len, cs);
    }
  }
  for (int i = 0; i < 7; i++) loom_tensor_free(outs[i]);
  loom_tensor_free(xin);
  loom_predictor_free(pd);
  loom_estimator_free(e);
  loom_head_free(h);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* ---- label vocabularies: string labels mapped to ids; unknown ones fail naming the value ---- */
static loom_code vocab_loss(loom_head *h, int64_t L, int n, const char *const *labels, double *loss, char *msg,
                            size_t cap) {
  loom_graph *g = loom_graph_new();
  float lg[B * 3] = {-1.0f, 0.5f, 2.0f, -0.3f, 0.2f, 0.5f, 0.1f, 0.0f, 1.0f, 0.3f, 0.1f, 1.5f};
  int64_t ld[2] = {B, L}, dd[1] = {n};
  loom_tensor *lt = loom_tensor_new(LOOM_STRING, 1, dd, NULL);
  for (int i = 0; i < n; i++) loom_tensor_set_string(lt, i, labels[i], strlen(labels[i]), NULL);
  loom_output logits = loom_const_data(g, LOOM_F32, 2, ld, lg, "logits");
  loom_output lab = loom_const(g, lt, "labels");
  loom_tensor_free(lt);
  loom_estimator_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.mode = LOOM_MODE_EVAL;
  spec.g = g;
  loom_status *st = loom_status_new();
  loom_code rc = loom_head_create_spec(h, g, NULL, LOOM_MODE_EVAL, logits, lab, NULL, NULL, &spec, st);
  if (rc == LOOM_OK) {
    loom_session *s = loom_session_new(g, NULL, st);
    loom_tensor *out = NULL;
    rc = loom_session_run(s, NULL, NULL, 0, &spec.loss, &out, 1, NULL, 0, st);
    if (rc == LOOM_OK) *loss = scalar_of(out);
    loom_tensor_free(out);
    loom_session_free(s);
  }
  snprintf(msg, cap, "%s", loom_status_message(st));
  loom_status_free(st);
  loom__spec_clear(&spec);
  loom_graph_free(g);
  return rc;
}

Test(heads, label_vocabulary) {
  char msg[512];
  double loss = 0;
  static const char *const bv[2] = {"neg", "pos"};
  loom_binary_head_options bo = loom_binary_head_options_default();
  bo.nlabel_vocabulary = 2;
  bo.label_vocabulary = bv;
  loom_head *h = loom_binary_class_head_new(&bo, NULL);
  cr_assert(h);
  /* labels 0 1 1 1 as strings: the unweighted binary loss of the fixture's logits */
  const char *good[B] = {"neg", "pos", "pos", "pos"};
  cr_assert_eq(vocab_loss(h, 1, B, good, &loss, msg, sizeof msg), LOOM_OK, "%s", msg);
  double want = 0;
  const float x[B] = {-1.0f, 0.5f, 2.0f, -0.3f};
  const double z[B] = {0, 1, 1, 1};
  for (int i = 0; i < B; i++) want += (fmax(x[i], 0) - x[i] * z[i] + log1p(exp(-fabs(x[i])))) / B;
  cr_expect(fabs(loss - want) < 1e-6, "loss %.9g want %.9g", loss, want);
  const char *bad[B] = {"neg", "pos", "cat", "pos"};
  cr_expect_eq(vocab_loss(h, 1, B, bad, &loss, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "'cat'") && strstr(msg, "vocabulary"), "%s", msg);
  loom_head_free(h);

  static const char *const mv[3] = {"a", "b", "c"};
  loom_multi_class_head_options mo = loom_multi_class_head_options_default();
  mo.n_classes = 3;
  mo.nlabel_vocabulary = 3;
  mo.label_vocabulary = mv;
  h = loom_multi_class_head_new(&mo, NULL);
  cr_assert(h);
  const char *ml[B] = {"a", "c", "b", "c"}; /* ids 0 2 1 2 */
  cr_assert_eq(vocab_loss(h, 3, B, ml, &loss, msg, sizeof msg), LOOM_OK, "%s", msg);
  const float lg[B * 3] = {-1.0f, 0.5f, 2.0f, -0.3f, 0.2f, 0.5f, 0.1f, 0.0f, 1.0f, 0.3f, 0.1f, 1.5f};
  const int ids[B] = {0, 2, 1, 2};
  want = 0;
  for (int i = 0; i < B; i++) {
    double m = fmax(fmax(lg[3 * i], lg[3 * i + 1]), lg[3 * i + 2]), se = 0;
    for (int k = 0; k < 3; k++) se += exp(lg[3 * i + k] - m);
    want += (m + log(se) - lg[3 * i + ids[i]]) / B;
  }
  cr_expect(fabs(loss - want) < 1e-6, "loss %.9g want %.9g", loss, want);
  const char *mbad[B] = {"a", "zebra", "b", "c"};
  cr_expect_eq(vocab_loss(h, 3, B, mbad, &loss, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "'zebra'"), "%s", msg);
  loom_head_free(h);

  /* numbers given to a head with a vocabulary, strings to one without */
  h = loom_multi_class_head_new(&mo, NULL);
  int64_t nums[B] = {0, 1, 2, 0};
  cr_expect_eq(run_with_labels(h, LOOM_I64, 1, nums, 3, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "label_vocabulary"), "%s", msg);
  loom_head_free(h);
  h = loom_binary_class_head_new(NULL, NULL);
  cr_expect_eq(vocab_loss(h, 1, B, good, &loss, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(msg, "label_vocabulary"), "%s", msg);
  loom_head_free(h);
}

/* Engine fix found here: a view op (ExpandDims, Reshape, Identity: no
 * kernel, aliased in plans) inside the host pass's subgraph failed with "no
 * CPU kernel"; the pass now copies its input. AsString runs in ordinary
 * plans now; a DenseToRagged (a data-shape op) after it pulls the chain into
 * the host pass. */
Test(heads, host_pass_runs_view_ops) {
  loom_graph *g = loom_graph_new();
  int64_t v[3] = {7, -12, 0}, d[1] = {3};
  loom_output x = loom_const_data(g, LOOM_I64, 1, d, v, "x");
  loom_output e = loom_expand_dims(g, x, -1, "e");
  loom_output s = loom_as_string(g, loom_identity(g, e, "i"), "s");
  loom_output r = loom_reshape(g, s, 1, d, "r");
  static const char *const want[3] = {"7", "-12", "0"};
  loom_output rag = loom_dense_to_ragged(g, loom_expand_dims(g, r, -1, NULL), 1, -1, "rag").values;
  for (int pass = 0; pass < 2; pass++) { /* the ordinary plan, then the host pass */
    loom_tensor *t = tu_run1(g, 0, NULL, NULL, pass ? rag : r);
    cr_assert_eq(loom_tensor_dtype(t), LOOM_STRING);
    cr_assert_eq(loom_tensor_numel(t), 3);
    for (int i = 0; i < 3; i++) {
      size_t len = 0;
      const char *sv = loom_tensor_get_string(t, i, &len);
      cr_expect(len == strlen(want[i]) && !memcmp(sv, want[i], len), "pass %d [%d] = '%.*s'", pass, i, (int)len, sv);
    }
    loom_tensor_free(t);
  }
  loom_graph_free(g);
}

/* ---- a multi-head through loom_head_create_spec: each head's labels are
 * the feature named after it ---- */
Test(heads, multi_head_labels_from_features) {
  const hf_case *c = NULL;
  for (int i = 0; i < HF_NCASES; i++)
    if (!strcmp(hf_cases[i].name, "multi_head")) c = &hf_cases[i];
  cr_assert(c);
  loom_graph *g = loom_graph_new();
  loom_features *f = loom_features_new();
  loom_head *h = make_head("multi_head", LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  cr_expect_eq(loom_head_logits_dimension(h), 4);
  cr_expect_str_eq(loom_head_name(h), "b_m");
  int64_t ld[2] = {B, 4}, wd[2] = {B, 1};
  loom_output logits = loom_const_data(g, LOOM_F32, 2, ld, c->logits, "logits");
  int64_t lab[8];
  for (int i = 0; i < 8; i++) lab[i] = (int64_t)c->labels[i];
  loom_features_add(f, "w", loom_const_data(g, LOOM_F32, 2, wd, hf_weights, "w"), NULL);
  loom_estimator_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.mode = LOOM_MODE_TRAIN;
  spec.g = g;
  loom_status *st = loom_status_new();
  loom_output none = {NULL, 0};
  /* labels missing from features: the head's name in the error */
  cr_expect_eq(loom_head_create_spec(h, g, f, LOOM_MODE_TRAIN, logits, none, train_op_fn, NULL, &spec, st),
               LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "'b'"), "%s", loom_status_message(st));
  loom_features_add(f, "b", loom_const_data(g, LOOM_I64, 2, wd, lab, "lb"), NULL);
  loom_features_add(f, "m", loom_const_data(g, LOOM_I64, 2, wd, lab + 4, "lm"), NULL);
  cr_assert_eq(loom_head_create_spec(h, g, f, LOOM_MODE_TRAIN, logits, none, train_op_fn, NULL, &spec, st), LOOM_OK,
               "%s", loom_status_message(st));
  loom_tensor *t = tu_run1(g, 0, NULL, NULL, spec.loss);
  cr_expect(fabs(scalar_of(t) - c->loss_sobs) < 2e-6 * (1 + c->loss_sobs), "loss %.9g, TF %.9g", scalar_of(t),
            c->loss_sobs);
  loom_tensor_free(t);
  /* logits of the wrong width */
  loom_estimator_spec s2;
  memset(&s2, 0, sizeof s2);
  s2.mode = LOOM_MODE_PREDICT;
  s2.g = g;
  int64_t ld3[2] = {B, 3};
  loom_output bad = loom_const_data(g, LOOM_F32, 2, ld3, c->logits, "bad_logits");
  cr_expect_eq(loom_head_create_spec(h, g, f, LOOM_MODE_PREDICT, bad, none, NULL, NULL, &s2, st),
               LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "logits must be [batch, 4]"), "%s", loom_status_message(st));
  /* TRAIN without a train_op_fn */
  loom_graph *g2 = loom_graph_new();
  loom_estimator_spec s3;
  memset(&s3, 0, sizeof s3);
  s3.mode = LOOM_MODE_TRAIN;
  s3.g = g2;
  loom_head *bh = make_head("binary", LOOM_REDUCTION_SUM);
  loom_features *f2 = loom_features_new();
  loom_features_add(f2, "w", loom_const_data(g2, LOOM_F32, 2, wd, hf_weights, "w"), NULL);
  int64_t l1[2] = {B, 1};
  loom_output lg2 = loom_const_data(g2, LOOM_F32, 2, l1, hf_cases[0].logits, "logits");
  loom_output lb2 = loom_const_data(g2, LOOM_I64, 2, l1, lab, "labels");
  cr_expect_eq(loom_head_create_spec(bh, g2, f2, LOOM_MODE_TRAIN, lg2, lb2, NULL, NULL, &s3, st),
               LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "train_op_fn"), "%s", loom_status_message(st));
  loom__spec_clear(&s3);
  loom_features_free(f2);
  loom_head_free(bh);
  loom_graph_free(g2);
  loom__spec_clear(&s2);
  loom__spec_clear(&spec);
  loom_status_free(st);
  loom_features_free(f);
  loom_head_free(h);
  loom_graph_free(g);
}
