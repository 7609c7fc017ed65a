"""The tf.compat.v1 initializer objects (zeros_initializer,
glorot_uniform_initializer, ...: loom_init_*, TF's initial values and seed
rules) and what the layers' initializer arguments take: one of those, a
Keras initializer object or a Keras initializer's name."""
from .. import _lib as L
from .. import _lib_keras as K
from .._lib import lib

import numpy as np

for _n, _args in (("ones", ()), ("random_uniform", (L.dbl, L.dbl, L.i64)), ("truncated_normal", (L.dbl, L.dbl, L.i64)),
                  ("glorot_normal", (L.i64,)), ("he_uniform", (L.i64,)), ("he_normal", (L.i64,))):
    L._d("loom_init_" + _n, L.Initializer, *_args)


def _seed(seed):
    return K.SEED_NONE if seed is None else int(seed)


class _Init:
    """A tf.compat.v1 initializer object (what get_variable's initializer takes)."""

    def _c(self):
        raise NotImplementedError

    def __repr__(self):
        return "<loom.tf %s>" % type(self).__name__


class zeros_initializer(_Init):  # noqa: N801 - TF's names
    def __init__(self, dtype=None):
        self.dtype = dtype

    def _c(self):
        return lib.loom_init_zeros()


class ones_initializer(_Init):  # noqa: N801
    def __init__(self, dtype=None):
        self.dtype = dtype

    def _c(self):
        return lib.loom_init_ones()


class constant_initializer(_Init):  # noqa: N801
    def __init__(self, value=0, dtype=None, verify_shape=False):
        if np.ndim(value) != 0:
            raise NotImplementedError("loom.tf: tf.compat.v1.constant_initializer of a list or array is not "
                                      "supported: give a scalar")
        self.value = float(value)

    def _c(self):
        return lib.loom_init_constant(self.value)


class random_uniform_initializer(_Init):  # noqa: N801
    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=None):
        self.minval, self.maxval, self.seed = float(minval), 1.0 if maxval is None else float(maxval), seed

    def _c(self):
        return lib.loom_init_random_uniform(self.minval, self.maxval, _seed(self.seed))


class random_normal_initializer(_Init):  # noqa: N801
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=None):
        self.mean, self.stddev, self.seed = float(mean), float(stddev), seed

    def _c(self):
        return lib.loom_init_random_normal(self.mean, self.stddev, _seed(self.seed))


class truncated_normal_initializer(_Init):  # noqa: N801
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=None):
        self.mean, self.stddev, self.seed = float(mean), float(stddev), seed

    def _c(self):
        return lib.loom_init_truncated_normal(self.mean, self.stddev, _seed(self.seed))


class glorot_uniform_initializer(_Init):  # noqa: N801
    def __init__(self, seed=None, dtype=None):
        self.seed = seed

    def _c(self):
        return lib.loom_init_glorot_uniform(_seed(self.seed))


class glorot_normal_initializer(_Init):  # noqa: N801
    def __init__(self, seed=None, dtype=None):
        self.seed = seed

    def _c(self):
        return lib.loom_init_glorot_normal(_seed(self.seed))


class _KerasInit(_Init):
    """A tf.keras.initializers object (Keras's default arguments)."""
    _keras_name = None

    def __init__(self, seed=None):
        self.seed = seed

    def _c(self):
        return getattr(lib, "loom_init_" + self._keras_name)(_seed(self.seed))

    def get_config(self):
        return {"seed": self.seed}


class GlorotUniform(_KerasInit):
    _keras_name = "glorot_uniform"


class GlorotNormal(_KerasInit):
    _keras_name = "glorot_normal"


class HeUniform(_KerasInit):
    _keras_name = "he_uniform"


class HeNormal(_KerasInit):
    _keras_name = "he_normal"


class Zeros(_KerasInit):
    _keras_name = "zeros"

    def __init__(self):
        super().__init__()

    def _c(self):
        return lib.loom_init_zeros()

    def get_config(self):
        return {}


class Ones(Zeros):
    _keras_name = "ones"

    def _c(self):
        return lib.loom_init_ones()


class Constant(_KerasInit):
    _keras_name = "constant"

    def __init__(self, value=0):
        super().__init__()
        self._v = constant_initializer(value)

    def _c(self):
        return self._v._c()

    def get_config(self):
        return {"value": self._v.value}


class RandomNormal(random_normal_initializer):
    _keras_name = "random_normal"

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(mean, stddev, seed)


class RandomUniform(random_uniform_initializer):
    _keras_name = "random_uniform"

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        super().__init__(minval, maxval, seed)


class TruncatedNormal(truncated_normal_initializer):
    _keras_name = "truncated_normal"

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(mean, stddev, seed)


KERAS = {c.__name__: c for c in (GlorotUniform, GlorotNormal, HeUniform, HeNormal, Zeros, Ones, Constant,
                                 RandomNormal, RandomUniform, TruncatedNormal)}
KERAS.update({c._keras_name: c for c in KERAS.values()})


def named(name):
    """The loom_initializer of a Keras initializer's name (TF's default
    arguments), or None."""
    cls = KERAS.get(name)
    return cls()._c() if cls is not None else None


def as_initializer(init, what, arg):
    """A layer's initializer argument -> loom_initializer, or None for None
    (the layer's default)."""
    if init is None:
        return None
    if isinstance(init, _Init):
        return init._c()
    c = named(init) if isinstance(init, str) else None
    if c is None:
        raise NotImplementedError("loom.tf: %s(%s=%r): give a tf.compat.v1 initializer (zeros_initializer, "
                                  "constant_initializer, random_normal_initializer, truncated_normal_initializer, "
                                  "glorot_uniform_initializer, ...), a tf.keras.initializers object or one of %s"
                                  % (what, arg, init, ", ".join(sorted(k for k in KERAS if k.islower()))))
    return c
