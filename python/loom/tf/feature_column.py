"""tf.feature_column with TF's names and arguments over loom.feature_column
(python/loom/_feature_column.py, on loom_feature_columns.h): the columns
are loom's own; bad arguments raise ValueError with loom's message (naming
the column) when the column is made, as TF does."""
import ctypes as C

import numpy as np

from .. import _lib as L
from .. import _b
from . import dtypes as _dt
from ._surface import missing
from . import ops as _ops

__all__ = ["numeric_column", "bucketized_column", "categorical_column_with_identity",
           "categorical_column_with_vocabulary_list", "categorical_column_with_vocabulary_file",
           "categorical_column_with_hash_bucket", "crossed_column", "embedding_column", "indicator_column",
           "weighted_categorical_column", "shared_embeddings", "make_parse_example_spec",
           "sequence_categorical_column_with_identity", "sequence_categorical_column_with_hash_bucket",
           "sequence_categorical_column_with_vocabulary_list", "sequence_categorical_column_with_vocabulary_file",
           "sequence_numeric_column"]

from .._feature_column import (FeatureColumn, NumericColumn, BucketizedColumn, IdentityColumn,  # noqa: F401
                               VocabularyListColumn, VocabularyFileColumn, HashBucketColumn, CrossedColumn,
                               WeightedColumn, IndicatorColumn, EmbeddingColumn, SharedEmbeddingColumn, make_columns,
                               SequenceCategoricalColumn, SequenceNumericColumn, _LOOM_DTYPE, _is_sequence)
from .. import _feature_column as _n
from .._feature_column import _shape


def _trace(fn, x):
    """Calls a normalizer_fn on x inside the graph being built: tf ops that
    take no tensor (tf.constant ...) build in x's graph (the model_fn's when
    C builds the column's layer there)."""
    g = next((h for h in reversed(_ops._graphs) if h.p == x.graph.p), None)
    if g is not None:
        return fn(type(x)(g, x.c))
    _ops._graphs.append(x.graph)
    try:
        return fn(x)
    finally:
        _ops._graphs.pop()


def numeric_column(key, shape=(1,), default_value=None, dtype=_dt.float32, normalizer_fn=None):
    """normalizer_fn(x): x the column's float32 tensor [batch, *shape] (after
    default_value), returns a tensor of that shape built with tf ops; traced
    into every graph that uses the column (train, evaluate, predict, the
    exported serving graph)."""
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError("normalizer_fn must be a callable. Given: %r" % (normalizer_fn,))
    return _n.numeric(key, shape, default_value, _dt.as_dtype(dtype), normalizer_fn, _trace)


def bucketized_column(source_column, boundaries):
    return _n.bucketized(source_column, boundaries)


def categorical_column_with_identity(key, num_buckets, default_value=None):
    return _n.identity(key, num_buckets, default_value)


def categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None, default_value=-1, num_oov_buckets=0):
    vocabulary_list = list(vocabulary_list)
    if dtype is None:
        dtype = _dt.string if vocabulary_list and isinstance(vocabulary_list[0], (str, bytes)) else _dt.int64
    return _n.vocabulary_list(key, vocabulary_list, _dt.as_dtype(dtype), default_value, num_oov_buckets)


def categorical_column_with_vocabulary_file(key, vocabulary_file, vocabulary_size=None, dtype=_dt.string,
                                            default_value=None, num_oov_buckets=0):
    return _n.vocabulary_file(key, vocabulary_file, vocabulary_size, _dt.as_dtype(dtype), default_value,
                              num_oov_buckets)


def categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=_dt.string):
    return _n.hash_bucket(key, hash_bucket_size, _dt.as_dtype(dtype))


def crossed_column(keys, hash_bucket_size, hash_key=None):
    for k in keys if isinstance(keys, (list, tuple)) else ():
        if _is_sequence(k):
            raise NotImplementedError("loom.tf: crossed_column over the sequence column %r is not supported; cross "
                                      "the non-sequence categorical_column_with_* columns" % k.name)
    return _n.crossed(keys, hash_bucket_size, hash_key)


def weighted_categorical_column(categorical_column, weight_feature_key, dtype=_dt.float32):
    if _is_sequence(categorical_column):
        raise NotImplementedError("loom.tf: weighted_categorical_column over the sequence column %r is not supported;"
                                  " SequenceFeatures takes embedding_column / indicator_column of it unweighted"
                                  % categorical_column.name)
    return _n.weighted(categorical_column, weight_feature_key, _dt.as_dtype(dtype))


def indicator_column(categorical_column):
    return _n.indicator(categorical_column)


def embedding_column(categorical_column, dimension, combiner="mean", initializer=None, ckpt_to_load_from=None,
                     tensor_name_in_ckpt=None, max_norm=None, trainable=True, use_safe_embedding_lookup=True):
    for arg, v in (("initializer", initializer), ("ckpt_to_load_from", ckpt_to_load_from),
                   ("tensor_name_in_ckpt", tensor_name_in_ckpt)):
        if v is not None:
            raise NotImplementedError("loom.tf: embedding_column(%s=...) is not supported (loom's default "
                                      "initializer is TF's truncated_normal(0, 1/sqrt(dimension)); warm start "
                                      "with the estimator's warm_start_from)" % arg)
    return _n.embedding(categorical_column, dimension, combiner, max_norm, trainable)


def shared_embeddings(categorical_columns, dimension, combiner="mean", initializer=None,
                      shared_embedding_collection_name=None, ckpt_to_load_from=None, tensor_name_in_ckpt=None,
                      max_norm=None, trainable=True, use_safe_embedding_lookup=True):
    """One embedding table shared by categorical columns of the same number
    of buckets: a list of columns, one per categorical column."""
    for arg, v in (("initializer", initializer), ("ckpt_to_load_from", ckpt_to_load_from),
                   ("tensor_name_in_ckpt", tensor_name_in_ckpt)):
        if v is not None:
            raise NotImplementedError("loom.tf: shared_embeddings(%s=...) is not supported" % arg)
    for c in categorical_columns:
        if _is_sequence(c):
            raise NotImplementedError("loom.tf: shared_embeddings over the sequence column %r is not supported; use "
                                      "an embedding_column per sequence column" % c.name)
    return _n.shared_embeddings(categorical_columns, dimension, combiner, max_norm, trainable,
                                shared_embedding_collection_name)


# ---------------------------------------------------------------- sequence columns
def sequence_categorical_column_with_identity(key, num_buckets, default_value=None):
    """Integer ids read as a sequence (a step per value of the VarLenFeature
    `key`); wrap with embedding_column or indicator_column for
    tf.keras.experimental.SequenceFeatures."""
    return _n.sequence_categorical(categorical_column_with_identity(key, num_buckets, default_value))


def sequence_categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=_dt.string):
    return _n.sequence_categorical(categorical_column_with_hash_bucket(key, hash_bucket_size, dtype))


def sequence_categorical_column_with_vocabulary_file(key, vocabulary_file, vocabulary_size=None,
                                                     num_oov_buckets=0, default_value=None, dtype=_dt.string):
    return _n.sequence_categorical(categorical_column_with_vocabulary_file(
        key, vocabulary_file, vocabulary_size, dtype, default_value, num_oov_buckets))


def sequence_categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None, default_value=-1,
                                                     num_oov_buckets=0):
    return _n.sequence_categorical(categorical_column_with_vocabulary_list(
        key, vocabulary_list, dtype, default_value, num_oov_buckets))


def sequence_numeric_column(key, shape=(1,), default_value=0., dtype=_dt.float32, normalizer_fn=None):
    """A sequence of float32 steps of `shape` from the VarLenFeature `key`;
    default_value pads the steps past an example's end. normalizer_fn gets
    the feature's values (float32 [nnz], where TF gives the SparseTensor;
    elementwise tf ops give the same values) and returns a tensor of that
    shape; the padding stays default_value, as in TF."""
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError("normalizer_fn must be a callable. Given: %r" % (normalizer_fn,))
    return _n.sequence_numeric(key, shape, default_value, _dt.as_dtype(dtype), normalizer_fn, _trace)


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


_FROM_NP = {np.dtype(np.float32): _dt.float32, np.dtype(np.int64): _dt.int64, np.dtype(object): _dt.string}


def make_parse_example_spec(feature_columns):
    """{key: FixedLenFeature | VarLenFeature}, from loom.feature_column's
    make_parse_example_spec (loom_fc_make_parse_example_spec)."""
    feature_columns = list(feature_columns or [])
    out = {}
    for k, p in _n.make_parse_example_spec(feature_columns).items():
        dt = _FROM_NP[np.dtype(p.dtype)]
        out[k] = VarLenFeature(dt) if p.varlen else FixedLenFeature(p.shape, dt, p.default_value)
    # an integer numeric_column parses an int64_list, as TF's spec says (loom's columns read it as float)
    for c in feature_columns:
        src = c.source_column if isinstance(c, BucketizedColumn) else c
        if isinstance(src, NumericColumn) and _dt.as_dtype(src.dtype).is_integer and src.key in out:
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
