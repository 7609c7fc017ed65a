/* Reliability regressions: each test here failed
 * before its fix.
 *   - loom_features_get of a missing key names the key and the keys that exist;
 *   - stale "<ckpt>.tmp-<pid>" / ".pin-<pid>-<n>" of dead writers are removed by
 *     the next save, and keep_checkpoint_max counts only real checkpoints;
 *   - evaluate's DATA_LOSS names the checkpoint, not its pin link; a damaged
 *     trailer is a checksum mismatch;
 *   - a failed tensor allocation reports its size without reading freed memory;
 *   - IDX header dims are multiplied with overflow checks; loom__numel never
 *     overflows; readers (IDX, TFRecord, events) never allocate more than
 *     the file can hold. */
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test_util.h"
#include "base/base.h"
#include "base/crc32c.h"

/* ---------------------------------------------------------------- helpers */
static int count_files(const char *dir, const char *substr) {
  DIR *d = opendir(dir);
  cr_assert(d, "cannot open %s", dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, substr)) n++;
  closedir(d);
  return n;
}

static void touch(const char *path, size_t nbytes) {
  FILE *f = fopen(path, "wb");
  cr_assert(f, "cannot create %s", path);
  for (size_t i = 0; i < nbytes; i++) fputc('x', f);
  fclose(f);
}

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert(f, "cannot create %s", path);
  cr_assert_eq(fwrite(p, 1, n, f), n);
  fclose(f);
}

/* A pid that is certainly not running: a child that has exited and been reaped. */
static pid_t dead_pid(void) {
  pid_t p = fork();
  cr_assert(p >= 0);
  if (p == 0) _exit(0);
  int ws;
  waitpid(p, &ws, 0);
  return p;
}

static void flip_byte(const char *path, long off_from_end) {
  int fd = open(path, O_RDWR);
  cr_assert(fd >= 0, "open %s", path);
  off_t size = lseek(fd, 0, SEEK_END);
  uint8_t b;
  cr_assert_eq(pread(fd, &b, 1, size - off_from_end), 1);
  b ^= 0x5a;
  cr_assert_eq(pwrite(fd, &b, 1, size - off_from_end), 1);
  close(fd);
}

/* An allocator that records the largest request, fails requests above a
 * limit and poisons every block it frees (a read after free sees 0xA5s).
 * No header of its own: blocks from libc before or after it are compatible. */
static size_t g_max_req, g_fail_above;
static void *rec_malloc(size_t n, void *u) {
  (void)u;
  if (n > g_max_req) g_max_req = n;
  if (g_fail_above && n > g_fail_above) return NULL;
  return malloc(n);
}
static void rec_free(void *p, void *u) {
  (void)u;
  if (!p) return;
  memset(p, 0xA5, malloc_usable_size(p));
  free(p);
}
static void *rec_realloc(void *p, size_t n, void *u) {
  (void)u;
  if (n > g_max_req) g_max_req = n;
  if (g_fail_above && n > g_fail_above) return NULL;
  return realloc(p, n);
}
static void recording_allocator(size_t fail_above) {
  g_max_req = 0;
  g_fail_above = fail_above;
  loom_allocator a = {rec_malloc, rec_realloc, rec_free, NULL};
  loom_set_allocator(&a);
}

/* ======================================================================
 * loom_features_get of a missing key
 * ====================================================================== */
Test(reliability, features_get_missing_key_names_key_and_keys) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {-1, 3};
  loom_features *f = loom_features_new();
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_features_add(f, "image", loom_placeholder(g, LOOM_F32, 2, d, "image"), st), LOOM_OK);
  cr_assert_eq(loom_features_add(f, "age", loom_placeholder(g, LOOM_F32, 2, d, "age"), st), LOOM_OK);
  loom_output x = loom_features_get(f, "pixels");
  cr_assert_null(x.node);
  /* the first layer that gets the empty output does not hide the cause */
  loom_layers_dense(g, x, 4, NULL, "dense");
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  const char *m = loom_status_message(st);
  cr_expect(strstr(m, "'pixels'"), "missing key not named: %s", m);
  cr_expect(strstr(m, "'image', 'age'"), "existing keys not named: %s", m);
  cr_expect(!strstr(m, "dense"), "reported at the layer instead of where asked: %s", m);
  loom_features_free(f);
  loom_graph_free(g);
  loom_status_free(st);
}

Test(reliability, features_get_present_key_sets_no_error) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {-1, 3};
  loom_features *f = loom_features_new();
  cr_assert_eq(loom_features_add(f, "x", loom_placeholder(g, LOOM_F32, 2, d, "x"), NULL), LOOM_OK);
  cr_assert(loom_features_get(f, "x").node);
  cr_assert_null(loom_features_get_sparse(f, "x").values.node); /* a probe: no error */
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  loom_features_free(f);
  loom_graph_free(g);
}

/* ---- an estimator whose model_fn asks for a key the input lacks ---- */
static float EX[8 * 2], EY[8];
static loom_dataset *est_input(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)mode;
  (void)p;
  (void)user;
  for (int i = 0; i < 8; i++) {
    EX[2 * i] = (float)i / 8;
    EX[2 * i + 1] = 1.0f - (float)i / 8;
    EY[i] = EX[2 * i] - EX[2 * i + 1];
  }
  int64_t xd[2] = {8, 2}, yd[2] = {8, 1};
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, xd, EX, NULL);
  loom_tensor *y = loom_tensor_from_data(LOOM_F32, 2, yd, EY, NULL);
  const char *names[2] = {"x", "y"};
  const loom_tensor *arr[2] = {x, y};
  loom_dataset *ds = loom_dataset_from_tensors(2, names, arr, "y", st);
  loom_tensor_free(x);
  loom_tensor_free(y);
  if (ds) ds = loom_dataset_repeat(ds, -1, st);
  if (ds) ds = loom_dataset_batch(ds, 4, 0, st);
  return ds;
}

static loom_code est_model(loom_graph *g, const loom_features *f, loom_output labels, loom_mode mode,
                           const loom_params *params, const loom_run_config *cfg, loom_estimator_spec *spec, void *user,
                           loom_status *st) {
  (void)params;
  (void)cfg;
  (void)st;
  const char *key = user ? user : "x";
  loom_output pred = loom_layers_dense(g, loom_features_get(f, key), 1, NULL, "linear");
  loom_spec_add_prediction(spec, "predictions", pred);
  if (mode == LOOM_MODE_PREDICT) return LOOM_OK;
  loom_output zero = {NULL, 0};
  loom_output loss =
      loom_losses_mean_squared_error(g, labels, pred, zero, NULL, NULL, LOOM_REDUCTION_SUM_OVER_BATCH_SIZE);
  loom_spec_set_loss(spec, loss);
  if (mode == LOOM_MODE_TRAIN) {
    loom_optimizer *opt = loom_optimizer_sgd(loom_const_f32(g, 0.1f, "lr"));
    loom_spec_set_train_op(spec, loom_optimizer_minimize(opt, g, loss, 0, NULL, loom_get_global_step(g), NULL));
    loom_optimizer_free(opt);
  }
  return LOOM_OK;
}

static loom_estimator *new_est(const char *dir, const char *key, int keep_max) {
  loom_run_config c = loom_run_config_default();
  c.progress_bar = 0;
  c.num_threads = 1;
  if (keep_max) c.keep_checkpoint_max = keep_max;
  loom_status *st = loom_status_new();
  loom_estimator *e = loom_estimator_new(est_model, (void *)key, dir, &c, NULL, NULL, st);
  cr_assert(e, "%s", loom_status_message(st));
  loom_status_free(st);
  return e;
}

static loom_code est_train(loom_estimator *e, int64_t steps, loom_status *st) {
  loom_train_options o = loom_train_options_default();
  o.steps = steps;
  return loom_estimator_train(e, est_input, NULL, &o, st);
}

Test(reliability, estimator_model_fn_missing_feature) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_rel_feat");
  loom_estimator *e = new_est(dir, "pixels", 0);
  loom_status *st = loom_status_new();
  cr_assert_eq(est_train(e, 1, st), LOOM_INVALID_ARGUMENT, "%s", loom_status_message(st));
  const char *m = loom_status_message(st);
  cr_expect(strstr(m, "'pixels'") && strstr(m, "'x'"), "the error names neither the key nor the keys: %s", m);
  cr_expect(!strstr(m, "invalid input"), "reported at the layer: %s", m);
  loom_estimator_free(e);
  loom_status_free(st);
}

/* ======================================================================
 * Checkpoints: stale temporaries, pin names, damaged trailers
 * ====================================================================== */
Test(reliability, stale_temporaries_of_dead_writers_removed) {
  char dir[TU_TMPDIR_CAP], p[1200];
  tu_tmpdir(dir, sizeof dir, "loom_rel_tmp");
  pid_t dead = dead_pid(), live = getppid();
  /* what 3 writers killed mid-save (and one killed mid-restore) leave behind */
  const char *stale[] = {"model.ckpt-3.tmp-%d", "model.ckpt-4.tmp-%d", "checkpoint.tmp-%d", "model.ckpt-2.pin-%d-0"};
  for (int i = 0; i < 4; i++) {
    char nm[128];
    snprintf(nm, sizeof nm, stale[i], (int)dead);
    snprintf(p, sizeof p, "%s/%s", dir, nm);
    touch(p, 4096);
  }
  snprintf(p, sizeof p, "%s/model.ckpt-9.tmp-%d", dir, (int)live); /* a writer that still runs */
  touch(p, 16);
  snprintf(p, sizeof p, "%s/notes.tmp-%d", dir, (int)dead); /* not ours */
  touch(p, 16);
  loom_estimator *e = new_est(dir, "x", 2);
  loom_status *st = loom_status_new();
  for (int r = 0; r < 3; r++) cr_assert_eq(est_train(e, 2, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(count_files(dir, ".pin-"), 0);
  snprintf(p, sizeof p, "model.ckpt-9.tmp-%d", (int)live);
  cr_expect_eq(count_files(dir, p), 1, "a live writer's temporary was removed");
  snprintf(p, sizeof p, ".tmp-%d", (int)dead);
  cr_expect_eq(count_files(dir, p), 1, "dead writers' temporaries remain (or notes.tmp was removed)");
  snprintf(p, sizeof p, "notes.tmp-%d", (int)dead);
  cr_expect_eq(count_files(dir, p), 1);
  /* keep_checkpoint_max = 2: exactly model.ckpt-4 and model.ckpt-6 remain */
  DIR *d = opendir(dir);
  struct dirent *de;
  int real = 0;
  while ((de = readdir(d)))
    if (!strncmp(de->d_name, "model.ckpt-", 11) && !strstr(de->d_name, ".tmp-")) {
      real++;
      cr_expect(!strcmp(de->d_name, "model.ckpt-4") || !strcmp(de->d_name, "model.ckpt-6"), "kept %s", de->d_name);
    }
  closedir(d);
  cr_expect_eq(real, 2);
  char latest[1200];
  cr_assert_eq(loom_latest_checkpoint(dir, latest, sizeof latest, st), LOOM_OK);
  cr_expect(strstr(latest, "model.ckpt-6"), "%s", latest);
  loom_estimator_free(e);
  loom_status_free(st);
}

Test(reliability, evaluate_data_loss_names_checkpoint_not_pin) {
  char dir[TU_TMPDIR_CAP], p[1200];
  tu_tmpdir(dir, sizeof dir, "loom_rel_pin");
  loom_estimator *e = new_est(dir, "x", 0);
  loom_status *st = loom_status_new();
  cr_assert_eq(est_train(e, 2, st), LOOM_OK, "%s", loom_status_message(st));
  snprintf(p, sizeof p, "%s/model.ckpt-2", dir);
  struct stat sb;
  cr_assert_eq(stat(p, &sb), 0);
  flip_byte(p, (long)sb.st_size / 2); /* a data byte */
  loom_eval_options eo = loom_eval_options_default();
  eo.steps = 1;
  loom_eval_result *r = NULL;
  cr_assert_eq(loom_estimator_evaluate(e, est_input, NULL, &eo, &r, st), LOOM_DATA_LOSS, "%s",
               loom_status_message(st));
  const char *m = loom_status_message(st);
  cr_expect(strstr(m, "model.ckpt-2"), "%s", m);
  cr_expect(!strstr(m, ".pin-"), "names the pin link: %s", m);
  loom_eval_result_free(r);
  loom_estimator_free(e);
  loom_status_free(st);
}

Test(reliability, damaged_trailer_is_checksum_mismatch) {
  char dir[TU_TMPDIR_CAP], p[1200];
  tu_tmpdir(dir, sizeof dir, "loom_rel_crc");
  loom_estimator *e = new_est(dir, "x", 0);
  loom_status *st = loom_status_new();
  cr_assert_eq(est_train(e, 1, st), LOOM_OK, "%s", loom_status_message(st));
  snprintf(p, sizeof p, "%s/model.ckpt-1", dir);
  /* trailer: "LOOMEND\0" | u32 file CRC | u32 reserved; flip a byte in each word */
  for (int k = 0; k < 2; k++) {
    long off = k == 0 ? 8 : 1;
    flip_byte(p, off);
    cr_assert_eq(est_train(e, 1, st), LOOM_DATA_LOSS, "byte %ld from the end: %s", off, loom_status_message(st));
    const char *m = loom_status_message(st);
    cr_expect(strstr(m, "checksum mismatch"), "byte %ld from the end: %s", off, m);
    cr_expect(strstr(m, "model.ckpt-1"), "%s", m);
    flip_byte(p, off); /* repaired */
  }
  loom_estimator_free(e);
  loom_status_free(st);
}

/* ======================================================================
 * Allocation failure and sizes from headers
 * ====================================================================== */
Test(reliability, tensor_new_failed_allocation_reports_size) {
  recording_allocator((size_t)1 << 20);
  loom_status *st = loom_status_new();
  int64_t d[2] = {1024, 1024};
  loom_tensor *t = loom_tensor_new(LOOM_F32, 2, d, st);
  loom_set_allocator(NULL);
  cr_assert_null(t);
  cr_assert_eq(loom_status_code(st), LOOM_RESOURCE_EXHAUSTED);
  cr_expect(strstr(loom_status_message(st), "allocating 4194304 bytes"), "%s", loom_status_message(st));
  loom_status_free(st);
}

Test(reliability, numel_never_overflows) {
  int64_t big[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 3};
  cr_expect_eq(loom__numel(2, big), -1);
  int64_t wrap[3] = {(int64_t)1 << 20, (int64_t)1 << 20, (int64_t)1 << 24}; /* 2^64: wraps to 0 */
  cr_expect_eq(loom__numel(3, wrap), -1);
  int64_t ok[3] = {7, 5, 3};
  cr_expect_eq(loom__numel(3, ok), 105);
  cr_expect_eq(loom__numel(0, NULL), 1);
}

static void idx_header(uint8_t *h, int rank, const uint32_t *dims) {
  h[0] = h[1] = 0;
  h[2] = 0x08;
  h[3] = (uint8_t)rank;
  for (int i = 0; i < rank; i++) {
    h[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
    h[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
    h[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
    h[7 + 4 * i] = (uint8_t)dims[i];
  }
}

Test(reliability, idx_dims_product_overflow) {
  char dir[TU_TMPDIR_CAP], p[1200];
  tu_tmpdir(dir, sizeof dir, "loom_rel_idx");
  snprintf(p, sizeof p, "%s/images.idx", dir);
  /* 2^20 x 2^20 x 2^24 = 2^64: the size_t product wrapped to 0 and the file
   * was accepted as 2^20 images of 2^44 pixels each, with no data */
  const uint32_t cases[3][3] = {{1u << 20, 1u << 20, 1u << 24}, {0, 0xFFFFFFFFu, 0xFFFFFFFFu}, {256, 0xFFFFFFFFu, 0xFFFFFFFFu}};
  for (int c = 0; c < 3; c++) {
    uint8_t h[16];
    idx_header(h, 3, cases[c]);
    write_bytes(p, h, sizeof h);
    loom_status *st = loom_status_new();
    loom_dataset *ds = loom_dataset_idx(p, NULL, NULL, st);
    cr_expect_null(ds, "case %d accepted", c);
    loom_dataset_free(ds);
    cr_expect_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT, "case %d: %s", c, loom_status_message(st));
    cr_expect(strstr(loom_status_message(st), "implausible dimensions"), "%s", loom_status_message(st));
    loom_status_free(st);
  }
}

Test(reliability, idx_header_larger_than_file_allocates_little) {
  char dir[TU_TMPDIR_CAP], p[1200];
  tu_tmpdir(dir, sizeof dir, "loom_rel_idx2");
  snprintf(p, sizeof p, "%s/images.idx", dir);
  /* a 19-byte file claiming 64 x 4096 x 4096 bytes (1 GiB; 2^40 is allowed) */
  uint8_t f[19] = {0};
  const uint32_t dims[3] = {64, 4096, 4096};
  idx_header(f, 3, dims);
  write_bytes(p, f, sizeof f);
  recording_allocator(0);
  loom_status *st = loom_status_new();
  loom_dataset *ds = loom_dataset_idx(p, NULL, NULL, st);
  size_t biggest = g_max_req;
  loom_set_allocator(NULL);
  cr_expect_null(ds);
  cr_expect_eq(loom_status_code(st), LOOM_DATA_LOSS, "%s", loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), "truncated"), "%s", loom_status_message(st));
  cr_expect(biggest <= ((size_t)2 << 20), "allocated %zu bytes for a 19-byte file", biggest);
  loom_status_free(st);
}

/* A TFRecord file of one 12-byte header claiming `len` bytes of data. */
static void tfrecord_header_only(const char *path, uint64_t len) {
  uint8_t h[12];
  for (int i = 0; i < 8; i++) h[i] = (uint8_t)(len >> (8 * i));
  uint32_t c = loom__crc32c_masked(h, 8);
  for (int i = 0; i < 4; i++) h[8 + i] = (uint8_t)(c >> (8 * i));
  write_bytes(path, h, sizeof h);
}

Test(reliability, tfrecord_length_larger_than_file_allocates_little) {
  char dir[TU_TMPDIR_CAP], p[1200];
  tu_tmpdir(dir, sizeof dir, "loom_rel_tfr");
  snprintf(p, sizeof p, "%s/data.tfrecord", dir);
  tfrecord_header_only(p, ((uint64_t)1 << 40) - 1);
  loom_feature_spec spec[1];
  memset(spec, 0, sizeof spec);
  spec[0].name = "x";
  spec[0].dtype = LOOM_F32;
  spec[0].ndim = 1;
  spec[0].dims[0] = 1;
  const char *paths[1] = {p};
  recording_allocator(0);
  loom_status *st = loom_status_new();
  loom_dataset *ds = loom_dataset_tfrecord(1, paths, 1, spec, NULL, st);
  cr_assert(ds, "%s", loom_status_message(st));
  loom_tensor *v[1] = {NULL};
  loom_code rc = loom_dataset_next(ds, v, st);
  size_t biggest = g_max_req;
  loom_dataset_free(ds);
  loom_set_allocator(NULL);
  cr_expect_eq(rc, LOOM_DATA_LOSS, "%s", loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), "truncated record data"), "%s", loom_status_message(st));
  cr_expect(biggest <= ((size_t)2 << 20), "allocated %zu bytes for a 12-byte file", biggest);
  loom_tensor_free(v[0]);
  loom_status_free(st);
}

Test(reliability, event_file_length_larger_than_file_allocates_little) {
  char dir[TU_TMPDIR_CAP], p[1200];
  tu_tmpdir(dir, sizeof dir, "loom_rel_ev");
  snprintf(p, sizeof p, "%s/events.out.tfevents.1.host", dir);
  tfrecord_header_only(p, (uint64_t)1 << 36);
  recording_allocator(0);
  loom_status *st = loom_status_new();
  loom_event_reader *r = loom_event_reader_open(p, st);
  cr_assert(r, "%s", loom_status_message(st));
  const loom_event *ev = NULL;
  loom_code rc = loom_event_reader_next(r, &ev, st);
  size_t biggest = g_max_req;
  loom_event_reader_free(r);
  loom_set_allocator(NULL);
  cr_expect_eq(rc, LOOM_DATA_LOSS, "%s", loom_status_message(st));
  cr_expect(biggest <= ((size_t)2 << 20), "allocated %zu bytes for a 12-byte file", biggest);
  loom_status_free(st);
}

/* Found by fuzz/fuzz_ps_frame.c: a STEP_INC whose k overflows the PS's
 * int64 global step was signed-integer overflow (UB; it wrapped to a
 * negative step in practice). It is refused with OUT_OF_RANGE now, the
 * step stays as it was and the connection keeps working. */
Test(reliability, ps_step_inc_overflow_is_refused) {
  loom_ps_server_options o = loom_ps_server_options_default();
  o.placement_hash = 42;
  loom_status *st = loom_status_new();
  loom_ps_server *s = loom_ps_server_start(&o, st);
  cr_assert(s, "start: %s", loom_status_message(st));
  loom_ps_connect_options co = loom_ps_connect_options_default();
  co.host = "127.0.0.1";
  co.port = loom_ps_server_port(s);
  co.placement_hash = 42;
  co.timeout_s = 5;
  loom_ps_client *c = loom_ps_connect(&co, st);
  cr_assert(c, "connect: %s", loom_status_message(st));
  int64_t gs = 0;
  cr_assert_eq(loom_ps_step_inc(c, INT64_MAX - 1, &gs, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(gs, INT64_MAX - 1);
  cr_expect_eq(loom_ps_step_inc(c, 2, &gs, st), LOOM_OUT_OF_RANGE, "INT64_MAX - 1 + 2 gave step %lld", (long long)gs);
  cr_expect(strstr(loom_status_message(st), "does not fit in int64"), "%s", loom_status_message(st));
  cr_assert_eq(loom_ps_step_inc(c, 1, &gs, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(gs, INT64_MAX, "the step changed on the refused increment");
  cr_assert_eq(loom_ps_step_inc(c, INT64_MIN, &gs, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(gs, -1);
  cr_expect_eq(loom_ps_step_inc(c, INT64_MIN, &gs, st), LOOM_OUT_OF_RANGE, "-1 + INT64_MIN gave %lld", (long long)gs);
  loom_ps_client_free(c);
  loom_ps_server_stop(s);
  loom_status_free(st);
}

/* Found by the soak test (make soak): event writers created faster than one
 * a second in one logdir (a loop of short train/evaluate calls) each took
 * the next free second's name by probing every name taken before, and the
 * writer 1000 names ahead failed with "File exists" (after ~150 s of the
 * soak loop). Now 1500 writers in a row all get a file, each name sorting
 * after the one before (creation order, as TensorBoard reads them). */
Test(reliability, event_writers_faster_than_one_a_second, .timeout = 60) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_rel_evn");
  loom_status *st = loom_status_new();
  char prev[1200] = "";
  for (int i = 0; i < 1500; i++) {
    loom_event_writer *w = loom_event_writer_new(dir, NULL, st);
    cr_assert(w, "writer %d: %s", i, loom_status_message(st));
    const char *p = loom_event_writer_path(w);
    cr_assert(strcmp(p, prev) > 0, "writer %d: %s does not sort after %s", i, p, prev);
    snprintf(prev, sizeof prev, "%s", p);
    cr_assert_eq(loom_event_writer_add_scalar(w, "x", (double)i, i, st), LOOM_OK, "%s", loom_status_message(st));
    loom_event_writer_free(w);
  }
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (!strncmp(de->d_name, "events.out.tfevents.", 20)) n++;
  closedir(d);
  cr_expect_eq(n, 1500, "%d event files", n);
  loom_status_free(st);
  tu_rmtree(dir);
}
