/* distributed/ps_handlers.c - the PS's request handlers, run by a shard
 * thread (or the loop thread for a small request): INIT_VAR, PULL, PUSH,
 * PUSHPULL, pipelined parts, row pulls and pushes (SYNC aggregation and
 * holds), STEP_INC, the shared-memory opcodes and PULL_SLOT. */
#include "distributed/ps_server_impl.h"

static reply *value_reply_crc(loom_ps_server *s, job *j, psvar *v, uint64_t have, uint32_t flags,
                              const uint32_t *value_crc);
/* A PULL / PUSHPULL reply: {version, pad, value?}; values above 4 KiB are sent in place (zero-copy). */
reply *loom__pss_value_reply(loom_ps_server *s, job *j, psvar *v, uint64_t have, uint32_t flags) {
  return value_reply_crc(s, j, v, have, flags, NULL);
}

/* value_crc (may be NULL): the CRC-32C of the 16-byte prefix {version, 0} then the value, already known. */
static reply *value_reply_crc(loom_ps_server *s, job *j, psvar *v, uint64_t have, uint32_t flags,
                              const uint32_t *value_crc) {
  (void)s;
  int unchanged = have == v->version;
  size_t n = unchanged ? 0 : (size_t)v->numel * 4;
  int inl = n <= 4096;
  reply *r = loom__pss_reply_new(j->c, 16 + (inl ? n : 0));
  if (!r) return NULL;
  uint8_t *out = loom__pss_reply_body(r);
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
  loom__pss_reply_seal(r, &j->h, j->h.opcode, (unchanged ? LOOM_PS_FLAG_UNCHANGED : 0) | flags, 0, 0);
  return r;
}


reply *loom__pss_handle_init(loom_ps_server *s, shard *sh, job *j) {
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
  psvar *old = loom__pss_var_get(s, id);
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
    nv.vb = loom__pss_vbuf_new(nv.numel);
    nv.val = nv.vb ? nv.vb->data : NULL;
    float init[3];
    int nslots = loom__pss_opt_slots(nv.opt, nv.hyper, init);
    float **slot[3] = {&nv.s0, &nv.s1, &nv.s2};
    int slots_ok = 1;
    if (rns && (int)rns != nslots) {
      loom__pss_var_free(&nv);
      return JERR(LOOM_INVALID_ARGUMENT, 0, "INIT_VAR: var %u: %u slot values for an optimizer with %d slots", id, rns,
                  nslots);
    }
    for (int i = 0; i < nslots; i++) {
      slots_ok &= (*slot[i] = loom__pss_alloc_floats(nv.numel, init[i])) != NULL;
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
      loom__pss_var_free(&nv);
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
  return loom__pss_small_reply(j, out, 4, 0);
}

/* The variable a request names (its first u32), or NULL with *err set. */
psvar *loom__pss_req_var(loom_ps_server *s, job *j, uint32_t need, reply **err) {
  if (j->h.body_len < need) {
    *err = JERR(LOOM_INVALID_ARGUMENT, 1, "opcode %u body of %u bytes is truncated (at least %u)", j->h.opcode,
                j->h.body_len, need);
    return NULL;
  }
  uint32_t id = loom__ps_get32(j->body);
  psvar *v = loom__pss_var_get(s, id);
  if (!v) *err = JERR(LOOM_FAILED_PRECONDITION, 0, "variable %u is not initialized on this PS", id);
  return v;
}

/* SYNC: the step of variable id has been applied: answer every push+pull (and PULL_ROWS) waiting for it. */
void loom__pss_wake_waiters(loom_ps_server *s, shard *sh, uint32_t id, psvar *v) {
  for (job **pp = &sh->waiters; *pp;) {
    job *w = *pp;
    if (w->wait_var == id && v->version > w->wait_version) {
      *pp = w->next;
      uint16_t op = w->h.opcode;
      w->out = op == LOOM_PS_PULL_ROWS      ? loom__pss_handle_rows(s, sh, w, 0, 0, NULL)
               : op == LOOM_PS_PULL_ROWS_AT ? loom__pss_handle_rows(s, sh, w, 0, 1, NULL)
               : op == LOOM_PS_PUSHPULL     ? loom__pss_value_reply(s, w, v, UINT64_MAX, 0)
                                            : loom__pss_version_reply(w, v->version, 0); /* PUSH, PUSH_ROWS_AT: the token */
      loom__pss_complete(s, w);
    } else {
      pp = &w->next;
    }
  }
}

static reply *push_reply(loom_ps_server *s, job *j, psvar *v, int pull, uint32_t flags) {
  return pull ? loom__pss_value_reply(s, j, v, UINT64_MAX, flags) : loom__pss_version_reply(j, v->version, flags);
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
reply *loom__pss_handle_push(loom_ps_server *s, shard *sh, job *j, int pull, int *held) {
  reply *err = NULL;
  psvar *v = loom__pss_req_var(s, j, 16, &err);
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
    if (!v->agg && !(v->agg = loom__pss_alloc_floats(v->numel, 0)))
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
  loom_code rc = loom__pss_var_apply_crc(s, v, grad, NULL, 0, fused ? &crc : NULL, st);
  if (rc) {
    reply *r = JERR(rc, 0, "PUSH of var %u: %s", id, loom_status_message(st));
    loom_status_free(st);
    return r;
  }
  loom_status_free(st);
  STAT_ADD(s, updates, 1);
  if (s->o.consistency == LOOM_PS_SYNC) {
    STAT_ADD(s, sync_steps, 1);
    loom__pss_wake_waiters(s, sh, id, v);
  }
  if (fused) return value_reply_crc(s, j, v, UINT64_MAX, 0, &crc);
  return push_reply(s, j, v, pull, 0);
}

/* One part of a pipelined push+pull (ps_parts.h): checked against the connection's open push on this
 * shard thread, applied to its elements, answered with them at once; the last part ends the step. */
reply *loom__pss_handle_part(loom_ps_server *s, shard *sh, job *j) {
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
  psvar *v = loom__pss_var_get(s, p.var_id);
  if (!v) {
    ps->active = 0;
    return JERR(LOOM_FAILED_PRECONDITION, 0, "PUSHPULL_PART: variable %u is not initialized on this PS", p.var_id);
  }
  int last = 0;
  if (loom__ps_part_order(ps, &p, v->numel, &last, why, sizeof why))
    return JERR(LOOM_INVALID_ARGUMENT, 0, "PUSHPULL_PART: %s", why);
  loom_status *st = loom_status_new();
  loom_code rc = loom__pss_var_cow(s, v, st);
  int64_t off = (int64_t)p.offset;
  if (!rc) rc = loom__pss_var_apply_range(v, p.grad, off, p.count, NULL, st); /* the one-frame path's pieces, same bits */
  if (rc) {
    ps->active = 0;
    reply *r = JERR(rc, 0, "PUSHPULL_PART of var %u part %u: %s", p.var_id, p.part, loom_status_message(st));
    loom_status_free(st);
    return r;
  }
  loom_status_free(st);
  if (last) {
    loom__pss_var_step_done(v);
    STAT_ADD(s, updates, 1);
  }
  reply *r = loom__pss_part_reply_new(j->c, 16 + (size_t)p.count * 4);
  if (!r) return NULL;
  uint8_t *out = loom__pss_reply_body(r);
  loom__ps_put64(out, v->version);
  loom__ps_put64(out + 8, p.offset);
  memcpy(out + 16, v->val + off, (size_t)p.count * 4);
  loom__pss_reply_seal(r, &j->h, j->h.opcode, 0, 0, 0);
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
    return loom__pss_version_reply(j, v->version, LOOM_PS_FLAG_STALE);
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
  loom_code rc = loom__pss_var_apply(s, v, sum, uids, nu, st);
  if (rc) {
    reply *r = JERR(rc, 0, "row push of var %u: %s", id, loom_status_message(st));
    loom_status_free(st);
    return r;
  }
  loom_status_free(st);
  STAT_ADD(s, updates, 1);
  STAT_ADD(s, sync_steps, 1);
  loom__pss_wake_waiters(s, sh, id, v);
  return loom__pss_version_reply(j, v->version, 0);
}

/* SYNC: a PULL_ROWS from a connection whose rows are in the step being
 * aggregated waits for that step (answered by loom__pss_wake_waiters). */
int loom__pss_rows_hold(loom_ps_server *s, shard *sh, job *j) {
  if (j->h.body_len < 8) return 0;
  uint32_t id = loom__ps_get32(j->body);
  psvar *v = loom__pss_var_get(s, id);
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

reply *loom__pss_handle_rows(loom_ps_server *s, shard *sh, job *j, int push, int at, int *held) {
  reply *err = NULL;
  psvar *v = loom__pss_req_var(s, j, 8, &err);
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
      return loom__pss_version_reply(j, v->version, LOOM_PS_FLAG_STALE);
    }
    loom_status *st = loom_status_new();
    loom_code rc = loom__pss_var_apply(s, v, (const float *)(j->body + ioff + 8 * n), ids, (int64_t)n, st);
    if (rc) {
      reply *r = JERR(rc, 0, "%s of var %u: %s", what, id, loom_status_message(st));
      loom_status_free(st);
      return r;
    }
    loom_status_free(st);
    STAT_ADD(s, updates, 1);
    return loom__pss_version_reply(j, v->version, 0);
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
  reply *r = loom__pss_reply_new(j->c, 8 + n * rb);
  if (!r) return NULL;
  uint8_t *out = loom__pss_reply_body(r);
  loom__ps_put64(out, v->version);
  for (uint64_t i = 0; i < n; i++) memcpy(out + 8 + i * rb, v->val + ids[i] * v->row, rb);
  loom__pss_reply_seal(r, &j->h, j->h.opcode, 0, 0, 0);
  return r;
}

/* STEP_INC {k} adds k; STEP_INC {k, limit} is a reservation: k is added only when the sum stays <= limit,
 * else nothing changes and the reply (the current step) carries flag REFUSED. */
reply *loom__pss_handle_step_inc(loom_ps_server *s, job *j) {
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
  return loom__pss_small_reply(j, b, 8, flags);
}

/* SHM_PULL / SHM_PUSH / SHM_PUSHPULL {var u32, pad u32, version u64, offset u64} -> {version u64}: the
 * dense bytes in the connection's shared segment (ps_shm.h) at offset, checked against the mapping; the
 * push applies exactly as PUSH / PUSHPULL over TCP (versions, STALE, the duplicate window). */
reply *loom__pss_handle_shm(loom_ps_server *s, shard *sh, job *j, int *held) {
  reply *err = NULL;
  psvar *v = loom__pss_req_var(s, j, LOOM_PS_SHM_REQ_LEN, &err);
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
    if (ver == v->version) return loom__pss_version_reply(j, v->version, LOOM_PS_FLAG_UNCHANGED);
    memcpy(p, v->val, n);
    return loom__pss_version_reply(j, v->version, 0);
  }
  if (j->dup) { /* a re-sent SHM_PUSHPULL applied once already: the current value, nothing applied */
    memcpy(p, v->val, n);
    return loom__pss_version_reply(j, v->version, (j->dup_flags & LOOM_PS_FLAG_STALE) | LOOM_PS_FLAG_DUPLICATE);
  }
  if (s->o.consistency == LOOM_PS_SYNC) /* SHM_ATTACH is refused under SYNC: not reached by a loom client */
    return JERR(LOOM_FAILED_PRECONDITION, 0, "shared-memory push of var %u under SYNC", id);
  /* the gradient is read in place: a client writing it meanwhile spoils only its own numbers */
  reply *r = push_apply(s, sh, j, v, id, ver, p, 0, held);
  if (r && op == LOOM_PS_SHM_PUSHPULL && loom__ps_get32(r->data + 28) == 0) memcpy(p, v->val, n);
  return r;
}

/* A request that applies a gradient to a variable (TCP or shared memory; not a part, ps_parts.h). */
int loom__pss_push_opcode(uint16_t op) {
  return op == LOOM_PS_PUSH || op == LOOM_PS_PUSHPULL || op == LOOM_PS_PUSH_ROWS || op == LOOM_PS_PUSH_ROWS_AT ||
         op == LOOM_PS_SHM_PUSH || op == LOOM_PS_SHM_PUSHPULL;
}

/* PULL_SLOT: an optimizer slot's values and Adam's beta powers. */
reply *loom__pss_handle_pull_slot(loom_ps_server *s, job *j) {
  reply *err = NULL;
  psvar *v = loom__pss_req_var(s, j, 8, &err);
  if (!v) return err;
  uint32_t k = loom__ps_get32(j->body + 4);
  float init[3];
  int ns = loom__pss_opt_slots(v->opt, v->hyper, init);
  if (j->h.body_len != 8 || k >= (uint32_t)ns)
    return JERR(LOOM_INVALID_ARGUMENT, 0, "PULL_SLOT: var %u has %d optimizer slots, slot %u asked (body of %u bytes)",
                loom__ps_get32(j->body), ns, k, j->h.body_len);
  const float *sp[3] = {v->s0, v->s1, v->s2};
  reply *r = loom__pss_reply_new(j->c, 8 + (size_t)v->numel * 4);
  if (!r) return NULL;
  uint8_t *out = loom__pss_reply_body(r);
  memcpy(out, &v->b1p, 4);
  memcpy(out + 4, &v->b2p, 4);
  if (v->numel) memcpy(out + 8, sp[k], (size_t)v->numel * 4);
  loom__pss_reply_seal(r, &j->h, j->h.opcode, 0, 0, 0);
  return r;
}
