/* test_parse_example.c - the LoomParseExample graph op (tf.io.parse_example)
 * and the parsing serving input receiver:
 *  - hand-built tf.Example bytes (packed and unpacked lists, duplicates,
 *    missing features with and without defaults) parse to the values written;
 *  - bytes from loom's own tf.Example writer parse to what the TFRecord
 *    dataset (the other user of the shared decoder) reads from the same bytes;
 *  - bytes TF 2.15 serialized parse to exactly what TF's tf.io.parse_example
 *    returned (tests/fixtures/parse_example/, gen_parse_example.py);
 *  - errors: a missing feature without default, a list of the wrong kind or
 *    length, truncated or garbage bytes name the feature and the row; bad
 *    specs are graph errors naming the feature;
 *  - the op round-trips through loom_export_write / loom_predictor_load;
 *  - canned LinearClassifier, DNNClassifier and LinearRegressor exported with
 *    loom_fc_parsing_receiver_new: TF's signatures (classification /
 *    regression on "inputs", predict on "examples") and, fed serialized
 *    examples, the same outputs as Estimator.predict on the same rows. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"
#include "test_util.h"

/* ---- a tiny protobuf writer for hand-built examples ---- */
typedef struct pbuf {
  uint8_t b[4096];
  size_t n;
} pbuf;
static void pb_raw(pbuf *p, const void *d, size_t n) {
  cr_assert(p->n + n <= sizeof p->b);
  memcpy(p->b + p->n, d, n);
  p->n += n;
}
static void pb_varint(pbuf *p, uint64_t v) {
  do {
    uint8_t c = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    pb_raw(p, &c, 1);
    v >>= 7;
  } while (v);
}
static void pb_len(pbuf *p, int field, const void *d, size_t n) {
  pb_varint(p, ((uint64_t)field << 3) | 2);
  pb_varint(p, n);
  pb_raw(p, d, n);
}
/* Feature entry key -> list (kind 1 bytes, 2 float, 3 int64), added to feats */
static void pb_feature(pbuf *feats, const char *key, int kind, const pbuf *list) {
  pbuf inner = {.n = 0}, feat = {.n = 0}, entry = {.n = 0};
  pb_len(&inner, kind, list->b, list->n);
  pb_len(&entry, 1, key, strlen(key));
  pb_len(&entry, 2, inner.b, inner.n);
  (void)feat;
  pb_len(feats, 1, entry.b, entry.n);
}
static void list_floats_packed(pbuf *l, int n, const float *v) {
  pb_len(l, 1, v, (size_t)n * 4);
}
static void list_floats_unpacked(pbuf *l, int n, const float *v) {
  for (int i = 0; i < n; i++) {
    pb_varint(l, (1 << 3) | 5);
    pb_raw(l, &v[i], 4);
  }
}
static void list_ints_packed(pbuf *l, int n, const int64_t *v) {
  pbuf t = {.n = 0};
  for (int i = 0; i < n; i++) pb_varint(&t, (uint64_t)v[i]);
  pb_len(l, 1, t.b, t.n);
}
static void list_ints_unpacked(pbuf *l, int n, const int64_t *v) {
  for (int i = 0; i < n; i++) {
    pb_varint(l, 1 << 3);
    pb_varint(l, (uint64_t)v[i]);
  }
}
static void list_bytes(pbuf *l, int n, const char *const *v) {
  for (int i = 0; i < n; i++) pb_len(l, 1, v[i], strlen(v[i]));
}
/* Example{features: feats} */
static void pb_example(pbuf *ex, const pbuf *feats) { pb_len(ex, 1, feats->b, feats->n); }

static loom_tensor *strings_tensor(int n, const char *const *p, const size_t *len) {
  int64_t d[1] = {n};
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 1, d, NULL);
  for (int i = 0; i < n; i++) cr_assert_eq(loom_tensor_set_string(t, i, p[i], len[i], NULL), LOOM_OK);
  return t;
}

/* runs the parse of rows by spec; outs[0..nout) fetched (caller frees); returns the code, message in msg */
static loom_code run_parse(int nrows, const char *const *rows, const size_t *lens, int nspec,
                           const loom_feature_spec *spec, loom_tensor **outs, char *msg, size_t cap) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, d, "serialized");
  loom_output o[64];
  int nout = loom_parse_example(g, x, nspec, spec, 64, o, "parse");
  loom_status *st = loom_status_new();
  loom_code rc = loom_graph_status(g, st);
  if (!rc) {
    cr_assert_eq(nout, loom_parse_example_num_outputs(nspec, spec));
    loom_session *s = loom_session_new(g, NULL, st);
    cr_assert(s, "%s", loom_status_message(st));
    loom_tensor *in = strings_tensor(nrows, rows, lens);
    for (int i = 0; i < nout; i++) outs[i] = NULL;
    rc = loom_session_run(s, &x, &in, 1, o, outs, nout, NULL, 0, st);
    loom_tensor_free(in);
    loom_session_free(s);
  }
  if (msg) snprintf(msg, cap, "%s", loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
  return rc;
}

static void expect_shape(const loom_tensor *t, int nd, const int64_t *dims) {
  cr_assert_eq(loom_tensor_ndim(t), nd);
  for (int i = 0; i < nd; i++) cr_expect_eq(loom_tensor_dims(t)[i], dims[i], "dim %d", i);
}
static void expect_str(const loom_tensor *t, int64_t i, const char *want, size_t wl) {
  size_t l = 0;
  const char *p = loom_tensor_get_string(t, i, &l);
  cr_expect(l == wl && !memcmp(p, want, wl), "string %lld: got '%.*s' (%zu bytes), want '%.*s'", (long long)i, (int)l,
            p, l, (int)wl, want);
}

/* the spec of the hand-built tests: x f32[2] required; n i64 scalar default 5; s string scalar
 * default "dflt"; ids i64 VarLen; w string VarLen */
static const float X_NONE[1] = {0};
static const int64_t N_DEF = 5;
static const char *const S_DEF[1] = {"dflt"};
static int hand_spec(loom_feature_spec *spec) {
  memset(spec, 0, 5 * sizeof *spec);
  spec[0] = (loom_feature_spec){.name = "x", .dtype = LOOM_F32, .ndim = 1, .dims = {2}};
  spec[1] = (loom_feature_spec){.name = "n", .dtype = LOOM_I64, .default_value = &N_DEF};
  spec[2] = (loom_feature_spec){.name = "s", .dtype = LOOM_STRING, .default_value = S_DEF};
  spec[3] = (loom_feature_spec){.name = "ids", .dtype = LOOM_I64, .kind = LOOM_FEATURE_VAR_LEN};
  spec[4] = (loom_feature_spec){.name = "w", .dtype = LOOM_STRING, .varlen = 1, .ragged = 1};
  (void)X_NONE;
  return 5;
}

Test(parse_example, hand_built_fixed_varlen_defaults) {
  pbuf ex[3] = {{.n = 0}, {.n = 0}, {.n = 0}};
  {
    pbuf f = {.n = 0}, l;
    static const float x[2] = {1.5f, -2.0f};
    static const int64_t n[1] = {4}, ids[2] = {7, -8};
    static const char *const s[1] = {"hi"}, *const w[1] = {"a"};
    l.n = 0, list_floats_packed(&l, 2, x), pb_feature(&f, "x", 2, &l);
    l.n = 0, list_ints_packed(&l, 1, n), pb_feature(&f, "n", 3, &l);
    l.n = 0, list_bytes(&l, 1, s), pb_feature(&f, "s", 1, &l);
    l.n = 0, list_ints_packed(&l, 2, ids), pb_feature(&f, "ids", 3, &l);
    l.n = 0, list_bytes(&l, 1, w), pb_feature(&f, "w", 1, &l);
    pb_example(&ex[0], &f);
  }
  {
    pbuf f = {.n = 0}, l;
    static const float x[2] = {0.0f, 3.0f};
    l.n = 0, list_floats_packed(&l, 2, x), pb_feature(&f, "x", 2, &l);
    pb_example(&ex[1], &f); /* n, s default; ids, w empty rows */
  }
  {
    pbuf f = {.n = 0}, l;
    static const float x0[2] = {-1.0f, -1.0f}, x[2] = {9.0f, 10.25f};
    static const int64_t ids[3] = {INT64_MIN, 0, INT64_MAX};
    static const char *const w[3] = {"", "bb", "ccc"};
    l.n = 0, list_floats_packed(&l, 2, x0), pb_feature(&f, "x", 2, &l); /* a duplicate key: the last wins */
    l.n = 0, list_ints_unpacked(&l, 3, ids), pb_feature(&f, "ids", 3, &l);
    l.n = 0, list_floats_unpacked(&l, 2, x), pb_feature(&f, "x", 2, &l);
    l.n = 0, list_bytes(&l, 3, w), pb_feature(&f, "w", 1, &l);
    l.n = 0, list_bytes(&l, 1, w + 1), pb_feature(&f, "unused", 1, &l);
    pb_example(&ex[2], &f);
  }
  const char *rows[3] = {(const char *)ex[0].b, (const char *)ex[1].b, (const char *)ex[2].b};
  size_t lens[3] = {ex[0].n, ex[1].n, ex[2].n};
  loom_feature_spec spec[5];
  int ns = hand_spec(spec);
  loom_tensor *o[7] = {0};
  char msg[512];
  cr_assert_eq(run_parse(3, rows, lens, ns, spec, o, msg, sizeof msg), LOOM_OK, "%s", msg);
  int64_t d32[2] = {3, 2}, d3[1] = {3}, d4[1] = {4};
  expect_shape(o[0], 2, d32);
  const float xw[6] = {1.5f, -2.0f, 0.0f, 3.0f, 9.0f, 10.25f};
  for (int i = 0; i < 6; i++) cr_expect_eq(((const float *)loom_tensor_data_const(o[0]))[i], xw[i], "x[%d]", i);
  expect_shape(o[1], 1, d3);
  const int64_t nw[3] = {4, 5, 5};
  for (int i = 0; i < 3; i++) cr_expect_eq(((const int64_t *)loom_tensor_data_const(o[1]))[i], nw[i], "n[%d]", i);
  expect_shape(o[2], 1, d3);
  expect_str(o[2], 0, "hi", 2);
  expect_str(o[2], 1, "dflt", 4);
  expect_str(o[2], 2, "dflt", 4);
  /* ids: values [7, -8, MIN, 0, MAX], splits [0, 2, 2, 5] */
  const int64_t idv[5] = {7, -8, INT64_MIN, 0, INT64_MAX}, ids_sp[4] = {0, 2, 2, 5};
  cr_assert_eq(loom_tensor_numel(o[3]), 5);
  for (int i = 0; i < 5; i++) cr_expect_eq(((const int64_t *)loom_tensor_data_const(o[3]))[i], idv[i], "ids[%d]", i);
  expect_shape(o[4], 1, d4);
  for (int i = 0; i < 4; i++) cr_expect_eq(((const int64_t *)loom_tensor_data_const(o[4]))[i], ids_sp[i]);
  /* w: values ["a", "", "bb", "ccc"], splits [0, 1, 1, 4] */
  const int64_t w_sp[4] = {0, 1, 1, 4};
  cr_assert_eq(loom_tensor_numel(o[5]), 4);
  expect_str(o[5], 0, "a", 1);
  expect_str(o[5], 1, "", 0);
  expect_str(o[5], 2, "bb", 2);
  expect_str(o[5], 3, "ccc", 3);
  for (int i = 0; i < 4; i++) cr_expect_eq(((const int64_t *)loom_tensor_data_const(o[6]))[i], w_sp[i]);
  for (int i = 0; i < 7; i++) loom_tensor_free(o[i]);

  /* an empty batch: [0, 2] and splits [1] = {0} */
  cr_assert_eq(run_parse(0, rows, lens, ns, spec, o, msg, sizeof msg), LOOM_OK, "%s", msg);
  cr_expect_eq(loom_tensor_dims(o[0])[0], 0);
  cr_expect_eq(loom_tensor_numel(o[4]), 1);
  cr_expect_eq(((const int64_t *)loom_tensor_data_const(o[4]))[0], 0);
  for (int i = 0; i < 7; i++) loom_tensor_free(o[i]);
}

Test(parse_example, errors_name_the_feature_and_the_row) {
  loom_feature_spec spec[5];
  int ns = hand_spec(spec);
  pbuf good = {.n = 0}, missing = {.n = 0}, wrongkind = {.n = 0}, wronglen = {.n = 0};
  {
    pbuf f = {.n = 0}, l = {.n = 0};
    static const float x[2] = {1, 2};
    list_floats_packed(&l, 2, x), pb_feature(&f, "x", 2, &l);
    pb_example(&good, &f);
  }
  {
    pbuf f = {.n = 0}, l = {.n = 0};
    static const int64_t n[1] = {1};
    list_ints_packed(&l, 1, n), pb_feature(&f, "n", 3, &l);
    pb_example(&missing, &f);
  }
  {
    pbuf f = {.n = 0}, l = {.n = 0};
    static const int64_t x[2] = {1, 2};
    list_ints_packed(&l, 2, x), pb_feature(&f, "x", 3, &l);
    pb_example(&wrongkind, &f);
  }
  {
    pbuf f = {.n = 0}, l = {.n = 0};
    static const float x[3] = {1, 2, 3};
    list_floats_packed(&l, 3, x), pb_feature(&f, "x", 2, &l);
    pb_example(&wronglen, &f);
  }
  struct {
    const pbuf *bad;
    size_t cut; /* bytes of bad to keep (0 = all) */
    const char *want1, *want2;
  } cases[] = {
      {&missing, 0, "serialized example 1: feature 'x' is required but missing", NULL},
      {&wrongkind, 0, "serialized example 1: feature 'x' is a int64_list, the spec wants float_list", NULL},
      {&wronglen, 0, "serialized example 1: feature 'x' has 3 values, its shape [2] needs 2", NULL},
      {&good, 5, "serialized example 1 is not a valid tf.Example", "(protobuf parse failed, 5 bytes)"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const char *rows[3] = {(const char *)good.b, (const char *)cases[c].bad->b, (const char *)good.b};
    size_t lens[3] = {good.n, cases[c].cut ? cases[c].cut : cases[c].bad->n, good.n};
    loom_tensor *o[7] = {0};
    char msg[512];
    cr_expect_eq(run_parse(3, rows, lens, ns, spec, o, msg, sizeof msg), LOOM_INVALID_ARGUMENT, "case %zu: %s", c, msg);
    cr_expect(strstr(msg, cases[c].want1) && (!cases[c].want2 || strstr(msg, cases[c].want2)), "case %zu: %s", c, msg);
    cr_expect(strstr(msg, "parse"), "the node is named: %s", msg);
    for (int i = 0; i < 7; i++) loom_tensor_free(o[i]);
  }
  /* a spec without VarLen entries (the kernel alone decodes and checks): the same errors */
  for (size_t c = 0; c < 3; c++) {
    const char *rows[2] = {(const char *)good.b, (const char *)cases[c].bad->b};
    size_t lens[2] = {good.n, cases[c].bad->n};
    loom_tensor *o[3] = {0};
    char msg[512];
    cr_expect_eq(run_parse(2, rows, lens, 3, spec, o, msg, sizeof msg), LOOM_INVALID_ARGUMENT, "fixed %zu: %s", c, msg);
    cr_expect(strstr(msg, cases[c].want1), "fixed %zu: %s", c, msg);
    for (int i = 0; i < 3; i++) loom_tensor_free(o[i]);
  }
  /* garbage bytes (a wire type 7 field) and every truncation of a good example: errors or
   * values, never a crash */
  const char garbage[4] = {0x0f, 0x01, 0x02, 0x03};
  {
    const char *rows[1] = {garbage};
    size_t lens[1] = {4};
    loom_tensor *o[7] = {0};
    char msg[512];
    cr_expect_eq(run_parse(1, rows, lens, ns, spec, o, msg, sizeof msg), LOOM_INVALID_ARGUMENT, "%s", msg);
    cr_expect(strstr(msg, "serialized example 0 is not a valid tf.Example"), "%s", msg);
  }
  for (size_t cut = 0; cut < good.n; cut++) {
    const char *rows[1] = {(const char *)good.b};
    size_t lens[1] = {cut};
    loom_tensor *o[7] = {0};
    char msg[512];
    loom_code rc = run_parse(1, rows, lens, ns, spec, o, msg, sizeof msg);
    cr_expect_eq(rc, LOOM_INVALID_ARGUMENT, "cut %zu: %s", cut, msg);
    for (int i = 0; i < 7; i++) loom_tensor_free(o[i]);
  }
  /* bad specs are graph errors naming the feature */
  loom_feature_spec bad[2];
  memset(bad, 0, sizeof bad);
  bad[0] = (loom_feature_spec){.name = "seq", .dtype = LOOM_F32, .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE};
  bad[1] = (loom_feature_spec){.name = "y", .dtype = LOOM_F64};
  for (int b = 0; b < 3; b++) {
    loom_feature_spec sp[2] = {spec[0], b == 2 ? spec[0] : bad[b]};
    const char *rows[1] = {(const char *)good.b};
    size_t lens[1] = {good.n};
    loom_tensor *o[7] = {0};
    char msg[512];
    loom_code rc = run_parse(1, rows, lens, 2, sp, o, msg, sizeof msg);
    cr_expect(rc == (b == 0 ? LOOM_UNIMPLEMENTED : LOOM_INVALID_ARGUMENT), "spec %d: %s", b, msg);
    cr_expect(strstr(msg, b == 0 ? "'seq'" : b == 1 ? "'y'" : "'x' appears twice"), "spec %d: %s", b, msg);
  }
}

/* serialized examples from loom's writer: the op gives what the TFRecord dataset reads */
Test(parse_example, loom_writer_bytes_equal_the_dataset) {
  char dir[TU_TMPDIR_CAP], path[256];
  tu_tmpdir(dir, sizeof dir, "pe");
  snprintf(path, sizeof path, "%s/r.tfrecord", dir);
  loom_status *st = loom_status_new();
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(path, st);
  cr_assert(w);
  enum { R = 5 };
  for (int r = 0; r < R; r++) {
    int64_t d2[1] = {2}, dk[1] = {r % 3}, d1[1] = {1};
    loom_tensor *x = loom_tensor_new(LOOM_F32, 1, d2, NULL), *ids = loom_tensor_new(LOOM_I64, 1, dk, NULL),
                *s = loom_tensor_new(LOOM_STRING, 1, d1, NULL);
    ((float *)loom_tensor_data(x))[0] = 0.1f * (float)r;
    ((float *)loom_tensor_data(x))[1] = -3.0f + (float)r;
    for (int k = 0; k < r % 3; k++) ((int64_t *)loom_tensor_data(ids))[k] = 100 * r + k;
    char sv[16];
    snprintf(sv, sizeof sv, "row%d", r);
    loom_tensor_set_string(s, 0, sv, strlen(sv), NULL);
    /* row 3 has no "n" (default) */
    const char *names[4] = {"x", "ids", "s", "n"};
    int64_t nv = 40 + r;
    loom_tensor *n = loom_tensor_from_data(LOOM_I64, 0, NULL, &nv, NULL);
    const loom_tensor *vals[4] = {x, ids, s, n};
    cr_assert_eq(loom_tfrecord_writer_write_example(w, r == 3 ? 3 : 4, names, vals, st), LOOM_OK, "%s",
                 loom_status_message(st));
    loom_tensor_free(x), loom_tensor_free(ids), loom_tensor_free(s), loom_tensor_free(n);
  }
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  /* the records' bytes (plain TFRecord framing) */
  size_t fn = 0, off = 0;
  char *f = tu_read_file(path, &fn);
  const char *rows[R];
  size_t lens[R];
  for (int r = 0; r < R; r++) {
    uint64_t len;
    memcpy(&len, f + off, 8);
    rows[r] = f + off + 12;
    lens[r] = (size_t)len;
    off += 16 + len;
  }
  cr_assert_eq(off, fn);
  static const int64_t ndef = -1;
  loom_feature_spec spec[4] = {
      {.name = "ids", .dtype = LOOM_I64, .kind = LOOM_FEATURE_VAR_LEN, .varlen = 1, .ragged = 1},
      {.name = "n", .dtype = LOOM_I64, .default_value = &ndef},
      {.name = "s", .dtype = LOOM_STRING, .ndim = 1, .dims = {1}},
      {.name = "x", .dtype = LOOM_F32, .ndim = 1, .dims = {2}},
  };
  loom_tensor *o[5] = {0};
  char msg[512];
  cr_assert_eq(run_parse(R, rows, lens, 4, spec, o, msg, sizeof msg), LOOM_OK, "%s", msg);
  /* the dataset over the same file, batched by R */
  const char *paths[1] = {path};
  loom_dataset *ds = loom_dataset_batch(loom_dataset_tfrecord(1, paths, 4, spec, NULL, st), R, 0, st);
  cr_assert(ds, "%s", loom_status_message(st));
  loom_tensor *v[5] = {0};
  cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_OK, "%s", loom_status_message(st));
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(loom_tensor_dtype(o[i]), loom_tensor_dtype(v[i]), "output %d", i);
    cr_assert_eq(loom_tensor_numel(o[i]), loom_tensor_numel(v[i]), "output %d", i);
    if (loom_tensor_dtype(o[i]) == LOOM_STRING) {
      for (int64_t j = 0; j < loom_tensor_numel(o[i]); j++) {
        size_t l;
        const char *p = loom_tensor_get_string(v[i], j, &l);
        expect_str(o[i], j, p, l);
      }
    } else {
      cr_expect(!memcmp(loom_tensor_data_const(o[i]), loom_tensor_data_const(v[i]), loom_tensor_nbytes(o[i])),
                "output %d differs from the dataset's", i);
    }
  }
  cr_expect_eq(((const int64_t *)loom_tensor_data_const(o[2]))[3], -1, "row 3 takes n's default");
  for (int i = 0; i < 5; i++) loom_tensor_free(o[i]), loom_tensor_free(v[i]);
  loom_dataset_free(ds);
  free(f);
  loom_status_free(st);
  tu_rmtree(dir);
}

/* ---- TF 2.15's bytes and TF's own parse_example results ---- */
static size_t b64_decode(const char *s, char *out) {
  static const char *A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t n = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (; *s && *s != '='; s++) {
    const char *p = strchr(A, *s);
    cr_assert(p, "bad base64");
    acc = (acc << 6) | (uint32_t)(p - A);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (char)((acc >> bits) & 0xff);
    }
  }
  return n;
}
static double json_num(const cJSON *v) {
  if (cJSON_IsString(v)) return !strcmp(v->valuestring, "inf") ? INFINITY : !strcmp(v->valuestring, "-inf") ? -INFINITY : NAN;
  return v->valuedouble;
}

Test(parse_example, tf_serialized_bytes_parse_as_tf_parses_them) {
  size_t n = 0;
  char *text = tu_read_file("tests/fixtures/parse_example/tf_examples.json", &n);
  cr_assert(text, "tests/fixtures/parse_example/tf_examples.json is missing (run gen_parse_example.py)");
  cJSON *doc = cJSON_ParseWithLength(text, n);
  cr_assert(doc);
  const cJSON *ser = cJSON_GetObjectItem(doc, "serialized"), *parsed = cJSON_GetObjectItem(doc, "parsed");
  int R = cJSON_GetArraySize(ser);
  cr_assert_eq(R, 4);
  char *rows[4];
  size_t lens[4];
  for (int r = 0; r < R; r++) {
    const char *b = cJSON_GetArrayItem(ser, r)->valuestring;
    rows[r] = malloc(strlen(b));
    lens[r] = b64_decode(b, rows[r]);
  }
  /* TF's spec: age FixedLen([1], f32, [-1]); vec FixedLen([2], f32); code FixedLen([], i64, 7);
   * name FixedLen([], string, "none"); ids VarLen(i64); tags VarLen(string) */
  static const float age_def[1] = {-1.0f};
  static const int64_t code_def = 7;
  static const char *const name_def[1] = {"none"};
  loom_feature_spec spec[6] = {
      {.name = "age", .dtype = LOOM_F32, .ndim = 1, .dims = {1}, .default_value = age_def},
      {.name = "vec", .dtype = LOOM_F32, .ndim = 1, .dims = {2}},
      {.name = "code", .dtype = LOOM_I64, .default_value = &code_def},
      {.name = "name", .dtype = LOOM_STRING, .default_value = name_def},
      {.name = "ids", .dtype = LOOM_I64, .kind = LOOM_FEATURE_VAR_LEN},
      {.name = "tags", .dtype = LOOM_STRING, .kind = LOOM_FEATURE_VAR_LEN},
  };
  loom_tensor *o[8] = {0};
  char msg[512];
  cr_assert_eq(run_parse(R, (const char *const *)rows, lens, 6, spec, o, msg, sizeof msg), LOOM_OK, "%s", msg);
  int slot = 0, checked = 0;
  for (int s = 0; s < 6; s++) {
    const cJSON *want = cJSON_GetObjectItem(parsed, spec[s].name);
    cr_assert(want, "the fixture has no %s", spec[s].name);
    const cJSON *vals = cJSON_GetObjectItem(want, "values");
    const loom_tensor *t = o[slot];
    int nv = cJSON_GetArraySize(vals);
    cr_assert_eq(loom_tensor_numel(t), nv, "%s: %lld values, TF has %d", spec[s].name, (long long)loom_tensor_numel(t), nv);
    if (cJSON_GetObjectItem(want, "shape")) {
      const cJSON *sh = cJSON_GetObjectItem(want, "shape");
      cr_assert_eq(loom_tensor_ndim(t), cJSON_GetArraySize(sh), "%s rank", spec[s].name);
      for (int k = 0; k < loom_tensor_ndim(t); k++)
        cr_expect_eq(loom_tensor_dims(t)[k], (int64_t)cJSON_GetArrayItem(sh, k)->valuedouble, "%s dim %d", spec[s].name, k);
    }
    for (int j = 0; j < nv; j++) {
      const cJSON *v = cJSON_GetArrayItem(vals, j);
      if (spec[s].dtype == LOOM_F32) {
        float got = ((const float *)loom_tensor_data_const(t))[j], exp = (float)json_num(v);
        cr_expect(!memcmp(&got, &exp, 4), "%s[%d]: %.9g vs TF %.9g", spec[s].name, j, got, exp);
      } else if (spec[s].dtype == LOOM_I64) {
        /* int64 beyond 2^53 do not survive a JSON double: compare those by the text */
        int64_t got = ((const int64_t *)loom_tensor_data_const(t))[j];
        char gb[32];
        snprintf(gb, sizeof gb, "%lld", (long long)got);
        char *txt = cJSON_PrintUnformatted(v);
        double dv = v->valuedouble;
        cr_expect(fabs(dv) > 9e15 ? (double)got == dv : got == (int64_t)dv, "%s[%d]: %s vs TF %s", spec[s].name, j, gb, txt);
        free(txt);
      } else {
        char buf[256];
        size_t bl = b64_decode(cJSON_GetObjectItem(v, "b64")->valuestring, buf);
        expect_str(t, j, buf, bl);
      }
      checked++;
    }
    if (spec[s].kind == LOOM_FEATURE_VAR_LEN) {
      const cJSON *sp = cJSON_GetObjectItem(want, "row_splits");
      const loom_tensor *ts = o[slot + 1];
      cr_assert_eq(loom_tensor_numel(ts), cJSON_GetArraySize(sp));
      for (int j = 0; j < cJSON_GetArraySize(sp); j++)
        cr_expect_eq(((const int64_t *)loom_tensor_data_const(ts))[j], (int64_t)cJSON_GetArrayItem(sp, j)->valuedouble,
                     "%s row_splits[%d]", spec[s].name, j);
      slot += 2;
    } else {
      slot++;
    }
  }
  cr_expect_eq(checked, 4 + 8 + 4 + 4 + 6 + 6);
  /* TF's two error cases (row 1 is bad): loom names the same feature and row */
  const cJSON *errs = cJSON_GetObjectItem(doc, "errors");
  const char *what[2] = {"missing_vec", "vec_is_int64"};
  const char *want[2] = {"feature 'vec' is required but missing", "feature 'vec' is a int64_list, the spec wants float_list"};
  for (int e = 0; e < 2; e++) {
    const cJSON *c = cJSON_GetObjectItem(errs, what[e]);
    cr_assert(c && cJSON_GetObjectItem(c, "tf_message"), "TF accepted %s", what[e]);
    char bad[256];
    size_t bl = b64_decode(cJSON_GetObjectItem(c, "serialized")->valuestring, bad);
    const char *r2[2] = {rows[0], bad};
    size_t l2[2] = {lens[0], bl};
    loom_tensor *o2[8] = {0};
    cr_expect_eq(run_parse(2, r2, l2, 6, spec, o2, msg, sizeof msg), LOOM_INVALID_ARGUMENT, "%s", msg);
    cr_expect(strstr(msg, "serialized example 1") && strstr(msg, want[e]), "%s (TF: %s)", msg,
              cJSON_GetObjectItem(c, "tf_message")->valuestring);
  }
  for (int i = 0; i < 8; i++) loom_tensor_free(o[i]);
  for (int r = 0; r < R; r++) free(rows[r]);
  cJSON_Delete(doc);
  free(text);
}

/* ---- canned estimators exported with the parsing receiver ---- */
#include "parse_canned_util.h"

static int sig_index(const loom_predictor *p, const char *name) {
  for (int i = 0; i < loom_predictor_num_signatures(p); i++)
    if (!strcmp(loom_predictor_signature_name(p, i), name)) return i;
  return -1;
}
/* output key of signature sig fed the serialized rows; caller frees */
static loom_tensor *run_sig(loom_predictor *p, const char *sig, char **rows, size_t *lens, const char *key) {
  loom_status *st = loom_status_new();
  int no = loom_predictor_num_outputs(p, sig), k = -1;
  cr_assert(no > 0 && no <= 16, "signature %s: %d outputs", sig, no);
  for (int i = 0; i < no; i++)
    if (!strcmp(loom_predictor_output_key(p, sig, i), key)) k = i;
  cr_assert(k >= 0, "signature %s has no output %s", sig, key);
  loom_tensor *in = strings_tensor(PC_ROWS, (const char *const *)rows, lens), *outs[16] = {0};
  cr_assert_eq(loom_predictor_run(p, sig, 1, &in, no, outs, st), LOOM_OK, "%s", loom_status_message(st));
  for (int i = 0; i < no; i++)
    if (i != k) loom_tensor_free(outs[i]);
  loom_tensor_free(in);
  loom_status_free(st);
  return outs[k];
}
static void expect_same(const loom_tensor *a, const loom_tensor *b, const char *what) {
  cr_assert_eq(loom_tensor_dtype(a), loom_tensor_dtype(b), "%s dtype", what);
  cr_assert_eq(loom_tensor_numel(a), loom_tensor_numel(b), "%s: %lld vs %lld values", what,
               (long long)loom_tensor_numel(a), (long long)loom_tensor_numel(b));
  for (int64_t i = 0; i < loom_tensor_numel(a); i++) {
    if (loom_tensor_dtype(a) == LOOM_STRING) {
      size_t l;
      const char *p = loom_tensor_get_string(b, i, &l);
      expect_str(a, i, p, l);
    } else if (loom_tensor_dtype(a) == LOOM_F32) {
      float x = ((const float *)loom_tensor_data_const(a))[i], y = ((const float *)loom_tensor_data_const(b))[i];
      cr_expect_eq(x, y, "%s[%lld]: served %.9g, Estimator.predict %.9g", what, (long long)i, x, y);
    } else {
      cr_expect(!memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), loom_tensor_nbytes(a)), "%s", what);
    }
  }
}

Test(parse_example, canned_exports_parse_examples_like_estimator_predict, .timeout = 240) {
  char work[TU_TMPDIR_CAP];
  tu_tmpdir(work, sizeof work, "pe_canned");
  char *rows[PC_ROWS];
  size_t lens[PC_ROWS];
  pc_serialize(work, rows, lens);
  loom_status *st = loom_status_new();
  for (int kind = 0; kind < 4; kind++) {
    pc_model m;
    pc_train_export(&m, (pc_kind)kind, work);
    int cls = kind == PC_LINEAR_CLS || kind == PC_DNN_CLS;
    loom_predictor *p = loom_predictor_load(m.export_dir, NULL, st);
    cr_assert(p, "model %d: %s", kind, loom_status_message(st));
    /* TF's signatures: serving_default + classification (classify) or regression (regress)
     * on "inputs"; predict on "examples"; the binary classifier also regression */
    const char *main_sig = cls ? "classification" : "regression";
    const char *sigs[3] = {"serving_default", main_sig, "predict"};
    for (int s = 0; s < 3; s++) {
      cr_assert(sig_index(p, sigs[s]) >= 0, "model %d: no signature %s", kind, sigs[s]);
      cr_assert_eq(loom_predictor_num_inputs(p, sigs[s]), 1);
      cr_expect_str_eq(loom_predictor_input_key(p, sigs[s], 0), s == 2 ? "examples" : "inputs", "model %d sig %s",
                       kind, sigs[s]);
      cr_expect_eq(loom_predictor_input_dtype(p, sigs[s], 0), LOOM_STRING);
    }
    if (cls) {
      loom_tensor *want_sc = pc_predict(&m, "probabilities"), *want_cl = pc_predict(&m, "all_classes");
      for (int s = 0; s < 2; s++) {
        loom_tensor *sc = run_sig(p, sigs[s], rows, lens, "scores"), *cl = run_sig(p, sigs[s], rows, lens, "classes");
        expect_same(sc, want_sc, "scores");
        expect_same(cl, want_cl, "classes");
        loom_tensor_free(sc), loom_tensor_free(cl);
      }
      loom_tensor *pr = run_sig(p, "predict", rows, lens, "probabilities");
      expect_same(pr, want_sc, "predict/probabilities");
      /* and the linear model learnt the labels: red, green -> class 1 (the small DNN, from a
       * random start, need not within the few steps) */
      for (int r = 0; r < PC_ROWS && kind == PC_LINEAR_CLS; r++)
        cr_expect((((const float *)loom_tensor_data_const(pr))[2 * r + 1] > 0.5f) == (pc_label(m.kind, r) > 0.5f),
                  "model %d row %d", kind, r);
      loom_tensor_free(pr), loom_tensor_free(want_sc), loom_tensor_free(want_cl);
    } else {
      loom_tensor *want = pc_predict(&m, "predictions");
      for (int s = 0; s < 2; s++) {
        loom_tensor *o = run_sig(p, sigs[s], rows, lens, "outputs");
        expect_same(o, want, "outputs");
        loom_tensor_free(o);
      }
      loom_tensor *pr = run_sig(p, "predict", rows, lens, "predictions");
      expect_same(pr, want, "predict/predictions");
      loom_tensor_free(pr), loom_tensor_free(want);
    }
    /* a row without "color" (VarLen: an empty row, the OOV path) runs; one whose "age" is an
     * int64_list fails naming the feature and the row */
    {
      pbuf f = {.n = 0}, l = {.n = 0}, ex = {.n = 0};
      static const int64_t age[1] = {30};
      list_ints_packed(&l, 1, age), pb_feature(&f, "age", 3, &l);
      pb_example(&ex, &f);
      char *r2[PC_ROWS];
      size_t l2[PC_ROWS];
      memcpy(r2, rows, sizeof r2);
      memcpy(l2, lens, sizeof l2);
      r2[5] = (char *)ex.b;
      l2[5] = ex.n;
      loom_tensor *in = strings_tensor(PC_ROWS, (const char *const *)r2, l2), *outs[16] = {0};
      int no = loom_predictor_num_outputs(p, "predict");
      cr_expect_eq(loom_predictor_run(p, "predict", 1, &in, no, outs, st), LOOM_INVALID_ARGUMENT);
      cr_expect(strstr(loom_status_message(st), "serialized example 5: feature 'age' is a int64_list"), "%s",
                loom_status_message(st));
      for (int i = 0; i < no; i++) loom_tensor_free(outs[i]);
      loom_tensor_free(in);
    }
    loom_predictor_free(p);
    pc_free(&m);
  }
  for (int r = 0; r < PC_ROWS; r++) free(rows[r]);
  loom_status_free(st);
  tu_rmtree(work);
}
