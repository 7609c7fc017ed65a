/* data/dataset.c - datasets: element spec, iteration, from_tensors,
 * map, shuffle, batch, repeat, take, prefetch, numpy_input. See
 * loom_data.h and data_impl.h (the two production paths). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "data/data_impl.h"
#include "kernels/kernel.h" /* loom_tstring: the string headers read directly */
#include "base/philox.h"

/* ======================================================================
 * Shell, spec, helpers
 * ====================================================================== */
loom_dataset *loom__ds_new(size_t size, const loom_ds_vtable *vt, int ncomp, loom_status *st) {
  loom_dataset *ds = loom__calloc(1, size);
  if (ds) {
    ds->vt = vt;
    ds->ncomp = ncomp;
    ds->label = -1;
    ds->comp = loom__calloc(ncomp > 0 ? (size_t)ncomp : 1, sizeof *ds->comp);
    ds->st = loom_status_new();
  }
  if (!ds || !ds->comp || !ds->st) {
    if (ds) loom__ds_free_shell(ds);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset: out of memory");
    return NULL;
  }
  return ds;
}

void loom__ds_free_shell(loom_dataset *ds) {
  if (!ds) return;
  if (ds->comp)
    for (int i = 0; i < ds->ncomp; i++) {
      loom__free(ds->comp[i].name);
      loom_tensor_free(ds->comp[i].pad);
    }
  loom__free(ds->comp);
  loom_status_free(ds->st);
  loom__free(ds);
}

loom_code loom__ds_set_comp(loom_dataset *ds, int i, const char *name, loom_dtype dt, int ndim, const int64_t *dims,
                            loom_status *st) {
  loom_ds_comp *c = &ds->comp[i];
  loom__free(c->name);
  c->name = loom__strdup(name ? name : "");
  if (!c->name) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset: out of memory");
  c->dtype = dt;
  c->ndim = ndim;
  for (int d = 0; d < ndim; d++) c->dims[d] = dims[d];
  return LOOM_OK;
}

loom_code loom__ds_set_pad(loom_dataset *ds, int i, const loom_tensor *pad, loom_status *st) {
  loom_ds_comp *c = &ds->comp[i];
  loom_tensor_free(c->pad);
  c->pad = NULL;
  if (!pad) return LOOM_OK;
  if (loom_tensor_dtype(pad) != c->dtype || loom_tensor_numel(pad) != 1)
    return loom_status_set(st, LOOM_INTERNAL, "dataset: padding value of component '%s' is not one %s", c->name,
                           loom_dtype_name(c->dtype));
  if (!(c->pad = loom_tensor_copy(pad, st)))
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset: out of memory");
  return LOOM_OK;
}

loom_code loom__ds_copy_spec(loom_dataset *ds, const loom_dataset *in, loom_status *st) {
  for (int i = 0; i < in->ncomp; i++) {
    const loom_ds_comp *c = &in->comp[i];
    loom_code rc = loom__ds_set_comp(ds, i, c->name, c->dtype, c->ndim, c->dims, st);
    if (!rc) rc = loom__ds_set_pad(ds, i, c->pad, st);
    if (rc) return rc;
    ds->comp[i].ragged = c->ragged;
    ds->comp[i].partner = c->partner;
    ds->comp[i].batched = c->batched;
  }
  ds->label = in->label;
  return LOOM_OK;
}

loom_code loom__ds_set_ragged(loom_dataset *ds, int vi, const char *name, loom_dtype dt, loom_status *st) {
  size_t n = strlen(name);
  char *sn = loom__malloc(n + sizeof "/row_splits");
  if (!sn) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "dataset: out of memory");
  memcpy(sn, name, n);
  memcpy(sn + n, "/row_splits", sizeof "/row_splits");
  int64_t vd = -1, sd = 2;
  loom_code rc = loom__ds_set_comp(ds, vi, name, dt, 1, &vd, st);
  if (!rc) rc = loom__ds_set_comp(ds, vi + 1, sn, LOOM_I64, 1, &sd, st);
  loom__free(sn);
  if (rc) return rc;
  ds->comp[vi].ragged = LOOM__RAGGED_VALUES;
  ds->comp[vi].partner = vi + 1;
  ds->comp[vi + 1].ragged = LOOM__RAGGED_SPLITS;
  ds->comp[vi + 1].partner = vi;
  ds->comp[vi].batched = ds->comp[vi + 1].batched = 0;
  return LOOM_OK;
}

loom_code loom__check_splits(const loom_tensor *splits, int64_t nvalues, int64_t rows, const char *who,
                             const char *feature, loom_status *st) {
  if (!splits) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: ragged feature '%s': row_splits is missing", who, feature);
  if (loom_tensor_dtype(splits) != LOOM_I64 || loom_tensor_ndim(splits) != 1 || loom_tensor_dim(splits, 0) < 1) {
    char a[128];
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s: ragged feature '%s': row_splits is %s %s; it must be int64 [rows + 1]", who, feature,
                           loom_dtype_name(loom_tensor_dtype(splits)),
                           loom__dims_str(a, sizeof a, loom_tensor_ndim(splits), loom_tensor_dims(splits)));
  }
  int64_t m = loom_tensor_dim(splits, 0);
  if (rows >= 0 && m != rows + 1)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s: ragged feature '%s': row_splits has %lld entries, %lld rows need %lld", who, feature,
                           (long long)m, (long long)rows, (long long)(rows + 1));
  const int64_t *r = loom_tensor_data_const(splits);
  if (r[0] != 0)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: ragged feature '%s': row_splits[0] is %lld, not 0", who,
                           feature, (long long)r[0]);
  for (int64_t i = 1; i < m; i++)
    if (r[i] < r[i - 1])
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "%s: ragged feature '%s': row_splits decrease at entry %lld (%lld after %lld)", who,
                             feature, (long long)i, (long long)r[i], (long long)r[i - 1]);
  if (r[m - 1] != nvalues)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "%s: ragged feature '%s': the last row split is %lld but there are %lld values", who,
                           feature, (long long)r[m - 1], (long long)nvalues);
  return LOOM_OK;
}

loom_code loom__ds_check_paths(const char *who, int nfiles, const char *const *paths, loom_status *st) {
  for (int i = 0; i < nfiles; i++) {
    if (!paths[i]) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: paths[%d] is NULL", who, i);
    FILE *f = fopen(paths[i], "rb");
    if (!f) return loom_status_set(st, LOOM_NOT_FOUND, "%s: cannot open %s: %s", who, paths[i], strerror(errno));
    fclose(f);
  }
  return LOOM_OK;
}

loom_code loom__ds_check_ragged(const loom_dataset *ds, loom_tensor *const *values, const char *who, loom_status *st) {
  for (int c = 0; c < ds->ncomp; c++) {
    const loom_ds_comp *k = &ds->comp[c];
    if (k->ragged != LOOM__RAGGED_VALUES) continue;
    const loom_tensor *v = values[c];
    if (!v) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: ragged feature '%s': the values are missing", who, k->name);
    if (loom_tensor_dtype(v) != k->dtype)
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: ragged feature '%s': the values are %s, the spec says %s",
                             who, k->name, loom_dtype_name(loom_tensor_dtype(v)), loom_dtype_name(k->dtype));
    if (loom_tensor_ndim(v) != 1) {
      char a[128];
      return loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: ragged feature '%s': the values are %s, not 1-D", who,
                             k->name, loom__dims_str(a, sizeof a, loom_tensor_ndim(v), loom_tensor_dims(v)));
    }
    loom_code rc = loom__check_splits(values[k->partner], loom_tensor_numel(v), k->batched ? -1 : 1, who, k->name, st);
    if (rc) return rc;
  }
  return LOOM_OK;
}

loom_code loom__ds_ensure(loom_tensor **t, loom_dtype dt, int ndim, const int64_t *dims, loom_status *st) {
  int64_t n = loom__numel(ndim, dims);
  loom_tensor *x = *t;
  if (x && loom_tensor_dtype(x) == dt && loom_tensor_numel(x) == n) return loom_tensor_reshape(x, ndim, dims, st);
  loom_tensor *y = loom_tensor_new(dt, ndim, dims, st);
  if (!y) return loom_status_code(st) ? loom_status_code(st) : LOOM_RESOURCE_EXHAUSTED;
  loom_tensor_free(x);
  *t = y;
  return LOOM_OK;
}

loom_code loom__ds_hand_over(loom_tensor **dst, loom_tensor **src, loom_status *st) {
  loom_tensor *d = *dst, *s = *src;
  if (d && s && !loom__tensor_owned(d) && loom_tensor_dtype(d) == loom_tensor_dtype(s) &&
      loom_tensor_dtype(d) != LOOM_STRING && loom_tensor_numel(d) == loom_tensor_numel(s)) {
    loom_code rc = loom_tensor_reshape(d, loom_tensor_ndim(s), loom_tensor_dims(s), st);
    size_t nb = loom_tensor_nbytes(s);
    if (!rc && nb) memcpy(loom_tensor_data(d), loom_tensor_data_const(s), nb);
    return rc;
  }
  *dst = s;
  *src = d;
  return LOOM_OK;
}

/* ---- rows path ---- */
loom_code loom__ds_rows_init(loom_ds_rows *rb, const loom_dataset *ds, loom_status *st) {
  memset(rb, 0, sizeof *rb);
  rb->col = loom__calloc((size_t)(ds->ncomp > 0 ? ds->ncomp : 1), sizeof *rb->col);
  if (!rb->col) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", ds->vt->kind);
  rb->ncomp = ds->ncomp;
  for (int c = 0; c < ds->ncomp; c++)
    if (ds->comp[c].ragged == LOOM__RAGGED_VALUES && loom__ds_rowcol_grow_sp(&rb->col[c], 1)) {
      loom__ds_rows_free(rb);
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", ds->vt->kind);
    }
  loom__ds_rows_reset(rb, ds);
  return LOOM_OK;
}

void loom__ds_rows_reset(loom_ds_rows *rb, const loom_dataset *ds) {
  rb->n = 0;
  for (int c = 0; c < rb->ncomp; c++) {
    loom_ds_rowcol *k = &rb->col[c];
    k->nv = 0;
    k->sbl = 0;
    if (ds->comp[c].ragged == LOOM__RAGGED_VALUES) k->sp[0] = 0;
  }
}

void loom__ds_rows_free(loom_ds_rows *rb) {
  if (!rb->col) return;
  for (int c = 0; c < rb->ncomp; c++) {
    loom__free(rb->col[c].v);
    loom__free(rb->col[c].sb);
    loom__free(rb->col[c].sp);
  }
  loom__free(rb->col);
  rb->col = NULL;
}

int loom__ds_rowcol_grow(loom_ds_rowcol *c, int64_t need, size_t es) {
  if (need <= c->vcap) return 0;
  int64_t cap = c->vcap ? c->vcap : 256;
  while (cap < need) cap *= 2;
  void *v = loom__realloc(c->v, (size_t)cap * es);
  if (!v) return -1;
  c->v = v;
  c->vcap = cap;
  return 0;
}
int loom__ds_rowcol_grow_sb(loom_ds_rowcol *c, size_t need) {
  if (need <= c->sbcap) return 0;
  size_t cap = c->sbcap ? c->sbcap : 4096;
  while (cap < need) cap *= 2;
  char *b = loom__realloc(c->sb, cap);
  if (!b) return -1;
  c->sb = b;
  c->sbcap = cap;
  return 0;
}
int loom__ds_rowcol_grow_sp(loom_ds_rowcol *c, int64_t need) {
  if (need <= c->spcap) return 0;
  int64_t cap = c->spcap ? c->spcap : 256;
  while (cap < need) cap *= 2;
  int64_t *p = loom__realloc(c->sp, (size_t)cap * sizeof *p);
  if (!p) return -1;
  c->sp = p;
  c->spcap = cap;
  return 0;
}

/* Column k's nv values into t (shape already set). */
static loom_code rows_fill(loom_tensor *t, const loom_ds_rowcol *k, loom_dtype dt, loom_status *st) {
  if (dt == LOOM_STRING) return loom__tensor_set_strings(t, k->sb, k->sbl, k->v, st);
  if (k->nv) memcpy(loom_tensor_data(t), k->v, (size_t)k->nv * loom_dtype_size(dt));
  return LOOM_OK;
}

loom_code loom__ds_rows_emit(const loom_dataset *ds, const loom_ds_rows *rb, loom_tensor **values, int batched,
                             loom_status *st) {
  loom_code rc;
  for (int c = 0; c < ds->ncomp; c++) {
    const loom_ds_comp *ic = &ds->comp[c];
    const loom_ds_rowcol *k = &rb->col[c];
    if (ic->ragged == LOOM__RAGGED_SPLITS) continue; /* with its values */
    if (ic->ragged == LOOM__RAGGED_VALUES) {
      int64_t ns = rb->n + 1;
      if ((rc = loom__ds_ensure(&values[c], ic->dtype, 1, &k->nv, st)) ||
          (rc = loom__ds_ensure(&values[ic->partner], LOOM_I64, 1, &ns, st)))
        return rc;
      memcpy(loom_tensor_data(values[ic->partner]), k->sp, (size_t)ns * sizeof(int64_t));
    } else if ((rc = loom__ds_ensure(&values[c], ic->dtype, batched ? 1 : 0, &rb->n, st))) {
      return rc;
    }
    if ((rc = rows_fill(values[c], k, ic->dtype, st))) return rc;
  }
  return LOOM_OK;
}

static loom_code end_of_sequence(loom_status *st) { return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence"); }

/* Records a sticky end/error from ds->st and reports it to st. */
static loom_code remember(loom_dataset *ds, loom_code rc, loom_status *st) {
  ds->state = rc;
  if (rc == LOOM_OUT_OF_RANGE) {
    snprintf(ds->state_msg, sizeof ds->state_msg, "End of sequence");
  } else {
    const char *m = loom_status_message(ds->st);
    if (loom_status_code(ds->st) == rc && m[0])
      snprintf(ds->state_msg, sizeof ds->state_msg, "%s", m);
    else
      snprintf(ds->state_msg, sizeof ds->state_msg, "%s dataset failed (%s)", ds->vt->kind, loom_code_name(rc));
  }
  return loom_status_set(st, rc, "%s", ds->state_msg);
}

/* ======================================================================
 * Element spec
 * ====================================================================== */
int loom_dataset_num_components(const loom_dataset *ds) { return ds ? ds->ncomp : 0; }
const char *loom_dataset_component_name(const loom_dataset *ds, int i) {
  return (ds && i >= 0 && i < ds->ncomp) ? ds->comp[i].name : NULL;
}
loom_dtype loom_dataset_component_dtype(const loom_dataset *ds, int i) {
  return (ds && i >= 0 && i < ds->ncomp) ? ds->comp[i].dtype : LOOM_DTYPE_INVALID;
}
int loom_dataset_component_shape(const loom_dataset *ds, int i, int64_t *dims) {
  if (!ds || i < 0 || i >= ds->ncomp) return -1;
  const loom_ds_comp *c = &ds->comp[i];
  if (dims)
    for (int d = 0; d < c->ndim; d++) dims[d] = c->dims[d];
  return c->ndim;
}
int loom_dataset_label_index(const loom_dataset *ds) { return ds ? ds->label : -1; }
int loom_dataset_component_row_splits(const loom_dataset *ds, int i) {
  if (!ds || i < 0 || i >= ds->ncomp || ds->comp[i].ragged != LOOM__RAGGED_VALUES) return -1;
  return ds->comp[i].partner;
}
int loom_dataset_find(const loom_dataset *ds, const char *name) {
  if (!ds || !name) return -1;
  for (int i = 0; i < ds->ncomp; i++)
    if (ds->comp[i].name && !strcmp(ds->comp[i].name, name)) return i;
  return -1;
}

/* ======================================================================
 * Iteration
 * ====================================================================== */
/* One element of an index dataset: one row copied from the source. */
static loom_code ra_element(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  int64_t row;
  loom_code rc = ds->vt->next_index(ds, &row, st);
  if (rc) return rc;
  loom_dataset *src = ds->ra;
  for (int c = 0; c < ds->ncomp; c++) {
    const loom_ds_comp *k = &ds->comp[c];
    if ((rc = loom__ds_ensure(&values[c], k->dtype, k->ndim, k->dims, st))) return rc;
    if ((rc = src->vt->copy_rows(src, c, &row, 1, values[c], st))) return rc;
  }
  return LOOM_OK;
}

loom_code loom_dataset_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  if (!ds || !values) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_next: %s is NULL", ds ? "values" : "ds");
  if (ds->state) return loom_status_set(st, ds->state, "%s", ds->state_msg);
  loom_code rc = ds->ra ? ra_element(ds, values, ds->st) : ds->vt->next(ds, values, ds->st);
  if (rc) return remember(ds, rc, st);
  return LOOM_OK;
}

loom_code loom__ds_next_index(loom_dataset *ds, int64_t *row, loom_status *st) {
  if (ds->state) return loom_status_set(st, ds->state, "%s", ds->state_msg);
  loom_code rc = ds->vt->next_index(ds, row, ds->st);
  if (rc) return remember(ds, rc, st);
  return LOOM_OK;
}

loom_code loom__ds_next_rows(loom_dataset *ds, loom_ds_rows *rb, int64_t want, loom_status *st) {
  if (ds->state) return loom_status_set(st, ds->state, "%s", ds->state_msg);
  loom_code rc = ds->next_rows(ds, rb, want, ds->st);
  if (rc) return remember(ds, rc, st);
  return LOOM_OK;
}

loom_code loom_dataset_reset(loom_dataset *ds, loom_status *st) {
  if (!ds) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "dataset_reset: ds is NULL");
  ds->state = LOOM_OK;
  ds->state_msg[0] = 0;
  loom_code rc = ds->vt->reset ? ds->vt->reset(ds, ds->st) : LOOM_OK;
  if (rc) return remember(ds, rc, st);
  return LOOM_OK;
}

void loom_dataset_free(loom_dataset *ds) {
  if (!ds) return;
  if (ds->vt->destroy) ds->vt->destroy(ds);
  loom__ds_free_shell(ds);
}

/* ======================================================================
 * from_tensors (random access)
 * ====================================================================== */
typedef struct slices_ds {
  loom_dataset base;
  int64_t n, pos;
  loom_tensor **arrays;
  /* string rows are gathered here, then set as one block per batch tensor
   * (loom__tensor_set_strings): no malloc per string in steady state */
  char *sb;
  size_t sbcap;
  size_t *ol;
  int64_t olcap;
} slices_ds;

static loom_code slices_next_index(loom_dataset *ds, int64_t *row, loom_status *st) {
  slices_ds *s = (slices_ds *)ds;
  if (s->pos >= s->n) return end_of_sequence(st);
  *row = s->pos++;
  return LOOM_OK;
}
static loom_code slices_reset(loom_dataset *ds, loom_status *st) {
  (void)st;
  ((slices_ds *)ds)->pos = 0;
  return LOOM_OK;
}
static void slices_destroy(loom_dataset *ds) {
  slices_ds *s = (slices_ds *)ds;
  if (s->arrays)
    for (int i = 0; i < ds->ncomp; i++) loom_tensor_free(s->arrays[i]);
  loom__free(s->arrays);
  loom__free(s->sb);
  loom__free(s->ol);
}
static int64_t slices_rows(const loom_dataset *ds) { return ((const slices_ds *)ds)->n; }

static loom_code slices_copy_rows(loom_dataset *ds, int c, const int64_t *idx, int64_t k, loom_tensor *dst,
                                  loom_status *st) {
  slices_ds *s = (slices_ds *)ds;
  const loom_tensor *a = s->arrays[c];
  loom_dtype dt = loom_tensor_dtype(a);
  int64_t rn = s->n ? loom_tensor_numel(a) / s->n : 0;
  if (dt == LOOM_STRING && loom__tensor_owned(dst)) {
    /* Two passes over the batch's strings: (1) their lengths, the string
     * headers read once (shuffled rows land anywhere in the column, so the
     * headers and bytes of rows a few ahead are prefetched); (2) the bytes
     * into one block. ol holds (pointer, length) after pass 1, then
     * (offset, length) for loom__tensor_set_strings. */
    int64_t ne = k * rn;
    if (ne > s->olcap) {
      size_t *ol = loom__realloc(s->ol, (size_t)ne * 2 * sizeof *ol);
      if (!ol) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "from_tensors: out of memory for %lld strings", (long long)ne);
      s->ol = ol;
      s->olcap = ne;
    }
    /* headers 32 rows ahead, bytes 16 rows ahead (their header is in cache by then) */
    enum { AHEAD = 16 };
    const loom_tstring *hs = loom__tensor_raw(a);
    size_t nb = 0;
    for (int64_t j = 0; j < k; j++) {
      if (j + 2 * AHEAD < k) __builtin_prefetch(hs + idx[j + 2 * AHEAD] * rn);
      if (j + AHEAD < k && hs[idx[j + AHEAD] * rn].ptr) __builtin_prefetch(hs[idx[j + AHEAD] * rn].ptr);
      for (int64_t e = 0; e < rn; e++) {
        const loom_tstring *h = hs + idx[j] * rn + e;
        size_t len = h->ptr ? h->len : 0;
        s->ol[2 * (j * rn + e)] = (size_t)(uintptr_t)(h->ptr ? h->ptr : "");
        s->ol[2 * (j * rn + e) + 1] = len;
        nb += len + 1; /* NUL-terminated, as set_string's */
      }
    }
    if (nb > s->sbcap || !s->sb) {
      size_t cap = nb < 4096 ? 4096 : nb + nb / 2;
      char *b = loom__realloc(s->sb, cap);
      if (!b) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "from_tensors: out of memory for %zu bytes of strings", nb);
      s->sb = b;
      s->sbcap = cap;
    }
    size_t off = 0;
    for (int64_t i = 0; i < ne; i++) {
      const char *x = (const char *)(uintptr_t)s->ol[2 * i];
      size_t len = s->ol[2 * i + 1];
      char *d = s->sb + off;
      if (len <= 8) /* the common short category: no call */
        for (size_t b = 0; b < len; b++) d[b] = x[b];
      else
        memcpy(d, x, len);
      d[len] = 0;
      s->ol[2 * i] = off;
      off += len + 1;
    }
    return loom__tensor_set_strings(dst, s->sb, nb, s->ol, st);
  }
  if (dt == LOOM_STRING) {
    for (int64_t j = 0; j < k; j++)
      for (int64_t e = 0; e < rn; e++) {
        size_t len;
        const char *x = loom_tensor_get_string(a, idx[j] * rn + e, &len);
        loom_code rc = loom_tensor_set_string(dst, j * rn + e, x, len, st);
        if (rc) return rc;
      }
    return LOOM_OK;
  }
  size_t rb = (size_t)rn * loom_dtype_size(dt);
  const uint8_t *src = loom_tensor_data_const(a);
  uint8_t *out = loom_tensor_data(dst);
  if (rb == 4) { /* one 4-byte value a row (a [n, 1] f32/i32 column): a plain gather */
    const uint32_t *s4 = (const uint32_t *)src;
    uint32_t *o4 = (uint32_t *)out;
    enum { AHEAD = 16 }; /* shuffled rows: their cache lines a few rows ahead */
    for (int64_t j = 0; j < k; j++) {
      if (j + AHEAD < k) __builtin_prefetch(s4 + idx[j + AHEAD]);
      o4[j] = s4[idx[j]];
    }
    return LOOM_OK;
  }
  if (rb == 8) {
    const uint64_t *s8 = (const uint64_t *)src;
    uint64_t *o8 = (uint64_t *)out;
    enum { AHEAD = 16 };
    for (int64_t j = 0; j < k; j++) {
      if (j + AHEAD < k) __builtin_prefetch(s8 + idx[j + AHEAD]);
      o8[j] = s8[idx[j]];
    }
    return LOOM_OK;
  }
  for (int64_t j = 0; j < k;) {
    int64_t run = 1; /* consecutive rows in one memcpy */
    while (j + run < k && idx[j + run] == idx[j] + run) run++;
    memcpy(out + (size_t)j * rb, src + (size_t)idx[j] * rb, (size_t)run * rb);
    j += run;
  }
  return LOOM_OK;
}

static const loom_ds_vtable slices_vt = {"from_tensors", NULL, slices_next_index, slices_reset, slices_destroy,
                                         slices_copy_rows, slices_rows};

int loom__ds_label_index(int n, const char *const *names, const char *label_name, const char *who, loom_status *st) {
  if (!label_name) return -1;
  int label = -1;
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], label_name)) label = i;
  if (label < 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: label_name '%s' is not one of the names", who, label_name);
    return -2;
  }
  return label;
}

/* take: the dataset takes the arrays (on success) instead of copying them. */
static loom_dataset *from_tensors(int n, const char *const *names, loom_tensor *const *arrays, const char *label_name,
                                  int take, loom_status *st) {
  if (n <= 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_tensors: n must be positive, got %d", n);
    return NULL;
  }
  if (!names || !arrays) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_tensors: %s is NULL", !names ? "names" : "arrays");
    return NULL;
  }
  int64_t rows = -1;
  for (int i = 0; i < n; i++) {
    if (!names[i] || !names[i][0]) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_tensors: names[%d] is %s", i, names[i] ? "empty" : "NULL");
      return NULL;
    }
    for (int j = 0; j < i; j++)
      if (!strcmp(names[i], names[j])) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_tensors: names[%d] and names[%d] are both '%s'", j, i,
                        names[i]);
        return NULL;
      }
    const loom_tensor *a = arrays[i];
    if (!a) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_tensors: arrays[%d] ('%s') is NULL", i, names[i]);
      return NULL;
    }
    for (int j = 0; take && j < i; j++)
      if (arrays[j] == a) { /* taken twice would be freed twice */
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_tensors_taken: arrays[%d] and arrays[%d] are the same tensor",
                        j, i);
        return NULL;
      }
    loom_dtype adt = loom_tensor_dtype(a);
    int64_t arows = loom_tensor_dim(a, 0);
    if (adt <= LOOM_DTYPE_INVALID || adt >= LOOM_DTYPE_COUNT) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_tensors: arrays[%d] ('%s') has an invalid dtype", i, names[i]);
      return NULL;
    }
    if (loom_tensor_ndim(a) < 1) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_tensors: arrays[%d] ('%s') is a scalar; slicing needs rank >= 1",
                      i, names[i]);
      return NULL;
    }
    if (rows < 0) {
      rows = arows;
    } else if (arows != rows) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "from_tensors: arrays[%d] ('%s') has %lld rows (dim 0) but arrays[0] ('%s') has %lld", i,
                      names[i], (long long)arows, names[0], (long long)rows);
      return NULL;
    }
  }
  int label = loom__ds_label_index(n, names, label_name, "from_tensors", st);
  if (label == -2) return NULL;
  slices_ds *s = (slices_ds *)loom__ds_new(sizeof(slices_ds), &slices_vt, n, st);
  if (!s) return NULL;
  loom_dataset *ds = &s->base;
  ds->ra = ds;
  ds->label = label;
  s->n = rows;
  s->arrays = loom__calloc((size_t)n, sizeof *s->arrays);
  if (!s->arrays) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "from_tensors: out of memory");
    loom_dataset_free(ds);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    const loom_tensor *a = arrays[i];
    if (loom__ds_set_comp(ds, i, names[i], loom_tensor_dtype(a), loom_tensor_ndim(a) - 1, loom_tensor_dims(a) + 1, st) ||
        (!take && !(s->arrays[i] = loom_tensor_copy(a, st)))) {
      loom_dataset_free(ds); /* frees the copies made so far, never the caller's arrays */
      return NULL;
    }
  }
  if (take)
    for (int i = 0; i < n; i++) s->arrays[i] = arrays[i];
  return ds;
}

loom_dataset *loom_dataset_from_tensors(int n, const char *const *names, const loom_tensor *const *arrays,
                                        const char *label_name, loom_status *st) {
  return from_tensors(n, names, (loom_tensor *const *)arrays, label_name, 0, st);
}

loom_dataset *loom_dataset_from_tensors_taken(int n, const char *const *names, loom_tensor *const *arrays,
                                              const char *label_name, loom_status *st) {
  return from_tensors(n, names, arrays, label_name, 1, st);
}

/* ======================================================================
 * from_ragged_tensors (general path: rows of ragged features differ in size)
 * ====================================================================== */
typedef struct rslices_ds {
  loom_dataset base;
  int nf;
  int64_t n, pos;
  loom_tensor **values, **splits; /* per feature; splits NULL = dense */
  int *comp;                      /* per feature: its (values) component */
} rslices_ds;

/* Copies elements [from, from + cnt) of src into dst[0 .. cnt). */
static loom_code copy_span(loom_tensor *dst, const loom_tensor *src, int64_t from, int64_t cnt, loom_status *st) {
  if (loom_tensor_dtype(src) == LOOM_STRING) {
    for (int64_t i = 0; i < cnt; i++) {
      size_t len;
      const char *x = loom_tensor_get_string(src, from + i, &len);
      loom_code rc = loom_tensor_set_string(dst, i, x, len, st);
      if (rc) return rc;
    }
    return LOOM_OK;
  }
  size_t es = loom_dtype_size(loom_tensor_dtype(src));
  if (cnt) memcpy(loom_tensor_data(dst), (const uint8_t *)loom_tensor_data_const(src) + (size_t)from * es, (size_t)cnt * es);
  return LOOM_OK;
}

static loom_code rslices_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  rslices_ds *r = (rslices_ds *)ds;
  if (r->pos >= r->n) return end_of_sequence(st);
  int64_t row = r->pos++;
  for (int f = 0; f < r->nf; f++) {
    const loom_ds_comp *k = &ds->comp[r->comp[f]];
    const loom_tensor *v = r->values[f];
    loom_code rc;
    if (r->splits[f]) {
      const int64_t *sp = loom_tensor_data_const(r->splits[f]);
      int64_t len = sp[row + 1] - sp[row], two = 2;
      if ((rc = loom__ds_ensure(&values[r->comp[f]], k->dtype, 1, &len, st)) ||
          (rc = copy_span(values[r->comp[f]], v, sp[row], len, st)) ||
          (rc = loom__ds_ensure(&values[k->partner], LOOM_I64, 1, &two, st)))
        return rc;
      int64_t *o = loom_tensor_data(values[k->partner]);
      o[0] = 0;
      o[1] = len;
    } else {
      int64_t rn = loom__ds_row_numel(k);
      if ((rc = loom__ds_ensure(&values[r->comp[f]], k->dtype, k->ndim, k->dims, st)) ||
          (rc = copy_span(values[r->comp[f]], v, row * rn, rn, st)))
        return rc;
    }
  }
  return LOOM_OK;
}
static loom_code rslices_reset(loom_dataset *ds, loom_status *st) {
  (void)st;
  ((rslices_ds *)ds)->pos = 0;
  return LOOM_OK;
}
static void rslices_destroy(loom_dataset *ds) {
  rslices_ds *r = (rslices_ds *)ds;
  for (int f = 0; f < r->nf; f++) {
    if (r->values) loom_tensor_free(r->values[f]);
    if (r->splits) loom_tensor_free(r->splits[f]);
  }
  loom__free(r->values);
  loom__free(r->splits);
  loom__free(r->comp);
}
static const loom_ds_vtable rslices_vt = {"from_ragged_tensors", rslices_next, NULL, rslices_reset, rslices_destroy,
                                          NULL, NULL};

loom_dataset *loom_dataset_from_ragged_tensors(int n, const char *const *names, const loom_tensor *const *values,
                                               const loom_tensor *const *row_splits, const char *label_name,
                                               loom_status *st) {
  const char *who = "from_ragged_tensors";
  if (n <= 0 || !names || !values) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: %s", who,
                    n <= 0 ? "n must be positive" : !names ? "names is NULL" : "values is NULL");
    return NULL;
  }
  int64_t rows = -1;
  int ncomp = 0, label = -1;
  for (int i = 0; i < n; i++) {
    if (!names[i] || !names[i][0]) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: names[%d] is %s", who, i, names[i] ? "empty" : "NULL");
      return NULL;
    }
    const loom_tensor *v = values[i], *sp = row_splits ? row_splits[i] : NULL;
    if (!v) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature '%s': values is NULL", who, names[i]);
      return NULL;
    }
    loom_dtype dt = loom_tensor_dtype(v);
    if (dt <= LOOM_DTYPE_INVALID || dt >= LOOM_DTYPE_COUNT) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature '%s' has an invalid dtype", who, names[i]);
      return NULL;
    }
    int64_t frows;
    if (sp) {
      if (loom_tensor_ndim(v) != 1) {
        char a[128];
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: ragged feature '%s': the values are %s, not 1-D", who,
                        names[i], loom__dims_str(a, sizeof a, loom_tensor_ndim(v), loom_tensor_dims(v)));
        return NULL;
      }
      if (loom__check_splits(sp, loom_tensor_numel(v), -1, who, names[i], st)) return NULL;
      frows = loom_tensor_dim(sp, 0) - 1;
      ncomp += 2;
    } else {
      if (loom_tensor_ndim(v) < 1) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature '%s' is a scalar; slicing needs rank >= 1", who,
                        names[i]);
        return NULL;
      }
      frows = loom_tensor_dim(v, 0);
      ncomp += 1;
    }
    if (rows < 0) {
      rows = frows;
    } else if (frows != rows) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: feature '%s' has %lld rows but feature '%s' has %lld", who,
                      names[i], (long long)frows, names[0], (long long)rows);
      return NULL;
    }
    if (label_name && !strcmp(names[i], label_name)) {
      if (sp) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: the label '%s' is ragged; labels must be dense", who, names[i]);
        return NULL;
      }
      label = ncomp - 1;
    }
  }
  if (label_name && label < 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: label_name '%s' is not one of the names", who, label_name);
    return NULL;
  }
  rslices_ds *r = (rslices_ds *)loom__ds_new(sizeof(rslices_ds), &rslices_vt, ncomp, st);
  if (!r) return NULL;
  loom_dataset *ds = &r->base;
  ds->label = label;
  r->n = rows;
  r->values = loom__calloc((size_t)n, sizeof *r->values);
  r->splits = loom__calloc((size_t)n, sizeof *r->splits);
  r->comp = loom__calloc((size_t)n, sizeof *r->comp);
  if (!r->values || !r->splits || !r->comp) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", who);
    loom_dataset_free(ds);
    return NULL;
  }
  r->nf = n;
  int c = 0;
  for (int i = 0; i < n; i++) {
    const loom_tensor *v = values[i], *sp = row_splits ? row_splits[i] : NULL;
    r->comp[i] = c;
    if (!(r->values[i] = loom_tensor_copy(v, st)) || (sp && !(r->splits[i] = loom_tensor_copy(sp, st)))) {
      loom_dataset_free(ds);
      return NULL;
    }
    loom_code rc = sp ? loom__ds_set_ragged(ds, c, names[i], loom_tensor_dtype(v), st)
                      : loom__ds_set_comp(ds, c, names[i], loom_tensor_dtype(v), loom_tensor_ndim(v) - 1,
                                          loom_tensor_dims(v) + 1, st);
    if (rc) {
      loom_dataset_free(ds);
      return NULL;
    }
    c += sp ? 2 : 1;
  }
  for (int i = 0; i < ncomp; i++)
    for (int j = 0; j < i; j++)
      if (!strcmp(ds->comp[i].name, ds->comp[j].name)) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: two components are named '%s'", who, ds->comp[i].name);
        loom_dataset_free(ds);
        return NULL;
      }
  return ds;
}

/* ======================================================================
 * map
 * ====================================================================== */
typedef struct map_ds {
  loom_dataset base;
  loom_dataset *in;
  loom_map_fn fn;
  void *user;
} map_ds;

static loom_code map_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  map_ds *m = (map_ds *)ds;
  loom_code rc = loom_dataset_next(m->in, values, st);
  if (rc) return rc;
  loom_status_clear(st);
  rc = m->fn(m->user, ds->ncomp, values, st);
  if (rc) {
    if (loom_status_code(st) != rc || !loom_status_message(st)[0])
      loom_status_set(st, rc, "map: the map function returned %s", loom_code_name(rc));
    return rc;
  }
  for (int c = 0; c < ds->ncomp; c++) {
    const loom_ds_comp *k = &ds->comp[c];
    const loom_tensor *t = values[c];
    int ok = t && loom_tensor_dtype(t) == k->dtype && loom_tensor_ndim(t) == k->ndim;
    for (int d = 0; ok && d < k->ndim; d++) ok = k->dims[d] < 0 || k->dims[d] == loom_tensor_dim(t, d);
    if (!ok) {
      char a[128], b[128];
      if (!t)
        return loom_status_set(st, LOOM_INVALID_ARGUMENT, "map: the map function left component '%s' NULL", k->name);
      return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                             "map: the map function returned component '%s' as %s %s; the dataset's spec is %s %s",
                             k->name, loom_dtype_name(loom_tensor_dtype(t)),
                             loom__dims_str(a, sizeof a, loom_tensor_ndim(t), loom_tensor_dims(t)),
                             loom_dtype_name(k->dtype), loom__dims_str(b, sizeof b, k->ndim, k->dims));
    }
  }
  return loom__ds_check_ragged(ds, values, "map", st);
}
static loom_code map_reset(loom_dataset *ds, loom_status *st) { return loom_dataset_reset(((map_ds *)ds)->in, st); }
static void map_destroy(loom_dataset *ds) { loom_dataset_free(((map_ds *)ds)->in); }
static const loom_ds_vtable map_vt = {"map", map_next, NULL, map_reset, map_destroy, NULL, NULL};

/* Common prologue of the transformations: a new dataset with in's spec. */
static loom_dataset *transform_new(loom_dataset *in, size_t size, const loom_ds_vtable *vt, loom_status *st) {
  return loom__ds_transform_new(in, size, vt, st);
}
loom_dataset *loom__ds_transform_new(loom_dataset *in, size_t size, const loom_ds_vtable *vt, loom_status *st) {
  if (!in) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "%s: the input dataset is NULL", vt->kind);
    return NULL;
  }
  loom_dataset *ds = loom__ds_new(size, vt, in->ncomp, st);
  if (!ds) {
    loom_dataset_free(in);
    return NULL;
  }
  if (loom__ds_copy_spec(ds, in, st)) {
    loom__ds_free_shell(ds);
    loom_dataset_free(in);
    return NULL;
  }
  return ds;
}

loom_dataset *loom_dataset_map(loom_dataset *in, loom_map_fn fn, void *user, loom_status *st) {
  if (in && !fn) {
    loom_dataset_free(in);
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "map: fn is NULL");
    return NULL;
  }
  map_ds *m = (map_ds *)transform_new(in, sizeof(map_ds), &map_vt, st);
  if (!m) return NULL;
  m->in = in;
  m->fn = fn;
  m->user = user;
  return &m->base;
}

/* ======================================================================
 * shuffle
 * ====================================================================== */
typedef struct shuffle_ds {
  loom_dataset base;
  loom_dataset *in;
  int64_t cap;           /* buffer_size */
  uint64_t seed, epoch, counter;
  int reshuffle;
  int in_done;
  int64_t fill;          /* elements in the buffer */
  int64_t alloc;         /* slots allocated (grows up to cap) */
  int64_t *rows;         /* index mode */
  loom_tensor ***elems;  /* general mode: slot -> ncomp tensors */
} shuffle_ds;

/* Uniform in [0, n): Philox4x32-10 keyed by the seed, counter (draw,
 * epoch). */
static int64_t shuffle_draw(shuffle_ds *s, int64_t n) {
  uint32_t key[2] = {(uint32_t)s->seed, (uint32_t)(s->seed >> 32)};
  uint32_t ctr[4] = {(uint32_t)s->counter, (uint32_t)(s->counter >> 32), (uint32_t)s->epoch,
                     (uint32_t)(s->epoch >> 32)};
  uint32_t out[4];
  s->counter++;
  loom_philox4x32_10(ctr, key, out);
  uint64_t r = (uint64_t)out[0] | (uint64_t)out[1] << 32;
  return (int64_t)(((unsigned __int128)r * (uint64_t)n) >> 64);
}

static loom_code shuffle_grow(shuffle_ds *s, loom_status *st) {
  int64_t na = s->alloc ? s->alloc * 2 : 64;
  if (na > s->cap) na = s->cap;
  if (s->base.ra) {
    int64_t *r = loom__realloc(s->rows, (size_t)na * sizeof *r);
    if (!r) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "shuffle: out of memory for the buffer");
    s->rows = r;
  } else {
    loom_tensor ***e = loom__realloc(s->elems, (size_t)na * sizeof *e);
    if (!e) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "shuffle: out of memory for the buffer");
    s->elems = e;
    for (int64_t i = s->alloc; i < na; i++) e[i] = NULL;
    for (int64_t i = s->alloc; i < na; i++) {
      if (!(e[i] = loom__calloc((size_t)s->base.ncomp, sizeof **e))) {
        s->alloc = i;
        return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "shuffle: out of memory for the buffer");
      }
    }
  }
  s->alloc = na;
  return LOOM_OK;
}

/* Fills the buffer up to cap from the input. */
static loom_code shuffle_fill(shuffle_ds *s, loom_status *st) {
  while (!s->in_done && s->fill < s->cap) {
    loom_code rc;
    if (s->fill == s->alloc && (rc = shuffle_grow(s, st))) return rc;
    rc = s->base.ra ? loom__ds_next_index(s->in, &s->rows[s->fill], st) : loom_dataset_next(s->in, s->elems[s->fill], st);
    if (rc == LOOM_OUT_OF_RANGE) {
      s->in_done = 1;
      break;
    }
    if (rc) return rc;
    s->fill++;
  }
  return LOOM_OK;
}

static loom_code shuffle_next_index(loom_dataset *ds, int64_t *row, loom_status *st) {
  shuffle_ds *s = (shuffle_ds *)ds;
  loom_code rc = shuffle_fill(s, st);
  if (rc) return rc;
  if (!s->fill) return end_of_sequence(st);
  int64_t j = shuffle_draw(s, s->fill);
  *row = s->rows[j];
  s->rows[j] = s->rows[--s->fill];
  return LOOM_OK;
}

static loom_code shuffle_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  shuffle_ds *s = (shuffle_ds *)ds;
  loom_code rc = shuffle_fill(s, st);
  if (rc) return rc;
  if (!s->fill) return end_of_sequence(st);
  int64_t j = shuffle_draw(s, s->fill);
  loom_tensor **e = s->elems[j];
  for (int c = 0; c < ds->ncomp; c++)
    if ((rc = loom__ds_hand_over(&values[c], &e[c], st))) return rc;
  /* the last element moves into the hole; the emptied slot goes last */
  s->fill--;
  s->elems[j] = s->elems[s->fill];
  s->elems[s->fill] = e;
  return LOOM_OK;
}

static loom_code shuffle_reset(loom_dataset *ds, loom_status *st) {
  shuffle_ds *s = (shuffle_ds *)ds;
  s->fill = 0;
  s->in_done = 0;
  s->counter = 0;
  if (s->reshuffle) s->epoch++;
  return loom_dataset_reset(s->in, st);
}

static void shuffle_destroy(loom_dataset *ds) {
  shuffle_ds *s = (shuffle_ds *)ds;
  loom__free(s->rows);
  if (s->elems)
    for (int64_t i = 0; i < s->alloc; i++) {
      if (s->elems[i])
        for (int c = 0; c < ds->ncomp; c++) loom_tensor_free(s->elems[i][c]);
      loom__free(s->elems[i]);
    }
  loom__free(s->elems);
  loom_dataset_free(s->in);
}

static const loom_ds_vtable shuffle_vt = {"shuffle", shuffle_next, shuffle_next_index, shuffle_reset, shuffle_destroy,
                                          NULL, NULL};

loom_dataset *loom_dataset_shuffle(loom_dataset *in, int64_t buffer_size, uint64_t seed, int reshuffle_each_iteration,
                                   loom_status *st) {
  if (in && buffer_size <= 0) {
    loom_dataset_free(in);
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "shuffle: buffer_size must be positive, got %lld",
                    (long long)buffer_size);
    return NULL;
  }
  shuffle_ds *s = (shuffle_ds *)transform_new(in, sizeof(shuffle_ds), &shuffle_vt, st);
  if (!s) return NULL;
  s->in = in;
  s->base.ra = in->ra;
  s->cap = buffer_size;
  s->seed = seed;
  s->reshuffle = reshuffle_each_iteration != 0;
  return &s->base;
}

/* ======================================================================
 * batch
 * ====================================================================== */
typedef struct batch_ds {
  loom_dataset base;
  loom_dataset *in;
  int64_t bs;
  int drop;
  int64_t *rows;        /* index mode: bs */
  loom_tensor ***elems; /* general mode: bs slots, allocated on first use */
  loom_ds_rows rb;      /* rows mode (input has next_rows): allocated on first use */
} batch_ds;

/* Copies src (dims sdims) into dst (dims ddims, each >= sdims) at the same
 * multi-index; the rest of dst is left alone (already zeroed). */
static void pad_copy(uint8_t *dst, const int64_t *ddims, const uint8_t *src, const int64_t *sdims, int nd, size_t es) {
  if (nd == 0) {
    memcpy(dst, src, es);
    return;
  }
  if (nd == 1) {
    if (sdims[0]) memcpy(dst, src, (size_t)sdims[0] * es);
    return;
  }
  size_t ds_ = (size_t)loom__numel(nd - 1, ddims + 1) * es, ss = (size_t)loom__numel(nd - 1, sdims + 1) * es;
  for (int64_t i = 0; i < sdims[0]; i++) pad_copy(dst + i * ds_, ddims + 1, src + i * ss, sdims + 1, nd - 1, es);
}

/* Flat index in a tensor of dims ddims of the element at flat index i of a
 * tensor of dims sdims. */
static int64_t pad_index(int64_t i, const int64_t *sdims, const int64_t *ddims, int nd) {
  int64_t out = 0, mul = 1;
  for (int d = nd - 1; d >= 0; d--) {
    int64_t x = sdims[d] ? i % sdims[d] : 0;
    i = sdims[d] ? i / sdims[d] : 0;
    out += x * mul;
    mul *= ddims[d];
  }
  return out;
}

/* A ragged pair of k elements: values concatenated, splits merged. */
static loom_code batch_ragged(batch_ds *b, int c, int64_t k, loom_tensor **values, loom_status *st) {
  const loom_ds_comp *ic = &b->in->comp[c];
  int s = ic->partner;
  int64_t total = 0, rows = k + 1;
  for (int64_t j = 0; j < k; j++) total += loom_tensor_numel(b->elems[j][c]);
  loom_code rc = loom__ds_ensure(&values[c], ic->dtype, 1, &total, st);
  if (!rc) rc = loom__ds_ensure(&values[s], LOOM_I64, 1, &rows, st);
  if (rc) return rc;
  int64_t *sp = loom_tensor_data(values[s]);
  sp[0] = 0;
  int64_t at = 0;
  size_t es = ic->dtype == LOOM_STRING ? 0 : loom_dtype_size(ic->dtype);
  uint8_t *o = es ? loom_tensor_data(values[c]) : NULL;
  for (int64_t j = 0; j < k; j++) {
    const loom_tensor *e = b->elems[j][c];
    int64_t n = loom_tensor_numel(e);
    if (!es) {
      for (int64_t i = 0; i < n; i++) {
        size_t len;
        const char *x = loom_tensor_get_string(e, i, &len);
        if ((rc = loom_tensor_set_string(values[c], at + i, x, len, st))) return rc;
      }
    } else if (n) {
      memcpy(o + (size_t)at * es, loom_tensor_data_const(e), (size_t)n * es);
    }
    at += n;
    sp[j + 1] = at;
  }
  return LOOM_OK;
}

static loom_code batch_assemble(batch_ds *b, int64_t k, loom_tensor **values, loom_status *st) {
  loom_dataset *ds = &b->base;
  for (int64_t j = 0; j < k; j++) {
    loom_code rc = loom__ds_check_ragged(b->in, b->elems[j], "batch", st);
    if (rc) return rc;
  }
  for (int c = 0; c < ds->ncomp; c++) {
    const loom_ds_comp *ic = &b->in->comp[c];
    if (ic->ragged == LOOM__RAGGED_SPLITS) continue; /* with its values */
    if (ic->ragged == LOOM__RAGGED_VALUES) {
      loom_code rc = batch_ragged(b, c, k, values, st);
      if (rc) return rc;
      continue;
    }
    int nd = ic->ndim;
    int64_t dims[LOOM_MAX_DIMS];
    dims[0] = k;
    int padded = 0;
    for (int64_t j = 0; j < k; j++) {
      const loom_tensor *e = b->elems[j][c];
      if (!e || loom_tensor_dtype(e) != ic->dtype || loom_tensor_ndim(e) != nd) {
        char a[128];
        return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                               "batch: element %lld of component '%s' is %s %s, the input's spec says %s of rank %d",
                               (long long)j, ic->name, e ? loom_dtype_name(loom_tensor_dtype(e)) : "NULL",
                               e ? loom__dims_str(a, sizeof a, loom_tensor_ndim(e), loom_tensor_dims(e)) : "",
                               loom_dtype_name(ic->dtype), nd);
      }
    }
    for (int d = 0; d < nd; d++) {
      int64_t m = ic->dims[d];
      if (m < 0) {
        m = 0;
        for (int64_t j = 0; j < k; j++) {
          int64_t ed = loom_tensor_dim(b->elems[j][c], d);
          if (ed > m) m = ed;
        }
      }
      dims[d + 1] = m;
    }
    for (int64_t j = 0; j < k; j++) {
      const loom_tensor *e = b->elems[j][c];
      const int64_t *edims = loom_tensor_dims(e);
      for (int d = 0; d < nd; d++)
        if (edims[d] != dims[d + 1]) {
          if (ic->dims[d] >= 0) {
            char a[128], bb[128];
            return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                                   "batch: cannot batch component '%s': element %lld has shape %s, expected %s",
                                   ic->name, (long long)j, loom__dims_str(a, sizeof a, nd, edims),
                                   loom__dims_str(bb, sizeof bb, nd, dims + 1));
          }
          padded = 1;
        }
    }
    loom_code rc = loom__ds_ensure(&values[c], ic->dtype, nd + 1, dims, st);
    if (rc) return rc;
    loom_tensor *out = values[c];
    int64_t rn = loom__numel(nd, dims + 1);
    int64_t on = loom_tensor_numel(out);
    if (ic->dtype == LOOM_STRING) {
      if (padded) { /* every slot "" or the component's padding value (FixedLenSequenceFeature's default_value) */
        size_t pl = 0;
        const char *pv = ic->pad ? loom_tensor_get_string(ic->pad, 0, &pl) : "";
        for (int64_t i = 0; i < on; i++)
          if ((rc = loom_tensor_set_string(out, i, pv, pl, st))) return rc;
      }
      for (int64_t j = 0; j < k; j++) {
        const loom_tensor *e = b->elems[j][c];
        const int64_t *edims = loom_tensor_dims(e);
        int64_t en = loom_tensor_numel(e);
        for (int64_t i = 0; i < en; i++) {
          int64_t di = j * rn + (padded ? pad_index(i, edims, dims + 1, nd) : i);
          size_t len;
          const char *x = loom_tensor_get_string(e, i, &len);
          if ((rc = loom_tensor_set_string(out, di, x, len, st))) return rc;
        }
      }
    } else {
      size_t es = loom_dtype_size(ic->dtype), rb = (size_t)rn * es;
      uint8_t *o = loom_tensor_data(out);
      if (padded && !ic->pad) {
        memset(o, 0, loom_tensor_nbytes(out));
      } else if (padded) { /* the component's padding value (FixedLenSequenceFeature's default_value) */
        const void *pv = loom_tensor_data_const(ic->pad);
        for (int64_t i = 0; i < on; i++) memcpy(o + (size_t)i * es, pv, es);
      }
      for (int64_t j = 0; j < k; j++) {
        const loom_tensor *e = b->elems[j][c];
        if (!padded)
          memcpy(o + (size_t)j * rb, loom_tensor_data_const(e), rb);
        else
          pad_copy(o + (size_t)j * rb, dims + 1, loom_tensor_data_const(e), loom_tensor_dims(e), nd, es);
      }
    }
  }
  return LOOM_OK;
}

static loom_code batch_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  batch_ds *b = (batch_ds *)ds;
  int64_t k = 0;
  loom_code rc;
  if (b->in->ra) {
    loom_dataset *src = b->in->ra;
    while (k < b->bs) {
      rc = loom__ds_next_index(b->in, &b->rows[k], st);
      if (rc == LOOM_OUT_OF_RANGE) break;
      if (rc) return rc;
      k++;
    }
    if (!k || (b->drop && k < b->bs)) return end_of_sequence(st);
    for (int c = 0; c < ds->ncomp; c++) {
      const loom_ds_comp *ic = &b->in->comp[c];
      int64_t dims[LOOM_MAX_DIMS];
      dims[0] = k;
      for (int d = 0; d < ic->ndim; d++) dims[d + 1] = ic->dims[d];
      if ((rc = loom__ds_ensure(&values[c], ic->dtype, ic->ndim + 1, dims, st))) return rc;
      if ((rc = src->vt->copy_rows(src, c, b->rows, k, values[c], st))) return rc;
    }
    return LOOM_OK;
  }
  if (b->in->next_rows) {
    if (!b->rb.col && (rc = loom__ds_rows_init(&b->rb, b->in, st))) return rc;
    loom__ds_rows_reset(&b->rb, b->in);
    while (b->rb.n < b->bs) {
      rc = loom__ds_next_rows(b->in, &b->rb, b->bs - b->rb.n, st);
      if (rc == LOOM_OUT_OF_RANGE) break;
      if (rc) return rc;
    }
    k = b->rb.n;
    if (!k || (b->drop && k < b->bs)) return end_of_sequence(st);
    return loom__ds_rows_emit(b->in, &b->rb, values, 1, st);
  }
  if (!b->elems) {
    b->elems = loom__calloc((size_t)b->bs, sizeof *b->elems);
    if (!b->elems) return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "batch: out of memory");
  }
  while (k < b->bs) {
    if (!b->elems[k] && !(b->elems[k] = loom__calloc((size_t)ds->ncomp, sizeof **b->elems)))
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "batch: out of memory");
    rc = loom_dataset_next(b->in, b->elems[k], st);
    if (rc == LOOM_OUT_OF_RANGE) break;
    if (rc) return rc;
    k++;
  }
  if (!k || (b->drop && k < b->bs)) return end_of_sequence(st);
  return batch_assemble(b, k, values, st);
}

static loom_code batch_reset(loom_dataset *ds, loom_status *st) { return loom_dataset_reset(((batch_ds *)ds)->in, st); }
static void batch_destroy(loom_dataset *ds) {
  batch_ds *b = (batch_ds *)ds;
  loom__free(b->rows);
  loom__ds_rows_free(&b->rb);
  if (b->elems)
    for (int64_t i = 0; i < b->bs; i++) {
      if (b->elems[i])
        for (int c = 0; c < ds->ncomp; c++) loom_tensor_free(b->elems[i][c]);
      loom__free(b->elems[i]);
    }
  loom__free(b->elems);
  loom_dataset_free(b->in);
}
static const loom_ds_vtable batch_vt = {"batch", batch_next, NULL, batch_reset, batch_destroy, NULL, NULL};

loom_dataset *loom_dataset_batch(loom_dataset *in, int64_t batch_size, int drop_remainder, loom_status *st) {
  if (in && batch_size <= 0) {
    loom_dataset_free(in);
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "batch: batch_size must be positive, got %lld", (long long)batch_size);
    return NULL;
  }
  if (in)
    for (int c = 0; c < in->ncomp; c++) {
      if (in->comp[c].ragged && in->comp[c].batched) {
        const loom_ds_comp *v = &in->comp[in->comp[c].ragged == LOOM__RAGGED_VALUES ? c : in->comp[c].partner];
        loom_status_set(st, LOOM_INVALID_ARGUMENT,
                        "batch: ragged feature '%s' is already batched; batching it again (nested ragged rows) is "
                        "not supported",
                        v->name);
        loom_dataset_free(in);
        return NULL;
      }
      if (in->comp[c].ndim >= LOOM_MAX_DIMS) {
        loom_status_set(st, LOOM_INVALID_ARGUMENT, "batch: component '%s' has rank %d; batching would exceed %d",
                        in->comp[c].name, in->comp[c].ndim, LOOM_MAX_DIMS);
        loom_dataset_free(in);
        return NULL;
      }
    }
  batch_ds *b = (batch_ds *)transform_new(in, sizeof(batch_ds), &batch_vt, st);
  if (!b) return NULL;
  loom_dataset *ds = &b->base;
  b->in = in;
  b->bs = batch_size;
  b->drop = drop_remainder != 0;
  for (int c = 0; c < ds->ncomp; c++) {
    loom_ds_comp *k = &ds->comp[c];
    if (k->ragged) { /* values [nnz], splits [B + 1]: rank 1 still */
      k->batched = 1;
      k->dims[0] = k->ragged == LOOM__RAGGED_SPLITS && b->drop ? batch_size + 1 : -1;
      continue;
    }
    for (int d = k->ndim; d > 0; d--) k->dims[d] = k->dims[d - 1];
    k->dims[0] = b->drop ? batch_size : -1;
    k->ndim++;
  }
  if (in->ra && !(b->rows = loom__malloc((size_t)batch_size * sizeof *b->rows))) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "batch: out of memory");
    loom_dataset_free(ds);
    return NULL;
  }
  return ds;
}

/* ======================================================================
 * repeat
 * ====================================================================== */
typedef struct repeat_ds {
  loom_dataset base;
  loom_dataset *in;
  int64_t count, pass;
  int got; /* the current pass produced an element */
} repeat_ds;

/* The input ended: start the next pass, or report the end (count reached,
 * or a pass without elements, which would otherwise repeat forever). */
static loom_code repeat_next_pass(repeat_ds *r, loom_status *st) {
  r->pass++;
  if ((r->count >= 0 && r->pass >= r->count) || !r->got) return end_of_sequence(st);
  r->got = 0;
  return loom_dataset_reset(r->in, st);
}

static loom_code repeat_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  repeat_ds *r = (repeat_ds *)ds;
  if (r->count >= 0 && r->pass >= r->count) return end_of_sequence(st);
  for (;;) {
    loom_code rc = loom_dataset_next(r->in, values, st);
    if (!rc) {
      r->got = 1;
      return LOOM_OK;
    }
    if (rc != LOOM_OUT_OF_RANGE) return rc;
    if ((rc = repeat_next_pass(r, st))) return rc;
  }
}
static loom_code repeat_next_index(loom_dataset *ds, int64_t *row, loom_status *st) {
  repeat_ds *r = (repeat_ds *)ds;
  if (r->count >= 0 && r->pass >= r->count) return end_of_sequence(st);
  for (;;) {
    loom_code rc = loom__ds_next_index(r->in, row, st);
    if (!rc) {
      r->got = 1;
      return LOOM_OK;
    }
    if (rc != LOOM_OUT_OF_RANGE) return rc;
    if ((rc = repeat_next_pass(r, st))) return rc;
  }
}
static loom_code repeat_next_rows(loom_dataset *ds, loom_ds_rows *rb, int64_t want, loom_status *st) {
  repeat_ds *r = (repeat_ds *)ds;
  if (r->count >= 0 && r->pass >= r->count) return end_of_sequence(st);
  for (;;) {
    loom_code rc = loom__ds_next_rows(r->in, rb, want, st);
    if (!rc) {
      r->got = 1;
      return LOOM_OK;
    }
    if (rc != LOOM_OUT_OF_RANGE) return rc;
    if ((rc = repeat_next_pass(r, st))) return rc;
  }
}
static loom_code repeat_reset(loom_dataset *ds, loom_status *st) {
  repeat_ds *r = (repeat_ds *)ds;
  r->pass = 0;
  r->got = 0;
  return loom_dataset_reset(r->in, st);
}
static void repeat_destroy(loom_dataset *ds) { loom_dataset_free(((repeat_ds *)ds)->in); }
static const loom_ds_vtable repeat_vt = {"repeat", repeat_next, repeat_next_index, repeat_reset, repeat_destroy,
                                         NULL, NULL};

loom_dataset *loom_dataset_repeat(loom_dataset *in, int64_t count, loom_status *st) {
  repeat_ds *r = (repeat_ds *)transform_new(in, sizeof(repeat_ds), &repeat_vt, st);
  if (!r) return NULL;
  r->in = in;
  r->base.ra = in->ra;
  if (in->next_rows) r->base.next_rows = repeat_next_rows;
  r->count = count < 0 ? -1 : count;
  return &r->base;
}

/* ======================================================================
 * take
 * ====================================================================== */
typedef struct take_ds {
  loom_dataset base;
  loom_dataset *in;
  int64_t count, taken;
} take_ds;

static loom_code take_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  take_ds *t = (take_ds *)ds;
  if (t->count >= 0 && t->taken >= t->count) return end_of_sequence(st);
  loom_code rc = loom_dataset_next(t->in, values, st);
  if (!rc) t->taken++;
  return rc;
}
static loom_code take_next_index(loom_dataset *ds, int64_t *row, loom_status *st) {
  take_ds *t = (take_ds *)ds;
  if (t->count >= 0 && t->taken >= t->count) return end_of_sequence(st);
  loom_code rc = loom__ds_next_index(t->in, row, st);
  if (!rc) t->taken++;
  return rc;
}
static loom_code take_next_rows(loom_dataset *ds, loom_ds_rows *rb, int64_t want, loom_status *st) {
  take_ds *t = (take_ds *)ds;
  if (t->count >= 0 && t->taken >= t->count) return end_of_sequence(st);
  if (t->count >= 0 && want > t->count - t->taken) want = t->count - t->taken;
  int64_t n0 = rb->n;
  loom_code rc = loom__ds_next_rows(t->in, rb, want, st);
  if (!rc) t->taken += rb->n - n0;
  return rc;
}
static loom_code take_reset(loom_dataset *ds, loom_status *st) {
  take_ds *t = (take_ds *)ds;
  t->taken = 0;
  return loom_dataset_reset(t->in, st);
}
static void take_destroy(loom_dataset *ds) { loom_dataset_free(((take_ds *)ds)->in); }
static const loom_ds_vtable take_vt = {"take", take_next, take_next_index, take_reset, take_destroy, NULL, NULL};

loom_dataset *loom_dataset_take(loom_dataset *in, int64_t count, loom_status *st) {
  take_ds *t = (take_ds *)transform_new(in, sizeof(take_ds), &take_vt, st);
  if (!t) return NULL;
  t->in = in;
  t->base.ra = in->ra;
  if (in->next_rows) t->base.next_rows = take_next_rows;
  t->count = count < 0 ? -1 : count;
  return &t->base;
}

/* ======================================================================
 * prefetch: a producer thread fills a ring of cap elements; next() hands
 * the ring's tensors to the caller and the caller's old tensors back to the
 * ring (no copies, no allocation in steady state). A full ring's producer
 * sleeps until the ring is half empty (then refills it in one go).
 * ====================================================================== */
typedef struct prefetch_ds {
  loom_dataset base;
  loom_dataset *in;
  int64_t cap;
  loom_tensor ***slots;
  pthread_mutex_t mu;
  pthread_cond_t cv_items, cv_space;
  int64_t head, count; /* ring: filled slots head .. head+count-1 */
  int running, stop, done;
  int prod_waiting, cons_waiting; /* a thread sleeps on cv_space / cv_items */
  loom_code end_code;  /* the producer's final status (OUT_OF_RANGE or an error) */
  char end_msg[1024];
  loom_status *pst;    /* producer's status */
  pthread_t th;
} prefetch_ds;

static void *prefetch_main(void *arg) {
  prefetch_ds *p = arg;
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    while (p->count == p->cap && !p->stop) {
      p->prod_waiting = 1;
      pthread_cond_wait(&p->cv_space, &p->mu);
      p->prod_waiting = 0;
    }
    if (p->stop) break;
    int64_t slot = (p->head + p->count) % p->cap;
    pthread_mutex_unlock(&p->mu);
    loom_code rc = loom_dataset_next(p->in, p->slots[slot], p->pst);
    pthread_mutex_lock(&p->mu);
    if (rc) {
      p->end_code = rc;
      snprintf(p->end_msg, sizeof p->end_msg, "%s", loom_status_message(p->pst));
      p->done = 1;
      pthread_cond_signal(&p->cv_items);
      break;
    }
    p->count++;
    if (p->cons_waiting) pthread_cond_signal(&p->cv_items);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void prefetch_stop(prefetch_ds *p) {
  if (!p->running) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_signal(&p->cv_space);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->th, NULL);
  p->running = 0;
}

static loom_code prefetch_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  prefetch_ds *p = (prefetch_ds *)ds;
  if (!p->running) {
    p->stop = 0;
    p->done = 0;
    p->head = p->count = 0;
    if (pthread_create(&p->th, NULL, prefetch_main, p))
      return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "prefetch: cannot start the producer thread");
    p->running = 1;
  }
  pthread_mutex_lock(&p->mu);
  while (!p->count && !p->done) {
    p->cons_waiting = 1;
    pthread_cond_wait(&p->cv_items, &p->mu);
    p->cons_waiting = 0;
  }
  if (!p->count) {
    loom_code rc = p->end_code;
    pthread_mutex_unlock(&p->mu);
    return loom_status_set(st, rc, "%s", p->end_msg);
  }
  int64_t slot = p->head;
  pthread_mutex_unlock(&p->mu);
  /* the producer never touches the head slot while it is counted */
  loom_code rc = LOOM_OK;
  for (int c = 0; c < ds->ncomp && !rc; c++) rc = loom__ds_hand_over(&values[c], &p->slots[slot][c], st);
  pthread_mutex_lock(&p->mu);
  p->head = (p->head + 1) % p->cap;
  p->count--;
  /* a sleeping producer (ring full) is woken once the ring is half empty, not
   * after every element: with a ring of a few elements, one wake (a futex
   * call and a reschedule, ~10 us on a VM) every cap/2 steps */
  int wake = p->prod_waiting && p->count <= p->cap / 2;
  pthread_mutex_unlock(&p->mu);
  if (wake) pthread_cond_signal(&p->cv_space);
  return rc;
}

static loom_code prefetch_reset(loom_dataset *ds, loom_status *st) {
  prefetch_ds *p = (prefetch_ds *)ds;
  prefetch_stop(p);
  p->head = p->count = 0;
  p->done = 0;
  return loom_dataset_reset(p->in, st);
}

static void prefetch_destroy(loom_dataset *ds) {
  prefetch_ds *p = (prefetch_ds *)ds;
  prefetch_stop(p);
  if (p->slots)
    for (int64_t i = 0; i < p->cap; i++) {
      if (p->slots[i])
        for (int c = 0; c < ds->ncomp; c++) loom_tensor_free(p->slots[i][c]);
      loom__free(p->slots[i]);
    }
  loom__free(p->slots);
  loom_status_free(p->pst);
  pthread_cond_destroy(&p->cv_items);
  pthread_cond_destroy(&p->cv_space);
  pthread_mutex_destroy(&p->mu);
  loom_dataset_free(p->in);
}
static const loom_ds_vtable prefetch_vt = {"prefetch", prefetch_next, NULL, prefetch_reset, prefetch_destroy, NULL,
                                           NULL};

loom_dataset *loom_dataset_prefetch(loom_dataset *in, int64_t buffer_size, loom_status *st) {
  if (buffer_size == -1) buffer_size = 2; /* AUTOTUNE */
  if (in && (buffer_size <= 0 || buffer_size > (1 << 20))) {
    loom_dataset_free(in);
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "prefetch: buffer_size must be in [1, 2^20] (or -1), got %lld",
                    (long long)buffer_size);
    return NULL;
  }
  prefetch_ds *p = (prefetch_ds *)transform_new(in, sizeof(prefetch_ds), &prefetch_vt, st);
  if (!p) return NULL;
  loom_dataset *ds = &p->base;
  p->in = in;
  p->cap = buffer_size;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv_items, NULL);
  pthread_cond_init(&p->cv_space, NULL);
  p->pst = loom_status_new();
  p->slots = loom__calloc((size_t)buffer_size, sizeof *p->slots);
  int ok = p->pst && p->slots;
  for (int64_t i = 0; ok && i < buffer_size; i++) ok = (p->slots[i] = loom__calloc((size_t)ds->ncomp, sizeof **p->slots)) != NULL;
  if (!ok) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "prefetch: out of memory");
    loom_dataset_free(ds);
    return NULL;
  }
  return ds;
}

/* ======================================================================
 * numpy_input_fn
 * ====================================================================== */
loom_dataset *loom_numpy_input(int n, const char *const *names, const loom_tensor *const *arrays,
                               const loom_tensor *labels, int64_t batch_size, int64_t num_epochs, int shuffle,
                               uint64_t seed, loom_status *st) {
  if (batch_size <= 0) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "numpy_input: batch_size must be positive, got %lld",
                    (long long)batch_size);
    return NULL;
  }
  if (n < 0 || (n > 0 && (!names || !arrays)) || (n == 0 && !labels)) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "numpy_input: no features (n = %d%s)", n,
                    n > 0 ? ", names or arrays NULL" : "");
    return NULL;
  }
  int total = n + (labels != NULL);
  const char **nm = loom__calloc((size_t)total, sizeof *nm);
  const loom_tensor **ar = loom__calloc((size_t)total, sizeof *ar);
  loom_dataset *ds = NULL;
  if (!nm || !ar) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "numpy_input: out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    nm[i] = names[i];
    ar[i] = arrays[i];
    if (labels && names[i] && !strcmp(names[i], "label")) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT,
                      "numpy_input: names[%d] is 'label', which collides with the label component", i);
      goto out;
    }
  }
  if (labels) {
    nm[n] = "label";
    ar[n] = labels;
  }
  ds = loom_dataset_from_tensors(total, nm, ar, labels ? "label" : NULL, st);
  if (ds && shuffle) {
    int64_t rows = ds->vt->num_rows(ds);
    ds = loom_dataset_shuffle(ds, rows > 0 ? rows : 1, seed, 1, st);
  }
  if (ds) ds = loom_dataset_repeat(ds, num_epochs <= 0 ? -1 : num_epochs, st);
  if (ds) ds = loom_dataset_batch(ds, batch_size, 0, st);
out:
  loom__free(nm);
  loom__free(ar);
  return ds;
}
