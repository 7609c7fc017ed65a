/* feature_columns/columns.c - the column objects of tf.feature_column: the
 * set that owns them, every constructor with TF's argument checks and TF's
 * column names, and make_parse_example_spec. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feature_columns/fc_impl.h"

/* ---- the set ---- */
loom_fc_set *loom_fc_set_new(void) { return loom__calloc(1, sizeof(loom_fc_set)); }

static void fc_free(loom_fc *c) {
  if (!c) return;
  loom__free(c->name);
  loom__free(c->key);
  loom__free(c->default_value);
  loom__free(c->zmean);
  loom__free(c->zstd);
  loom__free(c->boundaries);
  if (c->vocab_s)
    for (int64_t i = 0; i < c->nvocab; i++) loom__free(c->vocab_s[i]);
  loom__free(c->vocab_s);
  loom__free(c->vocab_i);
  if (c->keys)
    for (int i = 0; i < c->nkeys; i++) loom__free(c->keys[i]);
  loom__free(c->keys);
  loom__free((void *)c->cols);
  loom__free(c->weight_key);
  loom__free(c->shared_name);
  loom__free(c);
}

void loom_fc_set_free(loom_fc_set *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) fc_free(s->cols[i]);
  loom__free(s->cols);
  loom__free(s);
}

static loom_fc *fc_oom(loom_fc *c, loom_status *st) {
  fc_free(c);
  loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "feature column: out of memory");
  return NULL;
}

/* A new column of kind k named name (copied); NULL + status on OOM. */
static loom_fc *fc_new(fc_kind k, const char *name, loom_status *st) {
  loom_fc *c = loom__calloc(1, sizeof(*c));
  if (!c) return fc_oom(NULL, st);
  c->kind = k;
  c->name = loom__strdup(name);
  if (!c->name) return fc_oom(c, st);
  return c;
}

/* Hands c to the set; frees it and returns NULL on OOM. */
static loom_fc *fc_add(loom_fc_set *s, loom_fc *c, loom_status *st) {
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 16;
    loom_fc **p = loom__realloc(s->cols, (size_t)cap * sizeof(*p));
    if (!p) return fc_oom(c, st);
    s->cols = p;
    s->cap = cap;
  }
  s->cols[s->n++] = c;
  return c;
}

/* Is c a column of set s? (columns refer to columns of the same set) */
static int fc_owned(const loom_fc_set *s, const loom_fc *c) {
  for (int i = 0; i < s->n; i++)
    if (s->cols[i] == c) return 1;
  return 0;
}

static char *fc_concat3(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *r = loom__malloc(n);
  if (r) snprintf(r, n, "%s%s%s", a, b, c);
  return r;
}

const char *loom_fc_name(const loom_fc *c) { return c ? c->name : ""; }

loom_code loom_fc_check_unique_names(const char *who, const char *field, int n, const loom_fc *const *cols,
                                     loom_status *st) {
  if (n > 0 && !cols) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s: %d columns but no array", who, field, n);
  for (int i = 0; i < n; i++) {
    if (!cols[i]) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s[%d] is NULL", who, field, i);
    for (int j = 0; j < i; j++)
      if (strcmp(cols[j]->name, cols[i]->name) == 0)
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "%s: Duplicate feature column name found for columns: '%s' (%s[%d]) and '%s' (%s[%d]). "
                               "This usually means that these columns refer to same base feature. Either one must be "
                               "discarded or a duplicated but renamed item must be inserted in features dict.",
                               who, cols[i]->name, field, i, cols[j]->name, field, j);
  }
  return LOOM_OK;
}

int64_t loom_fc_num_buckets(const loom_fc *c) {
  if (!c) return 0;
  switch (c->kind) {
  case FC_BUCKETIZED: return c->source->numel * (c->nb + 1);
  case FC_IDENTITY:
  case FC_HASH:
  case FC_CROSSED: return c->num_buckets;
  case FC_VOCAB: return c->nvocab + c->num_oov;
  case FC_WEIGHTED:
  case FC_SEQ_CATEGORICAL: return loom_fc_num_buckets(c->cat);
  default: return 0;
  }
}

int64_t loom_fc_dense_width(const loom_fc *c) {
  if (!c) return 0;
  switch (c->kind) {
  case FC_NUMERIC:
  case FC_SEQ_NUMERIC: return c->numel;
  case FC_BUCKETIZED: return c->source->numel * (c->nb + 1);
  case FC_INDICATOR: return loom_fc_num_buckets(c->cat);
  case FC_EMBEDDING:
  case FC_SHARED_EMBEDDING: return c->dim;
  default: return 0;
  }
}

static int fc_check_set(loom_fc_set *s, const char *what, loom_status *st) {
  if (!s) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: the column set is NULL", what);
    return 0;
  }
  return 1;
}

static int fc_check_key(const char *key, const char *what, loom_status *st) {
  if (!key || !key[0]) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: key must be a non-empty string", what);
    return 0;
  }
  return 1;
}

/* ---- numeric ---- */
static loom_fc *fc_numeric_common(loom_fc_set *s, const char *key, int ndim, const int64_t *shape,
                                  const float *default_value, loom_dtype dtype, loom_status *st) {
  if (!fc_check_set(s, "numeric_column", st) || !fc_check_key(key, "numeric_column", st)) return NULL;
  if (ndim < 0 || ndim > LOOM_MAX_DIMS - 1 || (ndim > 0 && !shape)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "numeric_column %s: shape must have 0 to %d dimensions", key,
                    LOOM_MAX_DIMS - 1);
    return NULL;
  }
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 1) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "numeric_column %s: shape dimensions must be greater than 0, given shape dimension %d = %lld",
                      key, i, (long long)shape[i]);
      return NULL;
    }
  if (dtype != LOOM_F32 && dtype != LOOM_F64) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "numeric_column %s: dtype must be convertible to float, given %s",
                    key, loom_dtype_name(dtype));
    return NULL;
  }
  loom_fc *c = fc_new(FC_NUMERIC, key, st);
  if (!c) return NULL;
  if (!(c->key = loom__strdup(key))) return fc_oom(c, st);
  c->dtype = dtype;
  if (ndim == 0) {
    c->ndim = 1;
    c->shape[0] = 1;
  } else {
    c->ndim = ndim;
    memcpy(c->shape, shape, (size_t)ndim * sizeof(int64_t));
  }
  c->numel = loom__numel(c->ndim, c->shape);
  if (default_value) {
    c->default_value = loom__malloc((size_t)c->numel * sizeof(float));
    if (!c->default_value) return fc_oom(c, st);
    memcpy(c->default_value, default_value, (size_t)c->numel * sizeof(float));
  }
  return c;
}

loom_fc *loom_fc_numeric(loom_fc_set *s, const char *key, int ndim, const int64_t *shape, const float *default_value,
                         loom_dtype dtype, loom_fc_normalizer_fn normalizer, void *normalizer_user, loom_status *st) {
  loom_fc *c = fc_numeric_common(s, key, ndim, shape, default_value, dtype, st);
  if (!c) return NULL;
  c->normalizer = normalizer;
  c->normalizer_user = normalizer_user;
  return fc_add(s, c, st);
}

loom_output loom_fc_normalizer_via_out(loom_graph *g, loom_output x, void *user) {
  loom_output out = {NULL, 0};
  const loom_fc_normalizer_out *o = (const loom_fc_normalizer_out *)user;
  if (!o || !o->fn || o->fn(g, x, &out, o->user)) return (loom_output){NULL, 0};
  return out;
}

loom_fc *loom_fc_numeric_zscore(loom_fc_set *s, const char *key, int ndim, const int64_t *shape,
                                const float *default_value, int64_t n, const double *mean, const double *stddev,
                                loom_status *st) {
  loom_fc *c = fc_numeric_common(s, key, ndim, shape, default_value, LOOM_F32, st);
  if (!c) return NULL;
  if (n != c->numel || !mean || !stddev) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "numeric_column %s: zscore needs %lld means and stddevs (one per element), given %lld", key,
                    (long long)c->numel, (long long)n);
    fc_free(c);
    return NULL;
  }
  for (int64_t i = 0; i < n; i++)
    if (!(stddev[i] > 0) || !isfinite(stddev[i]) || !isfinite(mean[i])) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "numeric_column %s: zscore element %lld has mean %g and stddev %g (stddev must be finite "
                      "and > 0)",
                      key, (long long)i, mean[i], stddev[i]);
      fc_free(c);
      return NULL;
    }
  c->zmean = loom__malloc((size_t)n * sizeof(double));
  c->zstd = loom__malloc((size_t)n * sizeof(double));
  if (!c->zmean || !c->zstd) return fc_oom(c, st);
  memcpy(c->zmean, mean, (size_t)n * sizeof(double));
  memcpy(c->zstd, stddev, (size_t)n * sizeof(double));
  return fc_add(s, c, st);
}

loom_fc *loom_fc_bucketized(loom_fc_set *s, const loom_fc *numeric, int nb, const float *boundaries,
                            loom_status *st) {
  if (!fc_check_set(s, "bucketized_column", st)) return NULL;
  if (!numeric || numeric->kind != FC_NUMERIC || !fc_owned(s, numeric)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "bucketized_column: source_column must be a column generated with numeric_column() of this "
                    "set, given %s",
                    numeric ? numeric->name : "NULL");
    return NULL;
  }
  if (nb < 1 || !boundaries) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "bucketized_column %s_bucketized: boundaries must not be empty",
                    numeric->name);
    return NULL;
  }
  for (int i = 0; i < nb; i++) {
    if (isnan(boundaries[i]) || (i + 1 < nb && !(boundaries[i] < boundaries[i + 1]))) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "bucketized_column %s_bucketized: boundaries must be a sorted list (strictly ascending; "
                      "boundaries[%d] = %g, boundaries[%d] = %g)",
                      numeric->name, i, (double)boundaries[i], i + 1 < nb ? i + 1 : i,
                      (double)boundaries[i + 1 < nb ? i + 1 : i]);
      return NULL;
    }
  }
  char *name = fc_concat3(numeric->name, "_bucketized", "");
  if (!name) return fc_oom(NULL, st);
  loom_fc *c = fc_new(FC_BUCKETIZED, name, st);
  loom__free(name);
  if (!c) return NULL;
  c->source = numeric;
  c->nb = nb;
  c->boundaries = loom__malloc((size_t)nb * sizeof(float));
  if (!c->boundaries) return fc_oom(c, st);
  memcpy(c->boundaries, boundaries, (size_t)nb * sizeof(float));
  return fc_add(s, c, st);
}

/* ---- categorical ---- */
loom_fc *loom_fc_identity(loom_fc_set *s, const char *key, int64_t num_buckets, int has_default,
                          int64_t default_value, loom_status *st) {
  if (!fc_check_set(s, "categorical_column_with_identity", st) ||
      !fc_check_key(key, "categorical_column_with_identity", st))
    return NULL;
  if (num_buckets < 1) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "categorical_column_with_identity %s: num_buckets %lld < 1", key, (long long)num_buckets);
    return NULL;
  }
  if (has_default && (default_value < 0 || default_value >= num_buckets)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "categorical_column_with_identity %s: default_value %lld not in range [0, %lld)", key,
                    (long long)default_value, (long long)num_buckets);
    return NULL;
  }
  loom_fc *c = fc_new(FC_IDENTITY, key, st);
  if (!c) return NULL;
  if (!(c->key = loom__strdup(key))) return fc_oom(c, st);
  c->num_buckets = num_buckets;
  c->has_default = has_default != 0;
  c->default_id = default_value;
  c->dtype = LOOM_I64;
  return fc_add(s, c, st);
}

static int fc_vocab_args(const char *what, const char *key, int64_t num_oov_buckets, int64_t default_value,
                         loom_status *st) {
  if (num_oov_buckets < 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: invalid num_oov_buckets %lld", what, key,
                    (long long)num_oov_buckets);
    return 0;
  }
  if (num_oov_buckets > 0 && default_value != -1) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: can't specify both default_value (%lld) and num_oov_buckets (%lld)",
                    what, key, (long long)default_value, (long long)num_oov_buckets);
    return 0;
  }
  return 1;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Finds a duplicate in the vocabulary: returns its index or -1 (-2 on OOM). */
static int64_t fc_vocab_dup(int64_t n, char *const *vs, const int64_t *vi) {
  if (n < 2) return -1;
  int64_t dup = -1;
  if (vs) {
    char **t = loom__malloc((size_t)n * sizeof(char *));
    if (!t) return -2;
    memcpy(t, vs, (size_t)n * sizeof(char *));
    qsort(t, (size_t)n, sizeof(char *), cmp_cstr);
    for (int64_t i = 1; i < n && dup < 0; i++)
      if (!strcmp(t[i - 1], t[i]))
        for (int64_t j = 0; j < n; j++)
          if (!strcmp(vs[j], t[i])) {
            dup = j;
            break;
          }
    loom__free(t);
  } else {
    int64_t *t = loom__malloc((size_t)n * sizeof(int64_t));
    if (!t) return -2;
    memcpy(t, vi, (size_t)n * sizeof(int64_t));
    qsort(t, (size_t)n, sizeof(int64_t), cmp_i64);
    for (int64_t i = 1; i < n && dup < 0; i++)
      if (t[i - 1] == t[i])
        for (int64_t j = 0; j < n; j++)
          if (vi[j] == t[i]) {
            dup = j;
            break;
          }
    loom__free(t);
  }
  return dup;
}

/* Vocabulary column from owned arrays (taken over: freed on failure). */
static loom_fc *fc_vocab_make(loom_fc_set *s, const char *what, const char *key, int64_t n, char **vs, int64_t *vi,
                              int64_t num_oov_buckets, int64_t default_value, loom_status *st) {
  loom_fc *c = fc_new(FC_VOCAB, key, st);
  if (!c) goto fail;
  c->nvocab = n;
  c->vocab_s = vs;
  c->vocab_i = vi;
  vs = NULL;
  vi = NULL;
  if (!(c->key = loom__strdup(key))) return fc_oom(c, st);
  c->dtype = c->vocab_s ? LOOM_STRING : LOOM_I64;
  c->num_oov = num_oov_buckets;
  c->default_id = default_value;
  int64_t d = fc_vocab_dup(n, c->vocab_s, c->vocab_i);
  if (d == -2) return fc_oom(c, st);
  if (d >= 0) {
    if (c->vocab_s)
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: duplicate keys in vocabulary: \"%s\" (index %lld)", what,
                      key, c->vocab_s[d], (long long)d);
    else
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: duplicate keys in vocabulary: %lld (index %lld)", what,
                      key, (long long)c->vocab_i[d], (long long)d);
    fc_free(c);
    return NULL;
  }
  return fc_add(s, c, st);
fail:
  if (vs)
    for (int64_t i = 0; i < n; i++) loom__free(vs[i]);
  loom__free(vs);
  loom__free(vi);
  return NULL;
}

loom_fc *loom_fc_vocabulary_list(loom_fc_set *s, const char *key, int64_t n, const char *const *vocab,
                                 int64_t num_oov_buckets, int64_t default_value, loom_status *st) {
  const char *what = "categorical_column_with_vocabulary_list";
  if (!fc_check_set(s, what, st) || !fc_check_key(key, what, st)) return NULL;
  if (n < 1 || !vocab) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: vocabulary_list must be non-empty", what, key);
    return NULL;
  }
  if (!fc_vocab_args(what, key, num_oov_buckets, default_value, st)) return NULL;
  char **vs = loom__calloc((size_t)n, sizeof(char *));
  if (!vs) return fc_oom(NULL, st);
  for (int64_t i = 0; i < n; i++) {
    if (!vocab[i]) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: vocabulary entry %lld is NULL", what, key, (long long)i);
      for (int64_t j = 0; j < i; j++) loom__free(vs[j]);
      loom__free(vs);
      return NULL;
    }
    if (!(vs[i] = loom__strdup(vocab[i]))) {
      for (int64_t j = 0; j < i; j++) loom__free(vs[j]);
      loom__free(vs);
      return fc_oom(NULL, st);
    }
  }
  return fc_vocab_make(s, what, key, n, vs, NULL, num_oov_buckets, default_value, st);
}

loom_fc *loom_fc_vocabulary_list_int64(loom_fc_set *s, const char *key, int64_t n, const int64_t *vocab,
                                       int64_t num_oov_buckets, int64_t default_value, loom_status *st) {
  const char *what = "categorical_column_with_vocabulary_list";
  if (!fc_check_set(s, what, st) || !fc_check_key(key, what, st)) return NULL;
  if (n < 1 || !vocab) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: vocabulary_list must be non-empty", what, key);
    return NULL;
  }
  if (!fc_vocab_args(what, key, num_oov_buckets, default_value, st)) return NULL;
  int64_t *vi = loom__malloc((size_t)n * sizeof(int64_t));
  if (!vi) return fc_oom(NULL, st);
  memcpy(vi, vocab, (size_t)n * sizeof(int64_t));
  return fc_vocab_make(s, what, key, n, NULL, vi, num_oov_buckets, default_value, st);
}

loom_fc *loom_fc_vocabulary_file(loom_fc_set *s, const char *key, const char *path, int64_t vocabulary_size,
                                 int64_t num_oov_buckets, int64_t default_value, loom_dtype dtype, loom_status *st) {
  const char *what = "categorical_column_with_vocabulary_file";
  if (!fc_check_set(s, what, st) || !fc_check_key(key, what, st)) return NULL;
  if (!path || !path[0]) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: missing vocabulary_file", what, key);
    return NULL;
  }
  if (dtype != LOOM_STRING && !fc_is_int_dtype(dtype)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: dtype must be string or integer, given %s", what, key,
                    loom_dtype_name(dtype));
    return NULL;
  }
  if (!fc_vocab_args(what, key, num_oov_buckets, default_value, st)) return NULL;
  loom_vocab v;
  memset(&v, 0, sizeof(v));
  loom_status *tmp = loom_status_new();
  if (!tmp) return fc_oom(NULL, st);
  loom_code rc = loom_vocab_read_file(path, vocabulary_size, dtype != LOOM_STRING, &v, tmp);
  if (rc != LOOM_OK) {
    loom_status_set(st, rc, "%s %s: vocabulary_file %s: %s", what, key, path, loom_status_message(tmp));
    loom_status_free(tmp);
    return NULL;
  }
  loom_status_free(tmp);
  if (v.n < 1) {
    loom_vocab_free(&v);
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: vocabulary_file %s is empty", what, key, path);
    return NULL;
  }
  int64_t n = v.n;
  char **vs = v.keys;
  int64_t *vi = v.ikeys;
  /* take the arrays over: copy them into our allocator's memory */
  char **cs = NULL;
  int64_t *ci = NULL;
  if (vs) {
    cs = loom__calloc((size_t)n, sizeof(char *));
    for (int64_t i = 0; cs && i < n; i++)
      if (!(cs[i] = loom__strdup(vs[i]))) {
        for (int64_t j = 0; j < i; j++) loom__free(cs[j]);
        loom__free(cs);
        cs = NULL;
      }
  } else {
    ci = loom__malloc((size_t)n * sizeof(int64_t));
    if (ci) memcpy(ci, vi, (size_t)n * sizeof(int64_t));
  }
  loom_vocab_free(&v);
  if (!cs && !ci) return fc_oom(NULL, st);
  loom_fc *c = fc_vocab_make(s, what, key, n, cs, ci, num_oov_buckets, default_value, st);
  if (c) c->vocab_file = 1;
  return c;
}

loom_fc *loom_fc_hash_bucket(loom_fc_set *s, const char *key, int64_t hash_bucket_size, loom_dtype dtype,
                             loom_status *st) {
  const char *what = "categorical_column_with_hash_bucket";
  if (!fc_check_set(s, what, st) || !fc_check_key(key, what, st)) return NULL;
  if (hash_bucket_size < 1) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: hash_bucket_size must be at least 1, given %lld", what, key,
                    (long long)hash_bucket_size);
    return NULL;
  }
  if (dtype != LOOM_STRING && !fc_is_int_dtype(dtype)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: dtype must be string or integer, given %s", what, key,
                    loom_dtype_name(dtype));
    return NULL;
  }
  loom_fc *c = fc_new(FC_HASH, key, st);
  if (!c) return NULL;
  if (!(c->key = loom__strdup(key))) return fc_oom(c, st);
  c->num_buckets = hash_bucket_size;
  c->dtype = dtype;
  return fc_add(s, c, st);
}

/* Leaf names of a cross (nested crosses flattened, as TF's
 * _collect_leaf_level_keys) appended to names[*n]. */
static void fc_cross_leaf_names(const loom_fc *c, const char **names, int *n) {
  for (int i = 0; i < c->nkeys; i++) {
    if (c->cols[i] && c->cols[i]->kind == FC_CROSSED) fc_cross_leaf_names(c->cols[i], names, n);
    else names[(*n)++] = c->cols[i] ? c->cols[i]->name : c->keys[i];
  }
}
static int fc_cross_nleaves(const loom_fc *c) {
  int n = 0;
  for (int i = 0; i < c->nkeys; i++) n += (c->cols[i] && c->cols[i]->kind == FC_CROSSED) ? fc_cross_nleaves(c->cols[i]) : 1;
  return n;
}

loom_fc *loom_fc_crossed(loom_fc_set *s, int nkeys, const char *const *raw_keys, const loom_fc *const *cols,
                         int64_t hash_bucket_size, uint64_t hash_key, loom_status *st) {
  const char *what = "crossed_column";
  if (!fc_check_set(s, what, st)) return NULL;
  if (nkeys < 2) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: keys must be a list with length > 1, given %d", what, nkeys);
    return NULL;
  }
  if (hash_bucket_size < 1) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: hash_bucket_size must be > 1, given %lld", what,
                    (long long)hash_bucket_size);
    return NULL;
  }
  for (int i = 0; i < nkeys; i++) {
    const loom_fc *k = cols ? cols[i] : NULL;
    if (!k) {
      if (!raw_keys || !raw_keys[i] || !raw_keys[i][0]) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: key %d is neither a feature key nor a column", what, i);
        return NULL;
      }
      continue;
    }
    if (!fc_owned(s, k)) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: key %d (%s) is not a column of this set", what, i, k->name);
      return NULL;
    }
    if (k->kind == FC_HASH) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "%s: unsupported key %s: hashed column is not supported, use the raw feature name \"%s\" "
                      "instead",
                      what, k->name, k->key);
      return NULL;
    }
    if (k->kind == FC_WEIGHTED) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: key %s: crossed_column does not support weighted columns", what,
                      k->name);
      return NULL;
    }
    if (!fc_is_categorical(k)) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "%s: unsupported key %s: each key must be a string or a categorical column", what, k->name);
      return NULL;
    }
  }
  loom_fc *c = loom__calloc(1, sizeof(*c));
  if (!c) return fc_oom(NULL, st);
  c->kind = FC_CROSSED;
  c->nkeys = nkeys;
  c->keys = loom__calloc((size_t)nkeys, sizeof(char *));
  c->cols = loom__calloc((size_t)nkeys, sizeof(loom_fc *));
  if (!c->keys || !c->cols) return fc_oom(c, st);
  for (int i = 0; i < nkeys; i++) {
    c->cols[i] = cols ? cols[i] : NULL;
    if (!c->cols[i] && !(c->keys[i] = loom__strdup(raw_keys[i]))) return fc_oom(c, st);
  }
  c->num_buckets = hash_bucket_size;
  c->hash_key = hash_key ? hash_key : LOOM_CROSS_HASH_KEY;
  /* name: the sorted leaf names joined by "_X_" */
  int nl = fc_cross_nleaves(c), m = 0;
  const char **names = loom__malloc((size_t)nl * sizeof(char *));
  if (!names) return fc_oom(c, st);
  fc_cross_leaf_names(c, names, &m);
  qsort(names, (size_t)m, sizeof(char *), cmp_cstr);
  size_t len = 1;
  for (int i = 0; i < m; i++) len += strlen(names[i]) + 3;
  c->name = loom__malloc(len);
  if (!c->name) {
    loom__free(names);
    return fc_oom(c, st);
  }
  c->name[0] = 0;
  size_t k = 0;
  for (int i = 0; i < m; i++) k += (size_t)snprintf(c->name + k, len - k, "%s%s", i ? "_X_" : "", names[i]);
  loom__free(names);
  return fc_add(s, c, st);
}

static int fc_need_categorical(loom_fc_set *s, const loom_fc *cat, const char *what, loom_status *st) {
  if (cat && cat->kind == FC_SEQ_CATEGORICAL && fc_owned(s, cat)) {
    if (!strcmp(what, "indicator_column") || !strcmp(what, "embedding_column")) return 1;
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "%s: column %s is a sequence categorical column; only indicator_column and embedding_column "
                    "take one",
                    what, cat->name);
    return 0;
  }
  if (!cat || !fc_owned(s, cat)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: categorical_column %s is not a column of this set", what,
                    cat ? cat->name : "NULL");
    return 0;
  }
  if (!fc_is_categorical(cat)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "%s: categorical_column must be of type CategoricalColumn, given %s (a dense column)", what,
                    cat->name);
    return 0;
  }
  return 1;
}

loom_fc *loom_fc_weighted(loom_fc_set *s, const loom_fc *categorical, const char *weight_feature_key,
                          loom_status *st) {
  const char *what = "weighted_categorical_column";
  if (!fc_check_set(s, what, st) || !fc_need_categorical(s, categorical, what, st)) return NULL;
  if (!weight_feature_key || !weight_feature_key[0]) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: missing weight_feature_key", what, categorical->name);
    return NULL;
  }
  if (categorical->kind == FC_WEIGHTED) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: the categorical column is already weighted", what,
                    categorical->name);
    return NULL;
  }
  char *name = fc_concat3(categorical->name, "_weighted_by_", weight_feature_key);
  if (!name) return fc_oom(NULL, st);
  loom_fc *c = fc_new(FC_WEIGHTED, name, st);
  loom__free(name);
  if (!c) return NULL;
  c->cat = categorical;
  if (!(c->weight_key = loom__strdup(weight_feature_key))) return fc_oom(c, st);
  return fc_add(s, c, st);
}

loom_fc *loom_fc_indicator(loom_fc_set *s, const loom_fc *categorical, loom_status *st) {
  const char *what = "indicator_column";
  if (!fc_check_set(s, what, st) || !fc_need_categorical(s, categorical, what, st)) return NULL;
  char *name = fc_concat3(categorical->name, "_indicator", "");
  if (!name) return fc_oom(NULL, st);
  loom_fc *c = fc_new(FC_INDICATOR, name, st);
  loom__free(name);
  if (!c) return NULL;
  c->cat = categorical;
  return fc_add(s, c, st);
}

/* ---- sequence columns ---- */
loom_fc *loom_fc_sequence_categorical(loom_fc_set *s, const loom_fc *categorical, loom_status *st) {
  const char *what = "sequence_categorical_column";
  if (!fc_check_set(s, what, st)) return NULL;
  if (!categorical || !fc_owned(s, categorical)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: categorical_column %s is not a column of this set", what,
                    categorical ? categorical->name : "NULL");
    return NULL;
  }
  if (categorical->kind != FC_IDENTITY && categorical->kind != FC_VOCAB && categorical->kind != FC_HASH) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "%s: categorical_column must be an identity, vocabulary or hash bucket column, given %s", what,
                    categorical->name);
    return NULL;
  }
  loom_fc *c = fc_new(FC_SEQ_CATEGORICAL, categorical->name, st);
  if (!c) return NULL;
  if (!(c->key = loom__strdup(categorical->key))) return fc_oom(c, st);
  c->cat = categorical;
  return fc_add(s, c, st);
}

loom_fc *loom_fc_sequence_numeric(loom_fc_set *s, const char *key, int ndim, const int64_t *shape,
                                  double default_value, loom_dtype dtype, loom_status *st) {
  loom_fc *c = fc_numeric_common(s, key, ndim, shape, NULL, dtype, st);
  if (!c) return NULL;
  c->kind = FC_SEQ_NUMERIC;
  c->default_value = loom__malloc(sizeof(float));
  if (!c->default_value) return fc_oom(c, st);
  c->default_value[0] = (float)default_value;
  return fc_add(s, c, st);
}

loom_fc *loom_fc_sequence_numeric_normalized(loom_fc_set *s, const char *key, int ndim, const int64_t *shape,
                                             double default_value, loom_dtype dtype, loom_fc_normalizer_fn normalizer,
                                             void *normalizer_user, loom_status *st) {
  loom_fc *c = loom_fc_sequence_numeric(s, key, ndim, shape, default_value, dtype, st);
  if (!c) return NULL;
  c->normalizer = normalizer;
  c->normalizer_user = normalizer_user;
  return c;
}

loom_fc_embedding_options loom_fc_embedding_options_default(void) {
  loom_fc_embedding_options o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof o;
  o.combiner = LOOM_COMBINER_MEAN;
  o.trainable = 1;
  return o;
}

static int fc_emb_args(const char *what, const char *name, int64_t dimension, const loom_fc_embedding_options *o,
                       loom_status *st) {
  if (dimension < 1) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: invalid dimension %lld", what, name, (long long)dimension);
    return 0;
  }
  if ((int)o->combiner < LOOM_COMBINER_SUM || (int)o->combiner > LOOM_COMBINER_SQRTN) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: combiner must be mean, sqrtn or sum, given %d", what, name,
                    (int)o->combiner);
    return 0;
  }
  if (o->max_norm < 0 || isnan(o->max_norm)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s %s: max_norm must be > 0 (0 = none), given %g", what, name,
                    o->max_norm);
    return 0;
  }
  return 1;
}

static void fc_emb_set(loom_fc *c, int64_t dimension, const loom_fc_embedding_options *o) {
  c->dim = dimension;
  c->combiner = o->combiner;
  c->max_norm = o->max_norm;
  c->trainable = o->trainable != 0;
  if (o->initializer) {
    c->has_init = 1;
    c->init = *o->initializer;
  } else {
    c->init = loom_init_truncated_normal(0.0, 1.0 / sqrt((double)dimension), LOOM_SEED_NONE);
  }
}

loom_fc *loom_fc_embedding(loom_fc_set *s, const loom_fc *categorical, int64_t dimension,
                           const loom_fc_embedding_options *opt, loom_status *st) {
  const char *what = "embedding_column";
  loom_fc_embedding_options o = loom_fc_embedding_options_default();
  if (LOOM__OPTS_TAKE(&o, opt, what, loom_fc_embedding_options, st)) return NULL;
  if (!fc_check_set(s, what, st) || !fc_need_categorical(s, categorical, what, st)) return NULL;
  if (!fc_emb_args(what, categorical->name, dimension, &o, st)) return NULL;
  char *name = fc_concat3(categorical->name, "_embedding", "");
  if (!name) return fc_oom(NULL, st);
  loom_fc *c = fc_new(FC_EMBEDDING, name, st);
  loom__free(name);
  if (!c) return NULL;
  c->cat = categorical;
  fc_emb_set(c, dimension, &o);
  return fc_add(s, c, st);
}

loom_code loom_fc_shared_embeddings(loom_fc_set *s, int n, const loom_fc *const *categorical, int64_t dimension,
                                    const loom_fc_embedding_options *opt, loom_fc **out, loom_status *st) {
  const char *what = "shared_embedding_columns";
  loom_fc_embedding_options o = loom_fc_embedding_options_default();
  loom_code orc = LOOM__OPTS_TAKE(&o, opt, what, loom_fc_embedding_options, st);
  if (orc) return orc;
  if (!fc_check_set(s, what, st)) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  if (n < 1 || !categorical || !out)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: categorical_columns must be a non-empty list", what);
  for (int i = 0; i < n; i++) {
    if (!fc_need_categorical(s, categorical[i], what, st)) return LOOM_INVALID_ARGUMENT;
    if (loom_fc_num_buckets(categorical[i]) != loom_fc_num_buckets(categorical[0]))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: all categorical_columns must have the same number of buckets: %s has %lld, %s has "
                             "%lld",
                             what, categorical[0]->name, (long long)loom_fc_num_buckets(categorical[0]),
                             categorical[i]->name, (long long)loom_fc_num_buckets(categorical[i]));
    const loom_fc *b0 = categorical[0]->kind == FC_WEIGHTED ? categorical[0]->cat : categorical[0];
    const loom_fc *bi = categorical[i]->kind == FC_WEIGHTED ? categorical[i]->cat : categorical[i];
    if (b0->kind != bi->kind || b0->vocab_file != bi->vocab_file)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: all categorical_columns must have the same type, or be weighted_categorical_column "
                             "of the same type: %s does not match %s",
                             what, categorical[i]->name, categorical[0]->name);
    for (int j = 0; j < i; j++)
      if (categorical[j] == categorical[i])
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: column %s is given twice", what, categorical[i]->name);
  }
  if (!fc_emb_args(what, categorical[0]->name, dimension, &o, st)) return LOOM_INVALID_ARGUMENT;
  /* default table name: sorted categorical names joined by "_" + "_shared_embedding" */
  char *shared = NULL;
  if (o.shared_name && o.shared_name[0]) {
    shared = loom__strdup(o.shared_name);
  } else {
    const char **names = loom__malloc((size_t)n * sizeof(char *));
    if (!names) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", what);
    size_t len = strlen("_shared_embedding") + 1;
    for (int i = 0; i < n; i++) {
      names[i] = categorical[i]->name;
      len += strlen(names[i]) + 1;
    }
    qsort(names, (size_t)n, sizeof(char *), cmp_cstr);
    shared = loom__malloc(len);
    if (shared) {
      size_t k = 0;
      for (int i = 0; i < n; i++) k += (size_t)snprintf(shared + k, len - k, "%s%s", i ? "_" : "", names[i]);
      snprintf(shared + k, len - k, "_shared_embedding");
    }
    loom__free(names);
  }
  if (!shared) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", what);
  int made = 0;
  for (int i = 0; i < n; i++) {
    char *name = fc_concat3(categorical[i]->name, "_shared_embedding", "");
    loom_fc *c = name ? fc_new(FC_SHARED_EMBEDDING, name, st) : NULL;
    loom__free(name);
    if (c) {
      c->cat = categorical[i];
      fc_emb_set(c, dimension, &o);
      c->shared_name = loom__strdup(shared);
      if (!c->shared_name) c = fc_oom(c, st);
      else c = fc_add(s, c, st);
    }
    if (!c) {
      loom__free(shared);
      for (int j = 0; j < made; j++) out[j] = NULL; /* they stay owned by the set */
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", what);
    }
    out[i] = c;
    made++;
  }
  loom__free(shared);
  return LOOM_OK;
}

/* ---- make_parse_example_spec ---- */
typedef struct spec_acc {
  int n, cap;
  loom_feature_spec *v;
} spec_acc;

static int spec_same(const loom_feature_spec *a, const loom_feature_spec *b) {
  if (a->dtype != b->dtype || a->varlen != b->varlen || a->kind != b->kind || a->ndim != b->ndim ||
      a->ragged != b->ragged)
    return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  if (!a->default_value != !b->default_value) return 0;
  if (a->default_value) {
    int64_t ne = loom__numel(a->ndim, a->dims);
    if (memcmp(a->default_value, b->default_value, (size_t)ne * sizeof(float))) return 0;
  }
  return 1;
}

static void spec_desc(const loom_feature_spec *a, char *buf, size_t cap) {
  if (a->varlen || a->kind == LOOM_FEATURE_VAR_LEN) {
    snprintf(buf, cap, "VarLenFeature(%s)", loom_dtype_name(a->dtype));
  } else {
    char d[96];
    snprintf(buf, cap, "FixedLenFeature(shape=%s, dtype=%s%s)", loom__dims_str(d, sizeof d, a->ndim, a->dims),
             loom_dtype_name(a->dtype), a->default_value ? ", with a default" : "");
  }
}

/* Adds (or checks against an earlier one) the spec for one key. e's name
 * and default are borrowed; copies are made when it is added. */
static loom_code spec_put(spec_acc *acc, const loom_feature_spec *e, loom_status *st) {
  for (int i = 0; i < acc->n; i++)
    if (!strcmp(acc->v[i].name, e->name)) {
      if (spec_same(&acc->v[i], e)) return LOOM_OK;
      char a[160], b[160];
      spec_desc(&acc->v[i], a, sizeof a);
      spec_desc(e, b, sizeof b);
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "make_parse_example_spec: duplicate feature column key %s with conflicting specs: %s "
                             "and %s",
                             e->name, a, b);
    }
  if (acc->n == acc->cap) {
    int cap = acc->cap ? acc->cap * 2 : 16;
    loom_feature_spec *p = loom__realloc(acc->v, (size_t)cap * sizeof(*p));
    if (!p) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "make_parse_example_spec: out of memory");
    acc->v = p;
    acc->cap = cap;
  }
  loom_feature_spec c = *e;
  c.name = loom__strdup(e->name);
  c.default_value = NULL;
  if (!c.name) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "make_parse_example_spec: out of memory");
  if (e->default_value) {
    size_t nb = (size_t)loom__numel(e->ndim, e->dims) * sizeof(float);
    void *d = loom__malloc(nb);
    if (!d) {
      loom__free((void *)c.name);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "make_parse_example_spec: out of memory");
    }
    memcpy(d, e->default_value, nb);
    c.default_value = d;
  }
  acc->v[acc->n++] = c;
  return LOOM_OK;
}

/* A categorical feature's spec: a VarLenFeature read as a ragged component
 * (values + "<key>/row_splits"), which the features map carries as one
 * sparse entry. */
static loom_code spec_varlen(spec_acc *acc, const char *key, loom_dtype dt, loom_status *st) {
  loom_feature_spec e;
  memset(&e, 0, sizeof(e));
  e.name = key;
  e.dtype = dt;
  e.varlen = 1;
  e.kind = LOOM_FEATURE_VAR_LEN;
  e.ragged = 1;
  return spec_put(acc, &e, st);
}

static loom_code spec_column(spec_acc *acc, const loom_fc *c, loom_status *st) {
  switch (c->kind) {
  case FC_NUMERIC: {
    loom_feature_spec e;
    memset(&e, 0, sizeof(e));
    e.name = c->key;
    e.dtype = LOOM_F32; /* tf.Example holds float_list; float64 columns parse float32 */
    e.ndim = c->ndim;
    memcpy(e.dims, c->shape, sizeof(e.dims[0]) * (size_t)c->ndim);
    e.default_value = c->default_value;
    e.kind = LOOM_FEATURE_FIXED_LEN;
    return spec_put(acc, &e, st);
  }
  case FC_BUCKETIZED: return spec_column(acc, c->source, st);
  case FC_IDENTITY: return spec_varlen(acc, c->key, LOOM_I64, st);
  case FC_VOCAB: return spec_varlen(acc, c->key, c->dtype == LOOM_STRING ? LOOM_STRING : LOOM_I64, st);
  case FC_HASH: return spec_varlen(acc, c->key, c->dtype == LOOM_STRING ? LOOM_STRING : LOOM_I64, st);
  case FC_CROSSED:
    for (int i = 0; i < c->nkeys; i++) {
      loom_code rc = c->cols[i] ? spec_column(acc, c->cols[i], st) : spec_varlen(acc, c->keys[i], LOOM_STRING, st);
      if (rc) return rc;
    }
    return LOOM_OK;
  case FC_WEIGHTED: {
    loom_code rc = spec_column(acc, c->cat, st);
    return rc ? rc : spec_varlen(acc, c->weight_key, LOOM_F32, st);
  }
  case FC_INDICATOR:
  case FC_EMBEDDING:
  case FC_SHARED_EMBEDDING:
  case FC_SEQ_CATEGORICAL: return spec_column(acc, c->cat, st);
  case FC_SEQ_NUMERIC: return spec_varlen(acc, c->key, LOOM_F32, st);
  }
  return LOOM_OK;
}

static int spec_cmp(const void *a, const void *b) {
  return strcmp(((const loom_feature_spec *)a)->name, ((const loom_feature_spec *)b)->name);
}

void loom_fc_parse_spec_free(int nspec, loom_feature_spec *spec) {
  if (!spec) return;
  for (int i = 0; i < nspec; i++) {
    loom__free((void *)spec[i].name);
    loom__free((void *)spec[i].default_value);
  }
  loom__free(spec);
}

loom_code loom_fc_make_parse_example_spec(int n, const loom_fc *const *cols, int *nspec, loom_feature_spec **spec,
                                          loom_status *st) {
  if (!nspec || !spec || (n > 0 && !cols) || n < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "make_parse_example_spec: bad arguments");
  *nspec = 0;
  *spec = NULL;
  spec_acc acc = {0, 0, NULL};
  for (int i = 0; i < n; i++) {
    if (!cols[i]) {
      loom_fc_parse_spec_free(acc.n, acc.v);
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "make_parse_example_spec: column %d is NULL", i);
    }
    loom_code rc = spec_column(&acc, cols[i], st);
    if (rc) {
      loom_fc_parse_spec_free(acc.n, acc.v);
      return rc;
    }
  }
  if (acc.n) qsort(acc.v, (size_t)acc.n, sizeof(*acc.v), spec_cmp);
  *nspec = acc.n;
  *spec = acc.v;
  return LOOM_OK;
}
