/* Internal session structures (shared by session.c and the variable store). */
#ifndef LOOM_SESSION_IMPL_H
#define LOOM_SESSION_IMPL_H
#include <pthread.h>
#include <stdatomic.h>
#include "engine/engine_api.h"
#include "engine/engine_impl.h"
#include "loom/loom_summary.h"

/* Device state (engine/backend.c); NULL in CPU sessions and plans. */
typedef struct loom_dev_session loom_dev_session;
typedef struct loom_dev_plan loom_dev_plan;

typedef struct plan_value {
  const loom_node *node;
  int32_t index;
  int32_t kind;          /* VAL_ARENA, VAL_FEED, VAL_BIND, VAL_ALIAS */
  int32_t alias_of;      /* VAL_ALIAS: value index of input 0 */
  int32_t feed_slot;     /* VAL_FEED: position in the feed list */
  int32_t producer;      /* step index that writes it (-1 none) */
  int32_t last_use;      /* last step that reads it (INT32_MAX: fetched) */
  int64_t offset;        /* VAL_ARENA: byte offset in the arena */
  size_t bytes;
  loom_buf buf;
} plan_value;

typedef struct plan_step {
  loom_kernel_fn fn;
  const loom_node *node;
  loom_kctx ctx;
  int32_t on_host;       /* device plans: a CPU kernel (fallback) run with copies */
  int32_t ws_value;      /* -1 or index of a scratch block (offset only) */
  int64_t ws_offset;
  size_t ws_bytes;
  loom_kernel_fn fn0;    /* the step's own kernel (fn is a no-op while folded away: engine/fuse.c) */
  loom_epilogue epi;     /* what ctx.epi points to when steps are folded into this one */
  double *colsum_mem;    /* epi.colsum's memory (the plan's) */
  uint8_t *argmax_mem;   /* epi.argmax's memory (the plan's; held by the Conv2D step) */
} plan_step;

typedef struct loom_plan {
  /* signature */
  uint64_t hash;
  int32_t nfeeds, nfetches, ntargets;
  loom_output *feeds, *fetches;
  loom_node **targets;
  /* nodes in execution order (all needed nodes, incl. sources) */
  int32_t nnodes;
  const loom_node **order;
  int32_t *node_val;     /* per graph node id: first value index or -1 */
  int32_t node_cap;
  int32_t nvalues;
  plan_value *values;
  int32_t nsteps;
  plan_step *steps;
  loom_buf **ptrs;
  int32_t *fetch_val;
  int32_t *feed_val;     /* per feed: value index or -1 (feed not used) */
  int32_t *fetch_ready;  /* per fetch: the step after which its value is final (-1: before the first) */
  int32_t *ready_order;  /* the fetches by fetch_ready, ascending (the run observer's order) */
  loom_tdesc *feed_shape;/* shapes the plan was specialized for */
  int specialized;
  char *arena_base;      /* CPU plans: the session arena its pointers are bound to (the arena moves when it grows) */
  size_t arena_size;     /* bytes its values and workspaces need */
  int64_t naive_bytes;
  int32_t nfolded;       /* steps folded into the step before them (engine/fuse.c): not run */
  loom_dev_plan *dev;    /* device sessions: device arena, constants, staging */
  int host_only;         /* device sessions: plan holds strings, runs on the CPU */
  struct loom_plan *next;
} loom_plan;

enum { VAL_ARENA = 0, VAL_FEED = 1, VAL_BIND = 2, VAL_ALIAS = 3, VAL_NONE = 4 };

struct loom_session {
  loom_graph *graph;
  loom_session_options opts;
  loom_pool *pool;
  pthread_mutex_t mu;
  atomic_int cancel;
  loom_plan *plans;
  loom_session_stats stats;
  loom_dev_session *dev; /* NULL: CPU session */
  /* per graph node: runs so far (random ops draw from it); see bind_counters */
  uint64_t *counters;
  int32_t ncounters;
  /* variable store (engine/variables.c); NULL until first use */
  void *vars;
  void (*vars_free)(void *vars);
  /* per-run hook of the variable store (engine/variables.c), set with vars:
   * phase 0 before the steps (an error fails the run: uninitialised reads),
   * phase 1 after all steps succeeded (marks assigned variables) */
  loom_code (*vars_hook)(struct loom_session *s, const loom_plan *p, int phase, loom_status *st);
  /* per-node tracing (loom_session_set_tracing): off by default; trace holds
   * the steps of the last traced run (ntrace of them, trace_cap allocated) */
  int tracing;
  int32_t ntrace, trace_cap;
  loom_trace_event *trace;
  int64_t trace_t0;  /* CLOCK_MONOTONIC ns of the traced run the trace starts with */
  int trace_keep;    /* loom__session_trace_keep: traced runs append to the trace */
  int trace_last;    /* the last run was traced */
  /* loom__session_set_observer: told of each fetch when final and after every step (CPU runs) */
  loom__run_observer obs;
  /* feed-derived data-shape part of the graph (engine/host_pass.c); NULL until needed */
  struct loom_host_pass *host_pass;
  /* bytes of the strings kernels output in ordinary runs (AsString, ...):
   * reset at the start of every run; fetched strings are copied out */
  loom_strarena strings;
  /* the arena of every CPU plan: runs take s->mu one at a time and nothing
   * in an arena outlives its run, so the plans share one, as big as the
   * largest plan needs (a plan per fetch set: a training step with and
   * without its summaries holds one arena, not two) */
  void *arena;
  size_t arena_cap;
};
typedef struct loom_host_pass loom_host_pass;
/* engine/host_pass.c: evaluates the data-shape part a run needs and returns
 * the feed lists extended with its results (owned by the pass, valid until
 * the next run); the inputs unchanged when the run needs no such node. */
loom_code loom__host_pass_run(loom_session *s, const loom_output *feeds, loom_tensor *const *fv, int nf,
                              const loom_output *fetches, int nx, loom_node *const *targets, int nt,
                              const loom_output **xfeeds, loom_tensor *const **xvals, int *nxf, loom_status *st);
void loom__host_pass_free(loom_host_pass *hp);

#endif
