/* TFRecord both ways:
 *  - GZIP / ZLIB-compressed TFRecord files that TF 2.15 wrote
 *    (tests/fixtures/tfrecord/, made by gen_compressed.py) read with
 *    loom_dataset_tfrecord_ex (explicit compression and AUTO), the hint when
 *    a compressed file is read as uncompressed, truncated and corrupted
 *    compressed input (DATA_LOSS naming file and record, no allocation
 *    beyond the data);
 *  - loom_dataset_write_tfrecord (plain, GZIP, ZLIB) read back by loom and,
 *    where the TF virtualenv exists (scripts/peer_venv.sh tf), by TF itself
 *    through tests/tfrecord_check.py (tf.data.TFRecordDataset +
 *    tf.io.parse_single_example); skipped with a message otherwise. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "loom/loom.h"
#include "test_util.h"

#define FIX "tests/fixtures/tfrecord/"

static const char *fixture_names[3] = {FIX "plain.tfrecord", FIX "gzip.tfrecord.gz", FIX "zlib.tfrecord.zz"};

static void spec3(loom_feature_spec sp[3]) {
  memset(sp, 0, 3 * sizeof *sp);
  sp[0].name = "x";
  sp[0].dtype = LOOM_F32;
  sp[0].ndim = 1;
  sp[0].dims[0] = 2;
  sp[1].name = "id";
  sp[1].dtype = LOOM_I64;
  sp[2].name = "tags";
  sp[2].dtype = LOOM_STRING;
  sp[2].kind = LOOM_FEATURE_VAR_LEN;
  sp[2].ragged = 1;
}

static loom_dataset *open_fixture(const char *path, int compression, loom_status *st) {
  loom_feature_spec sp[3];
  spec3(sp);
  loom_tfrecord_options o = loom_tfrecord_options_default();
  o.compression = compression;
  return loom_dataset_tfrecord_ex(1, &path, 3, sp, NULL, &o, st);
}

/* Reads all 5 records and checks them against gen_compressed.py. */
static void expect_fixture_values(loom_dataset *ds, const char *what) {
  loom_status *st = loom_status_new();
  loom_tensor *v[4] = {0};
  int i = 0;
  loom_code rc;
  while ((rc = loom_dataset_next(ds, v, st)) == LOOM_OK) {
    const float *x = loom_tensor_data_const(v[0]);
    cr_expect(x[0] == (float)i + 0.5f && x[1] == -(float)i, "%s record %d: x = %g %g", what, i, x[0], x[1]);
    cr_expect_eq(*(const int64_t *)loom_tensor_data_const(v[1]), 100 + i, "%s record %d: id", what, i);
    cr_expect_eq(loom_tensor_numel(v[2]), i % 3, "%s record %d: %lld tags", what, i, (long long)loom_tensor_numel(v[2]));
    for (int j = 0; j < i % 3 && j < loom_tensor_numel(v[2]); j++) {
      char want[16];
      snprintf(want, sizeof want, "t%d_%d", i, j);
      size_t n;
      const char *s = loom_tensor_get_string(v[2], j, &n);
      cr_expect(n == strlen(want) && !memcmp(s, want, n), "%s record %d tag %d: '%.*s' want '%s'", what, i, j, (int)n, s,
                want);
    }
    const int64_t *sp = loom_tensor_data_const(v[3]);
    cr_expect(sp[0] == 0 && sp[1] == i % 3, "%s record %d: row_splits", what, i);
    i++;
  }
  cr_expect_eq(rc, LOOM_OUT_OF_RANGE, "%s: %s", what, loom_status_message(st));
  cr_expect_eq(i, 5, "%s: %d records", what, i);
  for (int k = 0; k < 4; k++) loom_tensor_free(v[k]);
  loom_status_free(st);
}

Test(tfrecord_io, reads_gzip_and_zlib_files_tf_wrote) {
  loom_status *st = loom_status_new();
  int want[3] = {LOOM_TFRECORD_NONE, LOOM_TFRECORD_GZIP, LOOM_TFRECORD_ZLIB};
  for (int f = 0; f < 3; f++) {
    for (int pass = 0; pass < 2; pass++) { /* the named compression, then AUTO */
      int c = pass ? LOOM_TFRECORD_AUTO : want[f];
      loom_dataset *ds = open_fixture(fixture_names[f], c, st);
      cr_assert(ds, "%s: %s", fixture_names[f], loom_status_message(st));
      expect_fixture_values(ds, fixture_names[f]);
      /* a second pass after reset reads the same (the inflate state restarts) */
      cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
      expect_fixture_values(ds, fixture_names[f]);
      loom_dataset_free(ds);
    }
  }
  /* the old constructor still reads plain files */
  loom_feature_spec sp[3];
  spec3(sp);
  const char *p = fixture_names[0];
  loom_dataset *ds = loom_dataset_tfrecord(1, &p, 3, sp, NULL, st);
  cr_assert(ds);
  expect_fixture_values(ds, "plain via loom_dataset_tfrecord");
  loom_dataset_free(ds);
  loom_status_free(st);
}

Test(tfrecord_io, compressed_file_read_as_uncompressed_names_the_option) {
  loom_status *st = loom_status_new();
  const char *hint[3] = {NULL, "looks GZIP-compressed", "looks ZLIB-compressed"};
  const char *opt[3] = {NULL, "LOOM_TFRECORD_GZIP", "LOOM_TFRECORD_ZLIB"};
  loom_tensor *v[4] = {0};
  for (int f = 1; f < 3; f++) {
    loom_dataset *ds = open_fixture(fixture_names[f], LOOM_TFRECORD_NONE, st);
    cr_assert(ds);
    cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_DATA_LOSS);
    const char *m = loom_status_message(st);
    cr_expect(strstr(m, fixture_names[f]) && strstr(m, "record 0") && strstr(m, hint[f]) && strstr(m, opt[f]) &&
                  strstr(m, "compression_type"),
              "%s", m);
    loom_dataset_free(ds);
  }
  /* a plain file read as GZIP: zlib's header check fails, DATA_LOSS */
  loom_dataset *ds = open_fixture(fixture_names[0], LOOM_TFRECORD_GZIP, st);
  cr_assert(ds);
  cr_expect_eq(loom_dataset_next(ds, v, st), LOOM_DATA_LOSS);
  cr_expect(strstr(loom_status_message(st), "corrupt GZIP stream") && strstr(loom_status_message(st), fixture_names[0]),
            "%s", loom_status_message(st));
  loom_dataset_free(ds);
  /* an unknown compression */
  cr_expect_null(open_fixture(fixture_names[0], 7, st));
  cr_expect_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "compression 7"), "%s", loom_status_message(st));
  for (int k = 0; k < 4; k++) loom_tensor_free(v[k]);
  loom_status_free(st);
}

/* ---- an allocator that records the largest single request ---- */
static atomic_size_t max_req;
static void *mx_malloc(size_t n, void *u) {
  (void)u;
  size_t m = atomic_load(&max_req);
  while (n > m && !atomic_compare_exchange_weak(&max_req, &m, n)) {
  }
  return malloc(n);
}
static void *mx_realloc(void *p, size_t n, void *u) {
  mx_malloc(0, u);
  size_t m = atomic_load(&max_req);
  while (n > m && !atomic_compare_exchange_weak(&max_req, &m, n)) {
  }
  return realloc(p, n);
}
static void mx_free(void *p, void *u) {
  (void)u;
  free(p);
}

/* Reads path to the end; returns the final code, the message in msg. */
static loom_code read_all(const char *path, int compression, char *msg, size_t cap, int *nrec) {
  loom_status *st = loom_status_new();
  loom_dataset *ds = open_fixture(path, compression, st);
  cr_assert(ds, "%s", loom_status_message(st));
  loom_tensor *v[4] = {0};
  loom_code rc;
  *nrec = 0;
  while ((rc = loom_dataset_next(ds, v, st)) == LOOM_OK) ++*nrec;
  snprintf(msg, cap, "%s", loom_status_message(st));
  for (int k = 0; k < 4; k++) loom_tensor_free(v[k]);
  loom_dataset_free(ds);
  loom_status_free(st);
  return rc;
}

Test(tfrecord_io, truncated_and_corrupt_compressed_input_is_data_loss) {
  char dir[TU_TMPDIR_CAP], path[600], msg[1024];
  tu_tmpdir(dir, sizeof dir, "loom_tfrio");
  int comp[2] = {LOOM_TFRECORD_GZIP, LOOM_TFRECORD_ZLIB};
  for (int f = 1; f < 3; f++) {
    size_t len;
    uint8_t *b = tu_read_file(fixture_names[f], &len);
    snprintf(path, sizeof path, "%s/cut", dir);
    /* every truncation: DATA_LOSS naming the file and a record, after the
     * records that are complete */
    for (size_t cut = 0; cut < len; cut++) {
      tu_write_file(path, b, cut);
      int n;
      loom_code rc = read_all(path, comp[f - 1], msg, sizeof msg, &n);
      if (cut == 0) { /* an empty file: no records (as TF) */
        cr_expect_eq(rc, LOOM_OUT_OF_RANGE, "empty: %s", msg);
        continue;
      }
      cr_expect_eq(rc, LOOM_DATA_LOSS, "%s cut at %zu: %s", fixture_names[f], cut, msg);
      cr_expect(strstr(msg, path) && strstr(msg, "record "), "%s", msg);
      cr_expect(n <= 5, "cut at %zu of %zu: %d records", cut, len, n); /* a cut trailer: all 5, then the error */
    }
    /* every single-byte corruption past the header: never a crash; either
     * an error (DATA_LOSS naming the file and record) or the same data */
    int errors = 0, total = 0;
    size_t hdr = f == 1 ? 10 : 2;
    for (size_t pos = hdr; pos < len; pos++) {
      uint8_t save = b[pos];
      b[pos] ^= 0x5a;
      tu_write_file(path, b, len);
      b[pos] = save;
      int n;
      loom_code rc = read_all(path, comp[f - 1], msg, sizeof msg, &n);
      total++;
      if (rc == LOOM_OUT_OF_RANGE) {
        cr_expect_eq(n, 5);
        continue;
      }
      errors++;
      cr_expect(rc == LOOM_DATA_LOSS || rc == LOOM_INVALID_ARGUMENT, "corrupt at %zu: %s", pos, msg);
      cr_expect(strstr(msg, path) && strstr(msg, "record "), "%s", msg);
    }
    cr_expect(errors == total, "%s: %d of %d corruptions detected", fixture_names[f], errors, total);
    free(b);
  }
  tu_rmtree(dir);
}

/* CRC-32C (Castagnoli), bitwise, and TFRecord's mask: for hand-made headers. */
static uint32_t crc32c(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
  }
  return ~c;
}
static uint32_t masked(const uint8_t *p, size_t n) {
  uint32_t c = crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

Test(tfrecord_io, a_huge_claimed_length_allocates_only_what_is_there) {
  char dir[TU_TMPDIR_CAP], path[600], msg[1024];
  tu_tmpdir(dir, sizeof dir, "loom_tfrio");
  /* a valid header claiming 512 GiB, then 100 bytes */
  uint8_t raw[12 + 100];
  memset(raw, 7, sizeof raw);
  uint64_t claim = (uint64_t)1 << 39;
  for (int i = 0; i < 8; i++) raw[i] = (uint8_t)(claim >> (8 * i));
  uint32_t c = masked(raw, 8);
  for (int i = 0; i < 4; i++) raw[8 + i] = (uint8_t)(c >> (8 * i));
  static const loom_allocator mx = {mx_malloc, mx_realloc, mx_free, NULL};
  for (int comp = 0; comp < 2; comp++) {
    snprintf(path, sizeof path, "%s/huge%s", dir, comp ? ".gz" : "");
    if (comp) {
      gzFile g = gzopen(path, "wb");
      cr_assert(g);
      cr_assert_eq(gzwrite(g, raw, sizeof raw), (int)sizeof raw);
      gzclose(g);
    } else {
      tu_write_file(path, raw, sizeof raw);
    }
    atomic_store(&max_req, 0);
    loom_set_allocator(&mx);
    int n;
    loom_code rc = read_all(path, comp ? LOOM_TFRECORD_GZIP : LOOM_TFRECORD_NONE, msg, sizeof msg, &n);
    loom_set_allocator(NULL);
    cr_expect_eq(rc, LOOM_DATA_LOSS, "%s", msg);
    cr_expect(strstr(msg, path) && strstr(msg, "record 0") && strstr(msg, "truncated record data"), "%s", msg);
    cr_expect_lt(atomic_load(&max_req), (size_t)1 << 20, "largest allocation %zu bytes for a 112-byte record stream",
                 atomic_load(&max_req));
  }
  tu_rmtree(dir);
}

/* ---------------------------------------------------------------- writing */
#define NW 4
static const float WX[NW][3] = {{1.5f, -2.25f, 3e-7f}, {0, 1, 2}, {-1e20f, 4.75f, 0.1f}, {7, 8, 9}};
static const int64_t WID[NW] = {-5, 0, 1LL << 40, 42};
static const double WW[NW] = {0.5, -1.25, 3.0, 1e-3};
static const int32_t WK[NW][2] = {{1, 2}, {-3, 4}, {5, -6}, {2147483647, -2147483647}};
static const char *WNAME[NW] = {"alpha", "", "gamma delta", "\xce\xb5"};
static const int64_t IDS[] = {10, 11, 12, 13, 14}, IDS_SPLITS[NW + 1] = {0, 2, 2, 5, 5};
static const char *WORDS[] = {"a", "bb", "ccc", "", "e"}; /* rows: {a}, {bb, ccc}, {}, {"", e} */
static const int64_t WORDS_SPLITS[NW + 1] = {0, 1, 3, 3, 5};

static loom_dataset *write_source(loom_status *st) {
  int64_t d2[2] = {NW, 3}, d1[1] = {NW}, dk[2] = {NW, 2}, dn[1] = {5}, ds[1] = {NW + 1};
  loom_tensor *t[7], *sp[7] = {0};
  t[0] = loom_tensor_from_data(LOOM_F32, 2, d2, WX, NULL);
  t[1] = loom_tensor_from_data(LOOM_I64, 1, d1, WID, NULL);
  t[2] = loom_tensor_from_data(LOOM_F64, 1, d1, WW, NULL);
  t[3] = loom_tensor_from_data(LOOM_I32, 2, dk, WK, NULL);
  t[4] = loom_tensor_new(LOOM_STRING, 1, d1, NULL);
  for (int i = 0; i < NW; i++) loom_tensor_set_string(t[4], i, WNAME[i], strlen(WNAME[i]), NULL);
  t[5] = loom_tensor_from_data(LOOM_I64, 1, dn, IDS, NULL);
  sp[5] = loom_tensor_from_data(LOOM_I64, 1, ds, IDS_SPLITS, NULL);
  t[6] = loom_tensor_new(LOOM_STRING, 1, dn, NULL);
  for (int i = 0; i < 5; i++) loom_tensor_set_string(t[6], i, WORDS[i], strlen(WORDS[i]), NULL);
  sp[6] = loom_tensor_from_data(LOOM_I64, 1, ds, WORDS_SPLITS, NULL);
  const char *names[7] = {"x", "id", "w", "k", "name", "ids", "words"};
  loom_dataset *d = loom_dataset_from_ragged_tensors(7, names, (const loom_tensor *const *)t,
                                                     (const loom_tensor *const *)sp, NULL, st);
  for (int i = 0; i < 7; i++) {
    loom_tensor_free(t[i]);
    loom_tensor_free(sp[i]);
  }
  return d;
}

static void read_back(const char *path, int compression) {
  loom_feature_spec sp[7];
  memset(sp, 0, sizeof sp);
  sp[0] = (loom_feature_spec){.name = "x", .dtype = LOOM_F32, .ndim = 1, .dims = {3}};
  sp[1] = (loom_feature_spec){.name = "id", .dtype = LOOM_I64};
  sp[2] = (loom_feature_spec){.name = "w", .dtype = LOOM_F32};
  sp[3] = (loom_feature_spec){.name = "k", .dtype = LOOM_I64, .ndim = 1, .dims = {2}};
  sp[4] = (loom_feature_spec){.name = "name", .dtype = LOOM_STRING};
  sp[5] = (loom_feature_spec){.name = "ids", .dtype = LOOM_I64, .kind = LOOM_FEATURE_VAR_LEN, .ragged = 1};
  sp[6] = (loom_feature_spec){.name = "words", .dtype = LOOM_STRING, .kind = LOOM_FEATURE_VAR_LEN, .ragged = 1};
  loom_status *st = loom_status_new();
  loom_tfrecord_options o = loom_tfrecord_options_default();
  o.compression = compression;
  loom_dataset *ds = loom_dataset_tfrecord_ex(1, &path, 7, sp, NULL, &o, st);
  cr_assert(ds, "%s", loom_status_message(st));
  loom_tensor *v[9] = {0};
  int i = 0;
  loom_code rc;
  while ((rc = loom_dataset_next(ds, v, st)) == LOOM_OK) {
    cr_assert(i < NW);
    cr_expect(!memcmp(loom_tensor_data_const(v[0]), WX[i], sizeof WX[i]), "%s row %d: x", path, i);
    cr_expect_eq(*(const int64_t *)loom_tensor_data_const(v[1]), WID[i]);
    cr_expect_eq(*(const float *)loom_tensor_data_const(v[2]), (float)WW[i]);
    const int64_t *k = loom_tensor_data_const(v[3]);
    cr_expect(k[0] == WK[i][0] && k[1] == WK[i][1], "%s row %d: k", path, i);
    size_t n;
    const char *s = loom_tensor_get_string(v[4], 0, &n);
    cr_expect(n == strlen(WNAME[i]) && !memcmp(s, WNAME[i], n), "%s row %d: name", path, i);
    int64_t a = IDS_SPLITS[i], b = IDS_SPLITS[i + 1];
    cr_expect_eq(loom_tensor_numel(v[5]), b - a);
    if (b > a) cr_expect(!memcmp(loom_tensor_data_const(v[5]), IDS + a, (size_t)(b - a) * 8), "%s row %d: ids", path, i);
    a = WORDS_SPLITS[i], b = WORDS_SPLITS[i + 1];
    cr_expect_eq(loom_tensor_numel(v[7]), b - a);
    for (int64_t j = a; j < b && j - a < loom_tensor_numel(v[7]); j++) {
      s = loom_tensor_get_string(v[7], j - a, &n);
      cr_expect(n == strlen(WORDS[j]) && !memcmp(s, WORDS[j], n), "%s row %d: words[%lld]", path, i, (long long)(j - a));
    }
    i++;
  }
  cr_expect_eq(rc, LOOM_OUT_OF_RANGE, "%s", loom_status_message(st));
  cr_expect_eq(i, NW);
  for (int q = 0; q < 9; q++) loom_tensor_free(v[q]);
  loom_dataset_free(ds);
  loom_status_free(st);
}

static void json_f32(FILE *m, float f) {
  if (f == 0)
    fprintf(m, "0.0");
  else
    fprintf(m, "%.9g", (double)f);
}
static void json_str(FILE *m, const char *s) {
  fputc('"', m);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(m, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(m, "\\u%04x", *p);
    else
      fputc(*p, m);
  }
  fputc('"', m);
}

/* The TF peer on dir (manifest.json there); skips when there is no TF venv. */
static void tf_check(const char *dir) {
  FILE *p = popen("d=\"${LOOM_VENV_DIR:-$HOME/.cache/loom/venv}/tf\"; [ -f \"$d/.ok\" ] && echo \"$d/bin/python\"", "r");
  cr_assert(p);
  char py[1024] = "";
  if (!fgets(py, sizeof py, p)) py[0] = 0;
  pclose(p);
  py[strcspn(py, "\n")] = 0;
  if (!py[0]) {
    fprintf(stderr, "SKIPPED: TF reading loom's TFRecord files: no TF virtualenv (make it with scripts/peer_venv.sh tf)\n");
    cr_skip_test("no TF virtualenv");
  }
  char cmd[2400];
  snprintf(cmd, sizeof cmd, "timeout 300 '%s' tests/tfrecord_check.py '%s' 2>&1", py, dir);
  p = popen(cmd, "r");
  cr_assert(p);
  char line[1024], all[16384] = "";
  int ok = 0;
  while (fgets(line, sizeof line, p)) {
    if (strlen(all) + strlen(line) < sizeof all) strcat(all, line);
    if (!strncmp(line, "tfrecord_check: OK", 18)) ok++;
  }
  int rc = pclose(p);
  cr_assert_eq(rc, 0, "tfrecord_check.py failed:\n%s", all);
  cr_assert_eq(ok, 3, "three files read by TF:\n%s", all);
}

Test(tfrecord_io, write_dataset_read_back_by_loom_and_tf, .timeout = 400) {
  char dir[TU_TMPDIR_CAP], path[600];
  tu_tmpdir(dir, sizeof dir, "loom_tfrio");
  loom_status *st = loom_status_new();
  const char *files[3] = {"plain.tfrecord", "gzip.tfrecord.gz", "zlib.tfrecord.zz"};
  const char *ctype[3] = {"", "GZIP", "ZLIB"};
  loom_dataset *ds = write_source(st);
  cr_assert(ds, "%s", loom_status_message(st));
  for (int c = 0; c < 3; c++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[c]);
    int64_t n = -1;
    cr_assert_eq(loom_dataset_write_tfrecord(ds, path, c, &n, st), LOOM_OK, "%s", loom_status_message(st));
    cr_expect_eq(n, NW);
    size_t len;
    uint8_t *b = tu_read_file(path, &len);
    if (c == 1) cr_expect(b[0] == 0x1f && b[1] == 0x8b, "gzip magic");
    if (c == 2) cr_expect(b[0] == 0x78 && (b[0] * 256 + b[1]) % 31 == 0, "zlib header");
    free(b);
    read_back(path, c);
    read_back(path, LOOM_TFRECORD_AUTO);
  }
  loom_dataset_free(ds);
  /* the manifest for TF */
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  FILE *m = fopen(path, "w");
  cr_assert(m);
  fprintf(m, "{\"files\": [");
  for (int c = 0; c < 3; c++) fprintf(m, "%s{\"path\": \"%s\", \"compression\": \"%s\"}", c ? ", " : "", files[c], ctype[c]);
  fprintf(m, "],\n \"features\": [{\"name\": \"x\", \"kind\": \"fixed\", \"dtype\": \"float32\", \"shape\": [3]},"
             " {\"name\": \"id\", \"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": []},"
             " {\"name\": \"w\", \"kind\": \"fixed\", \"dtype\": \"float32\", \"shape\": []},"
             " {\"name\": \"k\", \"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": [2]},"
             " {\"name\": \"name\", \"kind\": \"fixed\", \"dtype\": \"string\", \"shape\": []},"
             " {\"name\": \"ids\", \"kind\": \"varlen\", \"dtype\": \"int64\"},"
             " {\"name\": \"words\", \"kind\": \"varlen\", \"dtype\": \"string\"}],\n \"records\": [");
  for (int i = 0; i < NW; i++) {
    fprintf(m, "%s\n  {\"x\": [", i ? "," : "");
    for (int j = 0; j < 3; j++) {
      if (j) fprintf(m, ", ");
      json_f32(m, WX[i][j]);
    }
    fprintf(m, "], \"id\": [%lld], \"w\": [", (long long)WID[i]);
    json_f32(m, (float)WW[i]);
    fprintf(m, "], \"k\": [%d, %d], \"name\": [", WK[i][0], WK[i][1]);
    json_str(m, WNAME[i]);
    fprintf(m, "], \"ids\": [");
    for (int64_t j = IDS_SPLITS[i]; j < IDS_SPLITS[i + 1]; j++)
      fprintf(m, "%s%lld", j > IDS_SPLITS[i] ? ", " : "", (long long)IDS[j]);
    fprintf(m, "], \"words\": [");
    for (int64_t j = WORDS_SPLITS[i]; j < WORDS_SPLITS[i + 1]; j++) {
      if (j > WORDS_SPLITS[i]) fprintf(m, ", ");
      json_str(m, WORDS[j]);
    }
    fprintf(m, "]}");
  }
  fprintf(m, "]}\n");
  fclose(m);
  loom_status_free(st);
  tf_check(dir); /* may skip: last */
  tu_rmtree(dir);
}

Test(tfrecord_io, write_errors_name_what_was_wrong) {
  char dir[TU_TMPDIR_CAP], path[600];
  tu_tmpdir(dir, sizeof dir, "loom_tfrio");
  snprintf(path, sizeof path, "%s/out.tfrecord", dir);
  loom_status *st = loom_status_new();
  loom_dataset *ds = write_source(st);
  cr_assert(ds);
  /* AUTO is for reading */
  cr_expect_eq(loom_dataset_write_tfrecord(ds, path, LOOM_TFRECORD_AUTO, NULL, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "compression 3") && strstr(loom_status_message(st), path), "%s",
            loom_status_message(st));
  /* a directory that does not exist */
  char bad[700];
  snprintf(bad, sizeof bad, "%s/no/such/dir/x.tfrecord", dir);
  cr_expect_eq(loom_dataset_write_tfrecord(ds, bad, LOOM_TFRECORD_NONE, NULL, st), LOOM_NOT_FOUND);
  cr_expect(strstr(loom_status_message(st), bad), "%s", loom_status_message(st));
  cr_expect_eq(loom_dataset_write_tfrecord(NULL, path, 0, NULL, st), LOOM_INVALID_ARGUMENT);
  /* batched: the ragged pair holds several rows */
  ds = loom_dataset_batch(ds, 2, 0, st);
  cr_assert(ds);
  int64_t n = -1;
  cr_expect_eq(loom_dataset_write_tfrecord(ds, path, LOOM_TFRECORD_GZIP, &n, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "'ids'") && strstr(loom_status_message(st), "before batching"), "%s",
            loom_status_message(st));
  cr_expect_eq(n, 0);
  loom_dataset_free(ds);
  loom_status_free(st);
  tu_rmtree(dir);
}
