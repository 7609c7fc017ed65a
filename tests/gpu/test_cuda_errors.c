/* tests/gpu/test_cuda_errors.c - failures in a CUDA session come back as
 * statuses naming what went wrong, and the session stays usable: indices
 * out of range found by kernels on the device (gather, segment sum, sparse
 * cross entropy labels), device memory exhausted, a device that does not
 * exist, and the per-step synchronized mode (LOOM_CUDA_SYNC=1). Runs on a
 * GPU (make test-gpu) and under the CUDA emulator (make test-cuemu); skips
 * without a device. */
#include "tests/gpu/parity.h"

/* Runs fetch y with feed (x = xv); returns the code, message into msg. */
static loom_code run1(loom_session *s, loom_output x, loom_tensor *xv, loom_output y, char *msg, size_t cap) {
  loom_status *st = loom_status_new();
  loom_tensor *out = NULL;
  loom_code rc = loom_session_run(s, &x, &xv, xv ? 1 : 0, &y, &out, 1, NULL, 0, st);
  snprintf(msg, cap, "%s", loom_status_message(st));
  loom_status_free(st);
  loom_tensor_free(out);
  return rc;
}

static loom_tensor *i64_tensor(int n, const int64_t *v) {
  int64_t d[1] = {n};
  loom_tensor *t = loom_tensor_new(LOOM_I64, 1, d, NULL);
  memcpy(loom_tensor_data(t), v, sizeof(int64_t) * (size_t)n);
  return t;
}

/* An index out of range in feed `bad` fails the run naming the node and the
 * index; the same session then runs the good feed. */
static void bad_index_case(const char *name, loom_output (*build)(loom_graph *, loom_output, const char *),
                           const char *expect_msg) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {4};
  loom_output idx = loom_placeholder(g, LOOM_I64, 1, d, "idx");
  loom_output y = build(g, idx, name);
  loom_session *s = session(g, LOOM_DEVICE_CUDA);
  int64_t badv[4] = {1, 0, 2, 77}, goodv[4] = {1, 0, 2, 3}, twobad[4] = {88, 0, 99, 3};
  loom_tensor *bad = i64_tensor(4, badv), *good = i64_tensor(4, goodv);
  char msg[512], what[600];
  if (s) {
    loom_code rc = run1(s, idx, bad, y, msg, sizeof msg);
    snprintf(what, sizeof what, "%s: bad index gives INVALID_ARGUMENT naming the node and index (got %d: %s)", name,
             (int)rc, msg);
    parity_check(rc == LOOM_INVALID_ARGUMENT && strstr(msg, name) && strstr(msg, expect_msg), "%s", what);
    rc = run1(s, idx, good, y, msg, sizeof msg);
    snprintf(what, sizeof what, "%s: the session runs good indices after the failure (got %d: %s)", name, (int)rc, msg);
    parity_check(rc == LOOM_OK, "%s", what);
    rc = run1(s, idx, bad, y, msg, sizeof msg);
    snprintf(what, sizeof what, "%s: and fails again on bad ones (got %d: %s)", name, (int)rc, msg);
    parity_check(rc == LOOM_INVALID_ARGUMENT && strstr(msg, expect_msg), "%s", what);
    /* two bad indices: the first is named, whatever order the GPU's threads ran in */
    loom_tensor *two = i64_tensor(4, twobad);
    rc = run1(s, idx, two, y, msg, sizeof msg);
    loom_tensor_free(two);
    snprintf(what, sizeof what, "%s: of two bad indices the first is named (got %d: %s)", name, (int)rc, msg);
    parity_check(rc == LOOM_INVALID_ARGUMENT && strstr(msg, "[0] = 88 is not in"), "%s", what);
  }
  loom_tensor_free(bad);
  loom_tensor_free(good);
  loom_session_free(s);
  loom_graph_free(g);
}

static loom_output b_gather(loom_graph *g, loom_output idx, const char *name) {
  int64_t pd[2] = {50, 3};
  loom_output p = loom_random_uniform(g, 2, pd, LOOM_F32, 0, 1, 1, 2, NULL);
  return loom_gather(g, p, idx, 0, name);
}
static loom_output b_segsum(loom_graph *g, loom_output idx, const char *name) {
  int64_t dd[2] = {4, 5};
  loom_output data = loom_random_uniform(g, 2, dd, LOOM_F32, 0, 1, 1, 2, NULL);
  return loom_unsorted_segment_sum(g, data, idx, 10, name);
}
static loom_output b_sxent(loom_graph *g, loom_output idx, const char *name) {
  int64_t ld[2] = {4, 10};
  loom_output logits = loom_random_uniform(g, 2, ld, LOOM_F32, 0, 1, 1, 2, NULL);
  return loom_sparse_softmax_cross_entropy_with_logits(g, logits, idx, NULL, NULL, name);
}

/* TensorScatterUpdate with [4,1] indices: the position is named in the index tensor's dims, as on the CPU. */
static void scatter_position_case(void) {
  loom_graph *g = loom_graph_new();
  int64_t id[2] = {4, 1}, td[2] = {10, 3}, ud[2] = {4, 3};
  loom_output idx = loom_placeholder(g, LOOM_I64, 2, id, "idx");
  loom_output t = loom_random_uniform(g, 2, td, LOOM_F32, 0, 1, 1, 2, NULL);
  loom_output u = loom_random_uniform(g, 2, ud, LOOM_F32, 0, 1, 3, 4, NULL);
  loom_output y = loom_scatter_update(g, t, idx, u, "bad_scatter");
  loom_session *sc = session(g, LOOM_DEVICE_CPU), *sg = session(g, LOOM_DEVICE_CUDA);
  int64_t badv[4] = {1, 0, 2, 12};
  loom_tensor *bad = loom_tensor_new(LOOM_I64, 2, id, NULL);
  memcpy(loom_tensor_data(bad), badv, sizeof badv);
  char mc[512], mg[512], what[1200];
  if (sc && sg) {
    loom_code rc = run1(sc, idx, bad, y, mc, sizeof mc), rg = run1(sg, idx, bad, y, mg, sizeof mg);
    snprintf(what, sizeof what, "scatter bad index: CPU and CUDA give the same error (cpu %d: %s | cuda %d: %s)", (int)rc,
             mc, (int)rg, mg);
    parity_check(rc == LOOM_INVALID_ARGUMENT && rg == rc && !strcmp(mc, mg) && strstr(mg, "indices[3,0] = 12"), "%s", what);
  }
  loom_tensor_free(bad);
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(g);
}

static void oom_case(void) {
  loom_graph *g = loom_graph_new();
  int64_t huge[2] = {(int64_t)1 << 20, (int64_t)1 << 17}; /* 2^37 floats: 512 GiB */
  loom_output y = loom_reduce_sum(g, loom_random_uniform(g, 2, huge, LOOM_F32, 0, 1, 1, 2, "huge"), -1, NULL, 0, NULL);
  int64_t sd[1] = {8};
  loom_output small = loom_reduce_sum(g, loom_random_uniform(g, 1, sd, LOOM_F32, 0, 1, 1, 2, "small"), -1, NULL, 0, NULL);
  loom_session *s = session(g, LOOM_DEVICE_CUDA);
  char msg[512], what[600];
  if (s) {
    loom_code rc = run1(s, y, NULL, y, msg, sizeof msg);
    snprintf(what, sizeof what, "512 GiB on the device gives RESOURCE_EXHAUSTED (got %d: %s)", (int)rc, msg);
    parity_check(rc == LOOM_RESOURCE_EXHAUSTED, "%s", what);
    rc = run1(s, small, NULL, small, msg, sizeof msg);
    snprintf(what, sizeof what, "the session runs a small graph after the OOM (got %d: %s)", (int)rc, msg);
    parity_check(rc == LOOM_OK, "%s", what);
  }
  loom_session_free(s);
  loom_graph_free(g);
}

static void device_index_case(void) {
  loom_graph *g = loom_graph_new();
  loom_session_options o = loom_session_options_default();
  o.device = LOOM_DEVICE_CUDA;
  o.device_index = 4096;
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, &o, st);
  char what[600];
  snprintf(what, sizeof what, "device 4096 gives UNAVAILABLE naming it (got %d: %s)", (int)loom_status_code(st),
           loom_status_message(st));
  parity_check(!s && loom_status_code(st) == LOOM_UNAVAILABLE && strstr(loom_status_message(st), "4096"), "%s", what);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

/* Two sessions on devices 1 and 0 run in turns from one thread: each run
 * makes its own device current before its first kernel (runs with no feed
 * copy in between, so nothing else would), and both match the CPU. Under
 * the emulator (CUEMU_DEVICES=2) a kernel or cuBLAS call given memory of
 * another device is an illegal address. Skips with one device. */
static void two_devices_case(void) {
#ifdef LOOM_CUEMU
  setenv("CUEMU_DEVICES", "2", 1);
#endif
  int64_t ad[2] = {16, 12}, bd[2] = {12, 5};
  loom_graph *g = loom_graph_new();
  loom_output y = loom_matmul(g, loom_exp(g, loom_random_uniform(g, 2, ad, LOOM_F32, -1, 1, 5, 6, NULL), NULL),
                              loom_random_normal(g, 2, bd, LOOM_F32, 0, 1, 7, 8, NULL), 0, 0, "y");
  loom_session_options o = loom_session_options_default();
  o.device = LOOM_DEVICE_CUDA;
  loom_session *s[3] = {session(g, LOOM_DEVICE_CPU), NULL, NULL};
  loom_status *st = loom_status_new();
  for (int d = 0; d < 2; d++) {
    o.device_index = 1 - d; /* device 1 first, so device 0 is current when it runs second */
    s[1 + d] = loom_session_new(g, &o, st);
  }
  if (!s[1] || !s[2]) {
    printf("test_cuda_errors: one CUDA device, the two-device case is skipped (%s)\n", loom_status_message(st));
  } else {
    for (int round = 0; round < 3; round++) {
      loom_tensor *out[3] = {NULL, NULL, NULL};
      for (int k = 0; k < 3; k++) run(s[k], "two devices", NULL, NULL, 0, &y, &out[k], 1, NULL, 0);
      char what[96];
      for (int k = 1; k < 3; k++) {
        snprintf(what, sizeof what, "round %d on device %d", round, 2 - k);
        if (out[0] && out[k]) compare(what, out[0], out[k], 1e-5);
      }
      for (int k = 0; k < 3; k++) loom_tensor_free(out[k]);
    }
  }
  for (int k = 0; k < 3; k++) loom_session_free(s[k]);
  loom_status_free(st);
  loom_graph_free(g);
#ifdef LOOM_CUEMU
  unsetenv("CUEMU_DEVICES");
#endif
}

static loom_output b_scatter_add(loom_graph *g, loom_output idx, const char *name) {
  int64_t td[2] = {10, 3}, ud[2] = {4, 3};
  loom_output t = loom_random_uniform(g, 2, td, LOOM_F32, 0, 1, 1, 2, NULL);
  return loom_scatter_add(g, t, idx, loom_random_uniform(g, 2, ud, LOOM_F32, 0, 1, 3, 4, NULL), name);
}
static loom_output b_scatter_update(loom_graph *g, loom_output idx, const char *name) {
  int64_t td[1] = {10}, ud[1] = {4};
  loom_output t = loom_random_uniform(g, 1, td, LOOM_F32, 0, 1, 1, 2, NULL);
  return loom_scatter_update(g, t, idx, loom_random_uniform(g, 1, ud, LOOM_F32, 0, 1, 3, 4, NULL), name);
}
static loom_output b_segment_mean(loom_graph *g, loom_output idx, const char *name) {
  int64_t dd[2] = {4, 5};
  return loom_unsorted_segment_mean(g, loom_random_uniform(g, 2, dd, LOOM_F32, 0, 1, 1, 2, NULL), idx, 10, name);
}
static loom_output b_segment_sqrtn(loom_graph *g, loom_output idx, const char *name) {
  int64_t dd[1] = {4};
  return loom_unsorted_segment_sqrt_n(g, loom_random_uniform(g, 1, dd, LOOM_F64, 0, 1, 1, 2, NULL), idx, 10, name);
}

int main(void) {
  if (!parity_gpu_present("test_cuda_errors")) return 0;
  for (int sync = 0; sync < 2; sync++) {
    if (sync) setenv("LOOM_CUDA_SYNC", "1", 1); /* read when a session is created */
    bad_index_case("bad_gather", b_gather, "indices[3] = 77 is not in [0, 50)");
    bad_index_case("bad_segsum", b_segsum, "segment_ids[3] = 77 is not in [0, 10)");
    bad_index_case("bad_labels", b_sxent, "labels[3] = 77 is not in [0, 10)");
    bad_index_case("bad_scatter_add", b_scatter_add, "indices[3] = 77 is not in [0, 10)");
    bad_index_case("bad_scatter_update", b_scatter_update, "indices[3] = 77 is not in [0, 10)");
    bad_index_case("bad_segment_mean", b_segment_mean, "segment_ids[3] = 77 is not in [0, 10)");
    bad_index_case("bad_segment_sqrtn", b_segment_sqrtn, "segment_ids[3] = 77 is not in [0, 10)");
  }
  unsetenv("LOOM_CUDA_SYNC");
  scatter_position_case();
  oom_case();
  device_index_case();
  two_devices_case();
  return parity_report("test_cuda_errors");
}
