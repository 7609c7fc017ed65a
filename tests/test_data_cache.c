/* loom_dataset_cache (loom_data.h): TF's Dataset.cache() in memory and to a
 * file. The input is a map that counts its calls, so every test checks how
 * often the input was read as well as what came out. */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "data_util.h"

#define N 6

static int map_calls;
static loom_code count_map(void *user, int n, loom_tensor **values, loom_status *st) {
  (void)n;
  (void)st;
  (*(int *)user)++;
  float *x = loom_tensor_data(values[0]);
  x[0] = x[0] * 2 + 1; /* visible in the output: the map ran on it */
  return LOOM_OK;
}

/* x f32 [N] {0.5, 1.5, ...}, s string "row<i>", counted by *calls. */
static loom_dataset *source(int *calls, const char *xname, loom_status *st) {
  float x[N];
  char buf[N][16];
  int64_t n = N;
  loom_tensor *s = loom_tensor_new(LOOM_STRING, 1, &n, NULL);
  for (int i = 0; i < N; i++) {
    x[i] = (float)i + 0.5f;
    snprintf(buf[i], sizeof buf[i], "row%d", i);
    loom_tensor_set_string(s, i, buf[i], strlen(buf[i]), NULL);
  }
  loom_tensor *xt = loom_tensor_from_data(LOOM_F32, 1, &n, x, NULL);
  const char *names[2] = {xname, "s"};
  const loom_tensor *arr[2] = {xt, s};
  loom_dataset *ds = chk(loom_dataset_from_tensors(2, names, arr, NULL, st), st);
  loom_tensor_free(xt);
  loom_tensor_free(s);
  return chk(loom_dataset_map(ds, count_map, calls, st), st);
}

/* One full pass: checks every element (x = 2 (i + 0.5) + 1, s = "row<i>")
 * and the end. */
static void full_pass(loom_dataset *ds, loom_status *st) {
  loom_tensor *v[2] = {NULL, NULL};
  for (int i = 0; i < N; i++) {
    next_ok(ds, v, st);
    cr_assert_eq(F(v[0])[0], 2 * ((float)i + 0.5f) + 1, "element %d: x %g", i, F(v[0])[0]);
    char want[16];
    snprintf(want, sizeof want, "row%d", i);
    cr_assert_str_eq(loom_tensor_get_string(v[1], 0, NULL), want);
  }
  expect_end(ds, v, st);
  free_vals(v, 2);
}

static void partial_pass(loom_dataset *ds, int k, loom_status *st) {
  loom_tensor *v[2] = {NULL, NULL};
  for (int i = 0; i < k; i++) next_ok(ds, v, st);
  free_vals(v, 2);
}

static int exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

Test(cache, memory_reads_the_input_once) {
  loom_status *st = loom_status_new();
  map_calls = 0;
  loom_dataset *ds = chk(loom_dataset_cache(source(&map_calls, "x", st), NULL, st), st);
  for (int epoch = 0; epoch < 3; epoch++) {
    full_pass(ds, st);
    cr_assert_eq(map_calls, N, "epoch %d: the input was read %d times", epoch, map_calls);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  loom_dataset_free(ds);
  /* "" is memory too; under repeat + batch the values of every epoch are
   * those of the first */
  map_calls = 0;
  ds = chk(loom_dataset_cache(source(&map_calls, "x", st), "", st), st);
  ds = chk(loom_dataset_batch(chk(loom_dataset_repeat(ds, 3, st), st), 4, 0, st), st);
  loom_tensor *v[2] = {NULL, NULL};
  int64_t seen = 0;
  while (loom_dataset_next(ds, v, st) == LOOM_OK)
    for (int64_t j = 0; j < loom_tensor_dim(v[0], 0); j++, seen++)
      cr_assert_eq(F(v[0])[j], 2 * ((float)(seen % N) + 0.5f) + 1);
  cr_assert_eq(seen, 3 * N);
  cr_assert_eq(map_calls, N);
  free_vals(v, 2);
  loom_dataset_free(ds);
  loom_status_free(st);
}

Test(cache, memory_partial_pass_is_discarded) {
  loom_status *st = loom_status_new();
  map_calls = 0;
  loom_dataset *ds = chk(loom_dataset_cache(source(&map_calls, "x", st), NULL, st), st);
  partial_pass(ds, 2, st);
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  full_pass(ds, st); /* from the input again, from its start */
  cr_assert_eq(map_calls, 2 + N);
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  full_pass(ds, st);
  cr_assert_eq(map_calls, 2 + N);
  loom_dataset_free(ds);
  loom_status_free(st);
}

Test(cache, file_is_reused_by_a_new_dataset) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_cache");
  char *f = path_in(dir, "c"), *partial = path_in(dir, "c.partial"), *lock = path_in(dir, "c.lockfile");
  int calls1 = 0, calls2 = 0;
  loom_dataset *ds = chk(loom_dataset_cache(source(&calls1, "x", st), f, st), st);
  partial_pass(ds, 3, st);
  cr_assert(exists(partial) && exists(lock) && !exists(f), "the pass writes the partial file under the lock");
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  cr_assert(!exists(partial) && !exists(lock) && !exists(f), "a stopped pass leaves nothing");
  full_pass(ds, st);
  cr_assert(exists(f) && !exists(partial) && !exists(lock));
  cr_assert_eq(calls1, 3 + N);
  cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  full_pass(ds, st);
  cr_assert_eq(calls1, 3 + N);
  loom_dataset_free(ds);
  /* a new dataset object over the same file never reads its input */
  ds = chk(loom_dataset_cache(source(&calls2, "x", st), f, st), st);
  for (int epoch = 0; epoch < 2; epoch++) {
    full_pass(ds, st);
    cr_assert_eq(loom_dataset_reset(ds, st), LOOM_OK);
  }
  cr_assert_eq(calls2, 0);
  loom_dataset_free(ds);
  /* a dataset freed in the middle of writing leaves no file */
  char *g = path_in(dir, "g"), *gpartial = path_in(dir, "g.partial"), *glock = path_in(dir, "g.lockfile");
  ds = chk(loom_dataset_cache(source(&calls2, "x", st), g, st), st);
  partial_pass(ds, 1, st);
  loom_dataset_free(ds);
  cr_assert(!exists(g) && !exists(gpartial) && !exists(glock));
  free(g);
  free(gpartial);
  free(glock);
  free(f);
  free(partial);
  free(lock);
  tu_rmtree(dir);
  loom_status_free(st);
}

Test(cache, second_writer_is_refused_and_a_dead_writers_lock_taken_over) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_cache");
  char *f = path_in(dir, "c"), *lock = path_in(dir, "c.lockfile");
  int c1 = 0, c2 = 0;
  loom_dataset *a = chk(loom_dataset_cache(source(&c1, "x", st), f, st), st);
  loom_dataset *b = chk(loom_dataset_cache(source(&c2, "x", st), f, st), st);
  partial_pass(a, 2, st);
  loom_tensor *v[2] = {NULL, NULL};
  expect_msg(loom_dataset_next(b, v, st), LOOM_ALREADY_EXISTS, st, "another iterator is writing the cache", lock,
             NULL);
  cr_assert(exists(lock), "the refused dataset leaves the writer's lock alone");
  loom_tensor *rest[2] = {NULL, NULL};
  for (int i = 2; i < N; i++) next_ok(a, rest, st);
  expect_end(a, rest, st);
  free_vals(rest, 2);
  cr_assert_eq(loom_dataset_reset(b, st), LOOM_OK);
  full_pass(b, st); /* now reads the finished file */
  cr_assert_eq(c2, 0);
  loom_dataset_free(a);
  loom_dataset_free(b);
  free_vals(v, 2);
  /* a lock file naming a process that has exited is taken over */
  char *g = path_in(dir, "g"), *glock = path_in(dir, "g.lockfile");
  pid_t child = fork();
  if (child == 0) _exit(0);
  cr_assert(child > 0);
  waitpid(child, NULL, 0);
  char pid[32];
  snprintf(pid, sizeof pid, "%ld\n", (long)child);
  tu_write_file(glock, pid, strlen(pid));
  a = chk(loom_dataset_cache(source(&c1, "x", st), g, st), st);
  full_pass(a, st);
  cr_assert(exists(g) && !exists(glock));
  loom_dataset_free(a);
  free(g);
  free(glock);
  free(f);
  free(lock);
  tu_rmtree(dir);
  loom_status_free(st);
}

static void write_cache(const char *f, loom_status *st) {
  int calls = 0;
  loom_dataset *ds = chk(loom_dataset_cache(source(&calls, "x", st), f, st), st);
  full_pass(ds, st);
  loom_dataset_free(ds);
}


/* Like TF, a bad cache file is an error (DATA_LOSS naming the file), not
 * silently rebuilt; the input is not read. */
Test(cache, truncated_or_corrupt_file_is_data_loss_naming_it) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_cache");
  char *f = path_in(dir, "c");
  write_cache(f, st);
  size_t len = 0;
  char *bytes = tu_read_file(f, &len);
  cr_assert(bytes);
  long n = (long)len;
  loom_tensor *v[2] = {NULL, NULL};
  struct {
    long keep;
    long flip;
    const char *why;
  } cases[] = {{n - 9, -1, "truncated"}, {n - 33, -1, "without its trailer"}, {n, n / 2, "bit flip"}, {0, -1, "empty"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char *b = malloc((size_t)n);
    memcpy(b, bytes, (size_t)n);
    if (cases[k].flip >= 0) b[cases[k].flip] ^= 0x10;
    tu_write_file(f, b, (size_t)cases[k].keep);
    free(b);
    int calls = 0;
    loom_dataset *ds = chk(loom_dataset_cache(source(&calls, "x", st), f, st), st);
    loom_code rc = LOOM_OK;
    for (int i = 0; i <= N && rc == LOOM_OK; i++) rc = loom_dataset_next(ds, v, st);
    cr_assert_eq(rc, LOOM_DATA_LOSS, "%s: %s: %s", cases[k].why, loom_code_name(rc), loom_status_message(st));
    cr_assert(strstr(loom_status_message(st), f), "%s: %s", cases[k].why, loom_status_message(st));
    cr_assert_eq(calls, 0);
    loom_dataset_free(ds);
  }
  /* a complete file made for other components */
  tu_write_file(f, bytes, (size_t)n);
  int calls = 0;
  loom_dataset *ds = chk(loom_dataset_cache(source(&calls, "y", st), f, st), st);
  expect_msg(loom_dataset_next(ds, v, st), LOOM_INVALID_ARGUMENT, st, f, "other components", NULL);
  loom_dataset_free(ds);
  free_vals(v, 2);
  free(bytes);
  free(f);
  tu_rmtree(dir);
  loom_status_free(st);
}

/* Ragged pairs go through the file unchanged. */
Test(cache, ragged_components_round_trip_through_the_file) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_cache");
  char *f = path_in(dir, "r");
  int64_t nv = 5, ns = 4;
  const int64_t vals[5] = {10, 20, 30, 40, 50}, splits[4] = {0, 2, 2, 5};
  loom_tensor *tv = loom_tensor_from_data(LOOM_I64, 1, &nv, vals, NULL);
  loom_tensor *ts = loom_tensor_from_data(LOOM_I64, 1, &ns, splits, NULL);
  const char *names[1] = {"ids"};
  const loom_tensor *va[1] = {tv}, *sa[1] = {ts};
  for (int round = 0; round < 2; round++) { /* write, then read the file */
    loom_dataset *ds = chk(loom_dataset_from_ragged_tensors(1, names, va, sa, NULL, st), st);
    ds = chk(loom_dataset_cache(ds, f, st), st);
    loom_tensor *v[2] = {NULL, NULL};
    for (int r = 0; r < 3; r++) {
      next_ok(ds, v, st);
      int64_t k = splits[r + 1] - splits[r];
      cr_assert_eq(loom_tensor_numel(v[0]), k, "round %d row %d", round, r);
      for (int64_t j = 0; j < k; j++) cr_assert_eq(L(v[0])[j], vals[splits[r] + j]);
      cr_assert_eq(L(v[1])[0], 0);
      cr_assert_eq(L(v[1])[1], k);
    }
    expect_end(ds, v, st);
    free_vals(v, 2);
    loom_dataset_free(ds);
    cr_assert(exists(f));
  }
  loom_tensor_free(tv);
  loom_tensor_free(ts);
  free(f);
  tu_rmtree(dir);
  loom_status_free(st);
}

/* Records with valid CRCs but contents no cache writes (short, wrong dtype
 * or rank, a string longer than its record, an unknown tag, a trailer with
 * the wrong count): DATA_LOSS naming the file, never a crash or a read past
 * the record. */
static void put(uint8_t *b, size_t *n, const void *p, size_t k) {
  memcpy(b + *n, p, k);
  *n += k;
}
Test(cache, bad_records_with_valid_crcs_are_data_loss) {
  loom_status *st = loom_status_new();
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_cache");
  char *good = path_in(dir, "good"), *f = path_in(dir, "bad");
  write_cache(good, st);
  /* the header record of a real cache file: u64 length, u32 crc, data */
  size_t glen = 0;
  uint8_t *gb = tu_read_file(good, &glen);
  uint64_t hlen;
  memcpy(&hlen, gb, 8);
  cr_assert(hlen > 9 && 12 + hlen < glen);
  const uint8_t f32 = (uint8_t)LOOM_F32, str = (uint8_t)LOOM_STRING, i64 = (uint8_t)LOOM_I64, zero = 0, big = 200;
  const float one = 1;
  const uint64_t huge = (uint64_t)1 << 60, two = 2;
  const int64_t wrong_count = 5;
  for (int k = 0; k < 8; k++) {
    uint8_t rec[64];
    size_t n = 0;
    if (k == 6) {
      put(rec, &n, "T", 1);
      put(rec, &n, "LMCACHE1", 8);
      put(rec, &n, &wrong_count, 8);
    } else {
      put(rec, &n, k == 5 ? "Z" : "E", 1);
      if (k >= 1) put(rec, &n, k == 1 ? &i64 : &f32, 1); /* 1: the wrong dtype */
      if (k >= 2) put(rec, &n, k == 2 ? &big : &zero, 1); /* 2: rank 200 */
      if (k >= 3 && k != 7) put(rec, &n, &one, 4);
      if (k >= 4) {
        put(rec, &n, &str, 1);
        put(rec, &n, &zero, 1);
        put(rec, &n, k == 4 ? &huge : &two, 8); /* 4: a string longer than the record */
        if (k != 4) put(rec, &n, "ab", 2);
      }
      if (k == 7) put(rec, &n, "extra", 5); /* 7: the float is missing, the rest misread */
    }
    loom_tfrecord_writer *w = loom_tfrecord_writer_new(f, st);
    cr_assert(w, "%s", loom_status_message(st));
    cr_assert_eq(loom_tfrecord_writer_write(w, gb + 12, (size_t)hlen, st), LOOM_OK);
    cr_assert_eq(loom_tfrecord_writer_write(w, rec, n, st), LOOM_OK);
    cr_assert_eq(loom_tfrecord_writer_close(w, st), LOOM_OK);
    int calls = 0;
    loom_dataset *ds = chk(loom_dataset_cache(source(&calls, "x", st), f, st), st);
    loom_tensor *v[2] = {NULL, NULL};
    loom_code rc = loom_dataset_next(ds, v, st);
    cr_assert_eq(rc, LOOM_DATA_LOSS, "case %d: %s: %s", k, loom_code_name(rc), loom_status_message(st));
    cr_assert(strstr(loom_status_message(st), f), "case %d: %s", k, loom_status_message(st));
    free_vals(v, 2);
    loom_dataset_free(ds);
  }
  free(gb);
  free(good);
  free(f);
  tu_rmtree(dir);
  loom_status_free(st);
}
