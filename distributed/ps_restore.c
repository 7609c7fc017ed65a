/* distributed/ps_restore.c - a starting PS task restores the newest complete state of its shard
 * (ps_restore.h).
 *
 * Candidates, each a file in the job's model_dir:
 *  - the chief's PS-side checkpoint: the step named by model_dir/ps/checkpoint, this PS's shard
 *    model.ckpt-<S>.ps-<i>-of-<n> (values, optimizer slots, versions, ps:0's global step), checked
 *    after the restore against the digest the chief's manifest model.ckpt-<S> names;
 *  - the PS's own save (model_dir/<self_dir>/model.ckpt-0.ps-<i>-of-<n>: written by the PS when no
 *    chief was connected, or before an idle exit), same format;
 *  - the chief's model_dir/model.ckpt-<N> (the latest in model_dir/checkpoint) when it is complete
 *    for this shard (every variable of the shard present with its placement shape). Under the
 *    model's own update rules (model_rules, the default) the rules and their state (optimizer slots,
 *    Adam's beta powers, each variable's step) are read from the train op by the chief, which also
 *    restores model.ckpt-<N> and checkpoints the slots in it: when model.ckpt-<N> wins, the shard
 *    starts empty (ps:0 at global step 0) and the chief creates it from model.ckpt-<N> with each
 *    variable's rule and slot values (INIT_VAR's rule block) and sets ps:0's step to N. With the
 *    job-level optimizer override (job_optimizer) only SGD's shards (no slots) take model.ckpt-<N>:
 *    the PS creates them from its values (versions start at 0) and sets ps:0's global step to N.
 * The newest file wins (its modification time; at equal times the PS-side checkpoint, then the own
 * save, then model.ckpt). Every candidate travels through a loopback connection to the PS itself
 * (RESTORE, or INIT_VAR and STEP_INC), before the PS publishes its address. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "base/base.h"
#include "distributed/ps_client.h"
#include "distributed/ps_restore.h"
#include "loom/loom_checkpoint.h"

enum { SRC_NONE = -1, SRC_PS = 0, SRC_SELF = 1, SRC_CHIEF = 2 };

typedef struct cand {
  char path[4400]; /* the file restored (for SRC_CHIEF: the model.ckpt) */
  struct timespec mtime;
  int64_t step;
} cand;

static int file_time(const char *path, struct timespec *t) {
  struct stat sb;
  if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
  *t = sb.st_mtim;
  return 1;
}

/* The step of the latest checkpoint named by dir's state file, and its path; -1 when none. */
static int64_t latest_step(const char *dir, char *path, size_t cap) {
  loom_status *s2 = loom_status_new();
  loom_code rc = loom_latest_checkpoint(dir, path, cap, s2);
  loom_status_free(s2);
  if (rc != LOOM_OK) return -1;
  const char *k = strstr(path, "model.ckpt-");
  long long step = -1;
  if (!k || sscanf(k, "model.ckpt-%lld", &step) != 1 || step < 0) return -1;
  return step;
}

/* 1 when ckpt holds every variable of this PS's shards as float32 of the variable's shape. */
static int chief_ckpt_complete(const loom__ps_restore_in *in, const char *ckpt) {
  for (int i = 0; i < loom_ps_placement_num_shards(in->p); i++) {
    const loom_ps_shard *sh = loom_ps_placement_shard(in->p, i);
    if (sh->ps != in->ps_index) continue;
    const loom_ps_var_spec *v = loom_ps_placement_var(in->p, sh->var);
    loom_tensor *t = NULL;
    loom_status *s2 = loom_status_new();
    loom_code rc = loom_checkpoint_read_tensor(ckpt, v->name, &t, s2);
    loom_status_free(s2);
    int ok = rc == LOOM_OK && loom_tensor_dtype(t) == LOOM_F32 && loom_tensor_ndim(t) == v->ndim &&
             !memcmp(loom_tensor_dims(t), v->dims, (size_t)v->ndim * sizeof(int64_t));
    loom_tensor_free(t);
    if (!ok) return 0;
  }
  return 1;
}

/* RESTORE {step, dir} on c; *digest = the restored shard's. */
static loom_code restore_req(loom_ps_client *c, int64_t step, const char *dir, uint64_t *digest, loom_status *st) {
  uint8_t fixed[16], out[16];
  size_t len = strlen(dir);
  loom__ps_put64(fixed, (uint64_t)step);
  loom__ps_put32(fixed + 8, (uint32_t)len);
  loom__ps_put32(fixed + 12, 0);
  loom_code rc = loom__ps_send(c, LOOM_PS_RESTORE, fixed, 16, dir, len, NULL, 0, st);
  if (!rc) rc = loom__ps_small_reply(c, LOOM_PS_RESTORE, out, 16, st);
  if (!rc) *digest = loom__ps_get64(out + 8);
  return rc;
}

/* The digest the chief's manifest <dir>/model.ckpt-<step> names for shard ps_index. */
static loom_code check_manifest(const loom__ps_restore_in *in, const char *dir, int64_t step, uint64_t got,
                                loom_status *st) {
  char mp[4400], line[256];
  snprintf(mp, sizeof mp, "%s/model.ckpt-%lld", dir, (long long)step);
  FILE *f = fopen(mp, "r");
  int found = 0;
  loom_code rc = LOOM_OK;
  while (f && fgets(line, sizeof line, f)) {
    int i;
    unsigned long long want;
    char name[160];
    if (sscanf(line, "shard %d %159s %llx", &i, name, &want) != 3 || i != in->ps_index) continue;
    found = 1;
    if (want != got)
      rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: ps:%d restored digest %016llx, the manifest says %016llx", mp,
                           in->ps_index, (unsigned long long)got, want);
  }
  if (f) fclose(f);
  if (!rc && !found) rc = loom_status_set(st, LOOM_DATA_LOSS, "%s names no shard %d", mp, in->ps_index);
  return rc;
}

/* Creates this PS's shards from the chief's model.ckpt and sets ps:0's global step to its step. */
static loom_code restore_chief(const loom__ps_restore_in *in, loom_ps_client *c, const cand *k, loom_status *st) {
  loom_code rc = LOOM_OK;
  for (int i = 0; i < loom_ps_placement_num_shards(in->p) && !rc; i++) {
    const loom_ps_shard *sh = loom_ps_placement_shard(in->p, i);
    if (sh->ps != in->ps_index) continue;
    loom_tensor *t = NULL;
    rc = loom_checkpoint_read_tensor(k->path, loom_ps_placement_var(in->p, sh->var)->name, &t, st);
    if (!rc) rc = loom__ps_shard_init(c, in->p, i, in->opt, in->hyper, NULL, loom_tensor_data_const(t), st);
    loom_tensor_free(t);
  }
  int64_t gs = 0;
  if (!rc && in->ps_index == 0) rc = loom_ps_step_inc(c, 0, &gs, st);
  if (!rc && in->ps_index == 0 && gs != k->step) rc = loom_ps_step_inc(c, k->step - gs, &gs, st);
  return rc;
}

loom_code loom__ps_restore_newest(const loom__ps_restore_in *in, const char **from, loom_status *st) {
  static const char *const names[] = {"the chief's PS-side checkpoint", "its own save", "the chief's model.ckpt"};
  if (from) *from = NULL;
  cand k[3];
  int have[3] = {0, 0, 0};
  char psdir[4200], tmp[4400];
  snprintf(psdir, sizeof psdir, "%s/ps", in->model_dir);
  if ((k[SRC_PS].step = latest_step(psdir, tmp, sizeof tmp)) >= 0) {
    snprintf(k[SRC_PS].path, sizeof k[SRC_PS].path, "%s/model.ckpt-%lld.ps-%d-of-%d", psdir,
             (long long)k[SRC_PS].step, in->ps_index, in->num_ps);
    have[SRC_PS] = file_time(k[SRC_PS].path, &k[SRC_PS].mtime);
  }
  if (in->self_dir && *in->self_dir) {
    snprintf(k[SRC_SELF].path, sizeof k[SRC_SELF].path, "%s/%s/model.ckpt-0.ps-%d-of-%d", in->model_dir,
             in->self_dir, in->ps_index, in->num_ps);
    k[SRC_SELF].step = 0;
    have[SRC_SELF] = file_time(k[SRC_SELF].path, &k[SRC_SELF].mtime);
  }
  if ((in->model_rules || in->opt == LOOM_PS_SGD) && (k[SRC_CHIEF].step = latest_step(in->model_dir, k[SRC_CHIEF].path,
                                                                 sizeof k[SRC_CHIEF].path)) >= 0)
    have[SRC_CHIEF] = file_time(k[SRC_CHIEF].path, &k[SRC_CHIEF].mtime);
  int best = SRC_NONE;
  for (int i = 0; i < 3; i++) {
    if (!have[i]) continue;
    if (i == SRC_CHIEF && best != SRC_NONE &&
        !(k[i].mtime.tv_sec > k[best].mtime.tv_sec ||
          (k[i].mtime.tv_sec == k[best].mtime.tv_sec && k[i].mtime.tv_nsec > k[best].mtime.tv_nsec)))
      continue; /* not newer: checked no further */
    if (i == SRC_CHIEF && !chief_ckpt_complete(in, k[i].path)) continue;
    if (best == SRC_NONE || k[i].mtime.tv_sec > k[best].mtime.tv_sec ||
        (k[i].mtime.tv_sec == k[best].mtime.tv_sec && k[i].mtime.tv_nsec > k[best].mtime.tv_nsec))
      best = i;
  }
  if (best == SRC_NONE) return LOOM_OK; /* nothing to restore: a fresh shard */
  if (best == SRC_CHIEF && in->model_rules) { /* the chief creates the shard from it with the model's rules */
    if (from) *from = names[best];
    loom__log(LOOM_LOG_INFO,
              "%s: the newest state of its shard is the chief's model.ckpt, %s: the shard starts empty; the chief "
              "creates it from that checkpoint with the model's update rules and slots",
              in->name, k[best].path);
    return LOOM_OK;
  }
  loom_ps_client *c = loom_ps_connect(&in->co, st);
  if (!c) return loom_status_code(st) ? loom_status_code(st) : LOOM_UNAVAILABLE;
  uint64_t digest = 0;
  loom_code rc;
  if (best == SRC_PS) {
    rc = restore_req(c, k[best].step, "ps", &digest, st);
    if (!rc) rc = check_manifest(in, psdir, k[best].step, digest, st);
  } else if (best == SRC_SELF) {
    rc = restore_req(c, 0, in->self_dir, &digest, st);
  } else {
    rc = restore_chief(in, c, &k[best], st);
  }
  loom_ps_client_free(c);
  if (!rc && from) *from = names[best];
  if (!rc)
    loom__log(LOOM_LOG_INFO, "%s: restored its shard from %s, %s%s", in->name, names[best], k[best].path,
              best == SRC_PS ? " (digest checked)" : "");
  return rc;
}
