/* Raw-record sources and the decode ops on arbitrary bytes: the first byte
 * picks the source (bits 0-1: text lines, fixed-length records, TFRecord
 * records, one string), GZIP (bit 2), RFC 4180 quoting (bit 3) and
 * select_cols (bit 4); the second the fixed-length sizes. Text lines go
 * through a traced map of DecodeCSV (f32 with a default, a required i64, a
 * string) and are batched; fixed-length and TFRecord records through
 * DecodeRaw (uint8 / int32); the one string through StringToNumber and
 * DecodeCSV run once. Any code is fine; crashes, leaks and UB are not. */
#include "fuzz_util.h"

static loom_dataset *csv_map(loom_dataset *ds, int quote, int select, loom_status *st) {
  loom_graph *g = loom_graph_new();
  loom_output line = loom_placeholder(g, LOOM_STRING, 0, NULL, "line");
  int64_t one = 1, zero = 0;
  float fd = 0.5f;
  loom_tensor *defs[3] = {loom_tensor_from_data(LOOM_F32, 1, &one, &fd, st), loom_tensor_new(LOOM_I64, 1, &zero, st),
                          loom_tensor_new(LOOM_STRING, 1, &one, st)};
  const int64_t sel[3] = {0, 2, 3};
  loom_output out[3];
  int n = loom_decode_csv(g, line, 3, (const loom_tensor *const *)defs, ',', quote, "NA", select ? 3 : 0, sel, out,
                          "csv");
  for (int i = 0; i < 3; i++) loom_tensor_free(defs[i]);
  const char *names[3] = {"f", "i", "s"};
  return loom_dataset_map_graph(ds, g, 1, &line, n ? 3 : 1, names, n ? out : &line, NULL, NULL, st);
}

static loom_dataset *raw_map(loom_dataset *ds, loom_dtype dt, loom_status *st) {
  loom_graph *g = loom_graph_new();
  loom_output rec = loom_placeholder(g, LOOM_STRING, 0, NULL, "rec");
  loom_output v = loom_decode_raw(g, rec, dt, 1, "raw");
  const char *names[1] = {"v"};
  return loom_dataset_map_graph(ds, g, 1, &rec, 1, names, &v, NULL, NULL, st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  int mode = data[0] & 3, gz = (data[0] >> 2) & 1, quote = (data[0] >> 3) & 1, select = (data[0] >> 4) & 1;
  loom_status *st = loom_status_new();
  if (mode == 3) { /* one string through the ops directly */
    loom_graph *g = loom_graph_new();
    loom_output x = loom_placeholder(g, LOOM_STRING, 0, NULL, "x");
    loom_output f[2];
    f[0] = loom_string_to_number(g, x, (data[1] & 1) ? LOOM_I64 : LOOM_F64, "num");
    int64_t one = 1;
    loom_tensor *def = loom_tensor_new(LOOM_STRING, 1, &one, st);
    loom_tensor *defs[1] = {def};
    if (!loom_decode_csv(g, x, 1, (const loom_tensor *const *)defs, ';', quote, NULL, 0, NULL, &f[1], "csv"))
      f[1] = f[0];
    loom_tensor_free(def);
    loom_session *s = loom_session_new(g, NULL, st);
    loom_tensor *xv = loom_tensor_new(LOOM_STRING, 0, NULL, st);
    if (s && xv && !loom_tensor_set_string(xv, 0, (const char *)data + 2, size - 2, st)) {
      for (int k = 0; k < 2; k++) {
        loom_tensor *out = NULL;
        loom_session_run(s, &x, &xv, 1, &f[k], &out, 1, NULL, 0, st);
        loom_tensor_free(out);
      }
    }
    loom_tensor_free(xv);
    loom_session_free(s);
    loom_graph_free(g);
    loom_status_free(st);
    return 0;
  }
  const char *dir = fz_dir("decode");
  const char *path = fz_write(dir, "in.bin", data + 2, size - 2);
  loom_records_options o = loom_records_options_default();
  o.format = mode == 0 ? LOOM_RECORDS_TEXT_LINE : mode == 1 ? LOOM_RECORDS_FIXED_LENGTH : LOOM_RECORDS_TFRECORD;
  o.compression = gz ? LOOM_TFRECORD_GZIP : LOOM_TFRECORD_NONE;
  if (mode == 1) {
    o.record_bytes = (data[1] & 7) + 1;
    o.header_bytes = (data[1] >> 3) & 3;
    o.footer_bytes = (data[1] >> 5) & 3;
  }
  loom_dataset *ds = loom_dataset_records(1, &path, &o, st);
  if (ds && mode == 0) ds = csv_map(ds, quote, select, st);
  if (ds && mode == 1) ds = raw_map(ds, o.record_bytes % 4 ? LOOM_U8 : LOOM_I32, st);
  if (ds && mode == 2) ds = raw_map(ds, LOOM_U8, st);
  if (ds && (data[1] & 0x80)) ds = loom_dataset_batch(ds, 2, 0, st);
  if (!ds && getenv("LOOM_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: no dataset: %s\n", loom_status_message(st));
  fz_drain(ds, 64);
  loom_status_free(st);
  return 0;
}
