/* tf.Example feature kinds beyond FixedLen (loom_data.h):
 * FixedLenSequenceFeature with per-feature batch padding, SparseFeature as
 * its dense equivalent, spec validation. */
#include "data_util.h"

/* ======================================================================
 * FixedLenSequenceFeature and SparseFeature
 * ====================================================================== */
static loom_tensor *t_f32(int64_t n, const float *v) { return loom_tensor_from_data(LOOM_F32, 1, &n, v, NULL); }
static loom_tensor *t_i64(int64_t n, const int64_t *v) { return loom_tensor_from_data(LOOM_I64, 1, &n, v, NULL); }
static loom_tensor *t_str(int64_t n, const char *const *v) {
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 1, &n, NULL);
  for (int64_t i = 0; i < n; i++) loom_tensor_set_string(t, i, v[i], strlen(v[i]), NULL);
  return t;
}
/* Writes one example of n features and frees the tensors. */
static void write_rec(loom_tfrecord_writer *w, int n, const char *const *names, loom_tensor **vals) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_tfrecord_writer_write_example(w, n, names, (const loom_tensor *const *)vals, st), LOOM_OK, "%s",
               loom_status_message(st));
  for (int i = 0; i < n; i++) loom_tensor_free(vals[i]);
  loom_status_free(st);
}
static void expect_strs(const loom_tensor *t, int64_t n, const char *const *want) {
  cr_assert_eq(loom_tensor_dtype(t), LOOM_STRING);
  cr_assert_eq(loom_tensor_numel(t), n);
  for (int64_t i = 0; i < n; i++) {
    size_t l;
    const char *g = loom_tensor_get_string(t, i, &l);
    cr_assert_eq(l, strlen(want[i]), "string %lld: '%.*s' want '%s'", (long long)i, (int)l, g ? g : "", want[i]);
    cr_assert(!l || !memcmp(g, want[i], l), "string %lld: '%.*s' want '%s'", (long long)i, (int)l, g, want[i]);
  }
}

/* Three records for the sequence tests:
 *  r0: s float {1,2,3,4}     t {"a"}            m int64 {1..6}
 *  r1: s float {} (present)  t {"b","c","d"}    (no m)
 *  r2: s float {5..10}       (no t)             m {7,8,9} */
static void write_seq_examples(const char *path) {
  loom_status *st = loom_status_new();
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(path, st);
  cr_assert(w, "%s", loom_status_message(st));
  const float s0[4] = {1, 2, 3, 4}, s2[6] = {5, 6, 7, 8, 9, 10};
  const int64_t m0[6] = {1, 2, 3, 4, 5, 6}, m2[3] = {7, 8, 9};
  const char *t0[1] = {"a"}, *t1[3] = {"b", "c", "d"};
  const char *n3[3] = {"s", "t", "m"}, *n2[2] = {"s", "t"}, *n2b[2] = {"s", "m"};
  loom_tensor *r0[3] = {t_f32(4, s0), t_str(1, t0), t_i64(6, m0)};
  write_rec(w, 3, n3, r0);
  loom_tensor *r1[2] = {t_f32(0, s0), t_str(3, t1)};
  write_rec(w, 2, n2, r1);
  loom_tensor *r2[2] = {t_f32(6, s2), t_i64(3, m2)};
  write_rec(w, 2, n2b, r2);
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  loom_status_free(st);
}

static const float k_spad = 9.5f;
static const int64_t k_mpad = -7;
static const char *const k_tpad[1] = {"<pad>"};
/* s: [2] floats (pad 9.5), t: scalar strings (allow_missing, pad NULL =
 * ""), m: [3] int64 (allow_missing, pad -7). */
static void seq_spec(loom_feature_spec *s) {
  memset(s, 0, 3 * sizeof *s);
  s[0] = (loom_feature_spec){.name = "s", .dtype = LOOM_F32, .ndim = 1, .dims = {2}, .default_value = &k_spad,
                             .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE};
  s[1] = (loom_feature_spec){.name = "t", .dtype = LOOM_STRING, .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE,
                             .allow_missing = 1};
  s[2] = (loom_feature_spec){.name = "m", .dtype = LOOM_I64, .ndim = 1, .dims = {3}, .default_value = &k_mpad,
                             .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE, .allow_missing = 1};
}

Test(tfrecord_seq, values_and_shapes) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "seq.tfrecord");
  write_seq_examples(p);
  const char *paths[1] = {p};
  loom_feature_spec spec[3];
  seq_spec(spec);
  loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 3, spec, NULL, st), st);
  int64_t d[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 2);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(d[1], 2);
  cr_assert_eq(loom_dataset_component_shape(ds, 1, d), 1);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(loom_dataset_component_shape(ds, 2, d), 2);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(d[1], 3);
  cr_assert_eq(loom_dataset_component_dtype(ds, 1), LOOM_STRING);
  loom_tensor *v[3] = {NULL};
  for (int pass = 0; pass < 2; pass++) { /* the second pass reuses the tensors */
    next_ok(ds, v, st);                  /* r0 */
    const int64_t s0d[2] = {2, 2}, m0d[2] = {2, 3}, one = 1;
    const float s0[4] = {1, 2, 3, 4};
    tu_expect_f32(v[0], 2, s0d, s0, 0);
    const char *t0[1] = {"a"};
    expect_shape(v[1], 1, &one);
    expect_strs(v[1], 1, t0);
    expect_shape(v[2], 2, m0d);
    const int64_t m0[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_arr_eq(L(v[2]), m0, sizeof m0);
    next_ok(ds, v, st); /* r1: s present but empty, m missing (allow_missing) */
    const int64_t s1d[2] = {0, 2}, m1d[2] = {0, 3}, three = 3;
    expect_shape(v[0], 2, s1d);
    cr_assert_eq(loom_tensor_numel(v[0]), 0);
    const char *t1[3] = {"b", "c", "d"};
    expect_shape(v[1], 1, &three);
    expect_strs(v[1], 3, t1);
    expect_shape(v[2], 2, m1d);
    next_ok(ds, v, st); /* r2: t missing (allow_missing) */
    const int64_t s2d[2] = {3, 2}, m2d[2] = {1, 3}, zero = 0;
    const float s2[6] = {5, 6, 7, 8, 9, 10};
    tu_expect_f32(v[0], 2, s2d, s2, 0);
    expect_shape(v[1], 1, &zero);
    expect_shape(v[2], 2, m2d);
    const int64_t m2[3] = {7, 8, 9};
    cr_assert_arr_eq(L(v[2]), m2, sizeof m2);
    expect_end(ds, v, st);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  free_vals(v, 3);
  loom_dataset_free(ds);
  /* shape [] with numeric values, [2,1] (rank-2 element shape) */
  loom_feature_spec sc[2] = {{.name = "m", .dtype = LOOM_I64, .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE,
                              .allow_missing = 1},
                             {.name = "s", .dtype = LOOM_F32, .ndim = 2, .dims = {2, 1},
                              .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE}};
  ds = chk(loom_dataset_tfrecord(1, paths, 2, sc, NULL, st), st);
  cr_assert_eq(loom_dataset_component_shape(ds, 1, d), 3);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(d[1], 2);
  cr_assert_eq(d[2], 1);
  next_ok(ds, v, st);
  const int64_t six = 6, s0d3[3] = {2, 2, 1};
  expect_shape(v[0], 1, &six);
  cr_assert_eq(L(v[0])[5], 6);
  const float s0[4] = {1, 2, 3, 4};
  tu_expect_f32(v[1], 3, s0d3, s0, 0);
  free_vals(v, 3);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(p);
  loom_status_free(st);
}

Test(tfrecord_seq, batch_pads_with_default_value) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "seq.tfrecord");
  write_seq_examples(p);
  const char *paths[1] = {p};
  loom_feature_spec spec[3];
  seq_spec(spec);
  loom_tensor *v[3] = {NULL};
  /* all three: the pads travel through take (spec copied) into batch */
  for (int round = 0; round < 2; round++) {
    loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 3, spec, NULL, st), st);
    if (round) ds = chk(loom_dataset_take(ds, -1, st), st);
    ds = chk(loom_dataset_batch(ds, 3, 0, st), st);
    int64_t d[8];
    cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 3);
    cr_assert_eq(d[0], -1);
    cr_assert_eq(d[1], -1);
    cr_assert_eq(d[2], 2);
    next_ok(ds, v, st);
    /* s: lengths 2, 0, 3 -> [3, 3, 2] padded with 9.5 */
    const int64_t sd[3] = {3, 3, 2};
    const float sw[18] = {1, 2, 3, 4, 9.5f, 9.5f,  9.5f, 9.5f, 9.5f, 9.5f, 9.5f, 9.5f,  5, 6, 7, 8, 9, 10};
    tu_expect_f32(v[0], 3, sd, sw, 0);
    /* t: lengths 1, 3, 0 -> [3, 3] padded with "" (no default_value) */
    const int64_t td[2] = {3, 3};
    expect_shape(v[1], 2, td);
    const char *tw[9] = {"a", "", "", "b", "c", "d", "", "", ""};
    expect_strs(v[1], 9, tw);
    /* m: lengths 2, 0, 1 -> [3, 2, 3] padded with -7 */
    const int64_t md[3] = {3, 2, 3};
    expect_shape(v[2], 3, md);
    const int64_t mw[18] = {1, 2, 3, 4, 5, 6, -7, -7, -7, -7, -7, -7, 7, 8, 9, -7, -7, -7};
    cr_assert_arr_eq(L(v[2]), mw, sizeof mw);
    expect_end(ds, v, st);
    free_vals(v, 3);
    loom_dataset_free(ds);
  }
  /* a string pad value; batches of 2: (r0, r1) padded, then r2 alone (no padding) */
  spec[1].default_value = k_tpad;
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_tfrecord(1, paths, 3, spec, NULL, st), st), 2, 0, st), st);
  next_ok(ds, v, st);
  const int64_t td[2] = {2, 3}, sd[3] = {2, 2, 2}, md[3] = {2, 2, 3};
  expect_shape(v[1], 2, td);
  const char *tw[6] = {"a", "<pad>", "<pad>", "b", "c", "d"};
  expect_strs(v[1], 6, tw);
  const float sw[8] = {1, 2, 3, 4, 9.5f, 9.5f, 9.5f, 9.5f};
  tu_expect_f32(v[0], 3, sd, sw, 0);
  expect_shape(v[2], 3, md);
  const int64_t mw[12] = {1, 2, 3, 4, 5, 6, -7, -7, -7, -7, -7, -7};
  cr_assert_arr_eq(L(v[2]), mw, sizeof mw);
  next_ok(ds, v, st);
  const int64_t sd1[3] = {1, 3, 2}, td1[2] = {1, 0}, md1[3] = {1, 1, 3};
  const float s2[6] = {5, 6, 7, 8, 9, 10};
  tu_expect_f32(v[0], 3, sd1, s2, 0);
  expect_shape(v[1], 2, td1);
  expect_shape(v[2], 3, md1);
  const int64_t m2[3] = {7, 8, 9};
  cr_assert_arr_eq(L(v[2]), m2, sizeof m2);
  expect_end(ds, v, st);
  free_vals(v, 3);
  loom_dataset_free(ds);
  /* VarLen components still pad with 0 / "" next to a padded sequence */
  loom_feature_spec mix[2] = {spec[0], {.name = "m", .dtype = LOOM_I64, .varlen = 1}};
  ds = chk(loom_dataset_batch(chk(loom_dataset_tfrecord(1, paths, 2, mix, NULL, st), st), 3, 0, st), st);
  next_ok(ds, v, st);
  const int64_t vd[2] = {3, 6};
  expect_shape(v[1], 2, vd);
  const int64_t vw[18] = {1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 7, 8, 9, 0, 0, 0};
  cr_assert_arr_eq(L(v[1]), vw, sizeof vw);
  free_vals(v, 3);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(p);
  loom_status_free(st);
}

Test(tfrecord_seq, missing_and_count_errors) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "seq.tfrecord"), want[512];
  write_seq_examples(p);
  const char *paths[1] = {p};
  loom_tensor *v[1] = {NULL};
  /* allow_missing off: r1 has an empty s (fine), r2 lacks t -> error naming file, record, feature */
  loom_feature_spec t1[1] = {{.name = "t", .dtype = LOOM_STRING, .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE}};
  loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 1, t1, NULL, st), st);
  next_ok(ds, v, st);
  next_ok(ds, v, st);
  snprintf(want, sizeof want, "%s: record 2", p);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, "'t'", "allow_missing");
  loom_dataset_free(ds);
  /* allow_missing on: the same record gives an empty sequence */
  t1[0].allow_missing = 1;
  ds = chk(loom_dataset_tfrecord(1, paths, 1, t1, NULL, st), st);
  next_ok(ds, v, st);
  next_ok(ds, v, st);
  next_ok(ds, v, st);
  const int64_t zero = 0;
  expect_shape(v[0], 1, &zero);
  expect_end(ds, v, st);
  loom_dataset_free(ds);
  /* m missing in r1 without allow_missing */
  loom_feature_spec m1[1] = {{.name = "m", .dtype = LOOM_I64, .ndim = 1, .dims = {3},
                              .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE}};
  ds = chk(loom_dataset_tfrecord(1, paths, 1, m1, NULL, st), st);
  next_ok(ds, v, st);
  snprintf(want, sizeof want, "%s: record 1", p);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, "'m'", "required but missing");
  loom_dataset_free(ds);
  /* a count that is not a multiple of numel(shape): s has 4, 0, 6 values; shape [4] fails on r2 */
  loom_feature_spec s4[1] = {{.name = "s", .dtype = LOOM_F32, .ndim = 1, .dims = {4},
                              .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE}};
  ds = chk(loom_dataset_tfrecord(1, paths, 1, s4, NULL, st), st);
  next_ok(ds, v, st);
  next_ok(ds, v, st);
  snprintf(want, sizeof want, "%s: record 2", p);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, "'s' has 6 values", "not a multiple of 4");
  loom_dataset_free(ds);
  /* shape [3] fails already on r0 (4 values) */
  s4[0].dims[0] = 3;
  ds = chk(loom_dataset_tfrecord(1, paths, 1, s4, NULL, st), st);
  snprintf(want, sizeof want, "%s: record 0", p);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, "'s' has 4 values", "[3]");
  loom_dataset_free(ds);
  /* list type mismatch */
  loom_feature_spec wrong[1] = {{.name = "m", .dtype = LOOM_F32, .kind = LOOM_FEATURE_FIXED_LEN_SEQUENCE,
                                 .allow_missing = 1}};
  ds = chk(loom_dataset_tfrecord(1, paths, 1, wrong, NULL, st), st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "record 0", "'m' is a int64_list", "float_list");
  loom_dataset_free(ds);
  free_vals(v, 1);
  tu_rmtree(dir);
  free(p);
  loom_status_free(st);
}

/* Records for the sparse tests (size 6):
 *  r0: ix {3, 0, 5}  vf {1.5, -2, 7}  vi {30, 0, 50}  vs {"x", "y", "z"}
 *  r1: nothing
 *  r2: ix {1}        vf {4}           vi {-1}         vs {"w"} */
static void write_sparse_examples(const char *path) {
  loom_status *st = loom_status_new();
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(path, st);
  cr_assert(w, "%s", loom_status_message(st));
  const char *names[4] = {"ix", "vf", "vi", "vs"};
  const int64_t ix0[3] = {3, 0, 5}, vi0[3] = {30, 0, 50}, ix2[1] = {1}, vi2[1] = {-1};
  const float vf0[3] = {1.5f, -2, 7}, vf2[1] = {4};
  const char *vs0[3] = {"x", "y", "z"}, *vs2[1] = {"w"};
  loom_tensor *r0[4] = {t_i64(3, ix0), t_f32(3, vf0), t_i64(3, vi0), t_str(3, vs0)};
  write_rec(w, 4, names, r0);
  const char *other[1] = {"unrelated"};
  loom_tensor *r1[1] = {loom_tensor_scalar_i64(1)};
  write_rec(w, 1, other, r1);
  loom_tensor *r2[4] = {t_i64(1, ix2), t_f32(1, vf2), t_i64(1, vi2), t_str(1, vs2)};
  write_rec(w, 4, names, r2);
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  loom_status_free(st);
}
static loom_feature_spec sparse_spec(const char *name, loom_dtype dt, const char *ik, const char *vk, int64_t size) {
  return (loom_feature_spec){.name = name, .dtype = dt, .kind = LOOM_FEATURE_SPARSE, .index_key = ik,
                             .value_key = vk, .size = size};
}

Test(tfrecord_sparse, dense_values) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "sp.tfrecord");
  write_sparse_examples(p);
  const char *paths[1] = {p};
  /* the keys are copies: the spec's strings may go away after the call */
  char ik[8], vk[8];
  strcpy(ik, "ix");
  strcpy(vk, "vf");
  loom_feature_spec spec[3] = {sparse_spec("f", LOOM_F32, ik, vk, 6), sparse_spec("i", LOOM_I64, "ix", "vi", 6),
                               sparse_spec("s", LOOM_STRING, "ix", "vs", 6)};
  spec[1].already_sorted = 1; /* accepted; no effect on the dense result */
  loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 3, spec, NULL, st), st);
  memset(ik, 'q', sizeof ik - 1);
  memset(vk, 'q', sizeof vk - 1);
  int64_t d[8];
  for (int c = 0; c < 3; c++) {
    cr_assert_eq(loom_dataset_component_shape(ds, c, d), 1);
    cr_assert_eq(d[0], 6);
  }
  cr_assert_str_eq(loom_dataset_component_name(ds, 2), "s");
  loom_tensor *v[3] = {NULL};
  const int64_t six = 6;
  for (int pass = 0; pass < 2; pass++) {
    next_ok(ds, v, st); /* r0: indices 3, 0, 5 */
    const float f0[6] = {-2, 0, 0, 1.5f, 0, 7};
    tu_expect_f32(v[0], 1, &six, f0, 0);
    const int64_t i0[6] = {0, 0, 0, 30, 0, 50};
    expect_shape(v[1], 1, &six);
    cr_assert_arr_eq(L(v[1]), i0, sizeof i0);
    const char *s0[6] = {"y", "", "", "x", "", "z"};
    expect_strs(v[2], 6, s0);
    next_ok(ds, v, st); /* r1: both keys missing -> all 0 / "" (the reused tensors are cleared) */
    const float f1[6] = {0};
    tu_expect_f32(v[0], 1, &six, f1, 0);
    const int64_t i1[6] = {0};
    cr_assert_arr_eq(L(v[1]), i1, sizeof i1);
    const char *s1[6] = {"", "", "", "", "", ""};
    expect_strs(v[2], 6, s1);
    next_ok(ds, v, st); /* r2: index 1 */
    const float f2[6] = {0, 4, 0, 0, 0, 0};
    tu_expect_f32(v[0], 1, &six, f2, 0);
    const int64_t i2[6] = {0, -1, 0, 0, 0, 0};
    cr_assert_arr_eq(L(v[1]), i2, sizeof i2);
    const char *s2[6] = {"", "w", "", "", "", ""};
    expect_strs(v[2], 6, s2);
    expect_end(ds, v, st);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  free_vals(v, 3);
  loom_dataset_free(ds);
  strcpy(ik, "ix");
  strcpy(vk, "vf");
  /* batched: a fixed [size] component stacks without padding */
  ds = chk(loom_dataset_batch(chk(loom_dataset_tfrecord(1, paths, 3, spec, NULL, st), st), 3, 0, st), st);
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 2);
  cr_assert_eq(d[1], 6);
  next_ok(ds, v, st);
  const int64_t b36[2] = {3, 6};
  const float fb[18] = {-2, 0, 0, 1.5f, 0, 7, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0};
  tu_expect_f32(v[0], 2, b36, fb, 0);
  const char *sb[18] = {"y", "", "", "x", "", "z", "", "", "", "", "", "", "", "w", "", "", "", ""};
  expect_strs(v[2], 18, sb);
  free_vals(v, 3);
  loom_dataset_free(ds);
  /* size larger than any index: the tail stays 0 */
  loom_feature_spec big[1] = {sparse_spec("f", LOOM_F32, "ix", "vf", 9)};
  ds = chk(loom_dataset_tfrecord(1, paths, 1, big, NULL, st), st);
  next_ok(ds, v, st);
  const int64_t nine = 9;
  const float f9[9] = {-2, 0, 0, 1.5f, 0, 7, 0, 0, 0};
  tu_expect_f32(v[0], 1, &nine, f9, 0);
  free_vals(v, 3);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(p);
  loom_status_free(st);
}

Test(tfrecord_sparse, bad_records) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char want[512];
  /* case r: a file with a good record 0 (ix {0, 1}, v {"p", "q"}) and the case as record 1:
   * 1 index 6 (size 6); 2 index -1; 3 duplicate 2 (unsorted); 4 duplicate 4 (sorted);
   * 5 3 indices, 2 values; 6 values without indices; 7 indices as a float_list */
  const char *names[2] = {"ix", "v"};
  const int64_t ix[8][3] = {{0, 1}, {2, 6}, {-1, 0}, {2, 0, 2}, {1, 4, 4}, {0, 1, 2}, {0}, {0}};
  const int64_t nix[8] = {2, 2, 2, 3, 3, 3, 0, 1};
  const int64_t nv[8] = {2, 2, 2, 3, 3, 2, 1, 1};
  const char *vs[3] = {"p", "q", "r"};
  struct {
    const char *a, *b;
  } want_msg[8] = {{NULL, NULL},
                   {"index 6 (entry 1 of 'ix') is outside [0, 6)", NULL},
                   {"index -1 (entry 0 of 'ix') is outside [0, 6)", NULL},
                   {"index 2 appears more than once in 'ix'", NULL},
                   {"index 4 appears more than once in 'ix'", NULL},
                   {"index feature 'ix' has 3 values", "value feature 'v' has 2"},
                   {"index feature 'ix' has 0 values", "value feature 'v' has 1"},
                   {"feature 'ix' is a float_list", "int64_list"}};
  loom_feature_spec spec[1] = {sparse_spec("sp", LOOM_STRING, "ix", "v", 6)};
  loom_tensor *v[1] = {NULL};
  for (int r = 1; r < 8; r++) {
    char fn[32];
    snprintf(fn, sizeof fn, "bad%d.tfrecord", r);
    char *p = path_in(dir, fn);
    loom_tfrecord_writer *w = loom_tfrecord_writer_new(p, st);
    cr_assert(w, "%s", loom_status_message(st));
    loom_tensor *good[2] = {t_i64(nix[0], ix[0]), t_str(nv[0], vs)};
    write_rec(w, 2, names, good);
    loom_tensor *vals[2] = {t_i64(nix[r], ix[r]), t_str(nv[r], vs)};
    if (r == 6) { /* no index feature at all */
      loom_tensor_free(vals[0]);
      vals[0] = vals[1];
      write_rec(w, 1, names + 1, vals);
    } else {
      if (r == 7) {
        loom_tensor_free(vals[0]);
        const float zero = 0;
        vals[0] = t_f32(1, &zero);
      }
      write_rec(w, 2, names, vals);
    }
    cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
    const char *paths[1] = {p};
    loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 1, spec, NULL, st), st);
    next_ok(ds, v, st);
    const char *s0[6] = {"p", "q", "", "", "", ""};
    expect_strs(v[0], 6, s0);
    snprintf(want, sizeof want, "%s: record 1", p);
    expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want, want_msg[r].a, want_msg[r].b);
    if (r != 7) cr_assert(strstr(loom_status_message(st), "SparseFeature 'sp'"), "%s", loom_status_message(st));
    loom_dataset_free(ds);
    if (r == 1) { /* a value list of the wrong type */
      loom_feature_spec wrongv[1] = {sparse_spec("sp", LOOM_F32, "ix", "v", 6)};
      ds = chk(loom_dataset_tfrecord(1, paths, 1, wrongv, NULL, st), st);
      expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "record 0", "'v' is a bytes_list",
                 "float_list");
      loom_dataset_free(ds);
    }
    free(p);
  }
  free_vals(v, 1);
  tu_rmtree(dir);
  loom_status_free(st);
}

/* A spec entry that loom_dataset_tfrecord must reject with all of a, b in the message. */
static void expect_spec_error(const char *path, loom_feature_spec s, const char *a, const char *b) {
  loom_status *st = loom_status_new();
  loom_feature_spec two[2] = {{.name = "ok", .dtype = LOOM_F32}, s};
  const char *paths[1] = {path};
  loom_dataset *ds = loom_dataset_tfrecord(1, paths, 2, two, NULL, st);
  cr_assert_null(ds, "spec '%s' accepted (want '%s')", s.name, a);
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, a, b, NULL);
  loom_status_free(st);
}

Test(tfrecord_spec, new_kinds_validated) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "seq.tfrecord");
  write_seq_examples(p);
  const loom_feature_kind SEQ = LOOM_FEATURE_FIXED_LEN_SEQUENCE, SP = LOOM_FEATURE_SPARSE;
  expect_spec_error(p, (loom_feature_spec){.name = "k", .dtype = LOOM_F32, .kind = 7}, "'k'", "kind 7");
  expect_spec_error(p, (loom_feature_spec){.name = "k", .dtype = LOOM_F32, .kind = -1}, "'k'", "kind -1");
  expect_spec_error(p, (loom_feature_spec){.name = "c", .dtype = LOOM_F32, .varlen = 1, .kind = SEQ}, "'c'",
                    "varlen = 1 conflicts with kind FixedLenSequenceFeature");
  expect_spec_error(p, (loom_feature_spec){.name = "c", .dtype = LOOM_F32, .varlen = 1, .kind = SP, .index_key = "i",
                                           .value_key = "v", .size = 3},
                    "'c'", "varlen = 1 conflicts with kind SparseFeature");
  expect_spec_error(p, (loom_feature_spec){.name = "a", .dtype = LOOM_F32, .allow_missing = 1}, "'a'",
                    "allow_missing is for FixedLenSequenceFeature, this entry is a FixedLenFeature");
  expect_spec_error(p, (loom_feature_spec){.name = "a", .dtype = LOOM_F32, .varlen = 1, .allow_missing = 1}, "'a'",
                    "VarLenFeature");
  expect_spec_error(p, (loom_feature_spec){.name = "x", .dtype = LOOM_F32, .index_key = "i"}, "'x'",
                    "index_key is for SparseFeature");
  expect_spec_error(p, (loom_feature_spec){.name = "x", .dtype = LOOM_F32, .kind = SEQ, .value_key = "v"}, "'x'",
                    "value_key is for SparseFeature, this entry is a FixedLenSequenceFeature");
  expect_spec_error(p, (loom_feature_spec){.name = "x", .dtype = LOOM_F32, .kind = LOOM_FEATURE_VAR_LEN, .size = 4},
                    "'x'", "size is for SparseFeature");
  expect_spec_error(p, (loom_feature_spec){.name = "x", .dtype = LOOM_F32, .already_sorted = 1}, "'x'",
                    "already_sorted");
  /* sparse: keys, size, shape, default */
  expect_spec_error(p, (loom_feature_spec){.name = "s", .dtype = LOOM_F32, .kind = SP, .value_key = "v", .size = 3},
                    "'s'", "index_key is NULL");
  expect_spec_error(p, (loom_feature_spec){.name = "s", .dtype = LOOM_F32, .kind = SP, .index_key = "i", .size = 3},
                    "'s'", "value_key is NULL");
  expect_spec_error(p,
                    (loom_feature_spec){.name = "s", .dtype = LOOM_F32, .kind = SP, .index_key = "i", .value_key = "",
                                        .size = 3},
                    "'s'", "value_key is empty");
  expect_spec_error(p, sparse_spec("s", LOOM_F32, "i", "v", 0), "'s'", "size is 0");
  expect_spec_error(p, sparse_spec("s", LOOM_F32, "i", "v", -3), "'s'", "size is -3");
  loom_feature_spec s1 = sparse_spec("s", LOOM_F32, "i", "v", 3);
  s1.ndim = 1;
  s1.dims[0] = 3;
  expect_spec_error(p, s1, "'s'", "ndim 1");
  s1 = sparse_spec("s", LOOM_F32, "i", "v", 3);
  s1.default_value = &k_wdef;
  expect_spec_error(p, s1, "'s'", "no default_value");
  expect_spec_error(p, sparse_spec("s", LOOM_F64, "i", "v", 3), "'s'", "float64");
  expect_spec_error(p, sparse_spec("s", LOOM_I32, "i", "v", 3), "'s'", "int32");
  /* sequence: rank and dims, dtype */
  expect_spec_error(p, (loom_feature_spec){.name = "q", .dtype = LOOM_F32, .kind = SEQ, .ndim = 7}, "'q'",
                    "ndim 7 outside [0, 6]");
  expect_spec_error(p, (loom_feature_spec){.name = "q", .dtype = LOOM_F32, .kind = SEQ, .ndim = -1}, "'q'",
                    "ndim -1");
  expect_spec_error(p, (loom_feature_spec){.name = "q", .dtype = LOOM_F32, .kind = SEQ, .ndim = 2, .dims = {2, 0}},
                    "'q'", "dims[1] is 0");
  expect_spec_error(p, (loom_feature_spec){.name = "q", .dtype = LOOM_F32, .kind = SEQ, .ndim = 1, .dims = {-1}},
                    "'q'", "dims[0] is -1");
  expect_spec_error(p, (loom_feature_spec){.name = "q", .dtype = LOOM_U8, .kind = SEQ}, "'q'", "uint8");
  /* the name checks cover the new kinds too */
  expect_spec_error(p, sparse_spec("ok", LOOM_F32, "i", "v", 3), "'ok' appears twice", NULL);
  /* accepted: a rank-6 sequence element, an explicit VAR_LEN kind (ndim ignored as for varlen = 1),
   * VAR_LEN with varlen = 1 */
  const char *paths[1] = {p};
  loom_feature_spec okspec[3] = {
      {.name = "s", .dtype = LOOM_F32, .kind = SEQ, .ndim = 6, .dims = {1, 1, 1, 1, 1, 1}, .allow_missing = 1},
      {.name = "m", .dtype = LOOM_I64, .kind = LOOM_FEATURE_VAR_LEN, .ndim = 3},
      {.name = "t", .dtype = LOOM_STRING, .kind = LOOM_FEATURE_VAR_LEN, .varlen = 1}};
  loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 3, okspec, NULL, st), st);
  int64_t d[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 7);
  cr_assert_eq(loom_dataset_component_shape(ds, 1, d), 1);
  cr_assert_eq(d[0], -1);
  loom_tensor *v[3] = {NULL};
  next_ok(ds, v, st);
  const int64_t sd[7] = {4, 1, 1, 1, 1, 1, 1}, six = 6, one = 1;
  expect_shape(v[0], 7, sd);
  expect_shape(v[1], 1, &six);
  expect_shape(v[2], 1, &one);
  free_vals(v, 3);
  loom_dataset_free(ds);
  /* batching the rank-7 sequence component reaches LOOM_MAX_DIMS exactly */
  ds = chk(loom_dataset_batch(chk(loom_dataset_tfrecord(1, paths, 3, okspec, NULL, st), st), 2, 0, st), st);
  next_ok(ds, v, st);
  const int64_t bd[8] = {2, 4, 1, 1, 1, 1, 1, 1};
  expect_shape(v[0], 8, bd);
  cr_assert_eq(F(v[0])[3], 4.0f);
  cr_assert_eq(F(v[0])[4], 0.0f); /* r1's s is empty: all padding (0, no default_value) */
  free_vals(v, 3);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(p);
  loom_status_free(st);
}
