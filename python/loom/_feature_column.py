"""loom.feature_column: every kind of loom's C feature columns
(loom_feature_columns.h) as Python descriptions.

A column here describes a loom_fc: it is made in a fresh loom_fc_set when a
canned estimator (or make_parse_example_spec) uses it, so one column can
serve several estimators. Each builder makes its column once straight away,
so a bad argument raises ValueError with loom's message (naming the column)
at the call.

    import numpy as np, loom
    fc = loom.feature_column
    age = fc.numeric("age")
    city = fc.vocabulary_list("city", ["paris", "rome"], num_oov_buckets=1)
    cols = [fc.bucketized(age, [18, 40]), fc.embedding(city, 4), fc.indicator(city)]
    est = loom.DNNClassifier([8], cols, n_classes=2)

dtypes are numpy dtypes (np.float32, np.int64 ...) or str for strings (a
loom.tf DType works too)."""
import ctypes as C

import numpy as np

from . import _lib as L
from ._lib import lib
from . import _Status, _b, _dims, LoomError

__all__ = ["FeatureColumn", "numeric", "bucketized", "identity", "vocabulary_list", "vocabulary_file",
           "hash_bucket", "crossed", "embedding", "indicator", "weighted", "shared_embeddings",
           "sequence_categorical", "sequence_numeric",
           "make_parse_example_spec", "make_columns"]

COMBINERS = {"sum": 0, "mean": 1, "sqrtn": 2}
_LOOM_DTYPE = {"float32": 1, "float64": 2, "int32": 3, "int64": 4, "string": 7}
_FROM_LOOM = {1: np.dtype(np.float32), 4: np.dtype(np.int64), 7: np.dtype(object)}


def dtype_name(d):
    """A dtype's name: "string" for str / bytes / object (and loom.tf's
    tf.string), else numpy's name ("float32", "int64" ...)."""
    if hasattr(d, "as_numpy_dtype") and hasattr(d, "name"):  # a loom.tf DType
        return d.name
    if d is str or d is bytes or d is object:
        return "string"
    try:
        nd = np.dtype(d)
    except TypeError:
        raise TypeError("loom: cannot convert %r to a dtype" % (d,)) from None
    return "string" if nd.kind in "USO" else nd.name


def _is_string(d):
    return dtype_name(d) == "string"


def _made(p, st):
    if not p:
        st.raise_if()
    return p


class FeatureColumn:
    """Base of every column: its name (loom_fc_name, TF's), the raw keys it
    reads with the numpy dtypes the inputs are converted to, and how to make
    it in a loom_fc_set."""
    _parents = ()

    def _make(self, fcs, memo):
        key = id(self)
        if key not in memo:
            parents = [p._make(fcs, memo) for p in self._parents]
            st = _Status()
            memo[key] = _made(self._new(fcs.p, parents, st.p), st)
            fcs._keep.append(self)  # the column's normalizer callback lives as long as the set
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
        """Makes the column once, so that a bad argument fails here (ValueError)."""
        from . import FeatureColumns
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
        """The number of ids of a categorical column (0 for a dense one)."""
        return self._num_buckets

    def __repr__(self):
        return "%s(%r)" % (type(self).__name__, self._name)


class _Normalizer:
    """A normalizer_fn as C's loom_fc_normalizer_fn (through
    loom_fc_normalizer_via_out): called with the column's float32 tensor (a
    loom.Output of the graph being built) while C builds the column's layer,
    it returns the normalized tensor of the same shape. An exception inside
    it is recorded and raised by the failing call (train, evaluate, predict,
    export, input_layer ...) unchanged. The callback lives as long as this
    object (held by its column)."""

    def __init__(self, fn, what, trace=None):
        self.fn, self.what, self.trace = fn, what, trace
        self.cb = L.NORMALIZER_OUT_FN(self._call)
        self.box = L.NormalizerOut(self.cb, None)

    def args(self):
        """(normalizer, user) for loom_fc_numeric."""
        return L.NORMALIZER_VIA_OUT, C.cast(C.pointer(self.box), C.c_void_p)

    def _call(self, g, x, out, user):
        try:
            from . import Graph, Output
            graph = Graph(_borrow=g)
            xin = Output(graph, x)
            y = self.trace(self.fn, xin) if self.trace else self.fn(xin)
            if not isinstance(y, Output):
                raise TypeError("%s: normalizer_fn must return a tensor built from its input with loom ops, got %r"
                                % (self.what, y))
            if y.graph.p != graph.p:
                raise ValueError("%s: normalizer_fn returned a tensor of another graph" % self.what)
            ys, xs = y.shape, xin.shape
            if len(ys) != len(xs) or any(a != b and a is not None for a, b in zip(ys, xs)):
                raise ValueError("%s: normalizer_fn must return a tensor of its input's shape %s, got shape %s"
                                 % (self.what, _fmt(xs), _fmt(ys)))
            if np.dtype(y.dtype) != np.float32:
                raise TypeError("%s: normalizer_fn must return a float32 tensor (as its input), got %s"
                                % (self.what, np.dtype(y.dtype).name))
            out[0] = y.c
            return 0
        except BaseException as e:  # noqa: B902 - must not unwind through C; raised by the failing call
            from . import _set_callback_error
            _set_callback_error(e)
            return 1


def _fmt(shape):
    return "(%s)" % ", ".join("None" if d is None else str(d) for d in shape) if len(shape) != 1 else \
        "(%s,)" % ("None" if shape[0] is None else shape[0])


class NumericColumn(FeatureColumn):
    def __init__(self, key, shape, default_value, dtype, normalizer_fn=None, _trace=None):
        self.key, self.shape, self.default_value, self.dtype = key, shape, default_value, dtype
        self.normalizer_fn = normalizer_fn
        self._norm = None if normalizer_fn is None else _Normalizer(normalizer_fn, "numeric_column %r" % key, _trace)

    def _new(self, s, parents, st):
        n, dims = _dims(self.shape)
        dv = None
        if self.default_value is not None:
            self._dv = np.ascontiguousarray(np.broadcast_to(np.asarray(self.default_value, np.float32), self.shape))
            dv = self._dv.ctypes.data_as(C.POINTER(C.c_float))
        fn, user = self._norm.args() if self._norm else (None, None)
        return lib.loom_fc_numeric(s, _b(self.key), n, dims, dv, 2 if dtype_name(self.dtype) == "float64" else 1,
                                   fn, user, st)

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
        if _is_string(self.dtype):
            arr = (C.c_char_p * max(1, n))(*[_b(str(x)) for x in v])
            return lib.loom_fc_vocabulary_list(s, _b(self.key), n, arr, self.num_oov_buckets, self.default_value, st)
        arr = (L.i64 * max(1, n))(*[int(x) for x in v])
        return lib.loom_fc_vocabulary_list_int64(s, _b(self.key), n, arr, self.num_oov_buckets, self.default_value,
                                                 st)

    def _hints(self):
        return {self.key: object if _is_string(self.dtype) else np.int64}


class VocabularyFileColumn(FeatureColumn):
    def __init__(self, key, vocabulary_file, vocabulary_size, dtype, default_value, num_oov_buckets):
        self.key, self.vocabulary_file, self.vocabulary_size, self.dtype = key, vocabulary_file, vocabulary_size, dtype
        self.default_value, self.num_oov_buckets = default_value, num_oov_buckets

    def _new(self, s, parents, st):
        dv = -1 if self.default_value is None else self.default_value
        return lib.loom_fc_vocabulary_file(s, _b(self.key), _b(str(self.vocabulary_file)), self.vocabulary_size or 0,
                                           self.num_oov_buckets, dv, 7 if _is_string(self.dtype) else 4, st)

    def _hints(self):
        return {self.key: object if _is_string(self.dtype) else np.int64}


class HashBucketColumn(FeatureColumn):
    def __init__(self, key, hash_bucket_size, dtype):
        self.key, self.hash_bucket_size, self.dtype = key, hash_bucket_size, dtype

    def _new(self, s, parents, st):
        return lib.loom_fc_hash_bucket(s, _b(self.key), self.hash_bucket_size,
                                       _LOOM_DTYPE.get(dtype_name(self.dtype), 4), st)

    def _hints(self):
        return {self.key: object if _is_string(self.dtype) else np.int64}


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


class SequenceCategoricalColumn(FeatureColumn):
    """An identity, vocabulary or hash bucket column read as a sequence (a
    step per value of the ragged feature): only indicator and embedding
    columns take one, and only the sequence input layer takes those."""

    def __init__(self, categorical):
        self.categorical_column = categorical
        self.key = categorical.key
        self._parents = (categorical,)

    def _new(self, s, parents, st):
        return lib.loom_fc_sequence_categorical(s, parents[0], st)


class SequenceNumericColumn(FeatureColumn):
    """A step per numel(shape) values of the ragged feature `key`;
    default_value pads the steps past an example's end."""

    def __init__(self, key, shape, default_value, dtype, normalizer_fn=None, _trace=None):
        self.key, self.shape, self.default_value, self.dtype = key, shape, default_value, dtype
        self.normalizer_fn = normalizer_fn
        self._norm = None if normalizer_fn is None else _Normalizer(normalizer_fn, "sequence_numeric_column %r" % key,
                                                                    _trace)

    def _new(self, s, parents, st):
        n, dims = _dims(self.shape)
        dt = 2 if dtype_name(self.dtype) == "float64" else 1
        if self._norm:
            fn, user = self._norm.args()
            return lib.loom_fc_sequence_numeric_normalized(s, _b(self.key), n, dims, float(self.default_value), dt,
                                                           fn, user, st)
        return lib.loom_fc_sequence_numeric(s, _b(self.key), n, dims, float(self.default_value), dt, st)

    def _hints(self):
        return {self.key: np.float32}


def _is_sequence(c):
    return isinstance(c, SequenceCategoricalColumn) or isinstance(c, SequenceNumericColumn)


def _embedding_options(combiner, max_norm, trainable, shared_name=None):
    o = lib.loom_fc_embedding_options_default()
    o.combiner = COMBINERS[combiner]
    o.max_norm = max_norm or 0.0
    o.trainable = int(bool(trainable))
    o.shared_name = _b(shared_name)
    return o


class EmbeddingColumn(FeatureColumn):
    def __init__(self, categorical, dimension, combiner, max_norm, trainable):
        self.categorical_column, self.dimension, self.combiner = categorical, dimension, combiner
        self.max_norm, self.trainable = max_norm, trainable
        self._parents = (categorical,)

    def _new(self, s, parents, st):
        o = _embedding_options(self.combiner, self.max_norm, self.trainable)
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
            o = _embedding_options(self.combiner, self.max_norm, self.trainable, self.name)
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


# ---------------------------------------------------------------- builders
def _key(key, what):
    if not isinstance(key, str) or not key:
        raise ValueError("%s: key must be a non-empty string, got %r" % (what, key))
    return key


def _shape(shape):
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(d) for d in shape)


def _combiner(combiner, what):
    if combiner not in COMBINERS:
        raise ValueError("%s: combiner must be one of %s, got %r" % (what, sorted(COMBINERS), combiner))
    return combiner


def _normalizer_arg(fn, what, key):
    if fn is not None and not callable(fn):
        raise TypeError("%s %r: normalizer_fn must be a callable, given: %r" % (what, key, fn))
    return fn


def numeric(key, shape=(1,), default_value=None, dtype=np.float32, normalizer_fn=None, _trace=None):
    """A dense column of the raw feature `key` (loom_fc_numeric): float32
    values of `shape` per example; default_value fills a missing feature.
    normalizer_fn(x) -> tensor: x is the column's float32 tensor [batch,
    *shape] (a loom.Output of the graph being built), the result a float32
    tensor of the same shape built from x with loom ops (x.graph's, or
    Output's + - * /); it runs whenever a graph uses the column (train,
    evaluate, predict, export), so the exported model applies it too."""
    name = dtype_name(dtype)
    if not (name.startswith("float") or name.startswith("int") or name.startswith("uint")):
        raise ValueError("numeric_column %r: dtype must be a float or integer type, got %s" % (key, name))
    return NumericColumn(_key(key, "numeric_column"), _shape(shape), default_value, dtype,
                         _normalizer_arg(normalizer_fn, "numeric_column", key), _trace)._check()


def bucketized(source_column, boundaries):
    """The bucket of a numeric column's value (loom_fc_bucketized): ids
    0..len(boundaries), a bucket [b[i-1], b[i])."""
    if not isinstance(source_column, NumericColumn):
        raise ValueError("bucketized_column: source_column must be a numeric_column, got %r" % (source_column,))
    return BucketizedColumn(source_column, boundaries)._check()


def identity(key, num_buckets, default_value=None):
    """Integer ids used as they are (loom_fc_identity); an id outside
    [0, num_buckets) is default_value, or an error when None."""
    return IdentityColumn(_key(key, "categorical_column_with_identity"), int(num_buckets), default_value)._check()


def vocabulary_list(key, vocabulary, dtype=None, default_value=-1, num_oov_buckets=0):
    """Strings (or int64) mapped to their index in `vocabulary`
    (loom_fc_vocabulary_list); others to default_value, or hashed into
    num_oov_buckets extra ids. dtype: str or np.int64 (None: from the
    vocabulary)."""
    vocabulary = list(vocabulary)
    if dtype is None:
        dtype = str if vocabulary and isinstance(vocabulary[0], (str, bytes)) else np.int64
    return VocabularyListColumn(_key(key, "categorical_column_with_vocabulary_list"), vocabulary, dtype,
                                default_value, num_oov_buckets)._check()


def vocabulary_file(key, path, vocabulary_size=None, dtype=str, default_value=None, num_oov_buckets=0):
    """vocabulary_list with the vocabulary read from a file, one entry a
    line (loom_fc_vocabulary_file); vocabulary_size: the first lines only."""
    return VocabularyFileColumn(_key(key, "categorical_column_with_vocabulary_file"), path, vocabulary_size,
                                dtype, default_value, num_oov_buckets)._check()


def hash_bucket(key, hash_bucket_size, dtype=str):
    """Strings (or integers) hashed into hash_bucket_size ids
    (loom_fc_hash_bucket, TF's fingerprint hash)."""
    return HashBucketColumn(_key(key, "categorical_column_with_hash_bucket"), int(hash_bucket_size), dtype)._check()


def crossed(keys, hash_bucket_size, hash_key=None):
    """The cross of raw string features (keys) and categorical or bucketized
    columns, hashed into hash_bucket_size ids (loom_fc_crossed)."""
    return CrossedColumn(keys, int(hash_bucket_size), hash_key)._check()


def weighted(categorical_column, weight_feature_key, dtype=np.float32):
    """A categorical column whose ids carry the weights of the feature
    weight_feature_key (loom_fc_weighted)."""
    return WeightedColumn(categorical_column, weight_feature_key, dtype)._check()


def indicator(categorical_column):
    """The multi-hot dense form of a categorical column (loom_fc_indicator)."""
    return IndicatorColumn(categorical_column)._check()


def embedding(categorical_column, dimension, combiner="mean", max_norm=None, trainable=True):
    """A trainable embedding table over a categorical column
    (loom_fc_embedding): combiner "sum", "mean" or "sqrtn" over an example's
    ids; initialized as TF's truncated_normal(0, 1/sqrt(dimension))."""
    return EmbeddingColumn(categorical_column, int(dimension), _combiner(combiner, "embedding_column"), max_norm,
                           trainable)._check()


def shared_embeddings(categorical_columns, dimension, combiner="mean", max_norm=None, trainable=True,
                      shared_name=None):
    """One embedding table shared by categorical columns of the same number
    of buckets (loom_fc_shared_embeddings): a list of columns, one per
    categorical column."""
    cats = list(categorical_columns)
    g = _SharedGroup(cats, int(dimension), _combiner(combiner, "shared_embeddings"), max_norm, trainable,
                     shared_name)
    return [SharedEmbeddingColumn(g, i)._check() for i in range(len(cats))]


def sequence_categorical(categorical_column):
    """categorical_column (identity, vocabulary_list, vocabulary_file or
    hash_bucket) as a sequence column (loom_fc_sequence_categorical), named
    as it; wrap it with indicator or embedding for the sequence input layer."""
    if not isinstance(categorical_column, (IdentityColumn, VocabularyListColumn, VocabularyFileColumn,
                                           HashBucketColumn)):
        raise ValueError("sequence_categorical: categorical_column must be an identity, vocabulary or hash bucket "
                         "column, got %r" % (categorical_column,))
    return SequenceCategoricalColumn(categorical_column)._check()


def sequence_numeric(key, shape=(1,), default_value=0.0, dtype=np.float32, normalizer_fn=None, _trace=None):
    """A sequence of float32 steps of `shape` from the ragged feature `key`
    (loom_fc_sequence_numeric); default_value pads past an example's end.
    normalizer_fn(values) -> tensor: as numeric's, given the feature's
    values, float32 [nnz] (the padding stays default_value)."""
    name = dtype_name(dtype)
    if not (name.startswith("float") or name.startswith("int") or name.startswith("uint")):
        raise ValueError("sequence_numeric_column %r: dtype must be convertible to float, got %s" % (key, name))
    try:
        default_value = float(default_value)
    except (TypeError, ValueError):
        raise TypeError("sequence_numeric_column %r: default_value must be a number, got %r"
                        % (key, default_value)) from None
    return SequenceNumericColumn(_key(key, "sequence_numeric_column"), _shape(shape), default_value, dtype,
                                 _normalizer_arg(normalizer_fn, "sequence_numeric_column", key), _trace)._check()


def make_columns(columns):
    """(a new loom.FeatureColumns set, [loom_fc pointers]) for columns."""
    from . import FeatureColumns
    fcs = FeatureColumns()
    memo = {}
    cols = list(columns or [])
    for c in cols:
        if not isinstance(c, FeatureColumn):
            raise TypeError("loom: feature_columns must be loom.feature_column columns, got %r" % (c,))
    return fcs, [c._make(fcs, memo) for c in cols]


def make_parse_example_spec(feature_columns):
    """What parsing a tf.Example takes for these columns
    (loom_fc_make_parse_example_spec): {key: ParseSpec(varlen, dtype,
    shape, default_value)}, dtype np.float32, np.int64 or object
    (strings)."""
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
    try:
        for i in range(n.value):
            s = spec[i]
            dt = _FROM_LOOM[s.dtype]
            if s.varlen or s.kind == 1:
                out[s.name.decode()] = ParseSpec(True, dt, None, None)
                continue
            shape = tuple(s.dims[j] for j in range(s.ndim))
            dv = None
            if s.default_value:
                numel = int(np.prod(shape)) if shape else 1
                if dt == object:
                    dv = [C.cast(s.default_value, C.POINTER(C.c_char_p))[j] for j in range(numel)]
                else:
                    ct = C.c_float if dt == np.float32 else C.c_int64
                    dv = [C.cast(s.default_value, C.POINTER(ct))[j] for j in range(numel)]
            out[s.name.decode()] = ParseSpec(False, dt, shape, dv)
    finally:
        lib.loom_fc_parse_spec_free(n.value, spec)
    return out


class ParseSpec:
    """One feature of a parse spec: varlen (a VarLenFeature) or fixed with
    its shape and default_value (a list, or None: required)."""

    def __init__(self, varlen, dtype, shape, default_value):
        self.varlen, self.dtype, self.shape, self.default_value = varlen, dtype, shape, default_value

    def __repr__(self):
        if self.varlen:
            return "ParseSpec(varlen, %s)" % self.dtype
        return "ParseSpec(%s, %s, default_value=%r)" % (self.dtype, self.shape, self.default_value)
