/* base/fingerprint.c - FarmHash Fingerprint64 (the "na" variant's Hash64,
 * which TF's Fingerprint64 is) written from the algorithm's description:
 * three 64-bit primes k0, k1, k2; inputs of 0..16, 17..32 and 33..64 bytes
 * have their own mixing, longer ones run 64-byte blocks through two 128-bit
 * states; every multi-byte load is little-endian, whatever the host. */
#include <string.h>
#include "base/fingerprint.h"
#include "loom/loom_sparse.h"

static const uint64_t k0 = 0xc3a5c85c97cb3127ull;
static const uint64_t k1 = 0xb492b66fbe98f273ull;
static const uint64_t k2 = 0x9ae16a3b2f90404full;

static inline uint64_t ld64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static inline uint64_t ld32(const uint8_t *p) {
  return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}
/* rotate right (shift in 1..63) */
static inline uint64_t ror(uint64_t v, int s) { return (v >> s) | (v << (64 - s)); }
static inline uint64_t smix(uint64_t v) { return v ^ (v >> 47); }

static inline uint64_t mix16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

static uint64_t len0to16(const uint8_t *s, size_t n) {
  if (n >= 8) {
    uint64_t mul = k2 + (uint64_t)n * 2;
    uint64_t a = ld64(s) + k2, b = ld64(s + n - 8);
    uint64_t c = ror(b, 37) * mul + a;
    uint64_t d = (ror(a, 25) + b) * mul;
    return mix16(c, d, mul);
  }
  if (n >= 4) {
    uint64_t mul = k2 + (uint64_t)n * 2;
    uint64_t a = ld32(s);
    return mix16((uint64_t)n + (a << 3), ld32(s + n - 4), mul);
  }
  if (n > 0) {
    uint32_t y = (uint32_t)s[0] + ((uint32_t)s[n >> 1] << 8);
    uint32_t z = (uint32_t)n + ((uint32_t)s[n - 1] << 2);
    return smix((uint64_t)y * k2 ^ (uint64_t)z * k0) * k2;
  }
  return k2;
}

static uint64_t len17to32(const uint8_t *s, size_t n) {
  uint64_t mul = k2 + (uint64_t)n * 2;
  uint64_t a = ld64(s) * k1, b = ld64(s + 8);
  uint64_t c = ld64(s + n - 8) * mul, d = ld64(s + n - 16) * k2;
  return mix16(ror(a + b, 43) + ror(c, 30) + d, a + ror(b + k2, 18) + c, mul);
}

static uint64_t len33to64(const uint8_t *s, size_t n) {
  uint64_t mul = k2 + (uint64_t)n * 2;
  uint64_t a = ld64(s) * k2, b = ld64(s + 8);
  uint64_t c = ld64(s + n - 8) * mul, d = ld64(s + n - 16) * k2;
  uint64_t y = ror(a + b, 43) + ror(c, 30) + d;
  uint64_t z = mix16(y, a + ror(b + k2, 18) + c, mul);
  uint64_t e = ld64(s + 16) * mul, f = ld64(s + 24);
  uint64_t g = (y + ld64(s + n - 32)) * mul;
  uint64_t h = (z + ld64(s + n - 24)) * mul;
  return mix16(ror(e + f, 43) + ror(g, 30) + h, e + ror(f + a, 18) + g, mul);
}

typedef struct pair64 { uint64_t lo, hi; } pair64;

/* 32 bytes at s mixed into seeds (a, b). */
static inline pair64 weak32(const uint8_t *s, uint64_t a, uint64_t b) {
  uint64_t w = ld64(s), x = ld64(s + 8), y = ld64(s + 16), z = ld64(s + 24);
  a += w;
  b = ror(b + a + z, 21);
  uint64_t c = a;
  a += x;
  a += y;
  b += ror(a, 44);
  pair64 r = {a + z, b + c};
  return r;
}

uint64_t loom__fp64(const void *data, size_t n) {
  const uint8_t *s = data;
  if (n <= 16) return len0to16(s, n);
  if (n <= 32) return len17to32(s, n);
  if (n <= 64) return len33to64(s, n);
  const uint64_t seed = 81;
  uint64_t x = seed, y = seed * k1 + 113, z = smix(y * k2 + 113) * k2;
  pair64 v = {0, 0}, w = {0, 0};
  x = x * k2 + ld64(s);
  const uint8_t *end = s + ((n - 1) / 64) * 64;
  const uint8_t *last64 = end + ((n - 1) & 63) - 63;
  do {
    x = ror(x + y + v.lo + ld64(s + 8), 37) * k1;
    y = ror(y + v.hi + ld64(s + 48), 42) * k1;
    x ^= w.hi;
    y += v.lo + ld64(s + 40);
    z = ror(z + w.lo, 33) * k1;
    v = weak32(s, v.hi * k1, x + w.lo);
    w = weak32(s + 32, z + w.hi, y + ld64(s + 16));
    uint64_t t = z;
    z = x;
    x = t;
    s += 64;
  } while (s != end);
  uint64_t mul = k1 + ((z & 0xff) << 1);
  s = last64;
  w.lo += (n - 1) & 63;
  v.lo += w.lo;
  w.lo += v.lo;
  x = ror(x + y + v.lo + ld64(s + 8), 37) * mul;
  y = ror(y + v.hi + ld64(s + 48), 42) * mul;
  x ^= w.hi * 9;
  y += v.lo * 9 + ld64(s + 40);
  z = ror(z + w.lo, 33) * mul;
  v = weak32(s, v.hi * mul, x + w.lo);
  w = weak32(s + 32, z + w.hi, y + ld64(s + 16));
  uint64_t t = z;
  z = x;
  x = t;
  return mix16(mix16(v.lo, w.lo, mul) + smix(y) * k0 + z, mix16(v.hi, w.hi, mul) + x, mul);
}

size_t loom__int_text(int64_t v, char *buf) {
  char tmp[24];
  size_t k = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[k++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  size_t n = 0;
  if (v < 0) buf[n++] = '-';
  while (k) buf[n++] = tmp[--k];
  buf[n] = 0;
  return n;
}

uint64_t loom__fp64_int(int64_t v) {
  char buf[24];
  size_t n = loom__int_text(v, buf);
  return loom__fp64(buf, n);
}

uint64_t loom_fingerprint64(const void *data, size_t n) { return loom__fp64(n ? data : "", n); }
uint64_t loom_fingerprint_cat64(uint64_t a, uint64_t b) { return loom__fp_cat64(a, b); }
