/* distributed/collective.c - opens the collective transport plugin and wraps its calls
 * (distributed/collective.h). */
#include "distributed/collective.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "distributed/collective_api.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const loom_coll_api *g_api;
static int g_ready;
static double g_timeout = 60.0;

static int env_int(const char *name, int *out) {
  const char *v = getenv(name);
  if (!v || !v[0]) return 0;
  char *end = NULL;
  long x = strtol(v, &end, 10);
  if (*end || x < 0) return 0;
  *out = (int)x;
  return 1;
}

void loom__coll_env(int *rank, int *size) {
  static const char *const names[][2] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"}};
  *rank = 0;
  *size = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (env_int(names[i][1], size) && env_int(names[i][0], rank)) return;
  *size = 0;
  *rank = 0;
}

int loom__coll_local_rank(void) {
  static const char *const names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
  int r = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (env_int(names[i], &r)) return r;
  return 0;
}

/* Tries path; on failure appends dlerror's text to why. */
static void *try_open(const char *path, char *why, size_t cap) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    size_t u = strlen(why);
    if (u + 4 < cap) snprintf(why + u, cap - u, "%s%s", u ? "; " : "", dlerror());
  }
  return h;
}

/* The plugin file (libloom_mpi.so, libloom_gloo.so): $env when set, else beside the object that holds
 * libloom or in its parent folder, else by the dynamic loader's search path. */
static void *open_plugin(const char *file, const char *env_name, char *why, size_t cap) {
  const char *env = getenv(env_name);
  if (env && env[0]) return try_open(env, why, cap);
  Dl_info info;
  if (dladdr((void *)&loom__coll_env, &info) && info.dli_fname) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    for (int up = 0; up < 2; up++) {
      char *slash = strrchr(dir, '/');
      if (!slash) break;
      *slash = 0;
      char path[4200];
      snprintf(path, sizeof path, "%s/%s", dir, file);
      FILE *f = fopen(path, "rb");
      if (!f) continue;
      fclose(f);
      return try_open(path, why, cap);
    }
  }
  return try_open(file, why, cap);
}

/* The Gloo plugin's rendezvous call, made before init. */
typedef int (*rendezvous_fn)(int rank, int size, const char *rank0, const char *host, const char *names, char *err,
                             size_t cap);
#define RENDEZVOUS_SYMBOL "loom_collective_rendezvous"

loom_code loom__coll_init(double timeout_s, loom_status *st) {
  pthread_mutex_lock(&g_mu);
  loom_code rc = LOOM_OK;
  if (g_ready) goto out;
  if (timeout_s <= 0) {
    const char *v = getenv("LOOM_COLLECTIVE_TIMEOUT");
    timeout_s = v && atof(v) > 0 ? atof(v) : 60.0;
  }
  g_timeout = timeout_s;
  int env_rank = 0, env_size = 0;
  loom__coll_env(&env_rank, &env_size);
  loom__coll_tf tf;
  int gloo = 0;
  if (env_size <= 0) {
    int k = loom__coll_tf_config(NULL, &tf, st);
    if (k < 0) {
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
      goto out;
    }
    if (k == 0) {
      rc = loom_status_set(st, LOOM_FAILED_PRECONDITION,
                           "the collective strategy's process was not started by an MPI launcher (no "
                           "OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS) and TF_CONFIG names no collective job "
                           "(chief / worker tasks without ps) that this task trains in");
      goto out;
    }
    gloo = 1;
  }
  const char *file = gloo ? "libloom_gloo.so" : "libloom_mpi.so";
  if (!g_api) {
    char why[1024] = "";
    void *h = open_plugin(file, gloo ? "LOOM_GLOO_PLUGIN" : "LOOM_MPI_PLUGIN", why, sizeof why);
    if (!h) {
      if (gloo)
        rc = loom_status_set(st, LOOM_UNAVAILABLE,
                             "the collective strategy launched by TF_CONFIG alone needs its Gloo transport plugin "
                             "libloom_gloo.so, which could not be loaded (%s); build it with `make gloo` (needs "
                             "libgloo-dev), name it in LOOM_GLOO_PLUGIN, or launch under mpirun / srun",
                             why);
      else
        rc = loom_status_set(st, LOOM_UNAVAILABLE,
                             "the collective strategy needs its MPI transport plugin libloom_mpi.so, which could not "
                             "be loaded (%s); build it with `make mpi` (needs libopenmpi-dev) or name it in "
                             "LOOM_MPI_PLUGIN",
                             why);
      goto out;
    }
    void *sym = dlsym(h, LOOM_COLL_PLUGIN_SYMBOL);
    loom_coll_plugin_fn fn = NULL;
    if (sym) memcpy(&fn, &sym, sizeof sym);
    const loom_coll_api *api = fn ? fn() : NULL;
    if (!api || api->version < 1 || api->version > LOOM_COLL_API_VERSION) {
      rc = loom_status_set(st, LOOM_FAILED_PRECONDITION, "%s: %s (this libloom expects plugin interface version 1 to %d)",
                           file, !fn ? "no " LOOM_COLL_PLUGIN_SYMBOL " symbol" : "a different interface version",
                           LOOM_COLL_API_VERSION);
      goto out;
    }
    if (gloo) {
      void *rs = dlsym(h, RENDEZVOUS_SYMBOL);
      rendezvous_fn rf = NULL;
      if (rs) memcpy(&rf, &rs, sizeof rs);
      char err[1024];
      err[0] = 0;
      if (!rf) {
        rc = loom_status_set(st, LOOM_FAILED_PRECONDITION, "%s: no " RENDEZVOUS_SYMBOL " symbol", file);
        goto out;
      }
      if (rf(tf.rank, tf.size, tf.rank0, tf.host, tf.names, err, sizeof err)) {
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s", file, err);
        goto out;
      }
    }
    g_api = api;
  }
  char err[1024];
  err[0] = 0;
  if (g_api->init(timeout_s, err, sizeof err)) {
    if (gloo)
      rc = loom_status_set(st, strstr(err, "timeout") ? LOOM_DEADLINE_EXCEEDED : LOOM_UNAVAILABLE, "%s: %s",
                           g_api->name, err);
    else
      rc = loom_status_set(st, LOOM_UNAVAILABLE, "MPI (%s): %s", g_api->name, err);
    goto out;
  }
  if (!gloo && g_api->size() != env_size) {
    rc = loom_status_set(st, LOOM_FAILED_PRECONDITION,
                         "the launcher's environment names %d task(s) (OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS) but "
                         "MPI (%s) initialized %d rank(s): under srun, start the tasks with MPI's process manager "
                         "interface (srun --mpi=pmix)",
                         env_size, g_api->name, g_api->size());
    goto out;
  }
  g_ready = 1;
  atexit(loom__coll_finalize);
out:
  pthread_mutex_unlock(&g_mu);
  return rc;
}

double loom__coll_timeout(void) { return g_timeout; }
int loom__coll_rank(void) { return g_ready ? g_api->rank() : 0; }
int loom__coll_size(void) { return g_ready ? g_api->size() : 1; }
const char *loom__coll_name(void) { return g_api ? g_api->name : "none"; }

static loom_code result(int failed, const char *err, loom_status *st) {
  if (!failed) return LOOM_OK;
  return loom_status_set(st, strstr(err, "timeout") ? LOOM_DEADLINE_EXCEEDED : LOOM_UNAVAILABLE, "%s", err);
}

#define NOT_READY                                                                                                      \
  if (!g_ready) return loom_status_set(st, LOOM_FAILED_PRECONDITION, "the collective transport is not initialized")

loom_code loom__coll_allreduce_sum(float *buf, int64_t n, loom_status *st) {
  NOT_READY;
  char err[1024];
  err[0] = 0;
  return result(g_api->allreduce_sum_f32(buf, n, err, sizeof err), err, st);
}
loom_code loom__coll_broadcast(void *buf, int64_t bytes, int root, loom_status *st) {
  NOT_READY;
  char err[1024];
  err[0] = 0;
  return result(g_api->broadcast(buf, bytes, root, err, sizeof err), err, st);
}
loom_code loom__coll_allgather(const void *send, int64_t bytes, void *recv, loom_status *st) {
  NOT_READY;
  char err[1024];
  err[0] = 0;
  return result(g_api->allgather(send, bytes, recv, err, sizeof err), err, st);
}
loom_code loom__coll_allgatherv(const void *send, int64_t bytes, void *recv, const int64_t *counts,
                                loom_status *st) {
  NOT_READY;
  char err[1024];
  err[0] = 0;
  return result(g_api->allgatherv(send, bytes, recv, counts, err, sizeof err), err, st);
}

/* A version 1 plugin has no non-blocking all-reduce: it completes at once (handle -1). */
static int nonblocking(void) { return g_api->version >= 2 && g_api->iallreduce_sum_f32 && g_api->test && g_api->wait; }
loom_code loom__coll_iallreduce_sum(float *buf, int64_t n, int *req, loom_status *st) {
  NOT_READY;
  char err[1024];
  err[0] = 0;
  if (!nonblocking()) {
    *req = -1;
    return result(g_api->allreduce_sum_f32(buf, n, err, sizeof err), err, st);
  }
  return result(g_api->iallreduce_sum_f32(buf, n, req, err, sizeof err), err, st);
}
int loom__coll_nonblocking(void) { return g_ready && nonblocking(); }
loom_code loom__coll_test(int req, int *done, loom_status *st) {
  NOT_READY;
  char err[1024];
  err[0] = 0;
  *done = 1;
  return req < 0 ? LOOM_OK : result(g_api->test(req, done, err, sizeof err), err, st);
}
loom_code loom__coll_wait(int req, loom_status *st) {
  NOT_READY;
  char err[1024];
  err[0] = 0;
  return req < 0 ? LOOM_OK : result(g_api->wait(req, err, sizeof err), err, st);
}
void loom__coll_abandon(void) {
  if (g_ready && g_api->version >= 2 && g_api->abandon) g_api->abandon();
}

void loom__coll_finalize(void) {
  pthread_mutex_lock(&g_mu);
  if (g_ready) g_api->finalize();
  g_ready = 0;
  pthread_mutex_unlock(&g_mu);
}
