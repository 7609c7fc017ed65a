/* Symbolic reverse-mode differentiation (tf.gradients). Lives in ops/ because
 * it builds nodes with the ordinary builders. */
#include <stdlib.h>
#include "ops/op_common.h"

typedef struct contrib {
  loom_gradient g;
  struct contrib *next;
} contrib;

typedef struct {
  loom_graph *g;
  contrib **slot;     /* per (node id, output): list of contributions */
  int32_t *slot_base; /* node id -> first slot */
  contrib *pool;      /* all contribs (freed at the end) */
  int npool, cappool;
} ad_state;

static int add_contrib(ad_state *s, const loom_node *n, int idx, loom_gradient gr) {
  if (s->npool == s->cappool) return -1;
  contrib *c = &s->pool[s->npool++];
  c->g = gr;
  int k = s->slot_base[n->id] + idx;
  c->next = s->slot[k];
  s->slot[k] = c;
  return 0;
}

/* Whether sparse indices may hold LOOM_NO_ROW_I32/I64 (kernels/kernel.h),
 * the "no row" marker of a pruned SparseEmbedding id (its row of values is
 * zero): from SparseEmbeddingGrad, or a concatenation holding such indices. */
static int may_hold_no_row(loom_output ix) {
  const loom_node *n = ix.node;
  if (n->op == LOOM_OP_SparseEmbeddingGrad) return 1;
  if (n->op == LOOM_OP_Concat)
    for (int k = 0; k < n->nin; k++)
      if (may_hold_no_row(n->in[k])) return 1;
  return 0;
}

static loom_output densify(loom_graph *g, loom_output like, loom_gradient gr) {
  if (!gr.indices.node) return gr.values;
  loom_output ix = gr.indices;
  if (may_hold_no_row(ix)) /* no row -> row 0, to which its zero row adds nothing */
    ix = loom_maximum(g, ix, loom_zeros_like(g, ix, NULL), NULL);
  return loom_scatter_add(g, loom_zeros_like(g, like, NULL), ix, gr.values, NULL);
}

/* Sums a contribution list. keep_sparse: when every term is sparse, the
 * result stays sparse (indices and rows concatenated). */
static loom_gradient sum_contribs(loom_graph *g, loom_output like, contrib *list, int keep_sparse) {
  loom_gradient r = {{NULL, 0}, {NULL, 0}};
  if (!list) return r;
  int all_sparse = 1, n = 0;
  for (contrib *c = list; c; c = c->next, n++)
    if (!c->g.indices.node) all_sparse = 0;
  if (n == 1 && (keep_sparse || !all_sparse)) return list->g;
  if (all_sparse && keep_sparse) {
    loom_output *iv = loom__calloc((size_t)n, sizeof *iv), *vv = loom__calloc((size_t)n, sizeof *vv);
    if (!iv || !vv) {
      loom__free(iv);
      loom__free(vv);
      loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "gradients: out of memory");
      return r;
    }
    int k = 0;
    for (contrib *c = list; c; c = c->next, k++) {
      iv[k] = c->g.indices;
      vv[k] = c->g.values;
    }
    r.indices = loom_concat(g, n, iv, 0, NULL);
    r.values = loom_concat(g, n, vv, 0, NULL);
    loom__free(iv);
    loom__free(vv);
    return r;
  }
  loom_output acc = {NULL, 0};
  for (contrib *c = list; c; c = c->next) {
    loom_output d = densify(g, like, c->g);
    acc = acc.node ? loom_add(g, acc, d, NULL) : d;
  }
  r.values = acc;
  return r;
}

static int node_ok(const loom_graph *g, const loom_node *n) {
  return n && n->graph == g && n->id >= 0 && n->id < g->nnodes && g->nodes[n->id] == n;
}

loom_code loom_gradients_sparse(loom_graph *g, int ny, const loom_output *ys, const loom_output *grad_ys, int nx,
                                const loom_output *xs, loom_gradient *grads, loom_status *st) {
  if (!g) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "gradients: graph is NULL");
  if (ny <= 0 || nx < 0 || !ys || (nx && (!xs || !grads)))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "gradients: invalid argument lists");
  if (loom_graph_status(g, st)) return loom_status_code(st);
  for (int i = 0; i < nx; i++) grads[i] = (loom_gradient){{NULL, 0}, {NULL, 0}};
  for (int i = 0; i < ny; i++)
    if (!node_ok(g, ys[i].node) || ys[i].index < 0 || ys[i].index >= ys[i].node->nout)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "gradients: ys[%d] is not an output of this graph", i);
  for (int i = 0; i < nx; i++)
    if (!node_ok(g, xs[i].node) || xs[i].index < 0 || xs[i].index >= xs[i].node->nout)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "gradients: xs[%d] is not an output of this graph", i);
  for (int i = 0; grad_ys && i < ny; i++)
    if (grad_ys[i].node && !node_ok(g, grad_ys[i].node))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "gradients: grad_ys[%d] is not an output of this graph", i);

  int N = g->nnodes; /* nodes added below are not visited */
  uint8_t *from_y = loom__calloc((size_t)N + 1, 1), *from_x = loom__calloc((size_t)N + 1, 1);
  int32_t *base = loom__malloc(((size_t)N + 1) * sizeof *base);
  int nslots = 0, nedges = 0;
  for (int i = 0; i < N; i++) {
    nslots += g->nodes[i]->nout;
    nedges += g->nodes[i]->nin;
  }
  contrib **slot = loom__calloc((size_t)nslots + 1, sizeof *slot);
  int cap = nedges + nslots + ny + 16;
  contrib *pool = loom__calloc((size_t)cap, sizeof *pool);
  if (!from_y || !from_x || !base || !slot || !pool) {
    loom__free(from_y); loom__free(from_x); loom__free(base); loom__free(slot); loom__free(pool);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "gradients: out of memory");
  }
  for (int i = 0, k = 0; i < N; i++) {
    base[i] = k;
    k += g->nodes[i]->nout;
  }
  /* Data inputs always have smaller ids than their consumers, so id order is
   * a topological order of the data edges. */
  for (int i = 0; i < ny; i++) from_y[ys[i].node->id] = 1;
  for (int id = N - 1; id >= 0; id--) {
    if (!from_y[id]) continue;
    const loom_node *n = g->nodes[id];
    if (n->op == LOOM_OP_StopGradient) continue;
    for (int k = 0; k < n->nin; k++) from_y[n->in[k].node->id] = 1;
  }
  for (int i = 0; i < nx; i++) from_x[xs[i].node->id] = 1;
  for (int id = 0; id < N; id++) {
    if (from_x[id]) continue;
    const loom_node *n = g->nodes[id];
    for (int k = 0; k < n->nin; k++)
      if (from_x[n->in[k].node->id]) {
        from_x[id] = 1;
        break;
      }
  }
  ad_state s = {g, slot, base, pool, 0, cap};
  loom_code rc = LOOM_OK;
  for (int i = 0; i < ny; i++) {
    if (!from_x[ys[i].node->id]) continue;
    loom_gradient gy = {{NULL, 0}, {NULL, 0}};
    gy.values = (grad_ys && grad_ys[i].node) ? grad_ys[i] : loom_ones_like(g, ys[i], NULL);
    add_contrib(&s, ys[i].node, ys[i].index, gy);
  }
  loom_output dyv[64];
  loom_gradient dxv[64];
  for (int id = N - 1; id >= 0 && !rc; id--) {
    if (!from_y[id] || !from_x[id]) continue;
    loom_node *n = g->nodes[id];
    const loom_op_def *d = n->def;
    int any = 0;
    for (int j = 0; j < n->nout; j++)
      if (slot[base[id] + j]) any = 1;
    if (!any || n->nin == 0) continue;
    if (n->op == LOOM_OP_StopGradient) continue;
    if (!d->grad) {
      if (d->flags & LOOM_OPF_NODIFF) continue;
      rc = loom_status_set(st, LOOM_UNIMPLEMENTED, "%s: no gradient is defined for op %s", n->name, d->name);
      break;
    }
    loom_output *dy = n->nout <= 64 ? dyv : loom__calloc((size_t)n->nout, sizeof *dy);
    loom_gradient *dx = n->nin <= 64 ? dxv : loom__calloc((size_t)n->nin, sizeof *dx);
    if (!dy || !dx) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "gradients: out of memory");
      break;
    }
    for (int j = 0; j < n->nout; j++) {
      /* Identity passes sparse gradients through unchanged */
      loom_gradient sg = sum_contribs(g, (loom_output){n, j}, slot[base[id] + j], n->op == LOOM_OP_Identity);
      if (n->op == LOOM_OP_Identity && sg.indices.node) {
        add_contrib(&s, n->in[0].node, n->in[0].index, sg);
        dy[j] = (loom_output){NULL, 0};
        goto next_node;
      }
      dy[j] = sg.values;
    }
    for (int k = 0; k < n->nin; k++) dx[k] = (loom_gradient){{NULL, 0}, {NULL, 0}};
    if (loom__graph_failed(g)) break;
    rc = d->grad(g, n, dy, dx);
    if (rc || loom__graph_failed(g)) {
      if (!loom__graph_failed(g))
        loom_graph_set_error(g, rc, "%s: gradient function of %s failed", n->name, d->name);
      rc = loom_graph_status(g, st);
      break;
    }
    for (int k = 0; k < n->nin; k++) {
      if (!dx[k].values.node || loom__op_nondiff(d, k)) continue;
      const loom_node *m = n->in[k].node;
      if (!from_x[m->id]) continue;
      if (add_contrib(&s, m, n->in[k].index, dx[k])) {
        rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "gradients: too many gradient terms");
        break;
      }
    }
  next_node:
    if (dy != dyv) loom__free(dy);
    if (dx != dxv) loom__free(dx);
  }
  if (!rc) {
    for (int i = 0; i < nx; i++) grads[i] = sum_contribs(g, xs[i], slot[base[xs[i].node->id] + xs[i].index], 1);
    rc = loom_graph_status(g, st);
  }
  loom__free(from_y);
  loom__free(from_x);
  loom__free(base);
  loom__free(slot);
  loom__free(pool);
  return rc;
}

loom_code loom_gradients(loom_graph *g, int ny, const loom_output *ys, const loom_output *grad_ys, int nx,
                         const loom_output *xs, loom_output *grads, loom_status *st) {
  loom_gradient *gs = loom__calloc((size_t)(nx > 0 ? nx : 1), sizeof *gs);
  if (!gs) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "gradients: out of memory");
  loom_code rc = loom_gradients_sparse(g, ny, ys, grad_ys, nx, xs, gs, st);
  for (int i = 0; i < nx; i++) {
    grads[i] = (loom_output){NULL, 0};
    if (!rc && gs[i].values.node) grads[i] = densify(g, xs[i], gs[i]);
  }
  loom__free(gs);
  if (!rc) rc = loom_graph_status(g, st);
  return rc;
}
