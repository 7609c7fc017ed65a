/* Checkpoints: CRC32C, the file format (round trips, corruption and
 * truncation -> DATA_LOSS), tf.train.Saver semantics (keep_max, the
 * "checkpoint" state file, latest_checkpoint, restore errors) and
 * train N + save + restore + train M == train N + M, bitwise. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include "test_util.h"
#include "base/crc32c.h"

/* ---------------------------------------------------------------- helpers */
static int count_files(const char *dir, const char *substr) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, substr)) n++;
  closedir(d);
  return n;
}
static loom_session *new_session(loom_graph *g) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "graph error: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s);
  loom_status_free(st);
  return s;
}
static void run_target(loom_session *s, loom_node *t) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &t, 1, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
}
static loom_tensor *read_var(loom_session *s, const char *name) {
  loom_status *st = loom_status_new();
  loom_tensor *t = NULL;
  cr_assert_eq(loom_session_read_variable(s, name, &t, st), LOOM_OK, "%s: %s", name, loom_status_message(st));
  loom_status_free(st);
  return t;
}
static int same_bits(const loom_tensor *a, const loom_tensor *b) {
  if (loom_tensor_dtype(a) != loom_tensor_dtype(b) || loom_tensor_ndim(a) != loom_tensor_ndim(b)) return 0;
  for (int i = 0; i < loom_tensor_ndim(a); i++)
    if (loom_tensor_dim(a, i) != loom_tensor_dim(b, i)) return 0;
  return loom_tensor_nbytes(a) == loom_tensor_nbytes(b) &&
         !memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b), loom_tensor_nbytes(a));
}

/* ======================================================================
 * CRC32C
 * ====================================================================== */
Test(crc32c, known_vectors_hw_and_table) {
  uint8_t zeros[32] = {0}, ones[32], inc[32];
  memset(ones, 0xff, sizeof ones);
  for (int i = 0; i < 32; i++) inc[i] = (uint8_t)i;
  for (int hw = 1; hw >= 0; hw--) {
    loom__crc32c_use_hw(hw);
    cr_assert_eq(loom__crc32c("123456789", 9), 0xE3069283u, "hw=%d", hw);
    cr_assert_eq(loom__crc32c(zeros, 32), 0x8A9136AAu);
    cr_assert_eq(loom__crc32c(ones, 32), 0x62A8AB43u);
    cr_assert_eq(loom__crc32c(inc, 32), 0x46DD794Eu);
    cr_assert_eq(loom__crc32c("", 0), 0u);
    /* extend == one shot, at every split and misalignment */
    uint8_t buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (uint8_t)(i * 7 + 3);
    uint32_t whole = loom__crc32c(buf, 300);
    for (int k = 0; k <= 300; k += 13)
      cr_assert_eq(loom__crc32c_extend(loom__crc32c(buf, (size_t)k), buf + k, (size_t)(300 - k)), whole);
    cr_assert_eq(loom__crc32c_unmask(loom__crc32c_mask(whole)), whole);
    cr_assert_eq(loom__crc32c_masked(buf, 300), loom__crc32c_mask(whole));
    uint32_t c = 0x12345678u;
    cr_assert_eq(loom__crc32c_mask(c), (((c >> 15) | (c << 17)) + 0xa282ead8u));
  }
  loom__crc32c_use_hw(1);
  /* hardware and table agree on random data */
  uint8_t big[4099];
  for (int i = 0; i < (int)sizeof big; i++) big[i] = (uint8_t)(rand() & 0xff);
  uint32_t a = loom__crc32c(big + 1, sizeof big - 1);
  loom__crc32c_use_hw(0);
  uint32_t b = loom__crc32c(big + 1, sizeof big - 1);
  loom__crc32c_use_hw(1);
  cr_assert_eq(a, b);
}

/* ======================================================================
 * A small model with variables of every dtype
 * ====================================================================== */
typedef struct model {
  loom_graph *g;
  loom_node *init;
  loom_variable *f32, *f64, *i32, *i64, *u8, *b, *scalar, *empty;
} model;

static model build_model(int64_t seed) {
  model m;
  m.g = loom_graph_new();
  loom_graph_set_random_seed(m.g, seed);
  int64_t d[2] = {7, 5}, d1[1] = {6}, dz[2] = {0, 3};
  loom_initializer c3 = loom_init_constant(3), c1 = loom_init_constant(1);
  loom_variable_scope_push(m.g, "dense", LOOM_REUSE_NONE);
  m.f32 = loom_get_variable(m.g, "kernel", LOOM_F32, 2, d, NULL, 1);
  m.f64 = loom_get_variable(m.g, "bias64", LOOM_F64, 1, d1, NULL, 1);
  loom_variable_scope_pop(m.g);
  m.i32 = loom_get_variable(m.g, "counts", LOOM_I32, 1, d1, &c3, 0);
  m.i64 = loom_get_or_create_global_step(m.g);
  m.u8 = loom_get_variable(m.g, "bytes", LOOM_U8, 1, d1, &c3, 0);
  m.b = loom_get_variable(m.g, "flags", LOOM_BOOL, 1, d1, &c1, 0);
  loom_initializer rn = loom_init_random_normal(0, 1, 5);
  m.scalar = loom_get_variable(m.g, "scale", LOOM_F32, 0, NULL, &rn, 1);
  m.empty = loom_get_variable(m.g, "empty", LOOM_F32, 2, dz, NULL, 1);
  m.init = loom_global_variables_initializer(m.g);
  cr_assert_eq(loom_graph_status(m.g, NULL), LOOM_OK);
  return m;
}

static const char *const VAR_NAMES[] = {"dense/kernel", "dense/bias64", "counts", "global_step",
                                        "bytes",        "flags",        "scale",  "empty"};
#define NVARS 8

/* makes every variable's value distinctive */
static void scramble(loom_session *s, int salt) {
  for (int k = 0; k < NVARS; k++) {
    loom_tensor *t = read_var(s, VAR_NAMES[k]);
    uint8_t *p = loom_tensor_data(t);
    size_t n = loom_tensor_nbytes(t);
    if (loom_tensor_dtype(t) == LOOM_BOOL)
      for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i + (size_t)salt) & 1);
    else
      for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(p[i] * 31 + i * 17 + (size_t)salt * 101 + 7);
    loom_status *st = loom_status_new();
    cr_assert_eq(loom_session_assign_variable(s, VAR_NAMES[k], t, st), LOOM_OK, "%s", loom_status_message(st));
    loom_status_free(st);
    loom_tensor_free(t);
  }
}

/* saves a scrambled model into dir; returns the checkpoint path (malloc'd)
 * and the saved values */
static char *save_model(const char *dir, loom_tensor **vals) {
  model m = build_model(1);
  loom_session *s = new_session(m.g);
  run_target(s, m.init);
  scramble(s, 1);
  loom_status *st = loom_status_new();
  loom_saver *sv = loom_saver_new(m.g, 0, NULL, 5, st);
  cr_assert(sv);
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s/model.ckpt", dir);
  const char *p = loom_saver_save(sv, s, prefix, 100, st);
  cr_assert(p, "%s", loom_status_message(st));
  char *path = strdup(p);
  for (int k = 0; vals && k < NVARS; k++) vals[k] = read_var(s, VAR_NAMES[k]);
  loom_saver_free(sv);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(m.g);
  return path;
}

Test(checkpoint, round_trip_bitwise_all_dtypes) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_ckpt");
  loom_tensor *saved[NVARS];
  char *path = save_model(dir, saved);
  char want[512];
  snprintf(want, sizeof want, "%s/model.ckpt-100", dir);
  cr_assert_str_eq(path, want);
  cr_assert_eq(count_files(dir, ".tmp-"), 0, "temporary file left behind");
  /* restore into a model rebuilt from scratch in a new graph */
  model m = build_model(2);
  loom_session *s = new_session(m.g);
  loom_status *st = loom_status_new();
  loom_saver *sv = loom_saver_new(m.g, 0, NULL, 5, st);
  cr_assert_eq(loom_saver_restore(sv, s, path, st), LOOM_OK, "%s", loom_status_message(st));
  for (int k = 0; k < NVARS; k++) {
    loom_tensor *t = read_var(s, VAR_NAMES[k]);
    cr_assert(same_bits(t, saved[k]), "%s differs after restore", VAR_NAMES[k]);
    loom_tensor_free(t);
  }
  /* restored variables count as initialised: a run reading them works */
  loom_output o = loom_variable_output(m.f32);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &o, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert(same_bits(out, saved[0]));
  loom_tensor_free(out);
  /* restore from the directory (its latest checkpoint) */
  loom_session *s2 = new_session(m.g);
  cr_assert_eq(loom_saver_restore(sv, s2, dir, st), LOOM_OK, "%s", loom_status_message(st));
  loom_tensor *t = read_var(s2, "dense/kernel");
  cr_assert(same_bits(t, saved[0]));
  loom_tensor_free(t);
  loom_session_free(s2);
  /* reading without a model */
  t = NULL;
  cr_assert_eq(loom_checkpoint_read_tensor(path, "dense/bias64", &t, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert(same_bits(t, saved[1]));
  loom_tensor_free(t);
  cr_assert_eq(loom_checkpoint_read_tensor(path, "nope", &t, st), LOOM_NOT_FOUND);
  cr_assert(strstr(loom_status_message(st), "Key nope not found in checkpoint"), "%s", loom_status_message(st));
  for (int k = 0; k < NVARS; k++) loom_tensor_free(saved[k]);
  loom_saver_free(sv);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(m.g);
  free(path);
  tu_rmtree(dir);
}

typedef struct listed {
  int n;
  char names[16][64];
  int ndim[16];
  int64_t d0[16];
  loom_dtype dt[16];
} listed;
static int list_cb(const char *name, loom_dtype dtype, int ndim, const int64_t *dims, void *u) {
  listed *l = u;
  snprintf(l->names[l->n], 64, "%s", name);
  l->ndim[l->n] = ndim;
  l->d0[l->n] = ndim ? dims[0] : -1;
  l->dt[l->n] = dtype;
  l->n++;
  return 0;
}

Test(checkpoint, list_variables_and_write_api) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_ckpt");
  char *path = save_model(dir, NULL);
  listed l = {0};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_checkpoint_list_variables(path, list_cb, &l, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(l.n, NVARS);
  cr_assert_str_eq(l.names[0], "dense/kernel");
  cr_assert_eq(l.ndim[0], 2);
  cr_assert_eq(l.d0[0], 7);
  cr_assert_eq(l.dt[0], LOOM_F32);
  cr_assert_str_eq(l.names[3], "global_step");
  cr_assert_eq(l.dt[3], LOOM_I64);
  cr_assert_eq(l.ndim[3], 0);
  /* loom_checkpoint_write: standalone tensors */
  char p2[512];
  snprintf(p2, sizeof p2, "%s/raw", dir);
  int64_t d[1] = {3};
  loom_tensor *a = loom_tensor_from_data(LOOM_F32, 1, d, (float[3]){1, 2, 3}, NULL);
  loom_tensor *b = loom_tensor_scalar_i64(-5);
  const char *names[2] = {"a", "b"};
  const loom_tensor *ts[2] = {a, b};
  cr_assert_eq(loom_checkpoint_write(p2, 2, names, ts, st), LOOM_OK, "%s", loom_status_message(st));
  loom_tensor *r = NULL;
  cr_assert_eq(loom_checkpoint_read_tensor(p2, "b", &r, st), LOOM_OK);
  cr_assert(same_bits(r, b));
  loom_tensor_free(r);
  const char *dup[2] = {"a", "a"};
  cr_assert_eq(loom_checkpoint_write(p2, 2, dup, ts, st), LOOM_INVALID_ARGUMENT);
  /* not a checkpoint */
  tu_write_file(p2, "hello world, this is not a checkpoint file at all", 50);
  cr_assert_eq(loom_checkpoint_read_tensor(p2, "a", &r, st), LOOM_DATA_LOSS);
  cr_assert(strstr(loom_status_message(st), "bad magic"), "%s", loom_status_message(st));
  snprintf(p2, sizeof p2, "%s/missing", dir);
  cr_assert_eq(loom_checkpoint_list_variables(p2, list_cb, &l, st), LOOM_NOT_FOUND);
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_status_free(st);
  free(path);
  tu_rmtree(dir);
}

/* ======================================================================
 * Damage
 * ====================================================================== */
Test(checkpoint, every_corrupted_byte_is_data_loss) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_ckpt");
  loom_tensor *saved[NVARS];
  char *path = save_model(dir, saved);
  size_t n;
  char *orig = tu_read_file(path, &n);
  cr_assert(n > 200 && n < 4096, "size %zu", n);
  model m = build_model(3);
  loom_session *s = new_session(m.g);
  run_target(s, m.init);
  loom_tensor *before = read_var(s, "dense/kernel");
  loom_status *st = loom_status_new();
  loom_saver *sv = loom_saver_new(m.g, 0, NULL, 0, st);
  char *buf = malloc(n);
  for (size_t i = 0; i < n; i++) {
    memcpy(buf, orig, n);
    buf[i] ^= (char)(1 << (i % 8));
    tu_write_file(path, buf, n);
    loom_code rc = loom_saver_restore(sv, s, path, st);
    cr_assert_eq(rc, LOOM_DATA_LOSS, "byte %zu: %s %s", i, loom_code_name(rc), loom_status_message(st));
    cr_assert(strstr(loom_status_message(st), path), "%s", loom_status_message(st));
    /* a single tensor: DATA_LOSS, or the right value when the damage is elsewhere */
    loom_tensor *t = NULL;
    rc = loom_checkpoint_read_tensor(path, "dense/kernel", &t, st);
    cr_assert(rc == LOOM_DATA_LOSS || (rc == LOOM_OK && same_bits(t, saved[0])), "byte %zu: %s", i,
              loom_code_name(rc));
    loom_tensor_free(t);
    listed l = {0};
    rc = loom_checkpoint_list_variables(path, list_cb, &l, st);
    cr_assert(rc == LOOM_DATA_LOSS || (rc == LOOM_OK && l.n == NVARS), "byte %zu", i);
  }
  /* a failed restore wrote nothing */
  loom_tensor *after = read_var(s, "dense/kernel");
  cr_assert(same_bits(before, after));
  loom_tensor_free(before);
  loom_tensor_free(after);
  for (int k = 0; k < NVARS; k++) loom_tensor_free(saved[k]);
  free(buf);
  free(orig);
  loom_saver_free(sv);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(m.g);
  free(path);
  tu_rmtree(dir);
}

Test(checkpoint, every_truncation_is_data_loss) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_ckpt");
  char *path = save_model(dir, NULL);
  size_t n;
  char *orig = tu_read_file(path, &n);
  model m = build_model(3);
  loom_session *s = new_session(m.g);
  loom_status *st = loom_status_new();
  loom_saver *sv = loom_saver_new(m.g, 0, NULL, 0, st);
  for (size_t len = 0; len < n; len++) {
    tu_write_file(path, orig, len);
    cr_assert_eq(loom_saver_restore(sv, s, path, st), LOOM_DATA_LOSS, "length %zu: %s", len, loom_status_message(st));
    loom_tensor *t = NULL;
    cr_assert_eq(loom_checkpoint_read_tensor(path, "scale", &t, st), LOOM_DATA_LOSS, "length %zu", len);
    cr_assert_null(t);
    listed l = {0};
    cr_assert_eq(loom_checkpoint_list_variables(path, list_cb, &l, st), LOOM_DATA_LOSS, "length %zu", len);
  }
  /* appended garbage is damage too */
  char *longer = malloc(n + 8);
  memcpy(longer, orig, n);
  memset(longer + n, 0, 8);
  tu_write_file(path, longer, n + 8);
  cr_assert_eq(loom_saver_restore(sv, s, path, st), LOOM_DATA_LOSS);
  free(longer);
  free(orig);
  loom_saver_free(sv);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(m.g);
  free(path);
  tu_rmtree(dir);
}

/* ======================================================================
 * Restore errors name the variable
 * ====================================================================== */
Test(checkpoint, restore_missing_and_misshaped_variables) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_ckpt");
  char *path = save_model(dir, NULL);
  loom_status *st = loom_status_new();
  /* a model with an extra variable */
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {7, 5}, d2[2] = {5, 7};
  loom_variable_scope_push(g, "dense", LOOM_REUSE_NONE);
  loom_variable *k = loom_get_variable(g, "kernel", LOOM_F32, 2, d, NULL, 1);
  loom_variable *extra = loom_get_variable(g, "extra", LOOM_F32, 2, d, NULL, 1);
  loom_variable_scope_pop(g);
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *s = new_session(g);
  run_target(s, init);
  loom_tensor *before = read_var(s, "dense/kernel");
  loom_saver *sv = loom_saver_new(g, 0, NULL, 0, st);
  cr_assert_eq(loom_saver_restore(sv, s, path, st), LOOM_NOT_FOUND);
  cr_assert(strstr(loom_status_message(st), "Key dense/extra not found in checkpoint"), "%s", loom_status_message(st));
  loom_tensor *after = read_var(s, "dense/kernel");
  cr_assert(same_bits(before, after), "a failed restore must not write");
  loom_tensor_free(after);
  loom_saver_free(sv);
  /* restoring only the kernel works */
  sv = loom_saver_new(g, 1, &k, 0, st);
  cr_assert_eq(loom_saver_restore(sv, s, path, st), LOOM_OK, "%s", loom_status_message(st));
  loom_saver_free(sv);
  (void)extra;
  loom_session_free(s);
  loom_graph_free(g);

  /* a mis-shaped variable */
  g = loom_graph_new();
  loom_variable_scope_push(g, "dense", LOOM_REUSE_NONE);
  k = loom_get_variable(g, "kernel", LOOM_F32, 2, d2, NULL, 1);
  loom_variable_scope_pop(g);
  s = new_session(g);
  sv = loom_saver_new(g, 0, NULL, 0, st);
  cr_assert_eq(loom_saver_restore(sv, s, path, st), LOOM_INVALID_ARGUMENT);
  const char *msg = loom_status_message(st);
  cr_assert(strstr(msg, "dense/kernel") && strstr(msg, "[5,7]") && strstr(msg, "[7,5]"), "%s", msg);
  cr_assert_eq(loom_session_variable_initialized(s, "dense/kernel"), 0);
  loom_saver_free(sv);
  loom_session_free(s);
  loom_graph_free(g);

  /* a dtype mismatch */
  g = loom_graph_new();
  loom_variable_scope_push(g, "dense", LOOM_REUSE_NONE);
  loom_get_variable(g, "kernel", LOOM_F64, 2, d, NULL, 1);
  loom_variable_scope_pop(g);
  s = new_session(g);
  sv = loom_saver_new(g, 0, NULL, 0, st);
  cr_assert_eq(loom_saver_restore(sv, s, path, st), LOOM_INVALID_ARGUMENT);
  msg = loom_status_message(st);
  cr_assert(strstr(msg, "float64") && strstr(msg, "float32"), "%s", msg);
  /* saving uninitialised variables fails like TF */
  cr_assert_null(loom_saver_save(sv, s, path, -1, st));
  cr_assert_eq(loom_status_code(st), LOOM_FAILED_PRECONDITION);
  cr_assert(strstr(loom_status_message(st), "Attempting to use uninitialized value dense/kernel"), "%s",
            loom_status_message(st));
  loom_saver_free(sv);
  loom_session_free(s);
  loom_graph_free(g);
  loom_tensor_free(before);
  loom_status_free(st);
  free(path);
  tu_rmtree(dir);
}

/* ======================================================================
 * Saver bookkeeping
 * ====================================================================== */
Test(saver, keep_max_and_state_file) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_ckpt");
  model m = build_model(1);
  loom_session *s = new_session(m.g);
  run_target(s, m.init);
  loom_status *st = loom_status_new();
  loom_saver *sv = loom_saver_new(m.g, 0, NULL, 2, st);
  char prefix[512], p[1100], buf[1100];
  snprintf(prefix, sizeof prefix, "%s/model.ckpt", dir);
  for (int step = 1; step <= 5; step++) {
    scramble(s, step);
    cr_assert(loom_saver_save(sv, s, prefix, step * 100, st), "%s", loom_status_message(st));
  }
  for (int step = 1; step <= 5; step++) {
    snprintf(p, sizeof p, "%s-%d", prefix, step * 100);
    cr_assert_eq(tu_file_exists(p), step >= 4, "step %d", step);
  }
  snprintf(p, sizeof p, "%s/checkpoint", dir);
  char *state = tu_read_file(p, NULL);
  cr_assert_str_eq(state,
                   "model_checkpoint_path: \"model.ckpt-500\"\n"
                   "all_model_checkpoint_paths: \"model.ckpt-400\"\n"
                   "all_model_checkpoint_paths: \"model.ckpt-500\"\n");
  free(state);
  cr_assert_eq(loom_latest_checkpoint(dir, buf, sizeof buf, st), LOOM_OK, "%s", loom_status_message(st));
  snprintf(p, sizeof p, "%s-500", prefix);
  cr_assert_str_eq(buf, p);
  cr_assert_eq(count_files(dir, ".tmp-"), 0);
  /* re-saving the same step moves it to the end */
  cr_assert(loom_saver_save(sv, s, prefix, 400, st));
  snprintf(p, sizeof p, "%s/checkpoint", dir);
  state = tu_read_file(p, NULL);
  cr_assert_str_eq(state,
                   "model_checkpoint_path: \"model.ckpt-400\"\n"
                   "all_model_checkpoint_paths: \"model.ckpt-500\"\n"
                   "all_model_checkpoint_paths: \"model.ckpt-400\"\n");
  free(state);
  loom_saver_free(sv);

  /* a new saver adopting the state file keeps counting */
  sv = loom_saver_new(m.g, 0, NULL, 2, st);
  cr_assert_eq(loom_saver_recover_last_checkpoints(sv, dir, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert(loom_saver_save(sv, s, prefix, 600, st));
  snprintf(p, sizeof p, "%s-500", prefix);
  cr_assert(!tu_file_exists(p), "the oldest adopted checkpoint is deleted");
  snprintf(p, sizeof p, "%s-400", prefix);
  cr_assert(tu_file_exists(p));
  loom_saver_free(sv);

  /* keep_max <= 0 keeps everything; a directory prefix gives model.ckpt */
  sv = loom_saver_new(m.g, 0, NULL, 0, st);
  for (int step = 1; step <= 4; step++) cr_assert(loom_saver_save(sv, s, dir, 1000 + step, st));
  cr_assert_eq(count_files(dir, "model.ckpt-100"), 4); /* 1001..1004 */
  cr_assert_eq(loom_latest_checkpoint(dir, buf, sizeof buf, st), LOOM_OK);
  snprintf(p, sizeof p, "%s-1004", prefix);
  cr_assert_str_eq(buf, p);
  loom_saver_free(sv);
  sv = loom_saver_new(m.g, 0, NULL, -1, st);
  for (int step = 1; step <= 3; step++) cr_assert(loom_saver_save(sv, s, dir, 2000 + step, st));
  cr_assert_eq(count_files(dir, "model.ckpt-200"), 3);
  /* no global step: the prefix itself */
  const char *plain = loom_saver_save(sv, s, prefix, -1, st);
  cr_assert_str_eq(plain, prefix);
  loom_saver_free(sv);

  /* latest_checkpoint errors */
  char empty[TU_TMPDIR_CAP];
  tu_tmpdir(empty, sizeof empty, "loom_ckpt");
  cr_assert_eq(loom_latest_checkpoint(empty, buf, sizeof buf, st), LOOM_NOT_FOUND);
  snprintf(p, sizeof p, "%s/checkpoint", empty);
  tu_write_file(p, "model_checkpoint_path: \"gone-1\"\n", 32);
  cr_assert_eq(loom_latest_checkpoint(empty, buf, sizeof buf, st), LOOM_NOT_FOUND);
  cr_assert(strstr(loom_status_message(st), "gone-1"), "%s", loom_status_message(st));
  tu_rmtree(empty);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(m.g);
  tu_rmtree(dir);
}

/* ======================================================================
 * Train N, save, restore, train M == train N + M (bitwise)
 * ====================================================================== */
typedef struct lin {
  loom_graph *g;
  loom_node *init, *train;
  loom_optimizer *opt;
} lin;

static lin build_linear(void) {
  lin m;
  m.g = loom_graph_new();
  loom_graph_set_random_seed(m.g, 7);
  int64_t xd[2] = {8, 3}, wd[2] = {3, 2}, bd[1] = {2}, yd[2] = {8, 2};
  float x[24], y[16];
  for (int i = 0; i < 24; i++) x[i] = (float)sin(i * 0.37);
  for (int i = 0; i < 16; i++) y[i] = (float)cos(i * 0.21);
  loom_variable_scope_push(m.g, "dense", LOOM_REUSE_NONE);
  loom_variable *w = loom_get_variable(m.g, "kernel", LOOM_F32, 2, wd, NULL, 1);
  loom_initializer z = loom_init_zeros();
  loom_variable *b = loom_get_variable(m.g, "bias", LOOM_F32, 1, bd, &z, 1);
  loom_output xo = loom_const_data(m.g, LOOM_F32, 2, xd, x, "x");
  loom_output pred = loom_add(m.g, loom_matmul(m.g, xo, loom_variable_output(w), 0, 0, NULL),
                              loom_variable_output(b), NULL);
  loom_variable_scope_pop(m.g);
  loom_output diff = loom_sub(m.g, pred, loom_const_data(m.g, LOOM_F32, 2, yd, y, "y"), NULL);
  loom_output loss = loom_reduce_mean(m.g, loom_square(m.g, diff, NULL), -1, NULL, 0, "loss");
  loom_variable *gs = loom_get_or_create_global_step(m.g);
  loom_output lr = loom_exponential_decay(m.g, 0.1, loom_variable_output(gs), 2, 0.5, 0, NULL);
  m.opt = loom_optimizer_adam(lr, NULL);
  m.train = loom_optimizer_minimize(m.opt, m.g, loss, 0, NULL, gs, NULL);
  m.init = loom_global_variables_initializer(m.g);
  char msg[512] = "";
  loom_status *st = loom_status_new();
  if (loom_graph_status(m.g, st)) snprintf(msg, sizeof msg, "%s", loom_status_message(st));
  loom_status_free(st);
  cr_assert(m.train, "%s", msg);
  return m;
}

Test(saver, train_save_restore_continue_is_bitwise) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_ckpt");
  const int N = 3, M = 4;
  /* reference: N + M steps in one session */
  lin a = build_linear();
  loom_session *sa = new_session(a.g);
  run_target(sa, a.init);
  for (int i = 0; i < N; i++) run_target(sa, a.train);
  loom_status *st = loom_status_new();
  loom_saver *sva = loom_saver_new(a.g, 0, NULL, 5, st);
  cr_assert(sva);
  const char *path = loom_saver_save(sva, sa, dir, N, st);
  cr_assert(path, "%s", loom_status_message(st));
  char *ck = strdup(path);
  for (int i = 0; i < M; i++) run_target(sa, a.train);
  /* a new process: rebuild, restore, continue */
  lin b = build_linear();
  loom_session *sb = new_session(b.g);
  loom_saver *svb = loom_saver_new(b.g, 0, NULL, 5, st);
  cr_assert_eq(loom_saver_restore(svb, sb, ck, st), LOOM_OK, "%s", loom_status_message(st));
  for (int i = 0; i < M; i++) run_target(sb, b.train);
  int n = 0;
  loom_variable *const *vars = loom_global_variables(a.g, &n);
  cr_assert_eq(n, 9, "kernel, bias, global_step, beta1/2_power, 2 Adam slots each: %d", n);
  listed l = {0};
  cr_assert_eq(loom_checkpoint_list_variables(ck, list_cb, &l, st), LOOM_OK);
  cr_assert_eq(l.n, 9);
  for (int i = 0; i < n; i++) {
    const char *name = loom_variable_name(vars[i]);
    loom_tensor *ta = read_var(sa, name), *tb = read_var(sb, name);
    cr_assert(same_bits(ta, tb), "%s differs", name);
    loom_tensor_free(ta);
    loom_tensor_free(tb);
  }
  loom_tensor *gsv = read_var(sb, "global_step");
  cr_assert_eq(*(int64_t *)loom_tensor_data(gsv), N + M);
  loom_tensor_free(gsv);
  free(ck);
  loom_saver_free(sva);
  loom_saver_free(svb);
  loom_status_free(st);
  loom_session_free(sa);
  loom_session_free(sb);
  loom_optimizer_free(a.opt);
  loom_optimizer_free(b.opt);
  loom_graph_free(a.g);
  loom_graph_free(b.g);
  tu_rmtree(dir);
}

/* ======================================================================
 * String tensors: dtype 7, data = u64 lengths then the bytes
 * ====================================================================== */
static loom_tensor *string_tensor(int ndim, const int64_t *dims, const char *const *s, const size_t *len) {
  loom_tensor *t = loom_tensor_new(LOOM_STRING, ndim, dims, NULL);
  cr_assert(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++)
    if (s[i]) cr_assert_eq(loom_tensor_set_string(t, i, s[i], len[i], NULL), LOOM_OK);
  return t;
}
static void expect_same_strings(const loom_tensor *a, const loom_tensor *b) {
  cr_assert_eq(loom_tensor_dtype(b), LOOM_STRING);
  cr_assert_eq(loom_tensor_ndim(a), loom_tensor_ndim(b));
  for (int i = 0; i < loom_tensor_ndim(a); i++) cr_assert_eq(loom_tensor_dim(a, i), loom_tensor_dim(b, i));
  for (int64_t i = 0; i < loom_tensor_numel(a); i++) {
    size_t la, lb;
    const char *pa = loom_tensor_get_string(a, i, &la), *pb = loom_tensor_get_string(b, i, &lb);
    cr_assert(la == lb && !memcmp(pa, pb, la), "element %lld: %zu bytes vs %zu", (long long)i, la, lb);
  }
}
static int list_string_cb(const char *name, loom_dtype dt, int ndim, const int64_t *dims, void *arg) {
  if (!strcmp(name, "words")) *(int *)arg = dt == LOOM_STRING && ndim == 2 && dims[0] == 2 && dims[1] == 3;
  return 0;
}

Test(checkpoint, string_tensors_round_trip) {
  char dir[TU_TMPDIR_CAP], p[512];
  tu_tmpdir(dir, sizeof dir, "loom_ckstr");
  snprintf(p, sizeof p, "%s/strings", dir);
  char longs[1000];
  for (int i = 0; i < 1000; i++) longs[i] = (char)(i * 7 + 1);
  const char *s[6] = {"apple", "", "nul\0inside", longs, NULL, "\xe6\x97\xa5\xe6\x9c\xac"};
  const size_t len[6] = {5, 0, 10, 1000, 0, 6};
  int64_t d[2] = {2, 3}, z = 0;
  loom_tensor *w = string_tensor(2, d, s, len);
  loom_tensor *e = loom_tensor_new(LOOM_STRING, 1, &z, NULL);
  loom_tensor *f = loom_tensor_from_data(LOOM_F32, 1, (int64_t[]){2}, (float[]){1.5f, -2.0f}, NULL);
  const char *names[3] = {"words", "none", "floats"};
  const loom_tensor *ts[3] = {w, e, f};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_checkpoint_write(p, 3, names, ts, st), LOOM_OK, "%s", loom_status_message(st));
  /* the layout: 24-byte header, records, 16-byte trailer; the words record's
   * B is 8 * 6 lengths + 1021 bytes */
  size_t n;
  unsigned char *raw = tu_read_file(p, &n);
  size_t rec_words = 4 + 5 + 4 + 4 + 16 + 8 + 4 + (48 + 1021) + 4;
  size_t rec_none = 4 + 4 + 4 + 4 + 8 + 8 + 4 + 0 + 4;
  size_t rec_f = 4 + 6 + 4 + 4 + 8 + 8 + 4 + 8 + 4;
  cr_assert_eq(n, 24 + rec_words + rec_none + rec_f + 16);
  uint64_t B = 0, l2 = 0;
  for (int i = 7; i >= 0; i--) B = B << 8 | raw[24 + 4 + 5 + 4 + 4 + 16 + i];
  for (int i = 7; i >= 0; i--) l2 = l2 << 8 | raw[24 + 4 + 5 + 4 + 4 + 16 + 8 + 4 + 16 + i];
  cr_assert_eq(B, 48 + 1021);
  cr_assert_eq(l2, 10, "the third length is that of \"nul\\0inside\"");
  free(raw);
  loom_tensor *r = NULL;
  cr_assert_eq(loom_checkpoint_read_tensor(p, "words", &r, st), LOOM_OK, "%s", loom_status_message(st));
  expect_same_strings(w, r);
  loom_tensor_free(r);
  cr_assert_eq(loom_checkpoint_read_tensor(p, "none", &r, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert(loom_tensor_dtype(r) == LOOM_STRING && loom_tensor_numel(r) == 0);
  loom_tensor_free(r);
  cr_assert_eq(loom_checkpoint_read_tensor(p, "floats", &r, st), LOOM_OK);
  cr_assert(same_bits(r, f));
  loom_tensor_free(r);
  int ok = 0;
  cr_assert_eq(loom_checkpoint_list_variables(p, list_string_cb, &ok, st), LOOM_OK);
  cr_assert(ok, "list_variables reports words as string [2,3]");
  loom_tensor_free(w);
  loom_tensor_free(e);
  loom_tensor_free(f);
  loom_status_free(st);
  tu_rmtree(dir);
}

static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

Test(checkpoint, corrupted_string_data_is_data_loss) {
  char dir[TU_TMPDIR_CAP], p[512];
  tu_tmpdir(dir, sizeof dir, "loom_ckstr");
  snprintf(p, sizeof p, "%s/strings", dir);
  const char *s[3] = {"alpha", "", "gamma ray"};
  const size_t len[3] = {5, 0, 9};
  int64_t d = 3;
  loom_tensor *w = string_tensor(1, &d, s, len);
  const char *name = "tokens";
  const loom_tensor *ts[1] = {w};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_checkpoint_write(p, 1, &name, ts, st), LOOM_OK, "%s", loom_status_message(st));
  size_t n;
  unsigned char *orig = tu_read_file(p, &n), *buf = malloc(n);
  size_t data_off = 24 + 4 + 6 + 4 + 4 + 8 + 8 + 4, B = 24 + 14;
  cr_assert_eq(n, data_off + B + 4 + 16);
  /* every flipped bit of the lengths or the bytes: DATA_LOSS naming the tensor */
  for (size_t i = data_off; i < data_off + B; i++) {
    memcpy(buf, orig, n);
    buf[i] ^= (unsigned char)(1 << (i % 8));
    tu_write_file(p, buf, n);
    loom_tensor *r = NULL;
    loom_code rc = loom_checkpoint_read_tensor(p, "tokens", &r, st);
    cr_assert_eq(rc, LOOM_DATA_LOSS, "byte %zu: %s", i, loom_code_name(rc));
    cr_assert(strstr(loom_status_message(st), "tokens") && strstr(loom_status_message(st), p), "%s",
              loom_status_message(st));
    cr_assert(!r);
  }
  /* lengths that do not add up, with every CRC valid: still DATA_LOSS */
  memcpy(buf, orig, n);
  put_le(buf + data_off + 16, 10, 8); /* third length 9 -> 10: one byte more than there is */
  put_le(buf + data_off + B, loom__crc32c_masked(buf + data_off, B), 4);
  put_le(buf + n - 16 + 8, loom__crc32c_masked(buf, n - 16), 4);
  tu_write_file(p, buf, n);
  loom_tensor *r = NULL;
  cr_assert_eq(loom_checkpoint_read_tensor(p, "tokens", &r, st), LOOM_DATA_LOSS);
  cr_assert(strstr(loom_status_message(st), "string lengths in tensor tokens"), "%s", loom_status_message(st));
  put_le(buf + data_off + 16, 8, 8); /* one byte fewer */
  put_le(buf + data_off + B, loom__crc32c_masked(buf + data_off, B), 4);
  put_le(buf + n - 16 + 8, loom__crc32c_masked(buf, n - 16), 4);
  tu_write_file(p, buf, n);
  cr_assert_eq(loom_checkpoint_read_tensor(p, "tokens", &r, st), LOOM_DATA_LOSS);
  put_le(buf + data_off, UINT64_MAX, 8); /* a huge length */
  put_le(buf + data_off + 16, 9, 8);
  put_le(buf + data_off + B, loom__crc32c_masked(buf + data_off, B), 4);
  put_le(buf + n - 16 + 8, loom__crc32c_masked(buf, n - 16), 4);
  tu_write_file(p, buf, n);
  cr_assert_eq(loom_checkpoint_read_tensor(p, "tokens", &r, st), LOOM_DATA_LOSS);
  /* B smaller than 8 per element is an invalid record (meta CRC recomputed) */
  memcpy(buf, orig, n);
  put_le(buf + data_off - 12, 16, 8);
  put_le(buf + data_off - 4, loom__crc32c_masked(buf + 24, data_off - 4 - 24), 4);
  tu_write_file(p, buf, n);
  cr_assert_eq(loom_checkpoint_read_tensor(p, "tokens", &r, st), LOOM_DATA_LOSS);
  /* truncations */
  for (size_t k = 0; k < n; k += 3) {
    tu_write_file(p, orig, k);
    cr_assert_eq(loom_checkpoint_read_tensor(p, "tokens", &r, st), LOOM_DATA_LOSS, "truncated to %zu", k);
  }
  free(buf);
  free(orig);
  loom_tensor_free(w);
  loom_status_free(st);
  tu_rmtree(dir);
}
