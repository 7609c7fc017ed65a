"""tf.estimator.add_metrics, classifier/regressor_parse_example_spec,
export.TensorServingInputReceiver, CheckpointSaverListener and
experimental.InMemoryEvaluatorHook against TF 2.15 (fixtures/
tf_estimator_extras.json, written by scripts/gen_tf_estimator_extras_fixtures.py)
and against values computed by hand."""
import json
import os

import numpy as np
import pytest

import loom.tf as tf

FIX = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures", "tf_estimator_extras.json")))
fc = tf.feature_column


# ---------------------------------------------------------------- parse specs
def spec_json(spec):
    out = {}
    for k, v in sorted(spec.items()):
        if isinstance(v, tf.io.VarLenFeature):
            out[k] = ["var", v.dtype.name]
        else:
            d = v.default_value
            if d is not None:
                d = np.asarray(d).ravel().tolist()
            out[k] = ["fixed", list(v.shape), v.dtype.name, d]
    return out


def spec_cols():
    return [fc.numeric_column("a", shape=(2,)), fc.bucketized_column(fc.numeric_column("b"), [0.0, 1.0]),
            fc.indicator_column(fc.categorical_column_with_vocabulary_list("c", ["x", "y"])),
            fc.embedding_column(fc.categorical_column_with_hash_bucket("d", 10), 2)]


def test_parse_example_specs_equal_tfs():
    cols = spec_cols()
    got = {
        "classifier_default": tf.estimator.classifier_parse_example_spec(cols, "label"),
        "classifier_full": tf.estimator.classifier_parse_example_spec(
            cols, "label", label_dtype=tf.string, label_default="no", weight_column="w"),
        "classifier_weight_column": tf.estimator.classifier_parse_example_spec(
            cols, "label", label_default=0, weight_column=fc.numeric_column("w", default_value=1.0)),
        "regressor_default": tf.estimator.regressor_parse_example_spec(cols, "price"),
        "regressor_full": tf.estimator.regressor_parse_example_spec(
            cols, "price", label_dtype=tf.float32, label_default=[0.5, 1.5], label_dimension=2, weight_column="w"),
    }
    for case, spec in got.items():
        assert spec_json(spec) == FIX["parse_specs"][case], case


def test_parse_example_spec_errors_are_tfs():
    cols = spec_cols()
    errors = FIX["parse_specs"]["errors"]
    assert errors == {"label_in_columns": "ValueError", "weight_not_numeric": "ValueError"}
    with pytest.raises(ValueError, match="\"a\""):
        tf.estimator.classifier_parse_example_spec(cols, "a")
    with pytest.raises(ValueError, match="weight_column"):
        tf.estimator.regressor_parse_example_spec(cols, "y", weight_column=fc.categorical_column_with_identity("w", 3))


def test_parse_spec_feeds_the_parsing_receiver(tmp_path):
    """The classifier spec, minus its label, is what the parsing receiver parses for export."""
    cols = [fc.numeric_column("x", shape=(2,))]
    spec = tf.estimator.classifier_parse_example_spec(cols, "y", weight_column="w")
    assert set(spec) == {"x", "y", "w"}
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]], np.float32)
    est = tf.estimator.LinearClassifier(cols, model_dir=str(tmp_path))
    est.train(lambda: ({"x": X}, np.array([1, 0, 1, 0])), steps=2)
    feat = {k: v for k, v in spec.items() if k not in ("y", "w")}
    path = est.export_saved_model(str(tmp_path / "e"), tf.estimator.export.build_parsing_serving_input_receiver_fn(
        feat))
    assert os.path.isdir(path.decode())


# ---------------------------------------------------------------- a deterministic model (the fixture's)
X = np.array([[1.0, 2.0], [0.5, -1.0], [-1.5, 0.25], [2.0, 1.0]], np.float32)
Y = np.array([[1.0], [-0.5], [2.0], [0.0]], np.float32)


def model_fn(features, labels, mode, params=None):
    w = tf.compat.v1.get_variable("w", [2, 1], initializer=tf.compat.v1.zeros_initializer())
    b = tf.compat.v1.get_variable("b", [1], initializer=tf.compat.v1.zeros_initializer())
    pred = tf.matmul(features["x"], w) + b
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": pred})
    loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
    op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    # predictions in EVAL too when params ask (what add_metrics' metric_fn sees; TF gives {} without them)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op, predictions={"y": pred} if params else None,
                                      eval_metric_ops={"mae": tf.compat.v1.metrics.mean_absolute_error(labels, pred)})


def train_input():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(2)


def eval_input():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(2)


def est(path, params=None, **cfg):
    return tf.estimator.Estimator(model_fn, None if path is None else str(path), tf.estimator.RunConfig(**cfg),
                                  params=params)


# ---------------------------------------------------------------- CheckpointSaverListener
class Recorder(tf.estimator.CheckpointSaverListener):
    def __init__(self, stop_at=None):
        self.calls, self.stop_at = [], stop_at

    def begin(self):
        self.calls.append(["begin"])

    def before_save(self, session, global_step_value):
        self.calls.append(["before_save", int(global_step_value)])

    def after_save(self, session, global_step_value):
        self.calls.append(["after_save", int(global_step_value)])
        return self.stop_at is not None and global_step_value >= self.stop_at

    def end(self, session, global_step_value):
        self.calls.append(["end", int(global_step_value)])


def test_saving_listeners_call_sequence_equals_tfs(tmp_path):
    fix = FIX["listeners"]["train_every_3"]
    r = Recorder()
    e = est(tmp_path / "a", save_checkpoints_steps=3)
    e.train(train_input, steps=7, saving_listeners=[r])
    e.train(train_input, steps=2, saving_listeners=[r])
    assert r.calls == fix["calls"]
    assert e.get_variable_value("global_step") == fix["global_step"]


def test_after_save_true_stops_training_as_tf(tmp_path):
    fix = FIX["listeners"]["stop_at_4"]
    r = Recorder(stop_at=4)
    e = est(tmp_path / "b", save_checkpoints_steps=2)
    e.train(train_input, steps=20, saving_listeners=[r])
    assert r.calls == fix["calls"]
    assert e.get_variable_value("global_step") == fix["global_step"] == 4


def test_checkpoint_saver_hook_listeners_equal_tfs(tmp_path):
    r = Recorder()
    e = est(tmp_path / "c", save_checkpoints_steps=None, save_checkpoints_secs=None)
    e.train(train_input, steps=5, hooks=[tf.estimator.CheckpointSaverHook(str(tmp_path / "c"), save_steps=2,
                                                                          listeners=[r])])
    assert r.calls == FIX["listeners"]["hook_every_2"]["calls"]


def test_saving_listeners_errors_are_tfs(tmp_path):
    assert FIX["listeners"]["no_saver_error"] == "ValueError"
    assert FIX["listeners"]["bad_listener_error"] == "TypeError"
    e = est(tmp_path / "c", save_checkpoints_steps=None, save_checkpoints_secs=None)
    with pytest.raises(ValueError, match="CheckpointSaverHook"):
        e.train(train_input, steps=1, saving_listeners=[Recorder()])
    with pytest.raises(TypeError, match="CheckpointSaverListener"):
        est(tmp_path / "d").train(train_input, steps=1, saving_listeners=[object()])


def test_listener_exception_surfaces(tmp_path):
    class Boom(tf.estimator.CheckpointSaverListener):
        def before_save(self, session, global_step_value):
            if global_step_value == 2:
                raise RuntimeError("boom at 2")
    with pytest.raises(RuntimeError, match="boom at 2"):
        est(tmp_path, save_checkpoints_steps=2).train(train_input, steps=4, saving_listeners=[Boom()])


# ---------------------------------------------------------------- InMemoryEvaluatorHook
def eval_events(eval_dir):
    rows = []
    for step, m in _all_events(eval_dir):
        if "loss" in m:
            rows.append([step, m["loss"], m["mae"]])
    return rows


def _all_events(eval_dir):
    """(step, {tag: value}) of every event of the eval dir, in order (repeats kept)."""
    import ctypes as C
    from loom.tf.estimator import _early_stopping as es
    from loom import _Status, _b
    from loom._lib import lib
    out = []
    for f in sorted(os.listdir(eval_dir)):
        if not f.startswith("events.out.tfevents"):
            continue
        st = _Status()
        r = lib.loom_event_reader_open(_b(os.path.join(eval_dir, f)), st.p)
        ev = C.POINTER(es._Event)()
        while lib.loom_event_reader_next(r, C.byref(ev), st.p) == 0:
            e = ev.contents
            m = {e.values[i].tag.decode(): e.values[i].simple_value for i in range(e.nvalues)
                 if e.values[i].kind == 0}
            if m:
                out.append((e.step, m))
        lib.loom_event_reader_free(r)
    return out


@pytest.mark.parametrize("case,kw,steps", [("every_3_named", dict(every_n_iter=3, name="mem"), 7),
                                          ("default_steps_1", dict(steps=1), 4)])
def test_in_memory_evaluator_hook_equals_tfs(tmp_path, case, kw, steps):
    fix = FIX["in_memory"][case]
    e = est(tmp_path, save_checkpoints_steps=100)
    h = tf.estimator.experimental.InMemoryEvaluatorHook(e, eval_input, **kw)
    e.train(train_input, steps=steps, hooks=[h])
    assert e.eval_dir(kw.get("name")) == str(tmp_path / fix["eval_dir"])
    got = eval_events(e.eval_dir(kw.get("name")))
    assert [r[0] for r in got] == [r[0] for r in fix["events"]]
    np.testing.assert_allclose(np.array(got)[:, 1:], np.array(fix["events"])[:, 1:], rtol=1e-5)
    r = e.evaluate(eval_input, name="check")
    for k in ("loss", "mae", "global_step"):
        np.testing.assert_allclose(r[k], fix["evaluate"][k], rtol=1e-5)


def test_in_memory_evaluator_hook_arguments():
    with pytest.raises(ValueError, match="every_n_iter"):
        tf.estimator.experimental.InMemoryEvaluatorHook(est(None), eval_input, every_n_iter=0)
    with pytest.raises(NotImplementedError, match="hooks"):
        tf.estimator.experimental.InMemoryEvaluatorHook(est(None), eval_input, hooks=[tf.estimator.SessionRunHook()])


# ---------------------------------------------------------------- add_metrics
def test_add_metrics_on_custom_model_fn_equals_hand_computed(tmp_path):
    e = est(tmp_path, params={"eval_predictions": True})
    e.train(train_input, steps=3)

    def metric_fn(labels, predictions, features):
        return {"mean_pred": tf.compat.v1.metrics.mean(predictions["y"]),
                "rmse": tf.compat.v1.metrics.root_mean_squared_error(labels, predictions["y"]),
                "x0": tf.compat.v1.metrics.mean(features["x"][:, 0])}
    e2 = tf.estimator.add_metrics(e, metric_fn)
    assert e2.model_dir == e.model_dir
    r = e2.evaluate(eval_input)
    pred = np.array([p["y"][0] for p in e.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X}).batch(2))])
    np.testing.assert_allclose(r["mean_pred"], pred.mean(), rtol=1e-5)
    np.testing.assert_allclose(r["rmse"], np.sqrt(((pred - Y[:, 0]) ** 2).mean()), rtol=1e-5)
    np.testing.assert_allclose(r["x0"], X[:, 0].mean(), rtol=1e-6)
    base = e.evaluate(eval_input)
    np.testing.assert_allclose([r["loss"], r["mae"]], [base["loss"], base["mae"]], rtol=1e-6)
    assert r["global_step"] == 3 and "mean_pred" not in base
    e2.train(train_input, steps=1)  # trains the same model
    assert e.get_variable_value("global_step") == 4


def test_add_metrics_on_canned_estimator_and_override(tmp_path):
    cols = [fc.numeric_column("x", shape=(2,))]
    labels = np.array([1, 0, 1, 0])
    e = tf.estimator.LinearClassifier(cols, model_dir=str(tmp_path))
    e.train(lambda: ({"x": X}, labels), steps=5)

    def metric_fn(labels, predictions, config):
        assert isinstance(config, tf.estimator.RunConfig)
        return {"mean_prob": tf.compat.v1.metrics.mean(predictions["logistic"]),
                "accuracy": tf.compat.v1.metrics.mean(predictions["logistic"])}  # replaces the head's accuracy
    r = tf.estimator.add_metrics(e, metric_fn).evaluate(lambda: ({"x": X}, labels))
    probs = np.array([p["logistic"][0] for p in e.predict(lambda: {"x": X})])
    np.testing.assert_allclose(r["mean_prob"], probs.mean(), rtol=1e-5)
    np.testing.assert_allclose(r["accuracy"], probs.mean(), rtol=1e-5)
    base = e.evaluate(lambda: ({"x": X}, labels))
    np.testing.assert_allclose(base["accuracy"], ((probs > 0.5) == labels).mean())
    np.testing.assert_allclose(r["auc"], base["auc"], rtol=1e-6)


def test_add_metrics_arguments_checked_as_tf(tmp_path):
    e = est(tmp_path)
    with pytest.raises(ValueError, match="not expected args.*mode"):
        tf.estimator.add_metrics(e, lambda labels, mode: {})
    e.train(train_input, steps=1)
    with pytest.raises(TypeError, match="dict"):
        tf.estimator.add_metrics(e, lambda predictions: 3).evaluate(eval_input)


# ---------------------------------------------------------------- TensorServingInputReceiver
def test_tensor_serving_input_receiver_export_and_serve(tmp_path):
    seen = []

    def tensor_model_fn(features, labels, mode):
        seen.append(type(features).__name__)
        pred = tf.compat.v1.layers.dense(features, 1, name="d")
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"y": pred})
        loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
        op = tf.compat.v1.train.GradientDescentOptimizer(0.05).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op)
    e = tf.estimator.Estimator(tensor_model_fn, str(tmp_path))
    e.train(lambda: tf.data.Dataset.from_tensor_slices((X, Y)).repeat().batch(2), steps=2)

    def receiver_fn():
        ph = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        return tf.estimator.export.TensorServingInputReceiver(ph, ph)
    path = e.export_saved_model(str(tmp_path / "export"), receiver_fn)
    sig = tf.saved_model.load(path.decode()).signatures["serving_default"]
    out = sig(input=tf.constant(X))["y"].numpy()
    k = e.get_variable_value("d/kernel")
    b = e.get_variable_value("d/bias")
    np.testing.assert_allclose(out, X @ k + b, rtol=1e-5)
    assert "dict" not in seen


def test_tensor_serving_input_receiver_arguments():
    ph = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
    r = tf.estimator.export.TensorServingInputReceiver(ph, {"rows": ph})
    assert r.features is ph and r.receiver_tensors == {"rows": ph}
    assert tf.estimator.export.TensorServingInputReceiver(ph, ph).receiver_tensors == {"input": ph}
    with pytest.raises(ValueError, match="features must be defined"):
        tf.estimator.export.TensorServingInputReceiver(None, ph)
    with pytest.raises(ValueError, match="Tensor"):
        tf.estimator.export.TensorServingInputReceiver({"x": ph}, ph)


def test_checkpoint_saver_hook_with_listeners_as_a_training_chief_hook(tmp_path):
    r = Recorder()

    def chief_model_fn(features, labels, mode):
        spec = model_fn(features, labels, mode)
        if mode == tf.estimator.ModeKeys.TRAIN:
            spec.training_chief_hooks = [tf.estimator.CheckpointSaverHook(str(tmp_path / "own"), save_steps=2,
                                                                          listeners=[r])]
        return spec
    e = tf.estimator.Estimator(chief_model_fn, str(tmp_path / "m"),
                               tf.estimator.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None))
    e.train(train_input, steps=5)
    assert r.calls == FIX["listeners"]["hook_every_2"]["calls"]
    assert os.path.exists(str(tmp_path / "own" / "model.ckpt-4")) or \
        any(f.startswith("model.ckpt-4") for f in os.listdir(str(tmp_path / "own")))


def test_train_spec_saving_listeners_in_train_and_evaluate(tmp_path):
    r = Recorder()
    e = est(tmp_path, save_checkpoints_steps=3)
    metrics, _ = tf.estimator.train_and_evaluate(
        e, tf.estimator.TrainSpec(train_input, max_steps=7, saving_listeners=[r]),
        tf.estimator.EvalSpec(eval_input, steps=None, start_delay_secs=0, throttle_secs=0))
    # TF's train_and_evaluate trains with these listeners, as train(saving_listeners=...) up to step 7
    assert r.calls == FIX["listeners"]["train_every_3"]["calls"][:10]
    assert metrics["global_step"] == 7
    with pytest.raises(TypeError, match="CheckpointSaverListener"):
        tf.estimator.TrainSpec(train_input, saving_listeners=[object()])
