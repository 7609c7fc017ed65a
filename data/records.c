/* data/records.c - datasets of raw records, one scalar string per element:
 * the records of TFRecord files (tf.data.TFRecordDataset), the lines of
 * text files (tf.data.TextLineDataset) and fixed-length records
 * (tf.data.FixedLengthRecordDataset), each optionally through GZIP / ZLIB.
 * See loom_data.h (loom_dataset_records). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>
#include "data/data_impl.h"
#include "base/record_io.h"

#define CHUNK 65536

/* A file's bytes, plain or inflated, with a buffer to look ahead in. */
typedef struct bstream {
  FILE *f;
  int compression; /* NONE, GZIP, ZLIB */
  z_stream z;
  int zinit;
  uint8_t *in;     /* compressed input chunk */
  uint8_t *buf;    /* decoded bytes [beg, end) */
  size_t cap, beg, end;
  int eof;         /* no more bytes will come */
  uint64_t offset; /* decoded offset of buf[beg] */
} bstream;

static void bs_close(bstream *b) {
  if (b->f) fclose(b->f);
  if (b->zinit) inflateEnd(&b->z);
  loom__free(b->in);
  loom__free(b->buf);
  memset(b, 0, sizeof *b);
}

static loom_code bs_open(bstream *b, const char *path, int compression, loom_status *st) {
  memset(b, 0, sizeof *b);
  b->compression = compression;
  if (!(b->f = fopen(path, "rb"))) return loom_status_set(st, LOOM_NOT_FOUND, "cannot open %s: %s", path, strerror(errno));
  if (compression != LOOM__TFR_NONE) {
    if (!(b->in = loom__malloc(CHUNK)) ||
        inflateInit2(&b->z, compression == LOOM__TFR_GZIP ? 15 + 16 : 15) != Z_OK) {
      bs_close(b);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: cannot start inflate", path);
    }
    b->zinit = 1;
  }
  return LOOM_OK;
}

/* Makes at least want bytes available in [beg, end) unless the stream ends
 * first (then eof is set and fewer are there). */
static loom_code bs_fill(bstream *b, size_t want, const char *path, loom_status *st) {
  while (b->end - b->beg < want && !b->eof) {
    if (b->beg > 0) { /* compact */
      memmove(b->buf, b->buf + b->beg, b->end - b->beg);
      b->end -= b->beg;
      b->beg = 0;
    }
    size_t need = b->end + CHUNK;
    if (need > b->cap) {
      size_t nc = b->cap ? b->cap : CHUNK;
      while (nc < need) nc *= 2;
      uint8_t *nb = loom__realloc(b->buf, nc);
      if (!nb) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory reading records", path);
      b->buf = nb;
      b->cap = nc;
    }
    if (b->compression == LOOM__TFR_NONE) {
      size_t got = fread(b->buf + b->end, 1, b->cap - b->end, b->f);
      if (got == 0) {
        if (ferror(b->f)) return loom_status_set(st, LOOM_DATA_LOSS, "reading %s: %s", path, strerror(errno));
        b->eof = 1;
      }
      b->end += got;
      continue;
    }
    if (b->z.avail_in == 0) {
      size_t got = fread(b->in, 1, CHUNK, b->f);
      if (got == 0) {
        if (ferror(b->f)) return loom_status_set(st, LOOM_DATA_LOSS, "reading %s: %s", path, strerror(errno));
        if (b->zinit == 2) { /* ended cleanly at a member boundary */
          b->eof = 1;
          continue;
        }
        return loom_status_set(st, LOOM_DATA_LOSS,
                               "%s: the %s stream is truncated at uncompressed byte offset %llu", path,
                               loom__tfrecord_compression_name(b->compression),
                               (unsigned long long)(b->offset + (b->end - b->beg)));
      }
      b->z.next_in = b->in;
      b->z.avail_in = (uInt)got;
    }
    if (b->zinit == 2) { /* input follows a member's end: another gzip member */
      if (inflateReset(&b->z) != Z_OK) return loom_status_set(st, LOOM_DATA_LOSS, "%s: inflateReset failed", path);
      b->zinit = 1;
    }
    b->z.next_out = b->buf + b->end;
    b->z.avail_out = (uInt)(b->cap - b->end);
    int ret = inflate(&b->z, Z_NO_FLUSH);
    b->end = b->cap - b->z.avail_out;
    if (ret == Z_STREAM_END) {
      b->zinit = 2; /* a member ended: more input means another member */
    } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
      return loom_status_set(st, LOOM_DATA_LOSS, "%s: corrupt %s stream near uncompressed byte offset %llu (%s)", path,
                             loom__tfrecord_compression_name(b->compression),
                             (unsigned long long)(b->offset + (b->end - b->beg)), b->z.msg ? b->z.msg : "inflate failed");
    }
  }
  return LOOM_OK;
}

static void bs_take(bstream *b, size_t n) {
  b->beg += n;
  b->offset += n;
}

typedef struct rec_ds {
  loom_dataset base;
  loom_records_options o;
  int nfiles, file;
  char **paths;
  int open;
  int64_t index; /* records of the open file read so far */
  bstream b;
  loom_tfrecord_reader r;
} rec_ds;

static void rec_close(rec_ds *d) {
  if (!d->open) return;
  if (d->o.format == LOOM_RECORDS_TFRECORD)
    loom__tfrecord_close(&d->r);
  else
    bs_close(&d->b);
  d->open = 0;
}

static loom_code emit(loom_tensor **values, const void *data, size_t n, loom_status *st) {
  loom_code rc = loom__ds_ensure(&values[0], LOOM_STRING, 0, NULL, st);
  return rc ? rc : loom_tensor_set_string(values[0], 0, data, n, st);
}

static loom_code rec_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  rec_ds *d = (rec_ds *)ds;
  for (;;) {
    const char *path = d->file < d->nfiles ? d->paths[d->file] : NULL;
    if (!d->open) {
      if (!path) return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
      loom_code rc = d->o.format == LOOM_RECORDS_TFRECORD ? loom__tfrecord_open_ex(&d->r, path, d->o.compression, st)
                                                         : bs_open(&d->b, path, d->o.compression, st);
      if (rc) return rc;
      d->open = 1;
      d->index = 0;
      if (d->o.format == LOOM_RECORDS_FIXED_LENGTH && d->o.header_bytes > 0) {
        size_t h = (size_t)d->o.header_bytes;
        if ((rc = bs_fill(&d->b, h, path, st))) return rc;
        if (d->b.end - d->b.beg < h + (size_t)d->o.footer_bytes)
          return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                                 "%s: %zu bytes, fewer than the header (%lld bytes) and footer (%lld bytes)", path,
                                 d->b.end - d->b.beg, (long long)d->o.header_bytes, (long long)d->o.footer_bytes);
        bs_take(&d->b, h);
      }
    }
    loom_code rc = LOOM_OK;
    if (d->o.format == LOOM_RECORDS_TFRECORD) {
      const uint8_t *data;
      size_t n;
      rc = loom__tfrecord_next(&d->r, &data, &n, st);
      if (rc == LOOM_OK) {
        d->index++;
        return emit(values, data, n, st);
      }
    } else if (d->o.format == LOOM_RECORDS_TEXT_LINE) {
      size_t scan = 0;
      for (;;) {
        bstream *b = &d->b;
        size_t have = b->end - b->beg;
        const uint8_t *p = have > scan ? memchr(b->buf + b->beg + scan, '\n', have - scan) : NULL;
        if (p) {
          size_t n = (size_t)(p - (b->buf + b->beg));
          size_t len = n > 0 && b->buf[b->beg + n - 1] == '\r' ? n - 1 : n;
          rc = emit(values, b->buf + b->beg, len, st);
          bs_take(b, n + 1);
          d->index++;
          return rc;
        }
        if (b->eof) {
          if (b->end == b->beg) {
            rc = LOOM_OUT_OF_RANGE;
            break;
          }
          size_t n = b->end - b->beg; /* the last line, without a line break */
          size_t len = b->buf[b->beg + n - 1] == '\r' ? n - 1 : n;
          rc = emit(values, b->buf + b->beg, len, st);
          bs_take(b, n);
          d->index++;
          return rc;
        }
        scan = b->end - b->beg;
        if ((rc = bs_fill(b, scan + 1, path, st))) return rc;
      }
    } else { /* fixed length: a record is there when record_bytes + footer_bytes are */
      size_t rb = (size_t)d->o.record_bytes, fb = (size_t)d->o.footer_bytes;
      if ((rc = bs_fill(&d->b, rb + fb, path, st))) return rc;
      if (d->b.end - d->b.beg >= rb + fb) {
        rc = emit(values, d->b.buf + d->b.beg, rb, st);
        bs_take(&d->b, rb);
        d->index++;
        return rc;
      }
      if (d->b.end - d->b.beg != fb) { /* a partial record before the footer */
        size_t body = (size_t)d->index * rb + (d->b.end - d->b.beg - fb);
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "%s: excluding the header (%lld bytes) and footer (%lld bytes) the body is %zu bytes, "
                               "not a multiple of the record length (%lld bytes)",
                               path, (long long)d->o.header_bytes, (long long)fb, body, (long long)rb);
      }
      rc = LOOM_OUT_OF_RANGE; /* the rest is the footer */
    }
    if (rc != LOOM_OUT_OF_RANGE) return rc;
    rec_close(d);
    d->file++;
  }
}

static loom_code rec_reset(loom_dataset *ds, loom_status *st) {
  (void)st;
  rec_ds *d = (rec_ds *)ds;
  rec_close(d);
  d->file = 0;
  return LOOM_OK;
}

static void rec_destroy(loom_dataset *ds) {
  rec_ds *d = (rec_ds *)ds;
  rec_close(d);
  if (d->paths)
    for (int i = 0; i < d->nfiles; i++) loom__free(d->paths[i]);
  loom__free(d->paths);
}

static const loom_ds_vtable rec_vt = {"records", rec_next, NULL, rec_reset, rec_destroy, NULL, NULL};

loom_records_options loom_records_options_default(void) {
  loom_records_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.format = LOOM_RECORDS_TFRECORD;
  o.compression = LOOM_TFRECORD_NONE;
  return o;
}

loom_dataset *loom_dataset_records(int nfiles, const char *const *paths, const loom_records_options *opt,
                                   loom_status *st) {
  loom_records_options o = loom_records_options_default();
  if (LOOM__OPTS_TAKE(&o, opt, "dataset_records", loom_records_options, st)) return NULL;
  const char *bad = NULL;
  if (o.format < LOOM_RECORDS_TFRECORD || o.format > LOOM_RECORDS_FIXED_LENGTH)
    bad = "format must be LOOM_RECORDS_TFRECORD, _TEXT_LINE or _FIXED_LENGTH";
  else if (o.compression < LOOM_TFRECORD_NONE || o.compression > LOOM_TFRECORD_ZLIB)
    bad = o.compression == LOOM_TFRECORD_AUTO && o.format == LOOM_RECORDS_TFRECORD
              ? NULL
              : "compression must be LOOM_TFRECORD_NONE, _GZIP or _ZLIB (AUTO: TFRecord files only)";
  else if (o.format == LOOM_RECORDS_FIXED_LENGTH && o.record_bytes <= 0)
    bad = "record_bytes must be > 0";
  else if (o.format == LOOM_RECORDS_FIXED_LENGTH && (o.header_bytes < 0 || o.footer_bytes < 0))
    bad = "header_bytes and footer_bytes must be >= 0";
  else if (o.format != LOOM_RECORDS_FIXED_LENGTH && (o.record_bytes || o.header_bytes || o.footer_bytes))
    bad = "record_bytes, header_bytes and footer_bytes are for LOOM_RECORDS_FIXED_LENGTH only";
  else if (nfiles <= 0 || !paths)
    bad = nfiles <= 0 ? "nfiles must be positive" : "paths is NULL";
  if (bad) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_records: %s", bad);
    return NULL;
  }
  if (loom__ds_check_paths("dataset_records", nfiles, paths, st)) return NULL;
  rec_ds *d = (rec_ds *)loom__ds_new(sizeof(rec_ds), &rec_vt, 1, st);
  if (!d) return NULL;
  loom_dataset *ds = &d->base;
  d->o = o;
  d->o.name = NULL;
  d->paths = loom__calloc((size_t)nfiles, sizeof *d->paths);
  int ok = d->paths != NULL;
  if (ok) d->nfiles = nfiles;
  for (int i = 0; ok && i < nfiles; i++) ok = (d->paths[i] = loom__strdup(paths[i])) != NULL;
  if (!ok) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_records: out of memory");
    loom_dataset_free(ds);
    return NULL;
  }
  if (loom__ds_set_comp(ds, 0, o.name && o.name[0] ? o.name : "record", LOOM_STRING, 0, NULL, st)) {
    loom_dataset_free(ds);
    return NULL;
  }
  return ds;
}
