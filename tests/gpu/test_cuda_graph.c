/* tests/gpu/test_cuda_graph.c - whole-step CUDA graphs (engine/backend.c
 * loom__dev_run_graph): a plan's second run captures its steps into a graph, later runs launch it.
 * Each case trains or runs the same graph in a session with graphs (the default) and one with
 * LOOM_CUDA_GRAPHS=0, feeding both the same values, and every fetched value and variable must be
 * equal bit for bit (same kernels, same order). Cases: an MLP + Adam step, with the batch size
 * changed part-way (the captured graph no longer matches and is captured again); a plan with a
 * random op (never captured: its kernels read a host-side run counter), whose draws must differ
 * from run to run; a plan with a CPU-fallback step (LOOM_CUDA_DISABLE=MatMul: never captured); two
 * plans sharing the device scratch, where the bigger one makes it grow (the smaller one's graph is
 * stale and captured again).
 * Under the CUDA emulator (make test-cuemu) the graph launches are counted too. */
#include "tests/gpu/parity.h"
#ifdef LOOM_CUEMU
#include <cuda_runtime_api.h>
static unsigned long long graph_launches(void) {
  cuemu_stats s;
  cuemu_get_stats(&s);
  return s.graph_launches;
}
#define COUNTS 1
#else
static unsigned long long graph_launches(void) { return 0; }
#define COUNTS 0
#endif

enum { IN = 64, H = 32, C = 10 };

static loom_session *session_env(loom_graph *g, const char *env, const char *val) {
  if (env) setenv(env, val, 1); /* read when the session is created */
  loom_session *s = session(g, LOOM_DEVICE_CUDA);
  if (env) unsetenv(env);
  return s;
}

static int bits_equal(const char *what, const loom_tensor *a, const loom_tensor *b) {
  return parity_check(a && b && loom_tensor_numel(a) == loom_tensor_numel(b) &&
                          !memcmp(loom_tensor_data_const(a), loom_tensor_data_const(b),
                                  (size_t)loom_tensor_numel(a) * 4),
                      "%s: graph and plain runs give the same bits", what);
}

static void mlp_case(void) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, IN}, ld[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_output lab = loom_placeholder(g, LOOM_I32, 1, ld, "labels");
  loom_output h = parity_dense(g, x, IN, H, 1, "fc1");
  h = parity_dense(g, h, H, C, 0, "fc2");
  loom_output loss =
      loom_reduce_mean(g, loom_sparse_softmax_cross_entropy_with_logits(g, h, lab, NULL, NULL, NULL), -1, NULL, 0, NULL);
  loom_optimizer *opt = loom_optimizer_adam(loom_const_f32(g, 0.01f, NULL), NULL);
  loom_node *train = loom_optimizer_minimize(opt, g, loss, 0, NULL, NULL, NULL);
  loom_node *init = loom_global_variables_initializer(g);
  loom_session *sg = session_env(g, NULL, NULL), *sp = session_env(g, "LOOM_CUDA_GRAPHS", "0");
  if (sg && sp && run(sg, "init", NULL, NULL, 0, NULL, NULL, 0, &init, 1) &&
      run(sp, "init", NULL, NULL, 0, NULL, NULL, 0, &init, 1)) {
    unsigned long long g0 = graph_launches();
    int launched_at_16 = 0;
    for (int k = 0; k < 8; k++) {
      int64_t b = k < 5 ? 16 : 24; /* the batch changes at step 5: a new shape, captured again */
      int64_t bx[2] = {b, IN}, bl[1] = {b};
      loom_tensor *fx = rand_tensor(LOOM_F32, 2, bx, 0), *fl = rand_tensor(LOOM_I32, 1, bl, C);
      loom_output feeds[2] = {x, lab};
      loom_tensor *fv[2] = {fx, fl}, *lg = NULL, *lp = NULL;
      char what[64];
      snprintf(what, sizeof what, "mlp adam step %d (batch %lld)", k, (long long)b);
      run(sg, what, feeds, fv, 2, &loss, &lg, 1, &train, 1);
      run(sp, what, feeds, fv, 2, &loss, &lp, 1, &train, 1);
      bits_equal(what, lg, lp);
      if (k == 4) launched_at_16 = (int)(graph_launches() - g0);
      loom_tensor_free(lg);
      loom_tensor_free(lp);
      loom_tensor_free(fx);
      loom_tensor_free(fl);
    }
    /* batch 16: run 1 plain, runs 2-5 graphs; batch 24 (new buffers and shapes): run 6 plain, 7-8 graphs */
    if (COUNTS) {
      int total = (int)(graph_launches() - g0);
      parity_check(launched_at_16 == 4 && total == 6,
                   "mlp: graph launches %d after 5 steps of batch 16 (want 4), %d after 8 (want 6)", launched_at_16,
                   total);
    }
    const char *names[] = {"fc1/w", "fc1/b", "fc2/w", "fc2/b"};
    loom_status *st = loom_status_new();
    for (int i = 0; i < 4; i++) {
      loom_tensor *a = NULL, *b = NULL;
      loom_session_read_variable(sg, names[i], &a, st);
      loom_session_read_variable(sp, names[i], &b, st);
      char what[64];
      snprintf(what, sizeof what, "mlp: variable %s after 8 steps", names[i]);
      bits_equal(what, a, b);
      loom_tensor_free(a);
      loom_tensor_free(b);
    }
    loom_status_free(st);
  }
  loom_optimizer_free(opt);
  loom_session_free(sg);
  loom_session_free(sp);
  loom_graph_free(g);
}

/* A random draw is never captured: each run draws anew. */
static void random_case(void) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {8, 16};
  loom_output y = loom_mul(g, loom_random_uniform(g, 2, d, LOOM_F32, 0, 1, 3, 4, "draw"), loom_const_f32(g, 2.0f, NULL),
                           "y");
  loom_session *s = session_env(g, NULL, NULL);
  if (s) {
    unsigned long long g0 = graph_launches();
    loom_tensor *r[4] = {0};
    for (int k = 0; k < 4; k++) run(s, "random draw", NULL, NULL, 0, &y, &r[k], 1, NULL, 0);
    int differ = r[2] && r[3] && memcmp(loom_tensor_data_const(r[2]), loom_tensor_data_const(r[3]), 8 * 16 * 4) != 0;
    parity_check(differ, "random: runs 3 and 4 draw different values (a captured graph would repeat one draw)");
    if (COUNTS)
      parity_check(graph_launches() == g0, "random: no graph launched (%llu)", graph_launches() - g0);
    for (int k = 0; k < 4; k++) loom_tensor_free(r[k]);
  }
  loom_session_free(s);
  loom_graph_free(g);
}

/* A plan with a CPU-fallback step runs uncaptured, with the same values. */
static void fallback_case(void) {
  loom_graph *g = loom_graph_new();
  int64_t ad[2] = {12, 9}, bd[2] = {9, 5};
  loom_output a = loom_placeholder(g, LOOM_F32, 2, ad, "a");
  loom_output b = loom_placeholder(g, LOOM_F32, 2, bd, "b");
  loom_output y = loom_tanh(g, loom_matmul(g, a, b, 0, 0, "mm"), "y");
  loom_session *sg = session_env(g, "LOOM_CUDA_DISABLE", "MatMul"), *sp = session_env(g, "LOOM_CUDA_GRAPHS", "0");
  if (sg && sp) {
    unsigned long long g0 = graph_launches();
    for (int k = 0; k < 3; k++) {
      loom_tensor *fa = rand_tensor(LOOM_F32, 2, ad, 0), *fb = rand_tensor(LOOM_F32, 2, bd, 0), *rg = NULL, *rp = NULL;
      loom_output feeds[2] = {a, b};
      loom_tensor *fv[2] = {fa, fb};
      run(sg, "fallback", feeds, fv, 2, &y, &rg, 1, NULL, 0);
      run(sp, "fallback", feeds, fv, 2, &y, &rp, 1, NULL, 0);
      if (rg && rp) compare("fallback: MatMul on the CPU, tanh on the device", rg, rp, 1e-5);
      loom_tensor_free(fa);
      loom_tensor_free(fb);
      loom_tensor_free(rg);
      loom_tensor_free(rp);
    }
    if (COUNTS) parity_check(graph_launches() == g0, "fallback: no graph launched (%llu)", graph_launches() - g0);
  }
  loom_session_free(sg);
  loom_session_free(sp);
  loom_graph_free(g);
}

/* Two plans share the context's scratch (convolution's im2col columns): a bigger one makes it grow,
 * which releases the block a captured graph of the smaller one writes. That graph must not be
 * launched again: the small plan runs once uncaptured and is captured anew. */
static void scratch_case(void) {
  loom_graph *g = loom_graph_new();
  int64_t ad[4] = {1, 8, 8, 3}, bd[4] = {4, 32, 32, 3}, wd[4] = {3, 3, 3, 4}, st1[4] = {1, 1, 1, 1};
  loom_output xa = loom_placeholder(g, LOOM_F32, 4, ad, "xa"), xb = loom_placeholder(g, LOOM_F32, 4, bd, "xb");
  loom_tensor *wv = rand_tensor(LOOM_F32, 4, wd, 0);
  loom_output w = loom_const(g, wv, "w");
  loom_output ya = loom_conv2d(g, xa, w, st1, LOOM_PADDING_SAME, NULL, "conv_a");
  loom_output yb = loom_conv2d(g, xb, w, st1, LOOM_PADDING_SAME, NULL, "conv_b");
  loom_session *sg = session_env(g, NULL, NULL), *sp = session_env(g, "LOOM_CUDA_GRAPHS", "0");
  if (sg && sp) {
    unsigned long long g0 = graph_launches();
    /* a a a b a a: graphs at the 2nd and 3rd a; the 4th a runs uncaptured (scratch grew), the 5th captures again */
    const char order[] = "aaabaa";
    for (int k = 0; order[k]; k++) {
      int big = order[k] == 'b';
      loom_tensor *fx = rand_tensor(LOOM_F32, 4, big ? bd : ad, 0), *rg = NULL, *rp = NULL;
      loom_output x = big ? xb : xa, y = big ? yb : ya;
      char what[64];
      snprintf(what, sizeof what, "scratch: run %d (%c)", k, order[k]);
      run(sg, what, &x, &fx, 1, &y, &rg, 1, NULL, 0);
      run(sp, what, &x, &fx, 1, &y, &rp, 1, NULL, 0);
      bits_equal(what, rg, rp);
      loom_tensor_free(fx);
      loom_tensor_free(rg);
      loom_tensor_free(rp);
    }
    if (COUNTS)
      parity_check(graph_launches() - g0 == 3, "scratch: %llu graph launches (want 3: the stale graph is not launched)",
                   graph_launches() - g0);
  }
  loom_tensor_free(wv);
  loom_session_free(sg);
  loom_session_free(sp);
  loom_graph_free(g);
}

int main(void) {
  if (!parity_gpu_present("test_cuda_graph")) return 0;
  mlp_case();
  random_case();
  fallback_case();
  scratch_case();
  return parity_report("test_cuda_graph");
}
