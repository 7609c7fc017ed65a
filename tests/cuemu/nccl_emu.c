/* tests/cuemu/nccl_emu.c - an emulated NCCL (build/cuemu/libnccl_emu.so) for CUDA=emu builds, where
 * device memory is host memory: the calls of tests/cuemu/nccl.h between the processes of one machine,
 * through a POSIX shared-memory segment that the unique id names. loom opens it in place of libnccl
 * (LOOM_NCCL_LIBRARY), so the strategy's NCCL path runs without a GPU.
 *
 * As NCCL's kernels, an all-reduce runs asynchronously (a thread per call): ncclCommGetAsyncError says
 * ncclInProgress until it completes, so the caller's bounded wait and ncclCommAbort are exercised.
 * The emulator keeps device memory PROT_NONE outside its own calls (tests/cuemu/cuemu.cc), so the
 * device buffers are touched only from the calling thread, each in a window that opens their pages and
 * closes them again: ncclAllReduce copies the input to a host buffer, the thread reduces that, and the
 * ncclCommGetAsyncError that sees it done copies the sum into the output (CUEMU_PROTECT=0: no windows). The
 * sum is taken in rank order (rank 0's values + rank 1's + ...), in chunks of CHUNK floats through each
 * rank's slot of the segment; ranks meet at a barrier (a counter and a generation in the segment) that
 * gives up when the communicator is aborted, or after CUEMU_NCCL_TIMEOUT seconds (default 600). */
#define _GNU_SOURCE
#include "nccl.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <stdint.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define CHUNK (1 << 16)

typedef struct seg {
  _Atomic int count, gen;
} seg;

struct ncclComm {
  int rank, nranks;
  seg *h;
  float *slots; /* nranks x CHUNK */
  size_t bytes;
  char name[NCCL_UNIQUE_ID_BYTES];
  atomic_int aborted, pending;
  _Atomic ncclResult_t async;
  pthread_t th;
  int joinable;
  const float *send;
  float *recv;
  size_t count;
  float *host; /* the all-reduce's values (host memory) */
  size_t host_cap;
  int unload;  /* a completed all-reduce's sum not yet copied to recv */
};

/* Host access to device memory [p, p + n) on (open 1) or off, as the emulator's own calls have it. */
static void window(const void *p, size_t n, int open) {
  const char *e = getenv("CUEMU_PROTECT");
  if (!n || (e && !strcmp(e, "0"))) return;
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, z = ((uintptr_t)p + n + 4095) & ~(uintptr_t)4095;
  mprotect((void *)a, z - a, open ? PROT_READ | PROT_WRITE : PROT_NONE);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double limit_s(void) {
  const char *v = getenv("CUEMU_NCCL_TIMEOUT");
  return v && atof(v) > 0 ? atof(v) : 600.0;
}

/* Every rank arrives; 0, or -1 when aborted or out of time. */
static int barrier(struct ncclComm *c) {
  int g = atomic_load(&c->h->gen);
  if (atomic_fetch_add(&c->h->count, 1) == c->nranks - 1) {
    atomic_store(&c->h->count, 0);
    atomic_fetch_add(&c->h->gen, 1);
    return 0;
  }
  double end = now_s() + limit_s();
  for (long spin = 0; atomic_load(&c->h->gen) == g; spin++) {
    if (atomic_load(&c->aborted) || now_s() > end) return -1;
    if (spin > 1000) {
      struct timespec t = {0, 50000};
      nanosleep(&t, NULL);
    } else {
      sched_yield();
    }
  }
  return 0;
}

EXPORT ncclResult_t ncclGetVersion(int *version) {
  if (!version) return ncclInvalidArgument;
  *version = NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH;
  return ncclSuccess;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id) return ncclInvalidArgument;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "/cuemu-nccl-%d-%lld-%ld", (int)getpid(), (long long)t.tv_sec,
           t.tv_nsec);
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig_t *config) {
  (void)config; /* initialization completes within the call in both modes */
  if (!out || nranks < 1 || rank < 0 || rank >= nranks || id.internal[0] != '/') return ncclInvalidArgument;
  struct ncclComm *c = calloc(1, sizeof *c);
  if (!c) return ncclSystemError;
  c->rank = rank;
  c->nranks = nranks;
  memcpy(c->name, id.internal, sizeof c->name);
  c->name[sizeof c->name - 1] = 0;
  c->bytes = 4096 + (size_t)nranks * CHUNK * sizeof(float);
  int fd = shm_open(c->name, O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)c->bytes) != 0) {
    if (fd >= 0) close(fd);
    free(c);
    return ncclSystemError;
  }
  void *p = mmap(NULL, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    free(c);
    return ncclSystemError;
  }
  c->h = p;
  c->slots = (float *)((char *)p + 4096);
  if (barrier(c)) { /* another rank never joined */
    munmap(p, c->bytes);
    free(c);
    return ncclRemoteError;
  }
  if (rank == 0) shm_unlink(c->name); /* every rank has it mapped */
  atomic_store(&c->async, ncclSuccess);
  *out = c;
  return ncclSuccess;
}

static void *reduce(void *arg) {
  struct ncclComm *c = arg;
  ncclResult_t r = ncclSuccess;
  for (size_t off = 0; off < c->count && r == ncclSuccess; off += CHUNK) {
    size_t m = c->count - off < CHUNK ? c->count - off : CHUNK;
    memcpy(c->slots + (size_t)c->rank * CHUNK, c->host + off, m * sizeof(float));
    if (barrier(c)) {
      r = ncclRemoteError;
      break;
    }
    for (size_t i = 0; i < m; i++) {
      float s = c->slots[i];
      for (int k = 1; k < c->nranks; k++) s += c->slots[(size_t)k * CHUNK + i];
      c->host[off + i] = s;
    }
    if (barrier(c)) r = ncclRemoteError; /* every rank has read the slots before they are written again */
  }
  atomic_store(&c->async, r);
  atomic_store(&c->pending, 0);
  return NULL;
}

/* The previous all-reduce's thread, joined once it ended, and its sum copied to the output. */
static void reap(struct ncclComm *c) {
  if (c->joinable && !atomic_load(&c->pending)) {
    pthread_join(c->th, NULL);
    c->joinable = 0;
    if (atomic_load(&c->async) == ncclSuccess && c->unload) {
      window(c->recv, c->count * sizeof(float), 1);
      memcpy(c->recv, c->host, c->count * sizeof(float));
      window(c->recv, c->count * sizeof(float), 0);
    }
    c->unload = 0;
  }
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *err) {
  if (!c || !err) return ncclInvalidArgument;
  reap(c);
  *err = atomic_load(&c->pending) ? ncclInProgress : atomic_load(&c->async);
  return ncclSuccess;
}

EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                  ncclComm_t c, cudaStream_t stream) {
  (void)stream;
  if (!c || dt != ncclFloat32 || op != ncclSum || (count && (!send || !recv))) return ncclInvalidArgument;
  reap(c);
  if (c->joinable) return ncclInvalidUsage; /* the emulation runs one collective at a time */
  if (atomic_load(&c->async) != ncclSuccess) return atomic_load(&c->async);
  if (count > c->host_cap) {
    float *h = realloc(c->host, count * sizeof(float));
    if (!h) return ncclSystemError;
    c->host = h;
    c->host_cap = count;
  }
  c->send = send;
  c->recv = recv;
  c->count = count;
  window(send, count * sizeof(float), 1);
  memcpy(c->host, send, count * sizeof(float));
  window(send, count * sizeof(float), 0);
  c->unload = 1;
  atomic_store(&c->pending, 1);
  if (pthread_create(&c->th, NULL, reduce, c)) {
    atomic_store(&c->pending, 0);
    return ncclSystemError;
  }
  c->joinable = 1;
  return ncclSuccess;
}

static void release(struct ncclComm *c) {
  if (c->joinable) pthread_join(c->th, NULL);
  free(c->host);
  munmap(c->h, c->bytes);
  free(c);
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclSuccess;
  atomic_store(&c->aborted, 1);
  release(c);
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclSuccess;
  if (c->joinable) { /* real NCCL waits for the communicator's work; bounded by the barrier's limit */
    pthread_join(c->th, NULL);
    c->joinable = 0;
  }
  release(c);
  return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclSystemError: return "unhandled system error (emulated NCCL: shared memory)";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "emulated NCCL error";
  }
}
