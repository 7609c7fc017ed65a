/* estimator/exporters.c - tf.estimator exporters for train_and_evaluate:
 * LatestExporter, BestExporter, FinalExporter and custom ones
 * (loom_train_and_evaluate.h).
 *
 * An export goes to <export_path>/<ts>/ where export_path is
 * <model_dir>/export/<exporter name>. loom_estimator_export names its
 * directory after the current second and bumps it past existing names, so
 * after garbage collection removed an old export a new one could get a
 * smaller number than a kept one (and be collected first). The exporters
 * therefore stage the export in <export_path>/temp-staging/ and rename it
 * to max(now, newest existing + 1): timestamps increase with export order,
 * which is what garbage collection (keep the largest) relies on. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "estimator/estimator_impl.h"
#include "loom/loom_summary.h"

enum { EXP_CUSTOM = 0, EXP_LATEST = 1, EXP_BEST = 2, EXP_FINAL = 3 };

struct loom_exporter {
  char *name;
  loom_exporter_ops ops;
  void *self;
  int kind;
};

typedef struct saved_model_exporter {
  loom_serving_input_fn fn;
  void *user;
  int keep;
  /* BestExporter */
  loom_compare_fn cmp;
  void *cmp_user;
  loom_eval_result *best;
} saved_model_exporter;

loom_exporter *loom_exporter_new(const char *name, const loom_exporter_ops *ops, void *self, loom_status *st) {
  if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT,
                    "Exporter: name '%s' is not a valid directory name (non-empty, no '/', not '.' or '..')",
                    name ? name : "(null)");
    return NULL;
  }
  if (!ops || !ops->export_fn) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "Exporter '%s': ops or ops->export_fn is NULL", name);
    return NULL;
  }
  loom_exporter *x = loom__calloc(1, sizeof *x);
  if (!x || !(x->name = loom__strdup(name))) {
    loom__free(x);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  x->ops = *ops;
  x->self = self;
  return x;
}

void loom_exporter_free(loom_exporter *x) {
  if (!x) return;
  if (x->ops.destroy) x->ops.destroy(x->self);
  loom__free(x->name);
  loom__free(x);
}

const char *loom_exporter_name(const loom_exporter *x) { return x ? x->name : ""; }

/* ------------------------------------------------------------ helpers */
static int all_digits(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

/* The timestamped export versions in dir, ascending (*n; NULL when none or
 * the directory does not exist). */
static long long *list_versions(const char *dir, int *n) {
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  long long *v = NULL;
  int cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!all_digits(de->d_name) || strlen(de->d_name) > 18) continue;
    if (*n == cap) {
      int nc = cap ? 2 * cap : 16;
      long long *nv = loom__realloc(v, sizeof *nv * (size_t)nc);
      if (!nv) break;
      v = nv;
      cap = nc;
    }
    v[(*n)++] = atoll(de->d_name);
  }
  closedir(d);
  for (int i = 1; i < *n; i++) /* insertion sort */
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      long long t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}
static int rmtree(const char *path) { return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Keeps the `keep` largest versions of dir (keep 0: all). */
static void garbage_collect(const char *dir, int keep) {
  if (keep <= 0) return;
  int n = 0;
  long long *v = list_versions(dir, &n);
  for (int i = 0; i + keep < n; i++) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%lld", dir, v[i]);
    loom__log(LOOM_LOG_INFO, "Exporter: removing old export %s", p);
    if (rmtree(p) != 0) loom__log(LOOM_LOG_WARN, "Exporter: cannot remove %s: %s", p, strerror(errno));
  }
  loom__free(v);
}

/* Exports ckpt to export_path/<ts>/ with ts above every existing version. */
static loom_code export_saved_model(saved_model_exporter *m, loom_estimator *e, const char *export_path,
                                    const char *ckpt, char *out, size_t cap, loom_status *st) {
  char staging[4200], staged[4200], final[4200];
  snprintf(staging, sizeof staging, "%s/temp-staging", export_path);
  struct stat sb;
  if (stat(staging, &sb) == 0) rmtree(staging); /* left by a crash */
  loom_code rc = loom_estimator_export(e, m->fn, m->user, staging, ckpt, staged, sizeof staged, st);
  if (rc != LOOM_OK) {
    rmtree(staging);
    return rc;
  }
  int n = 0;
  long long *v = list_versions(export_path, &n);
  long long ts = (long long)time(NULL);
  if (n > 0 && v[n - 1] >= ts) ts = v[n - 1] + 1;
  loom__free(v);
  snprintf(final, sizeof final, "%s/%lld", export_path, ts);
  if (rename(staged, final) != 0) {
    int err = errno;
    rmtree(staging);
    return loom_status_set(st, loom__errno_code(err), "Exporter: cannot rename %s to %s: %s", staged, final,
                           strerror(err));
  }
  rmdir(staging);
  if ((size_t)snprintf(out, cap, "%s", final) >= cap)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "Exporter: export path %s does not fit in %zu bytes", final,
                           cap);
  return LOOM_OK;
}

static void sme_destroy(void *self) {
  saved_model_exporter *m = self;
  if (!m) return;
  loom_eval_result_free(m->best);
  loom__free(m);
}

static loom_exporter *sme_wrap(const char *name, const loom_exporter_ops *ops, saved_model_exporter *m, int kind,
                               const char *what, loom_status *st) {
  if (!m) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  loom_exporter *x = loom_exporter_new(name, ops, m, st);
  if (!x) {
    sme_destroy(m);
    if (st && loom_status_code(st) == LOOM_INVALID_ARGUMENT) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", loom_status_message(st));
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s", what, msg);
    }
    return NULL;
  }
  x->kind = kind;
  return x;
}

static saved_model_exporter *sme_new(const char *what, loom_serving_input_fn fn, void *user, int keep,
                                     loom_status *st, int *bad) {
  *bad = 1;
  if (!fn) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: serving_input_receiver_fn is NULL", what);
    return NULL;
  }
  if (keep < 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: exports_to_keep must be >= 0 (0 = keep all), got %d", what, keep);
    return NULL;
  }
  *bad = 0;
  saved_model_exporter *m = loom__calloc(1, sizeof *m);
  if (m) {
    m->fn = fn;
    m->user = user;
    m->keep = keep;
  }
  return m;
}

/* ------------------------------------------------------- LatestExporter */
static loom_code latest_export(void *self, loom_estimator *e, const char *export_path, const char *ckpt,
                               const loom_eval_result *r, int is_final, char *out, size_t cap, loom_status *st) {
  (void)r;
  (void)is_final;
  saved_model_exporter *m = self;
  loom_code rc = export_saved_model(m, e, export_path, ckpt, out, cap, st);
  if (rc == LOOM_OK) garbage_collect(export_path, m->keep);
  return rc;
}

loom_exporter *loom_latest_exporter(const char *name, loom_serving_input_fn serving_input_fn, void *user,
                                    int exports_to_keep, loom_status *st) {
  static const loom_exporter_ops ops = {NULL, latest_export, sme_destroy};
  int bad;
  saved_model_exporter *m = sme_new("LatestExporter", serving_input_fn, user, exports_to_keep, st, &bad);
  if (bad) return NULL;
  return sme_wrap(name, &ops, m, EXP_LATEST, "LatestExporter", st);
}

/* -------------------------------------------------------- FinalExporter */
static loom_code final_export(void *self, loom_estimator *e, const char *export_path, const char *ckpt,
                              const loom_eval_result *r, int is_final, char *out, size_t cap, loom_status *st) {
  (void)r;
  if (!is_final) return LOOM_OK;
  loom__log(LOOM_LOG_INFO, "Performing the final export in the end of training.");
  return export_saved_model(self, e, export_path, ckpt, out, cap, st);
}

loom_exporter *loom_final_exporter(const char *name, loom_serving_input_fn serving_input_fn, void *user,
                                   loom_status *st) {
  static const loom_exporter_ops ops = {NULL, final_export, sme_destroy};
  int bad;
  saved_model_exporter *m = sme_new("FinalExporter", serving_input_fn, user, 0, st, &bad);
  if (bad) return NULL;
  return sme_wrap(name, &ops, m, EXP_FINAL, "FinalExporter", st);
}

/* --------------------------------------------------------- BestExporter */
/* TF's _loss_smaller: current is better when its loss is strictly lower. */
static int loss_smaller(void *user, const loom_eval_result *best, const loom_eval_result *cur) {
  (void)user;
  double b, c;
  if (loom_eval_result_get(cur, "loss", &c, NULL) != LOOM_OK) return 0;
  if (loom_eval_result_get(best, "loss", &b, NULL) != LOOM_OK) return 1;
  return c < b;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* One evaluation's scalars of an event as a result (NULL when it has none). */
static loom_eval_result *event_result(const loom_event *ev) {
  int n = 0;
  char **keys = loom__calloc((size_t)ev->nvalues + 1, sizeof(char *));
  double *vals = loom__calloc((size_t)ev->nvalues + 1, sizeof(double));
  loom_eval_result *r = NULL;
  if (keys && vals) {
    for (int i = 0; i < ev->nvalues; i++)
      if (ev->values[i].kind == 0 && strcmp(ev->values[i].tag, "global_step")) {
        keys[n] = (char *)ev->values[i].tag;
        vals[n++] = ev->values[i].simple_value;
      }
    if (n > 0) {
      keys[n] = "global_step";
      vals[n] = (double)ev->step;
      r = loom__eval_result_new(n + 1, keys, vals, ev->step);
    }
  }
  loom__free(keys);
  loom__free(vals);
  return r;
}

/* Reloads the best past evaluation from the event files of eval_dir. */
static loom_code best_begin(void *self, loom_estimator *e, const char *eval_dir, loom_status *st) {
  (void)e;
  saved_model_exporter *m = self;
  loom_eval_result_free(m->best);
  m->best = NULL;
  DIR *d = opendir(eval_dir);
  if (!d) return LOOM_OK; /* no evaluation yet */
  char **files = NULL;
  int nf = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, "events.out.tfevents.", 20) != 0) continue;
    if (nf == cap) {
      int nc = cap ? 2 * cap : 8;
      char **nfl = loom__realloc(files, sizeof *nfl * (size_t)nc);
      if (!nfl) break;
      files = nfl;
      cap = nc;
    }
    if (!(files[nf] = loom__path_join(eval_dir, de->d_name))) break;
    nf++;
  }
  closedir(d);
  qsort(files, (size_t)nf, sizeof *files, name_cmp);
  loom_compare_fn cmp = m->cmp ? m->cmp : loss_smaller;
  int nev = 0;
  for (int f = 0; f < nf; f++) {
    loom_event_reader *r = loom_event_reader_open(files[f], NULL);
    if (!r) {
      loom__log(LOOM_LOG_WARN, "BestExporter: cannot open %s; skipped", files[f]);
      continue;
    }
    const loom_event *ev;
    loom_code rc;
    loom_status *rs = loom_status_new();
    while ((rc = loom_event_reader_next(r, &ev, rs)) == LOOM_OK) {
      loom_eval_result *cur = event_result(ev);
      if (!cur) continue;
      nev++;
      if (!m->best || cmp(m->cmp_user, m->best, cur)) {
        loom_eval_result_free(m->best);
        m->best = cur;
      } else {
        loom_eval_result_free(cur);
      }
    }
    if (rc != LOOM_OUT_OF_RANGE) /* e.g. a record cut by a killed job: keep what was read */
      loom__log(LOOM_LOG_WARN, "BestExporter: %s", loom_status_message(rs));
    loom_status_free(rs);
    loom_event_reader_free(r);
  }
  for (int f = 0; f < nf; f++) loom__free(files[f]);
  loom__free(files);
  if (m->best) {
    double l = 0;
    int has = loom_eval_result_get(m->best, "loss", &l, NULL) == LOOM_OK;
    loom__log(LOOM_LOG_INFO, "BestExporter: best of %d past evaluations in %s: global_step %lld%s%g", nev, eval_dir,
              (long long)m->best->global_step, has ? ", loss " : "", has ? l : 0.0);
  }
  (void)st;
  return LOOM_OK;
}

static loom_code best_export(void *self, loom_estimator *e, const char *export_path, const char *ckpt,
                             const loom_eval_result *r, int is_final, char *out, size_t cap, loom_status *st) {
  (void)is_final;
  saved_model_exporter *m = self;
  loom_compare_fn cmp = m->cmp ? m->cmp : loss_smaller;
  if (m->best && !cmp(m->cmp_user, m->best, r)) return LOOM_OK;
  loom__log(LOOM_LOG_INFO, "Performing best model export (global_step %lld).", (long long)r->global_step);
  loom_eval_result *copy = loom__eval_result_copy(r);
  if (!copy) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory");
  loom_code rc = export_saved_model(m, e, export_path, ckpt, out, cap, st);
  if (rc != LOOM_OK) {
    loom_eval_result_free(copy);
    return rc;
  }
  loom_eval_result_free(m->best);
  m->best = copy;
  garbage_collect(export_path, m->keep);
  return LOOM_OK;
}

loom_exporter *loom_best_exporter(const char *name, loom_serving_input_fn serving_input_fn, void *user,
                                  loom_compare_fn compare_fn, void *compare_user, int exports_to_keep,
                                  loom_status *st) {
  static const loom_exporter_ops ops = {best_begin, best_export, sme_destroy};
  int bad;
  saved_model_exporter *m = sme_new("BestExporter", serving_input_fn, user, exports_to_keep, st, &bad);
  if (bad) return NULL;
  if (m) {
    m->cmp = compare_fn;
    m->cmp_user = compare_user;
  }
  return sme_wrap(name ? name : "best_exporter", &ops, m, EXP_BEST, "BestExporter", st);
}

const loom_eval_result *loom_best_exporter_best(const loom_exporter *x) {
  if (!x || x->kind != EXP_BEST) return NULL;
  return ((const saved_model_exporter *)x->self)->best;
}

/* ------------------------------------------- used by train_and_evaluate */
loom_code loom__exporter_begin(loom_exporter *x, loom_estimator *e, const char *eval_dir, loom_status *st) {
  return x->ops.begin ? x->ops.begin(x->self, e, eval_dir, st) : LOOM_OK;
}

loom_code loom__exporter_export(loom_exporter *x, loom_estimator *e, const char *export_path, const char *ckpt,
                                const loom_eval_result *r, int is_final, char *out, size_t cap, loom_status *st) {
  out[0] = 0;
  return x->ops.export_fn(x->self, e, export_path, ckpt, r, is_final, out, cap, st);
}

int loom__exporter_is_final(const loom_exporter *x) { return x->kind == EXP_FINAL; }
