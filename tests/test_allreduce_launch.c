/* The collective (all-reduce) strategy launched without mpirun: scripts/launch_local gives each task a
 * TF_CONFIG of chief and workers only, and the ranks meet over Gloo's TCP transport (build/libloom_gloo.so)
 * through the rendezvous rank 0 serves at its TF_CONFIG address. examples/allreduce_job trained that way
 * against one process with N times the batch, a worker-only cluster (worker 0 is the chief), a worker
 * killed (SIGKILL) or stalled (SIGSTOP), a task that never comes, tasks whose TF_CONFIGs disagree, a
 * missing plugin. Also: a worker-only TF_CONFIG under mpirun whose size disagrees with MPI's, and the
 * job under Slurm's environment (the variables srun sets). Overlapped all-reduces (the Gloo plugin's
 * non-blocking all-reduce) against blocking ones, bitwise, and a rank lost while they are in flight;
 * the plugin's non-blocking calls made directly by two forked ranks. Skipped with a message when the Gloo plugin
 * (libgloo-dev) is missing. Every wait is bounded (timeout(1) around each launch; polls with deadlines). */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include "test_util.h"
#include "ckpt_compare.h"
#include "../distributed/collective_api.h"

#ifndef LOOM_ALLREDUCE_JOB_BIN
#define LOOM_ALLREDUCE_JOB_BIN "build/examples/allreduce_job"
#endif
#ifndef LOOM_GLOO_PLUGIN_PATH
#define LOOM_GLOO_PLUGIN_PATH "build/libloom_gloo.so"
#endif
#ifndef LOOM_MPI_PLUGIN_PATH
#define LOOM_MPI_PLUGIN_PATH "build/libloom_mpi.so"
#endif
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp"

static int have_gloo(void) {
  if (access(LOOM_GLOO_PLUGIN_PATH, R_OK) != 0) {
    fprintf(stderr, "SKIPPED: %s not built (install libgloo-dev: scripts/deps.sh)\n", LOOM_GLOO_PLUGIN_PATH);
    return 0;
  }
  return 1;
}

static char *slurp(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *slurp(const char *fmt, ...) {
  char p[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p, sizeof p, fmt, ap);
  va_end(ap);
  return tu_file_exists(p) ? tu_read_file(p, NULL) : strdup("");
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* scripts/launch_local with opts (its -p/-c/-w/-e flags) into dir/name (model_dir) and dir/name.out (its own
 * output; the tasks' logs in dir/name/logs); returns its exit status (the chief's). */
static int launch(const char *dir, const char *name, const char *env, const char *opts, const char *args) {
  return sh("env -u TF_CONFIG %s timeout 150 scripts/launch_local %s -d %s/%s -- %s %s > %s/%s.out 2>&1", env ? env : "",
            opts, dir, name, LOOM_ALLREDUCE_JOB_BIN, args, dir, name);
}

/* Every task's log of the job in dir/name, one after another. */
static char *logs_of(const char *dir, const char *name) {
  static const char *const tasks[] = {"chief-0", "worker-0", "worker-1", "worker-2", "evaluator-0"};
  size_t cap = 1, len = 0;
  char *all = calloc(1, 1);
  for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++) {
    char *s = slurp("%s/%s/logs/%s.log", dir, name, tasks[i]);
    size_t n = strlen(s);
    all = realloc(all, cap += n + 64);
    len += (size_t)snprintf(all + len, cap - len, "== %s\n%s", tasks[i], s);
    free(s);
  }
  return all;
}

/* A TF_CONFIG launch of opts (n trainers, batch 16 each) against one local process with batch 16n: the
 * same variables within 1e-5 relative after 100 SGD steps, every rank's bitwise identical, over Gloo;
 * with an evaluator task (-e 1), its evaluation of the final checkpoint equals the chief's. */
static void match_local(const char *opts, int n, const char *lead, const char *extra) {
  char dir[TU_TMPDIR_CAP], dl[256], dc[256];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  snprintf(dl, sizeof dl, "%s/local", dir);
  snprintf(dc, sizeof dc, "%s/coll", dir);
  int rc = sh("env -u TF_CONFIG timeout 120 %s --model_dir %s --distribute local --batch %d --steps 100 %s > "
              "%s/local.out 2>&1",
              LOOM_ALLREDUCE_JOB_BIN, dl, 16 * n, extra, dir);
  char *lo = slurp("%s/local.out", dir);
  cr_assert_eq(rc, 0, "local run exited %d:\n%s", rc, lo);
  free(lo);
  char args[512];
  snprintf(args, sizeof args, "--distribute auto --batch 16 --steps 100 --log info %s", extra);
  rc = launch(dir, "coll", "LOOM_COLLECTIVE_TIMEOUT=30", opts, args);
  char *out = logs_of(dir, "coll"), *ll = slurp("%s/coll.out", dir);
  cr_assert_eq(rc, 0, "launch_local %s exited %d:\n%s\n%s", opts, rc, ll, out);
  tu_same_checksums(out, n);
  char want[64];
  snprintf(want, sizeof want, "rank=0 size=%d steps=100 global_step=100", n);
  cr_assert(strstr(out, want), "%s", out);
  cr_assert(strstr(out, "(Gloo "), "the job did not run over Gloo:\n%s", out);
  char lead_log[64];
  snprintf(lead_log, sizeof lead_log, "== %s\n", lead);
  const char *lp = strstr(out, lead_log);
  cr_assert(lp && strstr(lp, "allreduce_job: done accuracy="), "%s did not finish as the chief:\n%s", lead, out);
  const char *ev = strstr(out, "== evaluator-0\n");
  if (strstr(opts, "-e 1")) { /* the evaluator task beside the ranks evaluated the final checkpoint as the chief did */
    const char *a = strstr(lp, "done accuracy="), *b = ev ? strstr(ev, "done accuracy=") : NULL;
    cr_assert(b && atof(a + 14) == atof(b + 14), "the evaluator's final evaluation differs from the chief's:\n%s", out);
  }
  free(out);
  free(ll);
  int nv = 0;
  double rel = tu_compare_ckpts(dl, dc, 100, &nv);
  cr_assert(nv >= 4, "only %d variables compared", nv);
  fprintf(stderr, "allreduce_launch: %s: %d variables, max relative difference %.3g\n", opts, nv, rel);
  cr_assert(rel <= 1e-5, "%s: %d trainers x batch 16 vs 1 x batch %d differ by %g relative", opts, n, 16 * n, rel);
  tu_rmtree(dir);
}

Test(allreduce_launch, tf_config_chief_and_worker_match_one_worker, .timeout = 300) {
  if (!have_gloo()) return;
  match_local("-p 0 -w 1 -e 1", 2, "chief-0", "");
}

/* No chief: worker 0 is the chief (it serves the rendezvous, writes the checkpoints, evaluates). Three
 * ranks: every rank must still end bitwise identical (a ring whose ranks summed in different orders would
 * not). */
Test(allreduce_launch, worker_only_cluster_worker0_is_the_chief, .timeout = 300) {
  if (!have_gloo()) return;
  match_local("-p 0 -c 0 -w 3 -e 0", 3, "worker-0", "");
}

/* An embedding's sparse gradient: rows and ids through Gloo's allgatherv. */
Test(allreduce_launch, sparse_embedding_gradient_over_gloo, .timeout = 300) {
  if (!have_gloo()) return;
  match_local("-p 0 -w 1 -e 0", 2, "chief-0", "--embed 50");
}

/* A relaunch of a TF_CONFIG job resumes from the latest checkpoint (64 steps, then a new job to 100)
 * and ends where 100 steps at once do (the example's input repeats every 32 global steps). */
Test(allreduce_launch, relaunch_resumes_from_the_checkpoint, .timeout = 300) {
  if (!have_gloo()) return;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  static const char *const opts = "-p 0 -w 1 -e 0";
  cr_assert_eq(launch(dir, "once", NULL, opts, "--batch 16 --steps 100 --optimizer adam --lr 0.01"), 0);
  cr_assert_eq(launch(dir, "twice", NULL, opts, "--batch 16 --steps 64 --optimizer adam --lr 0.01"), 0);
  cr_assert_eq(launch(dir, "twice", NULL, opts, "--batch 16 --steps 100 --optimizer adam --lr 0.01"), 0);
  char *out = logs_of(dir, "twice");
  cr_assert(strstr(out, "steps=36 global_step=100"), "the relaunch did not resume at step 64:\n%s", out);
  tu_same_checksums(out, 2);
  free(out);
  char da[256], db[256];
  snprintf(da, sizeof da, "%s/once", dir);
  snprintf(db, sizeof db, "%s/twice", dir);
  int nv = 0;
  double rel = tu_compare_ckpts(da, db, 100, &nv);
  fprintf(stderr, "allreduce_launch: relaunch at 64 vs uninterrupted, 100 steps: max relative difference %.3g\n", rel);
  cr_assert(rel <= 1e-6, "resumed training differs from uninterrupted training by %g relative", rel);
  tu_rmtree(dir);
}

/* The rank 0 summary line's value of key ("variables_checksum=") in a job's logs, into out. */
static void rank0_value(const char *logs, const char *key, char *out, size_t cap) {
  const char *p = strstr(logs, "collective: rank=0 ");
  cr_assert(p, "no summary line of rank 0:\n%s", logs);
  const char *v = strstr(p, key);
  cr_assert(v, "no %s in rank 0's summary:\n%s", key, logs);
  v += strlen(key);
  size_t n = strcspn(v, " \n");
  cr_assert(n < cap);
  memcpy(out, v, n);
  out[n] = 0;
}

/* Over Gloo's non-blocking all-reduce (the plugin's own thread) a step's fusion buckets (small ones
 * here, several per step) start during the backward pass and run beside it; the variables are bitwise
 * those of the blocking path (LOOM_COLLECTIVE_OVERLAP=0: the same Gloo algorithm on the same buckets in
 * the same order), and the strategy reports the non-blocking transport. */
static void overlap_matches_blocking(const char *opts, int n) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  static const char *const args = "--distribute auto --batch 16 --steps 60 --hidden 48 --optimizer adam --lr 0.01 "
                                  "--log info";
  char *logs[2];
  for (int ov = 0; ov < 2; ov++) {
    char env[256];
    snprintf(env, sizeof env,
             "LOOM_COLLECTIVE_TIMEOUT=30 LOOM_COLLECTIVE_BUCKET_BYTES=512 LOOM_COLLECTIVE_FIRST_BUCKET_BYTES=64 "
             "LOOM_COLLECTIVE_OVERLAP=%d",
             ov);
    int rc = launch(dir, ov ? "ov" : "blk", env, opts, args);
    logs[ov] = logs_of(dir, ov ? "ov" : "blk");
    cr_assert_eq(rc, 0, "launch_local %s (overlap %d) exited %d:\n%s", opts, ov, rc, logs[ov]);
    tu_same_checksums(logs[ov], n);
    cr_assert(strstr(logs[ov], "allreduce_path=gloo"), "not over Gloo:\n%s", logs[ov]);
  }
  char a[64], b[64], nb[16], async[8];
  rank0_value(logs[1], "variables_checksum=", a, sizeof a);
  rank0_value(logs[0], "variables_checksum=", b, sizeof b);
  cr_assert_str_eq(a, b, "%s: overlapped all-reduces over Gloo end with other variables than blocking ones", opts);
  rank0_value(logs[1], "buckets=", nb, sizeof nb);
  cr_assert(atoi(nb) >= 3, "only %s bucket(s) per step: nothing to overlap\n%s", nb, logs[1]);
  rank0_value(logs[1], "allreduce_async=", async, sizeof async);
  cr_assert_str_eq(async, "1", "the Gloo transport's all-reduce did not run beside the backward pass:\n%s", logs[1]);
  cr_assert(strstr(logs[1], "all-reduces overlap the backward pass (non-blocking transport)"), "%s", logs[1]);
  rank0_value(logs[0], "allreduce_async=", async, sizeof async);
  cr_assert_str_eq(async, "0", "%s", logs[0]);
  fprintf(stderr, "allreduce_launch: %s: overlapped and blocking all-reduces over Gloo: checksum %s, %s buckets\n", opts,
          a, nb);
  free(logs[0]);
  free(logs[1]);
  tu_rmtree(dir);
}

Test(allreduce_launch, overlapped_allreduce_over_gloo_matches_blocking_2_ranks, .timeout = 300) {
  if (!have_gloo()) return;
  overlap_matches_blocking("-p 0 -w 1 -e 0", 2);
}

Test(allreduce_launch, overlapped_allreduce_over_gloo_matches_blocking_3_ranks, .timeout = 300) {
  if (!have_gloo()) return;
  overlap_matches_blocking("-p 0 -c 0 -w 3 -e 0", 3);
}

/* worker:1 (rank 2 of 3) killed or stopped mid-training: the chief and worker:0 exit non-zero within the
 * collective timeout, naming it; with overlap, while the ranks' all-reduces run on the Gloo plugin's
 * thread (small buckets: several in flight per step), else through the blocking calls. */
static void lose_worker(int sig, int overlap) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  cr_assert_eq(sh("(env -u TF_CONFIG LOOM_COLLECTIVE_TIMEOUT=3 %s timeout 150 scripts/launch_local -p 0 -w 2 -e 0 "
                  "-d %s/m -- %s --batch 16 --steps 1000000 --sleep_ms 5 %s > %s/job.out 2>&1; echo $? > %s/job.rc) &",
                  overlap ? "LOOM_COLLECTIVE_BUCKET_BYTES=256 LOOM_COLLECTIVE_FIRST_BUCKET_BYTES=64"
                          : "LOOM_COLLECTIVE_OVERLAP=0",
                  dir, LOOM_ALLREDUCE_JOB_BIN, overlap ? "--hidden 32 --log info" : "", dir, dir),
               0);
  char rc_path[256];
  snprintf(rc_path, sizeof rc_path, "%s/job.rc", dir);
  int pid = 0;
  double t0 = tu_now_s();
  while (tu_now_s() - t0 < 60 && pid <= 0) {
    char *s = slurp("%s/m/logs/worker-1.log", dir);
    const char *p = strstr(s, "rank=2 pid=");
    if (p && strstr(s, "progress step=30")) pid = atoi(p + 11);
    free(s);
    tu_nap(0.05);
  }
  cr_assert(pid > 0, "worker:1 never made progress");
  cr_assert_eq(kill(pid, sig), 0);
  double t1 = tu_now_s();
  char *chief = NULL;
  while (tu_now_s() - t1 < 60) { /* the chief's end (launch_local itself then waits for the stopped task) */
    chief = slurp("%s/m/logs/chief-0.log", dir);
    if (strstr(chief, "allreduce_job: rank 0:")) break;
    free(chief);
    chief = NULL;
    tu_nap(0.05);
  }
  double took = tu_now_s() - t1;
  kill(pid, SIGKILL);
  int status = tu_wait_status_file(rc_path, 120);
  char *out = logs_of(dir, "m");
  cr_assert(chief, "the chief did not fail within 60 s of losing worker:1:\n%s", out);
  cr_assert(status != 0, "launch_local exited 0 (or not within 120 s: %d) after losing a worker:\n%s", status, out);
  const char *w0 = strstr(out, "== worker-0");
  cr_assert(w0 && strstr(w0, "allreduce_job: rank 1:"), "worker:0 did not fail:\n%s", out);
  static const char *const named = "lost rank(s) (dead or stalled, no answer to a liveness probe): 2 (worker:1)";
  cr_assert(strstr(chief, named), "the chief does not name worker:1:\n%s", out);
  cr_assert(strstr(w0, named), "worker:0 does not name worker:1:\n%s", out);
  if (sig == SIGSTOP) cr_assert(strstr(chief, "did not complete within the collective timeout of 3 s"), "%s", chief);
  if (overlap)
    cr_assert(strstr(chief, "all-reduces overlap the backward pass (non-blocking transport)"),
              "the chief's all-reduces did not run on the Gloo plugin's thread:\n%s", chief);
  fprintf(stderr, "allreduce_launch: worker:1 %s (%s all-reduces): the chief failed after %.1f s\n",
          sig == SIGSTOP ? "stopped" : "killed", overlap ? "overlapped" : "blocking", took);
  cr_assert(took < 30, "%.1f s to fail after losing a worker (timeout 3 s)", took);
  free(chief);
  free(out);
  tu_rmtree(dir);
}

Test(allreduce_launch, killed_worker_ends_every_task_naming_it, .timeout = 300) {
  if (!have_gloo()) return;
  lose_worker(SIGKILL, 0);
}

Test(allreduce_launch, stalled_worker_times_out_naming_it, .timeout = 300) {
  if (!have_gloo()) return;
  lose_worker(SIGSTOP, 0);
}

Test(allreduce_launch, killed_worker_during_overlapped_allreduce_is_named, .timeout = 300) {
  if (!have_gloo()) return;
  lose_worker(SIGKILL, 1);
}

Test(allreduce_launch, stalled_worker_during_overlapped_allreduce_is_named, .timeout = 300) {
  if (!have_gloo()) return;
  lose_worker(SIGSTOP, 1);
}

/* Rank 1's input ends at step 32 while the chief's all-reduces are in flight on the Gloo plugin's thread
 * (small buckets, several per step): the chief's first bucket meets rank 1's end-of-training flag, it
 * gives up on its other buckets (closing its connections), and both exit non-zero naming the step well
 * before the collective timeout of 60 s. */
Test(allreduce_launch, input_ending_early_with_overlapped_allreduces_fails_every_rank, .timeout = 200) {
  if (!have_gloo()) return;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  double t0 = tu_now_s();
  int rc = launch(dir, "m", "LOOM_COLLECTIVE_TIMEOUT=60 LOOM_COLLECTIVE_BUCKET_BYTES=256 LOOM_COLLECTIVE_FIRST_BUCKET_BYTES=64",
                  "-p 0 -w 1 -e 0", "--batch 16 --steps 1000 --hidden 32 --finite_odd_ranks 1 --log info");
  double took = tu_now_s() - t0;
  char *out = logs_of(dir, "m");
  cr_assert(rc != 0 && rc != 124, "launch_local exited %d:\n%s", rc, out);
  const char *w0 = strstr(out, "== worker-0");
  cr_assert(w0, "%s", out);
  cr_assert(strstr(out, "all-reduces overlap the backward pass (non-blocking transport)"), "%s", out);
  cr_assert(strstr(out, "allreduce_job: rank 0: collective strategy: rank 0 is training at global step 32 while 1 of 2 "
                        "ranks are still training"),
            "%s", out);
  cr_assert(strstr(w0, "allreduce_job: rank 1: collective strategy: rank 1 ended its training at global step 32"), "%s",
            out);
  cr_assert(took < 45, "%.1f s to end (the collective timeout is 60 s)", took);
  free(out);
  tu_rmtree(dir);
}

/* One task alone, with a TF_CONFIG of the given type: it fails after the collective timeout. */
static char *alone(const char *dir, const char *name, const char *type, const char *cluster, const char *env) {
  sh("TF_CONFIG='{\"cluster\": %s, \"task\": {\"type\": \"%s\", \"index\": 0}}' LOOM_COLLECTIVE_TIMEOUT=3 %s "
     "timeout 60 %s --model_dir %s/m_%s --batch 16 --steps 10 > %s/%s.out 2>&1; echo $? > %s/%s.rc",
     cluster, type, env ? env : "", LOOM_ALLREDUCE_JOB_BIN, dir, name, dir, name, dir, name);
  char *rc = slurp("%s/%s.rc", dir, name);
  int code = atoi(rc);
  free(rc);
  char *out = slurp("%s/%s.out", dir, name);
  cr_assert(code != 0 && code != 124, "%s exited %d (124: no deadline):\n%s", name, code, out);
  return out;
}

/* A TCP port on 127.0.0.1 that nothing listens on now: the kernel's pick for port 0, released again
 * (a port derived from the pid could be another test's, or a lingering job's). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert(fd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* The chief whose worker never comes, and a worker whose chief never comes: each fails at its deadline
 * naming the other side. */
Test(allreduce_launch, a_task_that_never_comes_is_named, .timeout = 120) {
  if (!have_gloo()) return;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  char port[16];
  snprintf(port, sizeof port, "%d", free_port());
  char cluster[256];
  snprintf(cluster, sizeof cluster, "{\"chief\": [\"127.0.0.1:%s\"], \"worker\": [\"127.0.0.1:0\"]}", port);
  double t0 = tu_now_s();
  char *c = alone(dir, "chief", "chief", cluster, NULL);
  double took = tu_now_s() - t0;
  cr_assert(strstr(c, "waiting for 'loom/size/1' from rank 1 (worker:0) (a task that has not joined the rendezvous) "
                      "did not complete within the collective timeout of 3 s"),
            "%s", c);
  cr_assert(took < 30, "%.1f s", took);
  char *w = alone(dir, "worker", "worker", cluster, NULL);
  char want[256];
  snprintf(want, sizeof want,
           "the rendezvous store served by rank 0 (chief:0) at 127.0.0.1:%s could not be reached within the collective "
           "timeout of 3 s",
           port);
  cr_assert(strstr(w, want), "%s", w);
  free(c);
  free(w);
  tu_rmtree(dir);
}

/* The chief's TF_CONFIG names one worker, the worker's two: the chief names both clusters. */
Test(allreduce_launch, tasks_whose_tf_configs_disagree_name_both, .timeout = 120) {
  if (!have_gloo()) return;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  int port = free_port();
  cr_assert_eq(
      sh("cd %s && (TF_CONFIG='{\"cluster\": {\"chief\": [\"127.0.0.1:%d\"], \"worker\": [\"127.0.0.1:0\"]}, \"task\": "
         "{\"type\": \"chief\", \"index\": 0}}' LOOM_COLLECTIVE_TIMEOUT=5 timeout 60 %s/%s --model_dir m --steps 10 > "
         "chief.out 2>&1 &) && TF_CONFIG='{\"cluster\": {\"chief\": [\"127.0.0.1:%d\"], \"worker\": [\"127.0.0.1:0\", "
         "\"127.0.0.1:0\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}' LOOM_COLLECTIVE_TIMEOUT=5 timeout 60 "
         "%s/%s --model_dir m --steps 10 > worker.out 2>&1; echo $? > worker.rc",
         dir, port, getcwd((char[1024]){0}, 1024), LOOM_ALLREDUCE_JOB_BIN, port, getcwd((char[1024]){0}, 1024),
         LOOM_ALLREDUCE_JOB_BIN),
      0);
  double t0 = tu_now_s();
  char *c = NULL;
  while (tu_now_s() - t0 < 30) {
    c = slurp("%s/chief.out", dir);
    if (strstr(c, "allreduce_job: rank 0:")) break;
    free(c);
    c = NULL;
    tu_nap(0.1);
  }
  char *w = slurp("%s/worker.out", dir), *wrc = slurp("%s/worker.rc", dir);
  cr_assert(c, "the chief did not fail:\n%s", w);
  cr_assert(strstr(c, "rank 1's TF_CONFIG names the trainers chief:0,worker:0,worker:1 where rank 0's names "
                      "chief:0,worker:0"),
            "%s", c);
  cr_assert(atoi(wrc) != 0 && atoi(wrc) != 124, "the worker exited %d:\n%s", atoi(wrc), w);
  free(c);
  free(w);
  free(wrc);
  tu_rmtree(dir);
}

/* A cluster of one chief: under AUTO local training, as in TF; under COLLECTIVE one rank over Gloo
 * (no rendezvous to serve), the same variables as local training, bit for bit. And rank 0's TF_CONFIG
 * port 0 in a cluster of two: an error naming it (the rendezvous needs a fixed port). */
Test(allreduce_launch, one_chief_alone_and_port_zero, .timeout = 120) {
  if (!have_gloo()) return;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  static const char *const one = "TF_CONFIG='{\"cluster\": {\"chief\": [\"127.0.0.1:0\"]}, \"task\": {\"type\": \"chief\", "
                                 "\"index\": 0}}'";
  cr_assert_eq(sh("%s timeout 60 %s --model_dir %s/auto --steps 20 --distribute auto > %s/auto.out 2>&1", one,
                  LOOM_ALLREDUCE_JOB_BIN, dir, dir),
               0);
  cr_assert_eq(sh("%s timeout 60 %s --model_dir %s/coll --steps 20 --distribute collective > %s/coll.out 2>&1", one,
                  LOOM_ALLREDUCE_JOB_BIN, dir, dir),
               0);
  char *a = slurp("%s/auto.out", dir), *c = slurp("%s/coll.out", dir);
  cr_assert(!strstr(a, "collective: rank="), "AUTO with a chief alone ran the collective strategy:\n%s", a);
  cr_assert(strstr(c, "collective: rank=0 size=1 steps=20"), "%s", c);
  char da[256], dc[256];
  snprintf(da, sizeof da, "%s/auto", dir);
  snprintf(dc, sizeof dc, "%s/coll", dir);
  int nv = 0;
  cr_assert_eq(tu_compare_ckpts(da, dc, 20, &nv), 0.0, "one rank over Gloo differs from local training");
  free(a);
  free(c);
  char *z = alone(dir, "zero", "chief", "{\"chief\": [\"127.0.0.1:0\"], \"worker\": [\"127.0.0.1:0\"]}", NULL);
  cr_assert(strstr(z, "rendezvous address 127.0.0.1:0 of rank 0 (chief:0) has port 0"), "%s", z);
  free(z);
  tu_rmtree(dir);
}

/* ------------------------------------------------------------------ the Gloo plugin's calls, directly */
/* (in a forked child) Opens the Gloo plugin, meets the other rank at rdv and initializes the transport
 * with the given timeout: its table, or NULL with the reason on stderr. */
static const loom_coll_api *open_rank(int rank, const char *rdv, double timeout_s) {
  alarm(60); /* no wait of the child may outlive the test */
  void *h = dlopen(LOOM_GLOO_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  loom_coll_plugin_fn fn = h ? (loom_coll_plugin_fn)dlsym(h, LOOM_COLL_PLUGIN_SYMBOL) : NULL;
  int (*rdz)(int, int, const char *, const char *, const char *, char *, size_t) =
      h ? (int (*)(int, int, const char *, const char *, const char *, char *, size_t))dlsym(h, "loom_collective_rendezvous")
        : NULL;
  const loom_coll_api *api = fn ? fn() : NULL;
  char err[1024] = "";
  if (!api || !rdz) {
    fprintf(stderr, "rank %d: cannot open %s\n", rank, LOOM_GLOO_PLUGIN_PATH);
    return NULL;
  }
  if (api->version < 2 || !api->iallreduce_sum_f32 || !api->test || !api->wait || !api->abandon) {
    fprintf(stderr, "rank %d: the Gloo plugin is at interface version %d, without the non-blocking all-reduce\n", rank,
            api->version);
    return NULL;
  }
  if (rdz(rank, 2, rdv, "127.0.0.1", "chief:0,worker:0", err, sizeof err) || api->init(timeout_s, err, sizeof err)) {
    fprintf(stderr, "rank %d: %s\n", rank, err);
    return NULL;
  }
  return api;
}

/* Runs rank_fn(0, rdv) and rank_fn(1, rdv) in two forked children meeting at a free port; asserts that
 * both exit 0 (a non-zero status is the number of the check that failed, its message on stderr). */
static void two_ranks(int (*rank_fn)(int, const char *)) {
  char rdv[64];
  snprintf(rdv, sizeof rdv, "127.0.0.1:%d", free_port());
  pid_t pid[2];
  for (int r = 0; r < 2; r++) {
    pid[r] = fork();
    cr_assert(pid[r] >= 0);
    if (pid[r] == 0) _exit(rank_fn(r, rdv));
  }
  for (int r = 0; r < 2; r++) {
    int status = 0;
    cr_assert_eq(waitpid(pid[r], &status, 0), pid[r]);
    cr_assert(WIFEXITED(status), "rank %d ended by signal %d", r, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    cr_assert_eq(WEXITSTATUS(status), 0, "rank %d failed check %d (its message above)", r, WEXITSTATUS(status));
  }
}
/* One rank of two (a forked child): the plugin's interface version 2 through its table. Six
 * non-blocking all-reduces of 1 to 300,000 floats are started, a blocking allgather between the third
 * and the fourth (it must come after the three queued before it on every rank, or the ranks' collectives
 * would not pair up), then the last is tested until done and the others waited in reverse order; every
 * sum is exact (small integers), a completed handle is no longer valid, a blocking all-reduce and
 * finalize follow. Returns 0, or the number of the first check that failed (its message on stderr). */
static int plugin_rank(int rank, const char *rdv) {
  const loom_coll_api *api = open_rank(rank, rdv, 20);
  char err[1024] = "";
  if (!api) return 2;
  static const int64_t sizes[6] = {1, 100, 65536, 70000, 300000, 17};
  float *buf[6];
  int req[6];
  for (int k = 0; k < 6; k++) {
    buf[k] = malloc((size_t)sizes[k] * sizeof(float));
    for (int64_t i = 0; i < sizes[k]; i++) buf[k][i] = (float)((rank + 1) * (k + 1) + i % 7);
  }
  for (int k = 0; k < 6; k++) {
    if (api->iallreduce_sum_f32(buf[k], sizes[k], &req[k], err, sizeof err)) {
      fprintf(stderr, "rank %d: iallreduce %d: %s\n", rank, k, err);
      return 5;
    }
    if (k == 2) { /* a blocking collective behind three requests in flight */
      int mine = 100 + rank, all[2] = {0, 0};
      if (api->allgather(&mine, sizeof mine, all, err, sizeof err) || all[0] != 100 || all[1] != 101) {
        fprintf(stderr, "rank %d: allgather: %s (%d %d)\n", rank, err, all[0], all[1]);
        return 6;
      }
    }
  }
  int done = 0;
  for (int spins = 0; !done; spins++) {
    if (api->test(req[5], &done, err, sizeof err) || spins > 200000) {
      fprintf(stderr, "rank %d: test: %s\n", rank, err);
      return 7;
    }
    if (!done) usleep(100);
  }
  for (int k = 4; k >= 0; k--)
    if (api->wait(req[k], err, sizeof err)) {
      fprintf(stderr, "rank %d: wait %d: %s\n", rank, k, err);
      return 8;
    }
  for (int k = 0; k < 6; k++)
    for (int64_t i = 0; i < sizes[k]; i++)
      if (buf[k][i] != (float)(3 * (k + 1) + 2 * (i % 7))) {
        fprintf(stderr, "rank %d: all-reduce %d element %lld is %g, want %g\n", rank, k, (long long)i, buf[k][i],
                (double)(3 * (k + 1) + 2 * (i % 7)));
        return 9;
      }
  if (api->wait(req[0], err, sizeof err) == 0 || !strstr(err, "no all-reduce request")) {
    fprintf(stderr, "rank %d: a completed handle was waited again: '%s'\n", rank, err);
    return 10;
  }
  float one = (float)(rank + 1);
  if (api->allreduce_sum_f32(&one, 1, err, sizeof err) || one != 3.0f) {
    fprintf(stderr, "rank %d: blocking all-reduce after the non-blocking ones: %s (%g)\n", rank, err, one);
    return 11;
  }
  if (api->finalize()) return 12;
  for (int k = 0; k < 6; k++) free(buf[k]);
  return 0;
}

Test(allreduce_launch, gloo_plugin_nonblocking_allreduce_calls, .timeout = 120) {
  if (!have_gloo()) return;
  two_ranks(plugin_rank);
}

/* Rank 1 gives up (abandon) while rank 0 waits on an all-reduce that rank 1 never started: rank 1 closes
 * its connections, so rank 0's wait fails at once, with Gloo's reason, not at the collective timeout
 * (30 s); both finalize non-zero (the transport failed). */
static int abandon_rank(int rank, const char *rdv) {
  const loom_coll_api *api = open_rank(rank, rdv, 30);
  char err[1024] = "";
  if (!api) return 2;
  if (rank == 1) {
    usleep(500000);
    api->abandon();
    return api->finalize() != 0 ? 0 : 4;
  }
  static float buf[1000];
  int req = -1;
  if (api->iallreduce_sum_f32(buf, 1000, &req, err, sizeof err)) return 5;
  double t0 = tu_now_s();
  int rc = api->wait(req, err, sizeof err);
  double took = tu_now_s() - t0;
  fprintf(stderr, "allreduce_launch: rank 0's wait after rank 1 abandoned: %.1f s: %s\n", took, err);
  if (rc == 0 || !strstr(err, "collective allreduce") || !strstr(err, "Gloo:")) return 6;
  if (took > 15) return 7;
  return api->finalize() != 0 ? 0 : 8;
}

Test(allreduce_launch, gloo_plugin_abandon_fails_the_peer_at_once, .timeout = 120) {
  if (!have_gloo()) return;
  two_ranks(abandon_rank);
}

Test(allreduce_launch, missing_gloo_plugin_is_a_clear_error, .timeout = 60) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  char *out = alone(dir, "noplugin", "chief", "{\"chief\": [\"127.0.0.1:1\"], \"worker\": [\"127.0.0.1:0\"]}",
                    "LOOM_GLOO_PLUGIN=/nonexistent/libloom_gloo.so");
  cr_assert(strstr(out, "launched by TF_CONFIG alone needs its Gloo transport plugin libloom_gloo.so, which could not "
                        "be loaded") &&
                strstr(out, "/nonexistent/libloom_gloo.so"),
            "%s", out);
  free(out);
  tu_rmtree(dir);
}

/* ------------------------------------------------------------------ under mpirun and Slurm */
static int have_mpi(void) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0 || access(LOOM_MPI_PLUGIN_PATH, R_OK) != 0) {
    fprintf(stderr, "SKIPPED: mpirun or %s missing (openmpi-bin, libopenmpi-dev)\n", LOOM_MPI_PLUGIN_PATH);
    return 0;
  }
  return 1;
}

/* A worker-only TF_CONFIG under mpirun: its size is checked against MPI's (both named), and with the
 * right size it trains (worker 0, rank 0, is the chief). */
Test(allreduce_launch, worker_only_tf_config_under_mpirun, .timeout = 200) {
  if (!have_mpi()) return;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  int rc = sh("TF_CONFIG='{\"cluster\":{\"worker\":[\"a:1\",\"b:2\",\"c:3\"]},\"task\":{\"type\":\"worker\",\"index\":0}}' "
              "timeout 60 " MPIRUN " -np 2 -x TF_CONFIG %s --model_dir %s/m3 --batch 16 --steps 10 --distribute auto "
              "> %s/size.out 2>&1",
              LOOM_ALLREDUCE_JOB_BIN, dir, dir);
  char *out = slurp("%s/size.out", dir);
  cr_assert_neq(rc, 0, "%s", out);
  cr_assert(strstr(out, "TF_CONFIG names 3 trainer task(s) (chief + worker) but MPI runs 2 rank(s)"), "%s", out);
  free(out);
  rc = sh("TF_CONFIG='{\"cluster\":{\"worker\":[\"a:1\",\"b:2\"]},\"task\":{\"type\":\"worker\",\"index\":0}}' "
          "timeout 60 " MPIRUN " -np 2 -x TF_CONFIG %s --model_dir %s/m2 --batch 16 --steps 10 --distribute auto --log info "
          "> %s/ok.out 2>&1",
          LOOM_ALLREDUCE_JOB_BIN, dir, dir);
  out = slurp("%s/ok.out", dir);
  cr_assert_eq(rc, 0, "%s", out);
  tu_same_checksums(out, 2);
  cr_assert(strstr(out, "Open MPI"), "not over MPI:\n%s", out);
  cr_assert(strstr(out, "allreduce_job: done accuracy="), "%s", out);
  free(out);
  tu_rmtree(dir);
}

/* An MPI size that disagrees with the launcher's environment (here PMI_SIZE=2 in a process MPI starts
 * alone, as a task srun started without --mpi=pmix would be): an error naming both. */
Test(allreduce_launch, launcher_size_that_disagrees_with_mpi, .timeout = 60) {
  if (!have_mpi()) return;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "arlaunch");
  int rc = sh("env -u TF_CONFIG -u OMPI_COMM_WORLD_SIZE -u SLURM_NTASKS PMI_SIZE=2 PMI_RANK=0 timeout 60 %s "
              "--model_dir %s/m --steps 10 > %s/out 2>&1",
              LOOM_ALLREDUCE_JOB_BIN, dir, dir);
  char *out = slurp("%s/out", dir);
  cr_assert(rc != 0 && rc != 124, "exited %d:\n%s", rc, out);
  cr_assert(strstr(out, "the launcher's environment names 2 task(s)") && strstr(out, "initialized 1 rank(s)"), "%s",
            out);
  free(out);
  tu_rmtree(dir);
}

/* srun on a one-node Slurm cluster started for the test (scripts/slurm_local: slurmctld + slurmd,
 * auth/none): `srun --mpi=pmix -n 2` trains as mpirun does, matching one process with twice the batch. */
static char g_slurm_dir[TU_TMPDIR_CAP];
static void slurm_fini(void) {
  if (g_slurm_dir[0]) {
    sh("scripts/slurm_local stop %s >/dev/null 2>&1", g_slurm_dir);
    tu_rmtree(g_slurm_dir);
  }
}

Test(allreduce_launch, srun_two_tasks_match_one_worker, .timeout = 300, .fini = slurm_fini) {
  if (!have_mpi()) return;
  if (system("command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v srun >/dev/null") != 0 ||
      geteuid() != 0) {
    fprintf(stderr, "SKIPPED: srun test needs slurmctld, slurmd and slurm-client (scripts/deps.sh) and root\n");
    return;
  }
  tu_tmpdir(g_slurm_dir, sizeof g_slurm_dir, "arslurm");
  const char *dir = g_slurm_dir;
  int port = 30000 + 2 * (int)(getpid() % 10000);
  int rc = sh("SLURM_LOCAL_PORT=%d scripts/slurm_local start %s > %s/start.out 2>&1", port, dir, dir);
  char *so = slurp("%s/start.out", dir);
  cr_assert_eq(rc, 0, "scripts/slurm_local start failed:\n%s", so);
  free(so);
  rc = sh("env -u TF_CONFIG timeout 120 %s --model_dir %s/local --distribute local --batch 32 --steps 100 > "
          "%s/local.out 2>&1",
          LOOM_ALLREDUCE_JOB_BIN, dir, dir);
  cr_assert_eq(rc, 0);
  rc = sh("env -u TF_CONFIG SLURM_CONF=%s/slurm.conf timeout 150 srun --mpi=pmix -O -n 2 %s --model_dir %s/coll "
          "--distribute collective --batch 16 --steps 100 --log info > %s/srun.out 2>&1",
          dir, LOOM_ALLREDUCE_JOB_BIN, dir, dir);
  char *out = slurp("%s/srun.out", dir);
  cr_assert_eq(rc, 0, "srun exited %d:\n%s", rc, out);
  tu_same_checksums(out, 2);
  cr_assert(strstr(out, "(Open MPI"), "not over MPI:\n%s", out);
  cr_assert(strstr(out, "rank=0 size=2 steps=100 global_step=100"), "%s", out);
  free(out);
  char dl[256], dc[256];
  snprintf(dl, sizeof dl, "%s/local", dir);
  snprintf(dc, sizeof dc, "%s/coll", dir);
  int nv = 0;
  double rel = tu_compare_ckpts(dl, dc, 100, &nv);
  fprintf(stderr, "allreduce_launch: srun -n 2: %d variables, max relative difference %.3g\n", nv, rel);
  cr_assert(nv >= 4 && rel <= 1e-5, "srun -n 2 x batch 16 vs 1 x batch 32: %d variables, %g relative", nv, rel);
}
