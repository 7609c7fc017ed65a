"""tf.keras.regularizers (L1, L2, L1L2 and the functions l1, l2, l1_l2)
and what the layers' kernel_regularizer / bias_regularizer take: a layer
hands the penalty to loom_layers_* (loom_regularizer), which adds its loss
to GraphKeys.REGULARIZATION_LOSSES as TF's layers do; calling a regularizer
on a tensor of a model_fn gives the penalty itself. Keras's L2 is
l2 * sum(w^2) (loom_regularizer's l2 scale multiplies tf.nn.l2_loss, half of
that sum)."""
import math

import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Output, _b

L._d("loom_l1_l2_regularizer", L.Regularizer, L.dbl, L.dbl)
L._d("loom_regularizer_apply", L.Output, L.vp, L.P(L.Regularizer), L.Output, L.cs)


def _penalty(x):
    if x is None:
        return 0.01
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError("Value %s is not a valid regularization penalty number, expected an int or float value."
                         % (x,))
    if math.isinf(x) or math.isnan(x):
        raise ValueError("Value %s is not a valid regularization penalty number, an infinite number or NaN are not "
                         "valid values." % (x,))
    return float(np.float32(x))  # Keras keeps the penalty as a float32


class Regularizer:
    """tf.keras.regularizers.Regularizer: the base of L1, L2 and L1L2
    (a subclass with its own __call__ is not one loom's layers take)."""
    l1 = 0.0
    l2 = 0.0

    def _c(self):
        return lib.loom_l1_l2_regularizer(self.l1, 2.0 * self.l2)

    def __call__(self, x):
        if not isinstance(x, Output):
            raise NotImplementedError("loom.tf: tf.keras.regularizers.%s on %s: call it on a tensor of a model_fn"
                                      % (type(self).__name__, type(x).__name__))
        r = self._c()
        out = lib.loom_regularizer_apply(x.graph.p, L.P(L.Regularizer)(r), x.c, _b(None))
        x.graph._check()
        if not out.node:  # every scale 0: Keras's penalty is a zero of x's dtype
            return x.graph.constant(np.zeros((), x.dtype), name="zero_penalty")
        return Output(x.graph, out)

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return "<loom.tf keras.regularizers.%s %s>" % (type(self).__name__, self.get_config())


class L1L2(Regularizer):
    def __init__(self, l1=0.0, l2=0.0):
        self.l1 = _penalty(0.0 if l1 is None else l1)
        self.l2 = _penalty(0.0 if l2 is None else l2)


class L1(Regularizer):
    def __init__(self, l1=0.01, **kwargs):
        l1 = kwargs.pop("l", l1)  # Keras's backwards-compatible name
        if kwargs:
            raise TypeError("Argument(s) not recognized: %s" % (kwargs,))
        self.l1 = _penalty(l1)

    def get_config(self):
        return {"l1": self.l1}


class L2(Regularizer):
    def __init__(self, l2=0.01, **kwargs):
        l2 = kwargs.pop("l", l2)
        if kwargs:
            raise TypeError("Argument(s) not recognized: %s" % (kwargs,))
        self.l2 = _penalty(l2)

    def get_config(self):
        return {"l2": self.l2}


def l1_l2(l1=0.01, l2=0.01):
    """tf.keras.regularizers.l1_l2 (both penalties 0.01 by default, unlike L1L2's 0)."""
    return L1L2(l1=l1, l2=l2)


l1, l2 = L1, L2
_NAMES = {"l1": L1, "l2": L2, "l1_l2": l1_l2, "L1": L1, "L2": L2, "L1L2": L1L2}


def get(identifier):
    """tf.keras.regularizers.get: None, a regularizer, or its name."""
    if identifier is None or isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str) and identifier in _NAMES:
        return _NAMES[identifier]()
    if isinstance(identifier, dict) and identifier.get("class_name") in _NAMES:
        return _NAMES[identifier["class_name"]](**identifier.get("config", {}))
    raise ValueError("Could not interpret regularizer identifier: %r" % (identifier,))


def as_regularizer(r, what, arg):
    """A layer's kernel_regularizer / bias_regularizer -> loom_regularizer,
    or None for None."""
    if r is None:
        return None
    if isinstance(r, str):
        r = get(r)
    if not isinstance(r, Regularizer) or type(r).__call__ is not Regularizer.__call__:
        raise NotImplementedError("loom.tf: %s(%s=%r): loom's layers take tf.keras.regularizers.l1, l2, l1_l2 "
                                  "(L1, L2, L1L2); for another penalty, compute it from "
                                  "tf.compat.v1.trainable_variables() in the model_fn and add it to the loss"
                                  % (what, arg, r))
    return r._c()
