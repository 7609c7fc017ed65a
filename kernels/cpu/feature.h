/* CPU kernels of the feature family (ops/feature.c): hashing, bucketizing,
 * vocabulary lookup, id checks, hashed crosses. Attribute use is listed in
 * ops/feature.c. */
#ifndef LOOM_KERNELS_CPU_FEATURE_H
#define LOOM_KERNELS_CPU_FEATURE_H
#include "kernels/kernel.h"
#include "base/fingerprint.h"

loom_code loom__k_bucketize_f32(const loom_kctx *ctx);
loom_code loom__k_bucketize_f64(const loom_kctx *ctx);
loom_code loom__k_bucketize_i32(const loom_kctx *ctx);
loom_code loom__k_bucketize_i64(const loom_kctx *ctx);
/* int32/int64 -> decimal text in ctx->strings (host pass only) */
loom_code loom__k_as_string_int(const loom_kctx *ctx);
/* string/int32/int64 -> Fingerprint64(text) % attrs.seed */
loom_code loom__k_hash_bucket_fast(const loom_kctx *ctx);
/* (x, keys, index) -> ids; x string/int32/int64 */
loom_code loom__k_vocab_lookup(const loom_kctx *ctx);
loom_code loom__k_check_ids(const loom_kctx *ctx);
/* (values_0, splits_0, ..., values_k-1, splits_k-1) -> (values, splits) */
loom_code loom__k_cross_hashed(const loom_kctx *ctx);
size_t loom__ws_cross_hashed(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                             const loom_buf *const *out);

/* Slot in a vocabulary index (open addressing, linear probing, `cap` a
 * power of two, entries = key positions or -1) where probing for hash h
 * starts. Shared with the builder that makes the index (ops/feature.c). */
static inline uint64_t loom__vocab_slot(uint64_t h, int64_t cap) { return h & (uint64_t)(cap - 1); }
/* The vocabulary index (a Const input of VocabLookup, made by the builder
 * in ops/feature.c): cap + 1 int64 entries, cap a power of two > n; slots
 * [0, cap) hold key positions or -1 (empty), probed linearly from
 * loom__vocab_hash_*(key, seed) & (cap - 1); entry cap holds the seed (the
 * builder picks one that puts every key in its first slot when it can).
 * The index hashes (graph-resident indexes only: the builder in
 * ops/feature.c and the kernel use the same functions; nothing persisted
 * outside a graph depends on them). Cheap: a few loads and multiplies,
 * little-endian loads so an index means the same on every host. */
static inline uint64_t loom__vocab_mix(uint64_t h) {
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  return h;
}
/* The 4 overlapping 32-bit words that cover a key of 4..16 bytes, at 0, t,
 * n - 4 - t and n - 4 with t = 0 (n <= 8) or (n - 7) / 2 (no gap between
 * words): loads without a branch on the length. */
static inline void loom__vocab_words(const uint8_t *s, size_t n, uint64_t *a, uint64_t *b) {
  size_t t = ((n - 7) >> 1) & (0 - (size_t)(n > 8));
  *a = loom__fp_ld32(s) | loom__fp_ld32(s + t) << 32;
  *b = loom__fp_ld32(s + n - 4 - t) | loom__fp_ld32(s + n - 4) << 32;
}
static inline uint64_t loom__vocab_hash_words(uint64_t a, uint64_t b, size_t n, uint64_t seed) {
  return loom__vocab_mix((a ^ seed ^ 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull +
                         (b ^ (uint64_t)n) * 0xd6e8feb86659fd93ull);
}
/* Keys of 17..32 bytes: 4 overlapping 64-bit words at 0, t, n - 8 - t,
 * n - 8, t = (n - 15) / 2 (no gap between words). */
static inline void loom__vocab_words4(const uint8_t *s, size_t n, uint64_t w[4]) {
  size_t t = (n - 15) >> 1;
  w[0] = loom__fp_ld64(s);
  w[1] = loom__fp_ld64(s + t);
  w[2] = loom__fp_ld64(s + n - 8 - t);
  w[3] = loom__fp_ld64(s + n - 8);
}
static inline uint64_t loom__vocab_hash_words4(const uint64_t w[4], size_t n, uint64_t seed) {
  return loom__vocab_mix((w[0] ^ seed ^ 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull +
                         (w[3] ^ (uint64_t)n) * 0xd6e8feb86659fd93ull + (w[1] * 0xc2b2ae3d27d4eb4full ^ w[2]));
}
static inline uint64_t loom__vocab_hash_str(const void *data, size_t n, uint64_t seed) {
  const uint8_t *s = data;
  if (n >= 4 && n <= 16) {
    uint64_t a, b;
    loom__vocab_words(s, n, &a, &b);
    return loom__vocab_hash_words(a, b, n, seed);
  }
  if (n > 16 && n <= 32) {
    uint64_t w[4];
    loom__vocab_words4(s, n, w);
    return loom__vocab_hash_words4(w, n, seed);
  }
  uint64_t a, b;
  if (n > 32) {
    a = loom__fp_ld64(s);
    b = loom__fp_ld64(s + n - 8);
    for (size_t i = 8; i + 8 < n; i += 8) a = (a ^ loom__fp_ld64(s + i)) * 0x9e3779b97f4a7c15ull;
  } else if (n > 0) {
    a = (uint64_t)s[0] | (uint64_t)s[n >> 1] << 8 | (uint64_t)s[n - 1] << 16;
    b = 0;
  } else {
    a = b = 0;
  }
  return loom__vocab_mix((a ^ seed ^ 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull + (b ^ (uint64_t)n) * 0xd6e8feb86659fd93ull);
}
static inline uint64_t loom__vocab_hash_int(int64_t v, uint64_t seed) {
  return loom__vocab_mix(((uint64_t)v ^ seed ^ 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull);
}

#endif
