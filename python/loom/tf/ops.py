"""TF ops inside a model_fn, built into loom's graph: a custom
tf.estimator.Estimator calls the model_fn with loom.Output tensors, and
these functions (tf.compat.v1.layers.dense, tf.nn.*, tf.argmax,
tf.reduce_mean, tf.compat.v1.train.*Optimizer(...).minimize,
get_global_step; the losses and metrics are _v1_ops') add loom nodes to
the tensors' graph. Any other op raises NotImplementedError."""
import ctypes as C

import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Output, _b
from . import dtypes as _dt


def _g(x, what):
    if not isinstance(x, Output):
        raise NotImplementedError("loom.tf: %s on %s: loom.tf ops take the tensors of a model_fn (features, labels "
                                  "and what is built from them)" % (what, type(x).__name__))
    return x.graph


def _layer_options(o, what, kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer, trainable,
                   unsupported):
    """Fills the initializer, regularizer and trainable fields of a
    loom_dense_options / loom_conv2d_options from TF's layer arguments."""
    from ._initializers import as_initializer
    from ._regularizers import as_regularizer
    for k, v in unsupported.items():
        if v is not None:
            raise NotImplementedError("loom.tf: %s(%s=...) is not supported" % (what, k))
    for field, v in (("kernel_initializer", kernel_initializer), ("bias_initializer", bias_initializer)):
        c = as_initializer(v, what, field)
        if c is not None:
            setattr(o, field, c)
    for field, v in (("kernel_regularizer", kernel_regularizer), ("bias_regularizer", bias_regularizer)):
        c = as_regularizer(v, what, field)
        if c is not None:
            setattr(o, field, c)
    o.trainable = int(bool(trainable))


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None,
          kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
          bias_constraint=None, trainable=True, name=None, reuse=None):
    """tf.compat.v1.layers.dense (variables <name>/kernel, <name>/bias; the
    kernel glorot_uniform and the bias zeros unless given; the regularizers'
    losses in GraphKeys.REGULARIZATION_LOSSES)."""
    from .nn import activation_name
    what = "tf.compat.v1.layers.dense"
    g = _g(inputs, what)
    o = lib.loom_dense_options_default()
    _layer_options(o, what, kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer, trainable,
                   dict(activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                        bias_constraint=bias_constraint, reuse=reuse or None))
    act = None if activation is None else activation_name(activation, "activation").encode()
    o.activation, o.use_bias = act, int(bool(use_bias))
    out = lib.loom_layers_dense(g.p, inputs.c, int(units), C.byref(o), _b(name))
    g._check()
    return g._out(out)


def activation(name, x, op_name=None):
    g = _g(x, "tf.nn." + name)
    return g._out(lib.loom_activation(g.p, x.c, _b(name), _b(op_name)))


def softmax(logits, axis=None, name=None):
    g = _g(logits, "tf.nn.softmax")
    if axis not in (None, -1, len(logits.shape) - 1):
        raise NotImplementedError("loom.tf: tf.nn.softmax(axis=%r): the last axis only; instead: tf.transpose the "
                                  "axis last" % (axis,))
    return g.softmax(logits, name=name)


def argmax(input, axis=None, output_type=_dt.int64, name=None):  # noqa: A002 - TF's argument name
    return _g(input, "tf.argmax").argmax(input, -1 if axis is None else int(axis),
                                         _dt.as_dtype(output_type).as_numpy_dtype, name=name)


def cast(x, dtype, name=None):
    return _g(x, "tf.cast").cast(x, _dt.as_dtype(dtype).as_numpy_dtype, name=name)


def reshape(tensor, shape, name=None):
    return _g(tensor, "tf.reshape").reshape(tensor, shape, name=name)


def _reduce(kind):
    def f(input_tensor, axis=None, keepdims=False, name=None):
        g = _g(input_tensor, "tf.reduce_" + kind)
        return getattr(g, "reduce_" + kind)(input_tensor, axis, keepdims, name)
    f.__name__ = "reduce_" + kind
    return f


reduce_mean, reduce_sum, reduce_max, reduce_min = (_reduce(k) for k in ("mean", "sum", "max", "min"))


class MetricOp(tuple):
    """(value, update_op) as TF's metrics return, carrying loom's metric."""

    def __new__(cls, graph, m):
        t = super().__new__(cls, (Output(graph, m.value), Output(graph, m.update)))
        t._metric = m
        return t


_graphs = []  # the graphs of the model_fn / hook begin() being called (innermost last)
_features = []  # (graph, the C loom_features) of the model_fn being called: what input_layer reads
_specs = []  # the C loom_estimator_spec of the model_fn being called (what a head's create_estimator_spec fills)


class _GlobalStep:
    """What tf.compat.v1.train.get_global_step() returns outside a model_fn."""


class GlobalStepTensor(Output):
    """The global_step variable's value in a model_fn's graph (what
    tf.compat.v1.train.get_global_step() returns there)."""


def get_global_step(graph=None):
    g = graph if graph is not None else (_graphs[-1] if _graphs else None)
    if g is None:
        return _GlobalStep()
    from .. import _lib_keras as K
    v = K.lib.loom_get_or_create_global_step(g.p)
    g._check()
    return GlobalStepTensor(g, K.lib.loom_variable_output(v))


def _global_step_output(gs):
    """A global step argument as a tensor (None when it is not one)."""
    if isinstance(gs, Output):
        return gs
    if isinstance(gs, _GlobalStep) and _graphs:
        return get_global_step()
    return None


class _MomentumOptions(C.Structure):
    _fields_ = [("struct_size", L.u32), ("momentum", L.dbl), ("use_nesterov", L.i32)]


class _AdagradOptions(C.Structure):
    _fields_ = [("struct_size", L.u32), ("initial_accumulator_value", L.dbl)]


class _AdamOptions(C.Structure):
    _fields_ = [("struct_size", L.u32), ("beta1", L.dbl), ("beta2", L.dbl), ("epsilon", L.dbl), ("lazy", L.i32)]


class _FtrlOptions(C.Structure):
    _fields_ = [("struct_size", L.u32), ("learning_rate_power", L.dbl), ("initial_accumulator_value", L.dbl),
                ("l1", L.dbl), ("l2", L.dbl), ("l2_shrinkage", L.dbl)]


class _AdadeltaOptions(C.Structure):
    _fields_ = [("struct_size", L.u32), ("rho", L.dbl), ("epsilon", L.dbl)]


class _ProximalGradientDescentOptions(C.Structure):
    _fields_ = [("struct_size", L.u32), ("l1", L.dbl), ("l2", L.dbl)]


class _ProximalAdagradOptions(C.Structure):
    _fields_ = [("struct_size", L.u32), ("initial_accumulator_value", L.dbl), ("l1", L.dbl), ("l2", L.dbl)]


class _AdagradDAOptions(C.Structure):
    _fields_ = [("struct_size", L.u32), ("initial_gradient_squared_accumulator_value", L.dbl), ("l1", L.dbl),
                ("l2", L.dbl)]


from .. import _lib_keras as _K  # noqa: E402

for _n, _t in (("momentum", _MomentumOptions), ("adagrad", _AdagradOptions), ("adam", _AdamOptions),
               ("ftrl", _FtrlOptions), ("adadelta", _AdadeltaOptions),
               ("proximal_gradient_descent", _ProximalGradientDescentOptions),
               ("proximal_adagrad", _ProximalAdagradOptions), ("adagrad_da", _AdagradDAOptions)):
    L._d("loom_%s_options_default" % _n, _t)


class _Optimizer:
    """tf.compat.v1.train.*Optimizer: minimize(loss, global_step) adds
    loom's optimizer of the same update rule (loom_train.h), with the
    optimizer's hyperparameters; the learning rate is a number or a tensor
    (a learning-rate decay of the global step)."""
    _kind = None

    def __init__(self, learning_rate, use_locking=False, name=None):
        if not isinstance(learning_rate, (int, float, Output)) or isinstance(learning_rate, bool):
            raise NotImplementedError("loom.tf: %s(learning_rate=%r): give a number or a tensor (a "
                                      "tf.compat.v1.train.*_decay of the global step)"
                                      % (type(self).__name__, learning_rate))
        self.learning_rate = learning_rate if isinstance(learning_rate, Output) else float(learning_rate)
        self._name = name

    def get_name(self):
        return self._name

    def _options(self):
        return None

    def _make(self, lr):
        o = self._options()
        return getattr(lib, "loom_optimizer_" + self._kind)(lr.c, *(() if self._kind == "sgd" else
                                                                   (C.byref(o) if o is not None else None,)))

    def _lr_in(self, g):
        lr = self.learning_rate
        if isinstance(lr, Output):
            if lr.graph.p != g.p:
                raise ValueError("%s: the learning_rate tensor is not in the loss's graph" % type(self).__name__)
            return lr
        return g.constant(np.float32(lr))

    @staticmethod
    def _check_global_step(global_step, what):
        if not isinstance(global_step, (_GlobalStep, GlobalStepTensor)):
            raise NotImplementedError("loom.tf: %s without global_step=tf.compat.v1.train.get_global_step(): "
                                      "the estimator counts steps by it" % what)

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=1, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None):
        what = "%s.minimize" % type(self).__name__
        self._check_global_step(global_step, what + "(loss)")
        for arg, v in (("var_list", var_list), ("aggregation_method", aggregation_method), ("grad_loss", grad_loss)):
            if v is not None:
                raise NotImplementedError("loom.tf: %s(%s=...) is not supported: every trainable variable the loss "
                                          "depends on is trained (or use compute_gradients and apply_gradients)"
                                          % (what, arg))
        g = _g(loss, what)
        lr = self._lr_in(g)
        from .. import Node
        opt = self._make(lr)
        gs = lib.loom_get_or_create_global_step(g.p)
        n = lib.loom_optimizer_minimize(opt, g.p, loss.c, 0, None, gs, _b(name))
        lib.loom_optimizer_free(opt)
        g._check()
        return Node(g, n)

    def compute_gradients(self, loss, var_list=None, gate_gradients=1, aggregation_method=None,
                          colocate_gradients_with_ops=False, grad_loss=None):
        """[(gradient, variable)] of loss for var_list (default: the
        trainable variables, in creation order); the gradient is None where
        the loss does not depend on the variable, an IndexedSlices where
        only rows of it (an embedding lookup) do, as TF's."""
        from ._model_fn_ops import trainable_variables
        from ._clip_ops import Gradient, from_c
        from .. import _Status
        what = "%s.compute_gradients" % type(self).__name__
        for arg, v in (("aggregation_method", aggregation_method), ("grad_loss", grad_loss)):
            if v is not None:
                raise NotImplementedError("loom.tf: %s(%s=...) is not supported" % (what, arg))
        g = _g(loss, what)
        vs = trainable_variables() if var_list is None else list(var_list)
        if not vs:
            raise ValueError("No variables to optimize.")
        for v in vs:
            _variable_of(g, v, what)
        grads = (Gradient * len(vs))()
        st = _Status()
        rc = lib.loom_gradients_sparse(g.p, 1, (L.Output * 1)(loss.c), None, len(vs),
                                       (L.Output * len(vs))(*[v.c for v in vs]), grads, st.p)
        st.raise_if(rc)
        return list(zip(from_c(g, grads, len(vs)), vs))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The train op of one update per (gradient, variable) pair (None
        gradients skipped), then global_step += 1."""
        from ._clip_ops import to_c
        from .. import Node
        what = "%s.apply_gradients" % type(self).__name__
        self._check_global_step(global_step, what + "(grads_and_vars)")
        pairs = list(grads_and_vars)
        if not pairs:
            raise ValueError("No variables provided.")
        if all(gr is None for gr, _ in pairs):
            raise ValueError("No gradients provided for any variable: %s." % ([v.name for _, v in pairs],))
        g = _g(pairs[0][1], what)
        graph, arr = to_c([gr for gr, _ in pairs], what)
        if graph is not None and graph.p != g.p:
            raise ValueError("%s: the gradients are not tensors of the variables' model_fn" % what)
        vars_c = (L.vp * len(pairs))(*[_variable_of(g, v, what) for _, v in pairs])
        opt = self._make(self._lr_in(g))
        gs = lib.loom_get_or_create_global_step(g.p)
        n = lib.loom_optimizer_apply_gradients(opt, g.p, len(pairs), arr, vars_c, gs, _b(name))
        lib.loom_optimizer_free(opt)
        g._check()
        return Node(g, n)


L._d("loom_graph_variable", L.vp, L.vp, L.cs)


def _variable_of(g, v, what):
    """The loom_variable of a variable tensor of the model_fn (what
    trainable_variables / get_variable give)."""
    name = getattr(v, "_var_name", None)
    if name is None and isinstance(v, Output):
        name = v.name.split(":")[0]
    p = lib.loom_graph_variable(g.p, name.encode()) if name and isinstance(v, Output) and v.graph.p == g.p else None
    if not p:
        raise ValueError("%s: %r is not a variable of the model_fn (give what tf.compat.v1.trainable_variables() "
                         "or get_variable returned)" % (what, v))
    return p


def _opts(kind, **fields):
    o = getattr(lib, "loom_%s_options_default" % kind)()
    for k, v in fields.items():
        setattr(o, k, v)
    return o


class GradientDescentOptimizer(_Optimizer):
    _kind = "sgd"

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(learning_rate, use_locking, name)


class MomentumOptimizer(_Optimizer):
    _kind = "momentum"

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False):
        super().__init__(learning_rate, use_locking, name)
        self._o = dict(momentum=float(momentum), use_nesterov=int(bool(use_nesterov)))

    def _options(self):
        return _opts("momentum", **self._o)


class AdagradOptimizer(_Optimizer):
    _kind = "adagrad"

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"):
        super().__init__(learning_rate, use_locking, name)
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: %s" % initial_accumulator_value)
        self._o = dict(initial_accumulator_value=float(initial_accumulator_value))

    def _options(self):
        return _opts("adagrad", **self._o)


class AdamOptimizer(_Optimizer):
    _kind = "adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, use_locking=False, name="Adam"):
        super().__init__(learning_rate, use_locking, name)
        self._o = dict(beta1=float(beta1), beta2=float(beta2), epsilon=float(epsilon))

    def _options(self):
        return _opts("adam", **self._o)


class FtrlOptimizer(_Optimizer):
    _kind = "ftrl"

    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, use_locking=False, name="Ftrl",
                 accum_name=None, linear_name=None, l2_shrinkage_regularization_strength=0.0, beta=None):
        super().__init__(learning_rate, use_locking, name)
        for arg, v, ok in (("learning_rate_power", learning_rate_power, learning_rate_power <= 0),
                           ("initial_accumulator_value", initial_accumulator_value, initial_accumulator_value >= 0),
                           ("l1_regularization_strength", l1_regularization_strength,
                            l1_regularization_strength >= 0),
                           ("l2_regularization_strength", l2_regularization_strength,
                            l2_regularization_strength >= 0),
                           ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength,
                            l2_shrinkage_regularization_strength >= 0)):
            if not ok:
                raise ValueError("%s %s must be %s" % (arg, v, "less than or equal to zero"
                                                       if arg == "learning_rate_power" else "non-negative"))
        if beta not in (None, 0, 0.0):
            raise NotImplementedError("loom.tf: FtrlOptimizer(beta=...) is not supported (loom's FTRL has beta 0)")
        self._o = dict(learning_rate_power=float(learning_rate_power),
                       initial_accumulator_value=float(initial_accumulator_value),
                       l1=float(l1_regularization_strength), l2=float(l2_regularization_strength),
                       l2_shrinkage=float(l2_shrinkage_regularization_strength))

    def _options(self):
        return _opts("ftrl", **self._o)


class RMSPropOptimizer(_Optimizer):
    _kind = "rmsprop"

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False, centered=False,
                 name="RMSProp"):
        super().__init__(learning_rate, use_locking, name)
        self._o = dict(decay=float(decay), momentum=float(momentum), epsilon=float(epsilon),
                       centered=int(bool(centered)))

    def _options(self):  # TF 1's RMSPropOptimizer: the mean square starts at 1.0 (loom's default)
        return _opts("rmsprop", **self._o)


class AdadeltaOptimizer(_Optimizer):
    _kind = "adadelta"

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-08, use_locking=False, name="Adadelta"):
        super().__init__(learning_rate, use_locking, name)
        self._o = dict(rho=float(rho), epsilon=float(epsilon))

    def _options(self):
        return _opts("adadelta", **self._o)


def _check_nonnegative(cls, **strengths):
    for arg, v in strengths.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0:
            raise ValueError("%s: %s must be a number >= 0, got %r" % (cls, arg, v))
    return {k.split("_")[0]: float(v) for k, v in strengths.items()}  # l1, l2


class ProximalGradientDescentOptimizer(_Optimizer):
    """FOBOS: a gradient-descent step, then the proximal step of the l1 and l2 penalties."""
    _kind = "proximal_gradient_descent"

    def __init__(self, learning_rate, l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="ProximalGradientDescent"):
        super().__init__(learning_rate, use_locking, name)
        self._o = _check_nonnegative(type(self).__name__, l1_regularization_strength=l1_regularization_strength,
                                     l2_regularization_strength=l2_regularization_strength)

    def _options(self):
        return _opts("proximal_gradient_descent", **self._o)


class ProximalAdagradOptimizer(_Optimizer):
    """FOBOS with Adagrad's per-element learning rate (slot "accumulator")."""
    _kind = "proximal_adagrad"

    def __init__(self, learning_rate, initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False, name="ProximalAdagrad"):
        super().__init__(learning_rate, use_locking, name)
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: %s" % initial_accumulator_value)
        self._o = _check_nonnegative(type(self).__name__, l1_regularization_strength=l1_regularization_strength,
                                     l2_regularization_strength=l2_regularization_strength)
        self._o["initial_accumulator_value"] = float(initial_accumulator_value)

    def _options(self):
        return _opts("proximal_adagrad", **self._o)


class AdagradDAOptimizer(_Optimizer):
    """Adagrad dual averaging (slots "gradient_accumulator" and "gradient_squared_accumulator"). Its update
    reads the global step: give the global step it is constructed with to minimize too (as TF's programs do);
    the update uses that step + 1, read before minimize increments it."""
    _kind = "adagrad_da"

    def __init__(self, learning_rate, global_step, initial_gradient_squared_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, use_locking=False,
                 name="AdagradDA"):
        super().__init__(learning_rate, use_locking, name)
        if not isinstance(global_step, (_GlobalStep, GlobalStepTensor)):
            raise NotImplementedError("loom.tf: AdagradDAOptimizer(global_step=%r): give "
                                      "tf.compat.v1.train.get_global_step() (loom's AdagradDA reads the global step "
                                      "minimize increments)" % (global_step,))
        if initial_gradient_squared_accumulator_value <= 0.0:
            raise ValueError("initial_gradient_squared_accumulator_value must be positive: %s"
                             % initial_gradient_squared_accumulator_value)
        self._global_step = global_step
        self._o = _check_nonnegative(type(self).__name__, l1_regularization_strength=l1_regularization_strength,
                                     l2_regularization_strength=l2_regularization_strength)
        self._o["initial_gradient_squared_accumulator_value"] = float(initial_gradient_squared_accumulator_value)

    def _options(self):
        return _opts("adagrad_da", **self._o)


def _pair(v, what):
    v = (v, v) if isinstance(v, int) else tuple(v)
    if len(v) != 2:
        raise ValueError("%s must be an int or a pair, got %r" % (what, v))
    return (L.i64 * 2)(*[int(d) for d in v])


def _padding(p):
    p = p.lower()
    if p not in ("valid", "same"):
        raise ValueError("padding must be 'valid' or 'same', got %r" % p)
    return p.encode()


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
           dilation_rate=(1, 1), activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None,
           kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):
    """tf.compat.v1.layers.conv2d (channels_last; variables <name>/kernel,
    <name>/bias; initializers and regularizers as dense's)."""
    from .nn import activation_name
    what = "tf.compat.v1.layers.conv2d"
    if data_format != "channels_last":
        raise NotImplementedError("loom.tf: %s(data_format=%r): channels_last only" % (what, data_format))
    g = _g(inputs, what)
    o = lib.loom_conv2d_options_default()
    _layer_options(o, what, kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer, trainable,
                   dict(activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                        bias_constraint=bias_constraint, reuse=reuse or None))
    o.strides = _pair(strides, "strides")
    o.dilation_rate = _pair(dilation_rate, "dilation_rate")
    o.padding = _padding(padding)
    o.activation = None if activation is None else activation_name(activation, "activation").encode()
    o.use_bias = int(bool(use_bias))
    return g._out(lib.loom_layers_conv2d(g.p, inputs.c, int(filters), _pair(kernel_size, "kernel_size"),
                                         C.byref(o), _b(name)))


def _pool(fn, what):
    def f(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
        if data_format != "channels_last":
            raise NotImplementedError("loom.tf: %s takes channels_last only" % what)
        g = _g(inputs, what)
        return g._out(fn(g.p, inputs.c, _pair(pool_size, "pool_size"), _pair(strides, "strides"), _padding(padding),
                         _b(name)))
    return f


max_pooling2d = _pool(lib.loom_layers_max_pooling2d, "tf.compat.v1.layers.max_pooling2d")
average_pooling2d = _pool(lib.loom_layers_average_pooling2d, "tf.compat.v1.layers.average_pooling2d")


def flatten(inputs, name=None, data_format="channels_last"):
    if data_format != "channels_last":
        raise NotImplementedError("loom.tf: tf.compat.v1.layers.flatten takes channels_last only (channels_first "
                                  "flattens in another order)")
    g = _g(inputs, "tf.compat.v1.layers.flatten")
    return g._out(lib.loom_layers_flatten(g.p, inputs.c, _b(name)))


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """tf.compat.v1.layers.dropout: `training` a Python bool (mode == TRAIN)."""
    if noise_shape is not None or not isinstance(training, bool):
        raise NotImplementedError("loom.tf: tf.compat.v1.layers.dropout takes training as a Python bool "
                                  "(mode == tf.estimator.ModeKeys.TRAIN) and no noise_shape")
    g = _g(inputs, "tf.compat.v1.layers.dropout")
    o = lib.loom_dropout_options_default()
    o.training = int(training)
    if seed is not None:
        o.seed = int(seed)
    return g._out(lib.loom_layers_dropout(g.p, inputs.c, float(rate), C.byref(o), _b(name)))
