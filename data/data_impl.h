/* data/data_impl.h - internals of the datasets (loom_data.h).
 *
 * Every dataset starts with a struct loom_dataset (its element spec, a
 * vtable, sticky end/error state). Three ways to produce elements:
 *
 *  - general: vt->next fills the element's tensors (reused from call to
 *    call; map, CSV, TFRecord, batch, prefetch).
 *  - indices: a dataset with `ra` set yields row numbers of the random-
 *    access source `ra` (from_tensors, IDX) through vt->next_index; shuffle,
 *    repeat and take pass indices through when their input does. A batch on
 *    such an input gathers batch_size indices and lets the source copy the
 *    rows straight into the batch tensors (ra->vt->copy_rows): no element
 *    tensors, no allocation in steady state. A single element of an index
 *    dataset is produced the same way with one row.
 *  - rows (CSV): a dataset with next_rows set appends parsed rows to
 *    column buffers (loom_ds_rows below); take and repeat pass it through.
 *    A batch on such an input takes batch_size rows at once and turns the
 *    buffers into the batch tensors (strings: one block per tensor,
 *    loom__tensor_set_strings); no element tensors. A single element is
 *    one row through the same buffers.
 *
 * Internal header (not installed). */
#ifndef LOOM_DATA_IMPL_H
#define LOOM_DATA_IMPL_H
#include "engine/engine_api.h"
#include "loom/loom_data.h"

typedef struct loom_ds_comp {
  char *name;
  loom_dtype dtype;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS]; /* -1: varies from element to element */
  loom_tensor *pad;            /* owned scalar of dtype that batch pads varying dims with; NULL = 0 / "" */
  /* Ragged pairs (loom_data.h): the values component has ragged
   * LOOM__RAGGED_VALUES and partner = its row_splits component, which has
   * ragged LOOM__RAGGED_SPLITS and partner = the values. batched: the pair
   * holds a batch of rows (splits [B + 1]) rather than one row ({0, k}). */
  int32_t ragged;
  int32_t partner;
  int32_t batched;
} loom_ds_comp;
enum { LOOM__DENSE = 0, LOOM__RAGGED_VALUES = 1, LOOM__RAGGED_SPLITS = 2 };

typedef struct loom_ds_vtable loom_ds_vtable;
struct loom_ds_vtable {
  const char *kind; /* "batch", "tfrecord", ... (for messages) */
  /* General path: fill values[0..ncomp) (in/out as loom_dataset_next).
   * Returns OUT_OF_RANGE at the end. May be NULL when ra is always set. */
  loom_code (*next)(loom_dataset *ds, loom_tensor **values, loom_status *st);
  /* Index path (only called when ds->ra != NULL): the next row of ds->ra. */
  loom_code (*next_index)(loom_dataset *ds, int64_t *row, loom_status *st);
  loom_code (*reset)(loom_dataset *ds, loom_status *st);
  /* Frees what the dataset owns (its input included), not the struct. */
  void (*destroy)(loom_dataset *ds);
  /* Random-access sources only: copies rows idx[0..k) of component c into
   * dst, which already has dtype and k * row elements. */
  loom_code (*copy_rows)(loom_dataset *ds, int c, const int64_t *idx, int64_t k, loom_tensor *dst, loom_status *st);
  int64_t (*num_rows)(const loom_dataset *ds); /* random-access sources only */
};

/* ---- rows path (CSV): a batch built column by column ----
 * A source that can append parsed rows straight into column buffers sets
 * ds->next_rows; take and repeat pass it through when their input has it.
 * batch() then asks for up to batch_size rows and turns the buffers into
 * the batch tensors (loom__ds_rows_emit): no element tensors, no copy
 * through them, strings in one block per tensor. */
typedef struct loom_ds_rowcol {
  void *v;                /* values: numbers (dtype's size each), or for strings (offset, length) pairs into sb */
  int64_t nv, vcap;
  char *sb;               /* strings: the bytes, each followed by a NUL */
  size_t sbl, sbcap;
  int64_t *sp, spcap;     /* ragged values: row splits, rows + 1 of them */
} loom_ds_rowcol;
typedef struct loom_ds_rows {
  int64_t n; /* rows appended since the last reset */
  int ncomp;
  loom_ds_rowcol *col; /* per component of the source (a row_splits component's entry is unused) */
} loom_ds_rows;
/* Appends 1..want rows to rb; OUT_OF_RANGE when none is left. */
typedef loom_code (*loom_ds_rows_fn)(loom_dataset *ds, loom_ds_rows *rb, int64_t want, loom_status *st);

struct loom_dataset {
  const struct loom_ds_vtable *vt;
  loom_ds_rows_fn next_rows; /* rows path, or NULL */
  int32_t ncomp;
  loom_ds_comp *comp;
  int32_t label;
  loom_dataset *ra;    /* random-access source of this dataset's indices, or NULL */
  loom_status *st;     /* scratch status for the inner calls */
  loom_code state;     /* sticky: OUT_OF_RANGE or an error until reset */
  char state_msg[1024];
};
/* Allocates a zeroed dataset of `size` bytes (>= sizeof(loom_dataset)) with
 * ncomp components (names unset) and a scratch status. NULL + status on OOM. */
loom_dataset *loom__ds_new(size_t size, const loom_ds_vtable *vt, int ncomp, loom_status *st);
/* The index of label_name among names[0..n) (-1 when label_name is NULL), or -2 with INVALID_ARGUMENT
 * "who: label_name '...' is not one of the names". */
int loom__ds_label_index(int n, const char *const *names, const char *label_name, const char *who, loom_status *st);
/* Copies in's spec (names, dtypes, dims, label) into ds (same ncomp). */
loom_code loom__ds_copy_spec(loom_dataset *ds, const loom_dataset *in, loom_status *st);
loom_code loom__ds_set_comp(loom_dataset *ds, int i, const char *name, loom_dtype dt, int ndim, const int64_t *dims,
                            loom_status *st);
/* Sets component i's padding value (a copy of the scalar pad; NULL = 0 / ""). */
loom_code loom__ds_set_pad(loom_dataset *ds, int i, const loom_tensor *pad, loom_status *st);
/* Makes components vi (values: name, dtype, [-1]) and vi + 1 ("<name>/row_splits",
 * int64 [2]) an unbatched ragged pair. */
loom_code loom__ds_set_ragged(loom_dataset *ds, int vi, const char *name, loom_dtype dt, loom_status *st);
/* Checks a file dataset's paths before it is built: none NULL
 * (INVALID_ARGUMENT "who: paths[i] is NULL") and each opens for reading
 * (NOT_FOUND "who: cannot open path: reason"). */
loom_code loom__ds_check_paths(const char *who, int nfiles, const char *const *paths, loom_status *st);
/* Checks every ragged pair of an element (values[] as loom_dataset_next
 * gives them): both present, splits int64 1-D starting at 0,
 * non-decreasing, ending at the number of values (rank 1); an unbatched
 * pair's splits have 2 entries. Errors (INVALID_ARGUMENT) start with who
 * and name the feature. */
loom_code loom__ds_check_ragged(const loom_dataset *ds, loom_tensor *const *values, const char *who, loom_status *st);
/* Checks a row_splits tensor against nvalues values; what names it in
 * errors ("feature 'x'"); rows >= 0: the splits must have rows + 1 entries. */
loom_code loom__check_splits(const loom_tensor *splits, int64_t nvalues, int64_t rows, const char *who,
                             const char *feature, loom_status *st);
/* The common prologue of a transformation: a new dataset of size bytes
 * with in's spec (names, dtypes, dims, label). On failure in is freed and
 * NULL returned (the transformations' ownership rule). */
loom_dataset *loom__ds_transform_new(loom_dataset *in, size_t size, const loom_ds_vtable *vt, loom_status *st);
/* Frees the spec, the scratch status and the struct (after vt->destroy). */
void loom__ds_free_shell(loom_dataset *ds);

/* The next row index of an index dataset (sticky state like loom_dataset_next). */
loom_code loom__ds_next_index(loom_dataset *ds, int64_t *row, loom_status *st);

/* Rows path: rb sized for ds's components (loom__ds_rows_free releases it);
 * reset empties it (keeping the memory). */
loom_code loom__ds_rows_init(loom_ds_rows *rb, const loom_dataset *ds, loom_status *st);
void loom__ds_rows_reset(loom_ds_rows *rb, const loom_dataset *ds);
void loom__ds_rows_free(loom_ds_rows *rb);
/* ds->next_rows with the sticky state of loom_dataset_next. */
loom_code loom__ds_next_rows(loom_dataset *ds, loom_ds_rows *rb, int64_t want, loom_status *st);
/* rb's rows as tensors of ds's spec: batched: dims [n, ...], a ragged pair
 * values [nnz] + splits [n + 1]; else one element (n == 1: scalars, the
 * pair values [k] + splits {0, k}). */
loom_code loom__ds_rows_emit(const loom_dataset *ds, const loom_ds_rows *rb, loom_tensor **values, int batched,
                             loom_status *st);
/* Growth of a column (OOM: -1). */
int loom__ds_rowcol_grow(loom_ds_rowcol *c, int64_t need, size_t es);
int loom__ds_rowcol_grow_sb(loom_ds_rowcol *c, size_t need);
int loom__ds_rowcol_grow_sp(loom_ds_rowcol *c, int64_t need);

/* CSV numbers (data/csv.c): s[0..n) without a NUL; spaces and tabs around
 * are allowed. F32 / F64 into *d (F32: the float's value, exactly strtof),
 * I32 / I64 into *i (strtoll, range-checked). 0 on success. Fast for the
 * common decimal forms, strtof / strtod / strtoll otherwise. */
int loom__csv_parse_num(const char *s, size_t n, loom_dtype dt, double *d, int64_t *i);

/* Makes *t a tensor of dtype dt and the given shape: reused (reshaped in
 * place) when dtype and element count match, else freed and replaced. */
loom_code loom__ds_ensure(loom_tensor **t, loom_dtype dt, int ndim, const int64_t *dims, loom_status *st);
/* Hands src's content to *dst: swaps the pointers when *dst is NULL or a
 * runtime-owned tensor, copies into *dst when it is a wrapped tensor that
 * fits. */
loom_code loom__ds_hand_over(loom_tensor **dst, loom_tensor **src, loom_status *st);


/* ---- tf.Example (data_tfrecord.c), shared with the serving-input parsers ---- */
/* Serializes a tf.Example (as loom_tfrecord_writer_write_example); *out is
 * freed with loom__free. */
loom_code loom__example_serialize(int n, const char *const *names, const loom_tensor *const *values, uint8_t **out,
                                  size_t *len, loom_status *st);
/* Checks a feature spec list (names, dtypes, kinds, shapes, keys) and
 * builds the default tensors (*defaults: nspec entries, NULL where none or
 * varlen / sparse; for a FixedLenSequenceFeature the scalar padding value;
 * free each with loom_tensor_free and the array with loom__free). */
loom_code loom__example_spec_check(int nspec, const loom_feature_spec *spec, loom_tensor ***defaults,
                                   loom_status *st);
/* tf.io.parse_single_example of data[0..n) into out[0..nspec) (in/out as
 * loom_dataset_next). Errors name `path: record index` (or "serialized
 * example index" when path is NULL). spec[i].default_value is not read:
 * defaults[i] (from loom__example_spec_check) is. slot[i] (NULL = i) is
 * spec entry i's output index; a ragged entry fills out[slot[i]] (values)
 * and out[slot[i] + 1] (row_splits {0, k}). */
loom_code loom__example_parse(const uint8_t *data, size_t n, int nspec, const loom_feature_spec *spec,
                              const loom_tensor *const *defaults, const int *slot, loom_tensor **out, const char *path,
                              int64_t index, loom_status *st);

/* Elements in one element of component c. */
static inline int64_t loom__ds_row_numel(const loom_ds_comp *c) {
  int64_t n = 1;
  for (int i = 0; i < c->ndim; i++) n *= c->dims[i];
  return n;
}

#endif
