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
#include "base/crc32c.h"
#include "loom/loom_checkpoint.h"
#include "loom/loom_distributed.h"
#include <errno.h>
#include <sys/stat.h>

#define MAX_VARS (1u << 20)

typedef struct psvar {
  int present;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  int64_t numel, nrows, row;
  loom_ps_optimizer opt;
  float hyper[8];
  float *val, *s0, *s1, *s2; /* value and optimizer slots */
  float b1p, b2p;       /* Adam's beta powers (TF's beta1_power/beta2_power) */
  uint64_t version;
  float *agg;        /* SYNC: the sum of this step's gradients */
  int32_t agg_count;
  void *ws;
  size_t ws_size;
} psvar;

typedef struct conn conn;
struct loom_ps_server {
  loom_ps_server_options o;
  char host[64];
  char model_dir[512];
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
  int waiting;       /* SYNC: a push+pull waits for its step (the connection is not read meanwhile) */
  uint32_t wait_var;
  uint64_t wait_version, wait_since_ms;
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
  if (c->paused && !c->waiting && c->state != ST_CLOSING && !uv_is_closing((uv_handle_t *)&c->tcp) &&
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
  loom__aligned_free(v->s2);
  loom__aligned_free(v->agg);
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

/* Number of optimizer slots (s0, s1, s2) of a variable and their initial values. */
static int opt_slots(loom_ps_optimizer opt, const float *hyper, float init[3]) {
  init[0] = init[1] = init[2] = 0.0f;
  switch (opt) {
  case LOOM_PS_SGD: return 0;
  case LOOM_PS_MOMENTUM: return 1;
  case LOOM_PS_ADAGRAD: init[0] = hyper[1]; return 1;
  case LOOM_PS_ADAM: return 2;
  case LOOM_PS_FTRL: init[0] = hyper[2]; return 2; /* accum, linear */
  case LOOM_PS_RMSPROP:
    if (hyper[4] != 0.0f) { /* mg, ms (ones, as TF's "rms" slot), mom */
      init[1] = 1.0f;
      return 3;
    }
    init[0] = 1.0f; /* ms, mom */
    return 2;
  case LOOM_PS_ADADELTA: return 2; /* accum, accum_update */
  default: return 0;
  }
}

/* Applies a dense (ids NULL) or sparse gradient with the local kernels, in
 * the kernels' (TF's) input orders. */
static loom_code var_apply(psvar *v, const float *grad, const int64_t *ids, int64_t n, loom_status *st) {
  const float *h = v->hyper;
  float sc[8]; /* scalar inputs, copied so the kernels see the same float values as a local graph's consts */
  loom_buf var = mkbuf(v->val, v->ndim, v->dims, v->numel);
  loom_buf sl[3];
  float *sp[3] = {v->s0, v->s1, v->s2};
  for (int i = 0; i < 3; i++) sl[i] = mkbuf(sp[i], v->ndim, v->dims, v->numel);
  loom_buf bs[8];
  for (int i = 0; i < 8; i++) bs[i] = scalar(&sc[i]);
  loom_buf b1p = scalar(&v->b1p), b2p = scalar(&v->b2p);
  loom_buf g, ix;
  memset(&ix, 0, sizeof ix);
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
  loom_buf *in[12];
  int m = 0;
  loom_code (*dense)(const loom_kctx *) = NULL, (*sparse)(const loom_kctx *) = NULL;
#define IN(b) (in[m++] = &(b))
#define GRAD() (IN(g), ids ? (void)IN(ix) : (void)0)
  switch (v->opt) {
  case LOOM_PS_SGD: /* var, lr, grad[, indices] */
    sc[0] = h[0];
    IN(var), IN(bs[0]), GRAD();
    dense = loom__k_apply_gradient_descent_f32, sparse = loom__k_sparse_apply_gradient_descent_f32;
    break;
  case LOOM_PS_MOMENTUM: /* var, accum, lr, grad[, indices], momentum */
    sc[0] = h[0], sc[1] = h[1];
    IN(var), IN(sl[0]), IN(bs[0]), GRAD(), IN(bs[1]);
    at.num = h[2] != 0.0f;
    dense = loom__k_apply_momentum_f32, sparse = loom__k_sparse_apply_momentum_f32;
    break;
  case LOOM_PS_ADAGRAD: /* var, accum, lr, grad[, indices] */
    sc[0] = h[0];
    IN(var), IN(sl[0]), IN(bs[0]), GRAD();
    dense = loom__k_apply_adagrad_f32, sparse = loom__k_sparse_apply_adagrad_f32;
    break;
  case LOOM_PS_ADAM: /* var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad[, indices] */
    sc[0] = h[0], sc[1] = h[1], sc[2] = h[2], sc[3] = h[3];
    IN(var), IN(sl[0]), IN(sl[1]), IN(b1p), IN(b2p), IN(bs[0]), IN(bs[1]), IN(bs[2]), IN(bs[3]), GRAD();
    at.num = ids ? 2 : 0; /* sparse: LazyAdam */
    dense = loom__k_apply_adam_f32, sparse = loom__k_sparse_apply_adam_f32;
    break;
  case LOOM_PS_FTRL: /* var, accum, linear, grad[, indices], lr, l1, l2, l2_shrinkage, lr_power */
    sc[0] = h[0], sc[1] = h[3], sc[2] = h[4], sc[3] = h[5], sc[4] = h[1];
    IN(var), IN(sl[0]), IN(sl[1]), GRAD(), IN(bs[0]), IN(bs[1]), IN(bs[2]), IN(bs[3]), IN(bs[4]);
    dense = loom__k_apply_ftrl_f32, sparse = loom__k_sparse_apply_ftrl_f32;
    break;
  case LOOM_PS_RMSPROP: /* var, [mg,] ms, mom, lr, rho, momentum, epsilon, grad[, indices] */
    sc[0] = h[0], sc[1] = h[1], sc[2] = h[2], sc[3] = h[3];
    IN(var), IN(sl[0]), IN(sl[1]);
    if (h[4] != 0.0f) IN(sl[2]);
    IN(bs[0]), IN(bs[1]), IN(bs[2]), IN(bs[3]), GRAD();
    if (h[4] != 0.0f)
      dense = loom__k_apply_centered_rmsprop_f32, sparse = loom__k_sparse_apply_centered_rmsprop_f32;
    else
      dense = loom__k_apply_rmsprop_f32, sparse = loom__k_sparse_apply_rmsprop_f32;
    break;
  case LOOM_PS_ADADELTA: /* var, accum, accum_update, lr, rho, epsilon, grad[, indices] */
    sc[0] = h[0], sc[1] = h[1], sc[2] = h[2];
    IN(var), IN(sl[0]), IN(sl[1]), IN(bs[0]), IN(bs[1]), IN(bs[2]), GRAD();
    dense = loom__k_apply_adadelta_f32, sparse = loom__k_sparse_apply_adadelta_f32;
    break;
  default: return loom_status_set(st, LOOM_INVALID_ARGUMENT, "optimizer %d", (int)v->opt);
  }
#undef IN
#undef GRAD
  k.in = in;
  k.nin = m;
  loom_code rc = ids ? sparse(&k) : dense(&k);
  if (rc == LOOM_OK && v->opt == LOOM_PS_ADAM) { /* TF's _finish: beta powers advance once per applied step */
    v->b1p = v->b1p * h[1];
    v->b2p = v->b2p * h[2];
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
    float init[3];
    int nslots = opt_slots(nv.opt, nv.hyper, init);
    float **slot[3] = {&nv.s0, &nv.s1, &nv.s2};
    int slots_ok = 1;
    for (int i = 0; i < nslots; i++) slots_ok &= (*slot[i] = alloc_floats(nv.numel, init[i])) != NULL;
    nv.b1p = nv.hyper[1];
    nv.b2p = nv.hyper[2];
    if (!nv.val || !slots_ok) {
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

static void send_value_flags(conn *c, psvar *v, uint64_t have, uint32_t flags) {
  int unchanged = have == v->version;
  size_t n = unchanged ? 0 : (size_t)v->numel * 4;
  reply *r;
  uint8_t *out = reply_begin(c, 16 + n, &r);
  if (out) {
    loom__ps_put64(out, v->version);
    loom__ps_put64(out + 8, 0);
    if (n) memcpy(out + 16, v->val, n);
  }
  reply_send(c, r, c->h.opcode, (unchanged ? LOOM_PS_FLAG_UNCHANGED : 0) | flags, 0, 0);
}

static void send_value(conn *c, psvar *v, uint64_t have) { send_value_flags(c, v, have, 0); }

static void conn_resume(conn *c) {
  c->waiting = 0;
  if (c->state != ST_CLOSING && !c->paused && !uv_is_closing((uv_handle_t *)&c->tcp))
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* SYNC: the step of variable id has been applied: answer every push+pull
 * waiting for it with the new value. */
static void wake_waiters(loom_ps_server *s, uint32_t id, psvar *v) {
  for (conn *w = s->conns; w; w = w->next)
    if (w->waiting && w->wait_var == id && v->version > w->wait_version) {
      send_value(w, v, UINT64_MAX);
      conn_resume(w);
    }
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

static void push_reply(conn *c, psvar *v, int pull, uint32_t flags) {
  if (pull) {
    send_value_flags(c, v, UINT64_MAX, flags);
    return;
  }
  reply *r;
  uint8_t *out = reply_begin(c, 8, &r);
  if (out) loom__ps_put64(out, v->version);
  reply_send(c, r, c->h.opcode, flags, 0, 0);
}

static void handle_push(conn *c, int pull) {
  loom_ps_server *s = c->srv;
  psvar *v = req_var(c, 16);
  if (!v) return;
  uint32_t id = loom__ps_get32(c->body);
  if ((uint64_t)c->h.body_len != 16 + 4 * (uint64_t)v->numel) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "PUSH of var %u: %u bytes of gradient, expected %lld", id,
                c->h.body_len - 16, (long long)(4 * v->numel));
    return;
  }
  uint64_t rv = loom__ps_get64(c->body + 8);
  const float *grad = (const float *)(c->body + 16);
  if (s->o.consistency == LOOM_PS_BOUNDED && rv != UINT64_MAX && v->version > rv &&
      v->version - rv > (uint64_t)s->o.staleness) {
    STAT_ADD(s, stale_dropped, 1); /* DropStaleGradient */
    push_reply(c, v, pull, LOOM_PS_FLAG_STALE);
    return;
  }
  if (s->o.consistency == LOOM_PS_SYNC) {
    if (rv == UINT64_MAX || rv > v->version) {
      reply_error(c, LOOM_INVALID_ARGUMENT, 0, "SYNC push of var %u read at version %lld, the PS is at %llu", id,
                  rv == UINT64_MAX ? -1LL : (long long)rv, (unsigned long long)v->version);
      return;
    }
    if (rv < v->version) { /* a late gradient of an applied step */
      STAT_ADD(s, stale_dropped, 1);
      push_reply(c, v, pull, LOOM_PS_FLAG_STALE);
      return;
    }
    if (!v->agg && !(v->agg = alloc_floats(v->numel, 0))) {
      reply_error(c, LOOM_RESOURCE_EXHAUSTED, 0, "no memory to aggregate var %u", id);
      return;
    }
    if (v->agg_count == 0)
      memcpy(v->agg, grad, (size_t)v->numel * 4);
    else
      for (int64_t i = 0; i < v->numel; i++) v->agg[i] += grad[i];
    int k = s->o.replicas_to_aggregate > 0 ? s->o.replicas_to_aggregate : 1;
    if (++v->agg_count < k) {
      if (!pull) {
        push_reply(c, v, 0, 0);
        return;
      }
      c->waiting = 1; /* answered when the step is applied */
      c->wait_var = id;
      c->wait_version = rv;
      c->wait_since_ms = now_ms();
      uv_read_stop((uv_stream_t *)&c->tcp);
      return;
    }
    for (int64_t i = 0; i < v->numel; i++) v->agg[i] /= (float)k; /* the accumulator's mean */
    v->agg_count = 0;
    grad = v->agg;
  }
  loom_status *st = loom_status_new();
  loom_code rc = var_apply(v, grad, NULL, 0, st);
  if (rc) {
    reply_error(c, rc, 0, "PUSH of var %u: %s", id, loom_status_message(st));
    loom_status_free(st);
    return;
  }
  loom_status_free(st);
  STAT_ADD(s, updates, 1);
  if (s->o.consistency == LOOM_PS_SYNC) {
    STAT_ADD(s, sync_steps, 1);
    wake_waiters(s, id, v);
  }
  push_reply(c, v, pull, 0);
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
  if (push && c->srv->o.consistency == LOOM_PS_SYNC) { /* no silent async rows in a sync job */
    reply_error(c, LOOM_UNIMPLEMENTED, 0, "PUSH_ROWS of var %u: row pushes are not aggregated in SYNC mode yet",
                loom__ps_get32(c->body));
    return;
  }
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

/* ---------------- checkpoints (SAVE / RESTORE) ----------------
 * Each PS writes its own shard, <model_dir>/<dir>/model.ckpt-<step>.ps-<i>-of-<n>,
 * in loom's checkpoint format (CRC-protected, written to a temporary file
 * and renamed). Per variable id: "v<id>" (the value), "v<id>/slot<k>" (the
 * optimizer slots), "v<id>/state" f32[10] (hyper[8], beta1/beta2 powers),
 * "v<id>/meta" i64[2] (optimizer, version); plus "global_step". A SYNC
 * aggregation in progress is not saved. Only a relative dir without ".."
 * travels; the PS joins it to the model_dir it was started with. */

static int rel_dir_ok(const char *d, size_t n) {
  if (n == 0) return 1;
  if (d[0] == '/') return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)d[i] < 0x20 || d[i] == 0x7f || d[i] == '\\') return 0;
  for (size_t i = 0; i < n;) { /* no ".." component */
    size_t j = i;
    while (j < n && d[j] != '/') j++;
    if (j - i == 2 && d[i] == '.' && d[i + 1] == '.') return 0;
    i = j + 1;
  }
  return 1;
}

static int mkdirs(char *path) {
  for (char *p = path + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      int r = mkdir(path, 0755);
      *p = '/';
      if (r != 0 && errno != EEXIST) return -1;
    }
  return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static uint64_t vars_digest(loom_ps_server *s, uint32_t *nvars) {
  uint64_t d = 0xcbf29ce484222325ull;
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->nvars_cap; i++) {
    psvar *v = &s->vars[i];
    if (!v->present) continue;
    n++;
    d = (d ^ i) * 0x100000001b3ull;
    d = (d ^ v->version) * 0x100000001b3ull;
    d = (d ^ loom__crc32c(v->val, (size_t)v->numel * 4)) * 0x100000001b3ull;
  }
  *nvars = n;
  return d;
}

static loom_code ckpt_save(loom_ps_server *s, const char *path, loom_status *st) {
  uint32_t n = s->nvars_present;
  size_t cap = (size_t)n * 6 + 1;
  const char **names = loom__calloc(cap, sizeof *names);
  char **own = loom__calloc(cap, sizeof *own);
  loom_tensor **t = loom__calloc(cap, sizeof *t);
  int k = 0;
  loom_code rc = names && own && t ? LOOM_OK : loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
  for (uint32_t i = 0; i < s->nvars_cap && !rc; i++) {
    psvar *v = &s->vars[i];
    if (!v->present) continue;
    float init[3];
    int ns = opt_slots(v->opt, v->hyper, init);
    float *sp[3] = {v->s0, v->s1, v->s2};
    float state[10];
    memcpy(state, v->hyper, 32);
    state[8] = v->b1p;
    state[9] = v->b2p;
    int64_t meta[2] = {(int64_t)v->opt, (int64_t)v->version}, d10 = 10, d2 = 2;
    for (int j = -1; j < ns + 2 && !rc; j++) {
      char nm[64];
      if (j < 0) {
        snprintf(nm, sizeof nm, "v%u", i);
        t[k] = loom_tensor_from_data(LOOM_F32, v->ndim, v->dims, v->val, st);
      } else if (j < ns) {
        snprintf(nm, sizeof nm, "v%u/slot%d", i, j);
        t[k] = loom_tensor_from_data(LOOM_F32, v->ndim, v->dims, sp[j], st);
      } else if (j == ns) {
        snprintf(nm, sizeof nm, "v%u/state", i);
        t[k] = loom_tensor_from_data(LOOM_F32, 1, &d10, state, st);
      } else {
        snprintf(nm, sizeof nm, "v%u/meta", i);
        t[k] = loom_tensor_from_data(LOOM_I64, 1, &d2, meta, st);
      }
      own[k] = loom__strdup(nm);
      names[k] = own[k];
      if (!t[k] || !own[k]) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
      k++;
    }
  }
  if (!rc) {
    int64_t gs = s->global_step;
    t[k] = loom_tensor_from_data(LOOM_I64, 0, NULL, &gs, st);
    names[k] = "global_step";
    if (!t[k]) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
    k++;
  }
  if (!rc) rc = loom_checkpoint_write(path, k, names, (const loom_tensor *const *)t, st);
  for (int i = 0; i < k; i++) {
    loom_tensor_free(t[i]);
    if (own) loom__free(own[i]);
  }
  loom__free(names);
  loom__free(own);
  loom__free(t);
  return rc;
}

typedef struct ckpt_ids {
  uint32_t *ids;
  int n, cap;
} ckpt_ids;

static int collect_meta(const char *name, loom_dtype dt, int ndim, const int64_t *dims, void *user) {
  (void)dt, (void)ndim, (void)dims;
  ckpt_ids *c = user;
  unsigned id;
  char rest[8];
  if (sscanf(name, "v%u/%7s", &id, rest) == 2 && !strcmp(rest, "meta") && id < MAX_VARS) {
    if (c->n == c->cap) {
      int nc = c->cap ? 2 * c->cap : 16;
      uint32_t *p = loom__realloc(c->ids, (size_t)nc * sizeof *p);
      if (!p) return 1;
      c->ids = p;
      c->cap = nc;
    }
    c->ids[c->n++] = id;
  }
  return 0;
}

static loom_code read_f32(const char *path, const char *name, int64_t numel, float *out, loom_status *st) {
  loom_tensor *t = NULL;
  loom_code rc = loom_checkpoint_read_tensor(path, name, &t, st);
  if (rc) return rc;
  if (loom_tensor_dtype(t) != LOOM_F32 || loom_tensor_numel(t) != numel)
    rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: %s is not %lld floats", path, name, (long long)numel);
  else
    memcpy(out, loom_tensor_data_const(t), (size_t)numel * 4);
  loom_tensor_free(t);
  return rc;
}

/* Replaces this PS's variables with the shard's (all or nothing). */
static loom_code ckpt_restore(loom_ps_server *s, const char *path, loom_status *st) {
  ckpt_ids ids = {0};
  loom_code rc = loom_checkpoint_list_variables(path, collect_meta, &ids, st);
  psvar *nvs = NULL;
  uint32_t cap = 0;
  for (int i = 0; i < ids.n; i++)
    if (ids.ids[i] + 1 > cap) cap = ids.ids[i] + 1;
  if (!rc && cap) {
    nvs = loom__calloc(cap, sizeof *nvs);
    if (!nvs) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "restore: no memory");
  }
  int64_t gs = 0;
  for (int i = 0; i < ids.n && !rc; i++) {
    uint32_t id = ids.ids[i];
    psvar *v = &nvs[id];
    char nm[64];
    loom_tensor *t = NULL;
    snprintf(nm, sizeof nm, "v%u/meta", id);
    rc = loom_checkpoint_read_tensor(path, nm, &t, st);
    if (rc) break;
    int64_t meta[2] = {-1, 0};
    if (loom_tensor_dtype(t) == LOOM_I64 && loom_tensor_numel(t) == 2) memcpy(meta, loom_tensor_data_const(t), 16);
    loom_tensor_free(t);
    t = NULL;
    if (meta[0] < 0 || meta[0] >= LOOM_PS_OPT_COUNT) {
      rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: %s is malformed", path, nm);
      break;
    }
    snprintf(nm, sizeof nm, "v%u", id);
    rc = loom_checkpoint_read_tensor(path, nm, &t, st);
    if (rc) break;
    v->ndim = loom_tensor_ndim(t);
    memcpy(v->dims, loom_tensor_dims(t), (size_t)v->ndim * sizeof(int64_t));
    v->numel = loom_tensor_numel(t);
    v->opt = (loom_ps_optimizer)meta[0];
    v->version = (uint64_t)meta[1];
    v->nrows = v->ndim ? v->dims[0] : 1;
    v->row = v->nrows > 0 ? v->numel / v->nrows : 0;
    v->present = 1; /* freed with var_free on failure */
    v->val = alloc_floats(v->numel, 0);
    if (v->val && loom_tensor_dtype(t) == LOOM_F32) memcpy(v->val, loom_tensor_data_const(t), (size_t)v->numel * 4);
    else rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: %s", path, v->val ? "a value is not float32" : "no memory");
    loom_tensor_free(t);
    float state[10];
    snprintf(nm, sizeof nm, "v%u/state", id);
    if (!rc) rc = read_f32(path, nm, 10, state, st);
    if (rc) break;
    memcpy(v->hyper, state, 32);
    v->b1p = state[8];
    v->b2p = state[9];
    float init[3];
    int ns = opt_slots(v->opt, v->hyper, init);
    float **sp[3] = {&v->s0, &v->s1, &v->s2};
    for (int j = 0; j < ns && !rc; j++) {
      *sp[j] = alloc_floats(v->numel, 0);
      snprintf(nm, sizeof nm, "v%u/slot%d", id, j);
      rc = *sp[j] ? read_f32(path, nm, v->numel, *sp[j], st)
                  : loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "restore: no memory");
    }
  }
  if (!rc) {
    loom_tensor *t = NULL;
    rc = loom_checkpoint_read_tensor(path, "global_step", &t, st);
    if (!rc && loom_tensor_dtype(t) == LOOM_I64 && loom_tensor_numel(t) == 1)
      memcpy(&gs, loom_tensor_data_const(t), 8);
    loom_tensor_free(t);
  }
  loom__free(ids.ids);
  if (rc) {
    for (uint32_t i = 0; i < cap; i++)
      if (nvs[i].present) var_free(&nvs[i]);
    loom__free(nvs);
    return rc;
  }
  for (uint32_t i = 0; i < s->nvars_cap; i++)
    if (s->vars[i].present) var_free(&s->vars[i]);
  loom__free(s->vars);
  s->vars = nvs;
  s->nvars_cap = cap;
  s->nvars_present = (uint32_t)ids.n;
  s->global_step = gs;
  return LOOM_OK;
}

static void handle_ckpt(conn *c, int save) {
  loom_ps_server *s = c->srv;
  const char *what = save ? "SAVE" : "RESTORE";
  if (c->h.body_len < 16 || c->h.body_len != 16 + (uint64_t)loom__ps_get32(c->body + 8)) {
    reply_error(c, LOOM_INVALID_ARGUMENT, 1, "%s body of %u bytes is malformed", what, c->h.body_len);
    return;
  }
  int64_t step = (int64_t)loom__ps_get64(c->body);
  uint32_t len = loom__ps_get32(c->body + 8);
  const char *dir = (const char *)c->body + 16;
  if (!s->o.model_dir) {
    reply_error(c, LOOM_FAILED_PRECONDITION, 0, "%s: this PS was started without a model_dir", what);
    return;
  }
  if (len > 256 || !rel_dir_ok(dir, len) || step < 0) {
    reply_error(c, LOOM_PERMISSION_DENIED, 0,
                "%s: the directory must be relative to the model_dir, without '..' (and step >= 0)", what);
    return;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/%.*s", s->model_dir, (int)len, dir);
  if (save && mkdirs(path) != 0) {
    reply_error(c, LOOM_UNAVAILABLE, 0, "SAVE: cannot create %s: %s", path, strerror(errno));
    return;
  }
  size_t pl = strlen(path);
  snprintf(path + pl, sizeof path - pl, "/model.ckpt-%lld.ps-%d-of-%d", (long long)step, s->o.ps_index,
           s->o.num_ps > 0 ? s->o.num_ps : 1);
  loom_status *st = loom_status_new();
  loom_code rc = save ? ckpt_save(s, path, st) : ckpt_restore(s, path, st);
  if (rc) {
    reply_error(c, rc, 0, "%s: %s", what, loom_status_message(st));
    loom_status_free(st);
    return;
  }
  loom_status_free(st);
  uint32_t n;
  uint64_t d = vars_digest(s, &n);
  loom__log(LOOM_LOG_INFO, "ps :%d: %s %s (%u variables, digest %016llx)", s->port, save ? "saved" : "restored",
            path, n, (unsigned long long)d);
  reply *r;
  uint8_t *out = reply_begin(c, 16, &r);
  if (out) {
    loom__ps_put32(out, n);
    loom__ps_put32(out + 4, 0);
    loom__ps_put64(out + 8, d);
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
  case LOOM_PS_SAVE: handle_ckpt(c, 1); break;
  case LOOM_PS_RESTORE: handle_ckpt(c, 0); break;
  case LOOM_PS_STEP_INC: {
    if (c->h.body_len != 8) {
      reply_error(c, LOOM_INVALID_ARGUMENT, 1, "STEP_INC body of %u bytes (expected 8)", c->h.body_len);
      return;
    }
    if (s->o.consistency == LOOM_PS_SYNC) { /* the number of aggregated steps applied */
      uint64_t m = UINT64_MAX;
      for (uint32_t i = 0; i < s->nvars_cap; i++)
        if (s->vars[i].present && s->vars[i].version < m) m = s->vars[i].version;
      s->global_step = m == UINT64_MAX ? 0 : (int64_t)m;
    } else {
      int64_t k = (int64_t)loom__ps_get64(c->body), sum;
      if (__builtin_add_overflow(s->global_step, k, &sum)) { /* a peer's k must not overflow (UB) the step */
        reply_error(c, LOOM_OUT_OF_RANGE, 0, "STEP_INC: global_step %lld + %lld does not fit in int64",
                    (long long)s->global_step, (long long)k);
        return;
      }
      s->global_step = sum;
    }
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
  double sync_to = s->o.sync_timeout_s > 0 ? s->o.sync_timeout_s : 30.0;
  for (conn *c = s->conns; c; c = c->next)
    if (c->waiting && (double)(now - c->wait_since_ms) > sync_to * 1000.0) {
      STAT_ADD(s, sync_timeouts, 1);
      c->waiting = 0;
      reply_error(c, LOOM_DEADLINE_EXCEEDED, 0, "SYNC: step %llu of var %u not complete within %.1f s",
                  (unsigned long long)c->wait_version + 1, c->wait_var, sync_to);
      conn_resume(c);
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
  if (o->consistency < LOOM_PS_ASYNC || o->consistency > LOOM_PS_SYNC || o->staleness < 0 ||
      (o->consistency == LOOM_PS_SYNC && o->replicas_to_aggregate < 1)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps consistency %d with staleness %lld, replicas_to_aggregate %d",
                    (int)o->consistency, (long long)o->staleness, o->replicas_to_aggregate);
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
  if (o->model_dir && strlen(o->model_dir) >= sizeof s->model_dir) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps model_dir '%.64s...' is too long", o->model_dir);
    loom__free(s);
    return NULL;
  }
  snprintf(s->model_dir, sizeof s->model_dir, "%s", o->model_dir ? o->model_dir : "");
  s->o.model_dir = o->model_dir ? s->model_dir : NULL;
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
  out->stale_dropped = __atomic_load_n(&s->stats.stale_dropped, __ATOMIC_RELAXED);
  out->sync_steps = __atomic_load_n(&s->stats.sync_steps, __ATOMIC_RELAXED);
  out->sync_timeouts = __atomic_load_n(&s->stats.sync_timeouts, __ATOMIC_RELAXED);
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
