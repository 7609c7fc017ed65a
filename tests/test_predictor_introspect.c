/* The predictor's signature introspection added for language bindings
 * (python/): signature names, input/output dtypes and static shapes, so a
 * binding can convert its arrays before loom_predictor_run. */
#include "test_util.h"

static const char *k_in[] = {"x", "ids"};
static const char *k_out[] = {"y", "n"};
static const char *k_out2[] = {"y"};

Test(predictor_introspect, names_dtypes_shapes) {
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  loom_output x = loom_placeholder(g, LOOM_F32, 2, (int64_t[]){-1, 3}, "x");
  loom_output ids = loom_placeholder(g, LOOM_I64, 1, (int64_t[]){-1}, "ids");
  float w[6] = {1, 2, 3, 4, 5, 6};
  loom_output W = loom_const_data(g, LOOM_F32, 2, (int64_t[]){3, 2}, w, "w");
  loom_output y = loom_matmul(g, x, W, 0, 0, "y");
  loom_output n = loom_cast(g, ids, LOOM_I32, "n");
  cr_assert_eq(loom_graph_status(g, st), LOOM_OK, "%s", loom_status_message(st));
  loom_session *s = loom_session_new(g, NULL, st);
  cr_assert(s);
  loom_output ins[2] = {x, ids}, outs[2] = {y, n}, outs2[1] = {y};
  loom_signature sigs[2] = {{"serving_default", "tensorflow/serving/predict", 2, k_in, ins, 2, k_out, outs},
                            {"only_y", "tensorflow/serving/predict", 1, k_in, ins, 1, k_out2, outs2}};
  char dir[TU_TMPDIR_CAP];
  tu_tmpdir(dir, sizeof dir, "loom_pintro");
  char sub[TU_TMPDIR_CAP + 8];
  snprintf(sub, sizeof sub, "%s/exp", dir);
  cr_assert_eq(loom_export_write(g, s, 2, sigs, sub, st), LOOM_OK, "%s", loom_status_message(st));
  loom_predictor *p = loom_predictor_load(sub, NULL, st);
  cr_assert(p, "%s", loom_status_message(st));

  cr_assert_eq(loom_predictor_num_signatures(p), 2);
  int seen = 0;
  for (int i = 0; i < 2; i++) {
    const char *nm = loom_predictor_signature_name(p, i);
    cr_assert(nm);
    if (!strcmp(nm, "serving_default")) seen |= 1;
    if (!strcmp(nm, "only_y")) seen |= 2;
  }
  cr_assert_eq(seen, 3);
  cr_assert_null(loom_predictor_signature_name(p, 2));
  cr_assert_null(loom_predictor_signature_name(p, -1));
  cr_assert_eq(loom_predictor_num_signatures(NULL), -1);

  int64_t d[LOOM_MAX_DIMS] = {0};
  cr_assert_eq(loom_predictor_input_dtype(p, NULL, 0), LOOM_F32);
  cr_assert_eq(loom_predictor_input_shape(p, NULL, 0, d), 2);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(d[1], 3);
  cr_assert_eq(loom_predictor_input_dtype(p, "serving_default", 1), LOOM_I64);
  cr_assert_eq(loom_predictor_input_shape(p, NULL, 1, d), 1);
  cr_assert_eq(d[0], -1);
  cr_assert_eq(loom_predictor_output_dtype(p, NULL, 0), LOOM_F32);
  cr_assert_eq(loom_predictor_output_shape(p, NULL, 0, d), 2);
  cr_assert_eq(d[1], 2);
  cr_assert_eq(loom_predictor_output_dtype(p, NULL, 1), LOOM_I32);
  cr_assert_eq(loom_predictor_output_shape(p, NULL, 1, NULL), 1);
  cr_assert_eq(loom_predictor_output_dtype(p, "only_y", 0), LOOM_F32);
  /* unknown signature or index */
  cr_assert_eq(loom_predictor_input_dtype(p, "nope", 0), LOOM_DTYPE_INVALID);
  cr_assert_eq(loom_predictor_input_dtype(p, NULL, 2), LOOM_DTYPE_INVALID);
  cr_assert_eq(loom_predictor_input_shape(p, NULL, -1, d), -1);
  cr_assert_eq(loom_predictor_output_dtype(p, "only_y", 1), LOOM_DTYPE_INVALID);
  cr_assert_eq(loom_predictor_output_shape(p, "nope", 0, d), -1);

  /* the static types are the ones the run enforces and produces */
  float xv[3] = {1, 0, -1};
  int64_t iv[2] = {7, 8};
  loom_tensor *in[2] = {loom_tensor_from_data(LOOM_F32, 2, (int64_t[]){1, 3}, xv, st),
                        loom_tensor_from_data(LOOM_I64, 1, (int64_t[]){2}, iv, st)};
  loom_tensor *out[2] = {NULL, NULL};
  cr_assert_eq(loom_predictor_run(p, NULL, 2, in, 2, out, st), LOOM_OK, "%s", loom_status_message(st));
  cr_assert_eq(loom_tensor_dtype(out[0]), loom_predictor_output_dtype(p, NULL, 0));
  cr_assert_eq(loom_tensor_dtype(out[1]), loom_predictor_output_dtype(p, NULL, 1));
  const float *yo = loom_tensor_data(out[0]);
  cr_assert_float_eq(yo[0], 1 - 5.f, 1e-6);
  cr_assert_float_eq(yo[1], 2 - 6.f, 1e-6);
  for (int i = 0; i < 2; i++) {
    loom_tensor_free(in[i]);
    loom_tensor_free(out[i]);
  }
  loom_predictor_free(p);
  loom_session_free(s);
  loom_graph_free(g);
  tu_rmtree(dir);
  loom_status_free(st);
}
