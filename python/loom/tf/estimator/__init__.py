"""tf.estimator on loom's C Estimator: RunConfig, the canned estimators with
TF 2.15's arguments and defaults, train / evaluate / predict /
export_saved_model, TrainSpec / EvalSpec / train_and_evaluate and the
exporters. The training loop runs in C; Python makes the model and the
input pipeline once per call."""
import ctypes as C
import os

import numpy as np

from ... import _lib as L
from .._fn_args import fn_args as _fn_args
from ..._lib import lib
from ... import _Status, _b, _from_tensor, LoomError, Graph, Output
from ..._estimator import Estimator as _LoomEstimator, _fail, fill_combined as _fill_combined, _warm_path
from ... import _warm_start as _warm
from .. import feature_column as _fc
from .. import nn as _nn
from .. import optimizers as _opt
from .. import errors as _errors
from .. import distribute as _distribute
from .. import _variables
from .. import random as _random
from .. import ops as _ops
from ..data import Dataset
from .._surface import missing
from ... import _config
from . import export

__all__ = ["RunConfig", "ModeKeys", "EstimatorSpec", "Estimator", "DNNClassifier", "DNNRegressor",
           "LinearClassifier", "LinearRegressor", "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor",
           "BaselineClassifier", "BaselineRegressor", "TrainSpec", "EvalSpec", "train_and_evaluate",
           "LatestExporter", "BestExporter", "FinalExporter", "WarmStartSettings", "VocabInfo", "SessionRunHook",
           "SessionRunArgs", "SessionRunContext", "SessionRunValues", "StopAtStepHook", "CheckpointSaverHook",
           "SummarySaverHook", "StepCounterHook", "ProfilerHook", "GlobalStepWaiterHook", "NanTensorHook",
           "LoggingTensorHook", "FeedFnHook", "export", "experimental", "add_metrics",
           "classifier_parse_example_spec", "regressor_parse_example_spec", "CheckpointSaverListener",
           "BinaryClassHead", "MultiClassHead", "MultiLabelHead", "RegressionHead", "PoissonRegressionHead",
           "LogisticRegressionHead", "MultiHead"]


class RunConfig(_config.RunConfig):
    """tf.estimator.RunConfig: loom.RunConfig (TF's arguments and defaults)."""


class ModeKeys:
    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


_MODES = {0: ModeKeys.TRAIN, 1: ModeKeys.EVAL, 2: ModeKeys.PREDICT}


class EstimatorSpec:
    """tf.estimator.EstimatorSpec (what a model_fn returns)."""

    def __init__(self, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None,
                 export_outputs=None, training_chief_hooks=None, training_hooks=None, scaffold=None,
                 evaluation_hooks=None, prediction_hooks=None):
        self.mode, self.predictions, self.loss, self.train_op = mode, predictions, loss, train_op
        self.eval_metric_ops, self.export_outputs = eval_metric_ops or {}, export_outputs
        self.training_chief_hooks, self.training_hooks = training_chief_hooks or [], training_hooks or []
        self.scaffold, self.evaluation_hooks, self.prediction_hooks = scaffold, evaluation_hooks or [], \
            prediction_hooks or []


class VocabInfo(_warm.VocabInfo):
    """tf.estimator.VocabInfo(new_vocab, new_vocab_size, num_oov_buckets,
    old_vocab, old_vocab_size=-1, backup_initializer=None, axis=0): the
    entries along axis (0: rows of an embedding or of a vocabulary column's
    linear weights; 1: columns of an output layer over label classes) are
    remapped from the old vocabulary file to the new one by string; new
    strings and OOV buckets get backup_initializer (None: zeros; a
    tf.compat.v1 initializer or a number)."""

    def _backup_c(self):
        b = self.backup_initializer
        if isinstance(b, _variables._Init):
            return b._c()
        if b is None or isinstance(b, (int, float)) and not isinstance(b, bool):
            return super()._backup_c()
        raise NotImplementedError("loom.tf: VocabInfo(backup_initializer=%r): give None (zeros), a number or a "
                                  "tf.compat.v1 initializer (zeros_initializer, ones_initializer, "
                                  "constant_initializer, random_normal_initializer, truncated_normal_initializer, "
                                  "glorot_uniform_initializer, ...)" % (b,))


class WarmStartSettings(_warm.WarmStartSettings):
    """tf.estimator.WarmStartSettings(ckpt_to_initialize_from,
    vars_to_warm_start=".*", var_name_to_vocab_info=None,
    var_name_to_prev_var_name=None): a checkpoint (a model directory or a
    checkpoint path); vars_to_warm_start a regex over the trainable
    variables, a list of regexes or names over all variables, or None (only
    the VocabInfo variables); VocabInfo remapping; renames. Training raises
    TF's ValueError for a rename or VocabInfo not used and for a selected
    variable the checkpoint lacks."""

    def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
                var_name_to_prev_var_name=None):
        if isinstance(vars_to_warm_start, (list, tuple)) and vars_to_warm_start and \
                not any(isinstance(v, str) for v in vars_to_warm_start):
            raise NotImplementedError("loom.tf: WarmStartSettings(vars_to_warm_start=<list of Variables>) is not "
                                      "supported: give the variables' names (a list of strings)")
        return super().__new__(cls, ckpt_to_initialize_from, vars_to_warm_start, var_name_to_vocab_info,
                               var_name_to_prev_var_name)


from .._hooks import (SessionRunHook, SessionRunArgs, SessionRunContext, SessionRunValues,  # noqa: E402
                     StopAtStepHook, CheckpointSaverHook, SummarySaverHook, StepCounterHook, ProfilerHook,
                     GlobalStepWaiterHook, NanTensorHook, LoggingTensorHook, FeedFnHook)
from .. import _hooks as _hooks_mod  # noqa: E402


def _Hooks(hooks, where, owner):
    """The C hooks of one call (Python hooks run inside the C loop)."""
    return _hooks_mod.Hooks(hooks, owner, where)


def _call_input_fn(input_fn, mode, params, config):
    """Calls input_fn with the arguments it names (mode, params, config), as TF does."""
    names = _fn_args(input_fn)
    kw = {}
    if "mode" in names:
        kw["mode"] = mode
    if "params" in names:
        kw["params"] = params
    if "config" in names:
        kw["config"] = config
    if "input_context" in names:
        kw["input_context"] = None
    return input_fn(**kw)


def _as_dataset(res, mode):
    """input_fn's result as a Dataset: a Dataset of (features, labels) or of
    features, or the tuple (features, labels) / features of arrays (one batch
    of everything, repeated in TRAIN as TF repeats constant tensors)."""
    if isinstance(res, Dataset):
        return res
    if isinstance(res, (tuple, dict)) or hasattr(res, "columns"):
        ds = Dataset.from_tensor_slices(res)
    else:
        raise TypeError("input_fn must return a tf.data.Dataset or a (features, labels) tuple, got %s"
                        % type(res).__name__)
    f = ds._features
    n = len(next(iter(f.values()))) if isinstance(f, dict) and f else len(f) if not isinstance(f, dict) else 1
    ds = ds.batch(max(1, n))
    return ds.repeat() if mode == ModeKeys.TRAIN else ds


class Estimator(_LoomEstimator):
    """tf.estimator.Estimator(model_fn, ...): the model_fn gets the features
    and labels as loom tensors and builds its model with loom.tf's ops
    (tf.compat.v1.layers.dense, tf.nn.*, tf.compat.v1.losses/metrics/train,
    ops.py); the canned estimators derive from it."""

    def __init__(self, model_fn, model_dir=None, config=None, params=None, warm_start_from=None):
        if not callable(model_fn):
            raise ValueError("model_fn must be provided to Estimator.")
        self._setup(model_dir, config, [])
        self.params = dict(params or {})
        self._label_dtype = None
        self._model_fn = model_fn
        self._warm_from = warm_start_from
        self._cfn = L.MODEL_FN(self._call_tf_model_fn)
        st = _Status()
        self.p = lib.loom_estimator_new(self._cfn, None, self._model_dir_arg, C.byref(self._config), None,
                                        _warm_path(warm_start_from), st.p)
        _made(self, st)

    def _call_tf_model_fn(self, g, features, labels, mode, params, config, spec, user, st):
        try:
            graph = Graph(_borrow=g)
            feats = {lib.loom_features_name(features, i).decode(): Output(graph, lib.loom_features_at(features, i))
                     for i in range(lib.loom_features_count(features))}
            names = _fn_args(self._model_fn)
            kw = {"features": feats["__features__"] if list(feats) == ["__features__"] else feats}
            for k, v in (("labels", Output(graph, labels) if labels.node else None), ("mode", _MODES[mode]),
                         ("params", dict(self.params)), ("config", self._tf_config)):
                if k in names:
                    kw[k] = v
            _ops._graphs.append(graph)
            _ops._features.append((graph, features))
            _ops._specs.append(spec)
            try:
                res = self._model_fn(**kw)
            finally:
                _ops._graphs.pop()
                _ops._features.pop()
                _ops._specs.pop()
            graph._check()
            _apply_spec(res, spec, self)
            return 0
        except BaseException as e:  # noqa: B902 - must not unwind through C
            return _fail(self, st, e)

    def _setup(self, model_dir, config, feature_columns):
        self._exc = None
        self._keep = []
        self.params = {}
        config = RunConfig() if config is None else config
        if not isinstance(config, RunConfig):
            raise ValueError("config must be a tf.estimator.RunConfig, got %s" % type(config).__name__)
        if model_dir is not None and config.model_dir is not None and \
                os.path.abspath(os.fspath(model_dir)) != os.path.abspath(config.model_dir):
            raise ValueError("model_dir are set both in constructor and RunConfig, but with different values. In "
                             "constructor: '%s', in RunConfig: '%s' " % (model_dir, config.model_dir))
        self._tf_config = config
        self._config = config._c()
        self._model_dir_arg = _b(os.fspath(model_dir)) if model_dir is not None else None
        self._feature_columns = []
        self._hints = {}
        for arg, cols in feature_columns:
            if cols is None:
                continue
            if isinstance(cols, (str, bytes, _fc.FeatureColumn)) or not hasattr(cols, "__iter__"):
                raise ValueError("%s must be a list of feature columns (tf.feature_column.*), given: %r" % (arg, cols))
            for c in cols:
                if not isinstance(c, _fc.FeatureColumn):
                    raise ValueError("Items of %s must be a FeatureColumn (tf.feature_column.*). Given (type %s): %r."
                                     % (arg, type(c), c))
                self._hints.update(c._hints())

    def _columns(self, columns, what):
        """(count, C array) of loom_fc for TF columns (the set is kept alive)."""
        columns = list(columns or [])
        if not columns:
            return 0, None
        try:
            fcs, ptrs = _fc.make_columns(columns)
        except LoomError as e:
            raise ValueError("%s: %s" % (what, e)) from None
        self._keep.append(fcs)
        arr = (C.c_void_p * len(ptrs))(*ptrs)
        self._keep.append(arr)
        self._feature_columns += [_Ptr(p) for p in ptrs]
        return len(ptrs), arr

    @property
    def config(self):
        return self._tf_config

    def _check(self, rc, st):
        try:
            super()._check(rc, st)
        except LoomError as e:
            raise _errors.from_loom(e) from None

    # ---- input
    def _input(self, input_fn):
        def cb(mode, params, user, st):
            try:
                m = _MODES[mode]
                with _random._graph_seed(self._tf_config.tf_random_seed):
                    ds = _as_dataset(_call_input_fn(input_fn, m, dict(self.params), self._tf_config), m)
                if m == ModeKeys.PREDICT:
                    ds = ds._without_labels()  # predict ignores labels, as TF
                if not ds._features_are_dict() and not hasattr(self, "_model_fn"):
                    raise ValueError("input_fn: the features must be a dict of arrays {key: array} for a canned "
                                     "estimator, got one array")
                return ds._loom(self._hints, self._label_dtype)._release()  # the estimator frees it
            except BaseException as e:  # noqa: B902 - must not unwind through C
                _fail(self, st, e)
                return None
        return L.INPUT_FN(cb)

    def _train_role(self, input_fn, hooks, steps, max_steps):
        """train() under a TF_CONFIG cluster: None when this process trains
        locally (no cluster), else runs its role of the job and returns True.
        With "ps" tasks the role is loom's (loom_run_job, loom_job.h): chief
        and workers train through the PS up to the global step max_steps; a
        ps task serves the variables and returns when the chief ends the job
        (where TF raises: loom runs the same script in every role). Without
        "ps" tasks chief and workers train as ranks of the collective
        strategy (_train_collective). The evaluator raises ValueError, as
        TF's Estimator.train does."""
        cfg = self._tf_config
        if cfg.task_type == "evaluator":
            raise ValueError("Train has been called wrong configuration. Please use tf.estimator.train_and_evaluate "
                             "which calls proper API according to given configuration. Current configuration: "
                             "task evaluator:%d (loom.tf: an evaluator task evaluates only under "
                             "train_and_evaluate)" % cfg.task_id)
        if not cfg._distributed():
            return None
        role = "%s:%d" % (cfg.task_type, cfg.task_id)
        if cfg.num_ps_replicas < 1:
            return self._train_collective(input_fn, hooks, steps, max_steps, role)
        ts = self._job_train_spec(input_fn, steps, max_steps, "with \"ps\" tasks (task %s)" % role,
                                  "the job stops at the global step on the PS, shared by every trainer")
        es = lib.loom_eval_spec_default()

        def no_eval(mode, params, user, st):  # the roles train() runs never evaluate
            _fail(self, st, RuntimeError("loom.tf: Estimator.train() has no evaluation input"))
            return None
        ecb = L.INPUT_FN(no_eval)
        es.input_fn = ecb
        hk = _Hooks(hooks, "train", self)
        hk.set(ts)
        r = C.c_void_p()
        st = _Status()
        try:
            self._check(lib.loom_run_job(self.p, C.byref(ts), C.byref(es), None, C.byref(r), st.p), st)
        finally:
            if r.value:
                lib.loom_tae_result_free(r)
            hk.free()
        return True

    def _job_train_spec(self, input_fn, steps, max_steps, where, why):
        """The TrainSpec of train() as a role of a job, which max_steps bounds."""
        if steps is not None or max_steps is None:
            raise ValueError("loom.tf: Estimator.train() under a TF_CONFIG cluster %s needs max_steps: %s (given "
                             "steps=%r, max_steps=%r)" % (where, why, steps, max_steps))
        ts = lib.loom_train_spec_default()
        ts.input_fn, ts.max_steps = self._input(input_fn), max_steps  # ts keeps the callback alive
        return ts

    def _train_collective(self, input_fn, hooks, steps, max_steps, role):
        """train() in a chief / worker task of a cluster without "ps" tasks:
        this process is one rank of the collective (all-reduce) strategy,
        MultiWorkerMirroredStrategy's (loom_train_collective): every rank
        trains to the global step max_steps, the chief writes the checkpoints,
        nothing is evaluated."""
        strategy = self._tf_config.train_distribute
        if strategy is not None and strategy._loom_distribute == _distribute._PARAMETER_SERVER:
            raise _errors.InvalidArgumentError(3, "RunConfig.train_distribute is the parameter-server strategy but "
                                                  "TF_CONFIG names no \"ps\" tasks (task %s)" % role)
        ts = self._job_train_spec(input_fn, steps, max_steps, "of chief and worker tasks (task %s)" % role,
                                  "every rank trains to that global step")
        hk = _Hooks(hooks, "train", self)
        hk.set(ts)
        st = _Status()
        try:
            self._check(lib.loom_train_collective(self.p, C.byref(ts), st.p), st)
        finally:
            hk.free()
        return True

    # ---- the TF methods
    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """TF's Estimator.train; under a TF_CONFIG cluster with "ps" tasks
        this process runs its role of the job (_train_role)."""
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError("Must specify steps > 0, given: {}".format(steps))
        if max_steps is not None and max_steps <= 0:
            raise ValueError("Must specify max_steps > 0, given: {}".format(max_steps))
        saving_listeners = _extras.check_listeners(saving_listeners, "saving_listeners")
        if saving_listeners:
            # TF adds them to the first CheckpointSaverHook of the call, else to the estimator's saver
            savers = [h for h in hooks or [] if isinstance(h, CheckpointSaverHook)]
            if savers:
                savers[0]._listeners = list(savers[0]._listeners) + [
                    x for x in saving_listeners if x not in savers[0]._listeners]
                saving_listeners = []
            elif not (self._tf_config.save_checkpoints_steps or self._tf_config.save_checkpoints_secs):
                raise ValueError("There should be a CheckpointSaverHook to use saving_listeners. Please set one of "
                                 "the RunConfig.save_checkpoints_steps or RunConfig.save_checkpoints_secs.")
            elif (self._tf_config.cluster_spec or {}).get("ps"):
                raise NotImplementedError("loom.tf: train(saving_listeners=...) under a TF_CONFIG cluster with "
                                          "\"ps\" tasks is not supported: give the listeners to a "
                                          "tf.estimator.CheckpointSaverHook(listeners=...) in hooks")
        if self._train_role(input_fn, hooks, steps, max_steps):
            return self
        o = lib.loom_train_options_default()
        o.steps, o.max_steps = steps or 0, max_steps or 0
        hk = _Hooks(hooks, "train", self)
        hk.set(o)
        ls = _extras.Listeners(saving_listeners, self)
        ls.set(o)
        cb = self._input(input_fn)
        st = _Status()
        try:
            self._check(lib.loom_estimator_train(self.p, cb, None, C.byref(o), st.p), st)
        finally:
            hk.free()
        return self

    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        if steps is not None and steps <= 0:
            raise ValueError("Must specify steps > 0, given: {}".format(steps))
        o = lib.loom_eval_options_default()
        o.steps = steps or 0
        o.name = _b(name)
        o.checkpoint_path = _b(os.fspath(checkpoint_path)) if checkpoint_path else None
        hk = _Hooks(hooks, "evaluate", self)
        hk.set(o)
        cb = self._input(input_fn)
        st = _Status()
        r = C.c_void_p()
        try:
            self._check(lib.loom_estimator_evaluate(self.p, cb, None, C.byref(o), C.byref(r), st.p), st)
        finally:
            hk.free()
        out = _metrics(r.value)
        lib.loom_eval_result_free(r)
        return out

    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None, yield_single_examples=True):
        """A generator of predictions: per example ({key: array}) or per
        batch (yield_single_examples=False), with TF's prediction keys."""
        if isinstance(predict_keys, str):
            predict_keys = [predict_keys]
        o = lib.loom_predict_options_default()
        o.yield_single_examples = 0
        keys = [_b(k) for k in (predict_keys or [])]
        karr = (C.c_char_p * max(1, len(keys)))(*keys)
        if keys:
            o.npredict_keys, o.predict_keys = len(keys), karr
        o.checkpoint_path = _b(os.fspath(checkpoint_path)) if checkpoint_path else None
        hk = _Hooks(hooks, "predict", self)
        hk.set(o)
        cb = self._input(input_fn)
        st = _Status()
        it = lib.loom_estimator_predict(self.p, cb, None, C.byref(o), st.p)
        if not it:
            hk.free()
            self._check(lib.loom_status_code(st.p) or 2, st)
        try:
            while True:
                rc = lib.loom_prediction_next(it, st.p)
                if rc == 11:  # OUT_OF_RANGE: the input ended
                    return
                self._check(rc, st)
                batch = {lib.loom_prediction_key(it, i).decode(): _from_tensor(lib.loom_prediction_value(it, i))
                         for i in range(lib.loom_prediction_count(it))}
                if not yield_single_examples:
                    yield batch
                    continue
                n = min(len(v) for v in batch.values())
                for i in range(n):
                    yield {k: v[i] for k, v in batch.items()}
        finally:
            lib.loom_prediction_iter_free(it)
            hk.free()

    def export_saved_model(self, export_dir_base, serving_input_receiver_fn, assets_extra=None, as_text=False,
                           checkpoint_path=None, experimental_mode=ModeKeys.PREDICT):
        """Writes loom's export (loom.Predictor, loom-serve load it) under
        export_dir_base/<timestamp>; returns its path as bytes, as TF."""
        if assets_extra:
            raise NotImplementedError("loom.tf: export_saved_model(assets_extra=...) is not supported yet")
        if experimental_mode != ModeKeys.PREDICT:
            raise NotImplementedError("loom.tf: export_saved_model(experimental_mode=%r): only PREDICT"
                                      % (experimental_mode,))
        fn, user, done = export._serving(self, serving_input_receiver_fn)
        try:
            buf = C.create_string_buffer(4096)
            st = _Status()
            ck = _b(os.fspath(checkpoint_path)) if checkpoint_path else None
            self._check(lib.loom_estimator_export(self.p, fn, user, _b(os.fspath(export_dir_base)), ck, buf,
                                                  len(buf), st.p), st)
            return buf.value
        finally:
            done()

    def export_savedmodel(self, export_dir_base, serving_input_receiver_fn, assets_extra=None, as_text=False,
                          checkpoint_path=None, strip_default_attrs=False):
        """tf.compat.v1.estimator.Estimator.export_savedmodel (TF 1's name of
        export_saved_model)."""
        return self.export_saved_model(export_dir_base, serving_input_receiver_fn, assets_extra=assets_extra,
                                       as_text=as_text, checkpoint_path=checkpoint_path)

    # ---- what loom.train_and_evaluate and the exporters call
    def _call_hooks(self, hooks, where):
        return _Hooks(hooks, where, self)

    def _metrics(self, r):
        return _metrics(r)

    def _call_listeners(self, listeners):
        return _extras.Listeners(listeners, self)

    def _serving(self, fn):
        return export._serving(self, fn)

    def eval_dir(self, name=None):
        """The directory evaluate(name=...) writes its events to (TF's)."""
        return os.path.join(self.model_dir, "eval" if not name else "eval_" + name)

    def get_variable_names(self):
        names = []

        def entry(name, dtype, ndim, dims, user):
            names.append(name.decode())
            return 0
        st = _Status()
        rc = lib.loom_estimator_get_variable_names(self.p, L.CHECKPOINT_ENTRY_FN(entry), None, st.p)
        if rc == 9:  # FAILED_PRECONDITION: no checkpoint
            raise ValueError("Couldn't find trained model at {}.".format(self.model_dir))
        st.raise_if(rc)
        return names

    def get_variable_value(self, name):
        if self.latest_checkpoint() is None:
            raise ValueError("Couldn't find trained model at {}.".format(self.model_dir))
        return super().get_variable_value(name)

class _KerasEstimator(Estimator):
    """What tf.keras.estimator.model_to_estimator returns: loom's
    loom_sequential_to_estimator (the model_fn builds the Sequential's layers
    with their names; model_dir/model.ckpt-0 holds its current weights)."""

    def __init__(self, model, model_dir, config):
        self._setup(model_dir, config, [])
        self._model_fn = None  # one array as the features is the model's input, as TF
        self._warm_from = None
        self._label_dtype = model._label_dtype
        self._keras_model = model
        st = _Status()
        self.p = lib.loom_sequential_to_estimator(model._p, self._model_dir_arg, C.byref(self._config), st.p)
        _made(self, st)


def _apply_spec(res, spec, owner):
    """Hands a model_fn's EstimatorSpec to loom's spec."""
    if not isinstance(res, EstimatorSpec):
        raise TypeError("model_fn should return an EstimatorSpec, got %s" % type(res).__name__)
    if res.scaffold:
        raise NotImplementedError("loom.tf: EstimatorSpec(scaffold=...) is not supported yet")
    if getattr(res, "_head_filled", False):  # a head's create_estimator_spec filled loom's spec
        _hooks_mod.add_spec_hooks(spec, res, owner)
        return
    st = _Status()
    if res.loss is not None:
        st.raise_if(lib.loom_spec_set_loss(spec, res.loss.c))
    if res.train_op is not None:
        st.raise_if(lib.loom_spec_set_train_op(spec, res.train_op.p))
    preds = res.predictions
    if res.mode == ModeKeys.EVAL:  # what add_metrics gives metric_fn as predictions
        owner._single_prediction = isinstance(preds, Output)
    if isinstance(preds, Output):
        preds = {"output": preds}
    for k, v in (preds or {}).items():
        st.raise_if(lib.loom_spec_add_prediction(spec, _b(k), v.c))
    for k, m in res.eval_metric_ops.items():
        if not isinstance(m, _ops.MetricOp):
            raise NotImplementedError("loom.tf: eval_metric_ops[%r]: give a tf.compat.v1.metrics.* result" % k)
        st.raise_if(lib.loom_spec_add_eval_metric(spec, _b(k), m._metric))
    if res.export_outputs and res.mode == ModeKeys.PREDICT:  # TF reads them in the export (PREDICT) graph
        export.add_export_outputs(spec, res.export_outputs)
    _hooks_mod.add_spec_hooks(spec, res, owner)


def _made(self, st):
    if not self.p:
        try:
            st.raise_if()
        except LoomError as e:
            raise ValueError(str(e)) from None
    _warm.apply(self, self._warm_from)


class _Ptr:
    """A loom_fc pointer, as the parsing receiver of loom._estimator wants it."""

    def __init__(self, p):
        self.p = p


def _metrics(r):
    out = {}
    for i in range(lib.loom_eval_result_count(r)):
        k = lib.loom_eval_result_key(r, i).decode()
        v = lib.loom_eval_result_value(r, i)
        out[k] = np.int64(v) if k == "global_step" else np.float32(v)
    out["global_step"] = np.int64(lib.loom_eval_result_global_step(r))
    return out


# ---------------------------------------------------------------- canned
# tf.keras.losses.Reduction's values and tf.compat.v1.losses.Reduction's ("weighted_sum" ...) -> loom_reduction
_REDUCTIONS = {"sum_over_batch_size": 4, "sum": 2, "weighted_sum_over_batch_size": 4, "weighted_sum": 2}


def _common(self, o, kind, model_dir, n_classes, label_dimension, weight_column, label_vocabulary,
            loss_reduction, warm_start_from):
    o.model_dir = self._model_dir_arg
    self._cfg_ref = C.pointer(self._config)
    o.config = self._cfg_ref
    if n_classes is not None:
        if not isinstance(n_classes, (int, np.integer)) or isinstance(n_classes, bool):
            raise ValueError("n_classes must be an int, got %r" % (n_classes,))
        o.n_classes = int(n_classes)
    if label_dimension is not None:
        o.label_dimension = int(label_dimension)
    if weight_column is not None:
        if isinstance(weight_column, _fc.NumericColumn):
            weight_column = weight_column.key
        if not isinstance(weight_column, str):
            raise TypeError("weight_column must be a string or a numeric_column, got %r" % (weight_column,))
        self._hints[weight_column] = np.float32
        o.weight_column = _b(weight_column)
    if label_vocabulary is not None:
        if not isinstance(label_vocabulary, (list, tuple)) or \
                not all(isinstance(v, str) for v in label_vocabulary):
            raise ValueError("label_vocabulary should be a list or a tuple of strings, given: %r"
                             % (label_vocabulary,))
        arr = (C.c_char_p * max(1, len(label_vocabulary)))(*[_b(v) for v in label_vocabulary])
        self._keep.append(arr)
        o.nlabel_vocabulary, o.label_vocabulary = len(label_vocabulary), arr
        self._label_dtype = object
    elif kind == "classifier":
        self._label_dtype = None
    else:
        self._label_dtype = np.float32
    red = getattr(loss_reduction, "value", loss_reduction)
    if red not in _REDUCTIONS:
        raise ValueError("Invalid loss_reduction: %r; loom.tf supports %s" % (loss_reduction, sorted(_REDUCTIONS)))
    o.loss_reduction = _REDUCTIONS[red]
    self._warm_from = warm_start_from
    o.warm_start_from = self._warm_b = _warm_path(warm_start_from)


def _build(self, head, model_dir, config, column_lists, weight_column, loss_reduction, warm_start_from, defaults,
           fill, ctor):
    """Makes a canned estimator: head = (kind, n_classes, label_dimension,
    label_vocabulary); fill(options) sets the model's own fields."""
    kind, n_classes, label_dimension, label_vocabulary = head
    self._setup(model_dir, config, column_lists)
    o = defaults()
    _common(self, o, kind, model_dir, n_classes, label_dimension, weight_column, label_vocabulary, loss_reduction,
            warm_start_from)
    fill(o)
    _make(self, ctor, o)


def _set_optimizer(self, field, optimizer, what):
    spec, cb = _opt.canned_spec(optimizer, what, self)
    self._keep.append((spec, cb))
    field.name, field.learning_rate = spec.name, spec.learning_rate
    if cb is not None:
        field.fn = cb


def _make(self, ctor, o):
    st = _Status()
    self.p = ctor(C.byref(o), st.p)
    _made(self, st)


def _hidden(self, hidden_units, what="hidden_units"):
    ok = hidden_units is None or (not isinstance(hidden_units, (str, bytes)) and hasattr(hidden_units, "__iter__"))
    hu = list(hidden_units or []) if ok else []
    if not ok or not all(isinstance(u, (int, np.integer)) and not isinstance(u, bool) and u > 0 for u in hu):
        raise ValueError("%s must be a list of positive ints (the units of each hidden layer), given: %r"
                         % (what, hidden_units))
    hu = [int(u) for u in hu]
    arr = (L.i64 * max(1, len(hu)))(*hu)
    self._keep.append(arr)
    return len(hu), arr


def _dropout(d):
    return 0.0 if d is None else float(d)


_SUM_OVER_BATCH_SIZE = "sum_over_batch_size"


class DNNClassifier(Estimator):
    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Adagrad", activation_fn=_nn.relu, dropout=None, config=None,
                 warm_start_from=None, loss_reduction=_SUM_OVER_BATCH_SIZE, batch_norm=False):
        _build(self, ("classifier", n_classes, None, label_vocabulary), model_dir, config,
               [("feature_columns", feature_columns)],
               weight_column, loss_reduction, warm_start_from, lib.loom_dnn_options_default,
               lambda o: _dnn(self, o, hidden_units, feature_columns, optimizer, activation_fn, dropout, batch_norm),
               lib.loom_dnn_classifier_new)


class DNNRegressor(Estimator):
    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Adagrad", activation_fn=_nn.relu, dropout=None, config=None, warm_start_from=None,
                 loss_reduction=_SUM_OVER_BATCH_SIZE, batch_norm=False):
        _build(self, ("regressor", None, label_dimension, None), model_dir, config,
               [("feature_columns", feature_columns)],
               weight_column, loss_reduction, warm_start_from, lib.loom_dnn_options_default,
               lambda o: _dnn(self, o, hidden_units, feature_columns, optimizer, activation_fn, dropout, batch_norm),
               lib.loom_dnn_regressor_new)


def _dnn(self, o, hidden_units, feature_columns, optimizer, activation_fn, dropout, batch_norm):
    o.nhidden_units, o.hidden_units = _hidden(self, hidden_units)
    o.nfeature_columns, o.feature_columns = self._columns(feature_columns, "feature_columns")
    _set_optimizer(self, o.optimizer, optimizer, "optimizer")
    self._act = _b(_nn.activation_name(activation_fn, "activation_fn"))
    o.activation = self._act
    o.dropout = _dropout(dropout)
    o.batch_norm = int(bool(batch_norm))


_COMBINERS = {"sum": 0, "mean": 1, "sqrtn": 2}


def _combiner(c, what):
    if c not in _COMBINERS:
        raise ValueError("%s must be one of %s, got %r" % (what, sorted(_COMBINERS), c))
    return _COMBINERS[c]


class LinearClassifier(Estimator):
    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, warm_start_from=None, loss_reduction=_SUM_OVER_BATCH_SIZE,
                 sparse_combiner="sum"):
        _build(self, ("classifier", n_classes, None, label_vocabulary), model_dir, config,
               [("feature_columns", feature_columns)],
               weight_column, loss_reduction, warm_start_from, lib.loom_linear_options_default,
               lambda o: _linear(self, o, feature_columns, optimizer, sparse_combiner), lib.loom_linear_classifier_new)


class LinearRegressor(Estimator):
    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl",
                 config=None, warm_start_from=None, loss_reduction=_SUM_OVER_BATCH_SIZE, sparse_combiner="sum"):
        _build(self, ("regressor", None, label_dimension, None), model_dir, config,
               [("feature_columns", feature_columns)],
               weight_column, loss_reduction, warm_start_from, lib.loom_linear_options_default,
               lambda o: _linear(self, o, feature_columns, optimizer, sparse_combiner), lib.loom_linear_regressor_new)


def _linear(self, o, feature_columns, optimizer, sparse_combiner):
    o.nfeature_columns, o.feature_columns = self._columns(feature_columns, "feature_columns")
    _set_optimizer(self, o.optimizer, optimizer, "optimizer")
    o.sparse_combiner = _combiner(sparse_combiner, "sparse_combiner")


class DNNLinearCombinedClassifier(Estimator):
    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=_nn.relu, dnn_dropout=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, config=None, warm_start_from=None, loss_reduction=_SUM_OVER_BATCH_SIZE,
                 batch_norm=False, linear_sparse_combiner="sum"):
        _build(self, ("classifier", n_classes, None, label_vocabulary), model_dir, config,
               [("linear_feature_columns", linear_feature_columns), ("dnn_feature_columns", dnn_feature_columns)],
               weight_column, loss_reduction, warm_start_from,
               lib.loom_dnn_linear_combined_options_default,
               lambda o: _combined(self, o, linear_feature_columns, linear_optimizer, dnn_feature_columns,
                                   dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm,
                                   linear_sparse_combiner), lib.loom_dnn_linear_combined_classifier_new)


class DNNLinearCombinedRegressor(Estimator):
    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=_nn.relu, dnn_dropout=None, label_dimension=1, weight_column=None, config=None,
                 warm_start_from=None, loss_reduction=_SUM_OVER_BATCH_SIZE, batch_norm=False,
                 linear_sparse_combiner="sum"):
        _build(self, ("regressor", None, label_dimension, None), model_dir, config,
               [("linear_feature_columns", linear_feature_columns), ("dnn_feature_columns", dnn_feature_columns)],
               weight_column, loss_reduction, warm_start_from,
               lib.loom_dnn_linear_combined_options_default,
               lambda o: _combined(self, o, linear_feature_columns, linear_optimizer, dnn_feature_columns,
                                   dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm,
                                   linear_sparse_combiner), lib.loom_dnn_linear_combined_regressor_new)


def _combined(self, o, linear_columns, linear_optimizer, dnn_columns, dnn_optimizer, hidden_units, activation_fn,
              dropout, batch_norm, linear_sparse_combiner):
    _hidden(self, hidden_units, "dnn_hidden_units")  # checks them (TF's types) before loom's checks
    _fill_combined(self, o, self._columns, linear_columns, dnn_columns, hidden_units, dropout, batch_norm,
                   linear_sparse_combiner)
    self._act = _b(_nn.activation_name(activation_fn, "dnn_activation_fn"))
    o.dnn_activation = self._act
    _set_optimizer(self, o.linear_optimizer, linear_optimizer, "linear_optimizer")
    _set_optimizer(self, o.dnn_optimizer, dnn_optimizer, "dnn_optimizer")


class BaselineClassifier(Estimator):
    def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None, optimizer="Ftrl",
                 config=None, loss_reduction=_SUM_OVER_BATCH_SIZE):
        _build(self, ("classifier", n_classes, None, label_vocabulary), model_dir, config, [], weight_column,
               loss_reduction, None, lib.loom_baseline_options_default,
               lambda o: _set_optimizer(self, o.optimizer, optimizer, "optimizer"), lib.loom_baseline_classifier_new)


class BaselineRegressor(Estimator):
    def __init__(self, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl", config=None,
                 loss_reduction=_SUM_OVER_BATCH_SIZE):
        _build(self, ("regressor", None, label_dimension, None), model_dir, config, [], weight_column,
               loss_reduction, None, lib.loom_baseline_options_default,
               lambda o: _set_optimizer(self, o.optimizer, optimizer, "optimizer"), lib.loom_baseline_regressor_new)


from ._heads import BinaryClassHead, MultiClassHead, MultiLabelHead, RegressionHead, PoissonRegressionHead, \
    LogisticRegressionHead, MultiHead  # noqa: E402
from ._tae import TrainSpec, EvalSpec, train_and_evaluate, LatestExporter, BestExporter, FinalExporter  # noqa
from . import _early_stopping  # noqa: E402
from . import _extras  # noqa: E402
from ._extras import (add_metrics, classifier_parse_example_spec, regressor_parse_example_spec,  # noqa: E402
                      CheckpointSaverListener)
from .._surface import Namespace as _Namespace  # noqa: E402
experimental = _Namespace("estimator.experimental", InMemoryEvaluatorHook=_extras.InMemoryEvaluatorHook,
                          **{k: getattr(_early_stopping, k) for k in _early_stopping.__all__})


def __getattr__(name):
    raise missing("estimator.", name)
