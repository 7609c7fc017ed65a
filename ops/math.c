/* Math ops: definitions, shape functions, builders. */
#include "ops/op_common.h"
#include "kernels/cpu/math.h"

void loom__register_math(loom_op_def *t) {
  t[LOOM_OP_Add].nin = 2;
  t[LOOM_OP_Add].nout = 1;
  t[LOOM_OP_Add].shape = loom__shape_broadcast;
  t[LOOM_OP_Add].kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_add_f32;
}

loom_output loom_add(loom_graph *g, loom_output a, loom_output b, const char *name) {
  return loom__build2(g, LOOM_OP_Add, name, a, b, NULL);
}
