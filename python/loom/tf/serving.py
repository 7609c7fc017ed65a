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


def _varint(b, i):
    v = shift = 0
    while True:
        if i >= len(b):
            raise ValueError("tf.train.Example: truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def _fields(b):
    """(field number, wire type, value) of a protobuf message's bytes."""
    import struct
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = struct.unpack("<Q", b[i:i + 8])[0], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            if i + n > len(b):
                raise ValueError("tf.train.Example: a length-delimited field runs past the end")
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("tf.train.Example: wire type %d is not valid here" % wt)
        yield num, wt, v


def _parse_feature(b):
    import struct
    for num, wt, v in _fields(b):
        if num == 1 and wt == 2:
            return Feature(bytes_list=BytesList([x for n, t, x in _fields(v) if n == 1 and t == 2]))
        if num == 2 and wt == 2:
            vals = []
            for n, t, x in _fields(v):
                if n == 1 and t == 2:
                    vals += list(struct.unpack("<%df" % (len(x) // 4), x))
                elif n == 1 and t == 5:
                    vals.append(struct.unpack("<f", x)[0])
            return Feature(float_list=FloatList(vals))
        if num == 3 and wt == 2:
            vals = []
            for n, t, x in _fields(v):
                if n == 1 and t == 2:
                    j = 0
                    while j < len(x):
                        u, j = _varint(x, j)
                        vals.append(u - (1 << 64) if u >= 1 << 63 else u)
                elif n == 1 and t == 0:
                    vals.append(x - (1 << 64) if x >= 1 << 63 else x)
            return Feature(int64_list=Int64List(vals))
    return Feature()


class Example:
    def __init__(self, features=None):
        self.features = features or Features()

    @classmethod
    def FromString(cls, data):  # noqa: N802 - protobuf's name
        """A tf.Example from its wire bytes (what SerializeToString and
        TF's writers produce)."""
        e = cls()
        e.ParseFromString(data)
        return e

    def ParseFromString(self, data):  # noqa: N802 - protobuf's name
        feats = {}
        for num, wt, v in _fields(bytes(data)):
            if num == 1 and wt == 2:  # features
                for n2, t2, entry in _fields(v):
                    if n2 == 1 and t2 == 2:  # map entry
                        key, feat = "", Feature()
                        for n3, t3, x in _fields(entry):
                            if n3 == 1 and t3 == 2:
                                key = x.decode()
                            elif n3 == 2 and t3 == 2:
                                feat = _parse_feature(x)
                        feats[key] = feat
        self.features = Features(feats)
        return len(data)

    def __eq__(self, other):
        if not isinstance(other, Example):
            return NotImplemented
        mine, theirs = self.features.feature, other.features.feature
        return mine.keys() == theirs.keys() and all(
            type(mine[k].kind) is type(theirs[k].kind) and list(mine[k].kind.value) == list(theirs[k].kind.value)
            for k in mine)

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


def _strings(value):
    """An object array of bytes with value's shape. Built without numpy's fixed-width bytes type,
    which drops trailing NUL bytes (a serialized tf.train.Example may end in them)."""
    a = np.array(value, dtype=object)
    flat = a.reshape(-1)
    for i, v in enumerate(flat):
        flat[i] = v.encode() if isinstance(v, str) else bytes(v)
    return flat.reshape(a.shape)


def constant(value, dtype=None, shape=None, name=None):
    """tf.constant: a numpy array (strings as bytes objects); with shape, a
    scalar value fills it and any other value is reshaped to it (TF's rule)."""
    if shape is not None:
        a = constant(value, dtype)
        shape = tuple(int(d) for d in shape)
        if a.ndim == 0:
            return np.full(shape, a, a.dtype)
        if a.size != int(np.prod(shape)):
            raise TypeError("tf.constant: the value has %d elements, shape %s has %d"
                            % (a.size, list(shape), int(np.prod(shape))))
        return a.reshape(shape)
    if dtype is not None:
        from .dtypes import as_dtype
        dt = as_dtype(dtype)
        if dt.name == "string":
            return _strings(value)
        return np.asarray(value, dt.as_numpy_dtype)
    a = np.asarray(value)
    if a.dtype.kind in "SU":
        return _strings(value)
    return a.astype(np.float32) if a.dtype == np.float64 else a.astype(np.int32) if a.dtype == np.int64 else a
