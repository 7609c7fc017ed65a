"""Optimizer.compute_gradients / apply_gradients with tf.clip_by_global_norm,
tf.clip_by_norm, tf.linalg.global_norm and IndexedSlices in a custom
model_fn: the values after one step and the norms against numpy."""
import numpy as np
import pytest

import loom.tf as tf

v1 = tf.compat.v1
X = np.array([[1.0, -2.0, 0.5], [0.0, 1.5, -1.0], [2.0, 0.0, 1.0], [-1.0, -1.0, 2.0]], np.float32)
Y = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
W0 = np.array([[0.5], [-0.25], [1.0]], np.float32)


def _input():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4)


def _grads(w):
    r = X @ w - Y  # d mean((Xw - y)^2) / dw
    return 2 * X.T @ r / len(X)


def _estimator(tmp_path, train_op_of, seen=None):
    def model_fn(features, labels, mode):
        w = v1.get_variable("w", [3, 1], initializer=v1.constant_initializer(0.0))
        w0 = w + tf.constant(W0)  # the variable starts at 0: W0 is added
        loss = v1.losses.mean_squared_error(labels, tf.matmul(features["x"], w0))
        if mode == tf.estimator.ModeKeys.EVAL:
            opt = v1.train.GradientDescentOptimizer(1.0)
            (gw, var), = opt.compute_gradients(loss)
            clipped, norm = tf.clip_by_global_norm([gw, None], 0.5)
            metrics = {"norm": v1.metrics.mean(norm), "norm2": v1.metrics.mean(tf.linalg.global_norm([gw])),
                       "clipped0": v1.metrics.mean(clipped[0][0, 0]),
                       "by_norm0": v1.metrics.mean(tf.clip_by_norm(gw, 0.1)[0, 0])}
            if seen is not None:
                seen["eval"] = (var.name, clipped[1])
            return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op_of(loss))
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(_input, steps=1)
    return est


def test_clipped_step_and_norms(tmp_path):
    def train_op_of(loss):
        opt = v1.train.GradientDescentOptimizer(1.0)
        grads, variables = zip(*opt.compute_gradients(loss))
        clipped, _ = tf.clip_by_global_norm(grads, 0.5)
        return opt.apply_gradients(zip(clipped, variables), global_step=v1.train.get_global_step())
    seen = {}
    est = _estimator(tmp_path, train_op_of, seen)
    g = _grads(W0)
    n = np.sqrt((g ** 2).sum())
    assert n > 0.5  # the step is clipped
    np.testing.assert_allclose(est.get_variable_value("w"), -g * 0.5 / n, rtol=1e-5)
    assert est.get_variable_value("global_step") == 1
    w1 = W0 - g * 0.5 / n
    m = est.evaluate(_input, steps=1)
    g1 = _grads(w1)
    n1 = np.sqrt((g1 ** 2).sum())
    np.testing.assert_allclose([m["norm"], m["norm2"]], [n1, n1], rtol=1e-5)
    np.testing.assert_allclose(m["clipped0"], g1[0, 0] * 0.5 / max(n1, 0.5), rtol=1e-5)
    np.testing.assert_allclose(m["by_norm0"], g1[0, 0] * 0.1 / max(n1, 0.1), rtol=1e-5)
    assert seen["eval"] == ("w:0", None)


def test_embedding_gradient_stays_sparse(tmp_path):
    ids = np.array([[1], [3], [1], [0]], np.int64)
    seen = {}

    def model_fn(features, labels, mode):
        table = v1.get_variable("emb", [5, 1], initializer=v1.constant_initializer(0.5))
        pred = tf.reshape(tf.nn.embedding_lookup(table, features["ids"][:, 0]), [-1, 1])
        loss = v1.losses.mean_squared_error(labels, pred)
        opt = v1.train.GradientDescentOptimizer(0.1)
        gv = opt.compute_gradients(loss)
        seen["kind"] = type(gv[0][0]).__name__
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=opt.apply_gradients(
            gv, global_step=v1.train.get_global_step()))
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"ids": ids}, Y)).batch(4), steps=1)
    assert seen["kind"] == "IndexedSlices"
    want = np.full(5, 0.5)
    for i, y in zip(ids[:, 0], Y[:, 0]):  # repeated ids add their rows' gradients
        want[i] -= 0.1 * 2 * (0.5 - y) / len(Y)
    np.testing.assert_allclose(est.get_variable_value("emb").ravel(), want, rtol=1e-6)


def test_errors_name_the_problem(tmp_path):
    def no_grads(loss):
        opt = v1.train.GradientDescentOptimizer(0.1)
        return opt.apply_gradients([(None, v) for v in v1.trainable_variables()],
                                   global_step=v1.train.get_global_step())
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        _estimator(tmp_path / "a", no_grads)

    def not_a_var(loss):
        opt = v1.train.GradientDescentOptimizer(0.1)
        return opt.apply_gradients([(loss, loss)], global_step=v1.train.get_global_step())
    with pytest.raises(ValueError, match="is not a variable of the model_fn"):
        _estimator(tmp_path / "b", not_a_var)

    def use_norm(loss):
        opt = v1.train.GradientDescentOptimizer(0.1)
        tf.clip_by_global_norm([g for g, _ in opt.compute_gradients(loss)], 1.0, use_norm=loss)
    with pytest.raises(NotImplementedError, match="use_norm"):
        _estimator(tmp_path / "c", use_norm)
    with pytest.raises(TypeError, match="t_list should be a sequence"):
        tf.clip_by_global_norm(3.0, 1.0)
