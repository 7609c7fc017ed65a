"""Ops and graph queries TF Estimator model_fns use, with TF 2.15's names,
arguments and semantics: tf.compat.v1.trainable_variables /
global_variables (the model_fn graph's variable collections,
loom_trainable_variables / loom_global_variables, in creation order, with
TF's names "dense/kernel:0"), tf.compat.v1.losses.get_regularization_losses
/ get_regularization_loss; tf.math.top_k / tf.nn.top_k (loom_top_k: ties
give the lower index first), tf.math.in_top_k (TF 2's argument order) and
tf.compat.v1.nn.in_top_k (TF 1's), tf.nn.zero_fraction,
tf.nn.log_poisson_loss and tf.nn.weighted_cross_entropy_with_logits,
composed of loom's math, array and reduction ops (so their gradients are
loom's autodiff of those ops)."""
import math
import re

import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Output, _b
from . import dtypes as _dt
from .math_ops import _graph

_O, _G, _S = L.Output, L.vp, L.cs
L._d("loom_trainable_variables", L.P(L.vp), _G, L.P(L.cint))
L._d("loom_global_variables", L.P(L.vp), _G, L.P(L.cint))
L._d("loom_variable_name", _S, L.vp)
L._d("loom_get_collection", L.P(_O), _G, _S, L.P(L.cint))
L._d("loom_top_k", L.cint, _G, _O, L.i64, L.P(_O), L.P(_O), _S)


class VariableTensor(Output):
    """A variable of the model_fn graph as tf.compat.v1.trainable_variables()
    lists it: its value as a tensor of the model_fn (usable in any op) whose
    .name is TF's variable name "<scope>/<name>:0"."""

    __slots__ = ("_var_name",)

    def __init__(self, graph, c, var_name):
        super().__init__(graph, c)
        self._var_name = var_name

    @property
    def name(self):
        return self._var_name + ":0"

    def __repr__(self):
        return "<loom.tf variable %r shape=%s dtype=%s>" % (self.name, self.shape, np.dtype(self.dtype).name)


def _model_graph(what):
    from . import ops as _ops
    if not _ops._graphs:
        raise NotImplementedError("loom.tf: %s outside a model_fn: loom.tf knows a graph's variables only while "
                                  "its model_fn (or a hook's begin()) runs" % what)
    return _ops._graphs[-1]


def _variables(fn, what, scope):
    g = _model_graph(what)
    n = L.cint()
    arr = fn(g.p, L.P(L.cint)(n))
    out = []
    for i in range(n.value):
        v = arr[i]
        name = lib.loom_variable_name(v).decode()
        if scope is not None and not re.match(scope, name):
            continue
        out.append(VariableTensor(g, lib.loom_variable_output(v), name))
    return out


def trainable_variables(scope=None):
    """tf.compat.v1.trainable_variables: the model_fn graph's trainable
    variables in creation order; scope keeps those whose name re.match-es it."""
    return _variables(lib.loom_trainable_variables, "tf.compat.v1.trainable_variables", scope)


def global_variables(scope=None):
    """tf.compat.v1.global_variables: every variable of GLOBAL_VARIABLES in
    creation order (global_step first, as the Estimator creates it before the
    model_fn); scope keeps those whose name re.match-es it."""
    return _variables(lib.loom_global_variables, "tf.compat.v1.global_variables", scope)


def collection_outputs(g, key, scope=None):
    """The tensors of collection key of g (scope: re.match on their names)."""
    n = L.cint()
    arr = lib.loom_get_collection(g.p, _b(key), L.P(L.cint)(n))
    out = [Output(g, arr[i]) for i in range(n.value)]
    return [o for o in out if scope is None or re.match(scope, o.name)]


L._d("loom_add_to_collection", None, L.vp, L.cs, L.Output)


def add_to_collection(name, value):
    """tf.compat.v1.add_to_collection of a tensor of the model_fn (what
    get_collection reads back for GraphKeys.LOSSES and REGULARIZATION_LOSSES)."""
    g = _model_graph("tf.compat.v1.add_to_collection")
    if not isinstance(value, Output) or value.graph is not g:
        raise NotImplementedError("loom.tf: tf.compat.v1.add_to_collection(%r, %r): loom's collections hold tensors "
                                  "of the model_fn" % (name, value))
    lib.loom_add_to_collection(g.p, _b(str(name)), value.c)
    g._check()


def add_loss(loss, loss_collection="losses"):
    """tf.compat.v1.losses.add_loss: loss into loss_collection
    (GraphKeys.LOSSES; None adds it nowhere)."""
    if loss_collection:
        add_to_collection(loss_collection, loss)


def get_regularization_losses(scope=None):
    """tf.compat.v1.losses.get_regularization_losses: the tensors of
    GraphKeys.REGULARIZATION_LOSSES (what the layers' and get_variable's
    regularizers and add_to_collection put there; empty when none)."""
    g = _model_graph("tf.compat.v1.losses.get_regularization_losses")
    return collection_outputs(g, "regularization_losses", scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """tf.compat.v1.losses.get_regularization_loss: the sum of
    get_regularization_losses(scope), or the float32 constant 0.0 when there
    is none, as TF."""
    losses = get_regularization_losses(scope)
    g = _model_graph("tf.compat.v1.losses.get_regularization_loss")
    if not losses:
        return g.constant(np.float32(0.0), name=name)
    total = losses[0]
    for x in losses[1:]:
        total = g.add(total, x)
    return g.identity(total, name=name)


def _static_k(k, what):
    if isinstance(k, Output):
        raise NotImplementedError("loom.tf: %s(k=<tensor>) is not supported: give k as a Python int" % what)
    try:
        k = int(k)
    except (TypeError, ValueError):
        raise TypeError("%s: k must be an int, got %r" % (what, k)) from None
    if k < 0:
        raise ValueError("%s: k must be non-negative, got %d" % (what, k))
    return k


def top_k(input, k=1, sorted=True, index_type=_dt.int32, name=None):  # noqa: A002 - TF's argument names
    """tf.math.top_k / tf.nn.top_k: (values, indices) of the k largest entries
    along the last dimension, in descending order; equal values give the
    lower index first (as TF). sorted=False returns the same entries (in
    that sorted order, one of the orders TF allows)."""
    what = "tf.math.top_k"
    g = _graph(input)
    if not isinstance(input, Output):
        raise TypeError("%s: input must be a tensor of the model_fn, got %r" % (what, input))
    k = _static_k(k, what)
    if len(input.shape) < 1:
        raise ValueError("%s: input must have at least 1 dimension, got a scalar" % what)
    last = input.shape[-1]
    if last is not None and k > last:
        raise ValueError("%s: input must have at least k=%d columns, got %d (shape %s)" % (what, k, last,
                                                                                            input.shape))
    it = np.dtype(_dt.as_dtype(index_type).as_numpy_dtype)
    if it not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError("%s: index_type must be tf.int32 or tf.int64, got %r" % (what, index_type))
    values, indices = L.Output(), L.Output()
    lib.loom_top_k(g.p, input.c, k, L.P(L.Output)(values), L.P(L.Output)(indices), _b(name))
    g._check()
    vals, idx = Output(g, values), Output(g, indices)
    if it == np.dtype(np.int64):
        idx = g.cast(idx, np.int64)
    return TopKV2(vals, idx)


class TopKV2(tuple):
    """top_k's result: a (values, indices) pair with .values and .indices, as TF's named tuple."""

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def _in_top_k(predictions, targets, k, name, what):
    if not isinstance(predictions, Output):
        raise TypeError("%s: predictions must be a tensor of the model_fn, got %r" % (what, predictions))
    g = predictions.graph
    from ._array_ops import one_hot, where, zeros_like, logical_and, not_equal
    from .ops import cast, reduce_sum
    shape = predictions.shape
    if len(shape) != 2:
        raise ValueError("%s: predictions must be 2-D [batch_size, num_classes], got shape %s" % (what, shape))
    if shape[1] is None:
        raise NotImplementedError("loom.tf: %s: the number of classes (predictions' last dimension) must be "
                                  "known when building" % what)
    if not isinstance(targets, Output):
        targets = g.constant(np.asarray(targets, np.int32))
    if np.dtype(targets.dtype) not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError("%s: targets must be int32 or int64, got %s" % (what, np.dtype(targets.dtype).name))
    if len(targets.shape) != 1:
        raise ValueError("%s: targets must be 1-D [batch_size], got shape %s" % (what, targets.shape))
    p = predictions if np.dtype(predictions.dtype) == np.dtype(np.float32) else cast(predictions, _dt.float32)
    hot = one_hot(targets, int(shape[1]), dtype=_dt.float32)  # all-off rows for targets outside [0, classes)
    is_target = g.equal(hot, g.constant(np.float32(1)))
    target_pred = reduce_sum(where(is_target, p, zeros_like(p)), axis=1, keepdims=True)
    valid = g.equal(reduce_sum(hot, axis=1), g.constant(np.float32(1)))
    diff = g.sub(p, p)  # 0 where finite, NaN for inf and NaN
    nonfinite = reduce_sum(cast(not_equal(diff, g.constant(np.float32(0))), _dt.float32), axis=1)
    finite = g.equal(nonfinite, g.constant(np.float32(0)))
    above = reduce_sum(cast(g.greater(p, target_pred), _dt.float32), axis=1)
    if isinstance(k, Output):
        kk = cast(k, _dt.float32)
    else:
        kk = g.constant(np.float32(_static_k(k, what)))
    return logical_and(logical_and(valid, finite), g.less(above, kk), name=name)


def in_top_k(targets, predictions, k, name=None):
    """tf.math.in_top_k (TF 2's argument order): bool [batch], True where
    the target's prediction is among the k largest of its row: fewer than k
    predictions of the row are strictly greater (so ties at the k-th value
    count as in); False for a target outside [0, num_classes) and for a row
    with a non-finite prediction, as TF."""
    return _in_top_k(predictions, targets, k, name, "tf.math.in_top_k")


def in_top_k_v1(predictions, targets, k, name=None):
    """tf.compat.v1.nn.in_top_k (TF 1's argument order: predictions first)."""
    return _in_top_k(predictions, targets, k, name, "tf.compat.v1.nn.in_top_k")


def zero_fraction(value, name=None):
    """tf.nn.zero_fraction: the fraction of entries of value equal to zero (float32 scalar)."""
    from .ops import cast, reduce_mean
    g = _graph(value)
    z = g.equal(value, g.constant(np.zeros((), value.dtype)))
    return reduce_mean(cast(z, _dt.float32), name=name)


def _like(g, v, ref):
    return v if isinstance(v, Output) else g.constant(np.asarray(v, ref.dtype))


def log_poisson_loss(targets, log_input, compute_full_loss=False, name=None):
    """tf.nn.log_poisson_loss: exp(log_input) - log_input * targets
    elementwise; with compute_full_loss the Stirling term targets * log(targets)
    - targets + 0.5 * log(2 pi targets) is added where targets > 1 (0 for
    targets in [0, 1]), as TF."""
    g = _graph(targets, log_input)
    log_input = _like(g, log_input, targets)
    targets = _like(g, targets, log_input)
    if targets.shape != log_input.shape and None not in targets.shape + log_input.shape:
        raise ValueError("tf.nn.log_poisson_loss: log_input and targets must have the same shape (%s vs %s)"
                         % (log_input.shape, targets.shape))
    from ._array_ops import where, zeros_like, logical_and, greater_equal, less_equal
    from .math_ops import exp, log
    loss = g.sub(exp(log_input), g.mul(log_input, targets))
    if not compute_full_loss:
        return g.identity(loss, name=name) if name else loss
    dt = targets.dtype
    c = lambda v: g.constant(np.asarray(v, dt))  # noqa: E731
    stirling = g.add(g.sub(g.mul(targets, log(targets)), targets), g.mul(c(0.5), log(g.mul(c(2 * math.pi), targets))))
    small = logical_and(greater_equal(targets, c(0)), less_equal(targets, c(1)))
    return g.add(loss, where(small, zeros_like(targets), stirling), name=name)


def weighted_cross_entropy_with_logits(labels, logits, pos_weight, name=None):
    """tf.nn.weighted_cross_entropy_with_logits: sigmoid cross entropy with
    the positive term weighted by pos_weight, in TF's stable form
    (1 - labels) * logits + (1 + (pos_weight - 1) * labels) *
    (log1p(exp(-|logits|)) + max(-logits, 0))."""
    what = "tf.nn.weighted_cross_entropy_with_logits"
    if labels is None or logits is None or pos_weight is None:
        raise ValueError("%s: labels, logits and pos_weight are required" % what)
    g = _graph(labels, logits, pos_weight)
    logits = _like(g, logits, labels if isinstance(labels, Output) else pos_weight)
    labels = _like(g, labels, logits)
    pos_weight = _like(g, pos_weight, logits)
    if labels.shape != logits.shape and None not in labels.shape + logits.shape:
        raise ValueError("%s: logits and labels must have the same shape (%s vs %s)"
                         % (what, logits.shape, labels.shape))
    from ._array_ops import log1p
    from .math_ops import exp, abs as _abs
    one = g.constant(np.ones((), logits.dtype))
    log_weight = g.add(one, g.mul(g.sub(pos_weight, one), labels))
    soft = g.add(log1p(exp(g.neg(_abs(logits)))), g.relu(g.neg(logits)))
    return g.add(g.mul(g.sub(one, labels), logits), g.mul(log_weight, soft), name=name)


def weighted_cross_entropy_with_logits_v1(labels=None, logits=None, pos_weight=None, name=None, targets=None):
    """tf.compat.v1.nn.weighted_cross_entropy_with_logits (targets: TF 1's name of labels)."""
    if labels is not None and targets is not None:
        raise ValueError("tf.compat.v1.nn.weighted_cross_entropy_with_logits: give labels or targets, not both")
    return weighted_cross_entropy_with_logits(labels if labels is not None else targets, logits, pos_weight, name)



def add_n(inputs, name=None):
    """tf.math.add_n / tf.add_n: the elementwise sum of a list of tensors of
    one shape and dtype (a chain of loom adds)."""
    what = "tf.math.add_n"
    if isinstance(inputs, Output):
        inputs = [inputs]
    inputs = list(inputs) if inputs is not None else []
    if not inputs or not all(isinstance(x, Output) for x in inputs):
        raise ValueError("%s: inputs must be a non-empty list of tensors of the model_fn, got %r" % (what, inputs))
    shapes = {x.shape for x in inputs if None not in x.shape}
    if len(shapes) > 1:
        raise ValueError("%s: inputs must have the same shape, got %s" % (what, [x.shape for x in inputs]))
    if len({np.dtype(x.dtype) for x in inputs}) > 1:
        raise ValueError("%s: inputs must have the same dtype, got %s" % (what, [np.dtype(x.dtype).name
                                                                                for x in inputs]))
    g = inputs[0].graph
    total = inputs[0]
    for x in inputs[1:]:
        total = g.add(total, x)
    return g.identity(total, name=name)
