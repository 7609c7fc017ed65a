/* base/cpus.h - how many threads this process should use by default
 * (base/cpus.c): the CPUs it may run on (affinity mask, then the cgroup CPU
 * quota rounded up, the smaller), divided among the processes a launcher
 * started on this host; an explicit setting wins. Internal. */
#ifndef LOOM_CPUS_H
#define LOOM_CPUS_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loom_threads_source {
  LOOM_THREADS_USER = 0,   /* an explicit setting (option or LOOM_NUM_THREADS) */
  LOOM_THREADS_ONLINE,     /* online CPUs (no affinity mask could be read) */
  LOOM_THREADS_AFFINITY,   /* the CPUs in this process's affinity mask */
  LOOM_THREADS_QUOTA,      /* a cgroup CPU quota, rounded up */
  LOOM_THREADS_SHARE       /* this process's share of the host among a launcher's processes */
} loom_threads_source;

typedef struct loom_cpu_budget {
  int threads;              /* the default thread count, >= 1 */
  loom_threads_source source;
  int online;               /* online CPUs */
  int affinity;             /* CPUs in the affinity mask (online when it cannot be read) */
  double quota;             /* cgroup CPU quota in CPUs; 0 = none */
  int quota_version;        /* 1 or 2: the cgroup version the quota came from */
  int local_size;           /* processes of this job on this host; 1 = alone */
  const char *local_var;    /* the environment variable local_size came from, or NULL */
  char why[200];            /* one line: the count and why */
} loom_cpu_budget;

/* Fills b from the process's current affinity, cgroup limits and launcher
 * environment (LOOM_NUM_THREADS, LOOM_LOCAL_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE,
 * MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE, SLURM_STEP_TASKS_PER_NODE,
 * SLURM_TASKS_PER_NODE). LOOM_CGROUP_ROOT replaces /sys/fs/cgroup (tests). */
void loom__cpu_budget_read(loom_cpu_budget *b);
/* The thread count for a request of `requested` (> 0: the caller's explicit
 * setting, returned as is; <= 0: the default), computed once per process and
 * cached; why (may be NULL) receives a one-line reason. */
int loom__threads_resolve(int requested, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
