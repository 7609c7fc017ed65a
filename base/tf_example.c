/* base/tf_example.c - see tf_example.h. */
#include <stddef.h>
#include <string.h>
#include "base/base.h"
#include "base/tf_example.h"
#include "proto/example.pb-c.h"

_Static_assert(sizeof(loom_exbytes) == sizeof(ProtobufCBinaryData) &&
                   offsetof(loom_exbytes, len) == offsetof(ProtobufCBinaryData, len) &&
                   offsetof(loom_exbytes, data) == offsetof(ProtobufCBinaryData, data),
               "loom_exbytes must match ProtobufCBinaryData");

typedef struct pb_ctx {
  int oom;
} pb_ctx;
static void *pb_alloc(void *u, size_t n) {
  void *p = loom__malloc(n ? n : 1);
  if (!p && u) ((pb_ctx *)u)->oom = 1;
  return p;
}
static void pb_free(void *u, void *p) {
  (void)u;
  loom__free(p);
}
static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

loom_example *loom__tfex_unpack(const uint8_t *data, size_t n, int *oom) {
  pb_ctx c = {0};
  ProtobufCAllocator a = pb_allocator;
  a.allocator_data = &c;
  Tensorflow__Example *ex = tensorflow__example__unpack(&a, n, data);
  if (oom) *oom = !ex && c.oom;
  return (loom_example *)ex;
}

void loom__tfex_free(loom_example *ex) {
  if (ex) tensorflow__example__free_unpacked((Tensorflow__Example *)ex, &pb_allocator);
}

int loom__tfex_find(const loom_example *e, const char *key, loom_exlist *out) {
  return loom__tfex_find_n(e, key, strlen(key), out);
}

int loom__tfex_find_n(const loom_example *e, const char *key, size_t klen, loom_exlist *out) {
  const Tensorflow__Example *ex = (const Tensorflow__Example *)e;
  const Tensorflow__Feature *f = NULL;
  if (ex && ex->features)
    for (size_t j = 0; j < ex->features->n_feature; j++) {
      const Tensorflow__Features__FeatureEntry *en = ex->features->feature[j];
      if (en->key && strlen(en->key) == klen && !memcmp(en->key, key, klen)) f = en->value;
    }
  memset(out, 0, sizeof *out);
  if (!f) return 0;
  switch (f->kind_case) {
    case TENSORFLOW__FEATURE__KIND_FLOAT_LIST:
      out->kind = LOOM_EXK_FLOAT;
      out->n = f->float_list->n_value;
      out->f = f->float_list->value;
      return 1;
    case TENSORFLOW__FEATURE__KIND_INT64_LIST:
      out->kind = LOOM_EXK_INT64;
      out->n = f->int64_list->n_value;
      out->i = f->int64_list->value;
      return 1;
    case TENSORFLOW__FEATURE__KIND_BYTES_LIST:
      out->kind = LOOM_EXK_BYTES;
      out->n = f->bytes_list->n_value;
      out->b = (const loom_exbytes *)f->bytes_list->value;
      return 1;
    default:
      return 0;
  }
}

const char *loom__tfex_kind_name(int kind) {
  switch (kind) {
    case LOOM_EXK_FLOAT: return "float_list";
    case LOOM_EXK_INT64: return "int64_list";
    case LOOM_EXK_BYTES: return "bytes_list";
    default: return "no value";
  }
}

int loom__tfex_dtype_kind(loom_dtype dt) {
  return dt == LOOM_F32 ? LOOM_EXK_FLOAT : dt == LOOM_I64 ? LOOM_EXK_INT64 : LOOM_EXK_BYTES;
}
