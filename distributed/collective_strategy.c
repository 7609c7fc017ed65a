/* distributed/collective_strategy.c - the all-reduce strategy (distributed/collective_strategy.h). */
#include "distributed/collective_strategy.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "base/fsutil.h"
#include "distributed/collective.h"
#include "distributed/ps_rules.h"
#include "engine/engine_api.h"
#include "loom/loom_train.h"

/* One gradient the train op consumes: dense (values) or sparse (values and indices). */
typedef struct coll_grad {
  loom_output values, indices;
  const char *var;    /* the variable it updates (for messages) */
  loom_tensor *fed_v; /* what the train op is fed (owned, reused across steps) */
  loom_tensor *fed_i;
} coll_grad;

typedef struct coll {
  loom__strategy base;
  int rank, size;
  int64_t bucket_bytes;
  loom_graph *g;
  loom_node *train_op;
  loom_variable *gs_var;
  int64_t gs, steps, reduced_bytes, gathered_bytes;
  double t_run, t_comm, t_apply, t_mark;
  coll_grad *gr;
  int ngr;
  loom_output *fetch; /* the gradients' outputs (dense: values; sparse: values, indices) */
  int nfetch;
  loom_output *feed; /* the same outputs, fed to the apply run */
  loom_tensor **feed_v;
  float *pack;
  int64_t pack_cap, first_bucket; /* the size of a step's first all-reduce (0: no step yet) */
  loom_tensor *gs_t;
} coll;

static loom_code oom(loom_status *st) { return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory"); }

/* ---------------------------------------------------------------- start */
/* "name dtype [dims]" of every global variable, one per line (malloc'd). */
static char *signature(loom_graph *g) {
  int n = 0;
  loom_variable *const *v = loom_global_variables(g, &n);
  size_t cap = 256, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  s[0] = 0;
  for (int i = 0; i < n; i++) {
    char line[1024];
    int64_t d[16];
    int nd = loom_variable_dims(v[i], d);
    int u = snprintf(line, sizeof line, "%s %s [", loom_variable_name(v[i]), loom_dtype_name(loom_variable_dtype(v[i])));
    for (int k = 0; k < nd && k < 16 && u < 900; k++) u += snprintf(line + u, sizeof line - (size_t)u, "%s%lld", k ? "," : "", (long long)d[k]);
    snprintf(line + u, sizeof line - (size_t)u, "]\n");
    size_t l = strlen(line);
    if (len + l + 1 > cap) {
      while (len + l + 1 > cap) cap *= 2;
      char *t = realloc(s, cap);
      if (!t) {
        free(s);
        return NULL;
      }
      s = t;
    }
    memcpy(s + len, line, l + 1);
    len += l;
  }
  return s;
}

/* The first line where a and b differ, into out ("(none)" for a missing line). */
static void first_diff(const char *a, const char *b, char *oa, char *ob, size_t cap) {
  while (*a || *b) {
    const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
    size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
    if (la != lb || memcmp(a, b, la)) {
      snprintf(oa, cap, "%.*s", (int)la, la ? a : "(no more variables)");
      snprintf(ob, cap, "%.*s", (int)lb, lb ? b : "(no more variables)");
      if (!la) snprintf(oa, cap, "(no more variables)");
      if (!lb) snprintf(ob, cap, "(no more variables)");
      return;
    }
    a += la + (ea ? 1 : 0);
    b += lb + (eb ? 1 : 0);
  }
  snprintf(oa, cap, "(none)");
  snprintf(ob, cap, "(none)");
}

/* Every rank built the same variables: the signatures gathered and compared with rank 0's. */
static loom_code check_models(coll *c, loom_status *st) {
  char *sig = signature(c->g);
  if (!sig) return oom(st);
  int64_t len = (int64_t)strlen(sig) + 1;
  int64_t *lens = loom__calloc((size_t)c->size, sizeof *lens);
  char *all = NULL;
  loom_code rc = lens ? loom__coll_allgather(&len, sizeof len, lens, st) : oom(st);
  int64_t total = 0;
  for (int r = 0; rc == LOOM_OK && r < c->size; r++) total += lens[r];
  if (rc == LOOM_OK && !(all = malloc((size_t)total))) rc = oom(st);
  if (rc == LOOM_OK) rc = loom__coll_allgatherv(sig, len, all, lens, st);
  if (rc == LOOM_OK) {
    const char *r0 = all;
    const char *p = all;
    for (int r = 0; r < c->size; p += lens[r], r++) {
      if (!strcmp(p, r0)) continue;
      char a[600], b[600];
      first_diff(r0, p, a, b, sizeof a);
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "collective strategy: the ranks built different models: rank 0 has variable '%s' where "
                           "rank %d has '%s' (every rank must run the same model_fn with the same params)",
                           a, r, b);
      break;
    }
  }
  free(all);
  free(sig);
  loom__free(lens);
  return rc;
}

static int out_eq(loom_output a, loom_output b) { return a.node == b.node && a.index == b.index; }

/* The gradients the train op's apply ops consume. */
static loom_code find_grads(coll *c, loom_status *st) {
  loom_node **order = NULL;
  int n = 0;
  loom_code rc = loom__graph_collect(c->g, 1, &c->train_op, &order, &n, st);
  if (rc) return rc;
  c->gr = loom__calloc((size_t)n + 1, sizeof *c->gr);
  if (!c->gr) {
    loom__free(order);
    return oom(st);
  }
  for (int i = 0; i < n; i++) {
    const char *op = loom_node_op_name(order[i]);
    int gi = -1, ii = -1;
    if (!loom__apply_op_grad_inputs(op, &gi, &ii)) {
      if (!strncmp(op, "Apply", 5) || !strncmp(op, "SparseApply", 11) || !strncmp(op, "ResourceApply", 13)) {
        rc = loom_status_set(st, LOOM_UNIMPLEMENTED,
                             "collective strategy: the train op's %s %s is not an update the strategy knows how to "
                             "feed with averaged gradients",
                             op, loom_node_name(order[i]));
        break;
      }
      continue;
    }
    loom_output v = loom_node_input(order[i], gi);
    int dup = 0;
    for (int k = 0; k < c->ngr; k++) dup |= out_eq(c->gr[k].values, v);
    if (dup) continue;
    coll_grad *g = &c->gr[c->ngr++];
    g->values = v;
    if (ii >= 0) g->indices = loom_node_input(order[i], ii);
    loom_output var = loom_node_input(order[i], 0);
    g->var = var.node ? loom_node_name(var.node) : "?";
  }
  loom__free(order);
  if (rc) return rc;
  int nf = 0;
  for (int k = 0; k < c->ngr; k++) nf += c->gr[k].indices.node ? 2 : 1;
  c->fetch = loom__calloc((size_t)nf + 1, sizeof *c->fetch);
  c->feed = loom__calloc((size_t)nf + 1, sizeof *c->feed);
  c->feed_v = loom__calloc((size_t)nf + 1, sizeof *c->feed_v);
  if (!c->fetch || !c->feed || !c->feed_v) return oom(st);
  for (int k = 0; k < c->ngr; k++) {
    c->fetch[c->nfetch++] = c->gr[k].values;
    if (c->gr[k].indices.node) c->fetch[c->nfetch++] = c->gr[k].indices;
  }
  memcpy(c->feed, c->fetch, (size_t)c->nfetch * sizeof *c->feed);
  return LOOM_OK;
}

/* Every global variable <- rank 0's value; the global step read into c->gs. */
static loom_code broadcast_vars(coll *c, loom_session *s, loom_status *st) {
  int n = 0;
  loom_variable *const *v = loom_global_variables(c->g, &n);
  loom_tensor *t = NULL;
  loom_code rc = LOOM_OK;
  for (int i = 0; rc == LOOM_OK && i < n; i++) {
    const char *name = loom_variable_name(v[i]);
    if ((rc = loom_session_read_variable(s, name, &t, st)) != LOOM_OK) break;
    if (loom_tensor_dtype(t) == LOOM_STRING) continue;
    rc = loom__coll_broadcast(loom_tensor_data(t), (int64_t)loom_tensor_nbytes(t), 0, st);
    if (rc == LOOM_OK && c->rank != 0) rc = loom_session_assign_variable(s, name, t, st);
  }
  if (rc == LOOM_OK && c->gs_var) {
    rc = loom_session_read_variable(s, loom_variable_name(c->gs_var), &t, st);
    if (rc == LOOM_OK)
      c->gs = loom_tensor_dtype(t) == LOOM_I64 ? *(const int64_t *)loom_tensor_data_const(t)
                                               : (int64_t) * (const int32_t *)loom_tensor_data_const(t);
  }
  loom_tensor_free(t);
  return rc;
}

/* FNV-1a over every global variable's bytes, in the graph's order. */
static loom_code checksum(coll *c, loom_session *s, uint64_t *h, loom_status *st) {
  int n = 0;
  loom_variable *const *v = loom_global_variables(c->g, &n);
  loom_tensor *t = NULL;
  *h = 1469598103934665603ULL;
  loom_code rc = LOOM_OK;
  for (int i = 0; rc == LOOM_OK && i < n; i++) {
    if ((rc = loom_session_read_variable(s, loom_variable_name(v[i]), &t, st)) != LOOM_OK) break;
    if (loom_tensor_dtype(t) == LOOM_STRING) continue;
    const unsigned char *p = loom_tensor_data_const(t);
    for (size_t k = 0, nb = loom_tensor_nbytes(t); k < nb; k++) *h = (*h ^ p[k]) * 1099511628211ULL;
  }
  loom_tensor_free(t);
  return rc;
}

/* ---------------------------------------------------------------- steps */
static loom_code set_gs(coll *c, loom_session *s, int64_t v, loom_status *st) {
  if (!c->gs_var) return LOOM_OK;
  if (loom_variable_dtype(c->gs_var) == LOOM_I64)
    *(int64_t *)loom_tensor_data(c->gs_t) = v;
  else
    *(int32_t *)loom_tensor_data(c->gs_t) = (int32_t)v;
  return loom_session_assign_variable(s, loom_variable_name(c->gs_var), c->gs_t, st);
}

/* *t <- a tensor of dtype dt and shape dims (reused when it already has them). */
static loom_code ensure(loom_tensor **t, loom_dtype dt, int nd, const int64_t *dims, loom_status *st) {
  if (*t && loom_tensor_dtype(*t) == dt && loom_tensor_ndim(*t) == nd &&
      !memcmp(loom_tensor_dims(*t), dims, (size_t)nd * sizeof *dims))
    return LOOM_OK;
  loom_tensor_free(*t);
  *t = loom_tensor_new(dt, nd, dims, st);
  return *t ? LOOM_OK : (loom_status_code(st) ? loom_status_code(st) : oom(st));
}

static loom_code pack_room(coll *c, int64_t n, loom_status *st) {
  if (n <= c->pack_cap) return LOOM_OK;
  float *p = realloc(c->pack, (size_t)n * sizeof(float));
  if (!p) return oom(st);
  c->pack = p;
  c->pack_cap = n;
  return LOOM_OK;
}

/* The number of ranks still training, from the flag that ends the step's first bucket (every training
 * rank adds 1; a rank at its end sends an all-reduce of the same size with 0). */
static loom_code check_training(coll *c, float flag_sum, int training, loom_status *st) {
  int n = (int)(flag_sum + 0.5f), want = training ? c->size : 0;
  if (n == want) return LOOM_OK;
  return loom_status_set(st, LOOM_FAILED_PRECONDITION,
                         "collective strategy: rank %d %s at global step %lld while %d of %d ranks are still "
                         "training: every rank must make the same number of steps (give max_steps and an input that "
                         "repeats)",
                         c->rank, training ? "is training" : "ended its training", (long long)c->gs, n, c->size);
}

/* Sums one bucket (grads [k0, k1) of the dense ones, packed) and unpacks the average. The first bucket of a
 * step (k0 0) ends with the ranks' training flag. */
static loom_code reduce_bucket(coll *c, loom_tensor *const *res, const int *fi, int k0, int k1, loom_status *st) {
  int64_t n = 0;
  for (int k = k0; k < k1; k++)
    if (!c->gr[k].indices.node) n += loom_tensor_numel(res[fi[k]]);
  int64_t total = n + (k0 == 0 ? 1 : 0);
  if (total == 0) return LOOM_OK;
  if (pack_room(c, total, st) != LOOM_OK) return loom_status_code(st);
  if (k0 == 0) {
    c->pack[n] = 1.0f;
    c->first_bucket = total;
  }
  int64_t off = 0;
  for (int k = k0; k < k1; k++) {
    if (c->gr[k].indices.node) continue;
    int64_t m = loom_tensor_numel(res[fi[k]]);
    memcpy(c->pack + off, loom_tensor_data_const(res[fi[k]]), (size_t)m * sizeof(float));
    off += m;
  }
  loom_code rc = loom__coll_allreduce_sum(c->pack, total, st);
  if (rc == LOOM_OK && k0 == 0) rc = check_training(c, c->pack[n], 1, st);
  if (rc) return rc;
  c->reduced_bytes += n * (int64_t)sizeof(float);
  float inv = 1.0f / (float)c->size;
  off = 0;
  for (int k = k0; k < k1; k++) {
    if (c->gr[k].indices.node) continue;
    const loom_tensor *r = res[fi[k]];
    if ((rc = ensure(&c->gr[k].fed_v, LOOM_F32, loom_tensor_ndim(r), loom_tensor_dims(r), st)) != LOOM_OK) return rc;
    float *d = loom_tensor_data(c->gr[k].fed_v);
    int64_t m = loom_tensor_numel(r);
    for (int64_t i = 0; i < m; i++) d[i] = c->pack[off + i] * inv;
    off += m;
  }
  return LOOM_OK;
}

/* A sparse gradient: every rank's rows (divided by the number of ranks) and ids, gathered in rank order. */
static loom_code gather_sparse(coll *c, coll_grad *g, const loom_tensor *vals, const loom_tensor *ids,
                               loom_status *st) {
  int nd = loom_tensor_ndim(vals);
  if (nd < 1 || loom_tensor_ndim(ids) != 1 || loom_tensor_dim(ids, 0) != loom_tensor_dim(vals, 0))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "collective strategy: the sparse gradient of %s has rows of rank %d and %lld ids", g->var,
                           nd, (long long)loom_tensor_numel(ids));
  int64_t rows = loom_tensor_dim(vals, 0), width = rows ? loom_tensor_numel(vals) / rows : 0;
  int64_t *counts = loom__calloc((size_t)c->size * 3, sizeof *counts);
  if (!counts) return oom(st);
  int64_t *bytes = counts + c->size, *ibytes = counts + 2 * c->size;
  loom_code rc = loom__coll_allgather(&rows, sizeof rows, counts, st);
  int64_t total = 0;
  size_t isz = loom_dtype_size(loom_tensor_dtype(ids));
  for (int r = 0; rc == LOOM_OK && r < c->size; r++) {
    total += counts[r];
    bytes[r] = counts[r] * width * (int64_t)sizeof(float);
    ibytes[r] = counts[r] * (int64_t)isz;
  }
  int64_t dims[16];
  for (int k = 0; k < nd && k < 16; k++) dims[k] = loom_tensor_dim(vals, k);
  dims[0] = total;
  if (rc == LOOM_OK) rc = ensure(&g->fed_v, LOOM_F32, nd, dims, st);
  if (rc == LOOM_OK) rc = ensure(&g->fed_i, loom_tensor_dtype(ids), 1, &total, st);
  if (rc == LOOM_OK)
    rc = loom__coll_allgatherv(loom_tensor_data_const(vals), rows * width * (int64_t)sizeof(float),
                               loom_tensor_data(g->fed_v), bytes, st);
  if (rc == LOOM_OK)
    rc = loom__coll_allgatherv(loom_tensor_data_const(ids), rows * (int64_t)isz, loom_tensor_data(g->fed_i), ibytes,
                               st);
  if (rc == LOOM_OK) {
    float inv = 1.0f / (float)c->size, *d = loom_tensor_data(g->fed_v);
    for (int64_t i = 0, m = total * width; i < m; i++) d[i] *= inv;
    c->gathered_bytes += total * (width * (int64_t)sizeof(float) + (int64_t)isz);
  }
  loom__free(counts);
  return rc;
}

/* The model's own train op on the averaged gradients c->feed_v[0..n); its increment makes the global
 * step gs + 1. */
static loom_code apply(coll *c, loom_session *s, int n, double t1, loom_status *st) {
  loom_code rc = set_gs(c, s, c->gs, st);
  if (rc == LOOM_OK) rc = loom_session_run(s, c->feed, c->feed_v, n, NULL, NULL, 0, &c->train_op, 1, st);
  if (rc == LOOM_OK) {
    c->gs++;
    c->steps++;
  }
  c->t_apply += loom__mono_secs() - t1;
  return rc;
}

typedef struct coll_hook {
  coll *c;
} coll_hook;

static loom_code ch_acs(void *self, loom_session *s, loom_status *st) {
  coll *c = ((coll_hook *)self)->c;
  double t0 = loom__mono_secs();
  loom_code rc = broadcast_vars(c, s, st);
  if (rc == LOOM_OK)
    loom__log(LOOM_LOG_INFO, "collective: rank %d of %d (%s): variables broadcast from rank 0 in %.3f s; global step %lld; "
              "%d gradient(s), fusion buckets of %lld bytes",
              c->rank, c->size, loom__coll_name(), loom__mono_secs() - t0, (long long)c->gs, c->ngr,
              (long long)c->bucket_bytes);
  return rc;
}

static loom_code ch_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  coll *c = ((coll_hook *)self)->c;
  /* the other hooks see the step this run makes, as a local train op's increment */
  loom_code rc = set_gs(c, loom_hook_context_session(ctx), c->gs + 1, st);
  a->nfetches = c->nfetch;
  a->fetches = c->fetch;
  c->t_mark = loom__mono_secs();
  return rc;
}

static loom_code ch_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  coll *c = ((coll_hook *)self)->c;
  double t0 = loom__mono_secs();
  c->t_run += t0 - c->t_mark;
  if (c->size == 1) { /* one rank: its gradients are the averages */
    for (int i = 0; i < c->nfetch; i++) c->feed_v[i] = res[i];
    return apply(c, loom_hook_context_session(ctx), c->nfetch, t0, st);
  }
  int *fi = loom__calloc((size_t)c->ngr + 1, sizeof *fi);
  if (!fi) return oom(st);
  int f = 0;
  for (int k = 0; k < c->ngr; k++) {
    fi[k] = f;
    f += c->gr[k].indices.node ? 2 : 1;
    if (!c->gr[k].indices.node && loom_tensor_dtype(res[fi[k]]) != LOOM_F32) {
      loom__free(fi);
      return loom_status_set(st, LOOM_UNIMPLEMENTED,
                             "collective strategy: the gradient of %s is %s; the all-reduce sums float32 gradients",
                             c->gr[k].var, loom_dtype_name(loom_tensor_dtype(res[fi[k]])));
    }
  }
  loom_code rc = LOOM_OK;
  /* dense: buckets of consecutive gradients up to bucket_bytes (a larger gradient is a bucket of its own) */
  for (int k0 = 0; rc == LOOM_OK && k0 < c->ngr;) {
    int k1 = k0;
    int64_t b = 0;
    while (k1 < c->ngr) {
      int64_t nb = c->gr[k1].indices.node ? 0 : (int64_t)loom_tensor_nbytes(res[fi[k1]]);
      if (k1 > k0 && c->bucket_bytes > 0 && b + nb > c->bucket_bytes) break;
      b += nb;
      k1++;
    }
    rc = reduce_bucket(c, res, fi, k0, k1, st);
    k0 = k1;
  }
  for (int k = 0; rc == LOOM_OK && k < c->ngr; k++)
    if (c->gr[k].indices.node) rc = gather_sparse(c, &c->gr[k], res[fi[k]], res[fi[k] + 1], st);
  loom__free(fi);
  double t1 = loom__mono_secs();
  c->t_comm += t1 - t0;
  if (rc) return rc;
  int n = 0;
  for (int k = 0; k < c->ngr; k++) {
    c->feed_v[n++] = c->gr[k].fed_v;
    if (c->gr[k].indices.node) c->feed_v[n++] = c->gr[k].fed_i;
  }
  return apply(c, loom_hook_context_session(ctx), n, t1, st);
}

/* Every rank ended at the same step (the all-reduce a training rank would match, with flag 0), and every
 * rank's variables are the same: checksums gathered and compared. */
static loom_code ch_end(void *self, loom_session *s, loom_status *st) {
  coll *c = ((coll_hook *)self)->c;
  uint64_t h = 0;
  loom_code rc = LOOM_OK;
  if (c->size > 1 && c->first_bucket > 0) {
    rc = pack_room(c, c->first_bucket, st);
    if (rc == LOOM_OK) {
      memset(c->pack, 0, (size_t)c->first_bucket * sizeof(float));
      rc = loom__coll_allreduce_sum(c->pack, c->first_bucket, st);
    }
    if (rc == LOOM_OK) rc = check_training(c, c->pack[c->first_bucket - 1], 0, st);
    if (rc) return rc;
  }
  rc = checksum(c, s, &h, st);
  uint64_t *all = rc == LOOM_OK ? loom__calloc((size_t)c->size, sizeof *all) : NULL;
  if (rc == LOOM_OK && !all) rc = oom(st);
  if (rc == LOOM_OK) rc = loom__coll_allgather(&h, sizeof h, all, st);
  for (int r = 0; rc == LOOM_OK && r < c->size; r++)
    if (all[r] != h)
      rc = loom_status_set(st, LOOM_DATA_LOSS,
                           "collective strategy: the ranks' variables differ after training: rank %d has checksum "
                           "%016llx, rank %d %016llx",
                           c->rank, (unsigned long long)h, r, (unsigned long long)all[r]);
  loom__free(all);
  double k = c->steps ? 1e3 / (double)c->steps : 0;
  fprintf(stderr,
          "collective: rank=%d size=%d steps=%lld global_step=%lld variables_checksum=%016llx run_ms=%.3f "
          "comm_ms=%.3f apply_ms=%.3f allreduce_bytes_per_step=%lld allgather_bytes_per_step=%lld\n",
          c->rank, c->size, (long long)c->steps, (long long)c->gs, (unsigned long long)h, c->t_run * k, c->t_comm * k,
          c->t_apply * k, c->steps ? (long long)(c->reduced_bytes / c->steps) : 0LL,
          c->steps ? (long long)(c->gathered_bytes / c->steps) : 0LL);
  return rc;
}

static void ch_destroy(void *self) { loom__free(self); }

/* -------------------------------------------------------------- strategy */
static loom_code cs_begin(loom__strategy *base, loom_graph *g, loom_node *train_op, loom_output loss,
                          loom_variable *global_step, loom__strategy_plan *plan, loom_status *st) {
  (void)loss;
  coll *c = (coll *)base;
  c->g = g;
  c->train_op = train_op;
  c->gs_var = global_step;
  plan->run_train_op = 0; /* the hook runs it on the averaged gradients */
  plan->is_chief = c->rank == 0;
  plan->restore = 1; /* every rank restores; rank 0's values are then broadcast */
  if (!train_op) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "collective strategy: the model has no train op");
  if (global_step && !(c->gs_t = loom_tensor_new(loom_variable_dtype(global_step), 0, NULL, st)))
    return loom_status_code(st) ? loom_status_code(st) : oom(st);
  loom_code rc = check_models(c, st);
  if (rc == LOOM_OK) rc = find_grads(c, st);
  if (rc) return rc;
  coll_hook *h = loom__calloc(1, sizeof *h);
  static const loom_hook_ops ops = {NULL, ch_acs, ch_before, ch_after, ch_end, ch_destroy};
  loom_hook *hk = h ? loom_hook_new(&ops, h, "CollectiveAllReduceHook") : NULL;
  if (!hk) {
    loom__free(h);
    return oom(st);
  }
  h->c = c;
  plan->hook = hk;
  return LOOM_OK;
}

static loom_code cs_end(loom__strategy *base, int began, loom_code rc, loom_status *st) {
  (void)base;
  (void)began;
  (void)st;
  return rc;
}

static const loom__strategy_ops COLLECTIVE = {LOOM__STRATEGY_COLLECTIVE, "collective", cs_begin, cs_end};

loom__strategy *loom__collective_strategy_new(double timeout_s, int64_t bucket_bytes, loom_status *st) {
  if (loom__coll_init(timeout_s, st) != LOOM_OK) return NULL;
  coll *c = loom__calloc(1, sizeof *c);
  if (!c) {
    oom(st);
    return NULL;
  }
  c->base.ops = &COLLECTIVE;
  c->rank = loom__coll_rank();
  c->size = loom__coll_size();
  c->bucket_bytes = bucket_bytes < 0 ? 25 << 20 : bucket_bytes;
  return &c->base;
}

void loom__collective_strategy_free(loom__strategy *base) {
  coll *c = (coll *)base;
  if (!c) return;
  for (int k = 0; k < c->ngr; k++) {
    loom_tensor_free(c->gr[k].fed_v);
    loom_tensor_free(c->gr[k].fed_i);
  }
  loom__free(c->gr);
  loom__free(c->fetch);
  loom__free(c->feed);
  loom__free(c->feed_v);
  loom_tensor_free(c->gs_t);
  free(c->pack);
  loom__free(c);
}
