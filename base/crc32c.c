/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78). */
#include <pthread.h>
#include <string.h>
#include "base/crc32c.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LOOM_CRC_HW 1
#include <nmmintrin.h>
#endif

static uint32_t g_table[8][256];
#define CRC_BLK 8192 /* bytes per stream of the 3-way hardware loop */
#ifdef LOOM_CRC_HW
static uint32_t g_shift[4][256]; /* the raw register advanced over CRC_BLK zero bytes (linear: 4 lookups) */
static void shift_init(void);
#endif
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_hw, g_hw_detected;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    g_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++) g_table[t][i] = (g_table[t - 1][i] >> 8) ^ g_table[0][g_table[t - 1][i] & 0xff];
#ifdef LOOM_CRC_HW
  __builtin_cpu_init();
  g_hw_detected = __builtin_cpu_supports("sse4.2") != 0;
  g_hw = g_hw_detected;
  if (g_hw_detected) shift_init();
#endif
}

static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n) {
  while (n && ((uintptr_t)p & 7)) {
    c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xff];
    n--;
  }
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    uint32_t lo = (uint32_t)w ^ c, hi = (uint32_t)(w >> 32);
    c = g_table[7][lo & 0xff] ^ g_table[6][(lo >> 8) & 0xff] ^ g_table[5][(lo >> 16) & 0xff] ^
        g_table[4][lo >> 24] ^ g_table[3][hi & 0xff] ^ g_table[2][(hi >> 8) & 0xff] ^
        g_table[1][(hi >> 16) & 0xff] ^ g_table[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xff];
  return c;
}

#ifdef LOOM_CRC_HW
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n) {
  while (n && ((uintptr_t)p & 7)) {
    c = _mm_crc32_u8(c, *p++);
    n--;
  }
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
    p += 8;
    n -= 8;
  }
  c = (uint32_t)c64;
  while (n--) c = _mm_crc32_u8(c, *p++);
  return c;
}
#endif

#ifdef LOOM_CRC_HW
static uint32_t crc_shift(uint32_t x) {
  return g_shift[0][x & 0xff] ^ g_shift[1][(x >> 8) & 0xff] ^ g_shift[2][(x >> 16) & 0xff] ^ g_shift[3][x >> 24];
}

/* Column i of the shift operator: the register 1 << i advanced over CRC_BLK zero bytes (CRC is linear in
 * the register when the data are zeros). */
static void shift_init(void) {
  static const uint8_t zeros[CRC_BLK];
  uint32_t col[32];
  for (int i = 0; i < 32; i++) col[i] = crc_hw(1u << i, zeros, CRC_BLK);
  for (int k = 0; k < 4; k++)
    for (int b = 0; b < 256; b++) {
      uint32_t v = 0;
      for (int bit = 0; bit < 8; bit++)
        if ((b >> bit) & 1) v ^= col[8 * k + bit];
      g_shift[k][b] = v;
    }
}

/* Three independent crc32 chains over consecutive blocks (the instruction's
 * latency is 3 cycles, its throughput 1), joined with the shift operator:
 * state after A|B|C = M(M(a) ^ b) ^ c, a started from the incoming state,
 * b and c from 0. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw3(uint32_t c, const uint8_t *p, size_t n) {
  while (n && ((uintptr_t)p & 7)) {
    c = _mm_crc32_u8(c, *p++);
    n--;
  }
  while (n >= 3 * (size_t)CRC_BLK) {
    uint64_t a = c, b = 0, d = 0;
    const uint8_t *q = p + CRC_BLK, *r = p + 2 * CRC_BLK;
    for (size_t i = 0; i < CRC_BLK; i += 8) {
      uint64_t x, y, z;
      memcpy(&x, p + i, 8);
      memcpy(&y, q + i, 8);
      memcpy(&z, r + i, 8);
      a = _mm_crc32_u64(a, x);
      b = _mm_crc32_u64(b, y);
      d = _mm_crc32_u64(d, z);
    }
    c = crc_shift(crc_shift((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
    p += 3 * CRC_BLK;
    n -= 3 * CRC_BLK;
  }
  return crc_hw(c, p, n);
}
#endif

uint32_t loom__crc32c_extend(uint32_t crc, const void *data, size_t n) {
  pthread_once(&g_once, crc_init);
  uint32_t c = ~crc;
#ifdef LOOM_CRC_HW
  if (g_hw) return ~(n >= 3 * (size_t)CRC_BLK ? crc_hw3(c, data, n) : crc_hw(c, data, n));
#endif
  return ~crc_sw(c, data, n);
}

uint32_t loom__crc32c(const void *data, size_t n) { return loom__crc32c_extend(0, data, n); }

uint32_t loom__crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
uint32_t loom__crc32c_unmask(uint32_t masked) {
  uint32_t r = masked - 0xa282ead8u;
  return (r >> 17) | (r << 15);
}
uint32_t loom__crc32c_masked(const void *data, size_t n) { return loom__crc32c_mask(loom__crc32c(data, n)); }

void loom__crc32c_use_hw(int on) {
  pthread_once(&g_once, crc_init);
  g_hw = on ? g_hw_detected : 0;
}
