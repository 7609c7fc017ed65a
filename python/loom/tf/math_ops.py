"""Elementwise tf ops on the symbolic tensors of a traced function (a
Dataset.map fn or a model_fn): tf.add / subtract / multiply / divide /
maximum / minimum, tf.exp / log / sqrt / square / abs, tf.concat,
tf.expand_dims, tf.squeeze. Python numbers and numpy arrays combine with a
tensor as constants of its dtype, as TF converts them."""
import numpy as np

from .. import Output
from .. import _lib as L
from .._lib import lib
from .. import _b


def _graph(*xs):
    for x in xs:
        if isinstance(x, Output):
            return x.graph
    raise NotImplementedError("loom.tf: these ops take the tensors of a traced function (Dataset.map, model_fn); "
                              "for numpy values use numpy")


def _pair(x, y):
    g = _graph(x, y)
    if not isinstance(x, Output):
        x = g.constant(np.asarray(x, dtype=y.dtype))
    if not isinstance(y, Output):
        y = g.constant(np.asarray(y, dtype=x.dtype))
    return g, x, y


def _binary(method):
    def f(x, y, name=None):
        g, x, y = _pair(x, y)
        return getattr(g, method)(x, y, name=name)
    f.__name__ = method
    return f


add = _binary("add")
subtract = _binary("sub")
multiply = _binary("mul")
divide = _binary("div")
maximum = _binary("maximum")
minimum = _binary("minimum")
pow = _binary("pow")  # noqa: A001 - TF's name
equal = _binary("equal")
less = _binary("less")
greater = _binary("greater")


def _unary(method):
    def f(x, name=None):
        return getattr(_graph(x), method)(x, name=name)
    f.__name__ = method
    return f


exp, log, sqrt, square, abs = (_unary(m) for m in ("exp", "log", "sqrt", "square", "abs"))  # noqa: A001


def concat(values, axis, name=None):
    g = _graph(*values)
    return g.concat(list(values), int(axis), name=name)


def expand_dims(input, axis, name=None):  # noqa: A002
    g = _graph(input)
    return g._out(lib.loom_expand_dims(g.p, input.c, int(axis), _b(name)))


def squeeze(input, axis=None, name=None):  # noqa: A002
    g = _graph(input)
    if axis is not None:  # loom's Squeeze (unknown dims allowed; a dim that is not 1 is an error naming it)
        axes = [int(axis)] if isinstance(axis, int) else [int(a) for a in axis]
        return g._out(lib.loom_squeeze(g.p, input.c, len(axes), (L.i64 * len(axes))(*axes), _b(name)))
    shape = list(input.shape)
    if any(d is None for d in shape):
        raise NotImplementedError("loom.tf: tf.squeeze of a tensor with unknown dims; use tf.reshape")
    axes = set(range(len(shape))) if axis is None else {a % len(shape) for a in ([axis] if isinstance(axis, int)
                                                                                 else axis)}
    keep = [d for i, d in enumerate(shape) if not (i in axes and d == 1)]
    return input.graph.reshape(input, keep, name=name)
