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
/* Splits [0,n) into at most nthreads contiguous chunks of >= grain items and
 * runs fn on them, the caller taking part. Serial when pool is NULL or n < 2*grain. */
void loom__parallel_for(loom_pool *pool, int64_t n, int64_t grain, loom_range_fn fn, void *arg);
int loom__pool_threads(const loom_pool *pool);
/* Sets flush-to-zero and denormals-are-zero in the calling thread. */
void loom__set_ftz(void);

#ifdef __cplusplus
}
#endif

#endif
