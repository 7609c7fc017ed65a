/* engine/cuda/cublas_lazy.c - cuBLAS, loaded on first use (CUDA=1 builds only).
 *
 * The library is not linked: this file defines the few cuBLAS entry points
 * loom calls (the declarations come from cublas_v2.h, so the compiler checks
 * every signature) and each forwards to the real one, found with dlopen and
 * dlsym the first time any of them is called. libcublas pulls in
 * libcublasLt (over half a gigabyte); loading both costs every process about
 * 0.1 s at start (measured: a CUDA build's test binaries took 5x longer with
 * it linked), and a CUDA build then needs neither library on a machine that
 * never opens a CUDA session. LOOM_CUBLAS_LIBRARY names another library file
 * to open instead. When the library cannot be loaded, every entry
 * point returns CUBLAS_STATUS_NOT_INITIALIZED and loom__cublas_load_error
 * says why; the backend turns that into an UNAVAILABLE status. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cublas_v2.h>
#include "engine/cuda/cublas_lazy.h"

#define LOOM_STR_(x) #x
#define LOOM_STR(x) LOOM_STR_(x) /* after macro expansion: cublasSgemm -> "cublasSgemm_v2" */

/* The entry points: X(name as loom calls it) */
#define LOOM_CUBLAS_FNS(X)                                                                                             \
  X(cublasCreate)                                                                                                      \
  X(cublasDestroy)                                                                                                     \
  X(cublasSetStream)                                                                                                   \
  X(cublasSetMathMode)                                                                                                 \
  X(cublasSgemm)                                                                                                       \
  X(cublasDgemm)                                                                                                       \
  X(cublasSgemmStridedBatched)                                                                                         \
  X(cublasDgemmStridedBatched)

#define LOOM_CUBLAS_PTR(name) static __typeof__(&name) p_##name;
LOOM_CUBLAS_FNS(LOOM_CUBLAS_PTR)
#undef LOOM_CUBLAS_PTR

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_loaded;
static char g_err[512];

static void load(void) {
  /* the major version the headers describe (the ABI this build was compiled against), unless
   * LOOM_CUBLAS_LIBRARY names a file */
  const char *env = getenv("LOOM_CUBLAS_LIBRARY");
  const char *name = env && env[0] ? env : "libcublas.so." LOOM_STR(CUBLAS_VER_MAJOR);
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
#ifdef LOOM_CUDA_LIBDIR
  /* libloom.so has no RUNPATH (docs/build.md): when the loader's path lacks cuBLAS, try
   * the toolkit this build was compiled against */
  if (!h && !(env && env[0])) {
    char path[768];
    snprintf(path, sizeof path, "%s/%s", LOOM_CUDA_LIBDIR, name);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) dlerror(); /* report the plain name's failure below */
    if (!h) h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  }
#endif
  if (!h) {
    snprintf(g_err, sizeof g_err, "cannot load cuBLAS: %s", dlerror());
    return;
  }
  /* dlsym returns void *; the pointer is converted through memcpy (ISO C has no function/object pointer cast) */
#define LOOM_CUBLAS_SYM(name)                                                                                          \
  {                                                                                                                    \
    void *s = dlsym(h, LOOM_STR(name));                                                                                \
    if (!s) {                                                                                                          \
      snprintf(g_err, sizeof g_err, "cuBLAS has no %s: %s", LOOM_STR(name), dlerror());                                \
      return;                                                                                                          \
    }                                                                                                                  \
    memcpy(&p_##name, &s, sizeof s);                                                                                   \
  }
  LOOM_CUBLAS_FNS(LOOM_CUBLAS_SYM)
#undef LOOM_CUBLAS_SYM
  g_loaded = 1; /* the handle stays open for the life of the process */
}

static int ready(void) {
  pthread_once(&g_once, load);
  return g_loaded;
}

const char *loom__cublas_load_error(void) { return ready() ? NULL : g_err; }

#define NOT_LOADED CUBLAS_STATUS_NOT_INITIALIZED

cublasStatus_t cublasCreate(cublasHandle_t *handle) { return ready() ? p_cublasCreate(handle) : NOT_LOADED; }
cublasStatus_t cublasDestroy(cublasHandle_t handle) { return ready() ? p_cublasDestroy(handle) : NOT_LOADED; }
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  return ready() ? p_cublasSetStream(handle, stream) : NOT_LOADED;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  return ready() ? p_cublasSetMathMode(handle, mode) : NOT_LOADED;
}
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
  return ready() ? p_cublasSgemm(handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) : NOT_LOADED;
}
cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double *alpha, const double *A, int lda, const double *B, int ldb, const double *beta,
                           double *C, int ldc) {
  return ready() ? p_cublasDgemm(handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) : NOT_LOADED;
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long int sa,
                                         const float *B, int ldb, long long int sb, const float *beta, float *C,
                                         int ldc, long long int sc, int batch) {
  return ready() ? p_cublasSgemmStridedBatched(handle, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc,
                                               sc, batch)
                 : NOT_LOADED;
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double *alpha, const double *A, int lda, long long int sa,
                                         const double *B, int ldb, long long int sb, const double *beta, double *C,
                                         int ldc, long long int sc, int batch) {
  return ready() ? p_cublasDgemmStridedBatched(handle, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc,
                                               sc, batch)
                 : NOT_LOADED;
}
