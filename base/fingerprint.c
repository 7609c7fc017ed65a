/* base/fingerprint.c - FarmHash Fingerprint64 (the "na" variant's Hash64,
 * which TF's Fingerprint64 is) written from the algorithm's description:
 * three 64-bit primes k0, k1, k2; inputs of 0..16, 17..32 and 33..64 bytes
 * have their own mixing, longer ones run 64-byte blocks through two 128-bit
 * states; every multi-byte load is little-endian, whatever the host. */
#include <string.h>
#include "base/fingerprint.h"
#include "loom/loom_sparse.h"

#define k0 LOOM__FP_K0
#define k1 LOOM__FP_K1
#define k2 LOOM__FP_K2
#define ld64 loom__fp_ld64
#define ld32 loom__fp_ld32
#define ror loom__fp_ror
#define smix loom__fp_smix
#define mix16 loom__fp_mix16

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

uint64_t loom__fp64_long(const void *data, size_t n) {
  const uint8_t *s = data;
  if (n <= 16) return loom__fp_len0to16(s, n);
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
