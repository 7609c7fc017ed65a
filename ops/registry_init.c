/* Fills the engine's op table from every family. */
#include "ops/op_common.h"

void loom__ops_register_all(loom_op_def *t) {
  loom__register_core(t);
  loom__register_math(t);
  loom__register_reduce(t);
  loom__register_array(t);
  loom__register_nn(t);
  loom__register_random(t);
  loom__register_train(t);
}
