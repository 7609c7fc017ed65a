/* tests/gpu/test_parity_extra.c - GPU vs CPU parity of the kernels
 * that were kernels/cuda/extra.cu (now in math.cu, nn.cu, array.cu, optim.cu): Select, ClipByValue, L2Normalize, TopK,
 * TensorScatterAdd/Update, UnsortedSegmentMean/SqrtN (with gradients where
 * differentiable), the Ref scatters on variables, every sparse optimizer run
 * 5 steps on a [50, 8] variable with duplicate indices (variable and slots
 * compared; also with a gradient scale, and dense with a gradient scale), LearningRateSchedule, TopK's order on ties, NaN and signed
 * zeros, and bad indices failing the run with INVALID_ARGUMENT naming the
 * node. A node of these ops that falls back to the CPU is a failure.
 * Harness: tests/gpu/parity.h; skips without a CUDA device. */
#include "tests/gpu/parity.h"

/* ---- CPU fallbacks of this family's ops are failures ---- */
static const char *const family_ops[] = {
    "SelectV2",           "ClipByValue",         "L2Normalize",         "TopKV2",
    "TensorScatterAdd",   "TensorScatterUpdate", "ScatterUpdate",       "ScatterAdd",
    "ScatterSub",         "UnsortedSegmentMean", "UnsortedSegmentSqrtN", "SparseApplyMomentum",
    "SparseApplyAdagrad", "SparseApplyAdam",     "SparseApplyFtrlV2",   "SparseApplyRMSProp",
    "SparseApplyCenteredRMSProp", "SparseApplyAdadelta", "LearningRateSchedule", "ApplyMomentum",
    "ApplyAdagrad",       "ApplyAdam",           "ApplyFtrlV2",         "ApplyRMSProp",
    "ApplyCenteredRMSProp", "ApplyAdadelta"};
static int g_fallbacks;
static void on_log(loom_log_level level, const char *msg, void *user) {
  (void)level;
  (void)user;
  for (size_t i = 0; i < sizeof family_ops / sizeof family_ops[0]; i++) {
    char pat[96];
    snprintf(pat, sizeof pat, "op %s has no", family_ops[i]);
    if (strstr(msg, pat)) {
      printf("FAIL CPU fallback: %s\n", msg);
      g_fallbacks++;
    }
  }
}

/* ================================================================ cases */

static loom_output b_select(loom_graph *g, const loom_output *i) { return loom_select(g, i[0], i[1], i[2], NULL); }
static loom_output b_clip_c(loom_graph *g, const loom_output *i) {
  return loom_clip_by_value(g, i[0], loom_const_f32(g, -0.3f, NULL), loom_const_f32(g, 0.4f, NULL), NULL);
}
static loom_output b_clip(loom_graph *g, const loom_output *i) { return loom_clip_by_value(g, i[0], i[1], i[2], NULL); }
static loom_output b_l2_last(loom_graph *g, const loom_output *i) { return loom_l2_normalize(g, i[0], -1, 0, NULL); }
static loom_output b_l2_0(loom_graph *g, const loom_output *i) { return loom_l2_normalize(g, i[0], 0, 0, NULL); }
static loom_output b_l2_1(loom_graph *g, const loom_output *i) { return loom_l2_normalize(g, i[0], 1, 1e-3, NULL); }

static loom_output topk_out(loom_graph *g, loom_output x, int64_t k, int which) {
  loom_output v = {0}, ix = {0};
  loom_top_k(g, x, k, &v, &ix, NULL);
  return which ? ix : v;
}
#define TOPK(K)                                                                                                       \
  static loom_output b_topk##K##_v(loom_graph *g, const loom_output *i) { return topk_out(g, i[0], K, 0); }          \
  static loom_output b_topk##K##_i(loom_graph *g, const loom_output *i) { return topk_out(g, i[0], K, 1); }
TOPK(0)
TOPK(3)
TOPK(5)
TOPK(7)
TOPK(10)
TOPK(50)
TOPK(100)
TOPK(2500)
TOPK(3000)

static loom_output b_scat_add(loom_graph *g, const loom_output *i) { return loom_scatter_add(g, i[0], i[1], i[2], NULL); }
static loom_output b_scat_upd(loom_graph *g, const loom_output *i) {
  return loom_scatter_update(g, i[0], i[1], i[2], NULL);
}
static loom_output b_seg_mean12(loom_graph *g, const loom_output *i) {
  return loom_unsorted_segment_mean(g, i[0], i[1], 12, NULL);
}
static loom_output b_seg_sqrtn12(loom_graph *g, const loom_output *i) {
  return loom_unsorted_segment_sqrt_n(g, i[0], i[1], 12, NULL);
}
static loom_output b_seg_mean300(loom_graph *g, const loom_output *i) {
  return loom_unsorted_segment_mean(g, i[0], i[1], 300, NULL);
}
static loom_output b_seg_sqrtn300(loom_graph *g, const loom_output *i) {
  return loom_unsorted_segment_sqrt_n(g, i[0], i[1], 300, NULL);
}

static const pcase cases[] = {
    /* Select: cond, x, y */
    {"select same", 3, {BOOL, F32, F32}, {2, 2, 2}, {{33, 65}, {33, 65}, {33, 65}}, {0}, b_select, 0, 1},
    {"select bcast", 3, {BOOL, F32, F32}, {2, 2, 1}, {{33, 1}, {33, 65}, {65}}, {0}, b_select, 0, 1},
    {"select bcast all", 3, {BOOL, F32, F32}, {3, 2, 1}, {{4, 1, 6}, {5, 1}, {6}}, {0}, b_select, 0, 1},
    {"select scalar cond f64", 3, {BOOL, F64, F64}, {0, 2, 2}, {{0}, {7, 9}, {7, 9}}, {0}, b_select, 0, 1},
    {"select i32", 3, {BOOL, I32, I32}, {2, 2, 2}, {{17, 5}, {17, 5}, {1, 5}}, {0, 100, 100}, b_select, 0, 0},
    {"select i64", 3, {BOOL, I64, I64}, {1, 1, 1}, {{40}, {40}, {40}}, {0, 1000, 1000}, b_select, 0, 0},
    {"select u8", 3, {BOOL, U8, U8}, {1, 1, 1}, {{40}, {40}, {1}}, {0}, b_select, 0, 0},
    {"select bool", 3, {BOOL, BOOL, BOOL}, {1, 1, 1}, {{40}, {40}, {40}}, {0}, b_select, 0, 0},
    {"select large", 3, {BOOL, F32, F32}, {2, 2, 2}, {{300, 301}, {300, 301}, {300, 301}}, {0}, b_select, 0, 1},
    {"select zero-size", 3, {BOOL, F32, F32}, {2, 2, 1}, {{0, 5}, {0, 5}, {5}}, {0}, b_select, 0, 1},
    /* ClipByValue: t, lo, hi */
    {"clip const bounds", 1, {F32}, {2}, {{33, 65}}, {0}, b_clip_c, 0, 1},
    {"clip tensor bounds", 3, {F32, F32, F32}, {2, 1, 2}, {{33, 65}, {65}, {33, 65}}, {0}, b_clip, 0, 1},
    {"clip scalar bounds f64", 3, {F64, F64, F64}, {2, 0, 0}, {{9, 11}, {0}, {0}}, {0}, b_clip, 0, 1},
    {"clip i32", 3, {I32, I32, I32}, {2, 1, 2}, {{20, 30}, {30}, {1, 30}}, {100, 30, 100}, b_clip, 0, 0},
    {"clip i64", 3, {I64, I64, I64}, {1, 0, 0}, {{50}, {0}, {0}}, {100, 30, 100}, b_clip, 0, 0},
    {"clip large", 1, {F32}, {2}, {{300, 301}}, {0}, b_clip_c, 0, 1},
    {"clip zero-size", 3, {F32, F32, F32}, {2, 0, 0}, {{0, 5}, {0}, {0}}, {0}, b_clip, 0, 1},
    /* L2Normalize */
    {"l2 last axis", 1, {F32}, {2}, {{64, 33}}, {0}, b_l2_last, 1e-6, 1},
    {"l2 axis 0 strided", 1, {F32}, {2}, {{37, 129}}, {0}, b_l2_0, 1e-6, 1},
    {"l2 axis 1 columns", 1, {F32}, {3}, {{4, 50, 600}}, {0}, b_l2_1, 1e-6, 1},
    {"l2 long lines", 1, {F32}, {2}, {{3, 5000}}, {0}, b_l2_1, 1e-5, 1},
    {"l2 f64", 1, {F64}, {2}, {{17, 40}}, {0}, b_l2_last, 1e-12, 1},
    {"l2 scalar", 1, {F32}, {0}, {{0}}, {0}, b_l2_0, 1e-6, 0}, /* its gradient graph fails to build (Sum over axis 0 of a scalar) */
    {"l2 large", 1, {F32}, {2}, {{300, 301}}, {0}, b_l2_last, 1e-6, 1},
    {"l2 zero-size", 1, {F32}, {2}, {{0, 8}}, {0}, b_l2_last, 1e-6, 1},
    /* TopK: values (with gradient) and indices; rank path (n <= 64), shared
     * sort (n <= 2048), radix select (longer rows; k > 2048 sorts globally) */
    {"topk small values", 1, {F32}, {2}, {{50, 10}}, {0}, b_topk3_v, 0, 1},
    {"topk small indices", 1, {F32}, {2}, {{50, 10}}, {0}, b_topk3_i, 0, 0},
    {"topk ties i32 small", 1, {I32}, {2}, {{50, 40}}, {5}, b_topk10_i, 0, 0},
    {"topk sort values", 1, {F32}, {2}, {{20, 1000}}, {0}, b_topk7_v, 0, 1},
    {"topk sort indices", 1, {F32}, {2}, {{20, 1000}}, {0}, b_topk7_i, 0, 0},
    {"topk ties i32 sort", 1, {I32}, {2}, {{8, 1500}}, {20}, b_topk100_i, 0, 0},
    {"topk select values", 1, {F32}, {2}, {{3, 5000}}, {0}, b_topk5_v, 0, 1},
    {"topk select indices", 1, {F32}, {2}, {{3, 5000}}, {0}, b_topk5_i, 0, 0},
    {"topk ties i32 select k=3000", 1, {I32}, {2}, {{3, 5000}}, {50}, b_topk3000_i, 0, 0},
    {"topk f64 select k=2500 values", 1, {F64}, {2}, {{2, 3000}}, {0}, b_topk2500_v, 0, 1},
    {"topk f64 select k=2500", 1, {F64}, {2}, {{2, 3000}}, {0}, b_topk2500_i, 0, 0},
    {"topk i64 ties values", 1, {I64}, {3}, {{2, 3, 300}}, {7}, b_topk50_v, 0, 0},
    {"topk i64 ties", 1, {I64}, {3}, {{2, 3, 300}}, {7}, b_topk50_i, 0, 0},
    {"topk u8 ties select", 1, {U8}, {2}, {{4, 3000}}, {0}, b_topk50_i, 0, 0},
    {"topk u8 ties small", 1, {U8}, {1}, {{40}}, {0}, b_topk10_v, 0, 0},
    {"topk k=0", 1, {F32}, {2}, {{5, 10}}, {0}, b_topk0_v, 0, 0},
    {"topk k=0 indices", 1, {F32}, {2}, {{5, 10}}, {0}, b_topk0_i, 0, 0},
    {"topk k=n rank", 1, {F32}, {2}, {{6, 10}}, {0}, b_topk10_i, 0, 0},
    {"topk k=n sort", 1, {F32}, {2}, {{6, 100}}, {0}, b_topk100_i, 0, 0},
    {"topk k=n sort values", 1, {F32}, {2}, {{6, 100}}, {0}, b_topk100_v, 0, 1},
    {"topk k=n select", 1, {F32}, {2}, {{2, 3000}}, {0}, b_topk3000_v, 0, 1},
    {"topk many rows", 1, {F32}, {2}, {{2000, 40}}, {0}, b_topk5_v, 0, 1},
    {"topk zero rows", 1, {F32}, {2}, {{0, 10}}, {0}, b_topk3_v, 0, 0},
    /* TensorScatterAdd / Update: tensor [50, 7], indices with duplicates */
    {"scatter_add dups", 3, {F32, I64, F32}, {2, 1, 2}, {{50, 7}, {33}, {33, 7}}, {0, 50, 0}, b_scat_add, 0, 1},
    {"scatter_add [k,1] i32 idx", 3, {F32, I32, F32}, {2, 2, 2}, {{20, 3}, {30, 1}, {30, 3}}, {0, 20, 0}, b_scat_add, 0, 1},
    {"scatter_add f64", 3, {F64, I64, F64}, {3, 1, 3}, {{10, 2, 3}, {25}, {25, 2, 3}}, {0, 10, 0}, b_scat_add, 0, 1},
    {"scatter_add i32", 3, {I32, I64, I32}, {2, 1, 2}, {{10, 4}, {25}, {25, 4}}, {100, 10, 100}, b_scat_add, 0, 0},
    {"scatter_add i64", 3, {I64, I32, I64}, {1, 1, 1}, {{10}, {25}, {25}}, {100, 10, 100}, b_scat_add, 0, 0},
    {"scatter_add large", 3, {F32, I64, F32}, {2, 1, 2}, {{1000, 80}, {500}, {500, 80}}, {0, 1000, 0}, b_scat_add, 0, 1},
    {"scatter_add zero-size", 3, {F32, I64, F32}, {2, 1, 2}, {{50, 7}, {0}, {0, 7}}, {0, 50, 0}, b_scat_add, 0, 1},
    {"scatter_update dups", 3, {F32, I64, F32}, {2, 1, 2}, {{50, 7}, {33}, {33, 7}}, {0, 50, 0}, b_scat_upd, 0, 1},
    {"scatter_update f64", 3, {F64, I32, F64}, {2, 1, 2}, {{10, 3}, {25}, {25, 3}}, {0, 10, 0}, b_scat_upd, 0, 0},
    {"scatter_update i64", 3, {I64, I64, I64}, {2, 1, 2}, {{10, 3}, {25}, {25, 3}}, {100, 10, 100}, b_scat_upd, 0, 0},
    {"scatter_update u8", 3, {U8, I64, U8}, {2, 1, 2}, {{10, 3}, {25}, {25, 3}}, {0, 10, 0}, b_scat_upd, 0, 0},
    {"scatter_update bool", 3, {BOOL, I64, BOOL}, {1, 1, 1}, {{10}, {25}, {25}}, {0, 10, 0}, b_scat_upd, 0, 0},
    {"scatter_update large", 3, {F32, I64, F32}, {2, 1, 2}, {{1000, 80}, {500}, {500, 80}}, {0, 1000, 0}, b_scat_upd, 0, 1},
    /* UnsortedSegmentMean / SqrtN: 12 segments (some empty) */
    {"segment_mean", 2, {F32, I32}, {2, 1}, {{40, 6}, {40}}, {0, 10}, b_seg_mean12, 0, 1},
    {"segment_mean i64 ids 3-D", 2, {F32, I64}, {3, 1}, {{30, 2, 3}, {30}}, {0, 12}, b_seg_mean12, 0, 1},
    {"segment_mean f64", 2, {F64, I64}, {2, 1}, {{40, 6}, {40}}, {0, 10}, b_seg_mean12, 0, 1},
    {"segment_sqrtn", 2, {F32, I32}, {2, 1}, {{40, 6}, {40}}, {0, 10}, b_seg_sqrtn12, 0, 1},
    {"segment_sqrtn f64", 2, {F64, I32}, {1, 1}, {{40}, {40}}, {0, 12}, b_seg_sqrtn12, 0, 1},
    /* ~67 rows per segment: the GPU sums groups longer than 32 in pieces (another order): 1e-6 */
    {"segment_mean large", 2, {F32, I64}, {2, 1}, {{20000, 4}, {20000}}, {0, 300}, b_seg_mean300, 1e-6, 1},
    {"segment_sqrtn large", 2, {F32, I32}, {2, 1}, {{20000, 4}, {20000}}, {0, 300}, b_seg_sqrtn300, 1e-6, 1},
    {"segment_mean zero rows", 2, {F32, I32}, {2, 1}, {{0, 6}, {0}}, {0, 12}, b_seg_mean12, 0, 1},
};

/* ============================================= TopK: ties, NaN, signed zeros */
static const double specials[] = {1.5, NAN, -0.0, 0.0, 2.0, INFINITY, -INFINITY, 1.5, -0.0, NAN, 2.0, -1.0};
static void topk_special(int64_t n, int64_t k) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {3, n};
  loom_output x = loom_placeholder(g, F32, 2, d, "x");
  loom_output out[2];
  loom_top_k(g, x, k, &out[0], &out[1], "topk");
  loom_tensor *xv = loom_tensor_new(F32, 2, d, NULL);
  float *p = loom_tensor_data(xv);
  for (int64_t i = 0; i < 3 * n; i++) {
    int64_t r = i / n;
    /* row 0: specials cycled; row 1: few distinct values; row 2: descending runs with ties */
    p[i] = r == 0 ? (float)specials[i % 12] : r == 1 ? (float)((int)(urand() * 4) - 1) * 0.5f : (float)(((n - i % n) / 3) % 7);
  }
  loom_session *sc = session(g, LOOM_DEVICE_CPU), *sg = session(g, LOOM_DEVICE_CUDA);
  loom_tensor *oc[2] = {0}, *og[2] = {0};
  char what[96];
  snprintf(what, sizeof what, "topk specials n=%lld k=%lld", (long long)n, (long long)k);
  if (sc && sg && run(sc, what, &x, &xv, 1, out, oc, 2, NULL, 0) && run(sg, what, &x, &xv, 1, out, og, 2, NULL, 0)) {
    char w2[128];
    snprintf(w2, sizeof w2, "%s values", what); /* bit-exact: signed zeros come out as they went in */
    compare(w2, oc[0], og[0], 0);
    snprintf(w2, sizeof w2, "%s indices", what);
    compare(w2, oc[1], og[1], 0);
  }
  for (int i = 0; i < 2; i++) {
    loom_tensor_free(oc[i]);
    loom_tensor_free(og[i]);
  }
  loom_tensor_free(xv);
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(g);
}

/* ================================================ variables on both devices */
typedef struct {
  loom_session *sc, *sg;
} pair;

static int pair_open(pair *p, loom_graph *g, const char *what) {
  p->sc = session(g, LOOM_DEVICE_CPU);
  p->sg = session(g, LOOM_DEVICE_CUDA);
  if (!p->sc || !p->sg) return 0;
  loom_node *init = loom_global_variables_initializer(g);
  return run(p->sc, what, NULL, NULL, 0, NULL, NULL, 0, &init, 1) && run(p->sg, what, NULL, NULL, 0, NULL, NULL, 0, &init, 1);
}
static void pair_close(pair *p) {
  loom_session_free(p->sc);
  loom_session_free(p->sg);
}
/* Runs target on both; returns 1 when both succeed. */
static int pair_step(pair *p, const char *what, const loom_output *feeds, loom_tensor *const *fv, int nf, loom_node *t) {
  return run(p->sc, what, feeds, fv, nf, NULL, NULL, 0, &t, 1) && run(p->sg, what, feeds, fv, nf, NULL, NULL, 0, &t, 1);
}
/* Compares every global variable of g (or just `only` when not NULL). */
static void compare_vars(pair *p, loom_graph *g, const char *what, double tol, const char *skip) {
  int nv = 0;
  loom_variable *const *vars = loom_global_variables(g, &nv);
  for (int i = 0; i < nv; i++) {
    const char *name = loom_variable_name(vars[i]);
    if (skip && strstr(name, skip)) continue;
    loom_tensor *a = NULL, *b = NULL;
    loom_status *st = loom_status_new();
    char w[192];
    snprintf(w, sizeof w, "%s: variable %s", what, name);
    if (loom_session_read_variable(p->sc, name, &a, st) || loom_session_read_variable(p->sg, name, &b, st)) {
      printf("FAIL %s: %s\n", w, loom_status_message(st));
      g_fail++;
    } else {
      compare(w, a, b, tol);
    }
    loom_status_free(st);
    loom_tensor_free(a);
    loom_tensor_free(b);
  }
}

static loom_tensor *idx_tensor(loom_dtype dt, int nd, const int64_t *dims, const int64_t *v) {
  loom_tensor *t = loom_tensor_new(dt, nd, dims, NULL);
  int64_t n = loom_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    if (dt == I32) ((int32_t *)loom_tensor_data(t))[i] = (int32_t)v[i];
    else ((int64_t *)loom_tensor_data(t))[i] = v[i];
  }
  return t;
}
/* n indices into [0, rows) with duplicates: a few hot rows repeated. */
static void dup_indices(int64_t *v, int64_t n, int64_t rows) {
  for (int64_t i = 0; i < n; i++) v[i] = i % 4 == 0 ? 7 : i % 5 == 1 ? rows - 1 : (int64_t)(urand() * (double)rows);
}

/* ---- Ref scatters on variables: add, sub, update with duplicates, 3 rounds ---- */
static void ref_scatter_case(loom_dtype dt, int idx_2d) {
  loom_graph *g = loom_graph_new();
  int64_t vd[2] = {50, 8};
  loom_initializer ini = dt == F32 || dt == F64 ? loom_init_random_uniform(-1, 1, 5) : loom_init_constant(3);
  loom_variable *v = loom_get_variable(g, "ref", dt, 2, vd, &ini, 0);
  int64_t id2[2] = {3, 4}, id1[1] = {12}, ud3[3] = {3, 4, 8}, ud2[2] = {12, 8};
  loom_output ix = idx_2d ? loom_placeholder(g, I32, 2, id2, "ix") : loom_placeholder(g, I64, 1, id1, "ix");
  loom_output up = idx_2d ? loom_placeholder(g, dt, 3, ud3, "up") : loom_placeholder(g, dt, 2, ud2, "up");
  loom_output ref = loom_variable_output(v);
  loom_node *ops[3] = {loom_var_scatter_add(g, ref, ix, up, "scatter_add").node,
                       loom_var_scatter_sub(g, ref, ix, up, "scatter_sub").node,
                       loom_var_scatter_update(g, ref, ix, up, "scatter_update").node};
  static const char *const names[3] = {"add", "sub", "update"};
  pair p;
  char what[128];
  snprintf(what, sizeof what, "ref scatter %s%s", loom_dtype_name(dt), idx_2d ? " 2-D indices" : "");
  if (pair_open(&p, g, what)) {
    for (int round = 0; round < 3; round++)
      for (int o = 0; o < 3; o++) {
        int64_t iv[12];
        dup_indices(iv, 12, 50);
        loom_tensor *ixv = idx_2d ? idx_tensor(I32, 2, id2, iv) : idx_tensor(I64, 1, id1, iv);
        loom_tensor *upv = idx_2d ? rand_tensor(dt, 3, ud3, 100) : rand_tensor(dt, 2, ud2, 100);
        loom_output feeds[2] = {ix, up};
        loom_tensor *fv[2] = {ixv, upv};
        char w[160];
        snprintf(w, sizeof w, "%s %s round %d", what, names[o], round);
        if (pair_step(&p, w, feeds, fv, 2, ops[o])) compare_vars(&p, g, w, 0, NULL);
        loom_tensor_free(ixv);
        loom_tensor_free(upv);
      }
  }
  pair_close(&p);
  loom_graph_free(g);
}

/* ---- sparse optimizers: 5 steps on [50, 8] with duplicate indices ---- */
enum {
  O_MOM, O_MOM_NEST, O_ADAGRAD, O_ADAM, O_ADAM_LAZY, O_FTRL, O_FTRL_POW, O_RMS, O_CRMS, O_ADADELTA, O_RMS_KERAS,
  O_CRMS_KERAS, O_COUNT
};
static const char *const opt_names[O_COUNT] = {"momentum", "momentum nesterov", "adagrad", "adam", "adam lazy",
                                               "ftrl", "ftrl power -0.7 l1 l2 shrinkage", "rmsprop momentum",
                                               "centered rmsprop", "adadelta",
                                               "rmsprop keras_legacy (every row's mean square decays)",
                                               "centered rmsprop keras_legacy"};
static loom_optimizer *make_opt(int kind, loom_output lr) {
  switch (kind) {
  case O_MOM:
  case O_MOM_NEST: {
    loom_momentum_options o = loom_momentum_options_default();
    o.use_nesterov = kind == O_MOM_NEST;
    return loom_optimizer_momentum(lr, &o);
  }
  case O_ADAGRAD: return loom_optimizer_adagrad(lr, NULL);
  case O_ADAM:
  case O_ADAM_LAZY: {
    loom_adam_options o = loom_adam_options_default();
    o.lazy = kind == O_ADAM_LAZY;
    return loom_optimizer_adam(lr, &o);
  }
  case O_FTRL: return loom_optimizer_ftrl(lr, NULL);
  case O_FTRL_POW: {
    loom_ftrl_options o = loom_ftrl_options_default();
    o.learning_rate_power = -0.7;
    o.l1 = 0.01;
    o.l2 = 0.02;
    o.l2_shrinkage = 0.01;
    return loom_optimizer_ftrl(lr, &o);
  }
  case O_RMS:
  case O_CRMS: {
    loom_rmsprop_options o = loom_rmsprop_options_default();
    o.momentum = 0.5;
    o.centered = kind == O_CRMS;
    return loom_optimizer_rmsprop(lr, &o);
  }
  case O_RMS_KERAS:
  case O_CRMS_KERAS: {
    loom_rmsprop_options o = loom_rmsprop_options_default();
    o.initial_rms_value = 0.0;
    o.epsilon = 1e-7;
    o.keras_legacy = 1;
    o.centered = kind == O_CRMS_KERAS;
    return loom_optimizer_rmsprop(lr, &o);
  }
  default: return loom_optimizer_adadelta(lr, NULL);
  }
}

/* sparse or dense (the gradient [50, 8]); scale != 1: the optimizer op's gradient scale
 * (loom_apply_set_gradient_scale), read by both devices' kernels */
static void opt_case(int kind, int sparse, float scale) {
  loom_graph *g = loom_graph_new();
  int64_t vd[2] = {50, 8}, gd[2] = {sparse ? 12 : 50, 8}, id[1] = {12};
  loom_initializer ini = loom_init_random_normal(0, 0.5, 11);
  loom_variable *v = loom_get_variable(g, "emb", F32, 2, vd, &ini, 1);
  loom_variable *gs = loom_get_or_create_global_step(g);
  loom_output gv = loom_placeholder(g, F32, 2, gd, "grad"), ix = loom_placeholder(g, I64, 1, id, "indices");
  /* a device-side schedule feeds Adam and RMSProp (LearningRateSchedule reads global_step) */
  loom_output lr = kind == O_ADAM || kind == O_ADAM_LAZY || kind == O_RMS || kind == O_CRMS
                       ? loom_exponential_decay(g, 0.05, loom_variable_output(gs), 2, 0.7, 1, "lr")
                       : loom_const_f32(g, kind == O_ADADELTA ? 1.0f : 0.05f, "lr");
  loom_optimizer *opt = make_opt(kind, lr);
  loom_gradient gr = {gv, sparse ? ix : (loom_output){NULL, 0}};
  loom_node *train = loom_optimizer_apply_gradients(opt, g, 1, &gr, &v, gs, NULL);
  pair p;
  char what[96];
  snprintf(what, sizeof what, "%s %s", sparse ? "sparse" : "dense", opt_names[kind]);
  if (scale != 1.0f) snprintf(what + strlen(what), sizeof what - strlen(what), " gradient scale %g", (double)scale);
  int nscaled = 0;
  for (int i = 0; train && scale != 1.0f && loom_graph_node_at(g, i); i++) {
    loom_node *n = loom_graph_node_at(g, i);
    const char *op = loom_node_op_name(n);
    if (strncmp(op, "Apply", 5) && strncmp(op, "SparseApply", 11)) continue;
    nscaled += loom_apply_set_gradient_scale(n, scale, NULL) == LOOM_OK;
  }
  if (scale != 1.0f && nscaled != 1) {
    printf("FAIL %s: %d optimizer ops took the scale\n", what, nscaled);
    g_fail++;
  }
  if (!train) {
    printf("FAIL %s: building the train op\n", what);
    g_fail++;
  } else if (pair_open(&p, g, what)) {
    for (int step = 0; step < 5; step++) {
      int64_t iv[12];
      dup_indices(iv, 12, 50);
      loom_tensor *ixv = idx_tensor(I64, 1, id, iv), *gvv = rand_tensor(F32, 2, gd, 0);
      loom_output feeds[2] = {gv, ix};
      loom_tensor *fv[2] = {gvv, ixv};
      char w[128];
      snprintf(w, sizeof w, "%s step %d", what, step);
      int ok = pair_step(&p, w, feeds, fv, sparse ? 2 : 1, train);
      loom_tensor_free(ixv);
      loom_tensor_free(gvv);
      if (!ok) break;
    }
    snprintf(what + strlen(what), sizeof what - strlen(what), " after 5 steps");
    compare_vars(&p, g, what, 1e-5, NULL);
    pair_close(&p);
  }
  loom_optimizer_free(opt);
  loom_graph_free(g);
}

/* ---- LearningRateSchedule: every kind against the CPU over steps ---- */
static void lr_schedule_case(loom_dtype sdt) {
  loom_graph *g = loom_graph_new();
  loom_output step = loom_placeholder(g, sdt, 0, NULL, "step");
  static const double bnd[3] = {2, 5, 9}, vals[4] = {1, 0.5, 0.25, 0.125};
  loom_output outs[7] = {
      loom_exponential_decay(g, 0.1, step, 3, 0.8, 0, "exp"),
      loom_exponential_decay(g, 0.1, step, 3, 0.8, 1, "exp_stair"),
      loom_piecewise_constant(g, step, 3, bnd, vals, "piecewise"),
      loom_polynomial_decay(g, 0.1, step, 7, 0.001, 2, 0, "poly"),
      loom_polynomial_decay(g, 0.1, step, 4, 0.001, 0.5, 1, "poly_cycle"),
      loom_cosine_decay(g, 0.1, step, 9, 0.1, "cosine"),
      loom_cosine_decay(g, 0.2, step, 5, 0, "cosine0"),
  };
  loom_session *sc = session(g, LOOM_DEVICE_CPU), *sg = session(g, LOOM_DEVICE_CUDA);
  for (int s = 0; sc && sg && s < 14; s++) {
    loom_tensor *sv = loom_tensor_new(sdt, 0, NULL, NULL);
    double val = sdt == F32 || sdt == F64 ? s * 0.75 : s;
    switch (sdt) {
    case F32: *(float *)loom_tensor_data(sv) = (float)val; break;
    case F64: *(double *)loom_tensor_data(sv) = val; break;
    case I32: *(int32_t *)loom_tensor_data(sv) = (int32_t)val; break;
    default: *(int64_t *)loom_tensor_data(sv) = (int64_t)val; break;
    }
    loom_tensor *oc[7] = {0}, *og[7] = {0};
    char what[96];
    snprintf(what, sizeof what, "lr schedules, %s step %g", loom_dtype_name(sdt), val);
    if (run(sc, what, &step, &sv, 1, outs, oc, 7, NULL, 0) && run(sg, what, &step, &sv, 1, outs, og, 7, NULL, 0))
      for (int k = 0; k < 7; k++) {
        char w[128];
        snprintf(w, sizeof w, "%s output %d", what, k);
        compare(w, oc[k], og[k], 1e-7);
      }
    for (int k = 0; k < 7; k++) {
      loom_tensor_free(oc[k]);
      loom_tensor_free(og[k]);
    }
    loom_tensor_free(sv);
  }
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(g);
}

/* ========================================================== bad indices */
/* (the out-of-place extra ops' bad indices are in tests/gpu/test_cuda_errors.c) */
/* In-place ops: the failing step changes nothing (as on the CPU). */
static void bad_index_inplace(int sparse_opt) {
  loom_graph *g = loom_graph_new();
  int64_t vd[2] = {50, 8}, gd[2] = {6, 8}, id[1] = {6};
  loom_initializer ini = loom_init_random_uniform(-1, 1, 9);
  loom_variable *v = loom_get_variable(g, "var", F32, 2, vd, &ini, 1);
  loom_output gv = loom_placeholder(g, F32, 2, gd, "rows"), ix = loom_placeholder(g, I64, 1, id, "indices");
  loom_optimizer *opt = NULL;
  loom_node *t;
  const char *node;
  if (sparse_opt) {
    opt = loom_optimizer_adagrad(loom_const_f32(g, 0.1f, NULL), NULL);
    loom_gradient gr = {gv, ix};
    t = loom_optimizer_apply_gradients(opt, g, 1, &gr, &v, NULL, NULL);
    node = "SparseApplyAdagrad";
  } else {
    t = loom_var_scatter_add(g, loom_variable_output(v), ix, gv, "bad_scatter_add").node;
    node = "bad_scatter_add";
  }
  pair p;
  if (t && pair_open(&p, g, node)) {
    int64_t goodv[6] = {1, 7, 7, 49, 0, 7}, badv[6] = {1, 7, 7, 50, 0, 7};
    loom_tensor *gvv = rand_tensor(F32, 2, gd, 0), *good = idx_tensor(I64, 1, id, goodv), *bad = idx_tensor(I64, 1, id, badv);
    loom_output feeds[2] = {gv, ix};
    loom_tensor *fg[2] = {gvv, good}, *fb[2] = {gvv, bad};
    char what[600];
    snprintf(what, sizeof what, "%s good step", node);
    pair_step(&p, what, feeds, fg, 2, t);
    for (int dev = 0; dev < 2; dev++) {
      loom_status *st = loom_status_new();
      loom_code rc = loom_session_run(dev ? p.sg : p.sc, feeds, fb, 2, NULL, NULL, 0, &t, 1, st);
      snprintf(what, sizeof what, "%s on %s: index 50 fails with INVALID_ARGUMENT naming the node (got %d: %s)", node,
               dev ? "cuda" : "cpu", (int)rc, loom_status_message(st));
      parity_check(rc == LOOM_INVALID_ARGUMENT && strstr(loom_status_message(st), node) &&
                 strstr(loom_status_message(st), "indices[3] = 50 is not in [0, 50)"), "%s", what);
      loom_status_free(st);
    }
    snprintf(what, sizeof what, "%s after the failed step (unchanged on both)", node);
    compare_vars(&p, g, what, 1e-6, NULL);
    snprintf(what, sizeof what, "%s good step after the failure", node);
    if (pair_step(&p, what, feeds, fg, 2, t)) compare_vars(&p, g, what, 1e-6, NULL);
    loom_tensor_free(gvv);
    loom_tensor_free(good);
    loom_tensor_free(bad);
    pair_close(&p);
  }
  loom_optimizer_free(opt);
  loom_graph_free(g);
}

int main(void) {
  loom_log_set(on_log, NULL, LOOM_LOG_INFO);
  if (!parity_gpu_present("test_parity_extra")) return 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
  topk_special(10, 4);
  topk_special(10, 10);
  topk_special(100, 30);
  topk_special(3000, 40);
  topk_special(3000, 3000);
  ref_scatter_case(F32, 0);
  ref_scatter_case(F64, 1);
  ref_scatter_case(I32, 0);
  ref_scatter_case(I64, 1);
  for (int k = 0; k < O_COUNT; k++) {
    opt_case(k, 1, 1.0f);
    opt_case(k, 1, 0.5f);
    opt_case(k, 1, 1.0f / 3.0f);
    opt_case(k, 0, 1.0f / 3.0f);
  }
  lr_schedule_case(I64);
  lr_schedule_case(I32);
  lr_schedule_case(F32);
  lr_schedule_case(F64);
  bad_index_inplace(0);
  bad_index_inplace(1);
  parity_check(!g_fallbacks, "%d nodes ran on the CPU in a CUDA session", g_fallbacks);
  return parity_report("test_parity_extra");
}
