"""tf.keras for Estimator programs: Sequential over loom's C Sequential
(loom_sequential.h) with the layers it has (Dense, Conv2D, MaxPooling2D,
AveragePooling2D, Flatten, Reshape, Dropout, BatchNormalization, Embedding,
Input/InputLayer), compile / fit / evaluate / predict on numpy arrays, and
tf.keras.estimator.model_to_estimator. Layer names follow Keras' (a
per-process counter per kind: "dense", "dense_1", ...; reset by
tf.keras.backend.clear_session), so the variables ("dense/kernel") and the
estimator's input key ("<first layer>_input", or the Input's name) are
TF's. A layer, argument, loss or metric loom does not have raises
NotImplementedError naming it."""
import ctypes as C
import sys

import numpy as np

from .. import _lib as L
from .. import _lib_keras as K
from .._lib import lib
from .. import _Status, _b, _to_tensor, _from_tensor, Dataset as _LoomDataset, LoomError
from . import optimizers as _optimizers
from . import random as _random
from ._surface import Namespace, missing
from ._initializers import KERAS as KERAS_INITIALIZERS, as_initializer
from . import _regularizers as _reg

_uids = {}


def _uid(prefix):
    """Keras' unique default names: prefix, prefix_1, prefix_2, ..."""
    n = _uids.get(prefix, 0)
    _uids[prefix] = n + 1
    return prefix if n == 0 else "%s_%d" % (prefix, n)


def clear_session():
    """tf.keras.backend.clear_session: restarts the default layer names."""
    _uids.clear()


def _no(what, **given):
    for k, v in given.items():
        if v is not None and v is not False:
            raise NotImplementedError("loom.tf: tf.keras.layers.%s(%s=...) is not supported by loom's Sequential"
                                      % (what, k))


def _activation(a, what):
    if a is None:
        return None
    name = getattr(a, "_loom", None) or getattr(a, "__name__", None) if not isinstance(a, str) else a
    if not name or not lib.loom_activation_valid(name.encode()):
        raise NotImplementedError("loom.tf: tf.keras.layers.%s(activation=%r): loom's layers take relu, relu6, elu, "
                                  "selu, sigmoid, tanh, softplus, gelu, leaky_relu, softmax, linear" % (what, a))
    return None if name == "linear" else name


def _initializer(init, what, arg, default):
    """A Keras initializer (name or object; None = the default) ->
    loom_initializer, or None for the C default (Keras's)."""
    if init is None or init == default:
        return None
    return as_initializer(init, "tf.keras.layers." + what, arg)


def _pair(v, what):
    v = (v, v) if isinstance(v, int) else tuple(v)
    if len(v) != 2:
        raise ValueError("%s must be an int or a tuple of 2 ints, got %r" % (what, v))
    return (L.i64 * 2)(*[int(d) for d in v])


class Layer:
    """A Keras layer of loom's Sequential. input_shape / input_dim on the
    first layer give the model's input, as Keras."""
    _kind = None

    def __init__(self, name=None, input_shape=None, input_dim=None, dtype=None, trainable=True, batch_input_shape=None,
                 **kwargs):
        for k in kwargs:
            raise TypeError("Keyword argument not understood: %r" % k)
        if not trainable:
            raise NotImplementedError("loom.tf: tf.keras.layers.%s(trainable=False) is not supported"
                                      % type(self).__name__)
        self.name = name or _uid(self._kind)
        if batch_input_shape is not None:
            input_shape = tuple(batch_input_shape)[1:]
        if input_dim is not None:
            input_shape = (int(input_dim),)
        self._input_shape = None if input_shape is None else tuple(int(d) for d in input_shape)
        self._dtype = dtype

    def __repr__(self):
        return "<loom.tf.keras.layers.%s %r>" % (type(self).__name__, self.name)

    def _added(self, i, st):
        if i < 0:
            st.raise_if()


class InputLayer:
    """tf.keras.layers.InputLayer / tf.keras.Input: the model's input."""

    def __init__(self, input_shape=None, batch_size=None, dtype=None, name=None, shape=None, **kwargs):
        for k, v in kwargs.items():
            if v:
                raise NotImplementedError("loom.tf: tf.keras.Input(%s=...) is not supported" % k)
        shape = shape if shape is not None else input_shape
        if shape is None:
            raise ValueError("Please provide to Input a `shape` or a `tensor` or a `type_spec` argument.")
        self.shape = tuple(int(d) for d in ((shape,) if isinstance(shape, int) else shape))
        self.dtype = np.dtype(getattr(dtype, "as_numpy_dtype", dtype) or np.float32)
        self.name = name or _uid("input")


def Input(shape=None, batch_size=None, name=None, dtype=None, sparse=None, tensor=None, ragged=None,
          type_spec=None, **kwargs):
    return InputLayer(shape=shape, batch_size=batch_size, dtype=dtype, name=name, sparse=sparse, tensor=tensor,
                      ragged=ragged, type_spec=type_spec, **kwargs)


class Dense(Layer):
    _kind = "dense"

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        _no("Dense", activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
            bias_constraint=bias_constraint)
        self._kreg = _reg.as_regularizer(kernel_regularizer, "tf.keras.layers.Dense", "kernel_regularizer")
        self._breg = _reg.as_regularizer(bias_regularizer, "tf.keras.layers.Dense", "bias_regularizer")
        if int(units) <= 0:
            raise ValueError("Received an invalid value for `units`, expected a positive integer. Received: "
                             "units=%r" % (units,))
        self.units, self.use_bias = int(units), bool(use_bias)
        self.activation = _activation(activation, "Dense")
        self._kinit = _initializer(kernel_initializer, "Dense", "kernel_initializer", "glorot_uniform")
        self._binit = _initializer(bias_initializer, "Dense", "bias_initializer", "zeros")

    def _add(self, m, st):
        o = lib.loom_dense_options_default()
        self._act = _b(self.activation)
        o.activation, o.use_bias = self._act, int(self.use_bias)
        if self._kinit is not None:
            o.kernel_initializer = self._kinit
        if self._binit is not None:
            o.bias_initializer = self._binit
        if self._kreg is not None:
            o.kernel_regularizer = self._kreg
        if self._breg is not None:
            o.bias_regularizer = self._breg
        self._added(K.lib.loom_sequential_add_dense(m, self.units, C.byref(o), _b(self.name), st.p), st)


class Conv2D(Layer):
    _kind = "conv2d"

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1),
                 groups=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        _no("Conv2D", activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
            bias_constraint=bias_constraint)
        self._kreg = _reg.as_regularizer(kernel_regularizer, "tf.keras.layers.Conv2D", "kernel_regularizer")
        self._breg = _reg.as_regularizer(bias_regularizer, "tf.keras.layers.Conv2D", "bias_regularizer")
        if data_format not in (None, "channels_last"):
            raise NotImplementedError("loom.tf: tf.keras.layers.Conv2D(data_format=%r): channels_last only"
                                      % data_format)
        if groups != 1:
            raise NotImplementedError("loom.tf: tf.keras.layers.Conv2D(groups=%r) is not supported" % groups)
        self.filters, self.use_bias = int(filters), bool(use_bias)
        self.kernel_size, self.strides = _pair(kernel_size, "kernel_size"), _pair(strides, "strides")
        self.dilation_rate = _pair(dilation_rate, "dilation_rate")
        self.padding = padding.lower()
        if self.padding not in ("valid", "same"):
            raise ValueError("padding must be 'valid' or 'same', got %r" % padding)
        self.activation = _activation(activation, "Conv2D")
        self._kinit = _initializer(kernel_initializer, "Conv2D", "kernel_initializer", "glorot_uniform")
        self._binit = _initializer(bias_initializer, "Conv2D", "bias_initializer", "zeros")

    def _add(self, m, st):
        o = lib.loom_conv2d_options_default()
        self._keep = (_b(self.padding), _b(self.activation))
        o.strides, o.dilation_rate, o.padding, o.activation = self.strides, self.dilation_rate, *self._keep
        o.use_bias = int(self.use_bias)
        if self._kinit is not None:
            o.kernel_initializer = self._kinit
        if self._binit is not None:
            o.bias_initializer = self._binit
        if self._kreg is not None:
            o.kernel_regularizer = self._kreg
        if self._breg is not None:
            o.bias_regularizer = self._breg
        self._added(K.lib.loom_sequential_add_conv2d(m, self.filters, self.kernel_size, C.byref(o), _b(self.name),
                                                     st.p), st)


class _Pool(Layer):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last"):
            raise NotImplementedError("loom.tf: tf.keras.layers.%s(data_format=%r): channels_last only"
                                      % (type(self).__name__, data_format))
        self.pool_size = _pair(pool_size, "pool_size")
        self.strides = self.pool_size if strides is None else _pair(strides, "strides")
        self.padding = padding.lower()
        if self.padding not in ("valid", "same"):
            raise ValueError("padding must be 'valid' or 'same', got %r" % padding)

    def _add(self, m, st):
        self._added(self._fn(m, self.pool_size, self.strides, _b(self.padding), _b(self.name), st.p), st)


class MaxPooling2D(_Pool):
    _kind = "max_pooling2d"
    _fn = staticmethod(K.lib.loom_sequential_add_max_pooling2d)


class AveragePooling2D(_Pool):
    _kind = "average_pooling2d"
    _fn = staticmethod(K.lib.loom_sequential_add_average_pooling2d)


class Flatten(Layer):
    _kind = "flatten"

    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)

    def _add(self, m, st):
        self._added(K.lib.loom_sequential_add_flatten(m, _b(self.name), st.p), st)


class Reshape(Layer):
    _kind = "reshape"

    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.target_shape = tuple(int(d) for d in target_shape)

    def _add(self, m, st):
        dims = (L.i64 * max(1, len(self.target_shape)))(*self.target_shape)
        self._added(K.lib.loom_sequential_add_reshape(m, len(self.target_shape), dims, _b(self.name), st.p), st)


class Dropout(Layer):
    _kind = "dropout"

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        _no("Dropout", noise_shape=noise_shape)
        if not 0 <= float(rate) < 1:
            raise ValueError("Invalid value received for argument `rate`. Expected a float value between 0 and 1. "
                             "Received: rate=%r" % (rate,))
        self.rate, self.seed = float(rate), seed

    def _add(self, m, st):
        seed = K.SEED_NONE if self.seed is None else int(self.seed)
        self._added(K.lib.loom_sequential_add_dropout(m, self.rate, seed, _b(self.name), st.p), st)


class BatchNormalization(Layer):
    _kind = "batch_normalization"

    def __init__(self, axis=-1, momentum=0.99, epsilon=0.001, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 synchronized=False, **kwargs):
        super().__init__(**kwargs)
        _no("BatchNormalization", beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
            beta_constraint=beta_constraint, gamma_constraint=gamma_constraint, synchronized=synchronized)
        for arg, v, d in (("beta_initializer", beta_initializer, "zeros"), ("gamma_initializer", gamma_initializer,
                                                                            "ones"),
                          ("moving_mean_initializer", moving_mean_initializer, "zeros"),
                          ("moving_variance_initializer", moving_variance_initializer, "ones")):
            if v != d:
                raise NotImplementedError("loom.tf: tf.keras.layers.BatchNormalization(%s=%r): the default %r only"
                                          % (arg, v, d))
        if not isinstance(axis, int):
            raise NotImplementedError("loom.tf: tf.keras.layers.BatchNormalization(axis=%r): one axis" % (axis,))
        self.axis, self.momentum, self.epsilon = axis, float(momentum), float(epsilon)
        self.center, self.scale = bool(center), bool(scale)

    def _add(self, m, st):
        o = K.lib.loom_batch_norm_options_default()
        o.axis, o.momentum, o.epsilon, o.center, o.scale = self.axis, self.momentum, self.epsilon, int(self.center), \
            int(self.scale)
        self._added(K.lib.loom_sequential_add_batch_norm(m, C.byref(o), _b(self.name), st.p), st)


class Embedding(Layer):
    _kind = "embedding"

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", embeddings_regularizer=None,
                 activity_regularizer=None, embeddings_constraint=None, mask_zero=False, input_length=None,
                 sparse=False, **kwargs):
        super().__init__(**kwargs)
        _no("Embedding", embeddings_regularizer=embeddings_regularizer, activity_regularizer=activity_regularizer,
            embeddings_constraint=embeddings_constraint, mask_zero=mask_zero, sparse=sparse)
        if embeddings_initializer != "uniform":
            raise NotImplementedError("loom.tf: tf.keras.layers.Embedding(embeddings_initializer=%r): the default "
                                      "'uniform' only" % (embeddings_initializer,))
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        if input_length is not None and self._input_shape is None:
            self._input_shape = (int(input_length),)
        self._in_dtype = np.int32

    def _add(self, m, st):
        self._added(K.lib.loom_sequential_add_embedding(m, self.input_dim, self.output_dim, None, _b(self.name),
                                                        st.p), st)


MaxPool2D, AvgPool2D = MaxPooling2D, AveragePooling2D

# ---------------------------------------------------------------- losses, metrics
_LOSSES = {"sparse_categorical_crossentropy": "sparse_categorical_crossentropy",
           "categorical_crossentropy": "categorical_crossentropy", "binary_crossentropy": "binary_crossentropy",
           "mean_squared_error": "mean_squared_error", "mse": "mean_squared_error",
           "mean_absolute_error": "mean_absolute_error", "mae": "mean_absolute_error"}


class Loss:
    """A Keras loss object (SUM_OVER_BATCH_SIZE only)."""
    _loom = None

    def __init__(self, from_logits=False, reduction="auto", name=None, **kwargs):
        for k, v in kwargs.items():
            if v:
                raise NotImplementedError("loom.tf: tf.keras.losses.%s(%s=...) is not supported"
                                          % (type(self).__name__, k))
        if getattr(reduction, "value", reduction) not in ("auto", "sum_over_batch_size"):
            raise NotImplementedError("loom.tf: tf.keras.losses.%s(reduction=%r): SUM_OVER_BATCH_SIZE only"
                                      % (type(self).__name__, reduction))
        self.from_logits, self.name = bool(from_logits), name or self._loom


class SparseCategoricalCrossentropy(Loss):
    _loom = "sparse_categorical_crossentropy"

    def __init__(self, from_logits=False, ignore_class=None, reduction="auto", name=None):
        super().__init__(from_logits, reduction, name, ignore_class=ignore_class)


class CategoricalCrossentropy(Loss):
    _loom = "categorical_crossentropy"

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto", name=None):
        super().__init__(from_logits, reduction, name, label_smoothing=label_smoothing, axis=axis != -1)


class BinaryCrossentropy(Loss):
    _loom = "binary_crossentropy"

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="auto", name=None):
        super().__init__(from_logits, reduction, name, label_smoothing=label_smoothing, axis=axis != -1)


class MeanSquaredError(Loss):
    _loom = "mean_squared_error"

    def __init__(self, reduction="auto", name=None):
        super().__init__(False, reduction, name)


class MeanAbsoluteError(Loss):
    _loom = "mean_absolute_error"

    def __init__(self, reduction="auto", name=None):
        super().__init__(False, reduction, name)


_METRICS = ("accuracy", "acc", "mse", "mean_squared_error", "mae", "mean_absolute_error")


def _loss_spec(loss):
    """(loom loss name, from_logits)."""
    if isinstance(loss, Loss):
        return loss._loom, loss.from_logits
    if isinstance(loss, str) and loss in _LOSSES:
        return _LOSSES[loss], False
    if loss is None:
        raise ValueError("No loss found. You may have forgotten to provide a `loss` argument in the `compile()` "
                         "method.")
    raise NotImplementedError("loom.tf: compile(loss=%r): loom's Sequential takes %s or tf.keras.losses "
                              "SparseCategoricalCrossentropy, CategoricalCrossentropy, BinaryCrossentropy, "
                              "MeanSquaredError, MeanAbsoluteError" % (loss, ", ".join(sorted(_LOSSES))))


def _is_dataset(x):
    from .data import Dataset
    return isinstance(x, Dataset)


def _repeats_forever(ds):
    return any(op[0] == "repeat" and op[1] < 0 for op in getattr(ds, "_ops", ()))


# ---------------------------------------------------------------- the model
class History:
    """tf.keras.callbacks.History: history = {"loss": [per epoch], ...}."""

    def __init__(self):
        self.history, self.epoch, self.params, self.model = {}, [], {}, None


class Sequential:
    """tf.keras.Sequential on loom_sequential."""

    def __init__(self, layers=None, name=None, trainable=True):
        self.name = name or _uid("sequential")
        self.layers = []
        self._input = None
        self._p = None
        self._compiled = None
        self._fitted = False
        self.optimizer = None
        for layer in layers or []:
            self.add(layer)

    def __del__(self):
        if getattr(self, "_p", None):
            K.lib.loom_sequential_free(self._p)
            self._p = None

    def add(self, layer):
        if self._p is not None:
            raise NotImplementedError("loom.tf: Sequential.add after the model was built (compile with its input "
                                      "shape known, or fit) is not supported")
        if isinstance(layer, InputLayer):
            if self.layers or self._input is not None:
                raise ValueError("An InputLayer must be the first layer of a Sequential model")
            self._input = layer
            return
        if not isinstance(layer, Layer) or not hasattr(type(layer), "_add"):
            what = "a subclass of tf.keras.layers.Layer (%s)" % type(layer).__name__ if isinstance(layer, Layer) \
                else repr(layer)
            raise NotImplementedError("loom.tf: Sequential.add(%s) is not supported: loom's Sequential runs its own "
                                      "layers in C; instead: the tf.keras.layers Dense, Conv2D, MaxPooling2D, "
                                      "AveragePooling2D, Flatten, Reshape, Dropout, BatchNormalization, Embedding, "
                                      "or a custom model_fn of TF ops in a tf.estimator.Estimator" % what)
        if not self.layers and self._input is None and layer._input_shape is not None:
            self._input = InputLayer(shape=layer._input_shape, dtype=getattr(layer, "_in_dtype", layer._dtype),
                                     name=layer.name + "_input")
        self.layers.append(layer)

    def pop(self):
        if self._p is not None or not self.layers:
            raise NotImplementedError("loom.tf: Sequential.pop on a built or empty model is not supported")
        self.layers.pop()

    @property
    def input_names(self):
        return [self._input.name] if self._input else []

    @property
    def output_names(self):
        return [self.layers[-1].name] if self.layers else []

    @property
    def built(self):
        return self._p is not None

    # ---- compile / build
    def compile(self, optimizer="rmsprop", loss=None, metrics=None, loss_weights=None, weighted_metrics=None,
                run_eagerly=None, steps_per_execution=None, jit_compile=None, pss_evaluation_shards=0, **kwargs):
        for k, v in (("loss_weights", loss_weights), ("weighted_metrics", weighted_metrics),
                     ("run_eagerly", run_eagerly), ("jit_compile", jit_compile)):
            if v:
                raise NotImplementedError("loom.tf: Sequential.compile(%s=...) is not supported" % k)
        if steps_per_execution not in (None, 1):
            raise NotImplementedError("loom.tf: Sequential.compile(steps_per_execution=...) is not supported")
        for k in kwargs:
            raise TypeError("Invalid keyword argument(s) in `compile()`: (%r,)" % k)
        if self._p is not None:
            raise NotImplementedError("loom.tf: compiling a model twice is not supported (make a new model)")
        lname, from_logits = _loss_spec(loss)
        metrics = list(metrics or [])
        for m in metrics:
            if not isinstance(m, str) or m not in _METRICS:
                raise NotImplementedError("loom.tf: compile(metrics=[%r]): loom's Sequential takes the metric names "
                                          "%s" % (m, ", ".join(_METRICS)))
        if isinstance(optimizer, str):
            opt = _optimizers._NAMES.get(optimizer.lower())
            if opt is None:
                raise ValueError("Could not interpret optimizer identifier: %r" % optimizer)
            lr = 0.0
        elif isinstance(optimizer, _optimizers.Optimizer):
            if not isinstance(optimizer.learning_rate, (int, float, type(None))):
                raise NotImplementedError("loom.tf: Sequential.compile(optimizer=%s(learning_rate=%r)): loom's "
                                          "Sequential takes a constant learning rate"
                                          % (type(optimizer).__name__, optimizer.learning_rate))
            for a, v in optimizer._args.items():
                if a not in optimizer._keras_takes:
                    raise NotImplementedError("loom.tf: %s(%s=%r): loom's Sequential takes TF's default %s=%r only"
                                              % (type(optimizer).__name__, a, v, a, optimizer._defaults[a]))
            opt, lr = optimizer._loom, float(optimizer.learning_rate or 0.0)
        else:
            raise NotImplementedError("loom.tf: compile(optimizer=%r): give a name or a tf.keras.optimizers "
                                      "instance (Adagrad, Adam, Ftrl, RMSprop, SGD)" % (optimizer,))
        rms = None
        if opt == "RMSProp":  # Keras' RMSprop (the mean square starts at 0) through an optimizer factory
            rms = (optimizer if isinstance(optimizer, _optimizers.Optimizer) else _optimizers.RMSprop())._options()
        self.optimizer = optimizer
        self.loss = loss
        self.compiled_metrics = metrics
        self._compiled = (lname, from_logits, opt, lr, metrics, rms)
        if self._input is not None:
            self._build()

    def _build(self, x=None):
        if self._p is not None:
            return
        if self._compiled is None:
            raise RuntimeError("You must compile your model before training/testing. Use `model.compile(optimizer, "
                               "loss)`.")
        if not self.layers:
            raise ValueError("loom.tf: the Sequential model has no layers")
        if self._input is None:
            if x is None:
                raise ValueError("This model has not yet been built. Build the model first by calling `build()` or "
                                 "by calling the model on a batch of data.")
            self._input = InputLayer(shape=x.shape[1:], dtype=x.dtype if x.dtype.kind in "iu" else np.float32,
                                     name=self.layers[0].name + "_input")
        st = _Status()
        p = K.lib.loom_sequential_new(st.p)
        if not p:
            st.raise_if()
        try:
            shape = self._input.shape
            dims = (L.i64 * max(1, len(shape)))(*shape)
            dt = self._input.dtype
            from .. import _dtype
            st.raise_if(K.lib.loom_sequential_set_input(p, _b(self._input.name), _dtype(dt), len(shape), dims, st.p))
            for layer in self.layers:
                layer._add(p, st)
            lname, from_logits, opt, lr, metrics, rms = self._compiled
            o = K.lib.loom_sequential_compile_options_default()
            o.loss, o.from_logits, o.optimizer, o.learning_rate = _b(lname), int(from_logits), _b(opt), lr
            if rms is not None:
                rate = lr or 0.001  # Keras' RMSprop default

                def make(g, user, rms=rms, rate=rate):
                    return K.lib.loom_optimizer_rmsprop(K.lib.loom_const_f32(g, rate, b"learning_rate"),
                                                        C.byref(rms))
                self._opt_fn = K.SEQ_OPTIMIZER_FN(make)  # kept alive with the model (fit, to_estimator)
                o.optimizer_fn = self._opt_fn
            marr = (C.c_char_p * max(1, len(metrics)))(*[_b(m) for m in metrics])
            o.nmetrics, o.metrics = len(metrics), marr
            seed = _random.get_global_seed()
            o.seed = K.SEED_NONE if seed is None else int(seed)
            st.raise_if(K.lib.loom_sequential_compile(p, C.byref(o), st.p))
        except LoomError as e:
            K.lib.loom_sequential_free(p)
            raise ValueError(str(e)) from None
        self._p = p
        self._label_dtype = np.float32 if lname in ("mean_squared_error", "mean_absolute_error",
                                                     "binary_crossentropy", "categorical_crossentropy") else None

    # ---- data
    def _x(self, x):
        if isinstance(x, dict):
            if len(x) != 1:
                raise NotImplementedError("loom.tf: a Sequential model has one input; got the features %s"
                                          % sorted(x))
            x = next(iter(x.values()))
        if hasattr(x, "to_numpy"):
            x = x.to_numpy()
        if not isinstance(x, (np.ndarray, list, tuple)):
            raise NotImplementedError("loom.tf: Sequential.fit/evaluate/predict take numpy arrays (got %s); for a "
                                      "tf.data pipeline use tf.keras.estimator.model_to_estimator"
                                      % type(x).__name__)
        x = np.asarray(x)
        if x.dtype == np.float64:
            x = x.astype(np.float32)
        return x

    def _dataset(self, x, y, batch_size, shuffle=False, seed=None):
        arrays = {self._input.name: np.ascontiguousarray(x.astype(self._input.dtype, copy=False))}
        if y is not None:
            y = np.asarray(y)
            if len(y) != len(x):
                raise ValueError("Data cardinality is ambiguous:\n  x sizes: %d\n  y sizes: %d\nMake sure all "
                                 "arrays contain the same number of samples." % (len(x), len(y)))
            if self._label_dtype is not None or y.dtype == np.float64:
                y = y.astype(self._label_dtype or np.float32)
            arrays["__labels__"] = np.ascontiguousarray(y)
        ds = _LoomDataset.from_tensor_slices(arrays, label="__labels__" if y is not None else None)
        if shuffle:
            ds = ds.shuffle(len(x), _random.op_seed(seed), True)
        return ds.batch(int(batch_size or 32))

    def _from_dataset(self, x, what):
        """A tf.data pipeline of batches ((features, labels) or features) as loom's dataset."""
        if self._p is None:
            if self._input is None:
                raise ValueError("loom.tf: Sequential.%s on a tf.data.Dataset needs the model's input shape: give the "
                                 "first layer input_shape= or start with tf.keras.Input" % what)
            self._build()
        return x._loom({}, self._label_dtype)

    def _result(self, r):
        out = {lib.loom_eval_result_key(r, i).decode(): float(lib.loom_eval_result_value(r, i))
               for i in range(lib.loom_eval_result_count(r))}
        lib.loom_eval_result_free(r)
        out.pop("global_step", None)
        return {k: out[k] for k in ["loss"] + self.compiled_metrics if k in out}  # Keras' order

    # ---- fit / evaluate / predict
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1,
            max_queue_size=10, workers=1, use_multiprocessing=False):
        if callbacks:
            raise NotImplementedError("loom.tf: tf.keras.Sequential.fit(callbacks=...) is not supported; instead: call "
                                      "fit(epochs=1) in a loop and act between epochs (the returned History has the "
                                      "epoch's loss and metrics), or train through "
                                      "tf.keras.estimator.model_to_estimator with SessionRunHooks")
        for k, v in (("class_weight", class_weight), ("sample_weight", sample_weight),
                     ("validation_steps", validation_steps)):
            if v:
                raise NotImplementedError("loom.tf: Sequential.fit(%s=...) is not supported" % k)
        if validation_freq != 1:
            raise NotImplementedError("loom.tf: Sequential.fit(validation_freq=...) is not supported")
        if _is_dataset(x):
            if y is not None or validation_split:
                raise ValueError("`y` argument is not supported when using dataset as input.")
            if steps_per_epoch is None and _repeats_forever(x):
                raise ValueError("When passing an infinitely repeating dataset, please specify a `steps_per_epoch` "
                                 "value so that epoch level callbacks continue to work.")
            ds, nsteps = self._from_dataset(x, "fit"), steps_per_epoch or 0
        else:
            if y is None:
                raise NotImplementedError("loom.tf: Sequential.fit(x) without y: give the labels as y, or x as a "
                                          "tf.data.Dataset of (features, labels) batches")
            x = self._x(x)
            y = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
            if validation_split and validation_data is None:
                n = int(len(x) * (1 - float(validation_split)))
                validation_data = (x[n:], y[n:])
                x, y = x[:n], y[:n]
            self._build(x)
            ds = self._dataset(x, y, batch_size, shuffle=bool(shuffle))
            nsteps = steps_per_epoch or -(-len(x) // (batch_size or 32))
        vds = None
        if _is_dataset(validation_data):
            vds = self._from_dataset(validation_data, "fit(validation_data)")
        elif validation_data is not None:
            vx, vy = validation_data[0], validation_data[1]
            vds = self._dataset(self._x(vx), vy, validation_batch_size or batch_size)
        o = K.lib.loom_sequential_fit_options_default()
        o.epochs, o.steps_per_epoch, o.verbose = 1, int(steps_per_epoch or 0), 0
        h = History()
        h.model = self
        h.params = {"verbose": verbose, "epochs": epochs, "steps": nsteps or None}
        for epoch in range(int(initial_epoch), int(epochs)):
            st = _Status()
            r = C.c_void_p()
            st.raise_if(K.lib.loom_sequential_fit(self._p, ds.p, C.byref(o), C.byref(r), st.p))
            logs = self._result(r)
            if vds is not None:
                logs.update({"val_" + k: v for k, v in self._evaluate(vds, 0).items()})
            for k, v in logs.items():
                h.history.setdefault(k, []).append(v)
            h.epoch.append(epoch)
            if verbose not in (0, "0"):
                print("Epoch %d/%d - %s" % (epoch + 1, epochs, " - ".join("%s: %.4f" % kv for kv in logs.items())))
                sys.stdout.flush()
        self._fitted = True
        self.history = h
        return h

    def _evaluate(self, ds, steps):
        st = _Status()
        r = C.c_void_p()
        st.raise_if(K.lib.loom_sequential_evaluate(self._p, ds.p, int(steps or 0), C.byref(r), st.p))
        return self._result(r)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, max_queue_size=10, workers=1, use_multiprocessing=False, return_dict=False):
        for k, v in (("sample_weight", sample_weight), ("callbacks", callbacks)):
            if v:
                raise NotImplementedError("loom.tf: Sequential.evaluate(%s=...) is not supported" % k)
        if _is_dataset(x):
            logs = self._evaluate(self._from_dataset(x, "evaluate"), steps)
        else:
            x = self._x(x)
            self._build(x)
            logs = self._evaluate(self._dataset(x, y, batch_size), steps)
        if return_dict:
            return logs
        vals = [logs["loss"]] + [logs[m] for m in self.compiled_metrics]
        return vals[0] if len(vals) == 1 else vals

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, max_queue_size=10, workers=1,
                use_multiprocessing=False):
        if _is_dataset(x):
            ds = self._from_dataset(x, "predict")
        else:
            x = self._x(x)
            self._build(x)
            ds = self._dataset(x, None, batch_size)
        st = _Status()
        t = C.c_void_p()
        st.raise_if(K.lib.loom_sequential_predict(self._p, ds.p, int(steps or 0), C.byref(t), st.p))
        return _from_tensor(t.value, take=True)

    def __call__(self, x, training=None):
        return self.predict(x)

    # ---- weights
    def _var_names(self):
        return [K.lib.loom_sequential_variable_name(self._p, i).decode()
                for i in range(K.lib.loom_sequential_num_variables(self._p))]

    @property
    def weights(self):
        return self._var_names() if self._p else []

    def get_weights(self):
        if self._p is None:
            return []
        out = []
        for name in self._var_names():
            st = _Status()
            t = C.c_void_p()
            st.raise_if(K.lib.loom_sequential_get_variable(self._p, _b(name), C.byref(t), st.p))
            out.append(_from_tensor(t.value, take=True))
        return out

    def set_weights(self, weights):
        names = self._var_names() if self._p else []
        if len(weights) != len(names):
            raise ValueError("You called `set_weights(weights)` on layer %r with a weight list of length %d, but the "
                             "layer was expecting %d weights." % (self.name, len(weights), len(names)))
        for name, w in zip(names, weights):
            t = _to_tensor(np.ascontiguousarray(np.asarray(w, np.float32)))
            try:
                st = _Status()
                st.raise_if(K.lib.loom_sequential_set_variable(self._p, _b(name), t, st.p))
            finally:
                lib.loom_tensor_free(t)

    def count_params(self):
        return int(sum(np.prod(w.shape) for w in self.get_weights()))

    def summary(self, print_fn=None):
        p = print_fn or print
        p('Model: "%s"' % self.name)
        for layer in self.layers:
            p("  %-28s %s" % (layer.name, type(layer).__name__))
        p("Total params: %d" % self.count_params())

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise missing("keras.Sequential.", name)


# ---------------------------------------------------------------- model_to_estimator
def model_to_estimator(keras_model=None, keras_model_path=None, custom_objects=None, model_dir=None, config=None,
                       checkpoint_format="checkpoint", metric_names_map=None, export_outputs=None):
    """tf.keras.estimator.model_to_estimator: an Estimator whose model_fn
    builds the compiled Sequential (the same variable names); its first
    checkpoint holds the model's current weights. input_fn features are keyed
    by the model's input name (model.input_names[0]), or one array."""
    from .estimator import _KerasEstimator
    if keras_model_path is not None:
        raise NotImplementedError("loom.tf: model_to_estimator(keras_model_path=...): give keras_model")
    for k, v in (("custom_objects", custom_objects), ("metric_names_map", metric_names_map),
                 ("export_outputs", export_outputs)):
        if v:
            raise NotImplementedError("loom.tf: model_to_estimator(%s=...) is not supported" % k)
    if checkpoint_format not in ("checkpoint", "saver"):
        raise ValueError("Unknown checkpoint format: %r" % (checkpoint_format,))
    if not isinstance(keras_model, Sequential):
        raise NotImplementedError("loom.tf: model_to_estimator(keras_model=%r): a tf.keras.Sequential only"
                                  % (keras_model,))
    if keras_model._compiled is None:
        raise ValueError("The given keras model has not been compiled yet. Please compile the model with "
                         "`model.compile()` before calling `model_to_estimator()`.")
    keras_model._build()
    return _KerasEstimator(keras_model, model_dir, config)


layers = Namespace("keras.layers", Dense=Dense, Conv2D=Conv2D, Convolution2D=Conv2D, MaxPooling2D=MaxPooling2D,
                   MaxPool2D=MaxPool2D, AveragePooling2D=AveragePooling2D, AvgPool2D=AvgPool2D, Flatten=Flatten,
                   Reshape=Reshape, Dropout=Dropout, BatchNormalization=BatchNormalization, Embedding=Embedding,
                   InputLayer=InputLayer, Input=Input, Layer=Layer)
losses_ns = dict(SparseCategoricalCrossentropy=SparseCategoricalCrossentropy,
                 CategoricalCrossentropy=CategoricalCrossentropy, BinaryCrossentropy=BinaryCrossentropy,
                 MeanSquaredError=MeanSquaredError, MeanAbsoluteError=MeanAbsoluteError, Loss=Loss)
initializers = Namespace("keras.initializers", **KERAS_INITIALIZERS)
regularizers = Namespace("keras.regularizers", Regularizer=_reg.Regularizer, L1=_reg.L1, L2=_reg.L2, L1L2=_reg.L1L2,
                         l1=_reg.l1, l2=_reg.l2, l1_l2=_reg.l1_l2, get=_reg.get)
backend = Namespace("keras.backend", clear_session=clear_session)
estimator = Namespace("keras.estimator", model_to_estimator=model_to_estimator)
callbacks = Namespace("keras.callbacks", History=History)
models = Namespace("keras.models", Sequential=Sequential)
