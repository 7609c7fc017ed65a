/* IDX images (rank 3) and labels (rank 1), raw or gzipped. Input: byte 0
 * flags (bit 0: gzip the images, bit 1: an (empty) labels file, bit 2:
 * limit 2, bit 3: not flattened, bit 4: batch by 2); the rest is the images
 * file, or images "\xff\xfeLBL" labels. */
#include <zlib.h>
#include "fuzz_util.h"

static const char *write_maybe_gz(const char *dir, const char *file, const uint8_t *p, size_t n, int gz) {
  if (!gz) return fz_write(dir, file, p, n);
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  gzFile f = gzopen(path, "wb1");
  if (!f) abort();
  if (n) gzwrite(f, p, (unsigned)n);
  gzclose(f);
  return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *dir = fz_dir("idx");
  int flags = data[0];
  const uint8_t *body = data + 1;
  size_t n = size - 1, ni = n;
  const uint8_t *lab = NULL;
  size_t nl = 0;
  for (size_t i = 0; i + 5 <= n; i++)
    if (!memcmp(body + i, "\xff\xfeLBL", 5)) {
      ni = i;
      lab = body + i + 5;
      nl = n - i - 5;
      break;
    }
  const char *ip = write_maybe_gz(dir, (flags & 1) ? "images.gz" : "images", body, ni, flags & 1);
  char ipath[512];
  snprintf(ipath, sizeof ipath, "%s", ip);
  const char *lp = NULL;
  if ((flags & 2) || lab) lp = fz_write(dir, "labels", lab ? lab : (const uint8_t *)"", nl);
  loom_idx_options o = loom_idx_options_default();
  if (flags & 4) o.limit = 2;
  if (flags & 8) o.flatten = 0;
  loom_status *st = loom_status_new();
  loom_dataset *ds = loom_dataset_idx(ipath, lp, &o, st);
  if (ds && (flags & 16)) ds = loom_dataset_batch(ds, 2, 0, st);
  if (!ds && getenv("LOOM_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: no dataset: %s\n", loom_status_message(st));
  fz_drain(ds, 16);
  loom_status_free(st);
  return 0;
}
