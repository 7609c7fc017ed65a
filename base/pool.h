/* base/pool.h - the one thread pool (base/pool.c): kernels split work over
 * it with loom__parallel_for; BLAS is told to use the same thread count so
 * the two never oversubscribe the cores. Internal. */
#ifndef LOOM_POOL_H
#define LOOM_POOL_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_pool loom_pool;
/* nthreads-1 workers plus the caller; NULL when nthreads < 2 or on OOM. */
loom_pool *loom__pool_new(int nthreads);
void loom__pool_free(loom_pool *p);

typedef void (*loom_range_fn)(void *arg, int64_t begin, int64_t end);
/* Splits [0,n) into contiguous chunks of >= grain items that the caller and
 * the workers claim one at a time, and returns when every chunk has run:
 * one chunk per thread while the workers answer promptly, a few per thread
 * for a while after one was late. fn must accept any sub-range. Serial when
 * pool is NULL or n < 2*grain. */
void loom__parallel_for(loom_pool *pool, int64_t n, int64_t grain, loom_range_fn fn, void *arg);
/* The same with blocks of exactly `block` items (the last may be shorter),
 * however many that makes: for work whose block size matters in itself
 * (a matrix product's blocks sized for the caches). */
void loom__parallel_blocks(loom_pool *pool, int64_t n, int64_t block, loom_range_fn fn, void *arg);
/* How many chunks loom__parallel_for cuts [0,n) into for nthreads threads
 * at most (the fine cut, after a late thread). */
int loom__pool_chunks(int nthreads, int64_t n, int64_t grain);
/* 1 while the pool cuts jobs finely (a thread was late in the last jobs). */
int loom__pool_cuts_finely(const loom_pool *pool);
int loom__pool_threads(const loom_pool *pool);
/* Sets flush-to-zero and denormals-are-zero in the calling thread. */
void loom__set_ftz(void);
/* 1 when flush-to-zero and denormals-are-zero are both on in the calling thread. */
int loom__ftz_on(void);

#ifdef __cplusplus
}
#endif

#endif
