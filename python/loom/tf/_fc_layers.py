"""tf.compat.v1.feature_column.input_layer and linear_model inside a
model_fn, on loom_fc_input_layer / loom_fc_linear_model: the features are
the model_fn's (sparse ones keep their row splits), the columns any
tf.feature_column columns; TF's variable names (input_layer/...,
linear_model/<column>/weights, linear_model/bias_weights)."""
import ctypes as C

from .. import _lib as L
from .._lib import lib
from .. import Output, _Status, _b, LoomError
from .. import _feature_column as _n
from . import ops as _ops

L._d("loom_features_new", L.vp)
L._d("loom_features_free", None, L.vp)
L._d("loom_features_is_sparse", L.cint, L.vp, L.cint)


class _Sparse(C.Structure):  # loom_sparse (loom_sparse.h)
    _fields_ = [("values", L.Output), ("row_splits", L.Output)]


L._d("loom_features_get_sparse", _Sparse, L.vp, L.cs)
L._d("loom_features_add_sparse", L.cint, L.vp, L.cs, _Sparse, L.vp)
L._d("loom_fc_input_layer", L.cint, L.vp, L.vp, L.cint, L.P(L.vp), L.cs, L.cint, L.P(L.Output), L.vp)
L._d("loom_fc_linear_model", L.cint, L.vp, L.vp, L.cint, L.P(L.vp), L.i64, L.cint, L.cs, L.cint, L.P(L.Output),
     L.vp)

L._d("loom_fc_sequence_input_layer", L.cint, L.vp, L.vp, L.cint, L.P(L.vp), L.cs, L.cint, L.P(L.Output),
     L.P(L.Output), L.vp)

_made = {}  # id(columns) tuple -> (columns, loom set, pointers): the C columns live as long as the process


def _columns(feature_columns, what):
    cols = list(feature_columns or [])
    if not cols:
        raise ValueError("%s: feature_columns must not be empty." % what)
    for c in cols:
        if not isinstance(c, _n.FeatureColumn):
            raise ValueError("%s: Items of feature_columns must be a FeatureColumn. Given (type %s): %r."
                             % (what, type(c), c))
    key = tuple(id(c) for c in cols)
    if key not in _made:
        try:
            fcs, ptrs = _n.make_columns(cols)
        except LoomError as e:
            raise ValueError("%s: %s" % (what, e)) from None
        _made[key] = (cols, fcs, ptrs)
    ptrs = _made[key][2]
    return len(ptrs), (C.c_void_p * len(ptrs))(*ptrs)


def _features_map(features, what):
    """(the C loom_features for these features, free): the model_fn's own map
    when features is its dict unchanged, else a map of the dict's tensors."""
    if not _ops._features:
        raise NotImplementedError("loom.tf: %s outside a model_fn: loom.tf builds it from the model_fn's features"
                                  % what)
    g, cf = _ops._features[-1]
    if not isinstance(features, dict):
        raise ValueError("%s: features should be a dictionary of tensors, got %s" % (what, type(features).__name__))
    orig = {lib.loom_features_name(cf, i).decode(): i for i in range(lib.loom_features_count(cf))}

    def same(k, v):
        if k not in orig or not isinstance(v, Output):
            return False
        o = lib.loom_features_at(cf, orig[k])
        return o.node == v.c.node and o.index == v.c.index
    if set(features) == set(orig) and all(same(k, v) for k, v in features.items()):
        return g, cf, lambda: None
    m = lib.loom_features_new()
    try:
        for k, v in features.items():
            if not isinstance(v, Output):
                raise ValueError("%s: features[%r] must be a tensor of the model_fn, got %r" % (what, k, v))
            st = _Status()
            if same(k, v) and lib.loom_features_is_sparse(cf, orig[k]):
                st.raise_if(lib.loom_features_add_sparse(m, _b(k), lib.loom_features_get_sparse(cf, _b(k)), st.p))
            else:
                st.raise_if(lib.loom_features_add(m, _b(k), v.c, st.p))
    except BaseException:
        lib.loom_features_free(m)
        raise
    return g, m, lambda: lib.loom_features_free(m)


def input_layer(features, feature_columns, weight_collections=None, trainable=True, cols_to_vars=None,
                cols_to_output_tensors=None, _scope=b"input_layer", _what="tf.compat.v1.feature_column.input_layer"):
    """tf.compat.v1.feature_column.input_layer: the dense columns
    concatenated (sorted by name) into a [batch, width] float32 tensor."""
    what = _what
    for arg, v in (("weight_collections", weight_collections), ("cols_to_vars", cols_to_vars),
                   ("cols_to_output_tensors", cols_to_output_tensors)):
        if v is not None:
            raise NotImplementedError("loom.tf: %s(%s=...) is not supported" % (what, arg))
    n, arr = _columns(feature_columns, what)
    return _build(features, what, lambda g, m, out, st: lib.loom_fc_input_layer(
        g.p, m, n, arr, _scope, int(bool(trainable)), C.byref(out), st.p))


def _build(features, what, call):
    """Runs call(graph, feature map, output, status) on the features' graph; loom's error as ValueError
    naming what."""
    g, m, free = _features_map(features, what)
    out = L.Output()
    st = _Status()
    try:
        rc = call(g, m, out, st)
        if rc:
            try:
                st.raise_if(rc)
            except LoomError as e:
                raise ValueError("%s: %s" % (what, e)) from None
    finally:
        free()
    return g._out(out)


_COMBINERS = {"sum": 0, "mean": 1, "sqrtn": 2}


def linear_model(features, feature_columns, units=1, sparse_combiner="sum", weight_collections=None,
                 trainable=True, cols_to_vars=None):
    """tf.compat.v1.feature_column.linear_model: [batch, units] logits
    (variables linear_model/<column>/weights, linear_model/bias_weights)."""
    what = "tf.compat.v1.feature_column.linear_model"
    for arg, v in (("weight_collections", weight_collections), ("cols_to_vars", cols_to_vars)):
        if v is not None:
            raise NotImplementedError("loom.tf: %s(%s=...) is not supported" % (what, arg))
    if sparse_combiner not in _COMBINERS:
        raise ValueError("%s: sparse_combiner must be one of %s, got %r" % (what, sorted(_COMBINERS),
                                                                            sparse_combiner))
    n, arr = _columns(feature_columns, what)
    return _build(features, what, lambda g, m, out, st: lib.loom_fc_linear_model(
        g.p, m, n, arr, int(units), _COMBINERS[sparse_combiner], b"linear_model", int(bool(trainable)),
        C.byref(out), st.p))


class DenseFeatures:
    """tf.keras.layers.DenseFeatures(feature_columns) called on a model_fn's
    features: input_layer's tensor, with its variables under the layer's
    name ("dense_features/<column>_embedding/embedding_weights", as TF 2's)."""

    def __init__(self, feature_columns, trainable=True, name=None, partitioner=None, **kwargs):
        if partitioner is not None or kwargs:
            raise NotImplementedError("loom.tf: tf.keras.layers.DenseFeatures(%s) is not supported"
                                      % ", ".join(["partitioner"] * (partitioner is not None) + sorted(kwargs)))
        _columns(feature_columns, "tf.keras.layers.DenseFeatures")
        self.feature_columns, self.trainable, self.name = list(feature_columns), trainable, name or "dense_features"

    def __call__(self, features, cols_to_output_tensors=None, training=None):
        return input_layer(features, self.feature_columns, trainable=self.trainable,
                           cols_to_output_tensors=cols_to_output_tensors, _scope=_b(self.name),
                           _what="tf.keras.layers.DenseFeatures")


class SequenceFeatures:
    """tf.keras.experimental.SequenceFeatures(feature_columns) called on a
    model_fn's features: (sequence_input [batch, T, width] float32,
    sequence_length [batch] int64), T the batch's longest sequence, on
    loom_fc_sequence_input_layer. The columns: sequence_numeric_column and
    embedding / indicator columns of sequence_categorical_column_with_*,
    concatenated by name; variables under the layer's name
    ("sequence_features/<column>_embedding/embedding_weights")."""

    def __init__(self, feature_columns, trainable=True, name=None, **kwargs):
        if kwargs:
            raise NotImplementedError("loom.tf: tf.keras.experimental.SequenceFeatures(%s) is not supported"
                                      % ", ".join(sorted(kwargs)))
        what = "tf.keras.experimental.SequenceFeatures"
        cols = list(feature_columns or [])
        for c in cols:
            if isinstance(c, (_n.EmbeddingColumn, _n.IndicatorColumn)) and \
                    not isinstance(c.categorical_column, _n.SequenceCategoricalColumn):
                raise ValueError("%s: In %s: %s. categorical_column must be of type SequenceCategoricalColumn to "
                                 "use SequenceFeatures. Suggested fix: Use one of "
                                 "sequence_categorical_column_with_*. Given: %r"
                                 % (what, "embedding_column" if isinstance(c, _n.EmbeddingColumn)
                                    else "indicator_column", c.name, c.categorical_column))
            if isinstance(c, _n.FeatureColumn) and not isinstance(
                    c, (_n.SequenceNumericColumn, _n.EmbeddingColumn, _n.IndicatorColumn)):
                raise ValueError("%s: Items of feature_columns must be a SequenceDenseColumn. You can wrap a "
                                 "sequence categorical column with an embedding_column or indicator_column. Given: "
                                 "%r" % (what, c))
        _columns(cols, what)
        self.feature_columns, self.trainable, self.name = cols, trainable, name or "sequence_features"

    def __call__(self, features, training=None):
        what = "tf.keras.experimental.SequenceFeatures"
        n, arr = _columns(self.feature_columns, what)
        lengths = L.Output()

        def call(g, m, out, st):
            return lib.loom_fc_sequence_input_layer(g.p, m, n, arr, _b(self.name), int(bool(self.trainable)),
                                                    C.byref(out), C.byref(lengths), st.p)
        seq = _build(features, what, call)
        return seq, seq.graph._out(lengths)
