"""tf.nn: the activations (activation_fn=tf.nn.relu of a canned estimator
names loom's activation; called on a model_fn's tensor, one adds it to the
graph), softmax and sparse_softmax_cross_entropy_with_logits; the
convolution, pooling and normalization ops of _nn_ops.py."""
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
swish = silu = _Activation("swish")


class _LeakyRelu(_Activation):
    """tf.nn.leaky_relu(features, alpha=0.2, name=None)."""

    def __call__(self, features, alpha=0.2, name=None):
        from .ops import _g
        from .._lib import lib
        from .. import _b
        g = _g(features, "tf.nn.leaky_relu")
        return g._out(lib.loom_leaky_relu(g.p, features.c, float(alpha), _b(name)))


class _Gelu(_Activation):
    """tf.nn.gelu(features, approximate=False, name=None)."""

    def __call__(self, features, approximate=False, name=None):
        from .ops import _g
        from .._lib import lib
        from .. import _b
        g = _g(features, "tf.nn.gelu")
        return g._out(lib.loom_gelu(g.p, features.c, int(bool(approximate)), _b(name)))


leaky_relu = _LeakyRelu("leaky_relu")  # as an activation_fn: alpha 0.2, TF's default
gelu = _Gelu("gelu")  # as an activation_fn: the exact GELU, TF's default


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


from ._graph_ops import dropout  # noqa: E402
from ._variables import embedding_lookup  # noqa: E402
from ._array_ops import (log_softmax, sigmoid_cross_entropy_with_logits,  # noqa: E402
                         softmax_cross_entropy_with_logits, l2_normalize, bias_add, l2_loss)
from ._model_fn_ops import (top_k, in_top_k, zero_fraction, log_poisson_loss,  # noqa: E402
                             weighted_cross_entropy_with_logits)
from ._nn_ops import (conv2d, conv2d_transpose, max_pool2d, max_pool, avg_pool2d, avg_pool,  # noqa: E402
                      moments, batch_normalization)


def __getattr__(name):
    raise missing("nn.", name)
