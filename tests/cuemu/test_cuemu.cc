/* tests/cuemu/test_cuemu.cc - checks of the CUDA emulator itself, so that a
 * parity run under it means something: thread and block indices cover the
 * grid once, __syncthreads orders shared-memory writes before reads, warp
 * shuffles (down, xor, partial warps) exchange the right lanes, the driver's
 * launch-configuration errors, kernel pointer-argument checks, bounds-checked
 * copies, garbage-filled allocations, OOM and reuse, a divergent barrier is
 * reported, host code touching device memory faults, and GEMM against a
 * naive loop with cuBLAS's argument checks, stream capture and graph launches. Built and run by
 * make test-cuemu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "cuda_runtime.h"
#include "cublas_v2.h"

static int g_fail, g_checks;
#define CHECK(cond, ...)                          \
  do {                                            \
    g_checks++;                                   \
    if (!(cond)) {                                \
      g_fail++;                                   \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                        \
      printf("\n");                               \
    }                                             \
  } while (0)

#define LAUNCH(g, b, sh, st, ...) cuemu::launch(g, b, sh, st, __VA_ARGS__)

__global__ void k_ids(int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += 1000 * (int)blockIdx.x + (int)threadIdx.x + 1;
}

/* Block reverse through shared memory: needs the barrier between write and read. */
__global__ void k_reverse(const float *x, float *y) {
  __shared__ float sh[256];
  unsigned t = threadIdx.x;
  sh[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  y[blockIdx.x * blockDim.x + t] = sh[blockDim.x - 1 - t];
}

__global__ void k_shfl(const int *x, int *down, int *xr, int *sum) {
  unsigned t = threadIdx.x;
  int v = x[t];
  down[t] = __shfl_down_sync(0xffffffffu, v, 3);
  xr[t] = __shfl_xor_sync(0xffffffffu, v, 5);
  int s = v;
  for (int off = 16; off; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  sum[t] = s;
}

/* A race: reads a neighbour's shared slot without a barrier. */
__global__ void k_racy(int *out) {
  __shared__ int sh[64];
  sh[threadIdx.x] = (int)threadIdx.x + 1;
  out[threadIdx.x] = sh[(threadIdx.x + 1) % 64];
}

__global__ void k_divergent(int *x) {
  if (threadIdx.x < 3) __syncthreads(); /* a hang on a GPU; reported here */
  else __syncwarp();
  x[threadIdx.x] = 1;
}

__global__ void k_touch(float *x) { x[0] = 1; }

static std::vector<float> naive(int m, int n, int k, bool ta, bool tb, const std::vector<float> &A, int lda,
                                const std::vector<float> &B, int ldb) {
  std::vector<float> C((size_t)m * n);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double s = 0;
      for (int p = 0; p < k; p++) s += (double)(ta ? A[i * lda + p] : A[p * lda + i]) * (tb ? B[p * ldb + j] : B[j * ldb + p]);
      C[(size_t)j * m + i] = (float)s;
    }
  return C;
}

int main() {
  /* indices: a 7-block x 96-thread grid touches each of 650 items exactly once */
  int *d = nullptr;
  CHECK(cudaMalloc((void **)&d, 700 * sizeof(int)) == cudaSuccess, "malloc");
  std::vector<int> h(700, 0x7f7f7f7f);
  CHECK(cudaMemcpy(h.data(), d, 700 * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess, "d2h");
  CHECK(h[0] == -1 && h[699] == -1, "fresh device memory is garbage-filled (0xff), got %d", h[0]);
  CHECK(cudaMemset(d, 0, 700 * sizeof(int)) == cudaSuccess, "memset");
  LAUNCH(dim3(7), dim3(96), 0, nullptr, k_ids)(d, 650);
  CHECK(cudaGetLastError() == cudaSuccess, "launch");
  cudaMemcpy(h.data(), d, 700 * sizeof(int), cudaMemcpyDeviceToHost);
  bool ok = true;
  for (int i = 0; i < 700; i++) ok &= h[i] == (i < 650 ? 1000 * (i / 96) + i % 96 + 1 : 0);
  CHECK(ok, "every (block, thread) ran once");

  /* barrier + shared memory */
  std::vector<float> xs(512), ys(512);
  for (int i = 0; i < 512; i++) xs[i] = (float)i;
  float *dx, *dy;
  cudaMalloc((void **)&dx, 512 * 4);
  cudaMalloc((void **)&dy, 512 * 4);
  cudaMemcpy(dx, xs.data(), 512 * 4, cudaMemcpyHostToDevice);
  LAUNCH(dim3(2), dim3(256), 0, nullptr, k_reverse)(dx, dy);
  cudaMemcpy(ys.data(), dy, 512 * 4, cudaMemcpyDeviceToHost);
  ok = true;
  for (int i = 0; i < 512; i++) ok &= ys[i] == (float)((i / 256) * 256 + 255 - i % 256);
  CHECK(ok, "shared-memory reverse across __syncthreads");

  /* shuffles on a 40-thread block: a full warp and a partial one of 8 lanes */
  int *sx, *sd, *sxr, *ss;
  cudaMalloc((void **)&sx, 40 * 4);
  cudaMalloc((void **)&sd, 40 * 4);
  cudaMalloc((void **)&sxr, 40 * 4);
  cudaMalloc((void **)&ss, 40 * 4);
  std::vector<int> hx(40), hd(40), hxr(40), hs(40);
  for (int i = 0; i < 40; i++) hx[i] = i * i + 1;
  cudaMemcpy(sx, hx.data(), 160, cudaMemcpyHostToDevice);
  LAUNCH(dim3(1), dim3(40), 0, nullptr, k_shfl)(sx, sd, sxr, ss);
  cudaMemcpy(hd.data(), sd, 160, cudaMemcpyDeviceToHost);
  cudaMemcpy(hxr.data(), sxr, 160, cudaMemcpyDeviceToHost);
  cudaMemcpy(hs.data(), ss, 160, cudaMemcpyDeviceToHost);
  int s0 = 0;
  for (int i = 0; i < 32; i++) s0 += hx[i];
  ok = true;
  for (int i = 0; i < 32; i++) ok &= hd[i] == (i + 3 < 32 ? hx[i + 3] : hx[i]) && hxr[i] == hx[i ^ 5] && hs[i] == s0;
  CHECK(ok, "full warp: shfl_down by 3, shfl_xor by 5, xor-butterfly sum");
  ok = true;
  for (int i = 32; i < 40; i++) ok &= hd[i] == (i + 3 < 40 ? hx[i + 3] : hx[i]);
  CHECK(ok, "partial warp: lanes past the block's end give the caller's value");

  /* CUEMU_ORDER=reverse changes what a racy kernel reads (and nothing for a correct one: k_reverse) */
  {
    int *r;
    cudaMalloc((void **)&r, 64 * 4);
    std::vector<int> fwd(64), rev(64);
    cudaMemset(r, 0, 64 * 4);
    LAUNCH(dim3(1), dim3(64), 0, nullptr, k_racy)(r);
    cudaMemcpy(fwd.data(), r, 64 * 4, cudaMemcpyDeviceToHost);
    setenv("CUEMU_ORDER", "reverse", 1);
    LAUNCH(dim3(1), dim3(64), 0, nullptr, k_racy)(r);
    cudaMemcpy(rev.data(), r, 64 * 4, cudaMemcpyDeviceToHost);
    LAUNCH(dim3(2), dim3(256), 0, nullptr, k_reverse)(dx, dy);
    std::vector<float> ys2(512);
    cudaMemcpy(ys2.data(), dy, 512 * 4, cudaMemcpyDeviceToHost);
    unsetenv("CUEMU_ORDER");
    CHECK(fwd != rev, "the racy kernel reads differently in reverse order");
    CHECK(ys2 == ys, "the barrier-correct kernel does not");
    cudaFree(r);
  }

  /* launch configuration errors are reported and clear on read */
  LAUNCH(dim3(0), dim3(32), 0, nullptr, k_ids)(d, 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "grid of 0 blocks");
  LAUNCH(dim3(1), dim3(2048), 0, nullptr, k_ids)(d, 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "block of 2048 threads");
  CHECK(cudaGetLastError() == cudaSuccess, "errors clear once read");

  /* copies: bounds and direction */
  CHECK(cudaMemcpy(h.data(), d, 701 * sizeof(int), cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
        "copy past the allocation's end");
  CHECK(cudaMemcpy(d, h.data(), 4, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "D2H with a host source");
  CHECK(cudaMemset(h.data(), 0, 4) == cudaErrorInvalidValue, "memset of host memory");
  (void)cudaGetLastError();

  /* host code touching device memory faults (in a child process) */
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stderr);
    volatile int v = d[0];
    (void)v;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "a host read of device memory faults (status %d)", status);

  /* a kernel given a host pointer: illegal address, sticky (in a child: it poisons the context) */
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stderr);
    float host[4];
    LAUNCH(dim3(1), dim3(1), 0, nullptr, k_touch)(host);
    int bad = cudaDeviceSynchronize() == cudaErrorIllegalAddress && cudaMemcpy(h.data(), d, 4, cudaMemcpyDeviceToHost) != cudaSuccess;
    _exit(bad ? 0 : 1);
  }
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a host pointer argument is an illegal address, and sticky");

  /* divergent barrier: reported as a launch failure (child: sticky) */
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stderr);
    LAUNCH(dim3(1), dim3(8), 0, nullptr, k_divergent)(d);
    _exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
  }
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "threads waiting at different barriers are reported");

  /* OOM, then the memory is usable again after frees */
  void *big = nullptr;
  CHECK(cudaMalloc(&big, (size_t)1 << 50) == cudaErrorMemoryAllocation && !big, "1 PiB is out of memory");
  (void)cudaGetLastError();
  void *a1, *a2;
  CHECK(cudaMalloc(&a1, 1 << 20) == cudaSuccess && cudaFree(a1) == cudaSuccess && cudaMalloc(&a2, 1 << 20) == cudaSuccess &&
            a1 == a2,
        "a freed block is reused");
  CHECK(cudaFree(h.data()) == cudaErrorInvalidDevicePointer, "freeing host memory");
  (void)cudaGetLastError();

  /* the API counters (tests/gpu/test_cuda_residency.c relies on them) */
  {
    cuemu_stats s0, s1;
    cuemu_get_stats(&s0);
    void *c1 = nullptr;
    std::vector<char> hb(300, 1);
    cudaMalloc(&c1, 300);
    cudaMemcpy(c1, hb.data(), 300, cudaMemcpyHostToDevice);
    cudaMemcpy(c1, c1, 100, cudaMemcpyDeviceToDevice);
    cudaMemcpy(hb.data(), c1, 120, cudaMemcpyDeviceToHost);
    cudaMemcpy(hb.data(), c1, 5, cudaMemcpyDeviceToHost);
    cudaMemset(c1, 0, 300);
    LAUNCH(dim3(1), dim3(32), 0, nullptr, k_ids)((int *)c1, 32);
    cudaStreamSynchronize(nullptr);
    cudaFree(c1);
    cudaGetLastError();
    cuemu_get_stats(&s1);
    CHECK(s1.mallocs - s0.mallocs == 1 && s1.frees - s0.frees == 1 && s1.h2d - s0.h2d == 1 &&
              s1.h2d_bytes - s0.h2d_bytes == 300 && s1.d2d - s0.d2d == 1 && s1.d2d_bytes - s0.d2d_bytes == 100 &&
              s1.d2h - s0.d2h == 2 && s1.d2h_bytes - s0.d2h_bytes == 125 && s1.memsets - s0.memsets == 1 &&
              s1.kernels - s0.kernels == 1 && s1.syncs - s0.syncs == 1,
          "the counters count each call by kind and the bytes each copy moved");
  }

  /* page-locked memory: an async device-to-host copy into it lands only at a synchronization */
  {
    int *dv = nullptr, *pin = nullptr;
    int v = 1234;
    cudaMalloc((void **)&dv, sizeof v);
    cudaMemcpy(dv, &v, sizeof v, cudaMemcpyHostToDevice);
    CHECK(cudaMallocHost((void **)&pin, sizeof v) == cudaSuccess, "cudaMallocHost");
    CHECK(cudaMemcpyAsync(pin, dv, sizeof v, cudaMemcpyDeviceToHost, nullptr) == cudaSuccess, "async copy into pinned");
    CHECK(*pin != 1234, "the pinned destination is not written before a synchronization");
    /* freeing it now is an error, and sticky (in a child: it poisons the context) */
    fflush(stdout);
    pid_t cp = fork();
    if (cp == 0) {
      freopen("/dev/null", "w", stderr);
      _exit(cudaFreeHost(pin) == cudaErrorIllegalAddress && cudaDeviceSynchronize() == cudaErrorIllegalAddress ? 0 : 1);
    }
    int cs = 0;
    waitpid(cp, &cs, 0);
    CHECK(WIFEXITED(cs) && WEXITSTATUS(cs) == 0, "freeing pinned memory with a copy in flight is a sticky error");
    CHECK(cudaStreamSynchronize(nullptr) == cudaSuccess && *pin == 1234, "after the synchronization it holds the copy");
    CHECK(cudaFreeHost(pin) == cudaSuccess, "cudaFreeHost");
    int local = 0;
    CHECK(cudaFreeHost(&local) == cudaErrorInvalidValue, "cudaFreeHost of other memory is an error");
    (void)cudaGetLastError();
    cudaFree(dv);
  }

  /* GEMM, all four transposes, with padded leading dimensions */
  cublasHandle_t hb;
  CHECK(cublasCreate(&hb) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  const int m = 5, n = 7, k = 3;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1;
      std::vector<float> A((size_t)lda * (ta ? m : k)), B((size_t)ldb * (tb ? k : n)), C((size_t)m * n);
      for (size_t i = 0; i < A.size(); i++) A[i] = (float)((i * 7) % 11) - 5;
      for (size_t i = 0; i < B.size(); i++) B[i] = (float)((i * 5) % 13) - 6;
      float *dA, *dB, *dC;
      cudaMalloc((void **)&dA, A.size() * 4);
      cudaMalloc((void **)&dB, B.size() * 4);
      cudaMalloc((void **)&dC, C.size() * 4);
      cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice);
      float one = 1, zero = 0;
      CHECK(cublasSgemm(hb, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one, dA, lda, dB,
                        ldb, &zero, dC, m) == CUBLAS_STATUS_SUCCESS,
            "sgemm ta=%d tb=%d", ta, tb);
      cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost);
      std::vector<float> R = naive(m, n, k, ta, tb, A, lda, B, ldb);
      CHECK(C == R, "sgemm ta=%d tb=%d equals the naive product", ta, tb);
      CHECK(cublasSgemm(hb, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one, dA,
                        (ta ? k : m) - 1, dB, ldb, &zero, dC, m) == CUBLAS_STATUS_INVALID_VALUE,
            "lda below the rows of op(A) is rejected");
      cudaFree(dA);
      cudaFree(dB);
      cudaFree(dC);
    }
  /* stream capture and graphs: captured work does not run until cudaGraphLaunch, runs in order at
   * every launch (arguments and gemm scalars as they were at capture), and a call that capture does
   * not allow invalidates it */
  {
    cudaStream_t st;
    cudaStreamCreate(&st);
    cublasSetStream(hb, st);
    int *dc;
    float *g3, *ga;
    CHECK(cudaMalloc((void **)&dc, 64 * sizeof(int)) == cudaSuccess && cudaMalloc((void **)&g3, 4 * sizeof(float)) == cudaSuccess &&
              cudaMalloc((void **)&ga, 4 * sizeof(float)) == cudaSuccess,
          "capture: buffers");
    cudaMemset(dc, 0, 64 * sizeof(int));
    std::vector<float> two(4, 2.0f), got(4);
    cudaMemcpy(ga, two.data(), 4 * sizeof(float), cudaMemcpyHostToDevice);
    float alpha = 1.5f, zero = 0, *one_d; /* g3 = 1.5 * ga: an m=4, n=1, k=1 gemm with B = [1] */
    std::vector<float> onev(1, 1.0f);
    cudaMalloc((void **)&one_d, sizeof(float));
    cudaMemcpy(one_d, onev.data(), sizeof(float), cudaMemcpyHostToDevice);
    cuemu_stats s0, s1;
    cuemu_get_stats(&s0);
    cudaStreamCaptureStatus cs;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    CHECK(cudaStreamIsCapturing(st, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusActive, "capturing");
    LAUNCH(dim3(2), dim3(32), 0, st, k_ids)(dc, 64);
    CHECK(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, 4, 1, 1, &alpha, ga, 4, one_d, 1, &zero, g3, 4) == CUBLAS_STATUS_SUCCESS,
          "captured sgemm");
    alpha = 100.0f; /* read at capture: the graph keeps 1.5 */
    cudaGraph_t gr = nullptr;
    CHECK(cudaStreamEndCapture(st, &gr) == cudaSuccess && gr, "end capture");
    cuemu_get_stats(&s1);
    CHECK(s1.kernels == s0.kernels && s1.gemms == s0.gemms && s1.captured - s0.captured == 2,
          "captured work did not run (kernels %llu gemms %llu captured %llu)", s1.kernels - s0.kernels,
          s1.gemms - s0.gemms, s1.captured - s0.captured);
    cudaGraphExec_t ex = nullptr;
    CHECK(cudaGraphInstantiateWithFlags(&ex, gr, 0) == cudaSuccess && ex, "instantiate");
    cudaGraphDestroy(gr);
    CHECK(cudaGraphLaunch(ex, st) == cudaSuccess && cudaGraphLaunch(ex, st) == cudaSuccess &&
              cudaStreamSynchronize(st) == cudaSuccess,
          "launch twice");
    std::vector<int> hc(64);
    cudaMemcpy(hc.data(), dc, 64 * sizeof(int), cudaMemcpyDeviceToHost);
    cudaMemcpy(got.data(), g3, 4 * sizeof(float), cudaMemcpyDeviceToHost);
    CHECK(hc[0] == 2 * 1 && hc[33] == 2 * (1000 + 1 + 1), "the kernel ran once per launch (%d %d)", hc[0], hc[33]);
    CHECK(got[0] == 3.0f && got[3] == 3.0f, "the gemm used alpha as captured (%g)", got[0]);
    cudaGraphExecDestroy(ex);
    /* a synchronous copy during capture fails and invalidates it */
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture 3");
    LAUNCH(dim3(2), dim3(32), 0, st, k_ids)(dc, 64);
    CHECK(cudaMemcpy(hc.data(), dc, 4, cudaMemcpyDeviceToHost) == cudaErrorStreamCaptureUnsupported,
          "cudaMemcpy during capture is refused");
    CHECK(cudaStreamSynchronize(st) == cudaErrorStreamCaptureUnsupported, "synchronizing during capture is refused");
    gr = nullptr;
    CHECK(cudaStreamEndCapture(st, &gr) == cudaErrorStreamCaptureInvalidated && !gr, "the capture is invalidated");
    (void)cudaGetLastError();
    cudaMemcpy(hc.data(), dc, 64 * sizeof(int), cudaMemcpyDeviceToHost);
    CHECK(hc[0] == 2, "nothing of the invalidated capture ran (%d)", hc[0]);
    CHECK(cudaStreamIsCapturing(st, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone, "not capturing");
    cudaFree(dc);
    cudaFree(g3);
    cudaFree(ga);
    cudaFree(one_d);
    cudaStreamDestroy(st);
  }
  cublasDestroy(hb);
  printf("test_cuemu: %d checks, %d failures\n", g_checks, g_fail);
  return g_fail ? 1 : 0;
}
