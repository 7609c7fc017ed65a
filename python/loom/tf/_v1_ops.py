"""tf.compat.v1.losses, tf.compat.v1.metrics and tf.compat.v1.summary in a
model_fn, on loom_losses.h, loom_metrics.h and loom_summary.h (TF's
arguments, defaults, variable scopes and reductions)."""
import ctypes as C

import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Output, _b
from .ops import _g, MetricOp
from . import ops as _ops_mod

_d = L._d
_d("loom_summary_scalar", L.Output, L.vp, L.cs, L.Output)
_d("loom_summary_histogram", L.Output, L.vp, L.cs, L.Output)
if hasattr(lib, "loom_summary_image"):
    _d("loom_summary_image", L.Output, L.vp, L.cs, L.Output, L.cint)
_d("loom_losses_compute_weighted_loss", L.Output, L.vp, L.Output, L.Output, L.cs, L.cs, L.cint)
for _n in ("mean_squared_error", "absolute_difference"):
    _d("loom_losses_" + _n, L.Output, L.vp, L.Output, L.Output, L.Output, L.cs, L.cs, L.cint)
for _n in ("huber_loss", "log_loss"):
    _d("loom_losses_" + _n, L.Output, L.vp, L.Output, L.Output, L.Output, L.dbl, L.cs, L.cs, L.cint)
_d("loom_losses_hinge_loss", L.Output, L.vp, L.Output, L.Output, L.Output, L.cs, L.cs, L.cint)
for _n in ("sigmoid_cross_entropy", "softmax_cross_entropy"):
    _d("loom_losses_" + _n, L.Output, L.vp, L.Output, L.Output, L.Output, L.dbl, L.cs, L.cs, L.cint)
for _n in ("mean_squared_error", "root_mean_squared_error", "mean_absolute_error", "true_positives",
           "false_positives", "true_negatives", "false_negatives", "precision", "recall"):
    _d("loom_metrics_" + _n, L.Metric, L.vp, L.Output, L.Output, L.Output, L.cs)
_d("loom_local_variables_initializer", L.vp, L.vp)
_d("loom_metrics_auc", L.Metric, L.vp, L.Output, L.Output, L.Output, L.cint, C.POINTER(L.dbl), L.cint, L.cint, L.cs)

# tf.compat.v1.losses.Reduction's values -> loom_reduction
REDUCTIONS = {"weighted_sum_by_nonzero_weights": 0, "none": 1, "weighted_sum": 2, "weighted_mean": 3,
              "weighted_sum_over_batch_size": 4}
_SBNW = "weighted_sum_by_nonzero_weights"  # TF v1's default, Reduction.SUM_BY_NONZERO_WEIGHTS


def _tensor(g, x, what, arg):
    """x as a graph tensor: a tensor of the model_fn, or a number / array (a constant, as TF converts it)."""
    if isinstance(x, Output):
        if x.graph.p != g.p:
            raise ValueError("%s: %s is a tensor of another graph" % (what, arg))
        return x
    try:
        return g.constant(np.asarray(x, np.float32))
    except (TypeError, ValueError):
        raise TypeError("%s: %s must be a tensor or a number, got %s" % (what, arg, type(x).__name__)) from None


def _weights(g, w, what):
    if w is None or (not isinstance(w, Output) and np.ndim(w) == 0 and float(w) == 1.0):
        return L.Output()  # loom's {NULL, 0}: every element weighs 1
    return _tensor(g, w, what, "weights").c


def _reduction(r, what):
    if r not in REDUCTIONS:
        raise ValueError("%s: Invalid Reduction Key %r; give one of tf.compat.v1.losses.Reduction's values %s"
                         % (what, r, sorted(REDUCTIONS)))
    return REDUCTIONS[r]


def _loss(fn, what, first, second, weights, scope, loss_collection, reduction, *extra):
    g = _g(second if isinstance(second, Output) else first, what)
    a, b = _tensor(g, first, what, "labels"), _tensor(g, second, what, "predictions")
    return g._out(fn(g.p, a.c, b.c, _weights(g, weights, what), *extra, _b(scope), _b(loss_collection),
                     _reduction(reduction, what)))


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection="losses", reduction=_SBNW):
    return _loss(lib.loom_losses_mean_squared_error, "tf.compat.v1.losses.mean_squared_error", labels, predictions,
                 weights, scope, loss_collection, reduction)


def absolute_difference(labels, predictions, weights=1.0, scope=None, loss_collection="losses", reduction=_SBNW):
    return _loss(lib.loom_losses_absolute_difference, "tf.compat.v1.losses.absolute_difference", labels,
                 predictions, weights, scope, loss_collection, reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None, loss_collection="losses", reduction=_SBNW):
    what = "tf.compat.v1.losses.huber_loss"
    g = _g(predictions, what)
    a, b = _tensor(g, labels, what, "labels"), _tensor(g, predictions, what, "predictions")
    return g._out(lib.loom_losses_huber_loss(g.p, a.c, b.c, _weights(g, weights, what), float(delta), _b(scope),
                                             _b(loss_collection), _reduction(reduction, what)))


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None, loss_collection="losses", reduction=_SBNW):
    what = "tf.compat.v1.losses.log_loss"
    g = _g(predictions, what)
    a, b = _tensor(g, labels, what, "labels"), _tensor(g, predictions, what, "predictions")
    return g._out(lib.loom_losses_log_loss(g.p, a.c, b.c, _weights(g, weights, what), float(epsilon), _b(scope),
                                           _b(loss_collection), _reduction(reduction, what)))


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection="losses", reduction=_SBNW):
    return _loss(lib.loom_losses_hinge_loss, "tf.compat.v1.losses.hinge_loss", labels, logits, weights, scope,
                 loss_collection, reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection="losses", reduction=_SBNW):
    what = "tf.compat.v1.losses.sigmoid_cross_entropy"
    g = _g(logits, what)
    a = _tensor(g, multi_class_labels, what, "multi_class_labels")
    return g._out(lib.loom_losses_sigmoid_cross_entropy(g.p, a.c, logits.c, _weights(g, weights, what),
                                                        float(label_smoothing), _b(scope), _b(loss_collection),
                                                        _reduction(reduction, what)))


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None, loss_collection="losses",
                          reduction=_SBNW):
    what = "tf.compat.v1.losses.softmax_cross_entropy"
    g = _g(logits, what)
    a = _tensor(g, onehot_labels, what, "onehot_labels")
    return g._out(lib.loom_losses_softmax_cross_entropy(g.p, a.c, logits.c, _weights(g, weights, what),
                                                        float(label_smoothing), _b(scope), _b(loss_collection),
                                                        _reduction(reduction, what)))


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None, loss_collection="losses", reduction=_SBNW):
    what = "tf.compat.v1.losses.sparse_softmax_cross_entropy"
    g = _g(logits, what)
    if not isinstance(labels, Output):
        labels = g.constant(np.asarray(labels, np.int32))
    return g._out(lib.loom_losses_sparse_softmax_cross_entropy(g.p, labels.c, logits.c, _weights(g, weights, what),
                                                               _b(scope), _b(loss_collection),
                                                               _reduction(reduction, what)))


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection="losses", reduction=_SBNW):
    what = "tf.compat.v1.losses.compute_weighted_loss"
    g = _g(losses, what)
    return g._out(lib.loom_losses_compute_weighted_loss(g.p, losses.c, _weights(g, weights, what), _b(scope),
                                                        _b(loss_collection), _reduction(reduction, what)))


# ---------------------------------------------------------------- metrics
def _no_collections(what, metrics_collections, updates_collections):
    if metrics_collections or updates_collections:
        raise NotImplementedError("loom.tf: %s(metrics_collections=..., updates_collections=...) is not supported: "
                                  "put the (value, update_op) pair in EstimatorSpec.eval_metric_ops" % what)


def _metric(kind):
    what = "tf.compat.v1.metrics." + kind
    fn = getattr(lib, "loom_metrics_" + kind)

    def f(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
        _no_collections(what, metrics_collections, updates_collections)
        g = _g(predictions if isinstance(predictions, Output) else labels, what)
        a, b = _tensor(g, labels, what, "labels"), _tensor(g, predictions, what, "predictions")
        m = fn(g.p, a.c, b.c, _weights(g, weights, what), _b(name))
        g._check()
        return MetricOp(g, m)
    f.__name__ = kind
    f.__qualname__ = kind
    return f


_d("loom_metrics_accuracy", L.Metric, L.vp, L.Output, L.Output, L.Output, L.cs)
_d("loom_metrics_mean", L.Metric, L.vp, L.Output, L.Output, L.cs)
accuracy = _metric("accuracy")


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    what = "tf.compat.v1.metrics.mean"
    _no_collections(what, metrics_collections, updates_collections)
    g = _g(values, what)
    m = lib.loom_metrics_mean(g.p, values.c, _weights(g, weights, what), _b(name))
    g._check()
    return MetricOp(g, m)


mean_squared_error_metric = _metric("mean_squared_error")
root_mean_squared_error = _metric("root_mean_squared_error")
mean_absolute_error = _metric("mean_absolute_error")
precision = _metric("precision")
recall = _metric("recall")
true_positives = _metric("true_positives")
false_positives = _metric("false_positives")
true_negatives = _metric("true_negatives")
false_negatives = _metric("false_negatives")

_CURVES = {"ROC": 0, "PR": 1}
_SUMMATION = {"trapezoidal": 0, "careful_interpolation": 1, "minoring": 2, "majoring": 3}


def auc(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None, updates_collections=None,
        curve="ROC", name=None, summation_method="trapezoidal", thresholds=None):
    what = "tf.compat.v1.metrics.auc"
    _no_collections(what, metrics_collections, updates_collections)
    if curve not in _CURVES:
        raise ValueError("%s: curve must be 'ROC' or 'PR', got %r" % (what, curve))
    if summation_method not in _SUMMATION:
        raise ValueError("%s: summation_method must be one of %s, got %r" % (what, sorted(_SUMMATION),
                                                                              summation_method))
    g = _g(predictions, what)
    a = _tensor(g, labels, what, "labels")
    th = None
    if thresholds is not None:
        ts = [float(t) for t in thresholds]
        th = (L.dbl * max(1, len(ts)))(*ts)
        num_thresholds = len(ts)
    m = lib.loom_metrics_auc(g.p, a.c, predictions.c, _weights(g, weights, what), int(num_thresholds), th,
                             _CURVES[curve], _SUMMATION[summation_method], _b(name))
    g._check()
    return MetricOp(g, m)


# ---------------------------------------------------------------- summaries
def _summary(kind):
    what = "tf.compat.v1.summary." + kind
    fn = getattr(lib, "loom_summary_" + kind)

    def f(name, tensor, collections=None, family=None):
        """Records the tensor for the estimator's summaries (written to
        model_dir every save_summary_steps, as TF's merged summaries) and
        returns it (TF returns the serialized Summary string)."""
        if collections is not None or family is not None:
            raise NotImplementedError("loom.tf: %s(collections=..., family=...) is not supported: give the name "
                                      "alone (a tf.name_scope-free tag)" % what)
        g = _g(tensor, what)
        return g._out(fn(g.p, _b(name), tensor.c))
    f.__name__ = kind
    f.__qualname__ = kind
    return f


scalar = _summary("scalar")
histogram = _summary("histogram")


def image(name, tensor, max_outputs=3, collections=None, family=None):
    """tf.compat.v1.summary.image: the first max_outputs images of tensor
    [batch, height, width, channels] (1, 3 or 4 channels; uint8, or floats
    mapped to uint8 per image as TF) written as PNGs tagged "<name>/image/0",
    ... ("<name>/image" for max_outputs=1) every save_summary_steps; returns
    the tensor (TF returns the serialized Summary string)."""
    what = "tf.compat.v1.summary.image"
    if collections is not None or family is not None:
        raise NotImplementedError("loom.tf: %s(collections=..., family=...) is not supported: give the name alone"
                                  % what)
    if isinstance(max_outputs, bool) or not isinstance(max_outputs, (int, np.integer)) or max_outputs < 1:
        raise ValueError("%s: max_outputs must be an int >= 1, got %r" % (what, max_outputs))
    if not isinstance(tensor, Output) and _ops_mod._graphs and isinstance(tensor, (np.ndarray, list)):
        tensor = _ops_mod._graphs[-1].constant(np.asarray(tensor))  # tf.constant's array in a model_fn
    g = _g(tensor, what)
    return g._out(lib.loom_summary_image(g.p, _b(name), tensor.c, int(max_outputs)))


# ---------------------------------------------------------------- checkpoints
_d("loom_latest_checkpoint", L.cint, L.cs, C.c_char_p, C.c_size_t, L.vp)


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """tf.train.latest_checkpoint: the path the "checkpoint" state file of
    checkpoint_dir names (joined with the directory when relative), or None."""
    if latest_filename is not None:
        raise NotImplementedError("loom.tf: tf.train.latest_checkpoint(latest_filename=...) is not supported: loom "
                                  "reads the state file \"checkpoint\"")
    import os
    from .. import _Status
    buf = C.create_string_buffer(4096)
    st = _Status()
    rc = lib.loom_latest_checkpoint(_b(os.fspath(checkpoint_dir)), buf, len(buf), st.p)
    if rc == 5:  # NOT_FOUND: no state file or no checkpoint in it, TF's None
        return None
    st.raise_if(rc)
    return buf.value.decode()


# ---------------------------------------------------------------- more tf.compat.v1.metrics
_d("loom_metrics_mean_per_class_accuracy", L.Metric, L.vp, L.Output, L.Output, L.i64, L.Output, L.cs)
_d("loom_metrics_mean_iou", L.Metric, L.vp, L.Output, L.Output, L.i64, L.Output, L.cs)
for _n in ("precision_at_k", "recall_at_k"):
    _d("loom_metrics_" + _n, L.Metric, L.vp, L.Output, L.Output, L.i64, L.i64, L.Output, L.cs)
for _n in ("precision_at_top_k", "recall_at_top_k"):
    _d("loom_metrics_" + _n, L.Metric, L.vp, L.Output, L.Output, L.i64, L.Output, L.cs)
for _n in ("true_positives", "false_positives", "true_negatives", "false_negatives", "precision", "recall"):
    _d("loom_metrics_%s_at_thresholds" % _n, L.Metric, L.vp, L.Output, L.Output, L.cint, C.POINTER(L.dbl),
       L.Output, L.cs)
for _n in ("sensitivity_at_specificity", "specificity_at_sensitivity"):
    _d("loom_metrics_" + _n, L.Metric, L.vp, L.Output, L.Output, L.dbl, L.Output, L.cint, L.cs)
_d("loom_metrics_mean_relative_error", L.Metric, L.vp, L.Output, L.Output, L.Output, L.Output, L.cs)
_d("loom_metrics_mean_cosine_distance", L.Metric, L.vp, L.Output, L.Output, L.cint, L.Output, L.cs)
_d("loom_metrics_percentage_below", L.Metric, L.vp, L.Output, L.dbl, L.Output, L.cs)


def _class_ids(g, x, what, arg):
    if isinstance(x, Output):
        return x
    return g.constant(np.asarray(x, np.int64))


def _confusion(kind):
    what = "tf.compat.v1.metrics." + kind
    fn = getattr(lib, "loom_metrics_" + kind)

    def f(labels, predictions, num_classes, weights=None, metrics_collections=None, updates_collections=None,
          name=None):
        _no_collections(what, metrics_collections, updates_collections)
        g = _g(predictions if isinstance(predictions, Output) else labels, what)
        m = fn(g.p, _class_ids(g, labels, what, "labels").c, _class_ids(g, predictions, what, "predictions").c,
               int(num_classes), _weights(g, weights, what), _b(name))
        g._check()
        return MetricOp(g, m)
    f.__name__ = f.__qualname__ = kind
    return f


mean_per_class_accuracy = _confusion("mean_per_class_accuracy")
mean_iou = _confusion("mean_iou")


def _at_k(kind):
    what = "tf.compat.v1.metrics." + kind
    fn = getattr(lib, "loom_metrics_" + kind)

    def f(labels, predictions, k, class_id=None, weights=None, metrics_collections=None, updates_collections=None,
          name=None):
        _no_collections(what, metrics_collections, updates_collections)
        g = _g(predictions, what)
        m = fn(g.p, _class_ids(g, labels, what, "labels").c, predictions.c, int(k),
               -1 if class_id is None else int(class_id), _weights(g, weights, what), _b(name))
        g._check()
        return MetricOp(g, m)
    f.__name__ = f.__qualname__ = kind
    return f


precision_at_k = _at_k("precision_at_k")
recall_at_k = _at_k("recall_at_k")


def _at_top_k(kind):
    what = "tf.compat.v1.metrics." + kind
    fn = getattr(lib, "loom_metrics_" + kind)

    def f(labels, predictions_idx, k=None, class_id=None, weights=None, metrics_collections=None,
          updates_collections=None, name=None):
        _no_collections(what, metrics_collections, updates_collections)
        g = _g(predictions_idx, what)
        if k is not None and predictions_idx.shape[-1] not in (None, k):
            raise ValueError("%s: k %d does not match the last dim of predictions_idx %r" % (what, k,
                                                                                          predictions_idx.shape))
        m = fn(g.p, _class_ids(g, labels, what, "labels").c, predictions_idx.c, -1 if class_id is None else
               int(class_id), _weights(g, weights, what), _b(name))
        g._check()
        return MetricOp(g, m)
    f.__name__ = f.__qualname__ = kind
    return f


precision_at_top_k = _at_top_k("precision_at_top_k")
recall_at_top_k = _at_top_k("recall_at_top_k")


def _at_thresholds(kind):
    what = "tf.compat.v1.metrics.%s_at_thresholds" % kind
    fn = getattr(lib, "loom_metrics_%s_at_thresholds" % kind)

    def f(labels, predictions, thresholds, weights=None, metrics_collections=None, updates_collections=None,
          name=None):
        _no_collections(what, metrics_collections, updates_collections)
        g = _g(predictions, what)
        ts = [float(t) for t in thresholds]
        if not ts:
            raise ValueError("%s: thresholds must not be empty" % what)
        m = fn(g.p, _tensor(g, labels, what, "labels").c, predictions.c, len(ts), (L.dbl * len(ts))(*ts),
               _weights(g, weights, what), _b(name))
        g._check()
        return MetricOp(g, m)
    f.__name__ = f.__qualname__ = "%s_at_thresholds" % kind
    return f


for _k in ("true_positives", "false_positives", "true_negatives", "false_negatives", "precision", "recall"):
    globals()["%s_at_thresholds" % _k] = _at_thresholds(_k)


def _sens_spec(kind, arg, labels, predictions, value, weights, num_thresholds, metrics_collections,
               updates_collections, name):
    what = "tf.compat.v1.metrics." + kind
    _no_collections(what, metrics_collections, updates_collections)
    if not 0 <= float(value) <= 1:
        raise ValueError("`%s` must be in the range [0, 1]." % arg)
    g = _g(predictions, what)
    m = getattr(lib, "loom_metrics_" + kind)(g.p, _tensor(g, labels, what, "labels").c, predictions.c, float(value),
                                             _weights(g, weights, what), int(num_thresholds), _b(name))
    g._check()
    return MetricOp(g, m)


def sensitivity_at_specificity(labels, predictions, specificity, weights=None, num_thresholds=200,
                               metrics_collections=None, updates_collections=None, name=None):
    return _sens_spec("sensitivity_at_specificity", "specificity", labels, predictions, specificity, weights,
                      num_thresholds, metrics_collections, updates_collections, name)


def specificity_at_sensitivity(labels, predictions, sensitivity, weights=None, num_thresholds=200,
                               metrics_collections=None, updates_collections=None, name=None):
    return _sens_spec("specificity_at_sensitivity", "sensitivity", labels, predictions, sensitivity, weights,
                      num_thresholds, metrics_collections, updates_collections, name)


def mean_relative_error(labels, predictions, normalizer, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):
    what = "tf.compat.v1.metrics.mean_relative_error"
    _no_collections(what, metrics_collections, updates_collections)
    g = _g(predictions, what)
    m = lib.loom_metrics_mean_relative_error(g.p, _tensor(g, labels, what, "labels").c, predictions.c,
                                             _tensor(g, normalizer, what, "normalizer").c,
                                             _weights(g, weights, what), _b(name))
    g._check()
    return MetricOp(g, m)


def mean_cosine_distance(labels, predictions, dim, weights=None, metrics_collections=None,
                         updates_collections=None, name=None):
    what = "tf.compat.v1.metrics.mean_cosine_distance"
    _no_collections(what, metrics_collections, updates_collections)
    g = _g(predictions, what)
    m = lib.loom_metrics_mean_cosine_distance(g.p, _tensor(g, labels, what, "labels").c, predictions.c, int(dim),
                                              _weights(g, weights, what), _b(name))
    g._check()
    return MetricOp(g, m)


def percentage_below(values, threshold, weights=None, metrics_collections=None, updates_collections=None,
                     name=None):
    what = "tf.compat.v1.metrics.percentage_below"
    _no_collections(what, metrics_collections, updates_collections)
    g = _g(values, what)
    m = lib.loom_metrics_percentage_below(g.p, values.c, float(threshold), _weights(g, weights, what), _b(name))
    g._check()
    return MetricOp(g, m)


MORE_METRICS = ("mean_per_class_accuracy", "mean_iou", "precision_at_k", "recall_at_k", "precision_at_top_k",
                "recall_at_top_k", "true_positives_at_thresholds", "false_positives_at_thresholds",
                "true_negatives_at_thresholds", "false_negatives_at_thresholds", "precision_at_thresholds",
                "recall_at_thresholds", "sensitivity_at_specificity", "specificity_at_sensitivity",
                "mean_relative_error", "mean_cosine_distance", "percentage_below")
