"""tf.estimator's heads in loom.tf against TF 2.15 (python/tests/fixtures/
tf_heads.json, written by scripts/gen_tf_head_fixtures.py): for each case,
fixed logits (the feature "x", no trainable variable but an unused dummy)
and labels with the weight column "w" -> one evaluate's loss and eval
metrics, and predict's predictions, as TF's head.loss, update_metrics and
predictions give them; a MultiClassHead model trained on iris; errors."""
import json
import os

import numpy as np
import pytest

import loom.tf as tf
from iris_data import iris

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "fixtures", "tf_heads.json")) as _f:
    FIX = json.load(_f)
W = np.array(FIX["weights"], np.float32).reshape(-1, 1)
MC_VOCAB, BIN_VOCAB = ["cat", "dog", "bird"], ["neg", "pos"]


def make(name, red):
    """The head of fixture case `name` (the constructors of scripts/gen_head_fixtures.py)."""
    H = tf.estimator
    return {
        "binary": lambda: H.BinaryClassHead(weight_column="w", thresholds=(0.3, 0.7), loss_reduction=red),
        "binary_named": lambda: H.BinaryClassHead(weight_column="w", loss_reduction=red, name="bin"),
        "multi_class": lambda: H.MultiClassHead(3, weight_column="w", loss_reduction=red),
        "binary_vocab": lambda: H.BinaryClassHead(weight_column="w", label_vocabulary=BIN_VOCAB, loss_reduction=red),
        "multi_class_vocab": lambda: H.MultiClassHead(3, weight_column="w", label_vocabulary=MC_VOCAB,
                                                      loss_reduction=red),
        "multi_label": lambda: H.MultiLabelHead(3, weight_column="w", thresholds=(0.5,), loss_reduction=red),
        "regression": lambda: H.RegressionHead(label_dimension=2, weight_column="w", loss_reduction=red),
        "poisson": lambda: H.PoissonRegressionHead(weight_column="w", loss_reduction=red),
        "logistic": lambda: H.LogisticRegressionHead(weight_column="w", loss_reduction=red),
        "multi_head": lambda: H.MultiHead([H.BinaryClassHead(weight_column="w", loss_reduction=red, name="b"),
                                           H.MultiClassHead(3, weight_column="w", loss_reduction=red, name="m")],
                                          head_weights=[1.0, 2.0]),
    }[name]()


def labels_of(case):
    lab = case["labels"]
    if isinstance(lab, dict):
        return {k: np.array(v, np.int64) for k, v in lab.items()}
    arr = np.array(lab)
    if case["vocab"]:
        return arr.astype(object)
    return arr.astype(np.float32 if arr.dtype.kind == "f" else np.int64)


def fixed_logits_estimator(head, model_dir):
    def model_fn(features, labels, mode):
        dummy = tf.compat.v1.get_variable("dummy", [], initializer=tf.compat.v1.zeros_initializer())
        logits = features["x"] + 0.0 * dummy
        if isinstance(head, tf.estimator.MultiHead) and mode != tf.estimator.ModeKeys.PREDICT:
            # loom.tf's Dataset has no dict labels: the heads' labels travel as features "b" and "m"
            labels = {h.name: features[h.name] for h in head.heads}
        return head.create_estimator_spec(features=features, mode=mode, logits=logits, labels=labels,
                                          optimizer=tf.keras.optimizers.SGD(0.1), trainable_variables=[dummy])
    return tf.estimator.Estimator(model_fn, model_dir=str(model_dir))


def check_metrics(got, want, what):
    for k, v in want.items():
        # AUCs: loom's rates carry tf.compat.v1's epsilon 1e-6 where Keras divides without one
        tol = 1e-5 if k.startswith("auc") else 1e-6
        assert got[k] == pytest.approx(v, rel=1e-5, abs=tol), "%s: %s" % (what, k)


@pytest.mark.parametrize("name", sorted(FIX["cases"]))
@pytest.mark.parametrize("red", ["sum_over_batch_size", "sum"])
def test_head_matches_tf(tmp_path, name, red):
    case = FIX["cases"][name]
    X = np.array(case["logits"], np.float32)
    Y = labels_of(case)
    head = make(name, red)
    assert head.loss_reduction == red and head.logits_dimension == X.shape[1]
    est = fixed_logits_estimator(head, tmp_path)
    feats = {"x": X, "w": W}
    if isinstance(Y, dict):
        feats.update(Y)
        Y = Y["b"]
    r = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices((feats, Y)).batch(4), steps=1)
    want_loss = case["loss_sobs"] if red == "sum_over_batch_size" else case["loss_sum"]
    assert r["loss"] == pytest.approx(want_loss, rel=1e-5)
    extra = set(r) - set(case["metrics"]) - {"loss", "global_step"}
    assert not extra and set(case["metrics"]) <= set(r)
    # TF's metrics do not depend on the loss reduction, but for a multi-head's "loss/<head>" (the head's loss)
    check_metrics(r, {k: v for k, v in case["metrics"].items() if red != "sum" or not k.startswith("loss/")}, name)
    if name == "multi_head" and red == "sum":  # its heads are the cases binary and multi_class (same logits, labels)
        cs = FIX["cases"]
        assert cs["binary"]["logits"] == [[r[0]] for r in case["logits"]]
        assert cs["multi_class"]["logits"] == [r[1:] for r in case["logits"]]
        check_metrics(r, {"loss/b": cs["binary"]["loss_sum"], "loss/m": cs["multi_class"]["loss_sum"]}, name)
    preds = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X, "w": W}).batch(4)))
    assert len(preds) == 4 and set(preds[0]) == set(case["predictions"])
    for k, spec in case["predictions"].items():
        got = np.array([p[k] for p in preds])
        want = np.array(spec["value"])
        if spec["dtype"] == "string":
            assert [[s.decode() for s in row] for row in got] == spec["value"], k
        else:
            assert got.shape == want.shape, k
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=k)


def iris_model_fn(optimizer, shapes):
    head = tf.estimator.MultiClassHead(n_classes=3)

    def model_fn(features, labels, mode):
        net = tf.compat.v1.layers.dense(features["x"], 16, activation=tf.nn.relu)
        logits = tf.compat.v1.layers.dense(net, head.logits_dimension)
        shapes[:] = [v.shape for v in tf.compat.v1.trainable_variables()]
        if optimizer == "train_op_fn":
            def train_op_fn(loss):
                return tf.compat.v1.train.AdagradOptimizer(0.1).minimize(
                    loss, global_step=tf.compat.v1.train.get_global_step())
            return head.create_estimator_spec(features=features, mode=mode, logits=logits, labels=labels,
                                              train_op_fn=train_op_fn)
        return head.create_estimator_spec(features=features, mode=mode, logits=logits, labels=labels,
                                          optimizer=optimizer,
                                          trainable_variables=tf.compat.v1.trainable_variables())
    return model_fn


@pytest.mark.parametrize("name", sorted(FIX["regularized"]))
def test_regularization_losses_as_tf(tmp_path, name):
    """create_estimator_spec(regularization_losses=...): TF's loss (plus their sum) and its
    "regularization_loss" metric; the train op minimizes the regularized loss."""
    case, want = FIX["cases"][name], FIX["regularized"][name]
    X = np.array(case["logits"], np.float32)
    Y = labels_of(case)
    head = make(name, "sum_over_batch_size")
    seen = {}

    def model_fn(features, labels, mode):
        dummy = tf.compat.v1.get_variable("dummy", [], initializer=tf.compat.v1.zeros_initializer())
        logits = features["x"] + 0.0 * dummy
        if isinstance(head, tf.estimator.MultiHead):
            labels = {h.name: features[h.name] for h in head.heads}
        regs = [tf.constant(FIX["regularization_losses"][0]), FIX["regularization_losses"][1]]

        def train_op_fn(loss):
            seen["train_loss"] = loss
            return tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
                loss, global_step=tf.compat.v1.train.get_global_step())
        spec = head.create_estimator_spec(features=features, mode=mode, logits=logits, labels=labels,
                                          train_op_fn=train_op_fn, regularization_losses=regs)
        if mode == tf.estimator.ModeKeys.TRAIN:
            assert spec.loss is seen["train_loss"]  # the regularized loss, as TF's
        return spec
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    feats = {"x": X, "w": W}
    if isinstance(Y, dict):
        feats.update(Y)
        Y = Y["b"]
    est.train(lambda: tf.data.Dataset.from_tensor_slices((feats, Y)).repeat().batch(4), steps=1)
    r = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices((feats, Y)).batch(4), steps=1)
    assert r["loss"] == pytest.approx(want["loss"], rel=1e-5)
    assert set(r) - {"loss", "global_step"} == set(want["metrics"])
    check_metrics(r, want["metrics"], name)


@pytest.mark.parametrize("optimizer", ["keras", "v1", "train_op_fn"])
def test_multi_class_head_trains_on_iris(tmp_path, optimizer):
    X, y = iris()
    X = (X - X.mean(0)) / X.std(0)
    opt = {"keras": tf.keras.optimizers.Adagrad(0.1), "v1": tf.compat.v1.train.AdagradOptimizer(0.1)}.get(
        optimizer, optimizer)
    shapes = []
    est = tf.estimator.Estimator(iris_model_fn(opt, shapes), model_dir=str(tmp_path),
                                 config=tf.estimator.RunConfig(tf_random_seed=1))

    def inp():
        return tf.data.Dataset.from_tensor_slices(({"x": X}, y)).batch(150)
    est.train(lambda: inp().repeat(), steps=1)
    before = est.evaluate(inp)
    est.train(lambda: inp().repeat(), steps=200)
    after = est.evaluate(inp)
    assert after["global_step"] == 201
    assert shapes == [(4, 16), (16,), (16, 3), (3,)]  # tf.compat.v1.trainable_variables: kernels and biases
    assert after["accuracy"] > 0.9 and after["accuracy"] > before["accuracy"]
    assert after["loss"] < before["loss"] and after["average_loss"] == pytest.approx(after["loss"], rel=1e-5)
    p = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X[:5]}).batch(5)))
    assert [int(q["class_ids"][0]) for q in p] == [0] * 5 and p[0]["probabilities"].sum() == pytest.approx(1.0)


def test_head_model_exports_tfs_signatures(tmp_path):
    X, y = iris()
    X = (X - X.mean(0)) / X.std(0)
    est = tf.estimator.Estimator(iris_model_fn(tf.keras.optimizers.Adagrad(0.1), []), model_dir=str(tmp_path))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, y)).repeat().batch(150), steps=20)
    want = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X[:5]}).batch(5),
                            yield_single_examples=False))[0]
    spec = {"x": tf.io.FixedLenFeature([4], tf.float32)}
    path = est.export_saved_model(str(tmp_path / "e"),
                                  tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    sigs = tf.saved_model.load(path.decode()).signatures
    assert set(sigs) == {"serving_default", "classification", "predict"}  # the multi-class head's, as TF's
    rows = tf.constant([tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=r))})).SerializeToString() for r in X[:5]])
    out = sigs["predict"](examples=rows)
    assert set(out) == {"logits", "probabilities", "class_ids", "classes", "all_class_ids", "all_classes"}
    np.testing.assert_allclose(out["probabilities"].numpy(), want["probabilities"], rtol=1e-5)
    cls = sigs["classification"](inputs=rows)
    np.testing.assert_allclose(cls["scores"].numpy(), want["probabilities"], rtol=1e-5)
    assert [[c.decode() for c in r] for r in cls["classes"].numpy()] == [["0", "1", "2"]] * 5


def run_eval(tmp_path, head, X, Y, logits_fn=None):
    est = fixed_logits_estimator(head, tmp_path)
    return est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X, "w": W}, Y)).batch(4), steps=1)


def test_wrong_logits_dimension_is_named(tmp_path):
    X = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match=r"logits shape .*\[None, 2\].*logits_dimension 3"):
        run_eval(tmp_path, tf.estimator.MultiClassHead(3), X, np.zeros((4, 1), np.int64))


def test_label_out_of_range_is_named(tmp_path):
    X = np.zeros((4, 3), np.float32)
    Y = np.array([[0], [1], [5], [2]], np.int64)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"5 is not in \[0, 3\)"):
        run_eval(tmp_path, tf.estimator.MultiClassHead(3), X, Y)
    with pytest.raises(tf.errors.InvalidArgumentError, match="'ant'.*not in the vocabulary"):
        run_eval(tmp_path / "v", tf.estimator.MultiClassHead(3, label_vocabulary=MC_VOCAB), X,
                 np.array([["cat"], ["dog"], ["ant"], ["bird"]], object))


def test_constructor_errors():
    H = tf.estimator
    with pytest.raises(ValueError, match="n_classes must be > 2"):
        H.MultiClassHead(2)
    with pytest.raises(ValueError, match="n_classes must be > 1"):
        H.MultiLabelHead(1)
    with pytest.raises(ValueError, match="thresholds not in"):
        H.BinaryClassHead(thresholds=[1.5])
    with pytest.raises(ValueError, match="Invalid loss_reduction"):
        H.RegressionHead(loss_reduction="none")
    with pytest.raises(ValueError, match="label_vocabulary"):
        H.MultiClassHead(3, label_vocabulary=["a", "b"])
    with pytest.raises(ValueError, match="Invalid label_dimension"):
        H.RegressionHead(label_dimension=0)
    with pytest.raises(ValueError, match="must have name"):
        H.MultiHead([H.RegressionHead(), H.BinaryClassHead(name="b")])
    for make, arg in ((lambda: H.MultiClassHead(3, loss_fn=lambda labels, logits: logits), "loss_fn"),
                      (lambda: H.RegressionHead(inverse_link_fn=lambda x: x), "inverse_link_fn"),
                      (lambda: H.MultiLabelHead(3, classes_for_class_based_metrics=[0]),
                       "classes_for_class_based_metrics"),
                      (lambda: H.MultiLabelHead(3, label_vocabulary=["a", "b", "c"]), "label_vocabulary")):
        with pytest.raises(NotImplementedError, match=arg):
            make()


def test_properties():
    H = tf.estimator
    assert H.BinaryClassHead().logits_dimension == 1 and H.BinaryClassHead().name is None
    assert H.MultiLabelHead(4, name="tags").logits_dimension == 4 and H.MultiLabelHead(4, name="tags").name == "tags"
    assert H.RegressionHead(label_dimension=3).logits_dimension == 3
    assert H.LogisticRegressionHead(loss_reduction="sum").loss_reduction == "sum"
    m = H.MultiHead([H.BinaryClassHead(name="b"), H.MultiClassHead(3, name="m")])
    assert m.logits_dimension == 4 and m.name == "b_m" and [h.name for h in m.heads] == ["b", "m"]


def test_create_estimator_spec_train_op_errors(tmp_path):
    X, Y = np.zeros((4, 3), np.float32), np.zeros((4, 1), np.int64)
    head = tf.estimator.MultiClassHead(3)

    def fit(**kw):
        def model_fn(features, labels, mode):
            logits = tf.compat.v1.layers.dense(features["x"], 3)
            if callable(kw.get("trainable_variables")):  # a list of the model_fn's variables
                kw["trainable_variables"] = kw["trainable_variables"]()
            return head.create_estimator_spec(features=features, mode=mode, logits=logits, labels=labels, **kw)
        est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
        est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(4), steps=1)
    with pytest.raises(ValueError, match="cannot both be None"):
        fit()
    with pytest.raises(ValueError, match="cannot both be set"):
        fit(optimizer=tf.keras.optimizers.SGD(0.1), trainable_variables=[], train_op_fn=lambda loss: None)
    with pytest.raises(ValueError, match="trainable_variables cannot be None"):
        fit(optimizer=tf.keras.optimizers.SGD(0.1))
    with pytest.raises(ValueError, match="not a tf.keras.optimizers.Optimizer"):
        fit(optimizer="sgd", trainable_variables=[])
    with pytest.raises(NotImplementedError, match="RMSprop"):
        fit(optimizer=tf.keras.optimizers.RMSprop(0.1), trainable_variables=[])
    with pytest.raises(RuntimeError, match="model_fn"):
        head.create_estimator_spec(features={}, mode="infer", logits=None)
    # loom trains every trainable variable the loss reads: a list leaving one out is not honoured silently
    with pytest.raises(NotImplementedError, match="without dense/bias:0"):
        fit(optimizer=tf.keras.optimizers.SGD(0.1),
            trainable_variables=lambda: [v for v in tf.compat.v1.trainable_variables() if "kernel" in v.name])


def test_head_methods_loom_lacks_name_their_alternative():
    for name in ("metrics", "update_metrics"):
        with pytest.raises(NotImplementedError, match=r"tf\.estimator\.MultiClassHead\.%s; instead: the head's "
                           "create_estimator_spec" % name):
            getattr(tf.estimator.MultiClassHead(3), name)
    with pytest.raises(NotImplementedError, match=r"tf\.estimator\.RegressionHead\.frobnicate"):
        tf.estimator.RegressionHead().frobnicate
    with pytest.raises(NotImplementedError, match="MultiClassHead.loss outside a model_fn"):
        tf.estimator.MultiClassHead(3).loss(labels=None, logits=None)


@pytest.mark.parametrize("name", sorted(FIX["cases"]))
@pytest.mark.parametrize("red", ["sum_over_batch_size", "sum"])
def test_head_loss_and_predictions_match_tf(tmp_path, name, red):
    """head.loss and head.predictions in a custom EstimatorSpec, as TF's (no create_estimator_spec)."""
    case = FIX["cases"][name]
    X = np.array(case["logits"], np.float32)
    Y = labels_of(case)
    head = make(name, red)

    def model_fn(features, labels, mode):
        logits = features["x"]
        if mode == tf.estimator.ModeKeys.PREDICT:
            preds = head.predictions(logits)
            assert list(head.predictions(logits, keys=[sorted(preds)[0]])) == [sorted(preds)[0]]
            return tf.estimator.EstimatorSpec(mode, predictions=preds)
        if isinstance(head, tf.estimator.MultiHead):
            labels = {h.name: features[h.name] for h in head.heads}
        return tf.estimator.EstimatorSpec(mode, loss=head.loss(labels=labels, logits=logits, features=features))
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    feats = {"x": X, "w": W}
    if isinstance(Y, dict):
        feats.update(Y)
        Y = Y["b"]
    r = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices((feats, Y)).batch(4), steps=1)
    assert r["loss"] == pytest.approx(case["loss_sobs"] if red == "sum_over_batch_size" else case["loss_sum"],
                                      rel=1e-5)
    preds = list(est.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": X}).batch(4),
                             yield_single_examples=False))[0]
    assert set(preds) == set(case["predictions"])
    for k, spec in case["predictions"].items():
        if spec["dtype"] == "string":
            assert [[s.decode() for s in row] for row in preds[k]] == spec["value"], k
        else:
            np.testing.assert_allclose(preds[k], np.array(spec["value"]), rtol=1e-5, atol=1e-6, err_msg=k)


def test_head_loss_adds_regularization_losses(tmp_path):
    head = tf.estimator.RegressionHead()
    X, Y = np.array([[1.0], [2.0]], np.float32), np.array([[0.0], [0.0]], np.float32)

    def model_fn(features, labels, mode):
        return tf.estimator.EstimatorSpec(mode, loss=head.loss(labels, features["x"],
                                                               regularization_losses=[tf.constant(0.25)]))
    r = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path)).evaluate(
        lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(2), steps=1)
    assert r["loss"] == pytest.approx((1.0 + 4.0) / 2 + 0.25)


def test_weight_column_comes_from_the_features_given(tmp_path):
    """The weight column is read from create_estimator_spec's / loss's features dict, as TF's."""
    head = tf.estimator.RegressionHead(weight_column="w")
    X, Y = np.array([[1.0], [2.0]], np.float32), np.array([[0.0], [0.0]], np.float32)

    def inp():
        return tf.data.Dataset.from_tensor_slices(({"x": X, "w": np.array([1.0, 3.0], np.float32)}, Y)).batch(2)

    def model_fn(features, labels, mode):
        doubled = dict(features, w=features["w"] * 2.0)
        return head.create_estimator_spec(features=doubled, mode=mode, logits=features["x"], labels=labels)

    def loss_fn(features, labels, mode):
        doubled = dict(features, w=features["w"] * 2.0)
        return tf.estimator.EstimatorSpec(mode, loss=head.loss(labels, features["x"], features=doubled))
    r = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "s")).evaluate(inp, steps=1)
    assert r["loss"] == pytest.approx((2 * 1.0 + 6 * 4.0) / 2)  # weights 2 and 6
    assert r["average_loss"] == pytest.approx((2 * 1.0 + 6 * 4.0) / 8)  # the weighted mean
    r = tf.estimator.Estimator(loss_fn, model_dir=str(tmp_path / "l")).evaluate(inp, steps=1)
    assert r["loss"] == pytest.approx((2 * 1.0 + 6 * 4.0) / 2)

    def no_w(features, labels, mode):
        return head.create_estimator_spec(features={"x": features["x"]}, mode=mode, logits=features["x"],
                                          labels=labels)
    with pytest.raises(ValueError, match="weight_column 'w' is not in features"):
        tf.estimator.Estimator(no_w, model_dir=str(tmp_path / "n")).evaluate(inp, steps=1)
