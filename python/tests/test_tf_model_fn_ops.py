"""loom.tf's model_fn ops against TF 2.15 (python/tests/fixtures/tf_model_fn_ops.npz,
written by scripts/gen_tf_model_fn_ops_fixtures.py): tf.math.top_k / tf.nn.top_k
(ties: lower index first), tf.math.in_top_k / tf.compat.v1.nn.in_top_k (ties
at the k-th value count as in, non-finite rows are False),
tf.nn.zero_fraction, tf.nn.log_poisson_loss,
tf.nn.weighted_cross_entropy_with_logits, tf.pow, tf.slice, tf.split,
tf.unstack, tf.pad, tf.math.reduce_variance / reduce_std / divide_no_nan /
softplus, tf.reduce_any / reduce_all, tf.clip_by_norm: values and, through tf.gradients,
the gradients TF's GradientTape gives. And tf.compat.v1.trainable_variables /
global_variables / get_collection in an Estimator's model_fn, with an L2
regularization term whose loss is checked against the variables' values;
tf.compat.v1.summary.image written by the Estimator: tags, sizes and PNG
pixels as TF 2.15's ImageSummary."""
import json
import os

import numpy as np
import pytest

import loom
import loom.tf as tf

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = np.load(os.path.join(HERE, "fixtures", "tf_model_fn_ops.npz"))
CASES = json.loads(str(FIX["cases"]))


def _fn(path):
    f = tf
    for p in path.split("."):
        f = getattr(f, p)
    return f


def _case_id(i):
    c = CASES[i]
    return "%d-%s-%s" % (i, c["fn"], "-".join("%s=%s" % kv for kv in c["kwargs"].items()))


@pytest.mark.parametrize("i", range(len(CASES)), ids=_case_id)
def test_values_and_gradients_match_tf(i):
    case = CASES[i]
    g = loom.Graph()
    ins = {k: g.constant(FIX["%d/in/%s" % (i, k)]) for k in case["tensors"]}
    kw = dict(case["kwargs"])
    if "index_type" in kw:
        kw["index_type"] = getattr(tf, kw["index_type"])
    outs = _fn(case["fn"])(**ins, **kw)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    assert len(outs) == case["outputs"]
    grads = []
    if case["diff"]:
        loss = None
        for k, o in enumerate(outs):
            if "%d/w%d" % (i, k) in FIX:
                term = tf.reduce_sum(o * g.constant(FIX["%d/w%d" % (i, k)]))
                loss = term if loss is None else loss + term
        grads = tf.gradients(loss, [ins[k] for k in case["diff"]])
    with loom.Session(g) as s:
        got = s.run(outs + grads)
    for k in range(len(outs)):
        want = FIX["%d/out%d" % (i, k)]
        assert got[k].shape == want.shape, "output %d" % k
        assert got[k].dtype == want.dtype, "output %d" % k
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-5, err_msg="output %d" % k)
        else:
            np.testing.assert_array_equal(got[k], want, err_msg="output %d" % k)
    for name, gv in zip(case["diff"], got[len(outs):]):
        np.testing.assert_allclose(gv, FIX["%d/grad/%s" % (i, name)], rtol=1e-5, atol=1e-5,
                                   err_msg="gradient of %s" % name)


def test_top_k_ties_and_named_fields():
    """Equal values come out lower index first; the result has TF's .values / .indices."""
    g = loom.Graph()
    x = g.constant(np.array([[2, 7, 7, 1, 7], [0, 0, 0, 0, 0]], np.float32))
    r = tf.math.top_k(x, k=4)
    with loom.Session(g) as s:
        v, ix = s.run([r.values, r.indices])
    assert ix.tolist() == [[1, 2, 4, 0], [0, 1, 2, 3]]
    assert v.tolist() == [[7, 7, 7, 2], [0, 0, 0, 0]]
    assert ix.dtype == np.int32


def test_in_top_k_ties_nonfinite_and_range():
    """k=1 with a tie for the largest value: every tied target is in; a NaN or
    inf anywhere in the row makes it False; a target outside [0, classes) is False."""
    g = loom.Graph()
    p = g.constant(np.array([[1, 9, 9, 0], [1, 9, 9, 0], [1, 2, np.nan, 3], [np.inf, 2, 2, 2],
                             [1, 2, 3, 4], [1, 2, 3, 4]], np.float32))
    t = g.constant(np.array([1, 2, 3, 1, 4, -1], np.int32))
    a = tf.math.in_top_k(t, p, 1)
    b = tf.compat.v1.nn.in_top_k(p, t, 4)
    with loom.Session(g) as s:
        got_a, got_b = s.run([a, b])
    assert got_a.tolist() == [True, True, False, False, False, False]
    assert got_b.tolist() == [True, True, False, False, False, False]


def test_argument_errors():
    g = loom.Graph()
    x = g.constant(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="k=4"):
        tf.math.top_k(x, k=4)
    with pytest.raises(ValueError, match="non-negative"):
        tf.nn.top_k(x, k=-1)
    with pytest.raises(TypeError, match="index_type"):
        tf.math.top_k(x, index_type=tf.float32)
    with pytest.raises(TypeError, match="targets must be int32 or int64"):
        tf.math.in_top_k(g.constant(np.zeros(2, np.float32)), x, 1)
    with pytest.raises(ValueError, match="predictions must be 2-D"):
        tf.math.in_top_k(g.constant(np.zeros(2, np.int32)), g.constant(np.zeros(3, np.float32)), 1)
    with pytest.raises(ValueError, match="same shape"):
        tf.nn.weighted_cross_entropy_with_logits(x, g.constant(np.zeros((3, 2), np.float32)), 2.0)
    with pytest.raises(ValueError, match="non-empty list"):
        tf.add_n([])
    with pytest.raises(NotImplementedError, match="trainable_variables outside a model_fn"):
        tf.compat.v1.trainable_variables()


def test_add_n():
    g = loom.Graph()
    a, b = g.constant(np.array([1, 2], np.float32)), g.constant(np.array([10, 20], np.float32))
    with loom.Session(g) as s:
        got = s.run([tf.add_n([a, b, a]), tf.math.add_n([b])])
    assert got[0].tolist() == [12, 24] and got[1].tolist() == [10, 20]


X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 0.0], [0.0, 3.0, 1.0]], np.float32)
Y = np.array([[1.0], [-0.5], [2.0], [0.25]], np.float32)
L2 = 0.05


def _l2_model_fn(seen, learning_rate):
    v1 = tf.compat.v1

    def model_fn(features, labels, mode):
        h = v1.layers.dense(features["x"], 4, activation=tf.nn.tanh)
        out = v1.layers.dense(h, 1)
        mse = v1.losses.mean_squared_error(labels, out)
        tv = v1.trainable_variables()
        seen["trainable"] = [v.name for v in tv]
        seen["global"] = [v.name for v in v1.global_variables()]
        seen["collection"] = [v.name for v in v1.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES)]
        seen["scoped"] = [v.name for v in v1.trainable_variables(scope="dense_1")]
        seen["reg_losses"] = v1.losses.get_regularization_losses()
        seen["losses"] = [x.op for x in v1.get_collection(v1.GraphKeys.LOSSES)]
        l2 = tf.add_n([tf.nn.l2_loss(v) for v in tv if "bias" not in v.name])
        loss = mse + L2 * l2 + v1.losses.get_regularization_loss()
        op = v1.train.GradientDescentOptimizer(learning_rate).minimize(loss, global_step=v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op)
    return model_fn


def _hand_loss(est):
    w0, b0 = est.get_variable_value("dense/kernel"), est.get_variable_value("dense/bias")
    w1, b1 = est.get_variable_value("dense_1/kernel"), est.get_variable_value("dense_1/bias")
    out = np.tanh(X.astype(np.float64) @ w0 + b0) @ w1 + b1
    mse = np.mean((out - Y) ** 2)
    return mse + L2 * (np.sum(w0.astype(np.float64) ** 2) + np.sum(w1.astype(np.float64) ** 2)) / 2, mse


def _input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4)


def test_trainable_variables_l2_regularization_in_an_estimator(tmp_path):
    seen = {}
    est = tf.estimator.Estimator(_l2_model_fn(seen, 0.0), model_dir=str(tmp_path / "zero"),
                                 config=tf.estimator.RunConfig(tf_random_seed=3))
    est.train(_input_fn, steps=1)  # learning rate 0: the variables keep their initial values
    assert seen["trainable"] == ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0"]
    assert seen["global"] == ["global_step:0"] + seen["trainable"]
    assert seen["collection"] == seen["trainable"]
    assert seen["scoped"] == ["dense_1/kernel:0", "dense_1/bias:0"]
    assert seen["reg_losses"] == []
    assert len(seen["losses"]) == 1  # mean_squared_error's loss
    step0 = est.evaluate(_input_fn, steps=1)["loss"]
    want, mse = _hand_loss(est)
    assert want - mse > 1e-3  # the L2 term is a visible part of the loss
    np.testing.assert_allclose(step0, want, rtol=1e-5)

    est = tf.estimator.Estimator(_l2_model_fn(seen, 0.1), model_dir=str(tmp_path / "train"),
                                 config=tf.estimator.RunConfig(tf_random_seed=3))
    est.train(_input_fn, steps=1)
    first = est.evaluate(_input_fn, steps=1)["loss"]
    est.train(_input_fn, steps=60)
    after = est.evaluate(_input_fn, steps=1)["loss"]
    assert after < first
    np.testing.assert_allclose(after, _hand_loss(est)[0], rtol=1e-5)


# ---------------------------------------------------------------- tf.compat.v1.summary.image
IMAGE_CASES = json.loads(str(FIX["image_cases"]))


def _fields(buf):
    """A protobuf message's fields: {number: [value, ...]} (varints as ints, length-delimited as bytes)."""
    out, i = {}, 0

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v
    while i < len(buf):
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            val = varint()
        elif wt == 2:
            n = varint()
            val, i = buf[i:i + n], i + n
        elif wt == 5:
            val, i = buf[i:i + 4], i + 4
        elif wt == 1:
            val, i = buf[i:i + 8], i + 8
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(num, []).append(val)
    return out


def _read_images(model_dir):
    """{tag: (height, width, colorspace, png bytes)} of the image summary values in model_dir's event files."""
    import glob
    import struct
    got = {}
    for path in glob.glob(os.path.join(model_dir, "events.out.tfevents.*")):
        data = open(path, "rb").read()
        i = 0
        while i < len(data):
            n = struct.unpack("<Q", data[i:i + 8])[0]
            rec = data[i + 12:i + 12 + n]
            i += 16 + n
            for summary in _fields(rec).get(5, []):  # Event.summary
                for value in _fields(summary).get(1, []):  # Summary.value
                    v = _fields(value)
                    if 4 in v:  # Value.image
                        im = _fields(v[4][0])
                        got[v[1][0].decode()] = (im[1][0], im[2][0], im[3][0], im[4][0])
    return got


def _decode_png(png):
    """8-bit gray / RGB / RGBA PNG -> uint8 [h, w, channels] (every filter type)."""
    import struct
    import zlib
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    i, idat = 8, b""
    while i < len(png):
        n = struct.unpack(">I", png[i:i + 4])[0]
        kind, body = png[i + 4:i + 8], png[i + 8:i + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        i += 12 + n
    assert depth == 8
    ch = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    raw, stride = zlib.decompress(idat), w * ch
    out, prev = np.zeros((h, stride), np.int32), np.zeros(stride, np.int32)
    for y in range(h):
        f = raw[y * (stride + 1)]
        row = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, np.int32)
        for x in range(stride):
            a = cur[x - ch] if x >= ch else 0
            b = prev[x]
            c = prev[x - ch] if x >= ch else 0
            p = a + b - c
            pred = [0, a, b, (a + b) // 2,
                    a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c)
                    else c][f]
            cur[x] = (row[x] + pred) & 0xFF
        out[y], prev = cur, cur
    return out.reshape(h, w, ch).astype(np.uint8)


def test_summary_image_written_as_tf(tmp_path):
    """Each case's image summary, written by the estimator, holds TF's tags, sizes and pixels."""
    v1 = tf.compat.v1

    def model_fn(features, labels, mode):
        for i, c in enumerate(IMAGE_CASES):
            a = FIX["image/%d/in" % i]
            x = tf.constant(a, dtype=tf.as_dtype(a.dtype))
            assert v1.summary.image(c["name"], x, max_outputs=c["max_outputs"]).shape == x.shape
        w = v1.get_variable("w", [1])
        loss = tf.reduce_sum(w * w) + 0 * tf.reduce_sum(features["x"])
        op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op)

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path),
                                 config=tf.estimator.RunConfig(save_summary_steps=1))
    est.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": np.zeros((2, 1), np.float32)},
                                                          np.zeros(2))).batch(2), steps=1)
    got = _read_images(str(tmp_path))
    want_tags = [t for c in IMAGE_CASES for t in c["tags"]]
    assert sorted(got) == sorted(want_tags)
    for i, c in enumerate(IMAGE_CASES):
        for j, tag in enumerate(c["tags"]):
            h, w, cs, png = got[tag]
            assert [h, w, cs] == c["hwc"][j], tag
            np.testing.assert_array_equal(_decode_png(png), FIX["image/%d/px%d" % (i, j)], err_msg=tag)


def test_summary_image_argument_errors():
    g = loom.Graph()
    with pytest.raises(loom.LoomError, match="summary image bad: the tensor must be 4-D"):
        tf.compat.v1.summary.image("bad", g.constant(np.zeros((2, 3, 3, 2), np.float32)))
    g = loom.Graph()
    with pytest.raises(loom.LoomError, match="uint8, float32 or float64"):
        tf.compat.v1.summary.image("bad", g.constant(np.zeros((2, 3, 3, 1), np.int32)))
    with pytest.raises(ValueError, match="max_outputs must be an int >= 1"):
        tf.compat.v1.summary.image("bad", loom.Graph().constant(np.zeros((1, 2, 2, 1), np.float32)), max_outputs=0)
