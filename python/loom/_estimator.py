"""Estimators: a model_fn written in Python (a ctypes callback behind C's
loom_model_fn) and the canned models of loom_canned.h (DNN, Linear, wide &
deep DNNLinearCombined, Baseline) over loom.feature_column's columns (every
kind of loom_feature_columns.h) or a FeatureColumns set's."""
import ctypes as C
import os
import traceback

import numpy as np

from . import _lib as L
from ._lib import lib
from . import (Graph, Output, Node, Dataset, LoomError, _Status, _b, _dims, _dtype, _from_tensor)
from ._config import RunConfig
from . import _feature_column as _fcmod
from . import _warm_start as _warm


class ModeKeys:
    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


_MODES = {0: ModeKeys.TRAIN, 1: ModeKeys.EVAL, 2: ModeKeys.PREDICT}
_MODE_IDS = {v: k for k, v in _MODES.items()}


class EstimatorSpec:
    """What a Python model_fn returns (tf.estimator.EstimatorSpec)."""

    def __init__(self, mode, predictions=None, loss=None, train_op=None):
        self.mode = mode
        self.predictions = predictions
        self.loss = loss
        self.train_op = train_op


def _fail(holder, st, e):
    """Records a Python exception raised in a callback and returns the code
    C sees (the exception is re-raised when the C call returns)."""
    holder._exc = e
    code = e.code if isinstance(e, LoomError) else 3
    msg = "%s: %s" % (type(e).__name__, e)
    lib.loom_status_set_message(st, code, msg.encode(errors="replace"))
    return code


class FeatureColumns:
    """A loom_fc_set: columns live as long as this object (the canned
    estimators that use them keep a reference)."""

    def __init__(self):
        self.p = lib.loom_fc_set_new()
        self._keep = []  # the Python columns made in the set (their normalizer_fn callbacks)

    def __del__(self):
        if getattr(self, "p", None):
            lib.loom_fc_set_free(self.p)
            self.p = None

    def numeric(self, key, shape=(1,), default_value=None, dtype=np.float32, normalizer_fn=None):
        """tf.feature_column.numeric_column (normalizer_fn as loom.feature_column.numeric's)."""
        n, dims = _dims(shape)
        dv = None
        if default_value is not None:
            d = np.ascontiguousarray(np.broadcast_to(np.asarray(default_value, np.float32), tuple(shape)))
            dv = d.ctypes.data_as(C.POINTER(C.c_float))
        fn = user = None
        if normalizer_fn is not None:
            norm = _fcmod._Normalizer(_fcmod._normalizer_arg(normalizer_fn, "numeric_column", key),
                                      "numeric_column %r" % key)
            self._keep.append(norm)
            fn, user = norm.args()
        st = _Status()
        c = lib.loom_fc_numeric(self.p, _b(key), n, dims, dv, _dtype(dtype), fn, user, st.p)
        if not c:
            st.raise_if()
        return _Column(self, c)


class _Column:
    def __init__(self, owner, p):
        self.owner = owner
        self.p = p

    @property
    def name(self):
        return lib.loom_fc_name(self.p).decode()


def _run_config(config=None, model_dir=None, random_seed=None, save_checkpoints_steps=None, save_summary_steps=None,
                log_step_count_steps=None, num_threads=0, keep_checkpoint_max=None):
    """The loom_run_config: from config (a loom.RunConfig) or the keywords."""
    if config is not None:
        if not isinstance(config, RunConfig):
            raise TypeError("config must be a loom.RunConfig, got %s" % type(config).__name__)
        given = [k for k, v in (("model_dir", model_dir), ("random_seed", random_seed),
                                ("save_checkpoints_steps", save_checkpoints_steps),
                                ("save_summary_steps", save_summary_steps),
                                ("log_step_count_steps", log_step_count_steps),
                                ("keep_checkpoint_max", keep_checkpoint_max)) if v is not None]
        if given:
            raise ValueError("give config=loom.RunConfig(...) or the keywords %s, not both" % given)
        c = config._c()
        if num_threads:  # the keyword over the config's session_config
            c.num_threads = num_threads
        return c
    c = lib.loom_run_config_default()
    c.model_dir = _b(model_dir)
    if random_seed is not None:
        c.has_random_seed = 1
        c.tf_random_seed = random_seed
    if save_checkpoints_steps is not None:
        c.save_checkpoints_steps = save_checkpoints_steps
    if save_summary_steps is not None:
        c.save_summary_steps = save_summary_steps
    if log_step_count_steps is not None:
        c.log_step_count_steps = log_step_count_steps
    if keep_checkpoint_max is not None:
        c.keep_checkpoint_max = keep_checkpoint_max
    c.num_threads = num_threads
    c.progress_bar = 0
    return c


class Estimator:
    """tf.estimator.Estimator over loom_estimator. model_fn(graph, features,
    labels, mode, params) -> EstimatorSpec, with features a dict of Outputs
    of graph and labels an Output (None in PREDICT). Input functions take the
    mode ("train", "eval", "infer") and return a loom.Dataset whose label
    component becomes the labels. Configuration: config=loom.RunConfig(...),
    or the keywords model_dir, random_seed, save_checkpoints_steps,
    save_summary_steps, log_step_count_steps, num_threads,
    keep_checkpoint_max. warm_start_from (every estimator, the canned ones
    too): a checkpoint path or model directory (all trainable variables
    there of the same shape), or a loom.WarmStartSettings; applied when
    training starts in a model_dir without a checkpoint."""

    def __init__(self, model_fn=None, model_dir=None, params=None, warm_start_from=None, **config):
        self._exc = None
        self._warm_from = warm_start_from
        self._keep = [config.get("config")]  # a RunConfig keeps the model_dir string the C config points to
        self.params = dict(params or {})
        self._config = _run_config(**config)
        if model_fn is None:  # a canned subclass makes self.p
            return
        self._model_fn = model_fn
        self._cfn = L.MODEL_FN(self._call_model_fn)
        st = _Status()
        self.p = lib.loom_estimator_new(self._cfn, None, _b(model_dir), C.byref(self._config), None,
                                        _warm_path(warm_start_from), st.p)
        if not self.p:
            st.raise_if()
        _warm.apply(self, warm_start_from)

    def __del__(self):
        if getattr(self, "p", None):
            lib.loom_estimator_free(self.p)
            self.p = None

    @property
    def model_dir(self):
        return lib.loom_estimator_model_dir(self.p).decode()

    # ---- callbacks
    def _call_model_fn(self, g, features, labels, mode, params, config, spec, user, st):
        try:
            graph = Graph(_borrow=g)
            feats = {}
            for i in range(lib.loom_features_count(features)):
                feats[lib.loom_features_name(features, i).decode()] = Output(graph, lib.loom_features_at(features, i))
            lab = Output(graph, labels) if labels.node else None
            res = self._model_fn(graph, feats, lab, _MODES[mode], self.params)
            graph._check()
            if not isinstance(res, EstimatorSpec):
                raise TypeError("model_fn must return a loom.EstimatorSpec, not %s" % type(res).__name__)
            if res.loss is not None:
                lib.loom_spec_set_loss(spec, res.loss.c)
            if res.train_op is not None:
                lib.loom_spec_set_train_op(spec, res.train_op.p)
            preds = res.predictions
            if isinstance(preds, Output):
                preds = {"predictions": preds}
            for k, v in (preds or {}).items():
                lib.loom_spec_add_prediction(spec, _b(k), v.c)
            return 0
        except BaseException as e:  # noqa: B902 - must not unwind through C
            traceback.print_exc() if os.environ.get("LOOM_PY_TRACEBACK") else None
            return _fail(self, st, e)

    def _input(self, input_fn):
        def cb(mode, params, user, st):
            try:
                ds = input_fn(_MODES[mode])
                if isinstance(ds, dict):
                    ds = Dataset.from_tensor_slices(ds)
                if not isinstance(ds, Dataset) or not ds.p:
                    raise TypeError("input_fn must return a loom.Dataset")
                return ds._release()  # the estimator frees it
            except BaseException as e:  # noqa: B902
                _fail(self, st, e)
                return None
        return L.INPUT_FN(cb)

    def _check(self, rc, st):
        exc, self._exc = self._exc, None
        if rc and exc is not None:
            raise exc
        try:
            st.raise_if(rc)
        except LoomError as e:
            err = _warm.settings_error(e)
            if err is e:
                raise
            raise err from None

    def _call_hooks(self, hooks, where):
        """The C hooks of one call (set(options), free()); a plain loom
        Estimator takes none (loom.tf's estimators take SessionRunHooks)."""
        if hooks:
            raise TypeError("%s(hooks=...): hooks are loom.tf.estimator.SessionRunHook objects, which a "
                            "loom.tf.estimator.Estimator takes" % where)
        return _NoHooks()

    def _metrics(self, r):
        """{key: value} of a loom_eval_result (global_step an int)."""
        out = {lib.loom_eval_result_key(r, i).decode(): lib.loom_eval_result_value(r, i)
               for i in range(lib.loom_eval_result_count(r))}
        out["global_step"] = int(lib.loom_eval_result_global_step(r))
        return out

    def _serving(self, serving_inputs):
        """(loom_serving_input_fn, user, done) for what export() takes."""
        if isinstance(serving_inputs, str):
            if serving_inputs != "parsing":
                raise ValueError("export: serving_inputs %r: give \"parsing\" or a dict of placeholders"
                                 % serving_inputs)
            r = self._parsing_receiver()
            return L.PARSING_SERVING_INPUT_FN, r, lambda: lib.loom_parsing_receiver_free(r)
        if not isinstance(serving_inputs, dict) or not serving_inputs:
            raise ValueError("export: serving_inputs must be \"parsing\" or a dict {name: (dtype, shape)}, got %r"
                             % (serving_inputs,))

        def serving(g, features, receivers, user, st):
            try:
                graph = Graph(_borrow=g)
                for k, (dt, shape) in serving_inputs.items():
                    x = graph.placeholder(dt, shape, k)
                    for m in (features, receivers):
                        s2 = _Status()
                        s2.raise_if(lib.loom_features_add(m, _b(k), x.c, s2.p))
                return 0
            except BaseException as e:  # noqa: B902
                return _fail(self, st, e)

        cb = L.SERVING_INPUT_FN(serving)
        return cb, None, lambda: cb  # keeps the callback alive for the call

    # ---- train / evaluate / predict / export
    def train(self, input_fn, steps=None, max_steps=None):
        o = lib.loom_train_options_default()
        o.steps = steps or 0
        o.max_steps = max_steps or 0
        cb = self._input(input_fn)
        st = _Status()
        self._check(lib.loom_estimator_train(self.p, cb, None, C.byref(o), st.p), st)
        return self

    def evaluate(self, input_fn, steps=None, name=None):
        o = lib.loom_eval_options_default()
        o.steps = steps or 0
        o.name = _b(name)
        cb = self._input(input_fn)
        st = _Status()
        r = C.c_void_p()
        self._check(lib.loom_estimator_evaluate(self.p, cb, None, C.byref(o), C.byref(r), st.p), st)
        out = self._metrics(r)
        lib.loom_eval_result_free(r)
        return out

    def predict(self, input_fn, predict_keys=None):
        """All predictions of the input as {key: array} (batches are
        concatenated along dim 0)."""
        o = lib.loom_predict_options_default()
        o.yield_single_examples = 0
        keys = [_b(k) for k in (predict_keys or [])]
        karr = (C.c_char_p * max(1, len(keys)))(*keys)
        if keys:
            o.npredict_keys = len(keys)
            o.predict_keys = karr
        cb = self._input(input_fn)
        st = _Status()
        it = lib.loom_estimator_predict(self.p, cb, None, C.byref(o), st.p)
        if not it:
            self._check(st and lib.loom_status_code(st.p) or 2, st)
        parts = {}
        try:
            while True:
                rc = lib.loom_prediction_next(it, st.p)
                if rc == 11:
                    break
                self._check(rc, st)
                for i in range(lib.loom_prediction_count(it)):
                    k = lib.loom_prediction_key(it, i).decode()
                    parts.setdefault(k, []).append(_from_tensor(lib.loom_prediction_value(it, i)))
        finally:
            lib.loom_prediction_iter_free(it)
        return {k: np.concatenate(v) for k, v in parts.items()}

    def export(self, export_dir_base, serving_inputs):
        """export_saved_model. serving_inputs: placeholders {name: (dtype,
        shape)} that are both the features and the signature's inputs; or
        "parsing" (canned estimators): TF's parsing serving input receiver
        over the estimator's feature columns -- one string input of
        serialized tf.Example (loom.serialize_example), with TF's
        signatures: serving_default = classify (a classifier) / regress (a
        regressor) on "inputs", and "predict" on "examples". Returns the
        export directory (loom.Predictor loads it)."""
        fn, user, done = self._serving(serving_inputs)
        try:
            return self._export(fn, user, export_dir_base)
        finally:
            done()

    def _export(self, serving_fn, user, export_dir_base):
        buf = C.create_string_buffer(4096)
        st = _Status()
        self._check(lib.loom_estimator_export(self.p, serving_fn, user, _b(os.fspath(export_dir_base)), None, buf,
                                              len(buf), st.p), st)
        return buf.value.decode()

    def _parsing_receiver(self):
        """loom_fc_parsing_receiver_new over the estimator's feature columns
        (free with loom_parsing_receiver_free)."""
        cols = getattr(self, "_feature_columns", None)
        if not cols:
            raise ValueError("export: serving_inputs=\"parsing\" needs a canned estimator with feature columns "
                             "(its parse spec comes from them)")
        arr = (C.c_void_p * len(cols))(*[c.p for c in cols])
        st = _Status()
        r = lib.loom_fc_parsing_receiver_new(len(cols), arr, st.p)
        if not r:
            st.raise_if()
        return r

    def latest_checkpoint(self):
        """The latest checkpoint's path in model_dir, or None."""
        buf = C.create_string_buffer(4096)
        st = _Status()
        rc = lib.loom_estimator_latest_checkpoint(self.p, buf, len(buf), st.p)
        if rc == 5:  # NOT_FOUND
            return None
        st.raise_if(rc)
        return buf.value.decode() or None

    def get_variable_value(self, name):
        t = C.c_void_p()
        st = _Status()
        st.raise_if(lib.loom_estimator_get_variable_value(self.p, _b(name), C.byref(t), st.p))
        return _from_tensor(t.value, take=True)


class _NoHooks:
    def set(self, o):
        pass

    def free(self):
        pass


def _canned_common(o, self, model_dir, n_classes, label_dimension, weight_column, optimizer, learning_rate):
    o.model_dir = _b(model_dir)
    o.config = C.pointer(self._config)
    if n_classes is not None:
        o.n_classes = n_classes
    if label_dimension is not None:
        o.label_dimension = label_dimension
    o.weight_column = _b(weight_column)
    if optimizer is not None:
        o.optimizer.name = _b(optimizer)
    if learning_rate is not None:
        o.optimizer.learning_rate = learning_rate


def _columns(self, feature_columns):
    """(count, C array) of loom_fc: loom.feature_column columns are made in a
    fresh set, a FeatureColumns set's columns are used as they are (the sets
    outlive the estimator)."""
    cols = list(feature_columns or [])
    if not cols:
        return 0, None
    desc = [c for c in cols if isinstance(c, _fcmod.FeatureColumn)]
    if desc:
        fcs, ptrs = _fcmod.make_columns(desc)
        made = iter(_Column(fcs, p) for p in ptrs)
        cols = [next(made) if isinstance(c, _fcmod.FeatureColumn) else c for c in cols]
    for c in cols:
        if not isinstance(c, _Column):
            raise TypeError("feature_columns: %r is not a loom.feature_column column" % (c,))
    self._keep.append([c.owner for c in cols])  # the sets outlive the estimator
    self._feature_columns = getattr(self, "_feature_columns", []) + cols  # the parsing receiver's spec
    arr = (C.c_void_p * len(cols))(*[c.p for c in cols])
    self._keep.append(arr)
    return len(cols), arr


def _warm_path(warm_start_from):
    """warm_start_from as the C constructors' path (None for settings, which
    loom_estimator_set_warm_start_settings takes)."""
    if not warm_start_from or isinstance(warm_start_from, _warm.WarmStartSettings):
        return None
    if not isinstance(warm_start_from, (str, bytes, os.PathLike)):
        raise TypeError("warm_start_from must be a checkpoint path, a model directory or a WarmStartSettings, "
                        "got %r" % (warm_start_from,))
    return _b(os.fspath(warm_start_from))


def _make(self, ctor, o):
    o.warm_start_from = _warm_path(self._warm_from)
    st = _Status()
    self.p = ctor(C.byref(o), st.p)
    if not self.p:
        st.raise_if()
    _warm.apply(self, self._warm_from)


class _DNN(Estimator):
    _ctor = None
    _classifier = True

    def __init__(self, hidden_units, feature_columns, n_classes=None, label_dimension=None, model_dir=None,
                 optimizer=None, learning_rate=None, activation="relu", dropout=0.0, batch_norm=False,
                 weight_column=None, **config):
        super().__init__(None, **config)
        o = lib.loom_dnn_options_default()
        _canned_common(o, self, model_dir, n_classes, label_dimension, weight_column, optimizer, learning_rate)
        hu = (L.i64 * len(hidden_units))(*hidden_units)
        o.nhidden_units, o.hidden_units = len(hidden_units), hu
        o.nfeature_columns, o.feature_columns = _columns(self, feature_columns)
        o.activation = _b(activation)
        o.dropout = dropout
        o.batch_norm = int(batch_norm)
        _make(self, type(self)._ctor, o)


class DNNClassifier(_DNN):
    _ctor = lib.loom_dnn_classifier_new


class DNNRegressor(_DNN):
    _ctor = lib.loom_dnn_regressor_new


class _Linear(Estimator):
    _ctor = None

    def __init__(self, feature_columns, n_classes=None, label_dimension=None, model_dir=None, optimizer=None,
                 learning_rate=None, weight_column=None, **config):
        super().__init__(None, **config)
        o = lib.loom_linear_options_default()
        _canned_common(o, self, model_dir, n_classes, label_dimension, weight_column, optimizer, learning_rate)
        o.nfeature_columns, o.feature_columns = _columns(self, feature_columns)
        _make(self, type(self)._ctor, o)


class LinearClassifier(_Linear):
    _ctor = lib.loom_linear_classifier_new


class LinearRegressor(_Linear):
    _ctor = lib.loom_linear_regressor_new


class _Baseline(Estimator):
    _ctor = None

    def __init__(self, n_classes=None, label_dimension=None, model_dir=None, optimizer=None, learning_rate=None,
                 weight_column=None, **config):
        super().__init__(None, **config)
        o = lib.loom_baseline_options_default()
        _canned_common(o, self, model_dir, n_classes, label_dimension, weight_column, optimizer, learning_rate)
        _make(self, type(self)._ctor, o)


class BaselineClassifier(_Baseline):
    _ctor = lib.loom_baseline_classifier_new


class BaselineRegressor(_Baseline):
    _ctor = lib.loom_baseline_regressor_new


def fill_combined(self, o, columns, linear_columns, dnn_columns, hidden_units, dropout, batch_norm,
                  linear_sparse_combiner):
    """Checks a wide & deep model's arguments and fills its
    loom_dnn_linear_combined_options (all but the optimizers and the
    activation); columns(cols, what) -> (count, C array) of loom_fc.
    loom.tf's estimators use it too."""
    if not linear_columns and not dnn_columns:
        raise ValueError("Either linear_feature_columns or dnn_feature_columns must be defined.")
    if dnn_columns and not hidden_units:
        raise ValueError("dnn_hidden_units must be defined when dnn_feature_columns is specified.")
    if linear_sparse_combiner not in _fcmod.COMBINERS:
        raise ValueError("linear_sparse_combiner must be one of %s, got %r"
                         % (sorted(_fcmod.COMBINERS), linear_sparse_combiner))
    o.nlinear_feature_columns, o.linear_feature_columns = columns(linear_columns, "linear_feature_columns")
    o.ndnn_feature_columns, o.dnn_feature_columns = columns(dnn_columns, "dnn_feature_columns")
    hu = [int(u) for u in (hidden_units or [])]
    arr = (L.i64 * max(1, len(hu)))(*hu)
    self._keep.append(arr)
    o.ndnn_hidden_units, o.dnn_hidden_units = len(hu), arr
    o.dnn_dropout = 0.0 if dropout is None else float(dropout)
    o.batch_norm = int(bool(batch_norm))
    o.linear_sparse_combiner = _fcmod.COMBINERS[linear_sparse_combiner]


class _Combined(Estimator):
    _ctor = None

    def __init__(self, linear_feature_columns=None, dnn_feature_columns=None, dnn_hidden_units=None,
                 n_classes=None, label_dimension=None, model_dir=None, linear_optimizer=None,
                 linear_learning_rate=None, dnn_optimizer=None, dnn_learning_rate=None, dnn_activation="relu",
                 dnn_dropout=0.0, batch_norm=False, linear_sparse_combiner="sum", weight_column=None, **config):
        super().__init__(None, **config)
        o = lib.loom_dnn_linear_combined_options_default()
        _canned_common(o, self, model_dir, n_classes, label_dimension, weight_column, None, None)
        fill_combined(self, o, lambda cols, what: _columns(self, cols), linear_feature_columns, dnn_feature_columns,
                      dnn_hidden_units, dnn_dropout, batch_norm, linear_sparse_combiner)
        self._act = _b(dnn_activation)
        o.dnn_activation = self._act
        for field, name, lr in ((o.linear_optimizer, linear_optimizer, linear_learning_rate),
                                (o.dnn_optimizer, dnn_optimizer, dnn_learning_rate)):
            if name is not None:
                field.name = _b(name)
            if lr is not None:
                field.learning_rate = lr
        _make(self, type(self)._ctor, o)


class DNNLinearCombinedClassifier(_Combined):
    """Wide & deep (loom_dnn_linear_combined_classifier): a linear model over
    linear_feature_columns (Ftrl by default) plus a DNN over
    dnn_feature_columns (Adagrad), their logits summed into one head.
    Optimizers: names ("Adagrad", "Adam", "Ftrl", "RMSProp", "SGD") and
    learning rates (None: TF's defaults)."""
    _ctor = lib.loom_dnn_linear_combined_classifier_new


class DNNLinearCombinedRegressor(_Combined):
    """Wide & deep regression (loom_dnn_linear_combined_regressor); see
    DNNLinearCombinedClassifier."""
    _ctor = lib.loom_dnn_linear_combined_regressor_new
