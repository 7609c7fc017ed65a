/* Distributed jobs (loom_job.h): TF_CONFIG from mpirun's and
 * Slurm's environments and from a Kubeflow TFJob manifest, exit codes, and
 * real multi-process jobs of examples/dist_job on loopback (port 0,
 * rendezvous through model_dir, small deadlines): a whole job ends with
 * every process exiting 0 and the PS tasks within 5 s of the chief; bad
 * TF_CONFIG, wrong token and another placement exit with their permanent
 * codes; a worker without PS prints what it waits for and exits retryable
 * at its deadline; kill -9 of a worker, of the chief and of a PS, each
 * followed by a restart, recovers and the job finishes; the same job under
 * real mpirun. Every wait is bounded; children are killed at the end. */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "test_util.h"

/* distributed/job.c (internal): 1 when a TF_CONFIG names PS tasks or the evaluator */
int loom__job_is_distributed(const char *json);

#ifndef LOOM_DIST_JOB_BIN
#define LOOM_DIST_JOB_BIN "build/examples/dist_job"
#endif

/* ------------------------------------------------------------ TF_CONFIG from env */
static void clear_launcher_env(void) {
  const char *v[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                     "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                     "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "LOOM_JOB_HOST", "TF_CONFIG"};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) unsetenv(v[i]);
}

static loom_tf_config *from_env(const char *launcher, int num_ps, int eval, int port_base) {
  loom_status *st = loom_status_new();
  char *js = loom_job_tf_config_from_env(launcher, num_ps, eval, port_base, st);
  cr_assert(js, "tf_config_from_env: %s", loom_status_message(st));
  loom_tf_config *c = loom_tf_config_parse(js, st);
  cr_assert(c, "parse %s: %s", js, loom_status_message(st));
  loom_job_string_free(js);
  loom_status_free(st);
  return c;
}

Test(jobs, mpi_ranks_map_to_roles) {
  clear_launcher_env();
  setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
  /* 6 ranks, 2 PS, an evaluator: chief, ps0, ps1, worker0, worker1, evaluator */
  const char *want_type[6] = {"chief", "ps", "ps", "worker", "worker", "evaluator"};
  const int want_ix[6] = {0, 0, 1, 0, 1, 0};
  for (int r = 0; r < 6; r++) {
    char b[8];
    snprintf(b, sizeof b, "%d", r);
    setenv("OMPI_COMM_WORLD_RANK", b, 1);
    loom_tf_config *c = from_env("mpi", 2, 1, 0);
    cr_expect_str_eq(loom_tf_config_task_type(c), want_type[r], "rank %d", r);
    cr_expect_eq(loom_tf_config_task_id(c), want_ix[r], "rank %d", r);
    cr_expect_eq(loom_tf_config_is_chief(c), r == 0);
    if (r != 5) {
      cr_expect_eq(loom_tf_config_num_tasks(c, "ps"), 2);
      cr_expect_eq(loom_tf_config_num_tasks(c, "worker"), 2);
      cr_expect_str_eq(loom_tf_config_address(c, "ps", 1), "127.0.0.1:0");
    }
    loom_tf_config_free(c);
  }
  /* a port base and a host */
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("LOOM_JOB_HOST", "10.0.0.5", 1);
  loom_tf_config *c = from_env(NULL, 2, 1, 5000); /* auto: OMPI set */
  cr_expect_str_eq(loom_tf_config_address(c, "ps", 1), "10.0.0.5:5002");
  cr_expect_str_eq(loom_tf_config_address(c, "worker", 0), "10.0.0.5:5003");
  cr_expect_str_eq(loom_tf_config_address(c, "chief", 0), "10.0.0.5:5000");
  loom_tf_config_free(c);
  /* errors name the variable */
  loom_status *st = loom_status_new();
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  cr_expect_null(loom_job_tf_config_from_env("mpi", 1, 1, 0, st));
  cr_expect(strstr(loom_status_message(st), "at least 3 tasks"), "%s", loom_status_message(st));
  unsetenv("OMPI_COMM_WORLD_RANK");
  cr_expect_null(loom_job_tf_config_from_env("mpi", 1, 0, 0, st));
  cr_expect(strstr(loom_status_message(st), "OMPI_COMM_WORLD_RANK"), "%s", loom_status_message(st));
  setenv("OMPI_COMM_WORLD_RANK", "x1", 1);
  cr_expect_null(loom_job_tf_config_from_env("mpi", 1, 0, 0, st));
  cr_expect_null(loom_job_tf_config_from_env("pbs", 1, 0, 0, st));
  cr_expect(strstr(loom_status_message(st), "'pbs'"), "%s", loom_status_message(st));
  loom_status_free(st);
  clear_launcher_env();
}

Test(jobs, slurm_environment_maps_like_mpi) {
  clear_launcher_env();
  setenv("SLURM_NTASKS", "7", 1);
  setenv("SLURM_STEP_NODELIST", "node[01-02,07],gpu5", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "2(x3),1", 1);
  /* tasks 0,1 on node01; 2,3 on node02; 4,5 on node07; 6 on gpu5 */
  setenv("SLURM_PROCID", "4", 1);
  loom_tf_config *c = from_env(NULL, 2, 0, 2222);
  cr_expect_str_eq(loom_tf_config_task_type(c), "worker");
  cr_expect_eq(loom_tf_config_task_id(c), 1);
  cr_expect_str_eq(loom_tf_config_address(c, "chief", 0), "node01:2222");
  cr_expect_str_eq(loom_tf_config_address(c, "ps", 0), "node01:2223");
  cr_expect_str_eq(loom_tf_config_address(c, "ps", 1), "node02:2224");
  cr_expect_str_eq(loom_tf_config_address(c, "worker", 0), "node02:2225");
  cr_expect_str_eq(loom_tf_config_address(c, "worker", 1), "node07:2226");
  cr_expect_str_eq(loom_tf_config_address(c, "worker", 3), "gpu5:2228");
  cr_expect_eq(loom_tf_config_num_tasks(c, "worker"), 4);
  loom_tf_config_free(c);
  /* without tasks-per-node: blocks of ntasks / nnodes */
  unsetenv("SLURM_STEP_TASKS_PER_NODE");
  setenv("SLURM_STEP_NODELIST", "a[1-2]", 1);
  setenv("SLURM_NTASKS", "4", 1);
  setenv("SLURM_PROCID", "1", 1);
  c = from_env("slurm", 1, 1, 0);
  cr_expect_str_eq(loom_tf_config_task_type(c), "ps");
  cr_expect_str_eq(loom_tf_config_address(c, "ps", 0), "a1:0");
  cr_expect_str_eq(loom_tf_config_address(c, "worker", 0), "a2:0");
  loom_tf_config_free(c);
  setenv("SLURM_PROCID", "3", 1);
  c = from_env("slurm", 1, 1, 0);
  cr_expect_str_eq(loom_tf_config_task_type(c), "evaluator");
  loom_tf_config_free(c);
  loom_status *st = loom_status_new();
  setenv("SLURM_STEP_NODELIST", "n[3-1]", 1);
  cr_expect_null(loom_job_tf_config_from_env("slurm", 1, 0, 0, st));
  cr_expect(strstr(loom_status_message(st), "bad range"), "%s", loom_status_message(st));
  setenv("SLURM_STEP_NODELIST", "n[1-2", 1);
  cr_expect_null(loom_job_tf_config_from_env("slurm", 1, 0, 0, st));
  unsetenv("SLURM_STEP_NODELIST");
  cr_expect_null(loom_job_tf_config_from_env("slurm", 1, 0, 0, st));
  cr_expect(strstr(loom_status_message(st), "SLURM_STEP_NODELIST"), "%s", loom_status_message(st));
  loom_status_free(st);
  clear_launcher_env();
}

/* The TFJob manifest (examples/kubeflow/tfjob.yaml): replica types, counts
 * and port read from it; the TF_CONFIG each pod gets is what the training
 * operator writes: every replica type but the evaluator in "cluster"
 * (lower case, <name>-<type>-<i>.<namespace>.svc:<port>), "task", and
 * "environment": "cloud". loom parses every pod's. */
Test(jobs, kubeflow_tfjob_manifest_tf_config_parses) {
  FILE *f = fopen("examples/kubeflow/tfjob.yaml", "r");
  cr_assert(f, "examples/kubeflow/tfjob.yaml");
  char line[512], name[128] = "", ns[128] = "default", types[8][128];
  int counts[8], nt = 0, port = 0, in_meta = 0;
  while (fgets(line, sizeof line, f)) {
    char v[128];
    int n;
    size_t ind = strspn(line, " ");
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (ind == 0) in_meta = !strcmp(line, "metadata:");
    if (in_meta && ind == 2 && sscanf(line + 2, "name: %127s", v) == 1) snprintf(name, sizeof name, "%s", v);
    if (in_meta && ind == 2 && sscanf(line + 2, "namespace: %127s", v) == 1) snprintf(ns, sizeof ns, "%s", v);
    /* tfReplicaSpecs' keys: 4 spaces, a capitalized type, a colon and nothing else */
    if (ind == 4 && line[4] >= 'A' && line[4] <= 'Z' && len > 5 && line[len - 1] == ':' && nt < 8) {
      snprintf(v, sizeof v, "%.*s", (int)(len - 5), line + 4);
      for (char *p = v; *p; p++) *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
      snprintf(types[nt], sizeof types[nt], "%s", v);
      counts[nt++] = 1;
    }
    if (nt && ind == 6 && sscanf(line + 6, "replicas: %d", &n) == 1) counts[nt - 1] = n;
    char *cp = strstr(line, "containerPort:");
    if (cp && sscanf(cp, "containerPort: %d", &n) == 1) port = n;
  }
  fclose(f);
  cr_assert(name[0] && nt >= 3 && port > 0, "manifest: name %s, %d replica types, port %d", name, nt, port);
  char cluster[4096];
  size_t k = 0;
  k += (size_t)snprintf(cluster + k, sizeof cluster - k, "{");
  int first = 1;
  for (int t = 0; t < nt; t++) {
    if (!strcmp(types[t], "evaluator")) continue;
    k += (size_t)snprintf(cluster + k, sizeof cluster - k, "%s\"%s\": [", first ? "" : ", ", types[t]);
    first = 0;
    for (int i = 0; i < counts[t]; i++)
      k += (size_t)snprintf(cluster + k, sizeof cluster - k, "%s\"%s-%s-%d.%s.svc:%d\"", i ? ", " : "", name,
                            types[t], i, ns, port);
    k += (size_t)snprintf(cluster + k, sizeof cluster - k, "]");
  }
  snprintf(cluster + k, sizeof cluster - k, "}");
  int seen_ps = 0, seen_eval = 0, chiefs = 0;
  loom_status *st = loom_status_new();
  for (int t = 0; t < nt; t++)
    for (int i = 0; i < counts[t]; i++) {
      char js[8192];
      snprintf(js, sizeof js, "{\"cluster\": %s, \"task\": {\"type\": \"%s\", \"index\": %d}, \"environment\": \"cloud\"}",
               cluster, types[t], i);
      loom_tf_config *c = loom_tf_config_parse(js, st);
      cr_assert(c, "%s: %s", js, loom_status_message(st));
      cr_expect_str_eq(loom_tf_config_task_type(c), types[t]);
      chiefs += loom_tf_config_is_chief(c);
      if (!strcmp(types[t], "ps")) {
        seen_ps++;
        char want[256];
        snprintf(want, sizeof want, "%s-ps-%d.%s.svc:%d", name, i, ns, port);
        cr_expect_str_eq(loom_tf_config_address(c, "ps", i), want);
      }
      if (!strcmp(types[t], "evaluator")) seen_eval++;
      /* the job layer sees a distributed job for every pod */
      cr_expect(loom__job_is_distributed(js), "%s", js);
      loom_tf_config_free(c);
    }
  cr_expect_eq(chiefs, 1);
  cr_expect_geq(seen_ps, 1);
  cr_expect_eq(seen_eval, 1);
  loom_status_free(st);
}

Test(jobs, exit_codes_and_input_context) {
  cr_expect_eq(loom_job_exit_code(LOOM_OK), 0);
  cr_expect_eq(loom_job_exit_code(LOOM_INVALID_ARGUMENT), LOOM_JOB_EXIT_CONFIG);
  cr_expect_eq(loom_job_exit_code(LOOM_PERMISSION_DENIED), LOOM_JOB_EXIT_AUTH);
  cr_expect_eq(loom_job_exit_code(LOOM_FAILED_PRECONDITION), LOOM_JOB_EXIT_PLACEMENT);
  cr_expect_eq(loom_job_exit_code(LOOM_UNAVAILABLE), LOOM_JOB_EXIT_RETRYABLE);
  cr_expect_eq(loom_job_exit_code(LOOM_DEADLINE_EXCEEDED), LOOM_JOB_EXIT_RETRYABLE);
  cr_expect_eq(loom_job_exit_code(LOOM_DATA_LOSS), LOOM_JOB_EXIT_FAILED);
  cr_expect_geq(LOOM_JOB_EXIT_RETRYABLE, 128); /* Kubeflow ExitCode policy: 128-255 retryable */
  cr_expect_lt(LOOM_JOB_EXIT_PLACEMENT, 128);
  loom_params *p = loom_params_new();
  int n = -1, i = -1;
  loom_job_input_context(p, &n, &i);
  cr_expect(n == 1 && i == 0);
  loom_params_set_int(p, "num_input_pipelines", 3, NULL);
  loom_params_set_int(p, "input_pipeline_id", 2, NULL);
  loom_job_input_context(p, &n, &i);
  cr_expect(n == 3 && i == 2);
  loom_params_set_int(p, "input_pipeline_id", 3, NULL); /* out of range: local */
  loom_job_input_context(p, &n, &i);
  cr_expect(n == 1 && i == 0);
  loom_params_free(p);
}

/* ------------------------------------------------------------ processes */
#define MAXP 12
typedef struct proc {
  char name[32];
  pid_t pid;
  int done, status;
  double end;
  char log[512];
} proc;
typedef struct jobt {
  char dir[256];
  char cluster[512];
  proc p[MAXP];
  int n;
} jobt;

static void job_init(jobt *j, const char *tag, int num_ps, int num_workers) {
  memset(j, 0, sizeof *j);
  snprintf(j->dir, sizeof j->dir, "/tmp/loom_test_jobs_%s_%d", tag, (int)getpid());
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", j->dir);
  cr_assert_eq(system(cmd), 0);
  mkdir(j->dir, 0755);
  size_t k = (size_t)snprintf(j->cluster, sizeof j->cluster, "{\"chief\": [\"127.0.0.1:0\"], \"ps\": [");
  for (int i = 0; i < num_ps; i++) k += (size_t)snprintf(j->cluster + k, sizeof j->cluster - k, "%s\"127.0.0.1:0\"", i ? ", " : "");
  k += (size_t)snprintf(j->cluster + k, sizeof j->cluster - k, "]");
  if (num_workers) {
    k += (size_t)snprintf(j->cluster + k, sizeof j->cluster - k, ", \"worker\": [");
    for (int i = 0; i < num_workers; i++)
      k += (size_t)snprintf(j->cluster + k, sizeof j->cluster - k, "%s\"127.0.0.1:0\"", i ? ", " : "");
    k += (size_t)snprintf(j->cluster + k, sizeof j->cluster - k, "]");
  }
  snprintf(j->cluster + k, sizeof j->cluster - k, "}");
}

/* Starts (or restarts) task type:index with extra args; tf: a TF_CONFIG
 * override (NULL: the job's). env2: one more NAME=VALUE (may be NULL). */
static proc *job_start_ex(jobt *j, const char *type, int index, const char *tf, const char *env2, const char *const *extra,
                          const char *const *envs) {
  char name[32];
  snprintf(name, sizeof name, "%s-%d", type, index);
  proc *p = NULL;
  for (int i = 0; i < j->n; i++)
    if (!strcmp(j->p[i].name, name)) p = &j->p[i];
  if (!p) {
    cr_assert_lt(j->n, MAXP);
    p = &j->p[j->n++];
  }
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  static int restarts;
  snprintf(p->log, sizeof p->log, "%s/%s.%d.log", j->dir, name, restarts++);
  char tfc[1024];
  if (!tf) {
    snprintf(tfc, sizeof tfc, "{\"cluster\": %s, \"task\": {\"type\": \"%s\", \"index\": %d}}", j->cluster, type, index);
    tf = tfc;
  }
  const char *argv[40];
  int a = 0;
  argv[a++] = LOOM_DIST_JOB_BIN;
  int own_dir = 0;
  for (int i = 0; extra && extra[i]; i++) own_dir |= !strcmp(extra[i], "--model_dir");
  if (!own_dir) {
    argv[a++] = "--model_dir";
    argv[a++] = j->dir;
  }
  for (int i = 0; extra && extra[i] && a < 38; i++) argv[a++] = extra[i];
  argv[a] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    setenv("TF_CONFIG", tf, 1);
    unsetenv("LOOM_PS_TOKEN");
    if (env2) putenv((char *)env2);
    for (int i = 0; envs && envs[i]; i++) putenv((char *)envs[i]);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  p->pid = pid;
  return p;
}

static const char *const BASE_ARGS[] = {"--deadline", "20", "--diag", "1", "--save_steps", "200", "--progress", "50",
                                        "--step_sleep_ms", "1", "--rpc_timeout", "3", NULL};
static int g_overlap; /* job_start adds --overlap 1 (each Criterion test runs in its own process) */
static proc *job_start(jobt *j, const char *type, int index, int64_t max_steps) {
  static char ms[32];
  snprintf(ms, sizeof ms, "%lld", (long long)max_steps);
  const char *extra[40];
  int k = 0;
  for (int i = 0; BASE_ARGS[i]; i++) extra[k++] = BASE_ARGS[i];
  if (g_overlap) {
    extra[k++] = "--overlap";
    extra[k++] = "1";
  }
  extra[k++] = "--max_steps";
  extra[k++] = ms;
  extra[k] = NULL;
  return job_start_ex(j, type, index, NULL, NULL, extra, NULL);
}

static void poll_all(jobt *j) {
  for (int i = 0; i < j->n; i++) {
    proc *p = &j->p[i];
    if (p->done || p->pid <= 0) continue;
    int s;
    if (waitpid(p->pid, &s, WNOHANG) == p->pid) {
      p->done = 1;
      p->status = s;
      p->end = tu_now_s();
    }
  }
}

/* Waits for p to exit (deadline); returns its exit code, -1 on timeout, 128+sig when killed. */
static int wait_exit(jobt *j, proc *p, double deadline_s) {
  double t0 = tu_now_s();
  while (!p->done && tu_now_s() - t0 < deadline_s) {
    poll_all(j);
    if (!p->done) tu_nap(0.02);
  }
  if (!p->done) return -1;
  return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : 128 + WTERMSIG(p->status);
}

static void kill9(jobt *j, proc *p) {
  if (!p->done && p->pid > 0) kill(p->pid, SIGKILL);
  wait_exit(j, p, 10);
}

static void job_cleanup(jobt *j) {
  for (int i = 0; i < j->n; i++) kill9(j, &j->p[i]);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", j->dir);
  if (system(cmd)) {
  }
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  size_t r = fread(b, 1, (size_t)n, f);
  b[r] = 0;
  fclose(f);
  return b;
}

static int log_has(const proc *p, const char *s) {
  char *b = slurp(p->log);
  int r = b && strstr(b, s);
  free(b);
  return r;
}

/* The last "progress step=N" a trainer printed; -1 when none. */
static long long last_progress(const proc *p) {
  char *b = slurp(p->log);
  long long v = -1;
  for (char *q = b; q && (q = strstr(q, "progress step=")); q++) v = atoll(q + 14);
  free(b);
  return v;
}

static long long ckpt_step(const jobt *j) {
  char p[400];
  snprintf(p, sizeof p, "%s/checkpoint", j->dir);
  char *b = slurp(p);
  char *q = b ? strstr(b, "model.ckpt-") : NULL;
  long long v = q ? atoll(q + 11) : -1;
  free(b);
  return v;
}

/* Polls cond until true or deadline, reaping the exits of job *jp's processes meanwhile; returns 1
 * when it became true. WAIT_UNTIL: the same for the job j in scope. */
#define WAIT_UNTIL_J(jp, cond, deadline_s)                             \
  ({                                                                   \
    double t0_ = tu_now_s();                                              \
    int ok_ = 0;                                                       \
    while (tu_now_s() - t0_ < (deadline_s)) {                             \
      poll_all(jp);                                                    \
      if (cond) {                                                      \
        ok_ = 1;                                                       \
        break;                                                         \
      }                                                                \
      tu_nap(0.05);                                                       \
    }                                                                  \
    ok_;                                                               \
  })
#define WAIT_UNTIL(cond, deadline_s) WAIT_UNTIL_J(&j, cond, deadline_s)

static void dump_logs(const jobt *j) {
  for (int i = 0; i < j->n; i++) {
    char *b = slurp(j->p[i].log);
    if (!b) continue;
    size_t n = strlen(b);
    fprintf(stderr, "---- %s (last 1500 bytes)\n%s\n", j->p[i].name, b + (n > 1500 ? n - 1500 : 0));
    free(b);
  }
}

static double cpu_secs(pid_t pid) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
  char *b = slurp(p);
  if (!b) return -1;
  char *q = strrchr(b, ')');
  unsigned long ut = 0, stt = 0;
  /* fields after the comm: state(3) ... utime(14) stime(15) */
  if (q) sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &stt);
  free(b);
  return (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
}

Test(jobs, whole_job_ends_and_ps_exits_within_5s, .timeout = 120) {
  jobt j;
  job_init(&j, "whole", 2, 1);
  proc *ps0 = job_start(&j, "ps", 0, 600), *ps1 = job_start(&j, "ps", 1, 600);
  proc *ch = job_start(&j, "chief", 0, 600), *w0 = job_start(&j, "worker", 0, 600);
  proc *ev = job_start(&j, "evaluator", 0, 600);
  int rc = wait_exit(&j, ch, 90);
  if (rc != 0) dump_logs(&j);
  cr_assert_eq(rc, 0, "chief exit %d", rc);
  cr_expect_eq(wait_exit(&j, w0, 30), 0);
  cr_expect_eq(wait_exit(&j, ps0, 10), 0);
  cr_expect_eq(wait_exit(&j, ps1, 10), 0);
  cr_expect_eq(wait_exit(&j, ev, 60), 0);
  /* the PS tasks end on the chief's SHUTDOWN, well within 5 s */
  cr_expect_lt(ps0->end - ch->end, 5.0, "ps:0 exited %.2f s after the chief", ps0->end - ch->end);
  cr_expect_lt(ps1->end - ch->end, 5.0, "ps:1 exited %.2f s after the chief", ps1->end - ch->end);
  cr_expect_geq(ckpt_step(&j), 600);
  cr_expect(log_has(ev, "dist_job: evaluated="), "evaluator result");
  char *b = slurp(ev->log);
  char *q = b ? strstr(b, "last_step=") : NULL;
  cr_expect(q && atoll(q + 10) >= 600, "the evaluator evaluated max_steps");
  cr_expect(b && strstr(b, "export=") && !strstr(b, "export=none"), "the evaluator exported");
  free(b);
  /* a PS-side checkpoint set with one shard per PS */
  char p[400];
  snprintf(p, sizeof p, "%s/ps/checkpoint", j.dir);
  cr_expect_eq(access(p, R_OK), 0);
  /* sharded input: chief and worker are input pipelines 0 and 1 of 2 */
  cr_expect(log_has(w0, "progress step="));
  cr_expect(log_has(ch, "input_pipeline=0/2"));
  cr_expect(log_has(w0, "input_pipeline=1/2"));
  cr_expect(!log_has(ev, "input_pipeline=1/2"));
  if (rc == 0 && (ps0->end - ch->end >= 5.0)) dump_logs(&j);
  job_cleanup(&j);
}

/* The global step in a checkpoint file (-1 when it cannot be read). */
static long long ckpt_file_step(const char *path) {
  loom_tensor *t = NULL;
  loom_status *st = loom_status_new();
  long long v = -1;
  if (loom_checkpoint_read_tensor(path, "global_step", &t, st) == LOOM_OK && loom_tensor_numel(t) == 1)
    v = loom_tensor_dtype(t) == LOOM_I64 ? (long long)*(const int64_t *)loom_tensor_data_const(t)
                                         : (long long)*(const int32_t *)loom_tensor_data_const(t);
  loom_tensor_free(t);
  loom_status_free(st);
  return v;
}

/* max_steps is exact: trainers reserve each step at the PS before pushing it, the PS refuses past
 * max_steps and a refused trainer stops, so the job ends at global step max_steps whatever the number
 * of trainers (it used to end up to N-1 steps later: 2003 for 2000 with two trainers): the final
 * checkpoint is model.ckpt-<max_steps> and holds global_step max_steps, so does the PS-side one, the
 * chief's done file and every worker's end file. */
static void exact_max_steps_case(int num_ps, int trainers, int64_t max) {
  jobt j;
  char tag[32];
  snprintf(tag, sizeof tag, "exact%d_%d", num_ps, trainers);
  job_init(&j, tag, num_ps, trainers - 1);
  const char *const a[] = {"--deadline", "30", "--diag", "1", "--save_steps", "150", "--progress", "50",
                           "--rpc_timeout", "3", "--max_steps", max == 300 ? "300" : "450", NULL};
  cr_assert(max == 300 || max == 450);
  proc *ps[2] = {NULL, NULL}, *w[3] = {NULL, NULL, NULL};
  for (int i = 0; i < num_ps; i++) ps[i] = job_start_ex(&j, "ps", i, NULL, NULL, a, NULL);
  proc *ch = job_start_ex(&j, "chief", 0, NULL, NULL, a, NULL);
  for (int i = 0; i + 1 < trainers; i++) w[i] = job_start_ex(&j, "worker", i, NULL, NULL, a, NULL);
  int rc = wait_exit(&j, ch, 90);
  for (int i = 0; i + 1 < trainers; i++) cr_expect_eq(wait_exit(&j, w[i], 30), 0, "worker:%d", i);
  for (int i = 0; i < num_ps; i++) cr_expect_eq(wait_exit(&j, ps[i], 10), 0, "ps:%d", i);
  if (rc || ckpt_step(&j) != max) dump_logs(&j);
  cr_assert_eq(rc, 0, "chief exit %d", rc);
  cr_expect_eq(ckpt_step(&j), max, "%d trainers: the final checkpoint is model.ckpt-%lld, not -%lld", trainers,
               (long long)max, ckpt_step(&j));
  char p[512];
  snprintf(p, sizeof p, "%s/model.ckpt-%lld", j.dir, (long long)max);
  cr_expect_eq(ckpt_file_step(p), max, "%s holds global_step %lld", p, ckpt_file_step(p));
  snprintf(p, sizeof p, "%s/ps/model.ckpt-%lld.ps-0-of-%d", j.dir, (long long)max, num_ps);
  cr_expect_eq(ckpt_file_step(p), max, "%s holds global_step %lld", p, ckpt_file_step(p));
  snprintf(p, sizeof p, "%s/rendezvous/done", j.dir);
  char *b = slurp(p);
  cr_expect(b && atoll(b) == max, "done file: %s", b ? b : "(none)");
  free(b);
  for (int i = 0; i + 1 < trainers; i++) {
    snprintf(p, sizeof p, "%s/rendezvous/worker-%d.end", j.dir, i);
    b = slurp(p);
    char want[64];
    snprintf(want, sizeof want, "step=%lld rc=0", (long long)max);
    cr_expect(b && strstr(b, want), "worker:%d end file: %s", i, b ? b : "(none)");
    free(b);
  }
  job_cleanup(&j);
}

Test(jobs, max_steps_is_exact_with_1_trainer, .timeout = 120) { exact_max_steps_case(1, 1, 300); }
Test(jobs, max_steps_is_exact_with_2_trainers, .timeout = 120) { exact_max_steps_case(1, 2, 450); }
Test(jobs, max_steps_is_exact_with_3_trainers_and_2_ps, .timeout = 120) { exact_max_steps_case(2, 3, 450); }

/* The end of a job is orderly: the chief, at max_steps, waits for the
 * workers still running (a diagnostic line names them) before it shuts the
 * PS tasks down, so no worker meets a dead PS; a worker killed earlier is
 * not waited for. worker:0 takes 0.6 s a step, so the chief waits for it. */
Test(jobs, chief_waits_for_live_workers_before_shutdown_not_dead_ones, .timeout = 120) {
  jobt j;
  job_init(&j, "end", 1, 2);
  const char *const fast[] = {"--deadline", "30", "--diag", "0.2", "--progress", "50", "--step_sleep_ms", "1",
                              "--rpc_timeout", "3", "--max_steps", "1500", "--save_steps", "100000", NULL};
  const char *const slow[] = {"--deadline", "30", "--diag", "0.2", "--progress", "1", "--step_sleep_ms", "600",
                              "--rpc_timeout", "3", "--max_steps", "1500", "--save_steps", "100000", NULL};
  proc *ps = job_start_ex(&j, "ps", 0, NULL, NULL, fast, NULL);
  proc *ch = job_start_ex(&j, "chief", 0, NULL, NULL, fast, NULL);
  proc *w0 = job_start_ex(&j, "worker", 0, NULL, NULL, slow, NULL);
  proc *w1 = job_start_ex(&j, "worker", 1, NULL, NULL, fast, NULL);
  int ok = WAIT_UNTIL(last_progress(w1) >= 50 && last_progress(w0) >= 0, 60);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "training started");
  kill9(&j, w1); /* gone before the end: the chief must not wait for it */
  int rc = wait_exit(&j, ch, 90);
  if (rc != 0) dump_logs(&j);
  cr_assert_eq(rc, 0, "chief exit %d", rc);
  cr_expect_eq(wait_exit(&j, w0, 30), 0);
  cr_expect_eq(wait_exit(&j, ps, 10), 0);
  cr_expect(log_has(ch, "waiting for worker:0 to finish"), "the chief names the worker it waits for");
  cr_expect(log_has(ch, "worker:0 finished (global step"), "worker:0 reported its end");
  cr_expect(log_has(ch, "worker:1 is not running (pid"), "the killed worker is not waited for");
  cr_expect(!log_has(ch, "shutting the PS tasks down anyway"), "no deadline reached");
  cr_expect(!log_has(w0, "PS exchange failed"), "worker:0 never met a lost PS");
  cr_expect(!log_has(w0, "the chief has finished the job"), "worker:0 stopped on the PS's global step");
  cr_expect(!log_has(ch, "PS exchange failed"));
  job_cleanup(&j);
}

/* The stale-file setup: j's ps:0 (args psa) starts, publishes and is killed -9, then job o's PS (its
 * own model_dir; extra args oa_extra) takes that port. Returns ps-0.addr's text as ps:0 wrote it and
 * *oaddr the other PS's (both freed by the caller); *ops: the other PS. */
static char *ps0_port_taken_by(jobt *j, jobt *o, const char *const *psa, const char *const *oa_extra, proc **ops,
                               char **oaddr) {
  proc *ps = job_start_ex(j, "ps", 0, NULL, NULL, psa, NULL);
  char ap[400];
  snprintf(ap, sizeof ap, "%s/rendezvous/ps-0.addr", j->dir);
  char *addr = NULL;
  int ok = WAIT_UNTIL_J(j, (free(addr), (addr = slurp(ap)) != NULL && strstr(addr, " pid=")), 30);
  cr_assert(ok, "ps:0 published");
  kill9(j, ps);
  char *colon = strchr(addr, ':');
  int port = colon ? atoi(colon + 1) : 0;
  cr_assert_gt(port, 0, "%s", addr);
  char tf[512], od[300];
  snprintf(tf, sizeof tf, "{\"cluster\": {\"chief\": [\"127.0.0.1:0\"], \"ps\": [\"127.0.0.1:%d\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}", port);
  snprintf(od, sizeof od, "%s", o->dir);
  const char *oa[16] = {"--model_dir", od, "--idle_exit", "60"};
  int n = 4;
  for (int i = 0; oa_extra && oa_extra[i] && n < 15; i++) oa[n++] = oa_extra[i];
  oa[n] = NULL;
  *ops = job_start_ex(o, "ps", 0, tf, NULL, oa, NULL);
  char oap[400];
  snprintf(oap, sizeof oap, "%s/rendezvous/ps-0.addr", o->dir);
  *oaddr = NULL;
  ok = WAIT_UNTIL_J(j, (free(*oaddr), (*oaddr = slurp(oap)) != NULL && strstr(*oaddr, " pid=")), 30);
  if (!ok) dump_logs(o);
  cr_assert(ok, "the other PS serves on port %d", port);
  return addr;
}

/* Rewrites ps-0.addr of j as from another host: "host:port pid placement=... [instance=...]", without
 * the writer's identity (" pid=..."), which a trainer on another host could not check. */
static void write_addr_without_writer(const jobt *j, const char *addr) {
  char ap[400];
  snprintf(ap, sizeof ap, "%s/rendezvous/ps-0.addr", j->dir);
  const char *id = strstr(addr, " pid=");
  cr_assert(id, "%s", addr);
  FILE *f = fopen(ap, "w");
  cr_assert(f, "%s", ap);
  fprintf(f, "%.*s\n", (int)(id - addr), addr);
  fclose(f);
}

/* A stale rendezvous file: ps-0.addr left by a PS killed -9 whose port is
 * now held by another job's live PS (other model). A trainer waits for
 * ps:0 to publish again, naming why, instead of exiting 4 (placement):
 * the chief sees the file's PS is gone (same host: its pid); a worker given
 * the file without the writer's identity (as from another host) sees the
 * port answer with another placement than the file's. Both then train
 * against the restarted PS and exit 0. */
Test(jobs, stale_addr_file_naming_another_jobs_ps_waits_not_exit_4, .timeout = 120) {
  jobt j, o;
  job_init(&j, "stale", 1, 1);
  job_init(&o, "stale_other", 1, 0);
  const char *const psa[] = {"--idle_exit", "60", "--deadline", "30", NULL};
  /* the other job's PS takes ps:0's port (another model: hidden 48) */
  const char *const oa[] = {"--hidden", "48", NULL};
  proc *ops;
  char *oaddr;
  char *addr = ps0_port_taken_by(&j, &o, psa, oa, &ops, &oaddr);
  free(oaddr);
  char ap[400];
  snprintf(ap, sizeof ap, "%s/rendezvous/ps-0.addr", j.dir);
  /* worker:0 reads the file without the writer's identity ("host:port pid placement=...") */
  write_addr_without_writer(&j, addr);
  const char *const ta[] = {"--deadline", "30", "--diag", "0.2", "--max_steps", "300", "--step_sleep_ms", "1",
                            "--save_steps", "100", "--progress", "50", NULL};
  proc *w0 = job_start_ex(&j, "worker", 0, NULL, NULL, ta, NULL);
  int ok = WAIT_UNTIL(log_has(w0, "answers as another job's PS"), 30);
  if (!ok) dump_logs(&j);
  cr_expect(ok, "the worker says the port answers as another job's PS");
  /* the chief reads the whole file: its writer's pid is gone */
  FILE *f = fopen(ap, "w");
  fputs(addr, f);
  fclose(f);
  proc *ch = job_start_ex(&j, "chief", 0, NULL, NULL, ta, NULL);
  ok = WAIT_UNTIL(log_has(ch, "is stale: its PS, pid"), 30);
  if (!ok) dump_logs(&j);
  cr_expect(ok, "the chief says the file is stale");
  tu_nap(0.5);
  poll_all(&j);
  cr_expect(!w0->done && !ch->done, "both still waiting (not exit 4)");
  proc *ps = job_start_ex(&j, "ps", 0, NULL, NULL, psa, NULL); /* ps:0 back, on a new port */
  int rc = wait_exit(&j, ch, 60);
  if (rc != 0) dump_logs(&j);
  cr_expect_eq(rc, 0, "chief exit %d", rc);
  cr_expect_eq(wait_exit(&j, w0, 30), 0);
  cr_expect_eq(wait_exit(&j, ps, 10), 0);
  cr_expect(log_has(ch, "ps:0 published again"));
  cr_expect(log_has(w0, "ps:0 published again"));
  cr_expect_geq(ckpt_step(&j), 300);
  kill(ops->pid, SIGTERM);
  cr_expect_eq(wait_exit(&o, ops, 10), 0, "the other job's PS was left alone");
  free(addr);
  job_cleanup(&j);
  job_cleanup(&o);
}

/* The largest "<n> updates" a PS's diagnostic lines report (-1: none seen). */
static long long ps_updates_max(const proc *p) {
  char *t = slurp(p->log);
  long long best = -1;
  for (const char *q = t; q && (q = strstr(q, " updates;")) != NULL; q++) {
    const char *b = q;
    while (b > t && b[-1] >= '0' && b[-1] <= '9') b--;
    long long v = atoll(b);
    if (b < q && v > best) best = v;
  }
  free(t);
  return best;
}

/* The case a placement hash cannot see: ps-0.addr (as from another host: no writer identity to check)
 * names this job's PS, killed -9, and its port is now held by another live PS of the SAME model (same
 * placement hash, another instance). The trainers must not train against it: they see the PS's
 * instance id (WELCOME) differ from the file's, say the file is stale and wait (not exit 4); once ps:0
 * is back (a new instance, the file rewritten) they train against it and the job ends with exit 0.
 * The other PS never applied an update. */
Test(jobs, stale_addr_file_naming_another_ps_of_the_same_model_waits_for_the_right_instance, .timeout = 120) {
  jobt j, o;
  job_init(&j, "inst", 1, 1);
  job_init(&o, "inst_other", 1, 0);
  const char *const psa[] = {"--idle_exit", "60", "--deadline", "30", NULL};
  /* another PS of the same model (same placement hash) takes ps:0's port */
  const char *const oa[] = {"--diag", "0.2", NULL};
  proc *ops;
  char *oaddr;
  char *addr = ps0_port_taken_by(&j, &o, psa, oa, &ops, &oaddr);
  char *ins = strstr(addr, "instance=");
  cr_assert(ins, "the file names the PS's instance: %s", addr);
  unsigned long long old_inst = strtoull(ins + 9, NULL, 16);
  cr_assert_neq(old_inst, 0);
  char *oph = strstr(oaddr, "placement="), *ph = strstr(addr, "placement=");
  cr_assert(oph && ph && !strncmp(oph, ph, 26), "the same placement: %s / %s", addr, oaddr);
  char *oins = strstr(oaddr, "instance=");
  cr_assert(oins, "%s", oaddr);
  unsigned long long other_inst = strtoull(oins + 9, NULL, 16);
  cr_assert_neq(other_inst, old_inst);
  /* the file as from another host: "host:port pid placement=... instance=..." */
  write_addr_without_writer(&j, addr);
  const char *const ta[] = {"--deadline", "30", "--diag", "0.2", "--max_steps", "300", "--step_sleep_ms", "1",
                            "--save_steps", "100", "--progress", "50", NULL};
  proc *ch = job_start_ex(&j, "chief", 0, NULL, NULL, ta, NULL);
  proc *w0 = job_start_ex(&j, "worker", 0, NULL, NULL, ta, NULL);
  char want[200];
  snprintf(want, sizeof want, "is stale: that port answers as PS instance %016llx of this placement, the file names "
           "instance %016llx", other_inst, old_inst);
  int ok = WAIT_UNTIL(log_has(ch, want) && log_has(w0, want), 30);
  if (!ok) dump_logs(&j);
  cr_expect(ok, "both trainers say the file is stale (%s)", want);
  tu_nap(1.0);
  poll_all(&j);
  cr_expect(!w0->done && !ch->done, "both still waiting (not exit 4)");
  proc *ps = job_start_ex(&j, "ps", 0, NULL, NULL, psa, NULL); /* ps:0 back: a new instance, the file rewritten */
  int rc = wait_exit(&j, ch, 60);
  if (rc != 0) dump_logs(&j);
  cr_expect_eq(rc, 0, "chief exit %d", rc);
  cr_expect_eq(wait_exit(&j, w0, 30), 0);
  cr_expect_eq(wait_exit(&j, ps, 10), 0);
  cr_expect(log_has(ch, "ps:0 published again"));
  cr_expect(log_has(w0, "ps:0 published again"));
  cr_expect_geq(ckpt_step(&j), 300);
  tu_nap(0.5); /* one more diagnostic line of the other PS */
  cr_expect_eq(ps_updates_max(ops), 0, "the other PS never applied an update");
  kill(ops->pid, SIGTERM);
  cr_expect_eq(wait_exit(&o, ops, 10), 0, "the other PS was left alone");
  free(addr);
  free(oaddr);
  job_cleanup(&j);
  job_cleanup(&o);
}

Test(jobs, permanent_errors_have_their_exit_codes, .timeout = 120) {
  jobt j;
  job_init(&j, "perm", 1, 1);
  /* bad TF_CONFIG: two chiefs */
  const char *const none[] = {"--deadline", "5", NULL};
  proc *bad = job_start_ex(&j, "chief", 0,
                           "{\"cluster\": {\"chief\": [\"a:1\", \"b:2\"], \"ps\": [\"c:3\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
                           NULL, none, NULL);
  cr_expect_eq(wait_exit(&j, bad, 20), LOOM_JOB_EXIT_CONFIG);
  /* a PS with a token, a worker with another one */
  proc *ps = job_start_ex(&j, "ps", 0, NULL, "LOOM_PS_TOKEN=0123456789abcdef-right", none, NULL);
  proc *w = job_start_ex(&j, "worker", 0, NULL, "LOOM_PS_TOKEN=0123456789abcdef-wrong", none, NULL);
  int rc = wait_exit(&j, w, 30);
  if (rc != LOOM_JOB_EXIT_AUTH) dump_logs(&j);
  cr_expect_eq(rc, LOOM_JOB_EXIT_AUTH, "wrong token: exit %d", rc);
  /* another model (other hidden size): another placement */
  const char *const other[] = {"--deadline", "5", "--hidden", "48", NULL};
  proc *w2 = job_start_ex(&j, "worker", 0, NULL, "LOOM_PS_TOKEN=0123456789abcdef-right", other, NULL);
  rc = wait_exit(&j, w2, 30);
  if (rc != LOOM_JOB_EXIT_PLACEMENT) dump_logs(&j);
  cr_expect_eq(rc, LOOM_JOB_EXIT_PLACEMENT, "other placement: exit %d", rc);
  /* the PS stops on SIGTERM with 0 */
  kill(ps->pid, SIGTERM);
  cr_expect_eq(wait_exit(&j, ps, 5), 0);
  job_cleanup(&j);
}

/* A malformed address anywhere in TF_CONFIG is a configuration error in every role: exit 2 at once
 * (a trainer used to wait out its deadline and exit retryable), the message naming job, index and
 * address. The deadline is 30 s: an exit within 10 s did not wait for anything. */
Test(jobs, malformed_address_is_exit_2_at_once_in_every_role, .timeout = 120) {
  jobt j;
  job_init(&j, "badaddr", 1, 1);
  static const char *const addrs[] = {"127.0.0.1:abc", "127.0.0.1:70000", ":2222"};
  static const char *const types[] = {"chief", "worker", "ps", "evaluator"};
  const char *const a[] = {"--deadline", "30", "--diag", "1", NULL};
  for (int k = 0; k < 3; k++)
    for (int t = 0; t < 4; t++) {
      char tf[512], want[128];
      /* the bad address is another task's (ps:1), never the starting task's own */
      snprintf(tf, sizeof tf,
               "{\"cluster\": {\"chief\": [\"127.0.0.1:0\"], \"worker\": [\"127.0.0.1:0\"], \"ps\": [\"127.0.0.1:0\", "
               "\"%s\"]}, \"task\": {\"type\": \"%s\", \"index\": 0}}",
               addrs[k], types[t]);
      double t0 = tu_now_s();
      proc *p = job_start_ex(&j, types[t], 0, tf, NULL, a, NULL);
      int rc = wait_exit(&j, p, 40);
      if (rc != LOOM_JOB_EXIT_CONFIG) dump_logs(&j);
      cr_expect_eq(rc, LOOM_JOB_EXIT_CONFIG, "%s with ps:1 = %s: exit %d", types[t], addrs[k], rc);
      cr_expect_lt(tu_now_s() - t0, 10.0, "%s exited at once", types[t]);
      snprintf(want, sizeof want, "\"cluster\".\"ps\"[1] address \"%s\"", addrs[k]);
      cr_expect(log_has(p, want), "%s's log names the address: %s", types[t], want);
    }
  job_cleanup(&j);
}

Test(jobs, worker_without_ps_says_what_it_waits_for_and_exits_retryable, .timeout = 60) {
  jobt j;
  job_init(&j, "nops", 1, 1);
  const char *const a[] = {"--deadline", "3", "--diag", "1", NULL};
  proc *w = job_start_ex(&j, "worker", 0, NULL, NULL, a, NULL);
  double t0 = tu_now_s();
  int rc = wait_exit(&j, w, 30);
  cr_expect_eq(rc, LOOM_JOB_EXIT_RETRYABLE, "exit %d", rc);
  cr_expect_lt(tu_now_s() - t0, 20.0);
  cr_expect(log_has(w, "waiting for ps:0"), "diagnostic line");
  cr_expect(log_has(w, "s elapsed (deadline 3 s)"), "elapsed and deadline in the line");
  cr_expect(log_has(w, "gave up waiting for ps:0"), "the final error names ps:0");
  /* a PS but no chief: the worker names the variable it waits for */
  const char *const c[] = {"--idle_exit", "30", NULL};
  proc *ps0 = job_start_ex(&j, "ps", 0, NULL, NULL, c, NULL);
  const char *const d[] = {"--deadline", "2", "--diag", "0.5", NULL};
  proc *w2 = job_start_ex(&j, "worker", 0, NULL, NULL, d, NULL);
  rc = wait_exit(&j, w2, 30);
  cr_expect_eq(rc, LOOM_JOB_EXIT_RETRYABLE, "exit %d", rc);
  cr_expect(log_has(w2, "waiting for the chief's variables: uninitialized: hidden/kernel (ps:0)"), "names the variable");
  kill(ps0->pid, SIGTERM);
  cr_expect_eq(wait_exit(&j, ps0, 5), 0);
  /* a PS with an idle deadline exits by itself: retryable while the job has not finished (its
   * trainers may come back: a restarted PS restores its shard), 0 once the chief's done file is there */
  const char *const b[] = {"--idle_exit", "1", NULL};
  proc *ps = job_start_ex(&j, "ps", 0, NULL, NULL, b, NULL);
  cr_expect_eq(wait_exit(&j, ps, 20), LOOM_JOB_EXIT_RETRYABLE);
  cr_expect(log_has(ps, "idle"), "idle exit logged");
  cr_expect(log_has(ps, "the job has not finished"), "says why it is retryable");
  char p[400];
  snprintf(p, sizeof p, "%s/rendezvous/done", j.dir);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fputs("100\n", f);
  fclose(f);
  ps = job_start_ex(&j, "ps", 0, NULL, NULL, b, NULL);
  cr_expect_eq(wait_exit(&j, ps, 20), 0, "idle after the job finished: exit 0");
  job_cleanup(&j);
}

Test(jobs, kill_worker_others_continue_restarted_worker_rejoins, .timeout = 180) {
  jobt j;
  job_init(&j, "kw", 1, 2);
  const int64_t MAX = 4000;
  proc *ps = job_start(&j, "ps", 0, MAX), *ch = job_start(&j, "chief", 0, MAX);
  proc *w0 = job_start(&j, "worker", 0, MAX), *w1 = job_start(&j, "worker", 1, MAX);
  int ok = WAIT_UNTIL(last_progress(w1) >= 500 && last_progress(w0) >= 0, 60);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "training started");
  kill9(&j, w1);
  long long at = last_progress(w0);
  ok = WAIT_UNTIL(last_progress(w0) >= at + 300 && last_progress(ch) >= at + 300, 30);
  cr_expect(ok, "the others continue after the kill (%lld -> %lld)", at, last_progress(w0));
  w1 = job_start(&j, "worker", 1, MAX);
  ok = WAIT_UNTIL(log_has(w1, "ready: global step") && last_progress(w1) >= 0, 30);
  cr_expect(ok, "the restarted worker rejoins");
  int rc = wait_exit(&j, ch, 90);
  if (rc) dump_logs(&j);
  cr_expect_eq(rc, 0);
  cr_expect_eq(wait_exit(&j, w0, 30), 0);
  cr_expect_eq(wait_exit(&j, w1, 30), 0);
  cr_expect_eq(wait_exit(&j, ps, 10), 0);
  cr_expect_geq(ckpt_step(&j), MAX);
  job_cleanup(&j);
}

Test(jobs, kill_chief_workers_continue_restarted_chief_resumes_checkpointing, .timeout = 180) {
  jobt j;
  job_init(&j, "kc", 1, 1);
  const int64_t MAX = 4000;
  proc *ps = job_start(&j, "ps", 0, MAX), *ch = job_start(&j, "chief", 0, MAX);
  proc *w0 = job_start(&j, "worker", 0, MAX);
  int ok = WAIT_UNTIL(ckpt_step(&j) >= 400 && last_progress(w0) >= 0, 60);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "training and checkpointing started");
  kill9(&j, ch);
  long long killed_ckpt = ckpt_step(&j), at = last_progress(w0);
  ok = WAIT_UNTIL(last_progress(w0) >= at + 300, 30);
  cr_expect(ok, "the worker keeps training without the chief (%lld -> %lld)", at, last_progress(w0));
  cr_expect_eq(ckpt_step(&j), killed_ckpt, "no checkpoint without a chief");
  ch = job_start(&j, "chief", 0, MAX);
  ok = WAIT_UNTIL(ckpt_step(&j) > killed_ckpt + 200, 40);
  cr_expect(ok, "the restarted chief checkpoints again (%lld -> %lld)", killed_ckpt, ckpt_step(&j));
  /* it took the PS's state (not its old checkpoint's): its first global step is past the kill */
  char *b = slurp(ch->log);
  char *q = b ? strstr(b, "ready: global step ") : NULL;
  cr_expect(q && atoll(q + 19) >= at, "restarted chief starts at the PS's step (%lld >= %lld)", q ? atoll(q + 19) : -1,
            at);
  free(b);
  int rc = wait_exit(&j, ch, 90);
  if (rc) dump_logs(&j);
  cr_expect_eq(rc, 0);
  cr_expect_eq(wait_exit(&j, w0, 30), 0);
  cr_expect_eq(wait_exit(&j, ps, 10), 0);
  cr_expect_geq(ckpt_step(&j), MAX);
  job_cleanup(&j);
}

/* The ready line's global step in a trainer's log; -1 when none. */
static long long ready_step(const proc *p) {
  char *b = slurp(p->log);
  char *q = b ? strstr(b, "ready: global step ") : NULL;
  long long v = q ? atoll(q + 19) : -1;
  free(b);
  return v;
}

/* No progress lives only in a PS's memory: with the chief killed -9 and never restarted, the worker
 * trains on and the PS, after --chief_lost_save 1 s without a chief connection, checkpoints its shard
 * itself (model_dir/ps/self-<placement>/), again while updates arrive; with the worker gone too it
 * exits on its idle deadline with the retryable code (the job did not finish). Restarted, it restores
 * that save (newer than the chief's last checkpoint), so a new chief starts at the PS's step, past
 * the chief's checkpoint. (The PS used to keep those steps only in memory and never exit.) */
Test(jobs, chief_gone_ps_saves_its_shard_then_idle_exit_is_retryable, .timeout = 180) {
  jobt j;
  job_init(&j, "chiefgone", 1, 1);
  const char *const a[] = {"--deadline", "30", "--diag", "1", "--save_steps", "200", "--progress", "50",
                           "--step_sleep_ms", "1", "--rpc_timeout", "3", "--max_steps", "1000000",
                           "--chief_lost_save", "1", "--idle_exit", "3", NULL};
  proc *ps = job_start_ex(&j, "ps", 0, NULL, NULL, a, NULL), *ch = job_start_ex(&j, "chief", 0, NULL, NULL, a, NULL);
  proc *w0 = job_start_ex(&j, "worker", 0, NULL, NULL, a, NULL);
  int ok = WAIT_UNTIL(ckpt_step(&j) >= 200 && last_progress(w0) >= 0, 60);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "training and checkpointing started");
  kill9(&j, ch);
  long long chief_ckpt = ckpt_step(&j);
  char selfp[512];
  /* the PS's own save: ps/self-<hash>/model.ckpt-0.ps-0-of-1 (the hash from the PS's address file) */
  char ap[400], hash[32] = "";
  snprintf(ap, sizeof ap, "%s/rendezvous/ps-0.addr", j.dir);
  char *b = slurp(ap);
  char *q = b ? strstr(b, "placement=") : NULL;
  if (q) snprintf(hash, sizeof hash, "%.16s", q + 10);
  free(b);
  cr_assert(hash[0], "placement in ps-0.addr");
  snprintf(selfp, sizeof selfp, "%s/ps/self-%s/model.ckpt-0.ps-0-of-1", j.dir, hash);
  ok = WAIT_UNTIL(ckpt_file_step(selfp) > chief_ckpt + 100, 40);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "the PS saved its shard itself past the chief's checkpoint %lld (its save: %lld)", chief_ckpt,
            ckpt_file_step(selfp));
  cr_expect(log_has(ps, "no chief connected (or none heard from) for"), "the PS says why it saves");
  cr_expect_eq(ckpt_step(&j), chief_ckpt, "no chief checkpoint meanwhile");
  /* the worker gone too: the PS saves what it has and exits on its idle deadline, retryable */
  kill9(&j, w0);
  int rc = wait_exit(&j, ps, 30);
  if (rc != LOOM_JOB_EXIT_RETRYABLE) dump_logs(&j);
  cr_expect_eq(rc, LOOM_JOB_EXIT_RETRYABLE, "idle exit of an unfinished job: %d", rc);
  long long saved = ckpt_file_step(selfp);
  /* restarted, the PS restores its own save; a new chief starts at that step */
  const char *const r[] = {"--deadline", "30", "--diag", "1", "--save_steps", "200", "--progress", "50",
                           "--step_sleep_ms", "1", "--rpc_timeout", "3", "--max_steps", "1000000", NULL};
  ps = job_start_ex(&j, "ps", 0, NULL, NULL, r, NULL);
  ch = job_start_ex(&j, "chief", 0, NULL, NULL, r, NULL);
  ok = WAIT_UNTIL(ready_step(ch) >= 0, 40);
  if (!ok) dump_logs(&j);
  cr_expect(log_has(ps, "restored its shard from its own save"), "the PS restored its own save");
  cr_expect_geq(ready_step(ch), saved, "the new chief starts at the PS's saved step %lld (not %lld)", saved, chief_ckpt);
  job_cleanup(&j);
}

/* A restarted PS restores the newest complete state of its shard: here the chief's PS-side checkpoint
 * of the last step is missing (as when a PS dies during that save) while model.ckpt-<last> is there and
 * holds every variable of the shard: the PS takes model.ckpt-<last>, not its older shard (under the
 * model's own update rules the chief creates the shard from it), and a chief started against it is at
 * the last step. */
Test(jobs, restarted_ps_takes_the_chiefs_newer_model_ckpt, .timeout = 120) {
  jobt j;
  job_init(&j, "newer", 1, 0);
  const char *const a[] = {"--deadline", "30", "--diag", "1", "--save_steps", "100", "--progress", "50",
                           "--rpc_timeout", "3", "--max_steps", "300", NULL};
  proc *ps = job_start_ex(&j, "ps", 0, NULL, NULL, a, NULL), *ch = job_start_ex(&j, "chief", 0, NULL, NULL, a, NULL);
  int rc = wait_exit(&j, ch, 60);
  if (rc) dump_logs(&j);
  cr_assert_eq(rc, 0);
  cr_assert_eq(wait_exit(&j, ps, 10), 0);
  cr_assert_eq(ckpt_step(&j), 300);
  /* the PS-side set of step 300 gone; ps/checkpoint names 200 */
  char p[512];
  snprintf(p, sizeof p, "%s/ps/model.ckpt-300.ps-0-of-1", j.dir);
  cr_assert_eq(remove(p), 0, "%s", p);
  snprintf(p, sizeof p, "%s/ps/model.ckpt-300", j.dir);
  remove(p);
  snprintf(p, sizeof p, "%s/ps/checkpoint", j.dir);
  char *b = slurp(p);
  cr_assert(b && strstr(b, "model.ckpt-300"), "ps/checkpoint: %s", b ? b : "(none)");
  free(b);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fprintf(f, "model_checkpoint_path: \"model.ckpt-200\"\nall_model_checkpoint_paths: \"model.ckpt-200\"\n");
  fclose(f);
  tu_nap(0.05);
  ps = job_start_ex(&j, "ps", 0, NULL, NULL, a, NULL);
  const char *const c2[] = {"--deadline", "30", "--diag", "1", "--save_steps", "100", "--progress", "50",
                            "--rpc_timeout", "3", "--max_steps", "400", NULL};
  ch = job_start_ex(&j, "chief", 0, NULL, NULL, c2, NULL);
  rc = wait_exit(&j, ch, 60);
  if (rc || ready_step(ch) != 300) dump_logs(&j);
  cr_expect_eq(rc, 0);
  cr_expect(log_has(ps, "the newest state of its shard is the chief's model.ckpt"), "the PS took model.ckpt-300");
  cr_expect_eq(ready_step(ch), 300, "the chief starts at 300 (not the older shard's 200): %lld", ready_step(ch));
  cr_expect_eq(ckpt_step(&j), 400);
  job_cleanup(&j);
}

static void kill_ps_case(const char *tag) {
  jobt j;
  job_init(&j, tag, 2, 1);
  const int64_t MAX = 4000;
  proc *ps0 = job_start(&j, "ps", 0, MAX), *ps1 = job_start(&j, "ps", 1, MAX);
  proc *ch = job_start(&j, "chief", 0, MAX), *w0 = job_start(&j, "worker", 0, MAX);
  char psck[400];
  snprintf(psck, sizeof psck, "%s/ps/checkpoint", j.dir);
  int ok = WAIT_UNTIL(ckpt_step(&j) >= 400 && access(psck, R_OK) == 0 && last_progress(w0) >= 0, 60);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "training and PS-side checkpointing started");
  kill9(&j, ps1);
  /* the trainers pause: they say what they wait for, and burn no CPU */
  ok = WAIT_UNTIL(log_has(w0, "waiting for ps:1") && log_has(ch, "waiting for ps:1"), 20);
  cr_expect(ok, "trainers wait for ps:1 with a diagnostic line");
  long long paused_at = last_progress(w0);
  double c0 = cpu_secs(w0->pid), c1 = cpu_secs(ch->pid);
  tu_nap(2.0);
  double dw = cpu_secs(w0->pid) - c0, dc = cpu_secs(ch->pid) - c1;
  cr_expect_lt(dw, 0.5, "worker used %.2f s of CPU in 2 s of pause", dw);
  cr_expect_lt(dc, 0.5, "chief used %.2f s of CPU in 2 s of pause", dc);
  cr_expect(!w0->done && !ch->done, "nobody crashed");
  cr_expect_leq(last_progress(w0), paused_at + 50, "no training without ps:1");
  double t_restart = tu_now_s();
  ps1 = job_start(&j, "ps", 1, MAX);
  ok = WAIT_UNTIL(last_progress(w0) >= paused_at + 100, 30);
  double resumed = tu_now_s() - t_restart;
  cr_expect(ok, "training resumes after the PS restart");
  cr_expect_lt(resumed, 10.0, "resumed %.1f s after the restart", resumed);
  /* the newest complete state of its shard: its PS-side checkpoint, or (when the chief's model.ckpt
   * is newer, which depends on the timing of the kill) the chief re-creates it from that */
  cr_expect(log_has(ps1, "restored its shard") || log_has(ps1, "the newest state of its shard is the chief's model.ckpt"),
            "the restarted PS restored its shard or left it to the chief's newer checkpoint");
  cr_expect(log_has(w0, "reconnected to the PS tasks"));
  if (g_overlap) cr_expect(log_has(w0, "overlap_comm: on (sender thread)") && log_has(ch, "overlap_comm: on (sender thread)"));
  fprintf(stderr, "kill_ps: training resumed %.2f s after the PS restart\n", resumed);
  int rc = wait_exit(&j, ch, 90);
  if (rc) dump_logs(&j);
  cr_expect_eq(rc, 0);
  cr_expect_eq(wait_exit(&j, w0, 30), 0);
  cr_expect_eq(wait_exit(&j, ps0, 10), 0);
  cr_expect_eq(wait_exit(&j, ps1, 10), 0);
  job_cleanup(&j);
}

Test(jobs, kill_ps_workers_pause_restarted_ps_restores_and_training_resumes, .timeout = 180) { kill_ps_case("kp"); }

/* The same with overlap_comm: the PS dies while the sender threads may be
 * mid-send and replies are in flight; recovery drops them and resumes. */
Test(jobs, kill_ps_overlapped_trainers_pause_and_resume, .timeout = 180) {
  g_overlap = 1;
  kill_ps_case("kpo");
}

/* Runs cmd (a launcher's whole job, its output to <dir>.log), expects exit 0, every line of want in the
 * log and a final checkpoint at max_steps 300 in dir, then removes both. */
static void script_job(const char *dir, const char *cmd, const char *const *want, int nwant) {
  int rc = system(cmd);
  char lp[300];
  snprintf(lp, sizeof lp, "%s.log", dir);
  char *b = slurp(lp);
  if (rc != 0) fprintf(stderr, "%s\n", b ? b : "(no log)");
  cr_expect_eq(rc, 0, "launcher exit %d", rc);
  for (int i = 0; i < nwant; i++) cr_expect(b && strstr(b, want[i]), "%s", want[i]);
  free(b);
  jobt j;
  memset(&j, 0, sizeof j);
  snprintf(j.dir, sizeof j.dir, "%s", dir);
  cr_expect_geq(ckpt_step(&j), 300, "final checkpoint at max_steps (%lld)", ckpt_step(&j));
  char rm[700];
  snprintf(rm, sizeof rm, "rm -rf %s %s.log", dir, dir);
  if (system(rm)) fprintf(stderr, "could not remove %s\n", dir);
}

Test(jobs, mpirun_on_localhost, .timeout = 120) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0) {
    fprintf(stderr, "SKIPPED: mpirun not found (openmpi-bin)\n");
    return;
  }
  char dir[256], cmd[1024];
  snprintf(dir, sizeof dir, "/tmp/loom_test_jobs_mpi_%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "rm -rf %s && timeout 100 mpirun --allow-run-as-root --oversubscribe -np 4 %s --launcher mpi --num_ps 1 "
           "--evaluator 1 --model_dir %s --max_steps 300 --save_steps 100 --deadline 30 >%s.log 2>&1",
           dir, LOOM_DIST_JOB_BIN, dir, dir);
  const char *want[] = {"role=chief:0 exit=0", "role=ps:0 exit=0", "role=worker:0 exit=0", "role=evaluator:0 exit=0"};
  script_job(dir, cmd, want, 4);
}

/* Under mpirun a lost worker does not end the job when mpirun runs with --enable-recovery (OpenMPI
 * 4.x; without it mpirun kills every rank once one dies: the chief, the PS and the other workers end
 * with it). Ranks 0 chief, 1 ps, 2-4 workers:0-2; worker:1 (rank 3) is killed -9 midway: the others
 * train on and the job ends at max_steps with every surviving rank exiting 0; the lost rank, restarted
 * by hand outside mpirun with its rank's environment (OMPI_COMM_WORLD_RANK/SIZE, --launcher mpi),
 * rejoins and exits 0 too. mpirun does not restart it itself (--max-restarts restarts nothing here). */
Test(jobs, mpirun_with_recovery_survives_a_lost_worker, .timeout = 150) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0) {
    fprintf(stderr, "SKIPPED: mpirun not found (openmpi-bin)\n");
    return;
  }
  jobt j;
  job_init(&j, "mpirec", 1, 3);
  char cmd[1024], lp[400];
  snprintf(lp, sizeof lp, "%s/mpirun.log", j.dir);
  snprintf(cmd, sizeof cmd,
           "exec timeout 120 mpirun --allow-run-as-root --oversubscribe --enable-recovery -np 5 %s --launcher mpi "
           "--num_ps 1 --model_dir %s --max_steps 4000 --save_steps 500 --progress 50 --step_sleep_ms 1 "
           "--deadline 30 --diag 1 >%s 2>&1",
           LOOM_DIST_JOB_BIN, j.dir, lp);
  fflush(NULL);
  pid_t mp = fork();
  cr_assert_geq(mp, 0);
  if (mp == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  proc *m = &j.p[j.n++];
  snprintf(m->name, sizeof m->name, "mpirun");
  snprintf(m->log, sizeof m->log, "%s", lp);
  m->pid = mp;
  /* worker:1's pid from its heartbeat file, once it trains */
  char bp[400];
  snprintf(bp, sizeof bp, "%s/rendezvous/worker-1.beat", j.dir);
  long wpid = 0;
  int ok = WAIT_UNTIL(({
                        char *b = slurp(bp);
                        char *q = b ? strstr(b, "pid=") : NULL;
                        wpid = q ? atol(q + 4) : 0;
                        free(b);
                        wpid > 0 && ckpt_step(&j) >= 500;
                      }),
                      60);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "the job trains under mpirun");
  cr_assert_eq(kill((pid_t)wpid, SIGKILL), 0, "kill -9 worker:1 (pid %ld)", wpid);
  long long at = ckpt_step(&j);
  tu_nap(1.0);
  /* restarted by hand: rank 3 of 5 */
  const char *const ra[] = {"--launcher", "mpi", "--num_ps", "1", "--max_steps", "4000", "--save_steps", "500",
                            "--progress", "50", "--step_sleep_ms", "1", "--deadline", "30", "--diag", "1", NULL};
  const char *const re[] = {"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=5", NULL};
  proc *w1 = job_start_ex(&j, "worker", 1, "", NULL, ra, re);
  int rc = wait_exit(&j, m, 110);
  if (rc != 0) dump_logs(&j);
  cr_expect_eq(rc, 0, "mpirun exit %d", rc);
  int wrc = wait_exit(&j, w1, 30);
  cr_expect_eq(wrc, 0, "the restarted worker:1 exit %d", wrc);
  char *b = slurp(lp);
  const char *want[] = {"role=chief:0 exit=0", "role=ps:0 exit=0", "role=worker:0 exit=0", "role=worker:2 exit=0"};
  for (int i = 0; i < 4; i++) cr_expect(b && strstr(b, want[i]), "mpirun log has %s", want[i]);
  free(b);
  cr_expect(log_has(w1, "ready: global step"), "the restarted worker rejoined");
  cr_expect_gt(ckpt_step(&j), at, "training went on after the kill");
  cr_expect_eq(ckpt_step(&j), 4000);
  job_cleanup(&j);
}

/* Slurm's environment (as srun sets it for 4 tasks on one node) on real
 * processes: --launcher slurm maps the ranks to chief, ps, worker and
 * evaluator, and the job runs to the end. */
Test(jobs, slurm_environment_runs_a_job, .timeout = 120) {
  jobt j;
  job_init(&j, "slurm", 1, 1);
  const char *const args[] = {"--launcher", "slurm", "--num_ps", "1", "--evaluator", "1", "--max_steps", "300",
                              "--save_steps", "100", "--deadline", "30", NULL};
  static const char *const envs[4][5] = {
      {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=localhost", "SLURM_STEP_TASKS_PER_NODE=4", NULL},
      {"SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=localhost", "SLURM_STEP_TASKS_PER_NODE=4", NULL},
      {"SLURM_PROCID=2", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=localhost", "SLURM_STEP_TASKS_PER_NODE=4", NULL},
      {"SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=localhost", "SLURM_STEP_TASKS_PER_NODE=4", NULL}};
  proc *p[4];
  for (int r = 0; r < 4; r++) p[r] = job_start_ex(&j, "rank", r, "", NULL, args, envs[r]);
  const char *want[4] = {"role=chief:0 exit=0", "role=ps:0 exit=0", "role=worker:0 exit=0", "role=evaluator:0 exit=0"};
  for (int r = 0; r < 4; r++) {
    int rc = wait_exit(&j, p[r], 60);
    if (rc) dump_logs(&j);
    cr_expect_eq(rc, 0, "rank %d exit %d", r, rc);
    cr_expect(log_has(p[r], want[r]), "rank %d: %s", r, want[r]);
  }
  cr_expect_geq(ckpt_step(&j), 300);
  job_cleanup(&j);
}

/* scripts/launch_local: P PS + a chief + W workers + the evaluator, one
 * TF_CONFIG each, and the chief's exit code back. */
Test(jobs, launch_local_script, .timeout = 120) {
  char dir[256], cmd[1024];
  snprintf(dir, sizeof dir, "/tmp/loom_test_jobs_ll_%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "rm -rf %s && timeout 100 scripts/launch_local -p 2 -w 1 -e 1 -d %s -- %s --max_steps 300 --save_steps 100 "
           "--deadline 30 >%s.log 2>&1",
           dir, dir, LOOM_DIST_JOB_BIN, dir);
  const char *want[] = {"chief exited 0", "worker-0 exited 0", "evaluator-0 exited 0", "ps-0 exited 0", "ps-1 exited 0"};
  script_job(dir, cmd, want, 5);
}

/* The legacy "master" job plays the chief. */
Test(jobs, master_plays_the_chief, .timeout = 120) {
  jobt j;
  job_init(&j, "master", 1, 0);
  char tf[2][512];
  const char *types[2] = {"ps", "master"};
  proc *p[2];
  const char *const args[] = {"--max_steps", "200", "--save_steps", "100", "--deadline", "30", NULL};
  for (int i = 0; i < 2; i++) {
    snprintf(tf[i], sizeof tf[i],
             "{\"cluster\": {\"master\": [\"127.0.0.1:0\"], \"ps\": [\"127.0.0.1:0\"]}, \"task\": {\"type\": "
             "\"%s\", \"index\": 0}}",
             types[i]);
    p[i] = job_start_ex(&j, types[i], 0, tf[i], NULL, args, NULL);
  }
  int rc = wait_exit(&j, p[1], 60);
  if (rc) dump_logs(&j);
  cr_expect_eq(rc, 0);
  cr_expect_eq(wait_exit(&j, p[0], 10), 0);
  cr_expect_geq(ckpt_step(&j), 200);
  job_cleanup(&j);
}

/* A restarted PS whose PS-side checkpoint shard does not match the
 * manifest's digest refuses to serve (exit 1, DATA_LOSS) instead of
 * restoring an inconsistent set. */
Test(jobs, restarted_ps_checks_its_shard_against_the_manifest, .timeout = 120) {
  jobt j;
  job_init(&j, "digest", 1, 0);
  proc *ps = job_start(&j, "ps", 0, 200), *ch = job_start(&j, "chief", 0, 200);
  int rc = wait_exit(&j, ch, 60);
  if (rc) dump_logs(&j);
  cr_assert_eq(rc, 0);
  cr_assert_eq(wait_exit(&j, ps, 10), 0);
  /* the manifest of the newest PS-side checkpoint: flip its digest */
  char mp[400];
  snprintf(mp, sizeof mp, "%s/ps/model.ckpt-%lld", j.dir, ckpt_step(&j));
  char *m = slurp(mp);
  char *line = m ? strstr(m, "shard 0 ") : NULL;
  cr_assert(line, "manifest %s", mp);
  char *dg = strchr(line + 8, ' '); /* "shard 0 <file> <digest>" */
  cr_assert(dg && dg[1], "digest in %s", mp);
  dg[1] = dg[1] == '0' ? '1' : '0';
  FILE *f = fopen(mp, "w");
  cr_assert(f);
  fputs(m, f);
  fclose(f);
  free(m);
  ps = job_start(&j, "ps", 0, 200);
  rc = wait_exit(&j, ps, 30);
  cr_expect_eq(rc, LOOM_JOB_EXIT_FAILED, "exit %d", rc);
  cr_expect(log_has(ps, "the manifest says"), "names the mismatch");
  job_cleanup(&j);
}

/* One trainer against a PS equals local training bit for bit: the same
 * binary, model_fn and data (pipeline 0 of 1 in both), 150 steps of SGD
 * locally (the model_fn's train op) and as chief + 1 PS (the gradients of
 * the same loss, SGD on the PS): every variable of model.ckpt-150 equal,
 * and global_step 150 in both. */
static int collect_names(const char *name, loom_dtype dt, int nd, const int64_t *dims, void *user) {
  (void)dt;
  (void)nd;
  (void)dims;
  char (*names)[128] = user;
  for (int i = 0; i < 32; i++)
    if (!names[i][0]) {
      snprintf(names[i], 128, "%s", name);
      break;
    }
  return 0;
}

static void bitwise_case(const char *tag, const char *const *args) {
  jobt j;
  job_init(&j, tag, 1, 0);
  char local_dir[300];
  snprintf(local_dir, sizeof local_dir, "%s/local", j.dir);
  /* local: no TF_CONFIG (an empty one is local mode) */
  const char *largs[20] = {"--model_dir", local_dir};
  int k = 2;
  for (int i = 0; args[i]; i++) largs[k++] = args[i];
  largs[k] = NULL;
  proc *lp = job_start_ex(&j, "local", 0, "", NULL, largs, NULL);
  proc *ps = job_start_ex(&j, "ps", 0, NULL, NULL, args, NULL);
  proc *ch = job_start_ex(&j, "chief", 0, NULL, NULL, args, NULL);
  int rl = wait_exit(&j, lp, 60), rc = wait_exit(&j, ch, 60);
  if (rl || rc) dump_logs(&j);
  cr_assert(rl == 0 && rc == 0, "local %d, chief %d", rl, rc);
  cr_expect_eq(wait_exit(&j, ps, 10), 0);
  char a[400], b[400];
  snprintf(a, sizeof a, "%s/model.ckpt-150", local_dir);
  snprintf(b, sizeof b, "%s/model.ckpt-150", j.dir);
  static char names[32][128];
  memset(names, 0, sizeof names);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_checkpoint_list_variables(a, collect_names, names, st), LOOM_OK, "%s", loom_status_message(st));
  int compared = 0;
  for (int i = 0; i < 32 && names[i][0]; i++) {
    loom_tensor *ta = NULL, *tb = NULL;
    cr_assert_eq(loom_checkpoint_read_tensor(a, names[i], &ta, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert_eq(loom_checkpoint_read_tensor(b, names[i], &tb, st), LOOM_OK, "%s: %s", names[i],
                 loom_status_message(st));
    size_t n = (size_t)loom_tensor_numel(ta) * (loom_tensor_dtype(ta) == LOOM_I64 ? 8 : 4);
    cr_expect_eq(loom_tensor_numel(ta), loom_tensor_numel(tb), "%s", names[i]);
    cr_expect(memcmp(loom_tensor_data_const(ta), loom_tensor_data_const(tb), n) == 0, "%s differs", names[i]);
    if (!strcmp(names[i], "global_step")) cr_expect_eq(*(const int64_t *)loom_tensor_data_const(tb), 150);
    compared++;
    loom_tensor_free(ta);
    loom_tensor_free(tb);
  }
  cr_expect_geq(compared, 5, "kernels, biases and global_step compared (%d)", compared);
  fprintf(stderr, "%s: %d variables equal\n", tag, compared);
  loom_status_free(st);
  job_cleanup(&j);
}

Test(jobs, one_trainer_job_equals_local_training_bitwise, .timeout = 120) {
  const char *const args[] = {"--max_steps", "150", "--save_steps", "150", "--deadline", "30", "--hidden", "16,8", NULL};
  bitwise_case("bitwise", args);
}

/* The same with an embedding: its gradient is sparse, so its rows travel
 * as PUSH_ROWS/PULL_ROWS through the job's step split. */
Test(jobs, one_trainer_job_with_embedding_equals_local_training_bitwise, .timeout = 120) {
  const char *const args[] = {"--max_steps", "150", "--save_steps", "150", "--deadline", "30", "--embed", "50", NULL};
  bitwise_case("bitwise_emb", args);
}

/* The canned wide & deep model with its default optimizers (Ftrl on linear/, Adagrad on dnn/, read from
 * its train op by the trainer and run on the PS), as separate processes: model.ckpt-150 (variables,
 * slots, global step) bitwise equal to local training's. */
Test(jobs, one_trainer_wide_deep_default_optimizers_equals_local_bitwise, .timeout = 120) {
  const char *const args[] = {"--max_steps", "150", "--save_steps", "150", "--deadline", "30", "--embed", "50",
                              "--wide_deep", "1", "--model_optimizer", "default", "--seed", "7", NULL};
  bitwise_case("bitwise_wd", args);
}

/* --overlap 1 (loom_job_options.overlap_comm): chief + 1 PS, 150 steps,
 * checkpoints every 50. model.ckpt-100 is saved while step 100's update is
 * in flight: the checkpoint listener takes it in first, so every variable of
 * the chief's model.ckpt-100 equals the PS's own shard of the same step
 * (model_dir/ps/model.ckpt-100.ps-0-of-1, tensors "v<shard>"), and
 * global_step is 100 in both. The trajectory is not local training's (the
 * gradients are one update late): the chief's model.ckpt-150 differs from
 * a local run's, yet stays close to it (SGD, small learning rate). */
static int ckpt_tensor_matches(const char *path, const loom_tensor *want) {
  loom_status *st = loom_status_new();
  int found = 0;
  for (int i = 0; i < 32 && !found; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "v%d", i);
    loom_tensor *t = NULL;
    if (loom_checkpoint_read_tensor(path, nm, &t, st) != LOOM_OK) continue;
    found = loom_tensor_numel(t) == loom_tensor_numel(want) && loom_tensor_dtype(t) == loom_tensor_dtype(want) &&
            !memcmp(loom_tensor_data_const(t), loom_tensor_data_const(want), (size_t)loom_tensor_numel(t) * 4);
    loom_tensor_free(t);
  }
  loom_status_free(st);
  return found;
}

Test(jobs, overlapped_chief_checkpoints_equal_ps_and_stay_near_local, .timeout = 120) {
  jobt j;
  job_init(&j, "overlap", 1, 0);
  char local_dir[300];
  snprintf(local_dir, sizeof local_dir, "%s/local", j.dir);
  const char *const largs[] = {"--model_dir", local_dir, "--max_steps", "150", "--save_steps", "50", "--deadline", "30",
                               "--hidden", "16,8", NULL};
  const char *const args[] = {"--max_steps", "150", "--save_steps", "50", "--deadline", "30", "--hidden", "16,8",
                              "--overlap", "1", NULL};
  proc *lp = job_start_ex(&j, "local", 0, "", NULL, largs, NULL);
  proc *ps = job_start_ex(&j, "ps", 0, NULL, NULL, args, NULL);
  proc *ch = job_start_ex(&j, "chief", 0, NULL, NULL, args, NULL);
  int rl = wait_exit(&j, lp, 60), rc = wait_exit(&j, ch, 60);
  if (rl || rc) dump_logs(&j);
  cr_assert(rl == 0 && rc == 0, "local %d, chief %d", rl, rc);
  cr_expect_eq(wait_exit(&j, ps, 10), 0);
  char a[400], b[400], l[400];
  snprintf(a, sizeof a, "%s/model.ckpt-100", j.dir);
  snprintf(b, sizeof b, "%s/ps/model.ckpt-100.ps-0-of-1", j.dir);
  snprintf(l, sizeof l, "%s/model.ckpt-150", local_dir);
  static char names[32][128];
  memset(names, 0, sizeof names);
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_checkpoint_list_variables(a, collect_names, names, st), LOOM_OK, "%s", loom_status_message(st));
  int compared = 0, differ = 0;
  double maxdiff = 0, maxabs = 0;
  for (int i = 0; i < 32 && names[i][0]; i++) {
    loom_tensor *ta = NULL;
    cr_assert_eq(loom_checkpoint_read_tensor(a, names[i], &ta, st), LOOM_OK, "%s", loom_status_message(st));
    if (!strcmp(names[i], "global_step")) {
      cr_expect_eq(*(const int64_t *)loom_tensor_data_const(ta), 100);
      loom_tensor_free(ta);
      continue;
    }
    cr_expect(ckpt_tensor_matches(b, ta), "%s of model.ckpt-100 is not the PS's value at step 100", names[i]);
    compared++;
    loom_tensor_free(ta);
    /* step 150: the chief against local training */
    char c150[400];
    snprintf(c150, sizeof c150, "%s/model.ckpt-150", j.dir);
    loom_tensor *tc = NULL, *tl = NULL;
    cr_assert_eq(loom_checkpoint_read_tensor(c150, names[i], &tc, st), LOOM_OK, "%s", loom_status_message(st));
    cr_assert_eq(loom_checkpoint_read_tensor(l, names[i], &tl, st), LOOM_OK, "%s", loom_status_message(st));
    const float *x = loom_tensor_data_const(tc), *y = loom_tensor_data_const(tl);
    for (int64_t k = 0; k < loom_tensor_numel(tc); k++) {
      double d = fabs((double)x[k] - y[k]);
      cr_assert(isfinite(x[k]), "%s[%lld] is not finite", names[i], (long long)k);
      differ |= x[k] != y[k];
      if (d > maxdiff) maxdiff = d;
      if (fabs(y[k]) > maxabs) maxabs = fabs(y[k]);
    }
    loom_tensor_free(tc);
    loom_tensor_free(tl);
  }
  cr_expect_geq(compared, 4, "kernels and biases compared (%d)", compared);
  cr_expect(differ, "the overlapped run must not reproduce local training (its gradients are one update late)");
  cr_expect_lt(maxdiff, 0.1 * maxabs, "overlapped vs local after 150 steps: max |diff| %.4g, max |w| %.4g", maxdiff,
               maxabs);
  fprintf(stderr, "overlap: %d variables equal the PS's at step 100; vs local at 150: max |diff| %.4g (max |w| %.4g)\n",
          compared, maxdiff, maxabs);
  loom_status_free(st);
  job_cleanup(&j);
}

/* SIGINT to the worker and SIGTERM (what Kubernetes sends before SIGKILL) to the chief of a running job:
 * each finishes or abandons the step in flight and exits 0 within 5 s; the chief writes its final
 * checkpoint first, in model_dir and as the PS shards (model_dir/ps/model.ckpt-<step>), at a step at least the last one it
 * reported. The PS stays up (the job is not finished: no done file) until SIGTERM, then exits 0. */
Test(jobs, sigterm_to_trainers_final_checkpoint_and_exit_0_within_5s, .timeout = 120) {
  jobt j;
  job_init(&j, "sigterm", 1, 1);
  const int64_t MAX = 1000000;
  proc *ps = job_start(&j, "ps", 0, MAX), *ch = job_start(&j, "chief", 0, MAX), *w0 = job_start(&j, "worker", 0, MAX);
  int ok = WAIT_UNTIL(last_progress(ch) >= 300 && last_progress(w0) >= 300, 60);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "both trainers train");
  double t0 = tu_now_s();
  kill(w0->pid, SIGINT); /* Ctrl-C: the same as SIGTERM */
  int rw = wait_exit(&j, w0, 5);
  cr_expect_eq(rw, 0, "worker exit %d within %.1f s of SIGINT", rw, tu_now_s() - t0);
  long long seen = last_progress(ch);
  t0 = tu_now_s();
  kill(ch->pid, SIGTERM);
  int rc = wait_exit(&j, ch, 5);
  double dt = tu_now_s() - t0;
  if (rc) dump_logs(&j);
  cr_expect_eq(rc, 0, "chief exit %d within %.1f s of SIGTERM", rc, dt);
  long long step = ckpt_step(&j);
  cr_expect_geq(step, seen, "final checkpoint at step %lld, the chief had reported %lld", step, seen);
  char p[600];
  snprintf(p, sizeof p, "%s/ps/model.ckpt-%lld", j.dir, step);
  cr_expect_eq(access(p, R_OK), 0, "the PS shards of the final step: %s", p);
  snprintf(p, sizeof p, "%s/rendezvous/done", j.dir);
  cr_expect_neq(access(p, R_OK), 0, "no done file: the job is not finished");
  cr_expect(!ps->done, "the PS stays up for the trainers' restart");
  kill(ps->pid, SIGTERM);
  cr_expect_eq(wait_exit(&j, ps, 5), 0);
  job_cleanup(&j);
}

/* A second SIGTERM ends the trainer at once (killed by the signal), without the graceful end. */
Test(jobs, second_sigterm_exits_at_once, .timeout = 120) {
  jobt j;
  job_init(&j, "sigterm2", 1, 0);
  const int64_t MAX = 1000000;
  proc *ps = job_start(&j, "ps", 0, MAX);
  /* steps of 200 ms (the progress hook's simulated compute): the first signal's graceful end waits for
   * the step in flight, so the second arrives during it */
  const char *const args[] = {"--deadline", "20", "--save_steps", "200", "--progress", "1", "--step_sleep_ms", "200",
                              "--max_steps", "1000000", NULL};
  proc *ch = job_start_ex(&j, "chief", 0, NULL, NULL, args, NULL);
  int ok = WAIT_UNTIL(last_progress(ch) >= 3, 60);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "the chief trains");
  (void)MAX;
  kill(ch->pid, SIGTERM);
  tu_nap(0.05); /* handled (standard signals sent together merge into one) */
  kill(ch->pid, SIGTERM);
  int rc = wait_exit(&j, ch, 5);
  cr_expect_eq(rc, 128 + SIGTERM, "chief exit %d (128 + SIGTERM expected: the second signal ends it)", rc);
  (void)ps;
  job_cleanup(&j);
}

/* A trainer still waiting for its PS at start: SIGTERM ends the wait, exit 0. */
Test(jobs, sigterm_while_waiting_for_the_ps_exits_0, .timeout = 60) {
  jobt j;
  job_init(&j, "sigterm3", 1, 1);
  proc *w0 = job_start(&j, "worker", 0, 1000);
  int ok = WAIT_UNTIL(log_has(w0, "waiting for"), 30);
  cr_assert(ok, "the worker waits for the PS");
  double t0 = tu_now_s();
  kill(w0->pid, SIGTERM);
  int rc = wait_exit(&j, w0, 5);
  cr_expect_eq(rc, 0, "exit %d %.1f s after SIGTERM", rc, tu_now_s() - t0);
  job_cleanup(&j);
}

/* Hooks never see a global step from before a restore: ps:0 (the global step's home) is killed and
 * restarted; it restores its shard of the last PS-side checkpoint, global step R. A lone chief sees
 * consecutive steps; the one jump its progress hook reports is backwards, to R + 1 (the first step made
 * on the restored PS), not a step after the one before the outage. */
Test(jobs, hooks_see_the_restored_global_step_after_a_ps_restart, .timeout = 180) {
  jobt j;
  job_init(&j, "gsrestore", 1, 0);
  const int64_t MAX = 4000;
  proc *ps = job_start(&j, "ps", 0, MAX), *ch = job_start(&j, "chief", 0, MAX);
  char psck[400];
  snprintf(psck, sizeof psck, "%s/ps/checkpoint", j.dir);
  int ok = WAIT_UNTIL(last_progress(ch) >= 500 && access(psck, R_OK) == 0, 60);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "training and PS-side checkpointing started");
  kill9(&j, ps);
  ok = WAIT_UNTIL(log_has(ch, "waiting for ps:0"), 20);
  cr_expect(ok, "the chief waits for ps:0");
  long long before = last_progress(ch);
  ps = job_start(&j, "ps", 0, MAX);
  ok = WAIT_UNTIL(last_progress(ch) > 0 && log_has(ch, "reconnected to the PS tasks") && log_has(ch, "progress jump"),
                  30);
  tu_nap(0.5);
  if (!ok) dump_logs(&j);
  cr_assert(ok, "training resumed");
  char *pl = slurp(ps->log), *cl = slurp(ch->log);
  const char *r = pl ? strstr(pl, "restored its shard") : NULL;
  const char *k = r ? strstr(r, "model.ckpt-") : NULL;
  long long R = k ? atoll(k + 11) : -1;
  cr_assert_geq(R, 0, "the restarted PS names the checkpoint it restored");
  int jumps = 0;
  long long from = -1, to = -1;
  for (const char *q = cl; q && (q = strstr(q, "progress jump from=")); q++, jumps++)
    sscanf(q, "progress jump from=%lld to=%lld", &from, &to);
  cr_expect_eq(jumps, 1, "one jump (the restore), got %d", jumps);
  cr_expect_eq(to, R + 1, "the first step after the restart is %lld, the restored step is %lld", to, R);
  cr_expect_geq(from, before - 60, "the jump starts from the last step before the outage (%lld, progress %lld)",
                from, before);
  free(pl);
  free(cl);
  job_cleanup(&j);
}
