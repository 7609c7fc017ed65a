/* distributed/collective.h - internal: the collective transport of the all-reduce strategy, opened on
 * first use from a plugin distributed/collective_api.h describes (build/libloom_mpi.so, on MPI, under
 * mpirun or srun; build/libloom_gloo.so, on Gloo's TCP transport, for a launch by TF_CONFIG alone).
 *
 * A plugin is found at $LOOM_MPI_PLUGIN ($LOOM_GLOO_PLUGIN) when set, else beside the object that holds
 * libloom (libloom.so, or the program it is linked into) or in its parent folder, else by the dynamic
 * loader's search path. Every call returns a loom_code with the plugin's message (UNAVAILABLE for a
 * transport failure, DEADLINE_EXCEEDED for a collective that timed out, naming the lost ranks). */
#ifndef LOOM_DIST_COLLECTIVE_H
#define LOOM_DIST_COLLECTIVE_H
#include <stdint.h>
#include "loom/loom.h"

/* The process's rank and size as the launcher states them in the environment (OMPI_COMM_WORLD_RANK /
 * _SIZE, PMI_RANK / PMI_SIZE, SLURM_PROCID / SLURM_NTASKS); size 0 when none is set. */
void loom__coll_env(int *rank, int *size);
/* The process's rank among the job's processes on its machine as the launcher states it
 * (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID); 0 when none is set. */
int loom__coll_local_rank(void);
/* A collective job launched by TF_CONFIG alone: this task's rank of size (chief or master 0, then the
 * workers by index), rank 0's TF_CONFIG address (where it serves the rendezvous), this task's host and
 * the ranks' task names ("chief:0,worker:0,..."). */
typedef struct loom__coll_tf {
  int rank, size;
  char rank0[512], host[512], names[4096];
} loom__coll_tf;
/* 1 and *out when TF_CONFIG (json; NULL: the environment) names trainers (chief / master / worker) and no
 * ps, and this task is one of them; 0 when not (unset included); -1 with st when it does not parse. */
int loom__coll_tf_config(const char *json, loom__coll_tf *out, loom_status *st);
/* Opens the transport and initializes it (once per process): under a launcher (the environment above)
 * MPI, from libloom_mpi.so; else, for a collective job TF_CONFIG names (loom__coll_tf_config), Gloo's TCP
 * transport from libloom_gloo.so ($LOOM_GLOO_PLUGIN, found as libloom_mpi.so is), whose rendezvous rank 0
 * serves at its TF_CONFIG address. timeout_s: the collective timeout (<= 0: $LOOM_COLLECTIVE_TIMEOUT,
 * else 60 s). */
loom_code loom__coll_init(double timeout_s, loom_status *st);
/* The collective timeout init was given (seconds). */
double loom__coll_timeout(void);
int loom__coll_rank(void);
int loom__coll_size(void);
const char *loom__coll_name(void);
loom_code loom__coll_allreduce_sum(float *buf, int64_t n, loom_status *st);
loom_code loom__coll_broadcast(void *buf, int64_t bytes, int root, loom_status *st);
loom_code loom__coll_allgather(const void *send, int64_t bytes, void *recv, loom_status *st);
loom_code loom__coll_allgatherv(const void *send, int64_t bytes, void *recv, const int64_t *counts, loom_status *st);
/* Non-blocking all-reduce (buf untouched until it completes): started with a handle in *req, tested
 * (progresses every request in flight; *done 1 when req completed) or waited within the timeout. With a
 * version 1 plugin (no non-blocking calls) it completes within iallreduce (handle -1). */
loom_code loom__coll_iallreduce_sum(float *buf, int64_t n, int *req, loom_status *st);
/* 1 when the transport's non-blocking all-reduce runs beside the caller (a version 2 plugin), 0 when
 * iallreduce blocks (version 1) or before init. */
int loom__coll_nonblocking(void);
loom_code loom__coll_test(int req, int *done, loom_status *st);
loom_code loom__coll_wait(int req, loom_status *st);
/* After an error with requests in flight that will never complete: finalize must not wait for them. */
void loom__coll_abandon(void);
/* Finalizes MPI (at the process's exit, registered by init; a no-op after a failed collective). */
void loom__coll_finalize(void);

#endif
