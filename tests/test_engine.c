/* Engine: tensors, graph building errors, sessions, plan cache, memory reuse,
 * no allocation in steady state, cancellation. */
#include <time.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include "test_util.h"

struct wrap_log {
  int calls;
  void *data;
  size_t nbytes;
};
static void wrap_dealloc(void *data, size_t nbytes, void *arg) {
  struct wrap_log *l = arg;
  l->calls++;
  l->data = data;
  l->nbytes = nbytes;
}

Test(tensor, create_wrap_reshape_strings) {
  int64_t d[2] = {2, 3};
  loom_tensor *t = loom_tensor_new(LOOM_F32, 2, d, NULL);
  cr_assert(t);
  cr_assert_eq(loom_tensor_numel(t), 6);
  cr_assert_eq(loom_tensor_nbytes(t), 24);
  cr_assert_eq(((uintptr_t)loom_tensor_data(t)) % 64, 0);
  float *p = loom_tensor_data(t);
  for (int i = 0; i < 6; i++) cr_assert_eq(p[i], 0.0f);
  int64_t d2[1] = {6};
  cr_assert_eq(loom_tensor_reshape(t, 1, d2, NULL), LOOM_OK);
  int64_t d3[1] = {7};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_tensor_reshape(t, 1, d3, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "6 to 7"));
  loom_tensor_free(t);

  int64_t neg[1] = {-2};
  cr_assert_null(loom_tensor_new(LOOM_F32, 1, neg, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert_null(loom_tensor_new((loom_dtype)99, 0, NULL, st));

  /* wrapped memory: not copied, handed back to the deallocator exactly once */
  float buf[4] = {1, 2, 3, 4};
  int64_t d4[1] = {4};
  struct wrap_log log = {0, NULL, 0};
  loom_tensor *w = loom_tensor_wrap(LOOM_F32, 1, d4, buf, sizeof buf, wrap_dealloc, &log, st);
  cr_assert(w);
  cr_assert_eq(loom_tensor_data(w), buf);
  cr_assert_eq(log.calls, 0);
  loom_tensor_free(w);
  cr_assert_eq(log.calls, 1);
  cr_assert_eq(log.data, buf);
  cr_assert_eq(log.nbytes, sizeof buf);
  /* a size that does not match the shape is refused and the buffer not taken */
  cr_assert_null(loom_tensor_wrap(LOOM_F32, 1, d4, buf, 8, wrap_dealloc, &log, st));
  cr_assert_eq(loom_status_code(st), LOOM_INVALID_ARGUMENT);
  cr_assert_eq(log.calls, 1);

  int64_t ds[1] = {2};
  loom_tensor *s = loom_tensor_new(LOOM_STRING, 1, ds, NULL);
  cr_assert_eq(loom_tensor_set_string(s, 1, "hello", 5, NULL), LOOM_OK);
  size_t len = 9;
  cr_assert_str_eq(loom_tensor_get_string(s, 0, &len), "");
  cr_assert_eq(len, 0);
  cr_assert_str_eq(loom_tensor_get_string(s, 1, &len), "hello");
  cr_assert_eq(len, 5);
  cr_assert_eq(loom_tensor_set_string(s, 2, "x", 1, st), LOOM_OUT_OF_RANGE);
  loom_tensor *s2 = loom_tensor_copy(s, NULL);
  cr_assert_str_eq(loom_tensor_get_string(s2, 1, NULL), "hello");
  loom_tensor_free(s);
  loom_tensor_free(s2);
  loom_status_free(st);
}

Test(graph, names_scopes_and_sticky_error) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {-1, 3};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, d, "x");
  loom_output a = loom_add(g, x, x, NULL);
  loom_output b = loom_add(g, x, x, NULL);
  cr_assert_str_eq(loom_node_name(a.node), "AddV2");
  cr_assert_str_eq(loom_node_name(b.node), "AddV2_1");
  loom_graph_push_scope(g, "dense");
  loom_output c = loom_add(g, a, b, "sum");
  loom_graph_pop_scope(g);
  loom_graph_push_scope(g, "dense");
  loom_output c2 = loom_add(g, a, b, "sum");
  loom_graph_pop_scope(g);
  cr_assert_str_eq(loom_node_name(c.node), "dense/sum");
  cr_assert_str_eq(loom_node_name(c2.node), "dense_1/sum");
  cr_assert_eq(loom_graph_find(g, "dense/sum"), c.node);
  cr_assert_eq(loom_graph_find_output(g, "dense_1/sum:0").node, c2.node);
  int64_t od[LOOM_MAX_DIMS];
  cr_assert_eq(loom_output_dims(c, od), 2);
  cr_assert_eq(od[0], -1);
  cr_assert_eq(od[1], 3);
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);

  /* shape mismatch: the error names the node and both shapes */
  int64_t d4[2] = {-1, 4};
  loom_output y = loom_placeholder(g, LOOM_F32, 2, d4, "y");
  loom_graph_push_scope(g, "layer");
  loom_output bad = loom_add(g, x, y, "Add");
  loom_graph_pop_scope(g);
  cr_assert(loom_output_valid(bad)); /* a harmless placeholder */
  loom_output after = loom_add(g, bad, x, NULL); /* keeps going */
  (void)after;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "layer/Add:"), "%s", loom_status_message(st));
  cr_assert(strstr(loom_status_message(st), "[?,3] and [?,4]"), "%s", loom_status_message(st));
  /* a session refuses to run a broken graph */
  loom_session *s = loom_session_new(g, NULL, st);
  loom_tensor *out = NULL;
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &x, &out, 1, NULL, 0, st), LOOM_FAILED_PRECONDITION);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

Test(graph, dtype_mismatch_and_foreign_inputs) {
  loom_graph *g = loom_graph_new(), *g2 = loom_graph_new();
  loom_output a = loom_const_f32(g, 1.0f, "a");
  loom_output b = loom_const_i32(g, 1, "b");
  loom_add(g, a, b, "mix");
  char msg[256];
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "mix: dtypes float32 and int32"), "%s", loom_status_message(st));
  loom_output c = loom_const_f32(g2, 1.0f, "c");
  loom_output foreign = loom_const_f32(g, 2.0f, "f");
  (void)foreign;
  loom_add(g2, c, a, "cross");
  cr_assert_eq(loom_graph_status(g2, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "cross: input 1 belongs to another graph"), "%s", loom_status_message(st));
  loom_output none = {NULL, 0};
  loom_graph *g3 = loom_graph_new();
  loom_add(g3, none, none, "n");
  cr_assert_eq(loom_graph_status(g3, st), LOOM_INVALID_ARGUMENT);
  snprintf(msg, sizeof msg, "%s", loom_status_message(st));
  cr_assert(strstr(msg, "n: input 0 is missing"), "%s", msg);
  loom_status_free(st);
  loom_graph_free(g);
  loom_graph_free(g2);
  loom_graph_free(g3);
}

Test(session, feeds_fetches_broadcast_and_errors) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {-1, 3};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, d, "x");
  float bv[3] = {10, 20, 30};
  int64_t bd[1] = {3};
  loom_output b = loom_const_data(g, LOOM_F32, 1, bd, bv, "b");
  loom_output y = loom_add(g, x, b, "y");
  loom_output z = loom_identity(g, y, "z");
  float xv[6] = {1, 2, 3, 4, 5, 6};
  int64_t xd[2] = {2, 3};
  loom_tensor *xt = tu_f32(2, xd, xv);
  loom_tensor *out = tu_run1(g, 1, &x, &xt, z);
  float want[6] = {11, 22, 33, 14, 25, 36};
  tu_expect_f32(out, 2, xd, want, 0);
  loom_tensor_free(out);

  char msg[512];
  /* missing feed names the placeholder */
  cr_assert_eq(tu_run_err(g, 0, NULL, NULL, z, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "x: placeholder must be fed"), "%s", msg);
  /* wrong fed shape */
  int64_t wd[2] = {2, 4};
  loom_tensor *wt = loom_tensor_new(LOOM_F32, 2, wd, NULL);
  cr_assert_eq(tu_run_err(g, 1, &x, &wt, z, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "x: fed shape [2,4] is incompatible with [?,3]"), "%s", msg);
  loom_tensor_free(wt);
  /* wrong fed dtype */
  loom_tensor *it = loom_tensor_new(LOOM_I32, 2, xd, NULL);
  cr_assert_eq(tu_run_err(g, 1, &x, &it, z, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "x: fed a int32 tensor, expected float32"), "%s", msg);
  loom_tensor_free(it);
  /* unknown fetch: an output of another graph */
  loom_graph *g2 = loom_graph_new();
  loom_output other = loom_const_f32(g2, 1, "other");
  cr_assert_eq(tu_run_err(g, 1, &x, &xt, other, msg, sizeof msg), LOOM_NOT_FOUND);
  cr_assert(strstr(msg, "other"), "%s", msg);
  loom_output badidx = {y.node, 3};
  cr_assert_eq(tu_run_err(g, 1, &x, &xt, badidx, msg, sizeof msg), LOOM_NOT_FOUND);
  /* feeding an intermediate value skips its producers */
  loom_tensor *yt = tu_f32(2, xd, xv);
  loom_tensor *o2 = tu_run1(g, 1, &y, &yt, z);
  tu_expect_f32(o2, 2, xd, xv, 0);
  loom_tensor_free(o2);
  loom_tensor_free(yt);
  loom_tensor_free(xt);
  loom_graph_free(g2);
  loom_graph_free(g);
}

Test(session, zero_size_and_rank0) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {-1, 3};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, d, "x");
  loom_output y = loom_add(g, x, x, "y");
  int64_t zd[2] = {0, 3};
  loom_tensor *zt = loom_tensor_new(LOOM_F32, 2, zd, NULL);
  loom_tensor *out = tu_run1(g, 1, &x, &zt, y);
  cr_assert_eq(loom_tensor_numel(out), 0);
  cr_assert_eq(loom_tensor_dim(out, 0), 0);
  cr_assert_eq(loom_tensor_dim(out, 1), 3);
  loom_tensor_free(out);
  loom_tensor_free(zt);
  loom_output s = loom_add(g, loom_const_f32(g, 2.5f, NULL), loom_const_f32(g, 4.0f, NULL), "s");
  out = tu_run1(g, 0, NULL, NULL, s);
  float w = 6.5f;
  tu_expect_f32(out, 0, NULL, &w, 0);
  loom_tensor_free(out);
  loom_graph_free(g);
}

Test(session, plan_cache_memory_reuse_and_no_malloc_in_steady_state) {
  tu_alloc_count_begin();
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x");
  loom_output h = x;
  for (int i = 0; i < 50; i++) h = loom_add(g, h, x, NULL);
  loom_session_options o = loom_session_options_default();
  o.num_threads = 2;
  loom_session *s = loom_session_new(g, &o, NULL);
  int64_t n = 100000;
  loom_tensor *xt = loom_tensor_new(LOOM_F32, 1, &n, NULL);
  float *xp = loom_tensor_data(xt);
  for (int64_t i = 0; i < n; i++) xp[i] = (float)(i % 7);
  loom_tensor *out = NULL;
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, &h, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  long before = tu_alloc_count();
  for (int r = 0; r < 5; r++)
    cr_assert_eq(loom_session_run(s, &x, &xt, 1, &h, &out, 1, NULL, 0, st), LOOM_OK);
  long after = tu_alloc_count();
  cr_assert_eq(after - before, 0, "steady-state runs allocated %ld times", after - before);
  const float *op = loom_tensor_data_const(out);
  for (int64_t i = 0; i < n; i += 997) cr_assert_eq(op[i], 51.0f * (float)(i % 7));
  loom_session_stats stats;
  loom_session_get_stats(s, &stats);
  cr_assert_eq(stats.plans_compiled, 1);
  cr_assert_eq(stats.plan_cache_hits, 5);
  cr_assert_eq(stats.nodes_run, 50);
  /* a chain keeps at most ~3 buffers live: far less than 50 */
  cr_assert(stats.arena_bytes <= 3 * n * 4 + 256, "arena %lld", (long long)stats.arena_bytes);
  cr_assert(stats.naive_bytes >= 50 * n * 4);
  /* a new batch size re-plans once, then is steady again */
  int64_t n2 = 10;
  loom_tensor *x2 = loom_tensor_new(LOOM_F32, 1, &n2, NULL);
  cr_assert_eq(loom_session_run(s, &x, &x2, 1, &h, &out, 1, NULL, 0, st), LOOM_OK);
  loom_session_get_stats(s, &stats);
  cr_assert_eq(stats.respecializations, 1);
  cr_assert_eq(loom_tensor_numel(out), 10);
  loom_tensor_free(x2);
  loom_tensor_free(out);
  loom_tensor_free(xt);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(g);
  tu_alloc_count_end();
}

/* An allocator that counts live bytes and gives every block its own
 * mapping, unmapped when freed: a plan that kept using a freed arena would
 * fault instead of reading stale memory. */
static atomic_long live_bytes;
static void *map_malloc(size_t n, void *u) {
  (void)u;
  size_t total = n + 64;
  char *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  *(size_t *)p = total;
  atomic_fetch_add(&live_bytes, (long)n);
  return p + 64;
}
static void map_free(void *q, void *u) {
  (void)u;
  if (!q) return;
  char *p = (char *)q - 64;
  size_t total = *(size_t *)p;
  atomic_fetch_sub(&live_bytes, (long)(total - 64));
  munmap(p, total);
}
static void *map_realloc(void *q, size_t n, void *u) {
  void *r = map_malloc(n, u);
  if (r && q) {
    size_t old = *(size_t *)((char *)q - 64) - 64;
    memcpy(r, q, old < n ? old : n);
    map_free(q, u);
  }
  return r;
}

/* x -> y = x + x -> z = y + x; run with fetch z or fetch y (two plans). */
static void run_fetch(loom_session *s, loom_output x, loom_output f, int64_t n, float want_mul) {
  loom_tensor *xt = loom_tensor_new(LOOM_F32, 1, &n, NULL), *out = NULL;
  float *xp = loom_tensor_data(xt);
  for (int64_t i = 0; i < n; i++) xp[i] = (float)(i % 5);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, &f, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_tensor_numel(out), n);
  const float *op = loom_tensor_data_const(out);
  for (int64_t i = 0; i < n; i += 101) cr_assert_eq(op[i], want_mul * (float)(i % 5));
  loom_tensor_free(out);
  loom_tensor_free(xt);
  loom_status_free(st);
}

/* An elementwise op writes its output over input 0 when no later step reads it and no fetch
 * returns it: a chain of them needs one buffer, and a value still read later (or fetched) keeps
 * its own. */
Test(session, elementwise_outputs_take_over_dying_inputs) {
  loom_graph *g = loom_graph_new();
  int64_t n = 50000, d[1] = {n};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x");
  loom_output a = loom_neg(g, x, "a");
  loom_output c = loom_square(g, loom_relu(g, a, "b"), "c"); /* a and b die at their reader */
  loom_output a2 = loom_neg(g, x, "a2");
  loom_output y = loom_add(g, loom_relu(g, a2, "b2"), a2, "y"); /* a2 read after relu: kept */
  loom_output a3 = loom_neg(g, x, "a3");
  loom_output b3 = loom_relu(g, a3, "b3"); /* a3 fetched: kept */
  loom_session *s = loom_session_new(g, NULL, NULL);
  loom_status *st = loom_status_new();
  loom_tensor *xt = loom_tensor_new(LOOM_F32, 1, d, NULL);
  float *xp = loom_tensor_data(xt);
  for (int64_t i = 0; i < n; i++) xp[i] = (float)(i % 9) - 4.0f;
  loom_tensor *out[4] = {0};
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, &c, out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session_stats stats;
  loom_session_get_stats(s, &stats);
  /* neg -> relu -> square into the fetch's tensor: neg's buffer is relu's (two before) */
  cr_assert(stats.arena_bytes <= n * 4 + 256, "arena %lld", (long long)stats.arena_bytes);
  const float *cp = loom_tensor_data_const(out[0]);
  for (int64_t i = 0; i < n; i++) {
    float r = xp[i] < 0 ? -xp[i] : 0.0f;
    cr_assert_eq(cp[i], r * r, "c[%lld]", (long long)i);
  }
  loom_output f[3] = {y, a3, b3};
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, f, out + 1, 3, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  const float *yp = loom_tensor_data_const(out[1]), *ap = loom_tensor_data_const(out[2]),
              *bp = loom_tensor_data_const(out[3]);
  for (int64_t i = 0; i < n; i++) {
    float v = -xp[i], r = v > 0 ? v : 0.0f;
    cr_assert_eq(yp[i], r + v, "y[%lld]", (long long)i);
    cr_assert_eq(ap[i], v, "a3[%lld]", (long long)i);
    cr_assert_eq(bp[i], r, "b3[%lld]", (long long)i);
  }
  for (int k = 0; k < 4; k++) loom_tensor_free(out[k]);
  loom_tensor_free(xt);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(g);
}

Test(session, plans_share_one_arena_and_follow_it_when_it_grows) {
  static const loom_allocator a = {map_malloc, map_realloc, map_free, NULL};
  atomic_store(&live_bytes, 0);
  loom_set_allocator(&a);
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x");
  loom_output y = loom_add(g, x, x, "y");
  loom_output z = loom_add(g, y, x, "z");
  loom_session *s = loom_session_new(g, NULL, NULL);
  const int64_t n = 1 << 18; /* 1 MB a value */
  run_fetch(s, x, z, n, 3.0f);
  run_fetch(s, x, z, n, 3.0f);
  long one = atomic_load(&live_bytes);
  run_fetch(s, x, y, n, 2.0f); /* a second plan: no second arena */
  long two = atomic_load(&live_bytes);
  cr_assert_lt(two - one, n * 4 / 2, "the second plan added %ld bytes", two - one);
  /* the first plan grows the arena (a 4x feed); the second, specialized for
   * the old one, must follow it (the old mapping is gone) */
  run_fetch(s, x, z, 4 * n, 3.0f);
  run_fetch(s, x, y, n, 2.0f);
  run_fetch(s, x, z, 4 * n, 3.0f);
  loom_session_stats stats;
  loom_session_get_stats(s, &stats);
  cr_assert_eq(stats.plans_compiled, 2);
  loom_session_free(s);
  loom_graph_free(g);
  loom_set_allocator(NULL);
}

Test(session, targets_control_deps_and_cancel) {
  loom_graph *g = loom_graph_new();
  loom_output a = loom_const_f32(g, 1, "a");
  loom_output b = loom_add(g, a, a, "b");
  loom_node *grp = loom_group(g, 1, &b.node, "grp");
  cr_assert(grp);
  loom_session *s = loom_session_new(g, NULL, NULL);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &grp, 1, st), LOOM_OK);
  loom_session_stats stats;
  loom_session_get_stats(s, &stats);
  cr_assert_eq(stats.nodes_run, 2); /* AddV2 + NoOp */
  loom_session_cancel(s);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &grp, 1, st), LOOM_CANCELLED);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &grp, 1, st), LOOM_OK);
  /* cycles through control inputs are reported, not looped on */
  loom_node_add_control_input(a.node, grp);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, &b, (loom_tensor *[]){NULL}, 1, NULL, 0, st), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(loom_status_message(st), "cycle"), "%s", loom_status_message(st));
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(g);
}

/* Workers that went to sleep between runs must be woken for the next
 * parallel kernel (a lost wake-up would hang here), and results stay right. */
Test(session, pool_wakes_sleeping_workers, .timeout = 60) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x");
  loom_output y = loom_add(g, x, x, "y");
  loom_session_options o = loom_session_options_default();
  o.num_threads = 2;
  loom_session *s = loom_session_new(g, &o, NULL);
  int64_t n = 200000;
  loom_tensor *xt = loom_tensor_new(LOOM_F32, 1, &n, NULL), *out = NULL;
  float *xp = loom_tensor_data(xt);
  for (int64_t i = 0; i < n; i++) xp[i] = (float)i;
  struct timespec pause = {0, 300000}; /* longer than the workers' spin */
  for (int r = 0; r < 200; r++) {
    cr_assert_eq(loom_session_run(s, &x, &xt, 1, &y, &out, 1, NULL, 0, NULL), LOOM_OK);
    const float *op = loom_tensor_data(out);
    cr_assert_eq(op[n - 1], 2.0f * (float)(n - 1));
    cr_assert_eq(op[n / 3], 2.0f * (float)(n / 3));
    if (r % 2) nanosleep(&pause, NULL);
  }
  loom_tensor_free(out);
  loom_tensor_free(xt);
  loom_session_free(s);
  loom_graph_free(g);
}

#if defined(LOOM_HAVE_CUDA) && !defined(LOOM_CUEMU)
#include <stdlib.h>
#include "engine/cuda/cublas_lazy.h"
/* A CUDA build does not link cuBLAS: it is opened on first use. Here (no
 * GPU needed) the toolkit's library must load and give every entry point. */
Test(cuda_build, cublas_is_loaded_on_first_use) {
  const char *why = loom__cublas_load_error();
  cr_assert_null(why, "%s", why);
}
/* A library that cannot be opened: the reason names it. (Without a GPU the
 * session below fails at the device count before it would need cuBLAS; on a
 * GPU machine it fails creating the handle. Either way UNAVAILABLE, never a
 * crash.) Criterion runs each test in its own process, so the library is
 * first loaded here with the variable set. */
Test(cuda_build, cublas_missing_is_a_clear_error) {
  setenv("LOOM_CUBLAS_LIBRARY", "/nonexistent/libcublas.so.99", 1);
  const char *why = loom__cublas_load_error();
  cr_assert_not_null(why);
  cr_assert(strstr(why, "cannot load cuBLAS") && strstr(why, "/nonexistent/libcublas.so.99"), "%s", why);
  loom_graph *g = loom_graph_new();
  loom_session_options o = loom_session_options_default();
  o.device = LOOM_DEVICE_CUDA;
  loom_status *st = loom_status_new();
  cr_assert_null(loom_session_new(g, &o, st));
  cr_assert_eq(loom_status_code(st), LOOM_UNAVAILABLE, "%s", loom_status_message(st));
  loom_status_free(st);
  loom_graph_free(g);
}
#include "engine/cuda/nccl_lazy.h"
/* NCCL, like cuBLAS, is opened on first use (the collective strategy's all-reduce on GPUs): here (no GPU
 * needed) the toolkit's libnccl must load with every entry point loom calls and make a communicator id. */
Test(cuda_build, nccl_is_loaded_on_first_use) {
#if !__has_include(<nccl.h>)
  fprintf(stderr, "SKIPPED: the CUDA toolkit has no nccl.h\n");
  return;
#endif
  loom_status *st = loom_status_new();
  char name[64] = "", id[128];
  size_t n = 0;
  cr_assert_eq(loom__nccl_load(name, sizeof name, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert(!strncmp(name, "NCCL 2.", 7), "%s", name);
  cr_assert_eq(loom__nccl_id(id, sizeof id, &n, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(n, 128);
  loom_status_free(st);
}
/* A library that cannot be opened: UNAVAILABLE naming it (the strategy then falls back to MPI). */
Test(cuda_build, nccl_missing_is_a_clear_error) {
  setenv("LOOM_NCCL_LIBRARY", "/nonexistent/libnccl.so.99", 1);
  loom_status *st = loom_status_new();
  char name[64] = "";
  cr_assert_eq(loom__nccl_load(name, sizeof name, st), LOOM_UNAVAILABLE);
#if __has_include(<nccl.h>)
  cr_assert(strstr(loom_status_message(st), "cannot load NCCL") &&
                strstr(loom_status_message(st), "/nonexistent/libnccl.so.99"),
            "%s", loom_status_message(st));
#endif
  loom_status_free(st);
}
#endif

/* A reused fetch tensor is written in place by the run (no copy after it),
 * except where that would be wrong: the tensor is fed to the same run (a
 * transpose reading and writing one buffer), the value is fetched twice,
 * or the tensor changed size. Every result is the plain one. */
Test(session, reused_fetch_tensors_written_in_place_only_when_safe) {
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 2, (int64_t[]){-1, -1}, "x");
  loom_output y = loom_transpose(g, x, 2, (int64_t[]){1, 0}, "y");
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  const float a[6] = {1, 2, 3, 4, 5, 6}, at[6] = {1, 4, 2, 5, 3, 6};
  loom_tensor *xa = tu_f32(2, (int64_t[]){2, 3}, a), *out = NULL;
  cr_assert_eq(loom_session_run(s, &x, &xa, 1, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  tu_expect_f32(out, 2, (int64_t[]){3, 2}, at, 0);
  void *data = loom_tensor_data(out);
  /* reused: same buffer, new values */
  float *xp = loom_tensor_data(xa);
  for (int i = 0; i < 6; i++) xp[i] = a[i] * 10;
  cr_assert_eq(loom_session_run(s, &x, &xa, 1, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_tensor_data(out), data);
  for (int i = 0; i < 6; i++) cr_assert_eq(((float *)data)[i], at[i] * 10);
  /* the fetch tensor fed back: transpose([3, 2]) into its own input's buffer would be wrong */
  cr_assert_eq(loom_session_run(s, &x, &out, 1, &y, &out, 1, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_tensor_dim(out, 0), 2);
  for (int i = 0; i < 6; i++) cr_assert_eq(((float *)loom_tensor_data(out))[i], a[i] * 10, "element %d", i);
  /* the same value fetched into two tensors */
  loom_tensor *o2[2] = {NULL, NULL};
  loom_output two[2] = {y, y};
  for (int rep = 0; rep < 2; rep++) {
    xp[0] = (float)rep;
    cr_assert_eq(loom_session_run(s, &x, &xa, 1, two, o2, 2, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
    for (int k = 0; k < 2; k++) {
      const float *p = loom_tensor_data_const(o2[k]);
      cr_assert_eq(p[0], (float)rep);
      for (int i = 1; i < 6; i++) cr_assert_eq(p[i], at[i] * 10, "fetch %d element %d", k, i);
    }
  }
  loom_tensor_free(o2[0]);
  loom_tensor_free(o2[1]);
  loom_tensor_free(out);
  loom_tensor_free(xa);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}

/* The run observer (engine/engine_api.h): each fetch reported once, as soon as the step that makes it has
 * run and before the later steps, with its final value; fed values before the first step; a view with its
 * base. And the trace a layer above extends: spans added, a kept trace continued by the next run. */
#include "engine/engine_api.h"
typedef struct obs_log {
  int steps, n, fetch[8], at_step[8];
  float first[8];
  loom_output out[8];
} obs_log;
static void obs_fetch_cb(void *user, int f, loom_output out, const void *data, loom_dtype dt, int ndim,
                         const int64_t *dims) {
  obs_log *l = user;
  cr_assert_eq(dt, LOOM_F32);
  cr_assert_eq(ndim, 1);
  cr_assert_eq(dims[0], 3);
  l->fetch[l->n] = f;
  l->out[l->n] = out;
  l->at_step[l->n] = l->steps;
  l->first[l->n++] = ((const float *)data)[2];
}
static void obs_step_cb(void *user) { ((obs_log *)user)->steps++; }

Test(session, run_observer_reports_fetches_when_final) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {3};
  loom_output x = loom_placeholder(g, LOOM_F32, 1, d, "x");
  loom_output a = loom_add(g, x, x, "a");
  loom_output v = loom_identity(g, a, "v");
  loom_output b = loom_mul(g, a, a, "b");
  loom_output c = loom_add(g, b, x, "c");
  loom_session *s = loom_session_new(g, NULL, NULL);
  float xv[3] = {1, 2, 3};
  loom_tensor *xt = tu_f32(1, d, xv);
  loom_output fetches[4] = {c, v, x, a};
  loom_tensor *res[4] = {NULL, NULL, NULL, NULL};
  obs_log l = {0};
  loom__run_observer o = {&l, obs_fetch_cb, obs_step_cb};
  loom__session_set_observer(s, &o);
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, fetches, res, 4, NULL, 0, NULL), LOOM_OK);
  cr_assert_eq(l.n, 4, "%d fetches reported", l.n);
  int seen[4] = {0};
  for (int i = 0; i < 4; i++) seen[l.fetch[i]]++;
  for (int i = 0; i < 4; i++) cr_assert_eq(seen[i], 1, "fetch %d reported %d times", i, seen[i]);
  /* x (fed) before any step; a and its view v after a's step, before b and c run; c last, after every step */
  cr_assert_eq(l.fetch[0], 2);
  cr_assert_eq(l.at_step[0], 0);
  cr_assert_eq(l.fetch[3], 0);
  cr_assert_eq(l.at_step[3], l.steps - 1, "c reported after %d of %d steps", l.at_step[3], l.steps);
  cr_assert(l.at_step[1] < l.steps - 1 && l.at_step[2] < l.steps - 1, "a reported after %d of %d steps", l.at_step[1],
            l.steps);
  cr_assert(l.out[3].node == c.node && l.out[0].node == x.node);
  for (int i = 0; i < 4; i++) /* the value reported is the value fetched */
    cr_assert_float_eq(l.first[i], ((const float *)loom_tensor_data_const(res[l.fetch[i]]))[2], 0);
  cr_assert_float_eq(l.first[3], 39.0f, 0);
  /* cleared: no more reports */
  loom__session_set_observer(s, NULL);
  int before = l.n;
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, fetches, res, 4, NULL, 0, NULL), LOOM_OK);
  cr_assert_eq(l.n, before);

  /* traces: an added span and a kept trace continued by the next run */
  cr_assert_eq(loom__session_trace_origin(s), 0, "no traced run yet");
  loom_session_set_tracing(s, 1);
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, fetches, res, 4, NULL, 0, NULL), LOOM_OK);
  int n1 = 0;
  loom_session_last_trace(s, &n1);
  cr_assert(n1 >= 3 && loom__session_trace_origin(s) > 0);
  loom_trace_event span = {"my span", "AllReduce", 5, 7, 1};
  cr_assert_eq(loom__session_trace_add(s, &span, 1, NULL), LOOM_OK);
  loom__session_trace_keep(s, 1);
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, &c, res, 1, NULL, 0, NULL), LOOM_OK);
  loom__session_trace_keep(s, 0);
  int n2 = 0;
  const loom_trace_event *ev = loom_session_last_trace(s, &n2);
  cr_assert_eq(n2, n1 + 1 + n1, "%d events after a kept run (first run %d)", n2, n1);
  cr_assert_str_eq(ev[n1].node, "my span");
  cr_assert_eq(ev[n1].thread, 1);
  cr_assert(ev[n1 + 1].start_ns >= ev[n1 - 1].start_ns, "the kept run's times count from the first run's start");
  /* not kept: the next traced run starts a new trace */
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, &c, res, 1, NULL, 0, NULL), LOOM_OK);
  int n3 = 0;
  loom_session_last_trace(s, &n3);
  cr_assert_eq(n3, n1);
  loom_session_set_tracing(s, 0);
  cr_assert_eq(loom_session_run(s, &x, &xt, 1, &c, res, 1, NULL, 0, NULL), LOOM_OK);
  cr_assert_eq(loom__session_trace_origin(s), 0);
  for (int i = 0; i < 4; i++) loom_tensor_free(res[i]);
  loom_tensor_free(xt);
  loom_session_free(s);
  loom_graph_free(g);
}
