/* CSV rows path (data/csv.c, data_impl.h): batch over a CSV source (or
 * take / repeat of it) fills the batch from column buffers. Checked against
 * values computed here from the generated cell text with strtof / strtod /
 * strtoll (numbers) and the unquoted text (strings), and against the
 * element path (a map in between turns the rows path off). Plus the exact
 * number parser against the C library on >= 10^6 strings, errors of the
 * rows path, records bigger than the read block, and string tensors whose
 * bytes sit in one block. */
#include <errno.h>
#include <math.h>
#include "data_util.h"
#include "data/data_impl.h"

/* ---- a deterministic random CSV and the values it must give ---- */
static uint64_t g_rng;
static uint32_t rnd(void) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(g_rng >> 33);
}
static int rn(int n) { return (int)(rnd() % (uint32_t)n); }

/* A number's text: the common decimal forms mostly, some odd ones. */
static void num_text(char *o, int fl) {
  static const char *odd[] = {"inf", "-Infinity", "nan", "0x1p4", "1e40", "1e-50", " 7 ", "\t-3\t", "+.5", "5.",
                              "0.000001", "16777217", "9007199254740993", "3.4028235e38", "1.17549435e-38",
                              "123456789012", "-0", "0e0", "00012", "2.5E+3"};
  int r = rn(20);
  if (r == 0) {
    strcpy(o, odd[rn((int)(sizeof odd / sizeof *odd))]);
    if (!fl && !strpbrk(o, "0123456789")) strcpy(o, "11");
    if (!fl && (strpbrk(o, ".eExnNiI") || strlen(o) > 10)) sprintf(o, "%d", rn(1000) - 500);
    return;
  }
  int n = 0;
  if (rn(4) == 0) o[n++] = '-';
  int nd = 1 + rn(fl ? 9 : 9);
  for (int i = 0; i < nd; i++) o[n++] = (char)('0' + rn(10));
  if (fl && rn(2)) {
    o[n++] = '.';
    int nf = rn(6);
    for (int i = 0; i < nf; i++) o[n++] = (char)('0' + rn(10));
  }
  if (fl && rn(6) == 0) n += sprintf(o + n, "e%d", rn(30) - 15);
  o[n] = 0;
}

/* A string (maybe with the delimiter, quotes, CR, LF, spaces) and its CSV form. */
static void str_text(char *raw, char *csv, int no_bar) {
  static const char alpha[] = "abcXYZ09 ,\"\n\r-_|";
  int n = rn(3) == 0 ? 0 : 1 + rn(12), need_q = 0;
  for (int i = 0; i < n; i++) {
    char ch = alpha[rn((int)sizeof alpha - 1)];
    if (no_bar && ch == '|') ch = 'b';
    if (i == 0 && ch == '\r') ch = 'r'; /* a CR alone is data inside a field, not at a line start */
    raw[i] = ch;
    need_q |= ch == ',' || ch == '"' || ch == '\n' || ch == '\r';
  }
  raw[n] = 0;
  if (!need_q) {
    strcpy(csv, raw);
    return;
  }
  int m = 0;
  csv[m++] = '"';
  for (int i = 0; i < n; i++) {
    if (raw[i] == '"') csv[m++] = '"';
    csv[m++] = raw[i];
  }
  csv[m++] = '"';
  csv[m] = 0;
}

enum { NC = 8 }; /* f32 f64 i32 i64 str mstr(|) mi64(;) s2 */
typedef struct row {
  float f;
  double d;
  int32_t i;
  int64_t l;
  char s[16], s2[16];
  int nm;
  char m[3][16];
  int nk;
  int64_t k[3];
} row;

static int slow_num(const char *s, loom_dtype dt, double *d, int64_t *iv);

/* Writes nfiles files of about rows/nfiles rows each; fills rows[]. */
static int64_t make_files(const char *dir, int nfiles, int64_t nrows, row *rows, char **paths) {
  int64_t r = 0;
  for (int f = 0; f < nfiles; f++) {
    char name[32];
    sprintf(name, "r%d.csv", f);
    paths[f] = path_in(dir, name);
    FILE *fp = fopen(paths[f], "wb");
    fputs("f,d,i,l,s,m,k,s2\n", fp);
    int64_t end = (f + 1) * nrows / nfiles;
    for (; r < end; r++) {
      row *w = &rows[r];
      char t[64], raw[32], csv[64];
      /* f32: empty -> default -1.5 */
      if (rn(15) == 0) {
        fputs(",", fp);
        w->f = -1.5f;
      } else {
        double dv;
        int64_t iv;
        do num_text(t, 1); while (slow_num(t, LOOM_F32, &dv, &iv));
        w->f = (float)dv;
        fprintf(fp, "%s,", t);
      }
      double dv;
      int64_t iv;
      do num_text(t, 1); while (slow_num(t, LOOM_F64, &dv, &iv));
      w->d = dv;
      fprintf(fp, rn(10) == 0 ? "\"%s\"," : "%s,", t); /* a quoted number */
      do num_text(t, 0); while (slow_num(t, LOOM_I32, &dv, &iv));
      w->i = (int32_t)iv;
      fprintf(fp, "%s,", t);
      if (rn(15) == 0) {
        fputs(",", fp);
        w->l = 42;
      } else {
        do num_text(t, 0); while (slow_num(t, LOOM_I64, &dv, &iv));
        w->l = iv;
        fprintf(fp, "%s,", t);
      }
      str_text(raw, csv, 0);
      strcpy(w->s, raw[0] ? raw : "dflt");
      fprintf(fp, "%s,", csv);
      /* multi-valued strings, '|' separated: 0..3 items (an empty cell = no item) */
      w->nm = rn(4);
      char cell[128] = "";
      int cl = 0, q = 0;
      for (int j = 0; j < w->nm; j++) {
        str_text(raw, csv, 1);
        if (!raw[0] && w->nm == 1) strcpy(raw, "x"); /* one empty item would read as no item */
        strcpy(w->m[j], raw);
        for (const char *p = raw; *p; p++) q |= *p == ',' || *p == '"' || *p == '\n' || *p == '\r';
        cl += sprintf(cell + cl, "%s%s", j ? "|" : "", raw);
      }
      if (q) {
        fputc('"', fp);
        for (const char *p = cell; *p; p++) {
          if (*p == '"') fputc('"', fp);
          fputc(*p, fp);
        }
        fputs("\",", fp);
      } else {
        fprintf(fp, "%s,", cell);
      }
      w->nk = rn(4);
      for (int j = 0; j < w->nk; j++) {
        w->k[j] = (int64_t)rn(2000000) - 1000000;
        fprintf(fp, "%s%lld", j ? ";" : "", (long long)w->k[j]);
      }
      fputc(',', fp);
      str_text(raw, csv, 0);
      strcpy(w->s2, raw[0] ? raw : "dflt");
      fputs(csv, fp);
      fputs(rn(5) == 0 ? "\r\n" : "\n", fp);
      if (rn(40) == 0) fputs(rn(2) ? "\n" : "\r\n", fp); /* a blank line */
    }
    fclose(fp);
  }
  return r;
}

static loom_dataset *open_csv(int nfiles, char **paths, loom_status *st) {
  loom_csv_column cols[NC] = {
      {NULL, LOOM_F32, "-1.5", 1, 0},  {NULL, LOOM_F64, NULL, 1, 0},    {NULL, LOOM_I32, NULL, 1, 0},
      {NULL, LOOM_I64, "42", 1, 0},    {NULL, LOOM_STRING, "dflt", 1, 0}, {NULL, LOOM_STRING, NULL, 1, '|'},
      {NULL, LOOM_I64, NULL, 1, ';'},  {NULL, LOOM_STRING, "dflt", 1, 0},
  };
  loom_csv_options o = {sizeof(loom_csv_options), 1, ',', NC, cols, "i"};
  return chk(loom_dataset_csv(nfiles, (const char *const *)paths, &o, st), st);
}
/* components: 0 f, 1 d, 2 i, 3 l, 4 s, 5 m, 6 m/row_splits, 7 k, 8 k/row_splits, 9 s2 */
enum { NCOMP = 10 };

static uint32_t fbits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
static uint64_t dbits(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return u;
}

/* Checks one batch (rows seq[0..k)) against the expected rows. */
static void check_batch(loom_tensor **v, const row *rows, const int64_t *seq, int64_t k, const char *what) {
  int64_t dk[1] = {k}, dk1[1] = {k + 1};
  for (int c = 0; c < NCOMP; c++)
    if (c != 5 && c != 7) expect_shape(v[c], 1, c == 6 || c == 8 ? dk1 : dk);
  const double *D = loom_tensor_data_const(v[1]);
  const int64_t *ms = L(v[6]), *ks = L(v[8]), *kv = L(v[7]);
  cr_assert_eq(ms[0], 0);
  cr_assert_eq(ks[0], 0);
  for (int64_t j = 0; j < k; j++) {
    const row *w = &rows[seq[j]];
    cr_assert_eq(fbits(F(v[0])[j]), fbits(w->f), "%s row %lld f: %.9g want %.9g", what, (long long)seq[j], F(v[0])[j], w->f);
    cr_assert_eq(dbits(D[j]), dbits(w->d), "%s row %lld d: %.17g want %.17g", what, (long long)seq[j], D[j], w->d);
    cr_assert_eq(I(v[2])[j], w->i, "%s row %lld i", what, (long long)seq[j]);
    cr_assert_eq(L(v[3])[j], w->l, "%s row %lld l", what, (long long)seq[j]);
    size_t len;
    const char *s = loom_tensor_get_string(v[4], j, &len);
    cr_assert(len == strlen(w->s) && !strcmp(s, w->s), "%s row %lld s '%s' want '%s'", what, (long long)seq[j], s, w->s);
    s = loom_tensor_get_string(v[9], j, &len);
    cr_assert(len == strlen(w->s2) && !strcmp(s, w->s2), "%s row %lld s2", what, (long long)seq[j]);
    cr_assert_eq(ms[j + 1] - ms[j], w->nm, "%s row %lld m count", what, (long long)seq[j]);
    for (int i = 0; i < w->nm; i++)
      cr_assert_str_eq(loom_tensor_get_string(v[5], ms[j] + i, NULL), w->m[i], "%s row %lld m[%d]", what,
                       (long long)seq[j], i);
    cr_assert_eq(ks[j + 1] - ks[j], w->nk, "%s row %lld k count", what, (long long)seq[j]);
    for (int i = 0; i < w->nk; i++) cr_assert_eq(kv[ks[j] + i], w->k[i]);
  }
  cr_assert_eq(loom_tensor_dim(v[5], 0), ms[k]);
  cr_assert_eq(loom_tensor_dim(v[7], 0), ks[k]);
}

/* Runs ds to its end: batches of bs (drop: full ones only) of the rows seq[0..n). */
static void check_run(loom_dataset *ds, const row *rows, const int64_t *seq, int64_t n, int64_t bs, int drop,
                      const char *what, loom_status *st) {
  loom_tensor *v[NCOMP] = {NULL};
  int64_t at = 0;
  while (at < n && !(drop && n - at < bs)) {
    int64_t k = n - at < bs ? n - at : bs;
    next_ok(ds, v, st);
    check_batch(v, rows, seq + at, k, what);
    at += k;
  }
  expect_end(ds, v, st);
  expect_end(ds, v, st);
  free_vals(v, NCOMP);
}

static loom_code identity(void *u, int n, loom_tensor **v, loom_status *st) {
  (void)u, (void)n, (void)v, (void)st;
  return LOOM_OK;
}

Test(csv_fast, batches_match_the_cell_text_and_the_element_path, .timeout = 120) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_csvf");
  g_rng = 14;
  enum { NF = 3, NR = 60000 }; /* about 1.2 MB a file: records cross the 1 MiB read blocks */
  row *rows = calloc(NR, sizeof *rows);
  char *paths[NF];
  int64_t n = make_files(dir, NF, NR, rows, paths);
  int64_t *seq = malloc(3 * NR * sizeof *seq);
  for (int64_t i = 0; i < 3 * NR; i++) seq[i] = i % NR;
  /* the rows path is on for batch over csv, take and repeat of it */
  loom_dataset *probe = open_csv(NF, paths, st);
  cr_assert(probe->next_rows);
  probe = chk(loom_dataset_map(probe, identity, NULL, st), st);
  cr_assert_null(probe->next_rows);
  loom_dataset_free(probe);
  const int64_t sizes[4] = {256, 1, 7, 1000};
  for (int si = 0; si < 4; si++)
    for (int drop = 0; drop < 2; drop++) {
      int64_t bs = sizes[si];
      if (bs == 1 && drop) continue;
      char what[64];
      sprintf(what, "batch(%lld, drop %d)", (long long)bs, drop);
      loom_dataset *ds = chk(loom_dataset_batch(open_csv(NF, paths, st), bs, drop, st), st);
      check_run(ds, rows, seq, n, bs, drop, what, st);
      cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK); /* a second epoch after reset */
      check_run(ds, rows, seq, n, bs, drop, what, st);
      loom_dataset_free(ds);
      if (bs == 1 || bs == 1000) continue;
      /* the element path (map turns the rows path off) gives the same batches */
      sprintf(what, "map+batch(%lld, drop %d)", (long long)bs, drop);
      ds = chk(loom_dataset_batch(chk(loom_dataset_map(open_csv(NF, paths, st), identity, NULL, st), st), bs, drop, st), st);
      check_run(ds, rows, seq, n, bs, drop, what, st);
      loom_dataset_free(ds);
    }
  /* repeat: batches run across the epochs; take: a prefix; take of repeat; prefetch on top */
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_repeat(open_csv(NF, paths, st), 2, st), st), 256, 0, st), st);
  check_run(ds, rows, seq, 2 * n, 256, 0, "repeat(2)+batch", st);
  loom_dataset_free(ds);
  ds = chk(loom_dataset_batch(chk(loom_dataset_take(open_csv(NF, paths, st), 1001, st), st), 100, 0, st), st);
  check_run(ds, rows, seq, 1001, 100, 0, "take(1001)+batch", st);
  loom_dataset_free(ds);
  ds = open_csv(NF, paths, st);
  ds = chk(loom_dataset_take(chk(loom_dataset_repeat(ds, -1, st), st), 2 * n + 77, st), st);
  ds = chk(loom_dataset_prefetch(chk(loom_dataset_batch(ds, 256, 1, st), st), 2, st), st);
  check_run(ds, rows, seq, 2 * n + 77, 256, 1, "prefetch(batch(take(repeat)))", st);
  loom_dataset_free(ds);
  /* a single element is a row of the same reader */
  ds = chk(loom_dataset_take(open_csv(NF, paths, st), 3, st), st);
  loom_tensor *v[NCOMP] = {NULL};
  for (int r = 0; r < 3; r++) {
    next_ok(ds, v, st);
    cr_assert_eq(loom_tensor_ndim(v[0]), 0);
    cr_assert_eq(fbits(F(v[0])[0]), fbits(rows[r].f));
    cr_assert_str_eq(loom_tensor_get_string(v[4], 0, NULL), rows[r].s);
    int64_t two[1] = {2};
    expect_shape(v[6], 1, two);
    cr_assert_eq(L(v[6])[1], rows[r].nm);
  }
  expect_end(ds, v, st);
  free_vals(v, NCOMP);
  loom_dataset_free(ds);
  for (int f = 0; f < NF; f++) free(paths[f]);
  free(seq);
  free(rows);
  loom_status_free(st);
}

/* ---- numbers: loom__csv_parse_num against the C library ---- */
/* The reference: spaces / tabs around, then all of it one strtof / strtod /
 * strtoll number (what the CSV reader has always accepted). */
static int slow_num(const char *s, loom_dtype dt, double *d, int64_t *iv) {
  while (*s == ' ' || *s == '\t') s++;
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
    *iv = v;
  }
  while (*end == ' ' || *end == '\t') end++;
  return *end ? -1 : 0;
}

static void check_num(const char *s) {
  static const loom_dtype dts[4] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64};
  for (int t = 0; t < 4; t++) {
    double d0 = 0, d1 = 0;
    int64_t i0 = 0, i1 = 0;
    int r0 = slow_num(s, dts[t], &d0, &i0);
    int r1 = loom__csv_parse_num(s, strlen(s), dts[t], &d1, &i1);
    cr_assert_eq(r1 == 0, r0 == 0, "'%s' as %s: accepted %d, the C library %d", s, loom_dtype_name(dts[t]), r1 == 0,
                 r0 == 0);
    if (r0) continue;
    if (t == 0)
      cr_assert_eq(fbits((float)d1), fbits((float)d0), "'%s' float: %.9g, strtof %.9g", s, d1, d0);
    else if (t == 1)
      cr_assert_eq(dbits(d1), dbits(d0), "'%s' double: %.17g, strtod %.17g", s, d1, d0);
    else
      cr_assert_eq(i1, i0, "'%s' %s", s, loom_dtype_name(dts[t]));
  }
}

Test(csv_fast, numbers_equal_the_c_library_bit_for_bit, .timeout = 120) {
  static const char *edge[] = {
      "0", "-0", "+0", "0.0", "-0.0", ".5", "5.", ".", "-", "+", "", " ", "\t", " 1", "1 ", "\t1\t", "1 2", "1e",
      "1e+", "1e-", "e5", "1e5", "1E5", "1e+05", "1e-05", "-1.5e-3", "16777216", "16777217", "16777215",
      "16777217.0", "1.6777217e7", "9007199254740992", "9007199254740993", "9007199254740991", "1e10", "1e11",
      "1e-10", "1e-11", "1e22", "1e23", "1e-22", "1e-23", "3.4028235e38", "3.4028236e38", "1e39", "1e-45", "1e-46",
      "1.17549435e-38", "4.9e-324", "1e-400", "1e400", "2147483647", "2147483648", "-2147483648", "-2147483649",
      "9223372036854775807", "9223372036854775808", "-9223372036854775808", "999999999999999999",
      "1000000000000000000", "0000000000000000000000001", "0.0000000000000000000001", "123456789012345678901234",
      "0.1", "0.2", "0.3", "1.1", "2.675", "0.1e1", "100e-2", "inf", "-inf", "Infinity", "nan", "-nan", "NaN(123)",
      "0x10", "0x1p-2", "1,5", "1_000", "١", "1.5.5", "--1", "+-1", "1e5x", "0.5f", "1d", "00", "007", "1e0000001",
      "1e-0000001", "1e999999", "0.000001", "0.0000001", "7.038531e-26", "8.589973e9", "1.00000005960464477539",
      "3.0000001", "0.30000001192092896"};
  for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) check_num(edge[i]);
  g_rng = 2026;
  char s[64];
  for (int it = 0; it < 1000000; it++) {
    int n = 0;
    int r = rn(8);
    if (rn(16) == 0) s[n++] = rn(2) ? ' ' : '\t';
    if (rn(3) == 0) s[n++] = rn(3) ? '-' : '+';
    int nd = r < 5 ? 1 + rn(8) : rn(22);
    if (rn(8) == 0)
      for (int i = rn(4); i > 0; i--) s[n++] = '0';
    for (int i = 0; i < nd; i++) s[n++] = (char)('0' + rn(10));
    if (rn(2)) {
      s[n++] = '.';
      for (int i = rn(r < 5 ? 7 : 20); i > 0; i--) s[n++] = (char)('0' + rn(10));
    }
    if (rn(3) == 0) {
      s[n++] = rn(2) ? 'e' : 'E';
      if (rn(2)) s[n++] = rn(2) ? '-' : '+';
      int ex = r < 5 ? rn(25) : rn(400);
      n += sprintf(s + n, "%d", ex);
    }
    if (rn(16) == 0) s[n++] = rn(2) ? ' ' : '\t';
    if (rn(64) == 0) s[rn(n + 1)] = "x.e-+ 0"[rn(7)]; /* a damaged one */
    s[n] = 0;
    check_num(s);
  }
  /* fields are not NUL-terminated: the length bounds the number */
  double d;
  int64_t iv;
  cr_assert_eq(loom__csv_parse_num("12345", 2, LOOM_F32, &d, &iv), 0);
  cr_assert_eq(d, 12.0);
  cr_assert_eq(loom__csv_parse_num("12345", 3, LOOM_I64, &d, &iv), 0);
  cr_assert_eq(iv, 123);
  cr_assert_eq(loom__csv_parse_num("1e5x", 3, LOOM_F64, &d, &iv), 0);
  cr_assert_eq(d, 1e5);
  cr_assert_neq(loom__csv_parse_num("1\0002", 3, LOOM_F64, &d, &iv), 0);
}

/* ---- errors of the rows path ---- */
Test(csv_fast, batch_errors_name_file_line_and_column) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_csvf");
  char *p0 = path_in(dir, "good.csv"), *p1 = path_in(dir, "bad.csv");
  tu_write_file(p0, "a,b\n1,x\n2,y\n3,z\n", 16);
  const char *bad = "a,b\n4,x\n\"5\",y\n\n6.5e,w\n7,v\n";
  tu_write_file(p1, bad, strlen(bad));
  loom_csv_column cols[2] = {{NULL, LOOM_F32, NULL, 1, 0}, {NULL, LOOM_STRING, NULL, 1, 0}};
  loom_csv_options o = {sizeof(loom_csv_options), 1, ',', 2, cols, NULL};
  const char *paths[2] = {p0, p1};
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_csv(2, paths, &o, st), st), 4, 0, st), st);
  loom_tensor *v[2] = {NULL};
  next_ok(ds, v, st); /* 1 2 3 4 */
  cr_assert_eq(F(v[0])[3], 4.0f);
  char want[512];
  snprintf(want, sizeof want, "%s:5: column 'a': cannot parse '6.5e' as float32", p1);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, NULL, NULL);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, NULL, NULL); /* sticky */
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  next_ok(ds, v, st);
  cr_assert_eq(F(v[0])[0], 1.0f);
  free_vals(v, 2);
  loom_dataset_free(ds);
  /* a malformed record and a missing field, through take + batch */
  const char *bad2 = "a,b\n1,x\n2,\"q\"r\n";
  tu_write_file(p1, bad2, strlen(bad2));
  ds = chk(loom_dataset_batch(chk(loom_dataset_take(chk(loom_dataset_csv(1, paths + 1, &o, st), st), 10, st), st), 8, 0, st), st);
  snprintf(want, sizeof want, "%s:3: malformed quoted field 2", p1);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, "after the closing quote", NULL);
  loom_dataset_free(ds);
  const char *bad4 = "a,b\n1,x\n2,y\"z\n";
  tu_write_file(p1, bad4, strlen(bad4));
  ds = chk(loom_dataset_batch(chk(loom_dataset_csv(1, paths + 1, &o, st), st), 8, 0, st), st);
  snprintf(want, sizeof want, "%s:3: field 2: a quote inside an unquoted field", p1);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, NULL, NULL);
  loom_dataset_free(ds);
  const char *bad3 = "a,b\n1,x\n2\n";
  tu_write_file(p1, bad3, strlen(bad3));
  ds = chk(loom_dataset_batch(chk(loom_dataset_csv(1, paths + 1, &o, st), st), 8, 0, st), st);
  snprintf(want, sizeof want, "%s:3: expected 2 fields, found 1", p1);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, NULL, NULL);
  loom_dataset_free(ds);
  free_vals(v, 2);
  free(p0);
  free(p1);
  loom_status_free(st);
}

/* ---- a record bigger than the read block; end of file without a newline ---- */
Test(csv_fast, records_larger_than_the_block) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_csvf");
  char *p = path_in(dir, "big.csv");
  size_t big = 3u << 20;
  char *text = malloc(big + 64), *want = malloc(big / 2 + 1);
  size_t n = 0;
  n += (size_t)sprintf(text, "1,short\n2,\"");
  for (size_t i = 0; i < big / 2; i++) {
    char ch = i % 1000 == 999 ? '"' : "ab,\n"[i % 4]; /* delimiters, newlines, quotes inside quotes */
    if (ch == '"') text[n++] = '"';
    text[n++] = ch;
    want[i] = ch;
  }
  want[big / 2] = 0;
  n += (size_t)sprintf(text + n, "\"\r\n3,last");
  tu_write_file(p, text, n);
  loom_csv_column cols[2] = {{"a", LOOM_I64, NULL, 1, 0}, {"b", LOOM_STRING, NULL, 1, 0}};
  loom_csv_options o = {sizeof(loom_csv_options), 0, ',', 2, cols, NULL};
  const char *paths[1] = {p};
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_csv(1, paths, &o, st), st), 2, 0, st), st);
  loom_tensor *v[2] = {NULL};
  next_ok(ds, v, st);
  cr_assert_eq(L(v[0])[0], 1);
  cr_assert_eq(L(v[0])[1], 2);
  size_t len;
  cr_assert_str_eq(loom_tensor_get_string(v[1], 0, &len), "short");
  const char *s = loom_tensor_get_string(v[1], 1, &len);
  cr_assert_eq(len, big / 2);
  cr_assert(!memcmp(s, want, len));
  next_ok(ds, v, st);
  int64_t one[1] = {1};
  expect_shape(v[0], 1, one);
  cr_assert_eq(L(v[0])[0], 3);
  cr_assert_str_eq(loom_tensor_get_string(v[1], 0, NULL), "last");
  expect_end(ds, v, st);
  free_vals(v, 2);
  loom_dataset_free(ds);
  free(text);
  free(want);
  free(p);
  loom_status_free(st);
}

/* ---- string tensors whose bytes are one block: set, copy, refill, free ---- */
Test(csv_fast, batch_string_tensors_stay_ordinary_tensors) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_csvf");
  char *p = path_in(dir, "s.csv");
  tu_write_file(p, "aa\nbbb\nc\ndddd\ne\n", 16);
  loom_csv_column cols[1] = {{"s", LOOM_STRING, NULL, 1, 0}};
  loom_csv_options o = {sizeof(loom_csv_options), 0, ',', 1, cols, NULL};
  const char *paths[1] = {p};
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_csv(1, paths, &o, st), st), 2, 0, st), st);
  loom_tensor *v[1] = {NULL};
  next_ok(ds, v, st);
  cr_assert_eq(loom_tensor_set_string(v[0], 0, "replaced", 8, st), LOOM_OK); /* a separate allocation */
  loom_tensor *c = loom_tensor_copy(v[0], st);
  cr_assert_str_eq(loom_tensor_get_string(c, 0, NULL), "replaced");
  cr_assert_str_eq(loom_tensor_get_string(c, 1, NULL), "bbb");
  loom_tensor_free(c);
  next_ok(ds, v, st); /* refilled in place: the replaced string is freed, the block reused */
  cr_assert_str_eq(loom_tensor_get_string(v[0], 0, NULL), "c");
  cr_assert_str_eq(loom_tensor_get_string(v[0], 1, NULL), "dddd");
  cr_assert_eq(loom_tensor_set_string(v[0], 1, "x", 1, st), LOOM_OK); /* over a string in the block */
  cr_assert_str_eq(loom_tensor_get_string(v[0], 1, NULL), "x");
  next_ok(ds, v, st);
  cr_assert_str_eq(loom_tensor_get_string(v[0], 0, NULL), "e");
  expect_end(ds, v, st);
  free_vals(v, 1);
  loom_dataset_free(ds);
  free(p);
  loom_status_free(st);
}
