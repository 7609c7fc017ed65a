/* distributed/ps_worker.c - a session that trains against PS tasks.
 *
 * The seam (docs/parameter-server.md): variables stay ordinary session
 * variables with stable host buffers (engine/variable_api.h); the worker builds
 * the gradients of the loss with respect to the placed variables, runs them
 * on the session's current values, and one push+pull exchange per PS (all PS
 * in parallel) hands the gradients to the PS's optimizer and writes the new
 * values straight into the session's variable buffers. The optimizer runs
 * only on the PS, with the same kernels, so one worker reproduces local
 * training bit for bit. Steady-state steps reuse the fetched tensors and the
 * connections' buffers: no allocation.
 *
 * A variable whose gradient is sparse (IndexedSlices from Gather, as
 * loom_gradients_sparse keeps it) travels as rows: the worker sorts the ids,
 * drops duplicates summing their gradient rows in position order (exactly
 * what the local sparse kernels do, so the PS's kernel sees the same sums),
 * and per shard sends PUSH_ROWS then PULL_ROWS of the touched rows back to
 * back (one round trip), writing the new rows into the session's buffer. */
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "engine/variable_api.h"
#include "distributed/ps_client.h"
#include "distributed/job_seam.h"
#include "loom/loom_autodiff.h"
#include "loom/loom_train.h"

struct loom_ps_worker {
  loom_session *s;
  loom_ps_cluster *cl;
  const loom_ps_placement *p;
  int n;
  loom_output *grads;
  loom_output *fetch; /* the non-NULL gradients */
  int *fetch_var;
  int nfetch;
  loom_tensor **gt;
  const char **names; /* per variable (owned by the placement) */
  int *marked;        /* per variable: marked initialised in the session after a pull */
  float **vals;
  const float **g;
  float **dvals;      /* vals with NULL for the sparse variables */
  int *sparse;        /* per variable: its gradient is sparse */
  int *fetch_ix;      /* per fetched gradient: index of its indices tensor in fetch, or -1 */
  /* dedup scratch (grown, never shrunk) */
  struct wpair { int64_t id, pos; } *pairs;
  int64_t cap_pairs;
  struct wsparse *sp; /* per variable (used by the sparse ones) */
  int *first, *nsh;   /* per variable: its shards in the placement */
  uint64_t *rver;     /* per shard: the version its last PULL_ROWS delivered (the read version of row pushes) */
  int64_t *bucket;    /* per shard: row count of this step */
  int fresh_rows;     /* pull the rows of the batch before computing (loom_ps_worker_set_fresh_rows) */
  loom_output *ix_fetch; /* the sparse gradients' indices alone */
  int *ix_var, nix;
  loom_tensor **ix_t;
  float **gcopy;      /* per variable: the dense gradient copied by exchange_prepare(copy) (lazily) */
};

/* A sparse variable's rows of one step: the distinct ids (sorted) with
 * their summed gradient rows, then regrouped by shard: off[j]..off[j+1] are
 * shard j's rows, lids their shard-local ids, gids the global ones. */
struct wsparse {
  int64_t nu, cap, cap_sum;
  int64_t *uids, *gids, *lids, *off;
  float *usum, *lsum;
};

int loom_ps_var_specs(loom_graph *g, loom_ps_var_spec *out, int cap) {
  int n = 0;
  loom_variable *const *v = loom_trainable_variables(g, &n);
  for (int i = 0; i < n && i < cap; i++) {
    memset(&out[i], 0, sizeof out[i]);
    out[i].name = loom_variable_name(v[i]);
    out[i].ndim = loom_variable_dims(v[i], out[i].dims);
  }
  return n;
}

int loom_ps_var_specs_sparse(loom_graph *g, loom_output loss, loom_ps_var_spec *out, int cap, loom_status *st) {
  int n = 0;
  loom_variable *const *v = loom_trainable_variables(g, &n);
  if (!loss.node) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_var_specs_sparse: no loss");
    return -1;
  }
  int m = n < cap ? n : cap;
  loom_output *xs = loom__calloc((size_t)m + 1, sizeof *xs);
  loom_gradient *gr = loom__calloc((size_t)m + 1, sizeof *gr);
  if (!xs || !gr) {
    loom__free(xs);
    loom__free(gr);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "loom_ps_var_specs_sparse: out of memory");
    return -1;
  }
  for (int i = 0; i < m; i++) xs[i] = loom_variable_output(v[i]);
  loom_code rc = m ? loom_gradients_sparse(g, 1, &loss, NULL, m, xs, gr, st) : LOOM_OK;
  for (int i = 0; i < m && !rc; i++) {
    memset(&out[i], 0, sizeof out[i]);
    out[i].name = loom_variable_name(v[i]);
    out[i].ndim = loom_variable_dims(v[i], out[i].dims);
    out[i].sparse = gr[i].values.node && gr[i].indices.node && out[i].ndim >= 1;
  }
  loom__free(xs);
  loom__free(gr);
  return rc ? -1 : n;
}

void loom_ps_worker_free(loom_ps_worker *w) {
  if (!w) return;
  for (int i = 0; i < w->nfetch; i++) loom_tensor_free(w->gt[i]);
  loom__free(w->grads);
  loom__free(w->fetch);
  loom__free(w->fetch_var);
  loom__free(w->gt);
  loom__free(w->names);
  loom__free(w->marked);
  loom__free(w->vals);
  loom__free(w->g);
  loom__free(w->dvals);
  loom__free(w->sparse);
  loom__free(w->fetch_ix);
  loom__free(w->pairs);
  for (int i = 0; w->sp && i < w->n; i++) {
    struct wsparse *q = &w->sp[i];
    loom__free(q->uids);
    loom__free(q->gids);
    loom__free(q->lids);
    loom__free(q->off);
    loom__free(q->usum);
    loom__free(q->lsum);
  }
  loom__free(w->sp);
  loom__free(w->first);
  loom__free(w->nsh);
  loom__free(w->rver);
  loom__free(w->bucket);
  for (int i = 0; i < w->nix; i++) loom_tensor_free(w->ix_t[i]);
  loom__free(w->ix_fetch);
  loom__free(w->ix_var);
  loom__free(w->ix_t);
  for (int i = 0; w->gcopy && i < w->n; i++) loom__free(w->gcopy[i]);
  loom__free(w->gcopy);
  loom__free(w);
}

static loom_ps_worker *worker_new(loom_session *s, loom_ps_cluster *cl, const loom_ps_placement *p, loom_output loss,
                                  const loom_gradient *given, loom_status *st);

loom_ps_worker *loom_ps_worker_new(loom_session *s, loom_ps_cluster *cl, const loom_ps_placement *p, loom_output loss,
                                   loom_status *st) {
  return worker_new(s, cl, p, loss, NULL, st);
}

loom_ps_worker *loom__ps_worker_new_grads(loom_session *s, loom_ps_cluster *cl, const loom_ps_placement *p,
                                          const loom_gradient *grads, loom_status *st) {
  if (!grads) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_worker: no gradients");
    return NULL;
  }
  return worker_new(s, cl, p, (loom_output){NULL, 0}, grads, st);
}

static loom_ps_worker *worker_new(loom_session *s, loom_ps_cluster *cl, const loom_ps_placement *p, loom_output loss,
                                  const loom_gradient *given, loom_status *st) {
  if (!s || !cl || !p || (!loss.node && !given)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_worker_new: NULL session, cluster, placement or loss");
    return NULL;
  }
  if (!loom__session_vars_on_host(s)) {
    loom_status_set(st, LOOM_UNIMPLEMENTED,
                    "loom_ps_worker: CPU sessions only (a device session keeps its variables on the device)");
    return NULL;
  }
  loom_graph *g = loom_session_graph(s);
  int n = loom_ps_placement_num_vars(p);
  loom_ps_worker *w = loom__calloc(1, sizeof *w);
  if (!w) goto oom;
  w->s = s;
  w->cl = cl;
  w->p = p;
  w->n = n;
  size_t k = (size_t)n + 1;
  w->grads = loom__calloc(k, sizeof *w->grads);
  w->fetch = loom__calloc(2 * k, sizeof *w->fetch);
  w->fetch_var = loom__calloc(2 * k, sizeof(int));
  w->gt = loom__calloc(2 * k, sizeof *w->gt);
  w->names = loom__calloc(k, sizeof *w->names);
  w->marked = loom__calloc(k, sizeof *w->marked);
  w->vals = loom__calloc(k, sizeof *w->vals);
  w->g = loom__calloc(k, sizeof *w->g);
  w->dvals = loom__calloc(k, sizeof *w->dvals);
  w->sparse = loom__calloc(k, sizeof(int));
  w->fetch_ix = loom__calloc(2 * k, sizeof(int));
  int nsh_all = loom_ps_placement_num_shards(p);
  w->sp = loom__calloc(k, sizeof *w->sp);
  w->first = loom__calloc(k, sizeof(int));
  w->nsh = loom__calloc(k, sizeof(int));
  w->rver = loom__malloc(((size_t)nsh_all + 1) * sizeof(uint64_t));
  w->bucket = loom__calloc((size_t)nsh_all + 1, sizeof(int64_t));
  w->ix_fetch = loom__calloc(k, sizeof *w->ix_fetch);
  w->ix_var = loom__calloc(k, sizeof(int));
  w->ix_t = loom__calloc(k, sizeof *w->ix_t);
  if (!w->sp || !w->first || !w->nsh || !w->rver || !w->bucket || !w->ix_fetch || !w->ix_var || !w->ix_t) goto oom;
  for (int i = 0; i < nsh_all; i++) {
    const loom_ps_shard *sh = loom_ps_placement_shard(p, i);
    w->rver[i] = UINT64_MAX;
    if (w->nsh[sh->var]++ == 0) w->first[sh->var] = i;
  }
  loom_gradient *gr = loom__calloc(k, sizeof *gr);
  loom_output *xs = loom__calloc(k, sizeof *xs);
  if (!w->grads || !w->fetch || !w->fetch_var || !w->gt || !w->names || !w->marked || !w->vals || !w->g || !xs || !w->dvals ||
      !w->sparse || !w->fetch_ix || !gr) {
    loom__free(xs);
    loom__free(gr);
    goto oom;
  }
  for (int i = 0; i < n; i++) {
    const loom_ps_var_spec *vs = loom_ps_placement_var(p, i);
    loom_variable *v = loom_graph_variable(g, vs->name);
    int64_t dims[LOOM_MAX_DIMS];
    int nd = v ? loom_variable_dims(v, dims) : -1;
    int same = v && nd == vs->ndim && loom_variable_dtype(v) == LOOM_F32;
    for (int d = 0; same && d < nd; d++) same = dims[d] == vs->dims[d];
    if (!same) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      v ? "variable %s of the placement has another shape or dtype in the graph (float32 needed)"
                        : "variable %s of the placement is not in the graph",
                      vs->name);
      loom__free(xs);
      loom__free(gr);
      loom_ps_worker_free(w);
      return NULL;
    }
    xs[i] = loom_variable_output(v);
  }
  loom_code rc = LOOM_OK;
  if (given)
    memcpy(gr, given, (size_t)n * sizeof *gr);
  else
    rc = loom_gradients_sparse(g, 1, &loss, NULL, n, xs, gr, st);
  loom__free(xs);
  if (rc) {
    loom__free(gr);
    loom_ps_worker_free(w);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    w->grads[i] = gr[i].values;
    w->sparse[i] = gr[i].values.node && gr[i].indices.node;
    if (w->nsh[i] > 1 && loom_ps_placement_shard(p, w->first[i])->stride > 1 && gr[i].values.node && !w->sparse[i]) {
      loom__free(gr);
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "variable %s is placed by row mod num_ps (spec.sparse) but its gradient is dense",
                      loom_ps_placement_var(p, i)->name);
      loom_ps_worker_free(w);
      return NULL;
    }
    if (w->sparse[i] && loom_ps_placement_var(p, i)->ndim < 1) {
      loom__free(gr);
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "variable %s: a sparse gradient of a scalar",
                      loom_ps_placement_var(p, i)->name);
      loom_ps_worker_free(w);
      return NULL;
    }
  }
  for (int i = 0; i < n; i++) {
    const loom_ps_var_spec *vs = loom_ps_placement_var(p, i);
    w->names[i] = vs->name;
    w->vals[i] = loom__session_var_buffer(s, vs->name, NULL, st);
    if (!w->vals[i]) {
      loom_ps_worker_free(w);
      return NULL;
    }
    w->dvals[i] = w->sparse[i] ? NULL : w->vals[i];
    if (w->grads[i].node) {
      w->fetch_ix[w->nfetch] = w->sparse[i] ? w->nfetch + 1 : -1;
      w->fetch[w->nfetch] = w->grads[i];
      w->fetch_var[w->nfetch++] = i;
      if (w->sparse[i]) {
        w->fetch_ix[w->nfetch] = -2; /* the indices of the previous entry */
        w->fetch[w->nfetch] = gr[i].indices;
        w->fetch_var[w->nfetch++] = i;
        w->ix_fetch[w->nix] = gr[i].indices;
        w->ix_var[w->nix++] = i;
      }
    }
  }
  loom__free(gr);
  return w;
oom:
  loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps worker: out of memory");
  loom_ps_worker_free(w);
  return NULL;
}

loom_code loom_ps_worker_init_vars(loom_ps_worker *w, loom_ps_optimizer opt, const float *hyper, loom_status *st) {
  for (int i = 0; i < w->n; i++) {
    if (!loom_session_variable_initialized(w->s, w->names[i]))
      return loom_status_set(st, LOOM_FAILED_PRECONDITION,
                             "variable %s is not initialized in the chief's session (run the initializer first)",
                             w->names[i]);
    loom_code rc = loom_ps_cluster_init_var(w->cl, i, opt, hyper, w->vals[i], st);
    if (rc) return rc;
  }
  return LOOM_OK;
}

loom_code loom__ps_worker_init_vars_rules(loom_ps_worker *w, const loom_ps_update_rule *const *rules,
                                          loom_status *st) {
  for (int i = 0; i < w->n; i++) {
    if (!loom_session_variable_initialized(w->s, w->names[i]))
      return loom_status_set(st, LOOM_FAILED_PRECONDITION,
                             "variable %s is not initialized in the chief's session (run the initializer first)",
                             w->names[i]);
    /* a variable the train op does not update is held with SGD at learning rate 0 (nothing is pushed) */
    loom_ps_update_rule none;
    memset(&none, 0, sizeof none);
    none.optimizer = LOOM_PS_SGD;
    none.schedule = -1;
    loom_code rc = loom_ps_cluster_init_var_rule(w->cl, i, rules[i] ? rules[i] : &none, w->vals[i], st);
    if (rc) return rc;
  }
  return LOOM_OK;
}

static void mark_all(loom_ps_worker *w) {
  for (int i = 0; i < w->n; i++)
    if (!w->marked[i]) {
      loom__session_var_mark_initialized(w->s, w->names[i]);
      w->marked[i] = 1;
    }
}

loom_code loom_ps_worker_pull(loom_ps_worker *w, loom_status *st) {
  loom_code rc = loom_ps_cluster_pull(w->cl, w->vals, st);
  if (!rc) mark_all(w);
  return rc;
}

static int pair_cmp(const void *a, const void *b) {
  const struct wpair *x = a, *y = b;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static loom_code grow_i64(int64_t **p, int64_t n) {
  int64_t *q = loom__realloc(*p, (size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  if (!q) return LOOM_RESOURCE_EXHAUSTED;
  *p = q;
  return LOOM_OK;
}

static loom_code grow_f32(float **p, int64_t n) {
  float *q = loom__realloc(*p, (size_t)(n > 0 ? n : 1) * sizeof(float));
  if (!q) return LOOM_RESOURCE_EXHAUSTED;
  *p = q;
  return LOOM_OK;
}

/* Sorted distinct ids of a sparse gradient and their summed rows (position
 * order within an id, as the local kernels sum), then regrouped by shard. */
/* Groups the sorted unique ids q->uids[0..q->nu) of variable var by shard
 * (contiguous row ranges, or row mod k for a table spread by rows): q->off
 * the shard offsets, q->gids/q->lids the global and shard-local ids in shard
 * order. With src, the row of each id (row floats) moves along into dst. */
static void group_by_shard(loom_ps_worker *w, int var, struct wsparse *q, const float *src, float *dst, int64_t row) {
  int ns = w->nsh[var];
  int stride = ns > 1 ? loom_ps_placement_shard(w->p, w->first[var])->stride : 1;
  int64_t *cnt = w->bucket;
  for (int j = 0; j <= ns; j++) q->off[j] = 0;
  for (int pass = 0; pass < 2; pass++) {
    int cur = 0;
    for (int64_t i = 0; i < q->nu; i++) {
      int64_t id = q->uids[i], lid;
      int j;
      if (stride > 1) {
        j = (int)(id % stride);
        lid = id / stride;
      } else {
        while (cur < ns - 1 && id >= loom_ps_placement_shard(w->p, w->first[var] + cur)->row_end) cur++;
        j = cur;
        lid = id - loom_ps_placement_shard(w->p, w->first[var] + cur)->row_begin;
      }
      if (pass == 0) {
        q->off[j + 1]++;
        continue;
      }
      int64_t pos = cnt[j]++;
      q->gids[pos] = id;
      q->lids[pos] = lid;
      if (src) memcpy(dst + pos * row, src + i * row, (size_t)row * sizeof(float));
    }
    if (pass == 0) {
      for (int j = 0; j < ns; j++) q->off[j + 1] += q->off[j];
      for (int j = 0; j < ns; j++) cnt[j] = q->off[j];
    }
  }
}

/* The ids of indices tensor it (n of them) as (id, position) pairs sorted by
 * id into w->pairs (*k of them), with var's id buffers grown to n. Pruned
 * ids (the minimum of the dtype) have no row and are skipped; another id
 * outside [0, nrows) is an error when strict, else skipped (the gradient
 * step reports it). */
static loom_code sorted_pairs(loom_ps_worker *w, int var, const loom_tensor *it, int64_t nrows, int strict,
                              int64_t *k_out, loom_status *st) {
  struct wsparse *q = &w->sp[var];
  int64_t n = loom_tensor_numel(it);
  if (n > w->cap_pairs) {
    void *a = loom__realloc(w->pairs, (size_t)n * sizeof *w->pairs);
    if (!a) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps worker: %lld ids", (long long)n);
    w->pairs = a;
    w->cap_pairs = n;
  }
  if (!q->off && grow_i64(&q->off, w->nsh[var] + 1))
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps worker: out of memory");
  if (n > q->cap) {
    if (grow_i64(&q->uids, n) || grow_i64(&q->gids, n) || grow_i64(&q->lids, n))
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps worker: %lld ids", (long long)n);
    q->cap = n;
  }
  int i32 = loom_tensor_dtype(it) == LOOM_I32;
  const void *ix = loom_tensor_data_const(it);
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t id = i32 ? ((const int32_t *)ix)[i] : ((const int64_t *)ix)[i];
    if (id == (i32 ? (int64_t)INT32_MIN : INT64_MIN)) continue; /* a pruned id: no row */
    if (id < 0 || id >= nrows) {
      if (!strict) continue;
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "variable %s: gradient id %lld is not in [0, %lld)",
                             w->names[var], (long long)id, (long long)nrows);
    }
    w->pairs[k].id = id;
    w->pairs[k++].pos = i;
  }
  qsort(w->pairs, (size_t)k, sizeof *w->pairs, pair_cmp);
  *k_out = k;
  return LOOM_OK;
}

static loom_code dedup_rows(loom_ps_worker *w, int var, const loom_tensor *vt, const loom_tensor *it, int64_t row,
                            int64_t nrows, loom_status *st) {
  struct wsparse *q = &w->sp[var];
  int64_t n = loom_tensor_numel(it), k = 0;
  if (loom_tensor_numel(vt) != n * row)
    return loom_status_set(st, LOOM_INTERNAL, "variable %s: sparse gradient of %lld values for %lld ids of %lld",
                           w->names[var], (long long)loom_tensor_numel(vt), (long long)n, (long long)row);
  if (n * row > q->cap_sum) {
    if (grow_f32(&q->usum, n * row) || grow_f32(&q->lsum, n * row))
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps worker: %lld gradient rows", (long long)n);
    q->cap_sum = n * row;
  }
  loom_code rc = sorted_pairs(w, var, it, nrows, 1, &k, st);
  if (rc) return rc;
  const float *G = loom_tensor_data_const(vt);
  int64_t nu = 0;
  for (int64_t i = 0; i < k;) {
    int64_t j = i + 1;
    float *s = q->usum + nu * row;
    memcpy(s, G + w->pairs[i].pos * row, (size_t)row * sizeof(float));
    while (j < k && w->pairs[j].id == w->pairs[i].id) {
      const float *src = G + w->pairs[j].pos * row;
      for (int64_t c = 0; c < row; c++) s[c] += src[c];
      j++;
    }
    q->uids[nu++] = w->pairs[i].id;
    i = j;
  }
  q->nu = nu;
  group_by_shard(w, var, q, q->usum, q->lsum, row);
  return LOOM_OK;
}

/* The fixed part of a row request to shard si: shard id, row count and the read version (the last
 * reply of this shard, else the whole-variable pull that started the worker). */
static void rows_fixed(const loom_ps_worker *w, int si, uint32_t shard_id, int64_t m, uint8_t fixed[16]) {
  loom__ps_put32(fixed, shard_id);
  loom__ps_put32(fixed + 4, (uint32_t)m);
  loom__ps_put64(fixed + 8, w->rver[si] != UINT64_MAX ? w->rver[si] : loom__ps_cluster_version(w->cl, si));
}

/* Receives a PULL_ROWS / PULL_ROWS_AT reply of m rows of `row` floats into the worker's copy of var at
 * the rows' global ids q->gids[lo..lo+m), and the shard's version. */
static loom_code recv_rows(loom_ps_worker *w, loom_ps_client *c, uint16_t op, int si, int var, int64_t lo,
                           int64_t m, int64_t row, loom_status *st) {
  const struct wsparse *q = &w->sp[var];
  loom_ps_hdr h;
  uint8_t ver[8];
  loom_code rc = loom__ps_recv_hdr(c, op, &h, st);
  if (!rc && (uint64_t)h.body_len != 8 + 4 * (uint64_t)(m * row))
    rc = loom_status_set(st, LOOM_DATA_LOSS, "%s reply of %u bytes for %lld rows of %lld",
                         op == LOOM_PS_PULL_ROWS ? "PULL_ROWS" : "PULL_ROWS_AT", h.body_len, (long long)m,
                         (long long)row);
  if (!rc) rc = loom__ps_recv_body(c, ver, 8, st);
  if (!rc) w->rver[si] = loom__ps_get64(ver);
  for (int64_t i = lo; i < lo + m && !rc; i++)
    rc = loom__ps_recv_body(c, w->vals[var] + q->gids[i] * row, (size_t)row * 4, st);
  if (!rc) rc = loom__ps_recv_end(c, &h, st);
  return rc;
}

/* Sparse variable var, per shard: PUSH_ROWS_AT of the touched rows (read
 * version: the shard's version in the last reply this worker got from it;
 * a BOUNDED PS drops the push when more than s pushes of others came in
 * between) then PULL_ROWS of the same rows. send: all requests out; else: their replies in, the new rows
 * written into the session's buffer. */
static loom_code sparse_io(loom_ps_worker *w, int var, int send, loom_status *st) {
  struct wsparse *q = &w->sp[var];
  const loom_ps_var_spec *vs = loom_ps_placement_var(w->p, var);
  int64_t nrows = vs->dims[0], row = nrows > 0 ? loom__numel(vs->ndim, vs->dims) / nrows : 0;
  loom_code rc = LOOM_OK;
  for (int j = 0; j < w->nsh[var] && !rc; j++) {
    int si = w->first[var] + j;
    const loom_ps_shard *sh = loom_ps_placement_shard(w->p, si);
    int64_t lo = q->off[j], m = q->off[j + 1] - lo;
    /* a push even with no rows: the shard's step still counts (Adam's beta powers advance once per step on
     * every shard, as they do for the whole local variable) */
    loom_ps_client *c = loom_ps_cluster_client(w->cl, sh->ps);
    if (send) {
      uint8_t fixed[16];
      rows_fixed(w, si, sh->id, m, fixed);
      rc = loom__ps_send(c, LOOM_PS_PUSH_ROWS_AT, fixed, 16, q->lids + lo, (size_t)m * 8, q->lsum + lo * row,
                         (size_t)(m * row) * 4, st);
      if (!rc && m) rc = loom__ps_send(c, LOOM_PS_PULL_ROWS, fixed, 8, q->lids + lo, (size_t)m * 8, NULL, 0, st);
    } else {
      loom_ps_hdr h;
      rc = loom__ps_recv_hdr(c, LOOM_PS_PUSH_ROWS_AT, &h, st);
      uint8_t pv[8];
      if (!rc) rc = h.body_len == 8 ? loom__ps_recv_body(c, pv, 8, st)
                                    : loom_status_set(st, LOOM_DATA_LOSS, "PUSH_ROWS_AT reply of %u bytes", h.body_len);
      if (!rc) rc = loom__ps_recv_end(c, &h, st);
      if (!rc) w->rver[si] = loom__ps_get64(pv);
      if (!rc && (h.flags & LOOM_PS_FLAG_STALE)) loom__ps_cluster_count_dropped(w->cl, 1);
      if (!m) continue;
      if (!rc) rc = recv_rows(w, c, LOOM_PS_PULL_ROWS, si, var, lo, m, row, st);
    }
  }
  return rc;
}

/* The distinct ids of a batch's lookups of var (indices tensor it), grouped by shard as dedup_rows does
 * (no gradient rows). */
static loom_code batch_ids(loom_ps_worker *w, int var, const loom_tensor *it, loom_status *st) {
  struct wsparse *q = &w->sp[var];
  int64_t k = 0;
  loom_code rc = sorted_pairs(w, var, it, loom_ps_placement_var(w->p, var)->dims[0], 0, &k, st);
  if (rc) return rc;
  int64_t nu = 0;
  for (int64_t i = 0; i < k; i++)
    if (!nu || w->pairs[i].id != q->uids[nu - 1]) q->uids[nu++] = w->pairs[i].id;
  q->nu = nu;
  group_by_shard(w, var, q, NULL, NULL, 0);
  return LOOM_OK;
}

/* Fresh rows: before the step computes, the rows its batch looks up are
 * pulled (PULL_ROWS_AT: at least the version this worker's previous push
 * made, so a SYNC step still being aggregated is waited for), one round
 * trip for all tables and PS tasks. Without it a worker computes on its
 * own copy of rows, current only for rows it touched itself. */
static loom_code pull_batch_rows(loom_ps_worker *w, const loom_output *feeds, loom_tensor *const *feed_values,
                                 int nfeeds, loom_status *st) {
  loom_code rc = loom_session_run(w->s, feeds, feed_values, nfeeds, w->ix_fetch, w->ix_t, w->nix, NULL, 0, st);
  for (int k = 0; k < w->nix && !rc; k++) rc = batch_ids(w, w->ix_var[k], w->ix_t[k], st);
  for (int pass = 0; pass < 2 && !rc; pass++)
    for (int k = 0; k < w->nix && !rc; k++) {
      int var = w->ix_var[k];
      struct wsparse *q = &w->sp[var];
      const loom_ps_var_spec *vs = loom_ps_placement_var(w->p, var);
      int64_t row = vs->dims[0] > 0 ? loom__numel(vs->ndim, vs->dims) / vs->dims[0] : 0;
      for (int j = 0; j < w->nsh[var] && !rc; j++) {
        int si = w->first[var] + j;
        const loom_ps_shard *sh = loom_ps_placement_shard(w->p, si);
        int64_t lo = q->off[j], m = q->off[j + 1] - lo;
        if (!m) continue;
        loom_ps_client *c = loom_ps_cluster_client(w->cl, sh->ps);
        if (pass == 0) {
          uint8_t fixed[16];
          rows_fixed(w, si, sh->id, m, fixed);
          rc = loom__ps_send(c, LOOM_PS_PULL_ROWS_AT, fixed, 16, q->lids + lo, (size_t)m * 8, NULL, 0, st);
        } else {
          rc = recv_rows(w, c, LOOM_PS_PULL_ROWS_AT, si, var, lo, m, row, st);
        }
      }
    }
  return rc;
}

void loom_ps_worker_set_fresh_rows(loom_ps_worker *w, int on) {
  if (w) w->fresh_rows = on != 0;
}

/* The exchange of a step whose gradients gt (in w->fetch order) have been
 * fetched: one round trip per PS: the dense push+pulls and the row requests
 * of every PS all go out before any reply is read (each connection answers
 * in request order). Split in a send half (the gradients leave the caller's
 * tensors: once it returns, gt may be overwritten) and a receive half (the
 * new values written into the session's variable buffers: call it only
 * while no run uses them); the job's overlapped mode runs the next step
 * between the two. */
/* The send half in two: prepare reads the fetched tensors (the dense
 * gradients referenced, or with copy copied into the worker's own buffers;
 * the sparse ones deduplicated into the worker's row buffers), post sends
 * from the worker's state only. With copy, gt may be reused as soon as
 * prepare returns and post may run on another thread. */
static loom_code exchange_prepare(loom_ps_worker *w, loom_tensor *const *gt, int copy, loom_status *st) {
  loom_code rc = LOOM_OK;
  for (int i = 0; i < w->n; i++) w->g[i] = NULL;
  for (int j = 0; j < w->nfetch; j++) {
    if (w->fetch_ix[j] != -1) continue;
    int var = w->fetch_var[j];
    float *src = loom_tensor_data(gt[j]);
    if (copy) {
      if (!w->gcopy) w->gcopy = loom__calloc((size_t)w->n + 1, sizeof *w->gcopy);
      int64_t numel = loom_tensor_numel(gt[j]);
      if (w->gcopy && !w->gcopy[var]) w->gcopy[var] = loom__malloc((size_t)(numel > 0 ? numel : 1) * sizeof(float));
      if (!w->gcopy || !w->gcopy[var])
        return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps worker: gradient copy of %s", w->names[var]);
      memcpy(w->gcopy[var], src, (size_t)numel * sizeof(float));
      src = w->gcopy[var];
    }
    w->g[var] = src;
  }
  for (int j = 0; j < w->nfetch && !rc; j++) {
    if (w->fetch_ix[j] < 0) continue;
    int var = w->fetch_var[j];
    const loom_ps_var_spec *vs = loom_ps_placement_var(w->p, var);
    int64_t nrows = vs->dims[0], row = nrows > 0 ? loom__numel(vs->ndim, vs->dims) / nrows : 0;
    rc = dedup_rows(w, var, gt[j], gt[w->fetch_ix[j]], row, nrows, st);
  }
  return rc;
}

static loom_code exchange_post(loom_ps_worker *w, loom_status *st) {
  loom_code rc = loom__ps_cluster_send(w->cl, w->g, w->dvals, st);
  for (int j = 0; j < w->nfetch && !rc; j++)
    if (w->fetch_ix[j] >= 0) rc = sparse_io(w, w->fetch_var[j], 1, st);
  return rc;
}

static loom_code exchange_send(loom_ps_worker *w, loom_tensor *const *gt, loom_status *st) {
  loom_code rc = exchange_prepare(w, gt, 0, st);
  return rc ? rc : exchange_post(w, st);
}

/* The receive half: w->g is only tested for NULL here (which variables had
 * a gradient), never read, so the gradient tensors may already hold the
 * next step's values. */
static loom_code exchange_recv(loom_ps_worker *w, loom_status *st) {
  loom_code rc = loom__ps_cluster_recv(w->cl, w->g, w->dvals, st);
  for (int j = 0; j < w->nfetch && !rc; j++)
    if (w->fetch_ix[j] >= 0) rc = sparse_io(w, w->fetch_var[j], 0, st);
  if (!rc) mark_all(w);
  return rc;
}

static loom_code worker_exchange(loom_ps_worker *w, loom_tensor *const *gt, loom_status *st) {
  loom_code rc = exchange_send(w, gt, st);
  return rc ? rc : exchange_recv(w, st);
}

/* One training step: the gradients on the session's current values, then one round trip per PS. */
loom_code loom_ps_worker_step(loom_ps_worker *w, const loom_output *feeds, loom_tensor *const *feed_values,
                              int nfeeds, loom_status *st) {
  loom_code rc = w->fresh_rows && w->nix ? pull_batch_rows(w, feeds, feed_values, nfeeds, st) : LOOM_OK;
  if (!rc) rc = loom_session_run(w->s, feeds, feed_values, nfeeds, w->fetch, w->gt, w->nfetch, NULL, 0, st);
  return rc ? rc : worker_exchange(w, w->gt, st);
}

/* ---- job seam (distributed/job.c's strategy) ----
 * The step split in two around a monitored session's run, so that hooks see
 * the same run: the gradients to fetch, then the exchange on the fetched
 * values (what loom_ps_worker_step does after its own run). */
#include "distributed/job_seam.h"
int loom__ps_worker_fetches(const loom_ps_worker *w, const loom_output **fetches) {
  *fetches = w->fetch;
  return w->nfetch;
}

loom_code loom__ps_worker_exchange(loom_ps_worker *w, loom_tensor *const *gt, loom_status *st) {
  return worker_exchange(w, gt, st);
}

loom_code loom__ps_worker_exchange_send(loom_ps_worker *w, loom_tensor *const *gt, loom_status *st) {
  return exchange_send(w, gt, st);
}

loom_code loom__ps_worker_exchange_recv(loom_ps_worker *w, loom_status *st) { return exchange_recv(w, st); }

loom_code loom__ps_worker_exchange_prepare(loom_ps_worker *w, loom_tensor *const *gt, int copy, loom_status *st) {
  return exchange_prepare(w, gt, copy, st);
}

loom_code loom__ps_worker_exchange_post(loom_ps_worker *w, loom_status *st) { return exchange_post(w, st); }

int loom__ps_worker_post_is_write_only(const loom_ps_worker *w) {
  return loom__ps_cluster_send_is_write_only(w->cl, w->dvals);
}
