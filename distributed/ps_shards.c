/* distributed/ps_shards.c - the shard threads: each takes its jobs from a
 * lock-free stack in arrival order, runs the handler of each, holds SYNC
 * requests until their step or deadline, and hands the finished jobs back to
 * the loop thread. */
#include "base/pool.h"
#include "distributed/ps_server_impl.h"

void loom__pss_shard_process(shard *sh, job *j) {
  loom_ps_server *s = sh->srv;
  if (j->kind == JOB_BARRIER) {
    loom__pss_do_barrier(s, sh, j);
    return;
  }
  int held = 0;
  reply *r = NULL;
  switch (j->h.opcode) {
  case LOOM_PS_INIT_VAR: r = loom__pss_handle_init(s, sh, j); break;
  case LOOM_PS_PULL: {
    reply *err = NULL;
    psvar *v = loom__pss_req_var(s, j, 16, &err);
    if (!v) r = err;
    else if (j->h.body_len != 16) r = JERR(LOOM_INVALID_ARGUMENT, 1, "PULL body of %u bytes (expected 16)", j->h.body_len);
    else r = loom__pss_value_reply(s, j, v, loom__ps_get64(j->body + 8), 0);
    break;
  }
  case LOOM_PS_PUSH: r = loom__pss_handle_push(s, sh, j, 0, &held); break;
  case LOOM_PS_PUSHPULL:
    if (j->dup) { /* re-sent, applied once already (the duplicate window): the current value, nothing applied */
      reply *err = NULL;
      psvar *v = loom__pss_req_var(s, j, 16, &err);
      r = v ? loom__pss_value_reply(s, j, v, UINT64_MAX, (j->dup_flags & LOOM_PS_FLAG_STALE) | LOOM_PS_FLAG_DUPLICATE) : err;
      break;
    }
    r = loom__pss_handle_push(s, sh, j, 1, &held);
    break;
  case LOOM_PS_PULL_ROWS:
  case LOOM_PS_PULL_ROWS_AT:
    if (loom__pss_rows_hold(s, sh, j)) return;
    r = loom__pss_handle_rows(s, sh, j, 0, j->h.opcode == LOOM_PS_PULL_ROWS_AT, NULL);
    break;
  case LOOM_PS_PUSH_ROWS: r = loom__pss_handle_rows(s, sh, j, 1, 0, &held); break;
  case LOOM_PS_PUSHPULL_PART: r = loom__pss_handle_part(s, sh, j); break;
  case LOOM_PS_PUSH_ROWS_AT: r = loom__pss_handle_rows(s, sh, j, 1, 1, &held); break;
  case LOOM_PS_STEP_INC: r = loom__pss_handle_step_inc(s, j); break;
  case LOOM_PS_PULL_SLOT: r = loom__pss_handle_pull_slot(s, j); break;
  case LOOM_PS_SHM_PULL:
  case LOOM_PS_SHM_PUSH:
  case LOOM_PS_SHM_PUSHPULL: r = loom__pss_handle_shm(s, sh, j, &held); break;
  default: r = JERR(LOOM_UNIMPLEMENTED, 1, "unknown opcode %u", j->h.opcode);
  }
  if (held) return;
  uint16_t op = j->h.opcode;
  if (sh->waiters && j->h.body_len >= 4 && !j->dup && (loom__pss_push_opcode(op) || op == LOOM_PS_PUSHPULL_PART)) {
    uint32_t id = loom__ps_get32(j->body); /* a PULL_ROWS_AT may wait for the version this push (or its last
                                              part: earlier parts leave the version as it was) made */
    psvar *v = loom__pss_var_get(s, id);
    if (v) loom__pss_wake_waiters(s, sh, id, v);
  }
  j->out = r;
  loom__pss_complete(s, j);
}

static void shard_deadlines(shard *sh) {
  loom_ps_server *s = sh->srv;
  uint64_t now = now_ms();
  double to = s->o.sync_timeout_s > 0 ? s->o.sync_timeout_s : 30.0;
  for (job **pp = &sh->waiters; *pp;) {
    job *j = *pp;
    if (now >= j->deadline_ms) {
      *pp = j->next;
      STAT_ADD(s, sync_timeouts, 1);
      j->out = JERR(LOOM_DEADLINE_EXCEEDED, 0, "SYNC: step %llu of var %u not complete within %.1f s",
                    (unsigned long long)j->wait_version + 1, j->wait_var, to);
      loom__pss_complete(s, j);
    } else {
      pp = &j->next;
    }
  }
}

/* The shard thread takes the variables; the loop holds them only for one small request at a time. */
static void shard_acquire(shard *sh) {
  for (int spins = 0;; spins++) {
    int free_ = 0;
    if (__atomic_compare_exchange_n(&sh->owner, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    if (spins > 64) sched_yield();
  }
}

void *loom__pss_shard_main(void *arg) {
  shard *sh = arg;
  loom__set_ftz(); /* updates compute as a local session's kernels do: denormals flushed */
  int timed = 0; /* waiters to watch (read while owning the variables) */
  for (;;) {
    if (timed) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 50 * 1000000L;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      while (sem_timedwait(&sh->sem, &ts) != 0 && errno == EINTR) {
      }
    } else {
      while (sem_wait(&sh->sem) != 0 && errno == EINTR) {
      }
    }
    shard_acquire(sh); /* before taking: what the loop finds queued is always behind what it may run itself */
    for (job *l = loom__pss_stack_take(&sh->incoming); l;) {
      job *n = l->next;
      loom__pss_shard_process(sh, l);
      l = n;
    }
    if (sh->waiters) shard_deadlines(sh);
    timed = sh->waiters != NULL;
    __atomic_store_n(&sh->owner, 0, __ATOMIC_RELEASE);
    if (__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE) && !__atomic_load_n(&sh->incoming, __ATOMIC_ACQUIRE)) break;
  }
  return NULL;
}

void loom__pss_shard_post(shard *sh, job *j) {
  loom__pss_stack_push(&sh->incoming, j);
  sem_post(&sh->sem);
}
