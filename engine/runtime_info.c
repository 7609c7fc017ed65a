/* loom_runtime_info: what this process sees and picked (the CPU backend's
 * findings and the default thread count with its reasons). */
#include <stdio.h>
#include "loom/loom_session.h"
#include "base/cpus.h"

size_t loom__cpu_info(char *buf, size_t len); /* kernels/cpu/cpu_info.c */

size_t loom_runtime_info(char *buf, size_t len) {
  if (!buf) len = 0;
  size_t used = loom__cpu_info(buf, len);
  loom_cpu_budget b;
  loom__cpu_budget_read(&b);
  char quota[64] = "none";
  if (b.quota > 0) snprintf(quota, sizeof quota, "%.2f CPUs (cgroup v%d)", b.quota, b.quota_version);
  char launcher[96] = "1 (alone)";
  if (b.local_var) snprintf(launcher, sizeof launcher, "%d (%s)", b.local_size, b.local_var);
  size_t off = used < len ? used : len;
  int n = snprintf(buf ? buf + off : NULL, len - off,
                   "online_cpus: %d\naffinity_cpus: %d\ncgroup_quota: %s\nlauncher_processes_on_host: %s\n"
                   "threads: %d\nthreads_why: %s\n",
                   b.online, b.affinity, quota, launcher, b.threads, b.why);
  return used + (n > 0 ? (size_t)n : 0);
}
