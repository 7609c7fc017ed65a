/* Sparse ops: DenseToRagged, SparseEmbedding (+ its gradient op),
 * RaggedMultiHot (loom_sparse.h), MultiHotConcat (internal:
 * ops/sparse_internal.h, input_layer's output). Kernels: kernels/cpu/sparse.c (CPU only;
 * a CUDA session runs them on the CPU per node).
 *
 * Attributes:
 *   DenseToRagged        keepdims = drop_ignore, num = ignore_int.
 *                        Outputs (values [nnz], row_splits [B + 1] int64);
 *                        nnz depends on the values (LOOM_OPF_DATA_SHAPE: a
 *                        session computes it in its host pass).
 *   SparseEmbedding      inputs (params, ids, row_splits[, weights]);
 *                        num = combiner, alpha = max_norm (<= 0 = none).
 *   SparseEmbeddingGrad  inputs (dy, params, ids, row_splits[, weights]),
 *                        same attributes; outputs (indices [nnz] in the ids'
 *                        dtype, rows [nnz, D] f32): the IndexedSlices
 *                        gradient of params, one pair per id; a pruned id
 *                        (id < 0; weight <= 0 with mean / sqrtn) gets the
 *                        index LOOM_NO_ROW_I32/I64 (kernels/kernel.h, the
 *                        dtype's minimum) and a zero row,
 *                        which the sparse optimizers skip (kernels/cpu/optim.c,
 *                        kernels/cuda/index_group.cuh) and densification
 *                        (ops/autodiff.c) clamps to a row it leaves unchanged.
 *   RaggedMultiHot       inputs (ids, row_splits[, weights]); num = depth.
 *   MultiHotConcat       inputs (layout, then each piece's inputs); layout
 *                        a Const int64 [2 * np] of (kind, depth) pairs
 *                        (LOOM__MHC_*): dense float32 [B, w] copied,
 *                        ragged ids (+ weights) as a multi-hot of depth
 *                        columns, int ids [B, n] as n one-hots of depth
 *                        columns; the pieces side by side in one float32
 *                        [B, total] (= Concat(axis 1) of the pieces, written
 *                        in one pass). Gradient: the dense pieces' columns
 *                        of dy (a Slice each); ids get none.
 *
 *   RaggedPadIndex       inputs (row_splits[, expected lengths]); num = k (the
 *                        values per step), keepdims = keep the k dim.
 *                        Outputs (index [B, T(, k)] int64, lengths [B]
 *                        int64): the value each step of a batch padded to
 *                        its longest row reads (row_splits[B], one past the
 *                        values, for padding); T depends on the row
 *                        lengths (LOOM_OPF_DATA_SHAPE). With expected
 *                        lengths, a row whose length differs fails the run.
 *
 * ids, row_splits and weights get no gradient; DenseToRagged,
 * SparseEmbeddingGrad and RaggedMultiHot are not differentiable. */
#include <math.h>
#include "ops/op_common.h"
#include "kernels/cpu/sparse.h"
#include "ops/sparse_internal.h"

#define FAIL(...) return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, __VA_ARGS__)

static loom_attrs attrs0(void) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  return a;
}

/* ---- shape functions ---- */
static int ragged_dtype_ok(loom_dtype d) {
  return d == LOOM_STRING || d == LOOM_I32 || d == LOOM_I64 || d == LOOM_F32 || d == LOOM_F64;
}

static loom_code shape_dense_to_ragged(loom_shape_ctx *c) {
  const loom_tdesc *x = &c->in[0];
  if (!ragged_dtype_ok(x->dtype))
    FAIL("x must be string, int32, int64, float32 or float64, got %s", loom_dtype_name(x->dtype));
  if (x->ndim < 1) FAIL("x must have rank >= 1 (a batch of rows), got %s", loom__tdesc_str(x));
  int can_drop = c->attrs->keepdims && (x->dtype == LOOM_STRING || x->dtype == LOOM_I32 || x->dtype == LOOM_I64);
  int64_t nnz = can_drop ? -1 : 1;
  for (int i = 0; i < x->ndim && nnz >= 0; i++) nnz = x->dims[i] < 0 ? -1 : nnz * x->dims[i];
  c->out[0].dtype = x->dtype;
  c->out[0].ndim = 1;
  c->out[0].dims[0] = nnz;
  c->out[1].dtype = LOOM_I64;
  c->out[1].ndim = 1;
  c->out[1].dims[0] = x->dims[0] < 0 ? -1 : x->dims[0] + 1;
  return LOOM_OK;
}

static loom_code value_shape_dense_to_ragged(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                             loom_tdesc *out, char *msg, size_t msglen) {
  (void)nin;
  (void)nout;
  const loom_buf *x = in[0];
  if (x->ndim < 1) {
    snprintf(msg, msglen, "x must have rank >= 1");
    return LOOM_INVALID_ARGUMENT;
  }
  out[0].dtype = x->dtype;
  out[0].ndim = 1;
  out[0].dims[0] = loom__dense_to_ragged_count(x, a->keepdims != 0, a->num);
  out[1].dtype = LOOM_I64;
  out[1].ndim = 1;
  out[1].dims[0] = x->dims[0] + 1;
  return LOOM_OK;
}

/* Checks ids (input i), row_splits (i + 1) and optional weights (i + 2 when
 * present); *B = number of rows (-1 unknown), *nnz likewise. */
static loom_code check_ragged_inputs(loom_shape_ctx *c, int i, int64_t *B, int64_t *nnz) {
  const loom_tdesc *ids = &c->in[i], *sp = &c->in[i + 1];
  if (ids->dtype != LOOM_I32 && ids->dtype != LOOM_I64)
    FAIL("ids must be int32 or int64, got %s", loom_dtype_name(ids->dtype));
  if (ids->ndim != 1) FAIL("ids must be a vector (ragged values), got %s", loom__tdesc_str(ids));
  if (sp->dtype != LOOM_I64) FAIL("row_splits must be int64, got %s", loom_dtype_name(sp->dtype));
  if (sp->ndim != 1) FAIL("row_splits must be a vector, got %s", loom__tdesc_str(sp));
  if (sp->dims[0] == 0) FAIL("row_splits must have at least 1 element");
  *B = sp->dims[0] < 0 ? -1 : sp->dims[0] - 1;
  *nnz = ids->dims[0];
  if (c->nin > i + 2) {
    const loom_tdesc *w = &c->in[i + 2];
    if (w->dtype != LOOM_F32) FAIL("weights must be float32, got %s", loom_dtype_name(w->dtype));
    if (w->ndim != 1) FAIL("weights must be a vector (ragged values), got %s", loom__tdesc_str(w));
    if (w->dims[0] >= 0 && ids->dims[0] >= 0 && w->dims[0] != ids->dims[0])
      FAIL("weights %s and ids %s must have the same number of values", loom__tdesc_str(w), loom__tdesc_str(ids));
  }
  return LOOM_OK;
}

static loom_code check_embedding_attrs(loom_shape_ctx *c) {
  int64_t comb = c->attrs->num;
  if (comb < LOOM__COMB_SUM || comb > LOOM__COMB_SQRTN)
    FAIL("combiner %lld is not one of sum (0), mean (1), sqrtn (2)", (long long)comb);
  if (isnan(c->attrs->alpha) || isinf(c->attrs->alpha)) FAIL("max_norm must be finite, got %g", c->attrs->alpha);
  return LOOM_OK;
}

static loom_code check_params(loom_shape_ctx *c, const loom_tdesc *p) {
  if (p->dtype != LOOM_F32) FAIL("params must be float32, got %s", loom_dtype_name(p->dtype));
  if (p->ndim != 2) FAIL("params must have rank 2 ([vocabulary, dimension]), got %s", loom__tdesc_str(p));
  return LOOM_OK;
}

static loom_code shape_sparse_embedding(loom_shape_ctx *c) {
  if (c->nin != 3 && c->nin != 4) FAIL("takes 3 or 4 inputs (params, ids, row_splits[, weights]), got %d", c->nin);
  loom_code rc;
  int64_t B, nnz;
  if ((rc = check_embedding_attrs(c)) || (rc = check_params(c, &c->in[0])) ||
      (rc = check_ragged_inputs(c, 1, &B, &nnz)))
    return rc;
  c->out[0].dtype = LOOM_F32;
  c->out[0].ndim = 2;
  c->out[0].dims[0] = B;
  c->out[0].dims[1] = c->in[0].dims[1];
  return LOOM_OK;
}

static loom_code shape_sparse_embedding_grad(loom_shape_ctx *c) {
  if (c->nin != 4 && c->nin != 5) FAIL("takes 4 or 5 inputs (dy, params, ids, row_splits[, weights]), got %d", c->nin);
  loom_code rc;
  int64_t B, nnz;
  if ((rc = check_embedding_attrs(c)) || (rc = check_params(c, &c->in[1])) ||
      (rc = check_ragged_inputs(c, 2, &B, &nnz)))
    return rc;
  const loom_tdesc *dy = &c->in[0];
  if (dy->dtype != LOOM_F32 || dy->ndim != 2) FAIL("dy must be float32 [rows, dimension], got %s %s",
                                                   loom_dtype_name(dy->dtype), loom__tdesc_str(dy));
  c->out[0].dtype = c->in[2].dtype;
  c->out[0].ndim = 1;
  c->out[0].dims[0] = nnz;
  c->out[1].dtype = LOOM_F32;
  c->out[1].ndim = 2;
  c->out[1].dims[0] = nnz;
  c->out[1].dims[1] = c->in[1].dims[1];
  return LOOM_OK;
}

static loom_code shape_ragged_multi_hot(loom_shape_ctx *c) {
  if (c->nin != 2 && c->nin != 3) FAIL("takes 2 or 3 inputs (ids, row_splits[, weights]), got %d", c->nin);
  if (c->attrs->num < 0) FAIL("depth must be >= 0, got %lld", (long long)c->attrs->num);
  int64_t B, nnz;
  loom_code rc = check_ragged_inputs(c, 0, &B, &nnz);
  if (rc) return rc;
  int64_t d[2] = {B, c->attrs->num};
  if ((rc = loom__shape_check_attr_size(c, "depth", 2, d))) return rc;
  c->out[0].dtype = LOOM_F32;
  c->out[0].ndim = 2;
  c->out[0].dims[0] = B;
  c->out[0].dims[1] = c->attrs->num;
  return LOOM_OK;
}

/* MultiHotConcat: in[0] the layout (a Const int64 [2 * np]: kind, depth
 * per piece), then each piece's inputs. */
static int mhc_nin(int64_t kind) { return kind == LOOM__MHC_RAGGED ? 2 : kind == LOOM__MHC_RAGGED_W ? 3 : 1; }

static loom_code shape_multi_hot_concat(loom_shape_ctx *c) {
  const loom_tensor *lt = c->in_value ? c->in_value[0] : NULL;
  if (!lt || c->in[0].dtype != LOOM_I64 || c->in[0].ndim != 1 || c->in[0].dims[0] % 2)
    FAIL("input 0 must be a constant int64 layout of (kind, depth) pairs");
  const int64_t *lay = loom_tensor_data_const(lt);
  int np = (int)(c->in[0].dims[0] / 2), k = 1;
  int64_t B = -1, W = 0;
  for (int p = 0; p < np; p++) {
    int64_t kind = lay[2 * p], depth = lay[2 * p + 1];
    if (kind < LOOM__MHC_DENSE || kind > LOOM__MHC_ONEHOT) FAIL("piece %d: unknown kind %lld", p, (long long)kind);
    if (depth < 0) FAIL("piece %d: depth must be >= 0, got %lld", p, (long long)depth);
    if (k + mhc_nin(kind) > c->nin) FAIL("piece %d: missing inputs (%d given)", p, c->nin);
    const loom_tdesc *x = &c->in[k];
    int64_t b = -1, w = -1;
    if (kind == LOOM__MHC_DENSE) {
      if (x->dtype != LOOM_F32 || x->ndim != 2) FAIL("piece %d: a dense piece must be float32 [B, w], got %s %s", p,
                                                     loom_dtype_name(x->dtype), loom__tdesc_str(x));
      b = x->dims[0];
      w = x->dims[1];
    } else if (kind == LOOM__MHC_ONEHOT) {
      if ((x->dtype != LOOM_I32 && x->dtype != LOOM_I64) || x->ndim != 2)
        FAIL("piece %d: one-hot ids must be int32/int64 [B, n], got %s %s", p, loom_dtype_name(x->dtype),
             loom__tdesc_str(x));
      b = x->dims[0];
      w = x->dims[1] < 0 ? -1 : x->dims[1] * depth;
    } else {
      int64_t nnz;
      loom_shape_ctx sub = *c;
      sub.nin = k + (kind == LOOM__MHC_RAGGED_W ? 3 : 2);
      loom_code rc = check_ragged_inputs(&sub, k, &b, &nnz);
      if (rc) {
        memcpy(c->msg, sub.msg, sizeof c->msg);
        return rc;
      }
      w = depth;
    }
    if (b >= 0 && B >= 0 && b != B) FAIL("piece %d has %lld rows, piece 0 %lld", p, (long long)b, (long long)B);
    if (b >= 0) B = b;
    W = (W < 0 || w < 0) ? -1 : W + w;
    k += mhc_nin(kind);
  }
  if (k != c->nin) FAIL("the layout takes %d inputs, given %d", k, c->nin);
  c->out[0].dtype = LOOM_F32;
  c->out[0].ndim = 2;
  c->out[0].dims[0] = B;
  c->out[0].dims[1] = W;
  return LOOM_OK;
}

/* Dense pieces get their columns of dy; ids get nothing. */
static loom_code grad_multi_hot_concat(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  if (!dy[0].node) return LOOM_OK;
  const loom_tensor *lt = n->in[0].node->value;
  if (!lt) return loom_graph_set_error(g, LOOM_INTERNAL, "%s: gradient: the layout is not a constant", n->name);
  const int64_t *lay = loom_tensor_data_const(lt);
  int np = (int)(loom_tensor_numel(lt) / 2), k = 1;
  int64_t off = 0;
  for (int p = 0; p < np; p++) {
    int64_t kind = lay[2 * p], depth = lay[2 * p + 1];
    const loom_tdesc *x = &n->in[k].node->out[n->in[k].index];
    int64_t w = kind == LOOM__MHC_DENSE ? x->dims[1] : kind == LOOM__MHC_ONEHOT ? (x->dims[1] < 0 ? -1 : x->dims[1] * depth) : depth;
    if (w < 0)
      return loom_graph_set_error(g, LOOM_UNIMPLEMENTED, "%s: gradient: piece %d has an unknown width", n->name, p);
    if (kind == LOOM__MHC_DENSE) {
      int64_t begin[2] = {0, off}, size[2] = {-1, w};
      dx[k].values = loom_slice(g, dy[0], begin, size, NULL);
    }
    off += w;
    k += mhc_nin(kind);
  }
  return LOOM_OK;
}

static loom_code shape_ragged_pad_index(loom_shape_ctx *c) {
  if (c->nin != 1 && c->nin != 2) FAIL("takes 1 or 2 inputs (row_splits[, expected lengths]), got %d", c->nin);
  const loom_tdesc *sp = &c->in[0];
  if (sp->dtype != LOOM_I64 || sp->ndim != 1) FAIL("row_splits must be an int64 vector, got %s %s",
                                                   loom_dtype_name(sp->dtype), loom__tdesc_str(sp));
  if (sp->dims[0] == 0) FAIL("row_splits must have at least 1 element");
  if (c->attrs->num < 1) FAIL("step size must be >= 1, got %lld", (long long)c->attrs->num);
  if (!c->attrs->keepdims && c->attrs->num != 1) FAIL("step size %lld needs keepdims", (long long)c->attrs->num);
  int64_t B = sp->dims[0] < 0 ? -1 : sp->dims[0] - 1;
  if (c->nin == 2) {
    const loom_tdesc *e = &c->in[1];
    if (e->dtype != LOOM_I64 || e->ndim != 1) FAIL("expected lengths must be an int64 vector, got %s %s",
                                                  loom_dtype_name(e->dtype), loom__tdesc_str(e));
  }
  c->out[0].dtype = LOOM_I64;
  c->out[0].ndim = c->attrs->keepdims ? 3 : 2;
  c->out[0].dims[0] = B;
  c->out[0].dims[1] = -1;
  c->out[0].dims[2] = c->attrs->num;
  c->out[1].dtype = LOOM_I64;
  c->out[1].ndim = 1;
  c->out[1].dims[0] = B;
  return LOOM_OK;
}

static loom_code value_shape_ragged_pad_index(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                              loom_tdesc *out, char *msg, size_t msglen) {
  (void)nin;
  (void)nout;
  const loom_buf *sp = in[0];
  if (sp->dtype != LOOM_I64 || sp->ndim != 1 || sp->numel < 1 || a->num < 1) {
    snprintf(msg, msglen, "row_splits must be an int64 vector of at least 1 element (and the step size >= 1)");
    return LOOM_INVALID_ARGUMENT;
  }
  const int64_t *s = sp->data;
  int64_t B = sp->numel - 1;
  for (int64_t r = 0; r < B; r++)
    if (s[r + 1] < s[r]) {
      snprintf(msg, msglen, "row_splits must be non-decreasing, but row_splits[%lld] = %lld < row_splits[%lld] = %lld",
               (long long)(r + 1), (long long)s[r + 1], (long long)r, (long long)s[r]);
      return LOOM_INVALID_ARGUMENT;
    }
  out[0].dtype = LOOM_I64;
  out[0].ndim = a->keepdims ? 3 : 2;
  out[0].dims[0] = B;
  out[0].dims[1] = loom__ragged_pad_steps(s, B, a->num);
  out[0].dims[2] = a->num;
  out[1].dtype = LOOM_I64;
  out[1].ndim = 1;
  out[1].dims[0] = B;
  return LOOM_OK;
}

/* ---- gradient ---- */
/* d params: IndexedSlices (SparseEmbeddingGrad's indices and rows). */
static loom_code grad_sparse_embedding(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  if (!dy[0].node) return LOOM_OK;
  loom_output in[5] = {dy[0], n->in[0], n->in[1], n->in[2], {NULL, 0}};
  if (n->nin > 3) in[4] = n->in[3];
  loom_node *gn = loom__graph_add(g, LOOM_OP_SparseEmbeddingGrad, NULL, NULL, n->nin + 1, in, &n->attrs, 2);
  if (!gn) return loom_graph_status(g, NULL);
  dx[0].indices = (loom_output){gn, 0};
  dx[0].values = (loom_output){gn, 1};
  return LOOM_OK;
}

void loom__register_sparse(loom_op_def *t) {
  loom_op_def *d = &t[LOOM_OP_DenseToRagged];
  d->nin = 1;
  d->nout = 2;
  d->shape = shape_dense_to_ragged;
  d->value_shape = value_shape_dense_to_ragged;
  d->flags = LOOM_OPF_DATA_SHAPE | LOOM_OPF_NODIFF;
  d->kernels[LOOM_DEVICE_CPU][0] = loom__k_dense_to_ragged;
  loom_dtype rdt[5] = {LOOM_STRING, LOOM_I32, LOOM_I64, LOOM_F32, LOOM_F64};
  for (int i = 0; i < 5; i++) d->kernels[LOOM_DEVICE_CPU][rdt[i]] = loom__k_dense_to_ragged;

  d = &t[LOOM_OP_SparseEmbedding];
  d->nin = -1;
  d->nout = 1;
  d->shape = shape_sparse_embedding;
  d->grad = grad_sparse_embedding;
  d->nondiff_inputs = (1u << 1) | (1u << 2) | (1u << 3);
  d->kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_sparse_embedding_f32;

  d = &t[LOOM_OP_SparseEmbeddingGrad];
  d->nin = -1;
  d->nout = 2;
  d->shape = shape_sparse_embedding_grad;
  d->flags = LOOM_OPF_NODIFF;
  d->kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_sparse_embedding_grad_f32;

  d = &t[LOOM_OP_RaggedMultiHot];
  d->nin = -1;
  d->nout = 1;
  d->shape = shape_ragged_multi_hot;
  d->flags = LOOM_OPF_NODIFF;
  d->kernels[LOOM_DEVICE_CPU][LOOM_I32] = loom__k_ragged_multi_hot;
  d->kernels[LOOM_DEVICE_CPU][LOOM_I64] = loom__k_ragged_multi_hot;

  d = &t[LOOM_OP_MultiHotConcat];
  d->nin = -1;
  d->nout = 1;
  d->shape = shape_multi_hot_concat;
  d->grad = grad_multi_hot_concat;
  d->nondiff_inputs = 1u; /* the layout; ids get no gradient from the grad fn */
  d->kernels[LOOM_DEVICE_CPU][LOOM_I64] = loom__k_multi_hot_concat;

  d = &t[LOOM_OP_RaggedPadIndex];
  d->nin = -1;
  d->nout = 2;
  d->shape = shape_ragged_pad_index;
  d->value_shape = value_shape_ragged_pad_index;
  d->flags = LOOM_OPF_DATA_SHAPE | LOOM_OPF_NODIFF;
  d->kernels[LOOM_DEVICE_CPU][LOOM_I64] = loom__k_ragged_pad_index;
}

/* ---- builders ---- */
loom_sparse loom_dense_to_ragged(loom_graph *g, loom_output x, int drop_ignore, int64_t ignore_int, const char *name) {
  loom_sparse r = {{NULL, 0}, {NULL, 0}};
  if (!g) return r;
  loom_attrs a = attrs0();
  a.keepdims = drop_ignore != 0;
  a.num = ignore_int;
  loom_node *nd = loom__graph_add(g, LOOM_OP_DenseToRagged, name, NULL, 1, &x, &a, 2);
  if (!nd) {
    r.values = r.row_splits = loom__graph_dummy(g);
    return r;
  }
  r.values = (loom_output){nd, 0};
  r.row_splits = (loom_output){nd, 1};
  return r;
}

loom_output loom_sparse_embedding(loom_graph *g, loom_output params, loom_sparse ids, loom_output weights,
                                  loom_combiner combiner, double max_norm, const char *name) {
  loom_attrs a = attrs0();
  a.num = (int64_t)combiner;
  a.alpha = max_norm;
  loom_output in[4] = {params, ids.values, ids.row_splits, weights};
  return loom__buildn(g, LOOM_OP_SparseEmbedding, name, weights.node ? 4 : 3, in, &a);
}

loom_output loom_ragged_multi_hot(loom_graph *g, loom_sparse ids, loom_output weights, int64_t depth,
                                  const char *name) {
  loom_attrs a = attrs0();
  a.num = depth;
  loom_output in[3] = {ids.values, ids.row_splits, weights};
  return loom__buildn(g, LOOM_OP_RaggedMultiHot, name, weights.node ? 3 : 2, in, &a);
}

loom_output loom__multi_hot_concat(loom_graph *g, int np, const int32_t *kind, const int64_t *depth, int nin,
                                   const loom_output *in, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (np < 1 || !kind || !depth || nin < 1 || !in) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: needs at least one piece", name ? name : "LoomMultiHotConcat");
    return loom__graph_dummy(g);
  }
  int64_t *lay = loom__malloc((size_t)np * 2 * sizeof(int64_t));
  loom_output *all = loom__malloc(((size_t)nin + 1) * sizeof(loom_output));
  if (!lay || !all) {
    loom__free(lay);
    loom__free(all);
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", name ? name : "LoomMultiHotConcat");
    return loom__graph_dummy(g);
  }
  for (int p = 0; p < np; p++) {
    lay[2 * p] = kind[p];
    lay[2 * p + 1] = depth[p];
  }
  char cn[512];
  snprintf(cn, sizeof cn, "%s/layout", name ? name : "LoomMultiHotConcat");
  int64_t nl = 2 * (int64_t)np;
  all[0] = loom_const_data(g, LOOM_I64, 1, &nl, lay, name ? cn : NULL);
  memcpy(all + 1, in, (size_t)nin * sizeof(loom_output));
  loom_attrs a = attrs0();
  loom_output out = loom__buildn(g, LOOM_OP_MultiHotConcat, name, nin + 1, all, &a);
  loom__free(lay);
  loom__free(all);
  return out;
}

loom_output loom__ragged_pad_index(loom_graph *g, loom_output row_splits, loom_output expected_lengths, int64_t k,
                                   int keep_k, loom_output *lengths, const char *name) {
  if (lengths) *lengths = (loom_output){NULL, 0};
  if (!g) return (loom_output){NULL, 0};
  loom_attrs a = attrs0();
  a.num = k;
  a.keepdims = keep_k != 0;
  loom_output in[2] = {row_splits, expected_lengths};
  loom_node *nd = loom__graph_add(g, LOOM_OP_RaggedPadIndex, name, NULL, expected_lengths.node ? 2 : 1, in, &a, 2);
  if (!nd) {
    loom_output d = loom__graph_dummy(g);
    if (lengths) *lengths = d;
    return d;
  }
  if (lengths) *lengths = (loom_output){nd, 1};
  return (loom_output){nd, 0};
}
