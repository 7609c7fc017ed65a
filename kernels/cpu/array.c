/* CPU kernels: array ops (data movement, gather/scatter, segments, cast,
 * fills, top-k). Shapes are already set by the op's shape function; these
 * only move or compute values. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "kernels/cpu/array.h"

/* ---------------------------------------------------------------------- */
/* small helpers                                                          */
/* ---------------------------------------------------------------------- */

static inline void cpy(void *d, const void *s, size_t n) {
  if (n) memcpy(d, s, n);
}

static inline size_t esize(loom_dtype dt) {
  /* strings move as their loom_tstring handles (Gather, Tile): the bytes stay where they are */
  static const size_t sz[LOOM_DTYPE_COUNT] = {0, 4, 8, 4, 8, 1, 1, sizeof(loom_tstring)};
  return (dt > 0 && dt < LOOM_DTYPE_COUNT) ? sz[dt] : 0;
}

static inline int64_t prod(const int64_t *d, int b, int e) {
  int64_t p = 1;
  for (int i = b; i < e; i++) p *= d[i];
  return p;
}

/* contiguous row-major strides (elements) */
static void cstrides(int nd, const int64_t *dims, int64_t *st) {
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    st[i] = s;
    s *= dims[i];
  }
}

static inline int64_t norm_axis(int64_t a, int rank) { return a < 0 ? a + rank : a; }

/* Reads index i of an integer tensor (i32, i64 or u8). */
static inline int64_t rd_idx(const void *p, loom_dtype dt, int64_t i) {
  switch (dt) {
    case LOOM_I32: return ((const int32_t *)p)[i];
    case LOOM_I64: return ((const int64_t *)p)[i];
    case LOOM_U8: return ((const uint8_t *)p)[i];
    default: return 0;
  }
}

/* "[1,0]" for flat position k of a tensor with the given dims ("" for rank 0). */
static const char *pos_str(char *buf, size_t cap, int nd, const int64_t *dims, int64_t k) {
  int64_t idx[LOOM_MAX_DIMS];
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = dims[d] ? k % dims[d] : 0;
    k = dims[d] ? k / dims[d] : 0;
  }
  size_t n = 0;
  buf[0] = 0;
  if (nd == 0) return buf;
  n += (size_t)snprintf(buf + n, cap - n, "[");
  for (int d = 0; d < nd && n < cap; d++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? "," : "", (long long)idx[d]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

/* Checks every index of I is in [0, n); on failure names the first bad one. */
static loom_code check_indices(const loom_kctx *ctx, const loom_buf *I, const char *what, int64_t n) {
  for (int64_t k = 0; k < I->numel; k++) {
    int64_t v = rd_idx(I->data, I->dtype, k);
    if (v < 0 || v >= n) {
      char pb[160];
      pos_str(pb, sizeof pb, I->ndim, I->dims, k);
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "%s%s = %lld is not in [0, %lld)", what, pb,
                             (long long)v, (long long)n);
    }
  }
  return LOOM_OK;
}

/* double -> integer, truncating toward zero; NaN -> 0, saturating out of range. */
#define SAT_CONV(name, T, LO, HI)                   \
  static inline T name(double x) {                  \
    if (x != x) return 0;                           \
    if (x <= (double)(LO)) return (T)(LO);          \
    if (x >= (double)(HI)) return (T)(HI);          \
    return (T)x;                                    \
  }
SAT_CONV(d2i32, int32_t, INT32_MIN, INT32_MAX)
SAT_CONV(d2i64, int64_t, INT64_MIN, INT64_MAX)
SAT_CONV(d2u8, uint8_t, 0, 255)

/* The bytes of value v converted to dtype dt. */
static void value_bytes(loom_dtype dt, double v, unsigned char out[8]) {
  memset(out, 0, 8);
  switch (dt) {
    case LOOM_F32: { float x = (float)v; memcpy(out, &x, 4); break; }
    case LOOM_F64: memcpy(out, &v, 8); break;
    case LOOM_I32: { int32_t x = d2i32(v); memcpy(out, &x, 4); break; }
    case LOOM_I64: { int64_t x = d2i64(v); memcpy(out, &x, 8); break; }
    case LOOM_U8: out[0] = d2u8(v); break;
    case LOOM_BOOL: out[0] = v != 0; break;
    default: break;
  }
}

/* ---- replicate one element over a buffer (parallel) ---- */
typedef struct {
  char *dst;
  size_t es;
  unsigned char pat[8];
} rep_args;

static void rep_range(void *p, int64_t b, int64_t e) {
  const rep_args *a = p;
  switch (a->es) {
    case 1: memset(a->dst + b, a->pat[0], (size_t)(e - b)); break;
    case 2: {
      uint16_t v, *d = (uint16_t *)a->dst;
      memcpy(&v, a->pat, 2);
      for (int64_t i = b; i < e; i++) d[i] = v;
      break;
    }
    case 4: {
      uint32_t v, *d = (uint32_t *)a->dst;
      memcpy(&v, a->pat, 4);
      for (int64_t i = b; i < e; i++) d[i] = v;
      break;
    }
    case 8: {
      uint64_t v, *d = (uint64_t *)a->dst;
      memcpy(&v, a->pat, 8);
      for (int64_t i = b; i < e; i++) d[i] = v;
      break;
    }
    default:
      for (int64_t i = b; i < e; i++) memcpy(a->dst + i * (int64_t)a->es, a->pat, a->es);
  }
}

static void replicate(loom_pool *pool, void *dst, size_t es, const void *val, int64_t n) {
  if (n <= 0 || !es || es > 8) return;
  rep_args a;
  a.dst = dst;
  a.es = es;
  memset(a.pat, 0, sizeof a.pat);
  memcpy(a.pat, val, es);
  loom__parallel_for(pool, n, LOOM_PAR_GRAIN, rep_range, &a);
}

static void fill_value(loom_pool *pool, void *dst, loom_dtype dt, int64_t n, double v) {
  unsigned char pat[8];
  value_bytes(dt, v, pat);
  replicate(pool, dst, esize(dt), pat, n);
}

/* ---------------------------------------------------------------------- */
/* strided copy: the engine under transpose, slice, tile, pad, broadcast  */
/* ---------------------------------------------------------------------- */

#define SC_MAXD (2 * LOOM_MAX_DIMS)
#define SC_TILE 16

typedef struct {
  int nd;
  int64_t dims[SC_MAXD];
  int64_t ss[SC_MAXD], ds[SC_MAXD]; /* element strides of source and destination */
  size_t es;
  const char *src;
  char *dst;
} scopy;

/* Drops size-1 dims and merges dims that are contiguous in both src and dst. */
static void sc_coalesce(scopy *c) {
  int n = 0;
  for (int i = 0; i < c->nd; i++) {
    if (c->dims[i] == 1) continue;
    if (n > 0 && c->ss[n - 1] == c->ss[i] * c->dims[i] && c->ds[n - 1] == c->ds[i] * c->dims[i]) {
      c->dims[n - 1] *= c->dims[i];
      c->ss[n - 1] = c->ss[i];
      c->ds[n - 1] = c->ds[i];
      continue;
    }
    c->dims[n] = c->dims[i];
    c->ss[n] = c->ss[i];
    c->ds[n] = c->ds[i];
    n++;
  }
  c->nd = n;
}

#define RUN_LOOP(T)                                           \
  do {                                                        \
    T *d_ = (T *)dst;                                         \
    const T *s_ = (const T *)src;                             \
    for (int64_t i_ = 0; i_ < n; i_++) d_[i_ * dst_st] = s_[i_ * src_st]; \
  } while (0)

static void copy_run(char *dst, int64_t dst_st, const char *src, int64_t src_st, int64_t n, size_t es) {
  if (dst_st == 1 && src_st == 1) {
    cpy(dst, src, (size_t)n * es);
    return;
  }
  switch (es) {
    case 1: RUN_LOOP(uint8_t); break;
    case 2: RUN_LOOP(uint16_t); break;
    case 4: RUN_LOOP(uint32_t); break;
    case 8: RUN_LOOP(uint64_t); break;
    default:
      for (int64_t i = 0; i < n; i++) memcpy(dst + i * dst_st * (int64_t)es, src + i * src_st * (int64_t)es, es);
  }
}

/* rows [b,e) of the outer nd-1 dims; each row is one run of the innermost dim */
static void sc_rows(void *p, int64_t b, int64_t e) {
  const scopy *c = p;
  int nd = c->nd;
  int64_t idx[SC_MAXD];
  int64_t so = 0, dof = 0, r = b;
  for (int d = nd - 2; d >= 0; d--) {
    idx[d] = r % c->dims[d];
    r /= c->dims[d];
    so += idx[d] * c->ss[d];
    dof += idx[d] * c->ds[d];
  }
  int64_t inner = c->dims[nd - 1];
  int64_t es = (int64_t)c->es;
  for (int64_t row = b; row < e; row++) {
    copy_run(c->dst + dof * es, c->ds[nd - 1], c->src + so * es, c->ss[nd - 1], inner, c->es);
    for (int d = nd - 2; d >= 0; d--) {
      idx[d]++;
      so += c->ss[d];
      dof += c->ds[d];
      if (idx[d] < c->dims[d]) break;
      so -= c->ss[d] * c->dims[d];
      dof -= c->ds[d] * c->dims[d];
      idx[d] = 0;
    }
  }
}

#define TILE_LOOP(T)                                                      \
  do {                                                                    \
    T *d_ = (T *)dst;                                                     \
    const T *s_ = (const T *)src;                                         \
    for (int64_t r_ = r0; r_ < r1; r_++)                                  \
      for (int64_t c_ = c0; c_ < c1; c_++) d_[r_ * dR + c_] = s_[r_ + c_ * sC]; \
  } while (0)

/* Batched 2-D transposes: the last two dims (R rows, C cols) with dst stride
 * (dR, 1) and src stride (1, sC). Units are (batch, tile of rows). */
static void sc_tiles(void *p, int64_t b, int64_t e) {
  const scopy *c = p;
  int nd = c->nd;
  int64_t R = c->dims[nd - 2], C = c->dims[nd - 1];
  int64_t dR = c->ds[nd - 2], sC = c->ss[nd - 1];
  int64_t rtiles = (R + SC_TILE - 1) / SC_TILE;
  int64_t es = (int64_t)c->es;
  for (int64_t u = b; u < e; u++) {
    int64_t bi = u / rtiles, rt = u % rtiles;
    int64_t so = 0, dof = 0;
    for (int d = nd - 3; d >= 0; d--) {
      int64_t ix = bi % c->dims[d];
      bi /= c->dims[d];
      so += ix * c->ss[d];
      dof += ix * c->ds[d];
    }
    char *dst = c->dst + dof * es;
    const char *src = c->src + so * es;
    int64_t r0 = rt * SC_TILE, r1 = r0 + SC_TILE < R ? r0 + SC_TILE : R;
    for (int64_t c0 = 0; c0 < C; c0 += SC_TILE) {
      int64_t c1 = c0 + SC_TILE < C ? c0 + SC_TILE : C;
      switch (c->es) {
        case 1: TILE_LOOP(uint8_t); break;
        case 2: TILE_LOOP(uint16_t); break;
        case 4: TILE_LOOP(uint32_t); break;
        case 8: TILE_LOOP(uint64_t); break;
        default:
          for (int64_t r_ = r0; r_ < r1; r_++)
            for (int64_t c_ = c0; c_ < c1; c_++)
              memcpy(dst + (r_ * dR + c_) * es, src + (r_ + c_ * sC) * es, c->es);
      }
    }
  }
}

static void sc_run(loom_pool *pool, scopy *c) {
  for (int i = 0; i < c->nd; i++)
    if (c->dims[i] == 0) return;
  sc_coalesce(c);
  if (c->nd == 0) {
    memcpy(c->dst, c->src, c->es);
    return;
  }
  int nd = c->nd;
  if (nd >= 2 && c->ds[nd - 1] == 1 && c->ss[nd - 2] == 1 && c->ss[nd - 1] != 1) {
    int64_t R = c->dims[nd - 2], C = c->dims[nd - 1];
    int64_t units = prod(c->dims, 0, nd - 2) * ((R + SC_TILE - 1) / SC_TILE);
    int64_t per = SC_TILE * C;
    loom__parallel_for(pool, units, per >= LOOM_PAR_GRAIN ? 1 : LOOM_PAR_GRAIN / per, sc_tiles, c);
    return;
  }
  int64_t inner = c->dims[nd - 1];
  int64_t rows = prod(c->dims, 0, nd - 1);
  loom__parallel_for(pool, rows, inner >= LOOM_PAR_GRAIN ? 1 : LOOM_PAR_GRAIN / inner, sc_rows, c);
}

/* ---------------------------------------------------------------------- */
/* data movement kernels                                                  */
/* ---------------------------------------------------------------------- */

loom_code loom__k_broadcast_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  size_t es = esize(O->dtype);
  if (O->numel == 0) return LOOM_OK;
  if (X->numel == O->numel) {
    cpy(O->data, X->data, (size_t)O->numel * es);
    return LOOM_OK;
  }
  scopy c;
  int nd = O->ndim, off = O->ndim - X->ndim;
  int64_t xs[LOOM_MAX_DIMS];
  cstrides(X->ndim, X->dims, xs);
  c.nd = nd;
  c.es = es;
  c.src = X->data;
  c.dst = O->data;
  cstrides(nd, O->dims, c.ds);
  for (int i = 0; i < nd; i++) {
    c.dims[i] = O->dims[i];
    int xi = i - off;
    c.ss[i] = (xi < 0 || X->dims[xi] == 1) ? 0 : xs[xi];
  }
  sc_run(ctx->pool, &c);
  return LOOM_OK;
}

loom_code loom__k_transpose_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  int64_t xs[LOOM_MAX_DIMS];
  cstrides(X->ndim, X->dims, xs);
  scopy c;
  c.nd = O->ndim;
  c.es = esize(O->dtype);
  c.src = X->data;
  c.dst = O->data;
  cstrides(O->ndim, O->dims, c.ds);
  for (int j = 0; j < O->ndim; j++) {
    c.dims[j] = O->dims[j];
    c.ss[j] = xs[a->axes[j]];
  }
  sc_run(ctx->pool, &c);
  return LOOM_OK;
}

loom_code loom__k_slice_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  size_t es = esize(O->dtype);
  int64_t xs[LOOM_MAX_DIMS];
  cstrides(X->ndim, X->dims, xs);
  int64_t off = 0;
  for (int i = 0; i < X->ndim; i++) off += a->shape[i] * xs[i];
  scopy c;
  c.nd = O->ndim;
  c.es = es;
  c.src = (const char *)X->data + off * (int64_t)es;
  c.dst = O->data;
  cstrides(O->ndim, O->dims, c.ds);
  for (int i = 0; i < O->ndim; i++) {
    c.dims[i] = O->dims[i];
    c.ss[i] = xs[i];
  }
  sc_run(ctx->pool, &c);
  return LOOM_OK;
}

loom_code loom__k_tile_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  int r = X->ndim;
  int64_t xs[LOOM_MAX_DIMS], os[LOOM_MAX_DIMS];
  cstrides(r, X->dims, xs);
  cstrides(r, O->dims, os);
  scopy c;
  c.nd = 2 * r;
  c.es = esize(O->dtype);
  c.src = X->data;
  c.dst = O->data;
  for (int i = 0; i < r; i++) {
    int64_t d = X->dims[i], m = d ? O->dims[i] / d : 0;
    c.dims[2 * i] = m;
    c.ss[2 * i] = 0;
    c.ds[2 * i] = d * os[i];
    c.dims[2 * i + 1] = d;
    c.ss[2 * i + 1] = xs[i];
    c.ds[2 * i + 1] = os[i];
  }
  if (O->numel == 0) return LOOM_OK;
  sc_run(ctx->pool, &c);
  return LOOM_OK;
}

loom_code loom__k_pad_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  size_t es = esize(O->dtype);
  if (O->numel == 0) return LOOM_OK;
  if (O->numel != X->numel) fill_value(ctx->pool, O->data, O->dtype, O->numel, a->alpha);
  int r = X->ndim;
  int64_t os[LOOM_MAX_DIMS];
  cstrides(r, O->dims, os);
  int64_t off = 0;
  for (int i = 0; i < r; i++) off += a->shape[i] * os[i];
  scopy c;
  c.nd = r;
  c.es = es;
  c.src = X->data;
  c.dst = (char *)O->data + off * (int64_t)es;
  cstrides(r, X->dims, c.ss);
  for (int i = 0; i < r; i++) {
    c.dims[i] = X->dims[i];
    c.ds[i] = os[i];
  }
  sc_run(ctx->pool, &c);
  return LOOM_OK;
}

/* ---- concat / pack and split / unpack: outer rows of per-input chunks ---- */
typedef struct {
  const loom_kctx *ctx;
  int64_t outer;
  size_t es;
  int split;
} cat_args;

/* n bytes, n small (a row's chunk of one piece): a few unaligned block moves
 * in place of a library call per row */
typedef char cat_v16 __attribute__((vector_size(16), aligned(1), may_alias));
typedef uint64_t cat_u64 __attribute__((aligned(1), may_alias));
typedef uint32_t cat_u32 __attribute__((aligned(1), may_alias));
static inline void cpy_small(char *restrict d, const char *restrict s, size_t n) { /* n <= 64 */
  if (n >= 32) {
    cat_v16 a = *(const cat_v16 *)s, b = *(const cat_v16 *)(s + 16);
    cat_v16 c = *(const cat_v16 *)(s + n - 32), e = *(const cat_v16 *)(s + n - 16);
    *(cat_v16 *)d = a;
    *(cat_v16 *)(d + 16) = b;
    *(cat_v16 *)(d + n - 32) = c;
    *(cat_v16 *)(d + n - 16) = e;
  } else if (n >= 16) {
    cat_v16 a = *(const cat_v16 *)s, b = *(const cat_v16 *)(s + n - 16);
    *(cat_v16 *)d = a;
    *(cat_v16 *)(d + n - 16) = b;
  } else if (n >= 8) {
    uint64_t a = *(const cat_u64 *)s, b = *(const cat_u64 *)(s + n - 8);
    *(cat_u64 *)d = a;
    *(cat_u64 *)(d + n - 8) = b;
  } else if (n >= 4) {
    uint32_t a = *(const cat_u32 *)s, b = *(const cat_u32 *)(s + n - 4);
    *(cat_u32 *)d = a;
    *(cat_u32 *)(d + n - 4) = b;
  } else {
    for (size_t i = 0; i < n; i++) d[i] = s[i];
  }
}

static void cat_rows(void *p, int64_t b, int64_t e) {
  const cat_args *a = p;
  const loom_kctx *ctx = a->ctx;
  int n = a->split ? ctx->nout : ctx->nin;
  const loom_buf *big = a->split ? ctx->in[0] : ctx->out[0];
  size_t row = (size_t)(big->numel / a->outer) * a->es;
  /* piece by piece: each piece's chunk size is computed once, and small
   * chunks are moved without a library call */
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    const loom_buf *piece = a->split ? ctx->out[i] : ctx->in[i];
    size_t chunk = (size_t)(piece->numel / a->outer) * a->es;
    if (!chunk) continue;
    char *bp = (char *)big->data + (size_t)b * row + off;
    char *pp = (char *)piece->data + (size_t)b * chunk;
    if (chunk <= 64) {
      /* the size class is chosen once per piece (the row loops are then tight) */
#define CAT_LOOP(N)                                                                   \
  do {                                                                                \
    if (a->split)                                                                     \
      for (int64_t o = b; o < e; o++, bp += row, pp += chunk) cpy_small(pp, bp, (N)); \
    else                                                                              \
      for (int64_t o = b; o < e; o++, bp += row, pp += chunk) cpy_small(bp, pp, (N)); \
  } while (0)
      switch (chunk) {
      case 4: CAT_LOOP(4); break;
      case 8: CAT_LOOP(8); break;
      case 16: CAT_LOOP(16); break;
      case 32: CAT_LOOP(32); break;
      default: CAT_LOOP(chunk); break;
      }
#undef CAT_LOOP
    } else {
      if (a->split)
        for (int64_t o = b; o < e; o++, bp += row, pp += chunk) memcpy(pp, bp, chunk);
      else
        for (int64_t o = b; o < e; o++, bp += row, pp += chunk) memcpy(bp, pp, chunk);
    }
    off += chunk;
  }
}

static loom_code cat_run(const loom_kctx *ctx, int split) {
  const loom_buf *big = split ? ctx->in[0] : ctx->out[0];
  if (big->numel == 0) return LOOM_OK;
  int64_t axis = norm_axis(ctx->attrs->axis, big->ndim);
  cat_args a;
  a.ctx = ctx;
  a.outer = prod(big->dims, 0, (int)axis);
  a.es = esize(big->dtype);
  a.split = split;
  int64_t per = big->numel / a.outer;
  loom__parallel_for(ctx->pool, a.outer, per >= LOOM_PAR_GRAIN ? 1 : LOOM_PAR_GRAIN / per, cat_rows, &a);
  return LOOM_OK;
}

loom_code loom__k_concat_any(const loom_kctx *ctx) { return cat_run(ctx, 0); }
loom_code loom__k_split_any(const loom_kctx *ctx) { return cat_run(ctx, 1); }

/* ---- gather ---- */
typedef struct {
  const char *src;
  char *dst;
  const void *idx;
  loom_dtype idt;
  int64_t K, N;
  size_t row; /* bytes per copied row (inner * es) */
} gather_args;

static void gather_rows(void *p, int64_t b, int64_t e) {
  const gather_args *a = p;
  for (int64_t u = b; u < e; u++) {
    int64_t o = u / a->K, k = u % a->K;
    int64_t v = rd_idx(a->idx, a->idt, k);
    cpy(a->dst + (size_t)u * a->row, a->src + (size_t)(o * a->N + v) * a->row, a->row);
  }
}

/* axis 0 of a table: a plain row memcpy loop (the embedding lookup) */
static void gather_rows0(void *p, int64_t b, int64_t e) {
  const gather_args *a = p;
  if (a->idt == LOOM_I32) {
    const int32_t *ix = a->idx;
    for (int64_t k = b; k < e; k++) memcpy(a->dst + (size_t)k * a->row, a->src + (size_t)ix[k] * a->row, a->row);
  } else {
    for (int64_t k = b; k < e; k++)
      memcpy(a->dst + (size_t)k * a->row, a->src + (size_t)rd_idx(a->idx, a->idt, k) * a->row, a->row);
  }
}

loom_code loom__k_gather_any(const loom_kctx *ctx) {
  const loom_buf *P = ctx->in[0], *I = ctx->in[1];
  loom_buf *O = ctx->out[0];
  int axis = (int)norm_axis(ctx->attrs->axis, P->ndim);
  int64_t N = P->dims[axis];
  loom_code rc = check_indices(ctx, I, "indices", N);
  if (rc) return rc;
  if (O->numel == 0) return LOOM_OK;
  size_t es = esize(P->dtype);
  gather_args a;
  a.src = P->data;
  a.dst = O->data;
  a.idx = I->data;
  a.idt = I->dtype;
  a.K = I->numel;
  a.N = N;
  int64_t inner = prod(P->dims, axis + 1, P->ndim);
  int64_t outer = prod(P->dims, 0, axis);
  a.row = (size_t)inner * es;
  int64_t grain = inner >= LOOM_PAR_GRAIN ? 1 : LOOM_PAR_GRAIN / inner;
  if (outer == 1) loom__parallel_for(ctx->pool, a.K, grain, gather_rows0, &a);
  else loom__parallel_for(ctx->pool, outer * a.K, grain, gather_rows, &a);
  return LOOM_OK;
}

/* ---- functional scatter on the first dimension ---- */
typedef struct {
  char *out;
  const char *upd;
  const void *idx;
  loom_dtype idt;
  int64_t K, inner;
} scat_args;

#define SCATTER_ADD_RANGE(T, SUF)                                       \
  static void scatter_add_##SUF(void *p, int64_t b, int64_t e) {        \
    const scat_args *a = p;                                             \
    T *o = (T *)a->out;                                                 \
    const T *u = (const T *)a->upd;                                     \
    for (int64_t k = 0; k < a->K; k++) {                                \
      T *orow = o + rd_idx(a->idx, a->idt, k) * a->inner;               \
      const T *urow = u + k * a->inner;                                 \
      for (int64_t j = b; j < e; j++) orow[j] += urow[j];               \
    }                                                                   \
  }
SCATTER_ADD_RANGE(float, f32)
SCATTER_ADD_RANGE(double, f64)
SCATTER_ADD_RANGE(int32_t, i32)
SCATTER_ADD_RANGE(int64_t, i64)

/* Column chunks for accumulations over k rows: at least 16 columns per chunk
 * (no two threads share a cache line of an output row). */
static int64_t col_grain(int64_t k) {
  int64_t g = k >= LOOM_PAR_GRAIN ? 1 : LOOM_PAR_GRAIN / k;
  return g < 16 ? 16 : g;
}

static loom_code scatter_run(const loom_kctx *ctx, loom_range_fn add) {
  const loom_buf *T = ctx->in[0], *I = ctx->in[1], *U = ctx->in[2];
  loom_buf *O = ctx->out[0];
  size_t es = esize(T->dtype);
  loom_code rc = check_indices(ctx, I, "indices", T->dims[0]);
  if (rc) return rc;
  cpy(O->data, T->data, (size_t)T->numel * es);
  int64_t inner = prod(T->dims, 1, T->ndim);
  if (inner == 0 || I->numel == 0) return LOOM_OK;
  if (add) {
    scat_args a = {O->data, U->data, I->data, I->dtype, I->numel, inner};
    loom__parallel_for(ctx->pool, inner, col_grain(a.K), add, &a);
  } else {
    size_t row = (size_t)inner * es;
    for (int64_t k = 0; k < I->numel; k++)
      memcpy((char *)O->data + (size_t)rd_idx(I->data, I->dtype, k) * row, (const char *)U->data + (size_t)k * row,
             row);
  }
  return LOOM_OK;
}

loom_code loom__k_scatter_add_f32(const loom_kctx *ctx) { return scatter_run(ctx, scatter_add_f32); }
loom_code loom__k_scatter_add_f64(const loom_kctx *ctx) { return scatter_run(ctx, scatter_add_f64); }
loom_code loom__k_scatter_add_i32(const loom_kctx *ctx) { return scatter_run(ctx, scatter_add_i32); }
loom_code loom__k_scatter_add_i64(const loom_kctx *ctx) { return scatter_run(ctx, scatter_add_i64); }
loom_code loom__k_scatter_update_any(const loom_kctx *ctx) { return scatter_run(ctx, NULL); }

/* ---- unsorted segment reductions ---- */
enum { SEG_SUM = 0, SEG_MEAN = 1, SEG_SQRTN = 2 };

#define SEGMENT_KERNELS(T, SUF, SQRT)                                                      \
  static void seg_sum_##SUF(void *p, int64_t b, int64_t e) {                               \
    const scat_args *a = p;                                                                \
    T *o = (T *)a->out;                                                                    \
    const T *d = (const T *)a->upd;                                                        \
    for (int64_t k = 0; k < a->K; k++) {                                                   \
      T *orow = o + rd_idx(a->idx, a->idt, k) * a->inner;                                  \
      const T *drow = d + k * a->inner;                                                    \
      for (int64_t j = b; j < e; j++) orow[j] += drow[j];                                  \
    }                                                                                      \
  }                                                                                        \
  static loom_code seg_run_##SUF(const loom_kctx *ctx, int mode) {                         \
    const loom_buf *D = ctx->in[0], *I = ctx->in[1];                                       \
    loom_buf *O = ctx->out[0];                                                             \
    int64_t nseg = O->dims[0];                                                             \
    loom_code rc = check_indices(ctx, I, "segment_ids", nseg);                             \
    if (rc) return rc;                                                                     \
    if (O->numel) memset(O->data, 0, (size_t)O->numel * sizeof(T));                        \
    int64_t inner = prod(D->dims, 1, D->ndim);                                             \
    if (inner == 0) return LOOM_OK;                                                        \
    if (I->numel) {                                                                        \
      scat_args a = {O->data, D->data, I->data, I->dtype, I->numel, inner};                \
      loom__parallel_for(ctx->pool, inner, col_grain(a.K), seg_sum_##SUF, &a);             \
    }                                                                                      \
    if (mode == SEG_SUM) return LOOM_OK;                                                   \
    int64_t *cnt = ctx->ws;                                                                \
    for (int64_t s = 0; s < nseg; s++) cnt[s] = 0;                                         \
    for (int64_t k = 0; k < I->numel; k++) cnt[rd_idx(I->data, I->dtype, k)]++;            \
    T *o = O->data;                                                                        \
    for (int64_t s = 0; s < nseg; s++) {                                                   \
      if (cnt[s] <= 1) continue;                                                           \
      T div = mode == SEG_MEAN ? (T)cnt[s] : SQRT((T)cnt[s]);                              \
      T *orow = o + s * inner;                                                             \
      for (int64_t j = 0; j < inner; j++) orow[j] /= div;                                  \
    }                                                                                      \
    return LOOM_OK;                                                                        \
  }

#define NO_SQRT(x) (x)
SEGMENT_KERNELS(float, f32, sqrtf)
SEGMENT_KERNELS(double, f64, sqrt)
SEGMENT_KERNELS(int32_t, i32, NO_SQRT)
SEGMENT_KERNELS(int64_t, i64, NO_SQRT)

loom_code loom__k_segment_sum_f32(const loom_kctx *ctx) { return seg_run_f32(ctx, SEG_SUM); }
loom_code loom__k_segment_sum_f64(const loom_kctx *ctx) { return seg_run_f64(ctx, SEG_SUM); }
loom_code loom__k_segment_sum_i32(const loom_kctx *ctx) { return seg_run_i32(ctx, SEG_SUM); }
loom_code loom__k_segment_sum_i64(const loom_kctx *ctx) { return seg_run_i64(ctx, SEG_SUM); }
loom_code loom__k_segment_mean_f32(const loom_kctx *ctx) { return seg_run_f32(ctx, SEG_MEAN); }
loom_code loom__k_segment_mean_f64(const loom_kctx *ctx) { return seg_run_f64(ctx, SEG_MEAN); }
loom_code loom__k_segment_sqrtn_f32(const loom_kctx *ctx) { return seg_run_f32(ctx, SEG_SQRTN); }
loom_code loom__k_segment_sqrtn_f64(const loom_kctx *ctx) { return seg_run_f64(ctx, SEG_SQRTN); }

/* ---- fills ---- */
loom_code loom__k_fill_any(const loom_kctx *ctx) {
  loom_buf *O = ctx->out[0];
  replicate(ctx->pool, O->data, esize(O->dtype), ctx->in[0]->data, O->numel);
  return LOOM_OK;
}

loom_code loom__k_zeros_like_any(const loom_kctx *ctx) {
  loom_buf *O = ctx->out[0];
  if (O->numel) memset(O->data, 0, (size_t)O->numel * esize(O->dtype));
  return LOOM_OK;
}

loom_code loom__k_ones_like_any(const loom_kctx *ctx) {
  loom_buf *O = ctx->out[0];
  fill_value(ctx->pool, O->data, O->dtype, O->numel, 1.0);
  return LOOM_OK;
}

/* ---- one-hot ---- */
loom_code loom__k_one_hot_any(const loom_kctx *ctx) {
  const loom_buf *I = ctx->in[0];
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  if (O->numel == 0) return LOOM_OK;
  int64_t depth = a->num;
  int axis = a->axis < 0 ? I->ndim : (int)a->axis;
  int64_t outer = prod(I->dims, 0, axis), inner = prod(I->dims, axis, I->ndim);
  size_t es = esize(O->dtype);
  if (O->dtype == LOOM_F32 && (I->dtype == LOOM_I32 || I->dtype == LOOM_I64)) {
    /* the common case (float one-hot of int ids): plain stores */
    float *o = O->data, off = (float)a->beta, on = (float)a->alpha;
    if (O->numel >= (1 << 18)) fill_value(ctx->pool, o, LOOM_F32, O->numel, a->beta); /* big: in parallel */
    else if (off == 0.0f && !signbit(off)) memset(o, 0, (size_t)O->numel * sizeof(float));
    else
      for (int64_t k = 0; k < O->numel; k++) o[k] = off;
    for (int64_t x = 0; x < outer; x++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t v = rd_idx(I->data, I->dtype, x * inner + i);
        if (v >= 0 && v < depth) o[(x * depth + v) * inner + i] = on;
      }
    return LOOM_OK;
  }
  fill_value(ctx->pool, O->data, O->dtype, O->numel, a->beta);
  unsigned char on[8];
  value_bytes(O->dtype, a->alpha, on);
  char *o = O->data;
  for (int64_t x = 0; x < outer; x++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t v = rd_idx(I->data, I->dtype, x * inner + i);
      if (v >= 0 && v < depth) memcpy(o + (size_t)((x * depth + v) * inner + i) * es, on, es);
    }
  return LOOM_OK;
}

/* ---- cast ---- */
typedef struct {
  const void *src;
  void *dst;
  loom_dtype in, out;
} cast_args;

#define CAST_LOOP(TI, TO, CONV)                          \
  do {                                                   \
    const TI *s_ = (const TI *)a->src;                   \
    TO *d_ = (TO *)a->dst;                               \
    for (int64_t i_ = b; i_ < e; i_++) d_[i_] = CONV(s_[i_]); \
  } while (0)

#define CAST_FROM(TO, CI, CF)                                   \
  switch (a->in) {                                              \
    case LOOM_F32: CAST_LOOP(float, TO, CF); break;             \
    case LOOM_F64: CAST_LOOP(double, TO, CF); break;            \
    case LOOM_I32: CAST_LOOP(int32_t, TO, CI); break;           \
    case LOOM_I64: CAST_LOOP(int64_t, TO, CI); break;           \
    case LOOM_U8:                                               \
    case LOOM_BOOL: CAST_LOOP(uint8_t, TO, CI); break;          \
    default: break;                                             \
  }

#define C_F32(x) ((float)(x))
#define C_F64(x) ((double)(x))
#define C_I32(x) ((int32_t)(x))
#define C_I64(x) ((int64_t)(x))
#define C_U8(x) ((uint8_t)(x))
#define C_BOOL(x) ((uint8_t)((x) != 0))
#define F_I32(x) d2i32((double)(x))
#define F_I64(x) d2i64((double)(x))
#define F_U8(x) d2u8((double)(x))

static void cast_range(void *p, int64_t b, int64_t e) {
  const cast_args *a = p;
  switch (a->out) {
    case LOOM_F32: CAST_FROM(float, C_F32, C_F32); break;
    case LOOM_F64: CAST_FROM(double, C_F64, C_F64); break;
    case LOOM_I32: CAST_FROM(int32_t, C_I32, F_I32); break;
    case LOOM_I64: CAST_FROM(int64_t, C_I64, F_I64); break;
    case LOOM_U8: CAST_FROM(uint8_t, C_U8, F_U8); break;
    case LOOM_BOOL: CAST_FROM(uint8_t, C_BOOL, C_BOOL); break;
    default: break;
  }
}

loom_code loom__k_cast_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  if (!esize(X->dtype) || !esize(O->dtype))
    return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "cannot cast %s to %s", loom_dtype_name(X->dtype),
                           loom_dtype_name(O->dtype));
  if (O->numel == 0) return LOOM_OK;
  if (X->dtype == O->dtype) {
    cpy(O->data, X->data, (size_t)O->numel * esize(O->dtype));
    return LOOM_OK;
  }
  cast_args a = {X->data, O->data, X->dtype, O->dtype};
  loom__parallel_for(ctx->pool, O->numel, LOOM_PAR_GRAIN, cast_range, &a);
  return LOOM_OK;
}

/* ---- shape, range ---- */
loom_code loom__k_shape_any(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_buf *O = ctx->out[0];
  for (int i = 0; i < X->ndim; i++) {
    if (O->dtype == LOOM_I64) ((int64_t *)O->data)[i] = X->dims[i];
    else ((int32_t *)O->data)[i] = (int32_t)X->dims[i];
  }
  return LOOM_OK;
}

loom_code loom__k_range_any(const loom_kctx *ctx) {
  loom_buf *O = ctx->out[0];
  const loom_attrs *a = ctx->attrs;
  int64_t n = O->numel;
  switch (O->dtype) {
    case LOOM_F32: {
      float *o = O->data;
      for (int64_t i = 0; i < n; i++) o[i] = (float)(a->start + (double)i * a->delta);
      break;
    }
    case LOOM_F64: {
      double *o = O->data;
      for (int64_t i = 0; i < n; i++) o[i] = a->start + (double)i * a->delta;
      break;
    }
    case LOOM_I32: {
      int32_t *o = O->data;
      int64_t s = (int64_t)a->start, d = (int64_t)a->delta;
      for (int64_t i = 0; i < n; i++) o[i] = (int32_t)(s + i * d);
      break;
    }
    case LOOM_I64: {
      int64_t *o = O->data;
      int64_t s = (int64_t)a->start, d = (int64_t)a->delta;
      for (int64_t i = 0; i < n; i++) o[i] = s + i * d;
      break;
    }
    default:
      return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "range of %s is not supported", loom_dtype_name(O->dtype));
  }
  return LOOM_OK;
}

/* ---- top-k: a size-k min-heap per row kept in the output row, then heap-sorted ---- */
typedef struct {
  const void *x;
  void *v;
  int32_t *ix;
  int64_t n, k;
} topk_args;

/* NaN ranks above everything (a total order); ties: lower index ranks higher */
#define GT_FLT(a, b) ((a) > (b) || ((a) != (a) && (b) == (b)))
#define GT_INT(a, b) ((a) > (b))

#define TOPK_KERNEL(T, SUF, GT)                                                          \
  /* a ranks below b */                                                                  \
  static inline int worse_##SUF(T va, int32_t ia, T vb, int32_t ib) {                    \
    return GT(vb, va) || (!GT(va, vb) && ia > ib);                                       \
  }                                                                                      \
  static void sift_##SUF(T *v, int32_t *ix, int64_t n, int64_t i) {                      \
    for (;;) {                                                                           \
      int64_t l = 2 * i + 1, r = l + 1, m = i;                                           \
      if (l < n && worse_##SUF(v[l], ix[l], v[m], ix[m])) m = l;                         \
      if (r < n && worse_##SUF(v[r], ix[r], v[m], ix[m])) m = r;                         \
      if (m == i) return;                                                                \
      T tv = v[i];                                                                       \
      v[i] = v[m];                                                                       \
      v[m] = tv;                                                                         \
      int32_t ti = ix[i];                                                                \
      ix[i] = ix[m];                                                                     \
      ix[m] = ti;                                                                        \
      i = m;                                                                             \
    }                                                                                    \
  }                                                                                      \
  static void topk_rows_##SUF(void *p, int64_t b, int64_t e) {                           \
    const topk_args *a = p;                                                              \
    int64_t n = a->n, k = a->k;                                                          \
    for (int64_t row = b; row < e; row++) {                                              \
      const T *x = (const T *)a->x + row * n;                                            \
      T *v = (T *)a->v + row * k;                                                        \
      int32_t *ix = a->ix + row * k;                                                     \
      for (int64_t j = 0; j < k; j++) {                                                  \
        v[j] = x[j];                                                                     \
        ix[j] = (int32_t)j;                                                              \
      }                                                                                  \
      for (int64_t j = k / 2 - 1; j >= 0; j--) sift_##SUF(v, ix, k, j);                  \
      for (int64_t j = k; j < n; j++) {                                                  \
        if (!GT(x[j], v[0])) continue; /* equal: the heap's lower index wins */          \
        v[0] = x[j];                                                                     \
        ix[0] = (int32_t)j;                                                              \
        sift_##SUF(v, ix, k, 0);                                                         \
      }                                                                                  \
      for (int64_t end = k - 1; end > 0; end--) {                                        \
        T tv = v[0];                                                                     \
        v[0] = v[end];                                                                   \
        v[end] = tv;                                                                     \
        int32_t ti = ix[0];                                                              \
        ix[0] = ix[end];                                                                 \
        ix[end] = ti;                                                                    \
        sift_##SUF(v, ix, end, 0);                                                       \
      }                                                                                  \
    }                                                                                    \
  }                                                                                      \
  loom_code loom__k_top_k_##SUF(const loom_kctx *ctx) {                                  \
    const loom_buf *X = ctx->in[0];                                                      \
    loom_buf *V = ctx->out[0], *I = ctx->out[1];                                         \
    topk_args a;                                                                         \
    a.x = X->data;                                                                       \
    a.v = V->data;                                                                       \
    a.ix = I->data;                                                                      \
    a.n = X->dims[X->ndim - 1];                                                          \
    a.k = V->dims[V->ndim - 1];                                                          \
    if (a.k == 0 || V->numel == 0) return LOOM_OK;                                       \
    int64_t rows = V->numel / a.k;                                                       \
    loom__parallel_for(ctx->pool, rows, a.n >= LOOM_PAR_GRAIN / 8 ? 1 : LOOM_PAR_GRAIN / 8 / a.n, \
                       topk_rows_##SUF, &a);                                             \
    return LOOM_OK;                                                                      \
  }

TOPK_KERNEL(float, f32, GT_FLT)
TOPK_KERNEL(double, f64, GT_FLT)
TOPK_KERNEL(int32_t, i32, GT_INT)
TOPK_KERNEL(int64_t, i64, GT_INT)
TOPK_KERNEL(uint8_t, u8, GT_INT)
