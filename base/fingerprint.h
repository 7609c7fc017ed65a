/* base/fingerprint.h - FarmHash Fingerprint64 (farmhashna::Hash64, the
 * hash TF's Fingerprint64 and StringToHashBucketFast use) and TF's
 * FingerprintCat64. The public entry points are loom_fingerprint64 and
 * loom_fingerprint_cat64 (loom_sparse.h); kernels call these inline
 * versions. Internal header (not installed). */
#ifndef LOOM_BASE_FINGERPRINT_H
#define LOOM_BASE_FINGERPRINT_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

#include <string.h>

#define LOOM__FP_K0 0xc3a5c85c97cb3127ull
#define LOOM__FP_K1 0xb492b66fbe98f273ull
#define LOOM__FP_K2 0x9ae16a3b2f90404full

/* little-endian loads (one load on little-endian hosts) */
static inline uint64_t loom__fp_ld64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}
static inline uint64_t loom__fp_ld32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}
/* rotate right (shift in 1..63) */
static inline uint64_t loom__fp_ror(uint64_t v, int s) { return (v >> s) | (v << (64 - s)); }
static inline uint64_t loom__fp_smix(uint64_t v) { return v ^ (v >> 47); }
static inline uint64_t loom__fp_mix16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}
/* Fingerprint64 of 0..16 bytes */
static inline uint64_t loom__fp_len0to16(const uint8_t *s, size_t n) {
  if (n >= 8) {
    uint64_t mul = LOOM__FP_K2 + (uint64_t)n * 2;
    uint64_t a = loom__fp_ld64(s) + LOOM__FP_K2, b = loom__fp_ld64(s + n - 8);
    uint64_t c = loom__fp_ror(b, 37) * mul + a;
    uint64_t d = (loom__fp_ror(a, 25) + b) * mul;
    return loom__fp_mix16(c, d, mul);
  }
  if (n >= 4) {
    uint64_t mul = LOOM__FP_K2 + (uint64_t)n * 2;
    uint64_t a = loom__fp_ld32(s);
    return loom__fp_mix16((uint64_t)n + (a << 3), loom__fp_ld32(s + n - 4), mul);
  }
  if (n > 0) {
    uint32_t y = (uint32_t)s[0] + ((uint32_t)s[n >> 1] << 8);
    uint32_t z = (uint32_t)n + ((uint32_t)s[n - 1] << 2);
    return loom__fp_smix((uint64_t)y * LOOM__FP_K2 ^ (uint64_t)z * LOOM__FP_K0) * LOOM__FP_K2;
  }
  return LOOM__FP_K2;
}
/* any length (the out-of-line part) */
uint64_t loom__fp64_long(const void *data, size_t n);
/* Fingerprint64 of n bytes (short keys inline) */
static inline uint64_t loom__fp64(const void *data, size_t n) {
  if (n <= 16) return loom__fp_len0to16((const uint8_t *)data, n);
  return loom__fp64_long(data, n);
}

/* TF's FingerprintCat64: mixes fp2 into fp1 (Murmur-style). */
static inline uint64_t loom__fp_cat64(uint64_t fp1, uint64_t fp2) {
  const uint64_t mul = 0xc6a4a7935bd1e995ull;
  uint64_t r = fp1 ^ mul;
  uint64_t t = fp2 * mul;
  r ^= (t ^ (t >> 47)) * mul;
  r *= mul;
  r = (r ^ (r >> 47)) * mul;
  return r ^ (r >> 47);
}

/* x % d for a divisor fixed over a loop, without a division: with the
 * 128-bit fraction m = floor((2^128 - 1) / d) + 1, x % d is the top 64 bits
 * of (m * x mod 2^128) * d (exact for every 64-bit x and d >= 1: the
 * fraction has twice the numerator's bits). */
typedef struct loom_fastmod {
  uint64_t d;
#ifdef __SIZEOF_INT128__
  unsigned __int128 m;
#endif
} loom_fastmod;
static inline loom_fastmod loom__fastmod_init(uint64_t d) {
  loom_fastmod f;
  f.d = d;
#ifdef __SIZEOF_INT128__
  f.m = ~(unsigned __int128)0 / d + 1;
#endif
  return f;
}
static inline uint64_t loom__fastmod(uint64_t x, const loom_fastmod *f) {
#ifdef __SIZEOF_INT128__
  unsigned __int128 low = f->m * x; /* the fractional part of x / d, 128 bits */
  unsigned __int128 lo_d = (unsigned __int128)(uint64_t)low * f->d;
  unsigned __int128 hi_d = (unsigned __int128)(uint64_t)(low >> 64) * f->d;
  return (uint64_t)((hi_d + (lo_d >> 64)) >> 64);
#else
  return x % f->d;
#endif
}

/* Fingerprint64 of the decimal text of v ("-12"), without a string tensor. */
uint64_t loom__fp64_int(int64_t v);
/* Writes the decimal text of v into buf (>= 21 bytes); returns its length. */
size_t loom__int_text(int64_t v, char *buf);

#ifdef __cplusplus
}
#endif
#endif
