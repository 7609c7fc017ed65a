"""tf.data.Dataset.from_generator (loom_dataset_from_generator): elements,
passes (the generator is called again for each), conversion to the declared
dtypes, an estimator trained from it as from the same arrays, and the errors:
an element of another shape, an exception in the generator, signatures loom
cannot take."""
import gc

import numpy as np
import pytest

import loom.tf as tf
from loom.tf import _data_generator

X = np.array([[1.0, 2.0], [0.5, -1.0], [-1.5, 0.5], [2.0, 1.0], [0.0, 3.0], [1.0, 1.0]])
Y = np.array([3.0, -0.5, -1.0, 3.0, 3.5, 2.0])


def _rows(n=len(X)):
    for i in range(n):
        yield {"x": X[i]}, Y[i]


SIG = dict(output_types=({"x": tf.float32}, tf.float32), output_shapes=({"x": [2]}, []))


def test_elements_passes_and_dtypes():
    calls = []

    def gen(n):
        calls.append(n)
        yield from _rows(n)
    ds = tf.data.Dataset.from_generator(gen, args=(4,), **SIG)
    assert ds.element_spec == ({"x": (tf.float32, (2,))}, (tf.float32, ()))
    got = list(ds.repeat(2).batch(3))
    assert calls == [4, 4]
    xs = np.concatenate([f["x"] for f, _ in got])
    ys = np.concatenate([lab for _, lab in got])
    np.testing.assert_array_equal(xs, np.concatenate([X[:4], X[:4]]).astype(np.float32))
    np.testing.assert_array_equal(ys, np.concatenate([Y[:4], Y[:4]]).astype(np.float32))
    assert xs.dtype == np.float32 and [len(lab) for _, lab in got] == [3, 3, 2]
    words = tf.data.Dataset.from_generator(lambda: iter([b"ab", b"c\x00d"]),
                                           output_signature=tf.TensorSpec(shape=(), dtype=tf.string))
    assert list(words) == [b"ab", b"c\x00d"]
    ragged = tf.data.Dataset.from_generator(lambda: iter([np.arange(3), np.arange(1)]),
                                            output_signature=tf.TensorSpec(shape=(None,), dtype=tf.int64))
    assert [v.tolist() for v in ragged] == [[0, 1, 2], [0]]


def test_estimator_trains_from_a_generator_as_from_the_arrays(tmp_path):
    def fit(input_fn, d):
        est = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x", shape=[2])],
                                           model_dir=str(tmp_path / d), optimizer=tf.keras.optimizers.legacy.SGD(0.05))
        est.train(input_fn, steps=20)
        return est.get_variable_value("linear/linear_model/x/weights")
    w_gen = fit(lambda: tf.data.Dataset.from_generator(_rows, **SIG).repeat().batch(3), "gen")
    w_arr = fit(lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(3), "arr")
    np.testing.assert_array_equal(w_gen, w_arr)
    assert np.abs(w_gen).sum() > 0.1


def test_callbacks_live_with_the_loom_dataset():
    before = len(_data_generator._alive)
    ds = tf.data.Dataset.from_generator(_rows, **SIG).batch(2)
    it = iter(ds)
    gc.collect()  # the generator's own loom wrapper is gone: the batch holds the C dataset
    assert len(list(it)) == 3
    del it, ds
    gc.collect()
    assert len(_data_generator._alive) == before


def test_errors_name_the_component_and_the_exception():
    bad_shape = tf.data.Dataset.from_generator(lambda: iter([({"x": X[0, :1]}, Y[0])]), **SIG)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"component 'x' of the element is float32 \[1\], the "
                                                             r"declared spec is float32 \[2\]"):
        list(bad_shape)

    def boom():
        yield {"x": X[0]}, Y[0]
        raise ValueError("no more rows today")
    with pytest.raises(tf.errors.UnknownError, match="the generator raised ValueError: no more rows today"):
        list(tf.data.Dataset.from_generator(boom, **SIG))
    with pytest.raises(tf.errors.UnknownError, match="not a dict"):
        list(tf.data.Dataset.from_generator(lambda: iter([(X[0], Y[0])]), **SIG))
    with pytest.raises(NotImplementedError, match="shape of .* is not given"):
        tf.data.Dataset.from_generator(_rows, output_types=({"x": tf.float32}, tf.float32))
    with pytest.raises(TypeError, match="can not be used together"):
        tf.data.Dataset.from_generator(_rows, output_types=tf.float32, output_signature=tf.TensorSpec([], tf.float32))
    with pytest.raises(TypeError, match="must be a Python callable"):
        tf.data.Dataset.from_generator(_rows(), **SIG)
