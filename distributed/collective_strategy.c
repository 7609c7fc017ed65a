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
#include "kernels/kernel.h"
#include "loom/loom_train.h"

/* One gradient the train op consumes: dense (values) or sparse (values and indices). */
typedef struct coll_grad {
  loom_output values, indices;
  const char *var;    /* the variable it updates (for messages) */
  int var_order;      /* the variable's place in creation order (global variables' order) */
  int64_t vdims[LOOM_MAX_DIMS];
  int vnd;            /* the variable's shape (vnd -1: unknown) */
  const char *op;     /* the apply op's type */
  int dense_ok;       /* sparse: the update of a zero row leaves it as it is (SGD, Adagrad): a densified
                         gradient gives the sparse update */
  int path;           /* sparse: the last step's exchange (0 none yet, 1 allgather, 2 dense all-reduce) */
  int64_t pos;        /* dense, buckets planned: its floats in the pack, [pos, pos + numel) */
  int64_t numel;
  int bucket;
  int left_done;      /* this step: packed */
  char span[96];      /* its exchange's name in a trace (sparse) */
  int64_t t0, t1;     /* sparse: its exchange this step (ns) */
  loom_tensor *fed_v; /* what the train op is fed (owned, reused across steps) */
  loom_tensor *fed_i;
  float *dbuf;        /* sparse by dense all-reduce: the table and the bad-id count (fed_v views it) */
  int fused;          /* the 1/N average is the gradient scale of the apply ops that read it (no pass of
                         ours over it); 0: divided here (see fuse_average) */
} coll_grad;

/* A fusion bucket: dense gradients bk[g0..g1) of the bucket order, packed at pack[off, off + n) (bucket 0:
 * one more float, the training flag). Its all-reduce starts once all of them are final (the run observer)
 * or after the run, and is waited before the apply. */
typedef struct coll_bucket {
  int g0, g1;
  int64_t off, n;
  int left;        /* this step: gradients not yet packed */
  int state;       /* this step: 0 not started, 1 in flight, 2 done */
  int req;
  int64_t t_start, t_done; /* ns */
  char span[96];
} coll_bucket;

typedef struct coll {
  loom__strategy base;
  int rank, size;
  int64_t bucket_bytes, first_bucket_bytes;
  loom_graph *g;
  loom_node *train_op;
  loom_variable *gs_var;
  int64_t gs, steps, reduced_bytes, gathered_bytes;
  int64_t scaled_bytes; /* bytes of averaged gradients divided by N here, outside the optimizer's kernels */
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
  /* fusion buckets (planned at the first step from the gradients' sizes) */
  int overlap;     /* start a bucket's all-reduce during the backward pass (LOOM_COLLECTIVE_OVERLAP, 1) */
  int async;       /* the transport's all-reduce runs beside the backward pass (else it blocks it: none hidden) */
  int fuse;        /* the optimizer ops average the sums (LOOM_COLLECTIVE_FUSE_AVERAGE, 1; fuse_average) */
  int *bk;         /* the dense gradients (indices into gr) in bucket order: reverse creation order */
  int *fi;         /* per gradient, its values' position in the fetches (its indices' next) */
  int nbk;
  coll_bucket *b;
  int nb, next_start, planned;
  loom_status *cb_st; /* an error inside the run observer, reported after the run */
  loom_session *observed;
  int *fmap;             /* the run observer: per fetch position, the dense gradient (bucket order; nbk: none) */
  loom_output *fmap_out; /* and the output seen there */
  int nfmap;
  int64_t t_run_end;
  int64_t wall_ns, hidden_ns; /* all-reduce wall time (union of the buckets' spans) and its part before
                                 the backward pass ended, summed over the steps */
  int64_t sparse_dense, sparse_gathered; /* sparse gradients exchanged by each path, over the steps */
  double timeout_s;                      /* the collective timeout */
  loom__dev_comm *dcomm; /* a device session's dense buckets go through NCCL (NULL: the host transport's) */
  const char *allreduce_path; /* "mpi", "gloo", "nccl" (the summary line) */
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
  int nv = 0;
  loom_variable *const *vars = loom_global_variables(c->g, &nv);
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
    g->var_order = nv;
    g->vnd = -1;
    for (int k = 0; k < nv; k++)
      if (loom_variable_node(vars[k]) == var.node) {
        g->var_order = k;
        g->vnd = loom_variable_dims(vars[k], g->vdims);
      }
    /* the densified update equals the sparse one (the kernels sum duplicate ids first, as TF does):
     * SGD's and Adagrad's (accumulators > 0) update of a zero row leaves it as it is, and TF's non-lazy
     * sparse Adam updates every row anyway; lazy Adam, Momentum, RMSProp and Adadelta update only the
     * given rows (a zero row's slots would decay) and FTRL recomputes a zero row from its slots (a row
     * never updated would lose its initial value) */
    const struct loom_attrs *at = loom__node_attrs(order[i]);
    int lazy = at && ((at->num >> 1) & 1);
    g->op = op;
    g->dense_ok = ii >= 0 && (!strcmp(op, "SparseApplyGradientDescent") || !strcmp(op, "SparseApplyAdagrad") ||
                              (!strcmp(op, "SparseApplyAdam") && !lazy));
  }
  loom__free(order);
  if (rc) return rc;
  /* in reverse creation order (the order the backward pass produces them): stable insertion sort */
  for (int k = 1; k < c->ngr; k++) {
    coll_grad t = c->gr[k];
    int j = k;
    while (j > 0 && c->gr[j - 1].var_order < t.var_order) {
      c->gr[j] = c->gr[j - 1];
      j--;
    }
    c->gr[j] = t;
  }
  int nf = 0;
  for (int k = 0; k < c->ngr; k++) nf += c->gr[k].indices.node ? 2 : 1;
  c->fetch = loom__calloc((size_t)nf + 1, sizeof *c->fetch);
  c->feed = loom__calloc((size_t)nf + 1, sizeof *c->feed);
  c->feed_v = loom__calloc((size_t)nf + 1, sizeof *c->feed_v);
  c->bk = loom__calloc((size_t)c->ngr + 1, sizeof *c->bk);
  c->fi = loom__calloc((size_t)c->ngr + 1, sizeof *c->fi);
  if (!c->fetch || !c->feed || !c->feed_v || !c->bk || !c->fi) return oom(st);
  for (int k = 0; k < c->ngr; k++) {
    c->fi[k] = c->nfetch;
    c->fetch[c->nfetch++] = c->gr[k].values;
    if (c->gr[k].indices.node) {
      c->fetch[c->nfetch++] = c->gr[k].indices;
    }
    if (!c->gr[k].indices.node) c->bk[c->nbk++] = k;
  }
  memcpy(c->feed, c->fetch, (size_t)c->nfetch * sizeof *c->feed);
  return LOOM_OK;
}

/* The 1/N average folded into the optimizer: every apply op that reads a gradient the strategy feeds gets
 * the gradient scale 1/N (loom_apply_set_gradient_scale: the kernels read sum * (1/N) rounded to float,
 * the bits the pass p[j] *= 1/N gave), so the fed sums are never rewritten. Where that cannot give the
 * average, the strategy keeps dividing the fed values itself (g->fused 0):
 *  - a node of the apply run other than an apply op's gradient input reads the fed value (a gradient
 *    summary or norm computed from it, a custom update): it must see the average;
 *  - an apply op that reads it already has a gradient scale of its own (set by the model_fn).
 * One rank: nothing to average. LOOM_COLLECTIVE_FUSE_AVERAGE=0: the strategy divides every gradient itself
 * (the same bits for dense gradients; a check of the fusion). */
static loom_code fuse_average(coll *c, loom_status *st) {
  if (c->size < 2 || c->ngr == 0) return LOOM_OK;
  if (!c->fuse) {
    if (c->rank == 0)
      loom__log(LOOM_LOG_INFO, "collective: LOOM_COLLECTIVE_FUSE_AVERAGE=0: the strategy divides every gradient by %d",
                c->size);
    return LOOM_OK;
  }
  loom_node **order = NULL;
  int n = 0;
  loom_code rc = loom__graph_collect(c->g, 1, &c->train_op, &order, &n, st);
  if (rc) return rc;
  const float inv = 1.0f / (float)c->size;
  int nfused = 0;
  char kept[512] = "";
  size_t kl = 0;
  for (int k = 0; k < c->ngr; k++) {
    coll_grad *g = &c->gr[k];
    const char *why = NULL;
    loom_node *other = NULL;
    for (int i = 0; i < n && !why; i++) {
      int gi = -1, ii = -1, apply = loom__apply_op_grad_inputs(loom_node_op_name(order[i]), &gi, &ii);
      for (int j = 0, m = loom_node_num_inputs(order[i]); j < m && !why; j++) {
        if (!out_eq(loom_node_input(order[i], j), g->values)) continue;
        other = order[i];
        if (!apply || j != gi)
          why = "another op reads it";
        else if (loom_apply_gradient_scale(order[i]) != 1.0f)
          why = "its apply op has a gradient scale of its own";
      }
    }
    g->fused = !why;
    if (why && kl + 1 < sizeof kept)
      kl += (size_t)snprintf(kept + kl, sizeof kept - kl, "%s%s (%s: %s)", kl ? ", " : "", g->var, why,
                             other ? loom_node_name(other) : "?");
    if (kl >= sizeof kept) kl = sizeof kept - 1;
    nfused += g->fused;
  }
  for (int i = 0; rc == LOOM_OK && i < n; i++) {
    int gi = -1, ii = -1;
    if (!loom__apply_op_grad_inputs(loom_node_op_name(order[i]), &gi, &ii)) continue;
    loom_output v = loom_node_input(order[i], gi);
    for (int k = 0; k < c->ngr; k++)
      if (c->gr[k].fused && out_eq(c->gr[k].values, v)) {
        rc = loom_apply_set_gradient_scale(order[i], inv, st);
        break;
      }
  }
  loom__free(order);
  if (rc == LOOM_OK && c->rank == 0)
    loom__log(LOOM_LOG_INFO, "collective: the 1/%d average is read by the optimizer ops of %d of %d gradient(s)%s%s",
              c->size, nfused, c->ngr, nfused < c->ngr ? "; divided here: " : "", nfused < c->ngr ? kept : "");
  return rc;
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

static int64_t now_ns(void) { return (int64_t)(loom__mono_secs() * 1e9); }

/* An all-reduce of n floats on the device (NCCL). On failure (a timeout aborted the communicator) the
 * host transport's liveness probe names the lost ranks: a one-float all-reduce over it, itself bounded
 * by the collective timeout. */
static loom_code dev_allreduce(coll *c, float *buf, int64_t n, loom_status *st) {
  loom_code rc = loom__dev_comm_allreduce_host(c->dcomm, buf, n, st);
  if (rc == LOOM_OK) return LOOM_OK;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", loom_status_message(st));
  loom_status *probe = loom_status_new();
  float one = 1.0f;
  loom_code prc = probe ? loom__coll_allreduce_sum(&one, 1, probe) : LOOM_OK;
  if (prc != LOOM_OK)
    rc = loom_status_set(st, prc, "collective strategy: rank %d: %s; over %s: %s", c->rank, msg, loom__coll_name(),
                         loom_status_message(probe));
  else
    rc = loom_status_set(st, rc, "collective strategy: rank %d: %s (every rank answered over %s)", c->rank, msg,
                         loom__coll_name());
  loom_status_free(probe);
  return rc;
}

/* Fusion buckets from the dense gradients' sizes (the first step's results res, fetch indices fi): the
 * gradients in bucket order (reverse creation order), consecutive ones together up to bucket_bytes (a
 * larger gradient is a bucket of its own; 0: one bucket), the first bucket up to first_bucket_bytes (as
 * PyTorch DDP's first bucket: the output layers' gradients, final early in the backward pass, start
 * their all-reduce while the rest is computed). Every rank plans the same buckets. */
static loom_code plan_buckets(coll *c, loom_tensor *const *res, const int *fi, loom_status *st) {
  c->b = loom__calloc((size_t)c->nbk + 1, sizeof *c->b);
  if (!c->b) return oom(st);
  int64_t off = 0;
  for (int i0 = 0; i0 < c->nbk || (i0 == 0 && c->nbk == 0);) {
    int i1 = i0;
    int64_t bytes = 0;
    while (i1 < c->nbk) {
      coll_grad *g = &c->gr[c->bk[i1]];
      int64_t nb = (int64_t)loom_tensor_nbytes(res[fi[c->bk[i1]]]);
      int64_t cap = c->nb == 0 && c->first_bucket_bytes > 0 && c->first_bucket_bytes < c->bucket_bytes
                        ? c->first_bucket_bytes
                        : c->bucket_bytes;
      if (i1 > i0 && c->bucket_bytes > 0 && bytes + nb > cap) break;
      g->numel = loom_tensor_numel(res[fi[c->bk[i1]]]);
      g->pos = off + bytes / (int64_t)sizeof(float);
      g->bucket = c->nb;
      bytes += nb;
      i1++;
    }
    coll_bucket *b = &c->b[c->nb];
    b->g0 = i0;
    b->g1 = i1;
    b->off = off;
    b->n = bytes / (int64_t)sizeof(float) + (c->nb == 0 ? 1 : 0); /* bucket 0 ends with the training flag */
    snprintf(b->span, sizeof b->span, "allreduce bucket %d (%d gradients, %lld bytes)", c->nb, i1 - i0,
             (long long)bytes);
    off += b->n;
    c->nb++;
    i0 = i1;
    if (c->nbk == 0) break;
  }
  c->first_bucket = c->b[0].n;
  if (pack_room(c, off, st) != LOOM_OK) return loom_status_code(st);
  c->planned = 1;
  return LOOM_OK;
}

/* Starts bucket k's all-reduce (its gradients packed). */
static loom_code start_bucket(coll *c, int k, loom_status *st) {
  coll_bucket *b = &c->b[k];
  if (k == 0) c->pack[b->n - 1] = 1.0f;
  b->t_start = now_ns();
  loom_code rc;
  if (c->dcomm) { /* a device session: the bucket all-reduced on the device (after the run) */
    rc = dev_allreduce(c, c->pack + b->off, b->n, st);
    b->t_done = now_ns();
  } else if (c->overlap) {
    rc = loom__coll_iallreduce_sum(c->pack + b->off, b->n, &b->req, st);
  } else { /* the plain path: one blocking all-reduce after another */
    rc = loom__coll_allreduce_sum(c->pack + b->off, b->n, st);
    b->t_done = now_ns();
  }
  if (rc == LOOM_OK) b->state = c->overlap && !c->dcomm ? 1 : 2;
  return rc;
}

/* Starts the buckets whose gradients are all packed, in bucket order (every rank starts them in the same
 * order). */
static loom_code start_ready(coll *c, loom_status *st) {
  loom_code rc = LOOM_OK;
  while (rc == LOOM_OK && c->next_start < c->nb && c->b[c->next_start].left == 0)
    rc = start_bucket(c, c->next_start++, st);
  return rc;
}

/* Run observer: a fetched value is final. A dense gradient is packed into its bucket; a bucket whose
 * gradients are all packed starts. */
static void obs_fetch(void *user, int f, loom_output out, const void *data, loom_dtype dt, int ndim,
                      const int64_t *dims) {
  coll *c = user;
  if (loom_status_code(c->cb_st)) return;
  /* which dense gradient: remembered per fetch position (the run's fetch list is the same from step to
   * step unless a hook fetches only at some steps) */
  int k;
  if (f >= 0 && f < c->nfmap && out_eq(c->fmap_out[f], out)) {
    k = c->fmap[f];
  } else {
    k = 0;
    while (k < c->nbk && !out_eq(c->gr[c->bk[k]].values, out)) k++;
    if (f >= 0 && f >= c->nfmap) {
      int n = f + 16;
      int *m = realloc(c->fmap, (size_t)n * sizeof *m);
      if (m) c->fmap = m;
      loom_output *o = m ? realloc(c->fmap_out, (size_t)n * sizeof *o) : NULL;
      if (o) {
        c->fmap_out = o;
        memset(o + c->nfmap, 0, (size_t)(n - c->nfmap) * sizeof *o);
        c->nfmap = n;
      }
    }
    if (f >= 0 && f < c->nfmap) {
      c->fmap[f] = k;
      c->fmap_out[f] = out;
    }
  }
  if (k >= c->nbk) return; /* not a dense gradient (the loss, a sparse gradient, another hook's fetch) */
  coll_grad *g = &c->gr[c->bk[k]];
  if (g->left_done) return; /* fetched twice in one run (by another hook too) */
  g->left_done = 1;
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[i];
  if (dt != LOOM_F32 || n != g->numel) {
    loom_status_set(c->cb_st, LOOM_FAILED_PRECONDITION,
                    "collective strategy: the gradient of %s is %s with %lld elements, planned as float32 with %lld",
                    g->var, loom_dtype_name(dt), (long long)n, (long long)g->numel);
    return;
  }
  memcpy(c->pack + g->pos, data, (size_t)n * sizeof(float));
  c->b[g->bucket].left--;
  start_ready(c, c->cb_st);
}

/* Tests the oldest bucket in flight (MPI progresses the others with it). */
static loom_code progress(coll *c, loom_status *st) {
  for (int k = 0; k < c->next_start; k++) {
    coll_bucket *b = &c->b[k];
    if (b->state != 1) continue;
    int done = 0;
    loom_code rc = loom__coll_test(b->req, &done, st);
    if (rc == LOOM_OK && done) {
      b->state = 2;
      b->t_done = now_ns();
    }
    return rc;
  }
  return LOOM_OK;
}

static void obs_step(void *user) {
  coll *c = user;
  if (!loom_status_code(c->cb_st)) progress(c, c->cb_st);
}

/* After a failure with all-reduces in flight: the other ranks may never complete them. */
static void abandon_inflight(coll *c) {
  for (int k = 0; k < c->nb; k++)
    if (c->b[k].state == 1) {
      loom__coll_abandon();
      return;
    }
}

/* The step's all-reduce wall time (the union of the buckets' spans) and its part before the backward pass
 * ended (t_run_end), added to the strategy's totals (buckets start in order: spans sorted by start). */
static void add_span(coll *c, int64_t a, int64_t z) {
  c->wall_ns += z - a;
  if (!c->async) return; /* a blocking transport all-reduced inside the run: the run waited, nothing hidden */
  int64_t e = z < c->t_run_end ? z : c->t_run_end;
  if (e > a) c->hidden_ns += e - a;
}
static void account_overlap(coll *c) {
  int64_t a0 = 0, a1 = 0;
  int open = 0;
  for (int k = 0; k < c->nb; k++) {
    int64_t a = c->b[k].t_start, z = c->b[k].t_done;
    if (open && a <= a1) {
      if (z > a1) a1 = z;
      continue;
    }
    if (open) add_span(c, a0, a1);
    a0 = a;
    a1 = z;
    open = 1;
  }
  if (open) add_span(c, a0, a1);
}

/* The average of n summed values d of gradient g: divided here unless its optimizer ops read it scaled
 * (g->fused); scaled_bytes counts what is divided here. */
static void average(coll *c, const coll_grad *g, float *d, int64_t n) {
  if (!g->fused) {
    float inv = 1.0f / (float)c->size;
    for (int64_t i = 0; i < n; i++) d[i] *= inv;
    c->scaled_bytes += n * (int64_t)sizeof(float);
  }
}

/* Completes every bucket (packing from the results and starting those the run did not start), checks the
 * training flag, and unpacks the averages into the fed tensors. */
static loom_code finish_buckets(coll *c, loom_tensor *const *res, const int *fi, loom_status *st) {
  loom_code rc = LOOM_OK;
  for (int k = c->next_start; rc == LOOM_OK && k < c->nb; k++) { /* not started during the run */
    coll_bucket *b = &c->b[k];
    for (int i = b->g0; i < b->g1; i++) {
      coll_grad *g = &c->gr[c->bk[i]];
      memcpy(c->pack + g->pos, loom_tensor_data_const(res[fi[c->bk[i]]]), (size_t)g->numel * sizeof(float));
    }
    b->left = 0;
  }
  if (rc == LOOM_OK) rc = start_ready(c, st);
  for (int k = 0; rc == LOOM_OK && k < c->nb; k++) {
    coll_bucket *b = &c->b[k];
    if (b->state == 1) {
      rc = loom__coll_wait(b->req, st);
      if (rc) break;
      b->state = 2;
      b->t_done = now_ns();
    }
    if (k == 0) rc = check_training(c, c->pack[b->n - 1], 1, st);
  }
  if (rc) {
    abandon_inflight(c);
    return rc;
  }
  account_overlap(c);
  /* the train op is fed views of the pack (no copy): the sums, averaged by its apply ops' gradient scale
   * (fuse_average), or the averages in place */
  for (int i = 0; i < c->nbk; i++) {
    coll_grad *g = &c->gr[c->bk[i]];
    const loom_tensor *r = res[fi[c->bk[i]]];
    float *p = c->pack + g->pos;
    if (!g->fed_v || loom_tensor_data(g->fed_v) != p) {
      loom_tensor_free(g->fed_v);
      g->fed_v = loom_tensor_wrap(LOOM_F32, loom_tensor_ndim(r), loom_tensor_dims(r), p,
                                  (size_t)g->numel * sizeof(float), NULL, NULL, st);
      if (!g->fed_v) return loom_status_code(st) ? loom_status_code(st) : oom(st);
    }
    average(c, g, p, g->numel);
    c->reduced_bytes += g->numel * (int64_t)sizeof(float);
  }
  return LOOM_OK;
}

/* A sparse gradient whose densified form is cheaper to exchange (the rule in gather_sparse): this rank's
 * rows summed into a zero table of the variable's shape, all-reduced, averaged (by the apply op's gradient
 * scale, or here: fuse_average), and fed with every row's id. The all-reduce ends with the count of ids
 * outside the table, so that every rank fails on one rank's bad id (as the sparse update of the gathered
 * ids would). */
static loom_code dense_sparse(coll *c, coll_grad *g, const loom_tensor *vals, const loom_tensor *ids, int64_t width,
                              loom_status *st) {
  int64_t vocab = g->vdims[0], rows = loom_tensor_dim(vals, 0), n = vocab * width;
  if (!g->dbuf && !(g->dbuf = malloc((size_t)(n + 1) * sizeof(float)))) return oom(st);
  if (!g->fed_v || loom_tensor_data(g->fed_v) != g->dbuf || loom_tensor_numel(g->fed_v) != n) {
    loom_tensor_free(g->fed_v);
    if (!(g->fed_v = loom_tensor_wrap(LOOM_F32, g->vnd, g->vdims, g->dbuf, (size_t)n * sizeof(float), NULL, NULL, st)))
      return loom_status_code(st) ? loom_status_code(st) : oom(st);
  }
  loom_code rc = ensure(&g->fed_i, loom_tensor_dtype(ids), 1, &vocab, st);
  if (rc) return rc;
  float *d = g->dbuf;
  memset(d, 0, (size_t)(n + 1) * sizeof(float));
  int64_t bad = -1;
  const float *v = loom_tensor_data_const(vals);
  int wide = loom_tensor_dtype(ids) == LOOM_I64;
  const void *ip = loom_tensor_data_const(ids);
  for (int64_t r = 0; r < rows; r++) {
    int64_t id = wide ? ((const int64_t *)ip)[r] : (int64_t)((const int32_t *)ip)[r];
    if (id == (wide ? LOOM_NO_ROW_I64 : (int64_t)LOOM_NO_ROW_I32)) continue; /* a pruned id: no row, as the kernels */
    if (id < 0 || id >= vocab) {
      d[n] += 1.0f;
      bad = id;
      continue;
    }
    float *row = d + id * width;
    for (int64_t j = 0; j < width; j++) row[j] += v[r * width + j];
  }
  void *fi = loom_tensor_data(g->fed_i);
  for (int64_t r = 0; r < vocab; r++) {
    if (wide)
      ((int64_t *)fi)[r] = r;
    else
      ((int32_t *)fi)[r] = (int32_t)r;
  }
  if ((rc = loom__coll_allreduce_sum(d, n + 1, st))) return rc;
  if (d[n] > 0.5f)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "collective strategy: the sparse gradient of %s has %.0f row id(s) outside [0, %lld) over the "
                           "ranks%s%lld",
                           g->var, (double)d[n], (long long)vocab, bad != -1 ? "; this rank's: " : "",
                           bad != -1 ? (long long)bad : 0LL);
  average(c, g, d, vocab * width);
  c->reduced_bytes += vocab * width * (int64_t)sizeof(float);
  return LOOM_OK;
}

/* A sparse gradient (an embedding's rows and ids), exchanged by the cheaper of two ways, chosen per
 * variable and step from the rows every rank has (the same choice on every rank):
 *  - allgather of every rank's rows and ids: each rank receives about R x (width x 4 + id bytes), R the
 *    rows of all ranks together;
 *  - a dense all-reduce of the whole table (the rows summed into a zero table): each rank sends and
 *    receives about 2(N-1)/N x vocab x width x 4 bytes (a ring all-reduce);
 * the dense way only where the densified update equals the sparse one (g->dense_ok: SGD and Adagrad,
 * whose update leaves a zero row as it is, and non-lazy Adam, whose sparse update moves every row
 * anyway); with lazy Adam, Momentum, RMSProp, Adadelta (whose dense update would decay the slots of rows
 * the sparse one leaves alone) and FTRL (which recomputes a zero row from its slots) always allgather. */
static loom_code gather_sparse(coll *c, coll_grad *g, const loom_tensor *vals, const loom_tensor *ids,
                               loom_status *st) {
  int nd = loom_tensor_ndim(vals);
  if (nd < 1 || loom_tensor_ndim(ids) != 1 || loom_tensor_dim(ids, 0) != loom_tensor_dim(vals, 0))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "collective strategy: the sparse gradient of %s has rows of rank %d and %lld ids", g->var,
                           nd, (long long)loom_tensor_numel(ids));
  int64_t rows = loom_tensor_dim(vals, 0), width = 1;
  for (int k = 1; k < nd; k++) width *= loom_tensor_dim(vals, k);
  int64_t *counts = loom__calloc((size_t)c->size * 3, sizeof *counts);
  if (!counts) return oom(st);
  int64_t *bytes = counts + c->size, *ibytes = counts + 2 * c->size;
  g->t0 = now_ns();
  loom_code rc = loom__coll_allgather(&rows, sizeof rows, counts, st);
  int64_t total = 0;
  size_t isz = loom_dtype_size(loom_tensor_dtype(ids));
  for (int r = 0; rc == LOOM_OK && r < c->size; r++) {
    total += counts[r];
    bytes[r] = counts[r] * width * (int64_t)sizeof(float);
    ibytes[r] = counts[r] * (int64_t)isz;
  }
  /* the rule above, on the rows of every rank */
  int shape_ok = g->vnd == nd && nd >= 1 && g->vdims[0] > 0;
  for (int k = 1; shape_ok && k < nd; k++) shape_ok = g->vdims[k] == loom_tensor_dim(vals, k);
  double gather_cost = (double)total * (double)(width * (int64_t)sizeof(float) + (int64_t)isz);
  double dense_cost = shape_ok ? 2.0 * (c->size - 1) / c->size * (double)g->vdims[0] * (double)width * 4.0 : 0;
  int dense = rc == LOOM_OK && shape_ok && g->dense_ok && dense_cost < gather_cost;
  int path = dense ? 2 : 1;
  if (rc == LOOM_OK && path != g->path) {
    char why[160] = "";
    if (!shape_ok)
      snprintf(why, sizeof why, " (the rows' shape is not the variable's: allgather only)");
    else if (!g->dense_ok)
      snprintf(why, sizeof why, " (dense all-reduce %.0f bytes, allgather %.0f bytes this step; not dense for %s)",
               dense_cost, gather_cost, g->op);
    else
      snprintf(why, sizeof why, " (dense all-reduce %.0f bytes, allgather %.0f bytes this step)", dense_cost,
               gather_cost);
    loom__log(LOOM_LOG_INFO, "collective: the sparse gradient of %s goes by %s%s", g->var,
              dense ? "dense all-reduce" : "allgather", why);
  }
  if (path != g->path) /* the span's name follows the path: formatted when it changes, not every step */
    snprintf(g->span, sizeof g->span, "%s %s", dense ? "dense all-reduce" : "allgather", g->var);
  g->path = path;
  if (rc == LOOM_OK && dense) {
    rc = dense_sparse(c, g, vals, ids, width, st);
    c->sparse_dense++;
    loom__free(counts);
    g->t1 = now_ns();
    return rc;
  }
  int64_t dims[LOOM_MAX_DIMS];
  for (int k = 0; k < nd && k < LOOM_MAX_DIMS; k++) dims[k] = loom_tensor_dim(vals, k);
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
    average(c, g, loom_tensor_data(g->fed_v), total * width);
    c->gathered_bytes += total * (width * (int64_t)sizeof(float) + (int64_t)isz);
    c->sparse_gathered++;
  }
  loom__free(counts);
  g->t1 = now_ns();
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

/* A session on a device (a GPU) with more than one rank: its dense buckets go through NCCL when every rank
 * loads it and joins the communicator (rank 0 makes the id, broadcast by the host transport: MPI or
 * Gloo); else, or with LOOM_COLLECTIVE_NCCL=0, through the host transport's all-reduce, with one INFO line
 * saying why. Every rank takes the same path: each step is agreed by an all-reduce of a flag on the host. */
static loom_code setup_device(coll *c, loom_session *s, loom_status *st) {
  if (c->size < 2) return LOOM_OK;
  loom_status *why = loom_status_new();
  if (!why) return oom(st);
  char name[64] = "", id[1 + LOOM__DEV_COMM_ID_BYTES];
  size_t idn = 0;
  const char *env = getenv("LOOM_COLLECTIVE_NCCL");
  int ok = 0;
  if (!loom__session_on_device(s)) {
    loom_status_free(why); /* host tensors: the host all-reduce, nothing to say */
    return LOOM_OK;
  }
  if (env && !strcmp(env, "0"))
    loom_status_set(why, LOOM_UNAVAILABLE, "LOOM_COLLECTIVE_NCCL=0");
  else
    ok = loom__dev_comm_load(s, name, sizeof name, why) == LOOM_OK;
  /* every rank loaded NCCL */
  float agree = ok ? 1.0f : 0.0f;
  loom_code rc = loom__coll_allreduce_sum(&agree, 1, st);
  if (rc == LOOM_OK && ok && agree < (float)c->size - 0.5f) {
    ok = 0;
    loom_status_set(why, LOOM_UNAVAILABLE, "%d of %d ranks could not use NCCL", c->size - (int)(agree + 0.5f),
                    c->size);
  }
  /* rank 0's id, broadcast (its first byte: whether rank 0 made one) */
  if (rc == LOOM_OK && ok) {
    memset(id, 0, sizeof id);
    if (c->rank == 0) id[0] = loom__dev_comm_id(s, id + 1, LOOM__DEV_COMM_ID_BYTES, &idn, why) == LOOM_OK;
    rc = loom__coll_broadcast(id, sizeof id, 0, st);
    if (rc == LOOM_OK && !id[0]) {
      ok = 0;
      if (c->rank != 0) loom_status_set(why, LOOM_UNAVAILABLE, "rank 0 could not make an NCCL id");
    }
  }
  /* every rank joined */
  if (rc == LOOM_OK && ok) {
    c->dcomm = loom__dev_comm_new(s, id + 1, LOOM__DEV_COMM_ID_BYTES, c->size, c->rank, c->timeout_s, why);
    agree = c->dcomm ? 1.0f : 0.0f;
    rc = loom__coll_allreduce_sum(&agree, 1, st);
    if (rc == LOOM_OK && agree < (float)c->size - 0.5f) {
      if (c->dcomm) loom_status_set(why, LOOM_UNAVAILABLE, "another rank could not join the NCCL communicator");
      ok = 0;
    }
  }
  if (!ok || rc) {
    loom__dev_comm_free(c->dcomm);
    c->dcomm = NULL;
  }
  if (rc == LOOM_OK && c->dcomm) {
    c->overlap = 0; /* device plans report no gradient early: every bucket starts after the run */
    c->async = 0;
    c->allreduce_path = "nccl";
    loom__log(LOOM_LOG_INFO, "collective: rank %d: dense gradients all-reduced on the device by %s", c->rank, name);
  } else if (rc == LOOM_OK) {
    loom__log(LOOM_LOG_INFO, "collective: rank %d: NCCL not used (%s): dense gradients all-reduced on the host (%s)",
              c->rank, loom_status_message(why), loom__coll_name());
  }
  loom_status_free(why);
  return rc;
}

static loom_code ch_acs(void *self, loom_session *s, loom_status *st) {
  coll *c = ((coll_hook *)self)->c;
  double t0 = loom__mono_secs();
  loom_code rc = broadcast_vars(c, s, st);
  if (rc == LOOM_OK) rc = setup_device(c, s, st);
  if (rc == LOOM_OK)
    loom__log(LOOM_LOG_INFO, "collective: rank %d of %d (%s): variables broadcast from rank 0 in %.3f s; global step %lld; "
              "%d gradient(s), fusion buckets of %lld bytes; %s",
              c->rank, c->size, loom__coll_name(), loom__mono_secs() - t0, (long long)c->gs, c->ngr,
              (long long)c->bucket_bytes,
              c->async     ? "all-reduces overlap the backward pass (non-blocking transport)"
              : c->overlap ? "all-reduces start during the backward pass but block it (the transport has no non-blocking "
                             "all-reduce)"
                           : "all-reduces after the backward pass");
  return rc;
}

static loom_code ch_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  coll *c = ((coll_hook *)self)->c;
  /* the other hooks see the step this run makes, as a local train op's increment */
  loom_session *s = loom_hook_context_session(ctx);
  loom_code rc = set_gs(c, s, c->gs + 1, st);
  a->nfetches = c->nfetch;
  a->fetches = c->fetch;
  if (c->planned) { /* this step's buckets: nothing packed, nothing started */
    for (int k = 0; k < c->nb; k++) {
      c->b[k].left = c->b[k].g1 - c->b[k].g0;
      c->b[k].state = 0;
      c->b[k].t_start = c->b[k].t_done = 0;
    }
    for (int k = 0; k < c->ngr; k++) c->gr[k].left_done = 0;
    c->next_start = 0;
    loom_status_clear(c->cb_st);
    if (c->overlap && c->size > 1) {
      loom__run_observer o = {c, obs_fetch, obs_step};
      loom__session_set_observer(s, &o);
      c->observed = s;
    }
  }
  c->t_mark = loom__mono_secs();
  return rc;
}

/* The step's exchanges as spans on the trace's track 1, when the profiler traced the run. */
static loom_code trace_spans(coll *c, loom_session *s, loom_status *st) {
  int64_t origin = loom__session_trace_origin(s);
  if (!origin) return LOOM_OK;
  loom_trace_event ev[64];
  int n = 0;
  loom_code rc = LOOM_OK;
  for (int k = 0; rc == LOOM_OK && k <= c->nb + c->ngr; k++) {
    if (k < c->nb && c->b[k].t_done > 0) {
      ev[n++] = (loom_trace_event){c->b[k].span, "AllReduce", c->b[k].t_start - origin,
                                   c->b[k].t_done - c->b[k].t_start, 1};
    } else if (k >= c->nb && k < c->nb + c->ngr && c->gr[k - c->nb].indices.node) {
      coll_grad *g = &c->gr[k - c->nb];
      ev[n++] = (loom_trace_event){g->span, g->path == 2 ? "AllReduce" : "AllGather", g->t0 - origin, g->t1 - g->t0, 1};
    }
    if (n == 64 || (k == c->nb + c->ngr && n)) {
      rc = loom__session_trace_add(s, ev, n, st);
      n = 0;
    }
  }
  return rc;
}

static loom_code ch_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  coll *c = ((coll_hook *)self)->c;
  loom_session *s = loom_hook_context_session(ctx);
  double t0 = loom__mono_secs();
  c->t_run_end = now_ns();
  c->t_run += t0 - c->t_mark;
  if (c->observed) {
    loom__session_set_observer(c->observed, NULL);
    c->observed = NULL;
  }
  if (c->size == 1) { /* one rank: its gradients are the averages */
    for (int i = 0; i < c->nfetch; i++) c->feed_v[i] = res[i];
    return apply(c, s, c->nfetch, t0, st);
  }
  if (loom_status_code(c->cb_st)) {
    abandon_inflight(c);
    return loom_status_set(st, loom_status_code(c->cb_st), "%s", loom_status_message(c->cb_st));
  }
  const int *fi = c->fi; /* fixed with the fetches (find_grads) */
  loom_code rc = LOOM_OK;
  for (int k = 0; k < c->ngr; k++) {
    if (rc == LOOM_OK && !c->gr[k].indices.node &&
        (loom_tensor_dtype(res[fi[k]]) != LOOM_F32 || (c->planned && loom_tensor_numel(res[fi[k]]) != c->gr[k].numel)))
      rc = loom_status_set(st, LOOM_UNIMPLEMENTED,
                           "collective strategy: the gradient of %s is %s with %lld elements; the all-reduce sums "
                           "float32 gradients of a fixed size",
                           c->gr[k].var, loom_dtype_name(loom_tensor_dtype(res[fi[k]])),
                           (long long)loom_tensor_numel(res[fi[k]]));
  }
  if (rc == LOOM_OK && !c->planned) {
    rc = plan_buckets(c, res, fi, st);
    for (int k = 0; rc == LOOM_OK && k < c->nb; k++) c->b[k].left = c->b[k].g1 - c->b[k].g0;
    c->next_start = 0;
  }
  if (rc == LOOM_OK) rc = finish_buckets(c, res, fi, st);
  else abandon_inflight(c);
  for (int k = 0; rc == LOOM_OK && k < c->ngr; k++)
    if (c->gr[k].indices.node) rc = gather_sparse(c, &c->gr[k], res[fi[k]], res[fi[k] + 1], st);
  double t1 = loom__mono_secs();
  c->t_comm += t1 - t0;
  if (rc == LOOM_OK) rc = trace_spans(c, s, st);
  if (rc) return rc;
  int n = 0;
  for (int k = 0; k < c->ngr; k++) {
    c->feed_v[n++] = c->gr[k].fed_v;
    if (c->gr[k].indices.node) c->feed_v[n++] = c->gr[k].fed_i;
  }
  /* the apply's ops join the step's trace */
  loom__session_trace_keep(s, 1);
  rc = apply(c, s, n, t1, st);
  loom__session_trace_keep(s, 0);
  return rc;
}

/* Every rank ended at the same step (the all-reduce a training rank would match, with flag 0), and every
 * rank's variables are the same: checksums gathered and compared. */
static loom_code ch_end(void *self, loom_session *s, loom_status *st) {
  coll *c = ((coll_hook *)self)->c;
  uint64_t h = 0;
  loom_code rc = LOOM_OK;
  if (c->observed) { /* a run that failed: its buckets may be in flight */
    loom__session_set_observer(c->observed, NULL);
    c->observed = NULL;
  }
  for (int k = 0; k < c->nb; k++)
    if (c->b[k].state == 1) {
      abandon_inflight(c);
      return loom_status_set(st, LOOM_ABORTED, "collective strategy: the last step failed with all-reduces in flight");
    }
  if (c->size > 1 && c->first_bucket > 0) {
    rc = pack_room(c, c->first_bucket, st);
    if (rc == LOOM_OK) {
      memset(c->pack, 0, (size_t)c->first_bucket * sizeof(float));
      rc = c->dcomm ? dev_allreduce(c, c->pack, c->first_bucket, st)
                    : loom__coll_allreduce_sum(c->pack, c->first_bucket, st);
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
          "comm_ms=%.3f apply_ms=%.3f allreduce_bytes_per_step=%lld allgather_bytes_per_step=%lld buckets=%d "
          "overlap=%d allreduce_wall_ms=%.3f overlap_fraction=%.3f sparse_dense_allreduce=%lld sparse_allgather=%lld "
          "allreduce_path=%s scaled_bytes_per_step=%lld allreduce_async=%d\n",
          c->rank, c->size, (long long)c->steps, (long long)c->gs, (unsigned long long)h, c->t_run * k, c->t_comm * k,
          c->t_apply * k, c->steps ? (long long)(c->reduced_bytes / c->steps) : 0LL,
          c->steps ? (long long)(c->gathered_bytes / c->steps) : 0LL, c->nb, c->overlap, (double)c->wall_ns * 1e-9 * k,
          c->wall_ns > 0 ? (double)c->hidden_ns / (double)c->wall_ns : 0.0, (long long)c->sparse_dense,
          (long long)c->sparse_gathered, c->allreduce_path,
          c->steps ? (long long)(c->scaled_bytes / c->steps) : 0LL, c->async);
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
  plan->device_index = loom__coll_local_rank(); /* on GPUs, each rank of a machine its own (NCCL needs that) */
  if (!train_op) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "collective strategy: the model has no train op");
  if (global_step && !(c->gs_t = loom_tensor_new(loom_variable_dtype(global_step), 0, NULL, st)))
    return loom_status_code(st) ? loom_status_code(st) : oom(st);
  loom_code rc = check_models(c, st);
  if (rc == LOOM_OK) rc = find_grads(c, st);
  if (rc == LOOM_OK) rc = fuse_average(c, st);
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
  c->allreduce_path = strncmp(loom__coll_name(), "Gloo", 4) ? "mpi" : "gloo";
  c->timeout_s = loom__coll_timeout();
  const char *fb = getenv("LOOM_COLLECTIVE_FIRST_BUCKET_BYTES");
  c->first_bucket_bytes = fb && fb[0] && atoll(fb) >= 0 ? atoll(fb) : 1 << 20;
  const char *ov = getenv("LOOM_COLLECTIVE_OVERLAP");
  c->overlap = !(ov && !strcmp(ov, "0"));
  c->async = c->overlap && loom__coll_nonblocking();
  const char *fa = getenv("LOOM_COLLECTIVE_FUSE_AVERAGE");
  c->fuse = !(fa && !strcmp(fa, "0"));
  if (!(c->cb_st = loom_status_new())) {
    loom__free(c);
    oom(st);
    return NULL;
  }
  return &c->base;
}

void loom__collective_strategy_free(loom__strategy *base) {
  coll *c = (coll *)base;
  if (!c) return;
  loom__dev_comm_free(c->dcomm);
  for (int k = 0; k < c->ngr; k++) {
    loom_tensor_free(c->gr[k].fed_v);
    loom_tensor_free(c->gr[k].fed_i);
    free(c->gr[k].dbuf);
  }
  loom__free(c->gr);
  loom__free(c->fetch);
  loom__free(c->feed);
  loom__free(c->feed_v);
  loom__free(c->bk);
  loom__free(c->fi);
  loom__free(c->b);
  free(c->fmap);
  free(c->fmap_out);
  loom_status_free(c->cb_st);
  loom_tensor_free(c->gs_t);
  free(c->pack);
  loom__free(c);
}
