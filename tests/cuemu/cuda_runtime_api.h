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
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
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
} cuemu_stats;
void cuemu_get_stats(cuemu_stats *out);
/* Whether p lies in a live allocation of the calling thread's current device. */
int cuemu_is_device_ptr(const void *p);

#ifdef __cplusplus
}
#endif
#endif
