/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78). */
#include <pthread.h>
#include <string.h>
#include "base/crc32c.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LOOM_CRC_HW 1
#include <nmmintrin.h>
#endif

static uint32_t g_table[8][256];
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

uint32_t loom__crc32c_extend(uint32_t crc, const void *data, size_t n) {
  pthread_once(&g_once, crc_init);
  uint32_t c = ~crc;
#ifdef LOOM_CRC_HW
  if (g_hw) return ~crc_hw(c, data, n);
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
