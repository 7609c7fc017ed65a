/* TFRecord datasets of tf.Example (loom_data.h): round trips, defaults,
 * var-length padding, corruption, hand-encoded Example bytes. */
#include "data_util.h"
#include "base/crc32c.h"

/* ======================================================================
 * TFRecord / tf.Example
 * ====================================================================== */
/* Writes 3 examples: x float [2,2], id int64, name string, tags int64
 * (varlen: 1, 3, 0 values - absent in the third), lab int32 -> int64. */
static void write_examples(const char *path) {
  loom_status *st = loom_status_new();
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(path, st);
  cr_assert(w, "%s", loom_status_message(st));
  for (int r = 0; r < 3; r++) {
    int64_t d22[2] = {2, 2}, dt[1] = {r == 0 ? 1 : 3};
    float xs[4] = {(float)r, (float)r + 0.5f, -(float)r, 10.0f * (float)r};
    int64_t tags[3] = {r * 10 + 1, r * 10 + 2, r * 10 + 3};
    loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, d22, xs, NULL);
    loom_tensor *id = loom_tensor_scalar_i64(1000 + r);
    loom_tensor *name = loom_tensor_new(LOOM_STRING, 0, NULL, NULL);
    char nm[16];
    snprintf(nm, sizeof nm, "row%d", r);
    loom_tensor_set_string(name, 0, nm, strlen(nm), NULL);
    loom_tensor *tg = loom_tensor_from_data(LOOM_I64, 1, dt, tags, NULL);
    loom_tensor *lab = loom_tensor_scalar_i32(r % 2);
    const char *names[5] = {"x", "id", "name", "tags", "lab"};
    const loom_tensor *vals[5] = {x, id, name, tg, lab};
    int n = r == 2 ? 3 : 5; /* the third example lacks tags and lab */
    cr_assert_eq(loom_tfrecord_writer_write_example(w, n, names, vals, st), LOOM_OK, "%s", loom_status_message(st));
    loom_tensor_free(x), loom_tensor_free(id), loom_tensor_free(name), loom_tensor_free(tg), loom_tensor_free(lab);
  }
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  loom_status_free(st);
}

static const int64_t k_labdef = -1;
static void example_spec(loom_feature_spec *s) {
  memset(s, 0, sizeof(loom_feature_spec) * 6);
  s[0] = (loom_feature_spec){.name = "x", .dtype = LOOM_F32, .ndim = 2, .dims = {2, 2}};
  s[1] = (loom_feature_spec){.name = "id", .dtype = LOOM_I64};
  s[2] = (loom_feature_spec){.name = "name", .dtype = LOOM_STRING};
  s[3] = (loom_feature_spec){.name = "tags", .dtype = LOOM_I64, .varlen = 1};
  s[4] = (loom_feature_spec){.name = "w", .dtype = LOOM_F32, .default_value = &k_wdef};
  s[5] = (loom_feature_spec){.name = "lab", .dtype = LOOM_I64, .default_value = &k_labdef};
}

Test(tfrecord, write_then_parse) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "ex.tfrecord");
  write_examples(p);
  loom_feature_spec spec[6];
  example_spec(spec);
  const char *paths[1] = {p};
  loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 6, spec, "lab", st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 6);
  cr_assert_eq(loom_dataset_label_index(ds), 5);
  int64_t d[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 2);
  cr_assert_eq(d[0], 2);
  cr_assert_eq(loom_dataset_component_shape(ds, 3, d), 1);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(loom_dataset_component_dtype(ds, 2), LOOM_STRING);
  loom_tensor *v[6] = {NULL};
  for (int pass = 0; pass < 2; pass++) {
    for (int r = 0; r < 3; r++) {
      next_ok(ds, v, st);
      int64_t d22[2] = {2, 2};
      float xs[4] = {(float)r, (float)r + 0.5f, -(float)r, 10.0f * (float)r};
      tu_expect_f32(v[0], 2, d22, xs, 0);
      cr_assert_eq(loom_tensor_ndim(v[1]), 0);
      cr_assert_eq(L(v[1])[0], 1000 + r);
      char nm[16];
      snprintf(nm, sizeof nm, "row%d", r);
      cr_assert_str_eq(loom_tensor_get_string(v[2], 0, NULL), nm);
      int64_t nt = r == 0 ? 1 : r == 1 ? 3 : 0;
      expect_shape(v[3], 1, &nt);
      for (int j = 0; j < nt; j++) cr_assert_eq(L(v[3])[j], r * 10 + 1 + j);
      cr_assert_eq(F(v[4])[0], 0.5f); /* default */
      cr_assert_eq(L(v[5])[0], r == 2 ? -1 : r % 2);
    }
    expect_end(ds, v, st);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  free_vals(v, 6);
  loom_dataset_free(ds);
  /* batched: var-length padded with 0 to the longest in the batch */
  const char *two[2] = {p, p};
  ds = chk(loom_dataset_batch(chk(loom_dataset_tfrecord(2, two, 6, spec, NULL, st), st), 2, 0, st), st);
  cr_assert_eq(loom_dataset_label_index(ds), -1);
  cr_assert_eq(loom_dataset_component_shape(ds, 3, d), 2);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(d[1], -1);
  next_ok(ds, v, st); /* rows 0, 1 */
  int64_t w23[2] = {2, 3};
  expect_shape(v[3], 2, w23);
  const int64_t want01[6] = {1, 0, 0, 11, 12, 13};
  cr_assert_arr_eq(L(v[3]), want01, sizeof want01);
  int64_t w222[3] = {2, 2, 2};
  expect_shape(v[0], 3, w222);
  cr_assert_eq(F(v[0])[4], 1.0f);
  cr_assert_str_eq(loom_tensor_get_string(v[2], 1, NULL), "row1");
  next_ok(ds, v, st); /* rows 2 (no tags), 0 of the second file */
  int64_t w21[2] = {2, 1};
  expect_shape(v[3], 2, w21);
  cr_assert_eq(L(v[3])[0], 0);
  cr_assert_eq(L(v[3])[1], 1);
  cr_assert_eq(L(v[1])[0], 1002);
  cr_assert_eq(L(v[1])[1], 1000);
  next_ok(ds, v, st); /* rows 1, 2 */
  int64_t w23b[2] = {2, 3};
  expect_shape(v[3], 2, w23b);
  const int64_t want12[6] = {11, 12, 13, 0, 0, 0};
  cr_assert_arr_eq(L(v[3]), want12, sizeof want12);
  expect_end(ds, v, st);
  free_vals(v, 6);
  loom_dataset_free(ds);
  /* string var-length padded with "" */
  loom_feature_spec ss[1] = {{.name = "name", .dtype = LOOM_STRING, .varlen = 1}};
  ds = chk(loom_dataset_batch(chk(loom_dataset_tfrecord(1, paths, 1, ss, NULL, st), st), 3, 0, st), st);
  next_ok(ds, v, st);
  int64_t w31[2] = {3, 1};
  expect_shape(v[0], 2, w31);
  cr_assert_str_eq(loom_tensor_get_string(v[0], 2, NULL), "row2");
  free_vals(v, 6);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(p);
  loom_status_free(st);
}

Test(tfrecord, parse_errors_name_file_and_record) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "ex.tfrecord"), want[512];
  write_examples(p);
  const char *paths[1] = {p};
  loom_feature_spec spec[6];
  example_spec(spec);
  loom_tensor *v[6] = {NULL};
  /* a required feature missing from record 2 */
  spec[3].varlen = 0;
  spec[3].ndim = 1;
  spec[3].dims[0] = 3;
  loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 6, spec, NULL, st), st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "record 0", "'tags'", "has 1 values");
  loom_dataset_free(ds);
  spec[3].dims[0] = 1;
  spec[3].default_value = NULL;
  loom_feature_spec only[1] = {spec[5]};
  only[0].default_value = NULL;
  ds = chk(loom_dataset_tfrecord(1, paths, 1, only, NULL, st), st);
  next_ok(ds, v, st);
  next_ok(ds, v, st);
  snprintf(want, sizeof want, "%s: record 2", p);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, "'lab'", "required but missing");
  loom_dataset_free(ds);
  /* a type mismatch */
  loom_feature_spec wrong[1] = {{.name = "id", .dtype = LOOM_F32}};
  ds = chk(loom_dataset_tfrecord(1, paths, 1, wrong, NULL, st), st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "record 0", "int64_list", "float_list");
  loom_dataset_free(ds);
  /* spec errors */
  loom_feature_spec bad[1] = {{.name = "id", .dtype = LOOM_I32}};
  cr_assert_null(loom_dataset_tfrecord(1, paths, 1, bad, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'id'", "int32", NULL);
  bad[0] = (loom_feature_spec){.name = "id", .dtype = LOOM_I64, .ndim = 1, .dims = {-1}};
  cr_assert_null(loom_dataset_tfrecord(1, paths, 1, bad, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'id'", "dims[0]", NULL);
  example_spec(spec);
  cr_assert_null(loom_dataset_tfrecord(1, paths, 6, spec, "nope", st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "label_name", "'nope'", NULL);
  char *none = path_in(dir, "missing");
  const char *np[1] = {none};
  cr_assert_null(loom_dataset_tfrecord(1, np, 6, spec, NULL, st));
  expect_msg(loom_status_code(st), LOOM_NOT_FOUND, st, none, NULL, NULL);
  /* a record that is not a tf.Example (valid framing) */
  char *q = path_in(dir, "junk.tfrecord");
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(q, st);
  const char *good_names[1] = {"id"};
  loom_tensor *one = loom_tensor_scalar_i64(5);
  const loom_tensor *gv[1] = {one};
  cr_assert_eq(loom_tfrecord_writer_write_example(w, 1, good_names, gv, st), LOOM_OK);
  cr_assert_eq(loom_tfrecord_writer_write(w, "\xff\xff\xff", 3, st), LOOM_OK);
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  const char *qp[1] = {q};
  loom_feature_spec idspec[1] = {{.name = "id", .dtype = LOOM_I64}};
  ds = chk(loom_dataset_tfrecord(1, qp, 1, idspec, NULL, st), st);
  next_ok(ds, v, st);
  cr_assert_eq(L(v[0])[0], 5);
  snprintf(want, sizeof want, "%s: record 1", q);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, "not a valid tf.Example", NULL);
  loom_dataset_free(ds);
  /* a flipped byte in record 1's data -> DATA_LOSS naming file and record */
  size_t n;
  uint8_t *b = tu_read_file(p, &n);
  size_t len0 = (size_t)b[0] | (size_t)b[1] << 8; /* record 0's length */
  size_t off1 = 16 + len0;
  uint8_t *c = malloc(n);
  memcpy(c, b, n);
  c[off1 + 12 + 5] ^= 0x20;
  char *fl = path_in(dir, "flip.tfrecord");
  tu_write_file(fl, c, n);
  const char *fp[1] = {fl};
  example_spec(spec);
  ds = chk(loom_dataset_tfrecord(1, fp, 6, spec, NULL, st), st);
  next_ok(ds, v, st);
  snprintf(want, sizeof want, "%s: record 1", fl);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_DATA_LOSS, st, want, "CRC", NULL);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_DATA_LOSS, st, want, NULL, NULL);
  loom_dataset_free(ds);
  /* a flipped length byte */
  memcpy(c, b, n);
  c[off1] ^= 1;
  tu_write_file(fl, c, n);
  ds = chk(loom_dataset_tfrecord(1, fp, 6, spec, NULL, st), st);
  next_ok(ds, v, st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_DATA_LOSS, st, want, "length CRC", NULL);
  loom_dataset_free(ds);
  /* truncated file: inside the last record's data, and inside a header */
  tu_write_file(fl, b, n - 7);
  ds = chk(loom_dataset_tfrecord(1, fp, 6, spec, NULL, st), st);
  next_ok(ds, v, st);
  next_ok(ds, v, st);
  snprintf(want, sizeof want, "%s: record 2", fl);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_DATA_LOSS, st, want, "truncated", NULL);
  loom_dataset_free(ds);
  tu_write_file(fl, b, off1 + 5);
  ds = chk(loom_dataset_tfrecord(1, fp, 6, spec, NULL, st), st);
  next_ok(ds, v, st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_DATA_LOSS, st, "record 1", "truncated", NULL);
  loom_dataset_free(ds);
  /* writer argument errors */
  char *nodir = path_in(dir, "no/such/dir/x.tfrecord");
  cr_assert_null(loom_tfrecord_writer_new(nodir, st));
  expect_msg(loom_status_code(st), LOOM_NOT_FOUND, st, nodir, NULL, NULL);
  w = loom_tfrecord_writer_new(q, st);
  const loom_tensor *nul[1] = {NULL};
  expect_msg(loom_tfrecord_writer_write_example(w, 1, good_names, nul, st), LOOM_INVALID_ARGUMENT, st, "values[0]",
             NULL, NULL);
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  free_vals(v, 6);
  loom_tensor_free(one);
  free(b), free(c);
  tu_rmtree(dir);
  free(p), free(q), free(fl), free(none), free(nodir);
  loom_status_free(st);
}

/* The record bytes of the first record of a TFRecord file (framing and both
 * CRCs checked independently). */
static uint8_t *first_record(const char *path, size_t *len) {
  size_t n;
  uint8_t *b = tu_read_file(path, &n);
  cr_assert_geq(n, 16);
  uint64_t l = 0;
  for (int i = 0; i < 8; i++) l |= (uint64_t)b[i] << (8 * i);
  cr_assert_eq(n, 16 + l);
  uint32_t c1 = (uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
  cr_assert_eq(c1, loom__crc32c_masked(b, 8));
  const uint8_t *t = b + 12 + l;
  uint32_t c2 = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
  cr_assert_eq(c2, loom__crc32c_masked(b + 12, (size_t)l));
  uint8_t *r = malloc((size_t)l + 1);
  memcpy(r, b + 12, (size_t)l);
  free(b);
  *len = (size_t)l;
  return r;
}

Test(tfrecord, example_bytes_match_hand_encoding) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "one.tfrecord");
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(p, st);
  cr_assert(w, "%s", loom_status_message(st));
  int64_t d2[1] = {2};
  int64_t iv[2] = {1, 300};
  loom_tensor *a = loom_tensor_from_data(LOOM_I64, 1, d2, iv, NULL);
  loom_tensor *f = loom_tensor_scalar_f32(1.0f);
  loom_tensor *s = loom_tensor_new(LOOM_STRING, 0, NULL, NULL);
  loom_tensor_set_string(s, 0, "hi", 2, NULL);
  const char *names[3] = {"a", "f", "s"};
  const loom_tensor *vals[3] = {a, f, s};
  cr_assert_eq(loom_tfrecord_writer_write_example(w, 3, names, vals, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  /* Example{features{feature{"a": int64_list{1, 300}} feature{"f":
   * float_list{1.0}} feature{"s": bytes_list{"hi"}}}} by hand:
   *  Int64List packed: 0A 03 01 AC 02      Feature: 1A 05 <5>
   *  entry "a": 0A 01 61 12 07 <7>          = 12 bytes
   *  FloatList packed: 0A 04 00 00 80 3F   Feature: 12 06 <6>
   *  entry "f": 0A 01 66 12 08 <8>          = 13 bytes
   *  BytesList: 0A 02 68 69                 Feature: 0A 04 <4>
   *  entry "s": 0A 01 73 12 06 <6>          = 11 bytes
   *  Features: 0A 0C <12> 0A 0D <13> 0A 0B <11>  = 42 bytes
   *  Example: 0A 2A <42>                    = 44 bytes */
  const uint8_t want[] = {0x0A, 0x2A,                                                        /* Example.features */
                          0x0A, 0x0C, 0x0A, 0x01, 'a', 0x12, 0x07, 0x1A, 0x05, 0x0A, 0x03, 0x01, 0xAC, 0x02,
                          0x0A, 0x0D, 0x0A, 0x01, 'f', 0x12, 0x08, 0x12, 0x06, 0x0A, 0x04, 0x00, 0x00, 0x80, 0x3F,
                          0x0A, 0x0B, 0x0A, 0x01, 's', 0x12, 0x06, 0x0A, 0x04, 0x0A, 0x02, 'h', 'i'};
  size_t n;
  uint8_t *got = first_record(p, &n);
  cr_assert_eq(n, sizeof want, "%zu bytes, want %zu", n, sizeof want);
  cr_assert_arr_eq(got, want, sizeof want);
  free(got);
  /* int32 goes to int64_list, float64 to float_list */
  w = loom_tfrecord_writer_new(p, st);
  loom_tensor *i32 = loom_tensor_scalar_i32(-1);
  double dv = 2.0;
  loom_tensor *f64 = loom_tensor_from_data(LOOM_F64, 0, NULL, &dv, NULL);
  const char *n2[2] = {"i", "d"};
  const loom_tensor *v2[2] = {i32, f64};
  cr_assert_eq(loom_tfrecord_writer_write_example(w, 2, n2, v2, st), LOOM_OK);
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  /* -1 as int64 varint is ten bytes FF..FF 01 */
  const uint8_t want2[] = {0x0A, 0x24,                                                             /* 36 bytes */
                           0x0A, 0x13, 0x0A, 0x01, 'i', 0x12, 0x0E, 0x1A, 0x0C, 0x0A, 0x0A,          /* i: */
                           0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,                /* -1 */
                           0x0A, 0x0D, 0x0A, 0x01, 'd', 0x12, 0x08, 0x12, 0x06, 0x0A, 0x04,          /* d: */
                           0x00, 0x00, 0x00, 0x40};                                                  /* 2.0f */
  got = first_record(p, &n);
  cr_assert_eq(n, sizeof want2, "%zu bytes, want %zu", n, sizeof want2);
  cr_assert_arr_eq(got, want2, sizeof want2);
  free(got);
  /* the parser takes unpacked repeated scalars too (proto2 writers), and
   * the last duplicate key */
  const uint8_t unpacked[] = {
      0x0A, 0x1D,                                                                 /* Example.features, 29 bytes */
      0x0A, 0x0D, 0x0A, 0x01, 'a', 0x12, 0x08, 0x1A, 0x06, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, /* a: 7, 8, 9 */
      0x0A, 0x0C, 0x0A, 0x01, 'f', 0x12, 0x07, 0x12, 0x05, 0x0D, 0x00, 0x00, 0xC0, 0x3F};  /* f: 1.5 (fixed32) */
  const uint8_t dupkey[] = {0x0A, 0x18, 0x0A, 0x0A, 0x0A, 0x01, 'a', 0x12, 0x05, 0x1A, 0x03, 0x0A, 0x01, 0x01,
                            0x0A, 0x0A, 0x0A, 0x01, 'a', 0x12, 0x05, 0x1A, 0x03, 0x0A, 0x01, 0x02};
  w = loom_tfrecord_writer_new(p, st);
  cr_assert_eq(loom_tfrecord_writer_write(w, unpacked, sizeof unpacked, st), LOOM_OK);
  cr_assert_eq(loom_tfrecord_writer_write(w, dupkey, sizeof dupkey, st), LOOM_OK);
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  loom_feature_spec spec[2] = {{.name = "a", .dtype = LOOM_I64, .varlen = 1},
                               {.name = "f", .dtype = LOOM_F32, .ndim = 1, .dims = {1}, .default_value = &k_wdef}};
  const char *paths[1] = {p};
  loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 2, spec, NULL, st), st);
  loom_tensor *v[2] = {NULL, NULL};
  next_ok(ds, v, st);
  int64_t three = 3;
  expect_shape(v[0], 1, &three);
  cr_assert_eq(L(v[0])[0], 7);
  cr_assert_eq(L(v[0])[2], 9);
  cr_assert_eq(F(v[1])[0], 1.5f);
  next_ok(ds, v, st);
  cr_assert_eq(loom_tensor_numel(v[0]), 1);
  cr_assert_eq(L(v[0])[0], 2);
  cr_assert_eq(F(v[1])[0], 0.5f);
  expect_end(ds, v, st);
  free_vals(v, 2);
  loom_dataset_free(ds);
  loom_tensor_free(a), loom_tensor_free(f), loom_tensor_free(s), loom_tensor_free(i32), loom_tensor_free(f64);
  tu_rmtree(dir);
  free(p);
  loom_status_free(st);
}
