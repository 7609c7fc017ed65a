/* tests/gpu/parity.h - the GPU vs CPU parity harness shared by the
 * tests/gpu/test_parity*.c programs (header-only; one program per file).
 *
 * A case builds a graph on placeholders of given dtypes and shapes; run_case
 * runs it in a CPU session and in a CUDA session on the same random feeds and
 * compares every output (and, with grad set, the gradients of sum(y * w) for
 * a fixed random w with respect to every float input) within the case's
 * tolerance: relative error |cpu - gpu| / (1 + |cpu|), NaN matching NaN.
 * A program starts with parity_gpu_present (false: no device, print a skip
 * line and exit 0) and ends with parity_report. The CUDA kernels each
 * test_parity* program ran are recorded (tests/gpu/parity_coverage.h) and
 * tests/gpu/parity_coverage.c fails on a kernel no program ran. */
#ifndef LOOM_TESTS_GPU_PARITY_H
#define LOOM_TESTS_GPU_PARITY_H
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"
#include "tests/gpu/parity_coverage.h"

#define F32 LOOM_F32
#define F64 LOOM_F64
#define I32 LOOM_I32
#define I64 LOOM_I64
#define U8 LOOM_U8
#define BOOL LOOM_BOOL

static int g_fail, g_checked;

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static inline double urand(void) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (double)(rs >> 11) * 0x1p-53;
}

static inline loom_tensor *rand_tensor(loom_dtype dt, int nd, const int64_t *dims, int64_t int_hi) {
  loom_tensor *t = loom_tensor_new(dt, nd, dims, NULL);
  int64_t n = loom_tensor_numel(t);
  void *d = loom_tensor_data(t);
  for (int64_t i = 0; i < n; i++) {
    double u = urand();
    switch (dt) {
    case LOOM_F32: ((float *)d)[i] = (float)(2 * u - 1); break;
    case LOOM_F64: ((double *)d)[i] = 2 * u - 1; break;
    case LOOM_I32: ((int32_t *)d)[i] = (int32_t)(u * (double)int_hi); break;
    case LOOM_I64: ((int64_t *)d)[i] = (int64_t)(u * (double)int_hi); break;
    default: ((uint8_t *)d)[i] = u < 0.5; break;
    }
  }
  return t;
}

static inline double elem(const loom_tensor *t, int64_t i) {
  const void *d = loom_tensor_data_const(t);
  switch (loom_tensor_dtype(t)) {
  case LOOM_F32: return ((const float *)d)[i];
  case LOOM_F64: return ((const double *)d)[i];
  case LOOM_I32: return ((const int32_t *)d)[i];
  case LOOM_I64: return (double)((const int64_t *)d)[i];
  default: return ((const uint8_t *)d)[i];
  }
}

static inline const char *parity_dims_str(char *buf, size_t cap, int nd, const int64_t *d) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < nd && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, i ? ",%lld" : "%lld", (long long)d[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}
static inline const char *parity_tensor_dims(char *buf, size_t cap, const loom_tensor *t) {
  return parity_dims_str(buf, cap, loom_tensor_ndim(t), loom_tensor_dims(t));
}

static inline int parity_exact_eq(const loom_tensor *a, const loom_tensor *b, int64_t i) {
  const void *x = loom_tensor_data_const(a), *y = loom_tensor_data_const(b);
  switch (loom_tensor_dtype(a)) {
  case LOOM_F32: {
    float p = ((const float *)x)[i], q = ((const float *)y)[i];
    if (isnan(p) && isnan(q)) return 1;
    return memcmp(&p, &q, 4) == 0;
  }
  case LOOM_F64: {
    double p = ((const double *)x)[i], q = ((const double *)y)[i];
    if (isnan(p) && isnan(q)) return 1;
    return memcmp(&p, &q, 8) == 0;
  }
  case LOOM_I32: return ((const int32_t *)x)[i] == ((const int32_t *)y)[i];
  case LOOM_I64: return ((const int64_t *)x)[i] == ((const int64_t *)y)[i];
  default: return ((const uint8_t *)x)[i] == ((const uint8_t *)y)[i];
  }
}
static inline void parity_fmt_elem(char *buf, size_t cap, const loom_tensor *t, int64_t i) {
  const void *d = loom_tensor_data_const(t);
  switch (loom_tensor_dtype(t)) {
  case LOOM_F32: snprintf(buf, cap, "%.9g", (double)((const float *)d)[i]); break;
  case LOOM_F64: snprintf(buf, cap, "%.17g", ((const double *)d)[i]); break;
  case LOOM_I64: snprintf(buf, cap, "%lld", (long long)((const int64_t *)d)[i]); break;
  default: snprintf(buf, cap, "%.17g", elem(t, i)); break;
  }
}

/* Compares a CPU result a and a GPU result b: dtype and dims must match;
 * tol 0 = bit-exact (signed zeros agree, any NaN matches any NaN), else
 * |a - b| / (1 + |a|) <= tol with NaN and infinities matching exactly. The
 * failure line names `name what`, the first differing element (and input0's
 * element there when in0 has the same size) and the worst error. 1 when they agree. */
static inline int parity_cmp(const char *name, const char *what, const loom_tensor *a, const loom_tensor *b, double tol,
                const loom_tensor *in0) {
  g_checked++;
  char s1[128], s2[128];
  if (loom_tensor_dtype(a) != loom_tensor_dtype(b) || loom_tensor_ndim(a) != loom_tensor_ndim(b) ||
      memcmp(loom_tensor_dims(a), loom_tensor_dims(b), sizeof(int64_t) * (size_t)loom_tensor_ndim(a))) {
    printf("FAIL %s%s%s: cpu %s%s gpu %s%s\n", name, name[0] ? " " : "", what, loom_dtype_name(loom_tensor_dtype(a)), parity_tensor_dims(s1, sizeof s1, a),
           loom_dtype_name(loom_tensor_dtype(b)), parity_tensor_dims(s2, sizeof s2, b));
    g_fail++;
    return 0;
  }
  int64_t n = loom_tensor_numel(a), nbad = 0, first = -1, wat = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    int bad;
    if (tol == 0) {
      bad = !parity_exact_eq(a, b, i);
    } else {
      double x = elem(a, i), y = elem(b, i);
      if (isnan(x) || isnan(y)) bad = !(isnan(x) && isnan(y));
      else if (isinf(x) || isinf(y)) bad = x != y;
      else {
        double e = fabs(x - y) / (1 + fabs(x));
        bad = e > tol;
        if (e > worst) {
          worst = e;
          wat = i;
        }
      }
    }
    if (bad) {
      if (first < 0) first = i;
      nbad++;
    }
  }
  if (!nbad) return 1;
  char c[64], gv[64], iv[96] = "";
  parity_fmt_elem(c, sizeof c, a, first);
  parity_fmt_elem(gv, sizeof gv, b, first);
  if (in0 && loom_tensor_numel(in0) == n) {
    char t[64];
    parity_fmt_elem(t, sizeof t, in0, first);
    snprintf(iv, sizeof iv, " (input0 %s)", t);
  }
  printf("FAIL %s%s%s: %lld of %lld elements differ, first at flat %lld: cpu %s gpu %s%s", name, name[0] ? " " : "", what, (long long)nbad,
         (long long)n, (long long)first, c, gv, iv);
  if (tol > 0 && wat >= 0) {
    parity_fmt_elem(c, sizeof c, a, wat);
    parity_fmt_elem(gv, sizeof gv, b, wat);
    printf("; worst finite rel err %.3g at %lld (cpu %s gpu %s), tol %.3g", worst, (long long)wat, c, gv, tol);
  } else if (tol == 0) {
    printf(" (bit-exact)");
  }
  printf("\n");
  g_fail++;
  return 0;
}

/* parity_cmp without a case name or input. */
static inline int compare(const char *what, const loom_tensor *a, const loom_tensor *b, double tol) {
  return parity_cmp("", what, a, b, tol, NULL);
}

/* ---- op cases ---- */
#define MAXIN 3
typedef loom_output (*build_fn)(loom_graph *g, const loom_output *in);
typedef struct {
  const char *name;
  int nin;
  loom_dtype dt[MAXIN];
  int nd[MAXIN];
  int64_t dims[MAXIN][4];
  int64_t int_hi[MAXIN]; /* integer inputs: values in [0, int_hi) */
  build_fn build;
  double tol;
  int grad;              /* compare gradients too */
} pcase;

static inline loom_session *session(loom_graph *g, loom_device_type dev) {
  loom_session_options o = loom_session_options_default();
  o.device = dev;
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, &o, st);
  if (!s) printf("session on device %d: %s\n", (int)dev, loom_status_message(st));
  loom_status_free(st);
  return s;
}

static inline int run(loom_session *s, const char *what, const loom_output *feeds, loom_tensor *const *fv, int nf,
               const loom_output *fetches, loom_tensor **out, int nx, loom_node *const *targets, int nt) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_session_run(s, feeds, fv, nf, fetches, out, nx, targets, nt, st);
  if (rc) {
    printf("FAIL %s: %s\n", what, loom_status_message(st));
    g_fail++;
  }
  loom_status_free(st);
  return rc == LOOM_OK;
}

/* Appends to fetch[*nx] the gradients of sum_k sum(y[k] * w_k) (w_k fixed
 * random scalars; integer outputs take no part) with respect to every float
 * input among in[0 .. nin). */
static inline void parity_grads(loom_graph *g, const loom_output *y, int ny, const loom_output *in, const loom_dtype *dt,
                                int nin, loom_output *fetch, int *nx, const char *name) {
  loom_output loss = {0};
  for (int k = 0, first = 1; k < ny; k++) {
    loom_dtype ydt = loom_output_dtype(y[k]);
    if (ydt != LOOM_F32 && ydt != LOOM_F64) continue;
    loom_tensor *w = rand_tensor(ydt, 0, NULL, 0);
    loom_output t = loom_reduce_sum(g, loom_mul(g, y[k], loom_const(g, w, NULL), NULL), -1, NULL, 0, NULL);
    loom_tensor_free(w);
    loss = first ? t : loom_add(g, loss, t, NULL);
    first = 0;
  }
  if (!loss.node) return;
  loom_output xs[8], gr[8];
  int nxs = 0;
  for (int k = 0; k < nin && nxs < 8; k++)
    if (dt[k] == LOOM_F32 || dt[k] == LOOM_F64) xs[nxs++] = in[k];
  loom_status *st = loom_status_new();
  if (loom_gradients(g, 1, &loss, NULL, nxs, xs, gr, st)) {
    printf("FAIL %s: gradients: %s\n", name, loom_status_message(st));
    g_fail++;
  }
  loom_status_free(st);
  for (int k = 0; k < nxs; k++)
    if (gr[k].node) fetch[(*nx)++] = gr[k];
}

/* Runs graph g on a CPU and a CUDA session (feeds fv[k] to in[k]), fetches
 * fetch[0..nx) on both and compares them: the first ny are outputs
 * (tolerance tol_out), the rest gradients (tol_grad). Frees fv, the
 * sessions and g. */
static inline void parity_run_compare(loom_graph *g, const char *name, const loom_output *in, loom_tensor **fv, int nin,
                                      const loom_output *fetch, int nx, int ny, double tol_out, double tol_grad) {
  loom_session *sc = session(g, LOOM_DEVICE_CPU), *sg = session(g, LOOM_DEVICE_CUDA);
  loom_tensor **oc = calloc((size_t)nx + 1, sizeof *oc), **og = calloc((size_t)nx + 1, sizeof *og);
  if (oc && og && sc && sg && run(sc, name, in, fv, nin, fetch, oc, nx, NULL, 0) &&
      run(sg, name, in, fv, nin, fetch, og, nx, NULL, 0)) {
    for (int k = 0; k < nx; k++) {
      char what[160];
      snprintf(what, sizeof what, "%s %s %d", name, k < ny ? "output" : "gradient", k < ny ? k : k - ny);
      compare(what, oc[k], og[k], k < ny ? tol_out : tol_grad);
    }
  }
  for (int k = 0; oc && og && k < nx; k++) {
    loom_tensor_free(oc[k]);
    loom_tensor_free(og[k]);
  }
  free(oc);
  free(og);
  for (int k = 0; k < nin; k++) loom_tensor_free(fv[k]);
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(g);
}

static inline void run_case(const pcase *c) {
  loom_graph *g = loom_graph_new();
  loom_output in[MAXIN];
  loom_tensor *fv[MAXIN];
  for (int k = 0; k < c->nin; k++) {
    in[k] = loom_placeholder(g, c->dt[k], c->nd[k], c->dims[k], NULL);
    fv[k] = rand_tensor(c->dt[k], c->nd[k], c->dims[k], c->int_hi[k]);
  }
  loom_output fetch[1 + MAXIN];
  int nx = 1;
  fetch[0] = c->build(g, in);
  if (c->grad) parity_grads(g, fetch, 1, in, c->dt, c->nin, fetch, &nx, c->name);
  /* tol 0: the output bit-exact, gradients within 1e-6 */
  parity_run_compare(g, c->name, in, fv, c->nin, fetch, nx, 1, c->tol, c->tol > 0 ? 10 * c->tol : 1e-6);
}

/* A dense layer x @ w + b (relu optional) with variables <name>/w (normal(0, 0.1), seed 42) and <name>/b (zeros). */
static inline loom_output parity_dense(loom_graph *g, loom_output x, int64_t in, int64_t out, int relu, const char *name) {
  char n1[64], n2[64];
  snprintf(n1, sizeof n1, "%s/w", name);
  snprintf(n2, sizeof n2, "%s/b", name);
  int64_t wd[2] = {in, out}, bd[1] = {out};
  loom_initializer wi = loom_init_random_normal(0, 0.1, 42), bi = loom_init_zeros();
  loom_variable *w = loom_get_variable(g, n1, LOOM_F32, 2, wd, &wi, 1);
  loom_variable *b = loom_get_variable(g, n2, LOOM_F32, 1, bd, &bi, 1);
  loom_output y = loom_bias_add(g, loom_matmul(g, x, loom_variable_output(w), 0, 0, NULL), loom_variable_output(b), NULL);
  return relu ? loom_relu(g, y, NULL) : y;
}

/* 1 when a CUDA session can be created; else prints the skip line. */
static inline int parity_gpu_present(const char *prog) {
  parity_coverage_install();
  loom_graph *g = loom_graph_new();
  loom_session_options o = loom_session_options_default();
  o.device = LOOM_DEVICE_CUDA;
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, &o, st);
  if (!s) printf("%s: no CUDA device, skipping (%s)\n", prog, loom_status_message(st));
  loom_session_free(s);
  loom_status_free(st);
  loom_graph_free(g);
  return s != NULL;
}

/* One check: counted; when !ok prints "FAIL " and the message. Returns ok. */
static inline int parity_check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int parity_check(int ok, const char *fmt, ...) {
  g_checked++;
  if (ok) return 1;
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  g_fail++;
  return 0;
}

/* Summary line and exit code. */
static inline int parity_report(const char *prog) {
  printf("%s: %d comparisons, %d failures\n", prog, g_checked, g_fail);
  parity_coverage_write(prog);
  return g_fail ? 1 : 0;
}

#endif
