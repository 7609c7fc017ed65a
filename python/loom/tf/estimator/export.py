"""tf.estimator.export: serving input receiver fns for export_saved_model
and the exporters. build_parsing_serving_input_receiver_fn gives TF's
parsing receiver (serialized tf.Example in; classify / regress / predict
signatures); build_raw_serving_input_receiver_fn takes placeholders
(tf.compat.v1.placeholder) and gives the predict signature."""
from ... import _lib as L
from ..._lib import lib
from ... import _Status, _b, Graph
from ..._estimator import _fail
from .. import feature_column as _fc
from ..compat_placeholder import Placeholder
from .._surface import missing, unsupported


class _ParsingReceiverFn:
    def __init__(self, feature_spec, default_batch_size):
        if not isinstance(feature_spec, dict) or not feature_spec:
            raise ValueError("build_parsing_serving_input_receiver_fn: feature_spec must be a non-empty dict")
        self.feature_spec = dict(feature_spec)

    def __call__(self):
        raise unsupported("estimator.export.ServingInputReceiver (calling a receiver fn); pass the fn to "
                          "export_saved_model or an exporter")


class _RawReceiverFn:
    def __init__(self, features, default_batch_size):
        if not isinstance(features, dict) or not features:
            raise ValueError("build_raw_serving_input_receiver_fn: features must be a non-empty dict of "
                             "placeholders")
        for k, v in features.items():
            if not isinstance(v, Placeholder):
                raise NotImplementedError("loom.tf: build_raw_serving_input_receiver_fn: feature %r must be a "
                                          "tf.compat.v1.placeholder" % k)
        self.features = dict(features)

    __call__ = _ParsingReceiverFn.__call__


class ServingInputReceiver:
    """tf.estimator.export.ServingInputReceiver(features, receiver_tensors):
    loom.tf takes placeholders (tf.compat.v1.placeholder) that are both the
    features and the receiver tensors (the raw receiver)."""

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None):
        if receiver_tensors_alternatives:
            raise NotImplementedError("loom.tf: ServingInputReceiver(receiver_tensors_alternatives=...) is not "
                                      "supported")
        if not isinstance(features, dict):
            features = {"feature": features}
        if not isinstance(receiver_tensors, dict):
            receiver_tensors = {"input": receiver_tensors}
        if any(features.get(k) is not v for k, v in receiver_tensors.items()) or len(features) != len(
                receiver_tensors):
            raise NotImplementedError("loom.tf: ServingInputReceiver: the features must be the receiver tensors "
                                      "themselves (placeholders); for serialized tf.Example use "
                                      "build_parsing_serving_input_receiver_fn")
        self.features, self.receiver_tensors = features, receiver_tensors


def build_parsing_serving_input_receiver_fn(feature_spec, default_batch_size=None):
    return _ParsingReceiverFn(feature_spec, default_batch_size)


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
    return _RawReceiverFn(features, default_batch_size)


def _serving(est, fn):
    """(loom_serving_input_fn, user, free) for a receiver fn."""
    if isinstance(fn, _ParsingReceiverFn):
        n, arr, keep = _fc.feature_spec_to_c(fn.feature_spec)
        st = _Status()
        r = lib.loom_parsing_receiver_new(n, arr, st.p)
        if not r:
            st.raise_if()
        return L.PARSING_SERVING_INPUT_FN, r, lambda: lib.loom_parsing_receiver_free(r)
    if isinstance(fn, _RawReceiverFn):
        def serving(g, features, receivers, user, st):
            try:
                graph = Graph(_borrow=g)
                for k, ph in fn.features.items():
                    x = graph.placeholder(ph.dtype.as_numpy_dtype, ph.shape, ph.name or k)
                    for m in (features, receivers):
                        s2 = _Status()
                        s2.raise_if(lib.loom_features_add(m, _b(k), x.c, s2.p))
                return 0
            except BaseException as e:  # noqa: B902 - must not unwind through C
                return _fail(est, st, e)
        cb = L.SERVING_INPUT_FN(serving)
        return cb, None, lambda: cb  # keeps the callback alive for the call
    if callable(fn):  # a Python receiver fn: called once, as TF calls it in the export graph
        r = fn()
        if not isinstance(r, ServingInputReceiver):
            raise TypeError("serving_input_receiver_fn must return a ServingInputReceiver, got %s"
                            % type(r).__name__)
        return _serving(est, _RawReceiverFn(r.features, None))
    raise NotImplementedError("loom.tf: serving_input_receiver_fn %r: give "
                              "tf.estimator.export.build_parsing_serving_input_receiver_fn(...) or "
                              "build_raw_serving_input_receiver_fn(...); a Python receiver fn of TF ops is not "
                              "supported yet" % (fn,))


def __getattr__(name):
    raise missing("estimator.export.", name)
