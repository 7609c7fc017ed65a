/* base/dims.c - helpers on shapes shared by every layer. */
#include <stdio.h>
#include "base/base.h"

/* The product of the dims; -1 when it does not fit int64 (a shape taken from a
 * file or a batch of such shapes: never signed overflow). */
int64_t loom__numel(int ndim, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (__builtin_mul_overflow(n, dims[i], &n)) return -1;
  return n;
}

const char *loom__dims_str(char *buf, size_t cap, int ndim, const int64_t *dims) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, cap - k, "[");
  for (int i = 0; i < ndim && k < cap; i++)
    k += dims[i] < 0 ? (size_t)snprintf(buf + k, cap - k, "%s?", i ? "," : "")
                     : (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}
