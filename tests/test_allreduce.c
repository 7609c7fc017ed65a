/* The collective (all-reduce) strategy under a real mpirun: examples/allreduce_job trained by N ranks
 * against one process with N times the batch (the same examples per step), the ranks' variables compared
 * by checksum, a rank killed (SIGKILL) or stalled (SIGSTOP), models and cluster specs that disagree.
 * Skipped with a message when mpirun or the MPI plugin (libopenmpi-dev) is missing. Every wait is
 * bounded (timeout(1) around mpirun; polls with deadlines). */
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "test_util.h"
#include "ckpt_compare.h"

#ifndef LOOM_ALLREDUCE_JOB_BIN
#define LOOM_ALLREDUCE_JOB_BIN "build/examples/allreduce_job"
#endif
#ifndef LOOM_DIST_JOB_BIN
#define LOOM_DIST_JOB_BIN "build/examples/dist_job"
#endif
#ifndef LOOM_MPI_PLUGIN_PATH
#define LOOM_MPI_PLUGIN_PATH "build/libloom_mpi.so"
#endif
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp"
#define MPIRUN_UNBOUND MPIRUN " --bind-to none"

static int have_mpi(void) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0) {
    fprintf(stderr, "SKIPPED: mpirun not found (openmpi-bin)\n");
    return 0;
  }
  if (access(LOOM_MPI_PLUGIN_PATH, R_OK) != 0) {
    fprintf(stderr, "SKIPPED: %s not built (install libopenmpi-dev: scripts/deps.sh)\n", LOOM_MPI_PLUGIN_PATH);
    return 0;
  }
  return 1;
}

/* Runs `env job args` (under mpirun -np np when np > 0) into dir/name.out; returns the exit status. */
static int run(const char *dir, const char *name, const char *env, int np, const char *args) {
  char cmd[4096];
  char pre[256] = "";
  if (np > 0) snprintf(pre, sizeof pre, MPIRUN " -np %d", np);
  snprintf(cmd, sizeof cmd, "env -u TF_CONFIG %s timeout 120 %s %s %s > %s/%s.out 2>&1", env ? env : "", pre,
           LOOM_ALLREDUCE_JOB_BIN, args, dir, name);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static char *out_of(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s.out", dir, name);
  size_t n = 0;
  char *s = tu_read_file(p, &n);
  return s ? s : strdup("");
}

/* run() with args formatted from fmt; asserts a zero exit (the output in the message). */
static void run_ok(const char *dir, const char *name, int np, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void run_ok(const char *dir, const char *name, int np, const char *fmt, ...) {
  char args[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  int rc = run(dir, name, NULL, np, args);
  char *out = out_of(dir, name);
  cr_assert_eq(rc, 0, "%s exited %d:\n%s", name, rc, out);
  free(out);
}

/* rank 0's "key=<integer>" from the strategy's summary line (-1: none). */
static long long summary_int(const char *out, const char *key) {
  const char *line = strstr(out, "collective: rank=0 ");
  const char *p = line ? strstr(line, key) : NULL;
  return p ? atoll(p + strlen(key)) : -1;
}

/* N = 2 workers with batch b against one worker with batch 2b, optimizer opt, after 100 steps; want (NULL:
 * none): text rank 0's summary line must hold. Unless the model reads a gradient outside its optimizer
 * (--grad_norm), the strategy divides nothing itself: the optimizer ops average the summed gradients as
 * they read them (scaled_bytes_per_step=0). */
static void match_local_want(const char *opt, const char *extra, double tol, const char *want) {
  char dir[512], args[1024], dl[600], dc[600];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(dl, sizeof dl, "%s/local", dir);
  snprintf(dc, sizeof dc, "%s/coll", dir);
  run_ok(dir, "local", 0, "--model_dir %s --distribute local --batch 32 --steps 100 --optimizer %s %s", dl, opt,
           extra);
  run_ok(dir, "coll", 2, "--model_dir %s --distribute collective --batch 16 --steps 100 --optimizer %s %s", dc,
           opt, extra);
  char *out = out_of(dir, "coll");
  tu_same_checksums(out, 2);
  cr_assert(strstr(out, "rank=0 size=2 steps=100 global_step=100"), "%s", out);
  if (!strstr(extra, "--grad_norm"))
    cr_assert_eq(summary_int(out, "scaled_bytes_per_step="), 0, "the strategy still divides gradients itself:\n%s",
                 out);
  if (want) {
    const char *line = strstr(out, "collective: rank=0 ");
    const char *eol = line ? strchr(line, '\n') : NULL;
    const char *hit = line ? strstr(line, want) : NULL;
    cr_assert(hit && (!eol || hit < eol), "rank 0's summary lacks \"%s\":\n%s", want, out);
  }
  free(out);
  int nv = 0;
  double rel = tu_compare_ckpts(dl, dc, 100, &nv);
  cr_assert(nv >= 4, "only %d variables compared", nv);
  fprintf(stderr, "allreduce: %s %s: %d variables, max relative difference %.3g (tolerance %g)\n", opt, extra, nv, rel,
          tol);
  cr_assert(rel <= tol, "%s: 2 workers x batch 16 vs 1 x batch 32 differ by %g relative (tolerance %g)", opt, rel, tol);
  /* the variables moved: a strategy that applied nothing would match only an untrained model */
  char dz[600];
  snprintf(dz, sizeof dz, "%s/short", dir);
  snprintf(args, sizeof args, "--model_dir %s --distribute local --batch 32 --steps 1 --optimizer %s %s", dz, opt, extra);
  cr_assert_eq(run(dir, "short", NULL, 0, args), 0);
  char pz[1024], pc[1024];
  loom_latest_checkpoint(dz, pz, sizeof pz, NULL);
  loom_latest_checkpoint(dc, pc, sizeof pc, NULL);
  loom_tensor *a = NULL, *b = NULL;
  cr_assert_eq(loom_checkpoint_read_tensor(pz, "hidden/kernel", &a, NULL), LOOM_OK);
  cr_assert_eq(loom_checkpoint_read_tensor(pc, "hidden/kernel", &b, NULL), LOOM_OK);
  double d = 0;
  for (int64_t i = 0; i < loom_tensor_numel(a); i++)
    d = fmax(d, fabs(((const float *)loom_tensor_data_const(a))[i] - ((const float *)loom_tensor_data_const(b))[i]));
  cr_assert(d > 1e-3, "hidden/kernel barely changed between step 1 and step 100 (%g)", d);
  loom_tensor_free(a);
  loom_tensor_free(b);
  tu_rmtree(dir);
}
static void match_local(const char *opt, const char *extra, double tol) { match_local_want(opt, extra, tol, NULL); }

Test(allreduce, sgd_two_workers_match_one_with_twice_the_batch, .timeout = 240) {
  if (!have_mpi()) return;
  match_local("sgd", "", 1e-5);
}

/* Rank 1 initializes its variables from other seeds: the broadcast from rank 0 makes the job train from
 * rank 0's values, as local training does (without it the ranks would start apart and stay apart). */
Test(allreduce, broadcast_replaces_other_initial_values, .timeout = 240) {
  if (!have_mpi()) return;
  match_local("sgd", "--init_seed_odd_ranks 100", 1e-5);
}

/* Adam divides by sqrt(v) + epsilon: float rounding of the averaged gradient is amplified where v is
 * tiny, so the tolerance is wider than SGD's. */
Test(allreduce, adam_two_workers_match_one_with_twice_the_batch, .timeout = 240) {
  if (!have_mpi()) return;
  match_local("adam", "--lr 0.01", 1e-4);
}

/* An embedding's sparse gradient (rows and ids gathered from every rank): 50 rows of width 4, 16 ids per
 * rank: an allgather receives 32 x (16 + 4) = 640 bytes, a dense all-reduce 2(N-1)/N x 50 x 16 = 800. */
Test(allreduce, sparse_embedding_gradient_matches, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("sgd", "--embed 50", 1e-5, "sparse_dense_allreduce=0 sparse_allgather=100");
}

/* A small table (10 rows: a dense all-reduce of 160 bytes against an allgather of 640) goes by dense
 * all-reduce under SGD, whose update leaves a zero row as it is: the same training as one worker. */
Test(allreduce, sparse_small_vocab_goes_by_dense_allreduce, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("sgd", "--embed 10", 1e-5, "sparse_dense_allreduce=100 sparse_allgather=0");
}

/* A large table (5000 rows: 80000 bytes dense against 640 gathered) goes by allgather. */
Test(allreduce, sparse_large_vocab_goes_by_allgather, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("sgd", "--embed 5000", 1e-5, "sparse_dense_allreduce=0 sparse_allgather=100");
}

/* Adagrad too leaves a zero row as it is (its accumulators start positive): dense all-reduce. */
Test(allreduce, sparse_adagrad_small_vocab_goes_by_dense_allreduce, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("adagrad", "--embed 10", 1e-5, "sparse_dense_allreduce=100 sparse_allgather=0");
}

/* FTRL recomputes a row from its slots even for a zero gradient (a row never updated would lose its
 * initial value): allgather on a small table. */
Test(allreduce, sparse_ftrl_keeps_allgather_on_a_small_vocab, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("ftrl", "--embed 10", 1e-5, "sparse_dense_allreduce=0 sparse_allgather=100");
}

/* TF's (non-lazy) sparse Adam moves every row, those without a gradient too: the densified update is the
 * same, and a small table goes by dense all-reduce. */
Test(allreduce, sparse_adam_small_vocab_goes_by_dense_allreduce, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("adam", "--embed 10 --lr 0.01", 1e-4, "sparse_dense_allreduce=100 sparse_allgather=0");
}

/* The train op also stores the norm of hidden/kernel's gradient (--grad_norm): an op besides the optimizer
 * reads that gradient, so the strategy averages it itself (its 8 x 16 floats, 512 bytes a step) and leaves
 * the other gradients to the optimizer's scale; the stored norm (a variable of the checkpoints compared)
 * is the average's, as one worker's with twice the batch. */
Test(allreduce, gradient_read_outside_the_optimizer_is_averaged_by_the_strategy, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("sgd", "--grad_norm 1", 1e-5, "scaled_bytes_per_step=512");
}
Test(allreduce, gradient_read_outside_the_optimizer_adam, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("adam", "--grad_norm 1 --lr 0.01", 1e-4, "scaled_bytes_per_step=512");
}

/* LazyAdam and Momentum update only the given rows (a densified gradient would decay the others' slots):
 * a small table still goes by allgather. */
Test(allreduce, sparse_lazy_adam_keeps_allgather_on_a_small_vocab, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("lazyadam", "--embed 10 --lr 0.01", 1e-4, "sparse_dense_allreduce=0 sparse_allgather=100");
}
Test(allreduce, sparse_momentum_keeps_allgather_on_a_small_vocab, .timeout = 240) {
  if (!have_mpi()) return;
  match_local_want("momentum", "--embed 10 --lr 0.01", 1e-5, "sparse_dense_allreduce=0 sparse_allgather=100");
}

/* Four fusion buckets (200 bytes: every gradient of the 8-64-3 model its own bucket) all-reduced while the
 * backward pass runs: the ProfilerHook's Chrome trace holds each bucket's span on track 1, and the first
 * starts before the backward pass's last op ends (it starts when the output layer's gradients are final,
 * before the first layer's are computed). */
Test(allreduce, overlap_trace_shows_buckets_during_backward, .timeout = 240) {
  if (!have_mpi()) return;
  char dir[512], args[1024], path[700];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(args, sizeof args, "--model_dir %s/m --batch 16 --steps 20 --hidden 64 --profile_steps 10", dir);
  int rc = run(dir, "job", "LOOM_COLLECTIVE_BUCKET_BYTES=200", 2, args);
  char *out = out_of(dir, "job");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert_eq(summary_int(out, " buckets="), 4, "%s", out);
  cr_assert_eq(summary_int(out, " overlap="), 1, "%s", out);
  snprintf(path, sizeof path, "%s/m/profile/timeline-20.json", dir);
  size_t n = 0;
  char *text = tu_read_file(path, &n);
  cr_assert(text, "no trace %s:\n%s", path, out);
  cJSON *root = cJSON_Parse(text);
  cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
  cr_assert(cJSON_IsArray(evs), "%s", text);
  /* the step's run: the ops before the first update (Apply*) op; the buckets: track 1 */
  double first_apply = 1e300, backward_end = 0, first_coll = 1e300;
  int ncoll = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, evs) {
    const char *op = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "op")->valuestring;
    double ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
    if (cJSON_GetObjectItem(e, "tid")->valueint == 0 && strstr(op, "Apply") && ts < first_apply) first_apply = ts;
  }
  cJSON_ArrayForEach(e, evs) {
    const char *op = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "op")->valuestring;
    double ts = cJSON_GetObjectItem(e, "ts")->valuedouble, dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
    int tid = cJSON_GetObjectItem(e, "tid")->valueint;
    if (tid == 0 && ts < first_apply && ts + dur > backward_end) backward_end = ts + dur;
    if (tid == 1 && !strcmp(op, "AllReduce")) {
      ncoll++;
      cr_assert(strstr(cJSON_GetObjectItem(e, "name")->valuestring, "allreduce bucket "), "%s", text);
      if (ts < first_coll) first_coll = ts;
    }
  }
  fprintf(stderr, "allreduce: trace: %d bucket spans, first starts at %.1f us, backward ends at %.1f us; %s\n", ncoll,
          first_coll, backward_end, strstr(out, "overlap_fraction=") ? strstr(out, "overlap_fraction=") : "");
  cr_assert_eq(ncoll, 4, "%d all-reduce spans in the trace:\n%s", ncoll, text);
  cr_assert(first_apply < 1e300, "no update op in the trace:\n%s", text);
  cr_assert(first_coll < backward_end, "the first bucket's all-reduce starts at %g us, after the backward pass (%g us)",
            first_coll, backward_end);
  cJSON_Delete(root);
  free(text);
  free(out);
  tu_rmtree(dir);
}

/* The overlapped all-reduce (non-blocking, started during the backward pass) and the plain one (blocking,
 * after the run) sum the same buckets: the same variables, bit for bit (np ranks; with 3 the sums'
 * association is MPI's choice, the same in both). */
static void overlap_vs_plain(int np) {
  char dir[512], args[1024], da[600], db[600];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(da, sizeof da, "%s/overlap", dir);
  snprintf(db, sizeof db, "%s/plain", dir);
  snprintf(args, sizeof args, "--model_dir %s --batch 16 --steps 100 --hidden 64 --embed 50", da);
  /* with the progress thread (forced: where each rank has one core the plugin runs none by itself) */
  cr_assert_eq(run(dir, "overlap", "LOOM_COLLECTIVE_BUCKET_BYTES=200 LOOM_COLLECTIVE_PROGRESS_THREAD=1", np, args), 0);
  snprintf(args, sizeof args, "--model_dir %s --batch 16 --steps 100 --hidden 64 --embed 50", db);
  cr_assert_eq(run(dir, "plain", "LOOM_COLLECTIVE_BUCKET_BYTES=200 LOOM_COLLECTIVE_OVERLAP=0", np, args), 0);
  /* and overlapped without the plugin's progress thread (progressed by the strategy's tests alone) */
  snprintf(args, sizeof args, "--model_dir %s/nothread --batch 16 --steps 100 --hidden 64 --embed 50", dir);
  cr_assert_eq(run(dir, "nothread", "LOOM_COLLECTIVE_BUCKET_BYTES=200 LOOM_COLLECTIVE_PROGRESS_THREAD=0", np, args), 0);
  char *a = out_of(dir, "overlap"), *b = out_of(dir, "plain"), *t = out_of(dir, "nothread");
  const char *ct = strstr(t, "variables_checksum=");
  cr_assert(ct && !strncmp(ct, strstr(b, "variables_checksum="), 35), "without the progress thread:\n%s", t);
  free(t);
  cr_assert_eq(summary_int(a, " overlap="), 1, "%s", a);
  cr_assert_eq(summary_int(b, " overlap="), 0, "%s", b);
  cr_assert_eq(summary_int(a, " buckets="), summary_int(b, " buckets="));
  cr_assert(summary_int(a, " buckets=") >= 4, "%s", a);
  tu_same_checksums(a, np);
  tu_same_checksums(b, np);
  const char *ca = strstr(a, "variables_checksum="), *cb = strstr(b, "variables_checksum=");
  cr_assert(ca && cb && !strncmp(ca, cb, 35), "overlapped and plain all-reduce differ:\n%s\n---\n%s", a, b);
  int nv = 0;
  cr_assert_eq(tu_compare_ckpts(da, db, 100, &nv), 0.0, "the checkpoints differ");
  free(a);
  free(b);
  tu_rmtree(dir);
}
/* The average read by the optimizer ops against the strategy's own division (LOOM_COLLECTIVE_FUSE_AVERAGE=0):
 * the same variables bit for bit. 3 ranks with Adam and a 10-row embedding (dense all-reduce: every row
 * once, so the scaled sum is the divided one for any N); 2 ranks with SGD and a 5000-row one (allgather:
 * a repeated id's rows summed before the scale, the same bits for N a power of two). */
static void fused_vs_pass(int np, const char *args_fmt) {
  char dir[512], args[1024];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  char path[600];
  snprintf(path, sizeof path, "%s/fused", dir);
  snprintf(args, sizeof args, args_fmt, path);
  cr_assert_eq(run(dir, "fused", NULL, np, args), 0);
  snprintf(path, sizeof path, "%s/pass", dir);
  snprintf(args, sizeof args, args_fmt, path);
  cr_assert_eq(run(dir, "pass", "LOOM_COLLECTIVE_FUSE_AVERAGE=0", np, args), 0);
  char *a = out_of(dir, "fused"), *b = out_of(dir, "pass");
  tu_same_checksums(a, np);
  tu_same_checksums(b, np);
  cr_assert_eq(summary_int(a, "scaled_bytes_per_step="), 0, "%s", a);
  cr_assert(summary_int(b, "scaled_bytes_per_step=") > 0, "%s", b);
  const char *ca = strstr(a, "variables_checksum="), *cb = strstr(b, "variables_checksum=");
  cr_assert(ca && cb && !strncmp(ca, cb, 35), "fused and divided averages differ:\n%s\n---\n%s", a, b);
  free(a);
  free(b);
  tu_rmtree(dir);
}
Test(allreduce, fused_average_equals_the_strategys_division_bitwise, .timeout = 240) {
  if (!have_mpi()) return;
  fused_vs_pass(3, "--model_dir %s --batch 16 --steps 60 --hidden 64 --embed 10 --optimizer adam --lr 0.01");
  fused_vs_pass(2, "--model_dir %s --batch 16 --steps 60 --hidden 64 --embed 5000");
}

Test(allreduce, overlap_equals_the_plain_all_reduce_bitwise, .timeout = 240) {
  if (!have_mpi()) return;
  overlap_vs_plain(2);
}
Test(allreduce, overlap_equals_the_plain_all_reduce_bitwise_on_3_ranks, .timeout = 240) {
  if (!have_mpi()) return;
  overlap_vs_plain(3);
}

/* The chief's checkpoint read by a local run: training skipped (at max_steps), the same evaluation. */
Test(allreduce, checkpoint_read_by_local_evaluate, .timeout = 240) {
  if (!have_mpi()) return;
  char dir[512];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  run_ok(dir, "coll", 2, "--model_dir %s/m --distribute collective --batch 16 --steps 60", dir);
  run_ok(dir, "eval", 0, "--model_dir %s/m --distribute local --batch 16 --steps 60", dir);
  char *a = out_of(dir, "coll"), *b = out_of(dir, "eval");
  const char *pa = strstr(a, "done accuracy="), *pb = strstr(b, "done accuracy=");
  cr_assert(pa && pb, "%s\n---\n%s", a, b);
  cr_assert(!strstr(b, "progress step="), "the local run trained again:\n%s", b);
  double x = atof(pa + 14), y = atof(pb + 14);
  cr_assert(x > 0.4 && x == y, "accuracy after collective training %g, local evaluation of its checkpoint %g", x, y);
  free(a);
  free(b);
  tu_rmtree(dir);
}

/* The other rank's output names the lost rank; mpirun ends within the collective timeout. sig: SIGKILL
 * (a dead rank) or SIGSTOP (a stalled one). */
static void lose_rank(int sig) {
  char dir[512], cmd[2048];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(cmd, sizeof cmd,
           "(env -u TF_CONFIG LOOM_COLLECTIVE_TIMEOUT=3 timeout 100 " MPIRUN " -np 2 %s --model_dir %s/m --batch 16 "
           "--steps 1000000 --sleep_ms 5 > %s/job.out 2>&1; echo $? > %s/job.rc) &",
           LOOM_ALLREDUCE_JOB_BIN, dir, dir, dir);
  cr_assert_eq(system(cmd), 0);
  char out_path[600], rc_path[600];
  snprintf(out_path, sizeof out_path, "%s/job.out", dir);
  snprintf(rc_path, sizeof rc_path, "%s/job.rc", dir);
  int pid1 = 0;
  double t0 = tu_now_s();
  while (tu_now_s() - t0 < 60) {
    char *s = tu_file_exists(out_path) ? tu_read_file(out_path, NULL) : NULL;
    const char *p = s ? strstr(s, "rank=1 pid=") : NULL;
    if (p && strstr(s, "progress step=30")) pid1 = atoi(p + 11);
    free(s);
    if (pid1 > 0) break;
    tu_nap(0.05);
  }
  cr_assert(pid1 > 0, "rank 1 never made progress");
  cr_assert_eq(kill(pid1, sig), 0);
  double t1 = tu_now_s();
  int status = tu_wait_status_file(rc_path, 60);
  double took = tu_now_s() - t1;
  kill(pid1, SIGKILL); /* a stopped rank that mpirun left behind */
  cr_assert(status >= 0, "the job did not end within 60 s of losing rank 1");
  char *out = tu_read_file(out_path, NULL);
  cr_assert(status != 0, "the job exited 0 after losing a rank:\n%s", out);
  if (sig == SIGSTOP)
    cr_assert(strstr(out, "lost rank(s) (dead or stalled, no answer to a liveness probe): 1"),
              "rank 0 did not name the stalled rank 1:\n%s", out);
  else
    cr_assert(strstr(out, "rank 1") || strstr(out, "lost rank(s) (dead or stalled, no answer to a liveness probe): 1"),
              "the output does not name the killed rank 1:\n%s", out);
  fprintf(stderr, "allreduce: rank 1 %s: job ended after %.1f s\n", sig == SIGSTOP ? "stopped" : "killed", took);
  cr_assert(took < 30, "%.1f s to end after losing a rank (timeout 3 s)", took);
  free(out);
  tu_rmtree(dir);
}

Test(allreduce, killed_rank_ends_the_job_naming_it, .timeout = 200) {
  if (!have_mpi()) return;
  lose_rank(SIGKILL);
}

Test(allreduce, stalled_rank_times_out_naming_it, .timeout = 200) {
  if (!have_mpi()) return;
  lose_rank(SIGSTOP);
}

Test(allreduce, mismatched_models_name_both_sides, .timeout = 120) {
  if (!have_mpi()) return;
  char dir[512], args[1024];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(args, sizeof args, "--model_dir %s/m --batch 16 --steps 10 --hidden_odd_ranks 8", dir);
  cr_assert_neq(run(dir, "job", NULL, 2, args), 0);
  char *out = out_of(dir, "job");
  cr_assert(strstr(out, "the ranks built different models: rank 0 has variable 'hidden/kernel float32 [8,16]' where "
                        "rank 1 has 'hidden/kernel float32 [8,8]'"),
            "%s", out);
  free(out);
  tu_rmtree(dir);
}

Test(allreduce, cluster_specs_that_disagree, .timeout = 120) {
  if (!have_mpi()) return;
  char dir[512], args[1024], env[1024];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(args, sizeof args, "--model_dir %s/m --batch 16 --steps 10", dir);
  /* a ps job under the collective strategy */
  snprintf(env, sizeof env,
           "TF_CONFIG='{\"cluster\":{\"chief\":[\"a:1\"],\"worker\":[\"b:2\"],\"ps\":[\"c:3\"]},\"task\":{\"type\":\"worker\","
           "\"index\":0}}'");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s timeout 60 %s %s > %s/ps.out 2>&1", env, LOOM_ALLREDUCE_JOB_BIN, args, dir);
  cr_assert_neq(system(cmd), 0);
  char *out = out_of(dir, "ps");
  cr_assert(strstr(out, "TF_CONFIG names 1 \"ps\" task(s)"), "%s", out);
  free(out);
  /* 3 trainers in TF_CONFIG (TF's RunConfig requires a chief), 2 MPI ranks */
  snprintf(cmd, sizeof cmd,
           "TF_CONFIG='{\"cluster\":{\"chief\":[\"a:1\"],\"worker\":[\"b:2\",\"c:3\"]},\"task\":{\"type\":\"worker\",\"index\":0}}' "
           "timeout 60 " MPIRUN " -np 2 -x TF_CONFIG %s %s > %s/size.out 2>&1",
           LOOM_ALLREDUCE_JOB_BIN, args, dir);
  cr_assert_neq(system(cmd), 0);
  out = out_of(dir, "size");
  cr_assert(strstr(out, "TF_CONFIG names 3 trainer task(s) (chief + worker) but MPI runs 2 rank(s)"), "%s", out);
  free(out);
  /* AUTO: chief + worker only, under mpirun: the collective strategy */
  snprintf(cmd, sizeof cmd,
           "TF_CONFIG='{\"cluster\":{\"chief\":[\"a:1\"],\"worker\":[\"b:2\"]},\"task\":{\"type\":\"worker\",\"index\":0}}' "
           "timeout 60 " MPIRUN " -np 2 -x TF_CONFIG %s %s --distribute auto > %s/auto.out 2>&1",
           LOOM_ALLREDUCE_JOB_BIN, args, dir);
  int auto_rc = system(cmd);
  out = out_of(dir, "auto");
  cr_assert_eq(auto_rc, 0, "%s", out);
  tu_same_checksums(out, 2);
  free(out);
  tu_rmtree(dir);
}

/* The strategy outside an MPI launcher, and without its plugin: clear errors. */
Test(allreduce, missing_plugin_is_a_clear_error, .timeout = 60) {
  if (!have_mpi()) return;
  char dir[512], args[1024];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(args, sizeof args, "--model_dir %s/m --batch 16 --steps 10", dir);
  cr_assert_neq(run(dir, "job", "LOOM_MPI_PLUGIN=/nonexistent/libloom_mpi.so", 1, args), 0);
  char *out = out_of(dir, "job");
  cr_assert_neq(run(dir, "nolauncher", NULL, 0, args), 0);
  char *nl = out_of(dir, "nolauncher");
  cr_assert(strstr(nl, "was not started by an MPI launcher"), "%s", nl);
  free(nl);
  cr_assert(strstr(out, "needs its MPI transport plugin libloom_mpi.so, which could not be loaded") &&
                strstr(out, "/nonexistent/libloom_mpi.so"),
            "%s", out);
  free(out);
  tu_rmtree(dir);
}

/* A plugin of interface version 1 (no non-blocking all-reduce: the real plugin's table cut to version 1 by
 * a shim compiled here) still trains: every bucket's all-reduce completes when started, the same sums as
 * the version 2 plugin's, so the same variables bit for bit. */
Test(allreduce, version_1_plugin_trains_without_overlap, .timeout = 240) {
  if (!have_mpi()) return;
  char dir[512], src[600], so[600], cmd[2048], args[1024], real[4096];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  cr_assert(realpath(LOOM_MPI_PLUGIN_PATH, real), "%s", LOOM_MPI_PLUGIN_PATH);
  snprintf(src, sizeof src, "%s/v1.c", dir);
  snprintf(so, sizeof so, "%s/libv1.so", dir);
  char code[2048];
  int n = snprintf(code, sizeof code,
                   "#include <dlfcn.h>\n#include <string.h>\n#include \"distributed/collective_api.h\"\n"
                   "static loom_coll_api t;\n"
                   "const loom_coll_api *loom_collective_plugin(void) {\n"
                   "  void *h = dlopen(\"%s\", RTLD_NOW | RTLD_GLOBAL);\n"
                   "  void *sym = h ? dlsym(h, LOOM_COLL_PLUGIN_SYMBOL) : NULL;\n"
                   "  loom_coll_plugin_fn fn;\n"
                   "  if (!sym) return NULL;\n"
                   "  memcpy(&fn, &sym, sizeof sym);\n"
                   "  t = *fn();\n"
                   "  t.version = 1;\n"
                   "  memset(&t.iallreduce_sum_f32, 0xa5, sizeof t - offsetof(loom_coll_api, iallreduce_sum_f32));\n"
                   "  return &t;\n}\n",
                   real);
  tu_write_file(src, code, (size_t)n);
  snprintf(cmd, sizeof cmd, "cc -std=c11 -shared -fPIC -I. -o %s %s -ldl > %s/cc.out 2>&1", so, src, dir);
  cr_assert_eq(system(cmd), 0, "compiling the version 1 shim failed");
  char env[700];
  snprintf(env, sizeof env, "LOOM_COLLECTIVE_BUCKET_BYTES=200 LOOM_MPI_PLUGIN=%s", so);
  snprintf(args, sizeof args, "--model_dir %s/v1 --batch 16 --steps 30 --hidden 64", dir);
  int rc = run(dir, "v1", env, 2, args);
  char *a = out_of(dir, "v1");
  cr_assert_eq(rc, 0, "%s", a);
  snprintf(args, sizeof args, "--model_dir %s/v2 --batch 16 --steps 30 --hidden 64", dir);
  cr_assert_eq(run(dir, "v2", "LOOM_COLLECTIVE_BUCKET_BYTES=200", 2, args), 0);
  char *b = out_of(dir, "v2");
  tu_same_checksums(a, 2);
  const char *ca = strstr(a, "variables_checksum="), *cb = strstr(b, "variables_checksum=");
  cr_assert(ca && cb && !strncmp(ca, cb, 35), "version 1 and version 2 plugins differ:\n%s\n---\n%s", a, b);
  free(a);
  free(b);
  tu_rmtree(dir);
}

/* One rank: the strategy feeds the gradients back unchanged; the same variables as local training, bit
 * for bit. */
Test(allreduce, one_rank_equals_local_training, .timeout = 120) {
  if (!have_mpi()) return;
  char dir[512], dl[600], dc[600];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(dl, sizeof dl, "%s/local", dir);
  snprintf(dc, sizeof dc, "%s/coll", dir);
  run_ok(dir, "local", 0, "--model_dir %s --distribute local --batch 32 --steps 30", dl);
  run_ok(dir, "coll", 1, "--model_dir %s --distribute collective --batch 32 --steps 30", dc);
  int nv = 0;
  cr_assert_eq(tu_compare_ckpts(dl, dc, 30, &nv), 0.0, "one rank differs from local training");
  cr_assert(nv >= 4);
  tu_rmtree(dir);
}

/* The MPI plugin's progress thread runs only where this rank's cores outnumber the node's ranks that share
 * them, or when LOOM_COLLECTIVE_PROGRESS_THREAD forces it; the choice is in the start-up line. */
static void progress_choice(const char *dir, const char *name, const char *launch, int np, const char *want) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "env -u TF_CONFIG -u LOOM_COLLECTIVE_PROGRESS_THREAD %s -np %d %s --model_dir %s/%s --batch 16 --steps 5 --hidden 8 --log info > %s/%s.out 2>&1",
           launch, np, LOOM_ALLREDUCE_JOB_BIN, dir, name, dir, name);
  int rc = system(cmd);
  char *out = out_of(dir, name);
  cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s:\n%s", cmd, out);
  cr_assert(strstr(out, want), "expected \"%s\" in:\n%s", want, out);
  free(out);
}

Test(allreduce, progress_thread_only_where_a_core_is_free, .timeout = 240) {
  if (!have_mpi()) return;
  char dir[512];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  /* two unbound ranks on one core: none; the same forced on */
  progress_choice(dir, "one_core", "taskset -c 0 " MPIRUN_UNBOUND, 2,
                  "; no progress thread (2 rank(s) of this node on its 1 core(s))");
  progress_choice(dir, "forced", "LOOM_COLLECTIVE_PROGRESS_THREAD=1 taskset -c 0 " MPIRUN_UNBOUND, 2,
                  "; progress thread (2 rank(s) of this node on its 1 core(s), LOOM_COLLECTIVE_PROGRESS_THREAD)");
  /* bound to a core each (mpirun's default for two ranks): none */
  progress_choice(dir, "bound", MPIRUN " --bind-to core", 2, "; no progress thread (1 rank(s) of this node on its 1 core(s))");
  if (sysconf(_SC_NPROCESSORS_ONLN) >= 2) /* one unbound rank on two cores: one */
    progress_choice(dir, "two_cores", "taskset -c 0,1 " MPIRUN_UNBOUND, 1,
                    "; progress thread (1 rank(s) of this node on its 2 core(s))");
  tu_rmtree(dir);
}

/* A canned estimator unchanged: the wide & deep DNNLinearCombinedClassifier (Ftrl on the linear part,
 * Adagrad on the DNN, sparse gradients of both parts' id weights) on 2 ranks: identical variables, the
 * chief's final evaluation and export. */
Test(allreduce, canned_wide_deep_trains_with_sparse_gradients, .timeout = 240) {
  if (!have_mpi()) return;
  char dir[512], cmd[2048];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(cmd, sizeof cmd,
           "env -u TF_CONFIG timeout 200 " MPIRUN " -np 2 %s --strategy collective --model_dir %s/m --embed 1000 "
           "--wide_deep 1 --model_optimizer default --max_steps 60 --save_steps 30 --batch 32 > %s/job.out 2>&1",
           LOOM_DIST_JOB_BIN, dir, dir);
  int rc = system(cmd);
  char *out = out_of(dir, "job");
  cr_assert_eq(rc, 0, "%s", out);
  tu_same_checksums(out, 2);
  const char *ag = strstr(out, "allgather_bytes_per_step=");
  cr_assert(ag && atoll(ag + 25) > 0, "no sparse gradient was gathered:\n%s", out);
  const char *ex = strstr(out, "evaluated=1 last_step=60 accuracy=");
  cr_assert(ex, "the chief did not evaluate the final checkpoint:\n%s", out);
  const char *ep = strstr(ex, "export=");
  char path[1024] = "";
  cr_assert(ep && sscanf(ep + 7, "%1023s", path) == 1 && strcmp(path, "none"), "%s", out);
  char pb[1100];
  snprintf(pb, sizeof pb, "%s/saved_model.loom", path);
  cr_assert(tu_file_exists(pb), "export %s missing", pb);
  free(out);
  tu_rmtree(dir);
}

/* A relaunch resumes from the latest checkpoint (restored on every rank, then broadcast): 64 steps, a new
 * job to 100, against 100 steps at once. The example's input repeats every 32 global steps, so the
 * relaunched job reads the same examples as the uninterrupted one; the variables agree to float rounding. */
Test(allreduce, relaunch_resumes_from_the_checkpoint, .timeout = 240) {
  if (!have_mpi()) return;
  char dir[512], da[600], db[600];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(da, sizeof da, "%s/once", dir);
  snprintf(db, sizeof db, "%s/twice", dir);
  run_ok(dir, "once", 2, "--model_dir %s --batch 16 --steps 100 --optimizer adam --lr 0.01", da);
  run_ok(dir, "first", 2, "--model_dir %s --batch 16 --steps 64 --optimizer adam --lr 0.01", db);
  run_ok(dir, "second", 2, "--model_dir %s --batch 16 --steps 100 --optimizer adam --lr 0.01", db);
  char *out = out_of(dir, "second");
  cr_assert(strstr(out, "steps=36 global_step=100"),
            "the relaunch did not resume at step 64:\n%s", out);
  tu_same_checksums(out, 2);
  free(out);
  int nv = 0;
  double rel = tu_compare_ckpts(da, db, 100, &nv);
  fprintf(stderr, "allreduce: relaunch at 64 vs uninterrupted, 100 steps: max relative difference %.3g\n", rel);
  cr_assert(rel <= 1e-6, "resumed training differs from uninterrupted training by %g relative", rel);
  tu_rmtree(dir);
}

/* A rank whose input ends before max_steps: every rank fails at once (the end's all-reduce meets the
 * others' step with a training flag of 0), naming the step, instead of waiting for the timeout. */
Test(allreduce, a_rank_whose_input_ends_early_fails_every_rank, .timeout = 120) {
  if (!have_mpi()) return;
  char dir[512], args[1024];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  /* one pass: 1024 examples / (16 x 2) = 32 steps on rank 1, max_steps 100 */
  snprintf(args, sizeof args, "--model_dir %s/m --batch 16 --steps 100 --finite_odd_ranks 1", dir);
  double t0 = tu_now_s();
  cr_assert_neq(run(dir, "job", "LOOM_COLLECTIVE_TIMEOUT=60", 2, args), 0);
  double took = tu_now_s() - t0;
  char *out = out_of(dir, "job");
  cr_assert(strstr(out, "rank 1 ended its training at global step 32 while 1 of 2 ranks are still training"),
            "%s", out);
  cr_assert(took < 50, "%.1f s: the ranks waited for the collective timeout", took);
  free(out);
  tu_rmtree(dir);
}

/* The Kubeflow MPIJob manifest (examples/kubeflow/mpijob.yaml): mpirun's -np equals the worker replicas x
 * slotsPerWorker, and the launcher's command (model_dir and max_steps made local and short) trains under
 * a local mpirun. Skipped without python3-yaml. */
Test(allreduce, kubeflow_mpijob_manifest_runs, .timeout = 240) {
  if (!have_mpi()) return;
  if (system("python3 -c 'import yaml' >/dev/null 2>&1") != 0) {
    fprintf(stderr, "SKIPPED: python3-yaml not installed\n");
    return;
  }
  char dir[512], cmd[4096];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(cmd, sizeof cmd,
           "python3 - examples/kubeflow/mpijob.yaml %s/m > %s/args 2>&1 <<'PY'\n"
           "import sys, yaml\n"
           "d = yaml.safe_load(open(sys.argv[1]))\n"
           "assert d['kind'] == 'MPIJob', d['kind']\n"
           "s = d['spec']; r = s['mpiReplicaSpecs']\n"
           "c = r['Launcher']['template']['spec']['containers'][0]['command']\n"
           "np = int(c[c.index('-np') + 1])\n"
           "assert np == r['Worker']['replicas'] * s.get('slotsPerWorker', 1), (np, r['Worker']['replicas'])\n"
           "a = c[[i for i, x in enumerate(c) if x.endswith('/dist_job')][0] + 1:]\n"
           "assert a[a.index('--strategy') + 1] == 'collective'\n"
           "a[a.index('--model_dir') + 1] = sys.argv[2]\n"
           "a[a.index('--max_steps') + 1] = '40'\n"
           "a[a.index('--save_steps') + 1] = '20'\n"
           "print(np, ' '.join(a))\n"
           "PY",
           dir, dir);
  char path[600];
  snprintf(path, sizeof path, "%s/args", dir);
  int rc = system(cmd);
  char *line = tu_read_file(path, NULL);
  cr_assert_eq(rc, 0, "manifest check failed: %s", line);
  int np = atoi(line);
  char *args = strchr(line, ' ');
  cr_assert(np == 2 && args, "%s", line);
  args[strcspn(args, "\n")] = 0;
  snprintf(cmd, sizeof cmd, "env -u TF_CONFIG timeout 200 " MPIRUN " -np %d %s %s > %s/job.out 2>&1", np,
           LOOM_DIST_JOB_BIN, args, dir);
  rc = system(cmd);
  char *out = out_of(dir, "job");
  cr_assert_eq(rc, 0, "%s", out);
  tu_same_checksums(out, 2);
  cr_assert(strstr(out, "evaluated=1 last_step=40"), "%s", out);
  free(out);
  free(line);
  tu_rmtree(dir);
}

/* An evaluator task (TF_CONFIG type evaluator, outside mpirun) beside a collective job: it watches
 * model_dir, evaluates the checkpoints as they come and ends after the final one, with the chief's
 * final accuracy. */
Test(allreduce, evaluator_task_beside_the_ranks, .timeout = 240) {
  if (!have_mpi()) return;
  char dir[512], cmd[4096];
  tu_tmpdir(dir, sizeof dir, "allreduce");
  snprintf(cmd, sizeof cmd,
           "(TF_CONFIG='{\"cluster\":{\"chief\":[\"a:1\"],\"worker\":[\"b:2\"]},\"task\":{\"type\":\"evaluator\","
           "\"index\":0}}' timeout 120 %s --model_dir %s/m --batch 16 --steps 60 > %s/eval.out 2>&1; echo $? > "
           "%s/eval.rc) &",
           LOOM_ALLREDUCE_JOB_BIN, dir, dir, dir);
  cr_assert_eq(system(cmd), 0);
  run_ok(dir, "coll", 2, "--model_dir %s/m --batch 16 --steps 60", dir);
  char rc_path[600];
  snprintf(rc_path, sizeof rc_path, "%s/eval.rc", dir);
  int status = tu_wait_status_file(rc_path, 100);
  cr_assert(status >= 0, "the evaluator did not end within 100 s of the job");
  char *ev = out_of(dir, "eval"), *co = out_of(dir, "coll");
  cr_assert_eq(status, 0, "%s", ev);
  const char *pa = strstr(co, "done accuracy="), *pb = strstr(ev, "done accuracy=");
  cr_assert(pa && pb && atof(pa + 14) == atof(pb + 14), "chief:\n%s\nevaluator:\n%s", co, ev);
  free(ev);
  free(co);
  tu_rmtree(dir);
}
