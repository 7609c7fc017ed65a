/* base/record_io.h - TFRecord framing (internal), shared by the
 * TFRecord dataset and the TensorBoard event files.
 *
 * A record on disk:  uint64 length (LE) | uint32 masked_crc32c(length bytes)
 *                    | data[length] | uint32 masked_crc32c(data)
 * (masked as in base/crc32c.h). */
#ifndef LOOM_TFRECORD_H
#define LOOM_TFRECORD_H
#include <stdio.h>
#include "base/base.h"

/* Appends one record to f. IO errors -> INTERNAL/... naming `what`. */
loom_code loom__tfrecord_write(FILE *f, const void *data, size_t n, const char *what, loom_status *st);

typedef struct loom_tfrecord_reader {
  FILE *f;
  char *path;
  int64_t index;   /* records read so far */
  uint64_t offset; /* byte offset of the next record */
  uint8_t *buf;
  size_t cap;
} loom_tfrecord_reader;

/* NOT_FOUND (with the path) when the file cannot be opened. */
loom_code loom__tfrecord_open(loom_tfrecord_reader *r, const char *path, loom_status *st);
/* Next record: *data is valid until the next call. OUT_OF_RANGE at a clean
 * end of file; DATA_LOSS naming the file, the record index and the byte
 * offset for a truncated record or a CRC mismatch. */
loom_code loom__tfrecord_next(loom_tfrecord_reader *r, const uint8_t **data, size_t *n, loom_status *st);
void loom__tfrecord_close(loom_tfrecord_reader *r);

#endif
