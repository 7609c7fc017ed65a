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
 *     (loom_graph.h: "the builder returns a harmless placeholder output");
 *   - the nodes a set of roots needs, in a topological order (what
 *     loom_graph_serialize writes; the exporter reads those nodes' variables);
 *   - whether a tensor is runtime-owned or wraps caller memory, which decides
 *     how a result is handed back to a caller's in/out tensor (datasets, as
 *     loom_session_run does for fetches: loom_data.h, loom_dataset_next);
 *   - a scalar fetch read as a double, whatever its numeric dtype;
 *   - a node's attributes, read by an exporter to another format
 *     (interop/onnx.c), which the public accessors do not give;
 *   - a node's control inputs (a GraphDef's "^name" inputs, summary/events.c);
 *   - a run observer: told during a run when each fetched value is final, so that a layer above can
 *     start working on it while the rest of the run goes on (distributed/collective_strategy.c starts a
 *     gradient bucket's all-reduce during the backward pass), and spans it adds to the run's trace;
 *   - the all-reduce between processes on a device session's own device (NCCL for CUDA), which the
 *     collective strategy uses for the gradients of a model that trains on a GPU.
 * Whether a graph has failed has a public form: loom_graph_status(g, NULL). */
#ifndef LOOM_ENGINE_API_H
#define LOOM_ENGINE_API_H

#include "base/base.h"
#include "loom/loom_graph.h"
#include "loom/loom_session.h"
#include "loom/loom_summary.h"

/* Slots of per-graph attached data: one per layer that keeps state with a
 * graph (variables and collections; the summaries' tag arrays). */
enum { LOOM__GRAPH_EXT_TRAIN, LOOM__GRAPH_EXT_SUMMARIES, LOOM__GRAPH_EXT_COUNT };

/* The data in slot `slot` of g (NULL when unset, g is NULL or slot is out of range). */
void *loom__graph_ext(const loom_graph *g, int slot);
/* Sets slot `slot` of g to p; free_fn (may be NULL) is called on p when the
 * graph is freed. A previous value is replaced without being freed. */
void loom__graph_set_ext(loom_graph *g, int slot, void *p, void (*free_fn)(void *));

/* The control inputs of n (the nodes that must run before it): how many, and the i-th (NULL out of range). */
int loom__node_num_control_inputs(const loom_node *n);
const loom_node *loom__node_control_input(const loom_node *n, int i);

/* The output the builders return after a failure: a valid f32 scalar
 * output of a node outside the graph's node list. */
loom_output loom__graph_dummy(loom_graph *g);

/* The nodes the n roots need (themselves, their inputs and control inputs,
 * transitively; every node of g when n == 0), in a topological order that
 * is creation order whenever creation order is topological: the nodes
 * loom_graph_serialize writes, in its order (engine/graph_io.c). *order is
 * malloc'd (loom__free); *count receives its length. INVALID_ARGUMENT for a
 * root that is not a node of g or a cycle of control dependencies. */
loom_code loom__graph_collect(loom_graph *g, int n, loom_node *const *roots, loom_node ***order, int *count,
                              loom_status *st);

/* 1 when t's buffer is the runtime's (loom_tensor_new, _copy, _from_data),
 * 0 when it wraps caller memory (loom_tensor_wrap) or t is NULL. */
int loom__tensor_owned(const loom_tensor *t);
/* The element array whatever the dtype (a string tensor's loom_tstring
 * headers, which loom_tensor_data_const does not hand out); NULL for NULL. */
const void *loom__tensor_raw(const loom_tensor *t);

/* The first element of a numeric tensor as a double (0 for empty or
 * non-numeric): scalar fetches such as a loss or global_step (the
 * estimator's evaluation, the step hooks). */
double loom__tensor_scalar_f64(const loom_tensor *t);

/* Bulk strings (datasets filling a batch without one allocation per
 * string): element i of the string tensor t becomes bytes[off_len[2i] ..
 * off_len[2i] + off_len[2i + 1]), for every element; bytes[0..nbytes) (each
 * string followed by a NUL there) is copied into one block that t owns
 * (kept and reused from call to call, freed with t). loom_tensor_set_string,
 * _copy and _free work on such a tensor as on any other. RESOURCE_EXHAUSTED
 * on OOM, INVALID_ARGUMENT when t is not an owned string tensor. */
loom_code loom__tensor_set_strings(loom_tensor *t, const char *bytes, size_t nbytes, const size_t *off_len,
                                   loom_status *st);

/* The attributes of node n (kernels/kernel.h defines the struct): what an
 * exporter to another format (interop/onnx.c) reads besides the public
 * accessors. NULL for n NULL. */
struct loom_attrs;
const struct loom_attrs *loom__node_attrs(const loom_node *n);

/* Run observer. While set on a session (loom__session_set_observer; NULL or an observer with no
 * callbacks clears it), every CPU run of that session calls, on the calling thread:
 *  - fetch_ready(user, i, out, data, dtype, ndim, dims) once per fetch i (the run's i-th fetch, output
 *    out of the graph), as soon as its value is final:
 *    after the step that produces it (and any later step that writes it in place), before the run's
 *    remaining steps; fetches no step produces (fed values, variables) before the first step. data
 *    stays valid and unchanged until the run returns (the run then copies it out as usual). Fetches
 *    are reported in the order they become final (the plan's execution order).
 *  - step_done(user) after every step (an observer that has work in flight makes progress here).
 * Device plans do not call it (their values are on the device until the run ends). A callback cannot
 * fail the run: it keeps its own error for its caller. Callbacks must not call the session (its lock
 * is held). */
typedef struct loom__run_observer {
  void *user;
  void (*fetch_ready)(void *user, int fetch, loom_output out, const void *data, loom_dtype dtype, int ndim,
                      const int64_t *dims);
  void (*step_done)(void *user);
} loom__run_observer;
void loom__session_set_observer(loom_session *s, const loom__run_observer *obs);

/* Run traces (loom_session_set_tracing) for a layer that does work of its own around runs:
 *  - the CLOCK_MONOTONIC time (ns) the current trace's times count from, 0 when the last run was not
 *    traced: a span [a, b) of that clock is the event {start_ns = a - origin, dur_ns = b - a};
 *  - _add appends n events to the trace (copied; their strings must live until the trace is read),
 *    RESOURCE_EXHAUSTED on OOM; nothing when the last run was not traced;
 *  - while keep is on, traced runs append their steps to the current trace (on the same time origin)
 *    instead of starting a new one: several runs of one training step in one timeline. */
int64_t loom__session_trace_origin(const loom_session *s);
loom_code loom__session_trace_add(loom_session *s, const loom_trace_event *ev, int n, loom_status *st);
void loom__session_trace_keep(loom_session *s, int on);

/* The all-reduce between processes on the device of a device session (CUDA: NCCL, loaded on first use;
 * engine/dev_comm.c). loom__dev_comm_load: OK (the library's name and version in name) when s runs on a
 * device whose library loads; FAILED_PRECONDITION for a session on the CPU; else UNAVAILABLE saying why
 * (no library, a library too old, a backend without it). One rank makes
 * the communicator's id (loom__dev_comm_id, at most LOOM__DEV_COMM_ID_BYTES), the caller gives it to
 * every rank, and every rank joins (loom__dev_comm_new, within timeout_s). loom__dev_comm_allreduce_host
 * sums buf[0..n) (host memory) over the ranks: copied to a device buffer, all-reduced there on the
 * session's stream, copied back; every wait bounded by timeout_s (DEADLINE_EXCEEDED: the communicator
 * was aborted, every later call fails). Called between the session's runs, never during one. */
#define LOOM__DEV_COMM_ID_BYTES 128
/* Whether s runs on a device (its values live there). */
int loom__session_on_device(const loom_session *s);
/* Usable devices of that type (0: none, or a build without its backend). */
int loom__dev_count(loom_device_type dev);
typedef struct loom__dev_comm loom__dev_comm;
loom_code loom__dev_comm_load(loom_session *s, char *name, size_t cap, loom_status *st);
loom_code loom__dev_comm_id(loom_session *s, void *id, size_t cap, size_t *n, loom_status *st);
loom__dev_comm *loom__dev_comm_new(loom_session *s, const void *id, size_t n, int nranks, int rank, double timeout_s,
                                   loom_status *st);
loom_code loom__dev_comm_allreduce_host(loom__dev_comm *c, float *buf, int64_t n, loom_status *st);
void loom__dev_comm_free(loom__dev_comm *c);

#endif
