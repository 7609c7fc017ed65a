/* estimator/data_csv.c - CSV dataset (RFC 4180). */
#include "estimator/data_impl.h"

loom_dataset *loom_dataset_csv(int nfiles, const char *const *paths, const loom_csv_options *opt, loom_status *st) {
  (void)nfiles;
  (void)paths;
  (void)opt;
  loom_status_set(st, LOOM_UNIMPLEMENTED, "dataset_csv: not implemented yet");
  return NULL;
}
