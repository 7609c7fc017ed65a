/* data/generator.c - Dataset.from_generator: a dataset whose elements a
 * callback makes, one per call, checked against the declared spec. See
 * loom_data.h (loom_dataset_from_generator). */
#include "data/data_impl.h"

typedef struct gen_ds {
  loom_dataset base;
  loom_generator_next_fn next;
  loom_generator_reset_fn reset;
  void (*release)(void *user);
  void *user;
  loom_tensor **made; /* the callback's tensors of one element (swapped with the caller's, then freed) */
} gen_ds;

static void free_made(gen_ds *g) {
  for (int i = 0; i < g->base.ncomp; i++) {
    loom_tensor_free(g->made[i]);
    g->made[i] = NULL;
  }
}

/* INVALID_ARGUMENT naming the component when t does not fit its spec (dtype, rank, the known dims). */
static loom_code check(const loom_ds_comp *c, const loom_tensor *t, loom_status *st) {
  if (!t) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_generator: the element has no '%s'", c->name);
  int bad = loom_tensor_dtype(t) != c->dtype || loom_tensor_ndim(t) != c->ndim;
  for (int d = 0; !bad && d < c->ndim; d++) bad = c->dims[d] >= 0 && loom_tensor_dims(t)[d] != c->dims[d];
  if (!bad) return LOOM_OK;
  char want[160], got[160];
  return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                         "from_generator: component '%s' of the element is %s %s, the declared spec is %s %s "
                         "(?: any size)",
                         c->name, loom_dtype_name(loom_tensor_dtype(t)),
                         loom__dims_str(got, sizeof got, loom_tensor_ndim(t), loom_tensor_dims(t)),
                         loom_dtype_name(c->dtype), loom__dims_str(want, sizeof want, c->ndim, c->dims));
}

static loom_code gen_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  gen_ds *g = (gen_ds *)ds;
  loom_code rc = g->next(g->user, ds->ncomp, g->made, st);
  for (int i = 0; !rc && i < ds->ncomp; i++) rc = check(&ds->comp[i], g->made[i], st);
  for (int i = 0; !rc && i < ds->ncomp; i++) rc = loom__ds_hand_over(&values[i], &g->made[i], st);
  if (rc == LOOM_OUT_OF_RANGE) loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
  else if (rc && !loom_status_code(st)) loom_status_set(st, rc, "from_generator: the generator failed");
  free_made(g);
  return rc;
}

static loom_code gen_reset(loom_dataset *ds, loom_status *st) {
  gen_ds *g = (gen_ds *)ds;
  return g->reset ? g->reset(g->user, st) : LOOM_OK;
}

static void gen_destroy(loom_dataset *ds) {
  gen_ds *g = (gen_ds *)ds;
  if (g->made) free_made(g);
  loom__free(g->made);
  if (g->release) g->release(g->user);
}

static const loom_ds_vtable gen_vt = {"from_generator", gen_next, NULL, gen_reset, gen_destroy, NULL, NULL};

loom_dataset *loom_dataset_from_generator(int n, const char *const *names, const loom_dtype *dtypes,
                                          const int32_t *ndims, const int64_t *dims, const char *label_name,
                                          loom_generator_next_fn next, loom_generator_reset_fn reset,
                                          void (*release)(void *user), void *user, loom_status *st) {
  if (n < 1 || !names || !dtypes || !ndims || !next) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_generator: n >= 1, names, dtypes, ndims and next are required");
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (!names[i] || ndims[i] < 0 || ndims[i] > LOOM_MAX_DIMS) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_generator: component %d has no name or a rank outside [0, %d]",
                      i, LOOM_MAX_DIMS);
      return NULL;
    }
    if (ndims[i] > 0 && !dims) {
      loom_status_set(st, LOOM_INVALID_ARGUMENT, "from_generator: component '%s' has rank %d and dims is NULL",
                      names[i], ndims[i]);
      return NULL;
    }
  }
  int label = loom__ds_label_index(n, names, label_name, "from_generator", st);
  if (label == -2) return NULL;
  gen_ds *g = (gen_ds *)loom__ds_new(sizeof(gen_ds), &gen_vt, n, st);
  if (!g) return NULL;
  loom_dataset *ds = &g->base;
  ds->label = label;
  g->made = loom__calloc((size_t)n, sizeof *g->made);
  if (!g->made) {
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "from_generator: out of memory");
    loom_dataset_free(ds);
    return NULL;
  }
  for (int i = 0, at = 0; i < n; at += ndims[i++]) {
    if (loom__ds_set_comp(ds, i, names[i], dtypes[i], ndims[i], ndims[i] ? dims + at : NULL, st)) {
      loom_dataset_free(ds);
      return NULL;
    }
  }
  g->next = next; /* set last: a failed build does not release user */
  g->reset = reset;
  g->user = user;
  g->release = release;
  return ds;
}
