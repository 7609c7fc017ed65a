/* LoomParseExample throughput: a batch of B serialized tf.Example (loom's
 * writer; features age float [1], vec float [4], color and city bytes [1],
 * ids int64 VarLen of 0-4 values) parsed in a session run (the op decodes
 * each example twice: once in its value-shape function to size the VarLen
 * outputs, once in the kernel), beside two yardsticks in the same run on the
 * same records (and the op once more with the VarLen feature left out of the
 * spec: the kernel alone decodes then): the TFRecord dataset with the same spec (the same decoder,
 * once per example, plus its per-example tensors and batching), and the
 * bare decode (protobuf-c unpack + free of each record, nothing copied; a
 * floor). Best of --reps; key=value lines.
 *   --batch N (256)  --iters N (200)  --reps N (3) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench/bench_util.h"
#include "base/tf_example.h"
#include "loom/loom.h"

static void die(const char *what, loom_status *st) {
  fprintf(stderr, "%s: %s\n", what, loom_status_message(st));
  exit(1);
}

int main(int argc, char **argv) {
  int B = atoi(bu_flag(argc, argv, "--batch", "256")), iters = atoi(bu_flag(argc, argv, "--iters", "200")),
      reps = atoi(bu_flag(argc, argv, "--reps", "3"));
  loom_status *st = loom_status_new();
  char path[256];
  snprintf(path, sizeof path, "/tmp/loom_bench_parse_%d.tfrecord", (int)getpid());
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(path, st);
  if (!w) die("writer", st);
  static const char *const colors[4] = {"red", "green", "blue", "white"}, *const cities[3] = {"paris", "oslo", "rome"};
  for (int r = 0; r < B; r++) {
    int64_t d1[1] = {1}, d4[1] = {4}, dk[1] = {r % 5};
    float age = 20.0f + (float)r * 0.25f, vec[4] = {(float)r, 1.5f, -2.0f, 0.125f};
    int64_t ids[4] = {r, r + 1, r + 2, r + 3};
    loom_tensor *t[5] = {loom_tensor_from_data(LOOM_F32, 1, d1, &age, NULL), loom_tensor_from_data(LOOM_F32, 1, d4, vec, NULL),
                         loom_tensor_new(LOOM_STRING, 1, d1, NULL), loom_tensor_new(LOOM_STRING, 1, d1, NULL),
                         loom_tensor_from_data(LOOM_I64, 1, dk, ids, NULL)};
    loom_tensor_set_string(t[2], 0, colors[r % 4], strlen(colors[r % 4]), NULL);
    loom_tensor_set_string(t[3], 0, cities[r % 3], strlen(cities[r % 3]), NULL);
    const char *names[5] = {"age", "vec", "color", "city", "ids"};
    if (loom_tfrecord_writer_write_example(w, 5, names, (const loom_tensor *const *)t, st)) die("write", st);
    for (int k = 0; k < 5; k++) loom_tensor_free(t[k]);
  }
  if (loom_tfrecord_writer_close(w, st)) die("close", st);
  /* the records */
  FILE *f = fopen(path, "rb");
  fseek(f, 0, SEEK_END);
  long fn = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)fn);
  if (fread(buf, 1, (size_t)fn, f) != (size_t)fn) return 1;
  fclose(f);
  int64_t bd[1] = {B};
  loom_tensor *ser = loom_tensor_new(LOOM_STRING, 1, bd, st);
  const uint8_t **rec = malloc(sizeof *rec * (size_t)B);
  size_t *reclen = malloc(sizeof *reclen * (size_t)B), bytes = 0;
  for (long off = 0, r = 0; r < B; r++) {
    uint64_t len;
    memcpy(&len, buf + off, 8);
    loom_tensor_set_string(ser, r, buf + off + 12, (size_t)len, NULL);
    rec[r] = (const uint8_t *)buf + off + 12;
    reclen[r] = (size_t)len;
    bytes += len;
    off += 16 + (long)len;
  }
  loom_feature_spec spec[5] = {
      {.name = "age", .dtype = LOOM_F32, .ndim = 1, .dims = {1}},
      {.name = "city", .dtype = LOOM_STRING, .ndim = 1, .dims = {1}},
      {.name = "color", .dtype = LOOM_STRING, .ndim = 1, .dims = {1}},
      {.name = "ids", .dtype = LOOM_I64, .kind = LOOM_FEATURE_VAR_LEN, .varlen = 1, .ragged = 1},
      {.name = "vec", .dtype = LOOM_F32, .ndim = 1, .dims = {4}},
  };
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, d, "serialized"), outs[6];
  loom_parse_example(g, x, 5, spec, 6, outs, "parse");
  if (loom_graph_status(g, st)) die("graph", st);
  loom_session *s = loom_session_new(g, NULL, st);
  if (!s) die("session", st);
  loom_graph *g2 = loom_graph_new();
  loom_output x2 = loom_placeholder(g2, LOOM_STRING, 1, d, "serialized"), outs2[4];
  loom_feature_spec fixed[4] = {spec[0], spec[1], spec[2], spec[4]};
  loom_parse_example(g2, x2, 4, fixed, 4, outs2, "parse");
  loom_session *s2 = loom_session_new(g2, NULL, st);
  if (!s2) die("session", st);
  loom_tensor *o2[4] = {0};
  double best_fixed = 1e30;
  loom_tensor *o[6] = {0};
  double best_op = 1e30, best_ds = 1e30, best_dec = 1e30;
  for (int rep = 0; rep < reps; rep++) {
    double t0 = bu_now_us();
    for (int i = 0; i < iters; i++)
      if (loom_session_run(s, &x, &ser, 1, outs, o, 6, NULL, 0, st)) die("run", st);
    double op = (bu_now_us() - t0) / ((double)iters * B);
    if (op < best_op) best_op = op;
    t0 = bu_now_us();
    for (int i = 0; i < iters; i++)
      if (loom_session_run(s2, &x2, &ser, 1, outs2, o2, 4, NULL, 0, st)) die("run", st);
    op = (bu_now_us() - t0) / ((double)iters * B);
    if (op < best_fixed) best_fixed = op;
    const char *paths[1] = {path};
    loom_dataset *ds = loom_dataset_repeat(loom_dataset_tfrecord(1, paths, 5, spec, NULL, st), iters, st);
    ds = loom_dataset_batch(ds, B, 0, st);
    if (!ds) die("dataset", st);
    loom_tensor *v[6] = {0};
    t0 = bu_now_us();
    long n = 0;
    while (loom_dataset_next(ds, v, st) == LOOM_OK) n++;
    double dsu = (bu_now_us() - t0) / ((double)iters * B);
    if (n != iters) die("dataset count", st);
    if (dsu < best_ds) best_ds = dsu;
    for (int k = 0; k < 6; k++) loom_tensor_free(v[k]);
    loom_dataset_free(ds);
    t0 = bu_now_us();
    for (int i = 0; i < iters; i++)
      for (int r = 0; r < B; r++) loom__tfex_free(loom__tfex_unpack(rec[r], reclen[r], NULL));
    double dec = (bu_now_us() - t0) / ((double)iters * B);
    if (dec < best_dec) best_dec = dec;
  }
  printf("batch=%d\nexample_bytes=%.1f\n", B, (double)bytes / B);
  printf("parse_op_us_per_example=%.3f\ndataset_us_per_example=%.3f\ndecode_only_us_per_example=%.3f\n", best_op,
         best_ds, best_dec);
  printf("parse_op_fixed_only_us_per_example=%.3f\n", best_fixed);
  printf("op_over_dataset=%.2f\nop_over_decode=%.2f\nfixed_only_over_decode=%.2f\n", best_op / best_ds,
         best_op / best_dec, best_fixed / best_dec);
  for (int k = 0; k < 4; k++) loom_tensor_free(o2[k]);
  loom_session_free(s2);
  loom_graph_free(g2);
  for (int k = 0; k < 6; k++) loom_tensor_free(o[k]);
  loom_session_free(s);
  loom_graph_free(g);
  loom_tensor_free(ser);
  free(rec), free(reclen), free(buf);
  remove(path);
  loom_status_free(st);
  return 0;
}
