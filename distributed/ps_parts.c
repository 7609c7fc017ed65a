/* distributed/ps_parts.c - the pipelined dense push+pull over TCP (ps_parts.h): the part rules both
 * sides share, and the client's exchange that writes parts while it reads their replies. */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include "base/base.h"
#include "base/crc32c.h"
#include "distributed/ps_parts.h"

/* ---------------- the rules (the PS's shard threads) ---------------- */

loom_code loom__ps_part_parse(const uint8_t *body, uint32_t len, loom_ps_part *p, char *why, size_t why_len) {
  if (len < LOOM_PS_PART_FIXED + 4 || (len - LOOM_PS_PART_FIXED) % 4) {
    snprintf(why, why_len, "body of %u bytes (32 bytes of fields, then at least one float)", len);
    return LOOM_INVALID_ARGUMENT;
  }
  p->var_id = loom__ps_get32(body);
  p->part = loom__ps_get32(body + 4);
  p->nparts = loom__ps_get32(body + 8);
  p->read_version = loom__ps_get64(body + 16);
  p->offset = loom__ps_get64(body + 24);
  p->count = (int64_t)(len - LOOM_PS_PART_FIXED) / 4;
  p->grad = (const float *)(body + LOOM_PS_PART_FIXED);
  if (p->nparts == 0 || p->part >= p->nparts) {
    snprintf(why, why_len, "var %u: part %u of %u", p->var_id, p->part, p->nparts);
    return LOOM_INVALID_ARGUMENT;
  }
  return LOOM_OK;
}

static loom_code refuse(loom_ps_parts_state *ps, char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static loom_code refuse(loom_ps_parts_state *ps, char *why, size_t why_len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, why_len, fmt, ap);
  va_end(ap);
  ps->active = 0; /* the open push is abandoned: its later parts are refused too */
  return LOOM_INVALID_ARGUMENT;
}

loom_code loom__ps_part_order(loom_ps_parts_state *ps, const loom_ps_part *p, int64_t numel, int *last, char *why,
                              size_t why_len) {
  *last = 0;
  unsigned long long off = (unsigned long long)p->offset;
  long long cnt = (long long)p->count, n = (long long)numel;
  if (p->offset > (uint64_t)numel || (int64_t)p->offset + p->count > numel)
    return refuse(ps, why, why_len, "var %u part %u: elements [%llu, %llu) are outside the variable's %lld",
                  p->var_id, p->part, off, off + (unsigned long long)cnt, n);
  if (p->part == 0) {
    if (ps->active)
      return refuse(ps, why, why_len, "var %u: a new push began while the push of var %u was at part %u of %u",
                    p->var_id, ps->var_id, ps->next, ps->nparts);
    if (p->offset != 0) return refuse(ps, why, why_len, "var %u part 0 at offset %llu (must be 0)", p->var_id, off);
    int64_t want = (numel + p->count - 1) / p->count;
    if ((int64_t)p->nparts != want)
      return refuse(ps, why, why_len, "var %u: %u parts of %lld elements do not make the variable's %lld (%lld parts)",
                    p->var_id, p->nparts, cnt, n, (long long)want);
    ps->var_id = p->var_id;
    ps->nparts = p->nparts;
    ps->count0 = p->count;
    ps->next = 1;
    ps->active = 1;
  } else {
    if (!ps->active)
      return refuse(ps, why, why_len, "var %u part %u of %u without the push's earlier parts", p->var_id, p->part,
                    p->nparts);
    if (p->var_id != ps->var_id || p->nparts != ps->nparts)
      return refuse(ps, why, why_len, "var %u part %u of %u inside the push of var %u (%u parts)", p->var_id, p->part,
                    p->nparts, ps->var_id, ps->nparts);
    if (p->part != ps->next)
      return refuse(ps, why, why_len, "var %u: part %u came where part %u was due (parts go in order)", p->var_id,
                    p->part, ps->next);
    int64_t want_off = (int64_t)p->part * ps->count0;
    int64_t want_cnt = p->part + 1 == p->nparts ? numel - want_off : ps->count0;
    if ((int64_t)p->offset != want_off || p->count != want_cnt)
      return refuse(ps, why, why_len, "var %u part %u: %lld elements at %llu (expected %lld at %lld)", p->var_id,
                    p->part, cnt, off, (long long)want_cnt, (long long)want_off);
    ps->next++;
  }
  if (p->part + 1 == p->nparts) {
    ps->active = 0;
    *last = 1;
  }
  return LOOM_OK;
}

/* ---------------- the client ---------------- */

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int64_t loom__ps_parts_elems(const loom_ps_client *c, int64_t numel) {
  if (c->part_bytes < 0 || c->parts_ok < 0 || c->retry) return 0;
  int64_t b = c->part_bytes ? c->part_bytes : LOOM_PS_PART_DEFAULT_BYTES;
  if (b < LOOM_PS_PART_MIN_BYTES) b = LOOM_PS_PART_MIN_BYTES;
  int64_t e = b / 64 * 16; /* a multiple of 16 floats: each part's kernel call splits like the one-frame path's */
  if (numel <= e) return 0; /* one part: one frame does the same */
  if ((numel + e - 1) / e > 1000) e = (numel + 999) / 1000; /* at most 1000 parts (the PS's in-flight window) */
  return e;
}

static loom_code probe(loom_ps_client *c, loom_status *st) {
  loom_code rc = loom__ps_send(c, LOOM_PS_PARTS_PROBE, NULL, 0, NULL, 0, NULL, 0, st);
  loom_ps_hdr h;
  if (!rc) rc = loom__ps_recv_hdr(c, LOOM_PS_PARTS_PROBE, &h, st);
  if (rc) return rc;
  uint8_t b[8] = {0};
  if (h.body_len != 8) {
    close(c->fd);
    c->fd = -1;
    return loom_status_set(st, LOOM_DATA_LOSS, "ps %s: PARTS_PROBE reply of %u bytes", c->addr, h.body_len);
  }
  rc = loom__ps_recv_body(c, b, 8, st);
  if (!rc) rc = loom__ps_recv_end(c, &h, st);
  if (!rc) c->parts_ok = loom__ps_get32(b) ? 1 : -1;
  return rc;
}

/* The connection is out of step (or gone): closed; what was cut off is said once. */
static loom_code cut(loom_ps_client *c, loom_status *st, loom_code code, uint32_t var_id, uint32_t done, uint32_t np,
                     const char *what) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  return loom_status_set(st, code,
                         "ps %s: pipelined push+pull of var %u cut off after %u of %u parts were answered (%s); "
                         "not retried: the parts applied stay applied",
                         c->addr, var_id, done, np, what);
}

loom_code loom__ps_pushpull_parts(loom_ps_client *c, uint32_t var_id, uint64_t read_version, const float *grad,
                                  float *out, int64_t numel, uint64_t *version, int *stale, loom_status *st) {
  if (stale) *stale = 0;
  int64_t pe = loom__ps_parts_elems(c, numel);
  if (pe > 0 && c->parts_ok == 0) {
    loom_code rc = probe(c, st);
    if (rc) return rc;
    pe = loom__ps_parts_elems(c, numel);
  }
  if (pe == 0) { /* one frame */
    loom_code rc = loom__ps_push_send(c, LOOM_PS_PUSHPULL, var_id, read_version, grad, numel, st);
    if (!rc) rc = loom__ps_value_recv(c, LOOM_PS_PUSHPULL, out, numel, version, NULL, st);
    if (!rc && stale) *stale = (c->hdr.flags & LOOM_PS_FLAG_STALE) != 0;
    return rc;
  }
  if (c->fd < 0) return loom_status_set(st, LOOM_UNAVAILABLE, "ps %s: not connected", c->addr);
  if (c->acked != c->next_id)
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "ps %s: a pipelined push+pull with %llu replies owed",
                           c->addr, (unsigned long long)(c->next_id - c->acked));
  uint32_t np = (uint32_t)((numel + pe - 1) / pe);
  uint64_t id0 = c->next_id + 1;
  c->next_id += np;
  c->pending = LOOM_PS_PUSHPULL_PART;
  c->big_out = 1;
  /* sending: part sp, soff bytes of its header + fields + gradient written */
  uint32_t sp = 0;
  size_t soff = 0, slen = 0;
  uint8_t sh[LOOM_PS_HDR + LOOM_PS_PART_FIXED];
  /* receiving: reply rp; phase 0 header, 1 fields, 2 value, 3 an error's message */
  uint32_t rp = 0;
  int phase = 0;
  size_t rgot = 0;
  uint8_t rh[LOOM_PS_HDR], rf[16];
  loom_ps_hdr h;
  memset(&h, 0, sizeof h);
  uint32_t crc = 0;
  char msg[600];
  size_t msg_len = 0;
  loom_code first = LOOM_OK;
  char first_msg[800] = "";
  uint64_t ver = 0;
  double deadline = mono_s() + c->timeout_s;
  while (rp < np) {
    if (sp < np && soff == 0) { /* the next part's header and fields */
      int64_t off = (int64_t)sp * pe, cnt = numel - off < pe ? numel - off : pe;
      uint8_t *f = sh + LOOM_PS_HDR;
      loom__ps_put32(f, var_id);
      loom__ps_put32(f + 4, sp);
      loom__ps_put32(f + 8, np);
      loom__ps_put32(f + 12, 0);
      loom__ps_put64(f + 16, read_version);
      loom__ps_put64(f + 24, (uint64_t)off);
      uint32_t bcrc = loom__crc32c_extend(0, f, LOOM_PS_PART_FIXED);
      bcrc = loom__crc32c_extend(bcrc, grad + off, (size_t)cnt * 4);
      loom__ps_hdr_encode(sh, LOOM_PS_PUSHPULL_PART, 0, id0 + sp, NULL, 0, 0);
      loom__ps_put32(sh + 20, (uint32_t)(LOOM_PS_PART_FIXED + cnt * 4));
      loom__ps_put32(sh + 24, bcrc);
      slen = sizeof sh + (size_t)cnt * 4;
    }
    double left = deadline - mono_s();
    if (left <= 0) return cut(c, st, LOOM_DEADLINE_EXCEEDED, var_id, rp, np, "timed out");
    struct pollfd pf = {.fd = c->fd, .events = (short)(POLLIN | (sp < np ? POLLOUT : 0))};
    int pr = poll(&pf, 1, (int)(left * 1000) + 1);
    if (pr < 0 && errno != EINTR) return cut(c, st, LOOM_UNAVAILABLE, var_id, rp, np, strerror(errno));
    if (pr <= 0) continue;
    int progress = 0;
    while (sp < np && (pf.revents & (POLLOUT | POLLERR | POLLHUP))) { /* write until the socket is full */
      int64_t off = (int64_t)sp * pe;
      struct iovec iov[2];
      int n = 0;
      if (soff < sizeof sh) iov[n++] = (struct iovec){sh + soff, sizeof sh - soff};
      size_t g0 = soff > sizeof sh ? soff - sizeof sh : 0;
      iov[n++] = (struct iovec){(char *)(grad + off) + g0, slen - sizeof sh - g0};
      struct msghdr m;
      memset(&m, 0, sizeof m);
      m.msg_iov = iov;
      m.msg_iovlen = (size_t)n;
      ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return cut(c, st, LOOM_UNAVAILABLE, var_id, rp, np, strerror(errno));
      }
      c->bytes_sent += w;
      progress = 1;
      soff += (size_t)w;
      if (soff == slen) {
        sp++;
        soff = 0;
        break; /* the next part's header is built at the top of the loop */
      }
    }
    for (;;) { /* read what has come */
      void *dst;
      size_t want;
      if (phase == 0) dst = rh + rgot, want = sizeof rh - rgot;
      else if (phase == 1) dst = rf + rgot, want = sizeof rf - rgot;
      else if (phase == 2) {
        int64_t off = (int64_t)rp * pe, cnt = numel - off < pe ? numel - off : pe;
        dst = (char *)(out + off) + rgot, want = (size_t)cnt * 4 - rgot;
        if (want > ((size_t)256 << 10)) want = (size_t)256 << 10; /* checksummed while in cache */
      } else {
        size_t room = msg_len < sizeof msg - 1 ? sizeof msg - 1 - msg_len : 0;
        uint8_t sink[512];
        dst = room ? (void *)(msg + msg_len) : (void *)sink;
        want = h.body_len - rgot;
        if (want > (room ? room : sizeof sink)) want = room ? room : sizeof sink;
      }
      ssize_t r = want ? recv(c->fd, dst, want, MSG_DONTWAIT) : 0;
      if (want && r == 0) return cut(c, st, LOOM_UNAVAILABLE, var_id, rp, np, "connection closed by the PS");
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return cut(c, st, LOOM_UNAVAILABLE, var_id, rp, np, strerror(errno));
      }
      c->bytes_received += r;
      progress = 1;
      rgot += (size_t)r;
      if (phase != 0 && r > 0) crc = loom__crc32c_extend(crc, dst, (size_t)r); /* body bytes */
      if (phase == 3 && dst == (void *)(msg + msg_len)) msg_len += (size_t)r;
      int64_t off = (int64_t)rp * pe, cnt = numel - off < pe ? numel - off : pe;
      if (phase == 0 && rgot == sizeof rh) {
        char why[160];
        loom_code hc = loom__ps_hdr_decode(rh, c->max_frame, &h, why, sizeof why);
        if (hc) return cut(c, st, LOOM_DATA_LOSS, var_id, rp, np, why);
        if (!(h.flags & LOOM_PS_FLAG_REPLY) || h.opcode != LOOM_PS_PUSHPULL_PART || h.request_id != id0 + rp)
          return cut(c, st, LOOM_DATA_LOSS, var_id, rp, np, "a reply out of step");
        rgot = 0;
        crc = 0;
        if (h.status) {
          phase = 3;
          msg_len = 0;
        } else if (h.body_len != 16 + 4 * (uint64_t)cnt) {
          return cut(c, st, LOOM_DATA_LOSS, var_id, rp, np, "a part reply of the wrong size");
        } else {
          phase = 1;
        }
      } else if (phase == 1 && rgot == sizeof rf) {
        if (loom__ps_get64(rf + 8) != (uint64_t)off)
          return cut(c, st, LOOM_DATA_LOSS, var_id, rp, np, "a part reply at the wrong offset");
        ver = loom__ps_get64(rf);
        phase = 2;
        rgot = 0;
      } else if (phase == 2 && rgot == (size_t)cnt * 4) {
        if (crc != h.body_crc) return cut(c, st, LOOM_DATA_LOSS, var_id, rp, np, "CRC-32C mismatch");
        phase = 0, rgot = 0, rp++;
      } else if (phase == 3 && rgot == h.body_len) {
        if (crc != h.body_crc) return cut(c, st, LOOM_DATA_LOSS, var_id, rp, np, "CRC-32C mismatch");
        if (!first) {
          msg[msg_len] = 0;
          first = h.status < LOOM_CODE_COUNT ? (loom_code)h.status : LOOM_UNKNOWN;
          snprintf(first_msg, sizeof first_msg, "ps %s refused part %u of %u of var %u: %s", c->addr, rp, np, var_id,
                   msg);
        }
        phase = 0, rgot = 0, rp++;
      }
      if (rp == np) break;
    }
    if (progress) deadline = mono_s() + c->timeout_s;
  }
  c->acked = c->next_id;
  c->hdr = h;
  if (first) return loom_status_set(st, first, "%s", first_msg);
  if (version) *version = ver;
  return LOOM_OK;
}
