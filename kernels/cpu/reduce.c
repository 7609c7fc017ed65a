/* CPU kernels: reductions over axes (Sum, Mean, Prod, Max, Min, LogSumExp),
 * ArgMax/ArgMin, ReduceSumLike, BiasAdd, BiasAddGrad.
 *
 * A reduction first drops size-1 dims and merges neighbouring dims that are
 * both reduced or both kept, so the input is a list of alternating kept (K)
 * and reduced (R) segments. Every reduction of one R segment is a 3-D problem
 * [outer, R, inner]:
 *   inner == 1            rows: each output reduces a contiguous run;
 *   inner > 1             columns: each output row is accumulated across R
 *                         contiguous rows, vectorised over columns in chunks
 *                         of COLS_CHUNK with stack accumulators;
 *   outer == inner == 1   all: one output, split into fixed blocks (partials
 *                         combined in a fixed order, so the result does not
 *                         depend on the thread count).
 * Patterns with several R segments ([R][K][R], [K][R][K][R], ...) run one 3-D
 * pass per R segment (innermost first) through a ping-pong workspace; sum, prod,
 * max, min and logsumexp all compose this way (Mean sums, then divides once).
 * f32 sums and products accumulate in double. Work is split over outputs with
 * loom__parallel_for. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "kernels/cpu/reduce.h"
#include "kernels/geometry.h"
#include "kernels/cpu/isa.h"

#define COLS_CHUNK 256 /* columns per chunk in column reductions */
#define MAX_PARTS 64   /* blocks of an all-reduction */

/* ---- axes, masks, segments ---- */
int loom__reduce_mask(const loom_attrs *a, int ndim, uint32_t *mask, int64_t *bad) {
  uint32_t m = 0;
  if (a->naxes == -1) {
    *mask = ndim ? (uint32_t)((1u << ndim) - 1) : 0;
    return 0;
  }
  if (a->naxes < 0 || a->naxes > LOOM_MAX_DIMS) {
    if (bad) *bad = a->naxes;
    return -3;
  }
  for (int i = 0; i < a->naxes; i++) {
    int64_t ax = a->axes[i];
    int64_t n = ax < 0 ? ax + ndim : ax;
    if (n < 0 || n >= ndim) {
      if (bad) *bad = ax;
      return -1;
    }
    if (m & (1u << n)) {
      if (bad) *bad = ax;
      return -2;
    }
    m |= 1u << n;
  }
  *mask = m;
  return 0;
}

int loom__sum_like_mask(int ndy, const int64_t *dy, int nx, const int64_t *x, uint32_t *mask) {
  if (nx > ndy) return -1;
  uint32_t m = 0;
  int lead = ndy - nx;
  for (int i = 0; i < ndy; i++) {
    if (i < lead) {
      m |= 1u << i;
      continue;
    }
    int64_t xd = x[i - lead];
    if (xd == dy[i]) continue;
    if (xd != 1) return -1;
    m |= 1u << i;
  }
  *mask = m;
  return 0;
}

typedef struct segs {
  int n;
  int64_t d[LOOM_MAX_DIMS];
  int red[LOOM_MAX_DIMS];
} segs;

static void make_segs(int ndim, const int64_t *dims, uint32_t mask, segs *s) {
  s->n = 0;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] == 1) continue;
    int r = (int)((mask >> i) & 1u);
    if (s->n && s->red[s->n - 1] == r) {
      s->d[s->n - 1] *= dims[i];
    } else {
      s->d[s->n] = dims[i];
      s->red[s->n] = r;
      s->n++;
    }
  }
}

/* Takes the innermost reduced segment out of s as a 3-D problem. 0 when none is left. */
static int next_pass(segs *s, int64_t *outer, int64_t *R, int64_t *inner) {
  int k = -1;
  for (int i = s->n - 1; i >= 0; i--)
    if (s->red[i]) {
      k = i;
      break;
    }
  if (k < 0) return 0;
  int64_t o = 1, in = 1;
  for (int i = 0; i < k; i++) o *= s->d[i];
  for (int i = k + 1; i < s->n; i++) in *= s->d[i];
  *outer = o;
  *R = s->d[k];
  *inner = in;
  if (k > 0 && k + 1 < s->n) { /* the kept neighbours become one segment */
    s->d[k - 1] *= s->d[k + 1];
    for (int i = k; i + 2 < s->n; i++) {
      s->d[i] = s->d[i + 2];
      s->red[i] = s->red[i + 2];
    }
    s->n -= 2;
  } else {
    for (int i = k; i + 1 < s->n; i++) {
      s->d[i] = s->d[i + 1];
      s->red[i] = s->red[i + 1];
    }
    s->n -= 1;
  }
  return 1;
}

static int64_t numel_of(int ndim, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  return n;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t loom__reduce_ws_bytes(int ndim, const int64_t *dims, uint32_t mask, size_t elem) {
  int64_t n = numel_of(ndim, dims);
  if (n <= 0) return 0;
  segs s;
  make_segs(ndim, dims, mask, &s);
  int64_t sizes[LOOM_MAX_DIMS + 1];
  int np = 0;
  int64_t o, r, in;
  while (next_pass(&s, &o, &r, &in)) sizes[np++] = o * in;
  if (np <= 1) return 0;
  if (np == 2) return align64((size_t)sizes[0] * elem);
  return align64((size_t)sizes[0] * elem) + align64((size_t)sizes[1] * elem);
}

/* ---- per-dtype loops ---- */
#define ISNAN_f32(v) isnan(v)
#define ISNAN_f64(v) isnan(v)
#define ISNAN_i32(v) 0
#define ISNAN_i64(v) 0
#define ISFIN_f32(v) isfinite(v)
#define ISFIN_f64(v) isfinite(v)
#define ISFIN_i32(v) 1
#define ISFIN_i64(v) 1
#define EXP_f32(v) expf(v)
#define EXP_f64(v) exp(v)
#define EXP_i32(v) exp((double)(v))
#define EXP_i64(v) exp((double)(v))
/* "v beats m" for max / min; NaN always beats a number and stays. */
#define BEATS_MAX(S, v, m) (((v) > (m)) | ISNAN_##S(v))
#define BEATS_MIN(S, v, m) (((v) < (m)) | ISNAN_##S(v))
/* ArgMax/ArgMin: strictly better, or the first NaN (NumPy's rule). */
#define ARG_BEATS_MAX(S, v, b) (((v) > (b)) | (ISNAN_##S(v) & !ISNAN_##S(b)))
#define ARG_BEATS_MIN(S, v, b) (((v) < (b)) | (ISNAN_##S(v) & !ISNAN_##S(b)))

/* j over [0, w): blocks of 16 with a constant trip count (which GCC's -O2
 * "very cheap" cost model does vectorise), then the tail. */
#define FORJ(w, BODY)                          \
  do {                                         \
    int64_t j0_ = 0;                           \
    for (; j0_ + 16 <= (w); j0_ += 16)         \
      for (int64_t jj_ = 0; jj_ < 16; jj_++) { \
        int64_t j = j0_ + jj_;                 \
        BODY;                                  \
      }                                        \
    for (int64_t j = j0_; j < (w); j++) {      \
      BODY;                                    \
    }                                          \
  } while (0)

/* T: element type; S: suffix; ACC: accumulator of sums and products. */
#define DEF_REDUCE(T, S, ACC)                                                                                 \
  LOOM_HOT static ACC row_sum_##S(const T *x, int64_t n) {                                                             \
    ACC a[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                                      \
    int64_t i = 0;                                                                                            \
    for (; i + 8 <= n; i += 8)                                                                                \
      for (int k = 0; k < 8; k++) a[k] += (ACC)x[i + k];                                                      \
    for (; i < n; i++) a[0] += (ACC)x[i];                                                                     \
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));                                 \
  }                                                                                                           \
  LOOM_HOT static ACC row_prod_##S(const T *x, int64_t n) {                                                            \
    ACC a[8] = {1, 1, 1, 1, 1, 1, 1, 1};                                                                      \
    int64_t i = 0;                                                                                            \
    for (; i + 8 <= n; i += 8)                                                                                \
      for (int k = 0; k < 8; k++) a[k] *= (ACC)x[i + k];                                                      \
    for (; i < n; i++) a[0] *= (ACC)x[i];                                                                     \
    return ((a[0] * a[4]) * (a[1] * a[5])) * ((a[2] * a[6]) * (a[3] * a[7]));                                 \
  }                                                                                                           \
  LOOM_HOT static T row_max_##S(const T *x, int64_t n) {                                                               \
    if (n < 128) {                                                                                            \
      T r = x[0];                                                                                             \
      for (int64_t i = 1; i < n; i++) r = BEATS_MAX(S, x[i], r) ? x[i] : r;                                   \
      return r;                                                                                               \
    }                                                                                                         \
    T m[64];                                                                                                  \
    for (int k = 0; k < 64; k++) m[k] = x[0];                                                                 \
    int64_t i = 0;                                                                                            \
    for (; i + 64 <= n; i += 64)                                                                              \
      for (int k = 0; k < 64; k++) {                                                                          \
        T v = x[i + k];                                                                                       \
        m[k] = BEATS_MAX(S, v, m[k]) ? v : m[k];                                                              \
      }                                                                                                       \
    for (; i < n; i++) m[0] = BEATS_MAX(S, x[i], m[0]) ? x[i] : m[0];                                         \
    T r = m[0];                                                                                               \
    for (int k = 1; k < 64; k++) r = BEATS_MAX(S, m[k], r) ? m[k] : r;                                        \
    return r;                                                                                                 \
  }                                                                                                           \
  LOOM_HOT static T row_min_##S(const T *x, int64_t n) {                                                               \
    if (n < 128) {                                                                                            \
      T r = x[0];                                                                                             \
      for (int64_t i = 1; i < n; i++) r = BEATS_MIN(S, x[i], r) ? x[i] : r;                                   \
      return r;                                                                                               \
    }                                                                                                         \
    T m[64];                                                                                                  \
    for (int k = 0; k < 64; k++) m[k] = x[0];                                                                 \
    int64_t i = 0;                                                                                            \
    for (; i + 64 <= n; i += 64)                                                                              \
      for (int k = 0; k < 64; k++) {                                                                          \
        T v = x[i + k];                                                                                       \
        m[k] = BEATS_MIN(S, v, m[k]) ? v : m[k];                                                              \
      }                                                                                                       \
    for (; i < n; i++) m[0] = BEATS_MIN(S, x[i], m[0]) ? x[i] : m[0];                                         \
    T r = m[0];                                                                                               \
    for (int k = 1; k < 64; k++) r = BEATS_MIN(S, m[k], r) ? m[k] : r;                                        \
    return r;                                                                                                 \
  }                                                                                                           \
  /* TF reduce_logsumexp: m = max (0 when not finite); log(sum(exp(x - m))) + m. */                           \
  LOOM_HOT static double row_lse_##S(const T *x, int64_t n) {                                                          \
    T m = row_max_##S(x, n);                                                                                  \
    T m0 = ISFIN_##S(m) ? m : (T)0;                                                                           \
    ACC a[4] = {0, 0, 0, 0};                                                                                  \
    int64_t i = 0;                                                                                            \
    for (; i + 4 <= n; i += 4)                                                                                \
      for (int k = 0; k < 4; k++) a[k] += (ACC)EXP_##S(x[i + k] - m0);                                        \
    for (; i < n; i++) a[0] += (ACC)EXP_##S(x[i] - m0);                                                       \
    return log((double)((a[0] + a[1]) + (a[2] + a[3]))) + (double)m0;                                         \
  }                                                                                                           \
  static T row_apply_##S(int kind, const T *x, int64_t n, double div) {                                       \
    switch (kind) {                                                                                           \
    case LOOM_RED_SUM: return (T)row_sum_##S(x, n);                                                           \
    case LOOM_RED_MEAN: return (T)((double)row_sum_##S(x, n) / div);                                          \
    case LOOM_RED_PROD: return (T)row_prod_##S(x, n);                                                         \
    case LOOM_RED_MAX: return row_max_##S(x, n);                                                              \
    case LOOM_RED_MIN: return row_min_##S(x, n);                                                              \
    default: return (T)row_lse_##S(x, n);                                                                     \
    }                                                                                                         \
  }                                                                                                           \
  /* Columns: y[j] = reduce over r < R of x[r*ld + j], j < w <= COLS_CHUNK. */                                \
  LOOM_HOT static void col_apply_##S(int kind, const T *x, int64_t R, int64_t ld, int64_t w, T *y, double div) {       \
    if (kind == LOOM_RED_SUM || kind == LOOM_RED_MEAN || kind == LOOM_RED_PROD) {                             \
      ACC acc[COLS_CHUNK];                                                                                    \
      FORJ(w, acc[j] = (ACC)x[j]);                                                                            \
      if (kind == LOOM_RED_PROD) {                                                                            \
        for (int64_t r = 1; r < R; r++) {                                                                     \
          const T *p = x + r * ld;                                                                            \
          FORJ(w, acc[j] *= (ACC)p[j]);                                                                       \
        }                                                                                                     \
      } else {                                                                                                \
        for (int64_t r = 1; r < R; r++) {                                                                     \
          const T *p = x + r * ld;                                                                            \
          FORJ(w, acc[j] += (ACC)p[j]);                                                                       \
        }                                                                                                     \
      }                                                                                                       \
      if (kind == LOOM_RED_MEAN)                                                                              \
        FORJ(w, y[j] = (T)((double)acc[j] / div));                                                            \
      else                                                                                                    \
        FORJ(w, y[j] = (T)acc[j]);                                                                            \
      return;                                                                                                 \
    }                                                                                                         \
    T m[COLS_CHUNK];                                                                                          \
    FORJ(w, m[j] = x[j]);                                                                                     \
    if (kind == LOOM_RED_MIN) {                                                                               \
      for (int64_t r = 1; r < R; r++) {                                                                       \
        const T *p = x + r * ld;                                                                              \
        FORJ(w, m[j] = BEATS_MIN(S, p[j], m[j]) ? p[j] : m[j]);                                               \
      }                                                                                                       \
    } else {                                                                                                  \
      for (int64_t r = 1; r < R; r++) {                                                                       \
        const T *p = x + r * ld;                                                                              \
        FORJ(w, m[j] = BEATS_MAX(S, p[j], m[j]) ? p[j] : m[j]);                                               \
      }                                                                                                       \
    }                                                                                                         \
    if (kind != LOOM_RED_LSE) {                                                                               \
      memcpy(y, m, (size_t)w * sizeof(T));                                                                    \
      return;                                                                                                 \
    }                                                                                                         \
    ACC acc[COLS_CHUNK];                                                                                      \
    for (int64_t j = 0; j < w; j++) {                                                                         \
      m[j] = ISFIN_##S(m[j]) ? m[j] : (T)0;                                                                   \
      acc[j] = 0;                                                                                             \
    }                                                                                                         \
    for (int64_t r = 0; r < R; r++) {                                                                         \
      const T *p = x + r * ld;                                                                                \
      FORJ(w, acc[j] += (ACC)EXP_##S(p[j] - m[j]));                                                           \
    }                                                                                                         \
    FORJ(w, y[j] = (T)(log((double)acc[j]) + (double)m[j]));                                                  \
  }                                                                                                           \
  typedef struct r3_##S {                                                                                     \
    int kind;                                                                                                 \
    const T *x;                                                                                               \
    T *y;                                                                                                     \
    int64_t R, inner, nch;                                                                                    \
    double div;                                                                                               \
  } r3_##S;                                                                                                   \
  static void rows_##S(void *p, int64_t b, int64_t e) {                                                       \
    const r3_##S *a = p;                                                                                      \
    for (int64_t o = b; o < e; o++) a->y[o] = row_apply_##S(a->kind, a->x + o * a->R, a->R, a->div);          \
  }                                                                                                           \
  static void cols_##S(void *p, int64_t b, int64_t e) {                                                       \
    const r3_##S *a = p;                                                                                      \
    for (int64_t u = b; u < e; u++) {                                                                         \
      int64_t o = u / a->nch, j0 = (u % a->nch) * COLS_CHUNK;                                                 \
      int64_t w = a->inner - j0 < COLS_CHUNK ? a->inner - j0 : COLS_CHUNK;                                    \
      col_apply_##S(a->kind, a->x + o * a->R * a->inner + j0, a->R, a->inner, w, a->y + o * a->inner + j0,    \
                    a->div);                                                                                  \
    }                                                                                                         \
  }                                                                                                           \
  typedef struct all_##S {                                                                                    \
    int kind;                                                                                                 \
    const T *x;                                                                                               \
    int64_t n, nblk;                                                                                          \
    ACC pa[MAX_PARTS];                                                                                        \
    T pt[MAX_PARTS];                                                                                          \
    double pd[MAX_PARTS];                                                                                     \
  } all_##S;                                                                                                  \
  static void allblk_##S(void *p, int64_t b, int64_t e) {                                                     \
    all_##S *a = p;                                                                                           \
    for (int64_t k = b; k < e; k++) {                                                                         \
      int64_t lo = a->n * k / a->nblk, hi = a->n * (k + 1) / a->nblk;                                         \
      const T *x = a->x + lo;                                                                                 \
      switch (a->kind) {                                                                                      \
      case LOOM_RED_SUM:                                                                                      \
      case LOOM_RED_MEAN: a->pa[k] = row_sum_##S(x, hi - lo); break;                                          \
      case LOOM_RED_PROD: a->pa[k] = row_prod_##S(x, hi - lo); break;                                         \
      case LOOM_RED_MAX: a->pt[k] = row_max_##S(x, hi - lo); break;                                           \
      case LOOM_RED_MIN: a->pt[k] = row_min_##S(x, hi - lo); break;                                           \
      default: a->pd[k] = row_lse_##S(x, hi - lo); break;                                                     \
      }                                                                                                       \
    }                                                                                                         \
  }                                                                                                           \
  static T all_##S##_run(int kind, const T *x, int64_t n, double div, loom_pool *pool) {                      \
    int64_t nblk = n / LOOM_PAR_GRAIN;                                                                        \
    if (nblk > MAX_PARTS) nblk = MAX_PARTS;                                                                   \
    if (nblk < 2) return row_apply_##S(kind, x, n, div);                                                      \
    all_##S a;                                                                                                \
    a.kind = kind;                                                                                            \
    a.x = x;                                                                                                  \
    a.n = n;                                                                                                  \
    a.nblk = nblk;                                                                                            \
    loom__parallel_for(pool, nblk, 1, allblk_##S, &a);                                                        \
    switch (kind) {                                                                                           \
    case LOOM_RED_SUM:                                                                                        \
    case LOOM_RED_MEAN: {                                                                                     \
      ACC s = 0;                                                                                              \
      for (int64_t k = 0; k < nblk; k++) s += a.pa[k];                                                        \
      return kind == LOOM_RED_MEAN ? (T)((double)s / div) : (T)s;                                             \
    }                                                                                                         \
    case LOOM_RED_PROD: {                                                                                     \
      ACC s = 1;                                                                                              \
      for (int64_t k = 0; k < nblk; k++) s *= a.pa[k];                                                        \
      return (T)s;                                                                                            \
    }                                                                                                         \
    case LOOM_RED_MAX: return row_max_##S(a.pt, nblk);                                                        \
    case LOOM_RED_MIN: return row_min_##S(a.pt, nblk);                                                        \
    default: {                                                                                                \
      double m = a.pd[0];                                                                                     \
      for (int64_t k = 1; k < nblk; k++) m = (a.pd[k] > m || isnan(a.pd[k])) ? a.pd[k] : m;                   \
      double m0 = isfinite(m) ? m : 0.0, s = 0;                                                               \
      for (int64_t k = 0; k < nblk; k++) s += exp(a.pd[k] - m0);                                              \
      return (T)(log(s) + m0);                                                                                \
    }                                                                                                         \
    }                                                                                                         \
  }                                                                                                           \
  static void red3_##S(int kind, const T *x, T *y, int64_t outer, int64_t R, int64_t inner, double div,       \
                       loom_pool *pool) {                                                                     \
    if (outer * inner == 1) {                                                                                 \
      y[0] = all_##S##_run(kind, x, R, div, pool);                                                            \
      return;                                                                                                 \
    }                                                                                                         \
    r3_##S a = {kind, x, y, R, inner, 1, div};                                                                \
    if (inner == 1) {                                                                                         \
      int64_t grain = LOOM_PAR_GRAIN / R;                                                                     \
      loom__parallel_for(pool, outer, grain < 1 ? 1 : grain, rows_##S, &a);                                   \
    } else {                                                                                                  \
      a.nch = (inner + COLS_CHUNK - 1) / COLS_CHUNK;                                                          \
      int64_t w = inner < COLS_CHUNK ? inner : COLS_CHUNK;                                                    \
      int64_t grain = LOOM_PAR_GRAIN / (R * w);                                                               \
      loom__parallel_for(pool, outer * a.nch, grain < 1 ? 1 : grain, cols_##S, &a);                           \
    }                                                                                                         \
  }                                                                                                           \
  /* ArgMax / ArgMin over the middle axis of [outer, R, inner]; the first extreme wins. */                    \
  typedef struct am_##S {                                                                                     \
    const T *x;                                                                                               \
    void *y;                                                                                                  \
    int i32, is_min;                                                                                          \
    int64_t R, inner, nch;                                                                                    \
  } am_##S;                                                                                                   \
  /* First index of the row's extreme: the vectorised max/min, then the first element equal to it             \
   * (the first NaN when the extreme is NaN). Short rows: one scalar pass. */                                 \
  LOOM_HOT static int64_t row_arg_##S(const T *x, int64_t n, int is_min) {                                             \
    if (n < 64) {                                                                                             \
      T best = x[0];                                                                                          \
      int64_t bi = 0;                                                                                         \
      for (int64_t i = 1; i < n; i++) {                                                                       \
        T v = x[i];                                                                                           \
        if (is_min ? ARG_BEATS_MIN(S, v, best) : ARG_BEATS_MAX(S, v, best)) {                                 \
          best = v;                                                                                           \
          bi = i;                                                                                             \
        }                                                                                                     \
      }                                                                                                       \
      return bi;                                                                                              \
    }                                                                                                         \
    T m = is_min ? row_min_##S(x, n) : row_max_##S(x, n);                                                     \
    if (ISNAN_##S(m)) {                                                                                       \
      for (int64_t i = 0; i < n; i++)                                                                         \
        if (ISNAN_##S(x[i])) return i;                                                                        \
      return 0;                                                                                               \
    }                                                                                                         \
    int64_t i = 0;                                                                                            \
    for (; i + 16 <= n; i += 16) {                                                                            \
      int hit = 0;                                                                                            \
      for (int k = 0; k < 16; k++) hit |= x[i + k] == m;                                                      \
      if (hit) break;                                                                                         \
    }                                                                                                         \
    for (; i < n; i++)                                                                                        \
      if (x[i] == m) return i;                                                                                \
    return 0;                                                                                                 \
  }                                                                                                           \
  static void am_rows_##S(void *p, int64_t b, int64_t e) {                                                    \
    const am_##S *a = p;                                                                                      \
    for (int64_t o = b; o < e; o++) {                                                                         \
      int64_t bi = row_arg_##S(a->x + o * a->R, a->R, a->is_min);                                             \
      if (a->i32) ((int32_t *)a->y)[o] = (int32_t)bi;                                                         \
      else ((int64_t *)a->y)[o] = bi;                                                                         \
    }                                                                                                         \
  }                                                                                                           \
  LOOM_HOT static void am_cols_##S(void *p, int64_t b, int64_t e) {                                                    \
    const am_##S *a = p;                                                                                      \
    T best[COLS_CHUNK];                                                                                       \
    int64_t bi[COLS_CHUNK];                                                                                   \
    for (int64_t u = b; u < e; u++) {                                                                         \
      int64_t o = u / a->nch, j0 = (u % a->nch) * COLS_CHUNK;                                                 \
      int64_t w = a->inner - j0 < COLS_CHUNK ? a->inner - j0 : COLS_CHUNK;                                    \
      const T *x = a->x + o * a->R * a->inner + j0;                                                           \
      FORJ(w, best[j] = x[j]);                                                                                \
      FORJ(w, bi[j] = 0);                                                                                     \
      for (int64_t r = 1; r < a->R; r++) {                                                                    \
        const T *q = x + r * a->inner;                                                                        \
        if (a->is_min)                                                                                        \
          FORJ(w, {                                                                                           \
            T v = q[j];                                                                                       \
            int c = ARG_BEATS_MIN(S, v, best[j]);                                                             \
            best[j] = c ? v : best[j];                                                                        \
            bi[j] = c ? r : bi[j];                                                                            \
          });                                                                                                 \
        else                                                                                                  \
          FORJ(w, {                                                                                           \
            T v = q[j];                                                                                       \
            int c = ARG_BEATS_MAX(S, v, best[j]);                                                             \
            best[j] = c ? v : best[j];                                                                        \
            bi[j] = c ? r : bi[j];                                                                            \
          });                                                                                                 \
      }                                                                                                       \
      int64_t base = o * a->inner + j0;                                                                       \
      if (a->i32)                                                                                             \
        for (int64_t j = 0; j < w; j++) ((int32_t *)a->y)[base + j] = (int32_t)bi[j];                         \
      else                                                                                                    \
        for (int64_t j = 0; j < w; j++) ((int64_t *)a->y)[base + j] = bi[j];                                  \
    }                                                                                                         \
  }                                                                                                           \
  static void arg3_##S(const T *x, void *y, int i32, int is_min, int64_t outer, int64_t R, int64_t inner,     \
                       loom_pool *pool) {                                                                     \
    am_##S a = {x, y, i32, is_min, R, inner, 1};                                                              \
    if (inner == 1) {                                                                                         \
      int64_t grain = LOOM_PAR_GRAIN / R;                                                                     \
      loom__parallel_for(pool, outer, grain < 1 ? 1 : grain, am_rows_##S, &a);                                \
    } else {                                                                                                  \
      a.nch = (inner + COLS_CHUNK - 1) / COLS_CHUNK;                                                          \
      int64_t w = inner < COLS_CHUNK ? inner : COLS_CHUNK;                                                    \
      int64_t grain = LOOM_PAR_GRAIN / (R * w);                                                               \
      loom__parallel_for(pool, outer * a.nch, grain < 1 ? 1 : grain, am_cols_##S, &a);                        \
    }                                                                                                         \
  }                                                                                                           \
  /* BiasAdd rows: y[r, c] = x[r, c] + b[c]. */                                                               \
  typedef struct ba_##S {                                                                                     \
    const T *x, *b;                                                                                           \
    T *y;                                                                                                     \
    int64_t C;                                                                                                \
  } ba_##S;                                                                                                   \
  LOOM_HOT static void ba_rows_##S(void *p, int64_t r0, int64_t r1) {                                                  \
    const ba_##S *a = p;                                                                                      \
    const int64_t C = a->C;                                                                                   \
    const T *b = a->b;                                                                                        \
    for (int64_t r = r0; r < r1; r++) {                                                                       \
      const T *x = a->x + r * C;                                                                              \
      T *y = a->y + r * C;                                                                                    \
      int64_t c = 0;                                                                                          \
      /* whole blocks of 16 channels: a loop of constant length the compiler turns into vector adds */        \
      for (; c + 16 <= C; c += 16)                                                                            \
        for (int k = 0; k < 16; k++) y[c + k] = x[c + k] + b[c + k];                                          \
      for (; c < C; c++) y[c] = x[c] + b[c];                                                                  \
    }                                                                                                         \
  }

DEF_REDUCE(float, f32, double)
DEF_REDUCE(double, f64, double)
DEF_REDUCE(int32_t, i32, int32_t)
DEF_REDUCE(int64_t, i64, int64_t)

/* ---- drivers ---- */
static void red3(loom_dtype dt, int kind, const void *x, void *y, int64_t outer, int64_t R, int64_t inner,
                 double div, loom_pool *pool) {
  switch (dt) {
  case LOOM_F32: red3_f32(kind, x, y, outer, R, inner, div, pool); break;
  case LOOM_F64: red3_f64(kind, x, y, outer, R, inner, div, pool); break;
  case LOOM_I32: red3_i32(kind, x, y, outer, R, inner, div, pool); break;
  default: red3_i64(kind, x, y, outer, R, inner, div, pool); break;
  }
}

static void fill(loom_dtype dt, void *y, int64_t n, double v) {
  for (int64_t i = 0; i < n; i++) switch (dt) {
    case LOOM_F32: ((float *)y)[i] = (float)v; break;
    case LOOM_F64: ((double *)y)[i] = v; break;
    case LOOM_I32: ((int32_t *)y)[i] = (int32_t)v; break;
    default: ((int64_t *)y)[i] = (int64_t)v; break;
    }
}

static const char *kind_name(int kind) {
  static const char *n[] = {"Sum", "Mean", "Prod", "Max", "Min", "LogSumExp"};
  return kind >= 0 && kind <= LOOM_RED_LSE ? n[kind] : "reduction";
}

loom_code loom__reduce_run(int kind, const loom_buf *x, uint32_t mask, loom_buf *y, void *ws, loom_pool *pool,
                           loom_status *st, const char *what) {
  loom_dtype dt = x->dtype;
  if (dt != LOOM_F32 && dt != LOOM_F64 && dt != LOOM_I32 && dt != LOOM_I64)
    return loom_status_set(st, LOOM_UNIMPLEMENTED, "%s: no CPU kernel for %s", what ? what : kind_name(kind),
                           loom_dtype_name(dt));
  if (y->numel == 0) return LOOM_OK;
  int64_t count = 1;
  for (int i = 0; i < x->ndim; i++)
    if (mask & (1u << i)) count *= x->dims[i];
  if (count == 0) { /* empty reduction, non-empty output */
    char b[160];
    switch (kind) {
    case LOOM_RED_SUM: fill(dt, y->data, y->numel, 0.0); return LOOM_OK;
    case LOOM_RED_PROD: fill(dt, y->data, y->numel, 1.0); return LOOM_OK;
    case LOOM_RED_MEAN: fill(dt, y->data, y->numel, NAN); return LOOM_OK;
    case LOOM_RED_LSE: fill(dt, y->data, y->numel, -INFINITY); return LOOM_OK;
    default:
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s of an empty reduction: input shape %s has no elements along the reduced axes",
                             what ? what : kind_name(kind), loom__dims_str(b, sizeof b, x->ndim, x->dims));
    }
  }
  size_t elem = loom_dtype_size(dt);
  segs s;
  make_segs(x->ndim, x->dims, mask, &s);
  segs probe = s;
  int64_t o, r, in;
  int npass = 0;
  while (next_pass(&probe, &o, &r, &in)) npass++;
  if (npass == 0) { /* nothing to reduce (size-1 or no axes): every op is the identity */
    if (y->data != x->data) memcpy(y->data, x->data, (size_t)y->numel * elem);
    return LOOM_OK;
  }
  char *bufs[2] = {ws, NULL};
  if (npass >= 3) {
    segs t = s;
    next_pass(&t, &o, &r, &in);
    bufs[1] = (char *)ws + align64((size_t)(o * in) * elem);
  }
  const void *src = x->data;
  for (int p = 0; p < npass; p++) {
    next_pass(&s, &o, &r, &in);
    int last = p == npass - 1;
    void *dst = last ? y->data : bufs[p & 1];
    int k = kind;
    if (kind == LOOM_RED_MEAN && !last) k = LOOM_RED_SUM;
    red3(dt, k, src, dst, o, r, in, (double)count, pool);
    src = dst;
  }
  return LOOM_OK;
}

/* ---- kernels ---- */
static loom_code reduce_kernel(const loom_kctx *ctx, int kind) {
  uint32_t mask;
  int64_t bad = 0;
  if (loom__reduce_mask(ctx->attrs, ctx->in[0]->ndim, &mask, &bad))
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "invalid reduction axis %lld for an input of rank %d",
                           (long long)bad, (int)ctx->in[0]->ndim);
  return loom__reduce_run(kind, ctx->in[0], mask, ctx->out[0], ctx->ws, ctx->pool, ctx->st, NULL);
}

#define RED_KERNEL(op, dt, KIND) \
  loom_code loom__k_##op##_##dt(const loom_kctx *ctx) { return reduce_kernel(ctx, KIND); }
RED_KERNEL(sum, f32, LOOM_RED_SUM)
RED_KERNEL(sum, f64, LOOM_RED_SUM)
RED_KERNEL(sum, i32, LOOM_RED_SUM)
RED_KERNEL(sum, i64, LOOM_RED_SUM)
RED_KERNEL(mean, f32, LOOM_RED_MEAN)
RED_KERNEL(mean, f64, LOOM_RED_MEAN)
RED_KERNEL(max, f32, LOOM_RED_MAX)
RED_KERNEL(max, f64, LOOM_RED_MAX)
RED_KERNEL(max, i32, LOOM_RED_MAX)
RED_KERNEL(max, i64, LOOM_RED_MAX)
RED_KERNEL(min, f32, LOOM_RED_MIN)
RED_KERNEL(min, f64, LOOM_RED_MIN)
RED_KERNEL(min, i32, LOOM_RED_MIN)
RED_KERNEL(min, i64, LOOM_RED_MIN)
RED_KERNEL(prod, f32, LOOM_RED_PROD)
RED_KERNEL(prod, f64, LOOM_RED_PROD)
RED_KERNEL(prod, i32, LOOM_RED_PROD)
RED_KERNEL(prod, i64, LOOM_RED_PROD)
RED_KERNEL(logsumexp, f32, LOOM_RED_LSE)
RED_KERNEL(logsumexp, f64, LOOM_RED_LSE)

/* ArgMax/ArgMin: attrs.axis, output dtype I32 or I64 (the output buffer's). */
static loom_code arg_kernel(const loom_kctx *ctx, int is_min) {
  const loom_buf *x = ctx->in[0];
  loom_buf *y = ctx->out[0];
  int64_t outer = 0, R = 0, inner = 1;
  loom_code rc = loom__arg_geom(ctx, is_min, &outer, &R, &inner);
  if (rc != LOOM_OK || outer == 0) return rc;
  int i32 = y->dtype == LOOM_I32;
  switch (x->dtype) {
  case LOOM_F32: arg3_f32(x->data, y->data, i32, is_min, outer, R, inner, ctx->pool); break;
  case LOOM_F64: arg3_f64(x->data, y->data, i32, is_min, outer, R, inner, ctx->pool); break;
  case LOOM_I32: arg3_i32(x->data, y->data, i32, is_min, outer, R, inner, ctx->pool); break;
  case LOOM_I64: arg3_i64(x->data, y->data, i32, is_min, outer, R, inner, ctx->pool); break;
  default:
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CPU kernel for %s", loom_dtype_name(x->dtype));
  }
  return LOOM_OK;
}
#define ARG_KERNEL(op, dt, MIN) \
  loom_code loom__k_##op##_##dt(const loom_kctx *ctx) { return arg_kernel(ctx, MIN); }
ARG_KERNEL(argmax, f32, 0)
ARG_KERNEL(argmax, f64, 0)
ARG_KERNEL(argmax, i32, 0)
ARG_KERNEL(argmax, i64, 0)
ARG_KERNEL(argmin, f32, 1)
ARG_KERNEL(argmin, f64, 1)
ARG_KERNEL(argmin, i32, 1)
ARG_KERNEL(argmin, i64, 1)

/* ReduceSumLike(dy, x): sum dy over the dims broadcast from x's shape. */
static loom_code sum_like_kernel(const loom_kctx *ctx) {
  const loom_buf *dy = ctx->in[0], *x = ctx->in[1];
  uint32_t mask;
  if (loom__sum_like_mask(dy->ndim, dy->dims, x->ndim, x->dims, &mask)) {
    char b1[160], b2[160];
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "shape %s does not broadcast to %s",
                           loom__dims_str(b1, sizeof b1, x->ndim, x->dims), loom__dims_str(b2, sizeof b2, dy->ndim, dy->dims));
  }
  return loom__reduce_run(LOOM_RED_SUM, dy, mask, ctx->out[0], ctx->ws, ctx->pool, ctx->st, "ReduceSumLike");
}
loom_code loom__k_reduce_sum_like_f32(const loom_kctx *ctx) { return sum_like_kernel(ctx); }
loom_code loom__k_reduce_sum_like_f64(const loom_kctx *ctx) { return sum_like_kernel(ctx); }
loom_code loom__k_reduce_sum_like_i32(const loom_kctx *ctx) { return sum_like_kernel(ctx); }
loom_code loom__k_reduce_sum_like_i64(const loom_kctx *ctx) { return sum_like_kernel(ctx); }

/* BiasAdd(value [..., C], bias [C]). */
#define BIAS_ADD_KERNEL(T, S)                                                      \
  loom_code loom__k_bias_add_##S(const loom_kctx *ctx) {                           \
    const loom_buf *x = ctx->in[0], *b = ctx->in[1];                               \
    loom_buf *y = ctx->out[0];                                                     \
    int64_t C = x->ndim ? x->dims[x->ndim - 1] : 1;                                \
    if (b->numel != C)                                                             \
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,                       \
                             "bias has %lld elements, the last dimension is %lld", \
                             (long long)b->numel, (long long)C);                   \
    if (y->numel == 0) return LOOM_OK;                                             \
    ba_##S a = {x->data, b->data, y->data, C};                                     \
    int64_t grain = LOOM_PAR_GRAIN / C;                                            \
    loom__parallel_for(ctx->pool, y->numel / C, grain < 1 ? 1 : grain, ba_rows_##S, &a); \
    return LOOM_OK;                                                                \
  }
BIAS_ADD_KERNEL(float, f32)
BIAS_ADD_KERNEL(double, f64)
BIAS_ADD_KERNEL(int32_t, i32)
BIAS_ADD_KERNEL(int64_t, i64)

/* BiasAddGrad(dy [..., C]) -> [C]: a column sum; one pass, no workspace. When the step that made dy
 * took each image's column sums (kernels/kernel.h: ctx->epi->colsum, [N, C] in double), their sum in
 * image order. */
static loom_code bias_add_grad_kernel(const loom_kctx *ctx) {
  const loom_buf *dy = ctx->in[0];
  if (ctx->epi && ctx->epi->colsum && dy->ndim == 4 && (dy->dtype == LOOM_F32 || dy->dtype == LOOM_F64)) {
    const int64_t N = dy->dims[0], C = dy->dims[3];
    const double *s = ctx->epi->colsum;
    for (int64_t c = 0; c < C; c++) {
      double t = 0;
      for (int64_t n = 0; n < N; n++) t += s[n * C + c];
      if (dy->dtype == LOOM_F32) ((float *)ctx->out[0]->data)[c] = (float)t;
      else ((double *)ctx->out[0]->data)[c] = t;
    }
    return LOOM_OK;
  }
  uint32_t mask = dy->ndim ? (uint32_t)((1u << (dy->ndim - 1)) - 1) : 0;
  return loom__reduce_run(LOOM_RED_SUM, dy, mask, ctx->out[0], NULL, ctx->pool, ctx->st, "BiasAddGrad");
}
loom_code loom__k_bias_add_grad_f32(const loom_kctx *ctx) { return bias_add_grad_kernel(ctx); }
loom_code loom__k_bias_add_grad_f64(const loom_kctx *ctx) { return bias_add_grad_kernel(ctx); }
loom_code loom__k_bias_add_grad_i32(const loom_kctx *ctx) { return bias_add_grad_kernel(ctx); }
loom_code loom__k_bias_add_grad_i64(const loom_kctx *ctx) { return bias_add_grad_kernel(ctx); }
