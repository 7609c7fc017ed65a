/* kernels/cpu/parse_example.h - LoomParseExample (tf.io.parse_example of a
 * batch of serialized tf.Example into FixedLen dense and VarLen ragged
 * outputs; ops/feature.c defines the op). Host only. */
#ifndef LOOM_KERNELS_CPU_PARSE_EXAMPLE_H
#define LOOM_KERNELS_CPU_PARSE_EXAMPLE_H
#include "kernels/kernel.h"

/* The spec table (input 2, int64 [nspec, LOOM_PE_W]), one row per feature:
 * kind (0 FixedLen, 1 VarLen), dtype (F32, I64, STRING), has_default
 * (FixedLen: 1 when a default tensor follows among inputs 3..), ndim (of
 * one example's value, <= 7), dims[8]. */
enum { LOOM_PE_KIND = 0, LOOM_PE_DTYPE = 1, LOOM_PE_HASDEF = 2, LOOM_PE_NDIM = 3, LOOM_PE_DIMS = 4, LOOM_PE_W = 12 };
enum { LOOM_PE_FIXED = 0, LOOM_PE_VARLEN = 1 };

/* Parses every row (out NULL: counts only, into nnz[spec] for VarLen
 * entries; else fills out[] whose shapes are already the value shapes).
 * Errors go to msg ("serialized example 3: feature 'age' is required but
 * missing ..."). */
loom_code loom__parse_example_run(int nin, const loom_buf *const *in, loom_buf *const *out, int64_t *nnz,
                                  loom_strarena *strings, char *msg, size_t msglen);
loom_code loom__k_parse_example(const loom_kctx *ctx);

#endif
