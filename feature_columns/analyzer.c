/* feature_columns/analyzer.c - statistics from the data in one pass over a
 * dataset (what TF needs TF Transform for): exact quantile boundaries,
 * vocabularies by frequency (written as TF's vocabulary files) and
 * per-element moments for z-score normalizers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feature_columns/fc_impl.h"

enum { AN_QUANTILES = 0, AN_VOCAB = 1, AN_MOMENTS = 2 };
static const char *an_kind_name[] = {"quantiles", "vocabulary", "moments"};

typedef struct an_entry {
  char *s;
  size_t len;
  int64_t count;
  uint64_t h;
} an_entry;

typedef struct an_req {
  int kind;
  char *key;
  int comp;
  /* quantiles */
  int num_buckets;
  double *vals;
  int64_t nvals, capvals;
  float *bounds;
  int nbounds;
  /* vocabulary */
  int64_t top_k, threshold;
  an_entry *tab; /* open addressing */
  size_t tcap, tn;
  const an_entry **sorted; /* after run: the kept entries in file order */
  const char **vstr;       /* their strings and counts (the getter's arrays) */
  int64_t *vcount, nsorted;
  /* moments */
  int64_t n; /* elements per example */
  int64_t count;
  double *mean, *m2, *std;
  int done;
} an_req;

struct loom_fc_analyzer {
  an_req *r;
  int n, cap;
};

loom_fc_analyzer *loom_fc_analyzer_new(loom_status *st) {
  loom_fc_analyzer *a = loom__calloc(1, sizeof(*a));
  if (!a) loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
  return a;
}

static void an_clear_results(an_req *r) {
  loom__free(r->vals);
  r->vals = NULL;
  r->nvals = r->capvals = 0;
  loom__free(r->bounds);
  r->bounds = NULL;
  r->nbounds = 0;
  for (size_t i = 0; i < r->tcap; i++) loom__free(r->tab[i].s);
  loom__free(r->tab);
  r->tab = NULL;
  r->tcap = r->tn = 0;
  loom__free(r->sorted);
  loom__free(r->vstr);
  loom__free(r->vcount);
  r->sorted = NULL;
  r->vstr = NULL;
  r->vcount = NULL;
  r->nsorted = 0;
  loom__free(r->mean);
  loom__free(r->m2);
  loom__free(r->std);
  r->mean = r->m2 = r->std = NULL;
  r->count = 0;
  r->n = 0;
  r->done = 0;
}

void loom_fc_analyzer_free(loom_fc_analyzer *a) {
  if (!a) return;
  for (int i = 0; i < a->n; i++) {
    an_clear_results(&a->r[i]);
    loom__free(a->r[i].key);
  }
  loom__free(a->r);
  loom__free(a);
}

static an_req *an_find(const loom_fc_analyzer *a, int kind, const char *key) {
  for (int i = 0; i < a->n; i++)
    if (a->r[i].kind == kind && !strcmp(a->r[i].key, key)) return &a->r[i];
  return NULL;
}

static an_req *an_add(loom_fc_analyzer *a, int kind, const char *key, loom_status *st) {
  if (!a || !key || !key[0]) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "analyzer: %s needs an analyzer and a non-empty key", an_kind_name[kind]);
    return NULL;
  }
  if (an_find(a, kind, key)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "analyzer: %s of \"%s\" is already asked for", an_kind_name[kind], key);
    return NULL;
  }
  if (a->n == a->cap) {
    int cap = a->cap ? a->cap * 2 : 8;
    an_req *p = loom__realloc(a->r, (size_t)cap * sizeof(*p));
    if (!p) {
      loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
      return NULL;
    }
    a->r = p;
    a->cap = cap;
  }
  an_req *r = &a->r[a->n];
  memset(r, 0, sizeof(*r));
  r->kind = kind;
  r->key = loom__strdup(key);
  if (!r->key) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
    return NULL;
  }
  a->n++;
  return r;
}

loom_code loom_fc_analyze_quantiles(loom_fc_analyzer *a, const char *key, int num_buckets, loom_status *st) {
  if (num_buckets < 1)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "analyzer: quantiles of \"%s\": num_buckets must be >= 1, given %d",
                           key ? key : "", num_buckets);
  an_req *r = an_add(a, AN_QUANTILES, key, st);
  if (!r) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  r->num_buckets = num_buckets;
  return LOOM_OK;
}

loom_code loom_fc_analyze_vocabulary(loom_fc_analyzer *a, const char *key, int64_t top_k, int64_t frequency_threshold,
                                     loom_status *st) {
  an_req *r = an_add(a, AN_VOCAB, key, st);
  if (!r) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  r->top_k = top_k;
  r->threshold = frequency_threshold;
  return LOOM_OK;
}

loom_code loom_fc_analyze_moments(loom_fc_analyzer *a, const char *key, loom_status *st) {
  an_req *r = an_add(a, AN_MOMENTS, key, st);
  if (!r) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  return LOOM_OK;
}

/* ---- per-batch accumulation ---- */
static double an_get(const loom_tensor *t, int64_t i) {
  const void *d = loom_tensor_data_const(t);
  switch (loom_tensor_dtype(t)) {
  case LOOM_F32: return ((const float *)d)[i];
  case LOOM_F64: return ((const double *)d)[i];
  case LOOM_I32: return ((const int32_t *)d)[i];
  case LOOM_I64: return (double)((const int64_t *)d)[i];
  default: return 0;
  }
}

static uint64_t an_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static loom_code an_vocab_put(an_req *r, const char *s, size_t len, loom_status *st) {
  if ((r->tn + 1) * 2 > r->tcap) {
    size_t cap = r->tcap ? r->tcap * 2 : 1024;
    an_entry *t = loom__calloc(cap, sizeof(*t));
    if (!t) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
    for (size_t i = 0; i < r->tcap; i++)
      if (r->tab[i].s) {
        size_t j = r->tab[i].h & (cap - 1);
        while (t[j].s) j = (j + 1) & (cap - 1);
        t[j] = r->tab[i];
      }
    loom__free(r->tab);
    r->tab = t;
    r->tcap = cap;
  }
  uint64_t h = an_hash(s, len);
  size_t j = h & (r->tcap - 1);
  while (r->tab[j].s) {
    if (r->tab[j].h == h && r->tab[j].len == len && !memcmp(r->tab[j].s, s, len)) {
      r->tab[j].count++;
      return LOOM_OK;
    }
    j = (j + 1) & (r->tcap - 1);
  }
  char *c = loom__malloc(len + 1);
  if (!c) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
  memcpy(c, s, len);
  c[len] = 0;
  r->tab[j].s = c;
  r->tab[j].len = len;
  r->tab[j].h = h;
  r->tab[j].count = 1;
  r->tn++;
  return LOOM_OK;
}

static loom_code an_accumulate(an_req *r, const loom_tensor *t, loom_status *st) {
  int64_t ne = loom_tensor_numel(t);
  loom_dtype dt = loom_tensor_dtype(t);
  switch (r->kind) {
  case AN_QUANTILES:
    if (r->nvals + ne > r->capvals) {
      int64_t cap = r->capvals ? r->capvals : 4096;
      while (cap < r->nvals + ne) cap *= 2;
      double *p = loom__realloc(r->vals, (size_t)cap * sizeof(double));
      if (!p) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
      r->vals = p;
      r->capvals = cap;
    }
    for (int64_t i = 0; i < ne; i++) {
      double v = an_get(t, i);
      if (isnan(v))
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "analyzer: quantiles of \"%s\": the data holds NaN", r->key);
      r->vals[r->nvals++] = v;
    }
    return LOOM_OK;
  case AN_VOCAB:
    for (int64_t i = 0; i < ne; i++) {
      loom_code rc;
      if (dt == LOOM_STRING) {
        size_t len = 0;
        const char *s = loom_tensor_get_string(t, i, &len);
        rc = an_vocab_put(r, s ? s : "", s ? len : 0, st);
      } else {
        char buf[32];
        int k = snprintf(buf, sizeof buf, "%lld", (long long)(dt == LOOM_I32 ? ((const int32_t *)loom_tensor_data_const(t))[i]
                                                                             : ((const int64_t *)loom_tensor_data_const(t))[i]));
        rc = an_vocab_put(r, buf, (size_t)k, st);
      }
      if (rc) return rc;
    }
    return LOOM_OK;
  case AN_MOMENTS: {
    if (ne % r->n)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "analyzer: moments of \"%s\": a batch holds %lld values, not a multiple of the %lld per "
                             "example",
                             r->key, (long long)ne, (long long)r->n);
    int64_t rows = ne / r->n;
    for (int64_t b = 0; b < rows; b++) {
      r->count++;
      for (int64_t e = 0; e < r->n; e++) { /* Welford */
        double x = an_get(t, b * r->n + e);
        double d = x - r->mean[e];
        r->mean[e] += d / (double)r->count;
        r->m2[e] += d * (x - r->mean[e]);
      }
    }
    return LOOM_OK;
  }
  }
  return LOOM_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int cmp_entry(const void *a, const void *b) {
  const an_entry *x = *(const an_entry *const *)a, *y = *(const an_entry *const *)b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  size_t m = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->s, y->s, m);
  if (c) return c;
  return x->len < y->len ? -1 : x->len > y->len;
}

/* The vocabulary's kept entries in file order (and the getter's arrays). */
static loom_code an_vocab_sort(an_req *r, loom_status *st) {
  size_t cap = r->tn ? r->tn : 1;
  r->sorted = loom__malloc(cap * sizeof(*r->sorted));
  r->vstr = loom__malloc(cap * sizeof(*r->vstr));
  r->vcount = loom__malloc(cap * sizeof(*r->vcount));
  if (!r->sorted || !r->vstr || !r->vcount) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
  size_t m = 0;
  for (size_t i = 0; i < r->tcap; i++)
    if (r->tab[i].s && r->tab[i].count >= r->threshold) r->sorted[m++] = &r->tab[i];
  qsort(r->sorted, m, sizeof(*r->sorted), cmp_entry);
  if (r->top_k > 0 && (int64_t)m > r->top_k) m = (size_t)r->top_k;
  for (size_t i = 0; i < m; i++) {
    r->vstr[i] = r->sorted[i]->s;
    r->vcount[i] = r->sorted[i]->count;
  }
  r->nsorted = (int64_t)m;
  return LOOM_OK;
}

static loom_code an_finish(an_req *r, loom_status *st) {
  if (r->kind == AN_QUANTILES) {
    qsort(r->vals, (size_t)r->nvals, sizeof(double), cmp_double);
    int64_t N = r->nvals;
    r->bounds = loom__malloc((size_t)(r->num_buckets > 1 ? r->num_buckets : 1) * sizeof(float));
    if (!r->bounds) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
    r->nbounds = 0;
    if (N > 0)
      for (int k = 1; k < r->num_buckets; k++) {
        int64_t rank = (k * N + r->num_buckets - 1) / r->num_buckets; /* ceil(k N / nb), 1-based */
        if (rank < 1) rank = 1;
        float v = (float)r->vals[rank - 1];
        if (r->nbounds == 0 || v > r->bounds[r->nbounds - 1]) r->bounds[r->nbounds++] = v;
      }
    loom__free(r->vals);
    r->vals = NULL;
    r->nvals = r->capvals = 0;
  } else if (r->kind == AN_VOCAB) {
    loom_code rc = an_vocab_sort(r, st);
    if (rc) return rc;
  } else if (r->kind == AN_MOMENTS) {
    r->std = loom__malloc((size_t)r->n * sizeof(double));
    if (!r->std) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
    for (int64_t e = 0; e < r->n; e++) r->std[e] = r->count ? sqrt(r->m2[e] / (double)r->count) : 0.0;
  }
  r->done = 1;
  return LOOM_OK;
}

static loom_code an_prepare(an_req *r, loom_dataset *ds, loom_status *st) {
  an_clear_results(r);
  int i = loom_dataset_find(ds, r->key);
  if (i < 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "analyzer: %s of \"%s\": the dataset has no component \"%s\"",
                           an_kind_name[r->kind], r->key, r->key);
  r->comp = i;
  loom_dtype dt = loom_dataset_component_dtype(ds, i);
  int numeric = dt == LOOM_F32 || dt == LOOM_F64 || dt == LOOM_I32 || dt == LOOM_I64;
  if ((r->kind != AN_VOCAB && !numeric) || (r->kind == AN_VOCAB && dt != LOOM_STRING && !fc_is_int_dtype(dt)))
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "analyzer: %s of \"%s\": dtype %s does not fit (%s)",
                           an_kind_name[r->kind], r->key, loom_dtype_name(dt),
                           r->kind == AN_VOCAB ? "a vocabulary takes strings or integers" : "it needs numbers");
  if (r->kind == AN_MOMENTS) {
    /* Elements per example: a ragged component pools its values (1); a
     * dense one drops its leading dimension when it is the batch's (-1). */
    int64_t dims[LOOM_MAX_DIMS];
    int nd = loom_dataset_component_shape(ds, i, dims);
    if (loom_dataset_component_row_splits(ds, i) >= 0) r->n = 1;
    else if (nd >= 1 && dims[0] < 0) r->n = loom__numel(nd - 1, dims + 1);
    else r->n = loom__numel(nd, dims);
    if (r->n < 1)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "analyzer: moments of \"%s\": the element shape must be fully known", r->key);
    r->mean = loom__calloc((size_t)r->n, sizeof(double));
    r->m2 = loom__calloc((size_t)r->n, sizeof(double));
    if (!r->mean || !r->m2) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
  }
  return LOOM_OK;
}

loom_code loom_fc_analyzer_run(loom_fc_analyzer *a, loom_dataset *ds, loom_status *st) {
  if (!a || !ds) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "analyzer: run needs an analyzer and a dataset");
  loom_code rc = LOOM_OK;
  for (int i = 0; i < a->n && !rc; i++) rc = an_prepare(&a->r[i], ds, st);
  if (rc) return rc;
  if ((rc = loom_dataset_reset(ds, st))) return rc;
  int nc = loom_dataset_num_components(ds);
  loom_tensor **vals = loom__calloc((size_t)(nc > 0 ? nc : 1), sizeof(loom_tensor *));
  if (!vals) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
  loom_status *tmp = loom_status_new();
  if (!tmp) {
    loom__free(vals);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "analyzer: out of memory");
  }
  for (;;) {
    loom_code c = loom_dataset_next(ds, vals, tmp);
    if (c == LOOM_OUT_OF_RANGE) break;
    if (c) {
      rc = loom_status_set(st, c, "analyzer: reading the dataset: %s", loom_status_message(tmp));
      break;
    }
    for (int i = 0; i < a->n && !rc; i++) rc = an_accumulate(&a->r[i], vals[a->r[i].comp], st);
    if (rc) break;
  }
  for (int i = 0; i < nc; i++) loom_tensor_free(vals[i]);
  loom__free(vals);
  loom_code r2 = loom_dataset_reset(ds, tmp);
  loom_status_free(tmp);
  for (int i = 0; i < a->n && !rc; i++) rc = an_finish(&a->r[i], st);
  if (!rc && r2) rc = loom_status_set(st, r2, "analyzer: resetting the dataset failed");
  if (rc)
    for (int i = 0; i < a->n; i++) an_clear_results(&a->r[i]);
  return rc;
}

static const an_req *an_result(const loom_fc_analyzer *a, int kind, const char *key, loom_status *st) {
  const an_req *r = a && key ? an_find(a, kind, key) : NULL;
  if (!r) {
    loom_status_set(st, LOOM_NOT_FOUND, "analyzer: no %s of \"%s\" was asked for", an_kind_name[kind], key ? key : "");
    return NULL;
  }
  if (!r->done) {
    loom_status_set(st, LOOM_FAILED_PRECONDITION, "analyzer: %s of \"%s\": run the analyzer first", an_kind_name[kind],
                    key);
    return NULL;
  }
  return r;
}

loom_code loom_fc_analyzer_boundaries(const loom_fc_analyzer *a, const char *key, int *nb, const float **boundaries,
                                      loom_status *st) {
  const an_req *r = an_result(a, AN_QUANTILES, key, st);
  if (!r) return loom_status_code(st) ? loom_status_code(st) : LOOM_NOT_FOUND;
  if (nb) *nb = r->nbounds;
  if (boundaries) *boundaries = r->bounds;
  return LOOM_OK;
}

loom_code loom_fc_analyzer_moments(const loom_fc_analyzer *a, const char *key, int64_t *n, const double **mean,
                                   const double **stddev, loom_status *st) {
  const an_req *r = an_result(a, AN_MOMENTS, key, st);
  if (!r) return loom_status_code(st) ? loom_status_code(st) : LOOM_NOT_FOUND;
  if (n) *n = r->n;
  if (mean) *mean = r->mean;
  if (stddev) *stddev = r->std;
  return LOOM_OK;
}


loom_code loom_fc_analyzer_vocabulary(const loom_fc_analyzer *a, const char *key, int64_t *n,
                                      const char *const **values, const int64_t **counts, loom_status *st) {
  const an_req *r = an_result(a, AN_VOCAB, key, st);
  if (!r) return loom_status_code(st) ? loom_status_code(st) : LOOM_NOT_FOUND;
  if (n) *n = r->nsorted;
  if (values) *values = r->vstr;
  if (counts) *counts = r->vcount;
  return LOOM_OK;
}

loom_code loom_fc_analyzer_write_vocabulary(const loom_fc_analyzer *a, const char *key, const char *path,
                                            int64_t *written, loom_status *st) {
  const an_req *r = an_result(a, AN_VOCAB, key, st);
  if (!r) return loom_status_code(st) ? loom_status_code(st) : LOOM_NOT_FOUND;
  if (!path || !path[0]) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "analyzer: vocabulary of \"%s\": no path", key);
  const an_entry *const *e = r->sorted;
  size_t m = (size_t)r->nsorted;
  FILE *f = fopen(path, "wb");
  if (!f) {
    return loom_status_set(st, LOOM_NOT_FOUND, "analyzer: vocabulary of \"%s\": cannot open %s for writing", key, path);
  }
  int bad = 0;
  for (size_t i = 0; i < m && !bad; i++)
    bad = fwrite(e[i]->s, 1, e[i]->len, f) != e[i]->len || fputc('\n', f) == EOF;
  bad |= fclose(f) != 0;
  if (bad) return loom_status_set(st, LOOM_INTERNAL, "analyzer: vocabulary of \"%s\": writing %s failed", key, path);
  if (written) *written = (int64_t)m;
  return LOOM_OK;
}
