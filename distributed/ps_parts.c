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

/* Several push+pulls on one connection as one stream of parts: the parts of item j + 1 go out while
 * item j's replies still come in (no pipeline drain between variables). */
loom_code loom__ps_pushpull_parts_batch(loom_ps_client *c, loom_ps_parts_item *it, int n, loom_status *st) {
  int need_probe = 0;
  for (int j = 0; j < n; j++) {
    it[j].stale = 0;
    if (loom__ps_parts_elems(c, it[j].numel) > 0 && c->parts_ok == 0) need_probe = 1;
  }
  if (need_probe) {
    loom_code rc = probe(c, st);
    if (rc) return rc;
  }
  uint32_t total = 0;
  for (int j = 0; j < n; j++) {
    it[j].pe = loom__ps_parts_elems(c, it[j].numel);
    it[j].np = it[j].pe ? (uint32_t)((it[j].numel + it[j].pe - 1) / it[j].pe) : 0;
    total += it[j].np;
  }
  if (total == 0 || c->acked != c->next_id) { /* one frame each: all out, then all replies */
    for (int j = 0; j < n; j++) {
      loom_code rc = loom__ps_push_send(c, LOOM_PS_PUSHPULL, it[j].var_id, it[j].read_version, it[j].grad,
                                        it[j].numel, st);
      if (rc) return rc;
    }
    for (int j = 0; j < n; j++) {
      loom_code rc = loom__ps_value_recv(c, LOOM_PS_PUSHPULL, it[j].out, it[j].numel, &it[j].version, NULL, st);
      if (rc) return rc;
      it[j].stale = (c->hdr.flags & LOOM_PS_FLAG_STALE) != 0;
    }
    return LOOM_OK;
  }
  for (int j = 0; j < n; j++)
    if (!it[j].np) /* a small one among parts: all parts or none, the stream needs one kind */
      it[j].pe = it[j].numel > 0 ? it[j].numel : 1, it[j].np = it[j].numel > 0 ? 1 : 0, total += it[j].np;
  if (c->fd < 0) return loom_status_set(st, LOOM_UNAVAILABLE, "ps %s: not connected", c->addr);
  uint64_t id0 = c->next_id + 1;
  c->next_id += total;
  c->pending = LOOM_PS_PUSHPULL_PART;
  c->big_out = 1;
  /* sending: item sj, part sp, soff bytes of its header + fields + gradient written */
  int sj = 0;
  uint32_t sp = 0, sk = 0; /* sk: parts fully sent */
  size_t soff = 0, slen = 0;
  uint8_t sh[LOOM_PS_HDR + LOOM_PS_PART_FIXED];
  /* receiving: item rj, part rp; phase 0 header, 1 fields, 2 value, 3 an error's message */
  int rj = 0;
  uint32_t rp = 0, rk = 0;
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
  while (sj < n && it[sj].np == 0) sj++;
  while (rj < n && it[rj].np == 0) rj++;
#define CUT(code, what) cut(c, st, (code), it[rj].var_id, rp, it[rj].np, (what))
  double deadline = mono_s() + c->timeout_s;
  while (rk < total) {
    if (sk < total && soff == 0) { /* the next part's header and fields */
      const loom_ps_parts_item *x = &it[sj];
      int64_t off = (int64_t)sp * x->pe, cnt = x->numel - off < x->pe ? x->numel - off : x->pe;
      uint8_t *f = sh + LOOM_PS_HDR;
      loom__ps_put32(f, x->var_id);
      loom__ps_put32(f + 4, sp);
      loom__ps_put32(f + 8, x->np);
      loom__ps_put32(f + 12, 0);
      loom__ps_put64(f + 16, x->read_version);
      loom__ps_put64(f + 24, (uint64_t)off);
      uint32_t bcrc = loom__crc32c_extend(0, f, LOOM_PS_PART_FIXED);
      bcrc = loom__crc32c_extend(bcrc, x->grad + off, (size_t)cnt * 4);
      loom__ps_hdr_encode(sh, LOOM_PS_PUSHPULL_PART, 0, id0 + sk, NULL, 0, 0);
      loom__ps_put32(sh + 20, (uint32_t)(LOOM_PS_PART_FIXED + cnt * 4));
      loom__ps_put32(sh + 24, bcrc);
      slen = sizeof sh + (size_t)cnt * 4;
    }
    double left = deadline - mono_s();
    if (left <= 0) return CUT(LOOM_DEADLINE_EXCEEDED, "timed out");
    struct pollfd pf = {.fd = c->fd, .events = (short)(POLLIN | (sk < total ? POLLOUT : 0))};
    int pr = poll(&pf, 1, (int)(left * 1000) + 1);
    if (pr < 0 && errno != EINTR) return CUT(LOOM_UNAVAILABLE, strerror(errno));
    if (pr <= 0) continue;
    int progress = 0;
    while (sk < total && (pf.revents & (POLLOUT | POLLERR | POLLHUP))) { /* write until the socket is full */
      const loom_ps_parts_item *x = &it[sj];
      int64_t off = (int64_t)sp * x->pe;
      struct iovec iov[2];
      int nv = 0;
      if (soff < sizeof sh) iov[nv++] = (struct iovec){sh + soff, sizeof sh - soff};
      size_t g0 = soff > sizeof sh ? soff - sizeof sh : 0;
      iov[nv++] = (struct iovec){(char *)(x->grad + off) + g0, slen - sizeof sh - g0};
      struct msghdr m;
      memset(&m, 0, sizeof m);
      m.msg_iov = iov;
      m.msg_iovlen = (size_t)nv;
      ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return CUT(LOOM_UNAVAILABLE, strerror(errno));
      }
      c->bytes_sent += w;
      progress = 1;
      soff += (size_t)w;
      if (soff == slen) {
        soff = 0;
        sk++;
        if (++sp == x->np) {
          sp = 0;
          do sj++; while (sj < n && it[sj].np == 0);
        }
        break; /* the next part's header is built at the top of the loop */
      }
    }
    for (;;) { /* read what has come */
      loom_ps_parts_item *x = &it[rj];
      int64_t off = (int64_t)rp * x->pe, cnt = x->numel - off < x->pe ? x->numel - off : x->pe;
      void *dst;
      size_t want;
      if (phase == 0) dst = rh + rgot, want = sizeof rh - rgot;
      else if (phase == 1) dst = rf + rgot, want = sizeof rf - rgot;
      else if (phase == 2) {
        dst = (char *)(x->out + off) + rgot, want = (size_t)cnt * 4 - rgot;
        if (want > ((size_t)256 << 10)) want = (size_t)256 << 10; /* checksummed while in cache */
      } else {
        size_t room = msg_len < sizeof msg - 1 ? sizeof msg - 1 - msg_len : 0;
        static __thread uint8_t sink[512];
        dst = room ? (void *)(msg + msg_len) : (void *)sink;
        want = h.body_len - rgot;
        if (want > (room ? room : sizeof sink)) want = room ? room : sizeof sink;
      }
      ssize_t r = want ? recv(c->fd, dst, want, MSG_DONTWAIT) : 0;
      if (want && r == 0) return CUT(LOOM_UNAVAILABLE, "connection closed by the PS");
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return CUT(LOOM_UNAVAILABLE, strerror(errno));
      }
      c->bytes_received += r;
      progress = 1;
      rgot += (size_t)r;
      if (phase != 0 && r > 0) crc = loom__crc32c_extend(crc, dst, (size_t)r); /* body bytes */
      if (phase == 3 && dst == (void *)(msg + msg_len)) msg_len += (size_t)r;
      int next = 0;
      if (phase == 0 && rgot == sizeof rh) {
        char why[160];
        loom_code hc = loom__ps_hdr_decode(rh, c->max_frame, &h, why, sizeof why);
        if (hc) return CUT(LOOM_DATA_LOSS, why);
        if (!(h.flags & LOOM_PS_FLAG_REPLY) || h.opcode != LOOM_PS_PUSHPULL_PART || h.request_id != id0 + rk)
          return CUT(LOOM_DATA_LOSS, "a reply out of step");
        rgot = 0;
        crc = 0;
        if (h.status) {
          phase = 3;
          msg_len = 0;
          if (h.body_len == 0) next = 1;
        } else if (h.body_len != 16 + 4 * (uint64_t)cnt) {
          return CUT(LOOM_DATA_LOSS, "a part reply of the wrong size");
        } else {
          phase = 1;
        }
      } else if (phase == 1 && rgot == sizeof rf) {
        if (loom__ps_get64(rf + 8) != (uint64_t)off) return CUT(LOOM_DATA_LOSS, "a part reply at the wrong offset");
        x->version = loom__ps_get64(rf);
        phase = 2;
        rgot = 0;
      } else if (phase == 2 && rgot == (size_t)cnt * 4) {
        if (crc != h.body_crc) return CUT(LOOM_DATA_LOSS, "CRC-32C mismatch");
        next = 1;
      } else if (phase == 3 && rgot == h.body_len) {
        next = 1;
      }
      if (next && phase == 3) {
        if (crc != h.body_crc) return CUT(LOOM_DATA_LOSS, "CRC-32C mismatch");
        if (!first) {
          msg[msg_len] = 0;
          first = h.status < LOOM_CODE_COUNT ? (loom_code)h.status : LOOM_UNKNOWN;
          snprintf(first_msg, sizeof first_msg, "ps %s refused part %u of %u of var %u: %s", c->addr, rp, x->np,
                   x->var_id, msg);
        }
      }
      if (next) {
        phase = 0, rgot = 0, rk++;
        if (++rp == x->np) {
          rp = 0;
          do rj++; while (rj < n && it[rj].np == 0);
        }
        if (rk == total) break;
      }
    }
    if (progress) deadline = mono_s() + c->timeout_s;
  }
#undef CUT
  c->acked = c->next_id;
  c->hdr = h;
  if (first) return loom_status_set(st, first, "%s", first_msg);
  return LOOM_OK;
}

loom_code loom__ps_pushpull_parts(loom_ps_client *c, uint32_t var_id, uint64_t read_version, const float *grad,
                                  float *out, int64_t numel, uint64_t *version, int *stale, loom_status *st) {
  loom_ps_parts_item x;
  memset(&x, 0, sizeof x);
  x.var_id = var_id;
  x.read_version = read_version;
  x.grad = grad;
  x.out = out;
  x.numel = numel;
  loom_code rc = loom__ps_pushpull_parts_batch(c, &x, 1, st);
  if (!rc && version) *version = x.version;
  if (!rc && stale) *stale = x.stale;
  return rc;
}
