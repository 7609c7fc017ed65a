"""loom for Python: graphs, sessions, the resident predictor, datasets,
feature columns of every kind (loom.feature_column), Estimators (custom
model_fn; the canned DNN, Linear, wide & deep DNNLinearCombined and Baseline
models), RunConfig, train_and_evaluate with TrainSpec / EvalSpec and the
Latest / Best / Final exporters, warm starting (WarmStartSettings,
VocabInfo), over loom's public C API (ctypes). loom.tf
(TF 2.15's Estimator API) is built on these.

    import numpy as np, loom
    g = loom.Graph()
    x = g.placeholder(np.float32, (None, 2), "x")
    y = g.matmul(x, g.constant(np.eye(2, dtype=np.float32)))
    with loom.Session(g) as s:
        print(s.run(y, {x: np.ones((3, 2), np.float32)}))
"""
import ctypes as C
import os
import tempfile
import threading

import numpy as np

from . import _lib as L
from ._lib import lib, LIBRARY_PATH

__all__ = ["LoomError", "Graph", "Output", "Session", "Predictor", "Dataset", "FeatureColumns", "Estimator",
           "EstimatorSpec", "DNNClassifier", "DNNRegressor", "LinearClassifier", "LinearRegressor",
           "BaselineClassifier", "BaselineRegressor", "DNNLinearCombinedClassifier",
           "DNNLinearCombinedRegressor", "ModeKeys", "version", "LIBRARY_PATH", "serialize_example", "export_onnx",
           "feature_column", "RunConfig", "TrainSpec", "EvalSpec", "train_and_evaluate", "LatestExporter",
           "BestExporter", "FinalExporter", "WarmStartSettings", "VocabInfo"]

F32, F64, I32, I64, U8, BOOL, STRING = 1, 2, 3, 4, 5, 6, 7
_NP2LOOM = {np.dtype(np.float32): F32, np.dtype(np.float64): F64, np.dtype(np.int32): I32,
            np.dtype(np.int64): I64, np.dtype(np.uint8): U8, np.dtype(np.bool_): BOOL}
_LOOM2NP = {v: k for k, v in _NP2LOOM.items()}


def version():
    return lib.loom_version().decode()


class LoomError(RuntimeError):
    """A loom call failed: .code is the loom_code (TF's canonical code),
    .code_name its name, the message names what was wrong."""

    def __init__(self, code, message):
        self.code = code
        self.code_name = lib.loom_code_name(code).decode()
        super().__init__("%s: %s" % (self.code_name, message))


_callback_errors = []  # exceptions of Python callbacks with no status of their own (normalizer_fn)


def _set_callback_error(e):
    """Records e, raised in a Python callback that C calls without a status
    (a numeric_column normalizer_fn): the next failing status check raises
    it instead of loom's error."""
    _callback_errors[:] = [e]


def _take_callback_error():
    return _callback_errors.pop() if _callback_errors else None


class _Status:
    def __init__(self):
        self.p = lib.loom_status_new()

    def __del__(self):
        if getattr(self, "p", None):
            lib.loom_status_free(self.p)
            self.p = None

    def raise_if(self, rc=None):
        code = lib.loom_status_code(self.p) if rc is None else rc
        if code:
            exc = _take_callback_error()
            if exc is not None:  # a Python callback C called (a normalizer_fn) raised: that is the error
                raise exc
            msg = lib.loom_status_message(self.p).decode(errors="replace")
            raise LoomError(code, msg)


def _b(s):
    return None if s is None else (s.encode() if isinstance(s, str) else s)


def _dtype(dt):
    """A numpy dtype (or type) -> loom_dtype; str, bytes, object: strings."""
    if isinstance(dt, int):
        return dt
    d = np.dtype(dt)
    if d.kind in "USO":
        return STRING
    if d not in _NP2LOOM:
        raise TypeError("loom: no loom dtype for numpy dtype %s" % d)
    return _NP2LOOM[d]


def _dims(shape):
    shape = tuple(-1 if d is None else int(d) for d in shape)
    return len(shape), (L.i64 * max(1, len(shape)))(*shape)


# ---------------------------------------------------------------- tensors
# numpy arrays handed to loom_tensor_wrap stay referenced here until loom
# calls the deallocator (the tensor is freed): zero copy, no dangling buffer.
_wrapped = {}
_wrapped_lock = threading.Lock()


@L.DEALLOC
def _release(data, nbytes, arg):
    with _wrapped_lock:
        _wrapped.pop(arg, None)


def _to_tensor(a, dtype=None):
    """numpy -> a new loom_tensor (caller frees). Zero copy when the array is
    C-contiguous and already of the loom dtype (loom_tensor_wrap keeps a
    reference until loom frees the tensor); strings are copied."""
    st = _Status()
    if dtype == STRING or (dtype is None and isinstance(a, np.ndarray) and a.dtype.kind in "USO"):
        # not a bytes ("S") array: numpy drops a bytes value's trailing NULs (serialized protobufs have them)
        a = a if isinstance(a, np.ndarray) else np.asarray(a, dtype=object)
        n, dims = _dims(a.shape)
        t = lib.loom_tensor_new(STRING, n, dims, st.p)
        if not t:
            st.raise_if()
        for i, v in enumerate(a.reshape(-1)):
            v = v.encode() if isinstance(v, str) else bytes(v)
            lib.loom_tensor_set_string(t, i, v, len(v), st.p)
        return t
    a = np.asarray(a) if _LOOM2NP.get(dtype) is None else np.asarray(a, dtype=_LOOM2NP[dtype])
    if a.dtype not in _NP2LOOM:
        a = a.astype(np.float32) if a.dtype.kind == "f" else a.astype(np.int64)
    a = a if a.flags.c_contiguous else np.array(a, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    n, dims = _dims(a.shape)
    with _wrapped_lock:
        key = id(a)
        while key in _wrapped:  # the same array wrapped twice: another key
            key += 1
        _wrapped[key] = a
    t = lib.loom_tensor_wrap(_NP2LOOM[a.dtype], n, dims, a.ctypes.data if a.nbytes else None, a.nbytes, _release,
                             key, st.p)
    if not t:
        with _wrapped_lock:
            _wrapped.pop(key, None)
        st.raise_if()
    return t


class _Owned:
    """Owns a loom_tensor and exposes its buffer to numpy (zero copy out):
    the tensor is freed when the last array viewing it goes away."""

    def __init__(self, t, dt, shape):
        self.t = t
        self.__array_interface__ = {"shape": shape, "typestr": np.dtype(_LOOM2NP[dt]).str,
                                    "data": (lib.loom_tensor_data(t) or 0, False), "version": 3}

    def __del__(self):
        lib.loom_tensor_free(self.t)


def _tensor_info(t):
    dt = lib.loom_tensor_dtype(t)
    nd = lib.loom_tensor_ndim(t)
    dp = lib.loom_tensor_dims(t)
    return dt, tuple(dp[i] for i in range(nd))


def _strings(t, shape):
    n = lib.loom_tensor_numel(t)
    ln = C.c_size_t()
    out = np.empty(n, dtype=object)
    for i in range(n):
        p = lib.loom_tensor_get_string(t, i, C.byref(ln))
        out[i] = C.string_at(p, ln.value) if p else b""
    return out.reshape(shape)


def _from_tensor(t, take=False):
    """loom_tensor -> numpy. take: the array takes the tensor over (zero copy);
    else the values are copied (the tensor stays its owner's)."""
    dt, shape = _tensor_info(t)
    if dt == STRING:
        out = _strings(t, shape)
        if take:
            lib.loom_tensor_free(t)
        return out
    if take:
        return np.asarray(_Owned(t, dt, shape))
    n = lib.loom_tensor_nbytes(t)
    out = np.empty(shape, dtype=_LOOM2NP[dt])
    if n:
        C.memmove(out.ctypes.data, lib.loom_tensor_data(t), n)
    return out


# ---------------------------------------------------------------- graphs
class Output:
    """One output of one node (loom_output) of a Graph; supports + - * / @ and
    unary -."""

    __slots__ = ("graph", "c")

    def __init__(self, graph, c):
        self.graph = graph
        self.c = c

    @property
    def name(self):
        n = lib.loom_node_name(self.c.node).decode()
        return n if self.c.index == 0 else "%s:%d" % (n, self.c.index)

    @property
    def op(self):
        return lib.loom_node_op_name(self.c.node).decode()

    @property
    def dtype(self):
        return _LOOM2NP.get(lib.loom_output_dtype(self.c), object)

    @property
    def shape(self):
        d = (L.i64 * 8)()
        n = lib.loom_output_dims(self.c, d)
        return tuple(None if d[i] < 0 else d[i] for i in range(n))

    def __repr__(self):
        return "<loom.Output %s %s %s>" % (self.name, np.dtype(self.dtype).name, self.shape)

    def _o(self, other):
        return other if isinstance(other, Output) else self.graph.constant(np.asarray(other, dtype=self.dtype))

    def __add__(self, o): return self.graph.add(self, self._o(o))
    def __radd__(self, o): return self.graph.add(self._o(o), self)
    def __sub__(self, o): return self.graph.sub(self, self._o(o))
    def __rsub__(self, o): return self.graph.sub(self._o(o), self)
    def __mul__(self, o): return self.graph.mul(self, self._o(o))
    def __rmul__(self, o): return self.graph.mul(self._o(o), self)
    def __truediv__(self, o): return self.graph.div(self, self._o(o))
    def __matmul__(self, o): return self.graph.matmul(self, self._o(o))
    def __neg__(self): return self.graph.neg(self)

    def __getitem__(self, key):
        """Basic indexing as TF's strided slice with step 1: ints (the axis is
        dropped), slices a:b, `...` and None (a new axis of size 1)."""
        return _getitem(self, key)


def _getitem(x, key):
    key = key if isinstance(key, tuple) else (key,)
    shape = list(x.shape)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_axes = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_axes > len(shape):
        raise IndexError("too many indices for a tensor of rank %d" % len(shape))
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - n_axes) + key[i + 1:]
    else:
        key = key + (slice(None),) * (len(shape) - n_axes)
    begin, size, drop, new_axes, axis, out_axis = [], [], [], [], 0, 0
    for k in key:
        if k is None:
            new_axes.append(out_axis)
            out_axis += 1
            continue
        d = shape[axis]
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            k = int(k)
            if k < 0:
                if d is None:
                    raise NotImplementedError("loom: a negative index on the unknown dim %d; slice from the "
                                              "start" % axis)
                k += d
            if d is not None and not 0 <= k < d:
                raise IndexError("index %d is out of range for dim %d of size %d" % (k, axis, d))
            begin.append(k)
            size.append(1)
            drop.append(axis)
        elif isinstance(k, slice):
            if k.step not in (None, 1):
                raise NotImplementedError("loom: tensor slices with a step (%r) are not supported" % (k.step,))
            a, b = k.start, k.stop
            if (a is not None and a < 0) or (b is not None and b < 0):
                if d is None:
                    raise NotImplementedError("loom: negative slice bounds on the unknown dim %d" % axis)
                a = None if a is None else (a + d if a < 0 else a)
                b = None if b is None else (b + d if b < 0 else b)
            a = 0 if a is None else (min(a, d) if d is not None else a)
            if b is None:
                sz = -1
            else:
                b = min(b, d) if d is not None else b
                sz = max(0, b - a)
            begin.append(a)
            size.append(sz)
            out_axis += 1
        else:
            raise TypeError("loom: tensor indices must be ints, slices, ... or None, got %r" % (k,))
        axis += 1
    g = x.graph
    n = len(begin)
    y = g._out(lib.loom_slice(g.p, x.c, (L.i64 * n)(*begin), (L.i64 * n)(*size), None))
    if drop:
        y = g._out(lib.loom_squeeze(g.p, y.c, len(drop), (L.i64 * len(drop))(*drop), None))
    for a in new_axes:
        y = g._out(lib.loom_expand_dims(g.p, y.c, a, None))
    return y


class Node:
    """A node run for its effects (a train op, an initializer)."""

    def __init__(self, graph, p):
        self.graph = graph
        self.p = p


class Graph:
    """A loom_graph. Builders raise LoomError at the first failure (loom
    records it in the graph, sticky; the binding checks after each call)."""

    def __init__(self, _borrow=None):
        self._own = _borrow is None
        self.p = lib.loom_graph_new() if _borrow is None else _borrow
        if not self.p:
            raise MemoryError("loom_graph_new")
        self._keep = []

    def __del__(self):
        if getattr(self, "_own", False) and self.p:
            lib.loom_graph_free(self.p)
            self.p = None

    def _check(self):
        st = _Status()
        rc = lib.loom_graph_status(self.p, st.p)
        st.raise_if(rc)

    def _out(self, c):
        self._check()
        return Output(self, c)

    def set_random_seed(self, seed):
        lib.loom_graph_set_random_seed(self.p, seed)

    def num_nodes(self):
        return lib.loom_graph_num_nodes(self.p)

    def get(self, name):
        """The output called "name" or "name:1"."""
        c = lib.loom_graph_find_output(self.p, _b(name))
        if not c.node:
            raise KeyError(name)
        return Output(self, c)

    # ---- sources
    def placeholder(self, dtype, shape, name=None):
        n, dims = _dims(shape)
        return self._out(lib.loom_placeholder(self.p, _dtype(dtype), n, dims, _b(name)))

    def constant(self, value, dtype=None, name=None):
        a = np.array(value, dtype=dtype, order="C")
        if a.dtype == np.float64 and dtype is None and not isinstance(value, np.ndarray):
            a = a.astype(np.float32)  # Python floats: float32, as TF
        if a.dtype == np.int64 and dtype is None and not isinstance(value, np.ndarray):
            a = a.astype(np.int32)
        n, dims = _dims(a.shape)
        return self._out(lib.loom_const_data(self.p, _dtype(a.dtype), n, dims, a.ctypes.data, _b(name)))

    # ---- ops
    def _bin(fn):
        def f(self, a, b, name=None):
            return self._out(fn(self.p, a.c, b.c, _b(name)))
        return f

    def _un(fn):
        def f(self, x, name=None):
            return self._out(fn(self.p, x.c, _b(name)))
        return f

    add = _bin(lib.loom_add)
    sub = _bin(lib.loom_sub)
    mul = _bin(lib.loom_mul)
    div = _bin(lib.loom_div)
    pow = _bin(lib.loom_pow)
    maximum = _bin(lib.loom_maximum)
    minimum = _bin(lib.loom_minimum)
    equal = _bin(lib.loom_equal)
    less = _bin(lib.loom_less)
    greater = _bin(lib.loom_greater)
    bias_add = _bin(lib.loom_bias_add)
    neg = _un(lib.loom_neg)
    abs = _un(lib.loom_abs)
    exp = _un(lib.loom_exp)
    log = _un(lib.loom_log)
    sqrt = _un(lib.loom_sqrt)
    square = _un(lib.loom_square)
    tanh = _un(lib.loom_tanh)
    sigmoid = _un(lib.loom_sigmoid)
    relu = _un(lib.loom_relu)
    softplus = _un(lib.loom_softplus)
    softmax = _un(lib.loom_softmax)
    log_softmax = _un(lib.loom_log_softmax)
    stop_gradient = _un(lib.loom_stop_gradient)
    identity = _un(lib.loom_identity)
    del _bin, _un

    def matmul(self, a, b, transpose_a=False, transpose_b=False, name=None):
        return self._out(lib.loom_matmul(self.p, a.c, b.c, int(transpose_a), int(transpose_b), _b(name)))

    def reshape(self, x, shape, name=None):
        n, dims = _dims(shape)
        return self._out(lib.loom_reshape(self.p, x.c, n, dims, _b(name)))

    def transpose(self, x, perm, name=None):
        n, dims = _dims(perm)
        return self._out(lib.loom_transpose(self.p, x.c, n, dims, _b(name)))

    def concat(self, xs, axis, name=None):
        arr = (L.Output * len(xs))(*[x.c for x in xs])
        return self._out(lib.loom_concat(self.p, len(xs), arr, axis, _b(name)))

    def cast(self, x, dtype, name=None):
        return self._out(lib.loom_cast(self.p, x.c, _dtype(dtype), _b(name)))

    def argmax(self, x, axis=-1, dtype=np.int64, name=None):
        return self._out(lib.loom_argmax(self.p, x.c, axis, _dtype(dtype), _b(name)))

    def _reduce(fn):
        def f(self, x, axis=None, keepdims=False, name=None):
            if axis is None:
                return self._out(fn(self.p, x.c, -1, None, int(keepdims), _b(name)))
            axes = (axis,) if isinstance(axis, int) else tuple(axis)
            n, dims = _dims(axes)
            return self._out(fn(self.p, x.c, n, dims, int(keepdims), _b(name)))
        return f

    reduce_sum = _reduce(lib.loom_reduce_sum)
    reduce_mean = _reduce(lib.loom_reduce_mean)
    reduce_max = _reduce(lib.loom_reduce_max)
    reduce_min = _reduce(lib.loom_reduce_min)
    del _reduce

    def sparse_softmax_cross_entropy_with_logits(self, logits, labels, name=None):
        loss = L.Output()
        lib.loom_sparse_softmax_cross_entropy_with_logits(self.p, logits.c, labels.c, C.byref(loss), None, _b(name))
        return self._out(loss)

    def mean_squared_error(self, labels, predictions, name=None):
        """tf.losses.mean_squared_error (SUM_BY_NONZERO_WEIGHTS, no weights)."""
        return self._out(lib.loom_losses_mean_squared_error(self.p, labels.c, predictions.c, L.Output(), _b(name),
                                                            None, 0))

    # ---- layers, variables, training
    def dense(self, x, units, activation=None, use_bias=True, kernel_initializer=None, seed=None, name=None):
        """tf.layers.dense: variables <name>/kernel and <name>/bias."""
        o = lib.loom_dense_options_default()
        o.activation = _b(activation)
        o.use_bias = int(use_bias)
        if kernel_initializer == "zeros":
            o.kernel_initializer = lib.loom_init_zeros()
        elif seed is not None:
            o.kernel_initializer = lib.loom_init_glorot_uniform(seed)
        return self._out(lib.loom_layers_dense(self.p, x.c, units, C.byref(o), _b(name)))

    def variable(self, name, shape, dtype=np.float32, initializer=0.0, trainable=True):
        """tf.get_variable with a constant initializer (a number) or
        "glorot_uniform"; a numpy array of the variable's shape is its
        initial value (tf.Variable(initial_value))."""
        if isinstance(initializer, np.ndarray):
            a = np.ascontiguousarray(initializer, dtype=dtype)
            if tuple(a.shape) != tuple(int(d) for d in shape):
                raise ValueError("Graph.variable(%r): the initializer's shape %s is not the variable's shape %s"
                                 % (name, tuple(a.shape), tuple(shape)))
            v = lib.loom_variable_new(self.p, self.constant(a, name=name + "/initial_value").c, int(trainable), 0,
                                      _b(name))
            self._check()
            return self._out(lib.loom_variable_output(v))
        n, dims = _dims(shape)
        init = lib.loom_init_glorot_uniform(-1 << 62) if initializer == "glorot_uniform" else \
            lib.loom_init_constant(float(initializer))
        v = lib.loom_get_variable(self.p, _b(name), _dtype(dtype), n, dims, C.byref(init), int(trainable))
        self._check()
        return self._out(lib.loom_variable_output(v))

    def global_variables_initializer(self):
        n = lib.loom_global_variables_initializer(self.p)
        self._check()
        return Node(self, n)

    def minimize(self, loss, optimizer="sgd", learning_rate=0.01, name=None):
        """optimizer ("sgd", "adam", "adagrad", "proximal_gradient_descent", "proximal_adagrad",
        "adagrad_da", each with TF's defaults).minimize(loss, global_step)."""
        lr = self.constant(np.float32(learning_rate))
        kinds = ("sgd", "adam", "adagrad", "proximal_gradient_descent", "proximal_adagrad", "adagrad_da")
        if optimizer.lower() not in kinds:
            raise ValueError("Graph.minimize: optimizer %r is not one of %s" % (optimizer, ", ".join(kinds)))
        make = {"sgd": lambda: lib.loom_optimizer_sgd(lr.c)}.get(
            optimizer.lower(), lambda: getattr(lib, "loom_optimizer_" + optimizer.lower())(lr.c, None))
        opt = make()
        gs = lib.loom_get_or_create_global_step(self.p)
        n = lib.loom_optimizer_minimize(opt, self.p, loss.c, 0, None, gs, _b(name))
        lib.loom_optimizer_free(opt)
        self._check()
        return Node(self, n)


# ---------------------------------------------------------------- sessions
class Session:
    """Runs a Graph. run(fetches, feed_dict, targets): numpy arrays in (wrapped
    without a copy when C-contiguous and of the placeholder's dtype), numpy
    arrays out (each owns its loom tensor: no copy)."""

    def __init__(self, graph, num_threads=0):
        self.graph = graph
        o = lib.loom_session_options_default()
        o.num_threads = num_threads
        st = _Status()
        self.p = lib.loom_session_new(graph.p, C.byref(o), st.p)
        if not self.p:
            st.raise_if()

    def close(self):
        if getattr(self, "p", None):
            lib.loom_session_free(self.p)
            self.p = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def run(self, fetches=None, feed_dict=None, targets=None):
        single = isinstance(fetches, Output)
        fl = [fetches] if single else list(fetches or [])
        feed_dict = feed_dict or {}
        tl = [targets] if isinstance(targets, Node) else list(targets or [])
        nf = len(feed_dict)
        feeds = (L.Output * max(1, nf))()
        fvals = (C.c_void_p * max(1, nf))()
        try:
            for i, (k, v) in enumerate(feed_dict.items()):
                k = self.graph.get(k) if isinstance(k, str) else k
                feeds[i] = k.c
                fvals[i] = _to_tensor(v, lib.loom_output_dtype(k.c))
            fo = (L.Output * max(1, len(fl)))(*[f.c for f in fl])
            fv = (C.c_void_p * max(1, len(fl)))()
            tg = (C.c_void_p * max(1, len(tl)))(*[t.p for t in tl])
            st = _Status()
            rc = lib.loom_session_run(self.p, feeds, fvals, nf, fo, fv, len(fl), tg, len(tl), st.p)
            outs = [_from_tensor(fv[i], take=True) if fv[i] else None for i in range(len(fl))]
            st.raise_if(rc)
        finally:
            for i in range(nf):
                lib.loom_tensor_free(fvals[i])
        return outs[0] if single else outs


# ---------------------------------------------------------------- tf.Example
def serialize_example(features):
    """{name: value} -> the bytes of a serialized tf.Example
    (loom_example_serialize): str/bytes values -> bytes_list, floats ->
    float_list (float32), ints/bools -> int64_list; a value is a scalar or
    a sequence (flattened). What an export's classify / regress signatures
    take (Estimator.export(..., serving_inputs="parsing"))."""
    names, tensors = [], []
    try:
        for k, v in features.items():
            if isinstance(v, np.ndarray) and v.dtype.kind in "fiub":
                a, kind = v.reshape(-1), v.dtype.kind
            else:  # as objects: a bytes array ("S") would drop trailing NULs
                a = np.asarray(v, dtype=object).reshape(-1)
                kind = ("S" if len(a) and all(isinstance(x, (str, bytes, np.str_, np.bytes_)) for x in a) else
                        "f" if any(isinstance(x, (float, np.floating)) for x in a) or not len(a) else "i")
            if kind in "USO":
                t = _to_tensor(a, STRING)
            else:
                t = _to_tensor(np.asarray(a, dtype=np.float32 if kind == "f" else np.int64), F32 if kind == "f" else I64)
            names.append(_b(k))
            tensors.append(t)
        n = len(names)
        st = _Status()
        s = lib.loom_example_serialize(n, (C.c_char_p * max(1, n))(*names), (C.c_void_p * max(1, n))(*tensors),
                                       st.p)
        if not s:
            st.raise_if()
        return _from_tensor(s, take=True).item()
    finally:
        for t in tensors:
            lib.loom_tensor_free(t)


# ---------------------------------------------------------------- predictor
class Predictor:
    """The resident predictor (loom_predictor) of an export directory:
    predict({key: array}) -> {key: array}. Inputs are converted to the
    signature's dtypes (loom_predictor_input_dtype); contiguous arrays of the
    right dtype are not copied; outputs own their tensors (no copy)."""

    def __init__(self, export_dir, signature=None, num_threads=0):
        o = lib.loom_predictor_options_default()
        o.num_threads = num_threads
        o.signature = _b(signature)
        st = _Status()
        self.p = lib.loom_predictor_load(_b(os.fspath(export_dir)), C.byref(o), st.p)
        if not self.p:
            st.raise_if()

    def close(self):
        if getattr(self, "p", None):
            lib.loom_predictor_free(self.p)
            self.p = None

    __del__ = close

    @property
    def signatures(self):
        return [lib.loom_predictor_signature_name(self.p, i).decode()
                for i in range(lib.loom_predictor_num_signatures(self.p))]

    def input_keys(self, signature=None):
        s = _b(signature)
        return [lib.loom_predictor_input_key(self.p, s, i).decode()
                for i in range(max(0, lib.loom_predictor_num_inputs(self.p, s)))]

    def output_keys(self, signature=None):
        s = _b(signature)
        return [lib.loom_predictor_output_key(self.p, s, i).decode()
                for i in range(max(0, lib.loom_predictor_num_outputs(self.p, s)))]

    def input_spec(self, signature=None):
        """{key: (numpy dtype or object for strings, shape with None)}."""
        s = _b(signature)
        out = {}
        for i, k in enumerate(self.input_keys(signature)):
            d = (L.i64 * 8)()
            n = lib.loom_predictor_input_shape(self.p, s, i, d)
            dt = lib.loom_predictor_input_dtype(self.p, s, i)
            out[k] = (_LOOM2NP.get(dt, object), tuple(None if d[j] < 0 else d[j] for j in range(n)))
        return out

    def predict(self, inputs, signature=None):
        s = _b(signature)
        keys = self.input_keys(signature)
        if keys == [] and lib.loom_predictor_num_inputs(self.p, s) < 0:
            raise LoomError(5, "predictor: no signature %r" % (signature or "serving_default"))
        if not isinstance(inputs, dict):
            if len(keys) != 1:
                raise ValueError("predictor: signature takes inputs %s: pass a dict" % keys)
            inputs = {keys[0]: inputs}
        missing = [k for k in keys if k not in inputs]
        extra = [k for k in inputs if k not in keys]
        if missing or extra:
            raise ValueError("predictor: inputs are %s (missing %s, unknown %s)" % (keys, missing, extra))
        nin, nout = len(keys), lib.loom_predictor_num_outputs(self.p, s)
        ins = (C.c_void_p * max(1, nin))()
        outs = (C.c_void_p * max(1, nout))()
        try:
            for i, k in enumerate(keys):
                ins[i] = _to_tensor(inputs[k], lib.loom_predictor_input_dtype(self.p, s, i))
            st = _Status()
            rc = lib.loom_predictor_run(self.p, s, nin, ins, nout, outs, st.p)
            res = [_from_tensor(outs[i], take=True) if outs[i] else None for i in range(nout)]
            st.raise_if(rc)
        finally:
            for i in range(nin):
                lib.loom_tensor_free(ins[i])
        return dict(zip(self.output_keys(signature), res))

    __call__ = predict


# ---------------------------------------------------------------- datasets
class Dataset:
    """A loom_dataset. Transformations take the input over (as in C): the
    old Dataset object becomes empty."""

    def __init__(self, p):
        self.p = p

    @staticmethod
    def from_tensor_slices(arrays, label=None):
        """{name: array} (all sharing dim 0) -> one element per row; label
        names the label component. No copy of a C-contiguous array of a loom
        dtype: the dataset reads the array itself (it keeps a reference to
        it, loom_dataset_from_tensors_taken), so the array must not change
        while the dataset is in use."""
        names = list(arrays)
        n = len(names)
        cn = (C.c_char_p * n)(*[_b(k) for k in names])
        ts = (C.c_void_p * n)()
        p = None
        try:
            for i, k in enumerate(names):
                ts[i] = _to_tensor(arrays[k])
            st = _Status()
            p = lib.loom_dataset_from_tensors_taken(n, cn, ts, _b(label), st.p)
            if not p:
                st.raise_if()
        finally:
            if not p:  # the dataset owns them once made
                for i in range(n):
                    lib.loom_tensor_free(ts[i])
        return Dataset(p)

    def _take_over(self, fn, *args):
        if not self.p:
            raise ValueError("loom: this dataset was consumed by a transformation")
        st = _Status()
        p, self.p = fn(self.p, *args, st.p), None
        if not p:
            st.raise_if()
        return Dataset(p)

    def batch(self, batch_size, drop_remainder=False):
        return self._take_over(lib.loom_dataset_batch, batch_size, int(drop_remainder))

    def shuffle(self, buffer_size, seed=0, reshuffle_each_iteration=True):
        return self._take_over(lib.loom_dataset_shuffle, buffer_size, seed, int(reshuffle_each_iteration))

    def repeat(self, count=-1):
        return self._take_over(lib.loom_dataset_repeat, count)

    def take(self, count):
        return self._take_over(lib.loom_dataset_take, count)

    def shard(self, num_shards, index):
        """Every num_shards-th element from index on (TF's Dataset.shard)."""
        return self._take_over(lib.loom_dataset_shard, num_shards, index)

    @property
    def component_names(self):
        return [lib.loom_dataset_component_name(self.p, i).decode()
                for i in range(lib.loom_dataset_num_components(self.p))]

    def __iter__(self):
        st = _Status()
        lib.loom_dataset_reset(self.p, st.p)
        names = self.component_names
        n = len(names)
        while True:
            vals = (C.c_void_p * n)()
            rc = lib.loom_dataset_next(self.p, vals, st.p)
            if rc == 11:  # OUT_OF_RANGE: the end
                return
            out = {k: _from_tensor(vals[i], take=True) for i, k in enumerate(names) if vals[i]}
            st.raise_if(rc)
            yield out

    def _release(self):
        p, self.p = self.p, None
        return p

    def __del__(self):
        if getattr(self, "p", None):
            lib.loom_dataset_free(self.p)
            self.p = None


from ._estimator import (ModeKeys, EstimatorSpec, Estimator, FeatureColumns, DNNClassifier,  # noqa: E402
                         DNNRegressor, LinearClassifier, LinearRegressor, BaselineClassifier, BaselineRegressor,
                         DNNLinearCombinedClassifier, DNNLinearCombinedRegressor)
from . import _feature_column as feature_column  # noqa: E402
import sys as _sys  # noqa: E402
_sys.modules[__name__ + ".feature_column"] = feature_column  # `import loom.feature_column as fc` works too
from ._config import RunConfig  # noqa: E402
from ._tae import (TrainSpec, EvalSpec, train_and_evaluate, LatestExporter, BestExporter,  # noqa: E402
                   FinalExporter)
from ._onnx import export_onnx  # noqa: E402
from ._warm_start import WarmStartSettings, VocabInfo  # noqa: E402
