/* Feature ops: Bucketize, AsString, StringToHashBucketFast, VocabLookup,
 * CheckIds, SparseCrossHashed (loom_sparse.h); their CPU kernels are in
 * kernels/cpu/feature.c. None is differentiable (ids and hashes), so every
 * one is flagged NODIFF. None has a CUDA kernel: a CUDA session runs them on
 * the CPU, node by node (string-valued plans run on the host anyway).
 *
 * Inputs and attributes (fields of loom_attrs). Integer attributes that may
 * take any int64 value (bucket counts, hash keys, default ids) live in the
 * u64 fields seed/seed2, which the graph file keeps unchecked:
 *   Bucketize               (x f32/f64/i32/i64, boundaries f32 [nb], a Const) -> i32, x's shape
 *   AsString                (x i32/i64) -> string, x's shape (the bytes go to the run's string arena,
 *                           loom_kctx.strings: the session's, or the host pass's when a data-shape op needs it)
 *   StringToHashBucketFast  (x string/i32/i64) -> i64; seed = num_buckets (>= 1)
 *   LoomVocabLookup         (x, keys [n] (string, or i64 for int x), index i64 [cap]) -> i64, x's shape;
 *                           seed = num_oov_buckets (>= 0), seed2 = default_value.
 *                           keys and index are Consts made by the builder, so the table is part of the
 *                           graph; index is an open-addressing table (cap a power of two > n, linear
 *                           probing from a seeded hash of the key & (cap - 1), entries = key positions, -1
 *                           empty, then the seed: cap + 1 entries; kernels/cpu/feature.h). With
 *                           num_oov_buckets > 0 an id equal to default_value counts as a miss, as in
 *                           TF's IdTableWithHashBuckets (where(ids != default, ids, buckets)).
 *   LoomCheckIds            (ids i32/i64) -> i64; seed = num_buckets, keepdims = has_default,
 *                           seed2 = default_value
 *   LoomRaggedCrossHashed   (values_0, row_splits_0, ..., values_k-1, row_splits_k-1) -> (values i64 [nnz],
 *                           row_splits i64 [B+1]); seed = hash_key, seed2 = num_buckets; DATA_SHAPE
 *   LoomParseExample        (serialized string [B], keys string [n] (Const), spec i64 [n, 12] (Const),
 *                           defaults...) -> per feature in spec order: FixedLen dense [B, shape...];
 *                           VarLen ragged (values [nnz], row_splits i64 [B+1]). tf.io.parse_example with
 *                           FixedLenFeature / VarLenFeature; the spec table's layout and the defaults (one
 *                           Const per FixedLen feature that has one, of its dtype and shape) are in
 *                           kernels/cpu/parse_example.h; kernel in kernels/cpu/parse_example.c. DATA_SHAPE
 *                           (VarLen sizes come from the bytes), so it runs in the host pass.
 */
#include <errno.h>
#include <stdlib.h>
#include "ops/op_common.h"
#include "kernels/cpu/feature.h"
#include "kernels/cpu/parse_example.h"
#include "loom/loom_data.h"
#include "base/fingerprint.h"
#include "loom/loom_sparse.h"

#define FAIL(...) return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, __VA_ARGS__)
#define DT_BUCKETIZE (LOOM_DT_FLOAT | LOOM_DT_INT)
#define DT_TEXT (LOOM_DT_INT | LOOM_DT(LOOM_STRING))

static loom_code shape_bucketize(loom_shape_ctx *c) {
  if (!(DT_BUCKETIZE & LOOM_DT(c->in[0].dtype)))
    FAIL("x must be float32, float64, int32 or int64, got %s", loom_dtype_name(c->in[0].dtype));
  if (c->in[1].dtype != LOOM_F32 || c->in[1].ndim != 1)
    FAIL("boundaries must be a float32 vector, got %s %s", loom_dtype_name(c->in[1].dtype), loom__tdesc_str(&c->in[1]));
  const loom_tensor *b = c->in_value ? c->in_value[1] : NULL;
  if (b) {
    const float *v = loom_tensor_data_const(b);
    for (int64_t j = 1; j < loom_tensor_numel(b); j++)
      if (!(v[j - 1] <= v[j]))
        FAIL("boundaries must be sorted ascending, but boundaries[%lld] = %g follows %g", (long long)j, (double)v[j],
             (double)v[j - 1]);
  }
  c->out[0] = c->in[0];
  c->out[0].dtype = LOOM_I32;
  return LOOM_OK;
}

static loom_code shape_as_string(loom_shape_ctx *c) {
  if (!(LOOM_DT_INT & LOOM_DT(c->in[0].dtype)))
    FAIL("x must be int32 or int64, got %s", loom_dtype_name(c->in[0].dtype));
  c->out[0] = c->in[0];
  c->out[0].dtype = LOOM_STRING;
  return LOOM_OK;
}

static loom_code shape_hash_bucket(loom_shape_ctx *c) {
  if (!(DT_TEXT & LOOM_DT(c->in[0].dtype)))
    FAIL("x must be string, int32 or int64, got %s", loom_dtype_name(c->in[0].dtype));
  if ((int64_t)c->attrs->seed < 1) FAIL("num_buckets must be >= 1, got %lld", (long long)(int64_t)c->attrs->seed);
  c->out[0] = c->in[0];
  c->out[0].dtype = LOOM_I64;
  return LOOM_OK;
}

static loom_code shape_vocab(loom_shape_ctx *c) {
  loom_dtype x = c->in[0].dtype, k = c->in[1].dtype;
  if (!(DT_TEXT & LOOM_DT(x))) FAIL("x must be string, int32 or int64, got %s", loom_dtype_name(x));
  if (x == LOOM_STRING && k != LOOM_STRING)
    FAIL("x is a string but the vocabulary holds %s keys", loom_dtype_name(k));
  if (x != LOOM_STRING && k != LOOM_I64)
    FAIL("x is %s but the vocabulary holds %s keys (an integer x needs int64 keys)", loom_dtype_name(x),
         loom_dtype_name(k));
  if (c->in[1].ndim != 1 || c->in[2].ndim != 1 || c->in[2].dtype != LOOM_I64)
    FAIL("keys must be a vector and index an int64 vector, got %s and %s %s", loom__tdesc_str(&c->in[1]),
         loom_dtype_name(c->in[2].dtype), loom__tdesc_str(&c->in[2]));
  if ((int64_t)c->attrs->seed < 0)
    FAIL("num_oov_buckets must be >= 0, got %lld", (long long)(int64_t)c->attrs->seed);
  c->out[0] = c->in[0];
  c->out[0].dtype = LOOM_I64;
  return LOOM_OK;
}

static loom_code shape_check_ids(loom_shape_ctx *c) {
  if (!(LOOM_DT_INT & LOOM_DT(c->in[0].dtype)))
    FAIL("ids must be int32 or int64, got %s", loom_dtype_name(c->in[0].dtype));
  int64_t nb = (int64_t)c->attrs->seed, d = (int64_t)c->attrs->seed2;
  if (nb < 1) FAIL("num_buckets must be >= 1, got %lld", (long long)nb);
  if (c->attrs->keepdims && (d < 0 || d >= nb))
    FAIL("default_value %lld is not in [0, %lld)", (long long)d, (long long)nb);
  c->out[0] = c->in[0];
  c->out[0].dtype = LOOM_I64;
  return LOOM_OK;
}

enum { MAX_CROSS = 32 };

static loom_code shape_cross(loom_shape_ctx *c) {
  if (c->nin < 2 || c->nin % 2) FAIL("needs (values, row_splits) pairs, got %d inputs", c->nin);
  int k = c->nin / 2;
  if (k > MAX_CROSS) FAIL("at most %d inputs can be crossed, got %d", MAX_CROSS, k);
  if (c->nout != 2) FAIL("has 2 outputs, the node has %d", c->nout);
  if ((int64_t)c->attrs->seed2 < 1) FAIL("num_buckets must be >= 1, got %lld", (long long)(int64_t)c->attrs->seed2);
  int64_t rows = -1;
  for (int j = 0; j < k; j++) {
    const loom_tdesc *v = &c->in[2 * j], *s = &c->in[2 * j + 1];
    if (!(DT_TEXT & LOOM_DT(v->dtype)))
      FAIL("input %d: values must be string, int32 or int64, got %s", j, loom_dtype_name(v->dtype));
    if (v->ndim != 1) FAIL("input %d: values must be a vector, got %s", j, loom__tdesc_str(v));
    if (s->dtype != LOOM_I64 || s->ndim != 1)
      FAIL("input %d: row_splits must be an int64 vector, got %s %s", j, loom_dtype_name(s->dtype),
           loom__tdesc_str(s));
    if (s->dims[0] == 0) FAIL("input %d: row_splits must have at least one entry", j);
    if (s->dims[0] >= 0) {
      if (rows >= 0 && s->dims[0] != rows)
        FAIL("input %d has %lld rows, input 0 has %lld", j, (long long)(s->dims[0] - 1), (long long)(rows - 1));
      rows = s->dims[0];
    }
  }
  c->out[0].dtype = LOOM_I64;
  c->out[0].ndim = 1;
  c->out[0].dims[0] = -1;
  c->out[1].dtype = LOOM_I64;
  c->out[1].ndim = 1;
  c->out[1].dims[0] = rows;
  return LOOM_OK;
}

static loom_code vshape_cross(const loom_attrs *a, int nin, const loom_buf *const *in, int nout, loom_tdesc *out,
                              char *msg, size_t msglen) {
  int k = nin / 2;
  int64_t splits = in[1]->numel;
  for (int j = 0; j < k; j++) {
    const loom_buf *v = in[2 * j], *s = in[2 * j + 1];
    const int64_t *sp = s->data;
    if (s->numel != splits) {
      snprintf(msg, msglen, "input %d has %lld rows, input 0 has %lld", j, (long long)(s->numel - 1),
               (long long)(splits - 1));
      return LOOM_INVALID_ARGUMENT;
    }
    if (s->numel < 1 || sp[0] != 0 || sp[s->numel - 1] != v->numel) {
      snprintf(msg, msglen, "input %d: row_splits must start at 0 and end at the %lld values, got %lld .. %lld", j,
               (long long)v->numel, (long long)(s->numel ? sp[0] : -1), (long long)(s->numel ? sp[s->numel - 1] : -1));
      return LOOM_INVALID_ARGUMENT;
    }
    for (int64_t r = 0; r + 1 < s->numel; r++)
      if (sp[r + 1] < sp[r]) {
        snprintf(msg, msglen, "input %d: row_splits decrease at row %lld (%lld then %lld)", j, (long long)r,
                 (long long)sp[r], (long long)sp[r + 1]);
        return LOOM_INVALID_ARGUMENT;
      }
  }
  int64_t nnz = 0;
  for (int64_t r = 0; r + 1 < splits; r++) {
    int64_t p = 1;
    for (int j = 0; j < k; j++) {
      const int64_t *sp = in[2 * j + 1]->data;
      if (__builtin_mul_overflow(p, sp[r + 1] - sp[r], &p) || p > LOOM_MAX_NUMEL) {
        snprintf(msg, msglen, "row %lld crosses into more than %lld values", (long long)r, (long long)LOOM_MAX_NUMEL);
        return LOOM_INVALID_ARGUMENT;
      }
    }
    if (__builtin_add_overflow(nnz, p, &nnz) || nnz > LOOM_MAX_NUMEL) {
      snprintf(msg, msglen, "the cross has more than %lld values", (long long)LOOM_MAX_NUMEL);
      return LOOM_INVALID_ARGUMENT;
    }
  }
  out[0].dtype = LOOM_I64;
  out[0].ndim = 1;
  out[0].dims[0] = nnz;
  out[1].dtype = LOOM_I64;
  out[1].ndim = 1;
  out[1].dims[0] = splits;
  return LOOM_OK;
}

/* The spec table of a LoomParseExample node (inputs 1 and 2, constants):
 * checks it against the node's inputs and outputs; fills out[] with the
 * static shapes (rows = B or -1). */
static loom_code pe_check(const loom_attrs *a, int nin, const loom_tdesc *ind, const loom_tensor *keys,
                          const loom_tensor *spec, int nout, loom_tdesc *out, int64_t rows, char *msg, size_t ml) {
  (void)a;
#define PE_FAIL(...) return (snprintf(msg, ml, __VA_ARGS__), LOOM_INVALID_ARGUMENT)
  if (!keys || !spec) PE_FAIL("the feature keys and the spec table must be constants");
  int64_t n = loom_tensor_numel(keys);
  if (loom_tensor_dtype(keys) != LOOM_STRING || loom_tensor_ndim(keys) != 1 || loom_tensor_dtype(spec) != LOOM_I64 ||
      loom_tensor_ndim(spec) != 2 || loom_tensor_dims(spec)[0] != n || loom_tensor_dims(spec)[1] != LOOM_PE_W)
    PE_FAIL("keys must be a string vector [n] and the spec table int64 [n, %d]", (int)LOOM_PE_W);
  if (n < 1 || n > 64) PE_FAIL("%lld features; between 1 and 64 can be parsed by one node", (long long)n);
  const int64_t *d = loom_tensor_data_const(spec);
  int o = 0, di = 3;
  for (int64_t s = 0; s < n; s++) {
    const int64_t *r = d + s * LOOM_PE_W;
    size_t kl;
    const char *k = loom_tensor_get_string(keys, s, &kl);
    int kn = (int)(kl > 200 ? 200 : kl);
    loom_dtype dt = (loom_dtype)r[LOOM_PE_DTYPE];
    if (r[LOOM_PE_KIND] != LOOM_PE_FIXED && r[LOOM_PE_KIND] != LOOM_PE_VARLEN)
      PE_FAIL("feature '%.*s': kind %lld is not FixedLen (0) or VarLen (1)", kn, k, (long long)r[LOOM_PE_KIND]);
    if (dt != LOOM_F32 && dt != LOOM_I64 && dt != LOOM_STRING)
      PE_FAIL("feature '%.*s': dtype %lld; a tf.Example feature is float32, int64 or string", kn, k,
              (long long)r[LOOM_PE_DTYPE]);
    int varlen = r[LOOM_PE_KIND] == LOOM_PE_VARLEN;
    int64_t nd = r[LOOM_PE_NDIM];
    if (nd < 0 || nd > LOOM_MAX_DIMS - 1 || (varlen && (nd || r[LOOM_PE_HASDEF])))
      PE_FAIL("feature '%.*s': rank %lld (a FixedLen shape has at most %d dims; VarLen has none and no default)", kn,
              k, (long long)nd, LOOM_MAX_DIMS - 1);
    int64_t numel = 1;
    for (int j = 0; j < nd; j++) {
      if (r[LOOM_PE_DIMS + j] < 0) PE_FAIL("feature '%.*s': dims[%d] is %lld; the shape must be known", kn, k, j,
                                             (long long)r[LOOM_PE_DIMS + j]);
      numel *= r[LOOM_PE_DIMS + j];
      if (numel > ((int64_t)1 << 40)) PE_FAIL("feature '%.*s': shape too large", kn, k);
    }
    if (r[LOOM_PE_HASDEF]) {
      if (di >= nin) PE_FAIL("feature '%.*s' has a default but the node has only %d inputs", kn, k, nin);
      const loom_tdesc *t = &ind[di++];
      int64_t tn = 1;
      for (int j = 0; j < t->ndim; j++) tn *= t->dims[j];
      if (t->dtype != dt || tn != numel)
        PE_FAIL("feature '%.*s': the default is %s with %lld elements, the spec wants %s with %lld", kn, k,
                loom_dtype_name(t->dtype), (long long)tn, loom_dtype_name(dt), (long long)numel);
    }
    if (o + (varlen ? 2 : 1) > nout) PE_FAIL("the spec needs more than the node's %d outputs", nout);
    if (varlen) {
      out[o].dtype = dt;
      out[o].ndim = 1;
      out[o].dims[0] = -1;
      out[o + 1].dtype = LOOM_I64;
      out[o + 1].ndim = 1;
      out[o + 1].dims[0] = rows < 0 ? -1 : rows + 1;
      o += 2;
    } else {
      out[o].dtype = dt;
      out[o].ndim = (int32_t)nd + 1;
      out[o].dims[0] = rows;
      for (int j = 0; j < nd; j++) out[o].dims[j + 1] = r[LOOM_PE_DIMS + j];
      o++;
    }
  }
  if (o != nout) PE_FAIL("the spec has %d outputs, the node %d", o, nout);
  if (di != nin) PE_FAIL("the spec has %d defaults, the node %d", di - 3, nin - 3);
  return LOOM_OK;
#undef PE_FAIL
}

static loom_code shape_parse_example(loom_shape_ctx *c) {
  if (c->nin < 3) FAIL("needs (serialized, keys, spec, defaults...), got %d inputs", c->nin);
  if (c->in[0].dtype != LOOM_STRING || c->in[0].ndim != 1)
    FAIL("serialized must be a string vector [batch], got %s %s", loom_dtype_name(c->in[0].dtype),
         loom__tdesc_str(&c->in[0]));
  char msg[256];
  loom_code rc = pe_check(c->attrs, c->nin, c->in, c->in_value ? c->in_value[1] : NULL,
                          c->in_value ? c->in_value[2] : NULL, c->nout, c->out, c->in[0].dims[0], msg, sizeof msg);
  if (rc) FAIL("%s", msg);
  return LOOM_OK;
}

static loom_code vshape_parse_example(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                                      loom_tdesc *out, char *msg, size_t msglen) {
  /* static shapes (the tables were checked when the node was built), then
   * the VarLen value counts from the bytes */
  int64_t nnz[64] = {0};
  const int64_t *d = in[2]->data;
  int any_varlen = 0;
  for (int64_t s = 0; s < in[1]->numel && s < 64; s++) any_varlen |= d[s * LOOM_PE_W + LOOM_PE_KIND] == LOOM_PE_VARLEN;
  /* only VarLen sizes need the bytes (decoded here once more than by the
   * kernel); without VarLen entries the kernel alone decodes and checks */
  if (any_varlen) {
    loom_code rc = loom__parse_example_run(nin, in, NULL, nnz, NULL, msg, msglen);
    if (rc) return rc;
  }
  int64_t B = in[0]->numel;
  for (int64_t s = 0, o = 0; s < in[1]->numel && o < nout; s++) {
    const int64_t *r = d + s * LOOM_PE_W;
    loom_dtype dt = (loom_dtype)r[LOOM_PE_DTYPE];
    if (r[LOOM_PE_KIND] == LOOM_PE_VARLEN) {
      out[o] = (loom_tdesc){dt, 1, {nnz[s]}};
      out[o + 1] = (loom_tdesc){LOOM_I64, 1, {B + 1}};
      o += 2;
    } else {
      out[o].dtype = dt;
      out[o].ndim = (int32_t)r[LOOM_PE_NDIM] + 1;
      out[o].dims[0] = B;
      for (int j = 0; j < r[LOOM_PE_NDIM]; j++) out[o].dims[j + 1] = r[LOOM_PE_DIMS + j];
      o++;
    }
  }
  (void)a;
  return LOOM_OK;
}

static void def(loom_op_def *t, int op, int nin, int nout, loom_shape_fn shape, uint32_t flags) {
  t[op].nin = nin;
  t[op].nout = nout;
  t[op].shape = shape;
  t[op].flags = flags | LOOM_OPF_NODIFF;
}

void loom__register_feature(loom_op_def *t) {
  loom_kernel_fn *k;
  def(t, LOOM_OP_Bucketize, 2, 1, shape_bucketize, 0);
  k = t[LOOM_OP_Bucketize].kernels[LOOM_DEVICE_CPU];
  k[LOOM_F32] = loom__k_bucketize_f32;
  k[LOOM_F64] = loom__k_bucketize_f64;
  k[LOOM_I32] = loom__k_bucketize_i32;
  k[LOOM_I64] = loom__k_bucketize_i64;

  def(t, LOOM_OP_AsString, 1, 1, shape_as_string, 0);
  k = t[LOOM_OP_AsString].kernels[LOOM_DEVICE_CPU];
  k[LOOM_I32] = k[LOOM_I64] = loom__k_as_string_int;

  def(t, LOOM_OP_StringToHashBucketFast, 1, 1, shape_hash_bucket, 0);
  k = t[LOOM_OP_StringToHashBucketFast].kernels[LOOM_DEVICE_CPU];
  k[LOOM_STRING] = k[LOOM_I32] = k[LOOM_I64] = loom__k_hash_bucket_fast;

  def(t, LOOM_OP_VocabLookup, 3, 1, shape_vocab, 0);
  k = t[LOOM_OP_VocabLookup].kernels[LOOM_DEVICE_CPU];
  k[LOOM_STRING] = k[LOOM_I32] = k[LOOM_I64] = loom__k_vocab_lookup;

  def(t, LOOM_OP_CheckIds, 1, 1, shape_check_ids, 0);
  k = t[LOOM_OP_CheckIds].kernels[LOOM_DEVICE_CPU];
  k[LOOM_I32] = k[LOOM_I64] = loom__k_check_ids;

  def(t, LOOM_OP_SparseCrossHashed, -1, 2, shape_cross, LOOM_OPF_DATA_SHAPE);
  t[LOOM_OP_SparseCrossHashed].value_shape = vshape_cross;
  t[LOOM_OP_SparseCrossHashed].workspace = loom__ws_cross_hashed;
  k = t[LOOM_OP_SparseCrossHashed].kernels[LOOM_DEVICE_CPU];
  k[LOOM_STRING] = k[LOOM_I32] = k[LOOM_I64] = loom__k_cross_hashed;

  def(t, LOOM_OP_ParseExample, -1, -1, shape_parse_example, LOOM_OPF_DATA_SHAPE);
  t[LOOM_OP_ParseExample].value_shape = vshape_parse_example;
  t[LOOM_OP_ParseExample].kernels[LOOM_DEVICE_CPU][LOOM_STRING] = loom__k_parse_example;
}

/* ---------------------------------------------------------------------- */
/* builders                                                               */
/* ---------------------------------------------------------------------- */

static loom_attrs attrs0(void) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  return a;
}

/* "<name or op>/<what>" for a helper constant of a node. */
static void sub_name(char *buf, size_t cap, const char *name, const char *op, const char *what) {
  snprintf(buf, cap, "%s/%s", name ? name : op, what);
}

loom_output loom_bucketize(loom_graph *g, loom_output x, int nb, const float *boundaries, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  if (nb < 0 || (nb > 0 && !boundaries)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: %d boundaries%s", name ? name : "Bucketize", nb,
                         nb < 0 ? " (must be >= 0)" : " but no boundary array");
    return loom__graph_dummy(g);
  }
  for (int j = 1; j < nb; j++)
    if (!(boundaries[j - 1] <= boundaries[j])) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                           "%s: boundaries must be sorted ascending, but boundaries[%d] = %g follows %g",
                           name ? name : "Bucketize", j, (double)boundaries[j], (double)boundaries[j - 1]);
      return loom__graph_dummy(g);
    }
  char cn[512];
  sub_name(cn, sizeof cn, name, "Bucketize", "boundaries");
  int64_t d = nb;
  static const float none = 0.0f;
  loom_output b = loom_const_data(g, LOOM_F32, 1, &d, nb ? (const void *)boundaries : (const void *)&none, cn);
  loom_attrs a = attrs0();
  return loom__build2(g, LOOM_OP_Bucketize, name, x, b, &a);
}

loom_output loom_as_string(loom_graph *g, loom_output x, const char *name) {
  loom_attrs a = attrs0();
  return loom__build1(g, LOOM_OP_AsString, name, x, &a);
}

loom_output loom_string_to_hash_bucket_fast(loom_graph *g, loom_output x, int64_t num_buckets, const char *name) {
  loom_attrs a = attrs0();
  a.seed = (uint64_t)num_buckets;
  return loom__build1(g, LOOM_OP_StringToHashBucketFast, name, x, &a);
}

/* Builds the open-addressing index over keys [0, n) (see the comment at the
 * top); a duplicate key is a sticky INVALID_ARGUMENT naming it. */
static loom_output vocab_build(loom_graph *g, loom_output x, int64_t n, const char *const *skeys, const int64_t *ikeys,
                               int64_t num_oov_buckets, int64_t default_value, const char *name) {
  const char *nm = name ? name : "LoomVocabLookup";
  if (n < 0 || (n > 0 && !skeys && !ikeys) || n > ((int64_t)1 << 40)) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: invalid vocabulary of %lld keys", nm, (long long)n);
    return loom__graph_dummy(g);
  }
  if (num_oov_buckets < 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: num_oov_buckets must be >= 0, got %lld", nm,
                         (long long)num_oov_buckets);
    return loom__graph_dummy(g);
  }
  loom_status *st = loom_status_new();
  int64_t kd = n;
  loom_tensor *keys = loom_tensor_new(skeys ? LOOM_STRING : LOOM_I64, 1, &kd, st);
  loom_tensor *index = NULL;
  loom_output out = loom__graph_dummy(g);
  if (!keys) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory for a vocabulary of %lld keys", nm,
                         (long long)n);
    goto done;
  }
  if (skeys) {
    for (int64_t i = 0; i < n; i++) {
      if (!skeys[i]) {
        loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: vocabulary key %lld is NULL", nm, (long long)i);
        goto done;
      }
      if (loom_tensor_set_string(keys, i, skeys[i], strlen(skeys[i]), st)) {
        loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory copying the vocabulary", nm);
        goto done;
      }
    }
  } else if (n) {
    memcpy(loom_tensor_data(keys), ikeys, (size_t)n * sizeof(int64_t));
  }
  /* the layout: the smallest table (a power of two >= 2n) and seed that puts
   * every key in its first probe slot (a hit is then one probe), trying a
   * few seeds and up to 4x the table for small vocabularies; else the seed
   * with the fewest keys off their first slot */
  int64_t cap0 = 1;
  while (cap0 < 2 * n) cap0 *= 2;
  if (cap0 <= n) cap0 *= 2;
  uint64_t best_seed = 0;
  int64_t cap = cap0;
  if (n > 1 && n <= 65536) {
    int64_t maxcap = n <= 4096 ? cap0 * 4 : cap0;
    uint8_t *used = loom__malloc((size_t)maxcap);
    if (!used) {
      loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory for a vocabulary of %lld keys", nm,
                           (long long)n);
      goto done;
    }
    int64_t best = INT64_MAX;
    for (int64_t c = cap0; c <= maxcap && best; c *= 2)
      for (uint64_t sd = 0; sd < 16 && best; sd++) {
        memset(used, 0, (size_t)c);
        int64_t off = 0;
        for (int64_t i = 0; i < n; i++) {
          uint64_t h = skeys ? loom__vocab_hash_str(skeys[i], strlen(skeys[i]), sd) : loom__vocab_hash_int(ikeys[i], sd);
          uint64_t slot = loom__vocab_slot(h, c);
          if (used[slot]) off++;
          used[slot] = 1;
        }
        if (off < best) {
          best = off;
          best_seed = sd;
          cap = c;
        }
      }
    loom__free(used);
  }
  int64_t ilen = cap + 1;
  index = loom_tensor_new(LOOM_I64, 1, &ilen, st);
  if (!index) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory for a vocabulary of %lld keys", nm,
                         (long long)n);
    goto done;
  }
  int64_t *idx = loom_tensor_data(index);
  for (int64_t i = 0; i < cap; i++) idx[i] = -1;
  idx[cap] = (int64_t)best_seed;
  for (int64_t i = 0; i < n; i++) {
    size_t li = skeys ? strlen(skeys[i]) : 0;
    uint64_t h = skeys ? loom__vocab_hash_str(skeys[i], li, best_seed) : loom__vocab_hash_int(ikeys[i], best_seed);
    uint64_t slot = loom__vocab_slot(h, cap);
    for (;; slot = (slot + 1) & (uint64_t)(cap - 1)) {
      int64_t p = idx[slot];
      if (p < 0) {
        idx[slot] = i;
        break;
      }
      int same = skeys ? !strcmp(skeys[p], skeys[i]) : ikeys[p] == ikeys[i];
      if (same) {
        if (skeys)
          loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                               "%s: duplicate key \"%.200s\" in the vocabulary (positions %lld and %lld)", nm,
                               skeys[i], (long long)p, (long long)i);
        else
          loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                               "%s: duplicate key %lld in the vocabulary (positions %lld and %lld)", nm,
                               (long long)ikeys[i], (long long)p, (long long)i);
        goto done;
      }
    }
  }
  char cn[512];
  sub_name(cn, sizeof cn, name, "LoomVocabLookup", "keys");
  loom_output ko = loom_const(g, keys, cn);
  sub_name(cn, sizeof cn, name, "LoomVocabLookup", "index");
  loom_output io = loom_const(g, index, cn);
  loom_attrs a = attrs0();
  a.seed = (uint64_t)num_oov_buckets;
  a.seed2 = (uint64_t)default_value;
  loom_output in[3] = {x, ko, io};
  out = loom__buildn(g, LOOM_OP_VocabLookup, name, 3, in, &a);
done:
  loom_tensor_free(keys);
  loom_tensor_free(index);
  loom_status_free(st);
  return out;
}

loom_output loom_vocab_lookup_strings(loom_graph *g, loom_output x, int64_t n, const char *const *vocab,
                                      int64_t num_oov_buckets, int64_t default_value, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  static const char *const none[1] = {""};
  return vocab_build(g, x, n, vocab ? vocab : (n ? NULL : none), NULL, num_oov_buckets, default_value, name);
}

loom_output loom_vocab_lookup_int64(loom_graph *g, loom_output x, int64_t n, const int64_t *vocab,
                                    int64_t num_oov_buckets, int64_t default_value, const char *name) {
  if (!g) return (loom_output){NULL, 0};
  static const int64_t none[1] = {0};
  if (!vocab && n > 0) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: %lld vocabulary keys but no key array",
                         name ? name : "LoomVocabLookup", (long long)n);
    return loom__graph_dummy(g);
  }
  return vocab_build(g, x, n, NULL, vocab ? vocab : none, num_oov_buckets, default_value, name);
}

loom_output loom_check_ids(loom_graph *g, loom_output ids, int64_t num_buckets, int has_default, int64_t default_value,
                           const char *name) {
  loom_attrs a = attrs0();
  a.seed = (uint64_t)num_buckets;
  a.keepdims = has_default ? 1 : 0;
  a.seed2 = (uint64_t)default_value;
  return loom__build1(g, LOOM_OP_CheckIds, name, ids, &a);
}

loom_sparse loom_sparse_cross_hashed(loom_graph *g, int k, const loom_sparse *inputs, int64_t num_buckets,
                                     uint64_t hash_key, const char *name) {
  loom_sparse r = {{NULL, 0}, {NULL, 0}};
  if (!g) return r;
  const char *nm = name ? name : "LoomRaggedCrossHashed";
  if (k < 1 || k > MAX_CROSS || !inputs) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: needs 1 to %d ragged inputs, got %d", nm, MAX_CROSS, k);
    r.values = r.row_splits = loom__graph_dummy(g);
    return r;
  }
  loom_output in[2 * MAX_CROSS];
  for (int j = 0; j < k; j++) {
    in[2 * j] = inputs[j].values;
    in[2 * j + 1] = inputs[j].row_splits;
  }
  loom_attrs a = attrs0();
  a.seed = hash_key;
  a.seed2 = (uint64_t)num_buckets;
  loom_node *n = loom__graph_add(g, LOOM_OP_SparseCrossHashed, name, NULL, 2 * k, in, &a, 2);
  if (!n) {
    r.values = r.row_splits = loom__graph_dummy(g);
    return r;
  }
  r.values = (loom_output){n, 0};
  r.row_splits = (loom_output){n, 1};
  return r;
}

/* ---------------------------------------------------------------------- */
/* LoomParseExample                                                       */
/* ---------------------------------------------------------------------- */

static int pe_varlen(const loom_feature_spec *s) { return s->kind == LOOM_FEATURE_VAR_LEN || s->varlen; }

int loom_parse_example_num_outputs(int nspec, const loom_feature_spec *spec) {
  int n = 0;
  for (int i = 0; spec && i < nspec; i++) n += pe_varlen(&spec[i]) ? 2 : 1;
  return n;
}

int loom_parse_example(loom_graph *g, loom_output serialized, int nspec, const loom_feature_spec *spec, int cap,
                       loom_output *out, const char *name) {
  if (!g) return 0;
  const char *nm = name ? name : "ParseExample";
  int nout = loom_parse_example_num_outputs(nspec, spec);
  for (int i = 0; out && i < cap; i++) out[i] = loom__graph_dummy(g);
  if (nspec < 1 || nspec > 64 || !spec || !out || cap < nout) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: %s", nm,
                         nspec < 1 || nspec > 64 ? "between 1 and 64 features can be parsed by one node"
                         : !spec                 ? "spec is NULL"
                                                 : "out is NULL or holds fewer entries than the outputs");
    return 0;
  }
  enum { MAXDEF = 64 };
  loom_status *st = loom_status_new();
  int64_t kd = nspec, sd[2] = {nspec, LOOM_PE_W};
  loom_tensor *keys = loom_tensor_new(LOOM_STRING, 1, &kd, st), *tab = loom_tensor_new(LOOM_I64, 2, sd, st);
  loom_tensor *defs[MAXDEF] = {0};
  int ndef = 0, ok = 0;
  if (!keys || !tab) {
    loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", nm);
    goto done;
  }
  int64_t *t = loom_tensor_data(tab);
  memset(t, 0, (size_t)nspec * LOOM_PE_W * sizeof *t);
  for (int i = 0; i < nspec; i++) {
    const loom_feature_spec *s = &spec[i];
    int64_t *r = t + (size_t)i * LOOM_PE_W;
    if (!s->name || !s->name[0]) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: feature spec %d has no name", nm, i);
      goto done;
    }
    for (int j = 0; j < i; j++)
      if (!strcmp(spec[j].name, s->name)) {
        loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: feature '%s' appears twice (specs %d and %d)", nm, s->name,
                             j, i);
        goto done;
      }
    if (s->dtype != LOOM_F32 && s->dtype != LOOM_I64 && s->dtype != LOOM_STRING) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                           "%s: feature '%s': dtype %s; a tf.Example feature is float32, int64 or string", nm, s->name,
                           loom_dtype_name(s->dtype));
      goto done;
    }
    int varlen = pe_varlen(s);
    if ((s->kind != LOOM_FEATURE_FIXED_LEN && s->kind != LOOM_FEATURE_VAR_LEN) || s->allow_missing || s->index_key ||
        s->value_key) {
      loom_graph_set_error(g, LOOM_UNIMPLEMENTED,
                           "%s: feature '%s': only FixedLenFeature and VarLenFeature are parsed in a graph (kind %d)",
                           nm, s->name, (int)s->kind);
      goto done;
    }
    if (loom_tensor_set_string(keys, i, s->name, strlen(s->name), st)) {
      loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: out of memory", nm);
      goto done;
    }
    r[LOOM_PE_KIND] = varlen ? LOOM_PE_VARLEN : LOOM_PE_FIXED;
    r[LOOM_PE_DTYPE] = s->dtype;
    if (varlen) continue;
    if (s->ndim < 0 || s->ndim > LOOM_MAX_DIMS - 1) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: feature '%s': ndim %d outside [0, %d]", nm, s->name, s->ndim,
                           LOOM_MAX_DIMS - 1);
      goto done;
    }
    r[LOOM_PE_NDIM] = s->ndim;
    for (int d = 0; d < s->ndim; d++) {
      if (s->dims[d] < 0) {
        loom_graph_set_error(g, LOOM_INVALID_ARGUMENT,
                             "%s: feature '%s': dims[%d] is %lld; a FixedLenFeature needs a fully known shape", nm,
                             s->name, d, (long long)s->dims[d]);
        goto done;
      }
      r[LOOM_PE_DIMS + d] = s->dims[d];
    }
    if (!s->default_value) continue;
    if (ndef >= MAXDEF - 3) {
      loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: at most %d defaults", nm, MAXDEF - 3);
      goto done;
    }
    loom_tensor *dv = NULL;
    if (s->dtype == LOOM_STRING) {
      dv = loom_tensor_new(LOOM_STRING, s->ndim, s->dims, st);
      const char *const *sv = s->default_value;
      for (int64_t j = 0; dv && j < loom_tensor_numel(dv); j++)
        if (loom_tensor_set_string(dv, j, sv[j] ? sv[j] : "", sv[j] ? strlen(sv[j]) : 0, st)) {
          loom_tensor_free(dv);
          dv = NULL;
        }
    } else {
      dv = loom_tensor_from_data(s->dtype, s->ndim, s->dims, s->default_value, st);
    }
    if (!dv) {
      loom_graph_set_error(g, LOOM_RESOURCE_EXHAUSTED, "%s: feature '%s': out of memory for the default", nm, s->name);
      goto done;
    }
    r[LOOM_PE_HASDEF] = 1;
    defs[ndef++] = dv;
  }
  {
    char cn[512];
    loom_output in[3 + MAXDEF];
    in[0] = serialized;
    sub_name(cn, sizeof cn, name, "ParseExample", "keys");
    in[1] = loom_const(g, keys, cn);
    sub_name(cn, sizeof cn, name, "ParseExample", "spec");
    in[2] = loom_const(g, tab, cn);
    for (int i = 0, k = 0; i < nspec; i++) {
      if (!t[(size_t)i * LOOM_PE_W + LOOM_PE_HASDEF]) continue;
      snprintf(cn, sizeof cn, "%s/default_%s", nm, spec[i].name);
      in[3 + k] = loom_const(g, defs[k], cn);
      k++;
    }
    loom_attrs a = attrs0();
    loom_node *n = loom__graph_add(g, LOOM_OP_ParseExample, name, NULL, 3 + ndef, in, &a, nout);
    if (n) {
      for (int j = 0; j < nout; j++) out[j] = (loom_output){n, j};
      ok = 1;
    }
  }
done:
  for (int i = 0; i < ndef; i++) loom_tensor_free(defs[i]);
  loom_tensor_free(keys);
  loom_tensor_free(tab);
  loom_status_free(st);
  return ok ? nout : 0;
}

/* ---------------------------------------------------------------------- */
/* vocabulary files                                                       */
/* ---------------------------------------------------------------------- */

void loom_vocab_free(loom_vocab *v) {
  if (!v) return;
  if (v->keys)
    for (int64_t i = 0; i < v->n; i++) loom__free(v->keys[i]);
  loom__free(v->keys);
  loom__free(v->ikeys);
  memset(v, 0, sizeof *v);
}

/* TF's safe_strto64: optional surrounding spaces, optional sign, digits, no overflow. */
static int parse_i64(const char *s, size_t n, int64_t *out) {
  size_t i = 0;
  while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
  while (n > i && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  int neg = 0;
  if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  if (i == n) return 0;
  uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (lim - d) / 10) return 0;
    v = v * 10 + d;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 1;
}

loom_code loom_vocab_read_file(const char *path, int64_t vocab_size, int as_int64, loom_vocab *out, loom_status *st) {
  if (!out) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "vocab_read_file: out is NULL");
  memset(out, 0, sizeof *out);
  if (!path) return loom_status_set(st, LOOM_INVALID_ARGUMENT, "vocab_read_file: path is NULL");
  FILE *f = fopen(path, "rb");
  if (!f) {
    int e = errno;
    return loom_status_set(st, e == ENOENT ? LOOM_NOT_FOUND : LOOM_INVALID_ARGUMENT,
                           "cannot open vocabulary file %s: %s", path, strerror(e));
  }
  char *data = NULL;
  size_t len = 0, cap = 0;
  loom_code rc = LOOM_OK;
  for (;;) {
    if (len + 65536 > cap) {
      size_t nc = cap ? cap * 2 : 65536 * 2;
      char *nd = loom__realloc(data, nc);
      if (!nd) {
        rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory reading vocabulary file %s", path);
        break;
      }
      data = nd;
      cap = nc;
    }
    size_t k = fread(data + len, 1, cap - len, f);
    len += k;
    if (k == 0) {
      if (ferror(f)) rc = loom_status_set(st, LOOM_DATA_LOSS, "error reading vocabulary file %s", path);
      break;
    }
  }
  fclose(f);
  if (rc) {
    loom__free(data);
    return rc;
  }
  /* count the lines (the last may lack its "\n") */
  int64_t lines = 0;
  for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
  if (len && data[len - 1] != '\n') lines++;
  int64_t keep = vocab_size > 0 ? vocab_size : lines;
  if (vocab_size > 0 && lines < vocab_size) {
    loom__free(data);
    return loom_status_set(st, LOOM_INVALID_ARGUMENT,
                           "vocabulary file %s has %lld lines, fewer than vocab_size %lld", path, (long long)lines,
                           (long long)vocab_size);
  }
  if (as_int64) out->ikeys = loom__malloc((size_t)(keep ? keep : 1) * sizeof *out->ikeys);
  else out->keys = loom__calloc((size_t)(keep ? keep : 1), sizeof *out->keys);
  if (as_int64 ? !out->ikeys : !out->keys) {
    loom__free(data);
    return loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory reading vocabulary file %s", path);
  }
  size_t pos = 0;
  for (int64_t ln = 0; ln < keep; ln++) {
    size_t e = pos;
    while (e < len && data[e] != '\n') e++;
    size_t n = e - pos;
    if (n && data[pos + n - 1] == '\r') n--;
    if (n == 0) {
      rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "vocabulary file %s: line %lld is empty", path,
                           (long long)(ln + 1));
      break;
    }
    if (as_int64) {
      if (!parse_i64(data + pos, n, &out->ikeys[ln])) {
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "vocabulary file %s: line %lld (\"%.*s\") is not an int64",
                             path, (long long)(ln + 1), (int)(n > 64 ? 64 : n), data + pos);
        break;
      }
    } else {
      if (memchr(data + pos, 0, n)) {
        rc = loom_status_set(st, LOOM_INVALID_ARGUMENT, "vocabulary file %s: line %lld holds a NUL byte", path,
                             (long long)(ln + 1));
        break;
      }
      char *s = loom__malloc(n + 1);
      if (!s) {
        rc = loom_status_set(st, LOOM_RESOURCE_EXHAUSTED, "out of memory reading vocabulary file %s", path);
        break;
      }
      memcpy(s, data + pos, n);
      s[n] = 0;
      out->keys[ln] = s;
    }
    out->n = ln + 1;
    pos = e + 1;
  }
  loom__free(data);
  if (rc) {
    loom_vocab_free(out);
    return rc;
  }
  loom_status_clear(st);
  return LOOM_OK;
}
