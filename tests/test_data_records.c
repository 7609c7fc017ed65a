/* Raw-record sources and the traced map (loom_data.h):
 *  - loom_dataset_records: TFRecord records as bytes (what loom's writer
 *    wrote), text lines ("\n", "\r\n", a last line without a break, empty
 *    lines), fixed-length records with header / footer / a trailing
 *    partial record, each plain and through GZIP / ZLIB (zlib writes the
 *    files here); bad options and corrupt streams are errors;
 *  - loom_dataset_map_graph: records -> LoomParseExample (+ arithmetic) per
 *    element, batched afterwards, with a ragged VarLen pair and a label. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "loom/loom.h"

static char tmpdir[64];
static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/loom_records_XXXXXX");
  cr_assert(mkdtemp(tmpdir));
}
static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  (void)!system(cmd);
}
TestSuite(records, .init = setup, .fini = teardown);

/* Writes bytes to path, plain (0), gzip (1, in two members when split > 0) or zlib (2). */
static void write_file(const char *path, const void *data, size_t n, int compression, size_t split) {
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  if (!compression) {
    fwrite(data, 1, n, f);
  } else {
    size_t parts[2][2] = {{0, split ? split : n}, {split ? split : n, n}};
    for (int p = 0; p < 2; p++) {
      size_t a = parts[p][0], b = parts[p][1];
      if (p == 1 && !split) break;
      z_stream z;
      memset(&z, 0, sizeof z);
      cr_assert(deflateInit2(&z, 6, Z_DEFLATED, compression == 1 ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
      uLong cap = deflateBound(&z, (uLong)(b - a)) + 64;
      unsigned char *out = malloc(cap);
      z.next_in = (unsigned char *)data + a;
      z.avail_in = (uInt)(b - a);
      z.next_out = out;
      z.avail_out = (uInt)cap;
      cr_assert(deflate(&z, Z_FINISH) == Z_STREAM_END);
      fwrite(out, 1, cap - z.avail_out, f);
      deflateEnd(&z);
      free(out);
    }
  }
  fclose(f);
}

/* All records of ds as strings (n of them into out, each malloc'd). */
static int read_all(loom_dataset *ds, char **out, size_t *lens, int cap, loom_status *st) {
  loom_tensor *v[1] = {0};
  int n = 0;
  loom_code rc;
  while ((rc = loom_dataset_next(ds, v, st)) == LOOM_OK) {
    cr_assert(n < cap);
    cr_assert_eq(loom_tensor_ndim(v[0]), 0);
    size_t len;
    const char *s = loom_tensor_get_string(v[0], 0, &len);
    out[n] = malloc(len + 1);
    memcpy(out[n], s, len);
    out[n][len] = 0;
    lens[n++] = len;
  }
  cr_assert_eq(rc, LOOM_OUT_OF_RANGE, "%s", loom_status_message(st));
  loom_tensor_free(v[0]);
  return n;
}

static loom_dataset *open_records(const char *path, int format, int compression, int64_t rb, int64_t hb, int64_t fb,
                                  loom_status *st) {
  loom_records_options o = loom_records_options_default();
  o.format = format;
  o.compression = compression;
  o.record_bytes = rb;
  o.header_bytes = hb;
  o.footer_bytes = fb;
  return loom_dataset_records(1, &path, &o, st);
}

Test(records, text_lines_plain_gzip_zlib) {
  const char text[] = "alpha,1\r\nbeta,2\n\ngamma,3"; /* CRLF, LF, an empty line, no final break */
  const char *want[] = {"alpha,1", "beta,2", "", "gamma,3"};
  for (int c = 0; c < 4; c++) {
    char path[128];
    snprintf(path, sizeof path, "%s/lines%d.txt", tmpdir, c);
    write_file(path, text, strlen(text), c == 3 ? 1 : c, c == 3 ? 11 : 0); /* c 3: two gzip members */
    loom_status *st = loom_status_new();
    loom_dataset *ds = open_records(path, LOOM_RECORDS_TEXT_LINE, c == 3 ? 1 : c, 0, 0, 0, st);
    cr_assert(ds, "%s", loom_status_message(st));
    cr_assert_str_eq(loom_dataset_component_name(ds, 0), "record");
    cr_assert_eq(loom_dataset_component_dtype(ds, 0), LOOM_STRING);
    for (int pass = 0; pass < 2; pass++) { /* a reset reads again */
      char *got[8];
      size_t lens[8];
      int n = read_all(ds, got, lens, 8, st);
      cr_assert_eq(n, 4, "compression %d: %d lines", c, n);
      for (int i = 0; i < 4; i++) {
        cr_expect_str_eq(got[i], want[i], "compression %d line %d", c, i);
        free(got[i]);
      }
      cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
    }
    loom_dataset_free(ds);
    loom_status_free(st);
  }
}

Test(records, fixed_length_header_footer_partial) {
  /* header "HDR", records of 4 bytes, footer "FT"; then 2 stray bytes before the footer (a partial record) */
  const char data[] = "HDR" "r0r0" "r1\0r" "r2r2" "FT";
  size_t n = sizeof data - 1;
  for (int c = 0; c < 3; c++) {
    char path[128];
    snprintf(path, sizeof path, "%s/fixed%d.bin", tmpdir, c);
    write_file(path, data, n, c, 0);
    loom_status *st = loom_status_new();
    loom_dataset *ds = open_records(path, LOOM_RECORDS_FIXED_LENGTH, c, 4, 3, 2, st);
    cr_assert(ds, "%s", loom_status_message(st));
    char *got[8];
    size_t lens[8];
    int k = read_all(ds, got, lens, 8, st);
    cr_assert_eq(k, 3, "compression %d: %d records", c, k);
    cr_expect(lens[0] == 4 && !memcmp(got[0], "r0r0", 4));
    cr_expect(lens[1] == 4 && !memcmp(got[1], "r1\0r", 4), "a NUL inside a record is kept");
    cr_expect(lens[2] == 4 && !memcmp(got[2], "r2r2", 4));
    for (int i = 0; i < k; i++) free(got[i]);
    loom_dataset_free(ds);
    /* a partial record: INVALID_ARGUMENT after the whole ones, naming the lengths */
    const char part[] = "HDR" "r0r0" "xy" "FT";
    write_file(path, part, sizeof part - 1, c, 0);
    ds = open_records(path, LOOM_RECORDS_FIXED_LENGTH, c, 4, 3, 2, st);
    loom_tensor *v[1] = {0};
    cr_expect_eq(loom_dataset_next(ds, v, st), LOOM_OK);
    cr_expect_eq(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT);
    cr_expect(strstr(loom_status_message(st), "body is 6 bytes"), "%s", loom_status_message(st));
    loom_dataset_free(ds);
    /* a record length far beyond the file: memory follows the bytes read, the body is not a record */
    ds = open_records(path, LOOM_RECORDS_FIXED_LENGTH, c, (int64_t)1 << 40, 3, 2, st);
    cr_expect_eq(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT);
    cr_expect(strstr(loom_status_message(st), "not a multiple"), "%s", loom_status_message(st));
    loom_dataset_free(ds);
    /* shorter than header + footer */
    write_file(path, "HD", 2, c, 0);
    ds = open_records(path, LOOM_RECORDS_FIXED_LENGTH, c, 4, 3, 2, st);
    cr_expect_eq(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT);
    cr_expect(strstr(loom_status_message(st), "fewer than the header"), "%s", loom_status_message(st));
    loom_tensor_free(v[0]);
    loom_dataset_free(ds);
    loom_status_free(st);
  }
}

Test(records, tfrecord_records_as_bytes) {
  char path[128];
  snprintf(path, sizeof path, "%s/r.tfrecord.gz", tmpdir);
  loom_status *st = loom_status_new();
  loom_tfrecord_writer *w = loom_tfrecord_writer_new_compressed(path, LOOM_TFRECORD_GZIP, st);
  cr_assert(w);
  const char *recs[] = {"first", "", "third\0x"};
  size_t lens[] = {5, 0, 7};
  for (int i = 0; i < 3; i++) cr_assert_eq(loom_tfrecord_writer_write(w, recs[i], lens[i], st), LOOM_OK);
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  loom_dataset *ds = open_records(path, LOOM_RECORDS_TFRECORD, LOOM_TFRECORD_GZIP, 0, 0, 0, st);
  cr_assert(ds, "%s", loom_status_message(st));
  char *got[4];
  size_t gl[4];
  cr_assert_eq(read_all(ds, got, gl, 4, st), 3);
  for (int i = 0; i < 3; i++) {
    cr_expect(gl[i] == lens[i] && !memcmp(got[i], recs[i], lens[i]), "record %d", i);
    free(got[i]);
  }
  loom_dataset_free(ds);
  /* read without the compression: the hint names it */
  ds = open_records(path, LOOM_RECORDS_TFRECORD, LOOM_TFRECORD_NONE, 0, 0, 0, st);
  cr_assert(ds);
  loom_tensor *v[1] = {0};
  cr_expect_eq(loom_dataset_next(ds, v, st), LOOM_DATA_LOSS);
  cr_expect(strstr(loom_status_message(st), "GZIP"), "%s", loom_status_message(st));
  loom_dataset_free(ds);
  loom_status_free(st);
}

Test(records, bad_options_and_corrupt_streams) {
  char path[128];
  snprintf(path, sizeof path, "%s/t.txt.gz", tmpdir);
  const char text[] = "a line that is long enough to compress into several bytes\nand another one here\n";
  write_file(path, text, strlen(text), 1, 0);
  loom_status *st = loom_status_new();
  cr_expect_null(open_records(path, LOOM_RECORDS_FIXED_LENGTH, 0, 0, 0, 0, st));
  cr_expect(strstr(loom_status_message(st), "record_bytes"), "%s", loom_status_message(st));
  cr_expect_null(open_records(path, LOOM_RECORDS_TEXT_LINE, 0, 4, 0, 0, st));
  cr_expect_null(open_records(path, 7, 0, 0, 0, 0, st));
  cr_expect_null(open_records(path, LOOM_RECORDS_TEXT_LINE, LOOM_TFRECORD_AUTO, 0, 0, 0, st));
  cr_expect_null(open_records("/nonexistent/x", LOOM_RECORDS_TEXT_LINE, 0, 0, 0, 0, st));
  cr_expect_eq(loom_status_code(st), LOOM_NOT_FOUND);
  /* truncate the gzip stream: DATA_LOSS naming the file */
  FILE *f = fopen(path, "rb");
  unsigned char buf[256];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  f = fopen(path, "wb");
  fwrite(buf, 1, n / 2, f);
  fclose(f);
  loom_dataset *ds = open_records(path, LOOM_RECORDS_TEXT_LINE, LOOM_TFRECORD_GZIP, 0, 0, 0, st);
  cr_assert(ds);
  loom_tensor *v[1] = {0};
  loom_code rc;
  while ((rc = loom_dataset_next(ds, v, st)) == LOOM_OK) {}
  cr_expect_eq(rc, LOOM_DATA_LOSS, "%s", loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), path), "%s", loom_status_message(st));
  loom_tensor_free(v[0]);
  loom_dataset_free(ds);
  loom_status_free(st);
}

/* records -> parse_example(reshape(record, [1])) -> x * 2 + 1, id, tags (ragged) -> batch 2 */
Test(records, map_graph_parses_examples) {
  char path[128];
  snprintf(path, sizeof path, "%s/ex.tfrecord", tmpdir);
  loom_status *st = loom_status_new();
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(path, st);
  for (int i = 0; i < 3; i++) {
    float x[2] = {(float)i, 0.5f * (float)i};
    int64_t one = 1, two = 2, id = 10 + i, k = i;
    loom_tensor *t[3];
    t[0] = loom_tensor_from_data(LOOM_F32, 1, &two, x, st);
    t[1] = loom_tensor_from_data(LOOM_I64, 1, &one, &id, st);
    t[2] = loom_tensor_new(LOOM_STRING, 1, &k, st);
    for (int j = 0; j < i; j++) loom_tensor_set_string(t[2], j, j ? "b" : "a", 1, st);
    const char *names[3] = {"x", "id", "tags"};
    cr_assert_eq(loom_tfrecord_writer_write_example(w, 3, names, (const loom_tensor *const *)t, st), LOOM_OK,
                 "%s", loom_status_message(st));
    for (int j = 0; j < 3; j++) loom_tensor_free(t[j]);
  }
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);

  loom_graph *g = loom_graph_new();
  loom_output rec = loom_placeholder(g, LOOM_STRING, 0, NULL, "record");
  int64_t one = 1;
  loom_output ser = loom_reshape(g, rec, 1, &one, "ser");
  loom_feature_spec sp[3];
  memset(sp, 0, sizeof sp);
  sp[0].name = "x", sp[0].dtype = LOOM_F32, sp[0].ndim = 1, sp[0].dims[0] = 2;
  sp[1].name = "id", sp[1].dtype = LOOM_I64;
  sp[2].name = "tags", sp[2].dtype = LOOM_STRING, sp[2].kind = LOOM_FEATURE_VAR_LEN;
  loom_output po[4];
  cr_assert_eq(loom_parse_example(g, ser, 3, sp, 4, po, "parse"), 4);
  int64_t two = 2;
  loom_output x = loom_reshape(g, po[0], 1, &two, "x1");
  float c2 = 2.0f, c1 = 1.0f;
  x = loom_add(g, loom_mul(g, x, loom_const_data(g, LOOM_F32, 0, NULL, &c2, NULL), NULL),
               loom_const_data(g, LOOM_F32, 0, NULL, &c1, NULL), "x");
  loom_output id = loom_reshape(g, po[1], 0, NULL, "id");
  loom_output outs[4] = {x, po[2], po[3], id};
  const char *names[4] = {"x", "tags", "tags/row_splits", "id"};
  int32_t ragged[4] = {0, 1, 0, 0};
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_dataset *ds = open_records(path, LOOM_RECORDS_TFRECORD, 0, 0, 0, 0, st);
  ds = loom_dataset_map_graph(ds, g, 1, &rec, 4, names, outs, ragged, "id", st);
  cr_assert(ds, "%s", loom_status_message(st));
  cr_assert_eq(loom_dataset_num_components(ds), 4);
  cr_assert_eq(loom_dataset_label_index(ds), 3);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 1), 2);
  int64_t dims[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, dims), 1);
  cr_assert_eq(dims[0], 2);
  ds = loom_dataset_batch(ds, 2, 0, st);
  cr_assert(ds, "%s", loom_status_message(st));
  loom_tensor *v[4] = {0};
  cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_OK, "%s", loom_status_message(st));
  const float *xv = loom_tensor_data_const(v[0]);
  cr_expect(loom_tensor_dim(v[0], 0) == 2 && xv[0] == 1.0f && xv[1] == 1.0f && xv[2] == 3.0f && xv[3] == 2.0f,
            "x = %g %g %g %g", xv[0], xv[1], xv[2], xv[3]);
  cr_expect_eq(loom_tensor_numel(v[1]), 1, "tags of rows 0, 1: 0 + 1 values");
  const int64_t *sp2 = loom_tensor_data_const(v[2]);
  cr_expect(loom_tensor_numel(v[2]) == 3 && sp2[0] == 0 && sp2[1] == 0 && sp2[2] == 1);
  const int64_t *idv = loom_tensor_data_const(v[3]);
  cr_expect(idv[0] == 10 && idv[1] == 11);
  cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(loom_tensor_dim(v[0], 0), 1);
  size_t len;
  const char *s0 = loom_tensor_get_string(v[1], 0, &len);
  cr_expect(loom_tensor_numel(v[1]) == 2 && len == 1 && s0[0] == 'a');
  cr_expect_eq(((const int64_t *)loom_tensor_data_const(v[3]))[0], 12);
  cr_expect_eq(loom_dataset_next(ds, v, st), LOOM_OUT_OF_RANGE);
  for (int i = 0; i < 4; i++) loom_tensor_free(v[i]), v[i] = NULL;
  loom_dataset_free(ds);

  /* a record that is not a tf.Example: the run fails, named */
  snprintf(path, sizeof path, "%s/bad.txt", tmpdir);
  write_file(path, "not an example\n", 15, 0, 0);
  g = loom_graph_new();
  rec = loom_placeholder(g, LOOM_STRING, 0, NULL, "record");
  ser = loom_reshape(g, rec, 1, &one, "ser");
  cr_assert_eq(loom_parse_example(g, ser, 2, sp, 4, po, "parse"), 2);
  const char *n2[1] = {"x"};
  ds = loom_dataset_map_graph(open_records(path, LOOM_RECORDS_TEXT_LINE, 0, 0, 0, 0, st), g, 1, &rec, 1, n2, po, NULL,
                              NULL, st);
  cr_assert(ds, "%s", loom_status_message(st));
  cr_expect_neq(loom_dataset_next(ds, v, st), LOOM_OK);
  cr_expect(strstr(loom_status_message(st), "map: the mapped function failed"), "%s", loom_status_message(st));
  loom_tensor_free(v[0]);
  loom_dataset_free(ds);
  loom_status_free(st);
}

/* skip drops the first lines of each pass; filter keeps the lines whose traced predicate holds */
Test(records, skip_and_filter_graph) {
  char path[128];
  snprintf(path, sizeof path, "%s/s.txt", tmpdir);
  const char text[] = "header\n1\n22\n3\n44\n";
  write_file(path, text, strlen(text), 0, 0);
  loom_status *st = loom_status_new();
  loom_dataset *ds = loom_dataset_skip(open_records(path, LOOM_RECORDS_TEXT_LINE, 0, 0, 0, 0, st), 1, st);
  cr_assert(ds, "%s", loom_status_message(st));
  loom_graph *g = loom_graph_new();
  loom_output rec = loom_placeholder(g, LOOM_STRING, 0, NULL, "line");
  loom_output num = loom_string_to_number(g, rec, LOOM_F32, "num");
  float ten = 10.0f;
  loom_output pred = loom_greater(g, num, loom_const_data(g, LOOM_F32, 0, NULL, &ten, NULL), "big");
  ds = loom_dataset_filter_graph(ds, g, 1, &rec, pred, st);
  cr_assert(ds, "%s", loom_status_message(st));
  for (int pass = 0; pass < 2; pass++) {
    char *got[8];
    size_t lens[8];
    int n = read_all(ds, got, lens, 8, st);
    cr_assert_eq(n, 2, "pass %d: %d lines", pass, n);
    cr_expect_str_eq(got[0], "22");
    cr_expect_str_eq(got[1], "44");
    for (int i = 0; i < n; i++) free(got[i]);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  loom_dataset_free(ds);
  /* the header reaches the predicate without skip: its run fails, named */
  g = loom_graph_new();
  rec = loom_placeholder(g, LOOM_STRING, 0, NULL, "line");
  num = loom_string_to_number(g, rec, LOOM_F32, "num");
  pred = loom_greater(g, num, loom_const_data(g, LOOM_F32, 0, NULL, &ten, NULL), "big");
  ds = loom_dataset_filter_graph(open_records(path, LOOM_RECORDS_TEXT_LINE, 0, 0, 0, 0, st), g, 1, &rec, pred, st);
  loom_tensor *v[1] = {0};
  cr_expect_eq(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "filter: the predicate failed") &&
                strstr(loom_status_message(st), "\"header\""),
            "%s", loom_status_message(st));
  loom_tensor_free(v[0]);
  loom_dataset_free(ds);
  /* a predicate that is not a scalar bool */
  g = loom_graph_new();
  rec = loom_placeholder(g, LOOM_STRING, 0, NULL, "line");
  cr_expect_null(loom_dataset_filter_graph(open_records(path, LOOM_RECORDS_TEXT_LINE, 0, 0, 0, 0, st), g, 1, &rec,
                                           loom_string_to_number(g, rec, LOOM_F32, "n"), st));
  cr_expect(strstr(loom_status_message(st), "scalar bool"), "%s", loom_status_message(st));
  loom_status_free(st);
}

/* interleave: TF's order for 3 files of 3, 1 and 4 lines, cycle 2, block 2 */
Test(records, interleave_in_tf_order) {
  const char *texts[3] = {"a0\na1\na2\n", "b0\n", "c0\nc1\nc2\nc3\n"};
  loom_status *st = loom_status_new();
  loom_dataset *in[3];
  for (int i = 0; i < 3; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/i%d.txt", tmpdir, i);
    write_file(path, texts[i], strlen(texts[i]), 0, 0);
    in[i] = open_records(path, LOOM_RECORDS_TEXT_LINE, 0, 0, 0, 0, st);
    cr_assert(in[i]);
  }
  loom_dataset *ds = loom_dataset_interleave(3, in, 2, 2, st);
  cr_assert(ds, "%s", loom_status_message(st));
  /* slots: [a, b]: a0 a1 | b0, b ends -> slot 1 free | a2, a ends | slot 1 <- c: c0 c1 | slot 0 empty | c2 c3 */
  const char *want[] = {"a0", "a1", "b0", "a2", "c0", "c1", "c2", "c3"};
  for (int pass = 0; pass < 2; pass++) {
    char *got[16];
    size_t lens[16];
    int n = read_all(ds, got, lens, 16, st);
    cr_assert_eq(n, 8, "pass %d: %d elements", pass, n);
    for (int i = 0; i < n; i++) {
      cr_expect_str_eq(got[i], want[i], "pass %d element %d", pass, i);
      free(got[i]);
    }
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  loom_dataset_free(ds);
  /* cycle 1: one after another */
  for (int i = 0; i < 3; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/i%d.txt", tmpdir, i);
    in[i] = open_records(path, LOOM_RECORDS_TEXT_LINE, 0, 0, 0, 0, st);
  }
  ds = loom_dataset_interleave(3, in, 1, 1, st);
  char *got[16];
  size_t lens[16];
  int n = read_all(ds, got, lens, 16, st);
  cr_assert_eq(n, 8);
  cr_expect_str_eq(got[3], "b0");
  cr_expect_str_eq(got[4], "c0");
  for (int i = 0; i < n; i++) free(got[i]);
  loom_dataset_free(ds);
  /* inputs with other components are refused, named */
  char path[128];
  snprintf(path, sizeof path, "%s/i0.txt", tmpdir);
  loom_records_options o = loom_records_options_default();
  o.format = LOOM_RECORDS_TEXT_LINE;
  o.name = "other";
  const char *pp = path;
  in[0] = open_records(path, LOOM_RECORDS_TEXT_LINE, 0, 0, 0, 0, st);
  in[1] = loom_dataset_records(1, &pp, &o, st);
  cr_expect_null(loom_dataset_interleave(2, in, 2, 1, st));
  cr_expect(strstr(loom_status_message(st), "components"), "%s", loom_status_message(st));
  loom_status_free(st);
}

/* zip: side by side until the shorter ends; a reset restarts both; duplicate names refused */
Test(records, zip_side_by_side) {
  char p1[128], p2[128];
  snprintf(p1, sizeof p1, "%s/z1.txt", tmpdir);
  snprintf(p2, sizeof p2, "%s/z2.txt", tmpdir);
  write_file(p1, "a\nb\nc\n", 6, 0, 0);
  write_file(p2, "1\n2\n", 4, 0, 0);
  loom_status *st = loom_status_new();
  loom_records_options o = loom_records_options_default();
  o.format = LOOM_RECORDS_TEXT_LINE;
  o.name = "letter";
  const char *pp1 = p1, *pp2 = p2;
  loom_dataset *in[2];
  in[0] = loom_dataset_records(1, &pp1, &o, st);
  o.name = "digit";
  in[1] = loom_dataset_records(1, &pp2, &o, st);
  loom_dataset *ds = loom_dataset_zip(2, in, st);
  cr_assert(ds, "%s", loom_status_message(st));
  cr_assert_eq(loom_dataset_num_components(ds), 2);
  cr_expect_str_eq(loom_dataset_component_name(ds, 1), "digit");
  for (int pass = 0; pass < 2; pass++) {
    loom_tensor *v[2] = {0};
    const char *want[2][2] = {{"a", "1"}, {"b", "2"}};
    for (int i = 0; i < 2; i++) {
      cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_OK, "%s", loom_status_message(st));
      for (int k = 0; k < 2; k++) {
        size_t len;
        const char *s = loom_tensor_get_string(v[k], 0, &len);
        cr_expect(len == 1 && s[0] == want[i][k][0], "pass %d element %d component %d", pass, i, k);
      }
    }
    cr_expect_eq(loom_dataset_next(ds, v, st), LOOM_OUT_OF_RANGE);
    loom_tensor_free(v[0]);
    loom_tensor_free(v[1]);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  loom_dataset_free(ds);
  in[0] = loom_dataset_records(1, &pp1, &o, st);
  in[1] = loom_dataset_records(1, &pp2, &o, st);
  cr_expect_null(loom_dataset_zip(2, in, st));
  cr_expect(strstr(loom_status_message(st), "'digit' is in two inputs"), "%s", loom_status_message(st));
  loom_status_free(st);
}
