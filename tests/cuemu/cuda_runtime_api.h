/* tests/cuemu/cuda_runtime_api.h - the CUDA runtime API as loom uses it,
 * implemented on the host by tests/cuemu/cuemu.cc (the CUDA emulator used by
 * `make CUDA=emu` / `make test-cuemu`). Names and values follow the CUDA
 * runtime so that engine/cuda/runtime.c compiles unchanged against either.
 * Plain C; the device side (kernels, launches) is in cuda_runtime.h. */
#ifndef CUEMU_CUDA_RUNTIME_API_H
#define CUEMU_CUDA_RUNTIME_API_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorNotReady = 600,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureWrongThread = 908,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719
} cudaError_t;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

typedef enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
} cudaMemcpyKind;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
/* Page-locked host memory; a device-to-host cudaMemcpyAsync into it lands at
 * the next synchronization (tests/cuemu/cuemu.cc). */
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemset(void *dst, int value, size_t n);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaEventCreate(cudaEvent_t *ev);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t ev);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaEventDestroy(cudaEvent_t ev);
/* Stream capture and graphs: between cudaStreamBeginCapture and cudaStreamEndCapture the calling
 * thread's launches, async copies/memsets and gemms are recorded, not run; synchronous calls
 * (cudaMemcpy, cudaMemset, synchronizations, cudaMalloc/cudaFree) fail with
 * cudaErrorStreamCaptureUnsupported and invalidate the capture, as unsafe calls do in CUDA's
 * global/thread-local capture modes. cudaGraphLaunch runs the recorded work in order. */
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
} cudaStreamCaptureMode;
typedef enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
} cudaStreamCaptureStatus;
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

/* ---- emulator only ---- */
/* Kernel launches, copies and memsets so far (tests count them). */
unsigned long long cuemu_launch_count(void);
/* Calls by kind since the process started, with the bytes each kind of copy
 * moved (tests check what a training step moves between host and device). */
typedef struct cuemu_stats {
  unsigned long long kernels, gemms;     /* kernel launches; cuBLAS gemm calls (a batched call counts once) */
  unsigned long long h2d, h2d_bytes;     /* host-to-device copies */
  unsigned long long d2h, d2h_bytes;     /* device-to-host copies */
  unsigned long long d2d, d2d_bytes;     /* device-to-device copies */
  unsigned long long memsets;
  unsigned long long mallocs, frees;     /* cudaMalloc / cudaFree that succeeded */
  unsigned long long host_allocs, host_frees; /* cudaMallocHost / cudaFreeHost */
  unsigned long long syncs;              /* stream, device and event synchronizations */
  unsigned long long graph_launches;     /* cudaGraphLaunch calls (their work counts above as it runs) */
  unsigned long long captured;           /* launches, copies, memsets and gemms recorded by captures */
} cuemu_stats;
void cuemu_get_stats(cuemu_stats *out);
/* Whether p lies in a live allocation of the calling thread's current device. */
int cuemu_is_device_ptr(const void *p);

#ifdef __cplusplus
}
#endif
#endif
