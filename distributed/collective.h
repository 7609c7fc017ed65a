/* distributed/collective.h - internal: the collective transport of the all-reduce strategy, opened on
 * first use from the plugin distributed/collective_api.h describes (build/libloom_mpi.so, on MPI).
 *
 * The plugin is found at $LOOM_MPI_PLUGIN when set, else as libloom_mpi.so beside the object that holds
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
/* Opens the plugin and initializes MPI (once per process); timeout_s: the collective timeout (<= 0:
 * $LOOM_COLLECTIVE_TIMEOUT, else 60 s). */
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
loom_code loom__coll_test(int req, int *done, loom_status *st);
loom_code loom__coll_wait(int req, loom_status *st);
/* After an error with requests in flight that will never complete: finalize must not wait for them. */
void loom__coll_abandon(void);
/* Finalizes MPI (at the process's exit, registered by init; a no-op after a failed collective). */
void loom__coll_finalize(void);

#endif
