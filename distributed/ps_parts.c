/* distributed/ps_parts.c - the pipelined dense push+pull over TCP (ps_parts.h): the part rules both
 * sides share, and the client's exchange that writes parts while it reads their replies. */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include "base/base.h"
#include "base/crc32c.h"
#include "base/fsutil.h"
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

int64_t loom__ps_parts_elems(const loom_ps_client *c, int64_t numel) {
  if (c->part_bytes < 0 || c->parts_ok < 0 || c->retry) return 0;
  int64_t b = c->part_bytes ? c->part_bytes : LOOM_PS_PART_DEFAULT_BYTES;
  if (b < LOOM_PS_PART_MIN_BYTES) b = LOOM_PS_PART_MIN_BYTES;
  int64_t e = b / 64 * 16; /* a multiple of 16 floats: each part's kernel call splits like the one-frame path's */
  if (numel <= e) return 0; /* one part: one frame does the same */
  if ((numel + e - 1) / e > 1000) e = ((numel + 999) / 1000 + 15) / 16 * 16; /* at most ~1000 parts in flight */
  return e;
}

static loom_code probe(loom_ps_client *c, loom_status *st) {
  uint8_t b[8];
  loom_code rc = loom__ps_send(c, LOOM_PS_PARTS_PROBE, NULL, 0, NULL, 0, NULL, 0, st);
  if (!rc) rc = loom__ps_small_reply(c, LOOM_PS_PARTS_PROBE, b, sizeof b, st);
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

/* One connection's stream of parts: what has been written and read so far. */
typedef struct pstream {
  loom_ps_client *c;
  loom_ps_parts_item *it;
  int n;
  uint64_t id0;
  uint32_t total;
  /* writing: item sj, its part sp; sk parts fully written; soff of slen bytes of this part written */
  int sj;
  uint32_t sp, sk;
  size_t soff, slen;
  uint8_t sh[LOOM_PS_HDR + LOOM_PS_PART_FIXED];
  int64_t owed; /* value bytes of parts written and not answered yet (at most PARTS_WINDOW) */
  /* reading: item rj, its part rp; rk replies read; phase 0 header, 1 fields, 2 value, 3 an error's message */
  int rj;
  uint32_t rp, rk;
  int phase;
  size_t rgot;
  uint8_t rh[LOOM_PS_HDR], rf[16];
  loom_ps_hdr h;
  uint32_t crc;
  char msg[600];
  size_t msg_len;
  loom_code first;
  char first_msg[800];
} pstream;

#define CUT(p, code, what) cut((p)->c, st, (code), (p)->it[(p)->rj < (p)->n ? (p)->rj : 0].var_id, (p)->rp, \
                               (p)->it[(p)->rj < (p)->n ? (p)->rj : 0].np, (what))

/* The next part's header and fields (its gradient is written from the caller's buffer). */
static void ps_build(pstream *p) {
  const loom_ps_parts_item *x = &p->it[p->sj];
  int64_t off = (int64_t)p->sp * x->pe, cnt = x->numel - off < x->pe ? x->numel - off : x->pe;
  uint8_t *f = p->sh + LOOM_PS_HDR;
  loom__ps_put32(f, x->var_id);
  loom__ps_put32(f + 4, p->sp);
  loom__ps_put32(f + 8, x->np);
  loom__ps_put32(f + 12, 0);
  loom__ps_put64(f + 16, x->read_version);
  loom__ps_put64(f + 24, (uint64_t)off);
  uint32_t bcrc = loom__crc32c_extend(0, f, LOOM_PS_PART_FIXED);
  bcrc = loom__crc32c_extend(bcrc, x->grad + off, (size_t)cnt * 4);
  loom__ps_hdr_encode(p->sh, LOOM_PS_PUSHPULL_PART, 0, p->id0 + p->sk, NULL, 0, 0);
  loom__ps_put32(p->sh + 20, (uint32_t)(LOOM_PS_PART_FIXED + cnt * 4));
  loom__ps_put32(p->sh + 24, bcrc);
  p->slen = sizeof p->sh + (size_t)cnt * 4;
}

/* Replies a stream may owe before it stops writing parts: the PS stops reading a connection with
 * 64 MiB of replies unsent, and on loopback the writes alone could run that far ahead of the reads. */
#define PARTS_WINDOW ((int64_t)8 << 20)
static int ps_can_write(const pstream *p) { return p->sk < p->total && p->owed < PARTS_WINDOW; }

/* Writes until the socket is full, the window is, or every part is out. */
static loom_code ps_write(pstream *p, int *progress, loom_status *st) {
  while (ps_can_write(p)) {
    if (p->soff == 0) ps_build(p);
    const loom_ps_parts_item *x = &p->it[p->sj];
    int64_t off = (int64_t)p->sp * x->pe;
    struct iovec iov[2];
    int nv = 0;
    if (p->soff < sizeof p->sh) iov[nv++] = (struct iovec){p->sh + p->soff, sizeof p->sh - p->soff};
    size_t g0 = p->soff > sizeof p->sh ? p->soff - sizeof p->sh : 0;
    iov[nv++] = (struct iovec){(char *)(x->grad + off) + g0, p->slen - sizeof p->sh - g0};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)nv;
    ssize_t w = sendmsg(p->c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return LOOM_OK;
      return CUT(p, LOOM_UNAVAILABLE, strerror(errno));
    }
    p->c->bytes_sent += w;
    *progress = 1;
    p->soff += (size_t)w;
    if (p->soff == p->slen) {
      p->owed += (int64_t)(p->slen - sizeof p->sh);
      p->soff = 0;
      p->sk++;
      if (++p->sp == x->np) {
        p->sp = 0;
        do p->sj++; while (p->sj < p->n && p->it[p->sj].np == 0);
      }
    }
  }
  return LOOM_OK;
}

/* Reads what has come, into the items' outputs. */
static loom_code ps_read(pstream *p, int *progress, loom_status *st) {
  while (p->rk < p->total) {
    loom_ps_parts_item *x = &p->it[p->rj];
    int64_t off = (int64_t)p->rp * x->pe, cnt = x->numel - off < x->pe ? x->numel - off : x->pe;
    void *dst;
    size_t want;
    uint8_t sink[512];
    if (p->phase == 0) dst = p->rh + p->rgot, want = sizeof p->rh - p->rgot;
    else if (p->phase == 1) dst = p->rf + p->rgot, want = sizeof p->rf - p->rgot;
    else if (p->phase == 2) {
      dst = (char *)(x->out + off) + p->rgot, want = (size_t)cnt * 4 - p->rgot;
      if (want > ((size_t)256 << 10)) want = (size_t)256 << 10; /* checksummed while in cache */
    } else {
      size_t room = p->msg_len < sizeof p->msg - 1 ? sizeof p->msg - 1 - p->msg_len : 0;
      dst = room ? (void *)(p->msg + p->msg_len) : (void *)sink;
      want = p->h.body_len - p->rgot;
      if (want > (room ? room : sizeof sink)) want = room ? room : sizeof sink;
    }
    ssize_t r = want ? recv(p->c->fd, dst, want, MSG_DONTWAIT) : 0;
    if (want && r == 0) return CUT(p, LOOM_UNAVAILABLE, "connection closed by the PS");
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return LOOM_OK;
      return CUT(p, LOOM_UNAVAILABLE, strerror(errno));
    }
    p->c->bytes_received += r;
    *progress = 1;
    p->rgot += (size_t)r;
    if (p->phase != 0 && r > 0) p->crc = loom__crc32c_extend(p->crc, dst, (size_t)r); /* body bytes */
    if (p->phase == 3 && dst == (void *)(p->msg + p->msg_len)) p->msg_len += (size_t)r;
    int next = 0;
    if (p->phase == 0 && p->rgot == sizeof p->rh) {
      char why[160];
      loom_code hc = loom__ps_hdr_decode(p->rh, p->c->max_frame, &p->h, why, sizeof why);
      if (hc) return CUT(p, LOOM_DATA_LOSS, why);
      if (!(p->h.flags & LOOM_PS_FLAG_REPLY) || p->h.opcode != LOOM_PS_PUSHPULL_PART ||
          p->h.request_id != p->id0 + p->rk)
        return CUT(p, LOOM_DATA_LOSS, "a reply out of step");
      p->rgot = 0;
      p->crc = 0;
      if (p->h.status) {
        p->phase = 3;
        p->msg_len = 0;
        if (p->h.body_len == 0) next = 1;
      } else if (p->h.body_len != 16 + 4 * (uint64_t)cnt) {
        return CUT(p, LOOM_DATA_LOSS, "a part reply of the wrong size");
      } else {
        p->phase = 1;
      }
    } else if (p->phase == 1 && p->rgot == sizeof p->rf) {
      if (loom__ps_get64(p->rf + 8) != (uint64_t)off) return CUT(p, LOOM_DATA_LOSS, "a part reply at the wrong offset");
      x->version = loom__ps_get64(p->rf);
      p->phase = 2;
      p->rgot = 0;
    } else if ((p->phase == 2 && p->rgot == (size_t)cnt * 4) || (p->phase == 3 && p->rgot == p->h.body_len)) {
      next = 1;
    }
    if (!next) continue;
    if (p->crc != p->h.body_crc) return CUT(p, LOOM_DATA_LOSS, "CRC-32C mismatch");
    if (p->phase == 3 && !p->first) {
      p->msg[p->msg_len] = 0;
      p->first = p->h.status < LOOM_CODE_COUNT ? (loom_code)p->h.status : LOOM_UNKNOWN;
      snprintf(p->first_msg, sizeof p->first_msg, "ps %s refused part %u of %u of var %u: %s", p->c->addr, p->rp,
               x->np, x->var_id, p->msg);
    }
    p->owed -= cnt * 4;
    p->phase = 0, p->rgot = 0, p->rk++;
    if (++p->rp == x->np) {
      p->rp = 0;
      do p->rj++; while (p->rj < p->n && p->it[p->rj].np == 0);
    }
  }
  return LOOM_OK;
}

/* Plans batch b's stream (asks PARTS_PROBE first where needed); a batch that goes as one frame each is
 * done here (all out, then all replies) and gets total 0. */
static loom_code ps_prepare(const loom_ps_parts_batch *b, pstream *p, loom_status *st) {
  loom_ps_client *c = b->c;
  loom_ps_parts_item *it = b->items;
  int n = b->n;
  memset(p, 0, sizeof *p);
  p->c = c;
  p->it = it;
  p->n = n;
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
      it[j].np = 0;
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
    if (!it[j].np && it[j].numel > 0) /* a small one among parts: one part (the stream has one kind) */
      it[j].pe = it[j].numel, it[j].np = 1, total++;
  if (c->fd < 0) return loom_status_set(st, LOOM_UNAVAILABLE, "ps %s: not connected", c->addr);
  p->total = total;
  p->id0 = c->next_id + 1;
  c->next_id += total;
  c->pending = LOOM_PS_PUSHPULL_PART;
  c->big_out = 1;
  while (p->sj < n && it[p->sj].np == 0) p->sj++;
  while (p->rj < n && it[p->rj].np == 0) p->rj++;
  return LOOM_OK;
}

static loom_code ps_fail_all(pstream *ps, int nb, loom_code rc) {
  for (int k = 0; k < nb; k++) /* the other streams are out of step now: their connections are closed */
    if (ps[k].rk < ps[k].total && ps[k].c->fd >= 0) {
      close(ps[k].c->fd);
      ps[k].c->fd = -1;
    }
  return rc;
}

loom_code loom__ps_pushpull_parts_multi(loom_ps_parts_batch *b, int nb, loom_status *st) {
  pstream one, *ps = nb == 1 ? &one : loom__calloc((size_t)nb, sizeof *ps);
  if (!ps) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "no memory for %d part streams", nb);
  loom_code rc = LOOM_OK;
  for (int k = 0; k < nb && !rc; k++) rc = ps_prepare(&b[k], &ps[k], st);
  struct pollfd pf[64];
  double deadline = loom__mono_secs() + (nb ? b[0].c->timeout_s : 0);
  for (;;) {
    if (rc) break;
    int np = 0, idx[64];
    for (int k = 0; k < nb && np < 64; k++)
      if (ps[k].rk < ps[k].total) {
        pf[np] = (struct pollfd){.fd = ps[k].c->fd, .events = (short)(POLLIN | (ps_can_write(&ps[k]) ? POLLOUT : 0))};
        idx[np++] = k;
      }
    if (!np) break;
    double left = deadline - loom__mono_secs();
    if (left <= 0) {
      pstream *p = &ps[idx[0]];
      rc = CUT(p, LOOM_DEADLINE_EXCEEDED, "timed out");
      break;
    }
    int pr = poll(pf, (nfds_t)np, (int)(left * 1000) + 1);
    if (pr < 0 && errno != EINTR) {
      pstream *p = &ps[idx[0]];
      rc = CUT(p, LOOM_UNAVAILABLE, strerror(errno));
      break;
    }
    if (pr <= 0) continue;
    int progress = 0;
    for (int q = 0; q < np && !rc; q++) {
      pstream *p = &ps[idx[q]];
      if (pf[q].revents & (POLLOUT | POLLERR | POLLHUP)) rc = ps_write(p, &progress, st);
      if (!rc && (pf[q].revents & (POLLIN | POLLERR | POLLHUP))) rc = ps_read(p, &progress, st);
    }
    if (progress) {
      double to = 0;
      for (int k = 0; k < nb; k++) to = ps[k].c->timeout_s > to ? ps[k].c->timeout_s : to;
      deadline = loom__mono_secs() + to;
    }
  }
  if (rc) rc = ps_fail_all(ps, nb, rc);
  for (int k = 0; k < nb && !rc; k++) {
    if (!ps[k].total) continue;
    ps[k].c->acked = ps[k].c->next_id;
    ps[k].c->hdr = ps[k].h;
    if (ps[k].first) rc = loom_status_set(st, ps[k].first, "%s", ps[k].first_msg);
  }
  if (ps != &one) loom__free(ps);
  return rc;
}
#undef CUT

loom_code loom__ps_pushpull_parts_batch(loom_ps_client *c, loom_ps_parts_item *it, int n, loom_status *st) {
  loom_ps_parts_batch b = {c, it, n};
  return loom__ps_pushpull_parts_multi(&b, 1, st);
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
