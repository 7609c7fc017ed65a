/* distributed/placement.c - deterministic placement of variables on PS
 * tasks, and the cluster client that follows it.
 *
 * Placement depends only on the variable table (in creation order), the
 * number of PS tasks, the strategy and the slice threshold, so every process
 * computes the same table. Variables above the threshold are split along
 * axis 0 into min(num_ps, ceil(bytes / min_slice), rows) contiguous row
 * ranges (TF's min_max_variable_partitioner); each shard is then placed on
 * the least loaded PS (greedy by bytes, ties to the lowest index) or the
 * next one in turn (round robin). The placement hash covers all of it and is
 * checked by every PS at HELLO. */
#include <stdio.h>
#include <string.h>
#include "base/base.h"
#include "distributed/ps_client.h"
#include "distributed/ps_shm.h"
#include "distributed/ps_parts.h"
#include "loom/loom_checkpoint.h"

struct loom_ps_placement {
  int nvars, num_ps, nshards;
  loom_ps_strategy strategy;
  loom_ps_var_spec *vars;
  char **names;
  loom_ps_shard *shards;
  int *first_shard, *nshard_of; /* per variable */
  int64_t *ps_bytes;
  uint64_t hash;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

void loom_ps_placement_free(loom_ps_placement *p) {
  if (!p) return;
  for (int i = 0; i < p->nvars; i++) loom__free(p->names[i]);
  loom__free(p->names);
  loom__free(p->vars);
  loom__free(p->shards);
  loom__free(p->first_shard);
  loom__free(p->nshard_of);
  loom__free(p->ps_bytes);
  loom__free(p);
}

loom_ps_placement *loom_ps_placement_new(int nvars, const loom_ps_var_spec *vars, int num_ps,
                                         loom_ps_strategy strategy, int64_t min_slice_bytes, loom_status *st) {
  if (nvars < 0 || (nvars && !vars) || num_ps < 1 || num_ps > 4096 ||
      (strategy != LOOM_PS_GREEDY_BYTES && strategy != LOOM_PS_ROUND_ROBIN)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "placement: %d variables, %d PS tasks, strategy %d", nvars, num_ps,
                    (int)strategy);
    return NULL;
  }
  if (min_slice_bytes == 0) min_slice_bytes = 256 << 10;
  loom_ps_placement *p = loom__calloc(1, sizeof *p);
  if (!p) goto oom;
  p->nvars = nvars;
  p->num_ps = num_ps;
  p->strategy = strategy;
  p->vars = loom__calloc((size_t)nvars + 1, sizeof *p->vars);
  p->names = loom__calloc((size_t)nvars + 1, sizeof *p->names);
  p->first_shard = loom__calloc((size_t)nvars + 1, sizeof(int));
  p->nshard_of = loom__calloc((size_t)nvars + 1, sizeof(int));
  p->ps_bytes = loom__calloc((size_t)num_ps, sizeof(int64_t));
  if (!p->vars || !p->names || !p->first_shard || !p->nshard_of || !p->ps_bytes) goto oom;
  /* shard counts */
  int64_t total = 0;
  for (int i = 0; i < nvars; i++) {
    const loom_ps_var_spec *v = &vars[i];
    if (!v->name || v->ndim < 0 || v->ndim > LOOM_MAX_DIMS) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "placement: variable %d (%s) has rank %d", i,
                      v->name ? v->name : "unnamed", v->ndim);
      loom_ps_placement_free(p);
      return NULL;
    }
    for (int j = 0; j < i; j++)
      if (!strcmp(vars[j].name, v->name)) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "placement: variable '%s' appears twice", v->name);
        loom_ps_placement_free(p);
        return NULL;
      }
    p->vars[i] = *v;
    p->names[i] = loom__strdup(v->name);
    if (!p->names[i]) goto oom;
    p->vars[i].name = p->names[i];
    int64_t numel = loom__numel(v->ndim, v->dims), bytes = numel * 4;
    int64_t rows = v->ndim ? v->dims[0] : 1;
    int64_t k = 1;
    if (v->sparse && v->ndim >= 1) { /* rows spread by row mod num_ps */
      k = num_ps < rows ? num_ps : rows;
      if (k < 1) k = 1;
    } else if (min_slice_bytes > 0 && bytes > min_slice_bytes && v->ndim >= 1) {
      k = (bytes + min_slice_bytes - 1) / min_slice_bytes;
      if (k > num_ps) k = num_ps;
      if (k > rows) k = rows;
      if (k < 1) k = 1;
    }
    p->first_shard[i] = (int)total;
    p->nshard_of[i] = (int)k;
    total += k;
  }
  p->nshards = (int)total;
  p->shards = loom__calloc((size_t)total + 1, sizeof *p->shards);
  if (!p->shards) goto oom;
  uint64_t h = 0xcbf29ce484222325ull;
  int32_t hdr[3] = {num_ps, (int32_t)strategy, nvars};
  h = fnv(h, hdr, sizeof hdr);
  h = fnv(h, &min_slice_bytes, sizeof min_slice_bytes);
  int rr = 0;
  for (int i = 0; i < nvars; i++) {
    const loom_ps_var_spec *v = &p->vars[i];
    h = fnv(h, v->name, strlen(v->name) + 1);
    h = fnv(h, &v->ndim, sizeof v->ndim);
    h = fnv(h, v->dims, sizeof(int64_t) * (size_t)v->ndim);
    int64_t numel = loom__numel(v->ndim, v->dims);
    int64_t rows = v->ndim ? v->dims[0] : 1, row = rows > 0 ? numel / rows : 0;
    int k = p->nshard_of[i];
    int mod = v->sparse && k > 1;
    if (v->sparse) h = fnv(h, "sparse", 6);
    int64_t base = rows / k, extra = rows % k, r0 = 0;
    for (int j = 0; j < k; j++) {
      loom_ps_shard *s = &p->shards[p->first_shard[i] + j];
      int64_t nr = base + (j < extra ? 1 : 0); /* also the row count of shard j under row mod k */
      s->var = i;
      s->id = (uint32_t)(p->first_shard[i] + j);
      s->stride = mod ? k : 1;
      s->row_begin = mod ? j : r0;
      s->row_end = mod ? rows : r0 + nr;
      s->numel = k == 1 ? numel : nr * row;
      s->bytes = s->numel * 4;
      r0 += nr;
      int best = 0;
      if (mod) {
        best = j; /* shard j on PS j: the rows of a batch land evenly */
      } else if (strategy == LOOM_PS_ROUND_ROBIN) {
        best = rr++ % num_ps;
      } else {
        for (int q = 1; q < num_ps; q++)
          if (p->ps_bytes[q] < p->ps_bytes[best]) best = q;
      }
      s->ps = best;
      p->ps_bytes[best] += s->bytes;
      int64_t hv[3] = {s->ps, s->row_begin, s->row_end};
      h = fnv(h, hv, sizeof hv);
    }
  }
  p->hash = h;
  return p;
oom:
  loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "placement: out of memory");
  loom_ps_placement_free(p);
  return NULL;
}

int loom_ps_placement_num_vars(const loom_ps_placement *p) { return p ? p->nvars : 0; }
const loom_ps_var_spec *loom_ps_placement_var(const loom_ps_placement *p, int i) {
  return p && i >= 0 && i < p->nvars ? &p->vars[i] : NULL;
}
uint64_t loom_ps_placement_hash(const loom_ps_placement *p) { return p ? p->hash : 0; }
int loom_ps_placement_num_shards(const loom_ps_placement *p) { return p ? p->nshards : 0; }
const loom_ps_shard *loom_ps_placement_shard(const loom_ps_placement *p, int i) {
  return p && i >= 0 && i < p->nshards ? &p->shards[i] : NULL;
}
int64_t loom_ps_placement_ps_bytes(const loom_ps_placement *p, int ps) {
  return p && ps >= 0 && ps < p->num_ps ? p->ps_bytes[ps] : 0;
}

double loom_ps_placement_balance(const loom_ps_placement *p) {
  if (!p) return 0;
  int64_t mx = 0, sum = 0;
  for (int i = 0; i < p->num_ps; i++) {
    sum += p->ps_bytes[i];
    if (p->ps_bytes[i] > mx) mx = p->ps_bytes[i];
  }
  return sum ? (double)mx * p->num_ps / (double)sum : 1.0;
}

void loom_ps_placement_log(const loom_ps_placement *p) {
  if (!p) return;
  loom__log(LOOM_LOG_INFO, "placement %016llx: %d variables, %d shards on %d PS (%s)", (unsigned long long)p->hash,
            p->nvars, p->nshards, p->num_ps, p->strategy == LOOM_PS_ROUND_ROBIN ? "round robin" : "greedy by bytes");
  for (int i = 0; i < p->nshards; i++) {
    const loom_ps_shard *s = &p->shards[i];
    if (s->stride > 1)
      loom__log(LOOM_LOG_INFO, "  %-40s rows = %lld mod %d -> ps %d (%lld bytes)", p->vars[s->var].name,
                (long long)s->row_begin, s->stride, s->ps, (long long)s->bytes);
    else
      loom__log(LOOM_LOG_INFO, "  %-40s rows [%lld, %lld) -> ps %d (%lld bytes)", p->vars[s->var].name,
                (long long)s->row_begin, (long long)s->row_end, s->ps, (long long)s->bytes);
  }
  for (int q = 0; q < p->num_ps; q++)
    loom__log(LOOM_LOG_INFO, "  ps %d: %lld bytes", q, (long long)p->ps_bytes[q]);
  loom__log(LOOM_LOG_INFO, "  max/mean bytes per PS: %.3f", loom_ps_placement_balance(p));
}

/* ---------------- cluster client ---------------- */

struct loom_ps_cluster {
  const loom_ps_placement *p;
  loom_ps_client **c;
  uint64_t *version; /* per shard: what the last pull delivered */
  int64_t dropped;   /* pushes the PS tasks dropped (stale or late) */
  float *scratch;    /* rows of a row-mod shard gathered / received (grown, never shrunk) */
  int64_t scratch_cap;
  uint8_t *got;      /* per shard: its reply of the current exchange has been read already */
  int *next;         /* per PS: the oldest shard whose reply may be pending */
  int64_t *owed;     /* per PS: reply bytes of the current exchange not read yet */
  /* pipelined shards (ps_parts.h) with staging on (loom__ps_cluster_stage_parts): their new values land
   * here during the send and are copied into the caller's buffers by the receive half */
  int stage_on;
  float *stage;
  int64_t stage_cap;
  int64_t *stage_off; /* per shard: its place in stage (-1: not staged this exchange) */
  /* send_piped's lists (per shard: items and their shards; per PS: batches), made at its first use */
  loom_ps_parts_item *piped_it;
  int *piped_idx;
  loom_ps_parts_batch *piped_b;
};

void loom__ps_cluster_stage_parts(loom_ps_cluster *c, int on) { c->stage_on = on; }

/* Reply bytes a connection may owe before the cluster client reads some of
 * them while still sending: a PS stops reading a connection that leaves 64
 * MiB of replies unread, and a client blocked sending would then wait on it. */
#define OWED_MAX ((int64_t)16 << 20)

static float *scratch(loom_ps_cluster *c, int64_t n, loom_status *st) {
  if (n > c->scratch_cap) {
    float *p = loom__realloc(c->scratch, (size_t)n * sizeof(float));
    if (!p) {
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cluster client: %lld floats of scratch", (long long)n);
      return NULL;
    }
    c->scratch = p;
    c->scratch_cap = n;
  }
  return c->scratch;
}

/* Rows of shard s (stride k > 1: rows row_begin, row_begin + k, ...) between a whole variable and a packed buffer. */
static void mod_rows(const loom_ps_shard *s, int64_t row, float *whole, float *packed, int to_packed) {
  int64_t n = s->numel / (row > 0 ? row : 1);
  for (int64_t i = 0; i < n; i++) {
    float *w = whole + (s->row_begin + i * s->stride) * row, *q = packed + i * row;
    if (to_packed) memcpy(q, w, (size_t)row * sizeof(float));
    else memcpy(w, q, (size_t)row * sizeof(float));
  }
}

void loom_ps_cluster_free(loom_ps_cluster *c) {
  if (!c) return;
  for (int i = 0; c->c && i < c->p->num_ps; i++) loom_ps_client_free(c->c[i]);
  loom__free(c->c);
  loom__free(c->version);
  loom__free(c->scratch);
  loom__free(c->stage);
  loom__free(c->stage_off);
  loom__free(c->piped_it);
  loom__free(c->piped_idx);
  loom__free(c->piped_b);
  loom__free(c->got);
  loom__free(c->next);
  loom__free(c->owed);
  loom__free(c);
}

/* A client for one PS task of placement p: the caller's options (NULL:
 * defaults) with that task's address and p's hash and counts for HELLO. */
static loom_ps_client *connect_ps(const loom_ps_placement *p, const char *host, int port,
                                  const loom_ps_connect_options *o, loom_status *st) {
  loom_ps_connect_options co = loom_ps_connect_options_default();
  if (o) co = *o;
  co.host = host;
  co.port = port;
  co.placement_hash = p->hash;
  co.num_ps = p->num_ps;
  co.num_vars = p->nvars;
  return loom_ps_connect(&co, st);
}

/* Same-host shared memory (ps_shm.h): a PS at a local address is offered a segment with a slot for each
 * dense shard it holds; a refusal (logged) leaves that PS on TCP. Sparse (row mod) shards travel as rows. */
static void shm_offer(loom_ps_cluster *c, int q) {
  const loom_ps_placement *p = c->p;
  if (!loom__ps_shm_host_is_local(c->c[q]->host)) return;
  uint32_t *ids = loom__calloc((size_t)p->nshards + 1, sizeof *ids);
  int64_t *numels = loom__calloc((size_t)p->nshards + 1, sizeof *numels);
  uint32_t n = 0;
  for (int i = 0; ids && numels && i < p->nshards; i++)
    if (p->shards[i].ps == q && !p->vars[p->shards[i].var].sparse) {
      ids[n] = p->shards[i].id;
      numels[n++] = p->shards[i].numel;
    }
  if (ids && numels && n) {
    loom_status *st = loom_status_new();
    if (loom__ps_shm_attach(c->c[q], n, ids, numels, st))
      loom__log(LOOM_LOG_INFO, "ps %s: shared memory not used (TCP): %s", c->c[q]->addr, loom_status_message(st));
    loom_status_free(st);
  }
  loom__free(ids);
  loom__free(numels);
}

loom_ps_cluster *loom_ps_cluster_connect(const loom_ps_placement *p, const char *const *hosts, const int *ports,
                                         const loom_ps_connect_options *o, loom_status *st) {
  if (!p || !hosts || !ports) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_cluster_connect: NULL placement or addresses");
    return NULL;
  }
  loom_ps_cluster *c = loom__calloc(1, sizeof *c);
  if (!c) return NULL;
  c->p = p;
  c->c = loom__calloc((size_t)p->num_ps, sizeof *c->c);
  c->version = loom__malloc(((size_t)p->nshards + 1) * sizeof(uint64_t));
  c->got = loom__calloc((size_t)p->nshards + 1, 1);
  c->next = loom__calloc((size_t)p->num_ps, sizeof(int));
  c->owed = loom__calloc((size_t)p->num_ps, sizeof(int64_t));
  if (!c->got || !c->next || !c->owed) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cluster client: out of memory");
    loom_ps_cluster_free(c);
    return NULL;
  }
  if (!c->c || !c->version) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cluster client: out of memory");
    loom_ps_cluster_free(c);
    return NULL;
  }
  for (int i = 0; i < p->nshards; i++) c->version[i] = UINT64_MAX;
  for (int i = 0; i < p->num_ps; i++) {
    c->c[i] = connect_ps(p, hosts[i], ports[i], o, st);
    if (!c->c[i]) {
      loom_ps_cluster_free(c);
      return NULL;
    }
    if (!o || o->shm == 0) shm_offer(c, i);
  }
  return c;
}

int loom__ps_cluster_shm_attached(const loom_ps_cluster *c) {
  int n = 0;
  for (int i = 0; c && i < c->p->num_ps; i++) n += c->c[i]->shm != NULL;
  return n;
}

int64_t loom_ps_cluster_dropped(const loom_ps_cluster *c) { return c ? c->dropped : 0; }

/* SYNC: STEP_INC {0} to every PS (all in flight together); each answers the least version of its
 * variables (the aggregated steps it has applied to all of them); the job's global step is the least
 * of those: the steps applied to every variable of the job. */
loom_code loom_ps_cluster_sync_step(loom_ps_cluster *c, int64_t *global_step, loom_status *st) {
  if (!c || !global_step) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_cluster_sync_step: NULL argument");
  uint8_t zero[8] = {0};
  int np = c->p->num_ps, sent = 0;
  loom_code rc = LOOM_OK;
  for (; sent < np && !rc; sent++) rc = loom__ps_send(c->c[sent], LOOM_PS_STEP_INC, zero, 8, NULL, 0, NULL, 0, st);
  if (rc) sent--; /* the failed one owes no reply */
  int64_t m = INT64_MAX;
  for (int i = 0; i < sent; i++) { /* every reply sent for is read, even after a failure, to keep the connections in step */
    loom_ps_hdr h;
    uint8_t out[8];
    loom_status *s2 = rc ? loom_status_new() : st;
    loom_code r = loom__ps_recv_hdr(c->c[i], LOOM_PS_STEP_INC, &h, s2);
    if (!r && h.body_len != 8) r = loom_status_set(s2, LOOM_DATA_LOSS, "STEP_INC reply of %u bytes", h.body_len);
    if (!r) r = loom__ps_recv_body(c->c[i], out, 8, s2);
    if (!r) r = loom__ps_recv_end(c->c[i], &h, s2);
    if (s2 != st) loom_status_free(s2);
    if (!r) {
      int64_t g = (int64_t)loom__ps_get64(out);
      if (g < m) m = g;
    } else if (!rc) {
      rc = r;
    }
  }
  if (!rc) *global_step = m == INT64_MAX ? 0 : m;
  return rc;
}
void loom__ps_cluster_count_dropped(loom_ps_cluster *c, int64_t n) { c->dropped += n; }
uint64_t loom__ps_cluster_version(const loom_ps_cluster *c, int shard) { return c->version[shard]; }

void loom_ps_cluster_bytes(const loom_ps_cluster *c, int64_t *sent, int64_t *received) {
  int64_t a = 0, b = 0;
  for (int i = 0; c && i < c->p->num_ps; i++) {
    int64_t x, y;
    loom_ps_client_bytes(c->c[i], &x, &y);
    a += x;
    b += y;
  }
  if (sent) *sent = a;
  if (received) *received = b;
}

loom_ps_client *loom_ps_cluster_client(loom_ps_cluster *c, int ps) {
  return c && ps >= 0 && ps < c->p->num_ps ? c->c[ps] : NULL;
}

static int64_t row_elems(const loom_ps_var_spec *v) {
  int64_t numel = loom__numel(v->ndim, v->dims), rows = v->ndim ? v->dims[0] : 1;
  return rows > 0 ? numel / rows : 0;
}

/* Creates shard i of p on pc (the connection to its PS) from the whole variable's value: with update
 * rule r (NULL: optimizer opt with hyper), the shard's piece of each of r's slot values with it. A
 * row-mod shard's rows are packed (the value's, then each slot's). */
static loom_code shard_init(loom_ps_client *pc, const loom_ps_placement *p, int i, loom_ps_optimizer opt,
                            const float *hyper, const loom_ps_update_rule *r, const float *value, loom_status *st) {
  const loom_ps_shard *s = &p->shards[i];
  const loom_ps_var_spec *v = &p->vars[s->var];
  int64_t row = row_elems(v), dims[LOOM_MAX_DIMS];
  memcpy(dims, v->dims, sizeof dims);
  if (v->ndim) dims[0] = row > 0 ? s->numel / row : s->row_end - s->row_begin;
  const float *src = value + s->row_begin * row;
  int ns = r ? r->nslot_values : 0;
  if (ns < 0 || ns > 3)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "init_var: %d slot values (0..3)", ns);
  float *packed = NULL; /* stride > 1: the shard's rows of the value then of each slot, packed */
  if (s->stride > 1) {
    packed = loom__malloc(sizeof(float) * (size_t)(s->numel ? s->numel : 1) * (size_t)(1 + ns));
    if (!packed) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "init_var: %lld floats", (long long)s->numel);
    mod_rows(s, row, (float *)value, packed, 1);
    for (int k = 0; k < ns; k++) mod_rows(s, row, (float *)r->slot_values[k], packed + (k + 1) * s->numel, 1);
    src = packed;
  }
  loom_ps_update_rule rs;
  const float *sv[3];
  if (r) { /* the shard's piece of each slot */
    rs = *r;
    for (int k = 0; k < ns; k++) sv[k] = packed ? packed + (k + 1) * s->numel : r->slot_values[k] + s->row_begin * row;
    rs.slot_values = ns ? sv : NULL;
  }
  loom_code rc = r ? loom_ps_init_var_rule(pc, s->id, v->ndim, dims, &rs, src, NULL, st)
                   : loom_ps_init_var(pc, s->id, v->ndim, dims, opt, hyper, src, NULL, st);
  loom__free(packed);
  return rc;
}

static loom_code cluster_init_var(loom_ps_cluster *c, int var, loom_ps_optimizer opt, const float *hyper,
                                  const loom_ps_update_rule *r, const float *value, loom_status *st);

loom_code loom_ps_cluster_init_var(loom_ps_cluster *c, int var, loom_ps_optimizer opt, const float *hyper,
                                   const float *value, loom_status *st) {
  return cluster_init_var(c, var, opt, hyper, NULL, value, st);
}

loom_code loom_ps_cluster_init_var_rule(loom_ps_cluster *c, int var, const loom_ps_update_rule *r, const float *value,
                                        loom_status *st) {
  if (!r) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_cluster_init_var_rule: rule is NULL");
  return cluster_init_var(c, var, r->optimizer, r->hyper, r, value, st);
}

static loom_code cluster_init_var(loom_ps_cluster *c, int var, loom_ps_optimizer opt, const float *hyper,
                                  const loom_ps_update_rule *r, const float *value, loom_status *st) {
  const loom_ps_placement *p = c->p;
  if (var < 0 || var >= p->nvars) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "variable %d out of range", var);
  for (int j = 0; j < p->nshard_of[var]; j++) {
    int i = p->first_shard[var] + j;
    loom_code rc = shard_init(c->c[p->shards[i].ps], p, i, opt, hyper, r, value, st);
    if (rc) return rc;
  }
  return LOOM_OK;
}

loom_code loom_ps_cluster_pull_slot(loom_ps_cluster *c, int var, int slot, float *out, float *beta1_power,
                                    float *beta2_power, loom_status *st) {
  const loom_ps_placement *p = c->p;
  if (var < 0 || var >= p->nvars || slot < 0 || slot > 2 || !out)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "pull_slot: variable %d, slot %d", var, slot);
  const loom_ps_var_spec *v = &p->vars[var];
  int64_t row = row_elems(v);
  for (int j = 0; j < p->nshard_of[var]; j++) {
    const loom_ps_shard *s = &p->shards[p->first_shard[var] + j];
    loom_ps_client *cl = c->c[s->ps];
    uint8_t fixed[8];
    loom__ps_put32(fixed, s->id);
    loom__ps_put32(fixed + 4, (uint32_t)slot);
    float *dst = s->stride > 1 ? scratch(c, s->numel, st) : out + s->row_begin * row;
    if (!dst) return LOOM_RESOURCE_EXHAUSTED;
    loom_ps_hdr h;
    uint8_t b[8];
    loom_code rc = loom__ps_send(cl, LOOM_PS_PULL_SLOT, fixed, 8, NULL, 0, NULL, 0, st);
    if (!rc) rc = loom__ps_recv_hdr(cl, LOOM_PS_PULL_SLOT, &h, st);
    if (!rc && h.body_len != 8 + (uint64_t)s->numel * 4)
      rc = loom_status_set(st, LOOM_DATA_LOSS, "PULL_SLOT reply of %u bytes for %lld floats", h.body_len,
                           (long long)s->numel);
    if (!rc) rc = loom__ps_recv_body(cl, b, 8, st);
    if (!rc && s->numel) rc = loom__ps_recv_body(cl, dst, (size_t)s->numel * 4, st);
    if (!rc) rc = loom__ps_recv_end(cl, &h, st);
    if (rc) return rc;
    if (s->stride > 1) mod_rows(s, row, out, dst, 0);
    if (j == 0 && beta1_power) memcpy(beta1_power, b, 4);
    if (j == 0 && beta2_power) memcpy(beta2_power, b + 4, 4);
  }
  return LOOM_OK;
}

loom_code loom__ps_shard_init(loom_ps_client *pc, const loom_ps_placement *p, int shard, loom_ps_optimizer opt,
                              const float *hyper, const loom_ps_update_rule *r, const float *value, loom_status *st) {
  if (!p || shard < 0 || shard >= p->nshards)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "shard %d out of range", shard);
  return shard_init(pc, p, shard, opt, hyper, r, value, st);
}

/* Every shard's request goes out before any reply is read: the PS tasks
 * work in parallel and each connection's replies come back in order. A
 * variable whose values[var] is NULL is left out (the worker's sparse
 * variables travel as rows). The send and receive halves are separate so
 * that the worker can put its row requests on the same round trip. */
static loom_code recv_shard(loom_ps_cluster *c, int i, const float *const *grads, float *const *values,
                            loom_status *st) {
  const loom_ps_placement *p = c->p;
  const loom_ps_shard *s = &p->shards[i];
  int64_t row = row_elems(&p->vars[s->var]), off = s->row_begin * row;
  uint16_t op = grads && grads[s->var] ? LOOM_PS_PUSHPULL : LOOM_PS_PULL;
  float *dst = values[s->var] + off;
  if (s->stride > 1 && !(dst = scratch(c, s->numel, st))) return LOOM_RESOURCE_EXHAUSTED;
  int changed = 0;
  const float *slot = loom__ps_shm_slot(c->c[s->ps], s->id, s->numel, NULL);
  loom_code rc;
  if (slot) { /* shared memory: a small reply; the value is in the slot */
    op = op == LOOM_PS_PUSHPULL ? LOOM_PS_SHM_PUSHPULL : LOOM_PS_SHM_PULL;
    rc = loom__ps_shm_recv(c->c[s->ps], op, &c->version[i], &changed, st);
    if (!rc && changed && s->numel) memcpy(dst, slot, (size_t)s->numel * 4);
  } else {
    rc = loom__ps_value_recv(c->c[s->ps], op, dst, s->numel, &c->version[i], &changed, st);
  }
  if (rc) return rc;
  if (s->stride > 1 && changed) mod_rows(s, row, values[s->var], dst, 0);
  if (c->c[s->ps]->hdr.flags & LOOM_PS_FLAG_STALE) c->dropped++;
  c->got[i] = 1;
  if (!slot) c->owed[s->ps] -= s->numel * 4;
  return LOOM_OK;
}

/* Reads the oldest reply PS q owes (shards are sent in index order). */
static loom_code recv_oldest(loom_ps_cluster *c, int q, int upto, const float *const *grads, float *const *values,
                             loom_status *st) {
  const loom_ps_placement *p = c->p;
  for (int i = c->next[q]; i < upto; i++) {
    const loom_ps_shard *s = &p->shards[i];
    if (s->ps != q || !values[s->var] || c->got[i]) continue;
    c->next[q] = i + 1;
    return recv_shard(c, i, grads, values, st);
  }
  c->owed[q] = 0;
  return LOOM_OK;
}

/* 1 when shard s, pushed (push+pull), goes as parts (ps_parts.h): dense, large enough, a PS that takes
 * parts, and no shared-memory slot (shared memory goes first: such a shard is exchanged through it). */
static int shard_piped(const loom_ps_cluster *c, const loom_ps_shard *s, int push) {
  return push && s->stride <= 1 && loom__ps_parts_elems(c->c[s->ps], s->numel) > 0 &&
         !loom__ps_shm_slot(c->c[s->ps], s->id, s->numel, NULL);
}

/* 1 when loom__ps_cluster_send with these values never reads a reply
 * (no PS is owed more than OWED_MAX bytes of one step), so it may run on
 * another thread while the values' buffers are in use. */
int loom__ps_cluster_send_is_write_only(const loom_ps_cluster *c, float *const *values) {
  const loom_ps_placement *p = c->p;
  for (int q = 0; q < p->num_ps; q++) {
    int64_t owed = 0;
    for (int i = 0; i < p->nshards; i++)
      if (p->shards[i].ps == q && values[p->shards[i].var]) owed += p->shards[i].numel * 4;
    if (owed > OWED_MAX) return 0;
    for (int i = 0; i < p->nshards && !c->stage_on; i++) /* a pipelined push+pull writes values while sending */
      if (p->shards[i].ps == q && values[p->shards[i].var] && shard_piped(c, &p->shards[i], 1)) return 0;
  }
  return 1;
}

/* The pipelined shards (ps_parts.h): each PS's one-frame replies first (replies come in request
 * order), then all its large shards as one stream of parts, the streams of all PS tasks polled
 * together, each part's reply read while the next parts are written; the exchange of these shards is
 * complete when this returns. */
static loom_code send_piped(loom_ps_cluster *c, const float *const *grads, float *const *values, loom_status *st) {
  const loom_ps_placement *p = c->p;
  loom_code rc = LOOM_OK;
  if (!c->piped_it) c->piped_it = loom__calloc((size_t)p->nshards, sizeof *c->piped_it);
  if (!c->piped_idx) c->piped_idx = loom__calloc((size_t)p->nshards, sizeof *c->piped_idx);
  if (!c->piped_b) c->piped_b = loom__calloc((size_t)p->num_ps, sizeof *c->piped_b);
  loom_ps_parts_item *it = c->piped_it;
  int *idx = c->piped_idx;
  loom_ps_parts_batch *b = c->piped_b;
  if (!it || !idx || !b) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cluster client: no memory for %d items", p->nshards);
  int64_t staged = 0; /* staging: the values' buffers may be in use while this runs (overlap_comm's sender thread) */
  if (!rc && c->stage_on && !c->stage_off && !(c->stage_off = loom__calloc((size_t)p->nshards, sizeof *c->stage_off)))
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cluster client: no memory for staging");
  if (!rc && c->stage_on) {
    for (int i = 0; i < p->nshards; i++) {
      const loom_ps_shard *s = &p->shards[i];
      c->stage_off[i] = -1;
      if (values[s->var] && shard_piped(c, s, grads && grads[s->var])) c->stage_off[i] = staged, staged += s->numel;
    }
    if (staged > c->stage_cap) {
      float *q = loom__realloc(c->stage, (size_t)staged * sizeof(float));
      if (!q) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cluster client: %lld floats of staging", (long long)staged);
      else c->stage = q, c->stage_cap = staged;
    }
  }
  int n = 0, nb = 0;
  for (int q = 0; q < p->num_ps && !rc; q++) {
    int first = n;
    for (int i = 0; i < p->nshards; i++) {
      const loom_ps_shard *s = &p->shards[i];
      if (s->ps != q || !values[s->var] || !shard_piped(c, s, grads && grads[s->var])) continue;
      int64_t off = s->row_begin * row_elems(&p->vars[s->var]);
      memset(&it[n], 0, sizeof it[n]);
      it[n].var_id = s->id;
      it[n].read_version = c->version[i];
      it[n].grad = grads[s->var] + off;
      it[n].out = c->stage_on ? c->stage + c->stage_off[i] : values[s->var] + off;
      it[n].numel = s->numel;
      idx[n++] = i;
    }
    if (n == first) continue;
    while (!rc && c->owed[q] > 0) rc = recv_oldest(c, q, p->nshards, grads, values, st);
    b[nb++] = (loom_ps_parts_batch){c->c[q], it + first, n - first};
  }
  if (!rc && nb) rc = loom__ps_pushpull_parts_multi(b, nb, st);
  for (int k = 0; k < n && !rc; k++) {
    c->version[idx[k]] = it[k].version;
    if (it[k].stale) c->dropped++;
  }
  return rc;
}

loom_code loom__ps_cluster_send(loom_ps_cluster *c, const float *const *grads, float *const *values,
                                loom_status *st) {
  const loom_ps_placement *p = c->p;
  int npiped = 0;
  memset(c->got, 0, (size_t)p->nshards);
  for (int q = 0; q < p->num_ps; q++) c->next[q] = 0, c->owed[q] = 0;
  for (int i = 0; i < p->nshards; i++) {
    const loom_ps_shard *s = &p->shards[i];
    if (!values[s->var]) continue;
    int64_t row = row_elems(&p->vars[s->var]), off = s->row_begin * row;
    loom_code rc = LOOM_OK;
    uint64_t soff;
    float *slot = loom__ps_shm_slot(c->c[s->ps], s->id, s->numel, &soff);
    if (slot) { /* shared memory: the gradient into the slot, a 24-byte request on TCP */
      int push = grads && grads[s->var];
      if (push && s->numel) memcpy(slot, grads[s->var] + off, (size_t)s->numel * 4);
      rc = loom__ps_shm_send(c->c[s->ps], push ? LOOM_PS_SHM_PUSHPULL : LOOM_PS_SHM_PULL, s->id, c->version[i], soff,
                             st);
      if (rc) return rc;
      continue;
    }
    if (shard_piped(c, s, grads && grads[s->var])) {
      c->got[i] = 1; /* pipelined below (ps_parts.h), after this PS's one-frame replies */
      npiped++;
      continue;
    }
    /* a large step: read some replies of this PS before sending more (the PS would stop reading us) */
    while (!rc && c->owed[s->ps] > 0 && c->owed[s->ps] + s->numel * 4 > OWED_MAX)
      rc = recv_oldest(c, s->ps, i, grads, values, st);
    if (rc) return rc;
    if (grads && grads[s->var]) {
      const float *g = grads[s->var] + off;
      if (s->stride > 1) { /* gathered; the send is complete when it returns, so one scratch serves all */
        float *q = scratch(c, s->numel, st);
        if (!q) return LOOM_RESOURCE_EXHAUSTED;
        mod_rows(s, row, (float *)grads[s->var], q, 1);
        g = q;
      }
      rc = loom__ps_push_send(c->c[s->ps], LOOM_PS_PUSHPULL, s->id, c->version[i], g, s->numel, st);
    } else {
      rc = loom__ps_pull_send(c->c[s->ps], s->id, c->version[i], st);
    }
    if (rc) return rc;
    c->owed[s->ps] += s->numel * 4;
  }
  return npiped ? send_piped(c, grads, values, st) : LOOM_OK;
}

loom_code loom__ps_cluster_recv(loom_ps_cluster *c, const float *const *grads, float *const *values,
                                loom_status *st) {
  const loom_ps_placement *p = c->p;
  if (c->stage_on && c->stage_off)
    for (int i = 0; i < p->nshards; i++) { /* the pipelined shards' values, staged by the send half */
      const loom_ps_shard *s = &p->shards[i];
      if (c->stage_off[i] < 0 || !values[s->var]) continue;
      memcpy(values[s->var] + s->row_begin * row_elems(&p->vars[s->var]), c->stage + c->stage_off[i],
             (size_t)s->numel * sizeof(float));
      c->stage_off[i] = -1;
    }
  for (int i = 0; i < p->nshards; i++) {
    const loom_ps_shard *s = &p->shards[i];
    if (!values[s->var] || c->got[i]) continue;
    loom_code rc = recv_shard(c, i, grads, values, st);
    if (rc) return rc;
  }
  return LOOM_OK;
}

static loom_code exchange(loom_ps_cluster *c, const float *const *grads, float *const *values, loom_status *st) {
  loom_code rc = loom__ps_cluster_send(c, grads, values, st);
  return rc ? rc : loom__ps_cluster_recv(c, grads, values, st);
}

loom_code loom_ps_cluster_pull(loom_ps_cluster *c, float *const *values, loom_status *st) {
  return exchange(c, NULL, values, st);
}

loom_code loom_ps_cluster_pushpull(loom_ps_cluster *c, const float *const *grads, float *const *values,
                                   loom_status *st) {
  return exchange(c, grads, values, st);
}

/* ---- checkpoints ---- */

static loom_code ckpt_all(loom_ps_cluster *c, uint16_t op, const char *dir, int64_t step, uint64_t *digest,
                          loom_status *st) {
  size_t len = strlen(dir);
  if (len > 256) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint dir '%.40s...' is too long", dir);
  uint8_t fixed[16];
  loom__ps_put64(fixed, (uint64_t)step);
  loom__ps_put32(fixed + 8, (uint32_t)len);
  loom__ps_put32(fixed + 12, 0);
  for (int i = 0; i < c->p->num_ps; i++) {
    loom_code rc = loom__ps_send(c->c[i], op, fixed, 16, dir, len, NULL, 0, st);
    if (rc) return rc;
  }
  loom_code first = LOOM_OK;
  for (int i = 0; i < c->p->num_ps; i++) { /* read every reply (keeps the connections in step) */
    loom_ps_hdr h;
    loom_status *s2 = first ? loom_status_new() : st;
    loom_code rc = loom__ps_recv_hdr(c->c[i], op, &h, s2);
    uint8_t out[16];
    if (!rc && h.body_len != 16) rc = loom_status_set(s2, LOOM_DATA_LOSS, "checkpoint reply of %u bytes", h.body_len);
    if (!rc) rc = loom__ps_recv_body(c->c[i], out, 16, s2);
    if (!rc) rc = loom__ps_recv_end(c->c[i], &h, s2);
    if (!rc) digest[i] = loom__ps_get64(out + 8);
    if (s2 != st) loom_status_free(s2);
    if (rc && !first) first = rc;
  }
  for (int i = 0; i < c->p->nshards; i++) c->version[i] = UINT64_MAX;
  return first;
}

static loom_code write_atomic(const char *path, const char *text, loom_status *st) {
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return loom_status_set(st, LOOM_UNAVAILABLE, "cannot write %s", tmp);
  int bad = fputs(text, f) < 0;
  bad |= fflush(f) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    remove(tmp);
    return loom_status_set(st, LOOM_UNAVAILABLE, "cannot write %s", path);
  }
  return LOOM_OK;
}

/* The manifest <dir>/model.ckpt-<step>: the set of shards and their digests. */
static loom_code manifest_path(char *buf, size_t cap, const char *model_dir, const char *dir, int64_t step) {
  int n = snprintf(buf, cap, "%s%s%s/model.ckpt-%lld", model_dir, *dir ? "/" : "", dir, (long long)step);
  return n > 0 && (size_t)n < cap ? LOOM_OK : LOOM_INVALID_ARGUMENT;
}

loom_code loom_ps_cluster_save(loom_ps_cluster *c, const char *model_dir, const char *dir, int64_t step,
                               loom_status *st) {
  if (!c || !model_dir || !dir || step < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_cluster_save: NULL argument or step < 0");
  int np = c->p->num_ps;
  uint64_t *dg = loom__calloc((size_t)np, sizeof *dg);
  char *text = loom__malloc(128 + 64 * (size_t)np);
  if (!dg || !text) {
    loom__free(dg);
    loom__free(text);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
  }
  loom_code rc = ckpt_all(c, LOOM_PS_SAVE, dir, step, dg, st);
  char path[1100];
  if (!rc && manifest_path(path, sizeof path, model_dir, dir, step))
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "checkpoint path under %s is too long", model_dir);
  if (!rc) {
    size_t n = (size_t)sprintf(text, "loom-ps-checkpoint 1\nstep %lld\nnum_ps %d\n", (long long)step, np);
    for (int i = 0; i < np; i++)
      n += (size_t)sprintf(text + n, "shard %d model.ckpt-%lld.ps-%d-of-%d %016llx\n", i, (long long)step, i, np,
                           (unsigned long long)dg[i]);
    rc = write_atomic(path, text, st);
  }
  if (!rc) { /* the state file last: it names the set only once every shard and the manifest are on disk */
    char sp[1100];
    snprintf(sp, sizeof sp, "%s%s%s/checkpoint", model_dir, *dir ? "/" : "", dir);
    sprintf(text, "model_checkpoint_path: \"model.ckpt-%lld\"\nall_model_checkpoint_paths: \"model.ckpt-%lld\"\n",
            (long long)step, (long long)step);
    rc = write_atomic(sp, text, st);
  }
  loom__free(dg);
  loom__free(text);
  return rc;
}

loom_code loom_ps_cluster_restore(loom_ps_cluster *c, const char *model_dir, const char *dir, int64_t step,
                                  loom_status *st) {
  if (!c || !dir) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_cluster_restore: NULL argument");
  char d[1100];
  if (model_dir) snprintf(d, sizeof d, "%s%s%s", model_dir, *dir ? "/" : "", dir);
  if (step < 0) {
    if (!model_dir) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_cluster_restore: latest needs model_dir");
    char latest[1200];
    loom_code rc = loom_latest_checkpoint(d, latest, sizeof latest, st);
    if (rc) return rc;
    const char *p = strstr(latest, "model.ckpt-");
    long long k = -1;
    if (!p || sscanf(p, "model.ckpt-%lld", &k) != 1 || k < 0)
      return loom_status_set(st, LOOM_DATA_LOSS, "%s/checkpoint names '%s', not model.ckpt-<step>", d, latest);
    step = k;
  }
  int np = c->p->num_ps;
  uint64_t *dg = loom__calloc((size_t)np, sizeof *dg);
  if (!dg) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
  loom_code rc = ckpt_all(c, LOOM_PS_RESTORE, dir, step, dg, st);
  /* with model_dir: every shard's digest must be the one the manifest names (a consistent set) */
  char path[1100];
  FILE *f = !rc && model_dir && !manifest_path(path, sizeof path, model_dir, dir, step) ? fopen(path, "r") : NULL;
  if (!rc && model_dir && !f) rc = loom_status_set(st, LOOM_NOT_FOUND, "checkpoint manifest %s is missing", path);
  if (f) {
    char line[256];
    int seen = 0;
    while (!rc && fgets(line, sizeof line, f)) {
      int i;
      unsigned long long want;
      char name[160];
      if (sscanf(line, "shard %d %159s %llx", &i, name, &want) != 3) continue;
      if (i < 0 || i >= np) {
        rc = loom_status_set(st, LOOM_DATA_LOSS, "%s names shard %d of %d PS tasks", path, i, np);
      } else if (dg[i] != want) {
        rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: PS %d restored digest %016llx, the manifest says %016llx",
                             path, i, (unsigned long long)dg[i], want);
      }
      seen++;
    }
    fclose(f);
    if (!rc && seen != np) rc = loom_status_set(st, LOOM_DATA_LOSS, "%s names %d shards for %d PS tasks", path, seen, np);
  }
  loom__free(dg);
  return rc;
}

/* ---- reconnect (distributed/job.c) ----
 * Replaces every connection of c by a fresh one (all or nothing: on failure
 * the old connections stay and the first failure is returned). Used after a
 * PS task was lost: an exchange that failed midway leaves the other
 * connections with unread replies, so all are replaced. Cached versions are
 * reset (the next exchange pulls whole values). */
loom_code loom_ps_cluster_reconnect(loom_ps_cluster *c, const char *const *hosts, const int *ports,
                                    const loom_ps_connect_options *o, loom_status *st) {
  if (!c || !hosts || !ports)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_cluster_reconnect: NULL cluster or addresses");
  const loom_ps_placement *p = c->p;
  loom_ps_client **nc = loom__calloc((size_t)p->num_ps, sizeof *nc);
  if (!nc) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cluster client: out of memory");
  for (int i = 0; i < p->num_ps; i++) {
    nc[i] = connect_ps(p, hosts[i], ports[i], o, st);
    if (!nc[i]) {
      for (int j = 0; j < i; j++) loom_ps_client_free(nc[j]);
      loom__free(nc);
      return loom_status_code(st) ? loom_status_code(st) : LOOM_UNAVAILABLE;
    }
  }
  for (int i = 0; i < p->num_ps; i++) loom_ps_client_free(c->c[i]);
  loom__free(c->c);
  c->c = nc;
  for (int i = 0; i < p->nshards; i++) c->version[i] = UINT64_MAX;
  for (int i = 0; i < p->num_ps; i++) /* new connections: a new segment each (the old ones went with them) */
    if (!o || o->shm == 0) shm_offer(c, i);
  return LOOM_OK;
}
