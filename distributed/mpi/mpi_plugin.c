/* distributed/mpi/mpi_plugin.c - the collective transport on MPI (distributed/collective_api.h), built
 * with mpicc into its own shared object (build/libloom_mpi.so) that libloom opens on first use.
 *
 * Collectives are MPI's non-blocking ones on a private duplicate of MPI_COMM_WORLD, completed by polling
 * with a deadline, so that no call waits forever: when the deadline passes, a liveness probe (a ping on a
 * second private communicator, answered by every rank that is itself waiting in a collective) names the
 * ranks that did not answer within a short grace period. Large buffers go in pieces of at most INT_MAX
 * elements (MPI's counts are int).
 *
 * Non-blocking all-reduces progress on their own: Open MPI's TCP and shared-memory transports move a
 * message only inside MPI calls, so while any is in flight a progress thread tests them every few tens
 * of microseconds (MPI_THREAD_SERIALIZED: every MPI call of the plugin, the caller's and the thread's,
 * holds one mutex) -- where the rank has a core to spare for it: the thread wakes tens of thousands of
 * times a second, and on a core that also computes it costs more than it hides (2 ranks on 2 cores: 10-20%
 * fewer steps/s with it). So it runs only when the cores this rank may use outnumber the ranks of the node
 * that share them. LOOM_COLLECTIVE_PROGRESS_THREAD=1 / 0 forces it on / off; an MPI initialized by the
 * program below SERIALIZED leaves the all-reduces to the caller's tests. */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../collective_api.h"

enum { TAG_PING = 101, TAG_PONG = 102 };

static MPI_Comm g_comm = MPI_COMM_NULL, g_ctl = MPI_COMM_NULL;
static int g_rank, g_size, g_failed, g_inited, g_we_inited;
static int g_async; /* a progress thread completes non-blocking all-reduces (see the top) */
static double g_timeout = 60.0;
static long long g_calls;
static int g_ping_in, g_pong_out; /* receive / send buffers of the probe */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void nap(double waited) {
  /* spin briefly (a collective of a small model completes in microseconds), then sleep a little */
  if (waited < 2e-3) return;
  struct timespec ts = {0, waited < 0.1 ? 20000 : 1000000};
  nanosleep(&ts, NULL);
}

static int fail(char *err, size_t cap, const char *fmt, const char *what, int code) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (code != MPI_SUCCESS) MPI_Error_string(code, msg, &len);
  snprintf(err, cap, fmt, what, msg);
  g_failed = 1;
  return 1;
}

/* Answers the other ranks' liveness pings. */
static void serve_pings(void) {
  for (;;) {
    int flag = 0;
    MPI_Status s;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_PING, g_ctl, &flag, &s);
    if (!flag) return;
    MPI_Recv(&g_ping_in, 1, MPI_INT, s.MPI_SOURCE, TAG_PING, g_ctl, MPI_STATUS_IGNORE);
    MPI_Request r;
    MPI_Isend(&g_pong_out, 1, MPI_INT, s.MPI_SOURCE, TAG_PONG, g_ctl, &r);
    MPI_Request_free(&r);
  }
}

/* The ranks that do not answer a ping within grace seconds, as text into out. */
static void probe_lost(char *out, size_t cap) {
  int n = g_size, nlost = 0;
  char *alive = calloc((size_t)n, 1);
  int *pong = calloc((size_t)n, sizeof(int));
  static int ping = 1;
  if (!alive || !pong) {
    snprintf(out, cap, "(out of memory probing the ranks)");
    free(alive);
    free(pong);
    return;
  }
  alive[g_rank] = 1;
  for (int r = 0; r < n; r++) {
    if (r == g_rank) continue;
    MPI_Request q;
    MPI_Isend(&ping, 1, MPI_INT, r, TAG_PING, g_ctl, &q);
    MPI_Request_free(&q);
  }
  double grace = g_timeout < 2.0 ? g_timeout : 2.0, t0 = now_s();
  int left = n - 1;
  while (left > 0 && now_s() - t0 < grace) {
    serve_pings();
    int flag = 0;
    MPI_Status s;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_PONG, g_ctl, &flag, &s);
    if (flag) {
      MPI_Recv(&pong[s.MPI_SOURCE], 1, MPI_INT, s.MPI_SOURCE, TAG_PONG, g_ctl, MPI_STATUS_IGNORE);
      if (!alive[s.MPI_SOURCE]) left--;
      alive[s.MPI_SOURCE] = 1;
    } else {
      nap(1.0);
    }
  }
  size_t used = 0;
  out[0] = 0;
  for (int r = 0; r < n && used + 16 < cap; r++)
    if (!alive[r]) used += (size_t)snprintf(out + used, cap - used, "%s%d", nlost++ ? ", " : "", r);
  if (!nlost) snprintf(out, cap, "none (every rank answered; the collective itself is stuck)");
  free(alive);
  free(pong);
}

/* Completes request q, or fails at the deadline naming the ranks that do not answer. */
static int wait_req(MPI_Request *q, const char *what, char *err, size_t cap) {
  double t0 = now_s();
  for (;;) {
    int done = 0;
    int rc = MPI_Test(q, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return fail(err, cap, "MPI %s failed: %s", what, rc);
    if (done) return 0;
    serve_pings();
    double w = now_s() - t0;
    if (w > g_timeout) break;
    nap(w);
  }
  char lost[512];
  probe_lost(lost, sizeof lost);
  snprintf(err, cap,
           "collective %s (call %lld) on rank %d of %d did not complete within the collective timeout of %g s: "
           "lost rank(s) (dead or stalled, no answer to a liveness probe): %s",
           what, g_calls, g_rank, g_size, g_timeout, lost);
  g_failed = 1;
  return 1;
}

static int check(char *err, size_t cap) {
  if (!g_inited) {
    snprintf(err, cap, "the MPI transport is not initialized");
    return 1;
  }
  if (g_failed) {
    snprintf(err, cap, "the MPI transport failed earlier (a collective timed out or failed); the job must restart");
    return 1;
  }
  g_calls++;
  return 0;
}

static char g_name[MPI_MAX_LIBRARY_VERSION_STRING + 160]; /* the library's version and the progress choice */

/* The physical cores among the CPUs of mask (hyperthreads of one core count once: distinct package and
 * core ids under /sys), or the CPUs themselves where the topology cannot be read. */
static int physical_cores(const cpu_set_t *mask) {
  int n = 0, cpus = CPU_COUNT(mask);
  long *ids = calloc((size_t)cpus + 1, sizeof *ids);
  if (!ids) return cpus;
  for (int c = 0; c < CPU_SETSIZE && n >= 0; c++) {
    if (!CPU_ISSET(c, mask)) continue;
    long v[2] = {-1, -1};
    static const char *const what[2] = {"physical_package_id", "core_id"};
    for (int k = 0; k < 2; k++) {
      char path[96];
      snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", c, what[k]);
      FILE *f = fopen(path, "r");
      if (!f || fscanf(f, "%ld", &v[k]) != 1) v[k] = -1;
      if (f) fclose(f);
    }
    if (v[0] < 0 || v[1] < 0) {
      n = -1; /* no topology: count CPUs */
      break;
    }
    long id = v[0] * 65536 + v[1];
    int seen = 0;
    for (int i = 0; i < n && !seen; i++) seen = ids[i] == id;
    if (!seen) ids[n++] = id;
  }
  free(ids);
  return n > 0 ? n : cpus;
}

/* (at init, collective over the node's ranks) whether a progress thread runs: the cores in this rank's
 * affinity mask against the ranks of this node whose masks meet it; the choice appended to g_name */
static int want_progress_thread(int level) {
  const char *pt = getenv("LOOM_COLLECTIVE_PROGRESS_THREAD");
  int forced = pt && (!strcmp(pt, "0") || !strcmp(pt, "1")), on = forced && !strcmp(pt, "1");
  cpu_set_t mine;
  CPU_ZERO(&mine);
  int cores = sched_getaffinity(0, sizeof mine, &mine) == 0 ? physical_cores(&mine) : 0, sharing = 1;
  MPI_Comm node;
  if (MPI_Comm_split_type(g_comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    int n = 1;
    MPI_Comm_size(node, &n);
    cpu_set_t *all = calloc((size_t)n, sizeof *all);
    if (all && MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, node) == MPI_SUCCESS) {
      sharing = 0;
      for (int r = 0; r < n; r++) {
        cpu_set_t both;
        CPU_AND(&both, &all[r], &mine);
        sharing += CPU_COUNT(&both) > 0;
      }
    }
    free(all);
    MPI_Comm_free(&node);
  }
  if (!forced) on = cores > sharing;
  if (level < MPI_THREAD_SERIALIZED) on = 0;
  size_t u = strlen(g_name);
  snprintf(g_name + u, sizeof g_name - u, "; %s (%d rank(s) of this node on its %d core(s)%s)",
           on ? "progress thread" : "no progress thread", sharing, cores,
           level < MPI_THREAD_SERIALIZED ? ", MPI below MPI_THREAD_SERIALIZED"
           : forced                      ? ", LOOM_COLLECTIVE_PROGRESS_THREAD"
                                         : "");
  return on;
}

static int u_init(double timeout_s, char *err, size_t cap) {
  if (g_inited) return 0;
  if (timeout_s > 0) g_timeout = timeout_s;
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    /* Open MPI's non-blocking all-reduce: Rabenseifner's (reduce-scatter by recursive halving, allgather by
     * recursive doubling: a ring's bytes in 2 log2(N) rounds instead of 2(N-1)) unless the user chose one;
     * libnbc's own choice for an in-place buffer is slower here (bench/results/
     * collective_mpi_iallreduce_algorithm_2core_quiet_amd.txt: 2 ranks over TCP faster in every paired
     * round, by 5-17%; 4 ranks on 2 cores in 2 of 3). Other MPIs ignore it. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    int prov = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &prov);
    if (rc != MPI_SUCCESS) return fail(err, cap, "MPI_Init_thread (%s) failed: %s", "serialized", rc);
    g_we_inited = 1;
  }
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &g_ctl);
  MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(g_ctl, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g_comm, &g_rank);
  MPI_Comm_size(g_comm, &g_size);
  g_async = want_progress_thread(level);
  g_inited = 1;
  return 0;
}

static int p_rank(void) { return g_rank; }
static int p_size(void) { return g_size; }
static void p_set_timeout(double s) {
  if (s > 0) g_timeout = s;
}

static int u_allreduce(float *buf, int64_t n, char *err, size_t cap) {
  if (check(err, cap)) return 1;
  for (int64_t off = 0; off < n; off += INT_MAX) {
    int c = (int)(n - off < INT_MAX ? n - off : INT_MAX);
    MPI_Request q;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + off, c, MPI_FLOAT, MPI_SUM, g_comm, &q);
    if (rc != MPI_SUCCESS) return fail(err, cap, "MPI %s failed: %s", "Iallreduce", rc);
    if (wait_req(&q, "allreduce", err, cap)) return 1;
  }
  return 0;
}

/* Requests in flight of the non-blocking all-reduce: a handle is a slot; a slot holds one MPI request per
 * piece of at most INT_MAX elements. */
typedef struct nb_slot {
  MPI_Request *q;
  int n, cap, used, done;
} nb_slot;
static nb_slot *g_nb;
static int g_nnb;

/* ---- the progress thread */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_t g_thr;
static int g_thr_on, g_thr_stop;

static int nb_pending(void) {
  for (int k = 0; k < g_nnb; k++)
    if (g_nb[k].used && !g_nb[k].done) return 1;
  return 0;
}

static void *progress_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  while (!g_thr_stop) {
    if (g_failed || !nb_pending()) {
      pthread_cond_wait(&g_cv, &g_mu);
      continue;
    }
    for (int k = 0; k < g_nnb; k++) {
      nb_slot *sl = &g_nb[k];
      if (!sl->used || sl->done) continue;
      int all = 0;
      if (MPI_Testall(sl->n, sl->q, &all, MPI_STATUSES_IGNORE) != MPI_SUCCESS) break; /* the caller's wait reports it */
      if (all) sl->done = 1;
    }
    pthread_mutex_unlock(&g_mu);
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&g_mu);
  }
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

/* (g_mu held) wakes the progress thread, starting it on first use */
static void progress_kick(void) {
  if (!g_async) return;
  if (!g_thr_on) {
    g_thr_stop = 0;
    if (pthread_create(&g_thr, NULL, progress_main, NULL) != 0) {
      g_async = 0;
      return;
    }
    g_thr_on = 1;
  }
  pthread_cond_signal(&g_cv);
}

static void progress_stop(void) {
  pthread_mutex_lock(&g_mu);
  int on = g_thr_on;
  g_thr_stop = 1;
  pthread_cond_signal(&g_cv);
  pthread_mutex_unlock(&g_mu);
  if (on) pthread_join(g_thr, NULL);
  g_thr_on = 0;
}

static int nb_slot_new(int pieces) {
  int k = 0;
  while (k < g_nnb && g_nb[k].used) k++;
  if (k == g_nnb) {
    nb_slot *t = realloc(g_nb, (size_t)(g_nnb + 8) * sizeof *t);
    if (!t) return -1;
    memset(t + g_nnb, 0, 8 * sizeof *t);
    g_nb = t;
    g_nnb += 8;
  }
  nb_slot *sl = &g_nb[k];
  if (pieces > sl->cap) {
    MPI_Request *q = realloc(sl->q, (size_t)pieces * sizeof *q);
    if (!q) return -1;
    sl->q = q;
    sl->cap = pieces;
  }
  sl->n = 0;
  sl->used = 1;
  sl->done = 0;
  return k;
}

static int nb_valid(int req, char *err, size_t cap) {
  if (req >= 0 && req < g_nnb && g_nb[req].used) return 1;
  snprintf(err, cap, "MPI transport: no all-reduce request %d in flight", req);
  return 0;
}

static int u_iallreduce(float *buf, int64_t n, int *req, char *err, size_t cap) {
  if (check(err, cap)) return 1;
  int64_t pieces = n > 0 ? (n + INT_MAX - 1) / INT_MAX : 1;
  int k = nb_slot_new((int)pieces);
  if (k < 0) return fail(err, cap, "MPI %s: out of memory%s", "Iallreduce", MPI_SUCCESS);
  nb_slot *sl = &g_nb[k];
  for (int64_t i = 0; i < pieces; i++) {
    int64_t off = i * INT_MAX;
    int c = (int)(n - off < INT_MAX ? n - off : INT_MAX);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + off, c, MPI_FLOAT, MPI_SUM, g_comm, &sl->q[sl->n]);
    if (rc != MPI_SUCCESS) return fail(err, cap, "MPI %s failed: %s", "Iallreduce", rc);
    sl->n++;
  }
  *req = k;
  progress_kick();
  return 0;
}

static int u_test(int req, int *done, char *err, size_t cap) {
  *done = 0;
  if (!g_inited || g_failed) return check(err, cap);
  if (!nb_valid(req, err, cap)) return 1;
  serve_pings();
  nb_slot *sl = &g_nb[req];
  int all = sl->done;
  int rc = all ? MPI_SUCCESS : MPI_Testall(sl->n, sl->q, &all, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) return fail(err, cap, "MPI %s failed: %s", "Testall", rc);
  if (all) {
    sl->used = 0;
    *done = 1;
  }
  return 0;
}

static int u_wait(int req, char *err, size_t cap) {
  if (!g_inited || g_failed) return check(err, cap);
  if (!nb_valid(req, err, cap)) return 1;
  nb_slot *sl = &g_nb[req];
  for (int i = 0; !sl->done && i < sl->n; i++) /* a request the thread completed is MPI_REQUEST_NULL */
    if (wait_req(&sl->q[i], "allreduce", err, cap)) return 1;
  sl->used = 0;
  return 0;
}

static void u_abandon(void) { g_failed = 1; }

static int u_broadcast(void *buf, int64_t bytes, int root, char *err, size_t cap) {
  if (check(err, cap)) return 1;
  for (int64_t off = 0; off < bytes; off += INT_MAX) {
    int c = (int)(bytes - off < INT_MAX ? bytes - off : INT_MAX);
    MPI_Request q;
    int rc = MPI_Ibcast((char *)buf + off, c, MPI_BYTE, root, g_comm, &q);
    if (rc != MPI_SUCCESS) return fail(err, cap, "MPI %s failed: %s", "Ibcast", rc);
    if (wait_req(&q, "broadcast", err, cap)) return 1;
  }
  return 0;
}

static int u_allgather(const void *send, int64_t bytes, void *recv, char *err, size_t cap) {
  if (check(err, cap)) return 1;
  if (bytes > INT_MAX) return fail(err, cap, "MPI %s: a piece over INT_MAX bytes%s", "allgather", MPI_SUCCESS);
  MPI_Request q;
  int rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, g_comm, &q);
  if (rc != MPI_SUCCESS) return fail(err, cap, "MPI %s failed: %s", "Iallgather", rc);
  return wait_req(&q, "allgather", err, cap);
}

static int u_allgatherv(const void *send, int64_t bytes, void *recv, const int64_t *counts, char *err, size_t cap) {
  if (check(err, cap)) return 1;
  int *c = malloc((size_t)g_size * sizeof(int)), *d = malloc((size_t)g_size * sizeof(int));
  int64_t total = 0;
  int bad = !c || !d;
  for (int r = 0; !bad && r < g_size; r++) {
    if (counts[r] > INT_MAX || total > INT_MAX) bad = 1;
    c[r] = (int)counts[r];
    d[r] = (int)total;
    total += counts[r];
  }
  if (bad || total > INT_MAX || counts[g_rank] != bytes) {
    free(c);
    free(d);
    return fail(err, cap, "MPI %s: counts over INT_MAX bytes, or this rank's count differs from its buffer%s",
                "allgatherv", MPI_SUCCESS);
  }
  MPI_Request q;
  int rc = MPI_Iallgatherv(send, (int)bytes, MPI_BYTE, recv, c, d, MPI_BYTE, g_comm, &q);
  int out = rc != MPI_SUCCESS ? fail(err, cap, "MPI %s failed: %s", "Iallgatherv", rc)
                              : wait_req(&q, "allgatherv", err, cap);
  free(c);
  free(d);
  return out;
}

static int u_barrier(char *err, size_t cap) {
  if (check(err, cap)) return 1;
  MPI_Request q;
  int rc = MPI_Ibarrier(g_comm, &q);
  if (rc != MPI_SUCCESS) return fail(err, cap, "MPI %s failed: %s", "Ibarrier", rc);
  return wait_req(&q, "barrier", err, cap);
}

/* The entry points: every MPI call under g_mu (the progress thread's too). */
#define LOCKED(call)                                                                                                   \
  pthread_mutex_lock(&g_mu);                                                                                           \
  int out_ = call;                                                                                                     \
  pthread_mutex_unlock(&g_mu);                                                                                         \
  return out_
static int p_init(double timeout_s, char *err, size_t cap) { LOCKED(u_init(timeout_s, err, cap)); }
static int p_allreduce(float *buf, int64_t n, char *err, size_t cap) { LOCKED(u_allreduce(buf, n, err, cap)); }
static int p_iallreduce(float *buf, int64_t n, int *req, char *err, size_t cap) {
  LOCKED(u_iallreduce(buf, n, req, err, cap));
}
static int p_test(int req, int *done, char *err, size_t cap) { LOCKED(u_test(req, done, err, cap)); }
static int p_wait(int req, char *err, size_t cap) { LOCKED(u_wait(req, err, cap)); }
static int p_broadcast(void *buf, int64_t bytes, int root, char *err, size_t cap) {
  LOCKED(u_broadcast(buf, bytes, root, err, cap));
}
static int p_allgather(const void *send, int64_t bytes, void *recv, char *err, size_t cap) {
  LOCKED(u_allgather(send, bytes, recv, err, cap));
}
static int p_allgatherv(const void *send, int64_t bytes, void *recv, const int64_t *counts, char *err, size_t cap) {
  LOCKED(u_allgatherv(send, bytes, recv, counts, err, cap));
}
static int p_barrier(char *err, size_t cap) { LOCKED(u_barrier(err, cap)); }
static void p_abandon(void) {
  pthread_mutex_lock(&g_mu);
  u_abandon();
  pthread_mutex_unlock(&g_mu);
}

static void p_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static int p_finalize(void) {
  progress_stop();
  if (!g_inited) return 0;
  for (int k = 0; k < g_nnb; k++) free(g_nb[k].q);
  free(g_nb);
  g_nb = NULL;
  g_nnb = 0;
  g_inited = 0;
  if (g_failed) return 1; /* a lost rank would make MPI_Finalize wait for it: the launcher ends the job */
  MPI_Comm_free(&g_comm);
  MPI_Comm_free(&g_ctl);
  if (g_we_inited) MPI_Finalize();
  return 0;
}

static loom_coll_api g_api;

__attribute__((visibility("default"))) const loom_coll_api *loom_collective_plugin(void) {
  int len = 0;
  MPI_Get_library_version(g_name, &len);
  char *nl = strchr(g_name, '\n');
  if (nl) *nl = 0;
  char *comma = strchr(g_name, ',');
  if (comma) *comma = 0;
  g_api.version = LOOM_COLL_API_VERSION;
  g_api.name = g_name;
  g_api.init = p_init;
  g_api.rank = p_rank;
  g_api.size = p_size;
  g_api.set_timeout = p_set_timeout;
  g_api.allreduce_sum_f32 = p_allreduce;
  g_api.broadcast = p_broadcast;
  g_api.allgather = p_allgather;
  g_api.allgatherv = p_allgatherv;
  g_api.barrier = p_barrier;
  g_api.iallreduce_sum_f32 = p_iallreduce;
  g_api.test = p_test;
  g_api.wait = p_wait;
  g_api.abandon = p_abandon;
  g_api.abort = p_abort;
  g_api.finalize = p_finalize;
  return &g_api;
}
