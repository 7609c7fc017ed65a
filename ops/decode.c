/* Decode ops: tf.io.decode_raw, tf.io.decode_csv, tf.strings.to_number;
 * their CPU kernels are in kernels/cpu/decode.c. None is differentiable
 * (NODIFF) and none has a CUDA kernel (string inputs run on the host).
 *
 * Inputs and attributes (fields of loom_attrs):
 *   DecodeRaw       (bytes string [...]) -> dtype [..., n]; dtype = out_type (uint8, int32, int64, float32,
 *                   float64), keepdims = little_endian. n = the length of the strings / the type's size (all
 *                   must be equal): DATA_SHAPE, so it runs in the host pass.
 *   DecodeCSV       (records string [...], na_value string [] (Const), select_cols i64 [k] (Const, k = 0: all
 *                   columns), default_0 .. default_{c-1}) -> c outputs of the records' shape, output i of
 *                   default_i's dtype (float32, float64, int32, int64, string); a default is [0] (the column
 *                   is required) or [1]. axis = field_delim (one byte), keepdims = use_quote_delim, num = the
 *                   fields looked at (the last selected column + 1, or c).
 *   StringToNumber  (x string [...]) -> dtype [...]; dtype float32, float64, int32 or int64.
 */
#include <stdlib.h>
#include "ops/op_common.h"
#include "kernels/cpu/decode.h"

#define FAIL(...) return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, __VA_ARGS__)
#define DT_CSV (LOOM_DT_FLOAT | LOOM_DT_INT | LOOM_DT(LOOM_STRING))

static loom_code shape_decode_raw(loom_shape_ctx *c) {
  if (c->in[0].dtype != LOOM_STRING) FAIL("bytes must be a string tensor, got %s", loom_dtype_name(c->in[0].dtype));
  if (!loom__decode_raw_size(c->attrs->dtype))
    FAIL("out_type must be uint8, int32, int64, float32 or float64, got %s", loom_dtype_name(c->attrs->dtype));
  if (c->in[0].ndim >= LOOM_MAX_DIMS) FAIL("bytes has rank %d; at most %d", c->in[0].ndim, LOOM_MAX_DIMS - 1);
  c->out[0] = c->in[0];
  c->out[0].dtype = c->attrs->dtype;
  c->out[0].dims[c->out[0].ndim++] = -1;
  return LOOM_OK;
}

static loom_code vshape_decode_raw(const loom_attrs *a, int nin, const loom_buf *const *in, int nout, loom_tdesc *out,
                                   char *msg, size_t msglen) {
  (void)nin, (void)nout;
  const loom_buf *X = in[0];
  const loom_tstring *s = X->data;
  int es = loom__decode_raw_size(a->dtype);
  out[0].dtype = a->dtype;
  out[0].ndim = X->ndim + 1;
  for (int i = 0; i < X->ndim; i++) out[0].dims[i] = X->dims[i];
  int64_t n = X->numel ? (int64_t)s[0].len : 0;
  if (n % es) {
    snprintf(msg, msglen, "input to DecodeRaw has length %lld that is not a multiple of %d, the size of %s",
             (long long)n, es, loom_dtype_name(a->dtype));
    return LOOM_INVALID_ARGUMENT;
  }
  for (int64_t i = 1; i < X->numel; i++)
    if ((int64_t)s[i].len != n) {
      snprintf(msg, msglen, "DecodeRaw requires input strings to all be the same size, but element %lld has size "
               "%zu != %lld", (long long)i, s[i].len, (long long)n);
      return LOOM_INVALID_ARGUMENT;
    }
  out[0].dims[X->ndim] = n / es;
  return LOOM_OK;
}

static loom_code shape_decode_csv(loom_shape_ctx *c) {
  if (c->nin < 4) FAIL("needs (records, na_value, select_cols, defaults...), got %d inputs", c->nin);
  if (c->in[0].dtype != LOOM_STRING) FAIL("records must be a string tensor, got %s", loom_dtype_name(c->in[0].dtype));
  if (c->in[1].dtype != LOOM_STRING || c->in[1].ndim != 0) FAIL("na_value must be a string scalar");
  if (c->in[2].dtype != LOOM_I64 || c->in[2].ndim != 1) FAIL("select_cols must be an int64 vector");
  int ncol = c->nin - 3;
  if (c->nout != ncol) FAIL("has %d defaults but %d outputs", ncol, c->nout);
  if (c->in[2].dims[0] > 0 && c->in[2].dims[0] != ncol)
    FAIL("%lld select_cols for %d record_defaults", (long long)c->in[2].dims[0], ncol);
  if (c->attrs->num < ncol) FAIL("num (%lld) must be at least the number of columns, %d", (long long)c->attrs->num, ncol);
  for (int i = 0; i < ncol; i++) {
    const loom_tdesc *d = &c->in[3 + i];
    if (!(DT_CSV & LOOM_DT(d->dtype)))
      FAIL("record_defaults[%d] is %s; a column is float32, float64, int32, int64 or string", i,
           loom_dtype_name(d->dtype));
    if (d->ndim > 1 || (d->ndim == 1 && d->dims[0] > 1))
      FAIL("record_defaults[%d] must have at most one element, got %s", i, loom__tdesc_str(d));
    c->out[i] = c->in[0];
    c->out[i].dtype = d->dtype;
  }
  return LOOM_OK;
}

static loom_code shape_string_to_number(loom_shape_ctx *c) {
  if (c->in[0].dtype != LOOM_STRING) FAIL("x must be a string tensor, got %s", loom_dtype_name(c->in[0].dtype));
  if (!(LOOM_DT_FLOAT & LOOM_DT(c->attrs->dtype)) && !(LOOM_DT_INT & LOOM_DT(c->attrs->dtype)))
    FAIL("out_type must be float32, float64, int32 or int64, got %s", loom_dtype_name(c->attrs->dtype));
  c->out[0] = c->in[0];
  c->out[0].dtype = c->attrs->dtype;
  return LOOM_OK;
}

void loom__register_decode(loom_op_def *t) {
  loom_op_def *d = &t[LOOM_OP_DecodeRaw];
  d->nin = 1, d->nout = 1, d->shape = shape_decode_raw, d->flags = LOOM_OPF_NODIFF | LOOM_OPF_DATA_SHAPE;
  d->value_shape = vshape_decode_raw;
  d->kernels[LOOM_DEVICE_CPU][LOOM_STRING] = loom__k_decode_raw;
  d = &t[LOOM_OP_DecodeCSV];
  d->nin = -1, d->nout = -1, d->shape = shape_decode_csv, d->flags = LOOM_OPF_NODIFF;
  d->workspace = loom__ws_decode_csv;
  d->kernels[LOOM_DEVICE_CPU][LOOM_STRING] = loom__k_decode_csv;
  d = &t[LOOM_OP_StringToNumber];
  d->nin = 1, d->nout = 1, d->shape = shape_string_to_number, d->flags = LOOM_OPF_NODIFF;
  d->kernels[LOOM_DEVICE_CPU][LOOM_STRING] = loom__k_string_to_number;
}

/* ---------------------------------------------------------------------- */
/* builders                                                               */
/* ---------------------------------------------------------------------- */

loom_output loom_decode_raw(loom_graph *g, loom_output bytes, loom_dtype out_type, int little_endian,
                            const char *name) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.dtype = out_type;
  a.keepdims = little_endian ? 1 : 0;
  return loom__build1(g, LOOM_OP_DecodeRaw, name, bytes, &a);
}

loom_output loom_string_to_number(loom_graph *g, loom_output x, loom_dtype out_type, const char *name) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  a.dtype = out_type;
  return loom__build1(g, LOOM_OP_StringToNumber, name, x, &a);
}

int loom_decode_csv(loom_graph *g, loom_output records, int ncols, const loom_tensor *const *record_defaults,
                    char field_delim, int use_quote_delim, const char *na_value, int nselect,
                    const int64_t *select_cols, loom_output *out, const char *name) {
  if (!g) return 0;
  const char *nm = name ? name : "DecodeCSV";
  const char *bad = NULL;
  if (ncols < 1 || !record_defaults || !out)
    bad = ncols < 1 ? "needs at least one column (record_defaults)" : "record_defaults or out is NULL";
  else if (nselect != 0 && (nselect != ncols || !select_cols))
    bad = "select_cols must name one column per record default";
  else if (field_delim == '\n' || field_delim == '\r' || (use_quote_delim && field_delim == '"'))
    bad = "field_delim may not be a line break or the quote";
  for (int i = 0; !bad && i < ncols; i++)
    if (!record_defaults[i]) bad = "a record default is NULL";
  for (int i = 0; !bad && i < nselect; i++)
    if (select_cols[i] < 0 || (i && select_cols[i] <= select_cols[i - 1]))
      bad = "select_cols must be >= 0 and strictly increasing";
  if (bad) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: %s", nm, bad);
    return 0;
  }
  loom_output *in = malloc((size_t)(ncols + 3) * sizeof *in);
  loom_status *st = loom_status_new();
  int64_t k = nselect;
  loom_tensor *na = loom_tensor_new(LOOM_STRING, 0, NULL, st), *sel = loom_tensor_new(LOOM_I64, 1, &k, st);
  int ok = 0;
  if (!in || !na || !sel || loom_tensor_set_string(na, 0, na_value ? na_value : "", na_value ? strlen(na_value) : 0, st)) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", nm);
  } else {
    if (nselect) memcpy(loom_tensor_data(sel), select_cols, (size_t)nselect * sizeof *select_cols);
    char cn[512];
    in[0] = records;
    snprintf(cn, sizeof cn, "%s/na_value", nm);
    in[1] = loom_const(g, na, cn);
    snprintf(cn, sizeof cn, "%s/select_cols", nm);
    in[2] = loom_const(g, sel, cn);
    for (int i = 0; i < ncols; i++) {
      snprintf(cn, sizeof cn, "%s/default_%d", nm, i);
      in[3 + i] = loom_const(g, record_defaults[i], cn);
    }
    loom_attrs a;
    memset(&a, 0, sizeof a);
    a.axis = (unsigned char)field_delim;
    a.keepdims = use_quote_delim ? 1 : 0;
    a.num = nselect ? select_cols[nselect - 1] + 1 : ncols;
    loom_node *n = loom__graph_add(g, LOOM_OP_DecodeCSV, name, NULL, ncols + 3, in, &a, ncols);
    if (n) {
      for (int j = 0; j < ncols; j++) out[j] = (loom_output){n, j};
      ok = 1;
    }
  }
  free(in);
  loom_tensor_free(na);
  loom_tensor_free(sel);
  loom_status_free(st);
  return ok ? ncols : 0;
}
