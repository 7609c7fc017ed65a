/* distributed/ps_barrier.c - barriers (SAVE, RESTORE, SYNC STEP_INC):
 * every shard parks on its barrier job, the last to arrive does the work
 * (checkpoint file I/O, the global step), then all resume and answer. */
#include "distributed/ps_server_impl.h"

/* Runs on the last shard to reach the barrier; every other shard is parked. */
static void run_barrier(loom_ps_server *s, barrier *b) {
  if (b->kind == BAR_SYNC_STEP) { /* the number of aggregated steps applied */
    uint64_t m = UINT64_MAX;
    uint32_t end = loom__pss_vars_end(s);
    for (uint32_t i = 0; i < end; i++) {
      psvar *v = loom__pss_var_get(s, i);
      if (v && v->version < m) m = v->version;
    }
    b->global_step = m == UINT64_MAX ? 0 : (int64_t)m;
    __atomic_store_n(&s->global_step, b->global_step, __ATOMIC_RELAXED);
    return;
  }
  int save = b->kind == BAR_SAVE;
  loom_status *st = loom_status_new();
  char *slash = strrchr(b->path, '/');
  if (save && slash) {
    *slash = 0;
    if (loom__pss_mkdirs(b->path) != 0) {
      b->rc = LOOM_UNAVAILABLE;
      snprintf(b->msg, sizeof b->msg, "SAVE: cannot create %.400s: %s", b->path, strerror(errno));
      *slash = '/';
      loom_status_free(st);
      return;
    }
    *slash = '/';
  }
  int64_t pending = 0; /* SYNC contributions to steps not yet applied: a RESTORE discards them */
  for (uint32_t i = 0, end = save ? 0 : loom__pss_vars_end(s); i < end; i++) {
    psvar *v = loom__pss_var_get(s, i);
    if (v) pending += v->agg_count;
  }
  b->rc = save ? loom__pss_ckpt_save(s, b->path, st) : loom__pss_ckpt_restore(s, b->path, st);
  if (!save && !b->rc && pending) STAT_ADD(s, stale_dropped, pending);
  if (!b->rc) /* every shard is parked: the counter is exact, the shard now saved (or as restored) */
    __atomic_store_n(&s->updates_at_save, __atomic_load_n(&s->stats.updates, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  if (b->self && !b->rc) STAT_ADD(s, self_saves, 1);
  if (b->rc) {
    snprintf(b->msg, sizeof b->msg, "%s: %s", save ? "SAVE" : "RESTORE", loom_status_message(st));
  } else {
    b->digest = loom__pss_vars_digest(s, &b->nvars);
    loom__log(LOOM_LOG_INFO, "ps :%d: %s %s (%u variables, digest %016llx)%s", s->port, save ? "saved" : "restored",
              b->path, b->nvars, (unsigned long long)b->digest,
              b->self ? ": a save of its own" : "");
  }
  if (b->self && b->rc) loom__log(LOOM_LOG_WARN, "ps :%d: its own save failed: %s", s->port, b->msg);
  if (b->self) __atomic_store_n(&s->self_saving, 0, __ATOMIC_RELEASE);
  loom_status_free(st);
}

static reply *barrier_reply(loom_ps_server *s, job *j, barrier *b) {
  if (b->kind == BAR_SYNC_STEP) { /* a reservation ({k, limit}) is granted while the step is below its limit */
    uint8_t out[8];
    loom__ps_put64(out, (uint64_t)b->global_step);
    int refused = j->h.body_len == 16 && b->global_step >= (int64_t)loom__ps_get64(j->body + 8);
    return loom__pss_small_reply(j, out, 8, refused ? LOOM_PS_FLAG_REFUSED : 0);
  }
  if (b->rc) return JERR(b->rc, 0, "%s", b->msg);
  uint8_t out[16];
  loom__ps_put32(out, b->nvars);
  loom__ps_put32(out + 4, 0);
  loom__ps_put64(out + 8, b->digest);
  return loom__pss_small_reply(j, out, 16, 0);
}

/* A RESTORE replaced the shard's variables: every request it held (a SYNC
 * push that joined a step, a PULL_ROWS waiting for one, a PULL_ROWS_AT
 * waiting for a version) belonged to the state before it, whose partial
 * aggregation is gone; each is answered ABORTED so that its worker pulls the
 * restored values and pushes again (SYNC state is not checkpointed). */
static void abort_waiters(loom_ps_server *s, shard *sh) {
  while (sh->waiters) {
    job *j = sh->waiters;
    sh->waiters = j->next;
    j->out = JERR(LOOM_ABORTED, 0, "the PS was restored while this request waited for version %llu of var %u; "
                  "pull the restored values and push again", (unsigned long long)j->wait_version + 1, j->wait_var);
    loom__pss_complete(s, j);
  }
}

void loom__pss_do_barrier(loom_ps_server *s, shard *sh, job *j) {
  barrier *b = j->bar;
  pthread_mutex_lock(&b->mu);
  if (++b->arrived == b->n) {
    run_barrier(s, b);
    b->done = 1;
    pthread_cond_broadcast(&b->cv);
  } else {
    while (!b->done) pthread_cond_wait(&b->cv, &b->mu);
  }
  if (b->kind == BAR_RESTORE && !b->rc) abort_waiters(s, sh);
  if (j->c) j->out = barrier_reply(s, j, b);
  int last = --b->left == 0;
  pthread_mutex_unlock(&b->mu);
  if (last) {
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    loom__free(b);
  }
  j->bar = NULL;
  if (j->c) loom__pss_complete(s, j);
  else loom__free(j); /* an auxiliary job: no reply */
}
