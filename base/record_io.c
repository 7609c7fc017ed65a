/* base/record_io.c - TFRecord framing. See tfrecord.h. */
#include "base/record_io.h"
#include <errno.h>
#include <sys/stat.h>
#include <string.h>
#include "base/crc32c.h"

static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

loom_code loom__tfrecord_write(FILE *f, const void *data, size_t n, const char *what, loom_status *st) {
  uint8_t head[12], tail[4];
  put_le(head, (uint64_t)n, 8);
  put_le(head + 8, loom__crc32c_masked(head, 8), 4);
  put_le(tail, loom__crc32c_masked(data, n), 4);
  if (fwrite(head, 1, 12, f) != 12 || (n && fwrite(data, 1, n, f) != n) || fwrite(tail, 1, 4, f) != 4)
    return loom_status_set(st, LOOM_INTERNAL, "writing a record to %s: %s", what ? what : "TFRecord file",
                           strerror(errno));
  return LOOM_OK;
}

loom_code loom__tfrecord_open(loom_tfrecord_reader *r, const char *path, loom_status *st) {
  memset(r, 0, sizeof *r);
  r->f = fopen(path, "rb");
  if (!r->f) return loom_status_set(st, LOOM_NOT_FOUND, "cannot open TFRecord file %s: %s", path, strerror(errno));
  r->path = loom__strdup(path);
  if (!r->path) {
    fclose(r->f);
    r->f = NULL;
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  return LOOM_OK;
}

static loom_code corrupt(loom_tfrecord_reader *r, loom_status *st, const char *why) {
  return loom_status_set(st, LOOM_DATA_LOSS, "%s: record %lld at byte offset %llu: %s", r->path,
                         (long long)r->index, (unsigned long long)r->offset, why);
}

loom_code loom__tfrecord_next(loom_tfrecord_reader *r, const uint8_t **data, size_t *n, loom_status *st) {
  uint8_t head[12], tail[4];
  size_t got = fread(head, 1, 12, r->f);
  if (got == 0 && feof(r->f)) return loom_status_set(st, LOOM_OUT_OF_RANGE, "end of %s", r->path);
  if (got != 12) return corrupt(r, st, "truncated record header");
  if ((uint32_t)get_le(head + 8, 4) != loom__crc32c_masked(head, 8)) return corrupt(r, st, "length CRC mismatch");
  uint64_t len = get_le(head, 8);
  if (len > ((uint64_t)1 << 40)) return corrupt(r, st, "implausible record length");
  /* Never allocate more than the file can hold: a regular file's remaining
   * bytes bound the length; for anything else (a pipe) the buffer grows with
   * what is actually read. */
  struct stat sb;
  off_t pos = ftello(r->f);
  if (pos >= 0 && !fstat(fileno(r->f), &sb) && S_ISREG(sb.st_mode)) {
    uint64_t left = (uint64_t)sb.st_size > (uint64_t)pos ? (uint64_t)sb.st_size - (uint64_t)pos : 0;
    if (len <= left && left - len < 4) return corrupt(r, st, "truncated record data CRC");
    if (len > left) {
      char why[160];
      snprintf(why, sizeof why, "truncated record data (length %llu, %llu bytes left in the file)",
               (unsigned long long)len, (unsigned long long)left);
      return corrupt(r, st, why);
    }
  }
  size_t have = 0;
  while (have < len || r->cap == 0) {
    size_t want = (size_t)len + 1;
    if (want > r->cap) { /* grow by doubling from 64 KiB, at most to len + 1 */
      size_t cap = r->cap < ((size_t)1 << 16) ? ((size_t)1 << 16) : r->cap * 2;
      if (cap > want) cap = want;
      uint8_t *b = loom__realloc(r->buf, cap);
      if (!b) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory reading %s", r->path);
      r->buf = b;
      r->cap = cap;
    }
    size_t room = (r->cap - 1 < len ? r->cap - 1 : (size_t)len) - have;
    if (room && fread(r->buf + have, 1, room, r->f) != room) return corrupt(r, st, "truncated record data");
    have += room;
  }
  if (fread(tail, 1, 4, r->f) != 4) return corrupt(r, st, "truncated record data CRC");
  if ((uint32_t)get_le(tail, 4) != loom__crc32c_masked(r->buf, (size_t)len)) return corrupt(r, st, "data CRC mismatch");
  r->buf[len] = 0;
  *data = r->buf;
  *n = (size_t)len;
  r->index++;
  r->offset += 16 + len;
  return LOOM_OK;
}

void loom__tfrecord_close(loom_tfrecord_reader *r) {
  if (r->f) fclose(r->f);
  loom__free(r->path);
  loom__free(r->buf);
  memset(r, 0, sizeof *r);
}
