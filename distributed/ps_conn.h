/* distributed/ps_conn.h - internal: one connection to a PS task, its framing
 * and the split send/receive halves of its requests (below the client, the
 * shared-memory path and the pipelined parts, which all talk through it). */
#ifndef LOOM_DIST_PS_CONN_H
#define LOOM_DIST_PS_CONN_H
#include "distributed/wire.h"
#include "loom/loom_distributed.h"

struct loom_ps_client {
  int fd;
  double timeout_s;
  uint32_t max_frame;
  char addr[80];
  uint64_t next_id; /* id of the last request sent */
  uint64_t acked;   /* id of the last reply read */
  uint16_t pending;
  loom_ps_hdr hdr; /* of the last reply read (flags: UNCHANGED, STALE) */
  uint32_t crc;   /* of the reply body read so far */
  size_t left;    /* reply body bytes not read yet */
  int64_t bytes_sent, bytes_received;
  /* busy-poll (loom_ps_connect_options.busy_poll_us): budget, failed-poll streak, waits left to skip */
  int32_t spin_us, spin_fail, spin_skip;
  int big_out; /* a request with a body over 4 KiB was sent since the last time no reply was owed */
  /* the duplicate window: identity, and the next request reuses next_id (loom_ps_client_retry_last) */
  uint64_t client_id;
  int retry;
  /* what loom_ps_client_reconnect needs */
  char host[256]; /* a DNS name is at most 253 */
  int port;
  uint8_t token[256];
  size_t token_len;
  uint64_t placement_hash;
  int32_t num_ps, num_vars;
  /* PS identity: the instance expected (0: any) and the one the last WELCOME reported (0: none) */
  uint64_t expect_instance, instance;
  /* same-host shared memory (ps_shm.h): the segment when attached */
  struct loom__ps_shm_seg *shm;
  /* the pipelined push+pull (ps_parts.h): loom_ps_connect_options.part_bytes; whether the PS takes parts
   * (0: not asked yet on this connection, 1: yes, -1: no) */
  int32_t part_bytes;
  int parts_ok;
  int chief; /* loom_ps_connect_options.chief: HELLO's flags bit 0 */
};

/* Closes c's socket and reports what failed (err: an errno, ETIMEDOUT for a deadline, 0 for a close by
 * the PS) in st (st may be NULL); returns the code. */
loom_code loom__ps_conn_fail(loom_ps_client *c, loom_status *st, const char *what, int err);
/* Opens c's TCP connection to c->host:c->port (c->fd < 0), within c->timeout_s, TCP_NODELAY set; no
 * handshake. */
loom_code loom__ps_conn_dial(loom_ps_client *c, loom_status *st);

/* A frame whose body is fixed ++ a ++ b (sent with writev, no copy). */
loom_code loom__ps_send(loom_ps_client *c, uint16_t opcode, const void *fixed, size_t fixed_len, const void *a,
                        size_t alen, const void *b, size_t blen, loom_status *st);
/* Reads a reply header; an error reply becomes the returned code + message. */
loom_code loom__ps_recv_hdr(loom_ps_client *c, uint16_t opcode, loom_ps_hdr *h, loom_status *st);
loom_code loom__ps_recv_body(loom_ps_client *c, void *dst, size_t n, loom_status *st);
loom_code loom__ps_recv_end(loom_ps_client *c, const loom_ps_hdr *h, loom_status *st);
/* A reply of exactly out_len body bytes, read whole into out (c->hdr holds its header); any other length
 * closes the connection (DATA_LOSS: the stream is out of step). */
loom_code loom__ps_small_reply(loom_ps_client *c, uint16_t opcode, void *out, size_t out_len, loom_status *st);
loom_code loom__ps_pull_send(loom_ps_client *c, uint32_t var_id, uint64_t have, loom_status *st);
/* read_version: the version the gradient was computed on (UINT64_MAX: unknown). */
loom_code loom__ps_push_send(loom_ps_client *c, uint16_t opcode, uint32_t var_id, uint64_t read_version,
                             const float *grad, int64_t numel, loom_status *st);
loom_code loom__ps_value_recv(loom_ps_client *c, uint16_t opcode, float *out, int64_t numel, uint64_t *version,
                              int *changed, loom_status *st);

#endif
