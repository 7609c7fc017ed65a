/* ops/registry_init.c - the op table: its storage and names (one row per op
 * of ops/op_list.h), filled from every family and installed into the
 * engine's registry by a static initializer, before main, the way TF
 * registers ops (REGISTER_OP with alwayslink). The Makefile prelinks the
 * library into one object so that a static link keeps this initializer.
 * Nothing here allocates (user allocation hooks may be set later in main). */
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

static loom_op_def g_ops[LOOM_OP_COUNT];
static const char *const g_names[LOOM_OP_COUNT] = {
#define X(e, n) n,
    LOOM_OP_LIST(X)
#undef X
};

__attribute__((constructor)) static void ops_register(void) {
  loom_op_def *t = g_ops;
  for (int i = 0; i < LOOM_OP_COUNT; i++) t[i].name = g_names[i];
  loom__register_core(t);
  loom__register_math(t);
  loom__register_reduce(t);
  loom__register_array(t);
  loom__register_nn(t);
  loom__register_random(t);
  loom__register_train(t);
  loom__register_feature(t); /* ops/feature.c */
  loom__register_sparse(t);  /* ops/sparse.c */
  loom__register_decode(t);  /* ops/decode.c */
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
  loom__registry_install(t, LOOM_OP_COUNT);
}
