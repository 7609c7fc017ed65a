/* loom_random.h - builders of the random op family. Each adds one node to g and
 * returns its output; name may be NULL (the op's name, made unique). Errors
 * follow the sticky rule of loom_graph.h.
 *
 * Random numbers come from the counter-based generator Philox4x32-10. A value
 * is a pure function of (seed, seed2, its position in the tensor, the run
 * number of the node in its session plan): the same seeds give the same
 * sequence of tensors run after run in a new session, each run draws new
 * numbers, and results do not depend on the number of threads. seed = seed2 =
 * 0 is an ordinary (deterministic) seed. Shapes must be fully known (no -1).
 * dtype is LOOM_F32 or LOOM_F64. */
#ifndef LOOM_RANDOM_H
#define LOOM_RANDOM_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Uniform values in [lo, hi) (hi > lo). TF RandomUniform (scaled). */
LOOM_API loom_output loom_random_uniform(loom_graph *g, int ndim, const int64_t *dims, loom_dtype dtype, double lo,
                                         double hi, uint64_t seed, uint64_t seed2, const char *name);

/* Normal values with the given mean and stddev (> 0), Box-Muller. TF
 * RandomStandardNormal (scaled). */
LOOM_API loom_output loom_random_normal(loom_graph *g, int ndim, const int64_t *dims, loom_dtype dtype, double mean,
                                        double stddev, uint64_t seed, uint64_t seed2, const char *name);

/* Normal values resampled until within two standard deviations of the mean
 * (TF TruncatedNormal semantics): every value v has |v - mean| < 2*stddev. */
LOOM_API loom_output loom_truncated_normal(loom_graph *g, int ndim, const int64_t *dims, loom_dtype dtype,
                                           double mean, double stddev, uint64_t seed, uint64_t seed2,
                                           const char *name);

/* Inverted dropout: y = x * mask_scaled where mask_scaled = mask / (1 - rate)
 * and mask ~ Bernoulli(1 - rate) elementwise (each element is kept with
 * probability 1 - rate); rate in [0, 1), 0 keeps everything. x is float32 or
 * float64 of any shape. The node has two outputs: 0 = y, 1 = mask_scaled
 * (same shape and dtype as x); *mask_scaled (may be NULL) receives output 1.
 * The gradient of y with respect to x is dy * mask_scaled: it re-uses the mask
 * of the same run instead of drawing a new one. */
LOOM_API loom_output loom_dropout(loom_graph *g, loom_output x, double rate, uint64_t seed, uint64_t seed2,
                                  loom_output *mask_scaled, const char *name);

#ifdef __cplusplus
}
#endif
#endif
