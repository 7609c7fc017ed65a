/* fuzz/driver.c - a standalone main for the fuzz targets: runs
 * LLVMFuzzerTestOneInput once on every file named (directories: every file
 * in them). `make fuzz-replay` (part of `make test`) links each target with
 * it against the library being tested (gcc, or the sanitizer build under
 * `make asan`): the committed corpora are replayed without clang or
 * libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
      }
      buf = nb;
    }
  }
  fclose(f);
  if (!buf) return -1;
  /* a copy of exactly n bytes: reads past the input are caught under ASan */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) return -1;
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int compare(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int runs = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb)) {
      perror(argv[i]);
      bad++;
      continue;
    }
    if (!S_ISDIR(sb.st_mode)) {
      if (run_file(argv[i])) bad++;
      else runs++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) {
      bad++;
      continue;
    }
    char **names = NULL;
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') {
        names = realloc(names, sizeof *names * (size_t)(nn + 1));
        names[nn] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
        sprintf(names[nn++], "%s/%s", argv[i], e->d_name);
      }
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, compare);
    for (int k = 0; k < nn; k++) {
      if (run_file(names[k])) bad++;
      else runs++;
      free(names[k]);
    }
    free(names);
  }
  printf("%d inputs run%s\n", runs, bad ? ", some unreadable" : "");
  return bad ? 1 : 0;
}
