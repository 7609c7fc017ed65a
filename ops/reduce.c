#include "ops/op_common.h"
void loom__register_reduce(loom_op_def *t) { (void)t; }
