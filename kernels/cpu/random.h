/* CPU kernels of the random family. Every value is a pure function of
 * (attrs.seed, attrs.seed2, *ctx->counter, position in the tensor) through
 * Philox4x32-10 (base/philox.h): identical for any thread count. */
#ifndef LOOM_KERNELS_CPU_RANDOM_H
#define LOOM_KERNELS_CPU_RANDOM_H
#include "kernels/kernel.h"
loom_code loom__k_random_uniform_f32(const loom_kctx *ctx);
loom_code loom__k_random_uniform_f64(const loom_kctx *ctx);
loom_code loom__k_random_normal_f32(const loom_kctx *ctx);
loom_code loom__k_random_normal_f64(const loom_kctx *ctx);
loom_code loom__k_truncated_normal_f32(const loom_kctx *ctx);
loom_code loom__k_truncated_normal_f64(const loom_kctx *ctx);
loom_code loom__k_dropout_f32(const loom_kctx *ctx);
loom_code loom__k_dropout_f64(const loom_kctx *ctx);
#endif
