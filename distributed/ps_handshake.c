/* distributed/ps_handshake.c - the PS side of the handshake (loop thread):
 * HELLO (version, placement, chief flag, client id) -> CHALLENGE, AUTH (the
 * HMAC over both nonces) -> WELCOME with the PS instance id. */
#include "distributed/ps_server_impl.h"

void loom__pss_handle_hello(conn *c, job *j) {
  loom_ps_server *s = c->srv;
  const uint8_t *b = j->body;
  if (c->h.opcode != LOOM_PS_HELLO) {
    loom__pss_loop_error(c, LOOM_PERMISSION_DENIED, 1, "opcode %u before the handshake (HELLO expected)", c->h.opcode);
    return;
  }
  if (c->h.body_len != 24 + LOOM_PS_NONCE && c->h.body_len != 32 + LOOM_PS_NONCE) {
    loom__pss_loop_error(c, LOOM_INVALID_ARGUMENT, 1, "HELLO body of %u bytes (expected %d, or %d with a client id)",
                         c->h.body_len, 24 + LOOM_PS_NONCE, 32 + LOOM_PS_NONCE);
    return;
  }
  if (s->nconns > s->o.max_connections) {
    STAT_ADD(s, refused, 1);
    loom__pss_loop_error(c, LOOM_RESOURCE_EXHAUSTED, 1, "too many connections (the limit is %d)", s->o.max_connections);
    return;
  }
  uint16_t pmin = loom__ps_get16(b), pmax = loom__ps_get16(b + 2);
  uint32_t nps = loom__ps_get32(b + 4), nv = loom__ps_get32(b + 8);
  uint64_t ph = loom__ps_get64(b + 16);
  if (pmin > LOOM_PS_VERSION || pmax < LOOM_PS_VERSION) {
    loom__pss_loop_error(c, LOOM_UNIMPLEMENTED, 1, "client speaks protocol %u..%u, this PS %u", pmin, pmax, LOOM_PS_VERSION);
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
    loom__pss_loop_error(c, LOOM_FAILED_PRECONDITION, 1, "placement hash mismatch (worker %016llx, ps %016llx): %s",
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
    if (!(c->dd = loom__pss_dd_find(s, client_id))) {
      loom__pss_loop_error(c, LOOM_RESOURCE_EXHAUSTED, 1, "no memory for a duplicate window");
      return;
    }
    c->dd->refs++;
    c->dd->last_used_ms = now_ms();
  }
  if (loom__ps_random(c->sn, LOOM_PS_NONCE) != LOOM_OK) {
    loom__pss_loop_error(c, LOOM_INTERNAL, 1, "no random bytes for the challenge");
    return;
  }
  reply *r = loom__pss_reply_new(c, LOOM_PS_NONCE);
  if (r) {
    memcpy(loom__pss_reply_body(r), c->sn, LOOM_PS_NONCE);
    loom__pss_reply_seal(r, &c->h, LOOM_PS_CHALLENGE, 0, 0, 0);
  }
  loom__pss_loop_answer(c, r);
  c->state = ST_AUTH;
}

void loom__pss_handle_auth(conn *c, job *j) {
  loom_ps_server *s = c->srv;
  if (c->h.opcode != LOOM_PS_AUTH || c->h.body_len != LOOM_PS_MAC) {
    loom__pss_loop_error(c, LOOM_PERMISSION_DENIED, 1, "opcode %u with %u bytes where AUTH was expected", c->h.opcode,
                         c->h.body_len);
    return;
  }
  uint8_t mac[LOOM_PS_MAC];
  loom__ps_auth_mac(s->token, s->token_len, c->cn, c->sn, s->o.placement_hash, mac);
  if (!loom__ps_ct_equal(mac, j->body, LOOM_PS_MAC)) {
    loom__pss_loop_error(c, LOOM_PERMISSION_DENIED, 1, "authentication failed (HMAC mismatch: wrong token)");
    return;
  }
  reply *r = loom__pss_reply_new(c, LOOM_PS_WELCOME_LEN);
  if (r) {
    uint8_t *wb = loom__pss_reply_body(r);
    loom__ps_put32(wb, __atomic_load_n(&s->nvars_present, __ATOMIC_RELAXED));
    loom__ps_put32(wb + 4, 0);
    loom__ps_put64(wb + 8, s->instance);
    loom__pss_reply_seal(r, &c->h, LOOM_PS_WELCOME, 0, 0, 0);
  }
  loom__pss_loop_answer(c, r);
  c->state = ST_READY;
}
