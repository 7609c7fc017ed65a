"""tf.estimator's add_metrics, classifier_parse_example_spec /
regressor_parse_example_spec, CheckpointSaverListener and
experimental.InMemoryEvaluatorHook, with TF 2.15's arguments and semantics:

- add_metrics(estimator, metric_fn): a new Estimator on the same model_dir
  and config whose model_fn calls the given estimator's (canned or custom,
  loom_estimator_call_model_fn) and, in EVAL, adds metric_fn's metrics
  (replacing a metric of the same name, as TF).
- the parse specs: make_parse_example_spec(feature_columns) plus the
  label's FixedLenFeature and the weight column's spec.
- CheckpointSaverListener: begin(), before_save(session, step),
  after_save(session, step) (True asks training to stop), end(session,
  step), called by loom's C checkpoint saver (loom_checkpoint_listener).
- InMemoryEvaluatorHook: loom_in_memory_evaluator_hook_tf (evaluates when
  the training session is created, every every_n_iter steps of the call and
  at its end; results written to the eval dir as evaluate() writes them)."""
import ctypes as C

from ... import _lib as L
from .._fn_args import fn_args as _fn_args
from ..._lib import lib
from ... import _Status, _b, Graph, Output
from ..._estimator import _fail
from .. import feature_column as _fc
from .. import dtypes as _dt
from .. import ops as _ops
from .._hooks import _CHook, _BorrowedSession

__all__ = ["add_metrics", "classifier_parse_example_spec", "regressor_parse_example_spec",
           "CheckpointSaverListener", "InMemoryEvaluatorHook"]

_declared = set()


def _fn(name, res, *args):
    """A C function of the library, declared on first use."""
    if name not in _declared:
        L._d(name, res, *args)
        _declared.add(name)
    return getattr(lib, name)


# ---------------------------------------------------------------- parse specs
def _add_label_and_weight(spec, label_key, label_spec, weight_column):
    if label_key in spec:
        raise ValueError("Label column \"%s\" is already in the feature columns' parse spec; the label key must not "
                         "be a feature column's key (parse spec keys: %s)" % (label_key, sorted(spec)))
    spec[label_key] = label_spec
    if weight_column is None:
        return spec
    if isinstance(weight_column, str):
        weight_column = _fc.numeric_column(weight_column)
    if not isinstance(weight_column, _fc.NumericColumn):
        raise ValueError("weight_column should be a tf.feature_column.numeric_column or its key (a string). Given "
                         "type: %s value: %r" % (type(weight_column).__name__, weight_column))
    spec.update(_fc.make_parse_example_spec([weight_column]))
    return spec


def classifier_parse_example_spec(feature_columns, label_key, label_dtype=_dt.int64, label_default=None,
                                  weight_column=None):
    """tf.estimator.classifier_parse_example_spec: the feature columns' parse
    spec, label_key: FixedLenFeature((1,), label_dtype, label_default) and the
    weight column's spec (a key or a numeric_column)."""
    spec = _fc.make_parse_example_spec(feature_columns)
    return _add_label_and_weight(spec, label_key, _fc.FixedLenFeature((1,), label_dtype, label_default),
                                 weight_column)


def regressor_parse_example_spec(feature_columns, label_key, label_dtype=_dt.float32, label_default=None,
                                 label_dimension=1, weight_column=None):
    """tf.estimator.regressor_parse_example_spec: as the classifier's with
    label_key: FixedLenFeature((label_dimension,), label_dtype, label_default)."""
    spec = _fc.make_parse_example_spec(feature_columns)
    return _add_label_and_weight(spec, label_key,
                                 _fc.FixedLenFeature((label_dimension,), label_dtype, label_default), weight_column)


# ---------------------------------------------------------------- listeners
class CheckpointSaverListener:
    """tf.estimator.CheckpointSaverListener: override any of these.
    after_save returning True asks training to stop."""

    def begin(self):
        pass

    def before_save(self, session, global_step_value):
        pass

    def after_save(self, session, global_step_value):
        pass

    def end(self, session, global_step_value):
        pass


_L_BEGIN = C.CFUNCTYPE(L.cint, L.vp, L.vp)
_L_SAVE = C.CFUNCTYPE(L.cint, L.vp, L.vp, L.i64, L.vp)
_L_AFTER = C.CFUNCTYPE(L.cint, L.vp, L.vp, L.i64, L.P(L.cint), L.vp)


class _ListenerOps(C.Structure):  # loom_checkpoint_listener (loom_hooks.h)
    _fields_ = [("begin", _L_BEGIN), ("before_save", _L_SAVE), ("after_save", _L_AFTER), ("end", _L_SAVE)]


def check_listeners(listeners, what):
    listeners = list(listeners or [])
    for x in listeners:
        if not isinstance(x, CheckpointSaverListener):
            raise TypeError("%s should be a list of CheckpointSaverListener, given: %r" % (what, x))
    return listeners


class Listeners:
    """The C listeners (loom_checkpoint_listener) of Python listeners, for
    one call; keeps the callbacks alive while referenced."""

    def __init__(self, listeners, owner):
        self.owner = owner
        self.ops = []
        for x in listeners:
            self.ops.append(_ListenerOps(_L_BEGIN(self._begin(x)), _L_SAVE(self._save(x, "before_save")),
                                         _L_AFTER(self._after(x)), _L_SAVE(self._save(x, "end"))))
        self.n = len(self.ops)
        self.arr = (L.vp * max(1, self.n))(*[C.cast(C.pointer(o), L.vp) for o in self.ops])

    def _fail(self, st, e):
        owner = self.owner() if callable(self.owner) else self.owner
        return _fail(owner, st, e)

    def _begin(self, x):
        def cb(me, st):
            try:
                x.begin()
                return 0
            except BaseException as e:  # noqa: B902 - must not unwind through C
                return self._fail(st, e)
        return cb

    def _save(self, x, meth):
        def cb(me, s, step, st):
            try:
                getattr(x, meth)(_BorrowedSession(s, None) if s else None, int(step))
                return 0
            except BaseException as e:  # noqa: B902
                return self._fail(st, e)
        return cb

    def _after(self, x):
        def cb(me, s, step, stop, st):
            try:
                if x.after_save(_BorrowedSession(s, None) if s else None, int(step)):
                    stop[0] = 1
                return 0
            except BaseException as e:  # noqa: B902
                return self._fail(st, e)
        return cb

    def set(self, o):
        if self.n:
            o.nlisteners, o.listeners, o.listener_selves = self.n, C.cast(self.arr, L.vp), None


# ---------------------------------------------------------------- InMemoryEvaluatorHook
class InMemoryEvaluatorHook(_CHook):
    """tf.estimator.experimental.InMemoryEvaluatorHook(estimator, input_fn,
    steps=None, hooks=None, name=None, every_n_iter=100): evaluates the
    training session's variables (no checkpoint) on input_fn when the session
    is created, every every_n_iter steps and at the end of train(); each
    evaluation is written to estimator.eval_dir(name) as evaluate() writes."""

    def __init__(self, estimator, input_fn, steps=None, hooks=None, name=None, every_n_iter=100):
        if every_n_iter is None or every_n_iter <= 0:
            raise ValueError("invalid every_n_iter=%s." % every_n_iter)
        if not hasattr(estimator, "_input") or not getattr(estimator, "p", None):
            raise TypeError("InMemoryEvaluatorHook: estimator must be a tf.estimator.Estimator, given: %r"
                            % (estimator,))
        if not callable(input_fn):
            raise TypeError("InMemoryEvaluatorHook: input_fn must be callable, given: %r" % (input_fn,))
        if steps is not None and steps <= 0:
            raise ValueError("InMemoryEvaluatorHook: steps must be > 0 or None, given: %r" % (steps,))
        if hooks:
            raise NotImplementedError("loom.tf: InMemoryEvaluatorHook(hooks=...) is not supported: evaluation "
                                      "hooks run with estimator.evaluate(hooks=...)")
        self._estimator, self._input_fn, self._steps = estimator, input_fn, steps
        self._name, self._every_n_iter = name, int(every_n_iter)
        self._cb = None

    def _c(self):
        est = self._estimator
        self._cb = est._input(self._input_fn)
        self._name_b = _b(self._name) if self._name else None
        st = _Status()
        h = _fn("loom_in_memory_evaluator_hook_tf", L.vp, L.vp, L.INPUT_FN, L.vp, L.i64, L.cs, L.i64, L.vp)(
            est.p, self._cb, None, int(self._steps or 0), self._name_b, self._every_n_iter, st.p)
        return self._made(h, st)


# ---------------------------------------------------------------- add_metrics
_METRIC_FN_ARGS = ("features", "labels", "predictions", "config")


def add_metrics(estimator, metric_fn):
    """tf.estimator.add_metrics(estimator, metric_fn): a new Estimator whose
    evaluate() also reports metric_fn's metrics. metric_fn takes any of
    features, labels, predictions, config (by name) and returns
    {name: tf.compat.v1.metrics.* result}."""
    from . import Estimator
    if not isinstance(estimator, Estimator):
        raise TypeError("add_metrics: estimator must be a tf.estimator.Estimator, given: %r" % (estimator,))
    if not callable(metric_fn):
        raise TypeError("add_metrics: metric_fn must be callable, given: %r" % (metric_fn,))
    bad = [a for a in _fn_args(metric_fn) if a not in _METRIC_FN_ARGS]
    if bad:
        raise ValueError("metric_fn (%s) has following not expected args: %s" % (metric_fn, bad))
    return _MetricsEstimator(estimator, metric_fn)


def _metrics_estimator_class():
    from . import Estimator, ModeKeys, _MODES, _made, _warm_path

    class _MetricsEstimatorImpl(Estimator):
        """What add_metrics returns: the wrapped estimator's model plus
        metric_fn's metrics in EVAL."""

        def __init__(self, inner, metric_fn):
            self._setup(inner.model_dir, inner._tf_config, [])
            self.params = dict(inner.params)
            self._label_dtype = inner._label_dtype
            self._hints = dict(inner._hints)
            self._feature_columns = list(inner._feature_columns)
            if hasattr(inner, "_model_fn"):
                self._model_fn = inner._model_fn
            self._inner, self._metric_fn = inner, metric_fn
            self._warm_from = inner._warm_from
            self._cfn = L.MODEL_FN(self._call_metrics_model_fn)
            st = _Status()
            self.p = lib.loom_estimator_new(self._cfn, None, self._model_dir_arg, C.byref(self._config), None,
                                            _warm_path(self._warm_from), st.p)
            _made(self, st)

        def _call_metrics_model_fn(self, g, features, labels, mode, params, config, spec, user, st):
            try:
                inner = self._inner
                s2 = _Status()
                call = _fn("loom_estimator_call_model_fn", L.cint, L.vp, L.vp, L.vp, L.Output, L.cint, L.vp, L.vp)
                rc = call(inner.p, g, features, labels, mode, spec, s2.p)
                exc, inner._exc = inner._exc, None
                if rc:
                    if exc is not None:
                        raise exc
                    s2.raise_if(rc)
                if _MODES[mode] != ModeKeys.EVAL:
                    return 0
                graph = Graph(_borrow=g)
                feats = {lib.loom_features_name(features, i).decode():
                         Output(graph, lib.loom_features_at(features, i))
                         for i in range(lib.loom_features_count(features))}
                count = _fn("loom_spec_prediction_count", L.cint, L.vp)
                key = _fn("loom_spec_prediction_key", L.cs, L.vp, L.cint)
                value = _fn("loom_spec_prediction_value", L.Output, L.vp, L.cint)
                preds = {key(spec, i).decode(): Output(graph, value(spec, i)) for i in range(count(spec))}
                if getattr(inner, "_single_prediction", False) and list(preds) == ["output"]:
                    preds = preds["output"]  # the model_fn's predictions were one tensor
                names = _fn_args(self._metric_fn)
                kw = {}
                for k, v in (("features", feats["__features__"] if list(feats) == ["__features__"] else feats),
                             ("labels", Output(graph, labels) if labels.node else None), ("predictions", preds),
                             ("config", self._tf_config)):
                    if k in names:
                        kw[k] = v
                _ops._graphs.append(graph)
                _ops._features.append((graph, features))
                try:
                    metrics = self._metric_fn(**kw)
                finally:
                    _ops._graphs.pop()
                    _ops._features.pop()
                graph._check()
                if not isinstance(metrics, dict):
                    raise TypeError("metric_fn should return a dict {name: (value, update_op)} of "
                                    "tf.compat.v1.metrics results, got %s" % type(metrics).__name__)
                put = _fn("loom_spec_put_eval_metric", L.cint, L.vp, L.cs, L.Metric)
                for k, m in metrics.items():
                    if not isinstance(m, _ops.MetricOp):
                        raise NotImplementedError("loom.tf: metric_fn's metric %r: give a tf.compat.v1.metrics.* "
                                                  "result" % (k,))
                    s3 = _Status()
                    s3.raise_if(put(spec, _b(k), m._metric))
                return 0
            except BaseException as e:  # noqa: B902 - must not unwind through C
                return _fail(self, st, e)

    return _MetricsEstimatorImpl


_impl = None


def _MetricsEstimator(inner, metric_fn):
    global _impl
    if _impl is None:
        _impl = _metrics_estimator_class()
    return _impl(inner, metric_fn)
