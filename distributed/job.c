/* distributed/job.c - the parameter-server strategy of a distributed job (loom_job.h) and the job's
 * rendezvous, as a library below the training loop (the roles that use it are one level up, in cluster.c).
 *
 * Trainers (chief, workers) run the one training loop, Estimator.train, with this strategy
 * (distributed/strategy.h): its hook, first in the list (the "PS hook"), turns each run into a PS step:
 * before the run it writes the global step taken from ps:0 (STEP_INC) into the session's global_step
 * variable (so the stop, checkpoint, summary and logging hooks see the PS's step, exactly as a local train
 * op's increment), adds the gradients the train op's apply ops consume as fetches (distributed/ps_rules.h:
 * the model's own update rules run on the PS), and after the run pushes them and pulls the new values
 * into the session (distributed/ps_worker.c's seam). A PS lost during a step: the hook reconnects with
 * backoff (all connections, re-reading the rendezvous files), the chief re-creates any variable the PS
 * lacks, everyone pulls, and training goes on; the step's gradient is dropped. Waits print a diagnostic
 * line every diag_every_s and end at their deadline with UNAVAILABLE (retryable).
 *
 * The chief's checkpoint saver gets a listener that writes the PS-side checkpoint (loom_ps_cluster_save
 * into model_dir/ps/) at every save, so a restarted PS restores its shard (ps_restore_self) and the
 * evaluator reads the ordinary model_dir/model.ckpt-<step> files without a PS.
 *
 * SIGTERM / SIGINT (loom__job_signals_install): the first ends every wait and asks the loop to stop after
 * the step in flight (the chief's saver then writes the final checkpoint, model_dir and PS shards); the
 * second ends the process at once. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "distributed/job_seam.h"
#include "distributed/ps_client.h"
#include "distributed/ps_restore.h"
#include "distributed/ps_rules.h"
#include "base/fsutil.h"
#include "distributed/job.h"
#include "engine/engine_api.h"
#include "distributed/strategy.h"

/* ------------------------------------------------------------ options */
loom_job_options loom_job_options_default(void) {
  loom_job_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.optimizer = LOOM_PS_SGD;
  o.hyper[0] = 0.01f;
  o.strategy = LOOM_PS_GREEDY_BYTES;
  o.start_deadline_s = 300;
  o.peer_lost_deadline_s = 120;
  o.diag_every_s = 10;
  o.rpc_timeout_s = 10;
  o.eval_poll_s = 1;
  o.eval_deadline_s = 600;
  o.ps_idle_exit_s = 300;
  o.ps_chief_lost_save_s = 30;
  return o;
}

int loom_job_exit_code(loom_code rc) {
  switch (rc) {
  case LOOM_OK: return LOOM_JOB_EXIT_OK;
  case LOOM_INVALID_ARGUMENT: return LOOM_JOB_EXIT_CONFIG;
  case LOOM_PERMISSION_DENIED: return LOOM_JOB_EXIT_AUTH;
  case LOOM_FAILED_PRECONDITION: return LOOM_JOB_EXIT_PLACEMENT;
  case LOOM_UNAVAILABLE:
  case LOOM_DEADLINE_EXCEEDED:
  case LOOM_ABORTED: return LOOM_JOB_EXIT_RETRYABLE;
  default: return LOOM_JOB_EXIT_FAILED;
  }
}

void loom_job_input_context(const loom_params *params, int *num_pipelines, int *pipeline_id) {
  int64_t n = loom_params_get_int(params, "num_input_pipelines", 1);
  int64_t i = loom_params_get_int(params, "input_pipeline_id", 0);
  if (n < 1 || i < 0 || i >= n) n = 1, i = 0;
  if (num_pipelines) *num_pipelines = (int)n;
  if (pipeline_id) *pipeline_id = (int)i;
}

int loom__job_is_distributed(const char *json) {
  loom_tf_config *tc = loom_tf_config_parse(json, NULL);
  if (!tc) { /* a TF_CONFIG that does not parse: let the job report it */
    const char *env = json ? json : getenv("TF_CONFIG");
    return env && *env;
  }
  int d = loom_tf_config_num_ps_replicas(tc) > 0 || !strcmp(loom_tf_config_task_type(tc), "evaluator") ||
          !strcmp(loom_tf_config_task_type(tc), "ps");
  loom_tf_config_free(tc);
  return d;
}

/* ------------------------------------------------------------- the job */
static volatile sig_atomic_t g_term; /* SIGTERM / SIGINT seen */
static void on_term(int sig) {
  (void)sig;
  g_term = 1;
}

/* Trainers and the evaluator: the first signal is counted (every wait ends, the loop stops after the step
 * in flight); the second ends the process at once. */
static struct sigaction g_old_term, g_old_int;
static int g_installed;
static void on_term_twice(int sig) {
  if (g_term) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  g_term = 1;
}

void loom__job_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term_twice;
  sigemptyset(&sa.sa_mask);
  g_term = 0;
  if (g_installed++) return;
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGINT, &sa, &g_old_int);
}

void loom__job_signals_restore(void) {
  if (!g_installed || --g_installed) return;
  sigaction(SIGTERM, &g_old_term, NULL);
  sigaction(SIGINT, &g_old_int, NULL);
}

int loom__job_signal_count(void) { return g_term ? 1 : 0; }

typedef struct loom__job job;
struct loom__job {
  char model_dir[4000];
  loom_job_options o;
  loom_tf_config *tc;
  char type[16];
  int index, is_chief;
  int num_ps, num_workers;
  char name[48];      /* "worker:1" */
  char rdv[4096];     /* model_dir/rendezvous */
  const void *token;
  size_t token_len;
  /* resolved PS addresses */
  char **host;
  int *port;
  uint64_t phash;     /* this job's placement hash (0 before the placement is made) */
  int *stale;         /* ps:i's rendezvous file was found stale (its PS gone, or another job's PS on its port) */
  uint64_t *inst;     /* the PS instance ps-<i>.addr names (0: any: a TF_CONFIG port, or an older file) */
  time_t t_start;     /* this process's start (a done file older than this is an earlier run's) */
  int ended_before;   /* a worker found the job finished (done file) before it could connect */
};

typedef loom__job_waiter waiter;

static void job_free(job *j) {
  loom_tf_config_free(j->tc);
  for (int i = 0; j->host && i < j->num_ps; i++) loom__free(j->host[i]);
  loom__free(j->host);
  loom__free(j->port);
  loom__free(j->stale);
  loom__free(j->inst);
}

static void jlog(const job *j, loom_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void jlog(const job *j, loom_log_level lvl, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  loom__log(lvl, "job %s: %s", j->name, msg);
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !g_term) {
  }
}

/* A bounded wait: backoff 20 ms doubling to 1 s, a diagnostic line every
 * diag_every_s, UNAVAILABLE naming what was awaited at the deadline. */

static void waiter_init(waiter *w, const job *j, double deadline_s) {
  w->j = j;
  w->t0 = loom__mono_secs();
  w->last_diag = w->t0;
  w->deadline = deadline_s;
  w->backoff = 0.01;
}

static void trainer_beat(const job *j, int force);

/* what: "ps:1 (127.0.0.1:4000)"; why: the last failure. Returns LOOM_OK to
 * try again, UNAVAILABLE once the deadline has passed. */
static loom_code waiter_wait(waiter *w, const char *what, const char *why, loom_status *st) {
  trainer_beat(w->j, 0); /* a waiting worker is alive */
  if (g_term) return loom_status_set(st, LOOM_CANCELLED, "job %s: terminated (signal) while waiting for %s", w->j->name, what);
  double now = loom__mono_secs(), el = now - w->t0;
  if (el >= w->deadline)
    return loom_status_set(st, LOOM_UNAVAILABLE, "job %s: gave up waiting for %s after %.0f s (deadline %.0f s): %s",
                           w->j->name, what, el, w->deadline, why);
  if (now - w->last_diag >= w->j->o.diag_every_s) {
    jlog(w->j, LOOM_LOG_WARN, "waiting for %s: %s, %.0f s elapsed (deadline %.0f s)", what, why, el, w->deadline);
    w->last_diag = now;
  }
  double left = w->deadline - el;
  sleep_s(w->backoff < left ? w->backoff : left);
  w->backoff = w->backoff * 1.5 < 0.25 ? w->backoff * 1.5 : 0.25; /* polls are cheap: a file read, a connect */
  return LOOM_OK;
}

/* One more wait of a connect loop: 1 to try again; 0 (st set) past the deadline or on SIGTERM. */
static int connect_wait(const job *j, waiter *w, const char *what, const char *why, loom_status *st) {
  if (waiter_wait(w, what, why, st) == LOOM_OK && !g_term) return 1;
  if (g_term) loom_status_set(st, LOOM_CANCELLED, "job %s: terminated while waiting for %s", j->name, what);
  return 0;
}

/* ---- files in model_dir/rendezvous ---- */
static loom_code write_atomic(const char *path, const char *text, loom_status *st) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return loom_status_set(st, LOOM_UNAVAILABLE, "cannot write %s: %s", tmp, strerror(errno));
  int bad = fputs(text, f) < 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    remove(tmp);
    return loom_status_set(st, LOOM_UNAVAILABLE, "cannot write %s", path);
  }
  return LOOM_OK;
}

static int read_small(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = 0;
  return n > 0;
}

/* ---- who wrote a rendezvous file, and is it still running ----
 * Files name their writer as "pid=<pid> host=<hostname> pidns=<inode of
 * /proc/self/ns/pid>". A writer on this host in this pid namespace is
 * checked with kill(pid, 0) (a zombie counts as gone); one elsewhere only
 * by the age of the file it refreshes (trainer heartbeats). */
static void self_ident(char *buf, size_t cap) {
  char hn[256] = "?";
  if (gethostname(hn, sizeof hn) != 0 || !hn[0]) snprintf(hn, sizeof hn, "?");
  hn[sizeof hn - 1] = 0;
  for (char *q = hn; *q; q++)
    if (*q == ' ' || *q == '\n') *q = '_';
  struct stat sb;
  unsigned long long ns = stat("/proc/self/ns/pid", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
  snprintf(buf, cap, "pid=%ld host=%s pidns=%llu", (long)getpid(), hn, ns);
}

/* The value of " key=" in text (up to a blank) into out; 0 when absent. */
static int kv_get(const char *text, const char *key, char *out, size_t cap) {
  size_t kl = strlen(key);
  for (const char *q = text; (q = strstr(q, key)) != NULL; q += kl) {
    if (q != text && q[-1] != ' ' && q[-1] != '\n') continue;
    if (q[kl] != '=') continue;
    q += kl + 1;
    size_t n = strcspn(q, " \n");
    if (n >= cap) return 0;
    memcpy(out, q, n);
    out[n] = 0;
    return 1;
  }
  return 0;
}

/* 1: the writer named in text runs on this host and is gone (pid in why);
 * 0: alive, or not checkable from here. */
static int writer_gone(const char *text, char *why, size_t wcap) {
  char me[400], pid_s[32], host[256], ns[32], mhost[256], mns[32];
  self_ident(me, sizeof me);
  if (!kv_get(text, "pid", pid_s, sizeof pid_s) || !kv_get(text, "host", host, sizeof host) ||
      !kv_get(text, "pidns", ns, sizeof ns) || !kv_get(me, "host", mhost, sizeof mhost) ||
      !kv_get(me, "pidns", mns, sizeof mns))
    return 0;
  if (strcmp(host, mhost) || strcmp(ns, mns) || !strcmp(ns, "0")) return 0;
  long pid = atol(pid_s);
  if (pid <= 0) return 0;
  int gone = kill((pid_t)pid, 0) != 0 && errno == ESRCH;
  if (!gone) { /* a zombie (exited, not yet reaped) is gone too */
    char p[64], b[512];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    if (read_small(p, b, sizeof b)) {
      const char *q = strrchr(b, ')');
      gone = q && (q[2] == 'Z' || q[2] == 'X');
    }
  }
  if (gone) snprintf(why, wcap, "pid %ld is gone", pid);
  return gone;
}

/* ---- trainer heartbeats and ends: model_dir/rendezvous/worker-<i>.{beat,end} ----
 * A worker refreshes its beat file about once a second (between steps and
 * while it waits) and writes its end file when it returns; the chief waits
 * for every live worker's end before it shuts the PS tasks down. */
#define BEAT_EVERY_S 1.0
#define BEAT_STALE_S 30.0 /* a beat this old: its worker (on another host) is taken for dead */
static double g_last_beat = -1e30;
static void trainer_beat(const job *j, int force) {
  if (strcmp(j->type, "worker")) return;
  double now = loom__mono_secs();
  if (!force && now - g_last_beat < BEAT_EVERY_S) return;
  g_last_beat = now;
  char p[4200], text[420];
  snprintf(p, sizeof p, "%s/worker-%d.beat", j->rdv, j->index);
  self_ident(text, sizeof text);
  strcat(text, "\n");
  loom_status *s2 = loom_status_new();
  write_atomic(p, text, s2); /* best effort: a missing beat makes the chief not wait */
  loom_status_free(s2);
}

static void trainer_end(const job *j, int64_t gs, loom_code rc) {
  if (strcmp(j->type, "worker")) return;
  char p[4200], text[480], me[400];
  snprintf(p, sizeof p, "%s/worker-%d.end", j->rdv, j->index);
  self_ident(me, sizeof me);
  snprintf(text, sizeof text, "step=%lld rc=%d %s\n", (long long)gs, (int)rc, me);
  loom_status *s2 = loom_status_new();
  write_atomic(p, text, s2);
  loom_status_free(s2);
}

static int ts_before(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The final step the chief wrote at the end of training; -1 when absent
 * or older than not_before (a done file of an earlier run of the job). */
static int64_t done_step_since(const job *j, time_t not_before) {
  char p[4200], b[64];
  snprintf(p, sizeof p, "%s/done", j->rdv);
  struct stat sb;
  long long s;
  if (stat(p, &sb) != 0 || sb.st_mtime < not_before) return -1;
  if (!read_small(p, b, sizeof b) || sscanf(b, "%lld", &s) != 1) return -1;
  return s;
}
static int64_t done_step(const job *j) { return done_step_since(j, 0); }

/* "host:port" (host may be [v6]) into host/port. */
static int split_addr(const char *a, char *host, size_t cap, int *port) {
  const char *c = strrchr(a, ':');
  if (!c || c == a) return 0;
  size_t hl = (size_t)(c - a);
  if (a[0] == '[' && hl >= 2 && a[hl - 1] == ']') a++, hl -= 2;
  if (hl >= cap) return 0;
  char *end;
  long p = strtol(c + 1, &end, 10);
  if (*end || p < 0 || p > 65535) return 0;
  memcpy(host, a, hl);
  host[hl] = 0;
  *port = (int)p;
  return 1;
}

/* Resolves ps:i's address: TF_CONFIG's, or the rendezvous file when its
 * port is 0. Returns 0 with why filled when it is not known yet. */
static int resolve_ps(job *j, int i, char *why, size_t wcap) {
  const char *a = loom_tf_config_address(j->tc, "ps", i);
  char host[256];
  int port = 0;
  if (!a || !split_addr(a, host, sizeof host, &port)) {
    snprintf(why, wcap, "TF_CONFIG address '%s' is not host:port", a ? a : "(none)");
    return 0;
  }
  uint64_t inst = 0;
  if (port == 0) {
    char p[4200], b[800], b2[800], gone[64], is[32];
    snprintf(p, sizeof p, "%s/ps-%d.addr", j->rdv, i);
    if (!read_small(p, b, sizeof b) || (memcpy(b2, b, sizeof b), 0) ||
        !split_addr(strtok(b, " \n"), host, sizeof host, &port) || port == 0) {
      snprintf(why, wcap, "not published yet (model_dir/rendezvous/ps-%d.addr)", i);
      return 0;
    }
    /* a file left by a PS that is gone (on this host): its port may be
     * anyone's now; wait for the restarted PS to publish again */
    if (writer_gone(b2, gone, sizeof gone)) {
      snprintf(why, wcap, "model_dir/rendezvous/ps-%d.addr (%s:%d) is stale: its PS, %s; waiting for ps:%d to publish again",
               i, host, port, gone, i);
      if (j->stale) j->stale[i] = 1;
      return 0;
    }
    /* the PS's instance id (compared with WELCOME's by instances_ok: another PS of this model may
     * hold that port now) */
    if (kv_get(b2, "instance", is, sizeof is)) inst = strtoull(is, NULL, 16);
  }
  char *h = loom__strdup(host);
  if (!h) {
    snprintf(why, wcap, "out of memory");
    return 0;
  }
  loom__free(j->host[i]);
  j->host[i] = h;
  j->port[i] = port;
  if (j->inst) j->inst[i] = inst;
  return 1;
}

/* resolve_ps for every PS: 1, else 0 with why filled and what (if not NULL) naming the first PS whose
 * address is not known yet ("ps:<i>"). */
static int resolve_all(job *j, char *why, size_t wcap, char *what, size_t whcap) {
  for (int i = 0; i < j->num_ps; i++)
    if (!resolve_ps(j, i, why, wcap)) {
      if (what) snprintf(what, whcap, "ps:%d", i);
      return 0;
    }
  return 1;
}

/* 1 when every PS that cl reached is the instance its ps-<i>.addr names; 0 with why filled (and
 * ps:i marked stale) when one is another PS of this model that holds that port now: the file is
 * stale (its PS gone from that port; on another host its writer cannot be checked). */
static int instances_ok(job *j, loom_ps_cluster *cl, char *why, size_t wcap) {
  for (int i = 0; j->inst && i < j->num_ps; i++) {
    uint64_t got = loom_ps_client_instance(loom_ps_cluster_client(cl, i));
    if (!j->inst[i] || got == j->inst[i]) continue;
    snprintf(why, wcap,
             "model_dir/rendezvous/ps-%d.addr (%s:%d) is stale: that port answers as PS instance %016llx of this "
             "placement, the file names instance %016llx (another PS of this model holds the port now); waiting "
             "for ps:%d to publish again",
             i, j->host[i], j->port[i], (unsigned long long)got, (unsigned long long)j->inst[i], i);
    if (j->stale) j->stale[i] = 1;
    return 0;
  }
  return 1;
}

/* LOOM_PS_BUSY_POLL_US (environment): the busy-poll budget in us of this job's PS tasks and PS clients
 * (loom_ps_server_options.busy_poll_us; unset or <= 0: off, the default; at most 10000). */
static int32_t busy_poll_env(void) {
  const char *e = getenv("LOOM_PS_BUSY_POLL_US");
  if (!e || !*e) return 0;
  long v = strtol(e, NULL, 10);
  return v <= 0 ? 0 : v > 10000 ? 10000 : (int32_t)v;
}

/* LOOM_PS_SHM (environment): 0 turns the same-host shared-memory exchange off for this job's PS clients
 * (loom_ps_connect_options.shm = 1); unset or anything else: auto (used where the PS is on this host). */
static int32_t shm_env(void) {
  const char *e = getenv("LOOM_PS_SHM");
  return e && !strcmp(e, "0") ? 1 : 0;
}

/* LOOM_PS_PART_BYTES (environment): loom_ps_connect_options.part_bytes of this job's PS clients, the part
 * size of the pipelined dense push+pull (unset or 0: the default, 128 KiB; < 0: off, one frame). */
static int32_t part_bytes_env(void) {
  const char *e = getenv("LOOM_PS_PART_BYTES");
  if (!e || !*e) return 0;
  long v = strtol(e, NULL, 10);
  return v < 0 ? -1 : v > (64L << 20) ? (int32_t)(64L << 20) : (int32_t)v;
}

static loom_ps_connect_options connect_opts(const job *j) {
  loom_ps_connect_options co = loom_ps_connect_options_default();
  co.busy_poll_us = busy_poll_env();
  co.shm = shm_env();
  co.part_bytes = part_bytes_env();
  co.token = j->token;
  co.token_len = j->token_len;
  co.timeout_s = j->o.rpc_timeout_s;
  co.chief = j->is_chief;
  return co;
}

/* A permanent refusal (wrong token, other placement, bad address) ends the
 * waits at once. */
static int permanent(loom_code rc) {
  return rc == LOOM_PERMISSION_DENIED || rc == LOOM_FAILED_PRECONDITION || rc == LOOM_INVALID_ARGUMENT;
}

/* A HELLO refused for its placement (msg) by a PS found through a
 * rendezvous file that this job's PS wrote with this job's placement hash:
 * the PS answering on that port is not the file's writer but another job's
 * (the file is stale; its PS is gone from that port). 1 with why filled:
 * wait for the PS to publish again, not exit 4. */
static int other_jobs_ps(job *j, const char *msg, char *why, size_t wcap) {
  if (!strstr(msg, "placement hash mismatch") || !j->phash) return 0;
  for (int i = 0; i < j->num_ps; i++) {
    const char *a = loom_tf_config_address(j->tc, "ps", i);
    char host[256], b[800], ph[32], at[300], want[32];
    int port = 0;
    if (!a || !split_addr(a, host, sizeof host, &port) || port != 0 || !j->host[i]) continue;
    snprintf(at, sizeof at, "%s:%d", j->host[i], j->port[i]);
    if (!strstr(msg, at)) continue;
    char p[4200];
    snprintf(p, sizeof p, "%s/ps-%d.addr", j->rdv, i);
    snprintf(want, sizeof want, "%016llx", (unsigned long long)j->phash);
    if (!read_small(p, b, sizeof b) || !kv_get(b, "placement", ph, sizeof ph) || strcmp(ph, want)) continue;
    snprintf(why, wcap,
             "%s answers as another job's PS (%s), but model_dir/rendezvous/ps-%d.addr was published by this job's "
             "ps:%d with this placement (%s): the file is stale; waiting for ps:%d to publish again",
             at, msg, i, i, want, i);
    if (j->stale) j->stale[i] = 1;
    return 1;
  }
  return 0;
}

/* Connects to every PS, waiting (deadline) for each to be published and to
 * answer; every probe authenticates with the placement's hash. */
static loom_ps_cluster *connect_all(job *j, const loom_ps_placement *p, double deadline_s, loom_status *st) {
  waiter w;
  waiter_init(&w, j, deadline_s);
  loom_ps_connect_options co = connect_opts(j);
  for (;;) {
    char why[512] = "", what[320] = "";
    /* a worker that arrives after the chief ended this run of the job: nothing left to do */
    if (!j->is_chief && done_step_since(j, j->t_start) >= 0) {
      j->ended_before = 1;
      return NULL;
    }
    if (resolve_all(j, why, sizeof why, what, sizeof what)) {
      loom_status *s2 = loom_status_new();
      loom_ps_cluster *cl = loom_ps_cluster_connect(p, (const char *const *)j->host, j->port, &co, s2);
      if (cl && !instances_ok(j, cl, why, sizeof why)) { /* a stale file: wait for ps:i to publish again */
        loom_ps_cluster_free(cl);
        loom_status_free(s2);
        snprintf(what, sizeof what, "the PS tasks of this job");
        if (!connect_wait(j, &w, what, why, st)) return NULL;
        continue;
      }
      if (cl) {
        loom_status_free(s2);
        for (int i = 0; i < j->num_ps; i++)
          if (j->stale[i]) {
            jlog(j, LOOM_LOG_INFO, "ps:%d published again (%s:%d); connected", i, j->host[i], j->port[i]);
            j->stale[i] = 0;
          }
        return cl;
      }
      loom_code rc = loom_status_code(s2);
      if (rc == LOOM_FAILED_PRECONDITION && other_jobs_ps(j, loom_status_message(s2), why, sizeof why)) {
        loom_status_free(s2);
        snprintf(what, sizeof what, "the PS tasks of this job");
        if (!connect_wait(j, &w, what, why, st)) return NULL;
        continue;
      }
      if (permanent(rc)) {
        loom_status_set(st, rc, "job %s: %s", j->name, loom_status_message(s2));
        loom_status_free(s2);
        return NULL;
      }
      snprintf(why, sizeof why, "%s", loom_status_message(s2));
      loom_status_free(s2);
      /* name the first PS that does not answer */
      snprintf(what, sizeof what, "the PS tasks");
      for (int i = 0; i < j->num_ps; i++)
        if (strstr(why, j->host[i]) && strchr(why, ':')) {
          char pp[16];
          snprintf(pp, sizeof pp, ":%d", j->port[i]);
          if (strstr(why, pp)) {
            snprintf(what, sizeof what, "ps:%d (%s:%d)", i, j->host[i], j->port[i]);
            break;
          }
        }
    }
    if (!connect_wait(j, &w, what, why, st)) return NULL;
  }
}

/* ------------------------------------------------------ the PS hook */
typedef struct ps_hook {
  job *j;
  const loom_ps_placement *p;
  loom_ps_cluster *cl;
  loom_ps_worker *w;
  loom_ps_rules *rules; /* the model's update rules (NULL: loom_job_options.job_optimizer) */
  loom_session *s;
  loom_output loss;
  loom_variable *gs_var;
  loom_tensor *gs_t;  /* scalar holding the PS's global step */
  const loom_output *fetch;
  int nfetch;
  int skip;           /* no exchange after this run (the PS step was not taken) */
  int done;           /* the chief finished the job */
  int64_t gs;
  int64_t gs_start;   /* the PS's global step when training began */
  int64_t reconnects;
  double t_inc, t_xchg, t_run_start, t_run; /* seconds in STEP_INC, in the exchange, in the runs */
  int64_t nsteps;
  int inc_pending;    /* the next step's reservation (loom_ps_reserve_step) sent, its reply not read yet */
  int have_step;      /* a granted reservation not pushed yet: h->gs is its step number */
  int refused;        /* the PS refused a reservation: max_steps reached */
  int64_t max_steps;
  int overlap;        /* loom_job_options.overlap_comm */
  int xchg_pending;   /* overlap: the last step's push+pull sent, its replies not read yet */
  /* overlap's sender thread: sends a step's gradients (copied out of the
   * run's results) and its STEP_INC while the next step runs. Handoff under
   * mu: the caller touches the worker and the connections only while
   * io_busy is 0. */
  int io_on;
  pthread_t io_th;
  pthread_mutex_t io_mu;
  pthread_cond_t io_cv;
  int io_req, io_busy, io_quit;
  loom_code io_rc;
  loom_status *io_st;
} ps_hook;

/* The next step's reservation rides behind the exchange: sent right after it, its reply read
 * before the next request on ps:0 (after the next run, a PS-side save, the end), so it costs no
 * round trip of its own. A step's gradient is pushed only when its reservation was granted. */
static loom_code inc_post(ps_hook *h, loom_status *st) {
  return loom__ps_reserve_send(loom_ps_cluster_client(h->cl, 0), h->max_steps, st);
}

static loom_code inc_send(ps_hook *h, loom_status *st) {
  loom_code rc = inc_post(h, st);
  if (!rc) h->inc_pending = 1;
  return rc;
}

static loom_code inc_drain(ps_hook *h, loom_status *st) {
  if (!h->inc_pending) return LOOM_OK;
  h->inc_pending = 0;
  int64_t gs = 0;
  int granted = 0;
  loom_code rc = loom__ps_reserve_recv(loom_ps_cluster_client(h->cl, 0), &gs, &granted, st);
  if (rc) return rc;
  h->gs = gs;
  if (granted) h->have_step = 1;
  else h->refused = 1;
  return LOOM_OK;
}

static void *io_main(void *arg) {
  ps_hook *h = arg;
  pthread_mutex_lock(&h->io_mu);
  for (;;) {
    while (!h->io_req && !h->io_quit) pthread_cond_wait(&h->io_cv, &h->io_mu);
    if (h->io_quit) break;
    h->io_req = 0;
    pthread_mutex_unlock(&h->io_mu);
    loom_code rc = loom__ps_worker_exchange_post(h->w, h->io_st);
    if (rc == LOOM_OK) rc = inc_post(h, h->io_st); /* inc_pending: set by the caller (read by ph_before meanwhile) */
    pthread_mutex_lock(&h->io_mu);
    h->io_rc = rc;
    h->io_busy = 0;
    pthread_cond_broadcast(&h->io_cv);
  }
  pthread_mutex_unlock(&h->io_mu);
  return NULL;
}

static void io_start(ps_hook *h) {
  pthread_mutex_lock(&h->io_mu);
  h->io_busy = h->io_req = 1;
  pthread_cond_broadcast(&h->io_cv);
  pthread_mutex_unlock(&h->io_mu);
}

/* Waits until the sender thread is idle; its error, if any. */
static loom_code io_wait(ps_hook *h, loom_status *st) {
  if (!h->io_on) return LOOM_OK;
  pthread_mutex_lock(&h->io_mu);
  while (h->io_busy) pthread_cond_wait(&h->io_cv, &h->io_mu);
  loom_code rc = h->io_rc;
  h->io_rc = LOOM_OK;
  pthread_mutex_unlock(&h->io_mu);
  if (rc) loom_status_set(st, rc, "%s", loom_status_message(h->io_st));
  return rc;
}

/* Overlap: the replies of the exchange in flight (the new values, into the
 * session's variable buffers: called only between runs), then the STEP_INC
 * reply queued behind them on ps:0. Without overlap: the STEP_INC reply. */
static loom_code xchg_flush(ps_hook *h, loom_status *st) {
  loom_code rc0 = io_wait(h, st);
  if (rc0) {
    h->xchg_pending = h->inc_pending = 0; /* the connection is out of step: recover reconnects */
    return rc0;
  }
  if (h->xchg_pending) {
    h->xchg_pending = 0;
    loom_code rc = loom__ps_worker_exchange_recv(h->w, st);
    if (rc) {
      h->inc_pending = 0; /* the connection is out of step: recover reconnects */
      return rc;
    }
  }
  return inc_drain(h, st);
}

/* The values of every variable from the PS; waits (deadline) while a PS
 * reports a variable not initialized yet (the chief has not created it). */
static loom_code pull_ready(ps_hook *h, double deadline_s, loom_status *st) {
  waiter w;
  waiter_init(&w, h->j, deadline_s);
  int wrong = 0; /* a PS reached is not the instance its ps-<i>.addr names: re-read the files, reconnect */
  for (;;) {
    if (wrong) {
      char why[600] = "";
      loom_status *s3 = loom_status_new();
      loom_ps_connect_options co = connect_opts(h->j);
      int ok = resolve_all(h->j, why, sizeof why, NULL, 0);
      if (ok && loom_ps_cluster_reconnect(h->cl, (const char *const *)h->j->host, h->j->port, &co, s3) != LOOM_OK) {
        snprintf(why, sizeof why, "%s", loom_status_message(s3));
        ok = 0;
      }
      loom_status_free(s3);
      if (ok) ok = instances_ok(h->j, h->cl, why, sizeof why);
      wrong = !ok;
      if (wrong) {
        loom_code rc = waiter_wait(&w, "the PS tasks of this job", why, st);
        if (rc != LOOM_OK) return rc;
        if (done_step(h->j) >= 0) {
          h->done = 1;
          return LOOM_OK;
        }
        continue;
      }
    }
    loom_status *s2 = loom_status_new();
    loom_code rc = loom_ps_worker_pull(h->w, s2);
    if (rc == LOOM_OK) {
      loom_status_free(s2);
      return LOOM_OK;
    }
    if (rc != LOOM_FAILED_PRECONDITION) {
      loom_status_set(st, rc, "%s", loom_status_message(s2));
      loom_status_free(s2);
      return rc;
    }
    char why[600];
    const char *m = strstr(loom_status_message(s2), "variable ");
    unsigned id = 0;
    if (m && sscanf(m, "variable %u is not initialized", &id) == 1 && (int)id < loom_ps_placement_num_shards(h->p)) {
      const loom_ps_shard *sh = loom_ps_placement_shard(h->p, (int)id);
      snprintf(why, sizeof why, "uninitialized: %s (ps:%d)", loom_ps_placement_var(h->p, sh->var)->name, sh->ps);
    } else {
      snprintf(why, sizeof why, "uninitialized: %s", loom_status_message(s2));
    }
    loom_status_free(s2);
    /* the connection that answered the error is still in step; the others
     * may hold unread replies: start clean */
    s2 = loom_status_new();
    loom_ps_connect_options co = connect_opts(h->j);
    rc = loom_ps_cluster_reconnect(h->cl, (const char *const *)h->j->host, h->j->port, &co, s2);
    loom_status_free(s2);
    if (rc == LOOM_OK && !instances_ok(h->j, h->cl, why, sizeof why)) wrong = 1;
    if ((rc = waiter_wait(&w, "the chief's variables", why, st)) != LOOM_OK) return rc;
    if (done_step(h->j) >= 0) {
      h->done = 1;
      return LOOM_OK;
    }
  }
}

/* Reads the PS's global step (STEP_INC 0 on ps:0) into h->gs and the session's global_step variable. */
static loom_code gs_refresh(ps_hook *h, loom_status *st) {
  int64_t gs = 0;
  loom_code rc = loom_ps_step_inc(loom_ps_cluster_client(h->cl, 0), 0, &gs, st);
  if (rc == LOOM_OK) {
    h->gs = gs;
    *(int64_t *)loom_tensor_data(h->gs_t) = gs;
    rc = loom_session_assign_variable(h->s, loom_variable_name(h->gs_var), h->gs_t, st);
  }
  return rc;
}

/* Chief: creates the variables the PS tasks lack from the session's values. */
static loom_code chief_init(ps_hook *h, loom_status *st) {
  const job *j = h->j;
  loom_code rc;
  if (h->rules) {
    int n = loom_ps_placement_num_vars(h->p);
    const loom_ps_update_rule **r = loom__calloc((size_t)(n ? n : 1), sizeof *r);
    if (!r) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    rc = loom__ps_rules_eval(h->rules, h->s, st);
    for (int i = 0; i < n; i++) r[i] = loom__ps_rules_get(h->rules, i);
    if (rc == LOOM_OK) rc = loom__ps_worker_init_vars_rules(h->w, r, st);
    loom__free(r);
  } else {
    rc = loom_ps_worker_init_vars(h->w, j->o.optimizer, j->o.hyper, st);
  }
  /* a PS that starts from nothing (global step 0) while the chief restored a checkpoint: the job goes on
   * from the checkpoint's step, not from 0 */
  if (rc == LOOM_OK) {
    int64_t ps_gs = 0, own = 0;
    loom_tensor *t = NULL;
    loom_output go = loom_variable_output(h->gs_var);
    rc = loom_ps_step_inc(loom_ps_cluster_client(h->cl, 0), 0, &ps_gs, st);
    if (rc == LOOM_OK && ps_gs == 0) rc = loom_session_run(h->s, NULL, NULL, 0, &go, &t, 1, NULL, 0, st);
    if (t) own = (int64_t)loom__tensor_scalar_f64(t);
    loom_tensor_free(t);
    if (rc == LOOM_OK && ps_gs == 0 && own > 0) {
      rc = loom_ps_step_inc(loom_ps_cluster_client(h->cl, 0), own, &ps_gs, st);
      if (rc == LOOM_OK)
        jlog(j, LOOM_LOG_INFO, "the PS's global step was 0: set to the restored checkpoint's, %lld", (long long)own);
    }
  }
  if (rc == LOOM_OK) jlog(j, LOOM_LOG_INFO, "variables on the %d PS task(s) created or kept", j->num_ps);
  return rc;
}

/* After a failed exchange: reconnect every PS with backoff until the
 * peer-lost deadline, then (chief) re-create missing variables and pull.
 * LOOM_OK with h->done set when the chief finished meanwhile. */
static loom_code recover(ps_hook *h, const char *failure, loom_status *st) {
  job *j = h->j;
  {
    loom_status *s3 = loom_status_new();
    io_wait(h, s3); /* the sender thread off the connections (its error is this failure or a later one) */
    loom_status_free(s3);
  }
  jlog(j, LOOM_LOG_WARN, "PS exchange failed (%s); reconnecting (deadline %.0f s)", failure, j->o.peer_lost_deadline_s);
  waiter w;
  waiter_init(&w, j, j->o.peer_lost_deadline_s);
  loom_ps_connect_options co = connect_opts(j);
  for (;;) {
    if (done_step(j) >= 0) {
      jlog(j, LOOM_LOG_INFO, "the chief has finished the job (model_dir/rendezvous/done); stopping");
      h->done = 1;
      return LOOM_OK;
    }
    char why[600] = "", what[320] = "the PS tasks";
    if (resolve_all(j, why, sizeof why, what, sizeof what)) {
      loom_status *s2 = loom_status_new();
      loom_code rc = loom_ps_cluster_reconnect(h->cl, (const char *const *)j->host, j->port, &co, s2);
      if (rc == LOOM_OK) /* their replies went with the old connection; a granted step's gradient is dropped */
        h->inc_pending = h->xchg_pending = h->have_step = 0;
      if (rc == LOOM_OK && !instances_ok(j, h->cl, why, sizeof why)) { /* a stale file: wait, re-read it */
        loom_status_free(s2);
        rc = waiter_wait(&w, "the PS tasks of this job", why, st);
        if (rc != LOOM_OK) return rc;
        continue;
      }
      if (rc == LOOM_OK && j->is_chief) rc = chief_init(h, s2);
      if (rc == LOOM_OK) {
        loom_status_free(s2);
        rc = pull_ready(h, j->o.peer_lost_deadline_s, st);
        /* the global step as the PS holds it now (a restarted ps:0 restored an older one): the hooks'
         * next step follows it, never one from before the outage */
        if (rc == LOOM_OK && !h->done) rc = gs_refresh(h, st);
        if (rc == LOOM_OK) {
          h->reconnects++;
          jlog(j, LOOM_LOG_INFO, "reconnected to the PS tasks after %.1f s; training resumes",
               loom__mono_secs() - w.t0);
        }
        return rc;
      }
      if (permanent(rc) && rc != LOOM_FAILED_PRECONDITION) {
        loom_status_set(st, rc, "job %s: %s", j->name, loom_status_message(s2));
        loom_status_free(s2);
        return rc;
      }
      if (rc != LOOM_FAILED_PRECONDITION || !other_jobs_ps(j, loom_status_message(s2), why, sizeof why))
        snprintf(why, sizeof why, "%s", loom_status_message(s2));
      loom_status_free(s2);
      for (int i = 0; i < j->num_ps; i++) {
        char pp[300];
        snprintf(pp, sizeof pp, "%s:%d", j->host[i], j->port[i]);
        if (strstr(why, pp)) {
          snprintf(what, sizeof what, "ps:%d (%s)", i, pp);
          break;
        }
      }
    }
    loom_code rc = waiter_wait(&w, what, why, st);
    if (rc != LOOM_OK) return rc;
  }
}

static loom_code ph_acs(void *self, loom_session *s, loom_status *st) {
  ps_hook *h = self;
  job *j = h->j;
  h->s = s;
  if (h->rules) {
    int n = loom_ps_placement_num_vars(h->p);
    loom_gradient *gr = loom__calloc((size_t)(n ? n : 1), sizeof *gr);
    if (!gr) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    loom__ps_rules_gradients(h->rules, gr);
    h->w = loom__ps_worker_new_grads(s, h->cl, h->p, gr, st);
    loom__free(gr);
  } else {
    h->w = loom_ps_worker_new(s, h->cl, h->p, h->loss, st);
  }
  if (!h->w) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  h->nfetch = loom__ps_worker_fetches(h->w, &h->fetch);
  /* overlap: a sender thread when a step's send never reads a reply (no PS
   * owed more than its back-pressure window); else the caller sends */
  if (h->overlap) loom__ps_cluster_stage_parts(h->cl, 1); /* parts' values staged: the send may run on io_th */
  if (h->overlap && !h->io_on && loom__ps_worker_post_is_write_only(h->w) && (h->io_st = loom_status_new())) {
    pthread_mutex_init(&h->io_mu, NULL);
    pthread_cond_init(&h->io_cv, NULL);
    h->io_on = pthread_create(&h->io_th, NULL, io_main, h) == 0;
    if (!h->io_on) {
      pthread_mutex_destroy(&h->io_mu);
      pthread_cond_destroy(&h->io_cv);
    }
  }
  loom_code rc = LOOM_OK;
  if (j->is_chief) rc = chief_init(h, st);
  if (rc == LOOM_OK) rc = pull_ready(h, j->o.start_deadline_s, st);
  if (rc == LOOM_OK) {
    rc = gs_refresh(h, st);
    h->gs_start = h->gs;
    if (rc == LOOM_OK) rc = inc_send(h, st); /* the first step's reservation */
    if (rc == LOOM_OK)
      jlog(j, LOOM_LOG_INFO, "ready: global step %lld on the PS%s", (long long)h->gs,
           !h->overlap ? "" : h->io_on ? "; overlap_comm: on (sender thread)" : "; overlap_comm: on (the caller sends)");
  }
  return rc;
}

static loom_code ph_before(void *self, loom_hook_context *ctx, loom_hook_run_args *a, loom_status *st) {
  ps_hook *h = self;
  h->skip = 0;
  if (h->done || h->refused || g_term) { /* refused: read with a PS-side save; the run's results are not pushed */
    loom_hook_context_request_stop(ctx);
    h->skip = 1;
    if (!h->refused) return LOOM_OK;
  }
  /* The hooks see the step this run makes, as a local train op's
   * increment: its reserved number when known, else the PS's step as
   * last known plus one (its reservation still in flight); after a
   * refusal, the PS's step. */
  *(int64_t *)loom_tensor_data(h->gs_t) = h->have_step || h->refused ? h->gs : h->gs + 1;
  loom_code rc =
      loom_session_assign_variable(loom_hook_context_session(ctx), loom_variable_name(h->gs_var), h->gs_t, st);
  if (rc) return rc;
  a->nfetches = h->nfetch;
  a->fetches = h->fetch;
  h->t_run_start = loom__mono_secs();
  return LOOM_OK;
}

/* A failed PS request inside a step: recover (or fail for errors that are
 * not the PS's absence). */
static loom_code step_failed(ps_hook *h, loom_hook_context *ctx, loom_code rc, loom_status *s2, loom_status *st) {
  char why[600];
  snprintf(why, sizeof why, "%s", loom_status_message(s2));
  loom_status_free(s2);
  if (!(rc == LOOM_UNAVAILABLE || rc == LOOM_DEADLINE_EXCEEDED || rc == LOOM_DATA_LOSS || rc == LOOM_ABORTED ||
        rc == LOOM_FAILED_PRECONDITION || rc == LOOM_INTERNAL))
    return loom_status_set(st, rc, "%s", why);
  rc = recover(h, why, st);
  if (rc == LOOM_CANCELLED && g_term) { /* a signal while the PS was away: stop (the loop ends cleanly) */
    if (st) loom_status_clear(st);
    h->done = 1;
    rc = LOOM_OK;
  }
  if (rc == LOOM_OK && h->done) loom_hook_context_request_stop(ctx);
  return rc;
}

/* This step's reservation: read (it travelled behind the last exchange), or asked for now when none
 * is in flight (the first step after a reconnect). */
static loom_code reserve_step(ps_hook *h, loom_status *st) {
  loom_code rc = inc_drain(h, st);
  if (rc == LOOM_OK && !h->have_step && !h->refused) {
    rc = inc_send(h, st);
    if (rc == LOOM_OK) rc = inc_drain(h, st);
  }
  return rc;
}

/* The PS refused this step: max_steps is reached. The step's gradient is dropped, the hooks (the
 * final checkpoint) see the PS's global step, and training stops. */
static loom_code stop_refused(ps_hook *h, loom_hook_context *ctx, loom_status *st) {
  jlog(h->j, LOOM_LOG_INFO, "global step %lld reached max_steps %lld on the PS: this step is not pushed; stopping",
       (long long)h->gs, (long long)h->max_steps);
  loom_hook_context_request_stop(ctx);
  *(int64_t *)loom_tensor_data(h->gs_t) = h->gs;
  return loom_session_assign_variable(loom_hook_context_session(ctx), loom_variable_name(h->gs_var), h->gs_t, st);
}

static loom_code ph_after(void *self, loom_hook_context *ctx, loom_tensor *const *res, loom_status *st) {
  ps_hook *h = self;
  trainer_beat(h->j, 0);
  if (h->skip) return LOOM_OK;
  loom_status *s2 = loom_status_new();
  double t0 = loom__mono_secs();
  h->t_run += t0 - h->t_run_start;
  loom_code rc;
  double t1;
  if (h->overlap) {
    /* Overlap (staleness 1): the previous step's replies came in during
     * this run (the PS applied that step meanwhile); read them into the
     * variable buffers now that the run is over, then send this step's
     * gradients and run the next step on these values. */
    rc = xchg_flush(h, s2);
    if (rc == LOOM_OK) rc = reserve_step(h, s2);
    t1 = loom__mono_secs();
    h->t_inc += t1 - t0;
    if (rc != LOOM_OK) return step_failed(h, ctx, rc, s2, st);
    if (h->refused) {
      loom_status_free(s2);
      return stop_refused(h, ctx, st);
    }
    h->have_step = 0; /* pushed now */
    if (h->io_on) {
      /* the sender thread sends this step's gradients (copied here) and
       * STEP_INC while the next step runs */
      rc = loom__ps_worker_exchange_prepare(h->w, res, 1, s2);
      h->t_xchg += loom__mono_secs() - t1;
      h->nsteps++;
      if (rc != LOOM_OK) return step_failed(h, ctx, rc, s2, st);
      h->xchg_pending = h->inc_pending = 1;
      io_start(h);
      loom_status_free(s2);
      if (g_term) loom_hook_context_request_stop(ctx); /* a signal: this step was the last */
      return LOOM_OK;
    }
    rc = loom__ps_worker_exchange_send(h->w, res, s2);
    if (rc == LOOM_OK) h->xchg_pending = 1;
  } else {
    /* this step's reservation reply arrived during this run */
    rc = reserve_step(h, s2);
    t1 = loom__mono_secs();
    h->t_inc += t1 - t0;
    if (rc != LOOM_OK) return step_failed(h, ctx, rc, s2, st);
    if (h->refused) {
      loom_status_free(s2);
      return stop_refused(h, ctx, st);
    }
    h->have_step = 0; /* pushed now */
    rc = loom__ps_worker_exchange(h->w, res, s2);
  }
  h->t_xchg += loom__mono_secs() - t1;
  h->nsteps++;
  if (rc == LOOM_OK) rc = inc_send(h, s2);
  if (rc != LOOM_OK) return step_failed(h, ctx, rc, s2, st);
  loom_status_free(s2);
  if (g_term) loom_hook_context_request_stop(ctx); /* a signal: this step was the last */
  return LOOM_OK;
}

/* The last increment's reply (the final global step), at the end. */
static loom_code ph_end(void *self, loom_session *s, loom_status *st) {
  (void)s;
  (void)st;
  ps_hook *h = self;
  loom_status *s2 = loom_status_new();
  if (xchg_flush(h, s2) != LOOM_OK)
    jlog(h->j, LOOM_LOG_WARN, "the last %s: %s", h->overlap ? "exchange's replies" : "reservation reply",
         loom_status_message(s2));
  /* a granted step this trainer will not push goes back, so the global step counts pushed steps */
  if (h->have_step && loom_ps_step_inc(loom_ps_cluster_client(h->cl, 0), -1, &h->gs, s2) == LOOM_OK)
    h->have_step = 0;
  loom_status_free(s2);
  return LOOM_OK;
}

static void ph_destroy(void *self) {
  ps_hook *h = self;
  if (h->io_on) {
    pthread_mutex_lock(&h->io_mu);
    while (h->io_busy) pthread_cond_wait(&h->io_cv, &h->io_mu);
    h->io_quit = 1;
    pthread_cond_broadcast(&h->io_cv);
    pthread_mutex_unlock(&h->io_mu);
    pthread_join(h->io_th, NULL);
    pthread_mutex_destroy(&h->io_mu);
    pthread_cond_destroy(&h->io_cv);
  }
  loom_status_free(h->io_st);
  loom_ps_worker_free(h->w);
  loom__ps_rules_free(h->rules);
  loom_tensor_free(h->gs_t);
  loom__free(h);
}

/* ---- the chief's PS-side checkpoint listener ---- */
typedef struct ps_saver {
  job *j;
  ps_hook *h;
  int keep;
  int64_t *steps;
  int n;
} ps_saver;

static void remove_ps_ckpt(const job *j, int64_t step) {
  char p[4200];
  snprintf(p, sizeof p, "%s/ps/model.ckpt-%lld", j->model_dir, (long long)step);
  remove(p);
  for (int i = 0; i < j->num_ps; i++) {
    snprintf(p, sizeof p, "%s/ps/model.ckpt-%lld.ps-%d-of-%d", j->model_dir, (long long)step, i, j->num_ps);
    remove(p);
  }
}

/* A PS exchange around a checkpoint failed with s2's error (freed here): log what (`what` takes the
 * step) and why, then reconnect as after any lost PS. */
static loom_code saver_recover(ps_saver *v, loom_status *s2, const char *what, int64_t step, loom_status *st) {
  char why[600], head[200];
  snprintf(why, sizeof why, "%s", loom_status_message(s2));
  loom_status_free(s2);
  snprintf(head, sizeof head, what, (long long)step);
  jlog(v->j, LOOM_LOG_WARN, "%s: %s", head, why);
  return recover(v->h, why, st);
}

static loom_code pss_after(void *self, loom_session *s, int64_t step, int *stop, loom_status *st) {
  (void)s;
  (void)stop;
  ps_saver *v = self;
  if (v->h->done) return LOOM_OK;
  loom_status *s2 = loom_status_new();
  loom_code rc = xchg_flush(v->h, s2); /* ps:0's connection must be in step */
  /* the next step's reservation, granted already, is not in the values saved: it goes back first, so
   * the PS-side checkpoint's global step is the step its values are after (the next run reserves again) */
  if (rc == LOOM_OK && v->h->have_step) {
    rc = loom_ps_step_inc(loom_ps_cluster_client(v->h->cl, 0), -1, &v->h->gs, s2);
    if (rc == LOOM_OK) v->h->have_step = 0;
  }
  if (rc == LOOM_OK) rc = loom_ps_cluster_save(v->h->cl, v->j->model_dir, "ps", step, s2);
  if (rc != LOOM_OK) /* a PS lost while saving: reconnect; the next save catches up */
    return saver_recover(v, s2, "PS-side checkpoint of step %lld failed", step, st);
  loom_status_free(s2);
  if (v->keep > 0) {
    if (v->n == v->keep) {
      remove_ps_ckpt(v->j, v->steps[0]);
      memmove(v->steps, v->steps + 1, sizeof *v->steps * (size_t)(v->n - 1));
      v->n--;
    }
    v->steps[v->n++] = step;
  }
  return LOOM_OK;
}

static loom_code pss_end(void *self, loom_session *s, int64_t step, loom_status *st) {
  (void)self;
  (void)s;
  (void)step;
  (void)st;
  return LOOM_OK;
}
/* The update rules' state the PS holds (optimizer slots, Adam's beta powers) into the session's slot
 * variables, so that model.ckpt-<step> holds what local training's would. */
static loom_code pull_slots(ps_hook *h, loom_session *s, loom_status *st) {
  int n = loom_ps_placement_num_vars(h->p);
  loom_code rc = LOOM_OK;
  for (int i = 0; i < n && !rc && h->rules; i++) {
    loom_variable *sv[3], *b1, *b2;
    int ns = loom__ps_rules_slots(h->rules, i, sv, &b1, &b2);
    float p1 = 0, p2 = 0;
    for (int k = 0; k < ns && !rc; k++) {
      int64_t dims[LOOM_MAX_DIMS];
      int nd = loom_variable_dims(sv[k], dims);
      loom_tensor *t = loom_tensor_new(LOOM_F32, nd, dims, st);
      rc = t ? loom_ps_cluster_pull_slot(h->cl, i, k, loom_tensor_data(t), &p1, &p2, st) : LOOM_RESOURCE_EXHAUSTED;
      if (!rc) rc = loom_session_assign_variable(s, loom_variable_name(sv[k]), t, st);
      loom_tensor_free(t);
    }
    for (int q = 0; q < 2 && !rc && ns && b1 && b2; q++) {
      loom_tensor *t = loom_tensor_new(LOOM_F32, 0, NULL, st);
      if (!t) return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
      *(float *)loom_tensor_data(t) = q ? p2 : p1;
      rc = loom_session_assign_variable(s, loom_variable_name(q ? b2 : b1), t, st);
      loom_tensor_free(t);
    }
  }
  return rc;
}

/* Before the saver reads the session: overlap's update of the step being saved taken in (model.ckpt-<step>
 * holds the values after step <step>, as without overlap), and the update rules' state pulled from the PS. */
static loom_code pss_before(void *self, loom_session *s, int64_t step, loom_status *st) {
  ps_saver *v = self;
  if (v->h->done) return LOOM_OK;
  loom_status *s2 = loom_status_new();
  loom_code rc = xchg_flush(v->h, s2);
  if (rc == LOOM_OK) rc = pull_slots(v->h, s, s2);
  if (rc != LOOM_OK) return saver_recover(v, s2, "the update rules' state of step %lld before its checkpoint", step, st);
  loom_status_free(s2);
  return LOOM_OK;
}
static const loom_checkpoint_listener ps_saver_listener = {NULL, pss_before, pss_after, pss_end};


static loom_ps_placement *make_placement(job *j, loom_graph *g, loom_status *st) {
  int n = loom_ps_var_specs(g, NULL, 0);
  loom_ps_var_spec *specs = loom__calloc((size_t)(n ? n : 1), sizeof *specs);
  if (!specs) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  loom_ps_var_specs(g, specs, n);
  loom_ps_placement *p = loom_ps_placement_new(n, specs, j->num_ps, j->o.strategy, j->o.min_slice_bytes, st);
  loom__free(specs);
  if (!p && loom_status_code(st) == LOOM_OK) loom_status_set(st, LOOM_INTERNAL, "placement failed");
  if (!p && loom_status_code(st) != LOOM_INVALID_ARGUMENT) /* a placement that cannot be made is permanent */
    loom_status_set(st, LOOM_FAILED_PRECONDITION, "placement: %s", loom_status_message(st));
  return p;
}

static loom_code shutdown_ps(job *j, loom_ps_cluster *cl, loom_status *st) {
  (void)st;
  for (int i = 0; i < j->num_ps; i++) {
    loom_ps_client *c = loom_ps_cluster_client(cl, i);
    loom_status *s2 = loom_status_new();
    if (c && loom_ps_shutdown(c, s2) != LOOM_OK)
      jlog(j, LOOM_LOG_WARN, "SHUTDOWN of ps:%d: %s (it exits on its idle deadline or SIGTERM)", i,
           loom_status_message(s2));
    loom_status_free(s2);
  }
  return LOOM_OK;
}

/* The chief, at the end of a job (the done file written, the PS tasks
 * still up): waits for every live worker to report its end, so that no
 * worker meets a PS that is gone. A worker is awaited while its beat file
 * says it runs (this host: its pid; elsewhere: a beat younger than
 * BEAT_STALE_S); never started, gone, or past peer_lost_deadline_s: not. */
static void wait_workers(job *j, const struct timespec *since, int64_t gs) {
  int nw = loom_tf_config_num_tasks(j->tc, "worker");
  if (nw <= 0) return;
  waiter w;
  waiter_init(&w, j, j->o.peer_lost_deadline_s);
  char *said = loom__calloc((size_t)nw, 1); /* a worker's end or loss already logged */
  for (;;) {
    char what[512] = "", why[600] = "";
    size_t k = 0;
    int awaited = 0;
    for (int i = 0; i < nw; i++) {
      char p[4200], b[800], gone[64];
      struct stat sb;
      snprintf(p, sizeof p, "%s/worker-%d.end", j->rdv, i);
      if (stat(p, &sb) == 0 && !ts_before(&sb.st_mtim, since)) {
        if (said && !said[i]) {
          char step[32] = "?", rcs[16] = "?";
          if (read_small(p, b, sizeof b)) {
            kv_get(b, "step", step, sizeof step);
            kv_get(b, "rc", rcs, sizeof rcs);
          }
          jlog(j, LOOM_LOG_INFO, "worker:%d finished (global step %s, status %s)", i, step, rcs);
          said[i] = 1;
        }
        continue;
      }
      snprintf(p, sizeof p, "%s/worker-%d.beat", j->rdv, i);
      const char *lost = NULL;
      if (stat(p, &sb) != 0 || ts_before(&sb.st_mtim, since))
        lost = "not running since this chief started (no heartbeat)";
      else if (read_small(p, b, sizeof b) && writer_gone(b, gone, sizeof gone))
        lost = gone;
      else if (difftime(time(NULL), sb.st_mtime) > BEAT_STALE_S)
        lost = "its heartbeat is older than 30 s";
      if (lost) {
        if (said && !said[i]) {
          jlog(j, LOOM_LOG_INFO, "worker:%d is not running (%s); not waiting for it", i, lost);
          said[i] = 1;
        }
        continue;
      }
      awaited++;
      if (k < sizeof what - 16) k += (size_t)snprintf(what + k, sizeof what - k, "%sworker:%d", k ? ", " : "", i);
    }
    if (!awaited) break;
    snprintf(what + k, sizeof what - k, " to finish");
    snprintf(why, sizeof why, "the job is done at global step %lld; the PS tasks stay up until then", (long long)gs);
    loom_status *s2 = loom_status_new();
    loom_code rc = waiter_wait(&w, what, why, s2);
    if (rc != LOOM_OK || g_term) {
      jlog(j, LOOM_LOG_WARN, "%s; shutting the PS tasks down anyway", loom_status_message(s2));
      loom_status_free(s2);
      break;
    }
    loom_status_free(s2);
  }
  loom__free(said);
}

/* ---------------------------------------------- the strategy (trainers) */
typedef struct ps_strategy {
  loom__strategy base;
  job *j;
  struct timespec started;
  double t0;
  loom_ps_placement *p;
  loom_ps_cluster *cl;
  ps_hook *h;       /* owned here (its loom_hook has no destroy: the loop frees the hook before end) */
  int64_t max_steps; /* each step is reserved at ps:0 up to this global step (loom_ps_reserve_step) */
  ps_saver saver;
} ps_strategy;

static loom_code pst_begin(loom__strategy *base, loom_graph *g, loom_node *train_op, loom_output loss,
                           loom_variable *global_step, loom__strategy_plan *plan, loom_status *st) {
  ps_strategy *ps = (ps_strategy *)base;
  job *j = ps->j;
  plan->run_train_op = 0; /* the PS applies the updates */
  plan->is_chief = j->is_chief;
  plan->restore = j->is_chief; /* the chief's checkpoint seeds the PS; the others pull */
  if (!(ps->p = make_placement(j, g, st))) return loom_status_code(st);
  j->phash = loom_ps_placement_hash(ps->p);
  jlog(j, LOOM_LOG_INFO, "%d variables placed on %d PS task(s), placement hash %016llx",
       loom_ps_placement_num_vars(ps->p), j->num_ps, (unsigned long long)j->phash);
  /* the model's own update rules, read before anything connects: a train op the PS cannot reproduce
   * fails the job here */
  loom_ps_rules *rules = NULL;
  if (!j->o.job_optimizer && !(rules = loom__ps_rules_new(g, train_op, global_step, ps->p, st)))
    return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
  if (!(ps->cl = connect_all(j, ps->p, j->o.start_deadline_s, st))) {
    loom__ps_rules_free(rules);
    if (j->ended_before) /* pst_end: nothing to do, exit 0 */
      return loom_status_set(st, LOOM_CANCELLED, "job %s: the chief finished the job before this worker connected",
                             j->name);
    return loom_status_code(st) ? loom_status_code(st) : LOOM_UNAVAILABLE;
  }
  ps_hook *h = loom__calloc(1, sizeof *h);
  if (h) h->gs_t = loom_tensor_new(LOOM_I64, 0, NULL, st);
  static const loom_hook_ops ph_ops = {NULL, ph_acs, ph_before, ph_after, ph_end, NULL};
  loom_hook *phk = h && h->gs_t ? loom_hook_new(&ph_ops, h, "PSHook") : NULL;
  if (!phk) {
    loom__ps_rules_free(rules);
    if (h) loom_tensor_free(h->gs_t);
    loom__free(h);
    return loom_status_code(st) ? loom_status_code(st) : loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  h->j = j;
  h->p = ps->p;
  h->cl = ps->cl;
  h->loss = loss;
  h->rules = rules;
  h->gs_var = global_step;
  h->overlap = j->o.overlap_comm != 0;
  h->max_steps = ps->max_steps;
  ps->h = h;
  ps->saver.h = h;
  plan->hook = phk; /* first: the others see the PS's global step */
  plan->ntargets = loom__ps_rules_local_updates(rules, &plan->targets); /* e.g. batch norm's moving averages */
  if (j->is_chief) {
    ps->saver.steps = loom__calloc((size_t)(ps->saver.keep > 0 ? ps->saver.keep : 1), sizeof *ps->saver.steps);
    if (!ps->saver.steps) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    plan->listener = &ps_saver_listener; /* the PS shards first, at the same step */
    plan->listener_self = &ps->saver;
  }
  ps->t0 = loom__mono_secs();
  return LOOM_OK;
}

static loom_code pst_end(loom__strategy *base, int began, loom_code rc, loom_status *st) {
  ps_strategy *ps = (ps_strategy *)base;
  job *j = ps->j;
  ps_hook *h = ps->h;
  int64_t final_gs = h ? h->gs : -1;
  if (rc == LOOM_CANCELLED && j->ended_before) { /* connect_all: the job ended before this worker connected */
    if (st) loom_status_clear(st);
    rc = LOOM_OK;
    final_gs = done_step(j);
    jlog(j, LOOM_LOG_INFO, "the chief finished the job at global step %lld before this worker connected "
         "(model_dir/rendezvous/done); nothing to do", (long long)final_gs);
  }
  if (rc == LOOM_CANCELLED && loom__job_signal_count()) { /* a signal while waiting: a clean stop */
    jlog(j, LOOM_LOG_INFO, "stopped by a signal while waiting (%s)", loom_status_message(st));
    if (st) loom_status_clear(st);
    rc = LOOM_OK;
  }
  if (began && h) {
    double dt = loom__mono_secs() - ps->t0;
    jlog(j, rc ? LOOM_LOG_ERROR : LOOM_LOG_INFO,
         "%lld local steps in %.2f s, global step %lld -> %lld, %lld reconnect(s)%s%s", (long long)h->nsteps, dt,
         (long long)h->gs_start, (long long)h->gs, (long long)h->reconnects, rc ? ", failed" : "",
         loom__job_signal_count() ? ", stopped by a signal" : "");
    if (h->nsteps > 0) { /* where a step's time goes (stderr, for benchmarks) */
      double k = 1e3 / (double)h->nsteps;
      fprintf(stderr, "job %s: per step: run_ms=%.3f exchange_ms=%.3f step_inc_ms=%.3f (reply wait) steps=%lld "
              "ps_shm=%d/%d\n", j->name, h->t_run * k, h->t_xchg * k, h->t_inc * k, (long long)h->nsteps,
              h->cl ? loom__ps_cluster_shm_attached(h->cl) : 0, j->num_ps);
    }
    /* the end of the job (not after a signal: the PS tasks stay up for the trainers' restart) */
    if (rc == LOOM_OK && j->is_chief && !loom__job_signal_count()) {
      char text[64], path[4200];
      snprintf(text, sizeof text, "%lld\n", (long long)h->gs);
      snprintf(path, sizeof path, "%s/done", j->rdv);
      rc = write_atomic(path, text, st);
      if (rc == LOOM_OK && !h->done) {
        wait_workers(j, &ps->started, h->gs);
        shutdown_ps(j, ps->cl, st);
      }
      if (rc == LOOM_OK) jlog(j, LOOM_LOG_INFO, "job finished at global step %lld; PS tasks shut down", (long long)h->gs);
    }
  }
  trainer_end(j, final_gs, rc);
  return rc;
}

static const loom__strategy_ops PS_STRATEGY = {LOOM__STRATEGY_PS, "parameter_server", pst_begin, pst_end};

loom__strategy *loom__ps_strategy_new(loom__job *j, int64_t max_steps, int keep_checkpoint_max, loom_status *st) {
  ps_strategy *ps = loom__calloc(1, sizeof *ps);
  if (!ps) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  ps->base.ops = &PS_STRATEGY;
  ps->j = j;
  ps->max_steps = max_steps;
  ps->saver.j = j;
  ps->saver.keep = keep_checkpoint_max;
  clock_gettime(CLOCK_REALTIME, &ps->started);
  ps->started.tv_sec -= 1; /* file times may be a clock tick coarser than CLOCK_REALTIME */
  trainer_beat(j, 1);
  if (j->is_chief) { /* a new run of the job: the previous run's end marker goes */
    char p[4200];
    snprintf(p, sizeof p, "%s/done", j->rdv);
    remove(p);
  }
  return &ps->base;
}

void loom__ps_strategy_free(loom__strategy *base) {
  ps_strategy *ps = (ps_strategy *)base;
  if (!ps) return;
  if (ps->h) ph_destroy(ps->h);
  loom__free(ps->saver.steps);
  loom_ps_cluster_free(ps->cl);
  loom_ps_placement_free(ps->p);
  loom__free(ps);
}

/* --------------------------------------------------------- the PS role */
/* Restores the newest complete state of this PS's shard (ps_restore.c) through a loopback
 * connection to itself. */
static loom_code ps_restore_self(job *j, const loom_ps_placement *p, const char *host, int port, const char *self_dir,
                                 loom_status *st) {
  loom__ps_restore_in in;
  memset(&in, 0, sizeof in);
  in.model_dir = j->model_dir;
  in.p = p;
  in.ps_index = j->index;
  in.num_ps = j->num_ps;
  in.self_dir = self_dir;
  in.model_rules = !j->o.job_optimizer;
  in.opt = j->o.optimizer;
  in.hyper = j->o.hyper;
  in.co = connect_opts(j);
  in.co.host = host;
  in.co.port = port;
  in.co.placement_hash = loom_ps_placement_hash(p);
  in.co.num_ps = j->num_ps;
  in.co.num_vars = loom_ps_placement_num_vars(p);
  in.co.shm = 1;
  char name[64];
  snprintf(name, sizeof name, "job %s", j->name);
  in.name = name;
  return loom__ps_restore_newest(&in, NULL, st);
}

loom_code loom__job_serve_ps(loom__job *j, loom_graph *g, loom_status *st) {
  loom_code rc = LOOM_OK;
  loom_ps_placement *p = make_placement(j, g, st);
  if (!p) return loom_status_code(st);
  const char *a = loom_tf_config_address(j->tc, "ps", j->index);
  char host[256];
  int port = 0;
  if (!a || !split_addr(a, host, sizeof host, &port)) {
    loom_ps_placement_free(p);
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: ps:%d address '%s' is not host:port", j->index,
                           a ? a : "(none)");
  }
  const char *bind = j->o.bind_host ? j->o.bind_host : getenv("LOOM_JOB_BIND");
  if (!bind || !*bind) bind = !strcmp(host, "localhost") ? "127.0.0.1" : host;
  loom_ps_server_options so = loom_ps_server_options_default();
  so.host = bind;
  so.port = port;
  so.token = j->token;
  so.token_len = j->token_len;
  so.placement_hash = loom_ps_placement_hash(p);
  so.num_ps = j->num_ps;
  so.num_vars = loom_ps_placement_num_vars(p);
  so.idle_exit_s = j->o.ps_idle_exit_s;
  so.ps_index = j->index;
  so.model_dir = j->model_dir;
  so.busy_poll_us = busy_poll_env();
  char self_dir[64];
  snprintf(self_dir, sizeof self_dir, "ps/self-%016llx", (unsigned long long)so.placement_hash);
  so.chief_lost_save_s = j->o.ps_chief_lost_save_s;
  so.self_save_dir = self_dir;
  struct sigaction sa, old_term, old_int;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  g_term = 0;
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGINT, &sa, &old_int);
  /* SIGPIPE: the server's threads block it (ps_server.c), so a trainer that goes away while
   * its reply is being written cannot kill this PS. */
  loom_ps_server *srv = loom_ps_server_start(&so, st);
  if (!srv) {
    rc = loom_status_code(st);
    if (rc == LOOM_OK) rc = LOOM_INTERNAL;
    if (rc == LOOM_INTERNAL || rc == LOOM_UNKNOWN) rc = loom_status_set(st, LOOM_UNAVAILABLE, "%s", loom_status_message(st));
    goto out;
  }
  int bound = loom_ps_server_port(srv);
  const char *self = !strcmp(bind, "0.0.0.0") ? "127.0.0.1" : bind;
  if ((rc = ps_restore_self(j, p, self, bound, self_dir, st)) != LOOM_OK) goto out;
  {
    char path[4200], text[800], hn[256] = "";
    const char *pub = bind;
    if (!strcmp(bind, "0.0.0.0")) pub = gethostname(hn, sizeof hn) == 0 && hn[0] ? hn : "127.0.0.1";
    snprintf(path, sizeof path, "%s/ps-%d.addr", j->rdv, j->index);
    char me[400];
    self_ident(me, sizeof me);
    /* "host:port pid" first (what older readers take), then the placement, this PS's instance id
     * (trainers compare it with the id the PS sends in WELCOME: resolve_ps, instances_ok) and the
     * writer's identity (stale-file checks, resolve_ps) */
    snprintf(text, sizeof text, "%s:%d %ld placement=%016llx instance=%016llx %s\n", pub, bound, (long)getpid(),
             (unsigned long long)so.placement_hash, (unsigned long long)loom_ps_server_instance(srv), me);
    if ((rc = write_atomic(path, text, st)) != LOOM_OK) goto out;
  }
  jlog(j, LOOM_LOG_INFO, "serving on %s:%d (%d variables of the placement)", bind, bound, so.num_vars);
  double t0 = loom__mono_secs(), last = t0;
  while (!g_term && !loom_ps_server_wait(srv, 0.2)) {
    double now = loom__mono_secs();
    if (now - last >= j->o.diag_every_s) {
      loom_ps_server_stats s;
      loom_ps_server_get_stats(srv, &s);
      jlog(j, LOOM_LOG_INFO, "serving on %s:%d, %.0f s up, %lld connections, %lld updates; until SHUTDOWN%s or SIGTERM",
           bind, bound, now - t0, (long long)s.connections, (long long)s.updates,
           j->o.ps_idle_exit_s > 0 ? ", the idle deadline" : "");
      last = now;
    }
  }
  int why = g_term ? 0 : loom_ps_server_stop_reason(srv);
  jlog(j, LOOM_LOG_INFO, "stopping (%s)", g_term ? "signal" : why == 1 ? "SHUTDOWN" : "idle deadline");
  if (why == 2 && done_step(j) < 0) /* the trainers are gone and the job did not finish: restart me */
    rc = loom_status_set(st, LOOM_UNAVAILABLE,
                         "job %s: no connection for %.0f s (ps_idle_exit_s) and the job has not finished (no "
                         "model_dir/rendezvous/done): exiting with the retryable code",
                         j->name, j->o.ps_idle_exit_s);
out:
  loom_ps_server_stop(srv);
  sigaction(SIGTERM, &old_term, NULL);
  sigaction(SIGINT, &old_int, NULL);
  loom_ps_placement_free(p);
  return rc;
}

/* ------------------------------------------------------------ the job */
static int parse_opt_name(const char *s, loom_ps_optimizer *o, float *hyper) {
  static const struct {
    const char *n;
    loom_ps_optimizer o;
    float h[6];
  } t[] = {{"sgd", LOOM_PS_SGD, {0}},
           {"momentum", LOOM_PS_MOMENTUM, {0, 0.9f, 0}},
           {"adagrad", LOOM_PS_ADAGRAD, {0, 0.1f}},
           {"adam", LOOM_PS_ADAM, {0, 0.9f, 0.999f, 1e-8f}},
           {"ftrl", LOOM_PS_FTRL, {0, -0.5f, 0.1f, 0, 0, 0}},
           {"rmsprop", LOOM_PS_RMSPROP, {0, 0.9f, 0, 1e-10f, 0, 1.0f}},
           {"adadelta", LOOM_PS_ADADELTA, {0, 0.95f, 1e-8f}}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (!strcmp(s, t[i].n)) {
      *o = t[i].o;
      float lr = hyper[0];
      memset(hyper, 0, 8 * sizeof(float));
      memcpy(hyper, t[i].h, sizeof t[i].h);
      hyper[0] = lr;
      return 1;
    }
  return 0;
}


loom__job *loom__job_new(const loom_job_options *opt, const loom_params *params, const char *model_dir,
                         loom_status *st) {
  job *j = loom__calloc(1, sizeof *j);
  if (!j) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  snprintf(j->model_dir, sizeof j->model_dir, "%s", model_dir ? model_dir : ".");
  j->o = loom_job_options_default();
  loom_code rc = LOOM_OK;
  if (opt) {
    rc = LOOM__OPTS_TAKE(&j->o, opt, "loom_run_job", loom_job_options, st);
  } else {
    double lr = loom_params_get_double(params, "learning_rate", -1);
    if (lr > 0) j->o.hyper[0] = (float)lr;
    j->o.overlap_comm = loom_params_get_int(params, "overlap_comm", 0) != 0;
    const char *on = loom_params_get(params, "ps_optimizer");
    j->o.job_optimizer = on != NULL;
    if (on && !parse_opt_name(on, &j->o.optimizer, j->o.hyper))
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "params ps_optimizer '%s' is not one of sgd, momentum, adagrad, adam, ftrl, rmsprop, "
                           "adadelta", on);
  }
  if (!rc && (!(j->o.start_deadline_s > 0) || !(j->o.peer_lost_deadline_s > 0) || !(j->o.diag_every_s > 0) ||
              !(j->o.eval_poll_s > 0) || !(j->o.eval_deadline_s > 0) || !(j->o.ps_idle_exit_s >= 0) ||
              !(j->o.ps_chief_lost_save_s >= 0)))
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                         "loom_job_options: deadlines, diag_every_s and eval_poll_s must be > 0, ps_idle_exit_s and "
                         "ps_chief_lost_save_s >= 0");
  if (!rc && !(j->tc = loom_tf_config_parse(j->o.tf_config, st))) rc = LOOM_INVALID_ARGUMENT;
  if (rc) {
    loom__job_free(j);
    return NULL;
  }
  snprintf(j->type, sizeof j->type, "%s", loom_tf_config_task_type(j->tc));
  j->index = loom_tf_config_task_id(j->tc);
  j->is_chief = loom_tf_config_is_chief(j->tc);
  j->num_ps = loom_tf_config_num_tasks(j->tc, "ps");
  j->num_workers = loom_tf_config_num_worker_replicas(j->tc);
  snprintf(j->name, sizeof j->name, "%s:%d", j->type, j->index);
  j->t_start = time(NULL) - 1; /* file times may be a clock tick coarser */
  if (strcmp(j->type, "evaluator") && j->num_ps < 1)
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "TF_CONFIG: task %s in a cluster without a \"ps\" job", j->name);
  j->token = j->o.token;
  j->token_len = j->o.token_len;
  if (!j->token) {
    const char *t = getenv("LOOM_PS_TOKEN");
    if (t && *t) j->token = t, j->token_len = strlen(t);
  }
  snprintf(j->rdv, sizeof j->rdv, "%s/rendezvous", j->model_dir);
  if (!rc) rc = loom__mkdir_p(j->rdv, st);
  size_t n = (size_t)(j->num_ps ? j->num_ps : 1);
  j->host = loom__calloc(n, sizeof *j->host);
  j->port = loom__calloc(n, sizeof *j->port);
  j->stale = loom__calloc(n, sizeof *j->stale);
  j->inst = loom__calloc(n, sizeof *j->inst);
  if (!rc && (!j->host || !j->port || !j->stale || !j->inst))
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  if (rc) {
    loom__job_log_failure(j, rc, st);
    loom__job_free(j);
    return NULL;
  }
  return j;
}

void loom__job_free(loom__job *j) {
  if (!j) return;
  job_free(j);
  loom__free(j);
}

const char *loom__job_type(const loom__job *j) { return j->type; }
const char *loom__job_name(const loom__job *j) { return j->name; }
int loom__job_is_chief(const loom__job *j) { return j->is_chief; }
int loom__job_num_ps(const loom__job *j) { return j->num_ps; }
int loom__job_num_workers(const loom__job *j) { return j->num_workers; }
const loom_tf_config *loom__job_tf_config(const loom__job *j) { return j->tc; }
const loom_job_options *loom__job_options(const loom__job *j) { return &j->o; }

void loom__job_log_failure(const loom__job *j, loom_code rc, loom_status *st) {
  if (rc == LOOM_OK) return;
  const char *m = loom_status_message(st);
  if (!strncmp(m, "job ", 4))
    loom__log(LOOM_LOG_ERROR, "%s (exit code %d)", m, loom_job_exit_code(rc));
  else
    loom__log(LOOM_LOG_ERROR, "job %s: %s (exit code %d)", j && j->name[0] ? j->name : "?", m, loom_job_exit_code(rc));
}

void loom__job_log(const loom__job *j, loom_log_level lvl, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  jlog(j, lvl, "%s", msg);
}

void loom__job_sleep(double s) { sleep_s(s); }

int64_t loom__job_done_step_since(const loom__job *j, time_t not_before) { return done_step_since(j, not_before); }

void loom__job_waiter_init(loom__job_waiter *w, const loom__job *j, double deadline_s) { waiter_init(w, j, deadline_s); }

loom_code loom__job_waiter_wait(loom__job_waiter *w, const char *what, const char *why, loom_status *st) {
  return waiter_wait(w, what, why, st);
}
