/* data/csv_tensors.c - a whole CSV file into one tensor per column
 * (loom_csv_read_tensors, loom_data.h): the CSV source's rows path
 * (data_impl.h) appends every row to column buffers, which become the
 * tensors at the end; no per-row element tensors. */
#include <string.h>
#include "data/data_impl.h"

void loom_csv_tensors_free(int n, char **names, loom_tensor **tensors) {
  for (int i = 0; i < n; i++) {
    if (names) loom__free(names[i]);
    if (tensors) loom_tensor_free(tensors[i]);
  }
  loom__free(names);
  loom__free(tensors);
}

loom_code loom_csv_read_tensors(const char *path, const loom_csv_options *opt, int *n, char ***names,
                                loom_tensor ***tensors, loom_status *st) {
  if (n) *n = 0;
  if (names) *names = NULL;
  if (tensors) *tensors = NULL;
  if (!path || !opt || !n || !names || !tensors)
    return loom_status_set(st, LOOM_INVALID_ARGUMENT, "csv_read_tensors: %s is NULL",
                           !path ? "path" : !opt ? "opt" : "an output pointer");
  loom_csv_options o = loom_csv_options_default();
  loom_code rc = LOOM__OPTS_TAKE(&o, opt, "csv_read_tensors", loom_csv_options, st);
  if (rc) return rc;
  o.label_name = NULL;
  loom_dataset *ds = loom_dataset_csv(1, &path, &o, st);
  if (!ds) return loom_status_code(st) ? loom_status_code(st) : LOOM_INVALID_ARGUMENT;
  if (!ds->next_rows) {
    loom_dataset_free(ds);
    return loom_status_set(st, LOOM_INTERNAL, "csv_read_tensors: the CSV source has no rows path");
  }
  int nc = ds->ncomp;
  loom_ds_rows rb;
  char **nm = loom__calloc((size_t)nc, sizeof *nm);
  loom_tensor **tv = loom__calloc((size_t)nc, sizeof *tv);
  rc = !nm || !tv ? loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "csv_read_tensors: out of memory")
                  : loom__ds_rows_init(&rb, ds, st);
  if (!rc) {
    while ((rc = loom__ds_next_rows(ds, &rb, 4096, st)) == LOOM_OK) {
    }
    if (rc == LOOM_OUT_OF_RANGE) rc = loom__ds_rows_emit(ds, &rb, tv, 1, st);
    loom__ds_rows_free(&rb);
  }
  for (int i = 0; i < nc && !rc; i++)
    if (!(nm[i] = loom__strdup(ds->comp[i].name)))
      rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "csv_read_tensors: out of memory");
  loom_dataset_free(ds);
  if (rc) {
    loom_csv_tensors_free(nm ? nc : 0, nm, tv);
    return rc;
  }
  *n = nc;
  *names = nm;
  *tensors = tv;
  return LOOM_OK;
}
