/* OpenBLAS thread policy: loom's pool cuts large products into blocks
 * (kernels/cpu/linalg.c) and BLAS runs each block on the calling thread, so
 * BLAS's own threads stay idle and the two never compete for the cores. */
#include <cblas.h>
void loom__cpu_set_blas_threads(int pool_threads);
void loom__cpu_set_blas_threads(int pool_threads) {
  (void)pool_threads;
  openblas_set_num_threads(1);
}
