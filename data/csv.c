/* data/csv.c - CSV files (RFC 4180: quoted fields may hold the
 * delimiter, "" for a quote, and newlines; CRLF tolerated; blank lines
 * skipped). One scalar component per selected column. Errors name
 * file:line (the line where the record starts). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/data_impl.h"

typedef struct csv_col {
  char *name;
  loom_dtype dtype;
  int out;           /* component index, -1 when not selected */
  int has_default;
  double dnum;       /* the default of numeric columns */
  int64_t dint;
  char *dstr;        /* the default of string columns */
  char sep;          /* multi-valued (ragged) cells: the separator; 0 = scalar */
} csv_col;

typedef struct csv_ds {
  loom_dataset base;
  int nfiles, file;
  char **paths;
  int header;
  char delim;
  int ncol;
  csv_col *cols;
  FILE *f;
  int64_t line;       /* line of the next character (1-based) */
  char *buf;          /* the record's fields, each NUL-terminated */
  size_t len, cap;
  size_t *fstart;     /* field offsets into buf */
  int nf, fcap;
} csv_ds;

/* ---- reading records ---- */
static int buf_put(csv_ds *c, char ch) {
  if (c->len + 1 >= c->cap) {
    size_t nc = c->cap ? c->cap * 2 : 256;
    char *b = loom__realloc(c->buf, nc);
    if (!b) return -1;
    c->buf = b;
    c->cap = nc;
  }
  c->buf[c->len++] = ch;
  return 0;
}
static int field_begin(csv_ds *c) {
  if (c->nf == c->fcap) {
    int nc = c->fcap ? c->fcap * 2 : 16;
    size_t *s = loom__realloc(c->fstart, (size_t)nc * sizeof *s);
    if (!s) return -1;
    c->fstart = s;
    c->fcap = nc;
  }
  c->fstart[c->nf++] = c->len;
  return 0;
}

/* Reads one record into buf/fstart. *rec_line = its first line. OUT_OF_RANGE
 * at the end of the file. */
static loom_code read_record(csv_ds *c, const char *path, int64_t *rec_line, loom_status *st) {
  enum { FIELD_START, UNQUOTED, QUOTED, QUOTE_IN_QUOTED } state;
  FILE *f = c->f;
  for (;;) { /* skips blank lines */
    c->len = 0;
    c->nf = 0;
    *rec_line = c->line;
    int ch = getc_unlocked(f);
    if (ch == EOF) {
      if (ferror(f)) return loom_status_set(st, LOOM_DATA_LOSS, "%s:%lld: read error: %s", path, (long long)c->line, strerror(errno));
      return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
    }
    if (ch == '\n') {
      c->line++;
      continue;
    }
    if (ch == '\r') {
      int nx = getc_unlocked(f);
      if (nx == '\n') {
        c->line++;
        continue;
      }
      if (nx != EOF) ungetc(nx, f);
    }
    ungetc(ch, f);
    break;
  }
  int64_t quote_line = 0;
  if (field_begin(c)) goto oom;
  state = FIELD_START;
  for (;;) {
    int ch = getc_unlocked(f);
    if (ch == EOF && ferror(f))
      return loom_status_set(st, LOOM_DATA_LOSS, "%s:%lld: read error: %s", path, (long long)c->line, strerror(errno));
    if (state == QUOTED) {
      if (ch == EOF)
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "%s:%lld: unterminated quoted field (the quote opens on line %lld)", path,
                               (long long)*rec_line, (long long)quote_line);
      if (ch == '"') {
        state = QUOTE_IN_QUOTED;
        continue;
      }
      if (ch == '\n') c->line++;
      if (buf_put(c, (char)ch)) goto oom;
      continue;
    }
    if (state == QUOTE_IN_QUOTED && ch == '"') { /* "" -> " */
      if (buf_put(c, '"')) goto oom;
      state = QUOTED;
      continue;
    }
    /* FIELD_START, UNQUOTED, or just after a closing quote */
    if (ch == '\r') {
      int nx = getc_unlocked(f);
      if (nx == '\n' || nx == EOF) ch = '\n';
      else ungetc(nx, f);
    }
    if (ch == EOF || ch == '\n') {
      if (ch == '\n') c->line++;
      if (buf_put(c, 0)) goto oom;
      return LOOM_OK;
    }
    if (ch == c->delim) {
      if (buf_put(c, 0) || field_begin(c)) goto oom;
      state = FIELD_START;
      continue;
    }
    if (state == QUOTE_IN_QUOTED)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s:%lld: malformed quoted field %d: '%c' after the closing quote (a quote inside a "
                             "quoted field is written \"\")",
                             path, (long long)c->line, c->nf, ch);
    if (ch == '"') {
      if (state == FIELD_START) {
        state = QUOTED;
        quote_line = c->line;
        continue;
      }
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s:%lld: field %d: a quote inside an unquoted field (quote the field and write \"\")",
                             path, (long long)c->line, c->nf);
    }
    if (buf_put(c, (char)ch)) goto oom;
    state = UNQUOTED;
  }
oom:
  return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s:%lld: out of memory", path, (long long)c->line);
}

/* ---- values ---- */
static int is_space(char ch) { return ch == ' ' || ch == '\t'; }

/* Parses s as dtype into *d / *i. 0 on success. */
static int parse_num(const char *s, loom_dtype dt, double *d, int64_t *i) {
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

static loom_code set_value(loom_tensor *t, const csv_col *col, const char *s, size_t len, int use_default) {
  void *p = loom_tensor_data(t); /* NULL for STRING */
  double d = col->dnum;
  int64_t i = col->dint;
  if (col->dtype == LOOM_STRING)
    return use_default ? loom_tensor_set_string(t, 0, col->dstr, strlen(col->dstr), NULL)
                       : loom_tensor_set_string(t, 0, s, len, NULL);
  if (!use_default && parse_num(s, col->dtype, &d, &i)) return LOOM_INVALID_ARGUMENT;
  switch (col->dtype) {
    case LOOM_F32: *(float *)p = (float)d; break;
    case LOOM_F64: *(double *)p = d; break;
    case LOOM_I32: *(int32_t *)p = (int32_t)i; break;
    default: *(int64_t *)p = i; break;
  }
  return LOOM_OK;
}

/* A multi-valued cell s[0..len) -> the values (1-D) and row_splits {0, k}
 * components at values[out], values[out + 1]. */
static loom_code set_multi(loom_tensor **values, const csv_col *col, const char *s, size_t len, const char *path,
                           int64_t line, loom_status *st) {
  int64_t k = 0, two = 2;
  if (len) {
    k = 1;
    for (size_t i = 0; i < len; i++) k += s[i] == col->sep;
  }
  loom_code rc = loom__ds_ensure(&values[col->out], col->dtype, 1, &k, st);
  if (!rc) rc = loom__ds_ensure(&values[col->out + 1], LOOM_I64, 1, &two, st);
  if (rc) return rc;
  int64_t *sp = loom_tensor_data(values[col->out + 1]);
  sp[0] = 0;
  sp[1] = k;
  loom_tensor *t = values[col->out];
  const char *p = s, *end = s + len;
  char item[128];
  for (int64_t j = 0; j < k; j++) {
    const char *q = memchr(p, col->sep, (size_t)(end - p));
    if (!q) q = end;
    size_t n = (size_t)(q - p);
    if (col->dtype == LOOM_STRING) {
      if ((rc = loom_tensor_set_string(t, j, p, n, st))) return rc;
    } else {
      double d = 0;
      int64_t iv = 0;
      int ok = n > 0 && n < sizeof item;
      if (ok) {
        memcpy(item, p, n);
        item[n] = 0;
        ok = parse_num(item, col->dtype, &d, &iv) == 0;
      }
      if (!ok && !n)
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "%s:%lld: column '%s': item %lld of the multi-valued cell '%.64s' is empty (%s wanted)",
                               path, (long long)line, col->name, (long long)j, s, loom_dtype_name(col->dtype));
      if (!ok)
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "%s:%lld: column '%s': cannot parse item %lld '%.*s' of the multi-valued cell '%.64s' "
                               "as %s",
                               path, (long long)line, col->name, (long long)j, (int)(n > 64 ? 64 : n), p, s,
                               loom_dtype_name(col->dtype));
      void *o = loom_tensor_data(t);
      switch (col->dtype) {
        case LOOM_F32: ((float *)o)[j] = (float)d; break;
        case LOOM_F64: ((double *)o)[j] = d; break;
        case LOOM_I32: ((int32_t *)o)[j] = (int32_t)iv; break;
        default: ((int64_t *)o)[j] = iv; break;
      }
    }
    p = q + 1;
  }
  return LOOM_OK;
}

/* ---- the dataset ---- */
static loom_code open_file(csv_ds *c, loom_status *st) {
  const char *path = c->paths[c->file];
  c->f = fopen(path, "rb");
  if (!c->f) return loom_status_set(st, LOOM_NOT_FOUND, "cannot open CSV file %s: %s", path, strerror(errno));
  c->line = 1;
  if (!c->header) return LOOM_OK;
  int64_t rl;
  loom_code rc = read_record(c, path, &rl, st);
  if (rc == LOOM_OUT_OF_RANGE) return LOOM_OK; /* an empty file: the next read ends it */
  if (rc) return rc;
  if (c->nf != c->ncol)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s:%lld: the header has %d columns, the options describe %d",
                           path, (long long)rl, c->nf, c->ncol);
  return LOOM_OK;
}

static void close_file(csv_ds *c) {
  if (c->f) fclose(c->f);
  c->f = NULL;
}

static loom_code csv_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  csv_ds *c = (csv_ds *)ds;
  loom_code rc;
  int64_t rl;
  for (;;) {
    if (!c->f) {
      if (c->file >= c->nfiles) return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
      if ((rc = open_file(c, st))) return rc;
    }
    rc = read_record(c, c->paths[c->file], &rl, st);
    if (rc == LOOM_OUT_OF_RANGE) {
      close_file(c);
      c->file++;
      continue;
    }
    if (rc) return rc;
    break;
  }
  const char *path = c->paths[c->file];
  if (c->nf != c->ncol)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s:%lld: expected %d fields, found %d", path, (long long)rl,
                           c->ncol, c->nf);
  for (int j = 0; j < c->ncol; j++) {
    const csv_col *col = &c->cols[j];
    if (col->out < 0) continue;
    const char *s = c->buf + c->fstart[j];
    size_t len = (j + 1 < c->nf ? c->fstart[j + 1] : c->len) - c->fstart[j] - 1;
    if (col->sep) {
      if ((rc = set_multi(values, col, s, len, path, rl, st))) return rc;
      continue;
    }
    if ((rc = loom__ds_ensure(&values[col->out], col->dtype, 0, NULL, st))) return rc;
    if (!len && !col->has_default)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s:%lld: column '%s' is empty and has no default value", path,
                             (long long)rl, col->name);
    rc = set_value(values[col->out], col, s, len, len == 0);
    if (rc == LOOM_INVALID_ARGUMENT)
      return loom_status_set(st, rc, "%s:%lld: column '%s': cannot parse '%.64s' as %s", path, (long long)rl,
                             col->name, s, loom_dtype_name(col->dtype));
    if (rc) return loom_status_set(st, rc, "%s:%lld: out of memory", path, (long long)rl);
  }
  return LOOM_OK;
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
  loom__free(c->buf);
  loom__free(c->fstart);
}

static const loom_ds_vtable csv_vt = {"csv", csv_next, NULL, csv_reset, csv_destroy, NULL, NULL};

static loom_dataset *fail(loom_dataset *ds) {
  loom_dataset_free(ds);
  return NULL;
}

loom_dataset *loom_dataset_csv(int nfiles, const char *const *paths, const loom_csv_options *opt, loom_status *st) {
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
  c->delim = delim;
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
  /* every file must open; the first one's header names unnamed columns */
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
    const char *name = k->name ? k->name : (c->header && c->nf ? c->buf + c->fstart[j] : "");
    col->name = loom__strdup(name);
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
        if (!(col->dstr = loom__strdup(k->default_value))) {
          loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_csv: out of memory");
          return fail(ds);
        }
      } else if (k->select && parse_num(k->default_value, k->dtype, &col->dnum, &col->dint)) {
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
