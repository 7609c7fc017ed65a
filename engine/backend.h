/* engine/backend.h - device backends (internal).
 *
 * A backend is a table of functions plus a per-session context that owns its
 * streams, BLAS handle and memory pool (c-style.md §E). The CPU needs no
 * table: CPU sessions never touch this file's machinery. Device memory is
 * never dereferenced by host code; it moves through copy_h2d / copy_d2h.
 *
 * Sessions on a device (LOOM_DEVICE_CUDA) run the whole plan on it: every
 * non-string value lives in a device arena, feeds are copied in, fetches
 * out, constants are uploaded once per plan and variables are mirrored on the
 * device (host copy refreshed lazily, see loom__dev_vars_to_host). A node
 * whose op has no kernel for the device runs on the CPU with its inputs
 * copied to host staging buffers and its outputs copied back; compiling such
 * a plan logs one line per node. A plan that holds string values runs wholly
 * on the CPU (strings never live on a device). */
#ifndef LOOM_BACKEND_H
#define LOOM_BACKEND_H
#include "engine/session_impl.h"

/* An index out of range found by a kernel: plan step, what ("indices",
 * "segment_ids", "labels"), the index tensor's device address (NULL:
 * unknown), flat position, value and bound. */
typedef struct loom_dev_data_error {
  int step;
  const char *what;
  const void *indices;
  int64_t pos, value, bound;
} loom_dev_data_error;

typedef struct loom_backend_i {
  const char *name;
  loom_device_type device;
  /* Devices usable now (0: none, or the driver/runtime is unusable). */
  int (*device_count)(void);
  /* Context for device `index`: stream, BLAS handle, memory pool. NULL + st on failure. */
  void *(*context_new)(int index, loom_status *st);
  void (*context_free)(void *ctx);
  /* Device memory from the context's caching pool. NULL + RESOURCE_EXHAUSTED on failure. */
  void *(*buffer_alloc)(void *ctx, size_t n, loom_status *st);
  void (*buffer_free)(void *ctx, void *p);
  /* Copies ordered on the context's stream. copy_h2d may return before the
   * copy ran but after `src` may be reused; copy_d2h returns with dst filled. */
  loom_code (*copy_h2d)(void *ctx, void *dst, const void *src, size_t n, loom_status *st);
  loom_code (*copy_d2h)(void *ctx, void *dst, const void *src, size_t n, loom_status *st);
  loom_code (*copy_d2d)(void *ctx, void *dst, const void *src, size_t n, loom_status *st);
  /* Optional: page-locked host memory (NULL when refused), and a device-to-host
   * copy into it that is complete after the next synchronize. Fetches go
   * this way, so a run waits once for its kernels and its fetches together. */
  void *(*host_alloc)(void *ctx, size_t n);
  void (*host_free)(void *ctx, void *p);
  loom_code (*copy_d2h_async)(void *ctx, void *dst, const void *src, size_t n, loom_status *st);
  loom_code (*memset_zero)(void *ctx, void *dst, size_t n, loom_status *st);
  /* Waits for all work queued on the context; reports asynchronous errors as `what: ...`. */
  loom_code (*synchronize)(void *ctx, const char *what, loom_status *st);
  /* Launch errors of the last kernel (no wait); `what` names the op. */
  loom_code (*check)(void *ctx, const char *what, loom_status *st);
  /* Events: record on the context's stream, wait on the host. */
  void *(*event_new)(void *ctx, loom_status *st);
  loom_code (*event_record)(void *ctx, void *ev, loom_status *st);
  loom_code (*event_wait)(void *ctx, void *ev, loom_status *st);
  void (*event_free)(void *ctx, void *ev);
  /* A run's work is about to be queued from the calling thread (makes the context's device current). */
  void (*begin_run)(void *ctx);
  /* The plan step whose kernels are being queued now (for kernels' bad-data reports). */
  void (*begin_step)(void *ctx, int step);
  /* After a synchronization: bad data a kernel reported since the last call
   * (an index out of range); e->step = -1 when none. Clears the report. */
  loom_code (*take_data_error)(void *ctx, struct loom_dev_data_error *e, loom_status *st);
  /* Bytes held by the pool (in use, cached). */
  void (*pool_stats)(void *ctx, size_t *in_use, size_t *cached);
  /* Optional whole-step graphs (NULL: none). Between capture_begin and capture_end the
   * work queued on the context's stream is recorded, not run; capture_end returns the executable
   * graph, or NULL when the work could not be captured (a call that is not allowed during capture:
   * nothing of it ran, and the context is as before capture_begin). graph_launch queues a whole
   * recorded step. */
  loom_code (*capture_begin)(void *ctx, loom_status *st);
  void *(*capture_end)(void *ctx);
  loom_code (*graph_launch)(void *ctx, void *graph, loom_status *st);
  /* 0 when device memory the graph uses outside the plan (the context's scratch) has moved since. */
  int (*graph_valid)(void *ctx, void *graph);
  void (*graph_free)(void *ctx, void *graph);
  /* Optional: all-reduce between processes on device buffers (CUDA: NCCL, loaded on first use by
   * comm_load; NULL: none). comm_id makes a communicator's id (one rank, shared by the caller with the
   * others), comm_new joins it (every rank, within timeout_s), comm_allreduce_sum_f32 sums buf[0..n) over
   * the ranks in place on the context's stream and returns when done (DEADLINE_EXCEEDED after timeout_s:
   * the communicator was aborted). */
  loom_code (*comm_load)(char *name, size_t cap, loom_status *st);
  loom_code (*comm_id)(void *id, size_t cap, size_t *n, loom_status *st);
  void *(*comm_new)(void *ctx, const void *id, size_t n, int nranks, int rank, double timeout_s, loom_status *st);
  loom_code (*comm_allreduce_sum_f32)(void *ctx, void *comm, void *buf, int64_t n, double timeout_s, loom_status *st);
  void (*comm_free)(void *comm);
} loom_backend_i;

/* The backend of a device type, or NULL when this build lacks it (CPU: NULL). */
const loom_backend_i *loom__backend_get(loom_device_type dev);
/* Usable devices of that type (0 when the build lacks the backend or no device is present). */
int loom__backend_device_count(loom_device_type dev);
/* Whether op has a kernel for (device, dtype) (registering the device's kernels first). */
int loom__backend_supports(loom_device_type dev, int op, loom_dtype dt);

/* ---- device sessions (engine/backend.c, used by engine/session.c) ---- */
typedef struct loom_dev_session loom_dev_session;
typedef struct loom_dev_plan loom_dev_plan;

/* Creates s->dev for s->opts.device / device_index; UNAVAILABLE ("no CUDA
 * device") when the build lacks the backend or no device is present. */
loom_code loom__dev_session_new(loom_session *s, loom_status *st);
void loom__dev_session_free(loom_session *s);
/* The backend context of a device session (for kernels' ctx.backend). */
void *loom__dev_context(const loom_session *s);
const loom_backend_i *loom__dev_backend(const loom_session *s);

/* Whether every device step is synchronized as it runs, so that an
 * asynchronous device failure names its op (LOOM_CUDA_SYNC=1 in the
 * environment when the session was created; tracing does the same). */
int loom__dev_sync_steps(const loom_session *s);

/* Kernel for node n (dtype key) in a device session: the device kernel, else
 * the CPU kernel with *on_host = 1 (logs once per node). NULL: none at all.
 * Ops named in LOOM_CUDA_DISABLE (comma-separated TF op names, read when the
 * session is created) take the CPU path even when a device kernel exists:
 * for bisecting a suspected kernel bug on a GPU, and for testing the path. */
loom_kernel_fn loom__dev_resolve(loom_session *s, const loom_node *n, loom_dtype key, int *on_host);

/* Specialization of a device plan: device arena of `bytes` (reused when big
 * enough), device copies of constants and variable mirrors for bound
 * values, host staging for CPU-fallback steps. Returns the arena base. */
loom_dev_plan *loom__dev_plan_new(loom_session *s); /* NULL: out of memory */
loom_code loom__dev_plan_arena(loom_session *s, loom_plan *p, size_t bytes, char **base, loom_status *st);
loom_code loom__dev_plan_bind(loom_session *s, loom_plan *p, plan_value *v, loom_status *st);
loom_code loom__dev_plan_finish(loom_session *s, loom_plan *p, loom_status *st);
void loom__dev_plan_free(loom_plan *p);

/* One run of a device plan (feeds: the run's feed tensors). Called with the
 * session lock held, after specialization and alias resolution. */
loom_code loom__dev_run_begin(loom_session *s, loom_plan *p, loom_tensor *const *feeds, loom_status *st);
/* Whole-step graphs: runs the plan's steps as one captured CUDA graph when the plan
 * allows it, and says so in *done (0: nothing ran, run the steps one by one). The first run of a
 * plan runs uncaptured (modules load, cuBLAS initializes); the second captures the steps into a
 * graph and launches it; later runs launch it again while every step's buffers, shapes and
 * workspace are the ones captured (else it is captured again). Never captured: plans with
 * CPU-fallback steps, stateful ops that do not only write their inputs in place (random draws read
 * a host-side run counter at launch), data-dependent shapes, per-step synchronization
 * (LOOM_CUDA_SYNC=1, tracing), LOOM_CUDA_GRAPHS=0, or a step that makes a call capture does not
 * allow (then the plan is marked and runs uncaptured from then on). */
loom_code loom__dev_run_graph(loom_session *s, loom_plan *p, int *done, loom_status *st);
/* Runs CPU-fallback step i (copies in, CPU kernel, copies out). */
loom_code loom__dev_host_step(loom_session *s, loom_plan *p, int i, loom_status *st);
/* After all steps succeeded: queues the fetches, synchronizes once, marks
 * variables the plan wrote as device-newer, and reports bad data. */
loom_code loom__dev_run_end(loom_session *s, loom_plan *p, loom_status *st);
/* A run that stops after loom__dev_run_begin (a failed step, a cancel):
 * waits for its queued work, drops any bad-data report, and marks the
 * variables the plan writes as device-newer (earlier steps may have). */
void loom__dev_run_abort(loom_session *s, loom_plan *p);
/* Bad data reported by the run's kernels (after its synchronization): fails
 * with INVALID_ARGUMENT naming the node, and clears the report. */
loom_code loom__dev_data_error(loom_session *s, loom_plan *p, loom_status *st);
/* Fetch i of the run into a host tensor (same reuse rules as CPU fetches):
 * from the page-locked copy loom__dev_run_end queued, else copied now. */
loom_code loom__dev_fetch(loom_session *s, loom_plan *p, int i, loom_tensor **dst, loom_status *st);

/* A CPU plan of a device session (it holds strings) is about to run on the
 * host: the variables it binds are copied down if the device wrote them, and
 * those its steps write in place are marked for re-upload. */
loom_code loom__dev_host_plan_begin(loom_session *s, loom_plan *p, loom_status *st);

/* Variable mirrors: host code that reads variable memory calls
 * loom__dev_vars_to_host first; host code that writes it calls
 * loom__dev_vars_host_changed after (and loom__dev_vars_to_host before,
 * unless it overwrites the whole variable). The loom__dev_var_ forms touch
 * the one mirror of host buffer `host` (loom_var_entry.data): only it is
 * copied down, or re-uploaded at the next run. All are no-ops for CPU
 * sessions. */
loom_code loom__dev_vars_to_host(loom_session *s, loom_status *st);
loom_code loom__dev_var_to_host(loom_session *s, const void *host, loom_status *st);
void loom__dev_vars_host_changed(loom_session *s);
void loom__dev_var_host_changed(loom_session *s, const void *host);

#endif
