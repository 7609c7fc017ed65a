"""tf.train.Example and friends (SerializeToString through
loom.serialize_example) and tf.saved_model.load over loom's predictor:
load(export_dir).signatures["serving_default"](inputs=...) returns
{key: array}; each array has .numpy() as TF's eager tensors."""
import numpy as np

from .. import serialize_example, Predictor


class BytesList:
    def __init__(self, value=()):
        self.value = [v.encode() if isinstance(v, str) else bytes(v) for v in value]

    def _array(self):
        return np.array(self.value, dtype=object)


class FloatList:
    def __init__(self, value=()):
        self.value = [float(v) for v in value]

    def _array(self):
        return np.asarray(self.value, np.float32)


class Int64List:
    def __init__(self, value=()):
        self.value = [int(v) for v in value]

    def _array(self):
        return np.asarray(self.value, np.int64)


class Feature:
    def __init__(self, bytes_list=None, float_list=None, int64_list=None):
        given = [x for x in (bytes_list, float_list, int64_list) if x is not None]
        if len(given) > 1:
            raise ValueError("tf.train.Feature: give one of bytes_list, float_list, int64_list")
        self.kind = given[0] if given else FloatList()

    @property
    def bytes_list(self):
        return self.kind if isinstance(self.kind, BytesList) else BytesList()

    @property
    def float_list(self):
        return self.kind if isinstance(self.kind, FloatList) else FloatList()

    @property
    def int64_list(self):
        return self.kind if isinstance(self.kind, Int64List) else Int64List()

    def WhichOneof(self, name):  # noqa: N802 - protobuf's name
        return {BytesList: "bytes_list", FloatList: "float_list", Int64List: "int64_list"}[type(self.kind)]


class Features:
    def __init__(self, feature=None):
        self.feature = dict(feature or {})


class Example:
    def __init__(self, features=None):
        self.features = features or Features()

    def SerializeToString(self):  # noqa: N802 - protobuf's name
        """The tf.Example's wire bytes (loom_example_serialize, features in
        insertion order); each list keeps its kind, empty ones too."""
        import ctypes as C
        from .. import _to_tensor, _from_tensor, _Status, _b, STRING, F32, I64
        from .._lib import lib
        names, tensors = [], []
        try:
            for k, f in self.features.feature.items():
                kind = f.kind
                code = STRING if isinstance(kind, BytesList) else F32 if isinstance(kind, FloatList) else I64
                tensors.append(_to_tensor(kind._array(), code))
                names.append(_b(k))
            n = len(names)
            st = _Status()
            t = lib.loom_example_serialize(n, (C.c_char_p * max(1, n))(*names), (C.c_void_p * max(1, n))(*tensors),
                                           st.p)
            if not t:
                st.raise_if()
            return _from_tensor(t, take=True).item()
        finally:
            for t in tensors:
                lib.loom_tensor_free(t)


class _Tensor(np.ndarray):
    def numpy(self):
        return np.asarray(self)


class _Signature:
    def __init__(self, predictor, name):
        self._p, self._name = predictor, name
        self.structured_input_signature = ((), predictor.input_spec(name))
        self.structured_outputs = predictor.output_keys(name)

    def __call__(self, **inputs):
        out = self._p.predict({k: (list(v) if isinstance(v, np.ndarray) and v.dtype == object else v)
                               for k, v in inputs.items()}, signature=self._name)
        return {k: np.asarray(v).view(_Tensor) for k, v in out.items()}


class _Loaded:
    def __init__(self, export_dir):
        p = Predictor(export_dir.decode() if isinstance(export_dir, bytes) else str(export_dir))
        self.signatures = {name: _Signature(p, name) for name in p.signatures}


def load(export_dir, tags=None, options=None):
    """tf.saved_model.load of an export written by export_saved_model."""
    return _Loaded(export_dir)


def constant(value, dtype=None, shape=None, name=None):
    """tf.constant outside a model_fn: a numpy array (strings as bytes objects)."""
    if shape is not None:
        raise NotImplementedError("loom.tf: tf.constant(shape=...) is not supported")
    if dtype is not None:
        from .dtypes import as_dtype
        dt = as_dtype(dtype)
        if dt.name == "string":
            return np.array([v.encode() if isinstance(v, str) else v for v in np.ravel(value)],
                            dtype=object).reshape(np.shape(value))
        return np.asarray(value, dt.as_numpy_dtype)
    a = np.asarray(value)
    if a.dtype.kind in "SU":
        return np.array([v.encode() if isinstance(v, str) else v for v in np.ravel(value)],
                        dtype=object).reshape(a.shape)
    return a.astype(np.float32) if a.dtype == np.float64 else a.astype(np.int32) if a.dtype == np.int64 else a
