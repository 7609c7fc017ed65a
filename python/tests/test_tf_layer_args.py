"""The layers' initializer and regularizer arguments (tf.compat.v1.layers.dense
/ conv2d, tf.keras.layers.Dense / Conv2D, tf.compat.v1.get_variable's
regularizer), tf.keras.regularizers and tf.compat.v1.add_to_collection /
losses.add_loss: initial values, penalties and their gradients against numpy."""
import numpy as np
import pytest

import loom.tf as tf

v1 = tf.compat.v1
X = np.array([[1.0, -2.0, 0.5], [0.0, 1.5, -1.0], [2.0, 0.0, 1.0], [-1.0, -1.0, 2.0]], np.float32)
Y = np.array([0, 2, 1, 2], np.int32)


def _xent(logits, y):
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    p = np.exp(logp)
    onehot = np.eye(logits.shape[1])[y]
    return -(onehot * logp).sum(1).mean(), (p - onehot) / len(y)  # mean loss, d loss / d logits


def _estimator(tmp_path, layer, lr, seen=None):
    def model_fn(features, labels, mode):
        logits = layer(features["x"])
        reg = v1.losses.get_regularization_loss()
        if seen is not None:
            seen["names"] = [t.name for t in v1.losses.get_regularization_losses()]
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits) + reg
        if mode == tf.estimator.ModeKeys.EVAL:
            return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"reg": v1.metrics.mean(reg)})
        train_op = v1.train.GradientDescentOptimizer(lr).minimize(loss, global_step=v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), config=tf.estimator.RunConfig(tf_random_seed=3))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4), steps=1)
    return est


def test_dense_initializers_and_penalties_in_loss_and_gradient(tmp_path):
    layer = lambda x: v1.layers.dense(  # noqa: E731
        x, 3, kernel_initializer=v1.constant_initializer(0.25), bias_initializer=tf.keras.initializers.Constant(-0.5),
        kernel_regularizer=tf.keras.regularizers.l2(0.03), bias_regularizer=tf.keras.regularizers.L1(0.2))
    seen = {}
    est = _estimator(tmp_path / "w0", layer, 0.0, seen)  # the initial values
    w0, b0 = est.get_variable_value("dense/kernel"), est.get_variable_value("dense/bias")
    np.testing.assert_array_equal(w0, np.full((3, 3), 0.25, np.float32))
    np.testing.assert_array_equal(b0, np.full(3, -0.5, np.float32))
    assert len(seen["names"]) == 2, seen
    reg = 0.03 * (w0 ** 2).sum() + 0.2 * np.abs(b0).sum()  # Keras's L2: l2 * sum(w^2)
    m = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4), steps=1)
    xent, dlogits = _xent(X @ w0 + b0, Y)
    np.testing.assert_allclose(m["reg"], reg, rtol=1e-6)
    np.testing.assert_allclose(m["loss"], xent + reg, rtol=1e-6)
    # one step at 0.1: the penalties' gradients are 2 l2 w and l1 sign(b)
    est = _estimator(tmp_path / "w1", layer, 0.1)
    np.testing.assert_allclose(est.get_variable_value("dense/kernel"), w0 - 0.1 * (X.T @ dlogits + 0.06 * w0),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(est.get_variable_value("dense/bias"),
                               b0 - 0.1 * (dlogits.sum(0) + 0.2 * np.sign(b0)), rtol=1e-5, atol=1e-7)


def test_conv2d_initializer_names_and_l1_l2(tmp_path):
    def layer(x):
        img = tf.reshape(tf.tile(x, [1, 3]), [-1, 3, 3, 1])
        h = v1.layers.conv2d(img, 2, 2, kernel_initializer="ones", bias_initializer=v1.zeros_initializer(),
                             kernel_regularizer=tf.keras.regularizers.l1_l2(l1=0.01, l2=0.02), name="c")
        return v1.layers.dense(v1.layers.flatten(h), 3, kernel_initializer=tf.keras.initializers.Zeros(), name="d")
    est = _estimator(tmp_path, layer, 0.0)
    k = est.get_variable_value("c/kernel")
    assert k.shape == (2, 2, 1, 2) and (k == 1).all()
    m = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4), steps=1)
    np.testing.assert_allclose(m["reg"], 0.01 * 8 + 0.02 * 8, rtol=1e-6)
    np.testing.assert_allclose(m["loss"], np.log(3) + 0.01 * 8 + 0.02 * 8, rtol=1e-6)  # zero logits


def test_get_variable_regularizer_and_add_loss(tmp_path):
    seen = {}

    def model_fn(features, labels, mode):
        w = v1.get_variable("w", [3, 3], initializer=v1.constant_initializer(0.5),
                            regularizer=lambda t: 0.1 * tf.reduce_sum(t * t))
        v1.get_variable("none", [2], regularizer=lambda t: None)  # None: TF adds nothing
        logits = tf.matmul(features["x"], w)
        v1.losses.add_loss(0.0 * tf.reduce_sum(logits))
        v1.add_to_collection(v1.GraphKeys.REGULARIZATION_LOSSES, tf.keras.regularizers.L2(0.5)(w))
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits) + v1.losses.get_regularization_loss()
        seen["n"] = (len(v1.losses.get_regularization_losses()), len(v1.get_collection(v1.GraphKeys.LOSSES)))
        train_op = v1.train.GradientDescentOptimizer(0.0).minimize(loss, global_step=v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4), steps=1)
    assert seen["n"] == (2, 2), seen  # the sparse softmax loss and the added one
    m = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4), steps=1)
    w = np.full((3, 3), 0.5, np.float32)
    np.testing.assert_allclose(m["loss"], _xent(X @ w, Y)[0] + 0.1 * 2.25 + 0.5 * 2.25, rtol=1e-6)


def test_keras_layers_take_regularizers_and_initializers():
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(4, activation="relu", kernel_initializer=tf.keras.initializers.RandomNormal(
            mean=1.0, stddev=0.01, seed=1), kernel_regularizer=tf.keras.regularizers.l2(0.01), input_shape=(3,)),
        tf.keras.layers.Dense(3, kernel_initializer="zeros", bias_regularizer="l1")])
    model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    w = model.get_weights()
    assert abs(w[0].mean() - 1.0) < 0.02 and w[0].std() < 0.03 and (w[2] == 0).all()  # not Glorot's
    got = model.evaluate(X, Y, verbose=0)
    # zero logits: log 3, plus the first kernel's l2 and the zero bias's l1 (Keras adds model.losses)
    np.testing.assert_allclose(got, np.log(3) + 0.01 * (w[0] ** 2).sum(), rtol=1e-5)


def test_keras_initializers_defaults():
    rn, ru = tf.keras.initializers.RandomNormal(), tf.keras.initializers.RandomUniform()
    assert (rn.mean, rn.stddev, ru.minval, ru.maxval) == (0.0, 0.05, -0.05, 0.05)
    assert tf.keras.initializers.TruncatedNormal().stddev == 0.05
    assert tf.keras.initializers.glorot_uniform is tf.keras.initializers.GlorotUniform


def test_regularizer_arguments_checked_as_keras():
    c = float(np.float32(0.01))  # Keras keeps the penalties as float32
    assert tf.keras.regularizers.l2().get_config() == {"l2": c}
    assert tf.keras.regularizers.L1L2().get_config() == {"l1": 0.0, "l2": 0.0}
    assert tf.keras.regularizers.l1_l2().get_config() == {"l1": c, "l2": c}
    assert tf.keras.regularizers.get("l1").get_config() == {"l1": c}
    with pytest.raises(ValueError, match="big is not a valid regularization penalty number, expected an int"):
        tf.keras.regularizers.l2("big")
    with pytest.raises(ValueError, match="nan is not a valid regularization penalty number, an infinite"):
        tf.keras.regularizers.L1(float("nan"))


def test_unsupported_layer_arguments_name_the_argument(tmp_path):
    def try_layer(**kw):
        def model_fn(features, labels, mode):
            v1.layers.dense(features["x"], 2, **kw)
        est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
        est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4), steps=1)
    with pytest.raises(NotImplementedError, match=r"dense\(kernel_regularizer=.*trainable_variables"):
        try_layer(kernel_regularizer=lambda w: tf.reduce_sum(w))
    with pytest.raises(NotImplementedError, match=r"dense\(kernel_initializer='bogus'\).*glorot_uniform"):
        try_layer(kernel_initializer="bogus")
    with pytest.raises(NotImplementedError, match=r"dense\(kernel_constraint=...\)"):
        try_layer(kernel_constraint=lambda w: w)
    with pytest.raises(NotImplementedError, match=r"Dense\(kernel_regularizer="):
        tf.keras.layers.Dense(2, kernel_regularizer=lambda w: w)
