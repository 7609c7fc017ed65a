/* estimator/build.c - what every Estimator entry point (train, evaluate,
 * predict, export; estimator.c, predict.c, hooks/in_memory_eval.c) shares:
 * paths, session options, the latest / pinned checkpoint, the graph built
 * for one mode (placeholders, model_fn, a validated spec), session
 * initialisation (restore, or init + warm start) and a call's hook list.
 * Calls only spec.c in estimator/; estimator.c and predict.c call it and
 * never each other. */
#include "estimator/estimator_impl.h"
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ utils */

char *loom__path_join(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  char *p = loom__malloc(na + nb + 2);
  if (!p) return NULL;
  memcpy(p, a, na);
  size_t k = na;
  if (k && p[k - 1] != '/') p[k++] = '/';
  memcpy(p + k, b, nb + 1);
  return p;
}

/* ------------------------------------------------------------ checkpoints */
loom_session_options loom__est_session_options(const loom_estimator *e) {
  loom_session_options o = loom_session_options_default();
  o.num_threads = e->config.num_threads;
  o.device = e->config.device;
  return o;
}

int loom__est_latest(const loom_estimator *e, char *buf, size_t cap) {
  return loom_latest_checkpoint(e->model_dir, buf, cap, NULL) == LOOM_OK;
}

/* A hard link next to the checkpoint keeps its data readable even if
 * keep_checkpoint_max garbage collection deletes it while it is restored;
 * when the newest checkpoint vanished before it could be linked, the newest
 * is looked up again. Where hard links are not possible the checkpoint is
 * read directly (pin = ckpt). */
loom_code loom__est_pin_checkpoint(const loom_estimator *e, const char *given, char *ckpt, size_t cap, char *pin,
                                   size_t pcap, int *have, loom_status *st) {
  static unsigned counter;
  *have = 0;
  for (int attempt = 0; attempt < 10; attempt++) {
    if (given)
      snprintf(ckpt, cap, "%s", given);
    else if (!loom__est_latest(e, ckpt, cap))
      return LOOM_OK;
    snprintf(pin, pcap, "%s.pin-%d-%u", ckpt, (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    if (link(ckpt, pin) == 0) {
      *have = 1;
      return LOOM_OK;
    }
    if (errno != ENOENT) { /* no hard links here: read it directly */
      snprintf(pin, pcap, "%s", ckpt);
      *have = 1;
      return LOOM_OK;
    }
    if (given) break;
  }
  return loom_status_set(st, LOOM_NOT_FOUND, "checkpoint %s not found", ckpt);
}

void loom__est_unpin_checkpoint(const char *ckpt, const char *pin) {
  if (strcmp(ckpt, pin) != 0) unlink(pin);
}

/* ------------------------------------------------------------ graph build */
void loom__est_built_free(est_built *b) {
  loom__spec_clear(&b->spec);
  loom_features_free(b->features);
  loom_features_free(b->receivers);
  loom__free(b->comp_index);
  loom__free(b->inputs);
  loom_graph_free(b->g);
  memset(b, 0, sizeof *b);
}

loom_code loom__est_build(loom_estimator *e, loom_mode mode, loom_dataset *ds, loom_serving_input_fn serving,
                          void *serving_user, est_built *b, loom_status *st) {
  memset(b, 0, sizeof *b);
  loom_code rc = LOOM_OK;
  b->g = loom_graph_new();
  b->features = loom_features_new();
  if (!b->g || !b->features) {
    loom__est_built_free(b);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  loom__features_bind_graph(b->features, b->g);
  if (e->config.has_random_seed) loom_graph_set_random_seed(b->g, e->config.tf_random_seed);
  b->global_step = loom_get_or_create_global_step(b->g);
  if (ds) {
    int n = loom_dataset_num_components(ds), li = loom_dataset_label_index(ds);
    b->comp_index = loom__calloc((size_t)(n ? n : 1), sizeof(int32_t));
    b->inputs = loom__calloc((size_t)(n ? n : 1), sizeof(loom_output));
    if (!b->comp_index || !b->inputs) {
      loom__est_built_free(b);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    }
    /* a ragged pair (loom_data.h) is fed to two rank-1 placeholders of
     * unknown length and becomes ONE sparse feature; its row_splits
     * component is handled with its values */
    uint8_t *is_splits = loom__calloc((size_t)(n ? n : 1), 1);
    if (!is_splits) {
      loom__est_built_free(b);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    }
    for (int i = 0; i < n; i++) {
      int si = loom_dataset_component_row_splits(ds, i);
      if (si >= 0 && si < n) is_splits[si] = 1;
    }
    for (int i = 0; i < n && rc == LOOM_OK; i++) {
      if (is_splits[i]) continue; /* fed with its values */
      int si = loom_dataset_component_row_splits(ds, i);
      const char *cname = loom_dataset_component_name(ds, i);
      if (si >= 0) {
        if (i == li) {
          if (mode == LOOM_MODE_PREDICT) continue;
          rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "the label component '%s' is ragged; labels must be dense",
                               cname);
          break;
        }
        int64_t unk = -1;
        loom_sparse sp;
        sp.values = loom_placeholder(b->g, loom_dataset_component_dtype(ds, i), 1, &unk, cname);
        sp.row_splits = loom_placeholder(b->g, LOOM_I64, 1, &unk, loom_dataset_component_name(ds, si));
        b->comp_index[b->ncomp] = i;
        b->inputs[b->ncomp++] = sp.values;
        b->comp_index[b->ncomp] = si;
        b->inputs[b->ncomp++] = sp.row_splits;
        rc = loom_features_add_sparse(b->features, cname, sp, st);
        continue;
      }
      if (i == li && mode == LOOM_MODE_PREDICT) continue; /* predict ignores labels */
      int64_t dims[LOOM_MAX_DIMS];
      int nd = loom_dataset_component_shape(ds, i, dims);
      loom_output ph = loom_placeholder(b->g, loom_dataset_component_dtype(ds, i), nd, dims, cname);
      b->comp_index[b->ncomp] = i;
      b->inputs[b->ncomp++] = ph;
      if (i == li)
        b->labels = ph;
      else
        rc = loom_features_add(b->features, cname, ph, st);
    }
    loom__free(is_splits);
    if (rc != LOOM_OK) {
      loom__est_built_free(b);
      return rc;
    }
  } else if (serving) {
    b->receivers = loom_features_new();
    if (!b->receivers) {
      loom__est_built_free(b);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    }
    loom__features_bind_graph(b->receivers, b->g);
    if ((rc = serving(b->g, b->features, b->receivers, serving_user, st)) != LOOM_OK) {
      loom__est_built_free(b);
      return rc;
    }
    if (loom_features_count(b->receivers) == 0) {
      loom__est_built_free(b);
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "serving_input_fn registered no receiver tensors");
    }
  }
  b->spec.mode = mode;
  b->spec.g = b->g;
  rc = e->model_fn(b->g, b->features, b->labels, mode, e->params, &e->config, &b->spec, e->user, st);
  if (rc != LOOM_OK) {
    /* a model_fn that returns a spec call's code without a message: the graph's first error (an
     * out-of-memory node, say) is the cause */
    if (st && loom_status_code(st) == LOOM_OK && loom_graph_status(b->g, st) != LOOM_OK) rc = loom_status_code(st);
    if (st && loom_status_code(st) == LOOM_OK) loom_status_set(st, rc, "model_fn failed in mode %s", loom_mode_key(mode));
    loom__est_built_free(b);
    return rc;
  }
  if ((rc = loom_graph_status(b->g, st)) != LOOM_OK || (rc = loom__spec_validate(&b->spec, st)) != LOOM_OK) {
    loom__est_built_free(b);
    return rc;
  }
  return LOOM_OK;
}

/* --------------------------------------------------------- session init */
static loom_code run_target(loom_session *s, loom_node *n, loom_status *st) {
  if (!n) return LOOM_OK;
  return loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &n, 1, st);
}

/* Resolves warm_start_from to a checkpoint file. */
int loom__est_warm_start_path(const char *from, char *buf, size_t cap) {
  struct stat sb;
  if (stat(from, &sb) != 0) return 0;
  if (S_ISDIR(sb.st_mode)) {
    char *v = loom__path_join(from, "variables/variables.ckpt");
    int ok = v && stat(v, &sb) == 0;
    if (ok) snprintf(buf, cap, "%s", v);
    loom__free(v);
    if (ok) return 1;
    return loom_latest_checkpoint(from, buf, cap, NULL) == LOOM_OK;
  }
  snprintf(buf, cap, "%s", from);
  return 1;
}

static loom_code warm_start(loom_estimator *e, loom_session *s, loom_graph *g, loom_status *st) {
  char path[4096];
  if (!loom__est_warm_start_path(e->warm_start_from, path, sizeof path))
    return loom_status_set(st, LOOM_NOT_FOUND, "warm_start_from: no checkpoint found at %s", e->warm_start_from);
  regex_t re;
  int has_re = 0;
  if (e->warm_start_regex) {
    if (regcomp(&re, e->warm_start_regex, REG_EXTENDED) != 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "warm start: invalid regex '%s'", e->warm_start_regex);
    has_re = 1;
  }
  int nv = 0, nwarm = 0;
  loom_variable *const *vars = loom_trainable_variables(g, &nv);
  loom_code rc = LOOM_OK;
  for (int i = 0; i < nv && rc == LOOM_OK; i++) {
    const char *name = loom_variable_name(vars[i]);
    if (has_re) {
      regmatch_t m;
      if (regexec(&re, name, 1, &m, 0) != 0 || m.rm_so != 0) continue;
    }
    loom_tensor *t = NULL;
    loom_status *tmp = loom_status_new();
    loom_code r = loom_checkpoint_read_tensor(path, name, &t, tmp);
    if (r == LOOM_NOT_FOUND) { /* TF's ValueError: a selected variable must be in the checkpoint */
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "warm_start_from: variable %s is not in checkpoint %s", name,
                           path);
    } else if (r != LOOM_OK) {
      rc = loom_status_set(st, r, "warm start from %s: %s", path, loom_status_message(tmp));
    } else {
      rc = loom_session_assign_variable(s, name, t, st);
      if (rc != LOOM_OK)
        loom_status_set(st, rc, "warm start of %s from %s: %s", name, path, st ? loom_status_message(st) : "");
      nwarm++;
    }
    loom_status_free(tmp);
    loom_tensor_free(t);
  }
  if (has_re) regfree(&re);
  if (rc == LOOM_OK) loom__log(LOOM_LOG_INFO, "Warm-started %d variables from %s", nwarm, path);
  return rc;
}

loom_code loom__est_init_session(loom_estimator *e, loom_session *s, loom_graph *g, const char *ckpt,
                                 int allow_warm_start, loom_status *st) {
  loom_code rc;
  if (ckpt) {
    loom_saver *sv = loom_saver_new(g, 0, NULL, 0, st);
    if (!sv) return loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
    rc = loom_saver_restore(sv, s, ckpt, st);
    loom_saver_free(sv);
    if (rc != LOOM_OK) return rc;
  } else {
    if ((rc = run_target(s, loom_global_variables_initializer(g), st)) != LOOM_OK) return rc;
    if (allow_warm_start && e->warm_start_fn) {
      if ((rc = e->warm_start_fn(e->warm_start_state, s, g, st)) != LOOM_OK) return rc;
    } else if (allow_warm_start && e->warm_start_from && (rc = warm_start(e, s, g, st)) != LOOM_OK) {
      return rc;
    }
  }
  return run_target(s, loom_local_variables_initializer(g), st);
}

/* ------------------------------------------------------------ hook lists */
/* A call's hooks: the caller's and the spec's (borrowed) and the defaults
 * the estimator creates (owned, freed by loom__hl_free). */
void loom__hl_add(est_hook_list *l, loom_hook *h, int own) {
  if (!h) { /* one of the estimator's own hooks could not be made: the call must fail, not run without it */
    if (own) l->oom = 1;
    return;
  }
  if (l->n == l->cap) {
    int32_t cap = l->cap ? 2 * l->cap : 16;
    loom_hook **items = loom__realloc(l->items, sizeof(loom_hook *) * (size_t)cap);
    if (items) l->items = items;
    uint8_t *owned = items ? loom__realloc(l->owned, (size_t)cap) : NULL;
    if (owned) l->owned = owned;
    if (!items || !owned) {
      l->oom = 1;
      if (own) loom_hook_free(h);
      return;
    }
    l->cap = cap;
  }
  l->items[l->n] = h;
  l->owned[l->n++] = (uint8_t)own;
}

void loom__est_add_train_hooks(est_hook_list *hl, const loom_estimator *e, const est_built *b, loom_output gs_out,
                               int nhooks, loom_hook *const *hooks, int64_t steps, int64_t max_steps,
                               int64_t progress_total, loom_status *st) {
  for (int i = 0; i < nhooks; i++) loom__hl_add(hl, hooks[i], 0);
  loom__hl_add(hl, loom_nan_tensor_hook(b->spec.loss, 1, st), 1);
  const char *tags[2] = {"loss", "step"};
  loom_output tv[2] = {b->spec.loss, gs_out};
  loom_hook *lh = loom_logging_tensor_hook(2, tags, tv, e->config.log_step_count_steps, 0, 0, st);
  if (lh && progress_total > 0) loom_logging_tensor_hook_set_total_steps(lh, progress_total);
  loom__hl_add(hl, lh, 1);
  for (int i = 0; i < b->spec.nhooks[LOOM_HOOKS_TRAINING]; i++) loom__hl_add(hl, b->spec.hooks[LOOM_HOOKS_TRAINING][i], 0);
  if (steps > 0 || max_steps > 0) loom__hl_add(hl, loom_stop_at_step_hook(steps, max_steps, st), 1);
}

void loom__est_add_chief_hooks(est_hook_list *hl, const loom_estimator *e, const est_built *b,
                               loom_event_writer *writer, int nlisteners,
                               const loom_checkpoint_listener *const *listeners, void *const *listener_selves,
                               loom_status *st) {
  const loom_run_config *c = &e->config;
  if (c->save_checkpoints_steps > 0 || c->save_checkpoints_secs > 0)
    loom__hl_add(hl,
                 loom_checkpoint_saver_hook(e->model_dir, c->save_checkpoints_secs, c->save_checkpoints_steps, NULL,
                                            c->keep_checkpoint_max, writer, nlisteners, listeners, listener_selves, st),
                 1);
  for (int i = 0; i < b->spec.nhooks[LOOM_HOOKS_TRAINING_CHIEF]; i++)
    loom__hl_add(hl, b->spec.hooks[LOOM_HOOKS_TRAINING_CHIEF][i], 0);
  loom__hl_add(hl, loom_step_counter_hook(c->log_step_count_steps, 0, writer, st), 1);
  if (c->save_summary_steps > 0) loom__hl_add(hl, loom_summary_saver_hook(c->save_summary_steps, 0, writer, st), 1);
}

void loom__hl_free(est_hook_list *l) {
  for (int i = 0; i < l->n; i++)
    if (l->owned[i]) loom_hook_free(l->items[i]);
  loom__free(l->items);
  loom__free(l->owned);
  memset(l, 0, sizeof *l);
}
