/* The collective strategy's NCCL path under the CUDA emulator (a CUDA=emu build; no GPU): two ranks under
 * mpirun train examples/allreduce_job on the (emulated) CUDA device, their dense gradients all-reduced by
 * the emulated NCCL (build/cuemu/libnccl_emu.so, opened through LOOM_NCCL_LIBRARY in place of libnccl),
 * against one process with twice the batch, and against the host all-reduce over MPI, which the strategy
 * falls back to when NCCL is turned off, missing, or a rank stalls. Skipped with a message when mpirun or
 * the MPI plugin is missing. Every wait is bounded (timeout(1) around mpirun; polls with deadlines). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../test_util.h"
#include "../ckpt_compare.h"

#define DIR "build/cuemu"
#define JOB DIR "/examples/allreduce_job"
#define NCCL_EMU DIR "/libnccl_emu.so"
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp"

static int have_mpi(void) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0) {
    fprintf(stderr, "SKIPPED: mpirun not found (openmpi-bin)\n");
    return 0;
  }
  if (access(DIR "/libloom_mpi.so", R_OK) != 0) {
    fprintf(stderr, "SKIPPED: " DIR "/libloom_mpi.so not built (install libopenmpi-dev: scripts/deps.sh)\n");
    return 0;
  }
  cr_assert_eq(access(NCCL_EMU, R_OK), 0, NCCL_EMU " is not built (make test-cuemu builds it)");
  cr_assert_eq(access(JOB, X_OK), 0, JOB " is not built (make test-cuemu builds it)");
  return 1;
}

/* `env job args` (under mpirun -np np when np > 0) into dir/name.out; the exit status. */
static int run(const char *dir, const char *name, const char *env, int np, const char *args) {
  char cmd[4096], pre[256] = "";
  if (np > 0) snprintf(pre, sizeof pre, MPIRUN " -np %d", np);
  snprintf(cmd, sizeof cmd, "env -u TF_CONFIG %s timeout 120 %s " JOB " %s > %s/%s.out 2>&1", env ? env : "", pre,
           args, dir, name);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static char *out_of(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s.out", dir, name);
  char *s = tu_read_file(p, NULL);
  return s ? s : strdup("");
}

/* Both ranks' variables checksum (asserted equal), into cs. */
static void checksum_of(const char *out, char cs[17]) {
  int n = 0;
  cs[0] = 0;
  for (const char *p = out; (p = strstr(p, "variables_checksum=")); p++, n++) {
    char c[32];
    cr_assert_eq(sscanf(p, "variables_checksum=%16s", c), 1);
    if (!cs[0]) memcpy(cs, c, 17);
    cr_assert_str_eq(c, cs, "the ranks' checksums differ:\n%s", out);
  }
  cr_assert_eq(n, 2, "expected 2 checksum lines:\n%s", out);
}

/* Every line with `what` (asserted: one per rank). */
static void two_lines(const char *out, const char *what) {
  int n = 0;
  for (const char *p = out; (p = strstr(p, what)); p++) n++;
  cr_assert_eq(n, 2, "expected \"%s\" once per rank, found %d times:\n%s", what, n, out);
}


/* N = 2 ranks x batch 16 through the emulated NCCL match one process with batch 32 within 1e-5 after 100
 * SGD steps; the host all-reduce over MPI (LOOM_COLLECTIVE_NCCL=0, or no NCCL library) gives the same
 * variables bit for bit (two ranks: both sum a + b), each saying why in one INFO line. */
Test(nccl, two_ranks_match_one_with_twice_the_batch_and_the_host_path, .timeout = 300) {
  if (!have_mpi()) return;
  char dir[512], args[1024];
  tu_tmpdir(dir, sizeof dir, "nccl");
  const char *common = "--device cuda --steps 100 --hidden 16 --optimizer sgd --log info";
  snprintf(args, sizeof args, "--model_dir %s/local --distribute local --batch 32 %s", dir, common);
  cr_assert_eq(run(dir, "local", NULL, 0, args), 0, "%s", out_of(dir, "local"));
  snprintf(args, sizeof args, "--model_dir %s/nccl --distribute collective --batch 16 %s", dir, common);
  cr_assert_eq(run(dir, "nccl", "LOOM_NCCL_LIBRARY=" NCCL_EMU, 2, args), 0, "%s", out_of(dir, "nccl"));
  snprintf(args, sizeof args, "--model_dir %s/off --distribute collective --batch 16 %s", dir, common);
  cr_assert_eq(run(dir, "off", "LOOM_NCCL_LIBRARY=" NCCL_EMU " LOOM_COLLECTIVE_NCCL=0", 2, args), 0, "%s",
               out_of(dir, "off"));
  snprintf(args, sizeof args, "--model_dir %s/missing --distribute collective --batch 16 %s", dir, common);
  cr_assert_eq(run(dir, "missing", "LOOM_NCCL_LIBRARY=/nonexistent/libnccl.so.2", 2, args), 0, "%s",
               out_of(dir, "missing"));

  char *nccl = out_of(dir, "nccl"), *off = out_of(dir, "off"), *missing = out_of(dir, "missing");
  two_lines(nccl, "dense gradients all-reduced on the device by NCCL 2.28.0");
  two_lines(nccl, "allreduce_path=nccl");
  cr_assert(strstr(nccl, "rank=0 size=2 steps=100 global_step=100"), "%s", nccl);
  two_lines(off, "NCCL not used (LOOM_COLLECTIVE_NCCL=0): dense gradients all-reduced on the host (Open MPI");
  two_lines(off, "allreduce_path=mpi");
  two_lines(missing, "NCCL not used (cannot load NCCL: /nonexistent/libnccl.so.2: cannot open shared object file");
  two_lines(missing, "allreduce_path=mpi");
  char a[17], b[17], c[17];
  checksum_of(nccl, a);
  checksum_of(off, b);
  checksum_of(missing, c);
  cr_assert_str_eq(a, b, "NCCL and the host all-reduce differ:\n%s\n---\n%s", nccl, off);
  cr_assert_str_eq(a, c, "NCCL and the fallback without a library differ:\n%s\n---\n%s", nccl, missing);

  char dl[600], dn[600];
  snprintf(dl, sizeof dl, "%s/local", dir);
  snprintf(dn, sizeof dn, "%s/nccl", dir);
  int nv = 0;
  double rel = tu_compare_ckpts(dl, dn, 100, &nv);
  fprintf(stderr, "nccl: 2 ranks x batch 16 (emulated NCCL) vs 1 x batch 32: %d variables, max relative difference "
                  "%.3g\n", nv, rel);
  cr_assert(nv >= 4, "only %d variables compared", nv);
  cr_assert(rel <= 1e-5, "2 ranks x batch 16 through NCCL vs 1 x batch 32 differ by %g relative", rel);
  free(nccl);
  free(off);
  free(missing);
  tu_rmtree(dir);
}

/* A stalled rank (SIGSTOP) during NCCL training: the other rank's NCCL all-reduce runs out of the collective
 * timeout, its communicator is aborted, the MPI liveness probe names rank 1, and the job exits non-zero. */
Test(nccl, stalled_rank_aborts_the_communicator_naming_it, .timeout = 200) {
  if (!have_mpi()) return;
  char dir[512], cmd[2048], out_path[600], rc_path[600];
  tu_tmpdir(dir, sizeof dir, "nccl");
  snprintf(cmd, sizeof cmd,
           "(env -u TF_CONFIG LOOM_COLLECTIVE_TIMEOUT=3 LOOM_NCCL_LIBRARY=" NCCL_EMU " timeout 100 " MPIRUN
           " -np 2 " JOB " --device cuda --model_dir %s/m --batch 16 --steps 1000000 --sleep_ms 5 --log info "
           "> %s/job.out 2>&1; echo $? > %s/job.rc) &",
           dir, dir, dir);
  cr_assert_eq(system(cmd), 0);
  snprintf(out_path, sizeof out_path, "%s/job.out", dir);
  snprintf(rc_path, sizeof rc_path, "%s/job.rc", dir);
  int pid1 = 0;
  double t0 = tu_now_s();
  while (tu_now_s() - t0 < 90 && !tu_file_exists(rc_path)) {
    char *s = tu_file_exists(out_path) ? tu_read_file(out_path, NULL) : NULL;
    const char *p = s ? strstr(s, "rank=1 pid=") : NULL;
    if (p && strstr(s, "progress step=30")) pid1 = atoi(p + 11);
    free(s);
    if (pid1 > 0) break;
    tu_nap(0.05);
  }
  char *early = tu_read_file(out_path, NULL);
  cr_assert(pid1 > 0, "rank 1 never made progress:\n%s", early ? early : "");
  cr_assert(strstr(early, "by NCCL 2.28.0"), "the job does not train through NCCL:\n%s", early);
  free(early);
  cr_assert_eq(kill(pid1, SIGSTOP), 0);
  double t1 = tu_now_s();
  while (!tu_file_exists(rc_path) && tu_now_s() - t1 < 60) tu_nap(0.05);
  double took = tu_now_s() - t1;
  kill(pid1, SIGKILL); /* a stopped rank that mpirun left behind */
  cr_assert(tu_file_exists(rc_path), "the job did not end within 60 s of rank 1's stall");
  char *rc = tu_read_file(rc_path, NULL), *out = tu_read_file(out_path, NULL);
  cr_assert(atoi(rc) != 0, "the job exited 0 after a rank stalled:\n%s", out);
  cr_assert(strstr(out, "NCCL: ncclAllReduce did not complete within the collective timeout (3 s)"),
            "rank 0 does not report the NCCL timeout:\n%s", out);
  cr_assert(strstr(out, "lost rank(s) (dead or stalled, no answer to a liveness probe): 1"),
            "rank 0 does not name the stalled rank 1:\n%s", out);
  fprintf(stderr, "nccl: rank 1 stopped: job ended after %.1f s\n", took);
  cr_assert(took < 30, "%.1f s to end after rank 1 stalled (timeout 3 s)", took);
  free(rc);
  free(out);
  tu_rmtree(dir);
}
