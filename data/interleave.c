/* data/interleave.c - Dataset.interleave over datasets that already exist
 * (one per input element, e.g. one per file): TF's cycle of cycle_length
 * open inputs, block_length elements from each in turn, an exhausted input
 * replaced by the next one in its slot. See loom_data.h
 * (loom_dataset_interleave). */
#include <string.h>
#include "data/data_impl.h"

typedef struct inter_ds {
  loom_dataset base;
  int n;               /* inputs */
  loom_dataset **in;
  int64_t cycle, block;
  int *slot;           /* cycle slot -> input index, -1 = empty */
  int next_input;      /* the next input to open */
  int64_t cycle_index, block_index;
  int open;            /* slots holding an input */
} inter_ds;

static loom_code inter_next(loom_dataset *ds, loom_tensor **values, loom_status *st) {
  inter_ds *d = (inter_ds *)ds;
  for (;;) {
    if (d->next_input >= d->n && d->open == 0) return loom_status_set(st, LOOM_OUT_OF_RANGE, "End of sequence");
    int *s = &d->slot[d->cycle_index];
    if (*s >= 0) {
      loom_code rc = loom_dataset_next(d->in[*s], values, st);
      if (rc == LOOM_OK) {
        if (++d->block_index == d->block) {
          d->block_index = 0;
          d->cycle_index = (d->cycle_index + 1) % d->cycle;
        }
        return LOOM_OK;
      }
      if (rc != LOOM_OUT_OF_RANGE) return rc;
      *s = -1; /* exhausted: the slot is free, the cycle moves on */
      d->open--;
      d->block_index = 0;
      d->cycle_index = (d->cycle_index + 1) % d->cycle;
    } else if (d->next_input < d->n) {
      loom_code rc = loom_dataset_reset(d->in[d->next_input], st); /* a fresh pass of the input */
      if (rc) return rc;
      *s = d->next_input++;
      d->open++;
    } else {
      d->block_index = 0;
      d->cycle_index = (d->cycle_index + 1) % d->cycle;
    }
  }
}

static loom_code inter_reset(loom_dataset *ds, loom_status *st) {
  (void)st;
  inter_ds *d = (inter_ds *)ds;
  for (int64_t i = 0; i < d->cycle; i++) d->slot[i] = -1;
  d->next_input = 0;
  d->cycle_index = d->block_index = 0;
  d->open = 0;
  return LOOM_OK;
}

static void inter_destroy(loom_dataset *ds) {
  inter_ds *d = (inter_ds *)ds;
  for (int i = 0; d->in && i < d->n; i++) loom_dataset_free(d->in[i]);
  loom__free(d->in);
  loom__free(d->slot);
}

static const loom_ds_vtable inter_vt = {"interleave", inter_next, NULL, inter_reset, inter_destroy, NULL, NULL};

static int same_spec(const loom_dataset *a, const loom_dataset *b) {
  if (a->ncomp != b->ncomp || a->label != b->label) return 0;
  for (int i = 0; i < a->ncomp; i++) {
    const loom_ds_comp *x = &a->comp[i], *y = &b->comp[i];
    if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->ndim != y->ndim || x->ragged != y->ragged ||
        x->batched != y->batched)
      return 0;
  }
  return 1;
}

loom_dataset *loom_dataset_interleave(int n, loom_dataset *const *inputs, int64_t cycle_length, int64_t block_length,
                                      loom_status *st) {
  const char *bad = NULL;
  if (n < 1 || !inputs)
    bad = n < 1 ? "needs at least one input" : "inputs is NULL";
  else if (cycle_length < 1 || block_length < 1)
    bad = "cycle_length and block_length must be >= 1";
  for (int i = 0; !bad && i < n; i++)
    if (!inputs[i]) bad = "an input is NULL";
    else if (!same_spec(inputs[0], inputs[i])) bad = "the inputs' components (names, dtypes, ranks, label) differ";
  if (bad) {
    loom_status_set(st, LOOM_INVALID_ARGUMENT, "interleave: %s", bad);
    for (int i = 0; inputs && i < n; i++) loom_dataset_free(inputs[i]);
    return NULL;
  }
  inter_ds *d = (inter_ds *)loom__ds_new(sizeof(inter_ds), &inter_vt, inputs[0]->ncomp, st);
  if (!d) {
    for (int i = 0; i < n; i++) loom_dataset_free(inputs[i]);
    return NULL;
  }
  loom_dataset *ds = &d->base;
  d->in = loom__calloc((size_t)n, sizeof *d->in);
  if (d->in) {
    memcpy(d->in, inputs, (size_t)n * sizeof *inputs);
    d->n = n;
  }
  d->cycle = cycle_length > n ? n : cycle_length; /* more slots than inputs would stay empty */
  d->block = block_length;
  d->slot = loom__calloc((size_t)d->cycle, sizeof *d->slot);
  if (!d->in || !d->slot) {
    if (!d->in)
      for (int i = 0; i < n; i++) loom_dataset_free(inputs[i]);
    loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "interleave: out of memory");
    loom_dataset_free(ds);
    return NULL;
  }
  if (loom__ds_copy_spec(ds, inputs[0], st)) {
    loom_dataset_free(ds);
    return NULL;
  }
  /* dims that differ between inputs vary */
  for (int i = 1; i < n; i++)
    for (int c = 0; c < ds->ncomp; c++)
      for (int k = 0; k < ds->comp[c].ndim; k++)
        if (ds->comp[c].dims[k] != inputs[i]->comp[c].dims[k]) ds->comp[c].dims[k] = -1;
  inter_reset(ds, st);
  return ds;
}
