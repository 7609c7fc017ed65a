/* kernels/cuda/optim.cu - CUDA kernels of the optim family (kernels/cpu/optim.c):
 * dense optimizer updates (TF's training_ops formulas, as
 * kernels/cpu/optim.c; hyperparameters are read from their device scalars
 * inside the kernel, so nothing waits on the host), Assign/AssignAdd/Sub/Mul,
 * the Ref scatters, the sparse optimizers (rows grouped by
 * kernels/cuda/index_group.cuh: a repeated index's gradient rows are summed
 * in position order first, as the CPU) and LearningRateSchedule. Every
 * optimizer reads its gradient times the op's gradient scale
 * (loom__apply_grad_scale; a sparse one scales the summed rows), by
 * __fmul_rn so that nvcc never contracts it into an FMA.
 * Arithmetic differs from the CPU only where nvcc contracts a * b + c into
 * an FMA (the CPU build does not). */
#include <math.h>
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/optim.h"
#include "kernels/cpu/optim.h" /* loom__apply_grad_scale, LOOM_LRS_* */

/* ============================================================ optimizers */
enum { OPT_GD, OPT_MOMENTUM, OPT_ADAGRAD, OPT_ADAM, OPT_FTRL, OPT_RMSPROP, OPT_CRMSPROP, OPT_ADADELTA };
struct opt_ptrs {
  float *var, *s0, *s1, *s2;
  const float *g;
  const float *h[6]; /* device scalars, meaning per kind (see the kernels below) */
  int flag;
  float gs; /* the gradient scale (kernels/cpu/optim.h) */
};
__global__ void k_opt(opt_ptrs a, int kind, int64_t n) {
  float h0 = a.h[0] ? *a.h[0] : 0.f, h1 = a.h[1] ? *a.h[1] : 0.f, h2 = a.h[2] ? *a.h[2] : 0.f;
  float h3 = a.h[3] ? *a.h[3] : 0.f, h4 = a.h[4] ? *a.h[4] : 0.f, h5 = a.h[5] ? *a.h[5] : 0.f;
  GRID_LOOP(i, n) {
    float gi = __fmul_rn(a.g[i], a.gs); /* never contracted into an FMA: the bits of a pre-scaled gradient */
    switch (kind) {
    case OPT_GD: a.var[i] -= h0 * gi; break;
    case OPT_MOMENTUM: { /* h0 lr, h1 momentum */
      float acc = a.s0[i] * h1 + gi;
      a.s0[i] = acc;
      a.var[i] -= a.flag ? gi * h0 + acc * h1 * h0 : h0 * acc;
      break;
    }
    case OPT_ADAGRAD: {
      float acc = a.s0[i] + gi * gi;
      a.s0[i] = acc;
      a.var[i] -= h0 * gi / sqrtf(acc);
      break;
    }
    case OPT_ADAM: { /* h0 b1p, h1 b2p, h2 lr, h3 b1, h4 b2, h5 eps */
      float alpha = h2 * sqrtf(1.0f - h1) / (1.0f - h0), b1 = h3, ob1 = 1.0f - h3, ob2 = 1.0f - h4;
      float mi = a.s0[i] + (gi - a.s0[i]) * ob1;
      float vi = a.s1[i] + (gi * gi - a.s1[i]) * ob2;
      a.s0[i] = mi;
      a.s1[i] = vi;
      a.var[i] -= a.flag ? ((gi * ob1 + b1 * mi) * alpha) / (sqrtf(vi) + h5) : (mi * alpha) / (sqrtf(vi) + h5);
      break;
    }
    case OPT_FTRL: { /* h0 lr, h1 l1, h2 l2, h3 shrinkage, h4 lr_power */
      float l1 = h1, l2x2 = 2.0f * h2, shr2 = 2.0f * h3, p = h4, lr = h0;
      float vi = a.var[i], ai = a.s0[i];
      float gs = gi + shr2 * vi;
      float na = ai + gi * gi;
      float pna = p == -0.5f ? sqrtf(na) : powf(na, -p);
      float pa = p == -0.5f ? sqrtf(ai) : powf(ai, -p);
      float li = a.s1[i] + gs - (pna - pa) / lr * vi;
      a.s1[i] = li;
      float y = pna / lr + l2x2;
      float x = (li > 0.0f ? l1 : (li < 0.0f ? -l1 : 0.0f)) - li;
      a.var[i] = fabsf(li) > l1 ? x / y : 0.0f;
      a.s0[i] = na;
      break;
    }
    case OPT_RMSPROP: { /* h0 lr, h1 rho, h2 momentum, h3 eps; flag: epsilon outside the square root */
      float s = a.s0[i] + (gi * gi - a.s0[i]) * (1.0f - h1);
      a.s0[i] = s;
      float mo = a.s1[i] * h2 + (gi * h0) / (a.flag ? sqrtf(s) + h3 : sqrtf(s + h3));
      a.s1[i] = mo;
      a.var[i] -= mo;
      break;
    }
    case OPT_CRMSPROP: {
      float orho = 1.0f - h1;
      float mg = a.s0[i] + (gi - a.s0[i]) * orho;
      float s = a.s1[i] + (gi * gi - a.s1[i]) * orho;
      a.s0[i] = mg;
      a.s1[i] = s;
      float mo = a.s2[i] * h2 + (gi * h0) / (a.flag ? sqrtf(s - mg * mg) + h3 : sqrtf((s - mg * mg) + h3));
      a.s2[i] = mo;
      a.var[i] -= mo;
      break;
    }
    case OPT_ADADELTA: { /* h0 lr, h1 rho, h2 eps */
      float acc = a.s0[i] * h1 + gi * gi * (1.0f - h1);
      a.s0[i] = acc;
      float upd = sqrtf(a.s1[i] + h2) / sqrtf(acc + h2) * gi;
      a.var[i] -= upd * h0;
      a.s1[i] = a.s1[i] * h1 + upd * upd * (1.0f - h1);
      break;
    }
    default: break;
    }
  }
}
static float *fp(const loom_kctx *ctx, int i) { return (float *)ctx->in[i]->data; }
static loom_code run_opt(const loom_kctx *ctx, int kind, opt_ptrs *a, int gi, int nstate, const int *hs, int nh) {
  a->var = fp(ctx, 0);
  a->s0 = nstate > 0 ? fp(ctx, 1) : NULL;
  a->s1 = nstate > 1 ? fp(ctx, 2) : NULL;
  a->s2 = nstate > 2 ? fp(ctx, 3) : NULL;
  a->g = fp(ctx, gi);
  a->gs = loom__apply_grad_scale(ctx->attrs);
  for (int k = 0; k < 6; k++) a->h[k] = k < nh ? fp(ctx, hs[k]) : NULL;
  int64_t n = ctx->in[0]->numel;
  if (n > 0) LOOM_LAUNCH(grid_for(n), NT, 0, STREAM(ctx), k_opt)(*a, kind, n);
  return LOOM_OK;
}
extern "C" loom_code loom__cu_apply_gradient_descent_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {1}; /* var, alpha, delta */
  return run_opt(ctx, OPT_GD, &a, 2, 0, h, 1);
}
extern "C" loom_code loom__cu_apply_momentum_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  a.flag = (int)(ctx->attrs->num & 1);
  static const int h[] = {2, 4}; /* var, accum, lr, grad, momentum */
  return run_opt(ctx, OPT_MOMENTUM, &a, 3, 1, h, 2);
}
extern "C" loom_code loom__cu_apply_adagrad_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {2}; /* var, accum, lr, grad */
  return run_opt(ctx, OPT_ADAGRAD, &a, 3, 1, h, 1);
}
extern "C" loom_code loom__cu_apply_adam_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  a.flag = (int)(ctx->attrs->num & 1);
  static const int h[] = {3, 4, 5, 6, 7, 8}; /* var, m, v, b1p, b2p, lr, b1, b2, eps, grad */
  return run_opt(ctx, OPT_ADAM, &a, 9, 2, h, 6);
}
extern "C" loom_code loom__cu_apply_ftrl_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {4, 5, 6, 7, 8}; /* var, accum, linear, grad, lr, l1, l2, shrinkage, lr_power */
  return run_opt(ctx, OPT_FTRL, &a, 3, 2, h, 5);
}
extern "C" loom_code loom__cu_apply_rmsprop_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  a.flag = (int)(ctx->attrs->num & 1);
  static const int h[] = {3, 4, 5, 6}; /* var, ms, mom, lr, rho, momentum, eps, grad */
  return run_opt(ctx, OPT_RMSPROP, &a, 7, 2, h, 4);
}
extern "C" loom_code loom__cu_apply_centered_rmsprop_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  a.flag = (int)(ctx->attrs->num & 1);
  static const int h[] = {4, 5, 6, 7}; /* var, mg, ms, mom, lr, rho, momentum, eps, grad */
  return run_opt(ctx, OPT_CRMSPROP, &a, 8, 3, h, 4);
}
extern "C" loom_code loom__cu_apply_adadelta_f32(const loom_kctx *ctx) {
  opt_ptrs a = {};
  static const int h[] = {3, 4, 5}; /* var, accum, accum_update, lr, rho, eps, grad */
  return run_opt(ctx, OPT_ADADELTA, &a, 6, 2, h, 3);
}


/* ============================================================ assignment */
template <typename T, typename U> __global__ void k_assign_ew(T *x, const T *y, int64_t n, int op) {
  GRID_LOOP(i, n) {
    if (op == 0) x[i] = (T)((U)x[i] + (U)y[i]);
    else if (op == 1) x[i] = (T)((U)x[i] - (U)y[i]);
    else x[i] = (T)((U)x[i] * (U)y[i]);
  }
}
static loom_code assign_ew(const loom_kctx *ctx, int op) {
  const loom_buf *ref = ctx->in[0], *val = ctx->in[1];
  int64_t n = ref->numel;
  if (n == 0) return LOOM_OK;
  cudaStream_t s = STREAM(ctx);
  switch (ref->dtype) {
  case LOOM_F32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<float, float>)((float *)ref->data, (const float *)val->data, n, op); break;
  case LOOM_F64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<double, double>)((double *)ref->data, (const double *)val->data, n, op); break;
  case LOOM_I32: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<int32_t, uint32_t>)((int32_t *)ref->data, (const int32_t *)val->data, n, op); break;
  case LOOM_I64: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<int64_t, uint64_t>)((int64_t *)ref->data, (const int64_t *)val->data, n, op); break;
  case LOOM_U8: LOOM_LAUNCH(grid_for(n), NT, 0, s, k_assign_ew<uint8_t, uint8_t>)((uint8_t *)ref->data, (const uint8_t *)val->data, n, op); break;
  default: return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no CUDA kernel for %s", loom_dtype_name(ref->dtype));
  }
  return LOOM_OK;
}
extern "C" loom_code loom__cu_assign_any(const loom_kctx *ctx) {
  const loom_buf *ref = ctx->in[0], *val = ctx->in[1];
  size_t nbytes = (size_t)ref->numel * loom_dtype_size(ref->dtype);
  if (!nbytes || ref->data == val->data) return LOOM_OK;
  cudaMemcpyAsync(ref->data, val->data, nbytes, cudaMemcpyDeviceToDevice, STREAM(ctx));
  return LOOM_OK;
}
extern "C" loom_code loom__cu_assign_add_any(const loom_kctx *ctx) { return assign_ew(ctx, 0); }
extern "C" loom_code loom__cu_assign_sub_any(const loom_kctx *ctx) { return assign_ew(ctx, 1); }
extern "C" loom_code loom__cu_assign_mul_any(const loom_kctx *ctx) { return assign_ew(ctx, 2); }


/* ====================================== Ref scatters, sparse optimizers, schedules */
#include "kernels/cuda/index_group.cuh"
namespace {
/* Ref scatters: the variable (input 0) in place; f32, f64, i32, i64. */
loom_code run_ref_scatter(const loom_kctx *ctx, int op) {
  const loom_buf *R = ctx->in[0], *I = ctx->in[1], *Up = ctx->in[2];
  loom_code rc = check_int_indices(ctx, I, "indices");
  if (rc) return rc;
  int64_t nrows = R->ndim ? R->dims[0] : 0, row = nrows > 0 ? R->numel / nrows : 0, n = I->numel;
  if (Up->numel != n * row)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "updates have %lld elements, expected %lld rows of %lld",
                           (long long)Up->numel, (long long)n, (long long)row);
  switch (R->dtype) {
  case LOOM_F32: return scatter_rows<float, float>(ctx, (float *)R->data, I, (const float *)Up->data, nrows, row, op);
  case LOOM_F64: return scatter_rows<double, double>(ctx, (double *)R->data, I, (const double *)Up->data, nrows, row, op);
  case LOOM_I32:
    return scatter_rows<int32_t, uint32_t>(ctx, (int32_t *)R->data, I, (const int32_t *)Up->data, nrows, row, op);
  case LOOM_I64:
    return scatter_rows<int64_t, uint64_t>(ctx, (int64_t *)R->data, I, (const int64_t *)Up->data, nrows, row, op);
  default: return loom_status_set(ctx->st, LOOM_UNIMPLEMENTED, "no kernel for %s", loom_dtype_name(R->dtype));
  }
}

/* ===================================================== sparse optimizers */
enum { SP_MOMENTUM, SP_ADAGRAD, SP_ADAM, SP_FTRL, SP_RMSPROP, SP_CRMSPROP, SP_ADADELTA, SP_GD };
struct sopt {
  float *var, *s0, *s1, *s2;
  const float *g;
  const float *hp[7]; /* lr, a, b, c, d (meaning per kind, as kernels/cpu/optim.c's hyper), beta1_power, beta2_power */
  int kind, flag;
  float gs; /* the gradient scale, applied to a group's summed rows */
  int64_t row, nrows;
};
struct hyp {
  float lr, a, b, c, d;
};
__device__ __forceinline__ hyp load_hyp(const sopt &A) {
  float v[7];
  for (int i = 0; i < 7; i++) v[i] = A.hp[i] ? *A.hp[i] : 0.0f;
  hyp h;
  h.lr = A.kind == SP_ADAM ? v[0] * sqrtf(1.0f - v[6]) / (1.0f - v[5]) : v[0];
  h.a = v[1];
  h.b = v[2];
  h.c = v[3];
  h.d = v[4];
  return h;
}
/* One element e of the variable with (summed) gradient g: the CPU spans. */
__device__ __forceinline__ void sopt_apply(const sopt &A, const hyp &h, int64_t e, float g) {
  float *var = A.var + e;
  switch (A.kind) {
  case SP_MOMENTUM: { /* a = momentum */
    float acc = A.s0[e] * h.a + g;
    A.s0[e] = acc;
    if (A.flag) *var -= g * h.lr + acc * h.a * h.lr;
    else *var -= h.lr * acc;
    break;
  }
  case SP_ADAGRAD: {
    float acc = A.s0[e] + g * g;
    A.s0[e] = acc;
    *var -= h.lr * g / sqrtf(acc);
    break;
  }
  case SP_ADAM: { /* lr = alpha, a = beta1, b = beta2, c = epsilon */
    float ob1 = 1.0f - h.a, ob2 = 1.0f - h.b, m = A.s0[e], v = A.s1[e];
    float mi = m + (g - m) * ob1;
    float vi = v + (g * g - v) * ob2;
    A.s0[e] = mi;
    A.s1[e] = vi;
    *var -= (mi * h.lr) / (sqrtf(vi) + h.c);
    break;
  }
  case SP_FTRL: { /* a = l1, b = l2, c = l2_shrinkage, d = lr_power */
    float l1 = h.a, l2x2 = 2.0f * h.b, shr2 = 2.0f * h.c, p = h.d, lr = h.lr;
    float vi = *var, ai = A.s0[e];
    float gs = g + shr2 * vi;
    float na = ai + g * g;
    float li, y;
    if (p == -0.5f) {
      float sna = sqrtf(na);
      li = A.s1[e] + gs - (sna - sqrtf(ai)) / lr * vi;
      y = sna / lr + l2x2;
    } else {
      float pna = powf(na, -p);
      li = A.s1[e] + gs - (pna - powf(ai, -p)) / lr * vi;
      y = pna / lr + l2x2;
    }
    A.s1[e] = li;
    float x = (li > 0.0f ? l1 : (li < 0.0f ? -l1 : 0.0f)) - li;
    *var = fabsf(li) > l1 ? x / y : 0.0f;
    A.s0[e] = na;
    break;
  }
  case SP_RMSPROP: { /* a = rho, b = momentum, c = epsilon; flag: epsilon outside the square root */
    float ms = A.s0[e];
    float s = ms + (g * g - ms) * (1.0f - h.a);
    A.s0[e] = s;
    float mo = A.s1[e] * h.b + (g * h.lr) / (A.flag ? sqrtf(s) + h.c : sqrtf(s + h.c));
    A.s1[e] = mo;
    *var -= mo;
    break;
  }
  case SP_CRMSPROP: {
    float orho = 1.0f - h.a, mg = A.s0[e], ms = A.s1[e];
    float mgi = mg + (g - mg) * orho;
    float s = ms + (g * g - ms) * orho;
    A.s0[e] = mgi;
    A.s1[e] = s;
    float mo = A.s2[e] * h.b + (g * h.lr) / (A.flag ? sqrtf(s - mgi * mgi) + h.c : sqrtf((s - mgi * mgi) + h.c));
    A.s2[e] = mo;
    *var -= mo;
    break;
  }
  case SP_ADADELTA: { /* a = rho, b = epsilon */
    float rho = h.a, orho = 1.0f - h.a, eps = h.b;
    float acc = A.s0[e] * rho + g * g * orho;
    A.s0[e] = acc;
    float upd = sqrtf(A.s1[e] + eps) / sqrtf(acc + eps) * g;
    *var -= upd * h.lr;
    A.s1[e] = A.s1[e] * rho + upd * upd * orho;
    break;
  }
  case SP_GD: *var -= h.lr * g; break;
  default: break;
  }
}
/* Gradient of group r (starting at slot t), column j: rows summed in position order (in pieces), times the
 * gradient scale. */
__device__ __forceinline__ float group_grad(const sopt &A, const grp &G, int64_t t, int64_t r, int64_t j) {
  return __fmul_rn(grp_sum<float>(G, (const float *)G.pieces, t, grp_end(G, r), A.row, j), A.gs);
}
/* The given rows only (every optimizer but non-lazy Adam). */
__global__ void k_sopt_rows(sopt A, grp G) {
  if (grp_failed(G)) return;
  hyp h = load_hyp(A);
  Y_LOOP(t, G.n) {
    int64_t r;
    if (!grp_leader(G, t, &r)) continue;
    X_LOOP(j, A.row) sopt_apply(A, h, r * A.row + j, group_grad(A, G, t, r, j));
  }
}
/* Non-lazy Adam: every row; rows without an index decay with a zero gradient. RMSProp with the flag (Keras'
 * legacy form): rows without an index decay their mean square (and mean gradient) by rho. */
__global__ void k_sopt_adam_all(sopt A, grp G) {
  if (grp_failed(G)) return;
  hyp h = load_hyp(A);
  const float ob1 = 1.0f - h.a, ob2 = 1.0f - h.b;
  Y_LOOP(r, A.nrows) {
    int64_t t = G.n > 0 ? grp_find(G, r) : -1;
    X_LOOP(j, A.row) {
      int64_t e = r * A.row + j;
      if (t >= 0) {
        sopt_apply(A, h, e, group_grad(A, G, t, r, j));
      } else if (A.kind == SP_RMSPROP) {
        A.s0[e] *= h.a;
      } else if (A.kind == SP_CRMSPROP) {
        A.s0[e] *= h.a;
        A.s1[e] *= h.a;
      } else {
        float mi = A.s0[e] - A.s0[e] * ob1;
        float vi = A.s1[e] - A.s1[e] * ob2;
        A.s0[e] = mi;
        A.s1[e] = vi;
        A.var[e] -= (mi * h.lr) / (sqrtf(vi) + h.c);
      }
    }
  }
}
/* gi, ii: gradient and indices inputs; st: slot inputs count; h: scalar inputs (lr, a, b, c, d, b1p, b2p; -1 none). */
loom_code run_sparse_opt(const loom_kctx *ctx, int kind, int gi, int ii, int nstate, const int h[7], int all_rows) {
  const loom_buf *V = ctx->in[0], *G = ctx->in[gi], *I = ctx->in[ii];
  loom_code rc = check_int_indices(ctx, I, "indices");
  if (rc) return rc;
  int64_t nrows = V->ndim ? V->dims[0] : 0, row = nrows > 0 ? V->numel / nrows : 0, n = I->numel;
  if (G->numel != n * row)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "gradient has %lld elements, expected %lld rows of %lld",
                           (long long)G->numel, (long long)n, (long long)row);
  sopt A;
  memset(&A, 0, sizeof A);
  A.var = (float *)V->data;
  A.s0 = nstate > 0 ? (float *)ctx->in[1]->data : NULL;
  A.s1 = nstate > 1 ? (float *)ctx->in[2]->data : NULL;
  A.s2 = nstate > 2 ? (float *)ctx->in[3]->data : NULL;
  A.g = (const float *)G->data;
  for (int k = 0; k < 7; k++) A.hp[k] = h[k] >= 0 ? (const float *)ctx->in[h[k]]->data : NULL;
  A.kind = kind;
  A.flag = (int)(ctx->attrs->num & 1);
  A.gs = loom__apply_grad_scale(ctx->attrs);
  A.row = row;
  A.nrows = nrows;
  grp Gr;
  memset(&Gr, 0, sizeof Gr);
  if (n > 0) {
    rc = group_sort(ctx, I, nrows, LOOM_CU_ERR_INDICES, &Gr, (size_t)(n * row) * sizeof(float), 1);
    if (rc) return rc;
    if (row > 0) launch_pieces<float>(ctx, A.g, Gr, row, 0);
  }
  if (row == 0) return LOOM_OK;
  cudaStream_t s = STREAM(ctx);
  if (all_rows) {
    if (nrows == 0) return LOOM_OK;
    launch2 l = grid2(nrows, row);
    LOOM_LAUNCH(l.g, l.b, 0, s, k_sopt_adam_all)(A, Gr);
  } else if (n > 0) {
    launch2 l = grid2(n, row);
    LOOM_LAUNCH(l.g, l.b, 0, s, k_sopt_rows)(A, Gr);
  }
  return LOOM_OK;
}

/* ================================================== LearningRateSchedule */
struct lrs {
  int kind, flag; /* flag: staircase / cycle */
  double lr, ds, beta, power;
};
__device__ __forceinline__ double rd_scalar(const void *p, int dt) {
  switch (dt) {
  case LOOM_I32: return (double)*(const int32_t *)p;
  case LOOM_I64: return (double)*(const int64_t *)p;
  case LOOM_F32: return (double)*(const float *)p;
  case LOOM_F64: return *(const double *)p;
  default: return 0.0;
  }
}
__global__ void k_lr_schedule(const void *step_p, int sdt, const double *bnd, const float *vals, int64_t nb, lrs a,
                              float *out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double step = rd_scalar(step_p, sdt), lr = a.lr, ds = a.ds, r = 0.0;
  switch (a.kind) {
  case LOOM_LRS_EXPONENTIAL: {
    double p = step / ds;
    if (a.flag) p = floor(p);
    r = lr * pow(a.beta, p);
    break;
  }
  case LOOM_LRS_PIECEWISE: {
    int64_t i = 0;
    while (i < nb && !(step <= bnd[i])) i++;
    r = vals[i];
    break;
  }
  case LOOM_LRS_POLYNOMIAL: {
    double s = step;
    if (a.flag) {
      double mult = s == 0.0 ? 1.0 : ceil(s / ds);
      ds *= mult;
    } else if (s > ds) {
      s = ds;
    }
    double p = s / ds;
    r = (lr - a.beta) * pow(1.0 - p, a.power) + a.beta;
    break;
  }
  case LOOM_LRS_COSINE: {
    double s = step < ds ? step : ds;
    double c = 0.5 * (1.0 + cos(3.14159265358979323846 * s / ds));
    r = lr * ((1.0 - a.beta) * c + a.beta);
    break;
  }
  default: break;
  }
  *out = (float)r;
}

} // namespace

extern "C" loom_code loom__cu_ref_scatter_update_any(const loom_kctx *ctx) { return run_ref_scatter(ctx, 0); }
extern "C" loom_code loom__cu_ref_scatter_add_any(const loom_kctx *ctx) { return run_ref_scatter(ctx, 1); }
extern "C" loom_code loom__cu_ref_scatter_sub_any(const loom_kctx *ctx) { return run_ref_scatter(ctx, 2); }

/* Sparse optimizers: input orders as TF's (see kernels/cpu/optim.c). */
extern "C" loom_code loom__cu_sparse_apply_gradient_descent_f32(const loom_kctx *ctx) {
  static const int h[7] = {1, -1, -1, -1, -1, -1, -1}; /* var, alpha, grad, indices */
  return run_sparse_opt(ctx, SP_GD, 2, 3, 0, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_momentum_f32(const loom_kctx *ctx) {
  static const int h[7] = {2, 5, -1, -1, -1, -1, -1}; /* var, accum, lr, grad, indices, momentum */
  return run_sparse_opt(ctx, SP_MOMENTUM, 3, 4, 1, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_adagrad_f32(const loom_kctx *ctx) {
  static const int h[7] = {2, -1, -1, -1, -1, -1, -1}; /* var, accum, lr, grad, indices */
  return run_sparse_opt(ctx, SP_ADAGRAD, 3, 4, 1, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_adam_f32(const loom_kctx *ctx) {
  /* var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices; num bit 1 = lazy */
  static const int h[7] = {5, 6, 7, 8, -1, 3, 4};
  int lazy = (int)((ctx->attrs->num >> 1) & 1);
  return run_sparse_opt(ctx, SP_ADAM, 9, 10, 2, h, !lazy);
}
extern "C" loom_code loom__cu_sparse_apply_ftrl_f32(const loom_kctx *ctx) {
  static const int h[7] = {5, 6, 7, 8, 9, -1, -1}; /* var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power */
  return run_sparse_opt(ctx, SP_FTRL, 3, 4, 2, h, 0);
}
extern "C" loom_code loom__cu_sparse_apply_rmsprop_f32(const loom_kctx *ctx) {
  static const int h[7] = {3, 4, 5, 6, -1, -1, -1}; /* var, ms, mom, lr, rho, momentum, epsilon, grad, indices */
  return run_sparse_opt(ctx, SP_RMSPROP, 7, 8, 2, h, (int)(ctx->attrs->num & 1));
}
extern "C" loom_code loom__cu_sparse_apply_centered_rmsprop_f32(const loom_kctx *ctx) {
  static const int h[7] = {4, 5, 6, 7, -1, -1, -1}; /* var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices */
  return run_sparse_opt(ctx, SP_CRMSPROP, 8, 9, 3, h, (int)(ctx->attrs->num & 1));
}
extern "C" loom_code loom__cu_sparse_apply_adadelta_f32(const loom_kctx *ctx) {
  static const int h[7] = {3, 4, 5, -1, -1, -1, -1}; /* var, accum, accum_update, lr, rho, epsilon, grad, indices */
  return run_sparse_opt(ctx, SP_ADADELTA, 6, 7, 2, h, 0);
}

/* LearningRateSchedule: attrs as kernels/cpu/optim.c (num = kind, alpha = lr,
 * start = decay_steps, beta, limit = power, keepdims = staircase/cycle). */
extern "C" loom_code loom__cu_lr_schedule_f32(const loom_kctx *ctx) {
  const loom_attrs *at = ctx->attrs;
  int kind = (int)at->num;
  if (kind != LOOM_LRS_EXPONENTIAL && kind != LOOM_LRS_PIECEWISE && kind != LOOM_LRS_POLYNOMIAL &&
      kind != LOOM_LRS_COSINE)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "unknown schedule kind %lld", (long long)at->num);
  lrs a;
  a.kind = kind;
  a.flag = at->keepdims != 0;
  a.lr = at->alpha;
  a.ds = at->start;
  a.beta = at->beta;
  a.power = at->limit;
  const double *bnd = NULL;
  const float *vals = NULL;
  int64_t nb = 0;
  if (kind == LOOM_LRS_PIECEWISE) {
    if (ctx->nin != 3)
      return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "piecewise_constant needs n boundaries and n + 1 values");
    bnd = (const double *)ctx->in[1]->data;
    vals = (const float *)ctx->in[2]->data;
    nb = ctx->in[1]->numel;
  }
  LOOM_LAUNCH(1, 32, 0, STREAM(ctx), k_lr_schedule)(ctx->in[0]->data, (int)ctx->in[0]->dtype, bnd, vals, nb, a,
                                                    (float *)ctx->out[0]->data);
  return LOOM_OK;
}
