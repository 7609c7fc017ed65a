/* ONNX export (loom_onnx.h), checked by the real peer: each case exports a
 * model, writes the ONNX file with the inputs and loom's predictor outputs
 * under build/onnx_check/<case>/ (manifest.json + raw little-endian
 * tensors), and runs tests/onnx_check.py in a virtualenv with onnx and
 * onnxruntime from PyPI (scripts/peer_venv.sh onnx, cached): onnx.checker
 * must pass and onnxruntime's outputs must equal loom's within 1e-5.
 * Where the virtualenv cannot be made (PyPI unreachable) the peer check is
 * skipped with a message on stderr ("SKIPPED: ..."); the export itself is
 * still checked. Cases: an MLP, a small CNN (conv same/valid, max and
 * average pooling, batch normalization in inference form, flatten), a
 * canned DNNClassifier and a LinearRegressor over numeric columns, plus
 * the errors: an op ONNX cannot express names its node and op. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "canned_util.h"
#include "loom/loom.h"
#include "loom/loom_onnx.h"
#include "test_util.h"

#define CHECK_ROOT "build/onnx_check"

/* ---------------------------------------------------------------- case files */

static void mkdirs(const char *path) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(buf, 0755);
      *p = '/';
    }
  mkdir(buf, 0755);
}

static const char *np_dtype(loom_dtype d) {
  switch (d) {
  case LOOM_F32: return "float32";
  case LOOM_F64: return "float64";
  case LOOM_I32: return "int32";
  case LOOM_I64: return "int64";
  case LOOM_U8: return "uint8";
  case LOOM_BOOL: return "bool";
  default: return "?";
  }
}

static void write_tensors(FILE *m, const char *dir, const char *side, int n, const char *const *keys,
                          loom_tensor *const *t) {
  fprintf(m, "  \"%s\": [", side);
  for (int i = 0; i < n; i++) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s_%d.bin", dir, side, i);
    tu_write_file(path, loom_tensor_data_const(t[i]), loom_tensor_nbytes(t[i]));
    fprintf(m, "%s\n    {\"key\": \"%s\", \"file\": \"%s_%d.bin\", \"dtype\": \"%s\", \"shape\": [", i ? "," : "",
            keys[i], side, i, np_dtype(loom_tensor_dtype(t[i])));
    for (int k = 0; k < loom_tensor_ndim(t[i]); k++) fprintf(m, "%s%lld", k ? ", " : "", (long long)loom_tensor_dim(t[i], k));
    fprintf(m, "]}");
  }
  fprintf(m, "]");
}

/* build/onnx_check/<name> (emptied); returns the path in buf. */
static const char *case_dir(const char *name, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/%s", CHECK_ROOT, name);
  tu_rmtree(buf);
  mkdirs(buf);
  return buf;
}

static void write_manifest(const char *dir, int ni, const char *const *ikeys, loom_tensor *const *in, int no,
                           const char *const *okeys, loom_tensor *const *out) {
  char path[600];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  FILE *m = fopen(path, "w");
  cr_assert(m, "cannot write %s", path);
  fprintf(m, "{\n  \"model\": \"model.onnx\",\n  \"tolerance\": 1e-5,\n");
  write_tensors(m, dir, "inputs", ni, ikeys, in);
  fprintf(m, ",\n");
  write_tensors(m, dir, "outputs", no, okeys, out);
  fprintf(m, "\n}\n");
  fclose(m);
}

/* The peer: creates (once, under a lock) the onnx virtualenv and runs the
 * checker on dir. Skips (message on stderr) when the venv cannot be made. */
static void run_checker(const char *dir) {
  FILE *p = popen("mkdir -p \"${LOOM_VENV_DIR:-$HOME/.cache/loom/venv}\" && "
                  "flock \"${LOOM_VENV_DIR:-$HOME/.cache/loom/venv}/.onnx.lock\" bash scripts/peer_venv.sh onnx "
                  "2>/dev/null",
                  "r");
  cr_assert(p);
  char py[1024] = "";
  if (!fgets(py, sizeof py, p)) py[0] = 0;
  int rc = pclose(p);
  py[strcspn(py, "\n")] = 0;
  if (rc != 0 || !py[0]) {
    fprintf(stderr, "SKIPPED: onnxruntime check of %s: the onnx virtualenv could not be created (PyPI unreachable?); "
                    "see onnx.log beside the virtualenv\n", dir);
    cr_skip_test("onnx virtualenv unavailable (PyPI unreachable)");
  }
  char cmd[2200];
  snprintf(cmd, sizeof cmd, "'%s' tests/onnx_check.py '%s' 2>&1", py, dir);
  p = popen(cmd, "r");
  cr_assert(p);
  char line[1024], all[8192] = "";
  while (fgets(line, sizeof line, p)) {
    if (strlen(all) + strlen(line) < sizeof all) strcat(all, line);
    if (!strncmp(line, "onnx_check:", 11)) fprintf(stderr, "%s", line);
  }
  rc = pclose(p);
  cr_assert_eq(rc, 0, "onnx_check.py failed on %s:\n%s", dir, all);
  cr_assert(strstr(all, "onnx_check: OK"), "onnx_check.py printed no OK line:\n%s", all);
}

/* Runs export_dir's signature through loom's predictor on in[], writes the
 * case (the ONNX file from loom_onnx_export, inputs, loom's outputs) and
 * returns its directory in dir (512 bytes; run_checker checks it with
 * onnxruntime, which also checks the model has exactly these outputs).
 * no == 0: the default options (no output keys), and every numeric output
 * of the signature in the manifest. */
static void check_export(const char *name, const char *export_dir, const char *sig, int ni, const char *const *ikeys,
                         loom_tensor *const *in, int no, const char *const *okeys, char *dir) {
  loom_status *st = loom_status_new();
  loom_predictor_options po = loom_predictor_options_default();
  po.signature = sig;
  po.num_threads = 1;
  loom_predictor *pd = loom_predictor_load(export_dir, &po, st);
  cr_assert(pd, "%s", loom_status_message(st));
  int pni = loom_predictor_num_inputs(pd, sig), pno = loom_predictor_num_outputs(pd, sig);
  cr_assert_eq(pni, ni, "%s: the signature has %d inputs, the test gives %d", name, pni, ni);
  loom_tensor *feeds[16] = {0}, *outs[16] = {0};
  const char *fkeys[16];
  for (int i = 0; i < pni; i++) {
    const char *k = fkeys[i] = loom_predictor_input_key(pd, sig, i);
    for (int j = 0; j < ni; j++)
      if (!strcmp(ikeys[j], k)) feeds[i] = in[j];
    cr_assert(feeds[i], "%s: no data for input %s", name, k);
  }
  cr_assert_eq(loom_predictor_run(pd, sig, pni, feeds, pno, outs, st), LOOM_OK, "%s", loom_status_message(st));
  const char *keys[16];
  loom_tensor *sel[16];
  int nsel = 0;
  for (int i = 0; i < pno; i++) {
    const char *k = loom_predictor_output_key(pd, sig, i);
    int want = no == 0 && loom_tensor_dtype(outs[i]) != LOOM_STRING;
    for (int j = 0; j < no; j++) want |= !strcmp(okeys[j], k);
    if (want) keys[nsel] = k, sel[nsel++] = outs[i];
  }
  if (no) cr_assert_eq(nsel, no, "%s: output keys not all in the signature", name);
  char model[600];
  case_dir(name, dir, 512);
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  loom_onnx_options oo = loom_onnx_options_default();
  oo.signature = sig;
  oo.noutputs = no;
  oo.output_keys = okeys;
  cr_assert_eq(loom_onnx_export(export_dir, model, &oo, st), LOOM_OK, "%s: %s", name, loom_status_message(st));
  size_t len = 0;
  void *bytes = tu_read_file(model, &len);
  cr_assert(bytes && len > 16, "%s: no ONNX file written", name);
  free(bytes);
  write_manifest(dir, pni, fkeys, feeds, nsel, keys, sel);
  for (int i = 0; i < pno; i++) loom_tensor_free(outs[i]);
  loom_predictor_free(pd);
  loom_status_free(st);
}

typedef struct log_capture {
  char text[4096];
} log_capture;
static void capture_log(loom_log_level level, const char *msg, void *user) {
  (void)level;
  log_capture *c = user;
  size_t n = strlen(c->text);
  snprintf(c->text + n, sizeof c->text - n, "%s\n", msg);
}

/* ---------------------------------------------------------------- models */

/* Deterministic values in [lo, hi). */
static loom_tensor *lcg_tensor(int ndim, const int64_t *dims, uint32_t seed, float lo, float hi) {
  loom_tensor *t = loom_tensor_new(LOOM_F32, ndim, dims, NULL);
  cr_assert(t);
  float *d = loom_tensor_data(t);
  for (int64_t i = 0; i < loom_tensor_numel(t); i++) {
    seed = seed * 1664525u + 1013904223u;
    d[i] = lo + (hi - lo) * (float)(seed >> 8) / 16777216.0f;
  }
  return t;
}

/* Initializes g's variables in a new session, exports the signature into a
 * fresh directory (export_dir) and returns the session. */
static loom_session *init_and_export(loom_graph *g, const loom_signature *sig, char *export_dir) {
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session_options so = loom_session_options_default();
  so.num_threads = 1;
  loom_session *s = loom_session_new(g, &so, st);
  cr_assert(s, "%s", loom_status_message(st));
  loom_node *init = loom_global_variables_initializer(g);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st), LOOM_OK, "%s",
               loom_status_message(st));
  char tmp[TU_TMPDIR_CAP];
  tu_tmpdir(tmp, sizeof tmp, "onnx_exp");
  snprintf(export_dir, 600, "%s/export", tmp);
  cr_assert_eq(loom_export_write(g, s, 1, sig, export_dir, st), LOOM_OK, "%s", loom_status_message(st));
  loom_status_free(st);
  return s;
}

/* The same model written from the graph and session must be the same bytes
 * as the one written from the export directory. */
static void expect_same_as_graph_export(loom_graph *g, loom_session *s, const loom_signature *sig,
                                        const char *case_name) {
  loom_status *st = loom_status_new();
  char a[600], b[600];
  snprintf(a, sizeof a, "%s/%s/model.onnx", CHECK_ROOT, case_name);
  snprintf(b, sizeof b, "%s/%s/from_graph.onnx", CHECK_ROOT, case_name);
  cr_assert_eq(loom_onnx_export_graph(g, s, sig, b, NULL, st), LOOM_OK, "%s", loom_status_message(st));
  size_t la = 0, lb = 0;
  void *da = tu_read_file(a, &la), *db = tu_read_file(b, &lb);
  cr_assert(da && db);
  cr_expect(la == lb && !memcmp(da, db, la), "%s: the graph export (%zu bytes) differs from the directory's (%zu)",
            case_name, lb, la);
  free(da);
  free(db);
  loom_status_free(st);
}

Test(onnx, mlp) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 20};
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "x");
  loom_dense_options o = loom_dense_options_default();
  o.activation = "relu";
  o.bias_initializer = loom_init_random_uniform(-0.5, 0.5, 3);
  loom_output h = loom_layers_dense(g, x, 32, &o, "dense");
  o.activation = "tanh";
  h = loom_layers_dense(g, h, 16, &o, "dense_1");
  o.activation = "sigmoid";
  h = loom_layers_dense(g, h, 16, &o, "dense_2");
  loom_output logits = loom_layers_dense(g, h, 5, NULL, "logits");
  loom_output probs = loom_softmax(g, logits, "probabilities");
  loom_output cls = loom_argmax(g, logits, 1, LOOM_I64, "class_ids");
  const char *ik[1] = {"x"}, *ok[3] = {"logits", "probabilities", "class_ids"};
  loom_output outs[3] = {logits, probs, cls};
  loom_signature sig = {"serving_default", "tensorflow/serving/predict", 1, ik, &x, 3, ok, outs};
  char ed[600];
  loom_session *s = init_and_export(g, &sig, ed);
  int64_t d[2] = {7, 20};
  loom_tensor *in = lcg_tensor(2, d, 11, -2, 2);
  char cd[512];
  check_export("mlp", ed, "serving_default", 1, ik, &in, 0, NULL, cd);
  expect_same_as_graph_export(g, s, &sig, "mlp");
  loom_tensor_free(in);
  loom_session_free(s);
  loom_graph_free(g);
  *strrchr(ed, '/') = 0;
  tu_rmtree(ed);
  run_checker(cd);
}

/* examples/fashion_mnist.c's CNN shape, smaller, plus batch normalization
 * (inference form) and a SAME average pool. */
Test(onnx, cnn) {
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 784}, shape[4] = {-1, 28, 28, 1}, k3[2] = {3, 3}, p2[2] = {2, 2}, s2[2] = {2, 2};
  /* 3x3 SAME average pool at stride 2 over 12x12: one padding cell, at the end (SAME_UPPER), not counted */
  loom_output x = loom_placeholder(g, LOOM_F32, 2, xd, "image");
  loom_output h = loom_reshape(g, x, 4, shape, "image_nhwc");
  loom_conv2d_options co = loom_conv2d_options_default();
  co.activation = "relu";
  co.padding = "same";
  co.bias_initializer = loom_init_random_uniform(-0.1, 0.1, 5);
  h = loom_layers_conv2d(g, h, 8, k3, &co, "conv2d");
  h = loom_layers_max_pooling2d(g, h, p2, p2, "valid", "pool");
  co.padding = "valid";
  h = loom_layers_conv2d(g, h, 16, k3, &co, "conv2d_1");
  loom_batch_norm_options bo = loom_batch_norm_options_default();
  h = loom_layers_batch_normalization(g, h, &bo, "batch_normalization");
  h = loom_layers_average_pooling2d(g, h, k3, s2, "same", "avg_pool");
  h = loom_layers_flatten(g, h, "flatten");
  loom_dense_options relu = loom_dense_options_default();
  relu.activation = "relu";
  h = loom_layers_dense(g, h, 32, &relu, "dense");
  loom_dropout_options dop = loom_dropout_options_default();
  h = loom_layers_dropout(g, h, 0.3, &dop, "dropout");
  loom_output logits = loom_layers_dense(g, h, 10, NULL, "logits");
  loom_output probs = loom_softmax(g, logits, "probabilities");
  loom_output cls = loom_argmax(g, logits, 1, LOOM_I32, "classes");
  const char *ik[1] = {"image"}, *ok[3] = {"logits", "probabilities", "classes"};
  loom_output outs[3] = {logits, probs, cls};
  loom_signature sig = {"serving_default", "tensorflow/serving/predict", 1, ik, &x, 3, ok, outs};
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  /* moving statistics that are not the identity, before the export reads them */
  loom_session_options so = loom_session_options_default();
  so.num_threads = 1;
  loom_session *s = loom_session_new(g, &so, st);
  cr_assert(s, "%s", loom_status_message(st));
  loom_node *init = loom_global_variables_initializer(g);
  cr_assert_eq(loom_session_run(s, NULL, NULL, 0, NULL, NULL, 0, &init, 1, st), LOOM_OK, "%s",
               loom_status_message(st));
  int64_t c16 = 16;
  loom_tensor *mm = lcg_tensor(1, &c16, 21, -0.5f, 0.5f), *mv = lcg_tensor(1, &c16, 22, 0.5f, 2.0f),
              *gm = lcg_tensor(1, &c16, 23, 0.5f, 1.5f);
  cr_assert_eq(loom_session_assign_variable(s, "batch_normalization/moving_mean", mm, st), LOOM_OK, "%s",
               loom_status_message(st));
  cr_assert_eq(loom_session_assign_variable(s, "batch_normalization/moving_variance", mv, st), LOOM_OK, "%s",
               loom_status_message(st));
  cr_assert_eq(loom_session_assign_variable(s, "batch_normalization/gamma", gm, st), LOOM_OK, "%s",
               loom_status_message(st));
  char tmp[TU_TMPDIR_CAP], ed[600];
  tu_tmpdir(tmp, sizeof tmp, "onnx_cnn");
  snprintf(ed, sizeof ed, "%s/export", tmp);
  cr_assert_eq(loom_export_write(g, s, 1, &sig, ed, st), LOOM_OK, "%s", loom_status_message(st));
  int64_t d[2] = {5, 784};
  loom_tensor *in = lcg_tensor(2, d, 12, 0, 1);
  char cd[512];
  check_export("cnn", ed, "serving_default", 1, ik, &in, 0, NULL, cd);
  expect_same_as_graph_export(g, s, &sig, "cnn");
  loom_tensor_free(in);
  loom_tensor_free(mm);
  loom_tensor_free(mv);
  loom_tensor_free(gm);
  loom_session_free(s);
  loom_graph_free(g);
  tu_rmtree(tmp);
  loom_status_free(st);
  run_checker(cd);
}

/* The iris features of d (no label) in the order of names. */
static int iris_inputs(cu_data *d, const char **keys, loom_tensor **t) {
  int n = 0;
  for (int i = 0; i < d->nf; i++)
    if (!d->label || strcmp(d->names[i], d->label)) keys[n] = d->names[i], t[n++] = d->cols[i];
  return n;
}

static const char *const NUMERIC_CLS_KEYS[4] = {"logits", "probabilities", "class_ids", "all_class_ids"};

/* iris's 120 training rows (batches of 32, shuffled) and 30 test rows, integer labels. */
static void iris_split(cu_data *tr, cu_data *te) {
  cu_iris(tr, 0, 0);
  cu_iris(te, 1, 0);
  tr->batch = 32;
  tr->shuffle = 1;
}

/* Trains e 60 steps on tr, exports it (te's features as placeholders) under dir/export (the export
 * directory in ed, 1024 bytes) and writes case name of its predict signature on te's features (no, okeys as
 * check_export takes them) into cd. */
static void train_export_case(loom_estimator *e, cu_data *tr, cu_data *te, const char *dir, const char *name, int no,
                              const char *const *okeys, char *ed, char *cd) {
  loom_status *st = loom_status_new();
  cu_train(e, tr, 60);
  char base[600];
  snprintf(base, sizeof base, "%s/export", dir);
  cr_assert_eq(loom_estimator_export(e, cu_serving_fn, te, base, NULL, ed, 1024, st), LOOM_OK, "%s",
               loom_status_message(st));
  const char *keys[8];
  loom_tensor *in[8];
  int ni = iris_inputs(te, keys, in);
  check_export(name, ed, "predict", ni, keys, in, no, okeys, cd);
  loom_status_free(st);
}

Test(onnx, canned_dnn_classifier) {
  loom_status *st = loom_status_new();
  static const char *fn[4] = {"SepalLength", "SepalWidth", "PetalLength", "PetalWidth"};
  loom_fc_set *set = loom_fc_set_new();
  const loom_fc *cols[4];
  for (int k = 0; k < 4; k++) cols[k] = loom_fc_numeric(set, fn[k], 0, NULL, NULL, LOOM_F32, NULL, NULL, st);
  cu_data tr, te;
  iris_split(&tr, &te);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "onnx_dnn");
  loom_run_config cfg = cu_config();
  static const int64_t hidden[2] = {10, 10};
  loom_dnn_options o = loom_dnn_options_default();
  o.model_dir = dir;
  o.config = &cfg;
  o.n_classes = 3;
  o.nfeature_columns = 4;
  o.feature_columns = cols;
  o.nhidden_units = 2;
  o.hidden_units = hidden;
  loom_estimator *e = loom_dnn_classifier_new(&o, st);
  cr_assert(e, "%s", loom_status_message(st));
  char ed[1024], cd[512];
  train_export_case(e, &tr, &te, dir, "dnn_classifier", 4, NUMERIC_CLS_KEYS, ed, cd);

  /* the default options: the numeric outputs, the string classes / all_classes skipped, each with a note */
  log_capture lc = {0};
  loom_log_set(capture_log, &lc, LOOM_LOG_INFO);
  const char *keys[8];
  loom_tensor *in[8];
  int ni = iris_inputs(&te, keys, in);
  char cd2[512];
  check_export("dnn_classifier_default", ed, "predict", ni, keys, in, 0, NULL, cd2);
  loom_log_set(NULL, NULL, LOOM_LOG_WARN);
  cr_expect(strstr(lc.text, "output 'classes' (string) skipped") && strstr(lc.text, "output 'all_classes' (string) skipped"),
            "no note of the skipped string outputs in the log:\n%s", lc.text);

  /* a string output named: the node that makes strings is named */
  char out[700];
  snprintf(out, sizeof out, "%s/all.onnx", dir);
  loom_onnx_options oo = loom_onnx_options_default();
  oo.signature = "predict";
  const char *str_keys[2] = {"logits", "classes"};
  oo.noutputs = 2;
  oo.output_keys = str_keys;
  loom_code rc = loom_onnx_export(ed, out, &oo, st);
  cr_expect_eq(rc, LOOM_UNIMPLEMENTED, "exporting the string outputs gave %s: %s", loom_code_name(rc),
               loom_status_message(st));
  cr_expect(strstr(loom_status_message(st), "node '") && strstr(loom_status_message(st), "(op "),
            "the error names no node and op: %s", loom_status_message(st));
  cr_expect(!tu_file_exists(out), "a failed export left %s", out);
  /* an unknown output key, an unknown signature */
  const char *bad[1] = {"logitz"};
  oo.noutputs = 1;
  oo.output_keys = bad;
  cr_expect_eq(loom_onnx_export(ed, out, &oo, st), LOOM_NOT_FOUND);
  cr_expect(strstr(loom_status_message(st), "'logitz'"), "%s", loom_status_message(st));
  oo = loom_onnx_options_default();
  oo.signature = "nope";
  cr_expect_eq(loom_onnx_export(ed, out, &oo, st), LOOM_NOT_FOUND);
  cr_expect(strstr(loom_status_message(st), "'nope'"), "%s", loom_status_message(st));
  oo.signature = "predict";
  oo.opset = 12;
  cr_expect_eq(loom_onnx_export(ed, out, &oo, st), LOOM_INVALID_ARGUMENT);
  cr_expect(strstr(loom_status_message(st), "opset 12"), "%s", loom_status_message(st));

  loom_estimator_free(e);
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(set);
  tu_rmtree(dir);
  loom_status_free(st);
  run_checker(cd);
  run_checker(cd2);
}

/* iris with PetalWidth as the (float) label of a regression. */
static void iris_regression(cu_data *d, int part) {
  cu_iris(d, part, 0);
  for (int i = 0; i < d->nf; i++)
    if (!strcmp(d->names[i], "label")) {
      loom_tensor_free(d->cols[i]);
      d->cols[i] = d->cols[d->nf - 1];
      d->names[i] = d->names[d->nf - 1];
      d->nf--;
      break;
    }
  d->label = "PetalWidth";
}

Test(onnx, canned_linear_regressor) {
  loom_status *st = loom_status_new();
  static const char *fn[3] = {"SepalLength", "SepalWidth", "PetalLength"};
  loom_fc_set *set = loom_fc_set_new();
  const loom_fc *cols[3];
  for (int k = 0; k < 3; k++) cols[k] = loom_fc_numeric(set, fn[k], 0, NULL, NULL, LOOM_F32, NULL, NULL, st);
  cu_data tr, te;
  iris_regression(&tr, 0);
  iris_regression(&te, 1);
  tr.batch = 32;
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "onnx_lin");
  loom_run_config cfg = cu_config();
  loom_linear_options o = loom_linear_options_default();
  o.model_dir = dir;
  o.config = &cfg;
  o.nfeature_columns = 3;
  o.feature_columns = cols;
  loom_estimator *e = loom_linear_regressor_new(&o, st);
  cr_assert(e, "%s", loom_status_message(st));
  char ed[1024], cd[512];
  train_export_case(e, &tr, &te, dir, "linear_regressor", 0, NULL, ed, cd);
  loom_estimator_free(e);
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(set);
  tu_rmtree(dir);
  loom_status_free(st);
  run_checker(cd);
}

/* Bucketize over each input dtype (float32, float64, int32, int64), values on, between and outside the
 * boundaries, NaN (counts every boundary) and infinities: ONNX Runtime's ids must equal the kernel's. */
Test(onnx, bucketize_dtypes) {
  loom_graph *g = loom_graph_new();
  static const float bounds[4] = {-1.0f, 0.0f, 0.5f, 3.0f};
  static const loom_dtype dts[4] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64};
  const char *ik[4] = {"f32", "f64", "i32", "i64"}, *ok[4] = {"b_f32", "b_f64", "b_i32", "b_i64"};
  loom_output xs[4], outs[4];
  int64_t xd[2] = {-1, 3};
  for (int k = 0; k < 4; k++) {
    xs[k] = loom_placeholder(g, dts[k], 2, xd, ik[k]);
    outs[k] = loom_bucketize(g, xs[k], 4, bounds, ok[k]);
  }
  loom_signature sig = {"serving_default", "tensorflow/serving/predict", 4, ik, xs, 4, ok, outs};
  char ed[600];
  loom_session *s = init_and_export(g, &sig, ed);
  int64_t d[2] = {5, 3};
  static const double fv[15] = {-1, 0, 0.5, 3, -2, 7, 0.25, -0.5, 2.999, 3.001, -1e-9, 1e30, -1e30, 0.4999, 0};
  static const int64_t iv[15] = {-1, 0, 1, 3, -2, 7, 2, -5, 4, 100, -100, 0, 1, 2, 3};
  loom_tensor *in[4];
  for (int k = 0; k < 4; k++) {
    in[k] = loom_tensor_new(dts[k], 2, d, NULL);
    for (int i = 0; i < 15; i++) {
      void *p = loom_tensor_data(in[k]);
      if (dts[k] == LOOM_F32) ((float *)p)[i] = (float)fv[i];
      else if (dts[k] == LOOM_F64) ((double *)p)[i] = fv[i];
      else if (dts[k] == LOOM_I32) ((int32_t *)p)[i] = (int32_t)iv[i];
      else ((int64_t *)p)[i] = iv[i];
    }
  }
  ((float *)loom_tensor_data(in[0]))[14] = NAN;
  ((double *)loom_tensor_data(in[1]))[13] = NAN;
  ((float *)loom_tensor_data(in[0]))[11] = INFINITY;
  /* the kernel's ids (an independent count here): f32 row 0 = {0, 2, 3} */
  loom_tensor *got[4] = {0};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, xs, in, 4, outs, got, 4, NULL, 0, st), LOOM_OK, "%s",
               loom_status_message(st));
  const int32_t *b0 = loom_tensor_data_const(got[0]);
  cr_expect(b0[0] == 1 && b0[1] == 2 && b0[2] == 3 && b0[3] == 4 && b0[4] == 0 && b0[14] == 4 && b0[11] == 4,
            "f32 ids %d %d %d %d %d nan:%d inf:%d", b0[0], b0[1], b0[2], b0[3], b0[4], b0[14], b0[11]);
  for (int k = 0; k < 4; k++) loom_tensor_free(got[k]);
  loom_status_free(st);
  char cd[512];
  check_export("bucketize_dtypes", ed, "serving_default", 4, ik, in, 0, NULL, cd);
  expect_same_as_graph_export(g, s, &sig, "bucketize_dtypes");
  for (int k = 0; k < 4; k++) loom_tensor_free(in[k]);
  loom_session_free(s);
  loom_graph_free(g);
  *strrchr(ed, '/') = 0;
  tu_rmtree(ed);
  run_checker(cd);
}

/* SparseEmbedding over the rows of a dense id tensor (DenseToRagged dropping nothing), each combiner, with
 * negative ids (pruned by the kernel: zero rows, not counted) and a row of them only (zeros). */
Test(onnx, sparse_embedding_of_dense_rows) {
  loom_graph *g = loom_graph_new();
  int64_t xd[2] = {-1, 3}, pd[2] = {6, 4};
  loom_output ids = loom_placeholder(g, LOOM_I64, 2, xd, "ids");
  float pv[24];
  for (int i = 0; i < 24; i++) pv[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
  loom_output params = loom_const_data(g, LOOM_F32, 2, pd, pv, "params");
  loom_sparse rows = loom_dense_to_ragged(g, ids, 0, -1, "rows");
  static const loom_combiner combs[3] = {LOOM_COMBINER_SUM, LOOM_COMBINER_MEAN, LOOM_COMBINER_SQRTN};
  const char *ik[1] = {"ids"}, *ok[3] = {"sum", "mean", "sqrtn"};
  loom_output outs[3];
  for (int c = 0; c < 3; c++) outs[c] = loom_sparse_embedding(g, params, rows, (loom_output){NULL, 0}, combs[c], 0, ok[c]);
  loom_signature sig = {"serving_default", "tensorflow/serving/predict", 1, ik, &ids, 3, ok, outs};
  char ed[600];
  loom_session *s = init_and_export(g, &sig, ed);
  int64_t d[2] = {4, 3};
  loom_tensor *in = loom_tensor_new(LOOM_I64, 2, d, NULL);
  static const int64_t iv[12] = {0, 1, 2, 5, 5, -1, -1, -3, -1, 3, 0, 4};
  memcpy(loom_tensor_data(in), iv, sizeof iv);
  /* the kernel's values, against a count here: row 1 = (2 p[5]) / 2 for mean, row 2 = 0 */
  loom_tensor *got[3] = {0};
  loom_status *st = loom_status_new();
  cr_assert_eq(loom_session_run(s, &ids, &in, 1, outs, got, 3, NULL, 0, st), LOOM_OK, "%s", loom_status_message(st));
  const float *mean = loom_tensor_data_const(got[1]), *sq = loom_tensor_data_const(got[2]);
  for (int k = 0; k < 4; k++) {
    cr_expect(fabsf(mean[4 + k] - pv[20 + k]) < 1e-6f && mean[8 + k] == 0.0f, "mean row 1/2 col %d", k);
    cr_expect(fabsf(sq[4 + k] - 2 * pv[20 + k] / sqrtf(2)) < 1e-6f, "sqrtn row 1 col %d", k);
  }
  for (int c = 0; c < 3; c++) loom_tensor_free(got[c]);
  loom_status_free(st);
  char cd[512];
  check_export("sparse_embedding_dense_rows", ed, "serving_default", 1, ik, &in, 0, NULL, cd);
  loom_tensor_free(in);
  loom_session_free(s);
  loom_graph_free(g);
  *strrchr(ed, '/') = 0;
  tu_rmtree(ed);
  run_checker(cd);
}

/* A canned classifier on iris over bucketized PetalLength / PetalWidth and numeric SepalLength / SepalWidth,
 * exported with the default options: ONNX Runtime must give loom's predictions. */
static void bucketized_case(const char *name, int linear) {
  loom_status *st = loom_status_new();
  loom_fc_set *set = loom_fc_set_new();
  static const char *const fn[4] = {"PetalLength", "PetalWidth", "SepalLength", "SepalWidth"};
  const loom_fc *num[4];
  for (int k = 0; k < 4; k++) num[k] = loom_fc_numeric(set, fn[k], 0, NULL, NULL, LOOM_F32, NULL, NULL, st);
  static const float bl[3] = {2.5f, 4.75f, 5.1f}, bw[4] = {0.8f, 1.3f, 1.75f, 2.0f};
  const loom_fc *cols[4] = {loom_fc_bucketized(set, num[0], 3, bl, st), loom_fc_bucketized(set, num[1], 4, bw, st),
                            num[2], num[3]};
  cr_assert(cols[0] && cols[1], "%s", loom_status_message(st));
  cu_data tr, te;
  iris_split(&tr, &te);
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "onnx_bkt");
  loom_run_config cfg = cu_config();
  loom_estimator *e;
  if (linear) {
    loom_linear_options o = loom_linear_options_default();
    o.model_dir = dir;
    o.config = &cfg;
    o.n_classes = 3;
    o.nfeature_columns = 4;
    o.feature_columns = cols;
    o.sparse_combiner = LOOM_COMBINER_SQRTN;
    e = loom_linear_classifier_new(&o, st);
  } else {
    static const int64_t hidden[1] = {8};
    loom_dnn_options o = loom_dnn_options_default();
    o.model_dir = dir;
    o.config = &cfg;
    o.n_classes = 3;
    o.nfeature_columns = 4;
    o.feature_columns = cols;
    o.nhidden_units = 1;
    o.hidden_units = hidden;
    e = loom_dnn_classifier_new(&o, st);
  }
  cr_assert(e, "%s", loom_status_message(st));
  char ed[1024], cd[512];
  train_export_case(e, &tr, &te, dir, name, 0, NULL, ed, cd);
  loom_estimator_free(e);
  cu_data_free(&tr);
  cu_data_free(&te);
  loom_fc_set_free(set);
  tu_rmtree(dir);
  loom_status_free(st);
  run_checker(cd);
}

/* A DNN: the bucket ids are one-hot pieces of the input layer (LoomMultiHotConcat over Bucketize). */
Test(onnx, canned_dnn_bucketized) { bucketized_case("dnn_bucketized", 0); }

/* A linear model: a weight row per bucket id (Bucketize, an offset per element, LoomDenseToRagged,
 * LoomSparseEmbedding with the sqrtn combiner). */
Test(onnx, canned_linear_bucketized) { bucketized_case("linear_bucketized", 1); }

/* A feature op ONNX cannot express: the error names the node and its op. */
Test(onnx, unsupported_op_names_node) {
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  int64_t d[1] = {-1};
  loom_output w = loom_placeholder(g, LOOM_STRING, 1, d, "word");
  static const char *const vocab[3] = {"a", "b", "c"};
  loom_output ids = loom_vocab_lookup_strings(g, w, 3, vocab, 1, -1, "lookup");
  loom_output f = loom_cast(g, ids, LOOM_F32, "as_float");
  const char *ik[1] = {"word"}, *ok[1] = {"ids"};
  loom_signature sig = {"serving_default", "", 1, ik, &w, 1, ok, &f};
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s, "%s", loom_status_message(st));
  char tmp[TU_TMPDIR_CAP], out[200];
  tu_tmpdir(tmp, sizeof tmp, "onnx_bad");
  snprintf(out, sizeof out, "%s/m.onnx", tmp);
  cr_expect_eq(loom_onnx_export_graph(g, s, &sig, out, NULL, st), LOOM_UNIMPLEMENTED);
  cr_expect(strstr(loom_status_message(st), "node 'lookup' (op LoomVocabLookup)"), "%s", loom_status_message(st));
  cr_expect(!tu_file_exists(out));
  /* the same through an export directory */
  char ed[300];
  snprintf(ed, sizeof ed, "%s/export", tmp);
  cr_assert_eq(loom_export_write(g, s, 1, &sig, ed, st), LOOM_OK, "%s", loom_status_message(st));
  cr_expect_eq(loom_onnx_export(ed, out, NULL, st), LOOM_UNIMPLEMENTED);
  cr_expect(strstr(loom_status_message(st), "node 'lookup' (op LoomVocabLookup)"), "%s", loom_status_message(st));
  /* a placeholder outside the signature */
  int64_t d2[2] = {-1, 2};
  loom_output a = loom_placeholder(g, LOOM_F32, 2, d2, "a"), b = loom_placeholder(g, LOOM_F32, 2, d2, "b");
  loom_output sum = loom_add(g, a, b, "sum");
  const char *ak[1] = {"a"}, *sk[1] = {"sum"};
  loom_signature sig2 = {"s", "", 1, ak, &a, 1, sk, &sum};
  cr_expect_eq(loom_onnx_export_graph(g, s, &sig2, out, NULL, st), LOOM_UNIMPLEMENTED);
  cr_expect(strstr(loom_status_message(st), "node 'b' (op Placeholder)"), "%s", loom_status_message(st));
  loom_session_free(s);
  loom_graph_free(g);
  tu_rmtree(tmp);
  loom_status_free(st);
}
