"""loom.tf symbols of TF 2.15's Estimator surface checked against TF's
definitions: tf.compat.v1.estimator's canned estimators (v1 signatures,
loss_reduction SUM), tf.compat.v1.losses (weights, reductions),
tf.compat.v1.metrics, tf.compat.v1.summary, the tf.compat.v1.train
optimizers (one step against the update rule by hand), tf.train.latest_checkpoint,
and NotImplementedError at the point of use for what loom.tf lacks."""
import ctypes
import glob
import inspect
import os

import numpy as np
import pytest

import loom
import loom.tf as tf
from loom import _lib as L
from loom.tf import ops as _ops

LOSS_REDUCTIONS = tf.compat.v1.losses.Reduction


# ---------------------------------------------------------------- tf.compat.v1.estimator
def _one_step(cls, tmp_path, **kw):
    x = (np.arange(8, dtype=np.float32) / 8).reshape(8, 1)
    y = (2 * x[:, 0] + 1).astype(np.float32)
    est = cls([tf.feature_column.numeric_column("x")], model_dir=str(tmp_path),
              optimizer=tf.keras.optimizers.SGD(learning_rate=0.01), **kw)
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8), steps=1)
    return est, x, y


def test_v1_canned_estimators_sum_the_loss_over_the_batch(tmp_path):
    """TF 2.15's tf.compat.v1.estimator.LinearRegressor defaults to
    loss_reduction=tf.compat.v1.losses.Reduction.SUM: from zero weights one
    SGD step moves the bias by lr * 2 * sum(y) (tf.estimator's: the mean)."""
    v1, x, y = _one_step(tf.compat.v1.estimator.LinearRegressor, tmp_path / "v1")
    v2, _, _ = _one_step(tf.estimator.LinearRegressor, tmp_path / "v2")
    b1 = v1.get_variable_value("linear/linear_model/bias_weights")
    b2 = v2.get_variable_value("linear/linear_model/bias_weights")
    np.testing.assert_allclose(b1, [0.01 * 2 * y.sum()], rtol=1e-5)
    np.testing.assert_allclose(b2, [0.01 * 2 * y.mean()], rtol=1e-5)
    w1 = v1.get_variable_value("linear/linear_model/x/weights")
    np.testing.assert_allclose(w1, [[0.01 * 2 * (x[:, 0] * y).sum()]], rtol=1e-5)
    # the evaluation's "loss" is the summed loss of the batch, average_loss its mean (TF v1 heads)
    m = v1.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8))
    np.testing.assert_allclose(m["loss"], 8 * m["average_loss"], rtol=1e-5)


def test_v1_canned_estimators_have_tf_v1_signatures():
    v1 = tf.compat.v1.estimator
    expect = {"DNNClassifier": "input_layer_partitioner", "DNNRegressor": "input_layer_partitioner",
              "DNNLinearCombinedClassifier": "input_layer_partitioner",
              "DNNLinearCombinedRegressor": "input_layer_partitioner", "LinearClassifier": "partitioner",
              "LinearRegressor": "partitioner", "BaselineClassifier": None, "BaselineRegressor": None}
    for name, extra in expect.items():
        params = inspect.signature(getattr(v1, name)).parameters
        assert params["loss_reduction"].default == LOSS_REDUCTIONS.SUM == "weighted_sum", name
        assert inspect.signature(getattr(tf.estimator, name)).parameters["loss_reduction"].default == \
            "sum_over_batch_size"
        if extra:
            assert params[extra].default is None, name
            assert extra not in inspect.signature(getattr(tf.estimator, name)).parameters
    # the v1 argument order: partitioner after config for the linear models, before it for the DNN ones
    assert list(inspect.signature(v1.LinearClassifier).parameters)[6:9] == ["config", "partitioner",
                                                                             "warm_start_from"]
    assert list(inspect.signature(v1.DNNClassifier).parameters)[8:11] == ["dropout", "input_layer_partitioner",
                                                                           "config"]
    assert v1.Estimator is tf.estimator.Estimator and v1.RunConfig is tf.estimator.RunConfig


def test_v1_partitioner_is_not_implemented_at_the_call():
    with pytest.raises(NotImplementedError, match=r"LinearClassifier\(partitioner=...\).*drop the argument"):
        tf.compat.v1.estimator.LinearClassifier([tf.feature_column.numeric_column("x")], partitioner=object())


# ---------------------------------------------------------------- tf.compat.v1.losses
def _run(g, fetches, feed):
    return loom.Session(g).run(fetches, feed)


def test_v1_losses_weights_and_reductions():
    g = loom.Graph()
    lab = g.placeholder(np.float32, [3, 2], "labels")
    pred = g.placeholder(np.float32, [3, 2], "pred")
    w = np.array([[1.0], [0.0], [2.0]], np.float32)
    yl = np.array([[0, 1], [2, 3], [1, 1]], np.float32)
    yp = np.array([[0.5, 1], [1, 1], [3, -1]], np.float32)
    d = yp - yl
    losses = tf.compat.v1.losses
    outs = [losses.absolute_difference(lab, pred, weights=w),
            losses.mean_squared_error(lab, pred, weights=w, reduction=LOSS_REDUCTIONS.SUM),
            losses.mean_squared_error(lab, pred, reduction=LOSS_REDUCTIONS.MEAN),
            losses.huber_loss(lab, pred, delta=1.0, reduction=LOSS_REDUCTIONS.SUM_OVER_BATCH_SIZE),
            losses.absolute_difference(lab, pred, weights=w, reduction=LOSS_REDUCTIONS.NONE)]
    got = _run(g, outs, {lab: yl, pred: yp})
    wb = np.broadcast_to(w, d.shape)
    np.testing.assert_allclose(got[0], (wb * abs(d)).sum() / np.count_nonzero(wb), rtol=1e-6)  # SUM_BY_NONZERO
    np.testing.assert_allclose(got[1], (wb * d * d).sum(), rtol=1e-6)
    np.testing.assert_allclose(got[2], (d * d).mean(), rtol=1e-6)
    e = abs(d)
    q = np.minimum(e, 1.0)
    np.testing.assert_allclose(got[3], (0.5 * q * q + (e - q)).mean(), rtol=1e-6)
    np.testing.assert_allclose(got[4], wb * abs(d), rtol=1e-6)


def test_v1_cross_entropy_losses_match_their_formulas():
    g = loom.Graph()
    logits = g.placeholder(np.float32, [2, 3], "logits")
    onehot = g.placeholder(np.float32, [2, 3], "onehot")
    z = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)
    y = np.array([[0, 0, 1], [0, 1, 0]], np.float32)
    losses = tf.compat.v1.losses
    got = _run(g, [losses.softmax_cross_entropy(onehot, logits, label_smoothing=0.1),
                   losses.sigmoid_cross_entropy(onehot, logits),
                   losses.hinge_loss(onehot, logits)], {logits: z, onehot: y})
    ys = y * 0.9 + 0.1 / 3
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    np.testing.assert_allclose(got[0], -(ys * logp).sum(1).mean(), rtol=1e-5)
    sig = np.maximum(z, 0) - z * y + np.log1p(np.exp(-abs(z)))
    np.testing.assert_allclose(got[1], sig.mean(), rtol=1e-5)
    np.testing.assert_allclose(got[2], np.maximum(0, 1 - (2 * y - 1) * z).mean(), rtol=1e-5)


def test_v1_loss_bad_reduction_names_it():
    g = loom.Graph()
    a = g.placeholder(np.float32, [2], "a")
    with pytest.raises(ValueError, match="mean_squared_error: Invalid Reduction Key 'mean'"):
        tf.compat.v1.losses.mean_squared_error(a, a, reduction="mean")


# ---------------------------------------------------------------- metrics and summaries in a model_fn
X = np.random.RandomState(0).rand(40, 3).astype(np.float32)
Y = (X.sum(1) > 1.5).astype(np.int32)


def _model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    cls = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"cls": cls})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    tf.compat.v1.summary.scalar("my_loss_summary", loss)
    tf.compat.v1.summary.histogram("my_logits_hist", logits)
    if mode == tf.estimator.ModeKeys.TRAIN:
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.5)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=opt.minimize(
            loss, global_step=tf.compat.v1.train.get_global_step()))
    m = tf.compat.v1.metrics
    p1 = tf.reshape(tf.nn.softmax(logits), [-1])
    fl, fc = tf.cast(labels, tf.float32), tf.cast(cls, tf.float32)
    return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        "precision": m.precision(labels, cls), "recall": m.recall(labels, cls),
        "tp": m.true_positives(labels, cls), "fp": m.false_positives(labels, cls),
        "tn": m.true_negatives(labels, cls), "fn": m.false_negatives(labels, cls),
        "mse": m.mean_squared_error(fl, fc), "rmse": m.root_mean_squared_error(fl, fc),
        "mae": m.mean_absolute_error(fl, fc, weights=fl), "n_p1": m.mean(p1)})


def test_v1_metrics_and_summaries_in_a_model_fn(tmp_path):
    est = tf.estimator.Estimator(_model_fn, model_dir=str(tmp_path),
                                 config=tf.estimator.RunConfig(save_summary_steps=5))
    fn = lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(10)  # noqa: E731
    est.train(lambda: fn().repeat(), steps=20)
    m = est.evaluate(fn)
    c = np.array([p["cls"] for p in est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X}).batch(10))])
    tp, fp = int(((c == 1) & (Y == 1)).sum()), int(((c == 1) & (Y == 0)).sum())
    tn, fn_ = int(((c == 0) & (Y == 0)).sum()), int(((c == 0) & (Y == 1)).sum())
    assert (m["tp"], m["fp"], m["tn"], m["fn"]) == (tp, fp, tn, fn_)
    np.testing.assert_allclose(m["precision"], tp / (tp + fp), rtol=1e-6)
    np.testing.assert_allclose(m["recall"], tp / (tp + fn_), rtol=1e-6)
    err = (c != Y).mean()
    np.testing.assert_allclose([m["mse"], m["rmse"]], [err, np.sqrt(err)], rtol=1e-6)
    np.testing.assert_allclose(m["mae"], fn_ / Y.sum(), rtol=1e-6)  # weighted by the labels: the missed positives
    np.testing.assert_allclose(m["n_p1"], 0.5, rtol=1e-6)  # softmax rows sum to 1: the mean of all entries is 1/2
    events = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    assert events
    data = b"".join(open(f, "rb").read() for f in events)
    assert b"my_loss_summary" in data and b"my_logits_hist" in data


def test_v1_auc_matches_the_trapezoid_over_tf_thresholds():
    g = loom.Graph()
    lab = g.placeholder(np.int32, [6], "lab")
    pred = g.placeholder(np.float32, [6], "pred")
    val, upd = tf.compat.v1.metrics.auc(lab, pred, num_thresholds=5)
    yl = np.array([0, 0, 1, 1, 0, 1], np.int32)
    yp = np.array([0.1, 0.6, 0.35, 0.8, 0.2, 0.9], np.float32)
    s = loom.Session(g)
    s.run(targets=[loom.Node(g, L.lib.loom_local_variables_initializer(g.p))])
    got = s.run([upd], {lab: yl, pred: yp})[0]
    th = np.array([-1e-7, 1 / 4, 2 / 4, 3 / 4, 1 + 1e-7])
    tpr = [((yp > t) & (yl == 1)).sum() / (yl.sum() + 1e-6) for t in th]
    fpr = [((yp > t) & (yl == 0)).sum() / ((yl == 0).sum() + 1e-6) for t in th]
    ref = sum((fpr[i] - fpr[i + 1]) * (tpr[i] + tpr[i + 1]) / 2 for i in range(len(th) - 1))
    np.testing.assert_allclose(got, ref, rtol=1e-5)


# ---------------------------------------------------------------- optimizers
def _after_one_step(tmp_path, make):
    x, y = np.array([[1.0, 2.0]], np.float32), np.array([[3.0]], np.float32)

    def model_fn(features, labels, mode):
        p = tf.compat.v1.layers.dense(features["x"], 1, use_bias=False)
        loss = tf.compat.v1.losses.mean_squared_error(labels, p)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=make().minimize(
            loss, global_step=tf.compat.v1.train.get_global_step()))
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), config=tf.estimator.RunConfig(tf_random_seed=1))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(1), steps=1)
    return est, x, y


def _prox(p, r, l1, l2):  # TF's proximal step with the rate r
    return np.sign(p) * np.maximum(np.abs(p) - r * l1, 0) / (1 + r * l2)


@pytest.mark.parametrize("name", ["momentum", "rmsprop", "adam", "adagrad", "adadelta", "proximal_gd",
                                  "proximal_adagrad", "adagrad_da"])
def test_v1_optimizers_first_step_follows_their_update_rule(tmp_path, name):
    train = tf.compat.v1.train
    e0, x, y = _after_one_step(tmp_path / "w0", lambda: train.GradientDescentOptimizer(0.0))
    w0 = e0.get_variable_value("dense/kernel").ravel()
    g = 2 * (x[0] @ w0 - y[0, 0]) * x[0]  # d/dw (x.w - y)^2
    make, slots, expect = {
        "momentum": (lambda: train.MomentumOptimizer(0.1, 0.9), ["Momentum"], w0 - 0.1 * g),
        "rmsprop": (lambda: train.RMSPropOptimizer(0.1), ["RMSProp", "RMSProp_1"],
                    w0 - 0.1 * g / np.sqrt(0.9 * 1.0 + 0.1 * g * g + 1e-10)),  # TF 1: ms starts at 1
        "adam": (lambda: train.AdamOptimizer(0.1, beta1=0.5), ["Adam", "Adam_1"], w0 - 0.1 * np.sign(g)),
        "adagrad": (lambda: train.AdagradOptimizer(0.1, initial_accumulator_value=0.5), ["Adagrad"],
                    w0 - 0.1 * g / np.sqrt(0.5 + g * g)),
        "adadelta": (lambda: train.AdadeltaOptimizer(1.0, rho=0.95, epsilon=1e-6), ["Adadelta", "Adadelta_1"],
                     w0 - g * np.sqrt(1e-6) / np.sqrt(0.05 * g * g + 1e-6)),
        "proximal_gd": (lambda: train.ProximalGradientDescentOptimizer(0.1, 0.5, 0.1), [],
                        _prox(w0 - 0.1 * g, 0.1, 0.5, 0.1)),
        "proximal_adagrad": (lambda: train.ProximalAdagradOptimizer(0.1, 0.5, 0.5, 0.1), ["ProximalAdagrad"],
                             _prox(w0 - 0.1 / np.sqrt(0.5 + g * g) * g, 0.1 / np.sqrt(0.5 + g * g), 0.5, 0.1)),
        # step T = 1: -sign(g) lr max(|g| - l1, 0) / (l2 lr + sqrt(0.1 + g^2))
        "adagrad_da": (lambda: train.AdagradDAOptimizer(0.1, tf.compat.v1.train.get_global_step(),
                                                        l1_regularization_strength=0.5, l2_regularization_strength=0.1),
                       ["AdagradDA", "AdagradDA_1"],
                       -np.sign(g) * 0.1 * np.maximum(np.abs(g) - 0.5, 0) / (0.1 * 0.1 + np.sqrt(0.1 + g * g))),
    }[name]
    est, _, _ = _after_one_step(tmp_path / name, make)
    np.testing.assert_allclose(est.get_variable_value("dense/kernel").ravel(), expect, rtol=2e-5)
    assert sorted(n for n in est.get_variable_names() if n.startswith("dense/kernel/")) == \
        ["dense/kernel/" + s for s in slots]


def test_v1_optimizer_arguments_are_checked_as_tf():
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.compat.v1.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="l1_regularization_strength -1 must be non-negative"):
        tf.compat.v1.train.FtrlOptimizer(0.1, l1_regularization_strength=-1)
    with pytest.raises(NotImplementedError, match="minimize\\(var_list=...\\)"):
        g = loom.Graph()
        _ops._graphs.append(g)
        try:
            tf.compat.v1.train.AdamOptimizer().minimize(g.constant(1.0), tf.compat.v1.train.get_global_step(),
                                                         var_list=[])
        finally:
            _ops._graphs.pop()


def test_optimizer_option_structs_match_the_c_library():
    for kind, cls in [("momentum", _ops._MomentumOptions), ("adagrad", _ops._AdagradOptions),
                      ("adam", _ops._AdamOptions), ("ftrl", _ops._FtrlOptions), ("adadelta", _ops._AdadeltaOptions),
                      ("proximal_gradient_descent", _ops._ProximalGradientDescentOptions),
                      ("proximal_adagrad", _ops._ProximalAdagradOptions), ("adagrad_da", _ops._AdagradDAOptions)]:
        assert getattr(L.lib, "loom_%s_options_default" % kind)().struct_size == ctypes.sizeof(cls), kind
    assert L.lib.loom_adam_options_default().beta2 == 0.999 and L.lib.loom_ftrl_options_default().l1 == 0.0


# ---------------------------------------------------------------- tf.train.latest_checkpoint
def test_latest_checkpoint(tmp_path):
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    est, _, _ = _after_one_step(tmp_path, lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1))
    assert tf.train.latest_checkpoint(str(tmp_path)) == os.path.join(str(tmp_path), "model.ckpt-1")
    assert tf.compat.v1.train.latest_checkpoint(tmp_path) == est.latest_checkpoint()


# ---------------------------------------------------------------- errors naming what was wrong
def test_canned_estimator_argument_errors_name_the_argument():
    cols = [tf.feature_column.numeric_column("x")]
    with pytest.raises(ValueError, match="hidden_units must be a list of positive ints.*'abc'"):
        tf.estimator.DNNClassifier("abc", cols)
    with pytest.raises(ValueError, match=r"hidden_units .*\[4, 0\]"):
        tf.estimator.DNNRegressor([4, 0], cols)
    with pytest.raises(ValueError, match=r"dnn_hidden_units .*\[4.5\]"):
        tf.estimator.DNNLinearCombinedClassifier(dnn_feature_columns=cols, dnn_hidden_units=[4.5])
    with pytest.raises(ValueError, match=r"Items of feature_columns must be a FeatureColumn.*'x'"):
        tf.estimator.LinearClassifier(["x"])
    with pytest.raises(ValueError, match=r"Items of linear_feature_columns must be a FeatureColumn"):
        tf.estimator.DNNLinearCombinedRegressor(linear_feature_columns=cols + [3])
    with pytest.raises(ValueError, match=r"feature_columns must be a list of feature columns"):
        tf.estimator.LinearRegressor(cols[0])


# ---------------------------------------------------------------- NotImplementedError at the point of use
class _FeedHook(tf.estimator.SessionRunHook):
    def before_run(self, run_context):
        return tf.estimator.SessionRunArgs(fetches=[], feed_dict={"x": 1})


def test_session_run_args_feed_dict_raises_at_the_step_naming_the_hook(tmp_path):
    est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=str(tmp_path))
    fn = lambda: ({"x": np.zeros(4, np.float32)}, np.zeros(4, np.float32))  # noqa: E731
    with pytest.raises(NotImplementedError, match=r"_FeedHook.before_run returned SessionRunArgs\(feed_dict=...\).*"
                                                  r"instead: put the values in the input_fn's features"):
        est.train(fn, steps=1, hooks=[_FeedHook()])


@pytest.mark.parametrize("use,symbol,alternative", [
    (lambda m: m.save("/nonexistent/m"), "tf.keras.Sequential.save", "get_weights()"),
    (lambda m: m.save_weights("/nonexistent/w"), "tf.keras.Sequential.save_weights", "set_weights()"),
    (lambda m: tf.keras.models.load_model("/nonexistent/m"), "tf.keras.models.load_model", "set_weights()"),
    (lambda m: m.fit(np.zeros((4, 2), np.float32), np.zeros(4, np.int32), callbacks=[object()], verbose=0),
     "tf.keras.Sequential.fit(callbacks=...)", "fit(epochs=1) in a loop"),
    (lambda m: tf.keras.callbacks.EarlyStopping, "tf.keras.callbacks.EarlyStopping", "fit(epochs=1) in a loop"),
    (lambda m: tf.data.Dataset.choose_from_datasets, "tf.data.Dataset.choose_from_datasets", "from_tensor_slices"),
    (lambda m: tf.data.Dataset.from_tensor_slices(np.zeros((4, 2), np.float32)).padded_batch(2),
     "tf.data.Dataset.padded_batch", "batch"),
    (lambda m: tf.sparse.to_dense, "tf.sparse.to_dense", "VarLenFeatures"),
    (lambda m: tf.sparse.reduce_sum, "tf.sparse.reduce_sum", "VarLenFeatures"),
    (lambda m: tf.distribute.experimental.ParameterServerStrategy, "tf.distribute", "every task of the TF_CONFIG"),
    (lambda m: tf.compat.v1.train.Server, "tf.compat.v1.train.Server", "in the ps task too"),
    (lambda m: tf.summary.scalar, "tf.summary", "tf.compat.v1.summary.scalar"),
])
def test_unsupported_symbols_name_the_symbol_and_the_alternative(use, symbol, alternative):
    m = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(2,))])
    m.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    with pytest.raises(NotImplementedError) as e:
        use(m)
    assert symbol in str(e.value) and "instead" in str(e.value) and alternative in str(e.value), str(e.value)


# ---------------------------------------------------------------- math, array and nn ops against numpy
_A = np.array([[0.5, -1.5, 2.0], [-0.25, 3.0, -2.5]], np.float32)
_B = np.array([[1.0, 0.5], [-2.0, 1.5], [0.25, -1.0]], np.float32)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _lsm(x):
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


OPS = [
    ("matmul", lambda a, b: tf.matmul(a, b), lambda a, b: a @ b),
    ("matmul_t", lambda a, b: tf.matmul(b, a, transpose_a=True, transpose_b=True), lambda a, b: (a @ b).T),
    ("transpose", lambda a, b: tf.transpose(a), lambda a, b: a.T),
    ("stack", lambda a, b: tf.stack([a, a * 2.0], axis=1), lambda a, b: np.stack([a, a * 2], 1)),
    ("tile", lambda a, b: tf.tile(a, [2, 1]), lambda a, b: np.tile(a, (2, 1))),
    ("gather", lambda a, b: tf.gather(a, [2, 0], axis=1), lambda a, b: a[:, [2, 0]]),
    ("one_hot", lambda a, b: tf.one_hot(tf.argmax(a, 1), 3, on_value=2.0, off_value=-1.0),
     lambda a, b: np.where(np.eye(3)[a.argmax(1)] > 0, 2.0, -1.0)),
    ("where", lambda a, b: tf.where(tf.greater(a, 0.0), a, tf.zeros_like(a)), lambda a, b: np.maximum(a, 0)),
    ("clip", lambda a, b: tf.clip_by_value(a, -1.0, 1.0), lambda a, b: np.clip(a, -1, 1)),
    ("ones_like", lambda a, b: tf.ones_like(a), lambda a, b: np.ones_like(a)),
    ("sigmoid", lambda a, b: tf.math.sigmoid(a), lambda a, b: _sig(a)),
    ("tanh", lambda a, b: tf.tanh(a), lambda a, b: np.tanh(a)),
    ("negative_sign", lambda a, b: tf.negative(tf.sign(a)), lambda a, b: -np.sign(a)),
    ("floor_ceil", lambda a, b: tf.floor(a) + tf.math.ceil(a), lambda a, b: np.floor(a) + np.ceil(a)),
    ("round", lambda a, b: tf.round(a), lambda a, b: np.round(a)),  # half to even, as TF
    ("reciprocal", lambda a, b: tf.math.reciprocal(a), lambda a, b: 1 / a),
    ("log1p_rsqrt", lambda a, b: tf.math.log1p(tf.abs(a)) + tf.math.rsqrt(tf.abs(a)),
     lambda a, b: np.log1p(abs(a)) + 1 / np.sqrt(abs(a))),
    ("compare", lambda a, b: tf.cast(tf.logical_and(tf.not_equal(a, 2.0), tf.greater_equal(a, 0.5)), tf.float32)
     + tf.cast(tf.logical_or(tf.less_equal(a, -2.5), tf.logical_not(tf.less_equal(a, 2.5))), tf.float32),
     lambda a, b: ((a != 2) & (a >= 0.5)).astype(np.float32) + ((a <= -2.5) | (a > 2.5)).astype(np.float32)),
    ("reduce_prod", lambda a, b: tf.reduce_prod(a, axis=1), lambda a, b: a.prod(1)),
    ("reduce_prod_all", lambda a, b: tf.reduce_prod(a), lambda a, b: a.prod()),
    ("logsumexp", lambda a, b: tf.reduce_logsumexp(a, axis=0, keepdims=True),
     lambda a, b: np.log(np.exp(a).sum(0, keepdims=True))),
    ("argmin", lambda a, b: tf.argmin(a, axis=1), lambda a, b: a.argmin(1)),
    ("log_softmax", lambda a, b: tf.nn.log_softmax(a), lambda a, b: _lsm(a)),
    ("sigmoid_xent", lambda a, b: tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(tf.greater(a, 0.0),
                                                                                          tf.float32), logits=a),
     lambda a, b: np.maximum(a, 0) - a * (a > 0) + np.log1p(np.exp(-abs(a)))),
    ("softmax_xent", lambda a, b: tf.nn.softmax_cross_entropy_with_logits(tf.nn.softmax(a * 0.5), a),
     lambda a, b: -(np.exp(_lsm(a * 0.5)) * _lsm(a)).sum(1)),
    ("l2_normalize", lambda a, b: tf.nn.l2_normalize(a, axis=1),
     lambda a, b: a / np.sqrt((a * a).sum(1, keepdims=True))),
    ("bias_add", lambda a, b: tf.nn.bias_add(a, tf.reduce_sum(b, axis=1)), lambda a, b: a + b.sum(1)),
    ("l2_loss", lambda a, b: tf.nn.l2_loss(a), lambda a, b: (a * a).sum() / 2),
]


@pytest.mark.parametrize("name,build,ref", OPS, ids=[o[0] for o in OPS])
def test_ops_match_numpy(name, build, ref):
    g = loom.Graph()
    a = g.placeholder(np.float32, _A.shape, "a")
    b = g.placeholder(np.float32, _B.shape, "b")
    got = loom.Session(g).run([build(a, b)], {a: _A, b: _B})[0]
    np.testing.assert_allclose(got, ref(_A, _B), rtol=1e-5, atol=1e-6)


def test_op_arguments_loom_lacks_raise_naming_them():
    g = loom.Graph()
    a = g.placeholder(np.float32, _A.shape, "a")
    with pytest.raises(NotImplementedError, match=r"tf.where\(condition\) without x and y"):
        tf.where(tf.greater(a, 0.0))
    with pytest.raises(NotImplementedError, match=r"tf.nn.softmax\(axis=0\): the last axis only"):
        tf.nn.softmax(a, axis=0)
    with pytest.raises(NotImplementedError, match=r"tf.gather\(batch_dims=...\)"):
        tf.gather(a, [0], batch_dims=1)


def test_surface_page_leaves_out_loom_tf_helpers():
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "tf-surface.md")).read()
    for name in ("## `tf.math_ops`", "activation_name", "op_seed", "from_loom", "`FEATURES`"):
        assert name not in doc, name
    for sym in ("`MomentumOptimizer(learning_rate, momentum, use_locking=False, name='Momentum', "
                "use_nesterov=False)`", "`latest_checkpoint(checkpoint_dir, latest_filename=None)`",
                "`auc(labels, predictions, weights=None, num_thresholds=200,", "## `tf.compat.v1.summary`"):
        assert sym in doc, sym


def test_leaky_relu_and_gelu_take_tf_arguments():
    g = loom.Graph()
    a = g.placeholder(np.float32, _A.shape, "a")
    got = loom.Session(g).run([tf.nn.leaky_relu(a, 0.1), tf.nn.leaky_relu(a), tf.nn.gelu(a, approximate=True),
                               tf.nn.gelu(a)], {a: _A})
    np.testing.assert_allclose(got[0], np.where(_A > 0, _A, 0.1 * _A), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.where(_A > 0, _A, 0.2 * _A), rtol=1e-6)
    tanh_gelu = 0.5 * _A * (1 + np.tanh(np.sqrt(2 / np.pi) * (_A + 0.044715 * _A ** 3)))
    np.testing.assert_allclose(got[2], tanh_gelu, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[3], tanh_gelu, rtol=1e-7, atol=0)  # the exact one by default, as TF
    # as an activation_fn they are still names loom's canned models take: the function and its name train alike
    x = np.linspace(-2, 2, 40, dtype=np.float32).reshape(-1, 1)
    y = (x[:, 0] > 0.3).astype(np.int64)
    w = []
    for act in (tf.nn.leaky_relu, "leaky_relu", tf.nn.relu):
        est = tf.estimator.DNNClassifier([3], [tf.feature_column.numeric_column("x")], activation_fn=act,
                                         config=tf.estimator.RunConfig(tf_random_seed=3))
        est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(40), steps=20)
        w.append(est.get_variable_value("dnn/logits/kernel"))
    np.testing.assert_array_equal(w[0], w[1])
    assert not np.array_equal(w[0], w[2])


def test_compat_v1_logging_writes_to_tfs_logger_at_its_verbosity(caplog):
    import logging
    assert tf.get_logger() is logging.getLogger("tensorflow")
    old = tf.compat.v1.logging.get_verbosity()
    try:
        tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
        with caplog.at_level(logging.NOTSET):
            tf.compat.v1.logging.info("not shown")
            tf.compat.v1.logging.warning("shown %d", 1)
            tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
            tf.compat.v1.logging.info("now shown")
            tf.compat.v1.logging.error("error")
        msgs = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "tensorflow"]
        assert msgs == [("WARNING", "shown 1"), ("INFO", "now shown"), ("ERROR", "error")]
    finally:
        tf.compat.v1.logging.set_verbosity(old)


# ---------------------------------------------------------------- batch normalization and UPDATE_OPS
def _bn_model_fn(features, labels, mode, params):
    training = mode == tf.estimator.ModeKeys.TRAIN
    h = tf.compat.v1.layers.batch_normalization(features["x"], momentum=0.5, training=training, name="bn")
    pred = tf.compat.v1.layers.dense(h, 1, name="out")
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"h": h})
    loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
    opt = tf.compat.v1.train.GradientDescentOptimizer(0.0)  # only the moving statistics change
    if params["update"]:
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            train_op = opt.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    else:
        train_op = opt.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


@pytest.mark.parametrize("update", [True, False])
def test_batch_normalization_moving_statistics_follow_update_ops(tmp_path, update):
    """TF's pattern: the moving mean / variance move only when the train op
    depends on GraphKeys.UPDATE_OPS (moving = moving * momentum + batch * (1 -
    momentum) per step, biased batch variance); prediction normalizes with them."""
    x = np.array([[1.0, 10.0], [3.0, 14.0], [5.0, 12.0], [7.0, 20.0]], np.float32)
    y = np.zeros((4, 1), np.float32)
    est = tf.estimator.Estimator(_bn_model_fn, model_dir=str(tmp_path), params={"update": update})
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(4).repeat(), steps=2)
    mm, mv = est.get_variable_value("bn/moving_mean"), est.get_variable_value("bn/moving_variance")
    if update:
        np.testing.assert_allclose(mm, 0.75 * x.mean(0), rtol=1e-5)  # two steps from 0 with momentum 0.5
        np.testing.assert_allclose(mv, 0.25 + 0.75 * x.var(0), rtol=1e-5)  # from 1
    else:
        np.testing.assert_allclose(mm, [0, 0])
        np.testing.assert_allclose(mv, [1, 1])
    assert {"bn/gamma", "bn/beta"} <= set(est.get_variable_names())
    h = np.array([p["h"] for p in est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": x}).batch(4))])
    np.testing.assert_allclose(h, (x - mm) / np.sqrt(mv + 1e-3), rtol=1e-4, atol=1e-5)


def test_group_and_collections_outside_update_ops_raise():
    with pytest.raises(NotImplementedError, match="get_collection.'summaries'.*reads GraphKeys.UPDATE_OPS"):
        tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
    with pytest.raises(NotImplementedError, match="batch_normalization.renorm=...."):
        g = loom.Graph()
        tf.compat.v1.layers.batch_normalization(g.placeholder(np.float32, [2, 2], "x"), renorm=True)


# ---------------------------------------------------------------- EstimatorSpec.export_outputs
def _export_model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2, name="out")
    probs = tf.nn.softmax(logits)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"probs": probs, "logits": logits}, export_outputs={
            "serving_default": tf.estimator.export.PredictOutput({"p": probs}),
            "scores": tf.estimator.export.ClassificationOutput(scores=probs),
            "first": tf.estimator.export.RegressionOutput(tf.reshape(tf.gather(logits, [0], axis=1), [-1]))})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.GradientDescentOptimizer(
        0.1).minimize(loss, global_step=tf.compat.v1.train.get_global_step()))


def test_export_outputs_are_the_exported_signatures(tmp_path):
    """export_outputs name the signatures. Over a parsing receiver (one string
    tensor of serialized tf.Example) every kind is exported; over raw
    placeholders the classify / regress ones are left out, as TF leaves out
    what it cannot build there."""
    est = tf.estimator.Estimator(_export_model_fn, model_dir=str(tmp_path / "m"))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(10), steps=3)
    preds = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X[:5]}).batch(5)))
    probs, first = np.stack([p["probs"] for p in preds]), np.stack([p["logits"][0] for p in preds])
    spec = {"x": tf.io.FixedLenFeature([3], tf.float32)}
    path = est.export_saved_model(str(tmp_path / "parsing"),
                                  tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    sigs = tf.saved_model.load(path.decode()).signatures
    assert set(sigs) == {"serving_default", "scores", "first"}
    rows = tf.constant([tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=r))})).SerializeToString() for r in X[:5]])
    out = sigs["serving_default"](examples=rows)
    assert set(out) == {"p"}
    np.testing.assert_allclose(out["p"].numpy(), probs, rtol=1e-5)
    np.testing.assert_allclose(sigs["scores"](inputs=rows)["scores"].numpy(), probs, rtol=1e-5)
    np.testing.assert_allclose(sigs["first"](inputs=rows)["outputs"].numpy(), first, rtol=1e-5)
    ph = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    path = est.export_saved_model(str(tmp_path / "raw"),
                                  tf.estimator.export.build_raw_serving_input_receiver_fn({"x": ph}))
    sigs = tf.saved_model.load(path.decode()).signatures
    assert set(sigs) == {"serving_default"}
    np.testing.assert_allclose(sigs["serving_default"](x=tf.constant(X[:5]))["p"].numpy(), probs, rtol=1e-5)


def test_export_outputs_errors_are_tfs():
    with pytest.raises(ValueError, match="At least one of `scores` and `classes`"):
        tf.estimator.export.ClassificationOutput()
    with pytest.raises(ValueError, match="Regression output value must be a Tensor"):
        tf.estimator.export.RegressionOutput(np.zeros(3))


# ---------------------------------------------------------------- input_layer / linear_model in a model_fn
_RS = np.random.RandomState(0)
_FX = _RS.rand(60, 2).astype(np.float32)
_FC = _RS.choice(["a", "b", "c"], 60)
_FY = ((_FX.sum(1) > 1) ^ (_FC == "a")).astype(np.int32)


def _vocab():
    return tf.feature_column.categorical_column_with_vocabulary_list("c", ["a", "b", "c"])


def _fc_model_fn(features, labels, mode, params):
    if mode == tf.estimator.ModeKeys.PREDICT:
        dense = tf.compat.v1.feature_column.input_layer(features, [tf.feature_column.numeric_column("x", shape=[2]),
                                                                   tf.feature_column.indicator_column(_vocab())])
        return tf.estimator.EstimatorSpec(mode, predictions={"dense": dense})
    net = tf.compat.v1.feature_column.input_layer(features, params["cols"])
    logits = tf.compat.v1.layers.dense(tf.compat.v1.layers.dense(net, 8, activation=tf.nn.relu), 2) + \
        tf.compat.v1.feature_column.linear_model(features, [_vocab()], units=2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))})
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.AdamOptimizer(0.05).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step()))


def test_input_layer_and_linear_model_in_a_model_fn(tmp_path):
    cols = [tf.feature_column.numeric_column("x", shape=[2]), tf.feature_column.embedding_column(_vocab(), 2)]
    # seeded: one unlucky random start (in a fresh-clone run) left the 8-unit relu layer at 0.8
    est = tf.estimator.Estimator(_fc_model_fn, model_dir=str(tmp_path), params={"cols": cols},
                                 config=tf.estimator.RunConfig(tf_random_seed=1))
    fn = lambda: tf.data.Dataset.from_tensor_slices(({"x": _FX, "c": _FC}, _FY)).batch(20)  # noqa: E731
    est.train(lambda: fn().repeat(), steps=200)
    assert est.evaluate(fn)["accuracy"] > 0.9  # needs the categorical column: x alone is at chance
    names = set(est.get_variable_names())
    assert {"input_layer/c_embedding/embedding_weights", "linear_model/c/weights",
            "linear_model/bias_weights"} <= names  # TF's variable names
    got = np.stack([p["dense"] for p in est.predict(lambda: tf.data.Dataset.from_tensor_slices(
        {"x": _FX[:6], "c": _FC[:6]}).batch(6))])
    onehot = (_FC[:6, None] == np.array(["a", "b", "c"])).astype(np.float32)
    np.testing.assert_allclose(got, np.concatenate([onehot, _FX[:6]], 1))  # columns sorted by name, as TF


def test_input_layer_names_the_missing_key(tmp_path):
    def model_fn(features, labels, mode):
        net = tf.compat.v1.feature_column.input_layer(features, [tf.feature_column.numeric_column("z")])
        loss = tf.reduce_mean(net)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.GradientDescentOptimizer(
            0.1).minimize(loss, global_step=tf.compat.v1.train.get_global_step()))
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"input_layer.*column z.*feature key \"z\" is not in the features"):
        est.train(lambda: ({"x": _FX}, _FY), steps=1)


# ---------------------------------------------------------------- early stopping
L._d("loom_event_writer_new", L.vp, L.cs, L.cs, L.vp)
L._d("loom_event_writer_add_scalar", L.cint, L.vp, L.cs, L.dbl, L.i64, L.vp)
L._d("loom_event_writer_free", None, L.vp)


def _write_eval_events(d, rows):
    os.makedirs(d, exist_ok=True)
    w = L.lib.loom_event_writer_new(d.encode(), None, None)
    for step, loss in rows:
        assert L.lib.loom_event_writer_add_scalar(w, b"loss", loss, step, None) == 0
    L.lib.loom_event_writer_free(w)


def _linear(tmp_path):
    return tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=str(tmp_path / "m"))


def _xy():
    return tf.data.Dataset.from_tensor_slices(({"x": np.arange(8, dtype=np.float32)},
                                               np.arange(8, dtype=np.float32))).batch(4)


def test_read_eval_metrics_reads_what_evaluate_wrote(tmp_path):
    est = _linear(tmp_path)
    est.train(lambda: _xy().repeat(), steps=10)
    m10 = est.evaluate(_xy)
    est.train(lambda: _xy().repeat(), steps=10)
    m20 = est.evaluate(_xy)
    got = tf.estimator.experimental.read_eval_metrics(est.eval_dir())
    assert list(got) == [10, 20]
    np.testing.assert_allclose([got[10]["loss"], got[20]["loss"]], [m10["loss"], m20["loss"]], rtol=1e-6)
    assert est.eval_dir() == os.path.join(est.model_dir, "eval")
    assert est.eval_dir("val") == os.path.join(est.model_dir, "eval_val")


@pytest.mark.parametrize("make,stops", [
    (lambda e, d: tf.estimator.experimental.stop_if_no_decrease_hook(e, "loss", 20, eval_dir=d, run_every_secs=None,
                                                                     run_every_steps=1), True),
    (lambda e, d: tf.estimator.experimental.stop_if_no_decrease_hook(e, "loss", 25, eval_dir=d, run_every_secs=None,
                                                                     run_every_steps=1), False),
    (lambda e, d: tf.estimator.experimental.stop_if_no_decrease_hook(e, "loss", 20, eval_dir=d, min_steps=25,
                                                                     run_every_secs=None, run_every_steps=1), False),
    (lambda e, d: tf.estimator.experimental.stop_if_lower_hook(e, "loss", 0.55, eval_dir=d, run_every_secs=None,
                                                               run_every_steps=1), True),
    (lambda e, d: tf.estimator.experimental.stop_if_higher_hook(e, "loss", 1.0, eval_dir=d, run_every_secs=None,
                                                                run_every_steps=1), False),
    (lambda e, d: tf.estimator.experimental.stop_if_no_increase_hook(e, "loss", 10, eval_dir=d,
                                                                     run_every_secs=None, run_every_steps=1), True),
    (lambda e, d: tf.estimator.experimental.make_early_stopping_hook(e, lambda: True, run_every_secs=None,
                                                                     run_every_steps=1), True),
])
def test_early_stopping_hooks_follow_tfs_rules(tmp_path, make, stops):
    """eval losses 1.0 @10, 0.5 @20, 0.6 @30, 0.7 @40: the loss last decreased at
    step 20, 20 steps before the last evaluation; it increased last at 40."""
    d = str(tmp_path / "evals")
    _write_eval_events(d, [(10, 1.0), (20, 0.5), (30, 0.6), (40, 0.7)])
    est = _linear(tmp_path)
    est.train(lambda: _xy().repeat(), steps=6, hooks=[make(est, d)])
    assert est.latest_checkpoint().endswith("model.ckpt-%d" % (1 if stops else 6))


def test_early_stopping_hook_arguments_are_checked_as_tf(tmp_path):
    est = _linear(tmp_path)
    with pytest.raises(ValueError, match="Only one of `run_every_secs` and `run_every_steps`"):
        tf.estimator.experimental.stop_if_higher_hook(est, "loss", 1.0, run_every_steps=10)
    with pytest.raises(TypeError, match="`estimator` must have type"):
        tf.estimator.experimental.make_early_stopping_hook(object(), lambda: True)


# ---------------------------------------------------------------- indexing, scopes and small graph builders
@pytest.mark.parametrize("index", [
    (slice(None), 0), (0,), (slice(None), slice(1, 3)), (Ellipsis, -1), (slice(None), None, 2),
    (slice(1, None),), (-1, slice(None, -1)),
], ids=str)
def test_tensor_indexing_matches_numpy(index):
    g = loom.Graph()
    a = g.placeholder(np.float32, [2, 3], "a")
    got = loom.Session(g).run([a[index]], {a: _A})[0]
    np.testing.assert_array_equal(got, _A[index])


def test_tensor_indexing_with_an_unknown_batch_dim():
    g = loom.Graph()
    a = g.placeholder(np.float32, [None, 3], "a")
    col = a[:, 1]
    assert col.shape == (None,)
    np.testing.assert_array_equal(loom.Session(g).run([col], {a: _A})[0], _A[:, 1])
    with pytest.raises(NotImplementedError, match="step"):
        a[::2]


def test_variable_scope_dropout_shape_zeros_range_in_a_model_fn(tmp_path):
    seen = {}

    def model_fn(features, labels, mode):
        x = features["x"]
        with tf.compat.v1.variable_scope("tower"):
            with tf.name_scope("ns"):  # op names only, as TF's
                h = tf.compat.v1.layers.dense(x, 4)
                seen["op"] = h.name
        with tf.compat.v1.variable_scope("tower", reuse=tf.compat.v1.AUTO_REUSE):
            h2 = tf.compat.v1.layers.dense(x, 4, name="dense")  # the same variables
        d = tf.nn.dropout(tf.ones([1000]), rate=0.5, seed=3)
        loss = tf.reduce_mean(tf.square(h - h2)) + tf.reduce_mean(tf.compat.v1.layers.dense(x, 1))
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={
                "shape": tf.expand_dims(tf.shape(x), 0) + tf.zeros([1, 2], tf.int32),
                "range": tf.expand_dims(tf.range(2, 10, 4), 0) + tf.zeros([1, 2], tf.int32),
                "drop": tf.expand_dims(d, 0) + tf.zeros([1, 1000]), "diff": tf.expand_dims(h - h2, 0)})
        seen["ok"] = True
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.GradientDescentOptimizer(
            0.1).minimize(loss, global_step=tf.compat.v1.train.get_global_step()))
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(lambda: ({"x": _A}, np.zeros(2, np.float32)), steps=1)
    names = est.get_variable_names()
    assert "tower/dense/kernel" in names and not any(n.startswith("tower_1/") or "ns/" in n for n in names)
    assert seen["op"].startswith("tower/ns/dense/"), seen["op"]
    p = next(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": _A}).batch(2),
                         yield_single_examples=False))
    assert p["shape"].tolist() == [[2, 3]] and p["range"].tolist() == [[2, 6]]
    np.testing.assert_array_equal(p["diff"], 0)
    drop = p["drop"][0]
    assert set(np.unique(drop)) <= {0.0, 2.0} and 300 < (drop == 2.0).sum() < 700  # kept ones scaled by 1/(1-rate)


def test_expand_dims_and_squeeze_with_an_unknown_batch_dim():
    g = loom.Graph()
    a = g.placeholder(np.float32, [None, 3], "a")
    e = tf.expand_dims(a, 1)
    s = tf.squeeze(e, axis=1)
    assert e.shape == (None, 1, 3) and s.shape == (None, 3)
    got = loom.Session(g).run([e, s], {a: _A})
    np.testing.assert_array_equal(got[0], _A[:, None, :])
    np.testing.assert_array_equal(got[1], _A)


def test_get_variable_initializers_and_embedding_lookup(tmp_path):
    ids = np.array([2, 0, 2, 1], np.int32)

    def model_fn(features, labels, mode):
        with tf.compat.v1.variable_scope("emb"):
            table = tf.compat.v1.get_variable("table", [3, 2], initializer=tf.compat.v1.constant_initializer(0.5))
        bias = tf.compat.v1.get_variable("bias", [2], initializer=tf.compat.v1.zeros_initializer())
        w = tf.compat.v1.get_variable("w", [2, 1])  # TF's default: glorot_uniform
        rows = tf.nn.embedding_lookup(table, features["ids"]) + bias
        loss = tf.reduce_mean(tf.square(tf.matmul(rows, w) - labels))
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"rows": rows})
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.GradientDescentOptimizer(
            0.0).minimize(loss, global_step=tf.compat.v1.train.get_global_step()))
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), config=tf.estimator.RunConfig(tf_random_seed=1))
    est.train(lambda: ({"ids": ids}, np.zeros((4, 1), np.float32)), steps=1)
    np.testing.assert_array_equal(est.get_variable_value("emb/table"), np.full((3, 2), 0.5, np.float32))
    np.testing.assert_array_equal(est.get_variable_value("bias"), [0, 0])
    w = est.get_variable_value("w")
    limit = np.sqrt(6 / (2 + 1))
    assert w.shape == (2, 1) and np.all(abs(w) <= limit) and np.any(w != 0)
    rows = np.stack([p["rows"] for p in est.predict(lambda: tf.data.Dataset.from_tensor_slices(
        {"ids": ids}).batch(4))])
    np.testing.assert_array_equal(rows, np.full((4, 2), 0.5, np.float32))


def test_export_savedmodel_is_tf1s_name_of_export_saved_model(tmp_path):
    est = tf.estimator.Estimator(_export_model_fn, model_dir=str(tmp_path / "m"))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(10), steps=1)
    ph = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    path = est.export_savedmodel(str(tmp_path / "e"), tf.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": ph}))
    assert isinstance(path, bytes) and os.path.isdir(path)
    # the same export as TF 2's name writes: the same files, the same serving signature
    other = est.export_saved_model(str(tmp_path / "e2"), tf.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": ph}))
    assert sorted(os.listdir(path)) == sorted(os.listdir(other)) and b"saved_model.loom" in os.listdir(path)
    with open(os.path.join(path, b"signatures.json"), "rb") as a, open(os.path.join(other, b"signatures.json"),
                                                                          "rb") as b:
        assert a.read() == b.read()


def _metric_values(build, feed):
    g = loom.Graph()
    phs = {k: g.placeholder(v.dtype, v.shape, k) for k, v in feed.items()}
    ups = build(phs)
    s = loom.Session(g)
    s.run(targets=[loom.Node(g, L.lib.loom_local_variables_initializer(g.p))])
    s.run([u for _, u in ups], {phs[k]: v for k, v in feed.items()})
    return s.run([v for v, _ in ups])


def test_more_v1_metrics_match_their_definitions():
    lab = np.array([0, 1, 2, 2, 1, 0], np.int64)
    pred = np.array([0, 2, 2, 1, 1, 0], np.int64)
    scores = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.2, 0.2, 0.6], [0.1, 0.5, 0.4], [0.3, 0.4, 0.3],
                       [0.5, 0.1, 0.4]], np.float32)
    p1 = np.array([0.9, 0.2, 0.6, 0.4, 0.8, 0.1], np.float32)
    y1 = np.array([1, 0, 1, 1, 0, 0], np.int64)
    m = tf.compat.v1.metrics
    got = _metric_values(lambda t: [
        m.mean_per_class_accuracy(t["lab"], t["pred"], 3),
        m.mean_iou(t["lab"], t["pred"], 3),
        m.precision_at_k(t["lab"], t["scores"], 1),
        m.recall_at_k(t["lab"], t["scores"], 2),
        m.precision_at_thresholds(t["y1"], t["p1"], [0.3, 0.7]),
        m.recall_at_thresholds(t["y1"], t["p1"], [0.3, 0.7]),
        m.false_positives_at_thresholds(t["y1"], t["p1"], [0.3, 0.7]),
        m.percentage_below(t["p1"], 0.5),
    ], {"lab": lab, "pred": pred, "scores": scores, "p1": p1, "y1": y1})
    per_class = [np.mean(pred[lab == c] == c) for c in range(3)]
    np.testing.assert_allclose(got[0], np.mean(per_class), rtol=1e-6)
    cm = np.zeros((3, 3))
    for a, b in zip(lab, pred):
        cm[a, b] += 1
    iou = [cm[c, c] / (cm[c].sum() + cm[:, c].sum() - cm[c, c]) for c in range(3)]
    np.testing.assert_allclose(got[1], np.mean(iou), rtol=1e-6)
    top1 = scores.argmax(1)
    np.testing.assert_allclose(got[2], np.mean(top1 == lab), rtol=1e-6)
    top2 = np.argsort(-scores, 1)[:, :2]
    np.testing.assert_allclose(got[3], np.mean([lab[i] in top2[i] for i in range(6)]), rtol=1e-6)
    for j, t in enumerate([0.3, 0.7]):
        tp, fp = ((p1 > t) & (y1 == 1)).sum(), ((p1 > t) & (y1 == 0)).sum()
        fn = ((p1 <= t) & (y1 == 1)).sum()
        np.testing.assert_allclose(got[4][j], tp / (tp + fp + 1e-7), rtol=1e-5)
        np.testing.assert_allclose(got[5][j], tp / (tp + fn + 1e-7), rtol=1e-5)
        assert got[6][j] == fp
    np.testing.assert_allclose(got[7], np.mean(p1 < 0.5), rtol=1e-6)


def test_best_exporter_event_file_pattern_is_not_silently_ignored():
    with pytest.raises(NotImplementedError, match="event_file_pattern='eval_val/\\*'"):
        tf.estimator.BestExporter(serving_input_receiver_fn=lambda: None, event_file_pattern="eval_val/*")


def test_accuracy_and_mean_take_weights():
    lab = np.array([0, 1, 1, 0], np.int64)
    pred = np.array([0, 1, 0, 1], np.int64)
    w = np.array([1.0, 2.0, 3.0, 0.0], np.float32)
    v = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    got = _metric_values(lambda t: [tf.compat.v1.metrics.accuracy(t["lab"], t["pred"], weights=t["w"]),
                                    tf.compat.v1.metrics.mean(t["v"], weights=t["w"])],
                         {"lab": lab, "pred": pred, "w": w, "v": v})
    np.testing.assert_allclose(got[0], (w * (lab == pred)).sum() / w.sum(), rtol=1e-6)
    np.testing.assert_allclose(got[1], (w * v).sum() / w.sum(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="metrics_collections"):
        g = loom.Graph()
        tf.compat.v1.metrics.mean(g.placeholder(np.float32, [2], "v"), metrics_collections=["m"])


def test_flatten_channels_first_raises_instead_of_flattening_in_another_order():
    g = loom.Graph()
    with pytest.raises(NotImplementedError, match="flatten takes channels_last only"):
        tf.compat.v1.layers.flatten(g.placeholder(np.float32, [2, 3, 4, 5], "x"), data_format="channels_first")


def test_constructing_a_sparse_tensor_raises_instead_of_misreading_tfs_arguments():
    for make in (lambda: tf.SparseTensor(indices=[[0, 0]], values=[1.0], dense_shape=[1, 2]),
                 lambda: tf.sparse.SparseTensor([[0, 0]], [1.0], [1, 2])):
        with pytest.raises(NotImplementedError, match="SparseTensor.*instead"):
            make()
    assert "SparseTensor(indices, values, dense_shape)" in open(os.path.join(
        os.path.dirname(__file__), "..", "..", "docs", "tf-surface.md")).read()


def test_a_custom_keras_layer_subclass_raises_naming_it():
    class Doubling(tf.keras.layers.Layer):
        def call(self, x):
            return x * 2
    with pytest.raises(NotImplementedError, match=r"subclass of tf.keras.layers.Layer \(Doubling\).*instead"):
        tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(2,)), Doubling()])


def test_dense_features_in_a_model_fn(tmp_path):
    def model_fn(features, labels, mode):
        net = tf.keras.layers.DenseFeatures([tf.feature_column.numeric_column("x", shape=[2]),
                                             tf.feature_column.embedding_column(_vocab(), 2)])(features)
        logits = tf.compat.v1.layers.dense(net, 2)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.AdamOptimizer(0.05).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step()))
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(lambda: ({"x": _FX, "c": _FC}, _FY), steps=2)
    assert "dense_features/c_embedding/embedding_weights" in est.get_variable_names()  # TF 2's name
    # both columns feed the layer: 2 numeric values + a 2-wide embedding
    assert est.get_variable_value("dense/kernel").shape == (4, 2)
