/* Exported models: an export of a small model (x f32[-1,3] -> dense(2) ->
 * softmax, signature "serving_default") is made once; each input replaces
 * one of its files (byte 0 % 3: signatures.json, saved_model.loom,
 * variables/variables.ckpt) and the predictor loads it and, when it loads,
 * runs its default signature on one row.
 * LOOM_FUZZ_SEEDS=<dir> writes the export's three files there as seeds. */
#include "fuzz_util.h"

static char golden[3][600];
static uint8_t *gold_data[3];
static size_t gold_size[3];
static const char *const FILES[3] = {"signatures.json", "saved_model.loom", "variables/variables.ckpt"};

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) abort();
  fseek(f, 0, SEEK_END);
  long k = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)k + 1);
  if (!b || fread(b, 1, (size_t)k, f) != (size_t)k) abort();
  fclose(f);
  *n = (size_t)k;
  return b;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *dir = fz_dir("export");
  char ex[512];
  snprintf(ex, sizeof ex, "%s/golden", dir);
  loom_graph *g = loom_graph_new();
  loom_graph_set_random_seed(g, 1);
  int64_t d[2] = {-1, 3};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, d, "x");
  loom_output y = loom_softmax(g, loom_layers_dense(g, x, 2, NULL, "dense"), "probs");
  loom_node *init = loom_global_variables_initializer(g);
  loom_status *st = loom_status_new();
  loom_session *s = loom_session_new(g, NULL, st);
  if (!s || loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st)) abort();
  const char *ik[1] = {"x"}, *ok[1] = {"probs"};
  loom_signature sig = {"serving_default", "tensorflow/serving/predict", 1, ik, &x, 1, ok, &y};
  if (loom_export_write(g, s, 1, &sig, ex, st)) {
    fprintf(stderr, "export: %s\n", loom_status_message(st));
    abort();
  }
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  for (int i = 0; i < 3; i++) {
    snprintf(golden[i], sizeof golden[i], "%s/%s", ex, FILES[i]);
    gold_data[i] = slurp(golden[i], &gold_size[i]);
  }
  const char *seeds = getenv("LOOM_FUZZ_SEEDS");
  if (seeds)
    for (int i = 0; i < 3; i++) {
      char p[512];
      snprintf(p, sizeof p, "%s/export_%d", seeds, i);
      FILE *f = fopen(p, "wb");
      if (!f) abort();
      fputc(i, f);
      fwrite(gold_data[i], 1, gold_size[i], f);
      fclose(f);
    }
  return 0;
}

static void put(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n && fwrite(p, 1, n, f) != n) abort();
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int which = data[0] % 3;
  put(golden[which], data + 1, size - 1);
  char ex[512];
  snprintf(ex, sizeof ex, "%s/golden", fz_dir("export"));
  loom_status *st = loom_status_new();
  loom_predictor_options o = loom_predictor_options_default();
  o.num_threads = 1;
  loom_predictor *p = loom_predictor_load(ex, &o, st);
  if (getenv("LOOM_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: load: %s\n", p ? "ok" : loom_status_message(st));
  if (p) {
    int ni = loom_predictor_num_inputs(p, NULL), no = loom_predictor_num_outputs(p, NULL);
    if (ni == 1 && no >= 1 && no <= 8) {
      int64_t d[2] = {1, 3};
      float v[3] = {0.25f, -1.0f, 2.0f};
      loom_tensor *in = loom_tensor_from_data(LOOM_F32, 2, d, v, NULL);
      loom_tensor *out[8] = {0};
      loom_predictor_run(p, NULL, 1, &in, no, out, st);
      for (int i = 0; i < no; i++) loom_tensor_free(out[i]);
      loom_tensor_free(in);
    }
    loom_predictor_free(p);
  }
  put(golden[which], gold_data[which], gold_size[which]); /* restore */
  loom_status_free(st);
  return 0;
}
