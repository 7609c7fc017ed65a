/* Dataset cache and CSV-into-tensors, one thread.
 *  1. CSV -> map (a per-element transform costing about a microsecond) ->
 *     [cache] -> batch(256), E epochs: the yardstick is the same pipeline
 *     without cache (every epoch parses and maps again); beside it the
 *     cache in memory and in a file: the first epoch (fill) and the mean of
 *     the later ones (replay).
 *  2. loom_csv_read_tensors (the whole file at once) beside the CSV dataset
 *     + batch(256) reading the same file (the yardstick).
 *   --rows N (200000)  --epochs N (4)  --dir PATH (/tmp)
 * Prints key=value lines: rows, epochs, uncached_epoch_ms, mem_fill_ms,
 * mem_replay_ms, file_fill_ms, file_replay_ms, mem_replay_over_uncached,
 * file_replay_over_uncached, csv_dataset_ms, csv_read_tensors_ms,
 * read_tensors_over_dataset, checksum_* (equal when every way read the same
 * values). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench/bench_util.h"
#include "loom/loom.h"

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "%s: %s\n", what, loom_status_message(st));
  exit(1);
}

static const loom_csv_column COLS[3] = {{"x", LOOM_F32, NULL, 1, 0}, {"y", LOOM_F32, NULL, 1, 0},
                                        {"s", LOOM_STRING, NULL, 1, 0}};

static loom_code work_map(void *user, int n, loom_tensor **v, loom_status *st) {
  (void)user, (void)n, (void)st;
  float *x = loom_tensor_data(v[0]), *y = loom_tensor_data(v[1]);
  float acc = x[0];
  for (int i = 0; i < 200; i++) acc = acc * 0.999f + y[0] * 0.001f;
  x[0] = acc;
  return LOOM_OK;
}

static loom_dataset *pipeline(const char *csv, const char *cache, int epochs, loom_status *st) {
  loom_csv_options o = loom_csv_options_default();
  o.ncolumns = 3;
  o.columns = COLS;
  loom_dataset *ds = loom_dataset_csv(1, &csv, &o, st);
  if (ds) ds = loom_dataset_map(ds, work_map, NULL, st);
  if (ds && cache) ds = loom_dataset_cache(ds, cache, st);
  if (ds) ds = loom_dataset_repeat(ds, epochs, st);
  if (ds) ds = loom_dataset_batch(ds, 256, 0, st);
  if (!ds) die("pipeline", st);
  return ds;
}

/* Runs the pipeline; ms[e] = wall time of epoch e (an epoch ends at each
 * multiple of rows). Returns the checksum. */
static double run(const char *csv, const char *cache, int epochs, int64_t rows, double *ms) {
  loom_status *st = loom_status_new();
  loom_dataset *ds = pipeline(csv, cache, epochs, st);
  loom_tensor *v[3] = {0};
  int64_t seen = 0;
  double sum = 0, t0 = bu_now_us();
  int e = 0;
  loom_code rc;
  while (!(rc = loom_dataset_next(ds, v, st))) {
    int64_t k = loom_tensor_dim(v[0], 0);
    sum += ((const float *)loom_tensor_data(v[0]))[k - 1] + (double)strlen(loom_tensor_get_string(v[2], 0, NULL));
    seen += k;
    if (seen >= (e + 1) * rows) {
      double t = bu_now_us();
      ms[e++] = (t - t0) / 1e3;
      t0 = t;
    }
  }
  if (rc != LOOM_OUT_OF_RANGE) die("next", st);
  for (int c = 0; c < 3; c++) loom_tensor_free(v[c]);
  loom_dataset_free(ds);
  loom_status_free(st);
  return sum;
}

static double mean_after_first(const double *ms, int n) {
  double s = 0;
  for (int i = 1; i < n; i++) s += ms[i];
  return n > 1 ? s / (n - 1) : ms[0];
}

int main(int argc, char **argv) {
  int64_t rows = 200000;
  int epochs = 4;
  const char *dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--rows")) rows = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--epochs")) epochs = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  if (rows < 1 || epochs < 2 || epochs > 64) {
    fprintf(stderr, "--rows >= 1, --epochs 2..64\n");
    return 2;
  }
  char csv[512], cache[512];
  snprintf(csv, sizeof csv, "%s/loom_bench_cache_%d.csv", dir, (int)getpid());
  snprintf(cache, sizeof cache, "%s/loom_bench_cache_%d.cache", dir, (int)getpid());
  FILE *f = fopen(csv, "w");
  if (!f) {
    perror(csv);
    return 1;
  }
  fprintf(f, "x,y,s\n");
  for (int64_t r = 0; r < rows; r++)
    fprintf(f, "%.4f,%lld,word%lld\n", (double)(r % 1000) / 7.0, (long long)(r % 97), (long long)(r % 5000));
  fclose(f);
  double un[64], mem[64], fil[64];
  double s_un = run(csv, NULL, epochs, rows, un);
  double s_mem = run(csv, "", epochs, rows, mem);
  double s_fil = run(csv, cache, epochs, rows, fil);
  unlink(cache);

  /* 2. the whole file: dataset + batch vs loom_csv_read_tensors */
  loom_status *st = loom_status_new();
  loom_csv_options o = loom_csv_options_default();
  o.ncolumns = 3;
  o.columns = COLS;
  double best_ds = 1e30, best_rt = 1e30, sum_ds = 0, sum_rt = 0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = bu_now_us();
    const char *paths[1] = {csv};
    loom_dataset *ds = loom_dataset_csv(1, paths, &o, st);
    if (!ds || !(ds = loom_dataset_batch(ds, 256, 0, st))) die("csv", st);
    loom_tensor *v[3] = {0};
    sum_ds = 0;
    while (!loom_dataset_next(ds, v, st))
      for (int64_t i = 0; i < loom_tensor_dim(v[0], 0); i++) sum_ds += ((const float *)loom_tensor_data(v[0]))[i];
    for (int c = 0; c < 3; c++) loom_tensor_free(v[c]);
    loom_dataset_free(ds);
    double t1 = bu_now_us();
    int n = 0;
    char **names = NULL;
    loom_tensor **t = NULL;
    if (loom_csv_read_tensors(csv, &o, &n, &names, &t, st)) die("read_tensors", st);
    sum_rt = 0;
    for (int64_t i = 0; i < loom_tensor_dim(t[0], 0); i++) sum_rt += ((const float *)loom_tensor_data(t[0]))[i];
    loom_csv_tensors_free(n, names, t);
    double t2 = bu_now_us();
    if (t1 - t0 < best_ds) best_ds = t1 - t0;
    if (t2 - t1 < best_rt) best_rt = t2 - t1;
  }
  loom_status_free(st);
  unlink(csv);

  double ur = mean_after_first(un, epochs);
  printf("rows=%lld\nepochs=%d\n", (long long)rows, epochs);
  printf("uncached_epoch_ms=%.2f\n", ur);
  printf("mem_fill_ms=%.2f\nmem_replay_ms=%.2f\n", mem[0], mean_after_first(mem, epochs));
  printf("file_fill_ms=%.2f\nfile_replay_ms=%.2f\n", fil[0], mean_after_first(fil, epochs));
  printf("mem_replay_over_uncached=%.3f\n", mean_after_first(mem, epochs) / ur);
  printf("file_replay_over_uncached=%.3f\n", mean_after_first(fil, epochs) / ur);
  printf("csv_dataset_ms=%.2f\ncsv_read_tensors_ms=%.2f\nread_tensors_over_dataset=%.3f\n", best_ds / 1e3,
         best_rt / 1e3, best_rt / best_ds);
  printf("checksum_uncached=%.6g\nchecksum_mem=%.6g\nchecksum_file=%.6g\n", s_un, s_mem, s_fil);
  printf("checksum_csv_dataset=%.6g\nchecksum_read_tensors=%.6g\n", sum_ds, sum_rt);
  return 0;
}
