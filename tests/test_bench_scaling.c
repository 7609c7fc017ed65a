/* bench/scaling's all-reduce study, quickly: the DDP and MWMS peers parse their flags (and refuse bad
 * ones) without their frameworks, and bench/scaling --collective runs loom's all-reduce on 1 and 2 ranks
 * for 20 steps and prints its keys: steps/s, E(N), the gradient bytes the strategy counted (4 x the
 * MLP's 535,818 parameters), the bytes each rank sent on lo against the ring bound, and the E(N)
 * model's predicted-vs-measured lines. No timing is asserted (a figure only has to be positive).
 * The bench part is skipped with a message when mpirun or the MPI plugin is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "test_util.h"

#ifndef LOOM_MPI_PLUGIN_PATH
#define LOOM_MPI_PLUGIN_PATH "build/libloom_mpi.so"
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
