/* data/idx.c - IDX files (MNIST / Fashion-MNIST), raw or gzipped
 * (zlib reads raw files transparently). A random-access source: the pixels
 * stay uint8 in memory and are converted while copying rows into a batch. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>
#include "data/data_impl.h"

typedef struct idx_ds {
  loom_dataset base;
  int64_t n, pos, pixels;
  uint8_t *images; /* n * pixels */
  uint8_t *labels; /* n, or NULL */
  int scale;
} idx_ds;

loom_idx_options loom_idx_options_default(void) {
  loom_idx_options o = {sizeof(loom_idx_options), 1, 1, 0};
  return o;
}

static loom_code idx_next_index(loom_dataset *ds, int64_t *row, loom_status *st) {
  idx_ds *x = (idx_ds *)ds;
  if (x->pos >= x->n) return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
  *row = x->pos++;
  return LOOM_OK;
}
static loom_code idx_reset(loom_dataset *ds, loom_status *st) {
  (void)st;
  ((idx_ds *)ds)->pos = 0;
  return LOOM_OK;
}
static void idx_destroy(loom_dataset *ds) {
  idx_ds *x = (idx_ds *)ds;
  loom__free(x->images);
  loom__free(x->labels);
}
static int64_t idx_rows(const loom_dataset *ds) { return ((const idx_ds *)ds)->n; }

static loom_code idx_copy_rows(loom_dataset *ds, int c, const int64_t *idx, int64_t k, loom_tensor *dst,
                               loom_status *st) {
  (void)st;
  idx_ds *x = (idx_ds *)ds;
  if (c == 0) {
    float *o = loom_tensor_data(dst);
    int64_t p = x->pixels;
    for (int64_t j = 0; j < k; j++) {
      const uint8_t *restrict s = x->images + idx[j] * p;
      float *restrict d = o + j * p;
      /* vectorized; a division (not a reciprocal multiply) so that values
       * are exactly pixel / 255.0f */
      if (x->scale)
        for (int64_t i = 0; i < p; i++) d[i] = (float)s[i] / 255.0f;
      else
        for (int64_t i = 0; i < p; i++) d[i] = (float)s[i];
    }
  } else {
    int32_t *o = loom_tensor_data(dst);
    for (int64_t j = 0; j < k; j++) o[j] = x->labels[idx[j]];
  }
  return LOOM_OK;
}

static const loom_ds_vtable idx_vt = {"idx", NULL, idx_next_index, idx_reset, idx_destroy, idx_copy_rows, idx_rows};

/* Reads exactly n bytes; DATA_LOSS naming the file when it ends early. */
static loom_code gz_read_all(gzFile f, const char *path, void *buf, size_t n, const char *what, loom_status *st) {
  uint8_t *p = buf;
  while (n) {
    unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
    int got = gzread(f, p, chunk);
    if (got < 0) {
      int e;
      const char *m = gzerror(f, &e);
      return loom_status_set(st, LOOM_DATA_LOSS, "IDX file %s: cannot read %s: %s", path, what, m ? m : "error");
    }
    if (got == 0) return loom_status_set(st, LOOM_DATA_LOSS, "IDX file %s: truncated (%s ends early)", path, what);
    p += got;
    n -= (size_t)got;
  }
  return LOOM_OK;
}

/* Opens an IDX file of unsigned bytes with `rank` dims and reads dims and
 * data (n = dims[0] limited to limit when > 0). */
static loom_code idx_read(const char *path, int rank, int64_t limit, int64_t *dims, uint8_t **data, loom_status *st) {
  *data = NULL;
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (!f)
    return loom_status_set(st, LOOM_NOT_FOUND, "cannot open IDX file %s: %s", path,
                           errno ? strerror(errno) : "out of memory");
  gzbuffer(f, 1 << 17);
  uint8_t head[4 + 4 * 3];
  loom_code rc = gz_read_all(f, path, head, 4, "the magic number", st);
  if (!rc) {
    /* magic: 0 0 type rank; type 0x08 = unsigned byte */
    if (head[0] || head[1] || head[2] != 0x08 || head[3] != rank)
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "IDX file %s: bad magic number 0x%02x%02x%02x%02x (expected 0x000008%02x: unsigned bytes, "
                           "%d dims)",
                           path, head[0], head[1], head[2], head[3], rank, rank);
  }
  if (!rc) rc = gz_read_all(f, path, head + 4, (size_t)4 * rank, "the dimensions", st);
  size_t total = 1;
  if (!rc) {
    for (int i = 0; i < rank; i++) {
      const uint8_t *p = head + 4 + 4 * i;
      dims[i] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
    }
    if (limit > 0 && dims[0] > limit) dims[0] = limit;
    /* dims are u32s from the file: their product is checked, never wrapped */
    size_t row = 1; /* one item's bytes: bounded too, even when there are no items */
    for (int i = 1; i < rank && !rc; i++)
      if (__builtin_mul_overflow(row, (size_t)dims[i], &row) || row > ((size_t)1 << 40))
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "IDX file %s: implausible dimensions (more than 2^40 bytes)",
                             path);
    if (!rc && (__builtin_mul_overflow(row, (size_t)dims[0], &total) || total > ((size_t)1 << 40)))
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "IDX file %s: implausible dimensions (more than 2^40 bytes)",
                             path);
  }
  /* The data is read in chunks into a buffer that grows with what was read:
   * a header that claims more than the file holds costs at most one chunk. */
  size_t have = 0, cap = 0;
  while (!rc && (have < total || !*data)) {
    size_t want = total ? total : 1;
    if (cap < want) {
      size_t nc = cap ? cap * 2 : ((size_t)1 << 20);
      if (nc > want) nc = want;
      uint8_t *nb = loom__realloc(*data, nc);
      if (!nb) {
        rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "IDX file %s: out of memory for %zu bytes", path, nc);
        break;
      }
      *data = nb;
      cap = nc;
    }
    size_t k = (cap < total ? cap : total) - have;
    if (k) rc = gz_read_all(f, path, *data + have, k, "the data", st);
    have += k;
  }
  gzclose(f);
  if (rc) {
    loom__free(*data);
    *data = NULL;
  }
  return rc;
}

loom_dataset *loom_dataset_idx(const char *images_path, const char *labels_path, const loom_idx_options *opt,
                               loom_status *st) {
  loom_idx_options o = loom_idx_options_default();
  if (LOOM__OPTS_TAKE(&o, opt, "dataset_idx", loom_idx_options, st)) return NULL;
  if (!images_path) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_idx: images_path is NULL");
    return NULL;
  }
  int64_t idims[3], ldims[1];
  uint8_t *images = NULL, *labels = NULL;
  if (idx_read(images_path, 3, o.limit, idims, &images, st)) return NULL;
  if (labels_path) {
    if (idx_read(labels_path, 1, o.limit, ldims, &labels, st)) {
      loom__free(images);
      return NULL;
    }
    if (ldims[0] != idims[0]) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "IDX files %s and %s: %lld images but %lld labels", images_path,
                      labels_path, (long long)idims[0], (long long)ldims[0]);
      loom__free(images);
      loom__free(labels);
      return NULL;
    }
  }
  idx_ds *x = (idx_ds *)loom__ds_new(sizeof(idx_ds), &idx_vt, labels ? 2 : 1, st);
  if (!x) {
    loom__free(images);
    loom__free(labels);
    return NULL;
  }
  loom_dataset *ds = &x->base;
  ds->ra = ds;
  x->n = idims[0];
  x->pixels = idims[1] * idims[2];
  x->images = images;
  x->labels = labels;
  x->scale = o.scale != 0;
  int64_t flat[1] = {x->pixels};
  if (loom__ds_set_comp(ds, 0, "image", LOOM_F32, o.flatten ? 1 : 2, o.flatten ? flat : idims + 1, st) ||
      (labels && loom__ds_set_comp(ds, 1, "label", LOOM_I32, 0, NULL, st))) {
    loom_dataset_free(ds);
    return NULL;
  }
  if (labels) ds->label = 1;
  return ds;
}
