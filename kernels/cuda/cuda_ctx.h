/* kernels/cuda/cuda_ctx.h - the CUDA backend context that kernels see as
 * loom_kctx.backend (internal; CUDA=1 builds only). Owned by
 * engine/backend_cuda.c: one stream, one cuBLAS handle (and cuDNN handle
 * when built with it) and one caching memory pool per session. */
#ifndef LOOM_CUDA_CTX_H
#define LOOM_CUDA_CTX_H
#include <stddef.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>

typedef struct loom_cuda_block loom_cuda_block;

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
