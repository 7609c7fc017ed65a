/* loom_session.h - running graphs.
 *
 * A session runs a graph. For each distinct (feeds, fetches, targets)
 * signature it compiles a plan once and caches it: pruned to what the fetches
 * need, topologically ordered, shapes resolved, buffers placed in one arena by
 * liveness, kernels resolved. When the fed shapes equal the previous run's, a
 * run does no allocation and no graph walk.
 *
 * Thread safety: one run at a time per session (runs are serialized with a
 * mutex); loom_session_cancel may be called from any thread. Different
 * sessions may run concurrently.
 */
#ifndef LOOM_SESSION_H
#define LOOM_SESSION_H

#include "loom_base.h"
#include "loom_graph.h"
#include "loom_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loom_device_type { LOOM_DEVICE_CPU = 0, LOOM_DEVICE_CUDA = 1 } loom_device_type;

typedef struct loom_session_options {
  uint32_t struct_size;
  /* Threads for kernels (loom's pool; it cuts large matrix products into
   * blocks that BLAS runs on one thread each). 0 = the default: LOOM_NUM_THREADS when set, else
   * the CPUs this process may run on (affinity mask, cgroup CPU quota rounded
   * up) divided among the processes a launcher started on this host
   * (LOOM_LOCAL_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, Slurm tasks per node). */
  int32_t num_threads;
  loom_device_type device;
  int32_t device_index;
} loom_session_options;
LOOM_API loom_session_options loom_session_options_default(void);
/* What loom sees on this machine and what it picked, one "key: value" line
 * each: the CPU and its features, the kernel clones bound at load
 * (x86-64-v2/v3/v4), the BLAS library and its core type, the CPUs this
 * process may use (affinity, cgroup quota, launcher's processes on the host)
 * and the default thread count with its reason. Writes at most len bytes
 * (NUL-terminated when len > 0; buf may be NULL when len is 0) and returns
 * the length of the whole text, as snprintf does. */
LOOM_API size_t loom_runtime_info(char *buf, size_t len);

typedef struct loom_session loom_session;

/* The graph is borrowed and must outlive the session; it may be extended
 * after the session is created. opts may be NULL (defaults). Returns a new
 * session (NULL on failure); caller frees with loom_session_free. */
LOOM_API loom_session *loom_session_new(loom_graph *g, const loom_session_options *opts, loom_status *st);
LOOM_API void loom_session_free(loom_session *s);
/* The graph given to loom_session_new: still owned by its creator (the
 * session only borrows it); NULL for s NULL. */
LOOM_API loom_graph *loom_session_graph(loom_session *s);

/* Runs the graph.
 *  feeds[i] <- feed_values[i] (borrowed; read, never written; must match the
 *    fed output's dtype and known dims).
 *  fetch_values[i] is in/out: NULL on entry -> a new tensor the caller frees;
 *    a tensor from an earlier call is reused when its dtype and element count
 *    match (reshaped in place, no allocation), otherwise freed and replaced.
 *  targets: nodes run for their effects only (e.g. a train op).
 * Errors name the node: a missing feed, an unknown or foreign fetch, a shape
 * mismatch found at run time, a kernel failure. CANCELLED if
 * loom_session_cancel was called. */
LOOM_API loom_code loom_session_run(loom_session *s, const loom_output *feeds, loom_tensor *const *feed_values,
                                   int nfeeds, const loom_output *fetches, loom_tensor **fetch_values, int nfetches,
                                   loom_node *const *targets, int ntargets, loom_status *st);

/* Asks the run in progress (or the next one) to stop between nodes; it
 * returns LOOM_CANCELLED and clears the request. Thread-safe. */
LOOM_API void loom_session_cancel(loom_session *s);

/* Statistics of the most recent run. */
typedef struct loom_session_stats {
  int64_t plans_compiled;   /* plan compilations since creation */
  int64_t plan_cache_hits;  /* runs that reused a plan */
  int64_t respecializations;/* runs whose shapes changed and were re-planned */
  int64_t arena_bytes;      /* bytes of the last run's arena */
  int64_t naive_bytes;      /* sum of all intermediate buffers (no reuse) */
  int32_t nodes_run;        /* nodes executed by the last run */
} loom_session_stats;
LOOM_API void loom_session_get_stats(const loom_session *s, loom_session_stats *out);

#ifdef __cplusplus
}
#endif
#endif
