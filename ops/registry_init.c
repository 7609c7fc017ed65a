/* Fills the engine's op table from every family. */
#include "ops/op_common.h"

void loom__register_core_grads(loom_op_def *t);
void loom__register_math_grads(loom_op_def *t);
void loom__register_reduce_grads(loom_op_def *t);
void loom__register_array_grads(loom_op_def *t);
void loom__register_nn_grads(loom_op_def *t);
void loom__register_random_grads(loom_op_def *t);
void loom__register_train_grads(loom_op_def *t);

#ifdef LOOM_HAVE_CUDA
void loom__register_cuda_kernels(loom_op_def *t);
#endif

void loom__ops_register_all(loom_op_def *t) {
  loom__register_core(t);
  loom__register_math(t);
  loom__register_reduce(t);
  loom__register_array(t);
  loom__register_nn(t);
  loom__register_random(t);
  loom__register_train(t);
  /* gradient functions, one file per family (ops/grad_<family>.c) */
  loom__register_core_grads(t);
  loom__register_math_grads(t);
  loom__register_reduce_grads(t);
  loom__register_array_grads(t);
  loom__register_nn_grads(t);
  loom__register_random_grads(t);
  loom__register_train_grads(t);
#ifdef LOOM_HAVE_CUDA
  loom__register_cuda_kernels(t); /* ops/bind_cuda.c */
#endif
}
