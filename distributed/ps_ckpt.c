/* distributed/ps_ckpt.c - the PS's checkpoints (SAVE / RESTORE).
 * Each PS writes its own shard, <model_dir>/<dir>/model.ckpt-<step>.ps-<i>-of-<n>,
 * in loom's checkpoint format (CRC-protected, written to a temporary file
 * and renamed). Per variable id: "v<id>" (the value), "v<id>/slot<k>" (the
 * optimizer slots), "v<id>/state" f32[10] (hyper[8], beta1/beta2 powers),
 * "v<id>/meta" i64[2] (optimizer, version); plus "global_step". SYNC
 * aggregation state is not checkpointed (TF's gradient accumulators are not
 * either): a SAVE writes the last applied step and the step being
 * aggregated goes on; a RESTORE discards the partial sums (counted in
 * stale_dropped) and answers the requests held for them ABORTED. Only a relative dir without ".."
 * travels; the PS joins it to the model_dir it was started with. */
#include "distributed/ps_server_impl.h"

int loom__pss_rel_dir_ok(const char *d, size_t n) {
  if (n == 0) return 1;
  if (d[0] == '/') return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)d[i] < 0x20 || d[i] == 0x7f || d[i] == '\\') return 0;
  for (size_t i = 0; i < n;) { /* no ".." component */
    size_t j = i;
    while (j < n && d[j] != '/') j++;
    if (j - i == 2 && d[i] == '.' && d[i + 1] == '.') return 0;
    i = j + 1;
  }
  return 1;
}

int loom__pss_mkdirs(char *path) {
  for (char *p = path + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      int r = mkdir(path, 0755);
      *p = '/';
      if (r != 0 && errno != EEXIST) return -1;
    }
  return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* One past the largest variable id any shard could hold. */
uint32_t loom__pss_vars_end(loom_ps_server *s) {
  uint32_t end = 0;
  for (int q = 0; q < s->nshards; q++) {
    uint32_t e = s->shards[q].cap * (uint32_t)s->nshards;
    if (e > end) end = e;
  }
  return end;
}

uint64_t loom__pss_vars_digest(loom_ps_server *s, uint32_t *nvars) {
  uint64_t d = 0xcbf29ce484222325ull;
  uint32_t n = 0;
  uint32_t end = loom__pss_vars_end(s);
  for (uint32_t i = 0; i < end; i++) {
    psvar *v = loom__pss_var_get(s, i);
    if (!v) continue;
    n++;
    d = (d ^ i) * 0x100000001b3ull;
    d = (d ^ v->version) * 0x100000001b3ull;
    d = (d ^ loom__crc32c(v->val, (size_t)v->numel * 4)) * 0x100000001b3ull;
  }
  *nvars = n;
  return d;
}

loom_code loom__pss_ckpt_save(loom_ps_server *s, const char *path, loom_status *st) {
  uint32_t n = __atomic_load_n(&s->nvars_present, __ATOMIC_RELAXED);
  size_t cap = (size_t)n * 7 + 1;
  const char **names = loom__calloc(cap, sizeof *names);
  char **own = loom__calloc(cap, sizeof *own);
  loom_tensor **t = loom__calloc(cap, sizeof *t);
  int k = 0;
  loom_code rc = names && own && t ? LOOM_OK : loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
  uint32_t end = loom__pss_vars_end(s);
  for (uint32_t i = 0; i < end && !rc; i++) {
    psvar *v = loom__pss_var_get(s, i);
    if (!v) continue;
    float init[3];
    int ns = loom__pss_opt_slots(v->opt, v->hyper, init);
    float *sp[3] = {v->s0, v->s1, v->s2};
    float state[10];
    memcpy(state, v->hyper, 32);
    state[8] = v->b1p;
    state[9] = v->b2p;
    int64_t meta[2] = {(int64_t)v->opt, (int64_t)v->version}, d10 = 10, d2 = 2;
    for (int j = -1; j < ns + 2 && !rc; j++) {
      char nm[64];
      if (j < 0) {
        snprintf(nm, sizeof nm, "v%u", i);
        t[k] = loom_tensor_from_data(LOOM_F32, v->ndim, v->dims, v->val, st);
      } else if (j < ns) {
        snprintf(nm, sizeof nm, "v%u/slot%d", i, j);
        t[k] = loom_tensor_from_data(LOOM_F32, v->ndim, v->dims, sp[j], st);
      } else if (j == ns) {
        snprintf(nm, sizeof nm, "v%u/state", i);
        t[k] = loom_tensor_from_data(LOOM_F32, 1, &d10, state, st);
      } else {
        snprintf(nm, sizeof nm, "v%u/meta", i);
        t[k] = loom_tensor_from_data(LOOM_I64, 1, &d2, meta, st);
      }
      own[k] = loom__strdup(nm);
      names[k] = own[k];
      if (!t[k] || !own[k]) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
      k++;
    }
    if (!rc && (v->sched_on || v->step)) { /* "v<id>/rule" f64: schedule, flag, nb, step, p[4], boundaries, values */
      int64_t nr = 8 + 2 * (int64_t)v->sched_nb + 1;
      char nm[64];
      snprintf(nm, sizeof nm, "v%u/rule", i);
      t[k] = loom_tensor_new(LOOM_F64, 1, &nr, st);
      own[k] = loom__strdup(nm);
      names[k] = own[k];
      if (!t[k] || !own[k]) {
        rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
      } else {
        double *r = loom_tensor_data(t[k]);
        r[0] = v->sched_on ? v->sched_kind : -1;
        r[1] = v->sched_flag;
        r[2] = v->sched_nb;
        r[3] = (double)v->step;
        memcpy(r + 4, v->sched_p, 32);
        for (int q = 0; q < v->sched_nb; q++) r[8 + q] = v->sched_b[q];
        for (int q = 0; v->sched_v && q <= v->sched_nb; q++) r[8 + v->sched_nb + q] = v->sched_v[q];
      }
      k++;
    }
  }
  if (!rc) {
    int64_t gs = __atomic_load_n(&s->global_step, __ATOMIC_RELAXED);
    t[k] = loom_tensor_from_data(LOOM_I64, 0, NULL, &gs, st);
    names[k] = "global_step";
    if (!t[k]) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "checkpoint: no memory");
    k++;
  }
  if (!rc) rc = loom_checkpoint_write(path, k, names, (const loom_tensor *const *)t, st);
  for (int i = 0; i < k; i++) {
    loom_tensor_free(t[i]);
    if (own) loom__free(own[i]);
  }
  loom__free(names);
  loom__free(own);
  loom__free(t);
  return rc;
}

typedef struct ckpt_ids {
  uint32_t *ids;
  int n, cap;
} ckpt_ids;

static int collect_meta(const char *name, loom_dtype dt, int ndim, const int64_t *dims, void *user) {
  (void)dt, (void)ndim, (void)dims;
  ckpt_ids *c = user;
  unsigned id;
  char rest[8];
  if (sscanf(name, "v%u/%7s", &id, rest) == 2 && !strcmp(rest, "meta") && id < MAX_VARS) {
    if (c->n == c->cap) {
      int nc = c->cap ? 2 * c->cap : 16;
      uint32_t *p = loom__realloc(c->ids, (size_t)nc * sizeof *p);
      if (!p) return 1;
      c->ids = p;
      c->cap = nc;
    }
    c->ids[c->n++] = id;
  }
  return 0;
}

static loom_code read_f32(const char *path, const char *name, int64_t numel, float *out, loom_status *st) {
  loom_tensor *t = NULL;
  loom_code rc = loom_checkpoint_read_tensor(path, name, &t, st);
  if (rc) return rc;
  if (loom_tensor_dtype(t) != LOOM_F32 || loom_tensor_numel(t) != numel)
    rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: %s is not %lld floats", path, name, (long long)numel);
  else
    memcpy(out, loom_tensor_data_const(t), (size_t)numel * 4);
  loom_tensor_free(t);
  return rc;
}

/* Replaces this PS's variables with the shard's (all or nothing). */
loom_code loom__pss_ckpt_restore(loom_ps_server *s, const char *path, loom_status *st) {
  ckpt_ids ids = {0};
  loom_code rc = loom_checkpoint_list_variables(path, collect_meta, &ids, st);
  psvar *nvs = NULL;
  uint32_t cap = 0;
  for (int i = 0; i < ids.n; i++)
    if (ids.ids[i] + 1 > cap) cap = ids.ids[i] + 1;
  if (!rc && cap) {
    nvs = loom__calloc(cap, sizeof *nvs);
    if (!nvs) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "restore: no memory");
  }
  int64_t gs = 0;
  for (int i = 0; i < ids.n && !rc; i++) {
    uint32_t id = ids.ids[i];
    psvar *v = &nvs[id];
    char nm[64];
    loom_tensor *t = NULL;
    snprintf(nm, sizeof nm, "v%u/meta", id);
    rc = loom_checkpoint_read_tensor(path, nm, &t, st);
    if (rc) break;
    int64_t meta[2] = {-1, 0};
    if (loom_tensor_dtype(t) == LOOM_I64 && loom_tensor_numel(t) == 2) memcpy(meta, loom_tensor_data_const(t), 16);
    loom_tensor_free(t);
    t = NULL;
    if (meta[0] < 0 || meta[0] >= LOOM_PS_OPT_COUNT) {
      rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: %s is malformed", path, nm);
      break;
    }
    snprintf(nm, sizeof nm, "v%u", id);
    rc = loom_checkpoint_read_tensor(path, nm, &t, st);
    if (rc) break;
    v->ndim = loom_tensor_ndim(t);
    memcpy(v->dims, loom_tensor_dims(t), (size_t)v->ndim * sizeof(int64_t));
    v->numel = loom_tensor_numel(t);
    v->opt = (loom_ps_optimizer)meta[0];
    v->version = (uint64_t)meta[1];
    v->nrows = v->ndim ? v->dims[0] : 1;
    v->row = v->nrows > 0 ? v->numel / v->nrows : 0;
    v->present = 1; /* freed with var_free on failure */
    v->vb = loom__pss_vbuf_new(v->numel);
    v->val = v->vb ? v->vb->data : NULL;
    if (v->val && loom_tensor_dtype(t) == LOOM_F32) memcpy(v->val, loom_tensor_data_const(t), (size_t)v->numel * 4);
    else rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: %s", path, v->val ? "a value is not float32" : "no memory");
    loom_tensor_free(t);
    float state[10];
    snprintf(nm, sizeof nm, "v%u/state", id);
    if (!rc) rc = read_f32(path, nm, 10, state, st);
    if (rc) break;
    memcpy(v->hyper, state, 32);
    v->b1p = state[8];
    v->b2p = state[9];
    snprintf(nm, sizeof nm, "v%u/rule", id);
    if (loom_checkpoint_read_tensor(path, nm, &t, NULL) == LOOM_OK) { /* the update rule's schedule and step */
      int64_t nr = loom_tensor_numel(t);
      const double *r = loom_tensor_dtype(t) == LOOM_F64 ? loom_tensor_data_const(t) : NULL;
      int64_t nb = r && nr >= 8 ? (int64_t)r[2] : -1;
      if (!r || nb < 0 || nb > LOOM_PS_RULE_MAX_NB || nr != 8 + 2 * nb + 1 || r[0] < -1 || r[0] > LOOM_LRS_COSINE) {
        rc = loom_status_set(st, LOOM_DATA_LOSS, "%s: %s is malformed", path, nm);
      } else {
        v->sched_on = r[0] >= 0;
        v->sched_kind = (int32_t)r[0];
        v->sched_flag = (int32_t)r[1];
        v->sched_nb = (int32_t)nb;
        v->step = (int64_t)r[3];
        memcpy(v->sched_p, r + 4, 32);
        v->sched_b = loom__malloc(8 * (size_t)nb + 8);
        v->sched_v = loom__malloc(4 * (size_t)nb + 4);
        if (!v->sched_b || !v->sched_v) rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "restore: no memory");
        for (int64_t q = 0; !rc && q < nb; q++) v->sched_b[q] = r[8 + q];
        for (int64_t q = 0; !rc && q <= nb; q++) v->sched_v[q] = (float)r[8 + nb + q];
      }
      loom_tensor_free(t);
      t = NULL;
      if (rc) break;
    }
    float init[3];
    int ns = loom__pss_opt_slots(v->opt, v->hyper, init);
    float **sp[3] = {&v->s0, &v->s1, &v->s2};
    for (int j = 0; j < ns && !rc; j++) {
      *sp[j] = loom__pss_alloc_floats(v->numel, 0);
      snprintf(nm, sizeof nm, "v%u/slot%d", id, j);
      rc = *sp[j] ? read_f32(path, nm, v->numel, *sp[j], st)
                  : loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "restore: no memory");
    }
  }
  if (!rc) {
    loom_tensor *t = NULL;
    rc = loom_checkpoint_read_tensor(path, "global_step", &t, st);
    if (!rc && loom_tensor_dtype(t) == LOOM_I64 && loom_tensor_numel(t) == 1)
      memcpy(&gs, loom_tensor_data_const(t), 8);
    loom_tensor_free(t);
  }
  loom__free(ids.ids);
  if (rc) {
    for (uint32_t i = 0; i < cap; i++)
      if (nvs[i].present) loom__pss_var_free(&nvs[i]);
    loom__free(nvs);
    return rc;
  }
  /* every shard is parked (a barrier): hand the variables out to their shards */
  uint32_t ns = (uint32_t)s->nshards;
  shard *nsh = loom__calloc(ns, sizeof *nsh);
  for (uint32_t q = 0; nsh && q < ns; q++) {
    nsh[q].cap = cap / ns + 1;
    nsh[q].vars = loom__calloc(nsh[q].cap, sizeof(psvar));
    if (!nsh[q].vars) {
      for (uint32_t k = 0; k < q; k++) loom__free(nsh[k].vars);
      loom__free(nsh);
      nsh = NULL;
    }
  }
  if (!nsh) {
    for (uint32_t i = 0; i < cap; i++)
      if (nvs[i].present) loom__pss_var_free(&nvs[i]);
    loom__free(nvs);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "restore: no memory");
  }
  for (uint32_t i = 0; i < cap; i++)
    if (nvs[i].present) nsh[i % ns].vars[i / ns] = nvs[i];
  loom__free(nvs);
  for (uint32_t q = 0; q < ns; q++) {
    shard *sh = &s->shards[q];
    for (uint32_t i = 0; i < sh->cap; i++)
      if (sh->vars[i].present) loom__pss_var_free(&sh->vars[i]);
    loom__free(sh->vars);
    sh->vars = nsh[q].vars;
    sh->cap = nsh[q].cap;
  }
  loom__free(nsh);
  __atomic_store_n(&s->nvars_present, (uint32_t)ids.n, __ATOMIC_RELAXED);
  __atomic_store_n(&s->global_step, gs, __ATOMIC_RELAXED);
  return LOOM_OK;
}
