/* The one thread pool: nthreads-1 workers plus the calling thread.
 *
 * A job is cut into chunks that threads claim one at a time from a single
 * atomic word (generation | chunk count | next chunk), so a worker that is
 * descheduled or still asleep simply claims nothing and the others, the
 * caller included, take its share. The caller waits only for chunks that
 * were claimed to finish (a count of finished chunks), never for a worker to
 * check in.
 *
 * How fine a job is cut adapts to the machine: while every worker answers
 * promptly (an idle machine) a job is one chunk per thread, the cheapest
 * split; once a worker is seen late (the caller had to run more than its
 * share of a job that lasted longer than the spin phase, or to wait past the
 * spin phase for a claimed chunk) the next
 * LATE_JOBS jobs are cut CHUNKS_PER_THREAD chunks per thread, so a
 * descheduled thread holds up at most a small part of each.
 *
 * Every wait spins for SPIN_NS, then yields the CPU until YIELD_NS, then
 * sleeps (futex on Linux, a short nanosleep elsewhere) with a bounded
 * timeout and a re-check, so a loaded machine gets its cores back; the
 * phases are measured in time, not iterations, because a pause instruction
 * costs from ~10 to ~140 cycles depending on the CPU. LOOM_POOL_SPIN_US
 * overrides the spin phase (0: yield at once, and every job cut finely,
 * since no worker then answers within the spin). Every worker sets FTZ/DAZ
 * when it starts. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#include <pmmintrin.h>
#endif
#include "base/base.h"
#include "base/pool.h"

void loom__set_ftz(void) {
#if defined(__x86_64__) || defined(__i386__)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#endif
}

int loom__ftz_on(void) {
#if defined(__x86_64__) || defined(__i386__)
  return _MM_GET_FLUSH_ZERO_MODE() == _MM_FLUSH_ZERO_ON && _MM_GET_DENORMALS_ZERO_MODE() == _MM_DENORMALS_ZERO_ON;
#else
  return 0;
#endif
}

/* Chunks per thread once a thread was late (descheduled, waking up): enough
 * that a late thread costs a job a small fraction; and for how many jobs
 * after the last lateness the pool keeps cutting that fine. */
#define CHUNKS_PER_THREAD 4
#define LATE_JOBS 64
/* Wait phases, in time: pause-spins, then sched_yield, then timed sleeps. */
#define SPIN_NS_DEFAULT 50000L
#define YIELD_NS 200000L
#define CLOCK_EVERY 32 /* iterations between clock reads */
#define SLEEP_NS 20000000L /* one sleep's timeout: the condition is re-checked after it */

/* job word: generation in the high 32 bits, chunk count in bits 16..31,
 * next unclaimed chunk in bits 0..15 */
#define JOB(gen, nch) (((uint64_t)(gen) << 32) | ((uint64_t)(nch) << 16))
#define JOB_GEN(w) ((uint32_t)((w) >> 32))
#define JOB_NCH(w) ((int)(((w) >> 16) & 0xffff))
#define JOB_NEXT(w) ((int)((w) & 0xffff))
#define MAX_CHUNKS 0xffff

struct loom_pool {
  int nthreads;
  pthread_t *threads;
  _Alignas(64) atomic_uint_fast64_t job;
  _Alignas(64) atomic_uint done;  /* chunks of the current job finished; the caller sleeps on it */
  atomic_int caller_waiting; /* 1 while the caller sleeps on done */
  _Alignas(64) atomic_uint wake;  /* low 32 bits of the generation; sleeping workers wait on it */
  atomic_int sleepers;
  atomic_int stop;
  /* the current job, written by the caller before it publishes the job word */
  loom_range_fn fn;
  void *arg;
  int64_t n, chunk;
  int late; /* jobs left to cut finely (the caller's own) */
  int64_t spin_ns; /* the spin phase: LOOM_POOL_SPIN_US or SPIN_NS_DEFAULT, read when the pool is made */
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Sleeps until *addr may differ from val (or a timeout; callers re-check). */
static void sleep_on(atomic_uint *addr, unsigned val) {
#if defined(__linux__)
  struct timespec ts = {0, SLEEP_NS};
  syscall(SYS_futex, (void *)addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
#else
  (void)addr;
  (void)val;
  struct timespec ts = {0, 50000};
  nanosleep(&ts, NULL);
#endif
}

static void wake_on(atomic_uint *addr, int count) {
#if defined(__linux__)
  syscall(SYS_futex, (void *)addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
  (void)addr;
  (void)count;
#endif
}

/* A wait for *addr to change from val, one step at a time: spin, then
 * yield, then sleep. The sleep is announced in *announce first (seq_cst),
 * and the waker changes *addr before it reads *announce, so either it sees
 * the announcement and wakes the futex, or the futex sees the new value and
 * does not sleep. */
typedef struct {
  int64_t spin_ns, start;
  int iter;
  int phase; /* 0 spin, 1 yield, 2 sleep */
} waiter;

static void wait_step(waiter *w, atomic_uint *addr, unsigned val, atomic_int *announce) {
  if (w->phase < 2 && (w->iter++ % CLOCK_EVERY) == 0) {
    int64_t t = now_ns();
    if (w->iter == 1) w->start = t;
    int64_t el = t - w->start;
    w->phase = el < w->spin_ns ? 0 : el < w->spin_ns + YIELD_NS ? 1 : 2;
  }
  if (w->phase == 0) {
    cpu_relax();
  } else if (w->phase == 1) {
    sched_yield();
  } else {
    atomic_fetch_add(announce, 1);
    sleep_on(addr, val);
    atomic_fetch_sub(announce, 1);
  }
}

/* Claims the next chunk of generation gen; -1 when none is left. */
static int claim(loom_pool *p, uint32_t gen) {
  uint64_t w = atomic_load_explicit(&p->job, memory_order_acquire);
  for (;;) {
    if (JOB_GEN(w) != gen || JOB_NEXT(w) >= JOB_NCH(w)) return -1;
    if (atomic_compare_exchange_weak_explicit(&p->job, &w, w + 1, memory_order_acq_rel, memory_order_acquire))
      return JOB_NEXT(w);
  }
}

static void run_chunk(loom_pool *p, int c) {
  int64_t b = (int64_t)c * p->chunk, e = b + p->chunk;
  if (e > p->n) e = p->n;
  p->fn(p->arg, b, e);
}

/* Runs chunks of generation gen until none is left; returns how many. */
static int run_chunks(loom_pool *p, uint32_t gen, int nch, int is_caller) {
  int ran = 0, c;
  while ((c = claim(p, gen)) >= 0) {
    run_chunk(p, c);
    ran++;
    if (is_caller) continue; /* the caller adds its count once, at the end */
    if ((int)atomic_fetch_add(&p->done, 1) + 1 == nch && atomic_load(&p->caller_waiting) > 0) wake_on(&p->done, 1);
  }
  return ran;
}

static void *worker(void *arg) {
  loom_pool *p = arg;
  loom__set_ftz();
  uint32_t seen = 0;
  for (;;) {
    uint64_t w;
    waiter wt = {p->spin_ns, 0, 0, 0};
    while (JOB_GEN(w = atomic_load_explicit(&p->job, memory_order_acquire)) == seen && !atomic_load(&p->stop))
      wait_step(&wt, &p->wake, seen, &p->sleepers);
    if (atomic_load(&p->stop)) return NULL;
    seen = JOB_GEN(w);
    run_chunks(p, seen, JOB_NCH(w), 0);
  }
}

loom_pool *loom__pool_new(int nthreads) {
  if (nthreads < 1) nthreads = 1;
  loom_pool *p = loom__aligned_alloc(sizeof *p);
  if (!p) return NULL;
  memset(p, 0, sizeof *p);
  p->nthreads = nthreads;
  const char *e = getenv("LOOM_POOL_SPIN_US");
  char *end = NULL;
  long us = e && *e ? strtol(e, &end, 10) : -1;
  p->spin_ns = us >= 0 && end && *end == 0 && us <= 1000000 ? (int64_t)us * 1000 : SPIN_NS_DEFAULT;
  atomic_init(&p->job, 0);
  atomic_init(&p->done, 0);
  atomic_init(&p->caller_waiting, 0);
  atomic_init(&p->wake, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->stop, 0);
  if (nthreads > 1) {
    p->threads = loom__calloc((size_t)nthreads - 1, sizeof(pthread_t));
    if (!p->threads) {
      loom__aligned_free(p);
      return NULL;
    }
    for (int i = 0; i < nthreads - 1; i++)
      if (pthread_create(&p->threads[i], NULL, worker, p)) {
        p->nthreads = i + 1; /* run with what we got */
        break;
      }
  }
  return p;
}

void loom__pool_free(loom_pool *p) {
  if (!p) return;
  atomic_store(&p->stop, 1);
  atomic_fetch_add(&p->wake, 1);
  wake_on(&p->wake, p->nthreads);
  for (int i = 0; i < p->nthreads - 1; i++) pthread_join(p->threads[i], NULL);
  loom__free(p->threads);
  loom__aligned_free(p);
}

int loom__pool_threads(const loom_pool *p) { return p ? p->nthreads : 1; }

/* The caller's wait for the chunks other threads claimed; 1 when it had to
 * go past the spin phase (a claimed chunk's thread was slow). */
static int wait_done(loom_pool *p, int nch) {
  waiter wt = {p->spin_ns, 0, 0, 0};
  unsigned d;
  while ((int)(d = atomic_load_explicit(&p->done, memory_order_acquire)) < nch)
    wait_step(&wt, &p->done, d, &p->caller_waiting);
  return wt.phase > 0;
}

static int pool_chunks(int nthreads, int64_t n, int64_t grain, int per_thread) {
  if (grain < 1) grain = 1;
  if (nthreads < 2 || n < 2 * grain) return 1;
  int64_t maxchunks = n / grain, want = (int64_t)nthreads * per_thread;
  if (want > MAX_CHUNKS) want = MAX_CHUNKS;
  return (int)(maxchunks < want ? maxchunks : want);
}

int loom__pool_chunks(int nthreads, int64_t n, int64_t grain) {
  return pool_chunks(nthreads, n, grain, CHUNKS_PER_THREAD);
}

int loom__pool_cuts_finely(const loom_pool *p) { return p && p->late > 0; }

/* Runs fn over [0,n) as nch chunks of chunk items (the last may be shorter). */
static void run_job(loom_pool *p, int64_t n, int64_t chunk, int nch, loom_range_fn fn, void *arg) {
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  p->chunk = chunk;
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  uint32_t gen = JOB_GEN(atomic_load_explicit(&p->job, memory_order_relaxed)) + 1;
  atomic_store(&p->job, JOB(gen, nch)); /* seq_cst: publishes the fields above */
  atomic_store(&p->wake, gen);
  if (atomic_load(&p->sleepers) > 0) wake_on(&p->wake, nch - 1); /* spinning workers need no syscall */
  int64_t t0 = now_ns();
  int mine = run_chunks(p, gen, nch, 1);
  /* late: the caller ran clearly more than its share (half a share of slack
   * for the race over the last chunks; none when each thread has one) in a
   * job long enough for a prompt worker to have claimed its part */
  int share = (nch + p->nthreads - 1) / p->nthreads;
  int late = mine > share + share / 2 && now_ns() - t0 > p->spin_ns;
  if (mine < nch) {
    atomic_fetch_add(&p->done, (unsigned)mine);
    late |= wait_done(p, nch);
  }
  if (late)
    p->late = LATE_JOBS;
  else if (p->late > 0)
    p->late--;
}

void loom__parallel_for(loom_pool *p, int64_t n, int64_t grain, loom_range_fn fn, void *arg) {
  if (n <= 0) return;
  int nch = p ? pool_chunks(p->nthreads, n, grain, p->late > 0 ? CHUNKS_PER_THREAD : 1) : 1;
  if (nch < 2) {
    fn(arg, 0, n);
    return;
  }
  int64_t chunk = (n + nch - 1) / nch;
  nch = (int)((n + chunk - 1) / chunk); /* no empty trailing chunk */
  run_job(p, n, chunk, nch, fn, arg);
}

void loom__parallel_blocks(loom_pool *p, int64_t n, int64_t block, loom_range_fn fn, void *arg) {
  if (n <= 0) return;
  if (block < 1) block = 1;
  int64_t nb = (n + block - 1) / block;
  if (!p || p->nthreads < 2 || nb < 2) {
    fn(arg, 0, n);
    return;
  }
  if (nb > MAX_CHUNKS) { /* keep the count in the job word: larger blocks */
    block = (n + MAX_CHUNKS - 1) / MAX_CHUNKS;
    nb = (n + block - 1) / block;
  }
  run_job(p, n, block, (int)nb, fn, arg);
}
