/* engine/engine_api.h - the engine's sanctioned internal interface for the
 * layers above it (layers/, losses/, metrics/, train/, data/, summary/,
 * estimator/, distributed/, ...). Not installed.
 *
 * Those layers use the public API (include/loom/) plus this header, never
 * engine_impl.h or another engine-private header: they see no struct
 * internals. It holds only what a layer above genuinely needs from the
 * engine and has no public form:
 *   - per-graph attached state (the ext slots), which a layer keeps with a
 *     graph and which is freed with it;
 *   - the builders' placeholder output, which every graph builder above the
 *     engine returns after a failure, as the engine's own builders do
 *     (loom_graph.h: "the builder returns a harmless placeholder output").
 * Whether a graph has failed has a public form: loom_graph_status(g, NULL). */
#ifndef LOOM_ENGINE_API_H
#define LOOM_ENGINE_API_H

#include "base/base.h"
#include "loom/loom_graph.h"

/* Slots of per-graph attached data: one per layer that keeps state with a
 * graph (variables and collections; the summaries' tag arrays). */
enum { LOOM__GRAPH_EXT_TRAIN, LOOM__GRAPH_EXT_SUMMARIES, LOOM__GRAPH_EXT_COUNT };

/* The data in slot `slot` of g (NULL when unset, g is NULL or slot is out of range). */
void *loom__graph_ext(const loom_graph *g, int slot);
/* Sets slot `slot` of g to p; free_fn (may be NULL) is called on p when the
 * graph is freed. A previous value is replaced without being freed. */
void loom__graph_set_ext(loom_graph *g, int slot, void *p, void (*free_fn)(void *));

/* The output the builders return after a failure: a valid f32 scalar
 * output of a node outside the graph's node list. */
loom_output loom__graph_dummy(loom_graph *g);

#endif
