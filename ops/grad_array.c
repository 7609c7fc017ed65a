/* Gradient functions of the array family (see loom_grad_fn in engine/engine_impl.h).
 *
 * Shapes: gradients are built with the static (build-time) shapes where they
 * are known and with runtime-shaped ops (reshape_like, zeros_like, split_v with
 * a -1 size, slices "to the end") where they are not, so graphs with an
 * unknown batch dimension differentiate. The few cases that have no runtime
 * formulation with the existing ops fail with UNIMPLEMENTED naming the node:
 *   - ConcatV2 when two or more inputs have an unknown size along the concat
 *     axis (one unknown is fine: it becomes the -1 piece of a split);
 *   - TopKV2 when the last dimension is unknown.
 * Tile with unknown dims splits each tiled axis into its m copies and adds
 * them (m nodes per axis; multiples above 4096 are refused); with known dims
 * it is one reshape + reduce.
 *
 * GatherV2 along axis 0 returns a sparse gradient (TF IndexedSlices): values
 * [n, params.dims[1:]...] and indices [n] (the flattened indices); the
 * autodiff driver keeps it sparse or densifies it with a scatter-add. */
#include "ops/op_common.h"

/* defined in ops/grad_math.c */
loom_output loom__unbroadcast(loom_graph *g, loom_output dy, loom_output x);

static const loom_tdesc *desc(loom_output o) { return &o.node->out[o.index]; }

static int is_float(loom_dtype dt) { return dt == LOOM_F32 || dt == LOOM_F64; }

static loom_code unimpl(loom_graph *g, const loom_node *n, const char *why) {
  return loom_graph_set_error(g, LOOM_UNIMPLEMENTED, "%s: gradient of %s: %s", n->name, n->def->name, why);
}

static int all_known(const loom_tdesc *d) {
  for (int i = 0; i < d->ndim; i++)
    if (d->dims[i] < 0) return 0;
  return 1;
}

/* ---- views ---- */
static loom_code grad_reshape(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = loom_reshape_like(g, dy[0], n->in[0], NULL);
  return LOOM_OK;
}

static loom_code grad_broadcast(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = loom__unbroadcast(g, dy[0], n->in[0]);
  return LOOM_OK;
}

static loom_code grad_transpose(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  int r = n->attrs.naxes;
  int64_t inv[LOOM_MAX_DIMS];
  for (int j = 0; j < r; j++) inv[n->attrs.axes[j]] = j;
  dx[0].values = r ? loom_transpose(g, dy[0], r, inv, NULL) : dy[0];
  return LOOM_OK;
}

/* ---- joining and cutting ---- */

/* Splits x along axis into n pieces of sizes[i] (-1 = unknown, at most one)
 * into outs; more than LOOM_MAX_DIMS pieces are split in halves recursively.
 * Returns 0 when two or more sizes are unknown. */
static int split_pieces(loom_graph *g, loom_output x, int n, const int64_t *sizes, int64_t axis, loom_output *outs) {
  int unknown = 0;
  for (int i = 0; i < n; i++) unknown += sizes[i] < 0;
  if (n == 1) {
    outs[0] = x;
    return 1;
  }
  if (n <= LOOM_MAX_DIMS) {
    if (unknown > 1) return 0;
    loom_split_v(g, x, n, sizes, axis, outs, NULL);
    return 1;
  }
  int h = n / 2;
  int64_t half[2] = {0, 0};
  for (int i = 0; i < n; i++) {
    int k = i >= h;
    if (sizes[i] < 0 || half[k] < 0) half[k] = -1;
    else half[k] += sizes[i];
  }
  if (half[0] < 0 && half[1] < 0) return 0;
  loom_output parts[2];
  loom_split_v(g, x, 2, half, axis, parts, NULL);
  return split_pieces(g, parts[0], h, sizes, axis, outs) && split_pieces(g, parts[1], n - h, sizes + h, axis, outs + h);
}

static loom_code grad_concat(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  int r = desc(n->in[0])->ndim;
  int64_t axis = n->attrs.axis < 0 ? n->attrs.axis + r : n->attrs.axis;
  int m = n->nin;
  int64_t *sizes = loom__calloc((size_t)m, sizeof *sizes);
  loom_output *outs = loom__calloc((size_t)m, sizeof *outs);
  if (!sizes || !outs) {
    loom__free(sizes);
    loom__free(outs);
    return loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: gradient: out of memory", n->name);
  }
  for (int i = 0; i < m; i++) sizes[i] = desc(n->in[i])->dims[axis];
  loom_code rc = LOOM_OK;
  if (!split_pieces(g, dy[0], m, sizes, axis, outs))
    rc = unimpl(g, n, "two or more inputs have an unknown size along the concat axis");
  else
    for (int i = 0; i < m; i++) dx[i].values = outs[i];
  loom__free(sizes);
  loom__free(outs);
  return rc;
}

/* dy of output i, or zeros shaped like that output when it got no gradient */
static loom_output dy_or_zeros(loom_graph *g, loom_node *n, const loom_output *dy, int i) {
  return dy[i].node ? dy[i] : loom_zeros_like(g, (loom_output){n, i}, NULL);
}

static loom_code grad_split(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  int m = n->nout;
  loom_output *parts = loom__calloc((size_t)m, sizeof *parts);
  if (!parts) return loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: gradient: out of memory", n->name);
  for (int i = 0; i < m; i++) parts[i] = dy_or_zeros(g, n, dy, i);
  if (n->op == LOOM_OP_Unpack) dx[0].values = loom_stack(g, m, parts, n->attrs.axis, NULL);
  else dx[0].values = m == 1 ? parts[0] : loom_concat(g, m, parts, n->attrs.axis, NULL);
  loom__free(parts);
  return LOOM_OK;
}

static loom_code grad_pack(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  int m = n->nin;
  loom_output *parts = loom__calloc((size_t)m, sizeof *parts);
  if (!parts) return loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: gradient: out of memory", n->name);
  loom_unstack(g, dy[0], m, n->attrs.axis, parts, NULL);
  for (int i = 0; i < m; i++) dx[i].values = parts[i];
  loom__free(parts);
  return LOOM_OK;
}

/* Slice: dy padded back to x's shape. Dims whose trailing padding is unknown
 * (an explicit size on an unknown dim) get their tail by concatenating zeros
 * shaped like the rest of x along that dim. */
static loom_code grad_slice(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0];
  const loom_tdesc *xd = desc(x);
  int r = xd->ndim;
  const int64_t *b = n->attrs.shape, *s = n->attrs.size;
  int64_t before[LOOM_MAX_DIMS], after[LOOM_MAX_DIMS];
  int tail[LOOM_MAX_DIMS], any = 0, ntail = 0;
  for (int i = 0; i < r; i++) {
    before[i] = b[i];
    tail[i] = 0;
    if (s[i] < 0) after[i] = 0;
    else if (xd->dims[i] >= 0) after[i] = xd->dims[i] - b[i] - s[i];
    else {
      after[i] = 0;
      tail[i] = 1;
      ntail++;
    }
    if (before[i] || after[i]) any = 1;
  }
  loom_output t = any ? loom_pad(g, dy[0], before, after, 0.0, NULL) : dy[0];
  for (int i = 0; i < r && ntail; i++) {
    if (!tail[i]) continue;
    int64_t tb[LOOM_MAX_DIMS], ts[LOOM_MAX_DIMS];
    for (int j = 0; j < r; j++) {
      tb[j] = 0;
      ts[j] = -1;
      if (j > i && tail[j]) ts[j] = b[j] + s[j]; /* not yet grown: t has b+s there */
    }
    tb[i] = b[i] + s[i];
    loom_output z = loom_zeros_like(g, loom_slice(g, x, tb, ts, NULL), NULL);
    loom_output pair[2] = {t, z};
    t = loom_concat(g, 2, pair, i, NULL);
    tail[i] = 0;
  }
  dx[0].values = t;
  return LOOM_OK;
}

/* PadV2: the middle block of dy. Unknown dims with trailing padding are cut
 * with a split of sizes {-1, after}. */
static loom_code grad_pad(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  const loom_tdesc *xd = desc(n->in[0]);
  int r = xd->ndim;
  const int64_t *before = n->attrs.shape, *after = n->attrs.size;
  int64_t size[LOOM_MAX_DIMS];
  int any = 0;
  for (int i = 0; i < r; i++) {
    size[i] = xd->dims[i] >= 0 ? xd->dims[i] : -1;
    if (before[i] || after[i]) any = 1;
  }
  if (!any) {
    dx[0].values = dy[0];
    return LOOM_OK;
  }
  loom_output t = loom_slice(g, dy[0], before, size, NULL);
  for (int i = 0; i < r; i++) {
    if (xd->dims[i] >= 0 || after[i] == 0) continue;
    int64_t sz[2] = {-1, after[i]};
    loom_output parts[2];
    loom_split_v(g, t, 2, sz, i, parts, NULL);
    t = parts[0];
  }
  dx[0].values = t;
  return LOOM_OK;
}

static loom_code grad_reshape_back(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  /* ExpandDims, Squeeze */
  dx[0].values = loom_reshape_like(g, dy[0], n->in[0], NULL);
  return LOOM_OK;
}

/* Tile: with x's dims known, dy is viewed as [m0, d0, m1, d1, ...] (pairs
 * with m == 1 collapsed) and summed over the multiples; otherwise each tiled
 * axis is split into its m copies, which are added. */
static loom_code grad_tile(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0];
  const loom_tdesc *xd = desc(x);
  int r = xd->ndim;
  const int64_t *m = n->attrs.shape;
  int tiled = 0;
  for (int i = 0; i < r; i++) {
    if (m[i] == 0) {
      dx[0].values = loom_zeros_like(g, x, NULL);
      return LOOM_OK;
    }
    if (m[i] != 1) tiled++;
  }
  if (!tiled) {
    dx[0].values = dy[0];
    return LOOM_OK;
  }
  if (all_known(xd) && r + tiled <= LOOM_MAX_DIMS) {
    int64_t shp[LOOM_MAX_DIMS], axes[LOOM_MAX_DIMS];
    int k = 0, na = 0;
    for (int i = 0; i < r; i++) {
      if (m[i] != 1) {
        axes[na++] = k;
        shp[k++] = m[i];
      }
      shp[k++] = xd->dims[i];
    }
    loom_output v = loom_reshape(g, dy[0], k, shp, NULL);
    dx[0].values = loom_reshape_like(g, loom_reduce_sum(g, v, na, axes, 0, NULL), x, NULL);
    return LOOM_OK;
  }
  loom_output t = dy[0];
  for (int i = 0; i < r; i++) {
    if (m[i] == 1) continue;
    if (m[i] > 4096) return unimpl(g, n, "multiples above 4096 on an input with unknown dimensions");
    loom_output *parts = loom__calloc((size_t)m[i], sizeof *parts);
    if (!parts) return loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: gradient: out of memory", n->name);
    loom_split(g, t, (int)m[i], i, parts, NULL);
    loom_output acc = parts[0];
    for (int64_t k = 1; k < m[i]; k++) acc = loom_add(g, acc, parts[k], NULL);
    loom__free(parts);
    t = acc;
  }
  dx[0].values = t;
  return LOOM_OK;
}

/* ---- indexing ---- */

/* indices flattened to a vector */
static loom_output flat(loom_graph *g, loom_output ix) {
  if (desc(ix)->ndim == 1) return ix;
  int64_t m1 = -1;
  return loom_reshape(g, ix, 1, &m1, NULL);
}

/* params p with axis a moved to the front (p itself for a == 0) */
static loom_output axis_first(loom_graph *g, loom_output p, int64_t a) {
  if (a == 0) return p;
  int r = desc(p)->ndim;
  int64_t perm[LOOM_MAX_DIMS];
  int k = 0;
  perm[k++] = a;
  for (int i = 0; i < r; i++)
    if (i != a) perm[k++] = i;
  return loom_transpose(g, p, r, perm, NULL);
}

/* v [ind.shape..., rest...] (q leading index dims) viewed as [N, rest...].
 * When the static dims leave that shape ambiguous (two or more unknowns), it
 * is taken at run time from gather(axis_first(p, a), flat(ix)), which has
 * exactly that shape. */
static loom_output flatten_lead(loom_graph *g, loom_output v, int q, loom_output p, int64_t a, loom_output ix) {
  if (q == 1) return v;
  if (q == 0) return loom_expand_dims(g, v, 0, NULL);
  const loom_tdesc *vd = desc(v);
  int64_t shp[LOOM_MAX_DIMS];
  int unknown = 0, k = 0;
  int64_t lead = 1;
  for (int i = 0; i < q; i++) {
    if (vd->dims[i] < 0) lead = -1;
    else if (lead >= 0) lead *= vd->dims[i];
  }
  shp[k++] = lead;
  if (lead < 0) unknown++;
  for (int i = q; i < vd->ndim; i++) {
    shp[k++] = vd->dims[i];
    if (vd->dims[i] < 0) unknown++;
  }
  if (unknown <= 1) return loom_reshape(g, v, k, shp, NULL);
  return loom_reshape_like(g, v, loom_gather(g, axis_first(g, p, a), flat(g, ix), 0, NULL), NULL);
}

static loom_code grad_gather(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output p = n->in[0], ix = n->in[1];
  const loom_tdesc *pd = desc(p);
  int r = pd->ndim, q = desc(ix)->ndim;
  int64_t a = loom__norm_axis(n->attrs.axis, r);
  if (a == 0) {
    dx[0].values = flatten_lead(g, dy[0], q, p, 0, ix);
    dx[0].indices = flat(g, ix);
    return LOOM_OK;
  }
  /* move the index dims of dy to the front: [ind..., p[:a], p[a+1:]] */
  int rd = r - 1 + q;
  int64_t perm[LOOM_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < q; i++) perm[k++] = a + i;
  for (int i = 0; i < a; i++) perm[k++] = i;
  for (int i = (int)a + q; i < rd; i++) perm[k++] = i;
  loom_output v = q ? loom_transpose(g, dy[0], rd, perm, NULL) : dy[0];
  v = flatten_lead(g, v, q, p, a, ix);
  loom_output fi = q == 0 ? loom_reshape(g, ix, 1, (int64_t[]){1}, NULL) : flat(g, ix);
  /* rows of s: p's axis a; then p[:a], p[a+1:] */
  loom_output s;
  if (pd->dims[a] >= 0) s = loom_unsorted_segment_sum(g, v, fi, pd->dims[a], NULL);
  else s = loom_scatter_add(g, loom_zeros_like(g, axis_first(g, p, a), NULL), fi, v, NULL);
  int64_t back[LOOM_MAX_DIMS];
  k = 0;
  for (int i = 1; i <= a; i++) back[k++] = i;
  back[k++] = 0;
  for (int i = (int)a + 1; i < r; i++) back[k++] = i;
  dx[0].values = loom_transpose(g, s, r, back, NULL);
  return LOOM_OK;
}

static loom_code grad_scatter_add(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = dy[0];
  dx[2].values = loom_gather(g, dy[0], flat(g, n->in[1]), 0, NULL);
  return LOOM_OK;
}

/* TensorScatterUpdate: the tensor's updated rows are overwritten (no
 * gradient); each update row gets dy of its row, except rows overwritten by a
 * later duplicate index (last one wins), which get 0 when the number of
 * updates and of rows are known statically (else, like TF, every duplicate
 * gets the gradient). */
static loom_code grad_scatter_update(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output t = n->in[0], ix = n->in[1], u = n->in[2];
  loom_output fi = flat(g, ix);
  dx[0].values = loom_scatter_update(g, dy[0], ix, loom_zeros_like(g, u, NULL), NULL);
  loom_output gu = loom_gather(g, dy[0], fi, 0, NULL);
  int64_t k = desc(u)->dims[0], rows = desc(t)->dims[0];
  if (k > 1 && rows >= 0 && k <= INT32_MAX) {
    loom_dtype it = desc(fi)->dtype;
    loom_output ids = loom_range(g, 0, (double)k, 1, it, NULL);
    loom_output minus1 = it == LOOM_I64 ? loom_const_i64(g, -1, NULL) : loom_const_i32(g, -1, NULL);
    loom_output base = loom_fill(g, 1, &rows, minus1, NULL);
    loom_output winner = loom_scatter_update(g, base, fi, ids, NULL);
    loom_output won = loom_equal(g, loom_gather(g, winner, fi, 0, NULL), ids, NULL);
    int ru = desc(u)->ndim;
    int64_t shp[LOOM_MAX_DIMS];
    shp[0] = k;
    for (int i = 1; i < ru; i++) shp[i] = 1;
    loom_output mask = loom_reshape(g, loom_cast(g, won, desc(u)->dtype, NULL), ru, shp, NULL);
    gu = loom_mul(g, gu, mask, NULL);
  }
  dx[2].values = gu;
  return LOOM_OK;
}

static loom_code grad_segment(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output data = n->in[0], ids = n->in[1];
  loom_output gd = loom_gather(g, dy[0], ids, 0, NULL);
  if (n->op == LOOM_OP_UnsortedSegmentSum) {
    dx[0].values = gd;
    return LOOM_OK;
  }
  loom_dtype dt = desc(data)->dtype;
  loom_output ones = loom_cast(g, loom_ones_like(g, ids, NULL), dt, NULL);
  loom_output counts = loom_unsorted_segment_sum(g, ones, ids, n->attrs.num, NULL);
  loom_output rowc = loom_gather(g, counts, ids, 0, NULL); /* >= 1: the row is in its segment */
  if (n->op == LOOM_OP_UnsortedSegmentSqrtN) rowc = loom_sqrt(g, rowc, NULL);
  int rd = desc(data)->ndim;
  int64_t shp[LOOM_MAX_DIMS];
  shp[0] = -1;
  for (int i = 1; i < rd; i++) shp[i] = 1;
  if (rd > 1) rowc = loom_reshape(g, rowc, rd, shp, NULL);
  dx[0].values = loom_div(g, gd, rowc, NULL);
  return LOOM_OK;
}

static loom_code grad_cast(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_dtype from = desc(n->in[0])->dtype, to = n->out[0].dtype;
  if (is_float(from) && is_float(to)) dx[0].values = from == to ? dy[0] : loom_cast(g, dy[0], from, NULL);
  return LOOM_OK;
}

static loom_code grad_fill(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  if (is_float(desc(n->in[0])->dtype)) dx[0].values = loom_reduce_sum(g, dy[0], -1, NULL, 0, NULL);
  return LOOM_OK;
}

/* TopKV2: dy of the values goes back to the positions the indices name.
 * With the leading dims known: one scatter-add into the flattened x at
 * row * C + index; otherwise a one-hot [..., k, C] contraction (C known). */
static loom_code grad_top_k(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  loom_output x = n->in[0], ix = (loom_output){n, 1};
  const loom_tdesc *xd = desc(x);
  loom_dtype dt = xd->dtype;
  if (!dy[0].node || !is_float(dt)) return LOOM_OK;
  int r = xd->ndim;
  int64_t C = xd->dims[r - 1], k = n->attrs.num;
  if (k == 0) {
    dx[0].values = loom_zeros_like(g, x, NULL);
    return LOOM_OK;
  }
  if (C < 0) return unimpl(g, n, "the last dimension of the input is unknown");
  int64_t R = 1;
  for (int i = 0; i < r - 1; i++) R = xd->dims[i] < 0 || R < 0 ? -1 : R * xd->dims[i];
  if (R >= 0) {
    loom_dtype it = R * C > INT32_MAX ? LOOM_I64 : LOOM_I32;
    int64_t rk[2] = {R, k}, r1[2] = {R, 1}, m1 = -1;
    loom_output idx = loom_reshape(g, ix, 2, rk, NULL);
    if (it == LOOM_I64) idx = loom_cast(g, idx, LOOM_I64, NULL);
    loom_output off = loom_reshape(g, loom_range(g, 0, (double)(R * C), (double)C, it, NULL), 2, r1, NULL);
    loom_output pos = loom_reshape(g, loom_add(g, idx, off, NULL), 1, &m1, NULL);
    loom_output zf = loom_reshape(g, loom_zeros_like(g, x, NULL), 1, &m1, NULL);
    loom_output s = loom_scatter_add(g, zf, pos, loom_reshape(g, dy[0], 1, &m1, NULL), NULL);
    dx[0].values = loom_reshape_like(g, s, x, NULL);
    return LOOM_OK;
  }
  loom_output oh = loom_one_hot(g, ix, C, 1.0, 0.0, -1, dt, NULL);
  int64_t ax = -2;
  dx[0].values = loom_reduce_sum(g, loom_mul(g, loom_expand_dims(g, dy[0], -1, NULL), oh, NULL), 1, &ax, 0, NULL);
  return LOOM_OK;
}

void loom__register_array_grads(loom_op_def *t);
void loom__register_array_grads(loom_op_def *t) {
  t[LOOM_OP_Reshape].grad = grad_reshape;
  t[LOOM_OP_ReshapeLike].grad = grad_reshape;
  t[LOOM_OP_BroadcastLike].grad = grad_broadcast;
  t[LOOM_OP_BroadcastTo].grad = grad_broadcast;
  t[LOOM_OP_Transpose].grad = grad_transpose;
  t[LOOM_OP_Concat].grad = grad_concat;
  t[LOOM_OP_Split].grad = grad_split;
  t[LOOM_OP_SplitV].grad = grad_split;
  t[LOOM_OP_Unpack].grad = grad_split;
  t[LOOM_OP_Slice].grad = grad_slice;
  t[LOOM_OP_Pack].grad = grad_pack;
  t[LOOM_OP_ExpandDims].grad = grad_reshape_back;
  t[LOOM_OP_Squeeze].grad = grad_reshape_back;
  t[LOOM_OP_Tile].grad = grad_tile;
  t[LOOM_OP_Pad].grad = grad_pad;
  t[LOOM_OP_Gather].grad = grad_gather;
  t[LOOM_OP_ScatterAdd].grad = grad_scatter_add;
  t[LOOM_OP_ScatterUpdate].grad = grad_scatter_update;
  t[LOOM_OP_UnsortedSegmentSum].grad = grad_segment;
  t[LOOM_OP_UnsortedSegmentMean].grad = grad_segment;
  t[LOOM_OP_UnsortedSegmentSqrtN].grad = grad_segment;
  t[LOOM_OP_Cast].grad = grad_cast;
  t[LOOM_OP_Fill].grad = grad_fill;
  t[LOOM_OP_TopK].grad = grad_top_k;
}
