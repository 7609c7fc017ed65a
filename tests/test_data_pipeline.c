/* Dataset pipelines (loom_data.h): from_tensors, batch, shuffle, repeat,
 * take, map, prefetch, steady-state allocation and numpy_input. */
#include "data_util.h"

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

static void count_dealloc(void *data, size_t nbytes, void *arg) {
  (void)data, (void)nbytes;
  ++*(int *)arg;
}

Test(from_tensors, taken_reads_the_callers_memory_and_frees_it_once) {
  loom_status *st = loom_status_new();
  float x[4][2] = {{0, 100}, {1, 101}, {2, 102}, {3, 103}};
  int32_t y[4] = {0, 1, 2, 3};
  int freed_x = 0, freed_y = 0;
  int64_t dx[2] = {4, 2}, dy[1] = {4};
  loom_tensor *tx = loom_tensor_wrap(LOOM_F32, 2, dx, x, sizeof x, count_dealloc, &freed_x, st);
  loom_tensor *ty = loom_tensor_wrap(LOOM_I32, 1, dy, y, sizeof y, count_dealloc, &freed_y, st);
  cr_assert(tx && ty);
  const char *names[2] = {"x", "y"};
  loom_tensor *arrays[2] = {tx, ty};
  loom_dataset *ds = chk(loom_dataset_from_tensors_taken(2, names, arrays, "y", st), st);
  cr_assert_eq(loom_dataset_label_index(ds), 1);
  loom_tensor *v[2] = {NULL, NULL};
  next_ok(ds, v, st);
  cr_assert_eq(F(v[0])[1], 100.0f);
  x[1][1] = -7.0f; /* not copied: the dataset reads the caller's memory */
  y[1] = 42;
  next_ok(ds, v, st);
  cr_assert_eq(F(v[0])[0], 1.0f);
  cr_assert_eq(F(v[0])[1], -7.0f);
  cr_assert_eq(I(v[1])[0], 42);
  free_vals(v, 2);
  cr_assert_eq(freed_x + freed_y, 0);
  /* shuffled batches gather rows from it (the random-access path) */
  loom_dataset *sb = chk(loom_dataset_batch(chk(loom_dataset_shuffle(ds, 4, 7, 1, st), st), 4, 0, st), st);
  cr_assert_eq(loom_dataset_reset(sb, st), LOOM_OK);
  loom_tensor *b[2] = {NULL, NULL};
  next_ok(sb, b, st);
  float sum = 0;
  for (int i = 0; i < 4; i++) {
    int r = I(b[1])[i] == 42 ? 1 : I(b[1])[i];
    cr_assert_eq(F(b[0])[2 * i], (float)r);
    sum += F(b[0])[2 * i + 1];
  }
  cr_assert_eq(sum, 100.0f - 7.0f + 102.0f + 103.0f);
  free_vals(b, 2);
  loom_dataset_free(sb);
  cr_assert_eq(freed_x, 1); /* freed with the dataset, once each */
  cr_assert_eq(freed_y, 1);
  loom_status_free(st);
}

Test(from_tensors, taken_failures_leave_the_tensors_to_the_caller) {
  loom_status *st = loom_status_new();
  float x[3] = {1, 2, 3};
  int freed = 0;
  int64_t d3[1] = {3}, d2[1] = {2};
  loom_tensor *tx = loom_tensor_wrap(LOOM_F32, 1, d3, x, sizeof x, count_dealloc, &freed, st);
  loom_tensor *ty = loom_tensor_new(LOOM_I32, 1, d2, st);
  const char *names[2] = {"x", "y"};
  loom_tensor *arrays[2] = {tx, ty};
  cr_assert_null(loom_dataset_from_tensors_taken(2, names, arrays, NULL, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "has 2 rows"), "%s", loom_status_message(st));
  loom_status_clear(st);
  loom_tensor *twice[2] = {tx, tx};
  cr_assert_null(loom_dataset_from_tensors_taken(2, names, twice, NULL, st));
  cr_assert(strstr(loom_status_message(st), "are the same tensor"), "%s", loom_status_message(st));
  loom_status_clear(st);
  cr_assert_null(loom_dataset_from_tensors_taken(1, names, arrays, "z", st));
  cr_assert(strstr(loom_status_message(st), "'z' is not one of the names"), "%s", loom_status_message(st));
  cr_assert_eq(freed, 0);
  loom_tensor_free(tx);
  loom_tensor_free(ty);
  cr_assert_eq(freed, 1);
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

/* Batches of strings reuse one block per batch tensor; a later batch with
 * longer strings (shuffled, repeated) must grow it and keep every value. */
Test(from_tensors, batched_strings_grow_and_shuffle) {
  loom_status *st = loom_status_new();
  enum { N = 40 };
  int64_t d[2] = {N, 1};
  loom_tensor *s = loom_tensor_new(LOOM_STRING, 2, d, NULL);
  char buf[200];
  for (int i = 0; i < N; i++) {
    memset(buf, 'a' + i % 26, (size_t)(i * 4));
    loom_tensor_set_string(s, i, buf, (size_t)(i * 4), NULL);
  }
  const loom_tensor *a1[1] = {s};
  const char *n1[1] = {"w"};
  loom_dataset *ds = loom_dataset_from_tensors(1, n1, a1, NULL, st);
  ds = loom_dataset_batch(loom_dataset_repeat(loom_dataset_shuffle(ds, N, 3, 1, st), 2, st), 7, 0, st);
  cr_assert(ds, "%s", loom_status_message(st));
  loom_tensor_free(s);
  loom_tensor *w[1] = {NULL};
  int seen[N] = {0}, total = 0;
  while (loom_dataset_next(ds, w, st) == LOOM_OK) {
    for (int64_t k = 0; k < loom_tensor_numel(w[0]); k++) {
      size_t len;
      const char *v = loom_tensor_get_string(w[0], k, &len);
      cr_assert_eq(len % 4, 0);
      int i = (int)(len / 4);
      cr_assert_eq(strlen(v), len, "NUL-terminated");
      for (size_t c = 0; c < len; c++) cr_assert_eq(v[c], 'a' + i % 26);
      seen[i]++;
      total++;
    }
  }
  cr_assert_eq(total, 2 * N);
  for (int i = 0; i < N; i++) cr_assert_eq(seen[i], 2, "row %d seen %d times", i, seen[i]);
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

/* shard(n, i) keeps element j of each pass when j % n == i (TF 2.15: range(7).shard(3, 1) is 1, 4;
 * range(5).shard(2, 1).repeat(2) is 1, 3, 1, 3; range(5).repeat(2).shard(2, 1) is 1, 3, 0, 2, 4);
 * a bad index or count is an error naming both, the input freed. */
Test(pipeline, shard_keeps_every_nth_element_per_pass) {
  loom_status *st = loom_status_new();
  int ids[16];
  loom_dataset *ds = chk(loom_dataset_shard(range_ds(7, st), 3, 1, st), st);
  cr_assert_eq(drain_ids(ds, ids, 16, st), 2);
  cr_assert(ids[0] == 1 && ids[1] == 4);
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  cr_assert_eq(drain_ids(ds, ids, 16, st), 2, "a reset starts the count again");
  cr_assert(ids[0] == 1 && ids[1] == 4);
  loom_dataset_free(ds);
  ds = chk(loom_dataset_repeat(chk(loom_dataset_shard(range_ds(5, st), 2, 1, st), st), 2, st), st);
  int want1[4] = {1, 3, 1, 3};
  cr_assert_eq(drain_ids(ds, ids, 16, st), 4);
  for (int i = 0; i < 4; i++) cr_assert_eq(ids[i], want1[i]);
  loom_dataset_free(ds);
  ds = chk(loom_dataset_shard(chk(loom_dataset_repeat(range_ds(5, st), 2, st), st), 2, 1, st), st);
  int want2[5] = {1, 3, 0, 2, 4};
  cr_assert_eq(drain_ids(ds, ids, 16, st), 5);
  for (int i = 0; i < 5; i++) cr_assert_eq(ids[i], want2[i]);
  loom_dataset_free(ds);
  int64_t bad[3][2] = {{2, 2}, {0, 0}, {3, -1}};
  for (int k = 0; k < 3; k++) {
    cr_assert_null(loom_dataset_shard(range_ds(5, st), bad[k][0], bad[k][1], st));
    cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
    char want[96];
    snprintf(want, sizeof want, "got num_shards %lld, index %lld", (long long)bad[k][0], (long long)bad[k][1]);
    cr_assert(strstr(loom_status_message(st), want), "%s", loom_status_message(st));
  }
  loom_status_free(st);
}

/* ---- from_generator: a callback's elements ---- */
typedef struct gen_state {
  int n, pos, resets, released, bad_at; /* bad_at: the element that comes out [3] instead of [2] (-1 none) */
} gen_state;

static loom_code gen_next(void *user, int n, loom_tensor **out, loom_status *st) {
  gen_state *g = user;
  cr_assert_eq(n, 2);
  if (g->pos == g->n) return LOOM_OUT_OF_RANGE;
  int i = g->pos++;
  int64_t dx[1] = {i == g->bad_at ? 3 : 2};
  out[0] = loom_tensor_new(LOOM_F32, 1, dx, st);
  out[1] = loom_tensor_new(LOOM_I32, 0, NULL, st);
  if (!out[0] || !out[1]) return loom_status_code(st);
  float *x = loom_tensor_data(out[0]);
  x[0] = (float)i;
  x[1] = 100.0f + (float)i;
  *(int32_t *)loom_tensor_data(out[1]) = i;
  return LOOM_OK;
}

static loom_code gen_reset(void *user, loom_status *st) {
  (void)st;
  gen_state *g = user;
  g->pos = 0;
  g->resets++;
  return LOOM_OK;
}

static void gen_release(void *user) { ((gen_state *)user)->released++; }

static loom_dataset *gen_ds(gen_state *g, loom_status *st) {
  const char *names[2] = {"x", "y"};
  loom_dtype dt[2] = {LOOM_F32, LOOM_I32};
  int32_t nd[2] = {1, 0};
  int64_t dims[1] = {2};
  return loom_dataset_from_generator(2, names, dt, nd, dims, "y", gen_next, gen_reset, gen_release, g, st);
}

Test(pipeline, from_generator_passes_batches_and_release) {
  loom_status *st = loom_status_new();
  gen_state g = {.n = 5, .bad_at = -1};
  loom_dataset *ds = chk(gen_ds(&g, st), st);
  cr_assert_eq(loom_dataset_label_index(ds), 1);
  ds = chk(loom_dataset_batch(loom_dataset_repeat(ds, 2, st), 4, 0, st), st);
  loom_tensor *v[2] = {NULL, NULL};
  int sizes[4] = {0}, nb = 0, seen = 0;
  for (loom_code rc; (rc = loom_dataset_next(ds, v, st)) != LOOM_OUT_OF_RANGE; nb++) {
    cr_assert_eq(rc, LOOM_OK, "%s", loom_status_message(st));
    cr_assert_lt(nb, 3);
    sizes[nb] = (int)loom_tensor_dims(v[1])[0];
    for (int k = 0; k < sizes[nb]; k++, seen++) { /* 0..4 twice, in order */
      cr_assert_eq(I(v[1])[k], seen % 5);
      cr_assert_eq(F(v[0])[2 * k + 1], 100.0f + (float)(seen % 5));
    }
  }
  cr_assert(sizes[0] == 4 && sizes[1] == 4 && sizes[2] == 2 && nb == 3);
  cr_assert_geq(g.resets, 1); /* repeat started the second pass through reset */
  loom_tensor_free(v[0]);
  loom_tensor_free(v[1]);
  loom_dataset_free(ds);
  cr_assert_eq(g.released, 1);
  loom_status_free(st);
}

Test(pipeline, from_generator_checks_elements_and_arguments) {
  loom_status *st = loom_status_new();
  gen_state g = {.n = 4, .bad_at = 2};
  loom_dataset *ds = chk(gen_ds(&g, st), st);
  loom_tensor *v[2] = {NULL, NULL};
  cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_OK);
  cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_OK);
  cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "component 'x' of the element is float32 [3], the declared spec is "
                                             "float32 [2]"),
            "%s", loom_status_message(st));
  cr_assert_eq(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT); /* sticky until reset */
  loom_tensor_free(v[0]);
  loom_tensor_free(v[1]);
  loom_dataset_free(ds);
  const char *names[1] = {"x"};
  loom_dtype dt[1] = {LOOM_F32};
  int32_t nd[1] = {0};
  cr_assert_null(loom_dataset_from_generator(1, names, dt, nd, NULL, "nope", gen_next, NULL, gen_release, &g, st));
  cr_assert(strstr(loom_status_message(st), "label_name 'nope'"));
  cr_assert_null(loom_dataset_from_generator(1, names, dt, nd, NULL, NULL, NULL, NULL, NULL, &g, st));
  nd[0] = 2; /* a rank without its dims */
  cr_assert_null(loom_dataset_from_generator(1, names, dt, nd, NULL, NULL, gen_next, NULL, gen_release, &g, st));
  cr_assert(strstr(loom_status_message(st), "component 'x' has rank 2 and dims is NULL"), "%s",
            loom_status_message(st));
  cr_assert_eq(g.released, 1); /* a failed build leaves user to the caller */
  loom_status_free(st);
}
