/* kernels/cuda/common.cuh - helpers shared by the CUDA kernel files. */
#ifndef LOOM_CUDA_COMMON_CUH
#define LOOM_CUDA_COMMON_CUH
#include <stdint.h>
#include <cuda_runtime.h>
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernel_list.h"

#define CUCTX(ctx) ((loom_cuda_ctx *)(ctx)->backend)
#define STREAM(ctx) (CUCTX(ctx)->stream)
#define NT 256

/* Kernel launch: LOOM_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...).
 * Under the host emulator (LOOM_CUEMU, tests/cuemu/) the same line runs the
 * grid on the CPU, so kernels never use the <<< >>> syntax directly. */
#ifdef LOOM_CUEMU
#define LOOM_LAUNCH(g, b, sh, st, ...) cuemu::launch(g, b, sh, st, __VA_ARGS__)
#else
#define LOOM_LAUNCH(g, b, sh, st, ...) __VA_ARGS__<<<g, b, sh, st>>>
#endif

/* Grid for a grid-stride loop over n items. */
static inline unsigned grid_for(int64_t n) {
  int64_t b = (n + NT - 1) / NT;
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8;
  return (unsigned)b;
}
#define GRID_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* Bail out with a status (no launch). */
static inline loom_code cu_err(const loom_kctx *ctx, loom_code c, const char *msg) {
  return loom_status_set(ctx->st, c, "%s", msg);
}

/* The device scratch (loom__cuda_scratch) could not be had. */
static inline loom_code no_scratch(const loom_kctx *ctx, size_t n) {
  return loom_status_set(ctx->st, LOOM_RESOURCE_EXHAUSTED, "cannot allocate %zu bytes of device scratch", n);
}

/* Element k of an int32 (i32 != 0) or int64 index tensor. */
__device__ __forceinline__ int64_t cu_load_index(const void *p, int i32, int64_t k) {
  return i32 ? (int64_t)((const int32_t *)p)[k] : ((const int64_t *)p)[k];
}

/* Index checks on the device: a kernel that reads indices takes the cu_errp
 * from cu_watch(ctx, LOOM_CU_ERR_<what>) as an argument and calls
 * cu_bad_index(ep, position, bound) for an index outside [0, bound)
 * (then skips or zero-fills that element). The run fails after its
 * synchronization with "<node>: indices[pos] = value is not in [0, bound)",
 * the CPU kernels' message. */
struct cu_errp {
  loom_cuda_err *e;
  unsigned long long tag;
  int kind;
  const void *indices;
};
/* I: the index tensor (one of the op's inputs), whose dims turn the flat
 * position into the CPU's "[i,j]"; NULL prints the flat position. */
static inline cu_errp cu_watch(const loom_kctx *ctx, int kind, const loom_buf *I) {
  loom_cuda_ctx *c = CUCTX(ctx);
  c->watched = 1;
  cu_errp ep = {c->derr, (unsigned long long)c->step + 1, kind, I ? I->data : NULL};
  return ep;
}
/* The first kernel to report owns the record (its tag); within it the
 * smallest bad position wins whatever order threads run in (npos = ~pos,
 * maximized), so the message names the first bad index as the CPU does. */
__device__ __forceinline__ void cu_bad_index(const cu_errp &ep, int64_t pos, int64_t bound) {
  unsigned long long old = atomicCAS(&ep.e->tag, 0ULL, ep.tag);
  if (old == 0ULL) {
    ep.e->kind = ep.kind;
    ep.e->bound = bound;
    ep.e->indices = (unsigned long long)(uintptr_t)ep.indices;
  }
  if (old == 0ULL || old == ep.tag) atomicMax(&ep.e->npos, ~(unsigned long long)pos); /* the host reads the value */
}

/* Shape of up to LOOM_MAX_DIMS dims with per-input element strides (0 = broadcast). */
struct bcast_geom {
  int nd;
  int64_t od[LOOM_MAX_DIMS];
  int64_t s[3][LOOM_MAX_DIMS];
};
/* Strides of input b (right-aligned to out) into g->s[k]. */
static inline void bcast_strides(bcast_geom *g, int k, const loom_buf *b) {
  int64_t st = 1;
  for (int i = g->nd - 1; i >= 0; i--) {
    int j = i - (g->nd - b->ndim);
    int64_t d = j >= 0 ? b->dims[j] : 1;
    g->s[k][i] = d == 1 ? 0 : st;
    st *= d;
  }
}
static inline void bcast_init(bcast_geom *g, const loom_buf *out) {
  g->nd = out->ndim;
  for (int i = 0; i < out->ndim; i++) g->od[i] = out->dims[i];
}
/* Merges adjacent output dims that every input walks the same way (all
 * contiguous across the pair, or all broadcast along both): fewer divisions
 * per element. Call after bcast_strides for the nin inputs. */
static inline void bcast_merge(bcast_geom *g, int nin) {
  int nd = 0;
  for (int d = 0; d < g->nd; d++) {
    if (g->od[d] == 1) continue; /* size-1 dims carry nothing */
    if (nd > 0) {
      int ok = 1;
      for (int k = 0; k < nin && ok; k++) {
        int64_t outer = g->s[k][nd - 1], inner = g->s[k][d];
        ok = (outer == 0 && inner == 0) || (inner != 0 && outer == inner * g->od[d]);
      }
      if (ok) {
        g->od[nd - 1] *= g->od[d];
        for (int k = 0; k < nin; k++) g->s[k][nd - 1] = g->s[k][d];
        continue;
      }
    }
    g->od[nd] = g->od[d];
    for (int k = 0; k < nin; k++) g->s[k][nd] = g->s[k][d];
    nd++;
  }
  g->nd = nd;
}
/* Input offsets of output element i, in index type I (uint32_t when the
 * output has fewer than 2^31 elements: 32-bit division is several times
 * cheaper on a GPU than 64-bit). */
template <typename I> __device__ __forceinline__ void bcast_off_t(const bcast_geom &g, I i, int nin, I *off) {
  for (int k = 0; k < nin; k++) off[k] = 0;
  for (int d = g.nd - 1; d >= 0; d--) {
    I dd = (I)g.od[d], q = i / dd, r = i - q * dd;
    for (int k = 0; k < nin; k++) off[k] += r * (I)g.s[k][d];
    i = q;
  }
}

#endif
