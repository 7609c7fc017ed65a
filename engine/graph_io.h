/* engine/graph_io.h - internal helpers of graph serialization (engine/graph_io.c)
 * shared with the exporter (estimator/export.c). Not installed. */
#ifndef LOOM_GRAPH_IO_H
#define LOOM_GRAPH_IO_H
#include "engine/engine_impl.h"

/* The nodes the n roots need (themselves, their inputs and control inputs,
 * transitively; every node of g when n == 0), in a topological order that
 * is creation order whenever creation order is topological. *order is
 * malloc'd (loom__free); *count receives its length. INVALID_ARGUMENT for a
 * root that is not a node of g or a cycle of control dependencies. */
loom_code loom__graph_collect(loom_graph *g, int n, loom_node *const *roots, loom_node ***order, int *count,
                              loom_status *st);

#endif
