/* tests/cuemu/cuda_runtime.h - the CUDA emulator's device side: what a .cu
 * file of loom's needs to compile as plain C++ and run its kernels on the
 * host (`make CUDA=emu`, `make test-cuemu`).
 *
 * Kernels are launched with LOOM_LAUNCH (kernels/cuda/common.cuh), which
 * here becomes cuemu::launch(grid, block, shmem, stream, kernel)(args...).
 * A launch checks its configuration like the driver, checks that every
 * pointer argument is device memory, then runs the grid block by block on
 * the calling thread. The threads of a block are fibers (ucontext): a thread
 * runs until it exits or reaches __syncthreads() / a warp shuffle, so block
 * barriers, shared memory and warp shuffles behave as on the GPU. Shared
 * memory is a function-local static (one block runs at a time). Atomics are
 * plain read-modify-writes (no two threads run at once).
 *
 * What it cannot show: data races between threads that a GPU would run at
 * the same time (the fiber order is fixed), timing, and the GPU's own math
 * library's last-bit differences. */
#ifndef CUEMU_CUDA_RUNTIME_H
#define CUEMU_CUDA_RUNTIME_H
#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

namespace cuemu {
extern uint3 thread_idx, block_idx;
extern dim3 block_dim, grid_dim;
/* Barriers of the running fiber: the whole block, or its warp. */
void sync_block();
void sync_warp();
/* The running thread's lane, the live lanes of its warp, and its warp's 32 exchange slots. */
unsigned lane();
unsigned warp_lanes();
unsigned long long *warp_slots();

typedef void (*body_fn)(void *);
/* Runs body(arg) as every thread of the grid; reports configuration errors like the driver. */
void run(dim3 grid, dim3 block, size_t shmem, cudaStream_t s, body_fn body, void *arg);
/* Stream capture (cudaStreamBeginCapture on this thread): work is recorded instead of run. */
bool capturing();
void record(std::function<void()> work);
/* A kernel was passed a non-NULL pointer outside device memory (argument index). */
void bad_pointer_arg(int index, const void *p);

template <class T> inline bool arg_ok(int i, const T &v) {
  if constexpr (std::is_pointer<T>::value) {
    if (v && !cuemu_is_device_ptr((const void *)v)) {
      bad_pointer_arg(i, (const void *)v);
      return false;
    }
  }
  (void)i;
  (void)v;
  return true;
}

template <class... P> struct launcher {
  void (*f)(P...);
  dim3 g, b;
  size_t sh;
  cudaStream_t s;
  /* parameters of the kernel's own types: arguments convert at the call, as with <<< >>> */
  void operator()(typename std::decay<P>::type... a) const {
    typedef std::tuple<typename std::decay<P>::type...> args_t;
    args_t args(a...);
    bool ok = check(args, std::index_sequence_for<P...>{});
    if (!ok) return;
    if (capturing()) { /* recorded with its arguments by value, run by cudaGraphLaunch */
      void (*fn)(P...) = f;
      dim3 g2 = g, b2 = b;
      size_t sh2 = sh;
      cudaStream_t s2 = s;
      record([fn, g2, b2, sh2, s2, args]() mutable {
        struct call {
          void (*f)(P...);
          args_t *args;
          static void go(void *p) {
            call *c = (call *)p;
            std::apply(c->f, *c->args);
          }
        } c{fn, &args};
        run(g2, b2, sh2, s2, &call::go, &c);
      });
      return;
    }
    struct call {
      void (*f)(P...);
      args_t *args;
      static void go(void *p) {
        call *c = (call *)p;
        std::apply(c->f, *c->args);
      }
    } c{f, &args};
    run(g, b, sh, s, &call::go, &c);
  }
  template <class Tup, size_t... I> static bool check(const Tup &t, std::index_sequence<I...>) {
    bool ok = true;
    ((ok = ok && arg_ok((int)I, std::get<I>(t))), ...);
    return ok;
  }
};
template <class... P> inline launcher<P...> launch(dim3 g, dim3 b, size_t sh, cudaStream_t s, void (*f)(P...)) {
  return launcher<P...>{f, g, b, sh, s};
}

template <class T> inline T shfl(T v, unsigned src) {
  static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  unsigned long long bits = 0, *slots = warp_slots();
  memcpy(&bits, &v, sizeof v);
  slots[lane()] = bits;
  sync_warp();
  T r = v;
  if (src < warp_lanes()) memcpy(&r, &slots[src], sizeof r);
  sync_warp();
  return r;
}
} // namespace cuemu

#define threadIdx (cuemu::thread_idx)
#define blockIdx (cuemu::block_idx)
#define blockDim (cuemu::block_dim)
#define gridDim (cuemu::grid_dim)
#define warpSize 32

inline void __syncthreads() { cuemu::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)mask;
  cuemu::sync_warp();
}
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  (void)mask;
  unsigned l = cuemu::lane(), base = l & ~(unsigned)(width - 1);
  return cuemu::shfl(v, base + ((unsigned)src & (unsigned)(width - 1)));
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
  (void)mask;
  unsigned l = cuemu::lane(), end = (l & ~(unsigned)(width - 1)) + (unsigned)width;
  return cuemu::shfl(v, l + d < end ? l + d : l);
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
  (void)mask;
  unsigned l = cuemu::lane(), base = l & ~(unsigned)(width - 1);
  return cuemu::shfl(v, l >= base + d ? l - d : l);
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
  (void)mask;
  unsigned l = cuemu::lane(), t = l ^ (unsigned)m;
  unsigned end = (l & ~(unsigned)(width - 1)) + (unsigned)width;
  return cuemu::shfl(v, t < end ? t : l);
}

/* atomics: no two emulated threads run at once */
template <class T> inline T cuemu_atomic_add(T *p, T v) {
  T old = *p;
  *p = (T)(old + v);
  return old;
}
inline float atomicAdd(float *p, float v) { return cuemu_atomic_add(p, v); }
inline double atomicAdd(double *p, double v) { return cuemu_atomic_add(p, v); }
inline int atomicAdd(int *p, int v) { return (int)cuemu_atomic_add((unsigned *)p, (unsigned)v); }
inline unsigned atomicAdd(unsigned *p, unsigned v) { return cuemu_atomic_add(p, v); }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) { return cuemu_atomic_add(p, v); }
template <class T> inline T atomicCAS(T *p, T cmp, T v) {
  T old = *p;
  if (old == cmp) *p = v;
  return old;
}
template <class T> inline T atomicExch(T *p, T v) {
  T old = *p;
  *p = v;
  return old;
}
template <class T> inline T atomicMax(T *p, T v) {
  T old = *p;
  if (v > old) *p = v;
  return old;
}
template <class T> inline T atomicMin(T *p, T v) {
  T old = *p;
  if (v < old) *p = v;
  return old;
}

/* intrinsics and device math loom's kernels use */
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
template <class T> inline T __ldg(const T *p) { return *p; }
template <class A, class B> inline typename std::common_type<A, B>::type min(A a, B b) {
  typedef typename std::common_type<A, B>::type C;
  return (C)a < (C)b ? (C)a : (C)b;
}
template <class A, class B> inline typename std::common_type<A, B>::type max(A a, B b) {
  typedef typename std::common_type<A, B>::type C;
  return (C)a > (C)b ? (C)a : (C)b;
}
#endif /* __cplusplus */
#endif
