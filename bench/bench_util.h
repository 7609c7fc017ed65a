/* Shared helpers for benchmarks: timing, RSS, flags, Fashion-MNIST IDX loading. */
#ifndef LOOM_BENCH_UTIL_H
#define LOOM_BENCH_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include <math.h>

static inline double bu_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* CPU time of the whole process (all threads), in microseconds. */
static inline double bu_cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int bu_cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static inline double bu_median(double *v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, bu_cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Peak resident set size in MB (VmHWM). */
static inline double bu_peak_rss_mb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  double kb = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) kb = atof(line + 6);
  fclose(f);
  return kb / 1024.0;
}

static inline const char *bu_flag(int argc, char **argv, const char *name, const char *def) {
  for (int i = 1; i < argc - 1; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return def;
}

/* IDX file (gzipped or not, zlib reads both). Returns malloc'd payload and
 * dims; NULL with a message on stderr on failure. */
static inline uint8_t *bu_read_idx(const char *path, int *ndim, int64_t dims[4]) {
  gzFile f = gzopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return NULL;
  }
  unsigned char h[4];
  if (gzread(f, h, 4) != 4 || h[0] || h[1] || h[2] != 0x08 || h[3] < 1 || h[3] > 4) {
    fprintf(stderr, "%s: not an IDX ubyte file\n", path);
    gzclose(f);
    return NULL;
  }
  *ndim = h[3];
  int64_t n = 1;
  for (int i = 0; i < *ndim; i++) {
    unsigned char d[4];
    if (gzread(f, d, 4) != 4) {
      fprintf(stderr, "%s: truncated header\n", path);
      gzclose(f);
      return NULL;
    }
    dims[i] = ((int64_t)d[0] << 24) | ((int64_t)d[1] << 16) | ((int64_t)d[2] << 8) | d[3];
    n *= dims[i];
  }
  uint8_t *buf = malloc((size_t)n);
  if (!buf || gzread(f, buf, (unsigned)n) != (int)n) {
    fprintf(stderr, "%s: truncated data\n", path);
    free(buf);
    gzclose(f);
    return NULL;
  }
  gzclose(f);
  return buf;
}

typedef struct {
  uint8_t *train_x, *train_y, *test_x, *test_y;
  int64_t ntrain, ntest, dim;
} bu_mnist;

static inline int bu_load_fashion(bu_mnist *m, const char *dir) {
  char p[512];
  int nd;
  int64_t d[4];
  snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
  m->train_x = bu_read_idx(p, &nd, d);
  if (!m->train_x) return -1;
  m->ntrain = d[0];
  m->dim = d[1] * d[2];
  snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
  m->train_y = bu_read_idx(p, &nd, d);
  snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
  m->test_x = bu_read_idx(p, &nd, d);
  m->ntest = d[0];
  snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", dir);
  m->test_y = bu_read_idx(p, &nd, d);
  return (m->train_y && m->test_x && m->test_y) ? 0 : -1;
}

/* Deterministic shuffle (xorshift64*, Fisher-Yates). */
static inline void bu_shuffle(int32_t *idx, int64_t n, uint64_t *state) {
  for (int64_t i = n - 1; i > 0; i--) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    int64_t j = (int64_t)((x * 2685821657736338717ull) % (uint64_t)(i + 1));
    int32_t t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
  }
}

/* PyTorch-default-like init for Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and bias. */
static inline void bu_init_uniform(float *w, int64_t n, int64_t fan_in, uint64_t *state) {
  float lim = 1.0f / sqrtf((float)fan_in);
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    double u = (double)((x * 2685821657736338717ull) >> 11) / 9007199254740992.0;
    w[i] = (float)((2 * u - 1) * lim);
  }
}
#define BU_FASHION_DIR "/usr/share/datasets/fashion-mnist"
#endif
