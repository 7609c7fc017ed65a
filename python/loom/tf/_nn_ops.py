"""tf.nn's convolution, pooling and normalization ops in a model_fn, each
one loom graph op of loom_nn.h (or a few of loom's math ops) with TF 2.15's
arguments: tf.nn.conv2d, conv2d_transpose, max_pool2d / max_pool,
avg_pool2d / avg_pool, moments, batch_normalization; and tf.gradients
(loom_autodiff.h); and the tf.compat.v1.nn versions with TF 1's arguments
(filter=, value=, keep_dims=). Images are NHWC and filters HWIO, as TF's
default data_format; NCHW raises NotImplementedError, and so do explicit
padding lists but for conv2d's. Shape errors (a rank that is not 4,
channels that do not match the filter) are loom's LoomError, naming the TF
function, loom's op and the shapes."""
import functools

import numpy as np

from .. import Output, _b, _Status, LoomError
from .. import _lib as L
from .._lib import lib
from .math_ops import _graph

_d = L._d
_O, _G, _S, _I64P = L.Output, L.vp, L.cs, L.P(L.i64)
_d("loom_conv2d", _O, _G, _O, _O, _I64P, L.cint, _I64P, _S)
_d("loom_conv2d_backprop_input", _O, _G, _I64P, _O, _O, _I64P, L.cint, _I64P, _S)
_d("loom_max_pool", _O, _G, _O, _I64P, _I64P, L.cint, _S)
_d("loom_avg_pool", _O, _G, _O, _I64P, _I64P, L.cint, _S)
_d("loom_rsqrt", _O, _G, _O, _S)
_d("loom_pad", _O, _G, _O, _I64P, _I64P, L.dbl, _S)
_d("loom_gradients", L.cint, _G, L.cint, L.P(_O), L.P(_O), L.cint, L.P(_O), L.P(_O), _G)


def _named(what):
    """Prefixes loom's build errors with the TF function's name."""
    def wrap(fn):
        @functools.wraps(fn)
        def f(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except LoomError as e:
                msg, prefix = str(e), e.code_name + ": "
                raise LoomError(e.code, "%s: %s" % (what, msg[len(prefix):] if msg.startswith(prefix) else msg)) \
                    from None
        return f
    return wrap


def _vec4(v, what, arg, default=None):
    """TF's int / 1-, 2- or 4-list form of strides, ksize, dilations (NHWC)
    as loom's [1, h, w, 1] array."""
    if v is None:
        if default is None:
            raise ValueError("%s: %s is required" % (what, arg))
        v = default
    if isinstance(v, Output):
        raise NotImplementedError("loom.tf: %s(%s=<tensor>) is not supported: give %s as Python ints"
                                  % (what, arg, arg))
    vals = [int(v)] if isinstance(v, (int, np.integer)) else [int(x) for x in v]
    if len(vals) == 1:
        vals = [1, vals[0], vals[0], 1]
    elif len(vals) == 2:
        vals = [1, vals[0], vals[1], 1]
    elif len(vals) != 4:
        raise ValueError("%s: %s should be of length 1, 2 or 4; got %r" % (what, arg, v))
    if vals[0] != 1 or vals[3] != 1:
        raise ValueError("%s: %s %r: the batch and depth entries must be 1 (NHWC)" % (what, arg, v))
    if min(vals) < 1:
        raise ValueError("%s: %s %r: every entry must be positive" % (what, arg, v))
    return (L.i64 * 4)(*vals)


def _padding(padding, what):
    if isinstance(padding, (list, tuple)):
        raise NotImplementedError("loom.tf: %s(padding=%r): explicit padding lists are not supported; give "
                                  "\"SAME\" or \"VALID\" (or tf.pad the input first)" % (what, padding))
    if padding == "SAME":
        return 1
    if padding == "VALID":
        return 0
    raise ValueError("%s: padding %r: give \"SAME\" or \"VALID\"" % (what, padding))


def _nhwc(data_format, what):
    if data_format not in (None, "NHWC"):
        raise NotImplementedError("loom.tf: %s(data_format=%r) is not supported: NHWC (channels last) only; "
                                  "tf.transpose the input to NHWC" % (what, data_format))


def _tensor(g, v, like):
    return v if isinstance(v, Output) else g.constant(np.asarray(v, like.dtype))


def _one(a, b, what, names):
    if a is not None and b is not None:
        raise ValueError("%s: give %s or %s, not both" % (what, names[0], names[1]))
    return a if a is not None else b


def _conv2d(what, input, filters, strides, padding, data_format, dilations, name):  # noqa: A002
    if input is None or filters is None:
        raise ValueError("%s: input and filters are required" % what)
    _nhwc(data_format, what)
    g = _graph(input, filters)
    input = _tensor(g, input, filters) if not isinstance(input, Output) else input  # noqa: A001
    filters = _tensor(g, filters, input)
    if isinstance(padding, (list, tuple)):  # explicit [[0, 0], [top, bottom], [left, right], [0, 0]]: pad, VALID
        pads = _explicit(padding, what)
        input = g._out(lib.loom_pad(g.p, input.c, (L.i64 * 4)(*[p[0] for p in pads]),  # noqa: A001
                                    (L.i64 * 4)(*[p[1] for p in pads]), 0.0, None))
        padding = "VALID"
    return g._out(lib.loom_conv2d(g.p, input.c, filters.c, _vec4(strides, what, "strides"), _padding(padding, what),
                                  _vec4(dilations, what, "dilations", 1), _b(name)))


@_named("tf.nn.conv2d")
def conv2d(input, filters, strides, padding, data_format="NHWC", dilations=None, name=None):  # noqa: A002
    """tf.nn.conv2d: input [batch, h, w, in], filters [kh, kw, in, out]."""
    return _conv2d("tf.nn.conv2d", input, filters, strides, padding, data_format, dilations, name)


@_named("tf.compat.v1.nn.conv2d")
def conv2d_v1(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,  # noqa: A002
              data_format="NHWC", dilations=(1, 1, 1, 1), name=None, filters=None):
    """tf.compat.v1.nn.conv2d: filter (or filters) [kh, kw, in, out]."""
    what = "tf.compat.v1.nn.conv2d"
    return _conv2d(what, input, _one(filters, filter, what, ("filters", "filter")), strides, padding, data_format,
                   dilations, name)


def _explicit(padding, what):
    try:
        pads = [[int(a), int(b)] for a, b in padding]
    except (TypeError, ValueError):
        pads = None
    if pads is None or len(pads) != 4:
        raise ValueError("%s: explicit padding %r should be 4 [before, after] pairs (NHWC)" % (what, padding))
    if pads[0] != [0, 0] or pads[3] != [0, 0]:
        raise ValueError("%s: explicit padding %r: the batch and depth pairs must be [0, 0]" % (what, padding))
    if min(min(p) for p in pads) < 0:
        raise ValueError("%s: explicit padding %r: every entry must be >= 0" % (what, padding))
    return pads


def _conv2d_transpose(what, input, filters, output_shape, strides, padding, data_format, dilations,  # noqa: A002
                      name):
    if input is None or filters is None or output_shape is None:
        raise ValueError("%s: input, filters and output_shape are required" % what)
    _nhwc(data_format, what)
    if isinstance(output_shape, Output):
        raise NotImplementedError("loom.tf: %s(output_shape=<tensor>) is not supported: give a list of 4 ints "
                                  "(its batch entry may be a tensor)" % what)
    shape = list(output_shape)
    if len(shape) != 4:
        raise ValueError("%s: output_shape should have 4 entries (NHWC); got %r" % (what, output_shape))
    dims = [-1 if i == 0 and (isinstance(d, Output) or d is None) else int(d) for i, d in enumerate(shape)]
    g = _graph(input, filters)
    input = _tensor(g, input, filters) if not isinstance(input, Output) else input  # noqa: A001
    filters = _tensor(g, filters, input)
    return g._out(lib.loom_conv2d_backprop_input(g.p, (L.i64 * 4)(*dims), filters.c, input.c,
                                                 _vec4(strides, what, "strides"), _padding(padding, what),
                                                 _vec4(dilations, what, "dilations", 1), _b(name)))


@_named("tf.nn.conv2d_transpose")
def conv2d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NHWC",  # noqa: A002
                     dilations=None, name=None):
    """tf.nn.conv2d_transpose: input [batch, h, w, in], filters [kh, kw, out, in]
    (the filter of the conv2d whose input gradient this is), output_shape
    [batch, oh, ow, out] (the batch may be a tensor, e.g. tf.shape(x)[0])."""
    return _conv2d_transpose("tf.nn.conv2d_transpose", input, filters, output_shape, strides, padding, data_format,
                             dilations, name)


@_named("tf.compat.v1.nn.conv2d_transpose")
def conv2d_transpose_v1(value=None, filter=None, output_shape=None, strides=None, padding="SAME",  # noqa: A002
                        data_format="NHWC", name=None, input=None, filters=None, dilations=None):  # noqa: A002
    """tf.compat.v1.nn.conv2d_transpose: value (or input), filter (or filters)."""
    what = "tf.compat.v1.nn.conv2d_transpose"
    return _conv2d_transpose(what, _one(value, input, what, ("value", "input")),
                             _one(filter, filters, what, ("filter", "filters")), output_shape, strides, padding,
                             data_format, dilations, name)


def _pool_op(fn, what, input, ksize, strides, padding, data_format, name):  # noqa: A002
    if input is None:
        raise ValueError("%s: input is required" % what)
    _nhwc(data_format, what)
    g = _graph(input)
    if len(input.shape) != 4 and not what.endswith("2d"):
        raise NotImplementedError("loom.tf: %s of a rank-%d input: 2-D pooling of NHWC images (rank 4) only"
                                  % (what, len(input.shape)))
    return g._out(fn(g.p, input.c, _vec4(ksize, what, "ksize"), _vec4(strides, what, "strides"),
                     _padding(padding, what), _b(name)))


def _pool(fn, what, v1=False):
    if v1:
        def f(value=None, ksize=None, strides=None, padding=None, data_format="NHWC", name=None,
              input=None):  # noqa: A002
            return _pool_op(fn, what, _one(value, input, what, ("value", "input")), ksize, strides, padding,
                            data_format, name)
    else:
        def f(input, ksize, strides, padding, data_format="NHWC" if what.endswith("2d") else None,  # noqa: A002
              name=None):
            return _pool_op(fn, what, input, ksize, strides, padding, data_format, name)
    f.__name__ = f.__qualname__ = what.rsplit(".", 1)[1]
    f.__doc__ = "%s on NHWC images: ksize and strides an int or a list of 1, 2 or 4." % what
    return _named(what)(f)


max_pool2d = _pool(lib.loom_max_pool, "tf.nn.max_pool2d")
max_pool = _pool(lib.loom_max_pool, "tf.nn.max_pool")
avg_pool2d = _pool(lib.loom_avg_pool, "tf.nn.avg_pool2d")
avg_pool = _pool(lib.loom_avg_pool, "tf.nn.avg_pool")
max_pool_v1 = _pool(lib.loom_max_pool, "tf.compat.v1.nn.max_pool", v1=True)
avg_pool_v1 = _pool(lib.loom_avg_pool, "tf.compat.v1.nn.avg_pool", v1=True)


def _moments(x, axes, keepdims, name):
    g = _graph(x)
    axes = [int(axes)] if isinstance(axes, (int, np.integer)) else [int(a) for a in axes]
    mean = g.reduce_mean(x, axes, keepdims=True)
    dev = g.sub(x, g.stop_gradient(mean))
    variance = g.reduce_mean(g.mul(dev, dev), axes, keepdims=True)
    if not keepdims:
        rank = len(x.shape)
        sq = sorted(a % rank for a in axes)
        mean = g._out(lib.loom_squeeze(g.p, mean.c, len(sq), (L.i64 * len(sq))(*sq), None))
        variance = g._out(lib.loom_squeeze(g.p, variance.c, len(sq), (L.i64 * len(sq))(*sq), None))
    if name:
        mean, variance = g.identity(mean, name=name + "/mean"), g.identity(variance, name=name + "/variance")
    return mean, variance


@_named("tf.nn.moments")
def moments(x, axes, shift=None, keepdims=False, name=None):
    """tf.nn.moments: (mean, variance) of x over axes, the variance the mean
    of the squared deviation from the mean (the mean's gradient stopped
    there, as TF; shift is unused, as TF's)."""
    return _moments(x, axes, bool(keepdims), name)


@_named("tf.compat.v1.nn.moments")
def moments_v1(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """tf.compat.v1.nn.moments (keep_dims or keepdims)."""
    return _moments(x, axes, bool(_one(keepdims, keep_dims, "tf.compat.v1.nn.moments", ("keepdims", "keep_dims"))),
                    name)


@_named("tf.nn.batch_normalization")
def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """tf.nn.batch_normalization: x * inv + (offset - mean * inv) with
    inv = scale / sqrt(variance + variance_epsilon) (scale and offset may be
    None: 1 and 0)."""
    g = _graph(x)
    mean, variance = _tensor(g, mean, x), _tensor(g, variance, x)
    inv = g._out(lib.loom_rsqrt(g.p, g.add(variance, g.constant(np.asarray(variance_epsilon, x.dtype))).c, None))
    if scale is not None:
        inv = g.mul(inv, _tensor(g, scale, x))
    shift = g.neg(g.mul(mean, inv)) if offset is None else g.sub(_tensor(g, offset, x), g.mul(mean, inv))
    return g.add(g.mul(x, inv), shift, name=name)


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False, gate_gradients=False,
              aggregation_method=None, stop_gradients=None, unconnected_gradients="none"):
    """tf.gradients: the gradients of sum(ys) (weighted by grad_ys) with
    respect to each of xs; None where an x does not affect ys (TF's
    UnconnectedGradients.NONE)."""
    if stop_gradients is not None or aggregation_method is not None:
        raise NotImplementedError("loom.tf: tf.gradients(%s=...) is not supported; use tf.stop_gradient in the "
                                  "graph" % ("stop_gradients" if stop_gradients is not None else
                                             "aggregation_method"))
    if str(getattr(unconnected_gradients, "value", unconnected_gradients)).lower() != "none":
        raise NotImplementedError("loom.tf: tf.gradients(unconnected_gradients=%r): NONE only"
                                  % (unconnected_gradients,))
    one_x = isinstance(xs, Output)
    ys = [ys] if isinstance(ys, Output) else list(ys)
    xs = [xs] if one_x else list(xs)
    g = _graph(*ys)
    gy = None
    if grad_ys is not None:
        grad_ys = [grad_ys] if isinstance(grad_ys, Output) else list(grad_ys)
        if len(grad_ys) != len(ys):
            raise ValueError("tf.gradients: %d grad_ys for %d ys" % (len(grad_ys), len(ys)))
        gy = (_O * len(ys))(*[_tensor(g, v, y).c for v, y in zip(grad_ys, ys)])
    out = (_O * len(xs))()
    st = _Status()
    rc = lib.loom_gradients(g.p, len(ys), (_O * len(ys))(*[y.c for y in ys]), gy, len(xs),
                            (_O * len(xs))(*[x.c for x in xs]), out, st.p)
    st.raise_if(rc)
    return [Output(g, o) if o.node else None for o in out]


def dropout_v1(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """tf.compat.v1.nn.dropout: keep_prob (TF 1's, 1 - rate) or rate."""
    what = "tf.compat.v1.nn.dropout"
    if keep_prob is not None and rate is not None:
        raise ValueError("%s: give keep_prob or rate, not both" % what)
    if keep_prob is None and rate is None:
        raise ValueError("%s: give keep_prob or rate" % what)
    if isinstance(keep_prob, Output) or isinstance(rate, Output):
        raise NotImplementedError("loom.tf: %s with a tensor keep_prob or rate is not supported: give a Python "
                                  "float (in a model_fn, e.g. 0.5 if mode == TRAIN else 1.0)" % what)
    if keep_prob is not None:
        if not 0 < float(keep_prob) <= 1:
            raise ValueError("%s: keep_prob must be in (0, 1], got %g" % (what, float(keep_prob)))
        rate = 1.0 - float(keep_prob)
    from ._graph_ops import dropout
    if float(rate) == 0:
        return _graph(x).identity(x, name=name)
    return dropout(x, rate, noise_shape=noise_shape, seed=seed, name=name)
