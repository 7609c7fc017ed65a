"""loom.tf: TF 2.15's Estimator surface. Reference values are TF 2.15's
behaviour (checked against tensorflow 2.15.1 + tensorflow-estimator: the
RunConfig cluster properties, the metric and prediction keys, the
make_parse_example_spec of the columns)."""
import json
import os

import numpy as np
import pytest

import loom
import loom.tf as tf

from test_estimator import load_iris, split_iris


def _iris_fn(X, y, batch, repeat):
    def input_fn():
        ds = tf.data.Dataset.from_tensor_slices(({"x": X}, y))
        if repeat:
            ds = ds.shuffle(120, seed=1).repeat()
        return ds.batch(batch)
    return input_fn


@pytest.fixture(scope="module")
def iris_dnn(tmp_path_factory):
    Xtr, ytr, Xte, yte = split_iris()
    est = tf.estimator.DNNClassifier(hidden_units=[16, 8], feature_columns=[tf.feature_column.numeric_column(
        "x", shape=[4])], n_classes=3, optimizer=tf.keras.optimizers.legacy.Adagrad(learning_rate=0.1),
        model_dir=str(tmp_path_factory.mktemp("dnn")), config=tf.estimator.RunConfig(tf_random_seed=7))
    est.train(_iris_fn(Xtr, ytr, 16, True), steps=600)
    return est, Xte, yte


# ---------------------------------------------------------------- RunConfig
def test_run_config_defaults_and_local_cluster(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    c = tf.estimator.RunConfig()
    assert (c.task_type, c.task_id, c.is_chief, c.num_ps_replicas, c.num_worker_replicas) == ("worker", 0, True, 0, 1)
    assert c.save_checkpoints_secs == 600 and c.save_checkpoints_steps is None
    assert c.keep_checkpoint_max == 5 and c.log_step_count_steps == 100 and c.save_summary_steps == 100
    c2 = tf.estimator.RunConfig(save_checkpoints_steps=50)
    assert c2.save_checkpoints_secs is None and c2.save_checkpoints_steps == 50
    c3 = c2.replace(tf_random_seed=3)
    assert c3.tf_random_seed == 3 and c3.save_checkpoints_steps == 50
    with pytest.raises(ValueError, match="save_checkpoints"):
        tf.estimator.RunConfig(save_checkpoints_steps=5, save_checkpoints_secs=5)
    with pytest.raises(NotImplementedError, match="train_distribute"):
        tf.estimator.RunConfig(train_distribute=object())


CLUSTER = {"chief": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4", "h:5", "h:6"], "evaluator": ["h:7"]}


@pytest.mark.parametrize("task,expect", [
    # (task_type, task_id, is_chief, num_ps_replicas, num_worker_replicas, global_id_in_cluster) as TF 2.15
    ({"type": "chief", "index": 0}, ("chief", 0, True, 3, 3, 0)),
    ({"type": "worker", "index": 1}, ("worker", 1, False, 3, 3, 3)),
    ({"type": "ps", "index": 2}, ("ps", 2, False, 3, 3, 6)),
    ({"type": "evaluator", "index": 0}, ("evaluator", 0, False, 0, 0, None)),
])
def test_run_config_cluster_from_tf_config(monkeypatch, task, expect):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": CLUSTER, "task": task}))
    c = tf.estimator.RunConfig()
    got = (c.task_type, c.task_id, c.is_chief, c.num_ps_replicas, c.num_worker_replicas)
    assert got == expect[:5]
    if expect[5] is not None:
        assert c.global_id_in_cluster == expect[5]
    assert c.cluster_spec == CLUSTER


def test_run_config_bad_tf_config_names_the_problem(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": ["h:1"]}, "task": {"type": "worker",
                                                                                          "index": 3}}))
    with pytest.raises(ValueError, match="TF_CONFIG"):
        tf.estimator.RunConfig()


def test_training_under_a_cluster_is_refused_not_run_locally(monkeypatch, tmp_path):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 0}}))
    est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=str(tmp_path))
    # train() alone runs the task's role of the PS job (test_tf_distributed.py); steps=N is not its stop condition
    with pytest.raises(ValueError, match="TF_CONFIG cluster .* .task worker:0. needs max_steps"):
        est.train(lambda: ({"x": np.zeros(4, np.float32)}, np.zeros(4, np.float32)), steps=1)


# ---------------------------------------------------------------- canned estimators
def test_dnn_classifier_evaluate_predict_and_variables(iris_dnn):
    est, Xte, yte = iris_dnn
    r = est.evaluate(_iris_fn(Xte, yte, 30, False))
    assert set(r) == {"accuracy", "average_loss", "loss", "global_step"}  # TF's multi-class keys
    assert r["global_step"] == 600 and isinstance(r["global_step"], np.int64)
    assert r["accuracy"] >= 0.9
    preds = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": Xte}).batch(7)))
    assert len(preds) == 30  # one dict per example, from a generator
    assert {"logits", "probabilities", "class_ids", "classes", "all_class_ids", "all_classes"} <= set(preds[0])
    assert preds[0]["probabilities"].shape == (3,) and preds[0]["class_ids"].shape == (1,)
    acc = np.mean([p["class_ids"][0] == t for p, t in zip(preds, yte)])
    assert abs(acc - r["accuracy"]) < 1e-6
    assert preds[0]["classes"][0] == str(preds[0]["class_ids"][0]).encode()
    batches = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": Xte}).batch(7),
                               predict_keys=["probabilities"], yield_single_examples=False))
    assert [b["probabilities"].shape[0] for b in batches] == [7, 7, 7, 7, 2] and set(batches[0]) == {"probabilities"}
    names = est.get_variable_names()
    assert "dnn/hiddenlayer_0/kernel" in names and "global_step" in names
    assert est.get_variable_value("dnn/hiddenlayer_1/kernel").shape == (16, 8)
    assert est.latest_checkpoint().endswith("model.ckpt-600")


def test_export_saved_model_parsing_receiver_serves_tf_examples(iris_dnn, tmp_path):
    est, Xte, yte = iris_dnn
    spec = tf.feature_column.make_parse_example_spec([tf.feature_column.numeric_column("x", shape=[4])])
    assert spec == {"x": tf.io.FixedLenFeature((4,), tf.float32)}
    path = est.export_saved_model(str(tmp_path), tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    assert isinstance(path, bytes) and os.path.isdir(path)
    p = loom.Predictor(path.decode())
    assert "serving_default" in p.signatures
    ex = [loom.serialize_example({"x": row.tolist()}) for row in Xte[:5]]
    out = p.predict({"examples": ex}, signature="predict")
    want = [q["probabilities"] for q in est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": Xte[:5]})
                                                    .batch(5))]
    np.testing.assert_allclose(out["probabilities"], np.stack(want), rtol=1e-6)


def test_untrained_estimator_has_no_variables(tmp_path):
    est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=str(tmp_path))
    assert est.latest_checkpoint() is None
    with pytest.raises(ValueError, match="Couldn't find trained model"):
        est.get_variable_names()


def test_linear_regressor_from_a_tuple_input_fn_with_params_mode_config(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 3))  # float64: converted to the column's float32
    Y = X @ np.array([1.0, 2.0, -1.0]) - 1.0
    seen = []

    def input_fn(params, mode, config):
        seen.append((mode, type(config).__name__))
        return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(50)
    est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x", shape=(3,))], model_dir=str(tmp_path),
                                       optimizer=tf.keras.optimizers.legacy.SGD(learning_rate=0.1))
    est.train(input_fn, steps=300)
    assert seen == [("train", "RunConfig")]
    np.testing.assert_allclose(est.get_variable_value("linear/linear_model/x/weights").ravel(), [1, 2, -1],
                               atol=1e-3)
    # the input_fn returning the (features, labels) tuple of arrays: one batch of everything
    r = est.evaluate(lambda: ({"x": X}, Y))
    assert r["average_loss"] < 1e-5 and r["global_step"] == 300
    assert set(r) == {"average_loss", "label/mean", "loss", "prediction/mean", "global_step"}
    preds = list(est.predict(lambda: {"x": X[:10]}))  # features only: one batch of the 10 rows
    np.testing.assert_allclose([p["predictions"][0] for p in preds], Y[:10], atol=1e-2)


def test_wide_and_deep_regressor_and_baselines(tmp_path):
    rng = np.random.default_rng(1)
    n = 300
    cat = rng.choice(["a", "b", "c"], size=n).astype(object)
    num = rng.normal(size=n).astype(np.float32)
    y = (num * 2 + np.where(cat == "a", 3.0, 0.0)).astype(np.float32)
    c = tf.feature_column.categorical_column_with_vocabulary_list("cat", ["a", "b", "c"])
    est = tf.estimator.DNNLinearCombinedRegressor(
        linear_feature_columns=[c], dnn_feature_columns=[tf.feature_column.numeric_column("num"),
                                                         tf.feature_column.indicator_column(c)],
        dnn_hidden_units=[8], dnn_optimizer="Adam", linear_optimizer=tf.keras.optimizers.legacy.Ftrl(0.5),
        model_dir=str(tmp_path / "wd"), config=tf.estimator.RunConfig(tf_random_seed=3))
    fn = lambda: tf.data.Dataset.from_tensor_slices(({"cat": cat, "num": num}, y)).shuffle(300, seed=2).repeat() \
        .batch(30)
    est.train(fn, max_steps=1500)
    r = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"cat": cat, "num": num}, y)).batch(100))
    assert r["average_loss"] < 0.05, r
    names = est.get_variable_names()
    assert "linear/linear_model/cat/weights" in names and "dnn/logits/kernel" in names

    b = tf.estimator.BaselineClassifier(n_classes=3, model_dir=str(tmp_path / "b"))
    labels = np.array([0] * 10 + [1] * 30 + [2] * 60, np.int64)
    b.train(lambda: tf.data.Dataset.from_tensor_slices(({"u": np.zeros(100, np.float32)}, labels)).repeat()
            .batch(100), steps=300)
    probs = next(b.predict(lambda: tf.data.Dataset.from_tensor_slices({"u": np.zeros(1, np.float32)}).batch(1)))
    np.testing.assert_allclose(probs["probabilities"], [0.1, 0.3, 0.6], atol=0.02)  # the label frequencies


def test_canned_argument_errors_name_the_argument(tmp_path):
    x = tf.feature_column.numeric_column("x", shape=[4])
    with pytest.raises(ValueError, match="hidden_units"):
        tf.estimator.DNNClassifier(hidden_units=[], feature_columns=[x])
    with pytest.raises(ValueError, match="n_classes"):
        tf.estimator.LinearClassifier([x], n_classes=1)
    with pytest.raises(ValueError, match="Adamax"):
        tf.estimator.DNNClassifier([4], [x], optimizer="Adamax")
    with pytest.raises(ValueError, match="label_vocabulary"):
        tf.estimator.DNNClassifier([4], [x], label_vocabulary="abc")
    with pytest.raises(ValueError, match="loss_reduction"):
        tf.estimator.DNNClassifier([4], [x], loss_reduction="mean")
    with pytest.raises(ValueError, match="unknown activation 'wiggle'"):
        tf.estimator.DNNClassifier([4], [x], activation_fn="wiggle")
    with pytest.raises(NotImplementedError, match=r"Ftrl\(beta=0.5\)"):
        tf.keras.optimizers.legacy.Ftrl(learning_rate=0.1, beta=0.5)
    with pytest.raises(ValueError, match="dnn_hidden_units"):
        tf.estimator.DNNLinearCombinedClassifier(dnn_feature_columns=[x])
    with pytest.raises(ValueError, match="model_dir"):
        tf.estimator.DNNClassifier([4], [x], model_dir=str(tmp_path / "a"),
                                   config=tf.estimator.RunConfig(model_dir=str(tmp_path / "b")))
    with pytest.raises(ValueError, match="Can not provide both steps and max_steps"):
        tf.estimator.DNNClassifier([4], [x], model_dir=str(tmp_path)).train(lambda: None, steps=1, max_steps=2)


def test_wrong_feature_key_and_bad_labels_raise_with_the_name(tmp_path):
    x = tf.feature_column.numeric_column("x", shape=[2])
    est = tf.estimator.DNNClassifier([4], [x], n_classes=3, model_dir=str(tmp_path))

    def train(f, lab):
        est.train(lambda: tf.data.Dataset.from_tensor_slices((f, lab)).batch(2), steps=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match='column x: feature key "x" is not in the features'):
        train({"y": np.zeros((4, 2), np.float32)}, np.zeros(4, np.int64))
    with pytest.raises(ValueError, match=r"7 is not in \[0, 3\)"):  # InvalidArgumentError is a ValueError too
        train({"x": np.zeros((4, 2), np.float32)}, np.full(4, 7, np.int64))
    with pytest.raises(loom.LoomError, match='feature "x" has 3 values per example, the column.s shape needs 2'):
        train({"x": np.zeros((4, 3), np.float32)}, np.zeros(4, np.int64))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Labels dtype should be integer"):
        train({"x": np.zeros((4, 2), np.float32)}, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="feature 'x': the column takes float32, the input is strings"):
        train({"x": np.array(["a", "b"], object)}, np.zeros(2, np.int64))

    def broken():
        raise KeyError("no such file")
    with pytest.raises(KeyError, match="no such file"):  # the input_fn's exception, unchanged
        est.train(broken, steps=1)


def test_stop_at_step_hook_and_python_hooks(tmp_path):
    X, y = load_iris()
    est = tf.estimator.LinearClassifier([tf.feature_column.numeric_column("x", shape=[4])], n_classes=3,
                                        model_dir=str(tmp_path))
    fn = _iris_fn(X, y, 30, True)
    est.train(fn, hooks=[tf.estimator.StopAtStepHook(last_step=7)], steps=100)
    assert est.evaluate(_iris_fn(X, y, 150, False))["global_step"] == 7

    class MyHook(tf.estimator.SessionRunHook):  # Python hooks run in the C loop (test_tf_keras.py, hooks)
        pass
    est.train(fn, hooks=[MyHook()], steps=1)
    assert est.evaluate(_iris_fn(X, y, 150, False))["global_step"] == 8


def test_train_and_evaluate_with_exporters(tmp_path):
    Xtr, ytr, Xte, yte = split_iris()
    x = tf.feature_column.numeric_column("x", shape=[4])
    est = tf.estimator.LinearClassifier([x], n_classes=3, model_dir=str(tmp_path),
                                        config=tf.estimator.RunConfig(save_checkpoints_steps=100))
    recv = tf.estimator.export.build_parsing_serving_input_receiver_fn(tf.feature_column.make_parse_example_spec([x]))
    metrics, exports = tf.estimator.train_and_evaluate(
        est, tf.estimator.TrainSpec(_iris_fn(Xtr, ytr, 20, True), max_steps=300),
        tf.estimator.EvalSpec(_iris_fn(Xte, yte, 30, False), steps=None, throttle_secs=0,
                              exporters=[tf.estimator.LatestExporter("latest", recv, exports_to_keep=2),
                                         tf.estimator.BestExporter("best", recv, exports_to_keep=None),
                                         tf.estimator.FinalExporter("final", recv)]))
    assert metrics["global_step"] == 300 and metrics["accuracy"] > 0.8
    assert len(exports) >= 2 and all(os.path.isdir(p) for p in exports)
    assert len(os.listdir(tmp_path / "export" / "latest")) == 2  # exports_to_keep of 3 evaluations
    assert len(os.listdir(tmp_path / "export" / "final")) == 1
    assert 1 <= len(os.listdir(tmp_path / "export" / "best")) <= 3  # each one with a lower loss
    with pytest.raises(ValueError, match="unique names"):
        tf.estimator.EvalSpec(lambda: None, exporters=[tf.estimator.FinalExporter("a", recv)] * 2)


# ---------------------------------------------------------------- feature columns
def test_feature_column_names_and_parse_spec(tmp_path):
    fc = tf.feature_column
    vocab = tmp_path / "v.txt"
    vocab.write_text("a\nb\nc\n")
    num = fc.numeric_column("n", shape=[2])
    b = fc.bucketized_column(fc.numeric_column("age"), [18, 30, 60])
    v = fc.categorical_column_with_vocabulary_list("s", ["x", "y"], num_oov_buckets=1)
    vi = fc.categorical_column_with_vocabulary_list("i", [3, 5, 7])
    vf = fc.categorical_column_with_vocabulary_file("f", str(vocab))
    h = fc.categorical_column_with_hash_bucket("h", 10)
    ident = fc.categorical_column_with_identity("id", 4)
    cr = fc.crossed_column([b, "s"], 20)
    w = fc.weighted_categorical_column(h, "hw")
    assert [c.name for c in (num, b, v, cr, w)] == ["n", "age_bucketized", "s", "age_bucketized_X_s",
                                                     "h_weighted_by_hw"]
    assert fc.indicator_column(v).name == "s_indicator" and fc.embedding_column(vf, 3).name == "f_embedding"
    assert (b.num_buckets, v.num_buckets, vi.num_buckets, vf.num_buckets, ident.num_buckets) == (4, 3, 3, 3, 4)
    spec = fc.make_parse_example_spec([num, b, v, vi, w, ident, cr])
    assert spec == {"n": tf.io.FixedLenFeature((2,), tf.float32), "age": tf.io.FixedLenFeature((1,), tf.float32),
                    "s": tf.io.VarLenFeature(tf.string), "i": tf.io.VarLenFeature(tf.int64),
                    "h": tf.io.VarLenFeature(tf.string), "hw": tf.io.VarLenFeature(tf.float32),
                    "id": tf.io.VarLenFeature(tf.int64)}


def test_shared_embeddings_share_one_table(tmp_path):
    fc = tf.feature_column
    a = fc.categorical_column_with_identity("a", 5)
    b = fc.categorical_column_with_identity("b", 5)
    ea, eb = fc.shared_embeddings([a, b], dimension=3)
    assert (ea.name, eb.name) == ("a_shared_embedding", "b_shared_embedding")
    rng = np.random.default_rng(0)
    ia, ib = rng.integers(0, 5, 200), rng.integers(0, 5, 200)
    y = (ia == ib).astype(np.int64)
    est = tf.estimator.DNNClassifier([8], [ea, eb], model_dir=str(tmp_path), optimizer="Adam")
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"a": ia, "b": ib}, y)).repeat().batch(50), steps=5)
    tables = [n for n in est.get_variable_names() if n.endswith("embedding_weights")]
    assert tables == ["dnn/input_from_feature_columns/input_layer/a_b_shared_embedding/embedding_weights"]
    assert est.get_variable_value(tables[0]).shape == (5, 3)
    with pytest.raises(ValueError):
        fc.shared_embeddings([a, fc.categorical_column_with_identity("c", 7)], dimension=3)  # bucket counts differ


def test_feature_column_errors_raise_when_made():
    fc = tf.feature_column
    with pytest.raises(ValueError, match="s"):
        fc.categorical_column_with_vocabulary_list("s", ["x", "x"])  # duplicates
    with pytest.raises(ValueError):
        fc.bucketized_column(fc.numeric_column("a"), [3, 1])  # not ascending
    with pytest.raises(ValueError, match="nope.txt"):
        fc.categorical_column_with_vocabulary_file("f", "/nonexistent/nope.txt")
    with pytest.raises(ValueError, match="hash"):
        fc.crossed_column([fc.categorical_column_with_hash_bucket("h", 5), "s"], 10)
    with pytest.raises(ValueError, match="source_column"):
        fc.bucketized_column(fc.categorical_column_with_identity("i", 3), [1])
    with pytest.raises(TypeError, match="normalizer_fn must be a callable. Given: 3"):
        fc.numeric_column("x", normalizer_fn=3)


# ---------------------------------------------------------------- data and inputs
def test_dataset_pipeline_matches_tf_semantics():
    X = np.arange(10, dtype=np.float32)
    ds = tf.data.Dataset.from_tensor_slices(({"a": X}, X * 2)).repeat(2).batch(4)
    batches = list(ds)
    assert [len(f["a"]) for f, _ in batches] == [4, 4, 4, 4, 4]  # batches cross the epoch boundary
    np.testing.assert_array_equal(batches[2][0]["a"], [8, 9, 0, 1])
    np.testing.assert_array_equal(batches[2][1], [16, 18, 0, 2])
    assert [len(b) for b in tf.data.Dataset.from_tensor_slices(X).batch(4, drop_remainder=True)] == [4, 4]
    assert len(list(tf.data.Dataset.from_tensor_slices(X).take(3).prefetch(tf.data.AUTOTUNE).cache())) == 3
    a = [float(v) for v in tf.data.Dataset.from_tensor_slices(X).shuffle(10, seed=4)]
    assert sorted(a) == list(range(10)) and a != list(range(10))
    assert a == [float(v) for v in tf.data.Dataset.from_tensor_slices(X).shuffle(10, seed=4)]
    # map traces its function into loom's graph (python/tests/test_tf_data.py covers the file sources)
    assert [float(v) for v in tf.data.Dataset.from_tensor_slices(X).map(lambda v: v * 2.0 + 1.0).take(3)] == \
        [1.0, 3.0, 5.0]
    with pytest.raises(NotImplementedError, match="tf.data.Dataset.padded_batch"):
        tf.data.Dataset.from_tensor_slices(X).padded_batch(2)
    with pytest.raises(NotImplementedError, match="Dataset.interleave over a dataset other than .* file names"):
        tf.data.Dataset.from_tensor_slices(X).interleave(lambda v: v)
    with pytest.raises(NotImplementedError, match="cache"):
        tf.data.Dataset.from_tensor_slices(X).shuffle(3).cache()
    with pytest.raises(ValueError, match="dimension 0"):
        tf.data.Dataset.from_tensor_slices(({"a": X}, X[:3]))


def test_numpy_input_fn_epochs_and_shuffle():
    X = {"a": np.arange(10, dtype=np.float32)}
    y = np.arange(10)
    fn = tf.compat.v1.estimator.inputs.numpy_input_fn(X, y, batch_size=4, num_epochs=2, shuffle=False)
    sizes = [len(f["a"]) for f, _ in fn()]
    assert sizes == [4, 4, 4, 4, 4]  # 20 examples, batches crossing epochs (TF's)
    fn = tf.compat.v1.estimator.inputs.numpy_input_fn(X, y, batch_size=10, num_epochs=1, shuffle=True)
    (f, lab), = list(fn())
    np.testing.assert_array_equal(f["a"], lab.astype(np.float32))  # rows stay paired
    assert sorted(lab) == list(range(10))
    with pytest.raises(ValueError, match="shuffle must be provided"):
        tf.compat.v1.estimator.inputs.numpy_input_fn(X, y)


def test_numpy_input_fn_shuffle_spans_epochs_as_tf_queue():
    # TF feeds the rows in order, epoch after epoch, into a RandomShuffleQueue of queue_capacity rows and
    # dequeues batches at random: with fewer rows than the queue, a batch mixes epochs (a row may come twice)
    X = {"a": np.arange(20, dtype=np.float32)}
    y = np.arange(20)
    fn = tf.compat.v1.estimator.inputs.numpy_input_fn(X, y, batch_size=20, num_epochs=3, shuffle=True)
    batches = [lab for _, lab in fn()]
    assert [len(b) for b in batches] == [20, 20, 20]
    assert sorted(np.concatenate(batches)) == sorted(list(range(20)) * 3)  # each row once per epoch
    assert any(len(set(b)) < 20 for b in batches)  # not one permutation per epoch
    fn = tf.compat.v1.estimator.inputs.numpy_input_fn(X, y, batch_size=20, num_epochs=2, shuffle=True,
                                                      queue_capacity=1)
    assert [list(lab) for _, lab in fn()] == [list(range(20))] * 2  # a queue of one row: the rows in order


def test_pandas_input_fn_and_dataframe_slices():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "s": ["x", "y", "z"]})
    fn = tf.compat.v1.estimator.inputs.pandas_input_fn(df, pd.Series([0, 1, 0]), batch_size=2, shuffle=False)
    (f1, l1), (f2, l2) = list(fn())
    np.testing.assert_array_equal(f1["a"], [1.0, 2.0])
    assert list(f2["s"]) == [b"z"] and list(l1) == [0, 1]
    with pytest.raises(ValueError, match="Index for x and y are mismatched"):
        tf.compat.v1.estimator.inputs.pandas_input_fn(df, pd.Series([0, 1, 0], index=[5, 6, 7]), shuffle=False)
    (f,) = list(tf.data.Dataset.from_tensor_slices(dict(df)).batch(3))
    np.testing.assert_array_equal(f["a"], [1.0, 2.0, 3.0])
    est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("a")])
    est.train(lambda: (df[["a"]], pd.Series([2.0, 4.0, 6.0])), steps=200)  # a DataFrame itself: one batch
    assert est.evaluate(lambda: (df[["a"]], pd.Series([2.0, 4.0, 6.0])))["global_step"] == 200
    assert len(list(est.predict(lambda: df[["a"]]))) == 3


# ---------------------------------------------------------------- the rest of TF
def test_unsupported_symbols_raise_not_implemented_naming_them():
    for expr, name in [(lambda: tf.keras.layers.LSTM, "tf.keras.layers.LSTM"),
                       (lambda: tf.compat.v1.layers.conv1d, "tf.compat.v1.layers.conv1d"),
                       (lambda: tf.data.Dataset.choose_from_datasets, "tf.data.Dataset.choose_from_datasets"),
                       (lambda: tf.keras.experimental.WideDeepModel, "tf.keras.experimental.WideDeepModel"),
                       (lambda: tf.estimator.BoostedTreesClassifier, "tf.estimator.BoostedTreesClassifier"),
                       (lambda: tf.nn.depthwise_conv2d, "tf.nn.depthwise_conv2d"),
                       (lambda: tf.compat.v1.train.SyncReplicasOptimizer, "tf.compat.v1.train.SyncReplicasOptimizer")]:
        with pytest.raises(NotImplementedError) as e:
            expr()
        assert name in str(e.value) and "instead" in str(e.value)
    assert not hasattr(tf, "__wrapped__")  # Python's own probes stay AttributeError


def test_logging_and_seed():
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    assert tf.compat.v1.logging.get_verbosity() == 20
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
    X = np.arange(50, dtype=np.float32)
    tf.random.set_seed(11)
    a = [float(v) for v in tf.data.Dataset.from_tensor_slices(X).shuffle(50)]
    tf.keras.utils.set_random_seed(11)
    b = [float(v) for v in tf.data.Dataset.from_tensor_slices(X).shuffle(50)]
    assert a == b and a != sorted(a)


def test_docs_list_the_surface():
    """docs/tf-surface.md (generated from the code) names every public symbol of loom.tf's modules."""
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "tf-surface.md")).read()
    for mod in (tf.estimator, tf.feature_column):
        for name in mod.__all__:
            assert "`%s" % name in doc or ".%s" % name in doc, name


def test_dnn_dropout_batch_norm_sum_reduction_and_activation(tmp_path):
    X, y = load_iris()
    est = tf.estimator.DNNClassifier(
        hidden_units=[8], feature_columns=[tf.feature_column.numeric_column("x", shape=[4])], n_classes=3,
        dropout=0.1, batch_norm=True, activation_fn=tf.nn.tanh, loss_reduction=tf.losses.Reduction.SUM,
        optimizer=lambda: tf.keras.optimizers.legacy.Adam(learning_rate=0.01), model_dir=str(tmp_path))
    est.train(_iris_fn(X, y, 50, True), steps=200)
    names = est.get_variable_names()
    assert "dnn/hiddenlayer_0/batchnorm_0/moving_mean" in names
    r = est.evaluate(_iris_fn(X, y, 150, False))
    assert r["accuracy"] > 0.5  # the moving statistics (momentum 0.999) are still young after 200 steps
    # SUM: the loss of the one batch of 150 is the sum, 150 times the average
    np.testing.assert_allclose(r["loss"], 150 * r["average_loss"], rtol=1e-4)


def _custom(tmp_path, model_fn, params=None):
    return tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), params=params)


def test_custom_model_fn_regression_and_metrics(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(256, 2)).astype(np.float32)
    Y = X @ np.array([[3.0], [-2.0]], np.float32) + 0.5
    modes = []

    def model_fn(features, labels, mode, params, config):
        modes.append((mode, params["lr"], type(config).__name__))
        pred = tf.compat.v1.layers.dense(features["x"], 1, name="fit")
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"y": pred})
        loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(params["lr"]).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                          eval_metric_ops={"mean_pred": tf.compat.v1.metrics.mean(pred)})
    est = _custom(tmp_path, model_fn, {"lr": 0.1})
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(64), steps=300)
    np.testing.assert_allclose(est.get_variable_value("fit/kernel").ravel(), [3, -2], atol=1e-3)
    r = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(256))
    assert r["loss"] < 1e-5 and r["global_step"] == 300
    np.testing.assert_allclose(r["mean_pred"], Y.mean(), rtol=1e-3)
    p = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X[:3]}).batch(3)))
    np.testing.assert_allclose([q["y"][0] for q in p], Y[:3, 0], atol=1e-2)
    assert [m[0] for m in modes] == ["train", "eval", "infer"] and modes[0][1:] == (0.1, "RunConfig")

    def array_model_fn(features, labels, mode):  # features one tensor (numpy_input_fn with x an array)
        pred = tf.compat.v1.layers.dense(features, 1, name="fit")
        loss = tf.compat.v1.losses.mean_squared_error(labels, pred)
        op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op)
    est2 = _custom(tmp_path / "array", array_model_fn)
    est2.train(tf.compat.v1.estimator.inputs.numpy_input_fn(X, Y, batch_size=64, num_epochs=None, shuffle=True),
               steps=300)
    np.testing.assert_allclose(est2.get_variable_value("fit/kernel").ravel(), [3, -2], atol=1e-3)


def test_custom_model_fn_errors(tmp_path):
    X = np.zeros((4, 2), np.float32)
    data = lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, np.zeros(4, np.int64))).batch(2)

    def no_step(features, labels, mode):
        logits = tf.compat.v1.layers.dense(features["x"], 2)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.AdamOptimizer().minimize(loss))
    with pytest.raises(NotImplementedError, match="global_step"):
        _custom(tmp_path / "a", no_step).train(data, steps=1)

    def raises(features, labels, mode):
        raise KeyError("no feature 'z'")
    with pytest.raises(KeyError, match="no feature 'z'"):  # the model_fn's exception, unchanged
        _custom(tmp_path / "b", raises).train(data, steps=1)

    def wrong_key(features, labels, mode):
        return features["nope"]
    with pytest.raises(KeyError, match="nope"):
        _custom(tmp_path / "c", wrong_key).train(data, steps=1)

    def bad_shape(features, labels, mode):
        w = tf.compat.v1.layers.dense(features["x"], 3)
        return tf.estimator.EstimatorSpec(mode, loss=tf.reduce_mean(w @ tf.reshape(w, [2, -1])))  # 3 vs 2
    with pytest.raises(loom.LoomError, match="[Mm]at[Mm]ul"):
        _custom(tmp_path / "d", bad_shape).train(data, steps=1)

    def no_train_op(features, labels, mode):
        return tf.estimator.EstimatorSpec(mode, loss=tf.reduce_mean(tf.compat.v1.layers.dense(features["x"], 1)))
    with pytest.raises(ValueError, match="missing train_op in mode train"):
        _custom(tmp_path / "f", no_train_op).train(data, steps=1)

    def not_a_spec(features, labels, mode):
        return None
    with pytest.raises(TypeError, match="EstimatorSpec"):
        _custom(tmp_path / "e", not_a_spec).train(data, steps=1)
    with pytest.raises(NotImplementedError, match="tf.nn.softmax on ndarray"):
        tf.nn.softmax(np.zeros(3))


def test_conv_pool_flatten_dropout_layers(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 6, 6, 1)).astype(np.float32)
    y = (X[:, :3].sum(axis=(1, 2, 3)) > X[:, 3:].sum(axis=(1, 2, 3))).astype(np.int64)  # top half vs bottom half
    shapes = {}

    def model_fn(features, labels, mode):
        c = tf.compat.v1.layers.conv2d(features["x"], 4, [3, 3], padding="same", activation=tf.nn.relu, name="c")
        p = tf.compat.v1.layers.max_pooling2d(c, [2, 2], 2)
        a = tf.compat.v1.layers.average_pooling2d(c, 3, 3, padding="valid")
        f = tf.compat.v1.layers.flatten(p)
        d = tf.compat.v1.layers.dropout(f, 0.2, training=mode == tf.estimator.ModeKeys.TRAIN)
        shapes.update(c=c.shape, p=p.shape, a=a.shape, f=f.shape)
        logits = tf.compat.v1.layers.dense(d, 2)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        op = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(loss, global_step=tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op, eval_metric_ops={
            "accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))})
    est = _custom(tmp_path, model_fn)
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, y)).repeat().batch(16), steps=300)
    assert shapes == {"c": (None, 6, 6, 4), "p": (None, 3, 3, 4), "a": (None, 2, 2, 4), "f": (None, 36)}
    assert est.get_variable_value("c/kernel").shape == (3, 3, 1, 4)
    assert est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, y)).batch(64))["accuracy"] > 0.9


def test_arrays_go_to_loom_once_per_call_not_per_epoch(tmp_path, monkeypatch):
    import loom.tf.data as tfdata
    made = []
    real = tfdata._LoomDataset.from_tensor_slices

    def counting(arrays, label=None):
        made.append({k: v.shape for k, v in arrays.items()})
        return real(arrays, label)
    monkeypatch.setattr(tfdata._LoomDataset, "from_tensor_slices", staticmethod(counting))
    X = {"x": np.arange(100, dtype=np.float32)}
    est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x")], model_dir=str(tmp_path))
    est.train(tf.compat.v1.estimator.inputs.numpy_input_fn(X, 2 * X["x"], batch_size=10, num_epochs=20,
                                                           shuffle=True))
    assert est.get_variable_value("global_step") == 200  # 20 epochs of 10 batches, all in C
    assert made == [{"x": (100,), "__labels__": (100,)}]  # handed to loom once


def test_tf_train_example_bytes_and_saved_model_load(iris_dnn, tmp_path):
    ex = tf.train.Example(features=tf.train.Features(feature={
        "a": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0]))}))
    # protobuf by hand: Example{features{feature{key "a" value{float_list{value: [1.0] packed}}}}}
    assert ex.SerializeToString() == bytes.fromhex("0a0f0a0d0a0161120812060a040000803f")
    est, Xte, yte = iris_dnn
    spec = {"x": tf.io.FixedLenFeature([4], tf.float32)}
    path = est.export_saved_model(str(tmp_path), tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    loaded = tf.saved_model.load(path)
    assert {"serving_default", "predict", "classification"} <= set(loaded.signatures)
    rows = [tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=r))})).SerializeToString() for r in Xte]
    out = loaded.signatures["predict"](examples=tf.constant(rows))
    want = np.stack([p["probabilities"] for p in est.predict(
        lambda: tf.data.Dataset.from_tensor_slices({"x": Xte}).batch(30))])
    np.testing.assert_allclose(out["probabilities"].numpy(), want, rtol=1e-6)
    scores = loaded.signatures["serving_default"](inputs=tf.constant(rows))["scores"].numpy()
    np.testing.assert_allclose(scores, want, rtol=1e-6)


def test_tf_random_seed_makes_the_numpy_input_fn_shuffle_repeatable(tmp_path):
    """TF draws the shuffle's op seed from the graph seed (RunConfig.tf_random_seed) of the graph the
    Estimator builds around input_fn: the same seed gives the same batches, hence the same weights,
    each time the program runs (here: two input_fns, two estimators); another seed gives others."""
    rng = np.random.RandomState(0)
    x = rng.randn(64, 3).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.1 * rng.randn(64)).astype(np.float32)

    def train(seed, name):
        fn = tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=4, num_epochs=None, shuffle=True,
                                                          queue_capacity=64)
        est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x", shape=(3,))],
                                           model_dir=str(tmp_path / name),
                                           config=tf.estimator.RunConfig(tf_random_seed=seed))
        est.train(fn, steps=5)
        return est.get_variable_value("linear/linear_model/x/weights")

    a, b, c = train(7, "a"), train(7, "b"), train(8, "c")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_constant_keeps_trailing_nul_bytes():
    """tf.constant of bytes keeps every byte (numpy's fixed-width bytes would drop trailing NULs, which
    end many serialized tf.train.Examples)."""
    a = tf.constant([b"\n\x00", "ab", b"x\x00\x00"])
    assert a.tolist() == [b"\n\x00", b"ab", b"x\x00\x00"]
    b = tf.constant([[b"a\x00"], [b"b"]], dtype=tf.string)
    assert b.shape == (2, 1) and b[0, 0] == b"a\x00"
    assert tf.constant(b"\x00").tolist() == b"\x00"


def test_session_config_sizes_the_thread_pool(tmp_path):
    """RunConfig(session_config=ConfigProto(intra_op_parallelism_threads=n)) runs the sessions on n threads
    (the C session says how many and why at INFO); fields loom cannot honour raise NotImplementedError."""
    import subprocess
    import sys
    prog = (
        "import numpy as np, loom.tf as tf\n"
        "tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)\n"
        "cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=%d, inter_op_parallelism_threads=2,\n"
        "                               allow_soft_placement=True)\n"
        "est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column('x')], model_dir=%r,\n"
        "                                   config=tf.estimator.RunConfig(session_config=cfg))\n"
        "fn = tf.compat.v1.estimator.inputs.numpy_input_fn({'x': np.arange(8, dtype=np.float32)},\n"
        "                                                  np.arange(8, dtype=np.float32), batch_size=4,\n"
        "                                                  num_epochs=1, shuffle=False)\n"
        "est.train(fn)\n")
    for n in (1, 3):
        r = subprocess.run([sys.executable, "-c", prog % (n, str(tmp_path / ("m%d" % n)))], capture_output=True,
                           text=True, timeout=120, env=dict(os.environ))
        assert r.returncode == 0, r.stderr
        assert "%d thread%s: set by the caller" % (n, "" if n == 1 else "s") in r.stderr, r.stderr[-2000:]
    with pytest.raises(NotImplementedError, match="graph_options"):
        tf.compat.v1.ConfigProto(graph_options=None)
    with pytest.raises(NotImplementedError, match="device_count"):
        tf.compat.v1.ConfigProto(device_count={"GPU": 1})
    with pytest.raises(ValueError, match="intra_op_parallelism_threads"):
        tf.compat.v1.ConfigProto(intra_op_parallelism_threads=-1)
    cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=2, gpu_options=tf.compat.v1.GPUOptions(allow_growth=True))
    rc = tf.estimator.RunConfig(session_config=cfg)
    assert rc.session_config is cfg and rc.replace(tf_random_seed=3).session_config is cfg


def test_compat_v1_has_the_top_level_ops_tf1_shares():
    v1 = tf.compat.v1
    for name in ("float32", "int64", "constant", "matmul", "concat", "reduce_max", "pad", "split", "where", "math",
                 "clip_by_global_norm", "shape"):
        assert getattr(v1, name) is getattr(tf, name), name
    with pytest.raises(NotImplementedError, match="tf.compat.v1.einsum"):
        v1.einsum  # noqa: B018 - the attribute access raises


def test_config_threads_reach_the_run_config():
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        assert tf.config.threading.get_intra_op_parallelism_threads() == 1
        assert tf.estimator.RunConfig()._c().num_threads == 1
        cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=2)
        assert tf.estimator.RunConfig(session_config=cfg)._c().num_threads == 2  # the session_config wins
        tf.config.threading.set_inter_op_parallelism_threads(3)
        assert tf.config.threading.get_inter_op_parallelism_threads() == 3
        tf.config.experimental.enable_op_determinism()
        with pytest.raises(ValueError, match="int >= 0"):
            tf.config.threading.set_intra_op_parallelism_threads(-1)
        with pytest.raises(NotImplementedError, match="tf.config.list_physical_devices"):
            tf.config.list_physical_devices  # noqa: B018 - the attribute access raises
    finally:
        tf.config.threading.set_intra_op_parallelism_threads(0)
        tf.config.threading.set_inter_op_parallelism_threads(0)
    assert tf.estimator.RunConfig()._c().num_threads == 0
