/* distributed/ps_conn.c - the framing and I/O of one connection to a PS task.
 *
 * Blocking sockets, every wait bounded by poll() with the connection's
 * timeout. A frame goes out gathered from the caller's buffers (sendmsg) and
 * a reply comes in split in halves (header, body pieces, end), the CRC
 * computed on the way, so that callers above (the client, shared memory, the
 * pipelined parts) can put one request on every PS before reading any reply
 * and receive values straight into their own buffers. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include "base/base.h"
#include "base/crc32c.h"
#include "base/fsutil.h"
#include "distributed/ps_conn.h"

static int wait_fd(loom_ps_client *c, short ev, double deadline) {
  for (;;) {
    double left = deadline - loom__mono_secs();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = c->fd, .events = ev};
    int r = poll(&p, 1, (int)(left * 1000) + 1);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

loom_code loom__ps_conn_fail(loom_ps_client *c, loom_status *st, const char *what, int err) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  if (err == ETIMEDOUT)
    return loom_status_set(st, LOOM_DEADLINE_EXCEEDED, "ps %s: %s timed out after %.1f s", c->addr, what,
                           c->timeout_s);
  if (err == 0) return loom_status_set(st, LOOM_UNAVAILABLE, "ps %s: connection closed by the PS during %s", c->addr, what);
  return loom_status_set(st, LOOM_UNAVAILABLE, "ps %s: %s: %s", c->addr, what, strerror(err));
}

static loom_code send_iov(loom_ps_client *c, struct iovec *iov, int n, loom_status *st) {
  if (c->fd < 0) return loom_status_set(st, LOOM_UNAVAILABLE, "ps %s: not connected", c->addr);
  double deadline = loom__mono_secs() + c->timeout_s;
  while (n > 0) {
    /* MSG_NOSIGNAL: a PS that died mid-request is EPIPE here (the caller
     * reconnects), not a SIGPIPE that ends the whole process */
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)n;
    ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        int r = wait_fd(c, POLLOUT, deadline);
        if (r <= 0) return loom__ps_conn_fail(c, st, "send", r == 0 ? ETIMEDOUT : errno);
        continue;
      }
      return loom__ps_conn_fail(c, st, "send", errno);
    }
    c->bytes_sent += w;
    while (n > 0 && (size_t)w >= iov->iov_len) {
      w -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + w;
      iov->iov_len -= (size_t)w;
    }
  }
  return LOOM_OK;
}

/* Busy-poll before sleeping (loom_ps_connect_options.busy_poll_us): non-blocking receives, yielding the
 * CPU between tries, until data (or EOF/error) is there or the budget is spent. Adaptive: a poll that
 * ends empty-handed skips the next 2^fails - 1 waits (at most 63). Returns recv's result (-1/EAGAIN:
 * nothing came within the budget, or no poll this time). */
static ssize_t spin_recv(loom_ps_client *c, void *p, size_t n) {
  errno = EAGAIN;
  if (c->spin_us <= 0) return -1;
  if (c->spin_skip > 0) {
    c->spin_skip--;
    return -1;
  }
  double end = loom__mono_secs() + c->spin_us * 1e-6;
  for (;;) {
    ssize_t r = recv(c->fd, p, n, MSG_DONTWAIT);
    if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      c->spin_fail = 0;
      return r;
    }
    if (loom__mono_secs() >= end) break;
    sched_yield();
  }
  if (c->spin_fail < 6) c->spin_fail++;
  c->spin_skip = (1 << c->spin_fail) - 1;
  errno = EAGAIN;
  return -1;
}

/* spin: this wait may busy-poll (a reply header, with no large request outstanding). */
static loom_code recv_exact(loom_ps_client *c, void *buf, size_t n, int spin, loom_status *st) {
  if (c->fd < 0) return loom_status_set(st, LOOM_UNAVAILABLE, "ps %s: not connected", c->addr);
  double deadline = loom__mono_secs() + c->timeout_s;
  char *p = buf;
  while (n > 0) {
    ssize_t r = recv(c->fd, p, n, 0);
    if (r < 0 && spin && (errno == EAGAIN || errno == EWOULDBLOCK)) r = spin_recv(c, p, n);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      c->bytes_received += r;
      continue;
    }
    if (r == 0) return loom__ps_conn_fail(c, st, "receive", 0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int w = wait_fd(c, POLLIN, deadline);
      if (w <= 0) return loom__ps_conn_fail(c, st, "receive", w == 0 ? ETIMEDOUT : errno);
      continue;
    }
    return loom__ps_conn_fail(c, st, "receive", errno);
  }
  return LOOM_OK;
}

loom_code loom__ps_send(loom_ps_client *c, uint16_t opcode, const void *fixed, size_t fixed_len, const void *a,
                        size_t alen, const void *b, size_t blen, loom_status *st) {
  uint64_t body = (uint64_t)fixed_len + alen + blen;
  if (body > c->max_frame)
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps %s: a %llu-byte request exceeds the frame limit of %u",
                           c->addr, (unsigned long long)body, c->max_frame);
  uint32_t crc = 0;
  crc = loom__crc32c_extend(crc, fixed, fixed_len);
  if (alen) crc = loom__crc32c_extend(crc, a, alen);
  if (blen) crc = loom__crc32c_extend(crc, b, blen);
  uint8_t hdr[LOOM_PS_HDR];
  if (c->acked == c->next_id) c->big_out = 0; /* no reply owed: nothing large outstanding */
  if (body > 4096) c->big_out = 1;
  if (c->retry) { /* loom_ps_client_retry_last: the same id again, and its reply is the next one read */
    c->retry = 0;
    c->acked = c->next_id - 1;
  } else {
    c->next_id++;
  }
  loom__ps_hdr_encode(hdr, opcode, 0, c->next_id, NULL, 0, 0);
  loom__ps_put32(hdr + 20, (uint32_t)body);
  loom__ps_put32(hdr + 24, crc);
  struct iovec iov[4] = {{hdr, LOOM_PS_HDR}, {(void *)fixed, fixed_len}, {(void *)a, alen}, {(void *)b, blen}};
  c->pending = opcode;
  return send_iov(c, iov, 4, st);
}

loom_code loom__ps_recv_hdr(loom_ps_client *c, uint16_t opcode, loom_ps_hdr *h, loom_status *st) {
  uint8_t hdr[LOOM_PS_HDR];
  /* busy-poll only for the header of a reply to small requests: waiting for a large one (or inside a
   * body being streamed) would take a core the PS needs on a machine with few cores */
  loom_code rc = recv_exact(c, hdr, sizeof hdr, !c->big_out, st);
  if (rc) return rc;
  char why[160];
  rc = loom__ps_hdr_decode(hdr, c->max_frame, h, why, sizeof why);
  if (rc) {
    loom__ps_conn_fail(c, NULL, "", 0);
    return loom_status_set(st, rc, "ps %s: bad reply: %s", c->addr, why);
  }
  c->crc = 0;
  c->left = h->body_len;
  uint64_t expect = ++c->acked; /* replies come back in request order (pipelining) */
  c->hdr = *h;
  if (h->status != 0) { /* an error reply: the body is the message */
    char msg[600];
    size_t n = h->body_len < sizeof msg - 1 ? h->body_len : sizeof msg - 1;
    rc = loom__ps_recv_body(c, msg, n, st);
    if (!rc) rc = loom__ps_recv_body(c, NULL, c->left, st);
    if (rc) return rc;
    msg[n] = 0;
    loom_code code = h->status < LOOM_CODE_COUNT ? (loom_code)h->status : LOOM_UNKNOWN;
    return loom_status_set(st, code, "ps %s refused opcode %u: %s", c->addr, opcode, msg);
  }
  if (!(h->flags & LOOM_PS_FLAG_REPLY) || h->opcode != opcode || h->request_id != expect) {
    loom__ps_conn_fail(c, NULL, "", 0);
    return loom_status_set(st, LOOM_DATA_LOSS, "ps %s: reply opcode %u id %llu to request opcode %u id %llu",
                           c->addr, h->opcode, (unsigned long long)h->request_id, opcode,
                           (unsigned long long)expect);
  }
  c->hdr = *h;
  return LOOM_OK;
}

/* Reads n more body bytes into dst (NULL: into the client's scratch). */
loom_code loom__ps_recv_body(loom_ps_client *c, void *dst, size_t n, loom_status *st) {
  if (n > c->left) {
    loom__ps_conn_fail(c, NULL, "", 0);
    return loom_status_set(st, LOOM_DATA_LOSS, "ps %s: reply body is %zu bytes short", c->addr, n - c->left);
  }
  while (n > 0) {
    uint8_t scratch[4096];
    /* pieces of 256 KiB: each is checksummed right after it lands, while it is in cache */
    size_t k = dst ? (n < ((size_t)256 << 10) ? n : ((size_t)256 << 10)) : (n < sizeof scratch ? n : sizeof scratch);
    void *p = dst ? dst : scratch;
    loom_code rc = recv_exact(c, p, k, 0, st);
    if (rc) return rc;
    c->crc = loom__crc32c_extend(c->crc, p, k);
    c->left -= k;
    n -= k;
    if (dst) dst = (char *)dst + k;
  }
  return LOOM_OK;
}

loom_code loom__ps_recv_end(loom_ps_client *c, const loom_ps_hdr *h, loom_status *st) {
  if (c->left) {
    loom__ps_conn_fail(c, NULL, "", 0);
    return loom_status_set(st, LOOM_DATA_LOSS, "ps %s: %zu unexpected bytes in the reply to opcode %u", c->addr,
                           c->left, h->opcode);
  }
  if (c->crc != h->body_crc) {
    loom__ps_conn_fail(c, NULL, "", 0);
    return loom_status_set(st, LOOM_DATA_LOSS, "ps %s: CRC-32C mismatch in the reply to opcode %u", c->addr,
                           h->opcode);
  }
  return LOOM_OK;
}

/* A reply with a small fixed body, read whole into out (out_len bytes exactly). */
loom_code loom__ps_small_reply(loom_ps_client *c, uint16_t opcode, void *out, size_t out_len, loom_status *st) {
  loom_ps_hdr h;
  loom_code rc = loom__ps_recv_hdr(c, opcode, &h, st);
  if (rc) return rc;
  if (h.body_len != out_len) {
    loom__ps_conn_fail(c, NULL, "", 0);
    return loom_status_set(st, LOOM_DATA_LOSS, "ps %s: reply to opcode %u has %u bytes (expected %zu)", c->addr,
                           opcode, h.body_len, out_len);
  }
  rc = loom__ps_recv_body(c, out, out_len, st);
  return rc ? rc : loom__ps_recv_end(c, &h, st);
}

/* WELCOME: {num_vars_on_ps u32, pad u32, instance_id u64}, or an older PS's {num_vars_on_ps u32}
 * (instance unknown: 0). Sets c->instance; a PS other than the expected instance is refused. */

loom_code loom__ps_conn_dial(loom_ps_client *c, loom_status *st) {
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  char port[16];
  snprintf(port, sizeof port, "%d", c->port);
  int gr = getaddrinfo(c->host, port, &hints, &ai);
  if (gr != 0 || !ai) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps %s: cannot resolve: %s", c->addr, gai_strerror(gr));
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int err = c->fd < 0 ? errno : 0;
  if (!err && connect(c->fd, ai->ai_addr, ai->ai_addrlen) < 0) {
    err = errno;
    if (err == EINPROGRESS) {
      int w = wait_fd(c, POLLOUT, loom__mono_secs() + c->timeout_s);
      socklen_t sl = sizeof err;
      err = w == 0 ? ETIMEDOUT : w < 0 ? errno : 0;
      if (!err && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0) err = errno;
    }
  }
  freeaddrinfo(ai);
  if (err) return loom__ps_conn_fail(c, st, "connect", err);
  int one = 1; /* socket buffers: left to the kernel's autotuning (a fixed size would cap it at wmem_max) */
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return LOOM_OK;
}

loom_code loom__ps_pull_send(loom_ps_client *c, uint32_t var_id, uint64_t have, loom_status *st) {
  uint8_t fixed[16];
  loom__ps_put32(fixed, var_id);
  loom__ps_put32(fixed + 4, 0);
  loom__ps_put64(fixed + 8, have);
  return loom__ps_send(c, LOOM_PS_PULL, fixed, 16, NULL, 0, NULL, 0, st);
}

loom_code loom__ps_push_send(loom_ps_client *c, uint16_t opcode, uint32_t var_id, uint64_t read_version,
                             const float *grad, int64_t numel, loom_status *st) {
  uint8_t fixed[16];
  loom__ps_put32(fixed, var_id);
  loom__ps_put32(fixed + 4, 0);
  loom__ps_put64(fixed + 8, read_version);
  return loom__ps_send(c, opcode, fixed, 16, grad, (size_t)numel * 4, NULL, 0, st);
}

/* The reply of PULL / PUSHPULL: {version, pad, value?} into out. */
loom_code loom__ps_value_recv(loom_ps_client *c, uint16_t opcode, float *out, int64_t numel, uint64_t *version,
                              int *changed, loom_status *st) {
  loom_ps_hdr h;
  loom_code rc = loom__ps_recv_hdr(c, opcode, &h, st);
  if (rc) return rc;
  int unchanged = (h.flags & LOOM_PS_FLAG_UNCHANGED) != 0;
  uint64_t want = 16 + (unchanged ? 0 : 4 * (uint64_t)numel);
  if (h.body_len != want) {
    loom__ps_conn_fail(c, NULL, "", 0);
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps %s: value of %u bytes, the caller expects %lld floats",
                           c->addr, h.body_len - 16, (long long)numel);
  }
  uint8_t fixed[16];
  rc = loom__ps_recv_body(c, fixed, 16, st);
  if (!rc && !unchanged) rc = loom__ps_recv_body(c, out, (size_t)numel * 4, st);
  if (!rc) rc = loom__ps_recv_end(c, &h, st);
  if (rc) return rc;
  if (version) *version = loom__ps_get64(fixed);
  if (changed) *changed = !unchanged;
  return LOOM_OK;
}
