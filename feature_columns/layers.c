/* feature_columns/layers.c - the consumers of feature columns:
 * input_layer (dense columns concatenated by name) and linear_model (a
 * weighted sum per column + bias), with the transformations each column
 * kind applies to its raw features (TF 2.15's semantics). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feature_columns/fc_impl.h"
#include "feature_columns/features.h"
#include "loom/loom_array.h"
#include "loom/loom_math.h"
#include "loom/loom_reduce.h"
#include "ops/sparse_internal.h"

typedef struct fc_ctx {
  loom_graph *g;
  const loom_features *f;
  const char *layer; /* "input_layer" / "linear_model" (for messages) */
  int trainable;
  loom_status *st;
} fc_ctx;

/* Categorical ids of a column: int ids (values + row_splits) and the
 * weights (float32 values sharing row_splits, or {NULL, 0}). */
typedef struct fc_ids {
  loom_sparse ids;
  loom_output weights;
} fc_ids;

static const loom_output no_output = {NULL, 0};

/* The raw feature key: sparse (*is_sparse = 1, *sp) or dense (*dense). */
static loom_code fc_raw(fc_ctx *cx, const loom_fc *c, const char *key, int *is_sparse, loom_sparse *sp,
                        loom_output *dense) {
  *is_sparse = 0;
  *dense = no_output;
  memset(sp, 0, sizeof(*sp));
  if (!cx->f)
    return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT, "%s: column %s: features is NULL", cx->layer, c->name);
  loom_sparse s = loom_features_get_sparse(cx->f, key);
  if (s.values.node) {
    *is_sparse = 1;
    *sp = s;
    return LOOM_OK;
  }
  loom_output d = loom__features_lookup(cx->f, key); /* its own error names the column */
  if (!d.node)
    return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                           "%s: column %s: feature key \"%s\" is not in the features dictionary", cx->layer, c->name,
                           key);
  *dense = d;
  return LOOM_OK;
}

static const char *kind_dt(loom_dtype dt) { return dt == LOOM_STRING ? "string" : "integer"; }

/* Raw categorical input as ragged rows of the expected kind of dtype
 * (want: LOOM_STRING or LOOM_I64 = any integer). drop: dense inputs drop
 * "" / -1 (TF's categorical columns; crosses keep every element). */
static loom_code fc_raw_ragged(fc_ctx *cx, const loom_fc *c, const char *key, loom_dtype want, int drop,
                               loom_sparse *out) {
  int is_sparse;
  loom_sparse sp;
  loom_output d;
  loom_code rc = fc_raw(cx, c, key, &is_sparse, &sp, &d);
  if (rc) return rc;
  loom_output v = is_sparse ? sp.values : d;
  loom_dtype dt = loom_output_dtype(v);
  int ok = want == LOOM_STRING ? dt == LOOM_STRING : fc_is_int_dtype(dt);
  if (want == LOOM_DTYPE_INVALID) ok = dt == LOOM_STRING || fc_is_int_dtype(dt);
  if (!ok)
    return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                           "%s: column %s: column dtype and the dtype of feature \"%s\" must be compatible: the "
                           "column takes %s values, the feature is %s",
                           cx->layer, c->name, key, want == LOOM_DTYPE_INVALID ? "string or integer" : kind_dt(want),
                           loom_dtype_name(dt));
  if (is_sparse) {
    *out = sp;
    return LOOM_OK;
  }
  if (loom_output_ndim(d) < 1)
    return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                           "%s: column %s: feature \"%s\" must have a batch dimension (rank >= 1), given a scalar",
                           cx->layer, c->name, key);
  *out = loom_dense_to_ragged(cx->g, d, drop, -1, NULL);
  return LOOM_OK;
}

/* Numeric column: float32 [B, numel] (normalized). */
static loom_code fc_numeric_dense(fc_ctx *cx, const loom_fc *c, loom_output *out) {
  int is_sparse;
  loom_sparse sp;
  loom_output d;
  loom_code rc = fc_raw(cx, c, c->key, &is_sparse, &sp, &d);
  if (rc) return rc;
  if (is_sparse)
    return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                           "%s: column %s: the corresponding Tensor of numerical column must be a Tensor, "
                           "SparseTensor is not supported (key: %s)",
                           cx->layer, c->name, c->key);
  loom_dtype dt = loom_output_dtype(d);
  if (dt != LOOM_F32 && dt != LOOM_F64 && !fc_is_int_dtype(dt))
    return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                           "%s: column %s: feature \"%s\" has dtype %s; a numeric column takes numbers", cx->layer,
                           c->name, c->key, loom_dtype_name(dt));
  loom_graph *g = cx->g;
  int64_t dims[LOOM_MAX_DIMS];
  int nd = loom_output_dims(d, dims);
  if (nd >= 1) {
    int64_t have = nd == 1 ? 1 : loom__numel(nd - 1, dims + 1);
    if (have >= 0 && have != c->numel)
      return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                             "%s: column %s: feature \"%s\" has %lld values per example, the column's shape needs "
                             "%lld",
                             cx->layer, c->name, c->key, (long long)have, (long long)c->numel);
  }
  loom_output x = dt == LOOM_F32 ? d : loom_cast(g, d, LOOM_F32, NULL);
  if (c->normalizer) {
    int64_t sh[LOOM_MAX_DIMS];
    sh[0] = -1;
    memcpy(sh + 1, c->shape, (size_t)c->ndim * sizeof(int64_t));
    x = loom_reshape(g, x, c->ndim + 1, sh, NULL);
    x = c->normalizer(g, x, c->normalizer_user);
    if (!x.node)
      return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT, "%s: column %s: normalizer_fn returned no tensor",
                             cx->layer, c->name);
  }
  int64_t flat[2] = {-1, c->numel};
  x = loom_reshape(g, x, 2, flat, NULL);
  if (c->zmean) {
    float *m = loom__malloc((size_t)c->numel * sizeof(float) * 2);
    if (!m) return loom_status_set(cx->st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", cx->layer);
    for (int64_t i = 0; i < c->numel; i++) {
      m[i] = (float)c->zmean[i];
      m[c->numel + i] = (float)c->zstd[i];
    }
    int64_t n1 = c->numel;
    loom_output mean = loom_const_data(g, LOOM_F32, 1, &n1, m, NULL);
    loom_output sd = loom_const_data(g, LOOM_F32, 1, &n1, m + c->numel, NULL);
    loom__free(m);
    x = loom_div(g, loom_sub(g, x, mean, NULL), sd, NULL);
  }
  *out = x;
  return LOOM_OK;
}

/* Bucket ids [B, numel] int32 of a bucketized column. */
static loom_code fc_bucket_ids(fc_ctx *cx, const loom_fc *c, loom_output *out) {
  loom_output x;
  loom_code rc = fc_numeric_dense(cx, c->source, &x);
  if (rc) return rc;
  *out = loom_bucketize(cx->g, x, c->nb, c->boundaries, NULL);
  return LOOM_OK;
}

static loom_code fc_cat_ids(fc_ctx *cx, const loom_fc *c, fc_ids *out);

/* Leaf inputs of a cross (nested crosses flattened); dense[i] = 1 for a
 * raw feature given as a dense tensor. */
static loom_code fc_cross_inputs(fc_ctx *cx, const loom_fc *c, loom_sparse *in, int *dense, int *k) {
  for (int i = 0; i < c->nkeys; i++) {
    const loom_fc *kc = c->cols[i];
    loom_code rc;
    if (kc && kc->kind == FC_CROSSED) {
      rc = fc_cross_inputs(cx, kc, in, dense, k);
    } else if (kc) {
      fc_ids sub;
      rc = fc_cat_ids(cx, kc, &sub);
      if (!rc) {
        dense[*k] = 0;
        in[(*k)++] = sub.ids;
      }
    } else {
      dense[*k] = !loom_features_get_sparse(cx->f, c->keys[i]).values.node;
      rc = fc_raw_ragged(cx, c, c->keys[i], LOOM_DTYPE_INVALID, 0, &in[*k]);
      if (!rc) (*k)++;
    }
    if (rc) return rc;
  }
  return LOOM_OK;
}

static int fc_cross_count(const loom_fc *c) {
  int n = 0;
  for (int i = 0; i < c->nkeys; i++) n += (c->cols[i] && c->cols[i]->kind == FC_CROSSED) ? fc_cross_count(c->cols[i]) : 1;
  return n;
}

static loom_code fc_cat_ids(fc_ctx *cx, const loom_fc *c, fc_ids *out) {
  loom_graph *g = cx->g;
  out->weights = no_output;
  loom_sparse r;
  loom_code rc;
  switch (c->kind) {
  case FC_IDENTITY:
    if ((rc = fc_raw_ragged(cx, c, c->key, LOOM_I64, 1, &r))) return rc;
    out->ids.values = loom_check_ids(g, r.values, c->num_buckets, c->has_default, c->default_id, c->name);
    out->ids.row_splits = r.row_splits;
    return LOOM_OK;
  case FC_VOCAB:
    if ((rc = fc_raw_ragged(cx, c, c->key, c->vocab_s ? LOOM_STRING : LOOM_I64, 1, &r))) return rc;
    out->ids.values = c->vocab_s ? loom_vocab_lookup_strings(g, r.values, c->nvocab, (const char *const *)c->vocab_s,
                                                             c->num_oov, c->default_id, NULL)
                                 : loom_vocab_lookup_int64(g, r.values, c->nvocab, c->vocab_i, c->num_oov,
                                                           c->default_id, NULL);
    out->ids.row_splits = r.row_splits;
    return LOOM_OK;
  case FC_HASH:
    if ((rc = fc_raw_ragged(cx, c, c->key, c->dtype == LOOM_STRING ? LOOM_STRING : LOOM_I64, 1, &r))) return rc;
    out->ids.values = loom_string_to_hash_bucket_fast(g, r.values, c->num_buckets, NULL);
    out->ids.row_splits = r.row_splits;
    return LOOM_OK;
  case FC_BUCKETIZED: {
    loom_output b;
    if ((rc = fc_bucket_ids(cx, c, &b))) return rc;
    loom_output ids = loom_cast(g, b, LOOM_I64, NULL);
    int64_t n = c->source->numel;
    if (n > 1) {
      int64_t *off = loom__malloc((size_t)n * sizeof(int64_t));
      if (!off) return loom_status_set(cx->st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", cx->layer);
      for (int64_t i = 0; i < n; i++) off[i] = i * (c->nb + 1);
      ids = loom_add(g, ids, loom_const_data(g, LOOM_I64, 1, &n, off, NULL), NULL);
      loom__free(off);
    }
    out->ids = loom_dense_to_ragged(g, ids, 0, -1, NULL);
    return LOOM_OK;
  }
  case FC_CROSSED: {
    int k = 0, nk = fc_cross_count(c);
    loom_sparse *in = loom__calloc((size_t)nk * 2, sizeof(loom_sparse));
    int *dense = loom__calloc((size_t)nk, sizeof(int));
    if (!in || !dense) {
      loom__free(in);
      loom__free(dense);
      return loom_status_set(cx->st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", cx->layer);
    }
    rc = fc_cross_inputs(cx, c, in, dense, &k);
    if (!rc) {
      /* TF's sparse_cross_hashed crosses its SparseTensor inputs first and
       * its dense ones after them (each group in key order); categorical
       * columns always give SparseTensors, raw features as they come */
      loom_sparse *ord = in + nk;
      int m = 0;
      for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < k; i++)
          if (dense[i] == pass) ord[m++] = in[i];
      out->ids = loom_sparse_cross_hashed(g, k, ord, c->num_buckets, c->hash_key, NULL);
    }
    loom__free(in);
    loom__free(dense);
    return rc;
  }
  case FC_WEIGHTED: {
    if ((rc = fc_cat_ids(cx, c->cat, out))) return rc;
    int is_sparse;
    loom_sparse sp;
    loom_output d;
    if ((rc = fc_raw(cx, c, c->weight_key, &is_sparse, &sp, &d))) return rc;
    loom_output w = is_sparse ? sp.values : d;
    if (loom_output_dtype(w) != LOOM_F32)
      return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                             "%s: column %s: bad dtype of weight feature \"%s\": expected float32, got %s", cx->layer,
                             c->name, c->weight_key, loom_dtype_name(loom_output_dtype(w)));
    if (!is_sparse) {
      if (loom_output_ndim(d) < 1)
        return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                               "%s: column %s: weight feature \"%s\" must have a batch dimension", cx->layer, c->name,
                               c->weight_key);
      w = loom_dense_to_ragged(g, d, 0, 0, NULL).values;
    }
    out->weights = w;
    return LOOM_OK;
  }
  case FC_SEQ_CATEGORICAL: return fc_cat_ids(cx, c->cat, out);
  default:
    return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT, "%s: column %s is not categorical", cx->layer, c->name);
  }
}

/* The embedding table of an embedding / shared embedding column (in the
 * current variable scope; shared tables through the graph collection
 * named after the table, as TF v1 does). */
static loom_output fc_embedding_table(fc_ctx *cx, const loom_fc *c) {
  loom_graph *g = cx->g;
  int64_t dims[2] = {loom_fc_num_buckets(c->cat), c->dim};
  if (c->kind == FC_SHARED_EMBEDDING) {
    int n = 0;
    loom_variable *const *vs = loom_get_variable_collection(g, c->shared_name, &n);
    if (vs && n > 0) return loom_variable_output(vs[0]);
  }
  loom_variable *v = loom_get_variable(g, "embedding_weights", LOOM_F32, 2, dims, &c->init,
                                       cx->trainable && c->trainable);
  if (!v) return no_output;
  if (c->kind == FC_SHARED_EMBEDDING) loom_add_variable_to_collection(g, c->shared_name, v);
  return loom_variable_output(v);
}

/* A dense column's output [B, width] (inside its variable scope). */
static loom_code fc_dense(fc_ctx *cx, const loom_fc *c, loom_output *out) {
  loom_graph *g = cx->g;
  loom_code rc;
  switch (c->kind) {
  case FC_NUMERIC: return fc_numeric_dense(cx, c, out);
  case FC_BUCKETIZED: {
    loom_output b;
    if ((rc = fc_bucket_ids(cx, c, &b))) return rc;
    loom_output oh = loom_one_hot(g, b, c->nb + 1, 1.0, 0.0, -1, LOOM_F32, NULL);
    int64_t sh[2] = {-1, c->source->numel * (c->nb + 1)};
    *out = loom_reshape(g, oh, 2, sh, NULL);
    return LOOM_OK;
  }
  case FC_INDICATOR: {
    fc_ids ids;
    if ((rc = fc_cat_ids(cx, c->cat, &ids))) return rc;
    *out = loom_ragged_multi_hot(g, ids.ids, ids.weights, loom_fc_num_buckets(c->cat), NULL);
    return LOOM_OK;
  }
  case FC_EMBEDDING:
  case FC_SHARED_EMBEDDING: {
    fc_ids ids;
    if ((rc = fc_cat_ids(cx, c->cat, &ids))) return rc;
    loom_output table = fc_embedding_table(cx, c);
    if (!table.node) return loom_graph_status(g, cx->st);
    *out = loom_sparse_embedding(g, table, ids.ids, ids.weights, c->combiner, c->max_norm, c->name);
    return LOOM_OK;
  }
  default:
    return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT, "%s: column %s is not a dense column", cx->layer, c->name);
  }
}

static int fc_cmp_name(const void *a, const void *b) {
  const loom_fc *x = *(const loom_fc *const *)a, *y = *(const loom_fc *const *)b;
  return strcmp(x->name, y->name);
}

/* cols sorted by name (a new array, stable for equal names). */
static const loom_fc **fc_sorted(int n, const loom_fc *const *cols, const char *layer, loom_status *st) {
  const loom_fc **s = loom__malloc((size_t)(n > 0 ? n : 1) * sizeof(*s));
  if (!s) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", layer);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (!cols[i]) {
      loom__free(s);
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature column %d is NULL", layer, i);
      return NULL;
    }
    s[i] = cols[i];
  }
  /* insertion sort: stable, n is small */
  for (int i = 1; i < n; i++) {
    const loom_fc *x = s[i];
    int j = i - 1;
    while (j >= 0 && fc_cmp_name(&s[j], &x) > 0) {
      s[j + 1] = s[j];
      j--;
    }
    s[j + 1] = x;
  }
  return s;
}

/* fc_sorted, and room for one output per column (*parts, freed by the caller with the list). */
static const loom_fc **fc_sorted_parts(int n, const loom_fc *const *cols, const char *layer, loom_output **parts,
                                       loom_status *st) {
  const loom_fc **s = fc_sorted(n, cols, layer, st);
  if (!s) return NULL;
  *parts = loom__malloc((size_t)n * sizeof(loom_output));
  if (!*parts) {
    loom__free((void *)s);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", layer);
    return NULL;
  }
  return s;
}

static const char *fc_scope_name(const loom_fc *c) {
  return c->kind == FC_SHARED_EMBEDDING ? c->shared_name : c->name;
}

static loom_code fc_check_args(loom_graph *g, int n, const loom_fc *const *cols, const void *out, const char *layer,
                               loom_status *st) {
  if (!g || !out || n < 1 || !cols)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature_columns must not be empty (and g, out non-NULL)",
                           layer);
  loom_code rc = loom_fc_check_unique_names(layer, "feature_columns", n, cols, st);
  if (rc) return rc;
  return loom_graph_status(g, st);
}

/* The variable scope of a layer call: the caller's, or TF's default name made
 * unique the way tf.compat.v1.variable_scope(None, default_name=...) does
 * ("input_layer", then "input_layer_1", ...): the first name under the
 * current variable scope that no existing variable lives in. */
static void fc_push_layer_scope(loom_graph *g, const char *scope, const char *base) {
  if (scope && scope[0]) {
    loom_variable_scope_push(g, scope, LOOM_REUSE_NONE);
    return;
  }
  const char *outer = loom_variable_scope_name(g);
  int nv = 0;
  loom_variable *const *vs = loom_global_variables(g, &nv);
  char name[256], prefix[1024];
  for (int k = 0;; k++) {
    if (k == 0) snprintf(name, sizeof name, "%s", base);
    else snprintf(name, sizeof name, "%s_%d", base, k);
    snprintf(prefix, sizeof prefix, "%s%s%s/", outer, outer[0] ? "/" : "", name);
    size_t pl = strlen(prefix);
    int used = 0;
    for (int i = 0; i < nv && !used; i++) used = strncmp(loom_variable_name(vs[i]), prefix, pl) == 0;
    if (!used) break;
  }
  loom_variable_scope_push(g, name, LOOM_REUSE_NONE);
}

/* Sequence columns belong to loom_fc_sequence_input_layer (TF's messages). */
static loom_code fc_reject_sequence(const char *layer, const loom_fc *c, loom_status *st) {
  if (!c) return LOOM_OK;
  if ((c->kind == FC_EMBEDDING || c->kind == FC_INDICATOR) && c->cat->kind == FC_SEQ_CATEGORICAL)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s: In %s: %s. categorical_column must not be of type SequenceCategoricalColumn. "
                           "Suggested fix A: If you wish to use DenseFeatures, use a non-sequence "
                           "categorical_column_with_*. Suggested fix B: If you wish to create sequence input, use "
                           "SequenceFeatures instead of DenseFeatures. Given: %s",
                           layer, c->kind == FC_EMBEDDING ? "embedding_column" : "indicator_column", c->name,
                           c->cat->name);
  if (c->kind == FC_SEQ_CATEGORICAL || c->kind == FC_SEQ_NUMERIC)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s: column %s is a sequence column (%s); only SequenceFeatures takes sequence columns",
                           layer, c->name,
                           c->kind == FC_SEQ_NUMERIC ? "sequence_numeric_column"
                                                     : "sequence_categorical_column_with_*");
  return LOOM_OK;
}

loom_code loom_fc_input_layer(loom_graph *g, const loom_features *features, int n, const loom_fc *const *cols,
                              const char *scope, int trainable, loom_output *out, loom_status *st) {
  const char *layer = "input_layer";
  loom_code rc = fc_check_args(g, n, cols, out, layer, st);
  if (rc) return rc;
  for (int i = 0; i < n; i++) {
    rc = fc_reject_sequence(layer, cols[i], st);
    if (rc) return rc;
  }
  for (int i = 0; i < n; i++)
    if (cols[i] && !fc_is_dense(cols[i]))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: items of feature_columns must be dense columns; column %s is categorical (wrap it "
                             "with an embedding_column or indicator_column)",
                             layer, cols[i]->name);
  loom_output *parts;
  const loom_fc **s = fc_sorted_parts(n, cols, layer, &parts, st);
  if (!s) return loom_status_code(st);
  fc_ctx cx = {g, features, layer, trainable, st};
  fc_push_layer_scope(g, scope, "input_layer");
  /* one MultiHotConcat writes the layer's output: dense columns are copied
   * in, indicator and bucketized columns are written as multi-hots / one-hots
   * straight into their columns (no per-column tensor, no concatenation) */
  int32_t *kind = loom__malloc((size_t)n * sizeof(int32_t));
  int64_t *depth = loom__malloc((size_t)n * sizeof(int64_t));
  loom_output *in = loom__malloc((size_t)n * 3 * sizeof(loom_output));
  int nin = 0;
  if (!kind || !depth || !in) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", layer);
  for (int i = 0; i < n && !rc; i++) {
    const loom_fc *c = s[i];
    int shared = c->kind == FC_SHARED_EMBEDDING;
    loom_variable_scope_push(g, fc_scope_name(c), shared ? LOOM_REUSE_AUTO : LOOM_REUSE_NONE);
    if (c->kind == FC_BUCKETIZED) {
      kind[i] = LOOM__MHC_ONEHOT;
      depth[i] = c->nb + 1;
      rc = fc_bucket_ids(&cx, c, &in[nin++]);
    } else if (c->kind == FC_INDICATOR) {
      fc_ids ids;
      rc = fc_cat_ids(&cx, c->cat, &ids);
      if (!rc) {
        kind[i] = ids.weights.node ? LOOM__MHC_RAGGED_W : LOOM__MHC_RAGGED;
        depth[i] = loom_fc_num_buckets(c->cat);
        in[nin++] = ids.ids.values;
        in[nin++] = ids.ids.row_splits;
        if (ids.weights.node) in[nin++] = ids.weights;
      }
    } else {
      kind[i] = LOOM__MHC_DENSE;
      depth[i] = 0;
      rc = fc_dense(&cx, c, &parts[i]);
      if (!rc) in[nin++] = parts[i];
    }
    loom_variable_scope_pop(g);
  }
  if (!rc) *out = loom__multi_hot_concat(g, n, kind, depth, nin, in, NULL);
  loom_variable_scope_pop(g);
  loom__free(kind);
  loom__free(depth);
  loom__free(in);
  loom__free(parts);
  loom__free((void *)s);
  if (rc) return rc;
  return loom_graph_status(g, st);
}

loom_code loom_fc_linear_model(loom_graph *g, const loom_features *features, int n, const loom_fc *const *cols,
                               int64_t units, loom_combiner sparse_combiner, const char *scope, int trainable,
                               loom_output *logits, loom_status *st) {
  const char *layer = "linear_model";
  loom_code rc = fc_check_args(g, n, cols, logits, layer, st);
  if (rc) return rc;
  if (units < 1) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: units must be >= 1, given %lld", layer, (long long)units);
  for (int i = 0; i < n; i++) {
    rc = fc_reject_sequence(layer, cols[i], st);
    if (rc) return rc;
  }
  if ((int)sparse_combiner < LOOM_COMBINER_SUM || (int)sparse_combiner > LOOM_COMBINER_SQRTN)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: sparse_combiner must be sum, mean or sqrtn, given %d", layer,
                           (int)sparse_combiner);
  const loom_fc **s = fc_sorted(n, cols, layer, st);
  if (!s) return loom_status_code(st);
  fc_ctx cx = {g, features, layer, trainable, st};
  fc_push_layer_scope(g, scope, "linear_model");
  loom_output sum = no_output;
  for (int i = 0; i < n && !rc; i++) {
    const loom_fc *c = s[i];
    int shared = c->kind == FC_SHARED_EMBEDDING;
    loom_variable_scope_push(g, fc_scope_name(c), shared ? LOOM_REUSE_AUTO : LOOM_REUSE_NONE);
    loom_output part = no_output;
    if (fc_is_categorical(c)) {
      fc_ids ids;
      rc = fc_cat_ids(&cx, c, &ids);
      if (!rc) {
        int64_t dims[2] = {loom_fc_num_buckets(c), units};
        loom_initializer z = loom_init_zeros();
        loom_variable *w = loom_get_variable(g, "weights", LOOM_F32, 2, dims, &z, trainable);
        if (!w) rc = loom_graph_status(g, st);
        else
          part = loom_sparse_embedding(g, loom_variable_output(w), ids.ids, ids.weights, sparse_combiner, 0.0,
                                       c->name);
      }
    } else {
      loom_output x;
      rc = fc_dense(&cx, c, &x);
      if (!rc) {
        int64_t dims[2] = {loom_fc_dense_width(c), units};
        loom_initializer z = loom_init_zeros();
        loom_variable *w = loom_get_variable(g, "weights", LOOM_F32, 2, dims, &z, trainable);
        if (!w) rc = loom_graph_status(g, st);
        else part = loom_matmul(g, x, loom_variable_output(w), 0, 0, NULL);
      }
    }
    loom_variable_scope_pop(g);
    if (!rc) sum = sum.node ? loom_add(g, sum, part, NULL) : part;
  }
  if (!rc) {
    int64_t bd[1] = {units};
    loom_initializer z = loom_init_zeros();
    loom_variable *b = loom_get_variable(g, "bias_weights", LOOM_F32, 1, bd, &z, trainable);
    if (!b) rc = loom_graph_status(g, st);
    else *logits = loom_bias_add(g, sum, loom_variable_output(b), NULL);
  }
  loom_variable_scope_pop(g);
  loom__free((void *)s);
  if (rc) return rc;
  return loom_graph_status(g, st);
}

/* ---- SequenceFeatures ---- */
/* The padded [B, T, w] steps of one sequence column and its lengths [B];
 * expected: an earlier column's lengths ({NULL, 0} for the first). */
static loom_code fc_sequence_dense(fc_ctx *cx, const loom_fc *c, loom_output expected, loom_output *out,
                                   loom_output *lengths) {
  loom_graph *g = cx->g;
  loom_code rc;
  if (c->kind == FC_SEQ_NUMERIC) {
    int is_sparse;
    loom_sparse sp;
    loom_output d;
    if ((rc = fc_raw(cx, c, c->key, &is_sparse, &sp, &d))) return rc;
    if (!is_sparse)
      return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                             "%s: column %s: feature \"%s\" must be sparse (a VarLenFeature: values and row splits), "
                             "given a dense tensor (dense sequence inputs are not supported)",
                             cx->layer, c->name, c->key);
    loom_dtype dt = loom_output_dtype(sp.values);
    if (dt != LOOM_F32 && dt != LOOM_F64 && !fc_is_int_dtype(dt))
      return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                             "%s: column %s: feature \"%s\" has dtype %s; a sequence numeric column takes numbers",
                             cx->layer, c->name, c->key, loom_dtype_name(dt));
    loom_output v = dt == LOOM_F32 ? sp.values : loom_cast(g, sp.values, LOOM_F32, NULL);
    if (c->normalizer) {
      v = c->normalizer(g, v, c->normalizer_user);
      if (!v.node)
        return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT, "%s: column %s: normalizer_fn returned no tensor",
                               cx->layer, c->name);
    }
    int64_t one = 1;
    loom_output pad = loom_const_data(g, LOOM_F32, 1, &one, c->default_value, NULL);
    loom_output both[2] = {v, pad};
    loom_output idx = loom__ragged_pad_index(g, sp.row_splits, expected, c->numel, 1, lengths, NULL);
    *out = loom_gather(g, loom_concat(g, 2, both, 0, NULL), idx, 0, c->name);
    return LOOM_OK;
  }
  int is_sparse;
  loom_sparse sp;
  loom_output d;
  if ((rc = fc_raw(cx, c, c->cat->key, &is_sparse, &sp, &d))) return rc;
  if (!is_sparse) /* TF keeps a dense input's "" / -1 positions as empty steps */
    return loom_status_set(cx->st, LOOM_INVALID_ARGUMENT,
                           "%s: column %s: feature \"%s\" must be sparse (a VarLenFeature: values and row splits), "
                           "given a dense tensor (dense sequence inputs are not supported)",
                           cx->layer, c->name, c->cat->key);
  fc_ids ids;
  if ((rc = fc_cat_ids(cx, c->cat, &ids))) return rc;
  /* one row per id, so that each step is looked up (or one-hot) alone */
  int64_t col[2] = {-1, 1};
  loom_sparse each = loom_dense_to_ragged(g, loom_reshape(g, ids.ids.values, 2, col, NULL), 0, -1, NULL);
  int64_t w = loom_fc_dense_width(c);
  loom_output steps;
  if (c->kind == FC_INDICATOR) {
    steps = loom_ragged_multi_hot(g, each, no_output, w, NULL);
  } else {
    loom_output table = fc_embedding_table(cx, c);
    if (!table.node) return loom_graph_status(g, cx->st);
    steps = loom_sparse_embedding(g, table, each, no_output, c->combiner, c->max_norm, NULL);
  }
  float *zero = loom__calloc((size_t)w, sizeof(float));
  if (!zero) return loom_status_set(cx->st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", cx->layer);
  int64_t zd[2] = {1, w};
  loom_output both[2] = {steps, loom_const_data(g, LOOM_F32, 2, zd, zero, NULL)};
  loom__free(zero);
  loom_output idx = loom__ragged_pad_index(g, ids.ids.row_splits, expected, 1, 0, lengths, NULL);
  *out = loom_gather(g, loom_concat(g, 2, both, 0, NULL), idx, 0, c->name);
  return LOOM_OK;
}

loom_code loom_fc_sequence_input_layer(loom_graph *g, const loom_features *features, int n, const loom_fc *const *cols,
                                       const char *scope, int trainable, loom_output *out,
                                       loom_output *sequence_length, loom_status *st) {
  const char *layer = "sequence_input_layer";
  loom_code rc = fc_check_args(g, n, cols, out, layer, st);
  if (rc) return rc;
  for (int i = 0; i < n; i++) {
    const loom_fc *c = cols[i];
    if (!fc_is_sequence_dense(c)) {
      if ((c->kind == FC_EMBEDDING || c->kind == FC_INDICATOR))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "%s: In %s: %s. categorical_column must be of type SequenceCategoricalColumn to use "
                               "SequenceFeatures. Suggested fix: Use one of sequence_categorical_column_with_*. "
                               "Given: %s",
                               layer, c->kind == FC_EMBEDDING ? "embedding_column" : "indicator_column", c->name,
                               c->cat->name);
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: Items of feature_columns must be a SequenceDenseColumn. You can wrap a sequence "
                             "categorical column with an embedding_column or indicator_column. Given: %s",
                             layer, c->name);
    }
  }
  loom_output *parts;
  const loom_fc **s = fc_sorted_parts(n, cols, layer, &parts, st);
  if (!s) return loom_status_code(st);
  fc_ctx cx = {g, features, layer, trainable, st};
  fc_push_layer_scope(g, scope, "sequence_features");
  loom_output len0 = no_output;
  for (int i = 0; i < n && !rc; i++) {
    loom_output len;
    loom_variable_scope_push(g, s[i]->name, LOOM_REUSE_NONE);
    rc = fc_sequence_dense(&cx, s[i], len0, &parts[i], &len);
    loom_variable_scope_pop(g);
    if (!rc && !len0.node) len0 = len;
  }
  if (!rc) {
    *out = n == 1 ? parts[0] : loom_concat(g, n, parts, 2, NULL);
    if (sequence_length) *sequence_length = len0;
  }
  loom_variable_scope_pop(g);
  loom__free(parts);
  loom__free((void *)s);
  if (rc) return rc;
  return loom_graph_status(g, st);
}
