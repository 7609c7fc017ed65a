/* base/opts.c - taking a caller's options struct (see base.h). */
#include <stdio.h>
#include "base/base.h"

loom_code loom__opts_take(void *dst, size_t size, const void *src, const char *who, const char *type,
                          loom_status *st) {
  if (!src) return LOOM_OK;
  uint32_t n;
  memcpy(&n, src, sizeof n);
  const char *sep = who && who[0] ? ": " : "";
  if (!who) who = "";
  if (n == 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s%s%s: struct_size is 0: initialise it with %s_default()",
                           who, sep, type, type);
  if (n > size)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s%s%s: struct_size is %u, larger than this library's %zu: the program was built "
                           "against a newer loom header (or the struct was not made by %s_default())",
                           who, sep, type, (unsigned)n, size, type);
  if (n < sizeof n)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s%s%s: struct_size is %u: initialise it with %s_default()", who, sep, type, (unsigned)n,
                           type);
  loom__opts_merge(dst, size, src);
  return LOOM_OK;
}
