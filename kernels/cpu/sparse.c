/* CPU kernels of the sparse family: ragged rows (values + int64 row_splits,
 * loom_sparse.h).
 *
 * SparseEmbedding follows TF 2.15's safe_embedding_lookup_sparse +
 * embedding_lookup_sparse operation by operation, in float32: an entry is
 * pruned when its id is < 0 or, with weights and the mean or sqrtn
 * combiner, when its weight is not > 0 (TF prunes weights only for those
 * two: with "sum" a weight <= 0 entry stays, adding w * e); each
 * kept row e = params[id] is clipped like embedding_lookup's max_norm
 * (clip_by_norm: e * c / max(||e||, c)); then, per output row, in entry
 * order: sum of e * w (sum of e without weights), divided by sum(w)
 * (count without weights) for "mean" or by sqrt(sum(w * w)) (sqrt(count))
 * for "sqrtn"; a row without kept entries is zeros.
 *
 * The gradient kernel writes one (index, row) pair per entry, so its
 * output shape is static ([nnz], [nnz, D]); a pruned entry gets the index
 * LOOM_NO_ROW_I32/I64 (kernels/kernel.h: the smallest value of the ids'
 * dtype) and a zero row: the sparse optimizer kernels skip it and
 * autodiff's densification clamps it to a row that the zero row leaves
 * unchanged.
 *
 * Rows are independent: the embedding kernels split them over the pool and
 * write straight into their outputs (no scratch), with inner loops over the
 * D contiguous columns that the compiler vectorises. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif
#include <math.h>
#include <string.h>
#include "kernels/cpu/sparse.h"

static inline int64_t rd_id(const void *p, int i64, int64_t i) {
  return i64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

loom_code loom__check_row_splits(const loom_buf *s, int64_t nnz, loom_status *st) {
  if (s->dtype != LOOM_I64)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "row_splits must be int64, got %s", loom_dtype_name(s->dtype));
  if (s->ndim != 1 || s->numel < 1)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "row_splits must be a vector of at least 1 element");
  const int64_t *p = s->data;
  if (p[0] != 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "row_splits[0] = %lld, expected 0", (long long)p[0]);
  for (int64_t i = 1; i < s->numel; i++)
    if (p[i] < p[i - 1])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "row_splits must be non-decreasing, but row_splits[%lld] = %lld < row_splits[%lld] = %lld",
                             (long long)i, (long long)p[i], (long long)(i - 1), (long long)p[i - 1]);
  if (p[s->numel - 1] != nnz)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "row_splits[%lld] = %lld (the last) must equal the number of values, %lld",
                           (long long)(s->numel - 1), (long long)p[s->numel - 1], (long long)nnz);
  return LOOM_OK;
}

/* =====================================================================
 * DenseToRagged
 * ===================================================================== */
static inline int can_drop(loom_dtype d) { return d == LOOM_STRING || d == LOOM_I32 || d == LOOM_I64; }

int64_t loom__dense_to_ragged_count(const loom_buf *x, int drop_ignore, int64_t ignore_int) {
  if (!drop_ignore || !can_drop(x->dtype)) return x->numel;
  int64_t n = 0;
  switch (x->dtype) {
  case LOOM_STRING: {
    const loom_tstring *p = x->data;
    for (int64_t i = 0; i < x->numel; i++) n += p[i].len != 0;
    break;
  }
  case LOOM_I32: {
    const int32_t *p = x->data;
    for (int64_t i = 0; i < x->numel; i++) n += (int64_t)p[i] != ignore_int;
    break;
  }
  default: {
    const int64_t *p = x->data;
    for (int64_t i = 0; i < x->numel; i++) n += p[i] != ignore_int;
    break;
  }
  }
  return n;
}

/* Rows of x without the dropped elements: one pass per dtype (the values
 * are copied as they are: a string value keeps pointing at x's bytes,
 * which live as long as the run that uses them). */
#define D2R_ROWS(T, KEEP)                                     \
  do {                                                        \
    const T *src = x->data;                                   \
    T *dst = v->data;                                         \
    for (int64_t r = 0; r < B; r++) {                         \
      for (int64_t j = r * per; j < (r + 1) * per; j++) {     \
        if (!(KEEP)) continue;                                \
        if (k >= cap) goto overflow;                          \
        dst[k++] = src[j];                                    \
      }                                                       \
      s[r + 1] = k;                                           \
    }                                                         \
  } while (0)

loom_code loom__k_dense_to_ragged(const loom_kctx *ctx) {
  const loom_buf *x = ctx->in[0];
  loom_buf *v = ctx->out[0], *sp = ctx->out[1];
  int drop = ctx->attrs->keepdims != 0 && can_drop(x->dtype);
  int64_t ign = ctx->attrs->num;
  if (x->ndim < 1) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "x must have rank >= 1");
  int64_t B = x->dims[0], per = B > 0 ? x->numel / B : 0;
  if (sp->numel != B + 1 || v->dtype != x->dtype) return loom_status_set(ctx->st, LOOM_INTERNAL, "outputs do not match x");
  int64_t *s = sp->data;
  int64_t k = 0, cap = v->numel;
  s[0] = 0;
  if (!drop || cap == x->numel) {
    /* nothing dropped (or nothing to drop: as many values as elements): the
     * values are x's, rows of per */
    if (cap != x->numel) goto overflow;
    size_t es = x->dtype == LOOM_STRING ? sizeof(loom_tstring) : loom_dtype_size(x->dtype);
    if (cap) memcpy(v->data, x->data, (size_t)cap * es);
    for (int64_t r = 0; r < B; r++) s[r + 1] = (r + 1) * per;
    return LOOM_OK;
  }
  switch (x->dtype) {
  case LOOM_STRING: D2R_ROWS(loom_tstring, src[j].len != 0); break;
  case LOOM_I32: D2R_ROWS(int32_t, (int64_t)src[j] != ign); break;
  default: D2R_ROWS(int64_t, src[j] != ign); break;
  }
  if (k == cap) return LOOM_OK;
overflow:
  return loom_status_set(ctx->st, LOOM_INTERNAL, "outputs do not match x");
}
#undef D2R_ROWS

/* =====================================================================
 * SparseEmbedding and its gradient
 * ===================================================================== */
typedef struct emb_args {
  const float *P;
  int64_t V, D;
  const void *ids;
  int ids64;
  const int64_t *splits;
  const float *w; /* NULL: all 1 */
  int comb;
  float c; /* max_norm, 0 = none */
  float *out;
  const float *dy;
  void *gidx; /* the ids' dtype */
  float *grows;
} emb_args;

/* Shared input checks: row_splits, weights' size, kept ids in [0, V). */
static loom_code emb_setup(const loom_kctx *ctx, int base, emb_args *a) {
  const loom_buf *P = ctx->in[base], *I = ctx->in[base + 1], *S = ctx->in[base + 2];
  const loom_buf *W = ctx->nin > base + 3 ? ctx->in[base + 3] : NULL;
  memset(a, 0, sizeof *a);
  if (P->ndim != 2) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "params must have rank 2");
  a->P = P->data;
  a->V = P->dims[0];
  a->D = P->dims[1];
  if (I->dtype != LOOM_I32 && I->dtype != LOOM_I64)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "ids must be int32 or int64, got %s",
                           loom_dtype_name(I->dtype));
  a->ids = I->data;
  a->ids64 = I->dtype == LOOM_I64;
  int64_t nnz = I->numel;
  loom_code rc = loom__check_row_splits(S, nnz, ctx->st);
  if (rc) return rc;
  a->splits = S->data;
  a->comb = (int)ctx->attrs->num;
  a->c = ctx->attrs->alpha > 0 ? (float)ctx->attrs->alpha : 0.0f;
  if (W) {
    if (W->dtype != LOOM_F32 || W->numel != nnz)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "weights must be float32 with one value per id (%lld), got %s [%lld]",
                             (long long)nnz, loom_dtype_name(W->dtype), (long long)W->numel);
    a->w = W->data;
  }
  for (int64_t i = 0; i < nnz; i++) {
    int64_t id = rd_id(a->ids, a->ids64, i);
    if (id < 0 || (a->w && a->comb != LOOM__COMB_SUM && !(a->w[i] > 0.0f))) continue; /* pruned */
    if (id >= a->V)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "ids[%lld] = %lld is not in [0, %lld) (params has %lld rows)",
                             (long long)i, (long long)id, (long long)a->V, (long long)a->V);
  }
  return LOOM_OK;
}

/* a . b with 8 partial sums (one vector register, no serial chain of D
 * dependent adds), then the tail. */
static inline float dot8(const float *a, const float *b, int64_t D) {
  float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= D; k += 8)
    for (int j = 0; j < 8; j++) p[j] += a[k + j] * b[k + j];
  float s = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
  for (; k < D; k++) s += a[k] * b[k];
  return s;
}
static inline float l2norm(const float *e, int64_t D) { return sqrtf(dot8(e, e, D)); }

/* The divisor of a row's combiner (1 for sum). */
static inline float comb_div(int comb, int weighted, float wsum, float w2sum, int64_t cnt) {
  if (comb == LOOM__COMB_MEAN) return weighted ? wsum : (float)cnt;
  if (comb == LOOM__COMB_SQRTN) return weighted ? sqrtf(w2sum) : sqrtf((float)cnt);
  return 1.0f;
}

/* Prefetches the params row of entry i (when it is one): the table is
 * usually far larger than the caches and the rows are random. */
enum { EMB_PREFETCH = 32 }; /* a short row (a linear model's weights: logits-wide) takes a few ns: far enough ahead for a cache miss */ /* a short row (a linear model's weights: logits-wide) takes a few ns: far enough ahead for a cache miss */
static inline void prefetch_row(const emb_args *a, int64_t i, int64_t end) {
  if (i >= end) return;
  int64_t id = rd_id(a->ids, a->ids64, i);
  if (id < 0 || id >= a->V) return;
  const float *e = a->P + id * a->D;
  for (int64_t k = 0; k < a->D; k += 16) __builtin_prefetch(e + k);
}

static inline int kept(const emb_args *a, int64_t i, int64_t *id, float *w) {
  *id = rd_id(a->ids, a->ids64, i);
  if (*id < 0) return 0;
  *w = a->w ? a->w[i] : 1.0f;
  return !a->w || a->comb == LOOM__COMB_SUM || *w > 0.0f;
}

/* No weights, no max_norm (the usual embedding column): sum of the rows,
 * then the combiner's division. */
static void emb_fwd_rows_plain(const emb_args *a, int64_t lo, int64_t hi) {
  const int64_t D = a->D;
  const int64_t end = a->splits[hi];
  for (int64_t i = a->splits[lo]; i < a->splits[lo] + EMB_PREFETCH; i++) prefetch_row(a, i, end);
  for (int64_t r = lo; r < hi; r++) {
    float *restrict o = a->out + r * D;
    int64_t cnt = 0;
    for (int64_t i = a->splits[r]; i < a->splits[r + 1]; i++) {
      prefetch_row(a, i + EMB_PREFETCH, end);
      int64_t id = rd_id(a->ids, a->ids64, i);
      if (id < 0) continue;
      const float *restrict e = a->P + id * D;
      /* the first row as 0 + e (the zeroed sum's first addition, -0 becomes
       * +0 as before) without zeroing o first: a short row's loads right after
       * memset's overlapping stores stalled on store forwarding */
      if (cnt++ == 0)
        for (int64_t k = 0; k < D; k++) o[k] = 0.0f + e[k];
      else
        for (int64_t k = 0; k < D; k++) o[k] += e[k];
    }
    if (cnt == 0)
      for (int64_t k = 0; k < D; k++) o[k] = 0.0f;
    if (cnt <= 1 || a->comb == LOOM__COMB_SUM) continue; /* x / 1 is x */
    float div = comb_div(a->comb, 0, 0.0f, 0.0f, cnt);
    for (int64_t k = 0; k < D; k++) o[k] /= div;
  }
}

static void emb_fwd_rows(void *arg, int64_t lo, int64_t hi) {
  const emb_args *a = arg;
  const int64_t D = a->D;
  const float c = a->c;
  if (!a->w && !(c > 0.0f)) {
    emb_fwd_rows_plain(a, lo, hi);
    return;
  }
  for (int64_t r = lo; r < hi; r++) {
    float *restrict o = a->out + r * D;
    for (int64_t k = 0; k < D; k++) o[k] = 0.0f;
    float wsum = 0.0f, w2sum = 0.0f;
    int64_t cnt = 0;
    const int64_t end = a->splits[hi];
    if (r == lo)
      for (int64_t i = a->splits[r]; i < a->splits[r] + EMB_PREFETCH; i++) prefetch_row(a, i, end);
    for (int64_t i = a->splits[r]; i < a->splits[r + 1]; i++) {
      prefetch_row(a, i + EMB_PREFETCH, end);
      int64_t id;
      float w;
      if (!kept(a, i, &id, &w)) continue;
      cnt++;
      wsum += w;
      w2sum += w * w;
      const float *restrict e = a->P + id * D;
      if (c > 0.0f) {
        /* TF: (e * c) / max(n, c) * w; one scale per row here */
        float n = l2norm(e, D), sw = (c / (n > c ? n : c)) * w;
        for (int64_t k = 0; k < D; k++) o[k] += e[k] * sw;
      } else if (a->w) {
        for (int64_t k = 0; k < D; k++) o[k] += e[k] * w;
      } else {
        for (int64_t k = 0; k < D; k++) o[k] += e[k];
      }
    }
    if (cnt == 0 || a->comb == LOOM__COMB_SUM) continue;
    float div = comb_div(a->comb, a->w != NULL, wsum, w2sum, cnt);
    for (int64_t k = 0; k < D; k++) o[k] /= div;
  }
}

static int64_t row_grain(int64_t B, int64_t nnz, int64_t D) {
  int64_t per = (B > 0 ? nnz / B : 0) + 1;
  int64_t cost = per * (D > 0 ? D : 1);
  int64_t g = LOOM_PAR_GRAIN / (cost > 0 ? cost : 1);
  return g > 1 ? g : 1;
}

loom_code loom__k_sparse_embedding_f32(const loom_kctx *ctx) {
  emb_args a;
  loom_code rc = emb_setup(ctx, 0, &a);
  if (rc) return rc;
  loom_buf *O = ctx->out[0];
  int64_t B = ctx->in[2]->numel - 1;
  if (O->ndim != 2 || O->dims[0] != B || O->dims[1] != a.D)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "row_splits give %lld rows, the output has %lld",
                           (long long)B, (long long)(O->ndim ? O->dims[0] : 0));
  a.out = O->data;
  if (B > 0) loom__parallel_for(ctx->pool, B, row_grain(B, ctx->in[1]->numel, a.D), emb_fwd_rows, &a);
  return LOOM_OK;
}

static inline void set_idx(const emb_args *a, int64_t i, int64_t v) {
  if (a->ids64) ((int64_t *)a->gidx)[i] = v;
  else ((int32_t *)a->gidx)[i] = (int32_t)v;
}

static void emb_grad_rows(void *arg, int64_t lo, int64_t hi) {
  const emb_args *a = arg;
  const int64_t D = a->D;
  const float c = a->c;
  for (int64_t r = lo; r < hi; r++) {
    const float *restrict g = a->dy + r * D;
    float wsum = 0.0f, w2sum = 0.0f;
    int64_t cnt = 0;
    for (int64_t i = a->splits[r]; i < a->splits[r + 1]; i++) {
      int64_t id;
      float w;
      if (!kept(a, i, &id, &w)) continue;
      cnt++;
      wsum += w;
      w2sum += w * w;
    }
    float div = comb_div(a->comb, a->w != NULL, wsum, w2sum, cnt);
    const int64_t end = a->splits[hi];
    if (c > 0.0f && r == lo)
      for (int64_t i = a->splits[r]; i < a->splits[r] + EMB_PREFETCH; i++) prefetch_row(a, i, end);
    for (int64_t i = a->splits[r]; i < a->splits[r + 1]; i++) {
      if (c > 0.0f) prefetch_row(a, i + EMB_PREFETCH, end); /* only max_norm reads params here */
      float *restrict gr = a->grows + i * D;
      int64_t id;
      float w;
      if (!kept(a, i, &id, &w)) {
        set_idx(a, i, a->ids64 ? LOOM_NO_ROW_I64 : LOOM_NO_ROW_I32);
        for (int64_t k = 0; k < D; k++) gr[k] = 0.0f;
        continue;
      }
      set_idx(a, i, id);
      float f = w / div;
      for (int64_t k = 0; k < D; k++) gr[k] = g[k] * f;
      if (c > 0.0f) {
        /* d(e c / max(n, c)): for n >= c (TF's Maximum sends the gradient
         * to its first argument on ties), c/n (g - e (e.g) / n^2); else g */
        const float *restrict e = a->P + id * D;
        float n = l2norm(e, D);
        if (n >= c) {
          float dot = dot8(e, gr, D);
          float s1 = c / n, s2 = c * dot / (n * n * n);
          for (int64_t k = 0; k < D; k++) gr[k] = s1 * gr[k] - s2 * e[k];
        }
      }
    }
  }
}

loom_code loom__k_sparse_embedding_grad_f32(const loom_kctx *ctx) {
  emb_args a;
  loom_code rc = emb_setup(ctx, 1, &a);
  if (rc) return rc;
  const loom_buf *dy = ctx->in[0];
  int64_t B = ctx->in[3]->numel - 1, nnz = ctx->in[2]->numel;
  if (dy->numel != B * a.D)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "dy has %lld elements, expected %lld rows of %lld",
                           (long long)dy->numel, (long long)B, (long long)a.D);
  if (ctx->out[0]->numel != nnz || ctx->out[1]->numel != nnz * a.D)
    return loom_status_set(ctx->st, LOOM_INTERNAL, "gradient outputs do not match %lld ids", (long long)nnz);
  a.dy = dy->data;
  a.gidx = ctx->out[0]->data;
  a.grows = ctx->out[1]->data;
  if (B > 0) loom__parallel_for(ctx->pool, B, row_grain(B, nnz, a.D), emb_grad_rows, &a);
  return LOOM_OK;
}

/* =====================================================================
 * RaggedMultiHot
 * ===================================================================== */
typedef struct mh_args {
  const void *ids;
  int ids64;
  const int64_t *splits;
  const float *w;
  int64_t depth;
  float *out;
} mh_args;

static void mh_rows(void *arg, int64_t lo, int64_t hi) {
  const mh_args *a = arg;
  memset(a->out + lo * a->depth, 0, (size_t)((hi - lo) * a->depth) * sizeof(float));
  for (int64_t r = lo; r < hi; r++) {
    float *o = a->out + r * a->depth;
    for (int64_t i = a->splits[r]; i < a->splits[r + 1]; i++) {
      int64_t id = rd_id(a->ids, a->ids64, i);
      if (id < 0 || id >= a->depth) continue;
      o[id] += a->w ? a->w[i] : 1.0f;
    }
  }
}

loom_code loom__k_ragged_multi_hot(const loom_kctx *ctx) {
  const loom_buf *I = ctx->in[0], *S = ctx->in[1], *W = ctx->nin > 2 ? ctx->in[2] : NULL;
  if (I->dtype != LOOM_I32 && I->dtype != LOOM_I64)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "ids must be int32 or int64, got %s",
                           loom_dtype_name(I->dtype));
  loom_code rc = loom__check_row_splits(S, I->numel, ctx->st);
  if (rc) return rc;
  if (W && (W->dtype != LOOM_F32 || W->numel != I->numel))
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "weights must be float32 with one value per id (%lld)",
                           (long long)I->numel);
  mh_args a = {I->data, I->dtype == LOOM_I64, S->data, W ? W->data : NULL, ctx->attrs->num, ctx->out[0]->data};
  int64_t B = S->numel - 1;
  if (ctx->out[0]->numel != B * a.depth)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "row_splits give %lld rows, the output has %lld elements",
                           (long long)B, (long long)ctx->out[0]->numel);
  if (B > 0 && a.depth > 0) loom__parallel_for(ctx->pool, B, row_grain(B, I->numel, a.depth), mh_rows, &a);
  return LOOM_OK;
}

/* =====================================================================
 * MultiHotConcat: the input layer's concatenation written in one pass
 * ===================================================================== */
loom_code loom__k_multi_hot_concat(const loom_kctx *ctx) {
  const loom_buf *L = ctx->in[0];
  loom_buf *O = ctx->out[0];
  const int64_t *lay = L->data;
  int np = (int)(L->numel / 2);
  if (O->ndim != 2) return loom_status_set(ctx->st, LOOM_INTERNAL, "output must have rank 2");
  const int64_t B = O->dims[0], W = O->dims[1];
  float *out = O->data;
  if (B * W > 0) memset(out, 0, (size_t)(B * W) * sizeof(float));
  int k = 1;
  int64_t off = 0;
  for (int p = 0; p < np; p++) {
    const int64_t kind = lay[2 * p], depth = lay[2 * p + 1];
    if (kind == 0) { /* dense float [B, w] */
      const loom_buf *X = ctx->in[k++];
      const int64_t w = X->ndim == 2 ? X->dims[1] : 0;
      if (X->dtype != LOOM_F32 || X->ndim != 2 || X->dims[0] != B || off + w > W)
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "piece %d: expected float32 [%lld, w], got %s", p,
                               (long long)B, loom_dtype_name(X->dtype));
      const float *x = X->data;
      float *o = out + off;
      /* common widths with a fixed-size move (no library call per row) */
      switch (w) {
      case 1: for (int64_t r = 0; r < B; r++) o[r * W] = x[r]; break;
      case 2: for (int64_t r = 0; r < B; r++) memcpy(o + r * W, x + r * 2, 2 * sizeof(float)); break;
      case 4: for (int64_t r = 0; r < B; r++) memcpy(o + r * W, x + r * 4, 4 * sizeof(float)); break;
      case 8: for (int64_t r = 0; r < B; r++) memcpy(o + r * W, x + r * 8, 8 * sizeof(float)); break;
      case 16: for (int64_t r = 0; r < B; r++) memcpy(o + r * W, x + r * 16, 16 * sizeof(float)); break;
      default: for (int64_t r = 0; r < B; r++) memcpy(o + r * W, x + r * w, (size_t)w * sizeof(float)); break;
      }
      off += w;
    } else if (kind == 1 || kind == 2) { /* ragged multi-hot */
      const loom_buf *I = ctx->in[k], *S = ctx->in[k + 1], *Wt = kind == 2 ? ctx->in[k + 2] : NULL;
      k += kind == 2 ? 3 : 2;
      if (I->dtype != LOOM_I32 && I->dtype != LOOM_I64)
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "piece %d: ids must be int32 or int64, got %s", p,
                               loom_dtype_name(I->dtype));
      loom_code rc = loom__check_row_splits(S, I->numel, ctx->st);
      if (rc) return rc;
      if (S->numel - 1 != B || off + depth > W)
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "piece %d: row_splits give %lld rows, expected %lld", p,
                               (long long)(S->numel - 1), (long long)B);
      if (Wt && (Wt->dtype != LOOM_F32 || Wt->numel != I->numel))
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "piece %d: weights must be float32 with one value per id",
                               p);
      const int64_t *sp = S->data;
      const float *wt = Wt ? Wt->data : NULL;
      const int ids64 = I->dtype == LOOM_I64;
      for (int64_t r = 0; r < B; r++) {
        float *o = out + r * W + off;
        for (int64_t i = sp[r]; i < sp[r + 1]; i++) {
          int64_t id = rd_id(I->data, ids64, i);
          if (id < 0 || id >= depth) continue;
          o[id] += wt ? wt[i] : 1.0f;
        }
      }
      off += depth;
    } else if (kind == 3) { /* one-hot of int ids [B, n] */
      const loom_buf *I = ctx->in[k++];
      if ((I->dtype != LOOM_I32 && I->dtype != LOOM_I64) || I->ndim != 2 || I->dims[0] != B ||
          off + I->dims[1] * depth > W)
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "piece %d: expected int ids [%lld, n], got %s", p,
                               (long long)B, loom_dtype_name(I->dtype));
      const int64_t n = I->dims[1];
      const int ids64 = I->dtype == LOOM_I64;
      for (int64_t r = 0; r < B; r++) {
        float *o = out + r * W + off;
        for (int64_t j = 0; j < n; j++) {
          int64_t id = rd_id(I->data, ids64, r * n + j);
          if (id >= 0 && id < depth) o[j * depth + id] = 1.0f;
        }
      }
      off += n * depth;
    } else {
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "piece %d: unknown kind %lld", p, (long long)kind);
    }
  }
  if (off != W || k != ctx->nin)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "the pieces give %lld columns from %d inputs, the output has %lld from %d",
                           (long long)off, k, (long long)W, ctx->nin);
  return LOOM_OK;
}

/* =====================================================================
 * RaggedPadIndex: where each step of a padded [B, T] sequence batch reads
 * its values (sequence feature columns)
 * ===================================================================== */
int64_t loom__ragged_pad_steps(const int64_t *splits, int64_t B, int64_t k) {
  int64_t T = 0;
  for (int64_t r = 0; r < B; r++) {
    int64_t len = splits[r + 1] - splits[r], t = len > 0 ? (len + k - 1) / k : 0;
    if (t > T) T = t;
  }
  return T;
}

loom_code loom__k_ragged_pad_index(const loom_kctx *ctx) {
  const loom_buf *S = ctx->in[0], *E = ctx->nin > 1 ? ctx->in[1] : NULL;
  int64_t k = ctx->attrs->num;
  if (k < 1) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "step size must be >= 1, got %lld", (long long)k);
  if (S->dtype != LOOM_I64 || S->ndim != 1 || S->numel < 1)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "row_splits must be an int64 vector of at least 1 element");
  const int64_t *s = S->data;
  int64_t B = S->numel - 1, nnz = s[B];
  loom_code rc = loom__check_row_splits(S, nnz, ctx->st);
  if (rc) return rc;
  int64_t T = loom__ragged_pad_steps(s, B, k);
  loom_buf *I = ctx->out[0], *L = ctx->out[1];
  if (I->numel != B * T * k || L->numel != B)
    return loom_status_set(ctx->st, LOOM_INTERNAL, "outputs do not match row_splits");
  int64_t *idx = I->data, *len = L->data;
  for (int64_t r = 0; r < B; r++) {
    int64_t n = s[r + 1] - s[r];
    len[r] = n > 0 ? (n + k - 1) / k : 0;
    for (int64_t j = 0; j < T * k; j++) idx[r * T * k + j] = j < n ? s[r] + j : nnz;
  }
  if (E) {
    if (E->dtype != LOOM_I64 || E->numel != B)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,
                             "expected lengths must be int64 with one value per row (%lld), got %s [%lld]",
                             (long long)B, loom_dtype_name(E->dtype), (long long)E->numel);
    const int64_t *e = E->data;
    for (int64_t r = 0; r < B; r++)
      if (e[r] != len[r])
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,
                               "sequence lengths differ between feature columns: example %lld has %lld steps in one "
                               "column and %lld in another",
                               (long long)r, (long long)e[r], (long long)len[r]);
  }
  return LOOM_OK;
}
