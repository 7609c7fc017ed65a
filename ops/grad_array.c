/* Gradient functions of the array family (see loom_grad_fn in engine/engine_impl.h). */
#include "ops/op_common.h"

static loom_code grad_reshape(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  dx[0].values = loom_reshape_like(g, dy[0], n->in[0], NULL);
  return LOOM_OK;
}

void loom__register_array_grads(loom_op_def *t);
void loom__register_array_grads(loom_op_def *t) { t[LOOM_OP_Reshape].grad = grad_reshape; }
