/* tests/gpu/parity_coverage.h - which CUDA kernels the parity programs ran.
 *
 * Every CUDA kernel the build registers (the op table's
 * kernels[LOOM_DEVICE_CUDA][dtype] slots, bound from the family lists in
 * kernels/cuda/<family>.h by ops/bind_cuda.c) must be run by some case of
 * tests/gpu/test_parity*.c, as tests/test_grad.c demands a gradient case
 * of every differentiable op. parity_coverage_install (from
 * parity_gpu_present) puts a recording trampoline in front of each listed
 * kernel; parity_coverage_write (from parity_report) writes the (op, dtype)
 * slots that ran to $LOOM_PARITY_COVERAGE_DIR/<prog>.txt (nothing when unset
 * or for programs not named test_parity*); tests/gpu/parity_coverage.c
 * takes the union over the programs and fails naming each registered
 * kernel that no program ran. Test-only: reads the engine's op table. */
#ifndef LOOM_TESTS_GPU_PARITY_COVERAGE_H
#define LOOM_TESTS_GPU_PARITY_COVERAGE_H
#include <stdio.h>
#include <string.h>
#include "engine/engine_impl.h"
#include "ops/op_list.h"
#include "kernels/cuda/cuda_kernels.h"

static unsigned char pcov_hit[LOOM_OP_COUNT][LOOM_DTYPE_COUNT];

#define PCOV_TRAMPOLINE(Op, k, dt)                                                \
  static loom_code pcov_##Op##_##k##_##dt(const loom_kctx *ctx) {                 \
    __atomic_store_n(&pcov_hit[LOOM_OP_##Op][LOOM_CU_DT_##dt], 1, __ATOMIC_RELAXED); \
    return loom__cu_##k##_##dt(ctx);                                              \
  }
LOOM_CUDA_KERNELS(PCOV_TRAMPOLINE)
#undef PCOV_TRAMPOLINE

/* Wraps each registered CUDA kernel of the lists in its trampoline. */
static inline void parity_coverage_install(void) {
  loom_op_def *t = loom__op_table();
#define PCOV_INSTALL(Op, k, dt)                                                        \
  if (t[LOOM_OP_##Op].kernels[LOOM_DEVICE_CUDA][LOOM_CU_DT_##dt] == loom__cu_##k##_##dt) \
    t[LOOM_OP_##Op].kernels[LOOM_DEVICE_CUDA][LOOM_CU_DT_##dt] = pcov_##Op##_##k##_##dt;
  LOOM_CUDA_KERNELS(PCOV_INSTALL)
#undef PCOV_INSTALL
}

/* "<op name> <dtype slot>" per kernel that ran, one a line. */
static inline void parity_coverage_write(const char *prog) {
  const char *dir = getenv("LOOM_PARITY_COVERAGE_DIR");
  if (!dir || !*dir || strncmp(prog, "test_parity", 11) != 0) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.txt", dir, prog);
  FILE *f = fopen(path, "w");
  if (!f) {
    printf("%s: cannot write %s\n", prog, path);
    return;
  }
  for (int op = 0; op < LOOM_OP_COUNT; op++)
    for (int dt = 0; dt < LOOM_DTYPE_COUNT; dt++)
      if (pcov_hit[op][dt]) fprintf(f, "%s %d\n", loom__op_def(op)->name, dt);
  fclose(f);
}
#endif
