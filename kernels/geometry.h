/* kernels/geometry.h - host-side shape helpers shared by the CPU kernels
 * (kernels/cpu/) and the CUDA kernels (kernels/cuda/), so both devices
 * derive the same sizes from the same attributes: TF's convolution output
 * size and padding, pooling and convolution geometry (NHWC), matmul dims.
 * Plain C, static inline (compiled as C and as C++/CUDA host code). */
#ifndef LOOM_KERNELS_GEOMETRY_H
#define LOOM_KERNELS_GEOMETRY_H
#include "base/base.h"
#include "kernels/kernel.h"

/* A stride/dilation/window attribute, 1 when unset (0 or negative). */
static inline int64_t loom__attr_or_1(int64_t v) { return v >= 1 ? v : 1; }

/* TF's output size of one spatial dimension and the padding before it.
 * in < 0 (unknown) gives -1; VALID with a window larger than the input gives
 * -2 (an error: the output would be empty or negative; so does an empty
 * window, k == 0); an effective window (k - 1) * dilation + 1 past INT64_MAX
 * gives -3 (an error). Needs stride >= 1 and dilation >= 1; no overflow for
 * any in and k. */
static inline int64_t loom__conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t dilation, int padding,
                                          int64_t *pad_before) {
  int64_t ek = -1; /* effective window; -1 while k is unknown */
  if (pad_before) *pad_before = 0;
  if (k >= 0 && (__builtin_mul_overflow(k - 1, dilation, &ek) || __builtin_add_overflow(ek, 1, &ek))) return -3;
  if (in < 0) return -1;
  if (padding == LOOM_PAD_SAME) {
    int64_t out = in / stride + (in % stride != 0); /* ceil(in / stride) */
    if (pad_before && k >= 1) {
      /* (out - 1) * stride + ek - in, ordered so nothing overflows:
       * 0 <= (out - 1) * stride < in when out >= 1 */
      int64_t total = (ek - in) + (out - 1) * stride;
      *pad_before = total > 0 ? total / 2 : 0;
    }
    return out;
  }
  if (k < 1) return k < 0 ? -1 : -2;
  if (in < ek) return -2;
  return (in - ek) / stride + 1;
}

/* Pooling geometry: xd the pooled input [N,H,W,C], yd the pooled output
 * [N,OH,OW,C]; window kh x kw, strides sh, sw, padding before pt, pl. */
typedef struct loom_pool_geom {
  int64_t N, H, W, C, OH, OW, kh, kw, sh, sw, pt, pl;
} loom_pool_geom;
static inline void loom__pool_geom_init(loom_pool_geom *g, const loom_attrs *a, const int64_t *xd, const int64_t *yd) {
  g->N = xd[0];
  g->H = xd[1];
  g->W = xd[2];
  g->C = xd[3];
  g->OH = yd[1];
  g->OW = yd[2];
  g->kh = loom__attr_or_1(a->ksize[1]);
  g->kw = loom__attr_or_1(a->ksize[2]);
  g->sh = loom__attr_or_1(a->strides[1]);
  g->sw = loom__attr_or_1(a->strides[2]);
  loom__conv_out_size(g->H, g->kh, g->sh, 1, a->padding, &g->pt);
  loom__conv_out_size(g->W, g->kw, g->sw, 1, a->padding, &g->pl);
}

/* Convolution geometry: xd input [N,H,W,C], fd filter [KH,KW,C,O], yd output
 * [N,OH,OW,O]; K = KH*KW*C (a column row), M = N*OH*OW (output rows). */
typedef struct loom_conv_geom {
  int64_t N, H, W, C, KH, KW, O, OH, OW, sh, sw, dh, dw, pt, pl, K, M;
  /* The CPU kernels' strategy (kernels/cpu/conv.c sets these after
   * loom__conv_geom_init; 0 from it, unused on CUDA). */
  int pointwise; /* 1x1, stride 1, no padding: the input is the column matrix */
  int direct;    /* direct loops for the forward pass */
  int direct_dw; /* direct loops for the filter gradient */
  int direct_dx; /* the input gradient as a direct forward convolution */
} loom_conv_geom;
static inline void loom__conv_geom_init(loom_conv_geom *g, const loom_attrs *a, const int64_t *xd, const int64_t *fd,
                                        const int64_t *yd) {
  g->N = xd[0];
  g->H = xd[1];
  g->W = xd[2];
  g->C = xd[3];
  g->KH = fd[0];
  g->KW = fd[1];
  g->O = fd[3];
  g->OH = yd[1];
  g->OW = yd[2];
  g->sh = loom__attr_or_1(a->strides[1]);
  g->sw = loom__attr_or_1(a->strides[2]);
  g->dh = loom__attr_or_1(a->dilations[1]);
  g->dw = loom__attr_or_1(a->dilations[2]);
  loom__conv_out_size(g->H, g->KH, g->sh, g->dh, a->padding, &g->pt);
  loom__conv_out_size(g->W, g->KW, g->sw, g->dw, a->padding, &g->pl);
  g->K = g->KH * g->KW * g->C;
  g->M = g->N * g->OH * g->OW;
  g->pointwise = g->direct = g->direct_dw = g->direct_dx = 0;
}

/* MatMul/BatchMatMul: M, N, K of the last two axes of inputs 0 and 1 under
 * attrs transpose_a/transpose_b. INVALID_ARGUMENT for a rank below 2 or
 * inner dims that differ; each device then checks its BLAS integer range. */
static inline loom_code loom__matmul_dims(const loom_kctx *ctx, int64_t *M, int64_t *N, int64_t *K) {
  const loom_buf *a = ctx->in[0], *b = ctx->in[1];
  int ta = ctx->attrs->transpose_a, tb = ctx->attrs->transpose_b;
  if (a->ndim < 2 || b->ndim < 2)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "inputs must have rank >= 2, got ranks %d and %d",
                           (int)a->ndim, (int)b->ndim);
  int64_t ar = a->dims[a->ndim - 2], ac = a->dims[a->ndim - 1];
  int64_t br = b->dims[b->ndim - 2], bc = b->dims[b->ndim - 1];
  *M = ta ? ac : ar;
  *K = ta ? ar : ac;
  *N = tb ? br : bc;
  int64_t K2 = tb ? bc : br;
  if (*K != K2)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "inner dimensions %lld and %lld differ", (long long)*K,
                           (long long)K2);
  return LOOM_OK;
}

/* ArgMax/ArgMin: input 0 viewed as [outer, R, inner] around attrs.axis
 * (negative counts from the end). INVALID_ARGUMENT naming the problem for an
 * axis out of range or an empty reduced axis; *outer = 0 when the output is
 * empty (nothing to compute). */
static inline loom_code loom__arg_geom(const loom_kctx *ctx, int is_min, int64_t *outer, int64_t *R,
                                       int64_t *inner) {
  const loom_buf *x = ctx->in[0];
  int64_t axis = ctx->attrs->axis;
  if (axis < 0) axis += x->ndim;
  if (axis < 0 || axis >= x->ndim)
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "axis %lld is out of range for an input of rank %d",
                           (long long)ctx->attrs->axis, (int)x->ndim);
  *outer = 0;
  *inner = 1;
  *R = x->dims[axis];
  if (ctx->out[0]->numel == 0) return LOOM_OK;
  int64_t o = 1;
  for (int i = 0; i < axis; i++) o *= x->dims[i];
  for (int i = (int)axis + 1; i < x->ndim; i++) *inner *= x->dims[i];
  if (*R == 0) {
    char b[160];
    return loom_status_set(ctx->st, LOOM_INVALID_ARGUMENT, "%s over an empty axis %lld of input shape %s",
                           is_min ? "ArgMin" : "ArgMax", (long long)axis, loom__dims_str(b, sizeof b, x->ndim, x->dims));
  }
  *outer = o;
  return LOOM_OK;
}

#endif
