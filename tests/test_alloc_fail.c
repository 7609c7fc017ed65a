/* Allocation-failure injection: loom's allocator hook
 * fails the N-th allocation of a whole scenario, for N = 1, 2, ... until the
 * scenario runs without reaching N. Each failure must give a clean error
 * (RESOURCE_EXHAUSTED, or another code with a message), never a crash; once
 * the scenario's objects are freed, every allocation it made is freed too
 * (the hook counts live blocks, so a leak is seen in any build; `make
 * alloc-fail` also runs it under ASan/LSan); and what is on disk stays
 * usable: the model_dir restores a complete checkpoint, an export directory
 * is complete (loads) or absent, no temporary is left behind.
 *
 * Scenarios: (a) an Estimator: build + train 3 steps + checkpoint + evaluate
 * + export + predictor load + predict; (b) a dataset pipeline CSV -> map ->
 * shuffle -> batch -> prefetch; (c) event writing (and reading back).
 *
 * `make test` runs a bounded sample of the injection points (every point of
 * the small scenarios, a stride over the Estimator's); LOOM_ALLOC_FAIL=full
 * (`make alloc-fail`) tries every point. Each scenario prints the number of
 * injection points covered. */
#include <dirent.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include "test_util.h"

/* ---- the failing allocator: counts allocations, fails the fail_at-th ----
 * Live blocks are kept in a table (pointer -> allocation number of the
 * current scenario) so a leak names the allocations never freed;
 * LOOM_ALLOC_FAIL_BT=k prints the stack of every scenario's k-th allocation. */
static atomic_long af_count, af_fail_at, af_live, af_failed;
static long af_bt = -1;
#define AF_SLOTS (1u << 20)
typedef struct af_slot {
  void *p;
  long idx;
  size_t size;
} af_slot;
static af_slot *af_table;
static pthread_mutex_t af_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t af_hash(void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & (AF_SLOTS - 1); }
static void af_track(void *p, long idx, size_t size) {
  pthread_mutex_lock(&af_mu);
  size_t h = af_hash(p);
  while (af_table[h].p && af_table[h].p != (void *)1) h = (h + 1) & (AF_SLOTS - 1);
  af_table[h] = (af_slot){p, idx, size};
  pthread_mutex_unlock(&af_mu);
}
static void af_untrack(void *p) {
  pthread_mutex_lock(&af_mu);
  size_t h = af_hash(p);
  while (af_table[h].p && af_table[h].p != p) h = (h + 1) & (AF_SLOTS - 1);
  if (af_table[h].p == p) af_table[h].p = (void *)1; /* tombstone */
  pthread_mutex_unlock(&af_mu);
}
/* Prints the blocks still live that were allocated since the last arm (up to 10). */
static void af_print_leaks(void) {
  int n = 0;
  for (size_t h = 0; h < AF_SLOTS && n < 10; h++)
    if (af_table[h].p && af_table[h].p != (void *)1 && af_table[h].idx > 0) {
      fprintf(stderr, "  leaked: allocation %ld of this run, %zu bytes (LOOM_ALLOC_FAIL_BT=%ld prints its stack)\n",
              af_table[h].idx, af_table[h].size, af_table[h].idx);
      n++;
    }
}

static long af_next(void) {
  long k = atomic_fetch_add(&af_count, 1) + 1;
  if (k == af_bt) {
    void *bt[32];
    fprintf(stderr, "allocation %ld:\n", k);
    backtrace_symbols_fd(bt, backtrace(bt, 32), 2);
  }
  return k;
}
static int af_should_fail(long k) {
  long at = atomic_load(&af_fail_at);
  if (at > 0 && k == at) {
    atomic_store(&af_failed, 1);
    return 1;
  }
  return 0;
}
static void *af_malloc(size_t n, void *u) {
  (void)u;
  long k = af_next();
  if (af_should_fail(k)) return NULL;
  void *p = malloc(n);
  if (p) {
    atomic_fetch_add(&af_live, 1);
    af_track(p, k, n);
  }
  return p;
}
static void *af_realloc(void *p, size_t n, void *u) {
  (void)u;
  long k = af_next();
  if (af_should_fail(k)) return NULL;
  if (p) af_untrack(p);
  void *q = realloc(p, n);
  if (q) {
    if (!p) atomic_fetch_add(&af_live, 1);
    af_track(q, k, n);
  } else if (p) {
    af_track(p, k, n);
  }
  return q;
}
static void af_free(void *p, void *u) {
  (void)u;
  if (!p) return;
  atomic_fetch_sub(&af_live, 1);
  af_untrack(p);
  free(p);
}
static void af_install(void) {
  if (!af_table) af_table = calloc(AF_SLOTS, sizeof *af_table);
  const char *bt = getenv("LOOM_ALLOC_FAIL_BT");
  if (bt) af_bt = atol(bt);
  static const loom_allocator a = {af_malloc, af_realloc, af_free, NULL};
  loom_set_allocator(&a);
}
/* Starts counting; the at-th allocation from now fails (0: none). */
static void af_arm(long at) {
  pthread_mutex_lock(&af_mu); /* blocks from before are not this run's */
  for (size_t h = 0; h < AF_SLOTS; h++) af_table[h].idx = 0;
  pthread_mutex_unlock(&af_mu);
  atomic_store(&af_count, 0);
  atomic_store(&af_failed, 0);
  atomic_store(&af_fail_at, at);
}
static void af_disarm(void) { atomic_store(&af_fail_at, 0); }

/* A status whose message buffer has its full size (1 KiB): setting it never
 * allocates, so its buffer is not counted as a scenario's block. */
static loom_status *af_status(void) {
  loom_status *st = loom_status_new();
  loom_status_set(st, LOOM_UNKNOWN, "%1100s", "");
  loom_status_clear(st);
  return st;
}

/* The first point tried (LOOM_ALLOC_FAIL_FROM, to go straight to one). */
static long first_point(void) {
  const char *v = getenv("LOOM_ALLOC_FAIL_FROM");
  return v && atol(v) > 0 ? atol(v) : 1;
}

static int full_mode(void) {
  const char *v = getenv("LOOM_ALLOC_FAIL");
  return v && !strcmp(v, "full");
}

/* The points tried out of total: all of them in full mode or when there are
 * few, else about `sample` spread evenly (always including 1 and total). */
static long next_point(long n, long total, long sample) {
  if (full_mode() || total <= sample) return n + 1;
  long stride = total / sample;
  long next = n + stride;
  if (n < total && next > total) next = total;
  return next;
}

typedef struct af_stats {
  long points, tried, exhausted, other_code, swallowed;
  long by_code[32];
} af_stats;

static void af_report(const char *name, const af_stats *s) {
  fprintf(stderr,
          "alloc-fail %s: %ld injection points, %ld tried (%s): %ld RESOURCE_EXHAUSTED, %ld other clean errors, "
          "%ld absorbed (same result), 0 crashes, 0 leaks\n",
          name, s->points, s->tried, full_mode() ? "all" : "sampled", s->exhausted, s->other_code, s->swallowed);
  for (int c = 0; c < 32; c++)
    if (s->by_code[c] && c != LOOM_RESOURCE_EXHAUSTED)
      fprintf(stderr, "  %s: %ld\n", loom_code_name((loom_code)c), s->by_code[c]);
}

/* A failing call must say why: a code and a message. */
static void check_error(af_stats *s, loom_code rc, loom_status *st, const char *where, long n) {
  cr_assert_neq(rc, LOOM_OK, "%s: allocation %ld failed but the call returned OK", where, n);
  if ((int)rc >= 0 && (int)rc < 32) s->by_code[rc]++;
  if (rc != LOOM_RESOURCE_EXHAUSTED && getenv("LOOM_ALLOC_FAIL_VERBOSE"))
    fprintf(stderr, "  allocation %ld: %s: %s: %s\n", n, where, loom_code_name(rc), loom_status_message(st));
  if (rc == LOOM_RESOURCE_EXHAUSTED)
    s->exhausted++;
  else
    s->other_code++;
  cr_assert(rc == LOOM_RESOURCE_EXHAUSTED || loom_status_message(st)[0], "%s: allocation %ld: %s without a message",
            where, n, loom_code_name(rc));
}

/* ---- files ---- */
static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(f, "%s", path);
  fputs(text, f);
  fclose(f);
}
static void copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  cr_assert(a && b, "copy %s -> %s", from, to);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, a)) > 0) cr_assert_eq(fwrite(buf, 1, n, b), n);
  fclose(a);
  fclose(b);
}
/* Copies the regular files of a flat directory. */
static void copy_dir(const char *from, const char *to) {
  mkdir(to, 0755);
  DIR *d = opendir(from);
  cr_assert(d, "%s", from);
  struct dirent *de;
  while ((de = readdir(d))) {
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/%s", from, de->d_name);
    snprintf(b, sizeof b, "%s/%s", to, de->d_name);
    struct stat sb;
    if (stat(a, &sb) == 0 && S_ISREG(sb.st_mode)) copy_file(a, b);
  }
  closedir(d);
}
/* Fails on a temporary left in dir (a checkpoint or export being written). */
static void expect_no_temporaries(const char *dir, long n) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d)))
    cr_assert(!strstr(de->d_name, ".tmp") && strncmp(de->d_name, "temp-", 5),
              "allocation %ld: temporary %s/%s left behind", n, dir, de->d_name);
  closedir(d);
}

/* ======================================================================
 * (a) Estimator
 * ====================================================================== */
#define NX 8
#define NF 2
static float X[NX * NF], Y[NX];

static void make_data(void) {
  for (int i = 0; i < NX; i++) {
    X[i * NF] = (float)i / NX;
    X[i * NF + 1] = (float)(i % 3) - 1;
    Y[i] = 0.5f + X[i * NF] - 2 * X[i * NF + 1];
  }
}

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p, (void)user;
  int64_t xd[2] = {NX, NF}, yd[2] = {NX, 1};
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, X, st);
  loom_tensor *y = loom_tensor_from_data(LOOM_F32, 2, yd, Y, st);
  loom_dataset *ds = NULL;
  if (x && y) {
    const char *names[2] = {"x", "y"};
    const loom_tensor *arr[2] = {x, y};
    ds = loom_dataset_from_tensors(2, names, arr, "y", st);
  } else if (loom_status_code(st) == LOOM_OK) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "input_fn: out of memory");
  }
  loom_tensor_free(x);
  loom_tensor_free(y);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, 4, 0, st);
  return ds;
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)cfg, (void)user, (void)params;
  loom_output x = loom_features_get(f, "x");
  loom_dense_options d = loom_dense_options_default();
  d.kernel_initializer = loom_init_constant(0.1);
  loom_output pred = loom_layers_dense(g, x, 1, &d, "linear");
  loom_code rc = loom_spec_add_prediction(spec, "predictions", pred);
  if (rc != LOOM_OK || mode == LOOM_MODE_PREDICT) return rc == LOOM_OK ? loom_graph_status(g, st) : rc;
  loom_output zero = {NULL, 0};
  loom_output loss =
      loom_losses_mean_squared_error(g, labels, pred, zero, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  if ((rc = loom_spec_set_loss(spec, loss)) != LOOM_OK) return rc;
  if ((rc = loom_spec_add_eval_metric(spec, "mae", loom_metrics_mean_absolute_error(g, labels, pred, zero, NULL))))
    return rc;
  if (mode == LOOM_MODE_TRAIN) {
    loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 0.1f, "lr"));
    if (!opt) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "model_fn: optimizer: out of memory");
    loom_node *op = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL);
    loom_optimizer_free(opt);
    if ((rc = loom_spec_set_train_op(spec, op)) != LOOM_OK) return rc;
  }
  return loom_graph_status(g, st);
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  int64_t dims[2] = {-1, NF};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, dims, "x");
  loom_code rc = loom_features_add(f, "x", x, st);
  if (rc == LOOM_OK) rc = loom_features_add(r, "x", x, st);
  return rc;
}

static loom_run_config est_config(void) {
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  c.prefetch = 0;
  c.save_summary_steps = 1;      /* event writes every step */
  c.save_checkpoints_steps = 100; /* one checkpoint at the end of each train call */
  c.log_step_count_steps = 100;
  return c;
}

/* Runs the scenario on a copy of the template model_dir (step 2); returns the
 * first failing code (OK when the whole scenario ran), the predictions in
 * pred[NX] when it did. */
static loom_code est_scenario(const char *dir, float *pred, const char **where, loom_status *st) {
  loom_run_config c = est_config();
  loom_code rc = LOOM_OK;
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
  loom_eval_result *r = NULL;
  loom_predictor *p = NULL;
  loom_tensor *x = NULL, *out = NULL;
  char base[600], path[800];
  snprintf(base, sizeof base, "%s/export", dir);
  *where = "estimator_new";
  if (!e) {
    rc = loom_status_code(st);
    if (rc == LOOM_OK) rc = LOOM_UNKNOWN; /* NULL without a code: caught by the caller */
    goto done;
  }
  loom_train_options to = loom_train_options_default();
  to.steps = 3;
  *where = "train";
  if ((rc = loom_estimator_train(e, input_fn, NULL, &to, st)) != LOOM_OK) goto done;
  loom_eval_options eo = loom_eval_options_default();
  *where = "evaluate";
  if ((rc = loom_estimator_evaluate(e, input_fn, NULL, &eo, &r, st)) != LOOM_OK) goto done;
  *where = "export";
  if ((rc = loom_estimator_export(e, serving_fn, NULL, base, NULL, path, sizeof path, st)) != LOOM_OK) goto done;
  *where = "predictor_load";
  p = loom_predictor_load(path, NULL, st);
  if (!p) {
    rc = loom_status_code(st) ? loom_status_code(st) : LOOM_UNKNOWN;
    goto done;
  }
  *where = "predict";
  int64_t xd[2] = {NX, NF};
  x = loom_tensor_from_data(LOOM_F32, 2, xd, X, st);
  if (!x) {
    rc = loom_status_code(st) ? loom_status_code(st) : LOOM_UNKNOWN;
    goto done;
  }
  if ((rc = loom_predictor_run(p, NULL, 1, &x, 1, &out, st)) != LOOM_OK) goto done;
  memcpy(pred, loom_tensor_data_const(out), NX * sizeof(float));
done:
  loom_tensor_free(out);
  loom_tensor_free(x);
  loom_predictor_free(p);
  loom_eval_result_free(r);
  loom_estimator_free(e);
  return rc;
}

/* The model_dir after a failure: the latest checkpoint is a complete one
 * (step 2, the template's, or 5, this run's) and restores; every export
 * loads; no temporaries. */
static void est_check_dir(const char *dir, long n) {
  loom_status *st = loom_status_new();
  char ck[800];
  cr_assert_eq(loom_latest_checkpoint(dir, ck, sizeof ck, st), LOOM_OK, "allocation %ld: no checkpoint: %s", n,
               loom_status_message(st));
  loom_run_config c = est_config();
  loom_estimator *e = loom_estimator_new(model_fn, NULL, dir, &c, NULL, NULL, st);
  cr_assert(e, "allocation %ld: %s", n, loom_status_message(st));
  loom_tensor *t = NULL;
  cr_assert_eq(loom_estimator_get_variable_value(e, "global_step", &t, st), LOOM_OK,
               "allocation %ld: model_dir does not restore (%s): %s", n, ck, loom_status_message(st));
  int64_t step = *(const int64_t *)loom_tensor_data_const(t);
  cr_assert(step == 2 || step == 5, "allocation %ld: restored step %lld", n, (long long)step);
  loom_tensor_free(t);
  loom_estimator_free(e);
  expect_no_temporaries(dir, n);
  char base[600];
  snprintf(base, sizeof base, "%s/export", dir);
  expect_no_temporaries(base, n);
  DIR *d = opendir(base);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      if (de->d_name[0] == '.') continue;
      char p[1200];
      snprintf(p, sizeof p, "%s/%s", base, de->d_name);
      loom_predictor *pr = loom_predictor_load(p, NULL, st);
      cr_assert(pr, "allocation %ld: export %s is incomplete: %s", n, p, loom_status_message(st));
      loom_predictor_free(pr);
    }
    closedir(d);
  }
  loom_status_free(st);
}

Test(alloc_fail, estimator_train_checkpoint_evaluate_export_predict, .timeout = 3000) {
  af_install();
  make_data();
  char root[TU_TMPDIR_CAP], tmpl[300], dir[300];
  tu_tmpdir(root, sizeof root, "loom_af");
  snprintf(tmpl, sizeof tmpl, "%s/template", root);
  snprintf(dir, sizeof dir, "%s/run", root);
  loom_status *st = af_status();
  /* the template: 2 trained steps, checkpoint model.ckpt-2 */
  {
    loom_run_config c = est_config();
    loom_estimator *e = loom_estimator_new(model_fn, NULL, tmpl, &c, NULL, NULL, st);
    cr_assert(e, "%s", loom_status_message(st));
    loom_train_options to = loom_train_options_default();
    to.steps = 2;
    cr_assert_eq(loom_estimator_train(e, input_fn, NULL, &to, st), LOOM_OK, "%s", loom_status_message(st));
    loom_estimator_free(e);
  }
  /* the reference run (twice: lazily built globals settle in the first) */
  float want[NX], got[NX];
  const char *where = "";
  long total = 0, base_live = 0;
  for (int k = 0; k < 2; k++) {
    tu_rmtree(dir);
    copy_dir(tmpl, dir);
    base_live = atomic_load(&af_live);
    af_arm(0);
    cr_assert_eq(est_scenario(dir, want, &where, st), LOOM_OK, "%s: %s", where, loom_status_message(st));
    total = atomic_load(&af_count);
    if (atomic_load(&af_live) != base_live) af_print_leaks();
    cr_assert_eq(atomic_load(&af_live), base_live, "the reference run leaks %ld blocks",
                 atomic_load(&af_live) - base_live);
  }
  af_stats s = {.points = total};
  for (long n = first_point(); n <= total; n = next_point(n, total, 150)) {
    tu_rmtree(dir);
    copy_dir(tmpl, dir);
    loom_status_clear(st);
    long live0 = atomic_load(&af_live);
    if (getenv("LOOM_ALLOC_FAIL_VERBOSE")) fprintf(stderr, "estimator: allocation %ld of %ld\n", n, total);
    af_arm(n);
    loom_code rc = est_scenario(dir, got, &where, st);
    af_disarm();
    s.tried++;
    if (atomic_load(&af_live) != live0) af_print_leaks();
    cr_assert_eq(atomic_load(&af_live), live0, "allocation %ld (failing in %s, %s: %s): %ld blocks leaked", n, where,
                 loom_code_name(rc), loom_status_message(st), atomic_load(&af_live) - live0);
    if (!atomic_load(&af_failed)) continue; /* a thread's allocation order moved: nothing was injected */
    if (rc == LOOM_OK) {
      cr_assert(!memcmp(got, want, sizeof want), "allocation %ld failed, the scenario returned OK with other results",
                n);
      s.swallowed++;
    } else {
      check_error(&s, rc, st, where, n);
    }
    est_check_dir(dir, n);
  }
  af_report("estimator (build, train 3 steps, checkpoint, evaluate, export, predictor load, predict)", &s);
  loom_status_free(st);
  tu_rmtree(root);
  loom_set_allocator(NULL);
}

/* ======================================================================
 * (b) dataset pipeline: CSV -> map -> shuffle -> batch -> prefetch
 * ====================================================================== */
static loom_code double_fn(void *user, int n, loom_tensor **values, loom_status *st) {
  (void)user, (void)n;
  /* replaces x by a new tensor 2x: an allocation inside the map */
  loom_tensor *t = loom_tensor_new(LOOM_F32, loom_tensor_ndim(values[0]), NULL, st);
  if (!t) return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
  *(float *)loom_tensor_data(t) = 2 * *(const float *)loom_tensor_data_const(values[0]);
  loom_tensor_free(values[0]);
  values[0] = t;
  return LOOM_OK;
}

static loom_code pipeline_scenario(const char *csv, double *sum, loom_status *st) {
  loom_csv_column cols[3] = {{"x", LOOM_F32, NULL, 1, 0}, {"name", LOOM_STRING, "", 1, 0}, {"y", LOOM_I32, "0", 1, 0}};
  loom_csv_options o = {sizeof(loom_csv_options), 1, ',', 3, cols, "y"};
  const char *paths[1] = {csv};
  loom_dataset *ds = loom_dataset_csv(1, paths, &o, st);
  if (ds) ds = loom_dataset_map(ds, double_fn, NULL, st);
  if (ds) ds = loom_dataset_shuffle(ds, 8, 7, 1, st);
  if (ds) ds = loom_dataset_batch(ds, 4, 0, st);
  if (ds) ds = loom_dataset_prefetch(ds, 2, st);
  if (!ds) return loom_status_code(st) ? loom_status_code(st) : LOOM_UNKNOWN;
  loom_tensor *v[3] = {NULL, NULL, NULL};
  loom_code rc;
  double acc = 0;
  while ((rc = loom_dataset_next(ds, v, st)) == LOOM_OK) {
    const float *x = loom_tensor_data_const(v[0]);
    const int32_t *y = loom_tensor_data_const(v[2]);
    for (int64_t i = 0; i < loom_tensor_numel(v[0]); i++) {
      size_t len = 0;
      loom_tensor_get_string(v[1], i, &len);
      acc += x[i] + y[i] + (double)len;
    }
  }
  if (rc == LOOM_OUT_OF_RANGE) rc = LOOM_OK;
  for (int i = 0; i < 3; i++) loom_tensor_free(v[i]);
  loom_dataset_free(ds);
  *sum = acc;
  return rc;
}

Test(alloc_fail, dataset_csv_map_shuffle_batch_prefetch, .timeout = 3000) {
  af_install();
  char root[TU_TMPDIR_CAP], csv[600];
  tu_tmpdir(root, sizeof root, "loom_af");
  snprintf(csv, sizeof csv, "%s/d.csv", root);
  char text[4096] = "x,name,y\n";
  for (int i = 0; i < 30; i++) {
    char line[64];
    snprintf(line, sizeof line, "%d.5,\"n%.*s\",%d\n", i, i % 5, "abcde", i % 3 ? i : 0);
    strcat(text, line);
  }
  write_file(csv, text);
  loom_status *st = af_status();
  double want = 0, got = 0;
  long total = 0, live0;
  for (int k = 0; k < 2; k++) {
    live0 = atomic_load(&af_live);
    af_arm(0);
    cr_assert_eq(pipeline_scenario(csv, &want, st), LOOM_OK, "%s", loom_status_message(st));
    total = atomic_load(&af_count);
    if (atomic_load(&af_live) != live0) af_print_leaks();
    cr_assert_eq(atomic_load(&af_live), live0, "the reference run leaks");
  }
  af_stats s = {.points = total};
  for (long n = first_point(); n <= total; n = next_point(n, total, 400)) {
    loom_status_clear(st);
    live0 = atomic_load(&af_live);
    af_arm(n);
    loom_code rc = pipeline_scenario(csv, &got, st);
    af_disarm();
    s.tried++;
    if (atomic_load(&af_live) != live0) af_print_leaks();
    cr_assert_eq(atomic_load(&af_live), live0, "allocation %ld (%s: %s): %ld blocks leaked", n, loom_code_name(rc),
                 loom_status_message(st), atomic_load(&af_live) - live0);
    if (!atomic_load(&af_failed)) continue;
    if (rc == LOOM_OK) {
      cr_assert_eq(got, want, "allocation %ld failed, the pipeline returned OK with sum %g (want %g)", n, got, want);
      s.swallowed++;
    } else {
      check_error(&s, rc, st, "pipeline", n);
    }
  }
  af_report("dataset (CSV -> map -> shuffle -> batch -> prefetch)", &s);
  loom_status_free(st);
  tu_rmtree(root);
  loom_set_allocator(NULL);
}

/* ======================================================================
 * (c) event writing
 * ====================================================================== */
static loom_code events_scenario(const char *dir, loom_status *st) {
  loom_event_writer *w = loom_event_writer_new(dir, NULL, st);
  if (!w) return loom_status_code(st) ? loom_status_code(st) : LOOM_UNKNOWN;
  loom_code rc = loom_event_writer_add_scalar(w, "loss", 0.25, 1, st);
  const char *tags[2] = {"a", "b"};
  double vals[2] = {1, 2};
  double hv[5] = {-1, 0, 0.5, 2, 3};
  if (!rc) rc = loom_event_writer_add_scalars(w, 2, tags, vals, 2, st);
  if (!rc) rc = loom_event_writer_add_histogram(w, "w", hv, 5, 3, st);
  if (!rc) rc = loom_event_writer_add_text(w, "t", "some text", 4, st);
  if (!rc) rc = loom_event_writer_add_session_log(w, LOOM_SESSION_LOG_CHECKPOINT, "/m/model.ckpt-4", 4, st);
  if (!rc) rc = loom_event_writer_flush(w, st);
  loom_event_writer_free(w);
  return rc;
}

/* Every events file in dir reads back to its end without an error; returns the events read. */
static int events_read_all(const char *dir, long n, loom_status *st) {
  DIR *d = opendir(dir);
  cr_assert(d);
  struct dirent *de;
  int count = 0;
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, "events.out", 10)) continue;
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    loom_event_reader *r = loom_event_reader_open(p, st);
    cr_assert(r, "allocation %ld: %s", n, loom_status_message(st));
    const loom_event *ev;
    loom_code rc;
    while ((rc = loom_event_reader_next(r, &ev, st)) == LOOM_OK) count++;
    cr_assert_eq(rc, LOOM_OUT_OF_RANGE, "allocation %ld: %s is damaged: %s", n, p, loom_status_message(st));
    loom_event_reader_free(r);
  }
  closedir(d);
  return count;
}

Test(alloc_fail, event_writer, .timeout = 3000) {
  af_install();
  char root[TU_TMPDIR_CAP], dir[600];
  tu_tmpdir(root, sizeof root, "loom_af");
  loom_status *st = af_status();
  long total = 0, live0;
  for (int k = 0; k < 2; k++) {
    snprintf(dir, sizeof dir, "%s/ref%d", root, k);
    live0 = atomic_load(&af_live);
    af_arm(0);
    cr_assert_eq(events_scenario(dir, st), LOOM_OK, "%s", loom_status_message(st));
    total = atomic_load(&af_count);
    if (atomic_load(&af_live) != live0) af_print_leaks();
    cr_assert_eq(atomic_load(&af_live), live0, "the reference run leaks");
    cr_assert_eq(events_read_all(dir, 0, st), 6);
  }
  af_stats s = {.points = total};
  for (long n = first_point(); n <= total; n++) {
    snprintf(dir, sizeof dir, "%s/run%ld", root, n);
    loom_status_clear(st);
    live0 = atomic_load(&af_live);
    af_arm(n);
    loom_code rc = events_scenario(dir, st);
    af_disarm();
    s.tried++;
    if (atomic_load(&af_live) != live0) af_print_leaks();
    cr_assert_eq(atomic_load(&af_live), live0, "allocation %ld (%s: %s): %ld blocks leaked", n, loom_code_name(rc),
                 loom_status_message(st), atomic_load(&af_live) - live0);
    if (rc == LOOM_OK)
      s.swallowed++;
    else
      check_error(&s, rc, st, "events", n);
    /* what was written reads back whole (a failed event is absent, never half there) */
    struct stat sb;
    if (stat(dir, &sb) == 0) {
      int c = events_read_all(dir, n, st);
      cr_assert(c <= 6, "allocation %ld: %d events", n, c);
      if (rc == LOOM_OK) cr_assert_eq(c, 6, "allocation %ld absorbed but %d events of 6 written", n, c);
    }
  }
  af_report("event writing", &s);
  loom_status_free(st);
  tu_rmtree(root);
  loom_set_allocator(NULL);
}
