"""tf.keras.optimizers (the legacy ones TF 2.15's canned estimators take):
Adagrad, Adam, Ftrl, RMSprop, SGD with a learning_rate. A canned estimator's
optimizer is a name, an instance or a callable returning one (TF's rule);
an argument loom's canned optimizers do not take raises NotImplementedError.
loom.tf's Keras Sequential also takes RMSprop's rho, momentum, epsilon and
centered (Keras' RMSprop: the mean square starts at 0)."""
from .. import _lib as L
from ._surface import missing


class Optimizer:
    _loom = None
    _defaults = {}
    _keras_takes = ()  # the arguments loom.tf's Keras Sequential takes other than at their defaults

    def __init__(self, learning_rate=None, **kwargs):
        self._args = {}  # the arguments given other than at their defaults
        for k, v in kwargs.items():
            if k in ("name",):
                continue
            if k not in self._defaults:
                raise TypeError("%s: unexpected argument %r" % (type(self).__name__, k))
            if v != self._defaults[k]:
                if k in self._keras_takes:
                    self._args[k] = v
                    continue
                raise NotImplementedError("loom.tf: %s(%s=%r): loom's canned %s takes TF's default %s=%r only"
                                          % (type(self).__name__, k, v, self._loom, k, self._defaults[k]))
        if learning_rate is not None and not isinstance(learning_rate, (int, float)):
            raise NotImplementedError("loom.tf: %s(learning_rate=%r): a learning-rate schedule is not supported; "
                                      "give a number" % (type(self).__name__, learning_rate))
        if learning_rate is not None and learning_rate <= 0:
            raise ValueError("%s: learning_rate must be > 0, got %r" % (type(self).__name__, learning_rate))
        self.learning_rate = learning_rate


class Adagrad(Optimizer):
    _loom = "Adagrad"
    _defaults = {"initial_accumulator_value": 0.1, "epsilon": 1e-7}


class Adam(Optimizer):
    _loom = "Adam"
    _defaults = {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7, "amsgrad": False}


class Ftrl(Optimizer):
    _loom = "Ftrl"
    _defaults = {"learning_rate_power": -0.5, "initial_accumulator_value": 0.1, "l1_regularization_strength": 0.0,
                 "l2_regularization_strength": 0.0, "l2_shrinkage_regularization_strength": 0.0, "beta": 0.0}


class RMSprop(Optimizer):
    _loom = "RMSProp"
    _defaults = {"rho": 0.9, "momentum": 0.0, "epsilon": 1e-7, "centered": False}
    _keras_takes = ("rho", "momentum", "epsilon", "centered")

    def _options(self):
        """The loom_rmsprop_options of Keras' RMSprop with these arguments (the mean square starts at 0)."""
        from .. import _lib_keras as K
        a = dict(self._defaults, **self._args)
        if not 0.0 <= a["rho"] <= 1.0 or a["momentum"] < 0 or a["epsilon"] < 0:
            raise ValueError("RMSprop: rho must be in [0, 1], momentum and epsilon >= 0; got rho=%r momentum=%r "
                             "epsilon=%r" % (a["rho"], a["momentum"], a["epsilon"]))
        o = K.lib.loom_rmsprop_options_default()
        o.decay, o.momentum, o.epsilon = float(a["rho"]), float(a["momentum"]), float(a["epsilon"])
        o.centered, o.initial_rms_value = int(bool(a["centered"])), 0.0
        return o


class SGD(Optimizer):
    _loom = "SGD"
    _defaults = {"momentum": 0.0, "nesterov": False}


_NAMES = {"adagrad": "Adagrad", "adam": "Adam", "ftrl": "Ftrl", "rmsprop": "RMSProp", "sgd": "SGD"}


def canned_spec(optimizer, what):
    """A loom_canned_optimizer for a canned estimator's optimizer argument:
    a name (learning rate 0: the estimator's default, as TF), an instance, or
    a callable returning one."""
    o = L.CannedOptimizer()
    if isinstance(optimizer, str):
        if optimizer.lower() not in _NAMES:
            raise ValueError("%s: unknown optimizer %r (Adagrad, Adam, Ftrl, RMSProp, SGD)" % (what, optimizer))
        o.name, o.learning_rate = _NAMES[optimizer.lower()].encode(), 0.0
        return o
    if callable(optimizer) and not isinstance(optimizer, Optimizer):
        optimizer = optimizer()
    if not isinstance(optimizer, Optimizer):
        raise NotImplementedError("loom.tf: %s=%r: give a name or a tf.keras.optimizers instance (Adagrad, Adam, "
                                  "Ftrl, RMSprop, SGD)" % (what, optimizer))
    for k, v in optimizer._args.items():
        raise NotImplementedError("loom.tf: %s(%s=%r): loom's canned %s takes TF's default %s=%r only"
                                  % (type(optimizer).__name__, k, v, optimizer._loom, k, optimizer._defaults[k]))
    o.name = optimizer._loom.encode()
    o.learning_rate = float(optimizer.learning_rate or 0.0)
    if optimizer.learning_rate is None:  # the Keras optimizer's own default
        o.learning_rate = 0.01 if optimizer._loom == "SGD" else 0.001
    return o


def __getattr__(name):
    raise missing("keras.optimizers.", name)
