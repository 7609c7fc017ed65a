/* engine/fuse.c - elementwise steps folded into the step before them.
 *
 * A CPU plan whose buffers are laid out (engine/session.c, specialize) runs a
 * BiasAdd and a Relu that follow a Conv2D, and a ReluGrad that follows a
 * MaxPoolGrad, inside that step's kernel (ctx->epi, kernels/kernel.h): the
 * values stay in cache between them instead of making two more passes over
 * memory; a 2x2 stride-2 MaxPool reading the end of a Conv2D's chain too
 * (the pool taken from each pair of rows as the convolution writes them), when
 * the pool's output buffer is free from the convolution's step on. A chain is
 * folded only when nothing else can tell: each
 * intermediate value has exactly one reader (the next step of the chain, as
 * its input 0), none is fetched, every step of the chain already writes the
 * first one's buffer (the in-place rule of specialize), and what the folded
 * steps read besides (the bias, the ReluGrad features) is final when the first
 * step runs: made by an earlier step or held outside the arena with no step
 * between them that writes in place. The folded steps then run a no-op.
 * A BiasAddGrad over such a MaxPoolGrad's result still runs, but only adds
 * up the per-image column sums the MaxPoolGrad took while each image was in
 * cache (in double, as its own pass sums; deterministic, not bit for bit).
 * A Conv2DBackpropFilter whose dy is such a MaxPoolGrad's result, its only
 * reader besides that BiasAddGrad, is folded into the MaxPoolGrad too when
 * its loops allow (a small window over a padded input: a first layer's): the
 * MaxPoolGrad makes each image of dy in a scratch of its own and the filter
 * gradient adds it while in cache (the same additions in the same order as
 * the separate step: bit for bit), so that dy is never written. Its input
 * must be final and its output's buffer free from the MaxPoolGrad's step on
 * (else moved past the arena's end); the workspace goes past the end.
 * Where a folded pool's input is read by nothing but the pool and a
 * MaxPoolGrad with its ReluGrad folded, the convolution records which pixel of
 * each window won (a byte per pooled value) and the MaxPoolGrad routes by it
 * without reading that input, which the convolution then need not write.
 * A Conv2DBackpropFilter over such a MaxPoolGrad's result (zero but at the
 * winners) runs inside the MaxPoolGrad from the pooled values and their
 * winners when its geometry allows (kernels/cpu/nn.h: loom__conv_dw_winners;
 * chosen before the images-in-scratch fold above): not bit for bit the
 * separate step's (its products summed exactly, in another order). A
 * Conv2DBackpropInput reading that result makes its padded images of dy from
 * the pooled values and winners instead, when its Winograd loops run and the
 * MaxPoolGrad's dy stays untouched until then (kernels/kernel.h: routed). The result
 * is still written for any other reader; with none but these and a BiasAddGrad
 * given column sums, it is not made at all (the sums taken from the pooled
 * values).
 * LOOM_FOLD=0 in the environment turns folding off (benchmarks, tests). */
#include <stdlib.h>
#include <string.h>
#include "engine/fuse.h"
#include "base/base.h"
#include "kernels/cpu/nn.h" /* loom__conv_dw_images_ws, loom__conv_dw_winners_ws */

static int fold_enabled(void) {
  static int on = -1; /* read once; racing first calls store the same value */
  int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
  if (v < 0) {
    const char *e = getenv("LOOM_FOLD");
    v = !(e && !strcmp(e, "0"));
    __atomic_store_n(&on, v, __ATOMIC_RELAXED);
  }
  return v;
}

static loom_code folded_away(const loom_kctx *ctx) {
  (void)ctx;
  return LOOM_OK;
}

static int root(const loom_plan *p, int vi) {
  while (p->values[vi].kind == VAL_ALIAS) vi = p->values[vi].alias_of;
  return vi;
}
static int in_root(const loom_plan *p, const loom_node *n, int k) {
  return root(p, p->node_val[n->in[k].node->id] + n->in[k].index);
}
static int is_op(const loom_node *n, const char *name) { return !strcmp(n->def->name, name); }

/* Whether a step in (i, j) writes in place (assign, optimizer ops). */
static int mutation_between(const loom_plan *p, int i, int j) {
  for (int k = i + 1; k < j; k++) {
    const loom_op_def *d = p->steps[k].node->def;
    for (int x = 0; x < p->steps[k].node->nin; x++)
      if (loom__op_mutates(d, x)) return 1;
  }
  return 0;
}

/* Whether value vi, read by step `later`, is final before step i and stays so until `later`: an arena
 * value made before step i (its bytes are kept until its last reader, and no step writes an arena
 * value in place while a later step still reads it), else one (a variable, a feed) that no step in
 * (i, later) writes in place. */
static int ready_at(const loom_plan *p, int vi, int i, int later) {
  const plan_value *v = &p->values[vi];
  if (v->kind == VAL_ARENA) return v->producer >= 0 && v->producer < i && v->last_use >= later;
  return !mutation_between(p, i, later);
}

typedef struct {
  int32_t *readers; /* per root value: the steps' inputs that read it */
  int32_t *reader;  /* the last (step << 8 | input) that read it */
  int32_t *pooled;  /* per step: a Conv2D's folded chain's end (the pool's input) when it folds a pool, else -1 */
  int32_t *masked;  /* per step: a MaxPoolGrad's result with its ReluGrad folded (the ReluGrad's value), else -1 */
} use_map;

/* The step that is the only reader of value vi, as its input 0 (-1 when none
 * or not so); vi must be an arena value nobody fetches, of the same bytes as
 * the reader's output 0, which writes it in place (same offset). */
static int sole_inplace_reader(const loom_plan *p, const use_map *u, int vi) {
  const plan_value *v = &p->values[vi];
  if (v->kind != VAL_ARENA || v->last_use == INT32_MAX || u->readers[vi] != 1 || (u->reader[vi] & 0xff) != 0)
    return -1;
  int j = u->reader[vi] >> 8;
  const plan_value *o = &p->values[p->node_val[p->steps[j].node->id]];
  if (o->kind != VAL_ARENA || o->last_use == INT32_MAX || o->offset != v->offset || o->bytes != v->bytes ||
      o->buf.dtype != v->buf.dtype)
    return -1;
  return j;
}

static int same_dims(const loom_buf *a, const loom_buf *b) {
  return a->ndim == b->ndim && !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim);
}

/* Whether arena bytes [off, off + n) are free during steps [i, j): no other arena value live then
 * and no workspace of those steps overlaps them. */
static int arena_free_during(const loom_plan *p, int64_t off, size_t n, int i, int j, int self) {
  for (int k = 0; k < p->nvalues; k++) {
    const plan_value *v = &p->values[k];
    if (k == self || v->kind != VAL_ARENA || v->bytes == 0) continue;
    int a = v->producer >= 0 ? v->producer : 0, b = v->last_use > a ? v->last_use : a;
    if (b < i || a >= j) continue;
    if (v->offset < off + (int64_t)n && off < v->offset + (int64_t)v->bytes) return 0;
  }
  for (int k = i; k < j; k++) {
    const plan_step *s = &p->steps[k];
    if (s->ws_bytes && !s->on_host && s->ws_offset < off + (int64_t)n && off < s->ws_offset + (int64_t)s->ws_bytes)
      return 0;
  }
  return 1;
}

/* A 2x2 stride-2 MaxPool step reading value vi ([N, H, W, C], H and W even) that can be folded into
 * step i: -1 when none. */
static int pool_reader(const loom_plan *p, const use_map *u, int i, int vi) {
  const loom_buf *y = &p->values[vi].buf;
  if (y->ndim != 4 || y->dims[1] % 2 || y->dims[2] % 2 || u->readers[vi] < 1) return -1;
  for (int j = i + 1; j < p->nsteps; j++) {
    const loom_node *n = p->steps[j].node;
    if (!is_op(n, "MaxPool") || in_root(p, n, 0) != vi) continue;
    const loom_attrs *a = &n->attrs;
    const int vp = p->node_val[n->id];
    const plan_value *o = &p->values[vp];
    if (a->ksize[0] != 1 || a->ksize[1] != 2 || a->ksize[2] != 2 || a->ksize[3] != 1 || a->strides[0] != 1 ||
        a->strides[1] != 2 || a->strides[2] != 2 || a->strides[3] != 1 || o->kind != VAL_ARENA || o->buf.ndim != 4 ||
        o->buf.dims[1] * 2 != y->dims[1] || o->buf.dims[2] * 2 != y->dims[2] || o->buf.dims[3] != y->dims[3])
      return -1;
    return j;
  }
  return -1;
}

/* A BiasAddGrad (its kernel flagged LOOM_OPF_EPI_COLSUM) reading value vi, the final [N, H, W, C]
 * output of MaxPoolGrad step i: step i takes the per-image column sums, the BiasAddGrad adds them. */
static void colsum_reader(loom_plan *p, const use_map *u, int i, int vi) {
  const loom_buf *y = &p->values[vi].buf;
  if (y->ndim != 4 || u->readers[vi] < 1) return;
  for (int j = i + 1; j < p->nsteps; j++) {
    plan_step *sj = &p->steps[j];
    const loom_node *n = sj->node;
    if (!(n->def->flags & LOOM_OPF_EPI_COLSUM) || n->nin != 1 || in_root(p, n, 0) != vi) continue;
    plan_step *si = &p->steps[i];
    si->colsum_mem = loom__malloc((size_t)(y->dims[0] * y->dims[3]) * sizeof(double));
    if (!si->colsum_mem) return; /* without memory the BiasAddGrad sums its input itself */
    si->epi.colsum = si->colsum_mem;
    sj->ctx.epi = &si->epi;
    return;
  }
}

static void fold(loom_plan *p, int j) {
  p->steps[j].fn = folded_away;
  p->nfolded++;
}

static int64_t past_end(int64_t top) { return (top + 63) / 64 * 64; }

/* Arena value vi, written from step i on (by a step folded into step i) but laid out for step j: its
 * buffer moved past the arena's end unless nothing else uses those bytes during [i, j). Returns the
 * arena's size after it. */
static int64_t clear_from(loom_plan *p, int vi, int i, int j, int64_t top) {
  plan_value *v = &p->values[vi];
  if (arena_free_during(p, v->offset, v->bytes, i, j, vi)) return top;
  v->offset = past_end(top);
  return v->offset + (int64_t)v->bytes;
}

/* Step j, a filter gradient, folded into step i with ws bytes of workspace: its output's buffer moved
 * past the arena's end when another value or workspace uses it from step i on, the workspace past the
 * end too. Returns the arena's size after them. */
static int64_t fold_into(loom_plan *p, int i, int j, size_t ws, int64_t top) {
  top = clear_from(p, p->node_val[p->steps[j].node->id], i, j, top);
  p->steps[i].ws_offset = past_end(top);
  p->steps[i].ws_bytes = ws;
  fold(p, j);
  return p->steps[i].ws_offset + (int64_t)ws;
}

/* The first step after step i that is a Conv2DBackpropFilter with value vi (the final output of
 * MaxPoolGrad step i) as its dy, its input final at step i and kept until it, its output in the arena;
 * -1 when there is none or the first is not so. */
static int dw_of(const loom_plan *p, int i, int vi) {
  for (int j = i + 1; j < p->nsteps; j++) {
    const loom_node *n = p->steps[j].node;
    if (p->steps[j].fn == folded_away || !is_op(n, "Conv2DBackpropFilter") || n->nin != 2 || in_root(p, n, 1) != vi)
      continue;
    const int xi = in_root(p, n, 0);
    return xi != vi && ready_at(p, xi, i, j) && p->values[p->node_val[n->id]].kind == VAL_ARENA ? j : -1;
  }
  return -1;
}

/* A Conv2DBackpropFilter reading value vi (the final output of MaxPoolGrad step i, ReluGrad folded) as
 * its dy and nothing else reading vi but a BiasAddGrad given step i's column sums: folded into step i
 * (see above). Returns the arena's size after it. */
static int64_t dw_reader(loom_plan *p, const use_map *u, int i, int vi, int64_t top) {
  plan_step *si = &p->steps[i];
  const plan_value *v = &p->values[vi];
  if (v->kind != VAL_ARENA || v->last_use == INT32_MAX || u->readers[vi] != 1 + (si->epi.colsum != NULL))
    return top;
  const int j = dw_of(p, i, vi);
  if (j < 0) return top;
  const loom_kctx *c = &p->steps[j].ctx; /* the buffers as the step sees them (an alias's shape) */
  size_t ws = loom__conv_dw_images_ws(c->attrs, c->in[0], c->in[1], c->out[0]);
  if (!ws) return top;
  si->epi.dw = c;
  return fold_into(p, i, j, ws, top);
}

/* MaxPoolGrad step k (its ReluGrad folded) over the pool folded into Conv2D step i and that pool's
 * input, read by nothing else but the pool and the ReluGrad (whose features it is): the convolution
 * records where each pooled value came from and the MaxPoolGrad routes dy by that instead of reading
 * the pool's input, which the convolution may then leave unwritten (kernels/kernel.h: argmax). */
static void argmax_route(loom_plan *p, const use_map *u, int k) {
  plan_step *sk = &p->steps[k];
  if (sk->fn == folded_away || !(sk->node->def->flags & LOOM_OPF_EPI_MASK) || !sk->epi.mask || sk->node->nin != 3)
    return;
  const int vx = in_root(p, sk->node, 0);
  for (int i = 0; i < k; i++) {
    plan_step *si = &p->steps[i];
    if (u->pooled[i] != vx || !si->epi.pool || si->epi.argmax) continue;
    const plan_value *x = &p->values[vx];
    const loom_attrs *a = &sk->node->attrs;
    if (si->epi.pool != sk->ctx.in[1] || sk->epi.mask != sk->ctx.in[0] || x->kind != VAL_ARENA ||
        x->last_use == INT32_MAX || u->readers[vx] != 3 || x->buf.ndim != 4 || a->ksize[1] != 2 ||
        a->ksize[2] != 2 || a->strides[1] != 2 || a->strides[2] != 2 || a->ksize[0] != 1 || a->ksize[3] != 1 ||
        a->strides[0] != 1 || a->strides[3] != 1)
      return;
    const loom_buf *y = si->epi.pool;
    si->argmax_mem = loom__malloc((size_t)y->numel);
    if (!si->argmax_mem) return; /* without memory the MaxPoolGrad reads the pool's input */
    si->epi.argmax = sk->epi.argmax = si->argmax_mem;
    return;
  }
}

/* A Conv2DBackpropFilter reading, as its dy, the result of MaxPoolGrad step k that routes by a pool's
 * winners (its ReluGrad folded): computed from the MaxPoolGrad's dy and the winners in step k
 * (kernels/cpu/nn.h: loom__conv_dw_winners), the result still written for its other readers. Its
 * input must be final and its output's buffer free from step k on (else moved past the arena's end);
 * the workspace goes past the end. Returns the arena's size after it. */
static int64_t winners_dw(loom_plan *p, const use_map *u, int k, int64_t top) {
  plan_step *sk = &p->steps[k];
  const int vf = u->masked[k];
  if (vf < 0 || !sk->epi.argmax || sk->epi.dw || sk->ws_bytes) return top;
  const int j = dw_of(p, k, vf);
  if (j < 0) return top;
  const loom_kctx *c = &p->steps[j].ctx;
  if (!same_dims(c->in[1], sk->ctx.out[0])) return top; /* dy as the filter gradient sees it: the result's shape */
  size_t ws = loom__conv_dw_winners_ws(c->attrs, c->in[0], c->in[1], c->out[0]);
  if (!ws) return top;
  sk->epi.wdw = c;
  return fold_into(p, k, j, ws, top);
}

/* A Conv2DBackpropInput reading, as its dy, the result of MaxPoolGrad step k that routes by a pool's
 * winners (its ReluGrad folded): when its loops allow (kernels/cpu/nn.h: loom__conv_dx_routable) it
 * makes each image of dy itself from the MaxPoolGrad's dy and the winners (kernels/kernel.h: routed)
 * instead of reading the result. The MaxPoolGrad's dy must then stay as it is until that step: an
 * arena value made before step k whose bytes nothing else uses until that step is done, or one that
 * no step in between writes in place. Returns whether it does. */
static int routed_dx(loom_plan *p, const use_map *u, int k) {
  plan_step *sk = &p->steps[k];
  const int vf = u->masked[k];
  if (vf < 0 || !sk->epi.argmax) return 0;
  for (int j = k + 1; j < p->nsteps; j++) {
    plan_step *sj = &p->steps[j];
    const loom_node *n = sj->node;
    if (sj->fn == folded_away || !is_op(n, "Conv2DBackpropInput") || n->nin != 2 || in_root(p, n, 1) != vf)
      continue;
    const loom_kctx *c = &sj->ctx;
    const loom_buf *y = sk->ctx.out[0]; /* dy as the input gradient sees it: the result's own shape */
    if (in_root(p, n, 0) == vf || !same_dims(c->in[1], y) ||
        !loom__conv_dx_routable(&n->attrs, c->in[0], c->in[1], c->out[0]))
      return 0;
    const int vd = in_root(p, sk->node, 2);
    const plan_value *d = &p->values[vd];
    if (d->kind == VAL_ARENA ? d->producer < 0 || d->producer >= k ||
                                   !arena_free_during(p, d->offset, d->bytes, k + 1, j + 1, vd)
                             : mutation_between(p, k, j + 1))
      return 0;
    sj->epi.routed = &sk->ctx;
    sj->epi.route = y->dtype == LOOM_F32 ? loom__max_pool_route_image_f32 : loom__max_pool_route_image_f64;
    sj->ctx.epi = &sj->epi;
    return 1;
  }
  return 0;
}

int64_t loom__plan_fuse(loom_plan *p, int64_t top) {
  for (int i = 0; i < p->nsteps; i++) { /* undo an earlier specialization's folding */
    plan_step *sp = &p->steps[i];
    if (sp->fn0) sp->fn = sp->fn0;
    sp->fn0 = sp->fn;
    sp->ctx.epi = NULL;
    memset(&sp->epi, 0, sizeof sp->epi);
    loom__free(sp->colsum_mem);
    sp->colsum_mem = NULL;
    loom__free(sp->argmax_mem);
    sp->argmax_mem = NULL;
  }
  p->nfolded = 0;
  if (p->dev || p->nsteps < 2 || !fold_enabled()) return top;
  use_map u;
  u.readers = loom__calloc((size_t)p->nvalues, sizeof *u.readers);
  u.reader = loom__calloc((size_t)p->nvalues, sizeof *u.reader);
  u.pooled = loom__malloc((size_t)p->nsteps * sizeof *u.pooled);
  u.masked = loom__malloc((size_t)p->nsteps * sizeof *u.masked);
  if (!u.readers || !u.reader || !u.pooled || !u.masked) { /* an optimization: without memory, run every step */
    loom__free(u.readers);
    loom__free(u.reader);
    loom__free(u.pooled);
    loom__free(u.masked);
    return top;
  }
  for (int i = 0; i < p->nsteps; i++) u.pooled[i] = u.masked[i] = -1;
  for (int j = 0; j < p->nsteps; j++) {
    const loom_node *n = p->steps[j].node;
    for (int k = 0; k < n->nin && k < 256; k++) {
      int r = in_root(p, n, k);
      u.readers[r]++;
      u.reader[r] = j << 8 | k;
    }
  }
  for (int i = 0; i < p->nsteps; i++) {
    plan_step *sp = &p->steps[i];
    const loom_node *n = sp->node;
    if (sp->fn == folded_away || n->nout < 1) continue;
    const int vi = p->node_val[n->id];
    const loom_dtype dt = p->values[vi].buf.dtype;
    if (dt != LOOM_F32 && dt != LOOM_F64) continue;
    if (n->def->flags & LOOM_OPF_EPI_BIAS_RELU) {
      int j = sole_inplace_reader(p, &u, vi);
      if (j < 0 || !is_op(p->steps[j].node, "BiasAdd")) continue;
      const loom_node *ba = p->steps[j].node;
      int bi = in_root(p, ba, 1);
      const loom_buf *b = &p->values[bi].buf, *y = &p->values[vi].buf;
      if (!ready_at(p, bi, i, j) || b->dtype != dt || y->ndim < 1 || b->numel != y->dims[y->ndim - 1])
        continue;
      sp->epi.bias = p->steps[j].ctx.in[1];
      fold(p, j);
      int end = p->node_val[ba->id], k = sole_inplace_reader(p, &u, end);
      if (k >= 0 && is_op(p->steps[k].node, "Relu")) {
        sp->epi.relu = 1;
        fold(p, k);
        end = p->node_val[p->steps[k].node->id];
      }
      int m = pool_reader(p, &u, i, end);
      if (m >= 0) {
        /* its buffer in use before the pool's step: a new one past the end (a step that took the old
         * one over in place keeps it, reserved for it all along, and no longer writes in place) */
        top = clear_from(p, p->node_val[p->steps[m].node->id], i, m, top);
        sp->epi.pool = p->steps[m].ctx.out[0];
        fold(p, m);
        u.pooled[i] = end;
      }
      sp->ctx.epi = &sp->epi;
    } else if (n->def->flags & LOOM_OPF_EPI_MASK) {
      int k = sole_inplace_reader(p, &u, vi);
      if (k < 0 || !is_op(p->steps[k].node, "ReluGrad")) continue;
      int fi = in_root(p, p->steps[k].node, 1);
      const loom_buf *f = &p->values[fi].buf, *y = &p->values[vi].buf;
      if (!ready_at(p, fi, i, k) || f->dtype != dt || f->ndim != y->ndim ||
          memcmp(f->dims, y->dims, sizeof(int64_t) * (size_t)y->ndim))
        continue;
      sp->epi.mask = p->steps[k].ctx.in[1];
      fold(p, k);
      sp->ctx.epi = &sp->epi;
      const int vf = root(p, p->node_val[p->steps[k].node->id]);
      colsum_reader(p, &u, i, vf);
      u.masked[i] = vf;
      argmax_route(p, &u, i);
      top = winners_dw(p, &u, i, top);
      const int routed = routed_dx(p, &u, i);
      /* nothing else reads the result (but a BiasAddGrad given the column sums): not written */
      const plan_value *v = &p->values[vf];
      sp->epi.unwritten = sp->epi.argmax && v->kind == VAL_ARENA && v->last_use != INT32_MAX &&
                          u.readers[vf] == (sp->epi.colsum != NULL) + (sp->epi.wdw != NULL) + routed;
      if (!sp->epi.wdw && !routed) top = dw_reader(p, &u, i, vf, top);
    }
  }
  loom__free(u.readers);
  loom__free(u.reader);
  loom__free(u.pooled);
  loom__free(u.masked);
  return top;
}
