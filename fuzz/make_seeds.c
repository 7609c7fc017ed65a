/* fuzz/make_seeds.c - writes the seed corpora fuzz/corpus/<target>/ from the
 * test fixtures and from files loom itself writes (`make fuzz-seeds`; the
 * result is committed). Inputs found by fuzzing (crashes fixed since) are
 * added by hand as fuzz/corpus/<target>/crash-*. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include "loom/loom.h"
#include "loom/loom_sparse.h"

static const char *root;

static void seed(const char *target, const char *name, int flag, const void *p, size_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", root, target);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    exit(1);
  }
  if (flag >= 0) fputc(flag, f);
  if (n) fwrite(p, 1, n, f);
  fclose(f);
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long k = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)k + 1);
  if (fread(b, 1, (size_t)k, f) != (size_t)k) exit(1);
  fclose(f);
  *n = (size_t)k;
  return b;
}

static void seed_file(const char *target, const char *name, int flag, const char *path, size_t maxlen) {
  size_t n;
  unsigned char *b = slurp(path, &n);
  seed(target, name, flag, b, n < maxlen ? n : maxlen);
  free(b);
}

static loom_tensor *strings(int ndim, const int64_t *dims, int n, const char *const *v) {
  loom_tensor *t = loom_tensor_new(LOOM_STRING, ndim, dims, NULL);
  for (int i = 0; i < n; i++) loom_tensor_set_string(t, i, v[i], strlen(v[i]), NULL);
  return t;
}

static void ok(loom_code rc, loom_status *st) {
  if (rc) {
    fprintf(stderr, "make_seeds: %s\n", loom_status_message(st));
    exit(1);
  }
}

/* The first k items of a gzipped IDX file, as a raw IDX file. */
static unsigned char *idx_head(const char *gz, int rank, int k, size_t *n) {
  gzFile f = gzopen(gz, "rb");
  if (!f) exit(1);
  unsigned char h[16];
  gzread(f, h, (unsigned)(4 + 4 * rank));
  size_t item = 1;
  for (int i = 1; i < rank; i++) item *= (size_t)h[4 + 4 * i + 2] << 8 | h[4 + 4 * i + 3];
  h[4] = h[5] = h[6] = 0;
  h[7] = (unsigned char)k;
  size_t hl = 4 + 4 * (size_t)rank;
  unsigned char *b = malloc(hl + item * (size_t)k);
  memcpy(b, h, hl);
  gzread(f, b + hl, (unsigned)(item * (size_t)k));
  gzclose(f);
  *n = hl + item * (size_t)k;
  return b;
}

int main(int argc, char **argv) {
  root = argc > 1 ? argv[1] : "fuzz/corpus";
  const char *tmp = argc > 2 ? argv[2] : "/tmp/loom_fuzz_seeds";
  mkdir(root, 0755);
  mkdir(tmp, 0755);
  loom_status *st = loom_status_new();
  char p[1024];

  /* ---- csv: the 5-column spec of fuzz_csv.c; flags: bit0 header, bit1 ';', bit2 batch */
  const char *csv = "a,label,s,d,tags\n1.5,3,hello,2.25,1|2|3\n,4,\"q,\"\"x\"\"\",1e3,\n-0.0,5,,7,9\r\n";
  seed("csv", "header_batch", 5, csv, strlen(csv));
  const char *csv2 = "2;1;x;0.5;4|5\n3;2;\"y;z\";-1;\n";
  seed("csv", "semicolon", 2, csv2, strlen(csv2));
  seed_file("csv", "diamonds", 1, "tests/fixtures/data/diamonds_200.csv", 2048);

  /* ---- idx: 3 Fashion-MNIST test images (raw and gzipped), with 3 labels */
  size_t ni, nl;
  unsigned char *im = idx_head("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", 3, 3, &ni);
  unsigned char *lb = idx_head("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", 1, 3, &nl);
  unsigned char *both = malloc(ni + 5 + nl);
  memcpy(both, im, ni);
  memcpy(both + ni, "\xff\xfeLBL", 5);
  memcpy(both + ni + 5, lb, nl);
  seed("idx", "images_labels", 0, both, ni + 5 + nl);
  seed("idx", "images_labels_gz_batch", 1 | 16, both, ni + 5 + nl);
  seed("idx", "images_limit_unflat", 4 | 8, im, ni);
  free(both);
  free(im);
  free(lb);

  /* ---- tfrecord: 3 examples with every feature of fuzz_tfrecord.c's spec */
  snprintf(p, sizeof p, "%s/data.tfrecord", tmp);
  loom_tfrecord_writer *w = loom_tfrecord_writer_new(p, st);
  ok(!w, st);
  for (int i = 0; i < 3; i++) {
    int64_t d2[1] = {2}, d4[1] = {4}, dk[1] = {i + 1}, d1[1] = {1};
    float xv[2] = {(float)i, 0.5f}, sv[4] = {1, 2, 3, (float)i};
    int64_t ids[3] = {7, 8, 9}, spi[1] = {i}, yv[1] = {i};
    float spv[1] = {2.5f};
    loom_tensor *t[7];
    t[0] = loom_tensor_from_data(LOOM_F32, 1, d2, xv, NULL);
    const char *strs[1] = {i ? "hello" : ""};
    t[1] = strings(0, NULL, 1, strs);
    t[2] = loom_tensor_from_data(LOOM_I64, 1, dk, ids, NULL);
    t[3] = loom_tensor_from_data(LOOM_F32, 1, d4, sv, NULL);
    t[4] = loom_tensor_from_data(LOOM_I64, 1, d1, spi, NULL);
    t[5] = loom_tensor_from_data(LOOM_F32, 1, d1, spv, NULL);
    t[6] = loom_tensor_from_data(LOOM_I64, 1, d1, yv, NULL);
    const char *names[7] = {"x", "s", "ids", "seq", "sp_idx", "sp_val", "y"};
    ok(loom_tfrecord_writer_write_example(w, 7, names, (const loom_tensor *const *)t, st), st);
    for (int k = 0; k < 7; k++) loom_tensor_free(t[k]);
  }
  ok(loom_tfrecord_writer_close(w, st), st);
  seed_file("tfrecord", "examples", 0, p, 1 << 20);
  seed_file("tfrecord", "examples_batch", 1, p, 1 << 20);

  /* ---- events: scalars, a histogram, text and a session log */
  snprintf(p, sizeof p, "%s/ev", tmp);
  loom_event_writer *ew = loom_event_writer_new(p, NULL, st);
  ok(!ew, st);
  ok(loom_event_writer_add_scalar(ew, "loss", 0.25, 1, st), st);
  const char *tags[2] = {"mae", "accuracy"};
  double vals[2] = {0.1, 0.9};
  ok(loom_event_writer_add_scalars(ew, 2, tags, vals, 2, st), st);
  double hv[5] = {-1, 0, 0.5, 2, 2};
  ok(loom_event_writer_add_histogram(ew, "w", hv, 5, 3, st), st);
  ok(loom_event_writer_add_text(ew, "checkpoint_path", "model.ckpt-3", 3, st), st);
  ok(loom_event_writer_add_session_log(ew, LOOM_SESSION_LOG_CHECKPOINT, "model.ckpt-3", 3, st), st);
  ok(loom_event_writer_flush(ew, st), st);
  char evp[1024];
  snprintf(evp, sizeof evp, "%s", loom_event_writer_path(ew));
  loom_event_writer_free(ew);
  seed_file("events", "events", -1, evp, 1 << 20);

  /* ---- checkpoint: the variables fuzz_checkpoint.c restores, and one with strings */
  {
    int64_t d[2] = {2, 3};
    float wv[6] = {1, 2, 3, 4, 5, 6};
    int64_t gs = 42;
    loom_tensor *t[3];
    t[0] = loom_tensor_from_data(LOOM_F32, 2, d, wv, NULL);
    t[1] = loom_tensor_from_data(LOOM_I64, 0, NULL, &gs, NULL);
    const char *strs[2] = {"a", "bcd"};
    int64_t ds[1] = {2};
    t[2] = strings(1, ds, 2, strs);
    const char *names[3] = {"w", "global_step", "vocab"};
    snprintf(p, sizeof p, "%s/model.ckpt-1", tmp);
    ok(loom_checkpoint_write(p, 2, names, (const loom_tensor *const *)t, st), st);
    seed_file("checkpoint", "w_and_step", -1, p, 1 << 20);
    ok(loom_checkpoint_write(p, 3, names, (const loom_tensor *const *)t, st), st);
    seed_file("checkpoint", "with_strings", -1, p, 1 << 20);
    for (int k = 0; k < 3; k++) loom_tensor_free(t[k]);
  }

  /* ---- checkpoint state file */
  const char *state = "model_checkpoint_path: \"model.ckpt-1\"\n"
                      "all_model_checkpoint_paths: \"model.ckpt-0\"\n"
                      "all_model_checkpoint_paths: \"model.ckpt-1\"\n";
  seed("ckpt_state", "state", -1, state, strlen(state));
  const char *state2 = "model_checkpoint_path: \"/abs/model.ckpt-9\"\nall_model_checkpoint_paths: \"a\\\"b\"\n";
  seed("ckpt_state", "absolute_escaped", -1, state2, strlen(state2));

  /* ---- vocabulary files: flags bit0 int64 keys, bit1 first 3 lines */
  seed_file("vocab", "strings", 0, "tests/fixtures/fc/vocab_str.txt", 4096);
  seed_file("vocab", "strings_first3", 2, "tests/fixtures/fc/vocab.txt", 4096);
  seed_file("vocab", "int64", 1, "tests/fixtures/fc/vocab_int.txt", 4096);

  /* ---- TF_CONFIG */
  const char *tfc[] = {
      "{\"cluster\": {\"chief\": [\"host0:2222\"], \"worker\": [\"host1:2222\", \"host2:2222\"], \"ps\": "
      "[\"host3:2222\", \"host4:2222\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
      "{\"cluster\": {\"master\": [\"m0:1\"], \"worker\": [\"w0:1\"], \"ps\": [\"p0:1\"]}, \"task\": {\"type\": "
      "\"master\", \"index\": 0}, \"model_dir\": \"/tmp/m\"}",
      "{\"task\": {\"type\": \"evaluator\", \"index\": 0}, \"cluster\": {\"chief\": [\"c:1\"]}}",
      "{}"};
  for (int i = 0; i < 4; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "tf_config_%d", i);
    seed("tf_config", nm, -1, tfc[i], strlen(tfc[i]));
  }
  loom_status_free(st);
  return 0;
}
