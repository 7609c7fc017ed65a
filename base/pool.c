/* The one thread pool: nthreads-1 workers plus the calling thread. Workers
 * spin briefly on a generation counter, then sleep on a condition variable.
 * Every worker sets FTZ/DAZ when it starts. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
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

struct loom_pool {
  int nthreads;
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_uint_fast64_t gen;
  atomic_int pending;
  atomic_int sleepers; /* workers blocked (or about to block) on cv */
  int stop;
  /* current job */
  loom_range_fn fn;
  void *arg;
  int64_t n, chunk;
  int nchunks;
  atomic_int next;
};

static void run_chunks(loom_pool *p) {
  for (;;) {
    int c = atomic_fetch_add(&p->next, 1);
    if (c >= p->nchunks) break;
    int64_t b = (int64_t)c * p->chunk, e = b + p->chunk;
    if (e > p->n) e = p->n;
    p->fn(p->arg, b, e);
  }
}

static void *worker(void *arg) {
  loom_pool *p = arg;
  loom__set_ftz();
  uint64_t seen = 0;
  for (;;) {
    uint64_t g;
    int spins = 0;
    while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && spins < 500) {
      spins++;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    if (g == seen) {
      /* Announce the sleep before re-checking gen; the submitter bumps gen
       * before reading sleepers (both seq_cst), so one of the two sees the
       * other and no wake-up is lost. */
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while ((g = atomic_load(&p->gen)) == seen && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
    }
    if (p->stop) return NULL;
    seen = g;
    run_chunks(p);
    atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
  }
}

loom_pool *loom__pool_new(int nthreads) {
  if (nthreads < 1) nthreads = 1;
  loom_pool *p = loom__calloc(1, sizeof *p);
  if (!p) return NULL;
  p->nthreads = nthreads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  atomic_init(&p->gen, 0);
  atomic_init(&p->pending, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->next, 0);
  if (nthreads > 1) {
    p->threads = loom__calloc((size_t)nthreads - 1, sizeof(pthread_t));
    if (!p->threads) {
      loom__free(p);
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
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nthreads - 1; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  loom__free(p->threads);
  loom__free(p);
}

int loom__pool_threads(const loom_pool *p) { return p ? p->nthreads : 1; }

void loom__parallel_for(loom_pool *p, int64_t n, int64_t grain, loom_range_fn fn, void *arg) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!p || p->nthreads < 2 || n < 2 * grain) {
    fn(arg, 0, n);
    return;
  }
  int64_t maxchunks = n / grain;
  int nch = (int)(maxchunks < p->nthreads ? maxchunks : p->nthreads);
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  p->chunk = (n + nch - 1) / nch;
  p->nchunks = nch;
  atomic_store(&p->next, 0);
  atomic_store(&p->pending, p->nthreads - 1);
  atomic_fetch_add(&p->gen, 1);
  if (atomic_load(&p->sleepers) > 0) { /* spinning workers need no syscall */
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  run_chunks(p);
  while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}
