/* Gradient functions of the train family (see loom_grad_fn in engine/engine_impl.h). */
#include "ops/op_common.h"

void loom__register_train_grads(loom_op_def *t);
void loom__register_train_grads(loom_op_def *t) { (void)t; }
