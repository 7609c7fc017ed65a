/* ops/sparse_internal.h - builders of internal sparse-family ops (not in
 * the public headers): used by feature_columns/layers.c. */
#ifndef LOOM_OPS_SPARSE_INTERNAL_H
#define LOOM_OPS_SPARSE_INTERNAL_H
#include "loom/loom.h"

/* Piece kinds of MultiHotConcat (kernels/cpu/sparse.h). */
enum {
  LOOM__MHC_DENSE = 0,    /* 1 input: float32 [B, w], copied */
  LOOM__MHC_RAGGED = 1,   /* 2 inputs: ids, row_splits: multi-hot of depth w (1 per id) */
  LOOM__MHC_RAGGED_W = 2, /* 3 inputs: ids, row_splits, weights: multi-hot adding the weights */
  LOOM__MHC_ONEHOT = 3    /* 1 input: int ids [B, n]: n one-hots of depth w side by side (n * w columns) */
};

/* concat(axis 1) of np pieces, each described by (kind[i], depth[i]) and
 * taking its inputs from in[] in order: one [B, total] float32 output
 * written in one pass (no piece is materialised). */
loom_output loom__multi_hot_concat(loom_graph *g, int np, const int32_t *kind, const int64_t *depth, int nin,
                                   const loom_output *in, const char *name);

/* The padding index of a ragged batch (RaggedPadIndex, ops/sparse.c): an
 * int64 [B, T, k] (keep_k) or [B, T] (k = 1) tensor whose slot is the value
 * that step reads, row_splits[B] for a padding slot (so gathering from the
 * values with one padding row appended gives the padded batch); T = the
 * longest row's ceil(length / k), computed in the session's host pass.
 * *lengths (may be NULL) = each row's ceil(length / k), [B] int64.
 * expected_lengths ({NULL, 0} = none): lengths the rows must have (another
 * column's), else the run fails naming the example. */
loom_output loom__ragged_pad_index(loom_graph *g, loom_output row_splits, loom_output expected_lengths, int64_t k,
                                   int keep_k, loom_output *lengths, const char *name);

#endif
