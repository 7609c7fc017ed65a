/* loom_tensor.h - dense host tensors.
 *
 * A loom_tensor owns (or wraps) a contiguous row-major buffer. Tensors are not
 * thread-safe for concurrent mutation; concurrent reads are fine.
 */
#ifndef LOOM_TENSOR_H
#define LOOM_TENSOR_H

#include "loom_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_MAX_DIMS 8

/* Append-only. */
typedef enum loom_dtype {
  LOOM_DTYPE_INVALID = 0,
  LOOM_F32 = 1,
  LOOM_F64 = 2,
  LOOM_I32 = 3,
  LOOM_I64 = 4,
  LOOM_U8 = 5,
  LOOM_BOOL = 6, /* one byte per element, 0 or 1 */
  LOOM_STRING = 7,
  LOOM_DTYPE_COUNT
} loom_dtype;

/* Bytes per element (0 for STRING and INVALID). */
LOOM_API size_t loom_dtype_size(loom_dtype dt);
/* "float32", "int64", ... ("invalid" out of range). Static string. */
LOOM_API const char *loom_dtype_name(loom_dtype dt);

typedef struct loom_tensor loom_tensor;

/* New runtime-owned, zero-filled, 64-byte aligned tensor. dims may be NULL
 * when ndim == 0 (a scalar). Dims must be >= 0. Caller frees with
 * loom_tensor_free. */
LOOM_API loom_tensor *loom_tensor_new(loom_dtype dt, int ndim, const int64_t *dims, loom_status *st);

/* Wraps caller memory without copying. `nbytes` must equal numel*dtype size.
 * loom calls dealloc(data, nbytes, arg) when the tensor is freed (dealloc may
 * be NULL: the caller keeps ownership and must keep the buffer alive until the
 * tensor is freed). Not allowed for STRING. Caller frees with loom_tensor_free
 * (NULL on failure; dealloc is then not called). */
typedef void (*loom_deallocator)(void *data, size_t nbytes, void *arg);
LOOM_API loom_tensor *loom_tensor_wrap(loom_dtype dt, int ndim, const int64_t *dims, void *data, size_t nbytes,
                                       loom_deallocator dealloc, void *arg, loom_status *st);

/* Convenience: a new tensor holding a copy of `data` (numel elements of dt).
 * Caller frees with loom_tensor_free (NULL on failure). */
LOOM_API loom_tensor *loom_tensor_from_data(loom_dtype dt, int ndim, const int64_t *dims, const void *data,
                                            loom_status *st);
/* New scalar (NULL when out of memory); caller frees with loom_tensor_free. */
LOOM_API loom_tensor *loom_tensor_scalar_f32(float v);
/* New scalar (NULL when out of memory); caller frees with loom_tensor_free. */
LOOM_API loom_tensor *loom_tensor_scalar_i32(int32_t v);
/* New scalar (NULL when out of memory); caller frees with loom_tensor_free. */
LOOM_API loom_tensor *loom_tensor_scalar_i64(int64_t v);
/* Deep copy (strings included); caller frees with loom_tensor_free. */
LOOM_API loom_tensor *loom_tensor_copy(const loom_tensor *t, loom_status *st);

LOOM_API void loom_tensor_free(loom_tensor *t);

LOOM_API loom_dtype loom_tensor_dtype(const loom_tensor *t);
LOOM_API int loom_tensor_ndim(const loom_tensor *t);
/* i in [0, ndim); -1 when out of range. */
LOOM_API int64_t loom_tensor_dim(const loom_tensor *t, int i);
/* Owned by t: ndim dims; valid until the tensor is freed (a reshape
 * changes the values in place). */
LOOM_API const int64_t *loom_tensor_dims(const loom_tensor *t);
LOOM_API int64_t loom_tensor_numel(const loom_tensor *t);
LOOM_API size_t loom_tensor_nbytes(const loom_tensor *t);
/* Owned by t: the elements (NULL for STRING tensors); valid until the tensor
 * is freed (reshapes and in-place reuse by runs keep the buffer). */
LOOM_API void *loom_tensor_data(loom_tensor *t);
LOOM_API const void *loom_tensor_data_const(const loom_tensor *t);
/* Changes the dims in place; the element count must not change. */
LOOM_API loom_code loom_tensor_reshape(loom_tensor *t, int ndim, const int64_t *dims, loom_status *st);

/* STRING tensors: element i (flat index) is copied in / borrowed out. */
LOOM_API loom_code loom_tensor_set_string(loom_tensor *t, int64_t i, const char *s, size_t len, loom_status *st);
/* Borrowed; valid until the element is set again or the tensor freed. NULL on a bad index. */
LOOM_API const char *loom_tensor_get_string(const loom_tensor *t, int64_t i, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
