"""Gradients as a custom model_fn handles them between
Optimizer.compute_gradients and apply_gradients: tf.IndexedSlices (a
gradient that stays sparse, the rows an embedding lookup touched, as TF's),
tf.clip_by_global_norm, tf.linalg.global_norm (tf.compat.v1.global_norm)
and tf.clip_by_norm, on loom_clip_gradients_by_global_norm,
loom_global_norm and loom_clip_by_norm; and the conversion of a gradient
list to loom_gradient (loom_autodiff.h) and back."""
import ctypes as C

from .. import _lib as L
from .._lib import lib
from .. import Output, _b


class Gradient(C.Structure):  # loom_gradient
    _fields_ = [("values", L.Output), ("indices", L.Output)]


L._d("loom_gradients_sparse", L.cint, L.vp, L.cint, L.P(L.Output), L.P(L.Output), L.cint, L.P(L.Output),
     L.P(Gradient), L.vp)
L._d("loom_optimizer_apply_gradients", L.vp, L.vp, L.vp, L.cint, L.P(Gradient), L.P(L.vp), L.vp, L.cs)
L._d("loom_clip_gradients_by_global_norm", None, L.vp, L.cint, L.P(Gradient), L.dbl, L.P(Gradient), L.P(L.Output))
L._d("loom_global_norm", L.Output, L.vp, L.cint, L.P(L.Output), L.cs)
L._d("loom_clip_by_norm", L.Output, L.vp, L.Output, L.dbl, L.cs)


class IndexedSlices:
    """tf.IndexedSlices: rows `indices` of a tensor of shape dense_shape
    hold `values` (the gradient of an embedding lookup's table)."""

    def __init__(self, values, indices, dense_shape=None):
        self.values, self.indices, self.dense_shape = values, indices, dense_shape

    @property
    def graph(self):
        return self.values.graph

    @property
    def dtype(self):
        return self.values.dtype

    def __repr__(self):
        return "<loom.tf IndexedSlices values=%r indices=%r>" % (self.values, self.indices)


def to_c(grads, what):
    """(graph or None, loom_gradient array) of a list of gradients: a
    tensor, an IndexedSlices or None (no gradient)."""
    arr = (Gradient * max(1, len(grads)))()
    graph = None
    for i, t in enumerate(grads):
        if t is None:
            continue
        if isinstance(t, IndexedSlices):
            arr[i].values, arr[i].indices = t.values.c, t.indices.c
        elif isinstance(t, Output):
            arr[i].values = t.c
        else:
            raise TypeError("%s: gradient %d is %r, not a tensor, an IndexedSlices or None" % (what, i, t))
        if graph is not None and t.graph.p != graph.p:
            raise ValueError("%s: the gradients are not all tensors of one model_fn" % what)
        graph = t.graph
    return graph, arr


def from_c(graph, arr, n, like=None):
    """The gradients of a loom_gradient array (an IndexedSlices keeps the
    dense_shape of `like`'s entry)."""
    out = []
    for i in range(n):
        if not arr[i].values.node:
            out.append(None)
        elif arr[i].indices.node:
            out.append(IndexedSlices(Output(graph, arr[i].values), Output(graph, arr[i].indices),
                                     getattr(like[i], "dense_shape", None) if like else None))
        else:
            out.append(Output(graph, arr[i].values))
    return out


def _number(x, what, arg):
    if isinstance(x, Output):
        raise NotImplementedError("loom.tf: %s(%s=<tensor>) is not supported: give %s as a Python number"
                                  % (what, arg, arg))
    return float(x)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """tf.clip_by_global_norm: (each of t_list times clip_norm /
    max(global_norm, clip_norm), global_norm of t_list); None entries stay
    None, IndexedSlices keep their indices."""
    what = "tf.clip_by_global_norm"
    if use_norm is not None:
        raise NotImplementedError("loom.tf: %s(use_norm=...) is not supported: the norm of t_list is used" % what)
    if isinstance(t_list, (Output, IndexedSlices)) or not hasattr(t_list, "__iter__"):
        raise TypeError("t_list should be a sequence")
    t_list = list(t_list)
    clip = _number(clip_norm, what, "clip_norm")
    if clip < 0:
        raise ValueError("%s: clip_norm must be >= 0, got %r" % (what, clip_norm))
    graph, arr = to_c(t_list, what)
    if graph is None:
        raise ValueError("%s: t_list has no tensor" % what)
    out = (Gradient * max(1, len(t_list)))()
    norm = L.Output()
    lib.loom_clip_gradients_by_global_norm(graph.p, len(t_list), arr, clip, out, C.byref(norm))
    graph._check()
    return from_c(graph, out, len(t_list), t_list), Output(graph, norm)


def global_norm(t_list, name=None):
    """tf.linalg.global_norm: sqrt of the sum of every squared element of
    t_list (None entries skipped; an IndexedSlices counts its values)."""
    t_list = [t.values if isinstance(t, IndexedSlices) else t for t in t_list if t is not None]
    if not t_list:
        raise ValueError("tf.linalg.global_norm: t_list has no tensor")
    graph = t_list[0].graph
    out = lib.loom_global_norm(graph.p, len(t_list), (L.Output * len(t_list))(*[t.c for t in t_list]), _b(name))
    graph._check()
    return Output(graph, out)


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """tf.clip_by_norm over the whole tensor (axes=None)."""
    what = "tf.clip_by_norm"
    if axes is not None:
        raise NotImplementedError("loom.tf: %s(axes=...) is not supported: the norm of the whole tensor is used"
                                  % what)
    if isinstance(t, IndexedSlices):
        return IndexedSlices(clip_by_norm(t.values, clip_norm, None, name), t.indices, t.dense_shape)
    out = lib.loom_clip_by_norm(t.graph.p, t.c, _number(clip_norm, what, "clip_norm"), _b(name))
    t.graph._check()
    return Output(t.graph, out)
