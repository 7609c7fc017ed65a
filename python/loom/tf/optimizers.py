"""tf.keras.optimizers (the legacy ones TF 2.15's canned estimators take):
Adagrad, Adam, Ftrl, RMSprop, SGD, and tf.keras.optimizers.schedules. A
canned estimator's optimizer is a name, an instance or a callable returning
one (TF's rule). A name, or an instance at a constant learning rate and
TF's default arguments, is loom's canned optimizer of that name; otherwise
(a callable, which TF calls while it builds the training graph, so its
learning rate may be a tf.compat.v1.train.*_decay of get_global_step(); a
schedule, evaluated at the global step, as TF's canned estimators set the
optimizer's iterations to it; or arguments Adagrad's
initial_accumulator_value, Adam's beta_1 / beta_2 / epsilon, Ftrl's
learning_rate_power / initial_accumulator_value / l1, l2 and l2 shrinkage
strengths, RMSprop's rho / momentum / epsilon / centered) the estimator
calls back into Python for the optimizer of each training graph
(loom_canned_optimizer's fn). Another argument raises NotImplementedError.
loom.tf's Keras Sequential takes RMSprop's rho, momentum, epsilon and
centered (Keras' RMSprop: the mean square starts at 0)."""
import ctypes as C

import numpy as np

from .. import _lib as L
from .. import Output
from ._surface import missing, Namespace


class Optimizer:
    _loom = None
    _defaults = {}
    _keras_takes = ()  # the arguments loom.tf's Keras Sequential takes other than at their defaults
    _canned_takes = ()  # the arguments a canned estimator's optimizer (through Python) takes

    def __init__(self, learning_rate=None, **kwargs):
        self._args = {}  # the arguments given other than at their defaults
        for k, v in kwargs.items():
            if k in ("name",):
                continue
            if k not in self._defaults:
                raise TypeError("%s: unexpected argument %r" % (type(self).__name__, k))
            if v != self._defaults[k]:
                if k in self._keras_takes or k in self._canned_takes:
                    self._args[k] = v
                    continue
                raise NotImplementedError("loom.tf: %s(%s=%r): loom's canned %s takes TF's default %s=%r only"
                                          % (type(self).__name__, k, v, self._loom, k, self._defaults[k]))
        if learning_rate is not None and not isinstance(learning_rate, (int, float, Output, LearningRateSchedule)):
            raise NotImplementedError("loom.tf: %s(learning_rate=%r): give a number, a tensor (a "
                                      "tf.compat.v1.train.*_decay of get_global_step(), in a callable the estimator "
                                      "calls) or a tf.keras.optimizers.schedules schedule"
                                      % (type(self).__name__, learning_rate))
        if isinstance(learning_rate, (int, float)) and learning_rate <= 0:
            raise ValueError("%s: learning_rate must be > 0, got %r" % (type(self).__name__, learning_rate))
        self.learning_rate = learning_rate

    def _constant(self):
        """True when loom's canned optimizer of the name is this one."""
        return not self._args and (self.learning_rate is None or isinstance(self.learning_rate, (int, float)))

    def _options(self):
        return None

    def _canned_options(self):
        return self._options()

    def _rate(self):
        """The learning rate given, or the Keras optimizer's own default."""
        if self.learning_rate is None:
            return 0.01 if self._loom == "SGD" else 0.001
        return self.learning_rate

    def _make(self, g):
        """The loom_optimizer of this optimizer in graph g (a canned
        estimator's training graph, being built)."""
        from . import ops as _ops
        lr = self._rate()
        if isinstance(lr, LearningRateSchedule):
            lr = lr(_ops.get_global_step(g))
        if isinstance(lr, Output):
            if lr.graph.p != g.p:
                raise ValueError("%s: the learning_rate tensor is not in the training graph: make the optimizer in "
                                 "a callable (optimizer=lambda: ...), which the estimator calls while it builds "
                                 "that graph" % type(self).__name__)
            if np.dtype(lr.dtype) != np.float32:
                lr = g.cast(lr, np.float32)
        else:
            lr = g.constant(np.float32(lr), name="learning_rate")
        o = self._canned_options()
        fn = getattr(L.lib, "loom_optimizer_" + self._loom.lower())
        p = fn(lr.c) if self._loom == "SGD" else fn(lr.c, None if o is None else C.byref(o))
        g._check()
        return p


class Adagrad(Optimizer):
    _loom = "Adagrad"
    _defaults = {"initial_accumulator_value": 0.1, "epsilon": 1e-7}
    _canned_takes = ("initial_accumulator_value",)

    def _options(self):
        from . import ops as _ops
        v = float(self._args.get("initial_accumulator_value", 0.1))
        if v < 0:
            raise ValueError("initial_accumulator_value must be non-negative: %r" % v)
        return _ops._opts("adagrad", initial_accumulator_value=v)


class Adam(Optimizer):
    _loom = "Adam"
    _defaults = {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7, "amsgrad": False}
    _canned_takes = ("beta_1", "beta_2", "epsilon")

    def _options(self):
        from . import ops as _ops
        a = dict(self._defaults, **self._args)
        return _ops._opts("adam", beta1=float(a["beta_1"]), beta2=float(a["beta_2"]), epsilon=float(a["epsilon"]))


class Ftrl(Optimizer):
    _loom = "Ftrl"
    _defaults = {"learning_rate_power": -0.5, "initial_accumulator_value": 0.1, "l1_regularization_strength": 0.0,
                 "l2_regularization_strength": 0.0, "l2_shrinkage_regularization_strength": 0.0, "beta": 0.0}
    _canned_takes = ("learning_rate_power", "initial_accumulator_value", "l1_regularization_strength",
                     "l2_regularization_strength", "l2_shrinkage_regularization_strength")

    def _options(self):
        from . import ops as _ops
        a = dict(self._defaults, **self._args)
        if a["learning_rate_power"] > 0 or a["initial_accumulator_value"] < 0 or \
                min(a["l1_regularization_strength"], a["l2_regularization_strength"],
                    a["l2_shrinkage_regularization_strength"]) < 0:
            raise ValueError("Ftrl: learning_rate_power must be <= 0 and initial_accumulator_value and the "
                             "regularization strengths >= 0; got %r" % (a,))
        return _ops._opts("ftrl", learning_rate_power=float(a["learning_rate_power"]),
                          initial_accumulator_value=float(a["initial_accumulator_value"]),
                          l1=float(a["l1_regularization_strength"]), l2=float(a["l2_regularization_strength"]),
                          l2_shrinkage=float(a["l2_shrinkage_regularization_strength"]))


class RMSprop(Optimizer):
    _loom = "RMSProp"
    _defaults = {"rho": 0.9, "momentum": 0.0, "epsilon": 1e-7, "centered": False}
    _keras_takes = _canned_takes = ("rho", "momentum", "epsilon", "centered")

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

    def _canned_options(self):
        """tf.keras.optimizers.legacy.RMSprop (the canned estimators'): epsilon outside the square root, but
        with momentum TF's kernel (inside), as Keras' legacy optimizer runs."""
        o = self._options()
        o.keras_legacy = int(o.momentum == 0)
        return o


class SGD(Optimizer):
    _loom = "SGD"
    _defaults = {"momentum": 0.0, "nesterov": False}


_NAMES = {"adagrad": "Adagrad", "adam": "Adam", "ftrl": "Ftrl", "rmsprop": "RMSProp", "sgd": "SGD"}


def canned_spec(optimizer, what, owner):
    """(loom_canned_optimizer, the callback to keep alive or None) for a
    canned estimator's optimizer argument: a name (learning rate 0: the
    estimator's default, as TF), an instance, or a callable returning one.
    An exception in the callback is recorded on owner (the estimator) and
    raised where the estimator's call returns."""
    o = L.CannedOptimizer()
    if isinstance(optimizer, str):
        if optimizer.lower() not in _NAMES:
            raise ValueError("%s: unknown optimizer %r (Adagrad, Adam, Ftrl, RMSProp, SGD)" % (what, optimizer))
        o.name, o.learning_rate = _NAMES[optimizer.lower()].encode(), 0.0
        return o, None
    if not isinstance(optimizer, Optimizer) and not callable(optimizer):
        raise NotImplementedError("loom.tf: %s=%r: give a name, a tf.keras.optimizers instance (Adagrad, Adam, "
                                  "Ftrl, RMSprop, SGD) or a callable returning one" % (what, optimizer))
    if isinstance(optimizer, Optimizer) and optimizer._constant():
        o.name, o.learning_rate = optimizer._loom.encode(), float(optimizer._rate())
        return o, None
    from .. import Graph
    from . import ops as _ops

    def make(gp, user):
        try:
            g = Graph(_borrow=gp)
            _ops._graphs.append(g)
            try:
                opt = optimizer if isinstance(optimizer, Optimizer) else optimizer()
                if not isinstance(opt, Optimizer):  # TF's error
                    raise ValueError("The given object is not a tf.keras.optimizers.Optimizer instance. Given: %s"
                                     % (opt,))
                for k in opt._args:
                    if k not in opt._canned_takes:
                        raise NotImplementedError("loom.tf: %s(%s=%r): loom's canned estimators take TF's default "
                                                  "%s=%r only" % (type(opt).__name__, k, opt._args[k], k,
                                                                  opt._defaults[k]))
                return opt._make(g)
            finally:
                _ops._graphs.pop()
        except BaseException as e:  # noqa: B902 - must not unwind through C
            owner._exc = e
            return None
    cb = L.CANNED_OPTIMIZER_FN(make)
    o.fn = cb
    return o, cb


class LearningRateSchedule:
    """tf.keras.optimizers.schedules.LearningRateSchedule: called with the
    step (a tensor of the training graph), gives the learning rate."""

    def __call__(self, step):
        raise NotImplementedError

    def get_config(self):
        return dict(self._config)


def _schedule(name, fn, params):
    from . import _learning_rate as _lr

    def __init__(self, *args, **kwargs):
        names = [p[0] for p in params]
        if len(args) > len(names):
            raise TypeError("%s takes %d arguments" % (name, len(names)))
        cfg = {p[0]: p[1] for p in params if len(p) > 1}
        cfg.update(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError("%s: unexpected argument %r" % (name, k))
            cfg[k] = v
        missing_args = [k for k in names if k not in cfg]
        if missing_args:
            raise TypeError("%s: missing argument(s) %s" % (name, ", ".join(missing_args)))
        self._config = cfg

    def __call__(self, step):
        a = dict(self._config)
        a.pop("name", None)
        return getattr(_lr, fn)(global_step=step, **{_RENAME.get(k, k): v for k, v in a.items()})
    return type(name, (LearningRateSchedule,), {"__init__": __init__, "__call__": __call__})


_RENAME = {"initial_learning_rate": "learning_rate"}
ExponentialDecay = _schedule("ExponentialDecay", "exponential_decay", (
    ("initial_learning_rate",), ("decay_steps",), ("decay_rate",), ("staircase", False), ("name", None)))
PolynomialDecay = _schedule("PolynomialDecay", "polynomial_decay", (
    ("initial_learning_rate",), ("decay_steps",), ("end_learning_rate", 0.0001), ("power", 1.0), ("cycle", False),
    ("name", None)))
CosineDecay = _schedule("CosineDecay", "cosine_decay", (
    ("initial_learning_rate",), ("decay_steps",), ("alpha", 0.0), ("name", None)))
InverseTimeDecay = _schedule("InverseTimeDecay", "inverse_time_decay", (
    ("initial_learning_rate",), ("decay_steps",), ("decay_rate",), ("staircase", False), ("name", None)))


class PiecewiseConstantDecay(LearningRateSchedule):
    def __init__(self, boundaries, values, name=None):
        self._config = {"boundaries": list(boundaries), "values": list(values), "name": name}

    def __call__(self, step):
        from . import _learning_rate as _lr
        return _lr.piecewise_constant(step, self._config["boundaries"], self._config["values"])


schedules = Namespace("keras.optimizers.schedules", LearningRateSchedule=LearningRateSchedule,
                      ExponentialDecay=ExponentialDecay, PolynomialDecay=PolynomialDecay, CosineDecay=CosineDecay,
                      InverseTimeDecay=InverseTimeDecay, PiecewiseConstantDecay=PiecewiseConstantDecay)


def __getattr__(name):
    raise missing("keras.optimizers.", name)
