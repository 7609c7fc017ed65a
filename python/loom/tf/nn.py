"""tf.nn: the activations canned estimators take (activation_fn=tf.nn.relu).
They name loom's activation; calling one on a tensor (a model_fn of TF ops)
is not supported yet."""
from ._surface import missing


class _Activation:
    def __init__(self, name):
        self.__name__ = name
        self._loom = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError("loom.tf: tf.nn.%s(...) on tensors is not supported (a model_fn of TF ops is not "
                                  "traced yet); pass it as activation_fn of a canned estimator" % self.__name__)

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


def __getattr__(name):
    raise missing("nn.", name)
