/* distributed/ps_parts.h - internal: the pipelined dense push+pull over TCP.
 *
 * A large dense shard's push+pull goes out as PUSHPULL_PART frames (wire.h), each with its own CRC;
 * the PS's shard thread applies each part as it arrives and answers it at once with the updated
 * elements, so the gradient's upload and the value's download overlap on the link (and, on one host,
 * the client's and the PS's cores work at the same time).
 *
 * Rules (the PS checks all of them; a part that breaks one is refused with INVALID_ARGUMENT and the
 * connection's push is abandoned, so its later parts are refused too; the connection stays open):
 *  - ASYNC PS only (BOUNDED / SYNC refuse parts with FAILED_PRECONDITION; clients ask with PARTS_PROBE
 *    and use the one-frame PUSHPULL there).
 *  - Parts of one push come in order on one connection: part 0 at offset 0 opens it and fixes the part
 *    size (its count) and nparts = ceil(numel / count); part k is at offset k * count, every part but
 *    the last has count elements and the last ends at numel. One push at a time per connection and
 *    shard thread: a part of another variable, or another nparts, before the last part is refused.
 *  - The variable's version (and Adam's beta powers, ...) advance once per push, when its last part is
 *    applied; replies carry the version at the time (the last part's: the version after the push).
 *  - The client keeps at most 8 MiB of parts unanswered per connection (reads while it writes), so the
 *    PS never has 64 MiB of replies queued for it. The PS applies a part on its loop thread when the
 *    variable's shard thread is idle, else on that shard thread, and answers it at once.
 *  - Parts are never re-sent one by one and are not in the duplicate window: a push cut off mid-way
 *    (lost connection, refused part) leaves its applied parts applied and the version unchanged, and the
 *    client reports UNAVAILABLE / the refusal instead of retrying (a re-sent whole push would apply the
 *    first parts twice). */
#ifndef LOOM_DIST_PS_PARTS_H
#define LOOM_DIST_PS_PARTS_H
#include <stdint.h>
#include "distributed/ps_conn.h"

#define LOOM_PS_PART_FIXED 32                      /* the part request's fixed fields */
#define LOOM_PS_PART_DEFAULT_BYTES ((int32_t)128 << 10)
#define LOOM_PS_PART_MIN_BYTES 4096

/* A part request's fields. */
typedef struct loom_ps_part {
  uint32_t var_id, part, nparts;
  uint64_t read_version, offset;
  int64_t count;
  const float *grad;
} loom_ps_part;

/* One connection's open push on one shard thread (touched by that shard thread only). */
typedef struct loom_ps_parts_state {
  int active;
  uint32_t var_id, nparts, next;
  int64_t count0;
} loom_ps_parts_state;

/* Parses a PUSHPULL_PART body; non-OK with the reason in why. */
loom_code loom__ps_part_parse(const uint8_t *body, uint32_t len, loom_ps_part *p, char *why, size_t why_len);
/* Checks part p of a variable of numel elements against the connection's open push ps and moves it on
 * (on the last part the push is closed: *last = 1). A refused part closes the open push. */
loom_code loom__ps_part_order(loom_ps_parts_state *ps, const loom_ps_part *p, int64_t numel, int *last, char *why,
                              size_t why_len);

/* Client: the part size in elements a push+pull of numel elements uses on c, or 0 for one frame
 * (parts off, too small, or a PS that does not take parts). Does no I/O. */
int64_t loom__ps_parts_elems(const loom_ps_client *c, int64_t numel);
/* Client: push+pull of var_id as parts (or one frame when the PS turns out not to take parts: asks
 * PARTS_PROBE once per connection). No reply may be owed on c. out receives the new value, *version the
 * version after the push, *stale 1 when it was dropped (one-frame path only). */
loom_code loom__ps_pushpull_parts(loom_ps_client *c, uint32_t var_id, uint64_t read_version, const float *grad,
                                  float *out, int64_t numel, uint64_t *version, int *stale, loom_status *st);

/* One push+pull of a batch (loom__ps_pushpull_parts_batch). */
typedef struct loom_ps_parts_item {
  uint32_t var_id;
  uint64_t read_version;
  const float *grad;
  float *out;
  int64_t numel;
  uint64_t version; /* out: the version after the push */
  int stale;        /* out: dropped (one-frame path on a BOUNDED / SYNC PS only) */
  int64_t pe;       /* internal: part size */
  uint32_t np;      /* internal: parts */
} loom_ps_parts_item;
/* Client: several push+pulls on one connection; with parts, one stream (the next variable's parts go out
 * while the previous one's replies come in); else one frame each, all sent before the replies are read.
 * No reply may be owed on c for the parts path. */
loom_code loom__ps_pushpull_parts_batch(loom_ps_client *c, loom_ps_parts_item *items, int n, loom_status *st);
/* Client: batches on several connections (several PS tasks, at most 64) at once, polled together. */
typedef struct loom_ps_parts_batch {
  loom_ps_client *c;
  loom_ps_parts_item *items;
  int n;
} loom_ps_parts_batch;
loom_code loom__ps_pushpull_parts_multi(loom_ps_parts_batch *b, int nb, loom_status *st);

#endif
