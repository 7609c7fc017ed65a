/* Checkpoints: loom's checkpoint file format, tf.train.Saver semantics
 * (atomic saves, the "checkpoint" state file, keep_max garbage collection,
 * latest_checkpoint) and reading checkpoints without a model.
 *
 * ---------------------------------------------------------------------
 * LOOM CHECKPOINT FORMAT, version 1. One file per checkpoint; every
 * integer is little-endian; there is no padding.
 *
 *   header, 24 bytes
 *     char[8]  magic "LOOMCKPT"
 *     u32      version = 1
 *     u32      flags = 0
 *     u64      N, the number of tensors
 *   N records, each
 *     u32      L, name length, 1 <= L <= 65535
 *     u8[L]    name (the variable's full name, UTF-8, no NUL); unique
 *     u32      dtype (loom_dtype: 1 float32, 2 float64, 3 int32, 4 int64,
 *              5 uint8, 6 bool, 7 string)
 *     u32      R, rank, 0 <= R <= 8
 *     i64[R]   dims, each >= 0
 *     u64      B, data length in bytes = prod(dims) * dtype size; for
 *              strings 8 * prod(dims) + the total length of the strings
 *     u32      meta CRC: masked CRC32C of the bytes from L through B
 *     u8[B]    data, row-major, elements little-endian; strings: the
 *              n = prod(dims) lengths as u64 first, then the n strings'
 *              bytes back to back (no terminators), in element order
 *     u32      data CRC: masked CRC32C of the B data bytes
 *   trailer, 16 bytes
 *     char[8]  "LOOMEND" followed by one NUL byte
 *     u32      file CRC: masked CRC32C of every byte before the trailer
 *     u32      reserved = 0
 *
 * String tensors (dtype 7) were added without a version bump: files without
 * them are unchanged, and a reader that predates them rejects dtype 7 as an
 * invalid field (DATA_LOSS) rather than misreading it. A string record whose
 * lengths do not add up to B - 8n is DATA_LOSS naming the tensor.
 *
 * CRC32C is Castagnoli's CRC; "masked" is TFRecord's masking
 * ((crc >> 15) | (crc << 17)) + 0xa282ead8 (base/crc32c.c). The records
 * must end exactly where the trailer begins. Readers check every length
 * against the file size before using it, so a truncated or damaged file is
 * reported as DATA_LOSS, never read out of bounds; restore verifies the
 * file CRC and every record CRC before writing any variable.
 *
 * Saving writes "<path>.tmp-<pid>", fsyncs it, renames it over <path> and
 * fsyncs the directory, so a crash mid-save leaves the previous checkpoint
 * intact. The directory's "checkpoint" file is TF's text CheckpointState
 *   model_checkpoint_path: "model.ckpt-200"
 *   all_model_checkpoint_paths: "model.ckpt-100"
 *   all_model_checkpoint_paths: "model.ckpt-200"
 * (paths relative to the directory), replaced atomically the same way.
 * --------------------------------------------------------------------- */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine/variables.h"
#include "engine/backend.h"
#include "base/crc32c.h"
#include "base/fsutil.h"

#define CKPT_MAGIC "LOOMCKPT"
#define CKPT_END "LOOMEND"
#define CKPT_VERSION 1u
#define CKPT_HEADER 24
#define CKPT_TRAILER 16
#define CKPT_MAX_NAME 65535u
/* smallest record: L=1, 1 name byte, dtype, rank 0, B, 2 CRCs */
#define CKPT_MIN_RECORD (4 + 1 + 4 + 4 + 8 + 4 + 4)

/* ---- little-endian helpers ---- */
static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static int host_le(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}


/* ======================================================================
 * Writer
 * ====================================================================== */
typedef struct ckpt_item {
  const char *name;
  loom_dtype dtype;
  int ndim;
  const int64_t *dims;
  const void *data;
  uint64_t nbytes;
} ckpt_item;

typedef struct writer {
  FILE *f;
  uint32_t crc; /* running CRC of everything written */
  int err;
} writer;

static void w_bytes(writer *w, const void *p, size_t n) {
  if (w->err || !n) return;
  w->crc = loom__crc32c_extend(w->crc, p, n);
  if (fwrite(p, 1, n, w->f) != n) w->err = errno ? errno : EIO;
}

/* Writes data as little-endian elements of size esz (a copy in chunks on
 * big-endian hosts); returns the masked CRC of the bytes as written. */
static uint32_t w_data(writer *w, const void *data, uint64_t nbytes, size_t esz) {
  if (host_le() || esz <= 1) {
    const uint8_t *p = data;
    uint64_t left = nbytes;
    uint32_t c = 0;
    while (left && !w->err) { /* chunks keep the two CRC passes cache-warm */
      size_t k = left > (1u << 20) ? (1u << 20) : (size_t)left;
      c = loom__crc32c_extend(c, p, k);
      w_bytes(w, p, k);
      p += k;
      left -= k;
    }
    return loom__crc32c_mask(c);
  }
  uint8_t buf[4096];
  const uint8_t *p = data;
  uint32_t c = 0;
  for (uint64_t off = 0; off < nbytes && !w->err;) {
    size_t k = nbytes - off > sizeof buf ? sizeof buf : (size_t)(nbytes - off);
    k -= k % esz;
    for (size_t i = 0; i < k; i += esz)
      for (size_t b = 0; b < esz; b++) buf[i + b] = p[off + i + esz - 1 - b];
    c = loom__crc32c_extend(c, buf, k);
    w_bytes(w, buf, k);
    off += k;
  }
  return loom__crc32c_mask(c);
}

/* Writes a string tensor's data (u64 lengths, then the bytes); returns the
 * masked CRC of the bytes written. */
static uint32_t w_strings(writer *w, const loom_tstring *s, int64_t n) {
  uint32_t c = 0;
  uint8_t buf[4096];
  size_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    put_u64(buf + k, (uint64_t)s[i].len);
    k += 8;
    if (k == sizeof buf || i == n - 1) {
      c = loom__crc32c_extend(c, buf, k);
      w_bytes(w, buf, k);
      k = 0;
    }
  }
  for (int64_t i = 0; i < n && !w->err; i++)
    if (s[i].len) {
      c = loom__crc32c_extend(c, s[i].ptr, s[i].len);
      w_bytes(w, s[i].ptr, s[i].len);
    }
  return loom__crc32c_mask(c);
}

/* B of a string tensor: 8 per element plus the bytes. */
static uint64_t strings_nbytes(const loom_tstring *s, int64_t n) {
  uint64_t b = 8 * (uint64_t)n;
  for (int64_t i = 0; i < n; i++) b += s[i].len;
  return b;
}

static void fsync_dir_of(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == dir) slash[1] = 0;
  else if (slash) *slash = 0;
  else snprintf(dir, sizeof dir, ".");
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
}

/* Writes bytes to path atomically (tmp file, fsync, rename, fsync dir). */
typedef loom_code (*body_fn)(writer *w, void *arg, loom_status *st);
static loom_code atomic_write(const char *path, body_fn body, void *arg, loom_status *st) {
  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= (int)sizeof tmp)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "path too long: %s", path);
  writer w = {NULL, 0, 0};
  w.f = fopen(tmp, "wb");
  if (!w.f) {
    int e = errno;
    return loom_status_set(st, loom__errno_code(e), "cannot create %s: %s", tmp, strerror(e));
  }
  setvbuf(w.f, NULL, _IOFBF, 1 << 20);
  errno = 0;
  loom_code rc = body(&w, arg, st);
  if (!rc && !w.err && fflush(w.f)) w.err = errno ? errno : EIO;
  if (!rc && !w.err && fsync(fileno(w.f))) w.err = errno ? errno : EIO;
  if (fclose(w.f) && !w.err) w.err = errno ? errno : EIO;
  if (!rc && w.err) rc = loom_status_set(st, loom__errno_code(w.err), "writing %s: %s", tmp, strerror(w.err));
  if (!rc && rename(tmp, path)) {
    int e = errno;
    rc = loom_status_set(st, loom__errno_code(e), "renaming %s to %s: %s", tmp, path, strerror(e));
  }
  if (rc) {
    unlink(tmp);
    return rc;
  }
  fsync_dir_of(path);
  return LOOM_OK;
}

typedef struct ckpt_body {
  int n;
  const ckpt_item *items;
} ckpt_body;

static loom_code ckpt_body_fn(writer *w, void *arg, loom_status *st) {
  const ckpt_body *b = arg;
  uint8_t hdr[CKPT_HEADER];
  memcpy(hdr, CKPT_MAGIC, 8);
  put_u32(hdr + 8, CKPT_VERSION);
  put_u32(hdr + 12, 0);
  put_u64(hdr + 16, (uint64_t)b->n);
  w_bytes(w, hdr, sizeof hdr);
  for (int i = 0; i < b->n && !w->err; i++) {
    const ckpt_item *it = &b->items[i];
    size_t L = strlen(it->name);
    uint8_t meta[4 + CKPT_MAX_NAME + 8 + 8 * LOOM_MAX_DIMS + 8 + 4];
    size_t k = 0;
    put_u32(meta, (uint32_t)L);
    k += 4;
    memcpy(meta + k, it->name, L);
    k += L;
    put_u32(meta + k, (uint32_t)it->dtype);
    put_u32(meta + k + 4, (uint32_t)it->ndim);
    k += 8;
    for (int d = 0; d < it->ndim; d++, k += 8) put_u64(meta + k, (uint64_t)it->dims[d]);
    put_u64(meta + k, it->nbytes);
    k += 8;
    put_u32(meta + k, loom__crc32c_masked(meta, k));
    k += 4;
    w_bytes(w, meta, k);
    uint8_t dc[4];
    if (it->dtype == LOOM_STRING) {
      int64_t n = 1;
      for (int d = 0; d < it->ndim; d++) n *= it->dims[d];
      put_u32(dc, w_strings(w, it->data, n));
    } else {
      put_u32(dc, w_data(w, it->data, it->nbytes, loom_dtype_size(it->dtype)));
    }
    w_bytes(w, dc, 4);
  }
  uint8_t tr[CKPT_TRAILER];
  memcpy(tr, CKPT_END, 8); /* includes the NUL */
  put_u32(tr + 8, loom__crc32c_mask(w->crc));
  put_u32(tr + 12, 0);
  w_bytes(w, tr, sizeof tr);
  (void)st;
  return LOOM_OK;
}

static loom_code check_items(int n, const ckpt_item *items, loom_status *st) {
  for (int i = 0; i < n; i++) {
    const ckpt_item *it = &items[i];
    size_t L = it->name ? strlen(it->name) : 0;
    if (L < 1 || L > CKPT_MAX_NAME)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint: tensor %d has an invalid name", i);
    if (it->dtype <= 0 || it->dtype >= LOOM_DTYPE_COUNT)
      return loom_status_set(st, LOOM_UNIMPLEMENTED, "checkpoint: tensor %s has unsupported dtype %s", it->name,
                             loom_dtype_name(it->dtype));
    if (it->ndim < 0 || it->ndim > LOOM_MAX_DIMS)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint: tensor %s has rank %d", it->name, it->ndim);
    for (int j = 0; j < i; j++)
      if (!strcmp(items[j].name, it->name))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint: tensor name %s appears twice", it->name);
  }
  return LOOM_OK;
}

static loom_code write_items(const char *path, int n, const ckpt_item *items, loom_status *st) {
  loom_code rc = check_items(n, items, st);
  if (rc) return rc;
  ckpt_body b = {n, items};
  return atomic_write(path, ckpt_body_fn, &b, st);
}

loom_code loom_checkpoint_write(const char *path, int n, const char *const *names, const loom_tensor *const *tensors,
                                loom_status *st) {
  if (!path || n < 0 || (n && (!names || !tensors)))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint_write: invalid arguments");
  ckpt_item *items = loom__calloc((size_t)(n ? n : 1), sizeof *items);
  if (!items) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint_write: out of memory");
  loom_code rc = LOOM_OK;
  for (int i = 0; i < n && !rc; i++) {
    if (!tensors[i] || !names[i]) {
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint_write: tensor %d is NULL", i);
      break;
    }
    items[i].name = names[i];
    items[i].dtype = tensors[i]->dtype;
    items[i].ndim = tensors[i]->ndim;
    items[i].dims = tensors[i]->dims;
    items[i].data = tensors[i]->data;
    items[i].nbytes = tensors[i]->dtype == LOOM_STRING ? strings_nbytes(tensors[i]->data, tensors[i]->numel)
                                                       : tensors[i]->nbytes;
  }
  if (!rc) rc = write_items(path, n, items, st);
  loom__free(items);
  if (!rc) loom_status_clear(st);
  return rc;
}

/* ======================================================================
 * Reader: pread-based (no mmap: a file shrinking under us cannot fault).
 * ====================================================================== */
typedef struct ckpt_entry {
  char *name;
  loom_dtype dtype;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  uint64_t nbytes;
  uint64_t data_off;
  uint32_t data_crc;
} ckpt_entry;

typedef struct reader {
  int fd;
  uint64_t size;
  const char *path;
  ckpt_entry *e;
  uint64_t n;
  /* read-ahead window for the record headers */
  uint8_t *buf;
  uint64_t buf_off;
  size_t buf_len;
} reader;

#define RBUF (1u << 16)

static loom_code dataloss(loom_status *st, const reader *r, const char *what) {
  return loom_status_set(st, LOOM_DATA_LOSS, "checkpoint %s is corrupted or truncated: %s", r->path, what);
}

static int pread_full(int fd, void *dst, size_t n, uint64_t off) {
  uint8_t *p = dst;
  while (n) {
    ssize_t k = pread(fd, p, n, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
    off += (uint64_t)k;
  }
  return 0;
}

/* n bytes at off, bounds-checked against [0, limit). */
static int r_get(reader *r, uint64_t off, size_t n, uint64_t limit, uint8_t *dst) {
  if (off > limit || n > limit - off) return -1;
  if (n > RBUF) return pread_full(r->fd, dst, n, off);
  if (off < r->buf_off || off + n > r->buf_off + r->buf_len) {
    size_t want = RBUF;
    if (off + want > r->size) want = (size_t)(r->size - off);
    if (pread_full(r->fd, r->buf, want, off)) return -1;
    r->buf_off = off;
    r->buf_len = want;
  }
  memcpy(dst, r->buf + (off - r->buf_off), n);
  return 0;
}

static void reader_close(reader *r) {
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
  for (uint64_t i = 0; i < r->n; i++) loom__free(r->e[i].name);
  loom__free(r->e);
  loom__free(r->buf);
  r->e = NULL;
  r->n = 0;
  r->buf = NULL;
}

static loom_code verify_file_crc(reader *r, uint32_t want, loom_status *st) {
  uint64_t end = r->size - CKPT_TRAILER, off = 0;
  uint8_t *chunk = loom__malloc(1u << 20);
  if (!chunk) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: out of memory");
  uint32_t c = 0;
  while (off < end) {
    size_t k = end - off > (1u << 20) ? (1u << 20) : (size_t)(end - off);
    if (pread_full(r->fd, chunk, k, off)) {
      loom__free(chunk);
      return dataloss(st, r, "read failed");
    }
    c = loom__crc32c_extend(c, chunk, k);
    off += k;
  }
  loom__free(chunk);
  if (loom__crc32c_mask(c) != want) return dataloss(st, r, "file checksum mismatch");
  return LOOM_OK;
}

/* Opens and indexes a checkpoint (record metadata checked by CRC);
 * full != 0 also verifies the file CRC (reads everything). */
static loom_code reader_open(reader *r, const char *path, int full, loom_status *st) {
  memset(r, 0, sizeof *r);
  r->fd = -1;
  r->path = path;
  r->fd = open(path, O_RDONLY);
  if (r->fd < 0) {
    int e = errno;
    return loom_status_set(st, loom__errno_code(e), "cannot open checkpoint %s: %s", path, strerror(e));
  }
  struct stat sb;
  if (fstat(r->fd, &sb) || !S_ISREG(sb.st_mode)) {
    reader_close(r);
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint %s is not a regular file", path);
  }
  r->size = (uint64_t)sb.st_size;
  r->buf = loom__malloc(RBUF);
  if (!r->buf) {
    reader_close(r);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: out of memory");
  }
  loom_code rc = LOOM_OK;
  uint8_t hdr[CKPT_HEADER], tr[CKPT_TRAILER];
  if (r->size < CKPT_HEADER + CKPT_TRAILER) {
    rc = dataloss(st, r, "shorter than a header and a trailer");
    goto fail;
  }
  if (r_get(r, 0, CKPT_HEADER, r->size, hdr) || r_get(r, r->size - CKPT_TRAILER, CKPT_TRAILER, r->size, tr)) {
    rc = dataloss(st, r, "read failed");
    goto fail;
  }
  if (memcmp(hdr, CKPT_MAGIC, 8)) {
    rc = dataloss(st, r, "bad magic (not a loom checkpoint)");
    goto fail;
  }
  if (memcmp(tr, CKPT_END, 8)) {
    rc = dataloss(st, r, "bad trailer");
    goto fail;
  }
  /* The file CRC first: a damaged header byte (version, flags) is a checksum
   * mismatch, not an unknown format. The reserved word after the CRC is not
   * covered by it; a nonzero one is a damaged trailer, reported as such. */
  if (full && (rc = verify_file_crc(r, get_u32(tr + 8), st))) goto fail;
  if (get_u32(tr + 12) != 0) {
    rc = dataloss(st, r, "file checksum mismatch (the trailer after the checksum is damaged)");
    goto fail;
  }
  if (get_u32(hdr + 8) != CKPT_VERSION || get_u32(hdr + 12) != 0) {
    char why[96];
    snprintf(why, sizeof why, "unknown version %u or flags 0x%x", get_u32(hdr + 8), get_u32(hdr + 12));
    rc = dataloss(st, r, why);
    goto fail;
  }
  uint64_t end = r->size - CKPT_TRAILER;
  uint64_t n = get_u64(hdr + 16);
  if (n > (end - CKPT_HEADER) / CKPT_MIN_RECORD) {
    rc = dataloss(st, r, "tensor count larger than the file can hold");
    goto fail;
  }
  r->e = loom__calloc((size_t)(n ? n : 1), sizeof *r->e);
  if (!r->e) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: out of memory indexing %s", path);
    goto fail;
  }
  uint64_t off = CKPT_HEADER;
  uint8_t *meta = loom__malloc(4 + CKPT_MAX_NAME + 8 + 8 * LOOM_MAX_DIMS + 8 + 4);
  if (!meta) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: out of memory");
    goto fail;
  }
  for (uint64_t i = 0; i < n; i++) {
    uint64_t start = off;
    size_t k = 0;
    if (r_get(r, off, 4, end, meta)) goto bad;
    uint32_t L = get_u32(meta);
    if (L < 1 || L > CKPT_MAX_NAME) goto bad;
    k = 4;
    if (r_get(r, off + k, L + 8, end, meta + k)) goto bad;
    k += L;
    uint32_t dt = get_u32(meta + k), R = get_u32(meta + k + 4);
    k += 8;
    if (R > LOOM_MAX_DIMS || dt == 0 || dt >= LOOM_DTYPE_COUNT) goto bad;
    if (r_get(r, off + k, 8 * (size_t)R + 8 + 4, end, meta + k)) goto bad;
    ckpt_entry *e = &r->e[i];
    e->dtype = (loom_dtype)dt;
    e->ndim = (int32_t)R;
    uint64_t numel = 1;
    int overflow = 0;
    for (uint32_t d = 0; d < R; d++) {
      uint64_t v = get_u64(meta + k + 8 * d);
      if (v > (uint64_t)INT64_MAX) goto bad;
      e->dims[d] = (int64_t)v;
      if (v && numel > UINT64_MAX / v) overflow = 1;
      else numel *= v;
    }
    k += 8 * (size_t)R;
    e->nbytes = get_u64(meta + k);
    k += 8;
    if (get_u32(meta + k) != loom__crc32c_masked(meta, k)) {
      loom__free(meta);
      rc = dataloss(st, r, "record header checksum mismatch");
      goto fail;
    }
    k += 4;
    if (e->dtype == LOOM_STRING) { /* 8 bytes of length per element, then at least nothing */
      if (overflow || numel > UINT64_MAX / 8 || numel * 8 > e->nbytes) goto bad;
    } else {
      size_t esz = loom_dtype_size(e->dtype);
      if (overflow || numel > UINT64_MAX / esz || numel * esz != e->nbytes) goto bad;
    }
    off = start + k;
    if (off > end || e->nbytes > end - off || end - off - e->nbytes < 4) goto bad;
    e->data_off = off;
    uint8_t dc[4];
    if (r_get(r, off + e->nbytes, 4, end, dc)) goto bad;
    e->data_crc = get_u32(dc);
    off += e->nbytes + 4;
    e->name = loom__malloc(L + 1);
    if (!e->name) {
      loom__free(meta);
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: out of memory");
      goto fail;
    }
    memcpy(e->name, meta + 4, L);
    e->name[L] = 0;
    r->n = i + 1;
  }
  loom__free(meta);
  if (off != end) {
    rc = dataloss(st, r, "the records do not end where the trailer begins");
    goto fail;
  }
  return LOOM_OK;
bad:
  loom__free(meta);
  rc = dataloss(st, r, "a record runs past the end of the file or has invalid fields");
fail:
  reader_close(r);
  return rc;
}

static const ckpt_entry *reader_find(const reader *r, const char *name) {
  for (uint64_t i = 0; i < r->n; i++)
    if (!strcmp(r->e[i].name, name)) return &r->e[i];
  return NULL;
}

/* Reads e's data into dst (e->nbytes bytes) and checks its CRC. */
static loom_code reader_data(reader *r, const ckpt_entry *e, void *dst, loom_status *st) {
  uint8_t *p = dst;
  uint64_t left = e->nbytes, off = e->data_off;
  uint32_t c = 0;
  while (left) {
    size_t k = left > (1u << 22) ? (1u << 22) : (size_t)left;
    if (pread_full(r->fd, p, k, off)) return dataloss(st, r, "read failed");
    c = loom__crc32c_extend(c, p, k);
    p += k;
    off += k;
    left -= k;
  }
  if (loom__crc32c_mask(c) != e->data_crc) {
    char what[512];
    snprintf(what, sizeof what, "data checksum mismatch in tensor %s", e->name);
    return dataloss(st, r, what);
  }
  size_t esz = loom_dtype_size(e->dtype);
  if (!host_le() && esz > 1) {
    uint8_t *q = dst;
    for (uint64_t i = 0; i < e->nbytes; i += esz)
      for (size_t b = 0; b < esz / 2; b++) {
        uint8_t t = q[i + b];
        q[i + b] = q[i + esz - 1 - b];
        q[i + esz - 1 - b] = t;
      }
  }
  return LOOM_OK;
}

/* Reads a string entry into t (a string tensor of e's shape): the data
 * (CRC-checked), then the lengths, which must add up to the bytes after them. */
static loom_code reader_strings(reader *r, const ckpt_entry *e, loom_tensor *t, loom_status *st) {
  uint8_t *buf = loom__malloc(e->nbytes ? (size_t)e->nbytes : 1);
  if (!buf) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: out of memory reading tensor %s", e->name);
  loom_code rc = reader_data(r, e, buf, st);
  int64_t n = t->numel;
  uint64_t left = e->nbytes - 8 * (uint64_t)n, off = 8 * (uint64_t)n;
  int bad = 0;
  for (int64_t i = 0; i < n && !rc && !bad; i++) {
    uint64_t len = get_u64(buf + 8 * i);
    if (len > left) bad = 1;
    else left -= len;
  }
  if (!rc && (bad || left != 0)) {
    char what[512];
    snprintf(what, sizeof what, "the string lengths in tensor %s do not add up to its %llu data bytes", e->name,
             (unsigned long long)e->nbytes);
    rc = dataloss(st, r, what);
  }
  for (int64_t i = 0; i < n && !rc; i++) {
    uint64_t len = get_u64(buf + 8 * i);
    if (loom_tensor_set_string(t, i, (const char *)buf + off, (size_t)len, st)) rc = LOOM_RESOURCE_EXHAUSTED;
    off += len;
  }
  loom__free(buf);
  return rc;
}

loom_code loom_checkpoint_list_variables(const char *path, loom_checkpoint_entry_fn fn, void *user_data,
                                         loom_status *st) {
  if (!path) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint path is NULL");
  reader r;
  loom_code rc = reader_open(&r, path, 0, st);
  if (rc) return rc;
  for (uint64_t i = 0; fn && i < r.n; i++)
    if (fn(r.e[i].name, r.e[i].dtype, r.e[i].ndim, r.e[i].dims, user_data)) break;
  reader_close(&r);
  loom_status_clear(st);
  return LOOM_OK;
}

loom_code loom_checkpoint_read_tensor(const char *path, const char *name, loom_tensor **out, loom_status *st) {
  if (!path || !name || !out) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint_read_tensor: NULL argument");
  *out = NULL;
  reader r;
  loom_code rc = reader_open(&r, path, 0, st);
  if (rc) return rc;
  const ckpt_entry *e = reader_find(&r, name);
  if (!e) {
    reader_close(&r);
    return loom_status_set(st, LOOM_NOT_FOUND, "Key %s not found in checkpoint %s", name, path);
  }
  loom_tensor *t = loom_tensor_new(e->dtype, e->ndim, e->dims, st);
  if (!t) {
    reader_close(&r);
    return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
  }
  rc = e->dtype == LOOM_STRING ? reader_strings(&r, e, t, st) : reader_data(&r, e, t->data, st);
  reader_close(&r);
  if (rc) {
    loom_tensor_free(t);
    return rc;
  }
  *out = t;
  loom_status_clear(st);
  return LOOM_OK;
}

/* ======================================================================
 * The "checkpoint" state file
 * ====================================================================== */
static void split_dir(const char *path, char *dir, size_t cap) {
  snprintf(dir, cap, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, cap, ".");
  else if (slash == dir) slash[1] = 0;
  else *slash = 0;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static void join_path(char *out, size_t cap, const char *dir, const char *p) {
  if (p[0] == '/' || !strcmp(dir, ".")) snprintf(out, cap, "%s", p);
  else snprintf(out, cap, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", p);
}

/* path relative to dir when it lies directly in dir */
static const char *rel_to(const char *path, const char *dir) {
  char d[4096];
  split_dir(path, d, sizeof d);
  return strcmp(d, dir) ? path : base_name(path);
}

static void w_quoted(writer *w, const char *key, const char *v) {
  w_bytes(w, key, strlen(key));
  w_bytes(w, ": \"", 3);
  for (const char *p = v; *p; p++) {
    char esc[8];
    unsigned char ch = (unsigned char)*p;
    if (ch == '"' || ch == '\\') {
      esc[0] = '\\';
      esc[1] = (char)ch;
      w_bytes(w, esc, 2);
    } else if (ch == '\n') {
      w_bytes(w, "\\n", 2);
    } else if (ch < 0x20 || ch == 0x7f) {
      snprintf(esc, sizeof esc, "\\%03o", ch);
      w_bytes(w, esc, 4);
    } else {
      w_bytes(w, p, 1);
    }
  }
  w_bytes(w, "\"\n", 2);
}

typedef struct state_body {
  const char *dir;
  const char *latest;
  int n;
  char *const *all;
} state_body;

static loom_code state_body_fn(writer *w, void *arg, loom_status *st) {
  const state_body *b = arg;
  w_quoted(w, "model_checkpoint_path", rel_to(b->latest, b->dir));
  for (int i = 0; i < b->n; i++) w_quoted(w, "all_model_checkpoint_paths", rel_to(b->all[i], b->dir));
  (void)st;
  return LOOM_OK;
}

/* Parses the text state file; calls fn(key, value) for each entry. */
typedef void (*state_fn)(const char *key, const char *value, void *arg);
static loom_code read_state(const char *dir, state_fn fn, void *arg, loom_status *st) {
  char path[4200];
  snprintf(path, sizeof path, "%s/checkpoint", dir);
  FILE *f = fopen(path, "rb");
  if (!f) {
    int e = errno;
    return loom_status_set(st, loom__errno_code(e), "no checkpoint state file %s: %s", path, strerror(e));
  }
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    char *colon = strchr(p, ':');
    if (!colon) continue;
    *colon = 0;
    char *key = p;
    char *k_end = colon;
    while (k_end > key && (k_end[-1] == ' ' || k_end[-1] == '\t')) *--k_end = 0;
    char *q = strchr(colon + 1, '"');
    if (!q) continue;
    char val[8192];
    size_t n = 0;
    for (q++; *q && *q != '"' && n < sizeof val - 1; q++) {
      if (*q == '\\' && q[1]) {
        q++;
        if (*q == 'n') val[n++] = '\n';
        else if (*q == 't') val[n++] = '\t';
        else if (*q >= '0' && *q <= '7') {
          int v = 0, d = 0;
          while (d < 3 && *q >= '0' && *q <= '7') v = v * 8 + (*q++ - '0'), d++;
          q--;
          val[n++] = (char)v;
        } else val[n++] = *q;
      } else {
        val[n++] = *q;
      }
    }
    val[n] = 0;
    fn(key, val, arg);
  }
  fclose(f);
  return LOOM_OK;
}

typedef struct latest_arg {
  char *buf;
  size_t cap;
  int found;
} latest_arg;
static void latest_cb(const char *key, const char *value, void *arg) {
  latest_arg *a = arg;
  if (strcmp(key, "model_checkpoint_path")) return;
  snprintf(a->buf, a->cap, "%s", value);
  a->found = 1;
}

loom_code loom_latest_checkpoint(const char *dir, char *buf, size_t cap, loom_status *st) {
  if (!dir || !buf || !cap) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "latest_checkpoint: invalid arguments");
  buf[0] = 0;
  char val[4096];
  latest_arg a = {val, sizeof val, 0};
  loom_code rc = read_state(dir, latest_cb, &a, st);
  if (rc) return rc;
  if (!a.found || !val[0]) return loom_status_set(st, LOOM_NOT_FOUND, "%s/checkpoint names no checkpoint", dir);
  char full[8192];
  join_path(full, sizeof full, dir, val);
  if (access(full, R_OK))
    return loom_status_set(st, LOOM_NOT_FOUND, "checkpoint %s named by %s/checkpoint does not exist", full, dir);
  if (strlen(full) >= cap) return loom_status_set(st, LOOM_OUT_OF_RANGE, "latest_checkpoint: buffer too small");
  snprintf(buf, cap, "%s", full);
  loom_status_clear(st);
  return LOOM_OK;
}

/* ======================================================================
 * Saver
 * ====================================================================== */
struct loom_saver {
  loom_graph *g;
  char **names;
  int n;
  int keep_max;
  char **kept; /* paths of this saver's checkpoints, oldest first */
  int nkept, capkept;
  char *last;
  int swept; /* stale temporaries of dead writers removed from the directory once */
};

void loom_saver_free(loom_saver *sv) {
  if (!sv) return;
  for (int i = 0; i < sv->n; i++) loom__free(sv->names[i]);
  loom__free(sv->names);
  for (int i = 0; i < sv->nkept; i++) loom__free(sv->kept[i]);
  loom__free(sv->kept);
  loom__free(sv->last);
  loom__free(sv);
}

loom_saver *loom__saver_new_names(loom_graph *g, int n, const char *const *names, int keep_max, loom_status *st) {
  if (!g) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver: graph is NULL");
    return NULL;
  }
  if (n < 0 || (n > 0 && !names)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver: invalid variable list");
    return NULL;
  }
  loom_saver *sv = loom__calloc(1, sizeof *sv);
  if (!sv || !(sv->names = loom__calloc((size_t)(n > 0 ? n : 1), sizeof *sv->names))) {
    loom__free(sv);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "saver: out of memory");
    return NULL;
  }
  sv->g = g;
  sv->keep_max = keep_max;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < sv->n; j++)
      if (!strcmp(sv->names[j], names[i])) {
        loom_saver_free(sv);
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver: variable %s is listed twice", names[i]);
        return NULL;
      }
    sv->names[i] = loom__strdup(names[i]);
    if (!sv->names[i]) {
      loom_saver_free(sv);
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "saver: out of memory");
      return NULL;
    }
    sv->n = i + 1;
  }
  loom_status_clear(st);
  return sv;
}

/* The pid of a temporary left by a writer: "<stem>.tmp-<pid>" (atomic_write) or
 * "<stem>.pin-<pid>-<n>" (the estimator's restore pins); 0 when name is neither. */
static long temp_owner(const char *name) {
  const char *t = strstr(name, ".tmp-"), *p = strstr(name, ".pin-");
  const char *d = t ? t + 5 : p ? p + 5 : NULL;
  if (!d || !(*d >= '0' && *d <= '9')) return 0;
  char *end;
  long pid = strtol(d, &end, 10);
  if (pid <= 0) return 0;
  if (t && *end) return 0;
  if (!t) { /* pin: "-<n>" follows */
    if (*end != '-' || !end[1]) return 0;
    for (const char *q = end + 1; *q; q++)
      if (*q < '0' || *q > '9') return 0;
  }
  return pid;
}

/* Removes from dir the temporaries ("<stem>.tmp-<pid>", "<stem>.pin-<pid>-<n>") of
 * writers that no longer run (killed during a save or a restore), where <stem>
 * is the checkpoint prefix stem (model.ckpt...) or the state file. A live pid
 * (or one we may not signal) keeps its files. Returns how many were removed. */
static int ckpt_sweep_stale(const char *dir, const char *stem) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t sl = strlen(stem);
  int removed = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    const char *nm = de->d_name;
    if (strncmp(nm, stem, sl) && strncmp(nm, "checkpoint.tmp-", 15)) continue;
    long pid = temp_owner(nm);
    if (!pid || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char full[8192];
    join_path(full, sizeof full, dir, nm);
    if (unlink(full) == 0) removed++;
  }
  closedir(d);
  return removed;
}

static int kept_add(loom_saver *sv, const char *path) {
  for (int i = 0; i < sv->nkept; i++)
    if (!strcmp(sv->kept[i], path)) { /* re-saved: moves to the end */
      char *p = sv->kept[i];
      memmove(sv->kept + i, sv->kept + i + 1, sizeof *sv->kept * (size_t)(sv->nkept - i - 1));
      sv->kept[sv->nkept - 1] = p;
      return 0;
    }
  if (sv->nkept == sv->capkept) {
    int nc = sv->capkept ? sv->capkept * 2 : 8;
    char **nk = loom__realloc(sv->kept, sizeof *nk * (size_t)nc);
    if (!nk) return -1;
    sv->kept = nk;
    sv->capkept = nc;
  }
  char *p = loom__strdup(path);
  if (!p) return -1;
  sv->kept[sv->nkept++] = p;
  return 0;
}

const char *loom_saver_save(loom_saver *sv, loom_session *s, const char *prefix, int64_t global_step,
                            loom_status *st) {
  if (!sv || !s || !prefix || !*prefix) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver_save: invalid arguments");
    return NULL;
  }
  if (s->graph != sv->g) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver_save: the session runs another graph");
    return NULL;
  }
  char pre[4096], path[4200];
  struct stat sb;
  if (!stat(prefix, &sb) && S_ISDIR(sb.st_mode))
    snprintf(pre, sizeof pre, "%s%smodel.ckpt", prefix, prefix[strlen(prefix) - 1] == '/' ? "" : "/");
  else
    snprintf(pre, sizeof pre, "%s", prefix);
  if (global_step >= 0) snprintf(path, sizeof path, "%s-%lld", pre, (long long)global_step);
  else snprintf(path, sizeof path, "%s", pre);

  if (!sv->swept) { /* once per saver: what writers killed mid-save left behind */
    char sdir[4096];
    split_dir(pre, sdir, sizeof sdir);
    ckpt_sweep_stale(sdir, base_name(pre));
    sv->swept = 1;
  }
  ckpt_item *items = loom__calloc((size_t)(sv->n ? sv->n : 1), sizeof *items);
  if (!items) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "saver_save: out of memory");
    return NULL;
  }
  loom_code rc = LOOM_OK;
  pthread_mutex_lock(&s->mu); /* no run changes the variables while they are written */
  rc = loom__dev_vars_to_host(s, st); /* device sessions: the device copies may be newer */
  for (int i = 0; i < sv->n && !rc; i++) {
    loom_var_entry *e = loom__var_entry(s, sv->names[i], st);
    if (!e) {
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_NOT_FOUND;
      break;
    }
    if (!e->initialized) {
      rc = loom_status_set(st, LOOM_FAILED_PRECONDITION, "Attempting to use uninitialized value %s", e->name);
      break;
    }
    items[i] = (ckpt_item){e->name, e->dtype, e->ndim, e->dims, e->data, e->nbytes};
  }
  if (!rc) rc = write_items(path, sv->n, items, st);
  pthread_mutex_unlock(&s->mu);
  loom__free(items);
  if (rc) return NULL;

  /* bookkeeping: remember, write the state file, then delete the oldest */
  if (kept_add(sv, path)) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "saver_save: out of memory");
    return NULL;
  }
  int drop = (sv->keep_max > 0 && sv->nkept > sv->keep_max) ? sv->nkept - sv->keep_max : 0;
  char dir[4096];
  split_dir(path, dir, sizeof dir);
  state_body sb2 = {dir, path, sv->nkept - drop, sv->kept + drop};
  char state[4200];
  snprintf(state, sizeof state, "%s/checkpoint", dir);
  rc = atomic_write(state, state_body_fn, &sb2, st);
  if (rc) return NULL;
  for (int i = 0; i < drop; i++) {
    if (strcmp(sv->kept[i], path)) unlink(sv->kept[i]);
    loom__free(sv->kept[i]);
  }
  if (drop) {
    memmove(sv->kept, sv->kept + drop, sizeof *sv->kept * (size_t)(sv->nkept - drop));
    sv->nkept -= drop;
  }
  loom__free(sv->last);
  sv->last = loom__strdup(path);
  if (!sv->last) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "saver_save: out of memory");
    return NULL;
  }
  loom_status_clear(st);
  return sv->last;
}

typedef struct recover_arg {
  loom_saver *sv;
  const char *dir;
  int oom;
} recover_arg;
static void recover_cb(const char *key, const char *value, void *arg) {
  recover_arg *a = arg;
  if (strcmp(key, "all_model_checkpoint_paths") || !value[0]) return;
  char full[8192];
  join_path(full, sizeof full, a->dir, value);
  if (access(full, R_OK)) return;
  if (kept_add(a->sv, full)) a->oom = 1;
}

loom_code loom_saver_recover_last_checkpoints(loom_saver *sv, const char *dir, loom_status *st) {
  if (!sv || !dir) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "recover_last_checkpoints: invalid arguments");
  recover_arg a = {sv, dir, 0};
  loom_code rc = read_state(dir, recover_cb, &a, st);
  if (rc) return rc;
  if (a.oom) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "recover_last_checkpoints: out of memory");
  loom_status_clear(st);
  return LOOM_OK;
}

loom_code loom_saver_restore(loom_saver *sv, loom_session *s, const char *path, loom_status *st) {
  if (!sv || !s || !path) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver_restore: invalid arguments");
  if (s->graph != sv->g)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "saver_restore: the session runs another graph");
  char file[8192];
  struct stat sb;
  if (!stat(path, &sb) && S_ISDIR(sb.st_mode)) {
    loom_code rc = loom_latest_checkpoint(path, file, sizeof file, st);
    if (rc) return rc;
  } else {
    snprintf(file, sizeof file, "%s", path);
  }
  reader r;
  loom_code rc = reader_open(&r, file, 1, st);
  if (rc) return rc;
  const ckpt_entry **src = loom__calloc((size_t)(sv->n ? sv->n : 1), sizeof *src);
  loom_var_entry **dst = loom__calloc((size_t)(sv->n ? sv->n : 1), sizeof *dst);
  if (!src || !dst) {
    loom__free(src);
    loom__free(dst);
    reader_close(&r);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "saver_restore: out of memory");
  }
  pthread_mutex_lock(&s->mu);
  /* check everything before writing anything */
  for (int i = 0; i < sv->n && !rc; i++) {
    src[i] = reader_find(&r, sv->names[i]);
    if (!src[i]) {
      rc = loom_status_set(st, LOOM_NOT_FOUND, "Key %s not found in checkpoint %s", sv->names[i], file);
      break;
    }
    dst[i] = loom__var_entry(s, sv->names[i], st);
    if (!dst[i]) {
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_NOT_FOUND;
      break;
    }
    const ckpt_entry *c = src[i];
    const loom_var_entry *e = dst[i];
    int same = c->dtype == e->dtype && c->ndim == e->ndim && e->dtype != LOOM_STRING;
    for (int d = 0; same && d < e->ndim; d++) same = c->dims[d] == e->dims[d];
    if (!same) {
      char b1[96], b2[96];
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "Restoring variable %s from %s: the variable is %s %s but the checkpoint has %s %s",
                           e->name, file, loom_dtype_name(e->dtype), loom__dims_str(b1, sizeof b1, e->ndim, e->dims),
                           loom_dtype_name(c->dtype), loom__dims_str(b2, sizeof b2, c->ndim, c->dims));
    }
  }
  /* device sessions: host copies current before any is overwritten, re-uploaded at the next run */
  loom_code synced = loom__dev_vars_to_host(s, rc ? NULL : st);
  if (!rc) rc = synced;
  for (int i = 0; i < sv->n && !rc; i++) rc = reader_data(&r, src[i], dst[i]->data, st);
  if (!synced) loom__dev_vars_host_changed(s);
  for (int i = 0; i < sv->n && !rc; i++) loom__var_mark_initialized(s->vars, dst[i]);
  pthread_mutex_unlock(&s->mu);
  loom__free(src);
  loom__free(dst);
  reader_close(&r);
  if (!rc) loom_status_clear(st);
  return rc;
}
