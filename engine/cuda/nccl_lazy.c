/* engine/cuda/nccl_lazy.c - NCCL for the CUDA backend's device all-reduce, loaded on first use (CUDA=1 and
 * CUDA=emu builds).
 *
 * As cuBLAS (engine/cuda/cublas_lazy.c), NCCL is not linked: the first call opens libnccl.so.<major of the
 * headers> (else the toolkit's lib64/ and lib/ folders this build was compiled against), or the file
 * LOOM_NCCL_LIBRARY names, and looks up the few entry points below; a process that never all-reduces on
 * a device loads nothing of NCCL. Communicators are non-blocking (ncclConfig_t.blocking = 0), so no call
 * here waits without a deadline: initialization and every all-reduce are polled (ncclCommGetAsyncError,
 * cudaStreamQuery) until done, an error, or the timeout, and a communicator that ran out of time is
 * aborted (ncclCommAbort). */
#include "engine/cuda/nccl_lazy.h"
#if !__has_include(<nccl.h>)
/* A toolkit without NCCL's header (NCCL ships apart from some CUDA toolkits): no device all-reduce; the
 * collective strategy all-reduces on the host. */
loom_code loom__nccl_load(char *name, size_t cap, loom_status *st) {
  (void)name, (void)cap;
  return loom_status_set(st, LOOM_UNAVAILABLE, "this build was compiled without NCCL's header (nccl.h)");
}
loom_code loom__nccl_id(void *id, size_t cap, size_t *n, loom_status *st) {
  (void)id, (void)cap, (void)n;
  return loom__nccl_load(NULL, 0, st);
}
void *loom__nccl_comm_new(void *ctx, const void *id, size_t n, int nranks, int rank, double timeout_s,
                          loom_status *st) {
  (void)ctx, (void)id, (void)n, (void)nranks, (void)rank, (void)timeout_s;
  loom__nccl_load(NULL, 0, st);
  return NULL;
}
loom_code loom__nccl_allreduce_sum_f32(void *ctx, void *comm, void *buf, int64_t n, double timeout_s,
                                       loom_status *st) {
  (void)ctx, (void)comm, (void)buf, (void)n, (void)timeout_s;
  return loom__nccl_load(NULL, 0, st);
}
void loom__nccl_comm_free(void *comm) { (void)comm; }
#else
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
/* NCCL's header declares a few functions without prototypes (f()) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include "base/base.h"
#include "kernels/cuda/cuda_ctx.h"

#define LOOM_STR_(x) #x
#define LOOM_STR(x) LOOM_STR_(x)

#define LOOM_NCCL_FNS(X)                                                                                               \
  X(ncclGetVersion)                                                                                                    \
  X(ncclGetUniqueId)                                                                                                   \
  X(ncclCommInitRankConfig)                                                                                            \
  X(ncclCommGetAsyncError)                                                                                             \
  X(ncclAllReduce)                                                                                                     \
  X(ncclCommAbort)                                                                                                     \
  X(ncclGetErrorString)

#define LOOM_NCCL_PTR(name) static __typeof__(&name) p_##name;
LOOM_NCCL_FNS(LOOM_NCCL_PTR)
#undef LOOM_NCCL_PTR

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_loaded;
static char g_err[768];
static char g_name[64];

static void *open_lib(void) {
  const char *env = getenv("LOOM_NCCL_LIBRARY");
  const char *name = env && env[0] ? env : "libnccl.so." LOOM_STR(NCCL_MAJOR);
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
#ifdef LOOM_CUDA_LIBDIR
  /* libloom.so has no RUNPATH: try the toolkit this build was compiled against (NCCL sits in lib64/ or,
   * in some toolkits, lib/) */
  if (!h && !(env && env[0])) {
    char first[512];
    snprintf(first, sizeof first, "%s", dlerror());
    static const char *const dirs[] = {LOOM_CUDA_LIBDIR, LOOM_CUDA_LIBDIR "/../lib"};
    for (size_t i = 0; !h && i < sizeof dirs / sizeof dirs[0]; i++) {
      char path[768];
      snprintf(path, sizeof path, "%s/%s", dirs[i], name);
      h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        snprintf(path, sizeof path, "%s/libnccl.so", dirs[i]);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      }
    }
    if (!h) {
      dlerror();
      snprintf(g_err, sizeof g_err, "cannot load NCCL: %s", first);
      return NULL;
    }
  }
#endif
  if (!h) snprintf(g_err, sizeof g_err, "cannot load NCCL: %s", dlerror());
  return h;
}

static void load(void) {
  void *h = open_lib();
  if (!h) return;
#define LOOM_NCCL_SYM(name)                                                                                            \
  {                                                                                                                    \
    void *s = dlsym(h, LOOM_STR(name));                                                                                \
    if (!s) {                                                                                                          \
      snprintf(g_err, sizeof g_err, "NCCL has no %s: %s", LOOM_STR(name), dlerror());                                  \
      return;                                                                                                          \
    }                                                                                                                  \
    memcpy(&p_##name, &s, sizeof s);                                                                                   \
  }
  LOOM_NCCL_FNS(LOOM_NCCL_SYM)
#undef LOOM_NCCL_SYM
  int v = 0;
  if (p_ncclGetVersion(&v) != ncclSuccess) {
    snprintf(g_err, sizeof g_err, "NCCL: ncclGetVersion failed");
    return;
  }
  /* 2.9+ encodes major*10000 + minor*100 + patch, older major*1000 + minor*100 + patch */
  if (v >= 10000)
    snprintf(g_name, sizeof g_name, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  else
    snprintf(g_name, sizeof g_name, "NCCL %d.%d.%d", v / 1000, v / 100 % 10, v % 100);
  if (v < 21400) { /* non-blocking communicators (ncclConfig_t) came with 2.14 */
    snprintf(g_err, sizeof g_err, "%s is older than 2.14 (no non-blocking communicators)", g_name);
    return;
  }
  g_loaded = 1; /* the handle stays open for the life of the process */
}

loom_code loom__nccl_load(char *name, size_t cap, loom_status *st) {
  pthread_once(&g_once, load);
  if (!g_loaded) return loom_status_set(st, LOOM_UNAVAILABLE, "%s", g_err);
  if (name && cap) snprintf(name, cap, "%s", g_name);
  return LOOM_OK;
}

static loom_code nccl_fail(loom_status *st, ncclResult_t r, const char *what) {
  return loom_status_set(st, r == ncclInvalidArgument || r == ncclInvalidUsage ? LOOM_INVALID_ARGUMENT
                                                                               : LOOM_UNAVAILABLE,
                         "%s: NCCL error %d (%s)", what, (int)r, p_ncclGetErrorString(r));
}

loom_code loom__nccl_id(void *id, size_t cap, size_t *n, loom_status *st) {
  if (loom__nccl_load(NULL, 0, st)) return loom_status_code(st);
  if (cap < sizeof(ncclUniqueId))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "NCCL: a unique id needs %zu bytes, got %zu",
                           sizeof(ncclUniqueId), cap);
  ncclUniqueId u;
  ncclResult_t r = p_ncclGetUniqueId(&u);
  if (r != ncclSuccess) return nccl_fail(st, r, "NCCL: ncclGetUniqueId");
  memcpy(id, &u, sizeof u);
  *n = sizeof u;
  return LOOM_OK;
}

static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void nap(void) {
  struct timespec t = {0, 20000}; /* 20 us */
  nanosleep(&t, NULL);
}

/* Polls comm's state until it leaves ncclInProgress (and, with stream, until the stream's work is done)
 * within timeout_s; a communicator out of time is aborted (*aborted 1). */
static loom_code settle(ncclComm_t comm, cudaStream_t stream, int with_stream, double timeout_s, const char *what,
                        int *aborted, loom_status *st) {
  double end = mono_s() + timeout_s;
  for (;;) {
    ncclResult_t a = ncclSuccess;
    ncclResult_t r = p_ncclCommGetAsyncError(comm, &a);
    if (r != ncclSuccess) return nccl_fail(st, r, what);
    if (a != ncclSuccess && a != ncclInProgress) return nccl_fail(st, a, what);
    if (a == ncclSuccess) {
      if (!with_stream) return LOOM_OK;
      cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return LOOM_OK;
      if (e != cudaErrorNotReady) {
        (void)cudaGetLastError();
        return loom_status_set(st, LOOM_INTERNAL, "%s: CUDA error %s (%s)", what, cudaGetErrorName(e),
                               cudaGetErrorString(e));
      }
    }
    if (mono_s() > end) {
      p_ncclCommAbort(comm);
      *aborted = 1;
      return loom_status_set(st, LOOM_DEADLINE_EXCEEDED,
                             "%s did not complete within the collective timeout (%g s): a rank is lost or stalled; "
                             "the NCCL communicator was aborted",
                             what, timeout_s);
    }
    nap();
  }
}

typedef struct nccl_comm {
  ncclComm_t comm;
  int dead; /* aborted (or failed): only freed from now on */
} nccl_comm;

void *loom__nccl_comm_new(void *ctx, const void *id, size_t n, int nranks, int rank, double timeout_s,
                          loom_status *st) {
  loom_cuda_ctx *c = ctx;
  if (loom__nccl_load(NULL, 0, st)) return NULL;
  if (n != sizeof(ncclUniqueId)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "NCCL: a unique id of %zu bytes (expected %zu)", n,
                    sizeof(ncclUniqueId));
    return NULL;
  }
  nccl_comm *nc = loom__calloc(1, sizeof *nc);
  if (!nc) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  cudaSetDevice(c->device); /* the communicator belongs to the session's device */
  ncclUniqueId u;
  memcpy(&u, id, sizeof u);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = p_ncclCommInitRankConfig(&nc->comm, nranks, u, rank, &cfg);
  int aborted = 0;
  loom_code rc = LOOM_OK;
  if (r != ncclSuccess && r != ncclInProgress)
    rc = nccl_fail(st, r, "NCCL: ncclCommInitRankConfig");
  else
    rc = settle(nc->comm, NULL, 0, timeout_s, "NCCL: creating the communicator", &aborted, st);
  if (rc) {
    if (nc->comm && !aborted) p_ncclCommAbort(nc->comm);
    loom__free(nc);
    return NULL;
  }
  return nc;
}

loom_code loom__nccl_allreduce_sum_f32(void *ctx, void *comm, void *buf, int64_t n, double timeout_s,
                                       loom_status *st) {
  loom_cuda_ctx *c = ctx;
  nccl_comm *nc = comm;
  if (nc->dead)
    return loom_status_set(st, LOOM_FAILED_PRECONDITION, "NCCL: the communicator failed before; no more all-reduces");
  cudaSetDevice(c->device);
  ncclResult_t r = p_ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, ncclSum, nc->comm, c->stream);
  int aborted = 0;
  loom_code rc = r == ncclSuccess || r == ncclInProgress
                     ? settle(nc->comm, c->stream, 1, timeout_s, "NCCL: ncclAllReduce", &aborted, st)
                     : nccl_fail(st, r, "NCCL: ncclAllReduce");
  if (rc) {
    if (!aborted) p_ncclCommAbort(nc->comm); /* a failed communicator cannot be used again */
    nc->dead = 1;
  }
  return rc;
}

/* No work of the communicator is ever pending here (every all-reduce was waited for or aborted), and a
 * peer may have failed: ncclCommAbort frees it without waiting for the others, where ncclCommDestroy
 * could wait for them. */
void loom__nccl_comm_free(void *comm) {
  nccl_comm *nc = comm;
  if (!nc) return;
  if (!nc->dead) p_ncclCommAbort(nc->comm);
  loom__free(nc);
}
#endif
