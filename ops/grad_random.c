/* Gradient functions of the random family (see loom_grad_fn in engine/engine_impl.h).
 * The generators have no inputs (and are NODIFF); Dropout's y = x * mask_scaled
 * differentiates with the mask of the same run (its output 1), so no new
 * mask is drawn. The mask output itself carries no gradient. */
#include "ops/op_common.h"

static loom_code grad_dropout(loom_graph *g, loom_node *n, const loom_output *dy, loom_gradient *dx) {
  if (dy[0].node) dx[0].values = loom_mul(g, dy[0], (loom_output){n, 1}, NULL);
  return LOOM_OK;
}

void loom__register_random_grads(loom_op_def *t);
void loom__register_random_grads(loom_op_def *t) { t[LOOM_OP_Dropout].grad = grad_dropout; }
