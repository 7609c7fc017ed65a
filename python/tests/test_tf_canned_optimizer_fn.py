"""A canned estimator's optimizer as TF's canned estimators take it beyond a
name: a callable the estimator calls while it builds the training graph
(its learning rate a tf.compat.v1.train decay of get_global_step()), a
tf.keras.optimizers.schedules schedule (evaluated at the global step), and
the Keras optimizers' own arguments. The weights after two steps of a
LinearRegressor (zero start, one batch) against the update rules in numpy."""
import numpy as np
import pytest

import loom.tf as tf

X = np.array([[1.0, 2.0], [0.5, -1.0], [-1.5, 0.5], [2.0, 1.0]], np.float32)
Y = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
legacy = tf.keras.optimizers.legacy


def _train(tmp_path, optimizer, steps=2):
    est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x", shape=[2])], model_dir=str(tmp_path),
                                       optimizer=optimizer)
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(4), steps=steps)
    return est


def _grad(w, b):
    """d/d(w, b) of mean((X w + b - y)^2) (the head's loss, summed over the batch / batch size)."""
    r = X @ w + b - Y[:, 0]
    return 2 * X.T @ r / len(X), 2 * r.mean()


def _weights(est):
    return (est.get_variable_value("linear/linear_model/x/weights").ravel(),
            est.get_variable_value("linear/linear_model/bias_weights").ravel()[0])


def _sgd(rates):
    w, b = np.zeros(2), 0.0
    for lr in rates:
        gw, gb = _grad(w, b)
        w, b = w - lr * gw, b - lr * gb
    return w, b


def _check(est, want):
    w, b = _weights(est)
    np.testing.assert_allclose(w, want[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(b, want[1], rtol=1e-5, atol=1e-7)


def test_callable_with_a_decay_of_the_global_step(tmp_path):
    made = []

    def optimizer():
        made.append(1)
        return legacy.SGD(learning_rate=tf.compat.v1.train.exponential_decay(
            0.1, tf.compat.v1.train.get_global_step(), 1, 0.5, staircase=True))
    est = _train(tmp_path, optimizer)
    _check(est, _sgd([0.1, 0.05]))  # steps 0 and 1: 0.1 * 0.5^step
    assert made == [1]  # once per training graph
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4), steps=1)
    assert made == [1, 1]
    _check(est, _sgd([0.1, 0.05, 0.025]))  # the rate follows the global step across calls


@pytest.mark.parametrize("schedule,rates", [
    (lambda: tf.keras.optimizers.schedules.ExponentialDecay(0.1, 1, 0.5, staircase=True), [0.1, 0.05]),
    (lambda: tf.keras.optimizers.schedules.PiecewiseConstantDecay([0], [0.2, 0.03]), [0.2, 0.03]),
    (lambda: tf.keras.optimizers.schedules.PolynomialDecay(0.1, 2, end_learning_rate=0.02), [0.1, 0.06]),
    (lambda: tf.keras.optimizers.schedules.InverseTimeDecay(0.1, 1, 1.0), [0.1, 0.05]),
])
def test_keras_schedules_at_the_global_step(tmp_path, schedule, rates):
    _check(_train(tmp_path, legacy.SGD(learning_rate=schedule())), _sgd(rates))


def test_adam_and_adagrad_arguments(tmp_path):
    b1, b2, eps, lr = 0.5, 0.9, 1e-3, 0.1
    w, b, m, v = np.zeros(3), 0.0, np.zeros(3), np.zeros(3)
    for t in (1, 2):
        gw, gb = _grad(w[:2], w[2])
        g = np.append(gw, gb)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        w = w - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
    _check(_train(tmp_path / "adam", legacy.Adam(learning_rate=lr, beta_1=b1, beta_2=b2, epsilon=eps)),
           (w[:2], w[2]))
    gw, gb = _grad(np.zeros(2), 0.0)
    _check(_train(tmp_path / "adagrad", legacy.Adagrad(0.1, initial_accumulator_value=0.5), steps=1),
           (-0.1 * gw / np.sqrt(0.5 + gw * gw), -0.1 * gb / np.sqrt(0.5 + gb * gb)))


def test_ftrl_strengths_reach_the_update(tmp_path):
    w, b = _weights(_train(tmp_path / "l1", legacy.Ftrl(0.5, l1_regularization_strength=100.0), steps=1))
    assert (w == 0).all() and b == 0  # FTRL-proximal: |z| <= l1 leaves the weight at 0
    w, b = _weights(_train(tmp_path / "none", legacy.Ftrl(0.5), steps=1))
    assert (w != 0).all() and b != 0


def test_callable_errors_surface_unchanged(tmp_path):
    def boom():
        raise ZeroDivisionError("my optimizer factory")
    with pytest.raises(ZeroDivisionError, match="my optimizer factory"):
        _train(tmp_path / "a", boom)
    with pytest.raises(ValueError, match="not a tf.keras.optimizers.Optimizer instance. Given: adam"):
        _train(tmp_path / "b", lambda: "adam")
    with pytest.raises(NotImplementedError, match=r"Adam\(amsgrad=True\)"):
        legacy.Adam(amsgrad=True)
    with pytest.raises(NotImplementedError, match=r"SGD\(momentum=0.9\)"):
        legacy.SGD(momentum=0.9)
    with pytest.raises(NotImplementedError, match="Sequential takes TF's default beta_1"):
        m = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))])
        m.compile(optimizer=legacy.Adam(beta_1=0.5), loss="mse")
