/* Gradient functions of the nn family (see loom_grad_fn in engine/engine_impl.h). */
#include "ops/op_common.h"

void loom__register_nn_grads(loom_op_def *t);
void loom__register_nn_grads(loom_op_def *t) { (void)t; }
