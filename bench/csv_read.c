/* CSV -> batched tensors, one thread: rows/s of loom's CSV dataset +
 * batch(B) over a census-like CSV (scripts/gen_census_csv.py; 13 columns,
 * 7 numeric read as float32 / int32 label, 6 strings), beside a floor in the
 * same run: a hand-written C loop that reads the same file in blocks and
 * parses the same fields into per-batch arrays (floats, int32 labels, string
 * bytes + offsets in one arena), with no validation beyond what the file needs.
 *   --csv PATH (default /tmp/loom_census_<rows>.csv, generated when absent)
 *   --rows N (500000)  --batch N (256)  --reps N (3: best of)
 * Prints key=value lines: rows, batch, loom_rows_per_sec, floor_rows_per_sec,
 * loom_over_floor (best wall time of the reps), the same by the thread's CPU
 * time (*_per_cpu_sec, loom_over_floor_cpu: steadier on a busy machine),
 * checksum_loom, checksum_floor (equal when both read the same values). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench/bench_util.h"
#include "loom/loom.h"

static const char *NAMES[13] = {"age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
                                "occupation", "relationship", "capital_gain", "capital_loss", "hours_per_week",
                                "native_country", "label"};
static int is_str(int i) { return i == 1 || i == 3 || i == 5 || i == 6 || i == 7 || i == 11; }

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "%s: %s\n", what, loom_status_message(st));
  exit(1);
}

/* Sum of the numbers and the string lengths / first bytes: both readers must agree. */
static double g_sum;
/* CPU seconds of this thread (user + system) of the last run: the rate by
 * CPU time is steadier than by wall time on a busy machine. */
static double g_cpu;
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double run_loom(const char *path, int64_t batch, int64_t *rows) {
  loom_status *st = loom_status_new();
  loom_csv_column cc[13];
  for (int i = 0; i < 13; i++)
    cc[i] = (loom_csv_column){.name = NAMES[i],
                              .dtype = is_str(i) ? LOOM_STRING : (i == 12 ? LOOM_I32 : LOOM_F32),
                              .default_value = is_str(i) ? "" : "0",
                              .select = 1};
  loom_csv_options o = {sizeof(loom_csv_options), 1, ',', 13, cc, "label"};
  double c0 = cpu_now();
  double t0 = bu_now_us();
  loom_dataset *ds = loom_dataset_csv(1, &path, &o, st);
  if (!ds) die("csv", st);
  ds = loom_dataset_batch(ds, batch, 0, st);
  if (!ds) die("batch", st);
  loom_tensor *v[13] = {0};
  int64_t n = 0;
  double sum = 0;
  loom_code rc;
  while (!(rc = loom_dataset_next(ds, v, st))) {
    int64_t k = loom_tensor_dim(v[0], 0);
    n += k;
    for (int c = 0; c < 13; c++) {
      if (is_str(c)) {
        size_t len;
        const char *s = loom_tensor_get_string(v[c], k - 1, &len);
        sum += (double)len + (unsigned char)s[0];
      } else if (c == 12) {
        sum += ((const int32_t *)loom_tensor_data(v[c]))[k - 1];
      } else {
        sum += ((const float *)loom_tensor_data(v[c]))[k - 1];
      }
    }
  }
  if (rc != LOOM_OUT_OF_RANGE) die("next", st);
  double dt = bu_now_us() - t0;
  g_cpu = cpu_now() - c0;
  for (int c = 0; c < 13; c++) loom_tensor_free(v[c]);
  loom_dataset_free(ds);
  loom_status_free(st);
  *rows = n;
  g_sum = sum;
  return dt;
}

/* The floor: blocks of 1 MiB, fields split on ',' and '\n', numbers by a
 * digit loop (the file holds unsigned integers), strings copied into a
 * per-batch arena. */
typedef struct floor_batch {
  float num[6][4096];
  int32_t label[4096];
  char *arena;
  size_t alen, acap;
  int64_t off[6][4096], len[6][4096];
} floor_batch;

static double run_floor(const char *path, int64_t batch, int64_t *rows) {
  static floor_batch fb;
  if (batch > 4096) batch = 4096;
  fb.acap = 1 << 20;
  fb.arena = malloc(fb.acap);
  double c0 = cpu_now();
  double t0 = bu_now_us();
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  size_t cap = 1 << 20;
  char *buf = malloc(cap + 1);
  size_t have = 0, pos = 0;
  int eof = 0, header = 1;
  int64_t n = 0, k = 0;
  double sum = 0;
  for (;;) {
    /* the next complete line in [pos, have) */
    char *nl = memchr(buf + pos, '\n', have - pos);
    if (!nl && !eof) {
      memmove(buf, buf + pos, have - pos);
      have -= pos;
      pos = 0;
      size_t got = fread(buf + have, 1, cap - have, f);
      if (!got) eof = 1;
      have += got;
      continue;
    }
    if (!nl && pos == have) break;
    char *p = buf + pos, *end = nl ? nl : buf + have;
    pos = nl ? (size_t)(nl - buf) + 1 : have;
    if (header) {
      header = 0;
      continue;
    }
    int ni = 0, si = 0;
    for (int c = 0; c < 13; c++) {
      char *q = p;
      while (q < end && *q != ',') q++;
      if (is_str(c)) {
        size_t l = (size_t)(q - p);
        memcpy(fb.arena + fb.alen, p, l);
        fb.arena[fb.alen + l] = 0;
        fb.off[si][k] = (int64_t)fb.alen;
        fb.len[si][k] = (int64_t)l;
        fb.alen += l + 1;
        si++;
      } else {
        int64_t v = 0;
        for (char *r = p; r < q; r++) v = v * 10 + (*r - '0');
        if (c == 12)
          fb.label[k] = (int32_t)v;
        else
          fb.num[ni++][k] = (float)v;
      }
      p = q + 1;
    }
    if (++k == batch) {
      for (int c = 0; c < 6; c++) sum += fb.num[c][k - 1] + (double)fb.len[c][k - 1] + (unsigned char)fb.arena[fb.off[c][k - 1]];
      sum += fb.label[k - 1];
      n += k;
      k = 0;
      fb.alen = 0;
    }
  }
  if (k) {
    for (int c = 0; c < 6; c++) sum += fb.num[c][k - 1] + (double)fb.len[c][k - 1] + (unsigned char)fb.arena[fb.off[c][k - 1]];
    sum += fb.label[k - 1];
    n += k;
  }
  fclose(f);
  free(buf);
  double dt = bu_now_us() - t0;
  g_cpu = cpu_now() - c0;
  free(fb.arena);
  *rows = n;
  g_sum = sum;
  return dt;
}

int main(int argc, char **argv) {
  int64_t nrows = atoll(bu_flag(argc, argv, "--rows", "500000"));
  int64_t batch = atoll(bu_flag(argc, argv, "--batch", "256"));
  int reps = atoi(bu_flag(argc, argv, "--reps", "3"));
  char def[256];
  snprintf(def, sizeof def, "/tmp/loom_census_%lld.csv", (long long)nrows);
  const char *path = bu_flag(argc, argv, "--csv", def);
  if (access(path, R_OK)) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "python3 scripts/gen_census_csv.py %s %lld", path, (long long)nrows);
    fprintf(stderr, "generating %s\n", path);
    if (system(cmd)) {
      fprintf(stderr, "cannot generate %s (run from the repository root)\n", path);
      return 1;
    }
  }
  double best_l = 1e300, best_f = 1e300, sum_l = 0, sum_f = 0, cpu_l = 1e300, cpu_f = 1e300;
  int64_t rows_l = 0, rows_f = 0;
  for (int r = 0; r < reps; r++) {
    double t = run_loom(path, batch, &rows_l);
    sum_l = g_sum;
    if (t < best_l) best_l = t;
    if (g_cpu < cpu_l) cpu_l = g_cpu;
    t = run_floor(path, batch, &rows_f);
    sum_f = g_sum;
    if (t < best_f) best_f = t;
    if (g_cpu < cpu_f) cpu_f = g_cpu;
  }
  double lr = rows_l / (best_l * 1e-6), fr = rows_f / (best_f * 1e-6);
  double lc = rows_l / cpu_l, fc = rows_f / cpu_f;
  printf("file=%s\nrows=%lld\nbatch=%lld\nloom_rows_per_sec=%.0f\nfloor_rows_per_sec=%.0f\nloom_over_floor=%.3f\n"
         "loom_rows_per_cpu_sec=%.0f\nfloor_rows_per_cpu_sec=%.0f\nloom_over_floor_cpu=%.3f\n"
         "checksum_loom=%.1f\nchecksum_floor=%.1f\n",
         path, (long long)rows_l, (long long)batch, lr, fr, lr / fr, lc, fc, lc / fc, sum_l, sum_f);
  if (rows_l != rows_f || sum_l != sum_f) {
    fprintf(stderr, "loom and the floor disagree (rows %lld vs %lld)\n", (long long)rows_l, (long long)rows_f);
    return 1;
  }
  return 0;
}
