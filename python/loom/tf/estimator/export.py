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
    receivers = None  # {receiver name: feature key} when they differ (TensorServingInputReceiver)

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


_SINGLE_FEATURE = "__features__"  # the feature key a model_fn receives as one tensor (estimator/__init__.py)


class TensorServingInputReceiver:
    """tf.estimator.export.TensorServingInputReceiver(features,
    receiver_tensors, receiver_tensors_alternatives=None): features is one
    tensor, which the model_fn receives as its features (not a dict);
    receiver_tensors a tensor (named "input" in the signature) or a dict.
    loom.tf takes a placeholder (tf.compat.v1.placeholder) that is both the
    features and the receiver tensor."""

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None):
        if features is None:
            raise ValueError("features must be defined.")
        if isinstance(features, dict):
            raise ValueError("feature must be a Tensor or SparseTensor (TensorServingInputReceiver takes one "
                             "tensor; a dict of features is a ServingInputReceiver), given: %r" % (features,))
        if receiver_tensors_alternatives:
            raise NotImplementedError("loom.tf: TensorServingInputReceiver(receiver_tensors_alternatives=...) is "
                                      "not supported")
        if receiver_tensors is None:
            raise ValueError("receiver_tensors must be defined.")
        if not isinstance(receiver_tensors, dict):
            receiver_tensors = {"input": receiver_tensors}
        for name, t in receiver_tensors.items():
            if not isinstance(name, str):
                raise ValueError("receiver_tensor keys must be strings: {}.".format(name))
        if not isinstance(features, Placeholder) or any(t is not features for t in receiver_tensors.values()):
            raise NotImplementedError("loom.tf: TensorServingInputReceiver: the features must be a "
                                      "tf.compat.v1.placeholder that is also the receiver tensor(s); for "
                                      "serialized tf.Example use build_parsing_serving_input_receiver_fn")
        self.features, self.receiver_tensors = features, receiver_tensors
        self.receiver_tensors_alternatives = None


class ExportOutput:
    """Base of the export outputs an EstimatorSpec's export_outputs maps
    signature names to (tf.estimator.export.ExportOutput)."""
    _kind = None

    def _entries(self):
        raise NotImplementedError


def _tensor(x, what):
    from ... import Output
    if not isinstance(x, Output):
        raise ValueError("%s must be a Tensor of the model_fn; got %r" % (what, x))
    return x


class PredictOutput(ExportOutput):
    """tf.estimator.export.PredictOutput(outputs): a tensor or a dict of
    tensors (the tensorflow/serving/predict signature)."""
    _kind = 0

    def __init__(self, outputs):
        if not isinstance(outputs, dict):
            outputs = {"output": outputs}
        for k, v in outputs.items():
            if not isinstance(k, str):
                raise ValueError("Prediction output key must be a string; got {}.".format(k))
            _tensor(v, "Prediction output value for key %r" % k)
        self.outputs = dict(outputs)

    def _entries(self):
        return list(self.outputs.items())


class ClassificationOutput(ExportOutput):
    """tf.estimator.export.ClassificationOutput(scores=None, classes=None)
    (tensorflow/serving/classify: keys "scores", "classes")."""
    _kind = 1

    def __init__(self, scores=None, classes=None):
        if scores is None and classes is None:
            raise ValueError("Cannot create a ClassificationOutput with empty arguments. At least one of `scores` "
                             "and `classes` must be defined.")
        self.scores = None if scores is None else _tensor(scores, "Classification scores")
        self.classes = None if classes is None else _tensor(classes, "Classification classes")

    def _entries(self):
        return [(k, v) for k, v in (("classes", self.classes), ("scores", self.scores)) if v is not None]


class RegressionOutput(ExportOutput):
    """tf.estimator.export.RegressionOutput(value) (tensorflow/serving/regress:
    key "outputs")."""
    _kind = 2

    def __init__(self, value):
        self.value = _tensor(value, "Regression output value")

    def _entries(self):
        return [("outputs", self.value)]


def add_export_outputs(spec, export_outputs):
    """EstimatorSpec.export_outputs -> loom_spec_add_export_output."""
    import ctypes as C
    if not isinstance(export_outputs, dict):
        raise TypeError("export_outputs must be dict, given: {}".format(export_outputs))
    for name, out in export_outputs.items():
        if not isinstance(out, ExportOutput):
            raise TypeError("Values in export_outputs must be ExportOutput objects, given: {}".format(
                export_outputs))
        ent = out._entries()
        keys = (C.c_char_p * len(ent))(*[_b(k) for k, _ in ent])
        outs = (L.Output * len(ent))(*[v.c for _, v in ent])
        st = _Status()
        st.raise_if(lib.loom_spec_add_export_output(spec, _b(name), out._kind, len(ent), keys, outs))


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
                    s2 = _Status()
                    s2.raise_if(lib.loom_features_add(features, _b(k), x.c, s2.p))
                    for r in ([n for n, f in fn.receivers.items() if f == k] if fn.receivers else [k]):
                        s2.raise_if(lib.loom_features_add(receivers, _b(r), x.c, s2.p))
                return 0
            except BaseException as e:  # noqa: B902 - must not unwind through C
                return _fail(est, st, e)
        cb = L.SERVING_INPUT_FN(serving)
        return cb, None, lambda: cb  # keeps the callback alive for the call
    if callable(fn):  # a Python receiver fn: called once, as TF calls it in the export graph
        r = fn()
        if isinstance(r, TensorServingInputReceiver):
            raw = _RawReceiverFn({_SINGLE_FEATURE: r.features}, None)
            raw.receivers = {name: _SINGLE_FEATURE for name in r.receiver_tensors}
            return _serving(est, raw)
        if not isinstance(r, ServingInputReceiver):
            raise TypeError("serving_input_receiver_fn must return a ServingInputReceiver or a "
                            "TensorServingInputReceiver, got %s" % type(r).__name__)
        return _serving(est, _RawReceiverFn(r.features, None))
    raise NotImplementedError("loom.tf: serving_input_receiver_fn %r: give "
                              "tf.estimator.export.build_parsing_serving_input_receiver_fn(...) or "
                              "build_raw_serving_input_receiver_fn(...); a Python receiver fn of TF ops is not "
                              "supported yet" % (fn,))


def __getattr__(name):
    raise missing("estimator.export.", name)
