/* distributed/ps_worker.c - a session that trains against PS tasks.
 *
 * The seam (README "Parameter server"): variables stay ordinary session
 * variables with stable host buffers (engine/variables.h); the worker builds
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
#include "engine/variables.h"
#include "distributed/ps_client.h"
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
  loom_var_entry **e;
  float **vals;
  const float **g;
  float **dvals;      /* vals with NULL for the sparse variables */
  int *sparse;        /* per variable: its gradient is sparse */
  int *fetch_ix;      /* per fetched gradient: index of its indices tensor in fetch, or -1 */
  /* dedup scratch (grown, never shrunk) */
  struct wpair { int64_t id, pos; } *pairs;
  int64_t *uids;
  float *usum;
  int64_t cap_pairs, cap_sum;
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

void loom_ps_worker_free(loom_ps_worker *w) {
  if (!w) return;
  for (int i = 0; i < w->nfetch; i++) loom_tensor_free(w->gt[i]);
  loom__free(w->grads);
  loom__free(w->fetch);
  loom__free(w->fetch_var);
  loom__free(w->gt);
  loom__free(w->e);
  loom__free(w->vals);
  loom__free(w->g);
  loom__free(w->dvals);
  loom__free(w->sparse);
  loom__free(w->fetch_ix);
  loom__free(w->pairs);
  loom__free(w->uids);
  loom__free(w->usum);
  loom__free(w);
}

loom_ps_worker *loom_ps_worker_new(loom_session *s, loom_ps_cluster *cl, const loom_ps_placement *p, loom_output loss,
                                   loom_status *st) {
  if (!s || !cl || !p || !loss.node) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "loom_ps_worker_new: NULL session, cluster, placement or loss");
    return NULL;
  }
  if (s->opts.device != LOOM_DEVICE_CPU) {
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
  w->e = loom__calloc(k, sizeof *w->e);
  w->vals = loom__calloc(k, sizeof *w->vals);
  w->g = loom__calloc(k, sizeof *w->g);
  w->dvals = loom__calloc(k, sizeof *w->dvals);
  w->sparse = loom__calloc(k, sizeof(int));
  w->fetch_ix = loom__calloc(2 * k, sizeof(int));
  loom_gradient *gr = loom__calloc(k, sizeof *gr);
  loom_output *xs = loom__calloc(k, sizeof *xs);
  if (!w->grads || !w->fetch || !w->fetch_var || !w->gt || !w->e || !w->vals || !w->g || !xs || !w->dvals ||
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
  loom_code rc = loom_gradients_sparse(g, 1, &loss, NULL, n, xs, gr, st);
  loom__free(xs);
  if (rc) {
    loom__free(gr);
    loom_ps_worker_free(w);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    w->grads[i] = gr[i].values;
    w->sparse[i] = gr[i].values.node && gr[i].indices.node;
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
    w->e[i] = loom__var_entry(s, vs->name, st);
    if (!w->e[i]) {
      loom_ps_worker_free(w);
      return NULL;
    }
    w->vals[i] = w->e[i]->data;
    w->dvals[i] = w->sparse[i] ? NULL : w->vals[i];
    if (w->grads[i].node) {
      w->fetch_ix[w->nfetch] = w->sparse[i] ? w->nfetch + 1 : -1;
      w->fetch[w->nfetch] = w->grads[i];
      w->fetch_var[w->nfetch++] = i;
      if (w->sparse[i]) {
        w->fetch_ix[w->nfetch] = -2; /* the indices of the previous entry */
        w->fetch[w->nfetch] = gr[i].indices;
        w->fetch_var[w->nfetch++] = i;
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
    if (!w->e[i]->initialized)
      return loom_status_set(st, LOOM_FAILED_PRECONDITION,
                             "variable %s is not initialized in the chief's session (run the initializer first)",
                             w->e[i]->name);
    loom_code rc = loom_ps_cluster_init_var(w->cl, i, opt, hyper, w->vals[i], st);
    if (rc) return rc;
  }
  return LOOM_OK;
}

static void mark_all(loom_ps_worker *w) {
  loom_var_store *vs = loom__var_store(w->s, NULL);
  for (int i = 0; i < w->n; i++)
    if (!w->e[i]->initialized && vs) loom__var_mark_initialized(vs, w->e[i]);
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

/* Sorted distinct ids of a sparse gradient and their summed rows (position
 * order within an id, as the local kernels sum) into w->uids / w->usum. */
static loom_code dedup(loom_ps_worker *w, int var, const loom_tensor *vt, const loom_tensor *it, int64_t row,
                       int64_t nrows, int64_t *nu_out, loom_status *st) {
  int64_t n = loom_tensor_numel(it);
  if (loom_tensor_numel(vt) != n * row)
    return loom_status_set(st, LOOM_INTERNAL, "variable %s: sparse gradient of %lld values for %lld ids of %lld",
                           w->e[var]->name, (long long)loom_tensor_numel(vt), (long long)n, (long long)row);
  if (n > w->cap_pairs) {
    void *a = loom__realloc(w->pairs, (size_t)n * sizeof *w->pairs), *b = a ? loom__realloc(w->uids, (size_t)n * 8) : NULL;
    if (a) w->pairs = a;
    if (b) w->uids = b;
    if (!a || !b) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps worker: %lld ids", (long long)n);
    w->cap_pairs = n;
  }
  if (n * row > w->cap_sum) {
    float *c = loom__realloc(w->usum, (size_t)(n * row) * sizeof(float));
    if (!c) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "ps worker: %lld gradient rows", (long long)n);
    w->usum = c;
    w->cap_sum = n * row;
  }
  int i32 = loom_tensor_dtype(it) == LOOM_I32;
  const void *ix = loom_tensor_data_const(it);
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t id = i32 ? ((const int32_t *)ix)[i] : ((const int64_t *)ix)[i];
    if (id == (i32 ? (int64_t)INT32_MIN : INT64_MIN)) continue; /* a pruned id: no row */
    if (id < 0 || id >= nrows)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "variable %s: gradient id %lld is not in [0, %lld)",
                             w->e[var]->name, (long long)id, (long long)nrows);
    w->pairs[k].id = id;
    w->pairs[k++].pos = i;
  }
  qsort(w->pairs, (size_t)k, sizeof *w->pairs, pair_cmp);
  const float *G = loom_tensor_data_const(vt);
  int64_t nu = 0;
  for (int64_t i = 0; i < k;) {
    int64_t j = i + 1;
    float *s = w->usum + nu * row;
    memcpy(s, G + w->pairs[i].pos * row, (size_t)row * sizeof(float));
    while (j < k && w->pairs[j].id == w->pairs[i].id) {
      const float *src = G + w->pairs[j].pos * row;
      for (int64_t c = 0; c < row; c++) s[c] += src[c];
      j++;
    }
    w->uids[nu++] = w->pairs[i].id;
    i = j;
  }
  *nu_out = nu;
  return LOOM_OK;
}

/* Sparse variable var: per shard, PUSH_ROWS of the touched rows then
 * PULL_ROWS of the same rows, all shards' requests out before any reply. */
static loom_code sparse_exchange(loom_ps_worker *w, int var, int64_t nu, loom_status *st) {
  const loom_ps_placement *p = w->p;
  const loom_ps_var_spec *vs = loom_ps_placement_var(p, var);
  int64_t nrows = vs->dims[0], row = nrows > 0 ? loom__numel(vs->ndim, vs->dims) / nrows : 0;
  int ns = loom_ps_placement_num_shards(p);
  loom_code rc = LOOM_OK;
  /* ids are sent shard-local: shift them in place, restore after */
  for (int pass = 0; pass < 2 && !rc; pass++) {
    int64_t lo = 0;
    for (int si = 0; si < ns && !rc; si++) {
      const loom_ps_shard *sh = loom_ps_placement_shard(p, si);
      if (sh->var != var) continue;
      int64_t hi = lo;
      while (hi < nu && w->uids[hi] < sh->row_end) hi++;
      int64_t m = hi - lo;
      loom_ps_client *c = loom_ps_cluster_client(w->cl, sh->ps);
      if (pass == 0) {
        for (int64_t j = lo; j < hi; j++) w->uids[j] -= sh->row_begin;
        uint8_t fixed[8];
        loom__ps_put32(fixed, sh->id);
        loom__ps_put32(fixed + 4, (uint32_t)m);
        rc = loom__ps_send(c, LOOM_PS_PUSH_ROWS, fixed, 8, w->uids + lo, (size_t)m * 8, w->usum + lo * row,
                           (size_t)(m * row) * 4, st);
        if (!rc) rc = loom__ps_send(c, LOOM_PS_PULL_ROWS, fixed, 8, w->uids + lo, (size_t)m * 8, NULL, 0, st);
        for (int64_t j = lo; j < hi; j++) w->uids[j] += sh->row_begin;
      } else {
        loom_ps_hdr h;
        rc = loom__ps_recv_hdr(c, LOOM_PS_PUSH_ROWS, &h, st);
        if (!rc) rc = h.body_len == 8 ? loom__ps_recv_body(c, NULL, 8, st)
                                      : loom_status_set(st, LOOM_DATA_LOSS, "PUSH_ROWS reply of %u bytes", h.body_len);
        if (!rc) rc = loom__ps_recv_end(c, &h, st);
        if (!rc) rc = loom__ps_recv_hdr(c, LOOM_PS_PULL_ROWS, &h, st);
        if (!rc && (uint64_t)h.body_len != 8 + 4 * (uint64_t)(m * row))
          rc = loom_status_set(st, LOOM_DATA_LOSS, "PULL_ROWS reply of %u bytes for %lld rows of %lld", h.body_len,
                               (long long)m, (long long)row);
        if (!rc) rc = loom__ps_recv_body(c, NULL, 8, st);
        for (int64_t j = lo; j < hi && !rc; j++)
          rc = loom__ps_recv_body(c, w->vals[var] + w->uids[j] * row, (size_t)row * 4, st);
        if (!rc) rc = loom__ps_recv_end(c, &h, st);
      }
      lo = hi;
    }
  }
  return rc;
}

loom_code loom_ps_worker_step(loom_ps_worker *w, const loom_output *feeds, loom_tensor *const *feed_values,
                              int nfeeds, loom_status *st) {
  loom_code rc = loom_session_run(w->s, feeds, feed_values, nfeeds, w->fetch, w->gt, w->nfetch, NULL, 0, st);
  if (rc) return rc;
  for (int i = 0; i < w->n; i++) w->g[i] = NULL;
  for (int j = 0; j < w->nfetch; j++)
    if (w->fetch_ix[j] == -1) w->g[w->fetch_var[j]] = loom_tensor_data(w->gt[j]);
  rc = loom_ps_cluster_pushpull(w->cl, w->g, w->dvals, st);
  for (int j = 0; j < w->nfetch && !rc; j++) {
    if (w->fetch_ix[j] < 0) continue;
    int var = w->fetch_var[j];
    const loom_ps_var_spec *vs = loom_ps_placement_var(w->p, var);
    int64_t nrows = vs->dims[0], row = nrows > 0 ? loom__numel(vs->ndim, vs->dims) / nrows : 0, nu = 0;
    rc = dedup(w, var, w->gt[j], w->gt[w->fetch_ix[j]], row, nrows, &nu, st);
    if (!rc) rc = sparse_exchange(w, var, nu, st);
  }
  if (!rc) mark_all(w);
  return rc;
}

/* ---- job seam (issue 17, estimator/job.c) ----
 * The step split in two around a monitored session's run, so that hooks see
 * the same run: the gradients to fetch, then the exchange on the fetched
 * values (what loom_ps_worker_step does after its own run). */
#include "distributed/job_seam.h"
int loom__ps_worker_fetches(const loom_ps_worker *w, const loom_output **fetches) {
  *fetches = w->fetch;
  return w->nfetch;
}

loom_code loom__ps_worker_exchange(loom_ps_worker *w, loom_tensor *const *gt, loom_status *st) {
  for (int i = 0; i < w->n; i++) w->g[i] = NULL;
  for (int j = 0; j < w->nfetch; j++)
    if (w->fetch_ix[j] == -1) w->g[w->fetch_var[j]] = loom_tensor_data(gt[j]);
  loom_code rc = loom_ps_cluster_pushpull(w->cl, w->g, w->dvals, st);
  for (int j = 0; j < w->nfetch && !rc; j++) {
    if (w->fetch_ix[j] < 0) continue;
    int var = w->fetch_var[j];
    const loom_ps_var_spec *vs = loom_ps_placement_var(w->p, var);
    int64_t nrows = vs->dims[0], row = nrows > 0 ? loom__numel(vs->ndim, vs->dims) / nrows : 0, nu = 0;
    rc = dedup(w, var, gt[j], gt[w->fetch_ix[j]], row, nrows, &nu, st);
    if (!rc) rc = sparse_exchange(w, var, nu, st);
  }
  if (!rc) mark_all(w);
  return rc;
}
