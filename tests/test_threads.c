/* Thread counts that respect the machine (base/cpus.c), the pool's chunking
 * and FTZ in its workers (base/pool.c), and what `loom info` reports. Child
 * processes (the CLI, or a fork of this test) run under a changed affinity
 * mask, an injected or real cgroup CPU quota, or a launcher's environment. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "loom/loom.h"
#include "base/cpus.h"
#include "base/pool.h"

#ifndef LOOM_CLI_BIN
#define LOOM_CLI_BIN "build/loom"
#endif

static int affinity_count(void) {
  cpu_set_t s;
  CPU_ZERO(&s);
  if (sched_getaffinity(0, sizeof s, &s)) return 1;
  return CPU_COUNT(&s);
}

/* Runs `loom info` with the environment changes env ("NAME=VALUE" sets,
 * "NAME" unsets; NULL-terminated), on CPU 0 alone when one_cpu, after
 * joining cgroup procs file cg when not NULL. Returns its output (malloc). */
static char *run_info(const char *const *env, int one_cpu, const char *cg) {
  int fd[2];
  cr_assert_eq(pipe(fd), 0);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 1);
    for (int i = 0; env && env[i]; i++) {
      char kv[512];
      snprintf(kv, sizeof kv, "%s", env[i]);
      char *eq = strchr(kv, '=');
      if (eq) {
        *eq = 0;
        setenv(kv, eq + 1, 1);
      } else {
        unsetenv(kv);
      }
    }
    if (one_cpu) {
      cpu_set_t s;
      CPU_ZERO(&s);
      CPU_SET(0, &s);
      if (sched_setaffinity(0, sizeof s, &s)) _exit(90);
    }
    if (cg) {
      FILE *f = fopen(cg, "w");
      if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f)) _exit(91);
    }
    execl(LOOM_CLI_BIN, LOOM_CLI_BIN, "info", (char *)NULL);
    _exit(92);
  }
  close(fd[1]);
  size_t cap = 8192, n = 0;
  char *out = malloc(cap);
  ssize_t r;
  while ((r = read(fd[0], out + n, cap - 1 - n)) > 0) n += (size_t)r;
  out[n] = 0;
  close(fd[0]);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "loom info failed (status %d): %s", status, out);
  return out;
}

static const char *field(const char *out, const char *key) {
  static char v[512];
  char pat[64];
  snprintf(pat, sizeof pat, "\n%s: ", key);
  const char *p = strstr(out, pat);
  cr_assert(p, "no '%s' line in:\n%s", key, out);
  p += strlen(pat);
  size_t n = strcspn(p, "\n");
  snprintf(v, sizeof v, "%.*s", (int)n, p);
  return v;
}

static int threads_of(const char *out) { return atoi(field(out, "threads")); }

/* the launcher and user variables a test's own environment may carry */
#define CLEAN "LOOM_NUM_THREADS", "LOOM_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", \
              "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "LOOM_CGROUP_ROOT"

Test(threads, info_names_cpu_features_clones_blas_and_threads) {
  const char *env[] = {CLEAN, NULL};
  char *out = run_info(env, 0, NULL);
  cr_assert(!strncmp(out, "loom ", 5), "%s", out);
  cr_assert_gt(atoi(field(out, "online_cpus")), 0, "%s", out);
  cr_assert(strlen(field(out, "cpu_features")) > 0);
#if defined(__x86_64__)
  cr_assert(strstr(field(out, "cpu_features"), "sse4.2"), "%s", out); /* the build's x86-64-v2 baseline */
#endif
  cr_assert(strlen(field(out, "kernel_clones")) > 0);
  cr_assert(strstr(field(out, "blas"), "OpenBLAS"), "%s", out);
  cr_assert(strlen(field(out, "blas_core")) > 0);
  int aff = affinity_count();
  cr_assert_eq(atoi(field(out, "affinity_cpus")), aff, "%s", out);
  if (!strcmp(field(out, "cgroup_quota"), "none")) {
    cr_assert_eq(threads_of(out), aff, "%s", out);
    cr_assert(strstr(field(out, "threads_why"), "affinity mask"), "%s", out);
  } else { /* this machine's own quota */
    cr_assert(threads_of(out) >= 1 && threads_of(out) <= aff, "%s", out);
  }
  free(out);
}

Test(threads, one_cpu_affinity_runs_one_thread) {
  const char *env[] = {CLEAN, NULL};
  char *out = run_info(env, 1, NULL);
  cr_assert_eq(atoi(field(out, "affinity_cpus")), 1, "%s", out);
  cr_assert_eq(threads_of(out), 1, "%s", out);
  free(out);
}

/* A session made in a child on CPU 0 alone logs one thread at INFO, and
 * its pool has one thread (a parallel_for never leaves the caller). */
static char g_log[512];
static void sink(loom_log_level lvl, const char *msg, void *u) {
  (void)u;
  if (lvl == LOOM_LOG_INFO && !g_log[0]) snprintf(g_log, sizeof g_log, "%s", msg);
}
Test(threads, session_under_one_cpu_logs_its_count_and_why) {
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    unsetenv("LOOM_NUM_THREADS");
    unsetenv("LOOM_LOCAL_SIZE");
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(0, &s);
    if (sched_setaffinity(0, sizeof s, &s)) _exit(10);
    loom_log_set(sink, NULL, LOOM_LOG_INFO);
    loom_graph *g = loom_graph_new();
    loom_session *ss = loom_session_new(g, NULL, NULL);
    if (!ss) _exit(11);
    int ok = strstr(g_log, "session: 1 thread:") && strstr(g_log, "affinity mask");
    if (!ok) fprintf(stderr, "log: '%s'\n", g_log);
    loom_session_free(ss);
    loom_graph_free(g);
    _exit(ok ? 0 : 12);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

Test(threads, explicit_session_option_wins_and_is_logged) {
  loom_log_set(sink, NULL, LOOM_LOG_INFO);
  g_log[0] = 0;
  loom_graph *g = loom_graph_new();
  loom_session_options o = loom_session_options_default();
  o.num_threads = 3;
  loom_session *s = loom_session_new(g, &o, NULL);
  cr_assert(s);
  cr_assert(strstr(g_log, "3 threads: set by the caller"), "log: '%s'", g_log);
  loom_session_free(s);
  loom_graph_free(g);
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);
}

static char *tmpdir(void) {
  char *d = strdup("/tmp/loom_cg_XXXXXX");
  cr_assert(mkdtemp(d));
  return d;
}
static void write_file(const char *dir, const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert(f, "cannot write %s", p);
  fputs(text, f);
  fclose(f);
}

/* `loom info` with LOOM_CGROUP_ROOT=root: its output, whose cgroup_quota
 * line must be quota. */
static char *info_with_quota(const char *root, const char *quota) {
  char var[600];
  snprintf(var, sizeof var, "LOOM_CGROUP_ROOT=%s", root);
  const char *env[] = {CLEAN, var, NULL};
  char *out = run_info(env, 0, NULL);
  cr_assert_str_eq(field(out, "cgroup_quota"), quota, "%s", out);
  return out;
}
static void remove_tree(char *d) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
  cr_assert_eq(system(cmd), 0);
  free(d);
}

Test(threads, cgroup_v2_cpu_max_is_read_and_rounded_up) {
  char *d = tmpdir();
  write_file(d, "cpu.max", "50000 100000\n");
  char *out = info_with_quota(d, "0.50 CPUs (cgroup v2)");
  cr_assert_eq(threads_of(out), 1, "%s", out);
  if (affinity_count() > 1) cr_assert(strstr(field(out, "threads_why"), "cgroup v2 CPU quota"), "%s", out);
  free(out);
  write_file(d, "cpu.max", "max 100000\n"); /* no limit */
  out = info_with_quota(d, "none");
  cr_assert_eq(threads_of(out), affinity_count(), "%s", out);
  free(out);
  write_file(d, "cpu.max", "garbage\n"); /* malformed: ignored, never a crash */
  free(info_with_quota(d, "none"));
  remove_tree(d);
}

Test(threads, cgroup_v1_cfs_quota_is_read) {
  char *d = tmpdir(), sub[600];
  snprintf(sub, sizeof sub, "%s/cpu,cpuacct", d);
  cr_assert_eq(mkdir(sub, 0755), 0);
  write_file(sub, "cpu.cfs_quota_us", "150000\n");
  write_file(sub, "cpu.cfs_period_us", "100000\n");
  char *out = info_with_quota(d, "1.50 CPUs (cgroup v1)");
  int aff = affinity_count();
  cr_assert_eq(threads_of(out), aff < 2 ? aff : 2, "%s", out);
  free(out);
  write_file(sub, "cpu.cfs_quota_us", "-1\n"); /* unlimited */
  free(info_with_quota(d, "none"));
  remove_tree(d);
}

/* A real cgroup with a 0.5-CPU quota, where this kernel and these rights
 * allow making one (v1 cpu hierarchy or v2 with the cpu controller). */
Test(threads, real_cgroup_quota_limits_the_default) {
  char dir[256] = "", procs[300];
  static const char *const tries[][3] = {
      {"/sys/fs/cgroup/cpu", "cpu.cfs_quota_us", "50000"},
      {"/sys/fs/cgroup/cpu,cpuacct", "cpu.cfs_quota_us", "50000"},
      {"/sys/fs/cgroup", "cpu.max", "50000 100000"},
  };
  for (size_t i = 0; i < sizeof tries / sizeof *tries && !dir[0]; i++) {
    char d[256], f[400];
    snprintf(d, sizeof d, "%s/loom_test_%d", tries[i][0], (int)getpid());
    if (mkdir(d, 0755)) continue;
    snprintf(f, sizeof f, "%s/%s", d, tries[i][1]);
    FILE *q = fopen(f, "w");
    int ok = q && fprintf(q, "%s\n", tries[i][2]) > 0;
    if (q && fclose(q)) ok = 0;
    if (ok && !strcmp(tries[i][1], "cpu.cfs_quota_us")) {
      snprintf(f, sizeof f, "%s/cpu.cfs_period_us", d);
      q = fopen(f, "w");
      ok = q && fprintf(q, "100000\n") > 0;
      if (q && fclose(q)) ok = 0;
    }
    if (ok)
      snprintf(dir, sizeof dir, "%s", d);
    else
      rmdir(d);
  }
  if (!dir[0]) cr_skip_test("cannot create a cgroup with a CPU quota here (no rights or no cpu controller)");
  snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
  const char *env[] = {CLEAN, NULL};
  char *out = run_info(env, 0, procs);
  for (int i = 0; i < 50 && rmdir(dir) && errno == EBUSY; i++) usleep(20000);
  cr_assert_eq(threads_of(out), 1, "%s", out);
  cr_assert(strstr(field(out, "cgroup_quota"), "0.50 CPUs"), "%s", out);
  free(out);
}

Test(threads, launcher_share_three_processes_on_this_host) {
  const char *clean[] = {CLEAN, NULL};
  char *out = run_info(clean, 0, NULL);
  int cpus = threads_of(out); /* affinity and this machine's own quota, if any */
  int pinned = atoi(field(out, "affinity_cpus")) < atoi(field(out, "online_cpus"));
  free(out);
  int aff = affinity_count();
  int share = pinned ? cpus : cpus / 3 > 0 ? cpus / 3 : 1; /* a pinned process keeps its mask */
  static const char *const vars[] = {"LOOM_LOCAL_SIZE=3", "OMPI_COMM_WORLD_LOCAL_SIZE=3", "SLURM_NTASKS_PER_NODE=3",
                                     "SLURM_TASKS_PER_NODE=3(x2)", "SLURM_TASKS_PER_NODE=2,3"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *env[] = {CLEAN, vars[i], NULL};
    out = run_info(env, 0, NULL);
    cr_assert_eq(threads_of(out), share, "%s: %s", vars[i], out);
    cr_assert(3 * threads_of(out) <= (aff > 3 ? aff : 3), "%s: 3 processes would run %d threads on %d CPUs",
              vars[i], 3 * threads_of(out), aff);
    cr_assert(strstr(field(out, "launcher_processes_on_host"), "3 ("), "%s: %s", vars[i], out);
    free(out);
  }
  /* malformed values are ignored */
  const char *bad[] = {CLEAN, "LOOM_LOCAL_SIZE=three", "SLURM_TASKS_PER_NODE=(x2", NULL};
  out = run_info(bad, 0, NULL);
  cr_assert_eq(threads_of(out), cpus, "%s", out);
  free(out);
  /* the user's setting wins over the share */
  const char *user[] = {CLEAN, "LOOM_LOCAL_SIZE=3", "LOOM_NUM_THREADS=5", NULL};
  out = run_info(user, 0, NULL);
  cr_assert_eq(threads_of(out), 5, "%s", out);
  cr_assert(strstr(field(out, "threads_why"), "LOOM_NUM_THREADS"), "%s", out);
  free(out);
}

/* scripts/launch_local tells every process how many it started. */
Test(threads, launch_local_exports_the_local_size) {
  char *d = tmpdir(), cmd[1024], path[600];
  snprintf(cmd, sizeof cmd,
           "scripts/launch_local -p 2 -w 1 -e 0 -d '%s/md' -l '%s/logs' -- sh -c 'echo size=$LOOM_LOCAL_SIZE' sh "
           ">/dev/null 2>&1",
           d, d);
  cr_assert_eq(system(cmd), 0);
  static const char *const logs[] = {"chief-0", "ps-0", "ps-1", "worker-0"};
  for (size_t i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/logs/%s.log", d, logs[i]);
    FILE *f = fopen(path, "r");
    cr_assert(f, "no %s", path);
    char line[128] = "";
    cr_assert(fgets(line, sizeof line, f));
    fclose(f);
    cr_assert_str_eq(line, "size=4\n", "%s: %s", logs[i], line);
  }
  remove_tree(d);
}

/* ---- the pool ---- */
typedef struct {
  atomic_int calls, ftz_off;
  atomic_llong covered;
  int64_t n;
  unsigned char *seen;
} pf_probe;
static void probe(void *arg, int64_t b, int64_t e) {
  pf_probe *p = arg;
  atomic_fetch_add(&p->calls, 1);
  if (!loom__ftz_on()) atomic_fetch_add(&p->ftz_off, 1);
  for (int64_t i = b; i < e; i++) p->seen[i]++;
  atomic_fetch_add(&p->covered, e - b);
}

Test(pool, every_item_once_in_finer_chunks_with_ftz_in_every_thread) {
  loom__set_ftz(); /* the caller: a session sets it for its runs */
  for (int threads = 1; threads <= 4; threads++) {
    loom_pool *pool = loom__pool_new(threads);
    cr_assert(pool);
    static const int64_t ns[] = {1, 7, 100, 1000, 4097, 100000};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
      for (int rep = 0; rep < 50; rep++) {
        pf_probe p = {.n = ns[k]};
        p.seen = calloc((size_t)ns[k], 1);
        int fine = loom__pool_cuts_finely(pool);
        loom__parallel_for(pool, ns[k], 16, probe, &p);
        for (int64_t i = 0; i < ns[k]; i++) cr_assert_eq(p.seen[i], 1, "threads %d n %lld item %lld ran %d times",
                                                        threads, (long long)ns[k], (long long)i, p.seen[i]);
        cr_assert_eq(atomic_load(&p.covered), ns[k]);
        cr_assert_eq(atomic_load(&p.ftz_off), 0, "a chunk ran without FTZ/DAZ");
        int64_t want = fine ? loom__pool_chunks(threads, ns[k], 16) : ns[k] < 32 || threads < 2 ? 1
                                                                   : ns[k] / 16 < threads ? ns[k] / 16 : threads;
        int64_t chunk = (ns[k] + want - 1) / want;
        cr_assert_eq(atomic_load(&p.calls), (int)((ns[k] + chunk - 1) / chunk)); /* one call per chunk */
        free(p.seen);
      }
    loom__pool_free(pool);
  }
  /* finer than one chunk per thread when the work allows it */
  cr_assert_gt(loom__pool_chunks(2, 100000, 16), 2);
  cr_assert_eq(loom__pool_chunks(2, 31, 16), 1);
  cr_assert_eq(loom__pool_chunks(1, 100000, 16), 1);
}

/* ---- the pool adapts its cut: fine after a late worker, coarse again when all answer promptly ---- */
typedef struct {
  pthread_t caller;
  atomic_int worker_chunks;
  int slow;
} late_probe;
static void late_fn(void *arg, int64_t b, int64_t e) {
  late_probe *p = arg;
  (void)b;
  (void)e;
  if (pthread_equal(pthread_self(), p->caller)) {
    if (p->slow) usleep(1000); /* time for the worker to claim the other chunk */
    return;
  }
  atomic_fetch_add(&p->worker_chunks, 1);
  if (p->slow) usleep(10000); /* a worker held up (descheduled) in its chunk */
}

Test(pool, a_late_worker_makes_the_cut_finer_and_prompt_workers_make_it_coarse_again) {
  loom_pool *pool = loom__pool_new(2);
  cr_assert(pool);
  late_probe p = {.caller = pthread_self()};
  /* jobs whose worker chunk takes 10 ms: the caller waits past its spin phase.
   * Several jobs, not one: a caller descheduled itself for as long as the
   * worker's chunk finds the chunk done and has nothing to wait for; and a
   * worker slow to wake leaves the caller both chunks (late, but no chunk). */
  p.slow = 1;
  for (int i = 0; i < 50 && !(loom__pool_cuts_finely(pool) && atomic_load(&p.worker_chunks) > 0); i++)
    loom__parallel_for(pool, 1 << 20, 16, late_fn, &p);
  cr_assert_gt(atomic_load(&p.worker_chunks), 0, "the worker never took a chunk in 50 jobs");
  cr_assert(loom__pool_cuts_finely(pool), "50 jobs with a worker 10 ms late did not make the pool cut finely");
  pf_probe q = {.n = 1 << 20};
  q.seen = calloc((size_t)q.n, 1);
  loom__parallel_for(pool, q.n, 16, probe, &q);
  cr_assert_eq(atomic_load(&q.calls), loom__pool_chunks(2, q.n, 16), "the fine cut is %d chunks",
               loom__pool_chunks(2, q.n, 16));
  free(q.seen);
  /* prompt workers: back to one chunk per thread within a bounded number of jobs */
  p.slow = 0;
  int jobs = 0;
  while (loom__pool_cuts_finely(pool) && jobs < 20000) {
    loom__parallel_for(pool, 1 << 16, 16, late_fn, &p);
    jobs++;
  }
  cr_assert(!loom__pool_cuts_finely(pool), "still cutting finely after %d prompt jobs", jobs);
  loom__pool_free(pool);
}

/* ---- blocks of an exact size (the matrix product's cache-sized blocks) ---- */
typedef struct {
  atomic_int calls, bad;
  int64_t n, block;
  unsigned char *seen;
} blk_probe;
static void blk_fn(void *arg, int64_t b, int64_t e) {
  blk_probe *p = arg;
  atomic_fetch_add(&p->calls, 1);
  if (b % p->block || (e - b != p->block && e != p->n)) atomic_fetch_add(&p->bad, 1);
  for (int64_t i = b; i < e; i++) p->seen[i]++;
}

Test(pool, blocks_of_the_requested_size_whatever_the_thread_count) {
  for (int threads = 1; threads <= 3; threads++) {
    loom_pool *pool = loom__pool_new(threads);
    static const int64_t cases[][2] = {{100, 7}, {64, 8}, {5, 10}, {1000, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
      blk_probe p = {.n = cases[k][0], .block = cases[k][1]};
      p.seen = calloc((size_t)p.n, 1);
      loom__parallel_blocks(pool, p.n, p.block, blk_fn, &p);
      int64_t nb = (p.n + p.block - 1) / p.block;
      for (int64_t i = 0; i < p.n; i++) cr_assert_eq(p.seen[i], 1, "item %lld ran %d times", (long long)i, p.seen[i]);
      if (threads > 1 && nb > 1) {
        cr_assert_eq(atomic_load(&p.calls), (int)nb, "n %lld block %lld: %d calls", (long long)p.n,
                     (long long)p.block, atomic_load(&p.calls));
        cr_assert_eq(atomic_load(&p.bad), 0, "a block of the wrong size or alignment");
      }
      free(p.seen);
    }
    loom__pool_free(pool);
  }
}
