/* kernels/cuda/kernel_list.h - how the CUDA kernel lists are written. Each
 * family header (kernels/cuda/<family>.h, one per kernels/cpu/<family>.c)
 * lists its kernels once as K(OpEnum, kname, dt): loom__cu_<kname>_<dt>
 * serves LOOM_OP_<OpEnum> for dtype LOOM_CU_DT_<dt> (any = slot 0,
 * dtype-agnostic), defined in kernels/cuda/<family>.cu and bound to its op
 * in ops/bind_cuda.c. Ops not listed run on the CPU with copies (see
 * engine/backend.h). kernels/cuda/cuda_kernels.h is the union. */
#ifndef LOOM_CUDA_KERNEL_LIST_H
#define LOOM_CUDA_KERNEL_LIST_H
#include "kernels/kernel.h"

#define LOOM_CU_DT_any 0
#define LOOM_CU_DT_f32 LOOM_F32
#define LOOM_CU_DT_f64 LOOM_F64
#define LOOM_CU_DT_i32 LOOM_I32
#define LOOM_CU_DT_i64 LOOM_I64
#define LOOM_CU_DT_u8 LOOM_U8
#define LOOM_CU_DT_bool LOOM_BOOL

#define LOOM_CU_FLT(K, Op, k) K(Op, k, f32) K(Op, k, f64)
#define LOOM_CU_NUM(K, Op, k) K(Op, k, f32) K(Op, k, f64) K(Op, k, i32) K(Op, k, i64)

/* Declares the kernels of a list (C linkage: the .cu files define them extern "C"). */
#define LOOM_CU_DECLARE(Op, k, dt) loom_code loom__cu_##k##_##dt(const loom_kctx *ctx);
#ifdef __cplusplus
#define LOOM_CU_DECLARE_LIST(LIST) extern "C" { LIST(LOOM_CU_DECLARE) }
#else
#define LOOM_CU_DECLARE_LIST(LIST) LIST(LOOM_CU_DECLARE)
#endif

#endif
