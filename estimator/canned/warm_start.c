/* estimator/canned/warm_start.c - tf.estimator.WarmStartSettings and
 * VocabInfo for any loom_estimator: variables selected by a regex (trainable)
 * or a list of regexes (global), renamed from the previous checkpoint, and
 * 2-D tables whose vocabulary changed remapped row by row (or column by
 * column). See include/loom/loom_canned.h. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "estimator/estimator_impl.h"
#include "loom/loom.h"
#include "loom/loom_canned.h"

/* Applies the settings (the estimator's warm_start_fn). */
loom_code loom__canned_warm_start(void *state, loom_session *s, loom_graph *g, loom_status *st);

loom_vocab_info loom_vocab_info_default(void) {
  loom_vocab_info v;
  memset(&v, 0, sizeof v);
  v.old_vocab_size = -1;
  return v;
}

loom_warm_start_settings loom_warm_start_settings_default(void) {
  loom_warm_start_settings w;
  memset(&w, 0, sizeof w);
  w.struct_size = sizeof w;
  w.vars_to_warm_start = ".*";
  return w;
}

/* ---- a deep copy of the settings ---- */
typedef struct vocab {
  int64_t n;
  char **items;
} vocab;

typedef struct ws_vinfo {
  char *var_name;
  char *new_file, *old_file;
  int64_t new_size, old_size, num_oov;
  vocab new_list, old_list; /* copies of in-memory lists */
  int has_backup;
  loom_initializer backup;
  int32_t axis;
} ws_vinfo;

/* What vars_to_warm_start selects (TF's grouping): the trainable variables
 * matching a regex; all trainable variables, of which only those with a
 * VocabInfo are warm-started (None, or ""); or the global variables
 * matching any regex of a list (possibly empty). */
enum { WS_REGEX, WS_NONE, WS_LIST };

typedef struct ws_state {
  char *from;
  int mode;
  char *regex;   /* trainable */
  int32_t nregex;
  char **regexes; /* global */
  int32_t nvi;
  ws_vinfo *vi;
  int32_t nprev;
  char **new_names, **prev_names;
} ws_state;

static void vocab_free(vocab *v) {
  for (int64_t i = 0; i < v->n; i++) loom__free(v->items[i]);
  loom__free(v->items);
  v->items = NULL;
  v->n = 0;
}

static void ws_free(void *p) {
  ws_state *w = p;
  if (!w) return;
  loom__free(w->from);
  loom__free(w->regex);
  for (int i = 0; i < w->nregex; i++) loom__free(w->regexes[i]);
  loom__free(w->regexes);
  for (int i = 0; i < w->nvi; i++) {
    loom__free(w->vi[i].var_name);
    loom__free(w->vi[i].new_file);
    loom__free(w->vi[i].old_file);
    vocab_free(&w->vi[i].new_list);
    vocab_free(&w->vi[i].old_list);
  }
  loom__free(w->vi);
  for (int i = 0; i < w->nprev; i++) {
    loom__free(w->new_names[i]);
    loom__free(w->prev_names[i]);
  }
  loom__free(w->new_names);
  loom__free(w->prev_names);
  loom__free(w);
}

static char *dup_or_null(const char *s, int *oom) {
  if (!s) return NULL;
  char *d = loom__strdup(s);
  if (!d) *oom = 1;
  return d;
}

static int copy_list(vocab *v, int64_t n, const char *const *items) {
  if (!items || n <= 0) return 1;
  v->items = loom__calloc((size_t)n, sizeof *v->items);
  if (!v->items) return 0;
  v->n = n;
  for (int64_t i = 0; i < n; i++)
    if (items[i] && !(v->items[i] = loom__strdup(items[i]))) return 0;
  return 1;
}

static int regex_ok(const char *re) {
  regex_t r;
  if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB) != 0) return 0;
  regfree(&r);
  return 1;
}

loom_code loom_estimator_set_warm_start_settings(loom_estimator *e, const loom_warm_start_settings *ws,
                                                 loom_status *st) {
  if (!e || !ws) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "WarmStartSettings: estimator or settings is NULL");
  if (!ws->ckpt_to_initialize_from)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "WarmStartSettings: ckpt_to_initialize_from is NULL");
  if (ws->vars_to_warm_start && !regex_ok(ws->vars_to_warm_start))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "WarmStartSettings: vars_to_warm_start: invalid regex '%s'",
                           ws->vars_to_warm_start);
  if (ws->nvar_regexes < 0 || (ws->nvar_regexes > 0 && !ws->var_regexes))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "WarmStartSettings: var_regexes is NULL");
  if (ws->vars_to_warm_start && ws->var_regexes)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "WarmStartSettings: give vars_to_warm_start (a regex) or var_regexes (a list), not both "
                           "(vars_to_warm_start '%s')",
                           ws->vars_to_warm_start);
  for (int i = 0; i < ws->nvar_regexes; i++)
    if (!ws->var_regexes[i] || !regex_ok(ws->var_regexes[i]))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "WarmStartSettings: var_regexes[%d]: invalid regex '%s'", i,
                             ws->var_regexes[i] ? ws->var_regexes[i] : "(null)");
  if (ws->nvocab_infos < 0 || (ws->nvocab_infos > 0 && !ws->vocab_infos))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "WarmStartSettings: vocab_infos is NULL");
  for (int i = 0; i < ws->nvocab_infos; i++) {
    const loom_vocab_info *v = &ws->vocab_infos[i];
    if (!v->var_name) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "VocabInfo[%d]: var_name is NULL", i);
    if (!v->new_vocab_file && !(v->new_vocab && v->new_vocab_size > 0))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "VocabInfo for %s: no new vocabulary (file or list)",
                             v->var_name);
    if (!v->old_vocab_file && !(v->old_vocab && v->old_vocab_size > 0))
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "VocabInfo for %s: no old vocabulary (file or list)",
                             v->var_name);
    if (v->axis != 0 && v->axis != 1)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "VocabInfo for %s: axis must be 0 or 1 (got %d)",
                             v->var_name, (int)v->axis);
    if (v->num_oov_buckets < 0)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "VocabInfo for %s: num_oov_buckets must be >= 0 (got %lld)",
                             v->var_name, (long long)v->num_oov_buckets);
  }
  if (ws->nprev_names < 0 || (ws->nprev_names > 0 && (!ws->new_names || !ws->prev_names)))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "WarmStartSettings: var_name_to_prev_var_name arrays are NULL");

  int oom = 0;
  ws_state *w = loom__calloc(1, sizeof *w);
  if (!w) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  w->from = dup_or_null(ws->ckpt_to_initialize_from, &oom);
  w->mode = ws->var_regexes ? WS_LIST : ws->vars_to_warm_start && *ws->vars_to_warm_start ? WS_REGEX : WS_NONE;
  if (w->mode == WS_REGEX) w->regex = dup_or_null(ws->vars_to_warm_start, &oom);
  if (ws->nvar_regexes > 0 && (w->regexes = loom__calloc((size_t)ws->nvar_regexes, sizeof *w->regexes))) {
    w->nregex = ws->nvar_regexes;
    for (int i = 0; i < w->nregex; i++) w->regexes[i] = dup_or_null(ws->var_regexes[i], &oom);
  } else if (ws->nvar_regexes > 0) {
    oom = 1;
  }
  if (ws->nvocab_infos > 0 && (w->vi = loom__calloc((size_t)ws->nvocab_infos, sizeof *w->vi))) {
    w->nvi = ws->nvocab_infos;
    for (int i = 0; i < w->nvi; i++) {
      const loom_vocab_info *v = &ws->vocab_infos[i];
      ws_vinfo *d = &w->vi[i];
      d->var_name = dup_or_null(v->var_name, &oom);
      d->new_file = dup_or_null(v->new_vocab_file, &oom);
      d->old_file = dup_or_null(v->old_vocab_file, &oom);
      d->new_size = v->new_vocab_size;
      d->old_size = v->old_vocab_size;
      d->num_oov = v->num_oov_buckets;
      d->axis = v->axis;
      if (v->backup_initializer) {
        d->has_backup = 1;
        d->backup = *v->backup_initializer;
      }
      if (!v->new_vocab_file && !copy_list(&d->new_list, v->new_vocab_size, v->new_vocab)) oom = 1;
      if (!v->old_vocab_file && !copy_list(&d->old_list, v->old_vocab_size, v->old_vocab)) oom = 1;
    }
  } else if (ws->nvocab_infos > 0) {
    oom = 1;
  }
  if (ws->nprev_names > 0) {
    w->new_names = loom__calloc((size_t)ws->nprev_names, sizeof *w->new_names);
    w->prev_names = loom__calloc((size_t)ws->nprev_names, sizeof *w->prev_names);
    if (!w->new_names || !w->prev_names) {
      oom = 1;
    } else {
      w->nprev = ws->nprev_names;
      for (int i = 0; i < w->nprev; i++) {
        w->new_names[i] = dup_or_null(ws->new_names[i], &oom);
        w->prev_names[i] = dup_or_null(ws->prev_names[i], &oom);
      }
    }
  }
  if (oom) {
    ws_free(w);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (e->warm_start_free) e->warm_start_free(e->warm_start_state);
  e->warm_start_state = w;
  e->warm_start_free = ws_free;
  e->warm_start_fn = loom__canned_warm_start;
  return LOOM_OK;
}

/* ---- applying ---- */
static int ws_re_match(const char *re, const char *s) {
  regex_t r;
  if (regcomp(&r, re, REG_EXTENDED) != 0) return 0;
  regmatch_t m;
  int ok = regexec(&r, s, 1, &m, 0) == 0 && m.rm_so == 0;
  regfree(&r);
  return ok;
}

/* The vocabulary of a file (first `size` lines when size > 0) or the list. */
static loom_code load_vocab(const char *var, const char *which, const char *file, int64_t size, const vocab *list,
                            vocab *out, loom_status *st) {
  memset(out, 0, sizeof *out);
  if (!file) {
    int64_t n = size > 0 && size < list->n ? size : list->n;
    out->items = loom__calloc((size_t)(n ? n : 1), sizeof *out->items);
    if (!out->items) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    for (int64_t i = 0; i < n; i++) {
      if (list->items[i] && !(out->items[i] = loom__strdup(list->items[i]))) {
        out->n = i;
        return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
      }
    }
    out->n = n;
    return LOOM_OK;
  }
  FILE *f = fopen(file, "r");
  if (!f)
    return loom_status_set(st, LOOM_NOT_FOUND, "warm start of %s: %s vocabulary file %s not found", var, which, file);
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int64_t cap_items = 0;
  loom_code rc = LOOM_OK;
  while ((size <= 0 || out->n < size) && (len = getline(&line, &cap, f)) >= 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (out->n == cap_items) {
      int64_t nc = cap_items ? 2 * cap_items : 64;
      char **it = loom__realloc(out->items, sizeof *it * (size_t)nc);
      if (!it) {
        rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
      out->items = it;
      cap_items = nc;
    }
    if (!(out->items[out->n] = loom__strdup(line))) {
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    out->n++;
  }
  free(line);
  fclose(f);
  if (rc == LOOM_OK && size > 0 && out->n < size)
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                         "warm start of %s: %s vocabulary file %s has %lld entries, fewer than its size %lld", var,
                         which, file, (long long)out->n, (long long)size);
  return rc;
}

/* A selected variable the checkpoint lacks: TF's ValueError. */
static loom_code not_in_checkpoint(const char *name, const char *prev, const char *path, loom_status *st) {
  if (strcmp(name, prev) != 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "WarmStartSettings: variable %s (var_name_to_prev_var_name of %s) is not in checkpoint %s",
                           prev, name, path);
  return loom_status_set(st, LOOM_INVALID_ARGUMENT, "WarmStartSettings: variable %s is not in checkpoint %s", name,
                         path);
}

static const vocab *sort_vocab;
static int cmp_idx(const void *a, const void *b) {
  const char *x = sort_vocab->items[*(const int64_t *)a], *y = sort_vocab->items[*(const int64_t *)b];
  return strcmp(x ? x : "", y ? y : "");
}

/* The backup values for a table of dims (zeros, or the initializer run in a
 * scratch graph). */
static loom_code backup_values(const ws_vinfo *v, const int64_t *dims, loom_tensor **out, loom_status *st) {
  if (!v->has_backup) {
    *out = loom_tensor_new(LOOM_F32, 2, dims, st);
    if (!*out) return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
    memset(loom_tensor_data(*out), 0, loom_tensor_nbytes(*out));
    return LOOM_OK;
  }
  loom_graph *g = loom_graph_new();
  if (!g) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  loom_output init = loom_initializer_build(g, &v->backup, LOOM_F32, 2, dims, "backup_initializer");
  loom_code rc = loom_graph_status(g, st);
  if (rc == LOOM_OK) {
    loom_session_options so = loom_session_options_default();
    so.num_threads = 1;
    loom_session *s = loom_session_new(g, &so, st);
    if (!s) {
      rc = loom_status_code(st) ? loom_status_code(st) : LOOM_INTERNAL;
    } else {
      *out = NULL;
      rc = loom_session_run(s, NULL, NULL, 0, &init, out, 1, NULL, 0, st);
      loom_session_free(s);
    }
  }
  loom_graph_free(g);
  return rc;
}

static loom_code remap(const ws_vinfo *v, const char *path, const char *prev, loom_variable *var, loom_session *s,
                       loom_status *st) {
  const char *name = loom_variable_name(var);
  int64_t dims[LOOM_MAX_DIMS];
  int nd = loom_variable_dims(var, dims);
  if (nd != 2 || loom_variable_dtype(var) != LOOM_F32)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "VocabInfo for %s: the variable must be a 2-D float32 table",
                           name);
  vocab nv = {0, NULL}, ov = {0, NULL};
  loom_tensor *old = NULL, *val = NULL;
  int64_t *order = NULL;
  loom_code rc = load_vocab(name, "new", v->new_file, v->new_size, &v->new_list, &nv, st);
  if (rc == LOOM_OK) rc = load_vocab(name, "old", v->old_file, v->old_size, &v->old_list, &ov, st);
  if (rc != LOOM_OK) goto done;
  int ax = v->axis;
  if (dims[ax] != nv.n + v->num_oov) {
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                         "VocabInfo for %s: axis %d has %lld entries, not new vocabulary size %lld + "
                         "num_oov_buckets %lld",
                         name, ax, (long long)dims[ax], (long long)nv.n, (long long)v->num_oov);
    goto done;
  }
  loom_status *tmp = loom_status_new();
  rc = loom_checkpoint_read_tensor(path, prev, &old, tmp);
  if (rc == LOOM_NOT_FOUND) {
    rc = not_in_checkpoint(name, prev, path, st);
    loom_status_free(tmp);
    goto done;
  }
  if (rc != LOOM_OK) {
    loom_status_set(st, rc, "warm start of %s from %s: %s", name, path, loom_status_message(tmp));
    loom_status_free(tmp);
    goto done;
  }
  loom_status_free(tmp);
  int oax = 1 - ax;
  if (loom_tensor_ndim(old) != 2 || loom_tensor_dtype(old) != LOOM_F32 ||
      loom_tensor_dim(old, oax) != dims[oax] || loom_tensor_dim(old, ax) < ov.n) {
    char b1[64], b2[64];
    rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                         "VocabInfo for %s: checkpoint tensor %s has shape %s, which does not fit %s with an old "
                         "vocabulary of %lld entries",
                         name, prev, loom__dims_str(b1, sizeof b1, loom_tensor_ndim(old), loom_tensor_dims(old)),
                         loom__dims_str(b2, sizeof b2, 2, dims), (long long)ov.n);
    goto done;
  }
  if ((rc = backup_values(v, dims, &val, st)) != LOOM_OK) goto done;
  order = loom__calloc((size_t)(ov.n ? ov.n : 1), sizeof *order);
  if (!order) {
    rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int64_t i = 0; i < ov.n; i++) order[i] = i;
  sort_vocab = &ov;
  qsort(order, (size_t)ov.n, sizeof *order, cmp_idx);
  const float *src = loom_tensor_data_const(old);
  float *dst = loom_tensor_data(val);
  int64_t ocols = loom_tensor_dim(old, 1), ncols = dims[1], copied = 0;
  for (int64_t k = 0; k < nv.n; k++) {
    const char *key = nv.items[k] ? nv.items[k] : "";
    int64_t lo = 0, hi = ov.n - 1, j = -1;
    while (lo <= hi) { /* the first equal entry: TF keeps the first of duplicates */
      int64_t mid = lo + (hi - lo) / 2;
      int c = strcmp(ov.items[order[mid]] ? ov.items[order[mid]] : "", key);
      if (c < 0) {
        lo = mid + 1;
      } else {
        if (c == 0) j = order[mid];
        hi = mid - 1;
      }
    }
    if (j < 0) continue;
    copied++;
    if (ax == 0) {
      memcpy(dst + k * ncols, src + j * ocols, sizeof(float) * (size_t)ncols);
    } else {
      for (int64_t r = 0; r < dims[0]; r++) dst[r * ncols + k] = src[r * ocols + j];
    }
  }
  rc = loom_session_assign_variable(s, name, val, st);
  if (rc == LOOM_OK)
    loom__log(LOOM_LOG_INFO, "Warm-started %s from %s/%s: %lld of %lld vocabulary entries remapped", name, path, prev,
              (long long)copied, (long long)nv.n);
done:
  loom__free(order);
  loom_tensor_free(old);
  loom_tensor_free(val);
  vocab_free(&nv);
  vocab_free(&ov);
  return rc;
}

/* Whether the variable is an optimizer slot ("<trainable variable>/<slot>",
 * not trainable). */
static int is_slot(loom_graph *g, loom_variable *var) {
  if (loom_variable_trainable(var)) return 0;
  const char *name = loom_variable_name(var), *cut = strrchr(name, '/');
  if (!cut) return 0;
  int nt = 0;
  loom_variable *const *tv = loom_trainable_variables(g, &nt);
  for (int i = 0; i < nt; i++) {
    const char *t = loom_variable_name(tv[i]);
    if (strlen(t) == (size_t)(cut - name) && !strncmp(t, name, (size_t)(cut - name))) return 1;
  }
  return 0;
}

/* slot_ok: a slot variable the checkpoint lacks keeps its initial value. */
static loom_code plain(const char *path, const char *prev, loom_variable *var, loom_session *s, int slot_ok,
                       int *nwarm, loom_status *st) {
  const char *name = loom_variable_name(var);
  loom_tensor *t = NULL;
  loom_status *tmp = loom_status_new();
  loom_code rc = loom_checkpoint_read_tensor(path, prev, &t, tmp);
  if (rc == LOOM_NOT_FOUND && slot_ok) {
    loom__log(LOOM_LOG_INFO, "Warm-start: optimizer slot %s not in %s; keeping its initial value", prev, path);
    rc = LOOM_OK;
  } else if (rc == LOOM_NOT_FOUND) {
    rc = not_in_checkpoint(name, prev, path, st);
  } else if (rc != LOOM_OK) {
    loom_status_set(st, rc, "warm start of %s from %s: %s", name, path, loom_status_message(tmp));
  } else {
    int64_t dims[LOOM_MAX_DIMS];
    int nd = loom_variable_dims(var, dims);
    int same = nd == loom_tensor_ndim(t) && loom_variable_dtype(var) == loom_tensor_dtype(t);
    for (int i = 0; same && i < nd; i++) same = dims[i] == loom_tensor_dim(t, i);
    if (!same) {
      char b1[64], b2[64];
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "warm start of %s: checkpoint %s has %s %s of shape %s, the variable is %s %s (a changed "
                           "vocabulary needs a VocabInfo)",
                           name, path, prev, loom_dtype_name(loom_tensor_dtype(t)),
                           loom__dims_str(b1, sizeof b1, loom_tensor_ndim(t), loom_tensor_dims(t)),
                           loom_dtype_name(loom_variable_dtype(var)), loom__dims_str(b2, sizeof b2, nd, dims));
    } else {
      rc = loom_session_assign_variable(s, name, t, st);
      if (rc == LOOM_OK) (*nwarm)++;
    }
  }
  loom_status_free(tmp);
  loom_tensor_free(t);
  return rc;
}

/* What the settings select, for messages: "the trainable variables matching 'x'". */
static void selection_str(const ws_state *w, char *buf, size_t cap) {
  if (w->mode == WS_REGEX) {
    snprintf(buf, cap, "the trainable variables matching '%s'", w->regex);
  } else if (w->mode == WS_NONE) {
    snprintf(buf, cap, "the trainable variables (vars_to_warm_start None)");
  } else {
    size_t n = (size_t)snprintf(buf, cap, "the global variables matching [");
    for (int k = 0; k < w->nregex && n < cap; k++)
      n += (size_t)snprintf(buf + n, cap - n, "%s'%s'", k ? ", " : "", w->regexes[k]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
  }
}

/* A var_name_to_prev_var_name or VocabInfo entry naming no selected
 * variable: TF's ValueError ("not used"), naming it, what was selected and
 * (the first of) the selected names. */
static loom_code not_used(const ws_state *w, const char *what, const char *var, loom_variable *const *vars,
                          const unsigned char *sel, int nv, loom_status *st) {
  char which[512], names[1024];
  selection_str(w, which, sizeof which);
  size_t n = 0;
  int shown = 0, total = 0;
  names[0] = 0;
  for (int i = 0; i < nv; i++) {
    if (!sel[i]) continue;
    total++;
    if (shown < 8 && n < sizeof names) {
      n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", shown ? ", " : "", loom_variable_name(vars[i]));
      shown++;
    }
  }
  if (total > shown && n < sizeof names) snprintf(names + n, sizeof names - n, ", ... (%d in all)", total);
  return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                         "WarmStartSettings: %s names variable %s, which is not used: it is not among %s (%s)", what,
                         var, which, total ? names : "none");
}

loom_code loom__canned_warm_start(void *state, loom_session *s, loom_graph *g, loom_status *st) {
  const ws_state *w = state;
  char path[4096];
  if (!loom__est_warm_start_path(w->from, path, sizeof path))
    return loom_status_set(st, LOOM_NOT_FOUND, "warm_start_from: no checkpoint found at %s", w->from);
  int nv = 0, nwarm = 0, nremap = 0;
  loom_variable *const *vars = w->mode == WS_LIST ? loom_global_variables(g, &nv) : loom_trainable_variables(g, &nv);
  unsigned char *sel = loom__calloc((size_t)(nv ? nv : 1), 1);
  if (!sel) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < nv; i++) {
    const char *name = loom_variable_name(vars[i]);
    if (w->mode == WS_NONE) sel[i] = 1;
    else if (w->mode == WS_REGEX) sel[i] = (unsigned char)ws_re_match(w->regex, name);
    for (int k = 0; !sel[i] && k < w->nregex; k++) sel[i] = (unsigned char)ws_re_match(w->regexes[k], name);
  }
  /* every rename and VocabInfo must name a selected variable (TF raises
   * ValueError for the ones "not used"); checked before anything is read */
  loom_code rc = LOOM_OK;
  for (int pass = 0; pass < 2 && rc == LOOM_OK; pass++) {
    int n = pass ? w->nvi : w->nprev;
    for (int k = 0; k < n && rc == LOOM_OK; k++) {
      const char *want = pass ? w->vi[k].var_name : w->new_names[k];
      int used = 0;
      for (int i = 0; i < nv && !used; i++) used = sel[i] && !strcmp(loom_variable_name(vars[i]), want);
      if (!used)
        rc = not_used(w, pass ? "var_name_to_vocab_info" : "var_name_to_prev_var_name", want, vars, sel, nv, st);
    }
  }
  for (int i = 0; i < nv && rc == LOOM_OK; i++) {
    if (!sel[i]) continue;
    const char *name = loom_variable_name(vars[i]);
    const ws_vinfo *vi = NULL;
    for (int k = 0; k < w->nvi; k++)
      if (!strcmp(w->vi[k].var_name, name)) vi = &w->vi[k];
    if (!vi && w->mode == WS_NONE) continue; /* None: only the variables with a VocabInfo */
    const char *prev = name;
    for (int k = 0; k < w->nprev; k++)
      if (!strcmp(w->new_names[k], name)) prev = w->prev_names[k];
    if (vi) {
      rc = remap(vi, path, prev, vars[i], s, st);
      nremap++;
    } else {
      /* TF 2.15's slots are named "training/<optimizer>/<variable>/<slot>": a list of the model's names
       * does not select them there, so one absent here is no error */
      rc = plain(path, prev, vars[i], s, w->mode == WS_LIST && is_slot(g, vars[i]), &nwarm, st);
    }
  }
  loom__free(sel);
  if (rc == LOOM_OK)
    loom__log(LOOM_LOG_INFO, "Warm-started %d variables (%d remapped by vocabulary) from %s", nwarm + nremap, nremap,
              path);
  return rc;
}
