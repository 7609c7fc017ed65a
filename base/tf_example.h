/* base/tf_example.h - the tf.Example wire decoder shared by the TFRecord
 * dataset (data/tfrecord.c, tf.io.parse_single_example) and the
 * LoomParseExample graph op (kernels/cpu/parse_example.c,
 * tf.io.parse_example): protobuf-c's generated decoder for
 * proto/example.proto through loom's allocator, plus a by-key view of one
 * feature's list. Internal header (not installed). */
#ifndef LOOM_BASE_TF_EXAMPLE_H
#define LOOM_BASE_TF_EXAMPLE_H
#include <stddef.h>
#include <stdint.h>
#include "loom/loom_tensor.h"

/* The kinds of a tf.train.Feature (the oneof's field numbers). */
enum { LOOM_EXK_NONE = 0, LOOM_EXK_BYTES = 1, LOOM_EXK_FLOAT = 2, LOOM_EXK_INT64 = 3 };

/* One bytes_list entry (same layout as ProtobufCBinaryData; checked). */
typedef struct loom_exbytes {
  size_t len;
  const uint8_t *data;
} loom_exbytes;

/* A view of one feature's list, valid while its example is. */
typedef struct loom_exlist {
  int kind;                 /* LOOM_EXK_* (never NONE for a found feature) */
  size_t n;                 /* number of values */
  const float *f;           /* FLOAT */
  const int64_t *i;         /* INT64 */
  const loom_exbytes *b;    /* BYTES */
} loom_exlist;

typedef struct loom_example loom_example; /* an unpacked tf.Example */

/* Decodes data[0..n) (NULL when the bytes are not a valid tf.Example or on
 * out of memory: *oom tells which; oom may be NULL). Free with
 * loom__tfex_free. */
loom_example *loom__tfex_unpack(const uint8_t *data, size_t n, int *oom);
void loom__tfex_free(loom_example *ex);
/* The feature called key (the last duplicate wins, as TF): 1 and *out
 * filled; 0 when absent or when its list is not set. */
int loom__tfex_find(const loom_example *ex, const char *key, loom_exlist *out);
/* The same for a key of klen bytes (not NUL-terminated). */
int loom__tfex_find_n(const loom_example *ex, const char *key, size_t klen, loom_exlist *out);
/* "float_list", "int64_list", "bytes_list", "no value". */
const char *loom__tfex_kind_name(int kind);
/* The list kind that holds dtype dt (F32 float, I64 int64, else bytes). */
int loom__tfex_dtype_kind(loom_dtype dt);

#endif
