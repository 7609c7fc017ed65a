/* loom_feature_columns.h - tf.feature_column in C: how raw fields become
 * model inputs, with TF 2.15's semantics, names and bucket ids.
 *
 * Columns live in a set (loom_fc_set) that owns them: constructors return a
 * column owned by the set (NULL + status on a bad argument, as TF raises
 * ValueError when a column is made), and loom_fc_set_free frees them all.
 * Columns refer to other columns of the same set (a bucketized column to
 * its numeric source, an embedding to its categorical column).
 *
 * Inputs come from a features map (loom_estimator.h): a dense entry or a
 * sparse (ragged) one (loom_sparse.h). A categorical column given a dense
 * input turns it into ragged rows and drops the ignore values ("" for
 * strings, -1 for ints), as TF does.
 *
 * Names (TF's): numeric, identity, vocabulary and hashed columns are named
 * by their key; bucketized "<source>_bucketized"; crossed the sorted key
 * names joined by "_X_"; indicator "<cat>_indicator"; embedding
 * "<cat>_embedding"; shared embeddings "<cat>_shared_embedding"; weighted
 * "<cat>_weighted_by_<weight_key>".
 *
 * Variables (TF's names, so warm start by name works):
 *   input_layer:  <scope>/<column name>/embedding_weights   [buckets, dim]
 *                 shared: <scope>/<shared name>/embedding_weights, shared
 *                 name default = sorted categorical names joined by "_"
 *                 + "_shared_embedding"
 *   linear_model: <scope>/<column name>/weights  [dim or buckets, units]
 *                 <scope>/bias_weights           [units]
 * scope NULL = "input_layer" / "linear_model" (inside the graph's current
 * name scope). */
#ifndef LOOM_FEATURE_COLUMNS_H
#define LOOM_FEATURE_COLUMNS_H
#include "loom_base.h"
#include "loom_graph.h"
#include "loom_sparse.h"
#include "loom_data.h"
#include "loom_estimator.h"
#include "loom_train.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_fc_set loom_fc_set;
typedef struct loom_fc loom_fc;

/* A new, empty set (NULL when out of memory); free with loom_fc_set_free. */
LOOM_API loom_fc_set *loom_fc_set_new(void);
LOOM_API void loom_fc_set_free(loom_fc_set *s);

/* The column's name (owned by its set). */
LOOM_API const char *loom_fc_name(const loom_fc *c);
/* INVALID_ARGUMENT when two of cols[0..n) share a name (TF's "Duplicate
 * feature column name found for columns: ..." naming both and their
 * positions in field) or one is NULL; who and field prefix the message.
 * input_layer, linear_model and the canned estimators' constructors call it. */
LOOM_API loom_code loom_fc_check_unique_names(const char *who, const char *field, int n, const loom_fc *const *cols,
                                              loom_status *st);
/* Categorical columns: the number of ids (buckets); 0 for dense columns. */
LOOM_API int64_t loom_fc_num_buckets(const loom_fc *c);
/* Dense columns: the width the column adds to input_layer; 0 for categorical. */
LOOM_API int64_t loom_fc_dense_width(const loom_fc *c);

/* ---- dense columns ---- */
/* numeric_column's normalizer_fn: builds the normalized tensor from x
 * (float32 [B, shape...]). */
typedef loom_output (*loom_fc_normalizer_fn)(loom_graph *g, loom_output x, void *user);
/* numeric_column(key, shape=(1,), default_value=None, dtype=float32,
 * normalizer_fn=None). ndim 0 (shape NULL) = shape (1,). default_value:
 * numel(shape) values or NULL; dtype LOOM_F32 or LOOM_F64 (float32 model
 * input either way); normalizer may be NULL. */
LOOM_API loom_fc *loom_fc_numeric(loom_fc_set *s, const char *key, int ndim, const int64_t *shape,
                                  const float *default_value, loom_dtype dtype, loom_fc_normalizer_fn normalizer,
                                  void *normalizer_user, loom_status *st);
/* A normalizer for bindings whose FFI cannot return a struct (Python's
 * ctypes): pass loom_fc_normalizer_via_out as the normalizer and a
 * loom_fc_normalizer_out as its user (kept alive as long as the column).
 * fn writes the normalized tensor to *out and returns 0, or returns
 * nonzero (the column's layer then fails naming the column). */
typedef int (*loom_fc_normalizer_out_fn)(loom_graph *g, loom_output x, loom_output *out, void *user);
typedef struct loom_fc_normalizer_out {
  loom_fc_normalizer_out_fn fn;
  void *user;
} loom_fc_normalizer_out;
LOOM_API loom_output loom_fc_normalizer_via_out(loom_graph *g, loom_output x, void *user);
/* A numeric column normalized as (x - mean[i]) / stddev[i] per element
 * (n = numel(shape); from loom_fc_analyzer's moments, for instance). */
LOOM_API loom_fc *loom_fc_numeric_zscore(loom_fc_set *s, const char *key, int ndim, const int64_t *shape,
                                         const float *default_value, int64_t n, const double *mean,
                                         const double *stddev, loom_status *st);
/* bucketized_column(source_column, boundaries): boundaries sorted strictly
 * ascending, nb >= 1. Dense: one-hot [B, numel(shape) * (nb + 1)];
 * categorical: id = bucket + i * (nb + 1) for element i. */
LOOM_API loom_fc *loom_fc_bucketized(loom_fc_set *s, const loom_fc *numeric, int nb, const float *boundaries,
                                     loom_status *st);

/* ---- categorical columns ---- */
/* categorical_column_with_identity(key, num_buckets, default_value=None):
 * has_default 0 = an out-of-range id is a run error naming the column. */
LOOM_API loom_fc *loom_fc_identity(loom_fc_set *s, const char *key, int64_t num_buckets, int has_default,
                                   int64_t default_value, loom_status *st);
/* categorical_column_with_vocabulary_list(key, vocabulary_list, dtype,
 * default_value=-1, num_oov_buckets=0): strings or int64 (use the _int64
 * form). num_oov_buckets > 0 and default_value != -1 together is an error
 * (TF's rule); duplicates are an error. */
LOOM_API loom_fc *loom_fc_vocabulary_list(loom_fc_set *s, const char *key, int64_t n, const char *const *vocab,
                                          int64_t num_oov_buckets, int64_t default_value, loom_status *st);
LOOM_API loom_fc *loom_fc_vocabulary_list_int64(loom_fc_set *s, const char *key, int64_t n, const int64_t *vocab,
                                                int64_t num_oov_buckets, int64_t default_value, loom_status *st);
/* categorical_column_with_vocabulary_file(key, vocabulary_file,
 * vocabulary_size=None, num_oov_buckets=0, default_value=None,
 * dtype=string): vocabulary_size <= 0 = the file's line count; dtype
 * LOOM_STRING or LOOM_I64. The file is read when the column is made (a
 * missing file is NOT_FOUND naming the column and the path). */
LOOM_API loom_fc *loom_fc_vocabulary_file(loom_fc_set *s, const char *key, const char *path, int64_t vocabulary_size,
                                          int64_t num_oov_buckets, int64_t default_value, loom_dtype dtype,
                                          loom_status *st);
/* categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=string):
 * dtype LOOM_STRING or an integer type (hashed as decimal text). */
LOOM_API loom_fc *loom_fc_hash_bucket(loom_fc_set *s, const char *key, int64_t hash_bucket_size, loom_dtype dtype,
                                      loom_status *st);
/* crossed_column(keys, hash_bucket_size, hash_key=None): nkeys >= 2; key i
 * is the raw feature raw_keys[i] when cols[i] is NULL, else the categorical
 * (or bucketized, or crossed) column cols[i] (not a hashed one: TF's rule).
 * hash_key 0 = LOOM_CROSS_HASH_KEY. */
LOOM_API loom_fc *loom_fc_crossed(loom_fc_set *s, int nkeys, const char *const *raw_keys, const loom_fc *const *cols,
                                  int64_t hash_bucket_size, uint64_t hash_key, loom_status *st);
/* weighted_categorical_column(categorical_column, weight_feature_key,
 * dtype=float32). */
LOOM_API loom_fc *loom_fc_weighted(loom_fc_set *s, const loom_fc *categorical, const char *weight_feature_key,
                                   loom_status *st);

/* ---- dense wrappers of categorical columns ---- */
LOOM_API loom_fc *loom_fc_indicator(loom_fc_set *s, const loom_fc *categorical, loom_status *st);
typedef struct loom_fc_embedding_options {
  uint32_t struct_size; /* sizeof: set by loom_fc_embedding_options_default() */
  loom_combiner combiner;     /* LOOM_COMBINER_MEAN (TF's default) */
  const loom_initializer *initializer; /* NULL: truncated_normal(0, 1/sqrt(dimension)) */
  double max_norm;            /* 0 = none */
  int32_t trainable;          /* 1 */
  const char *shared_name;    /* shared embeddings: the table's name (NULL = TF's default) */
} loom_fc_embedding_options;
LOOM_API loom_fc_embedding_options loom_fc_embedding_options_default(void);
/* embedding_column(categorical_column, dimension, ...); opt NULL = defaults. */
LOOM_API loom_fc *loom_fc_embedding(loom_fc_set *s, const loom_fc *categorical, int64_t dimension,
                                    const loom_fc_embedding_options *opt, loom_status *st);
/* shared_embeddings(categorical_columns, dimension, ...): n >= 1 columns
 * with the same number of buckets; out[0..n) receives one column each. */
LOOM_API loom_code loom_fc_shared_embeddings(loom_fc_set *s, int n, const loom_fc *const *categorical,
                                             int64_t dimension, const loom_fc_embedding_options *opt, loom_fc **out,
                                             loom_status *st);

/* ---- sequence columns (tf.feature_column.sequence_*) ----
 * sequence_categorical_column_with_identity / _hash_bucket /
 * _vocabulary_list / _vocabulary_file: the categorical column (identity,
 * vocabulary or hash bucket; made with its constructor above) read as one
 * sequence per example, a step per value; named as its categorical column.
 * Only indicator_column and embedding_column take one, and only
 * loom_fc_sequence_input_layer takes those. */
LOOM_API loom_fc *loom_fc_sequence_categorical(loom_fc_set *s, const loom_fc *categorical, loom_status *st);
/* sequence_numeric_column(key, shape=(1,), default_value=0., dtype=float32):
 * a step per numel(shape) values of the ragged feature key; default_value
 * pads the steps past an example's end. dtype LOOM_F32 or LOOM_F64. */
LOOM_API loom_fc *loom_fc_sequence_numeric(loom_fc_set *s, const char *key, int ndim, const int64_t *shape,
                                           double default_value, loom_dtype dtype, loom_status *st);
/* sequence_numeric_column(..., normalizer_fn): as loom_fc_sequence_numeric;
 * the normalizer gets the feature's values, float32 [nnz] (the padding is
 * default_value as it is), and returns a tensor of that shape. */
LOOM_API loom_fc *loom_fc_sequence_numeric_normalized(loom_fc_set *s, const char *key, int ndim,
                                                      const int64_t *shape, double default_value, loom_dtype dtype,
                                                      loom_fc_normalizer_fn normalizer, void *normalizer_user,
                                                      loom_status *st);

/* ---- consumers ---- */
/* input_layer(features, feature_columns): the dense columns (numeric,
 * bucketized, indicator, embedding) concatenated in order of column name
 * into *out [B, sum of widths] float32. A categorical column here is an
 * error naming it; a missing feature is INVALID_ARGUMENT naming the column
 * and the key; a dtype the column cannot take likewise. */
LOOM_API loom_code loom_fc_input_layer(loom_graph *g, const loom_features *features, int n, const loom_fc *const *cols,
                                       const char *scope, int trainable, loom_output *out, loom_status *st);
/* linear_model(features, feature_columns, units=1, sparse_combiner='sum'):
 * *logits [B, units] = sum over columns (sorted by name) of dense x W or
 * combined rows of W for categorical ones, + bias_weights. */
LOOM_API loom_code loom_fc_linear_model(loom_graph *g, const loom_features *features, int n,
                                        const loom_fc *const *cols, int64_t units, loom_combiner sparse_combiner,
                                        const char *scope, int trainable, loom_output *logits, loom_status *st);
/* tf.keras.experimental.SequenceFeatures(feature_columns)(features): the
 * sequence columns (sequence_numeric_column, indicator / embedding columns
 * of sequence categorical columns; anything else is an error naming it)
 * concatenated in order of column name into *out [B, T, sum of widths]
 * float32, T = the batch's longest sequence; shorter sequences are padded
 * with zeros (a numeric column's steps with its default_value).
 * *sequence_length [B] int64 = each example's number of steps (values /
 * numel(shape) rounded up for a numeric column); columns whose lengths
 * differ fail the run naming the example. An embedding column looks each
 * id up on its own (its combiner does not apply; ids < 0 give zeros, as
 * TF's safe lookup), an indicator column one-hots each id. Inputs must be
 * sparse (ragged, as a VarLenFeature is parsed): a dense input is
 * INVALID_ARGUMENT naming the column and key, as is a missing one. Variables: <scope>/<column name>/embedding_weights,
 * scope NULL = "sequence_features". */
LOOM_API loom_code loom_fc_sequence_input_layer(loom_graph *g, const loom_features *features, int n,
                                                const loom_fc *const *cols, const char *scope, int trainable,
                                                loom_output *out, loom_output *sequence_length, loom_status *st);
/* make_parse_example_spec(feature_columns): the TFRecord spec of the raw
 * features the columns read (numeric: FixedLenFeature(shape, dtype,
 * default); categorical and sequence columns: VarLenFeature as a ragged
 * component (float32 for sequence_numeric_column); weighted: its weight key
 * too), sorted by key. Conflicting specs for one key are
 * INVALID_ARGUMENT naming it. *spec (with its names and defaults) is freed
 * with loom_fc_parse_spec_free. */
LOOM_API loom_code loom_fc_make_parse_example_spec(int n, const loom_fc *const *cols, int *nspec,
                                                   loom_feature_spec **spec, loom_status *st);
LOOM_API void loom_fc_parse_spec_free(int nspec, loom_feature_spec *spec);

/* ---- parsing serving input receiver (TF's
 * build_parsing_serving_input_receiver_fn(make_parse_example_spec(cols))) ----
 * loom_parse_example_features: LoomParseExample (loom_data.h) of
 * serialized by spec, each result added to features under its key: a
 * FixedLen feature dense [B, shape...], a VarLen one sparse (ragged). The
 * graph's sticky error (naming the feature) is returned on a bad spec.
 * A receiver holds a copy of a spec (FixedLen and VarLen entries, 1 to
 * 64); loom_fc_parsing_receiver_new makes it from feature columns with
 * loom_fc_make_parse_example_spec. loom_parsing_serving_input_fn (user =
 * the receiver) is a loom_serving_input_fn that adds the string
 * placeholder "input_example_tensor" [-1] as the one receiver tensor
 * "examples" and parses it into the features. Exported with a canned
 * estimator, this gives TF's signatures: serving_default (classify for a
 * classifier, regress for a regressor), "classification" / "regression"
 * taking "inputs" (the serialized examples), and "predict" taking
 * "examples" -- what loom-serve's :classify and :regress need. Free with
 * loom_parsing_receiver_free (NULL accepted); it must outlive the exports
 * that use it. */
typedef struct loom_parsing_receiver loom_parsing_receiver;
LOOM_API loom_code loom_parse_example_features(loom_graph *g, loom_output serialized, int nspec,
                                               const loom_feature_spec *spec, loom_features *features,
                                               const char *name, loom_status *st);
LOOM_API loom_parsing_receiver *loom_parsing_receiver_new(int nspec, const loom_feature_spec *spec, loom_status *st);
LOOM_API loom_parsing_receiver *loom_fc_parsing_receiver_new(int n, const loom_fc *const *cols, loom_status *st);
LOOM_API void loom_parsing_receiver_free(loom_parsing_receiver *r);
/* The receiver's spec (owned by r; sorted by key when made from columns). */
LOOM_API int loom_parsing_receiver_num_features(const loom_parsing_receiver *r);
LOOM_API const loom_feature_spec *loom_parsing_receiver_spec(const loom_parsing_receiver *r);
LOOM_API loom_code loom_parsing_serving_input_fn(loom_graph *g, loom_features *features, loom_features *receivers,
                                                 void *user, loom_status *st);

/* ---- statistics from the data (what TF needs TF Transform for) ----
 * An analyzer collects the statistics asked of it in ONE pass over a
 * dataset (batched or not; dense or ragged components):
 *   quantiles:  bucket boundaries for a numeric feature (exact: all values
 *               are kept and sorted; boundary k = the value at rank
 *               ceil(k * N / num_buckets) of the sorted values, k = 1 ..
 *               num_buckets - 1, duplicates removed);
 *   vocabulary: a string (or int) feature's distinct values with their
 *               counts; written as TF's vocabulary file (one per line) by
 *               frequency (ties: byte order), dropping values seen fewer
 *               than frequency_threshold times, keeping the top_k (<= 0 =
 *               all);
 *   moments:    per-element mean and (population) stddev of a numeric
 *               feature, for numeric_column normalizers. */
typedef struct loom_fc_analyzer loom_fc_analyzer;
LOOM_API loom_fc_analyzer *loom_fc_analyzer_new(loom_status *st);
LOOM_API void loom_fc_analyzer_free(loom_fc_analyzer *a);
LOOM_API loom_code loom_fc_analyze_quantiles(loom_fc_analyzer *a, const char *key, int num_buckets, loom_status *st);
LOOM_API loom_code loom_fc_analyze_vocabulary(loom_fc_analyzer *a, const char *key, int64_t top_k,
                                              int64_t frequency_threshold, loom_status *st);
LOOM_API loom_code loom_fc_analyze_moments(loom_fc_analyzer *a, const char *key, loom_status *st);
/* Runs the pass (resets ds first and after). A key the dataset lacks or a
 * dtype that does not fit the statistic is INVALID_ARGUMENT naming it. */
LOOM_API loom_code loom_fc_analyzer_run(loom_fc_analyzer *a, loom_dataset *ds, loom_status *st);
/* Results (after run). Arrays are owned by a. */
LOOM_API loom_code loom_fc_analyzer_boundaries(const loom_fc_analyzer *a, const char *key, int *nb,
                                               const float **boundaries, loom_status *st);
LOOM_API loom_code loom_fc_analyzer_moments(const loom_fc_analyzer *a, const char *key, int64_t *n,
                                            const double **mean, const double **stddev, loom_status *st);
/* The vocabulary in memory (after run): the *n entries the file would
 * hold, in its order (count descending, ties in byte order;
 * frequency_threshold and top_k applied). (*values)[i] is NUL-terminated
 * (an integer feature's values in decimal, as in the file), (*counts)[i]
 * the number of times it was seen. Arrays and strings are owned by a,
 * valid until the next loom_fc_analyzer_run or loom_fc_analyzer_free. Any
 * output pointer may be NULL. */
LOOM_API loom_code loom_fc_analyzer_vocabulary(const loom_fc_analyzer *a, const char *key, int64_t *n,
                                               const char *const **values, const int64_t **counts, loom_status *st);
/* Writes the vocabulary file; *written (may be NULL) = entries written. */
LOOM_API loom_code loom_fc_analyzer_write_vocabulary(const loom_fc_analyzer *a, const char *key, const char *path,
                                                     int64_t *written, loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
