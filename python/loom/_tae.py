"""loom.TrainSpec / EvalSpec / train_and_evaluate and the exporters
(LatestExporter, BestExporter, FinalExporter) on loom_train_and_evaluate.h;
loom.tf.estimator's are these with TF's argument names.

    est = loom.DNNLinearCombinedClassifier(...)
    latest = loom.LatestExporter("latest", "parsing")
    metrics, exports = loom.train_and_evaluate(
        est, loom.TrainSpec(train_input_fn, max_steps=1000),
        loom.EvalSpec(eval_input_fn, steps=None, exporters=[latest], throttle_secs=0))
    loom.Predictor(exports[-1])

Under a TF_CONFIG cluster the process runs its role (ps, chief, worker,
evaluator: loom_job.h) instead."""
import ctypes as C

from ._lib import lib
from . import _Status, _b

__all__ = ["TrainSpec", "EvalSpec", "train_and_evaluate", "LatestExporter", "BestExporter", "FinalExporter"]


class TrainSpec:
    """What train_and_evaluate trains on (loom_train_spec): input_fn (as the
    estimator's train() takes it), max_steps (None: until the input ends),
    hooks (a loom.tf estimator's SessionRunHooks)."""

    def __init__(self, input_fn, max_steps=None, hooks=None, saving_listeners=None):
        if not callable(input_fn):
            raise TypeError("`input_fn` must be callable, given: {}".format(input_fn))
        if max_steps is not None and max_steps <= 0:
            raise ValueError("Must specify max_steps > 0, given: {}".format(max_steps))
        if saving_listeners:
            raise NotImplementedError("loom: TrainSpec(saving_listeners=...) is not supported yet")
        self.input_fn, self.max_steps, self.hooks = input_fn, max_steps, tuple(hooks or ())


class EvalSpec:
    """How train_and_evaluate evaluates (loom_eval_spec): input_fn, steps
    (None: the whole input), name, hooks, exporters run after each
    evaluation, start_delay_secs and throttle_secs between evaluations."""

    def __init__(self, input_fn, steps=100, name=None, hooks=None, exporters=None, start_delay_secs=120,
                 throttle_secs=600):
        if not callable(input_fn):
            raise TypeError("`input_fn` must be callable, given: {}".format(input_fn))
        if steps is not None and steps <= 0:
            raise ValueError("Must specify steps > 0, given: {}".format(steps))
        if start_delay_secs < 0:
            raise ValueError("Must specify start_delay_secs >= 0, given: {}".format(start_delay_secs))
        if throttle_secs < 0:
            raise ValueError("Must specify throttle_secs >= 0, given: {}".format(throttle_secs))
        if exporters is None:
            exporters = ()
        elif not isinstance(exporters, (list, tuple)):
            exporters = (exporters,)
        for x in exporters:
            if not isinstance(x, Exporter):
                raise NotImplementedError("loom: EvalSpec exporter %r: give LatestExporter, BestExporter or "
                                          "FinalExporter" % (x,))
        names = [x.name for x in exporters]
        if len(set(names)) != len(names):
            raise ValueError("`exporters` must have unique names. Such a name cannot be `None`.")
        self.input_fn, self.steps, self.name, self.hooks = input_fn, steps, name, tuple(hooks or ())
        self.exporters, self.start_delay_secs, self.throttle_secs = tuple(exporters), start_delay_secs, throttle_secs


class Exporter:
    """Base of the exporters: name (the folder export/<name>/<timestamp>
    under model_dir) and serving_inputs, what the estimator's export()
    takes ("parsing", a dict of placeholders; a loom.tf estimator also takes
    its receiver fns)."""

    def __init__(self, name, serving_inputs):
        if not name or "/" in name:
            raise ValueError("exporter name must be a non-empty string without '/', got %r" % (name,))
        self.name, self._fn = name, serving_inputs

    def _c(self, est):
        """(loom_exporter, free)."""
        fn, user, done = est._serving(self._fn)
        st = _Status()
        x = self._new(_b(self.name), fn, user, st)
        if not x:
            done()
            st.raise_if()

        def free():
            lib.loom_exporter_free(x)
            done()
        self._cb = fn
        return x, free


class LatestExporter(Exporter):
    """Exports after every evaluation, keeping the newest exports_to_keep
    (loom_latest_exporter)."""

    def __init__(self, name, serving_inputs, exports_to_keep=5):
        super().__init__(name, serving_inputs)
        if exports_to_keep is not None and exports_to_keep <= 0:
            raise ValueError("`exports_to_keep`, if provided, must be a positive number. Got %s" % exports_to_keep)
        self.exports_to_keep = exports_to_keep

    def _new(self, name, fn, user, st):
        return lib.loom_latest_exporter(name, fn, user, self.exports_to_keep or 0, st.p)


class BestExporter(Exporter):
    """Exports when an evaluation's loss is the smallest so far
    (loom_best_exporter, TF's _loss_smaller), keeping exports_to_keep."""

    def __init__(self, name="best_exporter", serving_inputs=None, compare_fn=None, exports_to_keep=5):
        super().__init__(name, serving_inputs)
        if compare_fn is not None:
            raise NotImplementedError("loom: BestExporter(compare_fn=...) is not supported yet (the default "
                                      "compares the loss, as TF's _loss_smaller)")
        self.exports_to_keep = exports_to_keep

    def _new(self, name, fn, user, st):
        return lib.loom_best_exporter(name, fn, user, None, None, self.exports_to_keep or 0, st.p)


class FinalExporter(Exporter):
    """Exports once, after the last evaluation (loom_final_exporter)."""

    def _new(self, name, fn, user, st):
        return lib.loom_final_exporter(name, fn, user, st.p)


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains to train_spec.max_steps, evaluating after checkpoints (throttled)
    and exporting (loom_train_and_evaluate); returns (the last evaluation's
    metrics, [export paths as bytes]) as TF 2.15 does. Under a TF_CONFIG
    cluster this process runs its role (ps, chief, worker, evaluator;
    loom_job.h) and returns None, or the evaluator's (metrics, exports)."""
    from ._estimator import Estimator
    if not isinstance(estimator, Estimator):
        raise TypeError("train_and_evaluate: estimator must be a loom.Estimator, got %s" % type(estimator))
    if not isinstance(train_spec, TrainSpec):
        raise TypeError("train_and_evaluate: train_spec must be a loom.TrainSpec, got %s" % type(train_spec))
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError("train_and_evaluate: eval_spec must be a loom.EvalSpec, got %s" % type(eval_spec))
    # Under a TF_CONFIG cluster, loom's C dispatch (estimator/cluster.c) runs this process's role: a PS
    # serves, chief and workers train through the PS, the evaluator watches model_dir.
    ts = lib.loom_train_spec_default()
    tcb = estimator._input(train_spec.input_fn)
    ts.input_fn, ts.max_steps = tcb, train_spec.max_steps or 0
    thk = estimator._call_hooks(train_spec.hooks, "TrainSpec")
    thk.set(ts)
    listeners = getattr(train_spec, "saving_listeners", ())  # loom.tf's TrainSpec: CheckpointSaverListeners
    tls = estimator._call_listeners(listeners) if listeners else None
    if tls is not None:
        tls.set(ts)
    es = lib.loom_eval_spec_default()
    ecb = estimator._input(eval_spec.input_fn)
    es.input_fn, es.steps, es.name = ecb, eval_spec.steps or 0, _b(eval_spec.name)
    ehk = estimator._call_hooks(eval_spec.hooks, "EvalSpec")
    ehk.set(es)
    es.start_delay_secs, es.throttle_secs = float(eval_spec.start_delay_secs), float(eval_spec.throttle_secs)
    made = []
    try:
        for x in eval_spec.exporters:
            made.append(x._c(estimator))
        xs = (C.c_void_p * max(1, len(made)))(*[m[0] for m in made])
        es.nexporters, es.exporters = len(made), xs
        r = C.c_void_p()
        st = _Status()
        estimator._check(lib.loom_train_and_evaluate(estimator.p, C.byref(ts), C.byref(es), C.byref(r), st.p), st)
        if not r.value:  # a chief, worker or PS of a distributed job: nothing to report, as TF's None
            return None
        m = lib.loom_tae_result_metrics(r)
        metrics = estimator._metrics(m) if m else None
        exports = []
        for i in range(lib.loom_tae_result_num_exports(r)):
            p = lib.loom_tae_result_export_path(r, i)
            if p:
                exports.append(p)
        lib.loom_tae_result_free(r)
        return metrics, exports
    finally:
        for _, free in made:
            free()
        thk.free()
        ehk.free()
