"""tf.estimator's heads (TF 2.15): BinaryClassHead, MultiClassHead,
MultiLabelHead, RegressionHead, PoissonRegressionHead,
LogisticRegressionHead and MultiHead on loom's C heads (loom_head.h), with
TF's arguments, defaults, losses, prediction keys and eval metric keys.

create_estimator_spec, loss and predictions are called in an Estimator's
model_fn and build in its graph. create_estimator_spec fills loom's spec of
the call with the loss, predictions, eval metrics, export outputs and, in
TRAIN, the train op; the EstimatorSpec it returns is what the model_fn
returns (its loss is the training loss tensor in TRAIN, None in EVAL and
PREDICT, where the head reports it as the eval "loss"). metrics and
update_metrics (Keras metric objects) are not provided.
"""
import ctypes as C

import numpy as np

from ... import _lib as L
from ..._lib import lib
from ... import _Status, _b, Output, Node, LoomError
from .. import ops as _ops
from .. import optimizers as _kopt
from .. import feature_column as _fc
from .._surface import missing

_REDUCTIONS = {"sum_over_batch_size": 4, "sum": 2}
_MODE_IDS = {"train": 0, "eval": 1, "infer": 2}


def _reduction(head, loss_reduction):
    red = getattr(loss_reduction, "value", loss_reduction)
    if red not in _REDUCTIONS:
        if red in ("none", "auto"):
            raise ValueError("Invalid loss_reduction: %s. Valid reductions are: SUM, SUM_OVER_BATCH_SIZE"
                             % (loss_reduction,))
        raise ValueError("Invalid loss_reduction: %r (%s takes SUM_OVER_BATCH_SIZE or SUM)"
                         % (loss_reduction, head))
    return red, _REDUCTIONS[red]


def _weight(weight_column):
    if weight_column is None:
        return None
    if isinstance(weight_column, _fc.NumericColumn):
        weight_column = weight_column.key
    if not isinstance(weight_column, str):
        raise TypeError("weight_column must be a string or a numeric_column, got %r" % (weight_column,))
    return weight_column


class _Features:
    """The C features a head reads its weight column(s) from: the dense tensors of the features
    dict given to loss / create_estimator_spec, else the model_fn's own."""

    def __init__(self, features, graph, cfeatures):
        self.p, self._own = cfeatures, False
        if isinstance(features, dict):
            self.p, self._own = lib.loom_features_new(), True
            for k, v in features.items():
                if isinstance(k, str) and isinstance(v, Output) and v.graph.p == graph.p:
                    lib.loom_features_add(self.p, _b(k), v.c, None)

    def __enter__(self):
        return self.p

    def __exit__(self, *exc):
        if self._own:
            lib.loom_features_free(self.p)


def _unsupported(head, arg, what):
    return NotImplementedError("loom.tf: tf.estimator.%s(%s=...) is not supported; %s" % (head, arg, what))


class _Head:
    _tf = None

    def _setup(self, name, loss_reduction, loss_fn):
        if loss_fn is not None:
            raise _unsupported(type(self).__name__, "loss_fn", "use the head's own loss (TF's default) or write "
                               "the loss, predictions and metrics of an EstimatorSpec yourself")
        if name is not None and not isinstance(name, str):
            raise TypeError("name must be a string, got %r" % (name,))
        self._name = name
        self._red_name, red = _reduction(type(self).__name__, loss_reduction)
        self._keep = []
        return red

    def _made(self, p, st):
        if not p:
            try:
                st.raise_if()
            except LoomError as e:
                raise ValueError(str(e)) from None
        self._p = p

    def __del__(self):
        p, self._p = getattr(self, "_p", None), None
        if p and lib is not None and not getattr(self, "_owned", False):
            lib.loom_head_free(p)

    @property
    def name(self):
        return self._name

    @property
    def logits_dimension(self):
        return int(lib.loom_head_logits_dimension(self._p))

    @property
    def loss_reduction(self):
        return self._red_name

    def _strs(self, xs):
        arr = (C.c_char_p * max(1, len(xs)))(*[_b(x) for x in xs])
        self._keep.append(arr)
        return len(xs), arr

    def _thresholds(self, o, thresholds):
        ts = [float(t) for t in (thresholds or ())]
        for t in ts:
            if not 0.0 < t < 1.0:
                raise ValueError("thresholds not in (0, 1): %s." % (tuple(thresholds),))
        arr = (L.dbl * max(1, len(ts)))(*ts)
        self._keep.append(arr)
        o.nthresholds, o.thresholds = len(ts), arr

    def _vocab(self, o, label_vocabulary, n):
        if label_vocabulary is None:
            return
        if not isinstance(label_vocabulary, (list, tuple)) or not all(isinstance(v, str) for v in label_vocabulary):
            raise ValueError("label_vocabulary should be a list or a tuple. Given type: %s"
                             % type(label_vocabulary).__name__)
        if len(label_vocabulary) != n:
            raise ValueError("label_vocabulary does not have enough elements (%d; %d classes): %s"
                             % (len(label_vocabulary), n, label_vocabulary))
        o.nlabel_vocabulary, o.label_vocabulary = self._strs(list(label_vocabulary))

    def __getattr__(self, name):  # TF's metrics, update_metrics: not provided
        if name.startswith("_"):
            raise AttributeError(name)
        if name in ("metrics", "update_metrics"):
            raise NotImplementedError("loom.tf does not provide tf.estimator.%s.%s; instead: the head's "
                                      "create_estimator_spec in the model_fn (its EstimatorSpec has the head's eval "
                                      "metrics)" % (type(self).__name__, name))
        raise missing("estimator.%s." % type(self).__name__, name)

    def _graph(self, what, logits):
        what = "%s.%s" % (type(self).__name__, what)
        if not _ops._graphs:
            raise NotImplementedError("loom.tf: %s outside a model_fn: loom.tf builds the head's tensors in a "
                                      "model_fn" % what)
        graph, cfeatures = _ops._features[-1] if _ops._features else (_ops._graphs[-1], None)
        if not isinstance(logits, Output):
            raise TypeError("%s: logits must be a tensor of the model_fn's graph, got %r" % (what, type(logits)))
        if logits.graph.p != graph.p:
            raise ValueError("%s: logits are not in the model_fn's graph" % what)
        dims = logits.shape
        if len(dims) >= 1 and dims[-1] is not None and dims[-1] != self.logits_dimension:
            raise ValueError("%s: logits shape must be [D0, D1, ... DN, logits_dimension], got %s "
                             "(logits_dimension %d)" % (what, list(dims), self.logits_dimension))
        return what, graph, cfeatures

    def _labels_array(self, what, labels):
        if isinstance(self, MultiHead):
            if not isinstance(labels, dict):
                raise ValueError("%s: labels must be a dict {head name: labels}, got %r" % (what, type(labels)))
            arr = (L.Output * len(self._heads))()
            for i, h in enumerate(self._heads):
                if h.name not in labels:
                    raise ValueError("%s: labels has no entry for head %r (keys: %s)" % (what, h.name, sorted(labels)))
                arr[i] = labels[h.name].c
            return arr
        if not isinstance(labels, Output):
            raise ValueError("%s: labels must be a tensor of the model_fn's graph, got %r" % (what, type(labels)))
        arr = (L.Output * 1)()
        arr[0] = labels.c
        return arr

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
        """The training loss tensor (TF's: weighted, reduced with loss_reduction, plus the
        regularization losses), in a model_fn; the weight column is read from features (a dict),
        else from the model_fn's features."""
        what, graph, cfeatures = self._graph("loss", logits)
        arr = self._labels_array(what, labels)
        st = _Status()
        with _Features(features, graph, cfeatures) as fp:
            out = lib.loom_head_loss(self._p, graph.p, fp, logits.c, arr, st.p)
        try:
            st.raise_if()
            graph._check()
        except LoomError as e:
            raise ValueError("%s: %s" % (what, e)) from None
        loss = Output(graph, out)
        reg = _reg_total(graph, regularization_losses)
        return loss if reg is None else loss + reg

    def predictions(self, logits, keys=None):
        """The predictions dict (TF's keys; keys selects some), tensors of the model_fn."""
        what, graph, _ = self._graph("predictions", logits)
        preds = {}

        def add(key, value, user):
            preds[key.decode()] = Output(graph, value)
        cb = L.HEAD_PREDICTION_FN(add)
        st = _Status()
        rc = lib.loom_head_predictions(self._p, graph.p, logits.c, cb, None, st.p)
        try:
            st.raise_if(rc)
        except LoomError as e:
            raise ValueError("%s: %s" % (what, e)) from None
        if keys is None:
            return preds
        keys = [keys] if isinstance(keys, str) else list(keys)
        for k in keys:
            if k not in preds:
                raise ValueError("%s: key %r is not among the head's predictions %s" % (what, k, sorted(preds)))
        return {k: preds[k] for k in keys}

    # ---- the spec
    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, trainable_variables=None,
                              train_op_fn=None, update_ops=None, regularization_losses=None):
        from . import EstimatorSpec
        what = "%s.create_estimator_spec" % type(self).__name__
        if not _ops._graphs or not _ops._specs:
            raise RuntimeError("loom.tf: %s is called in an Estimator's model_fn" % what)
        graph, cfeatures = _ops._features[-1]
        spec = _ops._specs[-1]
        if mode not in _MODE_IDS:
            raise ValueError("%s: mode must be a tf.estimator.ModeKeys value, got %r" % (what, mode))
        if not isinstance(logits, Output):
            raise TypeError("%s: logits must be a tensor of the model_fn's graph, got %r" % (what, type(logits)))
        if isinstance(logits, Output) and logits.graph.p != graph.p:
            raise ValueError("%s: logits are not in the model_fn's graph" % what)
        dims = logits.shape
        if len(dims) >= 1 and dims[-1] is not None and dims[-1] != self.logits_dimension:
            raise ValueError("%s: logits shape must be [D0, D1, ... DN, logits_dimension], got %s "
                             "(logits_dimension %d)" % (what, list(dims), self.logits_dimension))
        if mode == "train":
            if optimizer is not None and train_op_fn is not None:
                raise ValueError("train_op_fn and optimizer cannot both be set.")
            if optimizer is None and train_op_fn is None:
                raise ValueError("train_op_fn and optimizer cannot both be None.")
            if optimizer is not None and trainable_variables is None:
                raise ValueError("trainable_variables cannot be None. Given None")
            if optimizer is not None and not isinstance(optimizer, (_kopt.Optimizer, _ops._Optimizer)):
                raise ValueError("The given optimizer is not a tf.keras.optimizers.Optimizer instance. Given: %r"
                                 % (optimizer,))
        res = EstimatorSpec(mode)
        err = []
        reg = _reg_total(graph, regularization_losses)

        def make_train_op(g, loss, user):
            try:
                lo = Output(graph, loss)
                if reg is not None:
                    lo = lo + reg
                res.loss = lo
                if train_op_fn is not None:
                    op = train_op_fn(lo)
                else:
                    opt = _v1(optimizer)
                    _all_trainable(trainable_variables, what)
                    op = opt.minimize(lo, global_step=_ops.get_global_step())
                if update_ops:
                    from .._graph_ops import group
                    op = group(op, *list(update_ops))
                if isinstance(op, Output):
                    return op.c.node
                if not isinstance(op, Node):
                    raise TypeError("%s: train_op_fn must return an op (the train op), got %r" % (what, op))
                return op.p
            except BaseException as e:  # noqa: B902 - must not unwind through C
                err.append(e)
                return None
        cb = L.HEAD_TRAIN_OP_FN(make_train_op)
        st = _Status()
        if isinstance(self, MultiHead):
            rc = self._create_multi(graph, features, cfeatures, mode, logits, labels, cb, spec, st)
        else:
            if mode != "infer" and labels is None:
                raise ValueError("%s: labels must be given in mode %r" % (what, mode))
            if isinstance(labels, dict):
                raise ValueError("%s: labels must be a tensor, got a dict (%s)" % (what, sorted(labels)))
            lab = labels.c if isinstance(labels, Output) else L.Output()
            with _Features(features, graph, cfeatures) as fp:
                rc = lib.loom_head_create_spec(self._p, graph.p, fp, _MODE_IDS[mode], logits.c, lab, cb, None, spec,
                                               st.p)
        if err:
            raise err[0]
        try:
            st.raise_if(rc)
            graph._check()
        except LoomError as e:
            raise ValueError("%s: %s" % (what, e)) from None
        if reg is not None and mode != "infer":  # TF: the loss plus the regularization; its mean as a metric
            loss = res.loss if mode == "train" else self.loss(labels, logits, features, mode, [reg])
            st.raise_if(lib.loom_spec_set_loss(spec, loss.c))
            if mode == "eval":
                from .. import _v1_ops
                key = "regularization_loss" + ("/" + self._name if self._name else "")
                st.raise_if(lib.loom_spec_add_eval_metric(spec, _b(key), _v1_ops.mean(reg)._metric))
        res._head_filled = True
        return res


def _all_trainable(given, what):
    """loom's optimizers train every trainable variable the loss depends on: a trainable_variables list
    that leaves some out would train something else than TF, so it raises instead."""
    from .. import _model_fn_ops as _mfo
    names = {getattr(v, "name", None) for v in given}
    missing = [v.name for v in _mfo.trainable_variables() if v.name not in names]
    if missing:
        raise NotImplementedError("loom.tf: %s(trainable_variables=...) without %s: loom trains every trainable "
                                  "variable the loss depends on; pass tf.compat.v1.trainable_variables(), or build "
                                  "the train op with train_op_fn" % (what, ", ".join(missing[:4])))


def _reg_total(graph, regularization_losses):
    """The sum of the regularization losses (tensors or numbers) as a float32 scalar tensor, None without."""
    regs = list(regularization_losses or [])
    if not regs:
        return None
    total = None
    for r in regs:
        r = r if isinstance(r, Output) else graph.constant(np.float32(r))
        total = r if total is None else total + r
    return total


def _v1(optimizer):
    """A tf.keras.optimizers instance as the tf.compat.v1.train optimizer of the same update rule."""
    if isinstance(optimizer, _ops._Optimizer):
        return optimizer
    for k, v in optimizer._args.items():
        raise NotImplementedError("loom.tf: %s(%s=%r) in a head's create_estimator_spec: give TF's default"
                                  % (type(optimizer).__name__, k, v))
    if optimizer._loom == "RMSProp":  # Keras' mean square starts at 0, v1's at 1
        raise NotImplementedError("loom.tf: RMSprop as a head's optimizer is not supported; give a "
                                  "tf.compat.v1.train.RMSPropOptimizer or train_op_fn")
    lr = optimizer.learning_rate
    if lr is None:
        lr = 0.01 if optimizer._loom == "SGD" else 0.001
    return {"Adagrad": lambda: _ops.AdagradOptimizer(lr, initial_accumulator_value=0.1),
            "Adam": lambda: _ops.AdamOptimizer(lr, epsilon=1e-7),
            "Ftrl": lambda: _ops.FtrlOptimizer(lr),
            "SGD": lambda: _ops.GradientDescentOptimizer(lr)}[optimizer._loom]()


_SUM_OVER_BATCH_SIZE = "sum_over_batch_size"


class BinaryClassHead(_Head):
    """tf.estimator.BinaryClassHead: sigmoid cross entropy on labels in {0, 1}."""

    def __init__(self, weight_column=None, thresholds=None, label_vocabulary=None,
                 loss_reduction=_SUM_OVER_BATCH_SIZE, loss_fn=None, name=None):
        red = self._setup(name, loss_reduction, loss_fn)
        o = lib.loom_binary_head_options_default()
        o.loss_reduction = red
        self._wc = _b(_weight(weight_column))
        o.weight_column = self._wc
        self._thresholds(o, thresholds)
        self._vocab(o, label_vocabulary, 2)
        self._nm = _b(name)
        o.name = self._nm
        st = _Status()
        self._made(lib.loom_binary_class_head_new(C.byref(o), st.p), st)


class MultiClassHead(_Head):
    """tf.estimator.MultiClassHead: softmax cross entropy on class ids in [0, n_classes)."""

    def __init__(self, n_classes, weight_column=None, label_vocabulary=None, loss_reduction=_SUM_OVER_BATCH_SIZE,
                 loss_fn=None, name=None):
        if not isinstance(n_classes, (int, np.integer)) or isinstance(n_classes, bool):
            raise ValueError("n_classes must be an int, got %r" % (n_classes,))
        if n_classes <= 2:
            raise ValueError("n_classes must be > 2: %s" % n_classes)
        red = self._setup(name, loss_reduction, loss_fn)
        o = lib.loom_multi_class_head_options_default()
        o.n_classes, o.loss_reduction = int(n_classes), red
        self._wc = _b(_weight(weight_column))
        o.weight_column = self._wc
        self._vocab(o, label_vocabulary, int(n_classes))
        self._nm = _b(name)
        o.name = self._nm
        st = _Status()
        self._made(lib.loom_multi_class_head_new(C.byref(o), st.p), st)


class MultiLabelHead(_Head):
    """tf.estimator.MultiLabelHead: sigmoid cross entropy per class on dense multi-hot labels."""

    def __init__(self, n_classes, weight_column=None, thresholds=None, label_vocabulary=None,
                 loss_reduction=_SUM_OVER_BATCH_SIZE, loss_fn=None, classes_for_class_based_metrics=None,
                 name=None):
        if not isinstance(n_classes, (int, np.integer)) or isinstance(n_classes, bool) or n_classes < 2:
            raise ValueError("n_classes must be > 1 for multi-label classification. Given: %r" % (n_classes,))
        if label_vocabulary is not None:
            raise _unsupported("MultiLabelHead", "label_vocabulary", "give dense multi-hot int labels "
                               "[batch, n_classes]")
        if classes_for_class_based_metrics:
            raise _unsupported("MultiLabelHead", "classes_for_class_based_metrics",
                               "the head's metrics are over all classes")
        red = self._setup(name, loss_reduction, loss_fn)
        o = lib.loom_multi_label_head_options_default()
        o.n_classes, o.loss_reduction = int(n_classes), red
        self._wc = _b(_weight(weight_column))
        o.weight_column = self._wc
        self._thresholds(o, thresholds)
        self._nm = _b(name)
        o.name = self._nm
        st = _Status()
        self._made(lib.loom_multi_label_head_new(C.byref(o), st.p), st)


class _RegressionBase(_Head):
    _ctor = None

    def _make(self, label_dimension, weight_column, loss_reduction, loss_fn, name, compute_full_loss=True):
        if not isinstance(label_dimension, (int, np.integer)) or isinstance(label_dimension, bool) \
                or label_dimension < 1:
            raise ValueError("Invalid label_dimension %r." % (label_dimension,))
        red = self._setup(name, loss_reduction, loss_fn)
        o = lib.loom_regression_head_options_default()
        o.label_dimension, o.loss_reduction = int(label_dimension), red
        o.compute_full_loss = int(bool(compute_full_loss))
        self._wc = _b(_weight(weight_column))
        o.weight_column = self._wc
        self._nm = _b(name)
        o.name = self._nm
        st = _Status()
        self._made(getattr(lib, self._ctor)(C.byref(o), st.p), st)


class RegressionHead(_RegressionBase):
    """tf.estimator.RegressionHead: mean squared error; predictions are the logits."""
    _ctor = "loom_regression_head_new"

    def __init__(self, label_dimension=1, weight_column=None, loss_reduction=_SUM_OVER_BATCH_SIZE, loss_fn=None,
                 inverse_link_fn=None, name=None):
        if inverse_link_fn is not None:
            raise _unsupported("RegressionHead", "inverse_link_fn", "PoissonRegressionHead (exp) or "
                               "LogisticRegressionHead (sigmoid), or apply it to the predictions yourself")
        self._make(label_dimension, weight_column, loss_reduction, loss_fn, name)


class PoissonRegressionHead(_RegressionBase):
    """tf.estimator.PoissonRegressionHead: log Poisson loss; predictions exp(logits)."""
    _ctor = "loom_poisson_regression_head_new"

    def __init__(self, label_dimension=1, weight_column=None, loss_reduction=_SUM_OVER_BATCH_SIZE,
                 compute_full_loss=True, name=None):
        self._make(label_dimension, weight_column, loss_reduction, None, name, compute_full_loss)


class LogisticRegressionHead(_RegressionBase):
    """tf.estimator.LogisticRegressionHead: sigmoid cross entropy on labels in [0, 1]; predictions
    sigmoid(logits)."""
    _ctor = "loom_logistic_regression_head_new"

    def __init__(self, weight_column=None, loss_reduction=_SUM_OVER_BATCH_SIZE, name=None):
        self._make(1, weight_column, loss_reduction, None, name)


class MultiHead(_Head):
    """tf.estimator.MultiHead: named heads on concatenated logits; the loss is the head_weights-weighted sum;
    labels a dict {head name: labels}."""

    def __init__(self, heads, head_weights=None):
        heads = list(heads or [])
        if not heads:
            raise ValueError("Must specify heads. Given: %s" % (heads,))
        for h in heads:
            if not isinstance(h, _Head) or isinstance(h, MultiHead):
                raise ValueError("MultiHead: heads must be tf.estimator heads (not MultiHead), got %r" % (h,))
            if not h.name:
                raise ValueError("All given heads must have name specified. Given: %s" % (h,))
            if getattr(h, "_owned", False):
                raise ValueError("MultiHead: head %r belongs to another MultiHead already" % h.name)
        if head_weights is not None and len(head_weights) != len(heads):
            raise ValueError("heads and head_weights must have the same size. Given len(heads): %d. Given "
                             "len(head_weights): %d." % (len(heads), len(head_weights)))
        self._heads = tuple(heads)
        self._head_weights = None if head_weights is None else tuple(float(w) for w in head_weights)
        self._keep = []
        self._name = "_".join(h.name for h in heads)
        self._red_name = heads[0].loss_reduction
        arr = (L.vp * len(heads))(*[h._p for h in heads])
        ws = None if head_weights is None else (L.dbl * len(heads))(*self._head_weights)
        for h in heads:
            h._owned = True  # the multi-head frees them (its C head owns theirs)
            h._parent = self  # and lives as long as any of them
        st = _Status()
        self._made(lib.loom_multi_head_new(len(heads), arr, ws, st.p), st)

    @property
    def heads(self):
        return self._heads

    def _create_multi(self, graph, features, cfeatures, mode, logits, labels, cb, spec, st):
        what = "MultiHead.create_estimator_spec"
        n = len(self._heads)
        arr = (L.Output * n)()
        if mode != "infer":
            if not isinstance(labels, dict):
                raise ValueError("%s: labels must be a dict {head name: labels}, got %r" % (what, type(labels)))
            for i, h in enumerate(self._heads):
                if h.name not in labels:
                    raise ValueError("%s: labels has no entry for head %r (keys: %s)"
                                     % (what, h.name, sorted(labels)))
                arr[i] = labels[h.name].c
        with _Features(features, graph, cfeatures) as fp:
            return lib.loom_head_create_spec_multi(self._p, graph.p, fp, _MODE_IDS[mode], logits.c, arr, cb, None,
                                                   spec, st.p)
