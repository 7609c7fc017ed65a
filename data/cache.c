/* data/cache.c - Dataset.cache(filename): the first complete pass copies
 * the input's elements (to memory, or to a TFRecord-framed file), later
 * passes replay the copy. Contract: loom_dataset_cache in loom_data.h.
 *
 * File layout (each part one TFRecord record, base/record_io.h):
 *   header  'H' "LMCACHE1" u32 ncomp, per component: u8 dtype, u32 name length, name
 *   element 'E' per component: u8 dtype, u8 ndim, i64 dims[ndim], payload
 *           (numbers: the raw little-endian bytes; strings: u64 length + bytes each)
 *   trailer 'T' "LMCACHE1" i64 element count
 * The file is written as "<filename>.partial" and renamed when complete, so
 * a file at filename always had its trailer written. The memory copy holds
 * the same element records, each behind its u64 length, in one buffer. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/record_io.h"
#include "data/data_impl.h"

static const char CACHE_MAGIC[8] = {'L', 'M', 'C', 'A', 'C', 'H', 'E', '1'};

enum { PASS_NONE = 0, PASS_FILL, PASS_REPLAY };

typedef struct cache_ds {
  loom_dataset base;
  loom_dataset *in;
  int in_used;      /* the input was read since its last reset */
  int pass;         /* what the current pass does (PASS_NONE: not started) */
  int64_t count;    /* elements copied (fill) or replayed (replay) in this pass */
  /* memory: the elements' records, each a u64 length and the bytes */
  int complete;     /* the copy holds a whole pass */
  uint8_t *mem;
  size_t mlen, mcap, moff; /* bytes held, allocated, replayed */
  /* file (path NULL: memory) */
  char *path, *partial, *lock;
  int locked;
  loom_tfrecord_out out;
  int out_open;
  loom_tfrecord_reader rd;
  int rd_open;
  uint8_t *buf;
  size_t bcap, blen;
} cache_ds;

/* ---- serialization ---- */
static int buf_put(cache_ds *c, const void *p, size_t n) {
  if (c->blen + n > c->bcap) {
    size_t cap = c->bcap ? c->bcap : 4096;
    while (cap < c->blen + n) cap *= 2;
    uint8_t *b = loom__realloc(c->buf, cap);
    if (!b) return -1;
    c->buf = b;
    c->bcap = cap;
  }
  if (n) memcpy(c->buf + c->blen, p, n);
  c->blen += n;
  return 0;
}

/* The record in buf: to the file, or appended to the memory copy. */
static loom_code write_record(cache_ds *c, loom_status *st) {
  if (c->path) return loom__tfrecord_out_write(&c->out, c->buf, c->blen, st);
  uint64_t len = c->blen;
  if (c->mlen + 8 + c->blen > c->mcap) {
    size_t cap = c->mcap ? c->mcap : 1 << 16;
    while (cap < c->mlen + 8 + c->blen) cap *= 2;
    uint8_t *m = loom__realloc(c->mem, cap);
    if (!m)
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cache: out of memory after %lld elements (%zu bytes)",
                             (long long)c->count, c->mlen);
    c->mem = m;
    c->mcap = cap;
  }
  memcpy(c->mem + c->mlen, &len, 8);
  memcpy(c->mem + c->mlen + 8, c->buf, c->blen);
  c->mlen += 8 + c->blen;
  return LOOM_OK;
}

static void drop_memory(cache_ds *c) {
  loom__free(c->mem);
  c->mem = NULL;
  c->mlen = c->mcap = c->moff = 0;
  c->complete = 0;
}

static loom_code write_header(cache_ds *c, loom_status *st) {
  c->blen = 0;
  uint32_t nc = (uint32_t)c->base.ncomp;
  int bad = buf_put(c, "H", 1) || buf_put(c, CACHE_MAGIC, 8) || buf_put(c, &nc, 4);
  for (int k = 0; k < c->base.ncomp && !bad; k++) {
    uint8_t dt = (uint8_t)c->base.comp[k].dtype;
    uint32_t len = (uint32_t)strlen(c->base.comp[k].name);
    bad = buf_put(c, &dt, 1) || buf_put(c, &len, 4) || buf_put(c, c->base.comp[k].name, len);
  }
  if (bad) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cache %s: out of memory", c->path);
  return write_record(c, st);
}

static loom_code write_element(cache_ds *c, loom_tensor *const *values, loom_status *st) {
  c->blen = 0;
  int bad = buf_put(c, "E", 1);
  for (int k = 0; k < c->base.ncomp && !bad; k++) {
    const loom_tensor *t = values[k];
    uint8_t dt = (uint8_t)loom_tensor_dtype(t), nd = (uint8_t)loom_tensor_ndim(t);
    bad = buf_put(c, &dt, 1) || buf_put(c, &nd, 1) || buf_put(c, loom_tensor_dims(t), (size_t)nd * 8);
    if (dt != LOOM_STRING) {
      bad = bad || buf_put(c, loom_tensor_data_const(t), loom_tensor_nbytes(t));
      continue;
    }
    for (int64_t i = 0; i < loom_tensor_numel(t) && !bad; i++) {
      size_t len = 0;
      const char *s = loom_tensor_get_string(t, i, &len);
      uint64_t l = s ? len : 0;
      bad = buf_put(c, &l, 8) || buf_put(c, s, (size_t)l);
    }
  }
  if (bad) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cache %s: out of memory", c->path ? c->path : "");
  return write_record(c, st);
}

/* A reader over one record. */
typedef struct rd_span {
  const uint8_t *p;
  size_t n, at;
} rd_span;
static int take(rd_span *r, void *dst, size_t n) {
  if (r->n - r->at < n) return -1;
  if (n) memcpy(dst, r->p + r->at, n);
  r->at += n;
  return 0;
}

static loom_code corrupt(cache_ds *c, const char *what, loom_status *st) {
  return loom_status_set(st, LOOM_DATA_LOSS,
                         "cache file %s is corrupt (%s); delete it to rebuild the cache from the input",
                         c->path ? c->path : "(memory)", what);
}

static loom_code read_header(cache_ds *c, loom_status *st) {
  const uint8_t *d;
  size_t n;
  loom_code rc = loom__tfrecord_next(&c->rd, &d, &n, st);
  if (rc == LOOM_OUT_OF_RANGE) return corrupt(c, "empty file", st);
  if (rc) return rc;
  rd_span r = {d, n, 0};
  char tag, magic[8];
  uint32_t nc;
  if (take(&r, &tag, 1) || tag != 'H' || take(&r, magic, 8) || memcmp(magic, CACHE_MAGIC, 8) || take(&r, &nc, 4))
    return corrupt(c, "no loom cache header", st);
  int same = nc == (uint32_t)c->base.ncomp;
  for (uint32_t k = 0; k < nc; k++) {
    uint8_t dt;
    uint32_t len;
    if (take(&r, &dt, 1) || take(&r, &len, 4) || r.n - r.at < len) return corrupt(c, "bad header", st);
    const char *name = (const char *)r.p + r.at;
    r.at += len;
    if (same && (dt != (uint8_t)c->base.comp[k].dtype || strlen(c->base.comp[k].name) != len ||
                 memcmp(c->base.comp[k].name, name, len)))
      same = 0;
  }
  if (!same)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "cache file %s was written for other components (names or dtypes) than this dataset's; "
                           "use another filename or delete it",
                           c->path);
  return LOOM_OK;
}

/* The next record (of the file, or of the memory copy) into values;
 * OUT_OF_RANGE after the file's trailer (when it matches the elements read)
 * or at the end of the memory copy. */
static loom_code read_element(cache_ds *c, loom_tensor **values, loom_status *st) {
  const uint8_t *d;
  size_t n;
  loom_code rc;
  if (!c->path) {
    if (c->moff >= c->mlen) return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
    uint64_t len;
    memcpy(&len, c->mem + c->moff, 8);
    d = c->mem + c->moff + 8;
    n = (size_t)len;
    c->moff += 8 + n;
  } else {
    rc = loom__tfrecord_next(&c->rd, &d, &n, st);
    if (rc == LOOM_OUT_OF_RANGE) return corrupt(c, "it ends without its trailer", st);
    if (rc) return rc;
  }
  rd_span r = {d, n, 0};
  char tag;
  if (take(&r, &tag, 1)) return corrupt(c, "empty record", st);
  if (tag == 'T') {
    char magic[8];
    int64_t cnt;
    if (take(&r, magic, 8) || memcmp(magic, CACHE_MAGIC, 8) || take(&r, &cnt, 8) || cnt != c->count)
      return corrupt(c, "a trailer that does not match its elements", st);
    return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
  }
  if (tag != 'E') return corrupt(c, "unknown record", st);
  for (int k = 0; k < c->base.ncomp; k++) {
    const loom_ds_comp *kc = &c->base.comp[k];
    uint8_t dt, nd;
    int64_t dims[LOOM_MAX_DIMS];
    if (take(&r, &dt, 1) || take(&r, &nd, 1) || dt != (uint8_t)kc->dtype || nd > LOOM_MAX_DIMS ||
        take(&r, dims, (size_t)nd * 8))
      return corrupt(c, "bad element", st);
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) {
      if (dims[i] < 0 || (i < kc->ndim && nd == kc->ndim && kc->dims[i] >= 0 && kc->dims[i] != dims[i]))
        return corrupt(c, "bad element shape", st);
      numel *= dims[i];
    }
    if (nd != kc->ndim) return corrupt(c, "bad element rank", st);
    if ((rc = loom__ds_ensure(&values[k], kc->dtype, nd, dims, st))) return rc;
    if (kc->dtype != LOOM_STRING) {
      size_t nb = (size_t)numel * loom_dtype_size(kc->dtype);
      if (take(&r, loom_tensor_data(values[k]), nb)) return corrupt(c, "short element", st);
      continue;
    }
    for (int64_t i = 0; i < numel; i++) {
      uint64_t len;
      if (take(&r, &len, 8) || r.n - r.at < len) return corrupt(c, "short string", st);
      if ((rc = loom_tensor_set_string(values[k], i, (const char *)r.p + r.at, (size_t)len, st))) return rc;
      r.at += (size_t)len;
    }
  }
  if (r.at != r.n) return corrupt(c, "trailing bytes in an element", st);
  c->count++;
  return LOOM_OK;
}

/* ---- the lock file ---- */
static loom_code take_lock(cache_ds *c, loom_status *st) {
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = open(c->lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      char pid[32];
      int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
      int ok = write(fd, pid, (size_t)len) == len;
      close(fd);
      if (!ok) {
        unlink(c->lock);
        return loom_status_set(st, LOOM_INTERNAL, "cache: cannot write the lock file %s", c->lock);
      }
      c->locked = 1;
      return LOOM_OK;
    }
    if (errno != EEXIST)
      return loom_status_set(st, LOOM_NOT_FOUND, "cache: cannot create the lock file %s: %s", c->lock,
                             strerror(errno));
    /* held: by a live process (another writer), or left by a dead one */
    long owner = 0;
    FILE *f = fopen(c->lock, "r");
    if (f) {
      if (fscanf(f, "%ld", &owner) != 1) owner = 0;
      fclose(f);
    }
    if (owner > 0 && (kill((pid_t)owner, 0) == 0 || errno == EPERM))
      return loom_status_set(st, LOOM_ALREADY_EXISTS,
                             "cache: another iterator is writing the cache %s (lock file %s held by process %ld); "
                             "wait for it to finish, or delete the lock file if no such process uses it",
                             c->path, c->lock, owner);
    if (attempt == 0 && owner > 0) {
      unlink(c->lock); /* its writer is gone: take it over */
      continue;
    }
    return loom_status_set(st, LOOM_ALREADY_EXISTS,
                           "cache: the lock file %s exists (unreadable owner); delete it if no process writes %s",
                           c->lock, c->path);
  }
  return loom_status_set(st, LOOM_ALREADY_EXISTS, "cache: cannot take the lock file %s", c->lock);
}

/* Ends a pass that did not complete: what it copied is discarded. */
static void abandon(cache_ds *c) {
  if (c->out_open) {
    loom__tfrecord_out_close(&c->out, NULL);
    c->out_open = 0;
    unlink(c->partial);
  }
  if (c->locked) {
    unlink(c->lock);
    c->locked = 0;
  }
  if (c->rd_open) {
    loom__tfrecord_close(&c->rd);
    c->rd_open = 0;
  }
  if (!c->path && !c->complete) drop_memory(c);
  c->pass = PASS_NONE;
  c->count = 0;
  c->moff = 0;
}

/* ---- the pass ---- */
static loom_code start_pass(cache_ds *c, loom_status *st) {
  c->count = 0;
  if (!c->path) {
    c->pass = c->complete ? PASS_REPLAY : PASS_FILL;
  } else if (access(c->path, F_OK) == 0) {
    loom_code rc = loom__tfrecord_open(&c->rd, c->path, st);
    if (rc) return rc;
    c->rd_open = 1;
    if ((rc = read_header(c, st))) return rc;
    c->pass = PASS_REPLAY;
  } else {
    loom_code rc = take_lock(c, st);
    if (rc) return rc;
    if ((rc = loom__tfrecord_out_open(&c->out, c->partial, LOOM__TFR_NONE, st))) return rc;
    c->out_open = 1;
    if ((rc = write_header(c, st))) return rc;
    c->pass = PASS_FILL;
  }
  if (c->pass == PASS_FILL && c->in_used) {
    loom_code rc = loom_dataset_reset(c->in, st);
    if (rc) return rc;
    c->in_used = 0;
  }
  return LOOM_OK;
}

static loom_code finish_fill(cache_ds *c, loom_status *st) {
  if (!c->path) {
    c->complete = 1;
    return LOOM_OK;
  }
  c->blen = 0;
  if (buf_put(c, "T", 1) || buf_put(c, CACHE_MAGIC, 8) || buf_put(c, &c->count, 8))
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cache %s: out of memory", c->path);
  loom_code rc = write_record(c, st);
  c->out_open = 0;
  loom_code rc2 = loom__tfrecord_out_close(&c->out, rc ? NULL : st);
  if (!rc) rc = rc2;
  if (!rc && rename(c->partial, c->path) != 0)
    rc = loom_status_set(st, LOOM_INTERNAL, "cache: cannot rename %s to %s: %s", c->partial, c->path,
                         strerror(errno));
  if (rc) unlink(c->partial);
  unlink(c->lock);
  c->locked = 0;
  return rc;
}

static loom_code cache_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  cache_ds *c = (cache_ds *)ds;
  loom_code rc;
  if (c->pass == PASS_NONE && (rc = start_pass(c, st))) {
    abandon(c);
    return rc;
  }
  if (c->pass == PASS_REPLAY) return read_element(c, values, st);
  c->in_used = 1;
  rc = loom_dataset_next(c->in, values, st);
  if (rc == LOOM_OUT_OF_RANGE) {
    loom_code f = finish_fill(c, st);
    c->pass = PASS_REPLAY;
    c->moff = c->mlen; /* until reset: the end */
    if (f) return f;
    return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
  }
  if (rc) return rc;
  rc = write_element(c, values, st);
  if (!rc) c->count++;
  return rc;
}

static loom_code cache_reset(loom_dataset *ds, loom_status *st) {
  (void)st;
  cache_ds *c = (cache_ds *)ds;
  abandon(c);
  return LOOM_OK;
}

static void cache_destroy(loom_dataset *ds) {
  cache_ds *c = (cache_ds *)ds;
  abandon(c);
  drop_memory(c);
  loom__free(c->buf);
  loom__free(c->path);
  loom__free(c->partial);
  loom__free(c->lock);
  loom_dataset_free(c->in);
}

static const loom_ds_vtable cache_vt = {"cache", cache_next, NULL, cache_reset, cache_destroy, NULL, NULL};

static char *path_with(const char *path, const char *suffix) {
  size_t n = strlen(path), m = strlen(suffix);
  char *s = loom__malloc(n + m + 1);
  if (s) {
    memcpy(s, path, n);
    memcpy(s + n, suffix, m + 1);
  }
  return s;
}

loom_dataset *loom_dataset_cache(loom_dataset *in, const char *filename, loom_status *st) {
  cache_ds *c = (cache_ds *)loom__ds_transform_new(in, sizeof(cache_ds), &cache_vt, st);
  if (!c) return NULL;
  c->in = in;
  if (filename && filename[0]) {
    c->path = loom__strdup(filename);
    c->partial = path_with(filename, ".partial");
    c->lock = path_with(filename, ".lockfile");
    if (!c->path || !c->partial || !c->lock) {
      loom_dataset_free(&c->base);
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cache: out of memory");
      return NULL;
    }
  }
  return &c->base;
}
