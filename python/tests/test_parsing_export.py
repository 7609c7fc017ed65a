"""Canned estimators exported with TF's parsing serving input receiver
(Estimator.export(..., serving_inputs="parsing")): the predictor's classify /
regress signatures (serving_default) fed serialized tf.Example bytes
(loom.serialize_example, checked against hand-encoded protobuf) give what
Estimator.predict gives on the same rows as dense features."""
import numpy as np
import pytest

import loom
from iris_data import dense, iris


def examples(X, y):
    # "label" (int64, last) is not in the spec and is ignored; y = 0 ends the bytes with a NUL
    return [loom.serialize_example({"x": X[i, :2], "pl": float(X[i, 2]), "pw": X[i, 3:4], "label": int(y[i])})
            for i in range(len(y))]


def columns():
    fc = loom.FeatureColumns()
    return [fc.numeric("x", shape=(2,)), fc.numeric("pl"), fc.numeric("pw")]


def test_serialize_example_is_the_protobuf():
    # Example{features{feature{key "x" value{float_list{value: [1.5] (packed)}}}}}
    want = bytes([0x0a, 0x0f, 0x0a, 0x0d, 0x0a, 0x01, ord("x"), 0x12, 0x08,
                  0x12, 0x06, 0x0a, 0x04, 0x00, 0x00, 0xc0, 0x3f])
    assert loom.serialize_example({"x": 1.5}) == want
    assert loom.serialize_example({"x": np.array([1.5], np.float32)}) == want
    # int64_list (field 3) of [0]: the bytes end with the NUL of varint 0
    b = loom.serialize_example({"y": 0})
    assert b.endswith(b"\x1a\x03\x0a\x01\x00"), b
    # bytes_list (field 1), values kept byte for byte (a trailing NUL too)
    b = loom.serialize_example({"s": [b"a\x00", "bc"]})
    assert b.endswith(b"\x12\x0a\x0a\x08\x0a\x02a\x00\x0a\x02bc"), b
    assert loom.serialize_example({}) == b"\x0a\x00"


def test_classifier_classify_on_serialized_examples(tmp_path):
    X, y = iris()
    est = loom.DNNClassifier(hidden_units=[8], feature_columns=columns(), n_classes=3,
                             model_dir=str(tmp_path / "m"), learning_rate=0.1, random_seed=7,
                             save_summary_steps=0, num_threads=1)
    est.train(lambda m: loom.Dataset.from_tensor_slices(dict(dense(X), label=y.astype(np.int32)), label="label")
              .shuffle(150, seed=1).repeat().batch(16), steps=300)
    want = est.predict(lambda m: loom.Dataset.from_tensor_slices(dense(X)).batch(32))

    path = est.export(tmp_path / "export", "parsing")
    p = loom.Predictor(path)
    assert {"serving_default", "classification", "predict"} <= set(p.signatures)
    for sig in ("serving_default", "classification"):
        assert p.input_spec(sig) == {"inputs": (object, (None,))}
        assert set(p.output_keys(sig)) == {"classes", "scores"}
    assert p.input_keys("predict") == ["examples"]

    ex = examples(X, y)
    assert sum(e.endswith(b"\x00") for e in ex) == 50  # the setosa rows (label 0)
    out = p.predict(ex)  # serving_default: classify
    np.testing.assert_array_equal(out["scores"], want["probabilities"])
    np.testing.assert_array_equal(out["scores"].argmax(1), want["class_ids"].ravel())
    assert out["classes"].shape == (150, 3)
    assert (out["classes"] == np.array([b"0", b"1", b"2"], dtype=object)).all()
    assert (want["class_ids"].ravel() == y).mean() > 0.8  # it learned something
    # the predict signature on "examples": every prediction key, the same numbers
    pr = p.predict({"examples": ex}, signature="predict")
    np.testing.assert_array_equal(pr["probabilities"], want["probabilities"])
    np.testing.assert_array_equal(pr["logits"], want["logits"])

    # a feature of the wrong kind: the parse error names it
    bad = loom.serialize_example({"x": [1.0, 2.0], "pl": 3, "pw": 1.0})
    with pytest.raises(loom.LoomError) as e:
        p.predict([bad])
    assert "pl" in str(e.value)
    p.close()


def test_regressor_regress_on_serialized_examples(tmp_path):
    X, y = iris()
    t = (X[:, 0] * 0.5 - X[:, 2]).astype(np.float32)[:, None]
    est = loom.LinearRegressor(feature_columns=columns(), model_dir=str(tmp_path / "m"), optimizer="SGD",
                               learning_rate=0.01, save_summary_steps=0, num_threads=1)
    est.train(lambda m: loom.Dataset.from_tensor_slices(dict(dense(X), t=t), label="t").repeat().batch(30),
              steps=200)
    want = est.predict(lambda m: loom.Dataset.from_tensor_slices(dense(X)).batch(64))["predictions"]
    path = est.export(tmp_path / "export", serving_inputs="parsing")
    p = loom.Predictor(path)
    assert {"serving_default", "regression", "predict"} <= set(p.signatures)
    assert p.input_spec("regression") == {"inputs": (object, (None,))}
    out = p.predict(examples(X, y), signature="regression")
    assert list(out) == ["outputs"]
    np.testing.assert_array_equal(out["outputs"].reshape(-1), want.reshape(-1))
    np.testing.assert_array_equal(p.predict(examples(X, y))["outputs"], out["outputs"])  # serving_default


def test_parsing_export_errors(tmp_path):
    est = loom.BaselineClassifier(n_classes=3, model_dir=str(tmp_path / "b"))
    with pytest.raises(ValueError, match="feature columns"):
        est.export(tmp_path / "x", "parsing")
    est2 = loom.LinearClassifier(feature_columns=columns(), n_classes=3, model_dir=str(tmp_path / "l"))
    with pytest.raises(ValueError, match="'tfexample'"):
        est2.export(tmp_path / "x", "tfexample")
