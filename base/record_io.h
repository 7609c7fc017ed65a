/* base/record_io.h - TFRecord framing (internal), shared by the
 * TFRecord dataset and the TensorBoard event files.
 *
 * A record on disk:  uint64 length (LE) | uint32 masked_crc32c(length bytes)
 *                    | data[length] | uint32 masked_crc32c(data)
 * (masked as in base/crc32c.h). A compressed file (TF's compression_type
 * "GZIP" / "ZLIB") is that byte stream through deflate, in a gzip or a zlib
 * wrapper (zlib's windowBits 15 + 16 / 15, as TF writes them). */
#ifndef LOOM_TFRECORD_H
#define LOOM_TFRECORD_H
#include <stdio.h>
#include "base/base.h"

/* Compression ids: the values of loom_tfrecord_compression (loom_data.h). */
enum { LOOM__TFR_NONE = 0, LOOM__TFR_GZIP = 1, LOOM__TFR_ZLIB = 2, LOOM__TFR_AUTO = 3 };
const char *loom__tfrecord_compression_name(int c); /* "NONE", "GZIP", "ZLIB", "AUTO", "?" */

/* Appends one record to f. IO errors -> INTERNAL/... naming `what`. */
loom_code loom__tfrecord_write(FILE *f, const void *data, size_t n, const char *what, loom_status *st);

/* A record file being written, optionally compressed. */
typedef struct loom_tfrecord_out {
  FILE *f;
  char *path;
  int compression; /* NONE, GZIP or ZLIB */
  void *z;         /* z_stream (compressed) */
  uint8_t *obuf;
} loom_tfrecord_out;
loom_code loom__tfrecord_out_open(loom_tfrecord_out *o, const char *path, int compression, loom_status *st);
loom_code loom__tfrecord_out_write(loom_tfrecord_out *o, const void *data, size_t n, loom_status *st);
/* Finishes the stream, closes and frees (also after an error). */
loom_code loom__tfrecord_out_close(loom_tfrecord_out *o, loom_status *st);

typedef struct loom_tfrecord_reader {
  FILE *f;
  char *path;
  int64_t index;   /* records read so far */
  uint64_t offset; /* byte offset of the next record (in the uncompressed stream) */
  uint8_t *buf;
  size_t cap;
  int compression; /* NONE, GZIP or ZLIB (AUTO resolved at open) */
  void *z;         /* inflate state (compressed) */
  const char *zerr; /* why the compressed stream failed (static or zlib's msg) */
} loom_tfrecord_reader;

/* NOT_FOUND (with the path) when the file cannot be opened. Uncompressed. */
loom_code loom__tfrecord_open(loom_tfrecord_reader *r, const char *path, loom_status *st);
/* With a compression (LOOM__TFR_*); AUTO looks at the first bytes: a
 * valid record header -> NONE, the gzip magic 1f 8b -> GZIP, a zlib
 * header -> ZLIB, else NONE. */
loom_code loom__tfrecord_open_ex(loom_tfrecord_reader *r, const char *path, int compression, loom_status *st);
/* Next record: *data is valid until the next call. OUT_OF_RANGE at a clean
 * end of file; DATA_LOSS naming the file, the record index and the byte
 * offset for a truncated record, a CRC mismatch or a corrupt compressed
 * stream. Memory grows with the bytes actually read, never to a record
 * length claimed by a corrupt header. An uncompressed read of a file that
 * looks gzip/zlib-compressed says so and names the option. */
loom_code loom__tfrecord_next(loom_tfrecord_reader *r, const uint8_t **data, size_t *n, loom_status *st);
void loom__tfrecord_close(loom_tfrecord_reader *r);

#endif
