/* loom_sparse.h - the sparse representation and the ops feature columns are
 * built from (hashing, bucketizing, vocabulary lookup, crosses, sparse
 * embedding lookups).
 *
 * Sparse representation: RAGGED rows. A batch of B rows with nnz values in
 * all is two tensors:
 *   values     [nnz]    any dtype (int64 ids, strings, float weights)
 *   row_splits [B + 1]  int64, row_splits[0] = 0, non-decreasing,
 *                       row_splits[B] = nnz; row r holds
 *                       values[row_splits[r] .. row_splits[r+1]).
 * It is TF's SparseTensor of rank 2 with indices in row-major order, minus
 * the column indices (no op here needs them: every consumer combines a
 * row's values as a set or a weighted sum), and it is never padded to
 * dense. Weights of a weighted categorical column are a second values
 * tensor sharing the ids' row_splits. Datasets yield a ragged component as
 * two components (values and "<name>/row_splits", see loom_data.h); the
 * features map carries them as one sparse entry (loom_estimator.h).
 *
 * Hashing is bit-identical to TF 2.15: Fingerprint64 is FarmHash's
 * Fingerprint64 (farmhashna::Hash64); crosses combine per-key hashes with
 * FingerprintCat64 starting from hash_key. */
#ifndef LOOM_SPARSE_H
#define LOOM_SPARSE_H
#include "loom_base.h"
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_sparse {
  loom_output values;     /* [nnz] */
  loom_output row_splits; /* [nrows + 1] int64 */
} loom_sparse;

/* ---- hashes (host functions, no graph) ---- */
/* FarmHash Fingerprint64 of n bytes (TF's Fingerprint64). */
LOOM_API uint64_t loom_fingerprint64(const void *data, size_t n);
/* TF's FingerprintCat64(a, b). */
LOOM_API uint64_t loom_fingerprint_cat64(uint64_t a, uint64_t b);
/* TF's default crossed_column / SparseCrossHashed hash_key. */
#define LOOM_CROSS_HASH_KEY 0xDECAFCAFFEull

/* ---- elementwise ops (any shape; a ragged tensor's values go through
 * them as they are, its row_splits unchanged) ---- */
/* TF Bucketize: out[i] = number of boundaries <= x[i] (int32, x's shape);
 * x float32/float64/int32/int64; boundaries sorted ascending (unsorted is
 * an INVALID_ARGUMENT sticky error). nb = 0 gives all zeros. */
LOOM_API loom_output loom_bucketize(loom_graph *g, loom_output x, int nb, const float *boundaries, const char *name);
/* TF AsString for integers: the decimal text of int32/int64 x (string, x's shape). */
LOOM_API loom_output loom_as_string(loom_graph *g, loom_output x, const char *name);
/* TF StringToHashBucketFast: Fingerprint64(s) % num_buckets (int64). x may
 * also be int32/int64: hashed as its decimal text (as_string first, as
 * categorical_column_with_hash_bucket does) without building the strings
 * as a tensor. num_buckets >= 1. */
LOOM_API loom_output loom_string_to_hash_bucket_fast(loom_graph *g, loom_output x, int64_t num_buckets,
                                                     const char *name);

/* Vocabulary lookup (TF index_table_from_tensor / _from_file, a
 * StaticHashTable initialized from the vocabulary, with
 * IdTableWithHashBuckets for OOV): id = position of x in the vocabulary;
 * else, with num_oov_buckets > 0, vocab_size + Fingerprint64(text(x)) %
 * num_oov_buckets (text = the decimal text for int64 keys); else
 * default_value (with OOV buckets, a key whose position equals
 * default_value is hashed too, as TF's IdTableWithHashBuckets does; keep
 * default_value -1 there). x: string (vocabulary of strings) or int32/int64
 * (vocabulary of int64); out int64, x's shape. The table is part of the
 * graph (it is exported with it); a duplicate key is INVALID_ARGUMENT
 * naming it (TF fails the same way when it initializes the table).
 * default_value LOOM_VOCAB_MISS_FAILS (without OOV buckets): a key not in
 * the vocabulary fails the run with INVALID_ARGUMENT naming the key (used
 * for label vocabularies, whose unknown entries TF rejects). */
#define LOOM_VOCAB_MISS_FAILS INT64_MIN
LOOM_API loom_output loom_vocab_lookup_strings(loom_graph *g, loom_output x, int64_t n, const char *const *vocab,
                                               int64_t num_oov_buckets, int64_t default_value, const char *name);
LOOM_API loom_output loom_vocab_lookup_int64(loom_graph *g, loom_output x, int64_t n, const int64_t *vocab,
                                             int64_t num_oov_buckets, int64_t default_value, const char *name);
/* Reads a vocabulary file (one key per line, TF's TextFileIndex.WHOLE_LINE;
 * "\r\n" endings tolerated; the last line may lack "\n") into *keys
 * (strings; or, with as_int64, parsed int64 values into *ikeys). vocab_size
 * > 0 keeps the first vocab_size lines (a file with fewer lines is an
 * error naming the file, as TF's table initializer fails); <= 0 keeps all.
 * An empty line is INVALID_ARGUMENT, as in TF ("empty line found").
 * Frees with loom_vocab_free. Errors (NOT_FOUND for a missing file,
 * INVALID_ARGUMENT for a line that is not an int64) name the file and line. */
typedef struct loom_vocab {
  int64_t n;
  char **keys;     /* strings (NULL with as_int64) */
  int64_t *ikeys;  /* int64 keys (NULL without as_int64) */
} loom_vocab;
LOOM_API loom_code loom_vocab_read_file(const char *path, int64_t vocab_size, int as_int64, loom_vocab *out,
                                        loom_status *st);
LOOM_API void loom_vocab_free(loom_vocab *v);

/* ---- ragged ops ---- */
/* Dense x [B, ...] (rank >= 1) to ragged rows (row r = x[r] flattened),
 * dropping the elements equal to the ignore value when drop_ignore is set:
 * "" for strings, ignore_int for integers (TF's categorical columns use
 * -1). Float inputs are never dropped. */
LOOM_API loom_sparse loom_dense_to_ragged(loom_graph *g, loom_output x, int drop_ignore, int64_t ignore_int,
                                          const char *name);
/* Identity-column check on ragged int ids: with has_default 0, an id
 * outside [0, num_buckets) fails the run with INVALID_ARGUMENT naming the
 * node (name it after the column); else such ids become default_value.
 * Output int64, the values' shape. */
LOOM_API loom_output loom_check_ids(loom_graph *g, loom_output ids, int64_t num_buckets, int has_default,
                                    int64_t default_value, const char *name);
/* TF SparseCrossHashed over k >= 1 ragged inputs with the same number of
 * rows: each output row is the Cartesian product of the input rows (the
 * last input varies fastest), each combination hashed as h = hash_key;
 * h = FingerprintCat64(h, f_i) for each input i in order, f_i =
 * Fingerprint64(s) for a string value, (uint64) v for an int value; the
 * output id is h % num_buckets (num_buckets >= 1). Output: int64 values and
 * their row_splits. A row empty in any input is empty. */
LOOM_API loom_sparse loom_sparse_cross_hashed(loom_graph *g, int k, const loom_sparse *inputs, int64_t num_buckets,
                                              uint64_t hash_key, const char *name);

/* Combiners of loom_sparse_embedding. */
typedef enum loom_combiner {
  LOOM_COMBINER_SUM = 0,
  LOOM_COMBINER_MEAN = 1,
  LOOM_COMBINER_SQRTN = 2
} loom_combiner;
/* tf.nn.safe_embedding_lookup_sparse on ragged ids: params [V, D] float32
 * (a variable), ids (int32/int64 values) with row_splits, weights (float32
 * values with the same row_splits, or {NULL} = all 1). Ids < 0 are pruned,
 * and with the mean and sqrtn combiners so are entries with weight <= 0
 * (as TF 2.15, which prunes weights only when combiner != "sum"); a kept
 * id >= V is an INVALID_ARGUMENT run error naming the node. max_norm > 0 clips each looked-up row to that L2 norm
 * before combining. Row r of the [B, D] result:
 *   sum:   sum_i w_i e_i;  mean: sum_i w_i e_i / sum_i w_i;
 *   sqrtn: sum_i w_i e_i / sqrt(sum_i w_i^2);   empty rows: zeros.
 * One fused op; its gradient with respect to params is sparse (rows = the
 * kept ids, IndexedSlices), so sparse optimizers update only those rows. */
LOOM_API loom_output loom_sparse_embedding(loom_graph *g, loom_output params, loom_sparse ids, loom_output weights,
                                           loom_combiner combiner, double max_norm, const char *name);
/* Multi-hot [B, depth] float32 from ragged ids (int32/int64): out[r, id] +=
 * weight (1 without weights); ids outside [0, depth) are ignored (TF's
 * indicator column drops them). */
LOOM_API loom_output loom_ragged_multi_hot(loom_graph *g, loom_sparse ids, loom_output weights, int64_t depth,
                                           const char *name);

#ifdef __cplusplus
}
#endif
#endif
