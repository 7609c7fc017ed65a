/* Math family: every op's forward values against references computed here
 * (double-precision loops or hard-coded values), NumPy broadcasting, every
 * dtype variant, rank-0 and zero-size shapes, errors naming the node, and the
 * parallel path on large inputs. */
#include <limits.h>
#include "test_util.h"

typedef loom_output (*un_fn)(loom_graph *, loom_output, const char *);
typedef loom_output (*bin_fn)(loom_graph *, loom_output, loom_output, const char *);

/* ------------------------------------------------------------------ helpers */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(double lo, double hi) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return lo + (hi - lo) * (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

static void set_el(loom_tensor *t, int64_t i, double v) {
  void *p = loom_tensor_data(t);
  switch (loom_tensor_dtype(t)) {
    case LOOM_F32: ((float *)p)[i] = (float)v; break;
    case LOOM_F64: ((double *)p)[i] = v; break;
    case LOOM_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case LOOM_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case LOOM_U8: ((uint8_t *)p)[i] = (uint8_t)(int)v; break;
    case LOOM_BOOL: ((uint8_t *)p)[i] = v >= 0.5; break; /* 0/1 as given; uniform [0,1) -> half true */
    default: cr_assert_fail("bad dtype");
  }
}
static double get_el(const loom_tensor *t, int64_t i) {
  const void *p = loom_tensor_data_const(t);
  switch (loom_tensor_dtype(t)) {
    case LOOM_F32: return ((const float *)p)[i];
    case LOOM_F64: return ((const double *)p)[i];
    case LOOM_I32: return ((const int32_t *)p)[i];
    case LOOM_I64: return (double)((const int64_t *)p)[i];
    case LOOM_U8:
    case LOOM_BOOL: return ((const uint8_t *)p)[i];
    default: cr_assert_fail("bad dtype");
  }
  return 0;
}

/* A tensor of dt holding v (converted). */
static loom_tensor *mkd(loom_dtype dt, int ndim, const int64_t *dims, const double *v) {
  loom_tensor *t = loom_tensor_new(dt, ndim, dims, NULL);
  cr_assert(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) set_el(t, i, v[i]);
  return t;
}
/* A tensor of dt with uniform random values in [lo, hi). */
static loom_tensor *mkr(loom_dtype dt, int ndim, const int64_t *dims, double lo, double hi) {
  loom_tensor *t = loom_tensor_new(dt, ndim, dims, NULL);
  cr_assert(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) set_el(t, i, urand(lo, hi));
  return t;
}

static loom_session *new_session(loom_graph *g, int nthreads) {
  loom_status *st = loom_status_new();
  cr_assert(loom_graph_status(g, st) == LOOM_OK, "graph error: %s", loom_status_message(st));
  loom_session_options o = loom_session_options_default();
  o.num_threads = nthreads;
  loom_session *s = loom_session_new(g, &o, st);
  cr_assert(s, "session: %s", loom_status_message(st));
  loom_status_free(st);
  return s;
}

/* An op applied to placeholders: unary, binary or a custom builder. */
typedef struct op_desc {
  const char *name;
  un_fn un;
  bin_fn bin;
  loom_output (*tri)(loom_graph *, loom_output, loom_output, loom_output, const char *);
} op_desc;

static loom_output apply(loom_graph *g, const op_desc *op, const loom_output *in) {
  if (op->un) return op->un(g, in[0], "op");
  if (op->bin) return op->bin(g, in[0], in[1], "op");
  return op->tri(g, in[0], in[1], in[2], "op");
}
static int op_nin(const op_desc *op) { return op->un ? 1 : op->bin ? 2 : 3; }

/* Feeds the inputs through placeholders of their exact shapes, runs the op. */
static loom_tensor *run_op(const op_desc *op, loom_tensor *const *in, int nthreads) {
  loom_graph *g = loom_graph_new();
  loom_output ph[3];
  int n = op_nin(op);
  for (int k = 0; k < n; k++)
    ph[k] = loom_placeholder(g, loom_tensor_dtype(in[k]), loom_tensor_ndim(in[k]), loom_tensor_dims(in[k]), NULL);
  loom_output out = apply(g, op, ph);
  loom_session *s = new_session(g, nthreads);
  loom_status *st = loom_status_new();
  loom_tensor *res = NULL;
  loom_code rc = loom_session_run(s, ph, in, n, &out, &res, 1, NULL, 0, st);
  cr_assert(rc == LOOM_OK, "%s: run failed: %s", op->name, loom_status_message(st));
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(g);
  return res;
}

/* Asserts t has dtype dt, the given shape and values (floats within tol
 * relative to 1+|want|, NaN/inf matching; others exact). */
static void expect(const loom_tensor *t, loom_dtype dt, int ndim, const int64_t *dims, const double *want, double tol,
                   const char *what) {
  cr_assert(t, "%s: no tensor", what);
  cr_assert_eq(loom_tensor_dtype(t), dt, "%s: dtype %s, want %s", what, loom_dtype_name(loom_tensor_dtype(t)),
               loom_dtype_name(dt));
  cr_assert_eq(loom_tensor_ndim(t), ndim, "%s: rank %d, want %d", what, loom_tensor_ndim(t), ndim);
  for (int i = 0; i < ndim; i++)
    cr_assert_eq(loom_tensor_dim(t, i), dims[i], "%s: dim %d is %lld, want %lld", what, i,
                 (long long)loom_tensor_dim(t, i), (long long)dims[i]);
  int fl = dt == LOOM_F32 || dt == LOOM_F64;
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) {
    double got = get_el(t, i), w = want[i];
    if (!fl) {
      cr_assert(got == w, "%s: element %lld is %.17g, want %.17g", what, (long long)i, got, w);
    } else if (isnan(w) || isinf(w)) {
      cr_assert(isnan(w) ? isnan(got) : got == w, "%s: element %lld is %.9g, want %.9g", what, (long long)i, got, w);
    } else {
      cr_assert(fabs(got - w) <= tol * (1.0 + fabs(w)), "%s: element %lld is %.12g, want %.12g", what, (long long)i,
                got, w);
    }
  }
}

/* Flat index into an input of shape id[in] for output element flat of shape od[on]
 * under NumPy broadcasting (computed directly from the definition). */
static int64_t bidx(int64_t flat, int on, const int64_t *od, int in, const int64_t *id) {
  int64_t idx = 0, mul = 1;
  for (int i = on - 1; i >= 0; i--) {
    int64_t c = flat % od[i];
    flat /= od[i];
    int k = i - (on - in);
    if (k >= 0) {
      if (id[k] != 1) idx += c * mul;
      mul *= id[k];
    }
  }
  return idx;
}
static int bshape(int na, const int64_t *a, int nb, const int64_t *b, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t da = i < n - na ? 1 : a[i - (n - na)], db = i < n - nb ? 1 : b[i - (n - nb)];
    out[i] = da == 1 ? db : da;
  }
  return n;
}
static int64_t prod(int n, const int64_t *d) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= d[i];
  return p;
}

/* ------------------------------------------------------- unary float ops */
static double r_neg(double x) { return -x; }
static double r_abs(double x) { return x < 0 ? -x : x; }
static double r_exp(double x) { return exp(x); }
static double r_log(double x) { return log(x); }
static double r_log1p(double x) { return log1p(x); }
static double r_sqrt(double x) { return sqrt(x); }
static double r_rsqrt(double x) { return 1.0 / sqrt(x); }
static double r_square(double x) { return x * x; }
static double r_tanh(double x) { return (exp(2 * x) - 1) / (exp(2 * x) + 1); }
static double r_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double r_relu(double x) { return x > 0 ? x : 0; }
static double r_relu6(double x) { return x < 0 ? 0 : x > 6 ? 6 : x; }
static double r_elu(double x) { return x > 0 ? x : exp(x) - 1; }
static const double SELU_SCALE = 1.0507009873554804934193349852946, SELU_ALPHA = 1.6732632423543772848170429916717;
static double r_selu(double x) { return SELU_SCALE * (x > 0 ? x : SELU_ALPHA * (exp(x) - 1)); }
static double r_leaky(double x) { return x > 0 ? x : 0.2 * x; }
static double r_softplus(double x) { return log(1.0 + exp(x)); }
static double r_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double r_gelu_tanh(double x) {
  return 0.5 * x * (1 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}
static double r_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
static double r_floor(double x) { return floor(x); }
static double r_ceil(double x) { return ceil(x); }
static double r_round(double x) { /* half to even, by hand */
  double f = floor(x), d = x - f;
  if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0)) f += 1;
  return f;
}
static double r_recip(double x) { return 1.0 / x; }

static loom_output b_leaky(loom_graph *g, loom_output x, const char *n) { return loom_leaky_relu(g, x, 0.2, n); }
static loom_output b_gelu(loom_graph *g, loom_output x, const char *n) { return loom_gelu(g, x, 0, n); }
static loom_output b_gelu_tanh(loom_graph *g, loom_output x, const char *n) { return loom_gelu(g, x, 1, n); }

typedef struct un_case {
  const char *name;
  un_fn fn;
  double (*ref)(double);
  double lo, hi;
} un_case;

static const un_case UNARY_FLOAT[] = {
    {"neg", loom_neg, r_neg, -5, 5},
    {"abs", loom_abs, r_abs, -5, 5},
    {"exp", loom_exp, r_exp, -20, 20},
    {"log", loom_log, r_log, 0.001, 100},
    {"log1p", loom_log1p, r_log1p, -0.9, 10},
    {"sqrt", loom_sqrt, r_sqrt, 0, 100},
    {"rsqrt", loom_rsqrt, r_rsqrt, 0.01, 100},
    {"square", loom_square, r_square, -9, 9},
    {"tanh", loom_tanh, r_tanh, -8, 8},
    {"sigmoid", loom_sigmoid, r_sigmoid, -30, 30},
    {"relu", loom_relu, r_relu, -5, 5},
    {"relu6", loom_relu6, r_relu6, -3, 9},
    {"elu", loom_elu, r_elu, -6, 4},
    {"selu", loom_selu, r_selu, -6, 4},
    {"leaky_relu", b_leaky, r_leaky, -5, 5},
    {"softplus", loom_softplus, r_softplus, -20, 20},
    {"gelu", b_gelu, r_gelu, -6, 6},
    {"gelu_tanh", b_gelu_tanh, r_gelu_tanh, -6, 6},
    {"sign", loom_sign, r_sign, -3, 3},
    {"floor", loom_floor, r_floor, -4, 4},
    {"ceil", loom_ceil, r_ceil, -4, 4},
    {"round", loom_round, r_round, -4, 4},
    {"reciprocal", loom_reciprocal, r_recip, 0.1, 10},
};

Test(math, unary_float_ops_f32_f64) {
  enum { N = 41 };
  int64_t d[2] = {1, N};
  for (size_t c = 0; c < sizeof UNARY_FLOAT / sizeof UNARY_FLOAT[0]; c++) {
    const un_case *uc = &UNARY_FLOAT[c];
    double x[N], want[N];
    for (int i = 0; i < N; i++) x[i] = uc->lo + (uc->hi - uc->lo) * i / (N - 1);
    x[N / 2 + 1] = uc->lo > 0 ? uc->lo : 0.0; /* zero where the domain allows */
    for (int t = 0; t < 2; t++) {
      loom_dtype dt = t ? LOOM_F64 : LOOM_F32;
      loom_tensor *in = mkd(dt, 2, d, x);
      for (int i = 0; i < N; i++) want[i] = uc->ref(get_el(in, i)); /* reference on the rounded input */
      op_desc op = {uc->name, uc->fn, NULL, NULL};
      loom_tensor *out = run_op(&op, &in, 1);
      char what[64];
      snprintf(what, sizeof what, "%s %s", uc->name, loom_dtype_name(dt));
      expect(out, dt, 2, d, want, t ? 1e-12 : 4e-6, what);
      loom_tensor_free(out);
      loom_tensor_free(in);
    }
  }
}

Test(math, round_half_to_even_and_sign_details) {
  double x[] = {0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, -2.6, 1e7 + 0.5, 0.0};
  double want[] = {0, 2, 2, 4, -0.0, -2, -2, 2, 3, -3, 1e7, 0};
  int64_t d[1] = {12};
  for (int t = 0; t < 2; t++) {
    loom_dtype dt = t ? LOOM_F64 : LOOM_F32;
    loom_tensor *in = mkd(dt, 1, d, x);
    op_desc op = {"round", loom_round, NULL, NULL};
    loom_tensor *out = run_op(&op, &in, 1);
    expect(out, dt, 1, d, want, 0, "round");
    cr_assert(signbit(get_el(out, 4)), "round(-0.5) is -0");
    loom_tensor_free(out);
    loom_tensor_free(in);
  }
  double sx[] = {-0.0, NAN, INFINITY, -INFINITY, 1e-30, -1e-30};
  double sw[] = {0, NAN, 1, -1, 1, -1};
  int64_t sd[1] = {6};
  loom_tensor *in = mkd(LOOM_F64, 1, sd, sx);
  op_desc op = {"sign", loom_sign, NULL, NULL};
  loom_tensor *out = run_op(&op, &in, 1);
  expect(out, LOOM_F64, 1, sd, sw, 0, "sign special");
  loom_tensor_free(out);
  loom_tensor_free(in);
}

Test(math, softplus_sigmoid_large_magnitudes) {
  double x[] = {1000, -1000, 100, -100, 88.8, -88.8, 30, -30, 0};
  int64_t d[1] = {9};
  double sp[9], sg[9];
  for (int i = 0; i < 9; i++) {
    /* log(1+e^x) = x + log(1+e^-x) for x > 0; written out to avoid overflow */
    sp[i] = x[i] > 0 ? x[i] + log1p(exp(-x[i])) : log1p(exp(x[i]));
    sg[i] = x[i] >= 0 ? 1.0 / (1.0 + exp(-x[i])) : exp(x[i]) / (1.0 + exp(x[i]));
  }
  for (int t = 0; t < 2; t++) {
    loom_dtype dt = t ? LOOM_F64 : LOOM_F32;
    loom_tensor *in = mkd(dt, 1, d, x);
    op_desc op = {"softplus", loom_softplus, NULL, NULL};
    loom_tensor *out = run_op(&op, &in, 1);
    for (int i = 0; i < 9; i++) cr_assert(isfinite(get_el(out, i)), "softplus(%g) not finite", x[i]);
    double w32[9];
    for (int i = 0; i < 9; i++) w32[i] = t ? sp[i] : (double)(float)sp[i];
    expect(out, dt, 1, d, w32, t ? 1e-13 : 2e-6, "softplus large");
    loom_tensor_free(out);
    op_desc op2 = {"sigmoid", loom_sigmoid, NULL, NULL};
    out = run_op(&op2, &in, 1);
    expect(out, dt, 1, d, sg, t ? 1e-13 : 2e-6, "sigmoid large");
    loom_tensor_free(out);
    loom_tensor_free(in);
  }
}

/* Derivative formulas of the gradient helpers against central differences of
 * the forward ops (checks the formulas independently of the references). */
Test(math, gradient_helpers_match_finite_differences) {
  enum { N = 25 };
  double x[N], xp[N], xm[N], ones[N];
  const double h = 1e-6;
  for (int i = 0; i < N; i++) {
    x[i] = -4.03 + 8.1 * i / (N - 1); /* no point within h of a kink */
    xp[i] = x[i] + h;
    xm[i] = x[i] - h;
    ones[i] = 1;
  }
  int64_t d[1] = {N};
  struct {
    const char *name;
    un_fn fwd;
    int approx; /* gelu */
    int use_y;  /* grad op takes the forward output instead of x */
    bin_fn grad;
    int y_first; /* grad(y, dy) order */
  } cases[] = {
      {"sigmoid", loom_sigmoid, 0, 1, loom_sigmoid_grad, 1},
      {"tanh", loom_tanh, 0, 1, loom_tanh_grad, 1},
      {"elu", loom_elu, 0, 1, loom_elu_grad, 0},
      {"selu", loom_selu, 0, 1, loom_selu_grad, 0},
      {"softplus", loom_softplus, 0, 0, loom_softplus_grad, 0},
      {"relu", loom_relu, 0, 1, loom_relu_grad, 0},
      {"relu6", loom_relu6, 0, 1, loom_relu6_grad, 0},
      {"gelu", NULL, 0, 0, NULL, 0},
      {"gelu_tanh", NULL, 1, 0, NULL, 0},
      {"leaky_relu", NULL, 0, 0, NULL, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    loom_graph *g = loom_graph_new();
    loom_output X = loom_const_data(g, LOOM_F64, 1, d, x, "x");
    loom_output XP = loom_const_data(g, LOOM_F64, 1, d, xp, "xp");
    loom_output XM = loom_const_data(g, LOOM_F64, 1, d, xm, "xm");
    loom_output DY = loom_const_data(g, LOOM_F64, 1, d, ones, "dy");
    loom_output fy, fp, fm, gr;
    if (!strcmp(cases[c].name, "gelu") || !strcmp(cases[c].name, "gelu_tanh")) {
      int a = cases[c].approx;
      fy = loom_gelu(g, X, a, NULL);
      fp = loom_gelu(g, XP, a, NULL);
      fm = loom_gelu(g, XM, a, NULL);
      gr = loom_gelu_grad(g, DY, X, a, NULL);
    } else if (!strcmp(cases[c].name, "leaky_relu")) {
      fy = loom_leaky_relu(g, X, 0.3, NULL);
      fp = loom_leaky_relu(g, XP, 0.3, NULL);
      fm = loom_leaky_relu(g, XM, 0.3, NULL);
      gr = loom_leaky_relu_grad(g, DY, X, 0.3, NULL);
    } else {
      fy = cases[c].fwd(g, X, NULL);
      fp = cases[c].fwd(g, XP, NULL);
      fm = cases[c].fwd(g, XM, NULL);
      loom_output arg = cases[c].use_y ? fy : X;
      gr = cases[c].y_first ? cases[c].grad(g, arg, DY, NULL) : cases[c].grad(g, DY, arg, NULL);
    }
    loom_session *s = new_session(g, 1);
    loom_output f[3] = {fp, fm, gr};
    loom_tensor *o[3] = {NULL, NULL, NULL};
    cr_assert_eq(loom_session_run(s, NULL, NULL, 0, f, o, 3, NULL, 0, NULL), LOOM_OK);
    for (int i = 0; i < N; i++) {
      double num = (get_el(o[0], i) - get_el(o[1], i)) / (2 * h);
      cr_assert(fabs(num - get_el(o[2], i)) < 1e-6 * (1 + fabs(num)), "%s'(%g): grad op %.10g, numeric %.10g",
                cases[c].name, x[i], get_el(o[2], i), num);
    }
    for (int k = 0; k < 3; k++) loom_tensor_free(o[k]);
    loom_session_free(s);
    loom_graph_free(g);
  }
}

/* ------------------------------------------------------- unary int ops */
Test(math, unary_int_ops_i32_i64) {
  double x[] = {-7, -1, 0, 1, 5, 46340};
  int64_t d[1] = {6};
  struct {
    const char *name;
    un_fn fn;
    double want[6];
  } cases[] = {
      {"neg", loom_neg, {7, 1, 0, -1, -5, -46340}},
      {"abs", loom_abs, {7, 1, 0, 1, 5, 46340}},
      {"square", loom_square, {49, 1, 0, 1, 25, 2147395600}},
      {"sign", loom_sign, {-1, -1, 0, 1, 1, 1}},
  };
  for (int t = 0; t < 2; t++) {
    loom_dtype dt = t ? LOOM_I64 : LOOM_I32;
    loom_tensor *in = mkd(dt, 1, d, x);
    for (size_t c = 0; c < 4; c++) {
      op_desc op = {cases[c].name, cases[c].fn, NULL, NULL};
      loom_tensor *out = run_op(&op, &in, 1);
      expect(out, dt, 1, d, cases[c].want, 0, cases[c].name);
      loom_tensor_free(out);
    }
    loom_tensor_free(in);
  }
  /* two's complement wrap-around like TF: -INT_MIN == INT_MIN, |INT_MIN| == INT_MIN */
  int32_t mn = INT32_MIN;
  loom_tensor *in = loom_tensor_from_data(LOOM_I32, 0, NULL, &mn, NULL);
  op_desc opn = {"neg", loom_neg, NULL, NULL}, opa = {"abs", loom_abs, NULL, NULL};
  loom_tensor *o1 = run_op(&opn, &in, 1), *o2 = run_op(&opa, &in, 1);
  cr_assert_eq(*(const int32_t *)loom_tensor_data_const(o1), INT32_MIN);
  cr_assert_eq(*(const int32_t *)loom_tensor_data_const(o2), INT32_MIN);
  loom_tensor_free(o1);
  loom_tensor_free(o2);
  loom_tensor_free(in);
}

/* -------------------------------------------------------- binary float ops */
static double r_add(double a, double b) { return a + b; }
static double r_sub(double a, double b) { return a - b; }
static double r_mul(double a, double b) { return a * b; }
static double r_div(double a, double b) { return a / b; }
static double r_pow(double a, double b) { return exp(b * log(a)); }
static double r_max(double a, double b) { return a > b ? a : b; }
static double r_min(double a, double b) { return a < b ? a : b; }
static double r_relu_g(double dy, double y) { return y > 0 ? dy : 0; }
static double r_relu6_g(double dy, double y) { return y > 0 && y < 6 ? dy : 0; }
static double r_sigmoid_g(double y, double dy) { return dy * y * (1 - y); }
static double r_tanh_g(double y, double dy) { return dy * (1 - y * y); }
static double r_elu_g(double dy, double y) { return y > 0 ? dy : dy * (y + 1); }
static double r_selu_g(double dy, double y) { return y > 0 ? dy * SELU_SCALE : dy * (y + SELU_SCALE * SELU_ALPHA); }
static double r_leaky_g(double dy, double x) { return x > 0 ? dy : 0.3 * dy; }
static double r_softplus_g(double dy, double x) { return dy / (1 + exp(-x)); }
static double r_gelu_g(double dy, double x) {
  return dy * (0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * 3.14159265358979323846));
}
static double r_gelu_tanh_g(double dy, double x) { /* product rule, written out */
  double k = sqrt(2.0 / 3.14159265358979323846), u = k * (x + 0.044715 * x * x * x), t = tanh(u);
  double du = k * (1 + 3 * 0.044715 * x * x);
  return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du);
}
static double r_rsqrt_g(double y, double dy) { return -0.5 * dy * y * y * y; }
static double r_sqrt_g(double y, double dy) { return dy / (2 * y); }
static loom_output b_leaky_g(loom_graph *g, loom_output a, loom_output b, const char *n) {
  return loom_leaky_relu_grad(g, a, b, 0.3, n);
}
static loom_output b_gelu_g(loom_graph *g, loom_output a, loom_output b, const char *n) {
  return loom_gelu_grad(g, a, b, 0, n);
}
static loom_output b_gelu_tanh_g(loom_graph *g, loom_output a, loom_output b, const char *n) {
  return loom_gelu_grad(g, a, b, 1, n);
}

typedef struct bin_case {
  const char *name;
  bin_fn fn;
  double (*ref)(double, double);
  double alo, ahi, blo, bhi;
} bin_case;

static const bin_case BINARY_FLOAT[] = {
    {"add", loom_add, r_add, -5, 5, -5, 5},
    {"sub", loom_sub, r_sub, -5, 5, -5, 5},
    {"mul", loom_mul, r_mul, -5, 5, -5, 5},
    {"div", loom_div, r_div, -5, 5, 0.5, 3},
    {"pow", loom_pow, r_pow, 0.1, 4, -2, 3},
    {"maximum", loom_maximum, r_max, -5, 5, -5, 5},
    {"minimum", loom_minimum, r_min, -5, 5, -5, 5},
    {"relu_grad", loom_relu_grad, r_relu_g, -2, 2, -3, 3},
    {"relu6_grad", loom_relu6_grad, r_relu6_g, -2, 2, -2, 8},
    {"sigmoid_grad", loom_sigmoid_grad, r_sigmoid_g, 0, 1, -2, 2},
    {"tanh_grad", loom_tanh_grad, r_tanh_g, -1, 1, -2, 2},
    {"elu_grad", loom_elu_grad, r_elu_g, -2, 2, -1, 3},
    {"selu_grad", loom_selu_grad, r_selu_g, -2, 2, -1.7, 3},
    {"leaky_relu_grad", b_leaky_g, r_leaky_g, -2, 2, -3, 3},
    {"softplus_grad", loom_softplus_grad, r_softplus_g, -2, 2, -10, 10},
    {"gelu_grad", b_gelu_g, r_gelu_g, -2, 2, -5, 5},
    {"gelu_grad_tanh", b_gelu_tanh_g, r_gelu_tanh_g, -2, 2, -5, 5},
    {"rsqrt_grad", loom_rsqrt_grad, r_rsqrt_g, 0.1, 3, -2, 2},
    {"sqrt_grad", loom_sqrt_grad, r_sqrt_g, 0.1, 3, -2, 2},
};

/* Shape pairs exercising every broadcasting path. */
typedef struct shape_pair {
  int na;
  int64_t a[4];
  int nb;
  int64_t b[4];
} shape_pair;
static const shape_pair SHAPES[] = {
    {2, {2, 3}, 2, {2, 3}},       /* same shape */
    {2, {2, 3}, 1, {3}},          /* row broadcast (bias) */
    {1, {3}, 2, {2, 3}},          /* row broadcast, swapped */
    {2, {2, 1}, 2, {1, 3}},       /* outer product */
    {2, {2, 3}, 2, {2, 1}},       /* column broadcast */
    {0, {0}, 2, {2, 3}},          /* scalar op tensor */
    {2, {2, 3}, 0, {0}},          /* tensor op scalar */
    {0, {0}, 0, {0}},             /* rank 0 */
    {3, {4, 1, 3}, 2, {2, 1}},    /* generic: -> [4,2,3] */
    {3, {2, 3, 5}, 3, {2, 1, 5}}, /* middle broadcast */
    {2, {0, 3}, 1, {3}},          /* zero-size */
    {1, {1}, 2, {0, 1}},          /* zero-size from a broadcast */
};

static void check_binary(const char *name, bin_fn fn, double (*ref)(double, double), loom_dtype dt,
                         const shape_pair *sp, double alo, double ahi, double blo, double bhi, double tol) {
  loom_tensor *in[2] = {mkr(dt, sp->na, sp->a, alo, ahi), mkr(dt, sp->nb, sp->b, blo, bhi)};
  op_desc op = {name, NULL, fn, NULL};
  loom_tensor *out = run_op(&op, in, 1);
  int64_t od[8];
  int on = bshape(sp->na, sp->a, sp->nb, sp->b, od);
  int64_t n = prod(on, od);
  double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    want[i] = ref(get_el(in[0], bidx(i, on, od, sp->na, sp->a)), get_el(in[1], bidx(i, on, od, sp->nb, sp->b)));
  char what[128];
  snprintf(what, sizeof what, "%s %s shapes %d:%d", name, loom_dtype_name(dt), sp->na, sp->nb);
  expect(out, dt, on, od, want, tol, what);
  free(want);
  loom_tensor_free(out);
  loom_tensor_free(in[0]);
  loom_tensor_free(in[1]);
}

Test(math, binary_float_ops_broadcasting_f32_f64) {
  for (size_t c = 0; c < sizeof BINARY_FLOAT / sizeof BINARY_FLOAT[0]; c++) {
    const bin_case *bc = &BINARY_FLOAT[c];
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
      check_binary(bc->name, bc->fn, bc->ref, LOOM_F32, &SHAPES[s], bc->alo, bc->ahi, bc->blo, bc->bhi, 4e-6);
      check_binary(bc->name, bc->fn, bc->ref, LOOM_F64, &SHAPES[s], bc->alo, bc->ahi, bc->blo, bc->bhi, 1e-12);
    }
  }
}

Test(math, maximum_minimum_propagate_nan) {
  double a[] = {NAN, 1, NAN, -INFINITY};
  double b[] = {1, NAN, NAN, 2};
  int64_t d[1] = {4};
  double wmax[] = {NAN, NAN, NAN, 2}, wmin[] = {NAN, NAN, NAN, -INFINITY};
  loom_tensor *in[2] = {mkd(LOOM_F32, 1, d, a), mkd(LOOM_F32, 1, d, b)};
  op_desc mx = {"maximum", NULL, loom_maximum, NULL}, mn = {"minimum", NULL, loom_minimum, NULL};
  loom_tensor *o = run_op(&mx, in, 1);
  expect(o, LOOM_F32, 1, d, wmax, 0, "maximum nan");
  loom_tensor_free(o);
  o = run_op(&mn, in, 1);
  expect(o, LOOM_F32, 1, d, wmin, 0, "minimum nan");
  loom_tensor_free(o);
  loom_tensor_free(in[0]);
  loom_tensor_free(in[1]);
}

/* ---------------------------------------------------------- binary int ops */
Test(math, binary_int_ops_i32_i64) {
  /* a [2,3], b [3] */
  double a[] = {7, -7, 100, 0, 9, -2147483648.0};
  double b[] = {2, 2, -3};
  int64_t ad[2] = {2, 3}, bd[1] = {3};
  struct {
    const char *name;
    bin_fn fn;
    double w32[6], w64[6];
  } cases[] = {
      {"add", loom_add, {9, -5, 97, 2, 11, -2147483651.0 + 4294967296.0}, {9, -5, 97, 2, 11, -2147483651.0}},
      {"sub", loom_sub, {5, -9, 103, -2, 7, -2147483645.0}, {5, -9, 103, -2, 7, -2147483645.0}},
      {"mul", loom_mul, {14, -14, -300, 0, 18, -2147483648.0}, {14, -14, -300, 0, 18, 6442450944.0}},
      {"div", loom_div, {3, -3, -33, 0, 4, 715827882}, {3, -3, -33, 0, 4, 715827882}},
      {"maximum", loom_maximum, {7, 2, 100, 2, 9, -3}, {7, 2, 100, 2, 9, -3}},
      {"minimum", loom_minimum, {2, -7, -3, 0, 2, -2147483648.0}, {2, -7, -3, 0, 2, -2147483648.0}},
  };
  for (int t = 0; t < 2; t++) {
    loom_dtype dt = t ? LOOM_I64 : LOOM_I32;
    loom_tensor *in[2] = {mkd(dt, 2, ad, a), mkd(dt, 1, bd, b)};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      op_desc op = {cases[c].name, NULL, cases[c].fn, NULL};
      loom_tensor *out = run_op(&op, in, 1);
      char what[64];
      snprintf(what, sizeof what, "%s %s", cases[c].name, loom_dtype_name(dt));
      expect(out, dt, 2, ad, t ? cases[c].w64 : cases[c].w32, 0, what);
      loom_tensor_free(out);
    }
    loom_tensor_free(in[0]);
    loom_tensor_free(in[1]);
  }
  /* truncation toward zero, INT_MIN / -1 wraps, scalar divisor */
  int32_t na[] = {-7, 7, -1, INT32_MIN}, nb = -1;
  int64_t nd[1] = {4};
  loom_tensor *in[2] = {loom_tensor_from_data(LOOM_I32, 1, nd, na, NULL),
                        loom_tensor_from_data(LOOM_I32, 0, NULL, &nb, NULL)};
  op_desc op = {"div", NULL, loom_div, NULL};
  loom_tensor *out = run_op(&op, in, 1);
  double w[] = {7, -7, 1, INT32_MIN};
  expect(out, LOOM_I32, 1, nd, w, 0, "div by -1");
  loom_tensor_free(out);
  loom_tensor_free(in[0]);
  loom_tensor_free(in[1]);
  int64_t la[] = {-9, 9, INT64_MIN}, lb[] = {4, -4, 2};
  int64_t ld[1] = {3};
  loom_tensor *li[2] = {loom_tensor_from_data(LOOM_I64, 1, ld, la, NULL), loom_tensor_from_data(LOOM_I64, 1, ld, lb, NULL)};
  out = run_op(&op, li, 1);
  const int64_t *lo = loom_tensor_data_const(out);
  cr_assert(lo[0] == -2 && lo[1] == -2 && lo[2] == INT64_MIN / 2, "i64 div %lld %lld %lld", (long long)lo[0],
            (long long)lo[1], (long long)lo[2]);
  loom_tensor_free(out);
  loom_tensor_free(li[0]);
  loom_tensor_free(li[1]);
}

Test(math, integer_division_by_zero_is_an_error) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output a = loom_placeholder(g, LOOM_I32, 1, d, "a");
  loom_output b = loom_placeholder(g, LOOM_I32, 1, d, "b");
  loom_output q = loom_div(g, a, b, "q");
  int32_t av[3] = {1, 2, 3}, bv[3] = {1, 0, 1};
  int64_t n3[1] = {3};
  loom_tensor *at = loom_tensor_from_data(LOOM_I32, 1, n3, av, NULL), *bt = loom_tensor_from_data(LOOM_I32, 1, n3, bv, NULL);
  loom_output feeds[2] = {a, b};
  loom_tensor *vals[2] = {at, bt};
  char msg[512];
  cr_assert_eq(tu_run_err(g, 2, feeds, vals, q, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "q: integer division by zero"), "%s", msg);
  /* i64 and a broadcast scalar zero */
  loom_output a64 = loom_const_i64(g, 5, "a64");
  int64_t z[2] = {3, 0};
  loom_output b64 = loom_const_data(g, LOOM_I64, 1, (int64_t[]){2}, z, "b64");
  loom_output q64 = loom_div(g, a64, b64, "q64");
  cr_assert_eq(tu_run_err(g, 0, NULL, NULL, q64, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "q64: integer division by zero"), "%s", msg);
  /* float division by zero is IEEE */
  loom_output fq = loom_div(g, loom_const_f32(g, 1, NULL), loom_const_f32(g, 0, NULL), "fq");
  loom_tensor *o = tu_run1(g, 0, NULL, NULL, fq);
  cr_assert(isinf(*(const float *)loom_tensor_data_const(o)));
  loom_tensor_free(o);
  /* an empty output divides nothing: no error */
  int64_t n0[1] = {0};
  loom_tensor *e1 = loom_tensor_new(LOOM_I32, 1, n0, NULL), *e2 = loom_tensor_new(LOOM_I32, 1, n0, NULL);
  loom_tensor *ev[2] = {e1, e2};
  o = tu_run1(g, 2, feeds, ev, q);
  cr_assert_eq(loom_tensor_numel(o), 0);
  loom_tensor_free(o);
  loom_tensor_free(e1);
  loom_tensor_free(e2);
  loom_tensor_free(at);
  loom_tensor_free(bt);
  loom_graph_free(g);
}

/* ------------------------------------------------------------- comparisons */
static double r_eq(double a, double b) { return a == b; }
static double r_ne(double a, double b) { return a != b; }
static double r_lt(double a, double b) { return a < b; }
static double r_le(double a, double b) { return a <= b; }
static double r_gt(double a, double b) { return a > b; }
static double r_ge(double a, double b) { return a >= b; }

Test(math, comparisons_all_dtypes_broadcasting) {
  struct {
    const char *name;
    bin_fn fn;
    double (*ref)(double, double);
  } cases[] = {{"equal", loom_equal, r_eq},         {"not_equal", loom_not_equal, r_ne},
               {"less", loom_less, r_lt},           {"less_equal", loom_less_equal, r_le},
               {"greater", loom_greater, r_gt},     {"greater_equal", loom_greater_equal, r_ge}};
  loom_dtype dts[] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64, LOOM_U8};
  /* small integers so equality happens often */
  double a[] = {1, 2, 3, 3, 2, 1}, b[] = {2, 2, 2};
  int64_t ad[2] = {2, 3}, bd[1] = {3};
  for (size_t c = 0; c < 6; c++)
    for (size_t t = 0; t < 5; t++) {
      loom_tensor *in[2] = {mkd(dts[t], 2, ad, a), mkd(dts[t], 1, bd, b)};
      op_desc op = {cases[c].name, NULL, cases[c].fn, NULL};
      loom_tensor *out = run_op(&op, in, 1);
      double want[6];
      for (int i = 0; i < 6; i++) want[i] = cases[c].ref(a[i], b[i % 3]);
      char what[64];
      snprintf(what, sizeof what, "%s %s", cases[c].name, loom_dtype_name(dts[t]));
      expect(out, LOOM_BOOL, 2, ad, want, 0, what);
      loom_tensor_free(out);
      /* swapped operands and the other broadcasting paths */
      loom_tensor *sw[2] = {in[1], in[0]};
      out = run_op(&op, sw, 1);
      for (int i = 0; i < 6; i++) want[i] = cases[c].ref(b[i % 3], a[i]);
      expect(out, LOOM_BOOL, 2, ad, want, 0, what);
      loom_tensor_free(out);
      loom_tensor_free(in[0]);
      loom_tensor_free(in[1]);
    }
  /* NaN compares unequal to everything, including itself */
  double na[] = {NAN, 1}, nb[] = {NAN, NAN};
  int64_t nd[1] = {2};
  loom_tensor *in[2] = {mkd(LOOM_F32, 1, nd, na), mkd(LOOM_F32, 1, nd, nb)};
  double f2[2] = {0, 0}, t2[2] = {1, 1};
  for (size_t c = 0; c < 6; c++) {
    op_desc op = {cases[c].name, NULL, cases[c].fn, NULL};
    loom_tensor *out = run_op(&op, in, 1);
    expect(out, LOOM_BOOL, 1, nd, c == 1 ? t2 : f2, 0, "nan compare");
    loom_tensor_free(out);
  }
  loom_tensor_free(in[0]);
  loom_tensor_free(in[1]);
  /* bool equality */
  double ba[] = {0, 1, 0, 1}, bb[] = {0, 0, 1, 1};
  int64_t b4[1] = {4};
  loom_tensor *bi[2] = {mkd(LOOM_BOOL, 1, b4, ba), mkd(LOOM_BOOL, 1, b4, bb)};
  op_desc eq = {"equal", NULL, loom_equal, NULL}, ne = {"not_equal", NULL, loom_not_equal, NULL};
  double weq[] = {1, 0, 0, 1}, wne[] = {0, 1, 1, 0};
  loom_tensor *out = run_op(&eq, bi, 1);
  expect(out, LOOM_BOOL, 1, b4, weq, 0, "equal bool");
  loom_tensor_free(out);
  out = run_op(&ne, bi, 1);
  expect(out, LOOM_BOOL, 1, b4, wne, 0, "not_equal bool");
  loom_tensor_free(out);
  loom_tensor_free(bi[0]);
  loom_tensor_free(bi[1]);
}

Test(math, logical_ops) {
  double a[] = {0, 1}, b[] = {0, 1};
  int64_t ad[2] = {2, 1}, bd[2] = {1, 2}, od[2] = {2, 2};
  loom_tensor *in[2] = {mkd(LOOM_BOOL, 2, ad, a), mkd(LOOM_BOOL, 2, bd, b)};
  op_desc land = {"and", NULL, loom_logical_and, NULL}, lor = {"or", NULL, loom_logical_or, NULL};
  double wand[] = {0, 0, 0, 1}, wor[] = {0, 1, 1, 1};
  loom_tensor *out = run_op(&land, in, 1);
  expect(out, LOOM_BOOL, 2, od, wand, 0, "logical_and");
  loom_tensor_free(out);
  out = run_op(&lor, in, 1);
  expect(out, LOOM_BOOL, 2, od, wor, 0, "logical_or");
  loom_tensor_free(out);
  op_desc lnot = {"not", loom_logical_not, NULL, NULL};
  out = run_op(&lnot, in, 1);
  double wnot[] = {1, 0};
  expect(out, LOOM_BOOL, 2, ad, wnot, 0, "logical_not");
  loom_tensor_free(out);
  /* rank 0 */
  loom_tensor *s[2] = {mkd(LOOM_BOOL, 0, NULL, (double[]){1}), mkd(LOOM_BOOL, 0, NULL, (double[]){1})};
  out = run_op(&land, s, 1);
  expect(out, LOOM_BOOL, 0, NULL, (double[]){1}, 0, "logical_and rank0");
  loom_tensor_free(out);
  loom_tensor_free(s[0]);
  loom_tensor_free(s[1]);
  loom_tensor_free(in[0]);
  loom_tensor_free(in[1]);
}

/* ------------------------------------------------------------ select, clip */
static void check_select(loom_dtype dt, int nc, const int64_t *cd, int nx, const int64_t *xd, int ny,
                         const int64_t *yd) {
  loom_tensor *in[3] = {mkr(LOOM_BOOL, nc, cd, 0, 1), mkr(dt, nx, xd, 0, 100), mkr(dt, ny, yd, -100, 0)};
  op_desc op = {"select", NULL, NULL, loom_select};
  loom_tensor *out = run_op(&op, in, 1);
  int64_t t[8], od[8];
  int n1 = bshape(nc, cd, nx, xd, t);
  int on = bshape(n1, t, ny, yd, od);
  int64_t n = prod(on, od);
  double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    want[i] = get_el(in[0], bidx(i, on, od, nc, cd)) ? get_el(in[1], bidx(i, on, od, nx, xd))
                                                      : get_el(in[2], bidx(i, on, od, ny, yd));
  char what[64];
  snprintf(what, sizeof what, "select %s %d/%d/%d", loom_dtype_name(dt), nc, nx, ny);
  expect(out, dt, on, od, want, 0, what);
  free(want);
  loom_tensor_free(out);
  for (int k = 0; k < 3; k++) loom_tensor_free(in[k]);
}

Test(math, select_three_way_broadcasting) {
  loom_dtype dts[] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64, LOOM_U8, LOOM_BOOL};
  int64_t s23[2] = {2, 3}, s21[2] = {2, 1}, s13[2] = {1, 3}, s3[1] = {3}, s423[3] = {4, 2, 3}, s03[2] = {0, 3};
  for (int t = 0; t < 6; t++) {
    check_select(dts[t], 2, s23, 2, s23, 2, s23);   /* same shapes */
    check_select(dts[t], 2, s21, 2, s13, 0, NULL);  /* cond column, x row, y scalar */
    check_select(dts[t], 0, NULL, 2, s23, 1, s3);   /* scalar cond */
    check_select(dts[t], 1, s3, 3, s423, 2, s21);   /* generic */
    check_select(dts[t], 2, s03, 1, s3, 0, NULL);   /* zero-size */
    check_select(dts[t], 0, NULL, 0, NULL, 0, NULL); /* rank 0 */
  }
}

static void check_clip(loom_dtype dt, int nt, const int64_t *td, int nl, const int64_t *ld, int nh, const int64_t *hd) {
  loom_tensor *in[3] = {mkr(dt, nt, td, -10, 10), mkr(dt, nl, ld, -6, -1), mkr(dt, nh, hd, 1, 6)};
  op_desc op = {"clip", NULL, NULL, loom_clip_by_value};
  loom_tensor *out = run_op(&op, in, 1);
  int64_t n = prod(nt, td);
  double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    double v = get_el(in[0], i), lo = get_el(in[1], bidx(i, nt, td, nl, ld)), hi = get_el(in[2], bidx(i, nt, td, nh, hd));
    want[i] = v < lo ? lo : v > hi ? hi : v;
  }
  expect(out, dt, nt, td, want, 0, "clip_by_value");
  free(want);
  loom_tensor_free(out);
  for (int k = 0; k < 3; k++) loom_tensor_free(in[k]);
}

Test(math, clip_by_value) {
  loom_dtype dts[] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64};
  int64_t s23[2] = {2, 3}, s3[1] = {3}, s21[2] = {2, 1}, s03[2] = {0, 3};
  for (int t = 0; t < 4; t++) {
    check_clip(dts[t], 2, s23, 0, NULL, 0, NULL); /* scalar bounds */
    check_clip(dts[t], 2, s23, 2, s23, 2, s23);   /* same shapes */
    check_clip(dts[t], 2, s23, 1, s3, 0, NULL);   /* per-column min */
    check_clip(dts[t], 2, s23, 2, s21, 1, s3);    /* mixed */
    check_clip(dts[t], 0, NULL, 0, NULL, 0, NULL); /* rank 0 */
    check_clip(dts[t], 2, s03, 0, NULL, 1, s3);   /* zero-size */
  }
  /* NaN passes through */
  double v[] = {NAN, -5, 5};
  int64_t d[1] = {3};
  loom_tensor *in[3] = {mkd(LOOM_F32, 1, d, v), mkd(LOOM_F32, 0, NULL, (double[]){-1}), mkd(LOOM_F32, 0, NULL, (double[]){1})};
  op_desc op = {"clip", NULL, NULL, loom_clip_by_value};
  loom_tensor *out = run_op(&op, in, 1);
  expect(out, LOOM_F32, 1, d, (double[]){NAN, -1, 1}, 0, "clip nan");
  loom_tensor_free(out);
  for (int k = 0; k < 3; k++) loom_tensor_free(in[k]);
}

/* ------------------------------------------------------- zero-size, rank 0 */
Test(math, zero_size_and_rank0_unary) {
  int64_t z[2] = {0, 4};
  for (size_t c = 0; c < sizeof UNARY_FLOAT / sizeof UNARY_FLOAT[0]; c++) {
    op_desc op = {UNARY_FLOAT[c].name, UNARY_FLOAT[c].fn, NULL, NULL};
    loom_tensor *in = loom_tensor_new(LOOM_F32, 2, z, NULL);
    loom_tensor *out = run_op(&op, &in, 1);
    expect(out, LOOM_F32, 2, z, NULL, 0, UNARY_FLOAT[c].name);
    loom_tensor_free(out);
    loom_tensor_free(in);
    double x = UNARY_FLOAT[c].lo + 0.37 * (UNARY_FLOAT[c].hi - UNARY_FLOAT[c].lo);
    in = mkd(LOOM_F64, 0, NULL, &x);
    out = run_op(&op, &in, 1);
    double w = UNARY_FLOAT[c].ref(x);
    expect(out, LOOM_F64, 0, NULL, &w, 1e-12, UNARY_FLOAT[c].name);
    loom_tensor_free(out);
    loom_tensor_free(in);
  }
}

/* ------------------------------------------------------------------ errors */
static void expect_build_error(loom_graph *g, const char *needle) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_INVALID_ARGUMENT, "no error; want \"%s\"", needle);
  cr_assert(strstr(loom_status_message(st), needle), "message \"%s\" lacks \"%s\"", loom_status_message(st), needle);
  loom_status_free(st);
  loom_graph_free(g);
}

Test(math, build_errors_name_the_node) {
  int64_t d23[2] = {2, 3}, d4[1] = {4}, dq[2] = {-1, 3}, d5[2] = {-1, 5};
  loom_graph *g = loom_graph_new();
  loom_mul(g, loom_placeholder(g, LOOM_F32, 2, d23, "x"), loom_placeholder(g, LOOM_F32, 1, d4, "y"), "prod");
  expect_build_error(g, "prod: shapes [2,3] and [4] are not broadcastable");

  g = loom_graph_new();
  loom_graph_push_scope(g, "layer");
  loom_less(g, loom_placeholder(g, LOOM_F32, 2, dq, "x"), loom_placeholder(g, LOOM_F32, 2, d5, "y"), NULL);
  loom_graph_pop_scope(g);
  expect_build_error(g, "layer/Less: shapes [?,3] and [?,5] are not broadcastable");

  g = loom_graph_new();
  loom_sub(g, loom_const_f32(g, 1, NULL), loom_const_i32(g, 1, NULL), "mix");
  expect_build_error(g, "mix: dtypes float32 and int32 do not match");

  g = loom_graph_new();
  loom_exp(g, loom_const_i32(g, 1, NULL), "e");
  expect_build_error(g, "e: input 0 has unsupported dtype int32 (expected float32 or float64)");

  g = loom_graph_new();
  loom_pow(g, loom_const_i64(g, 1, NULL), loom_const_i64(g, 1, NULL), "p");
  expect_build_error(g, "p: input 0 has unsupported dtype int64");

  g = loom_graph_new();
  loom_add(g, loom_placeholder(g, LOOM_BOOL, 0, NULL, "b"), loom_placeholder(g, LOOM_BOOL, 0, NULL, "c"), "badd");
  expect_build_error(g, "badd: input 0 has unsupported dtype bool");

  g = loom_graph_new();
  loom_logical_and(g, loom_const_f32(g, 1, NULL), loom_const_f32(g, 1, NULL), "and");
  expect_build_error(g, "and: input 0 has unsupported dtype float32 (expected bool)");

  g = loom_graph_new();
  loom_less(g, loom_placeholder(g, LOOM_BOOL, 0, NULL, "b"), loom_placeholder(g, LOOM_BOOL, 0, NULL, "c"), "lt");
  expect_build_error(g, "lt: input 0 has unsupported dtype bool");

  g = loom_graph_new();
  loom_select(g, loom_const_f32(g, 1, NULL), loom_const_f32(g, 1, NULL), loom_const_f32(g, 2, NULL), "sel");
  expect_build_error(g, "sel: condition must be bool, got float32");

  g = loom_graph_new();
  loom_select(g, loom_placeholder(g, LOOM_BOOL, 0, NULL, "c"), loom_const_f32(g, 1, NULL), loom_const_i32(g, 2, NULL),
              "sel2");
  expect_build_error(g, "sel2: dtypes float32 and int32 of x and y do not match");

  g = loom_graph_new();
  loom_select(g, loom_placeholder(g, LOOM_BOOL, 1, d4, "c"), loom_placeholder(g, LOOM_F32, 2, d23, "x"),
              loom_const_f32(g, 2, NULL), "sel3");
  expect_build_error(g, "sel3: shapes [4] (condition), [2,3] (x) and [] (y) are not broadcastable");

  g = loom_graph_new();
  loom_clip_by_value(g, loom_placeholder(g, LOOM_F32, 1, (int64_t[]){3}, "t"), loom_placeholder(g, LOOM_F32, 2, d23, "lo"),
                     loom_const_f32(g, 1, NULL), "clip");
  expect_build_error(g, "clip: clip_value_min of shape [2,3] does not broadcast to t's shape [3]");

  g = loom_graph_new();
  double one = 1;
  loom_clip_by_value(g, loom_placeholder(g, LOOM_F32, 1, (int64_t[]){3}, "t"), loom_const_f32(g, 0, NULL),
                     loom_const_data(g, LOOM_F64, 0, NULL, &one, NULL), "clip2");
  expect_build_error(g, "clip2: clip_value_max has dtype float64, expected float32 like t");

  g = loom_graph_new();
  loom_relu(g, loom_const_i32(g, 1, NULL), "r");
  expect_build_error(g, "r: input 0 has unsupported dtype int32");
}

Test(math, run_time_shape_mismatch_names_the_node) {
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output a = loom_placeholder(g, LOOM_F32, 1, d, "a");
  loom_output b = loom_placeholder(g, LOOM_F32, 1, d, "b");
  loom_output r = loom_maximum(g, a, b, "rt");
  int64_t d3[1] = {3}, d4[1] = {4};
  loom_tensor *vals[2] = {loom_tensor_new(LOOM_F32, 1, d3, NULL), loom_tensor_new(LOOM_F32, 1, d4, NULL)};
  loom_output feeds[2] = {a, b};
  char msg[512];
  cr_assert_eq(tu_run_err(g, 2, feeds, vals, r, msg, sizeof msg), LOOM_INVALID_ARGUMENT);
  cr_assert(strstr(msg, "rt: shapes [3] and [4] are not broadcastable"), "%s", msg);
  loom_tensor_free(vals[0]);
  loom_tensor_free(vals[1]);
  loom_graph_free(g);
}

Test(math, node_names_and_static_shapes) {
  loom_graph *g = loom_graph_new();
  int64_t d[2] = {-1, 3}, b[1] = {3};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, d, "x");
  loom_output q = loom_div(g, x, loom_placeholder(g, LOOM_F32, 1, b, "b"), NULL);
  cr_assert_str_eq(loom_node_name(q.node), "RealDiv");
  cr_assert_str_eq(loom_node_op_name(q.node), "RealDiv");
  int64_t od[LOOM_MAX_DIMS];
  cr_assert_eq(loom_output_dims(q, od), 2);
  cr_assert_eq(od[0], -1);
  cr_assert_eq(od[1], 3);
  loom_output c = loom_greater(g, x, loom_const_f32(g, 0, NULL), NULL);
  cr_assert_eq(loom_output_dtype(c), LOOM_BOOL);
  cr_assert_str_eq(loom_node_op_name(c.node), "Greater");
  loom_output s = loom_select(g, c, x, loom_const_f32(g, 0, NULL), NULL);
  cr_assert_str_eq(loom_node_op_name(s.node), "SelectV2");
  cr_assert_eq(loom_output_dims(s, od), 2);
  cr_assert_eq(od[0], -1);
  cr_assert_eq(loom_graph_status(g, NULL), LOOM_OK);
  loom_graph_free(g);
}

/* ---------------------------------------------------- large, two threads */
Test(math, large_inputs_parallel_path) {
  enum { R = 3001, C = 37 }; /* 111037 elements: rows straddle the chunk edges */
  int64_t xd[2] = {R, C}, bd[1] = {C}, cd[2] = {R, 1};
  int64_t g3a[3] = {31, 1, C}, g3b[2] = {101, 1}; /* -> [31,101,37] = 115847 */
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_output y = loom_placeholder(g, LOOM_F32, 2, xd, "y");
  loom_output bb = loom_placeholder(g, LOOM_F32, 1, bd, "b");
  loom_output col = loom_placeholder(g, LOOM_F32, 2, cd, "col");
  loom_output ga = loom_placeholder(g, LOOM_F32, 3, g3a, "ga");
  loom_output gb = loom_placeholder(g, LOOM_F32, 2, g3b, "gb");
  loom_output xi = loom_placeholder(g, LOOM_I32, 2, xd, "xi");
  loom_output bi = loom_placeholder(g, LOOM_I32, 1, bd, "bi");
  enum { NF = 9 };
  loom_output f[NF];
  f[0] = loom_add(g, x, y, "same");
  f[1] = loom_add(g, x, bb, "row");
  f[2] = loom_mul(g, x, col, "col");
  f[3] = loom_sub(g, ga, gb, "gen");
  f[4] = loom_exp(g, x, "exp");
  f[5] = loom_sigmoid(g, x, "sig");
  f[6] = loom_select(g, loom_less(g, x, bb, NULL), x, y, "sel");
  f[7] = loom_clip_by_value(g, x, loom_const_f32(g, -0.5f, NULL), loom_const_f32(g, 0.5f, NULL), "clip");
  f[8] = loom_div(g, xi, bi, "idiv");
  loom_tensor *xt = mkr(LOOM_F32, 2, xd, -3, 3), *yt = mkr(LOOM_F32, 2, xd, -3, 3), *bt = mkr(LOOM_F32, 1, bd, -1, 1);
  loom_tensor *ct = mkr(LOOM_F32, 2, cd, -2, 2), *gat = mkr(LOOM_F32, 3, g3a, -5, 5), *gbt = mkr(LOOM_F32, 2, g3b, -5, 5);
  loom_tensor *xit = mkr(LOOM_I32, 2, xd, -1000, 1000), *bit = mkr(LOOM_I32, 1, bd, 1, 20);
  loom_output feeds[8] = {x, y, bb, col, ga, gb, xi, bi};
  loom_tensor *vals[8] = {xt, yt, bt, ct, gat, gbt, xit, bit};
  loom_session *s = new_session(g, 2);
  loom_tensor *o[NF] = {0};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, feeds, vals, 8, f, o, NF, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  const float *X = loom_tensor_data_const(xt), *Y = loom_tensor_data_const(yt), *B = loom_tensor_data_const(bt);
  const float *CO = loom_tensor_data_const(ct), *GA = loom_tensor_data_const(gat), *GB = loom_tensor_data_const(gbt);
  const int32_t *XI = loom_tensor_data_const(xit), *BI = loom_tensor_data_const(bit);
  const float *o0 = loom_tensor_data_const(o[0]), *o1 = loom_tensor_data_const(o[1]), *o2 = loom_tensor_data_const(o[2]);
  const float *o3 = loom_tensor_data_const(o[3]), *o4 = loom_tensor_data_const(o[4]), *o5 = loom_tensor_data_const(o[5]);
  const float *o6 = loom_tensor_data_const(o[6]), *o7 = loom_tensor_data_const(o[7]);
  const int32_t *o8 = loom_tensor_data_const(o[8]);
  for (int64_t r = 0; r < R; r++)
    for (int64_t c = 0; c < C; c++) {
      int64_t i = r * C + c;
      cr_assert_eq(o0[i], X[i] + Y[i], "same %lld", (long long)i);
      cr_assert_eq(o1[i], X[i] + B[c], "row %lld", (long long)i);
      cr_assert_eq(o2[i], X[i] * CO[r], "col %lld", (long long)i);
      cr_assert(fabs(o4[i] - exp((double)X[i])) <= 2e-6 * exp((double)X[i]), "exp %lld", (long long)i);
      cr_assert(fabs(o5[i] - 1.0 / (1.0 + exp(-(double)X[i]))) <= 1e-6, "sigmoid %lld", (long long)i);
      cr_assert_eq(o6[i], X[i] < B[c] ? X[i] : Y[i], "select %lld", (long long)i);
      cr_assert_eq(o7[i], X[i] < -0.5f ? -0.5f : X[i] > 0.5f ? 0.5f : X[i], "clip %lld", (long long)i);
      cr_assert_eq(o8[i], XI[i] / BI[c], "idiv %lld", (long long)i);
    }
  for (int64_t a = 0; a < 31; a++)
    for (int64_t b = 0; b < 101; b++)
      for (int64_t c = 0; c < C; c++)
        cr_assert_eq(o3[(a * 101 + b) * C + c], GA[a * C + c] - GB[b], "gen %lld %lld %lld", (long long)a,
                     (long long)b, (long long)c);
  for (int k = 0; k < NF; k++) loom_tensor_free(o[k]);
  for (int k = 0; k < 8; k++) loom_tensor_free(vals[k]);
  loom_status_free(st);
  loom_session_free(s);
  loom_graph_free(g);
}

/* The tanh-form GELU and its gradient where 1 + tanh(u) is tiny: the kernels must not
 * cancel. Reference: 1 + tanh(u) = 2 / (1 + exp(-2u)) and 1 - tanh(u)^2 = 4 exp(-2u) / (1 + exp(-2u))^2
 * in long double (64-bit significand; no term is small against 1 there). The former f64 formula
 * (1 + th, 1 - th*th with th = tanh(u) rounded) was off by 2.7e-7 relative at x = -6, 0.7% at -7, and
 * returned 0 for x <= -8 (th rounds to -1). */
static long double r_gelu_tanh_parts(double x, long double *grad) {
  long double k = sqrtl(2.0L / 3.14159265358979323846264338327950288L);
  long double xl = x, u = k * (xl + 0.044715L * xl * xl * xl), du = k * (1 + 3 * 0.044715L * xl * xl);
  long double em = expl(-2 * u), p = 2 / (1 + em), m2 = 4 * em / ((1 + em) * (1 + em));
  *grad = 0.5L * p + 0.5L * xl * m2 * du;
  return 0.5L * xl * p;
}
Test(math, gelu_tanh_no_cancellation) {
  static const double xs[] = {-9, -8, -7, -6, -5, -4, -3, -2.5, -1.5, -0.25, 0, 0.25, 1, 2, 3, 6, 9};
  enum { n = sizeof xs / sizeof xs[0] };
  int64_t d[1] = {n};
  double ones[n];
  for (int i = 0; i < n; i++) ones[i] = 1;
  loom_graph *g = loom_graph_new();
  loom_output X = loom_const_data(g, LOOM_F64, 1, d, xs, "x");
  loom_output DY = loom_const_data(g, LOOM_F64, 1, d, ones, "dy");
  loom_output Y = loom_gelu(g, X, 1, "gelu");
  loom_output G = loom_gelu_grad(g, DY, X, 1, "gelu_grad");
  loom_output both[2] = {Y, G};
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "%s", loom_status_message(st));
  loom_tensor *r[2] = {0};
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, both, r, 2, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  const double *y = loom_tensor_data_const(r[0]), *gr = loom_tensor_data_const(r[1]);
  for (int i = 0; i < n; i++) {
    long double wg, wy = r_gelu_tanh_parts(xs[i], &wg);
    /* a few ulps: |error| <= 1e-14 relative (0 exactly at x = 0 for the value) */
    cr_assert(fabsl(y[i] - wy) <= 1e-14L * fabsl(wy), "gelu_tanh(%g) = %.17g want %.17Lg", xs[i], y[i], wy);
    cr_assert(fabsl(gr[i] - wg) <= 1e-14L * fabsl(wg), "gelu_tanh'(%g) = %.17g want %.17Lg", xs[i], gr[i], wg);
  }
  /* limits where exp(-2|u|) underflows: no NaN from 0 * inf (f64 x^3 overflows past 5.6e102) */
  double big[4] = {-1e200, 1e200, -INFINITY, INFINITY}, one4[4] = {1, 1, 1, 1};
  int64_t d4[1] = {4};
  loom_graph *g2 = loom_graph_new();
  loom_output B = loom_const_data(g2, LOOM_F64, 1, d4, big, "x");
  loom_output G2 = loom_gelu_grad(g2, loom_const_data(g2, LOOM_F64, 1, d4, one4, "dy"), B, 1, "gelu_grad");
  loom_tensor *t = tu_run1(g2, 0, NULL, NULL, G2);
  const double *gb = loom_tensor_data_const(t);
  cr_assert(gb[0] == 0 && gb[1] == 1 && gb[2] == 0 && gb[3] == 1, "limits %g %g %g %g", gb[0], gb[1], gb[2], gb[3]);
  loom_tensor_free(t);
  loom_graph_free(g2);
  loom_tensor_free(r[0]);
  loom_tensor_free(r[1]);
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
}
