/* data/tfrecord.c - TFRecord files of tf.Example: the dataset
 * (tf.data.TFRecordDataset + tf.io.parse_single_example), the writer and
 * tf.Example serialization (protobuf-c, proto/example.proto); decoding goes
 * through the wire decoder shared with the LoomParseExample op
 * (base/tf_example.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/data_impl.h"
#include "base/record_io.h"
#include "proto/example.pb-c.h"
#include "base/tf_example.h"

/* ======================================================================
 * Serialization
 * ====================================================================== */
loom_code loom__example_serialize(int n, const char *const *names, const loom_tensor *const *values, uint8_t **out,
                                  size_t *len, loom_status *st) {
  *out = NULL;
  *len = 0;
  if (n < 0 || (n > 0 && (!names || !values)))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "write_example: %s", n < 0 ? "n is negative" : "names or values is NULL");
  for (int i = 0; i < n; i++) {
    if (!names[i]) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "write_example: names[%d] is NULL", i);
    const loom_tensor *t = values[i];
    if (!t) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "write_example: values[%d] ('%s') is NULL", i, names[i]);
    loom_dtype dt = loom_tensor_dtype(t);
    if (dt <= LOOM_DTYPE_INVALID || dt >= LOOM_DTYPE_COUNT)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "write_example: values[%d] ('%s') has an invalid dtype", i,
                             names[i]);
  }
  size_t nn = n > 0 ? (size_t)n : 1;
  Tensorflow__Features__FeatureEntry *ent = loom__calloc(nn, sizeof *ent);
  Tensorflow__Features__FeatureEntry **pent = loom__calloc(nn, sizeof *pent);
  Tensorflow__Feature *feat = loom__calloc(nn, sizeof *feat);
  Tensorflow__FloatList *fl = loom__calloc(nn, sizeof *fl);
  Tensorflow__Int64List *il = loom__calloc(nn, sizeof *il);
  Tensorflow__BytesList *bl = loom__calloc(nn, sizeof *bl);
  void **tmp = loom__calloc(nn, sizeof *tmp); /* converted values */
  loom_code rc = LOOM_OK;
  if (!ent || !pent || !feat || !fl || !il || !bl || !tmp) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "write_example: out of memory");
    goto out;
  }
  for (int i = 0; i < n && !rc; i++) {
    const loom_tensor *t = values[i];
    loom_dtype dt = loom_tensor_dtype(t);
    size_t cnt = (size_t)loom_tensor_numel(t);
    const void *data = loom_tensor_data_const(t); /* NULL for STRING */
    tensorflow__features__feature_entry__init(&ent[i]);
    tensorflow__feature__init(&feat[i]);
    ent[i].key = (char *)names[i];
    ent[i].value = &feat[i];
    pent[i] = &ent[i];
    switch (dt) {
      case LOOM_F32:
      case LOOM_F64: {
        tensorflow__float_list__init(&fl[i]);
        fl[i].n_value = cnt;
        if (dt == LOOM_F32) {
          fl[i].value = (float *)data;
        } else {
          float *f = tmp[i] = loom__malloc(cnt * sizeof *f);
          if (!f) break;
          for (size_t j = 0; j < cnt; j++) f[j] = (float)((const double *)data)[j];
          fl[i].value = f;
        }
        feat[i].kind_case = TENSORFLOW__FEATURE__KIND_FLOAT_LIST;
        feat[i].float_list = &fl[i];
        break;
      }
      case LOOM_STRING: {
        tensorflow__bytes_list__init(&bl[i]);
        ProtobufCBinaryData *b = tmp[i] = loom__calloc(cnt ? cnt : 1, sizeof *b);
        if (!b) break;
        for (size_t j = 0; j < cnt; j++) b[j].data = (uint8_t *)loom_tensor_get_string(t, (int64_t)j, &b[j].len);
        bl[i].n_value = cnt;
        bl[i].value = b;
        feat[i].kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
        feat[i].bytes_list = &bl[i];
        break;
      }
      default: { /* I32, I64, U8, BOOL -> int64_list */
        tensorflow__int64_list__init(&il[i]);
        il[i].n_value = cnt;
        if (dt == LOOM_I64) {
          il[i].value = (int64_t *)data;
        } else {
          int64_t *v = tmp[i] = loom__malloc(cnt * sizeof *v);
          if (!v) break;
          for (size_t j = 0; j < cnt; j++)
            v[j] = dt == LOOM_I32 ? ((const int32_t *)data)[j] : ((const uint8_t *)data)[j];
          il[i].value = v;
        }
        feat[i].kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
        feat[i].int64_list = &il[i];
        break;
      }
    }
    if (feat[i].kind_case == TENSORFLOW__FEATURE__KIND__NOT_SET)
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "write_example: out of memory");
  }
  if (!rc) {
    Tensorflow__Features fs;
    tensorflow__features__init(&fs);
    fs.n_feature = (size_t)n;
    fs.feature = pent;
    Tensorflow__Example ex;
    tensorflow__example__init(&ex);
    ex.features = &fs;
    size_t sz = tensorflow__example__get_packed_size(&ex);
    uint8_t *buf = loom__malloc(sz ? sz : 1);
    if (!buf) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "write_example: out of memory");
    } else {
      tensorflow__example__pack(&ex, buf);
      *out = buf;
      *len = sz;
    }
  }
out:
  if (tmp)
    for (int i = 0; i < n; i++) loom__free(tmp[i]);
  loom__free(tmp);
  loom__free(ent);
  loom__free(pent);
  loom__free(feat);
  loom__free(fl);
  loom__free(il);
  loom__free(bl);
  return rc;
}

/* ======================================================================
 * Parsing (tf.io.parse_single_example)
 * ====================================================================== */
/* "file X: record N" or "serialized example N" into buf. */
static const char *where(char *buf, size_t cap, const char *path, int64_t index) {
  if (path)
    snprintf(buf, cap, "%s: record %lld", path, (long long)index);
  else
    snprintf(buf, cap, "serialized example %lld", (long long)index);
  return buf;
}

/* Copies the values of a feature (or a default) into t[0..count). */
static loom_code fill_values(loom_tensor *t, const loom_exlist *f, loom_status *st) {
  switch (f->kind) {
    case LOOM_EXK_FLOAT:
      if (f->n) memcpy(loom_tensor_data(t), f->f, f->n * sizeof(float));
      return LOOM_OK;
    case LOOM_EXK_INT64:
      if (f->n) memcpy(loom_tensor_data(t), f->i, f->n * sizeof(int64_t));
      return LOOM_OK;
    default:
      for (size_t j = 0; j < f->n; j++) {
        loom_code rc = loom_tensor_set_string(t, (int64_t)j, (const char *)f->b[j].data, f->b[j].len, st);
        if (rc) return rc;
      }
      return LOOM_OK;
  }
}
static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}
static size_t feature_count(const loom_exlist *f) { return f->n; }

/* The effective kind of a spec entry (kind 0 with varlen = VarLen). */
static int spec_kind(const loom_feature_spec *s) {
  return s->kind == LOOM_FEATURE_FIXED_LEN && s->varlen ? LOOM_FEATURE_VAR_LEN : s->kind;
}
static const char *spec_kind_name(int k) {
  switch (k) {
    case LOOM_FEATURE_FIXED_LEN: return "FixedLenFeature";
    case LOOM_FEATURE_VAR_LEN: return "VarLenFeature";
    case LOOM_FEATURE_FIXED_LEN_SEQUENCE: return "FixedLenSequenceFeature";
    case LOOM_FEATURE_SPARSE: return "SparseFeature";
    default: return "an unknown kind";
  }
}

/* The feature called key (the last duplicate wins) in *buf, returned;
 * NULL when absent or when it has no list set. */
static const loom_exlist *find_feature(const loom_example *ex, const char *key, loom_exlist *buf) {
  return loom__tfex_find(ex, key, buf) ? buf : NULL;
}

/* Error unless f (when present) holds the list of dtype dt. */
static loom_code check_list(const loom_exlist *f, loom_dtype dt, const char *key, const char *wh,
                            loom_status *st) {
  if (!f || f->kind == loom__tfex_dtype_kind(dt)) return LOOM_OK;
  return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature '%s' is a %s, the spec wants %s (%s)", wh, key,
                         loom__tfex_kind_name(f->kind), loom__tfex_kind_name(loom__tfex_dtype_kind(dt)),
                         loom_dtype_name(dt));
}

/* Ragged form of a SparseFeature row: out[0] the values in ascending
 * index order (as given when already_sorted or already in order), out[1]
 * the splits {0, n}. */
typedef struct idx_pos {
  int64_t idx;
  size_t pos;
} idx_pos;
static int cmp_idx_pos(const void *a, const void *b) {
  const idx_pos *x = a, *y = b;
  return (x->idx > y->idx) - (x->idx < y->idx);
}
static loom_code sparse_ragged(const loom_exlist *fi, const loom_exlist *fv, const loom_feature_spec *s,
                               size_t n, int sorted, loom_tensor **out, loom_status *st) {
  int64_t cnt = (int64_t)n, two = 2;
  loom_code rc = loom__ds_ensure(&out[0], s->dtype, 1, &cnt, st);
  if (!rc) rc = loom__ds_ensure(&out[1], LOOM_I64, 1, &two, st);
  if (rc) return rc;
  int64_t *sp = loom_tensor_data(out[1]);
  sp[0] = 0;
  sp[1] = cnt;
  if (!n) return LOOM_OK;
  idx_pos *order = NULL;
  if (!sorted && !s->already_sorted) {
    if (!(order = loom__malloc(n * sizeof *order)))
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "SparseFeature '%s': out of memory", s->name);
    for (size_t j = 0; j < n; j++) order[j] = (idx_pos){fi->i[j], j};
    qsort(order, n, sizeof *order, cmp_idx_pos); /* indices are distinct (checked) */
  }
  for (size_t j = 0; j < n && !rc; j++) {
    size_t p = order ? order[j].pos : j;
    switch (s->dtype) {
      case LOOM_F32: ((float *)loom_tensor_data(out[0]))[j] = fv->f[p]; break;
      case LOOM_I64: ((int64_t *)loom_tensor_data(out[0]))[j] = fv->i[p]; break;
      default: {
        const loom_exbytes *v = &fv->b[p];
        rc = loom_tensor_set_string(out[0], (int64_t)j, (const char *)v->data, v->len, st);
      }
    }
  }
  loom__free(order);
  return rc;
}

/* SparseFeature spec s -> its dense [size] equivalent in *out (or the
 * ragged pair out[0], out[1] with s->ragged). */
static loom_code parse_sparse(const loom_example *ex, const loom_feature_spec *s, loom_tensor **out,
                              const char *wh, loom_status *st) {
  loom_exlist fib, fvb;
  const loom_exlist *fi = find_feature(ex, s->index_key, &fib), *fv = find_feature(ex, s->value_key, &fvb);
  loom_code rc = check_list(fi, LOOM_I64, s->index_key, wh, st);
  if (!rc) rc = check_list(fv, s->dtype, s->value_key, wh, st);
  if (rc) return rc;
  size_t ni = fi ? feature_count(fi) : 0, nv = fv ? feature_count(fv) : 0;
  if (ni != nv)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s: SparseFeature '%s': index feature '%s' has %zu values, value feature '%s' has %zu "
                           "(they must match)",
                           wh, s->name, s->index_key, ni, s->value_key, nv);
  const int64_t *idx = ni ? fi->i : NULL;
  /* range check; duplicates: a strictly increasing list has none, else
   * sort a copy and look at neighbours */
  int sorted = 1;
  for (size_t j = 0; j < ni; j++) {
    if (idx[j] < 0 || idx[j] >= s->size)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: SparseFeature '%s': index %lld (entry %zu of '%s') is outside [0, %lld)", wh, s->name,
                             (long long)idx[j], j, s->index_key, (long long)s->size);
    if (j && idx[j] <= idx[j - 1]) sorted = 0;
  }
  if (!sorted) {
    int64_t *cp = loom__malloc(ni * sizeof *cp);
    if (!cp) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: SparseFeature '%s': out of memory", wh, s->name);
    memcpy(cp, idx, ni * sizeof *cp);
    qsort(cp, ni, sizeof *cp, cmp_i64);
    for (size_t j = 1; j < ni; j++)
      if (cp[j] == cp[j - 1]) {
        int64_t dup = cp[j];
        loom__free(cp);
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "%s: SparseFeature '%s': index %lld appears more than once in '%s'", wh, s->name,
                               (long long)dup, s->index_key);
      }
    loom__free(cp);
  }
  if (s->ragged) return sparse_ragged(fi, fv, s, ni, sorted, out, st);
  int64_t size = s->size;
  if ((rc = loom__ds_ensure(out, s->dtype, 1, &size, st))) return rc;
  loom_tensor *t = *out;
  switch (s->dtype) {
    case LOOM_F32: {
      float *o = loom_tensor_data(t);
      memset(o, 0, loom_tensor_nbytes(t));
      for (size_t j = 0; j < ni; j++) o[idx[j]] = fv->f[j];
      break;
    }
    case LOOM_I64: {
      int64_t *o = loom_tensor_data(t);
      memset(o, 0, loom_tensor_nbytes(t));
      for (size_t j = 0; j < ni; j++) o[idx[j]] = fv->i[j];
      break;
    }
    default: {
      for (int64_t j = 0, m = loom_tensor_numel(t); j < m && !rc; j++) rc = loom_tensor_set_string(t, j, "", 0, st);
      for (size_t j = 0; j < ni && !rc; j++) {
        const loom_exbytes *v = &fv->b[j];
        rc = loom_tensor_set_string(t, idx[j], (const char *)v->data, v->len, st);
      }
      break;
    }
  }
  return rc;
}

loom_code loom__example_parse(const uint8_t *data, size_t n, int nspec, const loom_feature_spec *spec,
                              const loom_tensor *const *defaults, const int *slot, loom_tensor **out, const char *path,
                              int64_t index, loom_status *st) {
  char wb[1200];
  int oom = 0;
  loom_example *ex = loom__tfex_unpack(data, n, &oom);
  if (!ex && oom)
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory decoding the tf.Example (%zu bytes)",
                           where(wb, sizeof wb, path, index), n);
  if (!ex)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s is not a valid tf.Example (protobuf parse failed, %zu bytes)",
                           where(wb, sizeof wb, path, index), n);
  where(wb, sizeof wb, path, index);
  loom_code rc = LOOM_OK;
  for (int si = 0; si < nspec && !rc; si++) {
    const loom_feature_spec *s = &spec[si];
    int kind = spec_kind(s), i = slot ? slot[si] : si;
    if (kind == LOOM_FEATURE_SPARSE) {
      rc = parse_sparse(ex, s, &out[i], wb, st);
      continue;
    }
    loom_exlist fb;
    const loom_exlist *f = find_feature(ex, s->name, &fb);
    if ((rc = check_list(f, s->dtype, s->name, wb, st))) break;
    if (kind == LOOM_FEATURE_VAR_LEN) {
      int64_t cnt = f ? (int64_t)feature_count(f) : 0, two = 2;
      if ((rc = loom__ds_ensure(&out[i], s->dtype, 1, &cnt, st))) break;
      if (f && (rc = fill_values(out[i], f, st))) break;
      if (s->ragged) {
        if ((rc = loom__ds_ensure(&out[i + 1], LOOM_I64, 1, &two, st))) break;
        int64_t *sp = loom_tensor_data(out[i + 1]);
        sp[0] = 0;
        sp[1] = cnt;
      }
      continue;
    }
    int64_t numel = loom__numel(s->ndim, s->dims);
    if (kind == LOOM_FEATURE_FIXED_LEN_SEQUENCE) {
      if (!f && !s->allow_missing) {
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: feature '%s' is required but missing (FixedLenSequenceFeature without "
                             "allow_missing)",
                             wb, s->name);
        break;
      }
      int64_t cnt = f ? (int64_t)feature_count(f) : 0, dims[LOOM_MAX_DIMS];
      if (cnt % numel) {
        char sb[128];
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: feature '%s' has %lld values, not a multiple of %lld (FixedLenSequenceFeature of "
                             "element shape %s)",
                             wb, s->name, (long long)cnt, (long long)numel,
                             loom__dims_str(sb, sizeof sb, s->ndim, s->dims));
        break;
      }
      dims[0] = cnt / numel;
      for (int d = 0; d < s->ndim; d++) dims[d + 1] = s->dims[d];
      if ((rc = loom__ds_ensure(&out[i], s->dtype, s->ndim + 1, dims, st))) break;
      if (f) rc = fill_values(out[i], f, st);
      continue;
    }
    if (!f) {
      if (!defaults || !defaults[si]) {
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: feature '%s' is required but missing (fixed-length feature without a default)", wb,
                             s->name);
        break;
      }
      if ((rc = loom__ds_ensure(&out[i], s->dtype, s->ndim, s->dims, st))) break;
      const loom_tensor *d = defaults[si];
      if (s->dtype == LOOM_STRING) {
        for (int64_t j = 0; j < numel && !rc; j++) {
          size_t l;
          const char *p = loom_tensor_get_string(d, j, &l);
          rc = loom_tensor_set_string(out[i], j, p, l, st);
        }
      } else if (loom_tensor_nbytes(d)) {
        memcpy(loom_tensor_data(out[i]), loom_tensor_data_const(d), loom_tensor_nbytes(d));
      }
      continue;
    }
    size_t cnt = feature_count(f);
    if ((int64_t)cnt != numel) {
      char sb[128];
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature '%s' has %zu values, its shape %s needs %lld", wb,
                           s->name, cnt, loom__dims_str(sb, sizeof sb, s->ndim, s->dims), (long long)numel);
      break;
    }
    if ((rc = loom__ds_ensure(&out[i], s->dtype, s->ndim, s->dims, st))) break;
    rc = fill_values(out[i], f, st);
  }
  loom__tfex_free(ex);
  return rc;
}

/* Checks the kind-specific fields of a spec entry (name and dtype are
 * already checked). */
static loom_code check_kind_fields(const loom_feature_spec *s, loom_status *st) {
  if (s->kind < LOOM_FEATURE_FIXED_LEN || s->kind > LOOM_FEATURE_SPARSE)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "feature spec '%s': kind %d is not a loom_feature_kind (0 FixedLen, 1 VarLen, "
                           "2 FixedLenSequence, 3 Sparse)",
                           s->name, (int)s->kind);
  int kind = spec_kind(s);
  const char *kn = spec_kind_name(kind);
  if (s->varlen && s->kind != LOOM_FEATURE_FIXED_LEN && s->kind != LOOM_FEATURE_VAR_LEN)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feature spec '%s': varlen = 1 conflicts with kind %s", s->name,
                           kn);
  if (s->allow_missing && kind != LOOM_FEATURE_FIXED_LEN_SEQUENCE)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "feature spec '%s': allow_missing is for FixedLenSequenceFeature, this entry is a %s",
                           s->name, kn);
  if (kind != LOOM_FEATURE_SPARSE && (s->index_key || s->value_key || s->size || s->already_sorted)) {
    const char *field = s->index_key ? "index_key" : s->value_key ? "value_key" : s->size ? "size" : "already_sorted";
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feature spec '%s': %s is for SparseFeature, this entry is a %s",
                           s->name, field, kn);
  }
  if (s->ragged && kind != LOOM_FEATURE_VAR_LEN && kind != LOOM_FEATURE_SPARSE)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "feature spec '%s': ragged is for VarLenFeature and SparseFeature, this entry is a %s",
                           s->name, kn);
  if (s->ragged != 0 && s->ragged != 1)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feature spec '%s': ragged is %d; it must be 0 or 1", s->name,
                           (int)s->ragged);
  if (kind == LOOM_FEATURE_VAR_LEN) return LOOM_OK; /* ndim, dims and default_value are not read */
  if (kind == LOOM_FEATURE_SPARSE) {
    if (!s->index_key || !s->index_key[0] || !s->value_key || !s->value_key[0])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feature spec '%s': SparseFeature's %s is %s", s->name,
                             (!s->index_key || !s->index_key[0]) ? "index_key" : "value_key",
                             (!s->index_key || !s->value_key) ? "NULL" : "empty");
    if (s->size <= 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "feature spec '%s': SparseFeature's size is %lld; it must be > 0", s->name,
                             (long long)s->size);
    if (s->ndim != 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "feature spec '%s': SparseFeature has ndim %d; its shape is [size], leave ndim 0", s->name,
                             s->ndim);
    if (s->default_value)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "feature spec '%s': SparseFeature takes no default_value (absent entries are 0 / \"\")",
                             s->name);
    return LOOM_OK;
  }
  int seq = kind == LOOM_FEATURE_FIXED_LEN_SEQUENCE, maxnd = LOOM_MAX_DIMS - (seq ? 2 : 1);
  if (s->ndim < 0 || s->ndim > maxnd)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feature spec '%s': ndim %d outside [0, %d]%s", s->name, s->ndim,
                           maxnd, seq ? " (a FixedLenSequenceFeature adds the sequence dim, batching one more)" : "");
  for (int d = 0; d < s->ndim; d++)
    if (s->dims[d] < (seq ? 1 : 0))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feature spec '%s': dims[%d] is %lld; %s", s->name, d,
                             (long long)s->dims[d],
                             seq ? "a FixedLenSequenceFeature's element shape needs dims >= 1"
                                 : "a fixed-length feature needs a fully known shape");
  return LOOM_OK;
}

/* Checks a feature spec list and builds the default tensors. */
loom_code loom__example_spec_check(int nspec, const loom_feature_spec *spec, loom_tensor ***defaults,
                                   loom_status *st) {
  *defaults = NULL;
  if (nspec <= 0 || !spec)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feature spec: %s", nspec <= 0 ? "nspec must be positive" : "spec is NULL");
  for (int i = 0; i < nspec; i++) {
    const loom_feature_spec *s = &spec[i];
    if (!s->name || !s->name[0])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feature spec %d: the name is %s", i, s->name ? "empty" : "NULL");
    for (int j = 0; j < i; j++)
      if (!strcmp(spec[j].name, s->name))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "feature spec: '%s' appears twice (specs %d and %d)", s->name,
                               j, i);
    if (s->dtype != LOOM_F32 && s->dtype != LOOM_I64 && s->dtype != LOOM_STRING)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "feature spec '%s': dtype %s; a tf.Example feature is float32, int64 or string", s->name,
                             loom_dtype_name(s->dtype));
    loom_code rc = check_kind_fields(s, st);
    if (rc) return rc;
  }
  loom_tensor **def = loom__calloc((size_t)nspec, sizeof *def);
  if (!def) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "feature spec: out of memory");
  for (int i = 0; i < nspec; i++) {
    const loom_feature_spec *s = &spec[i];
    int kind = spec_kind(s);
    if (kind == LOOM_FEATURE_VAR_LEN || kind == LOOM_FEATURE_SPARSE || !s->default_value) continue;
    /* FixedLen: the whole default; FixedLenSequence: the scalar padding value */
    int nd = kind == LOOM_FEATURE_FIXED_LEN ? s->ndim : 0;
    loom_code rc = LOOM_OK;
    if (s->dtype == LOOM_STRING) {
      def[i] = loom_tensor_new(LOOM_STRING, nd, s->dims, st);
      const char *const *sv = s->default_value;
      for (int64_t j = 0; def[i] && !rc && j < loom_tensor_numel(def[i]); j++)
        rc = loom_tensor_set_string(def[i], j, sv[j] ? sv[j] : "", sv[j] ? strlen(sv[j]) : 0, st);
    } else {
      def[i] = loom_tensor_from_data(s->dtype, nd, s->dims, s->default_value, st);
    }
    if (!def[i] || rc) {
      for (int j = 0; j < nspec; j++) loom_tensor_free(def[j]);
      loom__free(def);
      return rc ? rc : LOOM_RESOURCE_EXHAUSTED;
    }
  }
  *defaults = def;
  return LOOM_OK;
}

/* ======================================================================
 * The dataset
 * ====================================================================== */
typedef struct tfr_ds {
  loom_dataset base;
  int nfiles, file;
  char **paths;
  int nspec;
  loom_feature_spec *spec; /* names point into base.comp; sparse keys are owned copies */
  loom_tensor **defaults;
  int *slot; /* spec entry -> its (values) component */
  loom_tfrecord_reader r;
  int open;
  int compression;
} tfr_ds;

static loom_code tfr_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  tfr_ds *t = (tfr_ds *)ds;
  for (;;) {
    if (!t->open) {
      if (t->file >= t->nfiles) return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
      loom_code rc = loom__tfrecord_open_ex(&t->r, t->paths[t->file], t->compression, st);
      if (rc) return rc;
      t->open = 1;
    }
    const uint8_t *data;
    size_t n;
    loom_code rc = loom__tfrecord_next(&t->r, &data, &n, st);
    if (rc == LOOM_OUT_OF_RANGE) {
      loom__tfrecord_close(&t->r);
      t->open = 0;
      t->file++;
      continue;
    }
    if (rc) return rc;
    return loom__example_parse(data, n, t->nspec, t->spec, (const loom_tensor *const *)t->defaults, t->slot, values,
                               t->paths[t->file], t->r.index - 1, st);
  }
}

static loom_code tfr_reset(loom_dataset *ds, loom_status *st) {
  (void)st;
  tfr_ds *t = (tfr_ds *)ds;
  if (t->open) loom__tfrecord_close(&t->r);
  t->open = 0;
  t->file = 0;
  return LOOM_OK;
}

static void tfr_destroy(loom_dataset *ds) {
  tfr_ds *t = (tfr_ds *)ds;
  if (t->open) loom__tfrecord_close(&t->r);
  if (t->paths)
    for (int i = 0; i < t->nfiles; i++) loom__free(t->paths[i]);
  loom__free(t->paths);
  if (t->defaults)
    for (int i = 0; i < t->nspec; i++) loom_tensor_free(t->defaults[i]);
  loom__free(t->defaults);
  loom__free(t->slot);
  if (t->spec)
    for (int i = 0; i < t->nspec; i++) {
      loom__free((char *)t->spec[i].index_key);
      loom__free((char *)t->spec[i].value_key);
    }
  loom__free(t->spec);
}

static const loom_ds_vtable tfr_vt = {"tfrecord", tfr_next, NULL, tfr_reset, tfr_destroy, NULL, NULL};

loom_tfrecord_options loom_tfrecord_options_default(void) {
  loom_tfrecord_options o = {sizeof(loom_tfrecord_options), LOOM_TFRECORD_NONE};
  return o;
}

loom_dataset *loom_dataset_tfrecord(int nfiles, const char *const *paths, int nspec, const loom_feature_spec *spec,
                                    const char *label_name, loom_status *st) {
  return loom_dataset_tfrecord_ex(nfiles, paths, nspec, spec, label_name, NULL, st);
}

loom_dataset *loom_dataset_tfrecord_ex(int nfiles, const char *const *paths, int nspec, const loom_feature_spec *spec,
                                       const char *label_name, const loom_tfrecord_options *opt, loom_status *st) {
  loom_tfrecord_options o = loom_tfrecord_options_default();
  if (LOOM__OPTS_TAKE(&o, opt, "dataset_tfrecord", loom_tfrecord_options, st)) return NULL;
  int compression = o.compression;
  if (compression < LOOM_TFRECORD_NONE || compression > LOOM_TFRECORD_AUTO) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "dataset_tfrecord: compression %d; use LOOM_TFRECORD_NONE, _GZIP, _ZLIB or _AUTO", compression);
    return NULL;
  }
  if (nfiles <= 0 || !paths) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_tfrecord: %s",
                    nfiles <= 0 ? "nfiles must be positive" : "paths is NULL");
    return NULL;
  }
  if (loom__ds_check_paths("dataset_tfrecord", nfiles, paths, st)) return NULL;
  loom_tensor **defaults;
  if (loom__example_spec_check(nspec, spec, &defaults, st)) return NULL;
  int label = -1, ncomp = 0;
  const char *bad = NULL;
  for (int i = 0; i < nspec; i++) {
    if (label_name && !strcmp(spec[i].name, label_name)) {
      label = ncomp;
      if (spec[i].ragged) bad = "is ragged; labels must be dense";
    }
    ncomp += spec[i].ragged ? 2 : 1;
  }
  if (label_name && label < 0) bad = "is not one of the features";
  if (bad) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_tfrecord: label_name '%s' %s", label_name, bad);
    for (int i = 0; i < nspec; i++) loom_tensor_free(defaults[i]);
    loom__free(defaults);
    return NULL;
  }
  tfr_ds *t = (tfr_ds *)loom__ds_new(sizeof(tfr_ds), &tfr_vt, ncomp, st);
  if (!t) {
    for (int i = 0; i < nspec; i++) loom_tensor_free(defaults[i]);
    loom__free(defaults);
    return NULL;
  }
  loom_dataset *ds = &t->base;
  t->compression = compression;
  t->defaults = defaults;
  t->nspec = nspec;
  ds->label = label;
  t->paths = loom__calloc((size_t)nfiles, sizeof *t->paths);
  t->spec = loom__calloc((size_t)nspec, sizeof *t->spec);
  t->slot = loom__calloc((size_t)nspec, sizeof *t->slot);
  int ok = t->paths && t->spec && t->slot;
  if (ok) t->nfiles = nfiles;
  for (int i = 0; ok && i < nfiles; i++) ok = (t->paths[i] = loom__strdup(paths[i])) != NULL;
  if (!ok) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_tfrecord: out of memory");
    loom_dataset_free(ds);
    return NULL;
  }
  for (int i = 0, c = 0; i < nspec; c += spec[i].ragged ? 2 : 1, i++) {
    const loom_feature_spec *s = &spec[i];
    int kind = spec_kind(s), nd = s->ndim;
    t->slot[i] = c;
    int64_t dims[LOOM_MAX_DIMS];
    if (kind == LOOM_FEATURE_VAR_LEN) { /* [-1] */
      nd = 1;
      dims[0] = -1;
    } else if (kind == LOOM_FEATURE_SPARSE) { /* [size] */
      nd = 1;
      dims[0] = s->size;
    } else if (kind == LOOM_FEATURE_FIXED_LEN_SEQUENCE) { /* [-1] + shape */
      dims[0] = -1;
      for (int d = 0; d < s->ndim; d++) dims[d + 1] = s->dims[d];
      nd = s->ndim + 1;
    } else {
      for (int d = 0; d < s->ndim; d++) dims[d] = s->dims[d];
    }
    loom_code rc = s->ragged ? loom__ds_set_ragged(ds, c, s->name, s->dtype, st)
                             : loom__ds_set_comp(ds, c, s->name, s->dtype, nd, dims, st);
    if (rc || (kind == LOOM_FEATURE_FIXED_LEN_SEQUENCE && loom__ds_set_pad(ds, c, defaults[i], st))) {
      loom_dataset_free(ds);
      return NULL;
    }
    t->spec[i] = *s;
    t->spec[i].name = ds->comp[c].name;
    t->spec[i].default_value = NULL; /* the copies in defaults are used */
    t->spec[i].index_key = t->spec[i].value_key = NULL; /* own copies (freed by tfr_destroy) */
    if (kind == LOOM_FEATURE_SPARSE && (!(t->spec[i].index_key = loom__strdup(s->index_key)) ||
                                        !(t->spec[i].value_key = loom__strdup(s->value_key)))) {
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_tfrecord: out of memory");
      loom_dataset_free(ds);
      return NULL;
    }
  }
  return ds;
}

/* ======================================================================
 * The writer
 * ====================================================================== */
struct loom_tfrecord_writer {
  loom_tfrecord_out o;
};

loom_tfrecord_writer *loom_tfrecord_writer_new_compressed(const char *path, int compression, loom_status *st) {
  if (!path) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "tfrecord_writer: path is NULL");
    return NULL;
  }
  loom_tfrecord_writer *w = loom__calloc(1, sizeof *w);
  if (!w) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "tfrecord_writer: out of memory");
    return NULL;
  }
  if (loom__tfrecord_out_open(&w->o, path, compression, st)) {
    loom__free(w);
    return NULL;
  }
  return w;
}

loom_tfrecord_writer *loom_tfrecord_writer_new(const char *path, loom_status *st) {
  return loom_tfrecord_writer_new_compressed(path, LOOM_TFRECORD_NONE, st);
}

loom_code loom_tfrecord_writer_write(loom_tfrecord_writer *w, const void *record, size_t n, loom_status *st) {
  if (!w || (!record && n))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tfrecord_writer_write: %s is NULL", w ? "record" : "writer");
  return loom__tfrecord_out_write(&w->o, record, n, st);
}

loom_code loom_tfrecord_writer_write_example(loom_tfrecord_writer *w, int n, const char *const *names,
                                             const loom_tensor *const *values, loom_status *st) {
  if (!w) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "tfrecord_writer_write_example: writer is NULL");
  uint8_t *buf;
  size_t len;
  loom_code rc = loom__example_serialize(n, names, values, &buf, &len, st);
  if (rc) return rc;
  rc = loom__tfrecord_out_write(&w->o, buf, len, st);
  loom__free(buf);
  return rc;
}

loom_tensor *loom_example_serialize(int n, const char *const *names, const loom_tensor *const *values,
                                   loom_status *st) {
  uint8_t *buf;
  size_t len;
  if (loom__example_serialize(n, names, values, &buf, &len, st)) return NULL;
  loom_tensor *t = loom_tensor_new(LOOM_STRING, 0, NULL, st);
  if (t && loom_tensor_set_string(t, 0, buf ? (const char *)buf : "", len, st)) {
    loom_tensor_free(t);
    t = NULL;
  }
  loom__free(buf);
  return t;
}

loom_code loom_tfrecord_writer_close(loom_tfrecord_writer *w, loom_status *st) {
  if (!w) return LOOM_OK;
  loom_code rc = loom__tfrecord_out_close(&w->o, st);
  loom__free(w);
  return rc;
}

/* ======================================================================
 * A whole dataset to a file
 * ====================================================================== */
loom_code loom_dataset_write_tfrecord(loom_dataset *ds, const char *path, int compression, int64_t *nrecords,
                                      loom_status *st) {
  if (nrecords) *nrecords = 0;
  if (!ds || !path)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_write_tfrecord: %s is NULL", ds ? "path" : "dataset");
  int nc = loom_dataset_num_components(ds);
  if (nc <= 0) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_write_tfrecord: the dataset has no components");
  /* the features: every component but the row_splits of a ragged pair */
  int *is_splits = loom__calloc((size_t)nc, sizeof *is_splits);
  int *feat = loom__calloc((size_t)nc, sizeof *feat);
  const char **names = loom__calloc((size_t)nc, sizeof *names);
  loom_tensor **vals = loom__calloc((size_t)nc, sizeof *vals);
  const loom_tensor **fv = loom__calloc((size_t)nc, sizeof *fv);
  loom_code rc = LOOM_OK;
  if (!is_splits || !feat || !names || !vals || !fv) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset_write_tfrecord: out of memory");
    goto out;
  }
  for (int i = 0; i < nc; i++) {
    int sp = loom_dataset_component_row_splits(ds, i);
    if (sp >= 0 && sp < nc) is_splits[sp] = 1;
  }
  int nf = 0;
  for (int i = 0; i < nc; i++)
    if (!is_splits[i]) {
      feat[nf] = i;
      names[nf++] = loom_dataset_component_name(ds, i);
    }
  loom_tfrecord_writer *w = loom_tfrecord_writer_new_compressed(path, compression, st);
  if (!w) {
    rc = loom_status_code(st);
    if (!rc) rc = LOOM_INTERNAL;
    goto out;
  }
  rc = loom_dataset_reset(ds, st);
  int64_t count = 0;
  while (!rc) {
    rc = loom_dataset_next(ds, vals, st);
    if (rc == LOOM_OUT_OF_RANGE) {
      rc = LOOM_OK;
      break;
    }
    if (rc) break;
    for (int k = 0; k < nf && !rc; k++) {
      int i = feat[k], sp = loom_dataset_component_row_splits(ds, i);
      fv[k] = vals[i];
      if (sp >= 0 && loom_tensor_numel(vals[sp]) != 2)
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "dataset_write_tfrecord: element %lld: ragged component '%s' holds %lld rows (row_splits "
                             "has %lld entries); write the dataset before batching",
                             (long long)count, names[k], (long long)loom_tensor_numel(vals[sp]) - 1,
                             (long long)loom_tensor_numel(vals[sp]));
    }
    if (!rc) rc = loom_tfrecord_writer_write_example(w, nf, names, fv, st);
    if (!rc) count++;
  }
  if (rc) {
    loom_tfrecord_writer_close(w, NULL);
  } else {
    rc = loom_tfrecord_writer_close(w, st);
  }
  if (nrecords) *nrecords = count;
out:
  if (vals)
    for (int i = 0; i < nc; i++) loom_tensor_free(vals[i]);
  loom__free(is_splits);
  loom__free(feat);
  loom__free(names);
  loom__free(vals);
  loom__free(fv);
  return rc;
}
