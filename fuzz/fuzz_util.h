/* fuzz/fuzz_util.h - shared by the libFuzzer targets (fuzz/fuzz_*.c).
 * Every target feeds its input to a public loom entry point the way a user's
 * file would reach it, and requires only that loom returns (any code) without
 * a crash, a leak or undefined behaviour (ASan + UBSan). */
#ifndef LOOM_FUZZ_UTIL_H
#define LOOM_FUZZ_UTIL_H
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "loom/loom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static inline void fz_quiet(loom_log_level lvl, const char *msg, void *u) {
  (void)lvl;
  (void)msg;
  (void)u;
}

static char fz_dir_path[256];
static inline int fz_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}
static inline void fz_cleanup(void) {
  if (fz_dir_path[0]) nftw(fz_dir_path, fz_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Where the per-input files go: $LOOM_FUZZ_TMPDIR, else /dev/shm when it is a
 * writable directory, else $TMPDIR, else /tmp. A memory file system matters:
 * each input rewrites a file with O_TRUNC, and on ext4 (auto_da_alloc) closing a
 * truncated-and-rewritten file starts its writeback to disk, which made the
 * file-based targets ~10x slower (300-800 executions/s instead of 3,000-4,000). */
static inline const char *fz_tmp_root(void) {
  const char *e = getenv("LOOM_FUZZ_TMPDIR");
  if (e && *e) return e;
  struct stat sb;
  if (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
  e = getenv("TMPDIR");
  return e && *e ? e : "/tmp";
}

/* A private directory for this process ("<root>/loom_fuzz_<name>_<pid>"), made once
 * and removed at exit. */
static inline const char *fz_dir(const char *name) {
  char *dir = fz_dir_path;
  if (!dir[0]) {
    atexit(fz_cleanup);
    snprintf(dir, sizeof fz_dir_path, "%s/loom_fuzz_%s_%d", fz_tmp_root(), name, (int)getpid());
    if (mkdir(dir, 0700) != 0) {
      perror(dir);
      abort();
    }
    loom_log_set(fz_quiet, NULL, LOOM_LOG_ERROR);
  }
  return dir;
}

/* Writes data to <dir>/<file>; returns the path (static, one per file name slot). */
static inline const char *fz_write(const char *dir, const char *file, const void *data, size_t n) {
  static char paths[4][512];
  static int k;
  char *p = paths[k++ & 3];
  snprintf(p, 512, "%s/%s", dir, file);
  FILE *f = fopen(p, "wb");
  if (!f) abort();
  if (n && fwrite(data, 1, n, f) != n) abort();
  fclose(f);
  return p;
}

/* Pulls up to max elements from a dataset, freeing them (the error ends it). */
static inline void fz_drain(loom_dataset *ds, int max) {
  if (!ds) return;
  int nc = loom_dataset_num_components(ds);
  loom_tensor *v[64] = {0};
  if (nc > 64) nc = 64;
  loom_status *st = loom_status_new();
  int i = 0;
  for (; i < max; i++) {
    loom_code rc = loom_dataset_next(ds, v, st);
    for (int c = 0; c < nc; c++) {
      loom_tensor_free(v[c]);
      v[c] = NULL;
    }
    if (rc) break;
  }
  if (getenv("LOOM_FUZZ_VERBOSE")) /* seeds should get far: say how far */
    fprintf(stderr, "fuzz: %d elements, then: %s\n", i, loom_status_message(st));
  loom_status_free(st);
  loom_dataset_free(ds);
}
#endif
