/* Host tensors. */
#include <string.h>
#include <stdio.h>
#include "engine/engine_impl.h"

static const size_t dt_sizes[LOOM_DTYPE_COUNT] = {0, 4, 8, 4, 8, 1, 1, 0};
static const char *dt_names[LOOM_DTYPE_COUNT] = {"invalid", "float32", "float64", "int32",
                                                 "int64", "uint8", "bool", "string"};

size_t loom_dtype_size(loom_dtype dt) { return (dt > 0 && dt < LOOM_DTYPE_COUNT) ? dt_sizes[dt] : 0; }
const char *loom_dtype_name(loom_dtype dt) { return (dt > 0 && dt < LOOM_DTYPE_COUNT) ? dt_names[dt] : "invalid"; }

static loom_code check_shape(loom_dtype dt, int ndim, const int64_t *dims, loom_status *st) {
  if (dt <= 0 || dt >= LOOM_DTYPE_COUNT) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: invalid dtype %d", (int)dt);
  if (ndim < 0 || ndim > LOOM_MAX_DIMS)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: rank %d outside [0,%d]", ndim, LOOM_MAX_DIMS);
  if (ndim > 0 && !dims) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: dims is NULL for rank %d", ndim);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: dimension %d is negative (%lld)", i, (long long)dims[i]);
    if (dims[i] && n > INT64_MAX / 16 / dims[i])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: too many elements");
    n *= dims[i];
  }
  return LOOM_OK;
}

static loom_tensor *tensor_shell(loom_dtype dt, int ndim, const int64_t *dims) {
  loom_tensor *t = loom__calloc(1, sizeof *t);
  if (!t) return NULL;
  t->dtype = dt;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
  t->numel = loom__numel(ndim, dims);
  t->nbytes = (size_t)t->numel * (dt == LOOM_STRING ? sizeof(loom_tstring) : loom_dtype_size(dt));
  return t;
}

loom_tensor *loom_tensor_new(loom_dtype dt, int ndim, const int64_t *dims, loom_status *st) {
  if (check_shape(dt, ndim, dims, st)) return NULL;
  loom_tensor *t = tensor_shell(dt, ndim, dims);
  if (!t) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "tensor: out of memory");
    return NULL;
  }
  t->data = loom__aligned_alloc(t->nbytes);
  if (!t->data) {
    size_t nbytes = t->nbytes; /* read before t is freed */
    loom__free(t);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "tensor: out of memory allocating %zu bytes", nbytes);
    return NULL;
  }
  memset(t->data, 0, t->nbytes);
  t->owned = 1;
  return t;
}

loom_tensor *loom_tensor_wrap(loom_dtype dt, int ndim, const int64_t *dims, void *data, size_t nbytes,
                              loom_deallocator dealloc, void *arg, loom_status *st) {
  if (check_shape(dt, ndim, dims, st)) return NULL;
  if (dt == LOOM_STRING) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: cannot wrap memory as a string tensor");
    return NULL;
  }
  size_t need = (size_t)loom__numel(ndim, dims) * loom_dtype_size(dt);
  if (nbytes != need) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: wrapped buffer has %zu bytes, shape needs %zu", nbytes, need);
    return NULL;
  }
  if (!data && need) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: wrapped data is NULL");
    return NULL;
  }
  loom_tensor *t = tensor_shell(dt, ndim, dims);
  if (!t) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "tensor: out of memory");
    return NULL;
  }
  t->data = data;
  t->dealloc = dealloc;
  t->dealloc_arg = arg;
  return t;
}

loom_tensor *loom_tensor_from_data(loom_dtype dt, int ndim, const int64_t *dims, const void *data, loom_status *st) {
  if (dt == LOOM_STRING) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: use loom_tensor_set_string for strings");
    return NULL;
  }
  loom_tensor *t = loom_tensor_new(dt, ndim, dims, st);
  if (t && data && t->nbytes) memcpy(t->data, data, t->nbytes);
  return t;
}

loom_tensor *loom_tensor_scalar_f32(float v) { return loom_tensor_from_data(LOOM_F32, 0, NULL, &v, NULL); }
loom_tensor *loom_tensor_scalar_i32(int32_t v) { return loom_tensor_from_data(LOOM_I32, 0, NULL, &v, NULL); }
loom_tensor *loom_tensor_scalar_i64(int64_t v) { return loom_tensor_from_data(LOOM_I64, 0, NULL, &v, NULL); }

loom_tensor *loom_tensor_copy(const loom_tensor *t, loom_status *st) {
  if (!t) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: copy of NULL");
    return NULL;
  }
  loom_tensor *c = loom_tensor_new(t->dtype, t->ndim, t->dims, st);
  if (!c) return NULL;
  if (t->dtype == LOOM_STRING) {
    const loom_tstring *s = t->data;
    for (int64_t i = 0; i < t->numel; i++)
      if (s[i].ptr && loom_tensor_set_string(c, i, s[i].ptr, s[i].len, st)) {
        loom_tensor_free(c);
        return NULL;
      }
  } else if (t->nbytes) {
    memcpy(c->data, t->data, t->nbytes);
  }
  return c;
}

/* p points into t's string arena (then it is not freed on its own). */
static int in_arena(const loom_tensor *t, const char *p) {
  return t->sarena && p >= t->sarena && p < t->sarena + t->sarena_cap;
}

void loom_tensor_free(loom_tensor *t) {
  if (!t) return;
  if (t->owned) {
    if (t->dtype == LOOM_STRING) {
      loom_tstring *s = t->data;
      for (int64_t i = 0; i < t->numel; i++)
        if (!in_arena(t, s[i].ptr)) loom__free(s[i].ptr);
      loom__free(t->sarena);
    }
    loom__aligned_free(t->data);
  } else if (t->dealloc) {
    t->dealloc(t->data, t->nbytes, t->dealloc_arg);
  }
  loom__free(t);
}

loom_dtype loom_tensor_dtype(const loom_tensor *t) { return t ? t->dtype : LOOM_DTYPE_INVALID; }
int loom_tensor_ndim(const loom_tensor *t) { return t ? t->ndim : 0; }
int64_t loom_tensor_dim(const loom_tensor *t, int i) { return (t && i >= 0 && i < t->ndim) ? t->dims[i] : -1; }
const int64_t *loom_tensor_dims(const loom_tensor *t) { return t ? t->dims : NULL; }
int64_t loom_tensor_numel(const loom_tensor *t) { return t ? t->numel : 0; }
size_t loom_tensor_nbytes(const loom_tensor *t) { return t ? t->nbytes : 0; }
void *loom_tensor_data(loom_tensor *t) { return (t && t->dtype != LOOM_STRING) ? t->data : NULL; }
const void *loom_tensor_data_const(const loom_tensor *t) { return (t && t->dtype != LOOM_STRING) ? t->data : NULL; }

/* engine_api.h: for the layers above (datasets hand results over like the session's fetches). */
int loom__tensor_owned(const loom_tensor *t) { return t && t->owned; }
const void *loom__tensor_raw(const loom_tensor *t) { return t ? t->data : NULL; }

loom_code loom_tensor_reshape(loom_tensor *t, int ndim, const int64_t *dims, loom_status *st) {
  if (!t) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: reshape of NULL");
  loom_code c = check_shape(t->dtype, ndim, dims, st);
  if (c) return c;
  int64_t n = loom__numel(ndim, dims);
  if (n != t->numel)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: reshape from %lld to %lld elements",
                           (long long)t->numel, (long long)n);
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
  return LOOM_OK;
}

loom_code loom_tensor_set_string(loom_tensor *t, int64_t i, const char *s, size_t len, loom_status *st) {
  if (!t || t->dtype != LOOM_STRING) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: not a string tensor");
  if (i < 0 || i >= t->numel)
    return loom_status_set(st, LOOM_OUT_OF_RANGE, "tensor: string index %lld outside [0,%lld)", (long long)i,
                           (long long)t->numel);
  char *p = loom__malloc(len + 1);
  if (!p) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "tensor: out of memory");
  if (len) memcpy(p, s, len);
  p[len] = 0;
  loom_tstring *e = (loom_tstring *)t->data + i;
  if (!in_arena(t, e->ptr)) loom__free(e->ptr);
  e->ptr = p;
  e->len = len;
  return LOOM_OK;
}

loom_code loom__tensor_set_strings(loom_tensor *t, const char *bytes, size_t nbytes, const size_t *off_len,
                                   loom_status *st) {
  if (!t || t->dtype != LOOM_STRING || !t->owned)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: bulk strings into a tensor that is not an owned string tensor");
  loom_tstring *s = t->data;
  if (nbytes > t->sarena_cap || !t->sarena) {
    size_t cap = nbytes < 64 ? 64 : nbytes + nbytes / 2;
    char *a = loom__malloc(cap);
    if (!a) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "tensor: out of memory for %zu bytes of strings", nbytes);
    for (int64_t i = 0; i < t->numel; i++) /* nothing may point into the old block */
      if (!in_arena(t, s[i].ptr)) loom__free(s[i].ptr);
    loom__free(t->sarena);
    t->sarena = a;
    t->sarena_cap = cap;
    for (int64_t i = 0; i < t->numel; i++) s[i].ptr = NULL;
  }
  if (nbytes) memcpy(t->sarena, bytes, nbytes);
  for (int64_t i = 0; i < t->numel; i++) {
    if (s[i].ptr && !in_arena(t, s[i].ptr)) loom__free(s[i].ptr);
    s[i].ptr = t->sarena + off_len[2 * i];
    s[i].len = off_len[2 * i + 1];
  }
  return LOOM_OK;
}

loom_code loom__tensor_copy_strings(loom_tensor *t, const loom_tstring *src, loom_status *st) {
  if (!t || t->dtype != LOOM_STRING || !t->owned)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tensor: strings copied into a tensor that is not an owned string tensor");
  loom_tstring *s = t->data;
  size_t total = 0;
  for (int64_t i = 0; i < t->numel; i++) total += (src[i].ptr ? src[i].len : 0) + 1;
  for (int64_t i = 0; i < t->numel; i++) /* strings set one by one are dropped */
    if (!in_arena(t, s[i].ptr)) loom__free(s[i].ptr);
  if (total > t->sarena_cap || !t->sarena) {
    size_t cap = total < 64 ? 64 : total + total / 2;
    char *a = loom__malloc(cap);
    if (!a) {
      for (int64_t i = 0; i < t->numel; i++) s[i].ptr = NULL, s[i].len = 0;
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "tensor: out of memory for %zu bytes of strings", total);
    }
    loom__free(t->sarena);
    t->sarena = a;
    t->sarena_cap = cap;
  }
  char *p = t->sarena;
  for (int64_t i = 0; i < t->numel; i++) {
    size_t len = src[i].ptr ? src[i].len : 0;
    if (len) memcpy(p, src[i].ptr, len);
    p[len] = 0;
    s[i].ptr = p;
    s[i].len = len;
    p += len + 1;
  }
  return LOOM_OK;
}

const char *loom_tensor_get_string(const loom_tensor *t, int64_t i, size_t *len) {
  if (!t || t->dtype != LOOM_STRING || i < 0 || i >= t->numel) return NULL;
  const loom_tstring *e = (const loom_tstring *)t->data + i;
  if (len) *len = e->len;
  return e->ptr ? e->ptr : "";
}

double loom__tensor_scalar_f64(const loom_tensor *t) {
  if (!t || t->numel < 1 || !t->data) return 0.0;
  switch (t->dtype) {
  case LOOM_F32: return *(const float *)t->data;
  case LOOM_F64: return *(const double *)t->data;
  case LOOM_I32: return *(const int32_t *)t->data;
  case LOOM_I64: return (double)*(const int64_t *)t->data;
  default: return 0.0;
  }
}
