/* The LoomParseExample graph op (tf.io.parse_example in a serving graph) on
 * arbitrary bytes: the input is a batch of rows, each a 2-byte little-endian
 * length then that many bytes (a short tail is one last row), parsed by a
 * spec with every case the op has: FixedLen f32[2] required, i64 scalar with
 * a default, string scalar with a default, VarLen i64 and VarLen string. The
 * graph and session are built once; each input is one run, whose errors
 * (INVALID_ARGUMENT naming the row) are fine, crashes and leaks are not. */
#include "fuzz_util.h"

static loom_graph *g;
static loom_session *s;
static loom_output x, outs[7];

static void setup(void) {
  static const int64_t ndef = 5;
  static const char *const sdef[1] = {"dflt"};
  loom_feature_spec spec[5];
  memset(spec, 0, sizeof spec);
  spec[0] = (loom_feature_spec){.name = "x", .dtype = LOOM_F32, .ndim = 1, .dims = {2}};
  spec[1] = (loom_feature_spec){.name = "n", .dtype = LOOM_I64, .default_value = &ndef};
  spec[2] = (loom_feature_spec){.name = "s", .dtype = LOOM_STRING, .default_value = sdef};
  spec[3] = (loom_feature_spec){.name = "ids", .dtype = LOOM_I64, .kind = LOOM_FEATURE_VAR_LEN};
  spec[4] = (loom_feature_spec){.name = "w", .dtype = LOOM_STRING, .varlen = 1};
  g = loom_graph_new();
  int64_t d[1] = {-1};
  x = loom_placeholder(g, LOOM_STRING, 1, d, "serialized");
  loom_parse_example(g, x, 5, spec, 7, outs, "parse");
  s = loom_session_new(g, NULL, NULL);
  if (!s) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!s) setup();
  enum { MAXROWS = 16 };
  const char *rows[MAXROWS];
  size_t lens[MAXROWS];
  int n = 0;
  for (size_t p = 0; p < size && n < MAXROWS;) {
    size_t len = p + 2 <= size ? (size_t)data[p] | (size_t)data[p + 1] << 8 : 0;
    p += 2;
    if (p > size) p = size;
    if (len > size - p) len = size - p;
    rows[n] = (const char *)data + p;
    lens[n++] = len;
    p += len;
  }
  int64_t d[1] = {n};
  loom_tensor *in = loom_tensor_new(LOOM_STRING, 1, d, NULL);
  for (int i = 0; in && i < n; i++) loom_tensor_set_string(in, i, rows[i], lens[i], NULL);
  loom_tensor *o[7] = {0};
  loom_status *st = loom_status_new();
  if (in) loom_session_run(s, &x, &in, 1, outs, o, 7, NULL, 0, st);
  if (getenv("LOOM_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: %s\n", loom_status_message(st));
  for (int i = 0; i < 7; i++) loom_tensor_free(o[i]);
  loom_tensor_free(in);
  loom_status_free(st);
  return 0;
}
