/* kernels/kernel.h - what a kernel sees: buffers, typed attributes, workspace,
 * the thread pool. Kernels are pure compute over these; they know nothing of
 * graphs and never allocate. Internal header (not installed). */
#ifndef LOOM_KERNEL_H
#define LOOM_KERNEL_H

#include <stdint.h>
#include <stddef.h>
#include "loom/loom_base.h"
#include "loom/loom_tensor.h"
#include "base/pool.h"
#include "base/strarena.h"

/* One element of a string tensor (buffers of dtype LOOM_STRING hold these). */
typedef struct loom_tstring { char *ptr; size_t len; } loom_tstring;

/* A run-time view of one tensor: data (host or device) + concrete shape. */
typedef struct loom_buf {
  void *data;
  loom_dtype dtype;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  int64_t numel;
} loom_buf;

/* Static type of a node output: dims may be -1 (unknown) at build time. */
typedef struct loom_tdesc {
  loom_dtype dtype;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
} loom_tdesc;

enum { LOOM_PAD_VALID = 0, LOOM_PAD_SAME = 1 };

/* Typed attributes. One struct for all ops; each op documents (in its
 * ops/<family>.c row) which fields it reads. Unused fields stay zero. */
typedef struct loom_attrs {
  loom_dtype dtype;      /* target/output dtype: Placeholder, Cast, Fill, OneHot, ArgMax, Shape, random ops */
  int64_t axis;          /* Concat, Split, Gather, Stack, Unstack, Softmax, ArgMax/Min, OneHot, TopK, L2Normalize */
  int64_t num;           /* Split/Unstack count, UnsortedSegment num_segments, OneHot depth, TopK k */
  int32_t keepdims;
  int32_t transpose_a, transpose_b;
  int32_t naxes;         /* Reduce axes (-1 = all), Transpose perm, Squeeze/ExpandDims axes */
  int64_t axes[LOOM_MAX_DIMS];
  int32_t nshape;        /* Reshape/Fill/random shape, Tile multiples, Slice begin, Pad before */
  int64_t shape[LOOM_MAX_DIMS];
  int64_t size[LOOM_MAX_DIMS]; /* Slice size (-1 = to the end), Pad after */
  int64_t strides[4], ksize[4], dilations[4]; /* NHWC conv/pool */
  int32_t padding;       /* LOOM_PAD_VALID / LOOM_PAD_SAME */
  double alpha, beta;    /* LeakyRelu alpha; Clip lo/hi; OneHot on/off; Pad value; Elu alpha; random lo/hi or mean/stddev;
                            the optimizer ops (ApplyAdam, SparseApplyAdam, ...): alpha = the gradient scale (0: 1;
                            kernels/cpu/optim.h) */
  double start, limit, delta; /* Range */
  double epsilon;        /* L2Normalize epsilon */
  uint64_t seed, seed2;  /* random ops */
  const loom_tensor *value; /* Const (owned by the node) */
  void *resource;        /* stateful ops (variables): owned elsewhere */
} loom_attrs;


/* Elementwise work a kernel does on its output 0 right after computing it, in
 * place of the steps the planner folded into it (engine/fuse.c): BiasAdd,
 * Relu and a 2x2 MaxPool after a Conv2D (LOOM_OPF_EPI_BIAS_RELU), ReluGrad after a
 * MaxPoolGrad (LOOM_OPF_EPI_MASK), whose results equal the separate steps'
 * bit for bit; and the per-image column sums a later BiasAddGrad adds up
 * (LOOM_OPF_EPI_COLSUM: that step's ctx->epi is this struct too); and a
 * Conv2DBackpropFilter reading a MaxPoolGrad's result (dw and wdw below); and, for a
 * Conv2DBackpropInput reading a routing MaxPoolGrad's result, where its dy comes from (routed). */
typedef struct loom_epilogue {
  const loom_buf *bias; /* y[..., c] = y[..., c] + bias[c] (BiasAdd), or NULL */
  int relu;             /* then y = y < 0 ? 0 : y (Relu) */
  loom_buf *pool;       /* Conv2D: then y's 2x2 stride-2 max pool written here ([N, OH/2, OW/2, O]), or NULL */
  const loom_buf *mask; /* y = mask > 0 ? y : 0 (ReluGrad whose features are mask; same shape), or NULL */
  double *colsum;       /* MaxPoolGrad: sum over (h, w) of image n's final y[n, h, w, c] at [n*C + c], or NULL */
  /* MaxPoolGrad: the context of a Conv2DBackpropFilter whose dy is the final y, or NULL: the filter
   * gradient is computed from each image of y as it is made (kernels/cpu/nn.h), y is not written */
  const struct loom_kctx *dw;
  /* Conv2D with pool: where each pooled value came from, a byte per pooled element: its window's
   * first maximum (0-3, the window row by row) or 4 where that maximum is not above 0 (or NaN); the
   * convolution's own output may then go unwritten. MaxPoolGrad (its ReluGrad over that pool's
   * input folded): routes dy by these instead of reading x. NULL otherwise. */
  uint8_t *argmax;
  /* MaxPoolGrad with argmax: the context of a Conv2DBackpropFilter whose dy is the final y, or NULL:
   * the filter gradient is computed from dy's pooled values and their winners (kernels/cpu/nn.h:
   * loom__conv_dw_winners), y still written for its other readers (unless unwritten) */
  const struct loom_kctx *wdw;
  /* MaxPoolGrad with argmax: every reader of y takes it from dy and the winners (wdw, route) or is a
   * BiasAddGrad given colsum, so y is not written (colsum taken from the pooled values) */
  int unwritten;
  /* Conv2DBackpropInput (its Winograd loops): its dy is the result of the MaxPoolGrad step `routed`
   * (argmax, unwritten or not), image n of which route makes from that step's dy and winners into
   * dst, row r at dst + r * rs elements (kernels/cpu/nn.h: loom__max_pool_route_image), in place of
   * reading dy; NULL otherwise */
  const struct loom_kctx *routed;
  void (*route)(const struct loom_kctx *routed, int64_t n, void *dst, int64_t rs);
} loom_epilogue;

/* Context for one kernel call. */
typedef struct loom_kctx {
  const loom_attrs *attrs;
  int32_t nin, nout;
  loom_buf *const *in;
  loom_buf *const *out;
  void *ws;               /* workspace requested by the op's workspace_fn */
  size_t ws_size;
  loom_pool *pool;        /* NULL means run serially */
  uint64_t *counter;      /* runs of this node in this session so far (random ops); any plan */
  void *backend;          /* device context (NULL on CPU) */
  loom_status *st;        /* where a kernel reports failures (may be NULL) */
  /* Where a kernel puts the bytes of the strings it outputs (out data is
   * loom_tstring[]): the session's arena in ordinary runs, the host pass's
   * in the host pass (reset every run); NULL outside a session. */
  loom_strarena *strings;
  const loom_epilogue *epi; /* NULL, or the folded steps' work (CPU kernels of flagged ops) */
} loom_kctx;

typedef loom_code (*loom_kernel_fn)(const loom_kctx *ctx);

/* The index of a sparse (IndexedSlices) gradient entry that belongs to no
 * row: the smallest value of the indices' dtype. SparseEmbeddingGrad gives
 * it to pruned ids (their rows of values are zero); the sparse optimizer
 * kernels skip it (any other index outside [0, rows) stays an error). */
#define LOOM_NO_ROW_I32 INT32_MIN
#define LOOM_NO_ROW_I64 INT64_MIN

/* Elementwise kernels go parallel above this many elements. */
#define LOOM_PAR_GRAIN 32768

#endif
