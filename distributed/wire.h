/* distributed/wire.h - internal: the parameter server's wire protocol.
 *
 * Every message is one frame: a fixed 32-byte little-endian header followed
 * by body_len bytes of body. Header layout (offsets in bytes):
 *   0 magic u32 'LMPS'   4 version u16   6 opcode u16   8 flags u32
 *  12 request_id u64    20 body_len u32  24 body_crc32c u32  28 status u32
 * status is 0 in requests; in replies it is a loom_code (0 OK) and a non-OK
 * reply's body is the error message. flags bit 0 marks a reply.
 * The receiver checks magic, version and body_len <= its max_frame BEFORE
 * allocating anything for the body, and the CRC-32C of the body after.
 *
 * Handshake (nothing else is accepted before WELCOME):
 *   HELLO     {proto_min u16, proto_max u16, num_ps u32, num_vars u32, flags u32 (bit 0: the job's chief),
 *              placement_hash u64, client_nonce[32] [, client_id u64]}
 *             (without client_id, 56 bytes: no duplicate window for that connection)
 *   CHALLENGE {server_nonce[32]}
 *   AUTH      {mac[32]} = HMAC-SHA256(token, "loom-ps-auth-v1" || client_nonce
 *              || server_nonce || placement_hash u64 LE)
 *   WELCOME   {num_vars_on_ps u32, pad u32, instance_id u64}
 *             (instance_id: the PS's random id, drawn at each start and written into ps-<i>.addr by
 *             the job layer; a client expecting one refuses a PS that sends another. Clients still
 *             accept the 4-byte WELCOME {num_vars_on_ps u32} of older PS tasks: instance unknown, 0)
 * Request bodies are documented beside the opcodes below; every field is
 * little-endian and arrays start 8-byte aligned in the body. */
#ifndef LOOM_DIST_WIRE_H
#define LOOM_DIST_WIRE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "loom/loom_base.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "loom's parameter server wire format is little-endian only"
#endif

#define LOOM_PS_MAGIC 0x53504D4Cu /* "LMPS" as bytes in memory */
#define LOOM_PS_VERSION 1u
#define LOOM_PS_HDR 32
#define LOOM_PS_NONCE 32
#define LOOM_PS_MAC 32
#define LOOM_PS_FLAG_REPLY 1u
#define LOOM_PS_FLAG_UNCHANGED 2u /* PULL reply: the variable is unchanged since the caller's version */
#define LOOM_PS_FLAG_STALE 4u     /* PUSH/PUSHPULL reply: the gradient was dropped (stale or late), not applied */
#define LOOM_PS_FLAG_DUPLICATE 8u /* reply from the duplicate window: the request was applied once already */
#define LOOM_PS_FLAG_REFUSED 16u  /* STEP_INC reply: the reservation was refused (its limit reached), nothing added */
#define LOOM_PS_WELCOME_V0 4u  /* WELCOME body of older PS tasks: {num_vars_on_ps u32} */
#define LOOM_PS_WELCOME_LEN 16u /* {num_vars_on_ps u32, pad u32, instance_id u64} */
#define LOOM_PS_HELLO_CHIEF 1u   /* HELLO flags: the client is the job's chief */
#define LOOM_PS_HANDSHAKE_MAX 256u /* largest body accepted before WELCOME */
#define LOOM_PS_DEFAULT_MAX_FRAME (64u << 20)
#define LOOM_PS_RULE_TAG 0x454C5552u /* "RULE" */
#define LOOM_PS_RULE_FIXED 64u       /* the rule block of INIT_VAR without its arrays */
#define LOOM_PS_RULE_MAX_NB 4096u

enum {
  LOOM_PS_HELLO = 1,
  LOOM_PS_CHALLENGE = 2,
  LOOM_PS_AUTH = 3,
  LOOM_PS_WELCOME = 4,
  /* INIT_VAR {var_id u32, optimizer u32, ndim u32, pad u32, dims i64[ndim],
   *           hyper f32[8], value f32[numel] [, rule]} -> {created u32}
   *   rule (optional; the model's update rule, loom_ps_update_rule): {tag u32 LOOM_PS_RULE_TAG,
   *     schedule i32 (-1: none; else LOOM_LRS_*), flag u32, nb u32, step i64, beta1_power f32,
   *     beta2_power f32, lr f64, decay_steps f64, beta f64, limit f64, boundaries f64[nb],
   *     values f32[nb + 1] (piecewise only: nb 0 otherwise) [, nslots u32, pad u32,
   *     slots f32[nslots * numel] (the optimizer slots' values in the update rule's order; without them
   *     the slots start at their initial values)]} */
  LOOM_PS_INIT_VAR = 10,
  /* PULL {var_id u32, pad u32, have_version u64 (~0: none)} ->
   *   {version u64, value f32[numel]}; flag UNCHANGED and no value when
   *   have_version equals the PS's version (16-byte reply body: 48 bytes in all). */
  LOOM_PS_PULL = 11,
  /* PUSH {var_id u32, pad u32, read_version u64, grad f32[numel]} -> {version u64}
   *   (flag STALE: dropped, not applied; read_version ~0: unknown, never stale) */
  LOOM_PS_PUSH = 12,
  /* PUSHPULL: PUSH's body -> PULL's reply (always with the value). */
  LOOM_PS_PUSHPULL = 13,
  /* PULL_ROWS {var_id u32, n u32, ids i64[n]} -> {version u64, rows f32[n*d]} */
  LOOM_PS_PULL_ROWS = 14,
  /* PUSH_ROWS {var_id u32, n u32, ids i64[n], grads f32[n*d]} -> {version u64} */
  LOOM_PS_PUSH_ROWS = 15,
  /* STEP_INC {k i64 [, limit i64]} -> {global_step i64}. With a limit (a step reservation): k is added
   *   only when global_step + k <= limit (the new step is returned), else nothing is added, the current step
   *   is returned and the reply has flag REFUSED. A SYNC PS adds nothing and refuses once its step >= limit. */
  LOOM_PS_STEP_INC = 16,
  /* SHUTDOWN {} -> {} and the PS stops. */
  LOOM_PS_SHUTDOWN = 17,
  /* SAVE {step i64, len u32, pad u32, dir char[len]} -> {vars u32, pad u32, digest u64}: writes
   *   <model_dir>/<dir>/ps-<index>.ckpt-<step>; dir is relative, without "..". */
  LOOM_PS_SAVE = 18,
  /* RESTORE {step i64, len u32, pad u32, dir char[len]} -> {vars u32, pad u32, digest u64} */
  LOOM_PS_RESTORE = 19,
  /* PUSH_ROWS_AT {var_id u32, n u32, read_version u64, ids i64[n], grads f32[n*d]} -> {version u64}
   *   (flag STALE: dropped by a BOUNDED PS; read_version ~0: unknown, never stale) */
  LOOM_PS_PUSH_ROWS_AT = 20,
  /* PING {} -> {}: answered by the loop thread (liveness, heartbeats) */
  LOOM_PS_PING = 21,
  /* PULL_ROWS_AT {var_id u32, n u32, min_version u64, ids i64[n]} -> PULL_ROWS's reply, once the variable's
   *   version is >= min_version (a SYNC step still being aggregated is waited for; ~0: no wait) */
  LOOM_PS_PULL_ROWS_AT = 22,
  /* PULL_SLOT {var_id u32, slot u32} -> {beta1_power f32, beta2_power f32, value f32[numel]}: the
   *   variable's optimizer slot `slot` (0..2, the apply op's slot inputs in order) and Adam's beta powers
   *   (what the chief's checkpoint holds of the update rule's state) */
  LOOM_PS_PULL_SLOT = 23,
  /* Same-host shared memory (distributed/ps_shm.h; opcodes 30..34):
   * SHM_ATTACH {pid u32, fd u32, size u64, nonce[32]} -> {}: the PS maps the client's sealed memfd
   *   /proc/<pid>/fd/<fd> (size bytes; its header holds nonce) for this connection's life; refused
   *   (UNAVAILABLE, with the reason) when it cannot, and under SYNC (FAILED_PRECONDITION).
   * SHM_PULL {var_id u32, pad u32, have_version u64, offset u64} -> {version u64}: the value is written to
   *   the segment at offset (numel floats) unless flag UNCHANGED.
   * SHM_PUSH {var_id u32, pad u32, read_version u64, offset u64} -> {version u64}: the gradient is read
   *   from the segment at offset; flags as PUSH's.
   * SHM_PUSHPULL: SHM_PUSH's body -> {version u64}; the new value (the current one when STALE) is
   *   written back at the same offset. */
  LOOM_PS_SHM_ATTACH = 30,
  LOOM_PS_SHM_PULL = 31,
  LOOM_PS_SHM_PUSH = 32,
  LOOM_PS_SHM_PUSHPULL = 33,
  /* The pipelined dense push+pull (distributed/ps_parts.h), ASYNC PS only:
   * PUSHPULL_PART {var_id u32, part u32, nparts u32, pad u32, read_version u64, offset u64 (elements),
   *   grad f32[count]} -> {version u64, offset u64, value f32[count]} (the updated elements [offset,
   *   offset + count)); one frame per part, each answered as soon as its shard thread applied it. */
  LOOM_PS_PUSHPULL_PART = 40,
  /* PARTS_PROBE {} -> {accepts u32, pad u32}: 1 when this PS takes PUSHPULL_PART (ASYNC), else 0. */
  LOOM_PS_PARTS_PROBE = 41,
};

typedef struct loom_ps_hdr {
  uint32_t magic;
  uint16_t version, opcode;
  uint32_t flags;
  uint64_t request_id;
  uint32_t body_len, body_crc, status;
} loom_ps_hdr;

static inline void loom__ps_put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void loom__ps_put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t loom__ps_get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t loom__ps_get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint16_t loom__ps_get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* Writes the header of a frame whose body (already in place) is body[0..len). */
void loom__ps_hdr_encode(uint8_t out[LOOM_PS_HDR], uint16_t opcode, uint32_t flags, uint64_t request_id,
                         const void *body, uint32_t len, uint32_t status);
/* Decodes and checks a header: magic, version, body_len <= max_body. On
 * failure returns non-OK with a reason in why (a static-size buffer). */
loom_code loom__ps_hdr_decode(const uint8_t in[LOOM_PS_HDR], uint32_t max_body, loom_ps_hdr *h, char *why,
                              size_t why_len);
/* Checks the body's CRC-32C against the header. */
int loom__ps_body_ok(const loom_ps_hdr *h, const void *body);
/* HMAC-SHA256 of the handshake transcript. */
void loom__ps_auth_mac(const void *token, size_t token_len, const uint8_t cn[LOOM_PS_NONCE],
                       const uint8_t sn[LOOM_PS_NONCE], uint64_t placement_hash, uint8_t mac[LOOM_PS_MAC]);
/* Fills n random bytes (OpenSSL's CSPRNG); non-OK when it fails. */
loom_code loom__ps_random(uint8_t *p, size_t n);
/* Constant-time equality of n bytes. */
int loom__ps_ct_equal(const uint8_t *a, const uint8_t *b, size_t n);

#endif
