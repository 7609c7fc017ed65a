/* kernels/cpu/decode.c - tf.io.decode_raw, tf.io.decode_csv and
 * tf.strings.to_number on the CPU (see ops/decode.c for the ops). */
#include "kernels/cpu/decode.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int loom__decode_raw_size(loom_dtype dt) {
  switch (dt) {
    case LOOM_U8: return 1;
    case LOOM_I32: case LOOM_F32: return 4;
    case LOOM_I64: case LOOM_F64: return 8;
    default: return 0;
  }
}

static int host_little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

loom_code loom__k_decode_raw(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  const loom_tstring *s = X->data;
  int es = loom__decode_raw_size(ctx->attrs->dtype);
  int64_t n = ctx->out[0]->dims[ctx->out[0]->ndim - 1]; /* elements per string */
  uint8_t *o = ctx->out[0]->data;
  int swap = (ctx->attrs->keepdims != 0) != host_little_endian();
  for (int64_t i = 0; i < X->numel; i++) {
    if ((int64_t)s[i].len != n * es)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,
                             "DecodeRaw: input element %lld has %zu bytes, the first has %lld; every element must "
                             "have the same length",
                             (long long)i, s[i].len, (long long)(n * es));
    uint8_t *dst = o + (size_t)i * (size_t)(n * es);
    if (n) memcpy(dst, s[i].ptr, (size_t)(n * es));
    if (swap && es > 1)
      for (int64_t j = 0; j < n; j++)
        for (int a = 0, b = es - 1; a < b; a++, b--) {
          uint8_t t = dst[j * es + a];
          dst[j * es + a] = dst[j * es + b];
          dst[j * es + b] = t;
        }
  }
  return LOOM_OK;
}

/* Parses s[0..n) (spaces around allowed) as dt into out[i]; 0 on success. */
static int parse_number(const char *s, size_t n, loom_dtype dt, void *out, int64_t i) {
  char buf[128];
  while (n && (*s == ' ' || *s == '\t')) s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *end;
  errno = 0;
  switch (dt) {
    case LOOM_F32: {
      float v = strtof(buf, &end);
      if (*end || (errno == ERANGE && isinf(v))) return -1;
      ((float *)out)[i] = v;
      return 0;
    }
    case LOOM_F64: {
      double v = strtod(buf, &end);
      if (*end || (errno == ERANGE && isinf(v))) return -1;
      ((double *)out)[i] = v;
      return 0;
    }
    case LOOM_I32: {
      long long v = strtoll(buf, &end, 10);
      if (*end || errno == ERANGE || v < INT32_MIN || v > INT32_MAX) return -1;
      ((int32_t *)out)[i] = (int32_t)v;
      return 0;
    }
    case LOOM_I64: {
      long long v = strtoll(buf, &end, 10);
      if (*end || errno == ERANGE) return -1;
      ((int64_t *)out)[i] = (int64_t)v;
      return 0;
    }
    default: return -1;
  }
}

static const char *dt_word(loom_dtype dt) {
  return dt == LOOM_F32 || dt == LOOM_F64 ? "float" : dt == LOOM_I32 ? "int32" : "int64";
}

loom_code loom__k_string_to_number(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  const loom_tstring *s = X->data;
  for (int64_t i = 0; i < X->numel; i++)
    if (parse_number(s[i].ptr, s[i].len, ctx->attrs->dtype, ctx->out[0]->data, i))
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "StringToNumber: element %lld, \"%.*s\", is not a valid %s",
                             (long long)i, (int)(s[i].len > 100 ? 100 : s[i].len), s[i].ptr ? s[i].ptr : "",
                             dt_word(ctx->attrs->dtype));
  return LOOM_OK;
}

/* One field of a record: [b, e) of the record, quoted (the "" inside still escaped). */
typedef struct csv_field {
  size_t b, e;
  int quoted;
} csv_field;

/* Splits record r into fields (RFC 4180 quotes when quote). Returns the
 * count (at most cap: the rest of the record is not looked at; cap + 1
 * when more fields follow), -1 on a quoting error. */
static int64_t split_fields(const char *r, size_t n, char delim, int quote, csv_field *f, int64_t cap,
                            const char **why) {
  int64_t k = 0;
  size_t i = 0;
  for (;;) {
    if (k >= cap) return cap + 1;
    if (quote && i < n && r[i] == '"') {
      size_t b = ++i;
      for (;;) {
        if (i >= n) {
          *why = "a quoted field is not closed";
          return -1;
        }
        if (r[i] == '"') {
          if (i + 1 < n && r[i + 1] == '"') {
            i += 2;
            continue;
          }
          break;
        }
        i++;
      }
      f[k++] = (csv_field){b, i, 1};
      i++; /* the closing quote */
      if (i < n && r[i] != delim) {
        *why = "a quoted field must be followed by the delimiter or the end of the record";
        return -1;
      }
    } else {
      size_t b = i;
      while (i < n && r[i] != delim) {
        if (quote && r[i] == '"') {
          *why = "a quote inside an unquoted field";
          return -1;
        }
        i++;
      }
      f[k++] = (csv_field){b, i, 0};
    }
    if (i >= n) return k;
    i++; /* the delimiter */
  }
}

loom_code loom__k_decode_csv(const loom_kctx *ctx) {
  const loom_buf *R = ctx->in[0];
  const loom_tstring *rec = R->data;
  const loom_tstring *na = ctx->in[1]->data;
  const int64_t *sel = ctx->in[2]->data;
  int64_t nsel = ctx->in[2]->numel;
  int ncol = ctx->nout;
  char delim = (char)ctx->attrs->axis;
  int quote = ctx->attrs->keepdims;
  csv_field *f = ctx->ws;
  int64_t cap = ctx->attrs->num; /* the fields looked at (the workspace holds cap + 1) */
  for (int64_t r = 0; r < R->numel; r++) {
    const char *s = rec[r].ptr ? rec[r].ptr : "";
    const char *why = NULL;
    int64_t k = split_fields(s, rec[r].len, delim, quote, f, cap, &why);
    if (k < 0)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "DecodeCSV: record %lld: %s", (long long)r, why);
    if (nsel == 0 && k != ncol)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "DecodeCSV: expect %d fields but have %s%lld in record %lld",
                             ncol, k > ncol ? "more than " : "", (long long)(k > ncol ? ncol : k), (long long)r);
    if (nsel > 0 && sel[nsel - 1] >= k)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,
                             "DecodeCSV: column %lld is selected but record %lld has %lld fields",
                             (long long)sel[nsel - 1], (long long)r, (long long)k);
    for (int c = 0; c < ncol; c++) {
      const csv_field *fd = &f[nsel ? sel[c] : c];
      const loom_buf *D = ctx->in[3 + c];
      loom_dtype dt = D->dtype;
      const char *p = s + fd->b;
      size_t len = fd->e - fd->b;
      int is_na = len == 0 || (na->len == len && na->len && !memcmp(na->ptr, p, len));
      if (is_na) {
        if (D->numel == 0)
          return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,
                                 "DecodeCSV: field %d (column %lld) is required but missing in record %lld", c,
                                 (long long)(nsel ? sel[c] : c), (long long)r);
        if (dt == LOOM_STRING) {
          ((loom_tstring *)ctx->out[c]->data)[r] = ((const loom_tstring *)D->data)[0];
        } else {
          size_t es = dt == LOOM_F32 || dt == LOOM_I32 ? 4 : 8;
          memcpy((char *)ctx->out[c]->data + (size_t)r * es, D->data, es);
        }
        continue;
      }
      if (dt == LOOM_STRING) {
        loom_tstring *o = (loom_tstring *)ctx->out[c]->data + r;
        if (!fd->quoted || !memchr(p, '"', len)) { /* the record's bytes live through the run */
          o->ptr = (char *)p;
          o->len = len;
          continue;
        }
        if (!ctx->strings)
          return loom_status_set(ctx->st, LOOM_FAILED_PRECONDITION, "DecodeCSV outputs strings and needs a string arena");
        char *q = loom__strarena_alloc(ctx->strings, len);
        if (!q) return loom_status_set(ctx->st, LOOM_RESOURCE_EXHAUSTED, "DecodeCSV: out of memory");
        size_t m = 0;
        for (size_t j = 0; j < len; j++) {
          q[m++] = p[j];
          if (p[j] == '"') j++; /* "" -> " */
        }
        o->ptr = q;
        o->len = m;
        continue;
      }
      if (parse_number(p, len, dt, ctx->out[c]->data, r))
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "DecodeCSV: field %d in record %lld is not a valid %s: %.*s",
                               c, (long long)r, dt_word(dt), (int)(len > 100 ? 100 : len), p);
    }
  }
  return LOOM_OK;
}

size_t loom__ws_decode_csv(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                           const loom_buf *const *out) {
  (void)nin, (void)in, (void)nout, (void)out;
  return (size_t)(a->num + 1) * sizeof(csv_field);
}
