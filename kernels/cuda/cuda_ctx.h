/* kernels/cuda/cuda_ctx.h - the CUDA backend context that kernels see as
 * loom_kctx.backend (internal; CUDA=1 builds only). Owned by
 * engine/cuda/runtime.c: one stream, one cuBLAS handle (and cuDNN handle
 * when built with it) and one caching memory pool per session. */
#ifndef LOOM_CUDA_CTX_H
#define LOOM_CUDA_CTX_H
#include <stddef.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>

typedef struct loom_cuda_block loom_cuda_block;

/* Bad data found by a kernel (an index out of range), in device memory. The
 * first kernel to report wins (tag = its plan step + 1); the session reads it
 * after the run's synchronization and fails the run naming that node. */
typedef struct loom_cuda_err {
  unsigned long long tag;
  long long kind, bound;
  unsigned long long npos;    /* ~position of the first bad index (atomicMax: the smallest wins) */
  unsigned long long indices; /* device address of the index tensor (dtype and dims from the step) */
} loom_cuda_err;
enum { LOOM_CU_ERR_INDICES, LOOM_CU_ERR_SEGMENT_IDS, LOOM_CU_ERR_LABELS };

typedef struct loom_cuda_ctx {
  int device;
  cudaStream_t stream;
  cublasHandle_t blas;
  void *cudnn;              /* cudnnHandle_t when built with cuDNN, else NULL */
  /* caching pool: every block ever allocated, free ones reused by size class */
  loom_cuda_block *blocks;
  size_t in_use, cached;
  /* a small device scratch for kernels (e.g. cuDNN workspace), grown on demand */
  void *scratch;
  size_t scratch_size;
  /* bad-data report: device record, the plan step now running, and whether
   * a kernel of this run may have written the record */
  loom_cuda_err *derr;
  int step;
  int watched;
  /* pinned host copy of the record, queued before each synchronization of a
   * watched run, so reading it costs no copy or synchronization of its own
   * (NULL if pinned memory was refused: then a copy after the sync) */
  loom_cuda_err *hrec;
  int hrec_fresh;
  int watched_saved; /* `watched` before a stream capture (engine/cuda/runtime.c, whole-step graphs) */
} loom_cuda_ctx;

#ifdef __cplusplus
extern "C" {
#endif
/* Device scratch of at least n bytes from ctx (valid until the next call; stream-ordered). NULL on OOM. */
void *loom__cuda_scratch(loom_cuda_ctx *c, size_t n);
#ifdef __cplusplus
}
#endif

#endif
