/* engine/cuda/runtime.c - the CUDA device runtime: the backend table
 * (devices, contexts with their stream and cuBLAS handle, copies, events)
 * for CUDA=1 and CUDA=emu builds. The kernels (kernels/cuda/) are bound to
 * their ops in ops/bind_cuda.c.
 *
 * Memory: a caching pool over cudaMalloc (never managed memory). Requests
 * are rounded up to a size class (512 B granules below 1 MiB, then 1 MiB
 * granules below 64 MiB, then 2 MiB); a free block of the same class is
 * reused, else cudaMalloc; on cudaErrorMemoryAllocation the cached free
 * blocks are released and the allocation retried once. All work of a
 * session goes on its one stream, so reuse needs no events. Errors come back
 * as statuses (RESOURCE_EXHAUSTED for OOM, INTERNAL for launch/runtime
 * failures) naming the op; nothing aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#ifdef LOOM_HAVE_CUDNN
#include <cudnn.h>
#endif
#include "engine/backend.h"
#ifndef LOOM_CUEMU
#include "engine/cuda/cublas_lazy.h"
#endif
#include "kernels/cuda/cuda_ctx.h"
#include "engine/cuda/nccl_lazy.h"

struct loom_cuda_block {
  void *ptr;
  size_t size;
  int used;
  loom_cuda_block *next;
};

static size_t size_class(size_t n) {
  if (n == 0) n = 1;
  if (n < ((size_t)1 << 20)) return (n + 511) & ~(size_t)511;
  if (n < ((size_t)64 << 20)) return (n + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
  return (n + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
}

static loom_code cuda_fail(loom_status *st, cudaError_t e, const char *what) {
  loom_code c = e == cudaErrorMemoryAllocation ? LOOM_RESOURCE_EXHAUSTED : LOOM_INTERNAL;
  return loom_status_set(st, c, "%s: CUDA error %s (%s)", what ? what : "cuda", cudaGetErrorName(e),
                         cudaGetErrorString(e));
}

/* ---- devices ---- */
static int cu_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* no driver / no device: clear the sticky-free error */
    return 0;
  }
  return n;
}

/* ---- pool ---- */
static void pool_release_cached(loom_cuda_ctx *c) {
  loom_cuda_block **pp = &c->blocks;
  while (*pp) {
    loom_cuda_block *b = *pp;
    if (!b->used) {
      cudaFree(b->ptr);
      c->cached -= b->size;
      *pp = b->next;
      loom__free(b);
    } else {
      pp = &b->next;
    }
  }
}

static void *cu_alloc(void *ctx, size_t n, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  size_t sz = size_class(n);
  for (loom_cuda_block *b = c->blocks; b; b = b->next)
    if (!b->used && b->size == sz) {
      b->used = 1;
      c->cached -= sz;
      c->in_use += sz;
      return b->ptr;
    }
  loom_cuda_block *b = loom__calloc(1, sizeof *b);
  if (!b) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cuda: out of host memory");
    return NULL;
  }
  cudaSetDevice(c->device);
  cudaError_t e = cudaMalloc(&b->ptr, sz);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    pool_release_cached(c);
    e = cudaMalloc(&b->ptr, sz);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    loom__free(b);
    char what[64];
    snprintf(what, sizeof what, "cuda: allocating %zu bytes", sz);
    cuda_fail(st, e, what);
    return NULL;
  }
  b->size = sz;
  b->used = 1;
  b->next = c->blocks;
  c->blocks = b;
  c->in_use += sz;
  return b->ptr;
}

static void cu_free(void *ctx, void *p) {
  loom_cuda_ctx *c = ctx;
  if (!p) return;
  for (loom_cuda_block *b = c->blocks; b; b = b->next)
    if (b->ptr == p && b->used) {
      b->used = 0;
      c->in_use -= b->size;
      c->cached += b->size;
      return;
    }
}

void *loom__cuda_scratch(loom_cuda_ctx *c, size_t n) {
  if (n <= c->scratch_size && c->scratch) return c->scratch;
  loom_status *st = loom_status_new();
  void *p = cu_alloc(c, n, st);
  loom_status_free(st);
  if (!p) return NULL;
  cu_free(c, c->scratch); /* stream-ordered: later work on the stream reuses it safely */
  c->scratch = p;
  c->scratch_size = size_class(n);
  return p;
}

static void cu_pool_stats(void *ctx, size_t *in_use, size_t *cached) {
  loom_cuda_ctx *c = ctx;
  if (in_use) *in_use = c->in_use;
  if (cached) *cached = c->cached;
}

/* ---- context ---- */
static void cu_ctx_free(void *ctx) {
  loom_cuda_ctx *c = ctx;
  if (!c) return;
  cudaSetDevice(c->device);
  if (c->stream) cudaStreamSynchronize(c->stream);
  loom_cuda_block *b = c->blocks;
  while (b) {
    loom_cuda_block *n = b->next;
    cudaFree(b->ptr);
    loom__free(b);
    b = n;
  }
#ifdef LOOM_HAVE_CUDNN
  if (c->cudnn) cudnnDestroy((cudnnHandle_t)c->cudnn);
#endif
  if (c->derr) cudaFree(c->derr);
  if (c->hrec) cudaFreeHost(c->hrec);
  if (c->blas) cublasDestroy(c->blas);
  if (c->stream) cudaStreamDestroy(c->stream);
  loom__free(c);
}

static void *cu_ctx_new(int index, loom_status *st) {
  int n = cu_device_count();
  if (index < 0 || index >= n) {
    loom_status_set(st, LOOM_UNAVAILABLE, "no CUDA device %d (%d present)", index, n);
    return NULL;
  }
  loom_cuda_ctx *c = loom__calloc(1, sizeof *c);
  if (!c) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "cuda: out of memory");
    return NULL;
  }
  c->device = index;
  cudaError_t e = cudaSetDevice(index);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    cuda_fail(st, e, "cuda: creating the session stream");
    (void)cudaGetLastError();
    c->stream = NULL;
    cu_ctx_free(c);
    return NULL;
  }
  if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
    c->blas = NULL;
#ifndef LOOM_CUEMU
    const char *why = loom__cublas_load_error();
#else
    const char *why = NULL;
#endif
    loom_status_set(st, LOOM_UNAVAILABLE, "cuda: cannot create a cuBLAS handle%s%s", why ? ": " : "", why ? why : "");
    cu_ctx_free(c);
    return NULL;
  }
  cublasSetStream(c->blas, c->stream);
  /* LOOM_CUDA_TF32=1: matmuls and convolutions (cuBLAS) may use TF32 tensor cores, as PyTorch's convolutions
   * do by default: several times faster, with a 10-bit mantissa on the products. Off by default. */
  const char *tf32 = getenv("LOOM_CUDA_TF32");
  if (tf32 && tf32[0] && strcmp(tf32, "0") != 0) cublasSetMathMode(c->blas, CUBLAS_TF32_TENSOR_OP_MATH);
  e = cudaMalloc((void **)&c->derr, sizeof *c->derr);
  if (e == cudaSuccess) e = cudaMemsetAsync(c->derr, 0, sizeof *c->derr, c->stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    c->derr = NULL;
    cuda_fail(st, e, "cuda: allocating the session's error record");
    cu_ctx_free(c);
    return NULL;
  }
  if (cudaMallocHost((void **)&c->hrec, sizeof *c->hrec) != cudaSuccess) {
    (void)cudaGetLastError();
    c->hrec = NULL; /* the record is then copied after the synchronization */
  }
#ifdef LOOM_HAVE_CUDNN
  cudnnHandle_t h;
  if (cudnnCreate(&h) == CUDNN_STATUS_SUCCESS) {
    cudnnSetStream(h, c->stream);
    c->cudnn = h;
  }
#endif
  return c;
}

/* ---- copies, sync, events ---- */
static loom_code cu_h2d(void *ctx, void *dst, const void *src, size_t n, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  cudaSetDevice(c->device); /* the thread may have another device current */
  if (!n) return LOOM_OK;
  /* pageable source: returns once src has been staged */
  cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream);
  return e == cudaSuccess ? LOOM_OK : cuda_fail(st, e, "cuda: host-to-device copy");
}
static loom_code cu_d2h(void *ctx, void *dst, const void *src, size_t n, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  cudaSetDevice(c->device); /* the thread may have another device current */
  if (!n) return LOOM_OK;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
  return e == cudaSuccess ? LOOM_OK : cuda_fail(st, e, "cuda: device-to-host copy");
}
static void *cu_host_alloc(void *ctx, size_t n) {
  loom_cuda_ctx *c = ctx;
  void *p = NULL;
  cudaSetDevice(c->device);
  if (cudaMallocHost(&p, n) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return p;
}
static void cu_host_free(void *ctx, void *p) {
  (void)ctx;
  if (p) cudaFreeHost(p);
}
/* into page-locked memory: truly asynchronous, complete after the next cu_sync */
static loom_code cu_d2h_async(void *ctx, void *dst, const void *src, size_t n, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  cudaSetDevice(c->device);
  if (!n) return LOOM_OK;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream);
  return e == cudaSuccess ? LOOM_OK : cuda_fail(st, e, "cuda: device-to-host copy");
}
static loom_code cu_d2d(void *ctx, void *dst, const void *src, size_t n, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  cudaSetDevice(c->device); /* the thread may have another device current */
  if (!n || dst == src) return LOOM_OK;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, c->stream);
  return e == cudaSuccess ? LOOM_OK : cuda_fail(st, e, "cuda: device-to-device copy");
}
static loom_code cu_memset0(void *ctx, void *dst, size_t n, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  cudaSetDevice(c->device); /* the thread may have another device current */
  if (!n) return LOOM_OK;
  cudaError_t e = cudaMemsetAsync(dst, 0, n, c->stream);
  return e == cudaSuccess ? LOOM_OK : cuda_fail(st, e, "cuda: memset");
}
static loom_code cu_sync(void *ctx, const char *what, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  cudaSetDevice(c->device); /* the thread may have another device current */
  /* a kernel may have reported bad data: its record comes down with this synchronization */
  c->hrec_fresh = c->watched && c->hrec &&
                  cudaMemcpyAsync(c->hrec, c->derr, sizeof *c->hrec, cudaMemcpyDeviceToHost, c->stream) == cudaSuccess;
  if (c->watched && c->hrec && !c->hrec_fresh) (void)cudaGetLastError(); /* read after the sync instead */
  cudaError_t e = cudaStreamSynchronize(c->stream);
  return e == cudaSuccess ? LOOM_OK : cuda_fail(st, e, what);
}
static loom_code cu_check(void *ctx, const char *what, loom_status *st) {
  (void)ctx;
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? LOOM_OK : cuda_fail(st, e, what);
}
static void *cu_event_new(void *ctx, loom_status *st) {
  (void)ctx;
  cudaEvent_t ev;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    cuda_fail(st, e, "cuda: creating an event");
    return NULL;
  }
  return (void *)ev;
}
static loom_code cu_event_record(void *ctx, void *ev, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  cudaError_t e = cudaEventRecord((cudaEvent_t)ev, c->stream);
  return e == cudaSuccess ? LOOM_OK : cuda_fail(st, e, "cuda: recording an event");
}
static loom_code cu_event_wait(void *ctx, void *ev, loom_status *st) {
  (void)ctx;
  cudaError_t e = cudaEventSynchronize((cudaEvent_t)ev);
  return e == cudaSuccess ? LOOM_OK : cuda_fail(st, e, "cuda: waiting for an event");
}
static void cu_event_free(void *ctx, void *ev) {
  (void)ctx;
  if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

/* ---- bad data reported by kernels (kernels/cuda/common.cuh: cu_watch) ---- */
static void cu_begin_run(void *ctx) {
  loom_cuda_ctx *c = ctx;
  cudaSetDevice(c->device); /* kernels and cuBLAS calls go to the thread's current device */
}
static void cu_begin_step(void *ctx, int step) { ((loom_cuda_ctx *)ctx)->step = step; }

static loom_code cu_take_data_error(void *ctx, loom_dev_data_error *out, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  out->step = -1;
  if (!c->watched) return LOOM_OK;
  c->watched = 0;
  loom_cuda_err r;
  cudaError_t e = cudaSuccess;
  if (c->hrec_fresh) { /* copied by the synchronization just before */
    r = *c->hrec;
  } else {
    e = cudaMemcpyAsync(&r, c->derr, sizeof r, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) return cuda_fail(st, e, "cuda: reading the kernels' error record");
  }
  c->hrec_fresh = 0;
  if (!r.tag) return LOOM_OK;
  e = cudaMemsetAsync(c->derr, 0, sizeof r, c->stream);
  if (e != cudaSuccess) return cuda_fail(st, e, "cuda: clearing the kernels' error record");
  static const char *const what[] = {"indices", "segment_ids", "labels"};
  out->step = (int)(r.tag - 1);
  out->what = r.kind >= 0 && r.kind < (long long)(sizeof what / sizeof what[0]) ? what[r.kind] : "index";
  out->indices = (const void *)(uintptr_t)r.indices;
  out->pos = (int64_t)~r.npos;
  out->value = 0; /* the engine reads indices[pos] */
  out->bound = r.bound;
  return LOOM_OK;
}

/* ---- whole-step graphs (engine/backend.c loom__dev_run_graph) ----
 * A plan's steps are captured from the context's stream (thread-local mode: a call from this thread
 * that capture does not allow -- a synchronous copy, a synchronization, cudaMalloc -- fails and
 * invalidates the capture, and the plan runs uncaptured) and replayed with cudaGraphLaunch. Kernels
 * that may report bad data set `watched` as they are queued; a replay sets it as they would. */
typedef struct cu_graph {
  cudaGraphExec_t exec;
  int watches;
  void *scratch; /* the context's scratch the captured kernels use: a graph is stale once it grew */
  size_t scratch_size;
} cu_graph;
static loom_code cu_capture_begin(void *ctx, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  c->watched_saved = c->watched;
  c->watched = 0;
  cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    c->watched = c->watched_saved;
    return cuda_fail(st, e, "cuda: beginning a stream capture");
  }
  return LOOM_OK;
}
static void *cu_capture_end(void *ctx) {
  loom_cuda_ctx *c = ctx;
  cudaGraph_t g = NULL;
  cudaError_t e = cudaStreamEndCapture(c->stream, &g);
  int watches = c->watched;
  c->watched = c->watched_saved;
  if (e != cudaSuccess || !g) {
    (void)cudaGetLastError(); /* an invalidated capture: nothing ran */
    if (g) cudaGraphDestroy(g);
    return NULL;
  }
  cudaGraphExec_t x = NULL;
  e = cudaGraphInstantiateWithFlags(&x, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  cu_graph *cg = loom__calloc(1, sizeof *cg);
  if (!cg) {
    cudaGraphExecDestroy(x);
    return NULL;
  }
  cg->exec = x;
  cg->watches = watches;
  cg->scratch = c->scratch;
  cg->scratch_size = c->scratch_size;
  return cg;
}
/* The scratch a graph's kernels write was released to the pool when it grew (another plan needed
 * more): replaying would write memory that may belong to someone else now. */
static int cu_graph_valid(void *ctx, void *graph) {
  loom_cuda_ctx *c = ctx;
  cu_graph *cg = graph;
  return cg->scratch == c->scratch && cg->scratch_size == c->scratch_size;
}
static loom_code cu_graph_launch(void *ctx, void *graph, loom_status *st) {
  loom_cuda_ctx *c = ctx;
  cu_graph *cg = graph;
  cudaError_t e = cudaGraphLaunch(cg->exec, c->stream);
  if (e != cudaSuccess) return cuda_fail(st, e, "cuda: launching the step's graph");
  if (cg->watches) c->watched = 1;
  return LOOM_OK;
}
static void cu_graph_free(void *ctx, void *graph) {
  (void)ctx;
  cu_graph *cg = graph;
  if (!cg) return;
  cudaGraphExecDestroy(cg->exec);
  loom__free(cg);
}

static const loom_backend_i cuda_backend = {
    .name = "cuda",
    .device = LOOM_DEVICE_CUDA,
    .device_count = cu_device_count,
    .context_new = cu_ctx_new,
    .context_free = cu_ctx_free,
    .buffer_alloc = cu_alloc,
    .buffer_free = cu_free,
    .copy_h2d = cu_h2d,
    .copy_d2h = cu_d2h,
    .copy_d2d = cu_d2d,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .copy_d2h_async = cu_d2h_async,
    .memset_zero = cu_memset0,
    .synchronize = cu_sync,
    .check = cu_check,
    .event_new = cu_event_new,
    .event_record = cu_event_record,
    .event_wait = cu_event_wait,
    .event_free = cu_event_free,
    .begin_run = cu_begin_run,
    .begin_step = cu_begin_step,
    .take_data_error = cu_take_data_error,
    .pool_stats = cu_pool_stats,
    .capture_begin = cu_capture_begin,
    .capture_end = cu_capture_end,
    .graph_launch = cu_graph_launch,
    .graph_valid = cu_graph_valid,
    .graph_free = cu_graph_free,
    .comm_load = loom__nccl_load,
    .comm_id = loom__nccl_id,
    .comm_new = loom__nccl_comm_new,
    .comm_allreduce_sum_f32 = loom__nccl_allreduce_sum_f32,
    .comm_free = loom__nccl_comm_free,
};

const loom_backend_i *loom__backend_cuda(void);
const loom_backend_i *loom__backend_cuda(void) { return &cuda_backend; }
