import os

import numpy as np
import pytest

import loom

IRIS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv"  # Debian python3-sklearn


def load_iris():
    if not os.path.exists(IRIS):
        pytest.skip("iris.csv not found (Debian package python3-sklearn)")
    d = np.loadtxt(IRIS, delimiter=",", skiprows=1)
    return d[:, :4].astype(np.float32), d[:, 4].astype(np.int32)


def split_iris():
    X, y = load_iris()
    idx = np.random.default_rng(42).permutation(len(y))
    return X[idx[:120]], y[idx[:120]], X[idx[120:]], y[idx[120:]]


def test_dnn_classifier_on_iris_and_predictor_equals_predict(tmp_path):
    Xtr, ytr, Xte, yte = split_iris()
    fc = loom.FeatureColumns()
    x = fc.numeric("x", shape=(4,))
    est = loom.DNNClassifier(hidden_units=[16, 8], feature_columns=[x], n_classes=3, model_dir=str(tmp_path / "m"),
                             learning_rate=0.1, random_seed=7, save_summary_steps=0, num_threads=1)

    def train_in(mode):
        return loom.Dataset.from_tensor_slices({"x": Xtr, "label": ytr}, label="label") \
            .shuffle(120, seed=1).repeat().batch(16)

    def eval_in(mode):
        return loom.Dataset.from_tensor_slices({"x": Xte, "label": yte}, label="label").batch(30)

    est.train(train_in, steps=1000)
    r = est.evaluate(eval_in)
    assert r["global_step"] == 1000
    assert r["accuracy"] >= 0.9, r  # iris, 30 held-out rows
    assert r["loss"] < 0.4, r

    preds = est.predict(lambda mode: loom.Dataset.from_tensor_slices({"x": Xte}).batch(7))
    assert preds["probabilities"].shape == (30, 3)
    np.testing.assert_allclose(preds["probabilities"].sum(1), 1, rtol=1e-5)
    acc = (preds["class_ids"].ravel() == yte).mean()
    assert abs(acc - r["accuracy"]) < 1e-6
    # the hidden layer is TF's variable
    assert est.get_variable_value("dnn/hiddenlayer_0/kernel").shape == (4, 16)

    # the resident predictor over the export gives the same numbers
    path = est.export(tmp_path / "export", {"x": (np.float32, (None, 4))})
    p = loom.Predictor(path)
    # classify signatures need a string (tf.Example) receiver: serving_default is predict's twin
    assert p.signatures == ["serving_default", "predict"]
    assert p.output_keys("serving_default") == p.output_keys("predict")
    assert p.input_spec("predict")["x"] == (np.float32, (None, 4))
    keys = p.output_keys("predict")
    assert "probabilities" in keys
    out = p.predict({"x": Xte.astype(np.float64)}, signature="predict")  # converted to float32
    np.testing.assert_allclose(out["probabilities"], preds["probabilities"], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(out["class_ids"].ravel(), preds["class_ids"].ravel())
    with pytest.raises(ValueError):
        p.predict({"nope": Xte}, signature="predict")
    with pytest.raises(loom.LoomError) as e:
        p.predict({"x": Xte[:, :3]}, signature="predict")
    assert "x" in str(e.value)


def test_python_model_fn_learns_linear_regression(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(512, 2)).astype(np.float32)
    Y = (X @ np.array([[3.0], [-2.0]], np.float32) + 0.5).astype(np.float32)
    calls = []

    def model_fn(g, features, labels, mode, params):
        calls.append(mode)
        w = g.variable("w", (2, 1), initializer=0.0)
        b = g.variable("b", (1,), initializer=0.0)
        pred = features["x"] @ w + b
        if mode == loom.ModeKeys.PREDICT:
            return loom.EstimatorSpec(mode, predictions={"y": pred})
        loss = g.mean_squared_error(labels, pred)
        train = g.minimize(loss, "sgd", params["lr"]) if mode == loom.ModeKeys.TRAIN else None
        return loom.EstimatorSpec(mode, loss=loss, train_op=train, predictions={"y": pred})

    est = loom.Estimator(model_fn, model_dir=str(tmp_path), params={"lr": 0.1}, save_summary_steps=0)
    data = lambda mode: loom.Dataset.from_tensor_slices({"x": X, "y": Y}, label="y").repeat().batch(64)
    est.train(data, steps=300)
    np.testing.assert_allclose(est.get_variable_value("w").ravel(), [3.0, -2.0], atol=1e-3)
    np.testing.assert_allclose(est.get_variable_value("b"), [0.5], atol=1e-3)
    r = est.evaluate(lambda mode: loom.Dataset.from_tensor_slices({"x": X, "y": Y}, label="y").batch(128))
    assert r["loss"] < 1e-5 and r["global_step"] == 300
    p = est.predict(lambda mode: loom.Dataset.from_tensor_slices({"x": X[:5]}).batch(5))
    np.testing.assert_allclose(p["y"], Y[:5], atol=1e-3)
    assert calls[:1] == ["train"] and "eval" in calls and "infer" in calls


def test_warm_start_from_a_checkpoint_without_a_variable_raises(tmp_path):
    # warm_start_from selects every trainable variable (TF's WarmStartSettings(path)): one the checkpoint
    # lacks is TF's ValueError naming it and the checkpoint
    def make(with_b):
        def model_fn(g, features, labels, mode, params):
            pred = features["x"] @ g.variable("w", (1, 1), initializer=0.5)
            if with_b:
                pred = pred + g.variable("b", (1,), initializer=0.0)
            loss = g.mean_squared_error(labels, pred)
            return loom.EstimatorSpec(mode, loss=loss, train_op=g.minimize(loss, "sgd", 0.1))
        return model_fn

    data = lambda mode: loom.Dataset.from_tensor_slices({"x": np.ones((4, 1), np.float32),
                                                         "y": np.ones((4, 1), np.float32)}, label="y").batch(2)
    old = loom.Estimator(make(False), model_dir=str(tmp_path / "old"), save_summary_steps=0)
    old.train(data, steps=1)
    new = loom.Estimator(make(True), model_dir=str(tmp_path / "new"), warm_start_from=str(tmp_path / "old"),
                         save_summary_steps=0)
    with pytest.raises(ValueError, match=r"variable b is not in checkpoint .*old"):
        new.train(data, steps=1)
    same = loom.Estimator(make(False), model_dir=str(tmp_path / "same"), warm_start_from=str(tmp_path / "old"),
                          save_summary_steps=0)
    same.train(data, steps=1)
    # x = y = 1, loss (w - 1)^2, SGD 0.1: 0.5 -> 0.6 in old; warm-started 0.6 -> 0.68 (not warm-started: 0.6)
    assert old.get_variable_value("w").ravel()[0] == pytest.approx(0.6, abs=1e-6)
    assert same.get_variable_value("w").ravel()[0] == pytest.approx(0.68, abs=1e-6)


def test_python_exceptions_cross_the_c_boundary(tmp_path):
    def model_fn(g, features, labels, mode, params):
        raise KeyError("no feature called 'z'")

    est = loom.Estimator(model_fn, model_dir=str(tmp_path))
    data = lambda mode: loom.Dataset.from_tensor_slices({"x": np.zeros((4, 1), np.float32),
                                                         "y": np.zeros((4, 1), np.float32)}, label="y").batch(2)
    with pytest.raises(KeyError, match="'z'"):
        est.train(data, steps=1)

    def bad_input(mode):
        raise ValueError("input broke")

    est2 = loom.Estimator(lambda *a: None, model_dir=str(tmp_path / "b"))
    with pytest.raises(ValueError, match="input broke"):
        est2.train(bad_input, steps=1)
    # a model_fn returning the wrong thing
    with pytest.raises(TypeError, match="EstimatorSpec"):
        est2.train(data, steps=1)


def test_canned_constructor_errors_name_the_option():
    fc = loom.FeatureColumns()
    x = fc.numeric("x", shape=(4,))
    with pytest.raises(loom.LoomError) as e:
        loom.DNNClassifier(hidden_units=[], feature_columns=[x], n_classes=3)
    assert "hidden_units" in str(e.value)
    with pytest.raises(loom.LoomError) as e:
        loom.LinearClassifier(feature_columns=[x], n_classes=1)
    assert "n_classes" in str(e.value)
    with pytest.raises(loom.LoomError) as e:
        loom.DNNClassifier(hidden_units=[4], feature_columns=[x], optimizer="Adamax")
    assert "Adamax" in str(e.value)


def test_linear_regressor_learns_weights(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 3)).astype(np.float32)
    Y = (X @ np.array([[1.0], [2.0], [-1.0]], np.float32) - 1.0).astype(np.float32)
    fc = loom.FeatureColumns()
    est = loom.LinearRegressor(feature_columns=[fc.numeric("x", shape=(3,))], model_dir=str(tmp_path),
                               optimizer="SGD", learning_rate=0.1, save_summary_steps=0)
    est.train(lambda m: loom.Dataset.from_tensor_slices({"x": X, "y": Y}, label="y").repeat().batch(50), steps=300)
    w = est.get_variable_value("linear/linear_model/x/weights")
    np.testing.assert_allclose(w.ravel(), [1, 2, -1], atol=1e-3)
    np.testing.assert_allclose(est.get_variable_value("linear/linear_model/bias_weights"), [-1], atol=1e-3)
