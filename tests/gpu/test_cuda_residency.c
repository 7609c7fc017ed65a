/* tests/gpu/test_cuda_residency.c - what a CUDA session moves between host
 * and device. The backend's contract (engine/backend.h): variables and
 * their optimizer slots stay on the device between steps, feeds are copied
 * in and fetches out, and device memory comes from the plan's arena and the
 * caching pool, so a steady training step calls cudaMalloc/cudaFree never
 * and copies nothing but its feeds and fetches. Host code that touches
 * variables moves only what it touches: reading one variable copies that one
 * down, assigning one re-uploads that one, a CPU-only plan (string values)
 * re-uploads only the variables it wrote.
 *
 * Each sequence runs on a CPU session too and every loss is compared, so a
 * mirror that was not re-uploaded shows up as a wrong number. The byte and
 * call counts need the CUDA emulator's counters (make test-cuemu); on a real
 * GPU (make test-gpu) only the values are checked. */
#include <stdarg.h>
#include "tests/gpu/parity.h"
#ifdef LOOM_CUEMU
#include <cuda_runtime_api.h>
#endif

enum { B = 16, IN = 128, H = 32, C = 10 };

#ifdef LOOM_CUEMU
static cuemu_stats snap(void) {
  cuemu_stats s;
  cuemu_get_stats(&s);
  return s;
}
#define COUNTS 1
#else
typedef struct cuemu_stats {
  unsigned long long kernels, gemms, h2d, h2d_bytes, d2h, d2h_bytes, d2d, d2d_bytes, memsets, mallocs, frees, syncs;
} cuemu_stats;
static cuemu_stats snap(void) {
  cuemu_stats s = {0};
  return s;
}
#define COUNTS 0
#endif
static cuemu_stats diff(cuemu_stats a, cuemu_stats b) {
  cuemu_stats d;
  d.kernels = b.kernels - a.kernels;
  d.gemms = b.gemms - a.gemms;
  d.h2d = b.h2d - a.h2d;
  d.h2d_bytes = b.h2d_bytes - a.h2d_bytes;
  d.d2h = b.d2h - a.d2h;
  d.d2h_bytes = b.d2h_bytes - a.d2h_bytes;
  d.d2d = b.d2d - a.d2d;
  d.d2d_bytes = b.d2d_bytes - a.d2d_bytes;
  d.memsets = b.memsets - a.memsets;
  d.mallocs = b.mallocs - a.mallocs;
  d.frees = b.frees - a.frees;
  d.syncs = b.syncs - a.syncs;
  return d;
}

typedef struct model {
  loom_graph *g;
  loom_output x, lab, loss, bump, text;
  loom_node *train, *init;
  loom_optimizer *opt;
  loom_tensor *fx, *fl;
  loom_session *cpu, *gpu;
} model;

/* An MLP trained with Adam (weights, biases and two slots each on the
 * device), plus a string constant: a run that fetches it compiles a
 * CPU-only plan, and `bump` adds 0.5 to fc2/b in place. */
static int model_new(model *m) {
  memset(m, 0, sizeof *m);
  m->g = loom_graph_new();
  int64_t xd[2] = {B, IN}, ld[1] = {B};
  m->x = loom_placeholder(m->g, LOOM_F32, 2, xd, "x");
  m->lab = loom_placeholder(m->g, LOOM_I32, 1, ld, "labels");
  loom_output h = parity_dense(m->g, m->x, IN, H, 1, "fc1");
  h = parity_dense(m->g, h, H, C, 0, "fc2");
  m->loss = loom_reduce_mean(m->g, loom_sparse_softmax_cross_entropy_with_logits(m->g, h, m->lab, NULL, NULL, NULL), -1,
                             NULL, 0, NULL);
  m->opt = loom_optimizer_adam(loom_const_f32(m->g, 0.01f, NULL), NULL);
  m->train = loom_optimizer_minimize(m->opt, m->g, m->loss, 0, NULL, NULL, NULL);
  m->init = loom_global_variables_initializer(m->g);
  int nv = 0;
  loom_variable *const *vars = loom_global_variables(m->g, &nv);
  loom_variable *b2 = NULL;
  for (int i = 0; i < nv; i++)
    if (!strcmp(loom_variable_name(vars[i]), "fc2/b")) b2 = vars[i];
  int64_t bd[1] = {C};
  loom_tensor *half = loom_tensor_new(LOOM_F32, 1, bd, NULL), *str = loom_tensor_new(LOOM_STRING, 0, NULL, NULL);
  for (int i = 0; half && i < C; i++) ((float *)loom_tensor_data(half))[i] = 0.5f;
  if (!b2 || !half || !str || loom_tensor_set_string(str, 0, "host", 4, NULL)) {
    loom_tensor_free(half);
    loom_tensor_free(str);
    return 0;
  }
  m->bump = loom_assign_add(m->g, loom_variable_output(b2), loom_const(m->g, half, NULL), "bump");
  m->text = loom_const(m->g, str, "text");
  loom_tensor_free(half);
  loom_tensor_free(str);
  m->fx = rand_tensor(LOOM_F32, 2, xd, 0);
  m->fl = rand_tensor(LOOM_I32, 1, ld, C);
  m->cpu = session(m->g, LOOM_DEVICE_CPU);
  m->gpu = session(m->g, LOOM_DEVICE_CUDA);
  return m->cpu && m->gpu && run(m->cpu, "init", NULL, NULL, 0, NULL, NULL, 0, &m->init, 1) &&
         run(m->gpu, "init", NULL, NULL, 0, NULL, NULL, 0, &m->init, 1);
}

static void model_free(model *m) {
  loom_optimizer_free(m->opt);
  loom_tensor_free(m->fx);
  loom_tensor_free(m->fl);
  loom_session_free(m->cpu);
  loom_session_free(m->gpu);
  loom_graph_free(m->g);
}

/* One training step on both sessions; the losses must agree. Returns the
 * emulator's counts for the CUDA session's run alone. */
static cuemu_stats step(model *m, const char *what) {
  loom_output feeds[2] = {m->x, m->lab};
  loom_tensor *fv[2] = {m->fx, m->fl};
  loom_tensor *lc = NULL, *lg = NULL;
  run(m->cpu, what, feeds, fv, 2, &m->loss, &lc, 1, &m->train, 1);
  cuemu_stats a = snap();
  run(m->gpu, what, feeds, fv, 2, &m->loss, &lg, 1, &m->train, 1);
  cuemu_stats d = diff(a, snap());
  if (lc && lg) compare(what, lc, lg, 1e-4);
  else parity_check(0, "%s: no loss", what);
  loom_tensor_free(lc);
  loom_tensor_free(lg);
  return d;
}

static size_t var_bytes(loom_graph *g, const char *name) {
  int nv = 0;
  loom_variable *const *vars = loom_global_variables(g, &nv);
  for (int i = 0; i < nv; i++)
    if (!strcmp(loom_variable_name(vars[i]), name)) {
      int64_t d[LOOM_MAX_DIMS];
      int nd = loom_variable_dims(vars[i], d);
      size_t n = 4;
      for (int k = 0; k < nd; k++) n *= (size_t)d[k];
      return n;
    }
  return 0;
}

/* A run that fails part-way keeps what its earlier steps wrote: v += 1 runs
 * on the device, then a gather with a bad index fails the run (on the CPU
 * fallback with LOOM_CUDA_DISABLE=GatherV2, or on the device synchronized
 * per step with LOOM_CUDA_SYNC=1, both of which stop before the run's end).
 * Reading v must then give 1 on both devices, and the next good run 2. */
static void failed_run_case(const char *env, const char *val) {
  loom_graph *g = loom_graph_new();
  int64_t one[1] = {1};
  loom_initializer zi = loom_init_zeros();
  loom_variable *v = loom_get_variable(g, "v", LOOM_F32, 1, one, &zi, 1);
  loom_tensor *inc = loom_tensor_new(LOOM_F32, 1, one, NULL);
  ((float *)loom_tensor_data(inc))[0] = 1.0f;
  loom_output upd = loom_assign_add(g, loom_variable_output(v), loom_const(g, inc, NULL), "upd");
  loom_tensor_free(inc);
  loom_output idx = loom_placeholder(g, LOOM_I64, 1, one, "idx");
  loom_output y = loom_gather(g, loom_reshape(g, upd, 1, one, NULL), idx, 0, "pick");
  loom_node *init = loom_global_variables_initializer(g);
  setenv(env, val, 1); /* read when the session is created */
  loom_session *sc = session(g, LOOM_DEVICE_CPU), *sg = session(g, LOOM_DEVICE_CUDA);
  unsetenv(env);
  int64_t badv = 5, goodv = 0;
  loom_tensor *bad = loom_tensor_new(LOOM_I64, 1, one, NULL), *good = loom_tensor_new(LOOM_I64, 1, one, NULL);
  memcpy(loom_tensor_data(bad), &badv, 8);
  memcpy(loom_tensor_data(good), &goodv, 8);
  loom_status *st = loom_status_new();
  loom_session *ss[2] = {sc, sg};
  float got[2][2] = {{-1, -1}, {-1, -1}};
  for (int k = 0; k < 2 && sc && sg; k++) {
    loom_tensor *out = NULL, *r = NULL;
    run(ss[k], "init", NULL, NULL, 0, NULL, NULL, 0, &init, 1);
    loom_session_read_variable(ss[k], "v", &r, st); /* the host copy is current: the failed run must mark it stale */
    loom_code rc = loom_session_run(ss[k], &idx, &bad, 1, &y, &out, 1, NULL, 0, st);
    parity_check(rc == LOOM_INVALID_ARGUMENT && strstr(loom_status_message(st), "pick"),
           "%s=%s: a bad index fails the run naming the gather (device %d: %d %s)", env, val, k, (int)rc,
           loom_status_message(st));
    if (!loom_session_read_variable(ss[k], "v", &r, st)) got[k][0] = ((const float *)loom_tensor_data(r))[0];
    run(ss[k], "good run", &idx, &good, 1, &y, &out, 1, NULL, 0);
    if (!loom_session_read_variable(ss[k], "v", &r, st)) got[k][1] = ((const float *)loom_tensor_data(r))[0];
    loom_tensor_free(out);
    loom_tensor_free(r);
  }
  parity_check(got[0][0] == 1 && got[1][0] == 1, "%s=%s: after the failed run v is %g on the CPU, %g on the GPU (want 1)", env,
         val, got[0][0], got[1][0]);
  parity_check(got[0][1] == 2 && got[1][1] == 2, "%s=%s: after the next run v is %g on the CPU, %g on the GPU (want 2)", env,
         val, got[0][1], got[1][1]);
  loom_status_free(st);
  loom_tensor_free(bad);
  loom_tensor_free(good);
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(g);
}

int main(void) {
  unsetenv("LOOM_CUDA_SYNC"); /* the counts are those of the default mode: one synchronization per run */
  unsetenv("LOOM_CUDA_DISABLE");
  if (!parity_gpu_present("test_cuda_residency")) return 0;
  if (!COUNTS) printf("test_cuda_residency: not the emulator, so values are compared but API calls are not counted\n");
  model m;
  if (!model_new(&m)) {
    parity_check(0, "building the model and its sessions");
    model_free(&m);
    return parity_report("test_cuda_residency");
  }
  const unsigned long long feed_bytes = (unsigned long long)B * IN * 4 + B * 4, fetch_bytes = 4;
  char what[96];
  for (int i = 0; i < 2; i++) {
    snprintf(what, sizeof what, "warm-up step %d", i);
    step(&m, what);
  }

  /* 1. steady state: only feeds in, only the loss out (and the kernels'
   * 40-byte bad-index record, both copied with the run's one synchronization) */
  const int N = 10;
  cuemu_stats t0 = snap(); /* the CPU session makes no CUDA calls */
  for (int i = 0; i < N; i++) {
    snprintf(what, sizeof what, "steady step %d", i);
    step(&m, what);
  }
  cuemu_stats tot = diff(t0, snap());
  if (COUNTS) {
    printf("test_cuda_residency: per MLP+Adam step (2 dense layers, 8 variables with slots): kernels=%.1f gemms=%.1f "
           "h2d=%.1f (%.0f B) d2h=%.1f (%.0f B) d2d=%.1f memsets=%.1f syncs=%.1f mallocs=%.1f\n",
           tot.kernels / (double)N, tot.gemms / (double)N, tot.h2d / (double)N, tot.h2d_bytes / (double)N,
           tot.d2h / (double)N, tot.d2h_bytes / (double)N, tot.d2d / (double)N, tot.memsets / (double)N,
           tot.syncs / (double)N, tot.mallocs / (double)N);
    parity_check(tot.mallocs == 0 && tot.frees == 0, "steady steps call cudaMalloc %llu and cudaFree %llu times (want 0)",
           tot.mallocs, tot.frees);
    parity_check(tot.h2d_bytes == N * feed_bytes && tot.h2d == 2ull * N,
           "steady steps copy %llu bytes in %llu copies to the device (want the feeds: %llu in %d)", tot.h2d_bytes,
           tot.h2d, N * feed_bytes, 2 * N);
    parity_check(tot.d2h_bytes <= N * (fetch_bytes + 64) && tot.d2h <= 2ull * N,
           "steady steps copy %llu bytes in %llu copies to the host (want the loss and the index record: <= %llu in "
           "%d)",
           tot.d2h_bytes, tot.d2h, N * (fetch_bytes + 64), 2 * N);
    parity_check(tot.syncs == 1ull * N, "steady steps synchronize %llu times (want once a step: kernels, loss and index record together)", tot.syncs);
    parity_check(tot.gemms == 5ull * N, "a step makes %llu gemm calls (want 2 forward + 3 backward: x gets no gradient)", tot.gemms / N);
  }

  /* 2. reading one variable copies that one down */
  loom_status *st = loom_status_new();
  loom_tensor *a = NULL, *b = NULL;
  cuemu_stats s0 = snap();
  loom_code rc = loom_session_read_variable(m.gpu, "fc1/w", &b, st);
  cuemu_stats d = diff(s0, snap());
  parity_check(rc == LOOM_OK, "read_variable fc1/w: %s", loom_status_message(st));
  if (COUNTS)
    parity_check(d.d2h_bytes == var_bytes(m.g, "fc1/w") && d.h2d_bytes == 0,
           "reading fc1/w copies %llu bytes down and %llu up (want %zu and 0)", d.d2h_bytes, d.h2d_bytes,
           var_bytes(m.g, "fc1/w"));
  if (!loom_session_read_variable(m.cpu, "fc1/w", &a, st) && b) compare("fc1/w read from both sessions", a, b, 1e-4);
  /* a second read finds the host copy current */
  s0 = snap();
  rc = loom_session_read_variable(m.gpu, "fc1/w", &b, st);
  d = diff(s0, snap());
  if (COUNTS) parity_check(rc == LOOM_OK && d.d2h_bytes == 0, "reading fc1/w again copies %llu bytes (want 0)", d.d2h_bytes);

  /* 3. assigning one variable re-uploads that one at the next step */
  int64_t bd[1] = {C};
  loom_tensor *nb = loom_tensor_new(LOOM_F32, 1, bd, NULL);
  for (int i = 0; i < C; i++) ((float *)loom_tensor_data(nb))[i] = 0.25f * (float)(i - 4);
  s0 = snap();
  rc = loom_session_assign_variable(m.gpu, "fc2/b", nb, st);
  d = diff(s0, snap());
  parity_check(rc == LOOM_OK && !loom_session_assign_variable(m.cpu, "fc2/b", nb, st), "assign_variable fc2/b: %s",
         loom_status_message(st));
  if (COUNTS) parity_check(d.d2h_bytes == 0, "assigning fc2/b copies %llu bytes down (want 0)", d.d2h_bytes);
  d = step(&m, "step after assigning fc2/b");
  if (COUNTS)
    parity_check(d.h2d_bytes == feed_bytes + var_bytes(m.g, "fc2/b"),
           "the step after assigning fc2/b copies %llu bytes up (want the feeds + fc2/b: %llu)", d.h2d_bytes,
           feed_bytes + var_bytes(m.g, "fc2/b"));
  step(&m, "second step after assigning fc2/b");

  /* 4. a CPU-only plan (it fetches a string) that writes fc2/b in place:
   * only fc2/b comes down for it, and only fc2/b goes back up at the next
   * device step */
  loom_output fetch2[2] = {m.text, m.bump};
  loom_tensor *oc[2] = {NULL, NULL}, *og[2] = {NULL, NULL};
  run(m.cpu, "cpu-only plan", NULL, NULL, 0, fetch2, oc, 2, NULL, 0);
  s0 = snap();
  run(m.gpu, "cpu-only plan", NULL, NULL, 0, fetch2, og, 2, NULL, 0);
  d = diff(s0, snap());
  if (COUNTS) /* it binds fc2/b alone: that one comes down, no other variable or slot */
    parity_check(d.d2h_bytes == var_bytes(m.g, "fc2/b") && d.h2d_bytes == 0,
           "the CPU-only plan copies %llu bytes down and %llu up (want fc2/b: %zu, and 0)", d.d2h_bytes, d.h2d_bytes,
           var_bytes(m.g, "fc2/b"));
  if (oc[1] && og[1]) compare("bumped fc2/b", oc[1], og[1], 1e-4);
  else parity_check(0, "the CPU-only plan fetched nothing");
  d = step(&m, "step after a CPU-only plan wrote fc2/b");
  if (COUNTS)
    parity_check(d.h2d_bytes == feed_bytes + var_bytes(m.g, "fc2/b"),
           "the step after a CPU-only plan wrote fc2/b copies %llu bytes up (want the feeds + fc2/b: %llu)",
           d.h2d_bytes, feed_bytes + var_bytes(m.g, "fc2/b"));
  d = step(&m, "second step after the CPU-only plan");
  if (COUNTS)
    parity_check(d.h2d_bytes == feed_bytes, "and the next one %llu bytes (want the feeds: %llu)", d.h2d_bytes, feed_bytes);

  /* 5. every variable and slot agrees at the end */
  int nv = 0;
  loom_variable *const *vars = loom_get_variable_collection(m.g, LOOM_GLOBAL_VARIABLES, &nv);
  for (int i = 0; i < nv; i++) {
    if (!loom_session_read_variable(m.cpu, loom_variable_name(vars[i]), &a, st) &&
        !loom_session_read_variable(m.gpu, loom_variable_name(vars[i]), &b, st)) {
      snprintf(what, sizeof what, "variable %s at the end", loom_variable_name(vars[i]));
      compare(what, a, b, 1e-4);
    } else {
      parity_check(0, "reading %s: %s", loom_variable_name(vars[i]), loom_status_message(st));
    }
  }
  for (int i = 0; i < 2; i++) {
    loom_tensor_free(oc[i]);
    loom_tensor_free(og[i]);
  }
  loom_tensor_free(nb);
  loom_tensor_free(a);
  loom_tensor_free(b);
  loom_status_free(st);
  model_free(&m);

  failed_run_case("LOOM_CUDA_DISABLE", "GatherV2");
  failed_run_case("LOOM_CUDA_SYNC", "1");
  return parity_report("test_cuda_residency");
}
