/* Datasets (loom_data.h): from_tensors, batch, shuffle, repeat, take,
 * prefetch, map, numpy_input, IDX (synthetic raw/gz, the real
 * Fashion-MNIST test set, malformed files), CSV (RFC 4180 quoting, defaults,
 * errors naming file:line), TFRecord of tf.Example (round trips, defaults,
 * var-length padding, corruption, hand-encoded Example bytes,
 * FixedLenSequenceFeature with per-feature batch padding, SparseFeature as
 * its dense equivalent, spec validation). */
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "test_util.h"
#include "base/crc32c.h"

/* ---------------------------------------------------------------- helpers */
static char *path_in(const char *dir, const char *name) {
  char *p = malloc(strlen(dir) + strlen(name) + 2);
  sprintf(p, "%s/%s", dir, name);
  return p;
}

static loom_dataset *chk(loom_dataset *ds, loom_status *st) {
  cr_assert(ds, "dataset: %s", loom_status_message(st));
  return ds;
}
static void next_ok(loom_dataset *ds, loom_tensor **v, loom_status *st) {
  loom_code rc = loom_dataset_next(ds, v, st);
  cr_assert_eq(rc, LOOM_OK, "next: %s: %s", loom_code_name(rc), loom_status_message(st));
}
static void expect_end(loom_dataset *ds, loom_tensor **v, loom_status *st) {
  loom_code rc = loom_dataset_next(ds, v, st);
  cr_assert_eq(rc, LOOM_OUT_OF_RANGE, "expected the end, got %s: %s", loom_code_name(rc), loom_status_message(st));
  cr_assert_str_eq(loom_status_message(st), "End of sequence");
}
/* Asserts code and that the message contains each of up to 3 substrings. */
static void expect_msg(loom_code got, loom_code want, loom_status *st, const char *a, const char *b, const char *c) {
  cr_assert_eq(got, want, "code %s (want %s): %s", loom_code_name(got), loom_code_name(want), loom_status_message(st));
  const char *m = loom_status_message(st);
  const char *subs[3] = {a, b, c};
  for (int i = 0; i < 3; i++)
    if (subs[i]) cr_assert(strstr(m, subs[i]), "message '%s' lacks '%s'", m, subs[i]);
}
static void free_vals(loom_tensor **v, int n) {
  for (int i = 0; i < n; i++) {
    loom_tensor_free(v[i]);
    v[i] = NULL;
  }
}
static void expect_shape(const loom_tensor *t, int nd, const int64_t *dims) {
  cr_assert(t);
  cr_assert_eq(loom_tensor_ndim(t), nd, "rank %d want %d", loom_tensor_ndim(t), nd);
  for (int i = 0; i < nd; i++)
    cr_assert_eq(loom_tensor_dim(t, i), dims[i], "dim %d: %lld want %lld", i, (long long)loom_tensor_dim(t, i),
                 (long long)dims[i]);
}
static const float *F(const loom_tensor *t) { return loom_tensor_data_const(t); }
static const int32_t *I(const loom_tensor *t) { return loom_tensor_data_const(t); }
static const int64_t *L(const loom_tensor *t) { return loom_tensor_data_const(t); }

/* n elements: "x" float32 [2] = {i, 100 + i}, "y" int32 scalar = i (label). */
static loom_dataset *range_ds(int n, loom_status *st) {
  float *x = malloc(sizeof(float) * 2 * (size_t)(n ? n : 1));
  int32_t *y = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    x[2 * i] = (float)i;
    x[2 * i + 1] = 100.0f + (float)i;
    y[i] = i;
  }
  int64_t dx[2] = {n, 2}, dy[1] = {n};
  loom_tensor *tx = loom_tensor_from_data(LOOM_F32, 2, dx, x, NULL);
  loom_tensor *ty = loom_tensor_from_data(LOOM_I32, 1, dy, y, NULL);
  const char *names[2] = {"x", "y"};
  const loom_tensor *arrays[2] = {tx, ty};
  loom_dataset *ds = loom_dataset_from_tensors(2, names, arrays, "y", st);
  loom_tensor_free(tx);
  loom_tensor_free(ty);
  free(x);
  free(y);
  return chk(ds, st);
}

/* Pulls every element of a (non-batched) range-like dataset, returning the
 * y values (up to cap); checks x matches y. */
static int drain_ids(loom_dataset *ds, int *ids, int cap, loom_status *st) {
  loom_tensor *v[2] = {NULL, NULL};
  int n = 0;
  for (;;) {
    loom_code rc = loom_dataset_next(ds, v, st);
    if (rc == LOOM_OUT_OF_RANGE) break;
    cr_assert_eq(rc, LOOM_OK, "%s", loom_status_message(st));
    cr_assert_lt(n, cap);
    int y = I(v[1])[0];
    cr_assert_eq(F(v[0])[0], (float)y);
    cr_assert_eq(F(v[0])[1], 100.0f + (float)y);
    ids[n++] = y;
  }
  free_vals(v, 2);
  return n;
}
static void assert_perm(const int *ids, int n) {
  int *seen = calloc((size_t)n, sizeof *seen);
  for (int i = 0; i < n; i++) {
    cr_assert(ids[i] >= 0 && ids[i] < n, "id %d out of range", ids[i]);
    cr_assert_eq(seen[ids[i]], 0, "id %d twice", ids[i]);
    seen[ids[i]] = 1;
  }
  free(seen);
}
static int is_identity(const int *ids, int n) {
  for (int i = 0; i < n; i++)
    if (ids[i] != i) return 0;
  return 1;
}

/* A map function that changes nothing (forces the general path). */
static loom_code identity_fn(void *user, int n, loom_tensor **values, loom_status *st) {
  (void)user, (void)n, (void)values, (void)st;
  return LOOM_OK;
}

/* ======================================================================
 * from_tensors
 * ====================================================================== */
Test(from_tensors, slices_spec_and_end) {
  loom_status *st = loom_status_new();
  loom_dataset *ds = range_ds(3, st);
  cr_assert_eq(loom_dataset_num_components(ds), 2);
  cr_assert_str_eq(loom_dataset_component_name(ds, 0), "x");
  cr_assert_str_eq(loom_dataset_component_name(ds, 1), "y");
  cr_assert_eq(loom_dataset_component_dtype(ds, 0), LOOM_F32);
  cr_assert_eq(loom_dataset_component_dtype(ds, 1), LOOM_I32);
  int64_t d[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 1);
  cr_assert_eq(d[0], 2);
  cr_assert_eq(loom_dataset_component_shape(ds, 1, d), 0);
  cr_assert_eq(loom_dataset_label_index(ds), 1);
  cr_assert_eq(loom_dataset_find(ds, "y"), 1);
  cr_assert_eq(loom_dataset_find(ds, "x"), 0);
  cr_assert_eq(loom_dataset_find(ds, "z"), -1);
  cr_assert_null(loom_dataset_component_name(ds, 2));
  loom_tensor *v[2] = {NULL, NULL};
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < 3; i++) {
      next_ok(ds, v, st);
      int64_t two = 2;
      float want[2] = {(float)i, 100.0f + (float)i};
      tu_expect_f32(v[0], 1, &two, want, 0);
      cr_assert_eq(loom_tensor_ndim(v[1]), 0);
      cr_assert_eq(I(v[1])[0], i);
    }
    expect_end(ds, v, st);
    expect_end(ds, v, st); /* stays at the end */
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  /* tensors passed back are reused, not replaced */
  loom_tensor *keep0 = v[0], *keep1 = v[1];
  next_ok(ds, v, st);
  cr_assert_eq(v[0], keep0);
  cr_assert_eq(v[1], keep1);
  free_vals(v, 2);
  loom_dataset_free(ds);
  loom_status_free(st);
}

Test(from_tensors, copies_the_input_and_strings) {
  loom_status *st = loom_status_new();
  int64_t d[1] = {3};
  loom_tensor *s = loom_tensor_new(LOOM_STRING, 1, d, NULL);
  loom_tensor_set_string(s, 0, "alpha", 5, NULL);
  loom_tensor_set_string(s, 1, "", 0, NULL);
  loom_tensor_set_string(s, 2, "gamma", 5, NULL);
  int64_t dm[2] = {3, 2};
  uint8_t bytes[6] = {1, 2, 3, 4, 5, 6};
  loom_tensor *m = loom_tensor_from_data(LOOM_U8, 2, dm, bytes, NULL);
  const char *names[2] = {"word", "b"};
  const loom_tensor *arrays[2] = {s, m};
  loom_dataset *ds = chk(loom_dataset_from_tensors(2, names, arrays, NULL, st), st);
  loom_tensor_free(s);
  loom_tensor_free(m); /* the dataset holds copies */
  cr_assert_eq(loom_dataset_label_index(ds), -1);
  loom_tensor *v[2] = {NULL, NULL};
  const char *want[3] = {"alpha", "", "gamma"};
  for (int i = 0; i < 3; i++) {
    next_ok(ds, v, st);
    size_t len;
    const char *w = loom_tensor_get_string(v[0], 0, &len);
    cr_assert_str_eq(w, want[i]);
    cr_assert_eq(len, strlen(want[i]));
    const uint8_t *b = loom_tensor_data_const(v[1]);
    cr_assert_eq(b[0], bytes[2 * i]);
    cr_assert_eq(b[1], bytes[2 * i + 1]);
  }
  expect_end(ds, v, st);
  free_vals(v, 2);
  loom_dataset_free(ds);
  /* batched strings (index path) */
  s = loom_tensor_new(LOOM_STRING, 1, d, NULL);
  for (int i = 0; i < 3; i++) loom_tensor_set_string(s, i, want[i], strlen(want[i]), NULL);
  const loom_tensor *a1[1] = {s};
  const char *n1[1] = {"w"};
  ds = chk(loom_dataset_batch(chk(loom_dataset_from_tensors(1, n1, a1, NULL, st), st), 2, 0, st), st);
  loom_tensor_free(s);
  loom_tensor *w[1] = {NULL};
  next_ok(ds, w, st);
  cr_assert_eq(loom_tensor_numel(w[0]), 2);
  cr_assert_str_eq(loom_tensor_get_string(w[0], 0, NULL), "alpha");
  cr_assert_str_eq(loom_tensor_get_string(w[0], 1, NULL), "");
  next_ok(ds, w, st);
  cr_assert_eq(loom_tensor_numel(w[0]), 1);
  cr_assert_str_eq(loom_tensor_get_string(w[0], 0, NULL), "gamma");
  expect_end(ds, w, st);
  free_vals(w, 1);
  loom_dataset_free(ds);
  loom_status_free(st);
}

Test(from_tensors, argument_errors) {
  loom_status *st = loom_status_new();
  int64_t d3[1] = {3}, d4[1] = {4};
  loom_tensor *a = loom_tensor_new(LOOM_F32, 1, d3, NULL), *b = loom_tensor_new(LOOM_I32, 1, d4, NULL);
  loom_tensor *sc = loom_tensor_scalar_f32(1);
  const char *names[2] = {"a", "b"};
  const loom_tensor *ab[2] = {a, b};
  cr_assert_null(loom_dataset_from_tensors(2, names, ab, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "arrays[1]", "'b'", "4 rows");
  const loom_tensor *aa[2] = {a, a};
  cr_assert_null(loom_dataset_from_tensors(2, names, aa, "label", st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "label_name", "'label'", NULL);
  const char *dup[2] = {"a", "a"};
  cr_assert_null(loom_dataset_from_tensors(2, dup, aa, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "names[1]", "'a'", NULL);
  const loom_tensor *s1[1] = {sc};
  cr_assert_null(loom_dataset_from_tensors(1, names, s1, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "arrays[0]", "scalar", NULL);
  cr_assert_null(loom_dataset_from_tensors(0, names, ab, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "n must be positive", NULL, NULL);
  const loom_tensor *nul[1] = {NULL};
  cr_assert_null(loom_dataset_from_tensors(1, names, nul, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "arrays[0]", "NULL", NULL);
  /* NULL status is fine too */
  cr_assert_null(loom_dataset_from_tensors(2, names, ab, NULL, NULL));
  /* transformations of NULL, and bad arguments free their input */
  cr_assert_null(loom_dataset_batch(NULL, 2, 0, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "batch", NULL, NULL);
  cr_assert_null(loom_dataset_batch(range_ds(3, st), 0, 0, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "batch_size", "0", NULL);
  cr_assert_null(loom_dataset_batch(range_ds(3, st), -2, 1, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "batch_size", "-2", NULL);
  cr_assert_null(loom_dataset_shuffle(range_ds(3, st), 0, 1, 1, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "buffer_size", NULL, NULL);
  cr_assert_null(loom_dataset_prefetch(range_ds(3, st), 0, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "buffer_size", NULL, NULL);
  cr_assert_null(loom_dataset_map(range_ds(3, st), NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "fn", NULL, NULL);
  cr_assert_eq(loom_dataset_next(NULL, NULL, st), LOOM_INVALID_ARGUMENT);
  loom_dataset_free(NULL);
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_tensor_free(sc);
  loom_status_free(st);
}

/* ======================================================================
 * batch
 * ====================================================================== */
static void check_batches(loom_dataset *ds, int n, int bs, int drop, loom_status *st) {
  int64_t d[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 2);
  cr_assert_eq(d[0], drop ? bs : -1);
  cr_assert_eq(d[1], 2);
  cr_assert_eq(loom_dataset_component_shape(ds, 1, d), 1);
  cr_assert_eq(d[0], drop ? bs : -1);
  cr_assert_eq(loom_dataset_label_index(ds), 1);
  loom_tensor *v[2] = {NULL, NULL};
  int start = 0;
  int nb = drop ? n / bs : (n + bs - 1) / bs;
  for (int b = 0; b < nb; b++) {
    next_ok(ds, v, st);
    int k = n - start < bs ? n - start : bs;
    int64_t dx[2] = {k, 2}, dy[1] = {k};
    expect_shape(v[0], 2, dx);
    expect_shape(v[1], 1, dy);
    for (int j = 0; j < k; j++) {
      cr_assert_eq(F(v[0])[2 * j], (float)(start + j));
      cr_assert_eq(F(v[0])[2 * j + 1], 100.0f + (float)(start + j));
      cr_assert_eq(I(v[1])[j], start + j);
    }
    start += k;
  }
  expect_end(ds, v, st);
  free_vals(v, 2);
}

Test(batch, remainder_and_drop_remainder) {
  loom_status *st = loom_status_new();
  for (int general = 0; general < 2; general++) {
    for (int drop = 0; drop < 2; drop++) {
      loom_dataset *src = range_ds(10, st);
      if (general) src = chk(loom_dataset_map(src, identity_fn, NULL, st), st);
      loom_dataset *ds = chk(loom_dataset_batch(src, 4, drop, st), st);
      check_batches(ds, 10, 4, drop, st);
      cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
      check_batches(ds, 10, 4, drop, st);
      loom_dataset_free(ds);
    }
    /* exact multiple and a batch larger than the data */
    loom_dataset *src = range_ds(8, st);
    if (general) src = chk(loom_dataset_map(src, identity_fn, NULL, st), st);
    loom_dataset *ds = chk(loom_dataset_batch(src, 4, 1, st), st);
    check_batches(ds, 8, 4, 1, st);
    loom_dataset_free(ds);
    src = range_ds(3, st);
    if (general) src = chk(loom_dataset_map(src, identity_fn, NULL, st), st);
    ds = chk(loom_dataset_batch(src, 5, 0, st), st);
    check_batches(ds, 3, 5, 0, st);
    loom_dataset_free(ds);
    src = range_ds(3, st);
    if (general) src = chk(loom_dataset_map(src, identity_fn, NULL, st), st);
    ds = chk(loom_dataset_batch(src, 5, 1, st), st);
    loom_tensor *v[2] = {NULL, NULL};
    expect_end(ds, v, st);
    loom_dataset_free(ds);
  }
  /* batch of batches: [-1, -1, 2] */
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_batch(range_ds(5, st), 2, 0, st), st), 2, 0, st), st);
  int64_t d[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 3);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(d[1], -1);
  cr_assert_eq(d[2], 2);
  loom_tensor *v[2] = {NULL, NULL};
  next_ok(ds, v, st);
  int64_t want[3] = {2, 2, 2};
  expect_shape(v[0], 3, want);
  cr_assert_eq(I(v[1])[3], 3);
  next_ok(ds, v, st); /* [[4], pad] -> [1, 1, 2] */
  int64_t want2[3] = {1, 1, 2};
  expect_shape(v[0], 3, want2);
  cr_assert_eq(F(v[0])[0], 4.0f);
  cr_assert_eq(F(v[0])[1], 104.0f);
  expect_end(ds, v, st);
  free_vals(v, 2);
  loom_dataset_free(ds);
  loom_status_free(st);
}

/* ======================================================================
 * shuffle
 * ====================================================================== */
Test(shuffle, permutation_deterministic_reshuffled) {
  loom_status *st = loom_status_new();
  enum { N = 100 };
  int a[N], b[N], c[N], d[N], e[N];
  for (int general = 0; general < 2; general++) {
    loom_dataset *src = range_ds(N, st);
    if (general) src = chk(loom_dataset_map(src, identity_fn, NULL, st), st);
    loom_dataset *ds = chk(loom_dataset_shuffle(src, N, 42, 1, st), st);
    cr_assert_eq(drain_ids(ds, a, N, st), N);
    assert_perm(a, N);
    cr_assert_not(is_identity(a, N));
    /* same seed, new dataset: same order */
    loom_dataset *ds2 = chk(loom_dataset_shuffle(range_ds(N, st), N, 42, 1, st), st);
    cr_assert_eq(drain_ids(ds2, b, N, st), N);
    cr_assert_arr_eq(a, b, sizeof a, "same seed, different order (general=%d)", general);
    /* the next pass reshuffles: a different permutation */
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
    cr_assert_eq(drain_ids(ds, c, N, st), N);
    assert_perm(c, N);
    cr_assert(memcmp(a, c, sizeof a), "reshuffled pass has the same order");
    /* ... deterministically: the second dataset's second pass is the same */
    cr_assert_eq(loom_dataset_reset(ds2, st), LOOM_OK);
    cr_assert_eq(drain_ids(ds2, b, N, st), N);
    cr_assert_arr_eq(c, b, sizeof c);
    loom_dataset_free(ds);
    loom_dataset_free(ds2);
    /* another seed: another order */
    ds = chk(loom_dataset_shuffle(range_ds(N, st), N, 43, 1, st), st);
    cr_assert_eq(drain_ids(ds, d, N, st), N);
    assert_perm(d, N);
    cr_assert(memcmp(a, d, sizeof a));
    loom_dataset_free(ds);
    /* reshuffle off: identical passes */
    ds = chk(loom_dataset_shuffle(range_ds(N, st), N, 7, 0, st), st);
    cr_assert_eq(drain_ids(ds, d, N, st), N);
    assert_perm(d, N);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
    cr_assert_eq(drain_ids(ds, e, N, st), N);
    cr_assert_arr_eq(d, e, sizeof d);
    loom_dataset_free(ds);
  }
  /* index path and general path draw the same order */
  loom_dataset *x = chk(loom_dataset_shuffle(range_ds(N, st), 16, 5, 1, st), st);
  loom_dataset *y =
      chk(loom_dataset_shuffle(chk(loom_dataset_map(range_ds(N, st), identity_fn, NULL, st), st), 16, 5, 1, st), st);
  cr_assert_eq(drain_ids(x, a, N, st), N);
  cr_assert_eq(drain_ids(y, b, N, st), N);
  cr_assert_arr_eq(a, b, sizeof a);
  /* a small buffer still yields every element exactly once, and only
   * moves elements a bounded distance forward */
  assert_perm(a, N);
  for (int i = 0; i < N; i++) cr_assert_lt(a[i], i + 16, "element %d at position %d with buffer 16", a[i], i);
  loom_dataset_free(x);
  loom_dataset_free(y);
  /* buffer larger than the data, and buffer 1 (no shuffling) */
  x = chk(loom_dataset_shuffle(range_ds(N, st), 1000000, 5, 1, st), st);
  cr_assert_eq(drain_ids(x, a, N, st), N);
  assert_perm(a, N);
  loom_dataset_free(x);
  x = chk(loom_dataset_shuffle(range_ds(N, st), 1, 5, 1, st), st);
  cr_assert_eq(drain_ids(x, a, N, st), N);
  cr_assert(is_identity(a, N));
  loom_dataset_free(x);
  loom_status_free(st);
}

Test(shuffle, batched_shuffle_is_a_permutation) {
  loom_status *st = loom_status_new();
  enum { N = 50 };
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_shuffle(range_ds(N, st), N, 3, 1, st), st), 8, 0, st), st);
  for (int pass = 0; pass < 2; pass++) {
    int ids[N], n = 0;
    loom_tensor *v[2] = {NULL, NULL};
    while (loom_dataset_next(ds, v, st) == LOOM_OK) {
      for (int64_t j = 0; j < loom_tensor_dim(v[1], 0); j++) {
        int y = I(v[1])[j];
        cr_assert_eq(F(v[0])[2 * j], (float)y);
        cr_assert_eq(F(v[0])[2 * j + 1], 100.0f + (float)y);
        ids[n++] = y;
      }
    }
    cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE);
    cr_assert_eq(n, N);
    assert_perm(ids, N);
    cr_assert_not(is_identity(ids, N));
    free_vals(v, 2);
    loom_dataset_reset(ds, st);
  }
  loom_dataset_free(ds);
  loom_status_free(st);
}

/* ======================================================================
 * repeat, take
 * ====================================================================== */
Test(repeat, count_forever_take_and_empty) {
  loom_status *st = loom_status_new();
  int ids[64];
  for (int general = 0; general < 2; general++) {
    loom_dataset *src = range_ds(4, st);
    if (general) src = chk(loom_dataset_map(src, identity_fn, NULL, st), st);
    loom_dataset *ds = chk(loom_dataset_repeat(src, 3, st), st);
    cr_assert_eq(drain_ids(ds, ids, 64, st), 12);
    for (int i = 0; i < 12; i++) cr_assert_eq(ids[i], i % 4);
    loom_tensor *v[2] = {NULL, NULL};
    expect_end(ds, v, st);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
    cr_assert_eq(drain_ids(ds, ids, 64, st), 12);
    loom_dataset_free(ds);

    src = range_ds(3, st);
    if (general) src = chk(loom_dataset_map(src, identity_fn, NULL, st), st);
    ds = chk(loom_dataset_take(chk(loom_dataset_repeat(src, -1, st), st), 10, st), st);
    cr_assert_eq(drain_ids(ds, ids, 64, st), 10);
    for (int i = 0; i < 10; i++) cr_assert_eq(ids[i], i % 3);
    expect_end(ds, v, st);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
    cr_assert_eq(drain_ids(ds, ids, 64, st), 10);
    cr_assert_eq(ids[9], 0);
    loom_dataset_free(ds);
  }
  /* repeat(0) is empty; take(0) is empty; take(-1) takes all; take more
   * than there is */
  loom_tensor *v[2] = {NULL, NULL};
  loom_dataset *ds = chk(loom_dataset_repeat(range_ds(3, st), 0, st), st);
  expect_end(ds, v, st);
  loom_dataset_free(ds);
  ds = chk(loom_dataset_take(range_ds(3, st), -1, st), st);
  cr_assert_eq(drain_ids(ds, ids, 64, st), 3);
  loom_dataset_free(ds);
  ds = chk(loom_dataset_take(range_ds(3, st), 7, st), st);
  cr_assert_eq(drain_ids(ds, ids, 64, st), 3);
  loom_dataset_free(ds);
  /* repeating an empty dataset forever ends instead of spinning */
  ds = chk(loom_dataset_repeat(chk(loom_dataset_take(range_ds(3, st), 0, st), st), -1, st), st);
  expect_end(ds, v, st);
  loom_dataset_free(ds);
  ds = chk(loom_dataset_repeat(chk(loom_dataset_map(chk(loom_dataset_take(range_ds(3, st), 0, st), st), identity_fn,
                                                    NULL, st),
                                   st),
                               -1, st),
           st);
  expect_end(ds, v, st);
  loom_dataset_free(ds);
  /* shuffle then repeat: every pass is a permutation, reshuffled */
  ds = chk(loom_dataset_repeat(chk(loom_dataset_shuffle(range_ds(20, st), 20, 11, 1, st), st), 2, st), st);
  int two[40];
  cr_assert_eq(drain_ids(ds, two, 40, st), 40);
  assert_perm(two, 20);
  assert_perm(two + 20, 20);
  cr_assert(memcmp(two, two + 20, 20 * sizeof(int)));
  loom_dataset_free(ds);
  loom_status_free(st);
}

/* ======================================================================
 * map
 * ====================================================================== */
typedef struct map_user {
  float add;
  int fail_at, calls;
} map_user;
static loom_code scale_fn(void *user, int n, loom_tensor **values, loom_status *st) {
  map_user *u = user;
  cr_assert_eq(n, 2);
  if (u->calls++ == u->fail_at) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "element %d is bad", u->fail_at);
  float *x = loom_tensor_data(values[0]);
  x[0] = x[0] * 2.0f + u->add;
  x[1] = -x[1];
  /* replace the label tensor with a new one */
  int32_t y = I(values[1])[0];
  loom_tensor_free(values[1]);
  values[1] = loom_tensor_scalar_i32(y * 10);
  return LOOM_OK;
}
static loom_code silent_fail_fn(void *user, int n, loom_tensor **values, loom_status *st) {
  (void)user, (void)n, (void)values, (void)st;
  return LOOM_UNAVAILABLE;
}
static loom_code wrong_dtype_fn(void *user, int n, loom_tensor **values, loom_status *st) {
  (void)user, (void)n, (void)st;
  loom_tensor_free(values[1]);
  values[1] = loom_tensor_scalar_f32(1.0f);
  return LOOM_OK;
}

Test(map, modifies_values_and_propagates_errors) {
  loom_status *st = loom_status_new();
  map_user u = {0.5f, -1, 0};
  loom_dataset *ds = chk(loom_dataset_map(range_ds(4, st), scale_fn, &u, st), st);
  loom_tensor *v[2] = {NULL, NULL};
  for (int i = 0; i < 4; i++) {
    next_ok(ds, v, st);
    cr_assert_eq(F(v[0])[0], (float)i * 2.0f + 0.5f);
    cr_assert_eq(F(v[0])[1], -(100.0f + (float)i));
    cr_assert_eq(I(v[1])[0], i * 10);
  }
  expect_end(ds, v, st);
  loom_dataset_free(ds);
  /* an error from fn ends the iteration with that status (sticky) */
  u = (map_user){0, 2, 0};
  ds = chk(loom_dataset_batch(chk(loom_dataset_map(range_ds(6, st), scale_fn, &u, st), st), 2, 0, st), st);
  next_ok(ds, v, st);
  cr_assert_eq(I(v[1])[1], 10);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "element 2 is bad", NULL, NULL);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "element 2 is bad", NULL, NULL);
  cr_assert_eq(u.calls, 3);
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  next_ok(ds, v, st); /* calls 3, 4 succeed after the reset */
  cr_assert_eq(I(v[1])[0], 0);
  loom_dataset_free(ds);
  /* a failure without a message still says what failed */
  ds = chk(loom_dataset_map(range_ds(2, st), silent_fail_fn, NULL, st), st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_UNAVAILABLE, st, "map", "UNAVAILABLE", NULL);
  loom_dataset_free(ds);
  /* a function that breaks the spec */
  ds = chk(loom_dataset_map(range_ds(2, st), wrong_dtype_fn, NULL, st), st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "'y'", "float32", "int32");
  loom_dataset_free(ds);
  free_vals(v, 2);
  loom_status_free(st);
}

/* ======================================================================
 * prefetch
 * ====================================================================== */
static loom_dataset *pipeline(int prefetch, int general, loom_status *st) {
  loom_dataset *ds = range_ds(103, st);
  if (general) ds = chk(loom_dataset_map(ds, identity_fn, NULL, st), st);
  ds = chk(loom_dataset_shuffle(ds, 50, 9, 1, st), st);
  ds = chk(loom_dataset_batch(ds, 10, 0, st), st);
  if (prefetch) ds = chk(loom_dataset_prefetch(ds, prefetch, st), st);
  return ds;
}
static int same_tensor(const loom_tensor *a, const loom_tensor *b) {
  if (loom_tensor_dtype(a) != loom_tensor_dtype(b) || loom_tensor_ndim(a) != loom_tensor_ndim(b)) return 0;
  for (int i = 0; i < loom_tensor_ndim(a); i++)
    if (loom_tensor_dim(a, i) != loom_tensor_dim(b, i)) return 0;
  return !memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), loom_tensor_nbytes(a));
}

Test(prefetch, same_sequence_as_without) {
  loom_status *st = loom_status_new();
  for (int general = 0; general < 2; general++)
    for (int pf = 1; pf <= 3; pf += 2) {
      loom_dataset *ref = pipeline(0, general, st), *ds = pipeline(pf, general, st);
      cr_assert_eq(loom_dataset_num_components(ds), 2);
      cr_assert_eq(loom_dataset_label_index(ds), 1);
      int64_t d[8];
      cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 2);
      cr_assert_eq(d[0], -1);
      for (int pass = 0; pass < 3; pass++) {
        loom_tensor *a[2] = {NULL, NULL}, *b[2] = {NULL, NULL};
        int batches = 0;
        for (;;) {
          loom_code ra = loom_dataset_next(ref, a, st);
          loom_code rb = loom_dataset_next(ds, b, st);
          cr_assert_eq(ra, rb, "batch %d: %s vs %s", batches, loom_code_name(ra), loom_code_name(rb));
          if (ra) break;
          cr_assert(same_tensor(a[0], b[0]) && same_tensor(a[1], b[1]), "batch %d differs", batches);
          batches++;
        }
        cr_assert_str_eq(loom_status_message(st), "End of sequence");
        cr_assert_eq(batches, 11);
        expect_end(ds, b, st);
        free_vals(a, 2);
        if (pass == 1) free_vals(b, 2); /* NULL values work as well */
        cr_assert_eq(loom_dataset_reset(ref, st), LOOM_OK);
        cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
        free_vals(b, 2);
      }
      loom_dataset_free(ref);
      loom_dataset_free(ds);
    }
  loom_status_free(st);
}

Test(prefetch, early_free_and_reset_mid_stream) {
  loom_status *st = loom_status_new();
  /* freed without ever running */
  loom_dataset_free(pipeline(2, 0, st));
  /* freed while the producer is blocked on a full queue */
  loom_dataset *ds = chk(loom_dataset_prefetch(chk(loom_dataset_repeat(range_ds(10, st), -1, st), st), 4, st), st);
  loom_tensor *v[2] = {NULL, NULL};
  next_ok(ds, v, st);
  cr_assert_eq(I(v[1])[0], 0);
  usleep(20000);
  loom_dataset_free(ds);
  /* a reset mid-stream restarts from the beginning */
  ds = chk(loom_dataset_prefetch(range_ds(10, st), 2, st), st);
  next_ok(ds, v, st);
  next_ok(ds, v, st);
  cr_assert_eq(I(v[1])[0], 1);
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  int ids[16];
  cr_assert_eq(drain_ids(ds, ids, 16, st), 10);
  cr_assert(is_identity(ids, 10));
  loom_dataset_free(ds);
  /* errors from the producer surface on next(), in order */
  map_user u = {0, 5, 0};
  ds = chk(loom_dataset_prefetch(chk(loom_dataset_map(range_ds(10, st), scale_fn, &u, st), st), 3, st), st);
  for (int i = 0; i < 5; i++) {
    next_ok(ds, v, st);
    cr_assert_eq(I(v[1])[0], 10 * i);
  }
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "element 5 is bad", NULL, NULL);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "element 5 is bad", NULL, NULL);
  loom_dataset_free(ds);
  /* a wrapped caller tensor is filled in place */
  float buf[20];
  int64_t dx[2] = {10, 2};
  loom_tensor *w = loom_tensor_wrap(LOOM_F32, 2, dx, buf, sizeof buf, NULL, NULL, NULL);
  ds = chk(loom_dataset_prefetch(chk(loom_dataset_batch(range_ds(20, st), 10, 1, st), st), 2, st), st);
  free_vals(v, 2);
  v[0] = w;
  next_ok(ds, v, st);
  cr_assert_eq(v[0], w);
  cr_assert_eq(buf[2], 1.0f);
  cr_assert_eq(buf[3], 101.0f);
  next_ok(ds, v, st);
  cr_assert_eq(v[0], w);
  cr_assert_eq(buf[0], 10.0f);
  loom_dataset_free(ds);
  free_vals(v, 2);
  loom_status_free(st);
}

/* ======================================================================
 * Steady state allocates nothing
 * ====================================================================== */
Test(steady_state, batches_allocate_nothing) {
  tu_alloc_count_begin();
  loom_status *st = loom_status_new();
  enum { N = 6000, D = 784 }; /* 40 batches stay inside one epoch */
  int64_t dx[2] = {N, D}, dy[1] = {N};
  loom_tensor *x = loom_tensor_new(LOOM_F32, 2, dx, NULL), *y = loom_tensor_new(LOOM_I32, 1, dy, NULL);
  for (int i = 0; i < N * D; i++) ((float *)loom_tensor_data(x))[i] = (float)i;
  for (int i = 0; i < N; i++) ((int32_t *)loom_tensor_data(y))[i] = i;
  const char *names[1] = {"x"};
  const loom_tensor *arr[1] = {x};
  for (int prefetch = 0; prefetch < 2; prefetch++) {
    loom_dataset *ds = chk(loom_numpy_input(1, names, arr, y, 128, 0, 1, 17, st), st);
    if (prefetch) ds = chk(loom_dataset_prefetch(ds, 2, st), st);
    loom_tensor *v[2] = {NULL, NULL};
    for (int i = 0; i < 5; i++) next_ok(ds, v, st); /* warm up (tensors, shuffle buffer, queue) */
    long before = tu_alloc_count();
    for (int i = 0; i < 30; i++) {
      next_ok(ds, v, st);
      int64_t w[2] = {128, D};
      expect_shape(v[0], 2, w);
      for (int j = 0; j < 128; j += 31) {
        int32_t id = I(v[1])[j];
        cr_assert_eq(F(v[0])[(size_t)j * D + 5], (float)(id * D + 5));
      }
    }
    long after = tu_alloc_count();
    cr_assert_eq(after, before, "prefetch=%d: %ld allocations in 30 steady-state batches", prefetch, after - before);
    free_vals(v, 2);
    loom_dataset_free(ds);
  }
  loom_tensor_free(x);
  loom_tensor_free(y);
  loom_status_free(st);
  tu_alloc_count_end();
}

/* ======================================================================
 * numpy_input
 * ====================================================================== */
static loom_dataset *numpy_ds(int n, int64_t bs, int64_t epochs, int shuffle, uint64_t seed, loom_status *st) {
  float xs[64];
  int32_t ys[64];
  for (int i = 0; i < n; i++) {
    xs[i] = (float)i;
    ys[i] = 100 + i;
  }
  int64_t d[1] = {n};
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 1, d, xs, NULL), *y = loom_tensor_from_data(LOOM_I32, 1, d, ys, NULL);
  const char *names[1] = {"x"};
  const loom_tensor *arr[1] = {x};
  loom_dataset *ds = loom_numpy_input(1, names, arr, y, bs, epochs, shuffle, seed, st);
  loom_tensor_free(x);
  loom_tensor_free(y);
  return ds;
}
/* The stream of x values (each label checked = 100 + x), batch sizes out. */
static int numpy_drain(loom_dataset *ds, int *xs, int cap, int *sizes, int *nb, loom_status *st) {
  loom_tensor *v[2] = {NULL, NULL};
  int n = 0;
  *nb = 0;
  while (loom_dataset_next(ds, v, st) == LOOM_OK) {
    int k = (int)loom_tensor_dim(v[0], 0);
    sizes[(*nb)++] = k;
    for (int j = 0; j < k; j++) {
      cr_assert_lt(n, cap);
      xs[n] = (int)F(v[0])[j];
      cr_assert_eq(I(v[1])[j], 100 + xs[n]);
      n++;
    }
  }
  cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE, "%s", loom_status_message(st));
  free_vals(v, 2);
  return n;
}

Test(numpy_input, epochs_and_batches_like_tf) {
  loom_status *st = loom_status_new();
  int xs[256], sizes[64], nb;
  /* 10 examples, batch 4, 2 epochs: repeat then batch -> 5 full batches
   * crossing the epoch boundary */
  loom_dataset *ds = chk(numpy_ds(10, 4, 2, 0, 0, st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 2);
  cr_assert_str_eq(loom_dataset_component_name(ds, 0), "x");
  cr_assert_str_eq(loom_dataset_component_name(ds, 1), "label");
  cr_assert_eq(loom_dataset_label_index(ds), 1);
  int64_t d[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 1);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(numpy_drain(ds, xs, 256, sizes, &nb, st), 20);
  cr_assert_eq(nb, 5);
  for (int i = 0; i < 5; i++) cr_assert_eq(sizes[i], 4);
  for (int i = 0; i < 20; i++) cr_assert_eq(xs[i], i % 10);
  loom_dataset_free(ds);
  /* 1 epoch: 4, 4, 2 */
  ds = chk(numpy_ds(10, 4, 1, 0, 0, st), st);
  cr_assert_eq(numpy_drain(ds, xs, 256, sizes, &nb, st), 10);
  cr_assert_eq(nb, 3);
  cr_assert_eq(sizes[0], 4);
  cr_assert_eq(sizes[1], 4);
  cr_assert_eq(sizes[2], 2);
  loom_dataset_free(ds);
  /* 3 epochs, batch 7: 30 examples -> 7,7,7,7,2 */
  ds = chk(numpy_ds(10, 7, 3, 0, 0, st), st);
  cr_assert_eq(numpy_drain(ds, xs, 256, sizes, &nb, st), 30);
  cr_assert_eq(nb, 5);
  cr_assert_eq(sizes[4], 2);
  loom_dataset_free(ds);
  /* shuffled: each epoch is a permutation, epochs differ, the seed decides */
  ds = chk(numpy_ds(10, 4, 2, 1, 123, st), st);
  int again[256];
  cr_assert_eq(numpy_drain(ds, xs, 256, sizes, &nb, st), 20);
  assert_perm(xs, 10);
  assert_perm(xs + 10, 10);
  cr_assert(memcmp(xs, xs + 10, 10 * sizeof(int)));
  cr_assert_not(is_identity(xs, 10));
  loom_dataset_free(ds);
  ds = chk(numpy_ds(10, 4, 2, 1, 123, st), st);
  cr_assert_eq(numpy_drain(ds, again, 256, sizes, &nb, st), 20);
  cr_assert_arr_eq(xs, again, 20 * sizeof(int));
  loom_dataset_free(ds);
  ds = chk(numpy_ds(10, 4, 2, 1, 124, st), st);
  cr_assert_eq(numpy_drain(ds, again, 256, sizes, &nb, st), 20);
  cr_assert(memcmp(xs, again, 20 * sizeof(int)));
  loom_dataset_free(ds);
  /* num_epochs <= 0: forever */
  ds = chk(numpy_ds(10, 4, 0, 1, 1, st), st);
  loom_tensor *v[2] = {NULL, NULL};
  for (int i = 0; i < 100; i++) {
    next_ok(ds, v, st);
    cr_assert_eq(loom_tensor_dim(v[0], 0), 4);
  }
  free_vals(v, 2);
  loom_dataset_free(ds);
  /* errors */
  cr_assert_null(numpy_ds(10, 0, 1, 0, 0, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "batch_size", NULL, NULL);
  int64_t d10[1] = {10}, d9[1] = {9};
  loom_tensor *x = loom_tensor_new(LOOM_F32, 1, d10, NULL), *y = loom_tensor_new(LOOM_I32, 1, d9, NULL);
  const char *lab[1] = {"label"};
  const loom_tensor *arr[1] = {x};
  cr_assert_null(loom_numpy_input(1, lab, arr, x, 4, 1, 0, 0, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'label'", NULL, NULL);
  const char *nx[1] = {"x"};
  cr_assert_null(loom_numpy_input(1, nx, arr, y, 4, 1, 0, 0, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "9 rows", NULL, NULL);
  /* features only (no labels) */
  ds = chk(loom_numpy_input(1, nx, arr, NULL, 4, 1, 0, 0, st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 1);
  cr_assert_eq(loom_dataset_label_index(ds), -1);
  loom_dataset_free(ds);
  loom_tensor_free(x);
  loom_tensor_free(y);
  loom_status_free(st);
}

/* ======================================================================
 * IDX
 * ====================================================================== */
static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}
/* n images of r x c pixels (pixel = (i * 7 + k * 3) % 256) and n labels
 * (i % 10); gz: written with zlib. */
static void write_idx(const char *img, const char *lab, int n, int r, int c, int nlabels, int gz) {
  size_t ni = 16 + (size_t)n * r * c, nl = 8 + (size_t)nlabels;
  uint8_t *bi = malloc(ni), *bl = malloc(nl);
  put_be32(bi, 0x803);
  put_be32(bi + 4, (uint32_t)n);
  put_be32(bi + 8, (uint32_t)r);
  put_be32(bi + 12, (uint32_t)c);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < r * c; k++) bi[16 + (size_t)i * r * c + k] = (uint8_t)((i * 7 + k * 3) % 256);
  put_be32(bl, 0x801);
  put_be32(bl + 4, (uint32_t)nlabels);
  for (int i = 0; i < nlabels; i++) bl[8 + i] = (uint8_t)(i % 10);
  if (gz) {
    gzFile f = gzopen(img, "wb");
    cr_assert_eq(gzwrite(f, bi, (unsigned)ni), (int)ni);
    gzclose(f);
    f = gzopen(lab, "wb");
    cr_assert_eq(gzwrite(f, bl, (unsigned)nl), (int)nl);
    gzclose(f);
  } else {
    tu_write_file(img, bi, ni);
    tu_write_file(lab, bl, nl);
  }
  free(bi);
  free(bl);
}

Test(idx, synthetic_raw_and_gzipped) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *img = path_in(dir, "img"), *lab = path_in(dir, "lab"), *imgz = path_in(dir, "img.gz"),
       *labz = path_in(dir, "lab.gz");
  write_idx(img, lab, 5, 2, 3, 5, 0);
  write_idx(imgz, labz, 5, 2, 3, 5, 1);
  for (int gz = 0; gz < 2; gz++) {
    const char *ip = gz ? imgz : img, *lp = gz ? labz : lab;
    loom_dataset *ds = chk(loom_dataset_idx(ip, lp, NULL, st), st);
    cr_assert_eq(loom_dataset_num_components(ds), 2);
    cr_assert_str_eq(loom_dataset_component_name(ds, 0), "image");
    cr_assert_str_eq(loom_dataset_component_name(ds, 1), "label");
    cr_assert_eq(loom_dataset_label_index(ds), 1);
    cr_assert_eq(loom_dataset_component_dtype(ds, 1), LOOM_I32);
    int64_t d[8];
    cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 1);
    cr_assert_eq(d[0], 6);
    loom_tensor *v[2] = {NULL, NULL};
    for (int i = 0; i < 5; i++) {
      next_ok(ds, v, st);
      for (int k = 0; k < 6; k++) cr_assert_eq(F(v[0])[k], (float)((i * 7 + k * 3) % 256) / 255.0f);
      cr_assert_eq(I(v[1])[0], i % 10);
    }
    expect_end(ds, v, st);
    free_vals(v, 2);
    loom_dataset_free(ds);
    /* unflattened, unscaled, limited, batched */
    loom_idx_options o = loom_idx_options_default();
    cr_assert_eq(o.flatten, 1);
    cr_assert_eq(o.scale, 1);
    cr_assert_eq(o.limit, 0);
    o.flatten = 0;
    o.scale = 0;
    o.limit = 3;
    ds = chk(loom_dataset_batch(chk(loom_dataset_idx(ip, lp, &o, st), st), 2, 0, st), st);
    cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 3);
    cr_assert_eq(d[1], 2);
    cr_assert_eq(d[2], 3);
    next_ok(ds, v, st);
    int64_t w[3] = {2, 2, 3};
    expect_shape(v[0], 3, w);
    for (int k = 0; k < 6; k++) cr_assert_eq(F(v[0])[6 + k], (float)((7 + k * 3) % 256));
    next_ok(ds, v, st);
    cr_assert_eq(loom_tensor_dim(v[0], 0), 1);
    cr_assert_eq(I(v[1])[0], 2);
    expect_end(ds, v, st);
    free_vals(v, 2);
    loom_dataset_free(ds);
  }
  /* images only */
  loom_dataset *ds = chk(loom_dataset_idx(imgz, NULL, NULL, st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 1);
  cr_assert_eq(loom_dataset_label_index(ds), -1);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(img), free(lab), free(imgz), free(labz);
  loom_status_free(st);
}

Test(idx, malformed_files) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *img = path_in(dir, "img"), *lab = path_in(dir, "lab"), *lab4 = path_in(dir, "lab4"), *img4 = path_in(dir, "i4");
  write_idx(img, lab, 5, 2, 3, 5, 0);
  write_idx(img4, lab4, 1, 1, 1, 4, 0);
  /* labels given as images: bad magic */
  cr_assert_null(loom_dataset_idx(lab, lab, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, lab, "0x00000801", NULL);
  /* garbage magic */
  char *junk = path_in(dir, "junk");
  tu_write_file(junk, "hello world, not idx", 20);
  cr_assert_null(loom_dataset_idx(junk, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, junk, "bad magic", NULL);
  /* count mismatch */
  cr_assert_null(loom_dataset_idx(img, lab4, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "5 images but 4 labels", img, lab4);
  /* truncated data, truncated header, empty file */
  size_t n;
  uint8_t *b = tu_read_file(img, &n);
  char *tr = path_in(dir, "trunc");
  tu_write_file(tr, b, n - 1);
  cr_assert_null(loom_dataset_idx(tr, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_DATA_LOSS, st, tr, "truncated", NULL);
  tu_write_file(tr, b, 10);
  cr_assert_null(loom_dataset_idx(tr, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_DATA_LOSS, st, tr, "truncated", "dimensions");
  tu_write_file(tr, b, 0);
  cr_assert_null(loom_dataset_idx(tr, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_DATA_LOSS, st, tr, "truncated", NULL);
  /* a truncated gzip stream */
  char *gzp = path_in(dir, "img.gz");
  gzFile f = gzopen(gzp, "wb");
  gzwrite(f, b, (unsigned)n);
  gzclose(f);
  free(b);
  b = tu_read_file(gzp, &n);
  tu_write_file(gzp, b, n / 2);
  cr_assert_null(loom_dataset_idx(gzp, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_DATA_LOSS, st, gzp, NULL, NULL);
  free(b);
  /* missing file */
  char *none = path_in(dir, "nope");
  cr_assert_null(loom_dataset_idx(none, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_NOT_FOUND, st, none, NULL, NULL);
  cr_assert_null(loom_dataset_idx(img, none, NULL, st));
  expect_msg(loom_status_code(st), LOOM_NOT_FOUND, st, none, NULL, NULL);
  cr_assert_null(loom_dataset_idx(NULL, NULL, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "images_path", NULL, NULL);
  tu_rmtree(dir);
  free(img), free(lab), free(lab4), free(img4), free(junk), free(tr), free(gzp), free(none);
  loom_status_free(st);
}

#define FMNIST "/usr/share/datasets/fashion-mnist/"
Test(idx, fashion_mnist_t10k) {
  const char *ip = FMNIST "t10k-images-idx3-ubyte.gz", *lp = FMNIST "t10k-labels-idx1-ubyte.gz";
  if (access(ip, R_OK) || access(lp, R_OK)) cr_skip_test("Fashion-MNIST not installed");
  /* independent read with zlib: header and the first label / image */
  uint8_t lh[8 + 16], ih[16 + 784];
  gzFile f = gzopen(lp, "rb");
  cr_assert_eq(gzread(f, lh, sizeof lh), (int)sizeof lh);
  gzclose(f);
  f = gzopen(ip, "rb");
  cr_assert_eq(gzread(f, ih, sizeof ih), (int)sizeof ih);
  gzclose(f);
  cr_assert_eq(lh[2], 0x08);
  cr_assert_eq(lh[3], 0x01);
  cr_assert_eq((lh[4] << 24 | lh[5] << 16 | lh[6] << 8 | lh[7]), 10000);
  cr_assert_eq(ih[11], 28);
  cr_assert_eq(ih[15], 28);
  loom_status *st = loom_status_new();
  loom_dataset *ds = chk(loom_dataset_batch(chk(loom_dataset_idx(ip, lp, NULL, st), st), 1000, 0, st), st);
  loom_tensor *v[2] = {NULL, NULL};
  int batches = 0;
  long hist[10] = {0};
  while (loom_dataset_next(ds, v, st) == LOOM_OK) {
    int64_t w[2] = {1000, 784};
    expect_shape(v[0], 2, w);
    if (batches == 0) {
      for (int i = 0; i < 16; i++) cr_assert_eq(I(v[1])[i], lh[8 + i], "label %d", i);
      for (int k = 0; k < 784; k++) cr_assert_eq(F(v[0])[k], (float)ih[16 + k] / 255.0f, "pixel %d", k);
    }
    for (int i = 0; i < 1000; i++) {
      int y = I(v[1])[i];
      cr_assert(y >= 0 && y < 10);
      hist[y]++;
    }
    const float *x = F(v[0]);
    for (int k = 0; k < 1000 * 784; k += 997) cr_assert(x[k] >= 0.0f && x[k] <= 1.0f);
    batches++;
  }
  cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE);
  cr_assert_eq(batches, 10);
  for (int c = 0; c < 10; c++) cr_assert_eq(hist[c], 1000, "class %d: %ld", c, hist[c]); /* balanced test set */
  free_vals(v, 2);
  loom_dataset_free(ds);
  loom_status_free(st);
}

/* ======================================================================
 * CSV
 * ====================================================================== */
Test(csv, quoting_defaults_selection_crlf) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p = path_in(dir, "a.csv");
  const char *text =
      "f,i,s,skip,d\r\n"
      "1.5,7,plain,x,2.25\r\n"
      "-2,,\"with,comma\",y,\n"
      "3e2, 9 ,\"say \"\"hi\"\"\",z,-1\n"
      "\n"
      "0.25,-4,\"two\nlines\",\"q,\"\"\",8\n"
      ",5,,w,1";
  tu_write_file(p, text, strlen(text));
  loom_csv_column cols[5] = {
      {NULL, LOOM_F32, "-1", 1},
      {NULL, LOOM_I64, "42", 1},
      {NULL, LOOM_STRING, "none", 1},
      {NULL, LOOM_STRING, NULL, 0},
      {"target", LOOM_F64, "0.5", 1},
  };
  loom_csv_options o = {1, ',', 5, cols, "target"};
  const char *paths[1] = {p};
  loom_dataset *ds = chk(loom_dataset_csv(1, paths, &o, st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 4);
  cr_assert_str_eq(loom_dataset_component_name(ds, 0), "f");
  cr_assert_str_eq(loom_dataset_component_name(ds, 1), "i");
  cr_assert_str_eq(loom_dataset_component_name(ds, 2), "s");
  cr_assert_str_eq(loom_dataset_component_name(ds, 3), "target");
  cr_assert_eq(loom_dataset_label_index(ds), 3);
  cr_assert_eq(loom_dataset_component_dtype(ds, 1), LOOM_I64);
  cr_assert_eq(loom_dataset_component_dtype(ds, 3), LOOM_F64);
  int64_t d[8];
  cr_assert_eq(loom_dataset_component_shape(ds, 0, d), 0);
  const float wf[5] = {1.5f, -2.0f, 300.0f, 0.25f, -1.0f};
  const int64_t wi[5] = {7, 42, 9, -4, 5};
  const char *ws[5] = {"plain", "with,comma", "say \"hi\"", "two\nlines", "none"};
  const double wd[5] = {2.25, 0.5, -1.0, 8.0, 1.0};
  loom_tensor *v[4] = {NULL};
  for (int pass = 0; pass < 2; pass++) {
    for (int r = 0; r < 5; r++) {
      next_ok(ds, v, st);
      cr_assert_eq(loom_tensor_ndim(v[0]), 0);
      cr_assert_eq(F(v[0])[0], wf[r], "row %d f", r);
      cr_assert_eq(L(v[1])[0], wi[r], "row %d i", r);
      cr_assert_str_eq(loom_tensor_get_string(v[2], 0, NULL), ws[r], "row %d s", r);
      cr_assert_eq(((const double *)loom_tensor_data_const(v[3]))[0], wd[r], "row %d d", r);
    }
    expect_end(ds, v, st);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  free_vals(v, 4);
  loom_dataset_free(ds);
  /* batched, and two files (each with its header); no header + explicit names */
  char *p2 = path_in(dir, "b.csv");
  tu_write_file(p2, "f,i,s,skip,d\n9,1,a,b,2\n", 23);
  const char *two[2] = {p, p2};
  ds = chk(loom_dataset_batch(chk(loom_dataset_csv(2, two, &o, st), st), 4, 0, st), st);
  next_ok(ds, v, st);
  cr_assert_eq(loom_tensor_dim(v[0], 0), 4);
  cr_assert_str_eq(loom_tensor_get_string(v[2], 1, NULL), "with,comma");
  next_ok(ds, v, st);
  cr_assert_eq(loom_tensor_dim(v[0], 0), 2);
  cr_assert_eq(F(v[0])[1], 9.0f);
  cr_assert_eq(L(v[1])[1], 1);
  expect_end(ds, v, st);
  free_vals(v, 4);
  loom_dataset_free(ds);
  char *p3 = path_in(dir, "c.csv");
  tu_write_file(p3, "1;2\n3;4\n", 8);
  loom_csv_column c2[2] = {{"a", LOOM_I32, NULL, 1}, {"b", LOOM_F32, NULL, 1}};
  loom_csv_options o2 = {0, ';', 2, c2, NULL};
  const char *one[1] = {p3};
  ds = chk(loom_dataset_csv(1, one, &o2, st), st);
  cr_assert_eq(loom_dataset_label_index(ds), -1);
  next_ok(ds, v, st);
  cr_assert_eq(I(v[0])[0], 1);
  cr_assert_eq(F(v[1])[0], 2.0f);
  next_ok(ds, v, st);
  cr_assert_eq(I(v[0])[0], 3);
  expect_end(ds, v, st);
  free_vals(v, 4);
  loom_dataset_free(ds);
  tu_rmtree(dir);
  free(p), free(p2), free(p3);
  loom_status_free(st);
}

/* Builds a dataset over text with 3 columns a:int32, b:float32, c:string
 * (no defaults) and returns the code of the first failing next (or OK). */
static loom_code csv_run(const char *dir, const char *text, loom_status *st, char **path_out) {
  char *p = path_in(dir, "bad.csv");
  tu_write_file(p, text, strlen(text));
  loom_csv_column cols[3] = {{"a", LOOM_I32, NULL, 1}, {"b", LOOM_F32, NULL, 1}, {"c", LOOM_STRING, NULL, 1}};
  loom_csv_options o = {0, ',', 3, cols, NULL};
  const char *paths[1] = {p};
  *path_out = p;
  loom_dataset *ds = loom_dataset_csv(1, paths, &o, st);
  if (!ds) return loom_status_code(st);
  loom_tensor *v[3] = {NULL};
  loom_code rc;
  while ((rc = loom_dataset_next(ds, v, st)) == LOOM_OK) {
  }
  free_vals(v, 3);
  loom_dataset_free(ds);
  return rc == LOOM_OUT_OF_RANGE ? LOOM_OK : rc;
}

Test(csv, errors_name_file_and_line) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_data");
  char *p, want[512];
  cr_assert_eq(csv_run(dir, "1,2,x\n3,4,y\n", st, &p), LOOM_OK);
  free(p);
  loom_code rc = csv_run(dir, "1,2,x\n3,4\n", st, &p);
  snprintf(want, sizeof want, "%s:2:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "expected 3 fields, found 2", NULL);
  free(p);
  rc = csv_run(dir, "1,2,x\n\"multi\nline\",2,3\n5,6,7,8\n", st, &p);
  snprintf(want, sizeof want, "%s:2:", p); /* the quoted field fails to parse as int32 on record line 2 */
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "'a'", "int32");
  free(p);
  rc = csv_run(dir, "1,2,x\n\"1\",\"2\",\"a\nb\"\n5,6,7,8\n", st, &p);
  snprintf(want, sizeof want, "%s:4:", p); /* line numbers count the newline inside quotes */
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "found 4", NULL);
  free(p);
  rc = csv_run(dir, "1,2,x\n1,abc,x\n", st, &p);
  snprintf(want, sizeof want, "%s:2:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "column 'b'", "'abc'");
  free(p);
  rc = csv_run(dir, "1,2,x\n\n\n7x,2,x\n", st, &p);
  snprintf(want, sizeof want, "%s:4:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "column 'a'", "'7x'");
  free(p);
  rc = csv_run(dir, "99999999999,2,x\n", st, &p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, ":1:", "int32", NULL);
  free(p);
  rc = csv_run(dir, "1,,x\n", st, &p);
  snprintf(want, sizeof want, "%s:1:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "'b' is empty", "no default");
  free(p);
  rc = csv_run(dir, "1,2,\"open\n3,4,5\n", st, &p);
  snprintf(want, sizeof want, "%s:1:", p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, want, "unterminated", NULL);
  free(p);
  rc = csv_run(dir, "1,2,\"ab\"c\n", st, &p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, ":1:", "after the closing quote", NULL);
  free(p);
  rc = csv_run(dir, "1,2,a\"b\n", st, &p);
  expect_msg(rc, LOOM_INVALID_ARGUMENT, st, ":1:", "quote inside an unquoted field", NULL);
  free(p);
  /* the error is sticky until reset */
  char *q = path_in(dir, "s.csv");
  tu_write_file(q, "1,2,x\nbad\n3,4,z\n", 16);
  loom_csv_column cols[3] = {{"a", LOOM_I32, NULL, 1}, {"b", LOOM_F32, NULL, 1}, {"c", LOOM_STRING, NULL, 1}};
  loom_csv_options o = {0, ',', 3, cols, NULL};
  const char *paths[1] = {q};
  loom_dataset *ds = chk(loom_dataset_csv(1, paths, &o, st), st);
  loom_tensor *v[3] = {NULL};
  next_ok(ds, v, st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, ":2:", NULL, NULL);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, ":2:", NULL, NULL);
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  next_ok(ds, v, st);
  free_vals(v, 3);
  loom_dataset_free(ds);
  /* construction errors */
  o.label_name = "zzz";
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "label_name", "'zzz'", NULL);
  o.label_name = NULL;
  cols[1].dtype = LOOM_BOOL;
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "columns[1]", "bool", NULL);
  cols[1].dtype = LOOM_F32;
  cols[1].default_value = "nan?";
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "default_value", "'nan?'", NULL);
  cols[1].default_value = NULL;
  cols[0].name = NULL;
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "columns[0]", "header", NULL);
  cols[0].name = "a";
  cols[2].name = "a";
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'a'", NULL, NULL);
  cols[2].name = "c";
  o.header = 1; /* header "1,2,x" has 3 fields: fine; a 2-column description is not */
  o.ncolumns = 2;
  cr_assert_null(loom_dataset_csv(1, paths, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, ":1:", "header has 3 columns", NULL);
  char *none = path_in(dir, "missing.csv");
  const char *np[1] = {none};
  o.ncolumns = 3;
  cr_assert_null(loom_dataset_csv(1, np, &o, st));
  expect_msg(loom_status_code(st), LOOM_NOT_FOUND, st, none, NULL, NULL);
  tu_rmtree(dir);
  free(q), free(none);
  loom_status_free(st);
}

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

static const float k_wdef = 0.5f;
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
