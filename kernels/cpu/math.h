/* CPU kernels of the math family. */
#ifndef LOOM_KERNELS_CPU_MATH_H
#define LOOM_KERNELS_CPU_MATH_H
#include "kernels/kernel.h"
loom_code loom__k_add_f32(const loom_kctx *ctx);
#endif
