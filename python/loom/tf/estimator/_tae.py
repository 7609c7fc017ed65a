"""tf.estimator.TrainSpec / EvalSpec / train_and_evaluate (local mode) and
the exporters, on loom_train_and_evaluate."""
import ctypes as C

from ..._lib import lib
from ... import _Status, _b


class TrainSpec:
    def __init__(self, input_fn, max_steps=None, hooks=None, saving_listeners=None):
        if not callable(input_fn):
            raise TypeError("`input_fn` must be callable, given: {}".format(input_fn))
        if max_steps is not None and max_steps <= 0:
            raise ValueError("Must specify max_steps > 0, given: {}".format(max_steps))
        if saving_listeners:
            raise NotImplementedError("loom.tf: TrainSpec(saving_listeners=...) is not supported yet")
        self.input_fn, self.max_steps, self.hooks = input_fn, max_steps, tuple(hooks or ())


class EvalSpec:
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
            if not isinstance(x, _Exporter):
                raise NotImplementedError("loom.tf: EvalSpec exporter %r: give LatestExporter, BestExporter or "
                                          "FinalExporter" % (x,))
        names = [x.name for x in exporters]
        if len(set(names)) != len(names):
            raise ValueError("`exporters` must have unique names. Such a name cannot be `None`.")
        self.input_fn, self.steps, self.name, self.hooks = input_fn, steps, name, tuple(hooks or ())
        self.exporters, self.start_delay_secs, self.throttle_secs = tuple(exporters), start_delay_secs, throttle_secs


class _Exporter:
    def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False):
        if not name or "/" in name:
            raise ValueError("exporter name must be a non-empty string without '/', got %r" % (name,))
        if assets_extra:
            raise NotImplementedError("loom.tf: exporter assets_extra is not supported yet")
        self.name, self._fn = name, serving_input_receiver_fn

    def _c(self, est):
        """(loom_exporter, free)."""
        from . import export
        fn, user, done = export._serving(est, self._fn)
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


class LatestExporter(_Exporter):
    def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False, exports_to_keep=5):
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
        if exports_to_keep is not None and exports_to_keep <= 0:
            raise ValueError("`exports_to_keep`, if provided, must be a positive number. Got %s" % exports_to_keep)
        self.exports_to_keep = exports_to_keep

    def _new(self, name, fn, user, st):
        return lib.loom_latest_exporter(name, fn, user, self.exports_to_keep or 0, st.p)


class BestExporter(_Exporter):
    def __init__(self, name="best_exporter", serving_input_receiver_fn=None, event_file_pattern="eval/*.tfevents.*",
                 compare_fn=None, assets_extra=None, as_text=False, exports_to_keep=5):
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
        if compare_fn is not None:
            raise NotImplementedError("loom.tf: BestExporter(compare_fn=...) is not supported yet (the default "
                                      "compares the loss, as TF's _loss_smaller)")
        self.exports_to_keep = exports_to_keep

    def _new(self, name, fn, user, st):
        return lib.loom_best_exporter(name, fn, user, None, None, self.exports_to_keep or 0, st.p)


class FinalExporter(_Exporter):
    def _new(self, name, fn, user, st):
        return lib.loom_final_exporter(name, fn, user, st.p)


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains to train_spec.max_steps, evaluating after checkpoints (throttled)
    and exporting; returns (the last evaluation's metrics, [export paths]) as
    TF 2.15 does. Under a TF_CONFIG cluster this process runs its role
    (ps, chief, worker, evaluator; loom_job.h) and returns None, or the
    evaluator's (metrics, exports)."""
    from . import Estimator, _Hooks, _metrics
    if not isinstance(estimator, Estimator):
        raise TypeError("`estimator` must have type `tf.estimator.Estimator`. Got: {}".format(type(estimator)))
    if not isinstance(train_spec, TrainSpec):
        raise TypeError("`train_spec` must have type `tf.estimator.TrainSpec`. Got: {}".format(type(train_spec)))
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError("`eval_spec` must have type `tf.estimator.EvalSpec`. Got: {}".format(type(eval_spec)))
    # Under a TF_CONFIG cluster, loom's C dispatch (estimator/cluster.c) runs this process's role: a PS
    # serves, chief and workers train through the PS, the evaluator watches model_dir.
    ts = lib.loom_train_spec_default()
    tcb = estimator._input(train_spec.input_fn)
    ts.input_fn, ts.max_steps = tcb, train_spec.max_steps or 0
    thk = _Hooks(train_spec.hooks, "TrainSpec", estimator)
    thk.set(ts)
    es = lib.loom_eval_spec_default()
    ecb = estimator._input(eval_spec.input_fn)
    es.input_fn, es.steps, es.name = ecb, eval_spec.steps or 0, _b(eval_spec.name)
    ehk = _Hooks(eval_spec.hooks, "EvalSpec", estimator)
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
        metrics = _metrics(m) if m else None
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
