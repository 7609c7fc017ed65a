/* tf.io decoders as graph ops (loom_data.h): DecodeRaw (little / big
 * endian, each out_type, unequal lengths), StringToNumber, DecodeCSV
 * (quotes, defaults, na_value, required columns, select_cols, errors).
 * Expected values are worked out by hand from TF's documented behaviour
 * (python/tests/test_tf_data.py checks the same ops against TF 2.15
 * fixtures). */
#include <criterion/criterion.h>
#include <string.h>
#include "loom/loom.h"

static loom_tensor *strings(int n, const char *const *s, const size_t *lens) {
  int64_t d = n;
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 1, &d, NULL);
  for (int i = 0; i < n; i++) loom_tensor_set_string(t, i, s[i], lens ? lens[i] : strlen(s[i]), NULL);
  return t;
}

/* runs one fetch of g with x fed; returns the status code, *out the value */
static loom_code run1(loom_graph *g, loom_output x, loom_tensor *xv, int nf, const loom_output *f, loom_tensor **out,
                      loom_status *st) {
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s);
  loom_code rc = loom_session_run(s, &x, &xv, 1, f, out, nf, NULL, 0, st);
  loom_session_free(s);
  return rc;
}

Test(decode, raw_types_and_endianness) {
  loom_status *st = loom_status_new();
  const unsigned char b[8] = {1, 0, 0, 0, 0, 0, 0x80, 0x3f}; /* int32 LE 1; float32 LE 1.0 */
  const char *s[2] = {(const char *)b, (const char *)b};
  size_t lens[2] = {8, 8};
  loom_tensor *xv = strings(2, s, lens);
  loom_graph *g = loom_graph_new();
  int64_t d = -1;
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  loom_output f[4] = {loom_decode_raw(g, x, LOOM_I32, 1, "i32le"), loom_decode_raw(g, x, LOOM_F32, 1, "f32le"),
                      loom_decode_raw(g, x, LOOM_U8, 1, "u8"), loom_decode_raw(g, x, LOOM_I32, 0, "i32be")};
  int64_t dims[8];
  cr_assert_eq(loom_output_dims(f[0], dims), 2);
  cr_assert(dims[1] == -1);
  loom_tensor *out[4] = {0};
  cr_assert_eq(run1(g, x, xv, 4, f, out, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert(loom_tensor_ndim(out[0]) == 2 && loom_tensor_dim(out[0], 0) == 2 && loom_tensor_dim(out[0], 1) == 2);
  const int32_t *i = loom_tensor_data_const(out[0]);
  cr_expect(i[0] == 1 && i[1] == 0x3f800000 && i[2] == 1);
  const float *fl = loom_tensor_data_const(out[1]);
  cr_expect(fl[1] == 1.0f);
  cr_expect_eq(loom_tensor_dim(out[2], 1), 8);
  cr_expect_eq(((const uint8_t *)loom_tensor_data_const(out[2]))[7], 0x3f);
  const int32_t *be = loom_tensor_data_const(out[3]);
  cr_expect(be[0] == 0x01000000 && be[1] == 0x0000803f, "big endian: %x %x", be[0], be[1]);
  for (int k = 0; k < 4; k++) loom_tensor_free(out[k]), out[k] = NULL;
  loom_tensor_free(xv);
  /* unequal lengths: an error naming the element */
  lens[1] = 4;
  xv = strings(2, s, lens);
  cr_expect_eq(run1(g, x, xv, 1, f, out, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "same size"), "%s", loom_status_message(st));
  loom_tensor_free(xv);
  loom_graph_free(g);
  /* a bad out_type is a build error */
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  loom_decode_raw(g, x, LOOM_STRING, 1, "bad");
  cr_expect_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "out_type"), "%s", loom_status_message(st));
  loom_graph_free(g);
  loom_status_free(st);
}

Test(decode, string_to_number) {
  loom_status *st = loom_status_new();
  const char *s[3] = {"1.5", " -2 ", "1e3"};
  loom_tensor *xv = strings(3, s, NULL);
  loom_graph *g = loom_graph_new();
  int64_t d = -1;
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  loom_output f[2] = {loom_string_to_number(g, x, LOOM_F32, "f"), loom_string_to_number(g, x, LOOM_I64, "i")};
  loom_tensor *out[2] = {0};
  cr_assert_eq(run1(g, x, xv, 1, f, out, st), LOOM_OK, "%s", loom_status_message(st));
  const float *v = loom_tensor_data_const(out[0]);
  cr_expect(v[0] == 1.5f && v[1] == -2.0f && v[2] == 1000.0f);
  cr_expect_eq(run1(g, x, xv, 1, f + 1, out + 1, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "\"1.5\""), "%s", loom_status_message(st));
  loom_tensor_free(out[0]);
  loom_tensor_free(out[1]);
  loom_tensor_free(xv);
  loom_graph_free(g);
  loom_status_free(st);
}

Test(decode, csv_fields_defaults_quotes_select) {
  loom_status *st = loom_status_new();
  const char *rec[3] = {"1.5,\"a,\"\"b\"\"\",7,x", ",plain,,y", "NA,\"\",-3,z"};
  loom_tensor *xv = strings(3, rec, NULL);
  loom_graph *g = loom_graph_new();
  int64_t d = -1, one = 1, zero = 0;
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, &d, "x");
  float fd = -1.0f;
  int64_t idf = 42;
  loom_tensor *defs[4] = {loom_tensor_from_data(LOOM_F32, 1, &one, &fd, st), loom_tensor_new(LOOM_STRING, 1, &one, st),
                          loom_tensor_from_data(LOOM_I64, 1, &one, &idf, st), loom_tensor_new(LOOM_STRING, 1, &zero, st)};
  loom_tensor_set_string(defs[1], 0, "dflt", 4, st);
  loom_output o[4];
  cr_assert_eq(loom_decode_csv(g, x, 4, (const loom_tensor *const *)defs, ',', 1, "NA", 0, NULL, o, "csv"), 4);
  loom_tensor *out[4] = {0};
  cr_assert_eq(run1(g, x, xv, 4, o, out, st), LOOM_OK, "%s", loom_status_message(st));
  const float *c0 = loom_tensor_data_const(out[0]);
  cr_expect(c0[0] == 1.5f && c0[1] == -1.0f && c0[2] == -1.0f, "%g %g %g", c0[0], c0[1], c0[2]);
  size_t n;
  const char *s0 = loom_tensor_get_string(out[1], 0, &n);
  cr_expect(n == 5 && !memcmp(s0, "a,\"b\"", 5), "quoted field: '%.*s'", (int)n, s0);
  s0 = loom_tensor_get_string(out[1], 1, &n);
  cr_expect(n == 5 && !memcmp(s0, "plain", 5));
  s0 = loom_tensor_get_string(out[1], 2, &n);
  cr_expect(n == 4 && !memcmp(s0, "dflt", 4), "a quoted empty field takes the default: '%.*s'", (int)n, s0);
  const int64_t *c2 = loom_tensor_data_const(out[2]);
  cr_expect(c2[0] == 7 && c2[1] == 42 && c2[2] == -3);
  for (int k = 0; k < 4; k++) loom_tensor_free(out[k]), out[k] = NULL;
  loom_tensor_free(xv);

  /* a required column left empty; a wrong field count; a bad number */
  const char *bad1[1] = {"1,a,2,"};
  xv = strings(1, bad1, NULL);
  cr_expect_eq(run1(g, x, xv, 4, o, out, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "required"), "%s", loom_status_message(st));
  loom_tensor_free(xv);
  const char *bad2[1] = {"1,a,2"};
  xv = strings(1, bad2, NULL);
  cr_expect_eq(run1(g, x, xv, 4, o, out, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "expect 4 fields"), "%s", loom_status_message(st));
  loom_tensor_free(xv);
  const char *bad3[1] = {"x1,a,2,q"};
  xv = strings(1, bad3, NULL);
  cr_expect_eq(run1(g, x, xv, 4, o, out, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "not a valid float"), "%s", loom_status_message(st));
  loom_tensor_free(xv);
  loom_graph_free(g);

  /* select_cols 1 and 3 of a five-field record; ';' delimiter; no quoting */
  g = loom_graph_new();
  x = loom_placeholder(g, LOOM_STRING, 0, NULL, "x");
  const int64_t sel[2] = {1, 3};
  loom_tensor *d2[2] = {defs[3], defs[2]};
  cr_assert_eq(loom_decode_csv(g, x, 2, (const loom_tensor *const *)d2, ';', 0, NULL, 2, sel, o, "csv"), 2);
  const char *r2[1] = {"skip;\"q\";9;11;more;and more"};
  loom_tensor *one_rec = loom_tensor_new(LOOM_STRING, 0, NULL, st);
  loom_tensor_set_string(one_rec, 0, r2[0], strlen(r2[0]), st);
  cr_assert_eq(run1(g, x, one_rec, 2, o, out, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(loom_tensor_ndim(out[0]), 0);
  s0 = loom_tensor_get_string(out[0], 0, &n);
  cr_expect(n == 3 && !memcmp(s0, "\"q\"", 3), "without quoting the quotes are bytes: '%.*s'", (int)n, s0);
  cr_expect_eq(*(const int64_t *)loom_tensor_data_const(out[1]), 11);
  for (int k = 0; k < 2; k++) loom_tensor_free(out[k]);
  loom_tensor_free(one_rec);
  /* bad arguments: build errors */
  loom_graph *g2 = loom_graph_new();
  loom_output x2 = loom_placeholder(g2, LOOM_STRING, 0, NULL, "x");
  const int64_t badsel[2] = {3, 1};
  cr_expect_eq(loom_decode_csv(g2, x2, 2, (const loom_tensor *const *)d2, ',', 1, NULL, 2, badsel, o, NULL), 0);
  cr_expect(strstr(loom_status_message((loom_graph_status(g2, st), st)), "increasing"), "%s", loom_status_message(st));
  loom_graph_free(g2);
  loom_graph_free(g);
  for (int k = 0; k < 4; k++) loom_tensor_free(defs[k]);
  loom_status_free(st);
}
