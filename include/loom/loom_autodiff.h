/* loom_autodiff.h - symbolic gradients (tf.gradients).
 *
 * loom_gradients adds gradient nodes to the same graph: it walks back from ys
 * in reverse topological order, calls each op's gradient function and sums
 * the contributions of multiple paths. An op on the path without a gradient
 * function is an UNIMPLEMENTED error naming the op and the node.
 */
#ifndef LOOM_AUTODIFF_H
#define LOOM_AUTODIFF_H
#include "loom_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* A gradient: dense (indices.node == NULL; values has x's shape) or sparse
 * like TF's IndexedSlices (rows `indices` [n] of x's first dimension, with
 * `values` [n, x.dims[1:]...]; repeated indices add up). */
typedef struct loom_gradient {
  loom_output values;
  loom_output indices;
} loom_gradient;

/* Gradients of sum(ys) (weighted by grad_ys when not NULL: one per y, same
 * shape as y) with respect to each xs[i]. grads[i].values.node == NULL when
 * xs[i] does not affect ys (TF returns None). Sparse gradients (from Gather)
 * stay sparse when every path to xs[i] is sparse; otherwise they are densified. */
LOOM_API loom_code loom_gradients_sparse(loom_graph *g, int ny, const loom_output *ys, const loom_output *grad_ys,
                                         int nx, const loom_output *xs, loom_gradient *grads, loom_status *st);

/* Dense-only convenience: grads[i] is the dense gradient (or {NULL,0}). */
LOOM_API loom_code loom_gradients(loom_graph *g, int ny, const loom_output *ys, const loom_output *grad_ys, int nx,
                                  const loom_output *xs, loom_output *grads, loom_status *st);

#ifdef __cplusplus
}
#endif
#endif
