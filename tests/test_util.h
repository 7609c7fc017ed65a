/* Shared helpers for Criterion tests. */
#ifndef LOOM_TEST_UTIL_H
#define LOOM_TEST_UTIL_H
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom/loom.h"

/* Runs one fetch with feeds; asserts OK; returns the fetched tensor (caller frees). */
static inline loom_tensor *tu_run1(loom_graph *g, int nfeeds, const loom_output *feeds, loom_tensor *const *vals,
                                   loom_output fetch) {
  loom_status *st = loom_status_new();
  cr_assert(loom_graph_status(g, st) == LOOM_OK, "graph error: %s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "session: %s", loom_status_message(st));
  loom_tensor *out = NULL;
  loom_code rc = loom_session_run(s, feeds, vals, nfeeds, &fetch, &out, 1, NULL, 0, st);
  cr_assert(rc == LOOM_OK, "run failed: %s", loom_status_message(st));
  loom_session_free(s);
  loom_status_free(st);
  return out;
}

/* Runs one fetch and returns the code; the message is copied into msg. */
static inline loom_code tu_run_err(loom_graph *g, int nfeeds, const loom_output *feeds, loom_tensor *const *vals,
                                   loom_output fetch, char *msg, size_t cap) {
  loom_status *st = loom_status_new();
  loom_code rc = loom_graph_status(g, st);
  if (!rc) {
    loom_session *s = loom_session_new(g, NULL, st);
    loom_tensor *out = NULL;
    rc = loom_session_run(s, feeds, vals, nfeeds, &fetch, &out, 1, NULL, 0, st);
    loom_tensor_free(out);
    loom_session_free(s);
  }
  if (msg) snprintf(msg, cap, "%s", loom_status_message(st));
  loom_status_free(st);
  return rc;
}

static inline loom_tensor *tu_f32(int ndim, const int64_t *dims, const float *data) {
  return loom_tensor_from_data(LOOM_F32, ndim, dims, data, NULL);
}

/* Asserts t is f32 with the given shape and values within tol (abs + rel). */
static inline void tu_expect_f32(const loom_tensor *t, int ndim, const int64_t *dims, const float *want, double tol) {
  cr_assert(t, "no tensor");
  cr_assert_eq(loom_tensor_dtype(t), LOOM_F32, "dtype %s", loom_dtype_name(loom_tensor_dtype(t)));
  cr_assert_eq(loom_tensor_ndim(t), ndim, "rank %d, want %d", loom_tensor_ndim(t), ndim);
  for (int i = 0; i < ndim; i++)
    cr_assert_eq(loom_tensor_dim(t, i), dims[i], "dim %d: %lld want %lld", i, (long long)loom_tensor_dim(t, i),
                 (long long)dims[i]);
  const float *d = loom_tensor_data_const(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) {
    double err = fabs((double)d[i] - (double)want[i]);
    cr_assert(err <= tol * (1.0 + fabs((double)want[i])) || (isnan(d[i]) && isnan(want[i])),
              "element %lld: got %.9g want %.9g", (long long)i, (double)d[i], (double)want[i]);
  }
}

#endif
