/* OpenBLAS thread policy: one budget shared with loom's pool. */
#include <cblas.h>
void loom__cpu_set_blas_threads(int n);
void loom__cpu_set_blas_threads(int n) {
  if (n < 1) n = 1;
  openblas_set_num_threads(n);
}
