/* distributed/ps_server_impl.h - internal to the parameter server task
 * (ps_server.c and the files it is split into): the server, connection,
 * job, reply, variable, shard, barrier and duplicate-window structs, and the
 * functions the files share, grouped by the file that defines them. A file
 * calls only files after it on these chains: ps_server (the loop thread,
 * dispatch, lifecycle) -> ps_handshake -> ps_dupwin -> ps_handlers;
 * ps_server -> ps_shards -> ps_barrier -> ps_ckpt; ps_shards -> ps_handlers;
 * every file -> ps_replies -> ps_vars. */
#ifndef LOOM_DIST_PS_SERVER_IMPL_H
#define LOOM_DIST_PS_SERVER_IMPL_H
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
  uv_read_cb read_cb;      /* the loop's reader (ps_server.c): connections start reading with it */
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

static inline uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The counters are written by the loop and shard threads and read by loom_ps_server_get_stats
 * from any thread: relaxed atomics (each counter exact, the snapshot may lag by a frame). */
#define STAT_ADD(srv, field, n) __atomic_fetch_add(&(srv)->stats.field, (int64_t)(n), __ATOMIC_RELAXED)

/* An error reply to job j (of server s), for the handlers of the shard threads. */
#define JERR(code, close, ...) loom__pss_error_reply(s, j->c, &j->h, (code), (close), __VA_ARGS__)

/* ps_barrier.c */
void loom__pss_do_barrier(loom_ps_server *s, shard *sh, job *j);

/* ps_ckpt.c */
int loom__pss_rel_dir_ok(const char *d, size_t n);
int loom__pss_mkdirs(char *path);
uint32_t loom__pss_vars_end(loom_ps_server *s);
uint64_t loom__pss_vars_digest(loom_ps_server *s, uint32_t *nvars);
loom_code loom__pss_ckpt_save(loom_ps_server *s, const char *path, loom_status *st);
loom_code loom__pss_ckpt_restore(loom_ps_server *s, const char *path, loom_status *st);

/* ps_dupwin.c */
ddwin *loom__pss_dd_find(loom_ps_server *s, uint64_t client_id);
int loom__pss_dd_opcode(uint16_t op);
uint16_t loom__pss_dd_canon(uint16_t op);
int loom__pss_dd_check(conn *c, job *j);
void loom__pss_dd_done(job *j, const reply *r);

/* ps_handlers.c */
reply *loom__pss_value_reply(loom_ps_server *s, job *j, psvar *v, uint64_t have, uint32_t flags);
reply *loom__pss_handle_init(loom_ps_server *s, shard *sh, job *j);
psvar *loom__pss_req_var(loom_ps_server *s, job *j, uint32_t need, reply **err);
void loom__pss_wake_waiters(loom_ps_server *s, shard *sh, uint32_t id, psvar *v);
reply *loom__pss_handle_push(loom_ps_server *s, shard *sh, job *j, int pull, int *held);
reply *loom__pss_handle_part(loom_ps_server *s, shard *sh, job *j);
int loom__pss_rows_hold(loom_ps_server *s, shard *sh, job *j);
reply *loom__pss_handle_rows(loom_ps_server *s, shard *sh, job *j, int push, int at, int *held);
reply *loom__pss_handle_step_inc(loom_ps_server *s, job *j);
reply *loom__pss_handle_shm(loom_ps_server *s, shard *sh, job *j, int *held);
int loom__pss_push_opcode(uint16_t op);
reply *loom__pss_handle_pull_slot(loom_ps_server *s, job *j);

/* ps_handshake.c */
void loom__pss_handle_hello(conn *c, job *j);
void loom__pss_handle_auth(conn *c, job *j);

/* ps_replies.c */
void loom__pss_stack_push(job **top, job *j);
job *loom__pss_stack_take(job **top);
void loom__pss_job_free(job *j);
void loom__pss_reply_free(reply *r);
void loom__pss_conn_free(conn *c);
void loom__pss_conn_closed(uv_handle_t *h);
void loom__pss_conn_close(conn *c);
void loom__pss_conn_update_reading(conn *c);
reply *loom__pss_reply_new(conn *c, size_t body_len);
uint8_t *loom__pss_reply_body(reply *r);
reply *loom__pss_part_reply_new(conn *c, size_t body_len);
void loom__pss_reply_seal(reply *r, const loom_ps_hdr *req, uint16_t opcode, uint32_t flags, uint32_t status,
                          int close_after);
reply *loom__pss_error_reply(loom_ps_server *s, conn *c, const loom_ps_hdr *req, uint32_t code, int close_after,
                             const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void loom__pss_conn_answer(conn *c, uint64_t seq, reply *r);
void loom__pss_loop_answer(conn *c, reply *r);
void loom__pss_loop_error(conn *c, uint32_t code, int close_after, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void loom__pss_complete(loom_ps_server *s, job *j);
reply *loom__pss_small_reply(job *j, const void *body, size_t n, uint32_t flags);
reply *loom__pss_version_reply(job *j, uint64_t version, uint32_t flags);
job *loom__pss_job_get(conn *c, uint32_t len);
void loom__pss_job_put(conn *c, job *j);

/* ps_shards.c */
void loom__pss_shard_process(shard *sh, job *j);
void *loom__pss_shard_main(void *arg);
void loom__pss_shard_post(shard *sh, job *j);

/* ps_vars.c */
vbuf *loom__pss_vbuf_new(int64_t n);
void loom__pss_vbuf_release(vbuf *b);
psvar *loom__pss_var_get(loom_ps_server *s, uint32_t id);
float *loom__pss_alloc_floats(int64_t n, float fill);
void loom__pss_var_free(psvar *v);
int loom__pss_opt_slots(loom_ps_optimizer opt, const float *hyper, float init[3]);
loom_code loom__pss_var_cow(loom_ps_server *s, psvar *v, loom_status *st);
void loom__pss_var_step_done(psvar *v);
loom_code loom__pss_var_apply_range(psvar *v, const float *grad, int64_t begin, int64_t count, uint32_t *crc,
                                    loom_status *st);
loom_code loom__pss_var_apply_crc(loom_ps_server *s, psvar *v, const float *grad, const int64_t *ids, int64_t n,
                                  uint32_t *crc, loom_status *st);
loom_code loom__pss_var_apply(loom_ps_server *s, psvar *v, const float *grad, const int64_t *ids, int64_t n,
                              loom_status *st);

#endif
