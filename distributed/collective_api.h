/* distributed/collective_api.h - internal: the function table of a collective transport plugin
 * (build/libloom_mpi.so, distributed/mpi/), which libloom opens on first use (distributed/collective.c)
 * so that libloom itself never links an MPI library. Plain C, standard headers only: the plugin is
 * compiled by another compiler driver (mpicc).
 *
 * Every call except rank/size/abort returns 0, or non-zero with a message in err (a NUL-terminated
 * string of at most cap bytes). A collective that has not completed within the timeout (set by init,
 * changed by set_timeout) fails naming the ranks that did not answer a liveness probe (dead or
 * stalled); after a failure the transport is unusable and finalize leaves MPI without finalizing it
 * (the launcher then ends the job). All collectives are over every rank of the job, called in the same
 * order by every rank. */
#ifndef LOOM_DIST_COLLECTIVE_API_H
#define LOOM_DIST_COLLECTIVE_API_H
#include <stddef.h>
#include <stdint.h>

#define LOOM_COLL_API_VERSION 2 /* this header's; libloom also loads version 1 plugins */

typedef struct loom_coll_api {
  int version;     /* LOOM_COLL_API_VERSION */
  const char *name; /* the engine and its version, for logs */
  int (*init)(double timeout_s, char *err, size_t cap);
  int (*rank)(void);
  int (*size)(void);
  void (*set_timeout)(double timeout_s);
  /* buf[0..n) <- the element-wise sum over the ranks, in place */
  int (*allreduce_sum_f32)(float *buf, int64_t n, char *err, size_t cap);
  /* buf[0..bytes) <- root's */
  int (*broadcast)(void *buf, int64_t bytes, int root, char *err, size_t cap);
  /* recv[r*bytes..(r+1)*bytes) <- rank r's send[0..bytes) */
  int (*allgather)(const void *send, int64_t bytes, void *recv, char *err, size_t cap);
  /* recv <- the ranks' send buffers one after another; counts[r]: rank r's bytes (every rank passes the
   * same counts, e.g. from an allgather of the sizes) */
  int (*allgatherv)(const void *send, int64_t bytes, void *recv, const int64_t *counts, char *err, size_t cap);
  int (*barrier)(char *err, size_t cap);
  /* ends every rank of the job with exit code code */
  void (*abort)(int code);
  int (*finalize)(void);
  /* ---- version 2 (a version 1 plugin's table ends above; libloom then all-reduces without overlap) */
  /* Non-blocking all-reduce: starts buf[0..n) <- the element-wise sum over the ranks (buf untouched by
   * the caller until it completes) and gives a handle in *req. test progresses every request in flight
   * and sets *done when req has completed (its handle is then free); wait completes req within the
   * timeout. Requests are started in the same order by every rank, as the blocking calls. */
  int (*iallreduce_sum_f32)(float *buf, int64_t n, int *req, char *err, size_t cap);
  int (*test)(int req, int *done, char *err, size_t cap);
  int (*wait)(int req, char *err, size_t cap);
  /* the transport is unusable from now on (a request in flight will never complete: another rank
   * gave up); finalize then leaves MPI as after a failure */
  void (*abandon)(void);
} loom_coll_api;

/* The plugin's one exported symbol. */
typedef const loom_coll_api *(*loom_coll_plugin_fn)(void);
#define LOOM_COLL_PLUGIN_SYMBOL "loom_collective_plugin"

#endif
