/* Soak test (`make soak`, not part of `make test`): trains,
 * evaluates and exports in a loop for SOAK_SECONDS (default 3600) and checks
 * that the process does not grow. One iteration:
 *   - train 100 steps (CSV file -> shuffle -> repeat -> batch 16 -> prefetch;
 *     summaries every 5 steps, a checkpoint every 10, keep_checkpoint_max 3);
 *   - evaluate one pass over the CSV file (its own event file under eval/);
 *   - export a SavedModel-like directory, keep the newest 2 (older removed);
 *   - load the newest export in a predictor, predict 4 rows, free it;
 *   - Estimator.predict over the first 8 rows of the file;
 *   - every 10th iteration the Estimator is freed and the next one restores
 *     from the model_dir (a process restart, in-process).
 * Between iterations, when no Estimator is alive (after every 10th
 * iteration) and at least SOAK_SAMPLE_SECONDS (default SOAK_SECONDS/120, at
 * least 1) after the last sample, it samples from /proc/self the resident
 * set (statm) and the open file descriptors (/proc/self/fd), plus loom's own
 * live heap blocks and bytes (counted by an allocator hook) and glibc's
 * mallinfo2 (bytes in use by every caller, bytes its heap holds), and prints
 * each sample as a key=value line.
 *
 * Flat means, after a warm-up (the first 10% of the run, at least the first
 * 2 samples): every later sample's RSS <= the warm-up's largest RSS + 2 MiB
 * + 10%; open fds <= the warm-up's largest count (no slack); loom's live
 * blocks <= the warm-up's largest + 16 and live bytes <= the warm-up's
 * largest + 64 KiB. It also prints the least-squares slope of RSS after
 * the warm-up (kB per hour) as a figure. Exit 0 when flat, 1 when not (or on
 * any loom error, which is printed). SOAK_DIR=<dir> puts the model_dir there
 * (default a new /tmp/loom_soak_XXXXXX, removed at the end unless SOAK_KEEP
 * is set). */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <malloc.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "loom/loom.h"

/* ---- loom's heap, counted (blocks and usable bytes) ---- */
static atomic_llong live_blocks, live_bytes;
static void *c_malloc(size_t n, void *u) {
  (void)u;
  void *p = malloc(n);
  if (p) {
    live_blocks++;
    live_bytes += (long long)malloc_usable_size(p);
  }
  return p;
}
static void *c_realloc(void *p, size_t n, void *u) {
  (void)u;
  if (!p) return c_malloc(n, u);
  long long old = (long long)malloc_usable_size(p);
  if (n == 0) n = 1; /* keep realloc(p, 0) a resize, never a hidden free */
  void *q = realloc(p, n);
  if (q) live_bytes += (long long)malloc_usable_size(q) - old;
  return q;
}
static void c_free(void *p, void *u) {
  (void)u;
  if (!p) return;
  live_blocks--;
  live_bytes -= (long long)malloc_usable_size(p);
  free(p);
}

/* ---- process figures from /proc/self ---- */
static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
  fclose(f);
  return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}
static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* not the directory stream's own fd */
}
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}
static void rmtree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static long dir_usage(const char *dir, long *files);
static long du_kb, du_files;
static int du_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)p, (void)ftw;
  if (flag == FTW_F) {
    du_kb += (long)((sb->st_size + 1023) / 1024);
    du_files++;
  }
  return 0;
}
static long dir_usage(const char *dir, long *files) {
  du_kb = du_files = 0;
  nftw(dir, du_entry, 16, FTW_PHYS);
  *files = du_files;
  return du_kb;
}

static void die(const char *what, loom_status *st) {
  printf("soak_error what=\"%s\" message=\"%s\"\n", what, loom_status_message(st));
  fflush(stdout);
  exit(1);
}

/* ---- the model: y = 0.5 + x1 - 2 x2 (+ noise), a 2-layer MLP ---- */
#define NROWS 512
#define STEPS_PER_ITER 100
#define RESTART_EVERY 10
static char csv_path[600];

static const loom_csv_column COLS[3] = {
    {"x1", LOOM_F32, NULL, 1, 0}, {"x2", LOOM_F32, NULL, 1, 0}, {"y", LOOM_F32, NULL, 1, 0}};

static loom_dataset *csv_source(loom_status *st) {
  loom_csv_options o = loom_csv_options_default();
  o.header = 1;
  o.delimiter = ',';
  o.ncolumns = 3;
  o.columns = COLS;
  o.label_name = "y";
  const char *paths[1] = {csv_path};
  return loom_dataset_csv(1, paths, &o, st);
}

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p, (void)user;
  loom_dataset *ds = csv_source(st);
  if (mode == LOOM_MODE_TRAIN) {
    if (ds) ds = loom_dataset_shuffle(ds, 128, 7, 1, st);
    if (ds) ds = loom_dataset_repeat(ds, -1, st);
  }
  if (mode == LOOM_MODE_PREDICT && ds) ds = loom_dataset_take(ds, 8, st);
  if (ds) ds = loom_dataset_batch(ds, mode == LOOM_MODE_TRAIN ? 16 : 32, 0, st);
  if (ds) ds = loom_dataset_prefetch(ds, 2, st);
  return ds;
}

static loom_output xin(loom_graph *g, const loom_features *f) {
  loom_output c[2] = {loom_features_get(f, "x1"), loom_features_get(f, "x2")};
  int64_t d[2] = {-1, 1};
  loom_output a = loom_reshape(g, c[0], 2, d, NULL), b = loom_reshape(g, c[1], 2, d, NULL);
  loom_output ab[2] = {a, b};
  return loom_concat(g, 2, ab, 1, "x");
}

static loom_code model_fn(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                          const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec, void *user,
                          loom_status *st) {
  (void)cfg, (void)user, (void)params;
  loom_output x = loom_features_count(f) == 1 ? loom_features_get(f, "x") : xin(g, f);
  loom_dense_options d = loom_dense_options_default();
  d.activation = "relu";
  loom_output h = loom_layers_dense(g, x, 16, &d, "hidden");
  loom_output pred = loom_layers_dense(g, h, 1, NULL, "out");
  loom_spec_add_prediction(spec, "predictions", pred);
  if (mode == LOOM_MODE_PREDICT) return loom_graph_status(g, st);
  int64_t d1[2] = {-1, 1};
  loom_output y = loom_reshape(g, labels, 2, d1, NULL);
  loom_output zero = {NULL, 0};
  loom_output loss = loom_losses_mean_squared_error(g, y, pred, zero, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  loom_summary_scalar(g, "loss_again", loss);
  if (mode == LOOM_MODE_TRAIN) {
    loom_optimizer *opt = loom_optimizer_adam(loom_const_f32(g, 0.01f, "lr"), NULL);
    loom_node *op = loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL);
    loom_optimizer_free(opt);
    loom_spec_set_train_op(spec, op);
  }
  return loom_graph_status(g, st);
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  int64_t dims[2] = {-1, 2};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, dims, "x");
  loom_code rc = loom_features_add(f, "x", x, st);
  if (rc == LOOM_OK) rc = loom_features_add(r, "x", x, st);
  return rc;
}

/* ---- samples ---- */
typedef struct sample {
  double t;
  long iter, rss;
  int fds;
  long long blocks, bytes;
  long long libc_inuse, libc_heap; /* mallinfo2: bytes in use (all callers), bytes the heap holds */
} sample;

int main(void) {
  double secs = 3600;
  const char *v = getenv("SOAK_SECONDS");
  if (v && atof(v) > 0) secs = atof(v);
  double every = secs / 120 < 1 ? 1 : secs / 120;
  if ((v = getenv("SOAK_SAMPLE_SECONDS")) && atof(v) > 0) every = atof(v);
  loom_allocator a = {c_malloc, c_realloc, c_free, NULL};
  loom_set_allocator(&a);
  loom_log_set(NULL, NULL, LOOM_LOG_ERROR);

  char dir[512];
  const char *keep = getenv("SOAK_KEEP");
  if ((v = getenv("SOAK_DIR")) && *v) {
    snprintf(dir, sizeof dir, "%s", v);
    mkdir(dir, 0700);
  } else {
    snprintf(dir, sizeof dir, "/tmp/loom_soak_XXXXXX");
    if (!mkdtemp(dir)) {
      printf("soak_error what=\"mkdtemp\" message=\"%s\"\n", strerror(errno));
      return 1;
    }
  }
  char model_dir[600], export_base[700];
  snprintf(csv_path, sizeof csv_path, "%s/data.csv", dir);
  snprintf(model_dir, sizeof model_dir, "%s/model", dir);
  snprintf(export_base, sizeof export_base, "%s/export", model_dir);
  FILE *f = fopen(csv_path, "w");
  if (!f) {
    printf("soak_error what=\"%s\" message=\"%s\"\n", csv_path, strerror(errno));
    return 1;
  }
  fprintf(f, "x1,x2,y\n");
  uint32_t r = 12345;
  for (int i = 0; i < NROWS; i++) {
    r = r * 1664525u + 1013904223u;
    float x1 = (float)(r >> 8) / (float)(1u << 24);
    r = r * 1664525u + 1013904223u;
    float x2 = (float)(r >> 8) / (float)(1u << 24) - 0.5f;
    r = r * 1664525u + 1013904223u;
    float noise = ((float)(r >> 8) / (float)(1u << 24) - 0.5f) * 0.01f;
    fprintf(f, "%.6f,%.6f,%.6f\n", x1, x2, 0.5f + x1 - 2 * x2 + noise);
  }
  fclose(f);

  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  c.save_summary_steps = 5;
  c.save_checkpoints_steps = 10;
  c.keep_checkpoint_max = 3;
  c.log_step_count_steps = 1000;
  c.has_random_seed = 1;
  c.tf_random_seed = 1;

  int cap = (int)(secs / every) + 16, ns = 0;
  sample *S = calloc((size_t)cap, sizeof *S);
  char exports[2][800] = {"", ""};
  loom_status *st = loom_status_new();
  loom_estimator *e = NULL;
  double t0 = now_s(), next_sample = 0, last_loss = NAN;
  long iter = 0;
  int64_t steps = 0;
  printf("soak_start seconds=%.0f sample_every_s=%.1f model_dir=%s\n", secs, every, model_dir);
  fflush(stdout);
  for (;;) {
    double t = now_s() - t0;
    /* samples are taken with no Estimator alive (its per-instance objects
     * freed), so loom's live heap is compared at the same point every time */
    if (!e && (t >= next_sample || t >= secs)) {
      if (ns < cap) {
        struct mallinfo2 mi = mallinfo2();
        sample s = {t,           iter,
                    rss_kb(),    open_fds(),
                    live_blocks, live_bytes,
                    (long long)(mi.uordblks + mi.hblkhd), (long long)(mi.arena + mi.hblkhd)};
        S[ns++] = s;
        printf("soak_sample t_s=%.0f iter=%ld steps=%lld rss_kb=%ld fds=%d loom_live_blocks=%lld loom_live_kb=%lld "
               "libc_inuse_kb=%lld libc_heap_kb=%lld loss=%.5f\n",
               s.t, s.iter, (long long)steps, s.rss, s.fds, s.blocks, s.bytes / 1024, s.libc_inuse / 1024,
               s.libc_heap / 1024, last_loss);
        fflush(stdout);
      }
      next_sample += every;
      if (t >= secs) break;
    }
    if (!e && !(e = loom_estimator_new(model_fn, NULL, model_dir, &c, NULL, NULL, st))) die("estimator_new", st);
    loom_train_options to = loom_train_options_default();
    to.steps = STEPS_PER_ITER;
    if (loom_estimator_train(e, input_fn, NULL, &to, st)) die("train", st);
    steps += STEPS_PER_ITER;
    loom_eval_result *er = NULL;
    loom_eval_options eo = loom_eval_options_default();
    if (loom_estimator_evaluate(e, input_fn, NULL, &eo, &er, st)) die("evaluate", st);
    if (loom_eval_result_get(er, "loss", &last_loss, st)) die("eval loss", st);
    loom_eval_result_free(er);
    char path[800];
    if (loom_estimator_export(e, serving_fn, NULL, export_base, NULL, path, sizeof path, st)) die("export", st);
    if (exports[0][0] && strcmp(exports[0], path) && strcmp(exports[1], path)) rmtree(exports[0]);
    if (strcmp(exports[1], path)) {
      memcpy(exports[0], exports[1], sizeof exports[0]);
      snprintf(exports[1], sizeof exports[1], "%s", path);
    }
    loom_predictor *p = loom_predictor_load(path, NULL, st);
    if (!p) die("predictor_load", st);
    int64_t xd[2] = {4, 2};
    float X[8] = {0.1f, 0.2f, 0.5f, -0.3f, 0.9f, 0.0f, 0.3f, 0.4f};
    loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, X, st), *out = NULL;
    if (!x || loom_predictor_run(p, NULL, 1, &x, 1, &out, st)) die("predictor_run", st);
    const float *o = loom_tensor_data_const(out);
    for (int i = 0; i < 4; i++)
      if (!isfinite(o[i])) {
        printf("soak_error what=\"predict\" message=\"non-finite prediction\"\n");
        return 1;
      }
    loom_tensor_free(out);
    loom_tensor_free(x);
    loom_predictor_free(p);
    loom_predict_options po = loom_predict_options_default();
    loom_prediction_iter *it = loom_estimator_predict(e, input_fn, NULL, &po, st);
    if (!it) die("estimator_predict", st);
    int np = 0;
    loom_code rc;
    while ((rc = loom_prediction_next(it, st)) == LOOM_OK) np++;
    if (rc != LOOM_OUT_OF_RANGE || np != 8) die("estimator_predict next", st);
    loom_prediction_iter_free(it);
    iter++;
    if (iter % RESTART_EVERY == 0) {
      loom_estimator_free(e);
      e = NULL;
    }
  }
  loom_estimator_free(e);
  long mfiles = 0, mkb = dir_usage(model_dir, &mfiles);

  /* ---- the verdict ---- */
  int warm = 0;
  while (warm < ns && S[warm].t < secs * 0.1) warm++;
  if (warm < 2) warm = ns < 2 ? ns : 2;
  long rss_warm = 0, rss_max = 0;
  int fds_warm = 0, fds_max = 0;
  long long blk_warm = 0, blk_max = 0, byt_warm = 0, byt_max = 0;
  for (int i = 0; i < ns; i++) {
    if (i < warm) {
      rss_warm = S[i].rss > rss_warm ? S[i].rss : rss_warm;
      fds_warm = S[i].fds > fds_warm ? S[i].fds : fds_warm;
      blk_warm = S[i].blocks > blk_warm ? S[i].blocks : blk_warm;
      byt_warm = S[i].bytes > byt_warm ? S[i].bytes : byt_warm;
    }
    rss_max = S[i].rss > rss_max ? S[i].rss : rss_max;
    fds_max = S[i].fds > fds_max ? S[i].fds : fds_max;
    blk_max = S[i].blocks > blk_max ? S[i].blocks : blk_max;
    byt_max = S[i].bytes > byt_max ? S[i].bytes : byt_max;
  }
  long rss_slack = 2 * 1024 + rss_warm / 10;
  long long blk_slack = 16, byt_slack = 64 << 10;
  int bad = 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (int i = warm; i < ns; i++) {
    if (S[i].rss > rss_warm + rss_slack) bad |= 1;
    if (S[i].fds > fds_warm) bad |= 2;
    if (S[i].blocks > blk_warm + blk_slack) bad |= 4;
    if (S[i].bytes > byt_warm + byt_slack) bad |= 8;
    double xh = S[i].t / 3600.0;
    sx += xh, sy += (double)S[i].rss, sxx += xh * xh, sxy += xh * (double)S[i].rss, n++;
  }
  double slope = n >= 2 && (n * sxx - sx * sx) > 0 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0;
  if (ns < 3) bad |= 16; /* too short to say anything */
  const sample *L = &S[ns - 1];
  printf("soak_seconds=%.0f\n", L->t);
  printf("soak_iterations=%ld\n", iter);
  printf("soak_train_steps=%lld\n", (long long)steps);
  printf("soak_samples=%d\n", ns);
  printf("soak_warmup_samples=%d\n", warm);
  printf("soak_final_eval_loss=%.5f\n", last_loss);
  printf("rss_kb_first=%ld\n", S[0].rss);
  printf("rss_kb_warmup_max=%ld\n", rss_warm);
  printf("rss_kb_last=%ld\n", L->rss);
  printf("rss_kb_max=%ld\n", rss_max);
  printf("rss_kb_slack=%ld\n", rss_slack);
  printf("rss_slope_kb_per_hour_after_warmup=%.1f\n", slope);
  printf("fds_first=%d\n", S[0].fds);
  printf("fds_warmup_max=%d\n", fds_warm);
  printf("fds_last=%d\n", L->fds);
  printf("fds_max=%d\n", fds_max);
  printf("loom_live_blocks_first=%lld\n", S[0].blocks);
  printf("loom_live_blocks_warmup_max=%lld\n", blk_warm);
  printf("loom_live_blocks_last=%lld\n", L->blocks);
  printf("loom_live_blocks_max=%lld\n", blk_max);
  printf("loom_live_kb_warmup_max=%lld\n", byt_warm / 1024);
  printf("loom_live_kb_last=%lld\n", L->bytes / 1024);
  printf("loom_live_kb_max=%lld\n", byt_max / 1024);
  printf("libc_inuse_kb_first=%lld\n", S[0].libc_inuse / 1024);
  printf("libc_inuse_kb_warmup_last=%lld\n", S[warm - 1].libc_inuse / 1024);
  printf("libc_inuse_kb_last=%lld\n", L->libc_inuse / 1024);
  printf("libc_heap_kb_last=%lld\n", L->libc_heap / 1024);
  printf("model_dir_files=%ld\n", mfiles);
  printf("model_dir_kb=%ld\n", mkb);
  printf("soak_flat=%s\n", bad ? "no" : "yes");
  if (bad)
    printf("soak_failed=%s%s%s%s%s\n", bad & 1 ? "rss " : "", bad & 2 ? "fds " : "", bad & 4 ? "loom_blocks " : "",
           bad & 8 ? "loom_bytes " : "", bad & 16 ? "too_few_samples" : "");
  loom_status_free(st);
  free(S);
  if (!keep)
    rmtree(dir);
  else
    printf("soak_dir=%s\n", dir);
  return bad ? 1 : 0;
}
