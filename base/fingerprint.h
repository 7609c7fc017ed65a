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

uint64_t loom__fp64(const void *data, size_t n);

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

/* Fingerprint64 of the decimal text of v ("-12"), without a string tensor. */
uint64_t loom__fp64_int(int64_t v);
/* Writes the decimal text of v into buf (>= 21 bytes); returns its length. */
size_t loom__int_text(int64_t v, char *buf);

#ifdef __cplusplus
}
#endif
#endif
