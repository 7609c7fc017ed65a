"""tf.estimator.TrainSpec / EvalSpec / train_and_evaluate and the exporters:
loom's own (python/loom/_tae.py) with TF's argument names and errors."""
from ... import _tae as _n

__all__ = ["TrainSpec", "EvalSpec", "train_and_evaluate", "LatestExporter", "BestExporter", "FinalExporter"]


class TrainSpec(_n.TrainSpec):
    """tf.estimator.TrainSpec: loom.TrainSpec (TF's arguments); the
    saving_listeners (tf.estimator.CheckpointSaverListener) run from the
    checkpoint saver of the training, before the evaluation's listener."""

    def __init__(self, input_fn, max_steps=None, hooks=None, saving_listeners=None):
        from ._extras import check_listeners
        listeners = check_listeners(saving_listeners, "saving_listeners")
        super().__init__(input_fn, max_steps, hooks)
        self.saving_listeners = tuple(listeners)


class EvalSpec(_n.EvalSpec):
    """tf.estimator.EvalSpec: loom.EvalSpec (TF's arguments)."""


def _no_assets(assets_extra):
    if assets_extra:
        raise NotImplementedError("loom.tf: exporter assets_extra is not supported yet")


class LatestExporter(_n.LatestExporter):
    def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False, exports_to_keep=5):
        _no_assets(assets_extra)
        super().__init__(name, serving_input_receiver_fn, exports_to_keep)


class BestExporter(_n.BestExporter):
    def __init__(self, name="best_exporter", serving_input_receiver_fn=None, event_file_pattern="eval/*.tfevents.*",
                 compare_fn=None, assets_extra=None, as_text=False, exports_to_keep=5):
        _no_assets(assets_extra)
        if event_file_pattern != "eval/*.tfevents.*":
            raise NotImplementedError("loom.tf: BestExporter(event_file_pattern=%r) is not supported: loom compares "
                                      "the evaluations of train_and_evaluate itself (the default "
                                      "'eval/*.tfevents.*')" % (event_file_pattern,))
        super().__init__(name, serving_input_receiver_fn, compare_fn, exports_to_keep)


class FinalExporter(_n.FinalExporter):
    def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False):
        _no_assets(assets_extra)
        super().__init__(name, serving_input_receiver_fn)


def train_and_evaluate(estimator, train_spec, eval_spec):
    """loom.train_and_evaluate with TF's type errors."""
    from . import Estimator
    if not isinstance(estimator, Estimator):
        raise TypeError("`estimator` must have type `tf.estimator.Estimator`. Got: {}".format(type(estimator)))
    if not isinstance(train_spec, TrainSpec):
        raise TypeError("`train_spec` must have type `tf.estimator.TrainSpec`. Got: {}".format(type(train_spec)))
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError("`eval_spec` must have type `tf.estimator.EvalSpec`. Got: {}".format(type(eval_spec)))
    return _n.train_and_evaluate(estimator, train_spec, eval_spec)
