"""tf.compat.v1.get_variable in a model_fn (loom_get_variable under the
current variable scope; the initializers are _initializers'), tf.Variable
(loom_variable_new), the random tensors tf.random.truncated_normal / normal / uniform (loom_random.h, seeds
resolved with TF's graph and op seed rules), and tf.nn.embedding_lookup."""
import ctypes as C

import numpy as np

from .. import _lib as L
from .. import _lib_keras as K
from .._lib import lib
from .. import Output, _b, _dtype
from . import dtypes as _dt
from . import ops as _ops
from . import _model_fn_ops as _mfo

from ._initializers import (_Init, _seed, zeros_initializer, ones_initializer, constant_initializer,  # noqa: F401
                            random_uniform_initializer, random_normal_initializer, truncated_normal_initializer,
                            glorot_uniform_initializer, glorot_normal_initializer)


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None, collections=None,
                 caching_device=None, partitioner=None, validate_shape=True, use_resource=None, custom_getter=None,
                 constraint=None, synchronization=None, aggregation=None):
    """tf.compat.v1.get_variable in a model_fn: "<variable scope>/<name>" with
    TF's default initializer (glorot_uniform for floats, zeros for ints);
    returns its value as a tensor of the model_fn."""
    what = "tf.compat.v1.get_variable"
    for arg, v in (("collections", collections), ("caching_device", caching_device),
                   ("partitioner", partitioner), ("custom_getter", custom_getter), ("constraint", constraint)):
        if v is not None:
            raise NotImplementedError("loom.tf: %s(%s=...) is not supported" % (what, arg))
    if not _ops._graphs:
        raise NotImplementedError("loom.tf: %s outside a model_fn: loom.tf builds variables only in a model_fn"
                                  % what)
    g = _ops._graphs[-1]
    dt = _dt.as_dtype(dtype).as_numpy_dtype if dtype is not None else np.float32
    if shape is None:
        raise ValueError("%s: Shape of a new variable (%s) must be fully defined, but instead was None." %
                         (what, name))
    dims = [int(d) for d in shape]
    if initializer is None:
        init = lib.loom_init_glorot_uniform(K.SEED_NONE) if np.dtype(dt).kind == "f" else lib.loom_init_zeros()
    elif isinstance(initializer, _Init):
        init = initializer._c()
    elif isinstance(initializer, (int, float)):
        init = lib.loom_init_constant(float(initializer))
    else:
        raise NotImplementedError("loom.tf: %s(initializer=%r): give a tf.compat.v1 initializer (zeros_initializer, "
                                  "constant_initializer, random_normal_initializer, glorot_uniform_initializer, "
                                  "...) or a number" % (what, initializer))
    arr = (L.i64 * max(1, len(dims)))(*dims)
    v = lib.loom_get_variable(g.p, _b(name), _dtype(dt), len(dims), arr, L.P(L.Initializer)(init),
                              1 if trainable is None else int(bool(trainable)))
    g._check()
    out = Output(g, lib.loom_variable_output(v))
    if regularizer is not None:  # TF: the penalty of the variable into REGULARIZATION_LOSSES (None: none)
        penalty = regularizer(out)
        if penalty is not None:
            _mfo.add_to_collection("regularization_losses", penalty)
    return out


def embedding_lookup(params, ids, max_norm=None, name=None):
    """tf.nn.embedding_lookup of one params tensor: rows of params at ids."""
    if isinstance(params, (list, tuple)):
        if len(params) != 1:
            raise NotImplementedError("loom.tf: tf.nn.embedding_lookup of partitioned params is not supported")
        params = params[0]
    if max_norm is not None:
        raise NotImplementedError("loom.tf: tf.nn.embedding_lookup(max_norm=...) is not supported")
    from ._array_ops import gather
    return gather(params, ids, axis=0, name=name)


L._d("loom_variable_new", L.vp, L.vp, L.Output, L.cint, L.u32, L.cs)
L._d("loom_graph_get_seed", L.cint, L.vp, L.i64, L.cint, L.P(L.i64), L.P(L.i64))
for _n in ("random_uniform", "random_normal", "truncated_normal"):
    L._d("loom_" + _n, L.Output, L.vp, L.cint, L.P(L.i64), L.cint, L.dbl, L.dbl, C.c_uint64, C.c_uint64, L.cs)


def _model_graph(what):
    if not _ops._graphs:
        raise NotImplementedError("loom.tf: %s outside a model_fn: loom.tf builds graph tensors only in a "
                                  "model_fn (for numpy values use numpy)" % what)
    return _ops._graphs[-1]


def Variable(initial_value=None, trainable=None, validate_shape=True, caching_device=None, name=None,  # noqa: N802
             variable_def=None, dtype=None, import_scope=None, constraint=None, synchronization=None,
             aggregation=None, shape=None):
    """tf.Variable in a model_fn: a new variable ("Variable", made unique under
    the name scope, or name) whose initial value is initial_value (a tensor of
    the model_fn such as tf.random.truncated_normal(...), a number, a numpy
    array, or a callable returning one); returns its value as a tensor of the
    model_fn, as tf.compat.v1.get_variable does."""
    what = "tf.Variable"
    for arg, v in (("caching_device", caching_device), ("variable_def", variable_def),
                   ("import_scope", import_scope), ("constraint", constraint), ("shape", shape)):
        if v is not None:
            raise NotImplementedError("loom.tf: %s(%s=...) is not supported" % (what, arg))
    if initial_value is None:
        raise ValueError("%s: initial_value must be specified" % what)
    g = _model_graph(what)
    if callable(initial_value):
        initial_value = initial_value()
    if isinstance(initial_value, Output):
        init = initial_value
        if dtype is not None and np.dtype(_dt.as_dtype(dtype).as_numpy_dtype) != np.dtype(init.dtype):
            init = g.cast(init, _dt.as_dtype(dtype).as_numpy_dtype)
    else:
        a = np.asarray(initial_value, _dt.as_dtype(dtype).as_numpy_dtype if dtype is not None else None)
        if dtype is None and a.dtype == np.float64:
            a = a.astype(np.float32)  # Python floats: float32, as TF
        elif dtype is None and a.dtype == np.int64 and not isinstance(initial_value, np.ndarray):
            a = a.astype(np.int32)
        init = g.constant(a)
    v = lib.loom_variable_new(g.p, init.c, 1 if trainable is None else int(bool(trainable)), 0,
                              _b(name or "Variable"))
    g._check()
    return Output(g, lib.loom_variable_output(v))


def _random(c_name, what, a_name, b_name):
    def f(shape, a=None, b=None, dtype=_dt.float32, seed=None, name=None):
        g = _model_graph(what)
        if isinstance(shape, Output):
            raise NotImplementedError("loom.tf: %s(shape=<tensor>) is not supported: give the shape as a list of "
                                      "ints" % what)
        dims = [int(d) for d in shape]
        dt = _dt.as_dtype(dtype).as_numpy_dtype
        if np.dtype(dt).kind != "f":
            raise NotImplementedError("loom.tf: %s(dtype=%r): float32 or float64 only" % (what, dtype))
        s, s2 = L.i64(), L.i64()
        lib.loom_graph_get_seed(g.p, 0 if seed is None else int(seed), int(seed is not None), C.byref(s),
                                C.byref(s2))
        return g._out(getattr(lib, "loom_" + c_name)(g.p, len(dims), (L.i64 * max(1, len(dims)))(*dims),
                                                      _dtype(dt), float(a), float(b), s.value & (2 ** 64 - 1),
                                                      s2.value & (2 ** 64 - 1), _b(name)))
    return f


_truncated = _random("truncated_normal", "tf.random.truncated_normal", "mean", "stddev")
_normal = _random("random_normal", "tf.random.normal", "mean", "stddev")
_uniform = _random("random_uniform", "tf.random.uniform", "minval", "maxval")


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None, name=None):
    """tf.random.truncated_normal in a model_fn: normal values redrawn until
    within two stddevs of the mean."""
    return _truncated(shape, mean, stddev, dtype, seed, name)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None, name=None):
    """tf.random.normal in a model_fn."""
    return _normal(shape, mean, stddev, dtype, seed, name)


def random_uniform(shape, minval=0, maxval=None, dtype=_dt.float32, seed=None, name=None):
    """tf.random.uniform in a model_fn (float dtypes; maxval defaults to 1)."""
    return _uniform(shape, minval, 1.0 if maxval is None else maxval, dtype, seed, name)
