/* distributed/ps_client.c - a worker's connection to one PS task: connect,
 * the authenticated handshake, reconnection, and the client requests (init,
 * pull, push, rows, step counter, shutdown) built on the connection's framing
 * (ps_conn.c). Requests are split into a send half and a receive half so
 * that the cluster client can put one request on every PS before reading any
 * reply: different PS tasks work in parallel with no extra thread. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "base/base.h"
#include "base/fsutil.h"
#include "distributed/ps_client.h"
#include "distributed/ps_shm.h"
#include "distributed/ps_parts.h"

static loom_code welcome_reply(loom_ps_client *c, loom_status *st) {
  loom_ps_hdr h;
  uint8_t w[LOOM_PS_WELCOME_LEN];
  loom_code rc = loom__ps_recv_hdr(c, LOOM_PS_WELCOME, &h, st);
  if (rc) return rc;
  if (h.body_len != LOOM_PS_WELCOME_LEN && h.body_len != LOOM_PS_WELCOME_V0) {
    loom__ps_conn_fail(c, NULL, "", 0);
    return loom_status_set(st, LOOM_DATA_LOSS, "ps %s: WELCOME of %u bytes (expected %u, or %u from an older PS)",
                           c->addr, h.body_len, LOOM_PS_WELCOME_LEN, LOOM_PS_WELCOME_V0);
  }
  rc = loom__ps_recv_body(c, w, h.body_len, st);
  if (!rc) rc = loom__ps_recv_end(c, &h, st);
  if (rc) return rc;
  c->instance = h.body_len == LOOM_PS_WELCOME_LEN ? loom__ps_get64(w + 8) : 0;
  if (c->expect_instance && c->instance != c->expect_instance) {
    loom__ps_conn_fail(c, NULL, "", 0);
    if (!c->instance)
      return loom_status_set(st, LOOM_FAILED_PRECONDITION,
                             "ps %s reports no instance id (an older PS), expected PS instance %016llx: "
                             "another PS holds that port (stale address file?)",
                             c->addr, (unsigned long long)c->expect_instance);
    return loom_status_set(st, LOOM_FAILED_PRECONDITION,
                           "ps %s is PS instance %016llx, expected instance %016llx: another PS of this placement "
                           "holds that port (stale address file?)",
                           c->addr, (unsigned long long)c->instance, (unsigned long long)c->expect_instance);
  }
  return LOOM_OK;
}

/* Opens c's connection (c->fd < 0) and authenticates: HELLO -> CHALLENGE -> AUTH -> WELCOME. */
static loom_code open_conn(loom_ps_client *c, loom_status *st) {
  c->parts_ok = 0; /* a new connection (maybe to a new PS incarnation): ask again */
  loom_code dial = loom__ps_conn_dial(c, st);
  if (dial) return dial;
  /* HELLO -> CHALLENGE -> AUTH -> WELCOME; the handshake's own ids, then the request ids go on */
  uint64_t next = c->next_id;
  c->next_id = c->acked = 0;
  c->retry = 0;
  uint8_t hello[24 + LOOM_PS_NONCE + 8];
  memset(hello, 0, sizeof hello);
  uint16_t v = LOOM_PS_VERSION;
  memcpy(hello, &v, 2);
  memcpy(hello + 2, &v, 2);
  loom__ps_put32(hello + 4, (uint32_t)c->num_ps);
  loom__ps_put32(hello + 8, (uint32_t)c->num_vars);
  loom__ps_put32(hello + 12, c->chief ? LOOM_PS_HELLO_CHIEF : 0);
  loom__ps_put64(hello + 16, c->placement_hash);
  loom__ps_put64(hello + 24 + LOOM_PS_NONCE, c->client_id);
  uint8_t sn[LOOM_PS_NONCE], mac[LOOM_PS_MAC];
  loom_code rc = loom__ps_random(hello + 24, LOOM_PS_NONCE);
  if (rc) loom_status_set(st, rc, "no random bytes for the handshake");
  if (!rc) rc = loom__ps_send(c, LOOM_PS_HELLO, hello, sizeof hello, NULL, 0, NULL, 0, st);
  if (!rc) rc = loom__ps_small_reply(c, LOOM_PS_CHALLENGE, sn, sizeof sn, st);
  if (!rc) {
    loom__ps_auth_mac(c->token, c->token_len, hello + 24, sn, c->placement_hash, mac);
    rc = loom__ps_send(c, LOOM_PS_AUTH, mac, sizeof mac, NULL, 0, NULL, 0, st);
  }
  if (!rc) rc = welcome_reply(c, st);
  /* request ids are per client incarnation: they go on across connections, above the handshake's */
  c->next_id = c->acked = next > c->next_id ? next : c->next_id;
  return rc;
}

loom_ps_connect_options loom_ps_connect_options_default(void) {
  loom_ps_connect_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  return o;
}

loom_ps_client *loom_ps_connect(const loom_ps_connect_options *user, loom_status *st) {
  loom_ps_connect_options oc = loom_ps_connect_options_default();
  if (LOOM__OPTS_TAKE(&oc, user, "loom_ps_connect", loom_ps_connect_options, st)) return NULL;
  const loom_ps_connect_options *o = user ? &oc : NULL;
  if (!o || !o->host) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_connect: no host");
    return NULL;
  }
  if (strlen(o->host) >= sizeof(((loom_ps_client *)0)->host) || (o->token && o->token_len > 256) ||
      o->busy_poll_us > 10000) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_connect: host of %zu chars (< 256), token of %zu bytes "
                    "(<= 256), busy_poll_us %d (<= 10000)", strlen(o->host), o->token ? o->token_len : 0,
                    (int)o->busy_poll_us);
    return NULL;
  }
  loom_ps_client *c = loom__calloc(1, sizeof *c);
  if (!c) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "no memory for a ps client");
    return NULL;
  }
  c->fd = -1;
  c->timeout_s = o->timeout_s > 0 ? o->timeout_s : 10.0;
  c->max_frame = o->max_frame ? o->max_frame : LOOM_PS_DEFAULT_MAX_FRAME;
  c->spin_us = o->busy_poll_us > 0 ? o->busy_poll_us : 0;
  snprintf(c->addr, sizeof c->addr, "%.60s:%d", o->host, o->port);
  snprintf(c->host, sizeof c->host, "%s", o->host);
  c->port = o->port;
  if (o->token) memcpy(c->token, o->token, o->token_len);
  c->token_len = o->token ? o->token_len : 0;
  c->placement_hash = o->placement_hash;
  c->num_ps = o->num_ps;
  c->num_vars = o->num_vars;
  c->client_id = o->client_id;
  c->expect_instance = o->expect_instance;
  c->part_bytes = o->part_bytes;
  c->chief = o->chief != 0;
  while (!c->client_id) { /* a new incarnation */
    if (loom__ps_random((uint8_t *)&c->client_id, sizeof c->client_id)) {
      loom_status_set(st, LOOM_INTERNAL, "no random bytes for the client id");
      loom__free(c);
      return NULL;
    }
  }
  if (open_conn(c, st)) {
    loom_ps_client_free(c);
    return NULL;
  }
  return c;
}

loom_code loom_ps_client_reconnect(loom_ps_client *c, loom_status *st) {
  if (!c) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_client_reconnect: NULL client");
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->left = 0;
  loom__ps_shm_detach(c); /* the PS's mapping went with the old connection: TCP from now on */
  return open_conn(c, st);
}

void loom_ps_client_retry_last(loom_ps_client *c) {
  if (c && c->next_id) c->retry = 1;
}

uint64_t loom_ps_client_id(const loom_ps_client *c) { return c ? c->client_id : 0; }

uint64_t loom_ps_client_instance(const loom_ps_client *c) { return c ? c->instance : 0; }

int loom_ps_client_last_duplicate(const loom_ps_client *c) {
  return c && (c->hdr.flags & LOOM_PS_FLAG_DUPLICATE) != 0;
}

void loom_ps_client_free(loom_ps_client *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  loom__ps_shm_detach(c);
  loom__free(c);
}

void loom_ps_client_bytes(const loom_ps_client *c, int64_t *sent, int64_t *received) {
  if (sent) *sent = c ? c->bytes_sent : 0;
  if (received) *received = c ? c->bytes_received : 0;
}

static loom_code init_var(loom_ps_client *c, uint32_t var_id, int ndim, const int64_t *dims, loom_ps_optimizer opt,
                          const float *hyper, const float *value, const loom_ps_update_rule *r, int *created,
                          loom_status *st);

loom_code loom_ps_init_var(loom_ps_client *c, uint32_t var_id, int ndim, const int64_t *dims, loom_ps_optimizer opt,
                           const float *hyper, const float *value, int *created, loom_status *st) {
  return init_var(c, var_id, ndim, dims, opt, hyper, value, NULL, created, st);
}

loom_code loom_ps_init_var_rule(loom_ps_client *c, uint32_t var_id, int ndim, const int64_t *dims,
                                const loom_ps_update_rule *r, const float *value, int *created, loom_status *st) {
  if (!r) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_init_var_rule: rule is NULL");
  return init_var(c, var_id, ndim, dims, r->optimizer, r->hyper, value, r, created, st);
}

/* INIT_VAR's rule block (wire.h) of r into a new buffer of *len bytes. */
static uint8_t *rule_block(const loom_ps_update_rule *r, int64_t numel, size_t *len, loom_status *st) {
  int32_t nb = r->schedule == 1 ? r->nboundaries : 0;
  if (r->schedule < -1 || r->schedule > 3 || nb < 0 || (uint32_t)nb > LOOM_PS_RULE_MAX_NB ||
      (nb && (!r->boundaries || !r->values)) || (r->schedule == 1 && !r->values) || r->nslot_values < 0 ||
      r->nslot_values > 3 || (r->nslot_values && !r->slot_values)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "update rule: schedule %d with %d boundaries, %d slot values",
                    (int)r->schedule, (int)r->nboundaries, (int)r->nslot_values);
    return NULL;
  }
  size_t arrays = LOOM_PS_RULE_FIXED + 8 * (size_t)nb + 4 * ((size_t)nb + 1);
  *len = arrays + (r->nslot_values ? 8 + 4 * (size_t)r->nslot_values * (size_t)numel : 0);
  uint8_t *b = loom__calloc(1, *len);
  if (!b) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  double p[4] = {r->lr, r->decay_steps, r->beta, r->limit};
  loom__ps_put32(b, LOOM_PS_RULE_TAG);
  loom__ps_put32(b + 4, (uint32_t)r->schedule);
  loom__ps_put32(b + 8, (uint32_t)r->flag);
  loom__ps_put32(b + 12, (uint32_t)nb);
  loom__ps_put64(b + 16, (uint64_t)r->step);
  memcpy(b + 24, &r->beta1_power, 4);
  memcpy(b + 28, &r->beta2_power, 4);
  memcpy(b + 32, p, 32);
  if (nb) memcpy(b + LOOM_PS_RULE_FIXED, r->boundaries, 8 * (size_t)nb);
  if (r->schedule == 1) memcpy(b + LOOM_PS_RULE_FIXED + 8 * (size_t)nb, r->values, 4 * ((size_t)nb + 1));
  if (r->nslot_values) {
    loom__ps_put32(b + arrays, (uint32_t)r->nslot_values);
    for (int k = 0; k < r->nslot_values && numel; k++)
      memcpy(b + arrays + 8 + 4 * (size_t)k * (size_t)numel, r->slot_values[k], 4 * (size_t)numel);
  }
  return b;
}

static loom_code init_var(loom_ps_client *c, uint32_t var_id, int ndim, const int64_t *dims, loom_ps_optimizer opt,
                          const float *hyper, const float *value, const loom_ps_update_rule *r, int *created,
                          loom_status *st) {
  if (ndim < 0 || ndim > LOOM_MAX_DIMS) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "rank %d", ndim);
  uint8_t fixed[16 + 8 * LOOM_MAX_DIMS + 32];
  memset(fixed, 0, sizeof fixed);
  loom__ps_put32(fixed, var_id);
  loom__ps_put32(fixed + 4, (uint32_t)opt);
  loom__ps_put32(fixed + 8, (uint32_t)ndim);
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++) {
    loom__ps_put64(fixed + 16 + 8 * i, (uint64_t)dims[i]);
    numel *= dims[i];
  }
  size_t fl = 16 + 8 * (size_t)ndim;
  float h[8] = {0};
  if (hyper) memcpy(h, hyper, sizeof h);
  memcpy(fixed + fl, h, 32);
  fl += 32;
  size_t rl = 0;
  uint8_t *rb = r ? rule_block(r, numel, &rl, st) : NULL;
  if (r && !rb) return loom_status_code(st);
  loom_code rc = loom__ps_send(c, LOOM_PS_INIT_VAR, fixed, fl, value, (size_t)numel * 4, rb, rl, st);
  loom__free(rb);
  uint8_t out[4];
  if (!rc) rc = loom__ps_small_reply(c, LOOM_PS_INIT_VAR, out, 4, st);
  if (!rc && created) *created = (int)loom__ps_get32(out);
  return rc;
}

loom_code loom_ps_pull(loom_ps_client *c, uint32_t var_id, float *out, int64_t numel, uint64_t *version,
                       int *changed, loom_status *st) {
  uint64_t off;
  float *slot = loom__ps_shm_slot(c, var_id, numel, &off);
  if (slot) { /* shared memory: the value lands in the slot */
    int ch = 0;
    uint64_t have = version ? *version : UINT64_MAX, v = have;
    loom_code rc = loom__ps_shm_send(c, LOOM_PS_SHM_PULL, var_id, have, off, st);
    if (!rc) rc = loom__ps_shm_recv(c, LOOM_PS_SHM_PULL, &v, &ch, st);
    if (rc) return rc;
    if (ch && numel) memcpy(out, slot, (size_t)numel * 4);
    if (version) *version = v;
    if (changed) *changed = ch;
    return LOOM_OK;
  }
  loom_code rc = loom__ps_pull_send(c, var_id, version ? *version : UINT64_MAX, st);
  return rc ? rc : loom__ps_value_recv(c, LOOM_PS_PULL, out, numel, version, changed, st);
}

loom_code loom_ps_push_at(loom_ps_client *c, uint32_t var_id, const float *grad, int64_t numel,
                          uint64_t read_version, uint64_t *version, int *applied, loom_status *st) {
  uint64_t off;
  float *slot = loom__ps_shm_slot(c, var_id, numel, &off);
  if (slot) { /* shared memory: the gradient goes through the slot */
    if (numel) memcpy(slot, grad, (size_t)numel * 4);
    loom_code rc = loom__ps_shm_send(c, LOOM_PS_SHM_PUSH, var_id, read_version, off, st);
    if (!rc) rc = loom__ps_shm_recv(c, LOOM_PS_SHM_PUSH, version, NULL, st);
    if (!rc && applied) *applied = !(c->hdr.flags & LOOM_PS_FLAG_STALE);
    return rc;
  }
  loom_code rc = loom__ps_push_send(c, LOOM_PS_PUSH, var_id, read_version, grad, numel, st);
  uint8_t out[8];
  if (!rc) rc = loom__ps_small_reply(c, LOOM_PS_PUSH, out, 8, st);
  if (!rc && version) *version = loom__ps_get64(out);
  if (!rc && applied) *applied = !(c->hdr.flags & LOOM_PS_FLAG_STALE);
  return rc;
}

loom_code loom_ps_push(loom_ps_client *c, uint32_t var_id, const float *grad, int64_t numel, uint64_t *version,
                       loom_status *st) {
  return loom_ps_push_at(c, var_id, grad, numel, UINT64_MAX, version, NULL, st);
}

loom_code loom_ps_pushpull(loom_ps_client *c, uint32_t var_id, const float *grad, float *out, int64_t numel,
                           uint64_t *version, loom_status *st) {
  uint64_t off;
  float *slot = loom__ps_shm_slot(c, var_id, numel, &off);
  if (slot) { /* shared memory: the gradient in, the new value back, through the slot */
    if (numel) memcpy(slot, grad, (size_t)numel * 4);
    loom_code rc = loom__ps_shm_send(c, LOOM_PS_SHM_PUSHPULL, var_id, UINT64_MAX, off, st);
    if (!rc) rc = loom__ps_shm_recv(c, LOOM_PS_SHM_PUSHPULL, version, NULL, st);
    if (!rc && numel) memcpy(out, slot, (size_t)numel * 4);
    return rc;
  }
  if (loom__ps_parts_elems(c, numel) > 0 && c->acked == c->next_id) /* pipelined (ps_parts.h) */
    return loom__ps_pushpull_parts(c, var_id, UINT64_MAX, grad, out, numel, version, NULL, st);
  loom_code rc = loom__ps_push_send(c, LOOM_PS_PUSHPULL, var_id, UINT64_MAX, grad, numel, st);
  return rc ? rc : loom__ps_value_recv(c, LOOM_PS_PUSHPULL, out, numel, version, NULL, st);
}

static loom_code rows_check(loom_ps_client *c, int64_t n, int64_t d, loom_status *st) {
  if (n < 0 || d < 0 || n > UINT32_MAX)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps %s: %lld rows of %lld", c->addr, (long long)n, (long long)d);
  return LOOM_OK;
}

loom_code loom_ps_pull_rows(loom_ps_client *c, uint32_t var_id, const int64_t *ids, int64_t n, int64_t d, float *out,
                            loom_status *st) {
  loom_code rc = rows_check(c, n, d, st);
  if (rc) return rc;
  uint8_t fixed[8];
  loom__ps_put32(fixed, var_id);
  loom__ps_put32(fixed + 4, (uint32_t)n);
  rc = loom__ps_send(c, LOOM_PS_PULL_ROWS, fixed, 8, ids, (size_t)n * 8, NULL, 0, st);
  loom_ps_hdr h;
  if (!rc) rc = loom__ps_recv_hdr(c, LOOM_PS_PULL_ROWS, &h, st);
  if (rc) return rc;
  if ((uint64_t)h.body_len != 8 + 4 * (uint64_t)n * (uint64_t)d) {
    loom__ps_conn_fail(c, NULL, "", 0);
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "ps %s: PULL_ROWS reply of %u bytes, expected %lld rows of %lld",
                           c->addr, h.body_len, (long long)n, (long long)d);
  }
  uint8_t ver[8];
  rc = loom__ps_recv_body(c, ver, 8, st);
  if (!rc) rc = loom__ps_recv_body(c, out, (size_t)(n * d) * 4, st);
  return rc ? rc : loom__ps_recv_end(c, &h, st);
}

loom_code loom_ps_push_rows(loom_ps_client *c, uint32_t var_id, const int64_t *ids, int64_t n, int64_t d,
                            const float *grads, loom_status *st) {
  loom_code rc = rows_check(c, n, d, st);
  if (rc) return rc;
  uint8_t fixed[8];
  loom__ps_put32(fixed, var_id);
  loom__ps_put32(fixed + 4, (uint32_t)n);
  rc = loom__ps_send(c, LOOM_PS_PUSH_ROWS, fixed, 8, ids, (size_t)n * 8, grads, (size_t)(n * d) * 4, st);
  uint8_t out[8];
  return rc ? rc : loom__ps_small_reply(c, LOOM_PS_PUSH_ROWS, out, 8, st);
}

loom_code loom_ps_push_rows_at(loom_ps_client *c, uint32_t var_id, const int64_t *ids, int64_t n, int64_t d,
                               const float *grads, uint64_t read_version, uint64_t *version, int *applied,
                               loom_status *st) {
  loom_code rc = rows_check(c, n, d, st);
  if (rc) return rc;
  uint8_t fixed[16];
  loom__ps_put32(fixed, var_id);
  loom__ps_put32(fixed + 4, (uint32_t)n);
  loom__ps_put64(fixed + 8, read_version);
  rc = loom__ps_send(c, LOOM_PS_PUSH_ROWS_AT, fixed, 16, ids, (size_t)n * 8, grads, (size_t)(n * d) * 4, st);
  uint8_t out[8];
  if (!rc) rc = loom__ps_small_reply(c, LOOM_PS_PUSH_ROWS_AT, out, 8, st);
  if (!rc && version) *version = loom__ps_get64(out);
  if (!rc && applied) *applied = !(c->hdr.flags & LOOM_PS_FLAG_STALE);
  return rc;
}

loom_code loom_ps_ping(loom_ps_client *c, double *rtt_us, loom_status *st) {
  double t0 = loom__mono_secs();
  loom_code rc = loom__ps_send(c, LOOM_PS_PING, NULL, 0, NULL, 0, NULL, 0, st);
  if (!rc) rc = loom__ps_small_reply(c, LOOM_PS_PING, NULL, 0, st);
  if (!rc && rtt_us) *rtt_us = (loom__mono_secs() - t0) * 1e6;
  return rc;
}

loom_code loom_ps_step_inc(loom_ps_client *c, int64_t k, int64_t *global_step, loom_status *st) {
  uint8_t in[8], out[8];
  loom__ps_put64(in, (uint64_t)k);
  loom_code rc = loom__ps_send(c, LOOM_PS_STEP_INC, in, 8, NULL, 0, NULL, 0, st);
  if (!rc) rc = loom__ps_small_reply(c, LOOM_PS_STEP_INC, out, 8, st);
  if (!rc && global_step) *global_step = (int64_t)loom__ps_get64(out);
  return rc;
}

loom_code loom__ps_reserve_send(loom_ps_client *c, int64_t max_steps, loom_status *st) {
  uint8_t in[16];
  loom__ps_put64(in, 1);
  loom__ps_put64(in + 8, (uint64_t)max_steps);
  return loom__ps_send(c, LOOM_PS_STEP_INC, in, 16, NULL, 0, NULL, 0, st);
}

loom_code loom__ps_reserve_recv(loom_ps_client *c, int64_t *step, int *granted, loom_status *st) {
  uint8_t out[8];
  loom_code rc = loom__ps_small_reply(c, LOOM_PS_STEP_INC, out, 8, st);
  if (rc) return rc;
  if (step) *step = (int64_t)loom__ps_get64(out);
  if (granted) *granted = !(c->hdr.flags & LOOM_PS_FLAG_REFUSED);
  return LOOM_OK;
}

loom_code loom_ps_reserve_step(loom_ps_client *c, int64_t max_steps, int64_t *step, int *granted, loom_status *st) {
  if (max_steps <= 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_reserve_step: max_steps %lld (must be > 0)",
                           (long long)max_steps);
  loom_code rc = loom__ps_reserve_send(c, max_steps, st);
  return rc ? rc : loom__ps_reserve_recv(c, step, granted, st);
}

loom_code loom_ps_shutdown(loom_ps_client *c, loom_status *st) {
  loom_code rc = loom__ps_send(c, LOOM_PS_SHUTDOWN, NULL, 0, NULL, 0, NULL, 0, st);
  return rc ? rc : loom__ps_small_reply(c, LOOM_PS_SHUTDOWN, NULL, 0, st);
}
