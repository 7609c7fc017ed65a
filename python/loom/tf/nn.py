"""tf.nn: the activations (activation_fn=tf.nn.relu of a canned estimator
names loom's activation; called on a model_fn's tensor, one adds it to the
graph), softmax and sparse_softmax_cross_entropy_with_logits."""
from ._surface import missing


class _Activation:
    def __init__(self, name):
        self.__name__ = name
        self._loom = name

    def __call__(self, features, name=None):
        from .ops import activation
        return activation(self._loom, features, name)

    def __repr__(self):
        return "<loom.tf activation %s>" % self.__name__


relu = _Activation("relu")
relu6 = _Activation("relu6")
elu = _Activation("elu")
selu = _Activation("selu")
tanh = _Activation("tanh")
sigmoid = _Activation("sigmoid")
softplus = _Activation("softplus")
softsign = _Activation("softsign")
leaky_relu = _Activation("leaky_relu")
swish = silu = _Activation("swish")
gelu = _Activation("gelu")


def softmax(logits, axis=None, name=None):
    from .ops import softmax as f
    return f(logits, axis, name)


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    from .ops import _g
    return _g(logits, "tf.nn.sparse_softmax_cross_entropy_with_logits").sparse_softmax_cross_entropy_with_logits(
        logits, labels, name=name)


def activation_name(fn, what):
    """loom's name of an activation_fn: a tf.nn activation or its name."""
    name = getattr(fn, "_loom", None) or (fn if isinstance(fn, str) else None)
    if name is None:
        raise NotImplementedError("loom.tf: %s=%r: give a tf.nn activation (tf.nn.relu, tf.nn.tanh, ...) or its "
                                  "name; a Python function of TF ops is not supported" % (what, fn))
    from .._lib import lib
    if not lib.loom_activation_valid(name.encode()):
        raise ValueError("%s: unknown activation %r" % (what, name))
    return name


from ._array_ops import (log_softmax, sigmoid_cross_entropy_with_logits,  # noqa: E402
                         softmax_cross_entropy_with_logits, l2_normalize, bias_add, l2_loss)


def __getattr__(name):
    raise missing("nn.", name)
