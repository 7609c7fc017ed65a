/* distributed/ps_dupwin.c - the duplicate window (loop thread only): per
 * client id, the outcome of its last DD_W mutating requests, so that a
 * request re-sent after a reconnect is answered, not applied twice. */
#include "distributed/ps_server_impl.h"

ddwin *loom__pss_dd_find(loom_ps_server *s, uint64_t client_id) {
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

int loom__pss_dd_opcode(uint16_t op) { return loom__pss_push_opcode(op) || op == LOOM_PS_STEP_INC; }
/* A shared-memory push is the same request as its TCP form in the window (a client that reconnects
 * re-sends it over TCP: the mapping went with the old connection). */
uint16_t loom__pss_dd_canon(uint16_t op) {
  return op == LOOM_PS_SHM_PUSH ? LOOM_PS_PUSH : op == LOOM_PS_SHM_PUSHPULL ? LOOM_PS_PUSHPULL : op;
}

/* A mutating request of a client with a window: 0 when it is new (j->dd set: recorded as pending when
 * dispatched); 1 when it was answered here (a duplicate, or an id older than the window); 2 for a re-sent
 * PUSHPULL applied once (j->dup set): the caller dispatches it, answered with the current value. */
int loom__pss_dd_check(conn *c, job *j) {
  ddwin *w = c->dd;
  uint64_t id = c->h.request_id;
  w->last_used_ms = now_ms();
  if (id + DD_W <= w->max_id) {
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_FAILED_PRECONDITION, 0,
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
  if (sl->opcode != loom__pss_dd_canon(c->h.opcode)) {
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_INVALID_ARGUMENT, 0, "request id %llu of client %016llx was opcode %u, now %u: not applied",
                         (unsigned long long)id, (unsigned long long)w->client_id, sl->opcode, c->h.opcode);
    return 1;
  }
  if (sl->state == DD_PENDING) {
    loom__pss_job_put(c, j);
    loom__pss_loop_error(c, LOOM_UNAVAILABLE, 0,
                         "request id %llu of client %016llx is still being applied (its first copy is held): not applied "
               "twice, retry later", (unsigned long long)id, (unsigned long long)w->client_id);
    return 1;
  }
  if (sl->state == DD_VALUE) { /* a PUSHPULL applied once: the reply is the current value */
    j->dup = 1;
    j->dup_flags = sl->flags;
    return 2;
  }
  loom__pss_job_put(c, j);
  reply *r = loom__pss_reply_new(c, sl->body_len);
  if (r) {
    memcpy(loom__pss_reply_body(r), sl->body, sl->body_len);
    loom__pss_reply_seal(r, &c->h, c->h.opcode, (sl->flags & ~LOOM_PS_FLAG_REPLY) | LOOM_PS_FLAG_DUPLICATE, sl->status, 0);
  }
  loom__pss_loop_answer(c, r);
  return 1;
}

/* The outcome of a recorded request (r: its reply, NULL when none could be made). */
void loom__pss_dd_done(job *j, const reply *r) {
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
  if (loom__pss_dd_canon(j->h.opcode) == LOOM_PS_PUSHPULL && sl->status == 0) {
    sl->state = DD_VALUE;
    return;
  }
  size_t n = r->len - LOOM_PS_HDR;
  sl->body_len = (uint8_t)(n < DD_BODY ? n : DD_BODY);
  memcpy(sl->body, r->data + LOOM_PS_HDR, sl->body_len);
  sl->state = DD_DONE;
}
