/* tests/gpu/test_parse_example_cuda.c - LoomParseExample in a CUDA session.
 * The op has a CPU kernel only and is a data-shape op, so a CUDA session
 * evaluates it in its host pass and feeds its outputs to the device plan:
 * serialized tf.Example -> parse (FixedLen age, VarLen color) -> feature
 * columns (numeric + embedding of a vocabulary column) -> dense layer. The
 * CUDA session's parsed values and logits must equal the CPU session's (same
 * seeded variables), and a malformed example must fail with the same
 * message naming the row. Skips (exit 0) without a CUDA device. */
#include "tests/gpu/parity.h"

enum { R = 5 };

/* a tf.Example {age: float_list [a], color: bytes_list [c]} (or without color) */
static size_t example(uint8_t *out, float a, const char *c) {
  uint8_t fe[128];
  size_t n = 0, k = 0;
  /* feature entry "age" */
  uint8_t fl[16] = {0x0a, 4};
  memcpy(fl + 2, &a, 4);                                  /* FloatList{value packed} */
  uint8_t feat[32] = {0x12, 6};
  memcpy(feat + 2, fl, 6);                                /* Feature{float_list} */
  uint8_t ent[64] = {0x0a, 3, 'a', 'g', 'e', 0x12, 8};
  memcpy(ent + 7, feat, 8);                               /* FeatureEntry{key, value} */
  fe[k++] = 0x0a, fe[k++] = 15;
  memcpy(fe + k, ent, 15), k += 15;
  if (c) {
    size_t cl = strlen(c);
    uint8_t e2[64];
    size_t m = 0;
    e2[m++] = 0x0a, e2[m++] = 5;
    memcpy(e2 + m, "color", 5), m += 5;
    e2[m++] = 0x12, e2[m++] = (uint8_t)(cl + 4);
    e2[m++] = 0x0a, e2[m++] = (uint8_t)(cl + 2);          /* Feature{bytes_list} */
    e2[m++] = 0x0a, e2[m++] = (uint8_t)cl;                /* BytesList{value} */
    memcpy(e2 + m, c, cl), m += cl;
    fe[k++] = 0x0a, fe[k++] = (uint8_t)m;
    memcpy(fe + k, e2, m), k += m;
  }
  out[n++] = 0x0a, out[n++] = (uint8_t)k;                 /* Example{features} */
  memcpy(out + n, fe, k);
  return n + k;
}

static int run_model(loom_device_type dev, loom_tensor *ser, loom_tensor **out, char *err, size_t cap) {
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  loom_graph_set_random_seed(g, 7);
  int64_t d[1] = {-1};
  loom_output x = loom_placeholder(g, LOOM_STRING, 1, d, "input_example_tensor");
  loom_feature_spec spec[2] = {{.name = "age", .dtype = LOOM_F32, .ndim = 1, .dims = {1}},
                               {.name = "color", .dtype = LOOM_STRING, .kind = LOOM_FEATURE_VAR_LEN}};
  loom_features *f = loom_features_new();
  loom_fc_set *set = loom_fc_set_new();
  static const char *const colors[3] = {"red", "green", "blue"};
  const loom_fc *num = loom_fc_numeric(set, "age", 0, NULL, NULL, LOOM_F32, NULL, NULL, st);
  const loom_fc *voc = loom_fc_vocabulary_list(set, "color", 3, colors, 1, -1, st);
  const loom_fc *emb = loom_fc_embedding(set, voc, 3, NULL, st);
  const loom_fc *cols[2] = {num, emb};
  loom_output dense;
  int ok = loom_parse_example_features(g, x, 2, spec, f, "parse", st) == LOOM_OK &&
           loom_fc_input_layer(g, f, 2, cols, "input_layer", 1, &dense, st) == LOOM_OK;
  if (!ok) {
    printf("FAIL building: %s\n", loom_status_message(st));
    g_fail++;
  }
  loom_output logits = ok ? parity_dense(g, dense, 4, 2, 0, "logits") : dense;
  loom_node *init = loom_global_variables_initializer(g);
  loom_sparse c = loom_features_get_sparse(f, "color");
  loom_output fetch[4] = {logits, loom_features_get(f, "age"), c.values, c.row_splits};
  loom_session *s = ok ? session(g, dev) : NULL;
  loom_code rc = LOOM_INTERNAL;
  if (s && loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st) == LOOM_OK)
    rc = loom_session_run(s, &x, &ser, 1, fetch, out, 4, NULL, 0, st);
  if (err) snprintf(err, cap, "%s", loom_status_message(st));
  loom_session_free(s);
  loom_features_free(f);
  loom_fc_set_free(set);
  loom_graph_free(g);
  loom_status_free(st);
  return rc == LOOM_OK;
}

int main(void) {
  if (!parity_gpu_present("test_parse_example_cuda")) return 0;
  static const float ages[R] = {0.5f, -1.25f, 2.0f, 3.5f, 0.0f};
  static const char *const cols[R] = {"red", "blue", NULL, "yellow", "green"};
  int64_t d[1] = {R};
  loom_tensor *ser = loom_tensor_new(LOOM_STRING, 1, d, NULL);
  for (int r = 0; r < R; r++) {
    uint8_t b[256];
    size_t n = example(b, ages[r], cols[r]);
    loom_tensor_set_string(ser, r, (const char *)b, n, NULL);
  }
  loom_tensor *co[4] = {0}, *go[4] = {0};
  char ce[512] = "", ge[512] = "";
  if (!run_model(LOOM_DEVICE_CPU, ser, co, ce, sizeof ce) || !run_model(LOOM_DEVICE_CUDA, ser, go, ge, sizeof ge)) {
    parity_check(0, "a run failed: cpu '%s' cuda '%s'", ce, ge);
  } else {
    compare("parse_example/logits", go[0], co[0], 1e-5);
    compare("parse_example/age", go[1], co[1], 0);
    compare("parse_example/color_row_splits", go[3], co[3], 0);
    parity_check(loom_tensor_numel(go[2]) == 4 && loom_tensor_numel(co[2]) == 4, "color values: %lld / %lld",
                 (long long)loom_tensor_numel(go[2]), (long long)loom_tensor_numel(co[2]));
  }
  for (int i = 0; i < 4; i++) loom_tensor_free(co[i]), loom_tensor_free(go[i]), co[i] = go[i] = NULL;
  /* a truncated example in row 2: the same error on both devices, naming the row */
  size_t l;
  const char *p = loom_tensor_get_string(ser, 2, &l);
  char cut[256];
  memcpy(cut, p, l);
  loom_tensor_set_string(ser, 2, cut, l - 3, NULL);
  int okc = run_model(LOOM_DEVICE_CPU, ser, co, ce, sizeof ce), okg = run_model(LOOM_DEVICE_CUDA, ser, go, ge, sizeof ge);
  parity_check(!okc && !okg && strstr(ge, "serialized example 2 is not a valid tf.Example") && !strcmp(ce, ge),
               "truncated example: cpu '%s' cuda '%s'", ce, ge);
  for (int i = 0; i < 4; i++) loom_tensor_free(co[i]), loom_tensor_free(go[i]);
  loom_tensor_free(ser);
  return parity_report("test_parse_example_cuda");
}
