/* tests/gpu/parity_coverage.c - fails when a registered CUDA kernel (op,
 * dtype) has no parity case: reads the (op, dtype) slots the
 * tests/gpu/test_parity*.c programs ran (the *.txt files in LOOM_PARITY_COVERAGE_DIR,
 * written by parity_report; see tests/gpu/parity_coverage.h) and walks the
 * op table's kernels[LOOM_DEVICE_CUDA][dtype] entries. Run by `make
 * test-cuemu` and `make test-gpu` after the parity programs; with no record
 * (no device: the programs skipped) it skips. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/engine_impl.h"
#include "ops/op_list.h"

static unsigned char covered[LOOM_OP_COUNT][LOOM_DTYPE_COUNT];

static int op_by_name(const char *name) {
  for (int op = 0; op < LOOM_OP_COUNT; op++)
    if (strcmp(loom__op_def(op)->name, name) == 0) return op;
  return -1;
}

int main(void) {
  const char *dir = getenv("LOOM_PARITY_COVERAGE_DIR");
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) {
    printf("parity_coverage: no LOOM_PARITY_COVERAGE_DIR records, skipping\n");
    return 0;
  }
  int files = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 4, ".txt") != 0) continue;
    char path[4096], name[256];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    files++;
    int dt;
    while (fscanf(f, "%255s %d", name, &dt) == 2) {
      int op = op_by_name(name);
      if (op >= 0 && dt >= 0 && dt < LOOM_DTYPE_COUNT) covered[op][dt] = 1;
    }
    fclose(f);
  }
  closedir(d);
  if (!files) {
    printf("parity_coverage: no parity program recorded its kernels (no device?), skipping\n");
    return 0;
  }
  int total = 0, missing = 0;
  for (int op = 0; op < LOOM_OP_COUNT; op++) {
    const loom_op_def *def = loom__op_def(op);
    for (int dt = 0; dt < LOOM_DTYPE_COUNT; dt++) {
      if (!def->kernels[LOOM_DEVICE_CUDA][dt]) continue;
      total++;
      if (covered[op][dt]) continue;
      missing++;
      printf("FAIL CUDA kernel %s/%s has no parity case in tests/gpu/test_parity*.c\n", def->name,
             dt ? loom_dtype_name((loom_dtype)dt) : "any");
    }
  }
  printf("parity_coverage: %d CUDA kernels registered, %d with a parity case, %d without\n", total, total - missing,
         missing);
  return missing ? 1 : 0;
}
