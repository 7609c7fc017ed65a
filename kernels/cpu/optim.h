/* CPU kernels of the train family: in-place variable updates (Assign*,
 * Scatter*), optimizer updates (TF's training_ops), learning-rate schedules. */
#ifndef LOOM_CPU_OPTIM_H
#define LOOM_CPU_OPTIM_H
#include "kernels/kernel.h"

/* The gradient scale of an optimizer op (Apply*, SparseApply*): its attribute alpha, 0 (the default)
 * meaning 1. The CPU and CUDA kernels update with grad * scale (each element's product rounded to float32
 * as it is read; a sparse kernel scales a repeated index's summed rows), which is what the all-reduce
 * strategy uses to fold its 1/N average into the optimizer's read of the summed gradients. */
static inline float loom__apply_grad_scale(const loom_attrs *a) {
  return a && a->alpha != 0.0 ? (float)a->alpha : 1.0f;
}

/* Workspace of the sparse optimizer kernels: n index entries of rows of
 * `row` elements into a variable of nrows rows; bitmap != 0 adds a bitmap of
 * touched rows (non-lazy sparse Adam). */
size_t loom__sparse_apply_ws(int64_t n, int64_t row, int64_t nrows, int bitmap);

/* Assign family: any dtype (Assign), numeric (AssignAdd/Sub/Mul). */
loom_code loom__k_assign(const loom_kctx *ctx);
loom_code loom__k_assign_add(const loom_kctx *ctx);
loom_code loom__k_assign_sub(const loom_kctx *ctx);
loom_code loom__k_assign_mul(const loom_kctx *ctx);
/* Ref scatter ops (f32, f64, i32, i64; indices int32/int64). */
loom_code loom__k_scatter_update(const loom_kctx *ctx);
loom_code loom__k_scatter_add(const loom_kctx *ctx);
loom_code loom__k_scatter_sub(const loom_kctx *ctx);

/* Optimizers (float32). Input orders are TF's (see ops/train.c). */
loom_code loom__k_apply_gradient_descent_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_gradient_descent_f32(const loom_kctx *ctx);
loom_code loom__k_apply_momentum_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_momentum_f32(const loom_kctx *ctx);
loom_code loom__k_apply_adagrad_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_adagrad_f32(const loom_kctx *ctx);
loom_code loom__k_apply_adam_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_adam_f32(const loom_kctx *ctx);
loom_code loom__k_apply_ftrl_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_ftrl_f32(const loom_kctx *ctx);
loom_code loom__k_apply_rmsprop_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_rmsprop_f32(const loom_kctx *ctx);
loom_code loom__k_apply_centered_rmsprop_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_centered_rmsprop_f32(const loom_kctx *ctx);
loom_code loom__k_apply_adadelta_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_adadelta_f32(const loom_kctx *ctx);
loom_code loom__k_apply_proximal_gradient_descent_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_proximal_gradient_descent_f32(const loom_kctx *ctx);
loom_code loom__k_apply_proximal_adagrad_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_proximal_adagrad_f32(const loom_kctx *ctx);
loom_code loom__k_apply_adagrad_da_f32(const loom_kctx *ctx);
loom_code loom__k_sparse_apply_adagrad_da_f32(const loom_kctx *ctx);

/* Learning-rate schedules (output float32 scalar). attrs.num = kind. */
enum { LOOM_LRS_EXPONENTIAL = 0, LOOM_LRS_PIECEWISE = 1, LOOM_LRS_POLYNOMIAL = 2, LOOM_LRS_COSINE = 3 };
loom_code loom__k_lr_schedule(const loom_kctx *ctx);

#endif
