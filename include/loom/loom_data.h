/* loom_data.h - input pipelines (the tf.data building blocks an input_fn
 * returns).
 *
 * A dataset yields elements: a fixed list of named components (tensors).
 * One component may be the label (loom_dataset_label_index); the estimator
 * feeds the others to model_fn as features. Sources yield single examples
 * (component shapes without a batch dimension); loom_dataset_batch stacks
 * them (dims [-1, ...] in the spec, or [batch, ...] with drop_remainder).
 *
 * Ownership: every function below that returns a loom_dataset * returns a
 * new dataset (NULL on failure) that the caller frees with loom_dataset_free
 * (or hands to a transformation, or returns from an input_fn: the estimator
 * frees it). Transformations take ownership of their input dataset (also on
 * failure: they free it and return NULL). Iteration: loom_dataset_next returns
 * LOOM_OUT_OF_RANGE at the end of data (TF's OutOfRangeError);
 * loom_dataset_reset starts a new pass (a shuffle reshuffles each pass
 * unless told otherwise). A malformed record is an error naming the file
 * and the record index or line number.
 *
 * Thread safety: a dataset is used by one thread at a time (prefetch runs
 * its own producer thread internally).
 */
#ifndef LOOM_DATA_H
#define LOOM_DATA_H
#include "loom_base.h"
#include "loom_tensor.h"
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_dataset loom_dataset;

/* ---- element spec ---- */
LOOM_API int loom_dataset_num_components(const loom_dataset *ds);
/* Owned by ds; valid until ds is freed (also when a transformation that took
 * ds over is freed). NULL when i is out of range. */
LOOM_API const char *loom_dataset_component_name(const loom_dataset *ds, int i);
LOOM_API loom_dtype loom_dataset_component_dtype(const loom_dataset *ds, int i);
/* Writes up to LOOM_MAX_DIMS dims (-1 = varies, e.g. the batch dim of a
 * batch without drop_remainder) and returns the rank. */
LOOM_API int loom_dataset_component_shape(const loom_dataset *ds, int i, int64_t *dims);
/* Index of the label component, -1 when there is none. */
LOOM_API int loom_dataset_label_index(const loom_dataset *ds);
/* Index of the component called name, -1 when absent. */
LOOM_API int loom_dataset_find(const loom_dataset *ds, const char *name);
/* Ragged components (loom_sparse.h). A ragged feature "x" is two
 * components: "x", its values (1-D: [k] for one element, [nnz] once
 * batched), and "x/row_splits" (int64: [2] = {0, k} for one element,
 * [B + 1] once batched). Batching concatenates the values and merges the
 * splits (never pads); shuffle, repeat, take, prefetch and map carry both.
 * Returns the index of component i's row_splits component when i holds
 * ragged values, else -1 (also for the row_splits component itself). */
LOOM_API int loom_dataset_component_row_splits(const loom_dataset *ds, int i);

/* ---- iteration ---- */
/* values[i] (i < num_components) is in/out like loom_session_run's fetch
 * values: NULL on entry -> a new tensor the caller frees; a tensor from an
 * earlier call is reused when its dtype and element count fit. A dataset
 * may also hand back another runtime-owned tensor and keep the old one for
 * reuse (prefetch and shuffle swap buffers instead of copying); a wrapped
 * tensor (loom_tensor_wrap) that fits is filled in place. After the end
 * (OUT_OF_RANGE, "End of sequence") or an error, next keeps returning that
 * status until loom_dataset_reset. */
LOOM_API loom_code loom_dataset_next(loom_dataset *ds, loom_tensor **values, loom_status *st);
LOOM_API loom_code loom_dataset_reset(loom_dataset *ds, loom_status *st);
LOOM_API void loom_dataset_free(loom_dataset *ds);

/* ---- sources ---- */
/* Slices n arrays along dim 0 (all must share dim 0; copied, so the caller
 * keeps its tensors). Caller frees the result with loom_dataset_free. label_name names the label component (NULL = none;
 * it must be one of names). Like Dataset.from_tensor_slices. */
LOOM_API loom_dataset *loom_dataset_from_tensors(int n, const char *const *names, const loom_tensor *const *arrays,
                                                 const char *label_name, loom_status *st);
/* loom_dataset_from_tensors without the copy: on success the dataset owns
 * the n tensors (it frees them when it is freed; they must be distinct, and
 * a wrapped tensor's memory must not change while the dataset reads it); on
 * failure (NULL) they stay the caller's. For arrays too big to hold twice. */
LOOM_API loom_dataset *loom_dataset_from_tensors_taken(int n, const char *const *names, loom_tensor *const *arrays,
                                                       const char *label_name, loom_status *st);

/* from_tensor_slices with ragged features (loom_sparse.h): feature i is
 * dense when row_splits is NULL or row_splits[i] is NULL (values[i] is
 * sliced along dim 0, as loom_dataset_from_tensors does), else ragged:
 * values[i] is 1-D [nnz] of any dtype and row_splits[i] int64 [n + 1]
 * (row_splits[0] = 0, non-decreasing, row_splits[n] = nnz); it becomes the
 * two components "names[i]" and "names[i]/row_splits" (one element: [k]
 * and {0, k}). All features must have the same number of rows n. Copied,
 * so the caller keeps its tensors. label_name (NULL = none) must name a
 * dense feature. Errors (INVALID_ARGUMENT) name the feature: splits not
 * starting at 0 or decreasing, a last split that is not the number of
 * values, a splits tensor that is not int64 1-D, rows that disagree.
 * Caller frees the result with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_from_ragged_tensors(int n, const char *const *names,
                                                        const loom_tensor *const *values,
                                                        const loom_tensor *const *row_splits, const char *label_name,
                                                        loom_status *st);

/* IDX files (MNIST / Fashion-MNIST layout), gzipped or not (detected from
 * the magic). Components "image" and "label" (the label component; labels
 * may be NULL: no label component). Images are float32 scaled to [0,1]
 * with shape [rows, cols] (flatten: [rows*cols]); labels int32 scalars.
 * limit > 0 keeps only the first limit examples. Counts of images and
 * labels must match. */
typedef struct loom_idx_options {
  uint32_t struct_size; /* sizeof: set by loom_idx_options_default() */
  int32_t flatten;  /* 1: images as [rows*cols] */
  int32_t scale;    /* 1: float32 / 255; 0: float32 raw 0..255 */
  int64_t limit;
} loom_idx_options;
LOOM_API loom_idx_options loom_idx_options_default(void); /* flatten 1, scale 1, limit 0 */
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_idx(const char *images_path, const char *labels_path,
                                        const loom_idx_options *opt, loom_status *st);

/* CSV (RFC 4180 quoting, "" escapes, CRLF tolerated). One scalar component
 * per selected column; a multi-valued column (separator != 0) is ragged
 * instead: the cell "a|b|c" (separator '|') is the row {a, b, c} of dtype,
 * the components are "<name>" (values) and "<name>/row_splits"; an empty
 * cell is an empty row; an empty item inside a cell ("a||b") is "" for
 * strings and an error for numbers, as is an item that does not parse
 * (both name the file, line and column). A multi-valued column takes no
 * default_value; the separator may not be the delimiter, a quote or a line
 * break. A zero separator means a scalar column. */
typedef struct loom_csv_column {
  const char *name;          /* NULL: take it from the header (header must be on) */
  loom_dtype dtype;          /* LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64, LOOM_STRING */
  const char *default_value; /* used for an empty field; NULL = an empty field is an error */
  int32_t select;            /* 0 = skip this column */
  char separator;            /* 0: one value per cell; else the separator of a multi-valued (ragged) cell */
} loom_csv_column;
/* loom_csv_options.header: the first line skipped without checking its names (TF's CsvDataset header=True). */
#define LOOM_CSV_HEADER_SKIP 2
typedef struct loom_csv_options {
  uint32_t struct_size; /* sizeof: set by loom_csv_options_default() */
  int32_t header;      /* 1: the first line names the columns; a selected column the options name must
                          carry that name there unless the header's field is empty (else INVALID_ARGUMENT
                          naming file:line, the header's name and the expected one). LOOM_CSV_HEADER_SKIP:
                          the first line is skipped unchecked (names given here rename columns). 0: none. */
  char delimiter;      /* ',' */
  int32_t ncolumns;    /* columns described (must equal the file's column count) */
  const loom_csv_column *columns;
  const char *label_name; /* one of the selected columns, or NULL */
} loom_csv_options;
/* header 1, delimiter ',', no columns (set ncolumns and columns), no label. */
LOOM_API loom_csv_options loom_csv_options_default(void);
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_csv(int nfiles, const char *const *paths, const loom_csv_options *opt,
                                        loom_status *st);
/* A whole CSV file straight into memory, no dataset to iterate: one tensor
 * per selected column, [rows] of the column's dtype (F32, F64, I32, I64 or
 * STRING); a multi-valued column gives two, "<name>" (values [nnz]) and
 * "<name>/row_splits" (int64 [rows + 1]). Columns are described and
 * parsed exactly as loom_dataset_csv does (header, names from the header,
 * defaults, quoting; errors name the file, line and column); label_name is
 * ignored (the label is one of the tensors). A file with no data rows gives
 * tensors of 0 rows. *n (the number of tensors), *names and *tensors are
 * set on success: the arrays, the names and the tensors belong to the
 * caller, freed with loom_csv_tensors_free; on failure they are NULL / 0. */
LOOM_API loom_code loom_csv_read_tensors(const char *path, const loom_csv_options *opt, int *n, char ***names,
                                         loom_tensor ***tensors, loom_status *st);
LOOM_API void loom_csv_tensors_free(int n, char **names, loom_tensor **tensors);

/* TFRecord files of serialized tf.Example, parsed with a feature spec
 * (tf.io.parse_single_example). One component per spec entry, named
 * spec[i].name, of spec[i].dtype; what it holds depends on the kind:
 *
 *  - FixedLenFeature (kind 0, varlen 0): shape given (ndim 0 = scalar);
 *    the feature must hold exactly numel(shape) values. default_value
 *    (numel elements) is used when the feature is missing (NULL default =
 *    missing is an error).
 *  - VarLenFeature (varlen 1, or kind LOOM_FEATURE_VAR_LEN): a 1-D
 *    component of the feature's values (missing = empty). Batching pads
 *    them with 0 / "" to the longest in the batch, and adds no mask (TF
 *    gives a SparseTensor; this is its to_dense). With ragged = 1 (what
 *    feature columns use) the feature is ragged instead: components
 *    "<name>" (the values) and "<name>/row_splits" ({0, k}), which batch
 *    merges without padding (TF's SparseTensor minus its column indices).
 *  - FixedLenSequenceFeature (kind LOOM_FEATURE_FIXED_LEN_SEQUENCE): the
 *    feature holds k * numel(shape) values (k >= 0) and becomes a [k] +
 *    shape component (spec dims [-1] + shape); a count that is not a
 *    multiple of numel(shape) is an error naming the feature, file and
 *    record. A missing feature is an error unless allow_missing (then k =
 *    0). default_value is NULL or ONE element of dtype: the value batching
 *    pads shorter sequences with (to the longest in the batch; NULL = 0 /
 *    ""), as tf.io.parse_example does. shape's dims must be >= 1 and ndim
 *    <= LOOM_MAX_DIMS - 2 (room for the sequence and batch dims).
 *  - SparseFeature (kind LOOM_FEATURE_SPARSE, 1-D): reads int64 indices
 *    from the feature index_key and values of dtype from value_key (equal
 *    counts, else an error; a missing one counts as empty). Datasets have
 *    no SparseTensor, so the component is the dense equivalent, as
 *    tf.sparse.to_dense would give: a [size] tensor with the values at
 *    their indices and 0 / "" elsewhere. An index outside [0, size) and an
 *    index given twice are errors naming the feature, file and record
 *    (to_dense would reject both). already_sorted is accepted and has no
 *    effect on the dense result. ndim must be 0 (size is the shape) and
 *    default_value NULL. With ragged = 1 the feature is ragged instead
 *    ("<name>" + "<name>/row_splits"): the row holds the values in
 *    ascending index order (in the given order when already_sorted), the
 *    indices themselves are dropped (the same checks apply); to keep ids
 *    with weights, read index_key and value_key as two ragged VarLen
 *    features (their row_splits agree).
 *
 * The fields after default_value may be left zero: kind 0 means FixedLen,
 * or VarLen when varlen is 1.
 * loom_dataset_tfrecord checks the spec: a kind out of range, varlen with
 * another kind, allow_missing / index_key / value_key / size /
 * already_sorted on a kind that has no such field, NULL or empty keys,
 * size <= 0, a bad rank or dims, and a dtype other than float32, int64 and
 * string are INVALID_ARGUMENT naming the spec entry. (Source compatible:
 * code written for the old struct needs a rebuild, as the struct grew;
 * -Wextra flags positional initialisers that stop before the new fields,
 * designated ones such as {.name = "x", .dtype = LOOM_F32} are quiet.)
 *
 * Checks both masked CRCs of every record. Errors: DATA_LOSS for framing
 * (truncation, CRC mismatch), INVALID_ARGUMENT for a record that is not a
 * tf.Example or does not match the spec, each naming the file and the
 * record index. ragged on another kind is INVALID_ARGUMENT naming the
 * entry. Components come in spec order, a ragged entry's row_splits right
 * after its values (label_name must name a dense entry). */
typedef enum loom_feature_kind {
  LOOM_FEATURE_FIXED_LEN = 0,          /* FixedLenFeature (VarLenFeature when varlen = 1) */
  LOOM_FEATURE_VAR_LEN = 1,            /* VarLenFeature */
  LOOM_FEATURE_FIXED_LEN_SEQUENCE = 2, /* FixedLenSequenceFeature */
  LOOM_FEATURE_SPARSE = 3              /* SparseFeature, parsed to its dense [size] equivalent */
} loom_feature_kind;
typedef struct loom_feature_spec {
  const char *name;
  loom_dtype dtype;          /* LOOM_F32 (float_list), LOOM_I64 (int64_list), LOOM_STRING (bytes_list) */
  int32_t varlen;            /* 1: VarLenFeature */
  int32_t ndim;
  int64_t dims[8];
  const void *default_value; /* numel elements of dtype (const char *const * for strings), or NULL;
                              * FIXED_LEN_SEQUENCE: one element, the batch padding value */
  /* ---- optional (zero: the defaults above) ---- */
  int32_t kind;              /* a loom_feature_kind */
  int32_t allow_missing;     /* FIXED_LEN_SEQUENCE: a missing feature is an empty sequence */
  const char *index_key;     /* SPARSE: the int64_list feature with the indices */
  const char *value_key;     /* SPARSE: the feature with the values (of dtype) */
  int64_t size;              /* SPARSE: the dense length (> 0) */
  int32_t already_sorted;    /* SPARSE: accepted (TF's flag); no effect on the dense result */
  int32_t ragged;            /* VAR_LEN / SPARSE: 1 = ragged components (values + "<name>/row_splits") */
} loom_feature_spec;
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_tfrecord(int nfiles, const char *const *paths, int nspec,
                                             const loom_feature_spec *spec, const char *label_name,
                                             loom_status *st);
/* Compressed TFRecord files (TF's compression_type): the whole file is
 * the record stream through deflate in a gzip wrapper ("GZIP") or a zlib
 * wrapper ("ZLIB"), as tf.io.TFRecordWriter writes them; concatenated
 * gzip members are read in sequence. Reading is explicit, as in TF: with
 * NONE (the default, and what loom_dataset_tfrecord uses) a file that
 * starts with the gzip magic 1f 8b or a zlib header (and is not a valid
 * TFRecord) is DATA_LOSS saying that it looks GZIP- / ZLIB-compressed and
 * naming the option to pass. AUTO picks per file: a valid record header
 * -> NONE, the gzip magic -> GZIP, a zlib header -> ZLIB. A truncated or
 * corrupt compressed stream is DATA_LOSS naming the file, the record
 * index and its uncompressed byte offset; memory grows with the bytes
 * actually decompressed, never to a length a corrupt header claims. */
typedef enum loom_tfrecord_compression {
  LOOM_TFRECORD_NONE = 0,
  LOOM_TFRECORD_GZIP = 1,
  LOOM_TFRECORD_ZLIB = 2,
  LOOM_TFRECORD_AUTO = 3 /* reading only */
} loom_tfrecord_compression;
typedef struct loom_tfrecord_options {
  uint32_t struct_size; /* sizeof: set by loom_tfrecord_options_default() */
  int32_t compression; /* a loom_tfrecord_compression */
} loom_tfrecord_options;
LOOM_API loom_tfrecord_options loom_tfrecord_options_default(void); /* NONE */
/* loom_dataset_tfrecord with options (opt NULL = defaults); an unknown
 * compression is INVALID_ARGUMENT. New dataset (NULL on failure); caller
 * frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_tfrecord_ex(int nfiles, const char *const *paths, int nspec,
                                                const loom_feature_spec *spec, const char *label_name,
                                                const loom_tfrecord_options *opt, loom_status *st);
/* Writes one serialized tf.Example per call (for tests and tools). */
typedef struct loom_tfrecord_writer loom_tfrecord_writer;
/* A new writer (NULL on failure); caller frees it with
 * loom_tfrecord_writer_close. */
LOOM_API loom_tfrecord_writer *loom_tfrecord_writer_new(const char *path, loom_status *st);
LOOM_API loom_code loom_tfrecord_writer_write(loom_tfrecord_writer *w, const void *record, size_t n, loom_status *st);
/* Serializes a tf.Example with n features (each tensor flattened into its
 * list by dtype: float32 -> float_list, int32/int64 -> int64_list, string
 * -> bytes_list) and writes it. */
LOOM_API loom_code loom_tfrecord_writer_write_example(loom_tfrecord_writer *w, int n, const char *const *names,
                                                      const loom_tensor *const *values, loom_status *st);
LOOM_API loom_code loom_tfrecord_writer_close(loom_tfrecord_writer *w, loom_status *st); /* frees */
/* The same tf.Example serialization without a file: a new scalar string
 * tensor holding the bytes (free with loom_tensor_free; read with
 * loom_tensor_get_string), NULL on error (a NULL name or value, or a bad
 * dtype, named). What a binding feeds the "inputs" of an export's
 * classify / regress signatures (loom_parsing_serving_input_fn). */
LOOM_API loom_tensor *loom_example_serialize(int n, const char *const *names, const loom_tensor *const *values,
                                             loom_status *st);
/* A writer of a compressed file (compression NONE, GZIP or ZLIB; AUTO is
 * INVALID_ARGUMENT); close finishes the stream. */
LOOM_API loom_tfrecord_writer *loom_tfrecord_writer_new_compressed(const char *path, int compression,
                                                                   loom_status *st);

/* Writes every element of ds (from a reset, to its end) as one tf.Example
 * per record to path (compression NONE, GZIP or ZLIB), so that
 * tf.data.TFRecordDataset(path, compression_type=...) +
 * tf.io.parse_single_example read it back: a dense component becomes a
 * feature of its name with its values flattened (float32/float64 ->
 * float_list, int32/int64/uint8/bool -> int64_list, string -> bytes_list:
 * read it with FixedLenFeature(shape, dtype)); a ragged pair ("x" +
 * "x/row_splits") becomes the feature "x" holding the row's values (read
 * it with VarLenFeature, or loom's ragged = 1), the row_splits component
 * is not written. Write before batching: an element whose ragged pair
 * holds more than one row is INVALID_ARGUMENT naming the component (a
 * batched dense component would be written as one flat record). ds is
 * not taken over (the caller still frees it) and is left at its end.
 * *nrecords (may be NULL) gets the count written. Errors from ds pass
 * through; the file then holds the records written so far. */
LOOM_API loom_code loom_dataset_write_tfrecord(loom_dataset *ds, const char *path, int compression,
                                               int64_t *nrecords, loom_status *st);

/* ---- raw records (tf.data.TFRecordDataset, TextLineDataset,
 * FixedLengthRecordDataset) ----
 * One scalar string component per element (named opt->name, "record" when
 * NULL or empty), the files read in order:
 *  - LOOM_RECORDS_TFRECORD: each record's bytes (both masked CRCs checked;
 *    framing errors are DATA_LOSS naming the file, record and offset);
 *    compression NONE, GZIP, ZLIB or AUTO as loom_dataset_tfrecord_ex.
 *  - LOOM_RECORDS_TEXT_LINE: each line without its "\n" or "\r\n"; a last
 *    line without a line break is a line; an empty file has none.
 *  - LOOM_RECORDS_FIXED_LENGTH: header_bytes skipped, then records of
 *    record_bytes up to the last footer_bytes bytes. As in TF, a body
 *    (the file less header and footer) that is not a multiple of
 *    record_bytes, or a file shorter than header + footer, is
 *    INVALID_ARGUMENT naming the file and the lengths (after the file's
 *    whole records).
 * Text and fixed-length files take compression NONE, GZIP (concatenated
 * members read in sequence) or ZLIB; a corrupt or truncated stream is
 * DATA_LOSS naming the file and the uncompressed offset. Bad options
 * (unknown format or compression, record_bytes <= 0, negative header or
 * footer, sizes on another format) are INVALID_ARGUMENT; a missing file
 * is NOT_FOUND. New dataset (NULL on failure); caller frees with
 * loom_dataset_free. */
typedef enum loom_records_format {
  LOOM_RECORDS_TFRECORD = 0,
  LOOM_RECORDS_TEXT_LINE = 1,
  LOOM_RECORDS_FIXED_LENGTH = 2
} loom_records_format;
typedef struct loom_records_options {
  uint32_t struct_size; /* sizeof: set by loom_records_options_default() */
  int32_t format;       /* a loom_records_format */
  int32_t compression;  /* a loom_tfrecord_compression */
  int64_t record_bytes, header_bytes, footer_bytes; /* FIXED_LENGTH */
  const char *name;     /* the component's name (copied) */
} loom_records_options;
LOOM_API loom_records_options loom_records_options_default(void); /* TFRECORD, NONE, "record" */
LOOM_API loom_dataset *loom_dataset_records(int nfiles, const char *const *paths, const loom_records_options *opt,
                                            loom_status *st);

/* ---- tf.io.parse_example as a graph op (LoomParseExample) ----
 * Parses serialized, a string vector [B] of serialized tf.Example, by spec
 * (nspec entries) inside the graph, so that an exported model reads
 * tf.Example itself (the parsing serving input receiver,
 * loom_feature_columns.h). Entries: FixedLenFeature (kind FIXED_LEN,
 * varlen 0: dtype F32/I64/STRING, shape ndim <= 7 / dims >= 0,
 * default_value of numel elements or NULL) -> one output [B, dims...];
 * VarLenFeature (kind VAR_LEN or varlen 1: dtype; ragged is implied) ->
 * two: values [nnz] and row_splits int64 [B + 1] (loom_sparse.h).
 * out[] gets them in spec order and must hold cap >=
 * loom_parse_example_num_outputs(nspec, spec) entries. Returns the number
 * written; 0 on a bad spec (a sticky graph error naming the feature;
 * FixedLenSequence and Sparse kinds are UNIMPLEMENTED here). At run time
 * (host pass) the same rules as the TFRecord dataset's: a missing FixedLen
 * feature without a default, a list of the wrong kind (float_list for an
 * int64 spec ...) or length, and bytes that are not a tf.Example fail the
 * run with INVALID_ARGUMENT naming the feature and "serialized example
 * <row>". The node keeps its spec in constant inputs, so it survives
 * loom_export_write / loom_predictor_load. */
LOOM_API int loom_parse_example_num_outputs(int nspec, const loom_feature_spec *spec);
LOOM_API int loom_parse_example(loom_graph *g, loom_output serialized, int nspec, const loom_feature_spec *spec,
                                int cap, loom_output *out, const char *name);

/* ---- tf.io decoders as graph ops (what a traced Dataset.map uses) ----
 * loom_decode_raw: tf.io.decode_raw. Each string of bytes [...] is
 * reinterpreted as out_type (LOOM_U8, LOOM_I32, LOOM_I64, LOOM_F32 or
 * LOOM_F64; little_endian 1 = the bytes are little-endian, else big-endian)
 * -> [..., n]; every string must have the same length, a multiple of the
 * type's size (else the run fails with INVALID_ARGUMENT naming the
 * element). n comes from the data (the op runs in the host pass).
 * loom_string_to_number: tf.strings.to_number (out_type F32, F64, I32 or
 * I64; spaces around the number allowed; a string that is not a number of
 * that type fails the run naming the element).
 * loom_decode_csv: tf.io.decode_csv. records (string, any shape) are CSV
 * lines; out[0..ncols) (one per record_defaults[i], the records' shape)
 * get the fields' values of record_defaults[i]'s dtype (F32, F64, I32, I64,
 * STRING). A default with one element fills an empty field (or one equal
 * to na_value, NULL = none); a default with zero elements makes the column
 * required (an empty field fails the run naming field and record).
 * use_quote_delim: RFC 4180 quotes ("" inside a quoted field is a quote);
 * else quotes are ordinary bytes. nselect 0: a record must have exactly
 * ncols fields; else select_cols[0..nselect) (nselect == ncols, strictly
 * increasing) picks the columns and later fields are not read. Returns
 * ncols, 0 on a bad argument (a sticky graph error). The defaults are
 * copied into the graph as constants. */
LOOM_API loom_output loom_decode_raw(loom_graph *g, loom_output bytes, loom_dtype out_type, int little_endian,
                                     const char *name);
LOOM_API loom_output loom_string_to_number(loom_graph *g, loom_output x, loom_dtype out_type, const char *name);
LOOM_API int loom_decode_csv(loom_graph *g, loom_output records, int ncols, const loom_tensor *const *record_defaults,
                             char field_delim, int use_quote_delim, const char *na_value, int nselect,
                             const int64_t *select_cols, loom_output *out, const char *name);

/* Dataset.from_generator: elements made by a callback. Component i is
 * names[i] of dtypes[i] with rank ndims[i] and dims (the ndims[i] entries
 * after those of the components before it; -1 = any size); label_name
 * (NULL = none) names the label component. next fills out[0..n) (NULL on
 * entry) with new tensors the dataset takes over and returns OK, or
 * OUT_OF_RANGE when the pass has ended, or an error with st set, which
 * ends iteration. Each element must fit the spec (INVALID_ARGUMENT names
 * the component). reset (NULL = none) starts a new pass (repeat calls it);
 * release (NULL = none) is called with user when the dataset is freed (not
 * when this fails). New dataset (NULL on failure); caller frees with
 * loom_dataset_free. */
typedef loom_code (*loom_generator_next_fn)(void *user, int n, loom_tensor **out, loom_status *st);
typedef loom_code (*loom_generator_reset_fn)(void *user, loom_status *st);
LOOM_API loom_dataset *loom_dataset_from_generator(int n, const char *const *names, const loom_dtype *dtypes,
                                                   const int32_t *ndims, const int64_t *dims, const char *label_name,
                                                   loom_generator_next_fn next, loom_generator_reset_fn reset,
                                                   void (*release)(void *user), void *user, loom_status *st);

/* ---- transformations (own their input) ---- */
/* fn maps an element in place: values[i] may be replaced (free the old
 * tensor) or modified; it must keep the spec's dtypes and ranks, and each
 * ragged pair consistent (checked: an error names the feature). Non-OK
 * ends iteration with that status. */
typedef loom_code (*loom_map_fn)(void *user, int n, loom_tensor **values, loom_status *st);
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_map(loom_dataset *in, loom_map_fn fn, void *user, loom_status *st);
/* Dataset.map with a traced function (what a binding builds from a Python
 * fn): every element of in is fed to inputs[i] <- component i (nin must
 * be in's component count, each input of the component's dtype; usually
 * placeholders) and outputs[0..nout) are run in a session of g (one
 * thread, one run per element) to make the new element, component i
 * named names[i], of outputs[i]'s dtype and static shape (-1 dims vary).
 * ragged (NULL = all dense): ragged[i] = 1 makes outputs i and i + 1 (the
 * int64 row_splits, named "<names[i]>/row_splits") an unbatched ragged
 * pair (values [k], splits {0, k}: tf.io.parse_single_example's
 * VarLenFeature), 2 a batched one (values [nnz], splits [B + 1]:
 * tf.io.parse_example's); ragged[i + 1] is then 0. label_name (NULL =
 * none) names the dense output that is the label. Takes over in and g
 * (also on failure; g is freed with the dataset). A failing run ends
 * iteration with its status, prefixed "map: the mapped function failed";
 * an output whose shape disagrees with its static shape, or an
 * inconsistent ragged pair, is INVALID_ARGUMENT naming the component.
 * New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_map_graph(loom_dataset *in, loom_graph *g, int nin, const loom_output *inputs,
                                              int nout, const char *const *names, const loom_output *outputs,
                                              const int32_t *ragged, const char *label_name, loom_status *st);
/* Dataset.skip: drops the first count elements of each pass (count < 0:
 * all of them). New dataset (NULL on failure); caller frees with
 * loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_skip(loom_dataset *in, int64_t count, loom_status *st);
/* Dataset.shard: element i of each pass of in (counted from 0) is kept when
 * i % num_shards == index (a worker's share of a shared input). num_shards
 * >= 1 and 0 <= index < num_shards, else INVALID_ARGUMENT. Takes over in
 * (also on failure). New dataset (NULL on failure); caller frees with
 * loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_shard(loom_dataset *in, int64_t num_shards, int64_t index, loom_status *st);
/* Dataset.filter with a traced predicate: each element of in is fed to
 * inputs[i] <- component i (as loom_dataset_map_graph) and kept when the
 * scalar bool output predicate is true. Takes over in and g (also on
 * failure). A failing run ends iteration with its status, prefixed
 * "filter: the predicate failed". New dataset (NULL on failure); caller
 * frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_filter_graph(loom_dataset *in, loom_graph *g, int nin, const loom_output *inputs,
                                                 loom_output predicate, loom_status *st);
/* Dataset.interleave over n datasets made beforehand (one per input
 * element, e.g. one TFRecord file each), as TF orders it: a cycle of
 * cycle_length slots, each holding an open input; block_length elements
 * from a slot, then the next slot; an exhausted input frees its slot, and
 * an empty slot takes the next unopened input (reset at that point). With
 * cycle_length 1 it is the inputs one after another (flat_map). All inputs
 * must have the same components (names, dtypes, ranks, ragged pairs,
 * label); a dim that differs between them varies. Takes over the inputs
 * (also on failure). cycle_length, block_length >= 1. New dataset (NULL on
 * failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_interleave(int n, loom_dataset *const *inputs, int64_t cycle_length,
                                               int64_t block_length, loom_status *st);
/* Dataset.zip: the components of inputs[0..n) side by side (input 0's
 * first), one element of each per element, ending when the first input
 * ends. Component names must be unique across the inputs (else
 * INVALID_ARGUMENT naming the name); at most one input may have a label
 * (it stays the label). Takes over the inputs (also on failure). New
 * dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_zip(int n, loom_dataset *const *inputs, loom_status *st);
/* Fills a buffer of buffer_size (>= 1) elements and draws uniformly from it
 * (Philox with seed); reshuffle_each_iteration: a reset draws a new order
 * (a function of seed and the pass number), else every pass repeats the
 * first pass's order. */
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_shuffle(loom_dataset *in, int64_t buffer_size, uint64_t seed,
                                            int reshuffle_each_iteration, loom_status *st);
/* Stacks batch_size consecutive elements; the last smaller batch is kept
 * unless drop_remainder. A ragged pair is merged instead (values
 * concatenated, [nnz]; row_splits [B + 1], [batch_size + 1] with
 * drop_remainder); batching an already batched ragged pair again is
 * INVALID_ARGUMENT (no nested ragged rows). An element whose pair is
 * inconsistent (splits not {0, k} with k values) is an error naming the
 * feature. */
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_batch(loom_dataset *in, int64_t batch_size, int drop_remainder, loom_status *st);
/* count passes (count < 0: forever); resets the input between passes. A
 * pass that yields nothing ends the repetition (no endless loop). */
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_repeat(loom_dataset *in, int64_t count, loom_status *st);
/* Produces up to buffer_size elements ahead on a background thread
 * (buffer_size >= 1, or -1 = AUTOTUNE, taken as 2). The thread starts at the
 * first next; reset and free stop and join it (also mid-stream). */
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_prefetch(loom_dataset *in, int64_t buffer_size, loom_status *st);
/* The first count elements (count < 0: all). */
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_take(loom_dataset *in, int64_t count, loom_status *st);
/* Dataset.cache(filename): the first complete pass reads the input and
 * keeps a copy of every element; later passes (after loom_dataset_reset,
 * e.g. each epoch of a repeat above it) replay the copy and never touch
 * the input again.
 *  - filename NULL or "": the copy is in memory (freed with the dataset).
 *  - otherwise a file: the first pass writes "<filename>.partial" under a
 *    lock file "<filename>.lockfile" and renames it to filename when the
 *    input ends; a dataset whose filename already exists reads it (another
 *    dataset object, another process, a later run) without reading its
 *    input. The file is TFRecord-framed (CRC32C per record) with a header
 *    (component names, dtypes) and a trailer (the element count): a file
 *    that is truncated, corrupt, or made for other components is DATA_LOSS
 *    / INVALID_ARGUMENT naming the file (not rebuilt: TF reports a bad
 *    cache too; delete the file to rebuild it). A lock file held by a
 *    live process (another dataset writing the same cache) is
 *    ALREADY_EXISTS naming the lock file; one left by a process that no
 *    longer runs is taken over.
 * A pass that stops early (reset or free before the end of the input)
 * discards what it copied, as TF does: the next pass reads the input
 * again. Elements of any dtype and shape (ragged pairs included) are kept
 * as they come. New dataset (NULL on failure); caller frees with
 * loom_dataset_free. */
LOOM_API loom_dataset *loom_dataset_cache(loom_dataset *in, const char *filename, loom_status *st);

/* numpy_input_fn: from_tensors + (shuffle with buffer = n when shuffle,
 * seed) + repeat(num_epochs; <= 0 = forever) + batch(batch_size). labels
 * (may be NULL) becomes the label component "label" (so no feature may be
 * called "label"); batches cross epoch boundaries as in TF (10 examples,
 * batch 4, 2 epochs: five batches of 4). */
/* New dataset (NULL on failure); caller frees with loom_dataset_free. */
LOOM_API loom_dataset *loom_numpy_input(int n, const char *const *names, const loom_tensor *const *arrays,
                                        const loom_tensor *labels, int64_t batch_size, int64_t num_epochs,
                                        int shuffle, uint64_t seed, loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
