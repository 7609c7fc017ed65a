/* CPU kernels: elementwise math with NumPy broadcasting. */
#include <string.h>
#include "kernels/cpu/math.h"

typedef struct {
  const float *a, *b;
  float *c;
} add_args;

static void add_same(void *p, int64_t b, int64_t e) {
  add_args *x = p;
  const float *restrict a = x->a, *restrict bb = x->b;
  float *restrict c = x->c;
  for (int64_t i = b; i < e; i++) c[i] = a[i] + bb[i];
}

/* Broadcasting: iterate the output, computing input offsets from strides
 * (stride 0 on broadcast dims); the innermost dim runs as a tight loop. */
static void add_bcast(const loom_buf *A, const loom_buf *B, loom_buf *C) {
  int n = C->ndim;
  int64_t sa[LOOM_MAX_DIMS], sb[LOOM_MAX_DIMS], idx[LOOM_MAX_DIMS];
  int64_t st_a = 1, st_b = 1;
  for (int i = n - 1; i >= 0; i--) {
    int ia = i - (n - A->ndim), ib = i - (n - B->ndim);
    int64_t da = ia >= 0 ? A->dims[ia] : 1, db = ib >= 0 ? B->dims[ib] : 1;
    sa[i] = da == 1 ? 0 : st_a;
    sb[i] = db == 1 ? 0 : st_b;
    st_a *= da;
    st_b *= db;
    idx[i] = 0;
  }
  const float *a = A->data, *b = B->data;
  float *c = C->data;
  if (C->numel == 0) return;
  int64_t inner = n ? C->dims[n - 1] : 1;
  int64_t ia0 = n ? sa[n - 1] : 0, ib0 = n ? sb[n - 1] : 0;
  int64_t outer = C->numel / (inner ? inner : 1);
  int64_t oa = 0, ob = 0;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < inner; j++) c[j] = a[oa + j * ia0] + b[ob + j * ib0];
    c += inner;
    for (int d = n - 2; d >= 0; d--) {
      idx[d]++;
      oa += sa[d];
      ob += sb[d];
      if (idx[d] < C->dims[d]) break;
      oa -= sa[d] * C->dims[d];
      ob -= sb[d] * C->dims[d];
      idx[d] = 0;
    }
  }
}

loom_code loom__k_add_f32(const loom_kctx *ctx) {
  const loom_buf *A = ctx->in[0], *B = ctx->in[1];
  loom_buf *C = ctx->out[0];
  if (A->numel == C->numel && B->numel == C->numel) {
    add_args x = {A->data, B->data, C->data};
    loom__parallel_for(ctx->pool, C->numel, LOOM_PAR_GRAIN, add_same, &x);
  } else {
    add_bcast(A, B, C);
  }
  return LOOM_OK;
}
