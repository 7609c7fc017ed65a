/* Array ops: definitions, shape functions, builders.
 *
 * Attribute use per op (fields of loom_attrs):
 *   Reshape        nshape/shape (one -1 allowed)          ALIAS0
 *   ReshapeLike    (x, like)                              ALIAS0
 *   BroadcastTo    nshape/shape (target, all >= 0)
 *   BroadcastLike  (x, like)
 *   Transpose      naxes/axes = perm
 *   ConcatV2       axis (variadic inputs)
 *   Split          num, axis (num outputs)
 *   SplitV         nshape = count, size[] = sizes (one -1 allowed), axis
 *   Slice          shape[] = begin, size[] = size (-1 = to the end); nshape = rank
 *   Pack           axis (variadic inputs)
 *   Unpack         num, axis (num outputs)
 *   ExpandDims     axis                                   ALIAS0
 *   Squeeze        naxes/axes (0 = every size-1 dim)      ALIAS0
 *   Tile           nshape/shape = multiples (also strings)
 *   PadV2          shape[] = before, size[] = after, alpha = value; nshape = rank
 *   GatherV2       axis (also strings: params' loom_tstring handles are copied)
 *   TensorScatterAdd/Update   (tensor, indices [k] or [k,1], updates [k,...])
 *   UnsortedSegmentSum/Mean/SqrtN  num = num_segments
 *   OneHot         num = depth, alpha = on, beta = off, axis (-1 = last), dtype (0 = f32)
 *   Cast           dtype
 *   Fill           nshape/shape (all >= 0); input 0 = scalar value
 *   ZerosLike, OnesLike, StopGradient (ALIAS0, NODIFF)
 *   Shape          dtype (0 = i32; i32 or i64)
 *   Range          start, limit, delta, dtype (0 = f32)
 *   TopKV2         num = k; outputs (values, indices i32), sorted descending
 */
#include <math.h>
#include "ops/op_common.h"
#include "kernels/cpu/array.h"

#define DT_DATA (LOOM_DT_NUM | LOOM_DT(LOOM_BOOL))
#define DT_ADD (LOOM_DT_FLOAT | LOOM_DT_INT)
#define FAIL(...) return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, __VA_ARGS__)

/* ---------------------------------------------------------------------- */
/* shape helpers                                                          */
/* ---------------------------------------------------------------------- */

/* "[2,-1,3]" (a requested shape: -1 printed as is). */
static const char *req_str(int n, const int64_t *d) {
  static __thread char bufs[2][128];
  static __thread int k;
  char *b = bufs[k++ & 1];
  size_t m = 0;
  m += (size_t)snprintf(b + m, sizeof bufs[0] - m, "[");
  for (int i = 0; i < n && m < sizeof bufs[0]; i++)
    m += (size_t)snprintf(b + m, sizeof bufs[0] - m, "%s%lld", i ? "," : "", (long long)d[i]);
  if (m < sizeof bufs[0]) snprintf(b + m, sizeof bufs[0] - m, "]");
  return b;
}

/* Size limit. Every shape these functions produce has at most MAX_NUMEL
 * elements, counting the product of its known non-zero dims (so a zero dim
 * does not excuse a huge one, whatever the order): the limit loom_tensor_new
 * enforces (engine/tensor.c), under which element counts and byte sizes
 * computed from the dims, here and in the session's plan, cannot overflow.
 * Sums and products of dims and attributes are overflow-checked; a value
 * past the limit fails with INVALID_ARGUMENT naming the attribute. */
#define MAX_NUMEL LOOM_MAX_NUMEL
#define too_large_at loom__dims_too_large_at

/* Fails when output k is past the size limit; what/src name the attribute
 * the shape came from ("dims", "multiples", ...) and its n values (for the
 * offending entry's index and value; src NULL: name the shape only). */
static loom_code check_out_size(loom_shape_ctx *c, int k, const char *what, int n, const int64_t *src) {
  const loom_tdesc *o = &c->out[k];
  int i = too_large_at(o->ndim, o->dims);
  if (i < 0) return LOOM_OK;
  if (src && i < n)
    return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                            "%s[%d] = %lld is too large: the result %s would have more than %lld elements", what, i,
                            (long long)src[i], loom__tdesc_str(o), (long long)MAX_NUMEL);
  return loom__shape_fail(c, LOOM_INVALID_ARGUMENT, "%s: the result %s would have more than %lld elements", what,
                          loom__tdesc_str(o), (long long)MAX_NUMEL);
}

/* Like check_out_size for a shape grown by one scalar attribute what = v. */
static loom_code check_out_scalar(loom_shape_ctx *c, int k, const char *what, int64_t v) {
  const loom_tdesc *o = &c->out[k];
  if (too_large_at(o->ndim, o->dims) < 0) return LOOM_OK;
  return loom__shape_fail(c, LOOM_INVALID_ARGUMENT,
                          "%s = %lld is too large: the result %s would have more than %lld elements", what,
                          (long long)v, loom__tdesc_str(o), (long long)MAX_NUMEL);
}

/* numel of a desc: -1 when a dim is unknown, -2 when past the size limit */
static int64_t known_numel(const loom_tdesc *d) {
  int zero = 0;
  for (int i = 0; i < d->ndim; i++) {
    if (d->dims[i] < 0) return -1;
    if (d->dims[i] == 0) zero = 1;
  }
  if (too_large_at(d->ndim, d->dims) >= 0) return -2;
  int64_t n = 1;
  for (int i = 0; i < d->ndim; i++) n *= d->dims[i];
  return zero ? 0 : n;
}

/* merges two dims (-1 unknown); 0 when both are known and differ */
static int dim_merge(int64_t a, int64_t b, int64_t *out) {
  if (a >= 0 && b >= 0 && a != b) return 0;
  *out = a >= 0 ? a : b;
  return 1;
}

static loom_code check_data(loom_shape_ctx *c, int i) { return loom__shape_check_dtype(c, i, DT_DATA); }
/* Gather and Tile also move strings (their loom_tstring handles). */
static loom_code check_data_or_string(loom_shape_ctx *c, int i) {
  return loom__shape_check_dtype(c, i, DT_DATA | LOOM_DT(LOOM_STRING));
}

static int dtype_is_data(loom_dtype dt) { return dt > 0 && dt < LOOM_DTYPE_COUNT && (DT_DATA & LOOM_DT(dt)); }

/* ---------------------------------------------------------------------- */
/* shape functions                                                        */
/* ---------------------------------------------------------------------- */

static loom_code shape_reshape(loom_shape_ctx *c) {
  const loom_attrs *a = c->attrs;
  const loom_tdesc *x = &c->in[0];
  int n = a->nshape;
  if (n < 0 || n > LOOM_MAX_DIMS) FAIL("requested rank %d is outside [0,%d]", n, LOOM_MAX_DIMS);
  int neg = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (a->shape[i] == -1) {
      if (neg >= 0) FAIL("only one dimension of the requested shape %s may be -1", req_str(n, a->shape));
      neg = i;
    } else if (a->shape[i] < -1) {
      FAIL("dimension %d of the requested shape %s is negative", i, req_str(n, a->shape));
    }
  }
  int big = too_large_at(n, a->shape);
  if (big >= 0)
    FAIL("shape[%d] = %lld is too large: the requested shape %s would have more than %lld elements", big,
         (long long)a->shape[big], req_str(n, a->shape), (long long)MAX_NUMEL);
  for (int i = 0; i < n; i++)
    if (i != neg) known *= a->shape[i]; /* within MAX_NUMEL: checked above */
  loom_tdesc *o = &c->out[0];
  o->dtype = x->dtype;
  o->ndim = n;
  for (int i = 0; i < n; i++) o->dims[i] = a->shape[i];
  int64_t N = known_numel(x);
  if (N == -2) FAIL("input %s has more than %lld elements", loom__tdesc_str(x), (long long)MAX_NUMEL);
  if (N < 0) return LOOM_OK;
  if (neg >= 0) {
    if (known == 0 || N % known)
      FAIL("cannot reshape %s (%lld elements) to %s: the -1 dimension cannot be inferred", loom__tdesc_str(x),
           (long long)N, req_str(n, a->shape));
    o->dims[neg] = N / known;
  } else if (N != known) {
    FAIL("cannot reshape %s (%lld elements) to %s (%lld elements)", loom__tdesc_str(x), (long long)N,
         req_str(n, a->shape), (long long)known);
  }
  return LOOM_OK;
}

static loom_code shape_reshape_like(loom_shape_ctx *c) {
  const loom_tdesc *x = &c->in[0], *like = &c->in[1];
  int64_t nx = known_numel(x), nl = known_numel(like);
  if (nx == -2 || nl == -2)
    FAIL("input %d %s has more than %lld elements", nx == -2 ? 0 : 1, loom__tdesc_str(nx == -2 ? x : like),
         (long long)MAX_NUMEL);
  if (nx >= 0 && nl >= 0 && nx != nl)
    FAIL("cannot reshape %s (%lld elements) to the shape %s of input 1 (%lld elements)", loom__tdesc_str(x),
         (long long)nx, loom__tdesc_str(like), (long long)nl);
  c->out[0] = *like;
  c->out[0].dtype = x->dtype;
  return LOOM_OK;
}

/* out[0] = x broadcast (NumPy rules) to exactly the n dims t (-1 unknown). */
static loom_code bcast_to(loom_shape_ctx *c, int n, const int64_t *t) {
  const loom_tdesc *x = &c->in[0];
  if (x->ndim > n)
    FAIL("cannot broadcast %s to %s: rank %d is larger than %d", loom__tdesc_str(x), req_str(n, t), x->ndim, n);
  loom_tdesc *o = &c->out[0];
  o->dtype = x->dtype;
  o->ndim = n;
  for (int i = 0; i < n; i++) o->dims[i] = t[i];
  for (int i = 0; i < x->ndim; i++) {
    int j = i + n - x->ndim;
    int64_t xd = x->dims[i], td = t[j];
    if (xd == 1 || xd < 0) continue;
    if (td < 0) o->dims[j] = xd;
    else if (xd != td)
      FAIL("cannot broadcast %s to %s: dimension %d is %lld, not 1 or %lld", loom__tdesc_str(x), loom__tdesc_str(o),
           i, (long long)xd, (long long)td);
  }
  return LOOM_OK;
}

static loom_code shape_broadcast_to(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  const loom_attrs *a = c->attrs;
  if (a->nshape < 0 || a->nshape > LOOM_MAX_DIMS) FAIL("target rank %d is outside [0,%d]", a->nshape, LOOM_MAX_DIMS);
  for (int i = 0; i < a->nshape; i++)
    if (a->shape[i] < 0) FAIL("target shape %s has a negative dimension", req_str(a->nshape, a->shape));
  rc = bcast_to(c, a->nshape, a->shape);
  return rc ? rc : check_out_size(c, 0, "shape", a->nshape, a->shape);
}

static loom_code shape_broadcast_like(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  return bcast_to(c, c->in[1].ndim, c->in[1].dims);
}

static loom_code shape_transpose(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  const loom_attrs *a = c->attrs;
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  if (a->naxes != r) FAIL("perm %s has %d entries but the input %s has rank %d", req_str(a->naxes < 0 ? 0 : a->naxes > LOOM_MAX_DIMS ? LOOM_MAX_DIMS : a->naxes, a->axes), a->naxes, loom__tdesc_str(x), r);
  int seen[LOOM_MAX_DIMS] = {0};
  for (int j = 0; j < r; j++) {
    int64_t p = a->axes[j];
    if (p < 0 || p >= r || seen[p]) FAIL("perm %s is not a permutation of [0,%d)", req_str(r, a->axes), r);
    seen[p] = 1;
  }
  loom_tdesc *o = &c->out[0];
  o->dtype = x->dtype;
  o->ndim = r;
  for (int j = 0; j < r; j++) o->dims[j] = x->dims[a->axes[j]];
  return LOOM_OK;
}

static loom_code shape_concat(loom_shape_ctx *c) {
  if (c->nin < 1) FAIL("needs at least one input");
  const loom_tdesc *x0 = &c->in[0];
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  int r = x0->ndim;
  if (r == 0) FAIL("cannot concatenate scalars (input 0 has shape [])");
  int64_t axis = c->attrs->axis < 0 ? c->attrs->axis + r : c->attrs->axis;
  if (axis < 0 || axis >= r) FAIL("axis %lld is out of range for rank %d", (long long)c->attrs->axis, r);
  loom_tdesc *o = &c->out[0];
  *o = *x0;
  for (int i = 1; i < c->nin; i++) {
    const loom_tdesc *x = &c->in[i];
    if (x->dtype != x0->dtype)
      FAIL("input %d has dtype %s but input 0 has %s", i, loom_dtype_name(x->dtype), loom_dtype_name(x0->dtype));
    if (x->ndim != r)
      FAIL("input %d has shape %s but input 0 has %s (ranks differ)", i, loom__tdesc_str(x), loom__tdesc_str(x0));
    for (int d = 0; d < r; d++) {
      if (d == axis) {
        if (o->dims[d] >= 0 && x->dims[d] >= 0 &&
            (__builtin_add_overflow(o->dims[d], x->dims[d], &o->dims[d]) || o->dims[d] > MAX_NUMEL))
          FAIL("input %d %s: the concatenated dimension %lld would be larger than %lld", i, loom__tdesc_str(x),
               (long long)axis, (long long)MAX_NUMEL);
        if (x->dims[d] < 0) o->dims[d] = -1;
      } else if (!dim_merge(o->dims[d], x->dims[d], &o->dims[d])) {
        FAIL("input %d has shape %s but input 0 has %s: dimension %d differs (concat axis %lld)", i,
             loom__tdesc_str(x), loom__tdesc_str(x0), d, (long long)axis);
      }
    }
  }
  return check_out_size(c, 0, "the concatenated inputs", 0, NULL);
}

static loom_code shape_split(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  if (r == 0) FAIL("cannot split a scalar");
  int64_t axis = loom__norm_axis(c->attrs->axis, r);
  if (axis < 0) FAIL("axis %lld is out of range for rank %d", (long long)c->attrs->axis, r);
  int64_t num = c->attrs->num;
  if (num < 1) FAIL("num_split must be >= 1, got %lld", (long long)num);
  if (num != c->nout) FAIL("num_split %lld but the node has %d outputs", (long long)num, c->nout);
  int64_t d = x->dims[axis];
  if (d >= 0 && d % num)
    FAIL("dimension %lld of %s (%lld) is not divisible by num_split %lld", (long long)axis, loom__tdesc_str(x),
         (long long)d, (long long)num);
  for (int i = 0; i < c->nout; i++) {
    c->out[i] = *x;
    c->out[i].dims[axis] = d < 0 ? -1 : d / num;
  }
  return LOOM_OK;
}

static loom_code shape_split_v(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  const loom_attrs *a = c->attrs;
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  if (r == 0) FAIL("cannot split a scalar");
  int64_t axis = loom__norm_axis(a->axis, r);
  if (axis < 0) FAIL("axis %lld is out of range for rank %d", (long long)a->axis, r);
  int n = a->nshape;
  if (n < 1 || n > LOOM_MAX_DIMS) FAIL("the number of sizes %d is outside [1,%d]", n, LOOM_MAX_DIMS);
  if (n != c->nout) FAIL("%d sizes but the node has %d outputs", n, c->nout);
  int neg = -1;
  int64_t sum = 0;
  for (int i = 0; i < n; i++) {
    if (a->size[i] == -1) {
      if (neg >= 0) FAIL("only one of the sizes %s may be -1", req_str(n, a->size));
      neg = i;
    } else if (a->size[i] < -1) {
      FAIL("sizes %s contain a negative size", req_str(n, a->size));
    } else if (__builtin_add_overflow(sum, a->size[i], &sum) || sum > MAX_NUMEL) {
      FAIL("sizes[%d] = %lld is too large: the sizes %s add up to more than %lld", i, (long long)a->size[i],
           req_str(n, a->size), (long long)MAX_NUMEL);
    }
  }
  int64_t d = x->dims[axis];
  int64_t inferred = -1;
  if (d >= 0) {
    if (neg >= 0 ? sum > d : sum != d)
      FAIL("sizes %s do not add up to dimension %lld of %s (%lld)", req_str(n, a->size), (long long)axis,
           loom__tdesc_str(x), (long long)d);
    inferred = d - sum;
  }
  for (int i = 0; i < n; i++) {
    c->out[i] = *x;
    c->out[i].dims[axis] = i == neg ? inferred : a->size[i];
    if (i != neg && too_large_at(c->out[i].ndim, c->out[i].dims) >= 0)
      FAIL("sizes[%d] = %lld is too large: piece %d %s would have more than %lld elements", i, (long long)a->size[i],
           i, loom__tdesc_str(&c->out[i]), (long long)MAX_NUMEL);
  }
  return LOOM_OK;
}

static loom_code shape_slice(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  const loom_attrs *a = c->attrs;
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  if (a->nshape != r) FAIL("begin has %d entries but the input %s has rank %d", a->nshape, loom__tdesc_str(x), r);
  loom_tdesc *o = &c->out[0];
  *o = *x;
  for (int i = 0; i < r; i++) {
    int64_t b = a->shape[i], s = a->size[i], d = x->dims[i];
    if (b < 0 || s < -1)
      FAIL("begin %s / size %s: negative entry at dimension %d", req_str(r, a->shape), req_str(r, a->size), i);
    int64_t end;
    if (b > MAX_NUMEL) FAIL("begin[%d] = %lld is too large (more than %lld)", i, (long long)b, (long long)MAX_NUMEL);
    if (s >= 0 && (__builtin_add_overflow(b, s, &end) || end > MAX_NUMEL))
      FAIL("size[%d] = %lld is too large: begin[%d] + size[%d] = %lld + %lld is more than %lld", i, (long long)s, i, i,
           (long long)b, (long long)s, (long long)MAX_NUMEL);
    if (d >= 0 && (b > d || (s >= 0 && b + s > d)))
      FAIL("begin %s + size %s is out of bounds of %s at dimension %d", req_str(r, a->shape), req_str(r, a->size),
           loom__tdesc_str(x), i);
    o->dims[i] = s >= 0 ? s : (d >= 0 ? d - b : -1);
  }
  return check_out_size(c, 0, "size", r, a->size);
}

static loom_code shape_pack(loom_shape_ctx *c) {
  if (c->nin < 1) FAIL("needs at least one input");
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  const loom_tdesc *x0 = &c->in[0];
  int r = x0->ndim;
  if (r + 1 > LOOM_MAX_DIMS) FAIL("stacking rank-%d inputs exceeds the maximum rank %d", r, LOOM_MAX_DIMS);
  int64_t axis = c->attrs->axis < 0 ? c->attrs->axis + r + 1 : c->attrs->axis;
  if (axis < 0 || axis > r) FAIL("axis %lld is out of range [%d,%d]", (long long)c->attrs->axis, -(r + 1), r);
  loom_tdesc m = *x0;
  for (int i = 1; i < c->nin; i++) {
    const loom_tdesc *x = &c->in[i];
    if (x->dtype != x0->dtype)
      FAIL("input %d has dtype %s but input 0 has %s", i, loom_dtype_name(x->dtype), loom_dtype_name(x0->dtype));
    int ok = x->ndim == r;
    for (int d = 0; ok && d < r; d++) ok = dim_merge(m.dims[d], x->dims[d], &m.dims[d]);
    if (!ok) FAIL("input %d has shape %s but input 0 has %s", i, loom__tdesc_str(x), loom__tdesc_str(x0));
  }
  loom_tdesc *o = &c->out[0];
  o->dtype = x0->dtype;
  o->ndim = r + 1;
  for (int d = 0, k = 0; d <= r; d++) o->dims[d] = d == axis ? c->nin : m.dims[k++];
  return LOOM_OK;
}

static loom_code shape_unpack(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  if (r == 0) FAIL("cannot unstack a scalar");
  int64_t axis = loom__norm_axis(c->attrs->axis, r);
  if (axis < 0) FAIL("axis %lld is out of range for rank %d", (long long)c->attrs->axis, r);
  int64_t num = c->attrs->num;
  if (num != c->nout) FAIL("num %lld but the node has %d outputs", (long long)num, c->nout);
  if (x->dims[axis] >= 0 && x->dims[axis] != num)
    FAIL("cannot unstack dimension %lld of %s into %lld outputs", (long long)axis, loom__tdesc_str(x),
         (long long)num);
  for (int i = 0; i < c->nout; i++) {
    loom_tdesc *o = &c->out[i];
    o->dtype = x->dtype;
    o->ndim = r - 1;
    for (int d = 0, k = 0; d < r; d++)
      if (d != axis) o->dims[k++] = x->dims[d];
  }
  return LOOM_OK;
}

static loom_code shape_expand_dims(loom_shape_ctx *c) {
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  if (r + 1 > LOOM_MAX_DIMS) FAIL("expanding %s exceeds the maximum rank %d", loom__tdesc_str(x), LOOM_MAX_DIMS);
  int64_t axis = c->attrs->axis < 0 ? c->attrs->axis + r + 1 : c->attrs->axis;
  if (axis < 0 || axis > r) FAIL("axis %lld is out of range [%d,%d]", (long long)c->attrs->axis, -(r + 1), r);
  loom_tdesc *o = &c->out[0];
  o->dtype = x->dtype;
  o->ndim = r + 1;
  for (int d = 0, k = 0; d <= r; d++) o->dims[d] = d == axis ? 1 : x->dims[k++];
  return LOOM_OK;
}

static loom_code shape_squeeze(loom_shape_ctx *c) {
  const loom_attrs *a = c->attrs;
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  int drop[LOOM_MAX_DIMS] = {0};
  if (a->naxes < 0 || a->naxes > r) FAIL("%d axes given for the rank-%d input %s", a->naxes, r, loom__tdesc_str(x));
  if (a->naxes == 0) {
    for (int d = 0; d < r; d++) {
      if (x->dims[d] < 0)
        FAIL("cannot squeeze every size-1 dimension of %s: dimension %d is unknown (pass explicit axes)",
             loom__tdesc_str(x), d);
      drop[d] = x->dims[d] == 1;
    }
  } else {
    for (int i = 0; i < a->naxes; i++) {
      int64_t ax = a->axes[i] < 0 ? a->axes[i] + r : a->axes[i];
      if (ax < 0 || ax >= r) FAIL("axis %lld is out of range for rank %d", (long long)a->axes[i], r);
      if (drop[ax]) FAIL("axis %lld is given twice", (long long)a->axes[i]);
      if (x->dims[ax] >= 0 && x->dims[ax] != 1)
        FAIL("cannot squeeze dimension %lld of %s: its size is %lld, not 1", (long long)ax, loom__tdesc_str(x),
             (long long)x->dims[ax]);
      drop[ax] = 1;
    }
  }
  loom_tdesc *o = &c->out[0];
  o->dtype = x->dtype;
  o->ndim = 0;
  for (int d = 0; d < r; d++)
    if (!drop[d]) o->dims[o->ndim++] = x->dims[d];
  return LOOM_OK;
}

static loom_code shape_tile(loom_shape_ctx *c) {
  loom_code rc = check_data_or_string(c, 0);
  if (rc) return rc;
  const loom_attrs *a = c->attrs;
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  if (a->nshape != r) FAIL("multiples has %d entries but the input %s has rank %d", a->nshape, loom__tdesc_str(x), r);
  loom_tdesc *o = &c->out[0];
  *o = *x;
  for (int i = 0; i < r; i++) {
    int64_t m = a->shape[i];
    if (m < 0) FAIL("multiples %s has a negative entry", req_str(r, a->shape));
    if (m == 0) o->dims[i] = 0;
    else if (x->dims[i] < 0) o->dims[i] = -1;
    else if (__builtin_mul_overflow(x->dims[i], m, &o->dims[i]) || o->dims[i] > MAX_NUMEL)
      FAIL("multiples[%d] = %lld is too large: dimension %d of %s would grow past %lld", i, (long long)m, i,
           loom__tdesc_str(x), (long long)MAX_NUMEL);
  }
  return check_out_size(c, 0, "multiples", r, a->shape);
}

static loom_code shape_pad(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  const loom_attrs *a = c->attrs;
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  if (a->nshape != r) FAIL("paddings have %d entries but the input %s has rank %d", a->nshape, loom__tdesc_str(x), r);
  loom_tdesc *o = &c->out[0];
  *o = *x;
  for (int i = 0; i < r; i++) {
    if (a->shape[i] < 0 || a->size[i] < 0)
      FAIL("paddings before %s / after %s must be >= 0", req_str(r, a->shape), req_str(r, a->size));
    int64_t pad;
    if (__builtin_add_overflow(a->shape[i], a->size[i], &pad) || pad > MAX_NUMEL ||
        (x->dims[i] >= 0 && (__builtin_add_overflow(x->dims[i], pad, &pad) || pad > MAX_NUMEL)))
      FAIL("before[%d] = %lld and after[%d] = %lld are too large: dimension %d of %s would grow past %lld", i,
           (long long)a->shape[i], i, (long long)a->size[i], i, loom__tdesc_str(x), (long long)MAX_NUMEL);
    o->dims[i] = x->dims[i] < 0 ? -1 : pad;
  }
  return check_out_size(c, 0, "paddings", 0, NULL);
}

static loom_code shape_gather(loom_shape_ctx *c) {
  loom_code rc = check_data_or_string(c, 0);
  if (rc) return rc;
  const loom_tdesc *p = &c->in[0], *ix = &c->in[1];
  if (!(LOOM_DT_INT & LOOM_DT(ix->dtype)))
    FAIL("indices must be int32 or int64, got %s", loom_dtype_name(ix->dtype));
  int r = p->ndim;
  if (r == 0) FAIL("params must have rank >= 1, got a scalar");
  int64_t axis = loom__norm_axis(c->attrs->axis, r);
  if (axis < 0) FAIL("axis %lld is out of range for params %s", (long long)c->attrs->axis, loom__tdesc_str(p));
  int nr = r - 1 + ix->ndim;
  if (nr > LOOM_MAX_DIMS)
    FAIL("result rank %d (params %s, indices %s) exceeds %d", nr, loom__tdesc_str(p), loom__tdesc_str(ix),
         LOOM_MAX_DIMS);
  loom_tdesc *o = &c->out[0];
  o->dtype = p->dtype;
  o->ndim = nr;
  int k = 0;
  for (int d = 0; d < axis; d++) o->dims[k++] = p->dims[d];
  for (int d = 0; d < ix->ndim; d++) o->dims[k++] = ix->dims[d];
  for (int d = (int)axis + 1; d < r; d++) o->dims[k++] = p->dims[d];
  return LOOM_OK;
}

static loom_code shape_scatter(loom_shape_ctx *c, uint32_t dtypes) {
  loom_code rc = loom__shape_check_dtype(c, 0, dtypes);
  if (rc) return rc;
  const loom_tdesc *t = &c->in[0], *ix = &c->in[1], *u = &c->in[2];
  if (!(LOOM_DT_INT & LOOM_DT(ix->dtype)))
    FAIL("indices must be int32 or int64, got %s", loom_dtype_name(ix->dtype));
  if (t->ndim == 0) FAIL("tensor must have rank >= 1, got a scalar");
  if (!(ix->ndim == 1 || (ix->ndim == 2 && ix->dims[1] == 1)))
    FAIL("indices must have shape [k] or [k,1], got %s", loom__tdesc_str(ix));
  if (u->dtype != t->dtype)
    FAIL("updates have dtype %s but tensor has %s", loom_dtype_name(u->dtype), loom_dtype_name(t->dtype));
  int ok = u->ndim == t->ndim;
  int64_t tmp;
  if (ok) ok = dim_merge(u->dims[0], ix->dims[0], &tmp);
  for (int d = 1; ok && d < t->ndim; d++) ok = dim_merge(u->dims[d], t->dims[d], &tmp);
  if (!ok)
    FAIL("updates %s do not match indices %s and tensor %s (want [k] + tensor.shape[1:])", loom__tdesc_str(u),
         loom__tdesc_str(ix), loom__tdesc_str(t));
  c->out[0] = *t;
  return LOOM_OK;
}
static loom_code shape_scatter_add(loom_shape_ctx *c) { return shape_scatter(c, DT_ADD); }
static loom_code shape_scatter_update(loom_shape_ctx *c) { return shape_scatter(c, DT_DATA); }

static loom_code shape_segment(loom_shape_ctx *c, uint32_t dtypes) {
  loom_code rc = loom__shape_check_dtype(c, 0, dtypes);
  if (rc) return rc;
  const loom_tdesc *d = &c->in[0], *ix = &c->in[1];
  if (!(LOOM_DT_INT & LOOM_DT(ix->dtype)))
    FAIL("segment_ids must be int32 or int64, got %s", loom_dtype_name(ix->dtype));
  if (d->ndim == 0) FAIL("data must have rank >= 1, got a scalar");
  int64_t tmp;
  if (ix->ndim != 1 || !dim_merge(ix->dims[0], d->dims[0], &tmp))
    FAIL("segment_ids %s must be a vector as long as the first dimension of data %s", loom__tdesc_str(ix),
         loom__tdesc_str(d));
  if (c->attrs->num < 0) FAIL("num_segments must be >= 0, got %lld", (long long)c->attrs->num);
  c->out[0] = *d;
  c->out[0].dims[0] = c->attrs->num;
  return check_out_scalar(c, 0, "num_segments", c->attrs->num);
}
static loom_code shape_segment_sum(loom_shape_ctx *c) { return shape_segment(c, DT_ADD); }
static loom_code shape_segment_mean(loom_shape_ctx *c) { return shape_segment(c, LOOM_DT_FLOAT); }

static size_t ws_segment(const loom_attrs *a, int nin, const loom_buf *const *in, int nout,
                         const loom_buf *const *out) {
  (void)nin;
  (void)in;
  (void)nout;
  (void)out;
  return (size_t)(a->num > 0 ? a->num : 0) * sizeof(int64_t);
}

static loom_code shape_one_hot(loom_shape_ctx *c) {
  const loom_attrs *a = c->attrs;
  const loom_tdesc *ix = &c->in[0];
  if (!((LOOM_DT_INT | LOOM_DT(LOOM_U8)) & LOOM_DT(ix->dtype)))
    FAIL("indices must be int32, int64 or uint8, got %s", loom_dtype_name(ix->dtype));
  int r = ix->ndim;
  if (r + 1 > LOOM_MAX_DIMS) FAIL("indices %s: the result would exceed rank %d", loom__tdesc_str(ix), LOOM_MAX_DIMS);
  if (a->num < 0) FAIL("depth must be >= 0, got %lld", (long long)a->num);
  if (a->axis < -1 || a->axis > r) FAIL("axis %lld must be -1 or in [0,%d]", (long long)a->axis, r);
  loom_dtype dt = a->dtype ? a->dtype : LOOM_F32;
  if (!dtype_is_data(dt)) FAIL("unsupported output dtype %s", loom_dtype_name(dt));
  int axis = a->axis < 0 ? r : (int)a->axis;
  loom_tdesc *o = &c->out[0];
  o->dtype = dt;
  o->ndim = r + 1;
  for (int d = 0, k = 0; d <= r; d++) o->dims[d] = d == axis ? a->num : ix->dims[k++];
  return check_out_scalar(c, 0, "depth", a->num);
}

static loom_code shape_cast(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  if (!dtype_is_data(c->attrs->dtype)) FAIL("unsupported target dtype %s", loom_dtype_name(c->attrs->dtype));
  c->out[0] = c->in[0];
  c->out[0].dtype = c->attrs->dtype;
  return LOOM_OK;
}

static loom_code shape_fill(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  const loom_attrs *a = c->attrs;
  if (c->in[0].ndim != 0) FAIL("value must be a scalar, got %s", loom__tdesc_str(&c->in[0]));
  if (a->nshape < 0 || a->nshape > LOOM_MAX_DIMS) FAIL("rank %d is outside [0,%d]", a->nshape, LOOM_MAX_DIMS);
  for (int i = 0; i < a->nshape; i++)
    if (a->shape[i] < 0) FAIL("dims %s must all be known and >= 0", req_str(a->nshape, a->shape));
  loom_tdesc *o = &c->out[0];
  o->dtype = c->in[0].dtype;
  o->ndim = a->nshape;
  for (int i = 0; i < a->nshape; i++) o->dims[i] = a->shape[i];
  return check_out_size(c, 0, "dims", a->nshape, a->shape);
}

static loom_code shape_same_data(loom_shape_ctx *c) {
  loom_code rc = check_data(c, 0);
  if (rc) return rc;
  c->out[0] = c->in[0];
  return LOOM_OK;
}

static loom_code shape_shape(loom_shape_ctx *c) {
  loom_dtype dt = c->attrs->dtype ? c->attrs->dtype : LOOM_I32;
  if (dt != LOOM_I32 && dt != LOOM_I64) FAIL("output dtype must be int32 or int64, got %s", loom_dtype_name(dt));
  loom_tdesc *o = &c->out[0];
  o->dtype = dt;
  o->ndim = 1;
  o->dims[0] = c->in[0].ndim;
  return LOOM_OK;
}

static loom_code shape_range(loom_shape_ctx *c) {
  const loom_attrs *a = c->attrs;
  loom_dtype dt = a->dtype ? a->dtype : LOOM_F32;
  if (!(DT_ADD & LOOM_DT(dt))) FAIL("unsupported dtype %s", loom_dtype_name(dt));
  double s = a->start, l = a->limit, d = a->delta;
  if (!isfinite(s) || !isfinite(l) || !isfinite(d)) FAIL("start %g, limit %g, delta %g must be finite", s, l, d);
  if (d == 0) FAIL("delta must not be 0");
  if (d > 0 && s > l) FAIL("requires start <= limit when delta > 0: %g/%g", s, l);
  if (d < 0 && s < l) FAIL("requires start >= limit when delta < 0: %g/%g", s, l);
  int64_t n;
  if (dt == LOOM_I32 || dt == LOOM_I64) {
    double lim = dt == LOOM_I32 ? 2147483647.0 : 9.2e18;
    if (s != floor(s) || l != floor(l) || d != floor(d) || fabs(s) > lim || fabs(l) > lim || fabs(d) > lim)
      FAIL("start %g, limit %g, delta %g must be integers in range for %s", s, l, d, loom_dtype_name(dt));
    /* |limit - start| must fit in int64 (then so does every i * delta the
     * kernel computes, as (n - 1) * |delta| < |limit - start|) */
    int64_t is = (int64_t)s, il = (int64_t)l, id = (int64_t)d, span;
    if (__builtin_sub_overflow(il > is ? il : is, il > is ? is : il, &span))
      FAIL("start %g and limit %g are too far apart: limit - start overflows int64", s, l);
    int64_t ad = id > 0 ? id : -id;
    n = span / ad + (span % ad != 0);
    if (n > MAX_NUMEL)
      FAIL("start %g, limit %g, delta %g give %lld elements, more than %lld", s, l, d, (long long)n,
           (long long)MAX_NUMEL);
  } else {
    double m = ceil(fabs((l - s) / d));
    if (m > 9.0e15) FAIL("range of %g elements is too large", m);
    n = (int64_t)m;
  }
  loom_tdesc *o = &c->out[0];
  o->dtype = dt;
  o->ndim = 1;
  o->dims[0] = n;
  return LOOM_OK;
}

static loom_code shape_top_k(loom_shape_ctx *c) {
  loom_code rc = loom__shape_check_dtype(c, 0, LOOM_DT_NUM);
  if (rc) return rc;
  const loom_tdesc *x = &c->in[0];
  int r = x->ndim;
  int64_t k = c->attrs->num;
  if (c->nout != 2) FAIL("TopK has 2 outputs, the node has %d", c->nout);
  if (r == 0) FAIL("input must have rank >= 1, got a scalar");
  if (k < 0) FAIL("k must be >= 0, got %lld", (long long)k);
  int64_t last = x->dims[r - 1];
  if (last >= 0 && k > last)
    FAIL("k (%lld) is larger than the last dimension %lld of %s", (long long)k, (long long)last, loom__tdesc_str(x));
  if (last > INT32_MAX) FAIL("the last dimension of %s is too large for int32 indices", loom__tdesc_str(x));
  c->out[0] = *x;
  c->out[0].dims[r - 1] = k;
  c->out[1] = c->out[0];
  c->out[1].dtype = LOOM_I32;
  return check_out_scalar(c, 0, "k", k);
}

/* ---------------------------------------------------------------------- */
/* registration                                                           */
/* ---------------------------------------------------------------------- */

static void set_data_kernels(loom_op_def *d, loom_kernel_fn fn) {
  static const loom_dtype dts[] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64, LOOM_U8, LOOM_BOOL};
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) d->kernels[LOOM_DEVICE_CPU][dts[i]] = fn;
}

static void def(loom_op_def *t, int op, int nin, int nout, loom_shape_fn shape, uint32_t flags) {
  t[op].nin = nin;
  t[op].nout = nout;
  t[op].shape = shape;
  t[op].flags = flags;
}

void loom__register_array(loom_op_def *t) {
  def(t, LOOM_OP_Reshape, 1, 1, shape_reshape, LOOM_OPF_ALIAS0);
  def(t, LOOM_OP_ReshapeLike, 2, 1, shape_reshape_like, LOOM_OPF_ALIAS0);
  t[LOOM_OP_ReshapeLike].nondiff_inputs = 1u << 1;

  def(t, LOOM_OP_BroadcastTo, 1, 1, shape_broadcast_to, 0);
  set_data_kernels(&t[LOOM_OP_BroadcastTo], loom__k_broadcast_any);
  def(t, LOOM_OP_BroadcastLike, 2, 1, shape_broadcast_like, 0);
  t[LOOM_OP_BroadcastLike].nondiff_inputs = 1u << 1;
  set_data_kernels(&t[LOOM_OP_BroadcastLike], loom__k_broadcast_any);

  def(t, LOOM_OP_Transpose, 1, 1, shape_transpose, 0);
  set_data_kernels(&t[LOOM_OP_Transpose], loom__k_transpose_any);

  def(t, LOOM_OP_Concat, -1, 1, shape_concat, 0);
  set_data_kernels(&t[LOOM_OP_Concat], loom__k_concat_any);
  def(t, LOOM_OP_Pack, -1, 1, shape_pack, 0);
  set_data_kernels(&t[LOOM_OP_Pack], loom__k_concat_any);

  def(t, LOOM_OP_Split, 1, -1, shape_split, 0);
  set_data_kernels(&t[LOOM_OP_Split], loom__k_split_any);
  def(t, LOOM_OP_SplitV, 1, -1, shape_split_v, 0);
  set_data_kernels(&t[LOOM_OP_SplitV], loom__k_split_any);
  def(t, LOOM_OP_Unpack, 1, -1, shape_unpack, 0);
  set_data_kernels(&t[LOOM_OP_Unpack], loom__k_split_any);

  def(t, LOOM_OP_Slice, 1, 1, shape_slice, 0);
  set_data_kernels(&t[LOOM_OP_Slice], loom__k_slice_any);

  def(t, LOOM_OP_ExpandDims, 1, 1, shape_expand_dims, LOOM_OPF_ALIAS0);
  def(t, LOOM_OP_Squeeze, 1, 1, shape_squeeze, LOOM_OPF_ALIAS0);

  def(t, LOOM_OP_Tile, 1, 1, shape_tile, 0);
  set_data_kernels(&t[LOOM_OP_Tile], loom__k_tile_any);
  t[LOOM_OP_Tile].kernels[LOOM_DEVICE_CPU][LOOM_STRING] = loom__k_tile_any;
  def(t, LOOM_OP_Pad, 1, 1, shape_pad, 0);
  set_data_kernels(&t[LOOM_OP_Pad], loom__k_pad_any);

  def(t, LOOM_OP_Gather, 2, 1, shape_gather, 0);
  t[LOOM_OP_Gather].nondiff_inputs = 1u << 1;
  set_data_kernels(&t[LOOM_OP_Gather], loom__k_gather_any);
  t[LOOM_OP_Gather].kernels[LOOM_DEVICE_CPU][LOOM_STRING] = loom__k_gather_any;

  def(t, LOOM_OP_ScatterAdd, 3, 1, shape_scatter_add, 0);
  t[LOOM_OP_ScatterAdd].nondiff_inputs = 1u << 1;
  t[LOOM_OP_ScatterAdd].kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_scatter_add_f32;
  t[LOOM_OP_ScatterAdd].kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_scatter_add_f64;
  t[LOOM_OP_ScatterAdd].kernels[LOOM_DEVICE_CPU][LOOM_I32] = loom__k_scatter_add_i32;
  t[LOOM_OP_ScatterAdd].kernels[LOOM_DEVICE_CPU][LOOM_I64] = loom__k_scatter_add_i64;
  def(t, LOOM_OP_ScatterUpdate, 3, 1, shape_scatter_update, 0);
  t[LOOM_OP_ScatterUpdate].nondiff_inputs = 1u << 1;
  set_data_kernels(&t[LOOM_OP_ScatterUpdate], loom__k_scatter_update_any);

  def(t, LOOM_OP_UnsortedSegmentSum, 2, 1, shape_segment_sum, 0);
  t[LOOM_OP_UnsortedSegmentSum].nondiff_inputs = 1u << 1;
  t[LOOM_OP_UnsortedSegmentSum].kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_segment_sum_f32;
  t[LOOM_OP_UnsortedSegmentSum].kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_segment_sum_f64;
  t[LOOM_OP_UnsortedSegmentSum].kernels[LOOM_DEVICE_CPU][LOOM_I32] = loom__k_segment_sum_i32;
  t[LOOM_OP_UnsortedSegmentSum].kernels[LOOM_DEVICE_CPU][LOOM_I64] = loom__k_segment_sum_i64;
  def(t, LOOM_OP_UnsortedSegmentMean, 2, 1, shape_segment_mean, 0);
  t[LOOM_OP_UnsortedSegmentMean].nondiff_inputs = 1u << 1;
  t[LOOM_OP_UnsortedSegmentMean].workspace = ws_segment;
  t[LOOM_OP_UnsortedSegmentMean].kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_segment_mean_f32;
  t[LOOM_OP_UnsortedSegmentMean].kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_segment_mean_f64;
  def(t, LOOM_OP_UnsortedSegmentSqrtN, 2, 1, shape_segment_mean, 0);
  t[LOOM_OP_UnsortedSegmentSqrtN].nondiff_inputs = 1u << 1;
  t[LOOM_OP_UnsortedSegmentSqrtN].workspace = ws_segment;
  t[LOOM_OP_UnsortedSegmentSqrtN].kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_segment_sqrtn_f32;
  t[LOOM_OP_UnsortedSegmentSqrtN].kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_segment_sqrtn_f64;

  def(t, LOOM_OP_OneHot, 1, 1, shape_one_hot, LOOM_OPF_NODIFF);
  t[LOOM_OP_OneHot].kernels[LOOM_DEVICE_CPU][0] = loom__k_one_hot_any;

  def(t, LOOM_OP_Cast, 1, 1, shape_cast, 0);
  t[LOOM_OP_Cast].kernels[LOOM_DEVICE_CPU][0] = loom__k_cast_any;

  def(t, LOOM_OP_Fill, 1, 1, shape_fill, 0);
  set_data_kernels(&t[LOOM_OP_Fill], loom__k_fill_any);
  def(t, LOOM_OP_ZerosLike, 1, 1, shape_same_data, LOOM_OPF_NODIFF);
  set_data_kernels(&t[LOOM_OP_ZerosLike], loom__k_zeros_like_any);
  def(t, LOOM_OP_OnesLike, 1, 1, shape_same_data, LOOM_OPF_NODIFF);
  set_data_kernels(&t[LOOM_OP_OnesLike], loom__k_ones_like_any);

  def(t, LOOM_OP_Shape, 1, 1, shape_shape, LOOM_OPF_NODIFF);
  t[LOOM_OP_Shape].kernels[LOOM_DEVICE_CPU][0] = loom__k_shape_any;
  def(t, LOOM_OP_Range, 0, 1, shape_range, LOOM_OPF_NODIFF);
  t[LOOM_OP_Range].kernels[LOOM_DEVICE_CPU][0] = loom__k_range_any;

  def(t, LOOM_OP_StopGradient, 1, 1, loom__shape_same, LOOM_OPF_ALIAS0 | LOOM_OPF_NODIFF);

  def(t, LOOM_OP_TopK, 1, 2, shape_top_k, 0);
  t[LOOM_OP_TopK].kernels[LOOM_DEVICE_CPU][LOOM_F32] = loom__k_top_k_f32;
  t[LOOM_OP_TopK].kernels[LOOM_DEVICE_CPU][LOOM_F64] = loom__k_top_k_f64;
  t[LOOM_OP_TopK].kernels[LOOM_DEVICE_CPU][LOOM_I32] = loom__k_top_k_i32;
  t[LOOM_OP_TopK].kernels[LOOM_DEVICE_CPU][LOOM_I64] = loom__k_top_k_i64;
  t[LOOM_OP_TopK].kernels[LOOM_DEVICE_CPU][LOOM_U8] = loom__k_top_k_u8;
}

/* ---------------------------------------------------------------------- */
/* builders                                                               */
/* ---------------------------------------------------------------------- */

static loom_attrs attrs0(void) {
  loom_attrs a;
  memset(&a, 0, sizeof a);
  return a;
}

/* Records a builder-level error (bad argument arrays) naming the node. */
static loom_output bfail(loom_graph *g, const char *name, int op, const char *what) {
  if (g) {
    loom_graph_set_error(g, LOOM_INVALID_ARGUMENT, "%s: %s", name && *name ? name : loom__op_def(op)->name, what);
    return loom__graph_dummy(g);
  }
  return (loom_output){NULL, 0};
}

/* Copies n dims into dst (n in [0, LOOM_MAX_DIMS], arr non-NULL when n > 0). */
static int copy_dims(int64_t *dst, int n, const int64_t *arr) {
  if (n < 0 || n > LOOM_MAX_DIMS || (n > 0 && !arr)) return 0;
  for (int i = 0; i < n; i++) dst[i] = arr[i];
  return 1;
}

/* Fills outs[0..n) from node nd (or the dummy); returns the graph's code. */
static loom_code multi_out(loom_graph *g, loom_node *nd, int n, loom_output *outs) {
  for (int i = 0; i < n; i++) outs[i] = nd ? (loom_output){nd, i} : loom__graph_dummy(g);
  if (nd) return LOOM_OK;
  loom_code rc = loom_graph_status(g, NULL);
  return rc ? rc : LOOM_INVALID_ARGUMENT;
}

loom_output loom_reshape(loom_graph *g, loom_output x, int ndim, const int64_t *dims, const char *name) {
  loom_attrs a = attrs0();
  if (!copy_dims(a.shape, ndim, dims)) return bfail(g, name, LOOM_OP_Reshape, "invalid shape array");
  a.nshape = ndim;
  return loom__build1(g, LOOM_OP_Reshape, name, x, &a);
}

loom_output loom_reshape_like(loom_graph *g, loom_output x, loom_output like, const char *name) {
  return loom__build2(g, LOOM_OP_ReshapeLike, name, x, like, NULL);
}

loom_output loom_broadcast_like(loom_graph *g, loom_output x, loom_output like, const char *name) {
  return loom__build2(g, LOOM_OP_BroadcastLike, name, x, like, NULL);
}

loom_output loom_broadcast_to(loom_graph *g, loom_output x, int ndim, const int64_t *dims, const char *name) {
  loom_attrs a = attrs0();
  if (!copy_dims(a.shape, ndim, dims)) return bfail(g, name, LOOM_OP_BroadcastTo, "invalid shape array");
  a.nshape = ndim;
  return loom__build1(g, LOOM_OP_BroadcastTo, name, x, &a);
}

loom_output loom_transpose(loom_graph *g, loom_output x, int nperm, const int64_t *perm, const char *name) {
  loom_attrs a = attrs0();
  if (nperm == 0 || !perm) {
    int r = loom_output_ndim(x);
    for (int i = 0; i < r; i++) a.axes[i] = r - 1 - i;
    a.naxes = r;
  } else {
    if (!copy_dims(a.axes, nperm, perm)) return bfail(g, name, LOOM_OP_Transpose, "invalid perm array");
    a.naxes = nperm;
  }
  return loom__build1(g, LOOM_OP_Transpose, name, x, &a);
}

loom_output loom_concat(loom_graph *g, int n, const loom_output *inputs, int64_t axis, const char *name) {
  loom_attrs a = attrs0();
  a.axis = axis;
  return loom__buildn(g, LOOM_OP_Concat, name, n, inputs, &a);
}

loom_code loom_split(loom_graph *g, loom_output x, int num, int64_t axis, loom_output *outs, const char *name) {
  if (!g) return LOOM_INVALID_ARGUMENT;
  if (num < 1 || !outs) {
    bfail(g, name, LOOM_OP_Split, "num_split must be >= 1 and outs non-NULL");
    return loom_graph_status(g, NULL);
  }
  loom_attrs a = attrs0();
  a.num = num;
  a.axis = axis;
  loom_node *nd = loom__graph_add(g, LOOM_OP_Split, name, NULL, 1, &x, &a, num);
  return multi_out(g, nd, num, outs);
}

loom_code loom_split_v(loom_graph *g, loom_output x, int n, const int64_t *sizes, int64_t axis, loom_output *outs,
                       const char *name) {
  if (!g) return LOOM_INVALID_ARGUMENT;
  loom_attrs a = attrs0();
  if (n < 1 || !outs || !copy_dims(a.size, n, sizes)) {
    bfail(g, name, LOOM_OP_SplitV, "needs 1 to 8 sizes and outs non-NULL");
    if (outs)
      for (int i = 0; i < n; i++) outs[i] = loom__graph_dummy(g);
    return loom_graph_status(g, NULL);
  }
  a.nshape = n;
  a.axis = axis;
  loom_node *nd = loom__graph_add(g, LOOM_OP_SplitV, name, NULL, 1, &x, &a, n);
  return multi_out(g, nd, n, outs);
}

loom_output loom_slice(loom_graph *g, loom_output x, const int64_t *begin, const int64_t *size, const char *name) {
  loom_attrs a = attrs0();
  int r = loom_output_ndim(x);
  if (!copy_dims(a.shape, r, begin) || !copy_dims(a.size, r, size))
    return bfail(g, name, LOOM_OP_Slice, "begin and size need one entry per dimension");
  a.nshape = r;
  return loom__build1(g, LOOM_OP_Slice, name, x, &a);
}

loom_output loom_stack(loom_graph *g, int n, const loom_output *inputs, int64_t axis, const char *name) {
  loom_attrs a = attrs0();
  a.axis = axis;
  return loom__buildn(g, LOOM_OP_Pack, name, n, inputs, &a);
}

loom_code loom_unstack(loom_graph *g, loom_output x, int num, int64_t axis, loom_output *outs, const char *name) {
  if (!g) return LOOM_INVALID_ARGUMENT;
  if (num < 0 || (num > 0 && !outs)) {
    bfail(g, name, LOOM_OP_Unpack, "num must be >= 0 and outs non-NULL");
    return loom_graph_status(g, NULL);
  }
  loom_attrs a = attrs0();
  a.num = num;
  a.axis = axis;
  loom_node *nd = loom__graph_add(g, LOOM_OP_Unpack, name, NULL, 1, &x, &a, num);
  return multi_out(g, nd, num, outs);
}

loom_output loom_expand_dims(loom_graph *g, loom_output x, int64_t axis, const char *name) {
  loom_attrs a = attrs0();
  a.axis = axis;
  return loom__build1(g, LOOM_OP_ExpandDims, name, x, &a);
}

loom_output loom_squeeze(loom_graph *g, loom_output x, int naxes, const int64_t *axes, const char *name) {
  loom_attrs a = attrs0();
  if (!copy_dims(a.axes, naxes, axes)) return bfail(g, name, LOOM_OP_Squeeze, "invalid axes array");
  a.naxes = naxes;
  return loom__build1(g, LOOM_OP_Squeeze, name, x, &a);
}

loom_output loom_tile(loom_graph *g, loom_output x, const int64_t *multiples, const char *name) {
  loom_attrs a = attrs0();
  int r = loom_output_ndim(x);
  if (!copy_dims(a.shape, r, multiples)) return bfail(g, name, LOOM_OP_Tile, "multiples needs one entry per dimension");
  a.nshape = r;
  return loom__build1(g, LOOM_OP_Tile, name, x, &a);
}

loom_output loom_pad(loom_graph *g, loom_output x, const int64_t *before, const int64_t *after, double value,
                     const char *name) {
  loom_attrs a = attrs0();
  int r = loom_output_ndim(x);
  if (!copy_dims(a.shape, r, before) || !copy_dims(a.size, r, after))
    return bfail(g, name, LOOM_OP_Pad, "before and after need one entry per dimension");
  a.nshape = r;
  a.alpha = value;
  return loom__build1(g, LOOM_OP_Pad, name, x, &a);
}

loom_output loom_gather(loom_graph *g, loom_output params, loom_output indices, int64_t axis, const char *name) {
  loom_attrs a = attrs0();
  a.axis = axis;
  return loom__build2(g, LOOM_OP_Gather, name, params, indices, &a);
}

loom_output loom_scatter_add(loom_graph *g, loom_output tensor, loom_output indices, loom_output updates,
                             const char *name) {
  loom_output in[3] = {tensor, indices, updates};
  return loom__buildn(g, LOOM_OP_ScatterAdd, name, 3, in, NULL);
}

loom_output loom_scatter_update(loom_graph *g, loom_output tensor, loom_output indices, loom_output updates,
                                const char *name) {
  loom_output in[3] = {tensor, indices, updates};
  return loom__buildn(g, LOOM_OP_ScatterUpdate, name, 3, in, NULL);
}

static loom_output segment(loom_graph *g, int op, loom_output data, loom_output ids, int64_t num,
                           const char *name) {
  loom_attrs a = attrs0();
  a.num = num;
  return loom__build2(g, op, name, data, ids, &a);
}
loom_output loom_unsorted_segment_sum(loom_graph *g, loom_output data, loom_output segment_ids, int64_t num_segments,
                                      const char *name) {
  return segment(g, LOOM_OP_UnsortedSegmentSum, data, segment_ids, num_segments, name);
}
loom_output loom_unsorted_segment_mean(loom_graph *g, loom_output data, loom_output segment_ids, int64_t num_segments,
                                       const char *name) {
  return segment(g, LOOM_OP_UnsortedSegmentMean, data, segment_ids, num_segments, name);
}
loom_output loom_unsorted_segment_sqrt_n(loom_graph *g, loom_output data, loom_output segment_ids,
                                         int64_t num_segments, const char *name) {
  return segment(g, LOOM_OP_UnsortedSegmentSqrtN, data, segment_ids, num_segments, name);
}

loom_output loom_one_hot(loom_graph *g, loom_output indices, int64_t depth, double on_value, double off_value,
                         int64_t axis, loom_dtype dtype, const char *name) {
  loom_attrs a = attrs0();
  a.num = depth;
  a.alpha = on_value;
  a.beta = off_value;
  a.axis = axis;
  a.dtype = dtype;
  return loom__build1(g, LOOM_OP_OneHot, name, indices, &a);
}

loom_output loom_cast(loom_graph *g, loom_output x, loom_dtype dtype, const char *name) {
  loom_attrs a = attrs0();
  a.dtype = dtype;
  return loom__build1(g, LOOM_OP_Cast, name, x, &a);
}

loom_output loom_fill(loom_graph *g, int ndim, const int64_t *dims, loom_output value, const char *name) {
  loom_attrs a = attrs0();
  if (!copy_dims(a.shape, ndim, dims)) return bfail(g, name, LOOM_OP_Fill, "invalid dims array");
  a.nshape = ndim;
  return loom__build1(g, LOOM_OP_Fill, name, value, &a);
}

loom_output loom_zeros_like(loom_graph *g, loom_output x, const char *name) {
  return loom__build1(g, LOOM_OP_ZerosLike, name, x, NULL);
}

loom_output loom_ones_like(loom_graph *g, loom_output x, const char *name) {
  return loom__build1(g, LOOM_OP_OnesLike, name, x, NULL);
}

loom_output loom_shape(loom_graph *g, loom_output x, loom_dtype dtype, const char *name) {
  loom_attrs a = attrs0();
  a.dtype = dtype;
  return loom__build1(g, LOOM_OP_Shape, name, x, &a);
}

loom_output loom_range(loom_graph *g, double start, double limit, double delta, loom_dtype dtype, const char *name) {
  loom_attrs a = attrs0();
  a.start = start;
  a.limit = limit;
  a.delta = delta;
  a.dtype = dtype;
  return loom__buildn(g, LOOM_OP_Range, name, 0, NULL, &a);
}

loom_output loom_stop_gradient(loom_graph *g, loom_output x, const char *name) {
  return loom__build1(g, LOOM_OP_StopGradient, name, x, NULL);
}

loom_code loom_top_k(loom_graph *g, loom_output x, int64_t k, loom_output *values, loom_output *indices,
                     const char *name) {
  if (!g) return LOOM_INVALID_ARGUMENT;
  loom_attrs a = attrs0();
  a.num = k;
  loom_node *nd = loom__graph_add(g, LOOM_OP_TopK, name, NULL, 1, &x, &a, 2);
  loom_output o[2];
  loom_code rc = multi_out(g, nd, 2, o);
  if (values) *values = o[0];
  if (indices) *indices = o[1];
  return rc;
}
