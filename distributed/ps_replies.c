/* distributed/ps_replies.c - the PS's connections below the loop: the
 * lock-free job hand-offs, each connection's job pool, reading under
 * back-pressure, building replies (inline, part, error, small) and sending
 * them in each connection's request order (the reorder ring), closing and
 * freeing connections. */
#include "distributed/ps_server_impl.h"

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

void loom__pss_stack_push(job **top, job *j) {
  job *old = __atomic_load_n(top, __ATOMIC_RELAXED);
  do j->next = old;
  while (!__atomic_compare_exchange_n(top, &old, j, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* Takes the whole stack, in push order. */
job *loom__pss_stack_take(job **top) {
  job *l = __atomic_exchange_n(top, NULL, __ATOMIC_ACQUIRE), *r = NULL;
  while (l) {
    job *n = l->next;
    l->next = r;
    r = l;
    l = n;
  }
  return r;
}

void loom__pss_job_free(job *j) {
  if (!j) return;
  loom__free(j->body);
  loom__free(j);
}

#define RCACHE_MAX 64
void loom__pss_reply_free(reply *r) {
  if (!r) return;
  loom__pss_vbuf_release(r->ref);
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

void loom__pss_conn_free(conn *c) {
  if (c->dd) c->dd->refs--;
  loom__ps_shm_map_close(&c->shm); /* nothing is in flight: no shard uses the mapping */
  for (int i = 0; i < REORDER; i++) loom__pss_reply_free(c->ring[i]);
  while (c->pool) {
    job *j = c->pool;
    c->pool = j->next;
    loom__pss_job_free(j);
  }
  loom__pss_job_free(c->cur);
  loom__free(c->parts);
  loom__free(c);
}

void loom__pss_conn_closed(uv_handle_t *h) {
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
  if (c->inflight == 0 || s->stopping) loom__pss_conn_free(c); /* else: freed when its last job comes back */
}

void loom__pss_conn_close(conn *c) {
  c->state = ST_CLOSING;
  if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = 0;
  uv_close((uv_handle_t *)&c->tcp, loom__pss_conn_closed);
}

/* Reads while the connection is within its caps; stops (back-pressure) otherwise. */
void loom__pss_conn_update_reading(conn *c) {
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
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, c->srv->read_cb);
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
  loom__pss_reply_free(r);
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
    loom__pss_conn_close(c);
  } else {
    loom__pss_conn_update_reading(c);
  }
}

/* A reply with body_len bytes of inline body (returned) and ext_len bytes sent from ext; NULL when out of memory. */
reply *loom__pss_reply_new(conn *c, size_t body_len) {
  reply *r = loom__malloc(sizeof *r + LOOM_PS_HDR + body_len);
  if (!r) return NULL;
  memset(r, 0, sizeof *r);
  r->c = c;
  r->len = LOOM_PS_HDR + body_len;
  return r;
}

uint8_t *loom__pss_reply_body(reply *r) { return r->data + LOOM_PS_HDR; }

/* A part reply (ps_parts.h) from the server's cache when one is big enough. */
reply *loom__pss_part_reply_new(conn *c, size_t body_len) {
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
void loom__pss_reply_seal(reply *r, const loom_ps_hdr *req, uint16_t opcode, uint32_t flags, uint32_t status,
                          int close_after) {
  size_t inl = r->len - LOOM_PS_HDR;
  loom__ps_hdr_encode(r->data, opcode, flags | LOOM_PS_FLAG_REPLY, req->request_id, NULL, 0, status);
  uint32_t crc = loom__crc32c_extend(0, loom__pss_reply_body(r), inl);
  if (r->ext_len) crc = loom__crc32c_extend(crc, r->ext, r->ext_len);
  loom__ps_put32(r->data + 20, (uint32_t)(inl + r->ext_len));
  loom__ps_put32(r->data + 24, crc);
  r->close_after = close_after;
}

/* An error reply (the body is the message); close_after: the connection is
 * closed once it is written (a protocol violation: logged). */
reply *loom__pss_error_reply(loom_ps_server *s, conn *c, const loom_ps_hdr *req, uint32_t code, int close_after,
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
  reply *r = loom__pss_reply_new(c, n);
  if (!r) return NULL;
  memcpy(loom__pss_reply_body(r), msg, n);
  loom__pss_reply_seal(r, req, req->opcode, 0, code, close_after);
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
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, c->srv->read_cb);
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
      loom__pss_reply_free(r);
      continue;
    }
    uv_buf_t b[2] = {uv_buf_init((char *)r->data, (unsigned)r->len), uv_buf_init((char *)r->ext, (unsigned)r->ext_len)};
    int close_after = r->close_after;
    if (uv_write(&r->req, (uv_stream_t *)&c->tcp, b, r->ext_len ? 2 : 1, write_done) < 0) {
      loom__pss_reply_free(r);
      loom__pss_conn_close(c);
      return;
    }
    if (close_after && c->state < ST_DRAINING) conn_drain(c); /* close once written */
  }
  loom__pss_conn_update_reading(c);
}

/* The reply to request seq of c (NULL reply: out of memory: the connection is closed). */
void loom__pss_conn_answer(conn *c, uint64_t seq, reply *r) {
  if (!r) {
    loom__pss_conn_close(c);
    return;
  }
  c->ring[seq % REORDER] = r;
  conn_flush(c);
}

/* A reply made on the loop thread to the request being read. */
void loom__pss_loop_answer(conn *c, reply *r) { loom__pss_conn_answer(c, c->seq_in++, r); }

void loom__pss_loop_error(conn *c, uint32_t code, int close_after, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  loom__pss_loop_answer(c, loom__pss_error_reply(c->srv, c, &c->h, code, close_after, "%s", msg));
  if (close_after && c->state < ST_DRAINING) conn_drain(c);
}

void loom__pss_complete(loom_ps_server *s, job *j) {
  loom__pss_stack_push(&s->completed, j);
  uv_async_send(&s->done_async);
}

reply *loom__pss_small_reply(job *j, const void *body, size_t n, uint32_t flags) {
  reply *r = loom__pss_reply_new(j->c, n);
  if (!r) return NULL;
  if (n) memcpy(loom__pss_reply_body(r), body, n);
  loom__pss_reply_seal(r, &j->h, j->h.opcode, flags, 0, 0);
  return r;
}

reply *loom__pss_version_reply(job *j, uint64_t version, uint32_t flags) {
  uint8_t b[8];
  loom__ps_put64(b, version);
  return loom__pss_small_reply(j, b, 8, flags);
}

job *loom__pss_job_get(conn *c, uint32_t len) {
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
void loom__pss_job_put(conn *c, job *j) {
  if (c->npool >= POOL_MAX) {
    loom__pss_job_free(j);
    return;
  }
  j->next = c->pool;
  c->pool = j;
  c->npool++;
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
