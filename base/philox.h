/* base/philox.h - the Philox4x32-10 counter-based generator
 * (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
 * SC'11). A pure function of a 128-bit counter and a 64-bit key: no state, so
 * any element of a random tensor can be computed independently of the others
 * and results never depend on how the work is split between threads.
 * Internal header (not installed). */
#ifndef LOOM_KERNELS_CPU_PHILOX_H
#define LOOM_KERNELS_CPU_PHILOX_H
#include <stdint.h>

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

#endif
