"""tf.io: parsing tf.Example, TFRecord writing, and (inside a traced
Dataset.map function, or eagerly on numpy values) the decode ops.

Inside Dataset.map the functions take the symbolic tensors (loom.Output)
of the traced function and add loom graph nodes (LoomParseExample ...);
called on plain values (bytes, numpy arrays) they build a small graph,
run it once and return numpy arrays, as TF's eager mode returns tensors."""
import ctypes as C
import os

import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Graph, Output, Session, _Status, _b, STRING
from . import dtypes as _dt
from .feature_column import FixedLenFeature, VarLenFeature, feature_spec_to_c
from ._surface import missing


class FixedLenSequenceFeature:
    def __init__(self, shape, dtype, allow_missing=False, default_value=None):
        raise NotImplementedError("loom.tf: tf.io.FixedLenSequenceFeature is not supported by tf.io.parse_example "
                                  "in a graph; use loom's C TFRecord reader (loom_dataset_tfrecord, kind "
                                  "LOOM_FEATURE_FIXED_LEN_SEQUENCE)")


def _symbolic(*xs):
    return any(isinstance(x, Output) for x in xs)


def _eager(build, *values):
    """Runs build(*placeholders) once on values (numpy / bytes): the
    outputs as numpy (a SparseTensor as a SparseTensorValue), in build's
    structure (a dict, a list, or one)."""
    from .data import SparseTensor, _sparse_value
    g = Graph()
    phs, feeds = [], {}
    for v in values:
        a = np.asarray(v, dtype=object) if isinstance(v, (bytes, str)) or (
            isinstance(v, (list, tuple)) and v and isinstance(np.ravel(np.asarray(v, dtype=object))[0], (bytes, str))) \
            else np.asarray(v)
        if a.dtype.kind in "SU":
            a = a.astype(object)
        p = g.placeholder(STRING if a.dtype == object else a.dtype, a.shape)
        phs.append(p)
        feeds[p] = a
    res = build(*phs)
    items = list(res.items()) if isinstance(res, dict) else list(enumerate(res)) if isinstance(res, list) else [(0, res)]
    fetches = []
    for _, v in items:
        fetches += [g.identity(v.values), g.identity(v._row_splits)] if isinstance(v, SparseTensor) else [g.identity(v)]
    with Session(g) as s:
        out = s.run(fetches, feeds)
    vals, i = [], 0
    for _, v in items:
        if isinstance(v, SparseTensor):
            vals.append(_sparse_value(out[i], out[i + 1], v._batched))
            i += 2
        else:
            vals.append(out[i])
            i += 1
    if isinstance(res, dict):
        return dict(zip(res.keys(), vals))
    return vals if isinstance(res, list) else vals[0]


def _parse(serialized, features, single, what):
    from .data import SparseTensor
    if not isinstance(features, dict) or not features:
        raise ValueError("%s: features must be a non-empty dict {key: FixedLenFeature | VarLenFeature}" % what)
    for k, f in features.items():
        if not isinstance(f, (FixedLenFeature, VarLenFeature)):
            raise NotImplementedError("loom.tf: %s: feature %r is a %s; loom parses FixedLenFeature and "
                                      "VarLenFeature in a graph" % (what, k, type(f).__name__))
    g = serialized.graph
    if serialized.dtype is not object:
        raise TypeError("%s: serialized must be a string tensor, got %s" % (what, np.dtype(serialized.dtype).name))
    shape = serialized.shape
    if single and len(shape) != 0:
        raise ValueError("%s: serialized must be a scalar, got shape %s" % (what, shape))
    if not single and len(shape) != 1:
        raise ValueError("%s: serialized must be a vector, got shape %s (use parse_single_example for a scalar)"
                         % (what, shape))
    x = g.reshape(serialized, (1,)) if single else serialized
    n, arr, keep = feature_spec_to_c(features)
    for i in range(n):
        arr[i].ragged = 0  # VarLen is ragged in the op anyway
    nout = lib.loom_parse_example_num_outputs(n, arr)
    outs = (L.Output * max(1, nout))()
    got = lib.loom_parse_example(g.p, x.c, n, arr, nout, outs, None)
    g._check()
    if got != nout:
        raise ValueError("%s: the feature spec was refused" % what)
    res, j = {}, 0
    for k in sorted(features):
        f = features[k]
        if isinstance(f, VarLenFeature):
            res[k] = SparseTensor._ragged(Output(g, outs[j]), Output(g, outs[j + 1]), not single)
            j += 2
        else:
            o = Output(g, outs[j])
            res[k] = g.reshape(o, f.shape) if single else o
            j += 1
    return {k: res[k] for k in features}


def parse_single_example(serialized, features, example_names=None, name=None):
    """tf.io.parse_single_example: {key: tensor} (a SparseTensor for a
    VarLenFeature) of one serialized tf.Example."""
    if not _symbolic(serialized):
        return _eager(lambda s: _parse(s, features, True, "parse_single_example"), serialized)
    return _parse(serialized, features, True, "parse_single_example")


def parse_example(serialized, features, example_names=None, name=None):
    """tf.io.parse_example: a batch [B] of serialized tf.Example ->
    {key: [B, shape...]} (a batched SparseTensor for a VarLenFeature)."""
    if not _symbolic(serialized):
        return _eager(lambda s: _parse(s, features, False, "parse_example"), serialized)
    return _parse(serialized, features, False, "parse_example")


_RAW_TYPES = {"uint8": 5, "int32": 3, "int64": 4, "float32": 1, "float64": 2}
_NUM_TYPES = {"int32": 3, "int64": 4, "float32": 1, "float64": 2}


def _check_graph(x, what):
    if not isinstance(x, Output):
        raise TypeError("%s: expected a tensor" % what)
    return x.graph


def decode_raw(input_bytes, out_type, little_endian=True, fixed_length=None, name=None):
    """tf.io.decode_raw: each string's bytes as out_type (uint8, int32,
    int64, float32, float64) -> [..., n] (all strings the same length)."""
    if fixed_length is not None:
        raise NotImplementedError("loom.tf: tf.io.decode_raw(fixed_length=...) is not supported")
    t = _dt.as_dtype(out_type).name
    if t not in _RAW_TYPES:
        raise NotImplementedError("loom.tf: tf.io.decode_raw(out_type=tf.%s): loom decodes uint8, int32, int64, "
                                  "float32 and float64" % t)
    if not _symbolic(input_bytes):
        return _eager(lambda b: decode_raw(b, out_type, little_endian), input_bytes)
    g = _check_graph(input_bytes, "decode_raw")
    return g._out(lib.loom_decode_raw(g.p, input_bytes.c, _RAW_TYPES[t], int(bool(little_endian)), _b(name)))


def _csv_default(d, i):
    """A record_defaults entry -> a numpy array of 0 or 1 element (its dtype the column's)."""
    if isinstance(d, (_dt.DType, type, np.dtype)):
        t = _dt.as_dtype(d)
        return np.zeros(0, dtype=object if t.name == "string" else t.as_numpy_dtype)
    if isinstance(d, Output):
        raise NotImplementedError("loom.tf: tf.io.decode_csv: record_defaults must be constants (Python values, "
                                  "lists or dtypes), not tensors")
    from .serving import constant
    a = np.asarray(constant(d) if not isinstance(d, np.ndarray) else d).reshape(-1)
    if a.dtype.kind in "SU":
        a = a.astype(object)
    if a.size > 1:
        raise ValueError("decode_csv: record_defaults[%d] has %d elements; at most one" % (i, a.size))
    if a.dtype != object and a.dtype.name not in _NUM_TYPES:
        raise ValueError("decode_csv: record_defaults[%d] is %s; a column is float32, float64, int32, int64 or "
                         "string" % (i, a.dtype))
    if a.size == 0 and a.dtype == np.float64 and not isinstance(d, np.ndarray):
        a = a.astype(np.float32)  # [] is TF's float32 required column
    return a


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, na_value="", select_cols=None,
               name=None):
    """tf.io.decode_csv: a list of tensors, one per record_defaults entry
    (its dtype; one element = the default of an empty field, none = the
    column is required), each of the records' shape."""
    from .. import _to_tensor
    if len(_b(field_delim)) != 1:
        raise ValueError("decode_csv: field_delim must be one character, got %r" % (field_delim,))
    defaults = [_csv_default(d, i) for i, d in enumerate(record_defaults)]
    if not defaults:
        raise ValueError("decode_csv: record_defaults is empty")
    if not _symbolic(records):
        return _eager(lambda r: decode_csv(r, record_defaults, field_delim, use_quote_delim, na_value, select_cols),
                      records)
    g = _check_graph(records, "decode_csv")
    sel = [int(c) for c in select_cols] if select_cols is not None else []
    ts = [_to_tensor(a, STRING if a.dtype == object else None) for a in defaults]
    try:
        arr = (C.c_void_p * len(ts))(*ts)
        outs = (L.Output * len(ts))()
        sa = (L.i64 * max(1, len(sel)))(*sel)
        n = lib.loom_decode_csv(g.p, records.c, len(ts), arr, _b(field_delim), int(bool(use_quote_delim)),
                                _b(na_value or ""), len(sel), sa, outs, _b(name))
    finally:
        for t in ts:
            lib.loom_tensor_free(t)
    g._check()
    return [Output(g, outs[i]) for i in range(n)]


def string_to_number(string_tensor, out_type=_dt.float32, name=None):
    """tf.strings.to_number (float32, float64, int32, int64)."""
    t = _dt.as_dtype(out_type).name
    if t not in _NUM_TYPES:
        raise ValueError("tf.strings.to_number: out_type must be float32, float64, int32 or int64, got %s" % t)
    if not _symbolic(string_tensor):
        return _eager(lambda x: string_to_number(x, out_type), string_tensor)
    g = _check_graph(string_tensor, "tf.strings.to_number")
    return g._out(lib.loom_string_to_number(g.p, string_tensor.c, _NUM_TYPES[t], _b(name)))


def as_string(input, precision=-1, scientific=False, shortest=False, width=-1, fill="", name=None):  # noqa: A002
    """tf.strings.as_string of int32 / int64 tensors."""
    if (precision, scientific, shortest, width, fill) != (-1, False, False, -1, ""):
        raise NotImplementedError("loom.tf: tf.strings.as_string formatting arguments are not supported")
    if not _symbolic(input):
        return _eager(lambda x: as_string(x), input)
    g = _check_graph(input, "tf.strings.as_string")
    if input.dtype not in (np.int32, np.int64):
        raise NotImplementedError("loom.tf: tf.strings.as_string of %s: loom converts int32 and int64"
                                  % np.dtype(input.dtype).name)
    return g._out(lib.loom_as_string(g.p, input.c, _b(name)))


def to_hash_bucket_fast(input, num_buckets, name=None):  # noqa: A002
    """tf.strings.to_hash_bucket_fast (FarmHash Fingerprint64 % num_buckets)."""
    if not _symbolic(input):
        return _eager(lambda x: to_hash_bucket_fast(x, num_buckets), input)
    g = _check_graph(input, "tf.strings.to_hash_bucket_fast")
    return g._out(lib.loom_string_to_hash_bucket_fast(g.p, input.c, int(num_buckets), _b(name)))


# ---------------------------------------------------------------- TFRecord writing
class TFRecordCompressionType:
    NONE, ZLIB, GZIP = 0, 1, 2


_COMP = {None: 0, "": 0, "NONE": 0, "GZIP": 1, "ZLIB": 2}


class TFRecordOptions:
    """tf.io.TFRecordOptions(compression_type): "", "GZIP" or "ZLIB" (the
    zlib tuning arguments are accepted and must keep their defaults)."""

    compression_type_map = {TFRecordCompressionType.ZLIB: "ZLIB", TFRecordCompressionType.GZIP: "GZIP",
                            TFRecordCompressionType.NONE: ""}

    def __init__(self, compression_type=None, flush_mode=None, input_buffer_size=None, output_buffer_size=None,
                 window_bits=None, compression_level=None, compression_method=None, mem_level=None,
                 compression_strategy=None):
        if isinstance(compression_type, int):
            compression_type = self.compression_type_map[compression_type]
        if compression_type not in _COMP:
            raise ValueError("TFRecordOptions: compression_type must be \"\", \"GZIP\" or \"ZLIB\", got %r"
                             % (compression_type,))
        for k, v in (("window_bits", window_bits), ("compression_level", compression_level),
                     ("compression_method", compression_method), ("mem_level", mem_level),
                     ("compression_strategy", compression_strategy), ("flush_mode", flush_mode)):
            if v is not None:
                raise NotImplementedError("loom.tf: TFRecordOptions(%s=...) is not supported" % k)
        self.compression_type = compression_type or ""

    @classmethod
    def get_compression_type_string(cls, options):
        if not options:
            return ""
        if isinstance(options, TFRecordOptions):
            return options.compression_type
        if isinstance(options, int):
            return cls.compression_type_map[options]
        return TFRecordOptions(options).compression_type


class TFRecordWriter:
    """tf.io.TFRecordWriter(path, options=None): write(record) appends one
    record (TFRecord framing, masked CRC32C; GZIP / ZLIB through zlib as TF
    writes them); close() finishes the file. A context manager."""

    def __init__(self, path, options=None):
        comp = _COMP[TFRecordOptions.get_compression_type_string(options)]
        st = _Status()
        self._p = lib.loom_tfrecord_writer_new_compressed(_b(os.fspath(path)), comp, st.p)
        if not self._p:
            st.raise_if()

    def write(self, record):
        if not self._p:
            raise ValueError("TFRecordWriter: the writer is closed")
        if isinstance(record, str):
            record = record.encode()
        record = bytes(record)
        st = _Status()
        st.raise_if(lib.loom_tfrecord_writer_write(self._p, record, len(record), st.p))

    def flush(self):
        pass  # records reach the file when it is closed (or as zlib's / stdio's buffers fill)

    def close(self):
        if getattr(self, "_p", None):
            p, self._p = self._p, None
            st = _Status()
            st.raise_if(lib.loom_tfrecord_writer_close(p, st.p))

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to at interpreter exit
            pass


def __getattr__(name):
    raise missing("io.", name)
