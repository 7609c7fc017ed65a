#ifndef LOOM_POOL_H
#define LOOM_POOL_H
#include "kernels/kernel.h"
loom_pool *loom__pool_new(int nthreads);
void loom__pool_free(loom_pool *p);
#endif
