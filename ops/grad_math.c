/* Gradient functions of the math family (see loom_grad_fn in engine/engine_impl.h). */
#include "ops/op_common.h"

/* Sums a broadcast gradient back to the shape of input x (no-op when the
 * static shapes already agree and are fully known). */
loom_output loom__unbroadcast(loom_graph *g, loom_output dy, loom_output x);
loom_output loom__unbroadcast(loom_graph *g, loom_output dy, loom_output x) {
  const loom_tdesc *a = &dy.node->out[dy.index], *b = &x.node->out[x.index];
  int same = a->ndim == b->ndim;
  for (int i = 0; same && i < a->ndim; i++) same = a->dims[i] == b->dims[i] && a->dims[i] >= 0;
  return same ? dy : loom_reduce_sum_like(g, dy, x, NULL);
}

static loom_code grad_add(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = loom__unbroadcast(g, dy[0], n->in[0]);
  dx[1].values = loom__unbroadcast(g, dy[0], n->in[1]);
  return LOOM_OK;
}

void loom__register_math_grads(loom_op_def *t);
void loom__register_math_grads(loom_op_def *t) { t[LOOM_OP_Add].grad = grad_add; }
