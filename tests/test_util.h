/* Shared helpers for Criterion tests. */
#ifndef LOOM_TEST_UTIL_H
#define LOOM_TEST_UTIL_H
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "loom/loom.h"

/* Runs one fetch with feeds; asserts OK; returns the fetched tensor (caller frees). */
static inline loom_tensor *tu_run1(loom_graph *g, int nfeeds, const loom_output *feeds, loom_tensor *const *vals,
                                   loom_output fetch) {
  loom_status *st = loom_status_new();
  cr_assert(loom_graph_status(g, st) == LOOM_OK, "graph error: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "session: %s", loom_status_message(st));
  loom_tensor *out = NULL;
  loom_code rc = loom_session_run(s, feeds, vals, nfeeds, &fetch, &out, 1, NULL, 0, st);
  cr_assert(rc == LOOM_OK, "run failed: %s", loom_status_message(st));
  loom_session_free(s);
  loom_status_free(st);
  return out;
}

/* Runs one fetch and returns the code; the message is copied into msg. */
static inline loom_code tu_run_err(loom_graph *g, int nfeeds, const loom_output *feeds, loom_tensor *const *vals,
                                   loom_output fetch, char *msg, size_t cap) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_graph_status(g, st);
  if (!rc) {
    loom_session *s = loom_session_new(g, NULL, st);
    loom_tensor *out = NULL;
    rc = loom_session_run(s, feeds, vals, nfeeds, &fetch, &out, 1, NULL, 0, st);
    loom_tensor_free(out);
    loom_session_free(s);
  }
  if (msg) snprintf(msg, cap, "%s", loom_status_message(st));
  loom_status_free(st);
  return rc;
}

static inline loom_tensor *tu_f32(int ndim, const int64_t *dims, const float *data) {
  return loom_tensor_from_data(LOOM_F32, ndim, dims, data, NULL);
}

/* Asserts t is f32 with the given shape and values within tol (abs + rel). */
static inline void tu_expect_f32(const loom_tensor *t, int ndim, const int64_t *dims, const float *want, double tol) {
  cr_assert(t, "no tensor");
  cr_assert_eq(loom_tensor_dtype(t), LOOM_F32, "dtype %s", loom_dtype_name(loom_tensor_dtype(t)));
  cr_assert_eq(loom_tensor_ndim(t), ndim, "rank %d, want %d", loom_tensor_ndim(t), ndim);
  for (int i = 0; i < ndim; i++)
    cr_assert_eq(loom_tensor_dim(t, i), dims[i], "dim %d: %lld want %lld", i, (long long)loom_tensor_dim(t, i),
                 (long long)dims[i]);
  const float *d = loom_tensor_data_const(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) {
    double err = fabs((double)d[i] - (double)want[i]);
    cr_assert(err <= tol * (1.0 + fabs((double)want[i])) || (isnan(d[i]) && isnan(want[i])),
              "element %lld: got %.9g want %.9g", (long long)i, (double)d[i], (double)want[i]);
  }
}

/* ---------------------------------------------------------------- files */

/* Room for a tu_tmpdir path: "/tmp/<prefix>_XXXXXX" with a short prefix. */
#define TU_TMPDIR_CAP 64

/* Creates a fresh, empty directory /tmp/<prefix>_XXXXXX (mkdtemp) and writes
 * its path into buf; asserts that the path fits in cap and that it was made.
 * Remove it with tu_rmtree. */
static inline void tu_tmpdir(char *buf, size_t cap, const char *prefix) {
  int n = snprintf(buf, cap, "/tmp/%s_XXXXXX", prefix);
  cr_assert(n > 0 && (size_t)n < cap, "tmpdir path for %s does not fit in %zu bytes", prefix, cap);
  cr_assert(mkdtemp(buf), "mkdtemp %s: %s", buf, strerror(errno));
}

static inline int tu__rmtree_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Removes dir and everything below it (depth first, links not followed),
 * like rm -rf: a dir that does not exist is not an error; any other failure
 * is asserted. */
static inline void tu_rmtree(const char *dir) {
  errno = 0;
  int rc = nftw(dir, tu__rmtree_entry, 16, FTW_DEPTH | FTW_PHYS);
  cr_assert(rc == 0 || errno == ENOENT, "removing %s: %s", dir, strerror(errno));
}

static inline int tu_file_exists(const char *path) { return access(path, F_OK) == 0; }

/* Seconds on the monotonic clock. */
static inline double tu_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Sleeps s seconds. */
static inline void tu_nap(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&t, NULL);
}

/* Waits up to timeout_s for a file a shell writes with `echo $? > path` to hold its whole line (the
 * shell creates the file before it writes the status); returns the status, or -1 on timeout. */
static inline int tu_wait_status_file(const char *path, double timeout_s) {
  for (double waited = 0; waited < timeout_s; waited += 0.05) {
    FILE *f = fopen(path, "r");
    char line[32] = "";
    int got = f && fgets(line, sizeof line, f) && strchr(line, '\n');
    if (f) fclose(f);
    if (got) return atoi(line);
    tu_nap(0.05);
  }
  return -1;
}

/* Reads the whole file at path into a malloc'd buffer (caller frees) with a
 * NUL after the last byte, so text can be used as a string; the size (without
 * the NUL) goes to *len when len is not NULL. Asserts the file can be read. */
static inline void *tu_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  cr_assert(f, "open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = 0;
  fclose(f);
  if (len) *len = (size_t)n;
  return b;
}

/* Creates (or truncates) the file at path holding the n bytes at data;
 * asserts every byte was written. */
static inline void tu_write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert(f, "create %s", path);
  if (n) cr_assert_eq(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* ------------------------------------------------- a counting allocator */

static inline atomic_long *tu__alloc_counter(void) {
  static atomic_long n;
  return &n;
}
static inline void *tu__count_malloc(size_t n, void *u) {
  (void)u;
  atomic_fetch_add(tu__alloc_counter(), 1);
  return malloc(n);
}
static inline void *tu__count_realloc(void *p, size_t n, void *u) {
  (void)u;
  atomic_fetch_add(tu__alloc_counter(), 1);
  return realloc(p, n);
}
static inline void tu__count_free(void *p, void *u) {
  (void)u;
  free(p);
}

/* Installs (loom_set_allocator) an allocator that counts every malloc and
 * realloc the library makes, from zero; frees are not counted. Steady-state
 * tests read tu_alloc_count() before and after the loop under test and
 * finish with tu_alloc_count_end(). Counting is atomic: the library's
 * threads may allocate too. */
static inline void tu_alloc_count_begin(void) {
  static const loom_allocator a = {tu__count_malloc, tu__count_realloc, tu__count_free, NULL};
  atomic_store(tu__alloc_counter(), 0);
  loom_set_allocator(&a);
}

/* Allocations counted since tu_alloc_count_begin. */
static inline long tu_alloc_count(void) { return atomic_load(tu__alloc_counter()); }

/* Restores the default allocator; returns the allocations counted. */
static inline long tu_alloc_count_end(void) {
  loom_set_allocator(NULL);
  return tu_alloc_count();
}

#endif
