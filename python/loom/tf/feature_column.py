"""tf.feature_column on loom's C feature columns (loom_feature_columns.h).

A column here is a description, as in TF: it is made into a loom_fc of a
fresh set when an estimator (or make_parse_example_spec) uses it, so one
column can serve several estimators. Bad arguments raise ValueError with
loom's message (naming the column) when the column is made, as TF does."""
import ctypes as C

import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import _Status, _b, _dims, LoomError, FeatureColumns
from . import dtypes as _dt
from ._surface import missing

__all__ = ["numeric_column", "bucketized_column", "categorical_column_with_identity",
           "categorical_column_with_vocabulary_list", "categorical_column_with_vocabulary_file",
           "categorical_column_with_hash_bucket", "crossed_column", "embedding_column", "indicator_column",
           "weighted_categorical_column", "shared_embeddings", "make_parse_example_spec"]

_COMBINERS = {"sum": 0, "mean": 1, "sqrtn": 2}
_LOOM_DTYPE = {"float32": 1, "float64": 2, "int32": 3, "int64": 4, "string": 7}


def _made(p, st):
    if not p:
        st.raise_if()
    return p


class FeatureColumn:
    """Base of every column: name (TF's), the raw keys it reads and their
    dtypes, and how to make it in a loom_fc_set."""
    _parents = ()

    def _make(self, fcs, memo):
        key = id(self)
        if key not in memo:
            parents = [p._make(fcs, memo) for p in self._parents]
            st = _Status()
            memo[key] = _made(self._new(fcs.p, parents, st.p), st)
        return memo[key]

    def _hints(self):
        """{raw key: numpy dtype} the inputs are converted to."""
        out = {}
        for p in self._parents:
            out.update(p._hints())
        return out

    @property
    def name(self):
        return self._name

    def _check(self):
        """Makes the column once, so that a bad argument fails here (ValueError), as in TF."""
        fcs = FeatureColumns()
        try:
            p = self._make(fcs, {})
        except LoomError as e:
            raise ValueError(str(e)) from None
        self._name = lib.loom_fc_name(p).decode()
        self._num_buckets = lib.loom_fc_num_buckets(p)
        return self

    @property
    def num_buckets(self):
        return self._num_buckets

    def __repr__(self):
        return "%s(%r)" % (type(self).__name__, self._name)


class NumericColumn(FeatureColumn):
    def __init__(self, key, shape, default_value, dtype):
        self.key, self.shape, self.default_value, self.dtype = key, shape, default_value, dtype

    def _new(self, s, parents, st):
        n, dims = _dims(self.shape)
        dv = None
        if self.default_value is not None:
            self._dv = np.ascontiguousarray(np.broadcast_to(np.asarray(self.default_value, np.float32), self.shape))
            dv = self._dv.ctypes.data_as(C.POINTER(C.c_float))
        return lib.loom_fc_numeric(s, _b(self.key), n, dims, dv, 2 if self.dtype == _dt.float64 else 1, None, None,
                                   st)

    def _hints(self):
        return {self.key: np.float32}


class BucketizedColumn(FeatureColumn):
    def __init__(self, source, boundaries):
        self.source_column, self.boundaries = source, tuple(float(b) for b in boundaries)
        self._parents = (source,)

    def _new(self, s, parents, st):
        b = (C.c_float * max(1, len(self.boundaries)))(*self.boundaries)
        return lib.loom_fc_bucketized(s, parents[0], len(self.boundaries), b, st)


class IdentityColumn(FeatureColumn):
    def __init__(self, key, num_buckets, default_value):
        self.key, self.num_buckets_arg, self.default_value = key, num_buckets, default_value

    def _new(self, s, parents, st):
        dv = self.default_value
        return lib.loom_fc_identity(s, _b(self.key), self.num_buckets_arg, int(dv is not None), dv or 0, st)

    def _hints(self):
        return {self.key: np.int64}


class VocabularyListColumn(FeatureColumn):
    def __init__(self, key, vocabulary_list, dtype, default_value, num_oov_buckets):
        self.key, self.vocabulary_list, self.dtype = key, tuple(vocabulary_list), dtype
        self.default_value, self.num_oov_buckets = default_value, num_oov_buckets

    def _new(self, s, parents, st):
        v = self.vocabulary_list
        n = len(v)
        if self.dtype == _dt.string:
            arr = (C.c_char_p * max(1, n))(*[_b(str(x)) for x in v])
            return lib.loom_fc_vocabulary_list(s, _b(self.key), n, arr, self.num_oov_buckets, self.default_value, st)
        arr = (L.i64 * max(1, n))(*[int(x) for x in v])
        return lib.loom_fc_vocabulary_list_int64(s, _b(self.key), n, arr, self.num_oov_buckets, self.default_value,
                                                 st)

    def _hints(self):
        return {self.key: object if self.dtype == _dt.string else np.int64}


class VocabularyFileColumn(FeatureColumn):
    def __init__(self, key, vocabulary_file, vocabulary_size, dtype, default_value, num_oov_buckets):
        self.key, self.vocabulary_file, self.vocabulary_size, self.dtype = key, vocabulary_file, vocabulary_size, dtype
        self.default_value, self.num_oov_buckets = default_value, num_oov_buckets

    def _new(self, s, parents, st):
        dv = -1 if self.default_value is None else self.default_value
        return lib.loom_fc_vocabulary_file(s, _b(self.key), _b(str(self.vocabulary_file)), self.vocabulary_size or 0,
                                           self.num_oov_buckets, dv, 7 if self.dtype == _dt.string else 4, st)

    def _hints(self):
        return {self.key: object if self.dtype == _dt.string else np.int64}


class HashBucketColumn(FeatureColumn):
    def __init__(self, key, hash_bucket_size, dtype):
        self.key, self.hash_bucket_size, self.dtype = key, hash_bucket_size, dtype

    def _new(self, s, parents, st):
        return lib.loom_fc_hash_bucket(s, _b(self.key), self.hash_bucket_size,
                                       7 if self.dtype == _dt.string else _LOOM_DTYPE.get(self.dtype.name, 4), st)

    def _hints(self):
        return {self.key: object if self.dtype == _dt.string else np.int64}


class CrossedColumn(FeatureColumn):
    def __init__(self, keys, hash_bucket_size, hash_key):
        self.keys, self.hash_bucket_size, self.hash_key = tuple(keys), hash_bucket_size, hash_key
        self._parents = tuple(k for k in self.keys if isinstance(k, FeatureColumn))

    def _new(self, s, parents, st):
        n = len(self.keys)
        raw = (C.c_char_p * n)()
        cols = (C.c_void_p * n)()
        it = iter(parents)
        for i, k in enumerate(self.keys):
            if isinstance(k, FeatureColumn):
                cols[i] = next(it)
            else:
                raw[i] = _b(k)
        return lib.loom_fc_crossed(s, n, raw, cols, self.hash_bucket_size, self.hash_key or 0, st)


class WeightedColumn(FeatureColumn):
    def __init__(self, categorical, weight_feature_key, dtype):
        self.categorical_column, self.weight_feature_key, self.dtype = categorical, weight_feature_key, dtype
        self._parents = (categorical,)

    def _new(self, s, parents, st):
        return lib.loom_fc_weighted(s, parents[0], _b(self.weight_feature_key), st)

    def _hints(self):
        return dict(super()._hints(), **{self.weight_feature_key: np.float32})


class IndicatorColumn(FeatureColumn):
    def __init__(self, categorical):
        self.categorical_column = categorical
        self._parents = (categorical,)

    def _new(self, s, parents, st):
        return lib.loom_fc_indicator(s, parents[0], st)


class EmbeddingColumn(FeatureColumn):
    def __init__(self, categorical, dimension, combiner, max_norm, trainable):
        self.categorical_column, self.dimension, self.combiner = categorical, dimension, combiner
        self.max_norm, self.trainable = max_norm, trainable
        self._parents = (categorical,)

    def _new(self, s, parents, st):
        o = lib.loom_fc_embedding_options_default()
        o.combiner = _COMBINERS[self.combiner]
        o.max_norm = self.max_norm or 0.0
        o.trainable = int(bool(self.trainable))
        return lib.loom_fc_embedding(s, parents[0], self.dimension, C.byref(o), st)


class _SharedGroup:
    """The columns of one shared_embeddings call: made together (one table)."""

    def __init__(self, categorical, dimension, combiner, max_norm, trainable, name):
        self.categorical, self.dimension, self.combiner = tuple(categorical), dimension, combiner
        self.max_norm, self.trainable, self.name = max_norm, trainable, name

    def make(self, fcs, memo):
        key = id(self)
        if key not in memo:
            parents = [c._make(fcs, memo) for c in self.categorical]
            o = lib.loom_fc_embedding_options_default()
            o.combiner = _COMBINERS[self.combiner]
            o.max_norm = self.max_norm or 0.0
            o.trainable = int(bool(self.trainable))
            o.shared_name = _b(self.name)
            n = len(parents)
            out = (C.c_void_p * n)()
            st = _Status()
            st.raise_if(lib.loom_fc_shared_embeddings(fcs.p, n, (C.c_void_p * n)(*parents), self.dimension,
                                                      C.byref(o), out, st.p))
            memo[key] = list(out)
        return memo[key]


class SharedEmbeddingColumn(FeatureColumn):
    def __init__(self, group, index):
        self.group, self.index = group, index
        self.categorical_column = group.categorical[index]

    def _make(self, fcs, memo):
        return self.group.make(fcs, memo)[self.index]

    def _hints(self):
        return self.categorical_column._hints()


def _key(key, what):
    if not isinstance(key, str) or not key:
        raise ValueError("%s: key must be a non-empty string, got %r" % (what, key))
    return key


def _shape(shape):
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(d) for d in shape)


def numeric_column(key, shape=(1,), default_value=None, dtype=_dt.float32, normalizer_fn=None):
    if normalizer_fn is not None:
        raise NotImplementedError("loom.tf: numeric_column(%r, normalizer_fn=...): a Python normalizer_fn of TF ops "
                                  "is not supported; normalize the arrays with numpy before the input_fn" % key)
    dtype = _dt.as_dtype(dtype)
    if not dtype.is_floating and not dtype.is_integer:
        raise ValueError("numeric_column %r: dtype must be a float or integer type, got %s" % (key, dtype.name))
    return NumericColumn(_key(key, "numeric_column"), _shape(shape), default_value, dtype)._check()


def bucketized_column(source_column, boundaries):
    if not isinstance(source_column, NumericColumn):
        raise ValueError("bucketized_column: source_column must be a numeric_column, got %r" % (source_column,))
    return BucketizedColumn(source_column, boundaries)._check()


def categorical_column_with_identity(key, num_buckets, default_value=None):
    return IdentityColumn(_key(key, "categorical_column_with_identity"), int(num_buckets), default_value)._check()


def categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None, default_value=-1, num_oov_buckets=0):
    vocabulary_list = list(vocabulary_list)
    if dtype is None:
        dtype = _dt.string if vocabulary_list and isinstance(vocabulary_list[0], (str, bytes)) else _dt.int64
    dtype = _dt.as_dtype(dtype)
    return VocabularyListColumn(_key(key, "categorical_column_with_vocabulary_list"), vocabulary_list, dtype,
                                default_value, num_oov_buckets)._check()


def categorical_column_with_vocabulary_file(key, vocabulary_file, vocabulary_size=None, dtype=_dt.string,
                                            default_value=None, num_oov_buckets=0):
    return VocabularyFileColumn(_key(key, "categorical_column_with_vocabulary_file"), vocabulary_file,
                                vocabulary_size, _dt.as_dtype(dtype), default_value, num_oov_buckets)._check()


def categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=_dt.string):
    return HashBucketColumn(_key(key, "categorical_column_with_hash_bucket"), int(hash_bucket_size),
                            _dt.as_dtype(dtype))._check()


def crossed_column(keys, hash_bucket_size, hash_key=None):
    return CrossedColumn(keys, int(hash_bucket_size), hash_key)._check()


def weighted_categorical_column(categorical_column, weight_feature_key, dtype=_dt.float32):
    return WeightedColumn(categorical_column, weight_feature_key, _dt.as_dtype(dtype))._check()


def indicator_column(categorical_column):
    return IndicatorColumn(categorical_column)._check()


def embedding_column(categorical_column, dimension, combiner="mean", initializer=None, ckpt_to_load_from=None,
                     tensor_name_in_ckpt=None, max_norm=None, trainable=True, use_safe_embedding_lookup=True):
    for arg, v in (("initializer", initializer), ("ckpt_to_load_from", ckpt_to_load_from),
                   ("tensor_name_in_ckpt", tensor_name_in_ckpt)):
        if v is not None:
            raise NotImplementedError("loom.tf: embedding_column(%s=...) is not supported (loom's default "
                                      "initializer is TF's truncated_normal(0, 1/sqrt(dimension)); warm start "
                                      "with the estimator's warm_start_from)" % arg)
    if combiner not in _COMBINERS:
        raise ValueError("embedding_column: combiner must be one of %s, got %r" % (sorted(_COMBINERS), combiner))
    return EmbeddingColumn(categorical_column, int(dimension), combiner, max_norm, trainable)._check()


def shared_embeddings(categorical_columns, dimension, combiner="mean", initializer=None,
                      shared_embedding_collection_name=None, ckpt_to_load_from=None, tensor_name_in_ckpt=None,
                      max_norm=None, trainable=True, use_safe_embedding_lookup=True):
    """One embedding table shared by categorical columns of the same number
    of buckets: a list of columns, one per categorical column."""
    for arg, v in (("initializer", initializer), ("ckpt_to_load_from", ckpt_to_load_from),
                   ("tensor_name_in_ckpt", tensor_name_in_ckpt)):
        if v is not None:
            raise NotImplementedError("loom.tf: shared_embeddings(%s=...) is not supported" % arg)
    if combiner not in _COMBINERS:
        raise ValueError("shared_embeddings: combiner must be one of %s, got %r" % (sorted(_COMBINERS), combiner))
    cats = list(categorical_columns)
    g = _SharedGroup(cats, int(dimension), combiner, max_norm, trainable, shared_embedding_collection_name)
    return [SharedEmbeddingColumn(g, i)._check() for i in range(len(cats))]


# ---------------------------------------------------------------- parse specs (tf.io)
class FixedLenFeature:
    """tf.io.FixedLenFeature(shape, dtype, default_value=None)."""

    def __init__(self, shape, dtype, default_value=None):
        self.shape, self.dtype, self.default_value = _shape(shape), _dt.as_dtype(dtype), default_value

    def __eq__(self, o):
        return isinstance(o, FixedLenFeature) and (self.shape, self.dtype, _plain(self.default_value)) == \
            (o.shape, o.dtype, _plain(o.default_value))

    def __repr__(self):
        return "FixedLenFeature(shape=%s, dtype=%r, default_value=%r)" % (self.shape, self.dtype, self.default_value)


class VarLenFeature:
    """tf.io.VarLenFeature(dtype)."""

    def __init__(self, dtype):
        self.dtype = _dt.as_dtype(dtype)

    def __eq__(self, o):
        return isinstance(o, VarLenFeature) and o.dtype == self.dtype

    def __repr__(self):
        return "VarLenFeature(dtype=%r)" % (self.dtype,)


def _plain(v):
    return None if v is None else tuple(np.asarray(v).ravel().tolist())


_FROM_LOOM = {1: _dt.float32, 4: _dt.int64, 7: _dt.string}


def make_columns(columns):
    """(a new loom FeatureColumns set, [loom_fc pointers]) for TF columns."""
    fcs = FeatureColumns()
    memo = {}
    cols = list(columns or [])
    for c in cols:
        if not isinstance(c, FeatureColumn):
            raise TypeError("loom.tf: feature_columns must be tf.feature_column columns, got %r" % (c,))
    return fcs, [c._make(fcs, memo) for c in cols]


def make_parse_example_spec(feature_columns):
    """{key: FixedLenFeature | VarLenFeature}, from loom's
    loom_fc_make_parse_example_spec."""
    fcs, ptrs = make_columns(feature_columns)
    arr = (C.c_void_p * max(1, len(ptrs)))(*ptrs)
    n = C.c_int()
    spec = C.POINTER(L.FeatureSpec)()
    st = _Status()
    try:
        st.raise_if(lib.loom_fc_make_parse_example_spec(len(ptrs), arr, C.byref(n), C.byref(spec), st.p))
    except LoomError as e:
        raise ValueError(str(e)) from None
    out = {}
    for i in range(n.value):
        s = spec[i]
        dt = _FROM_LOOM[s.dtype]
        if s.varlen or s.kind == 1:
            out[s.name.decode()] = VarLenFeature(dt)
            continue
        shape = tuple(s.dims[j] for j in range(s.ndim))
        dv = None
        if s.default_value:
            numel = int(np.prod(shape)) if shape else 1
            if dt == _dt.string:
                dv = [C.cast(s.default_value, C.POINTER(C.c_char_p))[j] for j in range(numel)]
            else:
                ct = C.c_float if dt == _dt.float32 else C.c_int64
                dv = [C.cast(s.default_value, C.POINTER(ct))[j] for j in range(numel)]
        out[s.name.decode()] = FixedLenFeature(shape, dt, dv)
    lib.loom_fc_parse_spec_free(n.value, spec)
    # an integer numeric_column parses an int64_list, as TF's spec says (loom's columns read it as float)
    for c in feature_columns:
        src = c.source_column if isinstance(c, BucketizedColumn) else c
        if isinstance(src, NumericColumn) and src.dtype.is_integer and src.key in out:
            f = out[src.key]
            out[src.key] = FixedLenFeature(f.shape, _dt.int64, None if f.default_value is None else
                                           [int(v) for v in f.default_value])
    return out


def feature_spec_to_c(feature_spec):
    """A ctypes array of loom_feature_spec for a {key: FixedLenFeature |
    VarLenFeature} dict (the returned list keeps the buffers alive)."""
    keep = []
    arr = (L.FeatureSpec * max(1, len(feature_spec)))()
    for i, (k, f) in enumerate(sorted(feature_spec.items())):
        s = arr[i]
        s.name = _b(k)
        if isinstance(f, VarLenFeature):
            s.dtype, s.varlen, s.kind, s.ragged = _LOOM_DTYPE[_spec_dtype(k, f)], 1, 1, 1
        elif isinstance(f, FixedLenFeature):
            s.dtype = _LOOM_DTYPE[_spec_dtype(k, f)]
            s.ndim = len(f.shape)
            for j, d in enumerate(f.shape):
                s.dims[j] = d
            if f.default_value is not None:
                numel = int(np.prod(f.shape)) if f.shape else 1
                if f.dtype == _dt.string:
                    vals = [_b(v) for v in np.broadcast_to(np.asarray(f.default_value, object), (numel,))]
                    buf = (C.c_char_p * numel)(*vals)
                else:
                    buf = np.ascontiguousarray(np.broadcast_to(np.asarray(f.default_value, f.dtype.as_numpy_dtype),
                                                               (numel,)))
                keep.append(buf)
                s.default_value = C.cast(buf, C.c_void_p) if f.dtype == _dt.string else buf.ctypes.data
        else:
            raise TypeError("loom.tf: feature spec %r: %r is not a tf.io.FixedLenFeature or VarLenFeature" % (k, f))
    return len(feature_spec), arr, keep


def _spec_dtype(key, f):
    name = f.dtype.name
    if name not in ("float32", "int64", "string"):
        raise ValueError("loom.tf: feature spec %r: dtype must be float32, int64 or string (tf.Example's "
                         "float_list, int64_list, bytes_list), got %s" % (key, name))
    return name


def __getattr__(name):
    raise missing("feature_column.", name)
