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
#include "base/pool.h"
#include "distributed/ps_server_impl.h"

loom_ps_server_options loom_ps_server_options_default(void) {
  loom_ps_server_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.host = "127.0.0.1";
  return o;
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
    psvar *v = j->h.body_len >= 4 ? loom__pss_var_get(s, loom__ps_get32(j->body)) : NULL;
    ok = v && ((uint64_t)v->numel * 4 <= INLINE_MAX_BYTES || part);
  } else if (j->h.opcode == LOOM_PS_INIT_VAR) {
    ok = 0;
  }
  if (ok) {
    int had = sh->waiters != NULL;
    loom__pss_shard_process(sh, j);
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
    sl->opcode = loom__pss_dd_canon(j->h.opcode);
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
  loom__pss_shard_post(&s->shards[q], j);
  loom__pss_conn_update_reading(c);
}

/* A mutating request of a client with a window: 0 when it is new (dispatched by the caller); 1 when it was
 * answered, or dispatched here as a re-sent PUSHPULL (answered with the current value). */
static int dd_admit(conn *c, job *j) {
  int k = loom__pss_dd_check(c, j);
  if (k == 2) dispatch_job(c, j, (int)(loom__ps_get32(j->body) % (uint32_t)c->srv->nshards));
  return k != 0;
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
      loom__pss_job_put(c, j);
      loom__pss_loop_error(c, LOOM_RESOURCE_EXHAUSTED, 0, "no memory for a barrier");
      return;
    }
  }
  j->kind = JOB_BARRIER;
  j->bar = b;
  for (int q = 1; q < s->nshards; q++) {
    aux[q]->kind = JOB_BARRIER;
    aux[q]->bar = b;
    loom__pss_shard_post(&s->shards[q], aux[q]);
  }
  dispatch_job(c, j, 0);
}

static void handle_ckpt(conn *c, job *j, int save) {
  loom_ps_server *s = c->srv;
  const char *what = save ? "SAVE" : "RESTORE";
  if (c->h.body_len < 16 || c->h.body_len != 16 + (uint64_t)loom__ps_get32(j->body + 8)) {
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_INVALID_ARGUMENT, 1, "%s body of %u bytes is malformed", what, c->h.body_len);
    return;
  }
  int64_t step = (int64_t)loom__ps_get64(j->body);
  uint32_t len = loom__ps_get32(j->body + 8);
  const char *dir = (const char *)j->body + 16;
  if (!s->o.model_dir) {
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_FAILED_PRECONDITION, 0, "%s: this PS was started without a model_dir", what);
    return;
  }
  if (len > 256 || !loom__pss_rel_dir_ok(dir, len) || step < 0) {
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_PERMISSION_DENIED, 0,
                         "%s: the directory must be relative to the model_dir, without '..' (and step >= 0)", what);
    return;
  }
  barrier *b = loom__calloc(1, sizeof *b);
  if (!b) {
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_RESOURCE_EXHAUSTED, 0, "no memory for a barrier");
    return;
  }
  b->kind = save ? BAR_SAVE : BAR_RESTORE;
  b->step = step;
  snprintf(b->path, sizeof b->path, "%s/%.*s/model.ckpt-%lld.ps-%d-of-%d", s->model_dir, (int)len, dir,
           (long long)step, s->o.ps_index, s->o.num_ps > 0 ? s->o.num_ps : 1);
  dispatch_barrier(c, j, b);
}

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

/* A whole frame has been read into j (its CRC already checked). */
static void frame_done(conn *c, job *j) {
  loom_ps_server *s = c->srv;
  STAT_ADD(s, frames, 1);
  if (c->h.body_len <= 1024) loop_spin(s); /* a small request: the next one of its client is likely close behind */
  s->last_activity_ms = c->last_frame_ms = now_ms();
  if (c->h.flags & LOOM_PS_FLAG_REPLY) {
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_INVALID_ARGUMENT, 1, "a reply frame (opcode %u) sent to the PS", c->h.opcode);
    return;
  }
  if (c->state == ST_HELLO || c->state == ST_AUTH) {
    if (c->state == ST_HELLO) loom__pss_handle_hello(c, j);
    else loom__pss_handle_auth(c, j);
    loom__pss_job_put(c, j);
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
      loom__pss_job_put(c, j);
      loom__pss_loop_error(c, LOOM_INVALID_ARGUMENT, 1, "opcode %u body of %u bytes is truncated", c->h.opcode, c->h.body_len);
      return;
    }
    if (c->dd && loom__pss_dd_opcode(c->h.opcode) && dd_admit(c, j)) return;
    if (c->h.opcode == LOOM_PS_PUSHPULL_PART && !c->parts &&
        !(c->parts = loom__calloc((size_t)s->nshards, sizeof *c->parts))) {
      loom__pss_job_put(c, j);
      loom__pss_loop_error(c, LOOM_RESOURCE_EXHAUSTED, 1, "no memory for the pipelined push state");
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
    loom__pss_job_put(c, j);
    if (rc) {
      STAT_ADD(s, shm_refused, 1);
      loom__log(LOOM_LOG_INFO, "ps :%d: SHM_ATTACH of %s refused: %s", s->port, c->peer, loom_status_message(st));
      loom__pss_loop_error(c, rc, 0, "%s", loom_status_message(st));
    } else {
      STAT_ADD(s, shm_attaches, 1);
      reply *r = loom__pss_reply_new(c, 0);
      if (r) loom__pss_reply_seal(r, &c->h, LOOM_PS_SHM_ATTACH, 0, 0, 0);
      loom__pss_loop_answer(c, r);
    }
    loom_status_free(st);
    return;
  }
  case LOOM_PS_SAVE: handle_ckpt(c, j, 1); return;
  case LOOM_PS_RESTORE: handle_ckpt(c, j, 0); return;
  case LOOM_PS_STEP_INC: {
    if (c->h.body_len != 8 && c->h.body_len != 16) {
      loom__pss_job_put(c, j);
      loom__pss_loop_error(c, LOOM_INVALID_ARGUMENT, 1, "STEP_INC body of %u bytes (expected 8, or 16 with a limit)",
                           c->h.body_len);
      return;
    }
    if (c->dd && dd_admit(c, j)) return;
    if (s->o.consistency == LOOM_PS_SYNC) {
      barrier *b = loom__calloc(1, sizeof *b);
      if (!b) {
        loom__pss_job_put(c, j);
        loom__pss_loop_error(c, LOOM_RESOURCE_EXHAUSTED, 0, "no memory for a barrier");
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
    loom__pss_job_put(c, j);
    reply *r = loom__pss_reply_new(c, 8);
    if (r) {
      memset(loom__pss_reply_body(r), 0, 8);
      loom__ps_put32(loom__pss_reply_body(r), s->o.consistency == LOOM_PS_ASYNC);
      loom__pss_reply_seal(r, &c->h, LOOM_PS_PARTS_PROBE, 0, 0, 0);
    }
    loom__pss_loop_answer(c, r);
    return;
  }
  case LOOM_PS_PING: {
    loom__pss_job_put(c, j);
    reply *r = loom__pss_reply_new(c, 0);
    if (r) loom__pss_reply_seal(r, &c->h, LOOM_PS_PING, 0, 0, 0);
    loom__pss_loop_answer(c, r);
    return;
  }
  case LOOM_PS_SHUTDOWN: {
    loom__pss_job_put(c, j);
    loom__log(LOOM_LOG_INFO, "ps :%d: SHUTDOWN requested by %s", s->port, c->peer);
    reply *r = loom__pss_reply_new(c, 0);
    if (r) loom__pss_reply_seal(r, &c->h, LOOM_PS_SHUTDOWN, 0, 0, 2);
    loom__pss_loop_answer(c, r);
    return;
  }
  default:
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_UNIMPLEMENTED, 1, "unknown opcode %u", c->h.opcode);
  }
}

/* Finished jobs from the shards: their replies join their connections' order. */
static void on_done(uv_async_t *a) {
  loom_ps_server *s = a->data;
  for (job *j = loom__pss_stack_take(&s->completed); j;) {
    job *n = j->next;
    conn *c = j->c;
    reply *r = j->out;
    uint64_t seq = j->seq;
    j->out = NULL;
    if (j->dd) loom__pss_dd_done(j, r);
    c->inflight--;
    c->inflight_bytes -= j->h.body_len;
    if (c->closed) {
      loom__pss_reply_free(r);
      loom__pss_job_free(j);
      if (c->inflight == 0) loom__pss_conn_free(c);
    } else {
      loom__pss_job_put(c, j);
      loom__pss_conn_answer(c, seq, r);
    }
    j = n;
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
    loom__pss_conn_close(c);
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
      loom__pss_loop_error(c, rc, 1, "%s", why);
      return;
    }
    job *j = loom__pss_job_get(c, c->h.body_len);
    if (!j) {
      loom__pss_loop_error(c, LOOM_RESOURCE_EXHAUSTED, 1, "no memory for a %u-byte body", c->h.body_len);
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
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_DATA_LOSS, 1, "CRC-32C mismatch on a %u-byte body (opcode %u)", c->h.body_len, c->h.opcode);
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
  loom__pss_conn_update_reading(c);
}

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) {
    if (h->type == UV_TCP && h->data && h->data != arg)
      uv_close(h, loom__pss_conn_closed);
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
      loom__pss_stack_push(&s->completed, j);
    }
  }
  for (job *j = loom__pss_stack_take(&s->completed); j;) {
    job *n = j->next;
    conn *c = j->c;
    loom__pss_reply_free(j->out);
    loom__pss_job_free(j);
    /* a connection closed before the stop (EOF while a shard held its request): freed with its last job */
    if (c && --c->inflight == 0 && c->closed) loom__pss_conn_free(c);
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
    loom__pss_shard_post(&s->shards[q], aux[q]);
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
      loom__pss_loop_error(c, LOOM_DEADLINE_EXCEEDED, 1, "no authentication within %.1f s", hs);
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
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) loom__pss_conn_close(c);
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
  loom__set_ftz(); /* updates applied here compute as a local session's kernels do */
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
      if (sh->vars[i].present) loom__pss_var_free(&sh->vars[i]);
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
  s->read_cb = on_read;
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
      (strlen(o->self_save_dir) >= sizeof s->self_dir || !loom__pss_rel_dir_ok(o->self_save_dir, strlen(o->self_save_dir)))) {
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
    started = s->shards[q].started = pthread_create(&s->shards[q].thread, NULL, loom__pss_shard_main, &s->shards[q]) == 0;
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
