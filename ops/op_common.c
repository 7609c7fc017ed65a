#include <stdarg.h>
#include "ops/op_common.h"

loom_code loom__shape_fail(loom_shape_ctx *c, loom_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->msg, sizeof c->msg, fmt, ap);
  va_end(ap);
  return code;
}

const char *loom__tdesc_str(const loom_tdesc *d) {
  static __thread char bufs[4][96];
  static __thread int k;
  char *b = bufs[k++ & 3];
  return loom__dims_str(b, 96, d->ndim, d->dims);
}

int64_t loom__norm_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return (axis < 0 || axis >= (rank ? rank : 1)) ? -1 : axis;
}

loom_code loom__shape_same(loom_shape_ctx *c) {
  c->out[0] = c->in[0];
  return LOOM_OK;
}

loom_code loom__shape_check_dtype(loom_shape_ctx *c, int i, uint32_t mask) {
  if (!(mask & LOOM_DT(c->in[i].dtype)))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "input %d has unsupported dtype %s", i,
                            loom_dtype_name(c->in[i].dtype));
  return LOOM_OK;
}

loom_code loom__shape_broadcast(loom_shape_ctx *c) {
  const loom_tdesc *a = &c->in[0], *b = &c->in[1];
  if (a->dtype != b->dtype)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "dtypes %s and %s do not match", loom_dtype_name(a->dtype),
                            loom_dtype_name(b->dtype));
  int n;
  if (!loom__broadcast_shape(a->ndim, a->dims, b->ndim, b->dims, &n, c->out[0].dims))
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "shapes %s and %s are not broadcastable", loom__tdesc_str(a),
                            loom__tdesc_str(b));
  c->out[0].ndim = n;
  c->out[0].dtype = a->dtype;
  return LOOM_OK;
}

loom_output loom__buildn(loom_graph *g, int op, const char *name, int nin, const loom_output *in,
                         const loom_attrs *attrs) {
  if (!g) return (loom_output){NULL, 0};
  return loom__out0(g, loom__graph_add(g, op, name, NULL, nin, in, attrs, -1));
}
loom_output loom__build1(loom_graph *g, int op, const char *name, loom_output a, const loom_attrs *attrs) {
  return loom__buildn(g, op, name, 1, &a, attrs);
}
loom_output loom__build2(loom_graph *g, int op, const char *name, loom_output a, loom_output b,
                         const loom_attrs *attrs) {
  loom_output in[2] = {a, b};
  return loom__buildn(g, op, name, 2, in, attrs);
}

int loom__dims_too_large_at(int n, const int64_t *d) {
  int64_t p = 1;
  for (int i = 0; i < n; i++)
    if (d[i] > 0 && (__builtin_mul_overflow(p, d[i], &p) || p > LOOM_MAX_NUMEL)) return i;
  return -1;
}

loom_code loom__shape_check_attr_size(loom_shape_ctx *c, const char *what, int n, const int64_t *d) {
  int i = loom__dims_too_large_at(n, d);
  if (i < 0) return LOOM_OK;
  char buf[128];
  return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s[%d] = %lld is too large: %s %s would have more than %lld elements",
                          what, i, (long long)d[i], what, loom__dims_str(buf, sizeof buf, n, d),
                          (long long)LOOM_MAX_NUMEL);
}
