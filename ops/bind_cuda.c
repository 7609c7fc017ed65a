/* ops/bind_cuda.c - binds the CUDA kernels to their ops (LOOM_HAVE_CUDA
 * builds only: CUDA=1 and CUDA=emu; the Makefile leaves this file out of the
 * CPU-only build), as ops/<family>.c binds the CPU kernels: one function per
 * kernel family, each expanding that family's list
 * (kernels/cuda/<family>.h, K(OpEnum, kname, dt)) into the op table's
 * kernels[LOOM_DEVICE_CUDA][dtype] slots. Called from
 * loom__ops_register_all (ops/registry_init.c). */
#include "ops/op_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define LOOM_CU_BIND(Op, k, dt) t[LOOM_OP_##Op].kernels[LOOM_DEVICE_CUDA][LOOM_CU_DT_##dt] = loom__cu_##k##_##dt;
#define LOOM_CU_BIND_FAMILY(family, LIST) \
  static void bind_cuda_##family(loom_op_def *t) { LIST(LOOM_CU_BIND) }
LOOM_CU_BIND_FAMILY(array, LOOM_CUDA_ARRAY_KERNELS)
LOOM_CU_BIND_FAMILY(conv, LOOM_CUDA_CONV_KERNELS)
LOOM_CU_BIND_FAMILY(linalg, LOOM_CUDA_LINALG_KERNELS)
LOOM_CU_BIND_FAMILY(math, LOOM_CUDA_MATH_KERNELS)
LOOM_CU_BIND_FAMILY(nn, LOOM_CUDA_NN_KERNELS)
LOOM_CU_BIND_FAMILY(optim, LOOM_CUDA_OPTIM_KERNELS)
LOOM_CU_BIND_FAMILY(random, LOOM_CUDA_RANDOM_KERNELS)
LOOM_CU_BIND_FAMILY(reduce, LOOM_CUDA_REDUCE_KERNELS)

void loom__register_cuda_kernels(loom_op_def *t);
void loom__register_cuda_kernels(loom_op_def *t) {
  bind_cuda_array(t);
  bind_cuda_conv(t);
  bind_cuda_linalg(t);
  bind_cuda_math(t);
  bind_cuda_nn(t);
  bind_cuda_optim(t);
  bind_cuda_random(t);
  bind_cuda_reduce(t);
}
