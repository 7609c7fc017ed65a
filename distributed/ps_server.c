/* distributed/ps_server.c - the parameter server task.
 *
 * One libuv loop thread does all socket I/O and, in this first version,
 * applies the updates too: requests are handled one at a time in arrival
 * order, so every update of a variable is atomic with no lock (the shard
 * threads of ps-design.md §8.1 are not built yet; README "Parameter
 * server"). Frames are read in place: the 32-byte header first, then, once
 * its length has been checked against the limit, the body straight into the
 * connection's buffer (allocated only after the check). Any protocol
 * violation (bad magic/version/CRC, oversized length, a request before
 * WELCOME, a failed HMAC, another placement) closes that connection with a
 * logged reason; the loop keeps serving the others. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <uv.h>
#include "base/base.h"
#include "distributed/wire.h"
#include "kernels/cpu/optim.h"
#include "loom/loom_distributed.h"

#define MAX_VARS (1u << 20)

typedef struct psvar {
  int present;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  int64_t numel, nrows, row;
  loom_ps_optimizer opt;
  float hyper[8];
  float *val, *s0, *s1; /* value and optimizer slots */
  float b1p, b2p;       /* Adam's beta powers (TF's beta1_power/beta2_power) */
  uint64_t version;
  void *ws;
  size_t ws_size;
} psvar;

typedef struct conn conn;
struct loom_ps_server {
  loom_ps_server_options o;
  char host[64];
  uint8_t token[256];
  size_t token_len;
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t stop_async;
  uv_timer_t timer;
  pthread_t thread;
  int thread_started;
  int port;
  int stopping;
  conn *conns;
  int nconns;
  uint64_t last_activity_ms;
  psvar *vars;
  uint32_t nvars_cap;
  uint32_t nvars_present;
  int64_t global_step;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stopped;
  loom_ps_server_stats stats;
};

enum { ST_HELLO = 0, ST_AUTH = 1, ST_READY = 2, ST_CLOSING = 3 };

struct conn {
  uv_tcp_t tcp;
  loom_ps_server *srv;
  conn *next;
  int state;
  char peer[64];
  uint64_t t_open_ms;
  uint8_t hdr[LOOM_PS_HDR];
  size_t hgot;
  loom_ps_hdr h;
  int in_body;
  uint8_t *body;
  size_t bcap, bgot;
  uint8_t cn[LOOM_PS_NONCE], sn[LOOM_PS_NONCE];
  uint8_t sink[256]; /* reads after a close was decided */
  int paused;        /* back-pressure: reading stopped while replies queue up */
};

/* Back-pressure: a connection whose unsent replies exceed this stops being
 * read until they drain (a client that never reads cannot grow the PS). */
#define MAX_QUEUED_REPLY_BYTES ((size_t)64 << 20)

typedef struct reply {
  uv_write_t req;
  conn *c;
  int close_after;
  size_t len;
  uint8_t data[]; /* header + body */
} reply;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

loom_ps_server_options loom_ps_server_options_default(void) {
  loom_ps_server_options o;
  memset(&o, 0, sizeof o);
  o.host = "127.0.0.1";
  return o;
}

/* ---------------- connections ---------------- */

static void conn_closed(uv_handle_t *h) {
  conn *c = h->data;
  loom_ps_server *s = c->srv;
  for (conn **pp = &s->conns; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  s->nconns--;
  s->last_activity_ms = now_ms();
  loom__free(c->body);
  loom__free(c);
}

static void conn_close(conn *c) {
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  c->state = ST_CLOSING;
  uv_read_stop((uv_stream_t *)&c->tcp);
  uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

/* The counters are written by the loop thread and read by loom_ps_server_get_stats from
 * any thread: relaxed atomics (each counter exact, the snapshot may lag by a frame). */
#define STAT_ADD(srv, field, n) __atomic_fetch_add(&(srv)->stats.field, (int64_t)(n), __ATOMIC_RELAXED)
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void write_done(uv_write_t *req, int status) {
  reply *r = (reply *)req;
  conn *c = r->c;
  if (status == 0) STAT_ADD(c->srv, bytes_out, (int64_t)r->len);
  int close_after = r->close_after;
  loom__free(r);
  if (c->paused && c->state != ST_CLOSING && !uv_is_closing((uv_handle_t *)&c->tcp) &&
      uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) < MAX_QUEUED_REPLY_BYTES / 2) {
    c->paused = 0;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  }
  if (close_after == 2) { /* SHUTDOWN acknowledged: stop the whole server */
    uv_async_send(&c->srv->stop_async);
  } else if (close_after || status < 0) {
    conn_close(c);
  }
}

/* Sends a frame; body may be NULL when len is 0 or when filled by fill. */
static uint8_t *reply_begin(conn *c, size_t body_len, reply **out) {
  reply *r = loom__malloc(sizeof *r + LOOM_PS_HDR + body_len);
  *out = r;
  if (!r) return NULL;
  r->c = c;
  r->close_after = 0;
  r->len = LOOM_PS_HDR + body_len;
  return r->data + LOOM_PS_HDR;
}

static void reply_send(conn *c, reply *r, uint16_t opcode, uint32_t flags, uint32_t status, int close_after) {
  if (!r) {
    conn_close(c);
    return;
  }
  uint32_t len = (uint32_t)(r->len - LOOM_PS_HDR);
  loom__ps_hdr_encode(r->data, opcode, flags | LOOM_PS_FLAG_REPLY, c->h.request_id, r->data + LOOM_PS_HDR, len, status);
  r->close_after = close_after;
  uv_buf_t b = uv_buf_init((char *)r->data, (unsigned)r->len);
  if (uv_write(&r->req, (uv_stream_t *)&c->tcp, &b, 1, write_done) < 0) {
    loom__free(r);
    conn_close(c);
    return;
  }
  if (!close_after && c->state != ST_CLOSING &&
      uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > MAX_QUEUED_REPLY_BYTES) {
    c->paused = 1;
    STAT_ADD(c->srv, pauses, 1);
    uv_read_stop((uv_stream_t *)&c->tcp);
  }
}

static void reply_error(conn *c, uint32_t code, int close_after, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_error(conn *c, uint32_t code, int close_after, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (close_after) {
    STAT_ADD(c->srv, rejected, 1);
    loom__log(LOOM_LOG_WARN, "ps :%d: closing connection from %s: %s", c->srv->port, c->peer, msg);
  }
  size_t n = strlen(msg);
  reply *r;
  uint8_t *b = reply_begin(c, n, &r);
  if (b) memcpy(b, msg, n);
  reply_send(c, r, c->h.opcode, 0, code, close_after);
  if (close_after) {
    c->state = ST_CLOSING;
    uv_read_stop((uv_stream_t *)&c->tcp);
  }
}

/* ---------------- variables and optimizers ---------------- */

static psvar *var_get(loom_ps_server *s, uint32_t id) {
  return id < s->nvars_cap && s->vars[id].present ? &s->vars[id] : NULL;
}

static float *alloc_floats(int64_t n, float fill) {
  float *p = loom__aligned_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  if (p)
    for (int64_t i = 0; i < n; i++) p[i] = fill;
  return p;
}

static void var_free(psvar *v) {
  loom__aligned_free(v->val);
  loom__aligned_free(v->s0);
  loom__aligned_free(v->s1);
  loom__free(v->ws);
  memset(v, 0, sizeof *v);
}

static loom_buf mkbuf(void *data, int ndim, const int64_t *dims, int64_t numel) {
  loom_buf b;
  memset(&b, 0, sizeof b);
  b.data = data;
  b.dtype = LOOM_F32;
  b.ndim = ndim;
  for (int i = 0; i < ndim; i++) b.dims[i] = dims[i];
  b.numel = numel;
  return b;
}

static loom_buf scalar(float *p) { return mkbuf(p, 0, NULL, 1); }

/* Applies a dense (ids NULL) or sparse gradient with the local kernels. */
static loom_code var_apply(psvar *v, const float *grad, const int64_t *ids, int64_t n, loom_status *st) {
  float lr = v->hyper[0], h1 = v->hyper[1], h2 = v->hyper[2], h3 = v->hyper[3];
  loom_buf var = mkbuf(v->val, v->ndim, v->dims, v->numel);
  loom_buf s0 = mkbuf(v->s0, v->ndim, v->dims, v->numel), s1 = mkbuf(v->s1, v->ndim, v->dims, v->numel);
  loom_buf blr = scalar(&lr), b1p = scalar(&v->b1p), b2p = scalar(&v->b2p), bh1 = scalar(&h1), bh2 = scalar(&h2),
           bh3 = scalar(&h3);
  loom_buf g, ix;
  int64_t gdims[2] = {n, v->row};
  if (ids) {
    g = mkbuf((void *)grad, 2, gdims, n * v->row);
    ix = mkbuf((void *)ids, 1, &n, n);
    ix.dtype = LOOM_I64;
    size_t need = loom__sparse_apply_ws(n, v->row, v->nrows, 0);
    if (need > v->ws_size) {
      void *w = loom__realloc(v->ws, need);
      if (!w) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "sparse workspace of %zu bytes", need);
      v->ws = w;
      v->ws_size = need;
    }
  } else {
    g = mkbuf((void *)grad, v->ndim, v->dims, v->numel);
  }
  loom_attrs at;
  memset(&at, 0, sizeof at);
  loom_kctx k;
  memset(&k, 0, sizeof k);
  k.attrs = &at;
  k.st = st;
  k.ws = v->ws;
  k.ws_size = v->ws_size;
  loom_buf *in[11];
  loom_code rc;
  switch (v->opt) {
  case LOOM_PS_SGD:
    in[0] = &var, in[1] = &blr, in[2] = &g, in[3] = &ix;
    k.in = in;
    k.nin = ids ? 4 : 3;
    rc = ids ? loom__k_sparse_apply_gradient_descent_f32(&k) : loom__k_apply_gradient_descent_f32(&k);
    break;
  case LOOM_PS_ADAGRAD:
    in[0] = &var, in[1] = &s0, in[2] = &blr, in[3] = &g, in[4] = &ix;
    k.in = in;
    k.nin = ids ? 5 : 4;
    rc = ids ? loom__k_sparse_apply_adagrad_f32(&k) : loom__k_apply_adagrad_f32(&k);
    break;
  case LOOM_PS_ADAM:
    in[0] = &var, in[1] = &s0, in[2] = &s1, in[3] = &b1p, in[4] = &b2p, in[5] = &blr, in[6] = &bh1, in[7] = &bh2,
    in[8] = &bh3, in[9] = &g, in[10] = &ix;
    k.in = in;
    k.nin = ids ? 11 : 10;
    at.num = ids ? 2 : 0; /* sparse: LazyAdam */
    rc = ids ? loom__k_sparse_apply_adam_f32(&k) : loom__k_apply_adam_f32(&k);
    if (rc == LOOM_OK) { /* TF's _finish: beta powers advance once per applied step */
      v->b1p = v->b1p * h1;
      v->b2p = v->b2p * h2;
    }
    break;
  default:
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "optimizer %d", (int)v->opt);
  }
  if (rc == LOOM_OK) v->version++;
  return rc;
}

/* ---------------- request handlers ---------------- */

static void handle_hello(conn *c) {
  loom_ps_server *s = c->srv;
  const uint8_t *b = c->body;
  if (c->h.opcode != LOOM_PS_HELLO) {
    reply_error(c, LOOM_PERMISSION_DENIED, 1, "opcode %u before the handshake (HELLO expected)", c->h.opcode);
    return;
  }
  if (c->h.body_len != 24 + LOOM_PS_NONCE) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "HELLO body of %u bytes (expected %d)", c->h.body_len,
                24 + LOOM_PS_NONCE);
    return;
  }
  uint16_t pmin = loom__ps_get16(b), pmax = loom__ps_get16(b + 2);
  uint32_t nps = loom__ps_get32(b + 4), nv = loom__ps_get32(b + 8);
  uint64_t ph = loom__ps_get64(b + 16);
  if (pmin > LOOM_PS_VERSION || pmax < LOOM_PS_VERSION) {
    reply_error(c, LOOM_UNIMPLEMENTED, 1, "client speaks protocol %u..%u, this PS %u", pmin, pmax, LOOM_PS_VERSION);
    return;
  }
  if (ph != s->o.placement_hash) {
    char diff[160];
    if ((int32_t)nps != s->o.num_ps)
      snprintf(diff, sizeof diff, "the number of PS tasks differs (worker %u, ps %d)", nps, s->o.num_ps);
    else if ((int32_t)nv != s->o.num_vars)
      snprintf(diff, sizeof diff, "the variable table differs (worker %u variables, ps %d)", nv, s->o.num_vars);
    else
      snprintf(diff, sizeof diff, "same counts (%u PS, %u variables) but other names, shapes or partitions", nps, nv);
    reply_error(c, LOOM_FAILED_PRECONDITION, 1, "placement hash mismatch (worker %016llx, ps %016llx): %s",
                (unsigned long long)ph, (unsigned long long)s->o.placement_hash, diff);
    return;
  }
  memcpy(c->cn, b + 24, LOOM_PS_NONCE);
  reply *r;
  uint8_t *out = reply_begin(c, LOOM_PS_NONCE, &r);
  if (out && loom__ps_random(c->sn, LOOM_PS_NONCE) != LOOM_OK) {
    loom__free(r);
    reply_error(c, LOOM_INTERNAL, 1, "no random bytes for the challenge");
    return;
  }
  if (out) memcpy(out, c->sn, LOOM_PS_NONCE);
  reply_send(c, r, LOOM_PS_CHALLENGE, 0, 0, 0);
  c->state = ST_AUTH;
}

static void handle_auth(conn *c) {
  loom_ps_server *s = c->srv;
  if (c->h.opcode != LOOM_PS_AUTH || c->h.body_len != LOOM_PS_MAC) {
    reply_error(c, LOOM_PERMISSION_DENIED, 1, "opcode %u with %u bytes where AUTH was expected", c->h.opcode,
                c->h.body_len);
    return;
  }
  uint8_t mac[LOOM_PS_MAC];
  loom__ps_auth_mac(s->token, s->token_len, c->cn, c->sn, s->o.placement_hash, mac);
  if (!loom__ps_ct_equal(mac, c->body, LOOM_PS_MAC)) {
    reply_error(c, LOOM_PERMISSION_DENIED, 1, "authentication failed (HMAC mismatch: wrong token)");
    return;
  }
  reply *r;
  uint8_t *out = reply_begin(c, 4, &r);
  if (out) loom__ps_put32(out, s->nvars_present);
  reply_send(c, r, LOOM_PS_WELCOME, 0, 0, 0);
  c->state = ST_READY;
}

static void handle_init(conn *c) {
  loom_ps_server *s = c->srv;
  const uint8_t *b = c->body;
  uint32_t len = c->h.body_len;
  if (len < 16) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "INIT_VAR body of %u bytes", len);
    return;
  }
  uint32_t id = loom__ps_get32(b), opt = loom__ps_get32(b + 4), ndim = loom__ps_get32(b + 8);
  if (ndim > LOOM_MAX_DIMS || id >= MAX_VARS || opt >= LOOM_PS_OPT_COUNT) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 0, "INIT_VAR: var %u, optimizer %u, rank %u out of range", id, opt, ndim);
    return;
  }
  size_t off = 16 + 8 * (size_t)ndim;
  if (len < off + 32) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "INIT_VAR body of %u bytes is truncated", len);
    return;
  }
  psvar nv;
  memset(&nv, 0, sizeof nv);
  nv.ndim = (int32_t)ndim;
  nv.numel = 1;
  for (uint32_t i = 0; i < ndim; i++) {
    int64_t d = (int64_t)loom__ps_get64(b + 16 + 8 * i);
    if (d < 0 || (d > 0 && nv.numel > INT64_MAX / 4 / d)) {
      reply_error(c, LOOM_INVALID_ARGUMENT, 0, "INIT_VAR: var %u dims[%u] = %lld", id, i, (long long)d);
      return;
    }
    nv.dims[i] = d;
    nv.numel *= d;
  }
  if ((uint64_t)len != off + 32 + 4 * (uint64_t)nv.numel) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "INIT_VAR: var %u body of %u bytes, expected %llu", id, len,
                (unsigned long long)(off + 32 + 4 * (uint64_t)nv.numel));
    return;
  }
  memcpy(nv.hyper, b + off, 32);
  int created = 0;
  psvar *old = var_get(s, id);
  if (old) {
    int same = old->ndim == nv.ndim && old->numel == nv.numel;
    for (int i = 0; same && i < nv.ndim; i++) same = old->dims[i] == nv.dims[i];
    if (!same) {
      reply_error(c, LOOM_INVALID_ARGUMENT, 0, "INIT_VAR: var %u exists with another shape", id);
      return;
    }
  } else {
    if (id >= s->nvars_cap) {
      uint32_t cap = s->nvars_cap ? s->nvars_cap : 16;
      while (cap <= id) cap *= 2;
      psvar *nvs = loom__realloc(s->vars, cap * sizeof(psvar));
      if (!nvs) {
        reply_error(c, LOOM_RESOURCE_EXHAUSTED, 0, "no memory for %u variables", cap);
        return;
      }
      memset(nvs + s->nvars_cap, 0, (cap - s->nvars_cap) * sizeof(psvar));
      s->vars = nvs;
      s->nvars_cap = cap;
    }
    nv.opt = (loom_ps_optimizer)opt;
    nv.nrows = nv.ndim ? nv.dims[0] : 1;
    nv.row = nv.nrows > 0 ? nv.numel / nv.nrows : 0;
    nv.val = alloc_floats(nv.numel, 0);
    float s0init = opt == LOOM_PS_ADAGRAD ? nv.hyper[1] : 0.0f;
    nv.s0 = opt != LOOM_PS_SGD ? alloc_floats(nv.numel, s0init) : NULL;
    nv.s1 = opt == LOOM_PS_ADAM ? alloc_floats(nv.numel, 0) : NULL;
    nv.b1p = nv.hyper[1];
    nv.b2p = nv.hyper[2];
    if (!nv.val || (opt != LOOM_PS_SGD && !nv.s0) || (opt == LOOM_PS_ADAM && !nv.s1)) {
      var_free(&nv);
      reply_error(c, LOOM_RESOURCE_EXHAUSTED, 0, "no memory for var %u (%lld floats)", id, (long long)nv.numel);
      return;
    }
    if (nv.numel) memcpy(nv.val, b + off + 32, (size_t)nv.numel * 4);
    nv.present = 1;
    s->vars[id] = nv;
    s->nvars_present++;
    created = 1;
  }
  reply *r;
  uint8_t *out = reply_begin(c, 4, &r);
  if (out) loom__ps_put32(out, (uint32_t)created);
  reply_send(c, r, c->h.opcode, 0, 0, 0);
}

static psvar *req_var(conn *c, uint32_t need) {
  if (c->h.body_len < need) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "opcode %u body of %u bytes is truncated (at least %u)", c->h.opcode,
                c->h.body_len, need);
    return NULL;
  }
  uint32_t id = loom__ps_get32(c->body);
  psvar *v = var_get(c->srv, id);
  if (!v) reply_error(c, LOOM_FAILED_PRECONDITION, 0, "variable %u is not initialized on this PS", id);
  return v;
}

static void send_value(conn *c, psvar *v, uint64_t have) {
  int unchanged = have == v->version;
  size_t n = unchanged ? 0 : (size_t)v->numel * 4;
  reply *r;
  uint8_t *out = reply_begin(c, 16 + n, &r);
  if (out) {
    loom__ps_put64(out, v->version);
    loom__ps_put64(out + 8, 0);
    if (n) memcpy(out + 16, v->val, n);
  }
  reply_send(c, r, c->h.opcode, unchanged ? LOOM_PS_FLAG_UNCHANGED : 0, 0, 0);
}

static void handle_pull(conn *c) {
  psvar *v = req_var(c, 16);
  if (!v) return;
  if (c->h.body_len != 16) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "PULL body of %u bytes (expected 16)", c->h.body_len);
    return;
  }
  send_value(c, v, loom__ps_get64(c->body + 8));
}

static void handle_push(conn *c, int pull) {
  psvar *v = req_var(c, 16);
  if (!v) return;
  if ((uint64_t)c->h.body_len != 16 + 4 * (uint64_t)v->numel) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "PUSH of var %u: %u bytes of gradient, expected %lld",
                loom__ps_get32(c->body), c->h.body_len - 16, (long long)(4 * v->numel));
    return;
  }
  loom_status *st = loom_status_new();
  loom_code rc = var_apply(v, (const float *)(c->body + 16), NULL, 0, st);
  if (rc) {
    reply_error(c, rc, 0, "PUSH of var %u: %s", loom__ps_get32(c->body), loom_status_message(st));
    loom_status_free(st);
    return;
  }
  loom_status_free(st);
  STAT_ADD(c->srv, updates, 1);
  if (pull) {
    send_value(c, v, UINT64_MAX);
    return;
  }
  reply *r;
  uint8_t *out = reply_begin(c, 8, &r);
  if (out) loom__ps_put64(out, v->version);
  reply_send(c, r, c->h.opcode, 0, 0, 0);
}

static void handle_rows(conn *c, int push) {
  psvar *v = req_var(c, 8);
  if (!v) return;
  uint64_t n = loom__ps_get32(c->body + 4);
  uint64_t want = 8 + 8 * n + (push ? 4 * n * (uint64_t)v->row : 0);
  if (c->h.body_len != want) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "%s of var %u with %llu ids: %u bytes, expected %llu",
                push ? "PUSH_ROWS" : "PULL_ROWS", loom__ps_get32(c->body), (unsigned long long)n, c->h.body_len,
                (unsigned long long)want);
    return;
  }
  const int64_t *ids = (const int64_t *)(c->body + 8);
  if (push) {
    loom_status *st = loom_status_new();
    loom_code rc = var_apply(v, (const float *)(c->body + 8 + 8 * n), ids, (int64_t)n, st);
    if (rc) {
      reply_error(c, rc, 0, "PUSH_ROWS of var %u: %s", loom__ps_get32(c->body), loom_status_message(st));
      loom_status_free(st);
      return;
    }
    loom_status_free(st);
    STAT_ADD(c->srv, updates, 1);
    reply *r;
    uint8_t *out = reply_begin(c, 8, &r);
    if (out) loom__ps_put64(out, v->version);
    reply_send(c, r, c->h.opcode, 0, 0, 0);
    return;
  }
  for (uint64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= v->nrows) {
      reply_error(c, LOOM_INVALID_ARGUMENT, 0, "PULL_ROWS of var %u: ids[%llu] = %lld is not in [0, %lld)",
                  loom__ps_get32(c->body), (unsigned long long)i, (long long)ids[i], (long long)v->nrows);
      return;
    }
  size_t rb = (size_t)v->row * 4;
  reply *r;
  uint8_t *out = reply_begin(c, 8 + n * rb, &r);
  if (out) {
    loom__ps_put64(out, v->version);
    for (uint64_t i = 0; i < n; i++) memcpy(out + 8 + i * rb, v->val + ids[i] * v->row, rb);
  }
  reply_send(c, r, c->h.opcode, 0, 0, 0);
}

static void dispatch(conn *c) {
  loom_ps_server *s = c->srv;
  STAT_ADD(s, frames, 1);
  s->last_activity_ms = now_ms();
  if (!loom__ps_body_ok(&c->h, c->body)) {
    reply_error(c, LOOM_DATA_LOSS, 1, "CRC-32C mismatch on a %u-byte body (opcode %u)", c->h.body_len, c->h.opcode);
    return;
  }
  if (c->h.flags & LOOM_PS_FLAG_REPLY) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "a reply frame (opcode %u) sent to the PS", c->h.opcode);
    return;
  }
  if (c->state == ST_HELLO) return handle_hello(c);
  if (c->state == ST_AUTH) return handle_auth(c);
  switch (c->h.opcode) {
  case LOOM_PS_INIT_VAR: handle_init(c); break;
  case LOOM_PS_PULL: handle_pull(c); break;
  case LOOM_PS_PUSH: handle_push(c, 0); break;
  case LOOM_PS_PUSHPULL: handle_push(c, 1); break;
  case LOOM_PS_PULL_ROWS: handle_rows(c, 0); break;
  case LOOM_PS_PUSH_ROWS: handle_rows(c, 1); break;
  case LOOM_PS_STEP_INC: {
    if (c->h.body_len != 8) {
      reply_error(c, LOOM_INVALID_ARGUMENT, 1, "STEP_INC body of %u bytes (expected 8)", c->h.body_len);
      return;
    }
    s->global_step += (int64_t)loom__ps_get64(c->body);
    reply *r;
    uint8_t *out = reply_begin(c, 8, &r);
    if (out) loom__ps_put64(out, (uint64_t)s->global_step);
    reply_send(c, r, c->h.opcode, 0, 0, 0);
    break;
  }
  case LOOM_PS_SHUTDOWN: {
    loom__log(LOOM_LOG_INFO, "ps :%d: SHUTDOWN requested by %s", s->port, c->peer);
    reply *r;
    reply_begin(c, 0, &r);
    reply_send(c, r, c->h.opcode, 0, 0, 2);
    break;
  }
  default: reply_error(c, LOOM_UNIMPLEMENTED, 1, "unknown opcode %u", c->h.opcode);
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  conn *c = h->data;
  if (c->state == ST_CLOSING) {
    *buf = uv_buf_init((char *)c->sink, sizeof c->sink);
  } else if (!c->in_body) {
    *buf = uv_buf_init((char *)c->hdr + c->hgot, (unsigned)(LOOM_PS_HDR - c->hgot));
  } else {
    *buf = uv_buf_init((char *)c->body + c->bgot, (unsigned)(c->h.body_len - c->bgot));
  }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  conn *c = stream->data;
  if (nread < 0) {
    if (c->state != ST_CLOSING && (c->hgot || c->in_body)) {
      STAT_ADD(c->srv, rejected, 1);
      loom__log(LOOM_LOG_WARN, "ps :%d: connection from %s ended inside a frame (%zu header, %zu body bytes)",
                c->srv->port, c->peer, c->hgot, c->bgot);
    }
    conn_close(c);
    return;
  }
  if (nread == 0 || c->state == ST_CLOSING) return;
  STAT_ADD(c->srv, bytes_in, nread);
  if (!c->in_body) {
    c->hgot += (size_t)nread;
    if (c->hgot < LOOM_PS_HDR) return;
    char why[160];
    uint32_t max = c->state == ST_READY ? c->srv->o.max_frame : LOOM_PS_HANDSHAKE_MAX;
    loom_code rc = loom__ps_hdr_decode(c->hdr, max, &c->h, why, sizeof why);
    c->hgot = 0;
    if (rc) {
      c->h.opcode = 0;
      c->h.request_id = 0;
      reply_error(c, rc, 1, "%s", why);
      return;
    }
    if (c->h.body_len > c->bcap) {
      loom__free(c->body);
      c->body = loom__malloc(c->h.body_len);
      c->bcap = c->body ? c->h.body_len : 0;
      if (!c->body) {
        reply_error(c, LOOM_RESOURCE_EXHAUSTED, 1, "no memory for a %u-byte body", c->h.body_len);
        return;
      }
    }
    c->bgot = 0;
    if (c->h.body_len) {
      c->in_body = 1;
      return;
    }
  } else {
    c->bgot += (size_t)nread;
    if (c->bgot < c->h.body_len) return;
    c->in_body = 0;
  }
  dispatch(c);
}

static void on_connection(uv_stream_t *server, int status) {
  loom_ps_server *s = server->data;
  if (status < 0) return;
  conn *c = loom__calloc(1, sizeof *c);
  if (!c) return;
  c->srv = s;
  uv_tcp_init(&s->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
    uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)loom__free);
    return;
  }
  c->next = s->conns;
  s->conns = c;
  s->nconns++;
  STAT_ADD(s, connections, 1);
  c->t_open_ms = s->last_activity_ms = now_ms();
  struct sockaddr_storage ss;
  int sl = sizeof ss;
  snprintf(c->peer, sizeof c->peer, "?");
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET) {
    char ip[48];
    uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "%s:%d", ip, ntohs(((struct sockaddr_in *)&ss)->sin_port));
  }
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---------------- lifecycle ---------------- */

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) {
    if (h->type == UV_TCP && h->data && h->data != arg)
      uv_close(h, conn_closed);
    else
      uv_close(h, NULL);
  }
}

static void on_stop(uv_async_t *a) {
  loom_ps_server *s = a->data;
  s->stopping = 1;
  uv_walk(&s->loop, close_walk, s);
}

static void on_timer(uv_timer_t *t) {
  loom_ps_server *s = t->data;
  uint64_t now = now_ms();
  double hs = s->o.handshake_timeout_s > 0 ? s->o.handshake_timeout_s : 5.0;
  for (conn *c = s->conns; c; c = c->next)
    if (c->state < ST_READY && (double)(now - c->t_open_ms) > hs * 1000.0) {
      c->h.opcode = 0;
      c->h.request_id = 0;
      reply_error(c, LOOM_DEADLINE_EXCEEDED, 1, "no authentication within %.1f s", hs);
    }
  if (s->o.idle_exit_s > 0 && s->nconns == 0 && (double)(now - s->last_activity_ms) > s->o.idle_exit_s * 1000.0) {
    loom__log(LOOM_LOG_INFO, "ps :%d: idle for %.1f s with no connection; exiting", s->port, s->o.idle_exit_s);
    on_stop(&s->stop_async);
  }
}

static void *loop_main(void *arg) {
  loom_ps_server *s = arg;
  uv_run(&s->loop, UV_RUN_DEFAULT);
  pthread_mutex_lock(&s->mu);
  s->stopped = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static int is_loopback(const char *h) {
  return !strcmp(h, "localhost") || !strncmp(h, "127.", 4) || !strcmp(h, "::1");
}

loom_ps_server *loom_ps_server_start(const loom_ps_server_options *o, loom_status *st) {
  loom_ps_server_options d = loom_ps_server_options_default();
  if (!o) o = &d;
  const char *host = o->host ? o->host : "127.0.0.1";
  if (strlen(host) >= 64) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps host '%.64s...' is too long", host);
    return NULL;
  }
  if (!is_loopback(host) && (!o->token || o->token_len < 16)) {
    loom_status_set(st, LOOM_PERMISSION_DENIED,
                    "ps on %s (not loopback) needs an authentication token of at least 16 bytes", host);
    return NULL;
  }
  if (o->token_len > 256) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps token of %zu bytes (at most 256)", o->token_len);
    return NULL;
  }
  if (o->port < 0 || o->port > 65535) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps port %d", o->port);
    return NULL;
  }
  loom_ps_server *s = loom__calloc(1, sizeof *s);
  if (!s) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "no memory for the ps");
    return NULL;
  }
  s->o = *o;
  snprintf(s->host, sizeof s->host, "%s", host);
  s->o.host = s->host;
  if (!s->o.max_frame) s->o.max_frame = LOOM_PS_DEFAULT_MAX_FRAME;
  if (o->token_len) memcpy(s->token, o->token, o->token_len);
  s->token_len = o->token_len;
  s->o.token = NULL;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  int r = uv_loop_init(&s->loop);
  if (r < 0) {
    loom_status_set(st, LOOM_INTERNAL, "uv_loop_init: %s", uv_strerror(r));
    loom__free(s);
    return NULL;
  }
  struct sockaddr_in addr;
  const char *bind_host = !strcmp(host, "localhost") ? "127.0.0.1" : host;
  r = uv_ip4_addr(bind_host, o->port, &addr);
  if (r == 0) {
    uv_tcp_init(&s->loop, &s->listener);
    s->listener.data = s;
    r = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0);
    if (r == 0) r = uv_listen((uv_stream_t *)&s->listener, 1024, on_connection);
  }
  if (r < 0) {
    loom_status_set(st, LOOM_UNAVAILABLE, "ps cannot listen on %s:%d: %s", host, o->port, uv_strerror(r));
    uv_walk(&s->loop, close_walk, s);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    loom__free(s);
    return NULL;
  }
  struct sockaddr_storage ss;
  int sl = sizeof ss;
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &sl);
  s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  uv_async_init(&s->loop, &s->stop_async, on_stop);
  s->stop_async.data = s;
  uv_timer_init(&s->loop, &s->timer);
  s->timer.data = s;
  uv_timer_start(&s->timer, on_timer, 50, 50);
  s->last_activity_ms = now_ms();
  if (pthread_create(&s->thread, NULL, loop_main, s) != 0) {
    loom_status_set(st, LOOM_INTERNAL, "ps: cannot start the loop thread");
    uv_walk(&s->loop, close_walk, s);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    loom__free(s);
    return NULL;
  }
  s->thread_started = 1;
  loom__log(LOOM_LOG_INFO, "ps listening on %s:%d (placement %016llx)", host, s->port,
            (unsigned long long)s->o.placement_hash);
  return s;
}

int loom_ps_server_port(const loom_ps_server *s) { return s ? s->port : -1; }

int loom_ps_server_wait(loom_ps_server *s, double timeout_s) {
  if (!s) return 1;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double t = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + (timeout_s > 0 ? timeout_s : 0);
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  pthread_mutex_lock(&s->mu);
  while (!s->stopped)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0) break;
  int stopped = s->stopped;
  pthread_mutex_unlock(&s->mu);
  return stopped;
}

void loom_ps_server_get_stats(loom_ps_server *s, loom_ps_server_stats *out) {
  /* Counters are written by the loop thread; a snapshot may lag by a frame. */
  if (!s || !out) return;
  out->connections = __atomic_load_n(&s->stats.connections, __ATOMIC_RELAXED);
  out->rejected = __atomic_load_n(&s->stats.rejected, __ATOMIC_RELAXED);
  out->frames = __atomic_load_n(&s->stats.frames, __ATOMIC_RELAXED);
  out->bytes_in = __atomic_load_n(&s->stats.bytes_in, __ATOMIC_RELAXED);
  out->bytes_out = __atomic_load_n(&s->stats.bytes_out, __ATOMIC_RELAXED);
  out->updates = __atomic_load_n(&s->stats.updates, __ATOMIC_RELAXED);
  out->pauses = __atomic_load_n(&s->stats.pauses, __ATOMIC_RELAXED);
}

void loom_ps_server_stop(loom_ps_server *s) {
  if (!s) return;
  if (s->thread_started) {
    pthread_mutex_lock(&s->mu);
    int stopped = s->stopped; /* the loop has ended (SHUTDOWN, idle): its handles are closed */
    pthread_mutex_unlock(&s->mu);
    if (!stopped) uv_async_send(&s->stop_async);
    pthread_join(s->thread, NULL);
  }
  uv_run(&s->loop, UV_RUN_NOWAIT);
  uv_loop_close(&s->loop);
  for (uint32_t i = 0; i < s->nvars_cap; i++)
    if (s->vars[i].present) var_free(&s->vars[i]);
  loom__free(s->vars);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  loom__free(s);
}
