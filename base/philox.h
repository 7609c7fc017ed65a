/* base/philox.h - the Philox4x32-10 counter-based generator
 * (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
 * SC'11). A pure function of a 128-bit counter and a 64-bit key: no state, so
 * any element of a random tensor can be computed independently of the others
 * and results never depend on how the work is split between threads.
 * Internal header (not installed). */
#ifndef LOOM_BASE_PHILOX_H
#define LOOM_BASE_PHILOX_H
#include <stdint.h>
#include <math.h>

/* The helpers below are compiled for the host (C) and, in .cu files, for
 * the device too, so CPU and CUDA random kernels produce the same values. */
#ifdef __CUDACC__
#define LOOM_PHILOX_FN static __host__ __device__ __forceinline__
#else
#define LOOM_PHILOX_FN static inline
#endif
#define LOOM_TWO_PI 6.283185307179586476925286766559

#define LOOM_PHILOX_M0 0xD2511F53u /* round multipliers */
#define LOOM_PHILOX_M1 0xCD9E8D57u
#define LOOM_PHILOX_W0 0x9E3779B9u /* Weyl key increments: golden ratio, sqrt(3)-1 */
#define LOOM_PHILOX_W1 0xBB67AE85u

/* out = Philox4x32-10(ctr, key). out may alias ctr. */
static inline void loom_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r) {
      k0 += LOOM_PHILOX_W0;
      k1 += LOOM_PHILOX_W1;
    }
    uint64_t p0 = (uint64_t)LOOM_PHILOX_M0 * c0;
    uint64_t p1 = (uint64_t)LOOM_PHILOX_M1 * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* [0,1) and (0,1] from 24 / 53 random bits (exact in the target type). */
LOOM_PHILOX_FN float loom_philox_u24(uint32_t x) { return (float)(x >> 8) * 0x1p-24f; }
LOOM_PHILOX_FN float loom_philox_u24_nz(uint32_t x) { return (float)((x >> 8) + 1) * 0x1p-24f; }
LOOM_PHILOX_FN double loom_philox_u53(uint32_t hi, uint32_t lo) {
  return (double)(((((uint64_t)hi) << 32) | lo) >> 11) * 0x1p-53;
}
LOOM_PHILOX_FN double loom_philox_u53_nz(uint32_t hi, uint32_t lo) {
  return (double)((((((uint64_t)hi) << 32) | lo) >> 11) + 1) * 0x1p-53;
}
/* Box-Muller: two standard normals from two uniforms. */
LOOM_PHILOX_FN void loom_box_muller_f32(uint32_t a, uint32_t b, float *z0, float *z1) {
  float r = sqrtf(-2.0f * logf(loom_philox_u24_nz(a)));
  float t = (float)LOOM_TWO_PI * loom_philox_u24(b);
  *z0 = r * cosf(t);
  *z1 = r * sinf(t);
}
LOOM_PHILOX_FN void loom_box_muller_f64(const uint32_t w[4], double *z0, double *z1) {
  double r = sqrt(-2.0 * log(loom_philox_u53_nz(w[0], w[1])));
  double t = LOOM_TWO_PI * loom_philox_u53(w[2], w[3]);
  *z0 = r * cos(t);
  *z1 = r * sin(t);
}

#endif
