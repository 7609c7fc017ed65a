/* distributed/ps_shm.h - internal: the same-host shared-memory path of the
 * parameter server's dense exchange.
 *
 * A client on the PS's host puts the bulk bytes of its dense shards in one
 * sealed memfd it shares with the PS (SHM_ATTACH, wire.h); the TCP
 * connection keeps carrying the small request/reply frames (control, order,
 * errors, liveness). Segment layout: a LOOM_PS_SHM_HDR-byte header
 * {magic u64 "LOOMSHM1", nonce[32]} then each shard's floats at its offset
 * (64-byte aligned). The PS maps the segment only after checking that it is
 * a regular file of exactly the announced size, sealed against shrinking
 * (no SIGBUS, whatever the client does), and that its header holds the nonce
 * sent over the authenticated connection. A client writing into its segment
 * while the PS works on it can only spoil its own numbers. */
#ifndef LOOM_DIST_PS_SHM_H
#define LOOM_DIST_PS_SHM_H
#include <stdint.h>
#include "distributed/ps_conn.h"

#define LOOM_PS_SHM_HDR 4096u
#define LOOM_PS_SHM_MAGIC 0x314D48534D4F4F4Cull /* "LOOMSHM1" */
#define LOOM_PS_SHM_ATTACH_LEN (16u + LOOM_PS_NONCE)
#define LOOM_PS_SHM_REQ_LEN 24u
/* The largest segment a PS maps: its max_frame * 4 (256 MiB by default), and never over this. */
#define LOOM_PS_SHM_MAX ((uint64_t)4 << 30)

/* ---- PS side (the loop thread maps; shard threads use the mapping; unmapped with the connection) ---- */
typedef struct loom__ps_shm_map {
  uint8_t *base;
  uint64_t size;
} loom__ps_shm_map;
/* Maps the segment an SHM_ATTACH body names (cap: the largest size accepted). Non-OK with the reason
 * in st (UNAVAILABLE "shared memory not reachable: ..."), m left empty. */
loom_code loom__ps_shm_map_open(const uint8_t *body, uint32_t len, uint64_t cap, loom__ps_shm_map *m,
                                loom_status *st);
void loom__ps_shm_map_close(loom__ps_shm_map *m);
/* The bytes [off, off + n) of the data area (off >= the header, 4-byte aligned), or NULL when they are not
 * inside the mapping. */
float *loom__ps_shm_map_at(const loom__ps_shm_map *m, uint64_t off, uint64_t n);

/* ---- client side ---- */
typedef struct loom__ps_shm_seg {
  uint8_t *base;
  uint64_t size;
  uint32_t nslot;   /* slots indexed by variable (shard) id */
  uint64_t *off;    /* per id: byte offset of its floats (0: no slot) */
  int64_t *numel;   /* per id */
} loom__ps_shm_seg;
/* 1 when host names this machine (a loopback address, or an address of one of its interfaces). */
int loom__ps_shm_host_is_local(const char *host);
/* Creates, seals and offers c's PS a segment with a slot for each of the n variables ids[i] (numels[i]
 * floats). OK: attached (c->shm set). Non-OK: the PS refused or the segment could not be made; c keeps
 * working over TCP (the reason is in st, and a refusal by the PS leaves the connection usable). */
loom_code loom__ps_shm_attach(loom_ps_client *c, uint32_t n, const uint32_t *ids, const int64_t *numels,
                              loom_status *st);
void loom__ps_shm_detach(loom_ps_client *c);
/* The slot of variable id with numel floats when c is attached and has it (its offset in *off), else NULL. */
float *loom__ps_shm_slot(const loom_ps_client *c, uint32_t id, int64_t numel, uint64_t *off);
/* The send half of SHM_PULL / SHM_PUSH / SHM_PUSHPULL (the slot already holds the gradient). */
loom_code loom__ps_shm_send(loom_ps_client *c, uint16_t opcode, uint32_t id, uint64_t version, uint64_t off,
                            loom_status *st);
/* The receive half: {version}; *changed = 0 when an SHM_PULL found the caller's version current. */
loom_code loom__ps_shm_recv(loom_ps_client *c, uint16_t opcode, uint64_t *version, int *changed,
                            loom_status *st);

#endif
