/* feature_columns/fc_impl.h - the column objects shared by the files of
 * feature_columns/ (columns.c: constructors and parse spec; layers.c:
 * input_layer and linear_model). Not installed. */
#ifndef LOOM_FC_IMPL_H
#define LOOM_FC_IMPL_H
#include "base/base.h"
#include "loom/loom_feature_columns.h"

typedef enum fc_kind {
  FC_NUMERIC = 0,
  FC_BUCKETIZED,
  FC_IDENTITY,
  FC_VOCAB, /* list or file */
  FC_HASH,
  FC_CROSSED,
  FC_WEIGHTED,
  FC_INDICATOR,
  FC_EMBEDDING,
  FC_SHARED_EMBEDDING,
  FC_SEQ_CATEGORICAL, /* sequence_categorical_column_with_*: cat = the identity / vocabulary / hash column */
  FC_SEQ_NUMERIC      /* sequence_numeric_column: key, shape, numel; default_value = 1 padding value */
} fc_kind;

struct loom_fc {
  fc_kind kind;
  char *name;
  char *key; /* raw feature key (numeric and the leaf categorical columns) */
  /* numeric */
  int ndim;
  int64_t shape[LOOM_MAX_DIMS];
  int64_t numel;
  float *default_value; /* numel values or NULL */
  loom_dtype dtype;     /* numeric: F32/F64; hash: STRING or an int type; vocab: STRING or I64 */
  loom_fc_normalizer_fn normalizer;
  void *normalizer_user;
  double *zmean, *zstd; /* zscore: numel each */
  /* bucketized */
  const loom_fc *source;
  int nb;
  float *boundaries;
  /* categorical */
  int64_t num_buckets;
  int has_default;
  int64_t default_id;
  /* vocabulary */
  int64_t nvocab;
  char **vocab_s;
  int64_t *vocab_i;
  int64_t num_oov;
  int vocab_file; /* made from a file (TF's VocabularyFileCategoricalColumn) */
  /* crossed: keys[i] (raw) when cols[i] is NULL */
  int nkeys;
  char **keys;
  const loom_fc **cols;
  uint64_t hash_key;
  /* weighted, indicator, embedding: the categorical column */
  const loom_fc *cat;
  char *weight_key;
  /* embedding */
  int64_t dim;
  loom_combiner combiner;
  int has_init;
  loom_initializer init;
  double max_norm;
  int trainable;
  char *shared_name; /* shared embeddings: the table's scope name */
};

struct loom_fc_set {
  loom_fc **cols;
  int n, cap;
};

static inline int fc_is_categorical(const loom_fc *c) {
  return c->kind == FC_BUCKETIZED || c->kind == FC_IDENTITY || c->kind == FC_VOCAB || c->kind == FC_HASH ||
         c->kind == FC_CROSSED || c->kind == FC_WEIGHTED;
}
static inline int fc_is_dense(const loom_fc *c) {
  return c->kind == FC_NUMERIC || c->kind == FC_BUCKETIZED || c->kind == FC_INDICATOR || c->kind == FC_EMBEDDING ||
         c->kind == FC_SHARED_EMBEDDING;
}
/* Columns SequenceFeatures takes: sequence_numeric_column, and indicator /
 * embedding columns of a sequence categorical column. */
static inline int fc_is_sequence_dense(const loom_fc *c) {
  return c->kind == FC_SEQ_NUMERIC ||
         ((c->kind == FC_INDICATOR || c->kind == FC_EMBEDDING) && c->cat->kind == FC_SEQ_CATEGORICAL);
}
static inline int fc_is_int_dtype(loom_dtype dt) { return dt == LOOM_I32 || dt == LOOM_I64; }

#endif
