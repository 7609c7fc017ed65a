/* distributed/wire.c - frame headers, CRC-32C, the HMAC handshake. */
#include "distributed/wire.h"
#include <stdio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include "base/crc32c.h"

void loom__ps_hdr_encode(uint8_t out[LOOM_PS_HDR], uint16_t opcode, uint32_t flags, uint64_t request_id,
                         const void *body, uint32_t len, uint32_t status) {
  uint16_t ver = LOOM_PS_VERSION;
  loom__ps_put32(out, LOOM_PS_MAGIC);
  memcpy(out + 4, &ver, 2);
  memcpy(out + 6, &opcode, 2);
  loom__ps_put32(out + 8, flags);
  loom__ps_put64(out + 12, request_id);
  loom__ps_put32(out + 20, len);
  loom__ps_put32(out + 24, len ? loom__crc32c(body, len) : 0);
  loom__ps_put32(out + 28, status);
}

loom_code loom__ps_hdr_decode(const uint8_t in[LOOM_PS_HDR], uint32_t max_body, loom_ps_hdr *h, char *why,
                              size_t why_len) {
  h->magic = loom__ps_get32(in);
  h->version = loom__ps_get16(in + 4);
  h->opcode = loom__ps_get16(in + 6);
  h->flags = loom__ps_get32(in + 8);
  h->request_id = loom__ps_get64(in + 12);
  h->body_len = loom__ps_get32(in + 20);
  h->body_crc = loom__ps_get32(in + 24);
  h->status = loom__ps_get32(in + 28);
  if (h->magic != LOOM_PS_MAGIC) {
    snprintf(why, why_len, "bad magic 0x%08x (expected 0x%08x)", h->magic, LOOM_PS_MAGIC);
    return LOOM_DATA_LOSS;
  }
  if (h->version != LOOM_PS_VERSION) {
    snprintf(why, why_len, "protocol version %u (this side speaks %u)", h->version, LOOM_PS_VERSION);
    return LOOM_UNIMPLEMENTED;
  }
  if (h->body_len > max_body) {
    snprintf(why, why_len, "frame body of %u bytes exceeds the limit of %u (opcode %u)", h->body_len, max_body,
             h->opcode);
    return LOOM_RESOURCE_EXHAUSTED;
  }
  return LOOM_OK;
}

int loom__ps_body_ok(const loom_ps_hdr *h, const void *body) {
  uint32_t c = h->body_len ? loom__crc32c(body, h->body_len) : 0;
  return c == h->body_crc;
}

void loom__ps_auth_mac(const void *token, size_t token_len, const uint8_t cn[LOOM_PS_NONCE],
                       const uint8_t sn[LOOM_PS_NONCE], uint64_t placement_hash, uint8_t mac[LOOM_PS_MAC]) {
  static const char label[] = "loom-ps-auth-v1";
  uint8_t msg[sizeof label - 1 + 2 * LOOM_PS_NONCE + 8];
  memcpy(msg, label, sizeof label - 1);
  memcpy(msg + sizeof label - 1, cn, LOOM_PS_NONCE);
  memcpy(msg + sizeof label - 1 + LOOM_PS_NONCE, sn, LOOM_PS_NONCE);
  loom__ps_put64(msg + sizeof label - 1 + 2 * LOOM_PS_NONCE, placement_hash);
  unsigned int len = LOOM_PS_MAC;
  static const uint8_t empty = 0;
  if (!HMAC(EVP_sha256(), token_len ? token : &empty, (int)token_len, msg, sizeof msg, mac, &len))
    memset(mac, 0, LOOM_PS_MAC);
}

loom_code loom__ps_random(uint8_t *p, size_t n) { return RAND_bytes(p, (int)n) == 1 ? LOOM_OK : LOOM_INTERNAL; }

int loom__ps_ct_equal(const uint8_t *a, const uint8_t *b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }
