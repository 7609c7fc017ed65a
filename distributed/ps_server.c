/* distributed/ps_server.c - the parameter server task.
 *
 * Threads: one libuv loop thread does all socket I/O
 * (accept, read frames in place, write replies) and the handshake; N shard
 * threads own disjoint sets of variables (variable id mod N) and apply the
 * requests of their variables in arrival order. Hand-offs are lock-free:
 * the loop pushes a request (a "job") on its shard's intrusive stack
 * (atomic exchange; the shard takes the whole stack and reverses it, so
 * arrival order is kept) and posts the shard's semaphore; a shard pushes
 * the finished job, reply attached, on the completion stack and wakes the
 * loop with uv_async_send. Replies go out in each connection's request
 * order (a per-connection reorder ring indexed by sequence number), so a
 * client may pipeline requests for variables on different shards.
 *
 * Dense values are sent zero-copy: a reply holds a reference on the
 * variable's value buffer and the socket write reads it in place; a shard
 * about to update a value that a reply still references copies it first
 * (copy-on-write, counted in stats.value_copies).
 *
 * SAVE / RESTORE (and STEP_INC of a SYNC PS) are barriers: every shard
 * parks when it reaches its barrier job, so the snapshot is consistent
 * (every request that arrived before it applied, none after), and the last
 * shard to arrive does the file I/O: never on the loop thread.
 *
 * Back-pressure per connection: reading stops while the requests read but
 * not answered exceed max_inflight_bytes / max_inflight_requests, or the
 * unsent replies exceed 64 MiB; it resumes as they drain. Connections past
 * max_connections are answered RESOURCE_EXHAUSTED and closed. Any protocol
 * violation (bad magic/version/CRC, oversized length, a request before
 * WELCOME, a failed HMAC, another placement) closes that connection with a
 * logged reason; the others are served on. */
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <uv.h>
#include "base/base.h"
#include "distributed/wire.h"
#include "distributed/ps_shm.h"
#include "distributed/ps_parts.h"
#include "kernels/cpu/optim.h"
#include "base/crc32c.h"
#include "loom/loom_checkpoint.h"
#include "loom/loom_distributed.h"
#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define MAX_VARS (1u << 20)
#define MAX_SHARDS 64

/* A value buffer, reference-counted: the variable holds one reference and
 * every reply being written that sends it in place holds one. */
typedef struct vbuf {
  int refs;
  float *data;
} vbuf;

typedef struct conn conn;

typedef struct psvar {
  int present;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  int64_t numel, nrows, row;
  loom_ps_optimizer opt;
  float hyper[8];
  vbuf *vb;
  float *val, *s0, *s1, *s2; /* value (vb->data) and optimizer slots */
  float b1p, b2p;       /* Adam's beta powers (TF's beta1_power/beta2_power) */
  uint64_t version;
  /* The learning-rate schedule of the variable's update rule (INIT_VAR's rule block): on, the learning
   * rate is the schedule at `step` (the global step of the next update: the step the chief created the
   * variable at, plus one per applied update), in place of hyper[0] */
  int sched_on;
  int32_t sched_kind, sched_flag, sched_nb;
  double sched_p[4];  /* initial learning rate, decay_steps, beta (rate / end / alpha), limit (power) */
  double *sched_b;    /* piecewise: boundaries[nb] */
  float *sched_v;     /* piecewise: values[nb + 1] */
  int64_t step;
  float *agg;        /* SYNC: the sum of this step's gradients */
  int32_t agg_count;
  /* SYNC row pushes: this step's (id, row) contributions in arrival order, the connections they came from */
  int64_t *agg_ids;
  float *agg_rows;
  int64_t agg_n, agg_cap;
  conn **agg_conns;
  int32_t agg_nconn, agg_conn_cap;
  int64_t *sy_pairs, *sy_uids; /* SYNC row apply scratch (grown, never shrunk) */
  float *sy_sum;
  int64_t sy_cap;
  void *ws;
  size_t ws_size;
} psvar;

typedef struct job job;
typedef struct shard shard;
typedef struct barrier barrier;

/* A reply: header + inline body in data[], then optionally ext (a value sent in place, kept alive by ref). */
typedef struct reply {
  uv_write_t req;
  conn *c;
  int close_after; /* 1: close the connection once written; 2: SHUTDOWN acknowledged: stop the server */
  vbuf *ref;
  const void *ext;
  size_t ext_len;
  size_t len; /* header + inline body */
  size_t cap; /* a part reply (ps_parts.h): its inline capacity; kept for reuse when freed */
  struct reply *cache_next;
  uint8_t data[];
} reply;

enum { JOB_REQ = 0, JOB_BARRIER = 1 };
enum { BAR_SAVE = 1, BAR_RESTORE = 2, BAR_SYNC_STEP = 3 };

struct job {
  job *next;
  conn *c;           /* NULL: an auxiliary barrier job (no reply) */
  uint64_t seq;      /* the connection's request number (reply order) */
  loom_ps_hdr h;
  uint8_t *body;
  size_t bcap;
  reply *out;        /* the reply, set by the shard */
  int kind;
  barrier *bar;
  uint32_t crc;      /* of the body read so far */
  uint64_t deadline_ms; /* SYNC: a push+pull waiting for its step */
  uint32_t wait_var;
  uint64_t wait_version;
  struct ddwin *dd;  /* the duplicate window this request is recorded in (pending until on_done) */
  int dup;           /* a re-sent PUSHPULL: answered with the current value, nothing applied */
  uint32_t dup_flags;
};

/* The duplicate window of one client id (loop thread only): the outcome of its last DD_W request ids
 * among the mutating requests (PUSH, PUSHPULL, PUSH_ROWS, PUSH_ROWS_AT, STEP_INC). Windows outlive their
 * connections (a client re-sends after reconnecting); at most DD_MAX are kept, least recently used
 * ones without a live connection or pending request evicted first. */
#define DD_W 64
#define DD_MAX 1024
#define DD_BODY 64
enum { DD_EMPTY = 0, DD_PENDING = 1, DD_DONE = 2, DD_VALUE = 3 /* a PUSHPULL: re-sent as a pull */ };
typedef struct dd_slot {
  uint64_t id;
  uint16_t opcode;
  uint8_t state, body_len;
  uint32_t flags, status;
  uint8_t body[DD_BODY]; /* the reply's body (an error's message truncated to DD_BODY bytes) */
} dd_slot;
typedef struct ddwin {
  struct ddwin *next;
  uint64_t client_id, max_id, last_used_ms;
  int refs; /* connections and pending requests using it */
  dd_slot slot[DD_W];
} ddwin;

struct barrier {
  int kind;
  int n, arrived, left, done;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char path[1024];
  int64_t step;
  loom_code rc;
  char msg[600];
  uint32_t nvars;
  uint64_t digest;
  int64_t global_step;
  int self; /* a save of the PS's own (no chief): no connection waits for it */
};

struct shard {
  loom_ps_server *srv;
  int index;
  pthread_t thread;
  int started;
  job *incoming; /* lock-free stack: pushed by the loop, taken whole by the shard */
  sem_t sem;
  int stop;
  psvar *vars;   /* local index = id / nshards */
  uint32_t cap;
  job *waiters;  /* SYNC push+pulls waiting for their step */
  int owner;     /* atomic: 1 while the shard thread (or the loop, for a small request) works on the variables */
};

struct loom_ps_server {
  loom_ps_server_options o;
  char host[64];
  char model_dir[512];
  uint8_t token[256];
  size_t token_len;
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t stop_async, done_async;
  uv_timer_t timer;
  pthread_t thread;
  int thread_started;
  int port;
  int stopping;
  conn *conns;
  int nconns;
  uint64_t last_activity_ms;
  int nshards;
  shard *shards;
  job *completed; /* lock-free stack: pushed by the shards, taken whole by the loop */
  uint32_t nvars_present; /* atomic */
  int64_t global_step;    /* atomic */
  /* busy-poll of the loop thread (loop thread only; options.busy_poll_us) */
  int32_t spin_us;
  uv_idle_t spin;
  int spinning, spin_fail, spin_skip, spin_polls;
  uint64_t spin_end_us;
  ddwin *dds; /* duplicate windows (loop thread only) */
  int ndds;
  /* part replies (ps_parts.h) kept for reuse: a fresh 128 KiB buffer per part costs page faults */
  pthread_mutex_t rmu;
  reply *rcache;
  int nrcache;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stopped;
  loom_ps_server_stats stats;
  uint64_t instance; /* sent in WELCOME (options.instance_id or random; never 0) */
  /* saves of its own (options.chief_lost_save_s): chief connections open, when the last one was seen,
   * the updates counter at the last save or restore (written by the barrier), a save in flight */
  char self_dir[260];
  int nchief;
  uint64_t chief_seen_ms, self_saved_ms;
  int64_t updates_at_save; /* atomic */
  int self_saving;         /* atomic */
  int idle_due;            /* the idle deadline passed: stop once the shard is saved */
  int idle_saved;          /* the save before the idle exit was started (tried once) */
  int stop_reason;         /* loom_ps_server_stop_reason; written under mu */
};

enum { ST_HELLO = 0, ST_AUTH = 1, ST_READY = 2, ST_DRAINING = 3, ST_CLOSING = 4 };

#define REORDER 1024 /* the most requests in flight per connection (max_inflight_requests <= this) */

struct conn {
  uv_tcp_t tcp;
  loom_ps_server *srv;
  conn *next;
  int state;
  int closed; /* the handle is closed: freed once nothing is in flight */
  char peer[64];
  uint64_t t_open_ms;
  uint8_t hdr[LOOM_PS_HDR];
  size_t hgot;
  loom_ps_hdr h;
  job *cur;    /* the job whose body is being read */
  size_t bgot;
  job *pool;   /* idle jobs (their body buffers are reused) */
  int npool;
  uint64_t seq_in, seq_out; /* next request number to give / reply number to send */
  reply *ring[REORDER];     /* finished replies waiting for their turn */
  int inflight;             /* requests read and not yet answered */
  int64_t inflight_bytes;
  int reading;
  uint8_t cn[LOOM_PS_NONCE], sn[LOOM_PS_NONCE];
  uint8_t sink[256];
  ddwin *dd; /* the client's duplicate window (HELLO with a client id), or NULL */
  loom__ps_shm_map shm; /* the client's shared segment (SHM_ATTACH; ps_shm.h), unmapped in conn_free */
  int chief;            /* HELLO said: the job's chief */
  uint64_t last_frame_ms; /* when its last request arrived (a chief's requests are its heartbeat) */
  loom_ps_parts_state *parts; /* per shard thread: this connection's open pipelined push (ps_parts.h) */
};

/* Unsent replies of a connection beyond this stop its reading until they drain. */
#define MAX_QUEUED_REPLY_BYTES ((size_t)64 << 20)

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

loom_ps_server_options loom_ps_server_options_default(void) {
  loom_ps_server_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.host = "127.0.0.1";
  return o;
}

/* The counters are written by the loop and shard threads and read by loom_ps_server_get_stats
 * from any thread: relaxed atomics (each counter exact, the snapshot may lag by a frame). */
#define STAT_ADD(srv, field, n) __atomic_fetch_add(&(srv)->stats.field, (int64_t)(n), __ATOMIC_RELAXED)

/* ---------------- lock-free hand-offs ---------------- */

static void stack_push(job **top, job *j) {
  job *old = __atomic_load_n(top, __ATOMIC_RELAXED);
  do j->next = old;
  while (!__atomic_compare_exchange_n(top, &old, j, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* Takes the whole stack, in push order. */
static job *stack_take(job **top) {
  job *l = __atomic_exchange_n(top, NULL, __ATOMIC_ACQUIRE), *r = NULL;
  while (l) {
    job *n = l->next;
    l->next = r;
    r = l;
    l = n;
  }
  return r;
}

static vbuf *vbuf_new(int64_t n) {
  vbuf *b = loom__malloc(sizeof *b);
  if (!b) return NULL;
  b->refs = 1;
  b->data = loom__aligned_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  if (!b->data) {
    loom__free(b);
    return NULL;
  }
  return b;
}

static void vbuf_release(vbuf *b) {
  if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    loom__aligned_free(b->data);
    loom__free(b);
  }
}

/* ---------------- connections (loop thread) ---------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void job_free(job *j) {
  if (!j) return;
  loom__free(j->body);
  loom__free(j);
}

#define RCACHE_MAX 64
static void reply_free(reply *r) {
  if (!r) return;
  vbuf_release(r->ref);
  if (r->cap && r->c) { /* a part reply: back to the server's cache */
    loom_ps_server *s = r->c->srv;
    pthread_mutex_lock(&s->rmu);
    if (s->nrcache < RCACHE_MAX) {
      r->cache_next = s->rcache;
      s->rcache = r;
      s->nrcache++;
      r = NULL;
    }
    pthread_mutex_unlock(&s->rmu);
  }
  loom__free(r);
}

static void conn_free(conn *c) {
  if (c->dd) c->dd->refs--;
  loom__ps_shm_map_close(&c->shm); /* nothing is in flight: no shard uses the mapping */
  for (int i = 0; i < REORDER; i++) reply_free(c->ring[i]);
  while (c->pool) {
    job *j = c->pool;
    c->pool = j->next;
    job_free(j);
  }
  job_free(c->cur);
  loom__free(c->parts);
  loom__free(c);
}

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
  if (c->chief) {
    c->chief = 0;
    s->nchief--;
    s->chief_seen_ms = s->last_activity_ms;
  }
  c->closed = 1;
  if (c->inflight == 0 || s->stopping) conn_free(c); /* else: freed when its last job comes back */
}

static void conn_close(conn *c) {
  c->state = ST_CLOSING;
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = 0;
  uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

/* Reads while the connection is within its caps; stops (back-pressure) otherwise. */
static void conn_update_reading(conn *c) {
  loom_ps_server *s = c->srv;
  if (c->state >= ST_DRAINING || uv_is_closing((uv_handle_t *)&c->tcp)) return;
  int queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > MAX_QUEUED_REPLY_BYTES;
  /* requests not yet answered, those a shard holds and those whose reply waits for an earlier one: at most
   * max_inflight_requests <= REORDER, so the reorder ring never wraps */
  int pending = (int)(c->seq_in - c->seq_out);
  int caps = pending >= s->o.max_inflight_requests || c->inflight_bytes >= s->o.max_inflight_bytes;
  int want = !queued && !caps;
  if (want && !c->reading) {
    c->reading = 1;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  } else if (!want && c->reading) {
    c->reading = 0;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (queued) STAT_ADD(s, pauses, 1);
    else STAT_ADD(s, inflight_pauses, 1);
  }
}

static void write_done(uv_write_t *req, int status) {
  reply *r = (reply *)req;
  conn *c = r->c;
  if (status == 0) STAT_ADD(c->srv, bytes_out, (int64_t)(r->len + r->ext_len));
  int close_after = r->close_after;
  reply_free(r);
  /* SHUTDOWN acknowledged: stop the whole server, even when the peer has
   * already closed (a draining connection keeps reading, so its EOF can be
   * seen before this callback runs) */
  if (close_after == 2) {
    pthread_mutex_lock(&c->srv->mu);
    if (!c->srv->stop_reason) c->srv->stop_reason = 1;
    pthread_mutex_unlock(&c->srv->mu);
    uv_async_send(&c->srv->stop_async);
    return;
  }
  if (c->state == ST_CLOSING || uv_is_closing((uv_handle_t *)&c->tcp)) return;
  if (close_after || status < 0) {
    conn_close(c);
  } else {
    conn_update_reading(c);
  }
}

/* A reply with body_len bytes of inline body (returned) and ext_len bytes sent from ext; NULL when out of memory. */
static reply *reply_new(conn *c, size_t body_len) {
  reply *r = loom__malloc(sizeof *r + LOOM_PS_HDR + body_len);
  if (!r) return NULL;
  memset(r, 0, sizeof *r);
  r->c = c;
  r->len = LOOM_PS_HDR + body_len;
  return r;
}

static uint8_t *reply_body(reply *r) { return r->data + LOOM_PS_HDR; }

/* A part reply (ps_parts.h) from the server's cache when one is big enough. */
static reply *part_reply_new(conn *c, size_t body_len) {
  loom_ps_server *s = c->srv;
  reply *r = NULL;
  pthread_mutex_lock(&s->rmu);
  for (reply **pp = &s->rcache; *pp; pp = &(*pp)->cache_next)
    if ((*pp)->cap >= LOOM_PS_HDR + body_len) {
      r = *pp;
      *pp = r->cache_next;
      s->nrcache--;
      break;
    }
  pthread_mutex_unlock(&s->rmu);
  size_t cap = r ? r->cap : LOOM_PS_HDR + body_len;
  if (!r && !(r = loom__malloc(sizeof *r + cap))) return NULL;
  memset(r, 0, sizeof *r);
  r->c = c;
  r->len = LOOM_PS_HDR + body_len;
  r->cap = cap;
  return r;
}

/* Writes the header of r (the CRC covers the inline body, then ext). */
static void reply_seal(reply *r, const loom_ps_hdr *req, uint16_t opcode, uint32_t flags, uint32_t status,
                       int close_after) {
  size_t inl = r->len - LOOM_PS_HDR;
  loom__ps_hdr_encode(r->data, opcode, flags | LOOM_PS_FLAG_REPLY, req->request_id, NULL, 0, status);
  uint32_t crc = loom__crc32c_extend(0, reply_body(r), inl);
  if (r->ext_len) crc = loom__crc32c_extend(crc, r->ext, r->ext_len);
  loom__ps_put32(r->data + 20, (uint32_t)(inl + r->ext_len));
  loom__ps_put32(r->data + 24, crc);
  r->close_after = close_after;
}

/* An error reply (the body is the message); close_after: the connection is
 * closed once it is written (a protocol violation: logged). */
static reply *error_reply(loom_ps_server *s, conn *c, const loom_ps_hdr *req, uint32_t code, int close_after,
                          const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static reply *error_reply(loom_ps_server *s, conn *c, const loom_ps_hdr *req, uint32_t code, int close_after,
                          const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (close_after) {
    STAT_ADD(s, rejected, 1);
    loom__log(LOOM_LOG_WARN, "ps :%d: closing connection from %s: %s", s->port, c->peer, msg);
  }
  size_t n = strlen(msg);
  reply *r = reply_new(c, n);
  if (!r) return NULL;
  memcpy(reply_body(r), msg, n);
  reply_seal(r, req, req->opcode, 0, code, close_after);
  return r;
}

/* Half-close / EOF handling: a connection that owes a closing reply
 * (close_after) takes no more requests, but it keeps reading, into the
 * sink (on_alloc; on_read discards the bytes), so that the peer's EOF or
 * reset still closes it at once. Its closing reply may wait behind earlier
 * requests a shard holds (a PULL_ROWS_AT or SYNC push, up to sync_timeout_s,
 * 30 s by default); before, reading stopped here, so a client that sent
 * such a request, then a bad frame, then half-closed saw no EOF until the
 * hold expired (the fuzz_ps_frame replay's "did not close a half-closed
 * connection in 10 s"). */
static void conn_drain(conn *c) {
  c->state = ST_DRAINING;
  if (!c->reading && !uv_is_closing((uv_handle_t *)&c->tcp)) {
    c->reading = 1;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  }
}

/* Sends the replies that are next in the connection's order. */
static void conn_flush(conn *c) {
  for (;;) {
    reply **slot = &c->ring[c->seq_out % REORDER];
    reply *r = *slot;
    if (!r) break;
    *slot = NULL;
    c->seq_out++;
    if (c->state == ST_CLOSING || uv_is_closing((uv_handle_t *)&c->tcp)) {
      reply_free(r);
      continue;
    }
    uv_buf_t b[2] = {uv_buf_init((char *)r->data, (unsigned)r->len), uv_buf_init((char *)r->ext, (unsigned)r->ext_len)};
    int close_after = r->close_after;
    if (uv_write(&r->req, (uv_stream_t *)&c->tcp, b, r->ext_len ? 2 : 1, write_done) < 0) {
      reply_free(r);
      conn_close(c);
      return;
    }
    if (close_after && c->state < ST_DRAINING) conn_drain(c); /* close once written */
  }
  conn_update_reading(c);
}

/* The reply to request seq of c (NULL reply: out of memory: the connection is closed). */
static void conn_answer(conn *c, uint64_t seq, reply *r) {
  if (!r) {
    conn_close(c);
    return;
  }
  c->ring[seq % REORDER] = r;
  conn_flush(c);
}

/* A reply made on the loop thread to the request being read. */
static void loop_answer(conn *c, reply *r) { conn_answer(c, c->seq_in++, r); }

static void loop_error(conn *c, uint32_t code, int close_after, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void loop_error(conn *c, uint32_t code, int close_after, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  loop_answer(c, error_reply(c->srv, c, &c->h, code, close_after, "%s", msg));
  if (close_after && c->state < ST_DRAINING) conn_drain(c);
}
/* ---------------- variables and optimizers ---------------- */

static shard *shard_of(loom_ps_server *s, uint32_t id) { return &s->shards[id % (uint32_t)s->nshards]; }

static psvar *var_get(loom_ps_server *s, uint32_t id) {
  shard *sh = shard_of(s, id);
  uint32_t li = id / (uint32_t)s->nshards;
  return li < sh->cap && sh->vars[li].present ? &sh->vars[li] : NULL;
}

static float *alloc_floats(int64_t n, float fill) {
  float *p = loom__aligned_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  if (p)
    for (int64_t i = 0; i < n; i++) p[i] = fill;
  return p;
}

static void var_free(psvar *v) {
  vbuf_release(v->vb);
  loom__aligned_free(v->s0);
  loom__aligned_free(v->s1);
  loom__aligned_free(v->s2);
  loom__aligned_free(v->agg);
  loom__free(v->agg_ids);
  loom__free(v->agg_rows);
  loom__free(v->agg_conns);
  loom__free(v->sy_pairs);
  loom__free(v->sy_uids);
  loom__free(v->sy_sum);
  loom__free(v->ws);
  loom__free(v->sched_b);
  loom__free(v->sched_v);
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
/* One kernel call: sparse (ids) on the whole variable, or dense on the elements [off, off + cnt) (the
 * dense optimizers are elementwise, so a piece gives the same bits as the whole). */
/* The learning rate of the variable's next update: its schedule at its step (the local schedule kernel),
 * else hyper[0]. */
static float var_lr(const psvar *v) {
  if (!v->sched_on) return v->hyper[0];
  loom_attrs at;
  memset(&at, 0, sizeof at);
  at.num = v->sched_kind;
  at.alpha = v->sched_p[0];
  at.start = v->sched_p[1];
  at.beta = v->sched_p[2];
  at.limit = v->sched_p[3];
  at.keepdims = v->sched_flag;
  int64_t step = v->step, nb = v->sched_nb, nv = nb + 1;
  float lr = v->hyper[0];
  loom_buf sb = mkbuf(&step, 0, NULL, 1), bb = mkbuf(v->sched_b, 1, &nb, nb), vb = mkbuf(v->sched_v, 1, &nv, nv),
           ob = mkbuf(&lr, 0, NULL, 1);
  sb.dtype = LOOM_I64;
  bb.dtype = LOOM_F64;
  loom_buf *in[3] = {&sb, &bb, &vb}, *out[1] = {&ob};
  loom_kctx k;
  memset(&k, 0, sizeof k);
  k.attrs = &at;
  k.in = in;
  k.nin = v->sched_kind == LOOM_LRS_PIECEWISE ? 3 : 1;
  k.out = out;
  k.nout = 1;
  if (loom__k_lr_schedule(&k) != LOOM_OK) return v->hyper[0];
  return lr;
}

static loom_code kernel_apply(psvar *v, const float *grad, const int64_t *ids, int64_t n, int64_t off, int64_t cnt,
                              loom_status *st) {
  float hl[8];
  memcpy(hl, v->hyper, sizeof hl);
  hl[0] = var_lr(v);
  const float *h = hl;
  float sc[8]; /* scalar inputs, copied so the kernels see the same float values as a local graph's consts */
  int vnd = ids ? v->ndim : 1;
  const int64_t *vdims = ids ? v->dims : &cnt;
  loom_buf var = mkbuf(v->val + off, vnd, vdims, cnt);
  loom_buf sl[3];
  float *sp[3] = {v->s0, v->s1, v->s2};
  for (int i = 0; i < 3; i++) sl[i] = mkbuf(sp[i] ? sp[i] + off : NULL, vnd, vdims, cnt);
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
    size_t need = loom__sparse_apply_ws(n, v->row, v->nrows, v->opt == LOOM_PS_ADAM && h[4] != 0.0f);
    if (need > v->ws_size) {
      void *w = loom__realloc(v->ws, need);
      if (!w) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "sparse workspace of %zu bytes", need);
      v->ws = w;
      v->ws_size = need;
    }
  } else {
    g = mkbuf((void *)grad, 1, &cnt, cnt);
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
    at.num = ids && h[4] == 0.0f ? 2 : 0; /* sparse: LazyAdam unless hyper[4] (TF's Adam: every row's moments) */
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
  return ids ? sparse(&k) : dense(&k);
}

#define APPLY_PIECE ((int64_t)1 << 16) /* floats per dense piece: 256 KiB, in cache for the CRC that follows */

/* Applies a dense (ids NULL) or sparse gradient with the local kernels, in
 * the kernels' (TF's) input orders; copy-on-write first when a reply still
 * sends the value. crc (dense; may be NULL): extended over the new value
 * piece by piece, right after each piece is updated (one pass less over
 * memory than checksumming the reply afterwards). */
static loom_code var_cow(loom_ps_server *s, psvar *v, loom_status *st) {
  if (__atomic_load_n(&v->vb->refs, __ATOMIC_ACQUIRE) > 1) { /* a reply is still sending this value: copy on write */
    vbuf *nb = vbuf_new(v->numel);
    if (!nb) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "no memory for a copy of %lld floats", (long long)v->numel);
    memcpy(nb->data, v->vb->data, (size_t)v->numel * sizeof(float));
    vbuf_release(v->vb);
    v->vb = nb;
    v->val = nb->data;
    STAT_ADD(s, value_copies, 1);
  }
  return LOOM_OK;
}

/* The end of one applied step (a whole push): TF's _finish advances Adam's beta powers once, and the version. */
static void var_step_done(psvar *v) {
  if (v->opt == LOOM_PS_ADAM) {
    v->b1p = v->b1p * v->hyper[1];
    v->b2p = v->b2p * v->hyper[2];
  }
  v->version++;
  v->step++;
}

/* A dense gradient of elements [begin, begin + count) (grad[0] is element begin), in APPLY_PIECE pieces;
 * crc (may be NULL) extended over each updated piece. A whole push and a part (ps_parts.h) share it. */
static loom_code var_apply_range(psvar *v, const float *grad, int64_t begin, int64_t count, uint32_t *crc,
                                 loom_status *st) {
  loom_code rc = LOOM_OK;
  for (int64_t o = 0; o < count && !rc; o += APPLY_PIECE) {
    int64_t cnt = count - o < APPLY_PIECE ? count - o : APPLY_PIECE;
    rc = kernel_apply(v, grad + o, NULL, 0, begin + o, cnt, st);
    if (!rc && crc) *crc = loom__crc32c_extend(*crc, v->val + begin + o, (size_t)cnt * 4);
  }
  return rc;
}

static loom_code var_apply_crc(loom_ps_server *s, psvar *v, const float *grad, const int64_t *ids, int64_t n,
                               uint32_t *crc, loom_status *st) {
  loom_code rc = var_cow(s, v, st);
  if (rc) return rc;
  if (ids) {
    rc = kernel_apply(v, grad, ids, n, 0, v->numel, st);
  } else {
    rc = var_apply_range(v, grad, 0, v->numel, crc, st);
    if (!rc && v->numel == 0) rc = kernel_apply(v, grad, NULL, 0, 0, 0, st);
  }
  if (rc == LOOM_OK) var_step_done(v);
  return rc;
}

static loom_code var_apply(loom_ps_server *s, psvar *v, const float *grad, const int64_t *ids, int64_t n,
                           loom_status *st) {
  return var_apply_crc(s, v, grad, ids, n, NULL, st);
}


/* ---------------- shard threads: request handlers ---------------- */

static void complete(loom_ps_server *s, job *j) {
  stack_push(&s->completed, j);
  uv_async_send(&s->done_async);
}

static reply *value_reply_crc(loom_ps_server *s, job *j, psvar *v, uint64_t have, uint32_t flags,
                              const uint32_t *value_crc);
/* A PULL / PUSHPULL reply: {version, pad, value?}; values above 4 KiB are sent in place (zero-copy). */
static reply *value_reply(loom_ps_server *s, job *j, psvar *v, uint64_t have, uint32_t flags) {
  return value_reply_crc(s, j, v, have, flags, NULL);
}

/* value_crc (may be NULL): the CRC-32C of the 16-byte prefix {version, 0} then the value, already known. */
static reply *value_reply_crc(loom_ps_server *s, job *j, psvar *v, uint64_t have, uint32_t flags,
                              const uint32_t *value_crc) {
  (void)s;
  int unchanged = have == v->version;
  size_t n = unchanged ? 0 : (size_t)v->numel * 4;
  int inl = n <= 4096;
  reply *r = reply_new(j->c, 16 + (inl ? n : 0));
  if (!r) return NULL;
  uint8_t *out = reply_body(r);
  loom__ps_put64(out, v->version);
  loom__ps_put64(out + 8, 0);
  if (inl) {
    if (n) memcpy(out + 16, v->val, n);
  } else {
    __atomic_add_fetch(&v->vb->refs, 1, __ATOMIC_RELAXED);
    r->ref = v->vb;
    r->ext = v->val;
    r->ext_len = n;
  }
  if (value_crc && !inl) {
    loom__ps_hdr_encode(r->data, j->h.opcode, (unchanged ? LOOM_PS_FLAG_UNCHANGED : 0) | flags | LOOM_PS_FLAG_REPLY,
                        j->h.request_id, NULL, 0, 0);
    loom__ps_put32(r->data + 20, (uint32_t)(16 + n));
    loom__ps_put32(r->data + 24, *value_crc);
    return r;
  }
  reply_seal(r, &j->h, j->h.opcode, (unchanged ? LOOM_PS_FLAG_UNCHANGED : 0) | flags, 0, 0);
  return r;
}

static reply *small_reply(job *j, const void *body, size_t n, uint32_t flags) {
  reply *r = reply_new(j->c, n);
  if (!r) return NULL;
  if (n) memcpy(reply_body(r), body, n);
  reply_seal(r, &j->h, j->h.opcode, flags, 0, 0);
  return r;
}

static reply *version_reply(job *j, uint64_t version, uint32_t flags) {
  uint8_t b[8];
  loom__ps_put64(b, version);
  return small_reply(j, b, 8, flags);
}

#define JERR(code, close, ...) error_reply(s, j->c, &j->h, (code), (close), __VA_ARGS__)

static reply *handle_init(loom_ps_server *s, shard *sh, job *j) {
  const uint8_t *b = j->body;
  uint32_t len = j->h.body_len;
  if (len < 16) return JERR(LOOM_INVALID_ARGUMENT, 1, "INIT_VAR body of %u bytes", len);
  uint32_t id = loom__ps_get32(b), opt = loom__ps_get32(b + 4), ndim = loom__ps_get32(b + 8);
  /* The variable table is indexed by id: an id is bounded by the shards the
   * placement can have (each variable in at most num_ps parts), so a peer
   * cannot make the PS allocate a table for ids it will never use. */
  uint64_t max_ids = MAX_VARS;
  if (s->o.num_vars > 0 && s->o.num_ps > 0 && (uint64_t)s->o.num_vars * (uint64_t)s->o.num_ps < max_ids)
    max_ids = (uint64_t)s->o.num_vars * (uint64_t)s->o.num_ps;
  if (ndim > LOOM_MAX_DIMS || id >= max_ids || opt >= LOOM_PS_OPT_COUNT)
    return JERR(LOOM_INVALID_ARGUMENT, 0,
                "INIT_VAR: var %u (ids < %llu for %d variables on %d PS), optimizer %u, rank %u out of range", id,
                (unsigned long long)max_ids, s->o.num_vars, s->o.num_ps, opt, ndim);
  size_t off = 16 + 8 * (size_t)ndim;
  if (len < off + 32) return JERR(LOOM_INVALID_ARGUMENT, 1, "INIT_VAR body of %u bytes is truncated", len);
  psvar nv;
  memset(&nv, 0, sizeof nv);
  nv.ndim = (int32_t)ndim;
  nv.numel = 1;
  for (uint32_t i = 0; i < ndim; i++) {
    int64_t d = (int64_t)loom__ps_get64(b + 16 + 8 * i);
    if (d < 0 || (d > 0 && nv.numel > INT64_MAX / 4 / d))
      return JERR(LOOM_INVALID_ARGUMENT, 0, "INIT_VAR: var %u dims[%u] = %lld", id, i, (long long)d);
    nv.dims[i] = d;
    nv.numel *= d;
  }
  uint64_t vend = off + 32 + 4 * (uint64_t)nv.numel;
  const uint8_t *rb = b + vend;
  uint32_t rnb = len >= vend + LOOM_PS_RULE_FIXED ? loom__ps_get32(rb + 12) : 0;
  int rule = len >= vend + LOOM_PS_RULE_FIXED && loom__ps_get32(rb) == LOOM_PS_RULE_TAG && rnb <= LOOM_PS_RULE_MAX_NB;
  uint64_t want = rule ? vend + LOOM_PS_RULE_FIXED + 8 * (uint64_t)rnb + 4 * ((uint64_t)rnb + 1) : vend;
  uint32_t rns = 0; /* slot values after the rule block's arrays */
  const uint8_t *slot_bytes = NULL;
  if (rule && (uint64_t)len >= want + 8) {
    rns = loom__ps_get32(b + want);
    slot_bytes = b + want + 8;
    if (rns <= 3) want += 8 + 4 * (uint64_t)rns * (uint64_t)nv.numel;
  }
  int32_t rkind = rule ? (int32_t)loom__ps_get32(rb + 4) : -1;
  if ((uint64_t)len != want)
    return JERR(LOOM_INVALID_ARGUMENT, 1, "INIT_VAR: var %u body of %u bytes, expected %llu%s", id, len,
                (unsigned long long)want, rule ? " (with its rule block)" : "");
  if (rkind < -1 || rkind > LOOM_LRS_COSINE || (rkind != LOOM_LRS_PIECEWISE && rnb) || rns > 3)
    return JERR(LOOM_INVALID_ARGUMENT, 1,
                "INIT_VAR: var %u: the rule block names schedule %d with %u boundaries and %u slots (schedules -1..3; "
                "boundaries only for the piecewise one; at most 3 slots)",
                id, (int)rkind, rnb, rns);
  memcpy(nv.hyper, b + off, 32);
  int created = 0;
  psvar *old = var_get(s, id);
  if (old) {
    int same = old->ndim == nv.ndim && old->numel == nv.numel;
    for (int i = 0; same && i < nv.ndim; i++) same = old->dims[i] == nv.dims[i];
    if (!same) return JERR(LOOM_INVALID_ARGUMENT, 0, "INIT_VAR: var %u exists with another shape", id);
  } else {
    uint32_t li = id / (uint32_t)s->nshards;
    if (li >= sh->cap) {
      uint32_t cap = sh->cap ? sh->cap : 16;
      while (cap <= li) cap *= 2;
      psvar *nvs = loom__realloc(sh->vars, cap * sizeof(psvar));
      if (!nvs) return JERR(LOOM_RESOURCE_EXHAUSTED, 0, "no memory for %u variables", cap);
      memset(nvs + sh->cap, 0, (cap - sh->cap) * sizeof(psvar));
      sh->vars = nvs;
      sh->cap = cap;
    }
    nv.opt = (loom_ps_optimizer)opt;
    nv.nrows = nv.ndim ? nv.dims[0] : 1;
    nv.row = nv.nrows > 0 ? nv.numel / nv.nrows : 0;
    nv.vb = vbuf_new(nv.numel);
    nv.val = nv.vb ? nv.vb->data : NULL;
    float init[3];
    int nslots = opt_slots(nv.opt, nv.hyper, init);
    float **slot[3] = {&nv.s0, &nv.s1, &nv.s2};
    int slots_ok = 1;
    if (rns && (int)rns != nslots) {
      var_free(&nv);
      return JERR(LOOM_INVALID_ARGUMENT, 0, "INIT_VAR: var %u: %u slot values for an optimizer with %d slots", id, rns,
                  nslots);
    }
    for (int i = 0; i < nslots; i++) {
      slots_ok &= (*slot[i] = alloc_floats(nv.numel, init[i])) != NULL;
      if (*slot[i] && rns && nv.numel) memcpy(*slot[i], slot_bytes + 4 * (size_t)i * (size_t)nv.numel, (size_t)nv.numel * 4);
    }
    nv.b1p = nv.hyper[1];
    nv.b2p = nv.hyper[2];
    if (rule) { /* the model's update rule: its step, Adam's beta powers, its learning-rate schedule */
      float p1, p2;
      nv.step = (int64_t)loom__ps_get64(rb + 16);
      memcpy(&p1, rb + 24, 4);
      memcpy(&p2, rb + 28, 4);
      if (p1 != 0.0f) nv.b1p = p1;
      if (p2 != 0.0f) nv.b2p = p2;
      nv.sched_on = rkind >= 0;
      nv.sched_kind = rkind;
      nv.sched_flag = (int32_t)loom__ps_get32(rb + 8);
      nv.sched_nb = (int32_t)rnb;
      memcpy(nv.sched_p, rb + 32, 32);
      if (rkind == LOOM_LRS_PIECEWISE) {
        nv.sched_b = loom__malloc(8 * (size_t)rnb + 8);
        nv.sched_v = loom__malloc(4 * (size_t)rnb + 4);
        if (nv.sched_b) memcpy(nv.sched_b, rb + LOOM_PS_RULE_FIXED, 8 * (size_t)rnb);
        if (nv.sched_v) memcpy(nv.sched_v, rb + LOOM_PS_RULE_FIXED + 8 * (size_t)rnb, 4 * (size_t)rnb + 4);
        slots_ok &= nv.sched_b && nv.sched_v;
      }
    }
    if (!nv.val || !slots_ok) {
      var_free(&nv);
      return JERR(LOOM_RESOURCE_EXHAUSTED, 0, "no memory for var %u (%lld floats)", id, (long long)nv.numel);
    }
    if (nv.numel) memcpy(nv.val, b + off + 32, (size_t)nv.numel * 4);
    nv.present = 1;
    sh->vars[li] = nv;
    __atomic_add_fetch(&s->nvars_present, 1, __ATOMIC_RELAXED);
    created = 1;
  }
  uint8_t out[4];
  loom__ps_put32(out, (uint32_t)created);
  return small_reply(j, out, 4, 0);
}

/* The variable a request names (its first u32), or NULL with *err set. */
static psvar *req_var(loom_ps_server *s, job *j, uint32_t need, reply **err) {
  if (j->h.body_len < need) {
    *err = JERR(LOOM_INVALID_ARGUMENT, 1, "opcode %u body of %u bytes is truncated (at least %u)", j->h.opcode,
                j->h.body_len, need);
    return NULL;
  }
  uint32_t id = loom__ps_get32(j->body);
  psvar *v = var_get(s, id);
  if (!v) *err = JERR(LOOM_FAILED_PRECONDITION, 0, "variable %u is not initialized on this PS", id);
  return v;
}

static reply *handle_rows(loom_ps_server *s, shard *sh, job *j, int push, int at, int *held);

/* SYNC: the step of variable id has been applied: answer every push+pull (and PULL_ROWS) waiting for it. */
static void wake_waiters(loom_ps_server *s, shard *sh, uint32_t id, psvar *v) {
  for (job **pp = &sh->waiters; *pp;) {
    job *w = *pp;
    if (w->wait_var == id && v->version > w->wait_version) {
      *pp = w->next;
      uint16_t op = w->h.opcode;
      w->out = op == LOOM_PS_PULL_ROWS      ? handle_rows(s, sh, w, 0, 0, NULL)
               : op == LOOM_PS_PULL_ROWS_AT ? handle_rows(s, sh, w, 0, 1, NULL)
               : op == LOOM_PS_PUSHPULL     ? value_reply(s, w, v, UINT64_MAX, 0)
                                            : version_reply(w, v->version, 0); /* PUSH, PUSH_ROWS_AT: the token */
      complete(s, w);
    } else {
      pp = &w->next;
    }
  }
}

static reply *push_reply(loom_ps_server *s, job *j, psvar *v, int pull, uint32_t flags) {
  return pull ? value_reply(s, j, v, UINT64_MAX, flags) : version_reply(j, v->version, flags);
}

/* SYNC token semantics (TF's SyncReplicasOptimizer: after pushing, a replica
 * dequeues a token the chief enqueues once per replica after the step is
 * applied): a push that joins the step being aggregated is held, whatever
 * its form (PUSH, PUSHPULL, PUSH_ROWS_AT), and answered when that step is
 * applied, with the new version (the token's global step) and, for PUSHPULL,
 * the new value; DEADLINE_EXCEEDED after sync_timeout_s. A late push (read at
 * an older version) is dropped, counted and answered at once with the
 * current version/value and the STALE flag: in TF its replica finds a token
 * of the step it missed waiting in the queue. */
static void sync_hold(loom_ps_server *s, shard *sh, job *j, uint32_t id, uint64_t rv) {
  double to = s->o.sync_timeout_s > 0 ? s->o.sync_timeout_s : 30.0;
  j->wait_var = id; /* answered when the step is applied */
  j->wait_version = rv;
  j->deadline_ms = now_ms() + (uint64_t)(to * 1000.0);
  j->next = sh->waiters;
  sh->waiters = j;
}

static reply *push_apply(loom_ps_server *s, shard *sh, job *j, psvar *v, uint32_t id, uint64_t rv,
                         const float *grad, int pull, int *held);
/* Returns the reply, or NULL with *held = 1 when the job waits for its SYNC step. */
static reply *handle_push(loom_ps_server *s, shard *sh, job *j, int pull, int *held) {
  reply *err = NULL;
  psvar *v = req_var(s, j, 16, &err);
  if (!v) return err;
  uint32_t id = loom__ps_get32(j->body);
  if ((uint64_t)j->h.body_len != 16 + 4 * (uint64_t)v->numel)
    return JERR(LOOM_INVALID_ARGUMENT, 1, "PUSH of var %u: %u bytes of gradient, expected %lld", id,
                j->h.body_len - 16, (long long)(4 * v->numel));
  return push_apply(s, sh, j, v, id, loom__ps_get64(j->body + 8), (const float *)(j->body + 16), pull, held);
}

/* The body of a dense push (TCP or shared memory): grad (numel floats) computed on version rv. */
static reply *push_apply(loom_ps_server *s, shard *sh, job *j, psvar *v, uint32_t id, uint64_t rv,
                         const float *grad, int pull, int *held) {
  if (s->o.consistency == LOOM_PS_BOUNDED && rv != UINT64_MAX && v->version > rv &&
      v->version - rv > (uint64_t)s->o.staleness) {
    STAT_ADD(s, stale_dropped, 1); /* DropStaleGradient */
    return push_reply(s, j, v, pull, LOOM_PS_FLAG_STALE);
  }
  if (s->o.consistency == LOOM_PS_SYNC) {
    if (rv == UINT64_MAX || rv > v->version)
      return JERR(LOOM_INVALID_ARGUMENT, 0, "SYNC push of var %u read at version %lld, the PS is at %llu", id,
                  rv == UINT64_MAX ? -1LL : (long long)rv, (unsigned long long)v->version);
    if (rv < v->version) { /* a late gradient of an applied step */
      STAT_ADD(s, stale_dropped, 1);
      return push_reply(s, j, v, pull, LOOM_PS_FLAG_STALE);
    }
    if (!v->agg && !(v->agg = alloc_floats(v->numel, 0)))
      return JERR(LOOM_RESOURCE_EXHAUSTED, 0, "no memory to aggregate var %u", id);
    if (v->agg_count == 0)
      memcpy(v->agg, grad, (size_t)v->numel * 4);
    else
      for (int64_t i = 0; i < v->numel; i++) v->agg[i] += grad[i];
    int k = s->o.replicas_to_aggregate > 0 ? s->o.replicas_to_aggregate : 1;
    if (++v->agg_count < k) {
      sync_hold(s, sh, j, id, rv);
      *held = 1;
      return NULL;
    }
    for (int64_t i = 0; i < v->numel; i++) v->agg[i] /= (float)k; /* the accumulator's mean */
    v->agg_count = 0;
    grad = v->agg;
  }
  loom_status *st = loom_status_new();
  uint8_t pre[16]; /* the reply's prefix {version after this push, 0}: its CRC is extended piece by piece */
  loom__ps_put64(pre, v->version + 1);
  loom__ps_put64(pre + 8, 0);
  uint32_t crc = loom__crc32c_extend(0, pre, 16);
  int fused = pull && s->o.consistency != LOOM_PS_SYNC && (size_t)v->numel * 4 > 4096;
  loom_code rc = var_apply_crc(s, v, grad, NULL, 0, fused ? &crc : NULL, st);
  if (rc) {
    reply *r = JERR(rc, 0, "PUSH of var %u: %s", id, loom_status_message(st));
    loom_status_free(st);
    return r;
  }
  loom_status_free(st);
  STAT_ADD(s, updates, 1);
  if (s->o.consistency == LOOM_PS_SYNC) {
    STAT_ADD(s, sync_steps, 1);
    wake_waiters(s, sh, id, v);
  }
  if (fused) return value_reply_crc(s, j, v, UINT64_MAX, 0, &crc);
  return push_reply(s, j, v, pull, 0);
}

/* One part of a pipelined push+pull (ps_parts.h): checked against the connection's open push on this
 * shard thread, applied to its elements, answered with them at once; the last part ends the step. */
static reply *handle_part(loom_ps_server *s, shard *sh, job *j) {
  char why[240];
  loom_ps_part p;
  if (loom__ps_part_parse(j->body, j->h.body_len, &p, why, sizeof why))
    return JERR(LOOM_INVALID_ARGUMENT, 0, "PUSHPULL_PART: %s", why);
  loom_ps_parts_state *ps = &j->c->parts[sh->index];
  if (s->o.consistency != LOOM_PS_ASYNC) {
    ps->active = 0;
    return JERR(LOOM_FAILED_PRECONDITION, 0, "PUSHPULL_PART of var %u: parts need an ASYNC PS (send PUSHPULL)",
                p.var_id);
  }
  psvar *v = var_get(s, p.var_id);
  if (!v) {
    ps->active = 0;
    return JERR(LOOM_FAILED_PRECONDITION, 0, "PUSHPULL_PART: variable %u is not initialized on this PS", p.var_id);
  }
  int last = 0;
  if (loom__ps_part_order(ps, &p, v->numel, &last, why, sizeof why))
    return JERR(LOOM_INVALID_ARGUMENT, 0, "PUSHPULL_PART: %s", why);
  loom_status *st = loom_status_new();
  loom_code rc = var_cow(s, v, st);
  int64_t off = (int64_t)p.offset;
  if (!rc) rc = var_apply_range(v, p.grad, off, p.count, NULL, st); /* the one-frame path's pieces, same bits */
  if (rc) {
    ps->active = 0;
    reply *r = JERR(rc, 0, "PUSHPULL_PART of var %u part %u: %s", p.var_id, p.part, loom_status_message(st));
    loom_status_free(st);
    return r;
  }
  loom_status_free(st);
  if (last) {
    var_step_done(v);
    STAT_ADD(s, updates, 1);
  }
  reply *r = part_reply_new(j->c, 16 + (size_t)p.count * 4);
  if (!r) return NULL;
  uint8_t *out = reply_body(r);
  loom__ps_put64(out, v->version);
  loom__ps_put64(out + 8, p.offset);
  memcpy(out + 16, v->val + off, (size_t)p.count * 4);
  reply_seal(r, &j->h, j->h.opcode, 0, 0, 0);
  return r;
}

/* PULL_ROWS {var u32, n u32, ids}, PUSH_ROWS {var u32, n u32, ids, grads},
 * PUSH_ROWS_AT {var u32, n u32, read_version u64, ids, grads}. */
static int cmp_pair(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* SYNC row pushes (SyncReplicasOptimizer for IndexedSlices): the k-th
 * contribution of the step applies the mean: rows of equal ids summed in
 * arrival order, divided by k, one sparse update. */
static reply *rows_sync(loom_ps_server *s, shard *sh, job *j, psvar *v, const int64_t *ids, uint64_t n,
                        const float *g, uint64_t rv, int *held) {
  uint32_t id = loom__ps_get32(j->body);
  if (n > 0 && (rv == UINT64_MAX || rv > v->version))
    return JERR(LOOM_INVALID_ARGUMENT, 0, "SYNC row push of var %u read at version %lld, the PS is at %llu", id,
                rv == UINT64_MAX ? -1LL : (long long)rv, (unsigned long long)v->version);
  if (rv < v->version) { /* late for an applied step (with no rows too: it would count in the next step) */
    STAT_ADD(s, stale_dropped, 1);
    return version_reply(j, v->version, LOOM_PS_FLAG_STALE);
  }
  int64_t row = v->row;
  for (uint64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= v->nrows)
      return JERR(LOOM_INVALID_ARGUMENT, 0, "row push of var %u: ids[%llu] = %lld is not in [0, %lld)", id,
                  (unsigned long long)i, (long long)ids[i], (long long)v->nrows);
  if (v->agg_n + (int64_t)n > v->agg_cap) {
    int64_t cap = (v->agg_n + (int64_t)n) * 2;
    int64_t *ni = loom__realloc(v->agg_ids, (size_t)cap * 2 * sizeof(int64_t)); /* (id, position) pairs at apply */
    if (ni) v->agg_ids = ni;
    float *nr = ni ? loom__realloc(v->agg_rows, (size_t)(cap * row + 1) * sizeof(float)) : NULL;
    if (nr) v->agg_rows = nr;
    if (!ni || !nr) return JERR(LOOM_RESOURCE_EXHAUSTED, 0, "no memory to aggregate rows of var %u", id);
    v->agg_cap = cap;
  }
  if (v->agg_nconn == v->agg_conn_cap) {
    int cap = v->agg_conn_cap ? 2 * v->agg_conn_cap : 8;
    conn **nc = loom__realloc(v->agg_conns, (size_t)cap * sizeof *nc);
    if (!nc) return JERR(LOOM_RESOURCE_EXHAUSTED, 0, "no memory to aggregate rows of var %u", id);
    v->agg_conns = nc;
    v->agg_conn_cap = cap;
  }
  memcpy(v->agg_ids + v->agg_n, ids, (size_t)n * 8);
  memcpy(v->agg_rows + v->agg_n * row, g, (size_t)(n * (uint64_t)row) * 4);
  v->agg_n += (int64_t)n;
  v->agg_conns[v->agg_nconn++] = j->c;
  int k = s->o.replicas_to_aggregate > 0 ? s->o.replicas_to_aggregate : 1;
  if (++v->agg_count < k) { /* held until the step that makes version + 1 is applied */
    sync_hold(s, sh, j, id, v->version);
    *held = 1;
    return NULL;
  }
  /* sum equal ids in arrival order, then the mean */
  int64_t m = v->agg_n, nu = 0;
  int64_t *pr = v->agg_ids;
  if (m > v->sy_cap || !v->sy_sum) {
    int64_t mc = m > 0 ? m : 1;
    int64_t *np_ = loom__realloc(v->sy_pairs, (size_t)mc * 2 * sizeof(int64_t));
    if (np_) v->sy_pairs = np_;
    int64_t *nu_ = np_ ? loom__realloc(v->sy_uids, (size_t)mc * sizeof(int64_t)) : NULL;
    if (nu_) v->sy_uids = nu_;
    float *ns_ = nu_ ? loom__realloc(v->sy_sum, (size_t)(mc * row + 1) * sizeof(float)) : NULL;
    if (ns_) v->sy_sum = ns_;
    if (!ns_) return JERR(LOOM_RESOURCE_EXHAUSTED, 0, "no memory to apply the rows of var %u", id);
    v->sy_cap = mc;
  }
  int64_t *pairs = v->sy_pairs, *uids = v->sy_uids;
  float *sum = v->sy_sum;
  for (int64_t i = 0; i < m; i++) pairs[2 * i] = pr[i], pairs[2 * i + 1] = i;
  qsort(pairs, (size_t)m, 2 * sizeof(int64_t), cmp_pair);
  for (int64_t i = 0; i < m;) {
    int64_t e = i + 1;
    float *d = sum + nu * row;
    memcpy(d, v->agg_rows + pairs[2 * i + 1] * row, (size_t)row * 4);
    for (; e < m && pairs[2 * e] == pairs[2 * i]; e++)
      for (int64_t c = 0; c < row; c++) d[c] += v->agg_rows[pairs[2 * e + 1] * row + c];
    for (int64_t c = 0; c < row; c++) d[c] /= (float)k;
    uids[nu++] = pairs[2 * i];
    i = e;
  }
  v->agg_count = 0;
  v->agg_n = 0;
  v->agg_nconn = 0;
  loom_status *st = loom_status_new();
  loom_code rc = var_apply(s, v, sum, uids, nu, st);
  if (rc) {
    reply *r = JERR(rc, 0, "row push of var %u: %s", id, loom_status_message(st));
    loom_status_free(st);
    return r;
  }
  loom_status_free(st);
  STAT_ADD(s, updates, 1);
  STAT_ADD(s, sync_steps, 1);
  wake_waiters(s, sh, id, v);
  return version_reply(j, v->version, 0);
}

/* SYNC: a PULL_ROWS from a connection whose rows are in the step being
 * aggregated waits for that step (answered by wake_waiters). */
static int rows_hold(loom_ps_server *s, shard *sh, job *j) {
  if (j->h.body_len < 8) return 0;
  uint32_t id = loom__ps_get32(j->body);
  psvar *v = var_get(s, id);
  if (!v) return 0;
  uint64_t wait;
  if (j->h.opcode == LOOM_PS_PULL_ROWS_AT) { /* any mode: wait until the version reaches min_version */
    uint64_t minv = j->h.body_len >= 16 ? loom__ps_get64(j->body + 8) : UINT64_MAX;
    if (minv == UINT64_MAX || v->version >= minv) return 0;
    wait = minv - 1;
  } else {
    if (s->o.consistency != LOOM_PS_SYNC || !v->agg_count) return 0;
    int mine = 0;
    for (int i = 0; i < v->agg_nconn && !mine; i++) mine = v->agg_conns[i] == j->c;
    if (!mine) return 0;
    wait = v->version;
  }
  double to = s->o.sync_timeout_s > 0 ? s->o.sync_timeout_s : 30.0;
  j->wait_var = id;
  j->wait_version = wait;
  j->deadline_ms = now_ms() + (uint64_t)(to * 1000.0);
  j->next = sh->waiters;
  sh->waiters = j;
  return 1;
}

static reply *handle_rows(loom_ps_server *s, shard *sh, job *j, int push, int at, int *held) {
  reply *err = NULL;
  psvar *v = req_var(s, j, 8, &err);
  if (!v) return err;
  uint32_t id = loom__ps_get32(j->body);
  uint64_t n = loom__ps_get32(j->body + 4);
  size_t ioff = at ? 16 : 8;
  uint64_t want = ioff + 8 * n + (push ? 4 * n * (uint64_t)v->row : 0);
  const char *what = !push ? (at ? "PULL_ROWS_AT" : "PULL_ROWS") : at ? "PUSH_ROWS_AT" : "PUSH_ROWS";
  if (j->h.body_len != want)
    return JERR(LOOM_INVALID_ARGUMENT, 1, "%s of var %u with %llu ids: %u bytes, expected %llu", what, id,
                (unsigned long long)n, j->h.body_len, (unsigned long long)want);
  const int64_t *ids = (const int64_t *)(j->body + ioff);
  if (push) {
    uint64_t rv = at ? loom__ps_get64(j->body + 8) : UINT64_MAX;
    if (s->o.consistency == LOOM_PS_SYNC) {
      if (!at) /* no version: it cannot be placed in a step */
        return JERR(LOOM_UNIMPLEMENTED, 0, "PUSH_ROWS of var %u: a SYNC PS takes row pushes with a read version "
                    "(PUSH_ROWS_AT)", id);
      return rows_sync(s, sh, j, v, ids, n, (const float *)(j->body + ioff + 8 * n), rv, held);
    }
    if (s->o.consistency == LOOM_PS_BOUNDED && rv != UINT64_MAX && v->version > rv &&
        v->version - rv > (uint64_t)s->o.staleness) {
      STAT_ADD(s, stale_dropped, 1);
      return version_reply(j, v->version, LOOM_PS_FLAG_STALE);
    }
    loom_status *st = loom_status_new();
    loom_code rc = var_apply(s, v, (const float *)(j->body + ioff + 8 * n), ids, (int64_t)n, st);
    if (rc) {
      reply *r = JERR(rc, 0, "%s of var %u: %s", what, id, loom_status_message(st));
      loom_status_free(st);
      return r;
    }
    loom_status_free(st);
    STAT_ADD(s, updates, 1);
    return version_reply(j, v->version, 0);
  }
  /* the reply must fit in a frame the client accepts: never build one larger than max_frame */
  if (8 + (uint64_t)n * (uint64_t)v->row * 4 > (uint64_t)s->o.max_frame)
    return JERR(LOOM_INVALID_ARGUMENT, 0, "%s of var %u: %llu rows of %lld floats would make a reply over max_frame "
                "(%u bytes); pull fewer rows per request", what, id, (unsigned long long)n, (long long)v->row,
                (unsigned)s->o.max_frame);
  for (uint64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= v->nrows)
      return JERR(LOOM_INVALID_ARGUMENT, 0, "%s of var %u: ids[%llu] = %lld is not in [0, %lld)", what, id,
                  (unsigned long long)i, (long long)ids[i], (long long)v->nrows);
  size_t rb = (size_t)v->row * 4;
  reply *r = reply_new(j->c, 8 + n * rb);
  if (!r) return NULL;
  uint8_t *out = reply_body(r);
  loom__ps_put64(out, v->version);
  for (uint64_t i = 0; i < n; i++) memcpy(out + 8 + i * rb, v->val + ids[i] * v->row, rb);
  reply_seal(r, &j->h, j->h.opcode, 0, 0, 0);
  return r;
}

/* STEP_INC {k} adds k; STEP_INC {k, limit} is a reservation: k is added only when the sum stays <= limit,
 * else nothing changes and the reply (the current step) carries flag REFUSED. */
static reply *handle_step_inc(loom_ps_server *s, job *j) {
  /* a peer's increment must not wrap (or overflow: UB) the step: refused, the step kept */
  int64_t k = (int64_t)loom__ps_get64(j->body), gs = __atomic_load_n(&s->global_step, __ATOMIC_RELAXED), sum;
  int limited = j->h.body_len == 16;
  int64_t limit = limited ? (int64_t)loom__ps_get64(j->body + 8) : 0;
  uint32_t flags = 0;
  do {
    if (__builtin_add_overflow(gs, k, &sum))
      return JERR(LOOM_OUT_OF_RANGE, 0, "STEP_INC: global_step %lld + %lld does not fit in int64", (long long)gs,
                  (long long)k);
    if (limited && sum > limit) {
      flags = LOOM_PS_FLAG_REFUSED;
      sum = gs;
      break;
    }
  } while (!__atomic_compare_exchange_n(&s->global_step, &gs, sum, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  gs = sum;
  uint8_t b[8];
  loom__ps_put64(b, (uint64_t)gs);
  return small_reply(j, b, 8, flags);
}
/* ---------------- checkpoints (SAVE / RESTORE) ----------------
 * Each PS writes its own shard, <model_dir>/<dir>/model.ckpt-<step>.ps-<i>-of-<n>,
 * in loom's checkpoint format (CRC-protected, written to a temporary file
 * and renamed). Per variable id: "v<id>" (the value), "v<id>/slot<k>" (the
 * optimizer slots), "v<id>/state" f32[10] (hyper[8], beta1/beta2 powers),
 * "v<id>/meta" i64[2] (optimizer, version); plus "global_step". SYNC
 * aggregation state is not checkpointed (TF's gradient accumulators are not
 * either): a SAVE writes the last applied step and the step being
 * aggregated goes on; a RESTORE discards the partial sums (counted in
 * stale_dropped) and answers the requests held for them ABORTED. Only a relative dir without ".."
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


/* One past the largest variable id any shard could hold. */
static uint32_t vars_end(loom_ps_server *s) {
  uint32_t end = 0;
  for (int q = 0; q < s->nshards; q++) {
    uint32_t e = s->shards[q].cap * (uint32_t)s->nshards;
    if (e > end) end = e;
  }
  return end;
}

static uint64_t vars_digest(loom_ps_server *s, uint32_t *nvars) {
  uint64_t d = 0xcbf29ce484222325ull;
  uint32_t n = 0;
  uint32_t end = vars_end(s);
  for (uint32_t i = 0; i < end; i++) {
    psvar *v = var_get(s, i);
    if (!v) continue;
    n++;
    d = (d ^ i) * 0x100000001b3ull;
    d = (d ^ v->version) * 0x100000001b3ull;
    d = (d ^ loom__crc32c(v->val, (size_t)v->numel * 4)) * 0x100000001b3ull;
  }
  *nvars = n;
  return d;
}

static loom_code ckpt_save(loom_ps_server *s, const char *path, loom_status *st) {
  uint32_t n = __atomic_load_n(&s->nvars_present, __ATOMIC_RELAXED);
  size_t cap = (size_t)n * 7 + 1;
  const char **names = loom__calloc(cap, sizeof *names);
  char **own = loom__calloc(cap, sizeof *own);
  loom_tensor **t = loom__calloc(cap, sizeof *t);
  int k = 0;
  loom_code rc = names && own && t ? LOOM_OK : loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
  uint32_t end = vars_end(s);
  for (uint32_t i = 0; i < end && !rc; i++) {
    psvar *v = var_get(s, i);
    if (!v) continue;
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
    if (!rc && (v->sched_on || v->step)) { /* "v<id>/rule" f64: schedule, flag, nb, step, p[4], boundaries, values */
      int64_t nr = 8 + 2 * (int64_t)v->sched_nb + 1;
      char nm[64];
      snprintf(nm, sizeof nm, "v%u/rule", i);
      t[k] = loom_tensor_new(LOOM_F64, 1, &nr, st);
      own[k] = loom__strdup(nm);
      names[k] = own[k];
      if (!t[k] || !own[k]) {
        rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
      } else {
        double *r = loom_tensor_data(t[k]);
        r[0] = v->sched_on ? v->sched_kind : -1;
        r[1] = v->sched_flag;
        r[2] = v->sched_nb;
        r[3] = (double)v->step;
        memcpy(r + 4, v->sched_p, 32);
        for (int q = 0; q < v->sched_nb; q++) r[8 + q] = v->sched_b[q];
        for (int q = 0; v->sched_v && q <= v->sched_nb; q++) r[8 + v->sched_nb + q] = v->sched_v[q];
      }
      k++;
    }
  }
  if (!rc) {
    int64_t gs = __atomic_load_n(&s->global_step, __ATOMIC_RELAXED);
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
    v->vb = vbuf_new(v->numel);
    v->val = v->vb ? v->vb->data : NULL;
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
    snprintf(nm, sizeof nm, "v%u/rule", id);
    if (loom_checkpoint_read_tensor(path, nm, &t, NULL) == LOOM_OK) { /* the update rule's schedule and step */
      int64_t nr = loom_tensor_numel(t);
      const double *r = loom_tensor_dtype(t) == LOOM_F64 ? loom_tensor_data_const(t) : NULL;
      int64_t nb = r && nr >= 8 ? (int64_t)r[2] : -1;
      if (!r || nb < 0 || nb > LOOM_PS_RULE_MAX_NB || nr != 8 + 2 * nb + 1 || r[0] < -1 || r[0] > LOOM_LRS_COSINE) {
        rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: %s is malformed", path, nm);
      } else {
        v->sched_on = r[0] >= 0;
        v->sched_kind = (int32_t)r[0];
        v->sched_flag = (int32_t)r[1];
        v->sched_nb = (int32_t)nb;
        v->step = (int64_t)r[3];
        memcpy(v->sched_p, r + 4, 32);
        v->sched_b = loom__malloc(8 * (size_t)nb + 8);
        v->sched_v = loom__malloc(4 * (size_t)nb + 4);
        if (!v->sched_b || !v->sched_v) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "restore: no memory");
        for (int64_t q = 0; !rc && q < nb; q++) v->sched_b[q] = r[8 + q];
        for (int64_t q = 0; !rc && q <= nb; q++) v->sched_v[q] = (float)r[8 + nb + q];
      }
      loom_tensor_free(t);
      t = NULL;
      if (rc) break;
    }
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
  /* every shard is parked (a barrier): hand the variables out to their shards */
  uint32_t ns = (uint32_t)s->nshards;
  shard *nsh = loom__calloc(ns, sizeof *nsh);
  for (uint32_t q = 0; nsh && q < ns; q++) {
    nsh[q].cap = cap / ns + 1;
    nsh[q].vars = loom__calloc(nsh[q].cap, sizeof(psvar));
    if (!nsh[q].vars) {
      for (uint32_t k = 0; k < q; k++) loom__free(nsh[k].vars);
      loom__free(nsh);
      nsh = NULL;
    }
  }
  if (!nsh) {
    for (uint32_t i = 0; i < cap; i++)
      if (nvs[i].present) var_free(&nvs[i]);
    loom__free(nvs);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "restore: no memory");
  }
  for (uint32_t i = 0; i < cap; i++)
    if (nvs[i].present) nsh[i % ns].vars[i / ns] = nvs[i];
  loom__free(nvs);
  for (uint32_t q = 0; q < ns; q++) {
    shard *sh = &s->shards[q];
    for (uint32_t i = 0; i < sh->cap; i++)
      if (sh->vars[i].present) var_free(&sh->vars[i]);
    loom__free(sh->vars);
    sh->vars = nsh[q].vars;
    sh->cap = nsh[q].cap;
  }
  loom__free(nsh);
  __atomic_store_n(&s->nvars_present, (uint32_t)ids.n, __ATOMIC_RELAXED);
  __atomic_store_n(&s->global_step, gs, __ATOMIC_RELAXED);
  return LOOM_OK;
}

/* ---------------- barriers (SAVE, RESTORE, SYNC STEP_INC) ---------------- */

/* Runs on the last shard to reach the barrier; every other shard is parked. */
static void run_barrier(loom_ps_server *s, barrier *b) {
  if (b->kind == BAR_SYNC_STEP) { /* the number of aggregated steps applied */
    uint64_t m = UINT64_MAX;
    uint32_t end = vars_end(s);
    for (uint32_t i = 0; i < end; i++) {
      psvar *v = var_get(s, i);
      if (v && v->version < m) m = v->version;
    }
    b->global_step = m == UINT64_MAX ? 0 : (int64_t)m;
    __atomic_store_n(&s->global_step, b->global_step, __ATOMIC_RELAXED);
    return;
  }
  int save = b->kind == BAR_SAVE;
  loom_status *st = loom_status_new();
  char *slash = strrchr(b->path, '/');
  if (save && slash) {
    *slash = 0;
    if (mkdirs(b->path) != 0) {
      b->rc = LOOM_UNAVAILABLE;
      snprintf(b->msg, sizeof b->msg, "SAVE: cannot create %.400s: %s", b->path, strerror(errno));
      *slash = '/';
      loom_status_free(st);
      return;
    }
    *slash = '/';
  }
  int64_t pending = 0; /* SYNC contributions to steps not yet applied: a RESTORE discards them */
  for (uint32_t i = 0, end = save ? 0 : vars_end(s); i < end; i++) {
    psvar *v = var_get(s, i);
    if (v) pending += v->agg_count;
  }
  b->rc = save ? ckpt_save(s, b->path, st) : ckpt_restore(s, b->path, st);
  if (!save && !b->rc && pending) STAT_ADD(s, stale_dropped, pending);
  if (!b->rc) /* every shard is parked: the counter is exact, the shard now saved (or as restored) */
    __atomic_store_n(&s->updates_at_save, __atomic_load_n(&s->stats.updates, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  if (b->self && !b->rc) STAT_ADD(s, self_saves, 1);
  if (b->rc) {
    snprintf(b->msg, sizeof b->msg, "%s: %s", save ? "SAVE" : "RESTORE", loom_status_message(st));
  } else {
    b->digest = vars_digest(s, &b->nvars);
    loom__log(LOOM_LOG_INFO, "ps :%d: %s %s (%u variables, digest %016llx)%s", s->port, save ? "saved" : "restored",
              b->path, b->nvars, (unsigned long long)b->digest,
              b->self ? ": a save of its own" : "");
  }
  if (b->self && b->rc) loom__log(LOOM_LOG_WARN, "ps :%d: its own save failed: %s", s->port, b->msg);
  if (b->self) __atomic_store_n(&s->self_saving, 0, __ATOMIC_RELEASE);
  loom_status_free(st);
}

static reply *barrier_reply(loom_ps_server *s, job *j, barrier *b) {
  if (b->kind == BAR_SYNC_STEP) { /* a reservation ({k, limit}) is granted while the step is below its limit */
    uint8_t out[8];
    loom__ps_put64(out, (uint64_t)b->global_step);
    int refused = j->h.body_len == 16 && b->global_step >= (int64_t)loom__ps_get64(j->body + 8);
    return small_reply(j, out, 8, refused ? LOOM_PS_FLAG_REFUSED : 0);
  }
  if (b->rc) return JERR(b->rc, 0, "%s", b->msg);
  uint8_t out[16];
  loom__ps_put32(out, b->nvars);
  loom__ps_put32(out + 4, 0);
  loom__ps_put64(out + 8, b->digest);
  return small_reply(j, out, 16, 0);
}

/* A RESTORE replaced the shard's variables: every request it held (a SYNC
 * push that joined a step, a PULL_ROWS waiting for one, a PULL_ROWS_AT
 * waiting for a version) belonged to the state before it, whose partial
 * aggregation is gone; each is answered ABORTED so that its worker pulls the
 * restored values and pushes again (SYNC state is not checkpointed). */
static void abort_waiters(loom_ps_server *s, shard *sh) {
  while (sh->waiters) {
    job *j = sh->waiters;
    sh->waiters = j->next;
    j->out = JERR(LOOM_ABORTED, 0, "the PS was restored while this request waited for version %llu of var %u; "
                  "pull the restored values and push again", (unsigned long long)j->wait_version + 1, j->wait_var);
    complete(s, j);
  }
}

static void do_barrier(loom_ps_server *s, shard *sh, job *j) {
  barrier *b = j->bar;
  pthread_mutex_lock(&b->mu);
  if (++b->arrived == b->n) {
    run_barrier(s, b);
    b->done = 1;
    pthread_cond_broadcast(&b->cv);
  } else {
    while (!b->done) pthread_cond_wait(&b->cv, &b->mu);
  }
  if (b->kind == BAR_RESTORE && !b->rc) abort_waiters(s, sh);
  if (j->c) j->out = barrier_reply(s, j, b);
  int last = --b->left == 0;
  pthread_mutex_unlock(&b->mu);
  if (last) {
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    loom__free(b);
  }
  j->bar = NULL;
  if (j->c) complete(s, j);
  else loom__free(j); /* an auxiliary job: no reply */
}

/* ---------------- shard thread ---------------- */

/* SHM_PULL / SHM_PUSH / SHM_PUSHPULL {var u32, pad u32, version u64, offset u64} -> {version u64}: the
 * dense bytes in the connection's shared segment (ps_shm.h) at offset, checked against the mapping; the
 * push applies exactly as PUSH / PUSHPULL over TCP (versions, STALE, the duplicate window). */
static reply *handle_shm(loom_ps_server *s, shard *sh, job *j, int *held) {
  reply *err = NULL;
  psvar *v = req_var(s, j, LOOM_PS_SHM_REQ_LEN, &err);
  if (!v) return err;
  uint16_t op = j->h.opcode;
  uint32_t id = loom__ps_get32(j->body);
  uint64_t ver = loom__ps_get64(j->body + 8), off = loom__ps_get64(j->body + 16), n = (uint64_t)v->numel * 4;
  if (j->h.body_len != LOOM_PS_SHM_REQ_LEN)
    return JERR(LOOM_INVALID_ARGUMENT, 1, "opcode %u body of %u bytes (expected %u)", op, j->h.body_len,
                LOOM_PS_SHM_REQ_LEN);
  float *p = loom__ps_shm_map_at(&j->c->shm, off, n);
  if (!p)
    return JERR(LOOM_OUT_OF_RANGE, 0, "opcode %u of var %u: bytes [%llu, %llu + %llu) are not inside the shared "
                "segment (%llu bytes, data from %u)", op, id, (unsigned long long)off, (unsigned long long)off,
                (unsigned long long)n, (unsigned long long)j->c->shm.size, LOOM_PS_SHM_HDR);
  STAT_ADD(s, shm_requests, 1);
  if (op == LOOM_PS_SHM_PULL) {
    if (ver == v->version) return version_reply(j, v->version, LOOM_PS_FLAG_UNCHANGED);
    memcpy(p, v->val, n);
    return version_reply(j, v->version, 0);
  }
  if (j->dup) { /* a re-sent SHM_PUSHPULL applied once already: the current value, nothing applied */
    memcpy(p, v->val, n);
    return version_reply(j, v->version, (j->dup_flags & LOOM_PS_FLAG_STALE) | LOOM_PS_FLAG_DUPLICATE);
  }
  if (s->o.consistency == LOOM_PS_SYNC) /* SHM_ATTACH is refused under SYNC: not reached by a loom client */
    return JERR(LOOM_FAILED_PRECONDITION, 0, "shared-memory push of var %u under SYNC", id);
  /* the gradient is read in place: a client writing it meanwhile spoils only its own numbers */
  reply *r = push_apply(s, sh, j, v, id, ver, p, 0, held);
  if (r && op == LOOM_PS_SHM_PUSHPULL && loom__ps_get32(r->data + 28) == 0) memcpy(p, v->val, n);
  return r;
}

/* A request that applies a gradient to a variable (TCP or shared memory; not a part, ps_parts.h). */
static int push_opcode(uint16_t op) {
  return op == LOOM_PS_PUSH || op == LOOM_PS_PUSHPULL || op == LOOM_PS_PUSH_ROWS || op == LOOM_PS_PUSH_ROWS_AT ||
         op == LOOM_PS_SHM_PUSH || op == LOOM_PS_SHM_PUSHPULL;
}

/* PULL_SLOT: an optimizer slot's values and Adam's beta powers. */
static reply *handle_pull_slot(loom_ps_server *s, job *j) {
  reply *err = NULL;
  psvar *v = req_var(s, j, 8, &err);
  if (!v) return err;
  uint32_t k = loom__ps_get32(j->body + 4);
  float init[3];
  int ns = opt_slots(v->opt, v->hyper, init);
  if (j->h.body_len != 8 || k >= (uint32_t)ns)
    return JERR(LOOM_INVALID_ARGUMENT, 0, "PULL_SLOT: var %u has %d optimizer slots, slot %u asked (body of %u bytes)",
                loom__ps_get32(j->body), ns, k, j->h.body_len);
  const float *sp[3] = {v->s0, v->s1, v->s2};
  reply *r = reply_new(j->c, 8 + (size_t)v->numel * 4);
  if (!r) return NULL;
  uint8_t *out = reply_body(r);
  memcpy(out, &v->b1p, 4);
  memcpy(out + 4, &v->b2p, 4);
  if (v->numel) memcpy(out + 8, sp[k], (size_t)v->numel * 4);
  reply_seal(r, &j->h, j->h.opcode, 0, 0, 0);
  return r;
}

static void shard_process(shard *sh, job *j) {
  loom_ps_server *s = sh->srv;
  if (j->kind == JOB_BARRIER) {
    do_barrier(s, sh, j);
    return;
  }
  int held = 0;
  reply *r = NULL;
  switch (j->h.opcode) {
  case LOOM_PS_INIT_VAR: r = handle_init(s, sh, j); break;
  case LOOM_PS_PULL: {
    reply *err = NULL;
    psvar *v = req_var(s, j, 16, &err);
    if (!v) r = err;
    else if (j->h.body_len != 16) r = JERR(LOOM_INVALID_ARGUMENT, 1, "PULL body of %u bytes (expected 16)", j->h.body_len);
    else r = value_reply(s, j, v, loom__ps_get64(j->body + 8), 0);
    break;
  }
  case LOOM_PS_PUSH: r = handle_push(s, sh, j, 0, &held); break;
  case LOOM_PS_PUSHPULL:
    if (j->dup) { /* re-sent, applied once already (the duplicate window): the current value, nothing applied */
      reply *err = NULL;
      psvar *v = req_var(s, j, 16, &err);
      r = v ? value_reply(s, j, v, UINT64_MAX, (j->dup_flags & LOOM_PS_FLAG_STALE) | LOOM_PS_FLAG_DUPLICATE) : err;
      break;
    }
    r = handle_push(s, sh, j, 1, &held);
    break;
  case LOOM_PS_PULL_ROWS:
  case LOOM_PS_PULL_ROWS_AT:
    if (rows_hold(s, sh, j)) return;
    r = handle_rows(s, sh, j, 0, j->h.opcode == LOOM_PS_PULL_ROWS_AT, NULL);
    break;
  case LOOM_PS_PUSH_ROWS: r = handle_rows(s, sh, j, 1, 0, &held); break;
  case LOOM_PS_PUSHPULL_PART: r = handle_part(s, sh, j); break;
  case LOOM_PS_PUSH_ROWS_AT: r = handle_rows(s, sh, j, 1, 1, &held); break;
  case LOOM_PS_STEP_INC: r = handle_step_inc(s, j); break;
  case LOOM_PS_PULL_SLOT: r = handle_pull_slot(s, j); break;
  case LOOM_PS_SHM_PULL:
  case LOOM_PS_SHM_PUSH:
  case LOOM_PS_SHM_PUSHPULL: r = handle_shm(s, sh, j, &held); break;
  default: r = JERR(LOOM_UNIMPLEMENTED, 1, "unknown opcode %u", j->h.opcode);
  }
  if (held) return;
  uint16_t op = j->h.opcode;
  if (sh->waiters && j->h.body_len >= 4 && !j->dup && (push_opcode(op) || op == LOOM_PS_PUSHPULL_PART)) {
    uint32_t id = loom__ps_get32(j->body); /* a PULL_ROWS_AT may wait for the version this push (or its last
                                              part: earlier parts leave the version as it was) made */
    psvar *v = var_get(s, id);
    if (v) wake_waiters(s, sh, id, v);
  }
  j->out = r;
  complete(s, j);
}

static void shard_deadlines(shard *sh) {
  loom_ps_server *s = sh->srv;
  uint64_t now = now_ms();
  double to = s->o.sync_timeout_s > 0 ? s->o.sync_timeout_s : 30.0;
  for (job **pp = &sh->waiters; *pp;) {
    job *j = *pp;
    if (now >= j->deadline_ms) {
      *pp = j->next;
      STAT_ADD(s, sync_timeouts, 1);
      j->out = JERR(LOOM_DEADLINE_EXCEEDED, 0, "SYNC: step %llu of var %u not complete within %.1f s",
                    (unsigned long long)j->wait_version + 1, j->wait_var, to);
      complete(s, j);
    } else {
      pp = &j->next;
    }
  }
}

/* The shard thread takes the variables; the loop holds them only for one small request at a time. */
static void shard_acquire(shard *sh) {
  for (int spins = 0;; spins++) {
    int free_ = 0;
    if (__atomic_compare_exchange_n(&sh->owner, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    if (spins > 64) sched_yield();
  }
}

static void *shard_main(void *arg) {
  shard *sh = arg;
  int timed = 0; /* waiters to watch (read while owning the variables) */
  for (;;) {
    if (timed) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 50 * 1000000L;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      while (sem_timedwait(&sh->sem, &ts) != 0 && errno == EINTR) {
      }
    } else {
      while (sem_wait(&sh->sem) != 0 && errno == EINTR) {
      }
    }
    shard_acquire(sh); /* before taking: what the loop finds queued is always behind what it may run itself */
    for (job *l = stack_take(&sh->incoming); l;) {
      job *n = l->next;
      shard_process(sh, l);
      l = n;
    }
    if (sh->waiters) shard_deadlines(sh);
    timed = sh->waiters != NULL;
    __atomic_store_n(&sh->owner, 0, __ATOMIC_RELEASE);
    if (__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE) && !__atomic_load_n(&sh->incoming, __ATOMIC_ACQUIRE)) break;
  }
  return NULL;
}

static void shard_post(shard *sh, job *j) {
  stack_push(&sh->incoming, j);
  sem_post(&sh->sem);
}

/* ---------------- loop thread: handshake and dispatch ---------------- */

static ddwin *dd_find(loom_ps_server *s, uint64_t client_id);
static uint16_t dd_canon(uint16_t op);

static void handle_hello(conn *c, job *j) {
  loom_ps_server *s = c->srv;
  const uint8_t *b = j->body;
  if (c->h.opcode != LOOM_PS_HELLO) {
    loop_error(c, LOOM_PERMISSION_DENIED, 1, "opcode %u before the handshake (HELLO expected)", c->h.opcode);
    return;
  }
  if (c->h.body_len != 24 + LOOM_PS_NONCE && c->h.body_len != 32 + LOOM_PS_NONCE) {
    loop_error(c, LOOM_INVALID_ARGUMENT, 1, "HELLO body of %u bytes (expected %d, or %d with a client id)",
               c->h.body_len, 24 + LOOM_PS_NONCE, 32 + LOOM_PS_NONCE);
    return;
  }
  if (s->nconns > s->o.max_connections) {
    STAT_ADD(s, refused, 1);
    loop_error(c, LOOM_RESOURCE_EXHAUSTED, 1, "too many connections (the limit is %d)", s->o.max_connections);
    return;
  }
  uint16_t pmin = loom__ps_get16(b), pmax = loom__ps_get16(b + 2);
  uint32_t nps = loom__ps_get32(b + 4), nv = loom__ps_get32(b + 8);
  uint64_t ph = loom__ps_get64(b + 16);
  if (pmin > LOOM_PS_VERSION || pmax < LOOM_PS_VERSION) {
    loop_error(c, LOOM_UNIMPLEMENTED, 1, "client speaks protocol %u..%u, this PS %u", pmin, pmax, LOOM_PS_VERSION);
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
    loop_error(c, LOOM_FAILED_PRECONDITION, 1, "placement hash mismatch (worker %016llx, ps %016llx): %s",
               (unsigned long long)ph, (unsigned long long)s->o.placement_hash, diff);
    return;
  }
  memcpy(c->cn, b + 24, LOOM_PS_NONCE);
  if ((loom__ps_get32(b + 12) & LOOM_PS_HELLO_CHIEF) && !c->chief) {
    c->chief = 1;
    s->nchief++;
    s->chief_seen_ms = now_ms();
  }
  uint64_t client_id = c->h.body_len == 32 + LOOM_PS_NONCE ? loom__ps_get64(b + 24 + LOOM_PS_NONCE) : 0;
  if (client_id && !c->dd) { /* the client's duplicate window (kept across its connections) */
    if (!(c->dd = dd_find(s, client_id))) {
      loop_error(c, LOOM_RESOURCE_EXHAUSTED, 1, "no memory for a duplicate window");
      return;
    }
    c->dd->refs++;
    c->dd->last_used_ms = now_ms();
  }
  if (loom__ps_random(c->sn, LOOM_PS_NONCE) != LOOM_OK) {
    loop_error(c, LOOM_INTERNAL, 1, "no random bytes for the challenge");
    return;
  }
  reply *r = reply_new(c, LOOM_PS_NONCE);
  if (r) {
    memcpy(reply_body(r), c->sn, LOOM_PS_NONCE);
    reply_seal(r, &c->h, LOOM_PS_CHALLENGE, 0, 0, 0);
  }
  loop_answer(c, r);
  c->state = ST_AUTH;
}

static void handle_auth(conn *c, job *j) {
  loom_ps_server *s = c->srv;
  if (c->h.opcode != LOOM_PS_AUTH || c->h.body_len != LOOM_PS_MAC) {
    loop_error(c, LOOM_PERMISSION_DENIED, 1, "opcode %u with %u bytes where AUTH was expected", c->h.opcode,
               c->h.body_len);
    return;
  }
  uint8_t mac[LOOM_PS_MAC];
  loom__ps_auth_mac(s->token, s->token_len, c->cn, c->sn, s->o.placement_hash, mac);
  if (!loom__ps_ct_equal(mac, j->body, LOOM_PS_MAC)) {
    loop_error(c, LOOM_PERMISSION_DENIED, 1, "authentication failed (HMAC mismatch: wrong token)");
    return;
  }
  reply *r = reply_new(c, LOOM_PS_WELCOME_LEN);
  if (r) {
    uint8_t *wb = reply_body(r);
    loom__ps_put32(wb, __atomic_load_n(&s->nvars_present, __ATOMIC_RELAXED));
    loom__ps_put32(wb + 4, 0);
    loom__ps_put64(wb + 8, s->instance);
    reply_seal(r, &c->h, LOOM_PS_WELCOME, 0, 0, 0);
  }
  loop_answer(c, r);
  c->state = ST_READY;
}

static job *job_get(conn *c, uint32_t len) {
  job *j = NULL;
  for (job **pp = &c->pool; *pp; pp = &(*pp)->next)
    if ((*pp)->bcap >= len) {
      j = *pp;
      *pp = j->next;
      c->npool--;
      break;
    }
  if (!j && c->pool) { /* regrow an idle one */
    j = c->pool;
    c->pool = j->next;
    c->npool--;
    loom__free(j->body);
    j->body = NULL;
    j->bcap = 0;
  }
  if (!j && !(j = loom__calloc(1, sizeof *j))) return NULL;
  if (j->bcap < len) {
    j->body = loom__malloc(len);
    if (!j->body) {
      loom__free(j);
      return NULL;
    }
    j->bcap = len;
  }
  j->next = NULL;
  j->out = NULL;
  j->bar = NULL;
  j->kind = JOB_REQ;
  j->c = c;
  j->dd = NULL;
  j->dup = 0;
  return j;
}

#define POOL_MAX 8
static void job_put(conn *c, job *j) {
  if (c->npool >= POOL_MAX) {
    job_free(j);
    return;
  }
  j->next = c->pool;
  c->pool = j;
  c->npool++;
}

/* Hands request j of c to shard q (or, with bar, a barrier to every shard). */
static void on_done(uv_async_t *a);

#define INLINE_MAX_BYTES 65536 /* a request this small (body and variable) may run on the loop thread */

/* A small request to an idle shard runs on the loop thread (no thread
 * wake-up on the latency path): the loop takes the shard's variables with
 * one CAS (never waits), and only when nothing is queued for that shard, so
 * arrival order holds (the shard thread takes its queue only while it owns
 * the variables). */
static int try_inline(loom_ps_server *s, job *j, shard *sh) {
  /* a part of a pipelined push+pull (ps_parts.h) too, whatever its size: it is answered at once, and a
   * shard-thread wake-up per part costs more than the part's apply */
  int part = j->kind == JOB_REQ && j->h.opcode == LOOM_PS_PUSHPULL_PART;
  if (j->kind != JOB_REQ || (j->h.body_len > 1024 && !part) || __atomic_load_n(&sh->incoming, __ATOMIC_ACQUIRE))
    return 0;
  int free_ = 0;
  if (!__atomic_compare_exchange_n(&sh->owner, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return 0;
  int ok = !__atomic_load_n(&sh->incoming, __ATOMIC_ACQUIRE);
  if (ok && j->h.opcode != LOOM_PS_STEP_INC && j->h.opcode != LOOM_PS_INIT_VAR) {
    psvar *v = j->h.body_len >= 4 ? var_get(s, loom__ps_get32(j->body)) : NULL;
    ok = v && ((uint64_t)v->numel * 4 <= INLINE_MAX_BYTES || part);
  } else if (j->h.opcode == LOOM_PS_INIT_VAR) {
    ok = 0;
  }
  if (ok) {
    int had = sh->waiters != NULL;
    shard_process(sh, j);
    if (!had && sh->waiters) sem_post(&sh->sem); /* the shard thread now watches the new waiter's deadline */
  }
  __atomic_store_n(&sh->owner, 0, __ATOMIC_RELEASE);
  return ok;
}

static void dispatch_job(conn *c, job *j, int q) {
  loom_ps_server *s = c->srv;
  if (j->dd) { /* a new request of a client with a duplicate window: pending until its reply */
    dd_slot *sl = &j->dd->slot[j->h.request_id % DD_W];
    memset(sl, 0, sizeof *sl);
    sl->id = j->h.request_id;
    sl->opcode = dd_canon(j->h.opcode);
    sl->state = DD_PENDING;
    if (j->h.request_id > j->dd->max_id) j->dd->max_id = j->h.request_id;
    j->dd->refs++;
  }
  j->seq = c->seq_in++;
  c->inflight++;
  c->inflight_bytes += j->h.body_len;
  if (try_inline(s, j, &s->shards[q])) {
    on_done(&s->done_async); /* its reply (already on the completion stack) goes out now */
    return;
  }
  shard_post(&s->shards[q], j);
  conn_update_reading(c);
}

static void dispatch_barrier(conn *c, job *j, barrier *b) {
  loom_ps_server *s = c->srv;
  b->n = b->left = s->nshards;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  job *aux[MAX_SHARDS];
  for (int q = 1; q < s->nshards; q++) {
    aux[q] = loom__calloc(1, sizeof(job));
    if (!aux[q]) { /* cannot reach every shard: refuse before any has seen it */
      for (int k = 1; k < q; k++) loom__free(aux[k]);
      pthread_mutex_destroy(&b->mu);
      pthread_cond_destroy(&b->cv);
      loom__free(b);
      job_put(c, j);
      loop_error(c, LOOM_RESOURCE_EXHAUSTED, 0, "no memory for a barrier");
      return;
    }
  }
  j->kind = JOB_BARRIER;
  j->bar = b;
  for (int q = 1; q < s->nshards; q++) {
    aux[q]->kind = JOB_BARRIER;
    aux[q]->bar = b;
    shard_post(&s->shards[q], aux[q]);
  }
  dispatch_job(c, j, 0);
}

static void handle_ckpt(conn *c, job *j, int save) {
  loom_ps_server *s = c->srv;
  const char *what = save ? "SAVE" : "RESTORE";
  if (c->h.body_len < 16 || c->h.body_len != 16 + (uint64_t)loom__ps_get32(j->body + 8)) {
    job_put(c, j);
    loop_error(c, LOOM_INVALID_ARGUMENT, 1, "%s body of %u bytes is malformed", what, c->h.body_len);
    return;
  }
  int64_t step = (int64_t)loom__ps_get64(j->body);
  uint32_t len = loom__ps_get32(j->body + 8);
  const char *dir = (const char *)j->body + 16;
  if (!s->o.model_dir) {
    job_put(c, j);
    loop_error(c, LOOM_FAILED_PRECONDITION, 0, "%s: this PS was started without a model_dir", what);
    return;
  }
  if (len > 256 || !rel_dir_ok(dir, len) || step < 0) {
    job_put(c, j);
    loop_error(c, LOOM_PERMISSION_DENIED, 0,
               "%s: the directory must be relative to the model_dir, without '..' (and step >= 0)", what);
    return;
  }
  barrier *b = loom__calloc(1, sizeof *b);
  if (!b) {
    job_put(c, j);
    loop_error(c, LOOM_RESOURCE_EXHAUSTED, 0, "no memory for a barrier");
    return;
  }
  b->kind = save ? BAR_SAVE : BAR_RESTORE;
  b->step = step;
  snprintf(b->path, sizeof b->path, "%s/%.*s/model.ckpt-%lld.ps-%d-of-%d", s->model_dir, (int)len, dir,
           (long long)step, s->o.ps_index, s->o.num_ps > 0 ? s->o.num_ps : 1);
  dispatch_barrier(c, j, b);
}

/* ---------------- loop thread: busy-poll ---------------- */

/* While the spin idle handle is active, libuv polls with a zero timeout (the loop never sleeps). */
static void on_spin(uv_idle_t *h) {
  loom_ps_server *s = h->data;
  s->spin_polls++;
  if (now_us() < s->spin_end_us) {
    sched_yield(); /* a runnable thread of this core (a shard, the client) goes first */
    return;
  }
  uv_idle_stop(h);
  s->spinning = 0;
  if (s->spin_fail < 6) s->spin_fail++;
  s->spin_skip = (1 << s->spin_fail) - 1;
}

/* A small request came: keep polling for busy_poll_us more before sleeping in epoll (large requests
 * and shard completions do not arm it: on a machine with few cores the polling would take the core
 * that the shards and the client need; bench/scaling measured -15% steps/s with them).
 * A poll that ends empty-handed skips the next 2^fails - 1 arms (at most 63); work that arrives after
 * at least one empty look resets the backoff. */
static void loop_spin(loom_ps_server *s) {
  if (s->spin_us <= 0 || s->stopping) return;
  if (s->spinning) {
    if (s->spin_polls) s->spin_fail = 0;
  } else if (s->spin_skip > 0) {
    s->spin_skip--;
    return;
  } else {
    uv_idle_start(&s->spin, on_spin);
    s->spinning = 1;
  }
  s->spin_polls = 0;
  s->spin_end_us = now_us() + (uint64_t)s->spin_us;
}

/* ---------------- loop thread: the duplicate window ---------------- */

static ddwin *dd_find(loom_ps_server *s, uint64_t client_id) {
  for (ddwin *w = s->dds; w; w = w->next)
    if (w->client_id == client_id) return w;
  ddwin *w = NULL;
  if (s->ndds >= DD_MAX) { /* reuse the least recently used window nothing refers to */
    for (ddwin *x = s->dds; x; x = x->next)
      if (!x->refs && (!w || x->last_used_ms < w->last_used_ms)) w = x;
  }
  if (w) {
    ddwin *next = w->next;
    memset(w, 0, sizeof *w);
    w->next = next;
  } else {
    if (!(w = loom__calloc(1, sizeof *w))) return NULL;
    w->next = s->dds;
    s->dds = w;
    s->ndds++;
  }
  w->client_id = client_id;
  return w;
}

static int dd_opcode(uint16_t op) { return push_opcode(op) || op == LOOM_PS_STEP_INC; }
/* A shared-memory push is the same request as its TCP form in the window (a client that reconnects
 * re-sends it over TCP: the mapping went with the old connection). */
static uint16_t dd_canon(uint16_t op) {
  return op == LOOM_PS_SHM_PUSH ? LOOM_PS_PUSH : op == LOOM_PS_SHM_PUSHPULL ? LOOM_PS_PUSHPULL : op;
}

/* A mutating request of a client with a window: 0 when it is new (j->dd set: recorded as pending when
 * dispatched); 1 when it was answered here (a duplicate, or an id older than the window). */
static int dd_check(conn *c, job *j) {
  ddwin *w = c->dd;
  uint64_t id = c->h.request_id;
  w->last_used_ms = now_ms();
  if (id + DD_W <= w->max_id) {
    job_put(c, j);
    loop_error(c, LOOM_FAILED_PRECONDITION, 0,
               "request id %llu of client %016llx is older than the duplicate window (newest %llu): not applied",
               (unsigned long long)id, (unsigned long long)w->client_id, (unsigned long long)w->max_id);
    return 1;
  }
  dd_slot *sl = &w->slot[id % DD_W];
  if (sl->state == DD_EMPTY || sl->id != id) {
    j->dd = w;
    return 0;
  }
  STAT_ADD(c->srv, duplicates, 1);
  if (sl->opcode != dd_canon(c->h.opcode)) {
    job_put(c, j);
    loop_error(c, LOOM_INVALID_ARGUMENT, 0, "request id %llu of client %016llx was opcode %u, now %u: not applied",
               (unsigned long long)id, (unsigned long long)w->client_id, sl->opcode, c->h.opcode);
    return 1;
  }
  if (sl->state == DD_PENDING) {
    job_put(c, j);
    loop_error(c, LOOM_UNAVAILABLE, 0,
               "request id %llu of client %016llx is still being applied (its first copy is held): not applied "
               "twice, retry later", (unsigned long long)id, (unsigned long long)w->client_id);
    return 1;
  }
  if (sl->state == DD_VALUE) { /* a PUSHPULL applied once: the reply is the current value */
    j->dup = 1;
    j->dup_flags = sl->flags;
    dispatch_job(c, j, (int)(loom__ps_get32(j->body) % (uint32_t)c->srv->nshards));
    return 1;
  }
  job_put(c, j);
  reply *r = reply_new(c, sl->body_len);
  if (r) {
    memcpy(reply_body(r), sl->body, sl->body_len);
    reply_seal(r, &c->h, c->h.opcode, (sl->flags & ~LOOM_PS_FLAG_REPLY) | LOOM_PS_FLAG_DUPLICATE, sl->status, 0);
  }
  loop_answer(c, r);
  return 1;
}

/* The outcome of a recorded request (r: its reply, NULL when none could be made). */
static void dd_done(job *j, const reply *r) {
  ddwin *w = j->dd;
  j->dd = NULL;
  w->refs--;
  dd_slot *sl = &w->slot[j->h.request_id % DD_W];
  if (sl->id != j->h.request_id || sl->state != DD_PENDING) return;
  if (!r) {
    sl->state = DD_EMPTY; /* no reply made (out of memory): nothing known, a re-send is applied */
    return;
  }
  sl->flags = loom__ps_get32(r->data + 8);
  sl->status = loom__ps_get32(r->data + 28);
  if (dd_canon(j->h.opcode) == LOOM_PS_PUSHPULL && sl->status == 0) {
    sl->state = DD_VALUE;
    return;
  }
  size_t n = r->len - LOOM_PS_HDR;
  sl->body_len = (uint8_t)(n < DD_BODY ? n : DD_BODY);
  memcpy(sl->body, r->data + LOOM_PS_HDR, sl->body_len);
  sl->state = DD_DONE;
}

/* A whole frame has been read into j (its CRC already checked). */
static void frame_done(conn *c, job *j) {
  loom_ps_server *s = c->srv;
  STAT_ADD(s, frames, 1);
  if (c->h.body_len <= 1024) loop_spin(s); /* a small request: the next one of its client is likely close behind */
  s->last_activity_ms = c->last_frame_ms = now_ms();
  if (c->h.flags & LOOM_PS_FLAG_REPLY) {
    job_put(c, j);
    loop_error(c, LOOM_INVALID_ARGUMENT, 1, "a reply frame (opcode %u) sent to the PS", c->h.opcode);
    return;
  }
  if (c->state == ST_HELLO || c->state == ST_AUTH) {
    if (c->state == ST_HELLO) handle_hello(c, j);
    else handle_auth(c, j);
    job_put(c, j);
    return;
  }
  switch (c->h.opcode) {
  case LOOM_PS_INIT_VAR:
  case LOOM_PS_PULL:
  case LOOM_PS_PUSH:
  case LOOM_PS_PUSHPULL:
  case LOOM_PS_PULL_ROWS:
  case LOOM_PS_PUSH_ROWS:
  case LOOM_PS_PUSH_ROWS_AT:
  case LOOM_PS_PULL_ROWS_AT:
  case LOOM_PS_SHM_PULL:
  case LOOM_PS_SHM_PUSH:
  case LOOM_PS_SHM_PUSHPULL:
  case LOOM_PS_PUSHPULL_PART:
  case LOOM_PS_PULL_SLOT:
    if (c->h.body_len < 4) {
      job_put(c, j);
      loop_error(c, LOOM_INVALID_ARGUMENT, 1, "opcode %u body of %u bytes is truncated", c->h.opcode, c->h.body_len);
      return;
    }
    if (c->dd && dd_opcode(c->h.opcode) && dd_check(c, j)) return;
    if (c->h.opcode == LOOM_PS_PUSHPULL_PART && !c->parts &&
        !(c->parts = loom__calloc((size_t)s->nshards, sizeof *c->parts))) {
      job_put(c, j);
      loop_error(c, LOOM_RESOURCE_EXHAUSTED, 1, "no memory for the pipelined push state");
      return;
    }
    dispatch_job(c, j, (int)(loom__ps_get32(j->body) % (uint32_t)s->nshards));
    return;
  case LOOM_PS_SHM_ATTACH: {
    /* loop thread: maps the client's segment for this connection (no shard has a request of it that
     * uses the mapping before this reply, and none after conn_free unmaps it) */
    loom_status *st = loom_status_new();
    loom_code rc = LOOM_OK;
    if (c->shm.base)
      rc = loom_status_set(st, LOOM_FAILED_PRECONDITION, "a shared segment is attached to this connection already");
    else if (s->o.consistency == LOOM_PS_SYNC)
      rc = loom_status_set(st, LOOM_FAILED_PRECONDITION, "shared memory is not used under SYNC consistency: TCP");
    else
      rc = loom__ps_shm_map_open(j->body, c->h.body_len, (uint64_t)s->o.max_frame * 4, &c->shm, st);
    job_put(c, j);
    if (rc) {
      STAT_ADD(s, shm_refused, 1);
      loom__log(LOOM_LOG_INFO, "ps :%d: SHM_ATTACH of %s refused: %s", s->port, c->peer, loom_status_message(st));
      loop_error(c, rc, 0, "%s", loom_status_message(st));
    } else {
      STAT_ADD(s, shm_attaches, 1);
      reply *r = reply_new(c, 0);
      if (r) reply_seal(r, &c->h, LOOM_PS_SHM_ATTACH, 0, 0, 0);
      loop_answer(c, r);
    }
    loom_status_free(st);
    return;
  }
  case LOOM_PS_SAVE: handle_ckpt(c, j, 1); return;
  case LOOM_PS_RESTORE: handle_ckpt(c, j, 0); return;
  case LOOM_PS_STEP_INC: {
    if (c->h.body_len != 8 && c->h.body_len != 16) {
      job_put(c, j);
      loop_error(c, LOOM_INVALID_ARGUMENT, 1, "STEP_INC body of %u bytes (expected 8, or 16 with a limit)",
                 c->h.body_len);
      return;
    }
    if (c->dd && dd_check(c, j)) return;
    if (s->o.consistency == LOOM_PS_SYNC) {
      barrier *b = loom__calloc(1, sizeof *b);
      if (!b) {
        job_put(c, j);
        loop_error(c, LOOM_RESOURCE_EXHAUSTED, 0, "no memory for a barrier");
        return;
      }
      b->kind = BAR_SYNC_STEP;
      dispatch_barrier(c, j, b);
    } else {
      dispatch_job(c, j, 0); /* shard 0 keeps global_step in order with the barriers */
    }
    return;
  }
  case LOOM_PS_PARTS_PROBE: { /* ps_parts.h: parts are taken on an ASYNC PS */
    job_put(c, j);
    reply *r = reply_new(c, 8);
    if (r) {
      memset(reply_body(r), 0, 8);
      loom__ps_put32(reply_body(r), s->o.consistency == LOOM_PS_ASYNC);
      reply_seal(r, &c->h, LOOM_PS_PARTS_PROBE, 0, 0, 0);
    }
    loop_answer(c, r);
    return;
  }
  case LOOM_PS_PING: {
    job_put(c, j);
    reply *r = reply_new(c, 0);
    if (r) reply_seal(r, &c->h, LOOM_PS_PING, 0, 0, 0);
    loop_answer(c, r);
    return;
  }
  case LOOM_PS_SHUTDOWN: {
    job_put(c, j);
    loom__log(LOOM_LOG_INFO, "ps :%d: SHUTDOWN requested by %s", s->port, c->peer);
    reply *r = reply_new(c, 0);
    if (r) reply_seal(r, &c->h, LOOM_PS_SHUTDOWN, 0, 0, 2);
    loop_answer(c, r);
    return;
  }
  default:
    job_put(c, j);
    loop_error(c, LOOM_UNIMPLEMENTED, 1, "unknown opcode %u", c->h.opcode);
  }
}

/* Finished jobs from the shards: their replies join their connections' order. */
static void on_done(uv_async_t *a) {
  loom_ps_server *s = a->data;
  for (job *j = stack_take(&s->completed); j;) {
    job *n = j->next;
    conn *c = j->c;
    reply *r = j->out;
    uint64_t seq = j->seq;
    j->out = NULL;
    if (j->dd) dd_done(j, r);
    c->inflight--;
    c->inflight_bytes -= j->h.body_len;
    if (c->closed) {
      reply_free(r);
      job_free(j);
      if (c->inflight == 0) conn_free(c);
    } else {
      job_put(c, j);
      conn_answer(c, seq, r);
    }
    j = n;
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn *c = h->data;
  if (c->state >= ST_DRAINING) {
    *buf = uv_buf_init((char *)c->sink, sizeof c->sink);
  } else if (!c->cur) {
    *buf = uv_buf_init((char *)c->hdr + c->hgot, (unsigned)(LOOM_PS_HDR - c->hgot));
  } else {
    *buf = uv_buf_init((char *)c->cur->body + c->bgot, (unsigned)(c->h.body_len - c->bgot));
  }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  conn *c = stream->data;
  if (nread < 0) {
    if (c->state < ST_DRAINING && (c->hgot || c->cur)) {
      STAT_ADD(c->srv, rejected, 1);
      loom__log(LOOM_LOG_WARN, "ps :%d: connection from %s ended inside a frame (%zu header, %zu body bytes)",
                c->srv->port, c->peer, c->hgot, c->bgot);
    }
    conn_close(c);
    return;
  }
  if (nread == 0 || c->state >= ST_DRAINING) return;
  STAT_ADD(c->srv, bytes_in, nread);
  if (!c->cur) {
    c->hgot += (size_t)nread;
    if (c->hgot < LOOM_PS_HDR) return;
    char why[160];
    uint32_t max = c->state == ST_READY ? c->srv->o.max_frame : LOOM_PS_HANDSHAKE_MAX;
    loom_code rc = loom__ps_hdr_decode(c->hdr, max, &c->h, why, sizeof why);
    c->hgot = 0;
    if (rc) {
      c->h.opcode = 0;
      c->h.request_id = 0;
      loop_error(c, rc, 1, "%s", why);
      return;
    }
    job *j = job_get(c, c->h.body_len);
    if (!j) {
      loop_error(c, LOOM_RESOURCE_EXHAUSTED, 1, "no memory for a %u-byte body", c->h.body_len);
      return;
    }
    j->h = c->h;
    c->cur = j;
    c->bgot = 0;
    j->crc = 0;
    if (c->h.body_len) return;
  } else {
    /* the CRC is computed on each piece as it arrives, while it is in cache */
    c->cur->crc = loom__crc32c_extend(c->cur->crc, buf->base, (size_t)nread);
    c->bgot += (size_t)nread;
    if (c->bgot < c->h.body_len) return;
  }
  job *j = c->cur;
  c->cur = NULL;
  if (j->crc != c->h.body_crc) {
    job_put(c, j);
    loop_error(c, LOOM_DATA_LOSS, 1, "CRC-32C mismatch on a %u-byte body (opcode %u)", c->h.body_len, c->h.opcode);
    return;
  }
  frame_done(c, j);
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
  uv_tcp_keepalive(&c->tcp, 1, 60); /* a vanished peer is noticed by the kernel */
  conn_update_reading(c);
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

/* Joins the shard threads (each finishes what it was given) and frees the jobs still in flight. */
static void shards_stop(loom_ps_server *s) {
  for (int q = 0; q < s->nshards; q++) {
    shard *sh = &s->shards[q];
    if (!sh->started) continue;
    __atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
    sem_post(&sh->sem);
    pthread_join(sh->thread, NULL);
    sh->started = 0;
  }
  for (int q = 0; q < s->nshards; q++) {
    shard *sh = &s->shards[q];
    while (sh->waiters) {
      job *j = sh->waiters;
      sh->waiters = j->next;
      j->out = NULL;
      stack_push(&s->completed, j);
    }
  }
  for (job *j = stack_take(&s->completed); j;) {
    job *n = j->next;
    conn *c = j->c;
    reply_free(j->out);
    job_free(j);
    /* a connection closed before the stop (EOF while a shard held its request): freed with its last job */
    if (c && --c->inflight == 0 && c->closed) conn_free(c);
    j = n;
  }
}

static void on_stop(uv_async_t *a) {
  loom_ps_server *s = a->data;
  if (s->stopping) return;
  s->stopping = 1;
  shards_stop(s);
  uv_walk(&s->loop, close_walk, s);
}

/* Saves of its own (options.chief_lost_save_s, self_save_dir): on when both are set and a model_dir. */
static int self_save_on(const loom_ps_server *s) {
  return s->o.chief_lost_save_s > 0 && s->self_dir[0] && s->o.model_dir;
}

/* Loop thread: a SAVE barrier with no connection behind it (every shard gets an auxiliary job), to
 * <model_dir>/<self_save_dir>/model.ckpt-0.ps-<i>-of-<n>. Out of memory: tried again on the next tick. */
static void self_save(loom_ps_server *s, uint64_t now) {
  barrier *b = loom__calloc(1, sizeof *b);
  job *aux[MAX_SHARDS];
  int q = 0;
  for (; b && q < s->nshards; q++)
    if (!(aux[q] = loom__calloc(1, sizeof(job)))) break;
  if (!b || q < s->nshards) {
    while (q > 0) loom__free(aux[--q]);
    loom__free(b);
    return;
  }
  b->kind = BAR_SAVE;
  b->self = 1;
  b->n = b->left = s->nshards;
  snprintf(b->path, sizeof b->path, "%s/%s/model.ckpt-0.ps-%d-of-%d", s->model_dir, s->self_dir, s->o.ps_index,
           s->o.num_ps > 0 ? s->o.num_ps : 1);
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  __atomic_store_n(&s->self_saving, 1, __ATOMIC_RELEASE);
  s->self_saved_ms = now;
  for (q = 0; q < s->nshards; q++) {
    aux[q]->kind = JOB_BARRIER;
    aux[q]->bar = b;
    shard_post(&s->shards[q], aux[q]);
  }
}

static void on_timer(uv_timer_t *t) {
  loom_ps_server *s = t->data;
  uint64_t now = now_ms();
  double hs = s->o.handshake_timeout_s > 0 ? s->o.handshake_timeout_s : 5.0;
  for (conn *c = s->conns; c; c = c->next)
    if (c->state < ST_READY && (double)(now - c->t_open_ms) > hs * 1000.0) {
      c->h.opcode = 0;
      c->h.request_id = 0;
      loop_error(c, LOOM_DEADLINE_EXCEEDED, 1, "no authentication within %.1f s", hs);
    } else if (c->state == ST_READY && !c->reading && !uv_is_closing((uv_handle_t *)&c->tcp) &&
               uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) <= MAX_QUEUED_REPLY_BYTES) {
      /* Half-close / EOF handling: reading is paused at the in-flight caps, so on_read cannot see the
       * peer's EOF, and a request a shard holds (up to sync_timeout_s) may keep it paused: when nothing
       * but the EOF (or an error) is left in the socket, close now, as on_read does. Unread requests
       * are left for later; a pause for unsent replies ends as the peer reads them. */
      uv_os_fd_t fd;
      char b;
      if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
        ssize_t k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) conn_close(c);
      }
    }
  int dirty = self_save_on(s) &&
              __atomic_load_n(&s->stats.updates, __ATOMIC_RELAXED) != __atomic_load_n(&s->updates_at_save, __ATOMIC_RELAXED);
  int saving = __atomic_load_n(&s->self_saving, __ATOMIC_ACQUIRE);
  /* the chief is seen by its requests: a chief connection silent for chief_lost_save_s (a hung or
   * stopped chief) counts as no chief */
  for (conn *c = s->conns; c; c = c->next)
    if (c->chief && c->last_frame_ms > s->chief_seen_ms) s->chief_seen_ms = c->last_frame_ms;
  if (dirty && !saving && (double)(now - s->chief_seen_ms) > s->o.chief_lost_save_s * 1000.0 &&
      (double)(now - s->self_saved_ms) > s->o.chief_lost_save_s * 1000.0) {
    loom__log(LOOM_LOG_INFO, "ps :%d: no chief connected (or none heard from) for %.0f s and updates not "
              "checkpointed: saving its shard", s->port, (double)(now - s->chief_seen_ms) / 1000.0);
    self_save(s, now);
    return;
  }
  if (s->o.idle_exit_s > 0 && s->nconns == 0 && (double)(now - s->last_activity_ms) > s->o.idle_exit_s * 1000.0) {
    if (!s->idle_due)
      loom__log(LOOM_LOG_INFO, "ps :%d: idle for %.1f s with no connection; exiting%s", s->port, s->o.idle_exit_s,
                dirty ? " once its shard is saved" : "");
    s->idle_due = 1;
  } else {
    s->idle_due = s->idle_saved = 0;
  }
  if (s->idle_due && dirty && !saving && !s->idle_saved) { /* the last updates go to disk before the exit */
    s->idle_saved = 1;
    self_save(s, now);
    return;
  }
  if (s->idle_due && !saving) {
    pthread_mutex_lock(&s->mu);
    s->stop_reason = 2;
    pthread_mutex_unlock(&s->mu);
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

static void server_free(loom_ps_server *s) {
  for (int q = 0; s->shards && q < s->nshards; q++) {
    shard *sh = &s->shards[q];
    for (uint32_t i = 0; i < sh->cap; i++)
      if (sh->vars[i].present) var_free(&sh->vars[i]);
    loom__free(sh->vars);
    sem_destroy(&sh->sem);
  }
  loom__free(s->shards);
  while (s->dds) {
    ddwin *w = s->dds;
    s->dds = w->next;
    loom__free(w);
  }
  while (s->rcache) {
    reply *r = s->rcache;
    s->rcache = r->cache_next;
    loom__free(r);
  }
  pthread_mutex_destroy(&s->rmu);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  loom__free(s);
}
loom_ps_server *loom_ps_server_start(const loom_ps_server_options *o, loom_status *st) {
  loom_ps_server_options d = loom_ps_server_options_default();
  if (LOOM__OPTS_TAKE(&d, o, "loom_ps_server_start", loom_ps_server_options, st)) return NULL;
  o = &d;
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
  s->instance = o->instance_id;
  while (!s->instance) { /* a random nonzero id: every start is a new instance */
    uint8_t rb[8];
    if (loom__ps_random(rb, sizeof rb) != LOOM_OK) {
      loom_status_set(st, LOOM_INTERNAL, "no random bytes for the ps instance id");
      loom__free(s);
      return NULL;
    }
    s->instance = loom__ps_get64(rb);
  }
  snprintf(s->host, sizeof s->host, "%s", host);
  s->o.host = s->host;
  if (o->model_dir && strlen(o->model_dir) >= sizeof s->model_dir) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps model_dir '%.64s...' is too long", o->model_dir);
    loom__free(s);
    return NULL;
  }
  snprintf(s->model_dir, sizeof s->model_dir, "%s", o->model_dir ? o->model_dir : "");
  s->o.model_dir = o->model_dir ? s->model_dir : NULL;
  if (o->self_save_dir &&
      (strlen(o->self_save_dir) >= sizeof s->self_dir || !rel_dir_ok(o->self_save_dir, strlen(o->self_save_dir)))) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps self_save_dir '%.64s' must be relative, without '..', < 260 bytes",
                    o->self_save_dir);
    loom__free(s);
    return NULL;
  }
  snprintf(s->self_dir, sizeof s->self_dir, "%s", o->self_save_dir ? o->self_save_dir : "");
  s->o.self_save_dir = NULL;
  if (!(o->chief_lost_save_s >= 0)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps chief_lost_save_s %g (must be >= 0)", o->chief_lost_save_s);
    loom__free(s);
    return NULL;
  }
  if (!s->o.max_frame) s->o.max_frame = LOOM_PS_DEFAULT_MAX_FRAME;
  if (o->token_len) memcpy(s->token, o->token, o->token_len);
  s->token_len = o->token_len;
  s->o.token = NULL;
  if (o->shard_threads < 0 || o->shard_threads > MAX_SHARDS || o->max_connections < 0 ||
      o->max_inflight_bytes < 0 || o->max_inflight_requests < 0 || o->max_inflight_requests > REORDER ||
      o->busy_poll_us > 10000) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "ps shard_threads %d (0..%d), max_connections %d, max_inflight_bytes %lld, "
                    "max_inflight_requests %d (0..%d), busy_poll_us %d (<= 10000)",
                    o->shard_threads, MAX_SHARDS, o->max_connections, (long long)o->max_inflight_bytes,
                    o->max_inflight_requests, REORDER, (int)o->busy_poll_us);
    loom__free(s);
    return NULL;
  }
  s->nshards = o->shard_threads ? o->shard_threads : 2;
  s->spin_us = o->busy_poll_us > 0 ? o->busy_poll_us : 0; /* off by default */
  if (!s->o.max_connections) s->o.max_connections = 1024;
  if (!s->o.max_inflight_bytes) s->o.max_inflight_bytes = (int64_t)256 << 20;
  if (!s->o.max_inflight_requests) s->o.max_inflight_requests = REORDER;
  s->stats.shard_threads = s->nshards;
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->rmu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->shards = loom__calloc((size_t)s->nshards, sizeof *s->shards);
  if (!s->shards) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "no memory for the ps");
    server_free(s);
    return NULL;
  }
  for (int q = 0; q < s->nshards; q++) {
    s->shards[q].srv = s;
    s->shards[q].index = q;
    sem_init(&s->shards[q].sem, 0, 0);
  }
  int r = uv_loop_init(&s->loop);
  if (r < 0) {
    loom_status_set(st, LOOM_INTERNAL, "uv_loop_init: %s", uv_strerror(r));
    server_free(s);
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
    server_free(s);
    return NULL;
  }
  struct sockaddr_storage ss;
  int sl = sizeof ss;
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &sl);
  s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  uv_async_init(&s->loop, &s->stop_async, on_stop);
  s->stop_async.data = s;
  uv_async_init(&s->loop, &s->done_async, on_done);
  s->done_async.data = s;
  uv_timer_init(&s->loop, &s->timer);
  s->timer.data = s;
  uv_idle_init(&s->loop, &s->spin);
  s->spin.data = s;
  uv_timer_start(&s->timer, on_timer, 50, 50);
  s->last_activity_ms = s->chief_seen_ms = now_ms();
  /* libuv writes replies with write/writev (no MSG_NOSIGNAL): a client that goes away while its
   * reply is being written would raise SIGPIPE and, at its default action, kill the process that
   * embeds this server. The server's threads start with SIGPIPE blocked (they inherit the mask):
   * the write fails with EPIPE, that connection closes, and the process's own disposition of
   * SIGPIPE is left alone. */
  sigset_t pipe_set, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  int started = 1;
  for (int q = 0; q < s->nshards && started; q++)
    started = s->shards[q].started = pthread_create(&s->shards[q].thread, NULL, shard_main, &s->shards[q]) == 0;
  int loop_ok = started && pthread_create(&s->thread, NULL, loop_main, s) == 0;
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  if (!loop_ok) {
    loom_status_set(st, LOOM_INTERNAL, "ps: cannot start the loop and shard threads");
    shards_stop(s);
    uv_walk(&s->loop, close_walk, s);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    server_free(s);
    return NULL;
  }
  s->thread_started = 1;
  loom__log(LOOM_LOG_INFO, "ps listening on %s:%d (placement %016llx, %d shard threads)", host, s->port,
            (unsigned long long)s->o.placement_hash, s->nshards);
  return s;
}

int loom_ps_server_port(const loom_ps_server *s) { return s ? s->port : -1; }

int loom_ps_server_stop_reason(loom_ps_server *s) {
  if (!s) return 0;
  pthread_mutex_lock(&s->mu);
  int r = s->stopped ? s->stop_reason : 0;
  pthread_mutex_unlock(&s->mu);
  return r;
}
uint64_t loom_ps_server_instance(const loom_ps_server *s) { return s ? s->instance : 0; }

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
  out->refused = __atomic_load_n(&s->stats.refused, __ATOMIC_RELAXED);
  out->inflight_pauses = __atomic_load_n(&s->stats.inflight_pauses, __ATOMIC_RELAXED);
  out->value_copies = __atomic_load_n(&s->stats.value_copies, __ATOMIC_RELAXED);
  out->duplicates = __atomic_load_n(&s->stats.duplicates, __ATOMIC_RELAXED);
  out->shm_attaches = __atomic_load_n(&s->stats.shm_attaches, __ATOMIC_RELAXED);
  out->shm_refused = __atomic_load_n(&s->stats.shm_refused, __ATOMIC_RELAXED);
  out->shm_requests = __atomic_load_n(&s->stats.shm_requests, __ATOMIC_RELAXED);
  out->self_saves = __atomic_load_n(&s->stats.self_saves, __ATOMIC_RELAXED);
  out->shard_threads = s->stats.shard_threads;
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
  server_free(s);
}
