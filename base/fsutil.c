/* base/fsutil.c - see fsutil.h. */
#include "base/fsutil.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "base/base.h"

loom_code loom__errno_code(int e) {
  switch (e) {
  case ENOENT:
  case ENOTDIR: return LOOM_NOT_FOUND;
  case EEXIST:
  case ENOTEMPTY: return LOOM_ALREADY_EXISTS;
  case EACCES:
  case EPERM:
  case EROFS: return LOOM_PERMISSION_DENIED;
  case ENOSPC:
  case EDQUOT:
  case ENOMEM: return LOOM_RESOURCE_EXHAUSTED;
  default: return LOOM_UNKNOWN;
  }
}

loom_code loom__mkdir_p(const char *path, loom_status *st) {
  char *p = loom__strdup(path);
  if (!p) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "mkdir %s: out of memory", path);
  size_t n = strlen(p);
  loom_code rc = LOOM_OK;
  for (size_t i = 1; i <= n && !rc; i++) {
    if (p[i] != '/' && p[i] != 0) continue;
    char c = p[i];
    p[i] = 0;
    struct stat sb;
    if (mkdir(p, 0777) && errno != EEXIST) {
      int e = errno;
      rc = loom_status_set(st, loom__errno_code(e), "cannot create directory %s: %s", p, strerror(e));
    } else if (stat(p, &sb) || !S_ISDIR(sb.st_mode)) {
      rc = loom_status_set(st, LOOM_FAILED_PRECONDITION, "cannot create directory %s: a file is in the way", p);
    }
    p[i] = c;
  }
  loom__free(p);
  return rc;
}

double loom__mono_secs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
