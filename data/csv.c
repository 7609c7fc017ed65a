/* data/csv.c - CSV files (RFC 4180: quoted fields may hold the
 * delimiter, "" for a quote, and newlines; CRLF tolerated; blank lines
 * skipped). One scalar component per selected column (a ragged pair for a
 * multi-valued one). Errors name file:line (the line where the record
 * starts).
 *
 * Speed: the file is read in 1 MiB blocks and records are split in place
 * (fields point into the block; only quoted fields with "" are rewritten).
 * Rows go straight into column buffers (loom_ds_rows, data_impl.h): a batch
 * over this dataset (or over take / repeat of it) takes up to batch_size
 * rows at once and turns them into the batch tensors, strings in one block
 * per tensor; a single element is one such row. Numbers in the common
 * decimal forms are converted here, exactly as strtof / strtod / strtoll
 * would (parse_num_fast), the rest by those functions. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/data_impl.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct csv_col {
  char *name;
  loom_dtype dtype;
  int out;           /* component index, -1 when not selected */
  int has_default;
  double dnum;       /* the default of numeric columns */
  int64_t dint;
  char *dstr;        /* the default of string columns */
  size_t dstr_len;
  char sep;          /* multi-valued (ragged) cells: the separator; 0 = scalar */
  int select;        /* a selected column (its header name is checked) */
} csv_col;

typedef struct csv_ds {
  loom_dataset base;
  int nfiles, file;
  char **paths;
  int header;
  int check_header;   /* the header line must give the columns' names */
  char delim;
  int ncol;
  csv_col *cols;
  FILE *f;
  int64_t line;       /* line of the next character (1-based) */
  /* the file is read in blocks: blk[pos..end) not parsed yet; eof: nothing left to read */
  char *blk;
  size_t bcap, pos, end;
  int eof;
  uint8_t special[256]; /* bytes that end an unquoted run: delimiter, quote, CR, LF */
  /* the record just read: field i is fs[i][0..fl[i]) inside blk (not NUL-terminated) */
  const char **fs;
  size_t *fl;
  int nf, fcap;
  char *tmp;          /* scratch for numbers given to strtod & co */
  size_t tmpcap;
  loom_ds_rows erb;   /* one row (the element path) */
} csv_ds;

enum { CSV_BLOCK = 1 << 20, CSV_MORE = -1, CSV_SLACK = 64 };

/* The first byte of [q, e) that is the delimiter, a quote, CR or LF; e if
 * none. Reads up to 15 bytes past e (the block's slack). */
#ifdef __SSE2__
typedef struct specials { __m128i d, q, r, n; } specials;
static inline specials specials_of(char delim) {
  specials v = {_mm_set1_epi8(delim), _mm_set1_epi8('"'), _mm_set1_epi8('\r'), _mm_set1_epi8('\n')};
  return v;
}
static inline char *find_special(char *q, char *e, const specials *v) {
  while (q < e) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)q);
    __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, v->d), _mm_cmpeq_epi8(x, v->q)),
                             _mm_or_si128(_mm_cmpeq_epi8(x, v->r), _mm_cmpeq_epi8(x, v->n)));
    unsigned mask = (unsigned)_mm_movemask_epi8(m);
    if (mask) {
      q += __builtin_ctz(mask);
      return q < e ? q : e;
    }
    q += 16;
  }
  return e;
}
#else
typedef struct specials { const uint8_t *tab; } specials;
static inline char *find_special(char *q, char *e, const specials *v) {
  while (q < e && !v->tab[(uint8_t)*q]) q++;
  return q;
}
#endif

/* ---- reading records ---- */
/* Keeps blk[pos..end), reads more behind it (the block grows when a record
 * fills it). Sets eof when the file has nothing more. */
static loom_code refill(csv_ds *c, const char *path, loom_status *st) {
  size_t keep = c->end - c->pos;
  if (c->pos && keep) memmove(c->blk, c->blk + c->pos, keep);
  c->pos = 0;
  c->end = keep;
  if (c->end + 1 >= c->bcap || !c->blk) {
    size_t nc = c->bcap ? c->bcap * 2 : CSV_BLOCK;
    char *b = loom__realloc(c->blk, nc + CSV_SLACK); /* the slack: 16-byte loads near the end */
    if (!b) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s:%lld: out of memory", path, (long long)c->line);
    c->blk = b;
    c->bcap = nc;
  }
  size_t got = fread(c->blk + c->end, 1, c->bcap - 1 - c->end, c->f);
  if (!got) {
    if (ferror(c->f))
      return loom_status_set(st, LOOM_DATA_LOSS, "%s:%lld: read error: %s", path, (long long)c->line, strerror(errno));
    c->eof = 1;
  }
  c->end += got;
  memset(c->blk + c->end, 0, 16); /* defined bytes for find_special's loads */
  return LOOM_OK;
}

static int grow_fields(csv_ds *c) {
  {
    int nc = c->fcap ? c->fcap * 2 : 16;
    const char **a = loom__realloc(c->fs, (size_t)nc * sizeof *a);
    if (!a) return -1;
    c->fs = a;
    size_t *b = loom__realloc(c->fl, (size_t)nc * sizeof *b);
    if (!b) return -1;
    c->fl = b;
    c->fcap = nc;
  }
  return 0;
}
static inline int add_field(csv_ds *c, const char *s, size_t n) {
  if (c->nf == c->fcap && grow_fields(c)) return -1;
  c->fs[c->nf] = s;
  c->fl[c->nf++] = n;
  return 0;
}

/* Removes the doubled quotes of a quoted field (in place). */
static size_t unescape(char *s, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    s[o++] = s[i];
    if (s[i] == '"') i++; /* "" -> " */
  }
  return o;
}

/* Scans one record starting at blk[pos] (not a blank line). LOOM_OK with
 * the fields set and pos / line past the record; CSV_MORE when the block
 * ends inside it before the end of the file (nothing is changed then). */
static int scan_record(csv_ds *c, const char *path, int64_t rec_line, loom_status *st, loom_code *err) {
  char *p = c->blk + c->pos, *e = c->blk + c->end;
#ifdef __SSE2__
  const specials sv = specials_of(c->delim);
#else
  const specials sv = {c->special};
#endif
  const int eof = c->eof;
  const char delim = c->delim;
  int64_t ln = c->line;
  uint64_t escaped = 0; /* fields 0..63 with "" to undo; later ones: esc_more */
  int esc_more = 0;
  c->nf = 0;
  for (;;) { /* one field; p is its first byte */
    if (p == e) {
      if (!eof) return CSV_MORE;
      if (add_field(c, p, 0)) goto oom;
      break;
    }
    if (*p == '"') {
      int64_t quote_line = ln;
      char *q = p + 1;
      int esc = 0;
      for (;;) {
        while (q < e && *q != '"' && *q != '\n') q++;
        if (q == e) {
          if (!eof) return CSV_MORE;
          *err = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                                 "%s:%lld: unterminated quoted field (the quote opens on line %lld)", path,
                                 (long long)rec_line, (long long)quote_line);
          return 0;
        }
        if (*q == '\n') {
          ln++;
          q++;
          continue;
        }
        if (q + 1 == e && !eof) return CSV_MORE;
        if (q + 1 < e && q[1] == '"') {
          esc = 1;
          q += 2;
          continue;
        }
        break; /* the closing quote */
      }
      if (esc) {
        if (c->nf < 64) escaped |= 1ull << c->nf;
        else esc_more = 1;
      }
      if (add_field(c, p + 1, (size_t)(q - p - 1))) goto oom;
      p = q + 1;
      if (p == e) {
        if (!eof) return CSV_MORE;
        break;
      }
      char ch = *p;
      if (ch == delim) {
        p++;
        continue;
      }
      if (ch == '\n') {
        ln++;
        p++;
        break;
      }
      if (ch == '\r') {
        if (p + 1 == e) {
          if (!eof) return CSV_MORE;
          p++;
          break;
        }
        if (p[1] == '\n') {
          ln++;
          p += 2;
          break;
        }
      }
      *err = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s:%lld: malformed quoted field %d: '%c' after the closing quote (a quote inside a "
                             "quoted field is written \"\")",
                             path, (long long)ln, c->nf, ch);
      return 0;
    }
    char *q = p;
    for (;;) {
      q = find_special(q, e, &sv);
      if (q == e) {
        if (!eof) return CSV_MORE;
        break;
      }
      if (*q == '\r') {
        if (q + 1 == e) {
          if (!eof) return CSV_MORE;
          break;
        }
        if (q[1] != '\n') { /* a lone CR is data */
          q++;
          continue;
        }
      }
      break;
    }
    if (add_field(c, p, (size_t)(q - p))) goto oom;
    if (q == e) {
      p = q;
      break;
    }
    if (*q == delim) {
      p = q + 1;
      continue;
    }
    if (*q == '"') {
      *err = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s:%lld: field %d: a quote inside an unquoted field (quote the field and write \"\")",
                             path, (long long)ln, c->nf);
      return 0;
    }
    /* LF, or CR LF, or CR at the end of the file */
    p = q + (*q == '\r' ? (q + 1 < e ? 2 : 1) : 1);
    ln++;
    break;
  }
  if (escaped || esc_more)
    for (int i = 0; i < c->nf; i++)
      if (i >= 64 ? esc_more : (int)(escaped >> i & 1)) {
        /* a quoted field: fs points just after its opening quote, inside blk */
        char *f = (char *)c->fs[i];
        c->fl[i] = unescape(f, c->fl[i]);
      }
  c->pos = (size_t)(p - c->blk);
  c->line = ln;
  *err = LOOM_OK;
  return 0;
oom:
  *err = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s:%lld: out of memory", path, (long long)ln);
  return 0;
}

/* Reads one record into fs / fl. *rec_line = its first line. OUT_OF_RANGE
 * at the end of the file. */
static loom_code read_record(csv_ds *c, const char *path, int64_t *rec_line, loom_status *st) {
  loom_code rc;
  c->nf = 0;
  for (;;) {
    /* blank lines (LF, CR LF; a CR alone at the end of the file) */
    while (c->pos < c->end) {
      char ch = c->blk[c->pos];
      if (ch == '\n') {
        c->pos++;
        c->line++;
        continue;
      }
      if (ch == '\r') {
        if (c->pos + 1 == c->end && !c->eof) break; /* decide after the refill */
        if (c->pos + 1 == c->end || c->blk[c->pos + 1] == '\n') {
          c->pos += c->pos + 1 == c->end ? 1 : 2;
          c->line++;
          continue;
        }
      }
      break;
    }
    if (c->pos + 1 >= c->end && !c->eof) { /* empty, or a CR to decide */
      if ((rc = refill(c, path, st))) return rc;
      continue;
    }
    if (c->pos == c->end) return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
    *rec_line = c->line;
    loom_code err = LOOM_OK;
    if (scan_record(c, path, *rec_line, st, &err) == CSV_MORE) {
      if ((rc = refill(c, path, st))) return rc;
      continue;
    }
    return err;
  }
}

/* ---- values ---- */
static int is_space(char ch) { return ch == ' ' || ch == '\t'; }

/* strtof / strtod / strtoll on a NUL-terminated s (the reference). */
static int parse_num_slow(const char *s, loom_dtype dt, double *d, int64_t *i) {
  while (is_space(*s)) s++;
  if (!*s) return -1;
  char *end;
  errno = 0;
  if (dt == LOOM_F32 || dt == LOOM_F64) {
    *d = dt == LOOM_F32 ? (double)strtof(s, &end) : strtod(s, &end);
    if (end == s) return -1;
  } else {
    long long v = strtoll(s, &end, 10);
    if (end == s || errno == ERANGE) return -1;
    if (dt == LOOM_I32 && (v < INT32_MIN || v > INT32_MAX)) return -1;
    *i = v;
  }
  while (is_space(*end)) end++;
  return *end ? -1 : 0;
}

static const float P10F[11] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f};
static const double P10D[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The common forms exactly: [ \t]* [+-]? digits [. digits] [e [+-] digits]
 * [ \t]*. A float whose significant digits make an integer m < 2^24 (float)
 * or 2^53 (double) and whose power of ten is within 10 (float) or 22
 * (double) is m * 10^k or m / 10^-k, one correctly rounded operation on
 * exact operands: what strtof / strtod give (Clinger). 1 = done; 0 = not
 * such a form (the caller uses the library). */
static inline __attribute__((always_inline)) int parse_num_fast(const char *s, const char *e, loom_dtype dt, double *d,
                                                                int64_t *iv) {
  while (s < e && is_space(*s)) s++;
  int neg = 0;
  if (s < e && (*s == '-' || *s == '+')) neg = *s++ == '-';
  uint64_t m = 0;
  int sig = 0, ndig = 0, k = 0;
  while (s < e && (unsigned)(*s - '0') < 10) {
    m = m * 10 + (unsigned)(*s++ - '0');
    sig += m != 0;
    ndig++;
  }
  if (dt == LOOM_I32 || dt == LOOM_I64) {
    while (s < e && is_space(*s)) s++;
    if (!ndig || s != e || ndig > 18) return 0;
    int64_t v = neg ? -(int64_t)m : (int64_t)m;
    if (dt == LOOM_I32 && (v < INT32_MIN || v > INT32_MAX)) return 0;
    *iv = v;
    return 1;
  }
  if (sig > 19) return 0;
  if (s < e && *s == '.') {
    s++;
    while (s < e && (unsigned)(*s - '0') < 10) {
      m = m * 10 + (unsigned)(*s++ - '0');
      sig += m != 0;
      ndig++;
      k--;
    }
    if (sig > 19) return 0;
  }
  if (!ndig) return 0;
  if (s < e && (*s == 'e' || *s == 'E')) {
    s++;
    int eneg = 0, x = 0, nx = 0;
    if (s < e && (*s == '-' || *s == '+')) eneg = *s++ == '-';
    while (s < e && (unsigned)(*s - '0') < 10 && nx < 6) {
      x = x * 10 + (*s++ - '0');
      nx++;
    }
    if (!nx) return 0;
    k += eneg ? -x : x;
  }
  while (s < e && is_space(*s)) s++;
  if (s != e) return 0;
  if (dt == LOOM_F32) {
    if (m > (1u << 24) || k < -10 || k > 10) return 0;
    float f = (float)m;
    if (k) f = k < 0 ? f / P10F[-k] : f * P10F[k];
    *d = neg ? -f : f;
    return 1;
  }
  if (m > (1ull << 53) || k < -22 || k > 22) return 0;
  double v = (double)m;
  if (k) v = k < 0 ? v / P10D[-k] : v * P10D[k];
  *d = neg ? -v : v;
  return 1;
}

static int parse_num_n(char **tmp, size_t *tmpcap, const char *s, size_t n, loom_dtype dt, double *d, int64_t *i) {
  if (parse_num_fast(s, s + n, dt, d, i)) return 0;
  if (n + 1 > *tmpcap) {
    size_t nc = n + 64;
    char *t = loom__realloc(*tmp, nc);
    if (!t) return -1;
    *tmp = t;
    *tmpcap = nc;
  }
  memcpy(*tmp, s, n);
  (*tmp)[n] = 0;
  if (memchr(s, 0, n)) return -1; /* a NUL inside the field */
  return parse_num_slow(*tmp, dt, d, i);
}

int loom__csv_parse_num(const char *s, size_t n, loom_dtype dt, double *d, int64_t *i) {
  if (parse_num_fast(s, s + n, dt, d, i)) return 0;
  char buf[256];
  if (n >= sizeof buf || memchr(s, 0, n)) {
    char *t = NULL;
    size_t cap = 0;
    int r = parse_num_n(&t, &cap, s, n, dt, d, i);
    loom__free(t);
    return r;
  }
  memcpy(buf, s, n);
  buf[n] = 0;
  return parse_num_slow(buf, dt, d, i);
}

/* Appends one number (dtype dt) to column k. */
static inline int push_num(loom_ds_rowcol *k, loom_dtype dt, double d, int64_t i) {
  size_t es = dt == LOOM_F32 || dt == LOOM_I32 ? 4 : 8;
  if (k->nv == k->vcap && loom__ds_rowcol_grow(k, k->nv + 1, es)) return -1;
  switch (dt) {
    case LOOM_F32: ((float *)k->v)[k->nv] = (float)d; break;
    case LOOM_F64: ((double *)k->v)[k->nv] = d; break;
    case LOOM_I32: ((int32_t *)k->v)[k->nv] = (int32_t)i; break;
    default: ((int64_t *)k->v)[k->nv] = i; break;
  }
  k->nv++;
  return 0;
}

/* push_str for a field inside the read block: short ones are copied as
 * one 16-byte move (the block's slack makes the read safe; sb keeps 16
 * spare bytes). */
static inline int push_field(loom_ds_rowcol *k, const char *s, size_t n) {
  if (k->nv == k->vcap && loom__ds_rowcol_grow(k, k->nv + 1, 2 * sizeof(size_t))) return -1;
  if (k->sbl + n + 17 > k->sbcap && loom__ds_rowcol_grow_sb(k, k->sbl + n + 17)) return -1;
  size_t *ol = (size_t *)k->v + 2 * k->nv;
  ol[0] = k->sbl;
  ol[1] = n;
  char *o = k->sb + k->sbl;
  if (n <= 16)
    memcpy(o, s, 16);
  else
    memcpy(o, s, n);
  o[n] = 0;
  k->sbl += n + 1;
  k->nv++;
  return 0;
}

static inline int push_str(loom_ds_rowcol *k, const char *s, size_t n) {
  if (k->nv == k->vcap && loom__ds_rowcol_grow(k, k->nv + 1, 2 * sizeof(size_t))) return -1;
  if (k->sbl + n + 1 > k->sbcap && loom__ds_rowcol_grow_sb(k, k->sbl + n + 1)) return -1;
  size_t *ol = (size_t *)k->v + 2 * k->nv;
  ol[0] = k->sbl;
  ol[1] = n;
  if (n) memcpy(k->sb + k->sbl, s, n);
  k->sb[k->sbl + n] = 0;
  k->sbl += n + 1;
  k->nv++;
  return 0;
}

/* A multi-valued cell s[0..len) -> its items appended to column k and one
 * more row split. */
static loom_code push_multi(csv_ds *c, loom_ds_rowcol *k, int64_t row, const csv_col *col, const char *s, size_t len,
                            const char *path, int64_t line, loom_status *st) {
  if (len) {
    const char *p = s, *end = s + len;
    for (int64_t j = 0;; j++) {
      const char *q = memchr(p, col->sep, (size_t)(end - p));
      if (!q) q = end;
      size_t n = (size_t)(q - p);
      if (col->dtype == LOOM_STRING) {
        if (push_str(k, p, n)) goto oom;
      } else {
        double d = 0;
        int64_t iv = 0;
        if (!n)
          return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                                 "%s:%lld: column '%s': item %lld of the multi-valued cell '%.*s' is empty (%s wanted)",
                                 path, (long long)line, col->name, (long long)j, (int)(len > 64 ? 64 : len), s,
                                 loom_dtype_name(col->dtype));
        if (n >= 128 || parse_num_n(&c->tmp, &c->tmpcap, p, n, col->dtype, &d, &iv))
          return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                                 "%s:%lld: column '%s': cannot parse item %lld '%.*s' of the multi-valued cell '%.*s' "
                                 "as %s",
                                 path, (long long)line, col->name, (long long)j, (int)(n > 64 ? 64 : n), p,
                                 (int)(len > 64 ? 64 : len), s, loom_dtype_name(col->dtype));
        if (push_num(k, col->dtype, d, iv)) goto oom;
      }
      if (q == end) break;
      p = q + 1;
    }
  }
  if (row + 2 > k->spcap && loom__ds_rowcol_grow_sp(k, row + 2)) goto oom;
  k->sp[row + 1] = k->nv;
  return LOOM_OK;
oom:
  return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s:%lld: out of memory", path, (long long)line);
}

/* The record just read -> one more row of rb. */
static loom_code convert_row(csv_ds *c, loom_ds_rows *rb, const char *path, int64_t rl, loom_status *st) {
  if (c->nf != c->ncol)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s:%lld: expected %d fields, found %d", path, (long long)rl,
                           c->ncol, c->nf);
  loom_code rc;
  for (int j = 0; j < c->ncol; j++) {
    const csv_col *col = &c->cols[j];
    if (col->out < 0) continue;
    loom_ds_rowcol *k = &rb->col[col->out];
    const char *s = c->fs[j];
    size_t len = c->fl[j];
    if (col->sep) {
      if ((rc = push_multi(c, k, rb->n, col, s, len, path, rl, st))) return rc;
      continue;
    }
    if (len) { /* the common cases, each with its own inlined parser */
      double d = 0;
      int64_t iv = 0;
      switch (col->dtype) {
        case LOOM_STRING:
          if (push_field(k, s, len)) goto oom;
          continue;
        case LOOM_F32:
          if (!parse_num_fast(s, s + len, LOOM_F32, &d, &iv)) break;
          if (k->nv == k->vcap && loom__ds_rowcol_grow(k, k->nv + 1, 4)) goto oom;
          ((float *)k->v)[k->nv++] = (float)d;
          continue;
        case LOOM_I32:
          if (!parse_num_fast(s, s + len, LOOM_I32, &d, &iv)) break;
          if (k->nv == k->vcap && loom__ds_rowcol_grow(k, k->nv + 1, 4)) goto oom;
          ((int32_t *)k->v)[k->nv++] = (int32_t)iv;
          continue;
        case LOOM_F64:
          if (!parse_num_fast(s, s + len, LOOM_F64, &d, &iv)) break;
          if (k->nv == k->vcap && loom__ds_rowcol_grow(k, k->nv + 1, 8)) goto oom;
          ((double *)k->v)[k->nv++] = d;
          continue;
        default:
          if (!parse_num_fast(s, s + len, LOOM_I64, &d, &iv)) break;
          if (k->nv == k->vcap && loom__ds_rowcol_grow(k, k->nv + 1, 8)) goto oom;
          ((int64_t *)k->v)[k->nv++] = iv;
          continue;
      }
    }
    if (!len) {
      if (!col->has_default)
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s:%lld: column '%s' is empty and has no default value",
                               path, (long long)rl, col->name);
      if (col->dtype == LOOM_STRING ? push_str(k, col->dstr, col->dstr_len) : push_num(k, col->dtype, col->dnum, col->dint))
        goto oom;
      continue;
    }
    if (col->dtype == LOOM_STRING) {
      if (push_str(k, s, len)) goto oom;
      continue;
    }
    double d = 0;
    int64_t iv = 0;
    if (parse_num_n(&c->tmp, &c->tmpcap, s, len, col->dtype, &d, &iv))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s:%lld: column '%s': cannot parse '%.*s' as %s", path,
                             (long long)rl, col->name, (int)(len > 64 ? 64 : len), s, loom_dtype_name(col->dtype));
    if (push_num(k, col->dtype, d, iv)) goto oom;
  }
  rb->n++;
  return LOOM_OK;
oom:
  return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s:%lld: out of memory", path, (long long)rl);
}

/* ---- the dataset ---- */
static loom_code open_file(csv_ds *c, loom_status *st) {
  const char *path = c->paths[c->file];
  c->f = fopen(path, "rb");
  if (!c->f) return loom_status_set(st, LOOM_NOT_FOUND, "cannot open CSV file %s: %s", path, strerror(errno));
  c->line = 1;
  c->pos = c->end = 0;
  c->eof = 0;
  c->nf = 0;
  if (!c->header) return LOOM_OK;
  int64_t rl;
  loom_code rc = read_record(c, path, &rl, st);
  if (rc == LOOM_OUT_OF_RANGE) return LOOM_OK; /* an empty file: the next read ends it */
  if (rc) return rc;
  if (c->nf != c->ncol)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s:%lld: the header has %d columns, the options describe %d",
                           path, (long long)rl, c->nf, c->ncol);
  /* the header must name the selected columns as the options do (or, for a column named by the header, as the
     first file's header did); an empty header field names nothing and is not checked */
  for (int j = 0; j < c->ncol && c->check_header; j++) {
    const char *want = c->cols[j].name;
    if (want && c->cols[j].select && c->fl[j] && (strlen(want) != c->fl[j] || memcmp(want, c->fs[j], c->fl[j])))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s:%lld: the header names column %d '%.*s', but columns[%d] is '%s' (columns swapped "
                             "or misspelled?)",
                             path, (long long)rl, j + 1, (int)(c->fl[j] > 64 ? 64 : c->fl[j]), c->fs[j], j, want);
  }
  return LOOM_OK;
}

static void close_file(csv_ds *c) {
  if (c->f) fclose(c->f);
  c->f = NULL;
}

static loom_code csv_rows(loom_dataset *ds, loom_ds_rows *rb, int64_t want, loom_status *st) {
  csv_ds *c = (csv_ds *)ds;
  loom_code rc;
  int64_t got = 0, rl;
  while (got < want) {
    if (!c->f) {
      if (c->file >= c->nfiles) break;
      if ((rc = open_file(c, st))) return rc;
    }
    const char *path = c->paths[c->file];
    rc = read_record(c, path, &rl, st);
    if (rc == LOOM_OUT_OF_RANGE) {
      close_file(c);
      c->file++;
      continue;
    }
    if (rc || (rc = convert_row(c, rb, path, rl, st))) return rc;
    got++;
  }
  return got ? LOOM_OK : loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
}

static loom_code csv_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  csv_ds *c = (csv_ds *)ds;
  loom_code rc;
  if (!c->erb.col && (rc = loom__ds_rows_init(&c->erb, ds, st))) return rc;
  loom__ds_rows_reset(&c->erb, ds);
  if ((rc = csv_rows(ds, &c->erb, 1, st))) return rc;
  return loom__ds_rows_emit(ds, &c->erb, values, 0, st);
}

static loom_code csv_reset(loom_dataset *ds, loom_status *st) {
  (void)st;
  csv_ds *c = (csv_ds *)ds;
  close_file(c);
  c->file = 0;
  return LOOM_OK;
}

static void csv_destroy(loom_dataset *ds) {
  csv_ds *c = (csv_ds *)ds;
  close_file(c);
  if (c->paths)
    for (int i = 0; i < c->nfiles; i++) loom__free(c->paths[i]);
  loom__free(c->paths);
  if (c->cols)
    for (int i = 0; i < c->ncol; i++) {
      loom__free(c->cols[i].name);
      loom__free(c->cols[i].dstr);
    }
  loom__free(c->cols);
  loom__free(c->blk);
  loom__free(c->fs);
  loom__free(c->fl);
  loom__free(c->tmp);
  loom__ds_rows_free(&c->erb);
}

static const loom_ds_vtable csv_vt = {"csv", csv_next, NULL, csv_reset, csv_destroy, NULL, NULL};

static loom_dataset *fail(loom_dataset *ds) {
  loom_dataset_free(ds);
  return NULL;
}

loom_csv_options loom_csv_options_default(void) {
  loom_csv_options o = {sizeof(loom_csv_options), 1, ',', 0, NULL, NULL};
  return o;
}

loom_dataset *loom_dataset_csv(int nfiles, const char *const *paths, const loom_csv_options *opt, loom_status *st) {
  loom_csv_options o = loom_csv_options_default();
  if (opt && LOOM__OPTS_TAKE(&o, opt, "dataset_csv", loom_csv_options, st)) return NULL;
  if (opt) opt = &o;
  if (nfiles <= 0 || !paths || !opt) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: %s",
                    nfiles <= 0 ? "nfiles must be positive" : !paths ? "paths is NULL" : "opt is NULL");
    return NULL;
  }
  for (int i = 0; i < nfiles; i++)
    if (!paths[i]) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: paths[%d] is NULL", i);
      return NULL;
    }
  if (opt->ncolumns <= 0 || !opt->columns) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: %s",
                    opt->ncolumns <= 0 ? "ncolumns must be positive" : "columns is NULL");
    return NULL;
  }
  char delim = opt->delimiter ? opt->delimiter : ',';
  if (delim == '"' || delim == '\n' || delim == '\r') {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: the delimiter cannot be a quote or a line break");
    return NULL;
  }
  int nsel = 0;
  for (int j = 0; j < opt->ncolumns; j++) {
    const loom_csv_column *k = &opt->columns[j];
    if (!k->select) continue;
    nsel += k->separator ? 2 : 1;
    if (k->separator && (k->separator == delim || k->separator == '"' || k->separator == '\n' || k->separator == '\r')) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "dataset_csv: columns[%d]%s%s: the separator cannot be the delimiter, a quote or a line break",
                      j, k->name ? " " : "", k->name ? k->name : "");
      return NULL;
    }
    if (k->separator && k->default_value) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "dataset_csv: columns[%d]%s%s is multi-valued and takes no default_value (an empty cell is an "
                      "empty row)",
                      j, k->name ? " " : "", k->name ? k->name : "");
      return NULL;
    }
    loom_dtype dt = k->dtype;
    if (dt != LOOM_F32 && dt != LOOM_F64 && dt != LOOM_I32 && dt != LOOM_I64 && dt != LOOM_STRING) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "dataset_csv: columns[%d] has dtype %s; use float32, float64, int32, int64 or string", j,
                      loom_dtype_name(dt));
      return NULL;
    }
    if (!k->name && !opt->header) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: columns[%d] has no name and header is off", j);
      return NULL;
    }
  }
  if (!nsel) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: no column is selected");
    return NULL;
  }
  csv_ds *c = (csv_ds *)loom__ds_new(sizeof(csv_ds), &csv_vt, nsel, st);
  if (!c) return NULL;
  loom_dataset *ds = &c->base;
  c->header = opt->header != 0;
  c->check_header = opt->header != LOOM_CSV_HEADER_SKIP;
  c->delim = delim;
  c->special[(uint8_t)delim] = c->special['"'] = c->special['\r'] = c->special['\n'] = 1;
  ds->next_rows = csv_rows;
  c->paths = loom__calloc((size_t)nfiles, sizeof *c->paths);
  c->cols = loom__calloc((size_t)opt->ncolumns, sizeof *c->cols);
  if (!c->paths || !c->cols) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_csv: out of memory");
    return fail(ds);
  }
  c->nfiles = nfiles;
  c->ncol = opt->ncolumns;
  for (int i = 0; i < nfiles; i++)
    if (!(c->paths[i] = loom__strdup(paths[i]))) {
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_csv: out of memory");
      return fail(ds);
    }
  /* every file must open (its header naming the columns given); the first one's header names unnamed columns */
  for (int j = 0; j < c->ncol; j++)
    if ((c->cols[j].select = opt->columns[j].select != 0) && opt->columns[j].name &&
        !(c->cols[j].name = loom__strdup(opt->columns[j].name))) {
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_csv: out of memory");
      return fail(ds);
    }
  for (int i = nfiles - 1; i >= 0; i--) {
    c->file = i;
    if (open_file(c, st)) return fail(ds);
    if (i) close_file(c);
  }
  if (c->header && !c->nf) {
    /* an empty first file: only explicit names */
    for (int j = 0; j < c->ncol; j++)
      if (opt->columns[j].select && !opt->columns[j].name) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: empty file, no header to name columns[%d]", paths[0], j);
        return fail(ds);
      }
  }
  int out = 0;
  for (int j = 0; j < c->ncol; j++) {
    const loom_csv_column *k = &opt->columns[j];
    csv_col *col = &c->cols[j];
    if (col->name) {
      /* a selected column named by the options: named before the files opened */
    } else if (k->name) {
      col->name = loom__strdup(k->name);
    } else if (!c->header || !c->nf) {
      col->name = loom__strdup("");
    } else if ((col->name = loom__malloc(c->fl[j] + 1))) { /* the header's field */
      memcpy(col->name, c->fs[j], c->fl[j]);
      col->name[c->fl[j]] = 0;
    }
    col->dtype = k->dtype;
    col->sep = k->select ? k->separator : 0;
    col->out = k->select ? out : -1;
    if (k->select) out += col->sep ? 2 : 1;
    if (!col->name) {
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_csv: out of memory");
      return fail(ds);
    }
    if (k->default_value) {
      col->has_default = 1;
      if (k->dtype == LOOM_STRING) {
        col->dstr_len = strlen(k->default_value);
        if (!(col->dstr = loom__strdup(k->default_value))) {
          loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_csv: out of memory");
          return fail(ds);
        }
      } else if (k->select && parse_num_slow(k->default_value, k->dtype, &col->dnum, &col->dint)) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: column '%s': default_value '%s' is not a valid %s",
                        col->name, k->default_value, loom_dtype_name(k->dtype));
        return fail(ds);
      }
    }
    if (col->out >= 0) {
      if (!col->name[0]) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: columns[%d] has an empty name", j);
        return fail(ds);
      }
      if (loom_dataset_find(ds, col->name) >= 0) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: two selected columns are named '%s'", col->name);
        return fail(ds);
      }
      if (col->sep ? loom__ds_set_ragged(ds, col->out, col->name, col->dtype, st)
                   : loom__ds_set_comp(ds, col->out, col->name, col->dtype, 0, NULL, st))
        return fail(ds);
    }
  }
  for (int i = 0; i < ds->ncomp; i++)
    for (int j = 0; j < i; j++)
      if (!strcmp(ds->comp[i].name, ds->comp[j].name)) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: two components are named '%s'", ds->comp[i].name);
        return fail(ds);
      }
  if (opt->label_name) {
    ds->label = loom_dataset_find(ds, opt->label_name);
    if (ds->label >= 0 && ds->comp[ds->label].ragged) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "dataset_csv: the label '%s' is a multi-valued (ragged) column; labels must be dense",
                      opt->label_name);
      return fail(ds);
    }
    if (ds->label < 0) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_csv: label_name '%s' is not one of the selected columns",
                      opt->label_name);
      return fail(ds);
    }
  }
  return ds;
}
