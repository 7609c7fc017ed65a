"""The array ops that cut a tensor or pad it: tf.slice, tf.split,
tf.unstack, tf.pad (CONSTANT), on loom_slice, loom_split / loom_split_v,
loom_unstack and loom_pad; sizes and paddings are Python ints, as loom
builds the graph's shapes before it runs."""
import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Output, _b

_O, _G, _S = L.Output, L.vp, L.cs
L._d("loom_split", L.cint, _G, _O, L.cint, L.i64, L.P(_O), _S)
L._d("loom_split_v", L.cint, _G, _O, L.cint, L.P(L.i64), L.i64, L.P(_O), _S)
L._d("loom_unstack", L.cint, _G, _O, L.cint, L.i64, L.P(_O), _S)
L._d("loom_pad", _O, _G, _O, L.P(L.i64), L.P(L.i64), L.dbl, _S)


def _ints(v, what, arg):
    if isinstance(v, Output):
        raise NotImplementedError("loom.tf: %s(%s=<tensor>) is not supported: give %s as Python ints"
                                  % (what, arg, arg))
    return [int(x) for x in np.asarray(v).ravel()]


def _rank(x, what):
    if not isinstance(x, Output):
        raise NotImplementedError("loom.tf: %s takes a tensor of a traced function (Dataset.map, model_fn)" % what)
    return len(x.shape)


def slice(input_, begin, size, name=None):  # noqa: A001 - TF's name
    """tf.slice: the block from begin of size (-1: to the end) in each dim."""
    r = _rank(input_, "tf.slice")
    b, s = _ints(begin, "tf.slice", "begin"), _ints(size, "tf.slice", "size")
    if len(b) != r or len(s) != r:
        raise ValueError("tf.slice: begin and size need %d entries (the input's rank), got %d and %d"
                         % (r, len(b), len(s)))
    g = input_.graph
    return g._out(lib.loom_slice(g.p, input_.c, (L.i64 * r)(*b), (L.i64 * r)(*s), _b(name)))


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """tf.split: num equal pieces, or pieces of the listed sizes (one may be -1), along axis."""
    _rank(value, "tf.split")
    g = value.graph
    if isinstance(num_or_size_splits, Output):
        raise NotImplementedError("loom.tf: tf.split(num_or_size_splits=<tensor>) is not supported: give an int "
                                  "or a list of ints")
    if isinstance(num_or_size_splits, (int, np.integer)):
        n = int(num_or_size_splits)
        outs = (_O * max(1, n))()
        rc = lib.loom_split(g.p, value.c, n, int(axis), outs, _b(name))
    else:
        sizes = _ints(num_or_size_splits, "tf.split", "num_or_size_splits")
        n = len(sizes)
        outs = (_O * max(1, n))()
        rc = lib.loom_split_v(g.p, value.c, n, (L.i64 * max(1, n))(*sizes), int(axis), outs, _b(name))
    g._check()
    if rc:
        raise ValueError("tf.split: the graph refused the split (%d)" % rc)
    return [Output(g, outs[i]) for i in range(n)]


def unstack(value, num=None, axis=0, name="unstack"):
    """tf.unstack: the slices along axis (whose size must be known, or num)."""
    r = _rank(value, "tf.unstack")
    g = value.graph
    ax = int(axis) % r if r else 0
    n = value.shape[ax] if num is None else int(num)
    if n is None:
        raise ValueError("Cannot infer argument `num` from shape %s" % (value.shape,))
    outs = (_O * max(1, n))()
    rc = lib.loom_unstack(g.p, value.c, n, int(axis), outs, _b(name))
    g._check()
    if rc:
        raise ValueError("tf.unstack: the graph refused it (%d)" % rc)
    return [Output(g, outs[i]) for i in range(n)]


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    """tf.pad: paddings [[before, after]] per dim, CONSTANT mode."""
    r = _rank(tensor, "tf.pad")
    if str(mode).upper() != "CONSTANT":
        raise NotImplementedError("loom.tf: tf.pad(mode=%r) is not supported: CONSTANT only" % (mode,))
    p = np.asarray(_ints(paddings, "tf.pad", "paddings")).reshape(-1, 2) if r else np.zeros((0, 2), int)
    if p.shape[0] != r:
        raise ValueError("tf.pad: paddings must be [%d, 2] (the input's rank), got %d rows" % (r, p.shape[0]))
    if (p < 0).any():
        raise ValueError("tf.pad: paddings must be >= 0, got %s" % p.tolist())
    if isinstance(constant_values, Output):
        raise NotImplementedError("loom.tf: tf.pad(constant_values=<tensor>) is not supported: give a number")
    g = tensor.graph
    return g._out(lib.loom_pad(g.p, tensor.c, (L.i64 * max(1, r))(*p[:, 0]), (L.i64 * max(1, r))(*p[:, 1]),
                               float(constant_values), _b(name)))
