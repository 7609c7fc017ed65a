/* The default thread count: the CPUs this process may run on and its share
 * of them.
 *   cpus    = CPUs in the affinity mask (sched_getaffinity; online CPUs when
 *             it cannot be read), lowered to the cgroup CPU quota rounded up
 *             when one is set (v2 cpu.max, v1 cpu.cfs_quota_us /
 *             cpu.cfs_period_us; the smallest along the cgroup's ancestors).
 *   threads = cpus / (processes a launcher started on this host), at least
 *             1, when the process is not pinned (its mask holds every online
 *             CPU; a launcher that pins processes has divided the cores
 *             already); else cpus.
 * LOOM_NUM_THREADS (> 0) replaces the default; a caller's explicit count
 * replaces both. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/cpus.h"

static int env_count(const char *name) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  long v = strtol(s, &end, 10);
  return (*end || v < 1 || v > 1 << 20) ? 0 : (int)v;
}

/* Slurm's "2(x3),1": the largest per-node count (a node's share is never
 * overestimated). */
static int slurm_tasks(const char *name) {
  const char *p = getenv(name);
  if (!p || !*p) return 0;
  long best = 0;
  while (*p) {
    char *end;
    long c = strtol(p, &end, 10);
    if (end == p) return 0;
    if (c > best) best = c;
    p = end;
    if (*p == '(') {
      p = strchr(p, ')');
      if (!p) return 0;
      p++;
    }
    if (*p == ',') p++;
    else if (*p) return 0;
  }
  return best > 0 && best <= 1 << 20 ? (int)best : 0;
}

static int read_line(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fgets(buf, (int)n, f) != NULL;
  fclose(f);
  return ok;
}

/* The quota in CPUs set at dir (0 = none there). */
static double quota_v2(const char *dir) {
  char path[4096], line[128];
  snprintf(path, sizeof path, "%s/cpu.max", dir);
  if (!read_line(path, line, sizeof line)) return 0;
  char q[32];
  long period = 0;
  if (sscanf(line, "%31s %ld", q, &period) != 2 || period <= 0 || !strcmp(q, "max")) return 0;
  double quota = atof(q);
  return quota > 0 ? quota / (double)period : 0;
}

static double quota_v1(const char *dir) {
  char path[4096], line[64];
  snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
  if (!read_line(path, line, sizeof line)) return 0;
  long quota = atol(line);
  snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
  if (quota <= 0 || !read_line(path, line, sizeof line)) return 0;
  long period = atol(line);
  return period > 0 ? (double)quota / (double)period : 0;
}

/* The smallest quota along base/rel and its ancestors up to base. */
static double walk_quota(const char *base, const char *rel, double (*get)(const char *)) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s", base, rel);
  size_t root_len = strlen(base);
  double best = 0;
  for (;;) {
    size_t len = strlen(path);
    while (len > root_len && path[len - 1] == '/') path[--len] = 0;
    double q = get(path);
    if (q > 0 && (best == 0 || q < best)) best = q;
    char *slash = strrchr(path, '/');
    if (len <= root_len || !slash || (size_t)(slash - path) < root_len) break;
    *slash = 0;
  }
  return best;
}

/* Reads /proc/self/cgroup: the v2 path ("0::/x") and the v1 path of the
 * hierarchy holding the cpu controller. */
static void cgroup_paths(char *v2, char *v1, size_t n) {
  v2[0] = v1[0] = 0;
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *c1 = strchr(line, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c1 = *c2 = 0;
    const char *ctl = c1 + 1, *path = c2 + 1;
    if (!strcmp(line, "0") && !*ctl) {
      snprintf(v2, n, "%s", path);
      continue;
    }
    char list[256];
    snprintf(list, sizeof list, "%s", ctl);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
      if (!strcmp(t, "cpu")) snprintf(v1, n, "%s", path);
  }
  fclose(f);
}

static double cgroup_quota(int *version) {
  const char *root = getenv("LOOM_CGROUP_ROOT");
  if (!root || !*root) root = "/sys/fs/cgroup";
  char v2[2048], v1[2048], base[2300];
  cgroup_paths(v2, v1, sizeof v2);
  double best = 0;
  *version = 0;
  static const char *const v2_dirs[] = {"", "/unified"};
  static const char *const v1_dirs[] = {"/cpu,cpuacct", "/cpu", "/cpuacct,cpu"};
  for (size_t i = 0; i < sizeof v2_dirs / sizeof *v2_dirs; i++) {
    snprintf(base, sizeof base, "%s%s", root, v2_dirs[i]);
    double q = walk_quota(base, v2[0] ? v2 : "/", quota_v2);
    if (q > 0 && (best == 0 || q < best)) best = q, *version = 2;
  }
  for (size_t i = 0; i < sizeof v1_dirs / sizeof *v1_dirs; i++) {
    snprintf(base, sizeof base, "%s%s", root, v1_dirs[i]);
    double q = walk_quota(base, v1[0] ? v1 : "/", quota_v1);
    if (q > 0 && (best == 0 || q < best)) best = q, *version = 1;
  }
  return best;
}

static int affinity_cpus(void) {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  return 0;
}

void loom__cpu_budget_read(loom_cpu_budget *b) {
  memset(b, 0, sizeof *b);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  b->online = online > 0 ? (int)online : 1;
  int aff = affinity_cpus();
  b->affinity = aff > 0 ? aff : b->online;
  int cpus = b->affinity;
  b->source = aff > 0 ? LOOM_THREADS_AFFINITY : LOOM_THREADS_ONLINE;
  b->quota = cgroup_quota(&b->quota_version);
  if (b->quota > 0) {
    int q = (int)ceil(b->quota - 1e-9);
    if (q < 1) q = 1;
    if (q < cpus) {
      cpus = q;
      b->source = LOOM_THREADS_QUOTA;
    }
  }
  static const char *const vars[] = {"LOOM_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                     "SLURM_NTASKS_PER_NODE"};
  b->local_size = 1;
  for (size_t i = 0; i < sizeof vars / sizeof *vars && b->local_var == NULL; i++) {
    int v = env_count(vars[i]);
    if (v > 0) b->local_size = v, b->local_var = vars[i];
  }
  static const char *const slurm[] = {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"};
  for (size_t i = 0; i < 2 && b->local_var == NULL; i++) {
    int v = slurm_tasks(slurm[i]);
    if (v > 0) b->local_size = v, b->local_var = slurm[i];
  }
  b->threads = cpus;
  int pinned = b->affinity < b->online;
  if (b->local_size > 1 && !pinned) {
    b->threads = cpus / b->local_size > 0 ? cpus / b->local_size : 1;
    b->source = LOOM_THREADS_SHARE;
  }
  char quota[96] = "";
  if (b->quota > 0)
    snprintf(quota, sizeof quota, "; cgroup v%d CPU quota %.2f CPUs", b->quota_version, b->quota);
  int env = env_count("LOOM_NUM_THREADS");
  const char *s = b->threads == 1 ? "" : "s";
  switch (b->source) {
  case LOOM_THREADS_SHARE:
    snprintf(b->why, sizeof b->why, "%d thread%s: launcher share, %d CPUs / %d processes on this host (%s)%s",
             b->threads, s, cpus, b->local_size, b->local_var, quota);
    break;
  case LOOM_THREADS_QUOTA:
    snprintf(b->why, sizeof b->why, "%d thread%s: cgroup v%d CPU quota %.2f CPUs, rounded up (%d in the affinity mask)",
             b->threads, s, b->quota_version, b->quota, b->affinity);
    break;
  default:
    snprintf(b->why, sizeof b->why, "%d thread%s: %d CPU%s in the %s (%d online)%s%s", b->threads, s, cpus, cpus == 1 ? "" : "s",
             b->source == LOOM_THREADS_AFFINITY ? "affinity mask" : "machine", b->online, quota,
             pinned && b->local_size > 1 ? "; pinned, so the launcher's share is the mask" : "");
    break;
  }
  if (env > 0) {
    char def[sizeof b->why];
    snprintf(def, sizeof def, "%s", b->why);
    b->threads = env;
    b->source = LOOM_THREADS_USER;
    snprintf(b->why, sizeof b->why, "%d thread%s: set by the user (LOOM_NUM_THREADS); default %.120s", env,
             env == 1 ? "" : "s", def);
  }
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static loom_cpu_budget g_budget;
static void budget_once(void) { loom__cpu_budget_read(&g_budget); }

int loom__threads_resolve(int requested, char *why, size_t why_len) {
  if (requested > 0) {
    if (why && why_len) snprintf(why, why_len, "%d thread%s: set by the caller (num_threads)", requested,
                                 requested == 1 ? "" : "s");
    return requested;
  }
  pthread_once(&g_once, budget_once);
  if (why && why_len) snprintf(why, why_len, "%s", g_budget.why);
  return g_budget.threads;
}
