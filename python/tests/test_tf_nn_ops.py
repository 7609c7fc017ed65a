"""loom.tf's tf.nn convolution, pooling and normalization ops against TF
2.15 (python/tests/fixtures/tf_nn.npz, written by
scripts/gen_tf_nn_fixtures.py): forward values and, through tf.gradients,
the gradients TF's GradientTape gives; their argument errors; and the TF 1
"Deep MNIST" model_fn (get_variable filters, tf.nn.conv2d + bias, relu,
max_pool2d, AdamOptimizer) training on Fashion-MNIST in an Estimator."""
import gzip
import json
import os

import numpy as np
import pytest

import loom
import loom.tf as tf

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = np.load(os.path.join(HERE, "fixtures", "tf_nn.npz"))
CASES = json.loads(str(FIX["cases"]))
FMNIST = "/usr/share/datasets/fashion-mnist"


def _find(op, **kwargs):
    """The index of the fixture case of op with these keyword arguments."""
    return next(i for i, c in enumerate(CASES) if c["op"] == op and c["kwargs"] == kwargs)


def _case_id(i):
    c = CASES[i]
    return "%d-%s-%s" % (i, c["op"], "-".join("%s=%s" % (k, v) for k, v in c["kwargs"].items()
                                              if k in ("padding", "strides", "dilations", "axes", "keepdims")))


@pytest.mark.parametrize("i", range(len(CASES)), ids=_case_id)
def test_values_and_gradients_match_tf(i):
    case = CASES[i]
    g = loom.Graph()
    ins = {k: g.constant(FIX["%d/in/%s" % (i, k)]) for k in case["tensors"]}
    outs = getattr(tf.nn, case["op"])(**ins, **case["kwargs"])
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    assert len(outs) == case["outputs"]
    loss = None
    for k, o in enumerate(outs):
        term = tf.reduce_sum(o * g.constant(FIX["%d/w%d" % (i, k)]))
        loss = term if loss is None else loss + term
    names = list(ins)
    grads = tf.gradients(loss, [ins[k] for k in names])
    with loom.Session(g) as s:
        got = s.run(outs + grads)
    for k in range(len(outs)):
        want = FIX["%d/out%d" % (i, k)]
        assert got[k].shape == want.shape
        np.testing.assert_allclose(got[k], want, rtol=1e-4, atol=1e-4, err_msg="output %d" % k)
    for name, gv in zip(names, got[len(outs):]):
        np.testing.assert_allclose(gv, FIX["%d/grad/%s" % (i, name)], rtol=1e-4, atol=1e-4,
                                   err_msg="gradient of %s" % name)


def test_compat_v1_spellings():
    """tf.compat.v1.nn's TF 1 arguments: conv2d(input, filter, strides, padding, use_cudnn_on_gpu,
    data_format), conv2d_transpose(value, filter, ...), max_pool(value=...), moments(x, axes, shift,
    name, keep_dims), dropout(x, keep_prob)."""
    i = 0
    g = loom.Graph()
    x, w = g.constant(FIX["%d/in/input" % i]), g.constant(FIX["%d/in/filters" % i])
    y = tf.compat.v1.nn.conv2d(x, filter=w, strides=[1, 1, 1, 1], padding="SAME", use_cudnn_on_gpu=True)
    y2 = tf.compat.v1.nn.conv2d(x, w, [1, 1, 1, 1], "SAME", True, "NHWC")
    i = _find("max_pool2d", ksize=2, strides=2, padding="SAME")
    x6 = g.constant(FIX["%d/in/input" % i])
    p = tf.compat.v1.nn.max_pool(value=x6, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    m, v = tf.compat.v1.nn.moments(x6, [0, 1, 2], None, "mom", True)
    t = _find("conv2d_transpose", output_shape=[2, 8, 8, 3], strides=2, padding="SAME")
    tr = tf.compat.v1.nn.conv2d_transpose(g.constant(FIX["%d/in/input" % t]), g.constant(FIX["%d/in/filters" % t]),
                                          [2, 8, 8, 3], [1, 2, 2, 1])
    ones = g.constant(np.ones((50, 40), np.float32))
    d1, d5 = tf.compat.v1.nn.dropout(ones, 1.0), tf.compat.v1.nn.dropout(ones, keep_prob=0.25)
    with loom.Session(g) as s:
        got = s.run([y, y2, p, m, v, tr, d1, d5, g.get("mom/variance")])
    np.testing.assert_allclose(got[0], FIX["0/out0"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], FIX["0/out0"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[2], FIX["%d/out0" % i], rtol=1e-6)
    assert got[3].shape == (1, 1, 1, 3)
    np.testing.assert_allclose(got[4].ravel(), FIX["%d/in/input" % i].var(axis=(0, 1, 2)), rtol=1e-4)
    np.testing.assert_allclose(got[5], FIX["%d/out0" % t], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got[6], 1.0)
    assert set(np.unique(got[7])) == {0.0, 4.0} and 0.2 < (got[7] > 0).mean() < 0.3
    np.testing.assert_array_equal(got[8], got[4])
    with pytest.raises(ValueError, match="keep_prob or rate, not both"):
        tf.compat.v1.nn.dropout(ones, 0.5, rate=0.5)


def test_conv2d_transpose_batch_from_a_tensor():
    """output_shape's batch entry may be a tensor (tf.shape(x)[0] in a model_fn)."""
    i = _find("conv2d_transpose", output_shape=[2, 7, 7, 3], strides=2, padding="SAME")
    g = loom.Graph()
    x = g.placeholder(np.float32, [None, 4, 4, 4])
    w = g.constant(FIX["%d/in/filters" % i])
    y = tf.nn.conv2d_transpose(x, w, [tf.shape(x)[0], 7, 7, 3], strides=2, padding="SAME")
    assert y.shape == (None, 7, 7, 3)
    with loom.Session(g) as s:
        np.testing.assert_allclose(s.run(y, {x: FIX["%d/in/input" % i]}), FIX["%d/out0" % i], rtol=1e-4, atol=1e-4)


def test_hand_computed_values():
    g = loom.Graph()
    x = g.constant(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1))
    # a 2x2 all-ones filter, VALID, stride 2: window sums
    y = tf.nn.conv2d(x, g.constant(np.ones((2, 2, 1, 1), np.float32)), 2, "VALID")
    mp = tf.nn.max_pool2d(x, 3, 2, "SAME")  # out 2x2, windows rows/cols {0,1,2}, {2,3}: pad 1 after
    ap = tf.nn.avg_pool2d(x, 3, 2, "SAME")  # divided by the valid elements of each window
    m, v = tf.nn.moments(g.constant(np.array([[1., 2., 3., 6.]], np.float32)), axes=[1])
    bn = tf.nn.batch_normalization(g.constant(np.array([3.], np.float32)), 1.0, 4.0, 0.5, 2.0, 0.0)
    with loom.Session(g) as s:
        r = s.run([y, mp, ap, m, v, bn])
    np.testing.assert_allclose(r[0].ravel(), [0 + 1 + 4 + 5, 2 + 3 + 6 + 7, 8 + 9 + 12 + 13, 10 + 11 + 14 + 15])
    np.testing.assert_allclose(r[1].ravel(), [10, 11, 14, 15])
    np.testing.assert_allclose(r[2].ravel(), [5, 6.5, 11, 12.5])
    np.testing.assert_allclose(r[3], [3.0])
    np.testing.assert_allclose(r[4], [3.5])  # ((-2)^2 + 1 + 0 + 9) / 4
    np.testing.assert_allclose(r[5], [(3 - 1) / 2 * 2 + 0.5])


@pytest.mark.parametrize("call, exc, words", [
    (lambda g, x, w: tf.nn.conv2d(x, g.constant(np.ones((3, 3, 2, 4), np.float32)), 1, "SAME"),
     loom.LoomError, ["tf.nn.conv2d", "Conv2D", "in_channels 2", "[2,7,7,3]", "[3,3,2,4]"]),
    (lambda g, x, w: tf.nn.conv2d(g.constant(np.ones((7, 7, 3), np.float32)), w, 1, "SAME"),
     loom.LoomError, ["tf.nn.conv2d", "rank 4", "[7,7,3]"]),
    (lambda g, x, w: tf.nn.max_pool2d(g.constant(np.ones((7, 3), np.float32)), 2, 2, "SAME"),
     loom.LoomError, ["tf.nn.max_pool2d", "MaxPool", "rank 4", "[7,3]"]),
    (lambda g, x, w: tf.nn.conv2d(x, w, 1, "SAME", data_format="NCHW"),
     NotImplementedError, ["tf.nn.conv2d", "NCHW"]),
    (lambda g, x, w: tf.nn.avg_pool2d(x, 2, 2, "VALID", data_format="NCHW"),
     NotImplementedError, ["tf.nn.avg_pool2d", "NCHW"]),
    (lambda g, x, w: tf.nn.max_pool2d(x, 2, 1, [[0, 0], [1, 1], [1, 1], [0, 0]]),
     NotImplementedError, ["tf.nn.max_pool2d", "explicit padding"]),
    (lambda g, x, w: tf.nn.conv2d(x, w, 1, [[1, 1], [1, 1], [1, 1], [0, 0]]),
     ValueError, ["tf.nn.conv2d", "explicit padding", "batch and depth"]),
    (lambda g, x, w: tf.nn.conv2d(x, w, 1, [[1, 1], [1, 1]]), ValueError, ["tf.nn.conv2d", "4 [before, after]"]),
    (lambda g, x, w: tf.nn.conv2d(x, w, 1, "same"), ValueError, ["tf.nn.conv2d", "'same'", "SAME"]),
    (lambda g, x, w: tf.nn.conv2d(x, w, [1, 1, 1], "SAME"), ValueError, ["tf.nn.conv2d", "strides", "1, 2 or 4"]),
    (lambda g, x, w: tf.nn.max_pool2d(x, [2, 2, 2, 2], 1, "SAME"), ValueError, ["tf.nn.max_pool2d", "ksize"]),
    (lambda g, x, w: tf.nn.conv2d_transpose(x, w, [2, 7, 7], 1, "SAME"), ValueError,
     ["tf.nn.conv2d_transpose", "output_shape"]),
    (lambda g, x, w: tf.nn.conv2d_transpose(g.constant(np.ones((2, 7, 7, 5), np.float32)), w, [2, 7, 7, 3], 1,
                                            "SAME"),
     loom.LoomError, ["tf.nn.conv2d_transpose", "[2,7,7,5]", "[3,3,3,4]"]),
])
def test_errors_name_the_op_and_shapes(call, exc, words):
    g = loom.Graph()
    x, w = g.constant(FIX["0/in/input"]), g.constant(FIX["0/in/filters"])
    with pytest.raises(exc) as e:
        call(g, x, w)
    for word in words:
        assert word in str(e.value), (word, str(e.value))


def _read_idx(path, count):
    with gzip.open(path, "rb") as f:
        head = f.read(4)
        dims = [int.from_bytes(f.read(4), "big") for _ in range(head[3])]
        dims[0] = min(dims[0], count)
        return np.frombuffer(f.read(int(np.prod(dims))), np.uint8).reshape(dims)


def _weights(style):
    """The two spellings of the tutorial's weight_variable / bias_variable."""
    v1 = tf.compat.v1
    if style == "get_variable":
        return (lambda name, shape: v1.get_variable(name, shape,
                                                    initializer=v1.truncated_normal_initializer(stddev=0.1)),
                lambda name, shape: v1.get_variable(name, shape, initializer=v1.constant_initializer(0.1)))
    return (lambda name, shape: tf.Variable(tf.random.truncated_normal(shape, stddev=0.1)),
            lambda name, shape: tf.Variable(tf.constant(0.1, shape=shape)))


@pytest.mark.skipif(not os.path.exists(FMNIST), reason="no Fashion-MNIST at " + FMNIST)
@pytest.mark.parametrize("style", ["get_variable", "Variable"])
def test_deep_mnist_model_fn_trains_on_fashion_mnist(tmp_path, style):
    """TF 1's "Deep MNIST" idiom in an Estimator model_fn: filters from
    get_variable with truncated_normal_initializer (or tf.Variable of
    tf.random.truncated_normal), tf.nn.conv2d + bias, relu, max_pool2d,
    AdamOptimizer().minimize; the loss on the training images falls."""
    x = _read_idx(os.path.join(FMNIST, "train-images-idx3-ubyte.gz"), 384).astype(np.float32) / 255.0
    y = _read_idx(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz"), 384).astype(np.int32)
    v1 = tf.compat.v1
    seen = {}
    weight, bias = _weights(style)

    def model_fn(features, labels, mode):
        x_image = tf.reshape(features["x"], [-1, 28, 28, 1])
        h1 = tf.nn.relu(tf.nn.conv2d(x_image, weight("W_conv1", [5, 5, 1, 8]), strides=[1, 1, 1, 1],
                                     padding="SAME") + bias("b_conv1", [8]))
        p1 = tf.nn.max_pool2d(h1, ksize=2, strides=2, padding="SAME")
        h2 = tf.nn.relu(tf.nn.conv2d(p1, weight("W_conv2", [5, 5, 8, 16]), strides=1, padding="SAME")
                        + bias("b_conv2", [16]))
        p2 = tf.nn.max_pool(h2, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
        seen.update(h1=h1.shape, p1=p1.shape, p2=p2.shape)
        flat = tf.reshape(p2, [-1, 7 * 7 * 16])
        logits = tf.matmul(flat, weight("W_fc", [7 * 7 * 16, 10])) + bias("b_fc", [10])
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == tf.estimator.ModeKeys.TRAIN:
            op = v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=v1.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op)
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": v1.metrics.accuracy(labels, tf.argmax(logits, 1))})

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), config=tf.estimator.RunConfig(tf_random_seed=1))

    def train_input():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(64)

    def eval_input():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(384)

    est.train(train_input, steps=1)
    first = est.evaluate(eval_input)
    est.train(train_input, steps=30)
    after = est.evaluate(eval_input)
    assert seen == {"h1": (None, 28, 28, 8), "p1": (None, 14, 14, 8), "p2": (None, 7, 7, 16)}
    names = ["W_conv1", "b_conv1", "W_conv2", "b_conv2", "W_fc", "b_fc"] if style == "get_variable" else \
        ["Variable"] + ["Variable_%d" % i for i in range(1, 6)]
    assert est.get_variable_value(names[2]).shape == (5, 5, 8, 16)
    w1 = est.get_variable_value(names[0])
    assert np.abs(w1).max() <= 0.2 + 0.031  # truncated at two stddevs, then 31 Adam steps of at most 1e-3
    assert 0.05 < w1.std() < 0.1  # a truncated normal of stddev 0.1 has stddev 0.088
    assert after["global_step"] == 31
    assert after["loss"] < first["loss"] - 0.5, (first, after)
    assert after["accuracy"] > 0.45, after  # 0.11 after one step


def test_variable_and_random_tensors_in_a_model_fn(tmp_path):
    """tf.Variable of tf.random.uniform / normal / truncated_normal, of an array
    and of a callable: the values as drawn (bounds and moments), TF's names,
    the same draws under the same RunConfig seed."""
    def model_fn(features, labels, mode):
        tf.Variable(tf.random.uniform([4000], 2, 3, seed=3), trainable=False, name="u")
        tf.Variable(tf.random.normal([4000], 1.0, 2.0), trainable=False)
        tf.Variable(tf.compat.v1.truncated_normal([4000], stddev=0.5), trainable=False)
        tf.Variable(lambda: [0, 1, 2], trainable=False, name="c")  # Python ints: int32, as TF
        tf.Variable(tf.constant(0.5, shape=[2, 2]), dtype=tf.float64, trainable=False, name="d")
        w = tf.compat.v1.get_variable("w", [1], initializer=tf.compat.v1.ones_initializer())
        loss = tf.reduce_sum(w * w) + 0 * tf.reduce_sum(features["x"])
        op = tf.compat.v1.train.GradientDescentOptimizer(0.25).minimize(loss, tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": np.zeros((4, 1), np.float32)}, np.zeros(4))).batch(4)

    values = []
    for run in range(2):
        est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / str(run)),
                                     config=tf.estimator.RunConfig(tf_random_seed=5))
        est.train(input_fn, steps=1)
        values.append({k: est.get_variable_value(k) for k in ("u", "Variable", "Variable_1", "c", "d", "w")})
    v = values[0]
    assert v["u"].dtype == np.float32 and 2 <= v["u"].min() and v["u"].max() < 3
    assert abs(v["u"].mean() - 2.5) < 0.02
    assert abs(v["Variable"].mean() - 1.0) < 0.1 and abs(v["Variable"].std() - 2.0) < 0.1
    assert np.abs(v["Variable_1"]).max() < 1.0 and abs(v["Variable_1"].std() - 0.44) < 0.03
    np.testing.assert_array_equal(v["c"], [0, 1, 2])
    assert v["c"].dtype == np.int32
    assert v["d"].dtype == np.float64 and v["d"].tolist() == [[0.5, 0.5], [0.5, 0.5]]
    np.testing.assert_allclose(v["w"], [0.5])  # 1 - 0.25 * 2
    for k in v:
        np.testing.assert_array_equal(values[1][k], v[k])


def test_gradients_none_for_unconnected_and_grad_ys():
    g = loom.Graph()
    x = g.constant(np.array([1.0, -2.0, 3.0], np.float32))
    z = g.constant(np.array([5.0], np.float32))
    y = x * x
    dx, dz = tf.gradients(y, [x, z])
    assert dz is None
    (wx,) = tf.gradients([y], [x], grad_ys=[np.array([1.0, 0.5, -1.0], np.float32)])
    with loom.Session(g) as s:
        got = s.run([dx, wx])
    np.testing.assert_allclose(got[0], [2.0, -4.0, 6.0])
    np.testing.assert_allclose(got[1], [2.0, -2.0, -6.0])
    with pytest.raises(ValueError, match="2 grad_ys for 1 ys"):
        tf.gradients(y, x, grad_ys=[x, x])
