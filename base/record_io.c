/* base/record_io.c - TFRecord framing, plain or through zlib (GZIP / ZLIB
 * as TF writes them). See record_io.h. */
#include "base/record_io.h"
#include <errno.h>
#include <sys/stat.h>
#include <string.h>
#include <zlib.h>
#include "base/crc32c.h"

#define ZCHUNK 65536

static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

const char *loom__tfrecord_compression_name(int c) {
  switch (c) {
    case LOOM__TFR_NONE: return "NONE";
    case LOOM__TFR_GZIP: return "GZIP";
    case LOOM__TFR_ZLIB: return "ZLIB";
    case LOOM__TFR_AUTO: return "AUTO";
    default: return "?";
  }
}

static void frame(uint8_t head[12], uint8_t tail[4], const void *data, size_t n) {
  put_le(head, (uint64_t)n, 8);
  put_le(head + 8, loom__crc32c_masked(head, 8), 4);
  put_le(tail, loom__crc32c_masked(data, n), 4);
}

loom_code loom__tfrecord_write(FILE *f, const void *data, size_t n, const char *what, loom_status *st) {
  uint8_t head[12], tail[4];
  frame(head, tail, data, n);
  if (fwrite(head, 1, 12, f) != 12 || (n && fwrite(data, 1, n, f) != n) || fwrite(tail, 1, 4, f) != 4)
    return loom_status_set(st, LOOM_INTERNAL, "writing a record to %s: %s", what ? what : "TFRecord file",
                           strerror(errno));
  return LOOM_OK;
}

/* ================================================================ writer */
loom_code loom__tfrecord_out_open(loom_tfrecord_out *o, const char *path, int compression, loom_status *st) {
  memset(o, 0, sizeof *o);
  if (compression != LOOM__TFR_NONE && compression != LOOM__TFR_GZIP && compression != LOOM__TFR_ZLIB)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TFRecord writer for %s: compression %d; writing takes NONE (0), GZIP (1) or ZLIB (2)", path,
                           compression);
  if (!(o->path = loom__strdup(path))) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  o->compression = compression;
  if (compression) {
    z_stream *z = loom__calloc(1, sizeof *z);
    o->obuf = loom__malloc(ZCHUNK);
    if (!z || !o->obuf || deflateInit2(z, Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                                       compression == LOOM__TFR_GZIP ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      loom__free(z);
      loom__free(o->obuf);
      loom__free(o->path);
      memset(o, 0, sizeof *o);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "TFRecord writer for %s: cannot start deflate", path);
    }
    o->z = z;
  }
  o->f = fopen(path, "wb");
  if (!o->f) {
    int e = errno;
    if (o->z) deflateEnd(o->z);
    loom__free(o->z);
    loom__free(o->obuf);
    loom__free(o->path);
    memset(o, 0, sizeof *o);
    return loom_status_set(st, e == ENOENT ? LOOM_NOT_FOUND : e == EACCES ? LOOM_PERMISSION_DENIED : LOOM_INTERNAL,
                           "cannot create TFRecord file %s: %s", path, strerror(e));
  }
  return LOOM_OK;
}

static loom_code zput(loom_tfrecord_out *o, const void *p, size_t n, int flush, loom_status *st) {
  z_stream *z = o->z;
  z->next_in = (Bytef *)p;
  z->avail_in = (uInt)n;
  int ret;
  do {
    z->next_out = o->obuf;
    z->avail_out = ZCHUNK;
    ret = deflate(z, flush);
    if (ret == Z_STREAM_ERROR)
      return loom_status_set(st, LOOM_INTERNAL, "compressing %s: deflate failed", o->path);
    size_t have = ZCHUNK - z->avail_out;
    if (have && fwrite(o->obuf, 1, have, o->f) != have)
      return loom_status_set(st, LOOM_INTERNAL, "writing a record to %s: %s", o->path, strerror(errno));
  } while (z->avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
  return LOOM_OK;
}

loom_code loom__tfrecord_out_write(loom_tfrecord_out *o, const void *data, size_t n, loom_status *st) {
  if (!o->z) return loom__tfrecord_write(o->f, data, n, o->path, st);
  uint8_t head[12], tail[4];
  frame(head, tail, data, n);
  loom_code rc = zput(o, head, 12, Z_NO_FLUSH, st);
  /* records are < 4 GiB each in practice; feed big ones in slices */
  const uint8_t *p = data;
  for (size_t left = n; !rc && left;) {
    size_t k = left > (1u << 30) ? (1u << 30) : left;
    rc = zput(o, p, k, Z_NO_FLUSH, st);
    p += k;
    left -= k;
  }
  if (!rc) rc = zput(o, tail, 4, Z_NO_FLUSH, st);
  return rc;
}

loom_code loom__tfrecord_out_close(loom_tfrecord_out *o, loom_status *st) {
  loom_code rc = LOOM_OK;
  if (o->z && o->f) rc = zput(o, NULL, 0, Z_FINISH, st);
  if (o->z) deflateEnd(o->z);
  if (o->f && fclose(o->f) && !rc)
    rc = loom_status_set(st, LOOM_INTERNAL, "closing TFRecord file %s: %s", o->path, strerror(errno));
  loom__free(o->z);
  loom__free(o->obuf);
  loom__free(o->path);
  memset(o, 0, sizeof *o);
  return rc;
}

/* ================================================================ reader */
typedef struct zin {
  z_stream z;
  uint8_t in[ZCHUNK];
  int eof, stream_end;
} zin;

static int looks_gzip(const uint8_t *h, size_t n) { return n >= 2 && h[0] == 0x1f && h[1] == 0x8b; }
static int looks_zlib(const uint8_t *h, size_t n) {
  return n >= 2 && (h[0] & 0x0f) == 8 && (h[0] >> 4) <= 7 && ((unsigned)h[0] * 256 + h[1]) % 31 == 0;
}

loom_code loom__tfrecord_open(loom_tfrecord_reader *r, const char *path, loom_status *st) {
  return loom__tfrecord_open_ex(r, path, LOOM__TFR_NONE, st);
}

loom_code loom__tfrecord_open_ex(loom_tfrecord_reader *r, const char *path, int compression, loom_status *st) {
  memset(r, 0, sizeof *r);
  if (compression < LOOM__TFR_NONE || compression > LOOM__TFR_AUTO)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "TFRecord file %s: compression %d; use NONE (0), GZIP (1), ZLIB (2) or AUTO (3)", path,
                           compression);
  r->f = fopen(path, "rb");
  if (!r->f) return loom_status_set(st, LOOM_NOT_FOUND, "cannot open TFRecord file %s: %s", path, strerror(errno));
  r->path = loom__strdup(path);
  if (!r->path) {
    fclose(r->f);
    r->f = NULL;
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (compression == LOOM__TFR_AUTO) {
    uint8_t h[12];
    size_t got = fread(h, 1, 12, r->f);
    rewind(r->f);
    compression = LOOM__TFR_NONE;
    if (got == 12 && (uint32_t)get_le(h + 8, 4) == loom__crc32c_masked(h, 8))
      compression = LOOM__TFR_NONE;
    else if (looks_gzip(h, got))
      compression = LOOM__TFR_GZIP;
    else if (looks_zlib(h, got))
      compression = LOOM__TFR_ZLIB;
  }
  r->compression = compression;
  if (compression) {
    zin *zi = loom__calloc(1, sizeof *zi);
    if (!zi || inflateInit2(&zi->z, compression == LOOM__TFR_GZIP ? 15 + 16 : 15) != Z_OK) {
      loom__free(zi);
      loom__tfrecord_close(r);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "TFRecord file %s: cannot start inflate", path);
    }
    r->z = zi;
  }
  return LOOM_OK;
}

/* Up to n bytes of the (uncompressed) stream; fewer only at its end.
 * Returns -1 (r->zerr set) for a corrupt or truncated compressed stream. */
static long long src_read(loom_tfrecord_reader *r, uint8_t *dst, size_t n) {
  if (!r->z) {
    size_t got = fread(dst, 1, n, r->f);
    if (got < n && ferror(r->f)) {
      r->zerr = "read error";
      return -1;
    }
    return (long long)got;
  }
  zin *zi = r->z;
  z_stream *z = &zi->z;
  z->next_out = dst;
  z->avail_out = (uInt)n;
  while (z->avail_out > 0) {
    if (z->avail_in == 0 && !zi->eof) {
      size_t got = fread(zi->in, 1, ZCHUNK, r->f);
      if (got == 0) {
        if (ferror(r->f)) {
          r->zerr = "read error";
          return -1;
        }
        zi->eof = 1;
      }
      z->next_in = zi->in;
      z->avail_in = (uInt)got;
    }
    if (zi->stream_end) {
      if (z->avail_in == 0 && zi->eof) break; /* clean end */
      /* another gzip member / zlib stream follows */
      if (inflateReset(z) != Z_OK) {
        r->zerr = "inflateReset failed";
        return -1;
      }
      zi->stream_end = 0;
    }
    if (z->avail_in == 0 && zi->eof && z->total_in == 0 && !zi->stream_end) break; /* an empty file: no records */
    if (z->avail_in == 0 && zi->eof) {
      r->zerr = "the compressed stream ends early (truncated file)";
      return -1;
    }
    int ret = inflate(z, Z_NO_FLUSH);
    if (ret == Z_STREAM_END)
      zi->stream_end = 1;
    else if (ret == Z_BUF_ERROR && z->avail_in == 0)
      continue;
    else if (ret != Z_OK) {
      r->zerr = z->msg ? z->msg : ret == Z_MEM_ERROR ? "out of memory" : "corrupt compressed data";
      return -1;
    }
  }
  return (long long)(n - z->avail_out);
}

static loom_code corrupt(loom_tfrecord_reader *r, loom_status *st, const char *why) {
  if (r->z)
    return loom_status_set(st, LOOM_DATA_LOSS, "%s (%s-compressed): record %lld at uncompressed byte offset %llu: %s",
                           r->path, loom__tfrecord_compression_name(r->compression), (long long)r->index,
                           (unsigned long long)r->offset, why);
  return loom_status_set(st, LOOM_DATA_LOSS, "%s: record %lld at byte offset %llu: %s", r->path, (long long)r->index,
                         (unsigned long long)r->offset, why);
}
static loom_code zfail(loom_tfrecord_reader *r, loom_status *st) {
  char why[256];
  snprintf(why, sizeof why, "corrupt %s stream: %s", loom__tfrecord_compression_name(r->compression),
           r->zerr ? r->zerr : "?");
  return corrupt(r, st, why);
}

loom_code loom__tfrecord_next(loom_tfrecord_reader *r, const uint8_t **data, size_t *n, loom_status *st) {
  uint8_t head[12], tail[4];
  long long got = src_read(r, head, 12);
  if (got < 0) return zfail(r, st);
  if (got == 0) return loom_status_set(st, LOOM_OUT_OF_RANGE, "end of %s", r->path);
  if (got != 12) return corrupt(r, st, "truncated record header");
  if ((uint32_t)get_le(head + 8, 4) != loom__crc32c_masked(head, 8)) {
    if (!r->z && r->index == 0 && looks_gzip(head, 12))
      return corrupt(r, st,
                     "length CRC mismatch; the file starts with the gzip magic 1f 8b, so it looks GZIP-compressed: "
                     "read it with compression LOOM_TFRECORD_GZIP (TF's compression_type=\"GZIP\") or "
                     "LOOM_TFRECORD_AUTO (loom_tfrecord_options.compression)");
    if (!r->z && r->index == 0 && looks_zlib(head, 12))
      return corrupt(r, st,
                     "length CRC mismatch; the file starts with a zlib header, so it looks ZLIB-compressed: "
                     "read it with compression LOOM_TFRECORD_ZLIB (TF's compression_type=\"ZLIB\") or "
                     "LOOM_TFRECORD_AUTO (loom_tfrecord_options.compression)");
    return corrupt(r, st, "length CRC mismatch");
  }
  uint64_t len = get_le(head, 8);
  if (len > ((uint64_t)1 << 40)) return corrupt(r, st, "implausible record length");
  /* Grow with the bytes that actually arrive: a corrupt length never
   * allocates more than about twice the data present. */
  uint64_t have = 0;
  while (have < len) {
    if (have + 1 >= r->cap) {
      uint64_t want = r->cap ? (uint64_t)r->cap * 2 : 65536;
      if (want > len + 1) want = len + 1;
      uint8_t *b = loom__realloc(r->buf, (size_t)want);
      if (!b) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory reading %s", r->path);
      r->buf = b;
      r->cap = (size_t)want;
    }
    uint64_t k = len - have;
    if (k > r->cap - 1 - have) k = r->cap - 1 - have;
    long long g = src_read(r, r->buf + have, (size_t)k);
    if (g < 0) return zfail(r, st);
    have += (uint64_t)g;
    if ((uint64_t)g < k) return corrupt(r, st, "truncated record data");
  }
  if (!r->cap) {
    r->buf = loom__malloc(64);
    if (!r->buf) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory reading %s", r->path);
    r->cap = 64;
  }
  got = src_read(r, tail, 4);
  if (got < 0) return zfail(r, st);
  if (got != 4) return corrupt(r, st, "truncated record data CRC");
  if ((uint32_t)get_le(tail, 4) != loom__crc32c_masked(r->buf, (size_t)len)) return corrupt(r, st, "data CRC mismatch");
  r->buf[len] = 0;
  *data = r->buf;
  *n = (size_t)len;
  r->index++;
  r->offset += 16 + len;
  return LOOM_OK;
}

void loom__tfrecord_close(loom_tfrecord_reader *r) {
  if (r->z) {
    inflateEnd(&((zin *)r->z)->z);
    loom__free(r->z);
  }
  if (r->f) fclose(r->f);
  loom__free(r->path);
  loom__free(r->buf);
  memset(r, 0, sizeof *r);
}
