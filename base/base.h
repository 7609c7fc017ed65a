/* base/base.h - the base layer's internal header: allocation through the
 * user's hook, logging, and the small helpers on shapes every layer uses.
 * Everything above base/ (engine, kernels, ops, layers, data, summary,
 * estimator, distributed) may include it; base/ itself includes only the
 * public loom_base.h / loom_tensor.h and the C library. Not installed.
 * The rest of base/ has a header each: pool.h (the one thread pool),
 * philox.h, crc32c.h, record_io.h (TFRecord framing), fsutil.h. */
#ifndef LOOM_BASE_H_INTERNAL
#define LOOM_BASE_H_INTERNAL

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "loom/loom_base.h"
#include "loom/loom_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_INTERNAL_API __attribute__((visibility("hidden")))

/* ---- allocation (base/alloc.c): everything goes through the hook ---- */
void *loom__malloc(size_t n);
void *loom__calloc(size_t n, size_t size);
void *loom__realloc(void *p, size_t n);
void loom__free(void *p);
char *loom__strdup(const char *s);
/* 64-byte aligned; free with loom__aligned_free. */
void *loom__aligned_alloc(size_t n);
void loom__aligned_free(void *p);

/* ---- logging (base/alloc.c) ---- */
void loom__log(loom_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- versioned option structs ---- */
/* Options structs start with uint32_t struct_size, which their _default()
 * sets to sizeof. *dst holds the defaults (size bytes); a caller's struct
 * from an older, smaller build overrides only the fields it knows.
 * loom__opts_merge takes struct_size 0 as "this build's size" (for callers
 * that checked already); loom__opts_take is what a public call uses. */
static inline void loom__opts_merge(void *dst, size_t size, const void *src) {
  if (!src) return;
  uint32_t n;
  memcpy(&n, src, sizeof n);
  if (n && n < size) {
    memcpy(dst, src, n);
    uint32_t full = (uint32_t)size;
    memcpy(dst, &full, sizeof full);
  } else {
    memcpy(dst, src, size);
  }
}

/* loom__opts_take (base/opts.c): src (NULL = keep the defaults in dst)
 * merged over dst as loom__opts_merge does, after checking its struct_size:
 * 0 (a struct not made by <type>_default(), e.g. zero-initialised), below 4
 * or above size is INVALID_ARGUMENT "<who>: <type>: struct_size is 0:
 * initialise it with <type>_default()" (who may be NULL or ""). dst is
 * untouched on error. */
loom_code loom__opts_take(void *dst, size_t size, const void *src, const char *who, const char *type,
                          loom_status *st);
#define LOOM__OPTS_TAKE(dst, src, who, T, st) loom__opts_take((dst), sizeof(T), (src), (who), #T, (st))

/* ---- shapes (base/dims.c) ---- */
/* Product of dims (1 for ndim 0; a negative dim gives -1). */
int64_t loom__numel(int ndim, const int64_t *dims);
/* "[2,?,3]" into buf. */
const char *loom__dims_str(char *buf, size_t cap, int ndim, const int64_t *dims);

#ifdef __cplusplus
}
#endif

#endif
