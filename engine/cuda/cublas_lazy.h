/* engine/cuda/cublas_lazy.h - cuBLAS is opened with dlopen on first use (CUDA=1
 * builds; engine/cuda/cublas_lazy.c). */
#ifndef LOOM_CUBLAS_LAZY_H
#define LOOM_CUBLAS_LAZY_H
/* NULL once cuBLAS is loaded (loading it now if need be), else why it could not be. */
const char *loom__cublas_load_error(void);
#endif
