"""More of TF's math, array and nn ops in a model_fn (or a Dataset.map
function), each one loom graph op (loom_math.h, loom_array.h, loom_nn.h,
loom_reduce.h) with TF's arguments: tf.matmul, transpose, stack, tile,
gather, one_hot, where, clip_by_value, zeros_like / ones_like, identity,
stop_gradient; tf.math's sigmoid, tanh, negative, sign, floor, ceil, round,
reciprocal, log1p, rsqrt, not_equal, less_equal, greater_equal,
logical_and / or / not, reduce_prod, reduce_logsumexp, argmin; tf.nn's
log_softmax, sigmoid_cross_entropy_with_logits,
softmax_cross_entropy_with_logits, l2_normalize, bias_add, l2_loss. An
argument loom does not take raises NotImplementedError naming it."""
import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Output, _b, _dtype
from . import dtypes as _dt
from .math_ops import _graph, _pair

_d = L._d
_O, _G, _S = L.Output, L.vp, L.cs
_UNARY = {"negative": "neg", "tanh": "tanh", "sigmoid": "sigmoid", "sign": "sign", "floor": "floor", "ceil": "ceil",
          "round": "round", "reciprocal": "reciprocal", "log1p": "log1p", "rsqrt": "rsqrt",
          "logical_not": "logical_not", "stop_gradient": "stop_gradient", "identity": "identity",
          "log_softmax_2d": "log_softmax"}
_BINARY = {"not_equal": "not_equal", "less_equal": "less_equal", "greater_equal": "greater_equal",
           "logical_and": "logical_and", "logical_or": "logical_or"}
for _c in set(_UNARY.values()) | {"zeros_like", "ones_like"}:
    _d("loom_" + _c, _O, _G, _O, _S)
for _c in _BINARY.values():
    _d("loom_" + _c, _O, _G, _O, _O, _S)
_d("loom_select", _O, _G, _O, _O, _O, _S)
_d("loom_clip_by_value", _O, _G, _O, _O, _O, _S)
_d("loom_transpose", _O, _G, _O, L.cint, L.P(L.i64), _S)
_d("loom_stack", _O, _G, L.cint, L.P(_O), L.i64, _S)
_d("loom_tile", _O, _G, _O, L.P(L.i64), _S)
_d("loom_gather", _O, _G, _O, _O, L.i64, _S)
_d("loom_one_hot", _O, _G, _O, L.i64, L.dbl, L.dbl, L.i64, L.cint, _S)
_d("loom_matmul", _O, _G, _O, _O, L.cint, L.cint, _S)
_d("loom_batch_matmul", _O, _G, _O, _O, L.cint, L.cint, _S)
_d("loom_sigmoid_cross_entropy_with_logits", _O, _G, _O, _O, _S)
_d("loom_softmax_cross_entropy_with_logits", _O, _G, _O, _O, L.P(_O), L.P(_O), _S)
_d("loom_l2_normalize", _O, _G, _O, L.cint, L.dbl, _S)
_d("loom_bias_add", _O, _G, _O, _O, _S)
_d("loom_argmin", _O, _G, _O, L.i64, L.cint, _S)
for _c in ("reduce_prod", "reduce_logsumexp", "reduce_sum"):
    _d("loom_" + _c, _O, _G, _O, L.cint, L.P(L.i64), L.cint, _S)


def _nie(what, **args):
    for k, v in args.items():
        if v:
            raise NotImplementedError("loom.tf: %s(%s=...) is not supported" % (what, k))


def _unary(tf_name, c_name):
    def f(x, name=None):
        g = _graph(x)
        return g._out(getattr(lib, "loom_" + c_name)(g.p, x.c, _b(name)))
    f.__name__ = f.__qualname__ = tf_name
    return f


def _binary(tf_name, c_name):
    def f(x, y, name=None):
        g, x, y = _pair(x, y)
        return g._out(getattr(lib, "loom_" + c_name)(g.p, x.c, y.c, _b(name)))
    f.__name__ = f.__qualname__ = tf_name
    return f


for _t, _c in _UNARY.items():
    if _t != "log_softmax_2d":
        globals()[_t] = _unary(_t, _c)
for _t, _c in _BINARY.items():
    globals()[_t] = _binary(_t, _c)


def zeros_like(input, dtype=None, name=None):  # noqa: A002 - TF's argument names
    g = _graph(input)
    out = g._out(lib.loom_zeros_like(g.p, input.c, _b(name)))
    return out if dtype is None else g.cast(out, _dt.as_dtype(dtype).as_numpy_dtype)


def ones_like(input, dtype=None, name=None):  # noqa: A002
    g = _graph(input)
    out = g._out(lib.loom_ones_like(g.p, input.c, _b(name)))
    return out if dtype is None else g.cast(out, _dt.as_dtype(dtype).as_numpy_dtype)


def where(condition, x=None, y=None, name=None):
    if x is None or y is None:
        raise NotImplementedError("loom.tf: tf.where(condition) without x and y (the indices of the true "
                                  "elements) is not supported; give tf.where(condition, x, y)")
    g = _graph(condition, x, y)
    g2, x, y = _pair(x, y)
    return g._out(lib.loom_select(g.p, condition.c, x.c, y.c, _b(name)))


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    g = _graph(t)
    lo = clip_value_min if isinstance(clip_value_min, Output) else g.constant(np.asarray(clip_value_min, t.dtype))
    hi = clip_value_max if isinstance(clip_value_max, Output) else g.constant(np.asarray(clip_value_max, t.dtype))
    return g._out(lib.loom_clip_by_value(g.p, t.c, lo.c, hi.c, _b(name)))


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False, a_is_sparse=False,
           b_is_sparse=False, output_type=None, name=None):
    _nie("tf.matmul", a_is_sparse=a_is_sparse, b_is_sparse=b_is_sparse, output_type=output_type)
    g, a, b = _pair(a, b)
    ta, tb = bool(transpose_a or adjoint_a), bool(transpose_b or adjoint_b)  # real tensors: adjoint = transpose
    if len(a.shape) == 2 and len(b.shape) == 2:
        return g._out(lib.loom_matmul(g.p, a.c, b.c, int(ta), int(tb), _b(name)))
    return g._out(lib.loom_batch_matmul(g.p, a.c, b.c, int(ta), int(tb), _b(name)))


def transpose(a, perm=None, conjugate=False, name="transpose"):
    g = _graph(a)
    if perm is None:
        perm = list(range(len(a.shape)))[::-1]
    perm = [int(p) for p in perm]
    return g._out(lib.loom_transpose(g.p, a.c, len(perm), (L.i64 * max(1, len(perm)))(*perm), _b(name)))


def stack(values, axis=0, name="stack"):
    values = list(values)
    g = _graph(*values)
    values = [v if isinstance(v, Output) else g.constant(np.asarray(v, values[0].dtype if isinstance(values[0], Output)
                                                                     else None)) for v in values]
    arr = (L.Output * len(values))(*[v.c for v in values])
    return g._out(lib.loom_stack(g.p, len(values), arr, int(axis), _b(name)))


def tile(input, multiples, name=None):  # noqa: A002
    g = _graph(input)
    m = [int(v) for v in multiples]
    if len(m) != len(input.shape):
        raise ValueError("tf.tile: multiples has %d entries, the input has rank %d" % (len(m), len(input.shape)))
    return g._out(lib.loom_tile(g.p, input.c, (L.i64 * max(1, len(m)))(*m), _b(name)))


def gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    _nie("tf.gather", batch_dims=batch_dims)
    g = _graph(params)
    if not isinstance(indices, Output):
        indices = g.constant(np.asarray(indices, np.int64))
    return g._out(lib.loom_gather(g.p, params.c, indices.c, int(axis or 0), _b(name)))


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    g = _graph(indices)
    dt = _dt.as_dtype(dtype).as_numpy_dtype if dtype is not None else np.float32
    on = 1.0 if on_value is None else float(on_value)
    off = 0.0 if off_value is None else float(off_value)
    return g._out(lib.loom_one_hot(g.p, indices.c, int(depth), on, off, -1 if axis is None else int(axis),
                                   _dtype(dt), _b(name)))


def _axes(axis):
    if axis is None:
        return -1, None  # loom: every axis (0 would be none)
    ax = [int(axis)] if isinstance(axis, (int, np.integer)) else [int(a) for a in axis]
    return len(ax), (L.i64 * len(ax))(*ax)


def _reduce(c_name, tf_name):
    def f(input_tensor, axis=None, keepdims=False, name=None):
        g = _graph(input_tensor)
        n, ax = _axes(axis)
        return g._out(getattr(lib, "loom_" + c_name)(g.p, input_tensor.c, n, ax, int(bool(keepdims)), _b(name)))
    f.__name__ = f.__qualname__ = tf_name
    return f


reduce_prod = _reduce("reduce_prod", "reduce_prod")
reduce_logsumexp = _reduce("reduce_logsumexp", "reduce_logsumexp")


def argmin(input, axis=None, output_type=_dt.int64, name=None):  # noqa: A002
    g = _graph(input)
    return g._out(lib.loom_argmin(g.p, input.c, -1 if axis is None else int(axis),
                                  _dtype(_dt.as_dtype(output_type).as_numpy_dtype), _b(name)))


# ---------------------------------------------------------------- tf.nn
def log_softmax(logits, axis=None, name=None):
    if axis not in (None, -1, len(logits.shape) - 1):
        raise NotImplementedError("loom.tf: tf.nn.log_softmax(axis=%r): the last axis only" % (axis,))
    g = _graph(logits)
    return g._out(lib.loom_log_softmax(g.p, logits.c, _b(name)))


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    if labels is None or logits is None:
        raise ValueError("sigmoid_cross_entropy_with_logits: both labels and logits must be given")
    g, labels, logits = _pair(labels, logits)
    return g._out(lib.loom_sigmoid_cross_entropy_with_logits(g.p, labels.c, logits.c, _b(name)))


def softmax_cross_entropy_with_logits(labels, logits, axis=-1, name=None):
    if axis not in (-1, len(logits.shape) - 1):
        raise NotImplementedError("loom.tf: tf.nn.softmax_cross_entropy_with_logits(axis=%r): the last axis only"
                                  % (axis,))
    g, labels, logits = _pair(labels, logits)
    return g._out(lib.loom_softmax_cross_entropy_with_logits(g.p, logits.c, labels.c, None, None, _b(name)))


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    axis = dim if axis is None else axis
    if axis is None or not isinstance(axis, (int, np.integer)):
        raise NotImplementedError("loom.tf: tf.nn.l2_normalize(axis=%r): one axis" % (axis,))
    g = _graph(x)
    return g._out(lib.loom_l2_normalize(g.p, x.c, int(axis), float(epsilon), _b(name)))


def bias_add(value, bias, data_format=None, name=None):
    if data_format not in (None, "NHWC", "N...C"):
        raise NotImplementedError("loom.tf: tf.nn.bias_add(data_format=%r): channels last only" % (data_format,))
    g, value, bias = _pair(value, bias)
    return g._out(lib.loom_bias_add(g.p, value.c, bias.c, _b(name)))


def l2_loss(t, name=None):
    """sum(t ** 2) / 2, as TF."""
    g = _graph(t)
    s = g._out(lib.loom_reduce_sum(g.p, g.square(t).c, -1, None, 0, None))
    return g.mul(s, g.constant(np.asarray(0.5, t.dtype)), name=name)


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_variance: the mean of the squared deviations from the mean (floats)."""
    g = _graph(input_tensor)
    d = g.sub(input_tensor, g.reduce_mean(input_tensor, axis, True))
    return g.reduce_mean(g.square(d), axis, keepdims, name)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """tf.math.reduce_std: the square root of reduce_variance."""
    g = _graph(input_tensor)
    return g.sqrt(reduce_variance(input_tensor, axis, keepdims), name=name)


def divide_no_nan(x, y, name=None):
    """tf.math.divide_no_nan: x / y, 0 where y is 0."""
    g, x, y = _pair(x, y)
    zero = g.equal(y, g.constant(np.zeros((), y.dtype)))
    safe = g._out(lib.loom_select(g.p, zero.c, g._out(lib.loom_ones_like(g.p, y.c, None)).c, y.c, None))
    q = g.div(x, safe)
    return g._out(lib.loom_select(g.p, zero.c, g._out(lib.loom_zeros_like(g.p, q.c, None)).c, q.c, _b(name)))


def _bool_reduce(which):
    def f(input_tensor, axis=None, keepdims=False, name=None):
        g = _graph(input_tensor)
        if np.dtype(input_tensor.dtype) != np.bool_:
            raise TypeError("tf.reduce_%s: the input must be bool, got %s" % (which, np.dtype(input_tensor.dtype)))
        x = g.cast(input_tensor, np.float32)
        r = (g.reduce_max if which == "any" else g.reduce_min)(x, axis, keepdims)
        return g.greater(r, g.constant(np.float32(0.5)), name=name)
    f.__name__ = f.__qualname__ = "reduce_" + which
    return f


reduce_any, reduce_all = _bool_reduce("any"), _bool_reduce("all")
