/* Ragged dataset components (loom_data.h, loom_sparse.h): a ragged
 * feature "x" is the components "x" (values) and "x/row_splits". Batching
 * merges the splits (never pads; empty rows, batches without values,
 * drop_remainder, a short last batch); shuffle, repeat, take, prefetch and
 * map carry both; sources: from_ragged_tensors, TFRecord VarLen/Sparse
 * (ragged = 1) read from hand-encoded tf.Example bytes, CSV multi-valued
 * cells; malformed input names the feature or column. */
#include "data_util.h"

static loom_tensor *t_i64(int64_t n, const int64_t *v) { return loom_tensor_from_data(LOOM_I64, 1, &n, v, NULL); }
static loom_tensor *t_f32(int64_t n, const float *v) { return loom_tensor_from_data(LOOM_F32, 1, &n, v, NULL); }
static loom_tensor *t_str(int64_t n, const char *const *v) {
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 1, &n, NULL);
  for (int64_t i = 0; i < n; i++) loom_tensor_set_string(t, i, v[i], strlen(v[i]), NULL);
  return t;
}
static void expect_i64(const loom_tensor *t, int64_t n, const int64_t *want) {
  cr_assert(t);
  cr_assert_eq(loom_tensor_dtype(t), LOOM_I64);
  cr_assert_eq(loom_tensor_ndim(t), 1, "rank %d", loom_tensor_ndim(t));
  cr_assert_eq(loom_tensor_numel(t), n, "%lld values, want %lld", (long long)loom_tensor_numel(t), (long long)n);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(L(t)[i], want[i], "[%lld] = %lld want %lld", (long long)i, (long long)L(t)[i], (long long)want[i]);
}
static void expect_f32v(const loom_tensor *t, int64_t n, const float *want) {
  cr_assert(t);
  cr_assert_eq(loom_tensor_dtype(t), LOOM_F32);
  cr_assert_eq(loom_tensor_numel(t), n, "%lld values, want %lld", (long long)loom_tensor_numel(t), (long long)n);
  for (int64_t i = 0; i < n; i++) cr_assert_eq(F(t)[i], want[i], "[%lld] = %g want %g", (long long)i, F(t)[i], want[i]);
}
static void expect_strs(const loom_tensor *t, int64_t n, const char *const *want) {
  cr_assert(t);
  cr_assert_eq(loom_tensor_dtype(t), LOOM_STRING);
  cr_assert_eq(loom_tensor_numel(t), n, "%lld strings, want %lld", (long long)loom_tensor_numel(t), (long long)n);
  for (int64_t i = 0; i < n; i++) {
    size_t l;
    const char *g = loom_tensor_get_string(t, i, &l);
    cr_assert(l == strlen(want[i]) && (!l || !memcmp(g, want[i], l)), "string %lld: '%.*s' want '%s'", (long long)i,
              (int)l, g ? g : "", want[i]);
  }
}
static void expect_spec(loom_dataset *ds, int i, const char *name, loom_dtype dt, int64_t dim0) {
  int64_t d[LOOM_MAX_DIMS];
  cr_assert_str_eq(loom_dataset_component_name(ds, i), name);
  cr_assert_eq(loom_dataset_component_dtype(ds, i), dt, "component %s dtype", name);
  cr_assert_eq(loom_dataset_component_shape(ds, i, d), 1, "component %s rank", name);
  cr_assert_eq(d[0], dim0, "component %s dim 0: %lld want %lld", name, (long long)d[0], (long long)dim0);
}

/* ======================================================================
 * from_ragged_tensors + batch
 * ====================================================================== */
/* ids rows: {1,2} {} {3} {4,5,6} {}; tags rows: {"a"} {"b","c"} {} {} {"d"};
 * w dense [5]; y dense label [5]. */
static loom_dataset *five_rows(loom_status *st) {
  const int64_t idv[6] = {1, 2, 3, 4, 5, 6}, ids_sp[6] = {0, 2, 2, 3, 6, 6};
  const char *tv[4] = {"a", "b", "c", "d"};
  const int64_t tag_sp[6] = {0, 1, 3, 3, 3, 4};
  const float wv[5] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f}, yv[5] = {10, 11, 12, 13, 14};
  loom_tensor *vals[4] = {t_i64(6, idv), t_str(4, tv), t_f32(5, wv), t_f32(5, yv)};
  loom_tensor *sp[4] = {t_i64(6, ids_sp), t_i64(6, tag_sp), NULL, NULL};
  const char *names[4] = {"ids", "tags", "w", "y"};
  loom_dataset *ds = loom_dataset_from_ragged_tensors(4, names, (const loom_tensor *const *)vals,
                                                      (const loom_tensor *const *)sp, "y", st);
  for (int i = 0; i < 4; i++) {
    loom_tensor_free(vals[i]);
    loom_tensor_free(sp[i]);
  }
  return chk(ds, st);
}

Test(ragged, from_ragged_tensors_elements) {
  loom_status *st = loom_status_new();
  loom_dataset *ds = five_rows(st);
  cr_assert_eq(loom_dataset_num_components(ds), 6);
  expect_spec(ds, 0, "ids", LOOM_I64, -1);
  expect_spec(ds, 1, "ids/row_splits", LOOM_I64, 2);
  expect_spec(ds, 2, "tags", LOOM_STRING, -1);
  expect_spec(ds, 3, "tags/row_splits", LOOM_I64, 2);
  cr_assert_str_eq(loom_dataset_component_name(ds, 4), "w");
  cr_assert_eq(loom_dataset_component_shape(ds, 4, NULL), 0);
  cr_assert_eq(loom_dataset_label_index(ds), 5);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 0), 1);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 1), -1);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 2), 3);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 4), -1);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 6), -1);
  cr_assert_eq(loom_dataset_component_row_splits(NULL, 0), -1);
  loom_tensor *v[6] = {0};
  for (int pass = 0; pass < 2; pass++) {
    next_ok(ds, v, st);
    expect_i64(v[0], 2, (int64_t[]){1, 2});
    expect_i64(v[1], 2, (int64_t[]){0, 2});
    expect_strs(v[2], 1, (const char *[]){"a"});
    expect_i64(v[3], 2, (int64_t[]){0, 1});
    cr_assert_eq(F(v[4])[0], 0.5f);
    cr_assert_eq(F(v[5])[0], 10.0f);
    next_ok(ds, v, st); /* ids empty */
    expect_i64(v[0], 0, NULL);
    expect_i64(v[1], 2, (int64_t[]){0, 0});
    expect_strs(v[2], 2, (const char *[]){"b", "c"});
    expect_i64(v[3], 2, (int64_t[]){0, 2});
    next_ok(ds, v, st);
    next_ok(ds, v, st);
    expect_i64(v[0], 3, (int64_t[]){4, 5, 6});
    expect_i64(v[1], 2, (int64_t[]){0, 3});
    next_ok(ds, v, st);
    expect_strs(v[2], 1, (const char *[]){"d"});
    cr_assert_eq(F(v[5])[0], 14.0f);
    expect_end(ds, v, st);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  free_vals(v, 6);
  loom_dataset_free(ds);
  loom_status_free(st);
}

Test(ragged, batch_merges_splits) {
  loom_status *st = loom_status_new();
  loom_dataset *ds = chk(loom_dataset_batch(five_rows(st), 2, 0, st), st);
  expect_spec(ds, 0, "ids", LOOM_I64, -1);
  expect_spec(ds, 1, "ids/row_splits", LOOM_I64, -1);
  expect_spec(ds, 3, "tags/row_splits", LOOM_I64, -1);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 0), 1);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 2), 3);
  int64_t d[LOOM_MAX_DIMS];
  cr_assert_eq(loom_dataset_component_shape(ds, 4, d), 1); /* dense w: [-1] */
  cr_assert_eq(d[0], -1);
  loom_tensor *v[6] = {0};
  next_ok(ds, v, st); /* rows 0, 1 */
  expect_i64(v[0], 2, (int64_t[]){1, 2});
  expect_i64(v[1], 3, (int64_t[]){0, 2, 2});
  expect_strs(v[2], 3, (const char *[]){"a", "b", "c"});
  expect_i64(v[3], 3, (int64_t[]){0, 1, 3});
  expect_f32v(v[4], 2, (float[]){0.5f, 1.5f});
  next_ok(ds, v, st); /* rows 2, 3 */
  expect_i64(v[0], 4, (int64_t[]){3, 4, 5, 6});
  expect_i64(v[1], 3, (int64_t[]){0, 1, 4});
  expect_strs(v[2], 0, NULL); /* a batch without values */
  expect_i64(v[3], 3, (int64_t[]){0, 0, 0});
  next_ok(ds, v, st); /* the short last batch: row 4 */
  expect_i64(v[0], 0, NULL);
  expect_i64(v[1], 2, (int64_t[]){0, 0});
  expect_strs(v[2], 1, (const char *[]){"d"});
  expect_i64(v[3], 2, (int64_t[]){0, 1});
  expect_f32v(v[5], 1, (float[]){14});
  expect_end(ds, v, st);
  free_vals(v, 6);
  loom_dataset_free(ds);

  /* drop_remainder: splits [B + 1] in the spec, the short batch dropped */
  ds = chk(loom_dataset_batch(five_rows(st), 2, 1, st), st);
  expect_spec(ds, 0, "ids", LOOM_I64, -1);
  expect_spec(ds, 1, "ids/row_splits", LOOM_I64, 3);
  next_ok(ds, v, st);
  next_ok(ds, v, st);
  expect_i64(v[1], 3, (int64_t[]){0, 1, 4});
  expect_end(ds, v, st);
  free_vals(v, 6);
  loom_dataset_free(ds);

  /* one batch of everything; and a batch of empty rows only */
  ds = chk(loom_dataset_batch(five_rows(st), 5, 0, st), st);
  next_ok(ds, v, st);
  expect_i64(v[0], 6, (int64_t[]){1, 2, 3, 4, 5, 6});
  expect_i64(v[1], 6, (int64_t[]){0, 2, 2, 3, 6, 6});
  expect_strs(v[2], 4, (const char *[]){"a", "b", "c", "d"});
  expect_i64(v[3], 6, (int64_t[]){0, 1, 3, 3, 3, 4});
  expect_end(ds, v, st);
  free_vals(v, 6);
  loom_dataset_free(ds);

  const int64_t none_sp[4] = {0, 0, 0, 0};
  loom_tensor *ev = loom_tensor_new(LOOM_F32, 1, (int64_t[]){0}, NULL), *es = t_i64(4, none_sp);
  const char *nm[1] = {"e"};
  ds = chk(loom_dataset_from_ragged_tensors(1, nm, (const loom_tensor *const *)&ev, (const loom_tensor *const *)&es,
                                            NULL, st),
           st);
  loom_tensor_free(ev);
  loom_tensor_free(es);
  ds = chk(loom_dataset_batch(ds, 2, 0, st), st);
  next_ok(ds, v, st);
  cr_assert_eq(loom_tensor_dtype(v[0]), LOOM_F32);
  cr_assert_eq(loom_tensor_numel(v[0]), 0);
  expect_i64(v[1], 3, (int64_t[]){0, 0, 0});
  next_ok(ds, v, st);
  expect_i64(v[1], 2, (int64_t[]){0, 0});
  expect_end(ds, v, st);
  free_vals(v, 2);
  loom_dataset_free(ds);

  /* batching a batched ragged pair again: nested rows are refused */
  ds = loom_dataset_batch(chk(loom_dataset_batch(five_rows(st), 2, 0, st), st), 2, 0, st);
  cr_assert_null(ds);
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'ids'", "already batched", NULL);
  loom_status_free(st);
}

/* ======================================================================
 * shuffle, repeat, take, prefetch keep each row's values with its splits
 * ====================================================================== */
/* Row r (0..N-1): ids = {100 r, 100 r + 1, ..., 100 r + (r % 4) - 1} (r % 4
 * values), names = {"r<r>"} repeated r % 3 times; "r" = r (dense). */
#define NR 23
static loom_dataset *rows_ds(loom_status *st) {
  int64_t idv[NR * 4], isp[NR + 1], rv[NR];
  const char *nv[NR * 3];
  char bufs[NR][8];
  int64_t nsp[NR + 1];
  int64_t k = 0, m = 0;
  isp[0] = nsp[0] = 0;
  for (int r = 0; r < NR; r++) {
    for (int j = 0; j < r % 4; j++) idv[k++] = 100 * r + j;
    snprintf(bufs[r], sizeof bufs[r], "r%d", r);
    for (int j = 0; j < r % 3; j++) nv[m++] = bufs[r];
    isp[r + 1] = k;
    nsp[r + 1] = m;
    rv[r] = r;
  }
  loom_tensor *vals[3] = {t_i64(k, idv), t_str(m, nv), t_i64(NR, rv)};
  loom_tensor *sp[3] = {t_i64(NR + 1, isp), t_i64(NR + 1, nsp), NULL};
  const char *names[3] = {"ids", "names", "r"};
  loom_dataset *ds = loom_dataset_from_ragged_tensors(3, names, (const loom_tensor *const *)vals,
                                                      (const loom_tensor *const *)sp, NULL, st);
  for (int i = 0; i < 3; i++) {
    loom_tensor_free(vals[i]);
    loom_tensor_free(sp[i]);
  }
  return chk(ds, st);
}

/* Checks a batch of rows_ds against its "r" column; counts rows seen. */
static int64_t check_rows_batch(loom_tensor **v, int *seen) {
  int64_t b = loom_tensor_numel(v[4]);
  cr_assert_eq(loom_tensor_numel(v[1]), b + 1);
  cr_assert_eq(loom_tensor_numel(v[3]), b + 1);
  cr_assert_eq(L(v[1])[b], loom_tensor_numel(v[0]));
  cr_assert_eq(L(v[3])[b], loom_tensor_numel(v[2]));
  for (int64_t j = 0; j < b; j++) {
    int64_t r = L(v[4])[j];
    cr_assert(r >= 0 && r < NR);
    seen[r]++;
    int64_t s = L(v[1])[j], e = L(v[1])[j + 1];
    cr_assert_eq(e - s, r % 4, "row %lld has %lld ids", (long long)r, (long long)(e - s));
    for (int64_t i = s; i < e; i++) cr_assert_eq(L(v[0])[i], 100 * r + (i - s));
    s = L(v[3])[j];
    e = L(v[3])[j + 1];
    cr_assert_eq(e - s, r % 3);
    char want[8];
    snprintf(want, sizeof want, "r%lld", (long long)r);
    for (int64_t i = s; i < e; i++) {
      size_t l;
      const char *g = loom_tensor_get_string(v[2], i, &l);
      cr_assert(l == strlen(want) && !memcmp(g, want, l));
    }
  }
  return b;
}

Test(ragged, shuffle_repeat_take_prefetch_keep_pairs) {
  loom_status *st = loom_status_new();
  loom_dataset *ds = loom_dataset_shuffle(rows_ds(st), 7, 1234, 1, st);
  ds = chk(loom_dataset_repeat(chk(ds, st), 2, st), st);
  ds = chk(loom_dataset_batch(ds, 4, 0, st), st);
  ds = chk(loom_dataset_prefetch(ds, 2, st), st);
  expect_spec(ds, 0, "ids", LOOM_I64, -1);
  expect_spec(ds, 1, "ids/row_splits", LOOM_I64, -1);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 0), 1);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 2), 3);
  loom_tensor *v[5] = {0};
  for (int pass = 0; pass < 2; pass++) {
    int seen[NR] = {0}, in_order = 1;
    int64_t total = 0, prev = -1;
    while (loom_dataset_next(ds, v, st) == LOOM_OK) {
      total += check_rows_batch(v, seen);
      for (int64_t j = 0; j < loom_tensor_numel(v[4]); j++) {
        if (L(v[4])[j] != prev + 1) in_order = 0;
        prev = L(v[4])[j];
      }
    }
    cr_assert_eq(loom_status_code(st), LOOM_OUT_OF_RANGE, "%s", loom_status_message(st));
    cr_assert_eq(total, 2 * NR);
    for (int r = 0; r < NR; r++) cr_assert_eq(seen[r], 2, "row %d seen %d times", r, seen[r]);
    cr_assert(!in_order, "the shuffle kept the order");
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  free_vals(v, 5);
  loom_dataset_free(ds);

  /* take(5) of single elements through prefetch, then batch */
  ds = chk(loom_dataset_take(rows_ds(st), 5, st), st);
  ds = chk(loom_dataset_prefetch(ds, 1, st), st);
  ds = chk(loom_dataset_batch(ds, 3, 0, st), st);
  int seen[NR] = {0};
  next_ok(ds, v, st);
  cr_assert_eq(check_rows_batch(v, seen), 3);
  expect_i64(v[0], 3, (int64_t[]){100, 200, 201});
  expect_i64(v[1], 4, (int64_t[]){0, 0, 1, 3});
  next_ok(ds, v, st);
  cr_assert_eq(check_rows_batch(v, seen), 2);
  expect_i64(v[0], 3, (int64_t[]){300, 301, 302});
  expect_i64(v[1], 3, (int64_t[]){0, 3, 3});
  expect_strs(v[2], 1, (const char *[]){"r4"}); /* r % 3 names: row 3 none, row 4 one */
  expect_end(ds, v, st);
  free_vals(v, 5);
  loom_dataset_free(ds);
  loom_status_free(st);
}

/* ======================================================================
 * map
 * ====================================================================== */
typedef struct map_mode {
  int what; /* 0 double ids, append -1; 1 splits {0, k + 2}; 2 splits NULL; 3 splits {0, -1} */
} map_mode;
static loom_code map_fn(void *user, int n, loom_tensor **v, loom_status *st) {
  map_mode *m = user;
  cr_assert_eq(n, 5);
  int64_t k = loom_tensor_numel(v[0]);
  if (m->what == 0) { /* ids -> 2 * ids followed by -1: a new, longer row */
    int64_t buf[8];
    for (int64_t i = 0; i < k; i++) buf[i] = 2 * L(v[0])[i];
    buf[k] = -1;
    loom_tensor_free(v[0]);
    v[0] = t_i64(k + 1, buf);
    ((int64_t *)loom_tensor_data(v[1]))[1] = k + 1;
  } else if (m->what == 1) {
    ((int64_t *)loom_tensor_data(v[1]))[1] = k + 2;
  } else if (m->what == 2) {
    loom_tensor_free(v[1]);
    v[1] = NULL;
  } else {
    loom_tensor_free(v[1]);
    v[1] = t_i64(2, (int64_t[]){0, -1});
  }
  (void)st;
  return LOOM_OK;
}

Test(ragged, map_carries_and_checks_pairs) {
  loom_status *st = loom_status_new();
  map_mode m = {0};
  loom_dataset *ds = chk(loom_dataset_map(rows_ds(st), map_fn, &m, st), st);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 0), 1);
  ds = chk(loom_dataset_batch(ds, 3, 0, st), st);
  loom_tensor *v[5] = {0};
  next_ok(ds, v, st); /* rows 0, 1, 2 -> {-1} {200, -1} {400, 402, -1} */
  expect_i64(v[0], 6, (int64_t[]){-1, 200, -1, 400, 402, -1});
  expect_i64(v[1], 4, (int64_t[]){0, 1, 3, 6});
  free_vals(v, 5);
  loom_dataset_free(ds);

  const char *want[4][2] = {{"'ids'", "last row split is 2"}, {"'ids/row_splits'", "NULL"}, {"'ids'", "decrease"}, {0}};
  for (int w = 1; w <= 3; w++) {
    m.what = w;
    ds = chk(loom_dataset_map(rows_ds(st), map_fn, &m, st), st);
    loom_code rc = loom_dataset_next(ds, v, st);
    expect_msg(rc, LOOM_INVALID_ARGUMENT, st, "map", want[w - 1][0], want[w - 1][1]);
    /* sticky until reset */
    expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, want[w - 1][0], NULL, NULL);
    free_vals(v, 5);
    loom_dataset_free(ds);
  }
  loom_status_free(st);
}

/* ======================================================================
 * from_ragged_tensors: malformed input
 * ====================================================================== */
static void expect_from_err(const int64_t *splits, int64_t ns, int64_t nvals, const char *a, const char *b) {
  loom_status *st = loom_status_new();
  int64_t vv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  loom_tensor *vals[2] = {t_i64(nvals, vv), t_f32(3, (float[]){1, 2, 3})};
  loom_tensor *sp[2] = {t_i64(ns, splits), NULL};
  const char *names[2] = {"clicks", "y"};
  loom_dataset *ds = loom_dataset_from_ragged_tensors(2, names, (const loom_tensor *const *)vals,
                                                      (const loom_tensor *const *)sp, "y", st);
  cr_assert_null(ds);
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'clicks'", a, b);
  for (int i = 0; i < 2; i++) {
    loom_tensor_free(vals[i]);
    loom_tensor_free(sp[i]);
  }
  loom_status_free(st);
}

Test(ragged, from_ragged_tensors_malformed) {
  expect_from_err((int64_t[]){0, 2, 1, 3}, 4, 3, "decrease at entry 2", "(1 after 2)");
  expect_from_err((int64_t[]){0, 1, 2, 3}, 4, 4, "last row split is 3", "4 values");
  expect_from_err((int64_t[]){1, 1, 2, 3}, 4, 3, "row_splits[0] is 1", NULL);
  expect_from_err((int64_t[]){0, 1, 3}, 3, 3, "'y' has 3 rows", "'clicks' has 2");
  loom_status *st = loom_status_new();
  /* int32 splits, 2-D values, ragged label, name clash, NULL values */
  int32_t s32[4] = {0, 1, 2, 3};
  loom_tensor *v = t_i64(3, (int64_t[]){1, 2, 3}), *s = loom_tensor_from_data(LOOM_I32, 1, (int64_t[]){4}, s32, NULL);
  const char *nm[1] = {"q"};
  cr_assert_null(loom_dataset_from_ragged_tensors(1, nm, (const loom_tensor *const *)&v, (const loom_tensor *const *)&s,
                                                  NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'q'", "int32", "int64");
  loom_tensor_free(s);
  s = t_i64(4, (int64_t[]){0, 1, 2, 3});
  cr_assert_null(loom_dataset_from_ragged_tensors(1, nm, (const loom_tensor *const *)&v, (const loom_tensor *const *)&s,
                                                  "q", st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'q' is ragged", "dense", NULL);
  loom_tensor *v2 = loom_tensor_new(LOOM_I64, 2, (int64_t[]){3, 1}, NULL);
  cr_assert_null(loom_dataset_from_ragged_tensors(1, nm, (const loom_tensor *const *)&v2,
                                                  (const loom_tensor *const *)&s, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'q'", "not 1-D", NULL);
  const char *nm2[2] = {"q", "q/row_splits"};
  loom_tensor *vs[2] = {v, v}, *ss[2] = {s, NULL};
  cr_assert_null(loom_dataset_from_ragged_tensors(2, nm2, (const loom_tensor *const *)vs,
                                                  (const loom_tensor *const *)ss, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'q/row_splits'", NULL, NULL);
  loom_tensor *vn[1] = {NULL};
  cr_assert_null(loom_dataset_from_ragged_tensors(1, nm, (const loom_tensor *const *)vn,
                                                  (const loom_tensor *const *)&s, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'q'", "NULL", NULL);
  /* all dense (row_splits NULL) behaves as from_tensors */
  loom_dataset *ds = chk(loom_dataset_from_ragged_tensors(1, nm, (const loom_tensor *const *)&v, NULL, NULL, st), st);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 0), -1);
  ds = chk(loom_dataset_batch(ds, 2, 0, st), st);
  loom_tensor *o[1] = {0};
  next_ok(ds, o, st);
  expect_shape(o[0], 1, (int64_t[]){2});
  cr_assert_eq(L(o[0])[1], 2);
  free_vals(o, 1);
  loom_dataset_free(ds);
  loom_tensor_free(v);
  loom_tensor_free(v2);
  loom_tensor_free(s);
  loom_status_free(st);
}

/* ======================================================================
 * TFRecord: VarLenFeature / SparseFeature as ragged, hand-encoded records
 * ====================================================================== */
/* A tiny protobuf writer for tf.Example (independent of the library's). */
typedef struct pb {
  uint8_t b[1024];
  size_t n;
} pb;
static void pb_varint(pb *p, uint64_t v) {
  do {
    uint8_t c = v & 0x7F;
    v >>= 7;
    p->b[p->n++] = c | (v ? 0x80 : 0);
  } while (v);
}
static void pb_bytes(pb *p, int field, const void *d, size_t n) {
  pb_varint(p, (uint64_t)field << 3 | 2);
  pb_varint(p, n);
  memcpy(p->b + p->n, d, n);
  p->n += n;
}
/* Feature{int64_list{packed v}} */
static void feat_i64(pb *features, const char *key, int n, const int64_t *v) {
  pb list = {0}, packed = {0}, feat = {0}, entry = {0};
  for (int i = 0; i < n; i++) pb_varint(&packed, (uint64_t)v[i]);
  pb_bytes(&list, 1, packed.b, packed.n);
  pb_bytes(&feat, 3, list.b, list.n); /* Feature.int64_list = 3 */
  pb_bytes(&entry, 1, key, strlen(key));
  pb_bytes(&entry, 2, feat.b, feat.n);
  pb_bytes(features, 1, entry.b, entry.n);
}
static void feat_f32(pb *features, const char *key, int n, const float *v) {
  pb list = {0}, feat = {0}, entry = {0};
  pb_bytes(&list, 1, v, (size_t)n * 4); /* packed fixed32 (little-endian host) */
  pb_bytes(&feat, 2, list.b, list.n);   /* Feature.float_list = 2 */
  pb_bytes(&entry, 1, key, strlen(key));
  pb_bytes(&entry, 2, feat.b, feat.n);
  pb_bytes(features, 1, entry.b, entry.n);
}
static void feat_str(pb *features, const char *key, int n, const char *const *v) {
  pb list = {0}, feat = {0}, entry = {0};
  for (int i = 0; i < n; i++) pb_bytes(&list, 1, v[i], strlen(v[i]));
  pb_bytes(&feat, 1, list.b, list.n); /* Feature.bytes_list = 1 */
  pb_bytes(&entry, 1, key, strlen(key));
  pb_bytes(&entry, 2, feat.b, feat.n);
  pb_bytes(features, 1, entry.b, entry.n);
}
static void write_example(loom_tfrecord_writer *w, const pb *features) {
  pb ex = {0};
  pb_bytes(&ex, 1, features->b, features->n);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_tfrecord_writer_write(w, ex.b, ex.n, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
}

/* r0: tags {7, 300}, s {"a", "bc"}, idx {3, 0, 2}, val {30, 0.5, 20}, y 1
 * r1: (no tags),     s {} (present, empty), (no idx / val), y 2
 * r2: tags {-1},     (no s), idx {1}, val {10}, y 3 */
static char *write_three(char *dir) {
  tu_tmpdir(dir, TU_TMPDIR_CAP, "loom_ragged");
  char *p = path_in(dir, "r.tfrecord");
  loom_status *st = loom_status_new();
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(p, st);
  cr_assert(w, "%s", loom_status_message(st));
  pb f = {0};
  feat_i64(&f, "tags", 2, (int64_t[]){7, 300});
  feat_str(&f, "s", 2, (const char *[]){"a", "bc"});
  feat_i64(&f, "idx", 3, (int64_t[]){3, 0, 2});
  feat_f32(&f, "val", 3, (float[]){30, 0.5f, 20});
  feat_i64(&f, "y", 1, (int64_t[]){1});
  write_example(w, &f);
  f.n = 0;
  feat_str(&f, "s", 0, NULL);
  feat_i64(&f, "y", 1, (int64_t[]){2});
  write_example(w, &f);
  f.n = 0;
  feat_i64(&f, "tags", 1, (int64_t[]){-1});
  feat_i64(&f, "idx", 1, (int64_t[]){1});
  feat_f32(&f, "val", 1, (float[]){10});
  feat_i64(&f, "y", 1, (int64_t[]){3});
  write_example(w, &f);
  cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
  loom_status_free(st);
  return p;
}

Test(ragged, tfrecord_varlen_and_sparse) {
  char dir[TU_TMPDIR_CAP];
  char *p = write_three(dir);
  loom_status *st = loom_status_new();
  loom_feature_spec spec[5] = {
      {.name = "tags", .dtype = LOOM_I64, .kind = LOOM_FEATURE_VAR_LEN, .ragged = 1},
      {.name = "s", .dtype = LOOM_STRING, .varlen = 1, .ragged = 1},
      {.name = "sp", .dtype = LOOM_F32, .kind = LOOM_FEATURE_SPARSE, .index_key = "idx", .value_key = "val",
       .size = 4, .ragged = 1},
      {.name = "y", .dtype = LOOM_I64},
      {.name = "tags_dense", .dtype = LOOM_I64, .varlen = 1}, /* reads nothing: missing = empty */
  };
  const char *paths[1] = {p};
  loom_dataset *ds = chk(loom_dataset_tfrecord(1, paths, 5, spec, "y", st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 8);
  expect_spec(ds, 0, "tags", LOOM_I64, -1);
  expect_spec(ds, 1, "tags/row_splits", LOOM_I64, 2);
  expect_spec(ds, 2, "s", LOOM_STRING, -1);
  expect_spec(ds, 3, "s/row_splits", LOOM_I64, 2);
  expect_spec(ds, 4, "sp", LOOM_F32, -1);
  expect_spec(ds, 5, "sp/row_splits", LOOM_I64, 2);
  cr_assert_str_eq(loom_dataset_component_name(ds, 6), "y");
  cr_assert_eq(loom_dataset_label_index(ds), 6);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 4), 5);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 7), -1); /* the old dense VarLen */
  loom_tensor *v[8] = {0};
  next_ok(ds, v, st);
  expect_i64(v[0], 2, (int64_t[]){7, 300});
  expect_i64(v[1], 2, (int64_t[]){0, 2});
  expect_f32v(v[4], 3, (float[]){0.5f, 20, 30}); /* index order 0, 2, 3 */
  expect_i64(v[5], 2, (int64_t[]){0, 3});
  free_vals(v, 8);
  loom_dataset_free(ds);

  ds = chk(loom_dataset_batch(chk(loom_dataset_tfrecord(1, paths, 5, spec, "y", st), st), 3, 0, st), st);
  expect_spec(ds, 1, "tags/row_splits", LOOM_I64, -1);
  next_ok(ds, v, st);
  expect_i64(v[0], 3, (int64_t[]){7, 300, -1});
  expect_i64(v[1], 4, (int64_t[]){0, 2, 2, 3});
  expect_strs(v[2], 2, (const char *[]){"a", "bc"});
  expect_i64(v[3], 4, (int64_t[]){0, 2, 2, 2});
  expect_f32v(v[4], 4, (float[]){0.5f, 20, 30, 10});
  expect_i64(v[5], 4, (int64_t[]){0, 3, 3, 4});
  expect_i64(v[6], 3, (int64_t[]){1, 2, 3});
  expect_shape(v[7], 2, (int64_t[]){3, 0}); /* the old dense form still pads */
  expect_end(ds, v, st);
  free_vals(v, 8);
  loom_dataset_free(ds);

  /* already_sorted keeps the given order; the dense form is unchanged */
  spec[2].already_sorted = 1;
  ds = chk(loom_dataset_tfrecord(1, paths, 4, spec, NULL, st), st);
  next_ok(ds, v, st);
  expect_f32v(v[4], 3, (float[]){30, 0.5f, 20});
  free_vals(v, 8);
  loom_dataset_free(ds);
  spec[2].already_sorted = 0;
  spec[2].ragged = 0;
  ds = chk(loom_dataset_tfrecord(1, paths, 4, spec, NULL, st), st);
  expect_spec(ds, 4, "sp", LOOM_F32, 4);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 4), -1);
  next_ok(ds, v, st);
  expect_f32v(v[4], 4, (float[]){0.5f, 0, 20, 30});
  free_vals(v, 8);
  loom_dataset_free(ds);
  spec[2].ragged = 1;

  /* errors: ragged on a FixedLen entry, a ragged label, an index out of range */
  loom_feature_spec bad = {.name = "y", .dtype = LOOM_I64, .ragged = 1};
  cr_assert_null(loom_dataset_tfrecord(1, paths, 1, &bad, NULL, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'y'", "ragged", "FixedLenFeature");
  cr_assert_null(loom_dataset_tfrecord(1, paths, 4, spec, "tags", st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'tags'", "ragged", "dense");
  spec[2].size = 3;
  ds = chk(loom_dataset_tfrecord(1, paths, 3, spec, NULL, st), st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "record 0", "'sp'", "index 3");
  free_vals(v, 8);
  loom_dataset_free(ds);
  /* a list of the wrong type names the feature */
  loom_feature_spec wrong = {.name = "tags", .dtype = LOOM_STRING, .varlen = 1, .ragged = 1};
  ds = chk(loom_dataset_tfrecord(1, paths, 1, &wrong, NULL, st), st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "record 0", "'tags'", "int64_list");
  free_vals(v, 2);
  loom_dataset_free(ds);
  loom_status_free(st);
  free(p);
  tu_rmtree(dir);
}

/* ======================================================================
 * CSV multi-valued cells
 * ====================================================================== */
static const char *k_csv =
    "id,tags,nums,w,y\n"
    "1,a|b|c,10;20,0.5 1.5,1\n"
    "2,,,,2\n"
    "3,\"x,y|z\",-7,2,3\n"
    "4,|q,5;6;7,,4\n";

static loom_dataset *csv_ds(const char *path, loom_status *st) {
  loom_csv_column cols[5] = {
      {.dtype = LOOM_I64, .select = 1},
      {.dtype = LOOM_STRING, .select = 1, .separator = '|'},
      {.dtype = LOOM_I64, .select = 1, .separator = ';'},
      {.dtype = LOOM_F32, .select = 1, .separator = ' '},
      {.dtype = LOOM_F32, .select = 1},
  };
  loom_csv_options o = {.struct_size = sizeof(loom_csv_options), .header = 1, .delimiter = ',', .ncolumns = 5, .columns = cols, .label_name = "y"};
  return loom_dataset_csv(1, &path, &o, st);
}

Test(ragged, csv_multi_valued_cells) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_ragged");
  char *p = path_in(dir, "m.csv");
  tu_write_file(p, k_csv, strlen(k_csv));
  loom_status *st = loom_status_new();
  loom_dataset *ds = chk(csv_ds(p, st), st);
  cr_assert_eq(loom_dataset_num_components(ds), 8);
  cr_assert_str_eq(loom_dataset_component_name(ds, 0), "id");
  expect_spec(ds, 1, "tags", LOOM_STRING, -1);
  expect_spec(ds, 2, "tags/row_splits", LOOM_I64, 2);
  expect_spec(ds, 3, "nums", LOOM_I64, -1);
  expect_spec(ds, 5, "w", LOOM_F32, -1);
  cr_assert_eq(loom_dataset_label_index(ds), 7);
  cr_assert_eq(loom_dataset_component_row_splits(ds, 3), 4);
  ds = chk(loom_dataset_batch(ds, 3, 0, st), st);
  loom_tensor *v[8] = {0};
  next_ok(ds, v, st);
  expect_i64(v[0], 3, (int64_t[]){1, 2, 3});
  expect_strs(v[1], 5, (const char *[]){"a", "b", "c", "x,y", "z"});
  expect_i64(v[2], 4, (int64_t[]){0, 3, 3, 5});
  expect_i64(v[3], 3, (int64_t[]){10, 20, -7});
  expect_i64(v[4], 4, (int64_t[]){0, 2, 2, 3});
  expect_f32v(v[5], 3, (float[]){0.5f, 1.5f, 2});
  expect_i64(v[6], 4, (int64_t[]){0, 2, 2, 3});
  expect_f32v(v[7], 3, (float[]){1, 2, 3});
  next_ok(ds, v, st);
  expect_strs(v[1], 2, (const char *[]){"", "q"}); /* an empty string item */
  expect_i64(v[2], 2, (int64_t[]){0, 2});
  expect_i64(v[3], 3, (int64_t[]){5, 6, 7});
  expect_i64(v[4], 2, (int64_t[]){0, 3});
  expect_f32v(v[5], 0, NULL);
  expect_i64(v[6], 2, (int64_t[]){0, 0});
  expect_end(ds, v, st);
  free_vals(v, 8);
  loom_dataset_free(ds);

  /* a non-number item and an empty int item name file:line and the column */
  const char *bad = "id,tags,nums,w,y\n1,a,1;x2,1,1\n";
  tu_write_file(p, bad, strlen(bad));
  ds = chk(csv_ds(p, st), st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "m.csv:2", "column 'nums'", "'x2'");
  free_vals(v, 8);
  loom_dataset_free(ds);
  const char *bad2 = "id,tags,nums,w,y\n1,a,1;2,1,1\n2,a,1;;2,1,1\n";
  tu_write_file(p, bad2, strlen(bad2));
  ds = chk(csv_ds(p, st), st);
  next_ok(ds, v, st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, "m.csv:3", "column 'nums'", "is empty");
  free_vals(v, 8);
  loom_dataset_free(ds);

  /* option errors: separator = delimiter, a default on a multi-valued
   * column, a multi-valued label */
  loom_csv_column c1[2] = {{.name = "a", .dtype = LOOM_I64, .select = 1, .separator = ','},
                           {.name = "b", .dtype = LOOM_I64, .select = 1}};
  loom_csv_options o = {.struct_size = sizeof(loom_csv_options), .header = 1, .delimiter = ',', .ncolumns = 2, .columns = c1};
  const char *pp = p;
  cr_assert_null(loom_dataset_csv(1, &pp, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "columns[0] a", "separator", "delimiter");
  c1[0].separator = '|';
  c1[0].default_value = "0";
  cr_assert_null(loom_dataset_csv(1, &pp, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "columns[0] a", "default_value", NULL);
  c1[0].default_value = NULL;
  tu_write_file(p, "a,b\n1|2,3\n", 10);
  o.label_name = "a";
  cr_assert_null(loom_dataset_csv(1, &pp, &o, st));
  expect_msg(loom_status_code(st), LOOM_INVALID_ARGUMENT, st, "'a'", "multi-valued", "dense");
  loom_status_free(st);
  free(p);
  tu_rmtree(dir);
}
