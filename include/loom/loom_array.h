/* loom_array.h - builders of the array op family. Each adds one node to g and
 * returns its output; name may be NULL (the op's name, made unique). Errors
 * follow the sticky rule of loom_graph.h.
 *
 * Data-movement ops work on every fixed-size dtype (float32, float64, int32,
 * int64, uint8, bool); the pure views (reshape, expand_dims, squeeze,
 * stop_gradient), gather and tile also accept strings. Axes may be negative (counted from the
 * end). Arrays of dims hold at most LOOM_MAX_DIMS entries.
 *
 * Multi-output builders (split, split_v, unstack, top_k) return LOOM_OK, or
 * the graph's sticky error code; on error every requested output is still
 * filled with the harmless placeholder output, so straight-line model code
 * keeps working and loom_graph_status() reports the first error.
 */
#ifndef LOOM_ARRAY_H
#define LOOM_ARRAY_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- shape views (no copy: the output shares x's memory) ---- */

/* x with a new shape of ndim dims; one dim may be -1 (inferred from the
 * element count; kept unknown at build time when x has unknown dims).
 * Errors: element-count mismatch, more than one -1. (TF Reshape) */
LOOM_API loom_output loom_reshape(loom_graph *g, loom_output x, int ndim, const int64_t *dims, const char *name);
/* x reshaped to like's shape (element counts must match); like only
 * supplies the shape and gets no gradient. */
LOOM_API loom_output loom_reshape_like(loom_graph *g, loom_output x, loom_output like, const char *name);
/* Inserts a size-1 dim at axis, in [-(rank+1), rank]. (TF ExpandDims) */
LOOM_API loom_output loom_expand_dims(loom_graph *g, loom_output x, int64_t axis, const char *name);
/* Removes the given size-1 dims; naxes == 0 removes every size-1 dim (then
 * every dim must be known at build time). Squeezing a dim that is not 1 is
 * an error. (TF Squeeze) */
LOOM_API loom_output loom_squeeze(loom_graph *g, loom_output x, int naxes, const int64_t *axes, const char *name);
/* x itself; gradients do not flow through it. (TF StopGradient) */
LOOM_API loom_output loom_stop_gradient(loom_graph *g, loom_output x, const char *name);

/* ---- broadcasting, permuting, joining, cutting ---- */

/* x broadcast (NumPy rules) to exactly like's shape; like gets no gradient. */
LOOM_API loom_output loom_broadcast_like(loom_graph *g, loom_output x, loom_output like, const char *name);
/* x broadcast to the known shape dims[0..ndim). (TF BroadcastTo) */
LOOM_API loom_output loom_broadcast_to(loom_graph *g, loom_output x, int ndim, const int64_t *dims, const char *name);
/* out.dims[j] = x.dims[perm[j]]; perm must be a permutation of [0, rank).
 * nperm == 0 (or perm NULL) reverses the dims, like TF's default. */
LOOM_API loom_output loom_transpose(loom_graph *g, loom_output x, int nperm, const int64_t *perm, const char *name);
/* Joins n >= 1 inputs along axis; dtypes, ranks and the other dims must
 * match. (TF ConcatV2) */
LOOM_API loom_output loom_concat(loom_graph *g, int n, const loom_output *inputs, int64_t axis, const char *name);
/* num equal pieces along axis into outs[0..num); the dim must divide by num.
 * (TF Split) */
LOOM_API loom_code loom_split(loom_graph *g, loom_output x, int num, int64_t axis, loom_output *outs,
                              const char *name);
/* n (1..LOOM_MAX_DIMS) pieces of sizes[i] along axis (one size may be -1 =
 * the rest) into outs[0..n). (TF SplitV) */
LOOM_API loom_code loom_split_v(loom_graph *g, loom_output x, int n, const int64_t *sizes, int64_t axis,
                                loom_output *outs, const char *name);
/* The block starting at begin[i] of size[i] (-1 = to the end) in each dim;
 * begin and size have rank(x) entries. (TF Slice) */
LOOM_API loom_output loom_slice(loom_graph *g, loom_output x, const int64_t *begin, const int64_t *size,
                                const char *name);
/* Stacks n >= 1 same-shaped inputs along a new axis in [-(rank+1), rank]. (TF Pack) */
LOOM_API loom_output loom_stack(loom_graph *g, int n, const loom_output *inputs, int64_t axis, const char *name);
/* Unstacks dim axis (which must equal num) into outs[0..num). (TF Unpack) */
LOOM_API loom_code loom_unstack(loom_graph *g, loom_output x, int num, int64_t axis, loom_output *outs,
                                const char *name);
/* Repeats x multiples[i] >= 0 times along each dim (rank(x) entries). (TF Tile) */
LOOM_API loom_output loom_tile(loom_graph *g, loom_output x, const int64_t *multiples, const char *name);
/* Pads each dim with before[i] and after[i] (>= 0) elements of value
 * (converted to x's dtype). (TF PadV2) */
LOOM_API loom_output loom_pad(loom_graph *g, loom_output x, const int64_t *before, const int64_t *after, double value,
                              const char *name);

/* ---- indexing ---- */

/* Slices of params along axis picked by indices (int32/int64, any rank):
 * out.shape = params.shape[:axis] + indices.shape + params.shape[axis+1:].
 * An index outside [0, params.dims[axis]) fails the run with
 * INVALID_ARGUMENT naming the index and the range. (TF GatherV2) */
LOOM_API loom_output loom_gather(loom_graph *g, loom_output params, loom_output indices, int64_t axis,
                                 const char *name);
/* A copy of tensor [N,...] with updates[i] ([k,...]) added to row
 * indices[i] (indices [k] or [k,1], int32/int64); duplicates add up. Numeric
 * dtypes. A bad index fails the run. (TF TensorScatterAdd on rows) */
LOOM_API loom_output loom_scatter_add(loom_graph *g, loom_output tensor, loom_output indices, loom_output updates,
                                      const char *name);
/* Like loom_scatter_add but rows are replaced; with duplicates the last one
 * wins. (TF TensorScatterUpdate on rows) */
LOOM_API loom_output loom_scatter_update(loom_graph *g, loom_output tensor, loom_output indices, loom_output updates,
                                         const char *name);
/* out[s] = sum of data[i] (rows along dim 0) with segment_ids[i] == s, for
 * s in [0, num_segments); segment_ids is [data.dims[0]] int32/int64; an id
 * outside [0, num_segments) fails the run. float32/float64 (sum: also int32,
 * int64). (TF UnsortedSegmentSum) */
LOOM_API loom_output loom_unsorted_segment_sum(loom_graph *g, loom_output data, loom_output segment_ids,
                                               int64_t num_segments, const char *name);
/* Segment sum divided by the segment's row count (empty segments are 0). */
LOOM_API loom_output loom_unsorted_segment_mean(loom_graph *g, loom_output data, loom_output segment_ids,
                                                int64_t num_segments, const char *name);
/* Segment sum divided by sqrt(row count) (empty segments are 0). */
LOOM_API loom_output loom_unsorted_segment_sqrt_n(loom_graph *g, loom_output data, loom_output segment_ids,
                                                  int64_t num_segments, const char *name);
/* One-hot encoding of indices (int32/int64/uint8) with depth entries along
 * axis (-1 = a new last axis); on/off values converted to dtype
 * (LOOM_DTYPE_INVALID = float32). Indices outside [0, depth) give all-off
 * rows. (TF OneHot) */
LOOM_API loom_output loom_one_hot(loom_graph *g, loom_output indices, int64_t depth, double on_value,
                                  double off_value, int64_t axis, loom_dtype dtype, const char *name);
/* The k largest entries along the last dim, sorted descending (ties: lower
 * index first; NaN ranks highest): *values (x's dtype) and *indices (int32),
 * both [..., k]. k larger than the last dim is an error. (TF TopKV2) */
LOOM_API loom_code loom_top_k(loom_graph *g, loom_output x, int64_t k, loom_output *values, loom_output *indices,
                              const char *name);

/* ---- conversion and creation ---- */

/* Converts between the numeric dtypes and bool. Float to integer truncates
 * toward zero (NaN -> 0, out-of-range values saturate); to bool: x != 0;
 * integer narrowing wraps. (TF Cast) */
LOOM_API loom_output loom_cast(loom_graph *g, loom_output x, loom_dtype dtype, const char *name);
/* A tensor of the known shape dims filled with the scalar value (its dtype).
 * (TF Fill) */
LOOM_API loom_output loom_fill(loom_graph *g, int ndim, const int64_t *dims, loom_output value, const char *name);
/* Zeros (ones) with x's shape and dtype. Not differentiable. */
LOOM_API loom_output loom_zeros_like(loom_graph *g, loom_output x, const char *name);
LOOM_API loom_output loom_ones_like(loom_graph *g, loom_output x, const char *name);
/* x's shape as a [rank] int32 (dtype LOOM_I32 or LOOM_DTYPE_INVALID) or
 * int64 tensor. Not differentiable. (TF Shape) */
LOOM_API loom_output loom_shape(loom_graph *g, loom_output x, loom_dtype dtype, const char *name);
/* start, start+delta, ... up to (not including) limit, of dtype float32
 * (LOOM_DTYPE_INVALID), float64, int32 or int64 (integral arguments);
 * ceil((limit-start)/delta) elements. delta == 0, or a delta pointing away
 * from limit, is an error (as in TF). Not differentiable. (TF Range) */
LOOM_API loom_output loom_range(loom_graph *g, double start, double limit, double delta, loom_dtype dtype,
                                const char *name);

#ifdef __cplusplus
}
#endif
#endif
