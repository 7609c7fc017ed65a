/* CSV with a column spec: header on, 5 columns (f32 with a default, i64,
 * string, f64 without a default, a '|'-separated ragged i32 column), label
 * the i64; batched by 3 (ragged merge, padding). The first input byte picks
 * the delimiter and the header: none, skipped unchecked, or checked against
 * the column names (bit 3). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *dir = fz_dir("csv");
  const char *path = fz_write(dir, "in.csv", data + 1, size - 1);
  static const loom_csv_column cols[5] = {{"a", LOOM_F32, "0.5", 1, 0},
                                          {"label", LOOM_I64, NULL, 1, 0},
                                          {"s", LOOM_STRING, "", 1, 0},
                                          {"d", LOOM_F64, NULL, 1, 0},
                                          {"tags", LOOM_I32, NULL, 1, '|'}};
  loom_csv_options o = loom_csv_options_default();
  o.header = !(data[0] & 1) ? 0 : (data[0] & 8) ? 1 : LOOM_CSV_HEADER_SKIP;
  o.delimiter = (data[0] & 2) ? ';' : ',';
  o.ncolumns = 5;
  o.columns = cols;
  o.label_name = "label";
  const char *paths[1] = {path};
  loom_status *st = loom_status_new();
  loom_dataset *ds = loom_dataset_csv(1, paths, &o, st);
  if (ds && (data[0] & 4)) ds = loom_dataset_batch(ds, 3, 0, st);
  if (!ds && getenv("LOOM_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: no dataset: %s\n", loom_status_message(st));
  fz_drain(ds, 64);
  loom_status_free(st);
  return 0;
}
