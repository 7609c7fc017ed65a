/* CPU kernels of the feature family. See ops/feature.c for the ops'
 * semantics and attributes; TF 2.15's kernels are the reference for every
 * value (tests/test_feature_ops.c checks them against TF's output). */
#include <string.h>
#include "kernels/cpu/feature.h"
#include "base/fingerprint.h"

/* ---- Bucketize: std::upper_bound over float32 boundaries, comparing the
 * value in its own type against the float (C's usual arithmetic
 * conversions, as C++'s: an int32/int64 value becomes a float, a float
 * boundary becomes a double against a double) ---- */
#define BUCKETIZE(SUF, T)                                                                                   \
  loom_code loom__k_bucketize_##SUF(const loom_kctx *ctx) {                                                 \
    const T *x = ctx->in[0]->data;                                                                          \
    const float *b = ctx->in[1]->data;                                                                      \
    int64_t nb = ctx->in[1]->numel;                                                                         \
    int32_t *o = ctx->out[0]->data;                                                                         \
    for (int64_t j = 1; j < nb; j++)                                                                        \
      if (!(b[j - 1] <= b[j]))                                                                              \
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,                                              \
                               "boundaries must be sorted ascending, but boundaries[%lld] = %g follows %g", \
                               (long long)j, (double)b[j], (double)b[j - 1]);                               \
    if (nb <= 32) {                                                                                         \
      /* short lists: upper_bound = how many boundaries are not above v (sorted), branch-free */            \
      for (int64_t i = 0; i < ctx->in[0]->numel; i++) {                                                     \
        T v = x[i];                                                                                         \
        int32_t c = 0;                                                                                      \
        for (int64_t j = 0; j < nb; j++) c += !(v < b[j]);                                                  \
        o[i] = c;                                                                                           \
      }                                                                                                     \
      return LOOM_OK;                                                                                       \
    }                                                                                                       \
    for (int64_t i = 0; i < ctx->in[0]->numel; i++) {                                                       \
      T v = x[i];                                                                                           \
      int64_t lo = 0, hi = nb;                                                                              \
      while (lo < hi) {                                                                                     \
        int64_t mid = lo + (hi - lo) / 2;                                                                   \
        if (v < b[mid]) hi = mid;                                                                           \
        else lo = mid + 1;                                                                                  \
      }                                                                                                     \
      o[i] = (int32_t)lo;                                                                                   \
    }                                                                                                       \
    return LOOM_OK;                                                                                         \
  }
BUCKETIZE(f32, float)
BUCKETIZE(f64, double)
BUCKETIZE(i32, int32_t)
BUCKETIZE(i64, int64_t)

static inline int64_t rd_int(const loom_buf *b, int64_t i) {
  return b->dtype == LOOM_I32 ? (int64_t)((const int32_t *)b->data)[i] : ((const int64_t *)b->data)[i];
}

loom_code loom__k_as_string_int(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  loom_tstring *o = ctx->out[0]->data;
  if (X->numel == 0) return LOOM_OK;
  if (!ctx->strings)
    return loom_status_set(ctx->st, LOOM_FAILED_PRECONDITION,
                           "AsString outputs strings and needs a string arena (it runs only in a session)");
  size_t total = 0;
  char buf[24];
  for (int64_t i = 0; i < X->numel; i++) total += loom__int_text(rd_int(X, i), buf);
  char *p = loom__strarena_alloc(ctx->strings, total);
  if (!p) return loom_status_set(ctx->st, LOOM_RESOURCE_EXHAUSTED, "out of memory for %zu bytes of strings", total);
  for (int64_t i = 0; i < X->numel; i++) {
    size_t n = loom__int_text(rd_int(X, i), buf);
    memcpy(p, buf, n);
    o[i].ptr = p;
    o[i].len = n;
    p += n;
  }
  return LOOM_OK;
}

/* The bytes of a string element a few iterations ahead (batches of
 * strings are often far from the cache) */
static inline void prefetch_text(const loom_tstring *s) {
  if (s->len) __builtin_prefetch(s->ptr);
}

/* Fingerprint64 of element i of a string/int32/int64 buffer (ints: of their decimal text). */
static inline uint64_t fp_text(const loom_buf *b, int64_t i) {
  if (b->dtype == LOOM_STRING) {
    const loom_tstring *s = (const loom_tstring *)b->data + i;
    return loom__fp64(s->len ? s->ptr : "", s->len);
  }
  return loom__fp64_int(rd_int(b, i));
}

loom_code loom__k_hash_bucket_fast(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  int64_t *o = ctx->out[0]->data;
  uint64_t nb = ctx->attrs->seed;
  if (nb == 0) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "num_buckets must be >= 1");
  const loom_fastmod fm = loom__fastmod_init(nb);
  if (X->dtype == LOOM_STRING) {
    const loom_tstring *xs = X->data;
    for (int64_t i = 0; i < X->numel; i++) {
      if (i + 8 < X->numel) prefetch_text(xs + i + 8);
      o[i] = (int64_t)loom__fastmod(loom__fp64(xs[i].len ? xs[i].ptr : "", xs[i].len), &fm);
    }
    return LOOM_OK;
  }
  for (int64_t i = 0; i < X->numel; i++) o[i] = (int64_t)loom__fastmod(fp_text(X, i), &fm);
  return LOOM_OK;
}

/* key a == b, n bytes each (n > 16 or n < 4: the 4..16 case compares words) */
static inline int key_eq(const uint8_t *a, const uint8_t *b, size_t n) {
  if (n < 4) {
    for (size_t i = 0; i < n; i++)
      if (a[i] != b[i]) return 0;
    return 1;
  }
  return !memcmp(a, b, n);
}

loom_code loom__k_vocab_lookup(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0], *K = ctx->in[1], *I = ctx->in[2];
  int64_t *o = ctx->out[0]->data;
  const int64_t *idx = I->data;
  int64_t n = K->numel, cap = I->numel - 1;
  uint64_t oov = ctx->attrs->seed;
  int64_t dflt = (int64_t)ctx->attrs->seed2;
  int str = X->dtype == LOOM_STRING;
  if ((str != (K->dtype == LOOM_STRING)) || (!str && K->dtype != LOOM_I64))
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "keys of %s do not match a vocabulary of %s",
                           loom_dtype_name(X->dtype), loom_dtype_name(K->dtype));
  if (cap < 1 || (cap & (cap - 1)) || cap <= n)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT,
                           "the vocabulary index has %lld slots for %lld keys (needs a power of two above the key count, "
                           "and the seed)",
                           (long long)cap, (long long)n);
  const uint64_t mask = (uint64_t)(cap - 1), seed = (uint64_t)idx[cap];
  const loom_tstring *ks = K->data;
  const int64_t *ki = K->data;
  for (int64_t i = 0; i < X->numel; i++) {
    const loom_tstring *xs = str ? (const loom_tstring *)X->data + i : NULL;
    if (str) {
      /* the common case first, straight-line: a key of 4..16 bytes found in
       * its first slot (the builder lays small vocabularies out so) */
      const size_t len = xs->len;
      if (len >= 4 && len <= 16) {
        uint64_t wa, wb;
        loom__vocab_words((const uint8_t *)xs->ptr, len, &wa, &wb);
        int64_t p = idx[loom__vocab_slot(loom__vocab_hash_words(wa, wb, len, seed), cap)];
        if (p >= 0 && p < n && ks[p].len == len && (!oov || p != dflt)) {
          uint64_t ka, kb;
          loom__vocab_words((const uint8_t *)ks[p].ptr, len, &ka, &kb);
          if (!((wa ^ ka) | (wb ^ kb))) {
            o[i] = p;
            continue;
          }
        }
      } else if (len >= 1 && len <= 3) {
        /* 1..3 bytes (category codes: "D", "SI2"): the hash's word (first,
         * middle and last byte) holds every byte, so it is also the compare */
        const uint8_t *xb = (const uint8_t *)xs->ptr;
        const uint64_t w = (uint64_t)xb[0] | (uint64_t)xb[len >> 1] << 8 | (uint64_t)xb[len - 1] << 16;
        int64_t p = idx[loom__vocab_slot(loom__vocab_hash_str(xb, len, seed), cap)];
        if (p >= 0 && p < n && ks[p].len == len && (!oov || p != dflt)) {
          const uint8_t *kb = (const uint8_t *)ks[p].ptr;
          if (w == ((uint64_t)kb[0] | (uint64_t)kb[len >> 1] << 8 | (uint64_t)kb[len - 1] << 16)) {
            o[i] = p;
            continue;
          }
        }
      } else if (len > 16 && len <= 32) {
        uint64_t w[4], kw[4];
        loom__vocab_words4((const uint8_t *)xs->ptr, len, w);
        int64_t p = idx[loom__vocab_slot(loom__vocab_hash_words4(w, len, seed), cap)];
        if (p >= 0 && p < n && ks[p].len == len && (!oov || p != dflt)) {
          loom__vocab_words4((const uint8_t *)ks[p].ptr, len, kw);
          if (!((w[0] ^ kw[0]) | (w[1] ^ kw[1]) | (w[2] ^ kw[2]) | (w[3] ^ kw[3]))) {
            o[i] = p;
            continue;
          }
        }
      }
    }
    const uint8_t *xp = str && xs->len ? (const uint8_t *)xs->ptr : (const uint8_t *)"";
    int64_t xv = str ? 0 : rd_int(X, i);
    int64_t found = -1;
    if (str && xs->len >= 4 && xs->len <= 16) {
      /* short keys (most): hash and compare the same four words, no branch on the length */
      const size_t len = xs->len;
      uint64_t wa, wb, ka, kb;
      loom__vocab_words(xp, len, &wa, &wb);
      uint64_t slot = loom__vocab_slot(loom__vocab_hash_words(wa, wb, len, seed), cap);
      for (int64_t probe = 0; probe < cap; probe++, slot = (slot + 1) & mask) {
        int64_t p = idx[slot];
        if (p < 0) break;
        if (p >= n)
          return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "the vocabulary index holds position %lld of %lld keys",
                                 (long long)p, (long long)n);
        if (ks[p].len != len) continue;
        loom__vocab_words((const uint8_t *)ks[p].ptr, len, &ka, &kb);
        if (!((wa ^ ka) | (wb ^ kb))) {
          found = p;
          break;
        }
      }
    } else {
      uint64_t h = str ? loom__vocab_hash_str(xp, xs->len, seed) : loom__vocab_hash_int(xv, seed);
      uint64_t slot = loom__vocab_slot(h, cap);
      for (int64_t probe = 0; probe < cap; probe++, slot = (slot + 1) & mask) {
        int64_t p = idx[slot];
        if (p < 0) break;
        if (p >= n)
          return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "the vocabulary index holds position %lld of %lld keys",
                                 (long long)p, (long long)n);
        if (str ? (ks[p].len == xs->len && (!xs->len || key_eq((const uint8_t *)ks[p].ptr, xp, xs->len))) : ki[p] == xv) {
          found = p;
          break;
        }
      }
    }
    if (oov) {
      /* TF's IdTableWithHashBuckets: a table miss (the table's default) goes
       * to a hash bucket, Fingerprint64 of the key's text */
      if (found >= 0 && found != dflt) o[i] = found;
      else o[i] = n + (int64_t)((str ? loom__fp64(xp, xs->len) : loom__fp64_int(xv)) % oov);
    } else if (found < 0 && dflt == INT64_MIN) { /* LOOM_VOCAB_MISS_FAILS */
      if (str)
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "'%.*s' (element %lld) is not in the vocabulary",
                               (int)(xs->len > 200 ? 200 : xs->len), xs->len ? xs->ptr : "", (long long)i);
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "%lld (element %lld) is not in the vocabulary",
                             (long long)xv, (long long)i);
    } else {
      o[i] = found >= 0 ? found : dflt;
    }
  }
  return LOOM_OK;
}

loom_code loom__k_check_ids(const loom_kctx *ctx) {
  const loom_buf *X = ctx->in[0];
  int64_t *o = ctx->out[0]->data;
  int64_t nb = (int64_t)ctx->attrs->seed, dflt = (int64_t)ctx->attrs->seed2;
  int has_default = ctx->attrs->keepdims;
  for (int64_t i = 0; i < X->numel; i++) {
    int64_t v = rd_int(X, i);
    if (v >= 0 && v < nb) o[i] = v;
    else if (has_default) o[i] = dflt;
    else
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "id %lld at position %lld is not in [0, %lld)", (long long)v,
                             (long long)i, (long long)nb);
  }
  return LOOM_OK;
}

/* ---- SparseCrossHashed ---- */
size_t loom__ws_cross_hashed(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                             const loom_buf *const *out) {
  size_t n = 0;
  for (int i = 0; i + 1 < nin; i += 2) n += (size_t)in[i]->numel;
  return (n + 2 * (size_t)(nin / 2) + 1) * sizeof(uint64_t);
}

loom_code loom__k_cross_hashed(const loom_kctx *ctx) {
  int k = ctx->nin / 2;
  uint64_t nbk = ctx->attrs->seed2, key = ctx->attrs->seed;
  int64_t *ov = ctx->out[0]->data, *os = ctx->out[1]->data;
  int64_t nrows = ctx->in[1]->numel - 1;
  if (nbk == 0) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "num_buckets must be >= 1");
  const loom_fastmod fm = loom__fastmod_init(nbk);
  if (ctx->out[1]->numel != nrows + 1)
    return loom_status_set(ctx->st, LOOM_INTERNAL, "output row_splits has %lld entries for %lld rows",
                           (long long)ctx->out[1]->numel, (long long)nrows);
  /* workspace: per-input feature hashes, then k positions and k row starts */
  uint64_t *f = ctx->ws;
  uint64_t *base[64];
  if (k > 64) return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "at most 64 inputs can be crossed, got %d", k);
  size_t off = 0;
  int one_each = 1;
  for (int j = 0; j < k; j++) {
    const loom_buf *V = ctx->in[2 * j], *S = ctx->in[2 * j + 1];
    const int64_t *sp = S->data;
    if (S->numel != nrows + 1 || sp[0] != 0 || sp[nrows] != V->numel)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "input %d: row_splits do not match its values", j);
    for (int64_t r = 0; r < nrows; r++) {
      if (sp[r + 1] < sp[r])
        return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "input %d: row_splits decrease at row %lld", j,
                               (long long)r);
      one_each &= sp[r + 1] == r + 1;
    }
    base[j] = f + off;
    if (V->dtype == LOOM_STRING) {
      const loom_tstring *vs = V->data;
      for (int64_t i = 0; i < V->numel; i++) {
        if (i + 8 < V->numel) prefetch_text(vs + i + 8);
        base[j][i] = loom__fp64(vs[i].len ? vs[i].ptr : "", vs[i].len);
      }
    } else {
      for (int64_t i = 0; i < V->numel; i++) base[j][i] = (uint64_t)rd_int(V, i);
    }
    off += (size_t)V->numel;
  }
  int64_t *pos = (int64_t *)(f + off), *start = pos + k;
  int64_t n = 0, cap = ctx->out[0]->numel;
  os[0] = 0;
  if (one_each && cap == nrows) {
    /* one value per row in every input (dense features): one cross per row */
    for (int64_t r = 0; r < nrows; r++) {
      uint64_t h = key;
      for (int j = 0; j < k; j++) h = loom__fp_cat64(h, base[j][r]);
      ov[r] = (int64_t)loom__fastmod(h, &fm);
      os[r + 1] = r + 1;
    }
    return LOOM_OK;
  }
  for (int64_t r = 0; r < nrows; r++) {
    int empty = 0;
    for (int j = 0; j < k; j++) {
      const int64_t *sp = ctx->in[2 * j + 1]->data;
      start[j] = sp[r];
      pos[j] = 0;
      if (sp[r + 1] == sp[r]) empty = 1;
    }
    while (!empty) {
      if (n >= cap) return loom_status_set(ctx->st, LOOM_INTERNAL, "more crossed values than the output holds");
      uint64_t h = key;
      for (int j = 0; j < k; j++) h = loom__fp_cat64(h, base[j][start[j] + pos[j]]);
      ov[n++] = (int64_t)loom__fastmod(h, &fm);
      /* next combination: the last input varies fastest (TF's ProductIterator) */
      int j = k - 1;
      for (; j >= 0; j--) {
        const int64_t *sp = ctx->in[2 * j + 1]->data;
        if (++pos[j] < sp[r + 1] - sp[r]) break;
        pos[j] = 0;
      }
      if (j < 0) break;
    }
    os[r + 1] = n;
  }
  if (n != cap) return loom_status_set(ctx->st, LOOM_INTERNAL, "%lld crossed values for an output of %lld", (long long)n, (long long)cap);
  return LOOM_OK;
}
