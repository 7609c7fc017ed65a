/* base/crc32c.h - CRC-32C (Castagnoli), as used by TFRecord and loom
 * checkpoints. Hardware (SSE4.2 crc32) when the CPU has it, else
 * slicing-by-8 tables. Internal. */
#ifndef LOOM_CRC32C_H
#define LOOM_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* CRC-32C of data appended to a message whose CRC is crc (0 for empty). */
uint32_t loom__crc32c_extend(uint32_t crc, const void *data, size_t n);
/* CRC-32C of data ("123456789" -> 0xE3069283). */
uint32_t loom__crc32c(const void *data, size_t n);
/* TFRecord masking: ((crc >> 15) | (crc << 17)) + 0xa282ead8, and its inverse. */
uint32_t loom__crc32c_mask(uint32_t crc);
uint32_t loom__crc32c_unmask(uint32_t masked);
/* Masked CRC-32C of data (what TFRecord stores). */
uint32_t loom__crc32c_masked(const void *data, size_t n);

/* Tests: 0 forces the table implementation, 1 restores auto-detection. */
void loom__crc32c_use_hw(int on);

#endif
