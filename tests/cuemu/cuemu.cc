/* tests/cuemu/cuemu.cc - a host emulator of the CUDA runtime and the cuBLAS
 * calls loom makes, so that the CUDA backend (engine/cuda/runtime.c) and its
 * kernels (the kernels/cuda .cu files, compiled as C++) run on a machine without a GPU:
 * `make CUDA=emu` builds loom against it and `make test-cuemu` runs the
 * GPU-vs-CPU parity programs (tests/gpu/) under it.
 *
 * Device memory is one reserved region of the address space, kept PROT_NONE
 * except while a kernel, copy, memset or GEMM runs, so host code that reads
 * or writes a device pointer faults at once (the handler names the address).
 * cudaMalloc fills new blocks with 0xFF bytes (NaN for floats, -1 for
 * integers) so kernels that assume zeroed memory show it. Copies and
 * memsets are checked against the bounds of the allocation they touch, and
 * kernels' pointer arguments must be device memory. Everything is
 * synchronous: a stream is a name, an event a no-op, and one lock orders all
 * calls from all host threads.
 *
 * Environment: CUEMU_DEVICES (devices reported, default 1), CUEMU_MEM_BYTES
 * (device memory, default 8 GiB), CUEMU_PROTECT=0 (leave device memory
 * readable by the host, for debugging), CUEMU_ORDER=reverse (run the
 * threads of a block last to first between barriers, and blocks last to
 * first: a kernel whose result depends on the order in which threads run
 * without a barrier between them, i.e. a race, gives another answer). */
#define _GNU_SOURCE 1
#include <cblas.h>
#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <functional>
#include <vector>

#include "cuda_runtime.h"
#include "cublas_v2.h"

namespace cuemu {
uint3 thread_idx, block_idx;
dim3 block_dim, grid_dim;
} // namespace cuemu

namespace {

std::recursive_mutex g_lock;
thread_local cudaError_t t_last = cudaSuccess;
cudaError_t g_sticky = cudaSuccess;
unsigned long long g_launches;
thread_local int t_device; /* cudaSetDevice of this thread */
cuemu_stats g_stats; /* by kind, for tests that count API calls */

cudaError_t fail(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudaError_t fail(cudaError_t e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cuemu: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  t_last = e;
  return e;
}

int env_int(const char *name, long long dflt, long long *out) {
  const char *v = getenv(name);
  *out = v && *v ? atoll(v) : dflt;
  return 0;
}

/* ---------------------------------------------------------------- memory */
char *g_arena;
size_t g_cap, g_high; /* reserved bytes; end of the highest allocation (page-rounded) */
std::map<size_t, size_t> g_free, g_used; /* offset -> size (g_used: the size asked for) */
int g_protect = 1, g_open;
struct sigaction g_old_segv;

void segv_handler(int sig, siginfo_t *si, void *uc) {
  char *a = (char *)si->si_addr;
  if (g_arena && a >= g_arena && a < g_arena + g_cap) {
    char msg[160];
    int n = snprintf(msg, sizeof msg,
                     "cuemu: host code touched device memory at %p (offset %zu of the device arena); backtrace:\n",
                     (void *)a, (size_t)(a - g_arena));
    if (write(2, msg, (size_t)n) < 0) {
    }
    void *bt[32];
    int nb = backtrace(bt, 32);
    backtrace_symbols_fd(bt, nb, 2);
  }
  sigaction(SIGSEGV, &g_old_segv, NULL);
  (void)sig;
  (void)uc;
}

void arena_init() {
  if (g_arena) return;
  long long cap, prot;
  env_int("CUEMU_MEM_BYTES", 8LL << 30, &cap);
  env_int("CUEMU_PROTECT", 1, &prot);
  g_protect = prot != 0;
  if (cap < 4096) cap = 4096;
  g_cap = ((size_t)cap + 4095) & ~(size_t)4095;
  void *p = mmap(NULL, g_cap, g_protect ? PROT_NONE : PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    fprintf(stderr, "cuemu: cannot reserve %zu bytes of device memory\n", g_cap);
    g_cap = 0;
    return;
  }
  g_arena = (char *)p;
  g_free[0] = g_cap;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = segv_handler;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, &g_old_segv);
}

/* Device memory readable and writable by the host for the duration of a call. */
struct open_arena {
  open_arena() {
    if (g_protect && g_open++ == 0 && g_high) mprotect(g_arena, g_high, PROT_READ | PROT_WRITE);
  }
  ~open_arena() {
    if (g_protect && --g_open == 0 && g_high) mprotect(g_arena, g_high, PROT_NONE);
  }
};

bool in_arena(const void *p) {
  return g_arena && (const char *)p >= g_arena && (const char *)p < g_arena + g_cap;
}

/* The allocation holding [p, p + n), or -1. */
long long alloc_of(const void *p, size_t n) {
  if (!in_arena(p)) return -1;
  size_t off = (size_t)((const char *)p - g_arena);
  auto it = g_used.upper_bound(off);
  if (it == g_used.begin()) return -1;
  --it;
  if (off + n > it->first + it->second) return -1;
  return (long long)it->first;
}

/* The device each allocation was made on (the thread's device at cudaMalloc;
 * CUEMU_DEVICES > 1 emulates several). */
std::map<size_t, int> g_dev_of;
/* Whether p lies in a live allocation of the calling thread's current
 * device: what a kernel or cuBLAS call may touch (no peer access). */
bool on_current_device(const void *p) {
  long long a = alloc_of(p, 0);
  auto it = a >= 0 ? g_dev_of.find((size_t)a) : g_dev_of.end();
  return it != g_dev_of.end() && it->second == t_device;
}

/* ------------------------------------------------------------------ fibers */
/* A switch between fibers. On x86-64 a few instructions (callee-saved
 * registers, MXCSR and the x87 control word; no signal mask, unlike
 * swapcontext, whose system call per switch made emulation 3x slower);
 * elsewhere, and under AddressSanitizer, ucontext. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(CUEMU_UCONTEXT)
#define CUEMU_FAST_SWITCH 1
extern "C" void cuemu_swap(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl cuemu_swap\n"
        ".type cuemu_swap,@function\n"
        "cuemu_swap:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size cuemu_swap, .-cuemu_swap\n");
#endif

enum { F_RUN, F_WAIT_BLOCK, F_WAIT_WARP, F_DONE };
struct fiber {
#ifdef CUEMU_FAST_SWITCH
  void *sp;
#else
  ucontext_t uc;
#endif
  int state;
  uint3 t;
  unsigned lin;
};
const size_t STACK = 256 << 10;
#ifdef CUEMU_FAST_SWITCH
void *g_sched_sp;
#else
ucontext_t g_sched;
#endif
std::vector<fiber> g_fib;
std::vector<char *> g_stacks;
fiber *g_cur;
cuemu::body_fn g_body;
void *g_arg;
unsigned long long g_slots[32][32];
unsigned g_nthreads;
int g_reverse; /* CUEMU_ORDER=reverse, read at each launch */

void fiber_entry() {
#if defined(__x86_64__)
  /* no flush-to-zero / denormals-are-zero in kernels: a GPU keeps denormals */
  unsigned mx;
  __asm__ volatile("stmxcsr %0" : "=m"(mx));
  mx &= ~0x8040u;
  __asm__ volatile("ldmxcsr %0" : : "m"(mx));
#endif
  g_body(g_arg);
  g_cur->state = F_DONE;
#ifdef CUEMU_FAST_SWITCH
  void *dead;
  cuemu_swap(&dead, g_sched_sp); /* never resumed */
  abort();
#endif
}

void fiber_init(fiber &f, char *stack) {
#ifdef CUEMU_FAST_SWITCH
  /* the frame cuemu_swap pops: MXCSR/x87 word, r15..rbp, then it returns into fiber_entry */
  uintptr_t top = ((uintptr_t)stack + STACK) & ~(uintptr_t)15;
  uint64_t *sp = (uint64_t *)(top - 72);
  uint32_t mx;
  uint16_t cw;
  __asm__ volatile("stmxcsr %0" : "=m"(mx));
  __asm__ volatile("fnstcw %0" : "=m"(cw));
  sp[0] = (uint64_t)mx | ((uint64_t)cw << 32);
  for (int i = 1; i <= 6; i++) sp[i] = 0;
  sp[7] = (uint64_t)(uintptr_t)&fiber_entry;
  sp[8] = 0;
  f.sp = sp;
#else
  getcontext(&f.uc);
  f.uc.uc_stack.ss_sp = stack;
  f.uc.uc_stack.ss_size = STACK;
  f.uc.uc_link = &g_sched;
  makecontext(&f.uc, fiber_entry, 0);
#endif
}

void switch_to(fiber &f) {
#ifdef CUEMU_FAST_SWITCH
  cuemu_swap(&g_sched_sp, f.sp);
#else
  swapcontext(&g_sched, &f.uc);
#endif
}

void yield_as(int state) {
  fiber *f = g_cur;
  f->state = state;
#ifdef CUEMU_FAST_SWITCH
  cuemu_swap(&f->sp, g_sched_sp);
#else
  swapcontext(&f->uc, &g_sched);
#endif
}

/* Runs one block; false on a barrier deadlock (threads waiting at different barriers). */
bool run_block(unsigned nthreads) {
  dim3 b = cuemu::block_dim;
  for (unsigned i = 0; i < nthreads; i++) {
    fiber &f = g_fib[i];
    f.lin = i;
    f.t.x = i % b.x;
    f.t.y = (i / b.x) % b.y;
    f.t.z = i / (b.x * b.y);
    f.state = F_RUN;
    fiber_init(f, g_stacks[i]);
  }
  unsigned nwarps = (nthreads + 31) / 32;
  for (;;) {
    for (unsigned k = 0; k < nthreads; k++) {
      fiber &f = g_fib[g_reverse ? nthreads - 1 - k : k];
      if (f.state != F_RUN) continue;
      g_cur = &f;
      cuemu::thread_idx = f.t;
      switch_to(f);
    }
    unsigned live = 0, at_block = 0;
    bool released = false;
    for (unsigned w = 0; w < nwarps; w++) {
      unsigned wl = 0, ww = 0;
      for (unsigned i = w * 32; i < nthreads && i < w * 32 + 32; i++) {
        int s = g_fib[i].state;
        if (s == F_DONE) continue;
        wl++;
        live++;
        if (s == F_WAIT_WARP) ww++;
        if (s == F_WAIT_BLOCK) at_block++;
      }
      if (wl && ww == wl) {
        for (unsigned i = w * 32; i < nthreads && i < w * 32 + 32; i++) g_fib[i].state = F_RUN;
        released = true;
      }
    }
    if (!live) return true;
    if (released) continue;
    if (at_block == live) {
      for (unsigned i = 0; i < nthreads; i++)
        if (g_fib[i].state == F_WAIT_BLOCK) g_fib[i].state = F_RUN;
      continue;
    }
    return false;
  }
}

} // namespace

namespace cuemu {
void sync_block() { yield_as(F_WAIT_BLOCK); }
void sync_warp() { yield_as(F_WAIT_WARP); }
unsigned lane() { return g_cur->lin & 31; }
unsigned warp_lanes() {
  unsigned base = g_cur->lin & ~31u;
  return g_nthreads - base < 32 ? g_nthreads - base : 32;
}
unsigned long long *warp_slots() { return g_slots[g_cur->lin >> 5]; }

void bad_pointer_arg(int index, const void *p) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  fail(cudaErrorIllegalAddress, "kernel argument %d is %p, not live memory of the current device (%d)", index, p,
       t_device);
  g_sticky = cudaErrorIllegalAddress;
}

/* ---- stream capture: the calling thread's work is recorded while t_capture is set ---- */
thread_local std::vector<std::function<void()>> *t_capture;
thread_local bool t_capture_bad; /* an unsupported call invalidated the capture */
bool capturing() { return t_capture != nullptr; }
void record(std::function<void()> work) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  g_stats.captured++;
  t_capture->push_back(std::move(work));
}

void run(dim3 g, dim3 b, size_t shmem, cudaStream_t s, body_fn body, void *arg) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  (void)s;
  g_launches++;
  g_stats.kernels++;
  if (g_sticky) return;
  unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
  if (!g.x || !g.y || !g.z || !nt || nt > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64 || g.y > 65535 ||
      g.z > 65535 || g.x > 0x7fffffffu) {
    fail(cudaErrorInvalidConfiguration, "invalid launch configuration: grid (%u,%u,%u) block (%u,%u,%u)", g.x, g.y,
         g.z, b.x, b.y, b.z);
    return;
  }
  if (shmem > 48 * 1024) {
    fail(cudaErrorInvalidValue, "launch asks for %zu bytes of dynamic shared memory", shmem);
    return;
  }
  if (g_fib.size() < nt) g_fib.resize(nt);
  static struct stacks_owner {
    ~stacks_owner() {
      for (char *p : g_stacks) free(p);
    }
  } owner; /* frees the fiber stacks at exit (leak checkers) */
  while (g_stacks.size() < nt) g_stacks.push_back((char *)malloc(STACK));
  open_arena open;
  g_body = body;
  g_arg = arg;
  g_nthreads = (unsigned)nt;
  block_dim = b;
  grid_dim = g;
  const char *order = getenv("CUEMU_ORDER");
  g_reverse = order && !strcmp(order, "reverse");
  for (unsigned z = 0; z < g.z; z++)
    for (unsigned y = 0; y < g.y; y++)
      for (unsigned x0 = 0; x0 < g.x; x0++) {
        unsigned x = g_reverse ? g.x - 1 - x0 : x0;
        block_idx.x = x;
        block_idx.y = y;
        block_idx.z = z;
        if (!run_block((unsigned)nt)) {
          fail(cudaErrorLaunchFailure, "threads of block (%u,%u,%u) wait at different barriers (deadlock)", x, y, z);
          g_sticky = cudaErrorLaunchFailure;
          return;
        }
      }
}
} // namespace cuemu

/* ------------------------------------------------------------ runtime API */
/* A call that is not allowed while this thread captures: fails it and invalidates the capture. */
static bool capture_forbids(const char *what) {
  if (!cuemu::t_capture) return false;
  cuemu::t_capture_bad = true;
  fail(cudaErrorStreamCaptureUnsupported, "%s while the stream is being captured", what);
  return true;
}

extern "C" {

unsigned long long cuemu_launch_count(void) { return g_launches; }
void cuemu_get_stats(cuemu_stats *out) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  *out = g_stats;
}
int cuemu_is_device_ptr(const void *p) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  return on_current_device(p);
}

static int device_count() {
  long long n;
  env_int("CUEMU_DEVICES", 1, &n);
  return n < 0 ? 0 : (int)n;
}

cudaError_t cudaGetDeviceCount(int *count) {
  int n = device_count();
  *count = n;
  return n ? cudaSuccess : (t_last = cudaErrorNoDevice);
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice, "cudaSetDevice(%d)", device);
  t_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  if (capture_forbids("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
  arena_init();
  *ptr = NULL;
  if (!size) return cudaSuccess;
  size_t n = (size + 255) & ~(size_t)255;
  for (auto it = g_free.begin(); it != g_free.end(); ++it) {
    if (it->second < n) continue;
    size_t off = it->first, rest = it->second - n;
    g_free.erase(it);
    if (rest) g_free[off + n] = rest;
    g_used[off] = size;
    g_dev_of[off] = t_device;
    size_t end = (off + n + 4095) & ~(size_t)4095;
    if (end > g_high) {
      if (g_protect && g_open) mprotect(g_arena + g_high, end - g_high, PROT_READ | PROT_WRITE);
      g_high = end;
    }
    *ptr = g_arena + off;
    g_stats.mallocs++;
    open_arena open;
    memset(*ptr, 0xff, n); /* garbage, as cudaMalloc gives: NaN floats, -1 integers */
    return cudaSuccess;
  }
  t_last = cudaErrorMemoryAllocation;
  return cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *ptr) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  if (capture_forbids("cudaFree")) return cudaErrorStreamCaptureUnsupported;
  if (!ptr) return cudaSuccess;
  size_t off = in_arena(ptr) ? (size_t)((char *)ptr - g_arena) : 0;
  auto it = in_arena(ptr) ? g_used.find(off) : g_used.end();
  if (it == g_used.end()) return fail(cudaErrorInvalidDevicePointer, "cudaFree(%p): not an allocation", ptr);
  size_t n = (it->second + 255) & ~(size_t)255;
  g_used.erase(it);
  g_dev_of.erase(off);
  g_stats.frees++;
  auto nx = g_free.lower_bound(off);
  if (nx != g_free.end() && off + n == nx->first) {
    n += nx->second;
    g_free.erase(nx);
  }
  auto pv = g_free.lower_bound(off);
  if (pv != g_free.begin()) {
    --pv;
    if (pv->first + pv->second == off) {
      pv->second += n;
      return cudaSuccess;
    }
  }
  g_free[off] = n;
  return cudaSuccess;
}

/* Page-locked host memory, and device-to-host cudaMemcpyAsync into it, which
 * is truly asynchronous on a GPU: here the bytes are taken in stream order
 * (kernels have already run) but land only at the next synchronization, and
 * the destination reads as garbage (0xAB) until then, so host code that reads
 * pinned memory before synchronizing sees wrong values. Freeing pinned memory
 * with such a copy still pending is reported and makes the error sticky. */
static std::map<char *, size_t> g_pinned;
struct pending_copy {
  char *dst;
  std::vector<char> bytes;
};
static std::vector<pending_copy> g_pending;
static bool in_pinned(const void *p, size_t n) {
  auto it = g_pinned.upper_bound((char *)p);
  if (it == g_pinned.begin()) return false;
  --it;
  return (char *)p >= it->first && (char *)p + n <= it->first + it->second;
}
static void land_pending() {
  for (auto &q : g_pending) memcpy(q.dst, q.bytes.data(), q.bytes.size());
  g_pending.clear();
}
static cudaError_t synchronize() {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  if (capture_forbids("a synchronization")) return cudaErrorStreamCaptureUnsupported;
  g_stats.syncs++;
  if (!g_sticky) land_pending();
  return g_sticky;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  size_t n = size ? size : 1;
  *ptr = malloc(n);
  if (!*ptr) return t_last = cudaErrorMemoryAllocation;
  memset(*ptr, 0xab, n);
  g_pinned[(char *)*ptr] = n;
  g_stats.host_allocs++;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void *ptr) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  if (!ptr) return cudaSuccess;
  auto it = g_pinned.find((char *)ptr);
  if (it == g_pinned.end()) return fail(cudaErrorInvalidValue, "cudaFreeHost(%p): not page-locked memory from cudaMallocHost", ptr);
  for (auto &q : g_pending)
    if (q.dst >= it->first && q.dst < it->first + it->second) {
      fail(cudaErrorIllegalAddress, "cudaFreeHost(%p) while a copy into it is still in flight", ptr);
      g_sticky = cudaErrorIllegalAddress;
      return g_sticky;
    }
  g_pinned.erase(it);
  g_stats.host_frees++;
  free(ptr);
  return cudaSuccess;
}

static cudaError_t copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  if (g_sticky) return g_sticky;
  if (!n) return cudaSuccess;
  bool dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault) {
    dd = in_arena(dst);
    sd = in_arena(src);
  } else if (kind == cudaMemcpyHostToHost) {
    dd = sd = false;
  }
  if (!dst || !src) return fail(cudaErrorInvalidValue, "memcpy of %zu bytes with a NULL pointer", n);
  if (dd ? alloc_of(dst, n) < 0 : in_arena(dst))
    return fail(cudaErrorInvalidValue, "memcpy (kind %d) of %zu bytes: destination %p is %s", (int)kind, n, dst,
                dd ? "not inside one device allocation" : "device memory");
  if (sd ? alloc_of(src, n) < 0 : in_arena(src))
    return fail(cudaErrorInvalidValue, "memcpy (kind %d) of %zu bytes: source %p is %s", (int)kind, n, src,
                sd ? "not inside one device allocation" : "device memory");
  g_launches++;
  if (dd && sd) {
    g_stats.d2d++;
    g_stats.d2d_bytes += n;
  } else if (dd) {
    g_stats.h2d++;
    g_stats.h2d_bytes += n;
  } else if (sd) {
    g_stats.d2h++;
    g_stats.d2h_bytes += n;
  }
  open_arena open;
  memmove(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
  if (capture_forbids("cudaMemcpy")) return cudaErrorStreamCaptureUnsupported;
  return copy(dst, src, n, kind);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  if (cuemu::capturing()) { /* a memcpy node: reads src when the graph runs */
    cuemu::record([=]() { cudaMemcpyAsync(dst, src, n, kind, s); });
    return cudaSuccess;
  }
  std::lock_guard<std::recursive_mutex> l(g_lock);
  if (n && dst && kind == cudaMemcpyDeviceToHost && in_pinned(dst, n)) { /* lands at the next synchronization */
    pending_copy q;
    q.dst = (char *)dst;
    q.bytes.resize(n);
    cudaError_t e = copy(q.bytes.data(), src, n, kind);
    if (e) return e;
    memset(dst, 0xab, n);
    g_pending.push_back(std::move(q));
    return cudaSuccess;
  }
  return copy(dst, src, n, kind);
}
cudaError_t cudaMemset(void *dst, int value, size_t n) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  if (capture_forbids("cudaMemset")) return cudaErrorStreamCaptureUnsupported;
  if (g_sticky) return g_sticky;
  if (!n) return cudaSuccess;
  if (alloc_of(dst, n) < 0)
    return fail(cudaErrorInvalidValue, "memset of %zu bytes at %p: not inside one device allocation", n, dst);
  g_launches++;
  g_stats.memsets++;
  open_arena open;
  memset(dst, value, n);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s) {
  (void)s;
  if (cuemu::capturing()) {
    cuemu::record([=]() { cudaMemset(dst, value, n); });
    return cudaSuccess;
  }
  return cudaMemset(dst, value, n);
}

static char g_stream_tag, g_event_tag;
cudaError_t cudaStreamCreate(cudaStream_t *s) {
  *s = (cudaStream_t)(void *)&g_stream_tag;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  (void)flags;
  return cudaStreamCreate(s);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  (void)s;
  return synchronize();
}
cudaError_t cudaDeviceSynchronize(void) { return synchronize(); }
/* work runs as it is queued: a stream is never busy */
cudaError_t cudaStreamQuery(cudaStream_t s) {
  (void)s;
  return synchronize();
}
cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last ? t_last : g_sticky;
  t_last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return t_last ? t_last : g_sticky; }

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorInitializationError: return "cudaErrorInitializationError";
  case cudaErrorNotReady: return "cudaErrorNotReady";
  case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
  case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
  case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
  case cudaErrorNoDevice: return "cudaErrorNoDevice";
  case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
  case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
  case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
  case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
  case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
  case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
  }
  return "cudaErrorUnknown";
}
const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
  case cudaErrorLaunchFailure: return "unspecified launch failure";
  case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
  default: return "emulated CUDA error";
  }
}

cudaError_t cudaEventCreate(cudaEvent_t *ev) {
  *ev = (cudaEvent_t)(void *)&g_event_tag;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags) {
  (void)flags;
  return cudaEventCreate(ev);
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) {
  (void)ev;
  (void)s;
  return g_sticky;
}
cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
  (void)ev;
  return synchronize();
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  (void)a;
  (void)b;
  *ms = 0;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  (void)ev;
  return cudaSuccess;
}

} /* extern "C" */
struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
extern "C" {
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  (void)s;
  (void)mode;
  if (cuemu::t_capture) return fail(cudaErrorInvalidValue, "cudaStreamBeginCapture: this thread is capturing already");
  cuemu::t_capture = new std::vector<std::function<void()>>();
  cuemu::t_capture_bad = false;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
  (void)s;
  *graph = NULL;
  if (!cuemu::t_capture) return fail(cudaErrorInvalidValue, "cudaStreamEndCapture: the stream is not being captured");
  std::vector<std::function<void()>> *w = cuemu::t_capture;
  cuemu::t_capture = nullptr;
  if (cuemu::t_capture_bad) {
    delete w;
    return t_last = cudaErrorStreamCaptureInvalidated;
  }
  *graph = new CUgraph_st{std::move(*w)};
  delete w;
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status) {
  (void)s;
  *status = !cuemu::t_capture ? cudaStreamCaptureStatusNone
            : cuemu::t_capture_bad ? cudaStreamCaptureStatusInvalidated
                                   : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
  (void)flags;
  if (!graph) return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: no graph");
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  (void)s;
  if (!exec) return fail(cudaErrorInvalidValue, "cudaGraphLaunch: no graph");
  if (cuemu::t_capture) return fail(cudaErrorStreamCaptureUnsupported, "cudaGraphLaunch while capturing");
  {
    std::lock_guard<std::recursive_mutex> l(g_lock);
    if (g_sticky) return g_sticky;
    g_stats.graph_launches++;
  }
  for (auto &w : exec->work) w();
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

} /* extern "C" */

/* ------------------------------------------------------------------ cuBLAS */
struct cublasContext {
  cudaStream_t stream;
  cublasMath_t math;
  int device; /* current at cublasCreate: the handle works on that device only */
};
extern "C" {
cublasStatus_t cublasCreate(cublasHandle_t *h) {
  *h = new cublasContext();
  (*h)->device = t_device;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH) return CUBLAS_STATUS_INVALID_VALUE;
  h->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}
} /* extern "C" */

/* cuBLAS's argument rules for C = alpha op(A) op(B) + beta C (column-major). */
static cublasStatus_t gemm_check(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                 const void *alpha, const void *A, int lda, const void *B, int ldb, const void *beta,
                                 const void *C, int ldc) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  int ra = ta == CUBLAS_OP_N ? m : k, rb = tb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) || ldc < (m > 1 ? m : 1) ||
      (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T)) {
    fail(cudaSuccess, "cublas gemm: invalid value (m=%d n=%d k=%d lda=%d ldb=%d ldc=%d)", m, n, k, lda, ldb, ldc);
    t_last = cudaSuccess;
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!alpha || !beta || in_arena(alpha) || in_arena(beta)) {
    fail(cudaSuccess, "cublas gemm: alpha/beta must be host pointers in the default pointer mode");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (h->device != t_device) {
    fail(cudaSuccess, "cublas gemm: the handle belongs to device %d, device %d is current", h->device, t_device);
    g_sticky = cudaErrorIllegalAddress;
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  if (m && n && ((k && (!on_current_device(A) || !on_current_device(B))) || !on_current_device(C))) {
    fail(cudaSuccess, "cublas gemm: a matrix pointer is not memory of the current device (A %p B %p C %p)", A, B, C);
    g_sticky = cudaErrorIllegalAddress;
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

template <class T> static void scale_c(T *C, int m, int n, int ldc, T beta) {
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) C[(size_t)j * ldc + i] = beta == 0 ? (T)0 : beta * C[(size_t)j * ldc + i];
}
static void gemm1(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  if (!m || !n) return;
  if (!k) return scale_c(C, m, n, ldc, beta);
  cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
              m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
static void gemm1(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, double alpha, const double *A,
                  int lda, const double *B, int ldb, double beta, double *C, int ldc) {
  if (!m || !n) return;
  if (!k) return scale_c(C, m, n, ldc, beta);
  cblas_dgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
              m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
template <class T>
static cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const T *alpha, const T *A, int lda, long long sa, const T *B, int ldb,
                                   long long sb, const T *beta, T *C, int ldc, long long sc, int batch) {
  std::lock_guard<std::recursive_mutex> l(g_lock);
  if (g_sticky) return CUBLAS_STATUS_EXECUTION_FAILED;
  cublasStatus_t r = gemm_check(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  if (r || batch < 0) return r ? r : CUBLAS_STATUS_INVALID_VALUE;
  g_launches++;
  g_stats.gemms++;
  open_arena open;
  for (int b = 0; b < batch; b++)
    gemm1(ta, tb, m, n, k, *alpha, A + b * sa, lda, B + b * sb, ldb, *beta, C + b * sc, ldc);
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" {
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
  if (cuemu::capturing()) { /* alpha and beta are read now, as cuBLAS does in host pointer mode */
    float a = *alpha, b = *beta;
    cuemu::record([=]() { cublasSgemm(h, ta, tb, m, n, k, &a, A, lda, B, ldb, &b, C, ldc); });
    return CUBLAS_STATUS_SUCCESS;
  }
  return gemm_batched(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double *alpha, const double *A, int lda, const double *B, int ldb,
                           const double *beta, double *C, int ldc) {
  if (cuemu::capturing()) { /* alpha and beta are read now, as cuBLAS does in host pointer mode */
    double a = *alpha, b = *beta;
    cuemu::record([=]() { cublasDgemm(h, ta, tb, m, n, k, &a, A, lda, B, ldb, &b, C, ldc); });
    return CUBLAS_STATUS_SUCCESS;
  }
  return gemm_batched(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta, float *C, int ldc,
                                         long long sc, int batch) {
  if (cuemu::capturing()) { /* alpha and beta are read now, as cuBLAS does in host pointer mode */
    float a = *alpha, b = *beta;
    cuemu::record([=]() { cublasSgemmStridedBatched(h, ta, tb, m, n, k, &a, A, lda, sa, B, ldb, sb, &b, C, ldc, sc, batch); });
    return CUBLAS_STATUS_SUCCESS;
  }
  return gemm_batched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double *alpha, const double *A, int lda, long long sa,
                                         const double *B, int ldb, long long sb, const double *beta, double *C,
                                         int ldc, long long sc, int batch) {
  if (cuemu::capturing()) { /* alpha and beta are read now, as cuBLAS does in host pointer mode */
    double a = *alpha, b = *beta;
    cuemu::record([=]() { cublasDgemmStridedBatched(h, ta, tb, m, n, k, &a, A, lda, sa, B, ldb, sb, &b, C, ldc, sc, batch); });
    return CUBLAS_STATUS_SUCCESS;
  }
  return gemm_batched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}

} /* extern "C" */
