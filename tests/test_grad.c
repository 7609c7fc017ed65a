/* Finite-difference gradient checks, table-driven over the op list.
 *
 * Every op is either marked LOOM_OPF_NODIFF or has a gradient function AND at
 * least one case below; the coverage test fails otherwise, so a new op cannot
 * land without a gradient decision.
 *
 * Each case builds y = op(x0, x1, ...) from placeholders, takes
 * loss = sum(y * w) with a fixed random w (so every output element matters
 * with a different weight), asks loom_gradients for d loss / d x_i and
 * compares with central differences of the same loss computed by running the
 * graph. f64 cases use eps 1e-6 and tight tolerances; f32 cases (ops with f32
 * kernels only) use eps 1e-2 with a looser tolerance.
 */
#include "test_util.h"
#include "ops/op_list.h"
#include "engine/engine_impl.h"

#define MAXIN 4
typedef loom_output (*build_fn)(loom_graph *g, const loom_output *x);

typedef struct grad_case {
  int op;             /* the op under test (LOOM_OP_*) */
  const char *label;
  loom_dtype dt;      /* F64 preferred; F32 for f32-only kernels */
  int nin;
  int ndim[MAXIN];
  int64_t dims[MAXIN][4];
  build_fn build;
  double lo, hi;      /* inputs drawn uniformly from [lo, hi] */
  double away;        /* |x| >= away (kinks at 0), 0 = no constraint */
  uint32_t nodiff;    /* bit i: input i is not checked (indices, labels) */
  double tol;         /* 0 = default */
  int int_input;      /* bit i: input i is an integer tensor with values in [0, int_hi) */
  int64_t int_hi;
} grad_case;

/* ---------- the cases: one table per op family (ops/<family>.def.h) ---------- */
#define UN(fn) static loom_output b_##fn(loom_graph *g, const loom_output *x) { return loom_##fn(g, x[0], NULL); }
#define BIN(fn) static loom_output b_##fn(loom_graph *g, const loom_output *x) { return loom_##fn(g, x[0], x[1], NULL); }
#define F64C LOOM_F64
#include "grad_cases_core.h"   /* static const grad_case CASES_CORE[] */
#include "grad_cases_math.h"   /* CASES_MATH[] */
#include "grad_cases_reduce.h" /* CASES_REDUCE[] */
#include "grad_cases_array.h"  /* CASES_ARRAY[] */
#include "grad_cases_nn.h"     /* CASES_NN[] */
#include "grad_cases_random.h" /* CASES_RANDOM[] (train: every op mutates its input or is not differentiable) */
#include "grad_cases_sparse.h" /* CASES_SPARSE[] */

#define NCASES(t) ((int)(sizeof t / sizeof t[0]))
typedef struct grad_table {
  const grad_case *cases;
  int n;
} grad_table;
static const grad_table TABLES[] = {
    {CASES_CORE, NCASES(CASES_CORE)},   {CASES_MATH, NCASES(CASES_MATH)}, {CASES_REDUCE, NCASES(CASES_REDUCE)},
    {CASES_ARRAY, NCASES(CASES_ARRAY)}, {CASES_NN, NCASES(CASES_NN)},     {CASES_RANDOM, NCASES(CASES_RANDOM)},
    {CASES_SPARSE, NCASES(CASES_SPARSE)},
};

/* ---------- the checker ---------- */
static uint64_t rng_state = 88172645463325252ull;
static double urand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double get_el(loom_tensor *t, int64_t i) {
  switch (loom_tensor_dtype(t)) {
    case LOOM_F64: return ((double *)loom_tensor_data(t))[i];
    case LOOM_F32: return ((float *)loom_tensor_data(t))[i];
    default: return 0;
  }
}
static void set_el(loom_tensor *t, int64_t i, double v) {
  if (loom_tensor_dtype(t) == LOOM_F64) ((double *)loom_tensor_data(t))[i] = v;
  else ((float *)loom_tensor_data(t))[i] = (float)v;
}

static double run_loss(loom_session *s, const loom_output *ph, loom_tensor **xv, int nin, loom_output loss) {
  loom_tensor *out = NULL;
  loom_status *st = loom_status_new();
  loom_code rc = loom_session_run(s, ph, xv, nin, &loss, &out, 1, NULL, 0, st);
  cr_assert_eq(rc, LOOM_OK, "run: %s", loom_status_message(st));
  double v = get_el(out, 0);
  loom_tensor_free(out);
  loom_status_free(st);
  return v;
}

static void check_case(const grad_case *c) {
  loom_graph *g = loom_graph_new();
  loom_output ph[MAXIN];
  loom_tensor *xv[MAXIN];
  for (int i = 0; i < c->nin; i++) {
    int isint = (c->int_input >> i) & 1;
    loom_dtype dt = isint ? LOOM_I32 : c->dt;
    char nm[16];
    snprintf(nm, sizeof nm, "x%d", i);
    ph[i] = loom_placeholder(g, dt, c->ndim[i], c->dims[i], nm);
    xv[i] = loom_tensor_new(dt, c->ndim[i], c->dims[i], NULL);
    for (int64_t k = 0; k < loom_tensor_numel(xv[i]); k++) {
      if (isint) {
        ((int32_t *)loom_tensor_data(xv[i]))[k] = (int32_t)(urand() * (double)c->int_hi);
        continue;
      }
      double v;
      do v = c->lo + (c->hi - c->lo) * urand();
      while (c->away > 0 && fabs(v) < c->away);
      set_el(xv[i], k, v);
    }
  }
  loom_output y = c->build(g, ph);
  int64_t yd[LOOM_MAX_DIMS];
  int yn = loom_output_dims(y, yd);
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK, "%s: build failed", c->label);
  /* w: same shape as y's runtime shape; fed so that unknown dims work */
  loom_status *st = loom_status_new();
  loom_session *s0 = loom_session_new(g, NULL, st);
  loom_tensor *yv = NULL;
  cr_assert_eq(loom_session_run(s0, ph, xv, c->nin, &y, &yv, 1, NULL, 0, st), LOOM_OK, "%s: %s", c->label,
               loom_status_message(st));
  loom_session_free(s0);
  (void)yn;
  loom_tensor *wv = loom_tensor_new(loom_output_dtype(y), loom_tensor_ndim(yv), loom_tensor_dims(yv), NULL);
  for (int64_t k = 0; k < loom_tensor_numel(wv); k++) set_el(wv, k, 0.5 + urand());
  loom_output w = loom_const(g, wv, "w");
  loom_output loss = loom_reduce_sum(g, loom_mul(g, y, w, NULL), -1, NULL, 0, "loss");
  loom_output gr[MAXIN];
  loom_code rc = loom_gradients(g, 1, &loss, NULL, c->nin, ph, gr, st);
  cr_assert_eq(rc, LOOM_OK, "%s: gradients: %s", c->label, loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  double eps = c->dt == LOOM_F64 ? 1e-6 : 1e-2;
  double tol = c->tol > 0 ? c->tol : (c->dt == LOOM_F64 ? 1e-6 : 2e-2);
  for (int i = 0; i < c->nin; i++) {
    if (((c->nodiff | c->int_input) >> i) & 1) continue;
    cr_assert(gr[i].node, "%s: no gradient for input %d", c->label, i);
    loom_tensor *an = NULL;
    cr_assert_eq(loom_session_run(s, ph, xv, c->nin, &gr[i], &an, 1, NULL, 0, st), LOOM_OK, "%s: %s", c->label,
                 loom_status_message(st));
    cr_assert_eq(loom_tensor_numel(an), loom_tensor_numel(xv[i]), "%s: gradient %d has the wrong size", c->label, i);
    int64_t n = loom_tensor_numel(xv[i]);
    int64_t step = n > 40 ? n / 40 : 1;
    for (int64_t k = 0; k < n; k += step) {
      double x0 = get_el(xv[i], k);
      set_el(xv[i], k, x0 + eps);
      double lp = run_loss(s, ph, xv, c->nin, loss);
      set_el(xv[i], k, x0 - eps);
      double lm = run_loss(s, ph, xv, c->nin, loss);
      set_el(xv[i], k, x0);
      double num = (lp - lm) / (2 * eps), a = get_el(an, k);
      cr_assert(fabs(num - a) <= tol * (1 + fabs(num)), "%s: d/dx%d[%lld]: analytic %.9g, numeric %.9g", c->label, i,
                (long long)k, a, num);
    }
    loom_tensor_free(an);
  }
  loom_session_free(s);
  loom_status_free(st);
  for (int i = 0; i < c->nin; i++) loom_tensor_free(xv[i]);
  loom_tensor_free(yv);
  loom_tensor_free(wv);
  loom_graph_free(g);
}

static void check_table(const grad_case *cases, int n) {
  for (int i = 0; i < n; i++) check_case(&cases[i]);
}
Test(grad, finite_differences_core) { check_table(CASES_CORE, NCASES(CASES_CORE)); }
Test(grad, finite_differences_math) { check_table(CASES_MATH, NCASES(CASES_MATH)); }
Test(grad, finite_differences_reduce) { check_table(CASES_REDUCE, NCASES(CASES_REDUCE)); }
Test(grad, finite_differences_array) { check_table(CASES_ARRAY, NCASES(CASES_ARRAY)); }
Test(grad, finite_differences_nn) { check_table(CASES_NN, NCASES(CASES_NN)); }
Test(grad, finite_differences_random) { check_table(CASES_RANDOM, NCASES(CASES_RANDOM)); }
Test(grad, finite_differences_sparse) { check_table(CASES_SPARSE, NCASES(CASES_SPARSE)); }

Test(grad, every_op_is_checked_or_marked_nondiff) {
  loom_graph *g = loom_graph_new(); /* initialises the op table */
  char missing[4096] = "";
  size_t k = 0;
  for (int op = 0; op < LOOM_OP_COUNT; op++) {
    const loom_op_def *d = loom__op_def(op);
    if (d->flags & LOOM_OPF_NODIFF) continue;
    /* in-place ops (assign, optimizers) and sources are not differentiable by construction */
    if ((d->flags & LOOM_OPF_MUTATES_INPUT0) || d->nin == 0) continue;
    int has_case = 0;
    for (int t = 0; t < NCASES(TABLES); t++)
      for (int i = 0; i < TABLES[t].n; i++)
        if (TABLES[t].cases[i].op == op) has_case = 1;
    if (!d->grad || !has_case)
      k += (size_t)snprintf(missing + k, sizeof missing - k, " %s(%s)", d->name, !d->grad ? "no grad fn" : "no case");
    if (k >= sizeof missing) break;
  }
  loom_graph_free(g);
  cr_assert(missing[0] == 0, "ops neither checked nor marked not differentiable:%s", missing);
}
