/* bench/scaling's all-reduce study, quickly: the DDP and MWMS peers parse their flags (and refuse bad
 * ones) without their frameworks, and bench/scaling --collective runs loom's all-reduce on 1 and 2 ranks
 * for 20 steps and prints its keys: steps/s, E(N), the gradient bytes the strategy counted (4 x the
 * MLP's 535,818 parameters), the bytes each rank sent on lo against the ring bound, and the E(N)
 * model's predicted-vs-measured lines. The same through a shaped network (--net 1:1: every rank in
 * its own namespace under bench/netjob --collective, Gloo by TF_CONFIG): the bytes through the delay
 * proxy against the ring bound, and the model's lines, whose arithmetic is recomputed here from the
 * printed inputs. The peers read their rank from TF_CONFIG (--tf_config) as netjob launches them.
 * No timing is asserted (a figure only has to be positive). The bench parts are skipped with a
 * message when mpirun, a plugin, root or network namespaces are missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include "test_util.h"

#ifndef LOOM_MPI_PLUGIN_PATH
#define LOOM_MPI_PLUGIN_PATH "build/libloom_mpi.so"
#endif
#ifndef LOOM_GLOO_PLUGIN_PATH
#define LOOM_GLOO_PLUGIN_PATH "build/libloom_gloo.so"
#endif
#ifndef LOOM_DIST_JOB_BIN
#define LOOM_DIST_JOB_BIN "build/examples/dist_job"
#endif

/* Runs cmd (stdout and stderr) into dir/out.txt; returns its exit status and the output (malloc'd). */
static int sh(const char *dir, const char *cmd, char **out) {
  char full[4096], path[512];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  snprintf(full, sizeof full, "%s > %s 2>&1", cmd, path);
  int rc = system(full);
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot read %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = calloc(1, (size_t)n + 1);
  cr_assert(*out);
  cr_assert_eq(fread(*out, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* The value of the first "key=<number>" in s (the key preceded by a line start or a space); -1 if absent. */
static double kv(const char *s, const char *key) {
  size_t l = strlen(key);
  for (const char *p = strstr(s, key); p; p = strstr(p + 1, key))
    if ((p == s || p[-1] == '\n' || p[-1] == ' ') && p[l] == '=') return atof(p + l + 1);
  return -1;
}

/* A copy (malloc'd) of the line of s that starts with prefix; NULL if none. */
static char *line_of(const char *s, const char *prefix) {
  size_t l = strlen(prefix);
  for (const char *p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, prefix, l)) {
      const char *e = strchr(p, '\n');
      size_t n = e ? (size_t)(e - p) : strlen(p);
      char *c = malloc(n + 1);
      cr_assert(c);
      memcpy(c, p, n);
      c[n] = 0;
      return c;
    }
  return NULL;
}

Test(bench_scaling, peers_parse_their_flags) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "bsc");
  const char *peers[2] = {"bench/peers/torch_ddp_mlp.py", "bench/peers/tf_mwms_mlp.py"};
  for (int i = 0; i < 2; i++) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "python3 %s --check --nproc 4 --steps 7 --warmup 3 --opt adagrad", peers[i]);
    cr_assert_eq(sh(dir, cmd, &out), 0, "%s --check failed:\n%s", peers[i], out);
    cr_expect(strstr(out, "nproc=4") && strstr(out, "steps=7") && strstr(out, "warmup=3") && strstr(out, "opt=adagrad") &&
                  strstr(out, "batch=128") && strstr(out, "threads=1"),
              "%s --check printed:\n%s", peers[i], out);
    free(out);
    snprintf(cmd, sizeof cmd, "python3 %s --check --nproc 0", peers[i]);
    cr_expect_neq(sh(dir, cmd, &out), 0, "%s accepted --nproc 0", peers[i]);
    cr_expect(strstr(out, "--nproc"), "%s: the error does not name --nproc:\n%s", peers[i], out);
    free(out);
    snprintf(cmd, sizeof cmd, "python3 %s --check --opt rmsprop", peers[i]);
    cr_expect_neq(sh(dir, cmd, &out), 0, "%s accepted --opt rmsprop", peers[i]);
    cr_expect(strstr(out, "rmsprop"), "%s: the error does not name the bad choice:\n%s", peers[i], out);
    free(out);
  }
  tu_rmtree(dir);
}

Test(bench_scaling, collective_two_ranks_keys, .timeout = 300) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0 || access(LOOM_MPI_PLUGIN_PATH, R_OK) != 0 ||
      access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) != 0) {
    fprintf(stderr, "SKIPPED: mpirun, %s or Fashion-MNIST missing\n", LOOM_MPI_PLUGIN_PATH);
    return;
  }
  char dir[TU_TMPDIR_CAP], cmd[1024], *out = NULL;
  tu_tmpdir(dir, sizeof dir, "bsc");
  snprintf(cmd, sizeof cmd, "SCALING_OUT=%s SCALING_BIN=" LOOM_DIST_JOB_BIN " LOOM_MPI_PLUGIN=" LOOM_MPI_PLUGIN_PATH " timeout 280 bench/scaling --collective --ranks '1 2' --ps none --steps 20 --warmup 2 --sgd --no-plot",
           dir);
  cr_assert_eq(sh(dir, cmd, &out), 0, "bench/scaling --collective failed:\n%s", out);
  cr_expect_gt(kv(out, "loom_allreduce_n1_global_steps_per_sec"), 0, "%s", out);
  cr_expect_gt(kv(out, "loom_allreduce_n2_global_steps_per_sec"), 0, "%s", out);
  cr_expect_gt(kv(out, "loom_allreduce_n2_efficiency"), 0, "%s", out);
  cr_expect_eq(kv(out, "loom_allreduce_n2_processes"), 2, "%s", out);
  /* the MLP's dense gradient: 4 bytes x (784*512 + 512 + 512*256 + 256 + 256*10 + 10) */
  cr_expect_eq(kv(out, "loom_allreduce_n2_gradient_bytes"), 2143272.0, "%s", out);
  /* every byte on the job's own lo over 20 steps, start-up (the broadcast, the checks) included: near the
   * ring bound (on a shared lo, without root, other traffic counts too: only present then) */
  double ring = kv(out, "loom_allreduce_n2_bytes_vs_ring");
  if (strstr(out, "allreduce_bytes_counted_on=own_netns"))
    cr_expect(ring >= 0.95 && ring <= 1.5, "bytes vs ring %g\n%s", ring, out);
  else
    cr_expect_gt(ring, 0, "%s", out);
  cr_expect(strstr(out, "model_allreduce_n2_ring_predicted_steps_per_sec="), "%s", out);
  cr_expect(strstr(out, "model_allreduce_ring_rtt1ms_1gbit: E(1)=1.00"), "%s", out);
  cr_expect(strstr(out, "E(256)="), "%s", out);
  cr_expect(strstr(out, "plot=off"), "%s", out);
  free(out);
  tu_rmtree(dir);
}

/* --tf_config: each peer takes its rank, the world size (and DDP its rendezvous address) from TF_CONFIG
 * as loom's strategy orders the trainers (the chief first, then the workers by index); a ps job, a
 * task outside the cluster or no TF_CONFIG is an error naming what is wrong. */
Test(bench_scaling, peers_read_their_rank_from_tf_config) {
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "bsc");
  const char *peers[2] = {"bench/peers/torch_ddp_mlp.py", "bench/peers/tf_mwms_mlp.py"};
  const char *cluster = "{\\\"chief\\\": [\\\"10.231.1.2:2222\\\"], \\\"worker\\\": [\\\"10.231.2.2:0\\\", \\\"10.231.3.2:0\\\"]}";
  for (int i = 0; i < 2; i++) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "TF_CONFIG=\"{\\\"cluster\\\": %s, \\\"task\\\": {\\\"type\\\": \\\"worker\\\", \\\"index\\\": 1}}\" "
             "python3 %s --check --tf_config --steps 7 --model_dir /unused",
             cluster, peers[i]);
    cr_assert_eq(sh(dir, cmd, &out), 0, "%s --tf_config failed:\n%s", peers[i], out);
    cr_expect(strstr(out, "rank=2 ") && strstr(out, "nproc=3 ") && strstr(out, "steps=7 "), "%s printed:\n%s", peers[i], out);
    if (i == 0) cr_expect(strstr(out, "master=10.231.1.2:2222 "), "%s printed:\n%s", peers[i], out);
    free(out);
    snprintf(cmd, sizeof cmd,
             "TF_CONFIG=\"{\\\"cluster\\\": %s, \\\"task\\\": {\\\"type\\\": \\\"chief\\\", \\\"index\\\": 0}}\" python3 %s --check --tf_config",
             cluster, peers[i]);
    cr_assert_eq(sh(dir, cmd, &out), 0, "%s --tf_config (chief) failed:\n%s", peers[i], out);
    cr_expect(strstr(out, "rank=0 ") && strstr(out, "nproc=3 "), "%s printed:\n%s", peers[i], out);
    free(out);
    snprintf(cmd, sizeof cmd,
             "TF_CONFIG=\"{\\\"cluster\\\": {\\\"chief\\\": [\\\"a:1\\\"], \\\"ps\\\": [\\\"b:2\\\"]}, \\\"task\\\": {\\\"type\\\": \\\"chief\\\", \\\"index\\\": 0}}\" "
             "python3 %s --check --tf_config",
             peers[i]);
    cr_expect_neq(sh(dir, cmd, &out), 0, "%s accepted a ps job", peers[i]);
    cr_expect(strstr(out, "'ps'"), "%s: the error does not name the ps job:\n%s", peers[i], out);
    free(out);
    snprintf(cmd, sizeof cmd,
             "TF_CONFIG=\"{\\\"cluster\\\": %s, \\\"task\\\": {\\\"type\\\": \\\"worker\\\", \\\"index\\\": 5}}\" python3 %s --check --tf_config",
             cluster, peers[i]);
    cr_expect_neq(sh(dir, cmd, &out), 0, "%s accepted worker 5 of 2", peers[i]);
    cr_expect(strstr(out, "worker:5"), "%s: the error does not name the task:\n%s", peers[i], out);
    free(out);
    snprintf(cmd, sizeof cmd, "env -u TF_CONFIG python3 %s --check --tf_config", peers[i]);
    cr_expect_neq(sh(dir, cmd, &out), 0, "%s ran without TF_CONFIG", peers[i]);
    cr_expect(strstr(out, "TF_CONFIG is not set"), "%s:\n%s", peers[i], out);
    free(out);
  }
  tu_rmtree(dir);
}

/* bench/netjob --collective refuses PS tasks and --mesh, naming the option (before it needs root). */
Test(bench_scaling, netjob_collective_refuses_ps_tasks) {
  char dir[TU_TMPDIR_CAP], *out = NULL;
  tu_tmpdir(dir, sizeof dir, "bsc");
  cr_expect_eq(sh(dir, "bench/netjob --collective -p 1 -w 1 -- true", &out), 2, "%s", out);
  cr_expect(strstr(out, "--collective needs -p 0") && strstr(out, "-p 1 given"), "%s", out);
  free(out);
  cr_expect_eq(sh(dir, "bench/netjob --collective --mesh -p 0 -- true", &out), 2, "%s", out);
  cr_expect(strstr(out, "--mesh"), "%s", out);
  free(out);
  tu_rmtree(dir);
}

Test(bench_scaling, collective_through_shaped_namespaces, .timeout = 300) {
  if (geteuid() != 0 || system("ip netns add loom_bsc_probe >/dev/null 2>&1 && ip netns del loom_bsc_probe") != 0 ||
      access(LOOM_GLOO_PLUGIN_PATH, R_OK) != 0 ||
      access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) != 0) {
    fprintf(stderr, "SKIPPED: needs root, network namespaces, %s and Fashion-MNIST\n", LOOM_GLOO_PLUGIN_PATH);
    return;
  }
  char dir[TU_TMPDIR_CAP], cmd[1024], *out = NULL;
  tu_tmpdir(dir, sizeof dir, "bsc");
  snprintf(cmd, sizeof cmd,
           "SCALING_OUT=%s SCALING_BIN=" LOOM_DIST_JOB_BIN " LOOM_GLOO_PLUGIN=" LOOM_GLOO_PLUGIN_PATH
           " timeout 280 bench/scaling --net 1:1 --collective --ranks '1 2' --ps none --steps 20 --warmup 2 --sgd --no-plot",
           dir);
  cr_assert_eq(sh(dir, cmd, &out), 0, "bench/scaling --net 1:1 --collective failed:\n%s", out);
  cr_expect(strstr(out, "net1ms_1gbit_allreduce_transport=gloo_tf_config") &&
                strstr(out, "net1ms_1gbit_allreduce_bytes_counted_on=delay_proxy"),
            "%s", out);
  cr_expect_gt(kv(out, "net1ms_1gbit_loom_allreduce_n1_global_steps_per_sec"), 0, "%s", out);
  cr_expect_gt(kv(out, "net1ms_1gbit_loom_allreduce_n2_global_steps_per_sec"), 0, "%s", out);
  cr_expect_gt(kv(out, "net1ms_1gbit_loom_allreduce_n2_efficiency"), 0, "%s", out);
  cr_expect_eq(kv(out, "net1ms_1gbit_loom_allreduce_n2_gradient_bytes"), 2143272.0, "%s", out);
  /* one rank sends nothing; two send every byte through the proxy: the ring's plus start-up (the
   * initial broadcast, the rendezvous) over 20 steps */
  cr_expect_eq(kv(out, "net1ms_1gbit_loom_allreduce_n1_bytes_per_step_per_worker"), 0, "%s", out);
  double ring = kv(out, "net1ms_1gbit_loom_allreduce_n2_bytes_vs_ring");
  cr_expect(ring >= 0.99 && ring <= 1.2, "bytes vs ring %g\n%s", ring, out);
  double ov = kv(out, "net1ms_1gbit_loom_allreduce_n2_overlap_fraction");
  cr_expect(ov >= 0 && ov <= 1, "overlap fraction %g\n%s", ov, out);
  /* the model from the shape alone: lat = 0.5 ms, bw = 1 Gbit/s / 8 */
  cr_expect_eq(kv(out, "model_net1ms_1gbit_allreduce_lat_ms"), 0.5, "%s", out);
  cr_expect_eq(kv(out, "model_net1ms_1gbit_allreduce_link_bytes_per_sec"), 125000000.0, "%s", out);
  double tc = kv(out, "model_net1ms_1gbit_allreduce_compute_ms");
  cr_expect_gt(tc, 0, "%s", out);
  char *l = line_of(out, "model_net1ms_1gbit_allreduce_n2_ring_predicted_steps_per_sec=");
  cr_assert(l, "no model line for N=2:\n%s", out);
  /* ring at N = 2: 2 (N-1)/N B / bw + 2 (N-1) lat = 2,143,272 / 125e6 s + 1 ms = 18.146 ms */
  cr_expect(fabs(kv(l, "ring_predicted_allreduce_ms") - 18.15) < 0.006, "%s", l);
  double f = kv(l, "overlap_fraction"), tr = tc + (1 - f) * 18.14618;
  if (tr < 18.14618) tr = 18.14618;
  /* 2 ranks on this machine's cores: stretched by N / C when N > C */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double s = cores < 2 ? 2.0 / (double)cores : 1.0;
  double pr = 1000.0 / (tr * s);
  cr_expect(fabs(kv(l, "model_net1ms_1gbit_allreduce_n2_ring_predicted_steps_per_sec") - pr) <= 0.051 + 0.001 * pr,
            "predicted %g, recomputed %g: %s", kv(l, "model_net1ms_1gbit_allreduce_n2_ring_predicted_steps_per_sec"), pr, l);
  cr_expect(fabs(kv(l, "no_overlap_ring_predicted") - 1000.0 / ((tc + 18.14618) * s)) <= 0.051 + 0.001 * pr, "%s", l);
  cr_expect_eq(kv(l, "measured"), kv(out, "net1ms_1gbit_loom_allreduce_n2_global_steps_per_sec"), "%s", l);
  free(l);
  cr_expect(strstr(out, "model_net1ms_1gbit_allreduce_ring: E(1)=1.00") && strstr(out, "model_net1ms_1gbit_allreduce_tree: E(1)=1.00"),
            "%s", out);
  cr_expect(strstr(out, "plot=off"), "%s", out);
  free(out);
  tu_rmtree(dir);
}
