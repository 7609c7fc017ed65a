"""tf.estimator.experimental's early-stopping hooks: make_early_stopping_hook
and stop_if_higher / lower / no_increase / no_decrease, with TF 2.15's
arguments. As TF's, they read the evaluations an evaluation wrote to the
eval dir (evaluate(), train_and_evaluate's evaluator: events files under
model_dir/eval) every run_every_secs or run_every_steps, and request a stop
of the training loop when the predicate holds. read_eval_metrics reads the
events with loom's reader (loom_summary.h)."""
import ctypes as C
import glob
import logging
import operator
import os
import time

from ... import _lib as L
from ..._lib import lib
from ... import _Status, _b
from .._hooks import SessionRunHook, SessionRunArgs
from .. import ops as _ops

__all__ = ["make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook", "stop_if_no_increase_hook",
           "stop_if_no_decrease_hook", "read_eval_metrics"]

log = logging.getLogger("tensorflow")


class _EventValue(C.Structure):
    _fields_ = [("tag", L.cs), ("kind", L.i32), ("simple_value", L.dbl), ("hmin", L.dbl), ("hmax", L.dbl),
                ("hnum", L.dbl), ("hsum", L.dbl), ("hsum_squares", L.dbl), ("nbuckets", L.i32),
                ("bucket_limit", L.P(L.dbl)), ("bucket", L.P(L.dbl)), ("text", L.cs)]


class _Event(C.Structure):
    _fields_ = [("wall_time", L.dbl), ("step", L.i64), ("file_version", L.cs), ("nvalues", L.i32),
                ("values", L.P(_EventValue)), ("session_log_status", L.i32), ("checkpoint_path", L.cs),
                ("graph_def", L.vp), ("graph_def_size", C.c_size_t)]


L._d("loom_event_reader_open", L.vp, L.cs, L.vp)
L._d("loom_event_reader_next", L.cint, L.vp, L.P(L.P(_Event)), L.vp)
L._d("loom_event_reader_free", None, L.vp)


def read_eval_metrics(eval_dir):
    """{global step: {tag: simple value}} of the events files in eval_dir
    (tf.estimator.experimental.read_eval_metrics), sorted by step. A file
    still being written is read up to its last whole record."""
    out = {}
    for path in sorted(glob.glob(os.path.join(os.fspath(eval_dir), "events.out.tfevents.*"))):
        st = _Status()
        r = lib.loom_event_reader_open(_b(path), st.p)
        if not r:
            continue
        try:
            ev = L.P(_Event)()
            while lib.loom_event_reader_next(r, C.byref(ev), st.p) == 0:
                e = ev.contents
                metrics = {e.values[i].tag.decode(): e.values[i].simple_value for i in range(e.nvalues)
                           if e.values[i].kind == 0}
                if metrics:
                    out[e.step] = metrics
        finally:
            lib.loom_event_reader_free(r)
    return dict(sorted(out.items()))


class _StopOnPredicateHook(SessionRunHook):
    """Calls should_stop_fn every run_every_secs / run_every_steps (and at the
    first step, as TF's SecondOrStepTimer) and requests a stop when it is True."""

    def __init__(self, should_stop_fn, run_every_secs=60, run_every_steps=None):
        if not callable(should_stop_fn):
            raise TypeError("`should_stop_fn` must be callable.")
        self._fn, self._secs, self._steps = should_stop_fn, run_every_secs, run_every_steps
        self._last_step, self._last_time = None, None

    def begin(self):
        self._gs = _ops.get_global_step()

    def before_run(self, run_context):
        return SessionRunArgs(self._gs)

    def _due(self, step):
        if self._last_step is None:
            return True
        if step == self._last_step:
            return False
        if self._secs is not None and time.time() >= self._last_time + self._secs:
            return True
        return self._steps is not None and step >= self._last_step + self._steps

    def after_run(self, run_context, run_values):
        step = int(run_values.results)
        if self._due(step):
            self._last_step, self._last_time = step, time.time()
            if self._fn():
                run_context.request_stop()


def make_early_stopping_hook(estimator, should_stop_fn, run_every_secs=60, run_every_steps=None):
    from . import Estimator
    if not isinstance(estimator, Estimator):
        raise TypeError("`estimator` must have type `tf.estimator.Estimator`. Got: {}".format(type(estimator)))
    if run_every_secs is not None and run_every_steps is not None:
        raise ValueError("Only one of `run_every_secs` and `run_every_steps` must be set.")
    if not estimator.config.is_chief:
        raise NotImplementedError("loom.tf: an early-stopping hook in a non-chief task (%s:%d) is not supported: "
                                  "give it to the chief only" % (estimator.config.task_type,
                                                                 estimator.config.task_id))
    return _StopOnPredicateHook(should_stop_fn, run_every_secs, run_every_steps)


def _threshold_hook(estimator, metric_name, threshold, higher, eval_dir, min_steps, run_every_secs,
                    run_every_steps):
    eval_dir = estimator.eval_dir() if eval_dir is None else eval_dir
    better = operator.gt if higher else operator.lt

    def fn():
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step < min_steps:
                continue
            val = metrics[metric_name]
            if better(val, threshold):
                log.info("At step %s, metric \"%s\" has value %s which is %s the configured threshold (%s) for "
                         "early stopping.", step, metric_name, val, "greater than" if higher else "less than",
                         threshold)
                return True
        return False
    return make_early_stopping_hook(estimator, fn, run_every_secs, run_every_steps)


def _improvement_hook(estimator, metric_name, max_steps, higher, eval_dir, min_steps, run_every_secs,
                      run_every_steps):
    eval_dir = estimator.eval_dir() if eval_dir is None else eval_dir
    better = operator.gt if higher else operator.lt

    def fn():
        best, best_step = None, None
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step < min_steps:
                continue
            val = metrics[metric_name]
            if best is None or better(val, best):
                best, best_step = val, step
            if step - best_step >= max_steps:
                log.info("No %s in metric \"%s\" for %s steps, which is greater than or equal to max steps (%s) "
                         "configured for early stopping.", "increase" if higher else "decrease", metric_name,
                         step - best_step, max_steps)
                return True
        return False
    return make_early_stopping_hook(estimator, fn, run_every_secs, run_every_steps)


def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0, run_every_secs=60,
                        run_every_steps=None):
    return _threshold_hook(estimator, metric_name, threshold, True, eval_dir, min_steps, run_every_secs,
                           run_every_steps)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0, run_every_secs=60,
                       run_every_steps=None):
    return _threshold_hook(estimator, metric_name, threshold, False, eval_dir, min_steps, run_every_secs,
                           run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase, eval_dir=None, min_steps=0,
                             run_every_secs=60, run_every_steps=None):
    return _improvement_hook(estimator, metric_name, max_steps_without_increase, True, eval_dir, min_steps,
                             run_every_secs, run_every_steps)


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease, eval_dir=None, min_steps=0,
                             run_every_secs=60, run_every_steps=None):
    return _improvement_hook(estimator, metric_name, max_steps_without_decrease, False, eval_dir, min_steps,
                             run_every_secs, run_every_steps)
