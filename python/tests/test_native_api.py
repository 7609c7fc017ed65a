"""The native API (`import loom`): every feature column kind into a canned
model, wide & deep, RunConfig, train_and_evaluate and the exporters, used
directly from loom. References: loom.tf's estimators on the same seed and
data (the compat layer over the same C calls, reached through TF's names)
must give the same numbers; exports loaded by loom.Predictor must predict
what the estimator predicts in process."""
import os

import numpy as np
import pytest

import loom
import loom.tf as tf

fc = loom.feature_column
N = 256
CITIES = ["paris", "rome", "oslo"]


def data(seed=0):
    """Features of every raw kind: float, strings, int ids, weights; a label
    that depends on them."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(10, 70, (N, 1)).astype(np.float32)
    city = np.array(rng.choice(CITIES + ["lima"], (N, 1)), dtype=object)
    uid = rng.integers(0, 6, (N, 1)).astype(np.int64)
    size = rng.choice([3, 5, 7], (N, 1)).astype(np.int64)
    tag = np.array(rng.choice(["a", "b", "c", "d"], (N, 1)), dtype=object)
    w = rng.uniform(0.5, 2, (N, 1)).astype(np.float32)
    y = ((age[:, 0] > 40) | (city[:, 0] == "rome") | (uid[:, 0] == 2)).astype(np.int32)
    return {"age": age, "city": city, "city2": city.copy(), "uid": uid, "size": size, "tag": tag, "w": w}, y


def native_columns(vocab):
    age = fc.numeric("age")
    ab = fc.bucketized(age, [20, 30, 40, 50, 60])
    city = fc.vocabulary_list("city", CITIES)
    city2 = fc.vocabulary_file("city2", str(vocab))
    uid = fc.identity("uid", 6)
    size = fc.vocabulary_list("size", [3, 5, 7])
    tag = fc.hash_bucket("tag", 10)
    wide = [ab, city, tag, fc.crossed([ab, "city"], 30), fc.weighted(fc.identity("uid", 6), "w"), city2]
    deep = [age, fc.embedding(size, 2), fc.indicator(uid)] + \
        fc.shared_embeddings([city, fc.vocabulary_list("city2", CITIES)], 3)
    return wide, deep


def tf_columns(vocab):
    t = tf.feature_column
    age = t.numeric_column("age")
    ab = t.bucketized_column(age, [20, 30, 40, 50, 60])
    city = t.categorical_column_with_vocabulary_list("city", CITIES)
    city2 = t.categorical_column_with_vocabulary_file("city2", str(vocab))
    uid = t.categorical_column_with_identity("uid", 6)
    size = t.categorical_column_with_vocabulary_list("size", [3, 5, 7])
    tag = t.categorical_column_with_hash_bucket("tag", 10)
    wide = [ab, city, tag, t.crossed_column([ab, "city"], 30),
            t.weighted_categorical_column(t.categorical_column_with_identity("uid", 6), "w"), city2]
    deep = [age, t.embedding_column(size, 2), t.indicator_column(uid)] + \
        t.shared_embeddings([city, t.categorical_column_with_vocabulary_list("city2", CITIES)], 3)
    return wide, deep


@pytest.fixture
def vocab(tmp_path):
    p = tmp_path / "cities.txt"
    p.write_text("\n".join(CITIES) + "\n")
    return p


def native_input(X, y, repeat):
    def fn(mode):
        d = dict(X)
        if mode != loom.ModeKeys.PREDICT:
            d["label"] = y
        ds = loom.Dataset.from_tensor_slices(d, label=None if mode == loom.ModeKeys.PREDICT else "label")
        return (ds.repeat() if repeat else ds).batch(32)
    return fn


def test_every_column_kind_names_buckets_and_parse_spec(vocab):
    wide, deep = native_columns(vocab)
    assert [c.name for c in wide] == ["age_bucketized", "city", "tag", "age_bucketized_X_city", "uid_weighted_by_w",
                                      "city2"]
    assert [c.name for c in deep] == ["age", "size_embedding", "uid_indicator", "city_shared_embedding",
                                      "city2_shared_embedding"]
    assert [c.num_buckets for c in wide] == [6, 3, 10, 30, 6, 3]
    spec = fc.make_parse_example_spec(wide + deep)
    want = tf.feature_column.make_parse_example_spec(sum(tf_columns(vocab), []))
    assert sorted(spec) == sorted(want) == ["age", "city", "city2", "size", "tag", "uid", "w"]
    for k, s in spec.items():
        assert s.varlen == isinstance(want[k], tf.io.VarLenFeature), k
        assert tf.as_dtype(s.dtype) == want[k].dtype, k
    assert (spec["age"].varlen, spec["age"].shape, spec["age"].dtype) == (False, (1,), np.float32)
    # a bad argument fails at the call, naming the column
    with pytest.raises(ValueError, match="source_column"):
        fc.bucketized(fc.identity("u", 3), [1.0])
    with pytest.raises(ValueError, match="combiner"):
        fc.embedding(fc.identity("u", 3), 2, combiner="max")
    with pytest.raises(ValueError, match="key"):
        fc.numeric("")
    with pytest.raises(TypeError, match="loom.feature_column"):
        loom.LinearClassifier(["age"])


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_wide_and_deep_equals_loom_tf_on_the_same_seed(tmp_path, vocab, kind):
    X, y = data()
    Xte, yte = data(1)
    wide, deep = native_columns(vocab)
    cfg = loom.RunConfig(tf_random_seed=11, save_summary_steps=0, save_checkpoints_steps=1000)
    if kind == "classifier":
        est = loom.DNNLinearCombinedClassifier(linear_feature_columns=wide, dnn_feature_columns=deep,
                                               dnn_hidden_units=[8, 4], n_classes=2,
                                               model_dir=str(tmp_path / "n"), config=cfg)
    else:
        est = loom.DNNLinearCombinedRegressor(wide, deep, [8, 4], model_dir=str(tmp_path / "n"), config=cfg)
        y, yte = y.astype(np.float32).reshape(-1, 1), yte.astype(np.float32).reshape(-1, 1)
    est.train(native_input(X, y, True), steps=200)
    r = est.evaluate(native_input(Xte, yte, False))
    pred = est.predict(native_input(Xte, yte, False))
    assert r["global_step"] == 200
    assert est.latest_checkpoint().endswith("model.ckpt-200")

    twide, tdeep = tf_columns(vocab)
    tcfg = tf.estimator.RunConfig(tf_random_seed=11, save_summary_steps=0, save_checkpoints_steps=1000)
    if kind == "classifier":
        ref = tf.estimator.DNNLinearCombinedClassifier(model_dir=str(tmp_path / "t"), linear_feature_columns=twide,
                                                       dnn_feature_columns=tdeep, dnn_hidden_units=[8, 4],
                                                       config=tcfg)
    else:
        ref = tf.estimator.DNNLinearCombinedRegressor(model_dir=str(tmp_path / "t"), linear_feature_columns=twide,
                                                      dnn_feature_columns=tdeep, dnn_hidden_units=[8, 4],
                                                      config=tcfg)

    def tf_input(X, y, repeat):
        def fn():
            ds = tf.data.Dataset.from_tensor_slices((dict(X), y))
            return (ds.repeat() if repeat else ds).batch(32)
        return fn
    ref.train(tf_input(X, y, True), steps=200)
    rr = ref.evaluate(tf_input(Xte, yte, False))
    tpred = list(ref.predict(tf_input(Xte, yte, False), yield_single_examples=False))
    assert set(r) == set(rr)
    for k in r:
        assert r[k] == pytest.approx(float(rr[k]), rel=1e-6, abs=1e-7), k
    key = "probabilities" if kind == "classifier" else "predictions"
    np.testing.assert_allclose(pred[key], np.concatenate([b[key] for b in tpred]), rtol=1e-6, atol=1e-7)
    for v in ("linear/linear_model/city/weights", "dnn/hiddenlayer_0/kernel"):
        np.testing.assert_array_equal(est.get_variable_value(v), ref.get_variable_value(v))
    if kind == "classifier":
        assert r["auc"] > 0.85 and r["accuracy"] > r["accuracy_baseline"], r  # it learned the rule
    else:
        assert r["average_loss"] < 0.85 * float(np.mean(yte ** 2)), r  # below the zero-initialized start


def test_wide_and_deep_argument_errors():
    with pytest.raises(ValueError, match="Either linear_feature_columns or dnn_feature_columns"):
        loom.DNNLinearCombinedClassifier()
    with pytest.raises(ValueError, match="dnn_hidden_units must be defined"):
        loom.DNNLinearCombinedClassifier(dnn_feature_columns=[fc.numeric("a")])
    with pytest.raises(TypeError, match="loom.RunConfig"):
        loom.LinearRegressor([fc.numeric("a")], config={"model_dir": "x"})
    with pytest.raises(ValueError, match="not both"):
        loom.LinearRegressor([fc.numeric("a")], config=loom.RunConfig(), random_seed=3)


def test_train_and_evaluate_with_each_exporter_and_predictor(tmp_path, vocab):
    X, y = data()
    Xte, yte = data(1)
    wide, deep = native_columns(vocab)
    est = loom.DNNLinearCombinedClassifier(wide, deep, [8], model_dir=str(tmp_path / "m"),
                                           config=loom.RunConfig(tf_random_seed=3, save_checkpoints_steps=100,
                                                                 save_summary_steps=0))
    raw = {"age": (np.float32, (None, 1)), "city": (object, (None, 1)), "city2": (object, (None, 1)),
           "uid": (np.int64, (None, 1)), "size": (np.int64, (None, 1)), "tag": (object, (None, 1)),
           "w": (np.float32, (None, 1))}
    metrics, exports = loom.train_and_evaluate(
        est, loom.TrainSpec(native_input(X, y, True), max_steps=300),
        loom.EvalSpec(native_input(Xte, yte, False), steps=None, throttle_secs=0,
                      exporters=[loom.LatestExporter("latest", "parsing", exports_to_keep=2),
                                 loom.BestExporter("best", "parsing", exports_to_keep=None),
                                 loom.FinalExporter("final", raw)]))
    assert metrics["global_step"] == 300
    assert metrics == pytest.approx(est.evaluate(native_input(Xte, yte, False)), rel=1e-6)
    exports = [os.fsdecode(p) for p in exports]
    assert all(os.path.isdir(p) for p in exports)
    base = tmp_path / "m" / "export"
    assert len(os.listdir(base / "latest")) == 2  # exports_to_keep of 3 evaluations (steps 100, 200, 300)
    assert len(os.listdir(base / "final")) == 1
    assert 1 <= len(os.listdir(base / "best")) <= 3

    want = est.predict(native_input(Xte, yte, False))  # batches of 32; the predictor runs all 256 rows at once
    serialized = [loom.serialize_example({k: v[i] for k, v in Xte.items()}) for i in range(N)]
    latest = os.path.join(base / "latest", sorted(os.listdir(base / "latest"))[-1])
    p = loom.Predictor(latest)
    out = p.predict({"examples": serialized}, signature="predict")
    np.testing.assert_allclose(out["probabilities"], want["probabilities"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p.predict(serialized)["scores"], want["probabilities"], rtol=1e-5, atol=1e-6)
    p.close()
    final = os.path.join(base / "final", os.listdir(base / "final")[0])
    p = loom.Predictor(final)
    out = p.predict(dict(Xte), signature="predict")
    np.testing.assert_allclose(out["probabilities"], want["probabilities"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["class_ids"], want["class_ids"])
    p.close()
    best = os.path.join(base / "best", sorted(os.listdir(base / "best"))[-1])
    p = loom.Predictor(best)
    assert p.predict({"examples": serialized[:4]}, signature="predict")["probabilities"].shape == (4, 2)
    p.close()


def test_train_and_evaluate_argument_errors():
    with pytest.raises(ValueError, match="unique names"):
        loom.EvalSpec(lambda m: None, exporters=[loom.FinalExporter("a", "parsing")] * 2)
    with pytest.raises(ValueError, match="max_steps > 0"):
        loom.TrainSpec(lambda m: None, max_steps=0)
    with pytest.raises(TypeError, match="loom.Estimator"):
        loom.train_and_evaluate(object(), loom.TrainSpec(lambda m: None), loom.EvalSpec(lambda m: None))
    est = loom.LinearClassifier([fc.numeric("a")])
    with pytest.raises(TypeError, match="hooks"):
        loom.train_and_evaluate(est, loom.TrainSpec(lambda m: None, hooks=[object()]),
                                loom.EvalSpec(lambda m: None))


def test_run_config_is_loom_tf_run_config(monkeypatch):
    assert issubclass(tf.estimator.RunConfig, loom.RunConfig)  # loom.tf's is loom's
    c = loom.RunConfig(model_dir="/tmp/x", save_checkpoints_steps=10)
    assert (c.save_checkpoints_steps, c.save_checkpoints_secs, c.task_type, c.is_chief) == (10, None, "worker", True)
    assert c.replace(save_checkpoints_secs=5).save_checkpoints_steps is None
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"ps": ["a:1"], "chief": ["b:1"], "worker": ["c:1", "d:1"]}, '
                                    '"task": {"type": "worker", "index": 1}}')
    c = loom.RunConfig()
    assert (c.task_type, c.task_id, c.is_chief, c.num_ps_replicas, c.num_worker_replicas) == \
        ("worker", 1, False, 1, 3)


def test_run_config_drives_checkpoints_of_a_canned_model(tmp_path):
    import loom.feature_column as fcm
    assert fcm is loom.feature_column
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    y = (x @ np.array([[2.0], [-1.0]], np.float32) + 0.5).astype(np.float32)
    cfg = loom.RunConfig(model_dir=str(tmp_path), save_checkpoints_steps=50, keep_checkpoint_max=2,
                         tf_random_seed=5, save_summary_steps=0)
    est = loom.LinearRegressor([fcm.numeric("x", shape=2)], config=cfg, optimizer="SGD", learning_rate=0.1)
    assert est.model_dir == str(tmp_path)
    est.train(lambda m: loom.Dataset.from_tensor_slices({"x": x, "y": y}, label="y").repeat().batch(16),
              steps=120)
    ckpts = sorted(f for f in os.listdir(tmp_path) if f.startswith("model.ckpt-"))
    assert ckpts == ["model.ckpt-100", "model.ckpt-120"]  # every 50 steps and the last; 2 kept
    np.testing.assert_allclose(est.get_variable_value("linear/linear_model/x/weights").ravel(), [2, -1], atol=1e-2)
