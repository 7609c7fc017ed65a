/* base/strarena.h - bump allocator for the bytes of string values that
 * kernels produce (AsString, ragged string ops). A kernel gets one through
 * loom_kctx.strings when its op runs in a session (the session's arena in
 * ordinary runs, engine/session.c; the host pass's, engine/host_pass.c);
 * the bytes live until the arena is reset (the next run) or freed. After a
 * reset the largest chunk is kept, so a steady run allocates nothing. Internal header (not installed). */
#ifndef LOOM_BASE_STRARENA_H
#define LOOM_BASE_STRARENA_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_strarena_chunk loom_strarena_chunk;
typedef struct loom_strarena {
  loom_strarena_chunk *head; /* current chunk first */
  size_t used;               /* bytes used in head */
} loom_strarena;

/* n bytes (n may be 0: a valid, empty pointer); NULL when out of memory.
 * a NULL: NULL. */
char *loom__strarena_alloc(loom_strarena *a, size_t n);
/* Keeps the largest chunk, drops the rest; everything handed out is invalid. */
void loom__strarena_reset(loom_strarena *a);
void loom__strarena_free(loom_strarena *a);

#ifdef __cplusplus
}
#endif
#endif
