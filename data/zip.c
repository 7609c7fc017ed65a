/* data/zip.c - Dataset.zip: the components of n datasets side by side,
 * one element from each per element, until the first ends. See
 * loom_data.h (loom_dataset_zip). */
#include <string.h>
#include "data/data_impl.h"

typedef struct zip_ds {
  loom_dataset base;
  int n;
  loom_dataset **in;
  int *first; /* input i's first component in the element */
} zip_ds;

static loom_code zip_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  zip_ds *z = (zip_ds *)ds;
  for (int i = 0; i < z->n; i++) {
    loom_code rc = loom_dataset_next(z->in[i], values + z->first[i], st);
    if (rc) return rc; /* OUT_OF_RANGE when the shortest ends */
  }
  return LOOM_OK;
}

static loom_code zip_reset(loom_dataset *ds, loom_status *st) {
  zip_ds *z = (zip_ds *)ds;
  for (int i = 0; i < z->n; i++) {
    loom_code rc = loom_dataset_reset(z->in[i], st);
    if (rc) return rc;
  }
  return LOOM_OK;
}

static void zip_destroy(loom_dataset *ds) {
  zip_ds *z = (zip_ds *)ds;
  for (int i = 0; z->in && i < z->n; i++) loom_dataset_free(z->in[i]);
  loom__free(z->in);
  loom__free(z->first);
}

static const loom_ds_vtable zip_vt = {"zip", zip_next, NULL, zip_reset, zip_destroy, NULL, NULL};

loom_dataset *loom_dataset_zip(int n, loom_dataset *const *inputs, loom_status *st) {
  const char *bad = NULL;
  int ncomp = 0, labels = 0;
  if (n < 1 || !inputs) bad = n < 1 ? "needs at least one input" : "inputs is NULL";
  for (int i = 0; !bad && i < n; i++) {
    if (!inputs[i]) {
      bad = "an input is NULL";
      break;
    }
    ncomp += inputs[i]->ncomp;
    labels += inputs[i]->label >= 0;
  }
  if (!bad && labels > 1) bad = "more than one input has a label";
  for (int i = 0; !bad && i < n; i++)
    for (int c = 0; !bad && c < inputs[i]->ncomp; c++)
      for (int j = 0; !bad && j <= i; j++)
        for (int k = 0; k < (j == i ? c : inputs[j]->ncomp); k++)
          if (!strcmp(inputs[i]->comp[c].name, inputs[j]->comp[k].name)) {
            loom_status_set(st, LOOM_INVALID_ARGUMENT, "zip: component '%s' is in two inputs (%d and %d); "
                            "the names must be unique", inputs[i]->comp[c].name, j, i);
            bad = "";
            break;
          }
  if (bad) {
    if (bad[0]) loom_status_set(st, LOOM_INVALID_ARGUMENT, "zip: %s", bad);
    for (int i = 0; inputs && i < n; i++) loom_dataset_free(inputs[i]);
    return NULL;
  }
  zip_ds *z = (zip_ds *)loom__ds_new(sizeof(zip_ds), &zip_vt, ncomp, st);
  if (!z) {
    for (int i = 0; i < n; i++) loom_dataset_free(inputs[i]);
    return NULL;
  }
  loom_dataset *ds = &z->base;
  z->in = loom__calloc((size_t)n, sizeof *z->in);
  z->first = loom__calloc((size_t)n, sizeof *z->first);
  if (!z->in || !z->first) {
    loom__free(z->in);
    z->in = NULL;
    for (int i = 0; i < n; i++) loom_dataset_free(inputs[i]);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "zip: out of memory");
    loom_dataset_free(ds);
    return NULL;
  }
  memcpy(z->in, inputs, (size_t)n * sizeof *inputs);
  z->n = n;
  for (int i = 0, c0 = 0; i < n; c0 += inputs[i]->ncomp, i++) {
    z->first[i] = c0;
    const loom_dataset *in = inputs[i];
    if (in->label >= 0) ds->label = c0 + in->label;
    for (int c = 0; c < in->ncomp; c++) {
      const loom_ds_comp *k = &in->comp[c];
      loom_ds_comp *o = &ds->comp[c0 + c];
      if (loom__ds_set_comp(ds, c0 + c, k->name, k->dtype, k->ndim, k->dims, st) ||
          (k->pad && loom__ds_set_pad(ds, c0 + c, k->pad, st))) {
        loom_dataset_free(ds);
        return NULL;
      }
      o->ragged = k->ragged;
      o->partner = k->partner + c0;
      o->batched = k->batched;
    }
  }
  return ds;
}
