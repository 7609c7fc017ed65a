"""numeric_column / sequence_numeric_column normalizer_fn: a Python function
of tf ops traced into every graph that uses the column.

- DenseFeatures / input_layer / SequenceFeatures outputs against TF 2.15
  (fixtures/tf_normalizer.json, from scripts/gen_tf_normalizer_fixtures.py);
- canned estimators with a normalizer against the same estimators fed the
  data normalized by numpy with the same float32 formula: the same seed
  gives bit-identical weights, metrics, predictions and served outputs of
  the exported model (tf.saved_model.load);
- an exception inside a normalizer reaches the caller of train / evaluate /
  predict / export unchanged; a result of the wrong shape or not a tensor is
  an error naming the column."""
import json
import os

import numpy as np
import pytest

import loom
import loom.tf as tf

fc = tf.feature_column
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
with open(os.path.join(HERE, "tf_normalizer.json")) as _f:
    EXP = json.load(_f)
FEATURES = {k: np.array(v, np.float32) for k, v in EXP["features"].items()}


def fixture_columns():
    """The columns of scripts/gen_tf_normalizer_fixtures.py."""
    return [
        fc.numeric_column("x", normalizer_fn=lambda x: (x - 3.0) / 2.0),
        fc.numeric_column("v", shape=(2,), normalizer_fn=tf.math.log1p),
        fc.numeric_column("c", normalizer_fn=lambda x: tf.clip_by_value(x * 2.0, -1.0, 1.0)),
        fc.bucketized_column(fc.numeric_column("b", normalizer_fn=lambda x: x * 10.0), [0.0, 5.0, 20.0]),
    ]


def layer_output(tmp_path, layer, cols, features=FEATURES):
    """layer(features, cols) in a model_fn, predicted over one batch."""
    def input_fn():
        return tf.data.Dataset.from_tensor_slices(dict(features)).batch(len(next(iter(features.values()))))

    def model_fn(features, labels, mode):
        return tf.estimator.EstimatorSpec(mode, predictions={"out": layer(features, cols)})
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    return np.stack([p["out"] for p in est.predict(input_fn)])


LAYERS = {
    "DenseFeatures": lambda f, c: tf.keras.layers.DenseFeatures(c)(f),
    "input_layer": lambda f, c: tf.compat.v1.feature_column.input_layer(f, c),
}


# ---------------------------------------------------------------- against TF
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_dense_layers_match_tf(tmp_path, layer):
    got = layer_output(tmp_path, LAYERS[layer], fixture_columns())
    want = np.array(EXP["dense"], np.float32)
    # b_bucketized (normalized before bucketizing: -1, 3, 10, 25), c, v (log1p), x
    np.testing.assert_array_equal(got[:, :4], np.eye(4, dtype=np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    np.testing.assert_array_equal(got[:, 7], (FEATURES["x"][:, 0] - np.float32(3)) / np.float32(2))


def test_sequence_numeric_normalizer_matches_tf(tmp_path):
    path = str(tmp_path / "seq.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for r in EXP["seq"]:
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "num": tf.train.Feature(float_list=tf.train.FloatList(value=r))})).SerializeToString())
    col = fc.sequence_numeric_column("num", default_value=-1.0, normalizer_fn=lambda s: s * 0.5)
    spec = fc.make_parse_example_spec([col])

    def input_fn():
        return tf.data.TFRecordDataset(path).batch(4).map(lambda r: tf.io.parse_example(r, spec))

    def model_fn(features, labels, mode):
        seq, length = tf.keras.experimental.SequenceFeatures([col])(features)
        return tf.estimator.EstimatorSpec(mode, predictions={"seq": seq, "len": length})
    preds = list(tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "m")).predict(input_fn))
    np.testing.assert_array_equal(np.stack([p["seq"] for p in preds]), np.array(EXP["seq_dense"], np.float32))
    np.testing.assert_array_equal([p["len"] for p in preds], EXP["seq_length"])


def test_normalizer_fn_is_kept_and_checked():
    f = lambda x: x * 2.0  # noqa: E731
    assert fc.numeric_column("x", normalizer_fn=f).normalizer_fn is f
    assert fc.numeric_column("x").normalizer_fn is None
    with pytest.raises(TypeError, match="normalizer_fn must be a callable"):
        fc.numeric_column("x", normalizer_fn=3.0)
    with pytest.raises(TypeError, match="normalizer_fn must be a callable"):
        fc.sequence_numeric_column("x", normalizer_fn="log")
    # the parse spec is the raw feature's
    assert fc.make_parse_example_spec([fc.numeric_column("x", shape=(2,), default_value=1.0, normalizer_fn=f)]) == \
        {"x": tf.io.FixedLenFeature((2,), tf.float32, default_value=[1.0, 1.0])}


# ---------------------------------------------------------------- normalizer vs pre-normalized data
_RS = np.random.RandomState(3)
X = _RS.uniform(-2.0, 8.0, (48, 2)).astype(np.float32)
Y = (X @ np.array([0.5, -0.25], np.float32) + 1.0).astype(np.float32)
XN = (X - np.float32(3.0)) / np.float32(2.0)  # numpy's float32 of the normalizer's formula

ESTIMATORS = {
    "LinearRegressor": lambda cols, **kw: tf.estimator.LinearRegressor(cols, **kw),
    "DNNRegressor": lambda cols, **kw: tf.estimator.DNNRegressor([6, 4], cols, **kw),
    "DNNLinearCombinedRegressor": lambda cols, **kw: tf.estimator.DNNLinearCombinedRegressor(
        linear_feature_columns=cols, dnn_feature_columns=cols, dnn_hidden_units=[5], **kw),
    "DNNClassifier": lambda cols, **kw: tf.estimator.DNNClassifier([4], cols, n_classes=3, **kw),
}


def run_estimator(kind, col, x, tmp_path):
    """Trains with seed 7, evaluates, predicts and serves the export: (every
    variable, the metrics, the predictions, the served predictions)."""
    est = ESTIMATORS[kind]([col], model_dir=str(tmp_path / "m"), config=tf.estimator.RunConfig(tf_random_seed=7))
    y = (Y > 1.0).astype(np.int32) + (Y > 2.0) if kind == "DNNClassifier" else Y
    est.train(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=8, num_epochs=None,
                                                          shuffle=True), steps=12)
    metrics = est.evaluate(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=16, shuffle=False))
    key = "probabilities" if kind == "DNNClassifier" else "predictions"
    preds = np.stack([p[key] for p in est.predict(
        tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, batch_size=16, shuffle=False))])
    ph = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
    path = est.export_saved_model(str(tmp_path / "export"),
                                  tf.estimator.export.build_raw_serving_input_receiver_fn({"x": ph}))
    served = tf.saved_model.load(path).signatures["predict"](x=tf.constant(x))[key].numpy()
    weights = {n: est.get_variable_value(n) for n in est.get_variable_names()}
    return weights, metrics, preds, served


@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_canned_normalizer_equals_prenormalized_data(tmp_path, kind):
    normalized = fc.numeric_column("x", shape=(2,), normalizer_fn=lambda x: (x - 3.0) / 2.0)
    w1, m1, p1, s1 = run_estimator(kind, normalized, X, tmp_path / "fn")
    w2, m2, p2, s2 = run_estimator(kind, fc.numeric_column("x", shape=(2,)), XN, tmp_path / "np")
    assert sorted(w1) == sorted(w2)
    for n in w1:
        np.testing.assert_array_equal(w1[n], w2[n], err_msg=n)
    assert m1 == m2
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(s1, s2)  # the serving graph normalizes the raw x too
    np.testing.assert_allclose(s1, p1, rtol=1e-6)
    # the raw data without the normalizer trains another model (the comparison can fail)
    w3, _, p3, _ = run_estimator(kind, fc.numeric_column("x", shape=(2,)), X, tmp_path / "raw")
    assert not np.array_equal(p3, p1)


def test_linear_regressor_uses_the_normalized_value(tmp_path):
    """A LinearRegressor's prediction is w . normalizer(x) + b with its own weights."""
    col = fc.numeric_column("x", shape=(2,), normalizer_fn=lambda x: tf.math.log1p(x * x))
    est = tf.estimator.LinearRegressor([col], model_dir=str(tmp_path))
    est.train(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=None,
                                                          shuffle=False), steps=5)
    w = est.get_variable_value("linear/linear_model/x/weights")
    b = est.get_variable_value("linear/linear_model/bias_weights")
    preds = np.stack([p["predictions"] for p in est.predict(
        tf.compat.v1.estimator.inputs.numpy_input_fn({"x": X}, batch_size=48, shuffle=False))])
    np.testing.assert_allclose(preds, np.log1p(X.astype(np.float64) ** 2) @ w + b, rtol=1e-5)


def test_parsing_serving_applies_default_value_then_the_normalizer(tmp_path):
    """An exported LinearRegressor served tf.Examples: a missing x is default_value 5.0, normalized to 1.0."""
    col = fc.numeric_column("x", default_value=5.0, normalizer_fn=lambda x: (x - 3.0) / 2.0)
    est = tf.estimator.LinearRegressor([col], model_dir=str(tmp_path / "m"))
    tae = tf.estimator.train_and_evaluate(
        est, tf.estimator.TrainSpec(tf.compat.v1.estimator.inputs.numpy_input_fn(
            {"x": X[:, 0]}, Y, batch_size=8, num_epochs=None, shuffle=False), max_steps=6),
        tf.estimator.EvalSpec(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": X[:, 0]}, Y, shuffle=False)))
    assert tae[0]["global_step"] == 6
    w = est.get_variable_value("linear/linear_model/x/weights")[0, 0]
    b = est.get_variable_value("linear/linear_model/bias_weights")[0]
    assert w != 0
    path = est.export_saved_model(str(tmp_path / "e"), tf.estimator.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec([col])))
    rows = [tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[7.0]))})),
        tf.train.Example(features=tf.train.Features(feature={
            "other": tf.train.Feature(float_list=tf.train.FloatList(value=[7.0]))}))]
    out = tf.saved_model.load(path).signatures["predict"](examples=tf.constant([r.SerializeToString() for r in rows]))
    np.testing.assert_allclose(out["predictions"].numpy()[:, 0], [w * 2.0 + b, w * 1.0 + b], rtol=1e-6)


def test_native_api_normalizer(tmp_path):
    """loom.feature_column.numeric(normalizer_fn=...) with a loom.Output in, loom ops out."""
    def run(col, x, d):
        est = loom.LinearRegressor([col], model_dir=str(tmp_path / d), random_seed=1)
        est.train(lambda mode: loom.Dataset.from_tensor_slices({"x": x, "y": Y}, label="y").batch(8), steps=6)
        return est.predict(lambda mode: loom.Dataset.from_tensor_slices({"x": x}).batch(16))["predictions"]
    col = loom.feature_column.numeric("x", shape=(2,), normalizer_fn=lambda x: (x - 3.0) / 2.0)
    assert col.normalizer_fn is not None
    got = run(col, X, "a")
    np.testing.assert_array_equal(got, run(loom.feature_column.numeric("x", shape=(2,)), XN, "b"))
    assert not np.array_equal(got, run(loom.feature_column.numeric("x", shape=(2,)), X, "c"))
    with pytest.raises(TypeError, match="numeric_column 'x': normalizer_fn must be a callable"):
        loom.feature_column.numeric("x", normalizer_fn=1)
    fcs = loom.FeatureColumns()  # the set's own builder takes it too
    np.testing.assert_array_equal(got, run(fcs.numeric("x", shape=(2,), normalizer_fn=lambda x: (x - 3.0) / 2.0),
                                           X, "d"))


# ---------------------------------------------------------------- errors
class Boom(Exception):
    pass


def test_exception_in_normalizer_reaches_the_caller(tmp_path):
    state = {"fail": True, "raised": []}

    def norm(x):
        if state["fail"]:
            e = Boom("normalizer failed")
            state["raised"].append(e)
            raise e
        return x * 2.0
    est = tf.estimator.DNNRegressor([3], [fc.numeric_column("x", shape=(2,), normalizer_fn=norm)],
                                    model_dir=str(tmp_path / "m"))
    train_fn = tf.compat.v1.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=None,
                                                            shuffle=False)
    eval_fn = tf.compat.v1.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, shuffle=False)
    ph = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
    calls = {
        "evaluate": lambda: est.evaluate(eval_fn),
        "predict": lambda: list(est.predict(eval_fn)),
        "export": lambda: est.export_saved_model(str(tmp_path / "e"),
                                                 tf.estimator.export.build_raw_serving_input_receiver_fn({"x": ph})),
        "train_and_evaluate": lambda: tf.estimator.train_and_evaluate(
            est, tf.estimator.TrainSpec(train_fn, max_steps=4), tf.estimator.EvalSpec(eval_fn)),
    }
    with pytest.raises(Boom, match="normalizer failed") as info:
        est.train(train_fn, steps=2)
    assert info.value is state["raised"][-1]
    assert est.latest_checkpoint() is None
    state["fail"] = False
    est.train(train_fn, steps=2)
    state["fail"] = True
    for what, call in calls.items():
        with pytest.raises(Boom) as info:
            call()
        assert info.value is state["raised"][-1], what
    state["fail"] = False  # and the estimator still works
    assert est.evaluate(eval_fn)["global_step"] == 2


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_exception_in_normalizer_inside_a_model_fn(tmp_path, layer):
    def norm(x):
        raise Boom("in %s" % layer)
    with pytest.raises(Boom, match="in %s" % layer):
        layer_output(tmp_path, LAYERS[layer], [fc.numeric_column("x", normalizer_fn=norm)], {"x": FEATURES["x"]})


def test_exception_in_native_normalizer(tmp_path):
    def norm(x):
        raise Boom("native")
    est = loom.LinearRegressor([loom.feature_column.numeric("x", normalizer_fn=norm)], model_dir=str(tmp_path))
    with pytest.raises(Boom, match="native"):
        est.train(lambda mode: loom.Dataset.from_tensor_slices({"x": X[:, 0], "y": Y}, label="y").batch(8), steps=1)


BAD = {
    "wrong shape": (lambda x: tf.reduce_sum(x, axis=1), ValueError,
                    r"numeric_column 'x': normalizer_fn must return a tensor of its input's shape \(None, 2\), "
                    r"got shape \(None,\)"),
    "not a tensor": (lambda x: 2.0, TypeError, "numeric_column 'x': normalizer_fn must return a tensor"),
    "integer": (lambda x: tf.cast(x, tf.int32), TypeError,
                "numeric_column 'x': normalizer_fn must return a float32 tensor"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_normalizer_result_names_the_column(tmp_path, case):
    fn, err, msg = BAD[case]
    est = tf.estimator.LinearRegressor([fc.numeric_column("x", shape=(2,), normalizer_fn=fn)],
                                       model_dir=str(tmp_path))
    with pytest.raises(err, match=msg):
        est.train(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, shuffle=False), steps=1)
    with pytest.raises(err, match=msg):
        layer_output(tmp_path / "l", LAYERS["DenseFeatures"], [fc.numeric_column("x", shape=(2,), normalizer_fn=fn)],
                     {"x": X[:4]})
