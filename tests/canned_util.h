/* canned_util.h - data and helpers for the canned estimator tests: iris
 * (Debian python3-sklearn's iris.csv, 120/30 split) and the diamonds
 * 200-row sample (160/40 split) as in-memory tensors, an input_fn over them,
 * a serving input fn with one placeholder per feature, and checkpoint
 * comparisons. */
#ifndef CANNED_UTIL_H
#define CANNED_UTIL_H
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"
#include "loom/loom_canned.h"
#include "test_util.h"

#define IRIS_CSV "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv"
#define DIAMONDS_CSV "tests/fixtures/data/diamonds_200.csv"
#define CU_MAXF 10

typedef struct cu_data {
  int n, nf;                   /* rows; components (features + label) */
  const char *names[CU_MAXF];
  loom_tensor *cols[CU_MAXF];  /* [n, ...] each */
  const char *label;           /* a component name */
  int64_t batch;               /* 0 = all rows */
  int shuffle;                 /* shuffle (seeded) in TRAIN */
} cu_data;

static inline void cu_data_free(cu_data *d) {
  for (int i = 0; i < d->nf; i++) loom_tensor_free(d->cols[i]);
  memset(d, 0, sizeof *d);
}

static inline loom_dataset *cu_input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p;
  cu_data *d = user;
  loom_dataset *ds = loom_dataset_from_tensors(d->nf, d->names, (const loom_tensor *const *)d->cols, d->label, st);
  if (ds && mode == LOOM_MODE_TRAIN && d->shuffle) ds = loom_dataset_shuffle(ds, d->n, 7, 1, st);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, d->batch > 0 ? d->batch : d->n, 0, st);
  return ds;
}

/* PREDICT / export input: the same data without the label. */
static inline loom_dataset *cu_predict_input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p;
  (void)mode;
  cu_data *d = user;
  const char *names[CU_MAXF];
  const loom_tensor *cols[CU_MAXF];
  int n = 0;
  for (int i = 0; i < d->nf; i++)
    if (!d->label || strcmp(d->names[i], d->label)) {
      names[n] = d->names[i];
      cols[n++] = d->cols[i];
    }
  loom_dataset *ds = loom_dataset_from_tensors(n, names, cols, NULL, st);
  if (ds) ds = loom_dataset_batch(ds, d->n, 0, st);
  return ds;
}

/* One placeholder per non-label component (its dtype, [-1, dims[1:]]). */
static inline loom_code cu_serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user,
                                      loom_status *st) {
  cu_data *d = user;
  for (int i = 0; i < d->nf; i++) {
    if (d->label && !strcmp(d->names[i], d->label)) continue;
    int64_t dims[LOOM_MAX_DIMS];
    int nd = loom_tensor_ndim(d->cols[i]);
    for (int k = 0; k < nd; k++) dims[k] = k ? loom_tensor_dim(d->cols[i], k) : -1;
    loom_output x = loom_placeholder(g, loom_tensor_dtype(d->cols[i]), nd, dims, d->names[i]);
    loom_code rc = loom_features_add(f, d->names[i], x, st);
    if (rc == LOOM_OK) rc = loom_features_add(r, d->names[i], x, st);
    if (rc != LOOM_OK) return rc;
  }
  return LOOM_OK;
}

/* A deterministic permutation (LCG Fisher-Yates). */
static inline void cu_perm(int n, int *p, uint32_t seed) {
  for (int i = 0; i < n; i++) p[i] = i;
  uint32_t s = seed;
  for (int i = n - 1; i > 0; i--) {
    s = s * 1664525u + 1013904223u;
    int j = (int)((s >> 8) % (uint32_t)(i + 1));
    int t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

static inline loom_tensor *cu_f32col(int n, const float *v) {
  int64_t d[2] = {n, 1};
  return loom_tensor_from_data(LOOM_F32, 2, d, v, NULL);
}
static inline loom_tensor *cu_strcol(int n, char (*v)[16]) {
  int64_t d[2] = {n, 1};
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 2, d, NULL);
  for (int i = 0; i < n; i++) loom_tensor_set_string(t, i, v[i], strlen(v[i]), NULL);
  return t;
}

static const char *const IRIS_NAMES[3] = {"setosa", "versicolor", "virginica"};

/* iris: features SepalLength, SepalWidth, PetalLength, PetalWidth (f32
 * [n,1]); label "label" (int64 [n,1]) or, with string_labels, "species"
 * (string [n,1]). part 0 = the 120 training rows, 1 = the 30 test rows. */
static inline void cu_iris(cu_data *d, int part, int string_labels) {
  memset(d, 0, sizeof *d);
  FILE *f = fopen(IRIS_CSV, "r");
  cr_assert(f, "cannot open %s (install python3-sklearn: scripts/deps.sh)", IRIS_CSV);
  char line[256];
  cr_assert(fgets(line, sizeof line, f));
  float x[150][4];
  int y[150], n = 0;
  while (n < 150 && fgets(line, sizeof line, f))
    if (sscanf(line, "%f,%f,%f,%f,%d", &x[n][0], &x[n][1], &x[n][2], &x[n][3], &y[n]) == 5) n++;
  fclose(f);
  cr_assert_eq(n, 150);
  int p[150];
  cu_perm(150, p, 12345);
  int lo = part ? 120 : 0, cnt = part ? 30 : 120;
  float cols[4][120];
  int64_t lab[120];
  char sl[120][16];
  for (int i = 0; i < cnt; i++) {
    int r = p[lo + i];
    for (int k = 0; k < 4; k++) cols[k][i] = x[r][k];
    lab[i] = y[r];
    snprintf(sl[i], sizeof sl[i], "%s", IRIS_NAMES[y[r]]);
  }
  static const char *const fn[4] = {"SepalLength", "SepalWidth", "PetalLength", "PetalWidth"};
  for (int k = 0; k < 4; k++) {
    d->names[k] = fn[k];
    d->cols[k] = cu_f32col(cnt, cols[k]);
  }
  int64_t ld[2] = {cnt, 1};
  if (string_labels) {
    d->names[4] = "species";
    d->cols[4] = cu_strcol(cnt, sl);
  } else {
    d->names[4] = "label";
    d->cols[4] = loom_tensor_from_data(LOOM_I64, 2, ld, lab, NULL);
  }
  d->label = d->names[4];
  d->nf = 5;
  d->n = cnt;
}

/* diamonds: carat (f32), cut, color, clarity (string), label "price" in
 * thousands (f32 [n,1]). part 0 = 160 training rows, 1 = 40 test rows. */
static inline void cu_diamonds(cu_data *d, int part) {
  memset(d, 0, sizeof *d);
  FILE *f = fopen(DIAMONDS_CSV, "r");
  cr_assert(f, "cannot open %s", DIAMONDS_CSV);
  char line[512];
  cr_assert(fgets(line, sizeof line, f));
  static float carat[200], price[200];
  static char cut[200][16], color[200][16], clar[200][16];
  int n = 0;
  while (n < 200 && fgets(line, sizeof line, f)) {
    char *fld[11];
    int k = 0;
    for (char *tok = strtok(line, ",\n"); tok && k < 11; tok = strtok(NULL, ",\n")) fld[k++] = tok;
    if (k < 8) continue;
    for (int i = 0; i < k; i++)
      if (fld[i][0] == '"') {
        fld[i]++;
        fld[i][strlen(fld[i]) - 1] = 0;
      }
    carat[n] = strtof(fld[1], NULL);
    snprintf(cut[n], 16, "%s", fld[2]);
    snprintf(color[n], 16, "%s", fld[3]);
    snprintf(clar[n], 16, "%s", fld[4]);
    price[n] = strtof(fld[7], NULL) / 1000.0f;
    n++;
  }
  fclose(f);
  cr_assert_eq(n, 200);
  int p[200];
  cu_perm(200, p, 777);
  int lo = part ? 160 : 0, cnt = part ? 40 : 160;
  float c[160], pr[160];
  char cu[160][16], co[160][16], cl[160][16];
  for (int i = 0; i < cnt; i++) {
    int r = p[lo + i];
    c[i] = carat[r];
    pr[i] = price[r];
    memcpy(cu[i], cut[r], 16);
    memcpy(co[i], color[r], 16);
    memcpy(cl[i], clar[r], 16);
  }
  d->names[0] = "carat";
  d->cols[0] = cu_f32col(cnt, c);
  d->names[1] = "cut";
  d->cols[1] = cu_strcol(cnt, cu);
  d->names[2] = "color";
  d->cols[2] = cu_strcol(cnt, co);
  d->names[3] = "clarity";
  d->cols[3] = cu_strcol(cnt, cl);
  d->names[4] = "price";
  d->cols[4] = cu_f32col(cnt, pr);
  d->label = "price";
  d->nf = 5;
  d->n = cnt;
}

static inline loom_run_config cu_config(void) {
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  c.has_random_seed = 1;
  c.tf_random_seed = 42;
  c.save_summary_steps = 0;
  c.log_step_count_steps = 100000;
  return c;
}

/* ---- checkpoint listings ---- */
typedef struct cu_var {
  char name[160];
  int rank;
  int64_t dims[4];
} cu_var;
typedef struct cu_vars {
  int n;
  cu_var v[128];
} cu_vars;
static inline int cu__collect(const char *name, loom_dtype dt, int nd, const int64_t *dims, void *user) {
  (void)dt;
  cu_vars *l = user;
  if (l->n < 128) {
    snprintf(l->v[l->n].name, sizeof l->v[l->n].name, "%s", name);
    l->v[l->n].rank = nd;
    for (int i = 0; i < nd && i < 4; i++) l->v[l->n].dims[i] = dims[i];
    l->n++;
  }
  return 0;
}
static inline void cu_list_vars(loom_estimator *e, cu_vars *l) {
  memset(l, 0, sizeof *l);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_estimator_get_variable_names(e, cu__collect, l, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
}
static inline const cu_var *cu_find(const cu_vars *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (!strcmp(l->v[i].name, name)) return &l->v[i];
  return NULL;
}
/* An optimizer slot of loom ("<var>/<Optimizer>[_1]"): its prefix is a variable. */
static inline int cu_is_slot(const cu_vars *l, const char *name) {
  const char *s = strrchr(name, '/');
  if (!s) return 0;
  char pre[160];
  snprintf(pre, sizeof pre, "%.*s", (int)(s - name), name);
  return cu_find(l, pre) != NULL;
}

/* Bitwise equality of every variable of two estimators' latest checkpoints. */
static inline void cu_expect_same_checkpoints(loom_estimator *a, loom_estimator *b, const char *what) {
  cu_vars la, lb;
  cu_list_vars(a, &la);
  cu_list_vars(b, &lb);
  cr_expect_eq(la.n, lb.n, "%s: %d vs %d variables", what, la.n, lb.n);
  loom_status *st = loom_status_new();
  for (int i = 0; i < la.n; i++) {
    loom_tensor *ta = NULL, *tb = NULL;
    cr_assert_eq(loom_estimator_get_variable_value(a, la.v[i].name, &ta, st), LOOM_OK, "%s",
                 loom_status_message(st));
    loom_code rc = loom_estimator_get_variable_value(b, la.v[i].name, &tb, st);
    cr_expect_eq(rc, LOOM_OK, "%s: %s missing in the second: %s", what, la.v[i].name, loom_status_message(st));
    if (rc == LOOM_OK) {
      cr_expect(loom_tensor_nbytes(ta) == loom_tensor_nbytes(tb) &&
                    !memcmp(loom_tensor_data_const(ta), loom_tensor_data_const(tb), loom_tensor_nbytes(ta)),
                "%s: %s differs", what, la.v[i].name);
    }
    loom_tensor_free(ta);
    loom_tensor_free(tb);
  }
  loom_status_free(st);
}

static inline double cu_eval(loom_estimator *e, cu_data *d, const char *key) {
  loom_status *st = loom_status_new();
  loom_eval_result *r = NULL;
  loom_eval_options eo = loom_eval_options_default();
  cr_assert_eq(loom_estimator_evaluate(e, cu_input_fn, d, &eo, &r, st), LOOM_OK, "%s", loom_status_message(st));
  double v = NAN;
  cr_assert_eq(loom_eval_result_get(r, key, &v, st), LOOM_OK, "%s", loom_status_message(st));
  loom_eval_result_free(r);
  loom_status_free(st);
  return v;
}

static inline void cu_train(loom_estimator *e, cu_data *d, int64_t steps) {
  loom_status *st = loom_status_new();
  loom_train_options to = loom_train_options_default();
  to.steps = steps;
  cr_assert_eq(loom_estimator_train(e, cu_input_fn, d, &to, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
}

#endif
