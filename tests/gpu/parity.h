/* tests/gpu/parity.h - the GPU vs CPU parity harness shared by the
 * tests/gpu/test_parity*.c programs (header-only; one program per file).
 *
 * A case builds a graph on placeholders of given dtypes and shapes; run_case
 * runs it in a CPU session and in a CUDA session on the same random feeds and
 * compares every output (and, with grad set, the gradients of sum(y * w) for
 * a fixed random w with respect to every float input) within the case's
 * tolerance: relative error |cpu - gpu| / (1 + |cpu|), NaN matching NaN.
 * A program starts with parity_gpu_present (false: no device, print a skip
 * line and exit 0) and ends with parity_report. */
#ifndef LOOM_TESTS_GPU_PARITY_H
#define LOOM_TESTS_GPU_PARITY_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"

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

static inline void compare(const char *what, const loom_tensor *a, const loom_tensor *b, double tol) {
  g_checked++;
  int64_t n = loom_tensor_numel(a);
  if (loom_tensor_dtype(a) != loom_tensor_dtype(b) || n != loom_tensor_numel(b)) {
    printf("FAIL %s: dtype/size differ\n", what);
    g_fail++;
    return;
  }
  double worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < n; i++) {
    double x = elem(a, i), y = elem(b, i);
    if ((isnan(x) && isnan(y)) || x == y) continue; /* x == y: equal infinities too */
    double e = fabs(x - y) / (1 + fabs(x));
    if (!(e <= worst)) {
      worst = e;
      at = i;
    }
  }
  if (!(worst <= tol)) {
    printf("FAIL %s: max rel err %.3g at %lld (cpu %.9g gpu %.9g), tol %.3g\n", what, worst, (long long)at,
           elem(a, at), elem(b, at), tol);
    g_fail++;
  }
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

static inline void run_case(const pcase *c) {
  loom_graph *g = loom_graph_new();
  loom_output in[MAXIN];
  loom_tensor *fv[MAXIN];
  for (int k = 0; k < c->nin; k++) {
    in[k] = loom_placeholder(g, c->dt[k], c->nd[k], c->dims[k], NULL);
    fv[k] = rand_tensor(c->dt[k], c->nd[k], c->dims[k], c->int_hi[k]);
  }
  loom_output y = c->build(g, in);
  loom_output fetch[1 + MAXIN];
  int nx = 1;
  fetch[0] = y;
  if (c->grad) parity_grads(g, &y, 1, in, c->dt, c->nin, fetch, &nx, c->name);
  loom_session *sc = session(g, LOOM_DEVICE_CPU), *sg = session(g, LOOM_DEVICE_CUDA);
  loom_tensor *oc[1 + MAXIN] = {0}, *og[1 + MAXIN] = {0};
  if (sc && sg && run(sc, c->name, in, fv, c->nin, fetch, oc, nx, NULL, 0) &&
      run(sg, c->name, in, fv, c->nin, fetch, og, nx, NULL, 0)) {
    for (int k = 0; k < nx; k++) {
      char what[160];
      snprintf(what, sizeof what, "%s %s", c->name, k ? "gradient" : "output");
      compare(what, oc[k], og[k], c->tol > 0 ? c->tol * (k ? 10 : 1) : (k ? 1e-6 : 0));
    }
  }
  for (int k = 0; k < nx; k++) {
    loom_tensor_free(oc[k]);
    loom_tensor_free(og[k]);
  }
  for (int k = 0; k < c->nin; k++) loom_tensor_free(fv[k]);
  loom_session_free(sc);
  loom_session_free(sg);
  loom_graph_free(g);
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

/* Summary line and exit code. */
static inline int parity_report(const char *prog) {
  printf("%s: %d comparisons, %d failures\n", prog, g_checked, g_fail);
  return g_fail ? 1 : 0;
}

#endif
