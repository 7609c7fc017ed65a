/* loom_distributed.h - distributed training: the cluster spec from
 * TF_CONFIG (the JSON Kubeflow's TFJob and tf.estimator.RunConfig read).
 * The parameter server and the job roles built on it come here too.
 *
 * Ownership: loom_tf_config_parse returns a new object the caller frees
 * with loom_tf_config_free; the strings its getters return belong to it and
 * stay valid until it is freed. */
#ifndef LOOM_DISTRIBUTED_H
#define LOOM_DISTRIBUTED_H

#include "loom_base.h"
#include "loom_graph.h"
#include "loom_session.h"
#include "loom_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- TF_CONFIG ---- */
typedef struct loom_tf_config loom_tf_config;
/* Parses TF_CONFIG JSON (json NULL: the TF_CONFIG environment variable;
 * unset or empty: local mode). Validates TF's rules (one chief, or none in
 * a cluster of workers alone without ps, where worker 0 is the chief; task type
 * and index present and in range, no master with chief, evaluator index 0,
 * local mode only worker 0) with INVALID_ARGUMENT naming the problem.
 * Returns a new object (NULL on failure); caller frees with
 * loom_tf_config_free. */
LOOM_API loom_tf_config *loom_tf_config_parse(const char *json, loom_status *st);
LOOM_API void loom_tf_config_free(loom_tf_config *c);
/* "worker" in local mode. Owned by c; valid until loom_tf_config_free. */
LOOM_API const char *loom_tf_config_task_type(const loom_tf_config *c);
LOOM_API int loom_tf_config_task_id(const loom_tf_config *c);
LOOM_API int loom_tf_config_is_chief(const loom_tf_config *c);
LOOM_API int loom_tf_config_num_ps_replicas(const loom_tf_config *c);
LOOM_API int loom_tf_config_num_worker_replicas(const loom_tf_config *c);
/* TF's global_id_in_cluster (chief 0, other types alphabetically, ps last);
 * -1 for the evaluator. */
LOOM_API int loom_tf_config_global_id(const loom_tf_config *c);
/* "" local, "grpc://host:port". Owned by c; valid until loom_tf_config_free. */
LOOM_API const char *loom_tf_config_master(const loom_tf_config *c);
/* NULL when absent. Owned by c; valid until loom_tf_config_free. */
LOOM_API const char *loom_tf_config_model_dir(const loom_tf_config *c);
/* Number of tasks of a job in the cluster (0 when absent) and their
 * addresses (NULL when absent; owned by c; valid until loom_tf_config_free). */
LOOM_API int loom_tf_config_num_tasks(const loom_tf_config *c, const char *job);
LOOM_API const char *loom_tf_config_address(const loom_tf_config *c, const char *job, int index);


/* ---- Parameter server (distributed/, docs/parameter-server.md) ----
 * A PS task holds variables (or row ranges of them) and applies pushed
 * gradients with a server-side optimizer, using the same CPU kernels as
 * local training: one worker against any number of PS tasks reproduces
 * local training bit for bit. Wire format: distributed/wire.h. */
#include <stddef.h>

typedef enum loom_ps_optimizer {
  LOOM_PS_SGD = 0,      /* hyper: [0] learning rate */
  LOOM_PS_ADAGRAD = 1,  /* hyper: [0] learning rate, [1] initial accumulator value */
  LOOM_PS_ADAM = 2,     /* hyper: [0] lr, [1] beta1, [2] beta2, [3] epsilon, [4] != 0: sparse pushes update every
                           row's moments (TF's Adam), 0: sparse pushes are LazyAdam */
  LOOM_PS_MOMENTUM = 3, /* hyper: [0] lr, [1] momentum, [2] use_nesterov (!= 0) */
  LOOM_PS_FTRL = 4,     /* hyper: [0] lr, [1] learning_rate_power, [2] initial accumulator, [3] l1, [4] l2,
                           [5] l2_shrinkage (FtrlV2) */
  LOOM_PS_RMSPROP = 5,  /* hyper: [0] lr, [1] decay, [2] momentum, [3] epsilon, [4] centered (!= 0); ms starts at 1 */
  LOOM_PS_ADADELTA = 6, /* hyper: [0] lr, [1] rho, [2] epsilon */
  LOOM_PS_OPT_COUNT
} loom_ps_optimizer;

/* Consistency. ASYNC: every push is applied on arrival
 * (TF's default). BOUNDED: a push whose read version (the variable version
 * the worker computed on) is more than `staleness` behind the PS's version
 * is dropped and counted (DropStaleGradient); the reply says so and a
 * push+pull still returns the current value. SYNC: SyncReplicasOptimizer:
 * per variable, replicas_to_aggregate pushes read at the current version are
 * summed in arrival order, averaged and applied once (the version, i.e. the
 * aggregated step, advances by one); a push read at an older version is a
 * late gradient: dropped and counted, answered at once with the current
 * value. A push (plain, push+pull or rows with a read version) that joined
 * the aggregation is answered only when its step has been applied (TF's
 * token: the connection is not read meanwhile), or with DEADLINE_EXCEEDED
 * after sync_timeout_s; a RESTORE discards partial sums and answers their
 * held pushes ABORTED. In SYNC mode global_step is the number of aggregated
 * steps applied on this PS (the minimum over its variables) and STEP_INC adds
 * nothing. Row pushes without a read version (loom_ps_push_rows) are always
 * applied under BOUNDED and refused (UNIMPLEMENTED) under SYNC; those with
 * one (loom_ps_push_rows_at) are dropped when stale (BOUNDED) and aggregated
 * like dense pushes (SYNC). */
typedef enum loom_ps_consistency { LOOM_PS_ASYNC = 0, LOOM_PS_BOUNDED = 1, LOOM_PS_SYNC = 2 } loom_ps_consistency;

typedef struct loom_ps_server_options {
  uint32_t struct_size; /* sizeof: set by loom_ps_server_options_default() */
  const char *host;        /* the address to bind: never 0.0.0.0 by default ("127.0.0.1" when NULL) */
  int32_t port;            /* 0: a free port, reported by loom_ps_server_port */
  const void *token;       /* shared secret of the HMAC handshake; required (>= 16 bytes) when host is not loopback */
  size_t token_len;
  uint64_t placement_hash; /* loom_ps_placement_hash of the job: HELLOs with another hash are refused */
  int32_t num_ps, num_vars;/* of the placement (named in the refusal when the hash differs) */
  uint32_t max_frame;      /* largest frame body accepted; 0: 64 MiB */
  double idle_exit_s;      /* > 0: stop after this long with no connection */
  double handshake_timeout_s; /* HELLO..AUTH deadline per connection; 0: 5 s */
  loom_ps_consistency consistency; /* ASYNC by default */
  int64_t staleness;       /* BOUNDED: the largest accepted version lag (>= 0) */
  int32_t replicas_to_aggregate; /* SYNC: gradients per step (>= 1) */
  double sync_timeout_s;   /* SYNC: deadline of a push+pull waiting for its step; 0: 30 s */
  int32_t ps_index;        /* this task's index (names its checkpoint shard files) */
  const char *model_dir;   /* SAVE/RESTORE directories must be under it (NULL: SAVE/RESTORE refused) */
  /* (each field below: 0 keeps the default) */
  int32_t shard_threads;   /* threads that own the variables (id mod shard_threads); 0: 2, at most 64 */
  int32_t max_connections; /* more are answered RESOURCE_EXHAUSTED and closed; 0: 1024 */
  int64_t max_inflight_bytes; /* per connection: request bytes read but not yet answered before reading
                                 pauses (back-pressure); 0: 256 MiB (one frame is always accepted) */
  int32_t max_inflight_requests; /* per connection, likewise; 0: 1024 */
  /* Bounded adaptive busy-poll: after a small request (body <= 1 KiB) the loop thread keeps polling its
   * sockets (epoll with a zero timeout, yielding the CPU between looks) for up to this many microseconds
   * before it sleeps, so that the next request of a latency-bound client finds it awake (a sleeping
   * thread's wake-up costs tens of us per hop). Large requests and shard completions do not arm it, and the
   * shard threads never poll. Adaptive: a poll
   * that ends with nothing to do skips the next 1, 3, 7, .. 63 chances to poll (reset by a poll that
   * catches a request after an empty look). 0 or < 0: off (the default: polling takes CPU time from
   * trainers sharing the machine); at most 10000 (bench/ps measures the effect). */
  int32_t busy_poll_us;
  /* This PS's instance id, sent in WELCOME (and written by the job layer into ps-<i>.addr) so that a
   * client holding an address can tell this PS from another PS of the same model that later took the
   * port (loom_ps_connect_options.expect_instance). 0: a random nonzero id drawn at start (the usual
   * case: every start is a new instance, a restarted PS included). */
  uint64_t instance_id;
  /* Saves of its own, so that no progress lives only in this PS's memory: when updates were applied since
   * its shard was last saved or restored and no request has come from a chief connection
   * (loom_ps_connect_options.chief) for chief_lost_save_s seconds (none open, or a hung chief's), the PS
   * writes its shard to
   * <model_dir>/<self_save_dir>/model.ckpt-0.ps-<i>-of-<n> (SAVE's format, written whole then renamed;
   * RESTORE {0, self_save_dir} reads it back), again every chief_lost_save_s while updates go on, and once
   * more before an idle exit (idle_exit_s) when updates were applied since. 0, or no self_save_dir (a
   * relative directory without ".."), or no model_dir: off. */
  double chief_lost_save_s;
  const char *self_save_dir;
} loom_ps_server_options;
LOOM_API loom_ps_server_options loom_ps_server_options_default(void);

typedef struct loom_ps_server loom_ps_server;
/* Binds, listens and starts the loop thread. Returns a new server (NULL on
 * failure: st names the address and the reason); caller frees with
 * loom_ps_server_stop. */
LOOM_API loom_ps_server *loom_ps_server_start(const loom_ps_server_options *o, loom_status *st);
LOOM_API int loom_ps_server_port(const loom_ps_server *s);
/* The instance id this server sends in WELCOME (options.instance_id, or the random one; never 0). */
LOOM_API uint64_t loom_ps_server_instance(const loom_ps_server *s);
/* Waits up to timeout_s for the server to stop (SHUTDOWN request, idle
 * deadline); 1 when it has stopped, 0 on timeout. */
LOOM_API int loom_ps_server_wait(loom_ps_server *s, double timeout_s);
/* Why a stopped server stopped: 1 a SHUTDOWN request, 2 the idle deadline (idle_exit_s), 0 neither
 * (still running, or stopped by loom_ps_server_stop). */
LOOM_API int loom_ps_server_stop_reason(loom_ps_server *s);
/* Stops the server (if still running), joins its thread and frees it. */
LOOM_API void loom_ps_server_stop(loom_ps_server *s);
typedef struct loom_ps_server_stats {
  int64_t connections;  /* accepted */
  int64_t rejected;     /* connections closed for a protocol violation */
  int64_t frames;       /* request frames processed */
  int64_t bytes_in, bytes_out;
  int64_t updates;      /* pushes applied */
  int64_t pauses;       /* times a connection stopped being read (64 MiB of replies queued) */
  int64_t stale_dropped;/* pushes dropped: too stale (BOUNDED) or late for their step (SYNC) */
  int64_t sync_steps;   /* SYNC: aggregated steps applied (all variables) */
  int64_t sync_timeouts;/* SYNC: push+pulls answered DEADLINE_EXCEEDED */
  int64_t refused;      /* connections refused: max_connections reached */
  int64_t inflight_pauses; /* times a connection stopped being read: in-flight request caps */
  int64_t value_copies; /* copy-on-write of a value still being sent (zero-copy replies otherwise) */
  int32_t shard_threads;/* the number of shard threads */
  int64_t duplicates;   /* re-sent requests answered from the duplicate window (not applied again) */
  int64_t shm_attaches; /* shared-memory segments mapped (SHM_ATTACH accepted) */
  int64_t shm_refused;  /* SHM_ATTACH refused (the client went on over TCP) */
  int64_t shm_requests; /* SHM_PULL / SHM_PUSH / SHM_PUSHPULL requests processed */
  int64_t self_saves;   /* shard saves of its own (chief_lost_save_s, before an idle exit) written */
} loom_ps_server_stats;
LOOM_API void loom_ps_server_get_stats(loom_ps_server *s, loom_ps_server_stats *out);

/* ---- Client: one connection to one PS task (blocking, every wait bounded) ---- */
typedef struct loom_ps_connect_options {
  uint32_t struct_size; /* sizeof: set by loom_ps_connect_options_default() */
  const char *host;
  int32_t port;
  const void *token;
  size_t token_len;
  uint64_t placement_hash;
  int32_t num_ps, num_vars;
  double timeout_s;        /* every connect/send/receive; 0: 10 s */
  uint32_t max_frame;      /* largest reply body accepted; 0: 64 MiB */
  /* (each field below: 0 keeps the default) */
  /* Waiting for a reply's header with no request over 4 KiB outstanding, poll the socket (non-blocking
   * recv, sched_yield between tries) for up to this many microseconds before sleeping in poll();
   * adaptive as the server's (a poll that times out skips the next 1, 3, .. 63 waits).
   * 0 or < 0: off (the default); at most 10000. */
  int32_t busy_poll_us;
  /* The client's identity for the PS's duplicate window (request ids per client
   * incarnation): a push re-sent with the same (client_id, request id), after
   * loom_ps_client_reconnect + loom_ps_client_retry_last, is answered from the window and not applied
   * twice. 0: a random id drawn at connect (a new incarnation). An id given here must name one client
   * incarnation only: two clients sharing it would see each other's requests as re-sends. */
  uint64_t client_id;
  /* The PS instance expected at host:port (loom_ps_server_instance, as read from the PS's ps-<i>.addr):
   * a PS that reports another instance in WELCOME, or none (an older PS), is refused with
   * FAILED_PRECONDITION naming host:port and both ids (a stale address: another PS now holds that
   * port), at connect and at loom_ps_client_reconnect. 0: any instance is accepted. */
  uint64_t expect_instance;
  /* Same-host shared memory for the dense exchange (docs/parameter-server.md): 0 auto: a
   * cluster client whose PS address is a loopback or local address offers that PS a sealed memfd after
   * WELCOME and, once the PS has mapped it, moves dense shards' bytes through it (TCP carries only small
   * frames); a PS that cannot map it (another host or pid namespace, SYNC mode, a segment over its limit)
   * refuses and TCP is used, silently. 1: off (TCP only). */
  int32_t shm;
  /* The pipelined dense push+pull on an ASYNC PS (docs/parameter-server.md): a push+pull of a
   * shard larger than this goes out in parts of this many bytes (rounded down to 64, at least 4096;
   * larger parts where this size would make more than ~1000 of them), each applied and answered by
   * the PS as soon as it arrives. 0: the default (128 KiB); < 0: off
   * (always one frame). BOUNDED / SYNC PS tasks always get one frame. */
  int32_t part_bytes;
  /* != 0: this client is the job's chief, told to the PS in HELLO (loom_ps_server_options.chief_lost_save_s:
   * a PS with no chief connection saves its shard itself). */
  int32_t chief;
} loom_ps_connect_options;
/* All fields 0 (their defaults) but struct_size; set host and port. */
LOOM_API loom_ps_connect_options loom_ps_connect_options_default(void);
typedef struct loom_ps_client loom_ps_client;
/* Connects and authenticates (HELLO, CHALLENGE, AUTH, WELCOME). NULL on
 * failure with the PS's reason in st (wrong token: PERMISSION_DENIED;
 * other placement: FAILED_PRECONDITION naming the difference). */
LOOM_API loom_ps_client *loom_ps_connect(const loom_ps_connect_options *o, loom_status *st);
LOOM_API void loom_ps_client_free(loom_ps_client *c);
/* Duplicate window (retry after a lost connection). loom_ps_client_reconnect replaces c's connection by a
 * new one to the same PS with the same client id; request ids go on from where they were (replies owed
 * on the old connection are forgotten). loom_ps_client_retry_last makes the next request reuse the id of
 * the last one sent: re-issuing the same call then re-sends that request, and a PS that already applied
 * it answers from its window (the same reply, not applied again; loom_ps_client_last_duplicate is 1)
 * instead of applying it twice. The PS keeps the outcome of the last 64 request ids of each client id
 * (PUSH, PUSHPULL, PUSH_ROWS, PUSH_ROWS_AT, STEP_INC); a re-sent PUSHPULL is answered with the
 * variable's current value; a re-sent request whose first copy a shard still holds (SYNC) is refused
 * UNAVAILABLE (retry later), and one older than the window FAILED_PRECONDITION; neither is applied. */
LOOM_API loom_code loom_ps_client_reconnect(loom_ps_client *c, loom_status *st);
LOOM_API void loom_ps_client_retry_last(loom_ps_client *c);
LOOM_API uint64_t loom_ps_client_id(const loom_ps_client *c);
/* The instance id the PS reported in its last WELCOME (0: an older PS that reports none). */
LOOM_API uint64_t loom_ps_client_instance(const loom_ps_client *c);
/* 1 when the last reply read was answered from the PS's duplicate window. */
LOOM_API int loom_ps_client_last_duplicate(const loom_ps_client *c);
/* Creates variable var_id (value: numel floats; hyper: 8 floats, see
 * loom_ps_optimizer). *created = 0 when it existed already (kept as is). */
LOOM_API loom_code loom_ps_init_var(loom_ps_client *c, uint32_t var_id, int ndim, const int64_t *dims,
                                    loom_ps_optimizer opt, const float *hyper, const float *value, int *created,
                                    loom_status *st);
/* A variable's update rule on the PS as the model's train op defines it: the optimizer and its
 * hyperparameters (hyper[0] is the learning rate when there is no schedule), and optionally a
 * learning-rate schedule (train/schedules.c's kinds: 0 exponential, 1 piecewise constant, 2 polynomial,
 * 3 cosine; flag: staircase / cycle; lr, decay_steps, beta (decay rate / end learning rate / alpha),
 * limit (power); piecewise: nboundaries boundaries and nboundaries + 1 values) evaluated by the PS at
 * the variable's step: `step` when the variable is created, plus one per update applied to it (with
 * every trainer pushing every variable once per step, the global step). beta1_power/beta2_power (Adam;
 * 0: beta1/beta2) are the beta powers the first update uses. */
typedef struct loom_ps_update_rule {
  loom_ps_optimizer optimizer;
  float hyper[8];
  int32_t schedule; /* -1: none */
  int32_t flag;
  double lr, decay_steps, beta, limit;
  int32_t nboundaries;
  const double *boundaries;
  const float *values;
  int64_t step;
  float beta1_power, beta2_power;
  /* The optimizer slots' values (nslot_values arrays of the whole variable's shape, in the PS's slot
   * order; 0: the slots start at their initial values), e.g. a chief's restored checkpoint. */
  int32_t nslot_values;
  const float *const *slot_values;
} loom_ps_update_rule;
/* loom_ps_init_var with the update rule r (INIT_VAR's rule block). */
LOOM_API loom_code loom_ps_init_var_rule(loom_ps_client *c, uint32_t var_id, int ndim, const int64_t *dims,
                                         const loom_ps_update_rule *r, const float *value, int *created,
                                         loom_status *st);
/* *version in/out: the version the caller holds (UINT64_MAX: none). out
 * (numel floats) is written only when the PS holds a newer one; *changed
 * says which. */
LOOM_API loom_code loom_ps_pull(loom_ps_client *c, uint32_t var_id, float *out, int64_t numel, uint64_t *version,
                                int *changed, loom_status *st);
/* Applies grad with the variable's optimizer; *version (may be NULL) = the new version. */
LOOM_API loom_code loom_ps_push(loom_ps_client *c, uint32_t var_id, const float *grad, int64_t numel,
                                uint64_t *version, loom_status *st);
/* Push computed on version read_version of the variable (BOUNDED / SYNC
 * modes use it); *applied = 0 when the PS dropped it as stale or late;
 * *version (may be NULL) = the PS's version after it. */
LOOM_API loom_code loom_ps_push_at(loom_ps_client *c, uint32_t var_id, const float *grad, int64_t numel,
                                   uint64_t read_version, uint64_t *version, int *applied, loom_status *st);
/* Push then pull in one round trip. */
LOOM_API loom_code loom_ps_pushpull(loom_ps_client *c, uint32_t var_id, const float *grad, float *out, int64_t numel,
                                    uint64_t *version, loom_status *st);
/* Rows ids[0..n) (any order, duplicates allowed) of a variable with rows of d floats. */
LOOM_API loom_code loom_ps_pull_rows(loom_ps_client *c, uint32_t var_id, const int64_t *ids, int64_t n, int64_t d,
                                     float *out, loom_status *st);
/* Sparse push: grads[n*d]; duplicate ids are summed (as the local sparse kernels do). */
LOOM_API loom_code loom_ps_push_rows(loom_ps_client *c, uint32_t var_id, const int64_t *ids, int64_t n, int64_t d,
                                     const float *grads, loom_status *st);
/* Sparse push computed on version read_version of the variable (UINT64_MAX:
 * unknown): a BOUNDED PS drops it when more than `staleness` versions
 * behind (*applied = 0); a SYNC PS sums it into the step read_version
 * belongs to (equal ids summed), answering once that step is applied, or
 * drops it as late (*applied = 0).
 * *version (may be NULL) = the PS's version after it. */
LOOM_API loom_code loom_ps_push_rows_at(loom_ps_client *c, uint32_t var_id, const int64_t *ids, int64_t n, int64_t d,
                                        const float *grads, uint64_t read_version, uint64_t *version, int *applied,
                                        loom_status *st);
/* A round trip answered by the PS's loop thread (liveness / heartbeat);
 * *rtt_us (may be NULL) = its duration. */
LOOM_API loom_code loom_ps_ping(loom_ps_client *c, double *rtt_us, loom_status *st);
LOOM_API loom_code loom_ps_step_inc(loom_ps_client *c, int64_t k, int64_t *global_step, loom_status *st);
/* Step reservation, the stop condition of a job's trainers (max_steps > 0; sent to the PS that keeps
 * the job's global step, ps:0). Atomically on the PS: when global_step < max_steps, global_step += 1,
 * *step = the new value (the number of the step reserved) and *granted = 1; else nothing changes,
 * *step = the current global_step and *granted = 0. A trainer reserves before it pushes a step's
 * gradient, pushes only a granted step and stops at the first refusal, so however many trainers run,
 * exactly max_steps steps are granted and the job ends at global step max_steps. A granted step
 * whose push never happens (the trainer stops for another reason) is given back with
 * loom_ps_step_inc(c, -1, ...); one whose push failed (a PS lost) stays counted. On a SYNC PS nothing
 * is added (the step counts aggregated steps) and the reservation is refused once global_step >=
 * max_steps. The request is STEP_INC with a limit: it is in the duplicate window like STEP_INC. */
LOOM_API loom_code loom_ps_reserve_step(loom_ps_client *c, int64_t max_steps, int64_t *step, int *granted,
                                        loom_status *st);
/* Asks the PS to stop; returns once it has acknowledged. */
LOOM_API loom_code loom_ps_shutdown(loom_ps_client *c, loom_status *st);
/* Bytes sent and received on this connection so far. */
LOOM_API void loom_ps_client_bytes(const loom_ps_client *c, int64_t *sent, int64_t *received);

/* ---- Placement (deterministic: same answer on every process) ---- */
typedef enum loom_ps_strategy { LOOM_PS_GREEDY_BYTES = 0, LOOM_PS_ROUND_ROBIN = 1 } loom_ps_strategy;
typedef struct loom_ps_var_spec {
  const char *name;
  int32_t ndim;
  int64_t dims[LOOM_MAX_DIMS];
  /* (added) != 0: an embedding table whose gradient is sparse: with more than
   * one PS its rows are spread by row mod num_ps (shard j holds rows j, j+k,
   * ... as local rows 0, 1, ...) whatever its size; loom_ps_var_specs_sparse
   * sets it from the loss. */
  int32_t sparse;
} loom_ps_var_spec;
typedef struct loom_ps_shard {
  int32_t var;             /* index into the spec array */
  int32_t ps;              /* task index */
  uint32_t id;             /* variable id on the PS (the shard's index) */
  int64_t row_begin, row_end; /* rows along axis 0 (0, dims[0]) when unpartitioned; (0,1) for a scalar */
  int64_t numel, bytes;
  /* (added) 1: the rows [row_begin, row_end); k > 1: the rows r in [row_begin, row_end)
   * with r mod k == row_begin (a sparse table spread by row mod num_ps; local row = r / k) */
  int32_t stride;
} loom_ps_shard;
typedef struct loom_ps_placement loom_ps_placement;
/* Variables of more than min_slice_bytes (0: 256 KiB; < 0: never) are split
 * along axis 0 into min(num_ps, ceil(bytes / min_slice)) contiguous row
 * ranges, each placed separately. Returns a new placement (NULL on failure);
 * caller frees with loom_ps_placement_free. */
LOOM_API loom_ps_placement *loom_ps_placement_new(int nvars, const loom_ps_var_spec *vars, int num_ps,
                                                  loom_ps_strategy strategy, int64_t min_slice_bytes,
                                                  loom_status *st);
LOOM_API void loom_ps_placement_free(loom_ps_placement *p);
LOOM_API uint64_t loom_ps_placement_hash(const loom_ps_placement *p);
LOOM_API int loom_ps_placement_num_shards(const loom_ps_placement *p);
/* Owned by p; valid until loom_ps_placement_free. */
LOOM_API const loom_ps_shard *loom_ps_placement_shard(const loom_ps_placement *p, int i);
LOOM_API int64_t loom_ps_placement_ps_bytes(const loom_ps_placement *p, int ps);
/* max/mean of the per-PS bytes. */
LOOM_API double loom_ps_placement_balance(const loom_ps_placement *p);
LOOM_API int loom_ps_placement_num_vars(const loom_ps_placement *p);
/* The spec of variable i (name owned by p). */
LOOM_API const loom_ps_var_spec *loom_ps_placement_var(const loom_ps_placement *p, int i);
/* The placement table (variable -> PS, rows, bytes) and the balance, at INFO. */
LOOM_API void loom_ps_placement_log(const loom_ps_placement *p);

/* ---- Cluster client: one connection per PS task, placement-aware ---- */
typedef struct loom_ps_cluster loom_ps_cluster;
/* Connects to every PS (hosts[i]:ports[i]) with o's token and timeout (o's
 * host/port/placement fields are ignored: they come from p). p is borrowed
 * and must outlive the cluster. */
LOOM_API loom_ps_cluster *loom_ps_cluster_connect(const loom_ps_placement *p, const char *const *hosts,
                                                  const int *ports, const loom_ps_connect_options *o,
                                                  loom_status *st);
LOOM_API void loom_ps_cluster_free(loom_ps_cluster *c);
/* Creates every shard of variable var (value: the whole variable) on its PS. */
LOOM_API loom_code loom_ps_cluster_init_var(loom_ps_cluster *c, int var, loom_ps_optimizer opt, const float *hyper,
                                            const float *value, loom_status *st);
/* The same with variable var's update rule (loom_ps_update_rule). */
LOOM_API loom_code loom_ps_cluster_init_var_rule(loom_ps_cluster *c, int var, const loom_ps_update_rule *r,
                                                 const float *value, loom_status *st);
/* Optimizer slot `slot` (0..2: the update rule's slots in its apply op's input order) of variable var
 * into out (the whole variable's shape), and Adam's beta powers (may be NULL), as the PS holds them. */
LOOM_API loom_code loom_ps_cluster_pull_slot(loom_ps_cluster *c, int var, int slot, float *out, float *beta1_power,
                                             float *beta2_power, loom_status *st);
/* Pulls every variable into values[var] (whole variables), the requests to
 * all PS in flight together. A shard the PS reports unchanged since this
 * cluster's last pull or push-pull of it is not written (16 bytes travel):
 * values[var] must still hold what that exchange delivered. */
LOOM_API loom_code loom_ps_cluster_pull(loom_ps_cluster *c, float *const *values, loom_status *st);
/* Pushes grads[var] (NULL: no gradient for var) and pulls values[var]: one
 * round trip per PS, all PS in parallel. */
LOOM_API loom_code loom_ps_cluster_pushpull(loom_ps_cluster *c, const float *const *grads, float *const *values,
                                            loom_status *st);
/* Checkpoints from the PS (chief): every PS task writes its own shard
 * <ps model_dir>/<dir>/model.ckpt-<step>.ps-<i>-of-<n> (requests to all PS in
 * flight together); once all have succeeded, the chief writes
 * <model_dir>/<dir>/checkpoint (write-then-rename) naming
 * "model.ckpt-<step>", the consistent set. dir is relative to the model_dir
 * the PS tasks were started with (no absolute path or ".." travels);
 * model_dir here is the chief's view of that same directory. */
LOOM_API loom_code loom_ps_cluster_save(loom_ps_cluster *c, const char *model_dir, const char *dir, int64_t step,
                                        loom_status *st);
/* Every PS task restores its shard of step (< 0: the step named by
 * <model_dir>/<dir>/checkpoint), replacing its variables, optimizer slots and
 * versions. The cluster's cached versions are reset: pull afterwards. */
LOOM_API loom_code loom_ps_cluster_restore(loom_ps_cluster *c, const char *model_dir, const char *dir, int64_t step,
                                           loom_status *st);
/* Bytes this cluster client has sent to and received from all PS tasks (headers included). */
LOOM_API void loom_ps_cluster_bytes(const loom_ps_cluster *c, int64_t *sent, int64_t *received);
/* Pushes of this cluster client the PS tasks dropped (stale or late) so far. */
LOOM_API int64_t loom_ps_cluster_dropped(const loom_ps_cluster *c);
/* SYNC PS tasks: the job's global step as TF's SyncReplicasOptimizer counts it: the number of
 * aggregated steps applied to every variable of the job, on every PS task (the least over the PS
 * tasks of the least applied version of their variables; one STEP_INC {0} to each, all in flight
 * together). A single PS's STEP_INC may be ahead of it: its variables can finish step s+1 while
 * another PS is still aggregating step s+1 of its own. Non-decreasing. */
LOOM_API loom_code loom_ps_cluster_sync_step(loom_ps_cluster *c, int64_t *global_step, loom_status *st);
/* The connection to PS task ps (owned by c). */
LOOM_API loom_ps_client *loom_ps_cluster_client(loom_ps_cluster *c, int ps);

/* ---- Worker: a session training against PS tasks ----
 * Variables stay the session's own variables; the worker computes the
 * gradients of the loss and one push+pull round trip per PS (all PS in
 * parallel) applies them with the PS's optimizer and writes the new values
 * straight into the session's variable buffers. The model needs no change
 * beyond leaving out its local train op. */
/* The trainable variables of g in creation order (names owned by g) into
 * out[0..cap); returns how many g has. */
LOOM_API int loom_ps_var_specs(loom_graph *g, loom_ps_var_spec *out, int cap);
/* As loom_ps_var_specs, and marks `sparse` the variables whose gradient of
 * loss is sparse (IndexedSlices: embedding lookups), so that the placement
 * spreads their rows by row mod num_ps. Builds those gradients into g (the
 * worker builds its own; the unused ones never run). Returns the number of
 * trainable variables, or -1 with st set. */
LOOM_API int loom_ps_var_specs_sparse(loom_graph *g, loom_output loss, loom_ps_var_spec *out, int cap,
                                      loom_status *st);
typedef struct loom_ps_worker loom_ps_worker;
/* Builds the gradients of loss with respect to p's variables (float32
 * variables of s's graph, same shapes) into the graph. s, cl and p are
 * borrowed and must outlive the worker. CPU sessions only
 * (UNIMPLEMENTED for a device session). Returns a new worker (NULL on
 * failure); caller frees with loom_ps_worker_free. */
LOOM_API loom_ps_worker *loom_ps_worker_new(loom_session *s, loom_ps_cluster *cl, const loom_ps_placement *p,
                                            loom_output loss, loom_status *st);
LOOM_API void loom_ps_worker_free(loom_ps_worker *w);
/* Chief: creates every variable on its PS from the session's current
 * values (run the initializer first); variables that exist are kept. */
LOOM_API loom_code loom_ps_worker_init_vars(loom_ps_worker *w, loom_ps_optimizer opt, const float *hyper,
                                            loom_status *st);
/* Pulls every variable into the session. */
LOOM_API loom_code loom_ps_worker_pull(loom_ps_worker *w, loom_status *st);
/* on != 0: each step first pulls the embedding rows its batch looks up (one
 * more round trip: the lookups' ids are computed, then their rows fetched at
 * no older than the version this worker's last push made; a SYNC step still
 * being aggregated is waited for). Off (the default), a worker computes on
 * its own copy of the rows, which is current only for the rows it touched
 * itself: exact for one worker; with several, rows others updated are stale
 * until this worker touches them. SYNC with several workers needs it on to
 * equal local training on the concatenated batch. */
LOOM_API void loom_ps_worker_set_fresh_rows(loom_ps_worker *w, int on);
/* One training step on the feeds: gradients on the session's current
 * values, then push+pull. */
LOOM_API loom_code loom_ps_worker_step(loom_ps_worker *w, const loom_output *feeds, loom_tensor *const *feed_values,
                                       int nfeeds, loom_status *st);

/* ---- Jobs: reconnect after a PS task was lost ----
 * Replaces every connection of c by a fresh one to hosts[i]:ports[i] (all
 * or nothing: on failure the old connections stay, the first failure is
 * returned). Cached versions are reset: the next exchange pulls whole
 * values. The job layer (loom_job.h) calls it with backoff. */
LOOM_API loom_code loom_ps_cluster_reconnect(loom_ps_cluster *c, const char *const *hosts, const int *ports,
                                             const loom_ps_connect_options *o, loom_status *st);

#ifdef __cplusplus
}
#endif

#endif
